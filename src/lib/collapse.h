/* SPDX-License-Identifier: MIT */
/* collapse.h - hugify_collapse with a policy, for `hugify agent`: its own bloat guard, the planner's
 * window order and cut (planner.h: across the whole process), and a budget asked before every call into
 * the kernel. collapse.c gathers the windows' signals and executes the plan. Not exported. */
#ifndef HUGIFY_COLLAPSE_H
#define HUGIFY_COLLAPSE_H

#include <stdbool.h>
#include <sys/types.h>

#include "hugify.h"
#include "planner.h"

struct agent_ledger;
struct heat_snapshot;
struct pause_histogram;

struct collapse_policy {
  double min_present;               /* share of a window's pages that must be present (0..1) */
  struct agent_ledger *ledger;      /* the agent's memory of its collapses in this process (NULL: none): the
                                       plan's walk judges them and skips backed-off windows; collapses are
                                       recorded in it */
  uint64_t pass;                    /* the agent's pass, for the ledger */
  bool (*keep_going)(void *context);/* asked before every kernel call; false ends the pass (NULL: never) */
  void *context;
  bool stopped;                     /* out: keep_going ended the pass before every window was tried */
  uint64_t planned;                 /* out: bytes in windows the policy chose (report->attempted: asked) */
  uint64_t backed_off;              /* out: bytes of windows held back for churn (plan cuts held + churn) */
  bool scanned;                     /* out: PAGEMAP_SCAN saw every window of every eligible mapping */
  int allocator;                    /* out: enum allocator_kind, from the mapped libraries */
  bool backed_off_now;              /* out: the ledger's judgement of this pass backed the process off */
  struct plan_result plan;          /* out: the planner's cut of every window, in bytes per reason */
  const char *order;                /* out: how the planner ranked (planner_order_name) */
  struct pause_histogram *pauses;   /* each call's pause is added here (NULL: none) */
  const struct heat_snapshot *heat; /* the process's access heat (heat.h; NULL: no signal, densest first):
                                       each window's agent_window.heat is heat_of() it */
};

/* hugify_collapse with `policy` (NULL: hugify_collapse itself: khugepaged's max_ptes_none as the guard,
 * address order, no budget). report->attempted counts the windows actually sent to the kernel. */
int collapse_with_policy(pid_t pid, const struct hugify_collapse_opts *opts, struct collapse_policy *policy,
                         struct hugify_collapse_report *report);

/* Bloat, the one definition (the agent's churn ledger and the harm ledger of `collapse` use it): the bytes
 * a collapse of a window with present_pages base pages present zero-fills inside the new huge page. */
uint64_t collapse_window_bloat(uint32_t present_pages, uint64_t window_bytes, uint64_t page_bytes);

#endif
