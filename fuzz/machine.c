/* SPDX-License-Identifier: MIT */
/* What hugify reads about the machine under it from one-line or flag files: /proc/loadavg (parse_loadavg),
 * /proc/cpuinfo's flags (parse_cpuinfo_hypervisor), /proc/pressure/memory (parse_psi_pressure, the agent's
 * memory gate) and /proc/self/status's CapEff (parse_capabilities, the agent's privileges). An accepted
 * load average is finite and >= 0; a rejected pressure is all zeros. */
#include <math.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  double load = -1;
  if (parse_loadavg(text, &load) && (!isfinite(load) || load < 0)) abort();
  fuzz_keep(parse_cpuinfo_hypervisor(text));
  struct psi_pressure pressure;
  if (!parse_psi_pressure(text, &pressure) && (pressure.present || pressure.some_avg10 != 0)) abort();
  uint64_t capabilities = 0;
  fuzz_keep(parse_capabilities(text, &capabilities) && capabilities);
  free(text);
  return 0;
}
