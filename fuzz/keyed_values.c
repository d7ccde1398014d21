/* "Key: value [kB]" files (/proc/meminfo, /proc/PID/status, node meminfo) and "Key:<tab>text" lines:
 * parse_keyed_value and parse_keyed_text. The first line of the input is the key, the rest the file. */
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
  free(text);
  return 0;
}
