/* SPDX-License-Identifier: MIT */
/* page_sizes.c - the kernel's page sizes from what it reports (page_sizes.h). Pure. */
#include "page_sizes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "procfs.h"

static bool power_of_two(uint64_t n) { return n && !(n & (n - 1)); }

static int compare_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The hugepages-<N>kB sizes among `names` (white space apart), ascending, no duplicates. */
static unsigned sizes_of_names(const char *names, uint64_t *sizes) {
  unsigned count = 0;
  for (const char *at = names; at && *at && count < PAGE_SIZES_MAX;) {
    size_t skip = strspn(at, " \t\r\n"), length = strcspn(at + skip, " \t\r\n");
    char name[64];
    uint64_t bytes;
    if (length > 0 && length < sizeof name) {
      memcpy(name, at + skip, length);
      name[length] = '\0';
      if (parse_hugepages_dir_name(name, &bytes) && power_of_two(bytes)) sizes[count++] = bytes;
    }
    at += skip + length;
  }
  qsort(sizes, count, sizeof *sizes, compare_u64);
  unsigned kept = 0;
  for (unsigned i = 0; i < count; i++)
    if (kept == 0 || sizes[kept - 1] != sizes[i]) sizes[kept++] = sizes[i];
  return kept;
}

uint64_t page_sizes_pmd_of(uint64_t base) {
  /* A page table is one base page of 8-byte entries, and a PMD entry maps a whole table's worth: 4 KiB x
   * 512 = 2 MiB (x86-64, arm64 4K), 16 KiB x 2048 = 32 MiB, 64 KiB x 8192 = 512 MiB (arm64). This is the
   * fallback for a kernel without hpage_pmd_size (THP compiled out), and holds on x86-64 and arm64. */
  return base * (base / 8);
}

int page_sizes_parse(const struct page_sizes_report *report, struct page_sizes *out) {
  memset(out, 0, sizeof *out);
  if (!power_of_two(report->base_page) || report->base_page < 4096) return -EINVAL;
  out->base = report->base_page;
  uint64_t pmd = 0;
  out->pmd_reported = report->pmd_size && parse_u64(report->pmd_size, &pmd) && pmd != 0;
  if (report->pmd_size && !out->pmd_reported) return -EINVAL;
  out->pmd = out->pmd_reported ? pmd : page_sizes_pmd_of(out->base);
  if (!power_of_two(out->pmd) || out->pmd <= out->base) return -EINVAL;
  out->pages_per_pmd = out->pmd / out->base;
  out->mthp_count = sizes_of_names(report->thp_dirs, out->mthp);
  out->hugetlb_count = sizes_of_names(report->hugetlb_dirs, out->hugetlb);
  return 0;
}

bool page_sizes_collapse_wise(uint64_t pmd) { return pmd != 0 && pmd <= PAGE_SIZES_COLLAPSE_MAX; }

bool page_sizes_faults_take(const char *size_enabled, const char *top_enabled) {
  if (strcmp(size_enabled, "inherit") == 0) size_enabled = top_enabled;
  return strcmp(size_enabled, "always") == 0 || strcmp(size_enabled, "madvise") == 0;
}

void page_sizes_choose(const struct page_sizes *sizes, const bool *takes, struct page_sizes_choice *out) {
  memset(out, 0, sizeof *out);
  if (sizes->pmd_reported && page_sizes_collapse_wise(sizes->pmd)) {
    out->collapse = true;
    out->fault_size = sizes->pmd;
    return;
  }
  for (unsigned i = 0; i < sizes->mthp_count; i++) /* ascending: the last one taken below the PMD */
    if (takes && takes[i] && sizes->mthp[i] < sizes->pmd) out->fault_size = sizes->mthp[i];
}

void page_sizes_name(uint64_t bytes, char *out, size_t cap) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  unsigned unit = 0;
  while (unit < 4 && bytes >= 1024 && bytes % 1024 == 0) { bytes /= 1024; unit++; }
  snprintf(out, cap, "%llu %s", (unsigned long long)bytes, units[unit]);
}
