/* run_env.h - the environment `hugify run` gives a program, built in one place for the two commands that
 * need it: `run` sets it and execs the program; `env` prints it for systemd, containers and shells. The
 * preload (src/preload) reads only this environment, so a program behaves the same either way. */
#ifndef HUGIFY_RUN_ENV_H
#define HUGIFY_RUN_ENV_H

#include <limits.h>
#include <stdbool.h>

#include "options.h"

/* The run options (`hugify run --help`), shared by `run` and `env`. */
struct run_settings {
  bool text, verbose, report_json;
  enum heap_mode heap;
  const char *report; /* NULL: no report */
};
void run_settings_default(struct run_settings *settings);
/* argv[*index] is one run option: consume it (and its value) and return 1; 0 when it is not a run option;
 * EXIT_USAGE (printed as `command`'s usage error) when its value is bad. */
int run_settings_option(const char *command, int argc, char **argv, int *index, struct run_settings *settings);

#define RUN_ENV_MAX_VARIABLES 16
#define RUN_ENV_VALUE_MAX 8192
struct run_environment {
  enum heap_mode heap;          /* the heap mode as it will run on this machine (after the THP/pool check) */
  char preload[PATH_MAX];       /* libhugify-preload.so, absolute */
  char allocator[PATH_MAX];     /* --heap mimalloc|jemalloc: the allocator library, else "" */
  unsigned count;
  struct {
    const char *name;
    char value[RUN_ENV_VALUE_MAX];
  } variables[RUN_ENV_MAX_VARIABLES]; /* in the order they are best read: LD_PRELOAD first */
  const char *unset[4];               /* variables the program must not inherit (a stale HUGIFY_REPORT) */
  unsigned unset_count;
};

/* Build the environment from the settings and the current environment (what the user set in
 * GLIBC_TUNABLES, MALLOC_CONF, LD_PRELOAD... wins). Messages go to stderr as `command`'s; returns
 * EXIT_DONE, or the exit code of a failure already printed (3: the preload or the allocator is missing). */
int run_environment_build(const char *command, const struct run_settings *settings, struct run_environment *out);
/* setenv/unsetenv every variable of `environment` in this process. */
void run_environment_apply(const struct run_environment *environment);

#endif
