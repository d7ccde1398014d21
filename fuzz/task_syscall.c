/* SPDX-License-Identifier: MIT */
/* /proc/PID/task/TID/syscall: parse_task_syscall_sp. */
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  uint64_t sp;
  parse_task_syscall_sp(text, &sp);
  free(text);
  return 0;
}
