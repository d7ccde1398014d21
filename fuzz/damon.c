/* SPDX-License-Identifier: MIT */
/* DAMON's tried regions as `grep -r . tried_regions` prints them (heat.c reads the sysfs files into this
 * form): parse_damon_tried_regions, damon_split_targets, and heat_of over what they give. */
#include <stdlib.h>

#include "fuzz_input.h"
#include "heat.h"
#include "procfs.h"

#define CAP 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  struct damon_region regions[CAP];
  long count = parse_damon_tried_regions(text, regions, CAP);
  if (count > CAP) __builtin_trap();
  if (count > 0) {
    size_t firsts[CAP];
    size_t targets = damon_split_targets(regions, (size_t)count, firsts, CAP);
    if (targets == 0 || targets > (size_t)count || firsts[0] != 0) __builtin_trap();
    size_t end = targets > 1 ? firsts[1] : (size_t)count;
    struct heat_snapshot s = {HEAT_DAMON, regions, end};
    int32_t heat = heat_of(&s, regions[0].start, UINT64_C(2) << 20, NULL);
    if (heat < -1) __builtin_trap();
    fuzz_keep((uint64_t)heat);
  }
  free(text);
  return 0;
}
