/* SPDX-License-Identifier: MIT */
/* /proc/PID/pagemap and /proc/kpageflags words: the input is read as 64-bit words, a PMD's pagemap entries
 * then their kpageflags (missing words are zero), through the plan's walk's decoding (procfs.c):
 * pagemap_aligned_run, kpageflags_run, pagemap_count, pagemap_huge_from_smaps; and inspect's folio sizes
 * (kpageflags_folios), which never count more than the entries map. */
#include <string.h>

#include "fuzz_input.h"
#include "procfs.h"

#define PMD_PAGES 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint64_t words[2 * PMD_PAGES] = {0};
  memcpy(words, data, size < sizeof words ? size : sizeof words);
  const uint64_t *entries = words, *flags = words + PMD_PAGES;
  size_t n = size / 8 < PMD_PAGES ? size / 8 : PMD_PAGES; /* a run of any length, as the ends of a range are */
  enum kpage_run run = pagemap_aligned_run(entries, n, PMD_PAGES) ? kpageflags_run(flags, n) : KPAGE_RUN_SMALL;
  struct resident_bytes windows[2] = {{0, 0, 0}, {0, 0, 0}};
  pagemap_count(entries, n, run, pagemap_pfn(entries[0]), 4096, &windows[0]);
  pagemap_count(entries, PMD_PAGES, kpageflags_run(flags, PMD_PAGES), 0, 4096, &windows[1]);
  if (windows[0].base + windows[0].huge + windows[0].zero > (uint64_t)n * 4096) __builtin_trap();
  bool certain = pagemap_huge_from_smaps(windows, 2, (uint64_t)PMD_PAGES * 4096, words[PMD_PAGES - 1]);
  struct folio_bytes folios = {{0}, 0, 0};
  kpageflags_folios(entries, flags, n, pagemap_pfn(entries[0]), 4096, &folios);
  uint64_t counted = folios.hugetlb + folios.partial;
  for (unsigned order = 0; order < FOLIO_ORDERS; order++) counted += folios.by_order[order];
  if (counted > (uint64_t)n * 4096) __builtin_trap();
  fuzz_keep(windows[0].huge + windows[1].base + certain + counted);
  return 0;
}
