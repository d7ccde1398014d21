// SPDX-License-Identifier: MIT
// hugify top (issue 33): --batch and --json without a terminal, and the live view in a real terminal (tmux:
// send-keys, capture-pane): the header, switching to cgroups, sorting, and the collapse confirmation.
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include "test_support.hpp"

namespace {

TEST(TopCli, BatchShowsEveryProcessOnceThenTheChange) {
  auto r = test_support::hugify({"top", "--batch", "--count", "2", "--interval", "0.2", "--rows", "0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("refresh 1:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("refresh 2:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("THP/s: thp_fault_alloc"), std::string::npos) << r.out;
  // this test's own process is one of the rows, with its pid and command
  EXPECT_NE(r.out.find(" " + std::to_string(getpid()) + " "), std::string::npos) << r.out;
}

TEST(TopCli, JsonPerRefreshWithTheChangeFromTheSecond) {
  auto r = test_support::hugify({"top", "--json", "--count", "2", "--interval", "0.2", "--rows", "0"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::string error;
  auto docs = test_support::parse_json_documents(r.out, &error);
  ASSERT_EQ(docs.size(), 2u) << error << r.out;
  for (size_t i = 0; i < 2; i++) {
    EXPECT_EQ(docs[i]["schema"].text(), "hugify.top/1");
    EXPECT_EQ(docs[i]["refresh"].u64(), i + 1);
    bool found = false;
    for (const auto &row : docs[i]["rows"].items()) {
      if (row["pid"].u64() != (uint64_t)getpid()) continue;
      found = true;
      EXPECT_GT(row["rss_bytes"].u64(), 0u);
      EXPECT_EQ(row["huge_fraction_change"].is_null(), i == 0) << "no change before the second refresh";
    }
    EXPECT_TRUE(found) << "pid " << getpid() << " in refresh " << i + 1;
    EXPECT_EQ(docs[i].at("counters_per_second.thp_fault_alloc").is_null(), i == 0);
    // the second refresh walks only processes whose size changed (at most all of them)
    EXPECT_LE(docs[i]["walked"].u64(), docs[i]["processes"].u64());
  }
  auto groups = test_support::hugify({"top", "--json", "--cgroups", "--rows", "0"});
  ASSERT_EQ(groups.status, 0) << groups.err;
  auto doc = test_support::parse_json(groups.out);
  EXPECT_EQ(doc["view"].text(), "cgroups");
  EXPECT_GE(doc["rows"].size(), 1u);
}

TEST(TopCli, NoTerminalForTheLiveViewSaysSo) {
  auto r = test_support::run({"sh", "-c", "\"$0\" top </dev/null", HUGIFY_CLI_PATH});
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("--batch"), std::string::npos) << r.err;
  EXPECT_EQ(test_support::hugify({"top", "--count", "2"}).status, 2) << "--count needs --batch or --json";
}

// The pane's text after `keys` were sent: captured again until it shows `expected` (a capture can fall
// between top's clearing the screen and its drawing the rows), for up to 15 s; the last capture otherwise.
std::string after_keys(const std::string &session, const std::string &keys, const std::string &expected = "") {
  if (!keys.empty()) test_support::run({"tmux", "send-keys", "-t", session, keys});
  std::string pane;
  for (int i = 0; i < 60; i++) {
    usleep(250 * 1000);
    pane = test_support::run({"tmux", "capture-pane", "-p", "-t", session}).out;
    if (i >= 3 && (expected.empty() || pane.find(expected) != std::string::npos)) break;
  }
  return pane;
}

TEST(TopCli, LiveViewInATerminal) {
  if (test_support::run({"sh", "-c", "command -v tmux"}).status != 0)
    GTEST_SKIP() << "no tmux (Debian: apt-get install tmux)";
  std::string session = "hugify-top-" + std::to_string(getpid());
  auto started = test_support::run({"tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "40",
                                    std::string(HUGIFY_CLI_PATH) + " top --interval 0.5"});
  ASSERT_EQ(started.status, 0) << started.err;
  std::string pane = after_keys(session, "", "not huge");
  EXPECT_NE(pane.find("hugify top - "), std::string::npos) << pane;
  EXPECT_NE(pane.find("not huge"), std::string::npos) << pane;
  EXPECT_NE(pane.find("sort (not-huge)"), std::string::npos) << pane;
  pane = after_keys(session, "s", "sort (share)");
  EXPECT_NE(pane.find("sort (share)"), std::string::npos) << pane;
  pane = after_keys(session, "c");
  EXPECT_NE(pane.find("procs"), std::string::npos) << "the cgroup view\n" << pane;
  pane = after_keys(session, "c");
  EXPECT_EQ(pane.find("procs"), std::string::npos) << "the process view again\n" << pane;
  pane = after_keys(session, "C", "at the gentle pace? [y/N]");
  EXPECT_NE(pane.find("at the gentle pace? [y/N]"), std::string::npos) << pane;
  pane = after_keys(session, "n", "not collapsed");
  EXPECT_NE(pane.find("not collapsed"), std::string::npos) << pane;
  after_keys(session, "q");
  EXPECT_NE(test_support::run({"tmux", "has-session", "-t", session}).status, 0) << "q ends it";
  test_support::run({"tmux", "kill-session", "-t", session});
}

}  // namespace
