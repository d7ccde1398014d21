/* SPDX-License-Identifier: MIT */
/* Names and one-value files of sysfs: "hugepages-2048kB" directory names (parse_hugepages_dir_name),
 * counters (parse_u64) and choice files such as "always [madvise] never" (parse_bracketed_choice); the
 * page sizes from such text (page_sizes_parse: the input as hpage_pmd_size and as both directory lists). */
#include <stdlib.h>

#include "fuzz_input.h"
#include "page_sizes.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  uint64_t value;
  parse_hugepages_dir_name(text, &value);
  parse_u64(text, &value);
  char choice[16];
  parse_bracketed_choice(text, choice, sizeof choice);
  parse_bracketed_choice(text, choice, 1);
  struct page_sizes sizes;
  struct page_sizes_report report = {4096, text, text, text};
  if (page_sizes_parse(&report, &sizes) == 0) {
    if (sizes.pmd <= sizes.base || sizes.pages_per_pmd * sizes.base != sizes.pmd) __builtin_trap();
    struct page_sizes_choice choice_made;
    page_sizes_choose(&sizes, NULL, &choice_made);
  }
  free(text);
  return 0;
}
