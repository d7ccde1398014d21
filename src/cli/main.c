/* main.c - the hugify command: a table of subcommands, one file each. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "hugify.h"

static const struct command commands[] = {
    {"status", cmd_status, "everything the kernel says about huge pages here, with diagnoses and fixes", &help_status},
    {"pool", cmd_pool, "reserve, show, clear and persist hugetlb pools per size and NUMA node", &help_pool},
    {"inspect", cmd_inspect, "how much of a process is on huge pages, by class and page kind", &help_inspect},
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
