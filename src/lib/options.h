/* options.h - every HUGIFY_* environment variable, declared and parsed in one place (options.c). */
#ifndef HUGIFY_OPTIONS_H
#define HUGIFY_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum heap_mode { HEAP_OFF = 0, HEAP_AUTO, HEAP_THP, HEAP_HUGETLB };

struct hugify_options {
  bool verbose;          /* HUGIFY_VERBOSE=1: one line on stderr per failure inside the host */
  bool text;             /* HUGIFY_TEXT=1: remap code onto huge pages before main */
  enum heap_mode heap;   /* HUGIFY_HEAP=off|auto|thp|hugetlb */
  char report[4096];     /* HUGIFY_REPORT=FILE|-: the exit report (JSON to FILE, text to stderr for -) */
  bool perf_map;         /* HUGIFY_PERF_MAP=1: write /tmp/perf-PID.map for moved code */
  bool text_main_only;   /* HUGIFY_TEXT_MAIN_ONLY=1: only the main executable */
  uint64_t text_min_size;/* HUGIFY_TEXT_MIN_SIZE=SIZE: skip objects with less code */
  char text_include[1024];/* HUGIFY_TEXT_INCLUDE=PAT[:PAT...]: only objects whose path matches (fnmatch) */
  char text_exclude[1024];/* HUGIFY_TEXT_EXCLUDE=PAT[:PAT...]: never these */
  int text_fail_step;    /* HUGIFY_TEXT_FAIL_STEP=K: test-only fault injection, 0 = off */
};

/* The lookup returns the value of a variable or NULL (getenv, or a table in tests). */
typedef const char *(*options_lookup)(const char *name, void *context);

/* Fill *out from the variables: defaults first, then each variable that is set. A bad value keeps the
 * default and adds one clause to `warnings` ("HUGIFY_HEAP=banana: expected off|auto|thp|hugetlb").
 * Returns the number of bad values. Pure: no I/O beyond the lookup. */
int options_parse(options_lookup lookup, void *context, struct hugify_options *out, char *warnings, size_t cap);

/* options_parse over the process environment. */
int options_from_environment(struct hugify_options *out, char *warnings, size_t cap);

#endif
