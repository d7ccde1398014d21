/* SPDX-License-Identifier: MIT */
/* check_output.c - what `hugify check` prints: the text (tables, code vs data, counters, the verdict) and
 * the JSON (schema hugify.check/2, docs/check.md). Figures only; check.c measures and decides. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "format.h"
#include "units.h"

static const char *judgement(const struct stats_interval *s) {
  return measure_verdict_text(measure_judge(s, CHECK_MIN_GAIN));
}

/* ---- output -------------------------------------------------------------------------------------- */

static void format_interval(const struct stats_interval *s, char *out, size_t cap) {
  snprintf(out, cap, "%.2f-%.2f", s->low, s->high);
}

static void format_fraction(double part, double whole, char *out, size_t cap) {
  if (whole > 0) snprintf(out, cap, "%.0f %%", 100.0 * part / whole);
  else snprintf(out, cap, "-");
}

static void print_counters(const struct check *c, const struct verdict *v, FILE *out) {
  if (c->pmu != HUGIFY_FEATURE_YES) return;
  const struct config *plain = c->configs[0];
  int other = v->chosen >= 0 ? v->chosen : v->best;
  fprintf(out, "\nCounters (user space, summed over the runs):\n");
  const struct config *shown[2] = {plain, other > 0 ? c->configs[other] : NULL};
  for (int k = 0; k < 2; k++) {
    if (!shown[k] || shown[k]->counter_runs == 0) continue;
    struct hugify_tlb_rates rates;
    hugify_counters_rates(&shown[k]->counters, &rates);
    fprintf(out, "  %-10s dTLB load misses %5.2f %%, dTLB store misses %5.2f %%, iTLB misses %5.2f %%, "
                 "%.2f dTLB misses / 1000 instructions\n",
            shown[k]->kind->name, 100.0 * rates.dtlb_load_miss_rate, 100.0 * rates.dtlb_store_miss_rate,
            100.0 * rates.itlb_miss_rate, rates.dtlb_misses_per_kilo_instructions);
  }
  struct hugify_tlb_rates rates;
  hugify_counters_rates(&plain->counters, &rates);
  double working_set = stats_median(plain->max_rss, plain->runs);
  char size[32];
  format_bytes((uint64_t)working_set, size, sizeof size);
  switch (hugify_tlb_rule_of_thumb(&rates, (uint64_t)working_set)) {
  case 1:
    fprintf(out, "  Rule of thumb: dTLB load miss rate %.1f %% > 5 %% and working set %s > 8 MiB: huge pages "
                 "should help.\n", 100.0 * rates.dtlb_load_miss_rate, size);
    break;
  case 0:
    fprintf(out, "  Rule of thumb: dTLB load miss rate %.1f %%, working set %s: huge pages should not help much "
                 "(they help above ~5-10 %% and a few MiB).\n", 100.0 * rates.dtlb_load_miss_rate, size);
    break;
  default:
    fprintf(out, "  Rule of thumb: no dTLB miss rate (this CPU does not count dTLB loads).\n");
  }
  if (c->pmu_reason[0]) fprintf(out, "  Not counted: %s\n", c->pmu_reason);
}

/* The metric's name and the other one's: "cpu"/"wall", or with --load "score"/"load time" and "server CPU". */
static void metric_names(const struct check *c, const char **metric, const char **other) {
  *metric = c->metric_wall ? "wall" : "cpu";
  *other = c->metric_wall ? "cpu" : "wall";
  if (c->load.load_command) {
    const char *measured = c->load.score_pattern ? "score" : "load time";
    *metric = c->metric_wall ? measured : "server CPU";
    *other = c->metric_wall ? "server CPU" : measured;
  }
}

static void print_heading(const struct check *c, FILE *out) {
  char line[4096];
  struct config plain_only = {.kind = &config_kinds[CONFIG_PLAIN], .id = CONFIG_PLAIN};
  check_command_line(c, &plain_only, line, sizeof line);
  fprintf(out, "hugify check: %s%s\n", line, c->bundled ? "  (the bundled TLB-bound workload)" : "");
  fprintf(out, "CMD output: %s\n", c->log_path);
  if (c->pmu == HUGIFY_FEATURE_NO) fprintf(out, "no PMU: counters not supported, relying on timing\n");
  for (int id = 0; id < CONFIG_COUNT; id++)
    if (c->skipped[id][0]) fprintf(out, "skipped %s: %s\n", config_kinds[id].name, c->skipped[id]);
  const char *why = strcmp(c->stopped, "converged") == 0 ? "every 95 % interval within +-2 %"
                    : strcmp(c->stopped, "budget") == 0  ? "time budget spent (intervals wider than +-2 %)"
                    : strcmp(c->stopped, "runs") == 0    ? "the rounds asked for"
                                                         : "round limit";
  fprintf(out, "%zu rounds of %d configurations, interleaved, after %zu warm-up round%s: %.1f s; stopped: %s\n\n",
          c->rounds, c->config_count, c->warmup, c->warmup == 1 ? "" : "s", c->elapsed, why);
}

/* One row of the main table: the cells of configs[i]; a sanitizer's heap is marked and named in *heap_owner. */
static void add_config_row(const struct check *c, int i, struct table *t, const char **heap_owner) {
  const struct config *config = c->configs[i];
  bool load = c->load.load_command != NULL, scored = c->load.score_pattern != NULL;
  char wall[32], cpu[32], ratio[32] = "1.00x", ci[48] = "", other_ratio[32] = "1.00x", rss[32], faults[32],
      data[16] = "-", text[16] = "-";
  if (load && scored) snprintf(wall, sizeof wall, "%.6g", stats_median(config->score, config->runs));
  else if (load) snprintf(wall, sizeof wall, "%.3f s", stats_median(config->score, config->runs));
  else snprintf(wall, sizeof wall, "%.3f s", stats_median(config->wall, config->runs));
  snprintf(cpu, sizeof cpu, "%.3f s", stats_median(config->cpu, config->runs));
  if (i > 0 && config->ratio_rc == 0) {
    snprintf(ratio, sizeof ratio, "%.2fx", config->ratio.estimate);
    format_interval(&config->ratio, ci, sizeof ci);
  }
  const struct stats_interval *second = c->metric_wall ? &config->cpu_ratio : &config->wall_ratio;
  bool second_measured = i > 0 && (c->metric_wall ? config->cpu_ratio_rc : config->wall_ratio_rc) == 0;
  if (second_measured) snprintf(other_ratio, sizeof other_ratio, "%.2fx", second->estimate);
  format_bytes((uint64_t)stats_median(config->peak_memory, config->runs), rss, sizeof rss);
  snprintf(faults, sizeof faults, "%.0f", stats_median(config->minor_faults, config->runs));
  if (load) { /* no RSS or faults of a server that hugify does not wait for: the other metric's interval */
    rss[0] = '\0';
    if (second_measured) format_interval(second, rss, sizeof rss);
    snprintf(faults, sizeof faults, "%.1f s", stats_median(config->ready, config->runs));
  }
  if (config->coverage.present) {
    /* Data: the heap and the other anonymous memory (glibc serves big blocks with mmap: "anon"), at the peak. */
    format_fraction(config->coverage.data_huge, config->coverage.data_resident, data, sizeof data);
    if (config->coverage.heap_owner[0]) { /* marked: the figure is the sanitizer's heap, not glibc's */
      *heap_owner = config->coverage.heap_owner;
      snprintf(data + strlen(data), sizeof data - strlen(data), " *");
    }
    format_fraction(config->coverage.text_huge, config->coverage.text_resident, text, sizeof text);
  }
  table_row(t, config->kind->name, wall, cpu, ratio, ci, other_ratio, rss, faults, data, text);
}

/* When a runtime's own allocator held the data in some configuration (what the heap modes do not reach), what
 * held it in each: "data: CPython obmalloc arenas (1 MiB mmaps): heap, heap+text; glibc's malloc: pymalloc-off". */
static void print_data_allocators(const struct check *c, FILE *out) {
  bool runtime = false;
  for (int i = 1; i < c->config_count; i++) runtime |= allocator_is_runtime(allocator_of_name(c->configs[i]->coverage.allocator));
  if (!runtime) return;
  fprintf(out, "  data:");
  bool shown[CONFIG_COUNT] = {false}, first = true;
  for (int i = 1; i < c->config_count; i++) {
    const struct coverage *group = &c->configs[i]->coverage;
    if (shown[i] || !group->allocator[0]) continue;
    fprintf(out, "%s %s:", first ? "" : ";", allocator_description(allocator_of_name(group->allocator)));
    first = false;
    for (int k = i, comma = 0; k < c->config_count; k++)
      if (strcmp(c->configs[k]->coverage.allocator, group->allocator) == 0) {
        fprintf(out, "%s %s", comma++ ? "," : "", c->configs[k]->kind->name);
        shown[k] = true;
      }
  }
  fprintf(out, " (docs/runtimes.md)\n");
}

static void print_config_table(const struct check *c, FILE *out) {
  bool load = c->load.load_command != NULL, scored = c->load.score_pattern != NULL;
  const char *metric, *other;
  metric_names(c, &metric, &other);
  char metric_header[32], other_header[32];
  snprintf(metric_header, sizeof metric_header, "%s vs plain", metric);
  snprintf(other_header, sizeof other_header, "%s vs plain", other);
  const char *const headers[] = {"config", load ? (scored ? "score" : "load time") : "wall", load ? "server CPU" : "cpu",
                                 metric_header, "95 % CI", other_header, load ? "other CI" : "peak memory",
                                 load ? "ready" : "minor faults", "data huge", "text huge"};
  static const bool right[] = {false, true, true, true, true, true, true, true, true, true};
  struct table t;
  table_init(&t, 10, headers, right);
  const char *heap_owner = NULL;
  for (int i = 0; i < c->config_count; i++) add_config_row(c, i, &t, &heap_owner);
  table_print(&t, out, "  ");
  table_free(&t);
  fprintf(out, "  peak memory: RSS + hugetlb pages of the process of CMD's tree that held the most (plain: its max "
               "RSS); data huge: heap + anon on huge pages at each process's peak, over the tree\n");
  if (heap_owner)
    fprintf(out, "  * malloc is %s's allocator in CMD's tree: the heap configurations measure its mappings, which "
                 "glibc's tunables and the mmap cover do not reach (docs/check.md)\n", heap_owner);
  print_data_allocators(c, out);
}

/* The unit that suits a duration: its scale and name. */
static double latency_unit(double seconds, const char **name) {
  *name = seconds < 1e-3 ? "us" : seconds < 1 ? "ms" : "s";
  return seconds < 1e-3 ? 1e6 : seconds < 1 ? 1e3 : 1;
}

/* A duration with three significant figures in the unit that suits it: "812 us", "2.14 ms", "1.02 s". */
static void format_latency(double seconds, char *out, size_t cap) {
  const char *name;
  double scale = latency_unit(seconds, &name);
  snprintf(out, cap, "%.3g %s", seconds * scale, name);
}

/* An interval of durations in the unit of its upper end: "1.22-1.84 ms". */
static void format_latency_interval(const struct stats_interval *s, char *out, size_t cap) {
  const char *name;
  double scale = latency_unit(s->high, &name);
  snprintf(out, cap, "%.3g-%.3g %s", s->low * scale, s->high * scale, name);
}

/* --load: p50, p99 and max per configuration (medians of the rounds, their intervals), and p99 and max
 * against plain's. Nothing when the load printed no latency. */
static void print_latency_table(const struct check *c, FILE *out) {
  const struct config *plain = c->configs[0];
  if (!c->load.load_command || plain->latency_tool == LOAD_TOOL_NONE) return;
  static const char *const headers[] = {"latency", "p50", "95 % CI", "p99", "95 % CI", "max", "95 % CI",
                                        "p99 vs plain", "95 % CI", "max vs plain", "95 % CI"};
  static const bool right[] = {false, true, true, true, true, true, true, true, true, true, true};
  struct table t;
  table_init(&t, 11, headers, right);
  for (int i = 0; i < c->config_count; i++) {
    const struct config *config = c->configs[i];
    char cell[7][48];
    for (int k = 0; k < LATENCY_FIGURES; k++) {
      const struct latency_summary *s = &config->latency_summary[k];
      snprintf(cell[2 * k], sizeof cell[0], "-");
      cell[2 * k + 1][0] = '\0';
      if (s->rc != 0) continue;
      format_latency(s->spread.median, cell[2 * k], sizeof cell[0]);
      if (s->spread.interval_rc == 0) format_latency_interval(&s->spread.interval, cell[2 * k + 1], sizeof cell[0]);
    }
    char ratio[2][32], ci[2][48];
    for (int f = 0; f < 2; f++) {
      const struct latency_summary *s = &config->latency_summary[f == 0 ? LATENCY_P99 : LATENCY_MAX];
      snprintf(ratio[f], sizeof ratio[f], i == 0 ? "1.00x" : "-");
      ci[f][0] = '\0';
      if (i == 0 || s->ratio_rc != 0) continue;
      snprintf(ratio[f], sizeof ratio[f], "%.2fx", s->ratio.estimate);
      format_interval(&s->ratio, ci[f], sizeof ci[f]);
    }
    table_row(&t, config->kind->name, cell[0], cell[1], cell[2], cell[3], cell[4], cell[5], ratio[0], ci[0], ratio[1], ci[1]);
  }
  fprintf(out, "\n");
  table_print(&t, out, "  ");
  table_free(&t);
  fprintf(out, "  latency: from the load's output (%s%s), median of the rounds; vs plain: this / plain per round "
               "(above 1: slower responses)\n", load_tool_name(plain->latency_tool),
          plain->latency_estimated ? ", p50 and p99 interpolated in its log2 histogram" : "");
}

static void print_code_vs_data(const struct check *c, const struct verdict *v, FILE *out) {
  if (v->heap >= 0 && v->heap_text >= 0 && v->code_rc == 0) {
    const struct stats_interval *data = &c->configs[v->heap]->ratio;
    fprintf(out, "\nCode vs data: the heap (data) gave %.2fx [%.2f, %.2f], %s; ", data->estimate, data->low, data->high,
            judgement(data));
    if (check_moved_no_code(c->configs[v->heap_text]))
      fprintf(out, "the text remap (code) put no code on huge pages, so its %.2fx [%.2f, %.2f] on top of the heap "
                   "is not the code's.\n", v->code.estimate, v->code.low, v->code.high);
    else
      fprintf(out, "the text remap (code) on top of it %.2fx [%.2f, %.2f], %s.\n", v->code.estimate, v->code.low,
              v->code.high, judgement(&v->code));
  }
  if (v->text >= 0 && c->configs[v->text]->ratio_rc == 0) {
    const struct stats_interval *code = &c->configs[v->text]->ratio;
    fprintf(out, "Code alone (text): %.2fx [%.2f, %.2f], %s%s.\n", code->estimate, code->low, code->high,
            judgement(code), check_moved_no_code(c->configs[v->text]) ? " - but no code was on huge pages: not the code's" : "");
  }
}

/* ", but p99 1.40x worse (95 % CI 1.30-1.52) and max 2.1x worse (...)" for a chosen configuration whose tail
 * is worse than plain's beyond noise; "" otherwise. */
static void format_tail_warning(const struct verdict *v, char *out, size_t cap) {
  out[0] = '\0';
  const char *joint = ", but";
  for (int k = 0; k < MEASURE_TAIL_COUNT; k++) {
    if (!(v->tail_worse & (1u << k))) continue;
    size_t used = strlen(out);
    snprintf(out + used, cap - used, "%s %s %.2fx worse (95 %% CI %.2f-%.2f)", joint, measure_tail_name((enum measure_tail)k),
             v->tail[k].estimate, v->tail[k].low, v->tail[k].high);
    joint = " and";
  }
}

static void print_verdict(const struct check *c, const struct verdict *v, FILE *out) {
  char line[4096], warning[256];
  bool load = c->load.load_command != NULL;
  const char *metric, *other;
  metric_names(c, &metric, &other);
  if (v->chosen >= 0) {
    const struct config *chosen = c->configs[v->chosen];
    check_command_line(c, chosen, line, sizeof line);
    format_tail_warning(v, warning, sizeof warning);
    fprintf(out, "\nVerdict: %s (%s) - %s%.2fx better than plain in %s%s (95 %% CI %.2f-%.2f; %s%s %.2fx)%s. "
                 "Run it with:\n  %s\n",
            chosen->kind->name, chosen->kind->what, warning[0] ? "gain: " : "", chosen->ratio.estimate, metric,
            load ? "" : " time", chosen->ratio.low, chosen->ratio.high, other, load ? "" : " time",
            c->metric_wall ? chosen->cpu_ratio.estimate : chosen->wall_ratio.estimate, warning, line);
    if (v->tail_worse && v->steady >= 0) {
      const struct config *steady = c->configs[v->steady];
      check_command_line(c, steady, line, sizeof line);
      fprintf(out, "Without the worse tail: %s gains %.2fx (95 %% CI %.2f-%.2f) with p99 and max no worse than "
                   "plain's beyond noise:\n  %s\n", steady->kind->name, steady->ratio.estimate, steady->ratio.low,
              steady->ratio.high, line);
    }
  } else if (v->best > 0) {
    const struct config *best = c->configs[v->best];
    fprintf(out, "\nVerdict: no measurable gain - nothing beat plain beyond noise by %.0f %% or more "
                 "in %s%s (best: %s %.2fx, 95 %% CI %.2f-%.2f). Huge pages are not worth it "
                 "for this command.\n",
            100.0 * CHECK_MIN_GAIN, metric, load ? "" : " time", best->kind->name, best->ratio.estimate, best->ratio.low,
            best->ratio.high);
  }
}

void check_print_human(const struct check *c, const struct verdict *v, FILE *out) {
  print_heading(c, out);
  print_config_table(c, out);
  print_latency_table(c, out);
  print_code_vs_data(c, v, out);
  print_counters(c, v, out);
  print_verdict(c, v, out);
  if (c->noise[0]) fprintf(out, "Intervals wider than +-2 %%; likely cause: %s.\n", c->noise);
}

/* {estimate, low, high, confidence, judgement} (judgement left out when NULL), or null when rc says unmeasured. */
static void json_ratio(struct json_writer *j, const char *key, int rc, const struct stats_interval *s, const char *judged) {
  if (rc != 0) {
    json_put_null(j, key);
    return;
  }
  json_open_object(j, key);
  json_put_double(j, "estimate", s->estimate);
  json_put_double(j, "low", s->low);
  json_put_double(j, "high", s->high);
  json_put_double(j, "confidence", s->coverage);
  if (judged) json_put_string(j, "judgement", judged);
  json_close(j);
}

static void json_interval(struct json_writer *j, const char *key, int rc, const struct stats_interval *s) {
  json_ratio(j, key, rc, s, rc == 0 ? judgement(s) : NULL);
}

static void json_rates(struct json_writer *j, const char *key, const struct config *config) {
  if (config->counter_runs == 0) {
    json_put_null(j, key);
    return;
  }
  json_open_object(j, key);
  json_put_u64(j, "runs", config->counter_runs);
  json_open_object(j, "totals");
  for (unsigned i = 0; i < HUGIFY_COUNTER_COUNT; i++) {
    if (config->counters.present & (1u << i)) json_put_u64(j, hugify_counter_name(i), config->counters.value[i]);
    else json_put_null(j, hugify_counter_name(i));
  }
  json_close(j);
  struct hugify_tlb_rates rates;
  hugify_counters_rates(&config->counters, &rates);
  json_put_double(j, "dtlb_load_miss_fraction", rates.dtlb_load_miss_rate);
  json_put_double(j, "dtlb_store_miss_fraction", rates.dtlb_store_miss_rate);
  json_put_double(j, "itlb_miss_fraction", rates.itlb_miss_rate);
  json_put_double(j, "dtlb_misses_per_kilo_instructions", rates.dtlb_misses_per_kilo_instructions);
  json_put_double(j, "itlb_misses_per_kilo_instructions", rates.itlb_misses_per_kilo_instructions);
  json_put_double(j, "instructions_per_cycle", rates.instructions_per_cycle);
  json_close(j);
}

static void json_series(struct json_writer *j, const char *key, const double *values, size_t n) {
  json_open_array(j, key);
  for (size_t i = 0; i < n; i++) json_put_double(j, NULL, values[i]);
  json_close(j);
}

static void json_header(struct json_writer *j, const struct check *c) {
  json_open_array(j, "command");
  for (char **a = c->command; *a; a++) json_put_string(j, NULL, *a);
  json_close(j);
  json_put_bool(j, "bundled_workload", c->bundled);
  json_put_string(j, "log_path", c->log_path);
  json_put_string(j, "method", "per-round paired ratio plain/config, median, sign-test interval");
  bool load = c->load.load_command != NULL;
  json_put_string(j, "metric", load ? (c->metric_wall ? (c->load.score_pattern ? "score" : "load_wall") : "server_cpu")
                                    : c->metric_wall ? "wall" : "cpu");
  if (load) {
    json_open_object(j, "load");
    json_put_string(j, "command", c->load.load_command);
    if (c->load.ready_port) json_put_i64(j, "ready_port", c->load.ready_port);
    else json_put_null(j, "ready_port");
    json_put_string(j, "ready_command", c->load.ready_command);
    json_put_string(j, "score_pattern", c->load.score_pattern);
    json_put_double(j, "ready_timeout_seconds", c->load.ready_timeout);
    json_put_double(j, "stop_timeout_seconds", c->load.stop_timeout);
    json_put_string(j, "latency", c->load.latency_tool == LOAD_TOOL_REGEX ? "regex" : load_latency_choices[c->load.latency_choice]);
    json_open_object(j, "latency_patterns");
    for (int k = 0; k < LATENCY_FIGURES; k++) json_put_string(j, latency_figure_names[k], c->load.latency_pattern[k]);
    json_close(j);
    json_put_string(j, "latency_unit", c->load.latency_tool == LOAD_TOOL_REGEX ? load_latency_units[c->load.latency_unit] : NULL);
    json_close(j);
  } else {
    json_put_null(j, "load");
  }
  json_put_double(j, "confidence", CHECK_CONFIDENCE);
  json_put_double(j, "precision_fraction", CHECK_PRECISION);
  json_put_double(j, "min_gain_fraction", CHECK_MIN_GAIN);
  json_put_u64(j, "warmup_rounds", c->warmup);
  json_put_u64(j, "rounds", c->rounds);
  if (c->fixed_runs) json_put_null(j, "budget_seconds");
  else json_put_double(j, "budget_seconds", c->budget);
  json_put_double(j, "elapsed_seconds", c->elapsed);
  json_put_string(j, "stopped", c->failure.failed ? "failed" : c->stopped);
  json_open_object(j, "counters");
  json_put_bool(j, "available", c->pmu == HUGIFY_FEATURE_YES);
  json_put_string(j, "reason", c->pmu_reason[0] ? c->pmu_reason : NULL);
  json_close(j);
}

static void json_coverage(struct json_writer *j, const struct config *config) {
  if (!config->coverage.present) {
    json_put_null(j, "coverage");
    return;
  }
  json_open_object(j, "coverage");
  json_put_u64(j, "reports", config->reports);
  json_put_u64(j, "heap_resident_bytes", config->coverage.heap_resident);
  json_put_u64(j, "heap_huge_bytes", config->coverage.heap_huge);
  json_put_u64(j, "anon_resident_bytes", config->coverage.anon_resident);
  json_put_u64(j, "anon_huge_bytes", config->coverage.anon_huge);
  json_put_u64(j, "text_resident_bytes", config->coverage.text_resident);
  json_put_u64(j, "text_huge_bytes", config->coverage.text_huge);
  json_put_u64(j, "data_resident_bytes", config->coverage.data_resident);
  json_put_u64(j, "data_huge_bytes", config->coverage.data_huge);
  json_put_fraction(j, "data_huge_fraction", config->coverage.data_huge, config->coverage.data_resident);
  json_put_string(j, "data_measured_at", config->coverage.data_at_peak ? "peak" : "exit");
  json_put_string(j, "heap_owner", config->coverage.heap_owner[0] ? config->coverage.heap_owner : NULL);
  enum allocator_kind allocator = allocator_of_name(config->coverage.allocator);
  json_put_string(j, "allocator", config->coverage.allocator[0] ? config->coverage.allocator : NULL);
  json_put_string(j, "allocator_data", config->coverage.allocator[0] ? allocator_description(allocator) : NULL);
  json_put_bool(j, "allocator_is_runtime", allocator_is_runtime(allocator));
  json_put_double(j, "hugify_seconds", config->coverage.hugify_seconds);
  json_close(j);
}

const char *check_latency_judgement(const struct stats_interval *ratio) {
  switch (measure_judge_latency(ratio, CHECK_MIN_TAIL_CHANGE)) {
  case MEASURE_LOSS: return "measurably worse";
  case MEASURE_GAIN: return "measurably better";
  case MEASURE_TIE: break;
  }
  return "no measurable difference";
}

/* --load: a configuration's latency figures (null when the load printed none). */
static void json_latency(struct json_writer *j, const struct config *config, bool plain) {
  if (config->latency_tool == LOAD_TOOL_NONE) {
    json_put_null(j, "latency");
    return;
  }
  json_open_object(j, "latency");
  json_put_string(j, "tool", load_tool_name(config->latency_tool));
  json_put_bool(j, "estimated", config->latency_estimated);
  for (int k = 0; k < LATENCY_FIGURES; k++) {
    const struct latency_summary *s = &config->latency_summary[k];
    char key[48];
    snprintf(key, sizeof key, "%s_seconds", latency_figure_names[k]);
    if (s->rc == 0) json_put_double(j, key, s->spread.median);
    else json_put_null(j, key);
    snprintf(key, sizeof key, "%s_interval", latency_figure_names[k]);
    if (s->rc == 0 && s->spread.interval_rc == 0) {
      json_open_object(j, key);
      json_put_double(j, "low", s->spread.interval.low);
      json_put_double(j, "high", s->spread.interval.high);
      json_put_double(j, "confidence", s->spread.interval.coverage);
      json_close(j);
    } else {
      json_put_null(j, key);
    }
    snprintf(key, sizeof key, "%s_vs_plain", latency_figure_names[k]);
    bool compared = !plain && s->ratio_rc == 0;
    json_ratio(j, key, compared ? 0 : -ENOENT, &s->ratio, compared ? check_latency_judgement(&s->ratio) : NULL);
    snprintf(key, sizeof key, "%s_seconds_per_round", latency_figure_names[k]);
    json_series(j, key, config->latency[k], config->runs);
  }
  json_close(j);
}

static void json_config(struct json_writer *j, const struct check *c, int i) {
  const struct config *config = c->configs[i];
  char line[4096];
  json_open_object(j, NULL);
  json_put_string(j, "name", config->kind->name);
  check_command_line(c, config, line, sizeof line);
  json_put_string(j, "command_line", line);
  json_put_string(j, "environment", config->kind->environment[0]); /* null: none besides hugify run's */
  json_put_u64(j, "runs", config->runs);
  json_put_double(j, "wall_seconds", stats_median(config->wall, config->runs));
  json_put_double(j, "cpu_seconds", stats_median(config->cpu, config->runs));
  json_put_double(j, "system_seconds", stats_median(config->system, config->runs));
  json_interval(j, "ratio", i ? config->ratio_rc : -1, &config->ratio);
  json_interval(j, "wall_ratio", i ? config->wall_ratio_rc : -1, &config->wall_ratio);
  json_interval(j, "cpu_ratio", i ? config->cpu_ratio_rc : -1, &config->cpu_ratio);
  json_put_u64(j, "max_rss_bytes", (uint64_t)stats_median(config->max_rss, config->runs));
  json_put_u64(j, "peak_memory_bytes", (uint64_t)stats_median(config->peak_memory, config->runs));
  json_put_u64(j, "minor_faults", (uint64_t)stats_median(config->minor_faults, config->runs));
  json_coverage(j, config);
  json_rates(j, "counters", config);
  json_series(j, "wall_seconds_per_round", config->wall, config->runs);
  json_series(j, "cpu_seconds_per_round", config->cpu, config->runs);
  json_series(j, "system_seconds_per_round", config->system, config->runs);
  if (c->load.load_command) { /* --load: wall_seconds = 1 / score (or the load's time); cpu_seconds = the server's */
    json_put_double(j, "score", stats_median(config->score, config->runs));
    json_series(j, "score_per_round", config->score, config->runs);
    json_series(j, "ready_seconds_per_round", config->ready, config->runs);
    json_latency(j, config, i == 0);
  }
  json_close(j);
}

static void json_skipped(struct json_writer *j, const struct check *c) {
  json_open_array(j, "skipped");
  for (int id = 0; id < CONFIG_COUNT; id++) {
    if (!c->skipped[id][0]) continue;
    json_open_object(j, NULL);
    json_put_string(j, "name", config_kinds[id].name);
    json_put_string(j, "reason", c->skipped[id]);
    json_close(j);
  }
  json_close(j);
}

/* The chosen configuration's tail against plain's: null without latency figures. */
static void json_tail(struct json_writer *j, const struct check *c, const struct verdict *v) {
  if (v->tail_rc[MEASURE_TAIL_P99] != 0 && v->tail_rc[MEASURE_TAIL_MAX] != 0) {
    json_put_null(j, "tail");
    return;
  }
  json_open_object(j, "tail");
  json_open_array(j, "worse");
  for (int k = 0; k < MEASURE_TAIL_COUNT; k++)
    if (v->tail_worse & (1u << k)) json_put_string(j, NULL, measure_tail_name((enum measure_tail)k));
  json_close(j);
  for (int k = 0; k < MEASURE_TAIL_COUNT; k++) {
    char key[32];
    snprintf(key, sizeof key, "%s_vs_plain", measure_tail_name((enum measure_tail)k));
    json_ratio(j, key, v->tail_rc[k], &v->tail[k], v->tail_rc[k] == 0 ? check_latency_judgement(&v->tail[k]) : NULL);
  }
  json_put_string(j, "steady_config", v->tail_worse && v->steady >= 0 ? c->configs[v->steady]->kind->name : NULL);
  json_close(j);
}

static void json_verdict(struct json_writer *j, const struct check *c, const struct verdict *v) {
  if (v && v->heap >= 0 && v->heap_text >= 0) {
    json_open_object(j, "code_vs_data");
    json_interval(j, "data", c->configs[v->heap]->ratio_rc, &c->configs[v->heap]->ratio);
    json_interval(j, "code", v->code_rc, &v->code);
    json_put_bool(j, "code_on_huge_pages", !check_moved_no_code(c->configs[v->heap_text]));
    json_close(j);
  } else {
    json_put_null(j, "code_vs_data");
  }
  json_open_object(j, "verdict");
  if (c->failure.failed) {
    json_put_string(j, "outcome", "command failed");
    json_put_null(j, "config");
    json_put_null(j, "tail");
  } else if (v && v->chosen >= 0) {
    const struct config *chosen = c->configs[v->chosen];
    char line[4096];
    json_put_string(j, "outcome", "gain");
    json_put_string(j, "config", chosen->kind->name);
    json_put_double(j, "ratio", chosen->ratio.estimate);
    json_put_double(j, "low", chosen->ratio.low);
    json_put_double(j, "high", chosen->ratio.high);
    check_command_line(c, chosen, line, sizeof line);
    json_put_string(j, "command_line", line);
    json_tail(j, c, v);
  } else {
    json_put_string(j, "outcome", "no measurable gain");
    json_put_null(j, "config");
    json_put_null(j, "tail");
  }
  json_close(j);
}

static void json_failure(struct json_writer *j, const struct check *c) {
  if (!c->failure.failed) {
    json_put_null(j, "failure");
    return;
  }
  json_open_object(j, "failure");
  json_put_string(j, "config", config_kinds[c->failure.config].name);
  json_put_u64(j, "round", (uint64_t)c->failure.round);
  json_put_bool(j, "warmup", c->failure.warmup);
  json_put_i64(j, "exit_status", c->failure.status);
  if (c->failure.signal) json_put_i64(j, "signal", c->failure.signal);
  else json_put_null(j, "signal");
  json_put_string(j, "output", c->failure.output ? c->failure.output : "");
  json_close(j);
}

static void json_noise(struct json_writer *j, const struct check *c) {
  json_open_object(j, "noise");
  if (c->machine.load_average >= 0) json_put_double(j, "load_average", c->machine.load_average);
  else json_put_null(j, "load_average");
  json_put_i64(j, "cpus", c->machine.cpus);
  if (c->machine.system_spread >= 0) json_put_double(j, "system_spread_fraction", c->machine.system_spread);
  else json_put_null(j, "system_spread_fraction");
  json_put_string(j, "cause", c->noise[0] ? c->noise : NULL);
  json_close(j);
}

void check_print_json(const struct check *c, const struct verdict *v, FILE *out) {
  struct json_writer j;
  json_begin(&j, out, "hugify.check/2");
  json_header(&j, c);
  json_open_array(&j, "configs");
  for (int i = 0; i < c->config_count; i++) json_config(&j, c, i);
  json_close(&j);
  json_skipped(&j, c);
  json_verdict(&j, c, v);
  json_failure(&j, c);
  json_noise(&j, c);
  json_end(&j);
}

void check_print_failure(const struct check *c) {
  const struct failure *f = &c->failure;
  if (c->load.load_command) { /* a server round: check_load.c said what happened, with the server's output */
    if (f->warmup) fprintf(stderr, "hugify check: in the warm-up round (%s): ", config_kinds[f->config].name);
    else fprintf(stderr, "hugify check: in round %d (%s): ", f->round, config_kinds[f->config].name);
    fprintf(stderr, "%s(all of the output: %s)\n", f->output ? f->output : "", c->log_path);
    return;
  }
  if (f->warmup) fprintf(stderr, "hugify check: CMD failed in the warm-up round (%s): ", config_kinds[f->config].name);
  else fprintf(stderr, "hugify check: CMD failed in round %d (%s): ", f->round, config_kinds[f->config].name);
  if (f->signal) fprintf(stderr, "killed by signal %d (%s)", f->signal, strsignal(f->signal));
  else if (f->status < 0) fprintf(stderr, "it could not be started");
  else fprintf(stderr, "exit status %d", f->status);
  fprintf(stderr, ". Its output (all of it in %s):\n", c->log_path);
  const char *text = f->output ? f->output : "";
  fputs(text, stderr);
  if (*text && text[strlen(text) - 1] != '\n') fputc('\n', stderr);
}
