/* SPDX-License-Identifier: MIT */
/* cmd_status.c - hugify status: everything the kernel says about huge pages here, with diagnoses and fixes. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "measure.h"
#include "page_sizes.h"
#include "pool_view.h"
#include "procfs.h"
#include "reason.h"
#include "status.h"
#include "units.h"

struct status_args {
  struct json_output json;
  double watch;
  uint64_t count;
  const char *root;
};

static const struct option_spec status_options[] = {
    OPT_GROUP("Options"),
    OPT_JSON(struct status_args, json,
             "JSON on stdout instead of the text (schema hugify.status/2: docs/status.md);\n"
             "--json=FILE: the text on stdout and the JSON to FILE (with --watch: one document more\n"
             "for each interval)"),
    OPT_DECIMAL("watch", struct status_args, watch, "SECONDS", 0.1, 86400,
                "after the status, print the counters' changes every SECONDS until Ctrl-C"),
    OPT_COUNT("count", struct status_args, count, "N", 1, ULONG_MAX, "with --watch: stop after N intervals"),
    VIEW_ROOT_OPTION(struct status_args, root),
    OPT_END,
};

const struct command_help help_status = {
    "usage: hugify status [--json[=FILE]] [--watch SECONDS [--count N]] [--root DIR]\n"
    "\n"
    "Everything the kernel says about huge pages on this machine, in pages and bytes: hugetlb pools per size\n"
    "and NUMA node, hugetlbfs mounts, THP settings (per size where the kernel has mTHP, and khugepaged),\n"
    "what the kernel collapses by itself (DAMON's collapse and hugepage schemes, khugepaged per size),\n"
    "huge pages in use, counters since boot, fragmentation (how many 2M / 1G pages could be reserved now),\n"
    "boot parameters, the memlock limit, cgroup hugetlb limits, kernel features; then diagnoses, each with\n"
    "the command that fixes it. Needs no root: what cannot be read is listed as such.\n"
    "\n",
    status_options,
    "\n"
    "Examples:\n"
    "  hugify status\n"
    "  hugify status --json | jq '.diagnoses'\n"
    "  hugify status --watch 1            # THP faults, fallbacks, compaction stalls per second\n"
    "  hugify status --watch 5 --count 12 --json\n"
    "\n"
    "Exit status: 0 done, 2 bad usage.\n",
};

static const char *feature_word(int state) {
  return state == HUGIFY_FEATURE_YES ? "yes" : state == HUGIFY_FEATURE_NO ? "no" : "unknown";
}

static const char *limit_text(uint64_t bytes, char *buf, size_t cap) {
  if (bytes == UINT64_MAX) snprintf(buf, cap, "unlimited");
  else if (bytes == STATUS_UNKNOWN) snprintf(buf, cap, "?");
  else format_bytes(bytes, buf, cap);
  return buf;
}

static const char *bytes_or_unknown(uint64_t bytes, char *buf, size_t cap) {
  if (bytes == STATUS_UNKNOWN) snprintf(buf, cap, "?");
  else format_bytes(bytes, buf, cap);
  return buf;
}

/* ---- text ------------------------------------------------------------------------------------------ */

/* The per-size tables' first line: the title in `indent` columns, then each size right-aligned in w. */
static void print_size_header(const struct status_snapshot *s, const char *title, int indent, int w) {
  printf("  %-*s", indent, title);
  for (unsigned i = 0; i < s->mthp_count; i++) {
    char label[32];
    format_page_size(s->mthp[i].page_size, label, sizeof label);
    printf(" %*s", w, label);
  }
  putchar('\n');
}

static void print_thp(const struct status_snapshot *s) {
  printf("\nTransparent huge pages\n");
  if (!s->thp_present) {
    printf("  not built into this kernel (CONFIG_TRANSPARENT_HUGEPAGE): huge pages come from hugetlb pools only\n"
           "  (hugify pool set 2M=N; hugify run --heap hugetlb PROGRAM)\n");
    return;
  }
  char pmd[32], n[24], base[32];
  printf("  enabled %s, defrag %s, shmem_enabled %s, use_zero_page %s, PMD size %s\n", s->thp_enabled,
         s->thp_defrag[0] ? s->thp_defrag : "?", s->thp_shmem_enabled[0] ? s->thp_shmem_enabled : "?",
         view_number(s->thp_use_zero_page, n, sizeof n), bytes_or_unknown(s->thp_pmd_size, pmd, sizeof pmd));
  if (s->thp_pmd_size != STATUS_UNKNOWN && s->base_page_size) {
    page_sizes_name(s->base_page_size, base, sizeof base);
    page_sizes_name(s->thp_pmd_size, pmd, sizeof pmd);
    printf("  page sizes: base %s, PMD %s (%llu base pages)%s\n", base, pmd,
           (unsigned long long)(s->thp_pmd_size / s->base_page_size),
           !page_sizes_collapse_wise(s->thp_pmd_size) ? ": too big to collapse wisely (see the diagnoses)" : "");
  }
  if (s->mthp_count) {
    /* one column per size: its enabled and shmem_enabled controls */
    int w = 7;
    for (unsigned i = 0; i < s->mthp_count; i++) {
      if ((int)strlen(s->mthp[i].enabled) > w) w = (int)strlen(s->mthp[i].enabled);
      if ((int)strlen(s->mthp[i].shmem_enabled) > w) w = (int)strlen(s->mthp[i].shmem_enabled);
    }
    print_size_header(s, "per size (mTHP)", 17, w);
    printf("    enabled        ");
    for (unsigned i = 0; i < s->mthp_count; i++) printf(" %*s", w, s->mthp[i].enabled[0] ? s->mthp[i].enabled : "-");
    printf("\n    shmem_enabled  ");
    for (unsigned i = 0; i < s->mthp_count; i++)
      printf(" %*s", w, s->mthp[i].shmem_enabled[0] ? s->mthp[i].shmem_enabled : "-");
    putchar('\n');
  } else {
    printf("  per size (mTHP): not in this kernel (Linux 6.8+)\n");
  }
  printf("  khugepaged:");
  for (size_t f = 0; f < STATUS_KHUGEPAGED_FIELDS; f++) {
    char value[24];
    /* two lines, the first one the longer */
    printf("%s %s %s", f == (STATUS_KHUGEPAGED_FIELDS + 1) / 2 ? ",\n             " : f ? "," : "",
           status_khugepaged_fields[f].name,
           view_number(status_khugepaged_value(&s->khugepaged, &status_khugepaged_fields[f]), value, sizeof value));
  }
  putchar('\n');
}

/* The folios of each size now and how faults fared (hugepages-<N>kB/stats): the contiguous-PTE memory that
 * AnonHugePages (PMD-mapped only) does not count. */
static void print_folios(const struct status_snapshot *s) {
  bool known = false;
  for (unsigned i = 0; i < s->mthp_count; i++) known |= s->mthp[i].folios_known;
  if (!known) {
    printf("  folios per size: not counted by this kernel (hugepages-<N>kB/stats, Linux 6.9+)\n");
    return;
  }
  print_size_header(s, "folios per size (mTHP)", 29, 7);
  printf("    %-27s", "anonymous memory (nr_anon)");
  for (unsigned i = 0; i < s->mthp_count; i++) {
    char value[24] = "-";
    uint64_t n = s->mthp[i].folios[0];
    if (n != STATUS_UNKNOWN) format_page_size(n * s->mthp[i].page_size, value, sizeof value);
    printf(" %7s", n == 0 ? "0" : value);
  }
  putchar('\n');
  for (size_t f = 0; f < STATUS_MTHP_FOLIO_FIELDS; f++) {
    printf("    %-27s", status_mthp_folio_fields[f]);
    for (unsigned i = 0; i < s->mthp_count; i++) {
      char value[24];
      uint64_t n = s->mthp[i].folios[f];
      printf(" %7s", n == STATUS_UNKNOWN ? "-" : view_number(n, value, sizeof value));
    }
    putchar('\n');
  }
}

static void print_usage_and_counters(const struct status_snapshot *s) {
  char a[32], b[32], c[32], d[32], e[32], f[32];
  printf("\nIn use (/proc/meminfo)\n");
  printf("  AnonHugePages %s, ShmemHugePages %s (PMD-mapped %s), FileHugePages %s (PMD-mapped %s), Hugetlb %s\n",
         bytes_or_unknown(s->anon_huge, a, sizeof a), bytes_or_unknown(s->shmem_huge, b, sizeof b),
         bytes_or_unknown(s->shmem_pmd_mapped, c, sizeof c), bytes_or_unknown(s->file_huge, d, sizeof d),
         bytes_or_unknown(s->file_pmd_mapped, e, sizeof e), bytes_or_unknown(s->hugetlb_bytes, f, sizeof f));
  printf("\nCounters since boot (/proc/vmstat)\n");
  if (!s->counters_known) {
    printf("  (cannot be read)\n");
    return;
  }
  int column = 0;
  for (int i = 0; i < VMSTAT_COUNTER_COUNT; i++) {
    if (!s->counters.present[i]) continue;
    printf("%s%-27s %10llu", column == 0 ? "  " : "   ", vmstat_counter_names[i],
           (unsigned long long)s->counters.value[i]);
    if (++column == 2) { putchar('\n'); column = 0; }
  }
  if (column) putchar('\n');
}

static void print_fragmentation(const struct status_snapshot *s) {
  printf("\nFragmentation: free blocks per order (/proc/buddyinfo)\n");
  if (!s->zone_count) {
    printf("  (cannot be read)\n");
    return;
  }
  unsigned orders = 0;
  for (unsigned i = 0; i < s->zone_count; i++)
    if (s->zones[i].order_count > orders) orders = s->zones[i].order_count;
  printf("  node  zone    ");
  for (unsigned o = 0; o < orders; o++) printf(" %7u", o);
  putchar('\n');
  for (unsigned i = 0; i < s->zone_count; i++) {
    printf("  %4d  %-7s ", s->zones[i].node, s->zones[i].zone);
    for (unsigned o = 0; o < s->zones[i].order_count; o++)
      printf(" %7llu", (unsigned long long)s->zones[i].free_blocks[o]);
    putchar('\n');
  }
  int last = -1;
  for (unsigned i = 0; i < s->zone_count; i++) {
    int node = s->zones[i].node;
    if (node == last) continue;
    last = node;
    printf("  could be reserved now on node %d without compaction:", node);
    for (unsigned p = 0; p < s->pool_count; p++) {
      bool bound;
      uint64_t pages = status_could_reserve(s, node, s->pools[p].global.page_size, &bound);
      char label[32];
      format_page_size(s->pools[p].global.page_size, label, sizeof label);
      printf("%s %s%llu %s", p ? "," : "", bound ? "at most " : "", (unsigned long long)pages, label);
    }
    putchar('\n');
  }
}

/* What the kernel collapses by itself, beside hugify: DAMON's schemes (the DAMOS actions this kernel takes, the
 * kdamonds running one) and khugepaged's collapses per size. */
static void print_kernel_collapses(const struct status_snapshot *s) {
  printf("\nThe kernel's own collapses (DAMON schemes, khugepaged per size)\n");
  const struct status_feature *vaddr = &s->features[PROBE_DAMON_VADDR];
  if (vaddr->state != HUGIFY_FEATURE_YES) {
    printf("  DAMON vaddr: %s (Kernel features below)\n", feature_word(vaddr->state));
  } else {
    const enum probe_feature actions[] = {PROBE_DAMOS_COLLAPSE, PROBE_DAMOS_HUGEPAGE};
    printf("  DAMON vaddr: yes; DAMOS actions hugify can use:");
    int listed = 0;
    for (size_t a = 0; a < sizeof actions / sizeof actions[0]; a++)
      if (s->features[actions[a]].state == HUGIFY_FEATURE_YES)
        printf("%s %s", listed++ ? "," : "", probe_features[actions[a]].name + strlen("DAMOS action "));
    printf("%s\n", listed ? "" : " none of collapse, hugepage");
  }
  for (unsigned i = 0; i < s->damon_module_count; i++)
    printf("  DAMON in the kernel: %s (kdamond pid %d) holds it: no kdamond of DAMON's sysfs can start\n",
           s->damon_modules[i].name, s->damon_modules[i].kdamond_pid);
  printf("  kdamonds with a collapse or hugepage scheme:%s\n", s->damon_scheme_count ? "" : " none");
  for (unsigned i = 0; i < s->damon_scheme_count; i++) {
    const struct probe_damon_scheme *d = &s->damon_schemes[i];
    char pid[32] = "";
    if (d->kdamond_pid > 0) snprintf(pid, sizeof pid, ", pid %d", d->kdamond_pid);
    printf("    kdamond %u (%s%s), context %u (%s), scheme %u: %s, targets", d->kdamond, d->state[0] ? d->state : "?",
           pid, d->context, d->operations[0] ? d->operations : "?", d->scheme, d->action);
    for (unsigned t = 0; t < d->target_count && t < PROBE_DAMON_TARGETS_MAX; t++) printf("%s %d", t ? "," : "", d->targets[t]);
    printf("%s\n", d->target_count > PROBE_DAMON_TARGETS_MAX ? ", ..." : d->target_count ? "" : " none");
  }
  bool counted = false;
  for (unsigned i = 0; i < s->mthp_count; i++) counted |= s->mthp[i].collapse_known;
  print_folios(s);
  if (!counted) {
    printf("  khugepaged's collapses per size: not counted by this kernel (khugepaged mTHP collapse, Linux %s+)\n",
           probe_features[PROBE_KHUGEPAGED_MTHP].since);
    return;
  }
  print_size_header(s, "khugepaged per size", 29, 7);
  for (size_t f = 0; f < STATUS_MTHP_COLLAPSE_FIELDS; f++) {
    printf("    %-27s", status_mthp_collapse_fields[f]);
    for (unsigned i = 0; i < s->mthp_count; i++) { /* "-": the kernel keeps no such counter for that size */
      char value[24];
      uint64_t n = s->mthp[i].collapse[f];
      printf(" %7s", n == STATUS_UNKNOWN ? "-" : view_number(n, value, sizeof value));
    }
    putchar('\n');
  }
}

/* Each kernel feature hugify uses: yes or no, where the answer comes from, and for a no the first version. */
static void print_features(const struct status_snapshot *s) {
  printf("\nKernel features hugify uses (%s)\n", s->live ? "tried, or read from the kernel's files"
                                                          : "read from the tree's files; calls not tried");
  for (int i = 0; i < PROBE_FEATURE_COUNT; i++) {
    const struct probe_feature_info *f = &probe_features[i];
    const struct status_feature *x = &s->features[i];
    printf("  %-30s %-7s %s\n", f->name, feature_word(x->state), f->source);
    if (x->state == HUGIFY_FEATURE_NO && strstr(x->detail, "CONFIG_TRANSPARENT_HUGEPAGE"))
      printf("  %-30s         %s\n", "", x->detail);
    else if (x->state == HUGIFY_FEATURE_NO)
      printf("  %-30s         Linux %s+%s%s%s%s\n", "", f->since, f->config[0] ? " with " : "", f->config,
             x->detail[0] ? "; here: " : "", x->detail);
    else if (x->detail[0])
      printf("  %-30s         %s\n", "", x->detail);
  }
}

/* The THP bytes the kernel charges the top-level cgroups (memory.stat). */
static void print_cgroup_thp(const struct status_snapshot *s) {
  if (!s->cgroup_memory.version) {
    printf("THP per cgroup: no memory controller mounted\n");
    return;
  }
  printf("THP per cgroup (memory.stat, cgroup v%d at %s; inspect --all --by cgroup for every cgroup):\n",
         s->cgroup_memory.version, s->cgroup_memory.mount);
  for (unsigned i = 0; i < s->cgroup_thp_count; i++) {
    const struct cgroup_thp *t = &s->cgroup_thp[i].thp;
    char anon[32], shmem[32] = "-", file[32] = "-";
    format_bytes(t->anon, anon, sizeof anon);
    if (t->has_shmem) format_bytes(t->shmem, shmem, sizeof shmem);
    if (t->has_file) format_bytes(t->file, file, sizeof file);
    printf("  %-40s anon %s, shmem %s, file %s\n", s->cgroup_thp[i].path, anon, shmem, file);
  }
  if (!s->cgroup_thp_count) printf("  no cgroup below the root\n");
}

static void print_system(const struct status_snapshot *s) {
  printf("\nBoot parameters (/proc/cmdline)\n  %s\n",
         s->boot.params[0] ? s->boot.params : s->boot_known ? "none about huge pages" : "?");
  char soft[32], hard[32];
  if (s->memlock_known)
    printf("\nmemlock limit: %s (hard %s)\n", limit_text(s->memlock_soft, soft, sizeof soft),
           limit_text(s->memlock_hard, hard, sizeof hard));
  else
    printf("\nmemlock limit: ?\n");
  if (s->cgroup_version == 2) {
    printf("cgroup v2 %s:", s->cgroup_path);
    if (!s->cgroup_limit_count) printf(" no hugetlb limits (hugetlb controller not enabled here)\n");
    else putchar('\n');
    for (unsigned i = 0; i < s->cgroup_limit_count; i++) {
      const struct cgroup_hugetlb_limit *l = &s->cgroup_limits[i];
      char label[32], max[32], rsvd[32], cur[32];
      format_page_size(l->page_size, label, sizeof label);
      printf("  %s: max %s%s%s, rsvd.max %s, current %s\n", label, limit_text(l->max, max, sizeof max),
             l->limited_by[0] ? " set by " : "", l->limited_by, limit_text(l->rsvd_max, rsvd, sizeof rsvd),
             bytes_or_unknown(l->current, cur, sizeof cur));
    }
  } else {
    printf("cgroup: %s\n", s->cgroup_version == 1 ? "v1 only (hugetlb limits not read)" : "?");
  }
  print_cgroup_thp(s);
  printf("may change pools: %s\n", s->can_change_pools ? "yes" : "no");
  print_features(s);
  if (s->unreadable_count) {
    printf("\nCannot be read (run as root to see them):\n");
    for (unsigned i = 0; i < s->unreadable_count; i++)
      printf("  %s: %s\n", s->unreadable[i].path, strerror(s->unreadable[i].error));
  }
}

static void print_diagnoses(const struct status_diagnosis *d, unsigned count) {
  printf("\nDiagnoses\n");
  if (!count) printf("  none: nothing to fix\n");
  for (unsigned i = 0; i < count; i++) {
    printf("  %s: %s\n", d[i].severity == STATUS_WARNING ? "warning" : "note", d[i].message);
    if (d[i].fix[0]) printf("    fix: %s\n", d[i].fix);
  }
}

static void print_text(const struct status_snapshot *s, const struct status_diagnosis *d, unsigned count) {
  char base[32], def[32];
  format_bytes(s->base_page_size, base, sizeof base);
  printf("Huge pages on %s: kernel %s, base pages %s\n", s->live ? "this machine" : s->root,
         s->kernel_release[0] ? s->kernel_release : "?", base);
  if (!s->hugetlb_present) {
    printf("\nhugetlb pools: this kernel has no hugetlb support\n");
  } else {
    format_page_size(s->default_hugetlb_size, def, sizeof def);
    printf("\nhugetlb pools (pages; default size %s)\n", s->default_hugetlb_size ? def : "?");
    view_pool_table(stdout, s->pools, s->pool_count, "  ");
    printf("\nhugetlbfs mounts\n");
    view_mount_table(stdout, s, "  ");
  }
  print_thp(s);
  if (s->thp_present) print_kernel_collapses(s);
  print_usage_and_counters(s);
  print_fragmentation(s);
  print_system(s);
  print_diagnoses(d, count);
}

/* ---- JSON ------------------------------------------------------------------------------------------ */

static void json_feature(struct json_writer *j, const char *key, int state) { json_put_string(j, key, feature_word(state)); }

static void json_limit(struct json_writer *j, const char *key, uint64_t value) {
  if (value == UINT64_MAX) json_put_string(j, key, "max");
  else json_put_u64(j, key, value);
}

/* One function per top-level member of hugify.status/2 (docs/status.md). */

static void json_hugetlb(struct json_writer *j, const struct status_snapshot *s) {
  json_open_object(j, "hugetlb");
  json_put_bool(j, "present", s->hugetlb_present);
  json_put_u64(j, "default_page_size_bytes", s->default_hugetlb_size);
  view_pool_json(j, "pools", s->pools, s->pool_count);
  view_mount_json(j, "mounts", s);
  json_close(j);
}

static void json_thp(struct json_writer *j, const struct status_snapshot *s) {
  json_open_object(j, "thp");
  json_put_bool(j, "present", s->thp_present);
  json_put_string(j, "enabled", s->thp_enabled);
  json_put_string(j, "defrag", s->thp_defrag);
  json_put_string(j, "shmem_enabled", s->thp_shmem_enabled);
  view_json_known(j, "use_zero_page", s->thp_use_zero_page);
  view_json_known(j, "pmd_size_bytes", s->thp_pmd_size);
  json_put_bool(j, "pmd_collapse_wise", s->thp_pmd_size != STATUS_UNKNOWN && page_sizes_collapse_wise(s->thp_pmd_size));
  json_open_array(j, "sizes");
  for (unsigned i = 0; i < s->mthp_count; i++) {
    json_open_object(j, NULL);
    json_put_u64(j, "page_size_bytes", s->mthp[i].page_size);
    json_put_string(j, "enabled", s->mthp[i].enabled[0] ? s->mthp[i].enabled : NULL);
    json_put_string(j, "shmem_enabled", s->mthp[i].shmem_enabled[0] ? s->mthp[i].shmem_enabled : NULL);
    if (s->mthp[i].collapse_known) {
      json_open_object(j, "collapse");
      for (size_t f = 0; f < STATUS_MTHP_COLLAPSE_FIELDS; f++)
        view_json_known(j, status_mthp_collapse_fields[f], s->mthp[i].collapse[f]);
      json_close(j);
    } else {
      json_put_null(j, "collapse");
    }
    if (s->mthp[i].folios_known) {
      json_open_object(j, "folios");
      for (size_t f = 0; f < STATUS_MTHP_FOLIO_FIELDS; f++)
        view_json_known(j, status_mthp_folio_fields[f], s->mthp[i].folios[f]);
      view_json_known(j, "anon_bytes", s->mthp[i].folios[0] == STATUS_UNKNOWN ? STATUS_UNKNOWN
                                                                               : s->mthp[i].folios[0] * s->mthp[i].page_size);
      json_close(j);
    } else {
      json_put_null(j, "folios");
    }
    json_close(j);
  }
  json_close(j);
  json_open_object(j, "khugepaged");
  for (size_t f = 0; f < STATUS_KHUGEPAGED_FIELDS; f++)
    view_json_known(j, status_khugepaged_fields[f].name,
                    status_khugepaged_value(&s->khugepaged, &status_khugepaged_fields[f]));
  json_close(j);
  json_close(j);
}

/* A kdamond's pid, null when it has none (off). */
static void json_kdamond_pid(struct json_writer *j, int pid) {
  if (pid > 0) json_put_i64(j, "kdamond_pid", pid);
  else json_put_null(j, "kdamond_pid");
}

static void json_damon(struct json_writer *j, const struct status_snapshot *s) {
  json_open_object(j, "damon");
  json_put_bool(j, "present", s->damon_present);
  json_feature(j, "vaddr", s->features[PROBE_DAMON_VADDR].state);
  json_open_array(j, "actions");
  if (s->features[PROBE_DAMON_VADDR].state == HUGIFY_FEATURE_YES) {
    if (s->features[PROBE_DAMOS_COLLAPSE].state == HUGIFY_FEATURE_YES) json_put_string(j, NULL, "collapse");
    if (s->features[PROBE_DAMOS_HUGEPAGE].state == HUGIFY_FEATURE_YES) json_put_string(j, NULL, "hugepage");
  }
  json_close(j);
  json_open_array(j, "in_kernel");
  for (unsigned i = 0; i < s->damon_module_count; i++) {
    json_open_object(j, NULL);
    json_put_string(j, "module", s->damon_modules[i].name);
    json_kdamond_pid(j, s->damon_modules[i].kdamond_pid);
    json_close(j);
  }
  json_close(j);
  json_open_array(j, "schemes");
  for (unsigned i = 0; i < s->damon_scheme_count; i++) {
    const struct probe_damon_scheme *d = &s->damon_schemes[i];
    json_open_object(j, NULL);
    json_put_u64(j, "kdamond", d->kdamond);
    json_put_string(j, "state", d->state);
    json_kdamond_pid(j, d->kdamond_pid);
    json_put_u64(j, "context", d->context);
    json_put_string(j, "operations", d->operations);
    json_put_u64(j, "scheme", d->scheme);
    json_put_string(j, "action", d->action);
    json_put_u64(j, "target_count", d->target_count);
    json_open_array(j, "targets");
    for (unsigned t = 0; t < d->target_count && t < PROBE_DAMON_TARGETS_MAX; t++) json_put_i64(j, NULL, d->targets[t]);
    json_close(j);
    json_close(j);
  }
  json_close(j);
  json_close(j);
}

static void json_in_use(struct json_writer *j, const struct status_snapshot *s) {
  json_open_object(j, "usage");
  view_json_known(j, "anon_huge_bytes", s->anon_huge);
  view_json_known(j, "shmem_huge_bytes", s->shmem_huge);
  view_json_known(j, "shmem_pmd_mapped_bytes", s->shmem_pmd_mapped);
  view_json_known(j, "file_huge_bytes", s->file_huge);
  view_json_known(j, "file_pmd_mapped_bytes", s->file_pmd_mapped);
  view_json_known(j, "hugetlb_bytes", s->hugetlb_bytes);
  view_json_known(j, "mem_total_bytes", s->mem_total);
  view_json_known(j, "mem_free_bytes", s->mem_free);
  json_close(j);
  json_open_object(j, "counters");
  for (int i = 0; i < VMSTAT_COUNTER_COUNT && s->counters_known; i++)
    if (s->counters.present[i]) json_put_u64(j, vmstat_counter_names[i], s->counters.value[i]);
  json_close(j);
}

static void json_fragmentation(struct json_writer *j, const struct status_snapshot *s) {
  json_open_object(j, "fragmentation");
  json_open_array(j, "zones");
  for (unsigned i = 0; i < s->zone_count; i++) {
    json_open_object(j, NULL);
    json_put_i64(j, "node", s->zones[i].node);
    json_put_string(j, "zone", s->zones[i].zone);
    json_open_array(j, "free_blocks");
    for (unsigned o = 0; o < s->zones[i].order_count; o++) json_put_u64(j, NULL, s->zones[i].free_blocks[o]);
    json_close(j);
    json_close(j);
  }
  json_close(j);
  json_open_array(j, "could_reserve");
  int last = -1;
  for (unsigned i = 0; i < s->zone_count; i++) {
    if (s->zones[i].node == last) continue;
    last = s->zones[i].node;
    for (unsigned p = 0; p < s->pool_count; p++) {
      bool bound;
      uint64_t pages = status_could_reserve(s, last, s->pools[p].global.page_size, &bound);
      json_open_object(j, NULL);
      json_put_i64(j, "node", last);
      json_put_u64(j, "page_size_bytes", s->pools[p].global.page_size);
      json_put_u64(j, "pages", pages);
      json_put_bool(j, "upper_bound", bound);
      json_close(j);
    }
  }
  json_close(j);
  json_close(j);
}

static void json_boot(struct json_writer *j, const struct status_snapshot *s) {
  json_open_object(j, "boot");
  json_put_string(j, "parameters", s->boot_known ? s->boot.params : NULL);
  if (s->boot.default_size) json_put_u64(j, "default_hugepagesz_bytes", s->boot.default_size);
  else json_put_null(j, "default_hugepagesz_bytes");
  json_put_string(j, "transparent_hugepage", s->boot.transparent_hugepage[0] ? s->boot.transparent_hugepage : NULL);
  json_open_array(j, "pools");
  for (unsigned i = 0; i < s->boot.pool_count; i++) {
    const struct cmdline_pool *p = &s->boot.pools[i];
    json_open_object(j, NULL);
    json_put_u64(j, "page_size_bytes", p->page_size);
    json_put_u64(j, "pages", p->pages);
    if (p->per_node) {
      json_open_array(j, "nodes");
      for (unsigned n = 0; n < CMDLINE_MAX_NODES; n++) {
        if (!p->node_pages[n]) continue;
        json_open_object(j, NULL);
        json_put_i64(j, "node", n);
        json_put_u64(j, "pages", p->node_pages[n]);
        json_close(j);
      }
      json_close(j);
    } else {
      json_put_null(j, "nodes");
    }
    json_close(j);
  }
  json_close(j);
  json_close(j);
}

static void json_limits(struct json_writer *j, const struct status_snapshot *s) {
  json_open_object(j, "limits");
  if (s->memlock_known) {
    json_limit(j, "memlock_soft_bytes", s->memlock_soft);
    json_limit(j, "memlock_hard_bytes", s->memlock_hard);
  } else {
    json_put_null(j, "memlock_soft_bytes");
    json_put_null(j, "memlock_hard_bytes");
  }
  json_close(j);
  json_open_object(j, "cgroup");
  if (s->cgroup_version) json_put_i64(j, "version", s->cgroup_version);
  else json_put_null(j, "version");
  json_put_string(j, "path", s->cgroup_path[0] ? s->cgroup_path : NULL);
  if (s->cgroup_memory.version) json_put_i64(j, "memory_version", s->cgroup_memory.version);
  else json_put_null(j, "memory_version");
  json_open_array(j, "thp");
  for (unsigned i = 0; i < s->cgroup_thp_count; i++) {
    json_open_object(j, NULL);
    json_put_string(j, "path", s->cgroup_thp[i].path);
    json_put_cgroup_thp(j, "memory_stat", &s->cgroup_thp[i].thp);
    json_close(j);
  }
  json_close(j);
  json_open_array(j, "hugetlb");
  for (unsigned i = 0; i < s->cgroup_limit_count; i++) {
    const struct cgroup_hugetlb_limit *l = &s->cgroup_limits[i];
    json_open_object(j, NULL);
    json_put_u64(j, "page_size_bytes", l->page_size);
    json_limit(j, "max_bytes", l->max);
    json_limit(j, "rsvd_max_bytes", l->rsvd_max);
    view_json_known(j, "current_bytes", l->current);
    view_json_known(j, "rsvd_current_bytes", l->rsvd_current);
    json_put_string(j, "limited_by", l->limited_by[0] ? l->limited_by : NULL);
    json_close(j);
  }
  json_close(j);
  json_close(j);
}

static void json_nodes(struct json_writer *j, const struct status_snapshot *s) {
  json_open_array(j, "nodes");
  for (unsigned i = 0; i < s->node_count; i++) {
    const struct status_node *n = &s->nodes[i];
    json_open_object(j, NULL);
    json_put_i64(j, "node", n->node);
    json_put_string(j, "cpus", n->cpulist);
    json_put_bool(j, "has_cpu", n->has_cpu);
    json_put_bool(j, "caller_may_run", n->caller_cpus);
    json_put_bool(j, "caller_may_allocate", n->caller_mems);
    view_json_known(j, "mem_total_bytes", n->mem_total);
    json_close(j);
  }
  json_close(j);
}

static void json_features(struct json_writer *j, const struct status_snapshot *s) {
  char reason[HUGIFY_REASON_MAX] = "";
  json_open_object(j, "features");
  for (int i = 0; i < PROBE_FEATURE_COUNT; i++) {
    json_feature(j, probe_features[i].id, s->features[i].state);
    if (s->features[i].detail[0]) reason_add(reason, sizeof reason, "%s: %s", probe_features[i].name, s->features[i].detail);
  }
  json_put_bool(j, "can_change_pools", s->can_change_pools);
  json_put_string(j, "reason", reason);
  json_close(j);
  json_open_array(j, "kernel_features");
  for (int i = 0; i < PROBE_FEATURE_COUNT; i++) {
    const struct probe_feature_info *f = &probe_features[i];
    json_open_object(j, NULL);
    json_put_string(j, "id", f->id);
    json_put_string(j, "name", f->name);
    json_feature(j, "state", s->features[i].state);
    json_put_string(j, "source", f->source);
    json_put_string(j, "since", f->since);
    json_put_string(j, "config", f->config);
    json_put_string(j, "detail", s->features[i].detail);
    json_put_string(j, "without", f->without);
    json_close(j);
  }
  json_close(j);
  json_open_array(j, "unreadable");
  for (unsigned i = 0; i < s->unreadable_count; i++) {
    json_open_object(j, NULL);
    json_put_string(j, "path", s->unreadable[i].path);
    json_put_string(j, "error", strerror(s->unreadable[i].error));
    json_close(j);
  }
  json_close(j);
}

static void json_diagnoses(struct json_writer *j, const struct status_diagnosis *d, unsigned count) {
  json_open_array(j, "diagnoses");
  for (unsigned i = 0; i < count; i++) {
    json_open_object(j, NULL);
    json_put_string(j, "id", d[i].id);
    json_put_string(j, "severity", d[i].severity == STATUS_WARNING ? "warning" : "note");
    json_put_string(j, "message", d[i].message);
    json_put_string(j, "fix", d[i].fix[0] ? d[i].fix : NULL);
    json_close(j);
  }
  json_close(j);
}

static void print_json(FILE *out, const struct status_snapshot *s, const struct status_diagnosis *d,
                       unsigned count) {
  struct json_writer j;
  json_begin(&j, out, "hugify.status/2");
  json_put_string(&j, "root", s->root);
  json_put_string(&j, "kernel", s->kernel_release);
  json_put_string(&j, "hypervisor", s->hypervisor[0] ? s->hypervisor : NULL);
  json_put_u64(&j, "base_page_size_bytes", s->base_page_size);
  json_hugetlb(&j, s);
  json_thp(&j, s);
  json_damon(&j, s);
  json_in_use(&j, s);
  json_fragmentation(&j, s);
  json_boot(&j, s);
  json_limits(&j, s);
  json_nodes(&j, s);
  json_features(&j, s);
  json_diagnoses(&j, d, count);
  json_end(&j);
}

/* ---- --watch ---------------------------------------------------------------------------------------- */

static volatile sig_atomic_t interrupted;
static void on_interrupt(int signal_number) { (void)signal_number; interrupted = 1; }

static int64_t delta(uint64_t now, uint64_t before) { return (int64_t)(now - before); }

static void print_watch_text(const struct status_snapshot *before, const struct status_snapshot *now, unsigned interval,
                             double seconds) {
  printf("[%u, +%.1f s]", interval, seconds);
  bool any = false;
  for (int i = 0; i < VMSTAT_COUNTER_COUNT; i++) {
    if (!now->counters.present[i]) continue;
    int64_t d = delta(now->counters.value[i], before->counters.value[i]);
    if (d == 0) continue;
    printf(" %s %+lld", vmstat_counter_names[i], (long long)d);
    any = true;
  }
  if (!any) printf(" no counter changed");
  for (unsigned p = 0; p < now->pool_count; p++) {
    const struct hugify_hugetlb_size *g = &now->pools[p].global;
    const struct hugify_hugetlb_size *was = p < before->pool_count ? &before->pools[p].global : g;
    char label[32];
    format_page_size(g->page_size, label, sizeof label);
    printf("; %s pool %llu (%+lld) free %llu (%+lld)", label, (unsigned long long)g->total,
           (long long)delta(g->total, was->total), (unsigned long long)g->free, (long long)delta(g->free, was->free));
  }
  bool anon_known = now->anon_huge != STATUS_UNKNOWN && before->anon_huge != STATUS_UNKNOWN;
  printf("; AnonHugePages %+lld kB\n", anon_known ? (long long)delta(now->anon_huge, before->anon_huge) / 1024 : 0LL);
  fflush(stdout);
}

static void print_watch_json(FILE *out, const struct status_snapshot *before, const struct status_snapshot *now,
                             unsigned interval, double seconds) {
  struct json_writer j;
  json_begin(&j, out, "hugify.status.watch/2");
  json_put_u64(&j, "interval", interval);
  json_put_double(&j, "elapsed_seconds", seconds);
  json_open_object(&j, "counters");
  for (int i = 0; i < VMSTAT_COUNTER_COUNT; i++)
    if (now->counters.present[i])
      json_put_i64(&j, vmstat_counter_names[i], delta(now->counters.value[i], before->counters.value[i]));
  json_close(&j);
  json_open_array(&j, "pools");
  for (unsigned p = 0; p < now->pool_count; p++) {
    const struct hugify_hugetlb_size *g = &now->pools[p].global;
    const struct hugify_hugetlb_size *was = p < before->pool_count ? &before->pools[p].global : g;
    json_open_object(&j, NULL);
    json_put_u64(&j, "page_size_bytes", g->page_size);
    json_put_u64(&j, "total", g->total);
    json_put_u64(&j, "free", g->free);
    json_put_i64(&j, "total_delta", delta(g->total, was->total));
    json_put_i64(&j, "free_delta", delta(g->free, was->free));
    json_close(&j);
  }
  json_close(&j);
  json_open_object(&j, "usage_delta");
  json_put_i64(&j, "anon_huge_bytes", delta(now->anon_huge, before->anon_huge));
  json_put_i64(&j, "hugetlb_bytes", delta(now->hugetlb_bytes, before->hugetlb_bytes));
  json_close(&j);
  json_end(&j);
}


/* The changes every `interval` seconds: text on stdout when `text`, JSON documents to `json` when not NULL. */
static int watch(struct status_snapshot *first, double interval, unsigned long count, bool text, FILE *json) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_interrupt;
  sigaction(SIGINT, &action, NULL);
  sigaction(SIGTERM, &action, NULL);
  struct status_snapshot *now = malloc(sizeof *now);
  if (!now) return fail(EXIT_SHORT, "status", "out of memory");
  if (text) printf("\nChanges every %g s (Ctrl-C stops):\n", interval);
  fflush(stdout);
  double start = measure_now();
  for (unsigned long i = 1; !interrupted && (count == 0 || i <= count); i++) {
    double wake = start + interval * (double)i;
    while (!interrupted) {
      double left = wake - measure_now();
      if (left <= 0) break;
      struct timespec t = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
      nanosleep(&t, NULL); /* EINTR on Ctrl-C */
    }
    if (interrupted) break;
    memcpy(now, first, sizeof *now);
    status_refresh(now);
    double elapsed = measure_now() - start;
    if (json) print_watch_json(json, first, now, (unsigned)i, elapsed);
    if (text) print_watch_text(first, now, (unsigned)i, elapsed);
    memcpy(first, now, sizeof *now);
  }
  free(now);
  return EXIT_DONE;
}

/* ---- the command ------------------------------------------------------------------------------------ */

int cmd_status(int argc, char **argv) {
  struct status_args args = {.root = "/"};
  struct option_result parsed;
  if (parse_command_options("status", status_options, OPTIONS_ANYWHERE, argc, argv, &args, &parsed) != EXIT_DONE)
    return EXIT_USAGE;
  if (parsed.operand_count) return usage_error("status", "unexpected argument '%s'", argv[parsed.operands[0]]);
  struct json_output json = args.json;
  const char *root = args.root;
  double interval = args.watch;
  unsigned long count = (unsigned long)args.count;
  if (count && interval == 0) return usage_error("status", "--count needs --watch");
  int root_rc = status_check_root(root);
  if (root_rc)
    return usage_error("status", "--root %s: %s (it names a directory holding a captured proc/ and sys/ tree)", root,
                       strerror(-root_rc));
  FILE *out = json_output_open(&json, "status");
  if (json.wanted && !out) return EXIT_USAGE;
  bool text = json_output_text(&json);
  struct status_snapshot *s = malloc(sizeof *s);
  if (!s) {
    json_output_close(out, &json, "status");
    return fail(EXIT_SHORT, "status", "out of memory");
  }
  status_read(root, s);
  struct status_diagnosis diagnoses[STATUS_MAX_DIAGNOSES];
  unsigned n = status_diagnose(s, diagnoses, STATUS_MAX_DIAGNOSES);
  if (text) print_text(s, diagnoses, n);
  if (out) print_json(out, s, diagnoses, n);
  int rc = interval > 0 ? watch(s, interval, count, text, out) : EXIT_DONE;
  free(s);
  if (!json_output_close(out, &json, "status") && rc == EXIT_DONE) rc = EXIT_SHORT;
  return rc;
}
