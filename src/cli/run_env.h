/* run_env.h - the environment `hugify run` gives a program, built in one place for the two commands that
 * need it: `run` sets it and execs the program; `env` prints it for systemd, containers and shells. The
 * preload (src/preload) reads only this environment, so a program behaves the same either way. */
#ifndef HUGIFY_RUN_ENV_H
#define HUGIFY_RUN_ENV_H

#include <limits.h>
#include <stdbool.h>

#include "options.h"
#include "safe_file.h"

/* The run options (`hugify run --help`), shared by `run` and `env`. */
struct run_settings {
  enum text_mode text; /* --text auto (default: once the process used HUGIFY_TEXT_AFTER_MS of CPU), on, off */
  bool verbose;
  enum heap_mode heap;
  const char *report; /* NULL: no report */
};
void run_settings_default(struct run_settings *settings);
/* "auto", "on" or "off": the --text value of a mode. */
const char *run_text_mode_name(enum text_mode mode);
/* argv[*index] is one run option: consume it (and its value) and return 1; 0 when it is not a run option;
 * EXIT_USAGE (printed as `command`'s usage error) when its value is bad. */
int run_settings_option(const char *command, int argc, char **argv, int *index, struct run_settings *settings);

#define RUN_ENV_MAX_VARIABLES 16
struct run_environment {
  enum heap_mode heap;          /* the heap mode as it will run on this machine (after the THP/pool check) */
  char preload[PATH_MAX];       /* libhugify-preload.so, absolute */
  char allocator[PATH_MAX];     /* --heap mimalloc|jemalloc: the allocator library, else "" */
  unsigned count;
  struct {
    const char *name;
    char *value;                      /* malloc'd, as long as it needs to be: a user's entry is never cut */
  } variables[RUN_ENV_MAX_VARIABLES]; /* in the order they are best read: LD_PRELOAD first */
  const char *unset[4];               /* variables the program must not inherit (a stale HUGIFY_REPORT) */
  unsigned unset_count;
};

/* The file execvp would run for `name` (PATH when it has no '/'): "" when there is none; *not_executable
 * when one exists but is not executable (execvp's EACCES). */
void run_find_command(const char *name, char *out, size_t cap, bool *not_executable);
/* The runtime that owns malloc in the program `binary` (elf_image.h's heap owners: a sanitizer it needs,
 * DT_NEEDED libasan.so.8, or links in, __asan_init); NULL when none or unreadable. --heap mimalloc|jemalloc
 * cannot work with one: `run` refuses, `check` skips those configurations. */
const char *run_program_heap_owner(const char *binary);

/* Build the environment from the settings and the current environment (what the user set in
 * GLIBC_TUNABLES, MALLOC_CONF, LD_PRELOAD... wins); HUGIFY_REPORT is left to the caller (unset by default):
 * `run` points it at a private directory and sums the reports (run_tree.c), `env` at the user's file.
 * Messages go to stderr as `command`'s; returns EXIT_DONE, or the exit code of a failure already printed
 * (3: the preload or the allocator is missing, or out of memory). Free with run_environment_free. */
int run_environment_build(const char *command, const struct run_settings *settings, struct run_environment *out);
/* The --report target by the file rules of safe_file.h: never a link, a directory or a block device (exit 2,
 * printed); *kind says what is there now. */
int run_report_check(const char *command, const char *report, enum safe_file_kind *kind);
/* HUGIFY_REPORT=the absolute path of `report` (or -), for a program started without `hugify run`: its
 * top-level process writes that file, the others FILE.<pid>, as the preload does under `hugify run`. */
int run_environment_add_report(const char *command, struct run_environment *environment, const char *report);
/* setenv/unsetenv every variable of `environment` in this process. EXIT_DONE, or EXIT_PRIVILEGE (printed)
 * when the environment cannot hold a value. */
int run_environment_apply(const char *command, const struct run_environment *environment);
/* The value of one of its variables, or NULL. */
const char *run_environment_get(const struct run_environment *environment, const char *name);
void run_environment_free(struct run_environment *environment);

#endif
