/* SPDX-License-Identifier: MIT */
/* live_lookup - random lookups in a big array, latency printed every second, so the effect of a live
 * `hugify collapse PID` on a running process can be watched.
 *
 *   live_lookup [--size SIZE] [--seconds N] [--thp]
 *
 * --size SIZE   the array (default 1G). It is malloc'd (glibc mmaps it) and filled while THP is off for
 *               the process (prctl), so it starts on 4 KiB pages in any system THP mode; never madvised.
 * --seconds N   stop after N seconds (default: run until killed).
 * --thp         start on huge pages instead (MADV_HUGEPAGE + MADV_COLLAPSE): the reference figure.
 *
 * Each lookup is a dependent load: the next index is a hash of the value just read, so the latency of
 * every load (TLB miss and page walk included) is on the critical path. Output, one line per second:
 *   "second N: X.X ns/lookup, M lookups, op max A us p99.9 B us, Y.Y% huge"  (huge: share of the array on
 *   huge pages, measured with hugify_measure_backing). The first line gives the PID and the array's
 *   address; the last, "worst op: A us", the longest operation of the run.
 *
 * An operation is OP_LOOKUPS dependent lookups, timed on its own (a clock read costs ~25 ns, an operation
 * some microseconds): its max and p99.9 each second are the pauses this process felt, e.g. its page faults
 * waiting on its own mmap lock while `hugify collapse` copies a window (issue 19: the bound a collapse's
 * pace is held to). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "hugify.h"
#include "measure.h"
#include "units.h"

#include "os.h" /* kernel constants newer than this system's headers */

#define OP_LOOKUPS 64

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= UINT64_C(0xff51afd7ed558ccd);
  return x ^ (x >> 29);
}

int main(int argc, char **argv) {
  uint64_t size = UINT64_C(1) << 30;
  long seconds = 0;
  int start_huge = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
      if (!parse_size(argv[++i], &size) || size < 4096) { fprintf(stderr, "live_lookup: bad --size\n"); return 2; }
    } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = atol(argv[++i]);
    } else if (strcmp(argv[i], "--thp") == 0) {
      start_huge = 1;
    } else {
      fprintf(stderr, "usage: live_lookup [--size SIZE] [--seconds N] [--thp]\n");
      return 2;
    }
  }
  size_t words = (size_t)(size / sizeof(uint64_t));
  if (!start_huge) prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
  uint64_t *array = malloc(words * sizeof *array);
  if (!array) { perror("live_lookup: malloc"); return 1; }
  if (start_huge) madvise((void *)((uintptr_t)array & ~(uintptr_t)4095), size, MADV_HUGEPAGE);
  for (size_t i = 0; i < words; i++) array[i] = mix(i + 1);
  if (start_huge) madvise((void *)(((uintptr_t)array + 4095) & ~(uintptr_t)4095), size - 4096, MADV_COLLAPSE);
  else prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0); /* let a later collapse work */

  char pretty[32];
  format_bytes(size, pretty, sizeof pretty);
  printf("live_lookup: pid %d, array %s at %p\n", (int)getpid(), pretty, (void *)array);
  fflush(stdout);

  uint64_t index = 0, sink = 0;
  size_t op_cap = 1 << 20, ops = 0;
  float *op_seconds = malloc(op_cap * sizeof *op_seconds); /* this second's operations */
  if (!op_seconds) { perror("live_lookup: malloc"); return 1; }
  double worst = 0, start = measure_now();
  for (long second = 1; seconds == 0 || second <= seconds; second++) {
    double begin = measure_now(), end = start + (double)second;
    uint64_t lookups = 0;
    ops = 0;
    for (double t0 = now_seconds(); t0 < end;) {
      for (int k = 0; k < OP_LOOKUPS; k++) {
        uint64_t value = array[index];
        sink += value;
        index = mix(value ^ index) % words;
      }
      lookups += OP_LOOKUPS;
      double t1 = now_seconds();
      if (ops < op_cap) op_seconds[ops++] = (float)(t1 - t0);
      if (t1 - t0 > worst) worst = t1 - t0;
      t0 = t1;
    }
    double took = measure_now() - begin;
    qsort(op_seconds, ops, sizeof *op_seconds, compare_float);
    double op_max = ops ? op_seconds[ops - 1] : 0, op_p999 = ops ? op_seconds[(size_t)((double)(ops - 1) * 0.999)] : 0;
    struct hugify_backing backing;
    double huge = hugify_measure_backing(array, words * sizeof *array, &backing) == 0 ? hugify_backing_huge_fraction(&backing) : -1;
    printf("second %ld: %.1f ns/lookup, %llu lookups, op max %.0f us p99.9 %.0f us, %.1f%% huge\n", second,
           took * 1e9 / (double)lookups, (unsigned long long)lookups, op_max * 1e6, op_p999 * 1e6, 100.0 * huge);
    fflush(stdout);
  }
  printf("worst op: %.0f us\n", worst * 1e6);
  printf("live_lookup: done (checksum %llx)\n", (unsigned long long)sink);
  free(op_seconds);
  free(array);
  return 0;
}
