/* SPDX-License-Identifier: MIT */
/* options.h - every HUGIFY_* environment variable, declared and parsed in one place (options.c). */
#ifndef HUGIFY_OPTIONS_H
#define HUGIFY_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* HUGIFY_HEAP: what the preload does for the heap (docs/run.md). mimalloc/jemalloc: `hugify run` preloads
 * that allocator with its huge-page options; the preload itself then leaves the heap alone. tcmalloc:
 * gperftools' TCMalloc, which has no huge-page option: the preload places and advises its mmap()s. */
enum heap_mode { HEAP_OFF = 0, HEAP_AUTO, HEAP_THP, HEAP_HUGETLB, HEAP_MIMALLOC, HEAP_JEMALLOC, HEAP_TCMALLOC,
                 HEAP_MODE_COUNT };

/* HUGIFY_TEXT: when the preload remaps the code (docs/run.md "When the code moves"). TEXT_AUTO waits until
 * the process has used HUGIFY_TEXT_AFTER_MS of CPU time, so a short program never pays for the copy. */
enum text_mode { TEXT_OFF = 0, TEXT_NOW, TEXT_AUTO };

/* The scalars come first and the strings last: the preload's options are a static, and a process that sets
 * no string variable touches only the struct's first cache lines, not the 11 KiB of its strings (each fresh
 * page of .bss written is a page fault a 1 ms program feels; see options_from_environment). */
struct hugify_options {
  bool verbose;          /* HUGIFY_VERBOSE=1: one line on stderr per failure inside the host */
  enum text_mode text;   /* HUGIFY_TEXT=0|1|auto: 1 remaps code onto huge pages before main, auto once the
                            process has used text_after_ms of CPU (`hugify run`'s default) */
  unsigned text_after_ms;/* HUGIFY_TEXT_AFTER_MS=N: with HUGIFY_TEXT=auto, the process CPU time (ms) after which
                            the code is remapped (default 200; 0 = before main) */
  enum heap_mode heap;   /* HUGIFY_HEAP=off|auto|thp|hugetlb|mimalloc|jemalloc|tcmalloc */
  bool report_json;      /* HUGIFY_REPORT_JSON=1: with HUGIFY_REPORT=-, JSON on stderr instead of text */
  int run_pid;           /* HUGIFY_RUN_PID=PID: the process `hugify run` started (set by the CLI; when absent,
                            the first process that loads the preload sets it to its own pid); any other
                            process writes its report to FILE.<pid> and keeps quiet on stderr */
  bool perf_map;         /* HUGIFY_PERF_MAP=1: write /tmp/perf-PID.map for moved code */
  bool text_main_only;   /* HUGIFY_TEXT_MAIN_ONLY=1: only the main executable */
  uint64_t text_min_size;/* HUGIFY_TEXT_MIN_SIZE=SIZE: skip objects with less code */
  bool text_hugetlb;     /* HUGIFY_TEXT_PAGES=thp|2M: 2M = code on hugetlb pages when the pool has them */
  bool runtime_arenas;   /* HUGIFY_RUNTIME_ARENAS (default 1; 0 turns it off): with --heap auto|thp, anonymous
                            read+write mmaps of 64 KiB to 2 MiB after a process's first 8 (a runtime's arenas:
                            CPython's 1 MiB) are carved out of 2 MiB-aligned, advised regions of the preload's
                            (docs/runtimes.md) */
  unsigned peak_interval_ms; /* HUGIFY_PEAK_INTERVAL_MS=N: with a report, how often the preload samples the
                                process's memory to catch its peak (default 20; 0 = only before large unmaps) */
  /* TEST ONLY: the test suite's knobs, parsed from options.c's test_option_table (no user sets them: they
   * are not in docs/run.md's list of options, but in its "Test-only variables"). */
  struct hugify_test_options {
    int text_fail_step;          /* HUGIFY_TEXT_FAIL_STEP=K: step K of the text remap fails, 0 = off */
    unsigned bench_unavailable;  /* HUGIFY_BENCH_UNAVAILABLE=KIND[,KIND]: hugify bench treats these page kinds
                                    as unavailable (bit 1 << enum hugify_page_kind) */
    char allocator_dirs[1024];   /* HUGIFY_ALLOCATOR_DIRS=DIR[:DIR...]: read by the CLI only: where --heap
                                    mimalloc|jemalloc|tcmalloc looks for the allocator instead of the system's
                                    library directories (an empty directory: as if none were installed) */
  } test;
  char report[4096];     /* HUGIFY_REPORT=FILE|-: the exit report (JSON to FILE, text to stderr for -) */
  char text_include[1024];/* HUGIFY_TEXT_INCLUDE=PAT[:PAT...]: only objects whose path matches (fnmatch) */
  char text_exclude[1024];/* HUGIFY_TEXT_EXCLUDE=PAT[:PAT...]: never these */
  char preload_path[4096];/* HUGIFY_PRELOAD_PATH=FILE: read by the CLI only: libhugify-preload.so to use
                            instead of the one next to the hugify binary */
};

/* HUGIFY_TEXT_AFTER_MS's default: see docs/run.md "When the code moves" for the figures behind it. */
#define OPTIONS_TEXT_AFTER_MS 200

/* The lookup returns the value of a variable or NULL (getenv, or a table in tests). */
typedef const char *(*options_lookup)(const char *name, void *context);

/* Fill *out from the variables: defaults first, then each variable that is set. A bad value keeps the
 * default and adds one clause to `warnings` ("HUGIFY_HEAP=banana: expected off|auto|thp|hugetlb").
 * Returns the number of bad values. Pure: no I/O beyond the lookup. */
int options_parse(options_lookup lookup, void *context, struct hugify_options *out, char *warnings, size_t cap);

/* "off", "auto", ... for a heap mode; the parser of HUGIFY_HEAP values (also for `hugify run --heap`). */
const char *options_heap_name(enum heap_mode mode);
extern const char *const options_heap_words[]; /* the names, in enum order, NULL-terminated */
bool options_parse_heap(const char *text, enum heap_mode *out);
/* "0", "1" or "auto": HUGIFY_TEXT's value for a text mode. */
const char *options_text_name(enum text_mode mode);
/* The one boolean word parser (HUGIFY_* variables, the agent's configuration file): 1, on, yes, true and
 * 0, off, no, false, "" in any case. */
bool options_parse_bool(const char *text, bool *out);

/* Whether `hugify run` preloads an allocator for the mode (mimalloc, jemalloc, tcmalloc). */
bool options_heap_is_engine(enum heap_mode mode);
/* "2M,1G" -> a bit per enum hugify_page_kind (1 << kind); false on an unknown kind or an empty list. */
bool options_parse_kinds(const char *text, unsigned *out);

/* options_parse over the process environment, onto *out as it is: *out must start zeroed (a static, or
 * `= {0}`), and only the defaults that are not zero and the variables that are set are written. The preload's
 * start runs it in every process: clearing the whole struct wrote four fresh pages of .bss (four page
 * faults, about 8 us of a 0.6 ms /bin/true). */
int options_from_environment(struct hugify_options *out, char *warnings, size_t cap);

#endif
