/* SPDX-License-Identifier: MIT */
/* parse_options.c - the one option parser (parse_options.h). Pure: no output, no exit, no allocation. */
#include "parse_options.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "cli.h"
#include "options.h"
#include "units.h"

static int fail_with(struct option_result *result, const char *format, ...) __attribute__((format(printf, 2, 3)));
static int fail_with(struct option_result *result, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(result->error, sizeof result->error, format, args);
  va_end(args);
  return -EINVAL;
}

static void *field(void *values, const struct option_spec *o) { return (char *)values + o->offset; }


/* Levenshtein distance of a and b, capped: anything above 3 is 4 (only near misses are suggested). */
static unsigned distance(const char *a, size_t na, const char *b) {
  size_t nb = strlen(b);
  if (na > 40 || nb > 40) return 4;
  unsigned row[41];
  for (size_t j = 0; j <= nb; j++) row[j] = (unsigned)j;
  for (size_t i = 1; i <= na; i++) {
    unsigned diagonal = row[0];
    row[0] = (unsigned)i;
    for (size_t j = 1; j <= nb; j++) {
      unsigned above = row[j];
      unsigned best = diagonal + (a[i - 1] != b[j - 1]);
      if (row[j] + 1 < best) best = row[j] + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diagonal = above;
    }
  }
  return row[nb] > 3 ? 4 : row[nb];
}

/* How a message names an option: "--name" on the command line, "name" in a configuration file. */
struct option_source {
  const char *what;   /* "option", "setting" */
  const char *dashes; /* "--", "" */
};
static const struct option_source command_line = {"option", "--"}, configuration = {"setting", ""};

/* "unknown option '--dry'; did you mean --dry-run?": the options the word begins, or is within two edits
 * of (three of them at most). */
static int unknown(const struct option_spec *options, const char *word, size_t length, const struct option_source *source,
                   struct option_result *result) {
  char suggestions[256] = "";
  size_t used = 0;
  int found = 0;
  for (const struct option_spec *o = options; o->type != OPTION_END && found < 3; o++) {
    if (o->type == OPTION_GROUP) continue;
    bool near = (length >= 2 && strncmp(o->name, word, length) == 0) || distance(word, length, o->name) <= 2;
    if (!near) continue;
    int n = snprintf(suggestions + used, sizeof suggestions - used, "%s%s%s", found ? " or " : "", source->dashes,
                     o->name);
    if (n < 0 || (size_t)n >= sizeof suggestions - used) break;
    used += (size_t)n;
    found++;
  }
  return fail_with(result, "unknown %s '%s%.*s'%s%s%s", source->what, source->dashes, (int)length, word,
                   found ? "; did you mean " : "", suggestions, found ? "?" : "");
}

static void expectation(const struct option_spec *o, char *out, size_t cap) {
  if (o->expect) {
    snprintf(out, cap, "%s", o->expect);
    return;
  }
  char low[32], high[32];
  switch (o->type) {
  case OPTION_COUNT:
    snprintf(out, cap, "%llu to %llu", (unsigned long long)o->min, (unsigned long long)o->max);
    return;
  case OPTION_DECIMAL: {
    /* "seconds from 0.1 to 86400" when the value has a name, else "a number from ..." */
    char name[32] = "a number";
    if (o->value_name) {
      size_t i = 0;
      for (; o->value_name[i] && i < sizeof name - 1; i++)
        name[i] = (char)(o->value_name[i] >= 'A' && o->value_name[i] <= 'Z' ? o->value_name[i] + 32 : o->value_name[i]);
      name[i] = '\0';
    }
    snprintf(out, cap, "%s from %g to %g", name, o->low, o->high);
    return;
  }
  case OPTION_SIZE:
    format_page_size(o->min, low, sizeof low);
    if (o->max > 0) {
      format_page_size(o->max, high, sizeof high);
      snprintf(out, cap, "a size from %s to %s, like 2M or 1G", low, high);
    } else if (o->min > 0) {
      snprintf(out, cap, "a size of at least %s, like 2M or 1G", low);
    } else {
      snprintf(out, cap, "a size like 2M or 1G");
    }
    return;
  case OPTION_ENUM: {
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; o->choices[i]; i++) {
      const char *sep = !o->choices[i + 1] && i ? " or " : i ? ", " : "";
      int n = snprintf(out + used, cap - used, "%s%s", sep, o->choices[i]);
      if (n < 0 || (size_t)n >= cap - used) return;
      used += (size_t)n;
    }
    return;
  }
  default:
    snprintf(out, cap, "a value");
  }
}

/* Store `value` (never NULL here) into the option's field, checked by its type. */
static int store(const struct option_spec *o, const char *value, void *values, const struct option_source *source,
                 struct option_result *result) {
  bool ok = true;
  switch (o->type) {
  case OPTION_CALLBACK: {
    int rc = o->set(values, value);
    if (rc == -ENOSPC)
      return fail_with(result, "%s%s '%s': at most %llu of them", source->dashes, o->name, value,
                       (unsigned long long)o->max);
    ok = rc == 0;
    break;
  }
  case OPTION_COUNT: {
    uint64_t v;
    ok = parse_count(value, o->min, o->max, &v);
    if (ok) *(uint64_t *)field(values, o) = v;
    break;
  }
  case OPTION_SIZE: {
    uint64_t v;
    ok = parse_size(value, &v) && v >= o->min && (o->max == 0 || v <= o->max);
    if (ok) *(uint64_t *)field(values, o) = v;
    break;
  }
  case OPTION_DECIMAL: {
    double v;
    ok = parse_decimal(value, o->low, o->high, &v);
    if (ok) *(double *)field(values, o) = v;
    break;
  }
  case OPTION_STRING:
    ok = value[0] != '\0';
    if (ok) *(const char **)field(values, o) = value;
    break;
  case OPTION_ENUM:
    ok = false;
    for (int i = 0; o->choices[i]; i++)
      if (strcmp(o->choices[i], value) == 0) {
        *(int *)field(values, o) = i;
        ok = true;
      }
    break;
  default:
    break;
  }
  if (ok) return 0;
  char expected[256];
  expectation(o, expected, sizeof expected);
  return fail_with(result, "%s%s '%s': expected %s", source->dashes, o->name, value, expected);
}

static const struct option_spec *find_long(const struct option_spec *options, const char *name, size_t length) {
  for (const struct option_spec *o = options; o->type != OPTION_END; o++)
    if (o->type != OPTION_GROUP && strlen(o->name) == length && strncmp(o->name, name, length) == 0) return o;
  return NULL;
}

static const struct option_spec *find_short(const struct option_spec *options, char name) {
  for (const struct option_spec *o = options; o->type != OPTION_END; o++)
    if (o->type != OPTION_GROUP && o->short_name == name) return o;
  return NULL;
}

/* One option word at argv[*i] (its value may be the next word). */
static int take_option(const struct option_spec *options, int argc, char **argv, int *i, void *values,
                       struct option_result *result) {
  const char *word = argv[*i];
  const struct option_spec *o;
  const char *inline_value = NULL;
  if (word[1] == '-') {
    const char *name = word + 2, *equals = strchr(name, '=');
    size_t length = equals ? (size_t)(equals - name) : strlen(name);
    o = find_long(options, name, length);
    if (!o) return unknown(options, name, length, &command_line, result);
    if (equals) inline_value = equals + 1;
  } else {
    o = word[2] == '\0' ? find_short(options, word[1]) : NULL;
    if (!o) return fail_with(result, "unknown option '%s'", word);
  }
  if (o - options < OPTIONS_MAX_ROWS) result->given |= UINT64_C(1) << (o - options);
  if (o->type == OPTION_FLAG) {
    if (inline_value) return fail_with(result, "--%s takes no value", o->name);
    *(bool *)field(values, o) = true;
    return 0;
  }
  if (o->type == OPTION_JSON) return option_json_set(field(values, o), inline_value, result->error, sizeof result->error);
  const char *value = inline_value;
  if (!value) {
    if (*i + 1 >= argc || strncmp(argv[*i + 1], "--", 2) == 0)
      return fail_with(result, "--%s needs a value (%s)", o->name, o->value_name ? o->value_name : "a value");
    value = argv[++*i];
  }
  return store(o, value, values, &command_line, result);
}

int option_table_set(const struct option_spec *options, const char *name, const char *value, void *values,
                     struct option_result *result) {
  memset(result, 0, sizeof *result);
  const struct option_spec *o = find_long(options, name, strlen(name));
  if (!o || o->type == OPTION_JSON) return unknown(options, name, strlen(name), &configuration, result);
  if (o - options < OPTIONS_MAX_ROWS) result->given |= UINT64_C(1) << (o - options);
  if (o->type == OPTION_FLAG) {
    if (!options_parse_bool(value, field(values, o))) return fail_with(result, "%s '%s': expected true or false", name, value);
    return 0;
  }
  return store(o, value, values, &configuration, result);
}

int option_table_check(const struct option_spec *options, char *error, size_t cap) {
  for (const struct option_spec *o = options; o->type != OPTION_END; o++) {
    const char *name = o->name ? o->name : "(no name)", *why = NULL;
    if (o - options >= OPTIONS_MAX_ROWS) why = "is past row 64 (the given-bits of option_result)";
    else if (!o->name || !o->name[0]) why = "has no name";
    else if (o->type == OPTION_ENUM && !o->choices) why = "is an enum without its words";
    else if (o->type == OPTION_CALLBACK && !o->set) why = "is a callback without its set function";
    else if (o->type == OPTION_COUNT && o->min > o->max) why = "has a lower bound above its upper bound";
    else if (o->type == OPTION_DECIMAL && !(o->low <= o->high)) why = "has a lower bound above its upper bound";
    for (const struct option_spec *p = options; !why && p < o; p++) {
      if (o->type != OPTION_GROUP && p->type != OPTION_GROUP && p->name && strcmp(p->name, o->name) == 0)
        why = "appears twice";
      else if (o->short_name && p->short_name == o->short_name)
        why = "has the short name of an earlier option";
    }
    if (why) {
      snprintf(error, cap, "option table: %s%s %s", o->type == OPTION_GROUP ? "group " : "--", name, why);
      return -EINVAL;
    }
  }
  return 0;
}

int option_table_parse(const struct option_spec *options, enum option_mode mode, int argc, char **argv, void *values,
                  struct option_result *result) {
  memset(result, 0, sizeof *result);
  result->command = argc;
  if (option_table_check(options, result->error, sizeof result->error) != 0) return -EINVAL;
  bool options_done = false;
  for (int i = 1; i < argc; i++) {
    const char *word = argv[i];
    bool is_option = !options_done && word[0] == '-' && word[1] != '\0';
    if (is_option && strcmp(word, "--") == 0) {
      options_done = true;
      if (mode == OPTIONS_THEN_COMMAND) {
        result->command = i + 1;
        return 0;
      }
      continue;
    }
    if (is_option) {
      int rc = take_option(options, argc, argv, &i, values, result);
      if (rc != 0) return rc;
      continue;
    }
    if (mode == OPTIONS_THEN_COMMAND) {
      result->command = i;
      return 0;
    }
    if (result->operand_count == OPTIONS_MAX_OPERANDS) return fail_with(result, "too many arguments ('%s')", word);
    result->operands[result->operand_count++] = i;
  }
  return 0;
}

int option_json_set(struct json_output *json, const char *value, char *error, size_t cap) {
  if (value && !value[0]) {
    snprintf(error, cap, "--json=FILE needs a file name ('--json=-' or '--json' for stdout)");
    return -EINVAL;
  }
  json->wanted = true;
  json->path = value && strcmp(value, "-") != 0 ? value : NULL;
  return 0;
}

bool option_table_given(const struct option_spec *options, const struct option_result *result, const char *name) {
  for (const struct option_spec *o = options; o->type != OPTION_END; o++)
    if (o->type != OPTION_GROUP && strcmp(o->name, name) == 0)
      return o - options < OPTIONS_MAX_ROWS && (result->given & (UINT64_C(1) << (o - options)));
  return false;
}

/* ---- --help --------------------------------------------------------------------------------------- */

#define HELP_COLUMN 20 /* where the help text starts; a longer name puts it on the next line */

void option_table_help(const struct option_spec *options, FILE *out) {
  for (const struct option_spec *o = options; o->type != OPTION_END; o++) {
    if (o->type == OPTION_GROUP) {
      fprintf(out, "%s%s:\n", o == options ? "" : "\n", o->name);
      continue;
    }
    char left[96];
    int n = o->short_name ? snprintf(left, sizeof left, "  -%c, --%s", o->short_name, o->name)
                          : snprintf(left, sizeof left, "  --%s", o->name);
    if (o->value_name && n > 0 && (size_t)n < sizeof left)
      snprintf(left + n, sizeof left - (size_t)n, "%s%s", o->type == OPTION_JSON ? "" : " ", o->value_name);
    size_t width = strlen(left);
    fputs(left, out);
    if (width + 2 > HELP_COLUMN) fprintf(out, "\n%*s", HELP_COLUMN, "");
    else fprintf(out, "%*s", (int)(HELP_COLUMN - width), "");
    for (const char *line = o->help ? o->help : ""; *line;) {
      size_t length = strcspn(line, "\n");
      fprintf(out, "%.*s\n", (int)length, line);
      line += length;
      if (*line == '\n' && *++line) fprintf(out, "%*s", HELP_COLUMN, "");
    }
    if (!o->help || !o->help[0]) fputc('\n', out);
  }
}
