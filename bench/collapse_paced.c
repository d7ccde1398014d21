/* SPDX-License-Identifier: MIT */
/* Experiment for issue 19 (not part of hugify): collapse a live process's private anonymous memory with
 * process_madvise(MADV_COLLAPSE), CHUNK bytes per call, and pace the calls, to measure what each pacing
 * lever does to the target's latency. After each call of duration t it sleeps t * (1 - duty) / duty, so
 * the calls take at most DUTY of the wall time (duty 1 = back to back, like `hugify collapse`); with
 * --pace-by cpu, t is the call's CPU time instead.
 *
 * It also records, per call, what the target's threads did during it, read from outside without new
 * privileges: /proc/PID/task/TID/schedstat before and after the call gives each thread's time on CPU and
 * waiting for a CPU; the rest of the call's span the thread was asleep or blocked (for a busy server:
 * blocked, e.g. on its mmap_lock). The worst busy thread's "not running" time is the call's inferred pause.
 *
 * Usage: collapse_paced PID [--chunk BYTES] [--duty D] [--pace-by wall|cpu] [--min-present PAGES] [--warm 0|1|2]
 *                       [--calls FILE]
 *   --chunk        bytes per process_madvise call (default 2 MiB: one window)
 *   --duty         share of the wall time spent in calls, 0 < D <= 1 (default 1)
 *   --pace-by      the gap after a call is proportional to its wall time (default) or its CPU time
 *   --min-present  skip 2 MiB windows with fewer present pages (from /proc/PID/pagemap; default 1)
 *   --warm 1|2     before each call, fault in and free one huge page here (see warm_huge_page)
 *   --calls FILE   one line per call: start_us dur_us cpu_us bytes ret worst_tid run_us wait_us blocked_us
 * Prints a summary line: calls, bytes, wall, CPU, longest call, p99 call, longest inferred pause.
 * Build: cc -O2 -o collapse_paced bench/collapse_paced.c      Needs root (or CAP_SYS_NICE + ptrace). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#define WINDOW (2UL << 20)
#define MAX_THREADS 256

struct window { uintptr_t start; size_t len; };
struct thread_times { int tid; uint64_t run_ns, wait_ns; };

static uint64_t now_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int read_thread_times(int pid, struct thread_times *out, int max) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR *dir = opendir(path);
  if (!dir) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dir)) && n < max) {
    if (e->d_name[0] == '.') continue;
    char stat_path[300];
    snprintf(stat_path, sizeof stat_path, "/proc/%d/task/%s/schedstat", pid, e->d_name);
    FILE *f = fopen(stat_path, "r");
    if (!f) continue;
    unsigned long long run, wait;
    if (fscanf(f, "%llu %llu", &run, &wait) == 2) out[n++] = (struct thread_times){atoi(e->d_name), run, wait};
    fclose(f);
  }
  closedir(dir);
  return n;
}

/* present pages of [start, start + WINDOW) from pagemap (bit 63) */
static int present_pages(int pagemap, uintptr_t start) {
  uint64_t entries[WINDOW / 4096];
  ssize_t got = pread(pagemap, entries, sizeof entries, (off_t)(start / 4096 * 8));
  int present = 0;
  for (ssize_t i = 0; i < got / 8; i++) present += (int)(entries[i] >> 63);
  return present;
}

/* Only busy threads count: one whose on-CPU time grew within the last BUSY_WINDOW. A helper thread that
 * runs now and then (Redis's bio and jemalloc threads) is "not running" for the whole of any call
 * without being paused by it. The window must be long against a tick: /proc/PID/schedstat shows a running
 * thread's time as of its last tick or switch, so over a short gap a busy thread can look idle. */
#define BUSY_WINDOW_NS 100000000u
struct activity { int tid; uint64_t run_ns, changed_at; };

static struct activity *activity_of(struct activity *table, int *n, int tid) {
  for (int i = 0; i < *n; i++)
    if (table[i].tid == tid) return &table[i];
  if (*n == MAX_THREADS) return NULL;
  table[*n] = (struct activity){tid, 0, 0};
  return &table[(*n)++];
}

static void note_activity(struct activity *table, int *n, const struct thread_times *threads, int count,
                          uint64_t now) {
  for (int i = 0; i < count; i++) {
    struct activity *a = activity_of(table, n, threads[i].tid);
    if (a && threads[i].run_ns != a->run_ns) a->run_ns = threads[i].run_ns, a->changed_at = now;
  }
}

static int thread_busy(struct activity *table, int *n, int tid, uint64_t now) {
  struct activity *a = activity_of(table, n, tid);
  return a && a->changed_at && now - a->changed_at <= BUSY_WINDOW_NS;
}

/* --warm 1: fault a huge page in here and free it just before the call, so that the collapse's allocation
 * (same CPU, per-CPU free list) likely gets a page the host already backs, and the copy under the
 * target's mmap_lock does not wait for the host to back a fresh 2 MiB. One write is enough: the fault
 * zeroes the whole huge page, which makes the host back all of it. (--warm 2: memset it all instead.)
 * munmap also drains this CPU's LRU batches, so the call's lru_add_drain_all need not wait for a worker
 * on this CPU. */
static void warm_huge_page(int how) {
  char *raw = mmap(NULL, 2 * WINDOW, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return;
  char *aligned = (char *)(((uintptr_t)raw + WINDOW - 1) & ~(WINDOW - 1));
  madvise(aligned, WINDOW, MADV_HUGEPAGE);
  if (how == 2) memset(aligned, 1, WINDOW);
  else *(volatile char *)aligned = 1;
  munmap(raw, 2 * WINDOW);
}

static int compare_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: collapse_paced PID [--chunk B] [--duty D] [--min-present N] [--calls FILE]\n"); return 2; }
  int pid = atoi(argv[1]);
  size_t chunk = WINDOW;
  double duty = 1.0;
  int min_present = 1, warm = 0, pace_by_cpu = 0;
  FILE *calls_out = NULL;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--chunk")) chunk = strtoull(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "--duty")) duty = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--min-present")) min_present = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--calls")) calls_out = fopen(argv[i + 1], "w");
    else if (!strcmp(argv[i], "--warm")) warm = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--pace-by")) pace_by_cpu = !strcmp(argv[i + 1], "cpu");
    else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
  }
  if (chunk < WINDOW || duty <= 0 || duty > 1) { fprintf(stderr, "bad --chunk or --duty\n"); return 2; }

  /* the windows: 2 MiB-aligned, inside private anonymous writable mappings, populated enough */
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", pid);
  FILE *maps = fopen(path, "r");
  snprintf(path, sizeof path, "/proc/%d/pagemap", pid);
  int pagemap = open(path, O_RDONLY);
  if (!maps || pagemap < 0) { perror("open /proc/PID/maps or pagemap"); return 1; }
  static struct window windows[1 << 16];
  size_t nwindows = 0;
  char line[512];
  while (fgets(line, sizeof line, maps)) {
    unsigned long start, end, inode;
    char perms[8], name[256] = "";
    if (sscanf(line, "%lx-%lx %7s %*s %*s %lu %255s", &start, &end, perms, &inode, name) < 4) continue;
    if (perms[1] != 'w' || perms[3] != 'p' || inode != 0) continue;
    if (name[0] && strcmp(name, "[heap]") && strcmp(name, "[stack]")) continue;
    for (uintptr_t w = (start + WINDOW - 1) & ~(WINDOW - 1); w + WINDOW <= end && nwindows < (1 << 16); w += WINDOW)
      if (present_pages(pagemap, w) >= min_present) windows[nwindows++] = (struct window){w, WINDOW};
  }
  fclose(maps);
  close(pagemap);

  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (pidfd < 0) { perror("pidfd_open"); return 1; }

  static uint64_t durations[1 << 16];
  static struct activity activity[MAX_THREADS];
  int nactivity = 0;
  {
    struct thread_times start[MAX_THREADS];
    note_activity(activity, &nactivity, start, read_thread_times(pid, start, MAX_THREADS), 0); /* baseline, not busy */
  }
  size_t ncalls = 0, bytes = 0;
  uint64_t longest_pause = 0;
  uint64_t wall0 = now_ns(CLOCK_MONOTONIC), cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  for (size_t i = 0; i < nwindows;) {
    /* one call: consecutive windows up to chunk bytes, as iovecs */
    struct iovec iov[1024];
    int n = 0;
    size_t len = 0;
    while (i < nwindows && len + WINDOW <= chunk && n < 1024) {
      iov[n++] = (struct iovec){(void *)windows[i].start, WINDOW};
      len += WINDOW;
      i++;
    }
    struct thread_times before[MAX_THREADS], after[MAX_THREADS];
    if (warm) warm_huge_page(warm);
    int nb = read_thread_times(pid, before, MAX_THREADS);
    note_activity(activity, &nactivity, before, nb, now_ns(CLOCK_MONOTONIC));
    uint64_t t0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    long ret = syscall(SYS_process_madvise, pidfd, iov, (size_t)n, MADV_COLLAPSE, 0);
    uint64_t t1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    int na = read_thread_times(pid, after, MAX_THREADS);
    /* the thread that ran least of the call's span: its not-running time is the inferred pause */
    uint64_t span = t1 - t0, worst_blocked = 0, worst_run = 0, worst_wait = 0;
    int worst_tid = 0;
    for (int a = 0; a < na; a++)
      for (int b = 0; b < nb; b++)
        if (after[a].tid == before[b].tid && thread_busy(activity, &nactivity, before[b].tid, t0)) {
          uint64_t run = after[a].run_ns - before[b].run_ns, wait = after[a].wait_ns - before[b].wait_ns;
          uint64_t blocked = span > run + wait ? span - run - wait : 0;
          if (!worst_tid || blocked + wait > worst_blocked + worst_wait)
            worst_tid = after[a].tid, worst_blocked = blocked, worst_run = run, worst_wait = wait;
        }
    if (worst_blocked + worst_wait > longest_pause) longest_pause = worst_blocked + worst_wait;
    note_activity(activity, &nactivity, after, na, t1);
    durations[ncalls++] = span;
    bytes += len;
    if (calls_out)
      fprintf(calls_out, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %zu %ld %d %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
              t0 / 1000, span / 1000, (c1 - c0) / 1000, len, ret < 0 ? -errno : ret, worst_tid, worst_run / 1000,
              worst_wait / 1000, worst_blocked / 1000);
    if (duty < 1 && i < nwindows) {
      /* pace by the call's CPU time: its wall time also holds the lru_add_drain_all sleep, which costs
       * the target nothing */
      uint64_t gap = (uint64_t)((double)(pace_by_cpu ? c1 - c0 : span) * (1 - duty) / duty);
      struct timespec ts = {(time_t)(gap / 1000000000u), (long)(gap % 1000000000u)};
      nanosleep(&ts, NULL);
    }
  }
  uint64_t wall = now_ns(CLOCK_MONOTONIC) - wall0, cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  qsort(durations, ncalls, sizeof durations[0], compare_u64);
  printf("calls=%zu bytes=%zu wall_s=%.3f cpu_s=%.3f longest_call_ms=%.2f p99_call_ms=%.2f "
         "longest_inferred_pause_ms=%.2f\n",
         ncalls, bytes, wall / 1e9, cpu / 1e9, ncalls ? durations[ncalls - 1] / 1e6 : 0,
         ncalls ? durations[(ncalls * 99) / 100 < ncalls ? (ncalls * 99) / 100 : ncalls - 1] / 1e6 : 0,
         longest_pause / 1e6);
  if (calls_out) fclose(calls_out);
  return 0;
}
