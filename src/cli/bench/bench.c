/* SPDX-License-Identifier: MIT */
/* bench.c - hugify bench: the seeds' experiments on this machine, for every page kind it can get, as
 * tables, JSON and an SVG chart of the speedup over 4 KiB pages against the working-set size.
 *
 * Every kind's memory comes from hugify_alloc with a one-kind chain and HUGIFY_STRICT, so a kind that
 * cannot be had is reported skipped with the library's reason, never replaced by another kind; and what
 * backs each working set is measured with hugify_measure_backing right before it is timed.
 *
 * Every point is timed several times (3, or 5 without --quick), the repetitions interleaved across the page
 * kinds in a balanced order (src/lib/measure.c), never back to back: the figure is the median, with the
 * min/max beside it; a point whose spread exceeds NOISY_SPREAD of its median is flagged noisy, and kinds
 * within each other's spread are a tie, not a ranking. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_run.h"
#include "cli.h"
#include "hugify.h"
#include "json_read.h"
#include "measure.h"
#include "options.h"
#include "os.h"
#include "procfs.h"
#include "units.h"

struct bench_args {
  const char *pages, *chart, *inject_noise;
  uint64_t max_size;
  bool quick;
  struct json_output json;
};

static const struct option_spec bench_options[] = {
    OPT_GROUP("Options"),
    OPT_STRING("pages", struct bench_args, pages, "KINDS",
               "page kinds to time, from 4K,THP,2M,1G (default: all). 4K is always timed:\n"
               "it is the baseline of every speedup"),
    OPT_SIZE("max-size", struct bench_args, max_size, "SIZE", 8 << 10,
             "largest working set (default: 4 GiB or half the available memory, whichever\n"
             "is smaller; 256 MiB with --quick)"),
    OPT_FLAG("quick", 0, struct bench_args, quick, "a first look in under a minute: fewer sizes, shorter timings"),
    OPT_JSON(struct bench_args, json,
             "the results as JSON on stdout instead of the tables (schema hugify.bench/2,\n"
             "docs/bench.md); --json=FILE: the tables on stdout and the JSON to FILE (--json=- is stdout)"),
    OPT_STRING("chart", struct bench_args, chart, "FILE.svg",
               "write the chart: speedup over 4K vs working-set size, one line per kind, the\n"
               "spread of each point as an error bar"),
    OPT_STRING("inject-noise", struct bench_args, inject_noise, "KIND",
               "test hook: one repetition of every point of KIND takes twice its time (a busy\n"
               "wait inside the timing), so those points must come out flagged noisy"),
    OPT_END,
};

const struct command_help help_bench = {
    "usage: hugify bench [EXPERIMENT...] [--pages KINDS] [--max-size SIZE] [--quick]\n"
    "                    [--json | --json=FILE] [--chart FILE.svg]\n"
    "\n"
    "What huge pages buy on this machine: the seed experiments, timed on each page kind, with the\n"
    "speedup over 4 KiB pages against the working-set size. Before every timing, hugify_measure_backing\n"
    "checks what really backs the working set; a point under 95 % on its page kind is flagged.\n"
    "Every point is timed 3 times (--quick) or 5 times, interleaved across the page kinds: the median is\n"
    "shown with its spread (min-max); a point whose spread exceeds 10 % of its median is flagged noisy,\n"
    "and kinds within each other's spread are reported as a tie, not ranked.\n"
    "\n"
    "Experiments (default: all):\n"
    "  random   independent random 8-byte reads (throughput), 8 KiB .. --max-size\n"
    "  chase    dependent loads around one random cycle (latency), 8 KiB .. --max-size\n"
    "  touch    first touch of the largest working set: page faults per 4 KiB\n"
    "  hash     lookups in an open-addressing hash table, 8 KiB .. min(--max-size, 1 GiB)\n"
    "  strings  short (<20 B) random strings in a hash set, looked up in shuffled order;\n"
    "           10 M, 30 M, 60 M strings, scaled down to fit --max-size\n"
    "  absl     the seed's 10 M try_emplace into absl::flat_hash_map (scaled down to fit --max-size),\n"
    "           std::allocator vs hugify::allocator (runs absl_hash_map, built with libabsl-dev)\n"
    "\n",
    bench_options,
    "\n"
    "A kind that cannot be had (no hugetlb pool, no 1 GiB page) is listed as skipped with the reason and\n"
    "the command that enables it, e.g. 'hugify pool set 2M=2048'.\n"
    "\n"
    "When points are noisy, the likely cause is named (machine load, large kernel-time variance).\n"
    "\n"
    "Exit status: 0 done (noisy points are flagged, not an error); 1 a point was under 95 % coverage, or a kind named in --pages (or an\n"
    "experiment named on the command line) could not be run in full; 2 bad usage; 3 the backing of\n"
    "memory cannot be measured here (/proc/self/smaps unreadable).\n"
    "\n"
    "Examples:\n"
    "  hugify bench --quick --chart bench.svg\n"
    "  hugify bench chase random --pages 4K,THP,2M --max-size 2G --json=bench.json\n"
    "  hugify pool set 2M=2048 && hugify bench hash strings --chart hash.svg\n",
};


/* ---- arguments ---------------------------------------------------------------------------------- */

static int parse_arguments(struct bench *b, int argc, char **argv) {
  struct bench_args args = {0};
  static struct option_result parsed; /* large: off the stack */
  if (parse_command_options(COMMAND, bench_options, OPTIONS_ANYWHERE, argc, argv, &args, &parsed) != EXIT_DONE)
    return EXIT_USAGE;
  b->quick = args.quick;
  b->json = args.json;
  b->chart_path = args.chart;
  b->inject_noise = -1;
  if (args.pages) {
    unsigned selected;
    if (!options_parse_kinds(args.pages, &selected) || !selected)
      return usage_error(COMMAND, "--pages '%s': expected a list of page kinds such as 4K,THP,2M,1G", args.pages);
    for (int k = 0; k < KINDS; k++) b->kinds[k].selected |= (selected >> k) & 1;
    b->kinds_named = true;
  }
  if (args.inject_noise) {
    enum hugify_page_kind kind;
    if (hugify_page_kind_parse(args.inject_noise, &kind) != 0)
      return usage_error(COMMAND, "--inject-noise '%s': expected a page kind (4K, THP, 2M or 1G)", args.inject_noise);
    b->inject_noise = (int)kind;
  }
  for (int i = 0; i < parsed.operand_count; i++) {
    const char *word = argv[parsed.operands[i]];
    int e = 0;
    while (e < EXP_COUNT && strcmp(word, experiment_info[e].name) != 0) e++;
    if (e == EXP_COUNT && strcmp(word, "all") != 0)
      return usage_error(COMMAND, "no experiment '%s' (expected random, chase, touch, hash, strings, absl)", word);
    for (int k = 0; k < EXP_COUNT; k++) b->run[k] |= e == EXP_COUNT || k == e;
    b->experiments_named = true;
    b->absl_named |= e == EXP_ABSL;
  }
  if (!b->experiments_named)
    for (int e = 0; e < EXP_COUNT; e++) b->run[e] = true;
  if (!b->kinds_named)
    for (int k = 0; k < KINDS; k++) b->kinds[k].selected = true;
  b->kinds[HUGIFY_PAGE_4K].selected = true; /* the baseline */

  char *meminfo;
  os_read_file("/proc/meminfo", &meminfo, NULL);
  if (!meminfo || !parse_keyed_value(meminfo, "MemAvailable", &b->mem_available)) b->mem_available = 0;
  free(meminfo);
  if (args.max_size) {
    b->max_size = args.max_size;
    if (b->mem_available && b->max_size > b->mem_available) {
      char want[32], have[32];
      format_bytes(b->max_size, want, sizeof want);
      format_bytes(b->mem_available, have, sizeof have);
      return usage_error(COMMAND, "--max-size %s is more than the %s of memory available", want, have);
    }
  } else {
    uint64_t half = b->mem_available / 2;
    b->max_size = b->quick ? OS_MIB(256) : UINT64_C(4) << 30;
    if (half && half < b->max_size) b->max_size = half;
  }
  b->target_seconds = b->quick ? 0.01 : 0.04;
  b->repeats = b->quick ? 3 : 5;
  b->octaves = b->quick ? 2 : 1;
  return EXIT_DONE;
}

/* ---- the command -------------------------------------------------------------------------------- */

static void read_cpu_model(char *out, size_t cap) {
  out[0] = '\0';
  char *text;
  os_read_file("/proc/cpuinfo", &text, NULL);
  const char *line = text ? strstr(text, "model name") : NULL;
  if (line && (line = strchr(line, ':'))) {
    line += 1 + strspn(line + 1, " \t");
    snprintf(out, cap, "%.*s", (int)strcspn(line, "\n"), line);
  }
  free(text);
}

static int finish(struct bench *b) {
  int status = EXIT_DONE;
  for (size_t i = 0; i < b->point_count; i++)
    if (low_coverage(&b->points[i])) status = EXIT_SHORT;
  for (int k = 0; k < KINDS; k++)
    if (kind_short(b, (enum hugify_page_kind)k) && (b->kinds_named || k == HUGIFY_PAGE_4K)) status = EXIT_SHORT;
  if (b->absl_named && !b->absl_ran) status = EXIT_SHORT;
  if (b->backing_failed) status = EXIT_PRIVILEGE;

  bool json_stdout = !json_output_text(&b->json);
  if (!json_stdout) print_tables(b, stdout);
  if (b->json_file) {
    write_json(b, b->json_file, status);
    if (!json_output_close(b->json_file, &b->json, COMMAND)) status = EXIT_SHORT;
  }
  if (b->chart.stream) {
    int rc = write_chart(b, b->chart.stream);
    if (!output_file_close(&b->chart, COMMAND) || rc != 0) return fail(EXIT_SHORT, COMMAND, "writing %s failed", b->chart_path);
    if (!json_stdout) printf("\nchart: %s\n", b->chart_path);
  }
  if (b->backing_failed)
    fprintf(stderr, "hugify bench: /proc/self/smaps could not be read, so no page kind could be verified "
                    "(mount /proc)\n");
  return status;
}

int cmd_bench(int argc, char **argv) {
  struct bench *b = calloc(1, sizeof *b);
  if (!b) return fail(EXIT_SHORT, COMMAND, "out of memory");
  int rc = parse_arguments(b, argc, argv);
  if (rc == EXIT_DONE && b->json.wanted && !(b->json_file = json_output_open(&b->json, COMMAND))) rc = EXIT_USAGE;
  if (rc == EXIT_DONE && b->chart_path &&
      !output_file_open(&b->chart, b->chart_path, COMMAND, "--chart", "or give another name"))
    rc = EXIT_USAGE;
  if (rc != EXIT_DONE) {
    if (b->json_file && b->json_file != stdout) {
      fclose(b->json_file);
      free(b->json.file.buffer);
    }
    free(b);
    return rc;
  }

  struct hugify_options options = {0};
  char warnings[512] = "";
  options_from_environment(&options, warnings, sizeof warnings);
  if (warnings[0]) fprintf(stderr, "hugify bench: %s\n", warnings);
  b->unavailable = options.test.bench_unavailable;

  hugify_probe(&b->system);
  read_cpu_model(b->cpu, sizeof b->cpu);
  plan_experiments(b);
  b->step_done = 0;
  b->step_total = b->run[EXP_ABSL] ? 1 : 0;
  for (int k = 0; k < KINDS; k++) {
    if (!b->kinds[k].selected) continue;
    b->step_total += b->run[EXP_TOUCH];
    for (int e = 0; e < EXP_COUNT; e++)
      if (b->run[e] && e != EXP_TOUCH && e != EXP_ABSL) b->step_total += b->item_count[e];
  }

  b->started = measure_now();
  run_all(b);
  if (b->run[EXP_ABSL]) run_absl(b);
  b->seconds = measure_now() - b->started;
  summarise(b);
  struct measure_noise_series series;
  size_t noisy_count = noisiest_series(b, &series);
  measure_noise_diagnose(&b->machine, &series, noisy_count, noisy_count > 0, b->noise, sizeof b->noise);
  progress(true, "bench: done in %.0f s", b->seconds);

  rc = finish(b);
  free(b->points);
  free(b);
  return rc;
}
