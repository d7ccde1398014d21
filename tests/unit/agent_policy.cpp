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
bool eligible(const agent_window &w, uint32_t pmd_pages, double min_present) {
  return agent_window_eligible(&w, pmd_pages, min_present);
}

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

agent_window window(uint64_t start, uint32_t present, uint32_t huge = 0, int32_t accessed = -1) {
  return agent_window{start, present, huge, accessed};
}

TEST(AgentWindows, BloatGuardNeedsTheShareOfPagesPresent) {
  EXPECT_TRUE(eligible(window(0, 256), 512, 0.5));
  EXPECT_FALSE(eligible(window(0, 255), 512, 0.5));
  EXPECT_FALSE(eligible(window(0, 51), 512, 0.5)); // 10 % present
  EXPECT_TRUE(eligible(window(0, 51), 512, 0.05));
  EXPECT_FALSE(eligible(window(0, 0), 512, 0.0)); // empty: never
  EXPECT_FALSE(eligible(window(0, 0, 512), 512, 0.0)); // huge already
  EXPECT_TRUE(eligible(window(0, 512), 512, 1.0));
  EXPECT_FALSE(eligible(window(0, 511), 512, 1.0));
}

TEST(AgentWindows, RecentlyAccessedThenDensestThenByAddress) {
  const uint64_t M2 = 2 << 20;
  std::vector<agent_window> w = {window(5 * M2, 300), window(1 * M2, 512), window(2 * M2, 10),
                                 window(3 * M2, 512), window(4 * M2, 0, 512), window(6 * M2, 400)};
  size_t kept = agent_plan_windows(w.data(), w.size(), 512, 0.5);
  ASSERT_EQ(kept, 4u);
  EXPECT_EQ(w[0].start, 1 * M2);
  EXPECT_EQ(w[1].start, 3 * M2); // equal density: address order, so they merge into one call
  EXPECT_EQ(w[2].start, 6 * M2);
  EXPECT_EQ(w[3].start, 5 * M2);
  std::vector<agent_window> a = {window(1 * M2, 512, 0, 3), window(2 * M2, 300, 0, 200), window(3 * M2, 512, 0, 3)};
  kept = agent_plan_windows(a.data(), a.size(), 512, 0.5);
  ASSERT_EQ(kept, 3u);
  EXPECT_EQ(a[0].start, 2 * M2); // the most recently used window first, where access is known
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

TEST(AgentMemory, PressureParsesCapturedText) {
  agent_pressure p;
  ASSERT_TRUE(agent_parse_pressure(test_support::fixture("pressure/memory_pressed.txt").c_str(), &p));
  EXPECT_DOUBLE_EQ(p.some_avg10, 12.5);
  EXPECT_DOUBLE_EQ(p.some_avg60, 3.1);
  EXPECT_DOUBLE_EQ(p.full_avg10, 4.0);
  ASSERT_TRUE(agent_parse_pressure(test_support::fixture("pressure/memory_idle.txt").c_str(), &p));
  ASSERT_TRUE(agent_parse_pressure(test_support::fixture("pressure/memory_no_full.txt").c_str(), &p));
  EXPECT_FALSE(agent_parse_pressure("", &p));
  EXPECT_FALSE(agent_parse_pressure("some avg10=", &p));
}

TEST(AgentMemory, GateClosesOnFloorOrPressure) {
  agent_memory_limits limits{512ull << 20, 10.0};
  agent_pressure calm{1.0, 0.5, 0.0, true}, pressed{12.5, 3.0, 4.0, true}, absent{};
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
