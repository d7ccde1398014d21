// SPDX-License-Identifier: MIT
// The plan's walk without PAGEMAP_SCAN: the pagemap and kpageflags words decoded (procfs.c), on words
// built as the kernel writes them (admin-guide/mm/pagemap.rst).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

extern "C" {
#include "procfs.h"
}

namespace {

constexpr size_t PMD_PAGES = 512;
constexpr uint64_t PAGE = 4096, PMD = PMD_PAGES * PAGE;
constexpr uint64_t THP_HEAD = KPAGE_THP | KPAGE_COMPOUND_HEAD, THP_TAIL = KPAGE_THP | KPAGE_COMPOUND_TAIL;

std::vector<uint64_t> run_from(uint64_t pfn) {
  std::vector<uint64_t> entries(PMD_PAGES);
  for (size_t i = 0; i < PMD_PAGES; i++) entries[i] = PAGEMAP_PRESENT | (pfn + i);
  return entries;
}

std::vector<uint64_t> thp_flags() {
  std::vector<uint64_t> flags(PMD_PAGES, THP_TAIL);
  flags[0] = THP_HEAD;
  return flags;
}

TEST(PagemapWords, PfnOnlyOfAPresentPage) {
  EXPECT_EQ(pagemap_pfn(PAGEMAP_PRESENT | 0x1234), 0x1234u);
  EXPECT_EQ(pagemap_pfn(PAGEMAP_PRESENT | PAGEMAP_FILE | (UINT64_C(1) << 55) | 7), 7u) << "soft-dirty is no PFN bit";
  EXPECT_EQ(pagemap_pfn(0x1234), 0u) << "not present";
  EXPECT_EQ(pagemap_pfn(PAGEMAP_SWAPPED | 0x1234), 0u) << "swapped: the low bits are the swap entry";
  EXPECT_EQ(pagemap_pfn(PAGEMAP_PRESENT), 0u) << "hidden without CAP_SYS_ADMIN";
}

TEST(PagemapWords, AnAlignedRunIsWholeContiguousAndAligned) {
  auto run = run_from(0x40000);
  EXPECT_TRUE(pagemap_aligned_run(run.data(), PMD_PAGES, PMD_PAGES));
  EXPECT_FALSE(pagemap_aligned_run(run.data(), PMD_PAGES - 1, PMD_PAGES)) << "part of a PMD";
  auto shifted = run_from(0x40001);
  EXPECT_FALSE(pagemap_aligned_run(shifted.data(), PMD_PAGES, PMD_PAGES)) << "a head not 512-aligned";
  auto purged = run;
  purged[300] = 0;
  EXPECT_FALSE(pagemap_aligned_run(purged.data(), PMD_PAGES, PMD_PAGES)) << "a partial purge";
  auto refaulted = run;
  refaulted[300] = PAGEMAP_PRESENT | 0x99999;
  EXPECT_FALSE(pagemap_aligned_run(refaulted.data(), PMD_PAGES, PMD_PAGES)) << "a new 4 KiB page in the hole";
  std::vector<uint64_t> hidden(PMD_PAGES, PAGEMAP_PRESENT);
  EXPECT_FALSE(pagemap_aligned_run(hidden.data(), PMD_PAGES, PMD_PAGES)) << "no PFNs: nothing to judge";
}

TEST(PagemapWords, KpageflagsTellAWholeThpHugetlbAndTheHugeZeroPage) {
  auto flags = thp_flags();
  EXPECT_EQ(kpageflags_run(flags.data(), PMD_PAGES), KPAGE_RUN_HUGE);
  std::vector<uint64_t> hugetlb(PMD_PAGES, KPAGE_HUGE | KPAGE_COMPOUND_TAIL);
  EXPECT_EQ(kpageflags_run(hugetlb.data(), PMD_PAGES), KPAGE_RUN_HUGE) << "inside a 1 GiB page: tails only";
  std::vector<uint64_t> zero(PMD_PAGES, KPAGE_ZERO_PAGE | KPAGE_THP);
  EXPECT_EQ(kpageflags_run(zero.data(), PMD_PAGES), KPAGE_RUN_HUGE_ZERO);
  auto mthp = flags;
  for (size_t i = 16; i < PMD_PAGES; i += 16) mthp[i] = THP_HEAD; // 64 KiB folios side by side
  EXPECT_EQ(kpageflags_run(mthp.data(), PMD_PAGES), KPAGE_RUN_SMALL);
  std::vector<uint64_t> plain(PMD_PAGES, UINT64_C(1) << 5); // LRU
  EXPECT_EQ(kpageflags_run(plain.data(), PMD_PAGES), KPAGE_RUN_SMALL);
}

TEST(PagemapWords, CountSplitsBaseHugeAndZero) {
  auto run = run_from(0x40000);
  resident_bytes r{};
  pagemap_count(run.data(), PMD_PAGES, KPAGE_RUN_HUGE, 0, PAGE, &r);
  EXPECT_EQ(r.huge, PMD);
  EXPECT_EQ(r.base + r.zero, 0u);
  r = {};
  pagemap_count(run.data(), PMD_PAGES, KPAGE_RUN_HUGE_ZERO, 0, PAGE, &r);
  EXPECT_EQ(r.zero, PMD);
  std::vector<uint64_t> mixed(PMD_PAGES, 0);
  for (size_t i = 0; i < PMD_PAGES; i += 10) mixed[i] = PAGEMAP_PRESENT | (0x5000 + i);
  mixed[1] = PAGEMAP_PRESENT | 0x777; // the zero page
  mixed[2] = PAGEMAP_SWAPPED | 0x3;   // swapped: not present
  r = {};
  pagemap_count(mixed.data(), PMD_PAGES, KPAGE_RUN_SMALL, 0x777, PAGE, &r);
  EXPECT_EQ(r.base, 52 * PAGE);
  EXPECT_EQ(r.zero, PAGE);
  r = {};
  pagemap_count(mixed.data(), PMD_PAGES, KPAGE_RUN_SMALL, 0, PAGE, &r);
  EXPECT_EQ(r.base, 53 * PAGE) << "zero PFN unknown: the zero page counts as present";
}

TEST(PagemapWords, HugeFromSmapsFillsFullWindowsAndSaysWhenItGuessed) {
  std::vector<resident_bytes> windows = {{PMD, 0, 0}, {PMD / 2, 0, 0}, {PMD, 0, 0}};
  EXPECT_TRUE(pagemap_huge_from_smaps(windows.data(), 3, PMD, 0));
  EXPECT_EQ(windows[0].huge, 0u);
  EXPECT_TRUE(pagemap_huge_from_smaps(windows.data(), 3, PMD, 2 * PMD)) << "every full window: certain";
  EXPECT_EQ(windows[0].huge, PMD);
  EXPECT_EQ(windows[1].huge, 0u) << "a half-present window is never huge";
  EXPECT_EQ(windows[2].huge, PMD);
  windows = {{PMD, 0, 0}, {PMD / 2, 0, 0}, {PMD, 0, 0}};
  EXPECT_FALSE(pagemap_huge_from_smaps(windows.data(), 3, PMD, PMD)) << "one of two: a guess";
  EXPECT_EQ(windows[0].huge + windows[2].huge, PMD);
}

}  // namespace

namespace {

// Entries at consecutive PFNs from `pfn` and their kpageflags: `pages` base pages in folios of `folio` pages.
void folios_of(uint64_t pfn, size_t pages, size_t folio, std::vector<uint64_t> *entries, std::vector<uint64_t> *flags) {
  for (size_t i = 0; i < pages; i++) {
    entries->push_back(PAGEMAP_PRESENT | (pfn + i));
    flags->push_back(folio == 1 ? 0 : KPAGE_THP | (i % folio == 0 ? KPAGE_COMPOUND_HEAD : KPAGE_COMPOUND_TAIL));
  }
}

TEST(PagemapWords, FoliosCountedBySize) {
  std::vector<uint64_t> entries, flags;
  folios_of(0x1000, 32, 16, &entries, &flags);  // two 64 KiB folios
  folios_of(0x5003, 3, 1, &entries, &flags);    // three base pages
  folios_of(0x8000, 512, 512, &entries, &flags); // one 2 MiB THP
  entries.push_back(0);                          // not present
  flags.push_back(0);
  folio_bytes out{};
  kpageflags_folios(entries.data(), flags.data(), entries.size(), 0, PAGE, &out);
  EXPECT_EQ(out.by_order[4], 32 * PAGE) << "order 4: 16 pages, 64 KiB";
  EXPECT_EQ(out.by_order[0], 3 * PAGE);
  EXPECT_EQ(out.by_order[9], PMD);
  EXPECT_EQ(out.partial, 0u);
  EXPECT_EQ(out.hugetlb, 0u);
}

TEST(PagemapWords, FoliosMappedInPartAreNotGivenASize) {
  std::vector<uint64_t> entries, flags;
  folios_of(0x1000, 16, 16, &entries, &flags);
  entries.erase(entries.begin()); // the head is not in the range read: its tails alone
  flags.erase(flags.begin());
  folios_of(0x2000, 12, 16, &entries, &flags); // a head and 11 tails: part of a 64 KiB folio
  folio_bytes out{};
  kpageflags_folios(entries.data(), flags.data(), entries.size(), 0, PAGE, &out);
  EXPECT_EQ(out.partial, 27 * PAGE);
  for (uint64_t bytes : out.by_order) EXPECT_EQ(bytes, 0u);
}

TEST(PagemapWords, FoliosLeaveOutTheZeroPageAndCountHugetlbApart) {
  std::vector<uint64_t> entries = {PAGEMAP_PRESENT | 0x77, PAGEMAP_PRESENT | 0x9000, PAGEMAP_PRESENT | 0x9001};
  std::vector<uint64_t> flags = {KPAGE_ZERO_PAGE, KPAGE_HUGE | KPAGE_COMPOUND_HEAD, KPAGE_HUGE | KPAGE_COMPOUND_TAIL};
  folio_bytes out{};
  kpageflags_folios(entries.data(), flags.data(), entries.size(), 0x77, PAGE, &out);
  EXPECT_EQ(out.hugetlb, 2 * PAGE);
  EXPECT_EQ(out.by_order[0], 0u);
}

} // namespace
