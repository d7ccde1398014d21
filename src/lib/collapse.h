/* collapse.h - hugify_collapse with a policy, for `hugify agent`: its own bloat guard, the agent's window
 * order (agent_plan_windows: densest first across the whole process), and a budget asked before every call
 * into the kernel. Not exported. */
#ifndef HUGIFY_COLLAPSE_H
#define HUGIFY_COLLAPSE_H

#include <stdbool.h>
#include <sys/types.h>

#include "hugify.h"

struct collapse_policy {
  double min_present;               /* share of a window's pages that must be present (0..1) */
  bool (*keep_going)(void *context);/* asked before every kernel call; false ends the pass (NULL: never) */
  void *context;
  bool stopped;                     /* out: keep_going ended the pass before every window was tried */
  uint64_t planned;                 /* out: bytes in windows the policy chose (report->attempted: asked) */
};

/* hugify_collapse with `policy` (NULL: hugify_collapse itself: khugepaged's max_ptes_none as the guard,
 * address order, no budget). report->attempted counts the windows actually sent to the kernel. */
int collapse_with_policy(pid_t pid, const struct hugify_collapse_opts *opts, struct collapse_policy *policy,
                         struct hugify_collapse_report *report);

#endif
