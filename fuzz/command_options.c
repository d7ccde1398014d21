/* SPDX-License-Identifier: MIT */
/* Command lines against an option table of every type (src/cli/parse_options.c): the input's lines are
 * argv. Whatever the words, parsing either fails with a message or leaves every value within its bounds,
 * operands in order inside argv, and the command's start inside argv. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fuzz_input.h"
#include "parse_options.h"

struct values {
  bool flag;
  uint64_t count, size;
  double decimal;
  const char *string;
  int choice;
  struct json_output json;
  int items;
};

static int add_item(void *values, const char *value) {
  struct values *v = values;
  if (!value[0] || strlen(value) > 15) return -EINVAL;
  if (v->items == 4) return -ENOSPC;
  v->items++;
  return 0;
}

static const char *const choices[] = {"cpu", "wall", NULL};
static const struct option_spec table[] = {
    OPT_GROUP("Options"),
    OPT_FLAG("flag", 'f', struct values, flag, "a flag"),
    OPT_COUNT("count", struct values, count, "N", 6, 1000, "a count"),
    OPT_SIZE("size", struct values, size, "SIZE", 2 << 20, "a size"),
    OPT_DECIMAL("decimal", struct values, decimal, "S", 0.5, 3600, "a decimal"),
    OPT_STRING("string", struct values, string, "FILE", "a string"),
    OPT_ENUM("choice", struct values, choice, "WORD", choices, "a choice"),
    OPT_JSON(struct values, json, "JSON"),
    OPT_CALLBACK("item", "NAME", add_item, "a name", 4, "a list"),
    OPT_END,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  char *argv[66] = {"cmd"};
  int argc = 1;
  for (char *line = text, *next; line && argc < 65; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    argv[argc++] = line;
  }
  for (int mode = 0; mode < 2; mode++) {
    struct values v = {.count = 6, .size = 2 << 20, .decimal = 1};
    struct option_result result;
    int rc = option_table_parse(table, (enum option_mode)mode, argc, argv, &v, &result);
    if (rc != 0) {
      if (rc != -EINVAL || !result.error[0] || !memchr(result.error, '\0', sizeof result.error)) abort();
      continue;
    }
    if (v.count < 6 || v.count > 1000 || v.size < (2u << 20) || !(v.decimal >= 0.5 && v.decimal <= 3600)) abort();
    if (v.string && !v.string[0]) abort();
    if (v.choice < 0 || v.choice > 1) abort();
    if (result.command < 1 || result.command > argc) abort();
    for (int i = 0; i < result.operand_count; i++)
      if (result.operands[i] < 1 || result.operands[i] >= argc || (i && result.operands[i] <= result.operands[i - 1]))
        abort();
  }
  /* the same words as a configuration file's settings: name, then value */
  struct values v = {.count = 6, .size = 2 << 20, .decimal = 1};
  for (int i = 1; i + 1 < argc; i += 2) {
    struct option_result result;
    int rc = option_table_set(table, argv[i], argv[i + 1], &v, &result);
    if (rc != 0 && (rc != -EINVAL || !result.error[0])) abort();
  }
  if (v.count < 6 || v.count > 1000 || v.size < (2u << 20) || !(v.decimal >= 0.5 && v.decimal <= 3600)) abort();
  if (v.items > 4 || v.json.wanted) abort();
  free(text);
  return 0;
}
