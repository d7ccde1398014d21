/* SPDX-License-Identifier: MIT */
/* /proc/vmstat: parse_vmstat. */
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  struct vmstat_counters counters;
  parse_vmstat(text, &counters);
  free(text);
  return 0;
}
