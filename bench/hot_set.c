/* SPDX-License-Identifier: MIT */
/* hot_set - a workload whose hot set is a known part of its memory, for the agent's time to benefit
 * (bench/time_to_benefit.sh, docs/agent.md "Heat").
 *
 *   hot_set [--size MIB] [--hot-percent P] [--hot-share P] [--stripes N] [--seconds S] [--idle]
 *
 * Maps SIZE MiB (default 1024) of private anonymous memory, writes every page (all present, on 4 KiB pages
 * under THP madvise: it advises nothing), then reads and writes random 8-byte words, HOT-SHARE % of them
 * (default 90) in the hot set: HOT-PERCENT % of the memory (default 20) in N stripes (default 4), each in the
 * middle of its quarter, so neither address order nor density finds it by accident. Every second it prints
 * one line: the seconds, and the share of the hot set, of the cold memory and of all its accesses that are
 * on huge pages (hugify_measure_backing of its own ranges), until SECONDS (default 600) or SIGTERM. The
 * accesses are uniform within each set, so the share of the hot accesses on huge pages is the hot set's
 * huge share. --idle: no accesses after the writes, only the lines (a host's idle processes:
 * bench/agent_big.sh's many-process run, where eight busy ones would fight over two CPUs). */
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "hugify.h"
#include "os.h"

static volatile sig_atomic_t stop;
static void on_term(int signal) { (void)signal; stop = 1; }

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t next_random(uint64_t *state) { /* xorshift64* */
  *state ^= *state >> 12, *state ^= *state << 25, *state ^= *state >> 27;
  return *state * UINT64_C(2685821657736338717);
}

static double huge_share(const char *base, const uint64_t *from, const uint64_t *to, size_t count) {
  double huge = 0, resident = 0;
  for (size_t i = 0; i < count; i++) {
    struct hugify_backing b;
    if (hugify_measure_backing(base + from[i], to[i] - from[i], &b) != 0) return -1;
    huge += hugify_backing_huge_fraction(&b) * (double)b.resident;
    resident += (double)b.resident;
  }
  return resident > 0 ? huge / resident : 0;
}

static int usage(void) {
  fprintf(stderr, "usage: hot_set [--size MIB] [--hot-percent P] [--hot-share P] [--stripes N] [--seconds S] "
                  "[--idle]\n");
  return 2;
}

int main(int argc, char **argv) {
  double size_mib = 1024, hot_percent = 20, hot_share = 90, seconds = 600;
  long stripes = 4;
  bool idle = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--idle")) {
      idle = true;
      continue;
    }
    if (i + 1 >= argc) return usage();
    double v = strtod(argv[i + 1], NULL);
    if (!strcmp(argv[i], "--size")) size_mib = v;
    else if (!strcmp(argv[i], "--hot-percent")) hot_percent = v;
    else if (!strcmp(argv[i], "--hot-share")) hot_share = v;
    else if (!strcmp(argv[i], "--stripes")) stripes = (long)v;
    else if (!strcmp(argv[i], "--seconds")) seconds = v;
    else return usage();
    i++;
  }
  const uint64_t pmd = os_pmd_size();
  uint64_t size = ((uint64_t)(size_mib * 1048576) + pmd - 1) & ~(pmd - 1);
  if (size < 8 * pmd || stripes < 1 || stripes > 64 || hot_percent <= 0 || hot_percent >= 100 || hot_share < 0 ||
      hot_share > 100)
    return usage();
  void *mapped;
  int rc = os_map_aligned(size, pmd, PROT_READ | PROT_WRITE, &mapped);
  if (rc) {
    fprintf(stderr, "hot_set: mmap of %llu MiB failed: %s\n", (unsigned long long)(size >> 20), strerror(-rc));
    return 1;
  }
  char *base = mapped;
  os_name_anon(base, size, "hot_set");
  for (uint64_t at = 0; at < size; at += 4096) base[at] = 1;
  /* the stripes: whole 2 MiB windows, each centred in its share of the memory */
  uint64_t stripe = ((uint64_t)((double)size * hot_percent / 100 / (double)stripes) + pmd - 1) & ~(pmd - 1);
  uint64_t part = size / (uint64_t)stripes, hot_from[64], hot_to[64], cold_from[65], cold_to[65];
  size_t cold_count = 0;
  uint64_t cold_at = 0;
  for (long s = 0; s < stripes; s++) {
    hot_from[s] = ((uint64_t)s * part + part / 2 - stripe / 2) & ~(pmd - 1);
    hot_to[s] = hot_from[s] + stripe;
    if (hot_from[s] > cold_at) cold_from[cold_count] = cold_at, cold_to[cold_count++] = hot_from[s];
    cold_at = hot_to[s];
  }
  if (cold_at < size) cold_from[cold_count] = cold_at, cold_to[cold_count++] = size;
  uint64_t hot_bytes = stripe * (uint64_t)stripes, cold_bytes = size - hot_bytes;
  printf("hot_set: pid %d, %llu MiB at %p, hot set %llu MiB in %ld stripes (", (int)getpid(),
         (unsigned long long)(size >> 20), (void *)base, (unsigned long long)(hot_bytes >> 20), stripes);
  for (long s = 0; s < stripes; s++) printf("%s+%llu MiB", s ? ", " : "", (unsigned long long)(hot_from[s] >> 20));
  printf("), %.0f %% of the accesses\n", hot_share);
  fflush(stdout);
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  uint64_t state = (uint64_t)getpid() * 0x9e3779b97f4a7c15u | 1, threshold = (uint64_t)(hot_share / 100 * 4294967296.0);
  double start = now(), next_report = start + 1;
  uint64_t sum = 0;
  while (!stop) {
    if (idle) os_sleep(next_report - now());
    for (int k = 0; !idle && k < 65536; k++) {
      uint64_t r = next_random(&state), at;
      if ((r & 0xffffffffu) < threshold) {
        uint64_t offset = (r >> 32) * 8 % hot_bytes;
        at = hot_from[offset / stripe] + offset % stripe;
      } else {
        uint64_t offset = (r >> 32) * 8 % cold_bytes;
        size_t c = 0;
        while (offset >= cold_to[c] - cold_from[c]) offset -= cold_to[c] - cold_from[c], c++;
        at = cold_from[c] + offset;
      }
      uint64_t *word = (uint64_t *)(base + (at & ~UINT64_C(7)));
      sum += *word;
      *word = sum;
    }
    double t = now();
    if (t < next_report) continue;
    double hot = huge_share(base, hot_from, hot_to, (size_t)stripes);
    double cold = huge_share(base, cold_from, cold_to, cold_count);
    printf("t=%.0f hot_huge=%.3f cold_huge=%.3f accesses_huge=%.3f\n", t - start, hot, cold,
           hot_share / 100 * hot + (1 - hot_share / 100) * cold);
    fflush(stdout);
    next_report += 1;
    if (t - start >= seconds) break;
  }
  return sum == 42 ? 3 : 0;
}
