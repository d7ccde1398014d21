// SPDX-License-Identifier: MIT
// hugify check's two pure parts: the counter arithmetic of src/lib/perf.c (on perf stat figures recorded on
// machines with a PMU, from the seed articles), the sign-test intervals of src/lib/stats.c, and the real
// perf_event_open path on this machine (no PMU here: it must say so cleanly).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "hugify.h"

extern "C" {
#include "stats.h"
}

namespace {

hugify_counter_values values(std::initializer_list<std::pair<hugify_counter, uint64_t>> counts) {
  hugify_counter_values v;
  std::memset(&v, 0, sizeof v);
  for (const auto &[counter, count] : counts) {
    v.value[counter] = count;
    v.present |= 1u << counter;
  }
  return v;
}

// perf stat of the seed's absl::flat_hash_map 10M-insert benchmark on an AMD Ryzen 3900X, 4 KiB pages:
//   70,080 faults:u   20,802,877 dTLB-loads:u   19,436,707 dTLB-load-misses:u  # 93.43% of all dTLB cache hits
TEST(CounterArithmetic, SeedHashMapOn4KPagesMissesAlmostAlways) {
  auto v = values({{HUGIFY_COUNTER_DTLB_LOADS, 20802877}, {HUGIFY_COUNTER_DTLB_LOAD_MISSES, 19436707}});
  hugify_tlb_rates rates;
  hugify_counters_rates(&v, &rates);
  EXPECT_NEAR(rates.dtlb_load_miss_rate, 0.9343, 0.00005);  // perf printed 93.43 %
  EXPECT_TRUE(std::isnan(rates.dtlb_store_miss_rate));       // not counted: unknown, not zero
  EXPECT_TRUE(std::isnan(rates.itlb_miss_rate));
  EXPECT_TRUE(std::isnan(rates.dtlb_misses_per_kilo_instructions));
  // 70,080 faults of 4 KiB: a working set of ~274 MiB, far beyond the 4 KiB TLB reach.
  EXPECT_EQ(hugify_tlb_rule_of_thumb(&rates, 70080ull * 4096), 1);
  // The same miss rate on a working set the TLB covers: the rule says no.
  EXPECT_EQ(hugify_tlb_rule_of_thumb(&rates, 4ull << 20), 0);
}

// The same benchmark under mimalloc with MIMALLOC_LARGE_OS_PAGES=1 (2 MiB pages):
//   8,717,125 dTLB-loads:u   6,320 dTLB-load-misses:u   # 0.07%
// and with 1 GiB pages: 639,907 dTLB-loads, 7,869 dTLB-load-misses  # 1.23%
TEST(CounterArithmetic, SeedHashMapOnHugePagesIsBelowTheThreshold) {
  auto two_mib = values({{HUGIFY_COUNTER_DTLB_LOADS, 8717125}, {HUGIFY_COUNTER_DTLB_LOAD_MISSES, 6320}});
  hugify_tlb_rates rates;
  hugify_counters_rates(&two_mib, &rates);
  EXPECT_NEAR(rates.dtlb_load_miss_rate, 0.0007, 0.00005);
  EXPECT_EQ(hugify_tlb_rule_of_thumb(&rates, 300ull << 20), 0);

  auto one_gib = values({{HUGIFY_COUNTER_DTLB_LOADS, 639907}, {HUGIFY_COUNTER_DTLB_LOAD_MISSES, 7869}});
  hugify_counters_rates(&one_gib, &rates);
  EXPECT_NEAR(rates.dtlb_load_miss_rate, 0.0123, 0.00005);
  EXPECT_EQ(hugify_tlb_rule_of_thumb(&rates, 300ull << 20), 0);
}

// perf stat -e iTLB-loads,iTLB-load-misses of clang++ -O3 LoopVectorize.cpp (the code seed):
//   baseline:           180,759,568 iTLB-loads  12,068,728 iTLB-load-misses  # 6.68%
//   text on huge pages:  46,838,084 iTLB-loads   1,627,038 iTLB-load-misses  # 3.47%
TEST(CounterArithmetic, SeedClangInstructionTlb) {
  auto before = values({{HUGIFY_COUNTER_ITLB_LOADS, 180759568}, {HUGIFY_COUNTER_ITLB_LOAD_MISSES, 12068728}});
  auto after = values({{HUGIFY_COUNTER_ITLB_LOADS, 46838084}, {HUGIFY_COUNTER_ITLB_LOAD_MISSES, 1627038}});
  hugify_tlb_rates a, b;
  hugify_counters_rates(&before, &a);
  hugify_counters_rates(&after, &b);
  EXPECT_NEAR(a.itlb_miss_rate, 0.0668, 0.00005);
  EXPECT_NEAR(b.itlb_miss_rate, 0.0347, 0.00005);
  EXPECT_NEAR(12068728.0 / 1627038.0, 7.4, 0.05);  // "7 times less iTLB misses"
  // No dTLB counts: the data rule cannot say.
  EXPECT_EQ(hugify_tlb_rule_of_thumb(&a, 1ull << 30), -1);
}

TEST(CounterArithmetic, PerKiloInstructionAndPerCycle) {
  auto v = values({{HUGIFY_COUNTER_INSTRUCTIONS, 2000000},
                   {HUGIFY_COUNTER_CYCLES, 4000000},
                   {HUGIFY_COUNTER_DTLB_LOAD_MISSES, 3000},
                   {HUGIFY_COUNTER_DTLB_STORE_MISSES, 1000},
                   {HUGIFY_COUNTER_ITLB_LOAD_MISSES, 500}});
  hugify_tlb_rates rates;
  hugify_counters_rates(&v, &rates);
  EXPECT_DOUBLE_EQ(rates.dtlb_misses_per_kilo_instructions, 2.0);  // (3000 + 1000) / 2000 kilo-instructions
  EXPECT_DOUBLE_EQ(rates.itlb_misses_per_kilo_instructions, 0.25);
  EXPECT_DOUBLE_EQ(rates.instructions_per_cycle, 0.5);
  // Without store misses, the loads alone.
  v.present &= ~(1u << HUGIFY_COUNTER_DTLB_STORE_MISSES);
  hugify_counters_rates(&v, &rates);
  EXPECT_DOUBLE_EQ(rates.dtlb_misses_per_kilo_instructions, 1.5);
}

TEST(CounterArithmetic, ZeroDenominatorAndNothingPresentAreUnknown) {
  auto v = values({{HUGIFY_COUNTER_DTLB_LOADS, 0}, {HUGIFY_COUNTER_DTLB_LOAD_MISSES, 0}});
  hugify_tlb_rates rates;
  hugify_counters_rates(&v, &rates);
  EXPECT_TRUE(std::isnan(rates.dtlb_load_miss_rate));
  EXPECT_EQ(hugify_tlb_rule_of_thumb(&rates, 1ull << 30), -1);
  hugify_counters_rates(nullptr, &rates);
  EXPECT_TRUE(std::isnan(rates.instructions_per_cycle));
  EXPECT_EQ(hugify_tlb_rule_of_thumb(nullptr, 1ull << 30), -1);
}

TEST(CounterArithmetic, MultiplexScaling) {
  EXPECT_EQ(hugify_counter_scale(1000, 100, 100), 1000u);  // ran the whole time
  EXPECT_EQ(hugify_counter_scale(1000, 200, 100), 2000u);  // ran half the time
  EXPECT_EQ(hugify_counter_scale(3, 10, 4), 8u);           // 7.5 rounds up
  EXPECT_EQ(hugify_counter_scale(1000, 100, 0), 0u);       // never ran
  EXPECT_EQ(hugify_counter_scale(UINT64_MAX / 2, 4, 1), UINT64_MAX);  // saturates, never wraps
  EXPECT_EQ(hugify_counter_scale(UINT64_MAX / 2, 3, 2), 3 * (UINT64_C(1) << 62) - 1);  // 128-bit product
}

TEST(CounterArithmetic, Names) {
  EXPECT_STREQ(hugify_counter_name(HUGIFY_COUNTER_DTLB_LOAD_MISSES), "dTLB-load-misses");
  EXPECT_STREQ(hugify_counter_name(HUGIFY_COUNTER_ITLB_LOADS), "iTLB-loads");
  EXPECT_STREQ(hugify_counter_name(static_cast<hugify_counter>(HUGIFY_COUNTER_COUNT)), "?");
}

// The real perf_event_open path on a child between fork and exec, as hugify check uses it. This machine has no
// PMU (hugify_probe says so): the open must fail cleanly with "no PMU". Where there is one, the child's
// user-space cycles and instructions must be counted.
TEST(Counters, ChildCountedOrNoPmuSaidCleanly) {
  hugify_system sys;
  ASSERT_EQ(hugify_probe(&sys), 0);
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(gate[1]);
    char go;
    while (read(gate[0], &go, 1) < 0) {
    }
    execl("/bin/sh", "sh", "-c", "i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done", static_cast<char *>(nullptr));
    _exit(127);
  }
  close(gate[0]);
  hugify_counter_set set;
  int rc = hugify_counters_open(&set, pid);
  close(gate[1]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  hugify_counter_values v;
  if (sys.pmu == HUGIFY_FEATURE_YES) {
    ASSERT_GT(rc, 0) << set.reason;
    ASSERT_EQ(hugify_counters_read(&set, &v), 0);
    ASSERT_TRUE(v.present & (1u << HUGIFY_COUNTER_INSTRUCTIONS)) << set.reason;
    EXPECT_GT(v.value[HUGIFY_COUNTER_INSTRUCTIONS], 100000u);  // the shell's loop, at the least
  } else if (sys.pmu == HUGIFY_FEATURE_NO) {
    EXPECT_EQ(rc, -ENOENT);
    EXPECT_EQ(std::strncmp(set.reason, "no PMU: ", 8), 0) << set.reason;
    EXPECT_EQ(set.opened, 0u);
    for (int fd : set.fd) EXPECT_EQ(fd, -1);
    EXPECT_EQ(hugify_counters_read(&set, &v), -EBADF);
  } else {
    EXPECT_EQ(rc, -EACCES) << set.reason;
    EXPECT_NE(std::strstr(set.reason, "perf_event_paranoid"), nullptr) << set.reason;
  }
  hugify_counters_close(&set);
  hugify_counters_close(&set);  // twice is safe
}

TEST(Counters, BadArguments) {
  hugify_counter_set set;
  EXPECT_EQ(hugify_counters_open(nullptr, 0), -EINVAL);
  EXPECT_EQ(hugify_counters_open(&set, -1), -EINVAL);
  EXPECT_EQ(set.opened, 0u);
  hugify_counters_close(nullptr);
}

// ---- stats: medians and sign-test intervals ------------------------------------------------------------

TEST(Stats, Median) {
  std::vector<double> odd{5, 1, 3}, even{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(stats_median(odd.data(), odd.size()), 3);
  EXPECT_DOUBLE_EQ(stats_median(even.data(), even.size()), 2.5);
  EXPECT_DOUBLE_EQ(odd[0], 5);  // input untouched
  EXPECT_DOUBLE_EQ(stats_median(nullptr, 0), 0);
}

TEST(Stats, FewestSamplesForNinetyFivePercent) {
  // [min, max] of n samples covers the median with 1 - 2 / 2^n: 0.9375 for 5, 0.96875 for 6.
  EXPECT_EQ(stats_min_samples(0.95), 6u);
  EXPECT_EQ(stats_min_samples(0.99), 8u);  // 1 - 2/128 = 0.984 < 0.99 <= 1 - 2/256
  EXPECT_EQ(stats_min_samples(0.0), 0u);
  std::vector<double> five{1, 2, 3, 4, 5};
  stats_interval s;
  EXPECT_EQ(stats_median_interval(five.data(), five.size(), 0.95, &s), -EINVAL);
}

TEST(Stats, SixSamplesGiveMinToMax) {
  std::vector<double> x{1.9, 1.7, 2.1, 1.8, 2.0, 1.6};
  stats_interval s;
  ASSERT_EQ(stats_median_interval(x.data(), x.size(), 0.95, &s), 0);
  EXPECT_DOUBLE_EQ(s.estimate, 1.85);
  EXPECT_DOUBLE_EQ(s.low, 1.6);
  EXPECT_DOUBLE_EQ(s.high, 2.1);
  EXPECT_DOUBLE_EQ(s.coverage, 1.0 - 2.0 / 64.0);
}

TEST(Stats, TwentySamplesUseTheSixthFromEachEnd) {
  // Binomial(20, 1/2): P(B <= 5) = 21700 / 2^20 = 0.0207 <= 0.025 < P(B <= 6) = 0.0577.
  std::vector<double> x;
  for (int i = 20; i >= 1; i--) x.push_back(i);
  stats_interval s;
  ASSERT_EQ(stats_median_interval(x.data(), x.size(), 0.95, &s), 0);
  EXPECT_DOUBLE_EQ(s.low, 6);
  EXPECT_DOUBLE_EQ(s.high, 15);
  EXPECT_DOUBLE_EQ(s.estimate, 10.5);
  EXPECT_NEAR(s.coverage, 1.0 - 2.0 * 21700.0 / 1048576.0, 1e-12);
}

TEST(Stats, PairedRatioIsRobustToOneBadRound) {
  // Plain takes 2 s, the change 1 s, in every round but one where the machine stalled the change's run.
  std::vector<double> before{2.0, 2.1, 1.9, 2.0, 2.0, 2.2, 2.0}, after{1.0, 1.05, 0.95, 1.0, 9.0, 1.1, 1.0};
  stats_interval s;
  ASSERT_EQ(stats_paired_ratio(before.data(), after.data(), before.size(), 0.95, &s), 0);
  EXPECT_DOUBLE_EQ(s.estimate, 2.0);
  EXPECT_LT(s.low, 1.0);  // the stalled round is the lowest ratio: with 7 rounds, it is the lower end
  EXPECT_DOUBLE_EQ(s.high, 2.0);
  std::vector<double> zero{1, 1, 1, 1, 1, 0};
  EXPECT_EQ(stats_paired_ratio(before.data(), zero.data(), zero.size(), 0.95, &s), -EINVAL);
  EXPECT_EQ(stats_paired_ratio(before.data(), after.data(), 0, 0.95, &s), -EINVAL);
}

}  // namespace
