/* SPDX-License-Identifier: MIT */
/* run_fault_workload - programs for tests/integration/faults.cpp, run under `hugify run` while a fault is injected
 * around them. Each checks its own bytes and prints one "checksum HEX" line that is the same with and without
 * hugify (and with or without the fault); exit status 0 when every check held, 1 when a byte was wrong.
 *
 *   run_fault_workload stages MIB   malloc MIB MiB in 4 MiB blocks and write them, raise SIGSTOP (the test drains
 *                               the hugetlb pool meanwhile), then malloc and write MIB MiB more; check all.
 *   run_fault_workload forks N      N rounds: map 16 pieces of 64 KiB-1 MiB (a runtime's arenas), then fork 8
 *                               children that each map, check and unmap pieces of their own and check the
 *                               inherited ones, while the parent unmaps half of its pieces; all reaped.
 *   run_fault_workload threads N    8 threads, each N times: map a piece of 64 KiB-2 MiB, write it, check it, and
 *                               unmap it (every other one after a neighbour's, so pieces share regions). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB 1024u
#define MIB (1024u * 1024u)

static uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}

/* One byte per 4 KiB page, from the piece's seed: written, then read back. */
static void fill(unsigned char *p, size_t length, uint64_t seed) {
  for (size_t at = 0; at < length; at += 4096) p[at] = (unsigned char)mix(seed + at);
  p[length - 1] = (unsigned char)mix(seed ^ length);
}

static int intact(const unsigned char *p, size_t length, uint64_t seed) {
  for (size_t at = 0; at < length; at += 4096)
    if (p[at] != (unsigned char)mix(seed + at)) return 0;
  return p[length - 1] == (unsigned char)mix(seed ^ length);
}

static size_t piece_length(uint64_t seed) { return (size_t)(64 * KIB) << (mix(seed) % 5); } /* 64 KiB - 1 MiB */

static unsigned char *map_piece(size_t length) {
  void *p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static int stages(long mib) {
  size_t blocks = (size_t)mib / 4, block = 4 * MIB;
  unsigned char **all = calloc(2 * blocks, sizeof *all);
  uint64_t sum = 0;
  int ok = all != NULL;
  for (size_t stage = 0; ok && stage < 2; stage++) {
    for (size_t i = stage * blocks; ok && i < (stage + 1) * blocks; i++) {
      ok = (all[i] = malloc(block)) != NULL;
      if (ok) fill(all[i], block, i);
    }
    if (stage == 0) {
      printf("stage 1 done\n");
      fflush(stdout);
      raise(SIGSTOP);
    }
  }
  for (size_t i = 0; ok && i < 2 * blocks; i++) {
    ok = intact(all[i], block, i);
    sum = mix(sum ^ all[i][block / 2]);
  }
  printf("checksum %016llx\n", (unsigned long long)sum);
  return ok ? 0 : 1;
}

static int forks(long rounds) {
  uint64_t sum = 0;
  int ok = 1;
  for (long round = 0; ok && round < rounds; round++) {
    unsigned char *pieces[16];
    size_t lengths[16];
    for (int i = 0; i < 16; i++) {
      uint64_t seed = (uint64_t)round * 16 + (uint64_t)i;
      lengths[i] = piece_length(seed);
      if (!(pieces[i] = map_piece(lengths[i]))) return 1;
      fill(pieces[i], lengths[i], seed);
    }
    pid_t children[8];
    for (int c = 0; c < 8; c++) {
      if ((children[c] = fork()) == 0) {
        int good = 1;
        for (int i = 0; i < 16; i++) good &= intact(pieces[i], lengths[i], (uint64_t)round * 16 + (uint64_t)i);
        for (int k = 0; k < 4; k++) {
          uint64_t seed = mix((uint64_t)round << 8 | (uint64_t)c << 4 | (uint64_t)k);
          size_t length = piece_length(seed);
          unsigned char *own = map_piece(length);
          if (!own) _exit(1);
          fill(own, length, seed);
          good &= intact(own, length, seed);
          munmap(own, length);
        }
        _exit(good ? 0 : 1);
      }
      if (children[c] < 0) ok = 0;
    }
    for (int i = 0; i < 16; i += 2) munmap(pieces[i], lengths[i]); /* while the children run */
    for (int c = 0; c < 8; c++) {
      int status = 0;
      if (children[c] > 0 && (waitpid(children[c], &status, 0) != children[c] || !WIFEXITED(status) ||
                              WEXITSTATUS(status) != 0))
        ok = 0;
    }
    for (int i = 1; i < 16; i += 2) {
      ok &= intact(pieces[i], lengths[i], (uint64_t)round * 16 + (uint64_t)i);
      sum = mix(sum ^ pieces[i][lengths[i] / 2]);
      munmap(pieces[i], lengths[i]);
    }
  }
  printf("checksum %016llx\n", (unsigned long long)sum);
  return ok ? 0 : 1;
}

struct worker {
  long iterations;
  unsigned id;
  uint64_t sum;
  int ok;
};

static void *map_loop(void *argument) {
  struct worker *w = argument;
  unsigned char *held = NULL;
  size_t held_length = 0;
  uint64_t held_seed = 0;
  w->ok = 1;
  for (long i = 0; i < w->iterations; i++) {
    uint64_t seed = mix((uint64_t)w->id << 32 | (uint64_t)i);
    size_t length = piece_length(seed) << (seed % 3 == 0); /* up to 2 MiB */
    unsigned char *p = map_piece(length);
    if (!p) { w->ok = 0; break; }
    fill(p, length, seed);
    w->ok &= intact(p, length, seed);
    w->sum = mix(w->sum ^ p[length / 2]);
    if (held) { /* unmap the older neighbour first, then keep this one until the next */
      w->ok &= intact(held, held_length, held_seed);
      munmap(held, held_length);
    }
    if (i % 2) held = p, held_length = length, held_seed = seed;
    else munmap(p, length), held = NULL;
  }
  if (held) w->ok &= intact(held, held_length, held_seed), munmap(held, held_length);
  return NULL;
}

static int threads(long iterations) {
  struct worker workers[8];
  pthread_t ids[8];
  for (unsigned t = 0; t < 8; t++) {
    workers[t] = (struct worker){.iterations = iterations, .id = t};
    if (pthread_create(&ids[t], NULL, map_loop, &workers[t]) != 0) return 1;
  }
  uint64_t sum = 0;
  int ok = 1;
  for (unsigned t = 0; t < 8; t++) {
    pthread_join(ids[t], NULL);
    ok &= workers[t].ok;
    sum = mix(sum ^ workers[t].sum);
  }
  printf("checksum %016llx\n", (unsigned long long)sum);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  long n = argc > 2 ? atol(argv[2]) : 0;
  if (argc > 2 && n > 0 && !strcmp(argv[1], "stages")) return stages(n);
  if (argc > 2 && n > 0 && !strcmp(argv[1], "forks")) return forks(n);
  if (argc > 2 && n > 0 && !strcmp(argv[1], "threads")) return threads(n);
  fprintf(stderr, "usage: run_fault_workload stages MIB | forks N | threads N\n");
  return 2;
}
