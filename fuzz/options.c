/* SPDX-License-Identifier: MIT */
/* Option values from the environment: the input is an environment block ("NAME=value" lines) given to
 * options_parse as its lookup, as the preload and `hugify run` see HUGIFY_*; every value is also tried as
 * a size (parse_size), a heap mode and a page kind, the value parsers the CLI's options use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "hugify.h"
#include "options.h"
#include "units.h"

struct environment {
  const char *names[32], *values[32];
  size_t count;
};

static const char *lookup(const char *name, void *context) {
  const struct environment *environment = context;
  for (size_t i = 0; i < environment->count; i++)
    if (strcmp(environment->names[i], name) == 0) return environment->values[i];
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  struct environment environment = {.count = 0};
  for (char *line = text, *next; line && environment.count < 32; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    char *equals = strchr(line, '=');
    if (!equals) continue;
    *equals = '\0';
    environment.names[environment.count] = line;
    environment.values[environment.count++] = equals + 1;
  }
  struct hugify_options options;
  char warnings[512];
  warnings[0] = '\0';
  options_parse(lookup, &environment, &options, warnings, sizeof warnings);
  char small[8] = "";
  options_parse(lookup, &environment, &options, small, sizeof small);
  for (size_t i = 0; i < environment.count; i++) {
    const char *value = environment.values[i];
    uint64_t bytes;
    if (parse_size(value, &bytes)) {
      char formatted[32];
      format_bytes(bytes, formatted, sizeof formatted);
      format_page_size(bytes, formatted, sizeof formatted);
    }
    enum heap_mode heap;
    if (options_parse_heap(value, &heap)) (void)options_heap_name(heap);
    enum hugify_page_kind kind;
    hugify_page_kind_parse(value, &kind);
  }
  free(text);
  return 0;
}
