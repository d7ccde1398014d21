/* SPDX-License-Identifier: MIT */
/* measure.c - one measured run of a command, rounds in a balanced order, verdicts and spreads (see
 * measure.h). */
#include "measure.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os.h"
#include "procfs.h"

/* ---- programs --------------------------------------------------------------------------------------- */

int measure_self_path(char *out, size_t cap) {
  if (cap < 2) return -EINVAL;
  ssize_t n = readlink("/proc/self/exe", out, cap - 1);
  if (n <= 0) return n < 0 ? -errno : -ENOENT;
  out[n] = '\0';
  return 0;
}

int measure_find_beside_self(const char *const *candidates, char *out, size_t cap) {
  char dir[PATH_MAX];
  int rc = measure_self_path(dir, sizeof dir);
  if (rc != 0) return rc;
  char *slash = strrchr(dir, '/');
  if (!slash) return -ENOENT;
  *slash = '\0';
  for (const char *const *c = candidates; *c; c++) {
    char path[2 * PATH_MAX], resolved[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, *c);
    if (access(path, X_OK) == 0 && realpath(path, resolved) && strlen(resolved) < cap) {
      memcpy(out, resolved, strlen(resolved) + 1);
      return 0;
    }
  }
  return -ENOENT;
}

/* ---- one measured run ---------------------------------------------------------------------------- */

/* In the child, between fork and exec: only async-signal-safe calls, plus the environment edits (the
 * parents are single-threaded when they measure). */
static void child_exec(const struct measure_command *command, int gate) {
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  if (command->stdout_fd >= 0) dup2(command->stdout_fd, STDOUT_FILENO);
  if (command->stderr_fd >= 0) dup2(command->stderr_fd, STDERR_FILENO);
  for (const char *const *u = command->unset; u && *u; u++) unsetenv(*u);
  for (const char *const *s = command->set; s && *s; s++) putenv((char *)*s);
  char go;
  while (read(gate, &go, 1) < 0 && errno == EINTR) {
  }
  execvp(command->argv[0], (char *const *)command->argv);
  int err = errno;
  dprintf(STDERR_FILENO, "hugify: cannot run %s: %s\n", command->argv[0], strerror(err));
  _exit(err == ENOENT ? 127 : 126);
}

int measure_start(const struct measure_command *command, struct measure_child *child) {
  memset(child, 0, sizeof *child);
  child->gate = -1;
  if (!command || !command->argv || !command->argv[0]) return -EINVAL;
  int gate[2];
  if (pipe2(gate, O_CLOEXEC) != 0) return -errno;
  fflush(NULL); /* nothing buffered is written twice */
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(gate[0]);
    close(gate[1]);
    return -err;
  }
  if (pid == 0) {
    close(gate[1]);
    child_exec(command, gate[0]);
  }
  close(gate[0]);
  child->pid = pid;
  child->gate = gate[1];
  return 0;
}

void measure_release(struct measure_child *child) {
  child->started = measure_now();
  if (child->gate >= 0) close(child->gate);
  child->gate = -1;
}

static double timeval_seconds(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; }

int measure_wait(struct measure_child *child, struct measure_run *run) {
  memset(run, 0, sizeof *run);
  if (child->gate >= 0) measure_release(child);
  int status = 0;
  struct rusage usage;
  memset(&usage, 0, sizeof usage);
  while (wait4(child->pid, &status, 0, &usage) < 0)
    if (errno != EINTR) return -errno;
  run->wall_seconds = measure_now() - child->started;
  run->user_seconds = timeval_seconds(usage.ru_utime);
  run->system_seconds = timeval_seconds(usage.ru_stime);
  run->max_rss_bytes = (double)usage.ru_maxrss * 1024.0;
  run->minor_faults = (double)usage.ru_minflt;
  if (WIFSIGNALED(status)) {
    run->signal = WTERMSIG(status);
    run->status = 128 + run->signal;
  } else {
    run->status = WEXITSTATUS(status);
  }
  return 0;
}

int measure_command_run(const struct measure_command *command, struct measure_run *run) {
  struct measure_child child;
  int rc = measure_start(command, &child);
  if (rc != 0) {
    memset(run, 0, sizeof *run);
    return rc;
  }
  measure_release(&child);
  return measure_wait(&child, run);
}

/* ---- rounds ------------------------------------------------------------------------------------------ */

/* Row 0 is 0, 1, k-1, 2, k-2, ...; row r adds r (mod k); for odd k rows k..2k-1 are the mirrored rows. */
int measure_round_order(size_t round, int position, int count) {
  if (count <= 1) return 0;
  size_t rows = count % 2 ? 2 * (size_t)count : (size_t)count, row = round % rows;
  int j = position;
  if (row >= (size_t)count) j = count - 1 - j; /* the mirrored half */
  int first = j == 0 ? 0 : j % 2 ? (j + 1) / 2 : count - j / 2;
  return (int)((first + row) % (size_t)count);
}

const char *measure_stop_name(enum measure_stop stop) {
  switch (stop) {
  case MEASURE_STOP_ROUNDS: return "runs";
  case MEASURE_STOP_CONVERGED: return "converged";
  case MEASURE_STOP_BUDGET: return "budget";
  case MEASURE_STOP_LIMIT: return "limit";
  case MEASURE_STOP_FAILED: return "failed";
  }
  return "unknown";
}

static void update_ratios(const struct measure_plan *plan, struct measure_series *series, size_t rounds) {
  for (int c = 1; c < plan->configs; c++)
    series[c].ratio_rc = stats_paired_ratio(series[0].seconds, series[c].seconds, rounds, plan->confidence,
                                            &series[c].ratio);
}

static bool within(const struct stats_interval *s, double precision) {
  return s->low >= s->estimate * (1.0 - precision) && s->high <= s->estimate * (1.0 + precision);
}

static bool converged(const struct measure_plan *plan, const struct measure_series *series) {
  for (int c = 1; c < plan->configs; c++)
    if (series[c].ratio_rc != 0 || !within(&series[c].ratio, plan->precision)) return false;
  return true;
}

/* One run of every configuration in the balanced order. Returns 0 or the callback's non-zero. */
static int one_round(const struct measure_plan *plan, struct measure_series *series, size_t round, bool warmup) {
  for (int position = 0; position < plan->configs; position++) {
    int c = measure_round_order(round, position, plan->configs);
    double seconds = 0, system = 0;
    int rc = plan->run(plan->context, c, round, warmup, &seconds, &system);
    if (rc != 0) return rc;
    if (warmup) continue;
    series[c].seconds[series[c].count] = seconds;
    series[c].system_seconds[series[c].count] = system;
    series[c].count++;
  }
  return 0;
}

enum measure_stop measure_rounds(const struct measure_plan *plan, struct measure_series *series, size_t *rounds) {
  double started = measure_now();
  *rounds = 0;
  for (int c = 0; c < plan->configs; c++) {
    series[c].count = 0;
    series[c].ratio_rc = -EINVAL;
  }
  for (size_t w = 0; w < plan->warmup; w++)
    if (one_round(plan, series, w, true) != 0) return MEASURE_STOP_FAILED;
  size_t min_rounds = stats_min_samples(plan->confidence);
  double rounds_started = measure_now();
  for (;;) {
    if (plan->rounds && *rounds >= plan->rounds) return MEASURE_STOP_ROUNDS;
    if (!plan->rounds && *rounds >= min_rounds) {
      double now = measure_now(), per_round = (now - rounds_started) / (double)*rounds;
      if (converged(plan, series)) return MEASURE_STOP_CONVERGED;
      if (now - started + per_round > plan->budget_seconds) return MEASURE_STOP_BUDGET;
    }
    if (*rounds >= MEASURE_MAX_ROUNDS) return MEASURE_STOP_LIMIT;
    if (one_round(plan, series, *rounds, false) != 0) return MEASURE_STOP_FAILED;
    ++*rounds;
    if (*rounds >= min_rounds) update_ratios(plan, series, *rounds);
    if (plan->after_round) plan->after_round(plan->context, *rounds, series);
  }
}

/* ---- verdict ---------------------------------------------------------------------------------------- */

enum measure_verdict measure_judge(const struct stats_interval *s, double min_gain) {
  if (s->low > 1.0 && s->estimate >= 1.0 + min_gain) return MEASURE_GAIN;
  if (s->high < 1.0 && s->estimate <= 1.0 - min_gain) return MEASURE_LOSS;
  return MEASURE_TIE;
}

const char *measure_verdict_text(enum measure_verdict verdict) {
  switch (verdict) {
  case MEASURE_GAIN: return "measurable gain";
  case MEASURE_LOSS: return "measurably slower";
  case MEASURE_TIE: break;
  }
  return "no measurable gain";
}

const char *measure_tail_name(enum measure_tail tail) { return tail == MEASURE_TAIL_P99 ? "p99" : "max"; }

enum measure_verdict measure_judge_latency(const struct stats_interval *ratio, double min_change) {
  if (ratio->low > 1.0 && ratio->estimate >= 1.0 + min_change) return MEASURE_LOSS;
  if (ratio->high < 1.0 && ratio->estimate <= 1.0 - min_change) return MEASURE_GAIN;
  return MEASURE_TIE;
}

/* Creditable, with a measurable gain over the baseline. */
static bool gains(const struct measure_candidate *candidates, int i, size_t rounds, double confidence, double min_gain,
                  struct stats_interval *ratio) {
  return candidates[i].creditable &&
         stats_paired_ratio(candidates[0].seconds, candidates[i].seconds, rounds, confidence, ratio) == 0 &&
         measure_judge(ratio, min_gain) == MEASURE_GAIN;
}

/* The tail figures of candidate i worse than the baseline's beyond noise, as bits; the ratios into `ratios`
 * and whether each was measured into `rc` when they are not NULL. */
static unsigned tail_worse(const struct measure_candidate *candidates, int i, size_t rounds, double confidence,
                           double min_change, struct stats_interval *ratios, int *rc) {
  unsigned worse = 0;
  for (int k = 0; k < MEASURE_TAIL_COUNT; k++) {
    struct stats_interval ratio;
    int measured = candidates[0].latency[k] && candidates[i].latency[k]
                       ? stats_paired_ratio(candidates[i].latency[k], candidates[0].latency[k], rounds, confidence, &ratio)
                       : -ENOENT;
    if (rc) rc[k] = measured;
    if (measured != 0) continue;
    if (ratios) ratios[k] = ratio;
    if (measure_judge_latency(&ratio, min_change) == MEASURE_LOSS) worse |= 1u << k;
  }
  return worse;
}

void measure_choose(const struct measure_candidate *candidates, int count, size_t rounds, double confidence,
                    double min_gain, double min_tail_change, struct measure_choice *out) {
  memset(out, 0, sizeof *out);
  out->chosen = out->best = out->steady = -1;
  int best_gain = -1;
  double best_estimate = 0, best_gain_estimate = 0;
  for (int i = 1; i < count; i++) {
    struct stats_interval ratio;
    if (stats_paired_ratio(candidates[0].seconds, candidates[i].seconds, rounds, confidence, &ratio) != 0) continue;
    if (out->best < 0 || ratio.estimate > best_estimate) {
      out->best = i;
      best_estimate = ratio.estimate;
    }
    if (gains(candidates, i, rounds, confidence, min_gain, &ratio) && (best_gain < 0 || ratio.estimate > best_gain_estimate)) {
      best_gain = i;
      best_gain_estimate = ratio.estimate;
    }
  }
  /* The simplest configuration with a gain that the best one does not measurably beat. */
  for (int i = 1; best_gain >= 0 && out->chosen < 0 && i < count; i++) {
    struct stats_interval ratio, better;
    if (!gains(candidates, i, rounds, confidence, min_gain, &ratio)) continue;
    if (i == best_gain ||
        stats_paired_ratio(candidates[i].seconds, candidates[best_gain].seconds, rounds, confidence, &better) != 0 ||
        measure_judge(&better, min_gain) != MEASURE_GAIN)
      out->chosen = i;
  }
  for (int k = 0; k < MEASURE_TAIL_COUNT; k++) out->tail_rc[k] = -ENOENT;
  if (out->chosen < 0) return;
  out->tail_worse = tail_worse(candidates, out->chosen, rounds, confidence, min_tail_change, out->tail, out->tail_rc);
  for (int i = 1; out->tail_worse && out->steady < 0 && i < count; i++) {
    struct stats_interval ratio;
    if (i != out->chosen && gains(candidates, i, rounds, confidence, min_gain, &ratio) &&
        tail_worse(candidates, i, rounds, confidence, min_tail_change, NULL, NULL) == 0)
      out->steady = i;
  }
}

/* ---- spread ----------------------------------------------------------------------------------------- */

void measure_spread_of(const double *values, size_t n, double confidence, double noisy_threshold,
                    struct measure_spread *out) {
  memset(out, 0, sizeof *out);
  out->count = n;
  out->interval_rc = -EINVAL;
  if (n == 0) return;
  out->min = out->max = values[0];
  for (size_t i = 1; i < n; i++) {
    if (values[i] < out->min) out->min = values[i];
    if (values[i] > out->max) out->max = values[i];
  }
  out->median = stats_median(values, n);
  out->interval_rc = stats_median_interval(values, n, confidence, &out->interval);
  out->relative_spread = out->median > 0 ? (out->max - out->min) / out->median : 0.0;
  out->noisy = out->relative_spread > noisy_threshold;
}

bool measure_overlap(const struct measure_spread *a, const struct measure_spread *b) {
  return a->min <= b->max && b->min <= a->max;
}

/* ---- noise -------------------------------------------------------------------------------------------- */

void measure_noise_read(struct measure_noise *noise) {
  noise->load_average = -1;
  noise->cpus = sysconf(_SC_NPROCESSORS_ONLN);
  char *text;
  if (os_read_file("/proc/loadavg", &text, NULL) == 0) {
    double load;
    if (parse_loadavg(text, &load)) noise->load_average = load;
    free(text);
  }
}

void measure_noise_diagnose(struct measure_noise *noise, const struct measure_noise_series *series, size_t count,
                            bool wide, char *out, size_t cap) {
  measure_noise_read(noise);
  noise->system_spread = noise->system_share = -1;
  for (size_t i = 0; i < count; i++) {
    const struct measure_spread *system = &series[i].system;
    if (system->median < MEASURE_SYSTEM_FLOOR) continue;
    double spread = (system->max - system->min) / system->median;
    if (spread <= noise->system_spread) continue;
    noise->system_spread = spread;
    noise->system_share = series[i].cpu_median > 0 ? system->median / series[i].cpu_median : 0;
  }
  out[0] = '\0';
  if (wide) measure_noise_cause(noise, out, cap);
}

void measure_noise_cause(const struct measure_noise *noise, char *out, size_t cap) {
  size_t used = 0;
  out[0] = '\0';
  if (noise->load_average >= 0 && noise->cpus > 0 && noise->load_average > 0.75 * (double)noise->cpus)
    used += (size_t)snprintf(out, cap,
                             "machine load: load average %.1f on %ld CPUs (other programs compete for the CPUs "
                             "and caches; rerun on an idle machine)",
                             noise->load_average, noise->cpus);
  if (used < cap && noise->system_spread > 0.5 && noise->system_share > 0.05)
    snprintf(out + used, cap - used,
             "%slarge system-time variance: kernel time varied by %.0f %% between runs (%.0f %% of the CPU time): "
             "faulting fresh memory costs the kernel more or less from run to run, e.g. a hypervisor backing guest "
             "memory lazily; memory from a reserved hugetlb pool is steadier",
             used ? "; " : "", 100.0 * noise->system_spread, 100.0 * noise->system_share);
}
