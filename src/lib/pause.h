/* SPDX-License-Identifier: MIT */
/* pause.h - the pause a collapse call causes in the process it acts on, read from outside without new
 * privileges, and the distribution of such pauses (the agent's histogram).
 *
 * Each call holds the target's mmap lock for write while it copies a window, and the target's page faults
 * wait for it (docs/design.md, "What a collapse costs the process it acts on"). Around each call the
 * threads' /proc/PID/task/TID/schedstat are read; for a thread that ran within the last PAUSE_BUSY_SECONDS,
 * the call's span minus the time it ran is an upper bound on how long it was held up (it includes waiting
 * for a CPU; a thread that merely sleeps in epoll is not busy, so it does not count). */
#ifndef HUGIFY_PAUSE_H
#define HUGIFY_PAUSE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "os.h"

/* A thread is busy when its CPU time grew within this long. It must be long against a tick: schedstat shows
 * a running thread's time as of its last tick or switch, so over a short gap a busy thread can look idle. */
#define PAUSE_BUSY_SECONDS 0.1
#define PAUSE_MAX_THREADS 1024 /* threads looked at per call; a process with more is measured on the first */

struct pause_thread {
  int tid;
  uint64_t run_ns;
  double changed_at; /* CLOCK_MONOTONIC seconds when run_ns was last seen to grow; 0: never */
};

struct pause_probe {
  pid_t pid;
  struct pause_thread *threads; /* what each thread did lately (malloc'd) */
  size_t thread_count, thread_cap;
  struct os_task_times *before; /* the threads' times before the call in flight (malloc'd) */
  size_t before_count;
};

/* Start watching pid: one reading, so that a thread busy from now on can be told from one that is idle. */
void pause_probe_init(struct pause_probe *probe, pid_t pid, double now);
void pause_probe_free(struct pause_probe *probe);
/* Right before a call (now: CLOCK_MONOTONIC seconds). */
void pause_probe_before(struct pause_probe *probe, double now);
/* Right after a call that ran from start to end: 1 with *pause the longest a busy thread did not run
 * during it (seconds), 0 when no thread of the target was busy (nothing to pause; *pause untouched), or
 * -errno when the threads' times cannot be read. */
int pause_probe_after(struct pause_probe *probe, double start, double end, double *pause);

/* The q-quantile (0..1) of n values by the nearest rank (sorts them in place); 0 for n == 0. */
double pause_quantile(double *values, size_t n, double q);

/* A distribution of pauses in fixed buckets, for a Prometheus histogram (bounds in seconds). */
#define PAUSE_BUCKETS 12
extern const double pause_bucket_bounds[PAUSE_BUCKETS];
struct pause_histogram {
  uint64_t counts[PAUSE_BUCKETS + 1]; /* per bucket, not cumulative; the last: above the largest bound */
  uint64_t count;
  double sum, longest;
};
void pause_histogram_add(struct pause_histogram *histogram, double seconds);
/* An upper bound on the q-quantile: the bound of the bucket that holds it (longest when past the last). */
double pause_histogram_quantile(const struct pause_histogram *histogram, double q);

#endif
