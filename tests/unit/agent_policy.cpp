// SPDX-License-Identifier: MIT
// The agent's pure decisions (src/lib/agent_policy.c) on constructed snapshots and captured PSI text, and
// the Prometheus text writer is tested with the format layer (format_layer.cpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "agent_policy.h"
#include "collapse.h"
#include "inspect.h"
#include "pause.h"
}
#include "test_support.hpp"

namespace {

agent_process process(pid_t pid, const char *comm, uint64_t rss = 100 << 20) {
  agent_process p{};
  p.pid = pid;
  p.uid = 1000;
  snprintf(p.comm, sizeof p.comm, "%s", comm);
  snprintf(p.exe, sizeof p.exe, "/usr/bin/%s", comm);
  snprintf(p.cgroup, sizeof p.cgroup, "/system.slice/%s.service", comm);
  p.rss = rss;
  p.thp_disabled = 0;
  return p;
}

agent_selection select(const agent_selectors &s, const agent_process &p) { return agent_select(&s, &p); }

TEST(AgentSelect, NoSelectorsMeansEveryProcessAboveMinRss) {
  agent_selectors s{};
  s.min_rss = 16 << 20;
  EXPECT_EQ(select(s, process(1, "redis-server")), AGENT_SELECTED);
  EXPECT_EQ(select(s, process(2, "tiny", 1 << 20)), AGENT_TOO_SMALL);
  agent_process kthread = process(3, "kworker/0:1", 0);
  kthread.kernel_thread = true;
  EXPECT_EQ(select(s, kthread), AGENT_KERNEL_THREAD);
}

TEST(AgentSelect, AnyPositiveSelectorMatchesAndExclusionsWin) {
  agent_selectors s{};
  snprintf(s.comms[s.comm_count++], 16, "redis-server");
  snprintf(s.cgroups[s.cgroup_count++], sizeof s.cgroups[0], "/system.slice/postgres.service/");
  s.pids[s.pid_count++] = 77;
  EXPECT_EQ(select(s, process(10, "redis-server")), AGENT_SELECTED);
  EXPECT_EQ(select(s, process(11, "postgres")), AGENT_SELECTED); // by cgroup
  EXPECT_EQ(select(s, process(77, "anything")), AGENT_SELECTED);
  EXPECT_EQ(select(s, process(12, "nginx")), AGENT_NOT_MATCHED);
  snprintf(s.exclude_comms[s.exclude_comm_count++], 16, "redis-server");
  EXPECT_EQ(select(s, process(10, "redis-server")), AGENT_EXCLUDED);
  agent_process disabled = process(77, "anything");
  disabled.thp_disabled = 1;
  EXPECT_EQ(select(s, disabled), AGENT_THP_DISABLED);
  EXPECT_STREQ(agent_selection_name(AGENT_THP_DISABLED), "thp_disabled");
}

// Only pids can select a process: a pass visits those alone. Any other positive selector, or none, needs the walk.
TEST(AgentSelect, OnlyPidsWhenNoOtherPositiveSelectorIsGiven) {
  agent_selectors s{};
  EXPECT_FALSE(agent_selects_only_pids(&s)); // nothing given: every process
  s.pids[s.pid_count++] = 77;
  EXPECT_TRUE(agent_selects_only_pids(&s));
  snprintf(s.exclude_comms[s.exclude_comm_count++], 16, "sshd"); // exclusions narrow, they never add
  EXPECT_TRUE(agent_selects_only_pids(&s));
  s.min_rss = 1 << 20;
  EXPECT_TRUE(agent_selects_only_pids(&s));
  for (int other = 0; other < 4; other++) {
    agent_selectors t = s;
    if (other == 0) t.uids[t.uid_count++] = 1000;
    if (other == 1) snprintf(t.comms[t.comm_count++], 16, "redis-server");
    if (other == 2) snprintf(t.exes[t.exe_count++], sizeof t.exes[0], "/usr/bin/redis-server");
    if (other == 3) snprintf(t.cgroups[t.cgroup_count++], sizeof t.cgroups[0], "/system.slice/");
    EXPECT_FALSE(agent_selects_only_pids(&t)) << other;
  }
}

TEST(AgentSelect, ExeAndUid) {
  agent_selectors s{};
  snprintf(s.exes[s.exe_count++], sizeof s.exes[0], "/usr/bin/java");
  EXPECT_EQ(select(s, process(1, "java")), AGENT_SELECTED);
  EXPECT_EQ(select(s, process(2, "javac")), AGENT_NOT_MATCHED);
  s.uids[s.uid_count++] = 1000;
  EXPECT_EQ(select(s, process(2, "javac")), AGENT_SELECTED);
}

TEST(AgentSelect, CgroupPathsMatchThemselvesAndBelow) {
  EXPECT_TRUE(agent_cgroup_matches("/a/b", "/a/b"));
  EXPECT_TRUE(agent_cgroup_matches("/a/b", "/a/b/c"));
  EXPECT_TRUE(agent_cgroup_matches("/a/b/", "/a/b/c"));
  EXPECT_FALSE(agent_cgroup_matches("/a/b", "/a/bc"));
  EXPECT_FALSE(agent_cgroup_matches("/a/b", "/a"));
  EXPECT_TRUE(agent_cgroup_matches("/", "/anything"));
}

TEST(AgentBudget, TokenBucketFillsAtTheBudgetAndCaps) {
  agent_budget b;
  agent_budget_init(&b, 0.02, 60, 10, 100.0); // 2 % of a core, one 10 s interval's worth to start
  EXPECT_DOUBLE_EQ(b.tokens, 0.2);
  EXPECT_TRUE(agent_budget_allows(&b));
  agent_budget_charge(&b, 0.3);
  EXPECT_FALSE(agent_budget_allows(&b));
  agent_budget_refill(&b, 104.0); // +0.08
  EXPECT_FALSE(agent_budget_allows(&b));
  agent_budget_refill(&b, 106.0); // +0.04
  EXPECT_TRUE(agent_budget_allows(&b));
  agent_budget_refill(&b, 10000.0);
  EXPECT_DOUBLE_EQ(b.tokens, 0.02 * 60); // at most a minute's worth
  EXPECT_DOUBLE_EQ(b.spent, 0.3);
  agent_budget_refill(&b, 50.0); // a clock going back adds nothing
  EXPECT_DOUBLE_EQ(b.tokens, 1.2);
}

TEST(AgentBudget, PassCeilingIsHalfASecondOrTheIntervalsShare) {
  EXPECT_DOUBLE_EQ(agent_pass_ceiling(0.02, 10), AGENT_PASS_CPU_CEILING); // defaults: 0.2 s share, 0.5 s ceiling
  EXPECT_DOUBLE_EQ(agent_pass_ceiling(0.10, 0.5), AGENT_PASS_CPU_CEILING);
  EXPECT_DOUBLE_EQ(agent_pass_ceiling(0.50, 10), 5.0); // a raised budget is not cut by it
  EXPECT_LT(AGENT_PASS_CPU_CEILING, 1.0);
}

// The refilled bucket of a long pass: the budget allows more, the pass's own CPU stops it, and that stop is
// told apart from a spent budget and from a stop asked by a signal.
// A plan walks about what the pass can collapse: the CPU it may still spend over one window's, four times
// over, and never less than 256 MiB; whole windows.
TEST(AgentBudget, WalkLimitFollowsWhatThePassCanCollapse) {
  const uint64_t W = uint64_t{2} << 20;
  EXPECT_EQ(agent_walk_limit(0.2, 0.002, W), 400 * W); // 0.2 s at 2 ms a window: 100 windows, x4
  EXPECT_EQ(agent_walk_limit(0.2, 0, W), agent_walk_limit(0.2, AGENT_WINDOW_CPU_GUESS, W)) << "not known yet";
  EXPECT_EQ(agent_walk_limit(0.01, 0.002, W), AGENT_WALK_MIN_BYTES) << "at least 256 MiB";
  EXPECT_EQ(agent_walk_limit(-1, 0.002, W), AGENT_WALK_MIN_BYTES) << "a bucket in debt";
  EXPECT_EQ(agent_walk_limit(1.0, 0.004, W), 1000 * W);
  EXPECT_EQ(agent_walk_limit(1e30, 1e-30, W) % W, 0u) << "capped, whole windows";
  const uint64_t big = uint64_t{32} << 20; // a 32 MiB PMD (16 KiB pages)
  EXPECT_EQ(agent_walk_limit(0.001, 0.002, big), AGENT_WALK_MIN_BYTES);
  EXPECT_EQ(agent_walk_limit(0.2, 0.032, big) % big, 0u);
}

TEST(AgentBudget, PassStopsAtItsCeilingApartFromTheBudget) {
  agent_budget b;
  agent_budget_init(&b, 0.02, 60, 10, 0.0);
  const double ceiling = agent_pass_ceiling(0.02, 10);
  EXPECT_EQ(agent_work_word(&b, 0.1, ceiling, false), AGENT_WORK_GO);
  agent_budget_charge(&b, 0.15);
  agent_budget_refill(&b, 200.0); // minutes of wall time in one pass: the bucket is full again
  ASSERT_TRUE(agent_budget_allows(&b));
  EXPECT_EQ(agent_work_word(&b, 0.49, ceiling, false), AGENT_WORK_GO);
  EXPECT_EQ(agent_work_word(&b, 0.5, ceiling, false), AGENT_WORK_PASS_CEILING);
  EXPECT_EQ(agent_work_word(&b, 1.5, ceiling, false), AGENT_WORK_PASS_CEILING);
  EXPECT_EQ(agent_work_word(&b, 1.5, ceiling, true), AGENT_WORK_STOPPED); // a signal is said as such
  agent_budget_charge(&b, 5);
  EXPECT_EQ(agent_work_word(&b, 1.5, ceiling, false), AGENT_WORK_BUDGET_SPENT); // both: the budget's word
  EXPECT_EQ(agent_work_word(&b, 0.1, ceiling, false), AGENT_WORK_BUDGET_SPENT);
  // --once: no budget, no ceiling; only a signal stops it
  EXPECT_EQ(agent_work_word(nullptr, 100, 0, false), AGENT_WORK_GO);
  EXPECT_EQ(agent_work_word(nullptr, 100, 0, true), AGENT_WORK_STOPPED);
  EXPECT_STREQ(agent_work_phrase(AGENT_WORK_PASS_CEILING), "pass CPU ceiling reached");
  EXPECT_STREQ(agent_work_phrase(AGENT_WORK_BUDGET_SPENT), "budget spent");
  EXPECT_STREQ(agent_work_phrase(AGENT_WORK_STOPPED), "stopped");
  EXPECT_STREQ(agent_work_phrase(AGENT_WORK_GO), "");
}

TEST(AgentMemory, PressureParsesCapturedText) {
  psi_pressure p;
  ASSERT_TRUE(parse_psi_pressure(test_support::fixture("pressure/memory_pressed.txt").c_str(), &p));
  EXPECT_DOUBLE_EQ(p.some_avg10, 12.5);
  EXPECT_DOUBLE_EQ(p.some_avg60, 3.1);
  EXPECT_DOUBLE_EQ(p.full_avg10, 4.0);
  ASSERT_TRUE(parse_psi_pressure(test_support::fixture("pressure/memory_idle.txt").c_str(), &p));
  ASSERT_TRUE(parse_psi_pressure(test_support::fixture("pressure/memory_no_full.txt").c_str(), &p));
  EXPECT_FALSE(parse_psi_pressure("", &p));
  EXPECT_FALSE(parse_psi_pressure("some avg10=", &p));
  // fuzz/machine.c found this one: avg10 read, avg60 missing; nothing half-read is left behind
  EXPECT_FALSE(parse_psi_pressure("some avg10=0.40 10=0.l=0\n", &p));
  EXPECT_EQ(p.some_avg10, 0.0);
  EXPECT_FALSE(p.present);
}

TEST(AgentMemory, GateClosesOnFloorOrPressure) {
  agent_memory_limits limits{512ull << 20, 10.0};
  psi_pressure calm{1.0, 0.5, 0.0, true}, pressed{12.5, 3.0, 4.0, true}, absent{};
  char reason[160];
  EXPECT_TRUE(agent_memory_allows(&limits, 4ull << 30, &calm, reason, sizeof reason));
  EXPECT_FALSE(agent_memory_allows(&limits, 100ull << 20, &calm, reason, sizeof reason));
  EXPECT_NE(std::string(reason).find("below the floor"), std::string::npos) << reason;
  EXPECT_FALSE(agent_memory_allows(&limits, 4ull << 30, &pressed, reason, sizeof reason));
  EXPECT_NE(std::string(reason).find("pressure"), std::string::npos) << reason;
  EXPECT_TRUE(agent_memory_allows(&limits, 4ull << 30, &absent, reason, sizeof reason)); // no PSI: floor only
}

TEST(AgentBackoff, DoublesAfterFailedPassesAndResetsOnProgress) {
  agent_backoff b{};
  EXPECT_TRUE(agent_backoff_allows(&b, 0));
  agent_backoff_record(&b, false, true, 100, 10, 3600);
  EXPECT_DOUBLE_EQ(b.next_try, 110);
  agent_backoff_record(&b, false, true, 110, 10, 3600);
  EXPECT_DOUBLE_EQ(b.next_try, 130);
  EXPECT_FALSE(agent_backoff_allows(&b, 120));
  for (int i = 0; i < 40; i++) agent_backoff_record(&b, false, true, 1000, 10, 3600);
  EXPECT_DOUBLE_EQ(b.next_try, 4600); // capped
  agent_backoff_record(&b, false, false, 2000, 10, 3600); // nothing failed: no back-off
  EXPECT_TRUE(agent_backoff_allows(&b, 2000));
  agent_backoff_record(&b, false, true, 2000, 10, 3600);
  agent_backoff_record(&b, true, true, 2010, 10, 3600); // progress resets
  EXPECT_EQ(b.failures, 0u);
}

}  // namespace

namespace {

// ---- whether collapses last: the ledger on scripted passes ------------------------------------------

constexpr uint64_t W = uint64_t{2} << 20;

// One scripted pass: the plan sees every window in `windows` (huge or not), the ledger judges, and the
// windows in `collapse` it allows are collapsed. Returns the windows collapsed.
struct scripted {
  agent_ledger l{};
  uint64_t pass = 0;
  scripted() { agent_ledger_init(&l, W, 360); }
  ~scripted() { agent_ledger_free(&l); }
  std::vector<uint64_t> run(const std::vector<std::pair<uint64_t, bool>> &windows, const std::vector<uint64_t> &collapse) {
    pass++;
    std::vector<agent_window> seen;
    std::vector<uint64_t> done;
    for (auto &[start, huge] : windows) {
      agent_window w{start, huge ? 0u : 512u, huge ? 512u : 0u, -1, 0, 0, 0};
      agent_ledger_observe(&l, pass, &w, huge);
      seen.push_back(w);
    }
    agent_ledger_judge(&l, pass, true);
    // the planner's word, as collapse.c asks it
    plan_input in{PLAN_ORDER_AGENT, 512, W, 0.5, agent_ledger_process(&l, pass), {SIZE_MAX, UINT64_MAX, AGENT_PROBE_WINDOWS}};
    plan_result result;
    planner_plan(seen.data(), seen.size(), &in, &result);
    for (uint64_t start : collapse)
      for (size_t i = 0; i < result.kept; i++)
        if (seen[i].start == start && agent_ledger_collapsed(&l, pass, start)) done.push_back(start);
    return done;
  }
};

std::vector<std::pair<uint64_t, bool>> windows_of(uint64_t count, bool huge) {
  std::vector<std::pair<uint64_t, bool>> w;
  for (uint64_t i = 0; i < count; i++) w.push_back({(i + 1) * W, huge});
  return w;
}
std::vector<uint64_t> starts(uint64_t count) {
  std::vector<uint64_t> s;
  for (uint64_t i = 0; i < count; i++) s.push_back((i + 1) * W);
  return s;
}

TEST(AgentLedger, CollapsesThatLastAreCountedAndNeverHeldBack) {
  scripted s;
  EXPECT_EQ(s.run(windows_of(8, false), starts(8)).size(), 8u);
  for (int pass = 0; pass < 12; pass++) s.run(windows_of(8, true), starts(8));
  EXPECT_DOUBLE_EQ(agent_ledger_early_share(&s.l), 1.0);
  EXPECT_DOUBLE_EQ(agent_ledger_late_share(&s.l), 1.0);
  EXPECT_EQ(s.l.early_checked, 8 * W);
  EXPECT_EQ(s.l.late_checked, 8 * W);
  EXPECT_EQ(s.l.recollapsed_bytes, 0u);
  EXPECT_EQ(s.l.undone_bytes, 0u);
  EXPECT_EQ(s.l.churn_strikes, 0u);
  EXPECT_TRUE(agent_ledger_allows(&s.l, s.pass + 1));
}

TEST(AgentLedger, GrowthNeverBacksOff) {
  // a heap that grows a step of 16 windows per pass, each collapsed and staying huge (issue 13's case)
  scripted s;
  for (uint64_t step = 1; step <= 20; step++) {
    auto w = windows_of(16 * step, true);
    for (uint64_t i = 16 * (step - 1); i < 16 * step; i++) w[i].second = false;
    auto done = s.run(w, starts(16 * step));
    EXPECT_EQ(done.size(), 16u) << "step " << step;
  }
  EXPECT_EQ(s.l.churn_strikes, 0u);
  EXPECT_EQ(s.l.recollapsed_bytes, 0u);
}

TEST(AgentLedger, ChurnBacksTheProcessOffWithGrowingIntervals) {
  // every collapse is split again by the next pass (an allocator purging freed pages)
  scripted s;
  std::vector<uint64_t> collapse_passes;
  uint64_t collapsed = 0;
  for (int pass = 0; pass < 60; pass++) {
    auto done = s.run(windows_of(32, false), starts(32));
    if (!done.empty()) collapse_passes.push_back(s.pass);
    if (collapse_passes.size() > 1) {
      EXPECT_LE(done.size(), (size_t)AGENT_PROBE_WINDOWS) << "a retry is a probe";
    }
    collapsed += done.size() * W;
  }
  ASSERT_GE(collapse_passes.size(), 2u);
  EXPECT_EQ(collapse_passes[0], 1u);
  // The first judgement (pass 2) backs it off: no collapse in the next passes, and the gaps grow.
  for (size_t i = 2; i < collapse_passes.size(); i++)
    EXPECT_GT(collapse_passes[i] - collapse_passes[i - 1], collapse_passes[i - 1] - collapse_passes[i - 2]);
  EXPECT_LE(collapse_passes.size(), 5u) << "60 passes of churn";
  EXPECT_GE(s.l.churn_strikes, 3u);
  EXPECT_DOUBLE_EQ(agent_ledger_early_share(&s.l), 0.0);
  EXPECT_EQ(s.l.undone_bytes, collapsed);
  // Windows undone are held back on their own too, and retries are probes: re-collapsed well under 1x.
  EXPECT_LE(s.l.recollapsed_bytes, 32 * W / 2);
}

TEST(AgentLedger, UndoneWindowsAreHeldBackWhileTheRestIsCollapsed) {
  // 8 windows last, 2 are split each time: the process is fine (80 % lasts), the 2 are held back.
  scripted s;
  auto first = s.run(windows_of(10, false), starts(10));
  ASSERT_EQ(first.size(), 10u);
  auto w = windows_of(10, true);
  w[0].second = w[1].second = false; // split by the allocator
  auto second = s.run(w, starts(10));
  EXPECT_TRUE(second.empty()) << "the split windows are held back, not refilled";
  EXPECT_EQ(s.l.churn_strikes, 0u);
  EXPECT_EQ(s.l.undone_bytes, 2 * W);
  EXPECT_EQ(s.l.backed_off_bytes, 2 * W);
  // after AGENT_UNDONE_PASSES passes they may be tried again, once; undone again, they wait twice as long
  std::vector<uint64_t> retries;
  for (int pass = 0; pass < 30; pass++) {
    auto done = s.run(w, starts(10));
    if (!done.empty()) retries.push_back(s.pass);
  }
  ASSERT_GE(retries.size(), 2u);
  EXPECT_EQ(retries[0], 2u + AGENT_UNDONE_PASSES);
  EXPECT_EQ(retries[1] - retries[0], 1u + 2u * AGENT_UNDONE_PASSES) << "split again at the next pass";
  EXPECT_EQ(s.l.recollapsed_bytes, retries.size() * 2 * W);
}

TEST(AgentLedger, AFewWindowsAreNotEnoughToJudgeAProcess) {
  scripted s;
  s.run(windows_of(AGENT_LASTING_MIN_WINDOWS - 1, false), starts(AGENT_LASTING_MIN_WINDOWS - 1));
  s.run(windows_of(AGENT_LASTING_MIN_WINDOWS - 1, false), {});
  EXPECT_EQ(s.l.churn_strikes, 0u);
  EXPECT_TRUE(agent_ledger_allows(&s.l, s.pass + 1));
  EXPECT_DOUBLE_EQ(agent_ledger_early_share(&s.l), 0.0);
}

// Cold windows wait for hot ones at most AGENT_COLD_WAIT_PASSES passes in a row, then get a pass's turn.
TEST(AgentLedger, ColdWindowsWaitABoundedNumberOfPasses) {
  agent_ledger l;
  agent_ledger_init(&l, W, 360);
  EXPECT_FALSE(agent_ledger_process(&l, 5).cold_turn);
  agent_ledger_planned(&l, 5, true);
  for (uint64_t pass = 6; pass < 5 + AGENT_COLD_WAIT_PASSES; pass++) {
    EXPECT_FALSE(agent_ledger_process(&l, pass).cold_turn) << pass;
    agent_ledger_planned(&l, pass, true);
  }
  EXPECT_TRUE(agent_ledger_process(&l, 5 + AGENT_COLD_WAIT_PASSES).cold_turn);
  agent_ledger_planned(&l, 5 + AGENT_COLD_WAIT_PASSES, false); // they had their turn
  EXPECT_FALSE(agent_ledger_process(&l, 6 + AGENT_COLD_WAIT_PASSES).cold_turn);
  agent_ledger_free(&l);
}

TEST(AgentLedger, UnmappedWindowsAreForgottenOnlyAfterAFullScan) {
  scripted s;
  s.run(windows_of(6, false), starts(6));
  EXPECT_EQ(s.l.count, 6u);
  s.pass++;
  agent_ledger_judge(&s.l, s.pass, false); // the walk did not see everything: keep them
  EXPECT_EQ(s.l.count, 6u);
  s.run(windows_of(3, true), {});          // the program unmapped the other three
  EXPECT_EQ(s.l.count, 3u);
}

// Issue 32 item 5: a window seen present and not huge at the last look, huge now, and not collapsed by the
// agent since, is the kernel's (khugepaged's); the agent's own collapses are not.
TEST(AgentLedger, TellsTheKernelsCollapsesFromItsOwn) {
  agent_ledger l;
  agent_ledger_init(&l, W, 360);
  auto look = [&](uint64_t pass, std::vector<bool> huge) {
    std::vector<agent_window> seen;
    for (size_t i = 0; i < huge.size(); i++) {
      agent_window w{(i + 1) * W, huge[i] ? 0u : 400u, huge[i] ? 512u : 0u, -1, 0, 0, 0};
      agent_ledger_observe(&l, pass, &w, huge[i]);
      seen.push_back(w);
    }
    agent_ledger_judge(&l, pass, true);
    return seen;
  };
  look(1, {false, false, false, false});
  agent_ledger_collapsed(&l, 1, W); // the agent's
  auto second = look(2, {true, true, false, false});
  EXPECT_FALSE(second[0].facts & PLAN_FACT_KERNEL);
  EXPECT_TRUE(second[1].facts & PLAN_FACT_KERNEL);
  EXPECT_EQ(l.kernel_bytes, W);
  auto third = look(3, {true, true, false, true});
  EXPECT_FALSE(third[1].facts & PLAN_FACT_KERNEL) << "counted once, when it became huge";
  EXPECT_TRUE(third[3].facts & PLAN_FACT_KERNEL);
  EXPECT_EQ(l.kernel_bytes, 2 * W);
  EXPECT_EQ(l.collapsed_bytes, W) << "the kernel's are never the agent's";
  agent_ledger_free(&l);
}

// A sweep walks a big process over several passes (docs/agent.md, "What a pass costs"): its look of which
// windows were present and not huge spans them, and begins at its first plan, so the kernel's collapses
// are told apart across the sweep and a window the agent collapsed during it is its own.
TEST(AgentLedger, ASweepsLookSpansItsPlans) {
  agent_ledger l;
  agent_ledger_init(&l, W, 360);
  auto look = [&](uint64_t pass, uint64_t first, std::vector<bool> huge, bool last) {
    std::vector<agent_window> seen;
    for (size_t i = 0; i < huge.size(); i++) {
      agent_window w{(first + i) * W, huge[i] ? 0u : 400u, huge[i] ? 512u : 0u, -1, 0, 0, 0};
      agent_ledger_observe(&l, pass, &w, huge[i]);
      seen.push_back(w);
    }
    agent_ledger_judge(&l, pass, last);
    return seen;
  };
  agent_ledger_collapsed(&l, 1, 9 * W); // collapsed long ago, then unmapped: not seen by the sweep
  look(2, 1, {false, false, false}, false); // the sweep's first slice
  agent_ledger_collapsed(&l, 2, 1 * W);     // the agent collapses a window of it
  EXPECT_EQ(l.small_pass, 0u) << "the look goes on";
  EXPECT_EQ(l.count, 2u) << "nothing forgotten before the sweep saw every window";
  look(3, 4, {false, false, false}, true); // its last slice: the look ends
  EXPECT_EQ(l.small_pass, 2u) << "the look began at the sweep's first plan";
  EXPECT_EQ(l.small_count, 6u);
  EXPECT_EQ(l.count, 1u) << "the window the sweep did not see is gone; the one it collapsed stays";
  auto next = look(4, 1, {true, true, false, false, true, false}, true);
  EXPECT_FALSE(next[0].facts & PLAN_FACT_KERNEL) << "the agent's own, collapsed during the sweep";
  EXPECT_TRUE(next[1].facts & PLAN_FACT_KERNEL);
  EXPECT_TRUE(next[4].facts & PLAN_FACT_KERNEL);
  EXPECT_EQ(l.kernel_bytes, 2 * W);
  agent_ledger_free(&l);
}

TEST(AgentLedger, MemoryIsBounded) {
  agent_ledger l;
  agent_ledger_init(&l, W, 360);
  for (uint64_t i = 0; i < AGENT_LEDGER_MAX + 100; i++) ASSERT_TRUE(agent_ledger_collapsed(&l, 1 + i / 1000, (i + 1) * W));
  EXPECT_EQ(l.count, (size_t)AGENT_LEDGER_MAX);
  EXPECT_EQ(l.windows[0].start, 101 * W) << "the oldest collapses are forgotten first";
  for (size_t i = 1; i < l.count; i++) ASSERT_LT(l.windows[i - 1].start, l.windows[i].start);
  agent_ledger_free(&l);
}

TEST(AgentAllocator, IdentifiedFromMappedLibraries) {
  EXPECT_EQ(allocator_of_path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"), ALLOCATOR_JEMALLOC);
  EXPECT_EQ(allocator_of_path("/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.0"), ALLOCATOR_MIMALLOC);
  EXPECT_EQ(allocator_of_path("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4.5.9"), ALLOCATOR_TCMALLOC);
  EXPECT_EQ(allocator_of_path("/usr/lib/x86_64-linux-gnu/libc.so.6"), ALLOCATOR_GLIBC);
  EXPECT_EQ(allocator_of_path("[heap]"), ALLOCATOR_UNKNOWN);
  EXPECT_EQ(allocator_of_path(""), ALLOCATOR_UNKNOWN);
  EXPECT_EQ(allocator_of_path("/opt/libcrypto.so.3"), ALLOCATOR_UNKNOWN);
  // jemalloc loaded beside glibc is the one malloc resolves to, in either order of the maps
  EXPECT_EQ(allocator_prefer(ALLOCATOR_GLIBC, ALLOCATOR_JEMALLOC), ALLOCATOR_JEMALLOC);
  EXPECT_EQ(allocator_prefer(ALLOCATOR_JEMALLOC, ALLOCATOR_GLIBC), ALLOCATOR_JEMALLOC);
  EXPECT_EQ(allocator_prefer(ALLOCATOR_UNKNOWN, ALLOCATOR_GLIBC), ALLOCATOR_GLIBC);
  for (int a = ALLOCATOR_UNKNOWN; a < ALLOCATOR_COUNT; a++) {
    EXPECT_GT(std::strlen(allocator_advice((allocator_kind)a)), 10u);
    EXPECT_GT(std::strlen(allocator_description((allocator_kind)a)), 3u);
    // the report's name maps back, and fits the public report's allocator[16]
    EXPECT_EQ(allocator_of_name(allocator_name((allocator_kind)a)), (allocator_kind)a);
    EXPECT_LT(std::strlen(allocator_name((allocator_kind)a)), sizeof(hugify_inspect_report{}.allocator));
  }
}

TEST(AgentAllocator, RuntimesOwnTheirDataOverAnyMalloc) {
  // CPython: a libpython it maps, or its executable's name (Debian's python3.11 links libpython in)
  EXPECT_EQ(allocator_of_path("/usr/bin/python3.11"), ALLOCATOR_PYMALLOC);
  EXPECT_EQ(allocator_of_path("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"), ALLOCATOR_PYMALLOC);
  EXPECT_EQ(allocator_of_path("/usr/bin/python3-config"), ALLOCATOR_UNKNOWN) << "a name, then a version only";
  EXPECT_EQ(allocator_of_path("/usr/lib/x86_64-linux-gnu/libnode.so.108"), ALLOCATOR_V8);
  EXPECT_EQ(allocator_of_path("/usr/bin/node"), ALLOCATOR_V8);
  EXPECT_EQ(allocator_of_path("/usr/bin/node_exporter"), ALLOCATOR_UNKNOWN);
  EXPECT_EQ(allocator_of_path("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"), ALLOCATOR_JVM);
  EXPECT_EQ(allocator_of_path("python3"), ALLOCATOR_UNKNOWN) << "not a mapped file";
  EXPECT_EQ(allocator_of_program("python3"), ALLOCATOR_PYMALLOC);
  EXPECT_EQ(allocator_of_program("/usr/local/bin/python3.13"), ALLOCATOR_PYMALLOC);
  EXPECT_EQ(allocator_of_program("nodejs"), ALLOCATOR_V8);
  EXPECT_EQ(allocator_of_program("ls"), ALLOCATOR_UNKNOWN);
  for (int a = ALLOCATOR_UNKNOWN; a < ALLOCATOR_COUNT; a++)
    EXPECT_EQ(allocator_is_runtime((allocator_kind)a), a >= ALLOCATOR_PYMALLOC) << allocator_name((allocator_kind)a);
  // a runtime's arenas are mapped whatever malloc is: it wins over glibc and over a preloaded malloc
  EXPECT_EQ(allocator_prefer(ALLOCATOR_JEMALLOC, ALLOCATOR_PYMALLOC), ALLOCATOR_PYMALLOC);
  EXPECT_EQ(allocator_prefer(ALLOCATOR_PYMALLOC, ALLOCATOR_GLIBC), ALLOCATOR_PYMALLOC);

  std::vector<smaps_vma> vmas(3);
  std::snprintf(vmas[0].path, sizeof vmas[0].path, "/usr/bin/python3.11");
  std::snprintf(vmas[1].path, sizeof vmas[1].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  std::snprintf(vmas[2].path, sizeof vmas[2].path, "[heap]");
  EXPECT_EQ(allocator_of_mappings(vmas.data(), vmas.size(), nullptr), ALLOCATOR_PYMALLOC);
  allocator_facts python_malloc = {.go_program = false, .python_malloc = true};
  EXPECT_EQ(allocator_of_mappings(vmas.data(), vmas.size(), &python_malloc), ALLOCATOR_GLIBC)
      << "PYTHONMALLOC=malloc: the objects are glibc's";
  allocator_facts go = {.go_program = true, .python_malloc = false};
  EXPECT_EQ(allocator_of_mappings(vmas.data() + 1, 2, &go), ALLOCATOR_GO) << "a cgo program maps libc, its heap is Go's";
  EXPECT_EQ(allocator_of_mappings(vmas.data() + 2, 1, &go), ALLOCATOR_GO) << "a static Go program maps no library";
}

TEST(Bloat, IsTheWindowMinusWhatWasPresent) {
  EXPECT_EQ(collapse_window_bloat(512, W, 4096), 0u);
  EXPECT_EQ(collapse_window_bloat(256, W, 4096), W / 2) << "the default guard's worst case: 1 MiB per window";
  EXPECT_EQ(collapse_window_bloat(0, W, 4096), W);
  EXPECT_EQ(collapse_window_bloat(600, W, 4096), 0u) << "never negative";
}

}  // namespace

namespace {

TEST(AgentLedger, WatchesAProcessForAFewPassesAfterACollapse) {
  agent_ledger l;
  agent_ledger_init(&l, W, 360);
  EXPECT_FALSE(agent_ledger_watching(&l, 5)) << "nothing collapsed: nothing to judge";
  agent_ledger_collapsed(&l, 5, W);
  EXPECT_FALSE(agent_ledger_watching(&l, 5));
  for (uint64_t pass = 6; pass <= 6 + AGENT_UNDONE_PASSES; pass++) EXPECT_TRUE(agent_ledger_watching(&l, pass));
  EXPECT_FALSE(agent_ledger_watching(&l, 7 + AGENT_UNDONE_PASSES));
  EXPECT_TRUE(agent_ledger_watching(&l, 5 + AGENT_LATE_PASSES));
  EXPECT_FALSE(agent_ledger_watching(&l, 6 + AGENT_LATE_PASSES));
  agent_ledger_free(&l);
}

// ---- the harm ledger's pauses ----

TEST(Pause, QuantileByNearestRank) {
  std::vector<double> none;
  EXPECT_EQ(pause_quantile(none.data(), 0, 0.99), 0.0);
  std::vector<double> values;
  for (int i = 100; i >= 1; i--) values.push_back(i * 0.001);
  EXPECT_DOUBLE_EQ(pause_quantile(values.data(), values.size(), 0.99), 0.099);
  EXPECT_DOUBLE_EQ(pause_quantile(values.data(), values.size(), 1.0), 0.100);
  std::vector<double> one = {0.005};
  EXPECT_DOUBLE_EQ(pause_quantile(one.data(), 1, 0.99), 0.005);
}

TEST(Pause, HistogramCountsAndBoundsTheQuantile) {
  pause_histogram h{};
  EXPECT_EQ(pause_histogram_quantile(&h, 0.99), 0.0);
  for (int i = 0; i < 99; i++) pause_histogram_add(&h, 0.0003); // in the first bucket (<= 0.5 ms)
  pause_histogram_add(&h, 3.0);                                 // past the last bound
  pause_histogram_add(&h, -1);                                  // not a pause: ignored
  EXPECT_EQ(h.count, 100u);
  EXPECT_EQ(h.counts[0], 99u);
  EXPECT_EQ(h.counts[PAUSE_BUCKETS], 1u);
  EXPECT_DOUBLE_EQ(h.longest, 3.0);
  EXPECT_NEAR(h.sum, 99 * 0.0003 + 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(pause_histogram_quantile(&h, 0.99), 0.0005) << "the bound of the bucket that holds it";
  EXPECT_DOUBLE_EQ(pause_histogram_quantile(&h, 1.0), 3.0) << "past the last bound: the longest";
  for (size_t k = 1; k < PAUSE_BUCKETS; k++) EXPECT_LT(pause_bucket_bounds[k - 1], pause_bucket_bounds[k]);
}

}  // namespace

// Issue 44: a process another owner's DAMOS scheme makes huge is the kernel's. Only a running scheme of action
// collapse or hugepage on virtual addresses counts, never the agent's own kdamond, and only for its targets.
namespace {
probe_damon_scheme damos(unsigned kdamond, const char *state, const char *action, std::vector<int> targets,
                         const char *operations = "vaddr") {
  probe_damon_scheme s{};
  s.kdamond = kdamond;
  snprintf(s.state, sizeof s.state, "%s", state);
  snprintf(s.action, sizeof s.action, "%s", action);
  snprintf(s.operations, sizeof s.operations, "%s", operations);
  s.target_count = static_cast<unsigned>(targets.size());
  for (size_t i = 0; i < targets.size() && i < PROBE_DAMON_TARGETS_MAX; i++) s.targets[i] = targets[i];
  return s;
}
}  // namespace

TEST(AgentDamos, ARunningCollapseOrHugepageSchemeOfAnotherOwnerTakesItsTargets) {
  std::vector<probe_damon_scheme> s = {damos(0, "on", "stat", {10, 11}), damos(1, "on", "collapse", {11, 12}),
                                       damos(2, "on", "hugepage", {13})};
  EXPECT_EQ(agent_damos_scheme_of(s.data(), s.size(), -1, 10), nullptr) << "stat changes nothing";
  ASSERT_NE(agent_damos_scheme_of(s.data(), s.size(), -1, 11), nullptr);
  EXPECT_EQ(agent_damos_scheme_of(s.data(), s.size(), -1, 11)->kdamond, 1u);
  EXPECT_STREQ(agent_damos_scheme_of(s.data(), s.size(), -1, 13)->action, "hugepage");
  EXPECT_EQ(agent_damos_scheme_of(s.data(), s.size(), -1, 14), nullptr) << "not a target";
  EXPECT_EQ(agent_damos_scheme_of(s.data(), s.size(), 2, 13), nullptr) << "the agent's own kdamond";
  EXPECT_EQ(agent_damos_scheme_of(nullptr, 0, -1, 13), nullptr);
}

TEST(AgentDamos, AnOffKdamondOrPhysicalAddressesActOnNoProcess) {
  std::vector<probe_damon_scheme> s = {damos(0, "off", "collapse", {20}), damos(1, "on", "hugepage", {21}, "paddr"),
                                       damos(2, "on", "collapse", {22}, "fvaddr")};
  EXPECT_EQ(agent_damos_scheme_of(s.data(), s.size(), -1, 20), nullptr) << "off: the kernel does nothing";
  EXPECT_EQ(agent_damos_scheme_of(s.data(), s.size(), -1, 21), nullptr) << "paddr has no process";
  EXPECT_NE(agent_damos_scheme_of(s.data(), s.size(), -1, 22), nullptr) << "fvaddr targets processes too";
  // past the targets probe_damon_schemes keeps, a pid is not found
  std::vector<int> many(PROBE_DAMON_TARGETS_MAX + 4);
  for (size_t i = 0; i < many.size(); i++) many[i] = 100 + static_cast<int>(i);
  probe_damon_scheme wide = damos(3, "on", "collapse", many);
  EXPECT_NE(agent_damos_scheme_of(&wide, 1, -1, 100 + PROBE_DAMON_TARGETS_MAX - 1), nullptr);
  EXPECT_EQ(agent_damos_scheme_of(&wide, 1, -1, 100 + PROBE_DAMON_TARGETS_MAX), nullptr);
}
