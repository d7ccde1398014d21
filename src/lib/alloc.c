/* SPDX-License-Identifier: MIT */
/* alloc.c - hugify_alloc/free: the fallback chain 1G -> 2M hugetlb -> THP -> 4K. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "internal.h"
#include "os.h"
#include "probe.h"
#include "procfs.h"
#include "units.h"

const char *hugify_version(void) { return HUGIFY_VERSION_STRING; }

static const char *const kind_names[HUGIFY_PAGE_KIND_COUNT] = {"4K", "THP", "2M", "1G"};

const char *hugify_page_kind_name(enum hugify_page_kind kind) {
  return (unsigned)kind < HUGIFY_PAGE_KIND_COUNT ? kind_names[kind] : "?";
}

int hugify_page_kind_parse(const char *text, enum hugify_page_kind *kind) {
  static const struct { const char *name; enum hugify_page_kind kind; } names[] = {
      {"4K", HUGIFY_PAGE_4K}, {"4KB", HUGIFY_PAGE_4K}, {"THP", HUGIFY_PAGE_THP}, {"2M", HUGIFY_PAGE_2M},
      {"2MB", HUGIFY_PAGE_2M}, {"1G", HUGIFY_PAGE_1G}, {"1GB", HUGIFY_PAGE_1G},
  };
  if (!text || !kind) return -EINVAL;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (words_equal(text, names[i].name)) { *kind = names[i].kind; return 0; }
  return -EINVAL;
}

/* ---- the block registry: address -> mapped length, so hugify_free unmaps exactly what was mapped ---- */

struct block { uintptr_t address; size_t mapped, requested; };
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct block *registry; /* open addressing; address 0 = empty, 1 = deleted */
static size_t registry_cap, registry_used, registry_live;
#define SLOT_EMPTY ((uintptr_t)0)
#define SLOT_DELETED ((uintptr_t)1)

static size_t slot_of(uintptr_t address, size_t cap) {
  uint64_t h = (uint64_t)address * UINT64_C(0x9e3779b97f4a7c15);
  return (size_t)(h >> 20) & (cap - 1);
}

static bool registry_grow(void) {
  size_t cap = registry_cap ? registry_cap * 2 : 256;
  struct block *table = calloc(cap, sizeof *table);
  if (!table) return false;
  for (size_t i = 0; i < registry_cap; i++) {
    if (registry[i].address <= SLOT_DELETED) continue;
    size_t s = slot_of(registry[i].address, cap);
    while (table[s].address != SLOT_EMPTY) s = (s + 1) & (cap - 1);
    table[s] = registry[i];
  }
  free(registry);
  registry = table;
  registry_cap = cap;
  registry_used = registry_live;
  return true;
}

static bool registry_insert(uintptr_t address, size_t mapped, size_t requested) {
  pthread_mutex_lock(&registry_lock);
  bool ok = (registry_used + 1) * 2 <= registry_cap || registry_grow();
  if (ok) {
    size_t s = slot_of(address, registry_cap);
    while (registry[s].address > SLOT_DELETED) s = (s + 1) & (registry_cap - 1);
    if (registry[s].address == SLOT_EMPTY) registry_used++;
    registry[s] = (struct block){address, mapped, requested};
    registry_live++;
  }
  pthread_mutex_unlock(&registry_lock);
  return ok;
}

/* Removes the block when it is live and was asked for with `requested` bytes; returns its mapped length. */
static size_t registry_remove(uintptr_t address, size_t requested) {
  size_t mapped = 0;
  pthread_mutex_lock(&registry_lock);
  if (registry_cap) {
    for (size_t s = slot_of(address, registry_cap); registry[s].address != SLOT_EMPTY; s = (s + 1) & (registry_cap - 1)) {
      if (registry[s].address != address) continue;
      if (registry[s].requested == requested) {
        mapped = registry[s].mapped;
        registry[s].address = SLOT_DELETED;
        registry_live--;
      }
      break;
    }
  }
  pthread_mutex_unlock(&registry_lock);
  return mapped;
}

size_t hugify_live_blocks(void) {
  pthread_mutex_lock(&registry_lock);
  size_t live = registry_live;
  pthread_mutex_unlock(&registry_lock);
  return live;
}

/* ---- mapping one kind ----------------------------------------------------------------------------- */

struct attempt {
  enum hugify_page_kind kind;
  size_t size, mapped;
  unsigned flags;
  char *reason;
  size_t reason_cap;
};

static size_t round_up(size_t size, uint64_t page) { return (size + page - 1) & ~(size_t)(page - 1); }

/* The caller's cgroup v2 path and where the hierarchy is mounted, read once: a process does not usually
 * move. cgroup_path stays "" when the process is in no v2 hierarchy (no limits to check). */
static char cgroup_path[2048], cgroup_mount[512];
static pthread_once_t cgroup_once = PTHREAD_ONCE_INIT;
static void read_cgroup_path(void) {
  char *self, *mounts;
  if (os_read_file("/proc/self/mounts", &mounts, NULL) == 0) {
    cgroup_v2_mount(mounts, cgroup_mount, sizeof cgroup_mount);
    free(mounts);
  }
  if (cgroup_mount[0] && os_read_file("/proc/self/cgroup", &self, NULL) == 0) {
    parse_cgroup_v2_path(self, cgroup_path, sizeof cgroup_path);
    free(self);
  }
}

static bool read_line_live(void *context, const char *path, char *buf, size_t cap) {
  (void)context;
  return os_read_small(path, buf, cap) >= 0;
}

/* A cgroup hugetlb limit is charged at fault time: a request above what the caller's cgroup (or an
 * ancestor) still allows would SIGBUS later, so it falls back now instead. */
static bool cgroup_hugetlb_room(uint64_t page_size, uint64_t want, char *why, size_t cap) {
  pthread_once(&cgroup_once, read_cgroup_path);
  struct cgroup_hugetlb_limit limit;
  if (!cgroup_path[0] ||
      !cgroup_hugetlb_limit_walk(cgroup_mount, cgroup_path, page_size, read_line_live, NULL, &limit) ||
      want <= limit.room)
    return true;
  char name[32], label[16];
  cgroup_hugetlb_size_name(page_size, name, sizeof name);
  format_page_size(page_size, label, sizeof label);
  snprintf(why, cap, "cgroup %.200s allows %llu more bytes of %s pages (hugetlb.%s.max)", limit.room_limited_by,
           (unsigned long long)limit.room, label, name);
  return false;
}

static void *map_hugetlb(struct attempt *a) {
  uint64_t page = page_kind_size(a->kind);
  const char *name = hugify_page_kind_name(a->kind);
  a->mapped = round_up(a->size, page);
  char why[512];
  if (!cgroup_hugetlb_room(page, a->mapped, why, sizeof why)) {
    reason_add(a->reason, a->reason_cap, "%s: %s", name, why);
    return MAP_FAILED;
  }
  /* Never MAP_NORESERVE: the mmap reserves the pool pages, or fails here instead of SIGBUS later. */
  void *p;
  int rc = os_mmap(NULL, a->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | os_map_hugetlb_flags(page),
                   -1, 0, &p);
  if (rc == 0) return p;
  int err = -rc;
  struct hugify_hugetlb_size pool;
  if (os_hugetlb_read(page, &pool) != 0)
    reason_add(a->reason, a->reason_cap, "%s: this kernel has no %s hugetlb pages", name, name);
  else if (err == ENOMEM)
    reason_add(a->reason, a->reason_cap, "%s: pool has %llu free pages, %llu needed (hugify pool set %s=N)",
                  name, (unsigned long long)pool.available,
                  (unsigned long long)(a->mapped / page), name);
  else
    reason_add(a->reason, a->reason_cap, "%s: mmap failed (%s)", name, strerror(err));
  return MAP_FAILED;
}

/* What the THP kind aligns and rounds to: the PMD, or where it is too big to fault wisely (512 MiB on 64 KiB
 * pages) the largest mTHP size faults take; 0: none is enabled. */
static uint64_t thp_unit(void) {
  if (page_sizes_collapse_wise(os_pmd_size())) return os_pmd_size();
  struct page_sizes_choice choice;
  os_page_sizes_choose("", os_page_sizes(), &choice);
  return choice.fault_size;
}

static void *map_anonymous(struct attempt *a) {
  bool thp = a->kind == HUGIFY_PAGE_THP;
  uint64_t page = thp ? thp_unit() : page_kind_size(a->kind);
  if (thp) {
    char mode[16], pmd[32];
    probe_thp_setting("enabled", mode, sizeof mode);
    if (!mode[0] || strcmp(mode, "never") == 0) {
      reason_add(a->reason, a->reason_cap, "THP: %s (echo madvise > %s/enabled)",
                    mode[0] ? "disabled system-wide (never)" : "not in this kernel", OS_SYSFS_THP);
      return MAP_FAILED;
    }
    page_sizes_name(os_pmd_size(), pmd, sizeof pmd);
    if (!page) {
      reason_add(a->reason, a->reason_cap, "THP: the PMD huge page is %s, too big to fault wisely, and no mTHP "
                 "size below it is enabled (echo madvise > %s/hugepages-2048kB/enabled)", pmd, OS_SYSFS_THP);
      return MAP_FAILED;
    }
  }
  a->mapped = round_up(a->size, page);
  void *p; /* THP: aligned to the unit so every window of it can be one huge page (or mTHP folio) */
  int rc = os_map_aligned(a->mapped, thp ? page : 0, PROT_READ | PROT_WRITE, &p);
  if (rc) {
    reason_add(a->reason, a->reason_cap, "%s: mmap failed (%s)", hugify_page_kind_name(a->kind), strerror(-rc));
    return MAP_FAILED;
  }
  if ((rc = os_madvise(p, a->mapped, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE)) != 0 && thp) {
    reason_add(a->reason, a->reason_cap, "THP: madvise(MADV_HUGEPAGE) failed (%s)", strerror(-rc));
    os_munmap(p, a->mapped);
    return MAP_FAILED;
  }
  return p;
}

static void populate(void *p, size_t length, uint64_t page) {
  if (os_madvise(p, length, MADV_POPULATE_WRITE) == 0) return;
  for (size_t off = 0; off < length; off += page) ((volatile char *)p)[off] = 0; /* before Linux 5.14 */
}

/* THP after populate: collapse what the fault path did not give huge pages, then measure. A THP block
 * that is not fully huge reports the kind it really has (4K) and why. */
static bool settle_thp(void *p, struct attempt *a, struct hugify_backing *b) {
  backing_measure_collapse_measure(p, a->mapped, b);
  if (b->resident_thp == b->resident && b->resident > 0) return true;
  reason_add(a->reason, a->reason_cap, "THP: only %.1f%% of the block got huge pages after populate%s",
                100.0 * hugify_backing_huge_fraction(b),
                probe_madv_collapse(NULL, 0) == HUGIFY_FEATURE_YES ? " and MADV_COLLAPSE" : "");
  return false;
}

/* ---- hugify_alloc / hugify_free ------------------------------------------------------------------- */

static bool valid_opts(const struct hugify_opts *opts) {
  if (!opts) return true;
  if (opts->flags & ~HUGIFY_FLAGS_ALL || opts->kind_count > HUGIFY_PAGE_KIND_COUNT) return false;
  for (unsigned i = 0; i < opts->kind_count; i++)
    if ((unsigned)opts->kinds[i] >= HUGIFY_PAGE_KIND_COUNT) return false;
  return true;
}

void *hugify_alloc(size_t size, const struct hugify_opts *opts, struct hugify_info *info) {
  struct hugify_info scratch;
  if (!info) info = &scratch;
  memset(info, 0, sizeof *info);
  info->requested = size;
  if (size == 0 || size > SIZE_MAX - OS_HUGE_1G * 2 || !valid_opts(opts)) {
    snprintf(info->reason, sizeof info->reason, "invalid request: %s",
             size == 0 ? "size 0" : !valid_opts(opts) ? "unknown flags or page kinds" : "size overflows when rounded");
    errno = EINVAL;
    return NULL;
  }
  static const enum hugify_page_kind default_chain[] = {HUGIFY_PAGE_1G, HUGIFY_PAGE_2M, HUGIFY_PAGE_THP,
                                                        HUGIFY_PAGE_4K};
  bool explicit_chain = opts && opts->kind_count > 0;
  const enum hugify_page_kind *chain = explicit_chain ? opts->kinds : default_chain;
  unsigned count = explicit_chain ? opts->kind_count : HUGIFY_PAGE_KIND_COUNT;
  unsigned flags = opts ? opts->flags : 0;
  if (flags & HUGIFY_STRICT) count = 1;

  for (unsigned i = 0; i < count; i++) {
    struct attempt a = {chain[i], size, 0, flags, info->reason, sizeof info->reason};
    bool hugetlb = a.kind == HUGIFY_PAGE_2M || a.kind == HUGIFY_PAGE_1G;
    if (hugetlb && !explicit_chain && size < page_kind_size(a.kind)) {
      reason_add(info->reason, sizeof info->reason, "%s: request smaller than one page",
                    hugify_page_kind_name(a.kind));
      continue;
    }
    void *p = hugetlb ? map_hugetlb(&a) : map_anonymous(&a);
    if (p == MAP_FAILED) continue;
    info->kind = a.kind;
    info->mapped = a.mapped;
    if (flags & HUGIFY_POPULATE) {
      populate(p, a.mapped, page_kind_size(a.kind));
      bool full = a.kind == HUGIFY_PAGE_THP ? settle_thp(p, &a, &info->backing)
                                            : backing_measure_mapping(p, a.mapped, a.kind, &info->backing) == 0;
      info->measured = 1;
      if (!full) {
        if (flags & HUGIFY_STRICT) { os_munmap(p, a.mapped); break; }
        if (hugify_backing_huge_fraction(&info->backing) < 0.5) info->kind = HUGIFY_PAGE_4K; /* the majority */
      }
    }
    if (!registry_insert((uintptr_t)p, a.mapped, size)) {
      os_munmap(p, a.mapped);
      reason_add(info->reason, sizeof info->reason, "out of memory for the block registry");
      break;
    }
    return p;
  }
  if (!info->reason[0]) snprintf(info->reason, sizeof info->reason, "no page kind in the chain could be had");
  errno = ENOMEM;
  return NULL;
}

int hugify_free(void *p, size_t size) {
  if (!p) return -EINVAL;
  size_t mapped = registry_remove((uintptr_t)p, size);
  if (!mapped) return -EINVAL;
  return os_munmap(p, mapped);
}
