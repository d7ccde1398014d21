/* SPDX-License-Identifier: MIT */
/* target_memory.h - what the helpers that stand in for a program's memory share (agent_target,
 * exact_pagemap_target): a region of its own, and pages written in it. */
#ifndef HUGIFY_TARGET_MEMORY_H
#define HUGIFY_TARGET_MEMORY_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "os.h"

/* The kernel's PMD huge page (2 MiB on x86-64 and arm64's 4 KiB pages, 32 MiB on 16 KiB pages) and base page. */
#define TARGET_HUGE os_pmd_size()
#define TARGET_PAGE os_base_page()

/* PMD-aligned, between read-only neighbours so it stays one mapping of its own. */
static inline char *target_aligned_map(size_t size) {
  char *raw = mmap(NULL, size + 2 * TARGET_HUGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) { perror("mmap"); exit(2); }
  char *at = (char *)(((uintptr_t)raw + 2 * TARGET_HUGE - 1) & ~(uintptr_t)(TARGET_HUGE - 1));
  if (mprotect(at, size, PROT_READ | PROT_WRITE) != 0) { perror("mprotect"); exit(2); }
  return at;
}

/* Write one page in `every` of [p, p + size). */
static inline void target_touch(char *p, size_t size, size_t every) {
  for (size_t at = 0; at < size; at += every * TARGET_PAGE) p[at] = (char)(at / TARGET_PAGE + 1);
}

#endif
