/* cli.h - what every command file shares: the command table entry, exit codes, output helpers. */
#ifndef HUGIFY_CLI_H
#define HUGIFY_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes of every command (see ARCHITECTURE.md). */
enum {
  EXIT_DONE = 0,       /* done */
  EXIT_SHORT = 1,      /* ran, but fell short (fewer pages than asked, a failed range, ...) */
  EXIT_USAGE = 2,      /* bad usage */
  EXIT_PRIVILEGE = 3,  /* missing privilege or kernel feature */
};

struct command {
  const char *name;
  int (*run)(int argc, char **argv); /* argv[0] is the command name */
  const char *summary;               /* one line for `hugify --help` */
  const char *usage;                 /* the full text for `hugify CMD --help` / `hugify help CMD` */
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

extern const char usage_status[], usage_pool[], usage_inspect[], usage_collapse[], usage_run[], usage_check[],
    usage_bench[], usage_elf[];

/* ---- output.c: messages ---- */
/* "hugify CMD: message" on stderr; returns `code` so callers can `return fail(EXIT_USAGE, ...)`. */
int fail(int code, const char *command, const char *format, ...) __attribute__((format(printf, 3, 4)));
/* Usage error: the message, then "Try 'hugify CMD --help'." Returns EXIT_USAGE. */
int usage_error(const char *command, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* Print the usage text of a command to stdout. Returns EXIT_DONE. */
int print_usage(const char *usage);
/* True when argv has --help or -h before a "--". */
bool wants_help(int argc, char **argv);
/* Progress line on stderr (carriage-return updated), only when stderr is a terminal. done=true ends it. */
void progress(bool done, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* ---- output.c: JSON writer (streaming, commas and nesting handled, strings escaped) ---- */
struct json {
  FILE *out;
  int depth;
  bool need_comma[32];
  char closer[32];
  bool pretty;
};
void json_begin(struct json *j, FILE *out);                /* opens the top-level object */
void json_end(struct json *j);                             /* closes it, newline */
void json_object(struct json *j, const char *key);         /* key may be NULL inside arrays */
void json_array(struct json *j, const char *key);
void json_close(struct json *j);                           /* closes the innermost object/array */
void json_string(struct json *j, const char *key, const char *value); /* NULL value -> null */
void json_u64(struct json *j, const char *key, uint64_t value);
void json_i64(struct json *j, const char *key, int64_t value);
void json_double(struct json *j, const char *key, double value);    /* NaN/inf -> null */
void json_bool(struct json *j, const char *key, bool value);
void json_null(struct json *j, const char *key);

/* ---- output.c: tables (column widths computed from the content; right-aligned numbers) ---- */
#define TABLE_MAX_COLUMNS 16
struct table {
  int columns;
  const char *headers[TABLE_MAX_COLUMNS];
  bool right[TABLE_MAX_COLUMNS];
  char **cells; /* rows * columns, malloc'd copies */
  int rows, cap;
};
void table_init(struct table *t, int columns, const char *const *headers, const bool *right_aligned);
void table_row(struct table *t, ...); /* exactly `columns` const char * values */
void table_print(struct table *t, FILE *out, const char *indent);
void table_free(struct table *t);

/* ---- output.c: small formatting shared by commands ---- */
/* "12.5%" (one decimal) of part over whole; "-" when whole is 0. */
void format_percent(uint64_t part, uint64_t whole, char *out, size_t cap);
/* An address or other 64-bit value as a JSON string "0x7f12..." (JSON numbers are doubles: 53 bits). */
void json_hex(struct json *j, const char *key, uint64_t value);

#endif
