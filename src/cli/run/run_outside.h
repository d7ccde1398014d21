/* SPDX-License-Identifier: MIT */
/* run_outside.h - `hugify run` for a program nothing can be preloaded into (statically linked: a Go program,
 * musl's or glibc's -static, static-pie; or of a C library hugify has no preload for): while it runs, its
 * tree's anonymous memory is collapsed from outside, as `hugify agent` collapses a process's, and the run
 * report says what was collapsed, what the bloat guard left and what it cost. Internal to the run room:
 * run.c makes one, run_tree_run calls it through struct run_watcher (run_tree.h). */
#ifndef HUGIFY_RUN_OUTSIDE_H
#define HUGIFY_RUN_OUTSIDE_H

#include <stdio.h>
#include <sys/types.h>

#include "run_tree.h"

/* The pace "as the agent would": the agent's bloat guard (its --min-present default) and the library's gentle
 * pace; the CPU budget is the agent's token bucket, filled faster than its 2 % default because one program
 * the user started is waiting for it, not a whole host: half a core, which the gentle pace's rests (as long
 * as each call) allow anyway. At a quarter, a musl program's 1 GiB took 10 s to collapse on this project's
 * loaded 2-CPU VM and was 78 % huge at its peak (docs/run.md, "Static programs"). */
#define RUN_OUTSIDE_INTERVAL 1.0         /* seconds between passes over the tree */
#define RUN_OUTSIDE_BUSY_INTERVAL 0.1    /* ... after a pass its CPU ceiling cut short (the bucket still
                                            holds CPU: the budget, not the interval, sets the pace) */
#define RUN_OUTSIDE_CPU_BUDGET 0.5       /* of one core, averaged over RUN_OUTSIDE_BUDGET_WINDOW */
#define RUN_OUTSIDE_BUDGET_WINDOW 10.0   /* seconds */
#define RUN_OUTSIDE_MIN_PRESENT 0.5      /* share of a window's pages present before it is collapsed */

struct run_outside;

/* A collapser for the tree of the program at `path`, which is `why` ("statically linked", ...); NULL without
 * memory. */
struct run_outside *run_outside_new(const char *why);
void run_outside_free(struct run_outside *outside);
/* The watcher run_tree_run drives: a pass every RUN_OUTSIDE_INTERVAL while CMD runs (sooner while work is
 * left and the budget allows), then the report. */
struct run_watcher run_outside_watcher(struct run_outside *outside);

#endif
