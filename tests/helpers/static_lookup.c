/* SPDX-License-Identifier: MIT */
/* static_lookup.c - a statically linked program with a big heap: built with -static against glibc
 * (static_lookup) and with musl-gcc -static (musl_static_lookup, tests/CMakeLists.txt), what `hugify run`
 * collapses from outside (tests/integration/static_programs.cpp, bench/static_outside.sh).
 *   static_lookup MIB SECONDS STATUS [until-huge] [fork] [lookups=MILLIONS]
 * fills MIB MiB from malloc, does random lookups in it for SECONDS seconds (with until-huge: until 3 s after
 * 90 % of its anonymous memory is on huge pages, so that run's next pass measures it, or SECONDS at most: a
 * deadline, not a timing), prints one line that
 * does not depend on how long it ran, and exits STATUS. With fork the work is a child's, which the parent
 * waits for. With lookups=MILLIONS it does exactly that many lookups instead (a fixed amount of work, which
 * `hugify check` times), SECONDS ignored. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* /proc/self/smaps_rollup: AnonHugePages at least 90 % of Anonymous. */
static int mostly_huge(void) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (!f) return 0;
  char line[256];
  unsigned long anonymous = 0, huge = 0, value;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "Anonymous: %lu kB", &value) == 1) anonymous = value;
    if (sscanf(line, "AnonHugePages: %lu kB", &value) == 1) huge = value;
  }
  fclose(f);
  return anonymous > 0 && huge * 10 >= anonymous * 9;
}

static int work(size_t mib, double seconds, int until_huge, unsigned long millions) {
  size_t count = mib << 17; /* 8-byte entries */
  uint64_t *table = malloc(count * sizeof *table);
  if (!table) return 1;
  uint64_t checksum = 0;
  for (size_t i = 0; i < count; i++) checksum += table[i] = mix(i);
  volatile uint64_t sink = 0;
  uint64_t x = 1;
  unsigned long done = 0; /* millions of lookups, said on stderr (stdout is compared) */
  for (double end = now() + seconds; millions ? millions-- > 0 : now() < end; done++) {
    for (int k = 0; k < 1000000; k++) sink += table[(x = mix(x)) % count];
    if (until_huge && mostly_huge() && end > now() + 3) end = now() + 3; /* 3 s more: run's next look sees it */
  }
  printf("static_lookup %zu MiB checksum %llu\n", mib, (unsigned long long)checksum);
  fprintf(stderr, "static_lookup: %lu million lookups\n", done);
  free(table);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: static_lookup MIB SECONDS STATUS [until-huge] [fork]\n");
    return 2;
  }
  size_t mib = strtoul(argv[1], NULL, 10);
  double seconds = atof(argv[2]);
  int status = atoi(argv[3]), until_huge = 0, in_child = 0;
  unsigned long millions = 0;
  for (int i = 4; i < argc; i++) {
    if (!strcmp(argv[i], "until-huge")) until_huge = 1;
    if (!strcmp(argv[i], "fork")) in_child = 1;
    if (!strncmp(argv[i], "lookups=", 8)) millions = strtoul(argv[i] + 8, NULL, 10);
  }
  if (!in_child) return work(mib, seconds, until_huge, millions) ? 1 : status;
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) _exit(work(mib, seconds, until_huge, millions));
  int child_status;
  if (waitpid(child, &child_status, 0) != child || !WIFEXITED(child_status) || WEXITSTATUS(child_status)) return 1;
  return status;
}
