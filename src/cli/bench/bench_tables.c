/* SPDX-License-Identifier: MIT */
/* bench_tables.c - the results of `hugify bench`: summaries and noise diagnosis, the text tables and the
 * JSON (schema in docs/bench.md). */
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

/* ---- results ------------------------------------------------------------------------------------ */

const struct point *find_point(const struct bench *b, enum experiment e, enum hugify_page_kind kind,
                                      const struct item *item) {
  for (size_t i = 0; i < b->point_count; i++) {
    const struct point *p = &b->points[i];
    if (p->experiment == e && p->kind == kind && p->item.size == item->size && p->item.count == item->count) return p;
  }
  return NULL;
}

/* Medians, spreads and speedups of every point, once all are timed. The speedup is paired per repetition
 * (4K's i-th timing over this kind's i-th: they ran in the same round), so a slow round shows as spread. */
void summarise(struct bench *b) {
  for (size_t i = 0; i < b->point_count; i++) {
    struct point *p = &b->points[i];
    measure_spread_of(p->ns, (size_t)p->repeats, CONFIDENCE, NOISY_SPREAD, &p->spread);
  }
  for (size_t i = 0; i < b->point_count; i++) {
    struct point *p = &b->points[i];
    const struct point *base = find_point(b, p->experiment, HUGIFY_PAGE_4K, &p->item);
    p->speedup = p->speedup_min = p->speedup_max = NAN;
    p->tie = false;
    if (!base || base->repeats == 0 || p->repeats == 0) continue;
    double ratios[MAX_REPEATS];
    int n = p->repeats < base->repeats ? p->repeats : base->repeats;
    for (int r = 0; r < n; r++) ratios[r] = p->ns[r] > 0 ? base->ns[r] / p->ns[r] : NAN;
    struct measure_spread s;
    measure_spread_of(ratios, (size_t)n, CONFIDENCE, NOISY_SPREAD, &s);
    p->speedup = s.median;
    p->speedup_min = s.min;
    p->speedup_max = s.max;
    p->tie = p != base && measure_overlap(&p->spread, &base->spread);
  }
}

bool low_coverage(const struct point *p) { return p->coverage < COVERAGE_MIN; }
bool noisy(const struct point *p) { return p->spread.noisy; }

/* The series of the noisiest point (0 when none is noisy), for measure_noise_diagnose. */
size_t noisiest_series(const struct bench *b, struct measure_noise_series *out) {
  const struct point *worst = NULL;
  for (size_t i = 0; i < b->point_count; i++)
    if (noisy(&b->points[i]) && (!worst || b->points[i].spread.relative_spread > worst->spread.relative_spread))
      worst = &b->points[i];
  if (!worst) return 0;
  measure_spread_of(worst->system, (size_t)worst->repeats, CONFIDENCE, NOISY_SPREAD, &out->system);
  out->cpu_median = worst->spread.median * 1e-9 * (double)worst->ops / (double)worst->repeats;
  return 1;
}

bool experiment_has_points(const struct bench *b, enum experiment e) {
  for (size_t i = 0; i < b->point_count; i++)
    if (b->points[i].experiment == e) return true;
  return false;
}

/* True when a selected kind has no point for this planned item. */
static bool kind_missing(const struct bench *b, enum experiment e, enum hugify_page_kind kind, const struct item *item) {
  return b->kinds[kind].selected && !find_point(b, e, kind, item);
}

/* Planned measurements of this kind that have a point, and that have none. */
static void kind_tally(const struct bench *b, enum hugify_page_kind kind, int *have, int *missing) {
  *have = *missing = 0;
  for (int e = 0; e < EXP_COUNT; e++) {
    if (!b->run[e] || e == EXP_ABSL) continue;
    for (int i = 0; i < b->item_count[e]; i++) {
      if (find_point(b, (enum experiment)e, kind, &b->items[e][i])) ++*have;
      else ++*missing;
    }
  }
}

static bool kind_skipped(const struct bench *b, enum hugify_page_kind kind) {
  int have, missing;
  kind_tally(b, kind, &have, &missing);
  return b->kinds[kind].selected && b->kinds[kind].attempted && have == 0;
}

/* The kind was asked for but some planned measurement could not be made. */
bool kind_short(const struct bench *b, enum hugify_page_kind kind) {
  int have, missing;
  kind_tally(b, kind, &have, &missing);
  return b->kinds[kind].selected && b->kinds[kind].attempted && missing > 0;
}

void kind_skip_text(const struct bench *b, enum hugify_page_kind kind, char *out, size_t cap) {
  const struct kind_state *k = &b->kinds[kind];
  const char *name = hugify_page_kind_name(kind);
  char largest[32];
  format_bytes(k->largest, largest, sizeof largest);
  int n = kind_skipped(b, kind)       ? snprintf(out, cap, "%s: skipped: %s", name, k->reason)
          : k->largest < k->wanted ? snprintf(out, cap, "%s: sizes above %s skipped: %s", name, largest, k->reason)
                                   : snprintf(out, cap, "%s: some measurements skipped: %s", name, k->reason);
  if (k->enable[0] && n > 0 && (size_t)n < cap) snprintf(out + n, cap - (size_t)n, "; enable with: %s", k->enable);
}

static void format_ns(double ns, char *out, size_t cap) { snprintf(out, cap, ns < 100 ? "%.1f" : "%.0f", ns); }

static void format_count(uint64_t count, char *out, size_t cap) {
  if (count >= 1000000) snprintf(out, cap, "%.3g M", (double)count / 1e6);
  else snprintf(out, cap, "%.3g k", (double)count / 1e3);
}

/* "245 (240-251)": the median and the range of the timings; "?" when noisy, "!" when under coverage. */
static void format_measured(const struct point *p, char *out, size_t cap) {
  char ns[16], low[16], high[16];
  format_ns(p->spread.median, ns, sizeof ns);
  format_ns(p->spread.min, low, sizeof low);
  format_ns(p->spread.max, high, sizeof high);
  snprintf(out, cap, "%s (%s-%s)%s%s", ns, low, high, noisy(p) ? "?" : "", low_coverage(p) ? "!" : "");
}

static void format_speedup(const struct point *p, char *out, size_t cap) {
  if (!isfinite(p->speedup)) snprintf(out, cap, "-");
  else snprintf(out, cap, "%.2fx%s", p->speedup, p->tie ? " tie" : "");
}

/* The fastest kind of an item, and every kind within its spread: "2M=1G", "THP", or "tie" when 4K is
 * among them. */
static void format_fastest(const struct bench *b, enum experiment e, const struct item *item, char *out, size_t cap) {
  const struct point *fastest = NULL;
  for (int k = 0; k < KINDS; k++) {
    const struct point *p = find_point(b, e, (enum hugify_page_kind)k, item);
    if (p && p->repeats && (!fastest || p->spread.median < fastest->spread.median)) fastest = p;
  }
  out[0] = '\0';
  if (!fastest) return;
  bool with_base = false;
  for (int k = 0; k < KINDS; k++) {
    const struct point *p = find_point(b, e, (enum hugify_page_kind)k, item);
    if (!p || !p->repeats || (p != fastest && !measure_overlap(&p->spread, &fastest->spread))) continue;
    with_base |= k == HUGIFY_PAGE_4K;
    size_t used = strlen(out);
    snprintf(out + used, cap - used, "%s%s", used ? "=" : "", hugify_page_kind_name((enum hugify_page_kind)k));
  }
  if (with_base) snprintf(out, cap, "tie");
}

/* table_row with `n` values from an array (table_row takes exactly the table's column count). */
static void table_row_of(struct table *t, const char *const *r, int n) {
  switch (n) {
  case 2: table_row(t, r[0], r[1]); break;
  case 3: table_row(t, r[0], r[1], r[2]); break;
  case 4: table_row(t, r[0], r[1], r[2], r[3]); break;
  case 5: table_row(t, r[0], r[1], r[2], r[3], r[4]); break;
  case 6: table_row(t, r[0], r[1], r[2], r[3], r[4], r[5]); break;
  case 7: table_row(t, r[0], r[1], r[2], r[3], r[4], r[5], r[6]); break;
  case 8: table_row(t, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]); break;
  default: table_row(t, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]); break;
  }
}

/* The kinds with at least one point in this experiment (the others get a skip line, not a column). */
static void shown_kinds(const struct bench *b, enum experiment e, bool *shown) {
  for (int k = 0; k < KINDS; k++) {
    shown[k] = false;
    for (int i = 0; i < b->item_count[e] && !shown[k]; i++)
      shown[k] = find_point(b, e, (enum hugify_page_kind)k, &b->items[e][i]) != NULL;
  }
}

static void print_legend(const struct bench *b, bool any_noisy, bool any_low, FILE *out) {
  fprintf(out, "  ns: median (min-max) of %d timings, interleaved across the kinds; tie: within the 4K range (no "
               "measurable difference); fastest: the kinds within the fastest one's range\n",
          b->repeats);
  if (any_noisy)
    fprintf(out, "  ? noisy: the timings spread over %.0f %% of their median: not a clean measurement\n",
            100.0 * NOISY_SPREAD);
  if (any_low) fprintf(out, "  ! under 95 %% of the working set on that page kind: not a clean measurement\n");
}

static void print_experiment_table(const struct bench *b, enum experiment e, FILE *out) {
  enum { MAX_COLUMNS = 2 + 2 * KINDS };
  const char *headers[MAX_COLUMNS];
  bool right[MAX_COLUMNS], shown[KINDS];
  char names[2 * KINDS][24];
  shown_kinds(b, e, shown);
  int columns = 0;
  headers[columns] = e == EXP_STRINGS ? "strings" : "size";
  right[columns++] = false;
  for (int k = 0; k < KINDS; k++) {
    if (!shown[k]) continue;
    snprintf(names[2 * k], sizeof names[0], "%s ns", hugify_page_kind_name((enum hugify_page_kind)k));
    headers[columns] = names[2 * k];
    right[columns++] = true;
    if (k == HUGIFY_PAGE_4K) continue;
    snprintf(names[2 * k + 1], sizeof names[0], "%s", hugify_page_kind_name((enum hugify_page_kind)k));
    headers[columns] = names[2 * k + 1];
    right[columns++] = true;
  }
  headers[columns] = "fastest";
  right[columns++] = false;
  struct table t;
  table_init(&t, columns, headers, right);
  bool any_noisy = false, any_low = false;
  for (int i = 0; i < b->item_count[e]; i++) {
    const struct item *item = &b->items[e][i];
    char cells[MAX_COLUMNS][80];
    const char *row[MAX_COLUMNS];
    int c = 0;
    const struct point *base = find_point(b, e, HUGIFY_PAGE_4K, item);
    if (e == EXP_STRINGS) {
      char count[20], bytes[20];
      format_count(item->count, count, sizeof count);
      format_bytes(base ? base->size : item->size, bytes, sizeof bytes);
      snprintf(cells[c], sizeof cells[c], "%s (%s)", count, bytes);
    } else {
      format_bytes(item->size, cells[c], sizeof cells[c]);
    }
    row[c] = cells[c];
    c++;
    bool any = false;
    for (int k = 0; k < KINDS; k++) {
      if (!shown[k]) continue;
      const struct point *p = find_point(b, e, (enum hugify_page_kind)k, item);
      any |= p != NULL;
      if (p) {
        format_measured(p, cells[c], sizeof cells[c]);
        any_noisy |= noisy(p);
        any_low |= low_coverage(p);
      } else {
        snprintf(cells[c], sizeof cells[c], "-");
      }
      row[c] = cells[c];
      c++;
      if (k == HUGIFY_PAGE_4K) continue;
      if (p) format_speedup(p, cells[c], sizeof cells[c]);
      else snprintf(cells[c], sizeof cells[c], "-");
      row[c] = cells[c];
      c++;
    }
    format_fastest(b, e, item, cells[c], sizeof cells[c]);
    row[c] = cells[c];
    c++;
    if (any) table_row_of(&t, row, columns);
  }
  fprintf(out, "\n%s (%s; speedup over 4K)\n", experiment_info[e].title, experiment_info[e].unit);
  table_print(&t, out, "  ");
  table_free(&t);
  print_legend(b, any_noisy, any_low, out);
}

static void print_touch_table(const struct bench *b, FILE *out) {
  static const char *const headers[] = {"kind", "size", "seconds", "ns per 4 KiB", "speedup", "on kind"};
  static const bool right[] = {false, true, true, true, true, true};
  struct table t;
  table_init(&t, 6, headers, right);
  for (int k = 0; k < KINDS; k++) {
    const struct point *p = find_point(b, EXP_TOUCH, (enum hugify_page_kind)k, &b->items[EXP_TOUCH][0]);
    if (!p) continue;
    char size[32], seconds[32], ns[64], gain[32], coverage[32];
    format_bytes(p->size, size, sizeof size);
    snprintf(seconds, sizeof seconds, "%.3f", stats_median(p->seconds, (size_t)p->repeats));
    format_measured(p, ns, sizeof ns);
    format_speedup(p, gain, sizeof gain);
    snprintf(coverage, sizeof coverage, "%.1f %%%s", 100 * p->coverage, low_coverage(p) ? "!" : "");
    table_row(&t, hugify_page_kind_name((enum hugify_page_kind)k), size, seconds, ns, gain, coverage);
  }
  fprintf(out, "\n%s (%s; speedup over 4K)\n", experiment_info[EXP_TOUCH].title, experiment_info[EXP_TOUCH].unit);
  table_print(&t, out, "  ");
  table_free(&t);
}

static void print_absl(const struct bench *b, FILE *out) {
  fprintf(out, "\n%s\n", experiment_info[EXP_ABSL].title);
  if (!b->absl_ran) {
    fprintf(out, "  skipped: %s\n", b->absl_reason);
    return;
  }
  static const char *const headers[] = {"allocator", "inserts", "seconds", "min-max", "ns per insert", "on huge pages",
                                        "speedup"};
  static const bool right[] = {false, true, true, true, true, true, true};
  struct table t;
  table_init(&t, 7, headers, right);
  for (int i = 0; i < b->absl_count; i++) {
    const struct absl_run *r = &b->absl[i];
    char count[32], seconds[32], range[48], ns[32], huge[32], gain[32];
    format_count((uint64_t)r->count, count, sizeof count);
    snprintf(seconds, sizeof seconds, "%.3f", r->seconds);
    snprintf(range, sizeof range, "%.3f-%.3f", r->seconds_min, r->seconds_max);
    format_ns(r->seconds * 1e9 / r->count, ns, sizeof ns);
    snprintf(huge, sizeof huge, isfinite(r->huge_fraction) ? "%.1f %%" : "-", 100 * r->huge_fraction);
    bool tie = i > 0 && r->seconds_min <= b->absl[0].seconds_max && b->absl[0].seconds_min <= r->seconds_max;
    snprintf(gain, sizeof gain, "%.2fx%s", b->absl[0].seconds / r->seconds, tie ? " tie" : "");
    table_row(&t, r->allocator, count, seconds, range, ns, huge, gain);
  }
  table_print(&t, out, "  ");
  table_free(&t);
}

void print_tables(const struct bench *b, FILE *out) {
  char max[32];
  format_bytes(b->max_size, max, sizeof max);
  fprintf(out, "hugify bench%s: page kinds", b->quick ? " --quick" : "");
  for (int k = 0; k < KINDS; k++)
    if (b->kinds[k].selected) fprintf(out, " %s", hugify_page_kind_name((enum hugify_page_kind)k));
  fprintf(out, "; working sets 8 KiB .. %s; %.*f s\n", max, b->seconds < 10 ? 1 : 0, b->seconds);
  for (int k = 0; k < KINDS; k++) {
    if (!kind_short(b, (enum hugify_page_kind)k)) continue;
    char text[HUGIFY_REASON_MAX + 256];
    kind_skip_text(b, (enum hugify_page_kind)k, text, sizeof text);
    fprintf(out, "  %s\n", text);
  }
  for (int e = 0; e < EXP_COUNT; e++) {
    if (!b->run[e]) continue;
    if (e == EXP_ABSL) print_absl(b, out);
    else if (e == EXP_TOUCH) { if (experiment_has_points(b, EXP_TOUCH)) print_touch_table(b, out); }
    else if (experiment_has_points(b, (enum experiment)e)) print_experiment_table(b, (enum experiment)e, out);
  }
  size_t noisy_count = 0;
  for (size_t i = 0; i < b->point_count; i++) noisy_count += noisy(&b->points[i]);
  if (noisy_count)
    fprintf(out, "\nNoisy points: %zu of %zu; %s%s.\n", noisy_count, b->point_count,
            b->noise[0] ? "likely cause: " : "no likely cause found (load average and kernel time are steady)",
            b->noise);
}

static void json_machine(struct json_writer *j, const struct bench *b) {
  json_open_object(j, "machine");
  json_put_string(j, "kernel", b->system.kernel_release);
  json_put_string(j, "cpu", b->cpu);
  json_put_i64(j, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
  json_put_u64(j, "mem_available_bytes", b->mem_available);
  json_put_u64(j, "base_page_size_bytes", b->system.base_page_size);
  json_put_string(j, "thp_enabled", b->system.thp_enabled);
  json_put_string(j, "thp_defrag", b->system.thp_defrag);
  if (b->machine.load_average >= 0) json_put_double(j, "load_average", b->machine.load_average);
  else json_put_null(j, "load_average");
  json_close(j);
}

static void json_kinds(struct json_writer *j, const struct bench *b) {
  json_open_array(j, "kinds");
  for (int k = 0; k < KINDS; k++) {
    const struct kind_state *s = &b->kinds[k];
    enum hugify_page_kind kind = (enum hugify_page_kind)k;
    json_open_object(j, NULL);
    json_put_string(j, "kind", hugify_page_kind_name(kind));
    json_put_bool(j, "selected", s->selected);
    json_put_string(j, "status", !s->selected ? "not selected" : !s->attempted ? "not run"
                             : kind_skipped(b, kind) ? "skipped" : kind_short(b, kind) ? "partial" : "ok");
    json_put_u64(j, "wanted_bytes", s->wanted);
    json_put_u64(j, "largest_bytes", s->largest);
    json_put_string(j, "reason", kind_short(b, kind) ? s->reason : NULL);
    json_put_string(j, "enable", kind_short(b, kind) && s->enable[0] ? s->enable : NULL);
    json_close(j);
  }
  json_close(j);
}

static void json_absl(struct json_writer *j, const struct bench *b) {
  json_put_string(j, "status", b->absl_ran ? "ran" : "skipped");
  json_put_string(j, "reason", b->absl_ran ? NULL : b->absl_reason);
  json_put_string(j, "program", b->absl_program[0] ? b->absl_program : NULL);
  json_open_array(j, "runs");
  for (int i = 0; i < b->absl_count; i++) {
    const struct absl_run *r = &b->absl[i];
    json_open_object(j, NULL);
    json_put_string(j, "allocator", r->allocator);
    json_put_u64(j, "count", (uint64_t)r->count);
    json_put_u64(j, "repetitions", (uint64_t)r->repeat);
    json_put_double(j, "seconds", r->seconds);
    json_put_double(j, "min_seconds", r->seconds_min);
    json_put_double(j, "max_seconds", r->seconds_max);
    json_put_double(j, "ns_per_op", r->seconds * 1e9 / r->count);
    json_put_double(j, "huge_fraction", r->huge_fraction);
    json_put_double(j, "speedup", b->absl[0].seconds / r->seconds);
    json_put_bool(j, "tie", i > 0 && r->seconds_min <= b->absl[0].seconds_max && b->absl[0].seconds_min <= r->seconds_max);
    json_close(j);
  }
  json_close(j);
}

static void json_point(struct json_writer *j, const struct point *p) {
  json_open_object(j, NULL);
  json_put_string(j, "kind", hugify_page_kind_name(p->kind));
  json_put_u64(j, "size_bytes", p->size);
  if (p->experiment == EXP_STRINGS) json_put_u64(j, "count", p->item.count);
  if (p->experiment == EXP_TOUCH) json_put_double(j, "seconds", stats_median(p->seconds, (size_t)p->repeats));
  json_put_u64(j, "repetitions", (uint64_t)p->repeats);
  json_put_bool(j, "interleaved", p->interleaved);
  json_put_double(j, "ns_per_op", p->spread.median);
  json_put_double(j, "min_ns_per_op", p->spread.min);
  json_put_double(j, "max_ns_per_op", p->spread.max);
  if (p->spread.interval_rc == 0) {
    json_open_object(j, "interval");
    json_put_double(j, "low_ns_per_op", p->spread.interval.low);
    json_put_double(j, "high_ns_per_op", p->spread.interval.high);
    json_put_double(j, "confidence", p->spread.interval.coverage);
    json_close(j);
  } else {
    json_put_null(j, "interval");
  }
  json_open_array(j, "ns_per_op_samples");
  for (int r = 0; r < p->repeats; r++) json_put_double(j, NULL, p->ns[r]);
  json_close(j);
  json_put_double(j, "spread_fraction", p->spread.relative_spread);
  json_put_bool(j, "noisy", noisy(p));
  json_put_u64(j, "ops", p->ops);
  json_put_double(j, "speedup", p->speedup);
  json_put_double(j, "min_speedup", p->speedup_min);
  json_put_double(j, "max_speedup", p->speedup_max);
  json_put_bool(j, "tie", p->tie);
  json_put_double(j, "coverage_fraction", p->coverage);
  json_put_bool(j, "low_coverage", low_coverage(p));
  json_close(j);
}

/* The planned measurements of experiment e that a selected kind has no point for, per kind. */
static void json_skipped_items(struct json_writer *j, const struct bench *b, enum experiment e) {
  json_open_array(j, "skipped");
  for (int k = 0; k < KINDS; k++) {
    bool any = false;
    for (int i = 0; i < b->item_count[e]; i++) {
      const struct item *item = &b->items[e][i];
      if (!kind_missing(b, e, (enum hugify_page_kind)k, item)) continue;
      if (!any) {
        json_open_object(j, NULL);
        json_put_string(j, "kind", hugify_page_kind_name((enum hugify_page_kind)k));
        json_put_string(j, "reason", b->kinds[k].reason);
        json_put_string(j, "enable", b->kinds[k].enable[0] ? b->kinds[k].enable : NULL);
        json_open_array(j, e == EXP_STRINGS ? "counts" : "sizes_bytes");
        any = true;
      }
      json_put_u64(j, NULL, e == EXP_STRINGS ? item->count : item->size);
    }
    if (any) {
      json_close(j);
      json_close(j);
    }
  }
  json_close(j);
}

static void json_experiment(struct json_writer *j, const struct bench *b, enum experiment e) {
  json_open_object(j, NULL);
  json_put_string(j, "name", experiment_info[e].name);
  json_put_string(j, "title", experiment_info[e].title);
  json_put_string(j, "unit", experiment_info[e].unit);
  if (e == EXP_ABSL) {
    json_absl(j, b);
  } else {
    json_put_string(j, "status", experiment_has_points(b, e) ? "ran" : "skipped");
    json_open_array(j, "points");
    for (size_t i = 0; i < b->point_count; i++)
      if (b->points[i].experiment == e) json_point(j, &b->points[i]);
    json_close(j);
    json_skipped_items(j, b, e);
  }
  json_close(j);
}

void write_json(const struct bench *b, FILE *out, int exit_status) {
  struct json_writer j;
  json_begin(&j, out, "hugify.bench/2");
  json_put_bool(&j, "quick", b->quick);
  json_put_u64(&j, "max_size_bytes", b->max_size);
  json_put_double(&j, "elapsed_seconds", b->seconds);
  json_put_u64(&j, "repetitions", (uint64_t)b->repeats);
  json_put_double(&j, "coverage_min_fraction", COVERAGE_MIN);
  json_put_double(&j, "noisy_spread_fraction", NOISY_SPREAD);
  json_machine(&j, b);
  json_kinds(&j, b);
  json_open_array(&j, "experiments");
  for (int e = 0; e < EXP_COUNT; e++)
    if (b->run[e]) json_experiment(&j, b, (enum experiment)e);
  json_close(&j);
  json_put_string(&j, "noise_cause", b->noise[0] ? b->noise : NULL);
  json_put_i64(&j, "exit_status", exit_status);
  json_end(&j);
}
