/* SPDX-License-Identifier: MIT */
/* exact_pagemap_target - a child whose memory has known shapes, for the plan's walk on every kernel (with and
 * without PAGEMAP_SCAN): each region is two PMD windows (4 MiB on x86-64), PMD-aligned, a mapping of its own.
 *
 *   dense   every page written, THP off while writing: 4 KiB pages
 *   sparse  every tenth page written (pages 0, 10, 20, ... of the region), 4 KiB pages
 *   huge    MADV_HUGEPAGE, every page written; MADV_COLLAPSE where a fault did not give a huge page
 *   empty   mapped, never touched
 *   zero    every page read, never written, THP off: the shared zero page
 *   hugezero MADV_HUGEPAGE, every page read, never written: the huge zero page (where use_zero_page is 1)
 *   churn   as huge, then a quarter of each window given back (MADV_DONTNEED: the PMD is split, the THP
 *           is not yet) and half of that quarter written again (new 4 KiB pages beside the THP's)
 *   split   as huge, then one page of each window mprotect'ed read-only and back: the PMD is split but
 *           every PTE still maps the THP in place (the one shape kpageflags cannot tell from a PMD)
 * churn and split are then marked MADV_NOHUGEPAGE, so that they stay in that shape.
 *
 * On stdout, "NAME 0xADDRESS SIZE" per region, then "ready PID". SIGTERM ends it. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "os.h"
#include "target_memory.h"

#define HUGE TARGET_HUGE
#define PAGE TARGET_PAGE
#define REGION (2 * HUGE)

static char *huge_region(void) {
  char *p = target_aligned_map(REGION);
  madvise(p, REGION, MADV_HUGEPAGE);
  target_touch(p, REGION, 1);
  madvise(p, REGION, MADV_COLLAPSE); /* where the faults fell back to 4 KiB pages; EINVAL before 6.1 */
  return p;
}

static void show(const char *name, const char *p) { printf("%s %p %llu\n", name, (const void *)p, (unsigned long long)REGION); }

int main(void) {
  prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0); /* 4 KiB pages while filling, whatever the system THP mode */
  char *dense = target_aligned_map(REGION), *sparse = target_aligned_map(REGION), *empty = target_aligned_map(REGION), *zero = target_aligned_map(REGION);
  target_touch(dense, REGION, 1);
  target_touch(sparse, REGION, 10);
  volatile char sum = 0;
  for (size_t at = 0; at < REGION; at += PAGE) sum += zero[at];
  prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
  char *huge = huge_region(), *churn = huge_region(), *split = huge_region(), *hugezero = target_aligned_map(REGION);
  madvise(hugezero, REGION, MADV_HUGEPAGE);
  for (size_t at = 0; at < REGION; at += PAGE) sum += hugezero[at];
  for (size_t w = 0; w < REGION; w += HUGE) {
    madvise(churn + w + HUGE / 2, HUGE / 4, MADV_DONTNEED);
    target_touch(churn + w + HUGE / 2, HUGE / 8, 1);
    mprotect(split + w + HUGE / 2, PAGE, PROT_READ);
    mprotect(split + w + HUGE / 2, PAGE, PROT_READ | PROT_WRITE);
  }
  /* kept as made: neither khugepaged nor the agent puts these back on a PMD while the test looks */
  madvise(churn, REGION, MADV_NOHUGEPAGE);
  madvise(split, REGION, MADV_NOHUGEPAGE);
  show("dense", dense);
  show("sparse", sparse);
  show("huge", huge);
  show("empty", empty);
  show("zero", zero);
  show("hugezero", hugezero);
  show("churn", churn);
  show("split", split);
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigprocmask(SIG_BLOCK, &signals, NULL);
  sigwaitinfo(&signals, NULL);
  return 0;
}
