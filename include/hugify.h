/* SPDX-License-Identifier: MIT */
/* hugify.h - huge-page memory with a measured answer.
 *
 * The one public C header of libhugify. Every function is thread-safe unless it says otherwise.
 * Conventions: functions returning int give 0 on success and -errno on failure; functions returning a
 * pointer give NULL and set errno. Enumerations are passed as their enum types. Every public struct ends
 * in `reserved` fields, zero, which later versions may give a meaning: those the caller passes in or gets
 * back (reserved[4], more where growth is planned), and the elements of arrays and the structs embedded in
 * others too (reserved[2]), since an element that grew would move every one after it. Zero the whole
 * struct (`= {0}`, memset) before filling in options. Where a struct has a `reason` field, it holds a
 * human-readable explanation of every fallback or failure (never cut in the middle of a word: text that
 * does not fit ends at a blank with "..."; always NUL-terminated).
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
#define HUGIFY_VERSION_MINOR 3
#define HUGIFY_VERSION_PATCH 1
#define HUGIFY_VERSION_STRING "0.3.1"

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
  uint64_t available; /* free - reserved (0 when reserved >= free): pages a new mapping can still get */
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
  enum hugify_feature_state madv_collapse; /* MADV_COLLAPSE worked on a scratch mapping */
  enum hugify_feature_state process_madvise; /* process_madvise() is available */
  enum hugify_feature_state file_thp_text; /* file-backed text can be collapsed in place */
  enum hugify_feature_state pagemap_scan; /* PAGEMAP_SCAN ioctl (exact hugify_measure_backing) */
  enum hugify_feature_state pmu; /* hardware performance counters */
  int can_change_pools;     /* caller may write nr_hugepages */
  char reason[HUGIFY_REASON_MAX]; /* why any feature is UNKNOWN or NO */
  uint64_t reserved[4];           /* zero: room to grow without an ABI break */
};

/** The PMD huge page of the running kernel, in bytes: what THP and MADV_COLLAPSE make, and the size of the
 *  HUGIFY_PAGE_2M hugetlb kind (named for x86-64). 2 MiB on x86-64 and on arm64 with 4 KiB base pages, 32 MiB
 *  with 16 KiB pages, 512 MiB with 64 KiB pages (transparent_hugepage/hpage_pmd_size; on a kernel without
 *  THP, the PMD its base page implies). Read once; thread-safe. Since 0.3.1. */
uint64_t hugify_pmd_size(void);

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
  int exact;               /* 1: measured per page (PAGEMAP_SCAN, or pagemap + kpageflags as root); 0: see
                              approximated */
  uint64_t approximated;   /* 0 when exact, else HUGIFY_BACKING_* bits: what was approximated and why */
  uint64_t zero_page;      /* bytes that map the shared zero page (read, never written), in no figure above
                              (they stay on 4 KiB pages until written); 0 where not known */
  uint64_t reserved[2];    /* zero: room to grow without an ABI break */
};
/* hugify_backing.approximated */
#define HUGIFY_BACKING_HUGE_FROM_SMAPS 0x1u /* presence per page (pagemap), but which of it is huge prorated from
                                               smaps: no PFNs without CAP_SYS_ADMIN (run as root to be exact) */
#define HUGIFY_BACKING_ZERO_UNSEEN 0x2u     /* no PFNs: zero-page mappings count as resident_4k */
#define HUGIFY_BACKING_PRORATED 0x4u        /* /proc/self/pagemap unreadable: everything prorated from smaps */

/** Measure the range [p, p+size) of the caller's memory. Any range works: a hugify_alloc block, a
 *  malloc'd buffer, a global array, the program text. Returns 0 or -errno (-EINVAL for size 0 or a
 *  range that wraps; -ENOENT when smaps cannot be read). */
int hugify_measure_backing(const void *p, size_t size, struct hugify_backing *out);

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
  uint64_t reserved[4];           /* zero: room to grow without an ABI break */
};

struct hugify_info {
  enum hugify_page_kind kind;     /* the kind that was mapped (and, with POPULATE, measured) */
  size_t requested;               /* the size asked for */
  size_t mapped;                  /* the length actually mapped (rounded to the page size of `kind`) */
  int measured;                   /* 1 when `backing` was measured (POPULATE), 0 otherwise */
  struct hugify_backing backing;  /* with POPULATE: what backs the block, measured after faulting */
  char reason[HUGIFY_REASON_MAX]; /* one clause per kind that was skipped or fell back, and why */
  uint64_t reserved[4];           /* zero: room to grow without an ABI break */
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
 * Pools (hugify pool, hugify status): docs/pool.md and docs/library.md
 * ---------------------------------------------------------------------------------------------- */

#define HUGIFY_MAX_NODES 64

/* One NUMA node's share of a pool. The per-node sysfs files have no reserved or overcommit counts. */
struct hugify_pool_node {
  int node;
  uint64_t total;   /* nr_hugepages of the node (surplus pages included) */
  uint64_t free;    /* free_hugepages */
  uint64_t surplus; /* surplus_hugepages */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

/* The hugetlb pool of one page size, machine-wide and per node. global.total counts surplus pages (pages
 * still in use after the pool was shrunk, or taken through overcommit); the persistent pool, the number
 * hugify_pool_set sets, is total - surplus. */
struct hugify_pool {
  struct hugify_hugetlb_size global;
  int is_default;      /* the default huge page size (Hugepagesize in /proc/meminfo) */
  unsigned node_count; /* nodes with a per-node pool directory; 0 when the kernel has none */
  struct hugify_pool_node nodes[HUGIFY_MAX_NODES]; /* ascending node id */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

/** Every hugetlb pool of this machine, ascending page size. Returns the count stored (<= cap), or -errno
 *  (-ENOENT: the kernel has no hugetlb support). */
int hugify_pool_list(struct hugify_pool *pools, unsigned cap);

/** The pool of one page size. Returns 0, -EINVAL when the kernel has no pages of that size, or -errno. */
int hugify_pool_read(uint64_t page_size, struct hugify_pool *out);

struct hugify_pool_node_result {
  int node;
  uint64_t before;    /* persistent pages of the node before */
  uint64_t requested; /* what the plan asked of the node */
  uint64_t got;       /* persistent pages of the node after, read back from the kernel */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

struct hugify_pool_result {
  uint64_t page_size;
  int node;             /* as asked: a node id, or -1 (the whole machine, spread over the nodes) */
  uint64_t before;      /* persistent pages machine-wide before */
  uint64_t requested;   /* persistent pages machine-wide asked for */
  uint64_t got;         /* persistent pages machine-wide after, read back */
  uint64_t surplus;     /* surplus pages after: pages still in use that leave when their users free them */
  unsigned compactions; /* memory compactions run to fill a short pool */
  int beyond_memory;    /* the request does not fit in the node's memory at all: nothing was written */
  unsigned node_count;  /* 0 on a kernel without per-node pools */
  struct hugify_pool_node_result nodes[HUGIFY_MAX_NODES];
  char reason[HUGIFY_REASON_MAX]; /* the shortfall per node, and what was done about it */
  uint64_t reserved[4];           /* zero: room to grow without an ABI break */
};

/* flags for hugify_pool_set */
#define HUGIFY_POOL_DRY_RUN 0x1u /* plan only: fill nodes[].requested, write nothing, need no privilege */

/** Set the persistent pool of page_size to `count` pages: on `node`, or with node == -1 machine-wide,
 *  spread evenly over the nodes of a NUMA machine (the count is the total, never multiplied by the nodes).
 *  Writes the sysfs files, reads back what the kernel gave, and when short compacts memory and tries
 *  again (twice at most); on a NUMA machine a node that stays short has its deficit offered to the others.
 *  Shrinking never takes pages in use: they stay as surplus until freed. A request larger than a node's
 *  memory writes nothing. result may be NULL.
 *  Returns 0 when the pool holds the count; -ENOMEM when it fell short (result says where, by how much);
 *  -EINVAL for an unknown page size or node; -EACCES when the caller may not write the pool files
 *  (nothing was written); other -errno. */
int hugify_pool_set(uint64_t page_size, int node, uint64_t count, unsigned flags, struct hugify_pool_result *result);

struct hugify_mount_opts {
  const char *dir;    /* NULL: the standard path of the size, /dev/hugepages<size>: "/dev/hugepages2M" */
  unsigned mode;      /* permissions of the mount's root directory; 0 means 01770 */
  uid_t uid;          /* owner of the mount's root directory */
  gid_t gid;          /* its group: the users of this group may create files (with mode 01770) */
  uint64_t max_size;  /* bytes the mount may hold at most; 0 = no limit */
  uint64_t min_size;  /* bytes reserved from the pool for the mount as it is mounted; 0 = none */
  uint64_t reserved[4];           /* zero: room to grow without an ABI break */
};

/** The standard mount point of a page size: "/dev/hugepages2M", "/dev/hugepages1G". */
void hugify_pool_mount_dir(uint64_t page_size, char *buf, size_t cap);

struct hugify_mount_result {
  char reason[HUGIFY_REASON_MAX]; /* what was done or why not ("" when it mounted as asked) */
  uint64_t reserved[4];           /* zero: room to grow without an ABI break */
};

/** Mount hugetlbfs of page_size (opts may be NULL: defaults above), creating the directory if needed.
 *  result may be NULL. Returns 0 (also when that size is already mounted there: the reason says so),
 *  -EINVAL (unknown size, min_size > max_size), -EBUSY (something else is mounted there), -EPERM (needs
 *  CAP_SYS_ADMIN), -errno. */
int hugify_pool_mount(uint64_t page_size, const struct hugify_mount_opts *opts, struct hugify_mount_result *result);

/* Persistence across reboots. These are pure: they return the text of a file (malloc'd, the caller frees)
 * so that a dry run can show it, or a diff against the file that is there. */
#define HUGIFY_POOL_SYSCTL_FILE "/etc/sysctl.d/80-hugify.conf"
#define HUGIFY_POOL_UNIT_DIR "/etc/systemd/system"

struct hugify_pool_request {
  uint64_t page_size;
  int node;       /* -1: the whole machine */
  uint64_t count;
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

/** Text of HUGIFY_POOL_SYSCTL_FILE for the requests that sysctl applies at boot (the default page size,
 *  machine-wide, not gigantic: vm.nr_hugepages). NULL with errno ENOENT when none does. */
char *hugify_pool_sysctl_text(const struct hugify_pool_request *requests, unsigned count, uint64_t default_size);

/** Kernel command-line parameters for the requests sysctl cannot apply (gigantic pages such as 1 GiB, which
 *  need memory unfragmented at boot; per-node counts; sizes other than the default):
 *  "hugepagesz=1G hugepages=2 hugepagesz=2M hugepages=0:256,1:256". "" when every request fits sysctl. */
char *hugify_pool_cmdline_text(const struct hugify_pool_request *requests, unsigned count, uint64_t default_size);

/** A systemd mount unit that mounts hugetlbfs of page_size at boot. unit_name gets its file name as systemd
 *  derives it from the path ("dev-hugepages1G.mount"). NULL with errno EINVAL for a relative dir. */
char *hugify_pool_mount_unit_text(uint64_t page_size, const struct hugify_mount_opts *opts, char *unit_name,
                                  size_t cap);

/* ------------------------------------------------------------------------------------------------
 * Inspect: how much of a process is on huge pages, by class and page kind (from /proc/PID/smaps)
 * ---------------------------------------------------------------------------------------------- */

enum hugify_memory_class {
  HUGIFY_CLASS_CODE = 0,  /* executable mappings: the executable, each shared object, JIT / moved code */
  HUGIFY_CLASS_HEAP = 1,  /* [heap] (brk) */
  HUGIFY_CLASS_ANON = 2,  /* other private anonymous memory (malloc'd by mmap, arenas, private hugetlb) */
  HUGIFY_CLASS_STACK = 3, /* [stack] and thread stacks (see hugify_inspect for how they are found) */
  HUGIFY_CLASS_SHM = 4,   /* shared memory: shared anonymous, /dev/shm, SysV, memfd, shared hugetlb */
  HUGIFY_CLASS_FILE = 5,  /* other file mappings (data and read-only segments, mapped files) and [vvar] */
  HUGIFY_CLASS_COUNT = 6
};
/** "code", "heap", "anon", "stack", "shm", "file". */
const char *hugify_memory_class_name(enum hugify_memory_class memory_class);

/* Why resident memory is not on huge pages: one reason per mapping, the first that applies, in this order. */
enum hugify_not_huge_reason {
  HUGIFY_WHY_NONE = 0,          /* nothing to explain: all resident memory is huge, or none is resident */
  HUGIFY_WHY_THP_DISABLED = 1,  /* the process disabled THP (prctl PR_SET_THP_DISABLE; status THP_enabled: 0) */
  HUGIFY_WHY_NOHUGEPAGE = 2,    /* the mapping is marked MADV_NOHUGEPAGE (VmFlags nh; MAP_STACK sets it too) */
  HUGIFY_WHY_SPECIAL = 3,       /* a kernel special mapping ([vdso], [vvar], ...) */
  HUGIFY_WHY_FILE = 4,          /* file-backed page cache: huge only with file THP (CONFIG_READ_ONLY_THP_FOR_FS) */
  HUGIFY_WHY_SHMEM = 5,         /* a file in tmpfs (/dev/shm): huge at first touch only with the mount's huge= option */
  HUGIFY_WHY_TOO_SMALL = 6,     /* no 2 MiB-aligned 2 MiB window fits in the mapping (too small or unaligned) */
  HUGIFY_WHY_THP_NEVER = 7,     /* system THP mode is "never" */
  HUGIFY_WHY_NOT_ADVISED = 8,   /* system THP mode is "madvise" and the mapping was never madvised */
  HUGIFY_WHY_NOT_COLLAPSED = 9, /* eligible, but faulted on 4 KiB pages and not (yet) collapsed */
  HUGIFY_WHY_SHMEM_UNALIGNED = 10, /* shared memory whose address and file offset disagree modulo 2 MiB (mapped while
                                      shmem_enabled was never): it can never be huge; the program must be restarted */
  HUGIFY_WHY_SHMEM_DENY = 11,    /* shared memory while shmem_enabled is deny */
  HUGIFY_WHY_SHMEM_NOT_HUGE = 12,/* shared memory that can be huge (aligned), on 4 KiB pages: shmem_enabled never,
                                    or advise and not madvised; `hugify collapse PID` fixes it */
  HUGIFY_WHY_THP_EXCEPT_ADVISED = 13, /* the process disabled THP except where it advised (prctl PR_SET_THP_DISABLE
                                         with PR_THP_DISABLE_EXCEPT_ADVISED, Linux 6.18) and this mapping is not
                                         advised: the kernel's THPeligible is 0 for it */
  HUGIFY_WHY_THP_NOT_ELIGIBLE = 14,   /* the kernel says THPeligible: 0 for this anonymous mapping while a THP size
                                         is in mode "always", for no reason above: treated as the program's */
  HUGIFY_WHY_COUNT = 15
};
/* The room not_huge[] keeps for reasons, so that a new reason does not change the layout. */
#define HUGIFY_WHY_MAX 32

/** Short stable name: "none", "thp_disabled", "nohugepage", "special", "file", "shmem", "too_small",
 *  "thp_never", "not_advised", "not_collapsed", "shmem_unaligned", "shmem_deny", "shmem_not_huge",
 *  "thp_except_advised", "thp_not_eligible". */
const char *hugify_not_huge_reason_name(enum hugify_not_huge_reason why);
/** One sentence for people, with the fix where there is one. */
const char *hugify_not_huge_reason_text(enum hugify_not_huge_reason why);

/* A process's own decision about THP, as far as the kernel lets another process see it. The whole-process
 * disable shows as THP_enabled: 0 in /proc/PID/status. "Disabled except where advised" does not show there
 * (THP_enabled stays 1): it shows only in smaps, as THPeligible: 0 on unadvised anonymous mappings, and only
 * while some THP size is in mode "always" (otherwise unadvised mappings are not eligible in any process). */
enum hugify_thp_stance {
  HUGIFY_THP_STANCE_UNKNOWN = 0,  /* status unreadable; or THP_enabled: 1 while no THP size is "always" (enabled
                                     or disabled except advised: the kernel does not show which), or no unadvised
                                     anonymous mapping to tell by */
  HUGIFY_THP_STANCE_ENABLED = 1,
  HUGIFY_THP_STANCE_DISABLED = 2,               /* prctl(PR_SET_THP_DISABLE, 1) */
  HUGIFY_THP_STANCE_DISABLED_EXCEPT_ADVISED = 3 /* prctl(PR_SET_THP_DISABLE, 1, PR_THP_DISABLE_EXCEPT_ADVISED) */
};
/** "unknown", "enabled", "disabled", "disabled_except_advised". */
const char *hugify_thp_stance_name(enum hugify_thp_stance stance);

/* Resident bytes by page kind. Equal to smaps: resident = Rss + Private_Hugetlb + Shared_Hugetlb (smaps
 * leaves hugetlb out of Rss), thp = AnonHugePages + ShmemPmdMapped + FilePmdMapped, base = Rss - thp
 * (PTE-mapped mTHP is in base: smaps does not report it per process). */
struct hugify_usage {
  uint64_t resident;
  uint64_t base;       /* 4 KiB pages (and PTE-mapped mTHP) */
  uint64_t thp;        /* PMD-mapped transparent huge pages */
  uint64_t hugetlb_2m; /* hugetlb 2 MiB pages */
  uint64_t hugetlb_1g; /* hugetlb 1 GiB pages */
  uint64_t anonymous;  /* smaps Anonymous (anonymous pages, including copy-on-write ones in file mappings) */
  uint64_t anon_thp;   /* smaps AnonHugePages */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};
/** Bytes on huge pages (thp + hugetlb_2m + hugetlb_1g). */
uint64_t hugify_usage_huge(const struct hugify_usage *usage);

#define HUGIFY_INSPECT_PATH_MAX 512

struct hugify_inspect_mapping {
  uint64_t start, end;
  char perms[5];                       /* "rw-p" */
  char path[HUGIFY_INSPECT_PATH_MAX];  /* as smaps shows it: "", "[heap]", "[anon:name]", "/usr/lib/..." */
  enum hugify_memory_class memory_class;
  int thread_stack;                    /* 1: a thread stack other than [stack] */
  int object;                          /* code: index into objects[]; -1 otherwise */
  struct hugify_usage usage;
  enum hugify_not_huge_reason why;     /* reason for usage.resident - huge, when that is not 0 */
  int thp_eligible;                    /* smaps THPeligible: 0/1, -1 when the kernel does not say */
  uint64_t aligned_bytes;              /* bytes in 2 MiB-aligned 2 MiB windows of the mapping */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

struct hugify_inspect_object {
  char path[HUGIFY_INSPECT_PATH_MAX];  /* executable or shared object ("[vdso]", "[anon]" for anonymous code) */
  struct hugify_usage code;            /* its executable mappings */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

struct hugify_inspect_report {
  pid_t pid;
  char command[64];                    /* /proc/PID/comm */
  int thp_disabled;                    /* 1: THP_enabled: 0 in /proc/PID/status; 0; -1 unknown */
  char thp_mode[16];                   /* system THP mode: "always", "madvise", "never", "" */
  char shmem_mode[24];                 /* /sys/kernel/mm/transparent_hugepage/shmem_enabled */
  char mthp_sizes[128];                /* mTHP sizes below the PMD size that are enabled ("64K,128K"), or "" */
  struct hugify_usage total;
  struct hugify_usage classes[HUGIFY_CLASS_COUNT];
  uint64_t not_huge[HUGIFY_WHY_MAX];   /* resident bytes not on huge pages, by reason (sums to the total); the
                                          entries from HUGIFY_WHY_COUNT on are zero, room for reasons to come */
  uint64_t collapsible;                /* not-huge bytes `hugify collapse` could put on THP (private anonymous,
                                          writable, in aligned windows, not nohugepage, THP not disabled) */
  unsigned stacks_by_pointer;          /* thread stacks found from a thread's stack pointer */
  unsigned stacks_by_guard;            /* thread stacks found by the guard-page pattern */
  size_t mapping_count;
  struct hugify_inspect_mapping *mappings;  /* malloc'd; hugify_inspect_report_free */
  size_t object_count;
  struct hugify_inspect_object *objects;    /* malloc'd; code per object, in order of first mapping */
  char reason[HUGIFY_REASON_MAX];      /* what could not be read (e.g. thread stack pointers), and why */
  enum hugify_thp_stance thp_stance;   /* the process's own THP decision (see enum hugify_thp_stance) */
  int thp_stance_visible;              /* 1: some THP size is "always", so "disabled except advised" would show */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
  /* What backs the process's data: the malloc it uses, from the libraries it maps ("glibc", "jemalloc",
   * "mimalloc", "tcmalloc"), or a runtime whose own allocator maps the data, bypassing malloc: "pymalloc"
   * (CPython's obmalloc arenas; not with PYTHONMALLOC=malloc in its environment), "v8" (node), "jvm" (its Java
   * heap), "go" (a Go program, from its executable's ELF); "" when not identified (statically linked). At most
   * 15 bytes. Added in 0.3 in the place of reserved[2] and reserved[3]: the layout and size are unchanged. */
  char allocator[16];
};

/** Inspect process `pid` (0 = the caller) from /proc/PID/smaps, /proc/PID/status and the threads'
 *  /proc/PID/task/TID/syscall (stack pointers of threads blocked in a system call). Thread stacks are the
 *  mappings holding such a stack pointer, plus private anonymous read-write mappings directly above a
 *  PROT_NONE guard mapping of at most 1 MiB (the glibc/musl pthread layout); both are reported in counts.
 *  Returns 0, -ESRCH (no such process), -EPERM (not allowed to read its memory map: needs the same user
 *  or CAP_SYS_PTRACE), -ENOMEM, or another -errno; the reason says which. Free with
 *  hugify_inspect_report_free (also after a failure). */
int hugify_inspect(pid_t pid, struct hugify_inspect_report *report);
void hugify_inspect_report_free(struct hugify_inspect_report *report);

/* -- Collapse ------------------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------------------------------
 * Collapse: anonymous memory of this or another process onto THP now (process_madvise + MADV_COLLAPSE)
 * ---------------------------------------------------------------------------------------------- */

#define HUGIFY_COLLAPSE_DRY_RUN 0x1u /* plan and measure only: no MADV_COLLAPSE */
/* Collapse memory the program excluded anyway, where the kernel allows it: "disabled except advised" and
 * THPeligible: 0 (the kernel itself refuses MADV_NOHUGEPAGE mappings and THP-disabled processes). */
#define HUGIFY_COLLAPSE_OVERRIDE_OPT_OUT 0x2u
#define HUGIFY_COLLAPSE_FLAGS_ALL (HUGIFY_COLLAPSE_DRY_RUN | HUGIFY_COLLAPSE_OVERRIDE_OPT_OUT)

struct hugify_collapse_opts {
  uint64_t min_size;   /* skip mappings with fewer bytes than this in aligned 2 MiB windows (0: any with one) */
  uint64_t chunk_size; /* HUGIFY_COLLAPSE_PACE_FULL: at most this many bytes per process_madvise/madvise call
                          (0: 64 MiB; rounded to 2 MiB). The gentle pace ignores it: one window per call. */
  unsigned flags;      /* HUGIFY_COLLAPSE_DRY_RUN, HUGIFY_COLLAPSE_OVERRIDE_OPT_OUT */
  /* Called after every call into the kernel with the bytes tried so far and the bytes planned (may be NULL). */
  void (*progress)(void *context, uint64_t done, uint64_t total);
  void *progress_context;
  /* How fast to work on a live process (enum hugify_collapse_pace; 0, the default, is gentle). This field and
   * the next take the room that was reserved here: the layout is unchanged. */
  uint32_t pace;
  uint32_t reserved_pace;         /* zero */
  uint64_t reserved[3];           /* zero: room to grow without an ABI break */
};

/* What a collapse may cost the process it acts on (docs/design.md, "What a collapse costs the process it acts
 * on"): each window is copied under the target's mmap lock held for write, and its page faults wait for it. */
enum hugify_collapse_pace {
  /* One 2 MiB window per call; before each call a huge page is faulted into the caller and freed (so that
   * the copy's destination is memory the host has backed already, which shortens the lock ~10x on a guest
   * whose memory is backed lazily); after each call a sleep as long as the call's CPU time, so that the
   * target runs at least as long as it is held up, and never meets several windows' pauses in a row. */
  HUGIFY_COLLAPSE_PACE_GENTLE = 0,
  /* chunk_size bytes per call back to back, nothing else: the least wall time, pauses of several windows. */
  HUGIFY_COLLAPSE_PACE_FULL = 1,
};

struct hugify_collapse_mapping {
  uint64_t start, end;
  char path[HUGIFY_INSPECT_PATH_MAX]; /* "", "[heap]", "[anon:name]", ... */
  uint64_t eligible;        /* bytes in 2 MiB-aligned windows */
  uint64_t attempted;       /* bytes asked to collapse (populated windows not already huge) */
  uint64_t failed;          /* bytes of attempted windows the kernel did not collapse */
  uint64_t skipped_empty;   /* bytes of windows with too few resident pages (khugepaged/max_ptes_none) */
  uint64_t resident_before, huge_before; /* smaps Rss and AnonHugePages of the mapping, before */
  uint64_t resident_after, huge_after;   /* and after (equal to before in a dry run or when the target exited) */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

struct hugify_collapse_failure {
  uint64_t start, end;      /* the range (2 MiB windows; consecutive windows with the same error merged) */
  int error;                /* errno from MADV_COLLAPSE: EAGAIN, ENOMEM, EBUSY, EINVAL, ... */
  char reason[192];         /* what that errno means here */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

/* A mapping the program excluded from THP that would otherwise have been collapsed (private anonymous
 * writable, or aligned shared memory, with an aligned 2 MiB window and resident memory). */
struct hugify_collapse_exclusion {
  uint64_t start, end;
  char path[HUGIFY_INSPECT_PATH_MAX];
  uint64_t eligible;        /* bytes in 2 MiB-aligned windows */
  uint64_t resident;        /* smaps Rss */
  enum hugify_not_huge_reason why; /* THP_DISABLED, NOHUGEPAGE, THP_EXCEPT_ADVISED or THP_NOT_ELIGIBLE */
  int overridden;           /* 1: planned anyway (HUGIFY_COLLAPSE_OVERRIDE_OPT_OUT); it is in mappings too */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

struct hugify_collapse_report {
  pid_t pid;                /* the target (the caller's pid for 0) */
  char command[64];         /* /proc/PID/comm ("" when unreadable) */
  int self;                 /* 1: the caller's own memory (madvise), 0: another process (process_madvise) */
  int dry_run;
  int exited;               /* 1: the target exited during the collapse; figures after are missing */
  int thp_disabled;         /* 1: the target disabled THP by prctl; the kernel refuses MADV_COLLAPSE (EINVAL) */
  uint64_t eligible, attempted, failed, skipped_empty;  /* sums over mappings */
  uint64_t resident_before, huge_before, resident_after, huge_after; /* over the eligible mappings */
  double seconds;           /* wall time of the collapse calls in total */
  double cpu_seconds;       /* CPU time the calling thread spent in them (the kernel copies in the caller's
                               context), with the gentle pace's warm pages and the pause readings: the
                               cost without waiting for a CPU on a busy machine */
  double longest_call;      /* seconds of the longest single call (not the pause: a call also sleeps in
                               lru_add_drain_all without holding the target up; see longest_pause) */
  unsigned calls;           /* madvise / process_madvise calls made */
  uint64_t chunk_size;      /* the chunk size used */
  size_t mapping_count;
  struct hugify_collapse_mapping *mappings; /* malloc'd: hugify_collapse_report_free */
  size_t failure_count;
  struct hugify_collapse_failure *failures; /* malloc'd */
  char reason[HUGIFY_REASON_MAX];
  /* Shared memory (shared anonymous, SysV, memfd, tmpfs files) is collapsed like anonymous memory where
   * the kernel allows it; these are the resident bytes of shmem mappings it cannot put on huge pages. They
   * take the room that was reserved here (32 bytes): the layout is unchanged. */
  uint64_t shmem_unaligned; /* mapped where address and file offset disagree modulo 2 MiB (mapped while
                               shmem_enabled was never): only a restart of the program can fix it */
  uint64_t shmem_denied;    /* shmem_enabled is deny */
  char shmem_mode[16];      /* shmem_enabled as it applies to 2 MiB pages, read at the start */
  /* What the program excluded from THP: skipped unless HUGIFY_COLLAPSE_OVERRIDE_OPT_OUT (and then only what the
   * kernel allows). */
  enum hugify_thp_stance thp_stance;  /* the target's own THP decision, as hugify_inspect reports it */
  int thp_stance_visible;   /* 1: some THP size is "always", so "disabled except advised" would show */
  int override_opt_out;     /* 1: HUGIFY_COLLAPSE_OVERRIDE_OPT_OUT was given */
  uint64_t excluded;        /* bytes in aligned windows of the exclusions not overridden (skipped) */
  size_t exclusion_count;
  struct hugify_collapse_exclusion *exclusions; /* malloc'd: hugify_collapse_report_free */
  uint64_t bloat_bytes;     /* memory the collapse added: for each window collapsed, 2 MiB minus the bytes
                               present before (PAGEMAP_SCAN), i.e. zero-filled pages inside new huge pages;
                               0 where the plan could not count pages (no PAGEMAP_SCAN) */
  /* What the target felt (the harm ledger: this pause, bloat_bytes, cpu_seconds). Inferred per call from
   * /proc/PID/task/TID/schedstat before and after it: for each thread that ran in the last 100 ms, the
   * call's span minus the time the thread ran; the call's pause is the largest. An upper bound on how long
   * a thread was held up (it includes waiting for a CPU, and a running thread's time shows only as of its
   * last tick); tight for one-window calls. 0 when the caller collapses its own memory. These fields take
   * the room that was reserved here (64 bytes): the layout is unchanged. */
  double longest_pause;     /* seconds: the longest pause of one call */
  double p99_pause;         /* seconds: the 99th percentile of the calls' pauses */
  double total_pause;       /* seconds: the sum over calls */
  unsigned pause_count;     /* calls during which a thread of the target was busy (the pauses measured) */
  uint32_t pace;            /* enum hugify_collapse_pace used */
  double gap_seconds;       /* the gentle pace's sleeps after calls, in total */
  uint64_t reserved[3];     /* zero: room to grow without an ABI break */
};

/** Put the existing anonymous memory of process `pid` (0 = the caller) on transparent huge pages now,
 *  with MADV_COLLAPSE: madvise for the caller, process_madvise(pidfd, ranges, MADV_COLLAPSE) for another
 *  process. Memory the program excluded from THP (THP disabled for the process, also "except where advised";
 *  MADV_NOHUGEPAGE; THPeligible: 0 while a THP size is "always") is skipped and listed in exclusions.
 *  Eligible mappings: private anonymous, writable, not MADV_NOHUGEPAGE, not hugetlb, with at least
 *  one 2 MiB-aligned window (and min_size bytes of them); and shared memory (shmem: shared anonymous, SysV,
 *  memfd, tmpfs files) whose address agrees with its file offset modulo 2 MiB, unless shmem_enabled is deny
 *  (the rest is counted in shmem_unaligned / shmem_denied). Windows already huge are skipped, and so are
 *  windows with more empty pages than khugepaged/max_ptes_none allows (MADV_COLLAPSE would fill them).
 *  opts may be NULL. Returns 0 when the pass ran (failed ranges and an exit of the target mid-way are in
 *  the report), or -EINVAL (bad arguments), -ESRCH (no such process), -EPERM (not permitted: process_madvise
 *  needs PTRACE_MODE_READ on the target, i.e. the same user or CAP_SYS_PTRACE, and CAP_SYS_NICE), -ENOSYS
 *  (the kernel lacks MADV_COLLAPSE, Linux 6.1+, or process_madvise, Linux 5.10+), -ENOMEM; the reason
 *  says which and what to do. Free with hugify_collapse_report_free (also after a failure). */
int hugify_collapse(pid_t pid, const struct hugify_collapse_opts *opts, struct hugify_collapse_report *report);
void hugify_collapse_report_free(struct hugify_collapse_report *report);

/* ------------------------------------------------------------------------------------------------
 * Text: code onto huge pages at run time (executable and shared objects)
 * ---------------------------------------------------------------------------------------------- */

/* How a segment's code got onto huge pages. */
enum hugify_text_path {
  HUGIFY_TEXT_SKIPPED = 0,   /* not moved: the reason says why                                        */
  HUGIFY_TEXT_IN_PLACE = 1,  /* MADV_COLLAPSE of the file-backed mapping itself (needs file THP)      */
  HUGIFY_TEXT_COPY_SWAP = 2  /* a byte-identical huge-page copy, swapped in with one mremap           */
};
/** "skipped", "in-place", "copy-swap". */
const char *hugify_text_path_name(enum hugify_text_path path);

/* The steps of moving one segment, in order. Every step before HUGIFY_TEXT_STEP_SWAP leaves the original
 * code untouched when it fails; after it, failures are reported and the moved code stays. */
enum hugify_text_step {
  HUGIFY_TEXT_STEP_NONE = 0,     /* no step (failed_step when none failed) */
  HUGIFY_TEXT_STEP_CHECK = 1,    /* read smaps: the window must be private r-x code, unmodified, not moved yet */
  HUGIFY_TEXT_STEP_IN_PLACE = 2, /* path 1: MADV_HUGEPAGE + MADV_COLLAPSE on the file mapping (when the kernel can) */
  HUGIFY_TEXT_STEP_RESERVE = 3,  /* map the copy elsewhere: 2 MiB aligned (THP) or from the hugetlb pool */
  HUGIFY_TEXT_STEP_ADVISE = 4,   /* MADV_HUGEPAGE on the copy (THP) */
  HUGIFY_TEXT_STEP_COPY = 5,     /* copy the bytes from the live mapping (faults in the huge pages) */
  HUGIFY_TEXT_STEP_COLLAPSE = 6, /* MADV_COLLAPSE what is not huge yet; give up when nothing is */
  HUGIFY_TEXT_STEP_PROTECT = 7,  /* mprotect the copy to read+execute (never writable and executable) */
  HUGIFY_TEXT_STEP_NAME = 8,     /* name the copy "hugify-text:PATH" (a failure here is only reported) */
  HUGIFY_TEXT_STEP_SWAP = 9,     /* one mremap(MREMAP_MAYMOVE | MREMAP_FIXED) over the original window */
  HUGIFY_TEXT_STEP_VERIFY = 10,  /* measure the window in smaps: bytes on huge pages */
  HUGIFY_TEXT_STEP_PERF_MAP = 11,/* append the moved functions to /tmp/perf-PID.map (HUGIFY_TEXT_PERF_MAP) */
  HUGIFY_TEXT_STEP_COUNT = 12
};
/** "check", "in-place", "reserve", ... "perf-map"; "?" for anything else. */
const char *hugify_text_step_name(enum hugify_text_step step);

/* flags for struct hugify_text_opts */
#define HUGIFY_TEXT_MAIN_ONLY 0x1u   /* only the main program, no shared objects                        */
#define HUGIFY_TEXT_PERF_MAP 0x2u    /* write /tmp/perf-PID.map for the moved functions (perf, not gdb)  */
#define HUGIFY_TEXT_NO_IN_PLACE 0x4u /* never path 1, always copy and swap                               */
#define HUGIFY_TEXT_FLAGS_ALL (HUGIFY_TEXT_MAIN_ONLY | HUGIFY_TEXT_PERF_MAP | HUGIFY_TEXT_NO_IN_PLACE)

struct hugify_text_opts {
  unsigned flags;                /* HUGIFY_TEXT_* above */
  enum hugify_page_kind kind;    /* HUGIFY_PAGE_THP (also what 0 means), or HUGIFY_PAGE_2M: hugetlb pages for a
                                  * segment when the pool has enough free ones, else THP (the reason says so) */
  uint64_t min_size;             /* skip objects with fewer bytes of executable code; 0 = no minimum */
  const char *include;           /* ':'-separated fnmatch(3) patterns, matched against an object's path and
                                  * against its file name; NULL or "" = every object */
  const char *exclude;           /* same syntax: objects matching any of these are skipped */
  uint64_t reserved[4];           /* zero: room to grow without an ABI break */
};

#define HUGIFY_TEXT_MAX_SEGMENTS 4 /* executable segments per object kept in the report */
#define HUGIFY_TEXT_PATH_MAX 1024

struct hugify_text_segment {
  uint64_t start, end;               /* the executable segment as mapped (page-rounded addresses) */
  uint64_t window_start, window_end; /* its 2 MiB-aligned interior; equal when it has none. Head and tail
                                      * outside the window stay where they are, on 4 KiB pages */
  enum hugify_text_path path;        /* what was done */
  enum hugify_page_kind kind;        /* page kind of the window now: THP or 2M when moved, 4K when skipped */
  uint64_t huge_bytes;               /* measured in smaps after the move: bytes of the window on huge pages */
  uint64_t nanoseconds;              /* time this segment took, all steps */
  enum hugify_text_step failed_step; /* the step that failed, HUGIFY_TEXT_STEP_NONE if none did */
  char reason[HUGIFY_REASON_MAX];    /* why skipped or short of fully huge; "" when fully done */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

struct hugify_text_object {
  char path[HUGIFY_TEXT_PATH_MAX];   /* the file (the main program's from /proc/self/exe) */
  uint64_t base;                     /* load bias: address = base + p_vaddr */
  int main_program;                  /* 1 for the executable itself */
  uint64_t text_bytes;               /* bytes in executable PT_LOAD segments */
  uint64_t window_bytes;             /* of those, in 2 MiB-aligned windows: what could be moved */
  uint64_t huge_bytes;               /* measured on huge pages after the remap */
  uint64_t nanoseconds;
  unsigned segment_count;            /* executable segments; the first HUGIFY_TEXT_MAX_SEGMENTS are below */
  struct hugify_text_segment segments[HUGIFY_TEXT_MAX_SEGMENTS];
  char reason[HUGIFY_REASON_MAX];    /* why the whole object was skipped; "" when its segments were tried */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

struct hugify_text_report {
  size_t object_count;               /* every loaded object, in dl_iterate_phdr order (main program first) */
  struct hugify_text_object *objects;/* malloc'd by hugify_remap_text: release with hugify_text_report_free */
  uint64_t text_bytes, window_bytes; /* sums over the objects */
  uint64_t moved_bytes;              /* bytes of windows swapped (or collapsed in place) */
  uint64_t huge_bytes;               /* measured on huge pages after the remap */
  uint64_t nanoseconds;              /* the whole call */
  unsigned moved_segments, skipped_segments;
  char perf_map[128];                /* the perf map written, "" when none */
  char reason[HUGIFY_REASON_MAX];    /* problems not tied to one segment (perf map, out of memory) */
  uint64_t reserved[4];           /* zero: room to grow without an ABI break */
};

/** Put the code of the main program and of every loaded shared object onto huge pages, now.
 *  Per executable PT_LOAD segment holding at least one 2 MiB-aligned window: in place when the kernel can
 *  collapse file-backed text (path 1), else by copy and swap (path 2): a byte-identical copy of the window
 *  is built in fresh huge-page memory elsewhere, made read+execute, and moved over the original with one
 *  mremap, so the addresses always hold code, no mapping is ever writable and executable, and a failure
 *  before the swap leaves the original untouched. The moved window becomes anonymous memory named
 *  "hugify-text:PATH" in /proc/PID/maps (private to the process: it no longer shares page cache).
 *  Code running during the swap (this function's own, libc's) may be inside a window being moved: the
 *  copy is byte-identical and the swap is one system call, so executing from either is the same.
 *  opts may be NULL (defaults: THP, every object). The report is always filled (on error as far as it
 *  got); free it with hugify_text_report_free. Returns 0 when it ran (skips are in the report), -EINVAL
 *  for bad opts or report == NULL, -ENOMEM when the report could not be allocated. Serialized: concurrent
 *  callers wait; a second call finds the windows already moved and skips them. */
int hugify_remap_text(const struct hugify_text_opts *opts, struct hugify_text_report *report);

/** Free the objects of a report (safe on a zeroed or already freed report). */
void hugify_text_report_free(struct hugify_text_report *report);

/* ELF analysis: what the text remap would cover for a file, from its program headers alone. */
#define HUGIFY_ELF_MAX_LOADS 16

struct hugify_elf_load {
  uint64_t offset, vaddr, file_size, memory_size, align; /* p_offset, p_vaddr, p_filesz, p_memsz, p_align */
  unsigned flags;                                         /* p_flags: 4 read, 2 write, 1 execute */
  uint64_t huge_at_2m;    /* executable: bytes in whole 2 MiB windows when loaded at a 2 MiB-aligned base */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

enum hugify_elf_kind { HUGIFY_ELF_EXECUTABLE = 1, HUGIFY_ELF_PIE = 2, HUGIFY_ELF_SHARED_OBJECT = 3 };

struct hugify_elf_info {
  enum hugify_elf_kind kind;      /* ET_EXEC (fixed address); ET_DYN with DF_1_PIE (or, without DT_FLAGS_1,
                                   * with PT_INTERP and no DT_SONAME): PIE; other ET_DYN: shared object */
  unsigned machine;               /* e_machine (62 = x86-64) */
  uint64_t file_size;             /* the size given to hugify_elf_parse */
  unsigned load_count;            /* PT_LOAD segments in loads[] (at most HUGIFY_ELF_MAX_LOADS) */
  struct hugify_elf_load loads[HUGIFY_ELF_MAX_LOADS];
  unsigned text_segments;         /* executable PT_LOAD segments */
  uint64_t text_bytes;            /* their p_memsz */
  uint64_t max_align;             /* largest p_align: glibc 2.35+ loads ET_DYN at a multiple of it */
  uint64_t huge_at_2m;            /* bytes the remap can put on huge pages when loaded 2 MiB-aligned */
  uint64_t huge_at_4k_min;        /* ... at the worst 4 KiB-aligned load address */
  uint64_t huge_at_4k_mean;       /* ... averaged over the 512 possible 4 KiB-aligned offsets */
  uint64_t huge_expected;         /* ... where it will load: fixed (ET_EXEC) or 2 MiB-aligned when max_align is
                                   * >= 2 MiB use huge_at_2m, else huge_at_4k_min */
  uint64_t huge_relinked;         /* ... after relinking with HUGIFY_ELF_LINK_FLAGS: every executable segment
                                   * then starts on a 2 MiB boundary, so only its tail stays on 4 KiB pages */
  int text_aligned;               /* every executable segment has p_align >= 2 MiB (linked for huge text) */
  uint64_t relinked_size_estimate;/* file size after relinking with the 2 MiB page-size flags (estimate: each
                                   * segment starts on a 2 MiB boundary of the file); = file_size if aligned */
  int symbols;                    /* function symbols for a perf map: in .symtab, else .dynsym; -1 when the
                                   * section headers lie beyond the data given */
  int has_symtab;                 /* 1 .symtab present, 0 stripped, -1 unknown */
  char interpreter[256];          /* PT_INTERP, the program interpreter ("/lib64/ld-linux-x86-64.so.2"); "" when
                                   * there is none (a static executable, most shared objects): such a program
                                   * ignores LD_PRELOAD; "?" when it lies beyond the data given */
  char reason[HUGIFY_REASON_MAX]; /* why parsing failed */
  uint64_t reserved[4];           /* zero: room to grow without an ABI break */
};

/** The linker flags that make executable segments 2 MiB aligned: the PMD of x86-64 and of arm64 with 4 KiB
 *  pages, kept as it was (API). A kernel with another PMD (hugify_pmd_size(): 32 MiB on arm64's 16 KiB pages)
 *  needs that size instead: "-Wl,-z,max-page-size=SIZE -Wl,-z,common-page-size=SIZE". */
#define HUGIFY_ELF_LINK_FLAGS "-Wl,-z,max-page-size=0x200000 -Wl,-z,common-page-size=0x200000"

/** Pure: analyse an ELF64 little-endian image of `size` bytes (the whole file, or at least its headers).
 *  Returns 0, -ENOEXEC (not ELF, or not 64-bit little-endian) or -EINVAL (truncated or inconsistent
 *  program headers); the reason says which. */
int hugify_elf_parse(const void *data, size_t size, struct hugify_elf_info *out);
/** hugify_elf_parse of a file (mapped read-only). -errno of open/mmap as well. */
int hugify_elf_read(const char *path, struct hugify_elf_info *out);

/* ------------------------------------------------------------------------------------------------
 * Counters: TLB misses of a process, from the hardware PMU (perf_event_open), where there is one
 * ---------------------------------------------------------------------------------------------- */

/* The generic perf events hugify counts (perf's names in quotes). Page-walk cycles have no generic event
 * (they are model-specific raw events), so dTLB-load-misses, which Intel counts as "misses that caused a
 * page walk", stands for the walks. */
enum hugify_counter {
  HUGIFY_COUNTER_CYCLES = 0,        /* "cycles"            */
  HUGIFY_COUNTER_INSTRUCTIONS,      /* "instructions"      */
  HUGIFY_COUNTER_DTLB_LOADS,        /* "dTLB-loads"        */
  HUGIFY_COUNTER_DTLB_LOAD_MISSES,  /* "dTLB-load-misses"  */
  HUGIFY_COUNTER_DTLB_STORES,       /* "dTLB-stores"       */
  HUGIFY_COUNTER_DTLB_STORE_MISSES, /* "dTLB-store-misses" */
  HUGIFY_COUNTER_ITLB_LOADS,        /* "iTLB-loads"        */
  HUGIFY_COUNTER_ITLB_LOAD_MISSES,  /* "iTLB-load-misses"  */
  HUGIFY_COUNTER_COUNT
};

/** perf's name of a counter ("dTLB-load-misses"); "?" for anything else. */
const char *hugify_counter_name(enum hugify_counter counter);

/* Counters opened on one process: one perf event per counter (not a group, so the kernel can multiplex
 * them on a PMU with few registers; the values are scaled back up). */
struct hugify_counter_set {
  int fd[HUGIFY_COUNTER_COUNT];   /* -1: not open */
  unsigned opened;                /* how many are open */
  char reason[HUGIFY_REASON_MAX]; /* why a counter is missing: "no PMU: ..." when there is none at all */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

struct hugify_counter_values {
  uint64_t value[HUGIFY_COUNTER_COUNT]; /* user-space counts, scaled for multiplexing */
  unsigned present;                     /* bit (1u << counter) set: that counter ran and value[] holds it */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

/** Open every counter of enum hugify_counter that this machine offers, counting user space only, for
 *  process pid and the threads and children it creates later (inherit):
 *   - pid > 0: a child stopped between fork and execve (e.g. blocked on a pipe); counting starts at its
 *     execve (enable_on_exec), so the fork/exec machinery is not counted;
 *   - pid == 0: the caller, counting from now.
 *  Returns how many opened (> 0); -ENOENT when the machine has no PMU (reason starts with "no PMU: ");
 *  -EACCES when perf_event_paranoid forbids it (reason names the sysctl); -EINVAL for a negative pid or
 *  set == NULL; other -errno. On error nothing stays open. */
int hugify_counters_open(struct hugify_counter_set *set, pid_t pid);

/** Read the counters (after the process has exited, or at any time). Counters that never ran are left out
 *  of `present`. Returns 0 or -errno (-EBADF when the set is not open). */
int hugify_counters_read(const struct hugify_counter_set *set, struct hugify_counter_values *out);

/** Close the counters (safe on a set that failed to open or is already closed). */
void hugify_counters_close(struct hugify_counter_set *set);

/** Pure: a count the kernel multiplexed, scaled to the whole time the counter was enabled:
 *  raw * time_enabled / time_running, rounded; 0 when it never ran (time_running == 0). */
uint64_t hugify_counter_scale(uint64_t raw, uint64_t time_enabled, uint64_t time_running);

/* Rates computed from counter values. Each is NaN when a count it needs is not present or its
 * denominator is 0. */
struct hugify_tlb_rates {
  double dtlb_load_miss_rate;        /* dTLB-load-misses / dTLB-loads                               */
  double dtlb_store_miss_rate;       /* dTLB-store-misses / dTLB-stores                             */
  double itlb_miss_rate;             /* iTLB-load-misses / iTLB-loads                               */
  double dtlb_misses_per_kilo_instructions; /* (dTLB load + store misses) per 1000 instructions     */
  double itlb_misses_per_kilo_instructions; /* iTLB-load-misses per 1000 instructions               */
  double instructions_per_cycle;     /* instructions / cycles                                       */
  uint64_t reserved[2];           /* zero: room to grow without an ABI break */
};

/** Pure: the rates of a set of counter values. */
void hugify_counters_rates(const struct hugify_counter_values *values, struct hugify_tlb_rates *out);

#define HUGIFY_TLB_MISS_RATE_HELPS 0.05            /* dTLB load miss rate above which huge pages help  */
#define HUGIFY_TLB_WORKING_SET_HELPS (8ull * 1024 * 1024)  /* working set above which they can: the 4 KiB TLB reach */

/** Pure: the rule of thumb for data — huge pages help when the dTLB load miss rate is above ~5-10 %
 *  (HUGIFY_TLB_MISS_RATE_HELPS) and the working set is larger than the TLB covers with 4 KiB pages
 *  (HUGIFY_TLB_WORKING_SET_HELPS). Returns 1 (they should help), 0 (they should not), -1 (unknown: no dTLB
 *  miss rate). working_set_bytes is e.g. the peak RSS. */
int hugify_tlb_rule_of_thumb(const struct hugify_tlb_rates *rates, uint64_t working_set_bytes);

#ifdef __cplusplus
}
#endif

#endif /* HUGIFY_H */
