/* SPDX-License-Identifier: MIT */
/* options.c - every HUGIFY_* environment variable, parsed in one place. */
#include "options.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "os.h"
#include "procfs.h"
#include "units.h"

bool options_parse_bool(const char *text, bool *out) {
  static const char *const yes[] = {"1", "on", "yes", "true"}, *const no[] = {"0", "off", "no", "false", ""};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) if (words_equal(text, yes[i])) { *out = true; return true; }
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) if (words_equal(text, no[i])) { *out = false; return true; }
  return false;
}

const char *const options_heap_words[HEAP_MODE_COUNT + 1] = {"off", "auto", "thp", "hugetlb", "mimalloc", "jemalloc",
                                                            "tcmalloc", NULL};

const char *options_heap_name(enum heap_mode mode) {
  return (unsigned)mode < HEAP_MODE_COUNT ? options_heap_words[mode] : "?";
}

const char *options_text_name(enum text_mode mode) { return mode == TEXT_AUTO ? "auto" : mode ? "1" : "0"; }

bool options_heap_is_engine(enum heap_mode mode) {
  return mode == HEAP_MIMALLOC || mode == HEAP_JEMALLOC || mode == HEAP_TCMALLOC;
}

bool options_parse_heap(const char *text, enum heap_mode *out) {
  for (size_t i = 0; i < HEAP_MODE_COUNT; i++)
    if (words_equal(text, options_heap_words[i])) { *out = (enum heap_mode)i; return true; }
  return false;
}

/* A process id: 1 .. INT_MAX. */
static bool parse_pid(const char *text, int *out) {
  uint64_t value;
  if (!parse_u64(text, &value) || value < 1 || value > INT_MAX) return false;
  *out = (int)value;
  return true;
}

static bool copy_string(const char *text, char *out, size_t cap) {
  if (strlen(text) >= cap) return false;
  memcpy(out, text, strlen(text) + 1);
  return true;
}

bool options_parse_kinds(const char *text, unsigned *out) {
  char copy[64], *save = NULL;
  if (snprintf(copy, sizeof copy, "%s", text) >= (int)sizeof copy) return false;
  unsigned kinds = 0;
  for (char *word = strtok_r(copy, ",", &save); word; word = strtok_r(NULL, ",", &save)) {
    enum hugify_page_kind kind;
    if (hugify_page_kind_parse(word, &kind) != 0) return false;
    kinds |= 1u << kind;
  }
  *out = kinds;
  return true;
}

enum option_type {
  OPT_BOOL, OPT_HEAP, OPT_SIZE, OPT_STRING, OPT_STEP, OPT_KINDS, OPT_PID, OPT_TEXT, OPT_TEXT_PAGES, OPT_MILLISECONDS,
  OPT_CPU_MILLISECONDS
};
struct option_row {
  const char *name;
  enum option_type type;
  size_t offset, cap;
  const char *expected;
};
#define OPT(name, type, member, expected) \
  {name, type, offsetof(struct hugify_options, member), sizeof(((struct hugify_options *)0)->member), expected}
/* The options (docs/run.md lists each). */
static const struct option_row option_table[] = {
    OPT("HUGIFY_VERBOSE", OPT_BOOL, verbose, "0 or 1"),
    OPT("HUGIFY_TEXT", OPT_TEXT, text, "0, 1 or auto"),
    OPT("HUGIFY_TEXT_AFTER_MS", OPT_CPU_MILLISECONDS, text_after_ms, "milliseconds of CPU time from 0 to 3600000"),
    OPT("HUGIFY_HEAP", OPT_HEAP, heap, "off|auto|thp|hugetlb|mimalloc|jemalloc|tcmalloc"),
    OPT("HUGIFY_REPORT", OPT_STRING, report, "a file path or -"),
    OPT("HUGIFY_REPORT_JSON", OPT_BOOL, report_json, "0 or 1"),
    OPT("HUGIFY_RUN_PID", OPT_PID, run_pid, "a process id"),
    OPT("HUGIFY_PRELOAD_PATH", OPT_STRING, preload_path, "the path of libhugify-preload.so"),
    OPT("HUGIFY_PERF_MAP", OPT_BOOL, perf_map, "0 or 1"),
    OPT("HUGIFY_TEXT_MAIN_ONLY", OPT_BOOL, text_main_only, "0 or 1"),
    OPT("HUGIFY_TEXT_MIN_SIZE", OPT_SIZE, text_min_size, "a size such as 2M"),
    OPT("HUGIFY_TEXT_INCLUDE", OPT_STRING, text_include, "patterns separated by ':'"),
    OPT("HUGIFY_TEXT_EXCLUDE", OPT_STRING, text_exclude, "patterns separated by ':'"),
    OPT("HUGIFY_TEXT_PAGES", OPT_TEXT_PAGES, text_hugetlb, "thp or 2M"),
    OPT("HUGIFY_RUNTIME_ARENAS", OPT_BOOL, runtime_arenas, "0 or 1"),
    OPT("HUGIFY_PEAK_INTERVAL_MS", OPT_MILLISECONDS, peak_interval_ms, "milliseconds from 0 to 10000"),
};
/* TEST ONLY: the test suite's knobs (struct hugify_test_options; docs/run.md, "Test-only variables"). */
static const struct option_row test_option_table[] = {
    OPT("HUGIFY_TEXT_FAIL_STEP", OPT_STEP, test.text_fail_step, "a step number from 1 to 99"),
    OPT("HUGIFY_BENCH_UNAVAILABLE", OPT_KINDS, test.bench_unavailable, "page kinds such as 2M,1G"),
    OPT("HUGIFY_ALLOCATOR_DIRS", OPT_STRING, test.allocator_dirs, "directories separated by ':'"),
};
#undef OPT

static bool parse_one(enum option_type type, const char *text, void *field, size_t cap) {
  uint64_t number;
  switch (type) {
  case OPT_BOOL: return options_parse_bool(text, field);
  case OPT_HEAP: return options_parse_heap(text, field);
  case OPT_PID: return parse_pid(text, field);
  case OPT_SIZE: return parse_size(text, field);
  case OPT_STRING: return copy_string(text, field, cap);
  case OPT_KINDS: return options_parse_kinds(text, field);
  case OPT_TEXT: {
    bool on;
    if (words_equal(text, "auto")) *(enum text_mode *)field = TEXT_AUTO;
    else if (options_parse_bool(text, &on)) *(enum text_mode *)field = on ? TEXT_NOW : TEXT_OFF;
    else return false;
    return true;
  }
  case OPT_TEXT_PAGES:
    if (!words_equal(text, "thp") && !words_equal(text, "2m") && !words_equal(text, "2mb")) return false;
    *(bool *)field = !words_equal(text, "thp");
    return true;
  case OPT_STEP:
    if (!parse_size(text, &number) || number < 1 || number > 99) return false;
    *(int *)field = (int)number;
    return true;
  case OPT_MILLISECONDS:
    if (!parse_u64(text, &number) || number > 10000) return false;
    *(unsigned *)field = (unsigned)number;
    return true;
  case OPT_CPU_MILLISECONDS:
    if (!parse_u64(text, &number) || number > 3600000) return false;
    *(unsigned *)field = (unsigned)number;
    return true;
  }
  return false;
}

/* Each row whose variable is set: parsed into out, or one warning. Returns the number of bad values. */
static int parse_rows(const struct option_row *rows, size_t count, options_lookup lookup, void *context,
                      struct hugify_options *out, char *warnings, size_t cap) {
  int bad = 0;
  for (size_t i = 0; i < count; i++) {
    const char *text = lookup(rows[i].name, context);
    if (!text) continue;
    if (parse_one(rows[i].type, text, (char *)out + rows[i].offset, rows[i].cap)) continue;
    bad++;
    reason_add(warnings, cap, "%s=%s: expected %s; using the default", rows[i].name, text, rows[i].expected);
  }
  return bad;
}

_Static_assert(offsetof(struct hugify_options, report) > offsetof(struct hugify_options, test) &&
                   offsetof(struct hugify_options, test) > offsetof(struct hugify_options, peak_interval_ms),
               "the scalars come first, the strings last (options.h)");

/* The defaults that are not zero, then each variable that is set, onto a zeroed *out. */
static int parse_onto_zero(options_lookup lookup, void *context, struct hugify_options *out, char *warnings,
                           size_t cap) {
  out->heap = HEAP_OFF;
  out->peak_interval_ms = 20;
  out->text_after_ms = OPTIONS_TEXT_AFTER_MS;
  out->runtime_arenas = true;
  return parse_rows(option_table, sizeof option_table / sizeof option_table[0], lookup, context, out, warnings,
                    cap) +
         parse_rows(test_option_table, sizeof test_option_table / sizeof test_option_table[0], lookup, context, out,
                    warnings, cap);
}

int options_parse(options_lookup lookup, void *context, struct hugify_options *out, char *warnings, size_t cap) {
  memset(out, 0, sizeof *out);
  return parse_onto_zero(lookup, context, out, warnings, cap);
}

/* The HUGIFY_* entries of the environment, collected in one pass over environ (the preload's start reads
 * all 19 variables; one getenv each walked the whole environment 19 times). The first entry of a name wins,
 * as with getenv. */
#define ENVIRONMENT_HUGIFY_MAX 64
struct environment_hugify {
  const char *entries[ENVIRONMENT_HUGIFY_MAX]; /* "HUGIFY_NAME=value" */
  size_t count;
};

static const char *lookup_environment(const char *name, void *context) {
  const struct environment_hugify *found = context;
  size_t length = strlen(name);
  for (size_t i = 0; i < found->count; i++)
    if (strncmp(found->entries[i], name, length) == 0 && found->entries[i][length] == '=')
      return found->entries[i] + length + 1;
  return NULL;
}

/* In a setuid/setgid or file-capability program (AT_SECURE, e.g. the preload installed through
 * /etc/ld.so.preload) every HUGIFY_* variable reads as unset, as secure_getenv would say, so an unprivileged
 * user cannot steer where a privileged process writes its report or perf map, or what it does to its memory. */
int options_from_environment(struct hugify_options *out, char *warnings, size_t cap) {
  extern char **environ;
  struct environment_hugify found = {.count = 0};
  if (!getauxval(AT_SECURE))
    for (char **entry = environ; entry && *entry && found.count < ENVIRONMENT_HUGIFY_MAX; entry++)
      if ((*entry)[0] == 'H' && strncmp(*entry, "HUGIFY_", 7) == 0) /* a call only for names that may match */
        found.entries[found.count++] = *entry;
  return parse_onto_zero(lookup_environment, &found, out, warnings, cap);
}
