/* SPDX-License-Identifier: MIT */
/* first_touch - a process that grows into memory it reserved, for the agent's --first-touch (bench/first_touch.sh,
 * docs/agent.md "First touch"): as a JVM heap does, it maps SIZE MiB once, never advised, and touches more of it
 * over time.
 *
 *   first_touch [--size MIB] [--start MIB] [--step MIB] [--steps N] [--sparse] [--settle S] [--refault]
 *
 * Touches START MiB (default 64) and prints "ready"; then reads every touched page over and over (its hot set:
 * all of it). On SIGUSR1 it grows: every second it touches STEP MiB more (default 16) from where it stopped,
 * STEPS times (default 16), reading all it touched between steps, then SETTLE seconds (default 10) more. Dense:
 * every page of a step is written; --sparse: every tenth page (10 % of each 2 MiB). Every second it prints
 * "t=T grown=MIB grown_huge=F bloat=MIB": the share of the memory touched since SIGUSR1 that is on huge pages
 * (hugify_measure_backing of that range), and the bloat: the range's resident bytes beyond the pages it
 * wrote (zero-filled by a collapse, or by a huge page faulted where it wrote one 4 KiB page). Ends with
 * "done ..." in the same form. --refault: it does not grow; each second it gives STEP MiB of what it touched back
 * (MADV_DONTNEED, as a collector or an allocator returning freed memory) and touches it again, going round
 * the START MiB; "grown" is then all of it (every byte refaulted after SIGUSR1 once STEPS * STEP >= START).
 * SIGTERM ends it. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hugify.h"

#define MIB (UINT64_C(1) << 20)
#define PAGE 4096u

static volatile sig_atomic_t grow, stop;
static void on_grow(int signal) { (void)signal; grow = 1; }
static void on_term(int signal) { (void)signal; stop = 1; }

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

struct grower {
  char *base;
  uint64_t touched;     /* bytes from base touched so far */
  uint64_t written;     /* pages written so far */
  unsigned stride;      /* pages: 1 dense, 10 sparse */
};

static void write_pages(struct grower *g, uint64_t from, uint64_t bytes) {
  for (uint64_t at = from; at < from + bytes; at += (uint64_t)PAGE * g->stride) g->base[at] = 1, g->written++;
}

static void touch(struct grower *g, uint64_t bytes) {
  write_pages(g, g->touched, bytes);
  g->touched += bytes;
}

/* Give [from, from + bytes) back and write it again: the pages written there count once. */
static void refault(struct grower *g, uint64_t from, uint64_t bytes) {
  madvise(g->base + from, bytes, MADV_DONTNEED);
  uint64_t before = g->written;
  write_pages(g, from, bytes);
  g->written = before;
}

/* One read of every page it wrote. */
static unsigned long read_all(const struct grower *g) {
  unsigned long sum = 0;
  for (uint64_t at = 0; at < g->touched; at += (uint64_t)PAGE * g->stride) sum += (unsigned char)g->base[at];
  return sum;
}

static void report(const char *word, double t, const struct grower *g, uint64_t grown_from, uint64_t written_before) {
  struct hugify_backing b = {0};
  uint64_t grown = g->touched - grown_from;
  double share = 0;
  if (grown && hugify_measure_backing(g->base + grown_from, grown, &b) == 0) share = hugify_backing_huge_fraction(&b);
  uint64_t wrote = (g->written - written_before) * PAGE;
  double bloat = b.resident > wrote ? (double)(b.resident - wrote) / (double)MIB : 0;
  printf("%s t=%.0f grown=%llu grown_huge=%.3f bloat=%.1f\n", word, t, (unsigned long long)(grown / MIB), share, bloat);
  fflush(stdout);
}

int main(int argc, char **argv) {
  uint64_t size = 512, start = 64, step = 16, steps = 16, settle = 10;
  bool sparse = false, refaults = false;
  for (int i = 1; i < argc; i++) {
    uint64_t *value = !strcmp(argv[i], "--size") ? &size : !strcmp(argv[i], "--start") ? &start
                    : !strcmp(argv[i], "--step") ? &step : !strcmp(argv[i], "--steps") ? &steps
                    : !strcmp(argv[i], "--settle") ? &settle : NULL;
    if (value && i + 1 < argc) *value = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--sparse")) sparse = true;
    else if (!strcmp(argv[i], "--refault")) refaults = true;
    else {
      fprintf(stderr, "usage: first_touch [--size MIB] [--start MIB] [--step MIB] [--steps N] [--sparse] [--settle S] "
                      "[--refault]\n");
      return 2;
    }
  }
  if ((refaults ? start : start + step * steps) > size || (refaults && (step > start || start % step))) {
    fprintf(stderr, "first_touch: --start + --step * --steps is more than --size (--refault: --step divides --start)\n");
    return 2;
  }
  signal(SIGUSR1, on_grow);
  signal(SIGTERM, on_term);
  char *raw = mmap(NULL, (size + 2) * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    fprintf(stderr, "first_touch: mmap of %llu MiB failed: %s\n", (unsigned long long)size, strerror(errno));
    return 1;
  }
  struct grower g = {(char *)(((uintptr_t)raw + 2 * MIB - 1) & ~(uintptr_t)(2 * MIB - 1)), 0, 0, sparse ? 10 : 1};
  touch(&g, start * MIB);
  printf("first_touch: pid %d, %llu MiB reserved, %llu MiB touched (%s), ready\n", (int)getpid(),
         (unsigned long long)size, (unsigned long long)start, sparse ? "every tenth page" : "every page");
  fflush(stdout);
  unsigned long sum = 0;
  while (!grow && !stop) sum += read_all(&g);
  uint64_t grown_from = refaults ? 0 : g.touched, written_before = refaults ? 0 : g.written;
  double began = now(), next = began + 1;
  for (uint64_t done = 0; !stop;) {
    sum += read_all(&g);
    double t = now();
    if (t < next) continue;
    next += 1;
    if (done < steps && refaults) refault(&g, done * step * MIB % (start * MIB), step * MIB), done++;
    else if (done < steps) touch(&g, step * MIB), done++;
    report("t", t - began, &g, grown_from, written_before);
    if (done == steps && t - began >= (double)(steps + settle)) break;
  }
  report("done", now() - began, &g, grown_from, written_before);
  return sum == 42 ? 3 : 0;
}
