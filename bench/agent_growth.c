/* SPDX-License-Identifier: MIT */
/* agent_growth - a process that grows its heap by SIZE over SECONDS (malloc'd steps, every page written,
 * never advised), and the share of its heap on huge pages second by second, under one regime:
 *
 *   agent_growth --mode nothing|madvise|agent [--size 1G] [--seconds 60] [--hugify PATH] [-- AGENT ARGS...]
 *
 * nothing  THP as the system has it (here 'madvise': nothing becomes huge)
 * madvise  the grower advises every step MADV_HUGEPAGE (faults take huge pages where the kernel can get
 *          them; khugepaged collapses the rest in its own time)
 * agent    `hugify agent --pid GROWER` runs beside it (extra arguments after "--" go to the agent, e.g.
 *          --interval 5 --cpu-budget 10)
 *
 * Prints "mode second huge_fraction heap_bytes" per second (the series docs/agent.md charts), then a
 * summary with the agent's CPU time when it ran. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "units.h"

#define STEPS_PER_SECOND 4

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* AnonHugePages and Rss (bytes) of the grower's anonymous mappings, from its smaps. */
static void measure(pid_t pid, uint64_t *huge, uint64_t *rss) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/smaps", (int)pid);
  FILE *f = fopen(path, "r");
  *huge = *rss = 0;
  if (!f) return;
  char line[512];
  int anonymous = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long long a, b, kb;
    char perms[8], name[256] = "";
    if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %255s", &a, &b, perms, name) >= 3 && strchr(line, '-') < strchr(line, ' ')) {
      anonymous = (name[0] == '\0' || !strcmp(name, "[heap]")) && perms[3] == 'p';
      continue;
    }
    if (!anonymous) continue;
    if (sscanf(line, "Rss: %llu kB", &kb) == 1) *rss += kb << 10;
    else if (sscanf(line, "AnonHugePages: %llu kB", &kb) == 1) *huge += kb << 10;
  }
  fclose(f);
}

static void grow(uint64_t size, double seconds, int advise, int ready_fd) {
  uint64_t steps = (uint64_t)(seconds * STEPS_PER_SECOND), step = size / steps;
  char c = 1;
  if (write(ready_fd, &c, 1) != 1) _exit(1);
  double start = now();
  for (uint64_t i = 0; i < steps; i++) {
    char *p = malloc(step);
    if (!p) _exit(1);
    if (advise) { /* the whole mapping glibc made for the block, so that the advised mappings merge */
      uintptr_t from = (uintptr_t)p & ~(uintptr_t)4095, to = ((uintptr_t)p + step + 4095) & ~(uintptr_t)4095;
      madvise((void *)from, to - from, MADV_HUGEPAGE);
    }
    for (uint64_t at = 0; at < step; at += 4096) p[at] = (char)at;
    double next = start + (double)(i + 1) / STEPS_PER_SECOND, left = next - now();
    if (left > 0) usleep((useconds_t)(left * 1e6));
  }
  pause(); /* hold the memory until killed */
  _exit(0);
}

int main(int argc, char **argv) {
  const char *mode = NULL, *hugify = "hugify";
  uint64_t size = UINT64_C(1) << 30;
  double seconds = 60;
  char **agent_args = NULL;
  int agent_argc = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--mode") && i + 1 < argc) mode = argv[++i];
    else if (!strcmp(argv[i], "--size") && i + 1 < argc) { if (!parse_size(argv[++i], &size)) return 2; }
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--hugify") && i + 1 < argc) hugify = argv[++i];
    else if (!strcmp(argv[i], "--")) { agent_args = argv + i + 1; agent_argc = argc - i - 1; break; }
    else mode = NULL, i = argc;
  }
  if (!mode || (strcmp(mode, "nothing") && strcmp(mode, "madvise") && strcmp(mode, "agent")) || seconds < 1) {
    fprintf(stderr, "usage: agent_growth --mode nothing|madvise|agent [--size 1G] [--seconds 60] [--hugify PATH] "
                    "[-- AGENT ARGS...]\n");
    return 2;
  }
  int ready[2];
  if (pipe(ready) != 0) return 1;
  pid_t grower = fork();
  if (grower == 0) grow(size, seconds, !strcmp(mode, "madvise"), ready[1]);
  char c;
  if (read(ready[0], &c, 1) != 1) return 1;
  pid_t agent = -1;
  if (!strcmp(mode, "agent")) {
    char pid_text[16];
    snprintf(pid_text, sizeof pid_text, "%d", (int)grower);
    char **args = calloc((size_t)agent_argc + 8, sizeof *args);
    int n = 0;
    args[n++] = (char *)hugify, args[n++] = "agent", args[n++] = "--pid", args[n++] = pid_text;
    args[n++] = "--min-rss", args[n++] = "0";
    for (int i = 0; i < agent_argc; i++) args[n++] = agent_args[i];
    agent = fork();
    if (agent == 0) {
      execvp(args[0], args);
      perror("agent_growth: exec hugify");
      _exit(127);
    }
  }
  double start = now();
  for (int second = 0; second <= (int)(seconds * 1.25); second++) {
    double next = start + second, left = next - now();
    if (left > 0) usleep((useconds_t)(left * 1e6));
    uint64_t huge, rss;
    measure(grower, &huge, &rss);
    printf("%s %d %.4f %llu\n", mode, second, rss ? (double)huge / (double)rss : 0.0, (unsigned long long)rss);
    fflush(stdout);
  }
  kill(grower, SIGKILL);
  waitpid(grower, NULL, 0);
  if (agent > 0) {
    kill(agent, SIGTERM);
    int status;
    struct rusage usage;
    wait4(agent, &status, 0, &usage);
    double cpu = (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec * 1e-6 +
                 (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec * 1e-6;
    printf("# agent CPU %.3f s over %.0f s (%.2f %% of one core)\n", cpu, seconds * 1.25,
           100 * cpu / (seconds * 1.25));
  }
  return 0;
}
