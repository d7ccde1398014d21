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
 *   "second N: X.X ns/lookup, M lookups, Y.Y% huge"  (huge: share of the array on huge pages, measured with
 *   hugify_measure_backing). The first line gives the PID and the array's address. */
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
  double start = measure_now();
  for (long second = 1; seconds == 0 || second <= seconds; second++) {
    double begin = measure_now(), end = start + (double)second;
    uint64_t lookups = 0;
    while (measure_now() < end) {
      for (int k = 0; k < 4096; k++) {
        uint64_t value = array[index];
        sink += value;
        index = mix(value ^ index) % words;
      }
      lookups += 4096;
    }
    double took = measure_now() - begin;
    struct hugify_backing backing;
    double huge = hugify_measure_backing(array, words * sizeof *array, &backing) == 0 ? hugify_backing_huge_fraction(&backing) : -1;
    printf("second %ld: %.1f ns/lookup, %llu lookups, %.1f%% huge\n", second, took * 1e9 / (double)lookups,
           (unsigned long long)lookups, 100.0 * huge);
    fflush(stdout);
  }
  printf("live_lookup: done (checksum %llx)\n", (unsigned long long)sink);
  free(array);
  return 0;
}
