/* SPDX-License-Identifier: MIT */
/* prometheus.h - the Prometheus text exposition format (version 0.0.4), written in one place: what
 * `hugify agent` serves over HTTP and writes for node_exporter's textfile collector. */
#ifndef HUGIFY_FORMAT_PROMETHEUS_H
#define HUGIFY_FORMAT_PROMETHEUS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The Content-Type of this format. */
#define PROMETHEUS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* "# HELP name help" and "# TYPE name type" (type: "gauge", "counter", "histogram", "untyped"). Once per family, before
 * its samples. */
void prometheus_family(FILE *out, const char *name, const char *type, const char *help);
/* One sample: name{k="v",...} value. labels: key, value, key, value, ..., NULL (or NULL for none); values
 * are escaped (backslash, double quote, newline). Integral values up to 2^53 print exactly; NaN and
 * infinities as "NaN", "+Inf", "-Inf". */
void prometheus_sample(FILE *out, const char *name, const char *const *labels, double value);
/* A whole histogram family: HELP, TYPE histogram, then name_bucket{le="bound"} cumulative counts for each of
 * the bound_count bounds (ascending, seconds or any unit) and le="+Inf", name_sum and name_count.
 * counts[] has bound_count + 1 entries, per bucket and not cumulative (the last: above the largest bound). */
void prometheus_histogram(FILE *out, const char *name, const char *help, const double *bounds, size_t bound_count,
                          const uint64_t *counts, double sum);

#endif
