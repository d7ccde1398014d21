// SPDX-License-Identifier: MIT
// run_peak.cpp - the run report's figures at the process's peak: memory freed before exit still counts,
// hugetlb pages count as memory, and the sampler thread exists only while a report is wanted.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "test_support.hpp"

namespace {

std::string workload() { return test_support::helper_path("run_heap_workload"); }

std::string temp_report(const char *name) {
  return "/tmp/hugify-peak-" + std::to_string(getpid()) + "-" + name + ".json";
}

// The report of the one process the workload runs in: `hugify run --report` writes the tree
// (hugify.run/1) with every process's own report under "processes".
struct report {
  test_support::json_view tree, process;
  std::string text;
  explicit report(const std::string &path) : tree(test_support::load_json(path)), text(test_support::read_file(path)) {
    process = tree["processes"][0];
    unlink(path.c_str());
  }
  double number(const char *path) const { return process.at(path).number(); }
  std::string string(const char *path) const { return process.at(path).text(); }
};

std::string dump(const report &r) { return r.text.empty() ? "(no report)" : r.text; }

TEST(RunPeak, MemoryFreedBeforeExitIsMeasuredAtItsPeak) {
  // glibc gives its big blocks back with internal calls (munmap, brk, madvise) no preload sees: the
  // sampler must catch them. The blocks are held 300 ms, 15 sampling intervals (a peak shorter than one
  // interval can be missed: docs/run.md); the test does not depend on how fast the machine builds them.
  std::string path = temp_report("freed");
  auto run = test_support::hugify(
      {"run", "--report", path, "--", workload(), "--mib", "4", "--big", "192", "--free", "--hold", "300"});
  ASSERT_EQ(run.status, 0) << run.err;
  report r(path);
  ASSERT_TRUE(r.process.present()) << "no valid report at " << path << ": " << dump(r);
  EXPECT_GE(r.number("peak.allocated.resident_bytes"), 150.0 * (1 << 20)) << dump(r);
  EXPECT_GE(r.number("peak.allocated.huge_fraction"), 0.90) << dump(r);
  EXPECT_GE(r.number("peak.memory_bytes"), r.number("peak.allocated.resident_bytes")) << dump(r);
  EXPECT_GT(r.number("peak.samples"), 0) << dump(r);
  EXPECT_GE(r.number("peak.sampler_cpu_seconds"), 0) << dump(r);
}

TEST(RunPeak, UnmapHookAloneCatchesThePeak) {
  // With the sampler off, raw munmap calls (other allocators, runtimes) are still seen before they happen.
  std::string path = temp_report("hook");
  auto run = test_support::hugify({"run", "--report", path, "--", workload(), "--mib", "4", "--mmap", "128", "--free"},
                                  {{"HUGIFY_PEAK_INTERVAL_MS", "0"}});
  ASSERT_EQ(run.status, 0) << run.err;
  report r(path);
  ASSERT_TRUE(r.process.present()) << dump(r);
  EXPECT_EQ(r.string("peak.measured_at"), "sample") << dump(r);
  EXPECT_GE(r.number("peak.allocated.resident_bytes"), 100.0 * (1 << 20)) << dump(r);
  // Raw mmaps are advised for THP; a kernel without THP leaves them on 4 KiB pages (the peak is still caught).
  if (test_support::missing_kernel_feature("thp").empty()) {
    EXPECT_GE(r.number("peak.allocated.huge_fraction"), 0.90) << dump(r);
  }
  EXPECT_LT(r.number("classes.heap.resident_bytes") + r.number("classes.anon.resident_bytes"), 64.0 * (1 << 20))
      << "the blocks were unmapped before exit: " << dump(r);
  EXPECT_EQ(r.number("peak.interval_seconds"), 0) << dump(r);
}

TEST(RunPeak, HugetlbPagesCountAsMemory) {
  // ru_maxrss leaves hugetlb pages out; peak_memory_bytes must not, so configurations compare fairly.
  std::string why = test_support::ensure_free_hugetlb(2u << 20, 160);
  if (!why.empty()) GTEST_SKIP() << why;
  std::string plain_path = temp_report("plain"), hugetlb_path = temp_report("hugetlb");
  std::vector<std::string> work{workload(), "--threads", "2", "--mib", "64"};
  std::vector<std::string> plain{"run", "--heap", "off", "--report", plain_path, "--"}, hugetlb{"run", "--heap", "hugetlb",
                                                                                                "--report", hugetlb_path, "--"};
  plain.insert(plain.end(), work.begin(), work.end());
  hugetlb.insert(hugetlb.end(), work.begin(), work.end());
  ASSERT_EQ(test_support::hugify(plain).status, 0);
  ASSERT_EQ(test_support::hugify(hugetlb).status, 0);
  report p(plain_path), h(hugetlb_path);
  ASSERT_TRUE(p.process.present() && h.process.present()) << dump(p) << dump(h);
  ASSERT_GT(h.number("peak.allocated.hugetlb_bytes"), 64.0 * (1 << 20)) << "the heap did not come from the pool: " << dump(h);
  EXPECT_LT(h.number("max_rss_bytes"), 0.5 * h.number("peak_memory_bytes")) << dump(h);
  double ratio = h.number("peak_memory_bytes") / p.number("peak_memory_bytes");
  EXPECT_NEAR(ratio, 1.0, 0.10) << dump(p) << dump(h);
}

// The preload's own calls (the text step's copy, its unmaps of ELF images for the perf map, the cover's
// trimming) go to the kernel directly, never through the interposed wrappers: with the sampler off, the
// only sample of a program that unmaps nothing itself is the one taken at exit. Through the wrappers, the
// perf map's munmap of the 18 MiB executable image would sample mid-way through the text step.
TEST(RunPeak, TheTextStepTakesNoPeakSample) {
  REQUIRE_KERNEL_FEATURE("thp");
  std::string path = temp_report("own-calls");
  std::string program = test_support::helper_path("text_program_static");
  auto run = test_support::hugify({"run", "--heap", "auto", "--text", "on", "--report", path, "--", program},
                                  {{"HUGIFY_PEAK_INTERVAL_MS", "0"}, {"HUGIFY_PERF_MAP", "1"}});
  ASSERT_EQ(run.status, 0) << run.err;
  report r(path);
  ASSERT_TRUE(r.process.present()) << dump(r);
  std::remove(("/tmp/perf-" + std::to_string(static_cast<long>(r.number("pid"))) + ".map").c_str());
  ASSERT_EQ(r.string("text_step.state"), "done") << dump(r);
  ASSERT_GT(r.number("classes.code.huge_bytes"), 0) << "no code moved, so nothing was tested: " << dump(r);
  EXPECT_EQ(r.number("peak.samples"), 1) << "a sample besides the one at exit: " << dump(r);
}

// --text auto (the default) says in the report why a short program's code did not move.
TEST(RunPeak, TheReportSaysWhenTheCodeMovedOrWhyNot) {
  std::string path = temp_report("when");
  auto small = test_support::hugify({"run", "--report", path, "--", "true"});
  ASSERT_EQ(small.status, 0) << small.err;
  report none(path);
  EXPECT_EQ(none.string("text_step.mode"), "auto") << dump(none);
  EXPECT_EQ(none.string("text_step.state"), "no-window") << "true has no 2 MiB of code: " << dump(none);

  std::string program = test_support::helper_path("text_program_static");
  auto waiting = test_support::hugify({"run", "--report", path, "--", program}, {{"HUGIFY_TEXT_AFTER_MS", "3600000"}});
  ASSERT_EQ(waiting.status, 0) << waiting.err;
  report later(path);
  EXPECT_EQ(later.string("text_step.state"), "waiting") << dump(later);
  EXPECT_EQ(later.number("text_step.after_cpu_seconds"), 3600) << dump(later);
  EXPECT_TRUE(later.process.at("text_step.at_cpu_seconds").is_null()) << dump(later);
  EXPECT_EQ(later.number("classes.code.huge_bytes"), 0) << dump(later);

  REQUIRE_KERNEL_FEATURE("thp"); // the code moves onto THP
  auto now = test_support::hugify({"run", "--text", "on", "--report", path, "--", program});
  ASSERT_EQ(now.status, 0) << now.err;
  report before_main(path);
  EXPECT_EQ(before_main.string("text_step.mode"), "now") << dump(before_main);
  EXPECT_EQ(before_main.string("text_step.state"), "done") << dump(before_main);
  EXPECT_GT(before_main.number("classes.code.huge_bytes"), 0) << dump(before_main);
}

// The same rule seen from outside: nothing in the preload refers to the names it interposes, so no call
// of its own can reach them (a PLT or GOT relocation against one would).
TEST(RunPeak, ThePreloadHasNoRelocationAgainstTheNamesItInterposes) {
  auto relocations = test_support::run({"readelf", "--relocs", "--wide", HUGIFY_PRELOAD_PATH});
  if (relocations.status != 0) GTEST_SKIP() << "readelf (binutils) is not installed";
  std::istringstream lines(relocations.out);
  for (std::string line; std::getline(lines, line);)
    for (const char *name : {" mmap", " mmap64", " munmap", " mremap", " madvise", " mprotect", " shmat"}) {
      size_t at = line.find(name);
      if (at == std::string::npos) continue;
      char after = at + strlen(name) < line.size() ? line[at + strlen(name)] : ' ';
      EXPECT_TRUE(after != ' ' && after != '@' && after != '+') << "the preload calls " << name << " by name: " << line;
    }
}

int threads_of(pid_t pid, bool *has_sampler) {
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  int count = 0;
  *has_sampler = false;
  DIR *d = opendir(dir.c_str());
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    count++;
    if (test_support::read_file(dir + "/" + e->d_name + "/comm").rfind("hugify-peak", 0) == 0) *has_sampler = true;
  }
  if (d) closedir(d);
  return count;
}

// Start `hugify run ARGS -- workload --stop`, count its threads while it is stopped, let it finish.
int threads_while_stopped(std::vector<std::string> args, bool *has_sampler) {
  args.insert(args.begin(), HUGIFY_CLI_PATH);
  for (const char *a : {"--", "", "--mib", "8", "--stop"}) args.push_back(a);
  args[args.size() - 4] = workload();
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 1);
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0, threads = -1;
  int stopped = test_support::wait_until_stopped(pid, &status);
  if (stopped > 0) {
    threads = threads_of(stopped, has_sampler);
    kill(stopped, SIGCONT);
    waitpid(pid, &status, 0);
  }
  return threads;
}

TEST(RunPeak, SamplerThreadOnlyWhileAReportIsWanted) {
  // --text off: with --text auto the text step's own thread waits too (text_remap.cpp tests it).
  bool sampler = true;
  EXPECT_EQ(threads_while_stopped({"run", "--text", "off"}, &sampler), 1);
  EXPECT_FALSE(sampler) << "no report wanted, yet a sampler thread runs in the host";
  std::string path = temp_report("threads");
  EXPECT_EQ(threads_while_stopped({"run", "--text", "off", "--report", path}, &sampler), 2);
  EXPECT_TRUE(sampler);
  unlink(path.c_str());
}

}  // namespace

namespace {

// The code a tree's processes had on huge pages, from the tree report: the worker's, not the driver's.
struct code_of_tree {
  double worker_code_huge = -1, tree_code_huge = -1;
  size_t processes = 0;
  std::string text;
};

code_of_tree run_tree(const std::vector<std::string> &command, const std::string &worker_name) {
  std::string path = temp_report("tree");
  std::vector<std::string> args{"run", "--heap", "off", "--text", "on", "--report", path, "--"};
  args.insert(args.end(), command.begin(), command.end());
  auto run = test_support::hugify(args);
  code_of_tree out;
  out.text = test_support::read_file(path) + run.err;
  EXPECT_EQ(run.status, 0) << run.err;
  auto tree = test_support::load_json(path);
  unlink(path.c_str());
  out.processes = tree["process_count"].u64();
  out.tree_code_huge = tree.at("classes.code.huge_bytes").number();
  for (size_t i = 0; tree["processes"][i].present(); i++)
    if (tree["processes"][i]["command"].text().find(worker_name) != std::string::npos)
      out.worker_code_huge = tree["processes"][i].at("classes.code.huge_bytes").number();
  return out;
}

}  // namespace

TEST(RunTree, ADriversForkedWorkerReportsItsMovedCode) {
  REQUIRE_KERNEL_FEATURE("thp");
  // A shell driver forks and execs the worker (the generated program with 18 MiB of code) and waits.
  auto tree = run_tree({"sh", "-c", "\"$0\" >/dev/null; true", test_support::helper_path("text_program_static")},
                       "text_program_static");
  EXPECT_GE(tree.processes, 1u) << tree.text;
  EXPECT_GE(tree.worker_code_huge, 8.0 * (1 << 20)) << "the worker's code was not on huge pages:\n" << tree.text;
  EXPECT_GE(tree.tree_code_huge, tree.worker_code_huge) << tree.text;
}

TEST(RunTree, GccDriverReportsCc1plusMovedCode) {
  REQUIRE_KERNEL_FEATURE("thp");
  // g++ is a driver: the work, and the big code (cc1plus, ~30 MiB of text), is in the child it runs.
  if (test_support::run({"g++", "--version"}).status != 0) GTEST_SKIP() << "g++ is not installed";
  std::string source = temp_report("tree-source") + ".cc", object = temp_report("tree-object") + ".o";
  {
    std::ofstream out(source);
    out << "#include <map>\n#include <string>\nstd::map<std::string, int> table() { return {{\"a\", 1}}; }\n";
  }
  auto tree = run_tree({"g++", "-O1", "-c", source, "-o", object}, "cc1plus");
  unlink(source.c_str());
  unlink(object.c_str());
  EXPECT_GE(tree.processes, 2u) << "g++ and cc1plus (and as) each report:\n" << tree.text;
  EXPECT_GE(tree.worker_code_huge, 2.0 * (1 << 20)) << "cc1plus's moved code is not in the tree report:\n" << tree.text;
}

namespace {

// `hugify run --report FILE -- sh -c SCRIPT`, SCRIPT writing foreign reports into the report directory (any
// process of the tree can: HUGIFY_REPORT points there): the tree report, and its text in *text.
test_support::json_view tree_with_foreign_reports(const char *name, const std::string &script, std::string *text) {
  std::string path = temp_report(name);
  auto run = test_support::hugify({"run", "--report", path, "--", "sh", "-c", script});
  EXPECT_EQ(run.status, 0) << run.err;
  *text = test_support::read_file(path);
  auto tree = test_support::load_json(path);
  unlink(path.c_str());
  return tree;
}

}  // namespace

TEST(RunTree, AReportWithoutItsFieldsStillGivesAValidTree) {
  // A report missing every field hugify sums (found by the run_report fuzz target: a null pid crashed the
  // writer) is counted, its figures absent, and the tree report stays valid JSON.
  std::string text;
  auto tree = tree_with_foreign_reports("foreign",
                                        "printf '{\"schema\": \"x\", \"peak\": 1}' > \"$HUGIFY_REPORT.1\"; "
                                        "printf 'not json' > \"$HUGIFY_REPORT.2\"",
                                        &text);
  ASSERT_TRUE(tree.present()) << text;
  EXPECT_EQ(tree["process_count"].u64(), 1u) << text;
  EXPECT_EQ(tree["unreadable_reports"].u64(), 1u) << text;
  EXPECT_TRUE(json_is_null(tree.at("largest_process.pid").get())) << text;
}

TEST(RunTree, AReportsFiguresOutOfRangeAreNotSummed) {
  // A foreign report whose figures are no counts (negative, past 2^63: the run_report fuzz target found a
  // negative peak crashing the table) beside /bin/true's own (dash ends with _exit, writing none): the sums
  // are /bin/true's figures alone, the JSON and the table are written, and neither shows a negative figure.
  const std::string script =
      "printf '{\"pid\": -7, \"peak_memory_bytes\": -3489790, \"max_rss_bytes\": 1e300, \"hugify_seconds\": -1,"
      " \"peak\": {\"allocated\": {\"resident_bytes\": -5, \"huge_bytes\": 1e200}}}' > \"$HUGIFY_REPORT.1\"; exec /bin/true";
  std::string text;
  auto tree = tree_with_foreign_reports("out-of-range", script, &text);
  ASSERT_TRUE(tree.present()) << text;
  ASSERT_EQ(tree["process_count"].u64(), 2u) << text;
  const auto processes = tree["processes"];
  auto own = processes[size_t{0}]["pid"].number() < 0 ? processes[size_t{1}] : processes[size_t{0}];
  ASSERT_GT(own["peak_memory_bytes"].u64(), 0u) << text;
  EXPECT_EQ(tree["peak_memory_bytes"].u64(), own["peak_memory_bytes"].u64()) << text;
  EXPECT_EQ(tree["max_rss_bytes"].u64(), own["max_rss_bytes"].u64()) << text;
  EXPECT_EQ(tree.at("peak.allocated.resident_bytes").u64(), own.at("peak.allocated.resident_bytes").u64()) << text;
  EXPECT_EQ(tree.at("largest_process.pid").u64(), own["pid"].u64()) << text;
  auto table = test_support::hugify({"run", "--report", "-", "--", "sh", "-c", script});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.err.find("2 processes"), std::string::npos) << table.err;
  std::string figures = table.err.substr(table.err.find('\n')); // below the command's line
  EXPECT_EQ(figures.find("-3"), std::string::npos) << table.err;
  EXPECT_EQ(figures.find("e+"), std::string::npos) << table.err;
}
