/* SPDX-License-Identifier: MIT */
/* /proc/cmdline: parse_cmdline_hugepages. */
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  struct cmdline_hugepages boot;
  parse_cmdline_hugepages(text, &boot);
  free(text);
  return 0;
}
