/* SPDX-License-Identifier: MIT */
/* probe.h - what this machine offers: kernel features found by trying them (each result cached after the
 * first call), the THP settings, the page size of each kind, and hugify_probe, which gathers them. Sits
 * above os.c (syscalls, file readers) and procfs.c (pure parsers). Not exported. */
#ifndef HUGIFY_PROBE_H
#define HUGIFY_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hugify.h"

/* The kernel features hugify uses, each found by trying it or by the kernel's files (never assumed from the
 * version), with the first Linux version that has it: probe_features is the one table of them. */
enum probe_feature {
  PROBE_THP,                      /* /sys/kernel/mm/transparent_hugepage: CONFIG_TRANSPARENT_HUGEPAGE */
  PROBE_MADV_COLLAPSE,            /* madvise(MADV_COLLAPSE) of a scratch mapping */
  PROBE_PROCESS_MADVISE,          /* process_madvise() exists */
  PROBE_PROCESS_MADVISE_COLLAPSE, /* process_madvise() accepts MADV_COLLAPSE */
  PROBE_PAGEMAP_SCAN,             /* the PAGEMAP_SCAN ioctl on /proc/self/pagemap */
  PROBE_MTHP,                     /* per-size THP controls: transparent_hugepage/hugepages-<N>kB */
  PROBE_KHUGEPAGED_MTHP,          /* khugepaged collapses below the PMD size: hugepages-<N>kB/stats/collapse_alloc */
  PROBE_THP_EXCEPT_ADVISED,       /* prctl(PR_SET_THP_DISABLE, 1, PR_THP_DISABLE_EXCEPT_ADVISED) */
  PROBE_DAMON_VADDR,              /* DAMON's sysfs with virtual-address operations */
  PROBE_DAMOS_COLLAPSE,           /* DAMON schemes take the action "collapse" (the kernel collapses hot regions) */
  PROBE_DAMOS_HUGEPAGE,           /* DAMON schemes take the action "hugepage" (MADV_HUGEPAGE on a region) */
  PROBE_SOFT_DIRTY,               /* clear_refs 4 + pagemap bit 55: CONFIG_MEM_SOFT_DIRTY */
  PROBE_PAGE_IDLE,                /* /sys/kernel/mm/page_idle/bitmap: CONFIG_IDLE_PAGE_TRACKING */
  PROBE_FILE_THP_TEXT,            /* MADV_COLLAPSE of read-only file text: CONFIG_READ_ONLY_THP_FOR_FS */
  PROBE_FEATURE_COUNT
};

struct probe_feature_info {
  const char *id;      /* stable key: "thp", "madv_collapse", ... (JSON, docs/status.md) */
  const char *name;    /* as the kernel names it */
  const char *since;   /* the first Linux version that has it */
  const char *config;  /* the kernel build option it needs, "" when none */
  const char *source;  /* where the answer comes from: the file read or the call tried */
  int needs_thp;       /* meaningless without THP: "no" on a kernel built without it */
  const char *without; /* what hugify does without it */
};
extern const struct probe_feature_info probe_features[PROBE_FEATURE_COUNT];

/* This machine's answer (the calls are tried once, then cached); why it is no/unknown goes to detail. */
enum hugify_feature_state probe_feature(enum probe_feature feature, char *detail, size_t cap);
/* The answer under root: "/" is this machine (probe_feature); a captured tree answers only for the features
 * found by files (and "no" for those that need THP when it has none), the others are UNKNOWN. */
enum hugify_feature_state probe_feature_at(const char *root, enum probe_feature feature, char *detail, size_t cap);
/* 0 when this machine has the feature (or it cannot be told), else -ENOSYS with reason naming it, the first
 * version that has it, this kernel, and the fix; on a kernel without THP, that it is not built in and that
 * hugetlb is the road. For a command's exit 3. */
int probe_require(enum probe_feature feature, char *reason, size_t cap);

/* The fix for a feature this kernel lacks: "run Linux V or later[ built with CONFIG_...]". */
void probe_fix(enum probe_feature feature, char *fix, size_t cap);
/* Appends to reason what probe_require says of a missing feature, given the probe's detail ("" none). */
void probe_missing(enum probe_feature feature, const char *detail, char *reason, size_t cap);

/* DAMON's sysfs interface, and what a kdamond another user set up is called (with their count). */
#define PROBE_DAMON_ADMIN "/sys/kernel/mm/damon/admin"
#define PROBE_DAMON_OTHERS "DAMON's %llu kdamond(s) are another user's"
/* Whether DAMON under admin (its sysfs directory) has virtual-address operations: a context's
 * avail_operations lists "vaddr" (the operations show nowhere else). An existing context's list is read
 * (reading changes nothing). Where no kdamond exists (nr_kdamonds 0) and may_set_up, kdamond 0 and one
 * context are set up just long enough to read it, then removed: nr_contexts and nr_kdamonds back to 0. A
 * kdamond there already is never written, even one off with no context: writing nr_kdamonds would remove
 * it, and its user may be setting it up; that is UNKNOWN, with whose it is in detail. */
enum hugify_feature_state probe_damon_vaddr_at(const char *admin, bool may_set_up, char *detail, size_t cap);
/* Whether an avail_operations text lists "vaddr" as a word (fvaddr is another). Pure. */
bool probe_damon_lists_vaddr(const char *avail_operations);
/* Whether DAMON's schemes under admin take `action` ("collapse", "hugepage"): a scheme already there naming it
 * says yes (reading changes nothing); else, where no kdamond exists and may_set_up, kdamond 0 with a context and
 * a scheme of hugify's own is set up, the action written to the scheme (EINVAL: the kernel does not know it),
 * and all of it removed again: nr_schemes, nr_contexts and nr_kdamonds back to 0. Another user's kdamond is
 * never written, as in probe_damon_vaddr_at: UNKNOWN then, with whose it is in detail. */
enum hugify_feature_state probe_damos_action_at(const char *admin, const char *action, bool may_set_up, char *detail,
                                                size_t cap);

/* DAMON's users inside the kernel, modules with an `enabled` parameter: DAMON_STAT (on by default in Debian's
 * 7.2), DAMON_RECLAIM, DAMON_LRU_SORT. Each starts a kdamond of its own that DAMON keeps exclusive: while one
 * runs, no kdamond of DAMON's sysfs can start (writing "on" to its state: EBUSY, seen on Debian's 7.2.12). */
struct probe_damon_module {
  char name[16];   /* "damon_stat", ... (the module's) */
  int kdamond_pid; /* its kdamond_pid parameter, 0 when unknown or none */
};
/* The enabled ones under root ("" or "/": this machine), up to cap. Returns how many. */
int probe_damon_modules(const char *root, struct probe_damon_module *out, unsigned cap);
/* Appends to reason why DAMON's sysfs kdamonds cannot start here, naming the first enabled module and the fix
 * (echo N > /sys/module/NAME/parameters/enabled); returns 1 when one is enabled, 0 (nothing added) when none. */
int probe_damon_held(char *reason, size_t cap);

/* A DAMON scheme of any kdamond, as its sysfs shows it (probe_damon_schemes). */
#define PROBE_DAMON_TARGETS_MAX 16
struct probe_damon_scheme {
  unsigned kdamond, context, scheme;
  char state[16];         /* the kdamond's: "on", "off" */
  int kdamond_pid;        /* 0 when off or unreadable */
  char operations[16];    /* "vaddr", "fvaddr", "paddr" */
  char action[24];        /* "collapse", "hugepage", "stat", ... */
  unsigned target_count;  /* the context's targets (all of them, even past PROBE_DAMON_TARGETS_MAX) */
  int targets[PROBE_DAMON_TARGETS_MAX]; /* their pid_target (vaddr), 0 where none */
};
/* The schemes of every kdamond under admin (reading changes nothing), the first cap of them in out, in
 * kdamond, context, scheme order. Returns how many there are, or -errno when nr_kdamonds cannot be read. */
int probe_damon_schemes(const char *admin, struct probe_damon_scheme *out, unsigned cap);

/* Feature probes: enum hugify_feature_state; the reason for NO/UNKNOWN is appended to reason (may be NULL). */
enum hugify_feature_state probe_madv_collapse(char *reason, size_t cap);
enum hugify_feature_state probe_process_madvise(char *reason, size_t cap);
enum hugify_feature_state probe_file_thp_text(char *reason, size_t cap);
enum hugify_feature_state probe_pagemap_scan(char *reason, size_t cap);
enum hugify_feature_state probe_pmu(char *reason, size_t cap);
/* Whether the caller may write nr_hugepages. */
int probe_can_change_pools(void);

/* Selected word of a THP sysfs choice file under /sys/kernel/mm/transparent_hugepage ("enabled",
 * "defrag", "shmem_enabled": "always [madvise] never" -> "madvise"); "" if absent. */
void probe_thp_setting(const char *leaf, char *buf, size_t cap);

/* Page size in bytes of a kind (THP: the PMD size, read once). */
uint64_t page_kind_size(enum hugify_page_kind kind);

#endif
