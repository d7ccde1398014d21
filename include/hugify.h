/* hugify.h - huge-page memory with a measured answer.
 *
 * The one public C header of libhugify. Every function is thread-safe unless it says otherwise.
 * Conventions: functions returning int give 0 on success and -errno on failure; functions returning a
 * pointer give NULL and set errno. Where a struct has a `reason` field, it holds a human-readable
 * explanation of every fallback or failure (never truncated mid-word, always NUL-terminated).
 */
#ifndef HUGIFY_H
#define HUGIFY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HUGIFY_VERSION_MAJOR 0
#define HUGIFY_VERSION_MINOR 1
#define HUGIFY_VERSION_PATCH 0
#define HUGIFY_VERSION_STRING "0.1.0"

/** The version of the library actually loaded (may differ from the header's). */
const char *hugify_version(void);

#define HUGIFY_REASON_MAX 512

/* ------------------------------------------------------------------------------------------------
 * Page kinds
 * ---------------------------------------------------------------------------------------------- */

enum hugify_page_kind {
  HUGIFY_PAGE_4K = 0,  /* base pages (4 KiB on x86-64)                         */
  HUGIFY_PAGE_THP = 1, /* transparent huge pages, PMD-mapped (2 MiB on x86-64) */
  HUGIFY_PAGE_2M = 2,  /* hugetlb pool pages of 2 MiB                           */
  HUGIFY_PAGE_1G = 3,  /* hugetlb pool pages of 1 GiB                           */
  HUGIFY_PAGE_KIND_COUNT = 4
};

/** Short stable name of a kind: "4K", "THP", "2M", "1G". */
const char *hugify_page_kind_name(enum hugify_page_kind kind);

/** Parse "4K", "THP", "2M", "1G" (case-insensitive; also "4k", "thp", "2MB", "1GB"). -EINVAL if unknown. */
int hugify_page_kind_parse(const char *text, enum hugify_page_kind *kind);

/* ------------------------------------------------------------------------------------------------
 * Probe: what this machine offers, measured now
 * ---------------------------------------------------------------------------------------------- */

#define HUGIFY_MAX_HUGETLB_SIZES 8

struct hugify_hugetlb_size {
  uint64_t page_size; /* bytes */
  uint64_t total;     /* nr_hugepages */
  uint64_t free;      /* free_hugepages */
  uint64_t reserved;  /* resv_hugepages: promised to mappings, not yet faulted */
  uint64_t surplus;   /* surplus_hugepages */
  uint64_t overcommit;/* nr_overcommit_hugepages */
};

enum hugify_feature_state {
  HUGIFY_FEATURE_UNKNOWN = -1, /* could not be determined (the reason says why) */
  HUGIFY_FEATURE_NO = 0,
  HUGIFY_FEATURE_YES = 1
};

struct hugify_system {
  char kernel_release[65];
  uint64_t base_page_size;  /* bytes */
  uint64_t default_hugetlb_size; /* Hugepagesize from /proc/meminfo, 0 if none */
  unsigned hugetlb_size_count;
  struct hugify_hugetlb_size hugetlb[HUGIFY_MAX_HUGETLB_SIZES]; /* ascending page size */
  char thp_enabled[16];     /* "always", "madvise", "never", or "" when THP is absent */
  char thp_defrag[24];      /* "always", "defer", "defer+madvise", "madvise", "never", or "" */
  uint64_t thp_pmd_size;    /* bytes, 0 when THP is absent */
  int madv_collapse;        /* enum hugify_feature_state: MADV_COLLAPSE worked on a scratch mapping */
  int process_madvise;      /* enum hugify_feature_state: process_madvise() is available */
  int file_thp_text;        /* enum hugify_feature_state: file-backed text can be collapsed in place */
  int pagemap_scan;         /* enum hugify_feature_state: PAGEMAP_SCAN ioctl (exact hugify_backing) */
  int pmu;                  /* enum hugify_feature_state: hardware performance counters */
  int can_change_pools;     /* caller may write nr_hugepages */
  char reason[HUGIFY_REASON_MAX]; /* why any feature is UNKNOWN or NO */
};

/** Fill *sys with what this machine offers. Returns 0, or -errno (only for sys == NULL). Takes a few ms:
 *  it maps, populates and collapses a 4 MiB scratch region to test MADV_COLLAPSE. */
int hugify_probe(struct hugify_system *sys);

/* ------------------------------------------------------------------------------------------------
 * Backing: what actually backs a range (measured)
 * ---------------------------------------------------------------------------------------------- */

struct hugify_backing {
  uint64_t size;           /* bytes of the range asked about */
  uint64_t mapped;         /* bytes of the range that are mapped at all */
  uint64_t resident;       /* bytes resident in memory (sum of the four below) */
  uint64_t resident_4k;    /* on base pages (includes PTE-mapped mTHP) */
  uint64_t resident_thp;   /* on PMD-mapped transparent huge pages */
  uint64_t resident_2m;    /* on hugetlb 2 MiB pages */
  uint64_t resident_1g;    /* on hugetlb 1 GiB pages */
  int exact;               /* 1: per-page measurement (PAGEMAP_SCAN); 0: prorated from smaps per mapping */
};

/** Measure the range [p, p+size) of the caller's memory. Any range works: a hugify_alloc block, a
 *  malloc'd buffer, a global array, the program text. Returns 0 or -errno (-EINVAL for size 0 or a
 *  range that wraps; -ENOENT when smaps cannot be read). */
int hugify_backing(const void *p, size_t size, struct hugify_backing *out);

/** Share of the range on huge pages (THP + 2M + 1G) over resident bytes, in [0, 1]; 0 if none resident. */
double hugify_backing_huge_fraction(const struct hugify_backing *b);

/* ------------------------------------------------------------------------------------------------
 * Allocation: the fallback chain 1G -> 2M -> THP -> 4K
 * ---------------------------------------------------------------------------------------------- */

/* flags for struct hugify_opts */
#define HUGIFY_STRICT   0x1u /* only the first kind in the chain; fail with ENOMEM instead of falling back */
#define HUGIFY_POPULATE 0x2u /* fault the memory in now (and collapse THP), then measure what backs it */
#define HUGIFY_FLAGS_ALL (HUGIFY_STRICT | HUGIFY_POPULATE)

struct hugify_opts {
  /* The chain, most preferred first. kind_count == 0 means the default chain 1G, 2M, THP, 4K, in which a
   * hugetlb kind is skipped when the request is smaller than one of its pages (no 1 GiB page for 3 MiB).
   * An explicit chain is tried as given, whatever the size. */
  enum hugify_page_kind kinds[HUGIFY_PAGE_KIND_COUNT];
  unsigned kind_count;
  unsigned flags; /* HUGIFY_STRICT | HUGIFY_POPULATE */
};

struct hugify_info {
  enum hugify_page_kind kind;     /* the kind that was mapped (and, with POPULATE, measured) */
  size_t requested;               /* the size asked for */
  size_t mapped;                  /* the length actually mapped (rounded to the page size of `kind`) */
  int measured;                   /* 1 when `backing` was measured (POPULATE), 0 otherwise */
  struct hugify_backing backing;  /* with POPULATE: what backs the block, measured after faulting */
  char reason[HUGIFY_REASON_MAX]; /* one clause per kind that was skipped or fell back, and why */
};

/** Allocate size bytes of memory, aligned to its page size, through the fallback chain.
 *  opts may be NULL (default chain, no flags); info may be NULL.
 *  hugetlb memory is never mapped MAP_NORESERVE: the pool pages are reserved by the mmap itself, so a
 *  later fault cannot SIGBUS; a pool that is short moves on to the next kind.
 *  Returns NULL with errno: EINVAL (size 0, size overflowing when rounded, unknown flags or kinds),
 *  ENOMEM (nothing in the chain could be had; with STRICT, the first kind could not). */
void *hugify_alloc(size_t size, const struct hugify_opts *opts, struct hugify_info *info);

/** Free a block from hugify_alloc. size must be the size passed to hugify_alloc.
 *  Returns 0, or -EINVAL when p is not a live hugify_alloc block of that size (nothing is unmapped). */
int hugify_free(void *p, size_t size);

/** Number of live hugify_alloc blocks (for leak checks). */
size_t hugify_live_blocks(void);

/* ------------------------------------------------------------------------------------------------
 * Pools (hugify pool, hugify status): see pool.c
 * ---------------------------------------------------------------------------------------------- */

/* ------------------------------------------------------------------------------------------------
 * Collapse: anonymous memory of this or another process onto THP now (process_madvise + MADV_COLLAPSE)
 * ---------------------------------------------------------------------------------------------- */

/* ------------------------------------------------------------------------------------------------
 * Text: code onto huge pages at run time (executable and shared objects)
 * ---------------------------------------------------------------------------------------------- */

#ifdef __cplusplus
}
#endif

#endif /* HUGIFY_H */
