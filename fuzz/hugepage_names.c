/* SPDX-License-Identifier: MIT */
/* Names and one-value files of sysfs: "hugepages-2048kB" directory names (parse_hugepages_dir_name),
 * counters (parse_u64) and choice files such as "always [madvise] never" (parse_bracketed_choice). */
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  uint64_t value;
  parse_hugepages_dir_name(text, &value);
  parse_u64(text, &value);
  char choice[16];
  parse_bracketed_choice(text, choice, sizeof choice);
  parse_bracketed_choice(text, choice, 1);
  free(text);
  return 0;
}
