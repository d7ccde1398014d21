// SPDX-License-Identifier: MIT
// Issue 44 item 4: `hugify status` says what the kernel collapses by itself, on this kernel's real sysfs: the
// DAMOS actions it takes (collapse, hugepage: tried in a scheme of hugify's own where no kdamond exists), a
// kdamond running a collapse scheme with its targets, and khugepaged's collapse counters per mTHP size. Linux
// 7.2 (Debian's 7.2.12, `scripts/kernels 7.2`) has them all; elsewhere each test skips naming what is missing.
// The fake trees: tests/unit/damon_detect.cpp and tests/unit/pool_parsers.cpp (PoolStatusTree.Debian14...).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

const std::string kdamonds = "/sys/kernel/mm/damon/admin/kdamonds";
const std::string thp = "/sys/kernel/mm/transparent_hugepage";

std::string trimmed(const std::string &path) {
  std::string text = test_support::read_file(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

void write(const std::string &leaf, const std::string &value) { std::ofstream(kdamonds + leaf) << value << "\n"; }

// A kdamond of the test's own (kdamond 0, made where none was) running a collapse scheme on a sleeping child
// that matches no region (nr_accesses beyond any): the kernel collapses nothing for it. Taken down at the end,
// also when an assertion fails: state off, nr_kdamonds back to 0.
class collapse_scheme {
 public:
  collapse_scheme() {
    child_ = fork();
    if (child_ == 0) {
      pause();
      _exit(0);
    }
    write("/nr_kdamonds", "1");
    write("/0/contexts/nr_contexts", "1");
    write("/0/contexts/0/operations", "vaddr");
    write("/0/contexts/0/targets/nr_targets", "1");
    write("/0/contexts/0/targets/0/pid_target", std::to_string(child_));
    write("/0/contexts/0/schemes/nr_schemes", "1");
    write("/0/contexts/0/schemes/0/action", "collapse");
    write("/0/contexts/0/schemes/0/access_pattern/nr_accesses/min", "4294967295");
    write("/0/contexts/0/schemes/0/access_pattern/nr_accesses/max", "4294967295");
    write("/0/state", "on");
  }
  ~collapse_scheme() {
    if (trimmed(kdamonds + "/0/state") == "on") write("/0/state", "off");
    write("/0/contexts/nr_contexts", "0");
    write("/nr_kdamonds", "0");
    kill(child_, SIGKILL);
    waitpid(child_, nullptr, 0);
  }
  pid_t child() const { return child_; }
  bool running() const { return trimmed(kdamonds + "/0/state") == "on"; }

 private:
  pid_t child_;
};

test_support::json_view status_json(std::string *text = nullptr) {
  auto r = test_support::hugify({"status", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  if (text) {
    auto t = test_support::hugify({"status"});
    EXPECT_EQ(t.status, 0) << t.err;
    *text = t.out;
  }
  return test_support::parse_json(r.out);
}

// On a kernel that takes the DAMOS action collapse: status lists the actions hugify can use, and a kdamond with
// a collapse scheme, with its state, its pid (when on) and its target; and DAMON is as it was afterwards.
TEST(StatusCollapses, NamesDamonsActionsAndAKdamondRunningACollapseScheme) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: DAMON's sysfs is root's";
  REQUIRE_KERNEL_FEATURE("damon_vaddr");
  REQUIRE_KERNEL_FEATURE("damos_collapse");
  if (trimmed(kdamonds + "/nr_kdamonds") != "0")
    GTEST_SKIP() << "DAMON's kdamonds are another user's: this test sets one of its own up only where none is";

  std::string text;
  test_support::json_view doc = status_json(&text);
  EXPECT_EQ(doc["damon"]["vaddr"].text(), "yes");
  std::vector<std::string> actions;
  for (const auto &a : doc["damon"]["actions"].items()) actions.push_back(a.text());
  EXPECT_EQ(actions.size() > 0 ? actions[0] : "", "collapse");
  EXPECT_EQ(doc["features"]["damos_collapse"].text(), "yes");
  EXPECT_EQ(doc["damon"]["schemes"].size(), 0u);
  EXPECT_NE(text.find("DAMON vaddr: yes; DAMOS actions hugify can use: collapse"), std::string::npos) << text;
  EXPECT_EQ(trimmed(kdamonds + "/nr_kdamonds"), "0") << "the probes put DAMON back";

  {
    // A DAMON user inside the kernel (DAMON_STAT, on by default in Debian's 7.2) refuses the kdamond its start:
    // the scheme is listed all the same, off, and status names who holds DAMON.
    std::string held = test_support::damon_held_by_kernel();
    collapse_scheme scheme;
    ASSERT_EQ(scheme.running(), held.empty()) << "kdamond state " << trimmed(kdamonds + "/0/state") << "; " << held;
    doc = status_json(&text);
    ASSERT_EQ(doc["damon"]["schemes"].size(), 1u) << text;
    const auto &s = doc["damon"]["schemes"][0];
    EXPECT_EQ(s["action"].text(), "collapse");
    EXPECT_EQ(s["state"].text(), held.empty() ? "on" : "off");
    EXPECT_EQ(s["operations"].text(), "vaddr");
    if (held.empty()) {
      EXPECT_EQ(s["kdamond_pid"].u64(), std::stoull(trimmed(kdamonds + "/0/pid")));
    } else {
      EXPECT_TRUE(s["kdamond_pid"].is_null());
      ASSERT_EQ(doc["damon"]["in_kernel"].size(), 1u) << text;
      EXPECT_NE(held.find(doc["damon"]["in_kernel"][0]["module"].text()), std::string::npos) << held;
      EXPECT_NE(text.find("holds it: no kdamond of DAMON's sysfs can start"), std::string::npos) << text;
      bool noted = false;
      for (const auto &d : doc["diagnoses"].items()) noted |= d["id"].text() == "damon_held";
      EXPECT_TRUE(noted) << text;
    }
    ASSERT_EQ(s["targets"].size(), 1u);
    EXPECT_EQ(s["targets"][0].u64(), static_cast<uint64_t>(scheme.child()));
    EXPECT_EQ(doc["features"]["damos_collapse"].text(), "yes") << "read from the running scheme, not tried";
    EXPECT_NE(text.find("scheme 0: collapse, targets " + std::to_string(scheme.child())), std::string::npos) << text;
    std::printf("hugify status, with the test's kdamond running a collapse scheme:\n%s\n",
                text.substr(text.find("The kernel's own collapses")).substr(0, 600).c_str());
  }
  EXPECT_EQ(trimmed(kdamonds + "/nr_kdamonds"), "0");
}

// khugepaged's collapse counters of each mTHP size are the kernel's files; a size without them is null.
TEST(StatusCollapses, KhugepagedCountersPerSizeAreTheKernelFiles) {
  REQUIRE_KERNEL_FEATURE("khugepaged_mthp");
  std::string text;
  test_support::json_view doc = status_json(&text);
  EXPECT_EQ(doc["features"]["khugepaged_mthp"].text(), "yes");
  size_t counted = 0;
  for (const auto &size : doc["thp"]["sizes"].items()) {
    std::string stats = thp + "/hugepages-" + std::to_string(size["page_size_bytes"].u64() >> 10) + "kB/stats/";
    SCOPED_TRACE(stats);
    if (!std::filesystem::exists(stats + "collapse_alloc")) {
      EXPECT_TRUE(size["collapse"].is_null());
      continue;
    }
    counted++;
    // khugepaged may collapse meanwhile: each counter is at most what the file says after
    for (const char *name : {"collapse_alloc", "collapse_alloc_failed", "collapse_exceed_none_pte",
                             "collapse_exceed_swap_pte", "collapse_exceed_shared_pte"}) {
      if (!std::filesystem::exists(stats + name)) continue;
      EXPECT_LE(size["collapse"][name].u64(), test_support::read_u64(stats + name)) << name;
    }
  }
  EXPECT_GT(counted, 0u);
  EXPECT_NE(text.find("khugepaged per size"), std::string::npos) << text;
  EXPECT_NE(text.find("collapse_exceed_none_pte"), std::string::npos) << text;
}

}  // namespace
