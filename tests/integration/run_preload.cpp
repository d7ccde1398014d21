// SPDX-License-Identifier: MIT
// run_preload.cpp - `hugify run` and libhugify-preload.so on real programs: the bundled heap workloads
// (single- and multi-threaded, malloc'd nodes, odd-sized malloc blocks and raw mmaps), sh, a static
// binary, a setuid copy. The exit report is checked against an independent read of /proc/PID/smaps taken
// while the program is stopped just before it exits.
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"

extern "C" {
#include "units.h"
}

namespace {

using test_support::command_result;

std::string temp_path(const std::string &name) {
  static char dir[] = "/tmp/hugify-run-test-XXXXXX"; // plain storage: still there when atexit runs
  static bool made = [] {
    bool ok = mkdtemp(dir) != nullptr;
    if (ok) std::atexit([] { std::filesystem::remove_all(dir); });
    return ok;
  }();
  return made ? std::string(dir) + "/" + name : "/nonexistent/" + name;
}

// The run report, read with jansson; fails the test when it is missing or not valid JSON.
test_support::json_view load_report(const std::string &path) {
  std::string error;
  test_support::json_view report = test_support::load_json(path, &error);
  EXPECT_TRUE(report.present()) << error << "\n" << test_support::read_file(path);
  return report;
}

// What the --heap modes act on, as inspect's classes name it: heap ([heap], brk) + anon (the other private
// anonymous memory). `field` is one of the usage members ("resident_bytes", "huge_bytes", ...).
double allocated(const test_support::json_view &report, const std::string &field) {
  return report.at("classes.heap." + field).number() + report.at("classes.anon." + field).number();
}

// `hugify run --report` writes the whole tree (hugify.run/1): its sums have the shape of one process's
// report, and every process's own report (hugify.report/2) is under "processes". This is the one whose
// top_level is true (the process hugify run started).
test_support::json_view top_process(const test_support::json_view &tree) {
  for (size_t i = 0; tree["processes"][i].present(); i++)
    if (json_is_true(tree["processes"][i]["top_level"].get())) return tree["processes"][i];
  ADD_FAILURE() << "no top-level process in the report";
  return tree["processes"][0];
}

double heap_fraction(const test_support::json_view &report) {
  double resident = allocated(report, "resident_bytes"), huge = allocated(report, "huge_bytes");
  return resident > 0 ? huge / resident : 0;
}

std::string workload() { return test_support::helper_path("run_heap_workload"); }

// ---- an independent read of smaps: heap = [heap] and private anonymous memory that is not a stack ------
struct smaps_mapping {
  uint64_t start = 0, end = 0;
  std::string perms, path;
  uint64_t inode = 0, rss = 0, anon_huge = 0, hugetlb = 0;
};

std::vector<smaps_mapping> read_smaps(int pid) {
  std::vector<smaps_mapping> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, device, inode;
    size_t dash = line.find('-');
    if (dash != std::string::npos && dash < line.find(' ') && line.find(':') > dash &&
        (fields >> range >> perms >> offset >> device >> inode)) {
      smaps_mapping m;
      m.start = std::stoull(range.substr(0, dash), nullptr, 16);
      m.end = std::stoull(range.substr(dash + 1), nullptr, 16);
      m.perms = perms;
      m.inode = std::stoull(inode);
      std::string rest;
      std::getline(fields, rest);
      size_t first = rest.find_first_not_of(' ');
      m.path = first == std::string::npos ? "" : rest.substr(first);
      out.push_back(m);
      continue;
    }
    if (out.empty()) continue;
    auto value = [&](const char *name) { return std::strtoull(line.c_str() + std::strlen(name), nullptr, 10) * 1024; };
    if (line.rfind("Rss:", 0) == 0) out.back().rss = value("Rss:");
    else if (line.rfind("AnonHugePages:", 0) == 0) out.back().anon_huge = value("AnonHugePages:");
    else if (line.rfind("Private_Hugetlb:", 0) == 0) out.back().hugetlb += value("Private_Hugetlb:");
    else if (line.rfind("Shared_Hugetlb:", 0) == 0) out.back().hugetlb += value("Shared_Hugetlb:");
  }
  return out;
}

struct usage {
  uint64_t resident = 0, huge = 0;
};

usage independent_heap(int pid) {
  auto maps = read_smaps(pid);
  usage heap;
  for (size_t i = 0; i < maps.size(); i++) {
    const auto &m = maps[i];
    bool anonymous = m.inode == 0 && (m.path.empty() || m.path == "[heap]" || m.path.rfind("[anon:", 0) == 0);
    bool private_hugetlb = m.path.rfind("/anon_hugepage", 0) == 0;
    if (m.perms[3] != 'p' || m.perms[2] == 'x' || !(anonymous || private_hugetlb)) continue;
    // a pthread stack: read-write memory right above a guard page mapping of at most 1 MiB
    bool stack = m.path == "[stack]" ||
                 (i > 0 && m.perms == "rw-p" && m.path.empty() && maps[i - 1].end == m.start &&
                  maps[i - 1].perms == "---p" && maps[i - 1].path.empty() && maps[i - 1].end - maps[i - 1].start <= (1u << 20));
    if (stack) continue;
    heap.resident += m.rss + m.hugetlb;
    heap.huge += m.anon_huge + m.hugetlb;
  }
  return heap;
}

// Start `hugify run ... -- argv` (the program, or with --report its parent), wait until the program stops itself
// (run_heap_workload --stop), read its smaps, let it finish. Returns the exit status.
int run_stopped(const std::vector<std::string> &argv, usage *heap_at_stop) {
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(devnull, 1);
    std::vector<char *> args;
    for (const auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  int stopped = test_support::wait_until_stopped(pid, &status);
  if (stopped > 0) {
    *heap_at_stop = independent_heap(stopped);
    kill(stopped, SIGCONT);
    waitpid(pid, &status, 0);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// ---- behaviour ----------------------------------------------------------------------------------------

TEST(RunPreload, ExitStatusAndStdoutAreTheProgramsOwn) {
  auto plain = test_support::run({"sh", "-c", "echo x; exit 7"});
  auto run = test_support::hugify({"run", "--", "sh", "-c", "echo x; exit 7"});
  EXPECT_EQ(run.status, 7) << run.err;
  EXPECT_EQ(run.out, plain.out);
  EXPECT_EQ(run.out, "x\n");
  // with a report on stderr and every message switched on, stdout is still the program's alone
  auto verbose = test_support::hugify({"run", "--verbose", "--report", "-", "--", "sh", "-c", "echo x; exit 7"});
  EXPECT_EQ(verbose.status, 7) << verbose.err;
  EXPECT_EQ(verbose.out, "x\n");
  auto silent = test_support::hugify({"run", "--verbose", "--report", "-", "--", workload(), "--mib", "8"});
  EXPECT_EQ(silent.status, 0) << silent.err;
  EXPECT_EQ(silent.out, test_support::run({workload(), "--mib", "8"}).out);
  EXPECT_NE(silent.err.find("heap"), std::string::npos) << silent.err;
}

TEST(RunPreload, MissingCommandExits127WithAMessage) {
  auto run = test_support::hugify({"run", "--", "hugify-no-such-command-here"});
  EXPECT_EQ(run.status, 127);
  EXPECT_NE(run.err.find("hugify-no-such-command-here: command not found"), std::string::npos) << run.err;
  EXPECT_EQ(run.out, "");
}

TEST(RunPreload, JsonOptionWritesTheReportAsJson) {
  // --json: the report as JSON on stderr instead of the table (stdout is the program's)
  auto run = test_support::hugify({"run", "--json", "--", workload(), "--mib", "8"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, test_support::run({workload(), "--mib", "8"}).out);
  std::string error;
  auto doc = test_support::parse_json(run.err, &error);
  ASSERT_TRUE(doc.present()) << error << "\n" << run.err;
  EXPECT_EQ(doc["schema"].text(), "hugify.run/1");
  EXPECT_EQ(top_process(doc)["schema"].text(), "hugify.report/2");
  // --json=FILE: the same as --report FILE
  std::string report = temp_path("option.json");
  auto to_file = test_support::hugify({"run", "--json=" + report, "--", workload(), "--mib", "8"});
  ASSERT_EQ(to_file.status, 0) << to_file.err;
  EXPECT_EQ(load_report(report)["schema"].text(), "hugify.run/1");
}

TEST(RunPreload, BadUsageExits2) {
  EXPECT_EQ(test_support::hugify({"run", "--json=", "--", "true"}).status, 2);
  EXPECT_EQ(test_support::hugify({"run", "--report", "/tmp/a", "--json=/tmp/b", "--", "true"}).status, 2);
  EXPECT_EQ(test_support::hugify({"run"}).status, 2);
  EXPECT_EQ(test_support::hugify({"run", "--heap", "banana", "--", "true"}).status, 2);
  EXPECT_EQ(test_support::hugify({"run", "--text", "maybe", "--", "true"}).status, 2);
  // the option table's errors: a report file that reads as an option, a misspelt option, a missing value
  EXPECT_EQ(test_support::hugify({"run", "--report", "-x", "--", "true"}).status, 2);
  auto misspelt = test_support::hugify({"run", "--verbos", "--", "true"});
  EXPECT_EQ(misspelt.status, 2);
  EXPECT_NE(misspelt.err.find("did you mean --verbose?"), std::string::npos) << misspelt.err;
  EXPECT_EQ(test_support::hugify({"run", "--report", "--", "true"}).status, 2);
}

TEST(RunPreload, StaticBinaryIsNamedAndStillRuns) {
  std::string helper = test_support::helper_path("static_hello");
  auto run = test_support::hugify({"run", "--report", temp_path("static.json"), "--", helper});
  EXPECT_EQ(run.status, 5) << run.err;
  EXPECT_EQ(run.out, "static hello\n");
  EXPECT_NE(run.err.find("statically linked"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("nothing can be preloaded into it"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("from outside"), std::string::npos) << run.err; // static_programs.cpp: what it does
}

TEST(RunPreload, SetuidProgramIsNamed) {
  // A setuid copy owned by nobody: as root the loader runs it in secure mode and drops LD_PRELOAD.
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a setuid copy owned by another user";
  std::string copy = temp_path("setuid_true");
  ASSERT_EQ(test_support::run({"cp", "/bin/true", copy}).status, 0);
  ASSERT_EQ(chown(copy.c_str(), 65534, 65534), 0);
  ASSERT_EQ(chmod(copy.c_str(), 04755), 0);
  auto run = test_support::hugify({"run", "--", copy});
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("is setuid"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("drops LD_PRELOAD"), std::string::npos) << run.err;
}

TEST(RunPreload, ExistingGlibcTunablesSurvive) {
  auto run = test_support::hugify({"run", "--", "sh", "-c", "echo \"$GLIBC_TUNABLES\""},
                                  {{"GLIBC_TUNABLES", "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0"}});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out.rfind("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0:", 0), 0u) << run.out;
  EXPECT_EQ(run.out.find("glibc.malloc.hugetlb=1"), std::string::npos) << run.out; // theirs wins
  EXPECT_NE(run.out.find("glibc.malloc.top_pad="), std::string::npos) << run.out;
}

// MALLOC_CONF is merged the same way for jemalloc (key:value); needs jemalloc installed.
TEST(RunPreload, ExistingMallocConfSurvives) {
  std::string missing = test_support::allocator_missing("jemalloc");
  if (!missing.empty()) GTEST_SKIP() << missing;
  auto conf = test_support::hugify({"run", "--heap", "jemalloc", "--", "sh", "-c", "echo \"$MALLOC_CONF\""},
                                   {{"MALLOC_CONF", "thp:never,narenas:2"}});
  ASSERT_EQ(conf.status, 0) << conf.err;
  EXPECT_EQ(conf.out, "thp:never,narenas:2,metadata_thp:always\n");
}

TEST(RunPreload, BadHugifyValuesWarnOnceAndChangeNothing) {
  std::map<std::string, std::string> env = {{"HUGIFY_TEXT_MIN_SIZE", "banana"}};
  auto run = test_support::hugify({"run", "--", "sh", "-c", "echo x; sh -c 'echo y'; exit 3"}, env);
  EXPECT_EQ(run.status, 3) << run.err;
  EXPECT_EQ(run.out, "x\ny\n");
  size_t first = run.err.find("HUGIFY_TEXT_MIN_SIZE=banana");
  ASSERT_NE(first, std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("HUGIFY_TEXT_MIN_SIZE=banana", first + 1), std::string::npos) << "more than one warning:\n"
                                                                                       << run.err;
  // the preload alone (no CLI), with every value wrong
  std::map<std::string, std::string> wrong = {
      {"LD_PRELOAD", HUGIFY_PRELOAD_PATH}, {"HUGIFY_HEAP", "banana"},   {"HUGIFY_TEXT", "2"},
      {"HUGIFY_VERBOSE", "loud"},          {"HUGIFY_REPORT_JSON", "x"}, {"HUGIFY_RUN_PID", "pid"}};
  auto plain = test_support::run({"sh", "-c", "echo x; exit 3"}, wrong);
  EXPECT_EQ(plain.status, 3);
  EXPECT_EQ(plain.out, "x\n");
  EXPECT_NE(plain.err.find("HUGIFY_HEAP=banana"), std::string::npos) << plain.err;
}

TEST(RunPreload, ReportIsValidAndMatchesAnIndependentSmapsRead) {
  std::string report = temp_path("matches.json");
  usage at_stop;
  int status = run_stopped({HUGIFY_CLI_PATH, "run", "--report", report, "--", workload(), "--mib", "96", "--stop"},
                           &at_stop);
  ASSERT_EQ(status, 0);
  std::string json = test_support::read_file(report);
  ASSERT_FALSE(json.empty());
  auto tree = load_report(report);
  EXPECT_EQ(tree["schema"].text(), "hugify.run/1");
  EXPECT_EQ(tree["process_count"].u64(), 1u) << json;
  EXPECT_EQ(tree["exit_status"].u64(), 0u) << json;
  auto doc = top_process(tree);
  EXPECT_EQ(doc["schema"].text(), "hugify.report/2");
  EXPECT_GT(doc["pid"].number(), 0);
  EXPECT_EQ(tree.at("largest_process.pid").number(), doc["pid"].number()) << json;
  EXPECT_NE(doc["command"].text().find("run_heap_workload --mib 96"), std::string::npos);
  EXPECT_GE(doc["hugify_seconds"].number(), 0);
  ASSERT_TRUE(json_is_array(doc["objects"].get())) << json;
  EXPECT_TRUE(json_is_array(doc["fallbacks"].get())) << json;
  EXPECT_EQ(doc.at("objects.0.path").text(), workload()) << "the program's own text object";
  EXPECT_GT(doc.at("objects.0.code.resident_bytes").number(), 0) << json;
  // The classes are inspect's: they add up to the total.
  double sum = 0;
  for (const auto &member : doc["classes"].members()) sum += member.second["resident_bytes"].number();
  EXPECT_EQ(sum, doc.at("total.resident_bytes").number()) << json;
  ASSERT_GT(at_stop.resident, 96u << 20);
  // Between the stop and the report the program only returns from main and the report is written. That
  // may touch a little more of the heap, and under the cover one touch faults a whole huge page (seen
  // under ASan in CI: exactly 2 MiB more), so up to one huge page more, never less.
  double resident = allocated(doc, "resident_bytes"), huge = allocated(doc, "huge_bytes");
  double stopped = static_cast<double>(at_stop.resident);
  EXPECT_GE(resident, stopped - (1 << 20)) << json;
  EXPECT_LE(resident, stopped + (2 << 20) + (1 << 20)) << json;
  EXPECT_NEAR(huge, static_cast<double>(at_stop.huge), 2 << 20) << json;
}

// glibc 2.35 to 2.37 read the THP mode into a buffer they do not terminate, so the preload initializes
// malloc before main on a cleared stack; glibc 2.38 fixed it, and there the preload leaves malloc alone until
// the program allocates. Checked under Debian trixie's glibc (2.41, scripts/glibc-root, run through its own
// loader) and under this machine's (before main on Debian 12's 2.36, not on Debian 13's 2.41), with `hugify env`'s environment: who reads the THP mode in /bin/true, which
// never allocates (strace), and whether glibc's tunable still advised the heap of a program that does.
TEST(RunPreload, ANewerGlibcNeedsNoMallocWorkaroundAndStillGetsItsHeapAdvised) {
  REQUIRE_KERNEL_FEATURE("thp");
  if (!test_support::installed("strace")) GTEST_SKIP() << "strace is not installed (apt-get install strace)";
  std::string said, root = test_support::fetched_dir({"glibc-root"}, &said);
  if (root.empty()) GTEST_SKIP() << "Debian trixie's glibc could not be had (scripts/glibc-root): " << said;
  const std::string libraries = root + "/usr/lib/x86_64-linux-gnu";
  const std::vector<std::string> newer = {libraries + "/ld-linux-x86-64.so.2", "--library-path", libraries};
  command_result env = test_support::hugify({"env", "--json"});
  ASSERT_EQ(env.status, 0) << env.err;
  std::string error;
  test_support::json_view doc = test_support::parse_json(env.out, &error);
  ASSERT_TRUE(doc.present()) << error;
  std::map<std::string, std::string> variables;
  for (const auto &[name, value] : doc["variables"].members()) variables[name] = value.text();
  ASSERT_NE(variables["GLIBC_TUNABLES"].find("glibc.malloc.hugetlb=1"), std::string::npos) << env.out;

  auto reads_thp_mode = [&](std::vector<std::string> argv) {
    std::string trace = temp_path("true.strace");
    argv.insert(argv.begin(), {"strace", "-f", "-qq", "-e", "trace=openat", "-o", trace});
    argv.push_back("/bin/true");
    command_result traced = test_support::run(argv, variables);
    EXPECT_EQ(traced.status, 0) << traced.err;
    return test_support::read_file(trace).find("transparent_hugepage/enabled") != std::string::npos;
  };
  // This machine's glibc: before main only from 2.35 to 2.37 (Debian 12's 2.36), never from 2.38 (Debian 13's
  // 2.41), where both runs below are a glibc that needs no workaround.
  const bool workaround = !version_at_least(gnu_get_libc_version(), 2, 38);
  EXPECT_EQ(reads_thp_mode({}), workaround)
      << "glibc " << gnu_get_libc_version() << (workaround ? ": the workaround did not run before main"
                                                          : ": malloc was initialized before main, which it needs not");
  EXPECT_FALSE(reads_thp_mode(newer)) << "glibc 2.38 or later: malloc is left alone until the program allocates";

  std::string report = temp_path("newer-glibc.json");
  variables["HUGIFY_REPORT"] = report;
  std::vector<std::string> argv = newer;
  argv.insert(argv.end(), {workload(), "--mib", "128", "--big", "64"});
  command_result run = test_support::run(argv, variables);
  ASSERT_EQ(run.status, 0) << run.err;
  test_support::json_view top = load_report(report);
  EXPECT_GE(heap_fraction(top), 0.90) << test_support::read_file(report);
  for (size_t i = 0; top["fallbacks"][i].present(); i++)
    EXPECT_NE(top["fallbacks"][i]["what"].text(), "heap glibc malloc") << test_support::read_file(report);
}

TEST(RunPreload, SingleThreadedHeapIsCovered) {
  REQUIRE_KERNEL_FEATURE("thp");
  std::string report = temp_path("single.json");
  auto run = test_support::hugify({"run", "--report", report, "--", workload(), "--mib", "128", "--big", "64"});
  ASSERT_EQ(run.status, 0) << run.err;
  std::string json = test_support::read_file(report);
  EXPECT_GE(heap_fraction(load_report(report)), 0.90) << json;
  EXPECT_EQ(top_process(load_report(report))["heap_mode"].text(), "auto");
}

TEST(RunPreload, MultiThreadedHeapIsCoveredArenasIncluded) {
  REQUIRE_KERNEL_FEATURE("thp");
  // glibc 2.36's tunable alone leaves thread arenas on 4 KiB pages; hugify run must not.
  std::string report = temp_path("threads.json");
  usage at_stop;
  int status = run_stopped(
      {HUGIFY_CLI_PATH, "run", "--report", report, "--", workload(), "--threads", "4", "--mib", "48", "--stop"}, &at_stop);
  ASSERT_EQ(status, 0);
  std::string json = test_support::read_file(report);
  EXPECT_GE(heap_fraction(load_report(report)), 0.90) << json;
  ASSERT_GT(at_stop.resident, 0u);
  EXPECT_GE(static_cast<double>(at_stop.huge) / static_cast<double>(at_stop.resident), 0.90);
}

TEST(RunPreload, OtherAllocatorsMmapsAreAlignedAndAdvised) {
  REQUIRE_KERNEL_FEATURE("thp");
  // Raw anonymous mmaps of odd sizes (what other allocators and runtimes do): glibc's tunable never sees them.
  std::string report = temp_path("mmap.json");
  auto run = test_support::hugify({"run", "--report", report, "--", workload(), "--mib", "4", "--mmap", "96"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_GE(heap_fraction(load_report(report)), 0.90) << test_support::read_file(report);
}

// By default (HUGIFY_RUNTIME_ARENAS=0 turns it off) a runtime's 1 MiB and 256 KiB arenas come out of the
// preload's 2 MiB regions, and each still behaves as its own mapping (the helper checks munmap, mprotect,
// mremap and fork itself).
TEST(RunPreload, RuntimeArenasGoOnHugePagesAndKeepTheirOwnSemantics) {
  REQUIRE_KERNEL_FEATURE("thp");
  std::string plain_path = temp_path("arenas-off.json"), arenas_path = temp_path("arenas-on.json");
  std::string helper = test_support::helper_path("run_runtime_arenas");
  auto plain = test_support::hugify({"run", "--report", plain_path, "--", helper}, {{"HUGIFY_RUNTIME_ARENAS", "0"}});
  auto arenas = test_support::hugify({"run", "--report", arenas_path, "--", helper});
  ASSERT_EQ(plain.status, 0) << plain.out << plain.err;
  ASSERT_EQ(arenas.status, 0) << "a piece did not behave as its own mapping:\n" << arenas.out << arenas.err;
  EXPECT_NE(arenas.out.find("checks ok"), std::string::npos) << arenas.out;
  // An unmapped piece that shared a huge page with a neighbour is freed at once: the page was split.
  EXPECT_EQ(arenas.out.find("split no"), std::string::npos) << arenas.out;
  double off = heap_fraction(load_report(plain_path)), on = heap_fraction(load_report(arenas_path));
  EXPECT_LT(off, 0.5) << "with the option off, 1 MiB mappings are not expected on huge pages: " << test_support::read_file(plain_path);
  // The first 8 mappings pass through (a short program pays nothing) and the helper's munmap, mprotect and
  // mremap split three regions: about three quarters of its 40 MiB end on huge pages.
  EXPECT_GE(on, 0.6) << test_support::read_file(arenas_path);
  EXPECT_GT(on, off + 0.4) << test_support::read_file(plain_path);
}

// The carver's lock is only tried: a signal handler that maps while its own thread holds the lock gets an
// ordinary mapping. (A lock that is waited for deadlocks here: --heap tcmalloc's spin lock did, 20 s of
// spinning until `timeout` ended it.) Both carvers: the runtimes' and TCMalloc's, whose requests the
// helper's 1 MiB mmaps also are.
TEST(RunPreload, CarverServesASignalHandlerThatInterruptsTheLockHolder) {
  std::string helper = test_support::helper_path("run_runtime_arenas");
  std::vector<std::vector<std::string>> modes = {{"--heap", "auto"}};
  if (test_support::allocator_missing("tcmalloc").empty()) modes.push_back({"--heap", "tcmalloc"});
  for (const auto &mode : modes) {
    std::vector<std::string> command = {"timeout", "120", HUGIFY_CLI_PATH, "run"};
    command.insert(command.end(), mode.begin(), mode.end());
    command.insert(command.end(), {"--", helper, "--signals"});
    auto r = test_support::run(command);
    EXPECT_EQ(r.status, 0) << mode[1] << ": status 124 is a hang (a handler waiting for its own thread's lock)\n"
                           << r.out << r.err;
    EXPECT_NE(r.out.find("signals "), std::string::npos) << r.out;
  }
}

TEST(RunPreload, RuntimeArenasLeaveGuardPagesAndReservationsAlone) {
  // PROT_NONE and MAP_NORESERVE mappings (a runtime's reservations and guards) pass through untouched:
  // python3 -c with mmap of each kind prints where they went; none may be inside an [anon] region the
  // preload made, and a PROT_NONE page must still fault.
  if (test_support::run({"python3", "-c", "import mmap"}).status != 0) GTEST_SKIP() << "python3 is not installed";
  auto r = test_support::hugify(
      {"run", "--", "python3", "-c",
       "import mmap, ctypes, sys\n"
       "pieces = [mmap.mmap(-1, 1 << 20) for _ in range(16)]\n"
       "for p in pieces: p[0:1] = b'x'\n"
       "libc = ctypes.CDLL(None)\n"
       "libc.mmap.restype = ctypes.c_void_p\n"
       "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
       "guard = libc.mmap(None, 1 << 20, 0, 0x22, -1, 0)\n"
       "maps = open('/proc/self/maps').read().splitlines()\n"
       "line = [l for l in maps if int(l.split('-')[0], 16) <= guard < int(l.split()[0].split('-')[1], 16)][0]\n"
       "print('guard', line.split()[1])\n"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("guard ---p"), std::string::npos) << "a PROT_NONE mapping became memory: " << r.out;
}

TEST(RunPreload, ChildProcessesAreCoveredAndInTheTreeReport) {
  REQUIRE_KERNEL_FEATURE("thp");
  std::string report = temp_path("child.json");
  // dash forks both commands (and exits with _exit, which the report does not cover: docs/run.md)
  auto run = test_support::hugify({"run", "--report", report, "--", "sh", "-c",
                                   "\"$0\" --threads 2 --mib 64; \"$0\" --mib 48; true", workload()});
  ASSERT_EQ(run.status, 0) << run.err;
  std::string json = test_support::read_file(report);
  auto tree = load_report(report);
  ASSERT_EQ(tree["process_count"].u64(), 2u) << json;
  double peak_sum = 0, resident_sum = 0, largest = 0;
  for (size_t i = 0; i < 2; i++) {
    auto doc = tree["processes"][i];
    EXPECT_TRUE(json_is_false(doc["top_level"].get())) << json;
    EXPECT_NE(doc["command"].text().find("run_heap_workload"), std::string::npos);
    EXPECT_GE(heap_fraction(doc), 0.90) << json;
    peak_sum += doc["peak_memory_bytes"].number();
    resident_sum += doc.at("classes.anon.resident_bytes").number();
    largest = std::max(largest, doc["peak_memory_bytes"].number());
  }
  // bytes are summed over the tree; the largest process is the 2-thread one (about 2.5x the other)
  EXPECT_EQ(tree["peak_memory_bytes"].number(), peak_sum) << json;
  EXPECT_EQ(tree.at("classes.anon.resident_bytes").number(), resident_sum) << json;
  EXPECT_EQ(tree.at("largest_process.peak_memory_bytes").number(), largest) << json;
  EXPECT_NE(tree.at("largest_process.command").text().find("--threads 2"), std::string::npos) << json;
  EXPECT_GE(heap_fraction(tree), 0.90) << json;
  // and no stray per-process files next to the report
  auto listing = test_support::run({"sh", "-c", "ls \"$0\".* 2>/dev/null", report});
  EXPECT_NE(listing.status, 0) << listing.out;
}

TEST(RunPreload, ThpDisabledByPrctlIsRespected) {
  // THP disabled by the parent (inherited across fork and exec): nothing may end up on THP, and the report says why.
  std::string report = temp_path("prctl.json");
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 1);
    dup2(devnull, 2);
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    execl(HUGIFY_CLI_PATH, HUGIFY_CLI_PATH, "run", "--report", report.c_str(), "--", workload().c_str(), "--mib", "32",
          "--mmap", "16", static_cast<char *>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string json = test_support::read_file(report);
  EXPECT_EQ(allocated(load_report(report), "thp_bytes"), 0) << json;
  REQUIRE_KERNEL_FEATURE("thp"); // without THP the prctl changes nothing, and is not the reason
  EXPECT_NE(json.find("PR_SET_THP_DISABLE"), std::string::npos) << json;
}

TEST(RunPreload, HugetlbHeapComesFromThePool) {
  // glibc.malloc.hugetlb=2 takes the default size's pool (2 MiB on x86-64, 32 MiB on arm64's 16 KiB pages):
  // 128 MiB of it
  uint64_t size = test_support::default_hugetlb_size();
  ASSERT_GT(size, 0u) << "no Hugepagesize in /proc/meminfo";
  std::string why = test_support::ensure_free_hugetlb(size, (128u << 20) / size);
  if (!why.empty()) GTEST_SKIP() << why;
  std::string report = temp_path("hugetlb.json");
  auto run = test_support::hugify({"run", "--heap", "hugetlb", "--report", report, "--", workload(), "--mib", "32"});
  ASSERT_EQ(run.status, 0) << run.err;
  std::string json = test_support::read_file(report);
  auto doc = load_report(report);
  double resident = allocated(doc, "resident_bytes");
  EXPECT_GE(allocated(doc, "hugetlb_2m_bytes"), 0.90 * resident) << json;
  EXPECT_NE(top_process(doc)["glibc_tunables"].text().find("glibc.malloc.hugetlb=2"), std::string::npos) << json;
}

// Absent allocators are the exit-3 path with the install command; present ones are preloaded and used.
TEST(RunPreload, JemallocAndMimallocArePreloaded) {
  REQUIRE_KERNEL_FEATURE("thp");
  const char *modes[] = {"jemalloc", "mimalloc"};
  int present = 0;
  for (int i = 0; i < 2; i++) {
    std::string missing = test_support::allocator_missing(modes[i]);
    if (!missing.empty()) {
      EXPECT_NE(missing.find("apt-get install"), std::string::npos) << missing;
      std::printf("note: %s\n", missing.c_str());
      continue;
    }
    present++;
    std::string report = temp_path(std::string(modes[i]) + ".json");
    auto run = test_support::hugify({"run", "--heap", modes[i], "--report", report, "--", workload(), "--mib", "32"});
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.err.find("Malformed"), std::string::npos) << run.err;
    std::string json = test_support::read_file(report);
    auto doc = load_report(report);
    EXPECT_NE(top_process(doc)["malloc"].text().find(std::string("lib") + modes[i]), std::string::npos) << json;
    // THP, or hugetlb pages: mimalloc's large OS pages take the 2 MiB pool first when it has free pages
    EXPECT_GT(allocated(doc, "huge_bytes"), 0) << json;
  }
  if (present == 0) GTEST_SKIP() << "neither jemalloc nor mimalloc is installed: only the missing-allocator exit was tested";
}

// gperftools' TCMalloc has no huge-page option: its 1 MiB chunks come from the cover's 2 MiB-aligned advised
// arenas. Its malloc is the program's, and the heap lands on huge pages (97 % measured; 80 % asserted).
TEST(RunPreload, TcmallocIsPreloadedUnderTheCover) {
  std::string missing = test_support::allocator_missing("tcmalloc");
  if (!missing.empty()) {
    EXPECT_NE(missing.find("apt-get install libtcmalloc-minimal4"), std::string::npos) << missing;
    GTEST_SKIP() << missing;
  }
  REQUIRE_KERNEL_FEATURE("thp");
  if (test_support::thp_mode() == "never") GTEST_SKIP() << "THP is 'never' here";
  std::string report = temp_path("tcmalloc.json");
  auto run = test_support::hugify({"run", "--heap", "tcmalloc", "--text", "off", "--report", report, "--", workload(),
                                   "--mib", "64"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out, test_support::run({workload(), "--mib", "64"}).out); // the same checksum
  std::string json = test_support::read_file(report);
  auto doc = load_report(report);
  EXPECT_NE(top_process(doc)["malloc"].text().find("libtcmalloc"), std::string::npos) << json;
  EXPECT_EQ(top_process(doc)["heap_mode"].text(), "tcmalloc") << json;
  EXPECT_GE(allocated(doc, "huge_bytes"), 0.8 * allocated(doc, "resident_bytes")) << json;
}

}  // namespace
