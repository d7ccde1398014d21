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
struct smaps_vma;

/* A process's mappings kept from one of the agent's plans to the next. /proc/PID/maps (no page walk: it costs
 * the number of mappings) says whether they are still those of the last smaps read (the same text), and
 * smaps (which walks every page table of the process: its cost is the process's memory) is read again only
 * when they are not, or after COLLAPSE_LAYOUT_REUSES plans (a madvise over a whole mapping changes its flags
 * and not its line in maps). Kept only where the walk says exactly which windows are huge (PAGEMAP_SCAN):
 * smaps' counts are then not needed again. */
struct collapse_layout {
  struct smaps_vma *vmas;   /* the last smaps read (malloc'd; collapse_layout_free) */
  long count;
  uint64_t maps_hash;       /* of /proc/PID/maps' text then */
  unsigned reuses;          /* plans that used it since */
  uint64_t smaps_reads;     /* in all, for the agent's figures */
  /* what the last read found new against the one before it (mappings, or parts of them: a heap that grew),
   * walked by the next plan wherever its sweep's cursor is; malloc'd, 0 when nothing or a first read */
  struct collapse_range { uint64_t start, end; } *fresh;
  size_t fresh_count;
};
#define COLLAPSE_LAYOUT_REUSES 30
void collapse_layout_free(struct collapse_layout *layout);

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
  /* The sweep (docs/agent.md, "What a pass costs"): with walk_limit, a plan walks part of the process: the
   * windows the ledger watches (collapsed in the last passes), DAMON's hot regions, and the windows from the
   * cursor on until walk_limit bytes of windows not huge already were read; the next plan goes on from where
   * this one stopped (and from the first window it planned and did not try, or held back as cold: those
   * wait). The figures after the calls are then the kernel's answers, not a new read of smaps. Not with
   * soft-dirty heat (each plan clears every window's bits) nor without PFNs (which windows are huge is
   * then apportioned from the mapping's whole smaps counts). */
  struct collapse_layout *layout;   /* in/out: the mappings kept across plans (NULL: smaps read every plan) */
  uint64_t walk_limit;              /* in: bytes of windows not huge read from the cursor on (0: every window) */
  uint64_t cursor;                  /* in: where the sweep is (0: a new one); out: where the next plan goes on
                                       (0: this one reached the end of the process) */
  bool waiting;                     /* out: windows of the slice wait (cold, probe, budget, untried): the cursor
                                       stays at the first of them */
  bool walked_whole;                /* out: this plan's walk read every window of the process */
  uint64_t walked_bytes;            /* out: bytes of windows the plan's walk read */
};

/* hugify_collapse with `policy` (NULL: hugify_collapse itself: khugepaged's max_ptes_none as the guard,
 * address order, no budget). report->attempted counts the windows actually sent to the kernel. */
int collapse_with_policy(pid_t pid, const struct hugify_collapse_opts *opts, struct collapse_policy *policy,
                         struct hugify_collapse_report *report);

/* Bloat, the one definition (the agent's churn ledger and the harm ledger of `collapse` use it): the bytes
 * a collapse of a window with present_pages base pages present zero-fills inside the new huge page. */
uint64_t collapse_window_bloat(uint32_t present_pages, uint64_t window_bytes, uint64_t page_bytes);

#endif
