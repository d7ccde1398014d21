// SPDX-License-Identifier: MIT
// servers.cpp - servers and their shared memory: the bundled test server (tests/helpers/run_shm_server.c,
// a shared anonymous region, a SysV segment and a private heap) under `hugify run` with shmem_enabled
// 'advise' and 'never'. shmem_enabled is changed only inside a guard that puts it back (also when an
// assertion fails) and at exit; every server started here is stopped by its owner object.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
// The test's own directory (removed afterwards).
struct scratch_dir : test_support::scratch_dir {
  scratch_dir() : test_support::scratch_dir("hugify-servers-test") {}
};

using test_support::server_process;

// Waits (bounded: 60 s) for the server's port file.
int wait_for_port(const std::string &port_file, const server_process &server) {
  for (int i = 0; i < 6000; i++) {
    std::ifstream in(port_file);
    int port = 0;
    if (in >> port && port > 0) return port;
    if (!server.alive()) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

struct regions {
  uintptr_t shared = 0, heap = 0, sysv = 0;
  size_t shared_size = 0, heap_size = 0, sysv_size = 0;
  int pid = 0; // the server's own (under `hugify run --report`, hugify stays as its parent)
};

// Asks the server where its regions are (the MAPS request), through server_load's sibling: a tiny client.
regions ask_regions(int port) {
  regions r;
  std::string command = "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) + " && echo MAPS >&3 && head -1 <&3";
  auto answer = test_support::run({"bash", "-c", command});
  char shared[32], heap[32], sysv[32];
  if (std::sscanf(answer.out.c_str(), "SHARED %31s %zu HEAP %31s %zu SYSV %31s %zu PID %d", shared, &r.shared_size,
                  heap, &r.heap_size, sysv, &r.sysv_size, &r.pid) == 7) {
    r.shared = std::strtoull(shared, nullptr, 16);
    r.heap = std::strtoull(heap, nullptr, 16);
    r.sysv = std::strtoull(sysv, nullptr, 16);
  }
  return r;
}

double fraction(uint64_t part, uint64_t whole) { return whole ? (double)part / (double)whole : 0.0; }

// The bundled test server, started (after `prefix`, e.g. `hugify run --`), waited for, its regions known.
struct test_server {
  const scratch_dir &dir;
  server_process process;
  int port = -1;
  regions where;
  static std::vector<std::string> command(const scratch_dir &dir, std::vector<std::string> prefix,
                                          const std::vector<std::string> &options) {
    prefix.insert(prefix.end(), {test_support::helper_path("run_shm_server"), "--port-file", dir.path + "/port"});
    prefix.insert(prefix.end(), options.begin(), options.end());
    return prefix;
  }
  test_server(const scratch_dir &d, const std::vector<std::string> &prefix, const std::vector<std::string> &options)
      : dir(d), process(command(d, prefix, options), d.path + "/server.log") {
    port = wait_for_port(dir.path + "/port", process);
    if (port > 0) where = ask_regions(port);
  }
  std::string log() const { return test_support::read_file(dir.path + "/server.log"); }
};

TEST(ShmServer, SharedMemoryAndHeapHugeUnderRunWithAdvise) {
  test_support::thp_setting setting("shmem_enabled", "advise");
  if (!setting.skip_reason().empty()) GTEST_SKIP() << setting.skip_reason();
  scratch_dir dir;
  std::string report = dir.path + "/report.json";
  test_server started(dir, {HUGIFY_CLI_PATH, "run", "--report", report, "--"},
                      {"--shared", "128M", "--heap", "128M", "--sysv", "64M"});
  ASSERT_GT(started.port, 0) << started.log();
  server_process &server = started.process;
  const regions &r = started.where;
  ASSERT_EQ(r.shared_size, 128u << 20);
  EXPECT_EQ(r.shared % (2u << 20), 0u) << "the preload places shared memory on a 2 MiB boundary";
  EXPECT_EQ(r.sysv % (2u << 20), 0u) << "... and SysV segments";
  int pid = r.pid;
  double shared = fraction(test_support::smaps_field(pid, r.shared, r.shared_size, "ShmemPmdMapped"), r.shared_size);
  double sysv = fraction(test_support::smaps_field(pid, r.sysv, r.sysv_size, "ShmemPmdMapped"), r.sysv_size);
  double heap = fraction(test_support::smaps_field(pid, r.heap, r.heap_size, "AnonHugePages"), r.heap_size);
  EXPECT_GE(shared, 0.90) << "shared anonymous region on huge pages";
  EXPECT_GE(sysv, 0.90) << "SysV segment on huge pages";
  EXPECT_GE(heap, 0.90) << "private heap on huge pages";
  int status = server.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  std::string text = test_support::read_file(report);
  EXPECT_EQ(text.find("shmem_enabled"), std::string::npos) << "no shared-memory fallback expected:\n" << text;
}

TEST(ShmServer, NeverIsExplainedWithTheFix) {
  test_support::thp_setting setting("shmem_enabled", "never");
  if (!setting.skip_reason().empty()) GTEST_SKIP() << setting.skip_reason();
  scratch_dir dir;
  std::string report = dir.path + "/report.json";
  test_server started(dir, {HUGIFY_CLI_PATH, "run", "--report", report, "--"}, {"--shared", "64M", "--heap", "16M"});
  ASSERT_GT(started.port, 0) << started.log();
  server_process &server = started.process;
  const regions &r = started.where;
  EXPECT_EQ(r.shared % (2u << 20), 0u) << "aligned under 'never' too, so a later collapse can work";
  auto inspect = test_support::hugify({"inspect", std::to_string(r.pid)});
  EXPECT_NE(inspect.out.find("shmem_enabled"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("shmem_not_huge"), std::string::npos) << "aligned, so collapsible: " << inspect.out;
  EXPECT_NE(inspect.out.find("`hugify collapse PID` fixes it now"), std::string::npos) << inspect.out;
  int status = server.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  std::string text = test_support::read_file(report);
  EXPECT_NE(text.find("shmem_enabled is 'never'"), std::string::npos) << text;
  EXPECT_NE(text.find("echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled"), std::string::npos) << text;
  size_t said = 0; // the summed report's fallbacks: one line per process and cause, not per mapping
  for (const auto &fallback : test_support::load_json(report)["fallbacks"].items())
    said += fallback["reason"].text().find("shmem_enabled is") != std::string::npos;
  EXPECT_EQ(said, 1u) << "said once, not per mapping:\n" << text;
}

// A live process's 512 MiB shared mapping, placed by `hugify run` under 'never' (so its pages are 4 KiB at
// first touch), goes to huge pages with `hugify collapse`.
TEST(ShmServer, CollapseOfALiveSharedMapping) {
  test_support::thp_setting setting("shmem_enabled", "never");
  if (!setting.skip_reason().empty()) GTEST_SKIP() << setting.skip_reason();
  scratch_dir dir;
  test_server started(dir, {HUGIFY_CLI_PATH, "run", "--"}, {"--shared", "512M", "--heap", "0"});
  ASSERT_GT(started.port, 0) << started.log();
  server_process &server = started.process;
  const regions &r = started.where;
  ASSERT_EQ(r.shared_size, 512u << 20);
  int pid = r.pid;
  EXPECT_LT(fraction(test_support::smaps_field(pid, r.shared, r.shared_size, "ShmemPmdMapped"), r.shared_size), 0.1)
      << "under 'never' the pages start small";
  auto collapse = test_support::hugify({"collapse", std::to_string(pid)});
  if (collapse.status == 3) GTEST_SKIP() << "collapse not possible here: " << collapse.err;
  EXPECT_EQ(collapse.status, 0) << collapse.out << collapse.err;
  double shared = fraction(test_support::smaps_field(pid, r.shared, r.shared_size, "ShmemPmdMapped"), r.shared_size);
  EXPECT_GE(shared, 0.90) << collapse.out;
  int status = server.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the server survived the collapse: status " << status;
}

// The agent takes shared memory too (issue 13: "shared memory when shmem_enabled allows"): one pass over a
// live server whose 256 MiB shared mapping starts on 4 KiB pages puts it on huge pages, and says so.
TEST(ShmServer, AgentCollapsesALiveSharedMapping) {
  if (geteuid() != 0) GTEST_SKIP() << "the agent needs root (CAP_SYS_ADMIN, CAP_SYS_NICE)";
  test_support::thp_setting setting("shmem_enabled", "never");
  if (!setting.skip_reason().empty()) GTEST_SKIP() << setting.skip_reason();
  scratch_dir dir;
  test_server started(dir, {HUGIFY_CLI_PATH, "run", "--"}, {"--shared", "256M", "--heap", "0"});
  ASSERT_GT(started.port, 0) << started.log();
  const regions &r = started.where;
  ASSERT_EQ(r.shared_size, 256u << 20);
  ASSERT_EQ(r.shared % (2u << 20), 0u);
  EXPECT_LT(fraction(test_support::smaps_field(r.pid, r.shared, r.shared_size, "ShmemPmdMapped"), r.shared_size), 0.1)
      << "under 'never' the pages start small";
  auto agent = test_support::hugify({"agent", "--once", "--pid", std::to_string(r.pid), "--min-rss", "0", "--json"});
  ASSERT_EQ(agent.status, 0) << agent.out << agent.err;
  double shared = fraction(test_support::smaps_field(r.pid, r.shared, r.shared_size, "ShmemPmdMapped"), r.shared_size);
  EXPECT_GE(shared, 0.90) << agent.out;
  auto doc = test_support::parse_json(agent.out);
  ASSERT_EQ(doc["processes"].size(), 1u) << agent.out;
  EXPECT_GE(doc.at("processes.0.collapsed_bytes").number(), 0.9 * (double)r.shared_size) << agent.out;
  EXPECT_TRUE(started.process.alive()) << "the server survived the collapse";
}

// Mapped by the kernel under 'never', shared memory is misaligned for good: collapse says why and what to
// change, and exits 3 when that was all there was.
TEST(ShmServer, CollapseOfMisalignedSharedMemorySaysWhatToChange) {
  test_support::thp_setting setting("shmem_enabled", "never");
  if (!setting.skip_reason().empty()) GTEST_SKIP() << setting.skip_reason();
  scratch_dir dir;
  // Odd-sized (not a multiple of 2 MiB) so the kernel does not happen to align it.
  test_server started(dir, {}, {"--shared", "65M", "--heap", "0"});
  ASSERT_GT(started.port, 0) << started.log();
  const regions &r = started.where;
  if (r.shared % (2u << 20) == 0) GTEST_SKIP() << "the kernel placed the mapping on a 2 MiB boundary by chance";
  auto collapse = test_support::hugify({"collapse", std::to_string(r.pid)});
  EXPECT_EQ(collapse.status, 3) << collapse.out << collapse.err;
  EXPECT_NE(collapse.err.find("echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled"), std::string::npos)
      << collapse.err;
  EXPECT_NE(collapse.err.find("restart"), std::string::npos) << collapse.err;
}

}  // namespace
