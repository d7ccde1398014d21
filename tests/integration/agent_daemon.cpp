// SPDX-License-Identifier: MIT
// hugify agent as a daemon: a bad configuration, reloads on SIGHUP, missing privilege, and the systemd unit.
#include "agent_test.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

namespace {

using namespace agent_test;

TEST(Agent, BadConfigurationExitsTwoAndCollapsesNothing) {
  process target;
  auto regions = start_target(target, {"--dense", "8M"});
  std::string dir = temp_dir(), pid = std::to_string(target.pid);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"cpu-budget = lots\n", "cpu-budget"},
      {"pid = " + pid + "\nfrobnicate = 1\n", "unknown setting 'frobnicate'"},
      {"[elsewhere]\npid = " + pid + "\n", "unknown section"},
      {"pid = " + pid + "\nthis is not ini\n", ":2:"},
      {"min-present = 150\n", "min-present"},
      {"pdi = " + pid + "\n", "did you mean pid?"},               // the option table's suggestion
      {"status = true\n", "an option of the command line"},       // not a setting of the file
      {"once = perhaps\n", "expected true or false"},
  };
  for (auto &[text, message] : bad) {
    std::ofstream(dir + "/bad.conf") << text;
    auto r = test_support::hugify({"agent", "--once", "--config", dir + "/bad.conf", "--pid", pid, "--min-rss", "0"});
    EXPECT_EQ(r.status, 2) << text;
    EXPECT_NE(r.err.find(message), std::string::npos) << text << " -> " << r.err;
    EXPECT_NE(r.err.find("bad.conf"), std::string::npos) << r.err;
  }
  auto r = test_support::hugify({"agent", "--once", "--config", dir + "/missing.conf"});
  EXPECT_EQ(r.status, 2) << r.err;
  r = test_support::hugify({"agent", "--once", "--interval", "soon"});
  EXPECT_EQ(r.status, 2) << r.err;
  r = test_support::hugify({"agent", "--once", "--dry", "--pid", pid});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("did you mean --dry-run?"), std::string::npos) << r.err;
  r = test_support::hugify({"agent", "--once", "--pid", pid, pid});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("unexpected argument"), std::string::npos) << r.err;
  EXPECT_EQ(huge_bytes(target.pid, regions["dense"]), 0u);
}

TEST(Agent, ReloadsOnSighupAndKeepsGoingOnABadReload) {
  REQUIRE_COLLAPSE();
  process first, second;
  start_target(first, {"--dense", "8M"});
  auto regions = start_target(second, {"--dense", "8M"});
  std::string dir = temp_dir(), config = dir + "/agent.conf", metrics = dir + "/agent.prom";
  std::ofstream(config) << "# test\n[agent]\npid = " << first.pid << "\nmin_rss = 0\ninterval = 0.2\ncpu-budget = 100\n"
                        << "metrics-file = " << metrics << "\n";
  process agent;
  agent.start(agent_argv({"--config", config}), dir + "/agent.err");
  ASSERT_GE(wait_passes(agent, metrics, 2), 2) << test_support::read_file(dir + "/agent.err");
  EXPECT_EQ(huge_bytes(second.pid, regions["dense"]), 0u) << "not selected yet";
  std::ofstream(config) << "pid = " << second.pid << "\nmin-rss = 0\ninterval = 0.2\ncpu-budget = 100\n"
                        << "metrics-file = " << metrics << "\n";
  kill(agent.pid, SIGHUP);
  double passes = metric(test_support::read_file(metrics), "hugify_agent_passes_total");
  ASSERT_GE(wait_passes(agent, metrics, passes + 2), passes + 2);
  EXPECT_EQ(huge_bytes(second.pid, regions["dense"]), regions["dense"].size) << test_support::read_file(dir + "/agent.err");
  std::ofstream(config) << "interval = never\n";
  kill(agent.pid, SIGHUP);
  passes = metric(test_support::read_file(metrics), "hugify_agent_passes_total");
  ASSERT_GE(wait_passes(agent, metrics, passes + 2), passes + 2) << "still running on the old settings";
  EXPECT_EQ(agent.stop(SIGTERM), 0);
  std::string err = test_support::read_file(dir + "/agent.err");
  EXPECT_NE(err.find("configuration reloaded"), std::string::npos) << err;
  EXPECT_NE(err.find("reload failed"), std::string::npos) << err;
}

TEST(Agent, MissingCapSysNiceExitsThree) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop a capability with setpriv";
  if (test_support::run({"setpriv", "--version"}).status != 0) GTEST_SKIP() << "no setpriv (util-linux)";
  auto r = test_support::run({"setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice", "--", HUGIFY_CLI_PATH,
                              "agent", "--once", "--pid", std::to_string(getpid())});
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("CAP_SYS_NICE"), std::string::npos) << r.err;
  r = test_support::run({"setpriv", "--inh-caps=-sys_ptrace", "--bounding-set=-sys_ptrace", "--", HUGIFY_CLI_PATH,
                         "agent", "--status", "--comm", "init"});
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("CAP_SYS_PTRACE"), std::string::npos) << r.err;
}

TEST(Agent, SystemdUnitVerifies) {
  std::string unit = std::string(HUGIFY_BUILD_DIR) + "/hugify-agent.service";
  std::string text = test_support::read_file(unit);
  ASSERT_FALSE(text.empty()) << unit;
  EXPECT_NE(text.find("ProtectSystem=strict"), std::string::npos);
  EXPECT_NE(text.find("CapabilityBoundingSet=CAP_SYS_NICE CAP_SYS_PTRACE CAP_DAC_READ_SEARCH\n"), std::string::npos);
  if (test_support::run({"systemd-analyze", "--version"}).status != 0)
    REQUIRE_PREREQUISITE("systemd-analyze is not installed (Debian: systemd)");
  // verify resolves ExecStart= against the file system: point it at the built binary.
  std::string dir = temp_dir(), copy = dir + "/hugify-agent.service";
  std::string fixed = text;
  size_t at = fixed.find("ExecStart=");
  size_t end = fixed.find(' ', at);
  fixed.replace(at, end - at, std::string("ExecStart=") + HUGIFY_CLI_PATH);
  std::ofstream(copy) << fixed;
  auto r = test_support::run({"systemd-analyze", "verify", copy});
  std::string all = r.out + r.err;
  if (all.find("System has not been booted with systemd") != std::string::npos ||
      all.find("Failed to connect") != std::string::npos)
    GTEST_SKIP() << "systemd-analyze cannot run here: " << all;
  EXPECT_EQ(r.status, 0) << all;
  EXPECT_EQ(all.find("hugify-agent.service:"), std::string::npos) << all;
}

}  // namespace
