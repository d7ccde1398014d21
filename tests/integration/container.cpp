// SPDX-License-Identifier: MIT
// hugify in a container (podman, --pid=host, three capabilities) collapses a host process as from outside.
// Issue 33. The image is the built CLI and the libraries ldd names for it, imported from a tar (no
// registry), as bench/container_agent.sh and docs/agent.md (In a container) do; runc, not crun (which
// refuses a hybrid cgroup hierarchy), and this process's limits (podman's own need CAP_SYS_RESOURCE).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;

// Why podman cannot be used here ("" when it can): not root, or podman or runc missing.
std::string podman_missing() {
  if (geteuid() != 0) return "needs root (rootful podman)";
  if (!test_support::installed("podman") || !test_support::installed("runc"))
    return "podman/runc not installed (Debian: podman, runc)";
  return "";
}

// podman's arguments before the image for `run`: runc, --rm, and this process's open files limit with 4096
// processes (podman's defaults need CAP_SYS_RESOURCE, which a guest's root may lack).
std::vector<std::string> podman_run() {
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  return {"podman", "--runtime", "runc", "run", "--rm", "--network=none",
          "--ulimit", "nofile=" + std::to_string(files.rlim_cur) + ":" + std::to_string(files.rlim_max),
          "--ulimit", "nproc=4096:4096"};
}

// An image holding the built hugify as /hugify and every file ldd names for it (the loader, libc,
// libjansson, libinih, libhugify, the sanitizers' runtimes in a sanitized build) at its own path; removed,
// with its files, when this goes away.
struct hugify_image {
  test_support::scratch_dir dir{"hugify-container-test"};
  std::string name = "localhost/hugify-test-container:" + std::to_string(getpid());
  std::string error; // why it could not be made
  bool imported = false;

  hugify_image() {
    if (dir.path.empty()) { error = "mkdtemp failed"; return; }
    fs::path root = fs::path(dir.path) / "root";
    for (const char *d : {"proc", "sys", "dev", "tmp", "etc", "run"}) fs::create_directories(root / d);
    auto ldd = test_support::run({"ldd", HUGIFY_CLI_PATH});
    if (ldd.status != 0) { error = "ldd " HUGIFY_CLI_PATH ": " + ldd.err; return; }
    std::set<std::string> libraries;
    std::regex path(R"((/[^ \t]+) \(0x)");
    for (std::sregex_iterator m(ldd.out.begin(), ldd.out.end(), path), end; m != end; ++m) libraries.insert((*m)[1]);
    std::error_code e;
    fs::copy_file(HUGIFY_CLI_PATH, root / "hugify", e);
    for (const auto &library : libraries) {
      if (e) break;
      fs::path inside = root / fs::path(library).relative_path();
      fs::create_directories(inside.parent_path(), e);
      if (!e) fs::copy_file(library, inside, fs::copy_options::overwrite_existing, e); // follows links
    }
    if (e) { error = "copying the CLI's files: " + e.message(); return; }
    std::ofstream(root / "etc/passwd") << "root:x:0:0:root:/:/hugify\n";
    std::string tar = dir.path + "/root.tar";
    auto packed = test_support::run({"tar", "-C", root.string(), "-cf", tar, "."});
    if (packed.status != 0) { error = "tar: " + packed.err; return; }
    auto import = test_support::run({"podman", "import", "--quiet", tar, name});
    if (import.status != 0) { error = "podman import: " + import.err; return; }
    imported = true;
  }
  ~hugify_image() {
    if (imported) test_support::run({"podman", "rmi", "-f", name});
  }
  hugify_image(const hugify_image &) = delete;
  hugify_image &operator=(const hugify_image &) = delete;
};

// agent_target --dense 32M (every page written, on 4 KiB pages), read until "ready PID"; SIGTERM when
// this goes away.
struct dense_target {
  FILE *out = nullptr;
  int pid = -1;
  dense_target() {
    out = popen(("exec " + test_support::helper_path("agent_target") + " --dense 32M").c_str(), "r");
    char line[256];
    while (out && pid < 0 && fgets(line, sizeof line, out)) {
      if (sscanf(line, "ready %d", &pid) != 1) pid = -1;
    }
  }
  ~dense_target() {
    if (pid > 0) kill(pid, SIGTERM);
    if (out) pclose(out);
  }
  dense_target(const dense_target &) = delete;
  dense_target &operator=(const dense_target &) = delete;
};

struct collapsed {
  uint64_t gain = 0, bloat = 0;
};

// Bytes collapsed (huge after minus huge before) and bloat of a `collapse --json` result.
collapsed figures(const test_support::command_result &result) {
  std::string error;
  auto doc = test_support::parse_json(result.out, &error);
  EXPECT_TRUE(doc.present()) << error << "\n" << result.out;
  auto total = doc["total"];
  return {total["huge_after_bytes"].u64() - total["huge_before_bytes"].u64(), total["bloat_bytes"].u64()};
}

TEST(Container, AgentCollapsesAHostProcessAsOutside) {
  std::string missing = podman_missing();
  if (!missing.empty()) GTEST_SKIP() << missing;
  REQUIRE_KERNEL_FEATURE("madv_collapse");
  hugify_image image;
  ASSERT_TRUE(image.error.empty()) << image.error;

  // A trivial container first: when none can run on this kind of machine, skip with podman's reason.
  auto argv = podman_run();
  argv.insert(argv.end(), {image.name, "/hugify", "--version"});
  auto trivial = test_support::run(argv);
  // 125: podman's own error, 126: the runtime's (crun's "cgroups in hybrid mode not supported", ...).
  if (trivial.status == 125 || trivial.status == 126)
    GTEST_SKIP() << "containers cannot run here (podman --runtime runc): " << trivial.err;
  ASSERT_EQ(trivial.status, 0) << "/hugify --version in the image: " << trivial.out << trivial.err;

  dense_target host_side, container_side;
  ASSERT_GT(host_side.pid, 0) << "agent_target did not start";
  ASSERT_GT(container_side.pid, 0) << "agent_target did not start";

  // --min-size 32M: the dense region only. The rest of a target (its heap, a sanitized build's allocator
  // regions) is not the same page for page in two processes, and its bloat differs by a page or two.
  auto collapse = [](const dense_target &t) {
    return std::vector<std::string>{"collapse", std::to_string(t.pid), "--min-size", "32M", "--json"};
  };
  auto outside = test_support::hugify(collapse(host_side));
  ASSERT_EQ(outside.status, 0) << outside.err;

  argv = podman_run();
  argv.insert(argv.end(), {"--pid=host", "--read-only", "--cap-drop=all",
                           "--cap-add=SYS_NICE,SYS_PTRACE,DAC_READ_SEARCH", image.name, "/hugify"});
  auto args = collapse(container_side);
  argv.insert(argv.end(), args.begin(), args.end());
  auto inside = test_support::run(argv);
  ASSERT_EQ(inside.status, 0) << inside.err;

  collapsed host = figures(outside), container = figures(inside);
  std::printf("collapsed %llu KiB (bloat %llu KiB) outside, %llu KiB (bloat %llu KiB) inside\n",
              (unsigned long long)host.gain >> 10, (unsigned long long)host.bloat >> 10,
              (unsigned long long)container.gain >> 10, (unsigned long long)container.bloat >> 10);
  EXPECT_GT(host.gain, 0u) << outside.out;
  EXPECT_EQ(container.gain, host.gain) << "outside:\n" << outside.out << "\ninside:\n" << inside.out;
  EXPECT_EQ(container.bloat, host.bloat) << "outside:\n" << outside.out << "\ninside:\n" << inside.out;
}

}  // namespace
