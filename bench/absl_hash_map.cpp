// SPDX-License-Identifier: MIT
// absl_hash_map.cpp - the seed's hash-table workload: reserve(N), then N x try_emplace(i, i) into an
// absl::flat_hash_map<size_t, size_t> with a crc32 hash, with std::allocator and with hugify::allocator.
// Each run is a fresh child process (fork), allocators alternating; prints the median time, the measured
// huge-page share of the table's backing array and the child's peak RSS, and the ratio std/hugify.
#include <absl/container/flat_hash_map.h>
#include <nmmintrin.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "hugify.hpp"

extern "C" {
#include "units.h"
}

namespace {

const char usage[] =
    "usage: absl_hash_map [--allocator std|hugify|both] [--count N] [--repeat R] [--in-process] [--json]\n"
    "\n"
    "The seed's workload: absl::flat_hash_map<size_t, size_t, crc32 hash>, reserve(N), then N x\n"
    "try_emplace(i, i). Each run is a fresh child process; with `both` the allocators alternate, R runs\n"
    "each. Reports the median time of reserve + inserts, the share of the table's backing array that is on\n"
    "huge pages (measured with hugify_measure_backing on the block the allocator returned, whatever the\n"
    "environment made of it: LD_PRELOAD, GLIBC_TUNABLES...), the child's peak RSS, and std/hugify.\n"
    "\n"
    "  --allocator A  std (std::allocator), hugify (hugify::allocator, default chain), both (default)\n"
    "  --count N      elements (default 10000000; k and M are decimal: 10M = 10000000)\n"
    "  --repeat R     runs per allocator (default 3)\n"
    "  --in-process   every run in this process, not a fresh child: the table is built, freed, and the\n"
    "                 program exits normally (what `hugify check -- absl_hash_map --allocator std\n"
    "                 --repeat 1 --in-process` measures as one program); peak RSS is this process's\n"
    "  --json         one JSON object per allocator per line:\n"
    "                 {\"allocator\":\"std\",\"count\":10000000,\"repeat\":3,\"seconds\":1.14,\n"
    "                  \"seconds_min\":1.12,\"seconds_max\":1.20,\"cpu_seconds\":0.61,\"sys_seconds\":0.11,\n"
    "                  \"huge_fraction\":0.0,\"huge_kind\":\"4K\",\"table_bytes\":285212672,\n"
    "                  \"max_rss_bytes\":287211520}\n"
    "                 seconds = median wall time of reserve + inserts (min, max over the runs);\n"
    "                 cpu_seconds, sys_seconds = median CPU time (user + kernel) and kernel time of the\n"
    "                 same span; huge_fraction = lowest over the runs; huge_kind = the page kind backing\n"
    "                 most of the table (4K, THP, 2M, 1G); max_rss_bytes = highest peak RSS of the runs\n"
    "\n"
    "Exit status: 0 done, 1 a run failed, 2 bad usage.\n"
    "\n"
    "Examples:\n"
    "  absl_hash_map\n"
    "  absl_hash_map --allocator std --json\n"
    "  GLIBC_TUNABLES=glibc.malloc.hugetlb=1 absl_hash_map --allocator std\n"
    "  absl_hash_map --count 1M --repeat 5\n";

struct crc32_hash {
  size_t operator()(size_t h) const noexcept { return _mm_crc32_u64(0, h); }
};

// The largest live allocation the map made: its backing array.
struct table_record {
  void *address = nullptr;
  size_t bytes = 0;
};
table_record g_table;

// Forwards to Base<T> and records the largest allocation, so the table std::allocator produced is
// measured where it really is (no assumption about what backs it).
template <class T, template <class> class Base>
struct recording_allocator : Base<T> {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = recording_allocator<U, Base>;
  };
  recording_allocator() noexcept = default;
  template <class U>
  recording_allocator(const recording_allocator<U, Base> &) noexcept {}
  T *allocate(size_t n) {
    T *p = Base<T>::allocate(n);
    if (n * sizeof(T) >= g_table.bytes) g_table = {p, n * sizeof(T)};
    return p;
  }
  void deallocate(T *p, size_t n) noexcept {
    if (p == g_table.address) g_table = {};
    Base<T>::deallocate(p, n);
  }
};
template <class T, class U, template <class> class Base>
bool operator==(const recording_allocator<T, Base> &, const recording_allocator<U, Base> &) noexcept { return true; }
template <class T, class U, template <class> class Base>
bool operator!=(const recording_allocator<T, Base> &, const recording_allocator<U, Base> &) noexcept { return false; }

template <class T>
using std_base = std::allocator<T>;
template <class T>
using hugify_base = hugify::allocator<T>;

struct run_result {
  int ok;
  double seconds, cpu_seconds, sys_seconds;
  struct hugify_backing table;
  size_t table_bytes;
  char error[HUGIFY_REASON_MAX + 128];
};

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}
double sys_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_stime.tv_sec) + static_cast<double>(u.ru_stime.tv_usec) * 1e-6;
}

template <template <class> class Base>
run_result run_once(size_t count) {
  using allocator = recording_allocator<std::pair<const size_t, size_t>, Base>;
  run_result r{};
  try {
    double cpu_start = cpu_seconds(), sys_start = sys_seconds();
    auto start = std::chrono::steady_clock::now();
    absl::flat_hash_map<size_t, size_t, crc32_hash, std::equal_to<size_t>, allocator> ht;
    ht.reserve(count);
    for (size_t i = 0; i < count; ++i) ht.try_emplace(i, i);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.cpu_seconds = cpu_seconds() - cpu_start;
    r.sys_seconds = sys_seconds() - sys_start;
    r.table_bytes = g_table.bytes;
    if (g_table.address && hugify_measure_backing(g_table.address, g_table.bytes, &r.table) != 0)
      std::snprintf(r.error, sizeof r.error, "hugify_measure_backing failed on the table");
    else if (ht.size() != count || (count > 0 && (ht.find(count / 2)->second != count / 2 || ht.contains(count))))
      std::snprintf(r.error, sizeof r.error, "wrong map contents");
    else
      r.ok = 1;
  } catch (const std::exception &e) {
    std::snprintf(r.error, sizeof r.error, "%s", e.what());
  }
  return r;
}

// One run in a fresh child; the result comes back through a pipe, the peak RSS from wait4.
bool run_in_child(bool hugify_allocator, size_t count, run_result *r, long *max_rss_bytes) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    close(fds[0]);
    run_result result = hugify_allocator ? run_once<hugify_base>(count) : run_once<std_base>(count);
    ssize_t written = write(fds[1], &result, sizeof result);
    _exit(written == static_cast<ssize_t>(sizeof result) ? 0 : 1);
  }
  close(fds[1]);
  size_t got = 0;
  while (got < sizeof *r) {
    ssize_t n = read(fds[0], reinterpret_cast<char *>(r) + got, sizeof *r - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  *max_rss_bytes = usage.ru_maxrss * 1024;
  if (got != sizeof *r) {
    std::snprintf(r->error, sizeof r->error, "child %s", WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exited early");
    r->ok = 0;
  }
  return r->ok;
}

struct summary {
  const char *name;
  std::vector<double> seconds, cpu_seconds, sys_seconds, user_seconds; // per run: wall, CPU, kernel, user
  double huge_fraction = 1.0;
  struct hugify_backing table {};
  size_t table_bytes = 0;
  long max_rss_bytes = 0;
  static double median(std::vector<double> s) {
    std::sort(s.begin(), s.end());
    size_t n = s.size();
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  }
  const char *huge_kind() const {
    uint64_t by_kind[] = {table.resident_4k, table.resident_thp, table.resident_2m, table.resident_1g};
    size_t best = static_cast<size_t>(std::max_element(by_kind, by_kind + 4) - by_kind);
    return hugify_page_kind_name(static_cast<hugify_page_kind>(best));
  }
};

bool parse_count(const char *text, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long n = std::strtoull(text, &end, 10);
  if (end == text || errno || text[0] == '-') return false;
  unsigned long long scale = 1;
  if (*end == 'k' || *end == 'K') scale = 1000, end++;
  else if (*end == 'm' || *end == 'M') scale = 1000000, end++;
  if (*end || n > SIZE_MAX / scale) return false;
  *out = static_cast<size_t>(n * scale);
  return true;
}

int usage_error(const char *format, const char *arg) {
  std::fprintf(stderr, "absl_hash_map: ");
  std::fprintf(stderr, format, arg);
  std::fprintf(stderr, "\n(absl_hash_map --help for usage)\n");
  return 2;
}

}  // namespace

int main(int argc, char **argv) {
  std::string which = "both";
  size_t count = 10000000, repeat = 3;
  bool json = false, in_process = false;
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage, stdout);
      return 0;
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--in-process") {
      in_process = true;
    } else if (arg == "--allocator") {
      const char *v = value();
      if (!v || (std::strcmp(v, "std") && std::strcmp(v, "hugify") && std::strcmp(v, "both")))
        return usage_error("--allocator takes std, hugify or both, not '%s'", v ? v : "");
      which = v;
    } else if (arg == "--count") {
      const char *v = value();
      if (!v || !parse_count(v, &count)) return usage_error("--count takes a number of elements, not '%s'", v ? v : "");
    } else if (arg == "--repeat") {
      const char *v = value();
      if (!v || !parse_count(v, &repeat) || repeat == 0 || repeat > 1000)
        return usage_error("--repeat takes 1..1000, not '%s'", v ? v : "");
    } else {
      return usage_error("unknown argument '%s'", arg.c_str());
    }
  }

  std::vector<summary> runs;
  if (which != "hugify") runs.push_back(summary{"std", {}});
  if (which != "std") runs.push_back(summary{"hugify", {}});
  if (!json)
    std::printf("absl::flat_hash_map<size_t, size_t, crc32>: reserve(%zu) + %zu x try_emplace(i, i); %zu run%s per "
                "allocator, %s%s\n",
                count, count, repeat, repeat == 1 ? "" : "s", in_process ? "in this process" : "each in a fresh process",
                runs.size() > 1 ? ", alternating" : "");
  for (size_t round = 0; round < repeat; round++) {
    for (summary &s : runs) {
      run_result r{};
      long rss = 0;
      bool hugify_allocator = std::strcmp(s.name, "hugify") == 0;
      if (in_process) {
        r = hugify_allocator ? run_once<hugify_base>(count) : run_once<std_base>(count);
        struct rusage usage {};
        getrusage(RUSAGE_SELF, &usage);
        rss = usage.ru_maxrss * 1024;
      }
      if (in_process ? !r.ok : !run_in_child(hugify_allocator, count, &r, &rss)) {
        std::fprintf(stderr, "absl_hash_map: %s run %zu failed: %s\n", s.name, round + 1, r.error);
        return 1;
      }
      s.seconds.push_back(r.seconds);
      s.cpu_seconds.push_back(r.cpu_seconds);
      s.sys_seconds.push_back(r.sys_seconds);
      s.user_seconds.push_back(r.cpu_seconds - r.sys_seconds);
      double fraction = hugify_backing_huge_fraction(&r.table);
      if (s.seconds.size() == 1 || fraction < s.huge_fraction) {
        s.huge_fraction = fraction;
        s.table = r.table;
      }
      s.table_bytes = r.table_bytes;
      s.max_rss_bytes = std::max(s.max_rss_bytes, rss);
    }
  }

  for (const summary &s : runs) {
    double lo = *std::min_element(s.seconds.begin(), s.seconds.end());
    double hi = *std::max_element(s.seconds.begin(), s.seconds.end());
    double wall = summary::median(s.seconds), cpu = summary::median(s.cpu_seconds), sys = summary::median(s.sys_seconds);
    if (json) {
      std::printf("{\"allocator\":\"%s\",\"count\":%zu,\"repeat\":%zu,\"seconds\":%.4f,\"seconds_min\":%.4f,"
                  "\"seconds_max\":%.4f,\"cpu_seconds\":%.4f,\"sys_seconds\":%.4f,\"huge_fraction\":%.4f,"
                  "\"huge_kind\":\"%s\",\"table_bytes\":%zu,\"max_rss_bytes\":%ld}\n",
                  s.name, count, repeat, wall, lo, hi, cpu, sys, s.huge_fraction, s.huge_kind(), s.table_bytes,
                  s.max_rss_bytes);
      continue;
    }
    char table[32], rss[32];
    format_bytes(s.table_bytes, table, sizeof table);
    format_bytes(static_cast<uint64_t>(s.max_rss_bytes), rss, sizeof rss);
    std::printf("  %-7s %.3f s median (min %.3f, max %.3f; CPU %.3f s, of it kernel %.3f s)\n", s.name, wall, lo, hi,
                cpu, sys);
    std::printf("          table %s, %.1f%% on huge pages (mostly %s), peak RSS %s; runs:", table,
                100.0 * s.huge_fraction, s.huge_kind(), rss);
    for (double t : s.seconds) std::printf(" %.3f", t);
    std::printf("\n");
  }
  if (!json && runs.size() == 2) {
    double wall = summary::median(runs[0].seconds) / summary::median(runs[1].seconds);
    double cpu = summary::median(runs[0].cpu_seconds) / summary::median(runs[1].cpu_seconds);
    double user = summary::median(runs[0].user_seconds) / summary::median(runs[1].user_seconds);
    std::printf("std/hugify: %.2fx by median time (by median CPU time %.2fx, by user time %.2fx)\n", wall, cpu, user);
  }
  return 0;
}
