/* SPDX-License-Identifier: MIT */
/* bench_run.h - the run the files of `hugify bench` share: bench.c (options, the command), bench_plan.c
 * (the experiments and their plan), bench_timing.c (memory of each kind and the timing engine),
 * bench_absl.c (the external absl program), bench_tables.c (results: summary, tables, JSON) and
 * bench_chart.c (the chart of the results). They call each other one way: bench.c above the rest,
 * bench_plan.c below them. */
#ifndef HUGIFY_CLI_BENCH_RUN_H
#define HUGIFY_CLI_BENCH_RUN_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "bench.h"
#include "cli.h"
#include "hugify.h"
#include "measure.h"

#define COMMAND "bench"
#define MIN_SIZE (UINT64_C(8) << 10)
#define HASH_MAX_SIZE (UINT64_C(1) << 30)
#define COVERAGE_MIN 0.95
#define INTERLEAVED_BUDGET (UINT64_C(4) << 30) /* all kinds' buffers at once, at most */
#define NOISY_SPREAD 0.10      /* a point whose (max - min) / median exceeds this is noisy */
#define MAX_REPEATS 8
#define CONFIDENCE 0.95
#define KINDS HUGIFY_PAGE_KIND_COUNT

enum experiment { EXP_RANDOM, EXP_CHASE, EXP_TOUCH, EXP_HASH, EXP_STRINGS, EXP_ABSL, EXP_COUNT };



/* A planned measurement: a working-set size (and for strings, the number of strings). */
struct item {
  uint64_t size, count;
};

struct point {
  enum experiment experiment;
  enum hugify_page_kind kind;
  struct item item;
  uint64_t size;     /* measured working set (strings: the bytes really used) */
  uint64_t ops;      /* operations timed, over all repetitions */
  int repeats;
  double ns[MAX_REPEATS];      /* ns per operation (touch: per 4 KiB), per repetition */
  double system[MAX_REPEATS];  /* kernel seconds, per repetition */
  double seconds[MAX_REPEATS]; /* touch: the whole first touch, per repetition */
  bool interleaved;  /* repetitions interleaved with the other kinds' (false: too large to hold them all) */
  double coverage;   /* share of the working set on this kind's pages, measured before timing */
  /* summarised (summarise()) */
  struct measure_spread spread;  /* of ns */
  double speedup, speedup_min, speedup_max; /* 4K ns / this ns, per repetition: median, min, max */
  bool tie;          /* within the 4K baseline's spread: no measurable difference */
};

struct kind_state {
  bool selected;
  bool attempted;
  uint64_t wanted, largest;/* bytes asked for and the largest block had */
  char reason[HUGIFY_REASON_MAX];
  char enable[160];
};

struct absl_run {
  char allocator[16];
  double count, seconds, seconds_min, seconds_max, huge_fraction;
  int repeat;
};

struct bench {
  int step_done, step_total; /* progress */
  /* settings */
  bool quick, run[EXP_COUNT], experiments_named, absl_named, kinds_named;
  uint64_t max_size;
  struct json_output json; /* --json / --json=FILE */
  const char *chart_path;
  FILE *json_file;          /* opened before the run, so a bad path fails at once */
  struct output_file chart; /* --chart: its stream is open (NULL without --chart) from the start */
  unsigned unavailable; /* bit per kind: HUGIFY_BENCH_UNAVAILABLE */
  int inject_noise;     /* --inject-noise KIND: that kind, or -1 */
  double target_seconds;
  int repeats, octaves;
  /* plan */
  struct item items[EXP_COUNT][40];
  int item_count[EXP_COUNT];
  /* results */
  struct hugify_system system;
  struct kind_state kinds[KINDS];
  struct point *points;
  size_t point_count, point_cap;
  bool absl_ran;
  char absl_reason[HUGIFY_REASON_MAX], absl_program[PATH_MAX];
  struct absl_run absl[2];
  int absl_count;
  bool backing_failed;
  double started, seconds;
  uint64_t mem_available;
  char cpu[128];
  struct measure_noise machine;
  char noise[512]; /* the likely cause when points are noisy, "" if none */
};

/* bench_plan.c (the experiments and their plan; it calls no other file of the bench) */
struct experiment_info {
  const char *name, *title, *unit;
};
extern const struct experiment_info experiment_info[EXP_COUNT];
/* The working-set sizes of every experiment that runs, within b->max_size. */
void plan_experiments(struct bench *b);
/* Bytes the kind's buffer must hold for every planned measurement but the first touch. */
uint64_t buffer_wanted(const struct bench *b);

/* bench_timing.c */
void run_all(struct bench *b);

/* bench_absl.c */
void run_absl(struct bench *b);

/* bench_tables.c */
const struct point *find_point(const struct bench *b, enum experiment e, enum hugify_page_kind kind,
                                      const struct item *item);
void summarise(struct bench *b);
bool low_coverage(const struct point *p);
bool noisy(const struct point *p);
size_t noisiest_series(const struct bench *b, struct measure_noise_series *out);
bool experiment_has_points(const struct bench *b, enum experiment e);
bool kind_short(const struct bench *b, enum hugify_page_kind kind);
void kind_skip_text(const struct bench *b, enum hugify_page_kind kind, char *out, size_t cap);
void print_tables(const struct bench *b, FILE *out);
void write_json(const struct bench *b, FILE *out, int exit_status);

/* bench_chart.c */
int write_chart(const struct bench *b, FILE *out);

#endif
