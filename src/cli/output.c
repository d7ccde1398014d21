/* SPDX-License-Identifier: MIT */
/* output.c - what every command shares on the command line: messages, usage, progress, the --json option. */
#include <errno.h>
#include <limits.h>
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

int print_command_help(const struct command_help *help, FILE *out) {
  fputs(help->synopsis, out);
  if (help->options) option_table_help(help->options, out);
  if (help->after) fputs(help->after, out);
  return EXIT_DONE;
}

int parse_command_options(const char *command, const struct option_spec *options, enum option_mode mode, int argc,
                       char **argv, void *values, struct option_result *result) {
  if (option_table_parse(options, mode, argc, argv, values, result) == 0) return EXIT_DONE;
  return usage_error(command, "%s", result->error);
}

int exit_code_for(int rc) {
  switch (-rc) {
  case 0: return EXIT_DONE;
  case EPERM: case EACCES: case ENOSYS: case EOPNOTSUPP: return EXIT_PRIVILEGE;
  case EINVAL: return EXIT_USAGE;
  default: return EXIT_SHORT;
  }
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

FILE *json_output_open(struct json_output *o, const char *command) {
  if (!o->wanted) return NULL;
  if (!o->path) return stdout;
  return output_file_open(&o->file, o->path, command, "--json", "or use --json for stdout");
}

FILE *json_output_open_append(struct json_output *o, const char *command) {
  if (!o->wanted) return NULL;
  if (!o->path) return stdout;
  return output_file_open_append(&o->file, o->path, command, "--json", "or use --json for stdout");
}

bool json_output_close(FILE *out, struct json_output *o, const char *command) {
  if (!out) return true;
  if (out == stdout) {
    bool ok = !ferror(out) && fflush(out) == 0;
    if (!ok) fail(EXIT_SHORT, command, "could not write the JSON to stdout");
    return ok;
  }
  return output_file_close(&o->file, command);
}

/* ---- files named for output ------------------------------------------------------------------------ */

int output_file_check(const char *path, const char *command, const char *option, const char *instead,
                      enum safe_file_kind *kind) {
  enum safe_file_kind now = safe_file_kind(path);
  if (kind) *kind = now;
  switch (now) {
  case SAFE_FILE_LINK:
    return usage_error(command, "%s %s is a symbolic link: hugify never writes through a link (name the file "
                       "itself, %s)", option, path, instead);
  case SAFE_FILE_OTHER:
    return usage_error(command, "%s %s is a directory, block device or socket, not a file", option, path);
  case SAFE_FILE_ERROR:
    return usage_error(command, "%s %s: %s", option, path, strerror(errno));
  default:
    return EXIT_DONE;
  }
}

FILE *output_file_open(struct output_file *f, const char *path, const char *command, const char *option,
                       const char *instead) {
  memset(f, 0, sizeof *f);
  enum safe_file_kind kind;
  if (output_file_check(path, command, option, instead, &kind) != EXIT_DONE) return NULL;
  if (kind == SAFE_FILE_ABSENT || kind == SAFE_FILE_REGULAR) {
    /* The new file is made in the target's directory: say now, not after the work, when that cannot be. */
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
    if (access(dir, W_OK | X_OK) != 0) {
      usage_error(command, "%s: cannot write %s: %s: %s", option, path, dir, strerror(errno));
      return NULL;
    }
  }
  f->path = path;
  f->stream = open_memstream(&f->buffer, &f->length);
  if (!f->stream) fail(EXIT_SHORT, command, "out of memory for %s", path);
  return f->stream;
}

FILE *output_file_open_append(struct output_file *f, const char *path, const char *command, const char *option,
                              const char *instead) {
  memset(f, 0, sizeof *f);
  if (output_file_check(path, command, option, instead, NULL) != EXIT_DONE) return NULL;
  char reason[256] = "";
  int fd = safe_file_open_append(path, reason, sizeof reason);
  if (fd < 0) {
    usage_error(command, "%s: cannot write %s: %s", option, path, reason[0] ? reason : strerror(-fd));
    return NULL;
  }
  f->path = path;
  f->appending = true;
  f->stream = fdopen(fd, "a");
  if (!f->stream) {
    close(fd);
    fail(EXIT_SHORT, command, "out of memory for %s", path);
  }
  return f->stream;
}

bool output_file_close(struct output_file *f, const char *command) {
  if (!f->stream) return true;
  bool ok = !ferror(f->stream);
  ok = fclose(f->stream) == 0 && ok;
  f->stream = NULL;
  int rc = ok ? 0 : -(errno ? errno : EIO);
  char reason[256] = "";
  if (ok && !f->appending)
    rc = safe_file_replace(f->path, f->buffer, f->length, 0644, SAFE_FILE_ALLOW_DEVICE, reason, sizeof reason);
  if (rc != 0) fail(EXIT_SHORT, command, "could not write %s: %s", f->path, reason[0] ? reason : strerror(-rc));
  free(f->buffer);
  f->buffer = NULL;
  return rc == 0;
}
