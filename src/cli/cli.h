/* SPDX-License-Identifier: MIT */
/* cli.h - what every command file shares: the command table entry, exit codes, messages, the --json option. */
#ifndef HUGIFY_CLI_H
#define HUGIFY_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "format.h"
#include "parse_options.h"
#include "safe_file.h"

/* Exit codes of every command (docs/design.md, "Exit codes"). */
enum {
  EXIT_DONE = 0,       /* done */
  EXIT_SHORT = 1,      /* ran, but fell short (fewer pages than asked, a failed range, ...) */
  EXIT_USAGE = 2,      /* bad usage */
  EXIT_PRIVILEGE = 3,  /* missing privilege or kernel feature */
};

/* A command's --help: the synopsis and description, the options block generated from its option table
 * (parse_options.h), then what follows it (notes, examples, exit status). */
struct command_help {
  const char *synopsis;
  const struct option_spec *options;
  const char *after;
};

struct command {
  const char *name;
  int (*run)(int argc, char **argv); /* argv[0] is the command name */
  const char *summary;               /* one line for `hugify --help` */
  const struct command_help *help;   /* `hugify CMD --help` / `hugify help CMD` */
};

/* Each command file defines one of these. */
int cmd_status(int argc, char **argv);
int cmd_pool(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_collapse(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_elf(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_env(int argc, char **argv);
int cmd_top(int argc, char **argv);

extern const struct command_help help_collapse, help_inspect, help_elf, help_status, help_bench, help_check, help_pool,
    help_run, help_env, help_agent, help_top;

/* ---- output.c: messages ---- */
/* "hugify CMD: message" on stderr; returns `code` so callers can `return fail(EXIT_USAGE, ...)`. */
int fail(int code, const char *command, const char *format, ...) __attribute__((format(printf, 3, 4)));
/* Usage error: the message, then "Try 'hugify CMD --help'." Returns EXIT_USAGE. */
int usage_error(const char *command, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* Print a command's --help (struct command_help) to `out`. Returns EXIT_DONE. */
int print_command_help(const struct command_help *help, FILE *out);
/* option_table_parse, and on an error its message as `command`'s usage error. EXIT_DONE or EXIT_USAGE. */
int parse_command_options(const char *command, const struct option_spec *options, enum option_mode mode, int argc,
                       char **argv, void *values, struct option_result *result);
/* The exit code of a library result (-errno), the same in every command: 0 done; -EPERM, -EACCES, -ENOSYS,
 * -EOPNOTSUPP: 3 (a privilege or kernel feature is missing); -EINVAL: 2 (what was asked cannot be); anything
 * else (-ESRCH, -ENOMEM, -EIO...): 1 (ran, but fell short). */
int exit_code_for(int rc);
/* True when argv has --help or -h before a "--". */
bool wants_help(int argc, char **argv);
/* Progress line on stderr (carriage-return updated), only when stderr is a terminal. done=true ends it. */
void progress(bool done, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* ---- output.c: files the user names for output (--json=FILE, bench --chart FILE) ----
 * They follow the file rules of safe_file.h like every file hugify writes: checked when the command starts
 * (a link is never written through; a directory, block device or socket never written), written to memory
 * while the command runs, and then put in place at once with safe_file_replace (a regular file: temporary +
 * rename, mode 0644), or written into a character device or FIFO the user named. */
struct output_file {
  const char *path;
  char *buffer; /* open_memstream's */
  size_t length;
  FILE *stream;
  bool appending; /* a stream written as it goes (the agent's per-pass JSON): appended to, not replaced */
};
/* Checks `path` (named by `option`; `instead` ends the message about a link, e.g. "--json for stdout") and
 * opens the memory stream. NULL after a usage message when the path cannot be written. */
FILE *output_file_open(struct output_file *f, const char *path, const char *command, const char *option,
                       const char *instead);
/* For output written as it goes (a daemon's records): the same check, then safe_file_open_append (a regular
 * file owned by the effective user, created 0600; appended to). NULL after a message. */
FILE *output_file_open_append(struct output_file *f, const char *path, const char *command, const char *option,
                              const char *instead);
/* Closes the stream and writes the file; false after a message when it could not be written. */
bool output_file_close(struct output_file *f, const char *command);
/* The check alone: EXIT_DONE, or EXIT_USAGE after the message. *kind (may be NULL) gets what is there. */
int output_file_check(const char *path, const char *command, const char *option, const char *instead,
                      enum safe_file_kind *kind);

/* ---- output.c: the --json option, the same in every command ----
 * --json: JSON on stdout instead of the text. --json=FILE: the text on stdout, the JSON to FILE
 * (--json=- is stdout, like --json). The JSON itself is written with the format layer (format.h). */
struct json_output {
  bool wanted;      /* --json or --json=FILE was given */
  const char *path; /* NULL: stdout, instead of the text; else FILE, besides the text */
  struct output_file file;
};
/* Whether the text goes to stdout. */
static inline bool json_output_text(const struct json_output *o) { return !o->wanted || o->path; }
/* Where the JSON goes: stdout, FILE opened for writing, or NULL when no JSON is wanted or (after a
 * message) FILE cannot be written. Commands open it before they start work, so a bad path costs nothing. */
FILE *json_output_open(struct json_output *o, const char *command);
/* The same for JSON written as it goes: FILE is appended to (output_file_open_append). */
FILE *json_output_open_append(struct json_output *o, const char *command);
/* Flush (stdout) or write FILE; false, after a message, when the JSON could not be written. */
bool json_output_close(FILE *out, struct json_output *o, const char *command);

#endif
