// SPDX-License-Identifier: MIT
// Issue 41 item 3: whether DAMON can watch processes, on this kernel's real sysfs. `hugify status` and
// `hugify agent --heat auto` find out the same way (probe_damon_vaddr_at): a context's avail_operations,
// a context of their own for a moment where no kdamond exists, never a write to another user's kdamond; and
// DAMON's sysfs is as they found it afterwards. Each test prints the sysfs before and after. The fake trees:
// tests/unit/damon_detect.cpp.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

const std::string admin = "/sys/kernel/mm/damon/admin";
const std::string kdamonds = admin + "/kdamonds";

std::string read_trimmed(const std::string &path) {
  std::string text = test_support::read_file(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

void write(const std::string &leaf, const std::string &value) { std::ofstream(kdamonds + leaf) << value << "\n"; }

uint64_t nr_kdamonds() { return std::stoull("0" + read_trimmed(kdamonds + "/nr_kdamonds")); }

// DAMON's sysfs in one line: nr_kdamonds, then each kdamond's state, pid and nr_contexts.
std::string damon_sysfs() {
  std::string line = "nr_kdamonds " + read_trimmed(kdamonds + "/nr_kdamonds");
  for (uint64_t k = 0, n = nr_kdamonds(); k < n; k++) {
    std::string dir = kdamonds + "/" + std::to_string(k);
    line += "; kdamond " + std::to_string(k) + ": state " + read_trimmed(dir + "/state") + ", pid " +
            read_trimmed(dir + "/pid") + ", nr_contexts " + read_trimmed(dir + "/contexts/nr_contexts");
  }
  return line;
}

std::string damon_skip_reason() {
  if (access(admin.c_str(), F_OK) != 0) return "no DAMON sysfs (" + admin + "): CONFIG_DAMON_SYSFS, Linux 5.18+";
  if (geteuid() != 0) return "needs root: DAMON's sysfs is root's";
  return "";
}

#define REQUIRE_DAMON_SYSFS()                               \
  do {                                                      \
    std::string why_ = damon_skip_reason();                 \
    if (!why_.empty()) GTEST_SKIP() << why_;                \
  } while (0)

// The damon_vaddr entry of `hugify status --json`: its state and detail.
void status_damon(std::string *state, std::string *detail) {
  auto r = test_support::hugify({"status", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  test_support::json_view doc = test_support::parse_json(r.out);
  for (const auto &f : doc["kernel_features"].items())
    if (f["id"].text() == "damon_vaddr") *state = f["state"].text(), *detail = f["detail"].text();
}

// What this kernel's operations are, read independently of hugify: an existing context's avail_operations,
// else (no kdamond at all) kdamond 0 and a context set up here, read and removed. "" when kdamonds exist
// and none has a context (they are another user's: not touched).
std::string avail_operations() {
  for (uint64_t k = 0, n = nr_kdamonds(); k < n; k++) {
    std::string dir = kdamonds + "/" + std::to_string(k) + "/contexts";
    if (read_trimmed(dir + "/nr_contexts") != "0") return read_trimmed(dir + "/0/avail_operations");
  }
  if (nr_kdamonds() != 0) return "";
  write("/nr_kdamonds", "1");
  write("/0/contexts/nr_contexts", "1");
  std::string operations = read_trimmed(kdamonds + "/0/contexts/0/avail_operations");
  write("/0/contexts/nr_contexts", "0");
  write("/nr_kdamonds", "0");
  return operations;
}

bool lists_vaddr(const std::string &operations) {
  std::string words = "\n" + operations + "\n";
  for (char &c : words) c = c == ' ' ? '\n' : c;
  return words.find("\nvaddr\n") != std::string::npos;
}

// `hugify agent --heat auto --dry-run` on a sleeping child until its start line (which names the heat), then
// SIGTERM; the start line, or what it said when it exited first.
std::string agent_start_line() {
  pid_t target = fork();
  if (target == 0) {
    execlp("sleep", "sleep", "600", (char *)nullptr);
    _exit(127);
  }
  test_support::scratch_dir dir("hugify-heat-probe");
  std::string err = dir.path + "/agent.err";
  pid_t agent = fork();
  if (agent == 0) {
    int fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 2);
    execl(HUGIFY_CLI_PATH, HUGIFY_CLI_PATH, "agent", "--state-file", "none", "--dry-run", "--heat", "auto", "--pid",
          std::to_string(target).c_str(), "--min-rss", "0", "--interval", "0.3", (char *)nullptr);
    _exit(127);
  }
  std::string text;
  int status = 0;
  bool exited = false;
  // until the line is there or the agent exited (no time limit of its own: ctest's covers a hung agent)
  while (text.find("started") == std::string::npos && !(exited = waitpid(agent, &status, WNOHANG) == agent)) {
    usleep(20000);
    text = test_support::read_file(err);
  }
  if (!exited) kill(agent, SIGTERM), waitpid(agent, &status, 0);
  kill(target, SIGKILL);
  waitpid(target, nullptr, 0);
  return test_support::read_file(err);
}

}  // namespace

// status names DAMON vaddr as the kernel has it (yes or no, never unknown, where it may look), and leaves
// DAMON's sysfs as it was.
TEST(HeatProbe, StatusSaysWhetherDamonWatchesProcessesAndLeavesItsSysfsAsItWas) {
  REQUIRE_DAMON_SYSFS();
  std::string before = damon_sysfs(), state, detail;
  status_damon(&state, &detail);
  std::string after = damon_sysfs();
  std::printf("DAMON sysfs before status: %s\nDAMON sysfs after status:  %s\nstatus: damon_vaddr %s (%s)\n",
              before.c_str(), after.c_str(), state.c_str(), detail.c_str());
  EXPECT_EQ(after, before);
  std::string operations = avail_operations(), shown = operations;
  for (char &c : shown) c = c == '\n' ? ' ' : c;
  std::printf("avail_operations: %s\n", operations.empty() ? "(no context to list them)" : shown.c_str());
  if (operations.empty()) {
    EXPECT_EQ(state, "unknown");
    EXPECT_NE(detail.find("another user's"), std::string::npos) << detail;
  } else {
    EXPECT_EQ(state, lists_vaddr(operations) ? "yes" : "no") << detail;
  }
  EXPECT_EQ(damon_sysfs(), before) << "the test's own look put back too";
}

// Where the only kdamond is another user's (here the test's own, off with no context: the state a user is in
// half way through setting one up), status and the agent say whose it is, and neither writes to it.
TEST(HeatProbe, AnotherUsersKdamondIsNamedAndLeftAlone) {
  REQUIRE_DAMON_SYSFS();
  if (nr_kdamonds() != 0) GTEST_SKIP() << "a kdamond exists already (" << damon_sysfs() << "): this test sets up its own";
  write("/nr_kdamonds", "1");
  std::string before = damon_sysfs(), state, detail;
  status_damon(&state, &detail);
  std::string line = agent_start_line();
  std::string after = damon_sysfs();
  write("/nr_kdamonds", "0");
  std::printf("DAMON sysfs before: %s\nDAMON sysfs after:  %s\nstatus: damon_vaddr %s (%s)\nagent: %s\n",
              before.c_str(), after.c_str(), state.c_str(), detail.c_str(), line.c_str());
  EXPECT_EQ(after, before);
  EXPECT_EQ(state, "unknown");
  EXPECT_NE(detail.find("1 kdamond(s) are another user's"), std::string::npos) << detail;
  EXPECT_NE(line.find("heat none"), std::string::npos) << line;
  EXPECT_NE(line.find("another user's"), std::string::npos) << line;
}

// The detection that needs DAMON vaddr: where no kdamond exists, `--heat auto` takes DAMON, and its exit
// leaves the sysfs as it found it.
TEST(HeatProbe, AgentHeatAutoTakesDamonWhereTheKernelHasVaddr) {
  REQUIRE_DAMON_SYSFS();
  REQUIRE_KERNEL_FEATURE("damon_vaddr");
  if (nr_kdamonds() != 0) GTEST_SKIP() << "a kdamond exists already (" << damon_sysfs() << "): the agent takes none";
  std::string before = damon_sysfs();
  std::string line = agent_start_line();
  std::string after = damon_sysfs();
  std::printf("DAMON sysfs before: %s\nDAMON sysfs after:  %s\nagent: %s\n", before.c_str(), after.c_str(),
              line.c_str());
  EXPECT_EQ(after, before);
  // A DAMON user inside the kernel (DAMON_STAT, on by default in Debian's 7.2) refuses any other kdamond its
  // start: the agent claims none, says who holds DAMON and goes densest first.
  if (!test_support::damon_held_by_kernel().empty()) {
    EXPECT_NE(line.find("heat none"), std::string::npos) << line;
    EXPECT_NE(line.find("holds DAMON"), std::string::npos) << line;
    return;
  }
  EXPECT_NE(line.find("heat damon (DAMON vaddr, kdamond 0)"), std::string::npos) << line;
}
