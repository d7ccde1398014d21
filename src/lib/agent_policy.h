/* agent_policy.h - the decisions of `hugify agent`, as pure functions over a snapshot: which processes,
 * which 2 MiB windows in which order, whether the CPU and memory budgets allow work now, and when to try
 * a process again after failures. No I/O here: the daemon (src/cli/agent.c) reads /proc and calls these;
 * tests/unit/agent_policy.cpp feeds them constructed snapshots and fixture text. Not exported. */
#ifndef HUGIFY_AGENT_POLICY_H
#define HUGIFY_AGENT_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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
/* "selected", "not_matched", "excluded", "thp_disabled", "too_small", "kernel_thread". */
const char *agent_selection_name(enum agent_selection selection);
/* True when the cgroup path `path` is `selector` or lies below it ("/a/b" selects "/a/b" and "/a/b/c",
 * not "/a/bc"). */
bool agent_cgroup_matches(const char *selector, const char *path);

/* ---- which windows, in which order -------------------------------------------------------------- */

/* One 2 MiB-aligned window of an eligible mapping, as PAGEMAP_SCAN (and, where the kernel has it, idle
 * page tracking) sees it. */
struct agent_window {
  uint64_t start;
  uint32_t present_pages;  /* base pages present (huge ones not counted) */
  uint32_t huge_pages;     /* base pages' worth mapped by a huge page (pmd_pages when already huge) */
  int32_t accessed_pages;  /* pages accessed since the last pass (idle page tracking); -1 unknown */
};

/* The bloat guard: a window is collapsed only when at least min_present (0..1) of its pages are present,
 * so a sparse region is not filled with zeroes. Already-huge windows and empty ones are never eligible. */
bool agent_window_eligible(const struct agent_window *window, uint32_t pmd_pages, double min_present);
/* Keep the eligible windows (in place) and order them: recently accessed first where known, then densest
 * first, then by address (so equal windows stay contiguous and merge into few kernel calls). Returns the
 * number kept. */
size_t agent_plan_windows(struct agent_window *windows, size_t count, uint32_t pmd_pages, double min_present);

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

/* ---- memory budget ------------------------------------------------------------------------------ */

/* /proc/pressure/memory: "some avg10=1.23 avg60=..." and "full ...". */
struct agent_pressure {
  double some_avg10, some_avg60, full_avg10; /* percent */
  bool present;
};
/* Parse the text of /proc/pressure/memory. False when malformed. */
bool agent_parse_pressure(const char *text, struct agent_pressure *out);

struct agent_memory_limits {
  uint64_t free_floor;      /* no collapse while MemAvailable is below this (bytes) */
  double pressure_limit;    /* ... or while memory "some" avg10 is above this (percent) */
};
/* True when a collapse may run; else false and `reason` says why. available: MemAvailable in bytes. */
bool agent_memory_allows(const struct agent_memory_limits *limits, uint64_t available,
                         const struct agent_pressure *pressure, char *reason, size_t cap);

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

#endif
