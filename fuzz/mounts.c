/* SPDX-License-Identifier: MIT */
/* /proc/mounts: parse_mounts, then parse_hugetlbfs_options on every entry (as status and pool do). */
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  struct mount_entry *mounts = NULL;
  long count = parse_mounts(text, &mounts);
  if (count >= 0) {
    for (long i = 0; i < count; i++) {
      struct hugetlbfs_options options;
      parse_hugetlbfs_options(mounts[i].options, &options);
    }
    free(mounts);
  }
  free(text);
  return 0;
}
