/* SPDX-License-Identifier: MIT */
/* "Key: value [kB]" files (/proc/meminfo, /proc/PID/status, node meminfo, smaps_rollup) and "Key:<tab>text"
 * lines: parse_keyed_value, parse_keyed_text and parse_smaps_rollup. The first line of the input is the
 * key, the rest the file. */
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  const char *file;
  const char *key = fuzz_split_first_line(text, &file);
  uint64_t value;
  parse_keyed_value(file, key, &value);
  char out[64];
  parse_keyed_text(file, key, out, sizeof out);
  parse_keyed_text(file, key, out, 1);
  struct smaps_rollup rollup;
  parse_smaps_rollup(file, &rollup);
  free(text);
  return 0;
}
