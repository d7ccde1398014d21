/* SPDX-License-Identifier: MIT */
/* The load tools' output (redis-benchmark, pgbench, memcaslap, wrk; any output through patterns):
 * parse_load_output, parse_load_output_patterns. The first line names the format ("auto" or a tool); the
 * rest is the output. Every figure found must be a number >= 0. */
#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "load_output.h"

static void check_figures(const struct load_latency *l) {
  const double figures[] = {l->p50_seconds, l->p99_seconds, l->max_seconds, l->mean_seconds};
  for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++)
    if (!isnan(figures[i]) && !(figures[i] >= 0 && isfinite(figures[i]))) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static regex_t p50, p99, max;
  static int compiled;
  if (!compiled) {
    if (regcomp(&p50, "p50=([0-9.]+)", REG_EXTENDED) || regcomp(&p99, "p99=([0-9.]+)(ns|us|ms|s)?", REG_EXTENDED) ||
        regcomp(&max, "max ([0-9.e+]+)", REG_EXTENDED))
      abort();
    compiled = 1;
  }
  char *text = fuzz_text(data, size);
  const char *output;
  const char *format = fuzz_split_first_line(text, &output);
  enum load_tool tool = LOAD_TOOL_NONE;
  for (int t = LOAD_TOOL_REDIS_BENCHMARK; t < LOAD_TOOL_REGEX; t++)
    if (strcmp(format, load_tool_name((enum load_tool)t)) == 0) tool = (enum load_tool)t;
  struct load_latency latency;
  parse_load_output(output, tool, &latency);
  check_figures(&latency);
  struct load_latency_patterns patterns = {&p50, &p99, &max, 1e-3};
  parse_load_output_patterns(output, &patterns, &latency);
  check_figures(&latency);
  free(text);
  return 0;
}
