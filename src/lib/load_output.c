/* SPDX-License-Identifier: MIT */
/* load_output.c - the latency figures of a load tool's output (load_output.h). Each tool's parser walks the
 * lines once ('\r' ends a line too: progress lines) and keeps the last result block it saw. */
#include "load_output.h"
#include "array.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS 1e-3
#define US 1e-6

static const char *const tool_names[LOAD_TOOL_COUNT] = {
    [LOAD_TOOL_NONE] = "none",         [LOAD_TOOL_REDIS_BENCHMARK] = "redis-benchmark",
    [LOAD_TOOL_PGBENCH] = "pgbench",   [LOAD_TOOL_MEMCASLAP] = "memcaslap",
    [LOAD_TOOL_WRK] = "wrk",           [LOAD_TOOL_REGEX] = "regex",
};

const char *load_tool_name(enum load_tool tool) {
  return tool >= 0 && tool < LOAD_TOOL_COUNT ? tool_names[tool] : "none";
}

void load_latency_clear(struct load_latency *out) {
  *out = (struct load_latency){.tool = LOAD_TOOL_NONE, .p50_seconds = NAN, .p99_seconds = NAN,
                               .max_seconds = NAN, .mean_seconds = NAN};
}

static bool has_figure(const struct load_latency *l) {
  return !isnan(l->p50_seconds) || !isnan(l->p99_seconds) || !isnan(l->max_seconds);
}

/* ---- lines and numbers ------------------------------------------------------------------------------- */

struct line {
  const char *start;
  size_t length;
};

/* The next line of *cursor ('\n' or '\r' ends it); false at the end of the text. */
static bool next_line(const char **cursor, struct line *line) {
  const char *p = *cursor;
  if (!*p) return false;
  size_t n = strcspn(p, "\r\n");
  *line = (struct line){p, n};
  *cursor = p[n] ? p + n + 1 : p + n;
  return true;
}

/* The line as a NUL-terminated copy (lines of interest are short; longer ones are cut). */
static void line_text(const struct line *line, char *out, size_t cap) {
  size_t n = line->length < cap - 1 ? line->length : cap - 1;
  memcpy(out, line->start, n);
  out[n] = '\0';
}

static bool starts_with_word(const char *text, const char *word) {
  text += strspn(text, " \t");
  return strncmp(text, word, strlen(word)) == 0;
}

/* A finite, non-negative number at *p; *p moves past it. */
static bool take_number(const char **p, double *value) {
  char *end;
  *p += strspn(*p, " \t,\"");
  if (!((**p >= '0' && **p <= '9') || **p == '.')) return false; /* no sign, no "nan" or "inf" */
  double v = strtod(*p, &end);
  if (end == *p || !isfinite(v) || v < 0) return false;
  *value = v;
  *p = end;
  return true;
}

double load_latency_unit_seconds(const char *unit, int length) {
  static const struct {
    const char *word;
    double seconds;
  } units[] = {{"ns", 1e-9}, {"us", US}, {"\xc2\xb5s", US}, {"ms", MS}, {"s", 1}, {"m", 60}, {"h", 3600}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
    if (length == (int)strlen(units[i].word) && strncmp(unit, units[i].word, (size_t)length) == 0) return units[i].seconds;
  return 0;
}

/* A number followed at once by its unit, as wrk writes them ("213.32ms", "1.82ms", "835.00us"). */
static bool take_duration(const char **p, double *seconds) {
  double value;
  if (!take_number(p, &value)) return false;
  int length = (int)strspn(*p, "abcdefghijklmnopqrstuvwxyz\xc2\xb5");
  double unit = load_latency_unit_seconds(*p, length);
  if (unit <= 0) return false;
  *p += length;
  *seconds = value * unit;
  return true;
}

/* The smallest sample at or above the p-th fraction of n sorted samples (nearest rank). */
static double nearest_rank(const double *sorted, size_t n, double p) {
  size_t rank = (size_t)(p * (double)n);
  if ((double)rank < p * (double)n) rank++;
  if (rank < 1) rank = 1;
  return sorted[rank - 1];
}

/* ---- redis-benchmark ----------------------------------------------------------------------------------- */

/* Column `name` of a header line ("avg min p50 p95 p99 max", or the CSV header), from 0; -ENOENT when absent. */
static int column_of(const char *header, const char *name) {
  char copy[512];
  snprintf(copy, sizeof copy, "%s", header);
  int column = 0;
  for (char *save = NULL, *word = strtok_r(copy, " \t,\"", &save); word; word = strtok_r(NULL, " \t,\"", &save), column++)
    if (strcmp(word, name) == 0) return column;
  return -ENOENT;
}

/* The numbers of a summary or CSV line, by column (a CSV line starts with its quoted test name). */
static int numbers_of(const char *line, double *values, int cap) {
  const char *p = line + strspn(line, " \t");
  if (*p == '"') { /* "GET","185528.77",... : skip the name, keep its column */
    const char *close = strchr(p + 1, '"');
    p = close ? close + 1 : p + strlen(p);
    values[0] = NAN;
    int n = 1;
    while (n < cap && take_number(&p, &values[n])) n++;
    return n;
  }
  int n = 0;
  while (n < cap && take_number(&p, &values[n])) n++;
  return n;
}

/* Figures by column names from a header and a line of numbers in milliseconds. */
static bool redis_figures(const char *header, const char *numbers, const char *const names[4], struct load_latency *out) {
  double values[16];
  int n = numbers_of(numbers, values, 16);
  double *fields[4] = {&out->p50_seconds, &out->p99_seconds, &out->max_seconds, &out->mean_seconds};
  bool any = false;
  for (int k = 0; k < 4; k++) {
    int column = column_of(header, names[k]);
    if (column >= 0 && column < n && !isnan(values[column])) {
      *fields[k] = values[column] * MS;
      any = true;
    }
  }
  return any;
}

/* -q: "GET: 106382.98 requests per second, p50=0.983 msec" */
static bool redis_quiet(const char *text, struct load_latency *out) {
  const char *p50 = strstr(text, "requests per second, p50=");
  if (!p50) return false;
  const char *p = p50 + strlen("requests per second, p50=");
  double value;
  if (!take_number(&p, &value) || !starts_with_word(p, "msec")) return false;
  out->p50_seconds = value * MS;
  return true;
}

static bool parse_redis_benchmark(const char *text, struct load_latency *out) {
  static const char *const summary_names[4] = {"p50", "p99", "max", "avg"};
  static const char *const csv_names[4] = {"p50_latency_ms", "p99_latency_ms", "max_latency_ms", "avg_latency_ms"};
  const char *cursor = text;
  struct line line;
  char current[512], header[512] = "", number[512];
  uint64_t completed = 0;
  bool found = false, csv = false;
  while (next_line(&cursor, &line)) {
    line_text(&line, current, sizeof current);
    struct load_latency block;
    load_latency_clear(&block);
    const char *completed_at = strstr(current, " requests completed in ");
    if (completed_at) completed = strtoull(current + strspn(current, " "), NULL, 10);
    if (strncmp(current, "\"test\",", 7) == 0 && strstr(current, "p99_latency_ms")) {
      snprintf(header, sizeof header, "%s", current);
      csv = true;
    } else if (csv && current[0] == '"' && redis_figures(header, current, csv_names, &block)) {
      *out = block; /* one line per test: the last one counts */
      found = true;
    } else if (strstr(current, "latency summary (msec):")) {
      struct line head, values;
      if (!next_line(&cursor, &head) || !next_line(&cursor, &values)) break;
      line_text(&head, header, sizeof header);
      line_text(&values, number, sizeof number);
      if (redis_figures(header, number, summary_names, &block)) {
        block.samples = completed;
        *out = block;
        found = true;
      }
      csv = false;
    } else if (redis_quiet(current, &block)) {
      *out = block;
      found = true;
    }
  }
  if (found) out->tool = LOAD_TOOL_REDIS_BENCHMARK;
  return found;
}

/* ---- wrk ---------------------------------------------------------------------------------------------- */

static bool parse_wrk(const char *text, struct load_latency *out) {
  const char *cursor = text;
  struct line line;
  char current[512];
  bool found = false, distribution = false;
  struct load_latency block;
  load_latency_clear(&block);
  while (next_line(&cursor, &line)) {
    line_text(&line, current, sizeof current);
    const char *p = current + strspn(current, " \t");
    if (starts_with_word(p, "Thread Stats")) {
      load_latency_clear(&block); /* a new run's results */
      distribution = false;
    } else if (starts_with_word(p, "Latency Distribution")) {
      distribution = true;
    } else if (strncmp(p, "Latency ", 8) == 0) { /* Latency  avg  stdev  max  +/- */
      p += 8;
      double mean, stdev, max;
      if (take_duration(&p, &mean) && take_duration(&p, &stdev) && take_duration(&p, &max)) {
        block.mean_seconds = mean;
        block.max_seconds = max;
        found = true;
      }
    } else if (distribution && (strncmp(p, "50%", 3) == 0 || strncmp(p, "99%", 3) == 0)) {
      bool median = p[0] == '5';
      p += 3;
      double value;
      if (take_duration(&p, &value)) *(median ? &block.p50_seconds : &block.p99_seconds) = value;
    } else if (strstr(p, " requests in ")) {
      distribution = false;
      block.samples = strtoull(p, NULL, 10);
    }
  }
  if (!found) return false;
  *out = block;
  out->tool = LOAD_TOOL_WRK;
  return has_figure(out);
}

/* ---- memcaslap ---------------------------------------------------------------------------------------- */

/* memaslap counts an operation of t microseconds in bucket i, the least i with 2^i >= t: (2^(i-1), 2^i]. The
 * p-th fraction is interpolated linearly inside its bucket, and kept within [min, max]. */
static double log2_percentile(const double *buckets, int count, double total, double p, double min, double max) {
  double target = p * total, below = 0;
  for (int i = 0; i < count; i++) {
    if (buckets[i] == 0 || below + buckets[i] < target) {
      below += buckets[i];
      continue;
    }
    double high = (double)((uint64_t)1 << i), low = i == 0 ? 0 : high / 2;
    double value = low + (high - low) * (target - below) / buckets[i];
    if (value < min) value = min;
    if (value > max) value = max;
    return value;
  }
  return max;
}

/* One "NAME Statistics (N events)" block from its first line on: Min, Max, Avg, Log2 Dist rows. */
static bool memcaslap_block(const char **cursor, uint64_t events, struct load_latency *out) {
  double buckets[64] = {0}; /* counts, as doubles: a count the text makes up cannot overflow them */
  double min = NAN, max = NAN, mean = NAN;
  bool rows = false;
  struct line line;
  char current[512];
  while (next_line(cursor, &line)) {
    line_text(&line, current, sizeof current);
    const char *p = current + strspn(current, " \t");
    if (!*p) break; /* a blank line ends the block */
    if (strncmp(p, "Min:", 4) == 0) p += 4, take_number(&p, &min);
    else if (strncmp(p, "Max:", 4) == 0) p += 4, take_number(&p, &max);
    else if (strncmp(p, "Avg:", 4) == 0) p += 4, take_number(&p, &mean);
    else if (strncmp(p, "Log2 Dist:", 10) == 0) rows = true;
    else if (rows) { /* "  4:     6393    15136    95272   113104": buckets 4, 5, 6, 7 */
      char *end;
      long first = strtol(p, &end, 10);
      if (end == p || *end != ':' || first < 0 || first > 63) break;
      p = end + 1;
      double count;
      for (long i = first; i < 64 && take_number(&p, &count); i++) buckets[i] = count;
    }
  }
  if (isnan(max) || events == 0) return false;
  double total = 0;
  for (int i = 0; i < 64; i++) total += buckets[i];
  load_latency_clear(out);
  out->max_seconds = max * US;
  out->mean_seconds = isnan(mean) ? NAN : mean * US;
  out->samples = events;
  if (total > 0 && !isnan(min)) {
    out->p50_seconds = log2_percentile(buckets, 64, total, 0.50, min, max) * US;
    out->p99_seconds = log2_percentile(buckets, 64, total, 0.99, min, max) * US;
    out->estimated = true;
  }
  return true;
}

static bool parse_memcaslap(const char *text, struct load_latency *out) {
  const char *cursor = text;
  struct line line;
  char current[512];
  bool found = false, total_found = false;
  while (next_line(&cursor, &line)) {
    line_text(&line, current, sizeof current);
    const char *at = strstr(current, " Statistics (");
    unsigned long long events;
    if (!at || sscanf(at, " Statistics (%llu events)", &events) != 1) continue;
    bool total = strncmp(current, "Total", 5) == 0;
    struct load_latency block;
    if (!memcaslap_block(&cursor, events, &block)) continue;
    if (total || !total_found) *out = block; /* Total (gets and sets) over Get or Set alone */
    total_found |= total;
    found = true;
  }
  if (found) out->tool = LOAD_TOOL_MEMCASLAP;
  return found && has_figure(out);
}

/* ---- pgbench ------------------------------------------------------------------------------------------ */

struct pgbench_log {
  double *latencies; /* per-transaction lines' latencies, microseconds */
  size_t count, cap;
  double aggregate_max, aggregate_sum, aggregate_count; /* --aggregate-interval lines */
};

/* A line of --log: "client transaction latency script epoch microseconds [lag]" (per transaction), or
 * "interval_start transactions sum sum2 min max ..." (--aggregate-interval). Other lines are not numbers. */
static void pgbench_log_line(const char *line, struct pgbench_log *log) {
  double field[8];
  int n = 0;
  const char *p = line;
  while (n < 8 && take_number(&p, &field[n])) n++;
  if (n < 6 || (*p && !strchr(" \t", *p))) return;
  if (field[0] >= 1e9) { /* an interval: its start is an epoch */
    if (field[5] > log->aggregate_max) log->aggregate_max = field[5];
    log->aggregate_sum += field[2];
    log->aggregate_count += field[1];
  } else if (n <= 7 && field[4] >= 1e9) { /* a transaction: the fifth field is its epoch */
    if (ARRAY_GROW(log->latencies, log->count + 1, log->cap) != 0) return;
    log->latencies[log->count++] = field[2];
  }
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static bool parse_pgbench(const char *text, struct load_latency *out) {
  const char *cursor = text;
  struct line line;
  char current[512];
  struct pgbench_log log = {0};
  double mean = NAN;
  uint64_t processed = 0;
  bool recognised = false;
  while (next_line(&cursor, &line)) {
    line_text(&line, current, sizeof current);
    const char *p;
    if ((p = strstr(current, "latency average = "))) {
      p += strlen("latency average = ");
      if (take_number(&p, &mean) && starts_with_word(p, "ms")) mean *= MS, recognised = true;
      else mean = NAN;
    } else if ((p = strstr(current, "number of transactions actually processed: "))) {
      processed = strtoull(p + strlen("number of transactions actually processed: "), NULL, 10);
    } else if (current[0] >= '0' && current[0] <= '9') {
      pgbench_log_line(current, &log);
    }
  }
  load_latency_clear(out);
  out->mean_seconds = mean;
  out->samples = processed;
  if (log.count > 0) {
    qsort(log.latencies, log.count, sizeof *log.latencies, compare_doubles);
    out->p50_seconds = nearest_rank(log.latencies, log.count, 0.50) * US;
    out->p99_seconds = nearest_rank(log.latencies, log.count, 0.99) * US;
    out->max_seconds = log.latencies[log.count - 1] * US;
    out->samples = log.count;
    recognised = true;
  } else if (log.aggregate_count > 0) {
    out->max_seconds = log.aggregate_max * US;
    if (isnan(mean)) out->mean_seconds = log.aggregate_sum / log.aggregate_count * US;
    recognised = true;
  }
  free(log.latencies);
  if (recognised) out->tool = LOAD_TOOL_PGBENCH;
  return has_figure(out);
}

/* ---- any output ---------------------------------------------------------------------------------------- */

bool parse_load_output(const char *text, enum load_tool tool, struct load_latency *out) {
  typedef bool (*parser)(const char *, struct load_latency *);
  static const struct {
    enum load_tool tool;
    parser parse;
  } parsers[] = {{LOAD_TOOL_REDIS_BENCHMARK, parse_redis_benchmark}, {LOAD_TOOL_WRK, parse_wrk},
                 {LOAD_TOOL_MEMCASLAP, parse_memcaslap}, {LOAD_TOOL_PGBENCH, parse_pgbench}};
  load_latency_clear(out);
  struct load_latency recognised;
  load_latency_clear(&recognised);
  for (size_t i = 0; i < sizeof parsers / sizeof parsers[0]; i++) {
    if (tool != LOAD_TOOL_NONE && tool != parsers[i].tool) continue;
    struct load_latency found;
    load_latency_clear(&found);
    if (parsers[i].parse(text, &found)) {
      *out = found;
      return true;
    }
    if (found.tool != LOAD_TOOL_NONE && recognised.tool == LOAD_TOOL_NONE) recognised = found; /* e.g. a mean only */
  }
  *out = recognised;
  return false;
}

/* The last match of `pattern`: group 1 (else the match) as a number, group 2 as its unit when present. */
static bool last_match(const char *text, const regex_t *pattern, double unit_seconds, double *seconds) {
  bool found = false;
  regmatch_t match[3];
  for (const char *p = text; *p && regexec(pattern, p, 3, match, p == text ? 0 : REG_NOTBOL) == 0;) {
    regmatch_t *number = pattern->re_nsub >= 1 && match[1].rm_so >= 0 ? &match[1] : &match[0];
    char digits[64];
    int length = (int)(number->rm_eo - number->rm_so);
    snprintf(digits, sizeof digits, "%.*s", length < 63 ? length : 63, p + number->rm_so);
    const char *d = digits;
    double value, unit = unit_seconds;
    if (pattern->re_nsub >= 2 && match[2].rm_so >= 0)
      unit = load_latency_unit_seconds(p + match[2].rm_so, (int)(match[2].rm_eo - match[2].rm_so));
    if (take_number(&d, &value) && value > 0 && unit > 0) {
      *seconds = value * unit;
      found = true;
    }
    if (match[0].rm_eo == 0) break; /* an empty match would not advance */
    p += match[0].rm_eo;
  }
  return found;
}

bool parse_load_output_patterns(const char *text, const struct load_latency_patterns *patterns,
                                struct load_latency *out) {
  load_latency_clear(out);
  out->tool = LOAD_TOOL_REGEX;
  const regex_t *asked[3] = {patterns->p50, patterns->p99, patterns->max};
  double *fields[3] = {&out->p50_seconds, &out->p99_seconds, &out->max_seconds};
  bool all = true;
  for (int k = 0; k < 3; k++)
    if (asked[k]) all &= last_match(text, asked[k], patterns->unit_seconds, fields[k]);
  return all && has_figure(out);
}
