/* /proc/PID/stat (hugify collapse: is the target a kernel thread?): parse_stat_flags. The command field may
 * hold spaces and ')'. */
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  unsigned long flags;
  if (parse_stat_flags(text, &flags)) fuzz_keep(flags & PROCFS_PF_KTHREAD);
  free(text);
  return 0;
}
