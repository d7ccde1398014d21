/* elf.c - hugify elf (not built yet: see the open issue). */
#include "cli.h"

const char usage_elf[] =
    "usage: hugify elf [--json]\n"
    "\n"
    "Not available in this build yet.\n";

int cmd_elf(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return fail(EXIT_PRIVILEGE, "elf", "not available in this build yet");
}
