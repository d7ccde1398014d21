/* prometheus.h - the Prometheus text exposition format (version 0.0.4), written in one place: what
 * `hugify agent` serves over HTTP and writes for node_exporter's textfile collector. */
#ifndef HUGIFY_FORMAT_PROMETHEUS_H
#define HUGIFY_FORMAT_PROMETHEUS_H

#include <stdio.h>

/* The Content-Type of this format. */
#define PROMETHEUS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* "# HELP name help" and "# TYPE name type" (type: "gauge", "counter", "untyped"). Once per family, before
 * its samples. */
void prometheus_family(FILE *out, const char *name, const char *type, const char *help);
/* One sample: name{k="v",...} value. labels: key, value, key, value, ..., NULL (or NULL for none); values
 * are escaped (backslash, double quote, newline). Integral values up to 2^53 print exactly; NaN and
 * infinities as "NaN", "+Inf", "-Inf". */
void prometheus_sample(FILE *out, const char *name, const char *const *labels, double value);

#endif
