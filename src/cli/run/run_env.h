/* SPDX-License-Identifier: MIT */
/* run_env.h - the environment `hugify run` gives a program, built in one place for the two commands that
 * need it: `run` sets it and execs the program; `env` prints it for systemd, containers and shells. The
 * preload (src/preload) reads only this environment, so a program behaves the same either way. */
#ifndef HUGIFY_RUN_ENV_H
#define HUGIFY_RUN_ENV_H

#include <limits.h>
#include <stdbool.h>

#include "elf_image.h"
#include "inspect.h"
#include "options.h"
#include "parse_options.h"
#include "safe_file.h"

/* The run options (`hugify run --help`), shared by `run` and `env`: the first member of each command's
 * argument struct (the callbacks below take the struct as its run_settings), and RUN_SETTINGS_OPTIONS rows
 * in each command's option table. */
struct run_settings {
  bool verbose;
  int text;           /* --text: enum text_mode, the index in run_text_words: off, on, auto (the default:
                         once the process used HUGIFY_TEXT_AFTER_MS of CPU) */
  enum heap_mode heap;
  const char *report; /* NULL: no report */
};
void run_settings_default(struct run_settings *settings);
extern const char *const run_text_words[]; /* "off", "on", "auto": enum text_mode's names, in its order */
/* "auto", "on" or "off": the --text value of a mode. */
const char *run_text_mode_name(enum text_mode mode);
/* option_set_fn (parse_options.h) of --heap (options_parse_heap) and --report (a file, or -). */
int run_settings_set_heap(void *settings, const char *value);
int run_settings_set_report(void *settings, const char *value);

#define RUN_SETTINGS_OPTIONS(type)                                                                                   \
  OPT_CALLBACK_WORDS("heap", "MODE", run_settings_set_heap, options_heap_words,                                     \
                     "auto, thp, hugetlb, off, mimalloc, jemalloc or tcmalloc",                                    \
                     "where the heap goes (default auto; the modes are below)"),                                   \
      OPT_ENUM("text", type, settings.text, "auto|on|off", run_text_words,                                         \
               "copy the program's code and its shared objects' onto huge pages: auto (the\n"                 \
               "default) once the process has used 200 ms of CPU (HUGIFY_TEXT_AFTER_MS), so a\n"               \
               "short program never pays for it; on: before main"),                                             \
      OPT_CALLBACK("report", "FILE|-", run_settings_set_report, "a file name or -", 0,                               \
                   "at exit, write a JSON report (schema hugify.report/2, docs/run.md) to FILE;\n"                  \
                   "child processes write FILE.<pid>; -: the report as text on stderr (stdout is CMD's)"),          \
      OPT_FLAG("verbose", 'v', type, settings.verbose,                                                              \
               "one stderr line per fallback inside the program, and what hugify set up")

/* After parsing: --json=FILE is --report FILE, --json (or --json=-) is --report - as JSON. EXIT_DONE, or
 * EXIT_USAGE (printed as `command`'s) when both name a report. *json_report: the report is JSON on stderr. */
struct json_output;
int run_settings_take_json(const char *command, struct run_settings *settings, const struct json_output *json,
                           bool *json_report);

#define RUN_ENV_MAX_VARIABLES 16
struct run_environment {
  enum heap_mode heap;          /* the heap mode as it will run on this machine (after the THP/pool check) */
  char preload[PATH_MAX];       /* libhugify-preload.so or libhugify-preload-musl.so, absolute; "": none */
  char allocator[PATH_MAX];     /* --heap mimalloc|jemalloc|tcmalloc: the allocator library, else "" */
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

/* What a script runs, from its first 256 bytes: its interpreter ("#!/bin/sh -e" -> "/bin/sh"), or with
 * `through_env` the program "#!/usr/bin/env python3" looks up ("python3"). False when the file is not a
 * script (or cannot be read). */
bool run_script_interpreter(const char *path, bool through_env, char *out, size_t cap);
/* What the ELF file `binary` says of how run can reach the program: its C library by its interpreter (glibc
 * when it cannot be read: the preload as always), whether it is a Go program, and why nothing can be preloaded
 * into it (`outside`: statically linked, or a C library hugify has no preload for; NULL when the preload
 * can): then run collapses its memory from outside (run_outside.c) and check compares plain with that. */
struct run_program_elf {
  enum elf_libc libc;
  bool go;
  const char *outside;
  char interpreter[256]; /* "" none */
};
void run_program_elf(const char *binary, struct run_program_elf *out);

/* The runtime whose own allocator will hold the program's data, by its file's name or else its script's
 * program's ("python3.11", a pyenv shim named python3, "#!/usr/bin/env python3" -> ALLOCATOR_PYMALLOC);
 * UNKNOWN when the names say none. */
enum allocator_kind run_program_runtime(const char *path);

/* Build the environment from the settings and the current environment (what the user set in
 * GLIBC_TUNABLES, MALLOC_CONF, LD_PRELOAD... wins); HUGIFY_REPORT is left to the caller (unset by default):
 * `run` points it at a private directory and sums the reports (run_tree.c), `env` at the user's file.
 * The preload is the one for `libc`, the C library of `program` (its interpreter: elf_libc_of_interpreter):
 * glibc's (also for a static program), musl's (libhugify-preload-musl.so beside it; when it is not
 * installed, none, said on stderr), none for another C library. `env` gives ELF_LIBC_GLIBC: its environment
 * reaches programs it does not know, and musl's loader loads the glibc preload too (preload_libc.c).
 * Messages go to stderr as `command`'s; returns EXIT_DONE, or the exit code of a failure already printed
 * (3: the glibc preload or the allocator is missing, or out of memory). Free with run_environment_free. */
int run_environment_build(const char *command, const struct run_settings *settings, enum elf_libc libc,
                          const char *program, struct run_environment *out);
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
