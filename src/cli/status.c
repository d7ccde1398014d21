/* status.c - hugify status (not built yet: see the open issue). */
#include "cli.h"

const char usage_status[] =
    "usage: hugify status [--json]\n"
    "\n"
    "Not available in this build yet.\n";

int cmd_status(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return fail(EXIT_PRIVILEGE, "status", "not available in this build yet");
}
