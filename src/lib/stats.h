/* SPDX-License-Identifier: MIT */
/* stats.h - the statistics behind a measured claim ("1.85x faster, 95 % CI 1.80-1.90"): medians and
 * distribution-free confidence intervals for them. Pure functions, no libm (the preload links without it). */
#ifndef HUGIFY_STATS_H
#define HUGIFY_STATS_H

#include <stddef.h>

struct stats_interval {
  double estimate; /* the median */
  double low, high;/* the interval: order statistics of the sample */
  double coverage; /* its exact coverage (>= the confidence asked for) */
};

/* Median of n values (mean of the two middle ones when n is even). values is not changed. 0 for n == 0. */
double stats_median(const double *values, size_t n);

/* Fewest samples for which a distribution-free interval for the median reaches `confidence` (0.95 -> 6). */
size_t stats_min_samples(double confidence);

/* Interval for the median of n independent samples, by inverting the sign test: [x(k), x(n-k+1)] for the
 * largest k whose two tails hold at most (1 - confidence) / 2 each under Binomial(n, 1/2). Assumes only
 * that the samples are independent draws from one continuous distribution (no normality; an outlier
 * moves it by one rank at most). Returns 0, or -EINVAL when n < stats_min_samples(confidence), n is too
 * large (> 1000), or confidence is not in (0, 1). */
int stats_median_interval(const double *values, size_t n, double confidence, struct stats_interval *out);

/* Paired speed ratio: for each i, before[i] / after[i] (a time measured without and with a change in the
 * same round), then the median of those ratios and stats_median_interval() over them. Rounds with a
 * non-positive time are an error (-EINVAL). */
int stats_paired_ratio(const double *before, const double *after, size_t n, double confidence,
                       struct stats_interval *out);

#endif
