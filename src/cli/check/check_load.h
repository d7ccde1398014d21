/* SPDX-License-Identifier: MIT */
/* check_load.h - `hugify check --load`: how one measured run of a server happens. check.c runs the rounds,
 * the configurations and the verdict as for any command; in load mode each run is: start the server
 * (through `hugify run` for a configuration), wait until it is ready, run the load command, take its score,
 * stop the server (SIGTERM, then SIGKILL), and measure the server's CPU time. */
#ifndef HUGIFY_CHECK_LOAD_H
#define HUGIFY_CHECK_LOAD_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

#include "load_output.h"

struct load_options {
  const char *load_command;   /* --load: run with /bin/sh -c; NULL: not load mode */
  int ready_port;             /* --ready-port PORT (127.0.0.1), 0: not given */
  const char *ready_command;  /* --ready CMD (sh -c, exit 0 = ready) */
  const char *score_pattern;  /* --score REGEX (POSIX extended; the first group, else the match, is the number) */
  double ready_timeout;       /* --ready-timeout SECONDS (default 60) */
  double stop_timeout;        /* --stop-timeout SECONDS before SIGKILL (default 10) */
  regex_t score;              /* compiled score_pattern */
  bool score_compiled;
  /* Latency: --latency (an index of load_latency_choices: auto, a tool, or off), or the user's patterns
   * --latency-p50/-p99/-max (POSIX extended; group 1 the number, group 2 its unit if any) with
   * --latency-unit (an index of load_latency_units) for numbers without a unit. */
  int latency_choice;
  const char *latency_pattern[3];
  int latency_unit;
  enum load_tool latency_tool;      /* from latency_choice: NONE = recognise any, REGEX = the patterns */
  bool latency_off;                 /* --latency off */
  bool latency_required;            /* a tool or patterns were named: a round without figures fails */
  regex_t latency_regex[3];
  bool latency_compiled[3];
};

/* The words --latency and --latency-unit take (NULL-terminated), for check's option table. */
extern const char *const load_latency_choices[];
extern const char *const load_latency_units[];

/* Defaults. The options themselves are in check's option table (check.c). */
void load_options_init(struct load_options *options);
/* After all options: the combination is valid (--load needs --ready-port or --ready; the others need
 * --load), the score pattern compiles. EXIT_DONE or EXIT_USAGE (printed). */
int load_options_check(struct load_options *options);
void load_options_free(struct load_options *options);

struct load_result {
  double seconds;         /* what the verdict compares, lower is better: 1 / score, or the load's wall time */
  double score;           /* the number --score took from the load's output; NaN without --score */
  double load_seconds;    /* wall time of the load command */
  double ready_seconds;   /* from the server's start until it was ready */
  double server_cpu_seconds, server_system_seconds; /* the server's user + system, and system alone */
  bool server_killed;     /* SIGTERM was not enough */
  struct load_latency latency; /* what the load printed about latency (NaN figures when nothing) */
};

/* One run: server_argv (NULL-terminated, the whole command line, `hugify run ... --` included for a
 * configuration), with the "NAME=VALUE" of server_set (NULL-terminated, or NULL) in its environment and its
 * output appended to server_log_fd; the load's output to load_log_fd. 0 done, or
 * EXIT_SHORT with `failure` saying what happened and the end of the server's log (server not ready, died
 * during the load, load failed, no score, no latency where a tool or patterns were named), or 130 when hugify was interrupted. The server is stopped in
 * every case. */
int load_round(const struct load_options *options, const char *const *server_argv, const char *const *server_set,
               int server_log_fd, int load_log_fd, struct load_result *result, char *failure, size_t cap);

/* SIGINT, SIGTERM and SIGHUP stop every server and load first (then hugify exits 130). */
void load_install_signal_handlers(void);

#endif
