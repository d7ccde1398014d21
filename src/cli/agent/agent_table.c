/* SPDX-License-Identifier: MIT */
/* agent_table.c - the agent's process table (an entry is added, a process retires from it: its counters
 * stay in the host's) and the daemon's small helpers every other file of the agent uses: its own CPU time,
 * a /proc file's text, and the note on a file it replaces every pass. It calls no other file of the
 * agent: they all call down to it (docs/design.md, "The layers"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "agent.h"
#include "array.h"
#include "collapse.h"
#include "os.h"
#include "procfs.h"

double agent_own_cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
         (double)u.ru_stime.tv_usec * 1e-6;
}

/* A /proc file's text (malloc'd), or NULL when it cannot be read (the process is gone). */
char *agent_read_text(const char *path) {
  char *text = NULL;
  return os_read_file(path, &text, NULL) == 0 ? text : NULL;
}

void agent_add_failures(struct failure_count *totals, const struct failure_count *from) {
  for (size_t k = 0; k < FAILURE_KINDS && from[k].reason[0]; k++)
    for (size_t r = 0; r < FAILURE_KINDS; r++) {
      if (totals[r].reason[0] && strcmp(totals[r].reason, from[k].reason) != 0) continue;
      snprintf(totals[r].reason, sizeof totals[r].reason, "%s", from[k].reason);
      totals[r].windows += from[k].windows;
      break;
    }
}


void agent_retire_process(struct agent *a, const struct process_state *p) {
  a->retired_undone += p->ledger.undone_bytes;
  agent_add_failures(a->retired_failures, p->failures);
}

void agent_note_write(const char *what, int rc, const char *reason, bool *failing) {
  if (rc != 0 && !*failing)
    fprintf(stderr, "hugify agent: %s: %s; the last whole file stays in place, and every pass tries again\n", what,
            reason);
  else if (rc == 0 && *failing)
    fprintf(stderr, "hugify agent: %s: written again\n", what);
  *failing = rc != 0;
}


/* A /proc file's text in the agent's one reused buffer (valid until its next read), or NULL when it cannot be
 * read: the walk reads thousands of files a pass and allocates nothing for them. */
const char *agent_read_reused(struct agent *a, const char *path) {
  return os_read_file_reusing(path, &a->read_buffer, &a->read_cap, NULL) == 0 ? a->read_buffer : NULL;
}

bool agent_read_stat(struct agent *a, pid_t pid, uint64_t *start_time, uint64_t *faults) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  const char *text = agent_read_reused(a, path);
  if (!parse_stat_start_time(text, start_time)) return false;
  if (faults && !parse_stat_faults(text, faults)) *faults = 0;
  return true;
}

void agent_free_process(struct process_state *p) {
  agent_ledger_free(&p->ledger);
  collapse_layout_free(&p->layout);
}

/* Forget the processes of the table `gone` says are gone: their counters stay in the host's. */
static void retire_processes(struct agent *a, bool (*gone)(struct agent *a, const struct process_state *p)) {
  size_t kept = 0;
  for (size_t i = 0; i < a->process_count; i++) {
    if (!gone(a, &a->processes[i])) a->processes[kept++] = a->processes[i];
    else agent_retire_process(a, &a->processes[i]), agent_free_process(&a->processes[i]);
  }
  a->process_count = kept;
}

/* At the end of a pass: a process not seen in it exited or is no longer selected. */
static bool not_seen(struct agent *a, const struct process_state *p) {
  (void)a;
  return !p->seen;
}

/* During a pass: a process not seen yet in it whose pid is gone, or is another process's now. */
static bool exited(struct agent *a, const struct process_state *p) {
  uint64_t start_time;
  return !p->seen && (!agent_read_stat(a, p->pid, &start_time, NULL) || start_time != p->start_time);
}

/* Entries the table reserves at once. Past the threshold of malloc's own mappings, only the entries touched
 * are resident, and give_back_table_tail drops the pages past the entries in use at the end of each pass:
 * the agent's RSS follows the processes it holds now, not the most it ever held, nor a doubling of them. */
#define PROCESS_TABLE_RESERVE 256

/* The table's whole pages past its last entry in use, up to the most entries in use since the last call,
 * back to the kernel (zero-filled if touched again: agent_add_process clears an entry anyway). Only pages
 * wholly inside the table's own allocation; nothing when no page was freed. */
void agent_give_back_table_tail(struct agent *a) {
  if (!a->processes) return;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), mask = ~(page - 1);
  uintptr_t from = ((uintptr_t)(a->processes + a->process_count) + page - 1) & mask;
  size_t touched = a->process_touched < a->process_cap ? a->process_touched : a->process_cap;
  uintptr_t to = (uintptr_t)(a->processes + touched) & mask;
  if (to > from) os_madvise((void *)from, to - from, MADV_DONTNEED);
  a->process_touched = a->process_count;
}

/* The state of the process (pid, start_time): a pid is a process only with its start time (/proc/PID/stat),
 * so a new process that got the number of one that exited starts afresh, even with the same comm: it never
 * inherits the other's ledger, back-off or totals. */
struct process_state *agent_state_of(struct agent *a, pid_t pid, uint64_t start_time, const char *comm) {
  for (size_t i = 0; i < a->process_count; i++) {
    struct process_state *p = &a->processes[i];
    if (p->pid != pid) continue;
    if (p->start_time != start_time) { /* the pid was reused: the old process retires (its counters stay) */
      agent_retire_process(a, p);
      agent_free_process(p);
      memset(p, 0, sizeof *p);
      p->last_pause = -1;
    }
    p->pid = pid;
    p->start_time = start_time;
    snprintf(p->comm, sizeof p->comm, "%s", comm);
    return p;
  }
  return agent_add_process(a, pid, start_time, comm);
}

struct process_state *agent_add_process(struct agent *a, pid_t pid, uint64_t start_time, const char *comm) {
  /* before the table grows, the processes that exited since the last pass leave it: a long pass in which many
   * come and go does not step it up for good (the end of the pass retires the rest) */
  if (a->process_count == a->process_cap) retire_processes(a, exited);
  size_t need = a->process_count + 1 > PROCESS_TABLE_RESERVE ? a->process_count + 1 : PROCESS_TABLE_RESERVE;
  if (ARRAY_GROW(a->processes, need, a->process_cap) != 0) return NULL;
  struct process_state *p = &a->processes[a->process_count++];
  if (a->process_count > a->process_touched) a->process_touched = a->process_count;
  memset(p, 0, sizeof *p);
  p->pid = pid;
  p->start_time = start_time;
  snprintf(p->comm, sizeof p->comm, "%s", comm);
  p->last_pause = -1;
  return p;
}


void agent_retire_processes(struct agent *a, bool only_exited) { retire_processes(a, only_exited ? exited : not_seen); }
