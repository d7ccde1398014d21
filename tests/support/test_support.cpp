// SPDX-License-Identifier: MIT
// test_support.cpp - see test_support.hpp.
#include "test_support.hpp"

#include "hugify.h"
extern "C" {
#include "probe.h"
}

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace test_support {

std::string missing_kernel_feature(const std::string &feature) {
  for (int i = 0; i < PROBE_FEATURE_COUNT; i++) {
    const probe_feature_info &f = probe_features[i];
    if (feature != f.id) continue;
    char detail[HUGIFY_REASON_MAX];
    if (probe_feature(PROBE_THP, nullptr, 0) == HUGIFY_FEATURE_NO && (f.needs_thp || i == PROBE_THP))
      return "THP: not built into this kernel (CONFIG_TRANSPARENT_HUGEPAGE)";
    if (probe_feature(static_cast<enum probe_feature>(i), detail, sizeof detail) != HUGIFY_FEATURE_NO) return "";
    return std::string(f.name) + ": needs Linux " + f.since + (f.config[0] ? std::string(" with ") + f.config : "") +
           (detail[0] ? std::string(" (here: ") + detail + ")" : "");
  }
  ADD_FAILURE() << "no kernel feature " << feature << " in probe_features";
  return "unknown kernel feature " + feature;
}

std::string damon_held_by_kernel() {
  char reason[HUGIFY_REASON_MAX] = "";
  return probe_damon_held(reason, sizeof reason) ? reason : "";
}

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

uint64_t base_page() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

uint64_t pmd_size() {
  uint64_t pmd = read_u64("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
  return pmd ? pmd : base_page() / 8 * base_page();
}

uint64_t default_hugetlb_size() {
  std::string meminfo = read_file("/proc/meminfo");
  size_t at = meminfo.find("Hugepagesize:");
  return at == std::string::npos ? 0 : std::strtoull(meminfo.c_str() + at + 13, nullptr, 10) * 1024;
}

static std::string size_in_units(uint64_t bytes, const char *const units[4]) {
  int unit = 0;
  while (unit < 3 && bytes >= 1024 && bytes % 1024 == 0) bytes /= 1024, unit++;
  return std::to_string(bytes) + units[unit];
}
std::string size_arg(uint64_t bytes) {
  static const char *const units[4] = {"", "K", "M", "G"};
  return size_in_units(bytes, units);
}
std::string size_text(uint64_t bytes) {
  static const char *const units[4] = {" bytes", " KiB", " MiB", " GiB"};
  return size_in_units(bytes, units);
}

std::string allocator_missing(const std::string &engine) {
  command_result probe = hugify({"run", "--heap", engine, "--", "true"});
  if (probe.status == 3 && probe.err.find("is not installed") != std::string::npos) {
    std::string reason = probe.err.substr(0, probe.err.find('\n'));
    return reason.empty() ? engine + " is not installed" : reason;
  }
  return "";
}

std::string helper_path(const std::string &name) { return std::string(HUGIFY_TEST_HELPERS_DIR) + "/" + name; }

std::string fixture(const std::string &relative) {
  return read_file(std::string(HUGIFY_FIXTURES_DIR) + "/" + relative);
}

std::string source_path(const std::string &relative) {
  return std::filesystem::path(HUGIFY_FIXTURES_DIR).parent_path().parent_path().string() + "/" + relative;
}

std::string fetched_dir(const std::vector<std::string> &script_and_args, std::string *why) {
  std::vector<std::string> argv = script_and_args;
  argv[0] = source_path("scripts/" + argv[0]);
  command_result fetched = run(argv);
  std::string dir = fetched.out.substr(0, fetched.out.find('\n'));
  if (fetched.status == 0 && !dir.empty() && std::filesystem::is_directory(dir)) return dir;
  *why = "exit " + std::to_string(fetched.status) + ": " + fetched.err;
  return "";
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
  struct hugify_pool pool;
  return hugify_pool_read(page_size, &pool) == 0 ? pool.global.available : 0;
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

// ---- JSON -------------------------------------------------------------------------------------------

json_view json_view::operator[](const std::string &key) const {
  return json_view(document_, value_ && json_is_object(value_) ? json_object_get(value_, key.c_str()) : nullptr);
}

json_view json_view::operator[](size_t index) const {
  return json_view(document_, value_ && json_is_array(value_) ? json_array_get(value_, index) : nullptr);
}

json_view json_view::at(const std::string &dotted_path) const {
  json_view view = *this;
  size_t start = 0;
  while (view.present() && start <= dotted_path.size()) {
    size_t dot = dotted_path.find('.', start);
    std::string step = dotted_path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (step.empty()) break;
    char *end;
    unsigned long index = std::strtoul(step.c_str(), &end, 10);
    view = json_is_array(view.value_) && !*end ? view[static_cast<size_t>(index)] : view[step];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return view;
}

uint64_t json_view::u64() const {
  return value_ && json_is_integer(value_) ? static_cast<uint64_t>(json_integer_value(value_)) : 0;
}

double json_view::number() const { return value_ && json_is_number(value_) ? json_number_value(value_) : NAN; }

std::string json_view::text() const {
  return value_ && json_is_string(value_) ? std::string(json_string_value(value_), json_string_length(value_)) : "";
}

bool json_view::flag() const { return value_ && json_is_true(value_); }

size_t json_view::size() const {
  if (value_ && json_is_array(value_)) return json_array_size(value_);
  if (value_ && json_is_object(value_)) return json_object_size(value_);
  return 0;
}

std::vector<json_view> json_view::items() const {
  std::vector<json_view> out;
  if (value_ && json_is_array(value_))
    for (size_t i = 0; i < json_array_size(value_); i++) out.emplace_back(document_, json_array_get(value_, i));
  return out;
}

std::vector<std::pair<std::string, json_view>> json_view::members() const {
  std::vector<std::pair<std::string, json_view>> out;
  if (!value_ || !json_is_object(value_)) return out;
  const char *key;
  json_t *member;
  json_object_foreach(const_cast<json_t *>(value_), key, member) out.emplace_back(key, json_view(document_, member));
  return out;
}

static std::string describe(const json_error_t &error) {
  return "line " + std::to_string(error.line) + ", column " + std::to_string(error.column) + ": " + error.text;
}

static json_view own(json_t *document) {
  std::shared_ptr<json_t> owner(document, [](json_t *v) { json_decref(v); });
  return json_view(owner, document);
}

json_view parse_json(const std::string &text, std::string *error) {
  json_error_t why;
  json_t *document = json_loadb(text.data(), text.size(), JSON_REJECT_DUPLICATES, &why);
  if (!document) {
    if (error) *error = describe(why);
    return json_view();
  }
  return own(document);
}

json_view load_json(const std::string &path, std::string *error) {
  json_error_t why;
  json_t *document = json_load_file(path.c_str(), JSON_REJECT_DUPLICATES, &why);
  if (!document) {
    if (error) *error = path + ": " + describe(why);
    return json_view();
  }
  return own(document);
}

std::vector<json_view> parse_json_documents(const std::string &text, std::string *error) {
  std::vector<json_view> documents;
  size_t at = 0;
  while ((at = text.find_first_not_of(" \t\r\n", at)) != std::string::npos) {
    json_error_t why;
    json_t *document =
        json_loadb(text.data() + at, text.size() - at, JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &why);
    if (!document) {
      if (error) *error = "document " + std::to_string(documents.size() + 1) + ": " + describe(why);
      break;
    }
    at += static_cast<size_t>(why.position); // with JSON_DISABLE_EOF_CHECK: the bytes the document took
    documents.push_back(own(document));
  }
  return documents;
}

scratch_dir::scratch_dir(const std::string &prefix) {
  std::string name = "/tmp/" + prefix + "-XXXXXX";
  std::vector<char> buffer(name.begin(), name.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data())) path = buffer.data();
}

scratch_dir::~scratch_dir() {
  std::error_code ignored;
  if (!path.empty()) std::filesystem::remove_all(path, ignored);
}

}  // namespace test_support

namespace test_support {

static bool is_stopped(int pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'T';
}

int wait_until_stopped(int root, int *status) {
  for (int tries = 0; tries < 12000; tries++) {
    pid_t done = waitpid(root, status, WUNTRACED | WNOHANG);
    if (done == root) return WIFSTOPPED(*status) ? root : -1;
    std::istringstream children(read_file("/proc/" + std::to_string(root) + "/task/" + std::to_string(root) + "/children"));
    for (int child; children >> child;)
      if (is_stopped(child)) return child;
    usleep(10000);
  }
  return -1;
}

// ---- THP settings changed for one test ----------------------------------------------------------------

static const char kThpDir[] = "/sys/kernel/mm/transparent_hugepage/";
static std::map<std::string, std::string> thp_settings_to_restore; // path -> the value first found

static bool write_setting(const std::string &path, const std::string &value) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, value.c_str(), value.size()) == static_cast<ssize_t>(value.size());
  close(fd);
  return ok;
}

static void restore_thp_settings() {
  std::lock_guard<std::mutex> guard(restore_lock);
  for (const auto &[path, value] : thp_settings_to_restore) write_setting(path, value);
}

std::string thp_setting_value(const std::string &leaf) {
  std::string text = read_file(kThpDir + leaf);
  size_t open_at = text.find('['), close_at = text.find(']');
  return open_at == std::string::npos || close_at == std::string::npos ? ""
                                                                       : text.substr(open_at + 1, close_at - open_at - 1);
}

std::string thp_mode() { return thp_setting_value("enabled"); }

thp_setting::thp_setting(const std::string &leaf, const std::string &value) : path_(kThpDir + leaf) {
  std::string now = thp_setting_value(leaf);
  if (now.empty()) {
    reason_ = missing_kernel_feature("thp");
    if (reason_.empty()) reason_ = "this kernel has no " + path_;
    return;
  }
  {
    std::lock_guard<std::mutex> guard(restore_lock);
    if (thp_settings_to_restore.empty()) std::atexit(restore_thp_settings);
    thp_settings_to_restore.emplace(path_, now);
  }
  previous_ = now;
  if (!write_setting(path_, value)) reason_ = "cannot write " + path_ + " (needs root): " + std::strerror(errno);
}

thp_setting::~thp_setting() {
  if (!previous_.empty()) write_setting(path_, previous_);
}

bool installed(const std::string &program) { return run({"sh", "-c", "command -v " + program}).status == 0; }

bool strict_prerequisites() {
  const char *strict = std::getenv("HUGIFY_TEST_STRICT");
  return strict && std::string(strict) == "1";
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  bind(fd, (sockaddr *)&address, sizeof address);
  getsockname(fd, (sockaddr *)&address, &length);
  close(fd);
  return ntohs(address.sin_port);
}

server_process::server_process(const std::vector<std::string> &argv, const std::string &log) {
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char *> args;
    for (const auto &arg : argv) args.push_back(const_cast<char *>(arg.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
}

int server_process::stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 1000; i++) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

bool server_process::alive() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }

}  // namespace test_support
