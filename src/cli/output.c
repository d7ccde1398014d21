/* output.c - messages, progress, JSON and tables: shared by all commands. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int fail(int code, const char *command, const char *format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, "hugify %s: ", command);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  return code;
}

int usage_error(const char *command, const char *format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, "hugify %s: ", command);
  vfprintf(stderr, format, args);
  fprintf(stderr, "\nTry 'hugify %s --help'.\n", command);
  va_end(args);
  return EXIT_USAGE;
}

int print_usage(const char *usage) {
  fputs(usage, stdout);
  return EXIT_DONE;
}

bool wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) return false;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
  }
  return false;
}

void progress(bool done, const char *format, ...) {
  static int tty = -1;
  if (tty < 0) tty = isatty(STDERR_FILENO);
  if (!tty) return;
  va_list args;
  va_start(args, format);
  fputs("\r\033[K", stderr);
  vfprintf(stderr, format, args);
  if (done) fputc('\n', stderr);
  fflush(stderr);
  va_end(args);
}

/* ---- JSON ---------------------------------------------------------------------------------------- */

static void json_indent(struct json *j) {
  fputc('\n', j->out);
  for (int i = 0; i < j->depth; i++) fputs("  ", j->out);
}

static void json_escaped(FILE *out, const char *s) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"': fputs("\\\"", out); break;
    case '\\': fputs("\\\\", out); break;
    case '\n': fputs("\\n", out); break;
    case '\t': fputs("\\t", out); break;
    case '\r': fputs("\\r", out); break;
    default:
      if (*p < 0x20) fprintf(out, "\\u%04x", *p);
      else fputc(*p, out);
    }
  }
  fputc('"', out);
}

static void json_key(struct json *j, const char *key) {
  if (j->need_comma[j->depth]) fputc(',', j->out);
  j->need_comma[j->depth] = true;
  json_indent(j);
  if (key) { json_escaped(j->out, key); fputs(": ", j->out); }
}

void json_begin(struct json *j, FILE *out) {
  memset(j, 0, sizeof *j);
  j->out = out;
  fputc('{', out);
  j->depth = 1;
}

void json_end(struct json *j) {
  while (j->depth > 1) json_close(j);
  j->depth = 0;
  fputs("\n}\n", j->out);
  fflush(j->out);
}

static void json_open(struct json *j, const char *key, char bracket) {
  json_key(j, key);
  fputc(bracket, j->out);
  if (j->depth + 1 < (int)(sizeof j->need_comma / sizeof j->need_comma[0])) j->depth++;
  j->need_comma[j->depth] = false;
  j->closer[j->depth] = bracket == '{' ? '}' : ']';
}

void json_object(struct json *j, const char *key) { json_open(j, key, '{'); }
void json_array(struct json *j, const char *key) { json_open(j, key, '['); }

void json_close(struct json *j) {
  bool had_items = j->need_comma[j->depth];
  char closer = j->closer[j->depth];
  j->depth--;
  if (had_items) json_indent(j);
  fputc(closer, j->out);
}

void json_string(struct json *j, const char *key, const char *value) {
  json_key(j, key);
  if (value) json_escaped(j->out, value);
  else fputs("null", j->out);
}
void json_u64(struct json *j, const char *key, uint64_t value) { json_key(j, key); fprintf(j->out, "%llu", (unsigned long long)value); }
void json_i64(struct json *j, const char *key, int64_t value) { json_key(j, key); fprintf(j->out, "%lld", (long long)value); }
void json_double(struct json *j, const char *key, double value) {
  json_key(j, key);
  if (isfinite(value)) fprintf(j->out, "%.6g", value);
  else fputs("null", j->out);
}
void json_bool(struct json *j, const char *key, bool value) { json_key(j, key); fputs(value ? "true" : "false", j->out); }
void json_null(struct json *j, const char *key) { json_key(j, key); fputs("null", j->out); }

/* ---- tables -------------------------------------------------------------------------------------- */

void table_init(struct table *t, int columns, const char *const *headers, const bool *right_aligned) {
  memset(t, 0, sizeof *t);
  t->columns = columns > TABLE_MAX_COLUMNS ? TABLE_MAX_COLUMNS : columns;
  for (int c = 0; c < t->columns; c++) {
    t->headers[c] = headers[c];
    t->right[c] = right_aligned ? right_aligned[c] : false;
  }
}

void table_row(struct table *t, ...) {
  if (t->rows == t->cap) {
    int cap = t->cap ? t->cap * 2 : 16;
    char **cells = realloc(t->cells, (size_t)cap * (size_t)t->columns * sizeof *cells);
    if (!cells) return;
    t->cells = cells;
    t->cap = cap;
  }
  va_list args;
  va_start(args, t);
  for (int c = 0; c < t->columns; c++) {
    const char *value = va_arg(args, const char *);
    t->cells[t->rows * t->columns + c] = strdup(value ? value : "");
  }
  va_end(args);
  t->rows++;
}

void table_print(struct table *t, FILE *out, const char *indent) {
  size_t width[TABLE_MAX_COLUMNS];
  for (int c = 0; c < t->columns; c++) {
    width[c] = strlen(t->headers[c]);
    for (int r = 0; r < t->rows; r++) {
      const char *cell = t->cells[r * t->columns + c];
      size_t len = cell ? strlen(cell) : 0;
      if (len > width[c]) width[c] = len;
    }
  }
  for (int r = -1; r < t->rows; r++) {
    fputs(indent ? indent : "", out);
    for (int c = 0; c < t->columns; c++) {
      const char *cell = r < 0 ? t->headers[c] : t->cells[r * t->columns + c];
      if (!cell) cell = "";
      bool last = c == t->columns - 1;
      if (t->right[c]) fprintf(out, "%*s", (int)width[c], cell);
      else if (last) fputs(cell, out);
      else fprintf(out, "%-*s", (int)width[c], cell);
      if (!last) fputs("  ", out);
    }
    fputc('\n', out);
  }
}

void table_free(struct table *t) {
  for (int i = 0; i < t->rows * t->columns; i++) free(t->cells[i]);
  free(t->cells);
  memset(t, 0, sizeof *t);
}

/* ---- small formatting ---------------------------------------------------------------------------- */

void format_percent(uint64_t part, uint64_t whole, char *out, size_t cap) {
  if (whole == 0) snprintf(out, cap, "-");
  else snprintf(out, cap, "%.1f%%", 100.0 * (double)part / (double)whole);
}

void json_hex(struct json *j, const char *key, uint64_t value) {
  char text[24];
  snprintf(text, sizeof text, "0x%llx", (unsigned long long)value);
  json_string(j, key, text);
}
