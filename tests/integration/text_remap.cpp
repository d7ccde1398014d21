// SPDX-License-Identifier: MIT
// text_remap.cpp - code onto huge pages at run time, for real: hugify_remap_text() and the preload's text
// step on a generated program with ~18 MiB of code (in the executable and in a shared object), fault
// injection at every step, the perf map, `hugify elf`, and third-party programs found on this machine
// (node, cc1plus, rustc). What backs the code is read from /proc/PID/smaps by this file's own reader, not
// by libhugify's parser; the programs' outputs are compared with runs without the remap.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hugify.h"
#include "test_support.hpp"

extern "C" {
#include "internal.h"
}

namespace {

using test_support::command_result;
constexpr uint64_t MiB = uint64_t(1) << 20;
using env_map = std::map<std::string, std::string>;

// The preload in an ASan-built program: the sanitizer wants to be first in the library list; the preload
// is not instrumented, so the order does not matter here.
const env_map preload_env = {{"LD_PRELOAD", HUGIFY_PRELOAD_PATH}, {"HUGIFY_TEXT", "1"},
                             {"ASAN_OPTIONS", "verify_asan_link_order=0"}};

env_map with(env_map base, const env_map &more) {
  for (const auto &[k, v] : more) base[k] = v;
  return base;
}

// ---- a child with a pipe on its stdin ------------------------------------------------------------------

class child {
 public:
  child(const std::vector<std::string> &argv, const env_map &env) {
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      for (const auto &[name, value] : env) setenv(name.c_str(), value.c_str(), 1);
      std::vector<char *> args;
      for (const auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    stdin_ = in[1];
    stdout_ = out[0];
    int fd = err[0];
    err_reader_ = std::thread([this, fd] {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof buf)) > 0) err_.append(buf, static_cast<size_t>(n));
      close(fd);
    });
  }
  ~child() {
    if (stdin_ >= 0) close(stdin_);
    if (pid_ > 0 && !reaped_) { kill(pid_, SIGKILL); waitpid(pid_, nullptr, 0); }
    if (err_reader_.joinable()) err_reader_.join();
    if (stdout_ >= 0) close(stdout_);
  }
  pid_t pid() const { return pid_; }

  // Read stdout until a line equal to `line` has come, or EOF, or the timeout (far above any plausible
  // delay: an emulated guest took 40 s for one 16 MiB copy; returns as soon as the line comes).
  bool wait_for_line(const std::string &line, int timeout_ms = 300000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (out_.find(line + "\n") == std::string::npos) {
      int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
      struct pollfd p = {stdout_, POLLIN, 0};
      if (left <= 0 || poll(&p, 1, left) <= 0) return false;
      char buf[4096];
      ssize_t n = read(stdout_, buf, sizeof buf);
      if (n <= 0) return false;
      out_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  // Wait until one of the child's threads blocks in read(0, ...): its start-up (and the preload's
  // constructor) is over and it waits for input.
  bool wait_reading_stdin(int timeout_ms = 300000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      std::string dir = "/proc/" + std::to_string(pid_) + "/task";
      if (DIR *d = opendir(dir.c_str())) {
        bool reading = false;
        while (struct dirent *e = readdir(d)) {
          if (e->d_name[0] == '.') continue;
          std::string call = test_support::read_file(dir + "/" + e->d_name + "/syscall");
          if (call.rfind("0 0x0 ", 0) == 0) reading = true; // syscall 0 (read), first argument fd 0
        }
        closedir(d);
        if (reading) return true;
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) { reaped_ = true; return false; }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  void write_stdin(const std::string &text) {
    for (size_t done = 0; done < text.size();) {
      ssize_t n = write(stdin_, text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }

  // Close stdin, read the rest, wait for the exit.
  command_result finish() {
    command_result r;
    if (stdin_ >= 0) { close(stdin_); stdin_ = -1; }
    char buf[65536];
    ssize_t n;
    while ((n = read(stdout_, buf, sizeof buf)) > 0) out_.append(buf, static_cast<size_t>(n));
    int status = 0;
    if (!reaped_) waitpid(pid_, &status, 0);
    reaped_ = true;
    if (err_reader_.joinable()) err_reader_.join();
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = out_;
    r.err = err_;
    return r;
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1;
  bool reaped_ = false;
  std::string out_, err_;
  std::thread err_reader_;
};

// ---- /proc/PID/smaps, read here (independently of libhugify's parser) ----------------------------------

struct vma {
  uint64_t start = 0, end = 0;
  std::string perms, path;
  std::map<std::string, uint64_t> bytes; // "AnonHugePages" -> bytes
};

std::vector<vma> parse_smaps_text(const std::string &text) {
  std::vector<vma> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long a, b;
    char perms[8] = "";
    int path_at = 0;
    if (sscanf(line.c_str(), "%llx-%llx %7s %*s %*s %*s %n", &a, &b, perms, &path_at) >= 3 && line.find(':') > line.find('-')) {
      vma v;
      v.start = a;
      v.end = b;
      v.perms = perms;
      if (path_at > 0 && static_cast<size_t>(path_at) <= line.size()) v.path = line.substr(static_cast<size_t>(path_at));
      out.push_back(v);
      continue;
    }
    size_t colon = line.find(':');
    if (colon == std::string::npos || out.empty() || line.find(" kB") == std::string::npos) continue;
    out.back().bytes[line.substr(0, colon)] = std::strtoull(line.c_str() + colon + 1, nullptr, 10) * 1024;
  }
  return out;
}

std::vector<vma> read_smaps(pid_t pid) {
  return parse_smaps_text(test_support::read_file("/proc/" + std::to_string(pid) + "/smaps"));
}

// Bytes on transparent huge pages in anonymous executable mappings: moved code (or node's own remap).
uint64_t exec_anon_huge(const std::vector<vma> &vmas) {
  uint64_t total = 0;
  for (const auto &v : vmas)
    if (v.perms.size() > 2 && v.perms[2] == 'x' && (v.path.empty() || v.path.rfind("[anon:", 0) == 0))
      total += v.bytes.count("AnonHugePages") ? v.bytes.at("AnonHugePages") : 0;
  return total;
}

// ---- the generated program ------------------------------------------------------------------------------

struct window { uint64_t start, end; };
struct segment_line { std::string object, path_used, kind, reason; uint64_t start, end, window_start, window_end, huge; int failed_step; };

struct program_output {
  std::vector<window> windows;
  std::vector<segment_line> segments;     // only segments that had a window
  std::vector<std::string> remap_lines;
  std::map<std::string, uint64_t> functions;
  std::string checksum, perf_map;
  bool ok = false;
};

program_output parse_program(const std::string &out) {
  program_output p;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string what;
    words >> what;
    if (what == "window") {
      window w;
      words >> std::hex >> w.start >> w.end;
      p.windows.push_back(w);
    } else if (what == "segment") {
      segment_line s;
      words >> s.object >> std::hex >> s.start >> s.end >> s.window_start >> s.window_end >> std::dec >> s.path_used >> s.kind >> s.huge >> s.failed_step;
      std::getline(words, s.reason);
      if (s.window_end > s.window_start) p.segments.push_back(s);
    } else if (what == "remap") {
      p.remap_lines.push_back(line);
    } else if (what == "function") {
      std::string name;
      uint64_t address;
      words >> name >> std::hex >> address;
      p.functions[name] = address;
    } else if (what == "checksum") {
      std::string verdict;
      words >> p.checksum >> verdict;
      p.ok = verdict == "ok";
    } else if (what == "perf_map") {
      words >> p.perf_map;
    }
  }
  return p;
}

std::string program(const std::string &variant) { return test_support::helper_path("text_program_" + variant); }

const std::string &expected_checksum() {
  static const std::string checksum = [] {
    command_result r = test_support::run({program("static")});
    return r.status == 0 ? parse_program(r.out).checksum : std::string("(baseline run failed)");
  }();
  return checksum;
}

uint64_t window_bytes(const program_output &p) {
  uint64_t total = 0;
  for (const auto &w : p.windows) total += w.end - w.start;
  return total;
}

// Every mapping over the windows is still the file's own r-xp mapping, on 4 KiB pages.
void expect_untouched(const std::vector<vma> &vmas, const program_output &p, const std::string &context) {
  for (const auto &w : p.windows)
    for (const auto &v : vmas) {
      if (v.end <= w.start || v.start >= w.end) continue;
      EXPECT_EQ(v.perms, "r-xp") << context;
      EXPECT_NE(v.path.find("text_"), std::string::npos) << context << ": window now backed by '" << v.path << "'";
      EXPECT_EQ(v.bytes.count("AnonHugePages") ? v.bytes.at("AnonHugePages") : 0, 0u) << context;
    }
}

struct held_run {
  program_output output;
  std::vector<vma> vmas;
  uint64_t huge = 0;
  command_result result;
};

// Run a text program with --hold: read its smaps while it waits, then let it exit.
held_run run_held(const std::string &variant, std::vector<std::string> args, const env_map &env = {}) {
  held_run h;
  args.insert(args.begin(), program(variant));
  args.push_back("--hold");
  child c(args, env);
  if (c.wait_for_line("ready")) {
    h.vmas = read_smaps(c.pid()); // while it waits: the moved code has run, the process is still there
    h.result = c.finish();
    h.output = parse_program(h.result.out);
  } else {
    h.result = c.finish();
    ADD_FAILURE() << variant << " never got ready: status " << h.result.status << "\n" << h.result.out << h.result.err;
  }
  return h;
}

// Huge bytes of the windows from a smaps snapshot (prorated per mapping, like test_support::smaps_field).
uint64_t windows_huge(const std::vector<vma> &vmas, const program_output &p) {
  double total = 0;
  for (const auto &w : p.windows)
    for (const auto &v : vmas) {
      uint64_t lo = std::max(v.start, w.start), hi = std::min(v.end, w.end);
      if (lo >= hi) continue;
      uint64_t huge = (v.bytes.count("AnonHugePages") ? v.bytes.at("AnonHugePages") : 0) +
                      (v.bytes.count("Private_Hugetlb") ? v.bytes.at("Private_Hugetlb") : 0);
      total += static_cast<double>(huge) * static_cast<double>(hi - lo) / static_cast<double>(v.end - v.start);
    }
  return static_cast<uint64_t>(total);
}

void expect_moved(const held_run &h, const std::string &context) {
  ASSERT_EQ(h.result.status, 0) << context << "\n" << h.result.out << h.result.err;
  EXPECT_TRUE(h.output.ok) << context;
  EXPECT_EQ(h.output.checksum, expected_checksum()) << context;
  uint64_t windows = window_bytes(h.output);
  ASSERT_GE(windows, 12 * MiB) << context << ": the generated code should hold at least six 2 MiB windows";
  uint64_t huge = windows_huge(h.vmas, h.output);
  EXPECT_GE(static_cast<double>(huge), 0.9 * static_cast<double>(windows))
      << context << ": " << huge / MiB << " MiB of " << windows / MiB << " MiB of windows on huge pages";
  for (const auto &w : h.output.windows)
    for (const auto &v : h.vmas)
      if (v.start < w.end && v.end > w.start) {
        EXPECT_EQ(v.perms, "r-xp") << context << ": never writable, always executable";
        EXPECT_TRUE(v.path.empty() || v.path.rfind("[anon:hugify-text:", 0) == 0) << context << ": " << v.path;
      }
}

// ---- generated program: the library call ---------------------------------------------------------------

TEST(TextRemapGenerated, BaselineRunsAndChecksItself) {
  command_result r = test_support::run({program("static")});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  program_output p = parse_program(r.out);
  EXPECT_TRUE(p.ok);
  EXPECT_GE(window_bytes(p), 12 * MiB);
  // Without a remap the windows are the executable's own file mapping.
  EXPECT_TRUE(p.remap_lines.empty());
}

TEST(TextRemapGenerated, LibraryCallMovesCodeOfTheExecutable) {
  held_run h = run_held("static", {"--remap"});
  if (!test_support::missing_kernel_feature("thp").empty()) {
    // A kernel without THP: the code stays where it was, and the segment names what is missing.
    ASSERT_EQ(h.result.status, 0) << h.result.out << h.result.err;
    EXPECT_EQ(h.output.checksum, expected_checksum());
    expect_untouched(h.vmas, h.output, "static --remap without THP");
    ASSERT_EQ(h.output.segments.size(), 1u) << h.result.out;
    EXPECT_NE(h.output.segments[0].reason.find("no transparent huge pages"), std::string::npos)
        << h.output.segments[0].reason;
    GTEST_SKIP() << test_support::missing_kernel_feature("thp");
  }
  expect_moved(h, "static --remap");
  ASSERT_EQ(h.output.segments.size(), 1u) << h.result.out;
  const segment_line &s = h.output.segments[0];
  EXPECT_EQ(s.path_used, "copy-swap"); // this kernel cannot collapse file text in place
  EXPECT_EQ(s.kind, "THP");
  EXPECT_EQ(s.huge, s.window_end - s.window_start) << "the library's own measurement";
  EXPECT_EQ(s.failed_step, 0) << s.reason;
  EXPECT_NE(s.object.find("text_program_static"), std::string::npos);
}

TEST(TextRemapGenerated, LibraryCallMovesCodeOfASharedObject) {
  REQUIRE_KERNEL_FEATURE("thp");
  held_run h = run_held("shared", {"--remap"});
  expect_moved(h, "shared --remap");
  bool found = false;
  for (const auto &s : h.output.segments)
    if (s.object.find("libhugify_text_code.so") != std::string::npos) {
      found = true;
      EXPECT_EQ(s.path_used, "copy-swap");
    }
  EXPECT_TRUE(found) << h.result.out;
}

TEST(TextRemapGenerated, PreloadMovesCodeBeforeMain) {
  REQUIRE_KERNEL_FEATURE("thp");
  for (std::string variant : {"static", "shared"}) {
    held_run h = run_held(variant, {}, preload_env);
    expect_moved(h, variant + " under the preload");
    EXPECT_EQ(h.result.err, "") << "the preload says nothing without HUGIFY_VERBOSE";
  }
}

bool has_thread(pid_t pid, const std::string &name) {
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  bool found = false;
  DIR *d = opendir(tasks.c_str());
  for (struct dirent *e; d && (e = readdir(d));)
    if (e->d_name[0] != '.') found |= test_support::read_file(tasks + "/" + e->d_name + "/comm").rfind(name, 0) == 0;
  if (d) closedir(d);
  return found;
}

// HUGIFY_TEXT=auto (hugify run's default): the code moves from the preload's own thread once the process
// has used HUGIFY_TEXT_AFTER_MS of CPU, while the main thread keeps running the very code being swapped.
// Nothing here depends on speed: the program is busy for longer than the threshold, then waits, and the
// test polls until the move is seen, with a limit far above any plausible delay.
TEST(TextRemapGenerated, AutoModeMovesCodeOnceTheProcessHasUsedTheCpu) {
  REQUIRE_KERNEL_FEATURE("thp");
  for (std::string variant : {"static", "shared"}) {
    held_run h;
    child c({program(variant), "--busy-ms", "300", "--hold"},
            with(preload_env, {{"HUGIFY_TEXT", "auto"}, {"HUGIFY_TEXT_AFTER_MS", "100"}}));
    ASSERT_TRUE(c.wait_for_line("ready", 120000)) << variant << ": " << c.finish().err;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    // The waiting thread ends when the step is done.
    while (has_thread(c.pid(), "hugify-text") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    h.vmas = read_smaps(c.pid());
    h.result = c.finish();
    h.output = parse_program(h.result.out);
    expect_moved(h, variant + " under HUGIFY_TEXT=auto, moved while its code ran");
  }
}

TEST(TextRemapGenerated, AutoModeLeavesAShortProgramsCodeAlone) {
  // A threshold no test program reaches: the waiting thread exists, the code stays the file's.
  held_run h;
  child c({program("static"), "--hold"}, with(preload_env, {{"HUGIFY_TEXT", "auto"}, {"HUGIFY_TEXT_AFTER_MS", "3600000"}}));
  ASSERT_TRUE(c.wait_for_line("ready"));
  h.vmas = read_smaps(c.pid());
  bool waiter = has_thread(c.pid(), "hugify-text");
  h.result = c.finish();
  h.output = parse_program(h.result.out);
  ASSERT_EQ(h.result.status, 0) << h.result.err;
  EXPECT_TRUE(waiter) << "no hugify-text thread waits for the CPU threshold";
  expect_untouched(h.vmas, h.output, "HUGIFY_TEXT=auto before the threshold");
}

TEST(TextRemapGenerated, PreloadVerboseSaysWhatMovedOnStderrOnly) {
  REQUIRE_KERNEL_FEATURE("thp");
  command_result plain = test_support::run({program("shared")});
  command_result r = test_support::run({program("shared")}, with(preload_env, {{"HUGIFY_VERBOSE", "1"}}));
  ASSERT_EQ(r.status, 0) << r.err;
  // Addresses differ from run to run (ASLR); the preload adds no line of its own to stdout.
  EXPECT_EQ(parse_program(r.out).checksum, parse_program(plain.out).checksum);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), std::count(plain.out.begin(), plain.out.end(), '\n'))
      << "the preload never writes to stdout:\n" << r.out;
  EXPECT_NE(r.err.find("hugify: text: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("measured on huge pages"), std::string::npos) << r.err;
}

TEST(TextRemapGenerated, SecondCallFindsNothingLeftToMove) {
  REQUIRE_KERNEL_FEATURE("thp");
  held_run h = run_held("static", {"--remap", "--remap"});
  expect_moved(h, "static --remap --remap");
  ASSERT_EQ(h.output.remap_lines.size(), 2u);
  EXPECT_NE(h.output.remap_lines[1].find("moved_segments 0 "), std::string::npos) << h.output.remap_lines[1];
  ASSERT_EQ(h.output.segments.size(), 2u);
  EXPECT_EQ(h.output.segments[1].path_used, "skipped");
  EXPECT_NE(h.output.segments[1].reason.find("already"), std::string::npos) << h.output.segments[1].reason;
}

TEST(TextRemapGenerated, MainOnlyAndExcludeLeaveObjectsAlone) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--remap", "--main-only"},
                                        std::vector<std::string>{"--remap", "--exclude", "/nowhere/*:libhugify_text_code.*"}}) {
    held_run h = run_held("shared", args);
    ASSERT_EQ(h.result.status, 0) << h.result.err;
    EXPECT_EQ(h.output.checksum, expected_checksum());
    expect_untouched(h.vmas, h.output, args[1]);
    for (const auto &s : h.output.segments)
      if (s.object.find("libhugify_text_code.so") != std::string::npos) {
        EXPECT_EQ(s.path_used, "skipped");
        EXPECT_NE(s.reason.find(args[1] == "--main-only" ? "not the main program" : "exclude"), std::string::npos)
            << s.reason;
      }
  }
}

TEST(TextRemapGenerated, PreloadOptionsChooseTheObjects) {
  for (env_map options : {env_map{{"HUGIFY_TEXT_MAIN_ONLY", "1"}}, env_map{{"HUGIFY_TEXT_EXCLUDE", "libhugify_text_code.*"}},
                          env_map{{"HUGIFY_TEXT_INCLUDE", "*/text_program_*"}}, env_map{{"HUGIFY_TEXT_MIN_SIZE", "64M"}}}) {
    std::string context = options.begin()->first + "=" + options.begin()->second;
    held_run h = run_held("shared", {}, with(preload_env, options));
    ASSERT_EQ(h.result.status, 0) << context << "\n" << h.result.err;
    EXPECT_EQ(h.output.checksum, expected_checksum()) << context;
    expect_untouched(h.vmas, h.output, context);
  }
  REQUIRE_KERNEL_FEATURE("thp");
  held_run h = run_held("shared", {}, with(preload_env, {{"HUGIFY_TEXT_INCLUDE", "/nowhere/*:libhugify_text_code.so"}}));
  expect_moved(h, "HUGIFY_TEXT_INCLUDE by file name");
}

TEST(TextRemapGenerated, HugetlbPagesWhenThePoolHasThem) {
  std::string why = test_support::ensure_free_hugetlb(2 * MiB, 10);
  if (!why.empty()) GTEST_SKIP() << why;
  held_run h = run_held("static", {"--remap", "--kind", "2m"});
  ASSERT_EQ(h.result.status, 0) << h.result.out << h.result.err;
  EXPECT_EQ(h.output.checksum, expected_checksum());
  ASSERT_EQ(h.output.segments.size(), 1u) << h.result.out;
  EXPECT_EQ(h.output.segments[0].path_used, "copy-swap") << h.output.segments[0].reason;
  EXPECT_EQ(h.output.segments[0].kind, "2M") << h.output.segments[0].reason;
  auto hugetlb_in_windows = [](const held_run &run) {
    uint64_t hugetlb = 0;
    for (const auto &w : run.output.windows)
      for (const auto &v : run.vmas)
        if (v.start < w.end && v.end > w.start && v.bytes.count("Private_Hugetlb")) hugetlb += v.bytes.at("Private_Hugetlb");
    return hugetlb;
  };
  EXPECT_EQ(hugetlb_in_windows(h), window_bytes(h.output));
  // Faults in the hugetlb path leave the original as it was, and the pool pages are given back.
  uint64_t free_before = test_support::free_hugetlb(2 * MiB);
  for (int step : {HUGIFY_TEXT_STEP_RESERVE, HUGIFY_TEXT_STEP_COPY, HUGIFY_TEXT_STEP_PROTECT, HUGIFY_TEXT_STEP_SWAP}) {
    std::string context = std::string("--kind 2m, ") + hugify_text_step_name(static_cast<hugify_text_step>(step)) + " fails";
    held_run f = run_held("static", {"--remap", "--kind", "2m", "--fail-step", std::to_string(step)});
    ASSERT_EQ(f.result.status, 0) << context << "\n" << f.result.err;
    EXPECT_EQ(f.output.checksum, expected_checksum()) << context;
    expect_untouched(f.vmas, f.output, context);
    ASSERT_EQ(f.output.segments.size(), 1u);
    EXPECT_EQ(f.output.segments[0].failed_step, step) << f.output.segments[0].reason;
  }
  EXPECT_EQ(test_support::free_hugetlb(2 * MiB), free_before);
  // The same through the preload's HUGIFY_TEXT_PAGES.
  held_run p = run_held("shared", {}, with(preload_env, {{"HUGIFY_TEXT_PAGES", "2M"}}));
  ASSERT_EQ(p.result.status, 0) << p.result.err;
  EXPECT_EQ(p.output.checksum, expected_checksum());
  EXPECT_EQ(hugetlb_in_windows(p), window_bytes(p.output));
}

TEST(TextRemapGenerated, HugetlbFallsBackToThpWhenThePoolIsShort) {
  REQUIRE_KERNEL_FEATURE("thp");
  // Make the pool short for real: reserve every free page in this process (an untouched hugetlb mapping
  // holds its reservation) while the child runs.
  uint64_t free_pages = test_support::free_hugetlb(2 * MiB);
  void *hold = nullptr;
  if (free_pages > 0) {
    hold = mmap(nullptr, free_pages * 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (21 << MAP_HUGE_SHIFT), -1, 0);
    ASSERT_NE(hold, MAP_FAILED) << "could not reserve the free 2M pages: " << strerror(errno);
  }
  ASSERT_EQ(test_support::free_hugetlb(2 * MiB), 0u);
  held_run h = run_held("static", {"--remap", "--kind", "2m"});
  if (hold) munmap(hold, free_pages * 2 * MiB);
  expect_moved(h, "--kind 2m with a short pool");
  ASSERT_EQ(h.output.segments.size(), 1u);
  EXPECT_EQ(h.output.segments[0].kind, "THP");
  EXPECT_NE(h.output.segments[0].reason.find("used THP"), std::string::npos) << h.output.segments[0].reason;
}

TEST(TextRemapGenerated, PerfMapNamesTheMovedFunctions) {
  REQUIRE_KERNEL_FEATURE("thp");
  held_run h = run_held("static", {"--remap", "--perf-map"});
  expect_moved(h, "--perf-map");
  ASSERT_FALSE(h.output.perf_map.empty()) << h.result.out;
  std::string map = test_support::read_file(h.output.perf_map);
  std::remove(h.output.perf_map.c_str());
  std::map<std::string, uint64_t> named;
  std::istringstream in(map);
  std::string line;
  size_t lines = 0;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    uint64_t start, size;
    std::string name;
    ASSERT_TRUE(static_cast<bool>(words >> std::hex >> start >> size >> name)) << "malformed line: " << line;
    bool inside = false;
    for (const auto &w : h.output.windows) inside |= start >= w.start && start < w.end;
    EXPECT_TRUE(inside) << line << ": only moved code belongs in the map";
    named[name] = start;
    lines++;
  }
  EXPECT_GT(lines, 3000u); // most of the 4608 generated functions lie in the windows
  for (const auto &[name, address] : h.output.functions) {
    bool in_window = false;
    for (const auto &w : h.output.windows) in_window |= address >= w.start && address < w.end;
    if (!in_window) continue;
    ASSERT_TRUE(named.count(name)) << name << " missing from the perf map";
    EXPECT_EQ(named[name], address) << name;
  }
}

TEST(TextRemapGenerated, AlignedLinkMovesTheSegmentFromItsStart) {
  REQUIRE_KERNEL_FEATURE("thp");
  held_run h = run_held("aligned", {"--remap"});
  expect_moved(h, "aligned --remap");
  ASSERT_EQ(h.output.segments.size(), 1u) << h.result.out;
  const segment_line &s = h.output.segments[0];
  EXPECT_EQ(s.window_start, s.start) << "a 2 MiB-aligned segment has no head left on 4 KiB pages";
  EXPECT_LT(s.end - s.window_end, 2 * MiB);

  command_result elf = test_support::hugify({"elf", "--json", program("aligned"), program("static")});
  ASSERT_EQ(elf.status, 0) << elf.err;
  auto doc = test_support::parse_json(elf.out);
  ASSERT_EQ(doc["files"].size(), 2u) << elf.out;
  EXPECT_EQ(doc.at("files.1.path").text(), program("static"));
  EXPECT_TRUE(doc.at("files.0.text_aligned").flag()) << elf.out;
  EXPECT_TRUE(json_is_false(doc.at("files.1.text_aligned").get())) << elf.out;
}

// Step K fails: the program runs on with the right result, and before the swap nothing changed.
TEST(TextRemapGenerated, FaultAtEveryStepLeavesAWorkingProgram) {
  REQUIRE_KERNEL_FEATURE("thp");
  for (int step = 1; step < HUGIFY_TEXT_STEP_COUNT; step++) {
    std::string name = hugify_text_step_name(static_cast<hugify_text_step>(step));
    bool before_swap = step <= HUGIFY_TEXT_STEP_SWAP && step != HUGIFY_TEXT_STEP_NAME && step != HUGIFY_TEXT_STEP_IN_PLACE;
    for (std::string variant : {"static", "shared"}) {
      std::string context = variant + ", step " + std::to_string(step) + " (" + name + ") fails";
      held_run h = run_held(variant, {"--remap", "--perf-map", "--fail-step", std::to_string(step)});
      ASSERT_EQ(h.result.status, 0) << context << "\n" << h.result.out << h.result.err;
      EXPECT_EQ(h.output.checksum, expected_checksum()) << context;
      if (!h.output.perf_map.empty()) std::remove(h.output.perf_map.c_str());
      if (before_swap) {
        expect_untouched(h.vmas, h.output, context);
        for (const auto &s : h.output.segments) {
          EXPECT_EQ(s.path_used, "skipped") << context;
          EXPECT_EQ(s.failed_step, step) << context << ": " << s.reason;
          EXPECT_NE(s.reason.find(name + " failed"), std::string::npos) << context << ": " << s.reason;
        }
      } else {
        // in-place is not tried on this kernel (no file THP), so failing it changes nothing; name, verify
        // and perf-map fail after the swap: the code is moved and the failure is reported.
        expect_moved(h, context);
        if (step == HUGIFY_TEXT_STEP_PERF_MAP) {
          EXPECT_TRUE(h.output.perf_map.empty()) << context;
          EXPECT_NE(h.output.remap_lines[0].find("perf-map failed"), std::string::npos) << h.output.remap_lines[0];
        } else if (step != HUGIFY_TEXT_STEP_IN_PLACE) {
          for (const auto &s : h.output.segments) EXPECT_EQ(s.failed_step, step) << context;
        }
      }
      // The same fault inside the preload, before main.
      // (HUGIFY_PERF_MAP only where it fails: a map written by the child would be left in /tmp.)
      command_result r = test_support::run(
          {program(variant)}, with(preload_env, {{"HUGIFY_TEXT_FAIL_STEP", std::to_string(step)},
                                                 {"HUGIFY_PERF_MAP", step == HUGIFY_TEXT_STEP_PERF_MAP ? "1" : "0"}}));
      EXPECT_EQ(r.status, 0) << context << " (preload)\n" << r.err;
      EXPECT_EQ(parse_program(r.out).checksum, expected_checksum()) << context << " (preload)";
    }
  }
}

// ---- the library call in this process ------------------------------------------------------------------

TEST(TextRemapApi, RejectsBadOptions) {
  hugify_text_report report;
  hugify_text_opts opts{};
  opts.flags = 0x100;
  EXPECT_EQ(hugify_remap_text(&opts, &report), -EINVAL);
  EXPECT_NE(std::string(report.reason).find("unknown flags"), std::string::npos);
  opts = {};
  opts.kind = HUGIFY_PAGE_1G;
  EXPECT_EQ(hugify_remap_text(&opts, &report), -EINVAL);
  EXPECT_EQ(text_inject_failure(HUGIFY_TEXT_STEP_COUNT), -EINVAL); // test-only, not in the public struct
  EXPECT_EQ(text_inject_failure(-1), -EINVAL);
  EXPECT_EQ(hugify_remap_text(nullptr, nullptr), -EINVAL);
  hugify_text_report_free(&report);
  hugify_text_report_free(&report); // twice is fine
  hugify_text_report_free(nullptr);
  EXPECT_STREQ(hugify_text_step_name(HUGIFY_TEXT_STEP_SWAP), "swap");
  EXPECT_STREQ(hugify_text_step_name(HUGIFY_TEXT_STEP_NONE), "?");
  EXPECT_STREQ(hugify_text_path_name(HUGIFY_TEXT_COPY_SWAP), "copy-swap");
}

TEST(TextRemapApi, ReportsEveryObjectWithTheReasonItWasSkipped) {
  // This test program has little code: every object is reported, the small ones with their reason.
  hugify_text_opts opts{};
  opts.exclude = "*libc.so*";
  hugify_text_report report;
  ASSERT_EQ(hugify_remap_text(&opts, &report), 0) << report.reason;
  ASSERT_GE(report.object_count, 3u); // the program, libc, ld.so at least
  EXPECT_EQ(report.objects[0].main_program, 1);
  EXPECT_NE(std::string(report.objects[0].path).find("test_text_remap"), std::string::npos) << report.objects[0].path;
  uint64_t text = 0;
  for (size_t i = 0; i < report.object_count; i++) {
    const hugify_text_object &o = report.objects[i];
    text += o.text_bytes;
    std::string path = o.path, reason = o.reason;
    if (path.find("libc.so") != std::string::npos) {
      EXPECT_EQ(reason, "in the exclude patterns") << path;
    } else if (o.window_bytes == 0 && o.segment_count > 0) {
      // the PMD's size: "no 2 MiB-aligned window" on x86-64, "no 32 MiB-aligned window" on 16 KiB pages
      EXPECT_NE(reason.find("no " + test_support::size_text(test_support::pmd_size()) + "-aligned window"),
                std::string::npos) << path << ": " << reason;
    }
  }
  EXPECT_EQ(text, report.text_bytes);
  hugify_text_report_free(&report);
  EXPECT_EQ(report.objects, nullptr);
}

// ---- hugify elf ------------------------------------------------------------------------------------------

TEST(ElfCommand, ShowsWindowsAndTheLinkerFlags) {
  command_result r = test_support::hugify({"elf", program("static")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("position-independent executable"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loaded at a 2 MiB-aligned address"), std::string::npos);
  EXPECT_NE(r.out.find(HUGIFY_ELF_LINK_FLAGS), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hugify_enable_huge_text"), std::string::npos);
  command_result aligned = test_support::hugify({"elf", program("aligned")});
  EXPECT_NE(aligned.out.find("2 MiB-aligned text: yes"), std::string::npos) << aligned.out;
}

TEST(ElfCommand, JsonAndErrors) {
  command_result r = test_support::hugify({"elf", "--json", program("shared"), "/etc/hostname", "/nonexistent"});
  EXPECT_EQ(r.status, 1) << "a file that is not ELF, or missing, falls short";
  std::string error;
  auto doc = test_support::parse_json(r.out, &error);
  ASSERT_TRUE(doc.present()) << error << "\n" << r.out;
  EXPECT_EQ(doc["schema"].text(), "hugify.elf/1");
  ASSERT_EQ(doc["files"].size(), 3u) << r.out;
  EXPECT_TRUE(doc.at("files.0.error").is_null());
  EXPECT_EQ(doc.at("files.0.kind").text(), "pie") << r.out;
  EXPECT_EQ(doc.at("files.1.error").text(), "not an ELF file") << r.out;
  EXPECT_EQ(doc.at("files.2.error").text(), "No such file or directory") << r.out;
  command_result so = test_support::hugify({"elf", "--json", test_support::helper_path("libhugify_text_code.so")});
  EXPECT_EQ(so.status, 0) << so.err;
  auto so_doc = test_support::parse_json(so.out);
  EXPECT_EQ(so_doc.at("files.0.kind").text(), "shared-object") << so.out;
  EXPECT_TRUE(so_doc.at("files.0.huge.at_2m_aligned_bytes").present()) << so.out;
  EXPECT_TRUE(json_is_string(so_doc.at("files.0.segments.0.address").get())) << "addresses are hex strings";
  EXPECT_EQ(test_support::hugify({"elf"}).status, 2);
  EXPECT_EQ(test_support::hugify({"elf", "--bogus", "x"}).status, 2);
  command_result help = test_support::hugify({"help", "elf"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("Examples:"), std::string::npos);
}

// ---- third-party programs --------------------------------------------------------------------------------

std::string find_program(const std::string &name) {
  command_result r = test_support::run({"sh", "-c", "command -v " + name});
  std::string path = r.out.substr(0, r.out.find('\n'));
  return r.status == 0 && access(path.c_str(), X_OK) == 0 ? path : "";
}

TEST(TextRemapThirdParty, NodeGetsAtLeastWhatItsOwnLargePagesGive) {
  REQUIRE_KERNEL_FEATURE("thp");
  std::string node = find_program("node");
  if (node.empty()) REQUIRE_PREREQUISITE("node is not installed (Debian: nodejs)");
  const std::string smaps_script = "process.stdout.write(require('fs').readFileSync('/proc/self/smaps', 'utf8'))";
  command_result own = test_support::run({node, "--use-largepages=on", "-e", smaps_script});
  ASSERT_EQ(own.status, 0) << own.err;
  uint64_t node_own = exec_anon_huge(parse_smaps_text(own.out));
  command_result ours = test_support::run({node, "-e", smaps_script}, preload_env);
  ASSERT_EQ(ours.status, 0) << ours.err;
  uint64_t hugify_huge = exec_anon_huge(parse_smaps_text(ours.out));
  EXPECT_GE(node_own, 16 * MiB) << "node --use-largepages=on should put its text on THP here";
  EXPECT_GE(hugify_huge, node_own) << "hugify: " << hugify_huge / MiB << " MiB, node's own: " << node_own / MiB << " MiB";

  const std::string work = "let h=0; for (let i=0;i<200000;i++) h=(h*31+i)%1000003; console.log(h, JSON.stringify([1,2,3].map(x=>x*x)))";
  command_result plain = test_support::run({node, "-e", work});
  command_result remapped = test_support::run({node, "-e", work}, preload_env);
  EXPECT_EQ(plain.status, 0);
  EXPECT_EQ(remapped.status, 0) << remapped.err;
  EXPECT_EQ(remapped.out, plain.out);
}

TEST(TextRemapThirdParty, Cc1plusCompilesTheSameBytes) {
  command_result where = test_support::run({"g++", "-print-prog-name=cc1plus"});
  std::string cc1plus = where.out.substr(0, where.out.find('\n'));
  if (where.status != 0 || access(cc1plus.c_str(), X_OK) != 0) GTEST_SKIP() << "g++ (cc1plus) is not installed";
  char dir[] = "/tmp/hugify-text-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string source = std::string(dir) + "/input.cpp", preprocessed = std::string(dir) + "/input.ii";
  {
    FILE *f = fopen(source.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs("#include <algorithm>\n#include <map>\n#include <string>\n#include <vector>\n"
          "std::map<std::string, int> count(const std::vector<std::string> &words) {\n"
          "  std::map<std::string, int> m; for (const auto &w : words) m[w]++; return m; }\n"
          "int sorted(std::vector<int> v) { std::sort(v.begin(), v.end()); return v.empty() ? 0 : v.back(); }\n", f);
    fclose(f);
  }
  ASSERT_EQ(test_support::run({"g++", "-E", source, "-o", preprocessed}).status, 0);
  std::string input = test_support::read_file(preprocessed);
  auto compile = [&](const env_map &env, const std::string &out, uint64_t *huge) {
    child c({cc1plus, "-fpreprocessed", "-quiet", "-O1", "-frandom-seed=1", "-", "-o", out}, env);
    if (huge) {
      EXPECT_TRUE(c.wait_reading_stdin()) << "cc1plus never read its input";
      *huge = exec_anon_huge(read_smaps(c.pid()));
    }
    c.write_stdin(input);
    return c.finish();
  };
  command_result plain = compile({}, std::string(dir) + "/plain.s", nullptr);
  uint64_t huge = 0;
  command_result remapped = compile(preload_env, std::string(dir) + "/remapped.s", &huge);
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_EQ(remapped.status, 0) << remapped.err;
  std::string a = test_support::read_file(std::string(dir) + "/plain.s"), b = test_support::read_file(std::string(dir) + "/remapped.s");
  EXPECT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b) << "the assembly differs with the remap";
  test_support::run({"rm", "-rf", dir});
  REQUIRE_KERNEL_FEATURE("thp");
  hugify_elf_info info;
  ASSERT_EQ(hugify_elf_read(cc1plus.c_str(), &info), 0);
  EXPECT_GE(static_cast<double>(huge), 0.9 * static_cast<double>(info.huge_expected))
      << huge / MiB << " MiB on huge pages, " << info.huge_expected / MiB << " MiB of windows";
}

TEST(TextRemapThirdParty, RustcDriverSharedObjectMoves) {
  std::string rustc = find_program("rustc");
  // Not installed by scripts/test: measured with rustup's toolchain, whose driver holds LLVM (Debian's links
  // its own libLLVM apart).
  if (rustc.empty()) GTEST_SKIP() << "rustc is not installed (a rustup toolchain: https://rustup.rs)";
  // rustup's rustc is a proxy that execs the toolchain's: ask it for the real one.
  command_result sysroot = test_support::run({rustc, "--print", "sysroot"});
  if (sysroot.status == 0) {
    std::string real = sysroot.out.substr(0, sysroot.out.find('\n')) + "/bin/rustc";
    if (access(real.c_str(), X_OK) == 0) rustc = real;
  }
  command_result plain = test_support::run({rustc, "--version"});
  command_result remapped = test_support::run({rustc, "--version"}, with(preload_env, {{"HUGIFY_VERBOSE", "1"}}));
  ASSERT_EQ(plain.status, 0);
  ASSERT_EQ(remapped.status, 0) << remapped.err;
  EXPECT_EQ(remapped.out, plain.out);
  EXPECT_NE(remapped.err.find("hugify: text: "), std::string::npos) << remapped.err;

  // Where its code lives: the driver shared object, ~100 MiB of code in 2 MiB windows.
  // Never `-o /dev/null`: rustc writes a temporary and renames it over the output, so as root it would
  // replace the machine's /dev/null with a regular file.
  char out_dir[] = "/tmp/hugify-rustc-XXXXXX";
  ASSERT_NE(mkdtemp(out_dir), nullptr);
  std::string out_file = std::string(out_dir) + "/answer.rmeta";
  child c({rustc, "-", "--crate-type", "lib", "--emit", "metadata", "-o", out_file}, preload_env);
  ASSERT_TRUE(c.wait_reading_stdin()) << "rustc never read its input";
  std::vector<vma> vmas = read_smaps(c.pid());
  c.write_stdin("pub fn answer() -> u32 { 42 }\n");
  command_result r = c.finish();
  EXPECT_EQ(r.status, 0) << r.err;
  unlink(out_file.c_str());
  rmdir(out_dir);
  uint64_t driver_window = 0;
  std::string driver_path;
  for (const auto &v : vmas)
    if (v.path.find("librustc_driver") != std::string::npos) driver_path = v.path;
  if (driver_path.empty()) GTEST_SKIP() << "this rustc has no librustc_driver shared object";
  REQUIRE_KERNEL_FEATURE("thp");
  hugify_elf_info info;
  ASSERT_EQ(hugify_elf_read(driver_path.c_str(), &info), 0);
  driver_window = info.huge_expected;
  EXPECT_GE(driver_window, 64 * MiB);
  EXPECT_GE(static_cast<double>(exec_anon_huge(vmas)), 0.9 * static_cast<double>(driver_window))
      << exec_anon_huge(vmas) / MiB << " MiB of code on huge pages; the driver alone has " << driver_window / MiB
      << " MiB in 2 MiB windows";
}

}  // namespace
