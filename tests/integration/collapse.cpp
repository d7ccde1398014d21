// SPDX-License-Identifier: MIT
// hugify collapse and hugify_collapse() against real child processes (tests/helpers/collapse_target.c)
// holding memory of known kinds: what is collapsed and what is left, the gentle pace and its pause, the
// harm ledger, partial reports, and the missing kernel features and privileges that exit 3. The public
// structs keep their 0.3 sizes.
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
#include "collapse_test.hpp"
#include "test_support.hpp"

namespace {

using namespace collapse_test;

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

TEST(Collapse, PutsA4KHeapOnHugePagesWhileItIsWrittenAndLeavesNoHugePageAlone) {
  REQUIRE_KERNEL_FEATURE("madv_collapse");
  child c;
  // 24 windows at least: the unaligned heap's partial windows at its ends stay small (under 5 %)
  start(c, {"--heap", size_arg(at_least_windows(256 * MiB, 24)), "--writer", "--nohuge",
             size_arg(at_least_windows(16 * MiB, 2))}); // a NOHUGEPAGE region with whole windows
  ASSERT_GT(c.pid, 0);
  EXPECT_LT(thp_share(c.pid, c.at("heap")), 0.05) << "the heap should start on base pages";

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
  uint64_t heap = at_least_windows(64 * MiB, 20);
  start(c, {"--heap", size_arg(heap)});
  auto result = test_support::hugify({"collapse", std::to_string(c.pid), "--dry-run", "--json"});
  EXPECT_EQ(result.status, 0) << result.err;
  auto doc = parse_json(result.out);
  EXPECT_GE(doc.at("total.attempted_bytes").u64(), heap - 2 * kPmd) << "every whole window: " << result.out;
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
  // PMD-aligned, filled on base pages (THP off for the process while filling).
  char *raw = static_cast<char *>(mmap(nullptr, size + kPmd, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(raw, MAP_FAILED);
  char *p = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(raw) + kPmd - 1) & ~(kPmd - 1));
  if (p > raw) munmap(raw, static_cast<size_t>(p - raw));
  munmap(p + size, static_cast<size_t>(raw + kPmd - p));
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
  opts.chunk_size = kPmd; // one window per call: many calls, and the child dies after the first
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

TEST(Collapse, GentlePaceSendsOneWindowPerCallAndReportsThePause) {
  REQUIRE_KERNEL_FEATURE("madv_collapse");
  child gentle, full;
  uint64_t heap = at_least_windows(64 * MiB, 24); // 0.95 of it huge: its partial end windows under 5 %
  start(gentle, {"--heap", size_arg(heap), "--writer"});
  start(full, {"--heap", size_arg(heap), "--writer"});
  ASSERT_GT(gentle.pid, 0);
  ASSERT_GT(full.pid, 0);

  hugify_collapse_report report{};
  ASSERT_EQ(hugify_collapse(gentle.pid, nullptr, &report), 0) << report.reason;
  EXPECT_EQ(report.pace, static_cast<uint32_t>(HUGIFY_COLLAPSE_PACE_GENTLE)) << "gentle is the default";
  EXPECT_EQ(report.chunk_size, kPmd);
  ASSERT_EQ(report.failure_count, 0u) << report.failures[0].reason;
  ASSERT_GE(report.attempted, heap - 2 * kPmd);
  EXPECT_EQ(report.calls, report.attempted / kPmd) << "one call per window, none repeated";
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
  start(c, {"--heap", size_arg(at_least_windows(32 * MiB, 4)), "--writer"});
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
  start(d, {"--heap", size_arg(at_least_windows(32 * MiB, 4))});
  result = test_support::hugify({"collapse", std::to_string(d.pid), "--pace", "full"});
  ASSERT_EQ(result.status, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("pace:   in chunks of 64 MiB"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("cost:"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("(bloat)"), std::string::npos) << result.out;
  EXPECT_EQ(d.finish(), 0);

  // --chunk is the call size of full speed: with it the pace is full; with --pace gentle it is a usage error
  child e;
  start(e, {"--heap", size_arg(at_least_windows(16 * MiB, 4))});
  std::string chunk = size_arg(2 * kPmd); // two windows a call: 4M on x86-64
  result = test_support::hugify({"collapse", std::to_string(e.pid), "--chunk", chunk, "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(parse_json(result.out)["pace"].text(), "full");
  EXPECT_EQ(parse_json(result.out)["chunk_bytes"].u64(), 2 * kPmd);
  EXPECT_EQ(test_support::hugify({"collapse", std::to_string(e.pid), "--pace", "gentle", "--chunk", chunk}).status, 2);
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
  uint64_t size = at_least_windows(16 * MiB, 4);
  start(c, {"--heap", size_arg(size), "--thp-disable"});
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
  EXPECT_GE(heap["resident_bytes"].u64(), size);
  EXPECT_NE(result.out.find("PR_SET_THP_DISABLE"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("excluded"), std::string::npos) << result.err;
  EXPECT_LT(thp_share(c.pid, c.at("heap")), 0.05);

  auto inspect = test_support::hugify({"inspect", std::to_string(c.pid), "--json"});
  EXPECT_EQ(inspect.status, 0) << inspect.err;
  auto process = parse_json(inspect.out)["processes"][0];
  EXPECT_TRUE(process["thp_disabled"].flag()) << inspect.out;
  EXPECT_EQ(process["thp_stance"].text(), "disabled") << inspect.out;
  EXPECT_GE(process.at("not_huge_bytes.thp_disabled").u64(), size);
  EXPECT_EQ(c.finish(), 0);
}

}  // namespace
