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

int load_options_check(struct load_options *options) {
  bool server_options = options->ready_port || options->ready_command || options->score_pattern;
  if (!options->load_command) {
    if (server_options) return usage_error("check", "--ready-port, --ready and --score go with --load");
    return EXIT_DONE;
  }
  if (!options->ready_port == !options->ready_command)
    return usage_error("check", "--load needs one of --ready-port PORT or --ready CMD (how to tell the server is ready)");
  if (options->score_pattern) {
    int rc = regcomp(&options->score, options->score_pattern, REG_EXTENDED);
    if (rc != 0) {
      char message[256];
      regerror(rc, &options->score, message, sizeof message);
      return usage_error("check", "--score '%s': %s", options->score_pattern, message);
    }
    options->score_compiled = true;
  }
  return EXIT_DONE;
}

void load_options_free(struct load_options *options) {
  if (options->score_compiled) regfree(&options->score);
  options->score_compiled = false;
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

/* The last match of the score pattern in the load's output: its first group, else the whole match. */
static bool take_score(const struct load_options *options, int fd, off_t offset, double *score) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= offset) return false;
  size_t size = (size_t)(st.st_size - offset);
  char *text = malloc(size + 1);
  if (!text) return false;
  ssize_t n = pread(fd, text, size, offset);
  text[n > 0 ? n : 0] = '\0';
  for (char *p = text; p < text + (n > 0 ? n : 0); p++) if (*p == '\r' || *p == '\0') *p = '\n'; /* progress lines */
  bool found = false;
  regmatch_t match[2];
  for (const char *p = text; regexec(&options->score, p, 2, match, p == text ? 0 : REG_NOTBOL) == 0;) {
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

static int stopped(struct group_process *server, const struct load_options *options, struct load_result *result) {
  result->server_killed = group_stop(server, options->stop_timeout) == 1;
  result->server_cpu_seconds = server->user_seconds + server->system_seconds;
  result->server_system_seconds = server->system_seconds;
  return 0;
}

int load_round(const struct load_options *options, const char *const *server_argv, int server_log_fd,
               int load_log_fd, struct load_result *result, char *failure, size_t cap) {
  memset(result, 0, sizeof *result);
  result->score = NAN;
  failure[0] = '\0';
  struct stat st;
  off_t server_offset = fstat(server_log_fd, &st) == 0 ? st.st_size : 0;
  off_t load_offset = fstat(load_log_fd, &st) == 0 ? st.st_size : 0;
  char server_tail[LOAD_LOG_TAIL], load_tail[LOAD_LOG_TAIL], reason[512], how[64];

  struct group_process server;
  int rc = group_start(server_argv, server_log_fd, &server);
  if (rc != 0) {
    snprintf(failure, cap, "cannot start the server %s: %s", server_argv[0], strerror(-rc));
    return EXIT_SHORT;
  }
  rc = group_wait_ready(&server, options->ready_port, options->ready_command, options->ready_timeout, reason, sizeof reason);
  result->ready_seconds = measure_now() - server.started;
  if (rc != 0) {
    stopped(&server, options, result);
    if (rc == -EINTR) return 130;
    tail_since(server_log_fd, server_offset, server_tail, sizeof server_tail);
    snprintf(failure, cap, "%s%s; the server's output:\n%s", reason,
             rc == -ETIMEDOUT ? " (raise it with --ready-timeout)" : "", server_tail[0] ? server_tail : "(none)\n");
    return EXIT_SHORT;
  }

  struct group_process load;
  rc = group_start_shell(options->load_command, load_log_fd, &load);
  if (rc != 0) {
    stopped(&server, options, result);
    snprintf(failure, cap, "cannot start the load command: %s", strerror(-rc));
    return EXIT_SHORT;
  }
  double load_started = measure_now();
  rc = group_wait(&load, -1);
  result->load_seconds = measure_now() - load_started;
  bool load_failed = rc != 0 || !WIFEXITED(load.status) || WEXITSTATUS(load.status) != 0;
  /* A load that failed because the server died sees the connection close before the server is reaped
   * (the kernel frees its memory in between): give it a moment, so the cause is named right. */
  bool server_died = load_failed && !group_interrupted() ? group_wait(&server, 2.0) == 0 : group_exited(&server);
  int server_status = server.status;
  if (rc == -EINTR || group_interrupted()) {
    group_stop(&load, 1.0);
    stopped(&server, options, result);
    return 130;
  }
  stopped(&server, options, result);
  tail_since(server_log_fd, server_offset, server_tail, sizeof server_tail);
  if (server_died) {
    group_describe_status(server_status, how, sizeof how);
    tail_since(load_log_fd, load_offset, load_tail, sizeof load_tail);
    snprintf(failure, cap, "the server ended during the load (%s); the server's output:\n%s\nthe load's output:\n%s", how,
             server_tail[0] ? server_tail : "(none)\n", load_tail[0] ? load_tail : "(none)\n");
    return EXIT_SHORT;
  }
  if (!WIFEXITED(load.status) || WEXITSTATUS(load.status) != 0) {
    group_describe_status(load.status, how, sizeof how);
    tail_since(load_log_fd, load_offset, load_tail, sizeof load_tail);
    snprintf(failure, cap, "the load command failed (%s); its output:\n%s\nthe server's output:\n%s", how,
             load_tail[0] ? load_tail : "(none)\n", server_tail[0] ? server_tail : "(none)\n");
    return EXIT_SHORT;
  }
  if (options->score_compiled) {
    if (!take_score(options, load_log_fd, load_offset, &result->score) || !(result->score > 0)) {
      tail_since(load_log_fd, load_offset, load_tail, sizeof load_tail);
      snprintf(failure, cap, "--score '%s' found no positive number in the load's output:\n%s", options->score_pattern,
               load_tail[0] ? load_tail : "(none)\n");
      return EXIT_SHORT;
    }
    result->seconds = 1.0 / result->score;
  } else {
    result->seconds = result->load_seconds;
  }
  return EXIT_DONE;
}
