/* SPDX-License-Identifier: MIT */
/* agent_config.c - the agent's settings: one option table for the command line and the configuration
 * file (inih), so a key of the file and its option cannot drift apart; --help from the same table. */
#include <errno.h>
#include <ini.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "safe_file.h"
#include "units.h"

static void config_defaults(struct agent_config *c) {
  memset(c, 0, sizeof *c);
  c->selectors.min_rss = (uint64_t)16 * 1024 * 1024;
  c->interval = 10;
  c->metrics_cgroups = 20;
  c->cpu_budget_percent = 2;
  c->min_present_percent = 50;
  c->free_floor = (uint64_t)512 * 1024 * 1024;
  c->max_pressure = 10;
  /* root's daemon leaves its ledger where --status finds it; another user names a file (--state-file) */
  if (geteuid() == 0) snprintf(c->state_file, sizeof c->state_file, "%s", AGENT_STATE_FILE_DEFAULT);
}

/* The list options' stores (option_set_fn): one entry per --pid, --comm... (or per line of the file). */
static int add_pid(void *values, const char *value) {
  struct agent_selectors *s = &((struct agent_config *)values)->selectors;
  uint64_t u;
  if (!parse_count(value, 1, INT_MAX, &u)) return -EINVAL;
  if (s->pid_count >= AGENT_SELECTOR_MAX) return -ENOSPC;
  s->pids[s->pid_count++] = (pid_t)u;
  return 0;
}

static int add_uid(void *values, const char *value) {
  struct agent_selectors *s = &((struct agent_config *)values)->selectors;
  uint64_t u;
  if (!parse_count(value, 0, UINT32_MAX - 1, &u)) return -EINVAL;
  if (s->uid_count >= AGENT_SELECTOR_MAX) return -ENOSPC;
  s->uids[s->uid_count++] = (uid_t)u;
  return 0;
}

static int add_comm_to(char list[][16], size_t *count, const char *value) {
  if (!value[0] || strlen(value) > 15) return -EINVAL;
  if (*count >= AGENT_SELECTOR_MAX) return -ENOSPC;
  snprintf(list[(*count)++], 16, "%s", value);
  return 0;
}

static int add_comm(void *values, const char *value) {
  struct agent_selectors *s = &((struct agent_config *)values)->selectors;
  return add_comm_to(s->comms, &s->comm_count, value);
}

static int add_exclude_comm(void *values, const char *value) {
  struct agent_selectors *s = &((struct agent_config *)values)->selectors;
  return add_comm_to(s->exclude_comms, &s->exclude_comm_count, value);
}

static int add_path_to(char list[][AGENT_NAME_MAX], size_t *count, const char *value) {
  if (value[0] != '/' || strlen(value) >= AGENT_NAME_MAX) return -EINVAL;
  if (*count >= AGENT_SELECTOR_MAX) return -ENOSPC;
  snprintf(list[(*count)++], AGENT_NAME_MAX, "%s", value);
  return 0;
}

static int add_exe(void *values, const char *value) {
  struct agent_selectors *s = &((struct agent_config *)values)->selectors;
  return add_path_to(s->exes, &s->exe_count, value);
}

static int add_cgroup(void *values, const char *value) {
  struct agent_selectors *s = &((struct agent_config *)values)->selectors;
  return add_path_to(s->cgroups, &s->cgroup_count, value);
}

/* Copied, not pointed to: a value of the file lives only while its line is read. */
static int set_metrics_file(void *values, const char *value) {
  struct agent_config *c = values;
  if (strlen(value) >= sizeof c->metrics_file) return -EINVAL;
  snprintf(c->metrics_file, sizeof c->metrics_file, "%s", value);
  return 0;
}

/* "none": no state file (the daemon writes none, --status reads none). */
static int set_state_file(void *values, const char *value) {
  struct agent_config *c = values;
  if (!value[0] || strlen(value) >= sizeof c->state_file) return -EINVAL;
  snprintf(c->state_file, sizeof c->state_file, "%s", strcmp(value, "none") == 0 ? "" : value);
  return 0;
}

static int set_listen(void *values, const char *value) {
  struct agent_config *c = values;
  if (strlen(value) >= sizeof c->listen) return -EINVAL;
  snprintf(c->listen, sizeof c->listen, "%s", value);
  return 0;
}

static const char *const heat_names[] = {"auto", "damon", "soft-dirty", "none", NULL}; /* enum heat_mode */

static const struct option_spec agent_options[] = {
    OPT_GROUP("Which processes"),
    OPT_CALLBACK("pid", "PID", add_pid, "a process id", AGENT_SELECTOR_MAX, "this process"),
    OPT_CALLBACK("comm", "NAME", add_comm, "a command name of 1 to 15 bytes, as in /proc/PID/comm", AGENT_SELECTOR_MAX,
                 "processes named NAME (/proc/PID/comm)"),
    OPT_CALLBACK("exe", "PATH", add_exe, "an absolute path", AGENT_SELECTOR_MAX,
                 "processes running the executable PATH"),
    OPT_CALLBACK("cgroup", "PATH", add_cgroup, "an absolute path", AGENT_SELECTOR_MAX,
                 "processes in the cgroup v2 PATH or below (e.g. /system.slice/redis.service)"),
    OPT_CALLBACK("uid", "UID", add_uid, "a user id", AGENT_SELECTOR_MAX, "processes of user UID"),
    OPT_SIZE("min-rss", struct agent_config, selectors.min_rss, "SIZE", 0,
             "only processes with at least SIZE resident (default 16M)"),
    OPT_CALLBACK("exclude-comm", "NAME", add_exclude_comm, "a command name of 1 to 15 bytes, as in /proc/PID/comm",
                 AGENT_SELECTOR_MAX, "never processes named NAME"),
    OPT_GROUP("How"),
    OPT_DECIMAL("interval", struct agent_config, interval, "SECONDS", 0.05, 86400,
                "time between passes (default 10)"),
    OPT_DECIMAL("cpu-budget", struct agent_config, cpu_budget_percent, "PERCENT", 0.01, 100,
                "CPU the agent may use, in percent of one core, averaged over a minute (default 2)"),
    OPT_DECIMAL("min-present", struct agent_config, min_present_percent, "PERCENT", 0, 100,
                "a window is collapsed only when this share of its pages is present (default 50:\n"
                "the bloat guard; 100 never adds memory)"),
    OPT_SIZE("free-floor", struct agent_config, free_floor, "SIZE", 0,
             "no collapse while MemAvailable is below SIZE (default 512M)"),
    OPT_DECIMAL("max-pressure", struct agent_config, max_pressure, "PERCENT", 0, 100,
                "no collapse while memory pressure (PSI some avg10) is above this (default 10)"),
    OPT_ENUM("heat", struct agent_config, heat, "auto|damon|soft-dirty|none", heat_names,
             "which memory goes first: the hottest, by DAMON's access frequency (Linux 5.18+,\n"
             "CONFIG_DAMON_VADDR) or the soft-dirty bits of what was written (CONFIG_MEM_SOFT_DIRTY);\n"
             "none: the densest first (default auto: DAMON where the kernel has it, else none;\n"
             "soft-dirty only when asked: it leaves memory that is only read on 4 KiB pages)"),
    OPT_FLAG("first-touch", 0, struct agent_config, first_touch,
             "mark the hot regions of the selected processes MADV_HUGEPAGE (DAMON's action 'hugepage',\n"
             "in the agent's own kdamond), so memory faulted there later is huge under THP 'madvise';\n"
             "only regions of 2 MiB+ accessed at least as densely as --min-present (needs --heat\n"
             "auto|damon with DAMON, Linux 5.18+; off by default; not with --once)"),
    OPT_FLAG("dry-run", 0, struct agent_config, dry_run, "decide and report, collapse nothing"),
    OPT_FLAG("once", 0, struct agent_config, once,
             "one pass, then exit (cron, CI, tests); the CPU budget does not limit it"),
    OPT_GROUP("Output"),
    OPT_CALLBACK("metrics-file", "FILE", set_metrics_file, "a file name", 0,
                 "Prometheus text format, replaced atomically after every pass (for node_exporter's\n"
                 "textfile collector: FILE ending in .prom in its directory)"),
    OPT_COUNT("metrics-cgroups", struct agent_config, metrics_cgroups, "N", 0, 1000,
              "the N cgroups with most memory that is or could be on huge pages get series of\n"
              "their own; the others are summed as cgroup=\"other\" (default 20; docs/agent.md)"),
    OPT_CALLBACK("state-file", "FILE", set_state_file, "a file name, or none", 0,
                 "the daemon's last pass (its JSON object, with the ledger of collapses that last), replaced\n"
                 "atomically after every pass; --status reads it (default for root " AGENT_STATE_FILE_DEFAULT ",\n"
                 "else none; 'none': no file)"),
    OPT_CALLBACK("listen", "[ADDR:]PORT", set_listen, "[ADDR:]PORT", 0,
                 "serve the metrics over HTTP at /metrics (ADDR defaults to 127.0.0.1)"),
    OPT_FLAG("status", 0, struct agent_config, status,
             "one observation pass, no collapse: a table of the selected processes, with the running\n"
             "daemon's ledger (whether its collapses last) from --state-file when that is fresh"),
    OPT_JSON(struct agent_config, json, "JSON (schema hugify.agent/1, docs/agent.md) instead of the text, or to FILE"),
    OPT_STRING("config", struct agent_config, config_path, "FILE",
               "INI file of the same settings: one 'name = value' per line, names as the options\n"
               "without '--' (repeat a name for lists); the command line adds to it and wins"),
    OPT_END,
};

/* Options that are not settings of the file: which file, and what this one run prints. */
static bool command_line_only(const char *name) {
  return !strcmp(name, "config") || !strcmp(name, "status");
}

const struct command_help help_agent = {
    "usage: hugify agent [--config FILE] [--pid PID]... [--comm NAME]... [--exe PATH]... [--cgroup PATH]...\n"
    "                    [--uid UID]... [--min-rss SIZE] [--exclude-comm NAME]... [--interval SECONDS]\n"
    "                    [--cpu-budget PERCENT] [--min-present PERCENT] [--free-floor SIZE]\n"
    "                    [--max-pressure PERCENT] [--heat auto|damon|soft-dirty|none] [--first-touch]\n"
    "                    [--metrics-file FILE] [--state-file FILE|none]\n"
    "                    [--listen [ADDR:]PORT]"
" [--once] [--dry-run] [--status] [--json[=FILE]]\n"
    "\n"
    "Keep long-running processes on huge pages: every interval, put the 2 MiB windows of their anonymous\n"
    "memory that are populated enough on transparent huge pages (process_madvise + MADV_COLLAPSE), hottest\n"
    "first where the kernel tells (DAMON, soft-dirty), else densest first, within a CPU budget, and never\n"
    "while memory is short. With THP in 'madvise' mode the kernel never does this for memory a program did\n"
    "not advise; khugepaged does it slowly, and only for advised memory.\n"
    "A collapse that the program's allocator undoes (freed memory given back inside a huge page) is noticed:\n"
    "such windows and processes are backed off with growing intervals, and the agent names the allocator\n"
    "setting that would keep the huge pages (docs/agent.md, Churn).\n"
    "\n"
    "A process is selected when it matches any of the options of 'Which processes', or every process when\n"
    "none is given; exclusions win; memory a program excluded from THP is always left alone: THP disabled\n"
    "for the process, also 'except where advised' (visible only while a THP size is 'always'),\n"
    "MADV_NOHUGEPAGE.\n"
    "\n",
    agent_options,
    "\n"
    "The configuration file (--config) takes every option above but --config, --status and --json, as\n"
    "'name = value' (a flag: name = true|false; '_' may stand for '-'), before any section or in [agent].\n"
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
    "  hugify agent --status                                 ... with the running daemon's ledger (root)\n"
    "\n"
    "Exit status: 0 done (or stopped by a signal); 1 a --once pass had failures; 2 bad usage or configuration,\n"
    "or a --state-file that is not the agent's state; 3 missing privilege (CAP_SYS_NICE, CAP_SYS_PTRACE, or\n"
    "read access to the state file) or kernel feature.\n",
};

struct ini_state {
  struct agent_config *config;
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
  if (command_line_only(key)) {
    snprintf(c->error, sizeof c->error, "'%s' is an option of the command line, not a setting of the file", key);
    return 0;
  }
  struct option_result result;
  if (option_table_set(agent_options, key, value, c, &result) == 0) return 1;
  snprintf(c->error, sizeof c->error, "%s", result.error);
  return 0;
}

/* Read the config file into c (over its defaults). Returns 0 or -1 with c->error "FILE:LINE: ...". */
static int config_read_file(struct agent_config *c, const char *path) {
  struct ini_state state = {c};
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

/* Apply the command line's settings over c. Returns 0, or EXIT_USAGE (printed when `print`; c->error set). */
static int config_apply_arguments(struct agent_config *c, int argc, char **argv, bool print) {
  struct option_result result;
  if (option_table_parse(agent_options, OPTIONS_ANYWHERE, argc, argv, c, &result) != 0)
    snprintf(c->error, sizeof c->error, "%s", result.error);
  else if (result.operand_count)
    snprintf(c->error, sizeof c->error, "unexpected argument '%s'", argv[result.operands[0]]);
  else
    return 0;
  if (print) usage_error(COMMAND, "%s", c->error);
  return EXIT_USAGE;
}

int agent_parse_command_line(int argc, char **argv, struct command_line *cl) {
  static struct agent_config scratch; /* large (selectors); only what the command line says of this run */
  config_defaults(&scratch);
  int rc = config_apply_arguments(&scratch, argc, argv, true);
  if (rc) return rc;
  *cl = (struct command_line){scratch.config_path, scratch.status, scratch.json, argc, argv};
  return 0;
}

/* The whole configuration: file, then command line. Returns 0, or EXIT_USAGE with the message printed
 * (print = false: only c->error, for a reload). */
int agent_load_config(struct agent_config *c, const struct command_line *cl, bool print) {
  config_defaults(c);
  if (cl->config_path && config_read_file(c, cl->config_path) != 0) {
    if (print) fail(EXIT_USAGE, COMMAND, "bad configuration: %s", c->error);
    return EXIT_USAGE;
  }
  int rc = config_apply_arguments(c, cl->argc, cl->argv, print); /* valid at start, so valid at a reload too */
  c->cpu_budget = c->cpu_budget_percent / 100;
  c->min_present = c->min_present_percent / 100;
  return rc;
}
