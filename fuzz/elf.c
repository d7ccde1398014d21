/* SPDX-License-Identifier: MIT */
/* ELF images (`hugify elf FILE`, the preload's text step on every loaded object, the perf map):
 * hugify_elf_parse, elf_functions, elf_needed (`hugify run` reading a program's DT_NEEDED) and elf_is_go over
 * arbitrary bytes. */
#include <stdlib.h>
#include <string.h>

#include "elf_image.h"
#include "fuzz_input.h"

static void count_needed(void *context, const char *name) { *(size_t *)context += strlen(name) + 1; }

static void count_function(void *context, uint64_t value, uint64_t size, const char *name) {
  *(size_t *)context += strlen(name) + (size_t)(value + size != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size copy, so ASan sees any read past the end of the image */
  void *image = malloc(size ? size : 1);
  if (!image) abort();
  memcpy(image, data, size);
  struct hugify_elf_info info;
  hugify_elf_parse(image, size, &info);
  size_t names = 0;
  elf_functions(image, size, count_function, &names);
  elf_needed(image, size, count_needed, &names);
  names += elf_is_go(image, size);
  fuzz_keep(names);
  free(image);
  return 0;
}
