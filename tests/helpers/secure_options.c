/* SPDX-License-Identifier: MIT */
/* secure_options - prints what options_from_environment() takes from HUGIFY_* in this process, and
 * whether the loader ran it in secure mode (AT_SECURE). The hardening test runs a setuid-root copy of it as
 * an unprivileged user: there, HUGIFY_REPORT and HUGIFY_PERF_MAP must read as unset. */
#include <stdio.h>
#include <sys/auxv.h>

#include "options.h"

int main(void) {
  struct hugify_options options = {0};
  char warnings[1024] = "";
  options_from_environment(&options, warnings, sizeof warnings);
  printf("secure=%lu\nreport=%s\nperf_map=%d\n", getauxval(AT_SECURE), options.report, (int)options.perf_map);
  return 0;
}
