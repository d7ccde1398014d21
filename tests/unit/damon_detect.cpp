// SPDX-License-Identifier: MIT
// Whether DAMON can watch processes (probe_damon_vaddr_at, probe.c), over fake sysfs trees: a context's
// avail_operations decides; where no kdamond exists the probe sets one up just long enough to read it and
// puts nr_contexts and nr_kdamonds back to 0; another user's kdamond, even one off with no context, is never
// written; a captured tree (status --root) is only read. The same for the DAMOS actions collapse and hugepage
// (probe_damos_action_at: a scheme of hugify's own, its action written, EINVAL meaning absent), and the
// kdamonds' schemes as status lists them (probe_damon_schemes). The real sysfs: tests/integration/heat_probe.cpp
// and pool_status.cpp (StatusLive.NamesTheKernelsOwnCollapses, in the 7.2 guest).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

extern "C" {
#include "probe.h"
}

namespace {

// A fake /sys/kernel/mm/damon/admin. The kernel makes kdamonds/N/ when nr_kdamonds is written and
// contexts/N/ when nr_contexts is: here they are made beforehand, and the probe's writes land in the files
// (os_write_file writes "1", not "1\n": a file that reads "0" after holding "0\n" was written).
struct fake_admin {
  test_support::scratch_dir dir{"hugify-damon"};
  std::string root = dir.path, admin = root + PROBE_DAMON_ADMIN;

  void put(const std::string &leaf, const std::string &text) {
    std::filesystem::create_directories(std::filesystem::path(admin + "/" + leaf).parent_path());
    std::ofstream(admin + "/" + leaf) << text;
  }
  std::string get(const std::string &leaf) const {
    std::ifstream in(admin + "/" + leaf);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // kdamond 0 with one context whose avail_operations is `operations`, nr_kdamonds `kdamonds`, nr_contexts
  // `contexts`
  void kdamond(const std::string &kdamonds, const std::string &contexts, const std::string &operations) {
    put("kdamonds/nr_kdamonds", kdamonds);
    put("kdamonds/0/state", "off\n");
    put("kdamonds/0/contexts/nr_contexts", contexts);
    put("kdamonds/0/contexts/0/avail_operations", operations);
  }
  // context 0 of kdamond 0 holds one scheme whose action is `action`, and targets `pids`
  void scheme(const std::string &action, const std::vector<int> &pids) {
    put("kdamonds/0/contexts/0/operations", "vaddr\n");
    put("kdamonds/0/contexts/0/schemes/nr_schemes", "1\n");
    put("kdamonds/0/contexts/0/schemes/0/action", action + "\n");
    put("kdamonds/0/contexts/0/targets/nr_targets", std::to_string(pids.size()) + "\n");
    for (size_t t = 0; t < pids.size(); t++)
      put("kdamonds/0/contexts/0/targets/" + std::to_string(t) + "/pid_target", std::to_string(pids[t]) + "\n");
  }
  hugify_feature_state action(const char *name, bool may_set_up, std::string *detail) const {
    char text[512] = "";
    hugify_feature_state state = probe_damos_action_at(admin.c_str(), name, may_set_up, text, sizeof text);
    *detail = text;
    return state;
  }
  hugify_feature_state probe(bool may_set_up, std::string *detail) const {
    char text[512] = "";
    hugify_feature_state state = probe_damon_vaddr_at(admin.c_str(), may_set_up, text, sizeof text);
    *detail = text;
    return state;
  }
};

TEST(DamonDetect, NoSysfsIsNo) {
  fake_admin fake;
  std::string detail;
  EXPECT_EQ(fake.probe(true, &detail), HUGIFY_FEATURE_NO);
  EXPECT_NE(detail.find("no DAMON sysfs"), std::string::npos) << detail;
}

// The 6.18 and 7.2 guests' case: DAMON's sysfs with no kdamond. The probe sets kdamond 0 and a context up,
// reads vaddr in its avail_operations, and puts both counts back to 0.
TEST(DamonDetect, NoKdamondIsSetUpReadAndPutBack) {
  fake_admin fake;
  fake.kdamond("0\n", "0\n", "vaddr\nfvaddr\npaddr\n");
  std::string detail;
  EXPECT_EQ(fake.probe(true, &detail), HUGIFY_FEATURE_YES) << detail;
  EXPECT_EQ(fake.get("kdamonds/nr_kdamonds"), "0") << "written (set up) and put back";
  EXPECT_EQ(fake.get("kdamonds/0/contexts/nr_contexts"), "0") << "written (set up) and put back";
  fake.kdamond("0\n", "0\n", "paddr\n");
  EXPECT_EQ(fake.probe(true, &detail), HUGIFY_FEATURE_NO);
  EXPECT_NE(detail.find("lists only: paddr"), std::string::npos) << detail;
  EXPECT_EQ(fake.get("kdamonds/nr_kdamonds"), "0");
  EXPECT_EQ(fake.get("kdamonds/0/contexts/nr_contexts"), "0");
}

// A set-up that fails half way (no context could be made) still puts nr_kdamonds back.
TEST(DamonDetect, FailedSetUpPutsNrKdamondsBack) {
  fake_admin fake;
  fake.put("kdamonds/nr_kdamonds", "0\n");
  std::string detail;
  EXPECT_EQ(fake.probe(true, &detail), HUGIFY_FEATURE_UNKNOWN);
  EXPECT_NE(detail.find("could not be set up"), std::string::npos) << detail;
  EXPECT_EQ(fake.get("kdamonds/nr_kdamonds"), "0");
}

// Another user's kdamond, off with no context: writing nr_kdamonds would remove it, and its nr_contexts is
// theirs; the probe says whose it is and writes nothing.
TEST(DamonDetect, AnotherUsersKdamondIsNeverWritten) {
  fake_admin fake;
  fake.kdamond("1\n", "0\n", "vaddr\n");
  std::string detail;
  EXPECT_EQ(fake.probe(true, &detail), HUGIFY_FEATURE_UNKNOWN);
  EXPECT_NE(detail.find("1 kdamond(s) are another user's"), std::string::npos) << detail;
  EXPECT_EQ(fake.get("kdamonds/nr_kdamonds"), "1\n") << "untouched";
  EXPECT_EQ(fake.get("kdamonds/0/contexts/nr_contexts"), "0\n") << "untouched";
  EXPECT_EQ(fake.get("kdamonds/0/state"), "off\n") << "untouched";
}

// Another user's context lists the operations: read, never written.
TEST(DamonDetect, AnotherUsersContextIsReadOnly) {
  fake_admin fake;
  fake.kdamond("1\n", "1\n", "paddr\n");
  std::string detail;
  EXPECT_EQ(fake.probe(true, &detail), HUGIFY_FEATURE_NO);
  EXPECT_NE(detail.find("lists only: paddr"), std::string::npos) << detail;
  fake.kdamond("1\n", "1\n", "vaddr\nfvaddr\npaddr\n");
  EXPECT_EQ(fake.probe(true, &detail), HUGIFY_FEATURE_YES) << detail;
  EXPECT_EQ(fake.get("kdamonds/nr_kdamonds"), "1\n");
  EXPECT_EQ(fake.get("kdamonds/0/contexts/nr_contexts"), "1\n");
}

// status --root: a captured tree is read, never written; with no context in it the answer is unknown.
TEST(DamonDetect, CapturedTreeIsOnlyRead) {
  fake_admin fake;
  fake.kdamond("0\n", "0\n", "vaddr\n");
  char detail[512];
  EXPECT_EQ(probe_feature_at(fake.root.c_str(), PROBE_DAMON_VADDR, detail, sizeof detail), HUGIFY_FEATURE_UNKNOWN);
  EXPECT_NE(std::string(detail).find("captured tree"), std::string::npos) << detail;
  EXPECT_EQ(fake.get("kdamonds/nr_kdamonds"), "0\n");
  fake.kdamond("1\n", "1\n", "vaddr\n");
  EXPECT_EQ(probe_feature_at(fake.root.c_str(), PROBE_DAMON_VADDR, detail, sizeof detail), HUGIFY_FEATURE_YES);
}

TEST(DamonDetect, VaddrIsAWordOfTheList) {
  EXPECT_TRUE(probe_damon_lists_vaddr("vaddr"));
  EXPECT_TRUE(probe_damon_lists_vaddr("paddr\nvaddr\n"));
  EXPECT_TRUE(probe_damon_lists_vaddr("fvaddr vaddr"));
  EXPECT_FALSE(probe_damon_lists_vaddr("fvaddr\npaddr\n"));
  EXPECT_FALSE(probe_damon_lists_vaddr("paddr"));
  EXPECT_FALSE(probe_damon_lists_vaddr(""));
}

// A missing feature is said with the version that has it, the build options, and the fix.
TEST(DamonDetect, MissingVaddrNamesVersionOptionsAndFix) {
  char reason[512] = "";
  probe_missing(PROBE_DAMON_VADDR, "DAMON's sysfs lists only: paddr", reason, sizeof reason);
  std::string text = reason;
  EXPECT_NE(text.find("DAMON vaddr needs Linux 5.18 built with CONFIG_DAMON_SYSFS, CONFIG_DAMON_VADDR"),
            std::string::npos) << text;
  EXPECT_NE(text.find("lists only: paddr"), std::string::npos) << text;
  EXPECT_NE(text.find("fix: run Linux 5.18 or later built with CONFIG_DAMON_SYSFS, CONFIG_DAMON_VADDR"),
            std::string::npos) << text;
}

// The scheme, the context and the kdamond of hugify's own, set up (each count written) and put back to 0.
void expect_put_back(const fake_admin &fake) {
  EXPECT_EQ(fake.get("kdamonds/0/contexts/0/schemes/nr_schemes"), "0") << "written (set up) and put back";
  EXPECT_EQ(fake.get("kdamonds/0/contexts/nr_contexts"), "0");
  EXPECT_EQ(fake.get("kdamonds/nr_kdamonds"), "0");
}

// Where no kdamond exists: kdamond 0, a context and a scheme of hugify's own, the action written, and all of it
// put back (nr_schemes, nr_contexts, nr_kdamonds 0).
TEST(DamosAction, NoKdamondIsSetUpTriedAndPutBack) {
  fake_admin fake;
  fake.kdamond("0\n", "0\n", "vaddr\n");
  fake.put("kdamonds/0/contexts/0/schemes/nr_schemes", "0\n");
  fake.put("kdamonds/0/contexts/0/schemes/0/action", "stat\n");
  std::string detail;
  EXPECT_EQ(fake.action("collapse", true, &detail), HUGIFY_FEATURE_YES) << detail;
  EXPECT_EQ(fake.get("kdamonds/0/contexts/0/schemes/0/action"), "collapse") << "the action was written";
  EXPECT_EQ(fake.action("hugepage", true, &detail), HUGIFY_FEATURE_YES) << detail;
  expect_put_back(fake);
}

// A kernel that does not know the action answers EINVAL to its write: here the action file leads to a file that
// refuses any word so (/proc/self/clear_refs takes numbers only). No, with the reason, and all put back.
TEST(DamosAction, EinvalIsAbsentAndPutBack) {
  fake_admin fake;
  fake.kdamond("0\n", "0\n", "vaddr\n");
  fake.put("kdamonds/0/contexts/0/schemes/nr_schemes", "0\n");
  std::filesystem::create_directories(fake.admin + "/kdamonds/0/contexts/0/schemes/0");
  std::filesystem::create_symlink("/proc/self/clear_refs", fake.admin + "/kdamonds/0/contexts/0/schemes/0/action");
  std::string detail;
  EXPECT_EQ(fake.action("collapse", true, &detail), HUGIFY_FEATURE_NO);
  EXPECT_NE(detail.find("EINVAL: DAMON's schemes do not take the action 'collapse'"), std::string::npos) << detail;
  expect_put_back(fake);
}

// Another user's kdamond: a scheme of theirs with the action says yes; else unknown, naming whose; never written.
TEST(DamosAction, AnotherUsersKdamondIsReadNeverWritten) {
  fake_admin fake;
  fake.kdamond("1\n", "1\n", "vaddr\n");
  fake.scheme("collapse", {1234});
  std::string detail;
  EXPECT_EQ(fake.action("collapse", true, &detail), HUGIFY_FEATURE_YES) << detail;
  EXPECT_EQ(fake.action("hugepage", true, &detail), HUGIFY_FEATURE_UNKNOWN);
  EXPECT_NE(detail.find("1 kdamond(s) are another user's and none has a scheme with the action 'hugepage'"),
            std::string::npos) << detail;
  EXPECT_EQ(fake.get("kdamonds/nr_kdamonds"), "1\n");
  EXPECT_EQ(fake.get("kdamonds/0/contexts/nr_contexts"), "1\n");
  EXPECT_EQ(fake.get("kdamonds/0/contexts/0/schemes/nr_schemes"), "1\n");
  EXPECT_EQ(fake.get("kdamonds/0/contexts/0/schemes/0/action"), "collapse\n");
}

// status --root: nothing is tried in a captured tree; a scheme in it with the action still says yes.
TEST(DamosAction, CapturedTreeIsOnlyRead) {
  fake_admin fake;
  fake.kdamond("0\n", "0\n", "vaddr\n");
  char detail[512];
  EXPECT_EQ(probe_feature_at(fake.root.c_str(), PROBE_DAMOS_COLLAPSE, detail, sizeof detail), HUGIFY_FEATURE_NO)
      << "no THP in the fake tree: the action is no use without it";
  std::filesystem::create_directories(fake.root + "/sys/kernel/mm/transparent_hugepage");
  EXPECT_EQ(probe_feature_at(fake.root.c_str(), PROBE_DAMOS_COLLAPSE, detail, sizeof detail), HUGIFY_FEATURE_UNKNOWN);
  EXPECT_NE(std::string(detail).find("captured tree"), std::string::npos) << detail;
  EXPECT_EQ(fake.get("kdamonds/nr_kdamonds"), "0\n");
  fake.kdamond("1\n", "1\n", "vaddr\n");
  fake.scheme("hugepage", {42});
  EXPECT_EQ(probe_feature_at(fake.root.c_str(), PROBE_DAMOS_HUGEPAGE, detail, sizeof detail), HUGIFY_FEATURE_YES);
  EXPECT_EQ(probe_feature_at(fake.root.c_str(), PROBE_DAMOS_COLLAPSE, detail, sizeof detail), HUGIFY_FEATURE_UNKNOWN);
}

TEST(DamosAction, NoSysfsIsNo) {
  fake_admin fake;
  std::string detail;
  EXPECT_EQ(fake.action("collapse", true, &detail), HUGIFY_FEATURE_NO);
  EXPECT_NE(detail.find("no DAMON sysfs"), std::string::npos) << detail;
}

// The schemes as status lists them: each kdamond's state and pid, the context's operations and targets, the action.
TEST(DamonSchemes, EveryKdamondsSchemesWithTheirTargets) {
  fake_admin fake;
  fake.kdamond("2\n", "1\n", "vaddr\n");
  fake.put("kdamonds/0/state", "on\n");
  fake.put("kdamonds/0/pid", "812\n");
  fake.scheme("collapse", {1234, 5678});
  fake.put("kdamonds/1/state", "off\n");
  fake.put("kdamonds/1/pid", "-1\n");
  fake.put("kdamonds/1/contexts/nr_contexts", "0\n");
  probe_damon_scheme schemes[4];
  ASSERT_EQ(probe_damon_schemes(fake.admin.c_str(), schemes, 4), 1);
  EXPECT_EQ(schemes[0].kdamond, 0u);
  EXPECT_STREQ(schemes[0].state, "on");
  EXPECT_EQ(schemes[0].kdamond_pid, 812);
  EXPECT_STREQ(schemes[0].operations, "vaddr");
  EXPECT_STREQ(schemes[0].action, "collapse");
  ASSERT_EQ(schemes[0].target_count, 2u);
  EXPECT_EQ(schemes[0].targets[0], 1234);
  EXPECT_EQ(schemes[0].targets[1], 5678);
  fake_admin none;
  EXPECT_LT(probe_damon_schemes(none.admin.c_str(), schemes, 4), 0) << "no DAMON sysfs";
}

}  // namespace
