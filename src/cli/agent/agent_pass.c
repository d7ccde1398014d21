/* SPDX-License-Identifier: MIT */
/* agent_pass.c - one pass of the agent: walk /proc, select processes (agent_policy.h), and for each one
 * gather its signals (measurement, ledger, the kernel's own collapses) and let the planner (planner.h)
 * decide whether and what to collapse while the CPU budget and memory allow. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "array.h"
#include "collapse.h"
#include "fleet.h"
#include "format.h"
#include "os.h"
#include "planner.h"
#include "probe.h"
#include "procfs.h"
#include "units.h"

/* Charge the CPU used since the last charge; true while the budget and the pass's ceiling allow more
 * (a->work says why not). --once: neither limits it. */
static bool budget_keep_going(void *context) {
  struct agent *a = context;
  double now = measure_clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
  agent_budget_charge(&a->budget, now - a->cpu_mark);
  a->cpu_mark = now;
  if (!a->config.once) {
    agent_budget_refill(&a->budget, measure_clock_seconds(CLOCK_MONOTONIC));
    /* a pending SIGTERM ends the pass between calls */
    sigset_t pending;
    if (sigpending(&pending) == 0 && (sigismember(&pending, SIGTERM) || sigismember(&pending, SIGINT)))
      a->stop_requested = true;
  }
  a->work = a->config.once ? agent_work_word(NULL, 0, 0, a->stop_requested)
                           : agent_work_word(&a->budget, now - a->pass_cpu_start, a->pass_ceiling, a->stop_requested);
  return a->work == AGENT_WORK_GO;
}

/* Identity of a process from /proc/PID/{status,comm,cgroup,exe}. False when it is gone or unreadable. */
static bool read_process(struct agent *a, pid_t pid, const struct agent_selectors *s, struct agent_process *out) {
  memset(out, 0, sizeof *out);
  out->pid = pid;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  const char *status = agent_read_reused(a, path);
  if (!status) return false;
  char field[64];
  uint64_t rss = 0, thp = 1;
  out->kernel_thread = !parse_keyed_value(status, "VmRSS", &rss);
  out->rss = rss;
  out->thp_disabled = parse_keyed_value(status, "THP_enabled", &thp) ? thp == 0 : -1;
  if (parse_keyed_text(status, "Uid", field, sizeof field)) out->uid = (uid_t)strtoul(field, NULL, 10);
  if (parse_keyed_text(status, "Name", field, sizeof field)) snprintf(out->comm, sizeof out->comm, "%.15s", field);
  if (strchr(out->comm, '\\')) { /* status escapes some bytes: the real comm */
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    os_read_small(path, out->comm, sizeof out->comm);
  }
  if (s->cgroup_count) {
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    const char *text = agent_read_reused(a, path);
    if (text && !parse_cgroup_v2_path(text, out->cgroup, sizeof out->cgroup)) out->cgroup[0] = '\0';
  }
  if (s->exe_count) {
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, out->exe, sizeof out->exe - 1);
    out->exe[n > 0 ? n : 0] = '\0';
  }
  return true;
}

static void count_failures(struct process_state *p, const struct hugify_collapse_report *r) {
  for (size_t i = 0; i < r->failure_count; i++) {
    const struct hugify_collapse_failure *f = &r->failures[i];
    char name[16];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(f->reason, ":"), f->reason);
    for (size_t k = 0; k < FAILURE_KINDS; k++) {
      if (!p->failures[k].reason[0]) snprintf(p->failures[k].reason, sizeof p->failures[k].reason, "%s", name);
      if (!strcmp(p->failures[k].reason, name)) {
        p->failures[k].windows += (f->end - f->start) / page_kind_size(HUGIFY_PAGE_THP);
        break;
      }
    }
  }
}

/* The planner's look at a process (a measurement, or a plan) saw it with these faults and this VmRSS. */
static void looked(struct process_state *p, uint64_t faults, uint64_t rss) {
  p->look_faults = faults;
  p->look_rss = rss;
}

/* Measure the process (hugify_inspect: its smaps, all of its memory): its figures for the metrics and
 * whether it has collapsible memory. */
static bool inspect_into(struct agent *a, struct process_state *p, uint64_t rss, uint64_t faults) {
  struct hugify_inspect_report report;
  int rc = hugify_inspect(p->pid, &report);
  p->measured = rc == 0;
  looked(p, faults, rss);
  p->unmeasured_passes = 0;
  p->measurements++;
  a->measurements++;
  if (rc == 0) {
    memcpy(p->classes, report.classes, sizeof p->classes);
    p->total = report.total;
    p->collapsible = report.collapsible;
  }
  hugify_inspect_report_free(&report);
  return rc == 0;
}

/* last_action of a process backed off because its collapses do not last: why, and what would make them last. */
static void churn_action(struct process_state *p, uint64_t pass) {
  const struct agent_ledger *l = &p->ledger;
  char share[16] = "-";
  if (l->last_lasting_share >= 0) snprintf(share, sizeof share, "%.0f %%", 100 * l->last_lasting_share);
  snprintf(p->last_action, sizeof p->last_action,
           "backed off %llu passes: collapses undone (%s lasted %d passes); %s gives memory back; only windows "
           "that lasted or are hot collapsed",
           (unsigned long long)(l->resume_pass - pass), share, AGENT_UNDONE_PASSES + 1, allocator_name(p->allocator));
}

/* What a collapse made and cost, into the process's and the host's totals: also for a target that exited
 * during it (the windows collapsed before it went still count). */
static void count_collapse(struct agent *a, struct process_state *p, const struct hugify_collapse_report *report,
                           uint64_t recollapsed_before) {
  uint64_t made = report->attempted - report->failed;
  p->collapsed_bytes += made;
  p->attempted_bytes += report->attempted;
  a->collapsed_bytes += made;
  p->bloat_bytes += report->bloat_bytes;
  a->bloat_bytes += report->bloat_bytes;
  a->recollapsed_bytes += p->ledger.recollapsed_bytes - recollapsed_before;
  count_failures(p, report);
}

/* The memory class of a mapping the collapse report names (shared memory has a path; inspect.c's rule). */
static enum hugify_memory_class class_of_path(const char *path) {
  if (!strcmp(path, "[heap]")) return HUGIFY_CLASS_HEAP;
  return !path[0] || !strncmp(path, "[anon", 5) ? HUGIFY_CLASS_ANON : HUGIFY_CLASS_SHM;
}

/* The figures after a collapse from the kernel's answers (a window it collapsed is huge now, its bloat
 * resident), not from a new measurement: that reads all of the process, and the pass's cost is to follow
 * what it collapsed. A measurement corrects them at least every PLAN_REFRESH_PASSES passes. */
static void figures_after(struct process_state *p, const struct hugify_collapse_report *report) {
  uint64_t made_total = 0, most = 0;
  enum hugify_memory_class bloat_class = HUGIFY_CLASS_ANON;
  for (size_t i = 0; i < report->mapping_count; i++) {
    const struct hugify_collapse_mapping *m = &report->mappings[i];
    uint64_t made = m->attempted > m->failed ? m->attempted - m->failed : 0;
    if (!made) continue;
    enum hugify_memory_class k = class_of_path(m->path);
    struct hugify_usage *u[2] = {&p->classes[k], &p->total};
    for (int j = 0; j < 2; j++) {
      u[j]->thp += made;
      u[j]->base -= u[j]->base > made ? made : u[j]->base;
      if (k != HUGIFY_CLASS_SHM) u[j]->anon_thp += made;
    }
    if (made > most) most = made, bloat_class = k;
    made_total += made;
  }
  p->classes[bloat_class].resident += report->bloat_bytes; /* zero-filled, inside the huge pages */
  p->total.resident += report->bloat_bytes;
  p->collapsible -= p->collapsible > made_total ? made_total : p->collapsible;
}

/* A collapse that made pages huge: the totals, the back-off, last_action, the figures after. */
static void record_collapse(struct agent *a, struct process_state *p, const struct hugify_collapse_report *report,
                            const struct collapse_policy *policy, uint64_t recollapsed_before, double now) {
  uint64_t made = report->attempted - report->failed;
  count_collapse(a, p, report, recollapsed_before);
  agent_backoff_record(&p->backoff, made > 0, report->failed > 0, now, a->config.interval, BACKOFF_MAX_SECONDS);
  if (policy->stopped && a->work == AGENT_WORK_BUDGET_SPENT) a->budget_stops++;
  if (policy->stopped && a->work == AGENT_WORK_PASS_CEILING) a->pass_ceiling_stops++;
  char stopped_text[40] = "";
  if (policy->stopped) snprintf(stopped_text, sizeof stopped_text, ", %s", agent_work_phrase(a->work));
  char made_text[32], planned_text[32], held_text[32], excluded_text[64] = "";
  format_bytes(made, made_text, sizeof made_text);
  format_bytes(policy->planned, planned_text, sizeof planned_text);
  format_bytes(policy->backed_off, held_text, sizeof held_text);
  if (report->excluded) {
    char bytes[32];
    format_bytes(report->excluded, bytes, sizeof bytes);
    snprintf(excluded_text, sizeof excluded_text, ", left %s the program excluded", bytes);
  }
  snprintf(p->last_action, sizeof p->last_action, "collapsed %s of %s planned%s%s%s%s%s%s", made_text, planned_text,
           excluded_text, report->failed ? ", some windows failed" : "", stopped_text,
           policy->backed_off ? ", " : "", policy->backed_off ? held_text : "",
           policy->backed_off ? " held back (collapses undone)" : "");
  p->idle_signature = 0;
  if (report->attempted) p->last_pause = report->longest_pause, p->last_action_time = measure_clock_seconds(CLOCK_REALTIME);
  /* the figures after: measured when the plan walked all of it anyway (a measurement costs what its walk
   * did), else the kernel's answers */
  if (report->attempted && policy->walked_whole) inspect_into(a, p, p->look_rss, p->look_faults);
  else if (report->attempted) figures_after(p, report);
  /* idle: a whole look (one plan, or a sweep's plans) planned nothing */
  p->sweep_planned += policy->planned;
  if (p->cursor == 0 && p->sweep_planned == 0 && !policy->stopped && !policy->backed_off)
    p->idle_signature = p->total.resident ^ (p->collapsible << 1);
  if (p->cursor == 0) p->sweep_planned = 0;
}

/* A collapse that failed as a whole (not a window): the reason, the back-off, a failure counted. */
static void record_failure(struct agent *a, struct process_state *p, int rc, const struct hugify_collapse_report *report,
                           double now) {
  snprintf(p->last_action, sizeof p->last_action, "%.159s", report->reason);
  agent_backoff_record(&p->backoff, false, true, now, a->config.interval, BACKOFF_MAX_SECONDS);
  struct failure_count *f = NULL;
  const char *name = rc == -EPERM ? "EPERM" : "error";
  for (size_t k = 0; k < FAILURE_KINDS && !f; k++)
    if (!p->failures[k].reason[0] || !strcmp(p->failures[k].reason, name)) f = &p->failures[k];
  if (f) snprintf(f->reason, sizeof f->reason, "%s", name), f->windows++;
}

#define HEAT_WAIT_PASSES 2 /* a new process waits this many passes at most for its first heat snapshot */

/* The process's heat to plan with (NULL: none, densest first); false when it is to wait a pass for its first
 * one (DAMON monitors it from the end of this pass; soft-dirty bits are cleared now, read at the next). */
static bool heat_for(struct agent *a, struct process_state *p, const struct heat_snapshot **snapshot) {
  *snapshot = heat_snapshot_of(&a->heat, p->pid);
  p->heat_signal = *snapshot ? (*snapshot)->signal : HEAT_NONE;
  if (*snapshot || a->heat.signal == HEAT_NONE || a->config.dry_run || p->heat_waits >= HEAT_WAIT_PASSES) return true;
  p->heat_waits++;
  heat_after_plan(&a->heat, p->pid);
  snprintf(p->last_action, sizeof p->last_action, "waiting a pass for its heat (%s)", heat_signal_name(a->heat.signal));
  return false;
}

/* How much of the process this plan walks (agent_walk_limit): what the bucket and the pass's ceiling still
 * allow, at the CPU a window's collapse took in this process so far. 0 (every window) for --once, whose pass
 * is not budgeted, and for --dry-run. */
static uint64_t walk_limit(const struct agent *a, const struct process_state *p) {
  if (a->config.once || a->config.dry_run) return 0; /* a dry run changes nothing: a sweep would not move */
  double used = measure_clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - a->pass_cpu_start;
  double available = a->pass_ceiling - used < a->budget.tokens ? a->pass_ceiling - used : a->budget.tokens;
  double per_window = p->collapse_calls ? p->collapse_cpu / (double)p->collapse_calls : 0;
  return agent_walk_limit(available, per_window, page_kind_size(HUGIFY_PAGE_THP));
}

/* One plan of the process and its collapses, within the budget, and what came of them. True when its sweep
 * goes on and the budget allows another plan in this pass. */
static bool collapse_once(struct agent *a, struct process_state *p, const struct heat_snapshot *heat, uint64_t rss,
                          uint64_t faults, double now) {
  /* the gentle pace (the default): one window per call, the budget asked between calls */
  struct hugify_collapse_opts opts = {.flags = a->config.dry_run ? HUGIFY_COLLAPSE_DRY_RUN : 0};
  struct collapse_policy policy = {.min_present = a->config.min_present, .keep_going = budget_keep_going,
                                   .context = a, .ledger = &p->ledger, .pass = a->passes,
                                   .pauses = &a->harm.pauses, .heat = heat, .layout = &p->layout,
                                   .walk_limit = walk_limit(a, p), .cursor = p->cursor};
  struct hugify_collapse_report report;
  uint64_t recollapsed_before = p->ledger.recollapsed_bytes, kernel_before = p->ledger.kernel_bytes;
  uint64_t smaps_before = p->layout.smaps_reads;
  int rc = collapse_with_policy(p->pid, &opts, &policy, &report);
  p->plans++;
  p->cursor = rc == 0 && !report.dry_run ? policy.cursor : 0;
  p->walked_bytes += policy.walked_bytes;
  a->walked_bytes += policy.walked_bytes;
  a->smaps_reads += p->layout.smaps_reads - smaps_before;
  p->collapse_cpu += report.cpu_seconds;
  p->collapse_calls += report.calls;
  a->collapse_cpu_seconds += report.cpu_seconds;
  looked(p, faults, rss + report.bloat_bytes); /* the collapses' zero-filled pages are no change of its own */
  if (rc == 0) p->allocator = policy.allocator, agent_harm_record(&a->harm, &report);
  if (rc == 0 && policy.backed_off_now) {
    a->churn_backoffs++;
    churn_action(p, a->passes);
    fprintf(stderr, "hugify agent: pid %d (%s): %s; what would keep its huge pages: %s\n", (int)p->pid, p->comm,
            p->last_action, allocator_advice(p->allocator));
  }
  if (rc == 0) {
    a->kernel_bytes += p->ledger.kernel_bytes - kernel_before;
    snprintf(p->order, sizeof p->order, "%s", policy.order ? policy.order : "");
  }
  if (rc == 0 && !report.dry_run && !report.exited) {
    record_collapse(a, p, &report, &policy, recollapsed_before, now);
    /* backed off for churn: only the windows that pay were planned; say why the rest waits */
    if (!agent_ledger_allows(&p->ledger, a->passes) && report.attempted == report.failed) churn_action(p, a->passes);
  } else if (rc == 0 && report.exited) {
    count_collapse(a, p, &report, recollapsed_before);
  } else if (rc == 0 && report.dry_run) {
    char planned_text[32];
    format_bytes(policy.planned, planned_text, sizeof planned_text);
    snprintf(p->last_action, sizeof p->last_action, "dry run: would collapse %s", planned_text);
  } else if (rc != 0 && rc != -ESRCH) {
    record_failure(a, p, rc, &report, now);
  }
  hugify_collapse_report_free(&report);
  /* the sweep goes on in this pass where its walk stopped at its limit with everything it planned tried */
  return rc == 0 && !report.exited && !policy.stopped && !policy.waiting && p->cursor != 0 && budget_keep_going(a);
}

#define AGENT_PLANS_PER_PASS 4 /* a sweep's plans of one process in one pass, while the budget allows */

/* Collapse what the policy chooses in one process, within the budget, and record what came of it. A sweep
 * goes on in the same pass while its plans found too little to spend what the pass allows. */
static void collapse_process(struct agent *a, struct process_state *p, uint64_t rss, uint64_t faults, double now) {
  const struct heat_snapshot *heat;
  if (!heat_for(a, p, &heat)) return;
  if (!p->ledger.window_bytes) {
    double passes = BACKOFF_MAX_SECONDS / a->config.interval;
    agent_ledger_init(&p->ledger, page_kind_size(HUGIFY_PAGE_THP), passes < 1 ? 1 : (uint64_t)passes);
  }
  for (int plans = 0; plans < AGENT_PLANS_PER_PASS && collapse_once(a, p, heat, rss, faults, now); plans++) {}
  heat_after_plan(&a->heat, p->pid);
}

/* Another owner's DAMOS scheme makes the process huge: it is the kernel's, measured and never planned. */
static bool left_to_damos(struct agent *a, struct process_state *p) {
  int own = a->heat.signal == HEAT_DAMON ? a->heat.kdamond : -1; /* --once and --status never open the heat */
  const struct probe_damon_scheme *s = agent_damos_scheme_of(a->damos, a->damos_count, own, p->pid);
  p->left_to_damos = s != NULL;
  if (!s) return false;
  p->damos = *s;
  snprintf(p->last_action, sizeof p->last_action, "left to the kernel: DAMOS %s scheme %u of kdamond %u targets it",
           s->action, s->scheme, s->kdamond);
  return true;
}

/* Work on one selected process: its signals, and the planner's word on what to do with them. */
static void serve_process(struct agent *a, struct process_state *p, uint64_t rss, uint64_t faults, bool may_collapse,
                          double now) {
  if (left_to_damos(a, p)) may_collapse = false;
  uint64_t window = page_kind_size(HUGIFY_PAGE_THP);
  struct plan_change change = {.faults_then = p->look_faults, .faults_now = faults, .rss_then = p->look_rss,
                               .rss_now = rss, .page_bytes = (uint64_t)sysconf(_SC_PAGESIZE),
                               .threshold_bytes = window / 2};
  struct plan_visit visit = {.may_collapse = may_collapse, .measured = p->measured,
                             .changed = planner_memory_changed(&change), .unmeasured_passes = p->unmeasured_passes,
                             .collapsible = p->collapsible > 0, .idle_recorded = p->idle_signature != 0,
                             .watching = agent_ledger_watching(&p->ledger, a->passes),
                             .failures_backoff = !agent_backoff_allows(&p->backoff, now), .sweeping = p->cursor != 0,
                             .big = rss > AGENT_WALK_MIN_BYTES};
  enum plan_step step = planner_before_measure(&visit);
  if (step != PLAN_STEP_MEASURE) p->unmeasured_passes++;
  if (step == PLAN_STEP_QUIET) return;
  if (step == PLAN_STEP_MEASURE) {
    if (!inspect_into(a, p, rss, faults)) { p->seen = false; return; } /* gone, or not readable */
    uint64_t signature = p->total.resident ^ (p->collapsible << 1);
    visit.collapsible = p->collapsible > 0;
    visit.idle = p->idle_signature && p->idle_signature == signature;
    const char *why;
    if (planner_after_measure(&visit, &why) != PLAN_STEP_PLAN) {
      if (why) snprintf(p->last_action, sizeof p->last_action, "%s: %u in a row", why, p->backoff.failures);
      return;
    }
  }
  if (!budget_keep_going(a)) return;
  collapse_process(a, p, rss, faults, now);
}

/* /proc/vmstat's thp_collapse_alloc: the kernel's collapses since the agent started (host-wide). */
static void read_kernel_collapses(struct agent *a) {
  const char *text = agent_read_reused(a, "/proc/vmstat");
  struct vmstat_counters counters;
  if (!text) return;
  parse_vmstat(text, &counters);
  if (!counters.present[VMSTAT_THP_COLLAPSE_ALLOC]) return;
  uint64_t now = counters.value[VMSTAT_THP_COLLAPSE_ALLOC];
  if (a->vmstat_read && now >= a->vmstat_collapse_alloc) a->kernel_collapse_allocs += now - a->vmstat_collapse_alloc;
  a->vmstat_collapse_alloc = now;
  a->vmstat_read = true;
}

/* DAMON's schemes, once a pass (a few sysfs reads; none where DAMON's sysfs is absent). */
static void read_damos(struct agent *a) {
  int count = probe_damon_schemes(PROBE_DAMON_ADMIN, a->damos, AGENT_DAMOS_SCHEMES);
  a->damos_count = count < 0 ? 0 : count > AGENT_DAMOS_SCHEMES ? AGENT_DAMOS_SCHEMES : (size_t)count;
}

/* The selected processes left to another owner's DAMOS scheme: what the kernel made huge there, and what the
 * agent would have planned (PLAN_CUT_DAMOS). */
static void count_damos(struct agent *a) {
  a->damos_processes = a->damos_huge_bytes = a->damos_cut_bytes = 0;
  for (size_t i = 0; i < a->process_count; i++) {
    const struct process_state *p = &a->processes[i];
    if (!p->seen || !p->left_to_damos) continue;
    a->damos_processes++;
    a->damos_huge_bytes += hugify_usage_huge(&p->total);
    a->damos_cut_bytes += p->collapsible;
  }
}

static void read_memory_state(struct agent *a) {
  const char *meminfo = agent_read_reused(a, "/proc/meminfo");
  a->available = UINT64_MAX;
  if (meminfo) parse_keyed_value(meminfo, "MemAvailable", &a->available);
  const char *pressure = agent_read_reused(a, "/proc/pressure/memory");
  if (!pressure || !parse_psi_pressure(pressure, &a->pressure)) memset(&a->pressure, 0, sizeof a->pressure);
  struct agent_memory_limits limits = {a->config.free_floor, a->config.max_pressure};
  a->memory_open = agent_memory_allows(&limits, a->available, &a->pressure, a->memory_reason, sizeof a->memory_reason);
}

struct pass_walk {
  struct agent *a;
  bool may_collapse;
  double start;
  pid_t self;
};

/* One process of the pass: selected or not, then served. Nonzero stops the walk. */
static int visit_process(pid_t pid, void *context) {
  struct pass_walk *walk = context;
  struct agent *a = walk->a;
  if (a->stop_requested) return 1;
  if (pid == walk->self) return 0;
  struct agent_process process;
  if (!read_process(a, pid, &a->config.selectors, &process)) return 0;
  enum agent_selection selection = agent_select(&a->config.selectors, &process);
  if (selection == AGENT_THP_DISABLED) { /* the process's own decision (systemd's MemoryTHP=): shown, not served */
    if (a->thp_disabled_count < AGENT_THP_DISABLED_SHOWN) {
      struct thp_disabled_process *d = &a->thp_disabled[a->thp_disabled_count];
      d->pid = pid;
      snprintf(d->comm, sizeof d->comm, "%s", process.comm);
    }
    a->thp_disabled_count++;
  }
  if (selection != AGENT_SELECTED) return 0;
  uint64_t start_time, faults;
  if (!agent_read_stat(a, pid, &start_time, &faults)) return 0; /* gone meanwhile */
  struct process_state *p = agent_state_of(a, process.pid, start_time, process.comm);
  if (!p) return 1;
  p->seen = p->selected = true;
  fleet_cgroup_of(&a->memory_root, pid, p->cgroup, sizeof p->cgroup);
  if (!budget_keep_going(a)) return 0; /* spent: its figures stay those of the last pass */
  serve_process(a, p, process.rss, faults, walk->may_collapse, walk->start);
  return 0;
}

/* One pass over every process. collapse = false: observe only (--status). */
/* The heat signal follows the selected processes: monitored from the end of the pass they were selected in. */
static void heat_follow(struct agent *a) {
  pid_t *pids = malloc((a->process_count ? a->process_count : 1) * sizeof *pids);
  if (!pids) return;
  size_t count = 0;
  for (size_t i = 0; i < a->process_count; i++)
    if (a->processes[i].selected) pids[count++] = a->processes[i].pid;
  char reason[256] = "";
  if (heat_set_targets(&a->heat, pids, count, reason, sizeof reason) != 0)
    snprintf(a->heat_error, sizeof a->heat_error, "%s", reason);
  free(pids);
}

void agent_run_pass(struct agent *a, bool collapse) {
  double start = measure_clock_seconds(CLOCK_MONOTONIC);
  a->pass_cpu_start = measure_clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
  a->pass_ceiling = a->config.once ? 0 : agent_pass_ceiling(a->config.cpu_budget, a->config.interval);
  if (a->passes++ == 0) cgroup_memory_hierarchy("", &a->memory_root);
  a->heat_error[0] = '\0';
  if (collapse) heat_refresh(&a->heat, a->heat_error, sizeof a->heat_error);
  read_memory_state(a);
  read_kernel_collapses(a);
  read_damos(a);
  a->thp_disabled_count = 0;
  if (!a->memory_open) a->memory_gate_closed_passes++;
  for (size_t i = 0; i < a->process_count; i++) a->processes[i].seen = false;
  struct pass_walk walk = {a, collapse && a->memory_open, start, getpid()};
  const struct agent_selectors *selectors = &a->config.selectors;
  if (agent_selects_only_pids(selectors)) /* --pid alone: those processes, not every one in /proc */
    for (size_t i = 0; i < selectors->pid_count && visit_process(selectors->pids[i], &walk) == 0; i++) {}
  else
    os_for_each_process(visit_process, &walk);
  /* processes that exited (or stopped being selected); a walk cut short by SIGTERM saw only some of them,
   * so then only those that exited leave: the rest keep their ledgers in the state file for the restart */
  agent_retire_processes(a, a->stop_requested);
  agent_give_back_table_tail(a);
  count_damos(a);
  if (collapse) heat_follow(a);
  budget_keep_going(a); /* charge the rest of the pass */
  a->last_pass_end = measure_clock_seconds(CLOCK_REALTIME);
  a->last_pass_seconds = measure_clock_seconds(CLOCK_MONOTONIC) - start;
  double pass_cpu = measure_clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - a->pass_cpu_start;
  if (pass_cpu > a->longest_pass_cpu) a->longest_pass_cpu = pass_cpu;
}
