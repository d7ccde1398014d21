/* SPDX-License-Identifier: MIT */
/* check.c - hugify check: do huge pages help a program, which way, and by how much.
 *
 * Runs CMD plain and under each configuration of `hugify run`, interleaved round by round, and compares
 * each configuration to plain by the per-round ratio of times. The rounds, their balanced order, the
 * intervals and the verdict are the measurement module's (src/lib/measure.c); this file says how one run
 * happens (CMD, through `hugify run`, its output to a log, counters attached before it execs) and prints
 * the result. Counters (dTLB/iTLB miss rates) come from the PMU where the machine has one
 * (src/lib/perf.c); coverage comes from the run reports of the preload, read with jansson. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "json_read.h"
#include "measure.h"
#include "os.h"
#include "run/run_env.h"
#include "stats.h"
#include "units.h"

#ifndef HUGIFY_WORKLOAD_RELATIVE
#define HUGIFY_WORKLOAD_RELATIVE "../libexec/hugify/hugify-workload"
#endif

/* The command line, as parsed by the option table; copied into struct check and struct check_options. */
struct check_args {
  const char *configs, *size_text;
  uint64_t runs, warmup, ready_port;
  double budget;
  int metric;
  struct json_output json;
  struct load_options load;
};

static const char *const metric_names[] = {"cpu", "wall", NULL};

static const struct option_spec check_options_table[] = {
    OPT_GROUP("Options"),
    OPT_STRING("configs", struct check_args, configs, "LIST",
               "comma-separated, from: heap (--heap auto, --text off), heap+text (--heap auto\n"
               "--text on), text (--text on --heap off), pymalloc-off (heap with PYTHONMALLOC=malloc:\n"
               "CPython's objects from malloc), hugetlb (--heap hugetlb), mimalloc, jemalloc, tcmalloc\n"
               "(--heap ENGINE). Default: heap, heap+text, pymalloc-off when CMD is CPython (python3,\n"
               "or a script run by it), hugetlb when the 2 MiB pool has free pages, and the engines that\n"
               "are installed. Plain always runs."),
    OPT_DECIMAL("budget", struct check_args, budget, "SECONDS", 0.1, 604800,
                "adaptive (default, 45): rounds until every interval is within +-2 % or the time is\n"
                "spent; at least 6 rounds (the fewest for a 95 % interval) whatever the budget"),
    OPT_COUNT("runs", struct check_args, runs, "N", 6, 1000, "exactly N rounds instead (N >= 6)"),
    OPT_COUNT("warmup", struct check_args, warmup, "N", 0, 100,
              "unmeasured rounds first (default 1): page cache, lazily backed memory"),
    OPT_ENUM("metric", struct check_args, metric, "cpu|wall", metric_names,
             "cpu (default): judge by CPU time (user + system, of CMD and its children): what huge\n"
             "pages change, and steady on a busy machine where waiting for a CPU swamps wall time;\n"
             "wall: judge by wall time (both are always measured and shown). With --load: the load's\n"
             "score or time by default; cpu judges by the server's CPU time per round instead\n"
             "(steadier on a busy machine when the load does a fixed amount of work: redis-benchmark\n"
             "-n, not pgbench -T)"),
    OPT_JSON(struct check_args, json,
             "the result as JSON on stdout instead of the text (schema hugify.check/2, docs/check.md);\n"
             "--json=FILE: the text on stdout and the JSON to FILE (--json=- is stdout)"),
    OPT_STRING("size", struct check_args, size_text, "SIZE", "working set of the bundled workload (default 64M; 64K fits every TLB)"),
    OPT_GROUP("Servers (--load)"),
    OPT_COUNT("ready-port", struct check_args, ready_port, "PORT", 1, 65535,
              "ready when 127.0.0.1:PORT accepts a connection"),
    OPT_STRING("ready", struct check_args, load.ready_command, "CMD", "ready when CMD (sh -c) exits 0; polled every 100 ms"),
    OPT_DECIMAL("ready-timeout", struct check_args, load.ready_timeout, "SECONDS", 0.1, 86400,
                "give up after SECONDS (default 60)"),
    OPT_STRING("load", struct check_args, load.load_command, "CMD",
               "the load; its wall time is what is compared, unless --score"),
    OPT_STRING("score", struct check_args, load.score_pattern, "REGEX",
               "the number REGEX (POSIX extended; its first group, else the match) takes from the\n"
               "load's output, last match, higher is better (requests per second, tps)"),
    OPT_DECIMAL("stop-timeout", struct check_args, load.stop_timeout, "SECONDS", 0.1, 86400,
                "SIGKILL to the server's whole group after SECONDS (default 10)"),
    OPT_ENUM("latency", struct check_args, load.latency_choice, "TOOL", load_latency_choices,
             "the load's p50, p99 and max latency, from the output of: auto (default: any of\n"
             "redis-benchmark, pgbench, memcaslap, wrk it recognises; none: no latency shown),\n"
             "redis-benchmark (not -q), pgbench (with its --log printed after it), memcaslap (-S),\n"
             "wrk (--latency), or off. A tool named here must print them in every round"),
    OPT_STRING("latency-p50", struct check_args, load.latency_pattern[0], "REGEX",
               "any other load: the median latency is group 1 of REGEX's last match (POSIX\n"
               "extended); group 2, if any, its unit (ns, us, ms, s)"),
    OPT_STRING("latency-p99", struct check_args, load.latency_pattern[1], "REGEX", "the same for the 99th percentile"),
    OPT_STRING("latency-max", struct check_args, load.latency_pattern[2], "REGEX", "the same for the maximum"),
    OPT_ENUM("latency-unit", struct check_args, load.latency_unit, "ms|us|ns|s", load_latency_units,
             "the unit of a number the patterns take without a unit group (default ms)"),
    OPT_END,
};

const struct command_help help_check = {
    "usage: hugify check [--configs LIST] [--runs N | --budget SECONDS] [--warmup N] [--metric cpu|wall]\n"
    "                    [--json | --json=FILE] [--size SIZE] [--] [CMD [ARGS...]]\n"
    "       hugify check (--ready-port PORT | --ready CMD) --load 'LOAD CMD' [--score REGEX]\n"
    "                    [--latency TOOL | --latency-p99 REGEX ...] [--ready-timeout S] [--stop-timeout S]\n"
    "                    [OPTIONS] -- SERVER [ARGS...]\n"
    "\n"
    "Do huge pages help CMD, which way, and by how much? Runs CMD plain and through `hugify run` in each\n"
    "configuration, interleaved (A B C, B A C, ...), and compares the times: median and 95 % confidence\n"
    "interval of the per-round ratio plain / configuration. Says which configuration to use, with the exact\n"
    "`hugify run` command, or \"no measurable gain\". CMD's output goes to a log file (its path is printed);\n"
    "a CMD that exits non-zero in any run stops the check, with its output shown. Without CMD, runs the\n"
    "bundled TLB-bound workload (hugify-workload).\n"
    "\n"
    "Servers (--load): each run starts SERVER (plain, or through `hugify run` for a configuration) in a\n"
    "process group of its own, waits until it is ready, runs the load command (sh -c) against it, then stops\n"
    "the server: SIGTERM, and SIGKILL to its whole group after --stop-timeout. It never leaves a server\n"
    "running, also on Ctrl-C or failure. A server that does not get ready, or dies during the load, or a\n"
    "load that fails, ends the check with exit 1 and the end of the server's output. The server's CPU time\n"
    "(user + system, with the children it reaped) is shown for every round. Where the load prints its\n"
    "latency, p50, p99 and max are shown per configuration with their intervals, and a verdict whose\n"
    "configuration gains but has a worse tail beyond noise says so (\"gain, but p99 1.40x worse\").\n"
    "\n",
    check_options_table,
    "\n"
    "Where the machine has a PMU, dTLB/iTLB miss rates of plain and the chosen configuration are shown with\n"
    "the rule of thumb (huge pages help above ~5-10 % dTLB misses and a few MiB of working set).\n"
    "\n"
    "When intervals stay wide, the likely cause is named: machine load (/proc/loadavg), or a large variance of\n"
    "the kernel (system) time, as when a hypervisor backs fresh guest memory lazily.\n"
    "\n"
    "Exit status: 0 a verdict (a gain, or no measurable gain); 1 CMD failed (non-zero exit or signal);\n"
    "2 bad usage; 3 nothing to compare (hugify run unusable here) or the bundled workload is missing.\n"
    "\n"
    "Examples:\n"
    "  hugify check\n"
    "  hugify check -- ./bench --iterations 1000000\n"
    "  hugify check --configs heap,heap+text --runs 10 --json=result.json -- ./server --selftest\n"
    "  hugify check --size 64K\n"
    "  hugify check --ready-port 6379 --load 'redis-benchmark -t get -n 2000000 -P 32 --precision 3' \\\n"
    "               --score 'throughput summary: ([0-9.]+) requests per second' -- redis-server --save ''\n",
};

/* ---- the command line of a run ------------------------------------------------------------------ */

static size_t build_argv(const struct check *c, const struct config *config, const char **argv, size_t cap,
                         bool with_report) {
  size_t n = 0;
  if (config->id != CONFIG_PLAIN) {
    argv[n++] = c->self;
    argv[n++] = "run";
    for (const char *const *a = config->kind->run_args; *a; a++) argv[n++] = *a;
    if (with_report) {
      argv[n++] = "--report";
      argv[n++] = c->report_path;
    }
    argv[n++] = "--";
  }
  for (char **a = c->command; *a && n + 1 < cap; a++) argv[n++] = *a;
  argv[n] = NULL;
  return n;
}

/* ---- reading the run report (jansson) -------------------------------------------------------------- */

/* The one place that knows the run report's key names (hugify.run/1, whose sums have the shape of a
 * hugify.report/2: a class's figures under "classes.CLASS", the peak under "peak", the largest process
 * under "largest_process"). A class's figure is looked up under "classes." first, then bare. */
static bool report_count(const struct json_doc *report, const char *class, const char *field, uint64_t *value) {
  static const char *const prefixes[] = {"classes.", ""};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
    char path[96];
    snprintf(path, sizeof path, "%s%s.%s", prefixes[i], class, field);
    if (json_doc_count(report, path, value)) return true;
  }
  return false;
}

static void read_report(const char *path, struct coverage *out) {
  memset(out, 0, sizeof *out);
  struct json_doc *report = json_doc_read_file(path, NULL, 0);
  if (!report) return; /* no report (the preload could not write one): no coverage */
  static const struct {
    const char *region, *field;
    size_t offset;
  } fields[] = {
      {"heap", "resident_bytes", offsetof(struct coverage, heap_resident)},
      {"heap", "huge_bytes", offsetof(struct coverage, heap_huge)},
      {"anon", "resident_bytes", offsetof(struct coverage, anon_resident)},
      {"anon", "huge_bytes", offsetof(struct coverage, anon_huge)},
      {"code", "resident_bytes", offsetof(struct coverage, text_resident)},
      {"code", "huge_bytes", offsetof(struct coverage, text_huge)},
  };
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    if (report_count(report, fields[i].region, fields[i].field, (uint64_t *)((char *)out + fields[i].offset)))
      out->present = true;
  json_doc_number(report, "hugify_seconds", &out->hugify_seconds);
  json_doc_string(report, "heap_owner", out->heap_owner, sizeof out->heap_owner);
  json_doc_string(report, "allocator", out->allocator, sizeof out->allocator);
  out->data_at_peak = json_doc_count(report, "peak.allocated.resident_bytes", &out->data_resident) &&
                      json_doc_count(report, "peak.allocated.huge_bytes", &out->data_huge);
  /* a static program's tree has no preload to report: its anonymous memory as run measured it from outside */
  if (!out->present && json_doc_count(report, "outside.peak.allocated.resident_bytes", &out->anon_resident) &&
      json_doc_count(report, "outside.peak.allocated.huge_bytes", &out->anon_huge)) {
    out->present = out->data_at_peak = true;
    out->data_resident = out->anon_resident, out->data_huge = out->anon_huge;
  }
  if (!out->data_at_peak) {
    out->data_resident = out->heap_resident + out->anon_resident;
    out->data_huge = out->heap_huge + out->anon_huge;
  }
  /* hugify run --report sums the tree; the process that held the most is what wait4's max RSS means */
  if (!json_doc_count(report, "largest_process.peak_memory_bytes", &out->peak_memory))
    json_doc_count(report, "peak_memory_bytes", &out->peak_memory);
  json_doc_free(report);
}

/* ---- running CMD once -------------------------------------------------------------------------- */

struct run_result {
  struct measure_run run;
  bool counted;
  struct hugify_counter_values counters;
};

/* Open the counters on the child before it execs; learn once whether this machine can count. */
static bool open_counters(struct check *c, pid_t pid, struct hugify_counter_set *counters) {
  if (c->pmu == HUGIFY_FEATURE_NO) return false;
  if (hugify_counters_open(counters, pid) > 0) {
    c->pmu = HUGIFY_FEATURE_YES;
    if (counters->reason[0] && !c->pmu_reason[0]) snprintf(c->pmu_reason, sizeof c->pmu_reason, "%s", counters->reason);
    return true;
  }
  c->pmu = HUGIFY_FEATURE_NO;
  snprintf(c->pmu_reason, sizeof c->pmu_reason, "%s", counters->reason);
  return false;
}

/* The configuration's runtime setting for the environment of its runs ({"PYTHONMALLOC=malloc", NULL}), or NULL. */
static const char *const *config_environment(const struct config *config) {
  return config->kind->environment[0] ? config->kind->environment : NULL;
}

/* Run argv with stdout and stderr on out_fd, "NAME=VALUE" of `set` (or NULL) in its environment, counters
 * attached before it execs when `count`. Returns 0, or -errno when it could not be started. */
static int run_measured(struct check *c, const char *const *argv, const char *const *set, int out_fd, bool count,
                        struct run_result *r) {
  memset(r, 0, sizeof *r);
  struct measure_command command = {.argv = argv, .stdout_fd = out_fd, .stderr_fd = out_fd, .set = set};
  struct measure_child child;
  int rc = measure_start(&command, &child);
  if (rc != 0) return rc;
  struct hugify_counter_set counters;
  bool counting = count && open_counters(c, child.pid, &counters);
  measure_release(&child);
  rc = measure_wait(&child, &r->run);
  if (counting) {
    r->counted = rc == 0 && hugify_counters_read(&counters, &r->counters) == 0;
    hugify_counters_close(&counters);
  }
  return rc;
}

/* The last `cap` bytes of fd from `offset` on, cut at a line start. malloc'd; NULL on error. */
static char *output_tail(int fd, off_t offset, size_t cap) {
  off_t end = lseek(fd, 0, SEEK_END);
  if (end < 0) return NULL;
  bool cut = end - offset > (off_t)cap;
  if (cut) offset = end - (off_t)cap;
  size_t length = (size_t)(end - offset);
  char *text = calloc(length + 1, 1);
  if (!text) return NULL;
  ssize_t n = pread(fd, text, length, offset);
  text[n > 0 ? n : 0] = '\0';
  char *first_line = strchr(text, '\n');
  if (cut && first_line && first_line[1]) memmove(text, first_line + 1, strlen(first_line + 1) + 1);
  return text;
}

/* Can `hugify run` start a program in this configuration here? Runs it on /bin/true; "" when it can,
 * else the reason (the last line it printed). */
static void preflight(struct check *c, struct config *config, char *reason, size_t cap) {
  reason[0] = '\0';
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/preflight.log", c->dir);
  char why[HUGIFY_REASON_MAX];
  int fd = safe_file_open_scratch(path, false, why, sizeof why);
  if (fd < 0) {
    snprintf(reason, cap, "cannot create a scratch file: %.400s", why);
    return;
  }
  const char *argv[16];
  size_t n = 0;
  argv[n++] = c->self;
  argv[n++] = "run";
  for (const char *const *a = config->kind->run_args; *a; a++) argv[n++] = *a;
  argv[n++] = "--";
  argv[n++] = access("/bin/true", X_OK) == 0 ? "/bin/true" : "true";
  argv[n] = NULL;
  struct run_result r;
  int rc = run_measured(c, argv, NULL, fd, false, &r);
  if (rc < 0) snprintf(reason, cap, "cannot start hugify run: %s", strerror(-rc));
  else if (r.run.status != 0) {
    char *text = output_tail(fd, 0, 2048);
    char *last = text;
    if (text) {
      size_t length = strlen(text);
      while (length > 0 && text[length - 1] == '\n') text[--length] = '\0';
      char *newline = strrchr(text, '\n');
      last = newline ? newline + 1 : text;
    }
    snprintf(reason, cap, "`hugify run %s %s %s %s` does not work here (exit status %d)%s%s", config->kind->run_args[0],
             config->kind->run_args[1], config->kind->run_args[2], config->kind->run_args[3], r.run.status,
             last && *last ? ": " : "", last ? last : "");
    free(text);
  }
  close(fd);
  unlink(path);
}

/* ---- rounds: the measurement module runs them; this is how one run happens ----------------------- */

static void add_counters(struct config *config, const struct hugify_counter_values *v) {
  config->counters.present = config->counter_runs == 0 ? v->present : config->counters.present & v->present;
  for (unsigned i = 0; i < HUGIFY_COUNTER_COUNT; i++) config->counters.value[i] += v->value[i];
  config->counter_runs++;
}

static void show_progress(const struct check *c, const struct config *config, size_t round, bool warmup) {
  if (warmup) progress(false, "check: warm-up, %s", config->kind->name);
  else if (c->fixed_runs)
    progress(false, "check: round %zu of %zu, %s%s", round + 1, c->runs, config->kind->name, c->estimate);
  else
    progress(false, "check: round %zu, %.0f of %.0f s, %s%s", round + 1, measure_now() - c->started, c->budget,
             config->kind->name, c->estimate);
}

/* The coverage of a configuration's run, from the report its preload wrote (NULL: plain, or no report). */
static const struct coverage *record_coverage(struct check *c, struct config *config) {
  if (config->id == CONFIG_PLAIN) return NULL;
  struct coverage coverage;
  read_report(c->report_path, &coverage);
  if (!coverage.present) return NULL;
  config->coverage = coverage;
  config->reports++;
  return &config->coverage;
}

static void record(struct check *c, struct config *config, const struct run_result *r) {
  size_t i = config->runs++;
  config->wall[i] = r->run.wall_seconds;
  config->cpu[i] = measure_cpu_seconds(&r->run);
  config->system[i] = r->run.system_seconds;
  config->max_rss[i] = r->run.max_rss_bytes;
  config->minor_faults[i] = r->run.minor_faults;
  if (r->counted) add_counters(config, &r->counters);
  config->peak_memory[i] = r->run.max_rss_bytes;
  const struct coverage *coverage = record_coverage(c, config);
  /* ru_maxrss leaves out hugetlb pages: the report's peak counts them */
  if (coverage && coverage->peak_memory > config->peak_memory[i]) config->peak_memory[i] = coverage->peak_memory;
}

/* One round of load against the server: the compared time is the load's (1 / score, or its wall time)
 * unless --metric cpu, then the server's CPU time. */
static int run_one_server(struct check *c, struct config *config, const char *const *argv, size_t round, bool warmup,
                          double *seconds, double *system) {
  struct load_result load;
  char failure[8192];
  int status = load_round(&c->load, argv, config_environment(config), c->log_fd, c->log_fd, &load, failure, sizeof failure);
  if (status != EXIT_DONE) {
    c->failure = (struct failure){.failed = true, .config = (int)config->id, .round = (int)round + 1,
                                  .status = status, .warmup = warmup, .output = strdup(failure)};
    return -1;
  }
  if (!warmup) {
    size_t i = config->runs++;
    config->wall[i] = load.seconds;
    config->cpu[i] = load.server_cpu_seconds;
    config->system[i] = load.server_system_seconds;
    config->score[i] = isnan(load.score) ? load.load_seconds : load.score;
    config->ready[i] = load.ready_seconds;
    const double figures[LATENCY_FIGURES] = {load.latency.p50_seconds, load.latency.p99_seconds, load.latency.max_seconds};
    for (int k = 0; k < LATENCY_FIGURES; k++) config->latency[k][i] = figures[k];
    if (load.latency.tool != LOAD_TOOL_NONE) config->latency_tool = load.latency.tool;
    config->latency_estimated |= load.latency.estimated;
    record_coverage(c, config);
  }
  *seconds = c->metric_wall ? load.seconds : load.server_cpu_seconds;
  *system = load.server_system_seconds;
  return 0;
}

/* measure_run_fn: one run of configs[index]. Non-zero when CMD failed (c->failure says how). */
static int run_one(void *context, int index, size_t round, bool warmup, double *seconds, double *system) {
  struct check *c = context;
  struct config *config = c->configs[index];
  size_t words = 16;
  for (char **a = c->command; *a; a++) words++;
  const char **argv = malloc(words * sizeof *argv);
  if (!argv) return -1;
  build_argv(c, config, argv, words, config->id != CONFIG_PLAIN);
  char line[4096];
  check_command_line(c, config, line, sizeof line);
  show_progress(c, config, round, warmup);
  dprintf(c->log_fd, "==== %s round %zu, %s: %s\n", warmup ? "warm-up" : "measured", round + 1, config->kind->name, line);
  off_t offset = lseek(c->log_fd, 0, SEEK_END);
  unlink(c->report_path);
  if (c->load.load_command) {
    int rc = run_one_server(c, config, argv, round, warmup, seconds, system);
    free(argv);
    return rc;
  }
  struct run_result r;
  int rc = run_measured(c, argv, config_environment(config), c->log_fd, !warmup, &r);
  free(argv);
  if (rc < 0 || r.run.status != 0) {
    c->failure = (struct failure){.failed = true, .config = (int)config->id, .round = (int)round + 1,
                                  .status = rc < 0 ? -1 : r.run.status, .signal = r.run.signal, .warmup = warmup};
    c->failure.output = output_tail(c->log_fd, offset, CHECK_LOG_TAIL);
    if (rc < 0) dprintf(c->log_fd, "hugify check: cannot start it: %s\n", strerror(-rc));
    return -1;
  }
  if (!warmup) record(c, config, &r);
  *seconds = c->metric_wall ? r.run.wall_seconds : measure_cpu_seconds(&r.run);
  *system = r.run.system_seconds;
  return 0;
}

/* after_round: the best estimate so far, for the progress line. */
static void note_estimate(void *context, size_t rounds, const struct measure_series *series) {
  struct check *c = context;
  (void)rounds;
  int best = 0;
  for (int i = 1; i < c->config_count; i++)
    if (series[i].ratio_rc == 0 && (best == 0 || series[i].ratio.estimate > series[best].ratio.estimate)) best = i;
  if (best > 0)
    snprintf(c->estimate, sizeof c->estimate, "; so far %s %.2fx [%.2f, %.2f]", c->configs[best]->kind->name,
             series[best].ratio.estimate, series[best].ratio.low, series[best].ratio.high);
}

/* Each latency figure of each configuration: median and interval over the rounds, ratio to plain's. */
static void compute_latency(struct check *c) {
  const struct config *plain = c->configs[0];
  for (int i = 0; i < c->config_count; i++) {
    struct config *config = c->configs[i];
    for (int k = 0; k < LATENCY_FIGURES; k++) {
      struct latency_summary *s = &config->latency_summary[k];
      s->rc = s->ratio_rc = -ENOENT;
      bool every_round = config->runs > 0;
      for (size_t r = 0; r < config->runs; r++) every_round &= config->latency[k][r] > 0; /* NaN: not printed */
      if (!every_round) continue;
      s->rc = 0;
      measure_spread_of(config->latency[k], config->runs, CHECK_CONFIDENCE, 0, &s->spread);
      if (i > 0)
        s->ratio_rc = stats_paired_ratio(config->latency[k], plain->latency[k], c->rounds, CHECK_CONFIDENCE, &s->ratio);
    }
  }
}

static void compute_ratios(struct check *c) {
  const struct config *plain = c->configs[0];
  for (int i = 1; i < c->config_count; i++) {
    struct config *config = c->configs[i];
    config->wall_ratio_rc =
        stats_paired_ratio(plain->wall, config->wall, c->rounds, CHECK_CONFIDENCE, &config->wall_ratio);
    config->cpu_ratio_rc = stats_paired_ratio(plain->cpu, config->cpu, c->rounds, CHECK_CONFIDENCE, &config->cpu_ratio);
    config->ratio_rc = c->metric_wall ? config->wall_ratio_rc : config->cpu_ratio_rc;
    config->ratio = c->metric_wall ? config->wall_ratio : config->cpu_ratio;
  }
}

/* The times the verdict compares: CPU time (user + system), or wall time with --metric wall. */
static const double *times(const struct check *c, const struct config *config) {
  return c->metric_wall ? config->wall : config->cpu;
}

static bool narrow(const struct stats_interval *s) {
  return s->low >= s->estimate * (1.0 - CHECK_PRECISION) && s->high <= s->estimate * (1.0 + CHECK_PRECISION);
}

static int measure(struct check *c) {
  struct measure_series *series = calloc((size_t)c->config_count, sizeof *series);
  if (!series) return -1;
  struct measure_plan plan = {.configs = c->config_count, .warmup = c->warmup, .rounds = c->fixed_runs ? c->runs : 0,
                              .budget_seconds = c->budget - (measure_now() - c->started),
                              .precision = CHECK_PRECISION, .confidence = CHECK_CONFIDENCE, .run = run_one,
                              .context = c, .after_round = note_estimate};
  enum measure_stop stop = measure_rounds(&plan, series, &c->rounds);
  free(series);
  c->stopped = measure_stop_name(stop);
  if (stop == MEASURE_STOP_FAILED) return -1;
  progress(true, "check: %zu rounds done", c->rounds);
  compute_ratios(c);
  if (c->load.load_command) compute_latency(c);
  /* When some interval is wider than +-2 %: the likely cause, from the machine's load and from the
   * configuration whose kernel time varied most. */
  bool wide = false;
  for (int i = 1; i < c->config_count; i++) wide |= c->configs[i]->ratio_rc != 0 || !narrow(&c->configs[i]->ratio);
  struct measure_noise_series noise[CONFIG_COUNT];
  for (int i = 0; i < c->config_count; i++) {
    struct measure_spread cpu;
    measure_spread_of(c->configs[i]->system, c->configs[i]->runs, CHECK_CONFIDENCE, 0, &noise[i].system);
    measure_spread_of(c->configs[i]->cpu, c->configs[i]->runs, CHECK_CONFIDENCE, 0, &cpu);
    noise[i].cpu_median = cpu.median;
  }
  measure_noise_diagnose(&c->machine, noise, (size_t)c->config_count, wide, c->noise, sizeof c->noise);
  return 0;
}

/* ---- the verdict --------------------------------------------------------------------------------- */

static struct config *find_config(const struct check *c, enum config_id id, int *index) {
  *index = -1;
  for (int i = 0; i < c->config_count; i++)
    if (c->configs[i]->id == id) {
      *index = i;
      return c->configs[i];
    }
  return NULL;
}

static void decide(const struct check *c, struct verdict *v) {
  memset(v, 0, sizeof *v);
  struct measure_candidate candidates[CONFIG_COUNT];
  for (int i = 0; i < c->config_count; i++) {
    const struct config *config = c->configs[i];
    candidates[i] = (struct measure_candidate){.seconds = times(c, config), .creditable = !check_moved_no_code(config)};
    /* a figure missing in some round (NaN) leaves that tail unjudged: stats_paired_ratio refuses it */
    candidates[i].latency[MEASURE_TAIL_P99] = c->load.load_command ? config->latency[LATENCY_P99] : NULL;
    candidates[i].latency[MEASURE_TAIL_MAX] = c->load.load_command ? config->latency[LATENCY_MAX] : NULL;
  }
  struct measure_choice choice;
  measure_choose(candidates, c->config_count, c->rounds, CHECK_CONFIDENCE, CHECK_MIN_GAIN, CHECK_MIN_TAIL_CHANGE, &choice);
  v->chosen = choice.chosen;
  v->best = choice.best;
  v->tail_worse = choice.tail_worse;
  v->steady = choice.steady;
  memcpy(v->tail_rc, choice.tail_rc, sizeof v->tail_rc);
  memcpy(v->tail, choice.tail, sizeof v->tail);
  struct config *heap = find_config(c, CONFIG_HEAP, &v->heap), *heap_text = find_config(c, CONFIG_HEAP_TEXT, &v->heap_text);
  find_config(c, CONFIG_TEXT, &v->text);
  v->code_rc = heap && heap_text
                  ? stats_paired_ratio(times(c, heap), times(c, heap_text), c->rounds, CHECK_CONFIDENCE, &v->code)
                  : -ENOENT;
}


/* ---- setting up ------------------------------------------------------------------------------------ */

/* "hugify" when that word on PATH is this very program, else our full path. */
static void hugify_word(const char *self, char *out, size_t cap) {
  snprintf(out, cap, "%s", self);
  const char *path = getenv("PATH");
  while (path && *path) {
    const char *colon = strchr(path, ':');
    size_t len = colon ? (size_t)(colon - path) : strlen(path);
    char candidate[PATH_MAX + 16], resolved[PATH_MAX];
    if (len > 0 && len < PATH_MAX) {
      snprintf(candidate, sizeof candidate, "%.*s/hugify", (int)len, path);
      if (realpath(candidate, resolved) && strcmp(resolved, self) == 0) {
        snprintf(out, cap, "hugify");
        return;
      }
    }
    path = colon ? colon + 1 : NULL;
  }
}

static bool hugetlb_pool_has_free_pages(char *reason, size_t cap) {
  struct hugify_system sys;
  hugify_probe(&sys);
  for (unsigned i = 0; i < sys.hugetlb_size_count; i++) {
    const struct hugify_hugetlb_size *h = &sys.hugetlb[i];
    if (h->page_size != hugify_pmd_size()) continue;
    uint64_t available = h->available;
    if (available > 0) return true;
    snprintf(reason, cap, "the PMD-size hugetlb pool has no free pages ('hugify pool' reserves some)");
    return false;
  }
  snprintf(reason, cap, "this kernel has no hugetlb pages of its PMD size (%llu MiB)",
           (unsigned long long)(hugify_pmd_size() >> 20));
  return false;
}

static int parse_configs(const char *list, bool *wanted) {
  char copy[256];
  if (strlen(list) >= sizeof copy) return usage_error("check", "--configs: the list is too long");
  snprintf(copy, sizeof copy, "%s", list);
  bool any = false;
  for (char *save = NULL, *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
    int id = -1;
    for (int k = 0; k < CONFIG_COUNT; k++)
      if (strcmp(name, config_kinds[k].name) == 0) id = k;
    if (id < 0) {
      char known[256];
      check_config_names(known, sizeof known);
      return usage_error("check", "--configs: unknown configuration '%s' (%s)", name, known);
    }
    if (id != CONFIG_PLAIN) {
      wanted[id] = true;
      any = true;
    }
  }
  if (!any) return usage_error("check", "--configs: name at least one configuration besides plain");
  return EXIT_DONE;
}

static void remove_scratch(const struct check *c) {
  DIR *dir = c->dir[0] ? opendir(c->dir) : NULL;
  if (!dir) return;
  struct dirent *entry;
  while ((entry = readdir(dir))) {
    if (strcmp(entry->d_name, "report.json") == 0 || strncmp(entry->d_name, "report.json.", 12) == 0 ||
        strncmp(entry->d_name, "preflight", 9) == 0) {
      char path[PATH_MAX + 300];
      snprintf(path, sizeof path, "%s/%s", c->dir, entry->d_name);
      unlink(path);
    }
  }
  closedir(dir);
}

static int setup_scratch(struct check *c) {
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  snprintf(c->dir, sizeof c->dir, "%s/hugify-check-XXXXXX", tmp);
  if (!mkdtemp(c->dir)) {
    c->dir[0] = '\0';
    return fail(EXIT_SHORT, "check", "cannot create a directory in %s: %s", tmp, strerror(errno));
  }
  snprintf(c->log_path, sizeof c->log_path, "%s/output.log", c->dir);
  snprintf(c->report_path, sizeof c->report_path, "%s/report.json", c->dir);
  char why[HUGIFY_REASON_MAX];
  c->log_fd = safe_file_open_scratch(c->log_path, true, why, sizeof why);
  if (c->log_fd < 0) return fail(EXIT_SHORT, "check", "cannot create %s", why);
  return EXIT_DONE;
}

/* ---- the command: options, CMD, configurations, rounds; one way out -------------------------------- */

struct check_options {
  bool wanted[CONFIG_COUNT], explicit_configs, budget_given;
  const char *size;
  int first_word; /* argv index of CMD, or argc */
};

static int parse_options(struct check *c, struct check_options *o, int argc, char **argv) {
  struct check_args args = {.budget = CHECK_DEFAULT_BUDGET, .warmup = 1};
  load_options_init(&args.load);
  struct option_result parsed;
  if (parse_command_options("check", check_options_table, OPTIONS_THEN_COMMAND, argc, argv, &args, &parsed) != EXIT_DONE)
    return EXIT_USAGE;
  bool given_runs = option_table_given(check_options_table, &parsed, "runs");
  bool given_budget = option_table_given(check_options_table, &parsed, "budget");
  if (given_runs && given_budget) return usage_error("check", "--runs and --budget exclude each other");
  if (args.configs) {
    o->explicit_configs = true;
    int status = parse_configs(args.configs, o->wanted);
    if (status != EXIT_DONE) return status;
  }
  if (args.size_text) {
    uint64_t bytes;
    if (!parse_size(args.size_text, &bytes) || bytes < 4096)
      return usage_error("check", "--size '%s': expected a size of at least 4K, e.g. 64M", args.size_text);
    o->size = args.size_text;
  }
  c->runs = (size_t)args.runs;
  c->fixed_runs = given_runs;
  c->budget = args.budget;
  o->budget_given = given_budget;
  c->warmup = (size_t)args.warmup;
  c->metric_wall = args.metric == 1;
  c->metric_given = option_table_given(check_options_table, &parsed, "metric");
  c->json = args.json;
  args.load.ready_port = (int)args.ready_port;
  c->load = args.load;
  int status = load_options_check(&c->load);
  if (status != EXIT_DONE) return status;
  if (c->load.load_command) {
    if (parsed.command >= argc) return usage_error("check", "--load needs the server's command after --");
    if (!c->metric_given) c->metric_wall = true; /* the load's score or time, unless --metric cpu */
    load_install_signal_handlers();
  }
  o->first_word = parsed.command;
  return EXIT_DONE;
}

/* CMD from the command line, or the bundled workload installed next to hugify. */
static int resolve_command(struct check *c, const struct check_options *o, int argc, char **argv) {
  int rc = measure_self_path(c->self, sizeof c->self);
  if (rc != 0) return fail(EXIT_SHORT, "check", "cannot find my own executable: %s", strerror(-rc));
  hugify_word(c->self, c->hugify_word, sizeof c->hugify_word);
  if (o->first_word < argc) {
    if (o->size) return usage_error("check", "--size is for the bundled workload: give it to your command instead");
    c->command = argv + o->first_word;
    return EXIT_DONE;
  }
  static const char *const candidates[] = {"hugify-workload", HUGIFY_WORKLOAD_RELATIVE, NULL};
  if (measure_find_beside_self(candidates, c->bundled_path, sizeof c->bundled_path) != 0)
    return fail(EXIT_PRIVILEGE, "check",
                "the bundled workload hugify-workload is not installed next to %s (nor at %s relative to it): "
                "reinstall hugify, or give a command: hugify check -- CMD", c->self, HUGIFY_WORKLOAD_RELATIVE);
  int k = 0;
  c->bundled_argv[k++] = c->bundled_path;
  if (o->size) {
    snprintf(c->bundled_size, sizeof c->bundled_size, "%s", o->size);
    c->bundled_argv[k++] = "--size";
    c->bundled_argv[k++] = c->bundled_size;
  }
  c->bundled_argv[k] = NULL;
  c->command = c->bundled_argv;
  c->bundled = true;
  return EXIT_DONE;
}

static struct config *new_config(enum config_id id) {
  struct config *config = calloc(1, sizeof *config);
  if (!config) return NULL;
  config->kind = &config_kinds[id];
  config->id = id;
  return config;
}

/* Why nothing can be preloaded into the program at path, a script's interpreter's when it is one (`hugify run`
 * collapses it from outside), or NULL. */
static const char *program_outside(const char *path) {
  if (!path[0]) return NULL;
  char interpreter[PATH_MAX];
  struct run_program_elf elf;
  run_program_elf(run_script_interpreter(path, false, interpreter, sizeof interpreter) ? interpreter : path, &elf);
  return elf.outside;
}

/* Plain, then the configurations asked for (or the default set) that work here. */
static int choose_configs(struct check *c, struct check_options *o) {
  if (!(c->configs[c->config_count] = new_config(CONFIG_PLAIN))) return fail(EXIT_SHORT, "check", "out of memory");
  c->config_count++;
  bool *wanted = o->wanted;
  if (!o->explicit_configs) {
    wanted[CONFIG_HEAP] = wanted[CONFIG_HEAP_TEXT] = wanted[CONFIG_MIMALLOC] = wanted[CONFIG_JEMALLOC] = true;
    wanted[CONFIG_TCMALLOC] = true;
    wanted[CONFIG_HUGETLB] = hugetlb_pool_has_free_pages(c->skipped[CONFIG_HUGETLB], HUGIFY_REASON_MAX);
  }
  progress(false, "check: trying the configurations");
  /* A sanitizer's malloc cannot be replaced by a preloaded allocator (`hugify run` refuses); descendants
   * of CMD cannot be known here, their runs fail (docs/check.md). */
  char path[PATH_MAX];
  bool not_executable;
  run_find_command(c->command[0], path, sizeof path, &not_executable);
  const char *owner = path[0] ? run_program_heap_owner(path) : NULL;
  enum allocator_kind runtime = path[0] ? run_program_runtime(path) : ALLOCATOR_UNKNOWN;
  const char *outside = program_outside(path);
  for (int id = 1; id < CONFIG_COUNT && !o->explicit_configs; id++) /* a runtime's setting: for that runtime */
    if (config_kinds[id].runtime != ALLOCATOR_UNKNOWN) wanted[id] = config_kinds[id].runtime == runtime;
  for (int id = 1; id < CONFIG_COUNT && !o->explicit_configs; id++) /* a static program: outside (the rest are */
    wanted[id] = outside ? wanted[id] || id == CONFIG_OUTSIDE : wanted[id] && id != CONFIG_OUTSIDE; /* skipped) */
  for (int id = 1; id < CONFIG_COUNT; id++) {
    if (!wanted[id]) continue;
    struct config *config = new_config((enum config_id)id);
    if (!config) return fail(EXIT_SHORT, "check", "out of memory");
    if (outside && id != CONFIG_OUTSIDE)
      snprintf(c->skipped[id], HUGIFY_REASON_MAX, "%.300s is %s: nothing can be preloaded into it; its configuration "
               "is outside", path, outside);
    else if (!outside && id == CONFIG_OUTSIDE)
      snprintf(c->skipped[id], HUGIFY_REASON_MAX, "%.300s is dynamically linked: the preload reaches its heap "
               "(heap); outside is for a static program", path[0] ? path : c->command[0]);
    else if (owner && (id == CONFIG_MIMALLOC || id == CONFIG_JEMALLOC || id == CONFIG_TCMALLOC))
      snprintf(c->skipped[id], HUGIFY_REASON_MAX, "%.300s is built with %s, which brings its own malloc: a preloaded "
               "%s would replace it and crash it (or go unused)", path, owner, config_kinds[id].name);
    else
      preflight(c, config, c->skipped[id], HUGIFY_REASON_MAX);
    if (!c->skipped[id][0]) {
      c->configs[c->config_count++] = config;
      continue;
    }
    free(config);
    if (o->explicit_configs) {
      progress(true, " ");
      return fail(EXIT_PRIVILEGE, "check", "%s: %s", config_kinds[id].name, c->skipped[id]);
    }
  }
  if (c->config_count >= 2) return EXIT_DONE;
  progress(true, " ");
  fprintf(stderr, "hugify check: nothing to compare plain with: no configuration of `hugify run` works here:\n");
  for (int id = 1; id < CONFIG_COUNT; id++)
    if (c->skipped[id][0]) fprintf(stderr, "  %s: %s\n", config_kinds[id].name, c->skipped[id]);
  return EXIT_PRIVILEGE;
}


/* The one way out: the failure, the JSON when a check ran (or failed while running), the scratch files. */
static int finish(struct check *c, int status, bool ran) {
  if (c->load.load_command && c->failure.failed) status = c->failure.status; /* 1, or 130 when interrupted */
  if (status == 130) fprintf(stderr, "hugify check: interrupted; the server and the load were stopped\n");
  else if (status == EXIT_SHORT && c->failure.failed) check_print_failure(c);
  if (c->json_out) {
    if (ran) {
      struct verdict v;
      if (!c->failure.failed) decide(c, &v);
      check_print_json(c, c->failure.failed ? NULL : &v, c->json_out);
    }
    if (!json_output_close(c->json_out, &c->json, "check") && status == EXIT_DONE) status = EXIT_SHORT;
    if (c->json.path && !ran) unlink(c->json.path); /* nothing ran: no empty file left behind */
  }
  remove_scratch(c);
  load_options_free(&c->load);
  for (int i = 0; i < c->config_count; i++) free(c->configs[i]);
  free(c->failure.output);
  if (c->log_fd >= 0) close(c->log_fd);
  free(c);
  return status;
}

int cmd_check(int argc, char **argv) {
  struct check *c = calloc(1, sizeof *c);
  if (!c) return fail(EXIT_SHORT, "check", "out of memory");
  c->log_fd = -1;
  c->pmu = HUGIFY_FEATURE_UNKNOWN;
  measure_noise_read(&c->machine); /* read again at the end; here so a failed check reports it too */
  c->machine.system_spread = c->machine.system_share = -1;
  struct check_options options = {.size = NULL};
  int status = parse_options(c, &options, argc, argv);
  if (status == EXIT_DONE) status = resolve_command(c, &options, argc, argv);
  if (status == EXIT_DONE && c->json.wanted && !(c->json_out = json_output_open(&c->json, "check"))) status = EXIT_USAGE;
  c->started = measure_now();
  if (status == EXIT_DONE) status = setup_scratch(c);
  if (status == EXIT_DONE) status = choose_configs(c, &options);
  if (status != EXIT_DONE) return finish(c, status, false);

  bool measured = measure(c) == 0;
  c->elapsed = measure_now() - c->started;
  if (!measured) {
    progress(true, " ");
    return finish(c, EXIT_SHORT, true);
  }
  if (!json_only(c)) {
    struct verdict v;
    decide(c, &v);
    check_print_human(c, &v, stdout);
  }
  return finish(c, EXIT_DONE, true);
}
