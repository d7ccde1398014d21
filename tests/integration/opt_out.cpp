// SPDX-License-Identifier: MIT
// What a program excluded from THP, under THP "always" and "madvise", through `hugify collapse` and
// `hugify agent --once` (tests/helpers/collapse_target.c): the excluded memory stays on 4 KiB pages, the
// rest is collapsed, and inspect and collapse say why.
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

// ---- what a program excluded from THP ----------------------------------------------------------------
// Each exclusion, under THP "always" and "madvise", through `hugify collapse` and `hugify agent --once`:
// what the program excluded stays on base pages, the rest is collapsed. THP `enabled` is changed only for
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

// Regions of four PMD windows: 8 MiB on x86-64, 128 MiB on arm64's 16 KiB pages.
const std::string kRegion = size_arg(4 * kPmd);
const std::vector<std::string> kDisabled = {"--small", kRegion, "--thp-disable"};
const std::vector<std::string> kExceptAdvised = {"--small", kRegion, "--advised", kRegion, "--except-advised"};
const std::vector<std::string> kNoHugepage = {"--small", kRegion, "--nohuge", kRegion};

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
