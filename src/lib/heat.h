/* SPDX-License-Identifier: MIT */
/* heat.h - which memory of a process is hot, where the kernel says it: the agent's access signal.
 *  - DAMON (virtual-address monitoring, through /sys/kernel/mm/damon/admin): one kdamond with one context
 *    whose targets are the selected processes, and one `stat` scheme whose tried regions give each region's
 *    access frequency (nr_accesses per aggregation interval). Needs CONFIG_DAMON_SYSFS and CONFIG_DAMON_VADDR
 *    (Debian 13's 6.12 has both) and root.
 *  - soft-dirty (CONFIG_MEM_SOFT_DIRTY: Debian's 6.1 and 6.12): the pages written since the last plan, from
 *    the plan's own pagemap walk (pagemap bit 55, or PAGEMAP_SCAN's PAGE_IS_SOFT_DIRTY), the bits cleared
 *    with /proc/PID/clear_refs "4" after each plan. Written memory only: a page only read is cold to it.
 *  - none: no snapshot (NULL); the plan goes densest first, and says so.
 * The agent owns one heat_source (src/cli/agent/agent_pass.c); collapse.c asks heat_of() for each window. Not
 * exported. docs/agent.md, "Heat". */
#ifndef HUGIFY_HEAT_H
#define HUGIFY_HEAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "planner.h"
#include "procfs.h"

enum heat_signal { HEAT_NONE, HEAT_DAMON, HEAT_SOFT_DIRTY };
/* --heat auto|damon|soft-dirty|none, in that order */
enum heat_mode { HEAT_MODE_AUTO, HEAT_MODE_DAMON, HEAT_MODE_SOFT_DIRTY, HEAT_MODE_NONE };

/* "none", "damon", "soft-dirty". */
const char *heat_signal_name(enum heat_signal signal);

/* DAMON: the heat each window was given at its last measurement by regions that hold no huge window
 * (heat_of_windows keeps it from one plan to the next). Sorted by start. */
struct heat_window {
  uint64_t start;
  int32_t heat;
};
struct heat_history {
  struct heat_window *windows; /* malloc'd (heat_history_free) */
  size_t count;
};
void heat_history_free(struct heat_history *history);

/* What one process's heat is at one plan. DAMON: its regions (sorted, not overlapping) and the process's
 * history (NULL: none kept); soft-dirty: no regions, the plan's walk counts the written pages of each
 * window. */
struct heat_snapshot {
  enum heat_signal signal;
  const struct damon_region *regions;
  size_t count;
  struct heat_history *history;
};

#define HEAT_UNKNOWN (-1) /* a window's heat nobody measured (agent_window.heat) */
#define HEAT_NO_CPU (-1.0) /* heat_work.kdamond_cpu before it was read */

/* The heat of the window [start, start + length): HEAT_UNKNOWN (no snapshot, or no region covers it), else
 * higher is hotter. DAMON: the regions' nr_accesses weighted by their overlap with the window, times 100;
 * soft-dirty: the window's written bytes in 4 KiB pages (scan: the plan's walk of the window). Pure. */
int32_t heat_of(const struct heat_snapshot *snapshot, uint64_t start, uint64_t length,
                const struct resident_bytes *scan);

/* DAMON: the heat of every window not huge, smoothed over the plans: the mean of the heat it was given at
 * the last plan and this plan's measurement. DAMON's nr_accesses counts the few samples of one aggregation
 * that found a region accessed (20 by default): one lucky sample makes a cold region look hot for one read,
 * and a hot one reads cold now and then; smoothed, the first fades in a few reads and the second stays hot,
 * so a pass rarely finds nothing hot while a hot set is left. A window is measured only by the regions that
 * hold no huge window: DAMON samples one address of a region at a time, and for a PMD-mapped page it reads
 * the PMD's accessed bit, which any access to the 2 MiB sets, so a cold huge window reads as hot as the
 * hottest 4 KiB page, and a region that holds one passes that heat to the 4 KiB windows beside it
 * (measured: docs/agent.md, "Time to benefit"). A window only such regions cover keeps the heat it was
 * given (from before its neighbours were collapsed), else its heat is unknown. windows: in address order,
 * their huge pages read (the plan's walk). The history (when the snapshot has one) is replaced by this
 * plan's heats. Other signals: nothing to do. 0, or -ENOMEM (the heat is then this plan's alone and the
 * history unchanged). No I/O. */
int heat_of_windows(const struct heat_snapshot *snapshot, struct agent_window *windows, size_t count,
                    uint64_t window_bytes);

/* Whether a window of this heat can be collapsed now: not a window soft-dirty tracking saw no write in (its
 * clear_refs write-protected every page of it, and the kernel collapses no range without a writable page:
 * khugepaged's SCAN_PAGE_RO, MADV_COLLAPSE's EINVAL), until the program writes it again. Pure. */
bool heat_collapsible(const struct heat_snapshot *snapshot, int32_t heat);

/* The monitoring's own work, for the status and the metrics. */
struct heat_work {
  uint64_t targets;          /* processes DAMON monitors now */
  uint64_t regions;          /* regions it reported at the last read */
  uint64_t reads;            /* update_schemes_tried_regions requests (one per pass; two when the first found none) */
  uint64_t restarts;         /* the kdamond turned off and on for a new set of targets */
  double monitored_seconds;  /* the kdamond's time on: aggregations = this / aggr interval */
  uint64_t sample_us, aggr_us;
  double kdamond_cpu;        /* CPU seconds of the kdamond thread (its schedstat), HEAT_NO_CPU unknown */
  uint64_t clears;           /* soft-dirty: clear_refs writes */
  /* --first-touch: the `hugepage` scheme's stats (DAMON's, summed over the kdamond's restarts) */
  uint64_t first_touch_tried_regions, first_touch_applied_regions, first_touch_applied_bytes;
};

#define HEAT_TARGETS_MAX 4096

struct heat_target {
  pid_t pid;
  struct damon_region *regions; /* malloc'd, the last read's */
  size_t count;
  struct heat_history history;  /* its windows' last measurements (heat_of_windows) */
  bool fresh;                   /* monitored for at least one read: its snapshot is worth using */
  struct heat_snapshot snapshot;
};

struct heat_source {
  enum heat_mode mode;
  enum heat_signal signal;   /* what is in use */
  char reason[512];          /* why this signal (the others missing, a busy kdamond) */
  /* DAMON */
  int kdamond;               /* index under kdamonds/, -1 none; ours: made from nr_kdamonds 0 */
  bool on;
  pid_t kdamond_pid;
  double on_since;           /* CLOCK_MONOTONIC when turned on */
  struct heat_target *targets;
  size_t target_count, target_cap;
  struct heat_work work;
  bool first_touch;          /* the `hugepage` scheme (schemes/1) is set up (heat_first_touch) */
  uint64_t first_touch_seen[3]; /* its stats at the last read since the kdamond's last start: tried, applied, bytes */
};

/* Choose the signal for `mode` and set DAMON up (no targets yet). auto: DAMON, else none (soft-dirty only when asked for).
 * DAMON is found as status finds it (probe_damon_vaddr_at) and used only through a kdamond of our own, made
 * where none exists: any kdamond there is another user's and left alone.
 * A mode asked for by name that the kernel lacks is an error: -EOPNOTSUPP with the reason (the kernel
 * version and build option that has it), -EBUSY when DAMON's kdamonds are another user's, -EACCES without
 * root. 0 otherwise (auto: source->reason says why a signal was not taken). */
int heat_open(struct heat_source *source, enum heat_mode mode, char *reason, size_t cap);
/* Monitor exactly these processes (DAMON: the context's targets; the kdamond is turned off, given the new
 * targets and turned on again when they changed). 0 or -errno with the reason. */
int heat_set_targets(struct heat_source *source, const pid_t *pids, size_t count, char *reason, size_t cap);
/* Read the regions of every target (DAMON: once a pass). 0 or -errno with the reason. */
int heat_refresh(struct heat_source *source, char *reason, size_t cap);
/* The heat of `pid` to plan with, or NULL: no signal, or not monitored long enough yet. */
const struct heat_snapshot *heat_snapshot_of(const struct heat_source *source, pid_t pid);
/* After a plan of `pid` (soft-dirty: clear its bits, so the next plan sees what was written since). */
void heat_after_plan(struct heat_source *source, pid_t pid);
/* --first-touch (docs/agent.md, "First touch"): where DAMON is the signal (the agent's own kdamond) and the kernel
 * takes the DAMOS action `hugepage`, a second scheme in the same context applies MADV_HUGEPAGE to the regions of
 * the selected processes that are at least a PMD (pmd_bytes) and accessed at least as densely as the bloat
 * guard asks (heat_first_touch_min_accesses): memory faulted there later is huge under THP `madvise`, and
 * khugepaged collapses what is there already. Before heat_set_targets (the kdamond off). 0; -EOPNOTSUPP
 * when DAMON is not the signal or the kernel lacks the action (reason: the version that has it). */
int heat_first_touch(struct heat_source *source, double min_present, uint64_t pmd_bytes, char *reason, size_t cap);
/* The least nr_accesses (of an aggregation of aggr_us / sample_us samples) of a region the first-touch scheme
 * marks: DAMON checks one random page of a region per sample, so nr_accesses over the samples is the share of
 * the region's pages being accessed, which is at most the share present; asking min_present of the samples
 * keeps the sparse regions (fewer pages present than the guard) unmarked, the dense ones marked. At least 1.
 * Pure. */
uint32_t heat_first_touch_min_accesses(double min_present, uint64_t sample_us, uint64_t aggr_us);

/* Stop and remove what heat_open set up (the kdamond off, its context removed, nr_kdamonds back to 0). */
void heat_close(struct heat_source *source);

#endif
