/* SPDX-License-Identifier: MIT */
/* env.c - hugify env: the environment `hugify run` would give a program, printed in the forms people paste
 * into what starts their servers: a shell, a systemd unit (or a drop-in installed for a unit), a docker run
 * command line, a Kubernetes container spec. The variables come from run_env.c, the same code `hugify run`
 * uses, and the preload reads nothing else, so a service started with them behaves as under `hugify run`
 * (its exit report included: the first process that loads the preload is the top-level one). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "format.h"
#include "run_env.h"
#include "safe_file.h"

enum env_form { FORM_SHELL, FORM_SYSTEMD, FORM_DOCKER, FORM_KUBERNETES };

struct env_args {
  struct run_settings settings; /* first (run_env.h): the run options */
  enum env_form form;
  bool forms[4];                /* --shell, --systemd, --docker, --kubernetes as given */
  struct json_output json;
  bool dry_run;
  const char *install, *root;
};
_Static_assert(offsetof(struct env_args, settings) == 0, "the run option callbacks take the struct as its settings");

static const struct option_spec env_options[] = {
    OPT_GROUP("Run options (as in hugify run --help)"),
    RUN_SETTINGS_OPTIONS(struct env_args),
    OPT_GROUP("Forms"),
    OPT_FLAG("shell", 0, struct env_args, forms[FORM_SHELL],
             "(default) `export NAME='value'` lines: eval \"$(hugify env)\" in a script"),
    OPT_FLAG("systemd", 0, struct env_args, forms[FORM_SYSTEMD],
             "a [Service] section with one Environment= line per variable"),
    OPT_FLAG("docker", 0, struct env_args, forms[FORM_DOCKER],
             "`docker run` options: -v mounts for the preload (it must exist inside the\n"
             "container at the same path) and one -e per variable"),
    OPT_FLAG("kubernetes", 0, struct env_args, forms[FORM_KUBERNETES],
             "a container's env: list, volumeMounts and the pod's volumes for the preload"),
    OPT_STRING("install", struct env_args, install, "UNIT",
               "write the systemd form as the drop-in\n"
               "/etc/systemd/system/UNIT.service.d/hugify.conf (replaced atomically; never through\n"
               "a symbolic link), then say how to apply it. Warns about unit settings that get in the\n"
               "way (MemoryDenyWriteExecute stops the text remap; ProtectSystem and PrivateTmp move\n"
               "or forbid the report)"),
    OPT_FLAG("dry-run", 0, struct env_args, dry_run, "with --install: print the path and the content, write nothing"),
    OPT_STRING("root", struct env_args, root, "DIR", "with --install: DIR/etc/systemd/system instead of /etc/systemd/system"),
    OPT_JSON(struct env_args, json,
             "the variables as JSON (schema hugify.env/1) instead of the text; --json=FILE: the\n"
             "text on stdout and the JSON to FILE"),
    OPT_END,
};

const struct command_help help_env = {
    "usage: hugify env [RUN OPTIONS] [--shell | --systemd | --docker | --kubernetes] [--json[=FILE]]\n"
    "       hugify env [RUN OPTIONS] --install UNIT [--dry-run] [--root DIR]\n"
    "\n"
    "Print the environment `hugify run` would give a program, to start it some other way: from systemd, a\n"
    "container runtime or a shell script. The program then behaves as under `hugify run` (same preload,\n"
    "same heap settings, same report). RUN OPTIONS are those of `hugify run`: --heap, --text, --report,\n"
    "--verbose (see hugify run --help); the heap mode is settled for this machine as `run` does.\n"
    "Every process started with it pays for what the defaults do, so they wait until a process has\n"
    "proven long-lived: the code moves once it has used 200 ms of CPU (--text auto). Measured CPU cost\n"
    "over plain (bench/run_overhead.py, docs/run.md): g++ -c of a small file 1.0x, /bin/true 1.25x\n"
    "(the preload's own start, ~0.15 ms).\n"
    "\n",
    env_options,
    "\n"
    "Exit status: 0 done; 1 the drop-in could not be written; 2 bad usage or an unsafe drop-in path\n"
    "(a symbolic link); 3 the preload or the allocator of --heap is missing, or no permission to write.\n"
    "\n"
    "Examples:\n"
    "  eval \"$(hugify env --report /tmp/app.json)\" && exec ./server\n"
    "  hugify env --install redis-server && systemctl daemon-reload && systemctl restart redis-server\n"
    "  docker run $(hugify env --docker) redis:7\n"
    "  hugify env --kubernetes --heap jemalloc\n",
};

static int parse_args(int argc, char **argv, struct env_args *args) {
  *args = (struct env_args){.form = FORM_SHELL, .root = ""};
  run_settings_default(&args->settings);
  struct option_result result;
  int rc = parse_command_options("env", env_options, OPTIONS_ANYWHERE, argc, argv, args, &result);
  if (rc != EXIT_DONE) return rc;
  if (result.operand_count) return usage_error("env", "unexpected argument '%s'", argv[result.operands[0]]);
  bool form_given = false;
  for (int form = FORM_SHELL; form <= FORM_KUBERNETES; form++) {
    if (!args->forms[form]) continue;
    if (form_given) return usage_error("env", "choose one of --shell, --systemd, --docker, --kubernetes");
    args->form = (enum env_form)form;
    form_given = true;
  }
  if (args->install && form_given && args->form != FORM_SYSTEMD)
    return usage_error("env", "--install writes the systemd form; it does not go with --shell, --docker or --kubernetes");
  if (args->install) args->form = FORM_SYSTEMD;
  if ((args->dry_run || args->root[0]) && !args->install) return usage_error("env", "--dry-run and --root go with --install");
  if (args->install && args->json.wanted) return usage_error("env", "--install prints what it wrote as text; drop --json");
  return EXIT_DONE;
}

/* ---- quoting ------------------------------------------------------------------------------------- */

/* 'value' for sh: a single quote becomes '\''. */
static void shell_quoted(FILE *out, const char *value) {
  fputc('\'', out);
  for (const char *p = value; *p; p++) {
    if (*p == '\'') fputs("'\\''", out);
    else fputc(*p, out);
  }
  fputc('\'', out);
}

/* "NAME=value" (name NULL: "value") for systemd's Environment= and for YAML: \ and " escaped; systemd also
 * expands %-specifiers in Environment=, so % is doubled there. */
static void double_quoted(FILE *out, const char *name, const char *value, bool systemd) {
  fputc('"', out);
  if (name) fprintf(out, "%s=", name);
  for (const char *p = value; *p; p++) {
    if (*p == '\\' || *p == '"') fputc('\\', out);
    if (*p == '%' && systemd) fputc('%', out);
    fputc(*p, out);
  }
  fputc('"', out);
}

/* The run options these variables stand for, for the header comment. */
static void describe_settings(FILE *out, const struct run_settings *settings, const struct run_environment *environment) {
  fprintf(out, "hugify run --heap %s --text %s", options_heap_name(environment->heap), run_text_mode_name(settings->text));
  for (unsigned i = 0; i < environment->count; i++)
    if (strcmp(environment->variables[i].name, "HUGIFY_REPORT") == 0)
      fprintf(out, " --report %s", environment->variables[i].value);
  if (settings->verbose) fputs(" --verbose", out);
}

/* Every library LD_PRELOAD names (the allocator, the preload): what a container must have at those paths. */
static unsigned preloaded_files(const struct run_environment *environment, const char *files[2]) {
  unsigned count = 0;
  if (environment->allocator[0]) files[count++] = environment->allocator;
  files[count++] = environment->preload;
  return count;
}

/* ---- the forms ----------------------------------------------------------------------------------- */

static void print_shell(FILE *out, const struct run_settings *settings, const struct run_environment *environment) {
  fputs("# the environment of `", out);
  describe_settings(out, settings, environment);
  fputs("`\n", out);
  for (unsigned i = 0; i < environment->count; i++) {
    fprintf(out, "export %s=", environment->variables[i].name);
    shell_quoted(out, environment->variables[i].value);
    fputc('\n', out);
  }
  for (unsigned i = 0; i < environment->unset_count; i++) fprintf(out, "unset %s\n", environment->unset[i]);
}

static void print_systemd(FILE *out, const struct run_settings *settings, const struct run_environment *environment,
                          const char *unit) {
  fputs("# Written by hugify env: the environment of `", out);
  describe_settings(out, settings, environment);
  fputs("`.\n", out);
  if (unit)
    fprintf(out, "# Delete this file, then `systemctl daemon-reload` and `systemctl restart %s`, to undo.\n", unit);
  fputs("[Service]\n", out);
  for (unsigned i = 0; i < environment->count; i++) {
    fputs("Environment=", out);
    double_quoted(out, environment->variables[i].name, environment->variables[i].value, true);
    fputc('\n', out);
  }
}

static void print_docker(FILE *out, const struct run_environment *environment) {
  const char *files[2];
  unsigned count = preloaded_files(environment, files);
  /* Options only, one per line, so `docker run $(hugify env --docker) IMAGE` works; a comment line would
   * not survive that, so the note goes to stderr. */
  fprintf(stderr, "hugify env: the preloaded librar%s must exist inside the container at the same path: the -v "
          "options below mount %s read-only from this machine (its glibc must be as new as this one's)\n",
          count > 1 ? "ies" : "y", count > 1 ? "them" : "it");
  for (unsigned i = 0; i < count; i++) fprintf(out, "-v %s:%s:ro\n", files[i], files[i]);
  for (unsigned i = 0; i < environment->count; i++) {
    const char *name = environment->variables[i].name, *value = environment->variables[i].value;
    /* Unquoted: $(...) splits on spaces but does not remove quotes; values never hold spaces (the preload
     * path is refused when it does) except a user's own GLIBC_TUNABLES, which is quoted then (for pasting). */
    fprintf(out, "-e ");
    if (strpbrk(value, " \t'\"\\$`")) {
      fprintf(out, "%s=", name);
      shell_quoted(out, value);
    } else {
      fprintf(out, "%s=%s", name, value);
    }
    fputc('\n', out);
  }
}

static void print_kubernetes(FILE *out, const struct run_settings *settings, const struct run_environment *environment) {
  const char *files[2];
  unsigned count = preloaded_files(environment, files);
  fputs("# hugify env --kubernetes: the environment of `", out);
  describe_settings(out, settings, environment);
  fputs("`.\n# Paste env and volumeMounts into the container, volumes into the pod spec. The preloaded\n"
        "# libraries must exist inside the container at these paths (here: mounted from the node, whose\n"
        "# glibc must be as new as the one hugify was built against; or copy them into the image).\n", out);
  fputs("env:\n", out);
  for (unsigned i = 0; i < environment->count; i++) {
    fprintf(out, "- name: %s\n  value: ", environment->variables[i].name);
    double_quoted(out, NULL, environment->variables[i].value, false);
    fputc('\n', out);
  }
  fputs("volumeMounts:\n", out);
  for (unsigned i = 0; i < count; i++)
    fprintf(out, "- name: hugify-preload-%u\n  mountPath: \"%s\"\n  readOnly: true\n", i, files[i]);
  fputs("volumes:\n", out);
  for (unsigned i = 0; i < count; i++)
    fprintf(out, "- name: hugify-preload-%u\n  hostPath:\n    path: \"%s\"\n    type: File\n", i, files[i]);
}

static void print_json(FILE *out, const struct run_settings *settings, const struct run_environment *environment,
                       enum env_form form) {
  static const char *const form_names[] = {"shell", "systemd", "docker", "kubernetes"};
  struct json_writer j;
  json_begin(&j, out, "hugify.env/1");
  json_put_string(&j, "form", form_names[form]);
  json_put_string(&j, "heap", options_heap_name(environment->heap));
  json_put_bool(&j, "text", settings->text != TEXT_OFF);
  json_put_string(&j, "text_mode", run_text_mode_name(settings->text));
  json_put_string(&j, "preload_path", environment->preload);
  json_put_string(&j, "allocator_path", environment->allocator[0] ? environment->allocator : NULL);
  json_open_object(&j, "variables");
  for (unsigned i = 0; i < environment->count; i++)
    json_put_string(&j, environment->variables[i].name, environment->variables[i].value);
  json_close(&j);
  json_open_array(&j, "unset");
  for (unsigned i = 0; i < environment->unset_count; i++) json_put_string(&j, NULL, environment->unset[i]);
  json_close(&j);
  json_end(&j);
}

/* ---- --install ------------------------------------------------------------------------------------ */

/* "redis-server" or "redis-server.service" -> "redis-server"; false for anything systemd would not take
 * as a unit name (or that could climb out of the directory). */
static bool unit_name(const char *text, char *out, size_t cap) {
  size_t length = strlen(text);
  if (length > 8 && strcmp(text + length - 8, ".service") == 0) length -= 8;
  if (length == 0 || length >= cap || length > 240 || text[0] == '.') return false;
  for (size_t i = 0; i < length; i++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.@\\", text[i])) return false;
  memcpy(out, text, length);
  out[length] = '\0';
  return true;
}

/* Read the unit's own file (template units: name@.service) and warn about settings that stand in the way. */
static void check_unit(const char *root, const char *unit, const struct run_settings *settings,
                       const struct run_environment *environment) {
  static const char *const dirs[] = {"/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system",
                                     "/usr/lib/systemd/system"};
  char name[512];
  snprintf(name, sizeof name, "%s", unit);
  char *at = strchr(name, '@');
  if (at) at[1] = '\0'; /* redis-server@6380 -> redis-server@ */
  char path[PATH_MAX], line[1024];
  FILE *f = NULL;
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0] && !f; i++) {
    snprintf(path, sizeof path, "%s%s/%s.service", root, dirs[i], name);
    f = fopen(path, "re");
  }
  if (!f) {
    fprintf(stderr, "hugify env: no unit file %s.service found; the drop-in takes effect once the unit exists\n", name);
    return;
  }
  bool report_set = false;
  for (unsigned i = 0; i < environment->count; i++)
    report_set |= strcmp(environment->variables[i].name, "HUGIFY_REPORT") == 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    char *value = strchr(line, '=');
    if (!value || line[0] == '#' || line[0] == ';') continue;
    *value++ = '\0';
    bool yes = strcmp(value, "true") == 0 || strcmp(value, "yes") == 0 || strcmp(value, "1") == 0 ||
               strcmp(value, "on") == 0;
    if (strcmp(line, "MemoryDenyWriteExecute") == 0 && yes && settings->text)
      fprintf(stderr, "hugify env: %s has MemoryDenyWriteExecute=%s: the kernel refuses the new executable mapping "
              "of the text remap there, so the code stays on 4 KiB pages (the heap is not affected); use --text off, "
              "or add MemoryDenyWriteExecute=no to the drop-in if you accept that\n", path, value);
    if (strcmp(line, "ProtectSystem") == 0 && strcmp(value, "strict") == 0 && report_set)
      fprintf(stderr, "hugify env: %s has ProtectSystem=strict: the report can only be written under one of its "
              "ReadWritePaths= directories\n", path);
    if (strcmp(line, "PrivateTmp") == 0 && yes && report_set)
      fprintf(stderr, "hugify env: %s has PrivateTmp=%s: a report under /tmp lands in the unit's private /tmp\n", path,
              value);
  }
  fclose(f);
}

/* Write `content` as DIR/hugify.conf by the file rules of safe_file.h (a fresh temporary beside it,
 * O_EXCL|O_NOFOLLOW, synced, renamed over the old one; never through a link). The drop-in directory itself
 * is created when missing and refused when it is a link or not a directory. */
static int write_drop_in(const char *directory, const char *content, size_t length) {
  struct stat st;
  if (lstat(directory, &st) == 0 && !S_ISDIR(st.st_mode))
    return fail(EXIT_USAGE, "env", "%s is %s, not a directory; refusing to write through it", directory,
                S_ISLNK(st.st_mode) ? "a symbolic link" : "a file");
  if (mkdir(directory, 0755) != 0 && errno != EEXIST)
    return fail(errno == EACCES || errno == EPERM || errno == EROFS ? EXIT_PRIVILEGE : EXIT_SHORT, "env",
                "cannot create %s: %s%s", directory, strerror(errno), errno == ENOENT ? " (is this a systemd machine?)" : "");
  char path[PATH_MAX + 16], reason[512] = "";
  snprintf(path, sizeof path, "%s/hugify.conf", directory);
  int rc = safe_file_replace(path, content, length, 0644, SAFE_FILE_DURABLE, reason, sizeof reason);
  if (rc == -ELOOP || rc == -EINVAL || rc == -EEXIST) return fail(EXIT_USAGE, "env", "%s", reason);
  if (rc == -EACCES || rc == -EPERM || rc == -EROFS) return fail(EXIT_PRIVILEGE, "env", "%s", reason);
  if (rc) return fail(EXIT_SHORT, "env", "%s", reason);
  return EXIT_DONE;
}

static int install(const struct env_args *args, const struct run_environment *environment) {
  char unit[256];
  if (!unit_name(args->install, unit, sizeof unit))
    return usage_error("env", "--install: '%s' is not a systemd service name", args->install);
  char directory[PATH_MAX];
  if (snprintf(directory, sizeof directory, "%s/etc/systemd/system/%s.service.d", args->root, unit) >= (int)sizeof directory)
    return usage_error("env", "--root: the path is too long");
  char *content = NULL;
  size_t length = 0;
  FILE *buffer = open_memstream(&content, &length);
  if (!buffer) return fail(EXIT_SHORT, "env", "out of memory");
  print_systemd(buffer, &args->settings, environment, unit);
  fclose(buffer);
  check_unit(args->root, unit, &args->settings, environment);
  int rc = EXIT_DONE;
  if (args->dry_run) {
    printf("# would write %s/hugify.conf:\n%s", directory, content);
  } else {
    rc = write_drop_in(directory, content, length);
    if (rc == EXIT_DONE)
      printf("wrote %s/hugify.conf\napply it with: systemctl daemon-reload && systemctl restart %s\n", directory, unit);
  }
  free(content);
  return rc;
}

static int print_or_install(const struct env_args *args_in, const struct run_environment *environment) {
  struct env_args args = *args_in; /* a copy: --json=FILE keeps its buffer in it */
  int rc;
  if (args.install) return install(&args, environment);
  FILE *json = json_output_open(&args.json, "env");
  if (args.json.wanted && !json) return EXIT_USAGE;
  if (json_output_text(&args.json)) {
    if (args.form == FORM_SHELL) print_shell(stdout, &args.settings, environment);
    else if (args.form == FORM_SYSTEMD) print_systemd(stdout, &args.settings, environment, NULL);
    else if (args.form == FORM_DOCKER) print_docker(stdout, environment);
    else print_kubernetes(stdout, &args.settings, environment);
  }
  rc = fflush(stdout) == 0 ? EXIT_DONE : EXIT_SHORT;
  if (json) {
    print_json(json, &args.settings, environment, args.form);
    if (!json_output_close(json, &args.json, "env")) rc = EXIT_SHORT;
  }
  return rc;
}

int cmd_env(int argc, char **argv) {
  struct env_args args;
  int rc = parse_args(argc, argv, &args);
  if (rc != EXIT_DONE) return rc;
  static struct run_environment environment; /* large: off the stack */
  /* The glibc preload whatever the programs: musl's loader loads it too (docs/env.md, "musl") */
  rc = run_environment_build("env", &args.settings, ELF_LIBC_GLIBC, NULL, &environment);
  if (rc == EXIT_DONE && args.settings.report) rc = run_environment_add_report("env", &environment, args.settings.report);
  if (rc == EXIT_DONE) rc = print_or_install(&args, &environment);
  run_environment_free(&environment);
  return rc;
}
