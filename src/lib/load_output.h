/* SPDX-License-Identifier: MIT */
/* load_output.h - what a load tool printed about the latency it saw: pure parsers (text in, struct out) of
 * the output of the load generators Debian packages (redis-benchmark, pgbench, memcaslap, wrk), and of any
 * other output through regular expressions the user gives. `hugify check --load` uses them (docs/check.md
 * says which flags each tool needs). Internal (src/lib, not in include/hugify.h); no libm, no I/O. */
#ifndef HUGIFY_LOAD_OUTPUT_H
#define HUGIFY_LOAD_OUTPUT_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>

enum load_tool {
  LOAD_TOOL_NONE,            /* nothing recognised (auto), or recognition turned off */
  LOAD_TOOL_REDIS_BENCHMARK, /* the "latency summary (msec)" block, the --csv line, or -q's "p50=" */
  LOAD_TOOL_PGBENCH,         /* "latency average", and per-transaction (--log) or aggregate log lines */
  LOAD_TOOL_MEMCASLAP,       /* the final "Statistics (N events)" block of -S */
  LOAD_TOOL_WRK,             /* "Thread Stats ... Latency" and --latency's "Latency Distribution" */
  LOAD_TOOL_REGEX,           /* the user's patterns */
  LOAD_TOOL_COUNT
};

/* The tool's name as `--latency` takes it ("redis-benchmark", ...; "none", "regex"). */
const char *load_tool_name(enum load_tool tool);

/* The latency figures one run of a load printed. A figure the output does not give is NaN (JSON null). */
struct load_latency {
  enum load_tool tool;  /* the format they were read from; LOAD_TOOL_NONE: none recognised */
  double p50_seconds, p99_seconds, max_seconds, mean_seconds;
  uint64_t samples;     /* operations the percentiles come from, when the output says (0: unknown) */
  bool estimated;       /* p50 and p99 interpolated in a histogram bucket (memcaslap: a factor-2 bucket) */
};

/* Every figure NaN, tool NONE. */
void load_latency_clear(struct load_latency *out);

/* Parse a load's output in the format of `tool`; LOAD_TOOL_NONE tries every known format (redis-benchmark,
 * wrk, memcaslap, pgbench, in that order) and keeps the first that gives a figure. When one output holds
 * several results (redis-benchmark -t set,get; memcaslap's periodic blocks), the last one counts. Returns
 * true when at least one of p50, p99 and max was found. `text` may hold '\r' progress lines. */
bool parse_load_output(const char *text, enum load_tool tool, struct load_latency *out);

/* The user's patterns (POSIX extended, compiled by the caller), each NULL when not asked for. Group 1 is
 * the number; group 2, when the pattern has it and it matched, its unit (ns, us, µs, ms, s); else the
 * number is in `unit_seconds` (1e-3 for milliseconds). The last match in the text counts. */
struct load_latency_patterns {
  const regex_t *p50, *p99, *max;
  double unit_seconds;
};
/* Returns true when every pattern given found a positive number. */
bool parse_load_output_patterns(const char *text, const struct load_latency_patterns *patterns,
                                struct load_latency *out);

/* Seconds per unit of a latency unit word ("ns", "us", "µs", "ms", "s", "m", "h"; wrk writes them after the
 * number), or 0 when it is none of them. `length` characters of `unit` are read. */
double load_latency_unit_seconds(const char *unit, int length);

#endif
