/* SPDX-License-Identifier: MIT */
/* Values people type (command-line options, config-file settings), a release number, and the "#!" line of a
 * program hugify is asked to run: parse_count, parse_decimal, parse_size and version_at_least over the first
 * line (at the bounds the CLI uses), count_from_double over the first 8 bytes as a double,
 * elf_script_interpreter and elf_script_program over the raw bytes. Each accepted value must lie within its bounds, and
 * an interpreter must be a non-empty name without blanks that fits its buffer. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elf_image.h"
#include "fuzz_input.h"
#include "units.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  const char *rest;
  const char *value = fuzz_split_first_line(text, &rest);
  static const uint64_t bounds[][2] = {{0, UINT64_MAX}, {6, 1000}, {1, 2147483647}, {0, 4294967294u}};
  for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++) {
    uint64_t count = 0;
    if (parse_count(value, bounds[i][0], bounds[i][1], &count) && (count < bounds[i][0] || count > bounds[i][1]))
      abort();
  }
  static const double ranges[][2] = {{0, 86400}, {0.05, 86400}, {0.01, 100}, {0, 604800}, {0, 1e308}};
  for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
    double number = -1;
    if (parse_decimal(value, ranges[i][0], ranges[i][1], &number) &&
        (!isfinite(number) || number < ranges[i][0] || number > ranges[i][1]))
      abort();
  }
  uint64_t bytes;
  if (parse_size(value, &bytes)) fuzz_keep(bytes);
  /* a release at least 2.38 is at least every earlier one, and a parsed release is at least 0.0 */
  if (version_at_least(value, 2, 38) && (!version_at_least(value, 2, 37) || !version_at_least(value, 1, 99) ||
                                         !version_at_least(value, 0, 0)))
    abort();
  /* a JSON number read back as a count: accepted only within [0, 2^63), and then as its whole part */
  if (size >= sizeof(double)) {
    double number;
    memcpy(&number, data, sizeof number);
    uint64_t count = 0;
    if (count_from_double(number, &count) && (count > INT64_MAX || (double)count > number || number - (double)count >= 1))
      abort();
  }
  char interpreter[16];
  for (size_t cap = 1; cap <= sizeof interpreter; cap += 5) {
    memset(interpreter, 'x', sizeof interpreter);
    if (elf_script_interpreter((const char *)data, size, interpreter, cap)) {
      size_t length = strnlen(interpreter, cap);
      if (length == 0 || length >= cap || strpbrk(interpreter, " \t\n")) abort();
    }
    memset(interpreter, 'x', sizeof interpreter);
    if (elf_script_program((const char *)data, size, interpreter, cap)) {
      size_t length = strnlen(interpreter, cap);
      if (length == 0 || length >= cap || strpbrk(interpreter, " \t\n")) abort();
    }
  }
  free(text);
  return 0;
}
