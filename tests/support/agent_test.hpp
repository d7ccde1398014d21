// SPDX-License-Identifier: MIT
// agent_test.hpp - what the tests of hugify agent share (tests/integration/agent_*.cpp): its targets
// (tests/helpers/agent_target.c) as child processes, the daemon's command line, its metrics read back and
// its passes counted. Progress is counted in agent passes (from its metrics), never in seconds, so a loaded
// machine makes the tests slower, not flaky.
#ifndef HUGIFY_TESTS_AGENT_TEST_HPP
#define HUGIFY_TESTS_AGENT_TEST_HPP

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace agent_test {

inline constexpr uint64_t MiB = uint64_t{1} << 20;
// The kernel's PMD huge page: a collapse window (2 MiB on x86-64, 32 MiB on arm64's 16 KiB pages).
inline const uint64_t kPmd = test_support::pmd_size();
// A region size for agent_target: `bytes`, or `windows` PMD windows where that is more (the sizes the tests
// name hold that many 2 MiB windows, so on x86-64 this is `bytes`), as its argument ("16M", "64M").
inline std::string windows_arg(uint64_t bytes, uint64_t windows) {
  return test_support::size_arg(std::max(bytes, windows * kPmd));
}

inline double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// A child process with its stdout on a pipe (and stderr to a file when asked); killed when destroyed.
struct process {
  pid_t pid = -1;
  int out = -1;
  std::string buffered;
  process() = default;
  process(const process &) = delete;
  process &operator=(const process &) = delete;
  // SIGTERM first: an agent then puts back what it set up (a kdamond it took), so a test that failed does not
  // leave the next ones a busy kdamond; SIGKILL after 5 s.
  ~process() {
    if (pid > 0) kill(pid, SIGTERM);
    for (int i = 0; i < 500 && alive(); i++) usleep(10000);
    stop(SIGKILL);
  }
  void start(const std::vector<std::string> &argv, const std::string &stderr_path = "") {
    int fds[2];
    ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
    pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      if (!stderr_path.empty()) {
        int e = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (e >= 0) dup2(e, 2);
      }
      std::vector<char *> raw;
      for (auto &a : argv) raw.push_back(const_cast<char *>(a.c_str()));
      raw.push_back(nullptr);
      execvp(raw[0], raw.data());
      _exit(127);
    }
    close(fds[1]);
    out = fds[0];
  }
  // The next line of stdout starting with `prefix` (skipping others); "" at EOF.
  std::string line(const std::string &prefix) {
    for (;;) {
      size_t nl;
      while ((nl = buffered.find('\n')) != std::string::npos) {
        std::string l = buffered.substr(0, nl);
        buffered.erase(0, nl + 1);
        if (l.compare(0, prefix.size(), prefix) == 0) return l;
      }
      char buf[4096];
      ssize_t n = read(out, buf, sizeof buf);
      if (n <= 0) return "";
      buffered.append(buf, (size_t)n);
    }
  }
  // Signal and wait: the exit status (128 + signal when killed).
  int stop(int signal) {
    if (pid <= 0) return -1;
    kill(pid, signal);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    if (out >= 0) close(out), out = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  bool alive() const { return pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0; }
};

struct region {
  uintptr_t start = 0;
  size_t size = 0;
};

// Start agent_target and read its regions until "ready".
inline std::map<std::string, region> start_target(process &p, const std::vector<std::string> &args) {
  std::vector<std::string> argv = {test_support::helper_path("agent_target")};
  argv.insert(argv.end(), args.begin(), args.end());
  p.start(argv);
  std::map<std::string, region> regions;
  for (std::string l = p.line(""); !l.empty(); l = p.line("")) {
    if (l.compare(0, 5, "ready") == 0) break;
    std::istringstream in(l);
    std::string name, address;
    size_t size = 0;
    in >> name >> address >> size;
    regions[name] = {(uintptr_t)std::stoull(address, nullptr, 16), size};
  }
  return regions;
}

inline uint64_t huge_bytes(int pid, const region &r) {
  return test_support::smaps_field(pid, r.start, r.size, "AnonHugePages");
}

// Directories made by temp_dir(), removed when the test program exits.
struct temp_dirs {
  std::vector<std::string> paths;
  ~temp_dirs() {
    for (auto &p : paths) test_support::run({"rm", "-rf", "--", p});
  }
};
inline temp_dirs made_dirs;

inline std::string temp_dir() {
  char path[] = "/tmp/hugify-agent-test-XXXXXX";
  if (!mkdtemp(path)) return "/tmp";
  made_dirs.paths.push_back(path);
  return path;
}

// A sample's value from Prometheus text ("name value" or "name{...} value" with the labels given).
inline double metric(const std::string &text, const std::string &name, const std::string &labels = "") {
  std::istringstream in(text);
  std::string want = labels.empty() ? name + " " : name + "{" + labels + "} ";
  for (std::string l; std::getline(in, l);)
    if (l.compare(0, want.size(), want) == 0) return std::stod(l.substr(want.size()));
  return -1;
}

// Wait until the agent's metrics file says it has completed at least `passes` passes (or it died).
inline double wait_passes(const process &agent, const std::string &metrics, double passes) {
  double seen = -1;
  for (double give_up = now() + 300; now() < give_up && agent.alive(); usleep(20000)) {
    seen = metric(test_support::read_file(metrics), "hugify_agent_passes_total");
    if (seen >= passes) break;
  }
  return seen;
}

// A daemon's command line. Root's daemon writes its state to /run/hugify/agent.json by default: a test's
// daemon writes none (StatusShowsTheDaemonsLedgerFromItsStateFile names its own file). Without a --heat of
// its own, --heat none: these tests are of the walk, the guards, the ledger and the budget, whose order is
// densest first; with DAMON (the 6.12 guest) the order would follow a sampled signal (cold windows wait
// while hot ones are planned), and the AgentHeat tests are the ones about it.
inline std::vector<std::string> agent_argv(const std::vector<std::string> &args) {
  std::vector<std::string> argv = {HUGIFY_CLI_PATH, "agent", "--state-file", "none"};
  argv.insert(argv.end(), args.begin(), args.end());
  if (std::find(args.begin(), args.end(), "--heat") == args.end()) argv.insert(argv.end(), {"--heat", "none"});
  return argv;
}

// A TCP port on 127.0.0.1 that was free a moment ago, as text for the command lines.
inline std::string free_port() { return std::to_string(test_support::free_port()); }

inline bool collapse_available(std::string &why) {
  for (const char *feature : {"madv_collapse", "process_madvise_collapse"})
    if (!(why = test_support::missing_kernel_feature(feature)).empty()) return false;
  if (geteuid() != 0) {
    why = "needs root (CAP_SYS_NICE for process_madvise)";
    return false;
  }
  return true;
}

#define REQUIRE_COLLAPSE()                                      \
  do {                                                          \
    std::string why;                                            \
    if (!collapse_available(why)) GTEST_SKIP() << why;          \
  } while (0)

// A python3 that has prometheus_client (Debian's python3-prometheus-client), or "".
inline std::string python_with_prometheus() {
  for (const char *python : {"/usr/bin/python3", "python3"}) {
    auto r = test_support::run({python, "-c", "import prometheus_client"});
    if (r.status == 0) return python;
  }
  return "";
}

// Parse Prometheus text with prometheus_client's own parser; "name{label=value,...} value" per sample,
// sorted labels, one per line (or the parser's error).
inline test_support::command_result parse_with_prometheus_client(const std::string &python,
                                                                  const std::string &path) {
  const char *script =
      "import sys\n"
      "from prometheus_client.parser import text_string_to_metric_families\n"
      "for family in text_string_to_metric_families(open(sys.argv[1]).read()):\n"
      "    for s in family.samples:\n"
      "        labels = ','.join('%s=%s' % kv for kv in sorted(s.labels.items()))\n"
      "        print('%s{%s} %r' % (s.name, labels, s.value))\n";
  return test_support::run({python, "-c", script, path});
}

// The last JSON object the daemon appended to its --json file (it writes one per pass).
inline std::string last_json_object(const std::string &path) {
  std::string all = test_support::read_file(path);
  size_t at = all.rfind("\"schema\"");
  return at == std::string::npos ? "" : all.substr(at);
}
}  // namespace agent_test

#endif
