/* SPDX-License-Identifier: MIT */
/* stats.c - medians and sign-test intervals for them (see stats.h). */
#include "stats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define STATS_MAX_SAMPLES 1000 /* 2^-n stays far from underflow; far more rounds than any check runs */

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double *sorted_copy(const double *values, size_t n) {
  double *copy = malloc(n * sizeof *copy);
  if (!copy) return NULL;
  memcpy(copy, values, n * sizeof *copy);
  qsort(copy, n, sizeof *copy, compare_double);
  return copy;
}

static double median_of_sorted(const double *sorted, size_t n) {
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
}

double stats_median(const double *values, size_t n) {
  if (n == 0) return 0.0;
  double *sorted = sorted_copy(values, n);
  if (!sorted) return 0.0;
  double median = median_of_sorted(sorted, n);
  free(sorted);
  return median;
}

/* Largest k >= 1 with P(B <= k-1) <= tail for B ~ Binomial(n, 1/2), and that probability; 0 if none. */
static size_t sign_test_rank(size_t n, double tail, double *tail_probability) {
  double p = 1.0; /* P(B = j), built up as 2^-n * C(n, j) */
  for (size_t i = 0; i < n; i++) p /= 2.0;
  double cumulative = 0.0; /* P(B <= k-1) */
  size_t k = 0;
  *tail_probability = 0.0;
  for (size_t j = 0; j < n / 2; j++) {
    if (cumulative + p > tail) break;
    cumulative += p;
    k = j + 1;
    *tail_probability = cumulative;
    p = p * (double)(n - j) / (double)(j + 1);
  }
  return k;
}

size_t stats_min_samples(double confidence) {
  if (!(confidence > 0.0 && confidence < 1.0)) return 0;
  for (size_t n = 1; n <= STATS_MAX_SAMPLES; n++) {
    double tail;
    if (sign_test_rank(n, (1.0 - confidence) / 2.0, &tail) >= 1) return n;
  }
  return 0;
}

int stats_median_interval(const double *values, size_t n, double confidence, struct stats_interval *out) {
  if (!values || !out || !(confidence > 0.0 && confidence < 1.0) || n > STATS_MAX_SAMPLES) return -EINVAL;
  double tail;
  size_t k = n ? sign_test_rank(n, (1.0 - confidence) / 2.0, &tail) : 0;
  if (k == 0) return -EINVAL;
  double *sorted = sorted_copy(values, n);
  if (!sorted) return -ENOMEM;
  out->estimate = median_of_sorted(sorted, n);
  out->low = sorted[k - 1];
  out->high = sorted[n - k];
  out->coverage = 1.0 - 2.0 * tail;
  free(sorted);
  return 0;
}

int stats_paired_ratio(const double *before, const double *after, size_t n, double confidence,
                       struct stats_interval *out) {
  if (!before || !after || n == 0 || n > STATS_MAX_SAMPLES) return -EINVAL;
  double ratios[STATS_MAX_SAMPLES];
  for (size_t i = 0; i < n; i++) {
    if (!(before[i] > 0.0) || !(after[i] > 0.0)) return -EINVAL;
    ratios[i] = before[i] / after[i];
  }
  return stats_median_interval(ratios, n, confidence, out);
}
