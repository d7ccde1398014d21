// SPDX-License-Identifier: MIT
// Faults injected around hugify and the processes it acts on (issue 34, item 3): the agent killed in the
// middle of a kernel call, a target killed in mid-collapse whose pid a new process then gets, a memory
// cgroup at its limit, the hugetlb pool drained under a running program, a fork storm and threads mapping
// in a loop under the runtime carver, /proc files that vanish during the agent's reads, and a full disk
// under the state and metrics files. Every case checks that no target is harmed (it finishes with its
// checksum and exit status), that the agent's state file and metrics still parse, that a restarted agent
// resumes from its state, and what hugify said. Real processes, real pages: nothing is mocked. A fault is
// hit by watching for it (repeat until hit), never by a sleep of a guessed length; waits are bounded only
// to give up.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using test_support::json_view;
constexpr uint64_t MiB = uint64_t{1} << 20;

#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif

double monotonic() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Poll `done` until it holds; false when `give_up_seconds` passed first (a bound to fail by, not a timing).
bool eventually(const std::function<bool()> &done, double give_up_seconds = 90) {
  for (double end = monotonic() + give_up_seconds; monotonic() < end; usleep(2000))
    if (done()) return true;
  return done();
}

// A child whose stdout and stderr go to a log file. Optionally it joins a cgroup (its procs file) before it
// execs, or is created with a chosen pid (clone3's set_tid: the pid of a process that just exited).
class child {
 public:
  child() = default;
  child(const child &) = delete;
  child &operator=(const child &) = delete;
  ~child() { end(SIGKILL); }
  // 0, or the errno of clone3 when a chosen pid could not be had.
  int start(const std::vector<std::string> &argv, const std::string &log, const std::string &cgroup_procs = "",
            pid_t with_pid = 0) {
    log_ = log;
    if (with_pid > 0) {
      struct {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size,
            cgroup;
      } args{};
      args.exit_signal = SIGCHLD;
      args.set_tid = (uint64_t)(uintptr_t)&with_pid;
      args.set_tid_size = 1;
      long rc = syscall(SYS_clone3, &args, sizeof args);
      if (rc < 0) return errno;
      pid = (pid_t)rc;
    } else {
      pid = fork();
    }
    if (pid == 0) exec_child(argv, log, cgroup_procs);
    return 0;
  }
  bool running() const { return pid > 0 && kill(pid, 0) == 0 && state() != 'Z'; }
  char state() const {
    std::string stat = test_support::read_file("/proc/" + std::to_string(pid) + "/stat");
    size_t close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : '?';
  }
  // Send `signal` (0: none) and reap: the raw wait status, -1 when not started.
  int end(int signal) {
    if (pid <= 0) return -1;
    if (signal) kill(pid, signal);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    return status;
  }
  std::string log() const { return test_support::read_file(log_); }
  bool logged(const std::string &words) const { return log().find(words) != std::string::npos; }
  pid_t pid = -1;

 private:
  [[noreturn]] static void exec_child(const std::vector<std::string> &argv, const std::string &log,
                                      const std::string &cgroup_procs) {
    int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) _exit(126);
    if (!cgroup_procs.empty()) {
      int fd = open(cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || write(fd, "0", 1) != 1) _exit(126);
      close(fd);
    }
    std::vector<char *> raw;
    for (const auto &a : argv) raw.push_back(const_cast<char *>(a.c_str()));
    raw.push_back(nullptr);
    execvp(raw[0], raw.data());
    _exit(127);
  }
  std::string log_;
};

// A collapse_target (its data checked at the end) or agent_target with these arguments; waits for "ready".
void start_target(child &c, const std::string &helper, const std::vector<std::string> &args, const std::string &log,
                  const std::string &cgroup_procs = "") {
  std::vector<std::string> argv = {test_support::helper_path(helper)};
  argv.insert(argv.end(), args.begin(), args.end());
  ASSERT_EQ(c.start(argv, log, cgroup_procs), 0);
  ASSERT_TRUE(eventually([&] { return c.logged("ready"); })) << c.log();
}

// A collapse_target checks its bytes on SIGUSR1 and exits 0 when every one is intact.
void expect_intact(child &target, const std::string &name) {
  int status = target.end(SIGUSR1);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << name << ": wait status " << status << "\n" << target.log();
}

uint64_t anon_huge_bytes(pid_t pid) {
  std::istringstream in(test_support::read_file("/proc/" + std::to_string(pid) + "/smaps_rollup"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("AnonHugePages:", 0) == 0) return std::stoull(line.substr(14)) << 10;
  return 0;
}

// /proc/PID/stat's start time (22nd field), read here without libhugify's parser.
uint64_t start_time_of(pid_t pid) {
  std::string stat = test_support::read_file("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; i++)
    if (i == 22) return std::stoull(field);
  return 0;
}

// Root (CAP_SYS_NICE for process_madvise; pools, cgroups and mounts) and the kernel's MADV_COLLAPSE.
#define REQUIRE_COLLAPSE()                                                                        \
  do {                                                                                            \
    if (geteuid() != 0) GTEST_SKIP() << "needs root (process_madvise, hugetlb pools, cgroups, mounts)"; \
    REQUIRE_KERNEL_FEATURE("madv_collapse");                                                      \
    REQUIRE_KERNEL_FEATURE("process_madvise_collapse");                                           \
  } while (0)

// The agent daemon of these tests: its state and metrics files, every pass at 0.2 s, an unlimited budget.
struct agent_files {
  std::string state, metrics;
  std::vector<std::string> argv(const std::vector<std::string> &selectors) const {
    std::vector<std::string> a = {HUGIFY_CLI_PATH, "agent", "--interval", "0.2", "--cpu-budget", "100", "--min-rss",
                                  "0", "--state-file", state, "--metrics-file", metrics};
    a.insert(a.end(), selectors.begin(), selectors.end());
    return a;
  }
};

// The state file as the daemon left it: an empty view when absent or not JSON (the test then fails).
json_view state_of(const std::string &path, std::string *error = nullptr) { return test_support::load_json(path, error); }
uint64_t passes_in(const std::string &state) { return state_of(state)["passes"].u64(); }

// The state file parses as the daemon's, and the metrics file as Prometheus text (prometheus_client's parser
// when python3 has it; else every sample line is "name[{labels}] number").
void expect_readable(const agent_files &files) {
  std::string error;
  json_view state = state_of(files.state, &error);
  ASSERT_TRUE(state.present()) << files.state << ": " << error;
  EXPECT_EQ(state["schema"].text(), "hugify.agent/1");
  EXPECT_EQ(state["mode"].text(), "pass");
  EXPECT_TRUE(test_support::is_array(state["processes"]));
  std::string text = test_support::read_file(files.metrics);
  ASSERT_NE(text.find("hugify_agent_passes_total"), std::string::npos) << text;
  auto parsed = test_support::run({"python3", "-c",
                                   "import sys\nfrom prometheus_client.parser import text_string_to_metric_families\n"
                                   "print(sum(len(f.samples) for f in text_string_to_metric_families(open(sys.argv[1]).read())))",
                                   files.metrics});
  if (parsed.status == 0) {
    EXPECT_GT(std::stoul(parsed.out), 0u);
    return;
  }
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.rfind(' ');
    ASSERT_NE(space, std::string::npos) << line;
    EXPECT_NO_THROW((void)std::stod(line.substr(space + 1))) << line;
  }
}

// Kill the agent with SIGKILL and start it again on the same files: it says it resumed, and its state goes
// on from the passes and collapsed bytes the killed one left.
void expect_resumes(child &agent, const agent_files &files, const std::vector<std::string> &selectors,
                    const std::string &log) {
  int status = agent.end(SIGKILL);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  expect_readable(files);
  json_view before = state_of(files.state);
  uint64_t passes = before["passes"].u64(), collapsed = before["collapsed_bytes"].u64();
  ASSERT_EQ(agent.start(files.argv(selectors), log), 0);
  ASSERT_TRUE(eventually([&] {
    json_view now = state_of(files.state);
    return now["agent_pid"].u64() == (uint64_t)agent.pid && now["passes"].u64() > passes;
  })) << agent.log();
  EXPECT_TRUE(agent.logged("resumed from " + files.state)) << agent.log();
  EXPECT_GE(state_of(files.state)["collapsed_bytes"].u64(), collapsed);
  expect_readable(files);
}

// This process's entry in the state file (an empty view when not there).
json_view entry_of(const json_view &state, pid_t pid) {
  for (const auto &p : state["processes"].items())
    if (p["pid"].u64() == (uint64_t)pid) return p;
  return {};
}

}  // namespace

// SIGKILL while the agent is inside process_madvise(MADV_COLLAPSE) on a large target, part of which it has
// made huge already (seen in its /proc/PID/syscall and the target's smaps_rollup; repeated until seen): the
// targets finish intact, the state file is the last whole pass's, the metrics parse, and a new agent resumes
// from that state. /proc/PID/syscall names the call only while the agent sleeps inside it, and on a machine
// with free memory a collapse does not sleep (CI once saw all four 60-s attempts miss). So a thread here
// reads the target's smaps_rollup without pause: each read holds the target's mmap lock for reading, and a
// collapse waits for it (for writing) inside the call, asleep, where the poll sees it.
TEST(Faults, AgentKilledInMidCallResumesFromItsState) {
  REQUIRE_COLLAPSE();
  test_support::scratch_dir dir("hugify-faults");
  agent_files files{dir.path + "/agent.json", dir.path + "/agent.prom"};
  child small, agent;
  start_target(small, "collapse_target", {"--heap", "8M", "--writer"}, dir.path + "/small.log");
  std::vector<std::string> selectors = {"--comm", "collapse_target"};
  ASSERT_EQ(agent.start(files.argv(selectors), dir.path + "/agent1.log"), 0);
  ASSERT_TRUE(eventually([&] { return passes_in(files.state) >= 1; })) << agent.log();

  bool hit = false;
  child big;
  for (int attempt = 0; attempt < 4 && !hit; attempt++) {
    if (big.pid > 0) expect_intact(big, "big (collapsed before the kill was seen)");
    start_target(big, "collapse_target", {"--heap", "128M", "--writer"}, dir.path + "/big.log");
    std::string syscall_path = "/proc/" + std::to_string(agent.pid) + "/syscall";
    std::string in_call = std::to_string(SYS_process_madvise) + " ";
    std::atomic<bool> reading{true};
    std::thread reader([&] { while (reading) (void)anon_huge_bytes(big.pid); });
    hit = eventually([&] { // in a call, with part of the big target already huge: mid-pass and mid-call
      if (test_support::read_file(syscall_path).rfind(in_call, 0) != 0 || anon_huge_bytes(big.pid) == 0) return false;
      return kill(agent.pid, SIGKILL) == 0;
    }, 60);
    reading = false;
    reader.join();
    if (!hit && anon_huge_bytes(big.pid) < 120 * MiB) break; // not collapsing at all: fail below
  }
  ASSERT_TRUE(hit) << "the agent was never seen inside process_madvise\n" << agent.log();
  uint64_t huge = anon_huge_bytes(big.pid);
  std::printf("killed inside process_madvise with %llu MiB of the 128 MiB target huge\n",
              (unsigned long long)(huge / MiB));
  EXPECT_TRUE(small.running() && big.running());
  expect_resumes(agent, files, selectors, dir.path + "/agent2.log");
  ASSERT_TRUE(eventually([&] { return anon_huge_bytes(big.pid) >= 120 * MiB; })) << "the new agent finishes the work";
  expect_intact(small, "small");
  expect_intact(big, "big");
  int status = agent.end(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << agent.log();
}

// A target is killed while the agent collapses it, and a new process is given its pid (clone3's set_tid)
// before the next pass: the agent never takes it for the old one (its pid with its start time is the
// process), so it inherits none of the old one's totals, failures or back-off.
TEST(Faults, PidReusedAfterTargetKilledMidCollapseStartsAfresh) {
  REQUIRE_COLLAPSE();
  test_support::scratch_dir dir("hugify-faults");
  agent_files files{dir.path + "/agent.json", dir.path + "/agent.prom"};
  child old_target, agent;
  // 32 MiB collapsed in the first pass (the totals the new process must not inherit), then 128 MiB more
  start_target(old_target, "agent_target", {"--dense", "32M", "--step", "128M"}, dir.path + "/old.log");
  pid_t pid = old_target.pid;
  std::vector<std::string> selectors = {"--pid", std::to_string(pid)};
  ASSERT_EQ(agent.start(files.argv(selectors), dir.path + "/agent.log"), 0);
  ASSERT_TRUE(eventually([&] { return entry_of(state_of(files.state), pid)["collapsed_bytes"].u64() >= 32 * MiB; }))
      << agent.log();
  kill(pid, SIGUSR1); // grow: the next pass collapses 128 MiB, one window per call
  uint64_t huge_at_kill = 0;
  bool mid = eventually([&] {
    huge_at_kill = anon_huge_bytes(pid);
    return huge_at_kill > 34 * MiB && huge_at_kill < 150 * MiB && kill(pid, SIGKILL) == 0;
  }, 60);
  if (!mid) GTEST_SKIP() << "the 128 MiB collapse was never seen under way (this machine collapsed it at once)";
  old_target.end(0);
  // a new process with the same pid and the same comm, with nothing to collapse
  child reused;
  int err = reused.start({test_support::helper_path("agent_target")}, dir.path + "/new.log", "", pid);
  if (err == EPERM || err == ENOSYS || err == EINVAL)
    GTEST_SKIP() << "clone3 with set_tid (Linux 5.5, CAP_SYS_ADMIN) cannot choose a pid here: " << strerror(err);
  ASSERT_EQ(err, 0) << "pid " << pid << " taken by another process first: " << strerror(err);
  ASSERT_EQ(reused.pid, pid);
  ASSERT_TRUE(eventually([&] { return reused.logged("ready"); }));
  uint64_t start = start_time_of(pid);
  json_view entry;
  ASSERT_TRUE(eventually([&] {
    entry = entry_of(state_of(files.state), pid);
    return entry["start_time_ticks"].u64() == start;
  })) << agent.log();
  // The new process may have had a window of its own to collapse (a sanitized build's allocator has one):
  // what the entry counts is at most what is huge in it now, never the old one's 32 MiB and more.
  EXPECT_LE(entry["collapsed_bytes"].u64(), anon_huge_bytes(pid)) << "the old process's totals are not the new one's";
  EXPECT_LT(entry["collapsed_bytes"].u64(), 32 * MiB) << "the old process's totals are not the new one's";
  EXPECT_EQ(entry["failed_windows"].size(), 0u);
  EXPECT_TRUE(entry["last_action"].is_null() || entry["last_action"].text().find("backed off") == std::string::npos)
      << entry["last_action"].text();
  EXPECT_FALSE(entry["lasting"]["backed_off"].flag());
  // What the agent made huge in the old process before it was killed counts, the windows of the pass it died
  // in included (less at most the one window whose call the kill cut short)
  EXPECT_GE(state_of(files.state)["collapsed_bytes"].u64() + 2 * MiB, huge_at_kill)
      << "the host's counter keeps the old one's, the pass it died in included";
  expect_resumes(agent, files, selectors, dir.path + "/agent2.log");
  EXPECT_EQ(entry_of(state_of(files.state), pid)["start_time_ticks"].u64(), start);
  int status = reused.end(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  status = agent.end(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << agent.log();
}

namespace {

// A memory cgroup of its own for the target, at /sys/fs/cgroup (v2: memory.max, memory.events) or the v1
// memory hierarchy (memory.limit_in_bytes, memory.oom_control): removed when the object goes away.
struct memory_cgroup {
  std::string path, limit_file, events_file, skip;
  bool v2 = false;
  memory_cgroup() {
    std::string name = "hugify-faults-" + std::to_string(getpid());
    if (test_support::read_file("/sys/fs/cgroup/cgroup.controllers").find("memory") != std::string::npos &&
        test_support::read_file("/sys/fs/cgroup/cgroup.subtree_control").find("memory") != std::string::npos) {
      v2 = true;
      path = "/sys/fs/cgroup/" + name;
      limit_file = path + "/memory.max";
      events_file = path + "/memory.events";
    } else if (access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) == 0) {
      path = "/sys/fs/cgroup/memory/" + name;
      limit_file = path + "/memory.limit_in_bytes";
      events_file = path + "/memory.oom_control";
    } else {
      skip = "no memory cgroup controller (neither cgroup v2's memory.max nor v1's memory hierarchy)";
      return;
    }
    if (mkdir(path.c_str(), 0755) != 0) skip = "cannot make " + path + ": " + strerror(errno);
  }
  ~memory_cgroup() {
    if (skip.empty()) rmdir(path.c_str());
  }
  std::string procs() const { return path + "/cgroup.procs"; } // v1 and v2 alike
  uint64_t usage() const { return test_support::read_u64(path + (v2 ? "/memory.current" : "/memory.usage_in_bytes")); }
  uint64_t oom_kills() const {
    std::istringstream in(test_support::read_file(events_file));
    for (std::string key, value; in >> key >> value;)
      if (key == "oom_kill") return std::stoull(value);
    return 0;
  }
};

uint64_t host_oom_kills() {
  std::istringstream in(test_support::read_file("/proc/vmstat"));
  for (std::string key, value; in >> key >> value;)
    if (key == "oom_kill") return std::stoull(value);
  return 0;
}

}  // namespace

// The target's memory cgroup is at its limit (1 MiB above what it uses, no swap), so the huge page a
// collapse needs cannot be charged: every window fails with the kernel's errno, said by `hugify collapse`
// and the agent, and nothing is OOM-killed (the cgroup's and the host's oom_kill stay as they were).
TEST(Faults, MemoryCgroupAtItsLimitRefusesCollapseWithoutOomKill) {
  REQUIRE_COLLAPSE();
  memory_cgroup cgroup;
  if (!cgroup.skip.empty()) GTEST_SKIP() << cgroup.skip;
  test_support::scratch_dir dir("hugify-faults");
  child target;
  start_target(target, "collapse_target", {"--heap", "32M", "--writer"}, dir.path + "/target.log", cgroup.procs());
  if (cgroup.v2) std::ofstream(cgroup.path + "/memory.swap.max") << "0";
  uint64_t limit = (cgroup.usage() + MiB + 4095) & ~uint64_t{4095};
  { std::ofstream(cgroup.limit_file) << limit; }
  ASSERT_EQ(test_support::read_u64(cgroup.limit_file), limit);
  uint64_t host_kills = host_oom_kills();

  auto r = test_support::hugify({"collapse", std::to_string(target.pid)});
  std::printf("hugify collapse at the cgroup's limit: exit %d\n%s%s", r.status, r.out.c_str(), r.err.c_str());
  EXPECT_EQ(r.status, 1) << "windows refused";
  std::string said = r.out + r.err;
  EXPECT_TRUE(said.find("EBUSY") != std::string::npos || said.find("ENOMEM") != std::string::npos) << said;
  EXPECT_NE(said.find("memory cgroup"), std::string::npos) << said;

  test_support::scratch_dir state_dir("hugify-faults");
  agent_files files{state_dir.path + "/agent.json", state_dir.path + "/agent.prom"};
  auto once = test_support::hugify({"agent", "--once", "--pid", std::to_string(target.pid), "--min-rss", "0",
                                    "--cpu-budget", "100", "--state-file", "none", "--json"});
  EXPECT_EQ(once.status, 1) << "a --once pass with refused windows" << once.err;
  json_view doc = test_support::parse_json(once.out);
  json_view failed = entry_of(doc, target.pid)["failed_windows"];
  EXPECT_GT(failed["EBUSY"].u64() + failed["ENOMEM"].u64(), 0u) << once.out;
  std::printf("huge after both: %llu KiB (reclaim can free a little of the cgroup's page cache)\n",
              (unsigned long long)(anon_huge_bytes(target.pid) >> 10));
  EXPECT_EQ(cgroup.oom_kills(), 0u) << test_support::read_file(cgroup.events_file);
  EXPECT_EQ(host_oom_kills(), host_kills) << "an OOM kill elsewhere on the host while collapsing";

  // The daemon on the same target: it keeps running, backs off, and a restart resumes from its state.
  child agent;
  std::vector<std::string> selectors = {"--pid", std::to_string(target.pid)};
  ASSERT_EQ(agent.start(files.argv(selectors), state_dir.path + "/agent.log"), 0);
  ASSERT_TRUE(eventually([&] { return entry_of(state_of(files.state), target.pid)["failed_windows"].size() > 0; }))
      << agent.log();
  expect_resumes(agent, files, selectors, state_dir.path + "/agent2.log");
  EXPECT_EQ(cgroup.oom_kills(), 0u);
  expect_intact(target, "target in the cgroup at its limit");
  int status = agent.end(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << agent.log();
}

namespace {

// The 2 MiB pool set to exactly `pages` free pages for one test, put back to its size when it ends.
struct pool_of {
  std::string file = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
  uint64_t before = 0;
  std::string skip;
  explicit pool_of(uint64_t pages) {
    if (access(file.c_str(), W_OK) != 0) {
      skip = "cannot size the 2 MiB hugetlb pool (" + file + ": needs root and a kernel with hugetlb)";
      return;
    }
    before = test_support::read_u64(file);
    uint64_t in_use = before - test_support::free_hugetlb(2 * MiB);
    std::ofstream(file) << in_use + pages;
    if (test_support::free_hugetlb(2 * MiB) != pages)
      skip = "the pool could not be set to " + std::to_string(pages) + " free pages (memory fragmented)";
  }
  ~pool_of() { std::ofstream(file) << before; }
};

// The program's one "checksum" line.
std::string checksum_in(const std::string &text) {
  size_t at = text.find("checksum ");
  return at == std::string::npos ? "" : text.substr(at, text.find('\n', at) - at);
}

}  // namespace

// `hugify run --heap hugetlb`: after the program's first 64 MiB came from the pool, another process takes
// every free page; the program's next 64 MiB fall back to normal pages (hugetlb pages are reserved at
// mmap, never faulted in short): no SIGBUS, the same checksum as a plain run, and the report names the
// fallback.
TEST(Faults, HugetlbPoolDrainedUnderARunningProgramFallsBackWithoutSigbus) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to size the hugetlb pool";
  test_support::scratch_dir dir("hugify-faults");
  std::string workload = test_support::helper_path("run_fault_workload");
  auto plain = test_support::run({"sh", "-c", "\"$0\" stages 64 & pid=$!; "
                                  "while ! grep -q T /proc/$pid/stat 2>/dev/null; do :; done; kill -CONT $pid; wait $pid",
                                  workload});
  ASSERT_EQ(plain.status, 0) << plain.err;
  pool_of pool(64);
  if (!pool.skip.empty()) GTEST_SKIP() << pool.skip;
  std::string report = dir.path + "/report.json";
  child run;
  ASSERT_EQ(run.start({HUGIFY_CLI_PATH, "run", "--heap", "hugetlb", "--report", report, "--", workload, "stages", "64"},
                      dir.path + "/run.log"),
            0);
  int status = 0;
  int stopped = test_support::wait_until_stopped(run.pid, &status);
  ASSERT_GT(stopped, 0) << run.log();
  uint64_t left = test_support::free_hugetlb(2 * MiB);
  EXPECT_LT(left, 64u) << "the first stage came from the pool";
  child drain; // takes every free page (reserved at its mmap, then written)
  if (left > 0) start_target(drain, "collapse_target", {"--hugetlb", std::to_string(left * 2) + "M"}, dir.path + "/drain.log");
  EXPECT_EQ(test_support::free_hugetlb(2 * MiB), 0u);
  kill(stopped, SIGCONT);
  status = run.end(0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << "\n" << run.log();
  EXPECT_EQ(WEXITSTATUS(status), 0) << run.log();
  EXPECT_EQ(checksum_in(run.log()), checksum_in(plain.out)) << run.log();
  std::string error;
  json_view doc = test_support::load_json(report, &error);
  ASSERT_TRUE(doc.present()) << error;
  std::string fallbacks = test_support::read_file(report);
  EXPECT_NE(fallbacks.find("heap hugetlb"), std::string::npos) << fallbacks;
  EXPECT_NE(fallbacks.find("on normal pages"), std::string::npos) << fallbacks;
  if (drain.pid > 0) {
    EXPECT_EQ(drain.end(SIGTERM), 0);
  }
}

// The runtime carver (HUGIFY_RUNTIME_ARENAS, on by default) under a fork storm (8 children per round, each
// mapping and unmapping pieces of its own while the parent unmaps) and under 8 threads mapping and
// unmapping pieces in a loop: every byte checked, the same checksum as without hugify, exit 0.
TEST(Faults, RuntimeCarverUnderForkStormAndMappingThreads) {
  std::string workload = test_support::helper_path("run_fault_workload");
  for (const std::vector<std::string> &args : {std::vector<std::string>{"forks", "12"}, {"threads", "300"}}) {
    std::vector<std::string> plain_argv = {workload};
    plain_argv.insert(plain_argv.end(), args.begin(), args.end());
    auto plain = test_support::run(plain_argv);
    ASSERT_EQ(plain.status, 0) << plain.err;
    test_support::scratch_dir dir("hugify-faults");
    std::vector<std::string> run_argv = {"run", "--report", dir.path + "/report.json", "--"};
    run_argv.insert(run_argv.end(), plain_argv.begin(), plain_argv.end());
    auto r = test_support::hugify(run_argv);
    EXPECT_EQ(r.status, 0) << args[0] << ": " << r.err;
    EXPECT_EQ(checksum_in(r.out), checksum_in(plain.out)) << args[0];
    EXPECT_FALSE(checksum_in(r.out).empty()) << r.out;
    std::string error;
    EXPECT_TRUE(test_support::load_json(dir.path + "/report.json", &error).present()) << error;
  }
}

// Processes that exit in large numbers while the agent reads their /proc files (status, stat, smaps,
// pagemap): 1000 short-lived children, each with 2 MiB written, exiting a moment after they start. The
// agent (selecting them by comm, in dry-run so it reads everything and changes nothing) never fails a pass,
// and its files stay readable; the parsers' side (files cut short) is ProcFilesCutShort.* in core_parsers.
TEST(Faults, ProcFilesVanishingDuringTheAgentsReads) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (the agent reads other processes' smaps and pagemap)";
  test_support::scratch_dir dir("hugify-faults");
  agent_files files{dir.path + "/agent.json", dir.path + "/agent.prom"};
  std::string comm = test_support::read_file("/proc/self/comm");
  comm.erase(comm.find_last_not_of('\n') + 1);
  std::vector<std::string> selectors = {"--comm", comm, "--dry-run"};
  std::vector<std::string> argv = files.argv(selectors);
  argv[3] = "0.05"; // --interval: the shortest the agent takes
  child agent;
  ASSERT_EQ(agent.start(argv, dir.path + "/agent.log"), 0);
  ASSERT_TRUE(eventually([&] { return passes_in(files.state) >= 1; })) << agent.log();
  uint64_t first = passes_in(files.state);
  int failed = 0;
  for (int wave = 0; wave < 20; wave++) {
    std::vector<pid_t> children;
    for (int i = 0; i < 50; i++) {
      pid_t c = fork();
      if (c == 0) {
        std::vector<char> memory(2 * MiB, 1);
        for (size_t at = 0; at < memory.size(); at += 4096) memory[at] = (char)at;
        usleep((useconds_t)(i % 10) * 300);
        _exit(memory[4096] == 0 ? 0 : 0);
      }
      children.push_back(c);
    }
    for (pid_t c : children) {
      int status = 0;
      waitpid(c, &status, 0);
      failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
  }
  EXPECT_EQ(failed, 0);
  ASSERT_TRUE(eventually([&] { return passes_in(files.state) > first + 2; })) << agent.log();
  std::printf("%llu agent passes while 1000 processes came and went\n",
              (unsigned long long)(passes_in(files.state) - first));
  EXPECT_TRUE(agent.running()) << agent.log();
  expect_readable(files);
  expect_resumes(agent, files, selectors, dir.path + "/agent2.log");
  int status = agent.end(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << agent.log();
}

namespace {

// A 64 KiB tmpfs mounted for one test, unmounted when it ends.
struct small_disk {
  std::string path, skip;
  explicit small_disk(const std::string &at) : path(at) {
    mkdir(path.c_str(), 0755);
    if (mount("hugify-faults", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755") != 0)
      skip = "cannot mount a tmpfs at " + path + ": " + strerror(errno) + " (needs CAP_SYS_ADMIN)";
  }
  ~small_disk() {
    if (skip.empty()) umount2(path.c_str(), MNT_DETACH);
  }
};

}  // namespace

// The state and metrics files on a 64 KiB tmpfs that another file fills: the agent says once that it cannot
// write them, keeps the last whole files (written atomically: the old state still parses), goes on
// collapsing, says when it writes again after space returns, and a restart resumes from the state.
TEST(Faults, FullDiskKeepsTheLastStateAndResumesWriting) {
  REQUIRE_COLLAPSE();
  test_support::scratch_dir dir("hugify-faults");
  small_disk disk(dir.path + "/disk");
  if (!disk.skip.empty()) GTEST_SKIP() << disk.skip;
  agent_files files{disk.path + "/agent.json", disk.path + "/agent.prom"};
  child target, agent;
  start_target(target, "collapse_target", {"--heap", "16M", "--writer"}, dir.path + "/target.log");
  std::vector<std::string> selectors = {"--pid", std::to_string(target.pid), "--json=" + dir.path + "/passes.json"};
  ASSERT_EQ(agent.start(files.argv(selectors), dir.path + "/agent.log"), 0);
  ASSERT_TRUE(eventually([&] { return passes_in(files.state) >= 1; })) << agent.log();
  std::string filler = disk.path + "/filler";
  {
    std::ofstream fill(filler, std::ios::binary);
    std::string block(4096, 'x');
    for (int i = 0; i < 64 && fill.write(block.data(), (std::streamsize)block.size()); i++) fill.flush();
  }
  // passes go on (their JSON lines land outside the full disk); the files stay the last whole ones
  auto passes_logged = [&] {
    std::string all = test_support::read_file(dir.path + "/passes.json");
    size_t n = 0;
    for (size_t at = all.find("\"schema\""); at != std::string::npos; at = all.find("\"schema\"", at + 1)) n++;
    return n;
  };
  size_t logged = passes_logged();
  ASSERT_TRUE(eventually([&] { return passes_logged() >= logged + 5; })) << agent.log();
  std::string log = agent.log();
  EXPECT_NE(log.find("state file: writing " + files.state + ": No space left on device"), std::string::npos) << log;
  EXPECT_NE(log.find("metrics: writing " + files.metrics + ": No space left on device"), std::string::npos) << log;
  size_t said = 0;
  for (size_t at = log.find("No space left"); at != std::string::npos; at = log.find("No space left", at + 1)) said++;
  EXPECT_LE(said, 2u) << "said once per file, not every pass:\n" << log;
  uint64_t kept = passes_in(files.state);
  EXPECT_GE(kept, 1u);
  expect_readable(files);
  EXPECT_TRUE(agent.running());
  unlink(filler.c_str());
  ASSERT_TRUE(eventually([&] { return passes_in(files.state) > kept; })) << agent.log();
  EXPECT_TRUE(agent.logged("state file: written again")) << agent.log();
  EXPECT_TRUE(agent.logged("metrics: written again")) << agent.log();
  expect_readable(files);
  expect_resumes(agent, files, selectors, dir.path + "/agent2.log");
  expect_intact(target, "target");
  int status = agent.end(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << agent.log();
}
