/* SPDX-License-Identifier: MIT */
/* cgroup files: /proc/PID/cgroup (parse_cgroup_v2_path, parse_cgroup_v1_path), a limit file such as
 * hugetlb.2MB.max (parse_cgroup_limit), memory.stat (parse_memory_stat_thp); the size names the hugetlb
 * controller gives its files; what a cgroup path names (cgroup_key_of: unit, container) and the reason the
 * kernel's figures and a walk differ. */
#include <stdlib.h>

#include "cgroup.h"
#include "fuzz_input.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  char path[256], small[4];
  parse_cgroup_v2_path(text, path, sizeof path);
  parse_cgroup_v2_path(text, small, sizeof small);
  parse_cgroup_v1_path(text, "memory", path, sizeof path);
  parse_cgroup_v1_path(text, "memory", small, sizeof small);
  for (int by = CGROUP_BY_CGROUP; by <= CGROUP_BY_CONTAINER; by++) {
    char name[96], prefix[96];
    const char *runtime;
    if (cgroup_key_of(text, (enum cgroup_key)by, name, sizeof name, prefix, sizeof prefix, &runtime) && !runtime)
      abort();
    cgroup_key_of(text, (enum cgroup_key)by, small, sizeof small, small, sizeof small, NULL);
  }
  struct cgroup_thp kernel, walk = {1, 2, 3, true, true};
  if (parse_memory_stat_thp(text, &kernel)) {
    char why[64];
    cgroup_thp_difference(&kernel, &walk, 1, why, sizeof why);
  }
  uint64_t limit;
  if (parse_cgroup_limit(text, &limit)) {
    char name[32];
    cgroup_hugetlb_size_name(limit, name, sizeof name);
  }
  free(text);
  return 0;
}
