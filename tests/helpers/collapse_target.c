/* SPDX-License-Identifier: MIT */
/* collapse_target - a child for the inspect/collapse tests: holds memory of known kinds, says where it is,
 * keeps running, and on SIGUSR1 checks that its data survived and exits 0 (intact) or 1 (damaged).
 *
 *   collapse_target [--heap SIZE] [--writer] [--nohuge SIZE] [--thp SIZE] [--hugetlb SIZE] [--small SIZE]
 *                   [--shm SIZE] [--threads N] [--thp-disable] [--advised SIZE] [--except-advised]
 *                   [--faulted SIZE]
 *
 * --heap SIZE    malloc(SIZE) (glibc mmaps it), filled with a pattern while THP is off for the process
 *                (prctl), so it sits on base pages whatever the system THP mode; never madvised.
 * --writer       a thread keeps writing one word per heap page (sweep after sweep) until SIGUSR1; the
 *                check then proves no write was lost while the memory was collapsed under it.
 * --nohuge SIZE  a PMD-aligned region marked MADV_NOHUGEPAGE, filled.
 * --thp SIZE     a PMD-aligned region, MADV_HUGEPAGE, filled and MADV_COLLAPSEd (on THP).
 * --hugetlb SIZE a private MAP_HUGETLB 2 MiB region (needs free pool pages), filled.
 * --small SIZE   a PMD-aligned region filled on base pages (prctl off while filling), never madvised.
 * --shm SIZE     a shared anonymous region, filled.
 * --threads N    N extra threads, blocked in sigwait.
 * --advised SIZE a PMD-aligned region marked MADV_HUGEPAGE, filled on base pages (prctl off while filling).
 * --faulted SIZE a PMD-aligned region marked MADV_HUGEPAGE and filled, never collapsed: folios of the sizes
 *                the per-size controls let faults take (mTHP), or the PMD's.
 * --thp-disable  prctl(PR_SET_THP_DISABLE, 1) at the end (the process keeps THP disabled).
 * --except-advised prctl(PR_SET_THP_DISABLE, 1, PR_THP_DISABLE_EXCEPT_ADVISED) at the end (Linux 6.18: THP
 *                only where advised); exits 3 when the kernel refuses it.
 *
 * On stdout, one line per region "NAME 0xADDRESS SIZE", then "ready PID". */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "os.h" /* MADV_COLLAPSE, MAP_HUGE_SHIFT, PR_THP_DISABLE_EXCEPT_ADVISED on older headers */

#define HUGE os_pmd_size()  /* the kernel's PMD huge page: 2 MiB, 32 MiB on arm64's 16 KiB pages */
#define PAGE os_base_page()

struct region {
  const char *name;
  uint64_t *words;
  size_t size;
  uint64_t salt; /* of its fill pattern */
};
static struct region regions[8];
static int region_count;

static uint64_t pattern(uint64_t index, uint64_t salt) {
  uint64_t x = index * UINT64_C(0x9e3779b97f4a7c15) + salt;
  x ^= x >> 31;
  x *= UINT64_C(0xbf58476d1ce4e5b9);
  return x ^ (x >> 29);
}

static void fill(struct region *r, uint64_t salt) {
  r->salt = salt;
  for (size_t i = 0; i < r->size / sizeof(uint64_t); i++) r->words[i] = pattern(i, salt);
}

/* A PMD-aligned region with read-only, never touched neighbours: a mapping of different protection on
 * each side keeps the kernel from merging the region with a later mapping, so tests find it as one
 * mapping. (Read-only, not PROT_NONE: a PROT_NONE page below read-write memory looks like a thread stack's
 * guard page.) */
static void *aligned_map(size_t size) {
  char *raw = mmap(NULL, size + 2 * HUGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  char *at = (char *)(((uintptr_t)raw + HUGE + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
  if (mprotect(at, size, PROT_READ | PROT_WRITE) != 0) return NULL;
  return at;
}

static struct region *add(const char *name, void *p, size_t size) {
  if (!p || p == MAP_FAILED) {
    fprintf(stderr, "collapse_target: cannot map %s (%zu bytes): %s\n", name, size, strerror(errno));
    exit(2);
  }
  struct region *r = &regions[region_count++];
  r->name = name;
  r->words = p;
  r->size = size;
  return r;
}

/* The writer: word 0 of heap page p holds pattern(first word) + generation of the last sweep over p. */
static _Atomic int stop_writer;
static uint64_t sweeps_done, stopped_at; /* read after join */
static struct region *heap;

static void *writer(void *unused) {
  (void)unused;
  size_t pages = heap->size / PAGE, words_per_page = PAGE / sizeof(uint64_t);
  for (uint64_t generation = 1;; generation++) {
    for (size_t p = 0; p < pages; p++) {
      if (atomic_load_explicit(&stop_writer, memory_order_relaxed)) {
        sweeps_done = generation;
        stopped_at = p;
        return NULL;
      }
      heap->words[p * words_per_page] = pattern(p * words_per_page, 1) + generation;
    }
  }
}

static bool check_heap(bool with_writer) {
  size_t words_per_page = PAGE / sizeof(uint64_t), bad = 0;
  for (size_t i = 0; i < heap->size / sizeof(uint64_t); i++) {
    uint64_t expected = pattern(i, 1);
    if (with_writer && i % words_per_page == 0) {
      size_t page = i / words_per_page;
      /* pages before the stop point were written in the last (partial) sweep, the rest in the one before */
      expected += page < stopped_at ? sweeps_done : sweeps_done - 1;
    }
    if (heap->words[i] != expected && bad++ < 5)
      fprintf(stderr, "collapse_target: heap word %zu is %llx, expected %llx\n", i,
              (unsigned long long)heap->words[i], (unsigned long long)expected);
  }
  return bad == 0;
}

static pthread_barrier_t threads_started;

static void *blocked_thread(void *unused) {
  (void)unused;
  pthread_barrier_wait(&threads_started);
  for (;;) pause();
  return NULL;
}

static size_t size_arg(const char *text) {
  char *end;
  unsigned long long v = strtoull(text, &end, 10);
  switch (*end) {
  case 'k': case 'K': v <<= 10; break;
  case 'm': case 'M': v <<= 20; break;
  case 'g': case 'G': v <<= 30; break;
  default: break;
  }
  return (size_t)v;
}

int main(int argc, char **argv) {
  size_t heap_size = 0, nohuge = 0, thp = 0, hugetlb = 0, small = 0, shm = 0, advised = 0, faulted = 0;
  int threads = 0;
  bool with_writer = false, thp_disable = false, except_advised = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";
    if (strcmp(a, "--heap") == 0) heap_size = size_arg(v), i++;
    else if (strcmp(a, "--nohuge") == 0) nohuge = size_arg(v), i++;
    else if (strcmp(a, "--thp") == 0) thp = size_arg(v), i++;
    else if (strcmp(a, "--hugetlb") == 0) hugetlb = size_arg(v), i++;
    else if (strcmp(a, "--small") == 0) small = size_arg(v), i++;
    else if (strcmp(a, "--shm") == 0) shm = size_arg(v), i++;
    else if (strcmp(a, "--threads") == 0) threads = atoi(v), i++;
    else if (strcmp(a, "--writer") == 0) with_writer = true;
    else if (strcmp(a, "--advised") == 0) advised = size_arg(v), i++;
    else if (strcmp(a, "--faulted") == 0) faulted = size_arg(v), i++;
    else if (strcmp(a, "--thp-disable") == 0) thp_disable = true;
    else if (strcmp(a, "--except-advised") == 0) except_advised = true;
    else { fprintf(stderr, "collapse_target: unknown argument %s\n", a); return 2; }
  }
  /* Signals are taken synchronously by sigwait in main; every thread inherits the mask. */
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGUSR1);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, NULL);

  /* THP off while filling: the 4 KiB regions stay on base pages in any system THP mode. */
  prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
  if (heap_size) fill(heap = add("heap", malloc(heap_size), heap_size), 1);
  if (nohuge) {
    struct region *r = add("nohuge", aligned_map(nohuge), nohuge);
    madvise(r->words, nohuge, MADV_NOHUGEPAGE);
    fill(r, 2);
  }
  if (small) fill(add("small", aligned_map(small), small), 3);
  if (advised) {
    struct region *r = add("advised", aligned_map(advised), advised);
    madvise(r->words, advised, MADV_HUGEPAGE);
    fill(r, 7);
  }
  if (shm)
    fill(add("shm", mmap(NULL, shm, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0), shm), 4);
  if (hugetlb)
    fill(add("hugetlb", mmap(NULL, hugetlb, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (21 << MAP_HUGE_SHIFT), -1, 0), hugetlb),
         5);
  prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
  if (thp) {
    struct region *r = add("thp", aligned_map(thp), thp);
    madvise(r->words, thp, MADV_HUGEPAGE);
    fill(r, 6);
    madvise(r->words, thp, MADV_COLLAPSE); /* whatever faulting gave, make it huge (best effort) */
  }
  if (faulted) {
    struct region *r = add("faulted", aligned_map(faulted), faulted);
    madvise(r->words, faulted, MADV_HUGEPAGE);
    fill(r, 8);
  }
  pthread_barrier_init(&threads_started, NULL, (unsigned)threads + 1);
  for (int t = 0; t < threads; t++) {
    pthread_t thread;
    pthread_create(&thread, NULL, blocked_thread, NULL);
  }
  pthread_barrier_wait(&threads_started); /* every thread has run: its stack pages are touched */
  usleep(20000);                          /* ... and it has gone on into pause() */
  pthread_t writer_thread;
  if (with_writer && heap) pthread_create(&writer_thread, NULL, writer, NULL);
  else with_writer = false;
  if (thp_disable) prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
  if (except_advised && prctl(PR_SET_THP_DISABLE, 1, PR_THP_DISABLE_EXCEPT_ADVISED, 0, 0) != 0) {
    printf("unsupported %s\n", strerror(errno));
    fflush(stdout);
    return 3;
  }

  for (int i = 0; i < region_count; i++)
    printf("%s 0x%llx %zu\n", regions[i].name, (unsigned long long)(uintptr_t)regions[i].words, regions[i].size);
  printf("ready %d\n", (int)getpid());
  fflush(stdout);

  int signal = 0;
  sigwait(&signals, &signal);
  if (signal == SIGTERM) return 0;
  if (with_writer) {
    atomic_store(&stop_writer, 1);
    pthread_join(writer_thread, NULL);
  }
  bool ok = true;
  for (int i = 0; i < region_count; i++) {
    struct region *r = &regions[i];
    if (r == heap) { ok &= check_heap(with_writer); continue; }
    for (size_t w = 0; w < r->size / sizeof(uint64_t); w++)
      if (r->words[w] != pattern(w, r->salt)) {
        fprintf(stderr, "collapse_target: %s word %zu damaged\n", r->name, w);
        ok = false;
        break;
      }
  }
  printf("%s\n", ok ? "intact" : "DAMAGED");
  return ok ? 0 : 1;
}
