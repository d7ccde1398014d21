/* SPDX-License-Identifier: MIT */
/* The readers that hand files to the parsers (os_read_file, os_read_small, os_read_u64, hugify_elf_read,
 * all through safe_file_open_read: a regular file only, reads capped), on the input written to a memory
 * file (a regular file): what they return must be the bytes, NUL-terminated, whatever the bytes are. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "hugify.h"
#include "os.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("hugify-fuzz", MFD_CLOEXEC);
  if (fd < 0) abort();
  if (size && write(fd, data, size) != (ssize_t)size) abort();
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);

  size_t length = 0;
  char *text = NULL;
  if (os_read_file(path, &text, &length) == 0) {
    if (length != size || memcmp(text, data, size) != 0 || text[length] != '\0') abort();
    free(text);
  }
  char small[64];
  ssize_t n = os_read_small(path, small, sizeof small);
  if (n >= 0 && ((size_t)n >= sizeof small || small[n] != '\0')) abort();
  uint64_t value;
  os_read_u64(path, &value);
  struct hugify_elf_info info;
  hugify_elf_read(path, &info);
  close(fd);
  return 0;
}
