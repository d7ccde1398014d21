/* collapse.c - hugify collapse (not built yet: see the open issue). */
#include "cli.h"

const char usage_collapse[] =
    "usage: hugify collapse [--json]\n"
    "\n"
    "Not available in this build yet.\n";

int cmd_collapse(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return fail(EXIT_PRIVILEGE, "collapse", "not available in this build yet");
}
