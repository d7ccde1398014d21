/* SPDX-License-Identifier: MIT */
/* run.c - hugify run: start a program with libhugify-preload.so and the heap settings of a mode, then get
 * out of the way: the program replaces hugify (exec), so its pid, exit status, signals, stdin and stdout
 * are its own. Everything that happens inside the program is the preload's (src/preload). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli.h"
#include "elf_image.h"
#include "run_env.h"
#include "options.h"
#include "os.h"
#include "probe.h"
#include "procfs.h"
#include "run_outside.h"
#include "run_tree.h"
#include "safe_file.h"

struct run_args {
  struct run_settings settings; /* first (run_env.h): --heap, --text, --report, --verbose, shared with `hugify env` */
  struct json_output json;      /* --json: the report as JSON on stderr; --json=FILE: --report FILE */
  bool json_report;
  char **command;               /* NULL-terminated */
};
_Static_assert(offsetof(struct run_args, settings) == 0, "the run option callbacks take the struct as its settings");

static const struct option_spec run_options[] = {
    OPT_GROUP("Options"),
    RUN_SETTINGS_OPTIONS(struct run_args),
    OPT_JSON(struct run_args, json,
             "the report of CMD as JSON on stderr, instead of the text (--report - --json);\n"
             "--json=FILE: the same as --report FILE"),
    OPT_END,
};

const struct command_help help_run = {
    "usage: hugify run [--text auto|on|off] [--heap auto|thp|hugetlb|off|mimalloc|jemalloc|tcmalloc]\n"
    "                  [--report FILE|-] [--json[=FILE]] [--verbose] [--] CMD [ARGS...]\n"
    "\n"
    "Run CMD with its heap and its code on huge pages, without changing it. CMD replaces hugify (same pid,\n"
    "same exit status, stdout untouched); its children inherit the settings.\n"
    "\n",
    run_options,
    "\n"
    "Heap modes (--heap):\n"
    "  auto      (default) transparent huge pages for all of malloc: glibc.malloc.hugetlb=1 with\n"
    "            top_pad=64M and mmap_threshold=32M merged into GLIBC_TUNABLES (thread arenas too),\n"
    "            plus 2 MiB-aligned, advised mmap() for other allocators and runtimes. Falls back\n"
    "            to hugetlb when THP is 'never' and the 2 MiB pool has free pages.\n"
    "  thp       the same, without the hugetlb fallback\n"
    "  hugetlb   glibc.malloc.hugetlb=2: malloc from the 2 MiB hugetlb pool (checked first),\n"
    "            normal pages when it runs short; the shortfall is in the report\n"
    "  mimalloc  preload mimalloc with MIMALLOC_LARGE_OS_PAGES=1, MIMALLOC_EAGER_COMMIT_DELAY=0\n"
    "            (Debian 12: libmimalloc2.0; not Debian 13's mimalloc 3)\n"
    "  jemalloc  preload jemalloc with MALLOC_CONF=thp:always,metadata_thp:always (Debian: libjemalloc2)\n"
    "  tcmalloc  preload gperftools' TCMalloc with TCMALLOC_SKIP_SBRK=true, TCMALLOC_RELEASE_RATE=0; its\n"
    "            mmap()s 2 MiB-aligned and advised (Debian: libtcmalloc-minimal4)\n"
    "  off       leave the heap alone\n"
    "\n"
    "The code (--text): auto (the default) copies the program's code and its shared objects' onto huge\n"
    "pages once the process has used 200 ms of CPU (HUGIFY_TEXT_AFTER_MS): the copy costs ~0.8 ms per\n"
    "2 MiB and pays off only in a long run, so a short program (a compile: 15 ms) never pays it; g++ -c\n"
    "of a small file costs 1.0x plain CPU this way, 1.2x with --text on (the copy before main).\n"
    "\n"
    "The preload is chosen by CMD's interpreter: glibc's, or libhugify-preload-musl.so for a musl program\n"
    "(Alpine); a program of another C library runs without one, said on stderr.\n"
    "\n"
    "Static programs (Go, musl or glibc -static, static-pie) and those of another C library: nothing can be\n"
    "preloaded, so hugify run stays CMD's parent and collapses its tree's anonymous memory from outside while\n"
    "it runs, as hugify agent does: a pass a second, the gentle pace, the bloat guard (50 % of a window\n"
    "present), at most half of one core; it needs CAP_SYS_NICE. The report's \"outside\" says what it\n"
    "collapsed, what the guard left, the pauses and the CPU it cost.\n"
    "\n"
    "Programs built with a sanitizer: ASAN_OPTIONS gets verify_asan_link_order=0 in front (the user's own\n"
    "setting wins), the report names the sanitizer's allocator, --heap mimalloc|jemalloc|tcmalloc is refused.\n"
    "\n"
    "Exit status: CMD's own; 127 when CMD is not found, 126 when it cannot be executed; 2 bad usage (also\n"
    "--heap mimalloc|jemalloc|tcmalloc for a program built with a sanitizer, a musl or a static program);\n"
    "3 when --heap mimalloc/jemalloc/tcmalloc names an allocator that is not installed, or the preload is missing.\n"
    "\n"
    "Examples:\n"
    "  hugify run -- ./server --port 8080\n"
    "  hugify run --report - -- python3 train.py\n"
    "  hugify run --heap jemalloc --report /tmp/r.json -- ./bench\n",
};

static int parse_args(int argc, char **argv, struct run_args *args) {
  *args = (struct run_args){0};
  run_settings_default(&args->settings);
  struct option_result result;
  int rc = parse_command_options("run", run_options, OPTIONS_THEN_COMMAND, argc, argv, args, &result);
  if (rc != EXIT_DONE) return rc;
  if (result.command >= argc) return usage_error("run", "no command given");
  if ((rc = run_settings_take_json("run", &args->settings, &args->json, &args->json_report)) != EXIT_DONE) return rc;
  args->command = argv + result.command;
  return EXIT_DONE;
}

/* ---- finding things --------------------------------------------------------------------------- */

/* ---- what the dynamic loader will do with the program --------------------------------------------- */

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

/* A Go program, and one of another C library: what reaches their memory. *libc: the program's C library;
 * *outside: why nothing can be preloaded into it (run then collapses its memory from outside), or NULL. */
static void check_static_and_go(const char *shown, const char *binary, enum elf_libc *libc, const char **outside) {
  struct run_program_elf elf;
  run_program_elf(binary, &elf);
  *libc = elf.libc;
  *outside = elf.outside;
  if (elf.libc == ELF_LIBC_OTHER && elf.interpreter[0])
    fail(EXIT_SHORT, "run", "%s: its program interpreter %s is neither glibc's (ld-linux) nor musl's (ld-musl): "
         "hugify has no preload for its C library (no mmap cover, no text remap)", shown, elf.interpreter);
  else if (elf.go && !elf.outside)
    /* Measured (docs/runtimes.md, Go): with cgo the runtime commits its arenas through the C library's mmap
     * (runtime/cgo routes mmap there on linux amd64, arm64 and loong64), which the cover advises; it exits
     * by exit_group, never through libc's exit, so the preload's report is never written. */
    fail(EXIT_SHORT, "run",
         "%s is a Go program: its heap is the Go runtime's own (malloc's tunables do not reach it; built with cgo "
         "on amd64 or arm64 it maps its arenas through the C library, which the mmap cover advises), and it ends "
         "without the C library's exit, so it writes no report: see its memory with hugify inspect PID while it "
         "runs. For a Go program's heap whatever its build: hugify collapse PID, or hugify agent --comm NAME "
         "(docs/runtimes.md, Go)", shown);
}

/* Whether this process may collapse another's memory (process_madvise needs CAP_SYS_NICE) and the kernel
 * takes MADV_COLLAPSE from another process: "" when it may, else why not and the fix. */
static void outside_allowed(char *reason, size_t cap) {
  reason[0] = '\0';
  char *status = NULL;
  size_t length;
  uint64_t effective = 0;
  if (os_read_file("/proc/self/status", &status, &length) == 0) parse_capabilities(status, &effective);
  free(status);
  if (!(effective & (UINT64_C(1) << 23))) /* CAP_SYS_NICE */
    snprintf(reason, cap, "collapsing another process's memory (process_madvise) needs CAP_SYS_NICE: run hugify "
             "as root, or setcap cap_sys_nice+ep $(command -v hugify)");
  else
    probe_require(PROBE_PROCESS_MADVISE_COLLAPSE, reason, cap);
}

/* Say what cannot work for this program (it still runs: the user asked for it); EXIT_USAGE (printed) for
 * what would break it. *libc: its C library, which chooses the preload (run_environment_build). */
static int check_program(const char *command, const char *path, enum heap_mode heap, enum elf_libc *libc,
                         const char **outside) {
  *libc = ELF_LIBC_GLIBC;
  *outside = NULL;
  char interpreter[PATH_MAX];
  const char *binary = path;
  if (run_script_interpreter(path, false, interpreter, sizeof interpreter)) binary = interpreter;
  const char *secure = secure_execution(binary);
  if (secure) {
    fail(EXIT_SHORT, "run",
         "%s is %s: the dynamic loader drops LD_PRELOAD and GLIBC_TUNABLES for it, so it runs without huge pages "
         "and without a report (run it as its owner, or drop the bit to try huge pages)",
         binary, secure);
    return EXIT_DONE;
  }
  /* CMD's own name: Debian's valgrind is a shell script that execs valgrind.bin */
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  if (strncmp(name, "valgrind", 8) == 0) /* runs, exit status kept (tested); it gets nothing from huge pages */
    fail(EXIT_SHORT, "run",
         "under valgrind the program's code runs translated by valgrind and its malloc is valgrind's (memcheck and "
         "the other tools that replace it): neither is put on huge pages, only the program's own large mmaps are%s. "
         "Measure huge pages without valgrind (docs/run.md)",
         options_heap_is_engine(heap) ? "; and memcheck does not replace a preloaded mimalloc, jemalloc or "
         "tcmalloc (valgrind --soname-synonyms=somalloc=...), so it would not check the heap" : "");
  const char *owner = options_heap_is_engine(heap) ? run_program_heap_owner(binary) : NULL;
  if (owner)
    /* Measured: gcc's ASan and TSan programs died of SIGSEGV with mimalloc or jemalloc preloaded; clang's
     * static runtimes keep their own malloc, so the allocator would only be loaded, unused. */
    return usage_error("run", "--heap %s: %s is built with %s, which brings its own malloc: a preloaded %s "
                       "would replace it and crash the program (or, linked statically, go unused). Use --heap auto "
                       "(the sanitizer's heap stays its own; the report says so)", options_heap_name(heap),
                       binary, owner, options_heap_name(heap));
  check_static_and_go(binary == path ? command : binary, binary, libc, outside);
  if (options_heap_is_engine(heap) && *outside)
    return usage_error("run", "--heap %s: %s is %s: no allocator can be preloaded into it. Use --heap auto (its "
                       "memory is collapsed from outside while it runs)", options_heap_name(heap), binary, *outside);
  if (options_heap_is_engine(heap) && (*libc == ELF_LIBC_MUSL || *libc == ELF_LIBC_OTHER))
    /* Debian's allocator libraries are linked against glibc: musl's loader stops the program, exit 127, on
     * their glibc-only symbols. */
    return usage_error("run", "--heap %s: %s runs on %s, and the allocator libraries hugify preloads are built "
                       "for glibc: preloaded, one would stop the program from starting. Use --heap auto",
                       options_heap_name(heap), binary, *libc == ELF_LIBC_MUSL ? "musl" : "a C library other than glibc");
  return EXIT_DONE;
}

/* A program nothing can be preloaded into: say what happens to it, and whether its memory is collapsed from
 * outside (NULL: it is exec'd as it is). */
static struct run_outside *start_outside(const char *shown, const char *why, enum heap_mode heap) {
  if (heap == HEAP_OFF) {
    fail(EXIT_SHORT, "run", "%s is %s: nothing can be preloaded into it, and --heap off leaves its memory alone: "
         "it runs as it is", shown, why);
    return NULL;
  }
  char reason[HUGIFY_REASON_MAX];
  outside_allowed(reason, sizeof reason);
  struct run_outside *outside = reason[0] ? NULL : run_outside_new(why);
  if (outside)
    fail(EXIT_SHORT, "run", "%s is %s: nothing can be preloaded into it (no text remap, no mmap cover); hugify run "
         "stays its parent and collapses its anonymous memory from outside while it runs, as hugify agent would "
         "(docs/run.md, Static programs)", shown, why);
  else
    fail(EXIT_SHORT, "run", "%s is %s: nothing can be preloaded into it, and its memory cannot be collapsed from "
         "outside: %s; it runs without huge pages", shown, why, reason[0] ? reason : "out of memory");
  return outside;
}

/* --verbose: the environment CMD starts with. The HUGIFY_* settings as options.c reads them, like every
 * reader of HUGIFY_* (the preload reads the same values). */
static void print_environment(void) {
  static const char *const shown[] = {"LD_PRELOAD", "ASAN_OPTIONS", "GLIBC_TUNABLES", "MALLOC_CONF",
                                      "MIMALLOC_LARGE_OS_PAGES", "MIMALLOC_EAGER_COMMIT_DELAY", "TCMALLOC_SKIP_SBRK",
                                      "TCMALLOC_RELEASE_RATE"};
  for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++)
    if (getenv(shown[i])) fprintf(stderr, "hugify run: %s=%s\n", shown[i], getenv(shown[i]));
  static struct hugify_options options; /* large: off the stack */
  char warnings[512] = "";
  options_from_environment(&options, warnings, sizeof warnings); /* a bad value is the preload's to warn of */
  fprintf(stderr, "hugify run: HUGIFY_HEAP=%s\n", options_heap_name(options.heap));
  fprintf(stderr, "hugify run: HUGIFY_TEXT=%s\n", options_text_name(options.text));
  if (options.report[0]) fprintf(stderr, "hugify run: HUGIFY_REPORT=%s\n", options.report);
}

int cmd_run(int argc, char **argv) {
  struct run_args args;
  int rc = parse_args(argc, argv, &args);
  if (rc != EXIT_DONE) return rc;

  char path[PATH_MAX];
  bool not_executable;
  run_find_command(args.command[0], path, sizeof path, &not_executable);
  if (!path[0]) {
    fprintf(stderr, "hugify run: %s: command not found\n", args.command[0]);
    return 127;
  }
  if (not_executable) {
    fprintf(stderr, "hugify run: %s: permission denied (not executable)\n", path);
    return 126;
  }

  enum elf_libc libc;
  const char *static_why;
  if ((rc = check_program(args.command[0], path, args.settings.heap, &libc, &static_why)) != EXIT_DONE) return rc;
  static struct run_environment environment; /* large: off the stack */
  rc = run_environment_build("run", &args.settings, libc, path, &environment);
  if (rc == EXIT_DONE) rc = run_environment_apply("run", &environment);
  run_environment_free(&environment);
  if (rc != EXIT_DONE) return rc;
  char number[32];
  snprintf(number, sizeof number, "%d", (int)getpid()); /* CMD keeps this pid, or run_tree_run sets the child's */
  setenv("HUGIFY_RUN_PID", number, 1);
  /* With a report, every process of the tree writes its own into a private directory; hugify run stays as
   * CMD's parent, like `time` and `perf stat`, and sums them when CMD has ended (run_tree.c). */
  char report_dir[PATH_MAX] = "";
  const char *report = args.settings.report;
  if (report) {
    enum safe_file_kind kind;
    if ((rc = run_report_check("run", report, &kind)) != EXIT_DONE) return rc;
    /* A stale report must not pass for this run's; only a regular file is removed (never /dev/null). */
    if (kind == SAFE_FILE_REGULAR) unlink(report);
    const char *tmp = getenv("TMPDIR");
    snprintf(report_dir, sizeof report_dir, "%s/hugify-run.XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp");
    if (!mkdtemp(report_dir))
      return fail(EXIT_PRIVILEGE, "run", "cannot make a directory for the reports (%s): %s; set TMPDIR to a "
                  "writable directory", report_dir, strerror(errno));
    char per_process[PATH_MAX + 32];
    snprintf(per_process, sizeof per_process, "%s/process.json", report_dir);
    setenv("HUGIFY_REPORT", per_process, 1);
    unsetenv("HUGIFY_REPORT_JSON");
  }
  if (args.settings.verbose) print_environment();
  struct run_outside *outside = static_why ? start_outside(args.command[0], static_why, args.settings.heap) : NULL;
  fflush(stderr);
  if (outside) { /* stays CMD's parent: the collapse from outside goes on while it runs */
    struct run_watcher watcher = run_outside_watcher(outside);
    rc = run_tree_run(path, args.command, report ? report_dir : NULL, report, args.json_report, &watcher);
    run_outside_free(outside);
    return rc;
  }
  if (report) return run_tree_run(path, args.command, report_dir, report, args.json_report, NULL);
  execv(path, args.command);
  int err = errno;
  fprintf(stderr, "hugify run: %s: %s\n", path, strerror(err));
  return err == ENOENT ? 127 : 126;
}
