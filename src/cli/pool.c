/* pool.c - hugify pool (not built yet: see the open issue). */
#include "cli.h"

const char usage_pool[] =
    "usage: hugify pool [--json]\n"
    "\n"
    "Not available in this build yet.\n";

int cmd_pool(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return fail(EXIT_PRIVILEGE, "pool", "not available in this build yet");
}
