// SPDX-License-Identifier: MIT
// What a pass of hugify agent reads (docs/agent.md, "What a pass costs"): a process whose memory did not
// change is not walked again, one that unmapped and faulted in the same amount is, and a pass at the default
// budget collapses a process of 1 GiB. Counts from the agent's JSON (its looks: bytes walked, measurements),
// never a time.
#include "agent_test.hpp"

namespace {

using namespace agent_test;

// The count after `"name": ` in text from `from` on (UINT64_MAX: none).
uint64_t count_after(const std::string &text, const std::string &name, size_t from = 0) {
  size_t at = from == std::string::npos ? from : text.find("\"" + name + "\": ", from);
  if (at == std::string::npos) return UINT64_MAX;
  at += name.size() + 4;
  return at < text.size() && isdigit((unsigned char)text[at]) ? std::stoull(text.substr(at)) : UINT64_MAX;
}

// A figure of the process's "looks" object in the last JSON object the daemon appended.
uint64_t looks_figure(const std::string &json, const std::string &name) {
  std::string last = last_json_object(json);
  return count_after(last, name, last.find("\"looks\""));
}

// Wait until the daemon has appended its JSON object for pass `passes` (the metrics file says so first).
void wait_json_pass(const process &agent, const std::string &metrics, const std::string &json, double passes) {
  ASSERT_GE(wait_passes(agent, metrics, passes), passes);
  for (double give_up = now() + 30; now() < give_up; usleep(20000))
    if (last_json_object(json).find("\"passes\": " + std::to_string((long long)passes) + ",") != std::string::npos)
      return;
  FAIL() << "no JSON object for pass " << passes << ": " << last_json_object(json);
}

// An unchanged process costs the agent one stat and one status read a pass: no walk of its memory, and a
// measurement (smaps) only every PLAN_QUIET_PASSES + 1 passes. Unmapping a quarter of every window and
// faulting it in again leaves its resident set as it was, but its page faults tell: it is walked again.
TEST(AgentPassCost, AnUnchangedProcessIsNotWalkedAgainAndARefaultedOneIs) {
  REQUIRE_COLLAPSE();
  process target;
  auto regions = start_target(target, {"--churn", "1G"});
  const region &dense = regions["churn"];
  std::string dir = temp_dir(), metrics = dir + "/agent.prom", json = dir + "/agent.json";
  process agent;
  agent.start(agent_argv({"--pid", std::to_string(target.pid), "--min-rss", "0", "--interval", "0.2",
                          "--cpu-budget", "100", "--metrics-file", metrics, "--json=" + json}),
              dir + "/agent.err");
  // collapsed, then past the passes in which the ledger judges the collapses (AGENT_LATE_PASSES = 10)
  double pass = 0;
  for (; pass < 60 && huge_bytes(target.pid, dense) < dense.size; pass++)
    ASSERT_GE(wait_passes(agent, metrics, pass + 1), pass + 1) << test_support::read_file(dir + "/agent.err");
  ASSERT_EQ(huge_bytes(target.pid, dense), dense.size) << "the agent made the dense gigabyte huge";
  pass += 12;
  wait_json_pass(agent, metrics, json, pass);
  uint64_t walked = looks_figure(json, "walked_bytes"), measured = looks_figure(json, "measurements");
  ASSERT_NE(walked, UINT64_MAX) << last_json_object(json);
  ASSERT_GE(walked, dense.size) << "its first plans walked the gigabyte";

  const double quiet = 12;
  wait_json_pass(agent, metrics, json, pass + quiet);
  uint64_t walked_quiet = looks_figure(json, "walked_bytes"), measured_quiet = looks_figure(json, "measurements");
  std::printf("unchanged over %.0f passes: walked %llu -> %llu bytes, measured %llu -> %llu times\n", quiet,
              (unsigned long long)walked, (unsigned long long)walked_quiet, (unsigned long long)measured,
              (unsigned long long)measured_quiet);
  EXPECT_EQ(walked_quiet, walked) << "an unchanged process is not walked again";
  EXPECT_LE(measured_quiet - measured, (uint64_t)(quiet / 6) + 1) << "measured every sixth pass at most";

  // unmap a quarter of every window and fault it in again: the same resident set, new faults
  kill(target.pid, SIGUSR2);
  ASSERT_FALSE(target.line("churned").empty());
  pass += quiet;
  wait_json_pass(agent, metrics, json, pass + 3);
  uint64_t walked_after = looks_figure(json, "walked_bytes");
  std::printf("after 256 MiB unmapped and faulted in again: walked %llu -> %llu bytes\n",
              (unsigned long long)walked_quiet, (unsigned long long)walked_after);
  EXPECT_GE(walked_after - walked_quiet, dense.size / 4) << "the refaulted windows were walked again";
  EXPECT_EQ(agent.stop(SIGTERM), 0);
}

// At the agent's defaults (2 % of a core, 10 s), its first pass over a process of 1 GiB collapses: its
// looks cost what it collapses, not all of its memory first.
TEST(AgentPassCost, APassAtTheDefaultBudgetCollapses) {
  REQUIRE_COLLAPSE();
  process target;
  start_target(target, {"--dense", "1G"});
  std::string dir = temp_dir(), metrics = dir + "/agent.prom", json = dir + "/agent.json";
  process agent;
  agent.start(agent_argv({"--pid", std::to_string(target.pid), "--min-rss", "0", "--metrics-file", metrics,
                          "--json=" + json}),
              dir + "/agent.err");
  wait_json_pass(agent, metrics, json, 1);
  std::string first = last_json_object(json);
  uint64_t collapsed = count_after(first, "collapsed_bytes");
  ASSERT_NE(collapsed, UINT64_MAX) << first;
  std::printf("the first pass at the default budget collapsed %llu MiB\n", (unsigned long long)(collapsed / MiB));
  EXPECT_GT(collapsed, 0u) << first;
  EXPECT_NE(first.find("\"cpu_budget_fraction\": 0.02"), std::string::npos) << "the default budget";
  EXPECT_EQ(agent.stop(SIGTERM), 0);
}

}  // namespace
