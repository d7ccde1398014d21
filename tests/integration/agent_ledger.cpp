// SPDX-License-Identifier: MIT
// hugify agent's ledger: a process whose collapses do not last is backed off, and --status shows the
// running daemon's ledger from the state file it replaces after every pass.
#include "agent_test.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

namespace {

using namespace agent_test;

// Issue 20: a process that gives memory back inside the windows the agent collapsed (as jemalloc's decay or
// glibc's trim do) splits the huge pages again. The agent must notice that its collapses do not last, back
// the process off instead of re-collapsing it every pass, and say why and which setting would keep them.
TEST(Agent, BacksOffAProcessWhoseCollapsesDoNotLast) {
  REQUIRE_COLLAPSE();
  process target;
  auto regions = start_target(target, {"--churn", windows_arg(32 * MiB, 4)});
  std::string dir = temp_dir(), metrics = dir + "/agent.prom", json = dir + "/agent.json";
  process agent;
  agent.start(agent_argv({"--pid", std::to_string(target.pid), "--min-rss", "0", "--interval", "0.3",
                          "--cpu-budget", "100", "--metrics-file", metrics, "--json=" + json}),
              dir + "/agent.err");
  ASSERT_GE(wait_passes(agent, metrics, 2), 2) << test_support::read_file(dir + "/agent.err");
  // the host's counters: the agent selects this one process
  ASSERT_GE(metric(test_support::read_file(metrics), "hugify_agent_collapsed_bytes_total"),
            (double)regions["churn"].size)
      << "the first pass collapses the dense region";
  // Churn once per agent pass: every window collapsed is split again before the next pass looks.
  const int rounds = 20;
  for (int round = 0; round < rounds; round++) {
    kill(target.pid, SIGUSR2);
    ASSERT_FALSE(target.line("churned").empty());
    double at = metric(test_support::read_file(metrics), "hugify_agent_passes_total");
    ASSERT_GE(wait_passes(agent, metrics, at + 1), at + 1);
  }
  std::string text = test_support::read_file(metrics);
  EXPECT_EQ(agent.stop(SIGTERM), 0);
  double collapsed = metric(text, "hugify_agent_collapsed_bytes_total");
  double recollapsed = metric(text, "hugify_agent_recollapsed_bytes_total");
  double size = (double)regions["churn"].size;
  std::printf("churn region %.0f MiB: collapsed %.0f MiB, re-collapsed %.0f MiB over %d rounds\n", size / MiB,
              collapsed / MiB, recollapsed / MiB, rounds);
  // Without the ledger every pass re-collapses the whole region (20x); with it, at most 1x over the run.
  EXPECT_LE(recollapsed, size) << text;
  EXPECT_GE(metric(text, "hugify_agent_churn_backoffs_total"), 1) << text;
  EXPECT_GE(metric(text, "hugify_agent_lasting_ratio", "passes=\"1\""), 0) << "measured" << text;
  EXPECT_GE(metric(text, "hugify_agent_undone_bytes_total"), size) << text;
  EXPECT_GE(metric(text, "hugify_agent_backed_off_processes"), 1) << text;
  // It says why, and which setting would keep the pages (the helper uses glibc's malloc).
  std::string last = last_json_object(json);
  EXPECT_NE(last.find("\"backed_off\": true"), std::string::npos) << last;
  EXPECT_NE(last.find("\"allocator\": \"glibc\""), std::string::npos) << last;
  EXPECT_NE(last.find("glibc.malloc.trim_threshold"), std::string::npos) << last;
  EXPECT_NE(last.find("collapses undone"), std::string::npos) << last;
}

// --status is a new process: it shows the running daemon's ledger from the state file the daemon replaces
// after every pass (set here in the configuration file, as a service would), and says when there is none.
TEST(Agent, StatusShowsTheDaemonsLedgerFromItsStateFile) {
  REQUIRE_COLLAPSE();
  process target;
  auto regions = start_target(target, {"--churn", windows_arg(16 * MiB, 2)});
  std::string dir = temp_dir(), metrics = dir + "/agent.prom", state = dir + "/agent.json", config = dir + "/agent.conf";
  std::ofstream(config) << "state-file = " << state << "\n";
  std::string pid = std::to_string(target.pid);
  std::vector<std::string> select = {"--pid", pid, "--min-rss", "0"};

  // No daemon yet: said, and today's observation pass instead (exit 0).
  std::vector<std::string> status = {"agent", "--status", "--config", config};
  status.insert(status.end(), select.begin(), select.end());
  auto r = test_support::hugify(status);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("no daemon state at " + state), std::string::npos) << r.out;

  process agent;
  std::vector<std::string> daemon = {"--config", config, "--interval", "0.3", "--cpu-budget", "100",
                                     "--metrics-file", metrics, "--heat", "none"}; // as agent_argv's
  daemon.insert(daemon.end(), select.begin(), select.end());
  daemon.insert(daemon.begin(), {HUGIFY_CLI_PATH, "agent"}); // its state file from the configuration file
  agent.start(daemon, dir + "/agent.err");
  ASSERT_GE(wait_passes(agent, metrics, 2), 2) << test_support::read_file(dir + "/agent.err");
  for (int round = 0; round < 4; round++) { // split what it collapsed, so the ledger has something to say
    kill(target.pid, SIGUSR2);
    ASSERT_FALSE(target.line("churned").empty());
    double at = metric(test_support::read_file(metrics), "hugify_agent_passes_total");
    ASSERT_GE(wait_passes(agent, metrics, at + 1), at + 1);
  }
  std::string written = test_support::read_file(state);
  EXPECT_NE(written.find("\"schema\": \"hugify.agent/1\""), std::string::npos) << written;
  EXPECT_NE(written.find("\"mode\": \"pass\""), std::string::npos) << written;

  // The state is fresh while the daemon runs (it is replaced every pass; a loaded machine may need a retry).
  std::vector<std::string> status_json = status;
  status_json.push_back("--json");
  test_support::json_view doc;
  for (int attempt = 0; attempt < 50; attempt++, usleep(100000)) {
    r = test_support::hugify(status_json);
    ASSERT_EQ(r.status, 0) << r.err;
    doc = test_support::parse_json(r.out);
    if (doc["daemon"]["fresh"].flag()) break;
  }
  ASSERT_TRUE(doc["daemon"]["fresh"].flag()) << r.out;
  EXPECT_EQ(doc["daemon"]["pid"].u64(), (uint64_t)agent.pid) << r.out;
  EXPECT_GE(doc["daemon"]["collapsed_bytes"].u64(), regions["churn"].size) << r.out;
  EXPECT_TRUE(doc["daemon"].has("pause")) << "the harm totals" << r.out;
  auto ledger = doc["processes"][0]["daemon"];
  ASSERT_TRUE(ledger.has("collapsed_bytes")) << r.out;
  EXPECT_GE(ledger["collapsed_bytes"].u64(), regions["churn"].size) << r.out;
  for (const char *key : {"huge_after_1_pass_fraction", "huge_after_10_passes_fraction", "recollapsed_bytes",
                          "backed_off", "backoff_passes_left", "advice"})
    EXPECT_TRUE(ledger.has(key)) << key << " in " << r.out;
  EXPECT_TRUE(test_support::is_number(ledger["huge_after_1_pass_fraction"])) << "judged after the churn" << r.out;
  EXPECT_EQ(ledger["allocator"].text(), "glibc") << r.out;

  for (int attempt = 0; attempt < 50; attempt++, usleep(100000)) {
    r = test_support::hugify(status);
    if (r.out.find("(daemon)") != std::string::npos) break;
  }
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char *words : {"daemon pid", "(daemon): collapsed", "a pass later", "re-collapsed", "allocator glibc"})
    EXPECT_NE(r.out.find(words), std::string::npos) << words << " in:\n" << r.out;

  // Stopped: the state says a daemon that is gone, and --status falls back to its own pass.
  EXPECT_EQ(agent.stop(SIGTERM), 0);
  r = test_support::hugify(status);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("is not running"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("(daemon)"), std::string::npos) << r.out;

  // Not the agent's state, or writable by others: refused with exit 2, never shown.
  std::string foreign = dir + "/foreign.json";
  std::ofstream(foreign) << "{\"schema\": \"hugify.inspect/1\"}\n";
  r = test_support::hugify({"agent", "--status", "--state-file", foreign, "--pid", pid, "--min-rss", "0"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("not the agent daemon's state"), std::string::npos) << r.err;
  ASSERT_EQ(chmod(state.c_str(), 0666), 0);
  r = test_support::hugify({"agent", "--status", "--state-file", state, "--pid", pid, "--min-rss", "0"});
  EXPECT_EQ(r.status, 2) << r.err;
  std::string link = dir + "/link.json";
  ASSERT_EQ(symlink(state.c_str(), link.c_str()), 0);
  r = test_support::hugify({"agent", "--status", "--state-file", link, "--pid", pid, "--min-rss", "0"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("symbolic link"), std::string::npos) << r.err;
}

}  // namespace
