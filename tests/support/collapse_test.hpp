// SPDX-License-Identifier: MIT
// collapse_test.hpp - what the tests of hugify inspect and collapse share (tests/integration/inspect.cpp,
// collapse.cpp, opt_out.cpp): child processes of tests/helpers/collapse_target.c holding memory of known
// kinds, and independent reads of their mappings and smaps to check the commands' figures against.
#ifndef HUGIFY_TESTS_COLLAPSE_TEST_HPP
#define HUGIFY_TESTS_COLLAPSE_TEST_HPP

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "test_support.hpp"

namespace collapse_test {

inline constexpr uint64_t MiB = uint64_t{1} << 20;
inline constexpr uint64_t k2M = 2 * MiB; // a hugetlb page size (on x86-64 and on arm64's 4 and 16 KiB pages)
// The kernel's PMD huge page: a collapse window (2 MiB on x86-64, 32 MiB on arm64's 16 KiB pages).
inline const uint64_t kPmd = test_support::pmd_size();
// A region of at least `bytes` that holds at least `windows` whole PMD windows wherever it lies (a malloc'd
// heap is not PMD-aligned): `bytes` on x86-64 for the sizes the tests use, more where the PMD is larger.
inline uint64_t at_least_windows(uint64_t bytes, uint64_t windows) { return std::max(bytes, windows * kPmd); }
inline std::string size_arg(uint64_t bytes) { return test_support::size_arg(bytes); }
inline constexpr uintptr_t kEverything = ~uintptr_t{0}; // smaps_field over the whole address space

// A running collapse_target: its regions by name, killed on destruction unless finished.
struct child {
  pid_t pid = -1;
  int out = -1;
  std::map<std::string, std::pair<uintptr_t, size_t>> regions;
  std::string error;

  child() = default;
  child(const child &) = delete;
  child &operator=(const child &) = delete;
  ~child() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (out >= 0) close(out);
  }
  uintptr_t at(const std::string &name) const { return regions.at(name).first; }
  size_t size(const std::string &name) const { return regions.at(name).second; }
  // SIGUSR1: the child checks its data and exits 0 (intact) or 1.
  int finish() {
    kill(pid, SIGUSR1);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

// Start collapse_target with args (optionally through `prefix`, e.g. setpriv) and wait for "ready".
inline void start(child &c, const std::vector<std::string> &args, const std::vector<std::string> &prefix = {}) {
  int pipe_fds[2];
  ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  std::vector<std::string> argv = prefix;
  argv.push_back(test_support::helper_path("collapse_target"));
  argv.insert(argv.end(), args.begin(), args.end());
  c.pid = fork();
  if (c.pid == 0) {
    dup2(pipe_fds[1], 1);
    std::vector<char *> raw;
    for (auto &a : argv) raw.push_back(const_cast<char *>(a.c_str()));
    raw.push_back(nullptr);
    execvp(raw[0], raw.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  c.out = pipe_fds[0];
  std::string text;
  char buf[4096];
  while (text.find("ready") == std::string::npos && text.find("unsupported") == std::string::npos) {
    ssize_t n = read(c.out, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  if (text.find("unsupported") != std::string::npos) { // a kernel feature the child needs is missing
    c.error = text;
    return;
  }
  ASSERT_NE(text.find("ready"), std::string::npos) << "collapse_target did not start: " << text;
  size_t line_start = 0;
  while (line_start < text.size()) {
    size_t end = text.find('\n', line_start);
    std::string line = text.substr(line_start, end - line_start);
    char name[32];
    unsigned long long address = 0, size = 0;
    if (sscanf(line.c_str(), "%31s 0x%llx %llu", name, &address, &size) == 3)
      c.regions[name] = {static_cast<uintptr_t>(address), static_cast<size_t>(size)};
    if (end == std::string::npos) break;
    line_start = end + 1;
  }
}

// The mapping [start, end) that holds address, from /proc/PID/maps (read here, not by libhugify).
inline std::pair<uintptr_t, uintptr_t> mapping_of(pid_t pid, uintptr_t address) {
  std::string maps = test_support::read_file("/proc/" + std::to_string(pid) + "/maps");
  size_t at = 0;
  while (at < maps.size()) {
    unsigned long long lo, hi;
    if (sscanf(maps.c_str() + at, "%llx-%llx", &lo, &hi) == 2 && address >= lo && address < hi) return {lo, hi};
    at = maps.find('\n', at);
    if (at == std::string::npos) break;
    at++;
  }
  return {0, 0};
}

// Share of a mapping's resident memory on THP, from an independent smaps read.
inline double thp_share(pid_t pid, uintptr_t address) {
  auto [lo, hi] = mapping_of(pid, address);
  uint64_t rss = test_support::smaps_field(pid, lo, hi - lo, "Rss");
  uint64_t thp = test_support::smaps_field(pid, lo, hi - lo, "AnonHugePages");
  return rss ? static_cast<double>(thp) / static_cast<double>(rss) : 0.0;
}

// The CLI's JSON, read with jansson; fails the test when it is not valid JSON.
inline test_support::json_view parse_json(const std::string &text) {
  std::string error;
  test_support::json_view doc = test_support::parse_json(text, &error);
  EXPECT_TRUE(doc.present()) << error << "\n" << text;
  return doc;
}
// The element of array `items` whose member `key` is the string `value` (empty view when none).
inline test_support::json_view find_item(const test_support::json_view &items, const std::string &key,
                                  const std::string &value) {
  for (const auto &item : items.items())
    if (item[key].text() == value) return item;
  return {};
}
inline std::string hex(uintptr_t value) {
  char text[32];
  snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}
inline bool have_setpriv() { return access("/usr/bin/setpriv", X_OK) == 0 || access("/bin/setpriv", X_OK) == 0; }
inline const std::vector<std::string> kAsNobody = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};

inline void expect_near(uint64_t actual, uint64_t expected, double tolerance, const char *what) {
  double diff = static_cast<double>(actual) - static_cast<double>(expected);
  EXPECT_LE(std::abs(diff), tolerance * static_cast<double>(expected)) << what << ": " << actual << " vs " << expected;
}
}  // namespace collapse_test

#endif
