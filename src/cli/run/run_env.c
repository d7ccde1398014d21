/* SPDX-License-Identifier: MIT */
/* run_env.c - the environment `hugify run` gives a program (run_env.h): the preload, the heap mode's
 * allocator settings, and the HUGIFY_* variables the preload reads. Built as a list first, so `run` can set
 * it and `env` can print it in the forms services use, from the same code. */
#include "run_env.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "elf_image.h"
#include "os.h"
#include "probe.h"
#include "safe_file.h"

#define PRELOAD_NAME "libhugify-preload.so"
#define MUSL_PRELOAD_NAME "libhugify-preload-musl.so" /* built with musl-gcc: src/preload/CMakeLists.txt */

/* glibc tunables for the THP heap: hugetlb=1 makes malloc madvise the main arena and its mmap'd chunks;
 * glibc 2.36 does not advise thread arenas (it advises a new heap only when its first size is >= 2 MiB, and
 * never the mprotect'ed growth), so top_pad=64 MiB makes every new arena heap whole at creation, and
 * advised whole; top_pad turns off the dynamic mmap threshold, so mmap_threshold=32 MiB (the dynamic
 * maximum) keeps mid-size blocks in those heaps instead of in unaligned mmaps. Measured: docs/run.md. */
static const char *const thp_tunables[][2] = {
    {"glibc.malloc.hugetlb", "1"},
    {"glibc.malloc.top_pad", "67108864"},
    {"glibc.malloc.mmap_threshold", "33554432"},
};
static const char *const hugetlb_tunables[][2] = {{"glibc.malloc.hugetlb", "2"}};
static const char *const jemalloc_conf[][2] = {{"thp", "always"}, {"metadata_thp", "always"}};

void run_settings_default(struct run_settings *settings) {
  *settings = (struct run_settings){.text = TEXT_AUTO, .heap = HEAP_AUTO};
}

const char *const run_text_words[] = {[TEXT_OFF] = "off", [TEXT_NOW] = "on", [TEXT_AUTO] = "auto", NULL};

const char *run_text_mode_name(enum text_mode mode) { return run_text_words[mode]; }

int run_settings_set_heap(void *settings, const char *value) {
  return options_parse_heap(value, &((struct run_settings *)settings)->heap) ? 0 : -EINVAL;
}

int run_settings_set_report(void *settings, const char *value) {
  /* `run --report -x`: a file name or -, never something that reads as an option */
  if (value[0] == '-' && value[1]) return -EINVAL;
  ((struct run_settings *)settings)->report = value;
  return 0;
}

int run_settings_take_json(const char *command, struct run_settings *settings, const struct json_output *json,
                           bool *json_report) {
  *json_report = false;
  if (!json->wanted) return EXIT_DONE;
  if (json->path) {
    if (settings->report) return usage_error(command, "one report: --report or --json=FILE, not both");
    settings->report = json->path;
    return EXIT_DONE;
  }
  *json_report = true;
  if (!settings->report) settings->report = "-";
  return EXIT_DONE;
}

/* ---- finding things --------------------------------------------------------------------------- */

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* `path` with its file name replaced by `name`. */
static void beside(const char *path, const char *name, char *out, size_t cap) {
  const char *slash = strrchr(path, '/');
  snprintf(out, cap, "%.*s%s", slash ? (int)(slash + 1 - path) : 0, path, name);
}

/* A preload, by its file name: libhugify-preload.so, or the musl build beside it (MUSL_PRELOAD_NAME). Where
 * HUGIFY_PRELOAD_PATH (the glibc preload) says, else next to the binary (installed:
 * PREFIX/bin/../LIBDIR/hugify, build tree: build/bin/../lib). */
static bool find_preload(const struct hugify_options *options, const char *name, char *out, size_t cap) {
  char candidate[PATH_MAX * 2];
  if (options->preload_path[0]) {
    beside(options->preload_path, name, candidate, sizeof candidate);
    return realpath(candidate, out) && is_file(out);
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return false;
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (!slash) return false;
  *slash = '\0';
  const char *relative[] = {HUGIFY_PRELOAD_RELATIVE, "../lib/" PRELOAD_NAME, "../lib64/" PRELOAD_NAME};
  for (size_t i = 0; i < sizeof relative / sizeof relative[0]; i++) {
    char preload[PATH_MAX * 2];
    snprintf(preload, sizeof preload, "%s/%s", self, relative[i]);
    beside(preload, name, candidate, sizeof candidate);
    if (is_file(candidate) && realpath(candidate, out) && strlen(out) < cap) return true;
  }
  return false;
}

/* The allocator library of --heap mimalloc|jemalloc in HUGIFY_ALLOCATOR_DIRS when set, else in the usual
 * Debian and other library directories. */
static bool find_allocator(const struct hugify_options *options, const char *file, char *out, size_t cap) {
  if (options->test.allocator_dirs[0]) {
    for (const char *dir = options->test.allocator_dirs; *dir;) {
      size_t length = strcspn(dir, ":");
      if (length > 0) {
        snprintf(out, cap, "%.*s/%s", (int)length, dir, file);
        if (is_file(out)) return true;
      }
      dir += length + (dir[length] == ':');
    }
    return false;
  }
  static const char *const dirs[] = {
#if defined(__x86_64__)
      "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu",
#elif defined(__aarch64__)
      "/usr/lib/aarch64-linux-gnu", "/lib/aarch64-linux-gnu",
#endif
      "/usr/local/lib", "/usr/lib64", "/usr/lib", "/lib64", "/lib",
  };
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    snprintf(out, cap, "%s/%s", dirs[i], file);
    if (is_file(out)) return true;
  }
  return false;
}

/* The file execvp would run for `name`: "" when there is none; *not_executable when one exists but is
 * not executable (execvp's EACCES). */
void run_find_command(const char *name, char *out, size_t cap, bool *not_executable) {
  out[0] = '\0';
  *not_executable = false;
  if (strchr(name, '/')) {
    if (access(name, F_OK) != 0) return;
    snprintf(out, cap, "%s", name);
    *not_executable = access(name, X_OK) != 0;
    return;
  }
  const char *path = getenv("PATH");
  if (!path) path = "/usr/local/bin:/usr/bin:/bin";
  for (const char *dir = path; dir; dir = strchr(dir, ':'), dir = dir ? dir + 1 : NULL) {
    size_t length = strcspn(dir, ":");
    char candidate[PATH_MAX];
    snprintf(candidate, sizeof candidate, "%.*s%s%s", (int)length, length ? dir : ".", "/", name);
    struct stat st;
    if (stat(candidate, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (access(candidate, X_OK) == 0) {
      snprintf(out, cap, "%s", candidate);
      *not_executable = false;
      return;
    }
    if (!out[0]) { snprintf(out, cap, "%s", candidate); *not_executable = true; }
  }
}

static void note_needed_owner(void *context, const char *name) {
  const char **owner = context;
  if (!*owner) *owner = elf_heap_owner_of_library(name);
}

static void note_symbol_owner(void *context, uint64_t value, uint64_t size, const char *name) {
  (void)value, (void)size;
  const char **owner = context;
  if (!*owner) *owner = elf_heap_owner_of_symbol(name);
}

/* The sanitizer that owns the program's malloc: a runtime it needs (DT_NEEDED libasan.so.8) or one linked
 * in (clang's static runtimes define __asan_init); NULL when none, or when the file cannot be read. */
const char *run_program_heap_owner(const char *binary) {
  size_t size;
  void *data;
  if (elf_map_file(binary, &data, &size) != 0) return NULL;
  const char *owner = NULL;
  elf_needed(data, size, note_needed_owner, &owner);
  if (!owner) elf_functions(data, size, note_symbol_owner, &owner);
  elf_unmap(data, size);
  return owner;
}

bool run_script_interpreter(const char *path, bool through_env, char *out, size_t cap) {
  char line[256];
  int fd = safe_file_open_read(path, true); /* a FIFO named as CMD must not hang hugify */
  if (fd < 0) return false;
  ssize_t n = read(fd, line, sizeof line);
  close(fd);
  if (n <= 0) return false;
  return through_env ? elf_script_program(line, (size_t)n, out, cap) : elf_script_interpreter(line, (size_t)n, out, cap);
}

enum allocator_kind run_program_runtime(const char *path) {
  /* the file's own name first: a wrapper script named python3 (pyenv's shims) runs CPython in the end */
  enum allocator_kind runtime = allocator_of_program(path);
  char program[PATH_MAX];
  if (runtime == ALLOCATOR_UNKNOWN && run_script_interpreter(path, true, program, sizeof program))
    runtime = allocator_of_program(program);
  return runtime;
}

/* ---- the heap mode on this machine -------------------------------------------------------------- */

static uint64_t free_2m_pages(void) {
  struct hugify_hugetlb_size pool;
  if (os_hugetlb_read(os_pmd_size(), &pool) != 0) return 0;
  return pool.available;
}

/* The heap mode as it will run, after what this machine offers: THP 'never' and the pool. */
static enum heap_mode settle_heap_mode(const char *command, enum heap_mode heap) {
  if (heap != HEAP_AUTO && heap != HEAP_THP && heap != HEAP_HUGETLB) return heap;
  if (heap == HEAP_HUGETLB) {
    if (free_2m_pages() == 0)
      fail(EXIT_SHORT, command,
           "--heap hugetlb: the PMD-size hugetlb pool has no free pages, so malloc will use normal pages; reserve "
           "some first (hugify pool, or: echo N > " OS_SYSFS_HUGEPAGES "/hugepages-2048kB/nr_hugepages)");
    return heap;
  }
  char thp[16];
  probe_thp_setting("enabled", thp, sizeof thp);
  if (thp[0] && strcmp(thp, "never") != 0) return heap; /* THP usable: the pool is not read (five files) */
  uint64_t pool = free_2m_pages();
  /* without THP in the kernel there is no setting to change: the pool is the road */
  const char *fix = thp[0] ? "change with: echo madvise > " OS_SYSFS_THP "/enabled (or boot with "
                             "transparent_hugepage=madvise)"
                           : "reserve a hugetlb pool (hugify pool set 2M=N) and run with --heap hugetlb";
  const char *state = thp[0] ? "'never'" : "not built into this kernel (CONFIG_TRANSPARENT_HUGEPAGE)";
  if (heap == HEAP_AUTO && pool > 0) {
    fail(EXIT_SHORT, command, "transparent huge pages are %s on this machine; using the hugetlb pool for the heap "
         "(%llu free PMD-size pages) instead%s%s", state, (unsigned long long)pool, thp[0] ? "; " : "",
         thp[0] ? fix : "");
    return HEAP_HUGETLB;
  }
  fail(EXIT_SHORT, command, "transparent huge pages are %s on this machine, so the heap stays on normal pages; %s",
       state, fix);
  return heap == HEAP_AUTO ? HEAP_OFF : heap;
}

/* ---- the variables ------------------------------------------------------------------------------ */

/* Old-style variables glibc reads as the same tunables: when the user set one, theirs stays. */
static const char *tunable_alias(const char *key) {
  if (strcmp(key, "glibc.malloc.top_pad") == 0) return "MALLOC_TOP_PAD_";
  if (strcmp(key, "glibc.malloc.mmap_threshold") == 0) return "MALLOC_MMAP_THRESHOLD_";
  return NULL;
}

/* The item "key=..." of a separator-separated list: its start and length, or NULL. */
static const char *find_setting(const char *list, char separator, char assign, const char *key, size_t *length) {
  size_t key_length = strlen(key);
  for (const char *p = list; *p;) {
    const char *next = strchr(p, separator);
    size_t item = next ? (size_t)(next - p) : strlen(p);
    if (item > key_length && strncmp(p, key, key_length) == 0 && p[key_length] == assign) {
      *length = item;
      return p;
    }
    if (!next) break;
    p = next + 1;
  }
  return NULL;
}

/* Takes `value` (malloc'd, or NULL when out of memory: then false). */
static bool add_variable(struct run_environment *environment, const char *name, char *value) {
  if (!value) return false;
  if (environment->count == RUN_ENV_MAX_VARIABLES) abort(); /* a programming error: the table is fixed */
  environment->variables[environment->count].name = name;
  environment->variables[environment->count++].value = value;
  return true;
}

static char *copy(const char *text) { return strdup(text); }

/* variable = its current value with key<assign>value appended for each pair the user did not set (in the
 * list or as an old-style alias): what the user set always wins. GLIBC_TUNABLES is "k=v:k=v",
 * MALLOC_CONF "k:v,k:v". Sized for everything: never a cut entry. */
static bool merge_variable(const char *command, struct run_environment *environment, const char *variable,
                           char separator, char assign, const char *const pairs[][2], size_t count, bool verbose) {
  const char *existing = getenv(variable);
  size_t cap = (existing ? strlen(existing) : 0) + 1;
  for (size_t i = 0; i < count; i++) cap += strlen(pairs[i][0]) + strlen(pairs[i][1]) + 2;
  char *list = malloc(cap);
  if (!list) return false;
  snprintf(list, cap, "%s", existing ? existing : "");
  for (size_t i = 0; i < count; i++) {
    const char *key = pairs[i][0], *value = pairs[i][1], *alias = tunable_alias(key);
    size_t length;
    const char *theirs = find_setting(list, separator, assign, key, &length);
    if (theirs || (alias && getenv(alias))) {
      if (verbose && theirs)
        fprintf(stderr, "hugify %s: %s already sets %.*s; kept (hugify would set %s%c%s)\n", command, variable,
                (int)length, theirs, key, assign, value);
      else if (verbose)
        fprintf(stderr, "hugify %s: %s is set; kept (hugify would set %s=%s)\n", command, alias, key, value);
      continue;
    }
    size_t used = strlen(list);
    snprintf(list + used, cap - used, "%s%s%c%s", used ? (char[]){separator, 0} : "", key, assign, value);
  }
  return add_variable(environment, variable, list);
}

/* A variable the user's value of wins over hugify's default. */
static bool default_variable(struct run_environment *environment, const char *variable, const char *value) {
  const char *theirs = getenv(variable);
  return add_variable(environment, variable, copy(theirs ? theirs : value));
}

/* LD_PRELOAD: the allocator first (its malloc must win), then what was there, then the preload. TCMalloc
 * (gperftools) comes last: it defines mmap() itself (its hooks, a raw system call), and a definition
 * before the preload's would take every mmap() call, its own chunks' too, away from the cover; the
 * preload defines no malloc, so TCMalloc's still wins over libc's. */
static bool preload_variable(struct run_environment *environment) {
  const char *existing = getenv("LD_PRELOAD"), *allocator = environment->allocator[0] ? environment->allocator : NULL;
  if (existing && !existing[0]) existing = NULL;
  bool add_preload = environment->preload[0] && (!existing || !strstr(existing, environment->preload));
  const char *last = NULL;
  if (allocator && environment->heap == HEAP_TCMALLOC) last = allocator, allocator = NULL;
  if (!allocator && !existing && !add_preload && !last) return true; /* no preload for this program: none */
  char *list = NULL;
  if (asprintf(&list, "%s%s%s%s%s%s%s", allocator ? allocator : "", allocator && existing ? ":" : "",
               existing ? existing : "", (allocator || existing) && add_preload ? ":" : "",
               add_preload ? environment->preload : "", last && (allocator || existing || add_preload) ? ":" : "",
               last ? last : "") < 0)
    list = NULL;
  return add_variable(environment, "LD_PRELOAD", list);
}

/* gcc's ASan runtime (libasan.so, also clang's -shared-libasan) stops a program, exit 1, when another
 * library comes before it in the initial library list: LD_PRELOAD puts the preload there. Its own option
 * verify_asan_link_order=0 turns that check off. The option goes into ASAN_OPTIONS, which every process of
 * the tree inherits and only ASan reads: a process without ASan gets nothing injected. The check is safe
 * to skip for this preload: it defines no function ASan intercepts except mmap, which it hands on to the
 * next definition (ASan's) through RTLD_NEXT. Ours goes first: sanitizer options are read left to right
 * and the last wins, so whatever the user's ASAN_OPTIONS says (or a file it includes) overrides it, and a
 * user who set the option is left as they wrote it. */
#define ASAN_LINK_ORDER_OPTION "verify_asan_link_order"
static bool asan_options_variable(const char *command, struct run_environment *environment, bool verbose) {
  const char *existing = getenv("ASAN_OPTIONS");
  if (existing && !existing[0]) existing = NULL;
  /* The sanitizers' flag parser separates options with blanks, ',' or ':'. */
  static const char separators[] = " \t\n\r,:";
  for (const char *p = existing; p && *p;) {
    p += strspn(p, separators);
    size_t length = strcspn(p, separators);
    if (strncmp(p, ASAN_LINK_ORDER_OPTION "=", sizeof ASAN_LINK_ORDER_OPTION) == 0) {
      if (verbose)
        fprintf(stderr, "hugify %s: ASAN_OPTIONS already sets %.*s; kept (hugify would set " ASAN_LINK_ORDER_OPTION
                "=0)\n", command, (int)length, p);
      return add_variable(environment, "ASAN_OPTIONS", copy(existing));
    }
    p += length;
  }
  char *list = NULL;
  if (asprintf(&list, ASAN_LINK_ORDER_OPTION "=0%s%s", existing ? ":" : "", existing ? existing : "") < 0) list = NULL;
  return add_variable(environment, "ASAN_OPTIONS", list);
}

static bool printed_variable(struct run_environment *environment, const char *name, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static bool printed_variable(struct run_environment *environment, const char *name, const char *format, ...) {
  va_list args;
  va_start(args, format);
  char *value = NULL;
  if (vasprintf(&value, format, args) < 0) value = NULL;
  va_end(args);
  return add_variable(environment, name, value);
}

/* out->preload for a program of C library `libc`: "" for one hugify has no preload for (OTHER: run.c said
 * so), and for a musl program when the musl build is not installed (said here: it runs without one). */
static int choose_preload(const char *command, const struct hugify_options *options, enum elf_libc libc,
                          const char *program, struct run_environment *out) {
  if (libc == ELF_LIBC_OTHER) return EXIT_DONE;
  if (libc == ELF_LIBC_MUSL && !find_preload(options, MUSL_PRELOAD_NAME, out->preload, sizeof out->preload)) {
    fail(EXIT_SHORT, command, "%s is a musl program and %s is not installed beside %s (hugify was built without "
         "musl-gcc; Debian: apt-get install musl-tools, then rebuild): it runs without a preload", program,
         MUSL_PRELOAD_NAME, PRELOAD_NAME);
    return EXIT_DONE;
  }
  if (libc != ELF_LIBC_MUSL && !find_preload(options, PRELOAD_NAME, out->preload, sizeof out->preload))
    return fail(EXIT_PRIVILEGE, command,
                "cannot find %s (looked at HUGIFY_PRELOAD_PATH, then next to this hugify binary: %s); reinstall "
                "hugify or set HUGIFY_PRELOAD_PATH", PRELOAD_NAME, HUGIFY_PRELOAD_RELATIVE);
  if (strpbrk(out->preload, ": "))
    return fail(EXIT_PRIVILEGE, command,
                "%s: LD_PRELOAD cannot hold a path with ':' or spaces; install hugify elsewhere", out->preload);
  return EXIT_DONE;
}

int run_environment_build(const char *command, const struct run_settings *settings, enum elf_libc libc,
                          const char *program, struct run_environment *out) {
  memset(out, 0, sizeof *out);
  struct hugify_options options = {0};
  char warnings[1024] = "";
  options_from_environment(&options, warnings, sizeof warnings); /* the preload warns about bad values */
  int rc = choose_preload(command, &options, libc, program, out);
  if (rc != EXIT_DONE) return rc;

  out->heap = settle_heap_mode(command, settings->heap);
  if (options_heap_is_engine(out->heap)) {
    /* The allocator's library, and the Debian package that has it. gperftools' minimal TCMalloc is enough
     * (no profiler); the full libtcmalloc.so.4 (libgoogle-perftools4) serves when only it is installed.
     * apt-get finds Debian 13's libtcmalloc-minimal4t64 by the name libtcmalloc-minimal4. Debian 13 has
     * only mimalloc 3 (libmimalloc.so.3), which reserves a 1 GiB MAP_NORESERVE arena and advises nothing
     * (measured: 0 of 33 MiB huge, MIMALLOC_LARGE_OS_PAGES or not): not preloaded, and said so. */
    static const struct { enum heap_mode heap; const char *files[2], *package; } engines[] = {
        {HEAP_MIMALLOC, {"libmimalloc.so.2", NULL},
         "libmimalloc2.0 (Debian 12; Debian 13's mimalloc 3 gets no huge pages from hugify yet)"},
        {HEAP_JEMALLOC, {"libjemalloc.so.2", NULL}, "libjemalloc2"},
        {HEAP_TCMALLOC, {"libtcmalloc_minimal.so.4", "libtcmalloc.so.4"}, "libtcmalloc-minimal4"},
    };
    for (size_t i = 0; i < sizeof engines / sizeof engines[0]; i++) {
      if (engines[i].heap != out->heap) continue;
      bool found = false;
      for (size_t f = 0; f < 2 && engines[i].files[f] && !found; f++)
        found = find_allocator(&options, engines[i].files[f], out->allocator, sizeof out->allocator);
      if (!found)
        return fail(EXIT_PRIVILEGE, command, "--heap %s: %s is not installed; install it with: apt-get install %s",
                    options_heap_name(out->heap), engines[i].files[0], engines[i].package);
    }
  }

  bool ok = preload_variable(out) && asan_options_variable(command, out, settings->verbose);
  if (out->heap == HEAP_AUTO || out->heap == HEAP_THP)
    ok = ok && merge_variable(command, out, "GLIBC_TUNABLES", ':', '=', thp_tunables,
                              sizeof thp_tunables / sizeof thp_tunables[0], settings->verbose);
  else if (out->heap == HEAP_HUGETLB)
    ok = ok && merge_variable(command, out, "GLIBC_TUNABLES", ':', '=', hugetlb_tunables, 1, settings->verbose);
  else if (out->heap == HEAP_MIMALLOC)
    /* Large OS pages alone left the first segments of each thread (eager_commit_delay) unadvised:
     * 46% of a 2-thread heap on huge pages here; with the delay off, 99.9%. */
    ok = ok && default_variable(out, "MIMALLOC_LARGE_OS_PAGES", "1") &&
         default_variable(out, "MIMALLOC_EAGER_COMMIT_DELAY", "0");
  else if (out->heap == HEAP_JEMALLOC)
    ok = ok && merge_variable(command, out, "MALLOC_CONF", ',', ':', jemalloc_conf, 2, settings->verbose);
  else if (out->heap == HEAP_TCMALLOC)
    /* TCMalloc takes its memory with sbrk first, which the preload cannot place: mmap() only, so that its
     * chunks are placed and advised; and no gradual release (docs/run.md, "TCMalloc"). */
    ok = ok && default_variable(out, "TCMALLOC_SKIP_SBRK", "true") &&
         default_variable(out, "TCMALLOC_RELEASE_RATE", "0");
  ok = ok && printed_variable(out, "HUGIFY_HEAP", "%s", options_heap_name(out->heap)) &&
       printed_variable(out, "HUGIFY_TEXT", "%s", options_text_name(settings->text));
  if (ok && settings->verbose) ok = printed_variable(out, "HUGIFY_VERBOSE", "1");
  if (!ok) return fail(EXIT_PRIVILEGE, command, "out of memory for the environment");
  out->unset[out->unset_count++] = "HUGIFY_REPORT"; /* a stale one is not inherited; see run_environment_add_report */
  return EXIT_DONE;
}

int run_report_check(const char *command, const char *report, enum safe_file_kind *kind) {
  /* The report's file rules (safe_file.h) checked now rather than found at the end: a link is never
   * written through, a directory or block device never written; a character device or FIFO named here is. */
  *kind = SAFE_FILE_ABSENT;
  if (strcmp(report, "-") == 0) return EXIT_DONE;
  return output_file_check(report, command, "--report", "or use --report - [--json] for stderr", kind);
}

int run_environment_add_report(const char *command, struct run_environment *environment, const char *report) {
  char path[2 * PATH_MAX + 2];
  if (strcmp(report, "-") == 0 || report[0] == '/') {
    snprintf(path, sizeof path, "%s", report);
  } else {
    /* Relative to where hugify was started: the program (or the service) may run elsewhere. */
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return fail(EXIT_USAGE, command, "cannot resolve --report %s: %s", report, strerror(errno));
    snprintf(path, sizeof path, "%s/%s", cwd, report);
  }
  struct hugify_options options;
  if (strlen(path) >= sizeof options.report) return usage_error(command, "--report: the path is too long");
  enum safe_file_kind kind;
  int rc = run_report_check(command, path, &kind);
  if (rc != EXIT_DONE) return rc;
  environment->unset_count = 0;
  if (!printed_variable(environment, "HUGIFY_REPORT", "%s", path))
    return fail(EXIT_PRIVILEGE, command, "out of memory for the environment");
  return EXIT_DONE;
}

int run_environment_apply(const char *command, const struct run_environment *environment) {
  for (unsigned i = 0; i < environment->count; i++)
    if (setenv(environment->variables[i].name, environment->variables[i].value, 1) != 0)
      return fail(EXIT_PRIVILEGE, command, "cannot set %s (%zu bytes): %s", environment->variables[i].name,
                  strlen(environment->variables[i].value), strerror(errno));
  for (unsigned i = 0; i < environment->unset_count; i++) unsetenv(environment->unset[i]);
  return EXIT_DONE;
}

const char *run_environment_get(const struct run_environment *environment, const char *name) {
  for (unsigned i = 0; i < environment->count; i++)
    if (strcmp(environment->variables[i].name, name) == 0) return environment->variables[i].value;
  return NULL;
}

void run_environment_free(struct run_environment *environment) {
  for (unsigned i = 0; i < environment->count; i++) free(environment->variables[i].value);
  environment->count = 0;
}

void run_program_elf(const char *binary, struct run_program_elf *out) {
  memset(out, 0, sizeof *out);
  size_t size = 0;
  void *image = NULL;
  struct hugify_elf_info elf;
  bool mapped = elf_map_file(binary, &image, &size) == 0; /* one mapping for all the questions */
  out->go = mapped && elf_is_go(image, size);
  bool parsed = mapped && hugify_elf_parse(image, size, &elf) == 0;
  elf_unmap(image, size);
  out->libc = parsed ? elf_libc_of_interpreter(elf.interpreter) : ELF_LIBC_GLIBC;
  if (parsed) snprintf(out->interpreter, sizeof out->interpreter, "%s", elf.interpreter);
  /* Go's runtime maps its heap with its own system calls, and a static program has no loader to read
   * LD_PRELOAD: nothing run sets reaches them */
  if (parsed && !elf.interpreter[0])
    out->outside = out->go ? "a statically linked Go program" : "statically linked (no program interpreter)";
  else if (out->libc == ELF_LIBC_OTHER)
    out->outside = "of a C library hugify has no preload for";
}
