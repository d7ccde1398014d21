/* run.c - hugify run: start a program with libhugify-preload.so and the heap settings of a mode, then get
 * out of the way: the program replaces hugify (exec), so its pid, exit status, signals, stdin and stdout
 * are its own. Everything that happens inside the program is the preload's (src/preload). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli.h"
#include "options.h"
#include "os.h"
#include "probe.h"
#include "run_tree.h"
#include "safe_file.h"

const char usage_run[] =
    "usage: hugify run [--text on|off] [--heap auto|thp|hugetlb|off|mimalloc|jemalloc]\n"
    "                  [--report FILE|-] [--json[=FILE]] [--verbose] [--] CMD [ARGS...]\n"
    "\n"
    "Run CMD with its heap and its code on huge pages, without changing it. CMD replaces hugify (same pid,\n"
    "same exit status, stdout untouched); its children inherit the settings.\n"
    "\n"
    "  --heap auto      (default) transparent huge pages for all of malloc: glibc.malloc.hugetlb=1 with\n"
    "                   top_pad=64M and mmap_threshold=32M merged into GLIBC_TUNABLES (thread arenas too),\n"
    "                   plus 2 MiB-aligned, advised mmap() for other allocators and runtimes. Falls back\n"
    "                   to hugetlb when THP is 'never' and the 2 MiB pool has free pages.\n"
    "  --heap thp       the same, without the hugetlb fallback\n"
    "  --heap hugetlb   glibc.malloc.hugetlb=2: malloc from the 2 MiB hugetlb pool (checked first),\n"
    "                   normal pages when it runs short; the shortfall is in the report\n"
    "  --heap mimalloc  preload mimalloc with MIMALLOC_LARGE_OS_PAGES=1, MIMALLOC_EAGER_COMMIT_DELAY=0\n"
    "                   (Debian: libmimalloc2.0)\n"
    "  --heap jemalloc  preload jemalloc with MALLOC_CONF=thp:always,metadata_thp:always (Debian: libjemalloc2)\n"
    "  --heap off       leave the heap alone\n"
    "  --text on|off    copy the program's code and its shared objects' onto huge pages (default on)\n"
    "  --report FILE    at exit, write a JSON report (schema hugify.report/2, docs/run.md) to FILE;\n"
    "                   child processes write FILE.<pid>\n"
    "  --report -       the report of CMD as text on stderr (stdout is CMD's)\n"
    "  --json           the report of CMD as JSON on stderr, instead of the text (--report - --json)\n"
    "  --json=FILE      the same as --report FILE\n"
    "  --verbose        one stderr line per fallback inside the program, and what hugify set up\n"
    "\n"
    "Exit status: CMD's own; 127 when CMD is not found, 126 when it cannot be executed; 2 bad usage;\n"
    "3 when --heap mimalloc/jemalloc names an allocator that is not installed, or the preload is missing.\n"
    "\n"
    "Examples:\n"
    "  hugify run -- ./server --port 8080\n"
    "  hugify run --report - -- python3 train.py\n"
    "  hugify run --heap jemalloc --report /tmp/r.json -- ./bench\n";

#define PRELOAD_NAME "libhugify-preload.so"

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

/* Old-style variables glibc reads as the same tunables: when the user set one, theirs stays. */
static const char *tunable_alias(const char *key) {
  if (strcmp(key, "glibc.malloc.top_pad") == 0) return "MALLOC_TOP_PAD_";
  if (strcmp(key, "glibc.malloc.mmap_threshold") == 0) return "MALLOC_MMAP_THRESHOLD_";
  return NULL;
}

struct run_args {
  bool text, verbose, json;
  enum heap_mode heap;
  const char *report;
  char **command; /* NULL-terminated */
};

static int parse_args(int argc, char **argv, struct run_args *args) {
  *args = (struct run_args){.text = true, .heap = HEAP_AUTO};
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) { i++; break; }
    if (a[0] != '-') break;
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) args->verbose = true;
    else if (strcmp(a, "--json") == 0) args->json = true;
    else if (strncmp(a, "--json=", 7) == 0) {
      /* --json=FILE is --report FILE; --json=- is --json */
      if (!a[7]) return usage_error("run", "--json=FILE needs a file name");
      if (strcmp(a + 7, "-") == 0) args->json = true;
      else if (args->report) return usage_error("run", "one report: --report or --json=FILE, not both");
      else args->report = a + 7;
    }
    else if (strcmp(a, "--text") == 0) {
      if (!value || (strcmp(value, "on") != 0 && strcmp(value, "off") != 0))
        return usage_error("run", "--text takes on or off");
      args->text = strcmp(value, "on") == 0;
      i++;
    } else if (strcmp(a, "--heap") == 0) {
      if (!value || !options_parse_heap(value, &args->heap))
        return usage_error("run", "--heap takes auto, thp, hugetlb, off, mimalloc or jemalloc");
      i++;
    } else if (strcmp(a, "--report") == 0) {
      /* `run --report -- CMD`: "--" is where the command starts, never a file name */
      if (!value || !value[0] || (value[0] == '-' && value[1]))
        return usage_error("run", "--report takes a file name or -%s%s%s", value ? ", not '" : "", value ? value : "",
                           value ? "'" : "");
      if (args->report) return usage_error("run", "one report: --report or --json=FILE, not both");
      args->report = value;
      i++;
    } else {
      return usage_error("run", "unknown option '%s'", a);
    }
  }
  if (i >= argc) return usage_error("run", "no command given");
  if (args->json && !args->report) args->report = "-";
  args->command = argv + i;
  return EXIT_DONE;
}

/* ---- finding things --------------------------------------------------------------------------- */

/* The file execvp would run for `name`: "" when there is none; *not_executable when one exists but is
 * not executable (execvp's EACCES). */
static void find_command(const char *name, char *out, size_t cap, bool *not_executable) {
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

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* libhugify-preload.so: HUGIFY_PRELOAD_PATH, else next to the binary (installed: PREFIX/bin/../LIBDIR,
 * build tree: build/bin/../lib). */
static bool find_preload(const struct hugify_options *options, char *out, size_t cap) {
  if (options->preload_path[0]) {
    if (!realpath(options->preload_path, out) || !is_file(out)) return false;
    return true;
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
    char candidate[PATH_MAX * 2];
    snprintf(candidate, sizeof candidate, "%s/%s", self, relative[i]);
    if (is_file(candidate) && realpath(candidate, out) && strlen(out) < cap) return true;
  }
  return false;
}

/* The allocator library of --heap mimalloc|jemalloc in HUGIFY_ALLOCATOR_DIRS when set, else in the usual
 * Debian and other library directories. */
static bool find_allocator(const struct hugify_options *options, const char *file, char *out, size_t cap) {
  if (options->allocator_dirs[0]) {
    for (const char *dir = options->allocator_dirs; *dir;) {
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

/* ---- what the dynamic loader will do with the program --------------------------------------------- */

/* "#!/bin/sh -e" -> "/bin/sh". False when the file is not a script. */
static bool script_interpreter(const char *path, char *out, size_t cap) {
  char line[256];
  int fd = safe_file_open_read(path, true); /* a FIFO named as CMD must not hang hugify */
  if (fd < 0) return false;
  ssize_t n = read(fd, line, sizeof line - 1);
  close(fd);
  if (n < 3 || line[0] != '#' || line[1] != '!') return false;
  line[n] = '\0';
  char *p = line + 2;
  while (*p == ' ' || *p == '\t') p++;
  size_t length = strcspn(p, " \t\n");
  if (length == 0 || length >= cap) return false;
  memcpy(out, p, length);
  out[length] = '\0';
  return true;
}

/* Why the loader would run the file in secure mode (AT_SECURE), dropping LD_PRELOAD and GLIBC_TUNABLES;
 * NULL when it would not. */
static const char *secure_execution(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return NULL;
  if ((st.st_mode & S_ISUID) && st.st_uid != geteuid()) return "setuid";
  if ((st.st_mode & S_ISGID) && st.st_gid != getegid()) return "setgid";
  if (getxattr(path, "security.capability", NULL, 0) > 0) return "given file capabilities";
  return NULL;
}

/* Say what cannot work for this program (it still runs: the user asked for it). */
static void check_program(const char *command, const char *path) {
  char interpreter[PATH_MAX];
  const char *binary = path;
  if (script_interpreter(path, interpreter, sizeof interpreter)) binary = interpreter;
  const char *secure = secure_execution(binary);
  if (secure) {
    fail(EXIT_SHORT, "run",
         "%s is %s: the dynamic loader drops LD_PRELOAD and GLIBC_TUNABLES for it, so it runs without huge pages "
         "and without a report (run it as its owner, or drop the bit to try huge pages)",
         binary, secure);
    return;
  }
  struct hugify_elf_info elf;
  if (hugify_elf_read(binary, &elf) == 0 && !elf.interpreter[0]) {
    fail(EXIT_SHORT, "run",
         "%s is statically linked (no program interpreter): LD_PRELOAD is ignored, so there is no text remap, "
         "no mmap cover and no report; glibc's malloc tunables still apply. Use libhugify in the program "
         "(hugify_alloc, hugify_remap_text; link with -lhugify) or relink it dynamically",
         binary == path ? command : binary);
  }
}

/* ---- the environment ------------------------------------------------------------------------------ */

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

/* Append key=value to a separated list unless the list (or the old-style alias variable) has the key:
 * what the user set always wins. */
static void merge_setting(char *list, size_t cap, char separator, char assign, const char *key, const char *value,
                          bool verbose, const char *variable) {
  size_t length;
  const char *theirs = find_setting(list, separator, assign, key, &length);
  if (theirs) {
    if (verbose)
      fprintf(stderr, "hugify run: %s already sets %.*s; kept (hugify would set %s%c%s)\n", variable, (int)length,
              theirs, key, assign, value);
    return;
  }
  const char *alias = tunable_alias(key);
  if (alias && getenv(alias)) {
    if (verbose) fprintf(stderr, "hugify run: %s is set; kept (hugify would set %s=%s)\n", alias, key, value);
    return;
  }
  size_t used = strlen(list);
  if (used && used + 1 < cap) list[used++] = separator;
  snprintf(list + used, cap - used, "%s%c%s", key, assign, value);
}

/* GLIBC_TUNABLES is "key=value:key=value", MALLOC_CONF "key:value,key:value". */
static void merge_variable(const char *variable, char separator, char assign, const char *const pairs[][2],
                           size_t count, bool verbose) {
  const char *existing = getenv(variable);
  size_t cap = (existing ? strlen(existing) : 0) + 1; /* sized for everything: never a cut entry */
  for (size_t i = 0; i < count; i++) cap += strlen(pairs[i][0]) + strlen(pairs[i][1]) + 2;
  char *list = malloc(cap);
  if (!list) { fail(EXIT_SHORT, "run", "out of memory for %s", variable); return; }
  snprintf(list, cap, "%s", existing ? existing : "");
  for (size_t i = 0; i < count; i++) merge_setting(list, cap, separator, assign, pairs[i][0], pairs[i][1], verbose, variable);
  setenv(variable, list, 1);
  free(list);
}

static void set_default(const char *variable, const char *value) { setenv(variable, value, 0); }

/* LD_PRELOAD: the allocator first (its malloc must win), then what was there, then the preload. */
static int set_preload(const char *allocator, const char *preload) {
  const char *existing = getenv("LD_PRELOAD");
  if (existing && !existing[0]) existing = NULL;
  bool add_preload = !existing || !strstr(existing, preload);
  char *list = NULL; /* as long as it needs to be: the user's entries are never cut, ours never dropped */
  if (asprintf(&list, "%s%s%s%s%s", allocator ? allocator : "", allocator && existing ? ":" : "",
               existing ? existing : "", (allocator || existing) && add_preload ? ":" : "",
               add_preload ? preload : "") < 0)
    return fail(EXIT_PRIVILEGE, "run", "out of memory for LD_PRELOAD");
  int rc = setenv("LD_PRELOAD", list, 1) == 0 ? EXIT_DONE
           : fail(EXIT_PRIVILEGE, "run", "cannot set LD_PRELOAD (%zu bytes): %s", strlen(list), strerror(errno));
  free(list);
  return rc;
}

static uint64_t free_2m_pages(void) {
  struct hugify_hugetlb_size pool;
  if (os_hugetlb_read(OS_HUGE_2M, &pool) != 0) return 0;
  return pool.available;
}

/* The heap mode as it will run, after what this machine offers: THP 'never' and the pool. */
static enum heap_mode settle_heap_mode(enum heap_mode heap) {
  if (heap != HEAP_AUTO && heap != HEAP_THP && heap != HEAP_HUGETLB) return heap;
  char thp[16];
  probe_thp_setting("enabled", thp, sizeof thp);
  bool thp_usable = thp[0] && strcmp(thp, "never") != 0;
  uint64_t pool = free_2m_pages();
  if (heap == HEAP_HUGETLB) {
    if (pool == 0)
      fail(EXIT_SHORT, "run",
           "--heap hugetlb: the 2 MiB hugetlb pool has no free pages, so malloc will use normal pages; reserve "
           "some first (hugify pool, or: echo N > " OS_SYSFS_HUGEPAGES "/hugepages-2048kB/nr_hugepages)");
    return heap;
  }
  if (thp_usable) return heap;
  const char *fix = "change with: echo madvise > " OS_SYSFS_THP "/enabled (or boot with transparent_hugepage=madvise)";
  if (heap == HEAP_AUTO && pool > 0) {
    fail(EXIT_SHORT, "run", "transparent huge pages are %s on this machine; using the hugetlb pool for the heap "
         "(%llu free 2 MiB pages) instead; %s", thp[0] ? "'never'" : "not built in", (unsigned long long)pool, fix);
    return HEAP_HUGETLB;
  }
  fail(EXIT_SHORT, "run", "transparent huge pages are %s on this machine, so the heap stays on normal pages; %s",
       thp[0] ? "'never'" : "not built in", fix);
  return heap == HEAP_AUTO ? HEAP_OFF : heap;
}

int cmd_run(int argc, char **argv) {
  struct run_args args;
  int rc = parse_args(argc, argv, &args);
  if (rc != EXIT_DONE) return rc;

  char path[PATH_MAX];
  bool not_executable;
  find_command(args.command[0], path, sizeof path, &not_executable);
  if (!path[0]) {
    fprintf(stderr, "hugify run: %s: command not found\n", args.command[0]);
    return 127;
  }
  if (not_executable) {
    fprintf(stderr, "hugify run: %s: permission denied (not executable)\n", path);
    return 126;
  }

  struct hugify_options options;
  char warnings[1024] = "";
  options_from_environment(&options, warnings, sizeof warnings); /* the preload warns about bad values */
  char preload[PATH_MAX];
  if (!find_preload(&options, preload, sizeof preload))
    return fail(EXIT_PRIVILEGE, "run",
                "cannot find %s (looked at HUGIFY_PRELOAD_PATH, then next to this hugify binary: %s); reinstall "
                "hugify or set HUGIFY_PRELOAD_PATH", PRELOAD_NAME, HUGIFY_PRELOAD_RELATIVE);
  if (strpbrk(preload, ": "))
    return fail(EXIT_PRIVILEGE, "run", "%s: LD_PRELOAD cannot hold a path with ':' or spaces; install hugify elsewhere",
                preload);

  enum heap_mode heap = settle_heap_mode(args.heap);
  char allocator[PATH_MAX];
  bool have_allocator = false;
  if (heap == HEAP_MIMALLOC || heap == HEAP_JEMALLOC) {
    bool mimalloc = heap == HEAP_MIMALLOC;
    if (!find_allocator(&options, mimalloc ? "libmimalloc.so.2" : "libjemalloc.so.2", allocator, sizeof allocator))
      return fail(EXIT_PRIVILEGE, "run", "--heap %s: %s is not installed; install it with: apt-get install %s",
                  options_heap_name(heap), mimalloc ? "libmimalloc.so.2" : "libjemalloc.so.2",
                  mimalloc ? "libmimalloc2.0" : "libjemalloc2");
    have_allocator = true;
  }
  check_program(args.command[0], path);

  if (heap == HEAP_AUTO || heap == HEAP_THP)
    merge_variable("GLIBC_TUNABLES", ':', '=', thp_tunables, sizeof thp_tunables / sizeof thp_tunables[0], args.verbose);
  else if (heap == HEAP_HUGETLB)
    merge_variable("GLIBC_TUNABLES", ':', '=', hugetlb_tunables, 1, args.verbose);
  else if (heap == HEAP_MIMALLOC) {
    /* Large OS pages alone left the first segments of each thread (eager_commit_delay) unadvised:
     * 46% of a 2-thread heap on huge pages here; with the delay off, 99.9%. */
    set_default("MIMALLOC_LARGE_OS_PAGES", "1");
    set_default("MIMALLOC_EAGER_COMMIT_DELAY", "0");
  } else if (heap == HEAP_JEMALLOC) {
    static const char *const conf[][2] = {{"thp", "always"}, {"metadata_thp", "always"}};
    merge_variable("MALLOC_CONF", ',', ':', conf, 2, args.verbose);
  }
  rc = set_preload(have_allocator ? allocator : NULL, preload);
  if (rc != EXIT_DONE) return rc;
  setenv("HUGIFY_HEAP", options_heap_name(heap), 1);
  setenv("HUGIFY_TEXT", args.text ? "1" : "0", 1);
  if (args.verbose) setenv("HUGIFY_VERBOSE", "1", 1);
  char number[32];
  snprintf(number, sizeof number, "%d", (int)getpid()); /* CMD keeps this pid, or run_tree_run sets the child's */
  setenv("HUGIFY_RUN_PID", number, 1);
  /* With a report, every process of the tree writes its own into a private directory; hugify run stays as
   * CMD's parent, like `time` and `perf stat`, and sums them when CMD has ended (run_tree.c). */
  char report_dir[PATH_MAX] = "";
  if (args.report) {
    /* The report's file rules (safe_file.h) checked now rather than found at the end: a link is never
     * written through, a directory or block device never written; a character device or FIFO named here is. */
    enum safe_file_kind kind = strcmp(args.report, "-") == 0 ? SAFE_FILE_ABSENT : safe_file_kind(args.report);
    if (kind == SAFE_FILE_LINK)
      return usage_error("run", "--report %s is a symbolic link: hugify never writes a report through a link "
                         "(name the file itself, or use --report - [--json] for stderr)", args.report);
    if (kind == SAFE_FILE_OTHER)
      return usage_error("run", "--report %s is a directory, block device or socket, not a file", args.report);
    /* A stale report must not pass for this run's; only a regular file is removed (never /dev/null). */
    if (kind == SAFE_FILE_REGULAR) unlink(args.report);
    const char *tmp = getenv("TMPDIR");
    snprintf(report_dir, sizeof report_dir, "%s/hugify-run.XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp");
    if (!mkdtemp(report_dir))
      return fail(EXIT_PRIVILEGE, "run", "cannot make a directory for the reports (%s): %s; set TMPDIR to a "
                  "writable directory", report_dir, strerror(errno));
    char per_process[PATH_MAX + 32];
    snprintf(per_process, sizeof per_process, "%s/process.json", report_dir);
    setenv("HUGIFY_REPORT", per_process, 1);
    unsetenv("HUGIFY_REPORT_JSON");
  } else {
    unsetenv("HUGIFY_REPORT");
  }
  if (args.verbose) {
    const char *shown[] = {"LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_CONF", "MIMALLOC_LARGE_OS_PAGES",
                           "MIMALLOC_EAGER_COMMIT_DELAY", "HUGIFY_HEAP",
                           "HUGIFY_TEXT", "HUGIFY_REPORT"};
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++)
      if (getenv(shown[i])) fprintf(stderr, "hugify run: %s=%s\n", shown[i], getenv(shown[i]));
  }
  fflush(stderr);
  if (args.report) return run_tree_run(path, args.command, report_dir, args.report, args.json);
  execv(path, args.command);
  int err = errno;
  fprintf(stderr, "hugify run: %s: %s\n", path, strerror(err));
  return err == ENOENT ? 127 : 126;
}
