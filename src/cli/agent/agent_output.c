/* SPDX-License-Identifier: MIT */
/* agent_output.c - what --once and --status print: a table of the selected processes, or JSON
 * (schema hugify.agent/1, docs/agent.md). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "units.h"
#include "format.h"

/* ---- output of --once and --status -------------------------------------------------------------- */

/* --status: the daemon's state, or why it is not shown (then the table is this pass's observation only). */
static void print_daemon(const struct daemon_state *d, const char *path) {
  if (!d->tried) {
    printf("  no daemon state read (--state-file none): the figures below are this observation only\n");
    return;
  }
  if (!d->fresh) {
    printf("  %s; the figures below are this observation only\n", d->note);
    return;
  }
  char collapsed[32], recollapsed[32];
  format_bytes(d->collapsed, collapsed, sizeof collapsed);
  format_bytes(d->recollapsed, recollapsed, sizeof recollapsed);
  printf("  daemon pid %d (%s, written %.1f s ago): %llu passes, collapsed %s, re-collapsed %s, %llu churn "
         "back-offs\n",
         (int)d->pid, path, d->age_seconds, (unsigned long long)d->passes, collapsed, recollapsed,
         (unsigned long long)d->churn_backoffs);
  char kernel[32];
  format_bytes(d->kernel_collapsed, kernel, sizeof kernel);
  printf("  made huge by the kernel without the daemon (khugepaged): %s in its processes; thp_collapse_alloc +%llu "
         "host-wide since it started\n", kernel, (unsigned long long)d->kernel_collapse_allocs);
  if (d->heat[0]) {
    printf("  daemon's heat: %s (%s)", d->heat, d->heat_reason);
    if (!strcmp(d->heat, "damon"))
      printf("; DAMON monitors %llu processes, %llu regions at its last read, %llu reads", 
             (unsigned long long)d->heat_targets, (unsigned long long)d->heat_regions,
             (unsigned long long)d->heat_reads);
    if (d->heat_kdamond_cpu >= 0) printf(", kdamond CPU %.3f s", d->heat_kdamond_cpu);
    printf("\n");
  }
  if (d->has_pauses && d->pause_count)
    printf("  daemon's collapses caused pauses: %llu calls, longest %.1f ms, p99 <= %.1f ms; longest call %.1f ms\n",
           (unsigned long long)d->pause_count, d->pause_longest * 1e3, d->pause_p99 * 1e3, d->longest_call * 1e3);
}

/* --status: the daemon's ledger of one process: whether its collapses last, back-off, allocator, advice. */
static void print_daemon_process(const struct process_state *p, const struct daemon_process *d) {
  char early[16] = "-", late[16] = "-", collapsed[32], recollapsed[32], undone[32];
  if (d->early_share >= 0) snprintf(early, sizeof early, "%.0f %%", 100 * d->early_share);
  if (d->late_share >= 0) snprintf(late, sizeof late, "%.0f %%", 100 * d->late_share);
  format_bytes(d->collapsed, collapsed, sizeof collapsed);
  format_bytes(d->recollapsed, recollapsed, sizeof recollapsed);
  format_bytes(d->undone, undone, sizeof undone);
  char kernel[32];
  format_bytes(d->kernel_collapsed, kernel, sizeof kernel);
  printf("  %d %s (daemon): collapsed %s (the kernel without it: %s); %s still huge a pass later, %s ten passes "
         "later; re-collapsed %s, undone %s; ",
         (int)p->pid, p->comm, collapsed, kernel, early, late, recollapsed, undone);
  if (d->backed_off) printf("backed off, %llu passes left", (unsigned long long)d->backoff_passes_left);
  else printf("not backed off");
  printf("; allocator %s; heat %s\n", d->allocator[0] ? d->allocator : "unknown", d->heat[0] ? d->heat : "unknown");
  if (d->last_action[0]) printf("    last action: %s\n", d->last_action);
  if (d->advice[0]) printf("    what would keep its huge pages: %s\n", d->advice);
}

/* The kernel's own collapses beside the agent's, and the processes that said no to THP. */
static void print_kernel(const struct agent *a, bool status) {
  char agent[32], kernel[32];
  format_bytes(a->collapsed_bytes, agent, sizeof agent);
  format_bytes(a->kernel_bytes, kernel, sizeof kernel);
  if (!status) /* --status: the daemon's figures (print_daemon); its own single pass collapses nothing */
    printf("  made huge: by the agent %s; by the kernel without it (khugepaged) %s in the selected processes; "
         "thp_collapse_alloc +%llu host-wide since the agent started\n",
         agent, kernel, (unsigned long long)a->kernel_collapse_allocs);
  if (a->damos_processes) {
    char huge[32];
    format_bytes(a->damos_huge_bytes, huge, sizeof huge);
    printf("  left to the kernel: %llu processes another owner's DAMOS collapse or hugepage scheme targets, %s huge\n",
           (unsigned long long)a->damos_processes, huge);
  }
  for (size_t i = 0; i < a->thp_disabled_count && i < AGENT_THP_DISABLED_SHOWN; i++)
    printf("  %d %s: not served: the process disabled THP (prctl PR_SET_THP_DISABLE; systemd's MemoryTHP= "
           "sets it for a service)\n", (int)a->thp_disabled[i].pid, a->thp_disabled[i].comm);
  if (a->thp_disabled_count > AGENT_THP_DISABLED_SHOWN)
    printf("  ... and %zu more processes that disabled THP\n", a->thp_disabled_count - AGENT_THP_DISABLED_SHOWN);
}

void agent_print_table(const struct agent *a, bool status) {
  char available[32], floor[32];
  format_bytes(a->available == UINT64_MAX ? 0 : a->available, available, sizeof available);
  format_bytes(a->config.free_floor, floor, sizeof floor);
  printf("hugify agent%s: %zu selected processes; memory %s (available %s, floor %s, pressure %.2f %%)%s%s\n",
         status ? " --status" : a->config.dry_run ? " --once --dry-run" : " --once", a->process_count,
         a->memory_open ? "allows collapsing" : "gate closed", available, floor, a->pressure.some_avg10,
         a->memory_open ? "" : ": ", a->memory_open ? "" : a->memory_reason);
  if (a->harm.pauses.count)
    printf("  pauses its collapses caused: %llu calls, longest %.1f ms, p99 <= %.1f ms (schedstat, an upper bound)\n",
           (unsigned long long)a->harm.pauses.count, a->harm.pauses.longest * 1e3,
           pause_histogram_quantile(&a->harm.pauses, 0.99) * 1e3);
  if (!status && a->heat.reason[0]) printf("  heat: %s (%s)\n", heat_signal_name(a->heat.signal), a->heat.reason);
  else if (!status && a->config.once) printf("  heat: none (one pass: no time to monitor; densest first)\n");
  if (status) print_daemon(&a->daemon, a->config.state_file);
  print_kernel(a, status);
  if (a->process_count == 0) return;
  static const char *const headers[] = {"pid", "comm", "resident", "huge", "share", "heap huge", "anon huge",
                                        "collapsible", "collapsed", "last action"};
  static const bool right[] = {true, false, true, true, true, true, true, true, true, false};
  struct table t;
  table_init(&t, 10, headers, right);
  for (size_t i = 0; i < a->process_count; i++) {
    const struct process_state *p = &a->processes[i];
    char pid[16], resident[32], huge[32], share[16], heap[32], anon[32], collapsible[32], collapsed[32];
    snprintf(pid, sizeof pid, "%d", (int)p->pid);
    format_bytes(p->total.resident, resident, sizeof resident);
    format_bytes(hugify_usage_huge(&p->total), huge, sizeof huge);
    format_percent(hugify_usage_huge(&p->total), p->total.resident, share, sizeof share);
    format_bytes(hugify_usage_huge(&p->classes[HUGIFY_CLASS_HEAP]), heap, sizeof heap);
    format_bytes(hugify_usage_huge(&p->classes[HUGIFY_CLASS_ANON]), anon, sizeof anon);
    format_bytes(p->collapsible, collapsible, sizeof collapsible);
    format_bytes(p->collapsed_bytes, collapsed, sizeof collapsed);
    table_row(&t, pid, p->comm, resident, huge, share, heap, anon, collapsible, collapsed,
              p->last_action[0] ? p->last_action : "-");
  }
  table_print(&t, stdout, "  ");
  table_free(&t);
  for (size_t i = 0; i < a->process_count; i++) {
    const struct process_state *p = &a->processes[i];
    const struct agent_ledger *l = &p->ledger;
    const struct daemon_process *d = status ? agent_daemon_process(&a->daemon, p->pid, p->start_time, p->comm) : NULL;
    if (d) print_daemon_process(p, d);
    if (!l->early_checked && !l->churn_strikes) continue;
    char recollapsed[32], undone[32], bloat[32];
    format_bytes(l->recollapsed_bytes, recollapsed, sizeof recollapsed);
    format_bytes(l->undone_bytes, undone, sizeof undone);
    format_bytes(p->bloat_bytes, bloat, sizeof bloat);
    char early[16] = "-", late[16] = "-";
    if (l->early_checked) format_percent(l->early_huge, l->early_checked, early, sizeof early);
    if (l->late_checked) format_percent(l->late_huge, l->late_checked, late, sizeof late);
    printf("  %d %s: of its collapses, %s still huge a pass later, %s ten passes later; re-collapsed %s, "
           "undone %s, bloat %s\n",
           (int)p->pid, p->comm, early, late, recollapsed, undone, bloat);
    if (l->churn_strikes || l->undone_bytes)
      printf("    %s gives freed memory back inside huge pages; what would keep them: %s\n",
             allocator_name(p->allocator), allocator_advice(p->allocator));
  }
}

static void put_share(struct json_writer *j, const char *name, double share) {
  if (share < 0) json_put_null(j, name);
  else json_put_double(j, name, share);
}

/* The harm ledger's pauses: the histogram's buckets (cumulative, as in the metrics) and its summary. */
static void put_pauses(struct json_writer *j, const struct agent_harm *h) {
  json_put_double(j, "longest_call_seconds", h->longest_call);
  json_open_object(j, "pause");
  json_put_u64(j, "count", h->pauses.count);
  json_put_double(j, "longest_seconds", h->pauses.longest);
  json_put_double(j, "p99_seconds", pause_histogram_quantile(&h->pauses, 0.99));
  json_put_double(j, "total_seconds", h->pauses.sum);
  json_open_array(j, "buckets");
  uint64_t cumulative = 0;
  for (size_t k = 0; k <= PAUSE_BUCKETS; k++) {
    cumulative += h->pauses.counts[k];
    json_open_object(j, NULL);
    if (k < PAUSE_BUCKETS) json_put_double(j, "le_seconds", pause_bucket_bounds[k]);
    else json_put_null(j, "le_seconds");
    json_put_u64(j, "count", cumulative);
    json_close(j);
  }
  json_close(j);
  json_close(j);
}

/* Whether the agent's collapses in a process last (its ledger), and what would make them last. */
static void put_lasting(struct json_writer *j, const struct agent *a, const struct process_state *p) {
  const struct agent_ledger *l = &p->ledger;
  bool backed_off = !agent_ledger_allows(l, a->passes);
  json_open_object(j, "lasting");
  put_share(j, "huge_after_1_pass_fraction", agent_ledger_early_share(l));
  put_share(j, "huge_after_10_passes_fraction", agent_ledger_late_share(l));
  json_put_u64(j, "checked_after_1_pass_bytes", l->early_checked);
  json_put_u64(j, "checked_after_10_passes_bytes", l->late_checked);
  json_put_u64(j, "recollapsed_bytes", l->recollapsed_bytes);
  json_put_u64(j, "undone_bytes", l->undone_bytes);
  json_put_u64(j, "bloat_bytes", p->bloat_bytes);
  json_put_u64(j, "held_back_bytes", l->backed_off_bytes);
  json_put_bool(j, "backed_off", backed_off);
  json_put_u64(j, "backoff_passes_left", backed_off ? l->resume_pass - a->passes : 0);
  json_put_u64(j, "churn_strikes", l->churn_strikes);
  json_put_string(j, "allocator", allocator_name(p->allocator));
  json_put_string(j, "advice", l->churn_strikes || l->undone_bytes ? allocator_advice(p->allocator) : NULL);
  json_close(j);
}

/* --status: the running daemon's state (--state-file), or why it is not used. */
static void put_daemon(struct json_writer *j, const struct daemon_state *d, const char *path) {
  json_open_object(j, "daemon");
  json_put_string(j, "state_file", path);
  json_put_bool(j, "fresh", d->fresh);
  if (d->age_seconds < 0) json_put_null(j, "age_seconds");
  else json_put_double(j, "age_seconds", d->age_seconds);
  json_put_string(j, "note", d->note[0] ? d->note : NULL);
  if (d->fresh) {
    json_put_i64(j, "pid", d->pid);
    json_put_u64(j, "passes", d->passes);
    json_put_u64(j, "collapsed_bytes", d->collapsed);
    json_put_u64(j, "recollapsed_bytes", d->recollapsed);
    json_put_u64(j, "churn_backoffs", d->churn_backoffs);
    json_open_object(j, "kernel");
    json_put_u64(j, "collapsed_bytes", d->kernel_collapsed);
    json_put_u64(j, "thp_collapse_alloc", d->kernel_collapse_allocs);
    json_close(j);
    if (d->has_pauses) {
      json_put_double(j, "longest_call_seconds", d->longest_call);
      json_open_object(j, "pause");
      json_put_u64(j, "count", d->pause_count);
      json_put_double(j, "longest_seconds", d->pause_longest);
      json_put_double(j, "p99_seconds", d->pause_p99);
      json_close(j);
    }
  }
  json_close(j);
}

/* The access signal and what its monitoring costs (docs/agent.md, "Heat"). */
static void put_heat(struct json_writer *j, const struct agent *a) {
  const struct heat_work *w = &a->heat.work;
  json_open_object(j, "heat");
  json_put_string(j, "signal", heat_signal_name(a->heat.signal));
  json_put_string(j, "reason", a->heat.reason[0] ? a->heat.reason
                               : a->config.once ? "one pass: no time to monitor; densest first" : NULL);
  json_put_string(j, "error", a->heat_error[0] ? a->heat_error : NULL);
  json_put_u64(j, "damon_targets", w->targets);
  json_put_u64(j, "damon_regions", w->regions);
  json_put_u64(j, "damon_reads", w->reads);
  json_put_u64(j, "damon_restarts", w->restarts);
  json_put_double(j, "damon_monitored_seconds", w->monitored_seconds);
  /* every sample interval DAMON checks one page of each region; every aggregation it merges and splits them */
  json_put_u64(j, "damon_aggregations", w->aggr_us ? (uint64_t)(w->monitored_seconds * 1e6 / (double)w->aggr_us) : 0);
  json_put_u64(j, "damon_sample_intervals",
               w->sample_us ? (uint64_t)(w->monitored_seconds * 1e6 / (double)w->sample_us) : 0);
  if (w->kdamond_cpu >= 0 && a->heat.signal == HEAT_DAMON) json_put_double(j, "kdamond_cpu_seconds", w->kdamond_cpu);
  else json_put_null(j, "kdamond_cpu_seconds");
  json_put_u64(j, "soft_dirty_clears", w->clears);
  json_put_bool(j, "first_touch", a->heat.first_touch);
  json_put_u64(j, "first_touch_tried_regions", w->first_touch_tried_regions);
  json_put_u64(j, "first_touch_applied_regions", w->first_touch_applied_regions);
  json_put_u64(j, "first_touch_applied_bytes", w->first_touch_applied_bytes);
  json_close(j);
}

/* --status: what the daemon's ledger says of this process (null when the daemon does not serve it). */
static void put_daemon_process(struct json_writer *j, const struct daemon_process *p) {
  if (!p) {
    json_put_null(j, "daemon");
    return;
  }
  json_open_object(j, "daemon");
  json_put_u64(j, "collapsed_bytes", p->collapsed);
  json_put_u64(j, "kernel_collapsed_bytes", p->kernel_collapsed);
  put_share(j, "huge_after_1_pass_fraction", p->early_share);
  put_share(j, "huge_after_10_passes_fraction", p->late_share);
  json_put_u64(j, "recollapsed_bytes", p->recollapsed);
  json_put_u64(j, "undone_bytes", p->undone);
  json_put_bool(j, "backed_off", p->backed_off);
  json_put_u64(j, "backoff_passes_left", p->backoff_passes_left);
  json_put_string(j, "allocator", p->allocator[0] ? p->allocator : NULL);
  json_put_string(j, "advice", p->advice[0] ? p->advice : NULL);
  json_put_string(j, "last_action", p->last_action[0] ? p->last_action : NULL);
  json_put_string(j, "heat", p->heat[0] ? p->heat : NULL);
  json_close(j);
}

/* The memory gate: whether the pass may collapse, and why not. */
static void put_memory(struct json_writer *j, const struct agent *a) {
  json_open_object(j, "memory");
  json_put_bool(j, "allows_collapse", a->memory_open);
  if (a->available == UINT64_MAX) json_put_null(j, "available_bytes");
  else json_put_u64(j, "available_bytes", a->available);
  json_put_u64(j, "free_floor_bytes", a->config.free_floor);
  if (a->pressure.present) json_put_double(j, "pressure_some_avg10_fraction", a->pressure.some_avg10 / 100);
  else json_put_null(j, "pressure_some_avg10_fraction");
  json_put_double(j, "max_pressure_fraction", a->config.max_pressure / 100);
  json_put_string(j, "reason", a->memory_open ? NULL : a->memory_reason);
  json_close(j);
}

/* The processes that disabled THP themselves, which the agent leaves alone (the first few). */
static void put_thp_disabled(struct json_writer *j, const struct agent *a) {
  json_open_array(j, "thp_disabled");
  for (size_t i = 0; i < a->thp_disabled_count && i < AGENT_THP_DISABLED_SHOWN; i++) {
    json_open_object(j, NULL);
    json_put_i64(j, "pid", a->thp_disabled[i].pid);
    json_put_string(j, "comm", a->thp_disabled[i].comm);
    json_put_string(j, "reason", "the process disabled THP (prctl PR_SET_THP_DISABLE; systemd's MemoryTHP= sets it for a service)");
    json_close(j);
  }
  json_close(j);
}

/* One process of the table: its memory by class, what the agent did there and whether it lasted. */
/* What the agent's looks cost (docs/agent.md, "What a pass costs"): its CPU split into the collapses' and
 * the rest (measuring: walks, smaps, /proc; and its own upkeep), and what the looks read. */
static void put_cost(struct json_writer *j, const struct agent *a) {
  double cpu = agent_own_cpu_seconds();
  json_open_object(j, "cost");
  json_put_double(j, "collapse_cpu_seconds", a->collapse_cpu_seconds);
  json_put_double(j, "measure_cpu_seconds", cpu > a->collapse_cpu_seconds ? cpu - a->collapse_cpu_seconds : 0);
  json_put_u64(j, "walked_bytes", a->walked_bytes);
  json_put_u64(j, "measurements", a->measurements);
  json_put_u64(j, "smaps_reads", a->smaps_reads);
  json_put_double(j, "longest_pass_cpu_seconds", a->longest_pass_cpu);
  json_close(j);
}

/* One process's looks: what they read, and where its sweep is. */
static void put_looks(struct json_writer *j, const struct process_state *p) {
  json_open_object(j, "looks");
  json_put_u64(j, "plans", p->plans);
  json_put_u64(j, "measurements", p->measurements);
  json_put_u64(j, "smaps_reads", p->layout.smaps_reads);
  json_put_u64(j, "walked_bytes", p->walked_bytes);
  if (p->cursor) json_put_hex(j, "sweep_cursor", p->cursor);
  else json_put_null(j, "sweep_cursor");
  json_close(j);
}

/* The scheme of another owner that makes the process huge (the cut "damos"), or null. */
static void put_left_to_damos(struct json_writer *j, const struct process_state *p) {
  if (!p->left_to_damos) {
    json_put_null(j, "left_to_kernel");
    return;
  }
  json_open_object(j, "left_to_kernel");
  json_put_string(j, "cut", plan_cut_name(PLAN_CUT_DAMOS));
  json_put_string(j, "action", p->damos.action);
  json_put_u64(j, "kdamond", p->damos.kdamond);
  json_put_u64(j, "context", p->damos.context);
  json_put_u64(j, "scheme", p->damos.scheme);
  json_put_u64(j, "cut_bytes", p->collapsible);
  json_close(j);
}

static void put_process(struct json_writer *j, const struct agent *a, const struct process_state *p) {
  json_open_object(j, NULL);
  json_put_i64(j, "pid", p->pid);
  json_put_u64(j, "start_time_ticks", p->start_time);
  json_put_string(j, "comm", p->comm);
  json_put_u64(j, "resident_bytes", p->total.resident);
  json_put_u64(j, "huge_bytes", hugify_usage_huge(&p->total));
  json_put_fraction(j, "huge_fraction", hugify_usage_huge(&p->total), p->total.resident);
  json_open_object(j, "classes");
  for (int k = 0; k < HUGIFY_CLASS_COUNT; k++) {
    json_open_object(j, hugify_memory_class_name(k));
    json_put_u64(j, "resident_bytes", p->classes[k].resident);
    json_put_u64(j, "huge_bytes", hugify_usage_huge(&p->classes[k]));
    json_close(j);
  }
  json_close(j);
  json_put_u64(j, "collapsible_bytes", p->collapsible);
  json_put_u64(j, "collapsed_bytes", p->collapsed_bytes);
  json_put_u64(j, "kernel_collapsed_bytes", p->ledger.kernel_bytes);
  put_left_to_damos(j, p);
  json_put_string(j, "order", p->order[0] ? p->order : NULL);
  json_open_object(j, "failed_windows");
  for (size_t k = 0; k < FAILURE_KINDS && p->failures[k].reason[0]; k++)
    json_put_u64(j, p->failures[k].reason, p->failures[k].windows);
  json_close(j);
  json_put_string(j, "last_action", p->last_action[0] ? p->last_action : NULL);
  json_put_string(j, "heat", heat_signal_name(p->heat_signal));
  if (p->last_pause >= 0) json_put_double(j, "last_pause_seconds", p->last_pause);
  else json_put_null(j, "last_pause_seconds");
  if (p->last_action_time > 0) json_put_double(j, "last_collapse_time", p->last_action_time);
  else json_put_null(j, "last_collapse_time");
  put_lasting(j, a, p);
  put_looks(j, p);
  if (a->daemon.fresh) put_daemon_process(j, agent_daemon_process(&a->daemon, p->pid, p->start_time, p->comm));
  json_close(j);
}

void agent_print_json(const struct agent *a, FILE *out, const char *mode) {
  struct json_writer j;
  json_begin(&j, out, "hugify.agent/1");
  json_put_string(&j, "mode", mode);
  json_put_i64(&j, "agent_pid", getpid());
  json_put_i64(&j, "time_unix_seconds", (int64_t)measure_clock_seconds(CLOCK_REALTIME)); /* when written: its age */
  json_put_u64(&j, "passes", a->passes);
  json_put_bool(&j, "dry_run", a->config.dry_run);
  json_put_double(&j, "interval_seconds", a->config.interval);
  json_put_double(&j, "cpu_budget_fraction", a->config.cpu_budget);
  json_put_double(&j, "pass_cpu_ceiling_seconds", agent_pass_ceiling(a->config.cpu_budget, a->config.interval));
  json_put_double(&j, "min_present_fraction", a->config.min_present);
  put_memory(&j, a);
  json_put_double(&j, "cpu_seconds", agent_own_cpu_seconds());
  json_put_u64(&j, "collapsed_bytes", a->collapsed_bytes);
  json_put_u64(&j, "recollapsed_bytes", a->recollapsed_bytes);
  json_put_u64(&j, "bloat_bytes", a->bloat_bytes);
  json_put_u64(&j, "churn_backoffs", a->churn_backoffs);
  json_put_u64(&j, "budget_stops", a->budget_stops);
  json_put_u64(&j, "pass_ceiling_stops", a->pass_ceiling_stops);
  put_cost(&j, a);
  json_open_object(&j, "kernel");
  json_put_u64(&j, "collapsed_bytes", a->kernel_bytes);
  json_put_u64(&j, "thp_collapse_alloc", a->kernel_collapse_allocs);
  json_put_u64(&j, "damos_processes", a->damos_processes);
  json_put_u64(&j, "damos_huge_bytes", a->damos_huge_bytes);
  json_put_u64(&j, "damos_cut_bytes", a->damos_cut_bytes);
  json_close(&j);
  put_thp_disabled(&j, a);
  put_pauses(&j, &a->harm);
  put_heat(&j, a);
  if (a->daemon.tried) put_daemon(&j, &a->daemon, a->config.state_file);
  json_open_array(&j, "processes");
  for (size_t i = 0; i < a->process_count; i++)
    put_process(&j, a, &a->processes[i]);
  json_close(&j);
  json_end(&j);
}
