/* check.c - hugify check (not built yet: see the open issue). */
#include "cli.h"

const char usage_check[] =
    "usage: hugify check [--json]\n"
    "\n"
    "Not available in this build yet.\n";

int cmd_check(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return fail(EXIT_PRIVILEGE, "check", "not available in this build yet");
}
