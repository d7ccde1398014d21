// SPDX-License-Identifier: MIT
// Per cgroup (issue 33): three services in cgroups of their own, one with shared memory; the per-cgroup huge
// bytes of `hugify inspect --all --by cgroup` and of the agent's metrics against the kernel's memory.stat.
// The groups are made for the test under the hierarchy that holds the memory controller (cgroup v2, or v1's
// memory hierarchy on a hybrid host) and removed after; it needs root.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

extern "C" {
#include "fleet.h"
}

namespace {

constexpr double MiB = 1 << 20;

// A cgroup_service child: its stdin (closing it ends the service) and stdout.
struct service {
  pid_t pid = -1;
  int in = -1;
  FILE *out = nullptr;
  void start(const std::vector<std::string> &args) {
    int to[2], from[2];
    // close-on-exec: a later service must not hold this one's stdin open (it would never see its end)
    ASSERT_EQ(pipe2(to, O_CLOEXEC), 0);
    ASSERT_EQ(pipe2(from, O_CLOEXEC), 0);
    pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      dup2(to[0], 0), dup2(from[1], 1);
      close(to[1]), close(from[0]);
      std::vector<char *> argv;
      std::string path = test_support::helper_path("cgroup_service");
      argv.push_back(path.data());
      std::vector<std::string> copy = args;
      for (auto &a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(to[0]), close(from[1]);
    in = to[1];
    out = fdopen(from[0], "r");
  }
  std::string go() {
    if (write(in, "go\n", 3) != 3) return "";
    char line[64] = "";
    return fgets(line, sizeof line, out) ? line : "";
  }
  void stop() {
    if (in >= 0) close(in), in = -1;
    if (out) fclose(out), out = nullptr;
    if (pid > 0) waitpid(pid, nullptr, 0), pid = -1;
  }
  ~service() { stop(); }
};

bool write_text(const std::string &path, const std::string &text) {
  std::ofstream f(path);
  f << text;
  f.flush();
  return f.good();
}

// The test's cgroups: made under the memory hierarchy, removed (after their processes ended) at the end.
struct test_cgroups {
  std::string mount, parent;
  std::vector<std::string> children;
  std::string make(const std::string &name) {
    std::string path = parent + "/" + name;
    if (mkdir((mount + path).c_str(), 0755) != 0) return "";
    children.push_back(path);
    return path;
  }
  ~test_cgroups() {
    for (auto it = children.rbegin(); it != children.rend(); ++it)
      for (int tries = 0; tries < 100 && rmdir((mount + *it).c_str()) != 0 && errno == EBUSY; tries++) usleep(20000);
    if (!parent.empty()) rmdir((mount + parent).c_str());
  }
};

// A sample's value from Prometheus text, or -1.
double metric(const std::string &text, const std::string &sample) {
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l.compare(0, sample.size() + 1, sample + " ") == 0) return std::stod(l.substr(sample.size() + 1));
  return -1;
}

TEST(Fleet, PerCgroupHugeBytesMatchTheKernel) {
  if (geteuid() != 0) GTEST_SKIP() << "making cgroups and moving processes into them needs root";
  struct cgroup_memory_root memory;
  if (!cgroup_memory_hierarchy("", &memory) || memory.version == 0)
    GTEST_SKIP() << "no cgroup memory controller mounted (cgroup v2 with +memory, or v1's memory hierarchy)";
  if (test_support::thp_setting_value("enabled") == "never") GTEST_SKIP() << "THP is set to never";
  test_cgroups groups;
  groups.mount = memory.mount;
  groups.parent = "/hugify-test-" + std::to_string(getpid());
  ASSERT_EQ(mkdir((groups.mount + groups.parent).c_str(), 0755), 0) << strerror(errno);
  if (memory.version == 2) {
    ASSERT_TRUE(write_text(groups.mount + groups.parent + "/cgroup.subtree_control", "+memory"));
  }
  // three services: plain, bigger, and one with shared memory and a child process
  const std::vector<std::vector<std::string>> shapes = {{"16", "0", "0"}, {"32", "0", "0"}, {"8", "8", "8"}};
  service services[3];
  std::string paths[3];
  std::vector<std::string> pids; // every process of the services (the third one's child too)
  for (int i = 0; i < 3; i++) {
    paths[i] = groups.make("svc" + std::to_string(i));
    ASSERT_FALSE(paths[i].empty()) << strerror(errno);
    services[i].start(shapes[i]);
    ASSERT_TRUE(write_text(groups.mount + paths[i] + "/cgroup.procs", std::to_string(services[i].pid)));
    std::string ready = services[i].go();
    ASSERT_EQ(ready.rfind("ready", 0), 0u) << ready;
    pids.push_back(std::to_string(services[i].pid));
    if (std::stoi(ready.substr(6)) > 0) pids.push_back(std::to_string(std::stoi(ready.substr(6))));
  }
  // memory.stat is flushed lazily (every 2 s since Linux 5.13): read again until both sides settle
  std::string last;
  double walk[3] = {0, 0, 0}, kernel[3] = {0, 0, 0};
  bool agree = false;
  for (int attempt = 0; attempt < 20 && !agree; attempt++) {
    if (attempt) usleep(500 * 1000);
    auto r = test_support::hugify({"inspect", "--all", "--by", "cgroup", "--top", "0", "--json"});
    ASSERT_EQ(r.status, 0) << r.err;
    last = r.out;
    auto doc = test_support::parse_json(r.out);
    ASSERT_TRUE(doc.present()) << r.out;
    agree = true;
    for (int i = 0; i < 3; i++) {
      walk[i] = kernel[i] = -1;
      for (const auto &group : doc["groups"].items()) {
        if (group["cgroup"].text() != paths[i]) continue;
        walk[i] = group.at("walk.anon_thp_bytes").number();
        kernel[i] = test_support::is_number(group.at("kernel.anon_thp_bytes")) ? group.at("kernel.anon_thp_bytes").number() : -1;
        EXPECT_EQ(group["processes"].number(), i == 2 ? 2 : 1) << group["name"].text();
      }
      if (walk[i] < 0 || kernel[i] < 0 || std::abs(walk[i] - kernel[i]) > 0.02 * std::max(walk[i], kernel[i])) agree = false;
    }
  }
  for (int i = 0; i < 3; i++)
    std::printf("%s: walk %.1f MiB, kernel %.1f MiB (anon THP)\n", paths[i].c_str(), walk[i] / MiB, kernel[i] / MiB);
  if (walk[0] == 0 && walk[1] == 0 && walk[2] == 0) GTEST_SKIP() << "no THP could be had (fragmented memory)";
  EXPECT_TRUE(agree) << last;

  // the agent's per-cgroup series: its huge bytes beside the kernel's, for the same three cgroups
  std::string prom = testing::TempDir() + "/fleet-agent.prom";
  std::vector<std::string> args = {"agent", "--once", "--dry-run", "--min-rss", "0", "--metrics-file", prom};
  for (auto &pid : pids) args.insert(args.end(), {"--pid", pid});
  auto r = test_support::hugify(args);
  ASSERT_EQ(r.status, 0) << r.err;
  std::string text = test_support::read_file(prom);
  unlink(prom.c_str());
  for (int i = 0; i < 3; i++) {
    double huge = metric(text, "hugify_agent_cgroup_huge_bytes{cgroup=\"" + paths[i] + "\"}");
    double charged = 0; // every kind the kernel reports (shmem THP where shmem_enabled allows it)
    for (const char *kind : {"anon", "shmem", "file"})
      charged += std::max(0.0, metric(text, "hugify_agent_cgroup_kernel_thp_bytes{cgroup=\"" + paths[i] + "\",kind=\"" + kind + "\"}"));
    EXPECT_GE(huge, 0) << text;
    EXPECT_LE(std::abs(huge - charged), 0.02 * std::max(huge, charged)) << paths[i] << "\n" << text;
  }
  for (auto &s : services) s.stop();
}

} // namespace
