// test_support.cpp - see test_support.hpp.
#include "test_support.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace test_support {

static std::string drain(int fd) {
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  return text;
}

command_result run(const std::vector<std::string> &argv, const std::map<std::string, std::string> &env) {
  command_result result;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) return result;
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    for (const auto &[name, value] : env) {
      if (value == "\x01unset") unsetenv(name.c_str());
      else setenv(name.c_str(), value.c_str(), 1);
    }
    std::vector<char *> args;
    for (const auto &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  std::thread err_reader([&] { result.err = drain(err_pipe[0]); });
  result.out = drain(out_pipe[0]);
  err_reader.join();
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

command_result hugify(const std::vector<std::string> &args, const std::map<std::string, std::string> &env) {
  std::vector<std::string> argv{HUGIFY_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, env);
}

std::string read_file(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

uint64_t read_u64(const std::string &path) { return std::strtoull(read_file(path).c_str(), nullptr, 10); }

std::string helper_path(const std::string &name) { return std::string(HUGIFY_TEST_HELPERS_DIR) + "/" + name; }

std::string fixture(const std::string &relative) {
  return read_file(std::string(HUGIFY_FIXTURES_DIR) + "/" + relative);
}

uint64_t smaps_field(int pid, uintptr_t start, size_t size, const std::string &field) {
  std::ifstream in(pid > 0 ? "/proc/" + std::to_string(pid) + "/smaps" : "/proc/self/smaps");
  std::string line;
  uintptr_t end = start + size, lo = 0, hi = 0;
  double total = 0;
  while (std::getline(in, line)) {
    unsigned long long a, b;
    char dash;
    std::istringstream header(line);
    if (line.find(':') == std::string::npos || line.find('-') < line.find(':')) {
      if (header >> std::hex >> a >> dash >> b && dash == '-') { lo = a; hi = b; continue; }
    }
    if (line.rfind(field + ":", 0) != 0 || hi <= start || lo >= end) continue;
    uintptr_t from = lo > start ? lo : start, to = hi < end ? hi : end;
    double kb = std::strtod(line.c_str() + field.size() + 1, nullptr);
    total += kb * 1024.0 * static_cast<double>(to - from) / static_cast<double>(hi - lo);
  }
  return static_cast<uint64_t>(total);
}

static std::string pool_file(uint64_t page_size, const char *leaf) {
  return "/sys/kernel/mm/hugepages/hugepages-" + std::to_string(page_size >> 10) + "kB/" + leaf;
}

uint64_t free_hugetlb(uint64_t page_size) {
  uint64_t free_pages = read_u64(pool_file(page_size, "free_hugepages"));
  uint64_t reserved = read_u64(pool_file(page_size, "resv_hugepages"));
  return free_pages > reserved ? free_pages - reserved : 0;
}

static std::mutex restore_lock;
static std::map<uint64_t, uint64_t> pools_to_restore;
static void restore_pools() {
  std::lock_guard<std::mutex> guard(restore_lock);
  for (const auto &[size, total] : pools_to_restore) {
    std::ofstream out(pool_file(size, "nr_hugepages"));
    out << total;
  }
}

std::string ensure_free_hugetlb(uint64_t page_size, uint64_t pages) {
  std::string total_path = pool_file(page_size, "nr_hugepages");
  if (access(total_path.c_str(), F_OK) != 0) return "this kernel has no hugetlb pages of that size";
  uint64_t have = free_hugetlb(page_size);
  if (have >= pages) return "";
  uint64_t total = read_u64(total_path);
  {
    std::lock_guard<std::mutex> guard(restore_lock);
    if (pools_to_restore.empty()) std::atexit(restore_pools);
    pools_to_restore.emplace(page_size, total);
  }
  std::ofstream(total_path) << total + (pages - have);
  have = free_hugetlb(page_size);
  if (have >= pages) return "";
  return "only " + std::to_string(have) + " free hugetlb pages of " + std::to_string(page_size >> 10) +
         " kB could be had, " + std::to_string(pages) + " needed (memory fragmented, or not root)";
}

}  // namespace test_support
