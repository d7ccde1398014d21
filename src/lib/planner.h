/* SPDX-License-Identifier: MIT */
/* planner.h - the agent's one planner: which 2 MiB windows of a process are collapsed, in which order,
 * and why every other one is not; and whether a process is planned at all this pass. Pure functions over
 * the signals the caller gathered (collapse.c's pagemap walk, the ledger of agent_policy.c, the heat
 * source, the daemon's per-process state in src/cli/agent/agent_pass.c): no I/O, no clock. A change of order
 * is a change of this file, tests/unit/planner.cpp and the one paragraph of docs/agent.md ("The order")
 * that states it. Not exported. */
#ifndef HUGIFY_PLANNER_H
#define HUGIFY_PLANNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the ledger (agent_policy.h) knows of a window: the agent's own history with it. */
enum plan_ledger_state {
  PLAN_LEDGER_NONE = 0,  /* the agent never collapsed it (or forgot it) */
  PLAN_LEDGER_PENDING,   /* collapsed, not judged yet */
  PLAN_LEDGER_LASTED,    /* its last collapse lasted (still huge AGENT_UNDONE_PASSES passes after) */
  PLAN_LEDGER_UNDONE,    /* its last collapse was undone (split within AGENT_UNDONE_PASSES); may be retried */
  PLAN_LEDGER_HELD,      /* undone, and held back by its own back-off until a later pass */
};

/* Facts of a window (bits of agent_window.facts). */
#define PLAN_FACT_UNKNOWN 0x01u /* its presence could not be read: a collapse might fill it with zeroes */
#define PLAN_FACT_KERNEL  0x02u /* became huge since the last look without the agent: khugepaged's */
#define PLAN_FACT_SHARED  0x04u /* shared memory (shmem: shared anonymous, SysV, memfd, tmpfs) */
#define PLAN_FACT_FILE    0x08u /* a file's pages (tmpfs or memfd: shmem with a name) */
#define PLAN_FACT_UNWRITTEN 0x20u /* soft-dirty tracking write-protected it and nothing wrote since: the kernel
                                     refuses to collapse a window with no writable page (heat.h) */

/* Why a window is not in the plan (agent_window.cut). */
enum plan_cut {
  PLAN_KEPT = 0,     /* in the plan */
  PLAN_CUT_OPT_OUT,  /* the program's own decision (MADV_NOHUGEPAGE, PR_SET_THP_DISABLE except advised...) */
  PLAN_CUT_UNKNOWN,  /* presence unknown */
  PLAN_CUT_KERNEL,   /* huge already, made so by the kernel since the last look (costs the agent nothing) */
  PLAN_CUT_HUGE,     /* huge already */
  PLAN_CUT_EMPTY,    /* no page present */
  PLAN_CUT_SPARSE,   /* fewer pages present than min_present (the bloat guard) */
  PLAN_CUT_UNWRITTEN,/* not written since soft-dirty tracking write-protected it (cold, and not collapsible) */
  PLAN_CUT_HELD,     /* its collapse was undone: held back by its own back-off */
  PLAN_CUT_CHURN,    /* the process is backed off for churn and the window is not one that pays */
  PLAN_CUT_COLD,     /* not hot (cold, or of unknown heat) while hot windows are planned: waits for a pass
                        with none */
  PLAN_CUT_PROBE,    /* beyond the probe's window limit (a process with churn strikes) */
  PLAN_CUT_BUDGET,   /* beyond the pass's window or byte budget */
  PLAN_CUT_DAMOS,    /* the process is another owner's DAMOS collapse or hugepage scheme's target: the kernel's
                        (agent_damos_scheme_of; the process is not planned, its collapsible bytes cut) */
  PLAN_CUT_COUNT
};
/* "kept", "opt_out", "unknown", "kernel", "huge", "empty", "sparse", "unwritten", "held", "churn", "cold",
 * "probe", "budget", "damos". */
const char *plan_cut_name(enum plan_cut cut);

/* One 2 MiB-aligned window of an eligible mapping, with every signal gathered for it. */
struct agent_window {
  uint64_t start;
  uint32_t present_pages;  /* base pages present (huge ones not counted) */
  uint32_t huge_pages;     /* base pages' worth mapped by a huge page (pmd_pages when already huge) */
  int32_t heat;            /* access heat from the heat source: -1 unknown, 0 cold, higher = hotter */
  uint8_t ledger;          /* enum plan_ledger_state */
  uint8_t facts;           /* PLAN_FACT_* */
  uint8_t cut;             /* out: enum plan_cut */
};

enum plan_order {
  PLAN_ORDER_ADDRESS = 0,  /* `hugify collapse`: every window in address order, no budget */
  PLAN_ORDER_AGENT,        /* the agent's order (planner.c: the one statement of it) */
};

/* The process as a whole, from the ledger. */
struct plan_process {
  bool churn_backed_off;   /* its collapses mostly did not last: backed off now (agent_ledger_allows false) */
  bool probing;            /* it has churn strikes: unproven windows go in small probes */
  bool cold_turn;          /* its cold windows waited long enough for hot ones: this pass they go after them */
};

struct plan_budget {
  size_t max_windows;      /* SIZE_MAX: none */
  uint64_t max_bytes;      /* UINT64_MAX: none */
  size_t probe_windows;    /* unproven windows per pass while probing (AGENT_PROBE_WINDOWS) */
};

struct plan_input {
  enum plan_order order;
  uint32_t pmd_pages;      /* base pages per window */
  uint64_t window_bytes;
  double min_present;      /* share of a window's pages that must be present (0..1) */
  struct plan_process process;
  struct plan_budget budget;
  uint64_t opt_out_bytes;  /* the windows the program excluded (vma_opt_out, not overridden): cut as opt_out
                              without being listed (a sanitizer's shadow is terabytes of them) */
};

struct plan_result {
  size_t kept;                          /* windows[0..kept) are the plan, in order */
  uint64_t cut_bytes[PLAN_CUT_COUNT];   /* bytes per reason (cut_bytes[PLAN_KEPT]: planned) */
  bool heat_used;                       /* some window's heat was known: the order ranked on it */
};

/* Plan: every window gets its cut (PLAN_KEPT or a reason); the kept ones come first, in the order, the cut
 * ones after them in no promised order. windows may be NULL when count is 0. */
void planner_plan(struct agent_window *windows, size_t count, const struct plan_input *input,
                  struct plan_result *result);
/* How the order ranked: "heat, then densest first" or "densest first (no heat signal)" or "address". */
const char *planner_order_name(const struct plan_input *input, const struct plan_result *result);

/* ---- whether a process is planned this pass --------------------------------------------------------- */

#define PLAN_QUIET_PASSES 5    /* an unchanged process is measured again at least every sixth pass */
#define PLAN_REFRESH_PASSES 30 /* a process planned without a measurement is measured at least every 31st
                                  pass: its figures (metrics, --status) come from that measurement and the
                                  kernel's answers to its collapses in between */

/* What the daemon knows of one selected process at the start of its turn (agent_pass.c gathers it). */
struct plan_visit {
  bool may_collapse;       /* the memory gate is open and this is not --status */
  bool measured;           /* an earlier measurement exists */
  bool changed;            /* its memory changed since the last look (planner_memory_changed) */
  unsigned unmeasured_passes; /* passes since that measurement */
  bool collapsible;        /* the last measurement found collapsible memory (less what was collapsed since) */
  bool idle;               /* the last plan found nothing to do, and its resident/collapsible are unchanged */
  bool idle_recorded;      /* a plan found nothing to do since the last collapse */
  bool watching;           /* the ledger must judge collapses of the last passes (agent_ledger_watching) */
  bool failures_backoff;   /* backed off after failed passes (agent_backoff_allows false) */
  bool sweeping;           /* its last plan walked part of it and stopped before its end: the sweep goes on */
  bool big;                /* it is larger than one plan's walk (AGENT_WALK_MIN_BYTES): a change of it is
                              planned, a sweep reading less of it than a measurement would */
};

/* What the kernel counts for a process that tells whether its memory changed, from one read of
 * /proc/PID/stat and /proc/PID/status a pass: its page faults (minor and major: every page it faulted in)
 * and its resident set, at the planner's last look and now. */
struct plan_change {
  uint64_t faults_then, faults_now;
  uint64_t rss_then, rss_now;   /* bytes */
  uint64_t page_bytes;          /* a base page */
  uint64_t threshold_bytes;     /* the least change that counts */
};
/* Whether the process faulted in, or gained or lost, at least threshold_bytes since the last look. Memory
 * unmapped and faulted in again counts (its faults), though its resident set is the same. What it cannot
 * see: memory the kernel changed without a fault of the process's (khugepaged's collapses, a huge page split
 * by the kernel, pages migrated), and changes smaller than the threshold, which add up until they reach it;
 * the measurement every PLAN_QUIET_PASSES passes sees those. Pure. */
bool planner_memory_changed(const struct plan_change *change);

enum plan_step {
  PLAN_STEP_QUIET = 0,     /* skip: nothing changed (one status read per pass) */
  PLAN_STEP_MEASURE,       /* measure, and stop there (after the measurement: planner_after_measure) */
  PLAN_STEP_PLAN,          /* plan and collapse (before the measurement: without one; the plan's walk is the
                              look, and reads only what the pass can collapse) */
};
/* Before the measurement: quiet (skip it), plan without it, or measure. */
enum plan_step planner_before_measure(const struct plan_visit *visit);
/* After it (visit->collapsible and visit->idle refreshed): measure only, or plan. *why: NULL, or what
 * held it back ("backing off after failed passes"). */
enum plan_step planner_after_measure(const struct plan_visit *visit, const char **why);

#endif
