// SPDX-License-Identifier: MIT
// hugify_alloc / hugify_free / hugify_measure_backing / hugify_probe on real memory and the real pool.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hugify.h"
#include "test_support.hpp"

extern "C" {
#include "internal.h"
#include "os.h"
#include "probe.h"
}

namespace {

constexpr size_t MiB = size_t{1} << 20;
constexpr uint64_t k2M = uint64_t{2} << 20, k1G = uint64_t{1} << 30;

hugify_opts only(hugify_page_kind kind, unsigned flags = HUGIFY_POPULATE) {
  hugify_opts opts{};
  opts.kinds[0] = kind;
  opts.kind_count = 1;
  opts.flags = flags;
  return opts;
}

// Mappings that look like hugify blocks: madvised (hg, nh) or hugetlb (ht). Unlike the count of all
// mappings, this does not move when malloc or a sanitizer runtime grows its own regions (every block
// hugify_alloc maps is madvised or hugetlb).
size_t count_block_like_mappings() {
  std::ifstream smaps("/proc/self/smaps");
  size_t count = 0;
  std::string line;
  while (std::getline(smaps, line)) {
    if (line.rfind("VmFlags:", 0) != 0) continue;
    line += ' ';
    if (line.find(" hg ") != std::string::npos || line.find(" nh ") != std::string::npos ||
        line.find(" ht ") != std::string::npos)
      count++;
  }
  return count;
}

// Checks both hugify_measure_backing and an independent smaps read agree that `fraction` of the block is on
// the claimed kind.
void expect_backed_by(void *p, size_t size, hugify_page_kind kind, double fraction) {
  struct hugify_backing b{};
  ASSERT_EQ(hugify_measure_backing(p, size, &b), 0);
  uint64_t claimed = kind == HUGIFY_PAGE_THP ? b.resident_thp
                     : kind == HUGIFY_PAGE_2M ? b.resident_2m
                     : kind == HUGIFY_PAGE_1G ? b.resident_1g
                                              : b.resident_4k;
  EXPECT_GE(static_cast<double>(claimed), fraction * static_cast<double>(size))
      << hugify_page_kind_name(kind) << " resident " << b.resident;
  uintptr_t at = reinterpret_cast<uintptr_t>(p);
  uint64_t independent;
  if (kind == HUGIFY_PAGE_THP) {
    independent = test_support::smaps_field(0, at, size, "AnonHugePages");
  } else if (kind == HUGIFY_PAGE_4K) {
    independent = test_support::smaps_field(0, at, size, "Rss") - test_support::smaps_field(0, at, size, "AnonHugePages");
  } else {
    // The kernel may count a private hugetlb page as Shared_Hugetlb (its "maybe shared" test is loose).
    independent = test_support::smaps_field(0, at, size, "Private_Hugetlb") +
                  test_support::smaps_field(0, at, size, "Shared_Hugetlb");
    // HUGIFY_PAGE_2M: the PMD-size pool (2 MiB on x86-64, 32 MiB on arm64's 16 KiB pages)
    EXPECT_EQ(test_support::smaps_field(0, at, size, "KernelPageSize"),
              kind == HUGIFY_PAGE_2M ? test_support::pmd_size() : k1G / 1024 * 1024);
  }
  EXPECT_GE(static_cast<double>(independent), fraction * static_cast<double>(size)) << "independent smaps read";
}

TEST(Probe, MatchesTheMachine) {
  hugify_system sys{};
  ASSERT_EQ(hugify_probe(&sys), 0);
  utsname name{};
  uname(&name);
  EXPECT_STREQ(sys.kernel_release, name.release);
  EXPECT_EQ(sys.base_page_size, static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  EXPECT_EQ(std::string(sys.thp_enabled), test_support::thp_mode());
  for (unsigned i = 0; i < sys.hugetlb_size_count; i++) {
    std::string dir = "/sys/kernel/mm/hugepages/hugepages-" + std::to_string(sys.hugetlb[i].page_size >> 10) + "kB/";
    EXPECT_EQ(sys.hugetlb[i].total, test_support::read_u64(dir + "nr_hugepages"));
    EXPECT_EQ(sys.hugetlb[i].free, test_support::read_u64(dir + "free_hugepages"));
  }
  bool has_2m = false;
  for (unsigned i = 0; i < sys.hugetlb_size_count; i++) has_2m |= sys.hugetlb[i].page_size == k2M;
  EXPECT_EQ(has_2m, access("/sys/kernel/mm/hugepages/hugepages-2048kB", F_OK) == 0);
  // MADV_COLLAPSE, independently: the kernel rejects unknown advice with EINVAL.
  // One PMD window (2 MiB on x86-64, 32 MiB on arm64's 16 KiB pages) of a mapping twice its size.
  const uint64_t pmd = test_support::pmd_size();
  void *scratch = mmap(nullptr, 2 * pmd, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(scratch, MAP_FAILED);
  auto *window = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(scratch) + pmd - 1) & ~(pmd - 1));
  window[0] = 1;
  int rc = madvise(window, pmd, 25 /* MADV_COLLAPSE */);
  bool kernel_knows = rc == 0 || errno != EINVAL;
  munmap(scratch, 2 * pmd);
  EXPECT_EQ(sys.madv_collapse == HUGIFY_FEATURE_YES, kernel_knows) << sys.reason;
  EXPECT_EQ(sys.can_change_pools, access("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", W_OK) == 0);
  if (sys.pmu != HUGIFY_FEATURE_YES) {
    EXPECT_NE(std::strstr(sys.reason, "PMU"), nullptr) << sys.reason;
  }
  if (sys.file_thp_text != HUGIFY_FEATURE_YES) {
    EXPECT_NE(std::strstr(sys.reason, "file THP"), nullptr) << sys.reason;
  }
}

TEST(Alloc, ThpBlockOf256MiBIsOnHugePages) {
  REQUIRE_KERNEL_FEATURE("thp");
  if (test_support::thp_mode() == "never") GTEST_SKIP() << "THP is 'never' on this machine";
  hugify_opts opts = only(HUGIFY_PAGE_THP);
  hugify_info info{};
  size_t size = 256 * MiB;
  void *p = hugify_alloc(size, &opts, &info);
  ASSERT_NE(p, nullptr) << info.reason;
  EXPECT_EQ(info.kind, HUGIFY_PAGE_THP) << info.reason;
  EXPECT_EQ(info.measured, 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % test_support::pmd_size(), 0u) << "PMD-aligned";
  EXPECT_GE(hugify_backing_huge_fraction(&info.backing), 0.95);
  expect_backed_by(p, size, HUGIFY_PAGE_THP, 0.95);
  std::memset(p, 0x5a, size);
  EXPECT_EQ(static_cast<unsigned char *>(p)[size - 1], 0x5a);
  EXPECT_EQ(hugify_free(p, size), 0);
}

TEST(Alloc, Hugetlb2MIsWhatItClaims) {
  // HUGIFY_PAGE_2M is the PMD-size pool: 2 MiB on x86-64, 32 MiB on arm64's 16 KiB pages. 40 MiB of it (two
  // 32 MiB pages there), with 12 pages to spare.
  const uint64_t pmd = test_support::pmd_size();
  size_t size = (40 * MiB + pmd - 1) / pmd * pmd;
  std::string why = test_support::ensure_free_hugetlb(pmd, size / pmd + 12);
  if (!why.empty()) GTEST_SKIP() << why;
  hugify_opts opts = only(HUGIFY_PAGE_2M);
  hugify_info info{};
  void *p = hugify_alloc(size, &opts, &info);
  ASSERT_NE(p, nullptr) << info.reason;
  EXPECT_EQ(info.kind, HUGIFY_PAGE_2M);
  EXPECT_EQ(info.mapped, size);
  EXPECT_EQ(info.backing.resident_2m, size);
  expect_backed_by(p, size, HUGIFY_PAGE_2M, 0.99);
  EXPECT_EQ(hugify_free(p, size), 0);
}

TEST(Alloc, Hugetlb1GIsWhatItClaims) {
  std::string why = test_support::ensure_free_hugetlb(k1G, 1);
  if (!why.empty()) GTEST_SKIP() << "1 GiB page: " << why;
  hugify_opts opts = only(HUGIFY_PAGE_1G);
  hugify_info info{};
  void *p = hugify_alloc(k1G, &opts, &info);
  ASSERT_NE(p, nullptr) << info.reason;
  EXPECT_EQ(info.kind, HUGIFY_PAGE_1G);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % k1G, 0u);
  expect_backed_by(p, k1G, HUGIFY_PAGE_1G, 0.99);
  EXPECT_EQ(hugify_free(p, k1G), 0);
}

TEST(Alloc, BasePagesStayOnBasePages) {
  hugify_opts opts = only(HUGIFY_PAGE_4K);
  hugify_info info{};
  size_t size = 64 * MiB;
  void *p = hugify_alloc(size, &opts, &info);
  ASSERT_NE(p, nullptr) << info.reason;
  EXPECT_EQ(info.kind, HUGIFY_PAGE_4K);
  EXPECT_EQ(info.backing.resident_thp, 0u);
  expect_backed_by(p, size, HUGIFY_PAGE_4K, 0.99);
  EXPECT_EQ(hugify_free(p, size), 0);
}

TEST(Alloc, ReservesThePoolAtMmapTimeNeverNoreserve) {
  std::string why = test_support::ensure_free_hugetlb(k2M, 8);
  if (!why.empty()) GTEST_SKIP() << why;
  std::string resv = "/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages";
  uint64_t before = test_support::read_u64(resv);
  hugify_opts opts = only(HUGIFY_PAGE_2M, 0);  // no populate: the reservation alone must hold the pages
  hugify_info info{};
  void *p = hugify_alloc(8 * MiB, &opts, &info);
  ASSERT_NE(p, nullptr) << info.reason;
  EXPECT_EQ(test_support::read_u64(resv), before + 4) << "4 pages reserved by the mmap itself";
  std::memset(p, 1, 8 * MiB);  // faults on reserved pages: cannot SIGBUS
  EXPECT_EQ(hugify_free(p, 8 * MiB), 0);
  EXPECT_EQ(test_support::read_u64(resv), before);
}

TEST(Alloc, PoolExhaustionFallsBackWithReasonAndStrictFails) {
  std::string why = test_support::ensure_free_hugetlb(k2M, 4);
  if (!why.empty()) GTEST_SKIP() << why;
  uint64_t free_pages = test_support::free_hugetlb(k2M);
  size_t too_big = static_cast<size_t>(free_pages + 8) * k2M;  // more than the pool has free
  hugify_opts chain{};
  chain.kinds[0] = HUGIFY_PAGE_2M;
  chain.kinds[1] = HUGIFY_PAGE_THP;
  chain.kind_count = 2;
  chain.flags = HUGIFY_POPULATE;
  hugify_info info{};
  void *p = hugify_alloc(too_big, &chain, &info);
  ASSERT_NE(p, nullptr) << info.reason;
  EXPECT_EQ(info.kind, HUGIFY_PAGE_THP);
  EXPECT_NE(std::strstr(info.reason, "2M: pool has"), nullptr) << info.reason;
  std::memset(p, 7, too_big);  // all of it usable: no SIGBUS
  EXPECT_EQ(hugify_free(p, too_big), 0);

  size_t live = hugify_live_blocks(), maps = count_block_like_mappings();
  hugify_opts strict = only(HUGIFY_PAGE_2M, HUGIFY_STRICT | HUGIFY_POPULATE);
  errno = 0;
  EXPECT_EQ(hugify_alloc(too_big, &strict, &info), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_NE(std::strstr(info.reason, "2M:"), nullptr) << info.reason;
  EXPECT_EQ(hugify_live_blocks(), live);
  EXPECT_EQ(count_block_like_mappings(), maps);
}

TEST(Alloc, DefaultChainSkipsHugetlbPagesLargerThanTheRequest) {
  hugify_info info{};
  void *p = hugify_alloc(3 * MiB, nullptr, &info);
  ASSERT_NE(p, nullptr) << info.reason;
  EXPECT_NE(std::strstr(info.reason, "1G: request smaller than one page"), nullptr) << info.reason;
  EXPECT_NE(info.kind, HUGIFY_PAGE_1G);
  EXPECT_EQ(hugify_free(p, 3 * MiB), 0);
}

TEST(Alloc, BadInputIsEinvalAndMapsNothing) {
  size_t maps = count_block_like_mappings(), live = hugify_live_blocks();
  hugify_info info{};
  errno = 0;
  EXPECT_EQ(hugify_alloc(0, nullptr, &info), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(hugify_alloc(SIZE_MAX - 100, nullptr, &info), nullptr);
  EXPECT_EQ(errno, EINVAL);
  hugify_opts flags{};
  flags.flags = 0x100;
  errno = 0;
  EXPECT_EQ(hugify_alloc(MiB, &flags, &info), nullptr);
  EXPECT_EQ(errno, EINVAL);
  hugify_opts kinds{};
  kinds.kinds[0] = static_cast<hugify_page_kind>(7);
  kinds.kind_count = 1;
  errno = 0;
  EXPECT_EQ(hugify_alloc(MiB, &kinds, &info), nullptr);
  EXPECT_EQ(errno, EINVAL);
  kinds.kind_count = 9;
  EXPECT_EQ(hugify_alloc(MiB, &kinds, &info), nullptr);
  EXPECT_EQ(count_block_like_mappings(), maps);
  EXPECT_EQ(hugify_live_blocks(), live);

  // Free: wrong size, unknown pointer, double free: -EINVAL and nothing unmapped.
  void *p = hugify_alloc(MiB, nullptr, &info);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(hugify_free(p, MiB + 1), -EINVAL);
  static_cast<char *>(p)[0] = 1;  // still mapped
  int local = 0;
  EXPECT_EQ(hugify_free(&local, sizeof local), -EINVAL);
  EXPECT_EQ(hugify_free(nullptr, 1), -EINVAL);
  EXPECT_EQ(hugify_free(p, MiB), 0);
  EXPECT_EQ(hugify_free(p, MiB), -EINVAL);
}

// 8 threads x 10 000 alloc/free of mixed sizes through the default chain.
void mixed_workload(int iterations, std::atomic<int> &corrupt, std::atomic<int> &alloc_errors, std::atomic<int> &free_errors) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; t++) {
    threads.emplace_back([t, iterations, &corrupt, &alloc_errors, &free_errors] {
      std::mt19937_64 random(static_cast<uint64_t>(t) * 7919 + 1);
      static const size_t sizes[] = {2, 4096, 65536, 1000000, 2 * MiB, 3 * MiB + 5, 8 * MiB};
      std::vector<std::pair<unsigned char *, size_t>> held;
      held.reserve(16);
      for (int i = 0; i < iterations; i++) {
        if (held.size() < 16 && (random() & 1)) {
          size_t size = sizes[random() % (sizeof sizes / sizeof sizes[0])];
          auto *p = static_cast<unsigned char *>(hugify_alloc(size, nullptr, nullptr));
          if (!p) {
            alloc_errors++;
            continue;
          }
          p[0] = static_cast<unsigned char>(t);
          p[size - 1] = static_cast<unsigned char>(i);
          held.emplace_back(p, size);
        } else if (!held.empty()) {
          auto [p, size] = held.back();
          held.pop_back();
          if (p[0] != static_cast<unsigned char>(t)) corrupt++;
          if (hugify_free(p, size) != 0) free_errors++;
        }
      }
      for (auto [p, size] : held)
        if (hugify_free(p, size) != 0) free_errors++;
    });
  }
  for (auto &thread : threads) thread.join();
}

TEST(Alloc, EightThreadsMixedSizesNoLeak) {
  size_t live_before = hugify_live_blocks();
  std::atomic<int> corrupt{0}, alloc_errors{0}, free_errors{0};
  // A short first round creates what threads leave behind when they end (glibc caches their stacks,
  // which it marks MADV_NOHUGEPAGE), so the count is compared between the end of that round and the end
  // of the real one.
  mixed_workload(100, corrupt, alloc_errors, free_errors);
  size_t blocks_before = count_block_like_mappings();
  mixed_workload(10000, corrupt, alloc_errors, free_errors);
  EXPECT_EQ(corrupt.load(), 0) << "blocks overwritten by another thread";
  EXPECT_EQ(alloc_errors.load(), 0);
  EXPECT_EQ(free_errors.load(), 0);
  EXPECT_EQ(hugify_live_blocks(), live_before);
  EXPECT_EQ(count_block_like_mappings(), blocks_before);
}

alignas(4096) static unsigned char global_array[8 * MiB];

// The one 2 MiB-aligned anonymous mapping and the one "measure -> MADV_COLLAPSE -> measure" (used by the
// probe, hugify_alloc and the text remap): memory faulted on 4 KiB pages ends on THP.
TEST(Backing, MeasureCollapseMeasureOfAnAlignedMapping) {
  void *p = nullptr;
  ASSERT_EQ(os_map_aligned(4 * MiB, k2M, PROT_READ | PROT_WRITE, &p), 0);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % k2M, 0u);
  void *none = nullptr;
  EXPECT_EQ(os_map_aligned(0, k2M, PROT_READ, &none), -EINVAL);
  // Fault on 4 KiB pages whatever the THP mode (a kernel without THP knows neither advice: EINVAL).
  bool thp = test_support::missing_kernel_feature("thp").empty();
  ASSERT_EQ(madvise(p, 4 * MiB, MADV_NOHUGEPAGE), thp ? 0 : -1);
  std::memset(p, 1, 4 * MiB);
  ASSERT_EQ(madvise(p, 4 * MiB, MADV_HUGEPAGE), thp ? 0 : -1);
  struct hugify_backing b;
  int collapsed = backing_measure_collapse_measure(p, 4 * MiB, &b);
  EXPECT_EQ(b.resident, 4 * MiB);
  std::string missing = test_support::missing_kernel_feature("madv_collapse");
  if (!missing.empty()) {
    EXPECT_EQ(collapsed, 0);
    munmap(p, 4 * MiB);
    GTEST_SKIP() << missing;
  }
  EXPECT_EQ(collapsed, 1);
  if (b.resident_thp == 0) {
    munmap(p, 4 * MiB);
    GTEST_SKIP() << "MADV_COLLAPSE found no free 2 MiB page (memory fragmented)";
  }
  EXPECT_EQ(b.resident_thp, 4 * MiB);
  EXPECT_EQ(backing_measure_collapse_measure(p, 4 * MiB, &b), 0); // already huge: nothing to collapse
  munmap(p, 4 * MiB);
}

TEST(Backing, AnyRangeOfTheCallersMemory) {
  // A malloc'd buffer.
  size_t size = 16 * MiB;
  auto *buffer = static_cast<unsigned char *>(malloc(size));
  ASSERT_NE(buffer, nullptr);
  std::memset(buffer, 1, size);
  struct hugify_backing b{};
  ASSERT_EQ(hugify_measure_backing(buffer, size, &b), 0);
  EXPECT_EQ(b.size, size);
  EXPECT_EQ(b.mapped, size);
  EXPECT_GE(b.resident, size - 4096);
  free(buffer);
  // A global array, half touched.
  std::memset(global_array, 1, sizeof global_array / 2);
  ASSERT_EQ(hugify_measure_backing(global_array, sizeof global_array, &b), 0);
  EXPECT_GE(b.resident, sizeof global_array / 2);
  EXPECT_EQ(b.resident_2m + b.resident_1g, 0u);
  // The text of this program.
  auto text = reinterpret_cast<uintptr_t>(&hugify_measure_backing) & ~uintptr_t{4095};
  ASSERT_EQ(hugify_measure_backing(reinterpret_cast<void *>(text), 4096, &b), 0);
  EXPECT_EQ(b.mapped, 4096u);
  EXPECT_EQ(b.resident, 4096u);
  // Bad ranges.
  EXPECT_EQ(hugify_measure_backing(buffer, 0, &b), -EINVAL);
  EXPECT_EQ(hugify_measure_backing(reinterpret_cast<void *>(UINTPTR_MAX - 10), 100, &b), -EINVAL);
  EXPECT_EQ(hugify_measure_backing(global_array, 1, nullptr), -EINVAL);
}

TEST(Backing, PartOfAMappingIsMeasuredExactly) {
  // 16 MiB of 4 KiB pages, only the second quarter touched: the four quarters must differ.
  hugify_opts opts = only(HUGIFY_PAGE_4K, 0);
  auto *p = static_cast<unsigned char *>(hugify_alloc(16 * MiB, &opts, nullptr));
  ASSERT_NE(p, nullptr);
  std::memset(p + 4 * MiB, 1, 4 * MiB);
  struct hugify_backing first{}, second{};
  ASSERT_EQ(hugify_measure_backing(p, 4 * MiB, &first), 0);
  ASSERT_EQ(hugify_measure_backing(p + 4 * MiB, 4 * MiB, &second), 0);
  // presence is per page on every kernel (PAGEMAP_SCAN, else the pagemap entries): only an unreadable
  // pagemap leaves the proration from smaps
  if (second.approximated & HUGIFY_BACKING_PRORATED) GTEST_SKIP() << "/proc/self/pagemap unreadable: prorated from smaps";
  EXPECT_EQ(first.resident, 0u);
  EXPECT_EQ(second.resident, 4 * MiB);
  EXPECT_EQ(hugify_free(p, 16 * MiB), 0);
}

}  // namespace
