/* SPDX-License-Identifier: MIT */
/* /proc/PID/smaps and maps of any process (hugify inspect, collapse, the text remap, the run report):
 * parse_smaps, then what is computed from the parsed mappings (inspect_classify). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "inspect.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  struct smaps_vma *vmas = NULL;
  long count = parse_smaps(text, &vmas);
  if (count >= 0) {
    uint64_t stack_pointers[4] = {0};
    size_t stack_pointer_count = 0;
    uint64_t sum = 0;
    for (long i = 0; i < count; i++) {
      sum += smaps_vma_thp_bytes(&vmas[i]) + smaps_vma_hugetlb_bytes(&vmas[i]) + smaps_vma_is_hugetlb(&vmas[i]);
      /* a stack pointer inside some mappings, as /proc/PID/task/TID/syscall would give */
      if (stack_pointer_count < 4 && (vmas[i].start & 0xff) == 0) stack_pointers[stack_pointer_count++] = vmas[i].start + 8;
    }
    fuzz_keep(sum);
    struct inspect_context context = {
        .thp_disabled = (int)(size % 3) - 1, .thp_mode = size % 2 ? "always" : "madvise", .shmem_mode = "advise",
        .pmd_size = size % 5 == 0 ? 0 : UINT64_C(2) << 20, .stack_pointers = stack_pointers,
        .stack_pointer_count = stack_pointer_count};
    struct hugify_inspect_report report;
    memset(&report, 0, sizeof report);
    inspect_classify(vmas, (size_t)count, &context, &report);
    hugify_inspect_report_free(&report);
    free(vmas);
  }
  free(text);
  return 0;
}
