/* SPDX-License-Identifier: MIT */
/* agent_policy.h - the decisions of `hugify agent`, as pure functions over a snapshot: which processes,
 * whether the CPU and memory budgets allow work now, when to try a process again after failures, and the
 * ledger of its collapses (which windows and in which order is the planner's: planner.h). No I/O here: the daemon (src/cli/agent/agent.c) reads /proc and calls these;
 * tests/unit/agent_policy.cpp feeds them constructed snapshots and fixture text. Not exported. */
#ifndef HUGIFY_AGENT_POLICY_H
#define HUGIFY_AGENT_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pause.h"
#include "planner.h"
#include "probe.h"
#include "procfs.h"

/* ---- which processes ---------------------------------------------------------------------------- */

#define AGENT_SELECTOR_MAX 32
#define AGENT_NAME_MAX 256

/* Selectors: a process is selected when it matches any positive selector (every process when there is
 * none), has at least min_rss resident, matches no exclusion, and has not disabled THP. */
struct agent_selectors {
  pid_t pids[AGENT_SELECTOR_MAX];
  size_t pid_count;
  uid_t uids[AGENT_SELECTOR_MAX];
  size_t uid_count;
  char comms[AGENT_SELECTOR_MAX][16];          /* /proc/PID/comm, exact (the kernel keeps 15 bytes) */
  size_t comm_count;
  char exes[AGENT_SELECTOR_MAX][AGENT_NAME_MAX];    /* /proc/PID/exe target, exact */
  size_t exe_count;
  char cgroups[AGENT_SELECTOR_MAX][AGENT_NAME_MAX]; /* cgroup v2 path: the cgroup itself or anything below */
  size_t cgroup_count;
  char exclude_comms[AGENT_SELECTOR_MAX][16];
  size_t exclude_comm_count;
  uint64_t min_rss;                            /* bytes */
};

/* What selection needs to know of a process (read by the daemon from /proc/PID/{comm,exe,cgroup,status}). */
struct agent_process {
  pid_t pid;
  uid_t uid;                  /* real uid */
  char comm[16];
  char exe[AGENT_NAME_MAX];   /* "" when unreadable or a kernel thread */
  char cgroup[AGENT_NAME_MAX];/* cgroup v2 path, "" when unknown */
  uint64_t rss;               /* VmRSS, bytes */
  int thp_disabled;           /* 1: prctl PR_SET_THP_DISABLE; 0; -1 unknown */
  bool kernel_thread;         /* no memory of its own */
};

enum agent_selection {
  AGENT_SELECTED = 0,
  AGENT_NOT_MATCHED,    /* matches no positive selector */
  AGENT_EXCLUDED,       /* matches an exclusion (exclusions win) */
  AGENT_THP_DISABLED,   /* the process disabled THP: always respected */
  AGENT_TOO_SMALL,      /* below min_rss */
  AGENT_KERNEL_THREAD,
};
enum agent_selection agent_select(const struct agent_selectors *selectors, const struct agent_process *process);
/* Whether only --pid can select a process (no uid, comm, exe or cgroup selector): then a pass visits those
 * pids alone instead of every process in /proc. */
bool agent_selects_only_pids(const struct agent_selectors *selectors);
/* "selected", "not_matched", "excluded", "thp_disabled", "too_small", "kernel_thread". */
const char *agent_selection_name(enum agent_selection selection);
/* True when the cgroup path `path` is `selector` or lies below it ("/a/b" selects "/a/b" and "/a/b/c",
 * not "/a/bc"). */
bool agent_cgroup_matches(const char *selector, const char *path);

/* The DAMON scheme of another owner that makes the process's memory huge itself: a scheme of action `collapse`
 * or `hugepage` (virtual-address operations) of a kdamond that is on, other than own_kdamond (the agent's own,
 * -1 none), whose context targets pid. The agent leaves such a process to the kernel (PLAN_CUT_DAMOS): two
 * owners collapsing one process's memory would spend CPU twice and blur what each bought. NULL when none.
 * Only the first PROBE_DAMON_TARGETS_MAX targets of a context are known: a pid past them is not found. Pure. */
const struct probe_damon_scheme *agent_damos_scheme_of(const struct probe_damon_scheme *schemes, size_t count,
                                                       int own_kdamond, pid_t pid);

/* ---- which windows, in which order: the planner (planner.h) -------------------------------------- */

/* ---- CPU budget --------------------------------------------------------------------------------- */

/* A token bucket in CPU seconds: it fills at `fraction` of a core per second of wall time, holds at most
 * fraction * window_seconds, and the work (collapse calls and scans) is charged its measured CPU time.
 * Work may start only while the bucket is positive, so over any span T the agent spends at most
 * fraction * (T + window_seconds) plus one call. It starts holding one interval's worth. */
struct agent_budget {
  double fraction;        /* of one core, e.g. 0.02 */
  double window_seconds;  /* averaging window (60) */
  double tokens;          /* CPU seconds available now (may go below 0 after a long call) */
  double last;            /* wall clock of the last refill */
  double spent;           /* CPU seconds charged in total */
};
void agent_budget_init(struct agent_budget *budget, double fraction, double window_seconds, double initial_seconds,
                       double now);
void agent_budget_refill(struct agent_budget *budget, double now);
void agent_budget_charge(struct agent_budget *budget, double cpu_seconds);
bool agent_budget_allows(const struct agent_budget *budget);

/* A pass's own ceiling: the bucket refills during a pass, so on a CPU-starved machine a pass that lasts
 * minutes of wall time could collapse for minutes; whatever the bucket holds, one pass stops measuring and
 * collapsing once it has used this much CPU (its walk included): AGENT_PASS_CPU_CEILING seconds, or one
 * interval's share of the budget (fraction * interval) when that is more, so that a raised budget is not
 * cut by it. */
#define AGENT_PASS_CPU_CEILING 0.5
double agent_pass_ceiling(double fraction, double interval_seconds);

/* How much of a process one plan walks, as bytes of windows not huge already (huge ones cost the walk
 * little: one PMD each), so that a pass reads about what it can collapse, not the whole process (docs/agent.md,
 * "What a pass costs"): enough windows to spend cpu_available (what the bucket and the pass's ceiling still
 * allow) at cpu_per_window (the CPU one window's collapse took, on average, in this process; 0: not known
 * yet, AGENT_WINDOW_CPU_GUESS), AGENT_WALK_SLACK times over for the windows the plan cuts (sparse, cold,
 * held), and at least AGENT_WALK_MIN_BYTES. A multiple of window_bytes. */
#define AGENT_WINDOW_CPU_GUESS 0.002                 /* seconds: 1 s per GiB, measured 0.9 here (warm pages) */
#define AGENT_WALK_SLACK 4
#define AGENT_WALK_MIN_BYTES ((uint64_t)256 * 1024 * 1024)
uint64_t agent_walk_limit(double cpu_available, double cpu_per_window, uint64_t window_bytes);

/* Whether the work of a pass goes on, and if not, why (each said and counted apart). */
enum agent_work {
  AGENT_WORK_GO = 0,
  AGENT_WORK_STOPPED,        /* SIGTERM or SIGINT arrived */
  AGENT_WORK_BUDGET_SPENT,   /* the bucket is empty */
  AGENT_WORK_PASS_CEILING,   /* the bucket would allow more, this pass has used its ceiling */
};
/* The word before a piece of work: a stop asked first, then the budget (NULL: none, --once), then the pass's
 * ceiling (pass_cpu: CPU the pass has used so far; ceiling <= 0: none). */
enum agent_work agent_work_word(const struct agent_budget *budget, double pass_cpu, double ceiling, bool stop_requested);
/* What a cut-short collapse says of it: "stopped", "budget spent", "pass CPU ceiling reached" ("" for GO). */
const char *agent_work_phrase(enum agent_work word);

/* ---- the harm ledger ---- */
/* What the agent's collapses cost the processes it acts on, besides the bloat and its CPU (counted where they
 * happen): the pause each call caused (collapse_policy.pauses points here) and the longest call. */
struct agent_harm {
  struct pause_histogram pauses;
  double longest_call;    /* seconds: the longest single call into the kernel (a bound on a call in flight) */
};
struct hugify_collapse_report;
void agent_harm_record(struct agent_harm *harm, const struct hugify_collapse_report *report);

/* ---- memory budget ------------------------------------------------------------------------------ */

/* The memory pressure (struct psi_pressure, parse_psi_pressure) is parsed in procfs.c. */

struct agent_memory_limits {
  uint64_t free_floor;      /* no collapse while MemAvailable is below this (bytes) */
  double pressure_limit;    /* ... or while memory "some" avg10 is above this (percent) */
};
/* True when a collapse may run; else false and `reason` says why. available: MemAvailable in bytes. */
bool agent_memory_allows(const struct agent_memory_limits *limits, uint64_t available,
                         const struct psi_pressure *pressure, char *reason, size_t cap);

/* ---- per-process back-off ----------------------------------------------------------------------- */

/* After a pass in which a process made no progress and failures happened, it is not tried again for
 * interval * 2^(failures-1), at most max_seconds; a pass with progress resets it. */
struct agent_backoff {
  unsigned failures;      /* consecutive passes with failures and no progress */
  double next_try;        /* wall clock before which the process is skipped */
};
void agent_backoff_record(struct agent_backoff *backoff, bool progress, bool failed, double now, double interval,
                          double max_seconds);
bool agent_backoff_allows(const struct agent_backoff *backoff, double now);

/* ---- whether collapses last --------------------------------------------------------------------- */

/* An allocator that gives memory back (jemalloc's decay, glibc's trim, mimalloc's purge) releases 4 KiB
 * pages inside a huge page, and the kernel splits it: the collapse is undone. The ledger remembers the
 * windows the agent collapsed in a process and, at each later plan (its PAGEMAP_SCAN walk, no extra
 * walk), whether they are still huge. Windows whose collapse is undone within AGENT_UNDONE_PASSES are not
 * collapsed again for growing intervals (so the agent does not refill pages the program just released),
 * and a process whose collapses mostly do not last is backed off: only its windows that pay (lasted, or
 * hot) are collapsed for a while (the planner's cut). docs/agent.md: the rule,
 * and the churn measurement that chose the constants. */
/* A collapse is undone when the window is found split at a look within AGENT_UNDONE_PASSES passes of it (or
 * at the first look after, when no look came sooner); it lasts when it is still huge at the first look
 * more than AGENT_UNDONE_PASSES passes after it. */
#define AGENT_UNDONE_PASSES 3       /* "a few passes" */
#define AGENT_LASTING_SHARE 0.5     /* a process's collapses "last" when at least this share of those
                                       decided in a pass lasted */
#define AGENT_LASTING_MIN_WINDOWS 4 /* a process is judged on at least this many windows decided in a pass */
#define AGENT_LATE_PASSES 10        /* the second measurement: still huge this many passes after */
#define AGENT_PROBE_WINDOWS 4       /* after a back-off, a process is tried again on this many windows
                                       (enough to judge it: AGENT_LASTING_MIN_WINDOWS) until one lasts */
#define AGENT_LEDGER_MAX 8192       /* windows remembered per process (16 GiB of collapses, 256 KiB) */
#define AGENT_COLD_WAIT_PASSES 60   /* a process's cold windows wait for its hot ones (planner.h) at most this
                                       many passes in a row, then get a pass's turn after them: a hot window
                                       the kernel refuses every pass would otherwise hold them back for good */

struct agent_ledger_window {
  uint64_t start;
  uint64_t collapsed_pass;  /* pass of the latest collapse */
  uint64_t retry_pass;      /* not collapsed again before this pass */
  uint64_t seen_pass;       /* the last plan that saw the window mapped */
  uint32_t collapses;       /* times collapsed */
  uint32_t undone;          /* times its collapse was undone within AGENT_UNDONE_PASSES (the back-off) */
  bool checked_early;       /* the latest collapse was judged at the first plan >= 1 pass after it */
  bool checked_late;        /* ... and at the first plan >= AGENT_LATE_PASSES after it */
  bool decided;             /* the latest collapse was found undone or lasting */
};

struct agent_ledger {
  struct agent_ledger_window *windows; /* sorted by start; malloc'd (agent_ledger_free) */
  size_t count, cap;
  uint64_t window_bytes;          /* 2 MiB */
  /* Bytes of collapsed windows judged one pass (early) and AGENT_LATE_PASSES passes (late) after their
   * collapse, and of those the ones still huge. */
  uint64_t early_checked, early_huge, late_checked, late_huge;
  uint64_t collapsed_bytes;       /* collapsed by the agent (all) */
  uint64_t last_collapse_pass;
  uint64_t recollapsed_bytes;     /* collapsed again: windows the agent had collapsed before */
  uint64_t undone_bytes;          /* collapses found split within AGENT_UNDONE_PASSES */
  uint64_t backed_off_bytes;      /* windows backed off at the end of the last pass */
  uint64_t max_backoff_passes;    /* the longest back-off, of a window or the process */
  /* collapses decided this pass (undone, or lasting), for the process-level judgement */
  uint64_t pass_decided, pass_lasted;
  /* the kernel's own collapses: windows seen present and not huge at the last full look (sorted, at most
   * AGENT_LEDGER_MAX), and those seen so far in this pass's look */
  uint64_t *small, *next_small;
  size_t small_count, next_count, small_cap, next_cap;
  uint64_t small_pass;            /* the pass that look began (0: none yet) */
  uint64_t look_pass;             /* the pass the look under way began (0: none under way): a look is one
                                     plan's walk of every window, or a sweep's walks over several passes */
  uint64_t kernel_bytes;          /* windows found huge that were not at the last look and that the agent
                                     did not collapse since: khugepaged's (or a fault's) */
  /* the process as a whole */
  unsigned churn_strikes;         /* consecutive judgements that collapses do not last */
  uint64_t resume_pass;           /* no collapse in the process before this pass */
  double last_lasting_share;      /* share that lasted in the last judgement (-1: none yet) */
  uint64_t cold_waiting_since;    /* the pass from which its cold windows have waited for hot ones (0: none) */
};

void agent_ledger_init(struct agent_ledger *ledger, uint64_t window_bytes, uint64_t max_backoff_passes);
void agent_ledger_free(struct agent_ledger *ledger);
/* The plan saw window w (its present and huge pages read) at pass `pass`: judge the agent's earlier
 * collapse of it, fill w->ledger with what the ledger knows of it (enum plan_ledger_state), and add
 * PLAN_FACT_KERNEL to w->facts when it became huge since the last look without the agent. False only when
 * the ledger is out of memory (the kernel's collapses are then not told apart this pass). */
bool agent_ledger_observe(struct agent_ledger *ledger, uint64_t pass, struct agent_window *w, bool huge);
/* The agent collapsed window `start` at pass `pass`. False when the ledger is out of memory. */
bool agent_ledger_collapsed(struct agent_ledger *ledger, uint64_t pass, uint64_t start);
/* After a pass's plan, before its collapses (scanned: this plan ended a look that saw every mapped window,
 * in one walk or in a sweep's over several passes, so the windows it did not see are gone and forgotten):
 * judge the process on the collapses decided in this pass. A share that lasted
 * below AGENT_LASTING_SHARE (over at least AGENT_LASTING_MIN_WINDOWS windows) backs the whole process off
 * for AGENT_UNDONE_PASSES * 2^(strikes-1) passes (at most max_backoff_passes); a share at or above it
 * clears the strikes. Windows are backed off the same way, each on its own count of undone collapses.
 * Returns true when this judgement backed the process off. */
bool agent_ledger_judge(struct agent_ledger *ledger, uint64_t pass, bool scanned);
/* True when this pass must look at the process's windows even if nothing seems to have changed: the
 * AGENT_UNDONE_PASSES passes after a collapse, and AGENT_LATE_PASSES after it, so that every collapse is
 * judged in time (a quiet process is otherwise not walked at all). */
bool agent_ledger_watching(const struct agent_ledger *ledger, uint64_t pass);
/* What the planner needs of the process as a whole (planner.h): backed off for churn now, probing (it has
 * churn strikes: unproven windows go AGENT_PROBE_WINDOWS at a time, so a retry re-collapses little), its
 * cold windows' turn (they waited AGENT_COLD_WAIT_PASSES passes for hot ones). */
struct plan_process agent_ledger_process(const struct agent_ledger *ledger, uint64_t pass);
/* After a plan at `pass`: whether its cold windows waited for hot ones (PLAN_CUT_COLD). Counts the passes
 * they wait in a row, for plan_process.cold_turn. */
void agent_ledger_planned(struct agent_ledger *ledger, uint64_t pass, bool cold_waited);
/* True when the process is not backed off for churn at this pass (backed off, only the windows that pay
 * are collapsed: planner.h). */
bool agent_ledger_allows(const struct agent_ledger *ledger, uint64_t pass);
/* Share of the collapsed bytes still huge early (1 pass) or late (AGENT_LATE_PASSES); -1 when none judged. */
double agent_ledger_early_share(const struct agent_ledger *ledger);
double agent_ledger_late_share(const struct agent_ledger *ledger);

#endif
