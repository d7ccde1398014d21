/* output.c - what every command shares on the command line: messages, usage, progress, the --json option. */
#include <errno.h>
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

/* ---- --json / --json=FILE ------------------------------------------------------------------------- */

int json_output_option(const char *command, const char *arg, struct json_output *o) {
  if (strcmp(arg, "--json") == 0) {
    o->wanted = true;
    o->path = NULL;
    return 1;
  }
  if (strncmp(arg, "--json=", 7) != 0) return 0;
  const char *path = arg + 7;
  if (path[0] == '\0') {
    usage_error(command, "--json=FILE needs a file name ('--json=-' or '--json' for stdout)");
    return -1;
  }
  o->wanted = true;
  o->path = strcmp(path, "-") == 0 ? NULL : path;
  return 1;
}

FILE *json_output_open(const struct json_output *o, const char *command) {
  if (!o->wanted) return NULL;
  if (!o->path) return stdout;
  FILE *out = fopen(o->path, "we");
  if (!out) fail(EXIT_USAGE, command, "cannot write the JSON to %s: %s", o->path, strerror(errno));
  return out;
}

bool json_output_close(FILE *out, const struct json_output *o, const char *command) {
  if (!out) return true;
  bool ok = !ferror(out);
  if (out == stdout) ok = fflush(out) == 0 && ok;
  else ok = fclose(out) == 0 && ok;
  if (!ok) fail(EXIT_SHORT, command, "could not write the JSON to %s", o->path ? o->path : "stdout");
  return ok;
}
