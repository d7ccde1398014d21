// SPDX-License-Identifier: MIT
// hugify agent's heat: DAMON's vaddr regions where the kernel has them, soft-dirty bits, or densest first
// when there is no signal, said; the agent leaves nothing of the monitoring running when it stops.
#include "agent_test.hpp"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <vector>

namespace {

using namespace agent_test;

// Issue 32 item 2: heat where the kernel gives it. DAMON (Debian 13's 6.12 in the kernel matrix's guest):
// one kdamond, one context whose targets are the selected processes, read once a pass; the agent names the
// signal per process and reports the monitoring's work, and leaves nothing of it running when it stops.

const std::string damon_admin = "/sys/kernel/mm/damon/admin/kdamonds";

std::string damon_kdamonds() { return test_support::read_file(damon_admin + "/nr_kdamonds"); }

TEST(AgentHeat, DamonMonitorsTheSelectedProcessesAndLeavesNothingRunning) {
  REQUIRE_COLLAPSE();
  REQUIRE_KERNEL_FEATURE("damon_vaddr");
  if (std::string held = test_support::damon_held_by_kernel(); !held.empty()) GTEST_SKIP() << held;
  std::string before = damon_kdamonds();
  process first, second;
  start_target(first, {"--dense", "8M"});
  start_target(second, {"--dense", "8M"});
  std::string dir = temp_dir(), metrics = dir + "/agent.prom", json = dir + "/agent.json";
  process agent;
  agent.start(agent_argv({"--pid", std::to_string(first.pid), "--pid", std::to_string(second.pid), "--min-rss", "0",
                          "--interval", "0.5", "--cpu-budget", "100", "--heat", "damon", "--metrics-file", metrics,
                          "--json=" + json}),
              dir + "/agent.err");
  double passes = wait_passes(agent, metrics, 3);
  std::string err = test_support::read_file(dir + "/agent.err");
  if (passes < 0 && !agent.alive() && err.find("another user") != std::string::npos)
    GTEST_SKIP() << "DAMON's kdamonds are in use here: " << err;
  ASSERT_GE(passes, 3) << err;
  std::string text = test_support::read_file(metrics);
  EXPECT_EQ(metric(text, "hugify_agent_heat_damon_targets"), 2) << text;
  EXPECT_GT(metric(text, "hugify_agent_heat_damon_regions"), 2) << text;
  EXPECT_GE(metric(text, "hugify_agent_heat_damon_reads_total"), 1) << text;
  EXPECT_EQ(metric(text, "hugify_agent_heat_processes", "signal=\"damon\""), 2) << text;
  std::string last = last_json_object(json);
  EXPECT_NE(last.find("\"signal\": \"damon\""), std::string::npos) << last;
  EXPECT_NE(last.find("\"heat\": \"damon\""), std::string::npos) << "per process" << last;
  // it collapsed both (hot or not: the budget lets it take everything)
  EXPECT_GE(metric(text, "hugify_agent_collapsed_bytes_total"), (double)(16 * MiB)) << text;
  // The kdamond is on, its context's targets are the two processes; the agent's exit leaves nothing.
  EXPECT_EQ(test_support::read_file(damon_admin + "/0/state").substr(0, 2), "on");
  EXPECT_EQ(agent.stop(SIGTERM), 0);
  EXPECT_EQ(damon_kdamonds(), before) << "nr_kdamonds put back";
  if (damon_kdamonds().substr(0, 1) != "0") {
    EXPECT_EQ(test_support::read_file(damon_admin + "/0/state").substr(0, 3), "off");
  }
}

// A kdamond another user set up is never taken: --heat damon exits 3 and says so, and theirs runs on.
TEST(AgentHeat, RefusesAKdamondAnotherUserRuns) {
  REQUIRE_COLLAPSE();
  REQUIRE_KERNEL_FEATURE("damon_vaddr");
  if (damon_kdamonds().substr(0, 1) != "0") GTEST_SKIP() << "a kdamond exists already: this test sets up its own";
  if (std::string held = test_support::damon_held_by_kernel(); !held.empty())
    GTEST_SKIP() << "the other user's kdamond could not run: " << held;
  process other;
  start_target(other, {"--dense", "4M"});
  auto write = [](const std::string &leaf, const std::string &value) {
    std::ofstream(damon_admin + leaf) << value << "\n";
  };
  write("/nr_kdamonds", "1");
  write("/0/contexts/nr_contexts", "1");
  write("/0/contexts/0/operations", "vaddr");
  write("/0/contexts/0/targets/nr_targets", "1");
  write("/0/contexts/0/targets/0/pid_target", std::to_string(other.pid));
  write("/0/state", "on");
  auto r = test_support::hugify({"agent", "--state-file", "none", "--pid", std::to_string(other.pid), "--min-rss",
                                 "0", "--heat", "damon", "--interval", "0.3"});
  std::string state = test_support::read_file(damon_admin + "/0/state");
  write("/0/state", "off");
  write("/nr_kdamonds", "0");
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("another user"), std::string::npos) << r.err;
  EXPECT_EQ(state.substr(0, 2), "on") << "the other user's kdamond runs on";
}

// DAMON users inside the kernel (DAMON_STAT, on by default in Debian's 7.2) hold DAMON: no kdamond of DAMON's
// sysfs can start while one runs. Writing N to its `enabled` parameter frees DAMON (seen on 7.2.12); this puts
// back Y at the end, also when an assertion fails.
class damon_modules_paused {
 public:
  damon_modules_paused() {
    for (const char *name : {"damon_stat", "damon_reclaim", "damon_lru_sort"}) {
      std::string path = std::string("/sys/module/") + name + "/parameters/enabled";
      if (test_support::read_file(path).substr(0, 1) != "Y") continue;
      std::ofstream(path) << "N\n";
      paused_.push_back(path);
    }
  }
  ~damon_modules_paused() {
    for (const auto &path : paused_) std::ofstream(path) << "Y\n";
  }

 private:
  std::vector<std::string> paused_;
};

// Another owner's kdamond (the test's, kdamond 0) running a DAMOS `collapse` scheme on `target`, matching no
// region (nr_accesses beyond any), so the kernel itself collapses nothing during the test. Taken down at the
// end: state off, no context, nr_kdamonds 0.
class others_collapse_scheme {
 public:
  explicit others_collapse_scheme(pid_t target) {
    write("/nr_kdamonds", "1");
    write("/0/contexts/nr_contexts", "1");
    write("/0/contexts/0/operations", "vaddr");
    write("/0/contexts/0/targets/nr_targets", "1");
    write("/0/contexts/0/targets/0/pid_target", std::to_string(target));
    write("/0/contexts/0/schemes/nr_schemes", "1");
    write("/0/contexts/0/schemes/0/action", "collapse");
    write("/0/contexts/0/schemes/0/access_pattern/nr_accesses/min", "4294967295");
    write("/0/contexts/0/schemes/0/access_pattern/nr_accesses/max", "4294967295");
    write("/0/state", "on");
  }
  ~others_collapse_scheme() {
    write("/0/state", "off");
    write("/0/contexts/nr_contexts", "0");
    write("/nr_kdamonds", "0");
  }
  bool running() const { return test_support::read_file(damon_admin + "/0/state").substr(0, 2) == "on"; }

 private:
  static void write(const std::string &leaf, const std::string &value) {
    std::ofstream(damon_admin + leaf) << value << "\n";
  }
};

// Issue 44: a process another owner's DAMOS collapse scheme targets is the kernel's. The agent leaves it on 4 KiB
// pages (its dense 8 MiB would be collapsed otherwise, as the other target's is), says why in its JSON (the cut
// "damos", with the scheme) and metrics, and counts what is huge there as made huge by the kernel.
TEST(AgentDamos, LeavesAProcessAnotherOwnersCollapseSchemeTargetsToTheKernel) {
  REQUIRE_COLLAPSE();
  REQUIRE_KERNEL_FEATURE("damon_vaddr");
  REQUIRE_KERNEL_FEATURE("damos_collapse");
  if (damon_kdamonds().substr(0, 1) != "0") GTEST_SKIP() << "a kdamond exists already: this test sets up its own";
  damon_modules_paused paused;
  process owned, free;
  auto regions = start_target(owned, {"--dense", "8M"});
  auto free_regions = start_target(free, {"--dense", "8M"});
  others_collapse_scheme scheme(owned.pid);
  ASSERT_TRUE(scheme.running()) << "the other owner's kdamond did not start: " << test_support::damon_held_by_kernel();
  std::string dir = temp_dir(), metrics = dir + "/agent.prom";
  auto once = [&] {
    auto r = test_support::hugify({"agent", "--once", "--json", "--state-file", "none", "--heat", "none", "--pid",
                                   std::to_string(owned.pid), "--pid", std::to_string(free.pid), "--min-rss", "0",
                                   "--metrics-file", metrics});
    EXPECT_EQ(r.status, 0) << r.err;
    return r;
  };
  auto r = once();
  auto doc = test_support::parse_json(r.out);
  EXPECT_EQ(huge_bytes(owned.pid, regions["dense"]), 0u) << "left to the kernel" << r.out;
  EXPECT_EQ(huge_bytes(free.pid, free_regions["dense"]), free_regions["dense"].size) << r.out;
  for (const auto &p : doc["processes"].items()) {
    if (p["pid"].u64() != static_cast<uint64_t>(owned.pid)) {
      EXPECT_TRUE(p["left_to_kernel"].is_null()) << r.out;
      continue;
    }
    EXPECT_EQ(p["left_to_kernel"]["cut"].text(), "damos") << r.out;
    EXPECT_EQ(p["left_to_kernel"]["action"].text(), "collapse");
    EXPECT_EQ(p["left_to_kernel"]["kdamond"].u64(), 0u);
    EXPECT_GE(p["left_to_kernel"]["cut_bytes"].u64(), regions["dense"].size) << "what it would have planned";
    EXPECT_EQ(p["collapsed_bytes"].u64(), 0u);
    EXPECT_NE(p["last_action"].text().find("left to the kernel: DAMOS collapse scheme"), std::string::npos) << r.out;
  }
  EXPECT_EQ(doc["kernel"]["damos_processes"].u64(), 1u) << r.out;
  std::string text = test_support::read_file(metrics);
  EXPECT_EQ(metric(text, "hugify_agent_damos_processes"), 1) << text;
  // What becomes huge there is the kernel's: here the test collapses it itself, standing in for the scheme.
  auto collapsed = test_support::hugify({"collapse", std::to_string(owned.pid)});
  ASSERT_EQ(collapsed.status, 0) << collapsed.err;
  uint64_t huge = test_support::smaps_field(owned.pid, 0, UINT64_MAX, "AnonHugePages");
  ASSERT_GE(huge, regions["dense"].size);
  doc = test_support::parse_json(once().out);
  EXPECT_GE(doc["kernel"]["damos_huge_bytes"].u64(), regions["dense"].size) << "its huge bytes, as inspect counts them";
  EXPECT_LE(doc["kernel"]["damos_huge_bytes"].u64(), huge + free_regions["dense"].size) << "its own only";
  EXPECT_EQ(metric(test_support::read_file(metrics), "hugify_agent_damos_huge_bytes"),
            (double)doc["kernel"]["damos_huge_bytes"].u64());
}

// A child that keeps its 16 MiB hot: every page written once on 4 KiB pages (THP madvise: nothing advised), then
// read over and over. Killed when destroyed.
class hot_child {
 public:
  hot_child() {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      size_t size = 16 * MiB;
      char *base = static_cast<char *>(mmap(nullptr, size + 2 * MiB, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      char *region = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(base) + 2 * MiB - 1) & ~(2 * MiB - 1));
      for (size_t at = 0; at < size; at += 4096) region[at] = 1;
      uintptr_t start = reinterpret_cast<uintptr_t>(region);
      if (write(fds[1], &start, sizeof start) != sizeof start) _exit(1);
      for (volatile unsigned long sum = 0;;)
        for (size_t at = 0; at < size; at += 4096) sum += static_cast<unsigned char>(region[at]);
    }
    close(fds[1]);
    if (read(fds[0], &start_, sizeof start_) != sizeof start_) start_ = 0;
    close(fds[0]);
  }
  ~hot_child() {
    if (pid_ > 0) kill(pid_, SIGKILL), waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  region memory() const { return {start_, 16 * MiB}; }

 private:
  pid_t pid_ = -1;
  uintptr_t start_ = 0;
};

// Issue 44: --first-touch adds a DAMOS `hugepage` scheme to the agent's own kdamond: regions of 2 MiB or more
// accessed at least as densely as the bloat guard (10 of DAMON's 20 samples at --min-present 50) are marked
// MADV_HUGEPAGE. A hot child's memory is marked (its VmFlags say hg), and the agent's exit leaves no scheme.
TEST(AgentFirstTouch, MarksHotMemoryWithAHugepageSchemeOfItsOwnAndLeavesNothing) {
  REQUIRE_COLLAPSE();
  REQUIRE_KERNEL_FEATURE("damon_vaddr");
  REQUIRE_KERNEL_FEATURE("damos_hugepage");
  if (damon_kdamonds().substr(0, 1) != "0") GTEST_SKIP() << "a kdamond exists already: the agent takes one only where none is";
  damon_modules_paused paused;
  hot_child child;
  ASSERT_NE(child.memory().start, 0u);
  std::string dir = temp_dir(), metrics = dir + "/agent.prom";
  process agent;
  agent.start(agent_argv({"--pid", std::to_string(child.pid()), "--min-rss", "0", "--interval", "0.5", "--cpu-budget",
                          "100", "--heat", "damon", "--first-touch", "--metrics-file", metrics}),
              dir + "/agent.err");
  ASSERT_GE(wait_passes(agent, metrics, 2), 2) << test_support::read_file(dir + "/agent.err");
  auto leaf = [](const std::string &path) {
    std::string text = test_support::read_file(damon_admin + "/0/contexts/0/schemes/" + path);
    return text.substr(0, text.find('\n'));
  };
  EXPECT_EQ(leaf("nr_schemes"), "2");
  EXPECT_EQ(leaf("1/action"), "hugepage");
  EXPECT_EQ(leaf("1/access_pattern/nr_accesses/min"), "10") << "the bloat guard's 50 % of 20 samples";
  EXPECT_EQ(leaf("1/access_pattern/sz/min"), std::to_string(2 * MiB));
  double applied = 0;
  for (double passes = 2; passes < 60 && applied <= 0 && agent.alive(); passes += 2) {
    wait_passes(agent, metrics, passes + 2);
    applied = metric(test_support::read_file(metrics), "hugify_agent_first_touch_applied_bytes_total");
  }
  EXPECT_GT(applied, 0) << test_support::read_file(metrics);
  std::string smaps = test_support::read_file("/proc/" + std::to_string(child.pid()) + "/smaps");
  EXPECT_NE(smaps.find(" hg"), std::string::npos) << "a region of it advised MADV_HUGEPAGE";
  EXPECT_EQ(agent.stop(SIGTERM), 0);
  EXPECT_EQ(damon_kdamonds().substr(0, 1), "0") << "the kdamond and its schemes removed";
}

// Soft-dirty (Debian's 6.1 and 6.12): written memory as the signal, the bits cleared after each plan. The
// clear write-protects every page, and the kernel collapses no window without a writable one: the memory
// nothing wrote since is left (cold), the memory the program writes is collapsed.
TEST(AgentHeat, SoftDirtyCollapsesWhatIsWrittenAndLeavesTheRest) {
  REQUIRE_COLLAPSE();
  REQUIRE_KERNEL_FEATURE("soft_dirty");
  process target;
  auto regions = start_target(target, {"--dense", "8M", "--step", "8M"});
  std::string dir = temp_dir(), metrics = dir + "/agent.prom";
  process agent;
  agent.start(agent_argv({"--pid", std::to_string(target.pid), "--min-rss", "0", "--interval", "0.3",
                          "--cpu-budget", "100", "--heat", "soft-dirty", "--metrics-file", metrics}),
              dir + "/agent.err");
  ASSERT_GE(wait_passes(agent, metrics, 2), 2) << test_support::read_file(dir + "/agent.err");
  kill(target.pid, SIGUSR1); // 8 MiB written now: soft-dirty, writable
  std::string grown = target.line("grown");
  ASSERT_FALSE(grown.empty());
  double at = metric(test_support::read_file(metrics), "hugify_agent_passes_total");
  ASSERT_GE(wait_passes(agent, metrics, at + 2), at + 2);
  std::string text = test_support::read_file(metrics);
  EXPECT_EQ(metric(text, "hugify_agent_heat_processes", "signal=\"soft-dirty\""), 1) << text;
  EXPECT_GE(metric(text, "hugify_agent_heat_soft_dirty_clears_total"), 2) << text;
  EXPECT_GE(metric(text, "hugify_agent_collapsed_bytes_total"), (double)(4 * MiB)) << "the written step" << text;
  EXPECT_EQ(huge_bytes(target.pid, regions["dense"]), 0u) << "written before the first clear, never since";
  EXPECT_EQ(agent.stop(SIGTERM), 0);
}

// Without a signal: densest first, and said; a signal asked for by name that the kernel lacks exits 3.
TEST(AgentHeat, WithoutASignalItSaysDensestFirst) {
  REQUIRE_COLLAPSE();
  process target;
  start_target(target, {"--dense", "4M"});
  auto r = test_support::hugify({"agent", "--once", "--json", "--pid", std::to_string(target.pid), "--min-rss", "0"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto doc = test_support::parse_json(r.out);
  EXPECT_EQ(doc["heat"]["signal"].text(), "none") << r.out;
  EXPECT_NE(doc["heat"]["reason"].text().find("densest first"), std::string::npos) << r.out;
  EXPECT_EQ(doc["processes"][0]["heat"].text(), "none") << r.out;
  for (const char *signal : {"damon", "soft-dirty"}) {
    std::string id = std::string(signal) == "damon" ? "damon_vaddr" : "soft_dirty";
    if (!test_support::missing_kernel_feature(id).empty()) {
      auto refused = test_support::hugify({"agent", "--state-file", "none", "--pid", std::to_string(target.pid),
                                           "--heat", signal});
      EXPECT_EQ(refused.status, 3) << refused.err;
      EXPECT_NE(refused.err.find(std::string("--heat ") + signal), std::string::npos) << refused.err;
    }
  }
  auto bad = test_support::hugify({"agent", "--once", "--heat", "warm", "--pid", std::to_string(target.pid)});
  EXPECT_EQ(bad.status, 2) << bad.err;
}

}  // namespace
