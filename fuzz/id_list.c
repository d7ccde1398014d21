/* SPDX-License-Identifier: MIT */
/* Kernel id lists ("0-3,8,10-11": cpulist, has_cpu, Cpus_allowed_list, Mems_allowed_list): parse_id_list
 * with the bitmap sizes status uses, and a size that is not a multiple of 64. */
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  uint64_t bitmap[1024 / 64];
  static const unsigned max_ids[] = {1, 64, 70, 1024};
  for (size_t i = 0; i < sizeof max_ids / sizeof max_ids[0]; i++)
    if (parse_id_list(text, bitmap, max_ids[i]))
      for (unsigned id = 0; id < max_ids[i]; id++) (void)id_list_has(bitmap, id);
  free(text);
  return 0;
}
