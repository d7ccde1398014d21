/* SPDX-License-Identifier: MIT */
/* collapse_cost - what hugify_collapse costs over the kernel's own work: two twin processes each hold the
 * same SIZE array on 4 KiB pages and keep reading it (live); one is collapsed by hugify_collapse, the other
 * by one bare process_madvise(MADV_COLLAPSE) over the same aligned range. Then a fresh pair, the other
 * order first (on a VM, whichever collapse runs second tends to be faster: it reuses memory the first freed).
 *
 *   collapse_cost [--size SIZE] [--rounds N] [--chunk SIZE]
 *
 * Prints, per round and order, wall and CPU seconds of both, and the ratio hugify / bare summed over all
 * runs (the figure the agent's target "collapse work <= 1.3x the kernel's own" is about). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hugify.h"
#include "units.h"

#include "os.h" /* kernel constants newer than this system's headers */
#define HUGE (UINT64_C(2) << 20)

static double clock_of(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= UINT64_C(0xff51afd7ed558ccd);
  return x ^ (x >> 29);
}

struct twin {
  pid_t pid;
  uintptr_t array;
};

/* A child that fills `size` bytes on 4 KiB pages (THP off while filling), reports the address, and reads
 * the array at random until killed. */
static int start_twin(uint64_t size, struct twin *t) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    size_t words = (size_t)(size / 8);
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    uint64_t *array = malloc(size);
    if (!array) _exit(1);
    for (size_t i = 0; i < words; i++) array[i] = mix(i + 1);
    prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
    uintptr_t at = (uintptr_t)array;
    if (write(fds[1], &at, sizeof at) != sizeof at) _exit(1);
    close(fds[1]);
    uint64_t index = 0, sink = 0;
    for (;;) {
      uint64_t value = array[index];
      sink += value;
      index = mix(value ^ index) % words;
      if (sink == 42) pause(); /* keeps the loop from being optimised away */
    }
  }
  close(fds[1]);
  t->pid = pid;
  ssize_t n = read(fds[0], &t->array, sizeof t->array);
  close(fds[0]);
  return n == sizeof t->array ? 0 : -1;
}

static void stop_twin(struct twin *t) {
  kill(t->pid, SIGKILL);
  waitpid(t->pid, NULL, 0);
}

struct cost {
  double wall, cpu;
};

static struct cost run_hugify(const struct twin *t, uint64_t chunk, uint64_t *collapsed) {
  /* full pace: the machinery's own overhead against the bare call (the gentle pace adds warm pages and rests) */
  struct hugify_collapse_opts opts = {.chunk_size = chunk, .pace = HUGIFY_COLLAPSE_PACE_FULL};
  struct hugify_collapse_report report;
  double wall = clock_of(CLOCK_MONOTONIC), cpu = clock_of(CLOCK_THREAD_CPUTIME_ID);
  int rc = hugify_collapse(t->pid, &opts, &report);
  struct cost c = {clock_of(CLOCK_MONOTONIC) - wall, clock_of(CLOCK_THREAD_CPUTIME_ID) - cpu};
  if (rc != 0) fprintf(stderr, "collapse_cost: hugify_collapse: %s\n", report.reason);
  *collapsed = report.huge_after - report.huge_before;
  hugify_collapse_report_free(&report);
  return c;
}

static struct cost run_bare(const struct twin *t, uint64_t size) {
  uintptr_t start = (t->array + HUGE - 1) & ~(uintptr_t)(HUGE - 1), end = (t->array + size) & ~(uintptr_t)(HUGE - 1);
  struct iovec range = {(void *)start, end - start};
  double wall = clock_of(CLOCK_MONOTONIC), cpu = clock_of(CLOCK_THREAD_CPUTIME_ID);
  int pidfd = (int)syscall(SYS_pidfd_open, t->pid, 0);
  long rc = syscall(SYS_process_madvise, pidfd, &range, 1, MADV_COLLAPSE, 0);
  close(pidfd);
  struct cost c = {clock_of(CLOCK_MONOTONIC) - wall, clock_of(CLOCK_THREAD_CPUTIME_ID) - cpu};
  if (rc < 0) perror("collapse_cost: process_madvise");
  return c;
}

int main(int argc, char **argv) {
  uint64_t size = UINT64_C(1) << 30, chunk = 0;
  int rounds = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
      if (!parse_size(argv[++i], &size) || size < 4 * HUGE) { fprintf(stderr, "collapse_cost: bad --size\n"); return 2; }
    } else if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc) {
      if (!parse_size(argv[++i], &chunk)) { fprintf(stderr, "collapse_cost: bad --chunk\n"); return 2; }
    } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: collapse_cost [--size SIZE] [--rounds N] [--chunk SIZE]\n");
      return 2;
    }
  }
  struct cost hugify_sum = {0, 0}, bare_sum = {0, 0};
  for (int round = 0; round < rounds; round++) {
    for (int order = 0; order < 2; order++) {
      struct twin a, b;
      if (start_twin(size, &a) != 0 || start_twin(size, &b) != 0) { fprintf(stderr, "collapse_cost: twin failed\n"); return 1; }
      usleep(200000);
      uint64_t collapsed = 0;
      struct cost h, k;
      if (order == 0) {
        h = run_hugify(&a, chunk, &collapsed);
        k = run_bare(&b, size);
      } else {
        k = run_bare(&b, size);
        h = run_hugify(&a, chunk, &collapsed);
      }
      stop_twin(&a);
      stop_twin(&b);
      printf("round %d, %s first: hugify %.3f s wall %.3f s CPU (%llu MiB made huge); bare %.3f s wall %.3f s CPU\n",
             round + 1, order == 0 ? "hugify" : "bare", h.wall, h.cpu, (unsigned long long)(collapsed >> 20), k.wall,
             k.cpu);
      fflush(stdout);
      hugify_sum.wall += h.wall, hugify_sum.cpu += h.cpu;
      bare_sum.wall += k.wall, bare_sum.cpu += k.cpu;
    }
  }
  printf("sum: hugify %.3f s wall %.3f s CPU; bare %.3f s wall %.3f s CPU; ratio %.2fx wall, %.2fx CPU\n",
         hugify_sum.wall, hugify_sum.cpu, bare_sum.wall, bare_sum.cpu, hugify_sum.wall / bare_sum.wall,
         hugify_sum.cpu / bare_sum.cpu);
  return 0;
}
