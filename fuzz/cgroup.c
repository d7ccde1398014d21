/* cgroup files: /proc/PID/cgroup (parse_cgroup_v2_path) and a limit file such as hugetlb.2MB.max
 * (parse_cgroup_limit); the size names the hugetlb controller gives its files. */
#include <stdlib.h>

#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  char path[256], small[4];
  parse_cgroup_v2_path(text, path, sizeof path);
  parse_cgroup_v2_path(text, small, sizeof small);
  uint64_t limit;
  if (parse_cgroup_limit(text, &limit)) {
    char name[32];
    cgroup_hugetlb_size_name(limit, name, sizeof name);
  }
  free(text);
  return 0;
}
