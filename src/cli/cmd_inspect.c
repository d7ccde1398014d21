/* SPDX-License-Identifier: MIT */
/* cmd_inspect.c - hugify inspect: how much of a process is on huge pages, by class and page kind, and why the
 * rest is not (hugify_inspect); --all ranks every process by anonymous memory not on huge pages. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fleet.h"
#include "hugify.h"
#include "inspect.h"
#include "os.h"
#include "units.h"

struct inspect_args {
  bool maps, all;
  uint64_t top;
  int by; /* enum cgroup_key, -1: by process */
  struct json_output json;
};

static const char *const by_names[] = {"cgroup", "unit", "container", NULL}; /* enum cgroup_key */

static const struct option_spec inspect_options[] = {
    OPT_GROUP("Options"),
    OPT_FLAG("maps", 0, struct inspect_args, maps, "also one row per mapping"),
    OPT_FLAG("all", 0, struct inspect_args, all,
             "every process, ranked by anonymous memory NOT on huge pages (who would gain most)"),
    OPT_COUNT("top", struct inspect_args, top, "N", 0, 1000000, "with --all: the first N processes (default 20; 0 = all)"),
    OPT_ENUM("by", struct inspect_args, by, "cgroup|unit|container", by_names,
             "with --all: one row per cgroup, systemd unit or container instead of per process, the kernel's\n"
             "THP bytes of each (memory.stat) beside the sum of its processes' walks, and why they differ"),
    OPT_JSON(struct inspect_args, json,
             "JSON on stdout instead of the text (schema hugify.inspect/1: docs/inspect.md);\n"
             "--json=FILE: the text on stdout and the JSON to FILE"),
    OPT_END,
};

const struct command_help help_inspect = {
    "usage: hugify inspect PID... [--maps] [--json[=FILE]]\n"
    "       hugify inspect --all [--top N] [--by cgroup|unit|container] [--json[=FILE]]\n"
    "\n"
    "How much of a process is on huge pages, measured from /proc/PID/smaps: resident memory and the part on\n"
    "huge pages by class (code per object, heap, other anonymous memory, thread stacks, shared memory, file\n"
    "mappings) and by page kind (THP, hugetlb 2M, hugetlb 1G), and why the rest is not on huge pages\n"
    "(MADV_NOHUGEPAGE, THP disabled for the process or disabled except where advised, too small or unaligned,\n"
    "system THP mode, file-backed), and the process's own THP stance as far as the kernel shows it.\n"
    "\n",
    inspect_options,
    "\n"
    "Examples:\n"
    "  hugify inspect $(pidof postgres)      coverage of each postgres process\n"
    "  hugify inspect 1234 --maps            ... with one row per mapping\n"
    "  hugify inspect --all --top 10         the ten processes with most anonymous memory on 4 KiB pages\n"
    "  hugify inspect --all --by unit        the same per systemd service, with the kernel's figures\n"
    "  hugify inspect 1234 --json | jq .processes[0].classes.heap\n"
    "\n"
    "Exit status: 0 done; 1 a process does not exist (any more); 2 bad usage; 3 not permitted to read a\n"
    "process (needs its user or root; the message names it).\n",
};

static void bytes(uint64_t value, char *out, size_t cap) { format_bytes(value, out, cap); }

/* ---- text ------------------------------------------------------------------------------------------ */

static void usage_row(struct table *t, const char *name, const struct hugify_usage *u) {
  char resident[32], base[32], thp[32], h2[32], h1[32], huge[32];
  bytes(u->resident, resident, sizeof resident);
  bytes(u->base, base, sizeof base);
  bytes(u->thp, thp, sizeof thp);
  bytes(u->hugetlb_2m, h2, sizeof h2);
  bytes(u->hugetlb_1g, h1, sizeof h1);
  format_percent(hugify_usage_huge(u), u->resident, huge, sizeof huge);
  table_row(t, name, resident, base, thp, h2, h1, huge);
}

/* The process's own THP decision, and what the kernel does not let us see. */
static const char *thp_stance_text(const struct hugify_inspect_report *r) {
  switch (r->thp_stance) {
  case HUGIFY_THP_STANCE_DISABLED:
    return "DISABLED for this process (prctl PR_SET_THP_DISABLE; systemd's MemoryTHP= sets it for a service)";
  case HUGIFY_THP_STANCE_DISABLED_EXCEPT_ADVISED:
    return "DISABLED for this process except where it advised (prctl PR_SET_THP_DISABLE, "
           "PR_THP_DISABLE_EXCEPT_ADVISED)";
  case HUGIFY_THP_STANCE_ENABLED: return "enabled for this process";
  case HUGIFY_THP_STANCE_UNKNOWN: break;
  }
  if (!r->thp_mode[0]) return "none: THP is not built into this kernel (CONFIG_TRANSPARENT_HUGEPAGE), only hugetlb";
  if (r->thp_disabled != 0) return "process setting unknown";
  if (!r->thp_stance_visible)
    return "enabled for this process, or disabled except where it advised: the kernel shows no difference while "
           "no THP size is 'always' (hugify then treats its unadvised memory as allowed)";
  return "enabled for this process, or disabled except where it advised: no unadvised anonymous mapping to tell by";
}

/* ---- memory by folio size (pagemap + kpageflags: root) ------------------------------------------- */

struct folios {
  int rc; /* inspect_folio_sizes's */
  struct folio_bytes bytes;
  char reason[256];
};

/* mthp: some mTHP size is enabled, so some of the 4K column may be mTHP, which only the folio walk tells. */
static void print_folios(const struct folios *f, bool mthp) {
  if (f->rc) {
    printf("  by folio size: not known (%s)\n", f->reason);
    if (mthp) printf("  (smaps does not report mTHP per process: PTE-mapped mTHP is counted as 4K)\n");
    return;
  }
  printf("  by folio size (pagemap + kpageflags):");
  const char *sep = " ";
  for (unsigned order = 0; order < FOLIO_ORDERS; order++) {
    if (!f->bytes.by_order[order]) continue;
    char size[32], amount[32];
    format_page_size(os_base_page() << order, size, sizeof size);
    bytes(f->bytes.by_order[order], amount, sizeof amount);
    printf("%s%s %s", sep, size, amount);
    sep = ", ";
  }
  char amount[32];
  if (f->bytes.hugetlb) printf("%shugetlb %s", sep, (bytes(f->bytes.hugetlb, amount, sizeof amount), amount));
  if (f->bytes.partial) printf("%sin folios mapped in part %s", sep, (bytes(f->bytes.partial, amount, sizeof amount), amount));
  printf("%s\n", *sep == ' ' ? "none resident" : "");
}

static void put_folios_json(struct json_writer *j, const struct folios *f) {
  json_open_object(j, "folios");
  json_put_bool(j, "known", f->rc == 0);
  json_put_string(j, "reason", f->rc ? f->reason : NULL);
  json_open_array(j, "by_size");
  for (unsigned order = 0; f->rc == 0 && order < FOLIO_ORDERS; order++) {
    if (!f->bytes.by_order[order]) continue;
    json_open_object(j, NULL);
    json_put_u64(j, "page_size_bytes", os_base_page() << order);
    json_put_u64(j, "bytes", f->bytes.by_order[order]);
    json_close(j);
  }
  json_close(j);
  if (f->rc) {
    json_put_null(j, "hugetlb_bytes");
    json_put_null(j, "partial_bytes");
  } else {
    json_put_u64(j, "hugetlb_bytes", f->bytes.hugetlb);
    json_put_u64(j, "partial_bytes", f->bytes.partial);
  }
  json_close(j);
}

static void print_text(const struct hugify_inspect_report *r, bool maps, const struct folios *folios) {
  char a[32], b[32], c[32];
  uint64_t huge = hugify_usage_huge(&r->total);
  bytes(r->total.resident, a, sizeof a);
  bytes(huge, b, sizeof b);
  format_percent(huge, r->total.resident, c, sizeof c);
  printf("process %d (%s): resident %s, on huge pages %s (%s)\n", (int)r->pid, r->command, a, b, c);
  printf("  THP: system mode %s; %s; mTHP enabled: %s\n", r->thp_mode[0] ? r->thp_mode : "absent",
         thp_stance_text(r), r->mthp_sizes[0] ? r->mthp_sizes : "none");
  print_folios(folios, r->mthp_sizes[0] != '\0');
  enum allocator_kind allocator = allocator_of_name(r->allocator);
  if (allocator_is_runtime(allocator)) /* the data bypasses malloc: say what holds it */
    printf("  allocator: %s: data in %s, not malloc's\n", r->allocator, allocator_description(allocator));
  else
    printf("  allocator: %s\n", r->allocator[0] ? r->allocator : allocator_description(ALLOCATOR_UNKNOWN));
  const char *advice = inspect_churn_advice(r);
  if (advice)
    printf("  its heap is partly split (freed memory given back inside huge pages); what keeps them through churn:\n"
           "    %s\n", advice);
  putchar('\n');

  static const char *const headers[] = {"class", "resident", "4K", "THP", "2M", "1G", "huge"};
  static const bool right[] = {false, true, true, true, true, true, true};
  struct table t;
  table_init(&t, 7, headers, right);
  for (int k = 0; k < HUGIFY_CLASS_COUNT; k++) usage_row(&t, hugify_memory_class_name(k), &r->classes[k]);
  usage_row(&t, "total", &r->total);
  table_print(&t, stdout, "  ");
  table_free(&t);

  static const char *const object_headers[] = {"code of", "resident", "4K", "THP", "2M", "1G", "huge"};
  table_init(&t, 7, object_headers, right);
  for (size_t i = 0; i < r->object_count; i++)
    if (r->objects[i].code.resident) usage_row(&t, r->objects[i].path, &r->objects[i].code);
  if (t.rows) {
    putchar('\n');
    table_print(&t, stdout, "  ");
  }
  table_free(&t);

  bool any = false;
  for (int w = 1; w < HUGIFY_WHY_COUNT; w++) {
    if (!r->not_huge[w]) continue;
    if (!any) printf("\n  not on huge pages, and why:\n");
    any = true;
    bytes(r->not_huge[w], a, sizeof a);
    printf("  %10s  %-18s %s\n", a, hugify_not_huge_reason_name(w), hugify_not_huge_reason_text(w));
  }
  if (r->collapsible) {
    bytes(r->collapsible, a, sizeof a);
    printf("\n  'hugify collapse %d' could put up to %s more on huge pages now.\n", (int)r->pid, a);
  }
  printf("  thread stacks: %u found by a thread's stack pointer, %u by the guard-page pattern\n",
         r->stacks_by_pointer, r->stacks_by_guard);
  if (r->reason[0]) printf("  note: %s\n", r->reason);

  if (maps) {
    static const char *const map_headers[] = {"mapping", "perms", "class", "resident", "4K", "THP", "hugetlb",
                                              "why not huge", "path"};
    static const bool map_right[] = {false, false, false, true, true, true, true, false, false};
    table_init(&t, 9, map_headers, map_right);
    for (size_t i = 0; i < r->mapping_count; i++) {
      const struct hugify_inspect_mapping *m = &r->mappings[i];
      char range[48], resident[32], base[32], thp[32], hugetlb[32], klass[16];
      snprintf(range, sizeof range, "%llx-%llx", (unsigned long long)m->start, (unsigned long long)m->end);
      bytes(m->usage.resident, resident, sizeof resident);
      bytes(m->usage.base, base, sizeof base);
      bytes(m->usage.thp, thp, sizeof thp);
      bytes(m->usage.hugetlb_2m + m->usage.hugetlb_1g, hugetlb, sizeof hugetlb);
      snprintf(klass, sizeof klass, "%s%s", hugify_memory_class_name(m->memory_class), m->thread_stack ? "*" : "");
      table_row(&t, range, m->perms, klass, resident, base, thp, hugetlb,
                m->why == HUGIFY_WHY_NONE ? "" : hugify_not_huge_reason_name(m->why), m->path);
    }
    putchar('\n');
    table_print(&t, stdout, "  ");
    printf("  (stack* = thread stack)\n");
    table_free(&t);
  }
}

/* ---- JSON ------------------------------------------------------------------------------------------ */

static void print_json_process(struct json_writer *j, const struct hugify_inspect_report *r, bool maps,
                               const struct folios *folios) {
  json_open_object(j, NULL);
  json_put_i64(j, "pid", r->pid);
  json_put_string(j, "command", r->command);
  if (r->thp_disabled < 0) json_put_null(j, "thp_disabled");
  else json_put_bool(j, "thp_disabled", r->thp_disabled == 1);
  json_put_string(j, "thp_stance", hugify_thp_stance_name(r->thp_stance));
  json_put_bool(j, "thp_stance_visible", r->thp_stance_visible);
  json_put_string(j, "thp_mode", r->thp_mode);
  json_put_string(j, "shmem_mode", r->shmem_mode);
  json_put_string(j, "allocator", r->allocator[0] ? r->allocator : NULL);
  json_put_string(j, "allocator_data", r->allocator[0] ? allocator_description(allocator_of_name(r->allocator)) : NULL);
  json_put_bool(j, "allocator_is_runtime", allocator_is_runtime(allocator_of_name(r->allocator)));
  json_put_string(j, "allocator_advice", inspect_churn_advice(r));
  json_open_array(j, "mthp_sizes");
  char sizes[sizeof r->mthp_sizes];
  snprintf(sizes, sizeof sizes, "%s", r->mthp_sizes);
  for (char *save = NULL, *size = strtok_r(sizes, ",", &save); size; size = strtok_r(NULL, ",", &save))
    json_put_string(j, NULL, size);
  json_close(j);
  json_put_usage(j, "total", &r->total);
  json_open_object(j, "classes");
  for (int k = 0; k < HUGIFY_CLASS_COUNT; k++) json_put_usage(j, hugify_memory_class_name(k), &r->classes[k]);
  json_close(j);
  json_open_array(j, "objects");
  for (size_t i = 0; i < r->object_count; i++) {
    json_open_object(j, NULL);
    json_put_string(j, "path", r->objects[i].path);
    json_put_usage(j, "code", &r->objects[i].code);
    json_close(j);
  }
  json_close(j);
  json_put_not_huge(j, "not_huge_bytes", r->not_huge);
  json_put_u64(j, "collapsible_bytes", r->collapsible);
  json_open_object(j, "thread_stacks");
  json_put_u64(j, "by_stack_pointer", r->stacks_by_pointer);
  json_put_u64(j, "by_guard_page", r->stacks_by_guard);
  json_close(j);
  if (maps) {
    json_open_array(j, "mappings");
    for (size_t i = 0; i < r->mapping_count; i++) {
      const struct hugify_inspect_mapping *m = &r->mappings[i];
      json_open_object(j, NULL);
      json_put_hex(j, "start", m->start);
      json_put_hex(j, "end", m->end);
      json_put_string(j, "perms", m->perms);
      json_put_string(j, "path", m->path);
      json_put_string(j, "class", hugify_memory_class_name(m->memory_class));
      json_put_bool(j, "thread_stack", m->thread_stack);
      json_put_usage(j, "usage", &m->usage);
      json_put_string(j, "why_not_huge", hugify_not_huge_reason_name(m->why));
      if (m->thp_eligible < 0) json_put_null(j, "thp_eligible");
      else json_put_bool(j, "thp_eligible", m->thp_eligible == 1);
      json_put_u64(j, "aligned_bytes", m->aligned_bytes);
      json_close(j);
    }
    json_close(j);
  }
  put_folios_json(j, folios);
  json_put_string(j, "note", r->reason);
  json_close(j);
}

/* ---- --all --------------------------------------------------------------------------------------- */

static int inspect_all(long top, FILE *json, bool text) {
  struct inspect_ranking ranking;
  int rc = inspect_rank_processes(&ranking);
  if (rc) return fail(EXIT_SHORT, "inspect", "cannot rank the processes: %s", strerror(-rc));
  const struct inspect_process *list = ranking.processes;
  size_t count = ranking.count;
  unsigned unreadable = ranking.unreadable;
  size_t shown = top > 0 && (size_t)top < count ? (size_t)top : count;
  if (json) {
    struct json_writer j;
    json_begin(&j, json, "hugify.inspect/1");
    json_open_array(&j, "ranking");
    for (size_t i = 0; i < shown; i++) {
      json_open_object(&j, NULL);
      json_put_i64(&j, "pid", list[i].pid);
      json_put_string(&j, "command", list[i].command);
      const struct smaps_rollup *m = &list[i].memory;
      json_put_u64(&j, "rss_bytes", m->rss);
      json_put_u64(&j, "anonymous_bytes", m->anonymous);
      json_put_u64(&j, "anon_thp_bytes", m->anon_thp);
      json_put_u64(&j, "anon_not_huge_bytes", m->anonymous - m->anon_thp);
      json_put_u64(&j, "hugetlb_bytes", m->hugetlb);
      json_close(&j);
    }
    json_close(&j);
    json_put_u64(&j, "processes", count);
    json_put_u64(&j, "unreadable", unreadable);
    json_end(&j);
  }
  if (text) {
    static const char *const headers[] = {"rank", "pid", "command", "anon not huge", "anon", "anon THP", "hugetlb",
                                          "rss"};
    static const bool right[] = {true, true, false, true, true, true, true, true};
    struct table t;
    table_init(&t, 8, headers, right);
    for (size_t i = 0; i < shown; i++) {
      char rank[32], pid[32], not_huge[32], anon[32], thp[32], hugetlb[32], rss[32];
      snprintf(rank, sizeof rank, "%zu", i + 1);
      snprintf(pid, sizeof pid, "%d", list[i].pid);
      const struct smaps_rollup *m = &list[i].memory;
      bytes(m->anonymous - m->anon_thp, not_huge, sizeof not_huge);
      bytes(m->anonymous, anon, sizeof anon);
      bytes(m->anon_thp, thp, sizeof thp);
      bytes(m->hugetlb, hugetlb, sizeof hugetlb);
      bytes(m->rss, rss, sizeof rss);
      table_row(&t, rank, pid, list[i].command, not_huge, anon, thp, hugetlb, rss);
    }
    printf("Processes ranked by anonymous memory not on huge pages (from /proc/PID/smaps_rollup):\n\n");
    table_print(&t, stdout, "  ");
    table_free(&t);
    printf("\n  %zu processes%s", count, shown < count ? "" : "\n");
    if (shown < count) printf(", %zu shown (--top 0 for all)\n", shown);
    if (unreadable)
      printf("  %u process(es) could not be read (ptrace read access needed: run as root)\n", unreadable);
  }
  inspect_ranking_free(&ranking);
  return EXIT_DONE;
}

/* ---- --all --by ---------------------------------------------------------------------------------- */

static void print_groups_json(const struct fleet *f, size_t shown, FILE *json, const struct inspect_ranking *ranking) {
  struct json_writer j;
  json_begin(&j, json, "hugify.inspect/1");
  json_put_string(&j, "by", cgroup_key_name(f->by));
  if (f->memory.version) json_put_i64(&j, "cgroup_version", f->memory.version);
  else json_put_null(&j, "cgroup_version");
  json_open_array(&j, "groups");
  for (size_t i = 0; i < shown; i++) {
    const struct fleet_group *g = &f->groups[i];
    json_open_object(&j, NULL);
    json_put_string(&j, "name", g->name[0] ? g->name : NULL);
    json_put_string(&j, "cgroup", g->cgroup[0] ? g->cgroup : NULL);
    if (f->by == CGROUP_BY_CONTAINER) json_put_string(&j, "runtime", g->runtime && g->runtime[0] ? g->runtime : NULL);
    json_put_u64(&j, "processes", g->processes);
    json_put_u64(&j, "rss_bytes", g->memory.rss);
    json_put_u64(&j, "anonymous_bytes", g->memory.anonymous);
    json_put_u64(&j, "anon_not_huge_bytes", g->memory.anonymous - g->memory.anon_thp);
    json_put_u64(&j, "hugetlb_bytes", g->memory.hugetlb);
    json_put_cgroup_thp(&j, "walk", &g->walk);
    if (g->has_kernel) json_put_cgroup_thp(&j, "kernel", &g->kernel);
    else json_put_null(&j, "kernel");
    json_put_string(&j, "difference", g->difference[0] ? g->difference : NULL);
    json_close(&j);
  }
  json_close(&j);
  json_put_u64(&j, "processes", ranking->count);
  json_put_u64(&j, "unreadable", ranking->unreadable);
  json_end(&j);
}

/* "12.0 MiB / 12.1 MiB": the walk's figure, then the kernel's ("-" when it has none). */
static void walk_and_kernel(uint64_t walk, bool has_kernel, uint64_t kernel, char *out, size_t cap) {
  char a[32], b[32] = "-";
  bytes(walk, a, sizeof a);
  if (has_kernel) bytes(kernel, b, sizeof b);
  snprintf(out, cap, "%s / %s", a, b);
}

static void print_groups_text(const struct fleet *f, size_t shown, const struct inspect_ranking *ranking) {
  static const char *const headers[] = {"group", "procs", "anon not huge", "anon THP walk/kernel",
                                        "shmem THP walk/kernel", "file THP walk/kernel", "rss"};
  static const bool right[] = {false, true, true, true, true, true, true};
  struct table t;
  table_init(&t, 7, headers, right);
  for (size_t i = 0; i < shown; i++) {
    const struct fleet_group *g = &f->groups[i];
    char procs[32], not_huge[32], anon[80], shmem[80], file[80], rss[32];
    snprintf(procs, sizeof procs, "%zu", g->processes);
    bytes(g->memory.anonymous - g->memory.anon_thp, not_huge, sizeof not_huge);
    walk_and_kernel(g->walk.anon, g->has_kernel, g->kernel.anon, anon, sizeof anon);
    walk_and_kernel(g->walk.shmem, g->has_kernel && g->kernel.has_shmem, g->kernel.shmem, shmem, sizeof shmem);
    walk_and_kernel(g->walk.file, g->has_kernel && g->kernel.has_file, g->kernel.file, file, sizeof file);
    bytes(g->memory.rss, rss, sizeof rss);
    table_row(&t, g->name[0] ? g->name : "(none)", procs, not_huge, anon, shmem, file, rss);
  }
  printf("Processes grouped by %s, ranked by anonymous memory not on huge pages; THP bytes as the sum of the\n"
         "processes' smaps_rollup / the kernel's memory.stat of the %s:\n\n",
         cgroup_key_name(f->by), f->memory.version == 1 ? "cgroup (v1 memory controller)" : "cgroup");
  table_print(&t, stdout, "  ");
  table_free(&t);
  bool any = false;
  for (size_t i = 0; i < shown; i++) {
    const struct fleet_group *g = &f->groups[i];
    if (!g->difference[0]) continue;
    if (!any) printf("\n  where the two differ, and why:\n");
    any = true;
    printf("  %s: %s\n", g->name, g->difference);
  }
  if (f->memory.version == 0) printf("\n  no memory controller: the kernel's per-cgroup figures are not available\n");
  else if (f->memory.version == 1) printf("\n  cgroup v1: memory.stat reports anonymous THP only (rss_huge)\n");
  printf("\n  %zu groups of %zu processes%s", f->count, ranking->count, shown < f->count ? "" : "\n");
  if (shown < f->count) printf(", %zu shown (--top 0 for all)\n", shown);
  if (ranking->unreadable)
    printf("  %u process(es) could not be read (ptrace read access needed: run as root)\n", ranking->unreadable);
}

static int inspect_groups(enum cgroup_key by, long top, FILE *json, bool text) {
  struct inspect_ranking ranking;
  int rc = inspect_rank_processes(&ranking);
  if (rc) return fail(EXIT_SHORT, "inspect", "cannot rank the processes: %s", strerror(-rc));
  struct fleet f;
  rc = fleet_group_processes(&ranking, by, &f);
  if (rc) {
    inspect_ranking_free(&ranking);
    return fail(EXIT_SHORT, "inspect", "cannot group the processes: %s", strerror(-rc));
  }
  size_t shown = top > 0 && (size_t)top < f.count ? (size_t)top : f.count;
  if (json) print_groups_json(&f, shown, json, &ranking);
  if (text) print_groups_text(&f, shown, &ranking);
  fleet_free(&f);
  inspect_ranking_free(&ranking);
  return EXIT_DONE;
}

/* ---- the command --------------------------------------------------------------------------------- */

/* The PID operands: EXIT_DONE, or EXIT_USAGE after the message. */
static int parse_pids(char **argv, const struct option_result *parsed, int *pids, int *pid_count) {
  *pid_count = 0;
  for (int i = 0; i < parsed->operand_count; i++) {
    const char *arg = argv[parsed->operands[i]];
    uint64_t pid;
    if (!parse_count(arg, 1, 0x7fffffff, &pid)) return usage_error("inspect", "'%s' is not a process id", arg);
    pids[(*pid_count)++] = (int)pid;
  }
  return EXIT_DONE;
}

struct inspect_error {
  int pid, code;
  char message[HUGIFY_REASON_MAX];
};

/* The "errors" array of the JSON: a process that could not be inspected. */
static void put_errors(struct json_writer *j, const struct inspect_error *errors, int error_count) {
  json_open_array(j, "errors");
  for (int i = 0; i < error_count; i++) {
    json_open_object(j, NULL);
    json_put_i64(j, "pid", errors[i].pid);
    json_put_string(j, "error", errors[i].code == -EPERM ? "not_permitted" : errors[i].code == -ESRCH ? "no_process" : "failed");
    json_put_string(j, "message", errors[i].message);
    json_close(j);
  }
  json_close(j);
}

/* Inspect each process: its text, and its object in the JSON (out, when wanted). The exit status. */
static int inspect_processes(const int *pids, int pid_count, FILE *out, bool text, bool maps) {
  int status = EXIT_DONE;
  struct json_writer j;
  if (out) {
    json_begin(&j, out, "hugify.inspect/1");
    json_open_array(&j, "processes");
  }
  /* Errors are collected so the JSON stays one document. */
  struct inspect_error *errors = calloc((size_t)pid_count, sizeof *errors);
  int error_count = 0;
  for (int i = 0; i < pid_count && errors; i++) {
    struct hugify_inspect_report report;
    int rc = hugify_inspect(pids[i], &report);
    if (rc == 0) {
      struct folios folios;
      folios.rc = inspect_folio_sizes(pids[i], &folios.bytes, folios.reason, sizeof folios.reason);
      if (out) print_json_process(&j, &report, maps, &folios);
      if (text) {
        if (i > 0) putchar('\n');
        print_text(&report, maps, &folios);
      }
    } else {
      int code = rc == -EPERM ? EXIT_PRIVILEGE : EXIT_SHORT;
      errors[error_count].pid = pids[i];
      errors[error_count].code = rc;
      snprintf(errors[error_count].message, sizeof errors[error_count].message, "%s", report.reason);
      error_count++;
      fail(code, "inspect", "process %d: %s", pids[i], report.reason);
      if (code == EXIT_PRIVILEGE || status == EXIT_DONE) status = code;
    }
    hugify_inspect_report_free(&report);
  }
  if (out) {
    json_close(&j);
    put_errors(&j, errors, error_count);
    json_end(&j);
  }
  free(errors);
  return status;
}

int cmd_inspect(int argc, char **argv) {
  struct inspect_args args = {.top = 20, .by = -1};
  static struct option_result parsed; /* large: off the stack */
  if (parse_command_options("inspect", inspect_options, OPTIONS_ANYWHERE, argc, argv, &args, &parsed) != EXIT_DONE)
    return EXIT_USAGE;
  struct json_output json = args.json;
  bool maps = args.maps, all = args.all;
  long top = (long)args.top;
  int *pids = calloc((size_t)argc, sizeof *pids);
  int pid_count = 0;
  if (!pids) return fail(EXIT_SHORT, "inspect", "out of memory");
  if (parse_pids(argv, &parsed, pids, &pid_count) != EXIT_DONE) {
    free(pids);
    return EXIT_USAGE;
  }
  if (all) {
    free(pids);
    if (pid_count) return usage_error("inspect", "--all takes no PID");
    if (maps) return usage_error("inspect", "--maps is for single processes, not --all");
    FILE *out = json_output_open(&json, "inspect");
    if (json.wanted && !out) return EXIT_USAGE;
    int status = args.by >= 0 ? inspect_groups((enum cgroup_key)args.by, top, out, json_output_text(&json))
                              : inspect_all(top, out, json_output_text(&json));
    if (!json_output_close(out, &json, "inspect") && status == EXIT_DONE) status = EXIT_SHORT;
    return status;
  }
  if (args.by >= 0) {
    free(pids);
    return usage_error("inspect", "--by groups the processes of --all");
  }
  if (pid_count == 0) {
    free(pids);
    return usage_error("inspect", "which process? Give a PID, or --all");
  }
  FILE *out = json_output_open(&json, "inspect");
  if (json.wanted && !out) {
    free(pids);
    return EXIT_USAGE;
  }
  int status = inspect_processes(pids, pid_count, out, json_output_text(&json), maps);
  if (out && !json_output_close(out, &json, "inspect") && status == EXIT_DONE) status = EXIT_SHORT;
  free(pids);
  return status;
}
