/* SPDX-License-Identifier: MIT */
/* threaded_heap.c - a multi-threaded heap workload: T threads each build a chained hash table of N small
 * malloc'd nodes, then look every key up in a scattered order. The nodes of each thread live in that
 * thread's glibc arena (or the allocator's per-thread heap), which is the part of the heap glibc's own
 * huge-page tunable leaves on 4 KiB pages. Prints the time, and what of the heap is on huge pages as
 * measured from /proc/self/smaps (hugify_inspect: brk + private anonymous memory that is not a stack).
 *
 *   threaded_heap [--threads T] [--nodes N] [--json]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "hugify.h"
#include "measure.h"

static const char usage[] =
    "usage: threaded_heap [--threads T] [--nodes N] [--json]\n"
    "\n"
    "T threads (default 8) each build a chained hash table of N nodes (default 5000000, 24-byte nodes\n"
    "malloc'd one by one), then look all N keys up in a scattered order. About T * N * 40 bytes of heap\n"
    "(8 x 5M: 1.7 GB). Prints the wall and CPU time of build + lookups, and of the lookups alone (the\n"
    "build is mostly page faults; the lookups are where the TLB shows), and the heap's share on huge pages.\n"
    "  --json  {\"workload\":\"threaded_heap\",\"threads\":8,\"nodes\":5000000,\"seconds\":4.1,\n"
    "           \"cpu_seconds\":7.9,\"build_seconds\":2.3,\"lookup_seconds\":1.8,\"lookup_cpu_seconds\":3.5,\n"
    "           \"heap_bytes\":1700000000,\"heap_huge_bytes\":1690000000,\"huge_fraction\":0.99,\n"
    "           \"max_rss_bytes\":1710000000,\"checksum\":123}\n"
    "Example: hugify run -- threaded_heap --threads 8 --nodes 5000000 --json\n";

struct node {
  struct node *next;
  uint64_t key, value;
};

struct job {
  unsigned seed;
  size_t nodes;
  uint64_t checksum;
  pthread_barrier_t *built; /* every thread waits here after building, so the lookups are timed apart */
};

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

static void *work(void *argument) {
  struct job *job = argument;
  size_t buckets = 1;
  while (buckets < job->nodes) buckets <<= 1;
  struct node **table = calloc(buckets, sizeof *table);
  if (!table) return NULL;
  for (size_t i = 0; i < job->nodes; i++) {
    struct node *n = malloc(sizeof *n);
    if (!n) return NULL;
    n->key = mix(i ^ ((uint64_t)job->seed << 40));
    n->value = i;
    n->next = table[n->key & (buckets - 1)];
    table[n->key & (buckets - 1)] = n;
  }
  pthread_barrier_wait(job->built);
  uint64_t sum = 0;
  for (size_t i = 0; i < job->nodes; i++) {
    size_t k = (size_t)(mix(i + 0x9e3779b97f4a7c15ULL) % job->nodes); /* scattered order */
    uint64_t key = mix(k ^ ((uint64_t)job->seed << 40));
    for (struct node *n = table[key & (buckets - 1)]; n; n = n->next)
      if (n->key == key) { sum += n->value; break; }
  }
  job->checksum = sum;
  return NULL; /* kept until exit: measured below */
}

static double cpu_now(void) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6 + (double)usage.ru_stime.tv_sec +
         (double)usage.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
  int threads = 8, json = 0;
  size_t nodes = 5000000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) nodes = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--help") == 0) { fputs(usage, stdout); return 0; }
    else { fputs(usage, stderr); return 2; }
  }
  if (threads < 1 || threads > 256 || nodes < 1) { fputs(usage, stderr); return 2; }
  struct job *jobs = calloc((size_t)threads, sizeof *jobs);
  pthread_t *ids = calloc((size_t)threads, sizeof *ids);
  if (!jobs || !ids) return 1;
  pthread_barrier_t built;
  pthread_barrier_init(&built, NULL, (unsigned)threads + 1);
  double started = measure_now(), cpu_started = cpu_now();
  for (int t = 0; t < threads; t++) {
    jobs[t] = (struct job){(unsigned)t + 1, nodes, 0, &built};
    if (pthread_create(&ids[t], NULL, work, &jobs[t]) != 0) return 1;
  }
  pthread_barrier_wait(&built);
  double build_end = measure_now(), cpu_build_end = cpu_now();
  uint64_t checksum = 0;
  for (int t = 0; t < threads; t++) {
    pthread_join(ids[t], NULL);
    checksum += jobs[t].checksum;
  }
  double end = measure_now(), cpu_end = cpu_now();
  double seconds = end - started, cpu = cpu_end - cpu_started;
  double lookup_seconds = end - build_end, lookup_cpu = cpu_end - cpu_build_end;
  struct rusage usage;

  struct hugify_inspect_report report;
  uint64_t heap = 0, heap_huge = 0;
  if (hugify_inspect(0, &report) == 0) {
    heap = report.classes[HUGIFY_CLASS_HEAP].resident + report.classes[HUGIFY_CLASS_ANON].resident;
    heap_huge = hugify_usage_huge(&report.classes[HUGIFY_CLASS_HEAP]) + hugify_usage_huge(&report.classes[HUGIFY_CLASS_ANON]);
  }
  hugify_inspect_report_free(&report);
  getrusage(RUSAGE_SELF, &usage);
  uint64_t max_rss = (uint64_t)usage.ru_maxrss << 10;
  double fraction = heap ? (double)heap_huge / (double)heap : 0.0;
  if (json)
    printf("{\"workload\":\"threaded_heap\",\"threads\":%d,\"nodes\":%zu,\"seconds\":%.4f,\"cpu_seconds\":%.4f,"
           "\"build_seconds\":%.4f,\"lookup_seconds\":%.4f,\"lookup_cpu_seconds\":%.4f,\"heap_bytes\":%llu,\"heap_huge_bytes\":%llu,\"huge_fraction\":%.4f,\"max_rss_bytes\":%llu,\"checksum\":%llu}\n",
           threads, nodes, seconds, cpu, build_end - started, lookup_seconds, lookup_cpu, (unsigned long long)heap, (unsigned long long)heap_huge, fraction,
           (unsigned long long)max_rss, (unsigned long long)checksum);
  else
    printf("threaded_heap: %d threads x %zu nodes: %.3f s (build %.3f s, lookups %.3f s); heap %.1f MiB, %.1f%% on "
           "huge pages; peak RSS %.1f MiB\n",
           threads, nodes, seconds, build_end - started, lookup_seconds, (double)heap / 1048576.0, 100.0 * fraction, (double)max_rss / 1048576.0);
  return 0;
}
