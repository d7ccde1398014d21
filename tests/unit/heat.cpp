// SPDX-License-Identifier: MIT
// The agent's access heat (heat.h): DAMON's tried regions as its sysfs shows them (procfs.c's pure parser, on
// a capture from Debian 13's 6.12 in the kernel matrix's guest: tests/fixtures/damon/README.md), the split of
// one context's regions into its targets, the heat of a window, and the plan's order with heat.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "test_support.hpp"

extern "C" {
#include "agent_policy.h"
#include "heat.h"
#include "planner.h"
#include "procfs.h"
}

namespace {

constexpr uint64_t MiB = 1024 * 1024;

std::vector<damon_region> parse(const std::string &text, long *count, size_t cap = 4096) {
  std::vector<damon_region> regions(cap);
  *count = parse_damon_tried_regions(text.c_str(), regions.data(), cap);
  return regions;
}

TEST(DamonRegions, CapturedTextOfTwoTargetsSplitsIntoTwoProcesses) {
  long count;
  auto regions = parse(test_support::fixture("damon/tried_regions_two_targets_6.12.txt"), &count);
  ASSERT_GT(count, 2);
  for (long i = 0; i < count; i++) EXPECT_LT(regions[i].start, regions[i].end) << i;
  size_t firsts[8];
  size_t targets = damon_split_targets(regions.data(), static_cast<size_t>(count), firsts, 8);
  EXPECT_EQ(targets, 2u) << "the capture monitored two processes";
  EXPECT_EQ(firsts[0], 0u);
  for (size_t t = 0; t < targets; t++) {
    size_t end = t + 1 < targets ? firsts[t + 1] : static_cast<size_t>(count);
    for (size_t i = firsts[t] + 1; i < end; i++) EXPECT_GE(regions[i].start, regions[i - 1].end) << "in address order";
  }
}

TEST(DamonRegions, GrepFormWithPathsAndUnknownFieldsAndAnyOrder) {
  long count;
  auto regions = parse("/sys/x/tried_regions/1/end:8192\n/sys/x/tried_regions/1/start:4096\n"
                       "tried_regions/0/start:0\ntried_regions/0/end:4096\n0/nr_accesses:7\n0/age:3\n"
                       "1/sz_filter_passed:4096\n1/nr_accesses:20\ntried_regions/total_bytes:8192\n",
                       &count);
  ASSERT_EQ(count, 2);
  EXPECT_EQ(regions[0].end, 4096u);
  EXPECT_EQ(regions[0].nr_accesses, 7u);
  EXPECT_EQ(regions[0].age, 3u);
  EXPECT_EQ(regions[1].start, 4096u);
  EXPECT_EQ(regions[1].nr_accesses, 20u);
  EXPECT_EQ(parse("", &count)[0].end, 0u);
  EXPECT_EQ(count, 0) << "no regions tried yet";
}

TEST(DamonRegions, MalformedTextIsRefused) {
  long count;
  for (const char *text : {"0/start:1\n", "0/start:8\n0/end:4\n", "start:1\n", "0/start:x\n", "0/start\n",
                           "99999999999999999999/start:1\n", "0/start:99999999999999999999999\n", "a0/start:1\n"}) {
    parse(text, &count, 16);
    EXPECT_EQ(count, -EINVAL) << text;
  }
}

TEST(DamonRegions, ATargetBeginsWhereTheAddressesGoBack) {
  std::vector<damon_region> r = {{100, 200, 0, 0}, {200, 300, 0, 0}, {50, 60, 0, 0}, {70, 80, 0, 0}, {10, 20, 0, 0}};
  size_t firsts[2];
  EXPECT_EQ(damon_split_targets(r.data(), r.size(), firsts, 2), 2u) << "at most cap";
  size_t all[4];
  ASSERT_EQ(damon_split_targets(r.data(), r.size(), all, 4), 3u);
  EXPECT_EQ(all[1], 2u);
  EXPECT_EQ(all[2], 4u);
}

TEST(Heat, DamonHeatIsTheOverlapWeightedFrequency) {
  std::vector<damon_region> r = {{0, 1 * MiB, 10, 0}, {1 * MiB, 2 * MiB, 0, 0}, {4 * MiB, 8 * MiB, 5, 0}};
  heat_snapshot s = {HEAT_DAMON, r.data(), r.size()};
  EXPECT_EQ(heat_of(&s, 0, 2 * MiB, nullptr), 500) << "half at 10, half at 0: 5.00";
  EXPECT_EQ(heat_of(&s, 4 * MiB, 2 * MiB, nullptr), 500);
  EXPECT_EQ(heat_of(&s, 2 * MiB, 2 * MiB, nullptr), -1) << "no region covers it";
  EXPECT_EQ(heat_of(nullptr, 0, 2 * MiB, nullptr), -1) << "no signal";
  resident_bytes scan = {2 * MiB, 0, 0, 12 * 4096};
  heat_snapshot dirty = {HEAT_SOFT_DIRTY, nullptr, 0};
  EXPECT_EQ(heat_of(&dirty, 0, 2 * MiB, &scan), 12) << "soft-dirty: the written pages of the window";
  // soft-dirty's clear write-protected an unwritten window: the kernel would refuse it (SCAN_PAGE_RO)
  EXPECT_FALSE(heat_collapsible(&dirty, 0));
  EXPECT_TRUE(heat_collapsible(&dirty, 12));
  EXPECT_TRUE(heat_collapsible(&s, 0)) << "DAMON's cold windows can still be collapsed";
  EXPECT_TRUE(heat_collapsible(nullptr, HEAT_UNKNOWN));
}

TEST(Heat, ThePlanTakesTheHotWindowsFirstTheRestWaits) {
  // all dense: without heat the order is the address order; with heat the hot ones lead and the rest waits
  std::vector<agent_window> w = {{0, 512, 0, 0}, {2 * MiB, 512, 0, 900}, {4 * MiB, 400, 0, -1}, {6 * MiB, 512, 0, 40},
                                 {8 * MiB, 512, 0, 0, 0, PLAN_FACT_UNWRITTEN}};
  plan_input in = {PLAN_ORDER_AGENT, 512, 2 * MiB, 0.5, {}, {SIZE_MAX, UINT64_MAX, 4}};
  plan_result r;
  planner_plan(w.data(), w.size(), &in, &r);
  ASSERT_EQ(r.kept, 2u);
  EXPECT_EQ(w[0].start, 2 * MiB);
  EXPECT_EQ(w[1].start, 6 * MiB);
  EXPECT_EQ(r.cut_bytes[PLAN_CUT_COLD], 4 * MiB) << "the cold and the unknown wait for a pass with nothing hot";
  EXPECT_EQ(r.cut_bytes[PLAN_CUT_UNWRITTEN], 2 * MiB) << "soft-dirty's write-protected window: not collapsible";
  std::vector<agent_window> rest = {{0, 512, 0, 0}, {4 * MiB, 400, 0, -1}};
  planner_plan(rest.data(), rest.size(), &in, &r);
  ASSERT_EQ(r.kept, 2u);
  EXPECT_EQ(rest[0].start, 4 * MiB) << "unknown heat before known cold";
}

// DAMON reads a PMD-mapped page's accessed bit: a region that holds a huge window says nothing of the 4 KiB
// windows beside it, and is not used for them.
TEST(Heat, RegionsHoldingAHugeWindowLendNoHeat) {
  // windows 0..4 of 2 MiB, window 1 huge; region A [0, 5M) holds it
  std::vector<agent_window> w = {{0, 512, 0, -1}, {2 * MiB, 0, 512, -1}, {4 * MiB, 512, 0, -1}, {6 * MiB, 512, 0, -1},
                                 {8 * MiB, 512, 0, -1}, {10 * MiB, 512, 0, -1, 0, PLAN_FACT_UNKNOWN}};
  std::vector<damon_region> r = {{0, 5 * MiB, 17, 0}, {5 * MiB, 6 * MiB, 0, 0}, {6 * MiB, 8 * MiB, 2, 0},
                                 {8 * MiB, 12 * MiB, 0, 0}};
  heat_snapshot s = {HEAT_DAMON, r.data(), r.size()};
  EXPECT_EQ(heat_of(&s, 4 * MiB, 2 * MiB, nullptr), 850) << "the huge window's heat, lent";
  ASSERT_EQ(heat_of_windows(&s, w.data(), w.size(), 2 * MiB), 0);
  EXPECT_EQ(w[0].heat, -1) << "only the region holding the huge window covers it: unknown";
  EXPECT_EQ(w[1].heat, -1) << "the huge window itself is not judged";
  EXPECT_EQ(w[2].heat, 0) << "judged by its clean half only";
  EXPECT_EQ(w[3].heat, 200);
  EXPECT_EQ(w[4].heat, 0);
  EXPECT_EQ(w[5].heat, -1) << "its presence unread: not judged";
  heat_snapshot dirty = {HEAT_SOFT_DIRTY, nullptr, 0};
  w[3].heat = 7;
  EXPECT_EQ(heat_of_windows(&dirty, w.data(), w.size(), 2 * MiB), 0);
  EXPECT_EQ(heat_of_windows(nullptr, w.data(), w.size(), 2 * MiB), 0);
  EXPECT_EQ(w[3].heat, 7) << "soft-dirty's heat is the walk's: untouched";
}

// The heat of a window is smoothed over the plans (the mean of the heat it was given and this measurement:
// one sample that found a cold region accessed fades, a hot window read cold once stays hot), and a window
// covered only by regions that hold a huge window keeps the heat it was given.
TEST(Heat, SmoothedOverThePlansAndKeptWhenNeighboursAreHuge) {
  heat_history history{};
  std::vector<agent_window> w = {{0, 512, 0, -1}, {2 * MiB, 512, 0, -1}, {4 * MiB, 512, 0, -1}};
  std::vector<damon_region> first = {{0, 2 * MiB, 3, 0}, {2 * MiB, 4 * MiB, 0, 0}, {4 * MiB, 6 * MiB, 1, 0}};
  heat_snapshot s = {HEAT_DAMON, first.data(), first.size(), &history};
  ASSERT_EQ(heat_of_windows(&s, w.data(), w.size(), 2 * MiB), 0);
  EXPECT_EQ(w[0].heat, 300) << "no history yet: this measurement";
  EXPECT_EQ(w[1].heat, 0);
  EXPECT_EQ(w[2].heat, 100);
  ASSERT_EQ(history.count, 3u);
  // window 1 is huge now; one region covers windows 0 and 1, window 2 read cold this time
  std::vector<agent_window> again = {{0, 512, 0, -1}, {2 * MiB, 0, 512, -1}, {4 * MiB, 512, 0, -1}};
  std::vector<damon_region> second = {{0, 4 * MiB, 20, 0}, {4 * MiB, 6 * MiB, 0, 0}};
  s.regions = second.data();
  s.count = second.size();
  ASSERT_EQ(heat_of_windows(&s, again.data(), again.size(), 2 * MiB), 0);
  EXPECT_EQ(again[0].heat, 300) << "only a region holding a huge window covers it: the heat it was given";
  EXPECT_EQ(again[1].heat, -1) << "huge: not judged";
  EXPECT_EQ(again[2].heat, 50) << "the mean of 100 and 0";
  std::vector<damon_region> third = {{0, 4 * MiB, 20, 0}, {4 * MiB, 6 * MiB, 2, 0}};
  s.regions = third.data();
  s.count = third.size();
  std::vector<agent_window> later = again;
  ASSERT_EQ(heat_of_windows(&s, later.data(), later.size(), 2 * MiB), 0);
  EXPECT_EQ(later[0].heat, 300) << "kept";
  EXPECT_EQ(later[2].heat, 125) << "the mean of 50 and 200";
  // window 2 covered only by a region that holds a huge window now: the heat it was given
  std::vector<agent_window> beside = {{0, 512, 0, -1}, {2 * MiB, 0, 512, -1}, {4 * MiB, 512, 0, -1},
                                      {6 * MiB, 0, 512, -1}};
  std::vector<damon_region> fourth = {{0, 4 * MiB, 20, 0}, {4 * MiB, 8 * MiB, 20, 0}};
  s.regions = fourth.data();
  s.count = fourth.size();
  ASSERT_EQ(heat_of_windows(&s, beside.data(), beside.size(), 2 * MiB), 0);
  EXPECT_EQ(beside[2].heat, 125);
  // read cold from now on: the heat fades to 0, so an idle process is cold again in a few plans
  std::vector<damon_region> cold = {{0, 4 * MiB, 20, 0}, {4 * MiB, 6 * MiB, 0, 0}};
  s.regions = cold.data();
  s.count = cold.size();
  int plans = 0;
  for (later = again; later[2].heat != 0 && plans < 20; plans++) {
    later = again;
    ASSERT_EQ(heat_of_windows(&s, later.data(), later.size(), 2 * MiB), 0);
  }
  EXPECT_EQ(later[2].heat, 0);
  EXPECT_LE(plans, 8);
  heat_history_free(&history);
  EXPECT_EQ(history.count, 0u);
}

TEST(Heat, SignalNames) {
  EXPECT_STREQ(heat_signal_name(HEAT_DAMON), "damon");
  EXPECT_STREQ(heat_signal_name(HEAT_SOFT_DIRTY), "soft-dirty");
  EXPECT_STREQ(heat_signal_name(HEAT_NONE), "none");
}

}  // namespace

// --first-touch marks a region only when DAMON found at least the bloat guard's share of its samples accessed:
// 50 % of DAMON's 20 samples an aggregation is 10; a region 10 % present (2 of 20 at most) stays unmarked.
TEST(FirstTouch, MinAccessesFollowTheBloatGuard) {
  EXPECT_EQ(heat_first_touch_min_accesses(0.5, 5000, 100000), 10u);
  EXPECT_EQ(heat_first_touch_min_accesses(0.51, 5000, 100000), 11u) << "rounded up: never below the guard";
  EXPECT_EQ(heat_first_touch_min_accesses(1.0, 5000, 100000), 20u);
  EXPECT_EQ(heat_first_touch_min_accesses(0.0, 5000, 100000), 1u) << "at least one access: never a cold region";
  EXPECT_EQ(heat_first_touch_min_accesses(0.5, 0, 100000), 1u);
  EXPECT_GT(heat_first_touch_min_accesses(0.5, 5000, 100000), 2u) << "10 % present: not marked";
}
