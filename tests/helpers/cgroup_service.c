/* SPDX-License-Identifier: MIT */
/* cgroup_service - a service of the per-cgroup test (tests/integration/fleet.cpp): it waits for a line on stdin
 * (so the test can move it into its cgroup before it charges anything), then maps ANON MiB of private anonymous
 * memory and SHARED MiB of shared anonymous memory (both 2 MiB-aligned, MADV_HUGEPAGE, written), forks a
 * child that maps CHILD MiB of its own when CHILD > 0 (the shared memory stays mapped in it, untouched), says
 * "ready" and sleeps until stdin closes.
 *   usage: cgroup_service ANON_MIB SHARED_MIB CHILD_MIB */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIB (1ul << 20)

/* size bytes, 2 MiB-aligned, advised; NULL when it cannot be mapped. */
static char *huge_region(size_t size, int flags) {
  if (!size) return NULL;
  char *raw = mmap(NULL, size + 2 * MIB, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  char *aligned = (char *)(((uintptr_t)raw + 2 * MIB - 1) & ~(uintptr_t)(2 * MIB - 1));
  madvise(aligned, size, MADV_HUGEPAGE);
  return aligned;
}

static void write_region(char *region, size_t size) {
  for (size_t i = 0; region && i < size; i += 4096) region[i] = 1;
}

int main(int argc, char **argv) {
  if (argc != 4) return 2;
  size_t anon = strtoul(argv[1], NULL, 10) * MIB, shared = strtoul(argv[2], NULL, 10) * MIB,
         child = strtoul(argv[3], NULL, 10) * MIB;
  char line[64];
  if (!fgets(line, sizeof line, stdin)) return 1;
  /* the child first, so that no private huge page is shared copy-on-write (a walk would count it twice) */
  char *shared_region = huge_region(shared, MAP_SHARED);
  pid_t pid = 0;
  int done[2];
  if (child && pipe(done) == 0) {
    pid = fork();
    if (pid == 0) {
      write_region(huge_region(child, MAP_PRIVATE), child);
      if (write(done[1], "x", 1) != 1) _exit(1);
      while (fgets(line, sizeof line, stdin)) {}
      _exit(0);
    }
  }
  write_region(shared_region, shared);
  write_region(huge_region(anon, MAP_PRIVATE), anon);
  char byte;
  if (pid > 0 && read(done[0], &byte, 1) != 1) return 1; /* the child's memory is written too */
  printf("ready %d\n", (int)pid);
  fflush(stdout);
  while (fgets(line, sizeof line, stdin)) {}
  if (pid > 0) kill(pid, SIGTERM);
  return 0;
}
