/* SPDX-License-Identifier: MIT */
/* planner.c - the agent's one planner (see planner.h): the cut of every window, the order of the kept
 * ones, the budget, and whether a process is planned this pass. */
#include "planner.h"

#include <stdlib.h>

const char *plan_cut_name(enum plan_cut cut) {
  switch (cut) {
  case PLAN_KEPT: return "kept";
  case PLAN_CUT_OPT_OUT: return "opt_out";
  case PLAN_CUT_UNKNOWN: return "unknown";
  case PLAN_CUT_KERNEL: return "kernel";
  case PLAN_CUT_HUGE: return "huge";
  case PLAN_CUT_EMPTY: return "empty";
  case PLAN_CUT_SPARSE: return "sparse";
  case PLAN_CUT_UNWRITTEN: return "unwritten";
  case PLAN_CUT_HELD: return "held";
  case PLAN_CUT_CHURN: return "churn";
  case PLAN_CUT_COLD: return "cold";
  case PLAN_CUT_PROBE: return "probe";
  case PLAN_CUT_BUDGET: return "budget";
  case PLAN_CUT_DAMOS: return "damos";
  case PLAN_CUT_COUNT: break;
  }
  return "unknown";
}

/* A window that pays: it is hot (heat is known). It goes first, the others wait while such windows are
 * planned, and it is collapsed even while its process is backed off for churn. "Its collapse lasted
 * before" was tried and measured on a churning Redis: jemalloc's decay purges those windows too once churn
 * starts, so it only re-collapsed more (docs/agent.md, "A churning Redis under the planner"). */
static bool pays(const struct agent_window *w) {
  return w->heat > 0;
}

/* The cut that does not depend on the other windows: facts, the bloat guard, the ledger, the process's
 * churn back-off. */
static enum plan_cut cut_of(const struct agent_window *w, const struct plan_input *in) {
  if (w->facts & PLAN_FACT_UNKNOWN) return PLAN_CUT_UNKNOWN;
  if (w->huge_pages > 0) return (w->facts & PLAN_FACT_KERNEL) ? PLAN_CUT_KERNEL : PLAN_CUT_HUGE;
  if (w->present_pages == 0) return PLAN_CUT_EMPTY;
  double exact = in->min_present * (double)in->pmd_pages;
  uint32_t needed = (uint32_t)exact;
  if ((double)needed < exact) needed++; /* round up: "half" of 512 pages is 256, of 511 is 256 */
  if (w->present_pages < needed) return PLAN_CUT_SPARSE;
  if (w->facts & PLAN_FACT_UNWRITTEN) return PLAN_CUT_UNWRITTEN;
  if (w->ledger == PLAN_LEDGER_HELD) return PLAN_CUT_HELD;
  if (in->process.churn_backed_off && !pays(w)) return PLAN_CUT_CHURN;
  return PLAN_KEPT;
}

/* Where a window's heat puts it: hot (known, above 0), then unknown (no region measured it, or only regions
 * that also hold a huge page: heat.h), then cold (known to be 0: the signal says it pays nothing). */
static int heat_rank(int32_t heat) { return heat > 0 ? 0 : heat < 0 ? 1 : 2; }

/* The order (docs/agent.md, "The order"): hot windows first, hotter first; then those of unknown heat; then
 * the cold ones; within each, the windows whose collapses lasted before; then densest first; then by
 * address, so that equal windows stay contiguous and go to the kernel in few calls. */
static int compare_agent(const void *a, const void *b) {
  const struct agent_window *x = a, *y = b;
  int xr = heat_rank(x->heat), yr = heat_rank(y->heat);
  if (xr != yr) return xr < yr ? -1 : 1;
  if (x->heat != y->heat) return x->heat > y->heat ? -1 : 1;
  bool xl = x->ledger == PLAN_LEDGER_LASTED, yl = y->ledger == PLAN_LEDGER_LASTED;
  if (xl != yl) return xl ? -1 : 1;
  if (x->present_pages != y->present_pages) return x->present_pages > y->present_pages ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}

static int compare_address(const void *a, const void *b) {
  const struct agent_window *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

void planner_plan(struct agent_window *windows, size_t count, const struct plan_input *in,
                  struct plan_result *result) {
  *result = (struct plan_result){0};
  result->cut_bytes[PLAN_CUT_OPT_OUT] = in->opt_out_bytes;
  bool hot_planned = false;
  for (size_t i = 0; i < count; i++) {
    struct agent_window *w = &windows[i];
    w->cut = (uint8_t)cut_of(w, in);
    if (w->heat >= 0) result->heat_used = true;
    hot_planned |= w->cut == PLAN_KEPT && pays(w);
  }
  /* While hot windows are planned, the rest waits: a pass's budget goes to memory that pays, and the cold
   * and unknown windows get theirs at a pass that plans nothing hot (so an idle process, all cold, is
   * still collapsed), or after the hot ones once they have waited long enough (cold_turn: a hot window the
   * kernel refuses every pass does not hold them back for good) */
  bool wait = hot_planned && in->order == PLAN_ORDER_AGENT && !in->process.cold_turn;
  size_t kept = 0;
  for (size_t i = 0; i < count; i++) {
    struct agent_window w = windows[i];
    if (w.cut == PLAN_KEPT && wait && !pays(&w)) w.cut = PLAN_CUT_COLD;
    if (w.cut == PLAN_KEPT) { /* the kept ones gather at the front, the cut ones keep their place behind */
      windows[i] = windows[kept];
      windows[kept++] = w;
    } else {
      windows[i] = w;
    }
  }
  if (kept > 1)
    qsort(windows, kept, sizeof *windows, in->order == PLAN_ORDER_AGENT ? compare_agent : compare_address);
  /* the budget, in the order: a probing process gets probe_windows unproven windows (those that pay are
   * not counted), then the pass's window and byte limits */
  size_t planned = 0, unproven = 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < kept; i++) {
    struct agent_window *w = &windows[i];
    bool probe = in->process.probing && !pays(w);
    if (probe && unproven >= in->budget.probe_windows) w->cut = PLAN_CUT_PROBE;
    else if (planned >= in->budget.max_windows || bytes + in->window_bytes > in->budget.max_bytes)
      w->cut = PLAN_CUT_BUDGET;
    else {
      unproven += probe;
      planned++;
      bytes += in->window_bytes;
    }
  }
  /* the cut ones of the budget leave the front; the planned ones keep their order (everything between at
   * and i is cut, so a swap moves only a cut window) */
  size_t at = 0;
  for (size_t i = 0; i < kept; i++) {
    if (windows[i].cut != PLAN_KEPT) continue;
    struct agent_window w = windows[i];
    windows[i] = windows[at];
    windows[at++] = w;
  }
  result->kept = at;
  for (size_t i = 0; i < count; i++) result->cut_bytes[windows[i].cut] += in->window_bytes;
}

const char *planner_order_name(const struct plan_input *in, const struct plan_result *result) {
  if (in->order == PLAN_ORDER_ADDRESS) return "address";
  if (!result->heat_used) return "densest first (no heat signal)";
  return "hot first (the rest waits while hot windows are planned), then lasting, then densest first";
}

/* ---- whether a process is planned this pass --------------------------------------------------------- */

bool planner_memory_changed(const struct plan_change *c) {
  uint64_t faulted = c->faults_now > c->faults_then ? c->faults_now - c->faults_then : 0;
  uint64_t moved = c->rss_now > c->rss_then ? c->rss_now - c->rss_then : c->rss_then - c->rss_now;
  uint64_t threshold = c->threshold_bytes ? c->threshold_bytes : 1;
  uint64_t pages = c->page_bytes ? (threshold + c->page_bytes - 1) / c->page_bytes : threshold;
  return faulted >= pages || moved >= threshold;
}

enum plan_step planner_before_measure(const struct plan_visit *v) {
  bool watching = v->may_collapse && v->watching;
  /* A process with work left (its sweep goes on, its last collapses are judged, its last measurement found
   * collapsible memory no plan has gone through, or it changed and had collapsible memory or is big) is
   * planned without a measurement: the plan's walk reads only what the pass can collapse, where a
   * measurement (smaps) reads all of it. It is measured first when it never was, when its figures are
   * PLAN_REFRESH_PASSES passes old, and while it is backed off after failures (the measurement then says
   * whether to try); a small one that changed with nothing collapsible is measured (as cheap as a plan, and
   * it says whether there is anything to plan). */
  bool work_left = v->sweeping || watching || (v->collapsible && !v->idle_recorded) ||
                   (v->changed && (v->collapsible || v->big));
  if (v->measured && v->may_collapse && !v->failures_backoff && work_left && v->unmeasured_passes < PLAN_REFRESH_PASSES)
    return PLAN_STEP_PLAN;
  /* A quiet process (unchanged, and nothing left to do last time) costs one status and stat read per pass:
   * it is measured again only every PLAN_QUIET_PASSES passes, so many idle processes stay cheap. So is one
   * that changed while nothing may be collapsed (the memory gate is closed): its figures wait for that. */
  bool nothing_to_do = (!v->collapsible || v->idle_recorded || !v->may_collapse) && !watching;
  if (v->measured && (!v->changed || !v->may_collapse) && nothing_to_do && v->unmeasured_passes < PLAN_QUIET_PASSES)
    return PLAN_STEP_QUIET;
  return PLAN_STEP_MEASURE;
}

enum plan_step planner_after_measure(const struct plan_visit *v, const char **why) {
  bool watching = v->may_collapse && v->watching;
  *why = NULL;
  if (!v->may_collapse || (!v->collapsible && !watching)) return PLAN_STEP_MEASURE;
  if (v->failures_backoff) {
    *why = "backing off after failed passes";
    return PLAN_STEP_MEASURE;
  }
  if (v->idle && !watching) return PLAN_STEP_MEASURE; /* planned before: nothing to do */
  return PLAN_STEP_PLAN;
}
