// SPDX-License-Identifier: MIT
// The plan's walk on every kernel (issue 31): per-window presence and hugeness of a constructed process
// (tests/helpers/exact_pagemap_target.c) from the pagemap entries and kpageflags, as the kernels without
// PAGEMAP_SCAN (before 6.7) read them; the same figures from PAGEMAP_SCAN where the kernel has it; the
// plan's choices and bloat from them; hugify_measure_backing exact as root.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

extern "C" {
#include "hugify.h"
#include "os.h"
#include "probe.h"
}

namespace {

// The kernel's PMD and base page (2 MiB and 4 KiB on x86-64; 32 MiB and 16 KiB on arm64's 16 KiB pages).
const uint64_t PMD = test_support::pmd_size(), PAGE = test_support::base_page();

struct region {
  uintptr_t start = 0;
  size_t size = 0;
};

// A helper (exact_pagemap_target, or agent_target with arguments), started and read until "ready"; ended when
// this goes away.
struct target {
  FILE *out = nullptr;
  int pid = -1;
  std::map<std::string, region> regions;
  explicit target(const std::string &helper = "exact_pagemap_target", const std::string &args = "") {
    out = popen(("exec " + test_support::helper_path(helper) + " " + args).c_str(), "r");
    char line[256];
    while (out && fgets(line, sizeof line, out)) {
      std::istringstream in(line);
      std::string name, address;
      in >> name >> address;
      if (name == "ready") { pid = std::stoi(address); break; }
      size_t size = 0;
      in >> size;
      regions[name] = {(uintptr_t)std::stoull(address, nullptr, 16), size};
    }
  }
  ~target() {
    if (pid > 0) kill(pid, SIGTERM);
    if (out) pclose(out);
  }
};

std::vector<resident_bytes> walk(const os_walk &w, const region &r) {
  std::vector<resident_bytes> windows(r.size / PMD);
  EXPECT_EQ(os_walk_windows(&w, r.start, r.start + r.size, PMD, windows.data()), 0);
  return windows;
}

// Pages of a window of the sparse region (every tenth page of the region written).
uint64_t sparse_pages(size_t window) {
  uint64_t n = 0;
  for (uint64_t page = window * (PMD / PAGE); page < (window + 1) * (PMD / PAGE); page++) n += page % 10 == 0;
  return n;
}

bool region_is_huge(int pid, const region &r) {
  return test_support::smaps_field(pid, r.start, r.size, "AnonHugePages") == r.size;
}

std::string thp_mode() {
  std::string text = test_support::read_file("/sys/kernel/mm/transparent_hugepage/enabled");
  size_t open = text.find('['), close = text.find(']');
  return open == std::string::npos || close == std::string::npos ? "" : text.substr(open + 1, close - open - 1);
}

// A window written on 4 KiB pages: `present` bytes, none huge. Under THP `always` khugepaged may have made
// it huge since (the sparse one too, with max_ptes_none 511): the kernel's doing, then accepted.
void expect_small(const resident_bytes &w, uint64_t present, bool pfns, bool always) {
  bool made_huge = pfns ? w.huge == PMD : w.base == PMD && present < PMD;
  if (always && made_huge) return;
  EXPECT_EQ(w.base, present);
  EXPECT_EQ(w.huge + w.zero, 0u);
}

TEST(PagemapWalk, EntriesGiveEachWindowOfAConstructedProcess) {
  target t;
  ASSERT_GT(t.pid, 0);
  os_walk w;
  ASSERT_EQ(os_walk_open(t.pid, false, &w), 0);
  bool pfns = w.source == OS_WALK_KPAGEFLAGS, always = thp_mode() == "always";
  for (size_t k = 0; k < 2; k++) {
    auto dense = walk(w, t.regions["dense"]), sparse = walk(w, t.regions["sparse"]);
    auto empty = walk(w, t.regions["empty"]), zero = walk(w, t.regions["zero"]), churn = walk(w, t.regions["churn"]);
    expect_small(dense[k], PMD, pfns, always);
    expect_small(sparse[k], sparse_pages(k) * PAGE, pfns, always);
    EXPECT_EQ(empty[k].base + empty[k].huge + empty[k].zero, 0u);
    // read, never written: the zero page, seen as such where the PFNs are (root); else merely present
    EXPECT_EQ(pfns ? zero[k].zero : zero[k].base, PMD);
    // a quarter purged and half of it written again: 7/8 present, none of it on a PMD
    EXPECT_EQ(churn[k].base + churn[k].huge, PMD / 8 * 7);
    if (pfns) {
      EXPECT_EQ(churn[k].huge, 0u) << "a partial purge leaves the THP PTE-mapped";
    }
  }
  if (!region_is_huge(t.pid, t.regions["huge"])) {
    os_walk_close(&w);
    GTEST_SKIP() << "the huge region did not get huge pages (THP off, or MADV_COLLAPSE missing: Linux 6.1+)";
  }
  for (auto &window : walk(w, t.regions["huge"])) {
    if (pfns) {
      EXPECT_EQ(window.huge, PMD) << "kpageflags: a THP mapped whole";
    } else {
      EXPECT_EQ(window.base, PMD) << "no PFNs: present, hugeness left to smaps";
    }
  }
  os_walk_close(&w);
}

// Where the kernel has PAGEMAP_SCAN (6.7+), its figures are the truth: the entries and kpageflags give the
// same ones for every region but `split` (the PMD split while every PTE still maps the THP in place, which
// kpageflags cannot tell from a PMD: counted, and printed, not asserted).
TEST(PagemapWalk, EntriesAndKpageflagsGiveWhatPagemapScanGives) {
  if (probe_pagemap_scan(nullptr, 0) != HUGIFY_FEATURE_YES) GTEST_SKIP() << "PAGEMAP_SCAN needs Linux 6.7+";
  target t;
  ASSERT_GT(t.pid, 0);
  os_walk scan, entries;
  ASSERT_EQ(os_walk_open(t.pid, true, &scan), 0);
  ASSERT_EQ(os_walk_open(t.pid, false, &entries), 0);
  if (entries.source != OS_WALK_KPAGEFLAGS) {
    os_walk_close(&scan), os_walk_close(&entries);
    GTEST_SKIP() << "PFNs and /proc/kpageflags need CAP_SYS_ADMIN (run as root)";
  }
  unsigned differ = 0, split_windows = 0;
  for (auto &[name, r] : t.regions) {
    auto a = walk(scan, r), b = walk(entries, r);
    for (size_t k = 0; k < a.size(); k++) {
      bool same = a[k].base == b[k].base && a[k].huge == b[k].huge && a[k].zero == b[k].zero;
      if (name == "split") { split_windows++, differ += !same; continue; }
      EXPECT_TRUE(same) << name << " window " << k << ": PAGEMAP_SCAN base/huge/zero " << a[k].base << "/"
                        << a[k].huge << "/" << a[k].zero << ", pagemap + kpageflags " << b[k].base << "/" << b[k].huge
                        << "/" << b[k].zero;
    }
  }
  printf("split in place: %u of %u windows counted huge by kpageflags, not by PAGEMAP_SCAN\n", differ, split_windows);
  os_walk_close(&scan), os_walk_close(&entries);
}

// The churn case (issue 31): a purging allocator gives a quarter of each huge page back (MADV_DONTNEED:
// the PMD is split, the THP is not yet) and writes it again; the agent judges its collapses by whether the
// windows are still huge. Round after round (collapse, then purge), the entries and kpageflags must call
// a window huge exactly when PAGEMAP_SCAN does: the figure is printed.
TEST(PagemapWalk, ChurnedWindowsAreJudgedAsPagemapScanJudgesThem) {
  if (probe_pagemap_scan(nullptr, 0) != HUGIFY_FEATURE_YES) GTEST_SKIP() << "PAGEMAP_SCAN needs Linux 6.7+";
  if (probe_madv_collapse(nullptr, 0) != HUGIFY_FEATURE_YES) GTEST_SKIP() << "MADV_COLLAPSE needs Linux 6.1+";
  if (geteuid() != 0) GTEST_SKIP() << "needs root (kpageflags, process_madvise)";
  target t("agent_target", "--churn " + test_support::size_arg(std::max<uint64_t>(32 << 20, 2 * PMD)));
  ASSERT_GT(t.pid, 0);
  os_walk scan, entries;
  ASSERT_EQ(os_walk_open(t.pid, true, &scan), 0);
  ASSERT_EQ(os_walk_open(t.pid, false, &entries), 0);
  const region &r = t.regions["churn"];
  unsigned windows = 0, differ = 0, huge = 0;
  auto compare = [&] {
    auto a = walk(scan, r), b = walk(entries, r);
    for (size_t k = 0; k < a.size(); k++) {
      windows++, huge += a[k].huge == PMD;
      differ += a[k].huge != b[k].huge || a[k].base != b[k].base;
    }
  };
  for (int round = 0; round < 8; round++) {
    auto c = test_support::hugify({"collapse", std::to_string(t.pid), "--min-size", test_support::size_arg(PMD)});
    compare();
    kill(t.pid, SIGUSR2);
    char line[256];
    while (fgets(line, sizeof line, t.out) && strncmp(line, "churned", 7) != 0) {}
    compare();
  }
  printf("churn: %u of %u windows judged differently (PAGEMAP_SCAN called %u huge)\n", differ, windows, huge);
  EXPECT_EQ(differ, 0u);
  EXPECT_GT(huge, 0u) << "the collapses made the windows huge";
  os_walk_close(&scan), os_walk_close(&entries);
}

// The plan, from the walk: the agent's guard keeps the sparse region small, collapses the dense one, leaves
// the empty and zero-page windows alone, and its bloat is the zero-filled bytes; at --min-present 100 it
// adds nothing; plain collapse tries no window without a present page, and says why the zero page stays.
TEST(PagemapWalk, PlanGuardsAndBloatFollowTheWalk) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (CAP_SYS_NICE for process_madvise)";
  if (probe_madv_collapse(nullptr, 0) != HUGIFY_FEATURE_YES) GTEST_SKIP() << "MADV_COLLAPSE needs Linux 6.1+";
  if (thp_mode() == "always") GTEST_SKIP() << "THP always: khugepaged makes the sparse region huge itself";
  target t;
  ASSERT_GT(t.pid, 0);
  std::string pid = std::to_string(t.pid);
  auto rss = [&](const char *name) { return test_support::smaps_field(t.pid, t.regions[name].start, t.regions[name].size, "Rss"); };
  uint64_t sparse_before = rss("sparse");
  auto r = test_support::hugify({"agent", "--once", "--pid", pid, "--min-rss", "0", "--min-present", "100", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(test_support::parse_json(r.out)["bloat_bytes"].u64(), 0u) << r.out;
  EXPECT_EQ(rss("sparse"), sparse_before) << "--min-present 100 never adds memory";
  EXPECT_EQ(rss("empty"), 0u);

  r = test_support::hugify({"agent", "--once", "--pid", pid, "--min-rss", "0", "--min-present", "50", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(region_is_huge(t.pid, t.regions["dense"])) << r.out;
  EXPECT_EQ(test_support::smaps_field(t.pid, t.regions["sparse"].start, PMD * 2, "AnonHugePages"), 0u);
  EXPECT_EQ(rss("empty"), 0u);
  EXPECT_EQ(test_support::parse_json(r.out)["bloat_bytes"].u64(), 0u) << "only full windows were collapsed: " << r.out;

  // plain collapse: khugepaged's max_ptes_none is the guard; the sparse windows' zero-filled pages are its bloat
  uint64_t max_ptes_none = test_support::read_u64("/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none");
  uint64_t expected = 0;
  for (size_t k = 0; k < 2; k++)
    if (PMD / PAGE - sparse_pages(k) <= max_ptes_none) expected += (PMD / PAGE - sparse_pages(k)) * PAGE;
  r = test_support::hugify({"collapse", pid, "--json"});
  EXPECT_EQ(r.status, 0) << "no window without a present page is sent: " << r.out << r.err;
  auto report = test_support::parse_json(r.out);
  EXPECT_EQ(report["total"]["bloat_bytes"].u64(), expected) << r.out;
  EXPECT_EQ(rss("empty"), 0u);
  EXPECT_NE(report["note"].text().find("zero page"), std::string::npos) << r.out;
}

// The caller's own memory, measured per page: exact as root on every kernel; without root, said how not.
TEST(PagemapWalk, MeasureBackingIsExactAsRoot) {
  void *p = nullptr;
  ASSERT_EQ(os_map_aligned(4 * PMD, PMD, PROT_READ | PROT_WRITE, &p), 0);
  prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
  char *c = static_cast<char *>(p);
  for (uint64_t at = 0; at < 2 * PMD; at += PAGE) c[at] = 1;           // two windows dense
  for (uint64_t at = 2 * PMD; at < 3 * PMD; at += 10 * PAGE) c[at] = 1; // every tenth page
  volatile char sum = 0;
  for (uint64_t at = 3 * PMD; at < 4 * PMD; at += PAGE) sum += c[at];  // the zero page
  prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
  hugify_backing b{};
  ASSERT_EQ(hugify_measure_backing(p, 4 * PMD, &b), 0);
  uint64_t written = 2 * PMD + sparse_pages(0) * PAGE;
  if (b.exact) {
    EXPECT_EQ(b.approximated, 0u);
    EXPECT_EQ(b.resident, written);
    EXPECT_EQ(b.resident_4k, written);
    EXPECT_EQ(b.zero_page, PMD);
  } else {
    EXPECT_EQ(geteuid() == 0, false) << "exact as root on every kernel";
    EXPECT_NE(b.approximated, 0u);
    EXPECT_EQ(b.resident, written + PMD) << "no PFNs: the zero page counts as present";
  }
  os_munmap(p, 4 * PMD);
}

}  // namespace
