/* SPDX-License-Identifier: MIT */
/* alloc_check.c - a consumer of the installed libhugify (C): allocate 64 MiB through the fallback chain,
 * fault it in, and check what really backs it. Exit 0 when the block is on the huge pages hugify_alloc
 * reported, 1 when it fell short. */
#include <hugify.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  const size_t size = (size_t)64 << 20;
  struct hugify_opts opts = {.flags = HUGIFY_POPULATE}; /* default chain: 1G, 2M, THP, 4K */
  struct hugify_info info;
  char *p = hugify_alloc(size, &opts, &info);
  if (!p) {
    fprintf(stderr, "alloc_check: hugify_alloc failed: %s\n", info.reason);
    return 1;
  }
  memset(p, 1, size);
  struct hugify_backing b;
  if (hugify_measure_backing(p, size, &b) != 0) {
    fprintf(stderr, "alloc_check: hugify_measure_backing failed\n");
    return 1;
  }
  double huge = hugify_backing_huge_fraction(&b);
  printf("libhugify %s: 64 MiB on %s pages, %.1f%% huge (measured)%s%s\n", hugify_version(),
         hugify_page_kind_name(info.kind), 100.0 * huge, info.reason[0] ? "; fallbacks: " : "", info.reason);
  int ok = info.kind == HUGIFY_PAGE_4K ? 0 : huge >= 0.95;
  if (hugify_free(p, size) != 0) ok = 0;
  if (!ok) fprintf(stderr, "alloc_check: the block is not on huge pages\n");
  return ok ? 0 : 1;
}
