/* inspect.c - hugify inspect (not built yet: see the open issue). */
#include "cli.h"

const char usage_inspect[] =
    "usage: hugify inspect [--json]\n"
    "\n"
    "Not available in this build yet.\n";

int cmd_inspect(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return fail(EXIT_PRIVILEGE, "inspect", "not available in this build yet");
}
