/* SPDX-License-Identifier: MIT */
/* run_tree.c - `hugify run --report`: every process of the command's tree reports (the preload writes one
 * hugify.report/2 per process into a private directory); this file reads them back with jansson and
 * writes one hugify.run/1 document: the sums over the tree in the same shape as one process's report
 * (so a reader finds "peak.allocated.huge_fraction" in either), the process that held the most memory,
 * and every process's own report under "processes". Or, for `--report -`, the same as a table. */
#include "run_tree.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os.h"
#include "safe_file.h"
#include "units.h"

static bool ends_with(const char *text, const char *suffix) {
  size_t n = strlen(text), m = strlen(suffix);
  return n >= m && strcmp(text + n - m, suffix) == 0;
}

/* The seconds that add up over processes: the time spent inside hugify. Not moments in time or intervals. */
static bool summed_seconds(const char *key) {
  return strcmp(key, "hugify_seconds") == 0 || strcmp(key, "sampler_cpu_seconds") == 0;
}

/* sum += value, member by member: bytes add up (every member of a `_bytes` object too, such as
 * not_huge_bytes), and so do summed_seconds; objects recurse; fractions are recomputed afterwards, anything
 * else (names, flags, lists, moments) is not summed. */
static void add_figures(json_t *sum, const json_t *value, bool all_bytes) {
  const char *key;
  json_t *member;
  json_object_foreach((json_t *)value, key, member) {
    json_t *into = json_object_get(sum, key);
    if (json_is_object(member)) {
      if (!into) json_object_set_new(sum, key, into = json_object());
      if (json_is_object(into)) add_figures(into, member, ends_with(key, "_bytes"));
    } else if (json_is_number(member) && (all_bytes || ends_with(key, "_bytes"))) {
      uint64_t add, had = 0; /* a figure that is not a count (negative, past 2^63) is not summed */
      if (!count_from_double(json_number_value(member), &add)) continue;
      if (json_is_number(into)) count_from_double(json_number_value(into), &had);
      json_object_set_new(sum, key, json_integer(add > INT64_MAX - had ? INT64_MAX : (json_int_t)(had + add)));
    } else if (json_is_number(member) && summed_seconds(key)) {
      double total = json_number_value(member) + (json_is_number(into) ? json_number_value(into) : 0);
      json_object_set_new(sum, key, json_real(total)); /* past DBL_MAX: json_real refuses, nothing is set */
    }
  }
}

static void recompute_fractions(json_t *object) {
  const char *key;
  json_t *member;
  json_object_foreach(object, key, member) if (json_is_object(member)) recompute_fractions(member);
  json_t *huge = json_object_get(object, "huge_bytes"), *resident = json_object_get(object, "resident_bytes");
  if (json_is_number(huge) && json_is_number(resident))
    json_object_set_new(object, "huge_fraction", json_number_value(resident) > 0
                                                     ? json_real(json_number_value(huge) / json_number_value(resident))
                                                     : json_null());
}

/* The count (bytes, a pid) at root.first[.second]: 0 when absent or not a count (count_from_double). */
static uint64_t count_at(const json_t *root, const char *first, const char *second) {
  const json_t *value = json_object_get(root, first);
  if (second) value = json_object_get(value, second);
  uint64_t count = 0;
  if (json_is_number(value)) count_from_double(json_number_value(value), &count);
  return count;
}

int run_tree_read(const char *dir, struct run_tree *tree, char *reason, size_t cap) {
  memset(tree, 0, sizeof *tree);
  tree->processes = json_array();
  DIR *d = opendir(dir);
  if (!d) {
    snprintf(reason, cap, "cannot read the reports in %s: %s", dir, strerror(errno));
    return -errno;
  }
  for (struct dirent *entry; (entry = readdir(d));) {
    if (entry->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
    json_error_t error;
    json_t *report = json_load_file(path, JSON_REJECT_DUPLICATES, &error);
    if (!json_is_object(report)) { /* a process killed while writing leaves no report, never half a one */
      tree->unreadable++;
      json_decref(report);
      continue;
    }
    json_array_append_new(tree->processes, report);
  }
  closedir(d);
  return 0;
}

void run_tree_free(struct run_tree *tree) { json_decref(tree->processes); }

/* ---- the document ----------------------------------------------------------------------------- */

/* Write a jansson value through the format layer's writer (the one place JSON is written). */
static void put_value(struct json_writer *j, const char *key, const json_t *value) {
  const char *member_key;
  json_t *member;
  size_t index;
  if (!value) { /* a member a report lacks (any process of the tree can write anything there) */
    json_put_null(j, key);
    return;
  }
  switch (json_typeof(value)) {
  case JSON_OBJECT:
    json_open_object(j, key);
    json_object_foreach((json_t *)value, member_key, member) put_value(j, member_key, member);
    json_close(j);
    break;
  case JSON_ARRAY:
    json_open_array(j, key);
    json_array_foreach(value, index, member) put_value(j, NULL, member);
    json_close(j);
    break;
  case JSON_STRING: json_put_string(j, key, json_string_value(value)); break;
  case JSON_INTEGER: json_put_i64(j, key, json_integer_value(value)); break;
  case JSON_REAL: json_put_double(j, key, json_real_value(value)); break;
  case JSON_TRUE: json_put_bool(j, key, true); break;
  case JSON_FALSE: json_put_bool(j, key, false); break;
  case JSON_NULL: json_put_null(j, key); break;
  }
}

/* The sums over the tree, in the shape of one report. */
static json_t *tree_sums(const struct run_tree *tree) {
  json_t *sums = json_object();
  size_t index;
  json_t *report;
  json_array_foreach(tree->processes, index, report) {
    json_t *figures = json_object();
    for (const char *key = "total\0classes\0peak\0not_huge_bytes\0"; *key; key += strlen(key) + 1)
      if (json_object_get(report, key)) json_object_set(figures, key, json_object_get(report, key));
    for (const char *key = "max_rss_bytes\0peak_memory_bytes\0hugify_seconds\0"; *key; key += strlen(key) + 1)
      if (json_object_get(report, key)) json_object_set(figures, key, json_object_get(report, key));
    add_figures(sums, figures, false);
    json_decref(figures);
  }
  recompute_fractions(sums);
  return sums;
}

/* The process that held the most memory (peak RSS + hugetlb). */
static const json_t *largest_process(const struct run_tree *tree) {
  const json_t *largest = NULL;
  size_t index;
  json_t *report;
  json_array_foreach(tree->processes, index, report)
    if (!largest || count_at(report, "peak_memory_bytes", NULL) > count_at(largest, "peak_memory_bytes", NULL))
      largest = report;
  return largest;
}

/* The processes' heap owners (a sanitizer's or valgrind's allocator), each once, joined by ", ": "" when
 * every heap was an ordinary allocator's. */
static void heap_owners(const struct run_tree *tree, char *out, size_t cap) {
  out[0] = '\0';
  size_t index;
  json_t *report;
  json_array_foreach(tree->processes, index, report) {
    const char *owner = json_string_value(json_object_get(report, "heap_owner"));
    if (!owner || strstr(out, owner)) continue;
    size_t used = strlen(out);
    snprintf(out + used, cap - used, "%s%s", used ? ", " : "", owner);
  }
}

void run_tree_write_json(FILE *out, const struct run_tree *tree, const char *command, int exit_status) {
  struct json_writer j;
  json_begin(&j, out, "hugify.run/1");
  json_put_string(&j, "command", command);
  json_put_i64(&j, "exit_status", exit_status);
  json_put_u64(&j, "process_count", json_array_size(tree->processes));
  json_put_u64(&j, "unreadable_reports", tree->unreadable);
  const json_t *largest = largest_process(tree);
  if (largest) {
    json_open_object(&j, "largest_process");
    put_value(&j, "pid", json_object_get(largest, "pid"));
    put_value(&j, "command", json_object_get(largest, "command"));
    put_value(&j, "peak_memory_bytes", json_object_get(largest, "peak_memory_bytes"));
    json_close(&j);
  } else {
    json_put_null(&j, "largest_process");
  }
  char owners[256];
  heap_owners(tree, owners, sizeof owners);
  json_put_string(&j, "heap_owner", owners[0] ? owners : NULL);
  /* what backs the data of the process that held the most: the tree's data is mostly its */
  for (const char *key = "allocator\0allocator_data\0allocator_is_runtime\0"; *key; key += strlen(key) + 1)
    put_value(&j, key, largest ? json_object_get(largest, key) : NULL);
  json_t *sums = tree_sums(tree);
  const char *key;
  json_t *member;
  json_object_foreach(sums, key, member) put_value(&j, key, member);
  json_decref(sums);
  if (json_array_size(tree->processes) == 0) { /* nothing measured: no figure rather than a zero */
    json_put_null(&j, "peak_memory_bytes");
    json_put_null(&j, "max_rss_bytes");
  }
  json_open_array(&j, "fallbacks");
  size_t index, k;
  json_t *report, *fallback;
  json_array_foreach(tree->processes, index, report) json_array_foreach(json_object_get(report, "fallbacks"), k, fallback) {
    json_open_object(&j, NULL);
    put_value(&j, "pid", json_object_get(report, "pid"));
    put_value(&j, "what", json_object_get(fallback, "what"));
    put_value(&j, "reason", json_object_get(fallback, "reason"));
    json_close(&j);
  }
  json_close(&j);
  put_value(&j, "processes", tree->processes);
  if (tree->watcher && tree->watcher->json) tree->watcher->json(tree->watcher->context, &j);
  json_end(&j);
}

/* ---- the table (--report -) --------------------------------------------------------------------- */

static void bytes_and_share(const json_t *usage, char *bytes, size_t bytes_cap, char *share, size_t share_cap) {
  uint64_t resident = count_at(usage, "resident_bytes", NULL), huge = count_at(usage, "huge_bytes", NULL);
  format_bytes(resident, bytes, bytes_cap);
  format_percent(huge, resident, share, share_cap);
}

static void process_row(struct table *t, const char *pid, const char *command, const json_t *report) {
  char memory[32], allocated[32], allocated_share[16], code[32], code_share[16];
  format_bytes(count_at(report, "peak_memory_bytes", NULL), memory, sizeof memory);
  bytes_and_share(json_object_get(json_object_get(report, "peak"), "allocated"), allocated, sizeof allocated,
                  allocated_share, sizeof allocated_share);
  bytes_and_share(json_object_get(json_object_get(report, "classes"), "code"), code, sizeof code, code_share,
                  sizeof code_share);
  table_row(t, pid, command, memory, allocated, allocated_share, code, code_share);
}

void run_tree_write_text(FILE *out, const struct run_tree *tree, const char *command) {
  size_t count = json_array_size(tree->processes);
  if (count == 0 && tree->watcher && tree->watcher->text) { /* a static program: nothing inside it reports */
    fprintf(out, "hugify run: %s\n", command);
    tree->watcher->text(tree->watcher->context, out);
    fflush(out);
    return;
  }
  const json_t *largest = largest_process(tree);
  json_t *sums = tree_sums(tree);
  char memory[32];
  format_bytes(count_at(sums, "peak_memory_bytes", NULL), memory, sizeof memory);
  fprintf(out, "hugify run: %s\n  %zu process%s, peak memory %s (RSS + hugetlb pages%s)", command, count,
          count == 1 ? "" : "es", memory, count == 1 ? "" : ", summed over processes");
  if (largest && count > 1)
    fprintf(out, "; the most: pid %" PRIu64 " %s", count_at(largest, "pid", NULL),
            json_string_value(json_object_get(largest, "command")) ?: "?");
  fputc('\n', out);
  if (tree->watcher && tree->watcher->text) tree->watcher->text(tree->watcher->context, out);
  if (count == 0) {
    fprintf(out, "  no process wrote a report: one that ends with _exit() or by a signal does not (docs/run.md)\n");
    json_decref(sums);
    return;
  }
  if (tree->unreadable) fprintf(out, "  %u report%s could not be read\n", tree->unreadable, tree->unreadable == 1 ? "" : "s");
  static const char *const headers[] = {"pid", "command", "peak memory", "heap+anon at peak", "huge", "code", "huge"};
  static const bool right[] = {true, false, true, true, true, true, true};
  struct table t;
  table_init(&t, 7, headers, right);
  size_t index;
  json_t *report;
  json_array_foreach(tree->processes, index, report) {
    char pid[24], name[48];
    uint64_t number = count_at(report, "pid", NULL);
    snprintf(pid, sizeof pid, number ? "%" PRIu64 : "?", number);
    snprintf(name, sizeof name, "%.47s", json_string_value(json_object_get(report, "command")) ?: "?");
    process_row(&t, pid, name, report);
  }
  if (count > 1) process_row(&t, "", "all", sums);
  table_print(&t, out, "  ");
  table_free(&t);
  json_decref(sums);
  json_array_foreach(tree->processes, index, report) /* what --heap does not reach: a runtime's own allocator */
    if (json_is_true(json_object_get(report, "allocator_is_runtime")))
      fprintf(out, "  data (pid %" PRIu64 "): %s (%s), not malloc's (docs/runtimes.md)\n", count_at(report, "pid", NULL),
              json_string_value(json_object_get(report, "allocator_data")) ?: "?",
              json_string_value(json_object_get(report, "allocator")) ?: "?");
  json_t *fallback;
  size_t k;
  json_array_foreach(tree->processes, index, report) json_array_foreach(json_object_get(report, "fallbacks"), k, fallback)
    fprintf(out, "  fallback (pid %" PRIu64 "): %s: %s\n", count_at(report, "pid", NULL),
            json_string_value(json_object_get(fallback, "what")) ?: "?",
            json_string_value(json_object_get(fallback, "reason")) ?: "?");
  fflush(out);
}

/* ---- running CMD as a child and reporting on its tree ------------------------------------------- */

static volatile sig_atomic_t child_pid;

/* Signals sent to hugify run are passed on to CMD. Those the terminal sent (si_code SI_KERNEL) reached
 * CMD already, with the rest of the foreground process group: passing them on would deliver them twice. */
static void pass_on(int signal_number, siginfo_t *info, void *context) {
  (void)context;
  if (info->si_code != SI_KERNEL && child_pid > 0) kill((pid_t)child_pid, signal_number);
}

static const int passed_on[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  for (struct dirent *entry; d && (entry = readdir(d));) {
    if (entry->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

static void join_command(char *const argv[], char *out, size_t cap) {
  out[0] = '\0';
  for (size_t used = 0; *argv && used + 1 < cap; argv++) {
    int n = snprintf(out + used, cap - used, "%s%s", used ? " " : "", *argv);
    if (n < 0) break;
    used += (size_t)n;
  }
}

static void deliver(const struct run_tree *tree, const char *target, bool json, const char *command, int exit_status) {
  if (strcmp(target, "-") == 0) {
    if (json) run_tree_write_json(stderr, tree, command, exit_status);
    else run_tree_write_text(stderr, tree, command);
    return;
  }
  char *text = NULL;
  size_t length = 0;
  FILE *memory = open_memstream(&text, &length);
  if (!memory) {
    fprintf(stderr, "hugify run: cannot write the report: %s\n", strerror(errno));
    return;
  }
  run_tree_write_json(memory, tree, command, exit_status);
  fclose(memory);
  char reason[512] = "";
  if (safe_file_replace(target, text, length, 0644, SAFE_FILE_ALLOW_DEVICE, reason, sizeof reason) != 0)
    fprintf(stderr, "hugify run: cannot write the report to %s: %s\n", target, reason);
  free(text);
}

/* The status CMD ended with becomes ours: its exit code, or death by the same signal (without a core of
 * hugify's own); 128 + the signal if that signal does not end a process. */
static int end_like(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  int signal_number = WTERMSIG(status);
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  signal(signal_number, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal_number);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  raise(signal_number);
  return 128 + signal_number;
}

/* Wait for CMD (pid), with the watcher's passes while it runs: the pidfd wakes the wait as soon as CMD ends,
 * so its end is not noticed a pass late. */
static void wait_watching(pid_t pid, const struct run_watcher *watcher, int *status) {
  int pidfd = watcher ? os_pidfd_open(pid) : -1;
  double wait = watcher ? watcher->interval : 0;
  for (;;) {
    if (watcher && pidfd >= 0) {
      struct pollfd ready = {.fd = pidfd, .events = POLLIN};
      poll(&ready, 1, (int)(wait * 1000));
    } else if (watcher) {
      os_sleep(wait); /* no pidfd (before 5.3): CMD's end is seen at the next look */
    }
    pid_t done = waitpid(pid, status, watcher ? WNOHANG : 0);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (done == 0) wait = watcher->pass(watcher->context, pid);
  }
  if (pidfd >= 0) close(pidfd);
}

int run_tree_run(const char *path, char *const argv[], const char *dir, const char *target, bool json,
                 const struct run_watcher *watcher) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    if (dir) remove_dir(dir);
    return fail(EXIT_PRIVILEGE, "run", "cannot start %s: %s", path, strerror(err));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* hugify run killed: CMD is not left behind */
    if (getppid() != parent) _exit(128 + SIGTERM);
    char number[32];
    snprintf(number, sizeof number, "%d", (int)getpid());
    setenv("HUGIFY_RUN_PID", number, 1);
    execv(path, argv);
    int err = errno;
    fprintf(stderr, "hugify run: %s: %s\n", path, strerror(err));
    _exit(err == ENOENT ? 127 : 126);
  }
  child_pid = pid;
  struct sigaction action = {.sa_sigaction = pass_on, .sa_flags = SA_SIGINFO | SA_RESTART};
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < sizeof passed_on / sizeof passed_on[0]; i++) sigaction(passed_on[i], &action, NULL);
  int status = 0;
  wait_watching(pid, watcher, &status);
  child_pid = 0;
  if (!dir) return end_like(status); /* no report asked */

  struct run_tree tree;
  char reason[512] = "", command[4096];
  join_command(argv, command, sizeof command);
  int exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (run_tree_read(dir, &tree, reason, sizeof reason) == 0) {
    tree.watcher = watcher;
    deliver(&tree, target, json, command, exit_status);
  } else {
    fprintf(stderr, "hugify run: no report: %s\n", reason);
  }
  run_tree_free(&tree);
  remove_dir(dir);
  return end_like(status);
}
