/* bench.c - hugify bench (not built yet: see the open issue). */
#include "cli.h"

const char usage_bench[] =
    "usage: hugify bench [--json]\n"
    "\n"
    "Not available in this build yet.\n";

int cmd_bench(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return fail(EXIT_PRIVILEGE, "bench", "not available in this build yet");
}
