// SPDX-License-Identifier: MIT
// The agent's one planner (src/lib/planner.c) on constructed snapshots: every window with its signals in,
// the ranked plan cut to the budget out, with a reason for every cut; and whether a process is planned.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

extern "C" {
#include "planner.h"
}

namespace {

constexpr uint64_t W = uint64_t{2} << 20;
constexpr uint32_t PMD = 512;

agent_window window(uint64_t n, uint32_t present, int32_t heat = -1, uint8_t ledger = PLAN_LEDGER_NONE,
                    uint8_t facts = 0) {
  return agent_window{n * W, present, 0, heat, ledger, facts, 0};
}
agent_window huge(uint64_t n, uint8_t facts = 0) { return agent_window{n * W, 0, PMD, -1, 0, facts, 0}; }

plan_input agent_input(plan_process process = {}, size_t max_windows = SIZE_MAX) {
  return plan_input{PLAN_ORDER_AGENT, PMD, W, 0.5, process, {max_windows, UINT64_MAX, 4}};
}

std::vector<uint64_t> planned(std::vector<agent_window> &w, const plan_input &in, plan_result *out = nullptr) {
  plan_result result;
  planner_plan(w.data(), w.size(), &in, &result);
  std::vector<uint64_t> order;
  for (size_t i = 0; i < result.kept; i++) order.push_back(w[i].start / W);
  if (out) *out = result;
  return order;
}

uint8_t cut_of(const std::vector<agent_window> &w, uint64_t n) {
  for (auto &x : w)
    if (x.start == n * W) return x.cut;
  return 0xff;
}

TEST(Planner, EveryCutHasItsReason) {
  std::vector<agent_window> w = {window(1, 512),
                                 window(2, 100),                                  // sparse: the bloat guard
                                 window(3, 0),                                    // empty
                                 huge(4),                                         // huge already
                                 huge(5, PLAN_FACT_KERNEL),                       // khugepaged's
                                 window(6, 512, -1, PLAN_LEDGER_NONE, PLAN_FACT_UNKNOWN),
                                 window(8, 512, -1, PLAN_LEDGER_HELD)};
  plan_input in = agent_input();
  in.opt_out_bytes = W; // window 7: excluded by the program, comes as bytes
  plan_result r;
  EXPECT_EQ(planned(w, in, &r), (std::vector<uint64_t>{1}));
  EXPECT_EQ(cut_of(w, 2), PLAN_CUT_SPARSE);
  EXPECT_EQ(cut_of(w, 3), PLAN_CUT_EMPTY);
  EXPECT_EQ(cut_of(w, 4), PLAN_CUT_HUGE);
  EXPECT_EQ(cut_of(w, 5), PLAN_CUT_KERNEL);
  EXPECT_EQ(cut_of(w, 6), PLAN_CUT_UNKNOWN);
  EXPECT_EQ(r.cut_bytes[PLAN_CUT_OPT_OUT], W);
  EXPECT_EQ(cut_of(w, 8), PLAN_CUT_HELD);
  EXPECT_EQ(r.cut_bytes[PLAN_KEPT], W);
  EXPECT_EQ(r.cut_bytes[PLAN_CUT_KERNEL], W);
  uint64_t total = 0;
  for (int c = 0; c < PLAN_CUT_COUNT; c++) total += r.cut_bytes[c];
  EXPECT_EQ(total, 8 * W) << "every window is accounted for";
  EXPECT_STREQ(plan_cut_name(PLAN_CUT_KERNEL), "kernel");
  EXPECT_STREQ(plan_cut_name(PLAN_CUT_DAMOS), "damos");
  EXPECT_STREQ(plan_cut_name(PLAN_CUT_SPARSE), "sparse");
}

// Mappings the program excluded come as bytes, not as a window each (a sanitizer's shadow is terabytes): they
// are cut as opt_out beside the listed windows, and nothing else changes.
TEST(Planner, ExcludedBytesAreCutAsOptOutWithoutWindows) {
  plan_input in = agent_input();
  in.opt_out_bytes = (14ull << 40) + 2 * W;
  std::vector<agent_window> w = {window(1, 512), window(2, 100)};
  plan_result r;
  EXPECT_EQ(planned(w, in, &r), (std::vector<uint64_t>{1}));
  EXPECT_EQ(r.cut_bytes[PLAN_CUT_OPT_OUT], (14ull << 40) + 2 * W);
  EXPECT_EQ(r.cut_bytes[PLAN_CUT_SPARSE], W);
  EXPECT_EQ(r.cut_bytes[PLAN_KEPT], W);
}

TEST(Planner, BloatGuardRoundsHalfUp) {
  plan_input in = agent_input();
  std::vector<agent_window> w = {window(1, 256), window(2, 255)};
  EXPECT_EQ(planned(w, in), (std::vector<uint64_t>{1}));
  in.pmd_pages = 511; // half of 511 is 256
  std::vector<agent_window> odd = {window(1, 256), window(2, 255)};
  EXPECT_EQ(planned(odd, in), (std::vector<uint64_t>{1}));
  in.min_present = 1.0;
  std::vector<agent_window> full = {window(1, 511), window(2, 510)};
  EXPECT_EQ(planned(full, in), (std::vector<uint64_t>{1}));
}

TEST(Planner, WithoutHeatDensestFirstThenByAddress) {
  std::vector<agent_window> w = {window(5, 300), window(1, 512), window(3, 512), window(6, 400)};
  plan_result r;
  EXPECT_EQ(planned(w, agent_input(), &r), (std::vector<uint64_t>{1, 3, 6, 5}));
  EXPECT_FALSE(r.heat_used);
  plan_input in = agent_input();
  EXPECT_STREQ(planner_order_name(&in, &r), "densest first (no heat signal)");
}

TEST(Planner, HeatRanksFirstWhereKnown) {
  std::vector<agent_window> w = {window(1, 512, 3), window(2, 300, 200), window(3, 512, 3), window(4, 512)};
  plan_result r;
  EXPECT_EQ(planned(w, agent_input(), &r), (std::vector<uint64_t>{2, 1, 3}));
  EXPECT_TRUE(r.heat_used);
  EXPECT_EQ(cut_of(w, 4), PLAN_CUT_COLD) << "unknown heat waits while hot windows are planned";
}

// Issue 32 item 3: a pass's budget goes to the hot windows; the cold ones (known 0) and those of unknown heat
// wait for a pass that plans nothing hot.
TEST(Planner, ColdWindowsWaitWhileHotOnesArePlanned) {
  std::vector<agent_window> w = {window(1, 512, 0), window(2, 512, 100), window(3, 512), window(4, 400, 300),
                                 window(5, 512, 0, PLAN_LEDGER_LASTED)};
  plan_result r;
  EXPECT_EQ(planned(w, agent_input(), &r), (std::vector<uint64_t>{4, 2}));
  EXPECT_EQ(cut_of(w, 1), PLAN_CUT_COLD);
  EXPECT_EQ(cut_of(w, 3), PLAN_CUT_COLD);
  EXPECT_EQ(cut_of(w, 5), PLAN_CUT_COLD) << "lasted before, but cold";
  EXPECT_EQ(r.cut_bytes[PLAN_CUT_COLD], 3 * W);
  EXPECT_STREQ(plan_cut_name(PLAN_CUT_COLD), "cold");
}

// An idle process (all cold) and a written-once one are still collapsed: with nothing hot planned the rest
// goes, unknown heat before known cold, each densest first.
TEST(Planner, WithNothingHotTheRestGoesUnknownBeforeCold) {
  std::vector<agent_window> idle = {window(1, 512, 0), window(2, 400, 0), window(3, 512, 0)};
  EXPECT_EQ(planned(idle, agent_input()), (std::vector<uint64_t>{1, 3, 2}));
  std::vector<agent_window> w = {window(1, 512, 0), window(2, 300), window(3, 512), window(4, 512, 0)};
  plan_result r;
  EXPECT_EQ(planned(w, agent_input(), &r), (std::vector<uint64_t>{3, 2, 1, 4}));
  EXPECT_EQ(r.cut_bytes[PLAN_CUT_COLD], 0u);
}

// Cold windows that waited long enough (a hot window the kernel refuses every pass) go after the hot ones.
TEST(Planner, ColdWindowsGetTheirTurnAfterWaitingLongEnough) {
  std::vector<agent_window> w = {window(1, 512, 0), window(2, 512, 100), window(3, 400)};
  plan_process turn{};
  turn.cold_turn = true;
  plan_result r;
  EXPECT_EQ(planned(w, agent_input(turn), &r), (std::vector<uint64_t>{2, 3, 1}));
  EXPECT_EQ(r.cut_bytes[PLAN_CUT_COLD], 0u);
}

// Only a hot window the plan keeps holds the others back: one held back by its own back-off, or huge
// already, does not.
TEST(Planner, AHotWindowNotPlannedHoldsNothingBack) {
  std::vector<agent_window> w = {window(1, 512, 500, PLAN_LEDGER_HELD), window(2, 512, 0), window(3, 100, 900)};
  EXPECT_EQ(planned(w, agent_input()), (std::vector<uint64_t>{2}));
  EXPECT_EQ(cut_of(w, 1), PLAN_CUT_HELD);
  EXPECT_EQ(cut_of(w, 3), PLAN_CUT_SPARSE);
}

TEST(Planner, LastingWindowsBeforeUnprovenOnesOfEqualHeat) {
  std::vector<agent_window> w = {window(1, 512), window(2, 300, -1, PLAN_LEDGER_LASTED)};
  EXPECT_EQ(planned(w, agent_input()), (std::vector<uint64_t>{2, 1}));
}

TEST(Planner, AddressOrderForPlainCollapse) {
  plan_input in = agent_input();
  in.order = PLAN_ORDER_ADDRESS;
  std::vector<agent_window> w = {window(5, 300, 9), window(1, 512), window(3, 400)};
  plan_result r;
  EXPECT_EQ(planned(w, in, &r), (std::vector<uint64_t>{1, 3, 5}));
  EXPECT_STREQ(planner_order_name(&in, &r), "address");
}

// Issue 32 item 6: a process backed off for churn keeps collapsing the windows that pay (hot, where heat is
// known); the purged, cold and unknown ones wait, also those whose collapse lasted before (measured: they
// are purged like the rest once churn starts).
TEST(Planner, ChurnBackOffHoldsBackOnlyWhatDoesNotPay) {
  std::vector<agent_window> w = {window(1, 512, -1, PLAN_LEDGER_UNDONE), window(2, 512, -1, PLAN_LEDGER_LASTED),
                                 window(3, 512), window(4, 400, 50), window(5, 512, 0)};
  EXPECT_EQ(planned(w, agent_input({true, true})), (std::vector<uint64_t>{4}));
  EXPECT_EQ(cut_of(w, 1), PLAN_CUT_CHURN);
  EXPECT_EQ(cut_of(w, 2), PLAN_CUT_CHURN) << "lasted before, not hot";
  EXPECT_EQ(cut_of(w, 3), PLAN_CUT_CHURN);
  EXPECT_EQ(cut_of(w, 5), PLAN_CUT_CHURN) << "cold";
}

TEST(Planner, AProbingProcessGetsAFewWindowsInTheOrderAndEveryHotOne) {
  std::vector<agent_window> w;
  for (uint64_t i = 1; i <= 10; i++) w.push_back(window(i, 512 - (uint32_t)i, -1, PLAN_LEDGER_UNDONE));
  for (uint64_t i = 11; i <= 16; i++) w.push_back(window(i, 300, -1, PLAN_LEDGER_LASTED));
  plan_result r;
  auto order = planned(w, agent_input({false, true}), &r);
  EXPECT_EQ(order, (std::vector<uint64_t>{11, 12, 13, 14})) << "4 in the order: those that lasted first";
  EXPECT_EQ(r.cut_bytes[PLAN_CUT_PROBE], 12 * W);
  std::vector<agent_window> hot = {window(1, 512), window(2, 512), window(3, 512), window(4, 512),
                                   window(5, 512), window(6, 300, 9), window(7, 300, 8)};
  EXPECT_EQ(planned(hot, agent_input({false, true})), (std::vector<uint64_t>{6, 7}))
      << "the hot ones are not counted in the probe (and the rest waits for a pass without them)";
  std::vector<agent_window> many_hot;
  for (uint64_t i = 1; i <= 6; i++) many_hot.push_back(window(i, 512, 100 * (int32_t)i));
  EXPECT_EQ(planned(many_hot, agent_input({false, true})).size(), 6u) << "every hot one";
}

TEST(Planner, BudgetCutsInTheOrder) {
  std::vector<agent_window> w = {window(1, 300), window(2, 512), window(3, 400), window(4, 500)};
  plan_result r;
  EXPECT_EQ(planned(w, agent_input({}, 2), &r), (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(r.cut_bytes[PLAN_CUT_BUDGET], 2 * W);
  plan_input bytes = agent_input();
  bytes.budget.max_bytes = 3 * W;
  std::vector<agent_window> again = {window(1, 300), window(2, 512), window(3, 400), window(4, 500)};
  EXPECT_EQ(planned(again, bytes), (std::vector<uint64_t>{2, 4, 3}));
  std::vector<agent_window> none;
  EXPECT_TRUE(planned(none, agent_input()).empty());
}

plan_visit visit() {
  plan_visit v{};
  v.may_collapse = true;
  v.measured = true;
  v.collapsible = true;
  return v;
}

TEST(PlannerVisit, AQuietProcessIsSkippedButMeasuredEverySixthPass) {
  plan_visit v = visit();
  v.idle_recorded = true;
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_QUIET);
  v.unmeasured_passes = PLAN_QUIET_PASSES;
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_MEASURE);
  v.may_collapse = false; // the memory gate closed: a change waits for the periodic measurement
  v.unmeasured_passes = 0;
  v.changed = true;
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_QUIET);
  v.unmeasured_passes = PLAN_QUIET_PASSES;
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_MEASURE);
  v.measured = false; // --status: one pass, every process measured
  v.unmeasured_passes = 0;
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_MEASURE);
}

// A pass's cost follows its work: a process with work left is planned without a measurement (smaps reads all
// of it; the plan's walk what the pass can collapse), and measured again only for its figures.
TEST(PlannerVisit, WorkLeftIsPlannedWithoutAMeasurement) {
  plan_visit v = visit();
  v.idle_recorded = true;
  v.changed = true; // faulted in, or unmapped, a window's worth since the last look
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_PLAN);
  v.changed = false;
  v.sweeping = true; // the last plan stopped before the end of the process
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_PLAN);
  v.sweeping = false;
  v.watching = true; // its last collapses are still to be judged
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_PLAN);
  v.watching = false;
  v.idle_recorded = false; // measured collapsible, no plan since
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_PLAN);
  v.unmeasured_passes = PLAN_REFRESH_PASSES; // its figures are old: measured first
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_MEASURE);
  v.unmeasured_passes = 0;
  v.failures_backoff = true; // backed off: the measurement says whether to try
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_MEASURE);
  v = visit();
  v.measured = false; // never measured
  v.changed = true;
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_MEASURE);
  v = visit();
  v.collapsible = false; // measured with nothing collapsible, then changed: a small one is measured,
  v.changed = true;      // a big one planned (its sweep reads less than a measurement)
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_MEASURE);
  v.big = true;
  EXPECT_EQ(planner_before_measure(&v), PLAN_STEP_PLAN);
}

TEST(PlannerVisit, MemoryChangedByFaultsOrResidentSet) {
  const uint64_t page = 4096, window = 2 << 20;
  plan_change c{1000, 1000, 64 * window, 64 * window, page, window / 2};
  EXPECT_FALSE(planner_memory_changed(&c));
  c.faults_now = 1000 + window / 2 / page - 1; // less than half a window faulted in
  EXPECT_FALSE(planner_memory_changed(&c));
  c.faults_now++; // it adds up to half a window
  EXPECT_TRUE(planner_memory_changed(&c)) << "unmapped and faulted in again: the same RSS, but faults";
  c.faults_now = 1000;
  c.rss_now = 64 * window - window / 2; // given back (MADV_DONTNEED, munmap) without a fault
  EXPECT_TRUE(planner_memory_changed(&c));
  c.rss_now = 64 * window + window / 2 - 1;
  EXPECT_FALSE(planner_memory_changed(&c));
  c.faults_now = 0; // a counter read as lower (never: it only grows) is no change
  c.rss_now = 64 * window;
  EXPECT_FALSE(planner_memory_changed(&c));
}

TEST(PlannerVisit, PlannedOnlyWithSomethingToDoAndNoFailureBackOff) {
  const char *why;
  plan_visit v = visit();
  EXPECT_EQ(planner_after_measure(&v, &why), PLAN_STEP_PLAN);
  v.idle = true;
  EXPECT_EQ(planner_after_measure(&v, &why), PLAN_STEP_MEASURE) << "planned before: nothing to do";
  v.watching = true;
  EXPECT_EQ(planner_after_measure(&v, &why), PLAN_STEP_PLAN);
  v.failures_backoff = true;
  EXPECT_EQ(planner_after_measure(&v, &why), PLAN_STEP_MEASURE);
  EXPECT_STREQ(why, "backing off after failed passes");
  v = visit();
  v.may_collapse = false; // memory gate closed, or --status
  EXPECT_EQ(planner_after_measure(&v, &why), PLAN_STEP_MEASURE);
  EXPECT_EQ(why, nullptr);
}

}  // namespace
