/* SPDX-License-Identifier: MIT */
/* main.c - the hugify command: a table of subcommands, one file each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hugify.h"
#include "manual.h"

static const struct command commands[] = {
    {"status", cmd_status, "everything the kernel says about huge pages here, with diagnoses and fixes", &help_status},
    {"pool", cmd_pool, "reserve, show, clear and persist hugetlb pools per size and NUMA node", &help_pool},
    {"inspect", cmd_inspect, "how much of a process is on huge pages, by class and page kind", &help_inspect},
    {"top", cmd_top, "a live view: processes or cgroups losing huge pages, the agent's last action", &help_top},
    {"collapse", cmd_collapse, "put a running process's anonymous memory on huge pages now", &help_collapse},
    {"run", cmd_run, "run a program with its heap and code on huge pages; report what it got", &help_run},
    {"env", cmd_env, "the environment of `run`, for systemd units, containers and scripts", &help_env},
    {"check", cmd_check, "do huge pages help a program, which way, and by how much", &help_check},
    {"bench", cmd_bench, "what huge pages buy on this machine: the seed experiments, with a chart", &help_bench},
    {"agent", cmd_agent, "keep long-running processes on huge pages, within a CPU budget, with metrics", &help_agent},
    {"elf", cmd_elf, "what the text remap would cover for a binary; linker flags for aligned text", &help_elf},
};
#define COMMAND_COUNT (sizeof commands / sizeof commands[0])

static const struct command *find_command(const char *name) {
  for (size_t i = 0; i < COMMAND_COUNT; i++)
    if (strcmp(commands[i].name, name) == 0) return &commands[i];
  return NULL;
}

static int print_main_usage(FILE *out) {
  fprintf(out,
          "usage: hugify [--version] [--help] COMMAND [ARGS]\n"
          "\n"
          "Huge pages for any program, measured.\n"
          "\n"
          "Commands:\n");
  for (size_t i = 0; i < COMMAND_COUNT; i++) fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\n"
          "'hugify help COMMAND' or 'hugify COMMAND --help' shows a command's options and examples.\n"
          "Every command takes --json. Exit status: 0 done, 1 fell short, 2 bad usage,\n"
          "3 missing privilege or kernel feature.\n");
  return EXIT_DONE;
}

/* The hidden `hugify help --man DIR` (hugify.1 and hugify-COMMAND.1 into DIR) and `hugify help --completion`
 * (the bash completion on stdout): the build generates the man pages and the completion with them
 * (src/cli/CMakeLists.txt), from the same tables as --help. */
static int write_manual(const char *dir) {
  char *overview = NULL;
  size_t overview_length = 0;
  FILE *text = open_memstream(&overview, &overview_length);
  if (!text) return fail(EXIT_SHORT, "help", "out of memory");
  print_main_usage(text);
  fclose(text);
  int status = EXIT_DONE;
  for (size_t i = 0; i < COMMAND_COUNT && status == EXIT_DONE; i++) { /* every table, at every build */
    char error[256];
    const struct option_spec *options = commands[i].help->options;
    if (options && option_table_check(options, error, sizeof error) != 0)
      status = fail(EXIT_SHORT, "help", "%s: %s", commands[i].name, error);
  }
  for (size_t i = 0; i <= COMMAND_COUNT && status == EXIT_DONE; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/hugify%s%s.1", dir, i < COMMAND_COUNT ? "-" : "",
             i < COMMAND_COUNT ? commands[i].name : "");
    struct output_file file;
    FILE *out = output_file_open(&file, path, "help", "--man", "or name a directory without links");
    if (!out) status = EXIT_USAGE;
    else if (i < COMMAND_COUNT) manual_page_command(&commands[i], out);
    else manual_page_main(commands, COMMAND_COUNT, overview, out);
    if (out && !output_file_close(&file, "help")) status = EXIT_SHORT;
  }
  free(overview);
  return status;
}

static int show_help(const struct command *command) {
  return print_command_help(command->help, stdout);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    print_main_usage(stderr);
    return EXIT_USAGE;
  }
  const char *name = argv[1];
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) return print_main_usage(stdout);
  if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
    printf("hugify %s\n", hugify_version());
    return EXIT_DONE;
  }
  if (strcmp(name, "help") == 0) {
    if (argc < 3) return print_main_usage(stdout);
    if (strcmp(argv[2], "--man") == 0 && argc == 4) return write_manual(argv[3]);
    if (strcmp(argv[2], "--completion") == 0) {
      manual_completion(commands, COMMAND_COUNT, stdout);
      return EXIT_DONE;
    }
    const struct command *command = find_command(argv[2]);
    if (!command) {
      fprintf(stderr, "hugify help: no command '%s'. Try 'hugify --help'.\n", argv[2]);
      return EXIT_USAGE;
    }
    return show_help(command);
  }
  const struct command *command = find_command(name);
  if (!command) {
    fprintf(stderr, "hugify: '%s' is not a command. Try 'hugify --help'.\n", name);
    return EXIT_USAGE;
  }
  if (wants_help(argc - 1, argv + 1)) return show_help(command);
  return command->run(argc - 1, argv + 1);
}
