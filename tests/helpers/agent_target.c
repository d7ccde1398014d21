/* SPDX-License-Identifier: MIT */
/* agent_target - a child for the hugify agent tests: memory of known shapes on 4 KiB pages, never
 * madvised, and a heap that grows one step per SIGUSR1.
 *
 *   agent_target [--dense SIZE] [--sparse SIZE] [--nohuge SIZE] [--step SIZE] [--thp-disable]
 *                [--churn SIZE] [--exit-after MS]
 *
 * --dense SIZE   a PMD-aligned region, every page written (THP off while filling: 4 KiB pages).
 * --sparse SIZE  a PMD-aligned region with every tenth page written (10 % present).
 * --nohuge SIZE  a PMD-aligned region marked MADV_NOHUGEPAGE, every page written.
 * --step SIZE    on every SIGUSR1, malloc another SIZE (glibc mmaps it) and write every page; prints
 *                "grown 0xADDRESS SIZE".
 * --churn SIZE   a PMD-aligned dense region that, on every SIGUSR2, gives a quarter of each PMD window
 *                back (MADV_DONTNEED, as jemalloc's decay or glibc's trim do: a huge page there is split)
 *                and writes it again, as an allocator reusing freed memory; prints "churned N".
 * --thp-disable  prctl(PR_SET_THP_DISABLE) for good, after filling.
 * --exit-after MS exit on its own after MS milliseconds (a target that vanishes mid-pass).
 * On stdout, "NAME 0xADDRESS SIZE" per region, then "ready PID". SIGTERM ends it. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "target_memory.h"
#include "units.h"

#define HUGE TARGET_HUGE
#define PAGE TARGET_PAGE

static size_t size_arg(const char *text) {
  uint64_t bytes = 0;
  if (!parse_size(text, &bytes)) { fprintf(stderr, "agent_target: bad size %s\n", text); exit(2); }
  return (size_t)bytes;
}

int main(int argc, char **argv) {
  size_t dense = 0, sparse = 0, nohuge = 0, step = 0, churn = 0;
  long exit_after = 0;
  bool thp_disable = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";
    if (!strcmp(a, "--dense")) dense = size_arg(v), i++;
    else if (!strcmp(a, "--sparse")) sparse = size_arg(v), i++;
    else if (!strcmp(a, "--nohuge")) nohuge = size_arg(v), i++;
    else if (!strcmp(a, "--step")) step = size_arg(v), i++;
    else if (!strcmp(a, "--churn")) churn = size_arg(v), i++;
    else if (!strcmp(a, "--exit-after")) exit_after = atol(v), i++;
    else if (!strcmp(a, "--thp-disable")) thp_disable = true;
    else { fprintf(stderr, "agent_target: unknown argument %s\n", a); return 2; }
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGUSR1);
  sigaddset(&signals, SIGUSR2);
  sigaddset(&signals, SIGTERM);
  sigprocmask(SIG_BLOCK, &signals, NULL);

  prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0); /* 4 KiB pages while filling, whatever the system THP mode */
  if (dense) {
    char *p = target_aligned_map(dense);
    target_touch(p, dense, 1);
    printf("dense %p %zu\n", (void *)p, dense);
  }
  if (sparse) {
    char *p = target_aligned_map(sparse);
    target_touch(p, sparse, 10);
    printf("sparse %p %zu\n", (void *)p, sparse);
  }
  if (nohuge) {
    char *p = target_aligned_map(nohuge);
    madvise(p, nohuge, MADV_NOHUGEPAGE);
    target_touch(p, nohuge, 1);
    printf("nohuge %p %zu\n", (void *)p, nohuge);
  }
  char *churned = NULL;
  if (churn) {
    churned = target_aligned_map(churn);
    target_touch(churned, churn, 1);
    printf("churn %p %zu\n", (void *)churned, churn);
  }
  if (!thp_disable) prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
  printf("ready %d\n", (int)getpid());
  fflush(stdout);

  struct timespec limit = {exit_after / 1000, (exit_after % 1000) * 1000000};
  for (;;) {
    int signal = exit_after ? sigtimedwait(&signals, NULL, &limit) : sigwaitinfo(&signals, NULL);
    if (signal == SIGUSR2 && churned) {
      /* a different quarter each round, so every part of a window is given back in turn */
      static unsigned rounds;
      size_t quarter = HUGE / 4, offset = (rounds++ % 4) * quarter;
      for (size_t at = 0; at < churn; at += HUGE) madvise(churned + at + offset, quarter, MADV_DONTNEED);
      for (size_t at = 0; at < churn; at += HUGE) target_touch(churned + at + offset, quarter, 1);
      printf("churned %u\n", rounds);
      fflush(stdout);
      continue;
    }
    if (signal != SIGUSR1) return 0; /* SIGTERM, or the time is up */
    if (!step) continue;
    /* grow: THP off while writing, so the step lands on 4 KiB pages and only a collapse makes it huge */
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    char *p = malloc(step);
    if (!p) return 1;
    target_touch(p, step, 1);
    prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
    printf("grown %p %zu\n", (void *)p, step);
    fflush(stdout);
  }
}
