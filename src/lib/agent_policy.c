/* SPDX-License-Identifier: MIT */
/* agent_policy.c - the pure decisions of `hugify agent` (see agent_policy.h). */
#include "agent_policy.h"
#include "array.h"

#include "hugify.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- which processes ---------------------------------------------------------------------------- */

bool agent_cgroup_matches(const char *selector, const char *path) {
  size_t n = strlen(selector);
  while (n > 1 && selector[n - 1] == '/') n--; /* "/a/b/" is "/a/b" */
  if (n == 1 && selector[0] == '/') return path[0] == '/';
  return strncmp(selector, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool matches_positive(const struct agent_selectors *s, const struct agent_process *p) {
  for (size_t i = 0; i < s->pid_count; i++)
    if (s->pids[i] == p->pid) return true;
  for (size_t i = 0; i < s->uid_count; i++)
    if (s->uids[i] == p->uid) return true;
  for (size_t i = 0; i < s->comm_count; i++)
    if (strcmp(s->comms[i], p->comm) == 0) return true;
  for (size_t i = 0; i < s->exe_count; i++)
    if (p->exe[0] && strcmp(s->exes[i], p->exe) == 0) return true;
  for (size_t i = 0; i < s->cgroup_count; i++)
    if (p->cgroup[0] && agent_cgroup_matches(s->cgroups[i], p->cgroup)) return true;
  return false;
}

enum agent_selection agent_select(const struct agent_selectors *s, const struct agent_process *p) {
  if (p->kernel_thread) return AGENT_KERNEL_THREAD;
  for (size_t i = 0; i < s->exclude_comm_count; i++)
    if (strcmp(s->exclude_comms[i], p->comm) == 0) return AGENT_EXCLUDED;
  size_t positive = s->pid_count + s->uid_count + s->comm_count + s->exe_count + s->cgroup_count;
  if (positive > 0 && !matches_positive(s, p)) return AGENT_NOT_MATCHED;
  if (p->thp_disabled == 1) return AGENT_THP_DISABLED;
  if (p->rss < s->min_rss) return AGENT_TOO_SMALL;
  return AGENT_SELECTED;
}

bool agent_selects_only_pids(const struct agent_selectors *s) {
  return s->pid_count > 0 && s->uid_count + s->comm_count + s->exe_count + s->cgroup_count == 0;
}

const char *agent_selection_name(enum agent_selection selection) {
  switch (selection) {
  case AGENT_SELECTED: return "selected";
  case AGENT_NOT_MATCHED: return "not_matched";
  case AGENT_EXCLUDED: return "excluded";
  case AGENT_THP_DISABLED: return "thp_disabled";
  case AGENT_TOO_SMALL: return "too_small";
  case AGENT_KERNEL_THREAD: return "kernel_thread";
  }
  return "unknown";
}

/* ---- the kernel's own schemes -------------------------------------------------------------------- */

static bool damos_makes_huge(const struct probe_damon_scheme *s) {
  bool action = !strcmp(s->action, "collapse") || !strcmp(s->action, "hugepage");
  bool virtual_addresses = !strcmp(s->operations, "vaddr") || !strcmp(s->operations, "fvaddr");
  return action && virtual_addresses && !strcmp(s->state, "on");
}

const struct probe_damon_scheme *agent_damos_scheme_of(const struct probe_damon_scheme *schemes, size_t count,
                                                       int own_kdamond, pid_t pid) {
  for (size_t i = 0; i < count; i++) {
    const struct probe_damon_scheme *s = &schemes[i];
    if ((own_kdamond >= 0 && s->kdamond == (unsigned)own_kdamond) || !damos_makes_huge(s)) continue;
    for (unsigned t = 0; t < s->target_count && t < PROBE_DAMON_TARGETS_MAX; t++)
      if (s->targets[t] == pid) return s;
  }
  return NULL;
}

/* ---- CPU budget --------------------------------------------------------------------------------- */

void agent_budget_init(struct agent_budget *b, double fraction, double window_seconds, double initial_seconds,
                       double now) {
  memset(b, 0, sizeof *b);
  b->fraction = fraction;
  b->window_seconds = window_seconds;
  b->tokens = fraction * initial_seconds;
  b->last = now;
}

void agent_budget_refill(struct agent_budget *b, double now) {
  if (now > b->last) {
    b->tokens += b->fraction * (now - b->last);
    double cap = b->fraction * b->window_seconds;
    if (b->tokens > cap) b->tokens = cap;
  }
  b->last = now;
}

void agent_budget_charge(struct agent_budget *b, double cpu_seconds) {
  if (cpu_seconds <= 0) return;
  b->tokens -= cpu_seconds;
  b->spent += cpu_seconds;
}

bool agent_budget_allows(const struct agent_budget *b) { return b->tokens > 0; }

double agent_pass_ceiling(double fraction, double interval_seconds) {
  double share = fraction * interval_seconds;
  return share > AGENT_PASS_CPU_CEILING ? share : AGENT_PASS_CPU_CEILING;
}

uint64_t agent_walk_limit(double cpu_available, double cpu_per_window, uint64_t window_bytes) {
  if (window_bytes == 0) window_bytes = 1;
  double per_window = cpu_per_window > 0 ? cpu_per_window : AGENT_WINDOW_CPU_GUESS;
  double windows = cpu_available > 0 ? cpu_available / per_window * AGENT_WALK_SLACK : 0;
  uint64_t least = (AGENT_WALK_MIN_BYTES + window_bytes - 1) / window_bytes;
  uint64_t most = UINT64_MAX / window_bytes;
  uint64_t count = windows >= (double)most ? most : (uint64_t)windows;
  return (count > least ? count : least) * window_bytes;
}

enum agent_work agent_work_word(const struct agent_budget *budget, double pass_cpu, double ceiling, bool stop_requested) {
  if (stop_requested) return AGENT_WORK_STOPPED;
  if (budget && !agent_budget_allows(budget)) return AGENT_WORK_BUDGET_SPENT;
  if (ceiling > 0 && pass_cpu >= ceiling) return AGENT_WORK_PASS_CEILING;
  return AGENT_WORK_GO;
}

const char *agent_work_phrase(enum agent_work word) {
  static const char *const phrases[] = {[AGENT_WORK_GO] = "", [AGENT_WORK_STOPPED] = "stopped",
                                        [AGENT_WORK_BUDGET_SPENT] = "budget spent",
                                        [AGENT_WORK_PASS_CEILING] = "pass CPU ceiling reached"};
  return (size_t)word < sizeof phrases / sizeof *phrases ? phrases[word] : "";
}

void agent_harm_record(struct agent_harm *harm, const struct hugify_collapse_report *report) {
  if (report->longest_call > harm->longest_call) harm->longest_call = report->longest_call;
}

/* ---- memory budget ------------------------------------------------------------------------------ */

bool agent_memory_allows(const struct agent_memory_limits *limits, uint64_t available,
                         const struct psi_pressure *pressure, char *reason, size_t cap) {
  if (available < limits->free_floor) {
    snprintf(reason, cap, "available memory %llu MiB is below the floor of %llu MiB",
             (unsigned long long)(available >> 20), (unsigned long long)(limits->free_floor >> 20));
    return false;
  }
  if (pressure && pressure->present && pressure->some_avg10 > limits->pressure_limit) {
    snprintf(reason, cap, "memory pressure (some avg10) %.2f %% is above the limit of %.2f %%",
             pressure->some_avg10, limits->pressure_limit);
    return false;
  }
  if (cap) reason[0] = '\0';
  return true;
}

/* ---- per-process back-off ----------------------------------------------------------------------- */

void agent_backoff_record(struct agent_backoff *b, bool progress, bool failed, double now, double interval,
                          double max_seconds) {
  if (progress || !failed) {
    b->failures = 0;
    b->next_try = 0;
    return;
  }
  b->failures++;
  double wait = interval * (double)(UINT64_C(1) << (b->failures > 31 ? 30 : b->failures - 1));
  if (wait > max_seconds) wait = max_seconds;
  b->next_try = now + wait;
}

bool agent_backoff_allows(const struct agent_backoff *b, double now) { return now >= b->next_try; }

/* ---- whether collapses last --------------------------------------------------------------------- */

void agent_ledger_init(struct agent_ledger *l, uint64_t window_bytes, uint64_t max_backoff_passes) {
  memset(l, 0, sizeof *l);
  l->window_bytes = window_bytes;
  l->max_backoff_passes = max_backoff_passes;
  l->last_lasting_share = -1;
}

void agent_ledger_free(struct agent_ledger *l) {
  free(l->windows);
  free(l->small);
  free(l->next_small);
  l->windows = NULL;
  l->small = l->next_small = NULL;
  l->count = l->cap = l->small_count = l->next_count = l->small_cap = l->next_cap = 0;
  l->look_pass = 0;
}

/* Passes to wait after the n-th consecutive undone collapse (or strike): AGENT_UNDONE_PASSES, doubling. */
static uint64_t backoff_passes(const struct agent_ledger *l, unsigned n) {
  uint64_t passes = (uint64_t)AGENT_UNDONE_PASSES << (n > 20 ? 20 : n - 1);
  return passes < l->max_backoff_passes ? passes : l->max_backoff_passes;
}

/* Index of the first window at or after start. */
static size_t ledger_position(const struct agent_ledger *l, uint64_t start) {
  size_t lo = 0, hi = l->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (l->windows[mid].start < start) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static struct agent_ledger_window *ledger_find(const struct agent_ledger *l, uint64_t start) {
  size_t at = ledger_position(l, start);
  return at < l->count && l->windows[at].start == start ? &l->windows[at] : NULL;
}

static bool was_small(const struct agent_ledger *l, uint64_t start) {
  size_t lo = 0, hi = l->small_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (l->small[mid] < start) lo = mid + 1;
    else hi = mid;
  }
  return lo < l->small_count && l->small[lo] == start;
}

/* Judge the agent's latest collapse of window w at this look (undone, or lasted). */
static void judge_window(struct agent_ledger *l, struct agent_ledger_window *w, uint64_t pass, bool huge) {
  uint64_t age = pass - w->collapsed_pass, bytes = l->window_bytes;
  if (!w->checked_early) {
    w->checked_early = true;
    l->early_checked += bytes;
    if (huge) l->early_huge += bytes;
  }
  if (age >= AGENT_LATE_PASSES && !w->checked_late) {
    w->checked_late = true;
    l->late_checked += bytes;
    if (huge) l->late_huge += bytes;
  }
  if (!w->decided && !huge) { /* undone: hold the window back, longer each time */
    w->decided = true;
    w->undone++;
    l->undone_bytes += bytes;
    l->pass_decided += bytes;
    w->retry_pass = pass + backoff_passes(l, w->undone);
  } else if (!w->decided && age > AGENT_UNDONE_PASSES) { /* lasted */
    w->decided = true;
    w->undone = 0;
    l->pass_decided += bytes;
    l->pass_lasted += bytes;
  }
}

bool agent_ledger_observe(struct agent_ledger *l, uint64_t pass, struct agent_window *window, bool huge) {
  struct agent_ledger_window *w = ledger_find(l, window->start);
  /* the kernel's: huge now, present and not huge at the last look, and not collapsed by the agent since */
  if (huge && l->small_pass && was_small(l, window->start) && !(w && w->collapsed_pass >= l->small_pass)) {
    window->facts |= PLAN_FACT_KERNEL;
    l->kernel_bytes += l->window_bytes;
  }
  bool ok = true;
  if (!l->look_pass) l->look_pass = pass;
  if (!huge && window->present_pages > 0 && l->next_count < AGENT_LEDGER_MAX) {
    if (ARRAY_GROW(l->next_small, l->next_count + 1, l->next_cap) == 0) l->next_small[l->next_count++] = window->start;
    else ok = false;
  }
  window->ledger = PLAN_LEDGER_NONE;
  if (!w) return ok;
  w->seen_pass = pass;
  if (pass > w->collapsed_pass) judge_window(l, w, pass, huge);
  if (pass < w->retry_pass) window->ledger = PLAN_LEDGER_HELD;
  else if (!w->decided) window->ledger = PLAN_LEDGER_PENDING;
  else window->ledger = w->undone ? PLAN_LEDGER_UNDONE : PLAN_LEDGER_LASTED;
  return ok;
}

bool agent_ledger_collapsed(struct agent_ledger *l, uint64_t pass, uint64_t start) {
  struct agent_ledger_window *w = ledger_find(l, start);
  if (!w) {
    if (l->count == AGENT_LEDGER_MAX) { /* full: forget the window collapsed longest ago */
      size_t oldest = 0;
      for (size_t i = 1; i < l->count; i++)
        if (l->windows[i].collapsed_pass < l->windows[oldest].collapsed_pass) oldest = i;
      memmove(&l->windows[oldest], &l->windows[oldest + 1], (l->count - oldest - 1) * sizeof *l->windows);
      l->count--;
    }
    if (ARRAY_GROW(l->windows, l->count + 1, l->cap) != 0) return false;
    size_t at = ledger_position(l, start);
    memmove(&l->windows[at + 1], &l->windows[at], (l->count - at) * sizeof *l->windows);
    l->count++;
    w = &l->windows[at];
    memset(w, 0, sizeof *w);
    w->start = start;
  } else if (w->collapses > 0) {
    l->recollapsed_bytes += l->window_bytes;
  }
  w->collapses++;
  w->collapsed_pass = w->seen_pass = l->last_collapse_pass = pass;
  w->checked_early = w->checked_late = w->decided = false;
  l->collapsed_bytes += l->window_bytes;
  return true;
}

static int compare_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The look under way ends when it saw every window (scanned): its windows found present and not huge become
 * the last look's (sorted, each once: a sweep sees the windows it watches at every pass). A look that did not
 * see every window goes on: a sweep's next walk adds to it. */
static void end_look(struct agent_ledger *l, uint64_t pass, bool scanned) {
  if (!scanned) return;
  uint64_t *small = l->small;
  size_t cap = l->small_cap;
  l->small = l->next_small, l->small_cap = l->next_cap, l->small_count = l->next_count;
  l->next_small = small, l->next_cap = cap;
  if (l->small_count > 1) qsort(l->small, l->small_count, sizeof *l->small, compare_u64);
  size_t unique = l->small_count ? 1 : 0;
  for (size_t i = 1; i < l->small_count; i++)
    if (l->small[i] != l->small[unique - 1]) l->small[unique++] = l->small[i];
  l->small_count = unique;
  l->small_pass = l->look_pass ? l->look_pass : pass;
  l->next_count = 0;
  l->look_pass = 0;
}

bool agent_ledger_judge(struct agent_ledger *l, uint64_t pass, bool scanned) {
  uint64_t look = l->look_pass ? l->look_pass : pass; /* the windows seen since it began are mapped */
  end_look(l, pass, scanned);
  size_t kept = 0;
  l->backed_off_bytes = 0;
  for (size_t i = 0; i < l->count; i++) {
    if (scanned && l->windows[i].seen_pass < look) continue; /* unmapped: nothing left to judge */
    if (l->windows[i].retry_pass > pass) l->backed_off_bytes += l->window_bytes;
    l->windows[kept++] = l->windows[i];
  }
  l->count = kept;
  bool backed_off = false;
  if (l->pass_decided >= AGENT_LASTING_MIN_WINDOWS * l->window_bytes) {
    l->last_lasting_share = (double)l->pass_lasted / (double)l->pass_decided;
    if (l->last_lasting_share < AGENT_LASTING_SHARE) {
      l->churn_strikes++;
      l->resume_pass = pass + backoff_passes(l, l->churn_strikes);
      backed_off = true;
    } else {
      l->churn_strikes = 0;
    }
  }
  l->pass_decided = l->pass_lasted = 0;
  return backed_off;
}

bool agent_ledger_allows(const struct agent_ledger *l, uint64_t pass) { return pass >= l->resume_pass; }

struct plan_process agent_ledger_process(const struct agent_ledger *l, uint64_t pass) {
  return (struct plan_process){.churn_backed_off = !agent_ledger_allows(l, pass), .probing = l->churn_strikes > 0,
                               .cold_turn = l->cold_waiting_since > 0 &&
                                            pass >= l->cold_waiting_since + AGENT_COLD_WAIT_PASSES};
}

void agent_ledger_planned(struct agent_ledger *l, uint64_t pass, bool cold_waited) {
  if (!cold_waited) l->cold_waiting_since = 0;
  else if (!l->cold_waiting_since) l->cold_waiting_since = pass ? pass : 1;
}

bool agent_ledger_watching(const struct agent_ledger *l, uint64_t pass) {
  if (!l->collapsed_bytes || pass <= l->last_collapse_pass) return false;
  uint64_t age = pass - l->last_collapse_pass;
  return age <= AGENT_UNDONE_PASSES + 1 || age == AGENT_LATE_PASSES; /* + 1: the look that finds it lasted */
}

static double share_of(uint64_t part, uint64_t whole) { return whole ? (double)part / (double)whole : -1; }
double agent_ledger_early_share(const struct agent_ledger *l) { return share_of(l->early_huge, l->early_checked); }
double agent_ledger_late_share(const struct agent_ledger *l) { return share_of(l->late_huge, l->late_checked); }
