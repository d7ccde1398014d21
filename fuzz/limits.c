/* SPDX-License-Identifier: MIT */
/* /proc/PID/limits: parse_limit. The first line of the input is the row's name, the rest the file. */
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  const char *file;
  const char *name = fuzz_split_first_line(text, &file);
  uint64_t soft, hard;
  parse_limit(file, name, &soft, &hard);
  parse_limit(file, "Max locked memory", &soft, &hard);
  free(text);
  return 0;
}
