/* SPDX-License-Identifier: MIT */
/* procfs.h - pure parsers: text of /proc and /sys files -> structs, no I/O. Reading is separate (os.h:
 * os_read_file, os_read_smaps, ...), so every parser is tested on fixture text captured from real machines. */
#ifndef HUGIFY_PROCFS_H
#define HUGIFY_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- small values ---- */
/* Decimal unsigned integer, optional surrounding white space; false on anything else or overflow. */
bool parse_u64(const char *text, uint64_t *value);
/* "hugepages-2048kB" -> 2097152. */
bool parse_hugepages_dir_name(const char *name, uint64_t *bytes);
/* "always [madvise] never" -> "madvise"; a file without brackets yields its whole (trimmed) text. */
void parse_bracketed_choice(const char *text, char *out, size_t cap);

/* ---- "Key: value [kB]" files: /proc/meminfo, /proc/PID/status; "key value": /proc/vmstat ---- */
/* Value of `key` (exact match before ':' or ' '); a "kB" suffix multiplies by 1024. False when the text ends
 * inside the value or its unit (a file cut short: never a smaller number). */
bool parse_keyed_value(const char *text, const char *key, uint64_t *value);

/* ---- /proc/PID/smaps and /proc/PID/maps ---- */
enum smaps_vm_flag {
  SMAPS_VM_READ = 1u << 0,       /* rd */
  SMAPS_VM_WRITE = 1u << 1,      /* wr */
  SMAPS_VM_EXEC = 1u << 2,       /* ex */
  SMAPS_VM_SHARED = 1u << 3,     /* sh */
  SMAPS_VM_HUGEPAGE = 1u << 4,   /* hg: MADV_HUGEPAGE */
  SMAPS_VM_NOHUGEPAGE = 1u << 5, /* nh: MADV_NOHUGEPAGE */
  SMAPS_VM_HUGETLB = 1u << 6,    /* ht */
  SMAPS_VM_GROWSDOWN = 1u << 7,  /* gd: stack */
  SMAPS_VM_MERGEABLE = 1u << 8,  /* mg */
  SMAPS_VM_DONTEXPAND = 1u << 9, /* de */
  SMAPS_VM_IO = 1u << 10,        /* io */
  SMAPS_VM_LOCKED = 1u << 11,    /* lo */
};

#define SMAPS_PATH_MAX 512

struct smaps_vma {
  uint64_t start, end, offset, inode;
  char perms[5];            /* "r-xp" */
  char device[16];          /* "fd:01" */
  char path[SMAPS_PATH_MAX];/* "" for anonymous; "[heap]", "[stack]", "[anon:name]", "/usr/lib/..." */
  /* all sizes in bytes; present only in smaps (0 from maps) */
  uint64_t size, kernel_page_size, mmu_page_size, rss, pss, shared_clean, shared_dirty, private_clean,
      private_dirty, referenced, anonymous, lazy_free, anon_huge, shmem_pmd_mapped, file_pmd_mapped,
      shared_hugetlb, private_hugetlb, swap, swap_pss, locked;
  int thp_eligible;         /* 0/1, -1 when the kernel does not report it */
  unsigned vm_flags;        /* enum smaps_vm_flag; 0 from maps */
  bool has_vm_flags;
};

/* Parse smaps (or maps) text. *out is malloc'd (caller frees); returns the count, or -EINVAL (malformed
 * text) / -ENOMEM (errno untouched). */
long parse_smaps(const char *text, struct smaps_vma **out);

/* Huge-page bytes of a VMA by kind (from its smaps fields). */
uint64_t smaps_vma_thp_bytes(const struct smaps_vma *vma);
uint64_t smaps_vma_hugetlb_bytes(const struct smaps_vma *vma);
bool smaps_vma_is_hugetlb(const struct smaps_vma *vma);

/* ---- /proc/PID/task/TID/syscall and /proc/PID/status (hugify inspect, hugify collapse) ---- */
/* "230 0x0 0x0 0x7ffd... 0x0 0x0 0x64 SP PC" (or "-1 SP PC" when blocked outside a system call) -> SP, the
 * next-to-last field. False for "running" and anything malformed. */
bool parse_task_syscall_sp(const char *text, uint64_t *sp);

/* ---- hugify pool / status: vmstat, buddyinfo, mounts, kernel command line, limits, cgroup, id lists ---- */

/* The /proc/vmstat counters that concern huge pages, in the order of vmstat_counter_names. */
enum vmstat_counter {
  VMSTAT_THP_FAULT_ALLOC, VMSTAT_THP_FAULT_FALLBACK, VMSTAT_THP_FAULT_FALLBACK_CHARGE, VMSTAT_THP_COLLAPSE_ALLOC,
  VMSTAT_THP_COLLAPSE_ALLOC_FAILED, VMSTAT_THP_FILE_ALLOC, VMSTAT_THP_FILE_FALLBACK, VMSTAT_THP_FILE_MAPPED,
  VMSTAT_THP_SPLIT_PAGE, VMSTAT_THP_SPLIT_PAGE_FAILED, VMSTAT_THP_DEFERRED_SPLIT_PAGE, VMSTAT_THP_SPLIT_PMD,
  VMSTAT_THP_ZERO_PAGE_ALLOC, VMSTAT_THP_ZERO_PAGE_ALLOC_FAILED, VMSTAT_THP_SWPOUT, VMSTAT_THP_SWPOUT_FALLBACK,
  VMSTAT_THP_MIGRATION_SUCCESS, VMSTAT_THP_MIGRATION_FAIL, VMSTAT_COMPACT_STALL, VMSTAT_COMPACT_SUCCESS,
  VMSTAT_COMPACT_FAIL, VMSTAT_COMPACT_DAEMON_WAKE, VMSTAT_HTLB_BUDDY_ALLOC_SUCCESS, VMSTAT_HTLB_BUDDY_ALLOC_FAIL,
  VMSTAT_COUNTER_COUNT
};
extern const char *const vmstat_counter_names[VMSTAT_COUNTER_COUNT]; /* "thp_fault_alloc", ... */

struct vmstat_counters {
  uint64_t value[VMSTAT_COUNTER_COUNT];
  bool present[VMSTAT_COUNTER_COUNT]; /* false: this kernel has no such counter */
};
/* Text of /proc/vmstat -> the counters above (absent ones stay 0 and not present). */
void parse_vmstat(const char *text, struct vmstat_counters *out);

/* /proc/buddyinfo: "Node 0, zone   Normal    574    501 ..." -> free blocks per order. */
#define BUDDYINFO_MAX_ORDERS 16
struct buddyinfo_zone {
  int node;
  char zone[16];
  unsigned order_count;                        /* orders 0 .. order_count-1 */
  uint64_t free_blocks[BUDDYINFO_MAX_ORDERS];  /* free blocks of 2^order base pages */
};
/* Returns the number of zones stored (at most cap), or -EINVAL on malformed text. */
long parse_buddyinfo(const char *text, struct buddyinfo_zone *zones, size_t cap);
/* How many pages of `bytes` (a power of two) the buddy allocator holds free right now in the zones of
 * `node` (-1: every node), without reclaim or compaction: free blocks of that order or larger. The DMA
 * zone is left out (lowmem reserves keep it for devices). When `bytes` is larger than the largest order
 * (gigantic pages), the count is the free bytes in largest-order blocks divided by `bytes`, an upper
 * bound (buddyinfo does not say whether those blocks are adjacent), and *upper_bound is set. */
uint64_t buddyinfo_free_pages(const struct buddyinfo_zone *zones, size_t count, int node, uint64_t base_page_size,
                              uint64_t bytes, bool *upper_bound);

/* /proc/mounts (or /proc/PID/mounts): "SOURCE PATH TYPE OPTIONS 0 0", octal escapes (\040) decoded. */
struct mount_entry {
  char source[128];
  char path[512];
  char type[32];
  char options[512];
};
/* *out is malloc'd (caller frees); returns the count, or -ENOMEM. Malformed lines are skipped. */
long parse_mounts(const char *text, struct mount_entry **out);

/* Options of a hugetlbfs mount as /proc/mounts shows them (fs/hugetlbfs/inode.c, hugetlbfs_show_options):
 * "rw,relatime,gid=100,mode=1770,pagesize=2M,size=16777216,min_size=4194304". The kernel prints uid, gid
 * and mode only when they differ from 0, 0 and 0755, and 1 GiB as "pagesize=1024M". */
struct hugetlbfs_options {
  uint64_t page_size;  /* bytes; 0 when absent (then the mount uses the default huge page size) */
  uint64_t size;       /* bytes the mount may hold at most; 0 = no limit */
  uint64_t min_size;   /* bytes reserved for the mount from the pool at mount time; 0 = none */
  uint64_t nr_inodes;  /* 0 = no limit */
  unsigned mode;       /* 0755 unless given */
  uint32_t uid, gid;
  bool read_only;
};
bool parse_hugetlbfs_options(const char *options, struct hugetlbfs_options *out);

/* Huge-page parameters of the kernel command line (/proc/cmdline), as Documentation/admin-guide/
 * kernel-parameters.txt and mm/hugetlbpage.rst define them: "hugepages=N" applies to the size of the
 * hugepagesz= before it, or to the default size when none came before; "hugepages=0:2,1:2" gives counts
 * per NUMA node. Everything after a lone "--" belongs to init and is ignored. */
#define CMDLINE_MAX_POOLS 8
#define CMDLINE_MAX_NODES 64
struct cmdline_pool {
  uint64_t page_size;                    /* bytes; 0 = the default huge page size */
  uint64_t pages;                        /* total (the sum over nodes when per_node) */
  bool per_node;
  uint64_t node_pages[CMDLINE_MAX_NODES]; /* when per_node */
};
struct cmdline_hugepages {
  uint64_t default_size;                  /* default_hugepagesz=, 0 when absent */
  unsigned pool_count;
  struct cmdline_pool pools[CMDLINE_MAX_POOLS];
  char transparent_hugepage[16];          /* transparent_hugepage=always|madvise|never, "" when absent */
  char params[1024];                      /* every huge-page parameter as written, space-separated */
};
/* False when a huge-page parameter is malformed (the others are still stored). */
bool parse_cmdline_hugepages(const char *text, struct cmdline_hugepages *out);

/* /proc/PID/limits: soft and hard limit of the row `name` ("Max locked memory"); "unlimited" -> UINT64_MAX. */
bool parse_limit(const char *text, const char *name, uint64_t *soft, uint64_t *hard);

/* "Key:<white space>text" line (/proc/PID/status): the text, trimmed, into out. False when absent, or when
 * the line has no newline (the file was cut short inside it). */
bool parse_keyed_text(const char *text, const char *key, char *out, size_t cap);

/* A kernel id list ("0-3,8,10-11", as in cpulist, has_cpu, Cpus_allowed_list) -> bitmap of `max_ids` bits
 * (ids at or past max_ids are ignored). An empty text is an empty list. False on malformed text. */
bool parse_id_list(const char *text, uint64_t *bitmap, unsigned max_ids);
static inline bool id_list_has(const uint64_t *bitmap, unsigned id) { return (bitmap[id / 64] >> (id % 64)) & 1; }

/* /proc/PID/cgroup: the cgroup v2 path (line "0::/path"). False when the process is in no v2 hierarchy. */
bool parse_cgroup_v2_path(const char *text, char *out, size_t cap);
/* /proc/PID/cgroup: the path in the cgroup v1 hierarchy that holds `controller` ("4:memory:/x", also in a
 * joined hierarchy "4:cpu,memory:/x"). False when no v1 line names it. */
bool parse_cgroup_v1_path(const char *text, const char *controller, char *out, size_t cap);
/* memory.stat of a cgroup: its THP bytes. cgroup v2 has anon_thp, shmem_thp and file_thp (the latter two
 * since Linux 5.x/6.x); cgroup v1 only rss_huge (anonymous THP). False when the text has none of them. */
struct cgroup_thp {
  uint64_t anon, shmem, file;
  bool has_shmem, has_file; /* false: this memory.stat does not report them (v1, older kernels) */
};
bool parse_memory_stat_thp(const char *text, struct cgroup_thp *out);
/* A cgroup limit file ("max" or bytes): "max" -> UINT64_MAX. */
bool parse_cgroup_limit(const char *text, uint64_t *value);
/* The name a hugetlb cgroup gives a page size in its file names (mm/hugetlb_cgroup.c, mem_fmt):
 * 2 MiB -> "2MB", 1 GiB -> "1GB", 64 KiB -> "64KB". */
void cgroup_hugetlb_size_name(uint64_t page_size, char *out, size_t cap);

/* /proc/PID/stat: the flags field (the 9th; PF_* of the task). The command may hold spaces and ')', so the
 * fields are counted from the last ')'. False on malformed text. */
bool parse_stat_flags(const char *text, unsigned long *flags);
/* /proc/PID/stat: the start time (the 22nd field, clock ticks after boot). A process's identity with its pid:
 * a new process that got the same pid number has a later start time (the agent's per-process state). False
 * on malformed or truncated text (a number must be followed by the next field). */
bool parse_stat_start_time(const char *text, uint64_t *ticks);
/* /proc/PID/stat: the resident set (the 24th field, in pages; 0 for a kernel thread), so that one read gives
 * a process's size and identity (`hugify top`). False on malformed or truncated text. */
bool parse_stat_rss(const char *text, uint64_t *pages);
/* /proc/PID/stat: the page faults of the whole process, minor plus major (the 10th and 12th fields; the
 * threads that exited included): every page it faulted in since it started. With VmRSS, the agent's sign
 * that a process's memory changed (docs/agent.md, "What a pass costs"). False on malformed or truncated text. */
bool parse_stat_faults(const char *text, uint64_t *faults);
#define PROCFS_PF_KTHREAD 0x00200000ul /* include/linux/sched.h: a kernel thread (no user memory) */

/* /proc/PID/task/TID/schedstat: "run_ns wait_ns timeslices" (time on a CPU, time waiting for one). False on
 * malformed text. */
bool parse_schedstat(const char *text, uint64_t *run_ns, uint64_t *wait_ns);

/* /proc/PID/smaps_rollup: the process's totals (bytes). False when the text has no Rss, Anonymous or
 * AnonHugePages line (a kernel thread's is empty). */
struct smaps_rollup {
  uint64_t rss, anonymous, anon_thp, hugetlb; /* hugetlb: Private_Hugetlb + Shared_Hugetlb */
  uint64_t shmem_thp, file_thp;               /* ShmemPmdMapped, FilePmdMapped (0 when absent) */
};
bool parse_smaps_rollup(const char *text, struct smaps_rollup *out);

/* /proc/pressure/memory (PSI): "some avg10=1.23 avg60=... avg300=... total=..." and "full ...". */
struct psi_pressure {
  double some_avg10, some_avg60, full_avg10; /* percent */
  bool present;                              /* the "some" line was there */
};
/* False when the text has no well-formed "some" line (then *out is zeroed). */
bool parse_psi_pressure(const char *text, struct psi_pressure *out);
/* /proc/PID/status: the effective capability set (CapEff, hexadecimal), bit i = capability i. False when
 * the line is missing or malformed. */
bool parse_capabilities(const char *status, uint64_t *effective);

/* /proc/loadavg ("0.52 0.58 0.59 2/339 12345"): the 1-minute load average. False when the text does not
 * begin with one. */
bool parse_loadavg(const char *text, double *one_minute);
/* /proc/cpuinfo: whether the CPU flags include "hypervisor" (the guest bit: CPUID.1:ECX[31] on x86). */
bool parse_cpuinfo_hypervisor(const char *text);
/* The hypervisor's name from its 12-byte CPUID signature (leaf 0x40000000: "KVMKVMKVM\0\0\0" -> "KVM",
 * "Microsoft Hv" -> "Hyper-V", ...), or NULL when the signature is not one we know. */
const char *hypervisor_name(const char signature[12]);

/* /proc/PID/environ ("NAME=VALUE" entries, each ended by a NUL; the last may be cut): the value of `name`,
 * copied to out. False when it is not there or its value has `cap` bytes or more. */
bool parse_environ_value(const char *data, size_t length, const char *name, char *out, size_t cap);

/* ---- /proc/PID/pagemap and /proc/kpageflags words (the kernel's admin-guide/mm/pagemap.rst) ----
 * Without PAGEMAP_SCAN (Linux < 6.7) the plan's walk reads one 64-bit pagemap entry per page and, as root,
 * the kpageflags word of each PFN: these decode them. */
#define PAGEMAP_PRESENT (UINT64_C(1) << 63)
#define PAGEMAP_SWAPPED (UINT64_C(1) << 62)
#define PAGEMAP_FILE (UINT64_C(1) << 61)     /* file page or shared anonymous */
#define PAGEMAP_PFN_MASK ((UINT64_C(1) << 55) - 1) /* bits 0-54; zero without CAP_SYS_ADMIN */
#define KPAGE_COMPOUND_HEAD (UINT64_C(1) << 15)
#define KPAGE_COMPOUND_TAIL (UINT64_C(1) << 16)
#define KPAGE_HUGE (UINT64_C(1) << 17)       /* hugetlb */
#define KPAGE_THP (UINT64_C(1) << 22)        /* part of a transparent huge page (any order since 6.x mTHP) */
#define KPAGE_ZERO_PAGE (UINT64_C(1) << 24)  /* the shared zero page, or the huge zero page */

/* Bytes of a range by what backs them. base: present, not huge; huge: present and mapped by a PMD (THP) or
 * hugetlb; zero: mapping the shared zero page (read, never written), 4 KiB or huge, in neither of the others. */
struct resident_bytes {
  uint64_t base, huge, zero;
  uint64_t dirty; /* of base: soft-dirty (written since the last clear_refs 4; 0 without CONFIG_MEM_SOFT_DIRTY) */
};
#define PAGEMAP_SOFT_DIRTY (UINT64_C(1) << 55)

/* The PFN of a present entry; 0 when the page is not present (or swapped), or when the reader may not see
 * PFNs (no CAP_SYS_ADMIN). */
uint64_t pagemap_pfn(uint64_t entry);
/* Whether `n` entries can be one PMD-mapped huge page: n == pmd_pages, each present with a PFN, the first a
 * multiple of pmd_pages and the others following it. Only such a run needs its kpageflags read. */
bool pagemap_aligned_run(const uint64_t *entries, size_t n, size_t pmd_pages);
/* What the kpageflags words of such a run say: one huge page mapped whole (hugetlb: KPF_HUGE throughout;
 * THP: KPF_THP throughout, a compound head and then its tails), the huge zero page, or neither. "Whole"
 * is the approximation of a PMD mapping: a THP whose PMD was split while all its PTEs stay (an mprotect of
 * part of it, before the deferred split) looks the same; a partial purge does not (its entries are gone). */
enum kpage_run { KPAGE_RUN_SMALL, KPAGE_RUN_HUGE, KPAGE_RUN_HUGE_ZERO };
enum kpage_run kpageflags_run(const uint64_t *flags, size_t n);
/* Add `n` entries (pages of `page` bytes) to *out: a run judged by kpageflags_run counts whole; otherwise
 * each present entry is base, or zero when its PFN is zero_pfn (0: not known, then zero-page mappings
 * count as base). */
void pagemap_count(const uint64_t *entries, size_t n, enum kpage_run run, uint64_t zero_pfn, uint64_t page,
                   struct resident_bytes *out);
/* Memory by folio size, from pagemap entries and the kpageflags words of their PFNs (flags[i] for
 * entries[i]; anything for an entry without a PFN). A folio is a compound head followed by its tails at the
 * next PFNs: k of them mapped in a row, k a power of two and the head's PFN a multiple of k (folios are
 * naturally aligned), count as one folio of order log2(k); base pages (neither head nor tail) as order 0;
 * hugetlb pages (KPF_HUGE) apart; a run that is no whole folio (its head before the entries given, part of
 * it unmapped) as `partial`. The zero page (zero_pfn, and KPF_ZERO_PAGE) is not counted. */
#define FOLIO_ORDERS 20 /* up to 2^19 base pages: a 1 GiB folio of 4 KiB pages, 512 MiB of 64 KiB */
struct folio_bytes {
  uint64_t by_order[FOLIO_ORDERS]; /* bytes in folios of 2^order base pages */
  uint64_t hugetlb, partial;
};
void kpageflags_folios(const uint64_t *entries, const uint64_t *flags, size_t n, uint64_t zero_pfn, uint64_t page,
                       struct folio_bytes *out);

/* Without PFNs: which windows of a mapping are huge, from its smaps huge bytes (AnonHugePages +
 * ShmemPmdMapped, which count PMD-mapped pages only). A huge window is fully present, so the fully present
 * windows are made huge in address order until huge_bytes is used up. Returns true when that is certain (no
 * huge bytes, or exactly as many as the fully present windows hold), false when it is an approximation. */
bool pagemap_huge_from_smaps(struct resident_bytes *windows, size_t n, uint64_t window, uint64_t huge_bytes);

/* ---- DAMON's tried regions (heat.c) ----
 * What DAMON's sysfs interface shows of a `stat` scheme's regions after update_schemes_tried_regions, in the
 * form `grep -r . tried_regions` prints it: one "IDX/FIELD:VALUE" line per file (any leading path before
 * IDX/ is ignored), FIELD one of start, end, nr_accesses, age (others, e.g. sz_filter_passed, ignored).
 * The regions of every target of the context come one target after the other, each target's in address
 * order. */
struct damon_region {
  uint64_t start, end;   /* [start, end) virtual addresses */
  uint32_t nr_accesses;  /* samples in the last aggregation interval that found it accessed */
  uint32_t age;          /* aggregation intervals its access frequency has held */
};
/* The regions by index into out[0..cap) (zeroed first). Returns the count (the highest index + 1), or -EINVAL
 * on a malformed line, an index at or beyond cap, or a region with end <= start. */
long parse_damon_tried_regions(const char *text, struct damon_region *out, size_t cap);
/* Which target each region belongs to: the sysfs interface does not say, but each target's regions come in
 * address order and the next target's begin below where the last one ended (a process's stack lies above its
 * heap and libraries), so a region starting below the previous one's end begins the next target. firsts[t]:
 * the index of target t's first region. Returns the count of targets found (at most cap). */
size_t damon_split_targets(const struct damon_region *regions, size_t count, size_t *firsts, size_t cap);

#endif
