// SPDX-License-Identifier: MIT
// The load tools' latency figures (src/lib/load_output.c), on outputs captured from the Debian tools on this
// machine (tests/fixtures/<tool>/): redis-benchmark 7.0, pgbench 15, memcaslap (libmemcached-tools), wrk 4.1.
#include <gtest/gtest.h>

#include <cmath>
#include <regex.h>
#include <string>

#include "test_support.hpp"

extern "C" {
#include "load_output.h"
}

namespace {

load_latency parse(const std::string &text, load_tool tool = LOAD_TOOL_NONE, bool *found = nullptr) {
  load_latency latency;
  bool ok = parse_load_output(text.c_str(), tool, &latency);
  if (found) *found = ok;
  return latency;
}

TEST(LoadOutput, RedisBenchmarkSummaryWithPrecision3) {
  // redis-benchmark -t get -n 200000 -r 100000 -P 16 --precision 3: progress lines on '\r', the percentile
  // distribution, then the summary the figures come from.
  load_latency l = parse(test_support::fixture("redis-benchmark/get_precision3.txt"));
  EXPECT_EQ(l.tool, LOAD_TOOL_REDIS_BENCHMARK);
  EXPECT_DOUBLE_EQ(l.p50_seconds, 5.679e-3);
  EXPECT_DOUBLE_EQ(l.p99_seconds, 28.015e-3);
  EXPECT_DOUBLE_EQ(l.max_seconds, 40.031e-3);
  EXPECT_DOUBLE_EQ(l.mean_seconds, 7.379e-3);
  EXPECT_EQ(l.samples, 200000u);
  EXPECT_FALSE(l.estimated);
  l = parse(test_support::fixture("redis-benchmark/get_default.txt"), LOAD_TOOL_REDIS_BENCHMARK);
  EXPECT_DOUBLE_EQ(l.p99_seconds, 1.911e-3);
  EXPECT_DOUBLE_EQ(l.max_seconds, 32.799e-3);
}

TEST(LoadOutput, RedisBenchmarkSeveralTestsTheLastCounts) {
  // -t set,get: the GET summary, the last one.
  load_latency l = parse(test_support::fixture("redis-benchmark/set_get_precision3.txt"));
  EXPECT_EQ(l.tool, LOAD_TOOL_REDIS_BENCHMARK);
  EXPECT_LE(l.p50_seconds, l.p99_seconds);
  EXPECT_LE(l.p99_seconds, l.max_seconds);
  std::string text = test_support::fixture("redis-benchmark/set_get_precision3.txt");
  size_t get = text.find("====== GET ======");
  ASSERT_NE(get, std::string::npos);
  load_latency get_only = parse(text.substr(get));
  EXPECT_DOUBLE_EQ(l.p99_seconds, get_only.p99_seconds);
  EXPECT_DOUBLE_EQ(l.max_seconds, get_only.max_seconds);
}

TEST(LoadOutput, RedisBenchmarkCsvAndQuiet) {
  // --csv: one line per test, the last (GET) counts.
  load_latency l = parse(test_support::fixture("redis-benchmark/get_set_csv.txt"));
  EXPECT_EQ(l.tool, LOAD_TOOL_REDIS_BENCHMARK);
  EXPECT_DOUBLE_EQ(l.p50_seconds, 0.903e-3);
  EXPECT_DOUBLE_EQ(l.p99_seconds, 36.063e-3);
  EXPECT_DOUBLE_EQ(l.max_seconds, 52.095e-3);
  EXPECT_DOUBLE_EQ(l.mean_seconds, 4.097e-3);
  // -q prints the median only: p99 and max are not given, so they are NaN (null), never guessed.
  bool found = false;
  l = parse(test_support::fixture("redis-benchmark/get_quiet.txt"), LOAD_TOOL_NONE, &found);
  EXPECT_TRUE(found);
  EXPECT_DOUBLE_EQ(l.p50_seconds, 0.983e-3);
  EXPECT_TRUE(std::isnan(l.p99_seconds));
  EXPECT_TRUE(std::isnan(l.max_seconds));
}

TEST(LoadOutput, PgbenchNeedsItsTransactionLog) {
  // The summary alone has only the mean: no percentile, no max.
  bool found = true;
  load_latency l = parse(test_support::fixture("pgbench/select_only.txt"), LOAD_TOOL_NONE, &found);
  EXPECT_FALSE(found);
  EXPECT_EQ(l.tool, LOAD_TOOL_PGBENCH) << "recognised, with its mean";
  EXPECT_DOUBLE_EQ(l.mean_seconds, 0.382e-3);
  EXPECT_TRUE(std::isnan(l.p99_seconds));
  l = parse(test_support::fixture("pgbench/select_progress.txt"), LOAD_TOOL_PGBENCH, &found);
  EXPECT_FALSE(found) << "-P progress lines hold per-second means, not percentiles";
  l = parse(test_support::fixture("pgbench/tpcb_per_statement.txt"), LOAD_TOOL_PGBENCH, &found);
  EXPECT_FALSE(found) << "-r gives per-statement means";
  // --log --sampling-rate=0.02, the log files cat'ed after the summary: 220 transactions, nearest rank.
  l = parse(test_support::fixture("pgbench/select_log_sampled.txt"), LOAD_TOOL_NONE, &found);
  EXPECT_TRUE(found);
  EXPECT_EQ(l.tool, LOAD_TOOL_PGBENCH);
  EXPECT_EQ(l.samples, 220u);
  EXPECT_DOUBLE_EQ(l.p50_seconds, 48e-6);
  EXPECT_DOUBLE_EQ(l.p99_seconds, 7337e-6);
  EXPECT_DOUBLE_EQ(l.max_seconds, 8010e-6);
  EXPECT_DOUBLE_EQ(l.mean_seconds, 0.330e-3) << "the summary's mean (of all transactions, not the sample)";
  // --aggregate-interval=1: the max of the intervals' maxima, no percentiles.
  l = parse(test_support::fixture("pgbench/select_log_aggregate.txt"), LOAD_TOOL_PGBENCH, &found);
  EXPECT_TRUE(found);
  EXPECT_DOUBLE_EQ(l.max_seconds, 18211e-6);
  EXPECT_TRUE(std::isnan(l.p99_seconds));
}

TEST(LoadOutput, MemcaslapFinalStatisticsInterpolated) {
  // memcaslap -S 3s: the final "Total Statistics (314837 events)" block; p50 and p99 interpolated in its
  // log2 buckets (bucket i holds (2^(i-1), 2^i] microseconds).
  bool found = false;
  load_latency l = parse(test_support::fixture("memcaslap/stat_freq_3s.txt"), LOAD_TOOL_NONE, &found);
  EXPECT_TRUE(found);
  EXPECT_EQ(l.tool, LOAD_TOOL_MEMCASLAP);
  EXPECT_EQ(l.samples, 314837u);
  EXPECT_DOUBLE_EQ(l.max_seconds, 44166e-6);
  EXPECT_DOUBLE_EQ(l.mean_seconds, 152e-6);
  EXPECT_TRUE(l.estimated);
  EXPECT_NEAR(l.p50_seconds, 78.32e-6, 0.01e-6);
  EXPECT_NEAR(l.p99_seconds, 1014.6e-6, 0.1e-6);
  // Without -S, memcaslap prints no latency at all.
  l = parse(test_support::fixture("memcaslap/default_3s.txt"), LOAD_TOOL_NONE, &found);
  EXPECT_FALSE(found);
  EXPECT_EQ(l.tool, LOAD_TOOL_NONE);
}

TEST(LoadOutput, MemcaslapCountsBeyondAnyIntegerAreNumbersStill) {
  // Found by fuzz/load_output.c: a bucket count of 4e20 once went through an integer conversion (undefined).
  bool found = false;
  load_latency l = parse("Total Statistics (5 events)\n   Min:  8\n   Max:  44166\n   Avg:  150\n   Log2 Dist:\n"
                         "       4:  444444444444444444444  3  1  1\n\n",
                         LOAD_TOOL_MEMCASLAP, &found);
  EXPECT_TRUE(found);
  EXPECT_GE(l.p99_seconds, 8e-6);
  EXPECT_LE(l.p99_seconds, 44166e-6);
}

TEST(LoadOutput, WrkLatencyDistributionAndUnits) {
  bool found = false;
  load_latency l = parse(test_support::fixture("wrk/latency_3s.txt"), LOAD_TOOL_NONE, &found);
  EXPECT_TRUE(found);
  EXPECT_EQ(l.tool, LOAD_TOOL_WRK);
  EXPECT_NEAR(l.p50_seconds, 1.82e-3, 1e-12);
  EXPECT_NEAR(l.p99_seconds, 88.37e-3, 1e-12);
  EXPECT_NEAR(l.max_seconds, 213.32e-3, 1e-12);
  EXPECT_EQ(l.samples, 4184u);
  // Without --latency: the max (and the mean) only.
  l = parse(test_support::fixture("wrk/plain_2s.txt"), LOAD_TOOL_WRK, &found);
  EXPECT_TRUE(found);
  EXPECT_NEAR(l.max_seconds, 163.92e-3, 1e-12);
  EXPECT_TRUE(std::isnan(l.p99_seconds));
  // wrk picks the unit per figure.
  l = parse("  Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency   835.00us  1.10ms   1.02s    90%\n"
            "  Latency Distribution\n     50%  612.00us\n     99%    2.50ms\n");
  EXPECT_NEAR(l.p50_seconds, 612e-6, 1e-12);
  EXPECT_NEAR(l.p99_seconds, 2.5e-3, 1e-12);
  EXPECT_NEAR(l.max_seconds, 1.02, 1e-12);
}

TEST(LoadOutput, OneToolAskedForIsTheOnlyOneTried) {
  bool found = true;
  parse(test_support::fixture("wrk/latency_3s.txt"), LOAD_TOOL_REDIS_BENCHMARK, &found);
  EXPECT_FALSE(found);
  load_latency l = parse("", LOAD_TOOL_NONE, &found);
  EXPECT_FALSE(found);
  EXPECT_TRUE(std::isnan(l.p50_seconds));
  EXPECT_STREQ(load_tool_name(LOAD_TOOL_MEMCASLAP), "memcaslap");
}

TEST(LoadOutput, UserPatternsWithAndWithoutAUnitGroup) {
  regex_t p50, p99, max;
  ASSERT_EQ(regcomp(&p50, "p50=([0-9.]+)", REG_EXTENDED), 0);
  ASSERT_EQ(regcomp(&p99, "p99=([0-9.]+)(us|ms|s)", REG_EXTENDED), 0);
  ASSERT_EQ(regcomp(&max, "max ([0-9.]+)", REG_EXTENDED), 0);
  load_latency_patterns patterns = {&p50, &p99, &max, 1e-3};
  const char *text = "p50=1.5 p99=900us max 12\rp50=2 p99=1.25ms max 30\n";
  load_latency l;
  EXPECT_TRUE(parse_load_output_patterns(text, &patterns, &l));
  EXPECT_EQ(l.tool, LOAD_TOOL_REGEX);
  EXPECT_DOUBLE_EQ(l.p50_seconds, 2e-3) << "the last match counts";
  EXPECT_DOUBLE_EQ(l.p99_seconds, 1.25e-3) << "its unit group says ms";
  EXPECT_DOUBLE_EQ(l.max_seconds, 30e-3) << "--latency-unit (ms here) for a number without a unit";
  // A pattern that does not match: not found, and that figure stays NaN.
  EXPECT_FALSE(parse_load_output_patterns("p50=1 p99=2ms", &patterns, &l));
  EXPECT_TRUE(std::isnan(l.max_seconds));
  patterns = {nullptr, &p99, nullptr, 1e-3};
  EXPECT_TRUE(parse_load_output_patterns("p99=3s", &patterns, &l));
  EXPECT_DOUBLE_EQ(l.p99_seconds, 3);
  EXPECT_TRUE(std::isnan(l.p50_seconds));
  regfree(&p50);
  regfree(&p99);
  regfree(&max);
  EXPECT_DOUBLE_EQ(load_latency_unit_seconds("\xc2\xb5s", 3), 1e-6);
  EXPECT_EQ(load_latency_unit_seconds("parsecs", 7), 0);
}

}  // namespace
