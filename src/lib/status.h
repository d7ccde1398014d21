/* SPDX-License-Identifier: MIT */
/* status.h - everything the kernel says about huge pages, gathered under a root directory ("/" for this
 * machine, a captured tree in tests), and the diagnoses drawn from it. Used by `hugify status` and
 * `hugify pool`; pure apart from status_read. */
#ifndef HUGIFY_STATUS_H
#define HUGIFY_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hugify.h"
#include "cgroup.h"
#include "probe.h"

#define STATUS_MAX_CGROUPS 12
#include "procfs.h"

/* A counter or setting that could not be read. */
#define STATUS_UNKNOWN UINT64_MAX

#define STATUS_MAX_MOUNTS 16
#define STATUS_MAX_MTHP 16
#define STATUS_MAX_ZONES 64
#define STATUS_MAX_UNREADABLE 32
#define STATUS_MAX_CPUS 4096
#define STATUS_MAX_DAMON_SCHEMES 16

struct status_mount {
  char path[512];
  char source[128];
  uint64_t page_size; /* resolved: the default size when the mount names none */
  struct hugetlbfs_options options;
};

/* khugepaged's collapse counters of one size (hugepages-<N>kB/stats/<name>), in the order status shows them. */
#define STATUS_MTHP_COLLAPSE_FIELDS 5
extern const char *const status_mthp_collapse_fields[STATUS_MTHP_COLLAPSE_FIELDS];

/* The folios of one size (hugepages-<N>kB/stats/<name>, Linux 6.9+; nr_anon 6.13+): how many anonymous
 * folios of that size exist now and how faults fared, in the order status shows them. */
#define STATUS_MTHP_FOLIO_FIELDS 6
extern const char *const status_mthp_folio_fields[STATUS_MTHP_FOLIO_FIELDS];

struct status_mthp {
  uint64_t page_size;
  char enabled[16];       /* "always", "inherit", "madvise", "never"; "" when the size has no such file */
  char shmem_enabled[24];
  bool collapse_known;    /* the size has khugepaged's collapse counters (khugepaged_mthp: 7.2 seen) */
  uint64_t collapse[STATUS_MTHP_COLLAPSE_FIELDS]; /* STATUS_UNKNOWN each absent */
  bool folios_known;      /* the size has folio counters (stats/, 6.9+) */
  uint64_t folios[STATUS_MTHP_FOLIO_FIELDS];      /* STATUS_UNKNOWN each absent */
};

struct status_khugepaged {
  uint64_t pages_to_scan, scan_sleep_millisecs, alloc_sleep_millisecs, max_ptes_none, max_ptes_swap,
      max_ptes_shared, pages_collapsed, full_scans, defrag; /* STATUS_UNKNOWN when absent */
};

/* The khugepaged files, in the order status shows them: name (the file's) and offset in the struct. */
struct status_field {
  const char *name;
  size_t offset;
};
/* One row per field of struct status_khugepaged (all uint64_t): the count comes from the struct, and
 * status.c fails to compile when a row is missing or extra. */
#define STATUS_KHUGEPAGED_FIELDS (sizeof(struct status_khugepaged) / sizeof(uint64_t))
extern const struct status_field status_khugepaged_fields[];
static inline uint64_t status_khugepaged_value(const struct status_khugepaged *k, const struct status_field *f) {
  return *(const uint64_t *)((const char *)k + f->offset);
}

struct status_node {
  int node;
  char cpulist[256];
  bool has_cpu;           /* the node has CPUs */
  bool caller_cpus;       /* the caller may run on some of them (Cpus_allowed_list) */
  bool caller_mems;       /* the caller may allocate from it (Mems_allowed_list), true when unknown */
  uint64_t mem_total;     /* bytes, STATUS_UNKNOWN when unreadable */
};


struct status_unreadable {
  char path[256];
  int error; /* errno */
};

struct status_snapshot {
  char root[1024];
  char kernel_release[65];
  uint64_t base_page_size;
  bool live;                        /* root is this machine: features were probed */

  /* hugetlb */
  bool hugetlb_present;
  uint64_t default_hugetlb_size;
  unsigned pool_count;
  struct hugify_pool pools[HUGIFY_MAX_HUGETLB_SIZES];
  unsigned mount_count;
  struct status_mount mounts[STATUS_MAX_MOUNTS];

  /* THP */
  bool thp_present;
  char thp_enabled[16], thp_defrag[24], thp_shmem_enabled[24];
  uint64_t thp_use_zero_page, thp_pmd_size; /* STATUS_UNKNOWN when absent */
  unsigned mthp_count;                      /* 0 on kernels before 6.8 (no per-size controls) */
  struct status_mthp mthp[STATUS_MAX_MTHP];
  struct status_khugepaged khugepaged;

  /* DAMON: the schemes of any kdamond that has the kernel collapse ("collapse") or advise ("hugepage") memory
   * itself, with their kdamond's state and targets (read, never written) */
  bool damon_present;
  unsigned damon_module_count;      /* DAMON's users inside the kernel that are enabled (DAMON_STAT, ...) */
  struct probe_damon_module damon_modules[3];
  unsigned damon_scheme_count;
  struct probe_damon_scheme damon_schemes[STATUS_MAX_DAMON_SCHEMES];

  /* usage, bytes, from /proc/meminfo (STATUS_UNKNOWN when the kernel does not report the field) */
  uint64_t mem_total, mem_free, anon_huge, shmem_huge, shmem_pmd_mapped, file_huge, file_pmd_mapped, hugetlb_bytes;
  uint64_t shmem;                           /* Shmem: shared anonymous, SysV, memfd and tmpfs memory */

  struct vmstat_counters counters;
  bool counters_known;

  unsigned zone_count;
  struct buddyinfo_zone zones[STATUS_MAX_ZONES];

  struct cmdline_hugepages boot;
  bool boot_known;

  uint64_t memlock_soft, memlock_hard; /* UINT64_MAX = unlimited */
  bool memlock_known;

  int cgroup_version;            /* 2, 1 (v1 hierarchy only: limits not read), 0 unknown */
  char cgroup_path[512];
  char cgroup_mount[256];        /* where the v2 hierarchy is mounted */
  unsigned cgroup_limit_count;
  struct cgroup_hugetlb_limit cgroup_limits[HUGIFY_MAX_HUGETLB_SIZES];
  struct cgroup_memory_root cgroup_memory;  /* where memory.stat is (version 0: no memory controller) */
  unsigned cgroup_thp_count;                /* the top-level cgroups with most THP, by memory.stat */
  struct cgroup_named_thp cgroup_thp[STATUS_MAX_CGROUPS];

  unsigned node_count;
  struct status_node nodes[HUGIFY_MAX_NODES];
  char cpus_allowed[256], mems_allowed[256]; /* the caller's lists, "" when unknown */

  /* the machine: "" when not a virtual machine; the hypervisor's name (from CPUID when live), or "unknown"
   * when /proc/cpuinfo says "hypervisor" and no name could be had */
  char hypervisor[32];

  /* The kernel features hugify uses (probe_features' order): found by their files under root, or probed by
   * trying them when live (UNKNOWN in a captured tree, except "no" for those that need THP when it has none). */
  struct status_feature {
    int state;        /* enum hugify_feature_state */
    char detail[256]; /* why no or unknown */
  } features[PROBE_FEATURE_COUNT];
  bool can_change_pools;

  unsigned unreadable_count;
  struct status_unreadable unreadable[STATUS_MAX_UNREADABLE];
};

/* 0 when root is "/" or a directory (a captured tree), else -errno (-ENOENT, -ENOTDIR): the commands check
 * --root with it first, since a root that is not there is a bad argument, not a machine without hugetlb. */
int status_check_root(const char *root);

/* Read everything under root ("/": this machine, and then the features are probed). What cannot be read is
 * listed in out->unreadable and left STATUS_UNKNOWN / empty (a missing root too: nothing can be read).
 * Returns 0, or -errno only for bad arguments. */
int status_read(const char *root, struct status_snapshot *out);

/* Only the fast-changing part (pools, vmstat counters, usage), for --watch. */
int status_refresh(struct status_snapshot *s);

/* How many pages of page_size the free lists of node (-1: all) could give now; *upper_bound as in
 * buddyinfo_free_pages. */
uint64_t status_could_reserve(const struct status_snapshot *s, int node, uint64_t page_size, bool *upper_bound);

enum status_severity { STATUS_NOTE = 0, STATUS_WARNING = 1 };

struct status_diagnosis {
  char id[40];             /* stable: "thp_never", "defrag_always", ... (docs/status.md lists them) */
  enum status_severity severity;
  char message[512];
  char fix[512];           /* the command that fixes it */
};

#define STATUS_MAX_DIAGNOSES 32
/* The diagnoses of a snapshot (pure). Returns how many were stored (<= cap). */
unsigned status_diagnose(const struct status_snapshot *s, struct status_diagnosis *out, unsigned cap);

#endif
