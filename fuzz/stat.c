/* SPDX-License-Identifier: MIT */
/* /proc/PID/stat (hugify collapse: is the target a kernel thread?): parse_stat_flags; (the agent: which
 * process is this pid, did its memory change?) parse_stat_start_time and parse_stat_faults, also on
 * truncated seeds. The command field may hold spaces and ')'. Also /proc/PID/task/TID/schedstat (the pause a collapse caused): parse_schedstat. */
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  unsigned long flags;
  if (parse_stat_flags(text, &flags)) fuzz_keep(flags & PROCFS_PF_KTHREAD);
  uint64_t start;
  if (parse_stat_start_time(text, &start)) fuzz_keep(start);
  uint64_t rss;
  if (parse_stat_rss(text, &rss)) fuzz_keep(rss);
  uint64_t faults;
  if (parse_stat_faults(text, &faults)) fuzz_keep(faults);
  uint64_t run, wait;
  if (parse_schedstat(text, &run, &wait)) fuzz_keep(run ^ wait);
  free(text);
  return 0;
}
