/* SPDX-License-Identifier: MIT */
/* The options of a hugetlbfs mount ("rw,relatime,pagesize=2M,size=16777216,..."): parse_hugetlbfs_options. */
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  struct hugetlbfs_options options;
  parse_hugetlbfs_options(text, &options);
  free(text);
  return 0;
}
