// SPDX-License-Identifier: MIT
// The pure part of hugify inspect / collapse: classes, reasons, thread stacks, collapse eligibility, on
// fixture smaps text. tests/fixtures/smaps/collapse_target.txt was captured on this machine kind (Linux
// 6.18, THP madvise) from tests/helpers/collapse_target run as
//   collapse_target --heap 64M --nohuge 8M --thp 8M --hugetlb 4M --small 8M --shm 2M --threads 2
// which printed: heap 0x7fce44a6e010, nohuge 0x7fce44000000, small 0x7fce43600000, shm 0x7fce4486e000,
// hugetlb 0x7fce43200000, thp 0x7fce42800000; collapse_target_task_syscall.txt holds its three threads'
// /proc/PID/task/TID/syscall lines. constructed_shm_jit_1g.txt is built in the same format for what the
// helper cannot produce here (SysV/memfd/POSIX shm, anonymous code, 1 GiB hugetlb, malloc arenas).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

extern "C" {
#include "hugify.h"
#include "inspect.h"
#include "procfs.h"
}

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

struct parsed {
  smaps_vma *vmas = nullptr;
  long count = 0;
  explicit parsed(const std::string &fixture) {
    std::string text = test_support::fixture(fixture);
    count = parse_smaps(text.c_str(), &vmas);
  }
  ~parsed() { free(vmas); }
  const smaps_vma *at(uint64_t start) const {
    for (long i = 0; i < count; i++)
      if (vmas[i].start == start) return &vmas[i];
    return nullptr;
  }
};

std::vector<uint64_t> fixture_stack_pointers() {
  std::istringstream lines(test_support::fixture("smaps/collapse_target_task_syscall.txt"));
  std::vector<uint64_t> sps;
  std::string line;
  while (std::getline(lines, line)) {
    uint64_t sp;
    if (parse_task_syscall_sp(line.c_str(), &sp)) sps.push_back(sp);
  }
  return sps;
}

struct classified {
  hugify_inspect_report report{};
  ~classified() { hugify_inspect_report_free(&report); }
  const hugify_inspect_mapping *at(uint64_t start) const {
    for (size_t i = 0; i < report.mapping_count; i++)
      if (report.mappings[i].start == start) return &report.mappings[i];
    return nullptr;
  }
};

void classify(const parsed &p, const char *mode, int thp_disabled, const std::vector<uint64_t> &sps, classified &out) {
  inspect_context context{};
  context.thp_disabled = thp_disabled;
  context.thp_mode = mode;
  context.shmem_mode = "never";
  context.pmd_size = 2 * MiB;
  context.stack_pointers = sps.data();
  context.stack_pointer_count = sps.size();
  ASSERT_EQ(inspect_classify(p.vmas, static_cast<size_t>(p.count), &context, &out.report), 0);
}

TEST(TaskSyscall, StackPointerIsTheNextToLastField) {
  std::vector<uint64_t> sps = fixture_stack_pointers();
  ASSERT_EQ(sps.size(), 3u);
  EXPECT_EQ(sps[0], 0x7ffc1eb69d60u); // main thread in rt_sigtimedwait
  EXPECT_EQ(sps[1], 0x7fce427feeb0u); // threads in pause()
  EXPECT_EQ(sps[2], 0x7fce41ffdeb0u);
  uint64_t sp = 0;
  // proc_pid_syscall(): "running" for a thread on a CPU, "-1 SP PC" when blocked outside a system call.
  EXPECT_FALSE(parse_task_syscall_sp("running\n", &sp));
  EXPECT_TRUE(parse_task_syscall_sp("-1 0x7ffd1000 0x401000\n", &sp));
  EXPECT_EQ(sp, 0x7ffd1000u);
  EXPECT_FALSE(parse_task_syscall_sp("", &sp));
  EXPECT_FALSE(parse_task_syscall_sp("7 0xzz 0x1", &sp));
}

TEST(InspectClassify, CapturedProcessClassesAndPageKinds) {
  parsed p("smaps/collapse_target.txt");
  ASSERT_GT(p.count, 30);
  classified c;
  classify(p, "madvise", 0, fixture_stack_pointers(), c);
  const hugify_inspect_report &r = c.report;
  EXPECT_EQ(r.mapping_count, static_cast<size_t>(p.count));
  EXPECT_STREQ(r.allocator, "glibc") << "the helper maps libc.so.6 and no other malloc";

  // Totals are smaps sums: Rss + hugetlb, and AnonHugePages.
  uint64_t rss = 0, hugetlb = 0, thp = 0;
  for (long i = 0; i < p.count; i++) {
    rss += p.vmas[i].rss;
    hugetlb += p.vmas[i].private_hugetlb + p.vmas[i].shared_hugetlb;
    thp += p.vmas[i].anon_huge;
  }
  EXPECT_EQ(r.total.resident, rss + hugetlb);
  EXPECT_EQ(r.total.thp, thp);
  EXPECT_EQ(r.total.hugetlb_2m, 4 * MiB);
  EXPECT_EQ(r.total.base, rss - thp);

  const hugify_usage &anon = r.classes[HUGIFY_CLASS_ANON];
  EXPECT_EQ(anon.thp, 8 * MiB);
  EXPECT_EQ(anon.hugetlb_2m, 4 * MiB);
  EXPECT_EQ(anon.base, 64 * MiB + 12 * KiB /* heap chunk */ + 8 * MiB /* nohuge */ + 8 * MiB /* small */ + 24 * KiB);
  EXPECT_EQ(r.classes[HUGIFY_CLASS_SHM].resident, 2 * MiB);
  EXPECT_EQ(r.classes[HUGIFY_CLASS_HEAP].resident, 8 * KiB);
  EXPECT_EQ(r.classes[HUGIFY_CLASS_STACK].resident, 16 * KiB + 8 * KiB + 8 * KiB);
  EXPECT_EQ(r.classes[HUGIFY_CLASS_CODE].resident, 4 * KiB + 984 * KiB + 4 * KiB + 152 * KiB);
  uint64_t sum = 0;
  for (const auto &u : r.classes) sum += u.resident;
  EXPECT_EQ(sum, r.total.resident);

  // Thread stacks: both found by stack pointer; [stack] is the main one.
  EXPECT_EQ(r.stacks_by_pointer, 2u);
  EXPECT_EQ(r.stacks_by_guard, 0u);
  ASSERT_NE(c.at(0x7fce42000000), nullptr);
  EXPECT_EQ(c.at(0x7fce42000000)->memory_class, HUGIFY_CLASS_STACK);
  EXPECT_EQ(c.at(0x7fce42000000)->thread_stack, 1);
  EXPECT_EQ(c.at(0x7ffc1eb4b000)->memory_class, HUGIFY_CLASS_STACK);
  EXPECT_EQ(c.at(0x7ffc1eb4b000)->thread_stack, 0);

  // Code per object, in order of first mapping.
  ASSERT_EQ(r.object_count, 5u);
  EXPECT_STREQ(r.objects[0].path, "/tmp/cx/build/tests/collapse_target");
  EXPECT_STREQ(r.objects[1].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(r.objects[1].code.resident, 984 * KiB);
  EXPECT_STREQ(r.objects[2].path, "[vdso]");
  EXPECT_STREQ(r.objects[4].path, "[vsyscall]");
}

TEST(InspectClassify, WhyNotHugeInMadviseMode) {
  parsed p("smaps/collapse_target.txt");
  classified c;
  classify(p, "madvise", 0, fixture_stack_pointers(), c);
  const hugify_inspect_report &r = c.report;
  EXPECT_EQ(c.at(0x7fce44a6e000)->why, HUGIFY_WHY_NOT_ADVISED); // the heap chunk
  EXPECT_EQ(c.at(0x7fce43600000)->why, HUGIFY_WHY_NOT_ADVISED); // small
  EXPECT_EQ(c.at(0x7fce44000000)->why, HUGIFY_WHY_NOHUGEPAGE);  // nohuge
  EXPECT_EQ(c.at(0x7fce42000000)->why, HUGIFY_WHY_NOHUGEPAGE);  // a thread stack (MAP_STACK)
  EXPECT_EQ(c.at(0x7fce42800000)->why, HUGIFY_WHY_NONE);        // thp: all huge
  EXPECT_EQ(c.at(0x7fce43200000)->why, HUGIFY_WHY_NONE);        // hugetlb
  // A shared anonymous mapping the kernel placed while shmem_enabled was never: off a 2 MiB boundary.
  EXPECT_EQ(c.at(0x7fce4486e000)->why, HUGIFY_WHY_SHMEM_UNALIGNED);
  EXPECT_EQ(c.at(0x7fce48a98000)->why, HUGIFY_WHY_FILE);        // libc code
  EXPECT_EQ(c.at(0x7fce48c66000)->why, HUGIFY_WHY_SPECIAL);     // [vdso]
  EXPECT_EQ(c.at(0x563c5e5f2000)->why, HUGIFY_WHY_TOO_SMALL);   // [heap], 132 KiB
  EXPECT_EQ(r.not_huge[HUGIFY_WHY_NOHUGEPAGE], 8 * MiB + 16 * KiB);
  EXPECT_EQ(r.not_huge[HUGIFY_WHY_NOT_ADVISED], 64 * MiB + 12 * KiB + 8 * MiB);
  uint64_t sum = 0;
  for (uint64_t bytes : r.not_huge) sum += bytes;
  EXPECT_EQ(sum, r.total.resident - hugify_usage_huge(&r.total));
  // The heap chunk holds 31 aligned windows (62 MiB) of its 64 MiB + 16 KiB; small all of its 8 MiB.
  EXPECT_EQ(c.at(0x7fce44a6e000)->aligned_bytes, 62 * MiB);
  EXPECT_EQ(r.collapsible, 62 * MiB + 8 * MiB);
}

TEST(InspectClassify, SystemModeAndProcessSettingChangeTheReason) {
  parsed p("smaps/collapse_target.txt");
  auto sps = fixture_stack_pointers();
  {
    classified c;
    classify(p, "always", 0, sps, c);
    EXPECT_EQ(c.at(0x7fce44a6e000)->why, HUGIFY_WHY_NOT_COLLAPSED);
  }
  {
    classified c;
    classify(p, "never", 0, sps, c);
    EXPECT_EQ(c.at(0x7fce44a6e000)->why, HUGIFY_WHY_THP_NEVER);
    EXPECT_EQ(c.report.collapsible, 70 * MiB) << "MADV_COLLAPSE ignores the system mode";
  }
  {
    classified c;
    classify(p, "madvise", 1, sps, c);
    const hugify_inspect_report &r = c.report;
    EXPECT_EQ(r.not_huge[HUGIFY_WHY_THP_DISABLED], r.total.resident - hugify_usage_huge(&r.total));
    EXPECT_EQ(r.collapsible, 0u) << "the kernel refuses MADV_COLLAPSE for a THP-disabled process";
  }
}

TEST(InspectClassify, ThreadStacksByGuardPageWhenStackPointersAreUnknown) {
  parsed p("smaps/collapse_target.txt");
  classified c;
  classify(p, "madvise", 0, {}, c);
  EXPECT_EQ(c.report.stacks_by_pointer, 0u);
  EXPECT_EQ(c.report.stacks_by_guard, 2u);
  EXPECT_EQ(c.at(0x7fce417ff000)->memory_class, HUGIFY_CLASS_STACK);
  EXPECT_EQ(c.at(0x7fce44a6e000)->memory_class, HUGIFY_CLASS_ANON) << "the heap chunk has no guard below it";
}

TEST(InspectClassify, SharedMemoryAnonymousCodeAndGigantic) {
  parsed p("smaps/constructed_shm_jit_1g.txt");
  ASSERT_EQ(p.count, 11);
  classified c;
  classify(p, "madvise", 0, {}, c);
  const hugify_inspect_report &r = c.report;
  for (uint64_t start : {0x7f0000000000ull, 0x7f0000400000ull, 0x7f0000600000ull, 0x7f0000800000ull, 0x7f0080000000ull})
    EXPECT_EQ(c.at(start)->memory_class, HUGIFY_CLASS_SHM) << std::hex << start;
  EXPECT_EQ(r.classes[HUGIFY_CLASS_SHM].resident, (4 + 2 + 1) * MiB + 512 * KiB + 2 * MiB);
  EXPECT_EQ(r.classes[HUGIFY_CLASS_SHM].thp, 2 * MiB) << "ShmemPmdMapped";
  EXPECT_EQ(r.classes[HUGIFY_CLASS_SHM].hugetlb_2m, 2 * MiB);
  // Shared memory on a 2 MiB boundary (address and offset agree): it can be collapsed, and inspect says so.
  EXPECT_EQ(c.at(0x7f0000800000ull)->why, HUGIFY_WHY_SHMEM_NOT_HUGE);
  EXPECT_GE(r.collapsible, 512 * KiB);
  // Anonymous code (a JIT, or text hugify moved): class code, object "[anon]", half on THP.
  EXPECT_EQ(c.at(0x7f0000c00000)->memory_class, HUGIFY_CLASS_CODE);
  ASSERT_EQ(r.object_count, 1u);
  EXPECT_STREQ(r.objects[0].path, "[anon]");
  EXPECT_EQ(r.objects[0].code.thp, 2 * MiB);
  // A private 1 GiB hugetlb mapping is anonymous memory on 1G pages (smaps leaves it out of Rss).
  EXPECT_EQ(c.at(0x7f0040000000)->memory_class, HUGIFY_CLASS_ANON);
  EXPECT_EQ(r.classes[HUGIFY_CLASS_ANON].hugetlb_1g, 1 * GiB);
  EXPECT_EQ(r.total.hugetlb_1g, 1 * GiB);
  // Data segment of a library: file class, copy-on-write pages counted as anonymous.
  EXPECT_EQ(c.at(0x7f0080200000)->memory_class, HUGIFY_CLASS_FILE);
  EXPECT_EQ(r.classes[HUGIFY_CLASS_FILE].anonymous, 32 * KiB);
  // Malloc arenas: the PROT_NONE rest of an arena is too big for a guard page, so no stacks.
  EXPECT_EQ(r.stacks_by_guard, 0u);
  EXPECT_EQ(c.at(0x7f0088000000)->memory_class, HUGIFY_CLASS_ANON);
}

TEST(CollapseEligibility, OnlyPrivateAnonymousWritableMemoryWithAWindow) {
  parsed p("smaps/collapse_target.txt");
  const uint64_t pmd = 2 * MiB;
  EXPECT_TRUE(vma_collapse_eligible(p.at(0x7fce44a6e000), pmd));  // heap chunk
  EXPECT_TRUE(vma_collapse_eligible(p.at(0x7fce43600000), pmd));  // small
  EXPECT_TRUE(vma_collapse_eligible(p.at(0x7fce42800000), pmd));  // thp (already huge: skipped per window)
  EXPECT_FALSE(vma_collapse_eligible(p.at(0x7fce44000000), pmd)); // MADV_NOHUGEPAGE
  EXPECT_FALSE(vma_collapse_eligible(p.at(0x7fce42000000), pmd)); // thread stack: nh from MAP_STACK
  EXPECT_FALSE(vma_collapse_eligible(p.at(0x7fce43200000), pmd)); // hugetlb
  EXPECT_FALSE(vma_collapse_eligible(p.at(0x7fce4486e000), pmd)); // shared
  EXPECT_FALSE(vma_collapse_eligible(p.at(0x7fce48a98000), pmd)); // file
  EXPECT_FALSE(vma_collapse_eligible(p.at(0x563c5e5f2000), pmd)); // [heap] < 2 MiB
  EXPECT_FALSE(vma_collapse_eligible(p.at(0x7fce417fe000), pmd)); // guard page
}

TEST(CollapseEligibility, AlignedWindowBytes) {
  const uint64_t w = 2 * MiB;
  EXPECT_EQ(aligned_window_bytes(0, 4 * MiB, w), 4 * MiB);
  EXPECT_EQ(aligned_window_bytes(4096, 4 * MiB, w), 2 * MiB);
  EXPECT_EQ(aligned_window_bytes(4096, 4 * MiB - 4096, w), 0u);
  EXPECT_EQ(aligned_window_bytes(2 * MiB, 2 * MiB, w), 0u);
  EXPECT_EQ(aligned_window_bytes(0x7fce44a6e000, 0x7fce48a72000, w), 62 * MiB);
}

TEST(InspectNames, StableNames) {
  EXPECT_STREQ(hugify_memory_class_name(HUGIFY_CLASS_CODE), "code");
  EXPECT_STREQ(hugify_memory_class_name(HUGIFY_CLASS_FILE), "file");
  EXPECT_STREQ(hugify_not_huge_reason_name(HUGIFY_WHY_NOT_ADVISED), "not_advised");
  EXPECT_STREQ(hugify_not_huge_reason_name(HUGIFY_WHY_COUNT), "?");
  for (int w = 0; w < HUGIFY_WHY_COUNT; w++)
    EXPECT_GT(strlen(hugify_not_huge_reason_text(static_cast<hugify_not_huge_reason>(w))), 10u);
  EXPECT_STREQ(hugify_not_huge_reason_name(HUGIFY_WHY_THP_EXCEPT_ADVISED), "thp_except_advised");
  EXPECT_STREQ(hugify_not_huge_reason_name(HUGIFY_WHY_THP_NOT_ELIGIBLE), "thp_not_eligible");
  EXPECT_STREQ(hugify_thp_stance_name(HUGIFY_THP_STANCE_DISABLED_EXCEPT_ADVISED), "disabled_except_advised");
  EXPECT_STREQ(hugify_thp_stance_name(HUGIFY_THP_STANCE_UNKNOWN), "unknown");
}

// ---- what a program excluded from THP ----
// tests/fixtures/smaps/except_advised_always.txt and enabled_always.txt were captured on Linux 6.18 with
// THP enabled=always from two processes of
//   collapse_target --small 8M --advised 8M --nohuge 8M [--except-advised]
// (with: nohuge 0x7f66a6400000, small 0x7f66a5800000, advised 0x7f66a4c00000; without: nohuge
// 0x7fa6cf600000, small 0x7fa6cea00000, advised 0x7fa6cde00000); except_advised_madvise.txt is the first
// process again right after enabled was set back to madvise, where its opt-out no longer shows.
constexpr uint64_t kSmall = 0x7f66a5800000, kAdvised = 0x7f66a4c00000, kNoHuge = 0x7f66a6400000;
constexpr uint64_t kEnabledSmall = 0x7fa6cea00000;

TEST(ThpStance, ExceptAdvisedShowsOnlyWhileASizeIsAlways) {
  parsed always("smaps/except_advised_always.txt"), madvise("smaps/except_advised_madvise.txt"),
      enabled("smaps/enabled_always.txt");
  ASSERT_GT(always.count, 0);
  ASSERT_GT(madvise.count, 0);
  ASSERT_GT(enabled.count, 0);
  auto stance = [](const parsed &p, int thp_disabled, bool visible) {
    return inspect_thp_stance(thp_disabled, visible, p.vmas, static_cast<size_t>(p.count), 2 * MiB);
  };
  EXPECT_EQ(stance(always, 0, true), HUGIFY_THP_STANCE_DISABLED_EXCEPT_ADVISED);
  EXPECT_EQ(stance(enabled, 0, true), HUGIFY_THP_STANCE_ENABLED);
  EXPECT_EQ(stance(madvise, 0, false), HUGIFY_THP_STANCE_UNKNOWN) << "the kernel shows no difference";
  EXPECT_EQ(stance(enabled, 1, true), HUGIFY_THP_STANCE_DISABLED);
  EXPECT_EQ(stance(enabled, -1, true), HUGIFY_THP_STANCE_UNKNOWN);
}

TEST(ThpStance, WhatEachMappingExcludes) {
  parsed always("smaps/except_advised_always.txt"), enabled("smaps/enabled_always.txt");
  const uint64_t pmd = 2 * MiB;
  const auto except = HUGIFY_THP_STANCE_DISABLED_EXCEPT_ADVISED;
  EXPECT_EQ(vma_opt_out(always.at(kSmall), except, true, pmd), HUGIFY_WHY_THP_EXCEPT_ADVISED);
  EXPECT_EQ(vma_opt_out(always.at(kAdvised), except, true, pmd), HUGIFY_WHY_NONE);
  EXPECT_EQ(vma_opt_out(always.at(kNoHuge), except, true, pmd), HUGIFY_WHY_NOHUGEPAGE);
  EXPECT_EQ(vma_opt_out(always.at(kAdvised), HUGIFY_THP_STANCE_DISABLED, true, pmd), HUGIFY_WHY_THP_DISABLED);
  EXPECT_EQ(vma_opt_out(enabled.at(kEnabledSmall), HUGIFY_THP_STANCE_ENABLED, true, pmd), HUGIFY_WHY_NONE);
  // THPeligible: 0 for no reason hugify can name, while a size is "always": left alone; unseen otherwise.
  smaps_vma refused = *enabled.at(kEnabledSmall);
  refused.thp_eligible = 0;
  EXPECT_EQ(vma_opt_out(&refused, HUGIFY_THP_STANCE_ENABLED, true, pmd), HUGIFY_WHY_THP_NOT_ELIGIBLE);
  EXPECT_EQ(vma_opt_out(&refused, HUGIFY_THP_STANCE_UNKNOWN, false, pmd), HUGIFY_WHY_NONE);
  EXPECT_TRUE(opt_out_overridable(HUGIFY_WHY_THP_EXCEPT_ADVISED));
  EXPECT_TRUE(opt_out_overridable(HUGIFY_WHY_THP_NOT_ELIGIBLE));
  EXPECT_FALSE(opt_out_overridable(HUGIFY_WHY_NOHUGEPAGE)) << "the kernel refuses it itself";
  EXPECT_FALSE(opt_out_overridable(HUGIFY_WHY_THP_DISABLED)) << "the kernel refuses it itself";
}

TEST(ThpStance, InspectNamesTheExclusionAndDoesNotCountItCollapsible) {
  parsed always("smaps/except_advised_always.txt");
  classified c;
  inspect_context context{};
  context.thp_disabled = 0;
  context.thp_stance_visible = true;
  context.thp_mode = "always";
  context.shmem_mode = "never";
  context.pmd_size = 2 * MiB;
  ASSERT_EQ(inspect_classify(always.vmas, static_cast<size_t>(always.count), &context, &c.report), 0);
  EXPECT_EQ(c.report.thp_stance, HUGIFY_THP_STANCE_DISABLED_EXCEPT_ADVISED);
  EXPECT_EQ(c.at(kSmall)->why, HUGIFY_WHY_THP_EXCEPT_ADVISED);
  EXPECT_EQ(c.at(kAdvised)->why, HUGIFY_WHY_NOT_COLLAPSED);
  EXPECT_EQ(c.report.collapsible, 8 * MiB) << "only the advised region";
}

// The allocator's setting is named only when its heap shows memory given back inside huge pages.
TEST(InspectChurnAdvice, OnlyForAKnownAllocatorWhoseHeapIsPartlySplit) {
  hugify_inspect_report r{};
  std::snprintf(r.allocator, sizeof r.allocator, "jemalloc");
  std::snprintf(r.thp_mode, sizeof r.thp_mode, "madvise");
  r.classes[HUGIFY_CLASS_HEAP].thp = 8 * MiB;
  r.collapsible = 4 * MiB;
  const char *advice = inspect_churn_advice(&r);
  ASSERT_NE(advice, nullptr);
  EXPECT_NE(std::strstr(advice, "MALLOC_CONF"), nullptr) << advice;
  r.classes[HUGIFY_CLASS_HEAP].thp = 0; // never huge under madvise: nothing was given back inside a huge page
  EXPECT_EQ(inspect_churn_advice(&r), nullptr);
  std::snprintf(r.thp_mode, sizeof r.thp_mode, "always"); // would have been huge from the first fault
  EXPECT_NE(inspect_churn_advice(&r), nullptr);
  r.collapsible = 0; // nothing on 4 KiB pages that could be huge
  EXPECT_EQ(inspect_churn_advice(&r), nullptr);
  r.collapsible = 4 * MiB;
  r.allocator[0] = '\0'; // not identified: no setting to name
  EXPECT_EQ(inspect_churn_advice(&r), nullptr);
}

}  // namespace
