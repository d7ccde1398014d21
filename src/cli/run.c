/* run.c - hugify run (not built yet: see the open issue). */
#include "cli.h"

const char usage_run[] =
    "usage: hugify run [--json]\n"
    "\n"
    "Not available in this build yet.\n";

int cmd_run(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return fail(EXIT_PRIVILEGE, "run", "not available in this build yet");
}
