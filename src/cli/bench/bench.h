/* SPDX-License-Identifier: MIT */
/* bench.h - what `hugify bench` is built from: the timed workloads (bench_workloads.c) and the SVG
 * chart writer (chart.c); hugify-workload uses the workloads too. The run itself: bench_run.h. */
#ifndef HUGIFY_CLI_BENCH_H
#define HUGIFY_CLI_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- random numbers: xoshiro256** seeded through splitmix64 ---- */
struct bench_rng {
  uint64_t s[4];
};
void bench_rng_seed(struct bench_rng *rng, uint64_t seed);
uint64_t bench_rng_next(struct bench_rng *rng);
/* Uniform in [0, n) (Lemire's multiply-shift; n > 0). */
uint64_t bench_rng_below(struct bench_rng *rng, uint64_t n);

/* ---- workloads ----
 * A workload is prepared on a buffer (memory of the page kind under test), then run for a number of
 * operations as often as the timer needs. run() returns a value derived from every load so the compiler
 * cannot drop them. */
struct workload {
  uint64_t (*run)(struct workload *w, uint64_t ops);
  void *buffer;
  size_t size;       /* bytes of the buffer the workload uses (its working set) */
  uint64_t count;    /* elements: words, lines, keys or strings */
  uint64_t mask;     /* hash tables: slots - 1 */
  void *cursor;      /* chase: the current node */
  uint64_t position; /* strings: next index into the shuffled order */
  uint32_t *order, *set;
  unsigned char *arena;
  struct bench_rng rng;
};

/* Independent random 8-byte reads over `size` bytes (throughput). */
void workload_random(struct workload *w, void *buffer, size_t size, uint64_t seed);
/* Dependent loads around one random cycle through every 64-byte line of `size` bytes (latency; Sattolo's
 * algorithm, so the walk visits every line before it repeats and no prefetcher can guess the next). */
void workload_chase(struct workload *w, void *buffer, size_t size, uint64_t seed);
/* Lookups of random present keys in an open-addressing (linear probing) table of `size` bytes (a power of
 * two), 16-byte slots, half full. */
void workload_hash(struct workload *w, void *buffer, size_t size, uint64_t seed);
/* `count` random strings of 8..19 bytes in an arena, indexed by an open-addressing set; run() looks them
 * up in shuffled order. All of it lives in `buffer`, which must hold strings_footprint(count) bytes. */
void workload_strings(struct workload *w, void *buffer, uint64_t count, uint64_t seed);
/* The workload `from` (as prepared, before any run) copied into `buffer`, its pointers moved there: the
 * same data on other memory without building it again. `buffer` must hold from->size bytes. */
void workload_copy(struct workload *w, const struct workload *from, void *buffer);
/* Bytes workload_strings needs for `count` strings (at most: the arena assumes the longest strings). */
uint64_t strings_footprint(uint64_t count);

/* ---- chart.c: line charts as SVG, several panels side by side, log-2 x axis ---- */
struct chart_series {
  const char *name;      /* legend and end label: "THP" */
  const char *color;     /* "#0072B2" */
  bool dashed;           /* the baseline */
  int count;
  const double *x, *y;   /* x > 0 (log scale) */
  const bool *hollow;    /* per point: drawn hollow (a flagged measurement); NULL = none */
  const double *low, *high; /* per point: the error bar (the spread of the measurement); NULL = none */
};
struct chart_panel {
  const char *id;        /* data-experiment attribute: "chase" */
  const char *title;     /* "chase: dependent loads" */
  const char *subtitle;  /* "speedup over 4 KiB pages (ns per load on 4 KiB at the largest size: 331)" */
  int series_count;
  const struct chart_series *series;
};
struct chart {
  const char *title, *subtitle, *x_label, *y_label, *footnote;
  int panel_count;
  const struct chart_panel *panels;
};
/* Write the chart as a standalone SVG document. Returns 0, or -errno when writing failed. */
int chart_write_svg(const struct chart *chart, FILE *out);

#endif
