/* SPDX-License-Identifier: MIT */
/* prometheus.c - the Prometheus text exposition format (see prometheus.h). */
#include "prometheus.h"

#include <math.h>

static void escaped(FILE *out, const char *text, int quote) {
  for (; *text; text++) {
    if (*text == '\\') fputs("\\\\", out);
    else if (*text == '\n') fputs("\\n", out);
    else if (quote && *text == '"') fputs("\\\"", out);
    else fputc(*text, out);
  }
}

void prometheus_family(FILE *out, const char *name, const char *type, const char *help) {
  fprintf(out, "# HELP %s ", name);
  escaped(out, help, 0);
  fprintf(out, "\n# TYPE %s %s\n", name, type);
}

void prometheus_sample(FILE *out, const char *name, const char *const *labels, double value) {
  fputs(name, out);
  if (labels && labels[0]) {
    fputc('{', out);
    for (int i = 0; labels[i] && labels[i + 1]; i += 2) {
      fprintf(out, "%s%s=\"", i ? "," : "", labels[i]);
      escaped(out, labels[i + 1], 1);
      fputc('"', out);
    }
    fputc('}', out);
  }
  if (isnan(value)) fputs(" NaN\n", out);
  else if (isinf(value)) fputs(value > 0 ? " +Inf\n" : " -Inf\n", out);
  else if (value == (double)(long long)value && fabs(value) < 9007199254740992.0) fprintf(out, " %lld\n", (long long)value);
  else fprintf(out, " %.17g\n", value);
}

void prometheus_histogram(FILE *out, const char *name, const char *help, const double *bounds, size_t bound_count,
                          const uint64_t *counts, double sum) {
  prometheus_family(out, name, "histogram", help);
  char bucket[128], le[32];
  snprintf(bucket, sizeof bucket, "%s_bucket", name);
  uint64_t cumulative = 0;
  for (size_t k = 0; k <= bound_count; k++) {
    cumulative += counts[k];
    if (k < bound_count) snprintf(le, sizeof le, "%g", bounds[k]); /* 0.0005, not 0.00050000000000000001 */
    else snprintf(le, sizeof le, "+Inf");
    const char *labels[] = {"le", le, NULL, NULL};
    prometheus_sample(out, bucket, labels, (double)cumulative);
  }
  char line[128];
  snprintf(line, sizeof line, "%s_sum", name);
  prometheus_sample(out, line, NULL, sum);
  snprintf(line, sizeof line, "%s_count", name);
  prometheus_sample(out, line, NULL, (double)cumulative);
}
