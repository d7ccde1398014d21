/* SPDX-License-Identifier: MIT */
/* page_sizes.h - the page sizes of this kernel, from what it reports (pure: no I/O; os.h reads the files).
 * The base page is 4, 16 or 64 KiB on arm64 (4 KiB on x86-64), so the PMD huge page is 2 MiB, 32 MiB or
 * 512 MiB, the mTHP sizes (contiguous-PTE folios, hugepages-<N>kB under transparent_hugepage/, 6.8+) run
 * from twice the base page to the PMD, and the hugetlb sizes differ too. Nothing else in hugify assumes
 * a size: it asks here (os_page_sizes()). */
#ifndef HUGIFY_PAGE_SIZES_H
#define HUGIFY_PAGE_SIZES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PAGE_SIZES_MAX 24 /* mTHP sizes: orders 1 to 13 (a 512 MiB PMD of 64 KiB pages); hugetlb: a handful */

/* What the kernel reports, as text. */
struct page_sizes_report {
  uint64_t base_page;       /* the base page size (sysconf(_SC_PAGESIZE)) */
  const char *pmd_size;     /* transparent_hugepage/hpage_pmd_size's text; NULL: no such file (no THP) */
  const char *thp_dirs;     /* the names in /sys/kernel/mm/transparent_hugepage, one a line or space apart
                             * (only hugepages-<N>kB ones count); NULL: none */
  const char *hugetlb_dirs; /* the same of /sys/kernel/mm/hugepages */
};

struct page_sizes {
  uint64_t base;          /* bytes */
  uint64_t pmd;           /* the PMD huge page (what MADV_COLLAPSE and khugepaged make) */
  uint64_t pages_per_pmd; /* base pages in one PMD: 512, 2048 or 8192 */
  bool pmd_reported;      /* false: the kernel has no hpage_pmd_size (THP compiled out); pmd is computed */
  unsigned mthp_count, hugetlb_count;
  uint64_t mthp[PAGE_SIZES_MAX];    /* ascending: the per-size THP controls (the PMD's among them); 0 before 6.8 */
  uint64_t hugetlb[PAGE_SIZES_MAX]; /* ascending: the hugetlb page sizes */
};

/* The sizes from the report. 0, or -EINVAL: a base page that is not a power of two of 4 KiB or more, or a
 * PMD size that is not a power-of-two multiple of it. Sizes that are no power of two are left out. */
int page_sizes_parse(const struct page_sizes_report *report, struct page_sizes *out);

/* The PMD a kernel that reports none would have: one page table of base/8 eight-byte entries. */
uint64_t page_sizes_pmd_of(uint64_t base);

/* Above this a PMD huge page is too big to collapse wisely (512 MiB on 64 KiB pages: one page's copy holds
 * its range's lock for a long time, and a sparse range bloats by up to the whole size). */
#define PAGE_SIZES_COLLAPSE_MAX ((uint64_t)32 * 1024 * 1024)
/* Whether huge pages of `pmd` bytes are worth collapsing to (and faulting whole): up to 32 MiB. */
bool page_sizes_collapse_wise(uint64_t pmd);

/* Whether faults may get folios of a size whose hugepages-<N>kB/enabled says `size_enabled` (the chosen
 * word: "always", "madvise", "inherit", "never"), the top-level enabled saying `top_enabled`: advised
 * memory gets them under always and madvise. */
bool page_sizes_faults_take(const char *size_enabled, const char *top_enabled);

/* What hugify does with memory on these sizes. */
struct page_sizes_choice {
  bool collapse;       /* collapse to the PMD size (false: the PMD is too big, or there is no THP) */
  uint64_t fault_size; /* what to align and advise memory for: the PMD, or, where it is too big, the largest
                        * mTHP size below it that faults take; 0: none (base pages only) */
};
/* takes[i]: whether faults take sizes->mthp[i] (page_sizes_faults_take). */
void page_sizes_choose(const struct page_sizes *sizes, const bool *takes, struct page_sizes_choice *out);

/* "2 MiB", "32 MiB", "64 KiB", "1 GiB": a page size as users read it. */
void page_sizes_name(uint64_t bytes, char *out, size_t cap);

#endif
