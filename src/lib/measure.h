/* SPDX-License-Identifier: MIT */
/* measure.h - how hugify measures: one module for every command and program that times something
 * (check, bench, the bench programs, and the coming `check --load`).
 *
 *   clock       measure_now(), measure_thread_cpu_now(): the one monotonic and the one CPU clock
 *   programs    measure_self_path(), measure_find_beside_self(): hugify's own executable, and the
 *               programs installed next to it (the bundled workload, absl_hash_map, hugify itself)
 *   one run     measure_start() / measure_release() / measure_wait(): a child started behind a gate (so
 *               counters can be attached before it execs), timed from exec to exit: wall, user, system,
 *               max RSS, minor faults, exit status
 *   rounds      measure_round_order(): the balanced (Williams) order of the configurations in a round;
 *               measure_rounds(): warm-up and measured rounds in that order, stopping at a round count,
 *               or adaptively when every paired-ratio interval is narrow enough or the budget is spent.
 *               How one measured run happens is the caller's callback (run a command; later: start a
 *               server, wait until ready, run the load, stop it)
 *   verdict     measure_judge(): gain / loss / tie of a paired-ratio interval (stats.c computes it)
 *   spread      measure_spread_of(): median, min, max and interval of repetitions; "noisy" when the spread
 *               is wide; measure_overlap() for "within each other's spread: a tie"
 *   noise       measure_noise_cause(): the likely cause when intervals are wide (machine load, system-time
 *               variance: the host backing fresh memory)
 *
 * Internal (src/lib, not in include/hugify.h). No libm: the preload links the library objects too. */
#ifndef HUGIFY_MEASURE_H
#define HUGIFY_MEASURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "stats.h"

/* ---- clock (inline: programs built from sources, like hugify-workload, use it without the library) ---- */
static inline double measure_clock_seconds(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
/* Seconds on CLOCK_MONOTONIC. */
static inline double measure_now(void) { return measure_clock_seconds(CLOCK_MONOTONIC); }
/* Nanoseconds on CLOCK_MONOTONIC (for sums of many short spans: the preload's and the text remap's). */
static inline uint64_t measure_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
/* CPU seconds (user + kernel) of the calling thread. */
static inline double measure_thread_cpu_now(void) { return measure_clock_seconds(CLOCK_THREAD_CPUTIME_ID); }

/* ---- programs ---- */
/* The path of the running executable (readlink of /proc/self/exe). 0, or -errno. */
int measure_self_path(char *out, size_t cap);
/* The first of `candidates` (paths relative to the directory of the running executable, NULL-terminated)
 * that is an executable file, resolved (realpath) into out. 0, or -ENOENT when none is. */
int measure_find_beside_self(const char *const *candidates, char *out, size_t cap);

/* ---- one measured run of a command ---- */
struct measure_command {
  const char *const *argv;   /* argv[0] is looked up in PATH; NULL-terminated */
  int stdout_fd, stderr_fd;  /* where the child's output goes; -1: inherit ours */
  const char *const *unset;  /* environment variables to remove in the child (NULL-terminated), or NULL */
  const char *const *set;    /* "NAME=VALUE" to set in the child (NULL-terminated), or NULL */
};

struct measure_run {
  int status;       /* exit status; 128 + signal when killed; 127 not found, 126 not executable */
  int signal;       /* the signal that ended it, 0 if none */
  double wall_seconds, user_seconds, system_seconds;
  double max_rss_bytes, minor_faults;
};

struct measure_child {
  pid_t pid;
  int gate;         /* write end: closing it lets the child exec */
  double started;
};

/* Fork the child: stdin on /dev/null, output as asked; it waits at a gate before it execs. 0 or -errno. */
int measure_start(const struct measure_command *command, struct measure_child *child);
/* Open the gate: the child execs now, and its clock starts. */
void measure_release(struct measure_child *child);
/* Wait for its exit and fill the run. 0, or -errno when waiting failed. */
int measure_wait(struct measure_child *child, struct measure_run *run);
/* start + release + wait. 0 or -errno (could not be started). */
int measure_command_run(const struct measure_command *command, struct measure_run *run);
/* CPU seconds of a run (user + system). */
static inline double measure_cpu_seconds(const struct measure_run *run) {
  return run->user_seconds + run->system_seconds;
}

/* ---- rounds ---- */
/* Which of `count` configurations runs in position `position` of round `round`: a Williams design. Over
 * `count` rounds (2 x count when count is odd) each configuration runs in every position equally often and
 * follows every other one equally often, so what a run leaves behind (memory to compact, warm caches)
 * favours no one. */
int measure_round_order(size_t round, int position, int count);

#define MEASURE_MAX_ROUNDS 1000

/* One configuration's samples: the time the verdict compares, and the CPU time's system share. */
struct measure_series {
  double seconds[MEASURE_MAX_ROUNDS];        /* the compared time, per measured round */
  double system_seconds[MEASURE_MAX_ROUNDS]; /* kernel time, per measured round (noise diagnosis) */
  size_t count;
  int ratio_rc;                 /* 0 when `ratio` holds an interval */
  struct stats_interval ratio;  /* baseline / this, paired per round: > 1 is faster than the baseline */
};

/* How one run of configuration `config` happens (0 = the baseline). Fills `seconds` (the compared time)
 * and `system_seconds`; returns 0, or non-zero to stop the rounds (the caller keeps why). */
typedef int (*measure_run_fn)(void *context, int config, size_t round, bool warmup, double *seconds,
                              double *system_seconds);

struct measure_plan {
  int configs;             /* >= 2; configuration 0 is the baseline of every ratio */
  size_t warmup;           /* unmeasured rounds first */
  size_t rounds;           /* exactly this many measured rounds; 0: adaptive */
  double budget_seconds;   /* adaptive: stop before a round would end past it (counted from measure_rounds) */
  double precision;        /* adaptive: stop when every interval is within +-precision of its estimate */
  double confidence;       /* of the intervals, e.g. 0.95 */
  measure_run_fn run;
  void *context;
  /* After each measured round (ratios up to date once there are enough rounds); may be NULL. */
  void (*after_round)(void *context, size_t rounds_done, const struct measure_series *series);
};

enum measure_stop { MEASURE_STOP_ROUNDS, MEASURE_STOP_CONVERGED, MEASURE_STOP_BUDGET, MEASURE_STOP_LIMIT,
                    MEASURE_STOP_FAILED };
const char *measure_stop_name(enum measure_stop stop); /* "runs", "converged", "budget", "limit", "failed" */

/* Run the plan: warm-up rounds, then measured rounds, each configuration once per round in the balanced
 * order; series[c] gets configuration c's samples and, for c >= 1, its paired ratio to the baseline.
 * Returns why it stopped (MEASURE_STOP_FAILED when plan->run returned non-zero). */
enum measure_stop measure_rounds(const struct measure_plan *plan, struct measure_series *series, size_t *rounds);

/* ---- verdict ---- */
enum measure_verdict { MEASURE_TIE, MEASURE_GAIN, MEASURE_LOSS };
/* A ratio interval (> 1 = faster): a gain when its whole interval is above 1 and the estimate at least
 * 1 + min_gain; a loss when the whole interval is below 1 and the estimate at most 1 - min_gain; else a
 * tie (no measurable difference). */
enum measure_verdict measure_judge(const struct stats_interval *ratio, double min_gain);
/* "measurable gain", "measurably slower", "no measurable gain" */
const char *measure_verdict_text(enum measure_verdict verdict);

/* Tail latency figures a configuration can be judged by, besides its time. */
enum measure_tail { MEASURE_TAIL_P99, MEASURE_TAIL_MAX, MEASURE_TAIL_COUNT };
/* "p99", "max" */
const char *measure_tail_name(enum measure_tail tail);

/* A latency ratio, this / baseline, paired per round (> 1: slower responses): MEASURE_LOSS when worse beyond
 * noise (the whole interval above 1 and the estimate at least 1 + min_change), MEASURE_GAIN in the mirror
 * case, else a tie. */
enum measure_verdict measure_judge_latency(const struct stats_interval *ratio, double min_change);

/* One configuration offered to measure_choose: its compared time per measured round, and where the load
 * reported them, its tail latencies per round (lower is better). */
struct measure_candidate {
  const double *seconds;
  bool creditable; /* false: it changed nothing it could be credited with (a code remap that moved no code):
                      it runs as its twin does, so whatever separates their times is not its doing */
  const double *latency[MEASURE_TAIL_COUNT]; /* per round; NULL when not measured (every round must have it) */
};
struct measure_choice {
  int chosen; /* the configuration to use; -1: none has a measurable gain */
  int best;   /* the highest estimate of all (what "no measurable gain" compares); -1: none measured */
  /* The chosen configuration's tail against the baseline's: a bit (1 << enum measure_tail) per figure worse
   * beyond noise, the ratios (this / baseline) where tail_rc[k] is 0, and, when some figure is worse, the
   * simplest other creditable configuration with a gain whose tail is not worse (-1: none). */
  unsigned tail_worse;
  int tail_rc[MEASURE_TAIL_COUNT];
  struct stats_interval tail[MEASURE_TAIL_COUNT];
  int steady;
};
/* Which configuration to use, from `rounds` paired rounds: candidates[0] is the baseline; the others are in
 * order of simplicity. The choice is the simplest creditable configuration with a gain (measure_judge)
 * that the configuration with the highest gain does not itself measurably beat. Tail latency does not
 * change the choice; it is judged (measure_judge_latency, min_tail_change) so that the verdict can say
 * "gain, but p99 1.4x worse" and name a configuration that gains without that. Pure: check's verdict,
 * tested on scripted timings. */
void measure_choose(const struct measure_candidate *candidates, int count, size_t rounds, double confidence,
                    double min_gain, double min_tail_change, struct measure_choice *out);

/* ---- spread of repetitions ---- */
struct measure_spread {
  size_t count;
  double median, min, max;
  int interval_rc;             /* 0 when low/high hold a sign-test interval (count >= 6 for 95 %) */
  struct stats_interval interval;
  double relative_spread;      /* (max - min) / median */
  bool noisy;                  /* relative_spread > the threshold given */
};
/* Summarise n >= 1 repetitions; noisy when (max - min) / median exceeds noisy_threshold. */
void measure_spread_of(const double *values, size_t n, double confidence, double noisy_threshold,
                    struct measure_spread *out);
/* True when the two ranges [min, max] overlap: neither is measurably below the other. */
bool measure_overlap(const struct measure_spread *a, const struct measure_spread *b);

/* ---- when the machine is the noise ---- */
struct measure_noise {
  double load_average;         /* 1-minute load average; < 0 when unknown */
  long cpus;                   /* online CPUs */
  double system_spread;        /* (max - min) / median of a configuration's system time; < 0 unknown */
  double system_share;         /* median system time / median CPU time of that configuration */
};
/* Read the machine's side (load average, CPUs) into noise; system_* are left as they are. */
void measure_noise_read(struct measure_noise *noise);
/* Below this median kernel time (seconds) a series' spread is the clock's tick, not the kernel's noise. */
#define MEASURE_SYSTEM_FLOOR 0.005
/* One series of runs, as the diagnosis sees it: the spread of its kernel times, its median CPU time. */
struct measure_noise_series {
  struct measure_spread system;
  double cpu_median;
};
/* The noise diagnosis, bench's and check's alike: reads the machine's side (measure_noise_read), puts the
 * noisiest of the `count` series (by its system spread, from MEASURE_SYSTEM_FLOOR up) into noise->system_*,
 * and when `wide` (some interval came out wide) writes the likely cause into out (measure_noise_cause);
 * out is "" otherwise. */
void measure_noise_diagnose(struct measure_noise *noise, const struct measure_noise_series *series, size_t count,
                            bool wide, char *out, size_t cap);
/* The likely cause of wide intervals, as a sentence ("" when nothing stands out). Pure. */
void measure_noise_cause(const struct measure_noise *noise, char *out, size_t cap);

#endif
