/* agent.c - hugify agent: keep a machine's long-running processes on huge pages within a CPU and memory
 * budget, with Prometheus metrics. The decisions are the library's (agent_policy.h: selection, bloat guard,
 * window order, budgets, back-off; collapse.h: the collapse itself); this file reads the configuration
 * (inih), runs the passes, handles SIGTERM/SIGHUP, and publishes metrics (a file for node_exporter's
 * textfile collector, and HTTP with libmicrohttpd). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent_policy.h"
#include "cli.h"
#include "collapse.h"
#include "format.h"
#include "hugify.h"
#include "os.h"
#include "probe.h"
#include "procfs.h"
#include "prometheus.h"
#include "safe_file.h"
#include "units.h"

const char usage_agent[] =
    "usage: hugify agent [--config FILE] [--pid PID]... [--comm NAME]... [--exe PATH]... [--cgroup PATH]...\n"
    "                    [--uid UID]... [--min-rss SIZE] [--exclude-comm NAME]... [--interval SECONDS]\n"
    "                    [--cpu-budget PERCENT] [--min-present PERCENT] [--free-floor SIZE]\n"
    "                    [--max-pressure PERCENT] [--metrics-file FILE] [--listen [ADDR:]PORT]\n"
    "                    [--once] [--dry-run] [--status] [--json[=FILE]]\n"
    "\n"
    "Keep long-running processes on huge pages: every interval, put the 2 MiB windows of their anonymous\n"
    "memory that are populated enough on transparent huge pages (process_madvise + MADV_COLLAPSE), densest\n"
    "first, within a CPU budget, and never while memory is short. With THP in 'madvise' mode the kernel never\n"
    "does this for memory a program did not advise; khugepaged does it slowly, and only for advised memory.\n"
    "A collapse that the program's allocator undoes (freed memory given back inside a huge page) is noticed:\n"
    "such windows and processes are backed off with growing intervals, and the agent names the allocator\n"
    "setting that would keep the huge pages (docs/agent.md, Churn).\n"
    "\n"
    "Which processes (a process is selected when it matches any of these, or every process when none is\n"
    "given; exclusions win; memory a program excluded from THP is always left alone: THP disabled for the\n"
    "process, also 'except where advised' (visible only while a THP size is 'always'), MADV_NOHUGEPAGE):\n"
    "  --pid PID            this process\n"
    "  --comm NAME          processes named NAME (/proc/PID/comm)\n"
    "  --exe PATH           processes running the executable PATH\n"
    "  --cgroup PATH        processes in the cgroup v2 PATH or below (e.g. /system.slice/redis.service)\n"
    "  --uid UID            processes of user UID\n"
    "  --min-rss SIZE       only processes with at least SIZE resident (default 16M)\n"
    "  --exclude-comm NAME  never processes named NAME\n"
    "How:\n"
    "  --interval SECONDS   time between passes (default 10)\n"
    "  --cpu-budget PERCENT CPU the agent may use, in percent of one core, averaged over a minute (default 2)\n"
    "  --min-present PERCENT a window is collapsed only when this share of its pages is present (default 50:\n"
    "                       the bloat guard; 100 never adds memory)\n"
    "  --free-floor SIZE    no collapse while MemAvailable is below SIZE (default 512M)\n"
    "  --max-pressure PERCENT no collapse while memory pressure (PSI some avg10) is above this (default 10)\n"
    "  --dry-run            decide and report, collapse nothing\n"
    "  --once               one pass, then exit (cron, CI, tests); the CPU budget does not limit it\n"
    "Output:\n"
    "  --metrics-file FILE  Prometheus text format, replaced atomically after every pass (for node_exporter's\n"
    "                       textfile collector: FILE ending in .prom in its directory)\n"
    "  --listen [ADDR:]PORT serve the metrics over HTTP at /metrics (ADDR defaults to 127.0.0.1)\n"
    "  --status             one observation pass, no collapse: a table of the selected processes\n"
    "  --json[=FILE]        JSON (schema hugify.agent/1, docs/agent.md) instead of the text, or to FILE\n"
    "  --config FILE        INI file of the same settings: one 'name = value' per line, names as the flags\n"
    "                       without '--' (repeat a name for lists); the command line adds to it and wins\n"
    "\n"
    "Signals: SIGTERM or SIGINT stops the agent after the current call; SIGHUP reads the config file again\n"
    "(a bad file is reported and the old settings kept).\n"
    "Needs: Linux 6.1+ (MADV_COLLAPSE), CAP_SYS_NICE (process_madvise on other processes) and\n"
    "CAP_SYS_PTRACE (read the memory maps of other users' processes); root has both. The systemd unit\n"
    "installed with hugify grants exactly these.\n"
    "\n"
    "Examples:\n"
    "  hugify agent --comm redis-server --comm postgres      keep two services on huge pages\n"
    "  hugify agent --cgroup /system.slice --min-rss 256M --metrics-file /var/lib/node_exporter/hugify.prom\n"
    "  hugify agent --once --pid 1234 --json                 one pass over one process\n"
    "  hugify agent --status --uid 1000                      what the agent would see, as a table\n"
    "\n"
    "Exit status: 0 done (or stopped by a signal); 1 a --once pass had failures; 2 bad usage or configuration;\n"
    "3 missing privilege (CAP_SYS_NICE, CAP_SYS_PTRACE) or kernel feature.\n";

#define COMMAND "agent"
#define BACKOFF_MAX_SECONDS 3600.0
#define QUIET_PASSES 5 /* an unchanged process is measured again at least every sixth pass */
#define CAP_SYS_PTRACE_BIT 19
#define CAP_SYS_NICE_BIT 23

/* ---- configuration ------------------------------------------------------------------------------ */

struct agent_config {
  struct agent_selectors selectors;
  double interval;
  double cpu_budget;   /* fraction of one core */
  double min_present;  /* fraction */
  uint64_t free_floor;
  double max_pressure; /* percent */
  char metrics_file[PATH_MAX];
  char listen[128];
  bool once, dry_run;
  char error[512];     /* the first problem found */
};

static void config_defaults(struct agent_config *c) {
  memset(c, 0, sizeof *c);
  c->selectors.min_rss = UINT64_C(16) << 20;
  c->interval = 10;
  c->cpu_budget = 0.02;
  c->min_present = 0.5;
  c->free_floor = UINT64_C(512) << 20;
  c->max_pressure = 10;
}

static bool parse_bool(const char *text, bool *value) {
  if (!strcmp(text, "true") || !strcmp(text, "yes") || !strcmp(text, "1") || !strcmp(text, "on")) *value = true;
  else if (!strcmp(text, "false") || !strcmp(text, "no") || !strcmp(text, "0") || !strcmp(text, "off")) *value = false;
  else return false;
  return true;
}

/* One setting, by its flag name without "--", from the command line or the config file. Returns 0, or -1
 * with c->error set. */
static int config_set(struct agent_config *c, const char *name, const char *value) {
  struct agent_selectors *s = &c->selectors;
  uint64_t u;
  double d;
#define ERROR(...) (snprintf(c->error, sizeof c->error, __VA_ARGS__), -1)
#define LIST_FULL(count) ((count) >= AGENT_SELECTOR_MAX ? ERROR("too many '%s' (at most %d)", name, AGENT_SELECTOR_MAX) : 0)
  if (!strcmp(name, "pid")) {
    if (!parse_count(value, 1, INT_MAX, &u)) return ERROR("pid: '%s' is not a process id", value);
    if (LIST_FULL(s->pid_count)) return -1;
    s->pids[s->pid_count++] = (pid_t)u;
  } else if (!strcmp(name, "uid")) {
    if (!parse_count(value, 0, UINT32_MAX - 1, &u)) return ERROR("uid: '%s' is not a user id", value);
    if (LIST_FULL(s->uid_count)) return -1;
    s->uids[s->uid_count++] = (uid_t)u;
  } else if (!strcmp(name, "comm") || !strcmp(name, "exclude-comm")) {
    bool exclude = name[0] == 'e';
    if (!value[0] || strlen(value) > 15) return ERROR("%s: '%s' is not a command name (1 to 15 bytes, as in /proc/PID/comm)", name, value);
    if (LIST_FULL(exclude ? s->exclude_comm_count : s->comm_count)) return -1;
    if (exclude) snprintf(s->exclude_comms[s->exclude_comm_count++], 16, "%s", value);
    else snprintf(s->comms[s->comm_count++], 16, "%s", value);
  } else if (!strcmp(name, "exe") || !strcmp(name, "cgroup")) {
    bool exe = name[0] == 'e';
    if (value[0] != '/' || strlen(value) >= AGENT_NAME_MAX) return ERROR("%s: '%s' is not an absolute path", name, value);
    if (LIST_FULL(exe ? s->exe_count : s->cgroup_count)) return -1;
    if (exe) snprintf(s->exes[s->exe_count++], AGENT_NAME_MAX, "%s", value);
    else snprintf(s->cgroups[s->cgroup_count++], AGENT_NAME_MAX, "%s", value);
  } else if (!strcmp(name, "min-rss")) {
    if (!parse_size(value, &s->min_rss)) return ERROR("min-rss: '%s' is not a size like 16M or 1G", value);
  } else if (!strcmp(name, "free-floor")) {
    if (!parse_size(value, &c->free_floor)) return ERROR("free-floor: '%s' is not a size like 512M", value);
  } else if (!strcmp(name, "interval")) {
    if (!parse_decimal(value, 0.05, 86400, &c->interval)) return ERROR("interval: '%s' is not a number of seconds from 0.05 to 86400", value);
  } else if (!strcmp(name, "cpu-budget")) {
    if (!parse_decimal(value, 0.01, 100, &d)) return ERROR("cpu-budget: '%s' is not a percentage of one core from 0.01 to 100", value);
    c->cpu_budget = d / 100;
  } else if (!strcmp(name, "min-present")) {
    if (!parse_decimal(value, 0, 100, &d)) return ERROR("min-present: '%s' is not a percentage from 0 to 100", value);
    c->min_present = d / 100;
  } else if (!strcmp(name, "max-pressure")) {
    if (!parse_decimal(value, 0, 100, &c->max_pressure)) return ERROR("max-pressure: '%s' is not a percentage from 0 to 100", value);
  } else if (!strcmp(name, "metrics-file")) {
    if (!value[0] || strlen(value) >= sizeof c->metrics_file) return ERROR("metrics-file: needs a file name");
    snprintf(c->metrics_file, sizeof c->metrics_file, "%s", value);
  } else if (!strcmp(name, "listen")) {
    if (!value[0] || strlen(value) >= sizeof c->listen) return ERROR("listen: needs [ADDR:]PORT");
    snprintf(c->listen, sizeof c->listen, "%s", value);
  } else if (!strcmp(name, "once") || !strcmp(name, "dry-run")) {
    bool b;
    if (!parse_bool(value, &b)) return ERROR("%s: '%s' is not true or false", name, value);
    if (name[0] == 'o') c->once = b;
    else c->dry_run = b;
  } else {
    return ERROR("unknown setting '%s'", name);
  }
  return 0;
#undef LIST_FULL
#undef ERROR
}

/* Flags that take a value, and the ones that do not (settable in the file as name = true|false). */
static const char *const value_flags[] = {"pid", "comm", "exe", "cgroup", "uid", "min-rss", "exclude-comm",
                                          "interval", "cpu-budget", "min-present", "free-floor", "max-pressure",
                                          "metrics-file", "listen", NULL};

struct ini_state {
  struct agent_config *config;
  int error_line;
  int line;
};

static int ini_setting(void *user, const char *section, const char *name, const char *value) {
  struct ini_state *state = user;
  struct agent_config *c = state->config;
  if (c->error[0]) return 0;
  if (section[0] && strcmp(section, "agent") != 0) {
    snprintf(c->error, sizeof c->error, "unknown section [%s] (settings go before any section or in [agent])", section);
    return 0;
  }
  char key[64];
  snprintf(key, sizeof key, "%s", name);
  for (char *p = key; *p; p++)
    if (*p == '_') *p = '-'; /* cpu_budget = cpu-budget */
  return config_set(c, key, value) == 0;
}

/* Read the config file into c (over its defaults). Returns 0 or -1 with c->error "FILE:LINE: ...". */
static int config_read_file(struct agent_config *c, const char *path) {
  struct ini_state state = {c, 0, 0};
  /* a regular file only: a FIFO or device named by mistake must not hang or flood the reader */
  int fd = safe_file_open_read(path, true);
  FILE *file = fd >= 0 ? fdopen(fd, "r") : NULL;
  if (fd >= 0 && !file) close(fd);
  int open_error = fd < 0 ? -fd : file ? 0 : errno;
  int rc = file ? ini_parse_file(file, ini_setting, &state) : -1;
  if (file) fclose(file);
  if (rc == 0 && !c->error[0]) return 0;
  char detail[400];
  snprintf(detail, sizeof detail, "%.399s", c->error);
  if (rc == -1) snprintf(c->error, sizeof c->error, "%.300s: %s", path, open_error == EINVAL ? "not a regular file" : strerror(open_error ? open_error : EIO));
  else if (rc == -2) snprintf(c->error, sizeof c->error, "%.300s: out of memory", path);
  else if (detail[0]) snprintf(c->error, sizeof c->error, "%.90s:%d: %s", path, rc, detail);
  else snprintf(c->error, sizeof c->error, "%.300s:%d: not 'name = value' or '[section]'", path, rc);
  return -1;
}

struct command_line {
  const char *config_path;
  bool status;
  struct json_output json;
  int argc;
  char **argv;
};

/* Apply the command line's settings over c. Returns 0 or EXIT_USAGE (message printed). */
static int config_apply_arguments(struct agent_config *c, const struct command_line *cl) {
  for (int i = 1; i < cl->argc; i++) {
    const char *arg = cl->argv[i];
    if (!strncmp(arg, "--config", 8) || !strcmp(arg, "--status") || !strncmp(arg, "--json", 6)) {
      if (!strcmp(arg, "--config")) i++;
      continue; /* read by parse_command_line */
    }
    if (strncmp(arg, "--", 2) != 0) return usage_error(COMMAND, "unexpected argument '%s'", arg);
    char name[64];
    const char *eq = strchr(arg, '='), *value = NULL;
    snprintf(name, sizeof name, "%.*s", (int)((eq ? (size_t)(eq - arg) : strlen(arg)) - 2), arg + 2);
    bool takes_value = false;
    for (int k = 0; value_flags[k]; k++) takes_value |= !strcmp(value_flags[k], name);
    if (takes_value) {
      value = eq ? eq + 1 : (i + 1 < cl->argc ? cl->argv[++i] : NULL);
      if (!value) return usage_error(COMMAND, "--%s needs a value", name);
    } else if (!strcmp(name, "once") || !strcmp(name, "dry-run")) {
      if (eq) return usage_error(COMMAND, "--%s takes no value", name);
      value = "true";
    } else {
      return usage_error(COMMAND, "unknown option '%s'", arg);
    }
    if (config_set(c, name, value) != 0) return usage_error(COMMAND, "--%s", c->error);
  }
  return 0;
}

static int parse_command_line(int argc, char **argv, struct command_line *cl) {
  memset(cl, 0, sizeof *cl);
  cl->argc = argc;
  cl->argv = argv;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--config")) {
      if (i + 1 >= argc) return usage_error(COMMAND, "--config needs a file");
      cl->config_path = argv[++i];
    } else if (!strncmp(argv[i], "--config=", 9)) {
      cl->config_path = argv[i] + 9;
    } else if (!strcmp(argv[i], "--status")) {
      cl->status = true;
    } else if (json_output_option(COMMAND, argv[i], &cl->json) < 0) {
      return EXIT_USAGE;
    }
  }
  return 0;
}

/* The whole configuration: file, then command line. Returns 0, or EXIT_USAGE with the message printed
 * (print = false: only c->error, for a reload). */
static int load_config(struct agent_config *c, const struct command_line *cl, bool print) {
  config_defaults(c);
  if (cl->config_path && config_read_file(c, cl->config_path) != 0) {
    if (print) fail(EXIT_USAGE, COMMAND, "bad configuration: %s", c->error);
    return EXIT_USAGE;
  }
  return config_apply_arguments(c, cl); /* valid at start, so valid at a reload too */
}

/* A /proc file's text (malloc'd), or NULL when it cannot be read (the process is gone). */
static char *read_text(const char *path) {
  char *text = NULL;
  return os_read_file(path, &text, NULL) == 0 ? text : NULL;
}

/* ---- privileges --------------------------------------------------------------------------------- */

static bool has_capability(int bit) {
  char *text = read_text("/proc/self/status");
  if (!text) return false;
  char value[64] = "";
  bool found = parse_keyed_text(text, "CapEff", value, sizeof value);
  free(text);
  if (!found) return false;
  unsigned long long caps = strtoull(value, NULL, 16);
  return (caps >> bit) & 1;
}

/* ---- per-process state and one pass ------------------------------------------------------------- */

struct failure_count {
  char reason[16]; /* "EAGAIN", ... */
  uint64_t windows;
};
#define FAILURE_KINDS 8

struct process_state {
  pid_t pid;
  char comm[16];
  bool seen;                       /* in the current pass */
  bool selected;
  struct hugify_usage classes[HUGIFY_CLASS_COUNT];
  struct hugify_usage total;
  uint64_t collapsible;
  uint64_t collapsed_bytes;        /* total made huge by the agent */
  uint64_t attempted_bytes;
  struct failure_count failures[FAILURE_KINDS];
  struct agent_backoff backoff;
  uint64_t idle_signature;         /* resident+collapsible when a plan found nothing to do */
  struct agent_ledger ledger;      /* what the agent collapsed here, and whether it lasts (malloc'd) */
  uint64_t bloat_bytes;            /* zero-filled by the agent's collapses (collapse_window_bloat) */
  int allocator;                   /* enum agent_allocator, from the last plan */
  bool measured;                   /* classes/total hold an inspect */
  uint64_t measured_rss;           /* VmRSS when they were taken */
  unsigned quiet_passes;           /* passes since, skipped because nothing changed */
  char last_action[224];
};

struct agent {
  struct agent_config config;
  struct command_line cl;
  struct process_state *processes;
  size_t process_count, process_cap;
  struct agent_budget budget;
  double cpu_mark;                 /* CLOCK_PROCESS_CPUTIME_ID at the last charge */
  uint64_t passes, collapsed_bytes, budget_stops, memory_gate_closed_passes;
  uint64_t recollapsed_bytes, bloat_bytes, churn_backoffs;
  struct agent_harm harm;          /* the pauses its collapses caused, the longest call */
  bool memory_open;
  char memory_reason[160];
  uint64_t available;
  struct agent_pressure pressure;
  double last_pass_seconds, last_pass_end;
  bool stop_requested;
  sigset_t signals;
  /* metrics for HTTP */
  pthread_mutex_t metrics_lock;
  char *metrics;
  size_t metrics_length;
  struct MHD_Daemon *http;
};

static double clock_seconds(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double agent_cpu_seconds(void) { return clock_seconds(CLOCK_PROCESS_CPUTIME_ID); }

/* Charge the CPU used since the last charge; true while the budget allows more. */
static bool budget_keep_going(void *context) {
  struct agent *a = context;
  double now = agent_cpu_seconds();
  agent_budget_charge(&a->budget, now - a->cpu_mark);
  a->cpu_mark = now;
  if (a->config.once) return !a->stop_requested;
  agent_budget_refill(&a->budget, clock_seconds(CLOCK_MONOTONIC));
  /* a pending SIGTERM ends the pass between calls */
  sigset_t pending;
  if (sigpending(&pending) == 0 && (sigismember(&pending, SIGTERM) || sigismember(&pending, SIGINT)))
    a->stop_requested = true;
  return !a->stop_requested && agent_budget_allows(&a->budget);
}

static struct process_state *state_of(struct agent *a, pid_t pid, const char *comm) {
  for (size_t i = 0; i < a->process_count; i++) {
    struct process_state *p = &a->processes[i];
    if (p->pid != pid) continue;
    if (strcmp(p->comm, comm) != 0) { /* the pid was reused */
      agent_ledger_free(&p->ledger);
      memset(p, 0, sizeof *p);
    }
    p->pid = pid;
    snprintf(p->comm, sizeof p->comm, "%s", comm);
    return p;
  }
  if (a->process_count == a->process_cap) {
    size_t cap = a->process_cap ? 2 * a->process_cap : 64;
    struct process_state *bigger = realloc(a->processes, cap * sizeof *bigger);
    if (!bigger) return NULL;
    a->processes = bigger;
    a->process_cap = cap;
  }
  struct process_state *p = &a->processes[a->process_count++];
  memset(p, 0, sizeof *p);
  p->pid = pid;
  snprintf(p->comm, sizeof p->comm, "%s", comm);
  return p;
}

/* Identity of a process from /proc/PID/{status,comm,cgroup,exe}. False when it is gone or unreadable. */
static bool read_process(pid_t pid, const struct agent_selectors *s, struct agent_process *out) {
  memset(out, 0, sizeof *out);
  out->pid = pid;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  char *status = read_text(path);
  if (!status) return false;
  char field[64];
  uint64_t rss = 0, thp = 1;
  out->kernel_thread = !parse_keyed_value(status, "VmRSS", &rss);
  out->rss = rss;
  out->thp_disabled = parse_keyed_value(status, "THP_enabled", &thp) ? thp == 0 : -1;
  if (parse_keyed_text(status, "Uid", field, sizeof field)) out->uid = (uid_t)strtoul(field, NULL, 10);
  if (parse_keyed_text(status, "Name", field, sizeof field)) snprintf(out->comm, sizeof out->comm, "%.15s", field);
  free(status);
  if (strchr(out->comm, '\\')) { /* status escapes some bytes: the real comm */
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    os_read_small(path, out->comm, sizeof out->comm);
  }
  if (s->cgroup_count) {
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    char *text = read_text(path);
    if (text && !parse_cgroup_v2_path(text, out->cgroup, sizeof out->cgroup)) out->cgroup[0] = '\0';
    free(text);
  }
  if (s->exe_count) {
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, out->exe, sizeof out->exe - 1);
    out->exe[n > 0 ? n : 0] = '\0';
  }
  return true;
}

static void count_failures(struct process_state *p, const struct hugify_collapse_report *r) {
  for (size_t i = 0; i < r->failure_count; i++) {
    const struct hugify_collapse_failure *f = &r->failures[i];
    char name[16];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(f->reason, ":"), f->reason);
    for (size_t k = 0; k < FAILURE_KINDS; k++) {
      if (!p->failures[k].reason[0]) snprintf(p->failures[k].reason, sizeof p->failures[k].reason, "%s", name);
      if (!strcmp(p->failures[k].reason, name)) {
        p->failures[k].windows += (f->end - f->start) / (UINT64_C(2) << 20);
        break;
      }
    }
  }
}

static bool inspect_into(struct process_state *p, uint64_t rss) {
  struct hugify_inspect_report report;
  int rc = hugify_inspect(p->pid, &report);
  p->measured = rc == 0;
  p->measured_rss = rss;
  p->quiet_passes = 0;
  if (rc == 0) {
    memcpy(p->classes, report.classes, sizeof p->classes);
    p->total = report.total;
    p->collapsible = report.collapsible;
  }
  hugify_inspect_report_free(&report);
  return rc == 0;
}

/* last_action of a process backed off because its collapses do not last: why, and what would make them last. */
static void churn_action(struct process_state *p, uint64_t pass) {
  const struct agent_ledger *l = &p->ledger;
  char share[16] = "-";
  if (l->last_lasting_share >= 0) snprintf(share, sizeof share, "%.0f %%", 100 * l->last_lasting_share);
  snprintf(p->last_action, sizeof p->last_action,
           "backed off %llu passes: collapses undone (%s lasted %d passes); %s gives memory back",
           (unsigned long long)(l->resume_pass - pass), share, AGENT_UNDONE_PASSES + 1, agent_allocator_name(p->allocator));
}

/* Work on one selected process: measure, and collapse what the policy chooses while the budgets allow. */
static void serve_process(struct agent *a, struct process_state *p, uint64_t rss, bool may_collapse, double now) {
  /* A quiet process (same RSS, and nothing left to do last time) costs one status read per pass: its smaps
   * are read again only every QUIET_PASSES passes, so many idle processes stay cheap. */
  /* ... unless its last collapses are still to be judged (the ledger looks at them for a few passes) */
  bool watching = may_collapse && agent_ledger_watching(&p->ledger, a->passes);
  bool nothing_to_do = (p->collapsible == 0 || p->idle_signature != 0 || !may_collapse) && !watching;
  if (p->measured && rss == p->measured_rss && nothing_to_do && p->quiet_passes < QUIET_PASSES) {
    p->quiet_passes++;
    return;
  }
  if (!inspect_into(p, rss)) { p->seen = false; return; } /* gone, or not readable */
  uint64_t signature = p->total.resident ^ (p->collapsible << 1);
  if (!may_collapse || (p->collapsible == 0 && !watching)) return;
  if (!agent_backoff_allows(&p->backoff, now)) {
    snprintf(p->last_action, sizeof p->last_action, "backing off after %u failed passes", p->backoff.failures);
    return;
  }
  if (p->idle_signature && p->idle_signature == signature && !watching) return; /* planned before: nothing to do */
  if (!agent_ledger_allows(&p->ledger, a->passes)) {
    /* backed off for churn: not even planned (the plan at the end of the back-off judges what lasted) */
    churn_action(p, a->passes);
    return;
  }
  if (!budget_keep_going(a)) return;
  /* the gentle pace (the default): one window per call, the budget asked between calls */
  struct hugify_collapse_opts opts = {.flags = a->config.dry_run ? HUGIFY_COLLAPSE_DRY_RUN : 0};
  if (!p->ledger.window_bytes) {
    double passes = BACKOFF_MAX_SECONDS / a->config.interval;
    agent_ledger_init(&p->ledger, page_kind_size(HUGIFY_PAGE_THP), passes < 1 ? 1 : (uint64_t)passes);
  }
  struct collapse_policy policy = {.min_present = a->config.min_present, .keep_going = budget_keep_going,
                                   .context = a, .ledger = &p->ledger, .pass = a->passes,
                                   .pauses = &a->harm.pauses};
  struct hugify_collapse_report report;
  uint64_t recollapsed_before = p->ledger.recollapsed_bytes;
  int rc = collapse_with_policy(p->pid, &opts, &policy, &report);
  if (rc == 0) p->allocator = policy.allocator, agent_harm_record(&a->harm, &report);
  if (rc == 0 && policy.backed_off_now) {
    a->churn_backoffs++;
    churn_action(p, a->passes);
    fprintf(stderr, "hugify agent: pid %d (%s): %s; what would keep its huge pages: %s\n", (int)p->pid, p->comm,
            p->last_action, agent_allocator_advice(p->allocator));
  }
  if (rc == 0 && !report.dry_run && !report.exited && !agent_ledger_allows(&p->ledger, a->passes)) {
    churn_action(p, a->passes);
  } else if (rc == 0 && !report.dry_run && !report.exited) {
    uint64_t made = report.attempted - report.failed;
    p->collapsed_bytes += made;
    p->attempted_bytes += report.attempted;
    a->collapsed_bytes += made;
    p->bloat_bytes += report.bloat_bytes;
    a->bloat_bytes += report.bloat_bytes;
    a->recollapsed_bytes += p->ledger.recollapsed_bytes - recollapsed_before;
    count_failures(p, &report);
    agent_backoff_record(&p->backoff, made > 0, report.failed > 0, now, a->config.interval, BACKOFF_MAX_SECONDS);
    if (policy.stopped) a->budget_stops++;
    char made_text[32], planned_text[32], held_text[32], excluded_text[64] = "";
    format_bytes(made, made_text, sizeof made_text);
    format_bytes(policy.planned, planned_text, sizeof planned_text);
    format_bytes(policy.backed_off, held_text, sizeof held_text);
    if (report.excluded) {
      char bytes[32];
      format_bytes(report.excluded, bytes, sizeof bytes);
      snprintf(excluded_text, sizeof excluded_text, ", left %s the program excluded", bytes);
    }
    snprintf(p->last_action, sizeof p->last_action, "collapsed %s of %s planned%s%s%s%s%s%s", made_text, planned_text,
             excluded_text, report.failed ? ", some windows failed" : "", policy.stopped ? ", budget spent" : "",
             policy.backed_off ? ", " : "", policy.backed_off ? held_text : "",
             policy.backed_off ? " held back (collapses undone)" : "");
    p->idle_signature = 0;
    if (report.attempted) inspect_into(p, rss); /* the figures after, for the metrics */
    if (policy.planned == 0 && !policy.stopped && !policy.backed_off)
      p->idle_signature = p->total.resident ^ (p->collapsible << 1);
  } else if (rc == 0 && report.dry_run) {
    char planned_text[32];
    format_bytes(policy.planned, planned_text, sizeof planned_text);
    snprintf(p->last_action, sizeof p->last_action, "dry run: would collapse %s", planned_text);
  } else if (rc != 0 && rc != -ESRCH) {
    snprintf(p->last_action, sizeof p->last_action, "%.159s", report.reason);
    agent_backoff_record(&p->backoff, false, true, now, a->config.interval, BACKOFF_MAX_SECONDS);
    struct failure_count *f = NULL;
    const char *name = rc == -EPERM ? "EPERM" : "error";
    for (size_t k = 0; k < FAILURE_KINDS && !f; k++)
      if (!p->failures[k].reason[0] || !strcmp(p->failures[k].reason, name)) f = &p->failures[k];
    if (f) snprintf(f->reason, sizeof f->reason, "%s", name), f->windows++;
  }
  hugify_collapse_report_free(&report);
}

static void read_memory_state(struct agent *a) {
  char *meminfo = read_text("/proc/meminfo");
  a->available = UINT64_MAX;
  if (meminfo) parse_keyed_value(meminfo, "MemAvailable", &a->available);
  free(meminfo);
  char *pressure = read_text("/proc/pressure/memory");
  if (!pressure || !agent_parse_pressure(pressure, &a->pressure)) memset(&a->pressure, 0, sizeof a->pressure);
  free(pressure);
  struct agent_memory_limits limits = {a->config.free_floor, a->config.max_pressure};
  a->memory_open = agent_memory_allows(&limits, a->available, &a->pressure, a->memory_reason, sizeof a->memory_reason);
}

/* One pass over every process. collapse = false: observe only (--status). */
static void run_pass(struct agent *a, bool collapse) {
  double start = clock_seconds(CLOCK_MONOTONIC);
  a->passes++;
  read_memory_state(a);
  if (!a->memory_open) a->memory_gate_closed_passes++;
  for (size_t i = 0; i < a->process_count; i++) a->processes[i].seen = false;
  DIR *proc = opendir("/proc");
  pid_t self = getpid();
  for (struct dirent *entry; proc && (entry = readdir(proc)) && !a->stop_requested;) {
    uint64_t id;
    if (!parse_u64(entry->d_name, &id) || id == 0 || (pid_t)id == self) continue;
    struct agent_process process;
    if (!read_process((pid_t)id, &a->config.selectors, &process)) continue;
    if (agent_select(&a->config.selectors, &process) != AGENT_SELECTED) continue;
    struct process_state *p = state_of(a, process.pid, process.comm);
    if (!p) break;
    p->seen = p->selected = true;
    if (!budget_keep_going(a)) continue; /* spent: its figures stay those of the last pass */
    serve_process(a, p, process.rss, collapse && a->memory_open, start);
  }
  if (proc) closedir(proc);
  /* forget processes that exited (or stopped being selected) */
  size_t kept = 0;
  for (size_t i = 0; i < a->process_count; i++) {
    if (a->processes[i].seen) a->processes[kept++] = a->processes[i];
    else agent_ledger_free(&a->processes[i].ledger);
  }
  a->process_count = kept;
  budget_keep_going(a); /* charge the rest of the pass */
  a->last_pass_end = clock_seconds(CLOCK_REALTIME);
  a->last_pass_seconds = clock_seconds(CLOCK_MONOTONIC) - start;
}

/* ---- metrics ------------------------------------------------------------------------------------ */

static double own_cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
         (double)u.ru_stime.tv_usec * 1e-6;
}

enum process_metric { RESIDENT, HUGE, COLLAPSIBLE, COLLAPSED, FAILURES, LASTING, RECOLLAPSED, UNDONE, BLOAT, BACKED_OFF };

static double process_value(const struct agent *a, const struct process_state *p, enum process_metric which) {
  switch (which) {
  case COLLAPSIBLE: return (double)p->collapsible;
  case COLLAPSED: return (double)p->collapsed_bytes;
  case RECOLLAPSED: return (double)p->ledger.recollapsed_bytes;
  case UNDONE: return (double)p->ledger.undone_bytes;
  case BLOAT: return (double)p->bloat_bytes;
  case BACKED_OFF: return agent_ledger_allows(&p->ledger, a->passes) ? 0 : 1;
  default: return 0;
  }
}

/* One family of per-process samples, labelled pid and comm (and class or reason). */
static void process_family(const struct agent *a, FILE *out, enum process_metric which, const char *name,
                           const char *type, const char *help) {
  prometheus_family(out, name, type, help);
  for (size_t i = 0; i < a->process_count; i++) {
    const struct process_state *p = &a->processes[i];
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)p->pid);
    const char *labels[] = {"pid", pid, "comm", p->comm, NULL, NULL, NULL};
    if (which == LASTING) {
      labels[4] = "passes";
      double shares[2] = {agent_ledger_early_share(&p->ledger), agent_ledger_late_share(&p->ledger)};
      for (int k = 0; k < 2; k++) {
        if (shares[k] < 0) continue; /* nothing judged yet: no sample rather than a made-up 0 or 1 */
        labels[5] = k == 0 ? "1" : "10";
        prometheus_sample(out, name, labels, shares[k]);
      }
    } else if (which == BACKED_OFF) {
      labels[4] = "allocator";
      labels[5] = agent_allocator_name(p->allocator);
      prometheus_sample(out, name, labels, process_value(a, p, which));
    } else if (which != FAILURES && which != RESIDENT && which != HUGE) {
      prometheus_sample(out, name, labels, process_value(a, p, which));
    } else if (which == FAILURES) {
      labels[4] = "reason";
      for (size_t k = 0; k < FAILURE_KINDS && p->failures[k].reason[0]; k++) {
        labels[5] = p->failures[k].reason;
        prometheus_sample(out, name, labels, (double)p->failures[k].windows);
      }
    } else {
      labels[4] = "class";
      for (int k = 0; k < HUGIFY_CLASS_COUNT; k++) {
        labels[5] = hugify_memory_class_name(k);
        const struct hugify_usage *u = &p->classes[k];
        prometheus_sample(out, name, labels, (double)(which == RESIDENT ? u->resident : hugify_usage_huge(u)));
      }
    }
  }
}

static void render_metrics(struct agent *a, FILE *out) {
  process_family(a, out, RESIDENT, "hugify_agent_process_resident_bytes", "gauge",
                 "Resident memory of a selected process by class (smaps; hugetlb included).");
  process_family(a, out, HUGE, "hugify_agent_process_huge_bytes", "gauge",
                 "Memory of a selected process on huge pages (THP and hugetlb) by class.");
  process_family(a, out, COLLAPSIBLE, "hugify_agent_process_collapsible_bytes", "gauge",
                 "Resident memory of a selected process that is not huge but could be collapsed.");
  process_family(a, out, COLLAPSED, "hugify_agent_process_collapsed_bytes_total", "counter",
                 "Bytes the agent put on huge pages in a process (windows collapsed).");
  process_family(a, out, FAILURES, "hugify_agent_process_collapse_failures_total", "counter",
                 "2 MiB windows the kernel refused to collapse, by errno.");
  process_family(a, out, LASTING, "hugify_agent_process_lasting_ratio", "gauge",
                 "Share of the bytes the agent collapsed that were still huge 1 and 10 passes later.");
  process_family(a, out, RECOLLAPSED, "hugify_agent_process_recollapsed_bytes_total", "counter",
                 "Bytes collapsed again: windows the agent had collapsed before and that were split since.");
  process_family(a, out, UNDONE, "hugify_agent_process_undone_bytes_total", "counter",
                 "Collapsed bytes found split again within a few passes (the allocator gave the memory back).");
  process_family(a, out, BLOAT, "hugify_agent_process_bloat_bytes_total", "counter",
                 "Bytes the agent's collapses zero-filled: per window collapsed, 2 MiB minus the bytes present before.");
  process_family(a, out, BACKED_OFF, "hugify_agent_process_churn_backoff", "gauge",
                 "1 while the process is backed off because its collapses do not last.");
  prometheus_family(out, "hugify_agent_selected_processes", "gauge", "Processes selected in the last pass.");
  prometheus_sample(out, "hugify_agent_selected_processes", NULL, (double)a->process_count);
  prometheus_family(out, "hugify_agent_collapsed_bytes_total", "counter", "Bytes the agent put on huge pages.");
  prometheus_sample(out, "hugify_agent_collapsed_bytes_total", NULL, (double)a->collapsed_bytes);
  prometheus_family(out, "hugify_agent_recollapsed_bytes_total", "counter", "Bytes collapsed again after a split.");
  prometheus_sample(out, "hugify_agent_recollapsed_bytes_total", NULL, (double)a->recollapsed_bytes);
  prometheus_family(out, "hugify_agent_bloat_bytes_total", "counter", "Bytes the agent's collapses zero-filled.");
  prometheus_sample(out, "hugify_agent_bloat_bytes_total", NULL, (double)a->bloat_bytes);
  prometheus_family(out, "hugify_agent_churn_backoffs_total", "counter",
                    "Times a process was backed off because its collapses did not last.");
  prometheus_sample(out, "hugify_agent_churn_backoffs_total", NULL, (double)a->churn_backoffs);
  prometheus_histogram(out, "hugify_agent_pause_seconds",
                       "How long each collapse call held up the process it acted on (an upper bound, from its "
                       "threads' schedstat; calls while no thread of it ran are not counted).",
                       pause_bucket_bounds, PAUSE_BUCKETS, a->harm.pauses.counts, a->harm.pauses.sum);
  prometheus_family(out, "hugify_agent_longest_call_seconds", "gauge", "The longest single collapse call.");
  prometheus_sample(out, "hugify_agent_longest_call_seconds", NULL, a->harm.longest_call);
  prometheus_family(out, "hugify_agent_passes_total", "counter", "Passes over the processes.");
  prometheus_sample(out, "hugify_agent_passes_total", NULL, (double)a->passes);
  prometheus_family(out, "hugify_agent_cpu_seconds_total", "counter", "CPU time of the agent (user and system).");
  prometheus_sample(out, "hugify_agent_cpu_seconds_total", NULL, own_cpu_seconds());
  prometheus_family(out, "hugify_agent_cpu_budget_fraction", "gauge", "The CPU budget, as a fraction of one core.");
  prometheus_sample(out, "hugify_agent_cpu_budget_fraction", NULL, a->config.cpu_budget);
  prometheus_family(out, "hugify_agent_budget_stops_total", "counter", "Collapses cut short because the CPU budget was spent.");
  prometheus_sample(out, "hugify_agent_budget_stops_total", NULL, (double)a->budget_stops);
  prometheus_family(out, "hugify_agent_memory_gate_open", "gauge",
                    "1 when available memory and memory pressure allow collapsing, else 0.");
  prometheus_sample(out, "hugify_agent_memory_gate_open", NULL, a->memory_open ? 1 : 0);
  prometheus_family(out, "hugify_agent_memory_gate_closed_passes_total", "counter", "Passes without collapse because memory was short.");
  prometheus_sample(out, "hugify_agent_memory_gate_closed_passes_total", NULL, (double)a->memory_gate_closed_passes);
  prometheus_family(out, "hugify_agent_last_pass_seconds", "gauge", "Wall time of the last pass.");
  prometheus_sample(out, "hugify_agent_last_pass_seconds", NULL, a->last_pass_seconds);
  prometheus_family(out, "hugify_agent_last_pass_timestamp_seconds", "gauge", "When the last pass ended (Unix time).");
  prometheus_sample(out, "hugify_agent_last_pass_timestamp_seconds", NULL, a->last_pass_end);
}

static void publish_metrics(struct agent *a) {
  char *text = NULL;
  size_t length = 0;
  FILE *out = open_memstream(&text, &length);
  if (!out) return;
  render_metrics(a, out);
  fclose(out);
  if (a->config.metrics_file[0]) {
    char reason[512];
    /* a new file (O_EXCL|O_NOFOLLOW, 0600) in the same directory, then renamed over: readers see whole files */
    if (safe_file_replace(a->config.metrics_file, text, length, 0644, 0, reason, sizeof reason) != 0)
      fprintf(stderr, "hugify agent: metrics: %s\n", reason);
  }
  pthread_mutex_lock(&a->metrics_lock);
  free(a->metrics);
  a->metrics = text;
  a->metrics_length = length;
  pthread_mutex_unlock(&a->metrics_lock);
}

static enum MHD_Result serve_http(void *context, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload, size_t *upload_size,
                                  void **request) {
  (void)version, (void)upload, (void)upload_size, (void)request;
  struct agent *a = context;
  struct MHD_Response *response;
  unsigned status = MHD_HTTP_OK;
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
    static const char text[] = "only GET\n";
    response = MHD_create_response_from_buffer(sizeof text - 1, (void *)text, MHD_RESPMEM_PERSISTENT);
    status = MHD_HTTP_METHOD_NOT_ALLOWED;
  } else if (strcmp(url, "/metrics") == 0) {
    pthread_mutex_lock(&a->metrics_lock);
    response = MHD_create_response_from_buffer(a->metrics_length, a->metrics ? a->metrics : (char *)"",
                                               MHD_RESPMEM_MUST_COPY);
    pthread_mutex_unlock(&a->metrics_lock);
    if (response) MHD_add_response_header(response, "Content-Type", PROMETHEUS_CONTENT_TYPE);
  } else {
    static const char text[] = "hugify agent: metrics are at /metrics\n";
    response = MHD_create_response_from_buffer(sizeof text - 1, (void *)text, MHD_RESPMEM_PERSISTENT);
    status = MHD_HTTP_NOT_FOUND;
  }
  if (!response) return MHD_NO;
  enum MHD_Result rc = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return rc;
}

/* --listen [ADDR:]PORT -> a socket address (IPv4 or [IPv6]). */
static bool parse_listen(const char *text, struct sockaddr_storage *out, char *reason, size_t cap) {
  memset(out, 0, sizeof *out);
  char host[128] = "127.0.0.1";
  const char *port_text = text, *colon = strrchr(text, ':');
  if (colon) {
    size_t n = (size_t)(colon - text);
    if (n >= sizeof host) n = sizeof host - 1;
    memcpy(host, text, n);
    host[n] = '\0';
    port_text = colon + 1;
    if (host[0] == '[' && n >= 2 && host[n - 1] == ']') memmove(host, host + 1, n - 2), host[n - 2] = '\0';
  }
  uint64_t port;
  if (!parse_u64(port_text, &port) || port == 0 || port > 65535) {
    snprintf(reason, cap, "listen: '%s' has no port from 1 to 65535", text);
    return false;
  }
  struct sockaddr_in *v4 = (struct sockaddr_in *)out;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
  } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
  } else {
    snprintf(reason, cap, "listen: '%s' is not an IPv4 or [IPv6] address", host);
    return false;
  }
  return true;
}

static int start_http(struct agent *a) {
  struct sockaddr_storage address;
  char reason[256];
  if (!parse_listen(a->config.listen, &address, reason, sizeof reason)) return fail(EXIT_USAGE, COMMAND, "%s", reason);
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
  if (address.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  uint16_t port = ntohs(address.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&address)->sin6_port
                                                      : ((struct sockaddr_in *)&address)->sin_port);
  a->http = MHD_start_daemon(flags, port, NULL, NULL, serve_http, a, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address,
                             MHD_OPTION_CONNECTION_LIMIT, (unsigned)16, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
                             MHD_OPTION_END);
  if (!a->http) return fail(EXIT_SHORT, COMMAND, "cannot listen on %s: %s", a->config.listen, strerror(errno));
  return 0;
}

/* ---- output of --once and --status -------------------------------------------------------------- */

static void print_table(const struct agent *a, bool status) {
  char available[32], floor[32];
  format_bytes(a->available == UINT64_MAX ? 0 : a->available, available, sizeof available);
  format_bytes(a->config.free_floor, floor, sizeof floor);
  printf("hugify agent%s: %zu selected processes; memory %s (available %s, floor %s, pressure %.2f %%)%s%s\n",
         status ? " --status" : a->config.dry_run ? " --once --dry-run" : " --once", a->process_count,
         a->memory_open ? "allows collapsing" : "gate closed", available, floor, a->pressure.some_avg10,
         a->memory_open ? "" : ": ", a->memory_open ? "" : a->memory_reason);
  if (a->harm.pauses.count)
    printf("  pauses its collapses caused: %llu calls, longest %.1f ms, p99 <= %.1f ms (schedstat, an upper bound)\n",
           (unsigned long long)a->harm.pauses.count, a->harm.pauses.longest * 1e3,
           pause_histogram_quantile(&a->harm.pauses, 0.99) * 1e3);
  if (a->process_count == 0) return;
  static const char *const headers[] = {"pid", "comm", "resident", "huge", "share", "heap huge", "anon huge",
                                        "collapsible", "collapsed", "last action"};
  static const bool right[] = {true, false, true, true, true, true, true, true, true, false};
  struct table t;
  table_init(&t, 10, headers, right);
  for (size_t i = 0; i < a->process_count; i++) {
    const struct process_state *p = &a->processes[i];
    char pid[16], resident[32], huge[32], share[16], heap[32], anon[32], collapsible[32], collapsed[32];
    snprintf(pid, sizeof pid, "%d", (int)p->pid);
    format_bytes(p->total.resident, resident, sizeof resident);
    format_bytes(hugify_usage_huge(&p->total), huge, sizeof huge);
    format_percent(hugify_usage_huge(&p->total), p->total.resident, share, sizeof share);
    format_bytes(hugify_usage_huge(&p->classes[HUGIFY_CLASS_HEAP]), heap, sizeof heap);
    format_bytes(hugify_usage_huge(&p->classes[HUGIFY_CLASS_ANON]), anon, sizeof anon);
    format_bytes(p->collapsible, collapsible, sizeof collapsible);
    format_bytes(p->collapsed_bytes, collapsed, sizeof collapsed);
    table_row(&t, pid, p->comm, resident, huge, share, heap, anon, collapsible, collapsed,
              p->last_action[0] ? p->last_action : "-");
  }
  table_print(&t, stdout, "  ");
  table_free(&t);
  for (size_t i = 0; i < a->process_count; i++) {
    const struct process_state *p = &a->processes[i];
    const struct agent_ledger *l = &p->ledger;
    if (!l->early_checked && !l->churn_strikes) continue;
    char recollapsed[32], undone[32], bloat[32];
    format_bytes(l->recollapsed_bytes, recollapsed, sizeof recollapsed);
    format_bytes(l->undone_bytes, undone, sizeof undone);
    format_bytes(p->bloat_bytes, bloat, sizeof bloat);
    char early[16] = "-", late[16] = "-";
    if (l->early_checked) format_percent(l->early_huge, l->early_checked, early, sizeof early);
    if (l->late_checked) format_percent(l->late_huge, l->late_checked, late, sizeof late);
    printf("  %d %s: of its collapses, %s still huge a pass later, %s ten passes later; re-collapsed %s, "
           "undone %s, bloat %s\n",
           (int)p->pid, p->comm, early, late, recollapsed, undone, bloat);
    if (l->churn_strikes || l->undone_bytes)
      printf("    %s gives freed memory back inside huge pages; what would keep them: %s\n",
             agent_allocator_name(p->allocator), agent_allocator_advice(p->allocator));
  }
}

static void put_share(struct json_writer *j, const char *name, double share) {
  if (share < 0) json_put_null(j, name);
  else json_put_double(j, name, share);
}

/* Whether the agent's collapses in a process last (its ledger), and what would make them last. */
static void put_lasting(struct json_writer *j, const struct agent *a, const struct process_state *p) {
  const struct agent_ledger *l = &p->ledger;
  bool backed_off = !agent_ledger_allows(l, a->passes);
  json_open_object(j, "lasting");
  put_share(j, "huge_after_1_pass_fraction", agent_ledger_early_share(l));
  put_share(j, "huge_after_10_passes_fraction", agent_ledger_late_share(l));
  json_put_u64(j, "checked_after_1_pass_bytes", l->early_checked);
  json_put_u64(j, "checked_after_10_passes_bytes", l->late_checked);
  json_put_u64(j, "recollapsed_bytes", l->recollapsed_bytes);
  json_put_u64(j, "undone_bytes", l->undone_bytes);
  json_put_u64(j, "bloat_bytes", p->bloat_bytes);
  json_put_u64(j, "held_back_bytes", l->backed_off_bytes);
  json_put_bool(j, "backed_off", backed_off);
  json_put_u64(j, "backoff_passes_left", backed_off ? l->resume_pass - a->passes : 0);
  json_put_u64(j, "churn_strikes", l->churn_strikes);
  json_put_string(j, "allocator", agent_allocator_name(p->allocator));
  json_put_string(j, "advice", l->churn_strikes || l->undone_bytes ? agent_allocator_advice(p->allocator) : NULL);
  json_close(j);
}

/* The harm ledger's pauses: the histogram's buckets (cumulative, as in the metrics) and its summary. */
static void put_pauses(struct json_writer *j, const struct agent_harm *h) {
  json_put_double(j, "longest_call_seconds", h->longest_call);
  json_open_object(j, "pause");
  json_put_u64(j, "count", h->pauses.count);
  json_put_double(j, "longest_seconds", h->pauses.longest);
  json_put_double(j, "p99_seconds", pause_histogram_quantile(&h->pauses, 0.99));
  json_put_double(j, "total_seconds", h->pauses.sum);
  json_open_array(j, "buckets");
  uint64_t cumulative = 0;
  for (size_t k = 0; k <= PAUSE_BUCKETS; k++) {
    cumulative += h->pauses.counts[k];
    json_open_object(j, NULL);
    if (k < PAUSE_BUCKETS) json_put_double(j, "le_seconds", pause_bucket_bounds[k]);
    else json_put_null(j, "le_seconds");
    json_put_u64(j, "count", cumulative);
    json_close(j);
  }
  json_close(j);
  json_close(j);
}

static void print_json(const struct agent *a, FILE *out, const char *mode) {
  struct json_writer j;
  json_begin(&j, out);
  json_put_string(&j, "schema", "hugify.agent/1");
  json_put_string(&j, "mode", mode);
  json_put_bool(&j, "dry_run", a->config.dry_run);
  json_put_double(&j, "interval_seconds", a->config.interval);
  json_put_double(&j, "cpu_budget_fraction", a->config.cpu_budget);
  json_put_double(&j, "min_present_fraction", a->config.min_present);
  json_open_object(&j, "memory");
  json_put_bool(&j, "allows_collapse", a->memory_open);
  if (a->available == UINT64_MAX) json_put_null(&j, "available_bytes");
  else json_put_u64(&j, "available_bytes", a->available);
  json_put_u64(&j, "free_floor_bytes", a->config.free_floor);
  if (a->pressure.present) json_put_double(&j, "pressure_some_avg10_fraction", a->pressure.some_avg10 / 100);
  else json_put_null(&j, "pressure_some_avg10_fraction");
  json_put_double(&j, "max_pressure_fraction", a->config.max_pressure / 100);
  json_put_string(&j, "reason", a->memory_open ? NULL : a->memory_reason);
  json_close(&j);
  json_put_double(&j, "cpu_seconds", own_cpu_seconds());
  json_put_u64(&j, "collapsed_bytes", a->collapsed_bytes);
  json_put_u64(&j, "recollapsed_bytes", a->recollapsed_bytes);
  json_put_u64(&j, "bloat_bytes", a->bloat_bytes);
  json_put_u64(&j, "churn_backoffs", a->churn_backoffs);
  json_put_u64(&j, "budget_stops", a->budget_stops);
  put_pauses(&j, &a->harm);
  json_open_array(&j, "processes");
  for (size_t i = 0; i < a->process_count; i++) {
    const struct process_state *p = &a->processes[i];
    json_open_object(&j, NULL);
    json_put_i64(&j, "pid", p->pid);
    json_put_string(&j, "comm", p->comm);
    json_put_u64(&j, "resident_bytes", p->total.resident);
    json_put_u64(&j, "huge_bytes", hugify_usage_huge(&p->total));
    json_put_fraction(&j, "huge_fraction", hugify_usage_huge(&p->total), p->total.resident);
    json_open_object(&j, "classes");
    for (int k = 0; k < HUGIFY_CLASS_COUNT; k++) {
      json_open_object(&j, hugify_memory_class_name(k));
      json_put_u64(&j, "resident_bytes", p->classes[k].resident);
      json_put_u64(&j, "huge_bytes", hugify_usage_huge(&p->classes[k]));
      json_close(&j);
    }
    json_close(&j);
    json_put_u64(&j, "collapsible_bytes", p->collapsible);
    json_put_u64(&j, "collapsed_bytes", p->collapsed_bytes);
    json_open_object(&j, "failed_windows");
    for (size_t k = 0; k < FAILURE_KINDS && p->failures[k].reason[0]; k++)
      json_put_u64(&j, p->failures[k].reason, p->failures[k].windows);
    json_close(&j);
    json_put_string(&j, "last_action", p->last_action[0] ? p->last_action : NULL);
    put_lasting(&j, a, p);
    json_close(&j);
  }
  json_close(&j);
  json_end(&j);
}

/* ---- the command -------------------------------------------------------------------------------- */

static int check_privileges(const struct agent_config *c, bool observe_only) {
  if (probe_madv_collapse(NULL, 0) == HUGIFY_FEATURE_NO && !observe_only)
    return fail(EXIT_PRIVILEGE, COMMAND, "this kernel lacks MADV_COLLAPSE (needs Linux 6.1+)");
  if (!observe_only && !c->dry_run && !has_capability(CAP_SYS_NICE_BIT))
    return fail(EXIT_PRIVILEGE, COMMAND,
                "missing CAP_SYS_NICE: process_madvise(MADV_COLLAPSE) on another process needs it. Run as root, "
                "or grant it (systemd: AmbientCapabilities=CAP_SYS_NICE CAP_SYS_PTRACE; or setcap "
                "cap_sys_nice,cap_sys_ptrace+ep $(command -v hugify))");
  if (!has_capability(CAP_SYS_PTRACE_BIT)) {
    /* without it only our own user's processes are readable: fine when that is all that is selected */
    const struct agent_selectors *s = &c->selectors;
    bool own_only = s->uid_count > 0 && s->pid_count + s->comm_count + s->exe_count + s->cgroup_count == 0;
    for (size_t i = 0; i < s->uid_count; i++) own_only &= s->uids[i] == geteuid();
    if (!own_only)
      return fail(EXIT_PRIVILEGE, COMMAND,
                  "missing CAP_SYS_PTRACE: reading other users' memory maps (/proc/PID/smaps, pagemap) and "
                  "process_madvise on them need ptrace read access. Run as root, grant CAP_SYS_PTRACE, or select "
                  "only your own processes (--uid %u)",
                  (unsigned)geteuid());
  }
  return 0;
}

static bool any_failures(const struct agent *a) {
  for (size_t i = 0; i < a->process_count; i++)
    if (a->processes[i].failures[0].reason[0]) return true;
  return false;
}

int cmd_agent(int argc, char **argv) {
  static struct agent agent; /* large (selectors); one per process */
  struct agent *a = &agent;
  memset(a, 0, sizeof *a);
  pthread_mutex_init(&a->metrics_lock, NULL);
  int rc = parse_command_line(argc, argv, &a->cl);
  if (rc) return rc;
  if ((rc = load_config(&a->config, &a->cl, true)) != 0) return rc;
  struct agent_config *c = &a->config;
  bool status = a->cl.status;
  if ((rc = check_privileges(c, status)) != 0) return rc;
  a->cpu_mark = agent_cpu_seconds();
  agent_budget_init(&a->budget, c->cpu_budget, 60, c->interval, clock_seconds(CLOCK_MONOTONIC));

  FILE *json = NULL;
  /* --once and --status write one document; the daemon appends one per pass as it goes. */
  if (a->cl.json.wanted && !(json = status || c->once ? json_output_open(&a->cl.json, COMMAND)
                                                      : json_output_open_append(&a->cl.json, COMMAND)))
    return EXIT_USAGE;
  if (status || c->once) {
    run_pass(a, !status);
    if (!status) publish_metrics(a);
    if (json_output_text(&a->cl.json)) print_table(a, status);
    if (json) {
      print_json(a, json, status ? "status" : "once");
      if (!json_output_close(json, &a->cl.json, COMMAND)) return EXIT_SHORT;
    }
    return !status && any_failures(a) ? EXIT_SHORT : EXIT_DONE;
  }

  /* The daemon: signals are taken synchronously between passes (and checked between kernel calls). */
  sigemptyset(&a->signals);
  sigaddset(&a->signals, SIGTERM);
  sigaddset(&a->signals, SIGINT);
  sigaddset(&a->signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &a->signals, NULL); /* before the HTTP thread starts: it inherits the mask */
  if (c->listen[0] && (rc = start_http(a)) != 0) {
    json_output_close(json, &a->cl.json, COMMAND);
    return rc;
  }
  fprintf(stderr, "hugify agent: started (pid %d): interval %.3g s, CPU budget %.3g %% of a core, bloat guard %.3g %%%s%s%s\n",
          (int)getpid(), c->interval, c->cpu_budget * 100, c->min_present * 100, c->dry_run ? ", dry run" : "",
          c->listen[0] ? ", metrics on http://" : "", c->listen);
  while (!a->stop_requested) {
    agent_budget_refill(&a->budget, clock_seconds(CLOCK_MONOTONIC));
    if (agent_budget_allows(&a->budget)) {
      uint64_t before = a->collapsed_bytes;
      run_pass(a, true);
      if (a->collapsed_bytes != before) {
        char made[32];
        format_bytes(a->collapsed_bytes - before, made, sizeof made);
        fprintf(stderr, "hugify agent: pass %llu: collapsed %s over %zu selected processes\n",
                (unsigned long long)a->passes, made, a->process_count);
      }
    }
    publish_metrics(a);
    if (json) print_json(a, json, "pass"), fflush(json);
    double deadline = clock_seconds(CLOCK_MONOTONIC) + c->interval;
    for (;;) {
      double left = deadline - clock_seconds(CLOCK_MONOTONIC);
      if (left <= 0) break;
      struct timespec wait = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
      int signal = sigtimedwait(&a->signals, NULL, &wait);
      if (signal == SIGTERM || signal == SIGINT) a->stop_requested = true;
      else if (signal == SIGHUP) {
        struct agent_config fresh;
        if (load_config(&fresh, &a->cl, false) == 0) {
          bool listen_changed = strcmp(fresh.listen, c->listen) != 0;
          *c = fresh;
          a->budget.fraction = c->cpu_budget;
          for (size_t i = 0; i < a->process_count; i++) a->processes[i].idle_signature = 0;
          fprintf(stderr, "hugify agent: configuration reloaded%s\n",
                  listen_changed ? " (a new --listen address takes effect at restart)" : "");
        } else {
          fprintf(stderr, "hugify agent: reload failed, keeping the old configuration: %s\n", fresh.error);
        }
        continue; /* the rest of the interval */
      } else if (signal < 0 && errno == EINTR) continue;
      break;
    }
  }
  if (a->http) MHD_stop_daemon(a->http);
  publish_metrics(a);
  if (json && !json_output_close(json, &a->cl.json, COMMAND)) return EXIT_SHORT;
  fprintf(stderr, "hugify agent: stopped after %llu passes, %.3f s CPU\n", (unsigned long long)a->passes,
          own_cpu_seconds());
  for (size_t i = 0; i < a->process_count; i++) agent_ledger_free(&a->processes[i].ledger);
  free(a->processes);
  free(a->metrics);
  return EXIT_DONE;
}
