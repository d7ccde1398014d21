/* SPDX-License-Identifier: MIT */
/* run_heap_workload.c - a heap workload for the `hugify run` tests: threads each build a chained hash
 * table of small malloc'd nodes (the shape of most real heaps), optionally plus large malloc blocks of
 * odd sizes and raw anonymous mmaps of odd sizes (what other allocators and runtimes do).
 *
 *   run_heap_workload [--threads N] [--mib M] [--node BYTES] [--big MIB] [--mmap MIB] [--free [--hold MS]] [--stop]
 *
 * --mib M: about M MiB of nodes per thread. --big: that many MiB in malloc blocks of odd sizes.
 * --mmap: that many MiB in anonymous mmaps of odd sizes. --stop: raise SIGSTOP when done (so a test can
 * read /proc/PID/smaps from outside), then exit normally. --free: free the big blocks and unmap the mmaps
 * before exit, as most programs do with their big tables (the report must still see them); --hold: keep
 * them that many milliseconds first (a peak that lasts, as a real table's does). Prints one checksum line on stdout, identical
 * with and without hugify. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

struct node {
  struct node *next;
  uint64_t key, value;
};

struct job {
  unsigned seed;
  size_t node_size, bytes;
  uint64_t checksum;
};

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

static void *build_table(void *argument) {
  struct job *job = argument;
  size_t count = job->bytes / (job->node_size + 16), buckets = 1;
  while (buckets < count) buckets <<= 1;
  struct node **table = calloc(buckets, sizeof *table);
  if (!table) { job->checksum = 0; return NULL; }
  for (size_t i = 0; i < count; i++) {
    struct node *n = malloc(job->node_size);
    if (!n) break;
    n->key = mix(i * 2654435761u + job->seed);
    n->value = i;
    size_t b = n->key & (buckets - 1);
    n->next = table[b];
    table[b] = n;
  }
  uint64_t sum = 0;
  for (size_t i = 0; i < count; i++) {
    uint64_t key = mix(i * 2654435761u + job->seed);
    for (struct node *n = table[key & (buckets - 1)]; n; n = n->next)
      if (n->key == key) { sum += n->value; break; }
  }
  job->checksum = sum;
  return NULL; /* the table is kept: the exit report measures it */
}

static uint64_t odd_blocks(size_t mib, int use_mmap, int release, unsigned hold_ms) {
  uint64_t sum = 0;
  size_t done = 0, want = mib << 20, count = 0;
  void *blocks[4096];
  size_t sizes[4096];
  for (unsigned i = 0; done < want && count < 4096; i++) {
    size_t size = ((size_t)(3 + (i * 7) % 13) << 20) + 4096 * (1 + i % 5) + 40; /* 3..15 MiB + odd tail */
    if (size > want - done) size = want - done + 40;
    char *p;
    if (use_mmap) {
      p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) break;
    } else {
      p = malloc(size);
      if (!p) break;
    }
    memset(p, (int)(i & 0x7f) + 1, size);
    sum += (unsigned char)p[size / 2];
    done += size;
    blocks[count] = p;
    sizes[count++] = size;
  }
  if (release && hold_ms) {
    struct timespec hold = {.tv_sec = hold_ms / 1000, .tv_nsec = (long)(hold_ms % 1000) * 1000000L};
    nanosleep(&hold, NULL);
  }
  for (size_t i = 0; release && i < count; i++) {
    if (use_mmap) munmap(blocks[i], sizes[i]);
    else free(blocks[i]);
  }
  return sum;
}

int main(int argc, char **argv) {
  int threads = 1, stop = 0, release = 0;
  unsigned hold_ms = 0;
  size_t mib = 64, node_size = sizeof(struct node), big = 0, mapped = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";
    if (strcmp(a, "--threads") == 0) threads = atoi(v), i++;
    else if (strcmp(a, "--mib") == 0) mib = strtoull(v, NULL, 10), i++;
    else if (strcmp(a, "--node") == 0) node_size = strtoull(v, NULL, 10), i++;
    else if (strcmp(a, "--big") == 0) big = strtoull(v, NULL, 10), i++;
    else if (strcmp(a, "--mmap") == 0) mapped = strtoull(v, NULL, 10), i++;
    else if (strcmp(a, "--stop") == 0) stop = 1;
    else if (strcmp(a, "--free") == 0) release = 1;
    else if (strcmp(a, "--hold") == 0) hold_ms = (unsigned)strtoul(v, NULL, 10), i++;
    else { fprintf(stderr, "run_heap_workload: unknown argument %s\n", a); return 2; }
  }
  if (threads < 1 || threads > 64 || node_size < sizeof(struct node)) return 2;
  struct job jobs[64];
  pthread_t ids[64];
  for (int t = 0; t < threads; t++) jobs[t] = (struct job){(unsigned)t * 7919u + 1, node_size, mib << 20, 0};
  if (threads == 1) build_table(&jobs[0]);
  else {
    for (int t = 0; t < threads; t++) pthread_create(&ids[t], NULL, build_table, &jobs[t]);
    for (int t = 0; t < threads; t++) pthread_join(ids[t], NULL);
  }
  uint64_t checksum = odd_blocks(big, 0, release, hold_ms) + odd_blocks(mapped, 1, release, hold_ms);
  for (int t = 0; t < threads; t++) checksum += jobs[t].checksum;
  printf("checksum %llu\n", (unsigned long long)checksum);
  fflush(stdout);
  if (stop) raise(SIGSTOP);
  return 0;
}
