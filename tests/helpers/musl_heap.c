/* SPDX-License-Identifier: MIT */
/* musl_heap.c - a program of another C library: built with musl-gcc (tests/CMakeLists.txt, when it is
 * installed), so its interpreter is /lib/ld-musl-ARCH.so.1. It maps 8 MiB + 4 KiB as a runtime's heap would
 * (an mmap() by name, which a preload can reach; musl's own malloc maps with internal calls), touches it,
 * prints one line on stdout and exits 7. With --describe it says on stderr where the mapping is and
 * whether it is advised (MADV_HUGEPAGE: "hg" in its smaps VmFlags): what the tests check of the cover.
 * With --sh CMD it then runs CMD with /bin/sh (a glibc program on a Debian host) and exits with its status. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HEAP_BYTES ((size_t)(8u << 20) + 4096)

static int advised(uintptr_t start) {
  FILE *smaps = fopen("/proc/self/smaps", "r");
  if (!smaps) return -1;
  char line[512];
  int inside = 0, found = 0;
  while (fgets(line, sizeof line, smaps)) {
    unsigned long from, to; /* a mapping's first line: "from-to perms ..."; its fields: "Name: ..." */
    if (sscanf(line, "%lx-%lx ", &from, &to) == 2) inside = from <= start && start < to;
    else if (inside && strncmp(line, "VmFlags:", 8) == 0) found = strstr(line, " hg") != NULL;
  }
  fclose(smaps);
  return found;
}

int main(int argc, char **argv) {
  char *heap = mmap(NULL, HEAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (heap == MAP_FAILED) return 1;
  memset(heap, 1, HEAP_BYTES);
  char *small = malloc(1 << 20);
  if (!small) return 1;
  memset(small, 2, 1 << 20);
  puts("musl heap");
  if (argc > 1 && strcmp(argv[1], "--describe") == 0)
    fprintf(stderr, "musl_heap: aligned=%d advised=%d\n", ((uintptr_t)heap & ((2u << 20) - 1)) == 0,
            advised((uintptr_t)heap));
  free(small);
  if (argc > 2 && strcmp(argv[1], "--sh") == 0) {
    fflush(stdout);
    int status = system(argv[2]);
    return status >= 0 && (status & 0x7f) == 0 ? (status >> 8) & 0xff : 1;
  }
  return 7;
}
