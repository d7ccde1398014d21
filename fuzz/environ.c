/* SPDX-License-Identifier: MIT */
/* /proc/PID/environ (NUL-separated NAME=VALUE entries, the last one possibly cut): parse_environ_value, which
 * inspect uses for a CPython process's PYTHONMALLOC. The input is the file's bytes. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size copy without a terminating NUL, so ASan sees any read past the end */
  char *bytes = malloc(size ? size : 1);
  if (!bytes) abort();
  memcpy(bytes, data, size);
  char value[32];
  uint64_t found = parse_environ_value(bytes, size, "PYTHONMALLOC", value, sizeof value);
  found += parse_environ_value(bytes, size, "P", value, 1);
  fuzz_keep(found);
  free(bytes);
  return 0;
}
