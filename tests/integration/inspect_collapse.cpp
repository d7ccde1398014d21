// SPDX-License-Identifier: MIT
// hugify inspect / hugify collapse / hugify_collapse() against real child processes (tests/helpers/
// collapse_target.c) holding memory of known kinds. Figures are checked against an independent smaps read.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hugify.h"
#include "test_support.hpp"

namespace {

constexpr uint64_t MiB = uint64_t{1} << 20;
constexpr uint64_t k2M = 2 * MiB;
constexpr uintptr_t kEverything = ~uintptr_t{0}; // smaps_field over the whole address space

// A running collapse_target: its regions by name, killed on destruction unless finished.
struct child {
  pid_t pid = -1;
  int out = -1;
  std::map<std::string, std::pair<uintptr_t, size_t>> regions;
  std::string error;

  child() = default;
  child(const child &) = delete;
  child &operator=(const child &) = delete;
  ~child() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (out >= 0) close(out);
  }
  uintptr_t at(const std::string &name) const { return regions.at(name).first; }
  size_t size(const std::string &name) const { return regions.at(name).second; }
  // SIGUSR1: the child checks its data and exits 0 (intact) or 1.
  int finish() {
    kill(pid, SIGUSR1);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

// Start collapse_target with args (optionally through `prefix`, e.g. setpriv) and wait for "ready".
void start(child &c, const std::vector<std::string> &args, const std::vector<std::string> &prefix = {}) {
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  std::vector<std::string> argv = prefix;
  argv.push_back(test_support::helper_path("collapse_target"));
  argv.insert(argv.end(), args.begin(), args.end());
  c.pid = fork();
  if (c.pid == 0) {
    dup2(pipe_fds[1], 1);
    std::vector<char *> raw;
    for (auto &a : argv) raw.push_back(const_cast<char *>(a.c_str()));
    raw.push_back(nullptr);
    execvp(raw[0], raw.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  c.out = pipe_fds[0];
  std::string text;
  char buf[4096];
  while (text.find("ready") == std::string::npos && text.find("unsupported") == std::string::npos) {
    ssize_t n = read(c.out, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  if (text.find("unsupported") != std::string::npos) { // a kernel feature the child needs is missing
    c.error = text;
    return;
  }
  ASSERT_NE(text.find("ready"), std::string::npos) << "collapse_target did not start: " << text;
  size_t line_start = 0;
  while (line_start < text.size()) {
    size_t end = text.find('\n', line_start);
    std::string line = text.substr(line_start, end - line_start);
    char name[32];
    unsigned long long address = 0, size = 0;
    if (sscanf(line.c_str(), "%31s 0x%llx %llu", name, &address, &size) == 3)
      c.regions[name] = {static_cast<uintptr_t>(address), static_cast<size_t>(size)};
    if (end == std::string::npos) break;
    line_start = end + 1;
  }
}

// The mapping [start, end) that holds address, from /proc/PID/maps (read here, not by libhugify).
std::pair<uintptr_t, uintptr_t> mapping_of(pid_t pid, uintptr_t address) {
  std::string maps = test_support::read_file("/proc/" + std::to_string(pid) + "/maps");
  size_t at = 0;
  while (at < maps.size()) {
    unsigned long long lo, hi;
    if (sscanf(maps.c_str() + at, "%llx-%llx", &lo, &hi) == 2 && address >= lo && address < hi) return {lo, hi};
    at = maps.find('\n', at);
    if (at == std::string::npos) break;
    at++;
  }
  return {0, 0};
}

// Share of a mapping's resident memory on THP, from an independent smaps read.
double thp_share(pid_t pid, uintptr_t address) {
  auto [lo, hi] = mapping_of(pid, address);
  uint64_t rss = test_support::smaps_field(pid, lo, hi - lo, "Rss");
  uint64_t thp = test_support::smaps_field(pid, lo, hi - lo, "AnonHugePages");
  return rss ? static_cast<double>(thp) / static_cast<double>(rss) : 0.0;
}

// The CLI's JSON, read with jansson; fails the test when it is not valid JSON.
test_support::json_view parse_json(const std::string &text) {
  std::string error;
  test_support::json_view doc = test_support::parse_json(text, &error);
  EXPECT_TRUE(doc.present()) << error << "\n" << text;
  return doc;
}
// The element of array `items` whose member `key` is the string `value` (empty view when none).
test_support::json_view find_item(const test_support::json_view &items, const std::string &key,
                                  const std::string &value) {
  for (const auto &item : items.items())
    if (item[key].text() == value) return item;
  return {};
}
std::string hex(uintptr_t value) {
  char text[32];
  snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}
bool have_setpriv() { return access("/usr/bin/setpriv", X_OK) == 0 || access("/bin/setpriv", X_OK) == 0; }
const std::vector<std::string> kAsNobody = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};

void expect_near(uint64_t actual, uint64_t expected, double tolerance, const char *what) {
  double diff = static_cast<double>(actual) - static_cast<double>(expected);
  EXPECT_LE(std::abs(diff), tolerance * static_cast<double>(expected)) << what << ": " << actual << " vs " << expected;
}

// ---- collapse ----------------------------------------------------------------------------------------

TEST(Collapse, PutsA4KHeapOnHugePagesWhileItIsWrittenAndLeavesNoHugePageAlone) {
  REQUIRE_KERNEL_FEATURE("madv_collapse");
  child c;
  start(c, {"--heap", "256M", "--writer", "--nohuge", "16M"});
  ASSERT_GT(c.pid, 0);
  EXPECT_LT(thp_share(c.pid, c.at("heap")), 0.05) << "the heap should start on 4 KiB pages";

  auto result = test_support::hugify({"collapse", std::to_string(c.pid), "--json"});
  EXPECT_EQ(result.status, 0) << result.out << result.err;
  auto doc = parse_json(result.out);
  EXPECT_EQ(doc["schema"].text(), "hugify.collapse/1");
  EXPECT_TRUE(doc["failures"].present() && doc["failures"].size() == 0) << result.out;

  double share = thp_share(c.pid, c.at("heap"));
  EXPECT_GE(share, 0.95) << "heap coverage after collapse (independent smaps read)";
  auto nohuge = mapping_of(c.pid, c.at("nohuge"));
  EXPECT_EQ(test_support::smaps_field(c.pid, nohuge.first, nohuge.second - nohuge.first, "AnonHugePages"), 0u);
  EXPECT_FALSE(find_item(doc["mappings"], "start", hex(nohuge.first)).present())
      << "the NOHUGEPAGE region must not be touched";
  EXPECT_EQ(find_item(doc["excluded"], "start", hex(nohuge.first))["reason"].text(), "nohugepage") << result.out;

  // The report's figures after are the smaps figures (the writer does not change residency).
  auto heap = mapping_of(c.pid, c.at("heap"));
  auto row = find_item(doc["mappings"], "start", hex(heap.first));
  ASSERT_TRUE(row.present()) << result.out;
  EXPECT_EQ(row["huge_after_bytes"].u64(),
            test_support::smaps_field(c.pid, heap.first, heap.second - heap.first, "AnonHugePages"));
  EXPECT_EQ(c.finish(), 0) << "the target's data (written during the collapse) must be intact";
}

TEST(Collapse, DryRunPlansButChangesNothing) {
  REQUIRE_KERNEL_FEATURE("madv_collapse");
  child c;
  start(c, {"--heap", "64M"});
  auto result = test_support::hugify({"collapse", std::to_string(c.pid), "--dry-run", "--json"});
  EXPECT_EQ(result.status, 0) << result.err;
  auto doc = parse_json(result.out);
  EXPECT_GE(doc.at("total.attempted_bytes").u64(), 60 * MiB) << result.out;
  EXPECT_TRUE(doc["calls"].present());
  EXPECT_EQ(doc["calls"].u64(), 0u);
  EXPECT_TRUE(doc.at("total.huge_after_fraction").is_null()) << "a dry run measures nothing after";
  EXPECT_LT(thp_share(c.pid, c.at("heap")), 0.05);
  EXPECT_EQ(c.finish(), 0);
}

TEST(Collapse, TextReportAndMinSize) {
  REQUIRE_KERNEL_FEATURE("madv_collapse");
  child c;
  start(c, {"--heap", "32M", "--small", "8M"});
  auto result = test_support::hugify({"collapse", std::to_string(c.pid), "--min-size", "16M"});
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("0 B failed"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("after:"), std::string::npos) << result.out;
  EXPECT_GE(thp_share(c.pid, c.at("heap")), 0.9);
  EXPECT_LT(thp_share(c.pid, c.at("small")), 0.05) << "below --min-size: left alone";
  EXPECT_EQ(c.finish(), 0);
}

TEST(Collapse, OwnMemoryThroughTheLibrary) {
  REQUIRE_KERNEL_FEATURE("madv_collapse");
  size_t size = 32 * MiB;
  // 2 MiB-aligned, filled on 4 KiB pages (THP off for the process while filling).
  char *raw = static_cast<char *>(mmap(nullptr, size + k2M, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(raw, MAP_FAILED);
  char *p = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(raw) + k2M - 1) & ~(k2M - 1));
  if (p > raw) munmap(raw, static_cast<size_t>(p - raw));
  munmap(p + size, static_cast<size_t>(raw + k2M - p));
  prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
  for (size_t i = 0; i < size; i += 4096) p[i] = static_cast<char>(i >> 12);
  prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
  EXPECT_EQ(test_support::smaps_field(0, reinterpret_cast<uintptr_t>(p), size, "AnonHugePages"), 0u);

  hugify_collapse_report report{};
  ASSERT_EQ(hugify_collapse(0, nullptr, &report), 0) << report.reason;
  EXPECT_EQ(report.self, 1);
  EXPECT_EQ(report.pid, getpid());
  EXPECT_GE(report.attempted, size);
  EXPECT_EQ(report.failure_count, 0u) << (report.failure_count ? report.failures[0].reason : "");
  // The whole mapping holding the block (the kernel may have merged it with a neighbour: no prorating).
  auto mapping = mapping_of(getpid(), reinterpret_cast<uintptr_t>(p));
  EXPECT_GE(test_support::smaps_field(0, mapping.first, mapping.second - mapping.first, "AnonHugePages"), size);
  for (size_t i = 0; i < size; i += 4096) ASSERT_EQ(p[i], static_cast<char>(i >> 12)) << "offset " << i;
  hugify_collapse_report_free(&report);
  munmap(p, size);
}

TEST(Collapse, TargetThatExitsMidwayGivesAPartialReport) {
  REQUIRE_KERNEL_FEATURE("madv_collapse");
  child c;
  start(c, {"--heap", "64M"});
  struct kill_after_first_call {
    pid_t *pid;
    static void callback(void *context, uint64_t, uint64_t) {
      pid_t *pid = static_cast<kill_after_first_call *>(context)->pid;
      if (*pid <= 0) return;
      kill(*pid, SIGKILL);
      waitpid(*pid, nullptr, 0);
      *pid = -1;
    }
  } killer{&c.pid};
  hugify_collapse_opts opts{};
  opts.chunk_size = k2M; // one window per call: many calls, and the child dies after the first
  opts.progress = kill_after_first_call::callback;
  opts.progress_context = &killer;
  hugify_collapse_report report{};
  pid_t target = c.pid;
  ASSERT_EQ(hugify_collapse(target, &opts, &report), 0) << report.reason;
  EXPECT_EQ(report.exited, 1);
  EXPECT_EQ(report.calls, 2u) << "one call done, the next one finds the process gone";
  EXPECT_NE(std::string(report.reason).find("exited"), std::string::npos) << report.reason;
  hugify_collapse_report_free(&report);
}

// The structs' sizes as released in 0.3: the pace and the pause took reserved room, so a program built
// against 0.3 keeps working with this library (no soname bump).
static_assert(sizeof(hugify_collapse_opts) == 72, "hugify_collapse_opts must keep its 0.3 size");
static_assert(sizeof(hugify_collapse_report) == 880, "hugify_collapse_report must keep its 0.3 size");
static_assert(offsetof(hugify_collapse_report, bloat_bytes) == 808, "the fields before the pause stay put");
static_assert(sizeof(hugify_inspect_report) == 1600, "hugify_inspect_report must keep its 0.3 size");
static_assert(offsetof(hugify_inspect_report, reserved) == 1568, "the fields before reserved stay put");
static_assert(offsetof(hugify_inspect_report, allocator) == 1568 + 2 * sizeof(uint64_t) &&
                  sizeof(hugify_inspect_report::allocator) == 2 * sizeof(uint64_t),
              "allocator takes exactly the room of reserved[2] and reserved[3]");

// The harm ledger's pause figures hold together (never a timing: only how they relate).
void expect_consistent_pause(const hugify_collapse_report &r) {
  EXPECT_GE(r.longest_pause, r.p99_pause);
  EXPECT_GE(r.p99_pause, 0.0);
  EXPECT_GE(r.total_pause, r.longest_pause);
  EXPECT_LE(r.pause_count, r.calls);
  EXPECT_LE(r.total_pause, r.seconds + 1e-6) << "a call's pause is at most its span";
  if (r.pause_count == 0) {
    EXPECT_EQ(r.longest_pause, 0.0);
  }
}

TEST(Collapse, GentlePaceSendsOneWindowPerCallAndReportsThePause) {
  REQUIRE_KERNEL_FEATURE("madv_collapse");
  child gentle, full;
  start(gentle, {"--heap", "64M", "--writer"});
  start(full, {"--heap", "64M", "--writer"});
  ASSERT_GT(gentle.pid, 0);
  ASSERT_GT(full.pid, 0);

  hugify_collapse_report report{};
  ASSERT_EQ(hugify_collapse(gentle.pid, nullptr, &report), 0) << report.reason;
  EXPECT_EQ(report.pace, static_cast<uint32_t>(HUGIFY_COLLAPSE_PACE_GENTLE)) << "gentle is the default";
  EXPECT_EQ(report.chunk_size, k2M);
  ASSERT_EQ(report.failure_count, 0u) << report.failures[0].reason;
  ASSERT_GE(report.attempted, 30 * k2M);
  EXPECT_EQ(report.calls, report.attempted / k2M) << "one call per window, none repeated";
  EXPECT_GT(report.gap_seconds, 0.0) << "a rest after each call but the last";
  expect_consistent_pause(report);
  unsigned gentle_calls = report.calls;
  hugify_collapse_report_free(&report);

  hugify_collapse_opts opts{};
  opts.pace = HUGIFY_COLLAPSE_PACE_FULL;
  ASSERT_EQ(hugify_collapse(full.pid, &opts, &report), 0) << report.reason;
  EXPECT_EQ(report.pace, static_cast<uint32_t>(HUGIFY_COLLAPSE_PACE_FULL));
  EXPECT_LT(report.calls, gentle_calls) << "full speed: 64 MiB calls";
  EXPECT_EQ(report.gap_seconds, 0.0);
  expect_consistent_pause(report);
  hugify_collapse_report_free(&report);
  EXPECT_GE(thp_share(gentle.pid, gentle.at("heap")), 0.95);
  EXPECT_GE(thp_share(full.pid, full.at("heap")), 0.95);
  EXPECT_EQ(gentle.finish(), 0);
  EXPECT_EQ(full.finish(), 0);

  opts.pace = 7;
  EXPECT_EQ(hugify_collapse(getpid(), &opts, &report), -EINVAL) << "an unknown pace is refused";
  hugify_collapse_report_free(&report);
}

TEST(Collapse, JsonAndTextStateTheHarm) {
  REQUIRE_KERNEL_FEATURE("madv_collapse");
  child c;
  start(c, {"--heap", "32M", "--writer"});
  ASSERT_GT(c.pid, 0);
  auto result = test_support::hugify({"collapse", std::to_string(c.pid), "--json"});
  ASSERT_EQ(result.status, 0) << result.out << result.err;
  auto doc = parse_json(result.out);
  EXPECT_EQ(doc["pace"].text(), "gentle");
  EXPECT_TRUE(doc["gap_seconds"].present()) << result.out;
  auto pause = doc["pause"];
  ASSERT_TRUE(pause.present()) << result.out;
  EXPECT_TRUE(pause["measured"].flag());
  EXPECT_LE(pause["count"].u64(), doc["calls"].u64());
  EXPECT_GE(pause["longest_seconds"].number(), pause["p99_seconds"].number());
  EXPECT_GE(pause["p99_seconds"].number(), 0.0);
  EXPECT_GE(pause["total_seconds"].number(), pause["longest_seconds"].number());
  EXPECT_TRUE(doc.at("total.bloat_bytes").present());
  EXPECT_TRUE(doc["cpu_seconds"].present());
  EXPECT_EQ(c.finish(), 0);

  child d;
  start(d, {"--heap", "32M"});
  result = test_support::hugify({"collapse", std::to_string(d.pid), "--pace", "full"});
  ASSERT_EQ(result.status, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("pace:   in chunks of 64 MiB"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("cost:"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("(bloat)"), std::string::npos) << result.out;
  EXPECT_EQ(d.finish(), 0);

  // --chunk is the call size of full speed: with it the pace is full; with --pace gentle it is a usage error
  child e;
  start(e, {"--heap", "16M"});
  result = test_support::hugify({"collapse", std::to_string(e.pid), "--chunk", "4M", "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(parse_json(result.out)["pace"].text(), "full");
  EXPECT_EQ(parse_json(result.out)["chunk_bytes"].u64(), 4 * MiB);
  EXPECT_EQ(test_support::hugify({"collapse", std::to_string(e.pid), "--pace", "gentle", "--chunk", "4M"}).status, 2);
  EXPECT_EQ(test_support::hugify({"collapse", std::to_string(e.pid), "--pace", "slow"}).status, 2);
  EXPECT_EQ(e.finish(), 0);
}

// Where the kernel lacks MADV_COLLAPSE (5.10) or THP (6.1-rt), collapse and agent exit 3 naming what is
// missing, the version that has it or that THP is not built in, and the fix. Runs in scripts/kernels' guests.
TEST(Collapse, MissingKernelFeatureExits3NamingIt) {
  std::string missing = test_support::missing_kernel_feature("madv_collapse");
  if (missing.empty()) GTEST_SKIP() << "MADV_COLLAPSE is here: there is nothing to refuse";
  bool no_thp = access("/sys/kernel/mm/transparent_hugepage", F_OK) != 0;
  child c;
  start(c, {});
  for (const std::vector<std::string> &args : std::vector<std::vector<std::string>>{
           {"collapse", std::to_string(c.pid)}, {"agent", "--once", "--state-file", "none"}}) {
    auto result = test_support::hugify(args);
    SCOPED_TRACE(args[0]);
    EXPECT_EQ(result.status, 3) << result.err;
    EXPECT_NE(result.err.find("fix:"), std::string::npos) << result.err;
    if (no_thp) {
      EXPECT_NE(result.err.find("THP is not built into this kernel (CONFIG_TRANSPARENT_HUGEPAGE)"), std::string::npos)
          << result.err;
      EXPECT_NE(result.err.find("hugify run --heap hugetlb"), std::string::npos) << result.err;
      EXPECT_EQ(result.err.find("needs Linux"), std::string::npos) << result.err;
    } else {
      EXPECT_NE(result.err.find("MADV_COLLAPSE needs Linux 6.1"), std::string::npos) << result.err;
    }
  }
  // inspect works there; without THP it blames no prctl (such a kernel shows THP_enabled: 0 for all)
  auto inspect = test_support::hugify({"inspect", std::to_string(c.pid)});
  EXPECT_EQ(inspect.status, 0) << inspect.err;
  if (no_thp) {
    EXPECT_EQ(inspect.out.find("PR_SET_THP_DISABLE"), std::string::npos) << inspect.out;
    EXPECT_NE(inspect.out.find("THP is not built into this kernel"), std::string::npos) << inspect.out;
  }
}

TEST(Collapse, NoSuchProcess) {
  child c;
  start(c, {});
  pid_t gone = c.pid;
  kill(c.pid, SIGKILL);
  waitpid(c.pid, nullptr, 0);
  c.pid = -1;
  auto result = test_support::hugify({"collapse", std::to_string(gone)});
  EXPECT_EQ(result.status, 1);
  EXPECT_NE(result.err.find("no process " + std::to_string(gone)), std::string::npos) << result.err;
  hugify_collapse_report report{};
  EXPECT_EQ(hugify_collapse(gone, nullptr, &report), -ESRCH);
  hugify_collapse_report_free(&report);
}

TEST(Collapse, WithoutPermissionExits3NamingTheProcess) {
  if (!have_setpriv()) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run the CLI as another user";
  child c; // root-owned
  start(c, {"--heap", "8M"});
  std::vector<std::string> argv = kAsNobody;
  argv.insert(argv.end(), {HUGIFY_CLI_PATH, "collapse", std::to_string(c.pid)});
  auto result = test_support::run(argv);
  EXPECT_EQ(result.status, 3) << result.out << result.err;
  EXPECT_NE(result.err.find("process " + std::to_string(c.pid)), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("ptrace"), std::string::npos) << result.err;
}

// Root without CAP_DAC_READ_SEARCH over another user's process: its pagemap (mode 0400 of that user) cannot
// be opened, so no window's presence is known and none is tried: exit 3 naming the capability, not CAP_SYS_NICE.
TEST(Collapse, WithoutCapDacReadSearchExits3NamingIt) {
  if (!have_setpriv()) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop capabilities and run a process as another user";
  child c;
  start(c, {"--heap", "8M"}, kAsNobody);
  auto result = test_support::run({"setpriv", "--inh-caps=-dac_read_search,-dac_override",
                                   "--bounding-set=-dac_read_search,-dac_override", "--", HUGIFY_CLI_PATH,
                                   "collapse", std::to_string(c.pid)});
  EXPECT_EQ(result.status, 3) << result.out << result.err;
  EXPECT_NE(result.err.find("pagemap"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("CAP_DAC_READ_SEARCH"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("CAP_SYS_NICE"), std::string::npos) << result.err;
}

TEST(Collapse, SameUserWithoutCapSysNiceExits3) {
  if (!have_setpriv()) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run processes as another user";
  child c;
  start(c, {"--heap", "8M"}, kAsNobody); // the target runs as nobody too
  std::vector<std::string> argv = kAsNobody;
  argv.insert(argv.end(), {HUGIFY_CLI_PATH, "collapse", std::to_string(c.pid)});
  auto result = test_support::run(argv);
  EXPECT_EQ(result.status, 3) << result.out << result.err;
  EXPECT_NE(result.err.find("CAP_SYS_NICE"), std::string::npos) << result.err;
  // A dry run needs only read access: it plans.
  argv.push_back("--dry-run");
  result = test_support::run(argv);
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("would collapse"), std::string::npos) << result.out;
}

TEST(Collapse, ProcessWithThpDisabledIsLeftAloneAndInspectSaysWhy) {
  REQUIRE_KERNEL_FEATURE("madv_collapse");
  child c;
  start(c, {"--heap", "16M", "--thp-disable"});
  auto result = test_support::hugify({"collapse", std::to_string(c.pid), "--json"});
  // Nothing tried: everything eligible was excluded by the program, which is exit 1 (fell short).
  EXPECT_EQ(result.status, 1) << result.out << result.err;
  auto doc = parse_json(result.out);
  EXPECT_TRUE(doc["thp_disabled"].flag()) << result.out;
  EXPECT_EQ(doc["thp_stance"].text(), "disabled") << result.out;
  EXPECT_EQ(doc["failures"].size(), 0u) << result.out;
  EXPECT_EQ(doc.at("total.attempted_bytes").u64(), 0u) << result.out;
  // The exclusion that holds the heap region (a sanitized build has many more mappings, all excluded too).
  test_support::json_view heap;
  for (const auto &item : doc["excluded"].items())
    if (std::stoull(item["start"].text(), nullptr, 16) <= c.at("heap") && c.at("heap") < std::stoull(item["end"].text(), nullptr, 16))
      heap = item;
  ASSERT_TRUE(heap.present()) << result.out;
  EXPECT_EQ(heap["reason"].text(), "thp_disabled") << result.out;
  EXPECT_GE(heap["resident_bytes"].u64(), 16 * MiB);
  EXPECT_NE(result.out.find("PR_SET_THP_DISABLE"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("excluded"), std::string::npos) << result.err;
  EXPECT_LT(thp_share(c.pid, c.at("heap")), 0.05);

  auto inspect = test_support::hugify({"inspect", std::to_string(c.pid), "--json"});
  EXPECT_EQ(inspect.status, 0) << inspect.err;
  auto process = parse_json(inspect.out)["processes"][0];
  EXPECT_TRUE(process["thp_disabled"].flag()) << inspect.out;
  EXPECT_EQ(process["thp_stance"].text(), "disabled") << inspect.out;
  EXPECT_GE(process.at("not_huge_bytes.thp_disabled").u64(), 16 * MiB);
  EXPECT_EQ(c.finish(), 0);
}

// ---- inspect -----------------------------------------------------------------------------------------

TEST(Inspect, EachClassWithin1PercentAndTotalsEqualSmaps) {
  REQUIRE_KERNEL_FEATURE("thp");
  std::string why = test_support::ensure_free_hugetlb(k2M, 4);
  if (!why.empty()) GTEST_SKIP() << why;
  child c;
  start(c, {"--thp", "32M", "--hugetlb", "8M", "--small", "64M", "--shm", "4M", "--threads", "3"});
  ASSERT_GT(c.pid, 0);
  ASSERT_GE(test_support::smaps_field(c.pid, c.at("thp"), c.size("thp"), "AnonHugePages"), 32 * MiB)
      << "the THP region did not get huge pages";

  auto result = test_support::hugify({"inspect", std::to_string(c.pid), "--json", "--maps"});
  ASSERT_EQ(result.status, 0) << result.err;
  const std::string &json = result.out;
  auto doc = parse_json(json);
  EXPECT_EQ(doc["schema"].text(), "hugify.inspect/1");
  auto process = doc["processes"][0];

  // Totals equal an independent read of the whole smaps.
  auto total = process["total"];
  ASSERT_TRUE(total.present()) << json;
  uint64_t rss = test_support::smaps_field(c.pid, 0, kEverything, "Rss");
  uint64_t hugetlb = test_support::smaps_field(c.pid, 0, kEverything, "Private_Hugetlb") +
                     test_support::smaps_field(c.pid, 0, kEverything, "Shared_Hugetlb");
  uint64_t thp = test_support::smaps_field(c.pid, 0, kEverything, "AnonHugePages") +
                 test_support::smaps_field(c.pid, 0, kEverything, "ShmemPmdMapped") +
                 test_support::smaps_field(c.pid, 0, kEverything, "FilePmdMapped");
  EXPECT_EQ(total["resident_bytes"].u64(), rss + hugetlb);
  EXPECT_EQ(total["thp_bytes"].u64(), thp);
  EXPECT_EQ(total["hugetlb_2m_bytes"].u64(), hugetlb);
  EXPECT_EQ(total["anonymous_bytes"].u64(), test_support::smaps_field(c.pid, 0, kEverything, "Anonymous"));

  // Each class within 1 % of what the child holds.
  auto classes = process["classes"];
  auto anon = classes["anon"];
  ASSERT_TRUE(anon.present()) << json;
  expect_near(anon["thp_bytes"].u64(), 32 * MiB, 0.01, "anon THP");
  EXPECT_EQ(anon["hugetlb_2m_bytes"].u64(), 8 * MiB) << "anon hugetlb 2M";
#if defined(__SANITIZE_ADDRESS__)
  // A sanitized helper also holds the sanitizer runtime's own anonymous memory (a few MiB on 4 KiB pages).
  EXPECT_GE(anon["base_bytes"].u64(), 64 * MiB);
  EXPECT_LE(anon["base_bytes"].u64(), 64 * MiB + 16 * MiB);
#else
  expect_near(anon["base_bytes"].u64(), 64 * MiB, 0.01, "anon 4K");
#endif
  auto shm = classes["shm"];
  expect_near(shm["resident_bytes"].u64(), 4 * MiB, 0.01, "shm");
  EXPECT_EQ(shm["huge_bytes"].u64(), 0u);
  EXPECT_GT(classes.at("stack.resident_bytes").u64(), 0u);
  EXPECT_GE(process.at("thread_stacks.by_stack_pointer").u64(), 3u) << "three threads blocked in pause()";
  EXPECT_GT(classes.at("code.resident_bytes").u64(), 0u);
  EXPECT_TRUE(find_item(process["objects"], "path", test_support::helper_path("collapse_target")).present())
      << "code per object";
  EXPECT_NE(json.find("libc.so"), std::string::npos);

  // The 4K region's own row, and why it is not huge.
  auto small = find_item(process["mappings"], "start", hex(c.at("small")));
  ASSERT_TRUE(small.present()) << json;
  EXPECT_EQ(small.at("usage.base_bytes").u64(),
            test_support::smaps_field(c.pid, c.at("small"), c.size("small"), "Rss"));
  if (test_support::thp_mode() == "madvise") {
    EXPECT_EQ(small["why_not_huge"].text(), "not_advised");
  }
  EXPECT_GE(process["collapsible_bytes"].u64(), 64 * MiB);
  EXPECT_EQ(c.finish(), 0);
}

TEST(Inspect, TextOutputNamesClassesAndReasons) {
  child c;
  start(c, {"--small", "8M", "--nohuge", "8M", "--threads", "1"});
  auto result = test_support::hugify({"inspect", std::to_string(c.pid), "--maps"});
  ASSERT_EQ(result.status, 0) << result.err;
  for (const char *word : {"heap", "anon", "stack", "code of", "nohugepage", "why not huge", "libc.so"})
    EXPECT_NE(result.out.find(word), std::string::npos) << word << " in:\n" << result.out;
  EXPECT_EQ(c.finish(), 0);
}

// The allocator from the libraries a process maps: jemalloc when preloaded (malloc resolves to it), glibc's
// otherwise; in the JSON, the text, and the library's report.
TEST(Inspect, NamesTheAllocatorFromTheMappedLibraries) {
  child plain;
  start(plain, {"--small", "8M"});
  ASSERT_GT(plain.pid, 0);
  auto result = test_support::hugify({"inspect", std::to_string(plain.pid), "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(parse_json(result.out)["processes"][0]["allocator"].text(), "glibc") << result.out;
  hugify_inspect_report report{};
  ASSERT_EQ(hugify_inspect(plain.pid, &report), 0) << report.reason;
  EXPECT_STREQ(report.allocator, "glibc");
  hugify_inspect_report_free(&report);
  EXPECT_EQ(plain.finish(), 0);

  std::string jemalloc;
  for (const char *dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"})
    if (jemalloc.empty() && access((std::string(dir) + "/libjemalloc.so.2").c_str(), R_OK) == 0)
      jemalloc = std::string(dir) + "/libjemalloc.so.2";
  if (jemalloc.empty()) GTEST_SKIP() << "libjemalloc.so.2 is not installed (apt-get install libjemalloc2)";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The helper is built with the sanitizer, whose runtime must own malloc: a preloaded jemalloc crashes it
  // (the unsanitized suite covers this part).
  GTEST_SKIP() << "a sanitized helper cannot run with jemalloc preloaded (its runtime owns malloc)";
#endif
  child preloaded;
  start(preloaded, {"--small", "8M"}, {"env", "LD_PRELOAD=" + jemalloc});
  ASSERT_GT(preloaded.pid, 0);
  result = test_support::hugify({"inspect", std::to_string(preloaded.pid), "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  auto process = parse_json(result.out)["processes"][0];
  EXPECT_EQ(process["allocator"].text(), "jemalloc") << result.out;
  EXPECT_TRUE(process["allocator_advice"].present()) << "the key is always there (null when nothing is split)";
  result = test_support::hugify({"inspect", std::to_string(preloaded.pid)});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("allocator: jemalloc"), std::string::npos) << result.out;
  EXPECT_EQ(preloaded.finish(), 0);
}

TEST(Inspect, WithoutPermissionExits3NamingTheProcess) {
  if (!have_setpriv()) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run the CLI as another user";
  child c;
  start(c, {});
  std::vector<std::string> argv = kAsNobody;
  argv.insert(argv.end(), {HUGIFY_CLI_PATH, "inspect", std::to_string(c.pid)});
  auto result = test_support::run(argv);
  EXPECT_EQ(result.status, 3) << result.out << result.err;
  EXPECT_NE(result.err.find("process " + std::to_string(c.pid)), std::string::npos) << result.err;
}

TEST(Inspect, AllRanksByAnonymousMemoryNotOnHugePages) {
  child c;
  start(c, {"--small", "96M"});
  auto result = test_support::hugify({"inspect", "--all", "--top", "0", "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  auto doc = parse_json(result.out);
  bool found = false;
  uint64_t previous = UINT64_MAX;
  for (const auto &row : doc["ranking"].items()) {
    uint64_t value = row["anon_not_huge_bytes"].u64();
    EXPECT_LE(value, previous) << "descending order";
    previous = value;
    if (row["pid"].u64() != static_cast<uint64_t>(c.pid)) continue;
    found = true;
    EXPECT_GE(value, 96 * MiB);
  }
  EXPECT_TRUE(found) << result.out;
  EXPECT_EQ(c.finish(), 0);
}

TEST(Inspect, NoSuchProcessAndBadUsage) {
  EXPECT_EQ(test_support::hugify({"inspect", "2147483000"}).status, 1);
  EXPECT_EQ(test_support::hugify({"inspect"}).status, 2);
  EXPECT_EQ(test_support::hugify({"inspect", "abc"}).status, 2);
  EXPECT_EQ(test_support::hugify({"collapse"}).status, 2);
  EXPECT_EQ(test_support::hugify({"collapse", "1", "--chunk", "1M"}).status, 2);
  auto help = test_support::hugify({"help", "collapse"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("Examples:"), std::string::npos);
}


// ---- what a program excluded from THP ----------------------------------------------------------------
// Each exclusion, under THP "always" and "madvise", through `hugify collapse` and `hugify agent --once`:
// what the program excluded stays on 4 KiB pages, the rest is collapsed. THP `enabled` is changed only for
// one run (other experiments share the machine) and put back also when the test fails (thp_setting).

enum class tool { collapse, agent };

struct opt_out_run {
  child c;
  test_support::command_result inspect, result;
  std::string skip; // why it could not run here
  uint64_t huge(const std::string &region) const {
    return test_support::smaps_field(c.pid, c.at(region), c.size(region), "AnonHugePages");
  }
};

// Under THP `mode`: start collapse_target with target_args, inspect it, then run the tool on it.
void run_under(const std::string &mode, const std::vector<std::string> &target_args, tool t, opt_out_run &run,
               const std::vector<std::string> &extra = {}) {
  if (geteuid() != 0) { run.skip = "needs root (THP settings, process_madvise)"; return; }
  run.skip = test_support::missing_kernel_feature("madv_collapse");
  if (!run.skip.empty()) return;
  test_support::thp_setting setting("enabled", mode);
  if (!setting.skip_reason().empty()) { run.skip = setting.skip_reason(); return; }
  start(run.c, target_args);
  if (!run.c.error.empty()) { run.skip = "the kernel lacks PR_THP_DISABLE_EXCEPT_ADVISED (Linux 6.18): " + run.c.error; return; }
  run.inspect = test_support::hugify({"inspect", std::to_string(run.c.pid), "--maps", "--json"});
  std::vector<std::string> argv;
  if (t == tool::collapse) argv = {"collapse", std::to_string(run.c.pid), "--json"};
  else argv = {"agent", "--once", "--pid", std::to_string(run.c.pid), "--min-rss", "0", "--json"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  run.result = test_support::hugify(argv);
}

const std::vector<std::string> kDisabled = {"--small", "8M", "--thp-disable"};
const std::vector<std::string> kExceptAdvised = {"--small", "8M", "--advised", "8M", "--except-advised"};
const std::vector<std::string> kNoHugepage = {"--small", "8M", "--nohuge", "8M"};

// The exclusion `collapse --json` lists for the mapping at `start`, with its reason.
void expect_excluded(const opt_out_run &run, uintptr_t start, const std::string &reason, bool overridden = false) {
  auto doc = parse_json(run.result.out);
  auto item = find_item(doc["excluded"], "start", hex(start));
  ASSERT_TRUE(item.present()) << run.result.out;
  EXPECT_EQ(item["reason"].text(), reason) << run.result.out;
  EXPECT_EQ(item["overridden"].flag(), overridden) << run.result.out;
}

void whole_process_disable(const std::string &mode) {
  for (tool t : {tool::collapse, tool::agent}) {
    opt_out_run run;
    run_under(mode, kDisabled, t, run);
    if (!run.skip.empty()) GTEST_SKIP() << run.skip;
    EXPECT_EQ(run.huge("small"), 0u) << run.result.out << run.result.err;
    EXPECT_EQ(parse_json(run.inspect.out)["processes"][0]["thp_stance"].text(), "disabled") << run.inspect.out;
    if (t == tool::collapse) {
      EXPECT_EQ(run.result.status, 1) << "everything eligible was excluded: " << run.result.err;
      expect_excluded(run, run.c.at("small"), "thp_disabled");
    } else {
      EXPECT_EQ(run.result.status, 0) << run.result.err;
    }
    EXPECT_EQ(run.c.finish(), 0);
  }
}
TEST(OptOut, WholeProcessDisableUnderAlways) { whole_process_disable("always"); }
TEST(OptOut, WholeProcessDisableUnderMadvise) { whole_process_disable("madvise"); }

void no_hugepage(const std::string &mode) {
  for (tool t : {tool::collapse, tool::agent}) {
    opt_out_run run;
    run_under(mode, kNoHugepage, t, run);
    if (!run.skip.empty()) GTEST_SKIP() << run.skip;
    EXPECT_EQ(run.result.status, 0) << run.result.out << run.result.err;
    EXPECT_EQ(run.huge("nohuge"), 0u) << run.result.out;
    EXPECT_EQ(run.huge("small"), run.c.size("small")) << "the rest is collapsed: " << run.result.out;
    if (t == tool::collapse) {
      expect_excluded(run, run.c.at("nohuge"), "nohugepage");
      // Again: what can be huge already is, so the exclusion is not why nothing was done (exit 0, said so)
      auto again = test_support::hugify({"collapse", std::to_string(run.c.pid)});
      EXPECT_EQ(again.status, 0) << again.err;
      EXPECT_NE(again.err.find("nothing left to collapse"), std::string::npos) << again.err;
      EXPECT_NE(again.err.find("already on huge pages"), std::string::npos) << again.err;
    }
    EXPECT_EQ(run.c.finish(), 0);
  }
}
TEST(OptOut, NoHugepageUnderAlways) { no_hugepage("always"); }
TEST(OptOut, NoHugepageUnderMadvise) { no_hugepage("madvise"); }

// With a THP size "always", "disabled except advised" shows (THPeligible: 0 on unadvised mappings): the
// unadvised memory is left alone, the advised memory is collapsed.
TEST(OptOut, ExceptAdvisedUnderAlways) {
  for (tool t : {tool::collapse, tool::agent}) {
    opt_out_run run;
    run_under("always", kExceptAdvised, t, run);
    if (!run.skip.empty()) GTEST_SKIP() << run.skip;
    EXPECT_EQ(run.result.status, 0) << run.result.out << run.result.err;
    EXPECT_EQ(run.huge("small"), 0u) << run.result.out;
    EXPECT_EQ(run.huge("advised"), run.c.size("advised")) << run.result.out;
    auto process = parse_json(run.inspect.out)["processes"][0];
    EXPECT_EQ(process["thp_stance"].text(), "disabled_except_advised") << run.inspect.out;
    EXPECT_EQ(find_item(process["mappings"], "start", hex(run.c.at("small")))["why_not_huge"].text(),
              "thp_except_advised") << run.inspect.out;
    if (t == tool::collapse) {
      expect_excluded(run, run.c.at("small"), "thp_except_advised");
      EXPECT_EQ(parse_json(run.result.out)["thp_stance"].text(), "disabled_except_advised");
    }
    EXPECT_EQ(run.c.finish(), 0);
  }
}

// --override-opt-out goes ahead where the kernel allows it ("except advised"), and not where it refuses
// (the whole-process disable: MADV_COLLAPSE fails with EINVAL, so skipping it loses nothing).
TEST(OptOut, OverrideCollapsesWhatTheKernelAllows) {
  opt_out_run run;
  run_under("always", kExceptAdvised, tool::collapse, run, {"--override-opt-out"});
  if (!run.skip.empty()) GTEST_SKIP() << run.skip;
  EXPECT_EQ(run.result.status, 0) << run.result.out << run.result.err;
  EXPECT_EQ(run.huge("small"), run.c.size("small")) << run.result.out;
  expect_excluded(run, run.c.at("small"), "thp_except_advised", true);
  EXPECT_EQ(run.c.finish(), 0);

  opt_out_run disabled;
  run_under("madvise", kDisabled, tool::collapse, disabled, {"--override-opt-out"});
  if (!disabled.skip.empty()) GTEST_SKIP() << disabled.skip;
  EXPECT_EQ(disabled.result.status, 1) << disabled.result.out << disabled.result.err;
  expect_excluded(disabled, disabled.c.at("small"), "thp_disabled");
  EXPECT_EQ(disabled.huge("small"), 0u);
  EXPECT_EQ(disabled.c.finish(), 0);
}

// The known limit (docs/agent.md): while no THP size is "always", "disabled except advised" does not show
// from outside (THP_enabled: 1, THPeligible: 0 on unadvised mappings as in any process), so the unadvised
// memory is collapsed; inspect says the stance is unknown and collapse says it could not tell.
TEST(OptOut, ExceptAdvisedUnderMadviseIsInvisibleAsDocumented) {
  for (tool t : {tool::collapse, tool::agent}) {
    opt_out_run run;
    run_under("madvise", kExceptAdvised, t, run);
    if (!run.skip.empty()) GTEST_SKIP() << run.skip;
    auto process = parse_json(run.inspect.out)["processes"][0];
    if (process["thp_stance_visible"].flag()) GTEST_SKIP() << "an mTHP size is 'always' here: the stance shows";
    EXPECT_EQ(process["thp_stance"].text(), "unknown") << run.inspect.out;
    EXPECT_FALSE(process["thp_disabled"].flag()) << run.inspect.out;
    EXPECT_EQ(run.result.status, 0) << run.result.out << run.result.err;
    EXPECT_EQ(run.huge("small"), run.c.size("small")) << "documented: collapsed, the opt-out cannot be seen";
    EXPECT_EQ(run.huge("advised"), run.c.size("advised")) << run.result.out;
    if (t == tool::collapse) {
      EXPECT_NE(run.result.out.find("cannot be seen"), std::string::npos) << run.result.out;
    }
    EXPECT_EQ(run.c.finish(), 0);
  }
}

}  // namespace
