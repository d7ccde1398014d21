/* SPDX-License-Identifier: MIT */
/* pause.c - the pause a collapse call causes in its target, from schedstat (see pause.h). */
#include "pause.h"
#include "array.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

const double pause_bucket_bounds[PAUSE_BUCKETS] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                                   0.05,   0.1,   0.2,   0.5,   1,    2};

static struct pause_thread *thread_of(struct pause_probe *p, int tid) {
  for (size_t i = 0; i < p->thread_count; i++)
    if (p->threads[i].tid == tid) return &p->threads[i];
  if (ARRAY_GROW(p->threads, p->thread_count + 1, p->thread_cap) != 0) return NULL;
  struct pause_thread *t = &p->threads[p->thread_count++];
  *t = (struct pause_thread){.tid = tid};
  return t;
}

/* Note which threads ran since the last reading. A thread seen for the first time has no history: not busy. */
static void note_activity(struct pause_probe *p, const struct os_task_times *times, size_t count, double now,
                          bool first) {
  for (size_t i = 0; i < count; i++) {
    struct pause_thread *t = thread_of(p, times[i].tid);
    if (!t) continue;
    if (t->run_ns != times[i].run_ns && !first && t->run_ns) t->changed_at = now;
    t->run_ns = times[i].run_ns;
  }
}

static size_t read_times(struct pause_probe *p) {
  if (!p->before) p->before = malloc(PAUSE_MAX_THREADS * sizeof *p->before);
  if (!p->before) return 0;
  long n = os_read_task_times((int)p->pid, p->before, PAUSE_MAX_THREADS);
  return n > 0 ? (size_t)n : 0;
}

void pause_probe_init(struct pause_probe *p, pid_t pid, double now) {
  memset(p, 0, sizeof *p);
  p->pid = pid;
  /* read_times allocates p->before: it goes first (the order of a call's arguments is unspecified: gcc reads
   * them right to left on x86-64, left to right on arm64, where p->before was still NULL). */
  size_t count = read_times(p);
  note_activity(p, p->before, count, now, true);
}

void pause_probe_free(struct pause_probe *p) {
  free(p->threads);
  free(p->before);
  memset(p, 0, sizeof *p);
}

void pause_probe_before(struct pause_probe *p, double now) {
  p->before_count = read_times(p);
  note_activity(p, p->before, p->before_count, now, false);
}

int pause_probe_after(struct pause_probe *p, double start, double end, double *pause) {
  if (!p->before) return -ENOMEM; /* pause_probe_init could not take its first reading */
  struct os_task_times *after = malloc(PAUSE_MAX_THREADS * sizeof *after);
  if (!after) return -ENOMEM;
  long n = os_read_task_times((int)p->pid, after, PAUSE_MAX_THREADS);
  if (n < 0) {
    free(after);
    return (int)n;
  }
  double span = end - start;
  int found = 0;
  for (long a = 0; a < n; a++) {
    for (size_t b = 0; b < p->before_count; b++) {
      if (after[a].tid != p->before[b].tid) continue;
      struct pause_thread *t = thread_of(p, after[a].tid);
      if (!t || !t->changed_at || start - t->changed_at > PAUSE_BUSY_SECONDS) break; /* idle: not held up */
      double ran = (double)(after[a].run_ns - p->before[b].run_ns) * 1e-9;
      double held = span > ran ? span - ran : 0;
      if (!found || held > *pause) *pause = held;
      found = 1;
      break;
    }
  }
  note_activity(p, after, (size_t)n, end, false);
  free(after);
  return found;
}

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double pause_quantile(double *values, size_t n, double q) {
  if (n == 0) return 0;
  qsort(values, n, sizeof *values, compare_double);
  size_t rank = (size_t)(q * (double)n + 0.999999999); /* ceil(q * n), the nearest rank */
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return values[rank - 1];
}

void pause_histogram_add(struct pause_histogram *h, double seconds) {
  if (seconds < 0) return;
  size_t k = 0;
  while (k < PAUSE_BUCKETS && seconds > pause_bucket_bounds[k]) k++;
  h->counts[k]++;
  h->count++;
  h->sum += seconds;
  if (seconds > h->longest) h->longest = seconds;
}

double pause_histogram_quantile(const struct pause_histogram *h, double q) {
  if (h->count == 0) return 0;
  double rank = q * (double)h->count;
  uint64_t seen = 0;
  for (size_t k = 0; k < PAUSE_BUCKETS; k++) {
    seen += h->counts[k];
    if ((double)seen >= rank) return pause_bucket_bounds[k] < h->longest ? pause_bucket_bounds[k] : h->longest;
  }
  return h->longest;
}
