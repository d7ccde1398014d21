/* What hugify reads about the machine under it from one-line or flag files: /proc/loadavg (parse_loadavg)
 * and /proc/cpuinfo's flags (parse_cpuinfo_hypervisor). An accepted load average is finite and >= 0. */
#include <math.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  double load = -1;
  if (parse_loadavg(text, &load) && (!isfinite(load) || load < 0)) abort();
  fuzz_keep(parse_cpuinfo_hypervisor(text));
  free(text);
  return 0;
}
