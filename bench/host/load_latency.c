/* SPDX-License-Identifier: MIT */
/* load_latency - the latency and throughput a load tool printed, for bench/host/run: reads the tool's output
 * on stdin and prints one line "p50 p99 max throughput" (seconds, seconds, seconds, operations per second;
 * "nan" when not printed). The latency comes from hugify's own parsers (src/lib/load_output.c, the ones
 * `hugify check --load` uses); the throughput is the last match of group 1 of REGEX.
 * Usage: load_latency TOOL THROUGHPUT_REGEX < output       (TOOL: redis-benchmark, pgbench, memcaslap, wrk) */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load_output.h"

static char *read_all(FILE *in) {
  size_t size = 0, cap = 1 << 16;
  char *text = malloc(cap);
  for (size_t n; text && (n = fread(text + size, 1, cap - size - 1, in)) > 0;) {
    size += n;
    if (size + 1 == cap) text = realloc(text, cap *= 2);
  }
  if (text) text[size] = '\0';
  return text;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: load_latency TOOL THROUGHPUT_REGEX < output\n");
    return 2;
  }
  enum load_tool tool = LOAD_TOOL_COUNT;
  for (int t = LOAD_TOOL_REDIS_BENCHMARK; t < LOAD_TOOL_REGEX; t++)
    if (strcmp(argv[1], load_tool_name((enum load_tool)t)) == 0) tool = (enum load_tool)t;
  regex_t throughput;
  if (tool == LOAD_TOOL_COUNT || regcomp(&throughput, argv[2], REG_EXTENDED) != 0) {
    fprintf(stderr, "load_latency: unknown tool '%s' or bad regex '%s'\n", argv[1], argv[2]);
    return 2;
  }
  char *text = read_all(stdin);
  if (!text) return 1;
  struct load_latency latency;
  parse_load_output(text, tool, &latency);
  /* The throughput through the same pattern machinery: a pattern whose number is "per second". */
  struct load_latency rate;
  struct load_latency_patterns patterns = {.max = &throughput, .unit_seconds = 1};
  double per_second = parse_load_output_patterns(text, &patterns, &rate) ? rate.max_seconds : 0.0 / 0.0;
  printf("%g %g %g %g\n", latency.p50_seconds, latency.p99_seconds, latency.max_seconds, per_second);
  regfree(&throughput);
  free(text);
  return 0;
}
