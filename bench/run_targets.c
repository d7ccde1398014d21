/* SPDX-License-Identifier: MIT */
/* run_targets.c - `hugify run` against the other ways of getting a heap onto huge pages, paired in one go.
 * Runs a benchmark program that prints one JSON line with "seconds", "max_rss_bytes" and (optionally)
 * "huge_fraction", interleaved in a balanced order under:
 *   plain     nothing set
 *   hugify    hugify run -- PROGRAM
 *   tunable   GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (glibc's own THP support alone)
 *   mimalloc  LD_PRELOAD=libmimalloc.so.2 MIMALLOC_LARGE_OS_PAGES=1 MIMALLOC_EAGER_COMMIT_DELAY=0
 *   jemalloc  LD_PRELOAD=libjemalloc.so.2 MALLOC_CONF=thp:always,metadata_thp:always
 *   tcmalloc  LD_PRELOAD=libtcmalloc_minimal.so.4 (gperftools' TCMalloc alone: seed 001's allocator's ancestor)
 *   hugify+tcmalloc  hugify run --heap tcmalloc -- PROGRAM (not one of "the others" of the targets)
 * and prints medians, speedups over plain, RSS ratios, and the targets with pass/miss. Spawning,
 * the balanced order and the medians are the measurement module's (src/lib/measure.c, stats.c); the
 * program's JSON line is read with jansson (src/cli/json_read.c); --json writes schema hugify.run_targets/1 with
 * the format layer's writer. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "format.h"
#include "json_read.h"
#include "measure.h"
#include "os.h"
#include "stats.h"

static const char usage[] =
    "usage: run_targets [--rounds R] [--hugify PATH] [--key FIELD] [--json] [-- PROGRAM ARGS...]\n"
    "\n"
    "Runs PROGRAM R times (default 10) under each of plain, hugify run, the glibc tunable\n"
    "(glibc.malloc.hugetlb=1), mimalloc with large OS pages, jemalloc thp:always, gperftools' TCMalloc\n"
    "alone and under hugify run --heap tcmalloc, interleaved in a\n"
    "balanced order (over 10 rounds each config follows each other one twice), and\n"
    "prints the median and fastest wall time and the median CPU time, each with the speedup over plain,\n"
    "the median huge_fraction and the peak RSS over plain.\n"
    "PROGRAM must print a JSON line with \"seconds\" and \"max_rss_bytes\" (\"huge_fraction\" optional).\n"
    "Default PROGRAM: absl_hash_map --allocator std --json --repeat 1 (next to this program).\n"
    "--hugify: the hugify binary (default: ../bin/hugify next to this program, then PATH).\n"
    "--key: the time field to compare (default seconds; its CPU twin is FIELD with seconds -> cpu_seconds,\n"
    "       e.g. lookup_seconds and lookup_cpu_seconds of threaded_heap).\n"
    "Targets checked: hugify >= 1.25x plain, hugify >= 0.97x the best other, hugify RSS <= 1.05x plain.\n"
    "--json: {\"schema\":\"hugify.run_targets/1\",\"program\":\"...\",\"key\":\"seconds\",\"rounds\":10,\"configs\":[{\"name\":\"plain\",\"seconds\":1.14,\"seconds_min\":1.1,\n"
    "        \"cpu_seconds\":0.6,\"speedup\":1.0,\"cpu_speedup\":1.0,\"huge_fraction\":0.0,\"max_rss_bytes\":N,\n"
    "        \"rss_ratio\":1.0,\"failures\":0},...],\n"
    "        \"targets\":[{\"what\":\"...\",\"value\":1.3,\"target\":1.25,\"met\":true},...]}\n"
    "Examples:\n"
    "  run_targets --rounds 10\n"
    "  run_targets --rounds 10 -- ./threaded_heap --threads 8 --nodes 5000000 --json\n"
    "  run_targets --key lookup_seconds -- ./threaded_heap --json\n";

enum { PLAIN, HUGIFY, TUNABLE, MIMALLOC, JEMALLOC, TCMALLOC, HUGIFY_TCMALLOC, CONFIG_COUNT };
static const char *const config_names[CONFIG_COUNT] = {"plain", "hugify", "tunable", "mimalloc", "jemalloc",
                                                       "tcmalloc", "hugify+tcmalloc"};

#define MAX_ROUNDS 64

struct sample {
  double seconds, cpu_seconds, huge_fraction, rss;
  int ok;
};

static const char *libdirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                                "/usr/local/lib"};

static int find_library(const char *name, char *out, size_t cap) {
  for (size_t i = 0; i < sizeof libdirs / sizeof libdirs[0]; i++) {
    snprintf(out, cap, "%s/%s", libdirs[i], name);
    if (access(out, R_OK) == 0) return 1;
  }
  return 0;
}

/* Run argv with the environment of config; read the last line of its stdout that carries the time key. */
static const char *time_key = "seconds"; /* --key: the JSON field compared */
static char cpu_key[96] = "cpu_seconds";

static void read_sample(const char *text, struct sample *s) {
  char *copy = strdup(text), *save = NULL;
  for (char *line = copy ? strtok_r(copy, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save)) {
    struct json_doc *doc = line[0] == '{' ? json_doc_read_text(line, NULL, 0) : NULL;
    double seconds;
    if (doc && json_doc_number(doc, time_key, &seconds)) {
      s->seconds = seconds;
      if (!json_doc_number(doc, cpu_key, &s->cpu_seconds)) s->cpu_seconds = -1;
      if (!json_doc_number(doc, "huge_fraction", &s->huge_fraction)) s->huge_fraction = -1;
      if (!json_doc_number(doc, "max_rss_bytes", &s->rss)) s->rss = -1;
    }
    json_doc_free(doc);
  }
  free(copy);
  s->ok = s->seconds > 0;
}

static struct sample run_once(int config, char **program, const char *hugify, const char *mimalloc,
                              const char *jemalloc, const char *tcmalloc) {
  struct sample s = {0};
  static const char *const unset[] = {"LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_CONF", "MIMALLOC_LARGE_OS_PAGES", NULL};
  static char preload[PATH_MAX + 16];
  const char *set[4] = {NULL};
  if (config == TUNABLE) set[0] = "GLIBC_TUNABLES=glibc.malloc.hugetlb=1";
  if (config == MIMALLOC || config == JEMALLOC) {
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", config == MIMALLOC ? mimalloc : jemalloc);
    set[0] = preload;
    set[1] = config == MIMALLOC ? "MIMALLOC_LARGE_OS_PAGES=1" : "MALLOC_CONF=thp:always,metadata_thp:always";
    set[2] = config == MIMALLOC ? "MIMALLOC_EAGER_COMMIT_DELAY=0" : NULL;
  }
  if (config == TCMALLOC) {
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", tcmalloc);
    set[0] = preload;
  }
  int count = 0;
  while (program[count]) count++;
  const char **argv = calloc((size_t)count + 6, sizeof *argv), **to = argv;
  if (!argv) return s;
  if (config == HUGIFY || config == HUGIFY_TCMALLOC) {
    *to++ = hugify;
    *to++ = "run";
    if (config == HUGIFY_TCMALLOC) {
      *to++ = "--heap";
      *to++ = "tcmalloc";
    }
    *to++ = "--";
  }
  for (int i = 0; i < count; i++) *to++ = program[i];
  int out = memfd_create("run_targets", MFD_CLOEXEC);
  struct measure_command command = {.argv = argv, .stdout_fd = out, .stderr_fd = -1, .unset = unset, .set = set};
  struct measure_run run;
  if (out >= 0 && measure_command_run(&command, &run) == 0 && run.status == 0) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", out);
    char *text;
    if (os_read_file(path, &text, NULL) == 0) read_sample(text, &s);
    free(text);
  }
  if (out >= 0) close(out);
  free(argv);
  return s;
}

static double median(const double *values, int count) { return count ? stats_median(values, (size_t)count) : -1; }

static double minimum(const double *values, int count) {
  double m = count ? values[0] : -1;
  for (int i = 1; i < count; i++)
    if (values[i] < m) m = values[i];
  return m;
}

int main(int argc, char **argv) {
  int rounds = 10, json = 0;
  char hugify[PATH_MAX + 32] = "", default_program[PATH_MAX + 32];
  char **program = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--hugify") == 0 && i + 1 < argc) snprintf(hugify, sizeof hugify, "%s", argv[++i]);
    else if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc) time_key = argv[++i];
    else if (strcmp(argv[i], "--help") == 0) { fputs(usage, stdout); return 0; }
    else if (strcmp(argv[i], "--") == 0) { program = argv + i + 1; break; }
    else { fputs(usage, stderr); return 2; }
  }
  if (rounds < 1 || rounds > MAX_ROUNDS) { fputs(usage, stderr); return 2; }
  /* "seconds" -> "cpu_seconds", "lookup_seconds" -> "lookup_cpu_seconds" */
  const char *suffix = strstr(time_key, "seconds");
  if (suffix) snprintf(cpu_key, sizeof cpu_key, "%.*scpu_seconds", (int)(suffix - time_key), time_key);
  if (!hugify[0] && measure_find_beside_self((const char *const[]){"../bin/hugify", NULL}, hugify, sizeof hugify) != 0)
    snprintf(hugify, sizeof hugify, "hugify");
  static char *default_argv[] = {NULL, "--allocator", "std", "--json", "--repeat", "1", NULL};
  if (!program || !program[0]) {
    if (measure_find_beside_self((const char *const[]){"absl_hash_map", NULL}, default_program, sizeof default_program) != 0)
      snprintf(default_program, sizeof default_program, "absl_hash_map");
    default_argv[0] = default_program;
    program = default_argv;
  }
  char mimalloc[PATH_MAX], jemalloc[PATH_MAX], tcmalloc[PATH_MAX];
  int have[CONFIG_COUNT] = {1, 1, 1, find_library("libmimalloc.so.2", mimalloc, sizeof mimalloc),
                            find_library("libjemalloc.so.2", jemalloc, sizeof jemalloc),
                            find_library("libtcmalloc_minimal.so.4", tcmalloc, sizeof tcmalloc), 0};
  have[HUGIFY_TCMALLOC] = have[TCMALLOC];
  static const char *const packages[CONFIG_COUNT] = {[MIMALLOC] = "libmimalloc2.0", [JEMALLOC] = "libjemalloc2",
                                                     [TCMALLOC] = "libtcmalloc-minimal4"};
  for (int c = MIMALLOC; c <= TCMALLOC; c++)
    if (!have[c]) fprintf(stderr, "run_targets: %s not installed (apt-get install %s); skipped\n", config_names[c],
                          packages[c]);

  /* The order within a round is a Williams design (measure_round_order): over 2 x CONFIG_COUNT rounds every
   * config runs right after every other one equally often. It matters: a THP run right after a plain run
   * pays for the compaction of the memory the plain run left in 4 KiB pieces (measured here: 2x the CPU
   * time), and a plain rotation would put the same config after `plain` in 4 rounds out of 5. */
  static struct sample samples[CONFIG_COUNT][MAX_ROUNDS];
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < CONFIG_COUNT; k++) {
      int c = measure_round_order((size_t)r, k, CONFIG_COUNT);
      if (!have[c]) continue;
      samples[c][r] = run_once(c, program, hugify, mimalloc, jemalloc, tcmalloc);
      fprintf(stderr, "\rrun_targets: round %d/%d %-8s %.3f s   ", r + 1, rounds, config_names[c], samples[c][r].seconds);
    }
  }
  fprintf(stderr, "\n");

  /* Three views of the time: the median wall time (what the targets are about), the median CPU time (user
   * + system, when the program reports "cpu_seconds"; steadier when the machine is shared), and the
   * fastest wall time (the run least disturbed by other work). The targets are checked on each. */
  enum { WALL, CPU, FASTEST, VIEW_COUNT };
  static const char *const view_names[VIEW_COUNT] = {"median wall", "median cpu", "fastest wall"};
  double time[VIEW_COUNT][CONFIG_COUNT], fraction[CONFIG_COUNT], rss[CONFIG_COUNT];
  int failures[CONFIG_COUNT];
  for (int c = 0; c < CONFIG_COUNT; c++) {
    double t[MAX_ROUNDS], u[MAX_ROUNDS], f[MAX_ROUNDS], m[MAX_ROUNDS];
    int n = 0;
    failures[c] = 0;
    for (int r = 0; r < rounds && have[c]; r++) {
      if (!samples[c][r].ok) { failures[c]++; continue; }
      t[n] = samples[c][r].seconds;
      u[n] = samples[c][r].cpu_seconds;
      f[n] = samples[c][r].huge_fraction;
      m[n] = samples[c][r].rss;
      n++;
    }
    time[WALL][c] = median(t, n);
    time[FASTEST][c] = minimum(t, n);
    time[CPU][c] = median(u, n);
    fraction[c] = median(f, n);
    rss[c] = median(m, n);
  }
  const char *best[VIEW_COUNT];
  double speedup[VIEW_COUNT], versus_best[VIEW_COUNT];
  for (int v = 0; v < VIEW_COUNT; v++) {
    double best_time = -1;
    best[v] = "none";
    for (int c = TUNABLE; c < HUGIFY_TCMALLOC; c++)
      if (time[v][c] > 0 && (best_time < 0 || time[v][c] < best_time)) { best_time = time[v][c]; best[v] = config_names[c]; }
    double h = time[v][HUGIFY], p = time[v][PLAIN];
    speedup[v] = h > 0 && p > 0 ? p / h : 0;
    versus_best[v] = h > 0 && best_time > 0 ? best_time / h : 0;
  }
  double rss_ratio = rss[PLAIN] > 0 && rss[HUGIFY] > 0 ? rss[HUGIFY] / rss[PLAIN] : 0;
  struct target { char what[96]; double value, target; int higher_is_better; } targets[2 * VIEW_COUNT + 1];
  int target_count = 0;
  for (int v = 0; v < VIEW_COUNT; v++) {
    targets[target_count] = (struct target){"", speedup[v], 1.25, 1};
    snprintf(targets[target_count++].what, sizeof targets[0].what, "hugify speedup over plain (%s)", view_names[v]);
    targets[target_count] = (struct target){"", versus_best[v], 0.97, 1};
    snprintf(targets[target_count++].what, sizeof targets[0].what, "hugify vs the best other, %s (%s)", best[v],
             view_names[v]);
  }
  targets[target_count++] = (struct target){"hugify peak RSS relative to plain", rss_ratio, 1.05, 0};

  if (json) {
    struct json_writer j;
    json_begin(&j, stdout, "hugify.run_targets/1");
    json_put_string(&j, "program", program[0]);
    json_put_string(&j, "key", time_key);
    json_put_i64(&j, "rounds", rounds);
    json_open_array(&j, "configs");
    for (int c = 0; c < CONFIG_COUNT; c++) {
      json_open_object(&j, NULL);
      json_put_string(&j, "name", config_names[c]);
      json_put_double(&j, "seconds", time[WALL][c]);
      json_put_double(&j, "seconds_min", time[FASTEST][c]);
      json_put_double(&j, "cpu_seconds", time[CPU][c]);
      json_put_double(&j, "speedup", time[WALL][c] > 0 ? time[WALL][PLAIN] / time[WALL][c] : 0);
      json_put_double(&j, "cpu_speedup", time[CPU][c] > 0 ? time[CPU][PLAIN] / time[CPU][c] : 0);
      json_put_double(&j, "huge_fraction", fraction[c]);
      if (rss[c] >= 0) json_put_u64(&j, "max_rss_bytes", (uint64_t)rss[c]);
      else json_put_null(&j, "max_rss_bytes");
      json_put_double(&j, "rss_ratio", rss[PLAIN] > 0 ? rss[c] / rss[PLAIN] : 0);
      json_put_i64(&j, "failures", failures[c]);
      json_close(&j);
    }
    json_close(&j);
    json_open_array(&j, "targets");
    for (int i = 0; i < target_count; i++) {
      json_open_object(&j, NULL);
      json_put_string(&j, "what", targets[i].what);
      json_put_double(&j, "value", targets[i].value);
      json_put_double(&j, "target", targets[i].target);
      json_put_bool(&j, "met", targets[i].higher_is_better ? targets[i].value >= targets[i].target
                                                           : targets[i].value <= targets[i].target);
      json_close(&j);
    }
    json_close(&j);
    json_end(&j);
    return 0;
  }
  printf("%s: %s, %d rounds, interleaved in a balanced order\n", program[0], time_key, rounds);
  printf("  %-15s %8s %8s %8s %8s %8s %8s %11s %10s %9s\n", "config", "median", "speedup", "fastest", "speedup",
         "cpu", "speedup", "huge share", "peak RSS", "RSS/plain");
  for (int c = 0; c < CONFIG_COUNT; c++) {
    if (!have[c]) { printf("  %-15s not installed\n", config_names[c]); continue; }
    printf("  %-15s", config_names[c]);
    for (int v = 0; v < VIEW_COUNT; v++) {
      int column = v == CPU ? FASTEST : v == FASTEST ? CPU : v; /* columns: median, fastest, cpu */
      printf(" %7.3fs %7.2fx", time[column][c], time[column][c] > 0 ? time[column][PLAIN] / time[column][c] : 0);
    }
    printf(" %10.1f%% %6.0f MiB %8.3fx%s\n", 100 * fraction[c], rss[c] / 1048576.0,
           rss[PLAIN] > 0 ? rss[c] / rss[PLAIN] : 0, failures[c] ? "  (some runs failed)" : "");
  }
  for (int i = 0; i < target_count; i++) {
    int met = targets[i].higher_is_better ? targets[i].value >= targets[i].target : targets[i].value <= targets[i].target;
    printf("  target: %-58s %.3f (%s %.2f) %s\n", targets[i].what, targets[i].value,
           targets[i].higher_is_better ? ">=" : "<=", targets[i].target, met ? "met" : "MISSED");
  }
  return 0;
}
