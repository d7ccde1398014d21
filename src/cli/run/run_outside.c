/* SPDX-License-Identifier: MIT */
/* run_outside.c - `hugify run` for a program nothing can be preloaded into: a pass over its process tree every
 * RUN_OUTSIDE_INTERVAL while it runs collapses the tree's anonymous memory as `hugify agent` collapses a
 * process's, with the same library pieces (docs/agent.md): the planner and the one collapse machinery
 * (collapse_with_policy) at the gentle pace, the bloat guard (min_present), the ledger (collapses that last,
 * churn held back), the token bucket and the pass's CPU ceiling asked before every call, the sweep's walk
 * limit and the mappings kept between plans, the memory gate, each call's pause measured. A process is
 * planned when its memory changed since the last look (planner_memory_changed), while its sweep goes on and
 * while the ledger watches its collapses; the tree is measured (hugify_inspect) every pass for the report:
 * its anonymous memory at its peak and at the end. Children CMD forks are part of the tree while their parent
 * is (/proc/PID/status PPid); a process that left it (reparented) is no longer served. */
#include "run_outside.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent_policy.h"
#include "array.h"
#include "collapse.h"
#include "format.h"
#include "hugify.h"
#include "measure.h"
#include "os.h"
#include "probe.h"
#include "procfs.h"
#include "units.h"

#define RUN_OUTSIDE_FREE_FLOOR OS_MIB(512) /* the agent's defaults for its memory gate */
#define RUN_OUTSIDE_MAX_PRESSURE 10.0

/* A process of the tree, and what the collapse keeps of it between passes (the agent's process_state, less
 * what a daemon over a whole host needs). */
struct outside_process {
  pid_t pid;
  uint64_t start_time;          /* with the pid, the process (a reused pid starts afresh) */
  char comm[16];
  bool in_tree;                 /* found in the tree at this pass */
  struct agent_ledger ledger;
  struct collapse_layout layout;
  uint64_t cursor;              /* its sweep (0: none under way) */
  double collapse_cpu;          /* its collapses' CPU and calls: the CPU of one window, for the walk limit */
  uint64_t collapse_calls;
  uint64_t look_faults, look_rss;
  bool looked, failed;          /* failed: a collapse failed as a whole (EPERM...): not tried again */
  uint64_t collapsed_bytes, bloat_bytes;
  uint64_t cut_bytes[PLAN_CUT_COUNT]; /* its last plan's cuts */
  struct hugify_usage allocated;      /* heap + anon at the last measurement */
};

/* The tree's anonymous memory (heap + anon: what --heap acts on) at one measurement. */
struct outside_sample {
  struct hugify_usage allocated;
  double seconds;               /* after CMD started */
  unsigned processes;
};

struct run_outside {
  const char *why;
  struct outside_process *processes;
  size_t count, cap;
  pid_t *tree;                  /* the pass's tree (reused) */
  size_t tree_count, tree_cap;
  char *read_buffer;            /* /proc reads, one buffer kept */
  size_t read_cap;
  double started;
  uint64_t passes, gate_closed_passes, budget_stops, ceiling_stops, processes_seen;
  struct agent_budget budget;
  double cpu_mark, pass_cpu_start, pass_ceiling;
  enum agent_work work;
  struct agent_harm harm;
  uint64_t collapsed_bytes, attempted_bytes, failed_bytes, bloat_bytes, walked_bytes, plans;
  double collapse_cpu;
  struct outside_sample peak, last;
  char failure[HUGIFY_REASON_MAX]; /* the first collapse that failed as a whole, "" none */
  char gate[160];                  /* why the memory gate was last closed */
};

struct run_outside *run_outside_new(const char *why) {
  struct run_outside *o = calloc(1, sizeof *o);
  if (!o) return NULL;
  o->why = why;
  o->started = measure_now();
  o->pass_ceiling = agent_pass_ceiling(RUN_OUTSIDE_CPU_BUDGET, RUN_OUTSIDE_INTERVAL);
  agent_budget_init(&o->budget, RUN_OUTSIDE_CPU_BUDGET, RUN_OUTSIDE_BUDGET_WINDOW,
                    RUN_OUTSIDE_CPU_BUDGET * RUN_OUTSIDE_INTERVAL, o->started);
  o->cpu_mark = measure_clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
  return o;
}

void run_outside_free(struct run_outside *o) {
  if (!o) return;
  for (size_t i = 0; i < o->count; i++) {
    agent_ledger_free(&o->processes[i].ledger);
    collapse_layout_free(&o->processes[i].layout);
  }
  free(o->processes);
  free(o->tree);
  free(o->read_buffer);
  free(o);
}

/* ---- the tree ----------------------------------------------------------------------------------- */

static const char *read_reused(struct run_outside *o, const char *path) {
  size_t length;
  return os_read_file_reusing(path, &o->read_buffer, &o->read_cap, &length) == 0 ? o->read_buffer : NULL;
}

static bool in_tree(const struct run_outside *o, pid_t pid) {
  for (size_t i = 0; i < o->tree_count; i++)
    if (o->tree[i] == pid) return true;
  return false;
}

struct parent_of { pid_t pid, parent; };

static int note_parent(pid_t pid, void *context) {
  struct run_outside *o = context;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  const char *status = read_reused(o, path);
  uint64_t parent;
  if (!status || !parse_keyed_value(status, "PPid", &parent) || !in_tree(o, (pid_t)parent) || in_tree(o, pid)) return 0;
  if (ARRAY_GROW(o->tree, o->tree_count + 1, o->tree_cap) != 0) return 1;
  o->tree[o->tree_count++] = pid;
  return 0;
}

/* root and its descendants: /proc walked until a walk adds none (a child listed before its parent joins at the
 * next walk; a tree is a few levels deep). */
static void find_tree(struct run_outside *o, pid_t root) {
  o->tree_count = 0;
  if (ARRAY_GROW(o->tree, 1, o->tree_cap) != 0) return;
  o->tree[o->tree_count++] = root;
  for (size_t before = 0; before != o->tree_count;) {
    before = o->tree_count;
    os_for_each_process(note_parent, o);
  }
}

/* The entry of the process (pid, start_time), added when new; NULL without memory. */
static struct outside_process *process_of(struct run_outside *o, pid_t pid, uint64_t start_time) {
  for (size_t i = 0; i < o->count; i++) {
    struct outside_process *p = &o->processes[i];
    if (p->pid != pid) continue;
    if (p->start_time == start_time) return p;
    agent_ledger_free(&p->ledger); /* a reused pid: another process */
    collapse_layout_free(&p->layout);
    memset(p, 0, sizeof *p);
    p->pid = pid, p->start_time = start_time;
    return p;
  }
  if (ARRAY_GROW(o->processes, o->count + 1, o->cap) != 0) return NULL;
  struct outside_process *p = &o->processes[o->count++];
  memset(p, 0, sizeof *p);
  p->pid = pid, p->start_time = start_time;
  o->processes_seen++;
  return p;
}

/* ---- one plan of a process ---------------------------------------------------------------------- */

/* Charge the CPU used since the last charge; true while the bucket and the pass's ceiling allow more. */
static bool keep_going(void *context) {
  struct run_outside *o = context;
  double now = measure_clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
  agent_budget_charge(&o->budget, now - o->cpu_mark);
  o->cpu_mark = now;
  agent_budget_refill(&o->budget, measure_now());
  o->work = agent_work_word(&o->budget, now - o->pass_cpu_start, o->pass_ceiling, false);
  return o->work == AGENT_WORK_GO;
}

/* How much of the process this plan walks: what the bucket and the ceiling still allow (agent_walk_limit). */
static uint64_t walk_limit(const struct run_outside *o, const struct outside_process *p) {
  double used = measure_clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - o->pass_cpu_start;
  double available = o->pass_ceiling - used < o->budget.tokens ? o->pass_ceiling - used : o->budget.tokens;
  double per_window = p->collapse_calls ? p->collapse_cpu / (double)p->collapse_calls : 0;
  return agent_walk_limit(available, per_window, page_kind_size(HUGIFY_PAGE_THP));
}

static void count_plan(struct run_outside *o, struct outside_process *p, const struct collapse_policy *policy,
                       const struct hugify_collapse_report *report) {
  uint64_t made = report->attempted - report->failed;
  p->collapsed_bytes += made, o->collapsed_bytes += made;
  p->bloat_bytes += report->bloat_bytes, o->bloat_bytes += report->bloat_bytes;
  o->attempted_bytes += report->attempted;
  o->failed_bytes += report->failed;
  o->collapse_cpu += report->cpu_seconds;
  p->collapse_cpu += report->cpu_seconds;
  p->collapse_calls += report->calls;
  o->walked_bytes += policy->walked_bytes;
  memcpy(p->cut_bytes, policy->plan.cut_bytes, sizeof p->cut_bytes);
  agent_harm_record(&o->harm, report);
  if (policy->stopped && o->work == AGENT_WORK_BUDGET_SPENT) o->budget_stops++;
  if (policy->stopped && o->work == AGENT_WORK_PASS_CEILING) o->ceiling_stops++;
}

/* One plan of the process and its collapses within the budget. True when its sweep goes on and the budget
 * allows another plan in this pass. */
static bool collapse_once(struct run_outside *o, struct outside_process *p) {
  struct hugify_collapse_opts opts = {.flags = 0}; /* the gentle pace: one window per call, a rest after it */
  struct collapse_policy policy = {.min_present = RUN_OUTSIDE_MIN_PRESENT, .keep_going = keep_going, .context = o,
                                   .ledger = &p->ledger, .pass = o->passes, .pauses = &o->harm.pauses,
                                   .layout = &p->layout, .walk_limit = walk_limit(o, p), .cursor = p->cursor};
  struct hugify_collapse_report report;
  int rc = collapse_with_policy(p->pid, &opts, &policy, &report);
  o->plans++;
  p->cursor = rc == 0 ? policy.cursor : 0;
  if (rc == 0) count_plan(o, p, &policy, &report);
  if (rc != 0 && rc != -ESRCH && !o->failure[0])
    snprintf(o->failure, sizeof o->failure, "pid %d: %.400s", (int)p->pid, report.reason);
  p->failed = rc != 0 && rc != -ESRCH;
  bool more = rc == 0 && !report.exited && !policy.stopped && !policy.waiting && p->cursor != 0;
  hugify_collapse_report_free(&report);
  return more && keep_going(o);
}

#define RUN_OUTSIDE_PLANS_PER_PASS 4 /* the agent's AGENT_PLANS_PER_PASS */

/* A process of the tree at this pass: planned when its memory changed since the last look, its sweep goes
 * on, or the ledger must judge its collapses (the agent's rules, planner.h and agent_policy.h). */
static void serve(struct run_outside *o, pid_t pid, bool may_collapse) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  const char *stat = read_reused(o, path);
  uint64_t start_time, faults, rss_pages;
  if (!stat || !parse_stat_start_time(stat, &start_time) || !parse_stat_faults(stat, &faults) ||
      !parse_stat_rss(stat, &rss_pages))
    return; /* gone */
  struct outside_process *p = process_of(o, pid, start_time);
  if (!p) return;
  p->in_tree = true;
  const char *open = strchr(stat, '('), *close = strrchr(stat, ')');
  if (open && close > open) snprintf(p->comm, sizeof p->comm, "%.*s", (int)(close - open - 1), open + 1);
  uint64_t window = page_kind_size(HUGIFY_PAGE_THP), page = (uint64_t)sysconf(_SC_PAGESIZE);
  struct plan_change change = {.faults_then = p->look_faults, .faults_now = faults, .rss_then = p->look_rss,
                               .rss_now = rss_pages * page, .page_bytes = page, .threshold_bytes = window / 2};
  bool due = !p->looked || planner_memory_changed(&change) || p->cursor != 0 ||
             agent_ledger_watching(&p->ledger, o->passes);
  if (!may_collapse || p->failed || !due || !keep_going(o)) return;
  if (!p->ledger.window_bytes) agent_ledger_init(&p->ledger, window, 3600 / (uint64_t)RUN_OUTSIDE_INTERVAL);
  uint64_t bloat_before = p->bloat_bytes;
  for (int plans = 0; plans < RUN_OUTSIDE_PLANS_PER_PASS && collapse_once(o, p); plans++) {}
  p->looked = true;
  p->look_faults = faults; /* the collapses' zero-filled pages are no change of its own */
  p->look_rss = rss_pages * page + (p->bloat_bytes - bloat_before);
}

/* ---- the pass ----------------------------------------------------------------------------------- */

static bool memory_gate_open(struct run_outside *o) {
  const char *meminfo = read_reused(o, "/proc/meminfo");
  uint64_t available = UINT64_MAX;
  if (meminfo) parse_keyed_value(meminfo, "MemAvailable", &available);
  struct psi_pressure pressure;
  const char *text = read_reused(o, "/proc/pressure/memory");
  if (!text || !parse_psi_pressure(text, &pressure)) memset(&pressure, 0, sizeof pressure);
  struct agent_memory_limits limits = {RUN_OUTSIDE_FREE_FLOOR, RUN_OUTSIDE_MAX_PRESSURE};
  return agent_memory_allows(&limits, available, &pressure, o->gate, sizeof o->gate);
}

static void add_usage(struct hugify_usage *sum, const struct hugify_usage *usage) {
  sum->resident += usage->resident, sum->base += usage->base, sum->thp += usage->thp;
  sum->hugetlb_2m += usage->hugetlb_2m, sum->hugetlb_1g += usage->hugetlb_1g;
  sum->anonymous += usage->anonymous, sum->anon_thp += usage->anon_thp;
}

/* The tree's anonymous memory now (hugify_inspect of each process: its smaps), kept as the last sample and,
 * when the tree holds the most it has held, as the peak. */
static void measure_tree(struct run_outside *o) {
  struct outside_sample sample = {.seconds = measure_now() - o->started};
  for (size_t i = 0; i < o->count; i++) {
    struct outside_process *p = &o->processes[i];
    if (!p->in_tree) continue;
    struct hugify_inspect_report report;
    if (hugify_inspect(p->pid, &report) == 0) {
      memset(&p->allocated, 0, sizeof p->allocated);
      add_usage(&p->allocated, &report.classes[HUGIFY_CLASS_HEAP]);
      add_usage(&p->allocated, &report.classes[HUGIFY_CLASS_ANON]);
      add_usage(&sample.allocated, &p->allocated);
      sample.processes++;
    }
    hugify_inspect_report_free(&report);
  }
  if (!sample.processes) return; /* the tree ended meanwhile: the last sample stays */
  o->last = sample;
  if (sample.allocated.resident >= o->peak.allocated.resident) o->peak = sample;
}

/* One pass; the seconds until the next: sooner when the pass's ceiling cut a plan short and the bucket holds
 * CPU still (a big heap is collapsed at the budget's pace, not one ceiling a second). */
static double outside_pass(void *context, pid_t root) {
  struct run_outside *o = context;
  uint64_t ceiling_stops = o->ceiling_stops;
  o->passes++;
  o->pass_cpu_start = measure_clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
  bool may_collapse = memory_gate_open(o);
  if (!may_collapse) o->gate_closed_passes++;
  for (size_t i = 0; i < o->count; i++) o->processes[i].in_tree = false;
  find_tree(o, root);
  for (size_t i = 0; i < o->tree_count; i++) serve(o, o->tree[i], may_collapse);
  measure_tree(o);
  keep_going(o); /* charge the rest of the pass: its walk of /proc and the measurement */
  bool busy = o->ceiling_stops > ceiling_stops && agent_budget_allows(&o->budget);
  return busy ? RUN_OUTSIDE_BUSY_INTERVAL : RUN_OUTSIDE_INTERVAL;
}

/* ---- the report ------------------------------------------------------------------------------------ */

/* hugify run's own CPU: all of it went to the tree (the walks of /proc, the plans, the collapses, the
 * measurements), since it does nothing else while CMD runs. */
static double own_cpu_seconds(void) {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return (double)usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + (double)usage.ru_stime.tv_sec +
         usage.ru_stime.tv_usec / 1e6;
}

static void put_sample(struct json_writer *j, const char *key, const struct outside_sample *sample) {
  if (!sample->processes) {
    json_put_null(j, key);
    return;
  }
  json_open_object(j, key);
  json_put_double(j, "seconds", sample->seconds);
  json_put_u64(j, "processes", sample->processes);
  json_put_usage(j, "allocated", &sample->allocated);
  json_close(j);
}

/* Over the processes' last plans: the bytes each cut left (the bloat guard's is "sparse"). */
static void cut_totals(const struct run_outside *o, uint64_t *cuts) {
  memset(cuts, 0, PLAN_CUT_COUNT * sizeof *cuts);
  for (size_t i = 0; i < o->count; i++)
    for (int c = 0; c < PLAN_CUT_COUNT; c++) cuts[c] += o->processes[i].cut_bytes[c];
}

static void put_processes(const struct run_outside *o, struct json_writer *j) {
  json_open_array(j, "processes");
  for (size_t i = 0; i < o->count; i++) {
    const struct outside_process *p = &o->processes[i];
    json_open_object(j, NULL);
    json_put_i64(j, "pid", p->pid);
    json_put_string(j, "command", p->comm);
    json_put_u64(j, "collapsed_bytes", p->collapsed_bytes);
    json_put_u64(j, "bloat_bytes", p->bloat_bytes);
    json_put_u64(j, "undone_bytes", p->ledger.undone_bytes);
    json_put_usage(j, "allocated", &p->allocated);
    json_close(j);
  }
  json_close(j);
}

static void outside_json(void *context, struct json_writer *j) {
  const struct run_outside *o = context;
  json_open_object(j, "outside");
  json_put_string(j, "why", o->why);
  json_put_string(j, "pace", "gentle");
  json_put_double(j, "interval_seconds", RUN_OUTSIDE_INTERVAL);
  json_put_double(j, "cpu_budget_fraction", RUN_OUTSIDE_CPU_BUDGET);
  json_put_double(j, "min_present_fraction", RUN_OUTSIDE_MIN_PRESENT);
  json_put_u64(j, "passes", o->passes);
  json_put_u64(j, "plans", o->plans);
  json_put_u64(j, "process_count", o->processes_seen);
  json_put_u64(j, "collapsed_bytes", o->collapsed_bytes);
  json_put_u64(j, "attempted_bytes", o->attempted_bytes);
  json_put_u64(j, "failed_bytes", o->failed_bytes);
  json_put_u64(j, "bloat_bytes", o->bloat_bytes);
  json_put_u64(j, "walked_bytes", o->walked_bytes);
  uint64_t cuts[PLAN_CUT_COUNT];
  cut_totals(o, cuts);
  json_open_object(j, "cut_bytes");
  for (int c = 0; c < PLAN_CUT_COUNT; c++)
    if (c != PLAN_KEPT) json_put_u64(j, plan_cut_name((enum plan_cut)c), cuts[c]);
  json_close(j);
  json_put_double(j, "cpu_seconds", own_cpu_seconds());
  json_put_double(j, "collapse_cpu_seconds", o->collapse_cpu);
  json_put_u64(j, "budget_stops", o->budget_stops);
  json_put_u64(j, "pass_ceiling_stops", o->ceiling_stops);
  json_put_u64(j, "memory_gate_closed_passes", o->gate_closed_passes);
  json_open_object(j, "pause");
  json_put_u64(j, "count", o->harm.pauses.count);
  json_put_double(j, "longest_seconds", o->harm.pauses.longest);
  json_put_double(j, "p99_seconds", pause_histogram_quantile(&o->harm.pauses, 0.99));
  json_put_double(j, "total_seconds", o->harm.pauses.sum);
  json_close(j);
  json_put_double(j, "longest_call_seconds", o->harm.longest_call);
  put_sample(j, "peak", &o->peak);
  put_sample(j, "last", &o->last);
  json_put_string(j, "failure", o->failure[0] ? o->failure : NULL);
  put_processes(o, j);
  json_close(j);
}

static void outside_text(void *context, FILE *out) {
  const struct run_outside *o = context;
  char collapsed[32], bloat[32], resident[32], share[16], last[32], last_share[16], sparse[32];
  format_bytes(o->collapsed_bytes, collapsed, sizeof collapsed);
  format_bytes(o->bloat_bytes, bloat, sizeof bloat);
  format_bytes(o->peak.allocated.resident, resident, sizeof resident);
  format_percent(hugify_usage_huge(&o->peak.allocated), o->peak.allocated.resident, share, sizeof share);
  format_bytes(o->last.allocated.resident, last, sizeof last);
  format_percent(hugify_usage_huge(&o->last.allocated), o->last.allocated.resident, last_share, sizeof last_share);
  uint64_t cuts[PLAN_CUT_COUNT];
  cut_totals(o, cuts);
  format_bytes(cuts[PLAN_CUT_SPARSE], sparse, sizeof sparse);
  fprintf(out, "  %s: nothing preloaded; its anonymous memory was collapsed from outside while it ran (as hugify "
          "agent would, gentle pace)\n", o->why);
  fprintf(out, "  collapsed %s in %llu passes over %llu process%s; heap+anon at its peak %s, %s huge (at %.1f s); "
          "at the end %s, %s huge\n", collapsed, (unsigned long long)o->passes,
          (unsigned long long)o->processes_seen, o->processes_seen == 1 ? "" : "es", resident, share,
          o->peak.seconds, last, last_share);
  fprintf(out, "  bloat guard (%.0f %% of a window present): left %s; added %s; cost %.2f s of CPU (collapses "
          "%.2f s), longest pause %.1f ms (p99 %.1f ms, %llu calls)\n", 100 * RUN_OUTSIDE_MIN_PRESENT, sparse, bloat,
          own_cpu_seconds(), o->collapse_cpu, 1e3 * o->harm.pauses.longest,
          1e3 * pause_histogram_quantile(&o->harm.pauses, 0.99), (unsigned long long)o->harm.pauses.count);
  if (o->failure[0]) fprintf(out, "  a collapse failed: %s\n", o->failure);
  if (o->gate_closed_passes) fprintf(out, "  no collapse in %llu passes: %s\n",
                                     (unsigned long long)o->gate_closed_passes, o->gate);
}

struct run_watcher run_outside_watcher(struct run_outside *outside) {
  return (struct run_watcher){.interval = RUN_OUTSIDE_INTERVAL, .pass = outside_pass, .json = outside_json,
                              .text = outside_text, .context = outside};
}
