/* SPDX-License-Identifier: MIT */
/* backing.c - what actually backs a range of the caller's memory, measured. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "os.h"
#include "probe.h"
#include "procfs.h"

double hugify_backing_huge_fraction(const struct hugify_backing *b) {
  if (!b || b->resident == 0) return 0.0;
  return (double)(b->resident_thp + b->resident_2m + b->resident_1g) / (double)b->resident;
}

static void add_huge(struct hugify_backing *out, uint64_t page_size, uint64_t bytes) {
  if (page_size >= OS_HUGE_1G) out->resident_1g += bytes;
  else if (page_size >= os_pmd_size()) out->resident_2m += bytes;
  else out->resident_thp += bytes;
}

static void finish(struct hugify_backing *out) {
  out->resident = out->resident_4k + out->resident_thp + out->resident_2m + out->resident_1g;
}

/* The part [lo, hi) of one VMA, from one walk of it (exact with PAGEMAP_SCAN or kpageflags), else the
 * VMA's smaps figures prorated to the part asked about: its huge share without PFNs, everything without a
 * pagemap. */
static void measure_vma_part(const struct os_walk *walk, const struct smaps_vma *vma, uint64_t lo, uint64_t hi,
                             struct hugify_backing *out) {
  out->mapped += hi - lo;
  bool hugetlb = smaps_vma_is_hugetlb(vma);
  double share = vma->size ? (double)(hi - lo) / (double)vma->size : 0.0;
  struct resident_bytes r;
  if (walk->pagemap >= 0 && os_walk_windows(walk, lo, hi, hi - lo, &r) == 0) {
    out->zero_page += r.zero;
    if (hugetlb) { add_huge(out, vma->kernel_page_size, r.huge + r.base); return; }
    if (walk->source == OS_WALK_PRESENCE) { /* which of the present bytes are huge: the VMA's share */
      uint64_t thp = smaps_vma_thp_bytes(vma), huge = (uint64_t)(share * (double)thp);
      if (huge > r.base) huge = r.base;
      if (thp) out->approximated |= HUGIFY_BACKING_HUGE_FROM_SMAPS;
      out->approximated |= HUGIFY_BACKING_ZERO_UNSEEN;
      r.huge = huge;
      r.base -= huge;
    }
    out->resident_thp += r.huge;
    out->resident_4k += r.base;
    return;
  }
  out->approximated |= HUGIFY_BACKING_PRORATED;
  if (hugetlb) {
    add_huge(out, vma->kernel_page_size, (uint64_t)(share * (double)smaps_vma_hugetlb_bytes(vma)));
  } else {
    uint64_t thp = smaps_vma_thp_bytes(vma);
    out->resident_thp += (uint64_t)(share * (double)thp);
    out->resident_4k += (uint64_t)(share * (double)(vma->rss > thp ? vma->rss - thp : 0));
  }
}

int hugify_measure_backing(const void *p, size_t size, struct hugify_backing *out) {
  if (!out) return -EINVAL;
  memset(out, 0, sizeof *out);
  uintptr_t start = (uintptr_t)p;
  if (size == 0 || start + size < start) return -EINVAL;
  out->size = size;
  struct smaps_vma *vmas;
  long count = os_read_smaps(0, &vmas);
  if (count < 0) return count == -ENOMEM ? -ENOMEM : -ENOENT;
  struct os_walk walk;
  os_walk_open(0, probe_pagemap_scan(NULL, 0) == HUGIFY_FEATURE_YES, &walk);
  uintptr_t end = start + size;
  for (long i = 0; i < count; i++) {
    uint64_t lo = vmas[i].start > start ? vmas[i].start : start;
    uint64_t hi = vmas[i].end < end ? vmas[i].end : end;
    if (lo < hi) measure_vma_part(&walk, &vmas[i], lo, hi, out);
  }
  os_walk_close(&walk);
  free(vmas);
  out->exact = out->approximated == 0;
  finish(out);
  return 0;
}

int backing_measure_mapping(const void *p, size_t size, enum hugify_page_kind kind, struct hugify_backing *out) {
  struct resident_bytes r;
  uintptr_t start = (uintptr_t)p;
  if (probe_pagemap_scan(NULL, 0) != HUGIFY_FEATURE_YES || os_pagemap_resident(start, start + size, &r) != 0)
    return hugify_measure_backing(p, size, out);
  memset(out, 0, sizeof *out);
  out->size = out->mapped = size;
  out->exact = 1;
  out->zero_page = r.zero;
  if (kind == HUGIFY_PAGE_2M || kind == HUGIFY_PAGE_1G) add_huge(out, page_kind_size(kind), r.huge + r.base);
  else { out->resident_thp = r.huge; out->resident_4k = r.base; }
  finish(out);
  return 0;
}

int backing_measure_collapse_measure(void *p, size_t size, struct hugify_backing *out) {
  backing_measure_mapping(p, size, HUGIFY_PAGE_THP, out);
  if (out->resident_thp >= out->resident || probe_madv_collapse(NULL, 0) != HUGIFY_FEATURE_YES) return 0;
  os_madvise(p, size, MADV_COLLAPSE); /* partial success is what the second measurement shows */
  backing_measure_mapping(p, size, HUGIFY_PAGE_THP, out);
  return 1;
}
