/* SPDX-License-Identifier: MIT */
/* parse_options.h - one declarative parser for every command's options, in the manner of git's
 * parse-options: a command declares a static table of its options (name, type, bounds, help) whose values
 * land in the fields of its own argument struct; parsing, the error messages and the options block of
 * `--help` all come from the table, so they cannot disagree.
 *
 * The parser is a pure function (argv in, values and operands out, an error message instead of output),
 * unit-tested (tests/unit/parse_options.cpp) and fuzzed (fuzz/command_options.c). A configuration file whose
 * keys are the long names (the agent's) goes through the same table with option_table_set. Rules, the same in every command:
 *   --name VALUE and --name=VALUE; -x VALUE for the few short names; "--" ends the options.
 *   A value never begins with "--" (`run --report -- CMD` is a missing value, not a file named "--").
 *   Names are never abbreviated: adding an option later never changes what an existing command line means.
 *   An unknown option is an error naming the closest known ones ("did you mean --dry-run?").
 *   A repeated option: the last one wins (as in most tools). */
#ifndef HUGIFY_PARSE_OPTIONS_H
#define HUGIFY_PARSE_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct json_output; /* cli.h */

enum option_type {
  OPTION_END = 0, /* ends a table */
  OPTION_GROUP,   /* a heading in the options block of --help (name: the heading) */
  OPTION_FLAG,    /* bool; no value */
  OPTION_COUNT,   /* uint64_t: decimal digits from low to high (parse_count) */
  OPTION_SIZE,    /* uint64_t: bytes as people write them, "2M", "1G" (parse_size), from low (high 0: no limit) */
  OPTION_DECIMAL, /* double: "0.5", "10" (parse_decimal), from low to high */
  OPTION_STRING,  /* const char *: any non-empty value (a file, a command, a regex) */
  OPTION_ENUM,    /* int: the index of the value in `choices` */
  OPTION_JSON,    /* struct json_output (cli.h): --json, or --json=FILE (the text on stdout, JSON to FILE) */
  OPTION_CALLBACK,/* any value, checked and stored by the option's `set` (a list entry, a bounded name) */
};

/* OPTION_CALLBACK's store: 0; -EINVAL when the value is bad (the message says "expected <expect>");
 * -ENOSPC when a list is full (the message says "at most <max>"). Pure, like the parser. */
typedef int (*option_set_fn)(void *values, const char *value);

struct option_spec {
  enum option_type type;
  const char *name;        /* without "--"; OPTION_GROUP: the heading */
  char short_name;         /* 0: none */
  const char *value_name;  /* in --help: "SIZE", "N", "FILE" */
  const char *help;        /* '\n' starts a continuation line, indented under the first */
  size_t offset;           /* where the value goes in the command's argument struct */
  const char *const *choices; /* OPTION_ENUM: the accepted words, NULL-terminated; OPTION_CALLBACK: the words
                                 the callback accepts, for help and completion (or NULL) */
  uint64_t min, max;       /* OPTION_COUNT, OPTION_SIZE: the bounds, inclusive (a size's max 0: none) */
  double low, high;        /* OPTION_DECIMAL: the bounds, inclusive */
  const char *expect;      /* what a bad value's message says is expected; NULL: said from the type */
  option_set_fn set;       /* OPTION_CALLBACK: checks and stores the value (repeat it for a list) */
};

#define OPT_GROUP(heading) {.type = OPTION_GROUP, .name = (heading)}
#define OPT_FLAG(long_name, short_char, type_, field, help_) \
  {.type = OPTION_FLAG, .name = (long_name), .short_name = (short_char), .help = (help_), .offset = offsetof(type_, field)}
#define OPT_COUNT(long_name, type_, field, value, low_, high_, help_) \
  {.type = OPTION_COUNT, .name = (long_name), .value_name = (value), .help = (help_), .offset = offsetof(type_, field), \
   .min = (low_), .max = (high_)}
#define OPT_SIZE(long_name, type_, field, value, low_, help_) \
  {.type = OPTION_SIZE, .name = (long_name), .value_name = (value), .help = (help_), .offset = offsetof(type_, field), \
   .min = (low_)}
#define OPT_DECIMAL(long_name, type_, field, value, low_, high_, help_) \
  {.type = OPTION_DECIMAL, .name = (long_name), .value_name = (value), .help = (help_), \
   .offset = offsetof(type_, field), .low = (low_), .high = (high_)}
#define OPT_STRING(long_name, type_, field, value, help_) \
  {.type = OPTION_STRING, .name = (long_name), .value_name = (value), .help = (help_), .offset = offsetof(type_, field)}
#define OPT_ENUM(long_name, type_, field, value, words, help_) \
  {.type = OPTION_ENUM, .name = (long_name), .value_name = (value), .help = (help_), .offset = offsetof(type_, field), \
   .choices = (words)}
#define OPT_JSON(type_, field, help_) \
  {.type = OPTION_JSON, .name = "json", .value_name = "[=FILE]", .help = (help_), .offset = offsetof(type_, field)}
/* A value the command checks and stores itself (`set`), such as one entry of a list (repeat the option). */
#define OPT_CALLBACK(long_name, value, set_, expect_, list_max, help_) \
  {.type = OPTION_CALLBACK, .name = (long_name), .value_name = (value), .help = (help_), .max = (list_max), \
   .expect = (expect_), .set = (set_)}
/* The same for a value from a fixed list of words that the command parses itself (its help, man page and
 * completion show the words). */
#define OPT_CALLBACK_WORDS(long_name, value, set_, words, expect_, help_) \
  {.type = OPTION_CALLBACK, .name = (long_name), .value_name = (value), .help = (help_), .expect = (expect_), \
   .set = (set_), .choices = (words)}
#define OPT_END {.type = OPTION_END}

/* How operands (words that are not options) are taken. */
enum option_mode {
  OPTIONS_ANYWHERE = 0,     /* options and operands mixed: `collapse 1234 --dry-run` */
  OPTIONS_THEN_COMMAND = 1, /* the first operand (or "--") starts a command line of its own: `run`, `check` */
};

#define OPTIONS_MAX_OPERANDS 1024 /* `inspect $(pidof ...)` */

struct option_result {
  int operands[OPTIONS_MAX_OPERANDS]; /* argv indexes of the operands, in order (OPTIONS_ANYWHERE) */
  int operand_count;
  int command;       /* OPTIONS_THEN_COMMAND: argv index where the command starts (argc when none) */
  uint64_t given;    /* bit i: options[i] appeared on the command line */
  char error[512];   /* set when parsing failed */
};

/* Parse argv[1..argc) into the fields of `values` by the table. 0, or -EINVAL with result->error set
 * ("--chunk '1M': expected a size of at least 2M, like 64M"; "unknown option '--dry'; did you mean
 * --dry-run?"). --help and -h are not in the tables: the command table answers them before parsing. */
int option_table_parse(const struct option_spec *options, enum option_mode mode, int argc, char **argv, void *values,
                  struct option_result *result);
/* One setting by its long name, as a configuration file gives it ("interval", "0.5"): the same checks and
 * the same store as on the command line; a flag takes a boolean word (options_parse_bool: true, yes, on,
 * 1...). Messages name the setting without "--" ("unknown setting 'frobnicate'; did you mean ...?").
 * --json is never a setting. 0, or -EINVAL with result->error set. */
int option_table_set(const struct option_spec *options, const char *name, const char *value, void *values,
                     struct option_result *result);
/* --json (value NULL) or --json=VALUE into `json`: "-" is stdout, an empty FILE is an error. 0, or -EINVAL with
 * the message in `error`. The one rule for the tables and for the commands that still parse by hand. */
int option_json_set(struct json_output *json, const char *value, char *error, size_t cap);
/* The table's own rules, as git's parse_options_check: at most OPTIONS_MAX_ROWS rows (result->given has a
 * bit per row), every row but a group has a name that no other row has, a short name at most once, an enum
 * its words, a callback its `set`, a count or decimal bounds low <= high. 0, or -EINVAL with the first bad
 * row named in `error` ("option table: --runs twice"). option_table_parse fails on a bad table, and the
 * build runs the check over every command's table (`hugify help --man`). */
#define OPTIONS_MAX_ROWS 64
int option_table_check(const struct option_spec *options, char *error, size_t cap);
/* Whether the option named `name` (long name) appeared. */
bool option_table_given(const struct option_spec *options, const struct option_result *result, const char *name);

/* The options block of --help, generated from the table: "  --name VALUE  help", aligned. */
void option_table_help(const struct option_spec *options, FILE *out);

#endif
