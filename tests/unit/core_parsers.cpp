// SPDX-License-Identifier: MIT
// Parsers and pure helpers of the core: smaps, keyed files, sysfs names, sizes, HUGIFY_* options.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include <unistd.h>

#include "test_support.hpp"

extern "C" {
#include "array.h"
#include "options.h"
#include "procfs.h"
#include "reason.h"
#include "units.h"
}

namespace {

TEST(Smaps, ParsesThisMachineWithThpHugetlbAnd4K) {
  // Captured on this machine kind: a process holding an 8 MiB THP block, a 4 MiB hugetlb 2M block and a
  // 1 MiB block on 4 KiB pages (hugify_alloc with POPULATE).
  std::string text = test_support::fixture("alloc/smaps_thp_hugetlb_4k.txt");
  struct smaps_vma *vmas = nullptr;
  long count = parse_smaps(text.c_str(), &vmas);
  ASSERT_GT(count, 10);
  const smaps_vma *hugetlb = nullptr, *thp = nullptr;
  for (long i = 0; i < count; i++) {
    if (vmas[i].start == 0x7f095e400000ULL) hugetlb = &vmas[i];
    if (vmas[i].start == 0x7f095e800000ULL) thp = &vmas[i];
  }
  ASSERT_NE(hugetlb, nullptr);
  EXPECT_EQ(hugetlb->end, 0x7f095e800000ULL);
  EXPECT_STREQ(hugetlb->path, "/anon_hugepage (deleted)");
  EXPECT_STREQ(hugetlb->perms, "rw-p");
  EXPECT_EQ(hugetlb->kernel_page_size, 2u << 20);
  EXPECT_EQ(hugetlb->private_hugetlb, 4u << 20);
  EXPECT_TRUE(hugetlb->vm_flags & SMAPS_VM_HUGETLB);
  EXPECT_TRUE(smaps_vma_is_hugetlb(hugetlb));
  EXPECT_EQ(smaps_vma_hugetlb_bytes(hugetlb), 4u << 20);
  EXPECT_EQ(hugetlb->thp_eligible, 0);
  ASSERT_NE(thp, nullptr);
  EXPECT_EQ(thp->anon_huge, 8u << 20);
  EXPECT_EQ(smaps_vma_thp_bytes(thp), 8u << 20);
  EXPECT_TRUE(thp->vm_flags & SMAPS_VM_HUGEPAGE);
  EXPECT_FALSE(smaps_vma_is_hugetlb(thp));
  // Every mapping of the fixture parsed with a size that matches its address range.
  for (long i = 0; i < count; i++) EXPECT_EQ(vmas[i].size, vmas[i].end - vmas[i].start) << vmas[i].path;
  free(vmas);
}

TEST(Smaps, ParsesMapsTextWithoutFields) {
  const char *maps =
      "55d0c0a00000-55d0c0a21000 r--p 00000000 fd:01 1312 /usr/bin/cat\n"
      "7ffd1c1f0000-7ffd1c211000 rw-p 00000000 00:00 0                          [stack]\n"
      "7f0000000000-7f0000001000 ---p 00000000 00:00 0 \n";
  struct smaps_vma *vmas = nullptr;
  ASSERT_EQ(parse_smaps(maps, &vmas), 3);
  EXPECT_STREQ(vmas[0].path, "/usr/bin/cat");
  EXPECT_EQ(vmas[0].inode, 1312u);
  EXPECT_STREQ(vmas[0].device, "fd:01");
  EXPECT_STREQ(vmas[1].path, "[stack]");
  EXPECT_STREQ(vmas[2].path, "");
  EXPECT_EQ(vmas[2].thp_eligible, -1);
  EXPECT_FALSE(vmas[0].has_vm_flags);
  free(vmas);
}

TEST(Smaps, RejectsFieldsBeforeAnyMapping) {
  struct smaps_vma *vmas = nullptr;
  errno = 0;
  EXPECT_EQ(parse_smaps("Rss: 4 kB\n", &vmas), -EINVAL);
  EXPECT_EQ(errno, 0) << "the error is returned, errno is left alone";
  EXPECT_EQ(parse_smaps("zz-yy r--p\n", &vmas), -EINVAL);
}

TEST(SmapsRollup, TotalsOfAProcess) {
  // captured from this machine (tests/fixtures/smaps/rollup_this_machine.txt), and a kernel thread's (empty)
  std::string text = test_support::fixture("smaps/rollup_this_machine.txt");
  smaps_rollup r;
  ASSERT_TRUE(parse_smaps_rollup(text.c_str(), &r));
  uint64_t rss = 0, anonymous = 0;
  ASSERT_TRUE(parse_keyed_value(text.c_str(), "Rss", &rss));
  ASSERT_TRUE(parse_keyed_value(text.c_str(), "Anonymous", &anonymous));
  EXPECT_EQ(r.rss, rss);
  EXPECT_EQ(r.anonymous, anonymous);
  EXPECT_LE(r.anon_thp, r.anonymous);
  EXPECT_FALSE(parse_smaps_rollup("", &r));
  // AnonHugePages above Anonymous (the two are read at slightly different moments) is capped
  ASSERT_TRUE(parse_smaps_rollup("Rss: 8 kB\nAnonymous: 4 kB\nAnonHugePages: 2048 kB\nPrivate_Hugetlb: 2048 kB\n"
                                 "Shared_Hugetlb: 2048 kB\n", &r));
  EXPECT_EQ(r.anon_thp, 4096u);
  EXPECT_EQ(r.hugetlb, 4096u << 10);
}

TEST(Schedstat, RunAndWaitOfAThread) {
  // /proc/1/task/1/schedstat, captured on this machine kind (Linux 6.18 guest)
  std::string text = test_support::fixture("schedstat/init_thread");
  uint64_t run = 0, wait = 0;
  ASSERT_TRUE(parse_schedstat(text.c_str(), &run, &wait)) << text;
  EXPECT_EQ(run, 190644450u);
  EXPECT_EQ(wait, 26792029u);
  for (const char *bad : {"", "x 1 2", "12", "12 y", "99999999999999999999999 1 1"})
    EXPECT_FALSE(parse_schedstat(bad, &run, &wait)) << bad;
}

// A /proc/PID file read while its process exits can come back cut short at any byte. Every prefix of a real
// file either parses to the whole file's value or fails: never a shorter number taken for the value.
TEST(ProcFilesCutShort, EveryPrefixParsesRightOrFails) {
  std::string stat = test_support::fixture("stat/cat-6.18.txt"), status = test_support::fixture("status/root-6.18.txt");
  uint64_t start = 0;
  unsigned long flags = 0;
  ASSERT_TRUE(parse_stat_start_time(stat.c_str(), &start)) << stat;
  EXPECT_EQ(start, 1140052u);
  ASSERT_TRUE(parse_stat_flags(stat.c_str(), &flags));
  EXPECT_EQ(flags, 4194304u);
  uint64_t rss_pages = 0;
  ASSERT_TRUE(parse_stat_rss(stat.c_str(), &rss_pages));
  EXPECT_EQ(rss_pages, 416u);
  uint64_t faults = 0;
  ASSERT_TRUE(parse_stat_faults(stat.c_str(), &faults));
  EXPECT_EQ(faults, 126u); // minflt 126, majflt 0
  size_t parsed = 0;
  for (size_t length = 0; length < stat.size(); length++) {
    std::string cut = stat.substr(0, length);
    uint64_t got = 0;
    unsigned long got_flags = 0;
    if (parse_stat_start_time(cut.c_str(), &got)) {
      EXPECT_EQ(got, start) << cut;
      parsed++;
    }
    if (parse_stat_flags(cut.c_str(), &got_flags)) {
      EXPECT_EQ(got_flags, flags) << cut;
    }
    if (parse_stat_rss(cut.c_str(), &got)) {
      EXPECT_EQ(got, rss_pages) << cut;
    }
    if (parse_stat_faults(cut.c_str(), &got)) {
      EXPECT_EQ(got, faults) << cut;
    }
  }
  EXPECT_GT(parsed, 0u) << "prefixes that hold the start time and the next field parse";
  for (const char *bad : {"", "12570 (cat", "12570 (cat) R 1 2 3 0 -1 4194304 126 0 0 0 0 0 0 0 20 0 1 0 114",
                          "12570 (cat) R 1 2 3 0 -1 4194304 126 0 0 0 0 0 0 0 20 0 1 0 x 3133440 "})
    EXPECT_FALSE(parse_stat_start_time(bad, &start)) << bad;
  uint64_t rss = 0, thp = 0;
  char uid[64], name[64];
  ASSERT_TRUE(parse_keyed_value(status.c_str(), "VmRSS", &rss));
  ASSERT_TRUE(parse_keyed_value(status.c_str(), "THP_enabled", &thp));
  ASSERT_TRUE(parse_keyed_text(status.c_str(), "Uid", uid, sizeof uid));
  ASSERT_TRUE(parse_keyed_text(status.c_str(), "Name", name, sizeof name));
  for (size_t length = 0; length < status.size(); length++) {
    std::string cut = status.substr(0, length);
    uint64_t value = 0;
    char text[64];
    // each parse either fails or gives the whole file's value
    value = rss;
    parse_keyed_value(cut.c_str(), "VmRSS", &value);
    EXPECT_EQ(value, rss) << cut.size();
    value = thp;
    parse_keyed_value(cut.c_str(), "THP_enabled", &value);
    EXPECT_EQ(value, thp) << cut.size();
    snprintf(text, sizeof text, "%s", uid);
    parse_keyed_text(cut.c_str(), "Uid", text, sizeof text);
    EXPECT_STREQ(text, uid) << cut.size();
    snprintf(text, sizeof text, "%s", name);
    parse_keyed_text(cut.c_str(), "Name", text, sizeof text);
    EXPECT_STREQ(text, name) << cut.size();
  }
}

TEST(KeyedValue, MeminfoAndVmstat) {
  std::string meminfo = test_support::fixture("alloc/meminfo.txt");
  uint64_t value = 0;
  ASSERT_TRUE(parse_keyed_value(meminfo.c_str(), "Hugepagesize", &value));
  EXPECT_EQ(value, 2u << 20);
  ASSERT_TRUE(parse_keyed_value(meminfo.c_str(), "HugePages_Total", &value));  // a count, no kB
  EXPECT_LT(value, 100000u);
  EXPECT_FALSE(parse_keyed_value(meminfo.c_str(), "Hugepage", &value));  // a prefix is not a key
  EXPECT_TRUE(parse_keyed_value("thp_fault_alloc 12\nthp_fault_fallback 3\n", "thp_fault_fallback", &value));
  EXPECT_EQ(value, 3u);
}

TEST(SysfsNames, HugepagesDirectories) {
  uint64_t bytes = 0;
  EXPECT_TRUE(parse_hugepages_dir_name("hugepages-2048kB", &bytes));
  EXPECT_EQ(bytes, 2u << 20);
  EXPECT_TRUE(parse_hugepages_dir_name("hugepages-1048576kB", &bytes));
  EXPECT_EQ(bytes, 1ull << 30);
  EXPECT_FALSE(parse_hugepages_dir_name("hugepages-kB", &bytes));
  EXPECT_FALSE(parse_hugepages_dir_name("hugepages-2048", &bytes));
  EXPECT_FALSE(parse_hugepages_dir_name("node0", &bytes));
}

TEST(SysfsNames, BracketedChoice) {
  char out[32];
  parse_bracketed_choice("always [madvise] never\n", out, sizeof out);
  EXPECT_STREQ(out, "madvise");
  parse_bracketed_choice("always defer defer+madvise [madvise] never", out, sizeof out);
  EXPECT_STREQ(out, "madvise");
  parse_bracketed_choice("[always] madvise never", out, sizeof out);
  EXPECT_STREQ(out, "always");
  parse_bracketed_choice("  511\n", out, sizeof out);
  EXPECT_STREQ(out, "511");
}

TEST(Loadavg, OneMinuteLoadOfRealAndConstructedFiles) {
  double load = -1;
  std::string busy = test_support::read_file(std::string(HUGIFY_FIXTURES_DIR) + "/loadavg/kvm-6.18-busy");
  ASSERT_TRUE(parse_loadavg(busy.c_str(), &load)) << busy;
  EXPECT_NEAR(load, std::stod(busy), 1e-9);
  std::string idle = test_support::read_file(std::string(HUGIFY_FIXTURES_DIR) + "/loadavg/idle");
  ASSERT_TRUE(parse_loadavg(idle.c_str(), &load));
  EXPECT_EQ(load, 0.0);
  for (const char *bad : {"", " 0.5 0.5 0.5", "-1 0 0", "nan 0 0", "inf", "0.5x 1 1", "1e99 0 0"}) {
    load = 7;
    EXPECT_FALSE(parse_loadavg(bad, &load)) << bad;
    EXPECT_EQ(load, 7) << "untouched: " << bad;
  }
}

TEST(Capabilities, EffectiveSetOfRootAndOfAnUnprivilegedUser) {
  uint64_t caps = 0;
  std::string root = test_support::read_file(std::string(HUGIFY_FIXTURES_DIR) + "/status/root-6.18.txt");
  ASSERT_TRUE(parse_capabilities(root.c_str(), &caps));
  EXPECT_EQ(caps, UINT64_C(0x000001fffeffffff));
  EXPECT_TRUE((caps >> 23) & 1) << "CAP_SYS_NICE";
  EXPECT_TRUE((caps >> 19) & 1) << "CAP_SYS_PTRACE";
  std::string nobody = test_support::read_file(std::string(HUGIFY_FIXTURES_DIR) + "/status/nobody-6.18.txt");
  ASSERT_TRUE(parse_capabilities(nobody.c_str(), &caps));
  EXPECT_EQ(caps, 0u);
  for (const char *bad : {"", "CapEff:\n", "CapEff:\tzz\n", "CapEff:\t00000000000000000001\n", "CapInh:\t0\n",
                          "CapEff:\t1f x\n"}) {
    caps = 7;
    EXPECT_FALSE(parse_capabilities(bad, &caps)) << bad;
    EXPECT_EQ(caps, 7u) << "untouched: " << bad;
  }
}

// A reason that does not fit its buffer ends at a blank with "...": never in the middle of a word.
TEST(Reason, TooLongEndsBetweenWordsAndLongWordsAreLeftOut) {
  char reason[48] = "";
  reason_add(reason, sizeof reason, "first clause");
  reason_add(reason, sizeof reason, "%s", "the second clause is much too long for the buffer it goes into");
  std::string text = reason;
  EXPECT_EQ(text.rfind("first clause; the second", 0), 0u) << text;
  ASSERT_GE(text.size(), 3u);
  EXPECT_EQ(text.substr(text.size() - 3), "...") << text;
  std::string full = "first clause; the second clause is much too long for the buffer it goes into";
  std::string kept = text.substr(0, text.size() - 3);
  EXPECT_EQ(full.compare(0, kept.size(), kept), 0) << text;
  EXPECT_EQ(full[kept.size()], ' ') << "cut at a blank: " << text;
  EXPECT_LT(text.size(), sizeof reason);

  char other[24] = "kept";
  reason_add(other, sizeof other, "%s", "/a/very/long/path/without/blanks");
  EXPECT_STREQ(other, "kept") << "a clause with no blank to end at is left out, with its separator";
  char fits[64] = "";
  reason_add(fits, sizeof fits, "short %d", 1);
  reason_add(fits, sizeof fits, "and %s", "more");
  EXPECT_STREQ(fits, "short 1; and more");
}

TEST(Units, ParseSize) {
  uint64_t v = 0;
  const std::map<std::string, uint64_t> good = {
      {"2M", 2u << 20}, {"2MB", 2u << 20}, {"2048kB", 2u << 20}, {"2048K", 2u << 20}, {"1G", 1ull << 30},
      {"1GB", 1ull << 30}, {"1GiB", 1ull << 30}, {"4096", 4096}, {"8g", 8ull << 30}, {"0", 0}};
  for (const auto &[text, bytes] : good) {
    EXPECT_TRUE(parse_size(text.c_str(), &v)) << text;
    EXPECT_EQ(v, bytes) << text;
  }
  for (const char *bad : {"", "M", "2X", "-1", "2 M", "1.5G", "99999999999999999999", "17179869184T"})
    EXPECT_FALSE(parse_size(bad, &v)) << bad;
}

// Every parser's words compare ASCII letters without case, whatever the locale, and nothing else.
TEST(Units, WordsEqualIgnoresTheCaseOfAsciiLettersOnly) {
  // 0x40/0x60 and 0x5b/0x7b differ by the case bit but are not letters; the Turkish dotted capital I is no 'i'
  const struct { const char *a, *b; bool equal; } cases[] = {
      {"MiB", "mib", true}, {"", "", true},     {"AUTO", "auto", true}, {"auto", "aut", false},
      {"aut", "auto", false}, {"@", "`", false}, {"[", "{", false},     {"\xc4\xb0", "i", false}};
  for (const auto &c : cases) EXPECT_EQ(words_equal(c.a, c.b), c.equal) << c.a << " / " << c.b;
  bool on = false;
  EXPECT_TRUE(options_parse_bool("YES", &on) && on);
  uint64_t bytes = 0;
  EXPECT_TRUE(parse_size("2mIb", &bytes) && bytes == (2u << 20));
}

// A release number against the one a fix came in (glibc 2.38 for the THP-mode buffer the preload works around).
TEST(Units, VersionAtLeastComparesMajorThenMinor) {
  const struct { const char *text; bool at_least_2_38; } cases[] = {
      {"2.38", true},   {"2.41", true},    {"2.100", true}, {"3.0", true},  {"2.36", false}, {"2.37.9", false},
      {"2.3", false},   {"1.99", false},   {"2.38.1-rc", true}, {"", false}, {"2", false},    {"2.", false},
      {".38", false},   {"v2.38", false},  {"2.-38", false}, {"99999999999999999999.1", false}};
  for (const auto &c : cases) EXPECT_EQ(version_at_least(c.text, 2, 38), c.at_least_2_38) << c.text;
  EXPECT_TRUE(version_at_least("6.18.0-hugify", 6, 7));
  EXPECT_FALSE(version_at_least("6.1.158", 6, 7));
}

// A number read back from a report or a state file (JSON's numbers are doubles) as a count: only what fits
// [0, 2^63) is one (converting any other double to an integer is undefined), and a fraction is cut.
TEST(Units, CountFromDoubleTakesOnlyWhatFitsACount) {
  const struct { double value; bool taken; uint64_t count; } cases[] = {
      {0, true, 0},          {-0.0, true, 0},       {4096.9, true, 4096},  {0x1p63 - 1024, true, 9223372036854774784u},
      {-0.5, false, 0},      {-3489790, false, 0},  {0x1p63, false, 0},    {1e300, false, 0},
      {NAN, false, 0},       {INFINITY, false, 0},  {-INFINITY, false, 0}};
  for (const auto &c : cases) {
    uint64_t count = 77;
    EXPECT_EQ(count_from_double(c.value, &count), c.taken) << c.value;
    EXPECT_EQ(count, c.taken ? c.count : 77u) << c.value;
  }
}

// What people type for counts and for seconds or percentages: digits only, within the bounds, or refused.
TEST(Units, CountsAndDecimalsAsTyped) {
  uint64_t count = 7;
  EXPECT_TRUE(parse_count("12", 6, 1000, &count));
  EXPECT_EQ(count, 12u);
  EXPECT_TRUE(parse_count("18446744073709551615", 0, UINT64_MAX, &count));
  EXPECT_EQ(count, UINT64_MAX);
  count = 7;
  for (const char *bad : {"", "5", "1001", "-12", "+12", " 12", "12 ", "0x10", "1e3", "12.0", "18446744073709551616"})
    EXPECT_FALSE(parse_count(bad, 6, 1000, &count)) << bad;
  EXPECT_EQ(count, 7u) << "untouched when refused";
  double d = -1;
  const std::vector<std::pair<std::string, double>> good = {{"0.5", 0.5}, {"10", 10}, {".5", 0.5}, {"5.", 5},
                                                            {"2e-3", 0.002}, {"1E+2", 100}, {"86400", 86400}};
  for (const auto &[text, value] : good) {
    EXPECT_TRUE(parse_decimal(text.c_str(), 0, 86400, &d)) << text;
    EXPECT_DOUBLE_EQ(d, value) << text;
  }
  d = -1;
  for (const char *bad : {"", ".", "-1", "+1", " 1", "1 ", "0x10", "inf", "nan", "1e", "1e+", "1..2", "86401",
                          "1e999", "5%"})
    EXPECT_FALSE(parse_decimal(bad, 0, 86400, &d)) << bad;
  EXPECT_EQ(d, -1) << "untouched when refused";
  EXPECT_FALSE(parse_decimal(nullptr, 0, 1, &d));
  EXPECT_FALSE(parse_decimal("0.01", 0.05, 1, &d)) << "below the low bound";
}

TEST(Units, FormatBytes) {
  char out[32];
  format_bytes(2u << 20, out, sizeof out);
  EXPECT_STREQ(out, "2 MiB");
  format_bytes(1536ull << 20, out, sizeof out);
  EXPECT_STREQ(out, "1.5 GiB");
  format_bytes(17, out, sizeof out);
  EXPECT_STREQ(out, "17 B");
  format_page_size(2u << 20, out, sizeof out);
  EXPECT_STREQ(out, "2M");
  format_page_size(1ull << 30, out, sizeof out);
  EXPECT_STREQ(out, "1G");
}

const char *lookup_table(const char *name, void *context) {
  auto *table = static_cast<std::map<std::string, std::string> *>(context);
  auto it = table->find(name);
  return it == table->end() ? nullptr : it->second.c_str();
}

TEST(Options, DefaultsWhenNothingIsSet) {
  std::map<std::string, std::string> env;
  hugify_options options;
  char warnings[512] = "";
  EXPECT_EQ(options_parse(lookup_table, &env, &options, warnings, sizeof warnings), 0);
  EXPECT_FALSE(options.text);
  EXPECT_EQ(options.heap, HEAP_OFF);
  EXPECT_STREQ(warnings, "");
}

// options_from_environment writes onto a zeroed struct only what is not zero (the preload's start touches no
// string); what it gives must be byte for byte what options_parse gives for the same variables.
TEST(Options, FromTheEnvironmentOntoZeroIsWhatTheParserGives) {
  std::map<std::string, std::string> env = {{"HUGIFY_HEAP", "thp"}, {"HUGIFY_TEXT", "auto"},
                                            {"HUGIFY_TEXT_INCLUDE", "*/libfoo.so"}};
  std::map<std::string, std::string> saved;
  for (char **entry = environ; *entry; entry++)
    if (strncmp(*entry, "HUGIFY_", 7) == 0) {
      std::string line = *entry;
      saved[line.substr(0, line.find('='))] = line.substr(line.find('=') + 1);
    }
  for (const auto &[name, value] : saved) unsetenv(name.c_str());
  for (const auto &[name, value] : env) setenv(name.c_str(), value.c_str(), 1);
  auto parsed = std::make_unique<hugify_options>();
  memset(parsed.get(), 0xa5, sizeof *parsed);  // options_parse clears whatever it is given
  auto from_environment = std::make_unique<hugify_options>();  // value-initialized: zero
  char warnings[512] = "";
  EXPECT_EQ(options_parse(lookup_table, &env, parsed.get(), warnings, sizeof warnings), 0) << warnings;
  EXPECT_EQ(options_from_environment(from_environment.get(), warnings, sizeof warnings), 0) << warnings;
  for (const auto &[name, value] : env) unsetenv(name.c_str());
  for (const auto &[name, value] : saved) setenv(name.c_str(), value.c_str(), 1);
  EXPECT_EQ(from_environment->heap, HEAP_THP);
  EXPECT_EQ(from_environment->text, TEXT_AUTO);
  EXPECT_STREQ(from_environment->text_include, "*/libfoo.so");
  EXPECT_EQ(memcmp(parsed.get(), from_environment.get(), sizeof *parsed), 0);
}

TEST(Options, GoodValues) {
  std::map<std::string, std::string> env = {{"HUGIFY_TEXT", "1"}, {"HUGIFY_HEAP", "auto"},
                                            {"HUGIFY_TEXT_MIN_SIZE", "4M"}, {"HUGIFY_REPORT", "/tmp/r.json"},
                                            {"HUGIFY_ALLOCATOR_DIRS", "/opt/a/lib:/opt/b/lib"}};
  hugify_options options;
  char warnings[512] = "";
  EXPECT_EQ(options_parse(lookup_table, &env, &options, warnings, sizeof warnings), 0);
  EXPECT_TRUE(options.text);
  EXPECT_EQ(options.heap, HEAP_AUTO);
  EXPECT_EQ(options.text_min_size, 4u << 20);
  EXPECT_STREQ(options.report, "/tmp/r.json");
  EXPECT_STREQ(options.test.allocator_dirs, "/opt/a/lib:/opt/b/lib");
}

TEST(Options, TextModeAndItsCpuThreshold) {
  hugify_options options;
  char warnings[512] = "";
  std::map<std::string, std::string> unset;
  options_parse(lookup_table, &unset, &options, warnings, sizeof warnings);
  EXPECT_EQ(options.text_after_ms, unsigned(OPTIONS_TEXT_AFTER_MS));
  for (const auto &[value, mode] : std::map<std::string, text_mode>{{"auto", TEXT_AUTO}, {"AUTO", TEXT_AUTO},
                                                                     {"1", TEXT_NOW}, {"on", TEXT_NOW}, {"0", TEXT_OFF}}) {
    std::map<std::string, std::string> env = {{"HUGIFY_TEXT", value}, {"HUGIFY_TEXT_AFTER_MS", "50"}};
    EXPECT_EQ(options_parse(lookup_table, &env, &options, warnings, sizeof warnings), 0) << value << ": " << warnings;
    EXPECT_EQ(options.text, mode) << value;
    EXPECT_EQ(options.text_after_ms, 50u);
  }
  std::map<std::string, std::string> bad = {{"HUGIFY_TEXT", "later"}, {"HUGIFY_TEXT_AFTER_MS", "1h"}};
  warnings[0] = '\0';
  EXPECT_EQ(options_parse(lookup_table, &bad, &options, warnings, sizeof warnings), 2);
  EXPECT_EQ(options.text, TEXT_OFF);
  EXPECT_EQ(options.text_after_ms, unsigned(OPTIONS_TEXT_AFTER_MS));
  EXPECT_NE(strstr(warnings, "HUGIFY_TEXT=later: expected 0, 1 or auto"), nullptr) << warnings;
}

TEST(Options, BadValuesKeepDefaultsWithOneWarningEach) {
  std::map<std::string, std::string> env = {{"HUGIFY_TEXT", "maybe"}, {"HUGIFY_HEAP", "banana"},
                                            {"HUGIFY_TEXT_FAIL_STEP", "0"}, {"HUGIFY_VERBOSE", "1"}};
  hugify_options options;
  char warnings[1024] = "";
  EXPECT_EQ(options_parse(lookup_table, &env, &options, warnings, sizeof warnings), 3);
  EXPECT_FALSE(options.text);
  EXPECT_EQ(options.heap, HEAP_OFF);
  EXPECT_EQ(options.test.text_fail_step, 0);
  EXPECT_TRUE(options.verbose);
  EXPECT_NE(strstr(warnings, "HUGIFY_HEAP=banana"), nullptr) << warnings;
  EXPECT_NE(strstr(warnings, "HUGIFY_TEXT=maybe"), nullptr) << warnings;
}

}  // namespace

// inspect reads a CPython process's PYTHONMALLOC from the environment it started with.
TEST(Environ, ValueOfANameInProcEnviron) {
  std::string text = test_support::fixture("environ/python3-malloc.environ");
  char value[32];
  ASSERT_TRUE(parse_environ_value(text.data(), text.size(), "PYTHONMALLOC", value, sizeof value));
  EXPECT_STREQ(value, "malloc");
  ASSERT_TRUE(parse_environ_value(text.data(), text.size(), "HOME", value, sizeof value));
  EXPECT_STREQ(value, "/root");
  EXPECT_FALSE(parse_environ_value(text.data(), text.size(), "PYTHON", value, sizeof value)) << "a whole name only";
  EXPECT_FALSE(parse_environ_value(text.data(), text.size(), "PYTHONPATH", value, 4)) << "too long for the buffer";
  EXPECT_FALSE(parse_environ_value(text.data(), text.size(), "TERM", value, sizeof value));
  const std::string cut("A=1\0PYTHONMALLOC=mall", 21); // the last entry without its NUL
  ASSERT_TRUE(parse_environ_value(cut.data(), cut.size(), "PYTHONMALLOC", value, sizeof value));
  EXPECT_STREQ(value, "mall");
  const std::string empty("PYTHONMALLOC=\0", 14);
  ASSERT_TRUE(parse_environ_value(empty.data(), empty.size(), "PYTHONMALLOC", value, sizeof value));
  EXPECT_STREQ(value, "");
  EXPECT_FALSE(parse_environ_value("", 0, "PYTHONMALLOC", value, sizeof value));
}

// The one way to grow an array (src/lib/array.h, as git's ALLOC_GROW): by doubling from 16, never past what
// size_t can count in bytes (the planted overflow: -ENOMEM, the array and its capacity as they were).
TEST(ArrayGrow, DoublesAndRefusesAnOverflow) {
  uint64_t *numbers = nullptr;
  size_t cap = 0;
  ASSERT_EQ(ARRAY_GROW(numbers, 1, cap), 0);
  EXPECT_EQ(cap, 16u);
  ASSERT_EQ(ARRAY_GROW(numbers, 17, cap), 0);
  EXPECT_EQ(cap, 32u);
  for (size_t i = 0; i < 100; i++) {
    ASSERT_EQ(ARRAY_GROW(numbers, i + 1, cap), 0);
    numbers[i] = i;
  }
  EXPECT_EQ(cap, 128u);
  EXPECT_EQ(numbers[99], 99u);
  uint64_t *before = numbers;
  EXPECT_EQ(ARRAY_GROW(numbers, SIZE_MAX / sizeof *numbers + 1, cap), -ENOMEM);
  EXPECT_EQ(ARRAY_GROW(numbers, SIZE_MAX, cap), -ENOMEM);
  EXPECT_EQ(numbers, before);
  EXPECT_EQ(cap, 128u);
  free(numbers);
}
