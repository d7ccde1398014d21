/* SPDX-License-Identifier: MIT */
/* /proc/buddyinfo: parse_buddyinfo, then the free-page estimate made from it for every page size. */
#include <stdbool.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  struct buddyinfo_zone zones[8];
  long count = parse_buddyinfo(text, zones, sizeof zones / sizeof zones[0]);
  if (count >= 0) {
    uint64_t pages = 0;
    bool upper_bound;
    static const uint64_t sizes[] = {4096, UINT64_C(64) << 10, UINT64_C(2) << 20, UINT64_C(1) << 30, UINT64_C(1) << 40};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
      for (int node = -1; node < 2; node++)
        pages += buddyinfo_free_pages(zones, (size_t)count, node, 4096, sizes[i], &upper_bound);
    fuzz_keep(pages);
  }
  free(text);
  return 0;
}
