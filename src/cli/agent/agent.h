/* SPDX-License-Identifier: MIT */
/* agent.h - what the files of `hugify agent` share: its settings, its per-process state, and the one
 * struct agent of the daemon. agent.c: the command (privileges, --once/--status, the daemon's loop and
 * signals); agent_config.c: the option table and the configuration file; agent_pass.c: the pass over /proc
 * and the work on one process; agent_metrics.c: Prometheus metrics (file and HTTP); agent_output.c: the
 * table and JSON of --once and --status; agent_state.c: the daemon's state file (--state-file), which
 * --status reads, and `hugify top` through agent_state.h (the one header of the agent that files outside
 * src/cli/agent/ include); agent_table.c: the process table and the small helpers the others share. The decisions
 * are the library's (planner.h: which process is planned, which windows in which order; agent_policy.h:
 * selection, budgets, the ledger); agent_pass.c gathers the signals. The files call each other one way:
 * agent.c above the rest, agent_table.c below them; agent_state.c and agent_output.c call each other (the
 * state file is the agent's JSON, and --status prints what the state file says). */
#ifndef HUGIFY_CLI_AGENT_H
#define HUGIFY_CLI_AGENT_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "agent_policy.h"
#include "agent_state.h"
#include "cgroup.h"
#include "collapse.h"
#include "heat.h"
#include "cli.h"
#include "hugify.h"
#include "inspect.h"
#include "measure.h"

#define COMMAND "agent"
#define BACKOFF_MAX_SECONDS 3600.0
#define AGENT_THP_DISABLED_SHOWN 16
#define AGENT_DAMOS_SCHEMES 64 /* DAMON schemes read a pass: the first ones, in kdamond order */
#define CAP_SYS_PTRACE_BIT 19
#define CAP_SYS_NICE_BIT 23

/* The settings: every field an option of the table below sets, on the command line (--name VALUE) or in the
 * configuration file (name = VALUE): one table, one store, so a key and its option cannot drift apart. */
struct agent_config {
  struct agent_selectors selectors;
  double interval;
  double cpu_budget_percent, min_present_percent; /* as given */
  double cpu_budget;   /* fraction of one core */
  double min_present;  /* fraction */
  uint64_t free_floor;
  double max_pressure; /* percent */
  char metrics_file[PATH_MAX];
  char state_file[PATH_MAX];   /* "" : none */
  char listen[128];
  uint64_t metrics_cgroups; /* cgroups with series of their own; the rest are summed as cgroup="other" */
  int heat;                 /* --heat: enum heat_mode, which access signal orders the windows (heat.h) */
  bool once, dry_run;
  bool first_touch;         /* --first-touch: a DAMOS hugepage scheme of the agent's own marks hot regions */
  /* the command line only (never in the file): */
  const char *config_path;
  bool status;
  struct json_output json;
  char error[512];     /* the first problem found */
};

/* What the command line said about this run, kept for the reloads (which read the file, then argv, again). */
struct command_line {
  const char *config_path;
  bool status;
  struct json_output json;
  int argc;
  char **argv;
};

struct failure_count {
  char reason[16]; /* "EAGAIN", ... */
  uint64_t windows;
};
#define FAILURE_KINDS 8

struct process_state {
  pid_t pid;
  uint64_t start_time;             /* /proc/PID/stat's 22nd field: with the pid, the process (never a reused pid) */
  char comm[16];
  char cgroup[256];                /* in the memory controller's hierarchy, "" unknown (fleet_cgroup_of) */
  bool seen;                       /* in the current pass */
  bool selected;
  struct hugify_usage classes[HUGIFY_CLASS_COUNT];
  struct hugify_usage total;
  uint64_t collapsible;
  uint64_t collapsed_bytes;        /* total made huge by the agent */
  uint64_t attempted_bytes;
  struct failure_count failures[FAILURE_KINDS];
  struct agent_backoff backoff;
  uint64_t idle_signature;         /* resident+collapsible when a plan found nothing to do */
  struct agent_ledger ledger;      /* what the agent collapsed here, and whether it lasts (malloc'd) */
  uint64_t bloat_bytes;            /* zero-filled by the agent's collapses (collapse_window_bloat) */
  int allocator;                   /* enum allocator_kind, from the last plan */
  bool measured;                   /* classes/total hold an inspect (and the kernel's answers to collapses since) */
  unsigned unmeasured_passes;      /* passes since that inspect */
  uint64_t measurements;           /* inspects of it, in all */
  uint64_t look_faults, look_rss;  /* /proc/PID/stat's faults and VmRSS at the planner's last look (an
                                      inspect or a plan): whether it changed since (planner_memory_changed) */
  /* its sweep (docs/agent.md, "What a pass costs") */
  struct collapse_layout layout;   /* its mappings, kept across plans while /proc/PID/maps is the same */
  uint64_t cursor;                 /* where its sweep goes on (0: none under way) */
  uint64_t sweep_planned;          /* bytes the sweep under way planned so far */
  uint64_t walked_bytes;           /* bytes of windows its plans walked, in all */
  uint64_t plans;                  /* its plans, in all */
  double collapse_cpu;             /* CPU its collapses took (report cpu_seconds), and their calls: the CPU */
  uint64_t collapse_calls;         /*   of one window's collapse, for the walk's limit */
  char last_action[224];
  char order[48];                  /* how its last plan ranked windows (planner_order_name) */
  double last_pause;               /* seconds: the longest pause of its last collapse, -1 none yet */
  double last_action_time;         /* Unix time of last_action's collapse, 0 none */
  enum heat_signal heat_signal;    /* the access signal its last plan used (HEAT_NONE: densest first) */
  unsigned heat_waits;             /* passes it waited for a first heat snapshot */
  bool left_to_damos;              /* another owner's DAMOS collapse/hugepage scheme targets it: the kernel's,
                                      measured and never planned (agent_damos_scheme_of) */
  struct probe_damon_scheme damos; /* that scheme, as the pass read it */
};


struct MHD_Daemon;

struct agent {
  struct agent_config config;
  struct command_line cl;
  struct process_state *processes;
  size_t process_count, process_cap;
  size_t process_touched;          /* the most entries in use since the table's tail was last given back */
  char *read_buffer;               /* the pass's /proc reads, one buffer kept across them (agent_read_reused) */
  size_t read_cap;
  struct agent_budget budget;
  double cpu_mark;                 /* CLOCK_PROCESS_CPUTIME_ID at the last charge */
  double pass_cpu_start;           /* CLOCK_PROCESS_CPUTIME_ID at the start of the pass */
  double pass_ceiling;             /* CPU seconds one pass may use (agent_pass_ceiling), 0 none (--once) */
  enum agent_work work;            /* the last word of budget_keep_going: why the pass's work stopped */
  uint64_t passes, collapsed_bytes, budget_stops, memory_gate_closed_passes;
  uint64_t pass_ceiling_stops;     /* collapses cut short by the pass's CPU ceiling (not the budget) */
  double collapse_cpu_seconds;     /* of its CPU, the collapses' (the calls, their warm pages): the rest
                                      is measuring (walks, smaps, /proc) and its own upkeep */
  uint64_t walked_bytes, measurements, smaps_reads; /* what its looks read, in all: bytes of windows walked,
                                      inspects, smaps reads for plans */
  uint64_t recollapsed_bytes, bloat_bytes, churn_backoffs;
  /* the kernel's own collapses beside the agent's: windows in the selected processes that became huge
   * without the agent (the ledgers' kernel_bytes), and /proc/vmstat thp_collapse_alloc since the agent
   * started (host-wide: khugepaged and MADV_COLLAPSE by anyone, the agent's own calls included) */
  uint64_t kernel_bytes, kernel_collapse_allocs, vmstat_collapse_alloc;
  bool vmstat_read;                /* vmstat_collapse_alloc holds a first reading */
  /* DAMON's schemes as the pass read them (probe_damon_schemes), and the selected processes another owner's
   * collapse or hugepage scheme targets: left to the kernel, their huge bytes the kernel's and their
   * collapsible bytes cut as "damos" */
  struct probe_damon_scheme damos[AGENT_DAMOS_SCHEMES];
  size_t damos_count;
  uint64_t damos_processes, damos_huge_bytes, damos_cut_bytes;
  /* processes that match the selectors but disabled THP (prctl PR_SET_THP_DISABLE, e.g. systemd's
   * MemoryTHP=): not served, shown with that reason by --once and --status */
  struct thp_disabled_process { pid_t pid; char comm[16]; } thp_disabled[AGENT_THP_DISABLED_SHOWN];
  size_t thp_disabled_count;       /* all of them this pass (at most AGENT_THP_DISABLED_SHOWN listed) */
  struct agent_harm harm;          /* the pauses its collapses caused, the longest call */
  struct cgroup_memory_root memory_root; /* where the processes' cgroups and memory.stat are (first pass) */
  uint64_t retired_undone;         /* undone bytes of the processes that exited: the host counter never falls */
  struct failure_count retired_failures[FAILURE_KINDS];
  bool memory_open;
  char memory_reason[160];
  uint64_t available;
  struct psi_pressure pressure;
  double last_pass_seconds, last_pass_end;
  double longest_pass_cpu;         /* CPU seconds of its longest pass */
  bool stop_requested;
  bool state_write_failing, metrics_write_failing; /* said once per outage (a full disk) */
  sigset_t signals;
  /* metrics for HTTP */
  pthread_mutex_t metrics_lock;
  char *metrics;
  size_t metrics_length;
  struct MHD_Daemon *http;
  struct daemon_state daemon;      /* --status: the running daemon's, when its state file is fresh */
  struct heat_source heat;         /* the access signal (--heat); signal HEAT_NONE for --once and --status */
  char heat_error[256];            /* the last pass's heat problem, "" none */
};

/* ---- agent_table.c (the process table and the daemon's helpers; it calls no other file of the agent) ---- */
/* CPU time of the agent (user and system). */
double agent_own_cpu_seconds(void);
/* A /proc file's text (malloc'd), or NULL when it cannot be read (the process is gone). */
char *agent_read_text(const char *path);
/* A /proc file's text in the agent's one reused buffer (valid until its next read), or NULL when it cannot
 * be read: the walk reads thousands of files a pass and allocates nothing for them. */
const char *agent_read_reused(struct agent *a, const char *path);
/* /proc/PID/stat: the start time of pid (clock ticks after boot: with the pid, which process this is) and,
 * when faults is not NULL, its page faults (0 when unreadable). False when it is gone. */
bool agent_read_stat(struct agent *a, pid_t pid, uint64_t *start_time, uint64_t *faults);
/* What an entry holds apart from the table (its ledger, its layout), freed. */
void agent_free_process(struct process_state *p);
/* A file the daemon replaces every pass (state, metrics) was written (rc 0) or not (-errno, reason): a failure
 * is said once when it starts and once when writing works again, never every pass (a full disk). */
void agent_note_write(const char *what, int rc, const char *reason, bool *failing);
/* Add a process's failure counts, by reason, to totals. */
void agent_add_failures(struct failure_count *totals, const struct failure_count *from);
/* A new entry of the process table (pid, start time, comm; the rest zero), or NULL without memory. Processes
 * that exited leave the table before it grows. */
struct process_state *agent_add_process(struct agent *a, pid_t pid, uint64_t start_time, const char *comm);
/* The entry of the process (pid, start_time), added when new; a reused pid's old process retires first. */
struct process_state *agent_state_of(struct agent *a, pid_t pid, uint64_t start_time, const char *comm);
/* A process leaves the agent's table (it exited or is no longer selected): its counters stay in the host's. */
void agent_retire_process(struct agent *a, const struct process_state *p);
/* The end of a pass: the processes not seen in it leave the table (only_exited: only those that exited, for
 * a walk cut short by SIGTERM, so the rest keep their ledgers in the state file for the restart). */
void agent_retire_processes(struct agent *a, bool only_exited);
/* The table's whole pages past its entries in use back to the kernel (the agent's RSS follows the processes
 * it holds now). */
void agent_give_back_table_tail(struct agent *a);

/* ---- agent_config.c ---- */
/* The command line alone (which file, --status, --json): 0, or EXIT_USAGE after the message. */
int agent_parse_command_line(int argc, char **argv, struct command_line *cl);
/* The whole configuration: file, then command line. Returns 0, or EXIT_USAGE with the message printed
 * (print = false: only c->error, for a reload). */
int agent_load_config(struct agent_config *c, const struct command_line *cl, bool print);

/* ---- agent_pass.c ---- */
/* One pass over every process. collapse = false: observe only (--status). */
void agent_run_pass(struct agent *a, bool collapse);

/* ---- agent_metrics.c ---- */
/* Render the metrics; write the metrics file; hand them to the HTTP thread. */
void agent_publish_metrics(struct agent *a);
/* Serve /metrics on --listen (libmicrohttpd, loaded with dlopen here only); 0, or an exit code after the
 * message (3 when the library is missing). */
int agent_start_http(struct agent *a);
/* Stop serving (nothing when not serving). */
void agent_stop_http(struct agent *a);

/* ---- agent_state.c ---- */
/* The daemon: write its last pass's JSON object to --state-file (atomically; a failure is reported, once). */
void agent_write_state(struct agent *a);
/* (agent_read_state and agent_daemon_process, which top uses too: agent_state.h) */
/* The daemon's start: when its state file was left by a daemon that is gone (killed, crashed, restarted),
 * take over its passes and totals, and the figures of its processes that still run (same pid and start
 * time). Says what it resumed, or why not, on stderr; never fails (the file is replaced after a pass). */
void agent_resume_state(struct agent *a);

/* ---- agent_output.c ---- */
void agent_print_table(const struct agent *a, bool status);
void agent_print_json(const struct agent *a, FILE *out, const char *mode);

#endif
