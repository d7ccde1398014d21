/* SPDX-License-Identifier: MIT */
/* check.h - what `hugify check`'s files share (check.c runs the check, check_output.c prints it,
 * check_config.c holds the configurations both use): the configurations, the figures of each, the
 * verdict. Internal to the check command. The files call each other one way: check.c above the rest,
 * check_config.c below them. */
#ifndef HUGIFY_CHECK_H
#define HUGIFY_CHECK_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

#include "check_load.h"
#include "cli.h"
#include "hugify.h"
#include "inspect.h"
#include "measure.h"
#include "stats.h"

#define CHECK_CONFIDENCE 0.95
#define CHECK_PRECISION 0.02   /* adaptive: stop when every interval is within +-2 % of its estimate */
#define CHECK_MIN_GAIN 0.02    /* a gain below 2 % is not worth a configuration, even when it is real */
#define CHECK_MIN_TAIL_CHANGE 0.10 /* a tail latency worse by less than 10 % is not called out */
#define CHECK_MAX_ROUNDS MEASURE_MAX_ROUNDS
#define CHECK_DEFAULT_BUDGET 45.0
#define CHECK_LOG_TAIL 4096    /* bytes of a failed run's output shown */

/* ---- configurations ------------------------------------------------------------------------------ */

/* CONFIG_OUTSIDE is a static program's only one, and only a static program's (run_program_elf's outside). */
enum config_id { CONFIG_PLAIN, CONFIG_HEAP, CONFIG_HEAP_TEXT, CONFIG_TEXT, CONFIG_PYMALLOC_OFF, CONFIG_HUGETLB,
                 CONFIG_MIMALLOC, CONFIG_JEMALLOC, CONFIG_TCMALLOC, CONFIG_OUTSIDE, CONFIG_COUNT };

/* In order of simplicity: the verdict prefers an earlier one unless a later one is measurably better. */
struct config_kind {
  const char *name;
  const char *run_args[5]; /* the options of `hugify run`, NULL-terminated; none for plain */
  const char *what;
  const char *environment[2]; /* "NAME=VALUE" set for `hugify run` and CMD (a runtime's setting), NULL-ended */
  enum allocator_kind runtime; /* offered by default only for a CMD that runs this runtime; UNKNOWN: for any */
};
extern const struct config_kind config_kinds[CONFIG_COUNT]; /* check_config.c */

struct coverage {
  bool present;
  uint64_t heap_resident, heap_huge, anon_resident, anon_huge, text_resident, text_huge; /* bytes */
  double hugify_seconds;
  /* what --heap acts on (heap + anon) at the peak of each process, summed over the tree (peak.allocated);
   * at exit (heap + anon above) when the report has no peak */
  uint64_t data_resident, data_huge;
  bool data_at_peak;
  uint64_t peak_memory; /* RSS + hugetlb of the process of the tree that held the most (0: not reported) */
  char heap_owner[128]; /* the tree report's heap_owner: a sanitizer's (or valgrind's) allocator owns malloc; "" */
  /* what backs the data of the tree's largest process (the report's allocator: allocator_name's): "" unknown */
  char allocator[16];
};

/* The latency figures a load reports, per round. */
enum latency_figure { LATENCY_P50, LATENCY_P99, LATENCY_MAX, LATENCY_FIGURES };
extern const char *const latency_figure_names[LATENCY_FIGURES]; /* "p50", "p99", "max" (check_config.c) */

/* One latency figure of a configuration over the rounds: its median with the interval of the median, and
 * against plain's, paired per round (this / plain: > 1 is slower responses). rc 0 when measured in every
 * round (and for the ratio: in plain's too). */
struct latency_summary {
  int rc, ratio_rc;
  struct measure_spread spread;
  struct stats_interval ratio;
};

struct config {
  const struct config_kind *kind;
  enum config_id id;
  size_t runs;
  double wall[CHECK_MAX_ROUNDS], cpu[CHECK_MAX_ROUNDS], system[CHECK_MAX_ROUNDS];
  double max_rss[CHECK_MAX_ROUNDS], minor_faults[CHECK_MAX_ROUNDS];
  double peak_memory[CHECK_MAX_ROUNDS]; /* RSS + hugetlb pages (the report's), else max RSS (plain: wait4's) */
  double score[CHECK_MAX_ROUNDS];   /* --load: the score (or the load's wall time), per round */
  double ready[CHECK_MAX_ROUNDS];   /* --load: seconds from the server's start until it was ready */
  /* --load: the load's latency figures per round, seconds (NaN when it did not print one), and the tool */
  double latency[LATENCY_FIGURES][CHECK_MAX_ROUNDS];
  enum load_tool latency_tool;
  bool latency_estimated;
  struct coverage coverage;  /* from the last run's report */
  unsigned reports;          /* runs that wrote a report */
  struct hugify_counter_values counters; /* summed over the measured runs */
  unsigned counter_runs;
  /* results */
  int wall_ratio_rc, cpu_ratio_rc, ratio_rc;
  struct stats_interval wall_ratio, cpu_ratio; /* plain / this, per round, of wall and CPU time */
  struct stats_interval ratio;                 /* the one of the metric the verdict uses */
  struct latency_summary latency_summary[LATENCY_FIGURES];
};

struct failure {
  bool failed;
  int config, round, status, signal;
  bool warmup;  /* in a warm-up round (round counts those separately) */
  char *output; /* the tail of the run's output */
};

struct check {
  char self[PATH_MAX], hugify_word[PATH_MAX]; /* our executable; how to write `hugify` in the advice */
  char **command;                             /* CMD ARGS..., NULL-terminated */
  char *bundled_argv[8];
  char bundled_path[PATH_MAX], bundled_size[32];
  bool bundled;
  char dir[PATH_MAX], log_path[PATH_MAX + 16], report_path[PATH_MAX + 16];
  int log_fd;
  struct config *configs[CONFIG_COUNT];
  int config_count;                           /* configs[0] is plain */
  char skipped[CONFIG_COUNT][HUGIFY_REASON_MAX];
  bool fixed_runs;
  bool metric_wall;                           /* --metric wall: judge by wall time instead of CPU time */
  bool metric_given;                          /* --metric was on the command line */
  struct load_options load;                   /* --load: CMD is a server, each run is a round of load */
  size_t runs, warmup;
  double budget, elapsed, started;
  size_t rounds;
  const char *stopped;
  int pmu;                                    /* enum hugify_feature_state, learned from the first open */
  char pmu_reason[HUGIFY_REASON_MAX];
  struct failure failure;
  struct json_output json;                    /* --json / --json=FILE */
  FILE *json_out;
  char noise[512];                            /* the likely cause of wide intervals, "" if none */
  struct measure_noise machine;
  char estimate[128]; /* the progress line's current estimate: "heap 1.48x [1.23, 1.77]" */
};

struct verdict {
  int chosen;              /* index into configs of the configuration to use; -1: no measurable gain */
  int best;                /* the highest estimate of all (what "no measurable gain" compares) */
  int heap, heap_text, text; /* indexes of those configurations, -1 when not measured */
  int code_rc;             /* heap+text against heap: 0 when measured */
  struct stats_interval code;
  /* --load with latency: the chosen configuration's tail against plain's (measure_choose) */
  unsigned tail_worse;     /* bits: 1 << MEASURE_TAIL_P99, MEASURE_TAIL_MAX */
  int tail_rc[MEASURE_TAIL_COUNT];
  struct stats_interval tail[MEASURE_TAIL_COUNT];
  int steady;              /* a configuration with a gain whose tail is not worse, when the chosen one's is; -1 */
};

static inline bool json_only(const struct check *c) { return !json_output_text(&c->json); }

/* check_config.c (the configurations; it calls no other file of the check) */
/* "hugify run --text off --heap auto -- CMD ARGS" (or just "CMD ARGS" for plain), ready to paste. */
void check_command_line(const struct check *c, const struct config *config, char *out, size_t cap);
/* A configuration that remaps code but ended with no code on huge pages: never credited with a gain. */
bool check_moved_no_code(const struct config *config);
/* "heap, heap+text, ...": the configurations --configs may name besides plain. */
void check_config_names(char *out, size_t cap);

/* check_output.c */
void check_print_human(const struct check *c, const struct verdict *v, FILE *out);
void check_print_json(const struct check *c, const struct verdict *v, FILE *out);
void check_print_failure(const struct check *c);
/* "measurably worse", "measurably better", "no measurable difference": a latency ratio this / plain. */
const char *check_latency_judgement(const struct stats_interval *ratio);

#endif
