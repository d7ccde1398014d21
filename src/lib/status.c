/* SPDX-License-Identifier: MIT */
/* status.c - the huge-page state of a machine (or of a captured tree), and the diagnoses drawn from it. */
#include "status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "os.h"
#include "page_sizes.h"
#include "probe.h"
#include "pool.h"
#include "units.h"

#define THP_DIR OS_SYSFS_THP
#define NODE_DIR "/sys/devices/system/node"

/* ---- reading under the root, noting what cannot be read ------------------------------------------ */

static void note_unreadable(struct status_snapshot *s, const char *path, int error) {
  if (error == ENOENT || error == ENOTDIR) return; /* absent: this kernel has no such file, not an error */
  for (unsigned i = 0; i < s->unreadable_count; i++)
    if (strcmp(s->unreadable[i].path, path) == 0) return;
  if (s->unreadable_count == STATUS_MAX_UNREADABLE) return;
  struct status_unreadable *u = &s->unreadable[s->unreadable_count++];
  snprintf(u->path, sizeof u->path, "%s", path);
  u->error = error;
}

/* Whole file (malloc'd) at root + path, or NULL (noted when it exists but cannot be read). */
static char *read_text(struct status_snapshot *s, const char *path) {
  char full[2048];
  root_path(full, sizeof full, s->root, path);
  char *text;
  int rc = os_read_file(full, &text, NULL);
  if (rc) note_unreadable(s, path, -rc);
  return text;
}

static bool read_line(struct status_snapshot *s, const char *path, char *buf, size_t cap) {
  char full[2048];
  root_path(full, sizeof full, s->root, path);
  ssize_t n = os_read_small(full, buf, cap);
  if (n < 0) { note_unreadable(s, path, (int)-n); buf[0] = '\0'; }
  return n >= 0;
}

static bool read_line_under_root(void *context, const char *path, char *buf, size_t cap) {
  return read_line(context, path, buf, cap);
}

static uint64_t read_number(struct status_snapshot *s, const char *path) {
  char buf[64];
  uint64_t value;
  if (!read_line(s, path, buf, sizeof buf) || !parse_u64(buf, &value)) return STATUS_UNKNOWN;
  return value;
}

static void read_choice(struct status_snapshot *s, const char *path, char *out, size_t cap) {
  char buf[256];
  out[0] = '\0';
  if (read_line(s, path, buf, sizeof buf)) parse_bracketed_choice(buf, out, cap);
}

static uint64_t keyed(const char *text, const char *key) {
  uint64_t value;
  return text && parse_keyed_value(text, key, &value) ? value : STATUS_UNKNOWN;
}

const struct status_field status_khugepaged_fields[] = {
#define FIELD(name) {#name, offsetof(struct status_khugepaged, name)}
    FIELD(pages_to_scan), FIELD(scan_sleep_millisecs), FIELD(alloc_sleep_millisecs), FIELD(defrag),
    FIELD(max_ptes_none), FIELD(max_ptes_swap), FIELD(max_ptes_shared), FIELD(pages_collapsed), FIELD(full_scans),
#undef FIELD
};
_Static_assert(sizeof status_khugepaged_fields / sizeof status_khugepaged_fields[0] == STATUS_KHUGEPAGED_FIELDS,
               "status_khugepaged_fields: one row per field of struct status_khugepaged");

const char *const status_mthp_collapse_fields[STATUS_MTHP_COLLAPSE_FIELDS] = {
    "collapse_alloc", "collapse_alloc_failed", "collapse_exceed_none_pte", "collapse_exceed_swap_pte",
    "collapse_exceed_shared_pte"};

const char *const status_mthp_folio_fields[STATUS_MTHP_FOLIO_FIELDS] = {
    "nr_anon", "nr_anon_partially_mapped", "anon_fault_alloc", "anon_fault_fallback", "shmem_alloc", "split"};

/* ---- the parts ------------------------------------------------------------------------------------ */

static void read_pools(struct status_snapshot *s) {
  s->default_hugetlb_size = pool_default_size_at(s->root);
  int count = pool_list_at(s->root, s->pools, HUGIFY_MAX_HUGETLB_SIZES);
  s->hugetlb_present = count >= 0;
  s->pool_count = count > 0 ? (unsigned)count : 0;
  if (count < 0) note_unreadable(s, OS_SYSFS_HUGEPAGES, -count);
}

static void read_usage(struct status_snapshot *s) {
  char *meminfo = read_text(s, "/proc/meminfo");
  s->mem_total = keyed(meminfo, "MemTotal");
  s->mem_free = keyed(meminfo, "MemFree");
  s->anon_huge = keyed(meminfo, "AnonHugePages");
  s->shmem = keyed(meminfo, "Shmem");
  s->shmem_huge = keyed(meminfo, "ShmemHugePages");
  s->shmem_pmd_mapped = keyed(meminfo, "ShmemPmdMapped");
  s->file_huge = keyed(meminfo, "FileHugePages");
  s->file_pmd_mapped = keyed(meminfo, "FilePmdMapped");
  s->hugetlb_bytes = keyed(meminfo, "Hugetlb");
  free(meminfo);
  char *vmstat = read_text(s, "/proc/vmstat");
  s->counters_known = vmstat != NULL;
  if (vmstat) parse_vmstat(vmstat, &s->counters);
  else memset(&s->counters, 0, sizeof s->counters);
  free(vmstat);
}

static void read_mounts(struct status_snapshot *s) {
  char *text = read_text(s, "/proc/mounts");
  struct mount_entry *mounts = NULL;
  long count = text ? parse_mounts(text, &mounts) : 0;
  free(text);
  for (long i = 0; i < count && s->mount_count < STATUS_MAX_MOUNTS; i++) {
    if (strcmp(mounts[i].type, "hugetlbfs") != 0) continue;
    struct status_mount *m = &s->mounts[s->mount_count++];
    snprintf(m->path, sizeof m->path, "%s", mounts[i].path);
    snprintf(m->source, sizeof m->source, "%s", mounts[i].source);
    parse_hugetlbfs_options(mounts[i].options, &m->options);
    m->page_size = m->options.page_size ? m->options.page_size : s->default_hugetlb_size;
  }
  free(mounts);
}

static void read_thp(struct status_snapshot *s) {
  read_choice(s, THP_DIR "/enabled", s->thp_enabled, sizeof s->thp_enabled);
  s->thp_present = s->thp_enabled[0] != '\0';
  read_choice(s, THP_DIR "/defrag", s->thp_defrag, sizeof s->thp_defrag);
  read_choice(s, THP_DIR "/shmem_enabled", s->thp_shmem_enabled, sizeof s->thp_shmem_enabled);
  s->thp_use_zero_page = read_number(s, THP_DIR "/use_zero_page");
  s->thp_pmd_size = read_number(s, THP_DIR "/hpage_pmd_size");
  char dir[2048];
  root_path(dir, sizeof dir, s->root, THP_DIR);
  uint64_t sizes[STATUS_MAX_MTHP];
  int count = os_hugepage_size_dirs(dir, sizes, STATUS_MAX_MTHP);
  for (int i = 0; i < count; i++) {
    struct status_mthp *m = &s->mthp[s->mthp_count++];
    char path[256];
    m->page_size = sizes[i];
    snprintf(path, sizeof path, THP_DIR "/hugepages-%llukB/enabled", (unsigned long long)(sizes[i] >> 10));
    read_choice(s, path, m->enabled, sizeof m->enabled);
    snprintf(path, sizeof path, THP_DIR "/hugepages-%llukB/shmem_enabled", (unsigned long long)(sizes[i] >> 10));
    read_choice(s, path, m->shmem_enabled, sizeof m->shmem_enabled);
    for (size_t f = 0; f < STATUS_MTHP_COLLAPSE_FIELDS; f++) {
      snprintf(path, sizeof path, THP_DIR "/hugepages-%llukB/stats/%s", (unsigned long long)(sizes[i] >> 10),
               status_mthp_collapse_fields[f]);
      m->collapse[f] = read_number(s, path);
      m->collapse_known |= m->collapse[f] != STATUS_UNKNOWN;
    }
    for (size_t f = 0; f < STATUS_MTHP_FOLIO_FIELDS; f++) {
      snprintf(path, sizeof path, THP_DIR "/hugepages-%llukB/stats/%s", (unsigned long long)(sizes[i] >> 10),
               status_mthp_folio_fields[f]);
      m->folios[f] = read_number(s, path);
      m->folios_known |= m->folios[f] != STATUS_UNKNOWN;
    }
  }
  for (size_t i = 0; i < STATUS_KHUGEPAGED_FIELDS; i++) {
    char path[256];
    snprintf(path, sizeof path, THP_DIR "/khugepaged/%s", status_khugepaged_fields[i].name);
    *(uint64_t *)((char *)&s->khugepaged + status_khugepaged_fields[i].offset) = read_number(s, path);
  }
}

static void read_boot_and_limits(struct status_snapshot *s) {
  char *cmdline = read_text(s, "/proc/cmdline");
  s->boot_known = cmdline != NULL;
  if (cmdline) parse_cmdline_hugepages(cmdline, &s->boot);
  free(cmdline);
  /* hugepages= before any hugepagesz= is for the default size, known from meminfo when not given */
  for (unsigned i = 0; i < s->boot.pool_count; i++)
    if (s->boot.pools[i].page_size == 0) s->boot.pools[i].page_size = s->default_hugetlb_size;
  char *limits = read_text(s, "/proc/self/limits");
  s->memlock_known = limits && parse_limit(limits, "Max locked memory", &s->memlock_soft, &s->memlock_hard);
  free(limits);
}

static void read_numa(struct status_snapshot *s) {
  char *status = read_text(s, "/proc/self/status");
  if (status) {
    parse_keyed_text(status, "Cpus_allowed_list", s->cpus_allowed, sizeof s->cpus_allowed);
    parse_keyed_text(status, "Mems_allowed_list", s->mems_allowed, sizeof s->mems_allowed);
  }
  free(status);
  static uint64_t allowed_cpus[STATUS_MAX_CPUS / 64], node_cpus[STATUS_MAX_CPUS / 64];
  uint64_t allowed_mems[HUGIFY_MAX_NODES / 64 + 1], with_cpu[HUGIFY_MAX_NODES / 64 + 1];
  bool cpus_known = s->cpus_allowed[0] && parse_id_list(s->cpus_allowed, allowed_cpus, STATUS_MAX_CPUS);
  bool mems_known = s->mems_allowed[0] && parse_id_list(s->mems_allowed, allowed_mems, HUGIFY_MAX_NODES);
  char line[1024];
  bool has_cpu_known = read_line(s, NODE_DIR "/has_cpu", line, sizeof line) &&
                       parse_id_list(line, with_cpu, HUGIFY_MAX_NODES);
  int ids[HUGIFY_MAX_NODES];
  int count = pool_node_ids_at(s->root, ids, HUGIFY_MAX_NODES);
  for (int i = 0; i < count; i++) {
    struct status_node *n = &s->nodes[s->node_count++];
    char path[256], key[64];
    n->node = ids[i];
    snprintf(path, sizeof path, NODE_DIR "/node%d/cpulist", ids[i]);
    read_line(s, path, n->cpulist, sizeof n->cpulist);
    bool cpus = parse_id_list(n->cpulist, node_cpus, STATUS_MAX_CPUS);
    n->has_cpu = has_cpu_known ? id_list_has(with_cpu, (unsigned)ids[i]) : cpus && n->cpulist[0];
    n->caller_cpus = !cpus_known;
    for (unsigned w = 0; cpus && cpus_known && w < STATUS_MAX_CPUS / 64; w++)
      if (allowed_cpus[w] & node_cpus[w]) n->caller_cpus = true;
    n->caller_mems = !mems_known || id_list_has(allowed_mems, (unsigned)ids[i]);
    snprintf(path, sizeof path, NODE_DIR "/node%d/meminfo", ids[i]);
    snprintf(key, sizeof key, "Node %d MemTotal", ids[i]);
    char *meminfo = read_text(s, path);
    n->mem_total = keyed(meminfo, key);
    free(meminfo);
  }
}

/* The caller's cgroup v2 and, per page size, the tightest hugetlb limit on the way up to the root. */
static void read_cgroup(struct status_snapshot *s) {
  if (cgroup_memory_hierarchy(s->root, &s->cgroup_memory))
    s->cgroup_thp_count = (unsigned)cgroup_tree_thp(s->root, &s->cgroup_memory, s->cgroup_thp, STATUS_MAX_CGROUPS);
  char *text = read_text(s, "/proc/self/cgroup");
  if (!text) return;
  bool v2 = parse_cgroup_v2_path(text, s->cgroup_path, sizeof s->cgroup_path);
  s->cgroup_version = v2 ? 2 : text[0] ? 1 : 0;
  free(text);
  if (!v2) return;
  char *mounts_text = read_text(s, "/proc/mounts");
  char mountpoint[512] = "";
  bool mounted = mounts_text && cgroup_v2_mount(mounts_text, mountpoint, sizeof mountpoint);
  free(mounts_text);
  if (!mounted) return;
  snprintf(s->cgroup_mount, sizeof s->cgroup_mount, "%s", mountpoint);
  for (unsigned p = 0; p < s->pool_count; p++)
    if (cgroup_hugetlb_limit_walk(mountpoint, s->cgroup_path, s->pools[p].global.page_size, read_line_under_root, s,
                                  &s->cgroup_limits[s->cgroup_limit_count]))
      s->cgroup_limit_count++;
}

static void read_buddyinfo(struct status_snapshot *s) {
  char *text = read_text(s, "/proc/buddyinfo");
  long count = text ? parse_buddyinfo(text, s->zones, STATUS_MAX_ZONES) : 0;
  s->zone_count = count > 0 ? (unsigned)count : 0;
  free(text);
}

/* The kdamonds' schemes that have the kernel collapse or advise memory itself (before the features: their probes
 * set a kdamond of hugify's own up for a moment where none is). */
static void read_damon(struct status_snapshot *s) {
  char admin[2048];
  struct probe_damon_scheme all[64];
  root_path(admin, sizeof admin, s->root, PROBE_DAMON_ADMIN);
  s->damon_present = access(admin, F_OK) == 0;
  s->damon_module_count = (unsigned)probe_damon_modules(s->root, s->damon_modules, 3);
  int count = s->damon_present ? probe_damon_schemes(admin, all, 64) : 0;
  if (count < 0) note_unreadable(s, PROBE_DAMON_ADMIN "/kdamonds/nr_kdamonds", -count);
  for (int i = 0; i < count && i < 64 && s->damon_scheme_count < STATUS_MAX_DAMON_SCHEMES; i++)
    if (strcmp(all[i].action, "collapse") == 0 || strcmp(all[i].action, "hugepage") == 0)
      s->damon_schemes[s->damon_scheme_count++] = all[i];
}

static void read_features(struct status_snapshot *s) {
  for (int f = 0; f < PROBE_FEATURE_COUNT; f++)
    s->features[f].state = probe_feature_at(s->root, (enum probe_feature)f, s->features[f].detail,
                                            sizeof s->features[f].detail);
  s->can_change_pools = s->live && probe_can_change_pools();
}

int status_check_root(const char *root) {
  struct stat st;
  if (!root || !root[0] || strcmp(root, "/") == 0) return 0;
  if (stat(root, &st) != 0) return -errno;
  return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static void read_hypervisor(struct status_snapshot *s) {
  char signature[12];
  const char *name = s->live && os_hypervisor_signature(signature) == 0 ? hypervisor_name(signature) : NULL;
  if (name) {
    snprintf(s->hypervisor, sizeof s->hypervisor, "%s", name);
    return;
  }
  char *cpuinfo = read_text(s, "/proc/cpuinfo");
  if (cpuinfo && parse_cpuinfo_hypervisor(cpuinfo)) snprintf(s->hypervisor, sizeof s->hypervisor, "unknown");
  free(cpuinfo);
}

int status_read(const char *root, struct status_snapshot *out) {
  if (!out) return -EINVAL;
  memset(out, 0, sizeof *out);
  snprintf(out->root, sizeof out->root, "%s", root && root[0] ? root : "/");
  out->live = strcmp(out->root, "/") == 0;
  long base = sysconf(_SC_PAGESIZE);
  out->base_page_size = base > 0 ? (uint64_t)base : 4096;
  read_line(out, "/proc/sys/kernel/osrelease", out->kernel_release, sizeof out->kernel_release);
  read_pools(out);
  read_mounts(out);
  read_thp(out);
  read_usage(out);
  read_buddyinfo(out);
  read_boot_and_limits(out);
  read_numa(out);
  read_cgroup(out);
  read_damon(out);
  read_features(out);
  read_hypervisor(out);
  return 0;
}

int status_refresh(struct status_snapshot *s) {
  if (!s) return -EINVAL;
  read_pools(s);
  read_usage(s);
  read_buddyinfo(s);
  return 0;
}

uint64_t status_could_reserve(const struct status_snapshot *s, int node, uint64_t page_size, bool *upper_bound) {
  return buddyinfo_free_pages(s->zones, s->zone_count, node, s->base_page_size, page_size, upper_bound);
}

/* ---- diagnoses ------------------------------------------------------------------------------------ */

struct diagnoses {
  struct status_diagnosis *out;
  unsigned cap, count;
};

static void __attribute__((format(printf, 5, 6)))
diagnose(struct diagnoses *d, const char *id, enum status_severity severity, const char *fix, const char *format, ...) {
  if (d->count == d->cap) return;
  struct status_diagnosis *x = &d->out[d->count++];
  memset(x, 0, sizeof *x);
  snprintf(x->id, sizeof x->id, "%s", id);
  x->severity = severity;
  snprintf(x->fix, sizeof x->fix, "%s", fix);
  va_list args;
  va_start(args, format);
  vsnprintf(x->message, sizeof x->message, format, args);
  va_end(args);
}

static uint64_t pool_pages(const struct hugify_pool *p) {
  return p->global.total > p->global.surplus ? p->global.total - p->global.surplus : 0;
}

static bool is_gigantic_size(const struct status_snapshot *s, uint64_t page_size) {
  return page_size > (s->base_page_size << 10);
}

static const struct status_node *find_node(const struct status_snapshot *s, int id) {
  for (unsigned i = 0; i < s->node_count; i++)
    if (s->nodes[i].node == id) return &s->nodes[i];
  return NULL;
}

/* A feature the kernel lacks, with what hugify does without it (probe_features' words). */
static void diagnose_missing(const struct status_snapshot *s, struct diagnoses *d, enum probe_feature feature,
                             const char *id) {
  if (s->features[feature].state != HUGIFY_FEATURE_NO) return;
  const struct probe_feature_info *f = &probe_features[feature];
  char fix[128];
  probe_fix(feature, fix, sizeof fix);
  diagnose(d, id, STATUS_NOTE, fix, "this kernel lacks %s (Linux %s+): %s", f->name, f->since, f->without);
}

/* max_ptes_none at its default (one page short of a PMD: 511 of 512 4 KiB pages, 2047 of 2048 16 KiB ones):
 * khugepaged bloats sparse memory; half the PMD's pages is the fix. */
static void diagnose_bloat(const struct status_snapshot *s, struct diagnoses *d, bool always) {
  uint64_t base = s->base_page_size ? s->base_page_size : 4096;
  uint64_t ptes = s->thp_pmd_size != STATUS_UNKNOWN ? s->thp_pmd_size / base : page_sizes_pmd_of(base) / base;
  bool bloating = s->khugepaged.max_ptes_none != STATUS_UNKNOWN && ptes && s->khugepaged.max_ptes_none >= ptes - 1;
  char fix[512];
  if (bloating && always) {
    snprintf(fix, sizeof fix,
             "echo %llu > " THP_DIR "/khugepaged/max_ptes_none (khugepaged then collapses only ranges at least half "
             "in use); or echo madvise > " THP_DIR "/enabled and let `hugify agent` choose what to collapse (its "
             "--min-present guard keeps sparse memory small): only madvise also ends the faults' own bloat, which "
             "max_ptes_none does not limit", (unsigned long long)(ptes / 2 - 1));
    diagnose(d, "always_bloat", STATUS_WARNING, fix,
             "THP is 'always' with khugepaged max_ptes_none %llu (the default): every program's memory is "
             "eligible, a fault in an empty aligned %llu-page range takes a whole huge page, and khugepaged "
             "collapses a range with one page of it in use, so sparse memory grows up to %llux (memory bloat)",
             (unsigned long long)s->khugepaged.max_ptes_none, (unsigned long long)ptes, (unsigned long long)ptes);
  } else if (bloating && strcmp(s->thp_enabled, "never") != 0) {
    snprintf(fix, sizeof fix, "echo %llu > " THP_DIR "/khugepaged/max_ptes_none", (unsigned long long)(ptes / 2 - 1));
    diagnose(d, "max_ptes_none_bloat", STATUS_NOTE, fix,
             "khugepaged max_ptes_none is %llu: it collapses a %llu-page range even when only one page of it is in "
             "use, so sparse memory grows up to %llux (%llu collapses only ranges at least half in use)",
             (unsigned long long)s->khugepaged.max_ptes_none, (unsigned long long)ptes, (unsigned long long)ptes,
             (unsigned long long)(ptes / 2 - 1));
  }
}

/* A PMD too big to collapse wisely (512 MiB on 64 KiB pages): faults are to get mTHP folios instead. */
static void diagnose_pmd_size(const struct status_snapshot *s, struct diagnoses *d) {
  if (s->thp_pmd_size == STATUS_UNKNOWN || page_sizes_collapse_wise(s->thp_pmd_size)) return;
  char pmd[32], largest[32] = "";
  for (unsigned i = 0; i < s->mthp_count; i++)
    if (s->mthp[i].page_size < s->thp_pmd_size && page_sizes_faults_take(s->mthp[i].enabled, s->thp_enabled))
      page_sizes_name(s->mthp[i].page_size, largest, sizeof largest);
  page_sizes_name(s->thp_pmd_size, pmd, sizeof pmd);
  diagnose(d, "pmd_too_big", largest[0] ? STATUS_NOTE : STATUS_WARNING,
           "echo madvise > " THP_DIR "/hugepages-2048kB/enabled (or another size below the PMD)",
           "the PMD huge page is %s: too big to collapse wisely (one copy holds the process's lock for long, and a "
           "sparse range bloats by up to %s), so `hugify collapse` and the agent leave memory alone and `hugify "
           "run` aligns and advises for the largest mTHP size faults take: %s", pmd, pmd,
           largest[0] ? largest : "none enabled, so memory stays on base pages");
}

static void diagnose_thp(const struct status_snapshot *s, struct diagnoses *d) {
  if (!s->thp_present) {
    diagnose(d, "thp_absent", STATUS_WARNING,
             "reserve a hugetlb pool and run programs on it: hugify pool set 2M=N, then hugify run --heap hugetlb "
             "PROGRAM; or boot a kernel built with CONFIG_TRANSPARENT_HUGEPAGE",
             "THP is not built into this kernel (CONFIG_TRANSPARENT_HUGEPAGE; " OS_SYSFS_THP " does not exist): "
             "hugetlb is the road to huge pages here (`hugify pool`, `hugify run --heap hugetlb`, the text remap "
             "onto a reserved pool); `hugify collapse` and `hugify agent` cannot work");
    return;
  }
  bool always = strcmp(s->thp_enabled, "always") == 0;
  if (strcmp(s->thp_enabled, "never") == 0)
    diagnose(d, "thp_never", STATUS_WARNING, "echo madvise > " THP_DIR "/enabled",
             "THP is 'never': no program gets transparent huge pages, not even with MADV_HUGEPAGE%s",
             strcmp(s->boot.transparent_hugepage, "never") == 0
                 ? " (the kernel command line sets transparent_hugepage=never; change it there to keep the fix)" : "");
  if (strcmp(s->thp_defrag, "always") == 0)
    diagnose(d, "defrag_always", STATUS_WARNING, "echo defer+madvise > " THP_DIR "/defrag",
             "THP defrag is 'always': a page fault that finds no free huge page stalls in direct compaction "
             "(latency spikes of milliseconds)");
  diagnose_bloat(s, d, always);
  diagnose_pmd_size(s, d);
  diagnose_missing(s, d, PROBE_MADV_COLLAPSE, "no_madv_collapse");
  diagnose_missing(s, d, PROBE_PAGEMAP_SCAN, "no_pagemap_scan");
}

/* Boot asked for more than is there. */
static void diagnose_boot_shortfall(const struct status_snapshot *s, struct diagnoses *d, const struct hugify_pool *p,
                                    const char *label, uint64_t pages) {
  char fix[512];
  for (unsigned b = 0; b < s->boot.pool_count; b++) {
    const struct cmdline_pool *boot = &s->boot.pools[b];
    if (boot->page_size != p->global.page_size) continue;
    char where[256] = "";
    bool short_node = false;
    for (unsigned n = 0; boot->per_node && n < p->node_count; n++) {
      int id = p->nodes[n].node;
      uint64_t have = p->nodes[n].total > p->nodes[n].surplus ? p->nodes[n].total - p->nodes[n].surplus : 0;
      if (id < CMDLINE_MAX_NODES && have < boot->node_pages[id]) {
        size_t used = strlen(where);
        snprintf(where + used, sizeof where - used, "%snode %d has %llu of %llu", short_node ? ", " : "", id,
                 (unsigned long long)have, (unsigned long long)boot->node_pages[id]);
        short_node = true;
      }
    }
    if (pages >= boot->pages && !short_node) continue;
    snprintf(fix, sizeof fix, "hugify pool set %s=%llu (now, if memory allows; else reboot with less in use)",
             label, (unsigned long long)boot->pages);
    diagnose(d, "boot_pages_missing", STATUS_WARNING, fix,
             "the kernel command line asks for %llu %s pages, %llu are there%s%s: memory ran short or was "
             "fragmented at boot, or the pool was shrunk since",
             (unsigned long long)boot->pages, label, (unsigned long long)pages, short_node ? "; " : "", where);
  }
}

/* Pages on nodes the caller does not run on (or may not allocate from). */
static void diagnose_remote_nodes(const struct status_snapshot *s, struct diagnoses *d, const struct hugify_pool *p,
                                  const char *label) {
  char fix[512];
  if (p->node_count < 2) return;
  for (unsigned n = 0; n < p->node_count; n++) {
    uint64_t have = p->nodes[n].total;
    const struct status_node *node = find_node(s, p->nodes[n].node);
    if (!have || !node || (node->caller_cpus && node->caller_mems)) continue;
    int home = -1;
    uint64_t home_pages = 0;
    for (unsigned k = 0; k < p->node_count && home < 0; k++) {
      const struct status_node *candidate = find_node(s, p->nodes[k].node);
      if (!candidate || !candidate->caller_cpus || !candidate->caller_mems) continue;
      home = candidate->node;
      home_pages = p->nodes[k].total > p->nodes[k].surplus ? p->nodes[k].total - p->nodes[k].surplus : 0;
    }
    if (home >= 0)
      snprintf(fix, sizeof fix, "hugify pool set %s=%llu --node %d && hugify pool set %s=0 --node %d", label,
               (unsigned long long)(home_pages + have), home, label, node->node);
    else
      snprintf(fix, sizeof fix, "run the program on the CPUs of node %d (numactl --cpunodebind=%d)", node->node,
               node->node);
    if (!node->caller_mems)
      diagnose(d, "pool_on_other_node", STATUS_WARNING, fix,
               "%llu %s pages are on node %d, which this process may not allocate from (Mems_allowed_list %s)",
               (unsigned long long)have, label, node->node, s->mems_allowed);
    else
      diagnose(d, "pool_on_other_node", STATUS_WARNING, fix,
               "%llu %s pages are on node %d, %s (Cpus_allowed_list %s): programs here get remote memory",
               (unsigned long long)have, label, node->node,
               node->has_cpu ? "whose CPUs this process may not run on" : "which has no CPUs",
               s->cpus_allowed[0] ? s->cpus_allowed : "?");
  }
}

/* Gigantic pages asked for (pool or boot) but none free. */
static void diagnose_gigantic_none_free(const struct status_snapshot *s, struct diagnoses *d,
                                        const struct hugify_pool *p, const char *label, uint64_t pages) {
  char fix[512];
  uint64_t boot_pages = 0;
  for (unsigned b = 0; b < s->boot.pool_count; b++)
    if (s->boot.pools[b].page_size == p->global.page_size) boot_pages = s->boot.pools[b].pages;
  uint64_t available = p->global.available;
  if (is_gigantic_size(s, p->global.page_size) && (pages > 0 || boot_pages > 0) && available == 0) {
    snprintf(fix, sizeof fix, "hugify pool set %s=%llu, or boot with hugepagesz=%s hugepages=%llu", label,
             (unsigned long long)(pages + 1), label, (unsigned long long)(pages + 1));
    diagnose(d, "gigantic_none_free", STATUS_WARNING, fix,
             "%s pages were asked for (%llu in the pool%s) but none is free: every one is in use or reserved",
             label, (unsigned long long)pages, boot_pages ? ", and on the kernel command line" : "");
  }
}

static void diagnose_pools(const struct status_snapshot *s, struct diagnoses *d) {
  for (unsigned i = 0; i < s->pool_count; i++) {
    const struct hugify_pool *p = &s->pools[i];
    char label[32], fix[512];
    format_page_size(p->global.page_size, label, sizeof label);
    uint64_t pages = pool_pages(p);
    bool mounted = false;
    for (unsigned m = 0; m < s->mount_count; m++) mounted |= s->mounts[m].page_size == p->global.page_size;
    if (pages > 0 && !mounted) {
      snprintf(fix, sizeof fix, "hugify pool mount --size %s", label);
      diagnose(d, "pool_without_mount", STATUS_NOTE, fix,
               "%llu %s pages are in the pool but no hugetlbfs of that size is mounted: programs that need files "
               "(DPDK, libhugetlbfs, hugetlbfs users) cannot use them; MAP_HUGETLB and SHM_HUGETLB can",
               (unsigned long long)pages, label);
    }
    diagnose_boot_shortfall(s, d, p, label, pages);
    diagnose_remote_nodes(s, d, p, label);
    diagnose_gigantic_none_free(s, d, p, label, pages);
  }
}

static void diagnose_cgroup(const struct status_snapshot *s, struct diagnoses *d) {
  for (unsigned i = 0; i < s->cgroup_limit_count; i++) {
    const struct cgroup_hugetlb_limit *l = &s->cgroup_limits[i];
    const struct hugify_pool *p = NULL;
    for (unsigned k = 0; k < s->pool_count; k++)
      if (s->pools[k].global.page_size == l->page_size) p = &s->pools[k];
    if (!p || l->max == UINT64_MAX) continue;
    uint64_t pool_bytes = pool_pages(p) * l->page_size;
    if (l->max >= pool_bytes) continue;
    char label[32], name[32], limit[32], pool[32], fix[512];
    format_page_size(l->page_size, label, sizeof label);
    cgroup_hugetlb_size_name(l->page_size, name, sizeof name);
    format_bytes(l->max, limit, sizeof limit);
    format_bytes(pool_bytes, pool, sizeof pool);
    bool guarded = l->rsvd_max <= l->max;
    snprintf(fix, sizeof fix, "echo %llu > %s%s/hugetlb.%s.rsvd.max (mmap then fails instead of a fault), or raise "
             "hugetlb.%s.max", (unsigned long long)l->max, s->cgroup_mount,
             strcmp(l->limited_by, "/") ? l->limited_by : "", name, name);
    diagnose(d, "cgroup_limit_below_pool", guarded ? STATUS_NOTE : STATUS_WARNING, guarded ? "" : fix,
             "cgroup %s limits %s huge pages to %s (hugetlb.%s.max), below the %s pool%s", l->limited_by, label, limit,
             name, pool,
             guarded ? "; hugetlb.rsvd.max is as tight, so mmap fails cleanly instead of a later SIGBUS"
                     : ": a program here can map more than it may fault in, and gets SIGBUS at the fault");
  }
}

/* Measurements on a guest: hosts commonly back guest memory only when the guest first touches it. */
static void diagnose_machine(const struct status_snapshot *s, struct diagnoses *d) {
  if (!s->hypervisor[0]) return;
  diagnose(d, "virtual_machine", STATUS_NOTE,
           "compare runs with warm-up rounds and medians of interleaved rounds (hugify check and hugify bench do), "
           "or take huge pages from a reserved hugetlb pool (hugify pool set 2M=N), which the host has backed already",
           "this is a virtual machine (hypervisor: %s): the host may back the guest's memory only when the guest "
           "first touches it, so faulting fresh memory can cost far more, and far more variably, than touching it "
           "again (on the KVM guest hugify is developed on: 0.04 to 0.65 s of kernel time for the same run)",
           s->hypervisor);
}

/* shmem_enabled as it applies to PMD-sized pages: the per-size control unless it says "inherit". */
static const char *shmem_mode(const struct status_snapshot *s) {
  for (unsigned i = 0; i < s->mthp_count; i++)
    if (s->mthp[i].page_size == s->thp_pmd_size && s->mthp[i].shmem_enabled[0] &&
        strcmp(s->mthp[i].shmem_enabled, "inherit") != 0)
      return s->mthp[i].shmem_enabled;
  return s->thp_shmem_enabled;
}

/* Shared memory is memory: a server's shared buffers (PostgreSQL's, a cache's) stay on 4 KiB pages while
 * shmem_enabled is never or deny. Worth saying from 512 MiB of it. */
static void diagnose_shmem(const struct status_snapshot *s, struct diagnoses *d) {
  const char *mode = shmem_mode(s);
  if (!s->thp_present || s->shmem == STATUS_UNKNOWN || s->shmem < OS_MIB(512)) return;
  if (strcmp(mode, "never") != 0 && strcmp(mode, "deny") != 0) return;
  uint64_t huge = s->shmem_huge == STATUS_UNKNOWN ? 0 : s->shmem_huge;
  if (huge * 10 >= s->shmem * 9) return; /* it is huge already (hugify run placed it, and collapse did the rest) */
  diagnose(d, strcmp(mode, "deny") == 0 ? "shmem_deny" : "shmem_never", STATUS_WARNING,
           "echo advise > " THP_DIR "/shmem_enabled, then restart the programs that hold it (memory mapped "
           "while it was never stays unaligned) or start them under `hugify run`; persistent: "
           "transparent_hugepage_shmem=advise on the kernel command line (Linux 6.14+), or the tmpfiles.d line "
           "'w " THP_DIR "/shmem_enabled - - - - advise'",
           "shmem_enabled is %s while processes hold %.1f GiB of shared memory (%.1f GiB of it on huge pages): "
           "shared buffers stay on 4 KiB pages",
           mode, (double)s->shmem / (double)(UINT64_C(1) << 30), (double)huge / (double)(UINT64_C(1) << 30));
}

/* DAMON held by a user inside the kernel: no kdamond of DAMON's sysfs starts (the agent's heat, a scheme). */
static void diagnose_damon(const struct status_snapshot *s, struct diagnoses *d) {
  if (!s->damon_module_count || s->features[PROBE_DAMON_VADDR].state != HUGIFY_FEATURE_YES) return;
  const struct probe_damon_module *m = &s->damon_modules[0];
  char fix[256];
  snprintf(fix, sizeof fix, "echo N > /sys/module/%s/parameters/enabled (or %s.enabled=N on the kernel command "
           "line), if its figures are not wanted", m->name, m->name);
  diagnose(d, "damon_held", STATUS_NOTE, fix,
           "DAMON is held by %s inside the kernel (kdamond pid %d): no kdamond of DAMON's sysfs can start while it "
           "runs (EBUSY), so `hugify agent` has no DAMON heat (densest first) and no collapse or hugepage scheme "
           "can run", m->name, m->kdamond_pid);
}

unsigned status_diagnose(const struct status_snapshot *s, struct status_diagnosis *out, unsigned cap) {
  struct diagnoses d = {out, cap, 0};
  diagnose_machine(s, &d);
  diagnose_thp(s, &d);
  diagnose_shmem(s, &d);
  diagnose_damon(s, &d);
  diagnose_pools(s, &d);
  diagnose_cgroup(s, &d);
  return d.count;
}
