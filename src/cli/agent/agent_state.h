/* SPDX-License-Identifier: MIT */
/* agent_state.h - what the agent's room shows the rest of the command: the running daemon's state as its
 * state file (--state-file) says it, and the one way to read it (agent_state.c). `hugify top` shows the
 * daemon's last action beside each process through it; nothing outside src/cli/agent/ includes agent.h. */
#ifndef HUGIFY_CLI_AGENT_STATE_H
#define HUGIFY_CLI_AGENT_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AGENT_STATE_FILE_DEFAULT "/run/hugify/agent.json" /* root's; the systemd unit's RuntimeDirectory */

/* What the running daemon's state file (--state-file) says of one process: its ledger at its last pass. */
struct daemon_process {
  pid_t pid;
  uint64_t start_time;             /* 0: not in the file (written before it had one) */
  char comm[16];
  double early_share, late_share;  /* still huge 1 and AGENT_LATE_PASSES passes after a collapse; -1 none */
  uint64_t collapsed, recollapsed, undone, kernel_collapsed, bloat;
  bool backed_off;
  uint64_t backoff_passes_left;
  char allocator[16];
  char advice[512];                /* "" : none */
  char last_action[224];
  char heat[16];                   /* the signal its last plan used: "damon", "soft-dirty", "none" */
  double last_pause;               /* seconds, -1 unknown */
  double last_action_time;         /* Unix time, 0 unknown */
};

/* The daemon's state as --status read it (agent_state.c). */
struct daemon_state {
  bool tried;                      /* a state file was named (or defaulted) */
  bool fresh;                      /* read, and written within AGENT_STATE_FRESH_PASSES intervals */
  bool resuming;                   /* the daemon's start: its processes are read when the writer is gone */
  bool writer_running;             /* the pid that wrote it runs (and is not this process) */
  char note[320];                  /* why it is not used: absent, stale, the daemon gone */
  double age_seconds;              /* -1 unknown */
  pid_t pid;                       /* the daemon */
  uint64_t passes, collapsed, recollapsed, churn_backoffs, bloat, budget_stops, pass_ceiling_stops;
  uint64_t kernel_collapsed, kernel_collapse_allocs; /* the kernel's own collapses beside the daemon's */
  double interval;
  char heat[16];                   /* its access signal ("damon", "soft-dirty", "none"; "" unknown) */
  char heat_reason[160];
  uint64_t heat_targets, heat_regions, heat_reads;
  double heat_kdamond_cpu;         /* -1 unknown */
  bool has_pauses;                 /* the harm totals were in the file */
  uint64_t pause_count;
  double pause_longest, pause_p99, longest_call;
  size_t process_count;
  struct daemon_process *processes; /* malloc'd */
};
/* A state file older than this many of its intervals (plus a second) is stale: the daemon stopped or hangs. */
#define AGENT_STATE_FRESH_PASSES 3

/* Read the daemon's state file at PATH into D (INTERVAL: the daemon's interval when the file names none;
 * 0 unknown). 0 (also when it is absent or stale: D->note says so), or an exit code after the message:
 * EXIT_PRIVILEGE unreadable, EXIT_USAGE not the agent's state. */
int agent_read_state(struct daemon_state *d, const char *path, double interval);
/* The daemon's entry of a process (pid and start time; pid and comm when a start time is 0), or NULL. */
const struct daemon_process *agent_daemon_process(const struct daemon_state *d, pid_t pid, uint64_t start_time,
                                                  const char *comm);

#endif
