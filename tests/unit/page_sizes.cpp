// SPDX-License-Identifier: MIT
// The kernel's page sizes from what it reports (src/lib/page_sizes.c, pure), over PMDs of 2 MiB (4 KiB
// pages: x86-64 captured here, arm64), 32 MiB (arm64 16 KiB pages) and 512 MiB (arm64 64 KiB pages), and
// the decision that follows: collapse to the PMD, or, where it is too big, fault into the largest mTHP size.
// Fixtures: tests/fixtures/page_sizes (README.md says where each comes from).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "test_support.hpp"

extern "C" {
#include "page_sizes.h"
}

using test_support::fixture;

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

struct Captured {
  std::string base, pmd, thp, hugetlb;
  bool has_pmd;
};

bool exists(const std::string &relative) {
  struct stat st;
  return stat((std::string(HUGIFY_FIXTURES_DIR) + "/" + relative).c_str(), &st) == 0;
}

page_sizes parse(const std::string &kernel, int *rc = nullptr) {
  std::string dir = "page_sizes/" + kernel + "/";
  Captured c{fixture(dir + "base_page_size"), exists(dir + "hpage_pmd_size") ? fixture(dir + "hpage_pmd_size") : "",
             exists(dir + "transparent_hugepage.ls") ? fixture(dir + "transparent_hugepage.ls") : "",
             fixture(dir + "hugepages.ls"), exists(dir + "hpage_pmd_size")};
  page_sizes_report report{std::stoull(c.base), c.has_pmd ? c.pmd.c_str() : nullptr, c.thp.c_str(), c.hugetlb.c_str()};
  page_sizes out;
  int result = page_sizes_parse(&report, &out);
  if (rc) *rc = result;
  else EXPECT_EQ(result, 0) << kernel;
  return out;
}

std::vector<uint64_t> mthp(const page_sizes &s) { return {s.mthp, s.mthp + s.mthp_count}; }
std::vector<uint64_t> hugetlb(const page_sizes &s) { return {s.hugetlb, s.hugetlb + s.hugetlb_count}; }

TEST(PageSizes, X86OnThisProjectsVm) {
  page_sizes s = parse("x86_64-6.18");
  EXPECT_EQ(s.base, 4 * KiB);
  EXPECT_EQ(s.pmd, 2 * MiB);
  EXPECT_EQ(s.pages_per_pmd, 512u);
  EXPECT_TRUE(s.pmd_reported);
  ASSERT_EQ(s.mthp_count, 9u) << "8 KiB to 2 MiB";
  EXPECT_EQ(s.mthp[0], 8 * KiB);
  EXPECT_EQ(s.mthp[8], 2 * MiB);
  EXPECT_EQ(hugetlb(s), (std::vector<uint64_t>{2 * MiB, 1 * GiB}));
}

TEST(PageSizes, Arm64FourKiBPages) {
  page_sizes s = parse("arm64-4k");
  EXPECT_EQ(s.pmd, 2 * MiB);
  EXPECT_EQ(s.pages_per_pmd, 512u);
  EXPECT_EQ(hugetlb(s), (std::vector<uint64_t>{64 * KiB, 2 * MiB, 32 * MiB, 1 * GiB}));
}

TEST(PageSizes, Arm64SixteenKiBPagesHaveA32MiBPmdOf2048Pages) {
  page_sizes s = parse("arm64-16k");
  EXPECT_EQ(s.base, 16 * KiB);
  EXPECT_EQ(s.pmd, 32 * MiB);
  EXPECT_EQ(s.pages_per_pmd, 2048u) << "more than the 512 a 2 MiB assumption caps a PMD at";
  ASSERT_EQ(s.mthp_count, 11u) << "32 KiB to 32 MiB";
  EXPECT_EQ(s.mthp[0], 32 * KiB);
  EXPECT_EQ(s.mthp[s.mthp_count - 1], 32 * MiB);
  EXPECT_EQ(hugetlb(s), (std::vector<uint64_t>{2 * MiB, 32 * MiB, 1 * GiB}));
}

TEST(PageSizes, Arm64SixtyFourKiBPagesHaveA512MiBPmd) {
  page_sizes s = parse("arm64-64k");
  EXPECT_EQ(s.base, 64 * KiB);
  EXPECT_EQ(s.pmd, 512 * MiB);
  EXPECT_EQ(s.pages_per_pmd, 8192u);
  EXPECT_EQ(s.mthp[s.mthp_count - 1], 512 * MiB);
  EXPECT_EQ(hugetlb(s), (std::vector<uint64_t>{2 * MiB, 512 * MiB, 16 * GiB}));
}

TEST(PageSizes, NoThpFallsBackToOnePageTablesReach) {
  page_sizes s = parse("arm64-4k-no-thp");
  EXPECT_FALSE(s.pmd_reported);
  EXPECT_EQ(s.pmd, 2 * MiB);
  EXPECT_EQ(s.mthp_count, 0u);
  EXPECT_EQ(page_sizes_pmd_of(4 * KiB), 2 * MiB);
  EXPECT_EQ(page_sizes_pmd_of(16 * KiB), 32 * MiB);
  EXPECT_EQ(page_sizes_pmd_of(64 * KiB), 512 * MiB);
}

TEST(PageSizes, RejectsWhatNoKernelReports) {
  page_sizes out;
  page_sizes_report odd_base{3000, "2097152", nullptr, nullptr};
  EXPECT_EQ(page_sizes_parse(&odd_base, &out), -EINVAL);
  page_sizes_report garbled{4096, "two megs", nullptr, nullptr};
  EXPECT_EQ(page_sizes_parse(&garbled, &out), -EINVAL);
  page_sizes_report small{16384, "4096", nullptr, nullptr};
  EXPECT_EQ(page_sizes_parse(&small, &out), -EINVAL) << "a PMD below the base page";
  page_sizes_report stray{4096, "2097152\n", "hugepages-3000kB hugepages-64kB hugepages-64kB notes", nullptr};
  ASSERT_EQ(page_sizes_parse(&stray, &out), 0);
  EXPECT_EQ(mthp(out), (std::vector<uint64_t>{64 * KiB})) << "no power of two, duplicates and other names left out";
}

TEST(PageSizes, FaultsTakeASizeAdvisedOrAlways) {
  EXPECT_TRUE(page_sizes_faults_take("madvise", "never"));
  EXPECT_TRUE(page_sizes_faults_take("always", "never"));
  EXPECT_TRUE(page_sizes_faults_take("inherit", "madvise"));
  EXPECT_FALSE(page_sizes_faults_take("inherit", "never"));
  EXPECT_FALSE(page_sizes_faults_take("never", "always"));
}

TEST(PageSizes, CollapseUpTo32MiBPmds) {
  for (const char *kernel : {"x86_64-6.18", "arm64-4k", "arm64-16k"}) {
    page_sizes s = parse(kernel);
    page_sizes_choice choice;
    page_sizes_choose(&s, nullptr, &choice);
    EXPECT_TRUE(choice.collapse) << kernel;
    EXPECT_EQ(choice.fault_size, s.pmd) << kernel;
  }
}

TEST(PageSizes, A512MiBPmdIsTooBigFaultsTakeTheLargestEnabledMthp) {
  page_sizes s = parse("arm64-64k");
  bool takes[PAGE_SIZES_MAX] = {};
  page_sizes_choice choice;
  page_sizes_choose(&s, takes, &choice);
  EXPECT_FALSE(choice.collapse);
  EXPECT_EQ(choice.fault_size, 0u) << "no mTHP size enabled: base pages only";
  for (unsigned i = 0; i < s.mthp_count; i++) {
    if (s.mthp[i] == 2 * MiB || s.mthp[i] == 128 * KiB || s.mthp[i] == 512 * MiB) takes[i] = true;
  }
  page_sizes_choose(&s, takes, &choice);
  EXPECT_FALSE(choice.collapse) << "the PMD size enabled changes nothing: still too big to collapse";
  EXPECT_EQ(choice.fault_size, 2 * MiB) << "the largest enabled below the PMD";
}

TEST(PageSizes, CollapseIsWiseUpTo32MiB) {
  EXPECT_TRUE(page_sizes_collapse_wise(2 * MiB));
  EXPECT_TRUE(page_sizes_collapse_wise(32 * MiB));
  EXPECT_FALSE(page_sizes_collapse_wise(512 * MiB));
  EXPECT_FALSE(page_sizes_collapse_wise(0));
}

TEST(PageSizes, NoThpMeansNoCollapse) {
  page_sizes s = parse("arm64-4k-no-thp");
  page_sizes_choice choice;
  page_sizes_choose(&s, nullptr, &choice);
  EXPECT_FALSE(choice.collapse);
  EXPECT_EQ(choice.fault_size, 0u);
}

TEST(PageSizes, NamesAsUsersReadThem) {
  char name[32];
  page_sizes_name(32 * MiB, name, sizeof name);
  EXPECT_STREQ(name, "32 MiB");
  page_sizes_name(64 * KiB, name, sizeof name);
  EXPECT_STREQ(name, "64 KiB");
  page_sizes_name(16 * GiB, name, sizeof name);
  EXPECT_STREQ(name, "16 GiB");
}

} // namespace
