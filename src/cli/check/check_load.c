/* SPDX-License-Identifier: MIT */
/* check_load.c - one measured run of a server under load (check_load.h). The server and the load each run
 * in a process group of their own (src/lib/process_group.c), so stopping one stops all it started, and a Ctrl-C
 * reaches hugify, which stops them before it exits. */
#include "check_load.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "measure.h"
#include "process_group.h"
#include "procfs.h"
#include "units.h"

#define LOAD_LOG_TAIL 2048

void load_options_init(struct load_options *options) {
  *options = (struct load_options){.ready_timeout = 60, .stop_timeout = 10};
}

const char *const load_latency_choices[] = {"auto", "redis-benchmark", "pgbench", "memcaslap", "wrk", "off", NULL};
const char *const load_latency_units[] = {"ms", "us", "ns", "s", NULL};
static const enum load_tool choice_tools[] = {LOAD_TOOL_NONE, LOAD_TOOL_REDIS_BENCHMARK, LOAD_TOOL_PGBENCH,
                                              LOAD_TOOL_MEMCASLAP, LOAD_TOOL_WRK, LOAD_TOOL_NONE};
static const double unit_seconds[] = {1e-3, 1e-6, 1e-9, 1};
static const char *const pattern_options[3] = {"--latency-p50", "--latency-p99", "--latency-max"};

static int compile_pattern(regex_t *regex, const char *option, const char *pattern) {
  int rc = regcomp(regex, pattern, REG_EXTENDED);
  if (rc == 0) return EXIT_DONE;
  char message[256];
  regerror(rc, regex, message, sizeof message);
  return usage_error("check", "%s '%s': %s", option, pattern, message);
}

/* --latency and the patterns: which parser a round uses, and whether it must find figures. */
static int latency_options_check(struct load_options *options) {
  bool patterns = options->latency_pattern[0] || options->latency_pattern[1] || options->latency_pattern[2];
  bool named = options->latency_choice != 0;
  if (patterns && named)
    return usage_error("check", "--latency %s and --latency-p50/-p99/-max exclude each other (the patterns are the "
                                "format)", load_latency_choices[options->latency_choice]);
  if (options->latency_unit != 0 && !patterns)
    return usage_error("check", "--latency-unit goes with --latency-p50, --latency-p99 or --latency-max");
  options->latency_off = load_latency_choices[options->latency_choice] && strcmp(load_latency_choices[options->latency_choice], "off") == 0;
  options->latency_tool = patterns ? LOAD_TOOL_REGEX : choice_tools[options->latency_choice];
  options->latency_required = patterns || (named && !options->latency_off);
  for (int k = 0; k < 3; k++) {
    if (!options->latency_pattern[k]) continue;
    int status = compile_pattern(&options->latency_regex[k], pattern_options[k], options->latency_pattern[k]);
    if (status != EXIT_DONE) return status;
    options->latency_compiled[k] = true;
    if (options->latency_regex[k].re_nsub < 1)
      return usage_error("check", "%s '%s': put the number in a group, e.g. 'p99=([0-9.]+)'", pattern_options[k],
                         options->latency_pattern[k]);
  }
  return EXIT_DONE;
}

int load_options_check(struct load_options *options) {
  bool latency_options = options->latency_choice || options->latency_unit || options->latency_pattern[0] ||
                         options->latency_pattern[1] || options->latency_pattern[2];
  bool server_options = options->ready_port || options->ready_command || options->score_pattern || latency_options;
  if (!options->load_command) {
    if (server_options)
      return usage_error("check", "--ready-port, --ready, --score and --latency* go with --load");
    return EXIT_DONE;
  }
  if (!options->ready_port == !options->ready_command)
    return usage_error("check", "--load needs one of --ready-port PORT or --ready CMD (how to tell the server is ready)");
  if (options->score_pattern) {
    int status = compile_pattern(&options->score, "--score", options->score_pattern);
    if (status != EXIT_DONE) return status;
    options->score_compiled = true;
  }
  return latency_options_check(options);
}

void load_options_free(struct load_options *options) {
  if (options->score_compiled) regfree(&options->score);
  options->score_compiled = false;
  for (int k = 0; k < 3; k++) {
    if (options->latency_compiled[k]) regfree(&options->latency_regex[k]);
    options->latency_compiled[k] = false;
  }
}

/* ---- signals --------------------------------------------------------------------------------------- */

static void on_signal(int signal_number) {
  (void)signal_number;
  group_signal_all(SIGTERM); /* the round in progress sees group_interrupted() and stops them in order */
}

void load_install_signal_handlers(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, NULL);
  sigaction(SIGTERM, &action, NULL);
  sigaction(SIGHUP, &action, NULL);
}

/* ---- one round ---------------------------------------------------------------------------------------- */

/* The output a file descriptor got since `offset`, at most `cap` - 1 bytes from its end. */
static void tail_since(int fd, off_t offset, char *out, size_t cap) {
  out[0] = '\0';
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= offset) return;
  off_t from = st.st_size - offset > (off_t)cap - 1 ? st.st_size - (off_t)cap + 1 : offset;
  ssize_t n = pread(fd, out, cap - 1, from);
  out[n > 0 ? n : 0] = '\0';
}

/* Everything the load wrote since `offset`, NUL-terminated (malloc'd; NULL when it cannot be read). */
static char *output_since(int fd, off_t offset) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < offset) return NULL;
  size_t size = (size_t)(st.st_size - offset);
  char *text = malloc(size + 1);
  if (!text) return NULL;
  ssize_t n = size ? pread(fd, text, size, offset) : 0;
  text[n > 0 ? n : 0] = '\0';
  for (char *p = text; p < text + (n > 0 ? n : 0); p++) if (*p == '\0') *p = '\n';
  return text;
}

/* The last match of the score pattern in the load's output: its first group, else the whole match. */
static bool take_score(const struct load_options *options, const char *output, double *score) {
  char *text = strdup(output);
  if (!text) return false;
  for (char *p = text; *p; p++) if (*p == '\r') *p = '\n'; /* progress lines */
  bool found = false;
  regmatch_t match[2];
  for (const char *p = text; *p && regexec(&options->score, p, 2, match, p == text ? 0 : REG_NOTBOL) == 0;) {
    regmatch_t *m = match[1].rm_so >= 0 ? &match[1] : &match[0];
    char number[64];
    int length = (int)(m->rm_eo - m->rm_so);
    snprintf(number, sizeof number, "%.*s", length < 63 ? length : 63, p + m->rm_so);
    char *end;
    double value = strtod(number, &end);
    if (end != number && isfinite(value)) { *score = value; found = true; }
    if (match[0].rm_eo == 0) break; /* an empty match would not advance */
    p += match[0].rm_eo;
  }
  free(text);
  return found;
}

/* The latency figures of the load's output; false when a tool or patterns were named and gave none. */
static bool take_latency(const struct load_options *options, const char *output, struct load_latency *latency) {
  load_latency_clear(latency);
  if (options->latency_off) return true;
  bool found;
  if (options->latency_tool == LOAD_TOOL_REGEX) {
    struct load_latency_patterns patterns = {
        .p50 = options->latency_compiled[0] ? &options->latency_regex[0] : NULL,
        .p99 = options->latency_compiled[1] ? &options->latency_regex[1] : NULL,
        .max = options->latency_compiled[2] ? &options->latency_regex[2] : NULL,
        .unit_seconds = unit_seconds[options->latency_unit]};
    found = parse_load_output_patterns(output, &patterns, latency);
  } else {
    found = parse_load_output(output, options->latency_tool, latency);
  }
  return found || !options->latency_required;
}

/* What --latency needs of a tool whose output had no figures. */
static const char *latency_hint(enum load_tool tool) {
  switch (tool) {
  case LOAD_TOOL_REDIS_BENCHMARK: return " (redis-benchmark prints them without -q; one test: -t get)";
  case LOAD_TOOL_PGBENCH:
    return " (pgbench prints only a mean: add --log --log-prefix=DIR/tx and print the log after it, "
           "'pgbench ... && cat DIR/tx.* && rm DIR/tx.*')";
  case LOAD_TOOL_MEMCASLAP: return " (memcaslap prints them with -S, e.g. -S 10s for a 10 s run)";
  case LOAD_TOOL_WRK: return " (wrk prints p50 and p99 with --latency)";
  default: return "";
  }
}

static int stopped(struct group_process *server, const struct load_options *options, struct load_result *result) {
  result->server_killed = group_stop(server, options->stop_timeout) == 1;
  result->server_cpu_seconds = server->user_seconds + server->system_seconds;
  result->server_system_seconds = server->system_seconds;
  return 0;
}

/* Where a round's output starts in the two logs, and the logs. */
struct round_logs {
  int server_fd, load_fd;
  off_t server_offset, load_offset;
};

/* "the load's output:\n..." and the server's, into failure after `what`. */
static void describe_failure(const struct round_logs *logs, const char *what, bool load_first, char *failure, size_t cap) {
  char server_tail[LOAD_LOG_TAIL], load_tail[LOAD_LOG_TAIL];
  tail_since(logs->server_fd, logs->server_offset, server_tail, sizeof server_tail);
  tail_since(logs->load_fd, logs->load_offset, load_tail, sizeof load_tail);
  const char *server = server_tail[0] ? server_tail : "(none)\n", *load = load_tail[0] ? load_tail : "(none)\n";
  if (load_first) snprintf(failure, cap, "%s; its output:\n%s\nthe server's output:\n%s", what, load, server);
  else snprintf(failure, cap, "%s; the server's output:\n%s\nthe load's output:\n%s", what, server, load);
}

/* Start the server and wait until it is ready. 0, EXIT_SHORT (failure says why) or 130. */
static int start_server(const struct load_options *options, const char *const *server_argv, const char *const *server_set,
                        const struct round_logs *logs, struct group_process *server, struct load_result *result,
                        char *failure, size_t cap) {
  char reason[512], server_tail[LOAD_LOG_TAIL];
  int rc = group_start(server_argv, server_set, logs->server_fd, server);
  if (rc != 0) {
    snprintf(failure, cap, "cannot start the server %s: %s", server_argv[0], strerror(-rc));
    return EXIT_SHORT;
  }
  rc = group_wait_ready(server, options->ready_port, options->ready_command, options->ready_timeout, reason, sizeof reason);
  result->ready_seconds = measure_now() - server->started;
  if (rc == 0) return 0;
  stopped(server, options, result);
  if (rc == -EINTR) return 130;
  tail_since(logs->server_fd, logs->server_offset, server_tail, sizeof server_tail);
  snprintf(failure, cap, "%s%s; the server's output:\n%s", reason,
           rc == -ETIMEDOUT ? " (raise it with --ready-timeout)" : "", server_tail[0] ? server_tail : "(none)\n");
  return EXIT_SHORT;
}

/* Run the load against the ready server, then stop the server. 0, EXIT_SHORT or 130. */
static int run_load(const struct load_options *options, const struct round_logs *logs, struct group_process *server,
                    struct load_result *result, char *failure, size_t cap) {
  char how[64], what[128];
  struct group_process load;
  int rc = group_start_shell(options->load_command, logs->load_fd, &load);
  if (rc != 0) {
    stopped(server, options, result);
    snprintf(failure, cap, "cannot start the load command: %s", strerror(-rc));
    return EXIT_SHORT;
  }
  double load_started = measure_now();
  rc = group_wait(&load, -1);
  result->load_seconds = measure_now() - load_started;
  bool load_failed = rc != 0 || !WIFEXITED(load.status) || WEXITSTATUS(load.status) != 0;
  /* A load that failed because the server died sees the connection close before the server is reaped
   * (the kernel frees its memory in between): give it a moment, so the cause is named right. */
  bool server_died = load_failed && !group_interrupted() ? group_wait(server, 2.0) == 0 : group_exited(server);
  int server_status = server->status;
  if (rc == -EINTR || group_interrupted()) {
    group_stop(&load, 1.0);
    stopped(server, options, result);
    return 130;
  }
  stopped(server, options, result);
  if (server_died) {
    group_describe_status(server_status, how, sizeof how);
    snprintf(what, sizeof what, "the server ended during the load (%s)", how);
    describe_failure(logs, what, false, failure, cap);
    return EXIT_SHORT;
  }
  if (load_failed) {
    group_describe_status(load.status, how, sizeof how);
    snprintf(what, sizeof what, "the load command failed (%s)", how);
    describe_failure(logs, what, true, failure, cap);
    return EXIT_SHORT;
  }
  return 0;
}

/* The score and the latency from the load's output. 0, or EXIT_SHORT when one that was asked for is missing. */
static int take_figures(const struct load_options *options, const struct round_logs *logs, struct load_result *result,
                        char *failure, size_t cap) {
  char load_tail[LOAD_LOG_TAIL];
  char *output = output_since(logs->load_fd, logs->load_offset);
  bool scored = !options->score_compiled || (output && take_score(options, output, &result->score) && result->score > 0);
  bool timed = output && take_latency(options, output, &result->latency);
  free(output);
  if (scored && timed) {
    result->seconds = options->score_compiled ? 1.0 / result->score : result->load_seconds;
    return EXIT_DONE;
  }
  tail_since(logs->load_fd, logs->load_offset, load_tail, sizeof load_tail);
  if (!scored)
    snprintf(failure, cap, "--score '%s' found no positive number in the load's output:\n%s", options->score_pattern,
             load_tail[0] ? load_tail : "(none)\n");
  else
    snprintf(failure, cap, "%s found no latency in the load's output%s:\n%s",
             options->latency_tool == LOAD_TOOL_REGEX ? "--latency-p50/-p99/-max" : "--latency",
             latency_hint(options->latency_tool), load_tail[0] ? load_tail : "(none)\n");
  return EXIT_SHORT;
}

int load_round(const struct load_options *options, const char *const *server_argv, const char *const *server_set,
               int server_log_fd, int load_log_fd, struct load_result *result, char *failure, size_t cap) {
  memset(result, 0, sizeof *result);
  result->score = NAN;
  load_latency_clear(&result->latency);
  failure[0] = '\0';
  struct stat st;
  struct round_logs logs = {.server_fd = server_log_fd, .load_fd = load_log_fd};
  logs.server_offset = fstat(server_log_fd, &st) == 0 ? st.st_size : 0;
  logs.load_offset = fstat(load_log_fd, &st) == 0 ? st.st_size : 0;
  struct group_process server;
  int status = start_server(options, server_argv, server_set, &logs, &server, result, failure, cap);
  if (status == 0) status = run_load(options, &logs, &server, result, failure, cap);
  if (status == 0) status = take_figures(options, &logs, result, failure, cap);
  return status;
}
