// SPDX-License-Identifier: MIT
// mTHP folios counted by size, for real: a 64 KiB size enabled (madvise) and the PMD size turned off for
// the test (test_support::thp_setting puts both back, also on failure), a child (tests/helpers/collapse_target
// --faulted) faulting advised memory in, then `hugify inspect` (pagemap + kpageflags: the child's memory by
// folio size) and `hugify status` (hugepages-<N>kB/stats: the machine's) both see the 64 KiB folios.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <string>

#include "collapse_test.hpp"
#include "hugify.h"
#include "test_support.hpp"

namespace {

using namespace collapse_test;
using test_support::json_view;
using test_support::parse_json;
using test_support::thp_setting;

constexpr uint64_t k64K = 64 * 1024;

// The bytes `hugify inspect --json` gives the child in folios of `size`, 0 when none.
uint64_t inspect_bytes_of(const json_view &folios, uint64_t size) {
  for (size_t i = 0; i < folios["by_size"].size(); i++)
    if (folios["by_size"][i]["page_size_bytes"].u64() == size) return folios["by_size"][i]["bytes"].u64();
  return 0;
}

TEST(MthpFolios, InspectAndStatusCount64KiBFolios) {
  REQUIRE_KERNEL_FEATURE("mthp");
  if (geteuid() != 0) GTEST_SKIP() << "changing hugepages-64kB/enabled and reading /proc/kpageflags need root";
  uint64_t pmd = hugify_pmd_size();
  if (pmd == k64K) GTEST_SKIP() << "the PMD is 64 KiB: no mTHP size below it to test";
  thp_setting pmd_off("hugepages-" + std::to_string(pmd >> 10) + "kB/enabled", "never");
  if (!pmd_off.skip_reason().empty()) GTEST_SKIP() << pmd_off.skip_reason();
  thp_setting small("hugepages-64kB/enabled", "madvise");
  if (!small.skip_reason().empty()) GTEST_SKIP() << small.skip_reason();
  thp_setting top("enabled", test_support::thp_mode() == "always" ? "always" : "madvise");
  if (!top.skip_reason().empty()) GTEST_SKIP() << top.skip_reason();

  child c;
  start(c, {"--faulted", "8M"});
  ASSERT_GT(c.pid, 0) << c.error;

  auto inspected = test_support::hugify({"inspect", std::to_string(c.pid), "--json"});
  ASSERT_EQ(inspected.status, 0) << inspected.err;
  auto folios = parse_json(inspected.out)["processes"][0]["folios"];
  ASSERT_TRUE(folios["known"].flag()) << inspected.out;
  uint64_t in_64k = inspect_bytes_of(folios, k64K);
  // Faults fall back to smaller folios when no 64 KiB block is free: most, not all, of 8 MiB.
  EXPECT_GE(in_64k, 4 * MiB) << "the advised region's faults took 64 KiB folios";
  EXPECT_EQ(inspect_bytes_of(folios, pmd), 0u) << "the PMD size was off: no PMD folio";
  auto text = test_support::hugify({"inspect", std::to_string(c.pid)});
  EXPECT_NE(text.out.find("by folio size (pagemap + kpageflags):"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" 64K "), std::string::npos) << text.out;

  auto status = test_support::hugify({"status", "--json"});
  ASSERT_EQ(status.status, 0) << status.err;
  auto sizes = parse_json(status.out)["thp"]["sizes"];
  json_view size64;
  for (size_t i = 0; i < sizes.size(); i++)
    if (sizes[i]["page_size_bytes"].u64() == k64K) size64 = sizes[i];
  ASSERT_TRUE(size64.present()) << status.out;
  if (size64["folios"].is_null() || size64["folios"]["nr_anon"].is_null())
    GTEST_SKIP() << "this kernel keeps no hugepages-64kB/stats/nr_anon (Linux 6.13+): status cannot count folios";
  EXPECT_GE(size64["folios"]["anon_bytes"].u64(), in_64k) << "the machine's 64 KiB folios hold the child's";
  EXPECT_GE(size64["folios"]["anon_fault_alloc"].u64(), in_64k / k64K);
  EXPECT_EQ(c.finish(), 0) << "the child's data survived";
}

} // namespace
