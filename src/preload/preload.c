/* preload.c - libhugify-preload.so: applies the HUGIFY_* settings to the host process. It never writes to
 * stdout, never changes the host's exit status, and a failure inside it means "carry on without huge
 * pages" (and, with HUGIFY_VERBOSE=1, one line on stderr saying so). */
#include <stdio.h>
#include <unistd.h>

#include "options.h"

__attribute__((constructor)) static void hugify_preload_start(void) {
  struct hugify_options options;
  char warnings[1024] = "";
  if (options_from_environment(&options, warnings, sizeof warnings) > 0)
    dprintf(STDERR_FILENO, "hugify: %s\n", warnings);
}
