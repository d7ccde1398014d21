// SPDX-License-Identifier: MIT
// test_support.hpp - what integration tests share: running real commands, reading /proc independently
// of libhugify's own parsers, and making sure the hugetlb pool has the pages a test needs.
#pragma once

#include <jansson.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace test_support {

struct command_result {
  int status = -1;      // exit status, or 128 + signal
  std::string out, err; // captured stdout and stderr
};

// Run argv (argv[0] looked up in PATH), with extra environment variables set (or removed when the value
// is "\x01unset"), stdin from /dev/null. Waits for it.
command_result run(const std::vector<std::string> &argv, const std::map<std::string, std::string> &env = {});
// Run the built hugify CLI with these arguments.
command_result hugify(const std::vector<std::string> &args, const std::map<std::string, std::string> &env = {});

// Why `hugify run --heap ENGINE` (mimalloc, jemalloc) cannot run here: the CLI's own message when the
// allocator is not installed (or hidden with HUGIFY_ALLOCATOR_DIRS), "" when it can. Tests that need the
// allocator skip with this reason.
std::string allocator_missing(const std::string &engine);

// Why a test that needs a kernel feature cannot run on this kernel, "" when it can (or when the probe cannot
// tell). feature is an id of libhugify's feature table (probe_features: "thp", "madv_collapse",
// "process_madvise_collapse", "pagemap_scan", "mthp", ...). The reason names the feature and the first Linux
// version that has it, e.g. "MADV_COLLAPSE: needs Linux 6.1 (here: EINVAL: not supported by this kernel)", or,
// for any feature that needs THP on a kernel built without it, "THP: not built into this kernel
// (CONFIG_TRANSPARENT_HUGEPAGE)". Tests skip with it: REQUIRE_KERNEL_FEATURE("madv_collapse").
std::string missing_kernel_feature(const std::string &feature);
#define REQUIRE_KERNEL_FEATURE(feature)                                                   \
  do {                                                                                     \
    std::string missing_feature_ = test_support::missing_kernel_feature(feature);         \
    if (!missing_feature_.empty()) GTEST_SKIP() << missing_feature_;                       \
  } while (0)

// Why no kdamond of DAMON's sysfs can start here, "" when one can: a DAMON user inside the kernel holds it
// (DAMON_STAT, enabled by default in Debian's 7.2), named with the fix (probe_damon_held).
std::string damon_held_by_kernel();

std::string read_file(const std::string &path);
uint64_t read_u64(const std::string &path);
std::string helper_path(const std::string &name); // a program from tests/helpers
std::string fixture(const std::string &relative); // text of tests/fixtures/<relative>
std::string source_path(const std::string &relative); // <the source tree>/<relative>
// What one of the project's fetch scripts prints: the directory in the first line of `scripts/SCRIPT ARGS...`
// (scripts/suite-source redis, scripts/glibc-root), or "" with what it said in *why when it could not.
std::string fetched_dir(const std::vector<std::string> &script_and_args, std::string *why);

// The kernel's page sizes, read here from sysfs and sysconf (not through libhugify): the base page (4 KiB on
// x86-64, 4 or 16 KiB on arm64) and the PMD huge page (2 MiB, 32 MiB on 16 KiB pages) that MADV_COLLAPSE and
// khugepaged make, from transparent_hugepage/hpage_pmd_size (a kernel without THP: one page table of
// base/8 entries). Tests size and align their regions in PMDs, so that they hold whole windows on any kernel.
uint64_t base_page();
uint64_t pmd_size();
// The default hugetlb page size (/proc/meminfo's Hugepagesize: 2 MiB on x86-64, the PMD's on arm64): the pool
// of vm.nr_hugepages, MAP_HUGETLB without a size, and glibc.malloc.hugetlb=2.
uint64_t default_hugetlb_size();
// A size as the CLI takes it ("2M", "32M", "1G", "64K") and as hugify writes it ("2 MiB", "32 MiB").
std::string size_arg(uint64_t bytes);
std::string size_text(uint64_t bytes);

// Sum of one smaps field (in bytes) over the mappings that overlap [start, start+size), each prorated to
// the overlap — an independent read of /proc/PID/smaps, written without libhugify's parser.
uint64_t smaps_field(int pid, uintptr_t start, size_t size, const std::string &field);

// Ensure at least `pages` free (unreserved) hugetlb pages of page_size, growing the pool when we may.
// Returns "" when done, else the reason it could not (the caller skips with it). The pool is put back to
// its previous size when the test program exits.
std::string ensure_free_hugetlb(uint64_t page_size, uint64_t pages);
uint64_t free_hugetlb(uint64_t page_size); // free minus reserved

// Wait (up to 120 s) until `root` or one of its children stops itself (SIGSTOP): `hugify run` becomes the
// program when it execs it, and stays as its parent with --report. Returns the stopped process, or -1 when
// `root` ended first (its wait status in *status).
int wait_until_stopped(int root, int *status);

// ---- JSON that hugify writes, read back with jansson (strict RFC 8259: invalid UTF-8 is an error) ----
// A value inside a parsed document; it keeps the document alive. A missing member or item is an empty
// view (present() false), so doc["a"]["b"].u64() needs no checks in between.
class json_view {
 public:
  json_view() = default;
  json_view(std::shared_ptr<json_t> document, const json_t *value) : document_(std::move(document)), value_(value) {}
  json_view operator[](const std::string &key) const;
  json_view operator[](size_t index) const;
  json_view at(const std::string &dotted_path) const; // "classes.heap.resident_bytes", "processes.0.pid"
  bool present() const { return value_ != nullptr; }
  bool is_null() const { return value_ && json_is_null(value_); }
  bool has(const std::string &key) const { return (*this)[key].present(); }
  uint64_t u64() const;         // an integer; 0 otherwise
  double number() const;        // integer or real; NaN otherwise
  std::string text() const;     // a string; "" otherwise
  bool flag() const;            // true only for true
  size_t size() const;          // items of an array, members of an object
  std::vector<json_view> items() const;
  std::vector<std::pair<std::string, json_view>> members() const;
  const json_t *get() const { return value_; }

 private:
  std::shared_ptr<json_t> document_;
  const json_t *value_ = nullptr;
};

// A value's JSON type, for checks against a schema (false when the value is missing).
inline bool is_number(const json_view &v) { return json_is_number(v.get()); }
inline bool is_string(const json_view &v) { return json_is_string(v.get()); }
inline bool is_int(const json_view &v) { return json_is_integer(v.get()); }
inline bool is_bool(const json_view &v) { return json_is_boolean(v.get()); }
inline bool is_array(const json_view &v) { return json_is_array(v.get()); }

// The one JSON document in text; an empty view, with *error = "line L, column C: what", when it is not
// valid JSON.
json_view parse_json(const std::string &text, std::string *error = nullptr);
json_view load_json(const std::string &path, std::string *error = nullptr);
// Every JSON document in text, one after the other (status --watch prints one per interval).
std::vector<json_view> parse_json_documents(const std::string &text, std::string *error = nullptr);

// A THP setting (/sys/kernel/mm/transparent_hugepage/<leaf>: "enabled", "shmem_enabled", ...) changed for
// one scope: put back when the object goes away (the test passed, failed or skipped), and at exit to the
// value this program first found, whatever happened. Check skip_reason() (not root, no such setting).
class thp_setting {
 public:
  thp_setting(const std::string &leaf, const std::string &value);
  ~thp_setting();
  thp_setting(const thp_setting &) = delete;
  thp_setting &operator=(const thp_setting &) = delete;
  const std::string &skip_reason() const { return reason_; }

 private:
  std::string path_, previous_, reason_;
};
// The bracketed choice of a THP setting ("madvise" of "always [madvise] never"), "" when absent.
std::string thp_setting_value(const std::string &leaf);

// The system THP mode (/sys/kernel/mm/transparent_hugepage/enabled): "always", "madvise" or "never"; ""
// when the kernel has no THP at all (REQUIRE_KERNEL_FEATURE("thp") skips such a kernel, naming it). A test
// whose expectation depends on the mode states one per mode with this (under "always" memory is huge from
// its first fault: the kernel's doing, not hugify's).
std::string thp_mode();

// Whether a program is on PATH (an optional package's command: the test skips naming it when not).
bool installed(const std::string &program);

// Whether what CI provides must be there: HUGIFY_TEST_STRICT=1, which .ci/run sets (the one environment
// knob of the tests, read here). A prerequisite that scripts/test installs or fetches (a Debian package,
// a server's source package, Debian's Go toolchain) is then a failure naming what is missing, never a skip
// that would let CI pass without the test; elsewhere (a developer's machine) it is a skip with the reason.
bool strict_prerequisites();
#define REQUIRE_PREREQUISITE(missing_reason)                                                                  \
  do {                                                                                                        \
    std::string missing_prerequisite_ = (missing_reason);                                                     \
    if (!missing_prerequisite_.empty()) {                                                                     \
      if (test_support::strict_prerequisites())                                                               \
        FAIL() << missing_prerequisite_ << " (HUGIFY_TEST_STRICT=1: scripts/test provides it, so CI fails)"; \
      GTEST_SKIP() << missing_prerequisite_;                                                                  \
    }                                                                                                         \
  } while (0)
// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();

// A server started in the background (stdout and stderr to LOG): stopped with SIGTERM, then SIGKILL, when
// the object goes away.
class server_process {
 public:
  server_process(const std::vector<std::string> &argv, const std::string &log);
  ~server_process() { stop(); }
  server_process(const server_process &) = delete;
  server_process &operator=(const server_process &) = delete;
  int pid() const { return pid_; }
  // SIGTERM, up to 10 s, then SIGKILL. Returns the wait status (or -1 when already reaped).
  int stop();
  bool alive() const;

 private:
  int pid_ = -1;
};

// A fresh directory /tmp/<prefix>-XXXXXX, removed with all it holds when the object goes away ("" in
// path when it could not be made).
struct scratch_dir {
  std::string path;
  explicit scratch_dir(const std::string &prefix = "hugify-test");
  ~scratch_dir();
  scratch_dir(const scratch_dir &) = delete;
  scratch_dir &operator=(const scratch_dir &) = delete;
};

}  // namespace test_support
