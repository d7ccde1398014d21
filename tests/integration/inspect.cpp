// SPDX-License-Identifier: MIT
// hugify inspect against real child processes (tests/helpers/collapse_target.c) holding memory of known
// kinds: each class's figures against an independent smaps read, the text, the allocator named from the
// mapped libraries, --all's ranking, and the errors.
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

}  // namespace
