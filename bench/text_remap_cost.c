/* SPDX-License-Identifier: MIT */
/* text_remap_cost.c - what the text remap costs, and what it buys a big compiler.
 *
 * 1. Cost per MiB moved: each run is a fresh child that loads big shared objects (LD_PRELOAD) (rustc's driver and
 *    LLVM from the toolchain `rustc --print sysroot` names, the test suite's generated 18 MiB library, or
 *    --object PATH) and calls hugify_remap_text() on them alone. Reports the median time, MiB moved and
 *    ms per 100 MiB (target: <= 10 ms), next to this machine's floor for the same bytes: faulting in fresh
 *    THP memory and copying into it (the two memory passes the copy-and-swap path cannot avoid).
 * 2. cc1plus on a large preprocessed C++ source, compiled with and without the remap (LD_PRELOAD of
 *    libhugify-preload.so with HUGIFY_TEXT=1), in alternating pairs; reports each pair's ratio and the
 *    median ratio (plain / remapped: above 1 means the remap made it faster).
 * Numbers only compare within one run: the machine's load moves them all.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hugify.h"
#include "measure.h"
#include "os.h"

#define MiB (1024.0 * 1024.0)
#define MAX_OBJECTS 16

static const char usage[] =
    "usage: text_remap_cost [--runs N] [--pairs N] [--object PATH]... [--preload PATH] [--no-compile]\n"
    "\n"
    "  --runs N       remap runs (fresh child each; default 5, after one warm-up)\n"
    "  --object PATH  a shared object to load and move (repeatable); default: the rustc toolchain's\n"
    "                 librustc_driver-*.so and libLLVM*.so, and tests/libhugify_text_code.so of this build\n"
    "  --pairs N      cc1plus compile pairs (default 5)\n"
    "  --preload P    libhugify-preload.so (default: ../lib/libhugify-preload.so next to this program)\n"
    "  --no-compile   skip the cc1plus part\n"
    "\n"
    "Examples:\n"
    "  text_remap_cost\n"
    "  text_remap_cost --runs 9 --pairs 3\n"
    "  text_remap_cost --object /usr/lib/x86_64-linux-gnu/libLLVM-14.so.1 --no-compile\n";

static int compare_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, compare_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static char *command_line(const char *command) {
  FILE *p = popen(command, "r");
  if (!p) return NULL;
  static char line[4096];
  char *got = fgets(line, sizeof line, p);
  pclose(p);
  if (!got) return NULL;
  line[strcspn(line, "\n")] = '\0';
  return line;
}

/* A shared object with code in 2 MiB windows, not already in the list (symlinks resolved). */
static int add_object(const char **objects, int count, const char *path) {
  char *real = realpath(path, NULL);
  struct hugify_elf_info info;
  if (!real || count >= MAX_OBJECTS || hugify_elf_read(real, &info) != 0 || info.kind != HUGIFY_ELF_SHARED_OBJECT ||
      info.huge_at_4k_min == 0) {
    free(real);
    return count;
  }
  for (int i = 0; i < count; i++)
    if (strcmp(objects[i], real) == 0) { free(real); return count; }
  objects[count] = real;
  return count + 1;
}

static int default_objects(const char **objects, int count) {
  char *sysroot = command_line("rustc --print sysroot 2>/dev/null");
  if (sysroot && sysroot[0]) {
    const char *patterns[] = {"librustc_driver-*.so", "libLLVM*"};
    for (int p = 0; p < 2; p++) {
      char pattern[4200];
      snprintf(pattern, sizeof pattern, "%s/lib/%s", sysroot, patterns[p]);
      glob_t g;
      if (glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) count = add_object(objects, count, g.gl_pathv[i]);
        globfree(&g);
      }
    }
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    char path[4200];
    snprintf(path, sizeof path, "%s/../tests/libhugify_text_code.so", dirname(self));
    if (access(path, R_OK) == 0) count = add_object(objects, count, path);
  }
  return count;
}

/* ---- 1. the remap's cost ------------------------------------------------------------------------- */

struct remap_result {
  double ms;
  uint64_t moved, huge;
  unsigned segments;
  char reason[256];
};

/* In the child (--child OBJECT...): the objects were loaded at start-up by LD_PRELOAD (some, like rustc's
 * driver, use initial-exec TLS and cannot be dlopen'ed); move only them and print the figures. */
static int child_main(int argc, char **argv) {
  char include[8192] = "";
  for (int i = 0; i < argc; i++) {
    size_t used = strlen(include);
    snprintf(include + used, sizeof include - used, "%s%s", used ? ":" : "", argv[i]);
  }
  struct hugify_text_opts opts = {.include = include, .flags = HUGIFY_TEXT_NO_IN_PLACE};
  struct hugify_text_report report;
  double start = (1e3 * measure_now());
  int rc = hugify_remap_text(&opts, &report);
  double ms = (1e3 * measure_now()) - start;
  const char *why = rc != 0 ? report.reason : "";
  for (size_t i = 0; i < report.object_count && !why[0]; i++)
    for (unsigned k = 0; k < report.objects[i].segment_count && k < HUGIFY_TEXT_MAX_SEGMENTS; k++)
      if (report.objects[i].segments[k].failed_step) why = report.objects[i].segments[k].reason;
  printf("%.3f %" PRIu64 " %" PRIu64 " %u %s\n", ms, report.moved_bytes, report.huge_bytes, report.moved_segments, why);
  hugify_text_report_free(&report);
  return rc != 0;
}

static int remap_once(const char **objects, int count, struct remap_result *out) {
  char preload[8192] = "", self[4096];
  for (int i = 0; i < count; i++) {
    size_t used = strlen(preload);
    snprintf(preload + used, sizeof preload - used, "%s%s", used ? ":" : "", objects[i]);
  }
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return -1;
  self[n] = '\0';
  int pipe_fd[2];
  if (pipe(pipe_fd) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fd[1], STDOUT_FILENO);
    setenv("LD_PRELOAD", preload, 1);
    char *args[MAX_OBJECTS + 3] = {self, "--child"};
    for (int i = 0; i < count; i++) args[i + 2] = (char *)objects[i];
    execv(self, args);
    _exit(127);
  }
  close(pipe_fd[1]);
  char text[1024] = "";
  ssize_t got = read(pipe_fd[0], text, sizeof text - 1);
  close(pipe_fd[0]);
  int status;
  waitpid(pid, &status, 0);
  memset(out, 0, sizeof *out);
  int used = 0;
  if (got <= 0 || sscanf(text, "%lf %" SCNu64 " %" SCNu64 " %u %n", &out->ms, &out->moved, &out->huge, &out->segments, &used) < 4)
    return -1;
  text[strcspn(text, "\n")] = '\0';
  snprintf(out->reason, sizeof out->reason, "%.250s", text + used);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The floor for `bytes`: fault in fresh 2 MiB-aligned THP memory while copying into it from memory that is
 * already there (what the copy step does), in a fresh child so the memory is new each time. */
static double copy_floor_ms(size_t bytes) {
  int pipe_fd[2];
  if (pipe(pipe_fd) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    size_t huge = 2u << 20;
    char *source = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *aligned = NULL;
    double ms = -1;
    if (source != MAP_FAILED && os_map_aligned(bytes, huge, PROT_READ | PROT_WRITE, &aligned) == 0) {
      for (size_t i = 0; i < bytes; i += 4096) source[i] = (char)i;
      char *dest = aligned;
      madvise(dest, bytes, MADV_HUGEPAGE);
      double start = (1e3 * measure_now());
      memcpy(dest, source, bytes);
      ms = (1e3 * measure_now()) - start;
    }
    if (write(pipe_fd[1], &ms, sizeof ms) != (ssize_t)sizeof ms) _exit(1);
    _exit(0);
  }
  close(pipe_fd[1]);
  double ms = -1;
  if (read(pipe_fd[0], &ms, sizeof ms) != (ssize_t)sizeof ms) ms = -1;
  close(pipe_fd[0]);
  waitpid(pid, NULL, 0);
  return ms;
}

static int measure_remap(const char **objects, int count, int runs) {
  printf("1. Text remap cost (copy and swap onto THP), %d runs, each a fresh process\n", runs);
  for (int i = 0; i < count; i++) printf("   object: %s\n", objects[i]);
  struct remap_result warm;
  if (remap_once(objects, count, &warm) != 0) { printf("   the warm-up run failed\n"); return 1; }
  if (warm.reason[0]) printf("   note: %s\n", warm.reason);
  if (warm.moved == 0) { printf("   nothing was moved: no 2 MiB windows in these objects\n"); return 1; }
  double times[64], per100[64], floors[64];
  uint64_t moved = 0, huge = 0;
  int done = 0;
  for (int i = 0; i < runs && i < 64; i++) {
    struct remap_result r;
    if (remap_once(objects, count, &r) != 0) continue;
    times[done] = r.ms;
    per100[done] = r.ms * 100.0 * MiB / (double)r.moved;
    floors[done] = copy_floor_ms(r.moved) * 100.0 * MiB / (double)r.moved;
    moved = r.moved;
    huge = r.huge;
    printf("   run %d: %.1f ms for %.0f MiB in %u segments (%.1f ms per 100 MiB; floor %.1f)\n", i + 1, r.ms,
           (double)r.moved / MiB, r.segments, per100[done], floors[done]);
    done++;
  }
  if (!done) return 1;
  double m = median(times, done), p = median(per100, done), f = median(floors, done);
  printf("   median: %.1f ms for %.0f MiB moved (%.0f MiB measured on huge pages)\n", m, (double)moved / MiB,
         (double)huge / MiB);
  printf("   cost: %.1f ms per 100 MiB (target <= 10 ms: %s); %.3f ms per MiB\n", p, p <= 10.0 ? "met" : "missed",
         p / 100.0);
  printf("   floor on this machine: %.1f ms per 100 MiB to fault in fresh THP memory and copy into it\n", f);
  printf("   remap / floor: %.2f\n\n", f > 0 ? p / f : 0.0);
  return 0;
}

/* ---- 2. cc1plus with and without -------------------------------------------------------------------- */

static const char big_source[] =
    "#include <algorithm>\n#include <chrono>\n#include <functional>\n#include <future>\n#include <iostream>\n"
    "#include <map>\n#include <memory>\n#include <random>\n#include <regex>\n#include <set>\n#include <sstream>\n"
    "#include <string>\n#include <thread>\n#include <tuple>\n#include <unordered_map>\n#include <variant>\n"
    "#include <vector>\n"
    "template <int N> struct work {\n"
    "  static std::string run(const std::vector<std::string> &in) {\n"
    "    std::map<std::string, int> counts; std::unordered_map<int, std::set<std::string>> by_length;\n"
    "    std::regex word(\"[a-z]+\" + std::to_string(N));\n"
    "    for (const auto &s : in) { if (std::regex_search(s, word)) counts[s] += N; by_length[(int)s.size()].insert(s); }\n"
    "    std::vector<std::pair<std::string, int>> v(counts.begin(), counts.end());\n"
    "    std::sort(v.begin(), v.end(), [](auto &a, auto &b) { return a.second > b.second; });\n"
    "    std::ostringstream out; for (auto &[k, c] : v) out << k << c;\n"
    "    std::variant<int, std::string> x = N; std::visit([&](auto &&y) { out << sizeof(y); }, x);\n"
    "    return out.str() + work<N - 1>::run(in);\n"
    "  }\n"
    "};\n"
    "template <> struct work<0> { static std::string run(const std::vector<std::string> &) { return {}; } };\n"
    "std::string everything(const std::vector<std::string> &in) { return work<3>::run(in); }\n"
    "int main() { auto f = std::async([] { return everything({\"abc\", \"def\"}); }); std::cout << f.get(); }\n";

/* Run argv with LD_PRELOAD (or without); returns wall ms, or -1. */
static double run_compile(char *const argv[], const char *preload) {
  double start = (1e3 * measure_now());
  pid_t pid = fork();
  if (pid == 0) {
    if (preload) {
      setenv("LD_PRELOAD", preload, 1);
      setenv("HUGIFY_TEXT", "1", 1);
    }
    execv(argv[0], argv);
    _exit(127);
  }
  int status;
  waitpid(pid, &status, 0);
  double ms = (1e3 * measure_now()) - start;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? ms : -1;
}

static int measure_compile(const char *preload, int pairs) {
  printf("2. cc1plus -O2 on a large preprocessed C++ source, with and without the text remap, %d pairs\n", pairs);
  char *cc1plus = command_line("g++ -print-prog-name=cc1plus 2>/dev/null");
  if (!cc1plus || access(cc1plus, X_OK) != 0) { printf("   skipped: g++ (cc1plus) is not installed\n"); return 0; }
  cc1plus = strdup(cc1plus);
  if (access(preload, R_OK) != 0) { printf("   skipped: no preload at %s (--preload PATH)\n", preload); return 1; }
  char dir[] = "/tmp/hugify-text-bench-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char source[128], preprocessed[128], output[128], command[512];
  snprintf(source, sizeof source, "%s/big.cpp", dir);
  snprintf(preprocessed, sizeof preprocessed, "%s/big.ii", dir);
  snprintf(output, sizeof output, "%s/big.s", dir);
  FILE *f = fopen(source, "w");
  if (!f) return 1;
  fputs(big_source, f);
  fclose(f);
  snprintf(command, sizeof command, "g++ -std=c++17 -E %s -o %s", source, preprocessed);
  if (system(command) != 0) { printf("   g++ -E failed\n"); return 1; }
  char *argv[] = {cc1plus, "-fpreprocessed", "-quiet", "-O2", "-std=c++17", preprocessed, "-o", output, NULL};
  double plain[64], remapped[64], ratios[64];
  int done = 0;
  run_compile(argv, NULL); /* warm the page cache */
  for (int i = 0; i < pairs && i < 64; i++) {
    /* alternate which goes first, so drift in the machine's load hits both the same */
    double a, b;
    if (i % 2 == 0) { a = run_compile(argv, NULL); b = run_compile(argv, preload); }
    else { b = run_compile(argv, preload); a = run_compile(argv, NULL); }
    if (a < 0 || b < 0) { printf("   pair %d: a compile failed\n", i + 1); continue; }
    plain[done] = a;
    remapped[done] = b;
    ratios[done] = a / b;
    printf("   pair %d: plain %.0f ms, remapped %.0f ms, ratio %.3f\n", i + 1, a, b, ratios[done]);
    done++;
  }
  snprintf(command, sizeof command, "rm -rf %s", dir);
  if (system(command) != 0) fprintf(stderr, "text_remap_cost: could not remove %s\n", dir);
  if (!done) return 1;
  printf("   median: plain %.0f ms, remapped %.0f ms; ratio plain/remapped %.3f (above 1: faster with the remap)\n",
         median(plain, done), median(remapped, done), median(ratios, done));
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--child") == 0) return child_main(argc - 2, argv + 2);
  int runs = 5, pairs = 5, count = 0;
  bool compile = true;
  const char *objects[MAX_OBJECTS];
  char preload[4200] = "";
  for (int i = 1; i < argc; i++) {
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--runs") == 0 && next) runs = atoi(argv[++i]);
    else if (strcmp(argv[i], "--pairs") == 0 && next) pairs = atoi(argv[++i]);
    else if (strcmp(argv[i], "--object") == 0 && next && count < MAX_OBJECTS) objects[count++] = argv[++i];
    else if (strcmp(argv[i], "--preload") == 0 && next) snprintf(preload, sizeof preload, "%s", argv[++i]);
    else if (strcmp(argv[i], "--no-compile") == 0) compile = false;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) { fputs(usage, stdout); return 0; }
    else { fputs(usage, stderr); return 2; }
  }
  if (runs < 1 || pairs < 1) { fputs(usage, stderr); return 2; }
  if (!preload[0]) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    snprintf(preload, sizeof preload, "%s/../lib/libhugify-preload.so", dirname(self));
  }
  if (count == 0) count = default_objects(objects, 0);
  int status = 0;
  if (count == 0) printf("1. skipped: no big shared object found (--object PATH)\n\n");
  else status |= measure_remap(objects, count, runs);
  if (compile) status |= measure_compile(preload, pairs);
  return status;
}
