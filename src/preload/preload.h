/* SPDX-License-Identifier: MIT */
/* preload.h - the steps libhugify-preload.so runs inside the host, one file each, and the state they share
 * (preload_state.c). preload.c, the constructor, calls the steps; the steps call the state. */
#ifndef HUGIFY_PRELOAD_H
#define HUGIFY_PRELOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/auxv.h>

#include "options.h"

/* ---- preload_libc.c: the C library (the only file that names glibc's own functions) ---- */

/* Whether the process runs on the C library this preload was built for. False for the glibc build loaded
 * by musl's loader (a musl program under hugify env's environment): the constructor then runs only the
 * mmap cover. */
bool preload_libc_is_native(void);
/* True on a glibc older than major.minor; false on a newer one and on any other C library. */
bool preload_glibc_before(unsigned major, unsigned minor);
/* glibc: initialize malloc (mallopt with a parameter it ignores), nothing else; other C libraries: nothing. */
void preload_malloc_initialize(void);
/* pthread_atfork, on whichever C library runs the process. 0, or an error number. */
int preload_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void));
/* The musl build: the programs this one execs find libhugify-preload.so (beside it) in LD_PRELOAD in its
 * place, since glibc's loader cannot load the musl build. The glibc build: nothing. */
void preload_libc_hand_on(void);

/* ---- text_step.c: hugify_remap_text() with the HUGIFY_TEXT_* options. Never fails the host. ---- */

enum preload_text_state {
  PRELOAD_TEXT_OFF,     /* not asked for (or left out: valgrind) */
  PRELOAD_TEXT_WAITING, /* HUGIFY_TEXT=auto: the process has not used HUGIFY_TEXT_AFTER_MS of CPU yet */
  PRELOAD_TEXT_RUNNING,
  PRELOAD_TEXT_DONE,
  PRELOAD_TEXT_NO_WINDOW /* auto: the objects loaded at start hold no 2 MiB window of code; no thread */
};
/* HUGIFY_TEXT=1 (or HUGIFY_TEXT_AFTER_MS=0): the remap now, before main. auto: start the thread that does
 * it once the process has used HUGIFY_TEXT_AFTER_MS of CPU time. */
void preload_text_start(const struct hugify_options *options);
/* Where the step is; *cpu_seconds: the process's CPU time when the remap began (0 before). */
enum preload_text_state preload_text_state(double *cpu_seconds);

/* ---- preload_state.c: the state the steps share (the constructor, preload.c, fills it) ---- */

/* The options this process started with (parsed once, in the constructor). */
const struct hugify_options *preload_options(void);
/* The constructor: read the options from the environment (and, when a report is wanted, start counting
 * the time spent inside hugify). The number of bad values, said in `warnings`; 0 when all were good. */
int preload_read_options(char *warnings, size_t cap);
/* The constructor, started without `hugify run`: this process is the top level (HUGIFY_RUN_PID), and with
 * tell_children its exec'd children are told so through the environment. */
void preload_become_top_level(bool tell_children);

/* Record a fallback for the exit report: `what` names the part ("heap", "text /usr/lib/libc.so.6"),
 * the reason says why it runs without huge pages. With HUGIFY_VERBOSE=1 also one line on stderr (the
 * top-level process only). Thread-safe, never allocates; keeps the first PRELOAD_MAX_FALLBACKS. */
#define PRELOAD_MAX_FALLBACKS 32
void preload_fallback(const char *what, const char *format, ...) __attribute__((format(printf, 2, 3)));

struct preload_fallback_entry {
  char what[96];
  char reason[320];
};
/* The same, for the report only: the line on stderr has already been printed. */
void preload_fallback_quiet(const char *what, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* The fallbacks recorded so far (count <= PRELOAD_MAX_FALLBACKS). */
const struct preload_fallback_entry *preload_fallbacks(unsigned *count);

/* Time spent inside hugify in this process: monotonic clock, and the running total. */
/* The base page size (the kernel's, from the auxiliary vector: 4 KiB, 16 KiB or 64 KiB), and n rounded
 * up to (preload_page_down: down to) a multiple of it. Never 4096 written out: arm64 kernels use 16 KiB and
 * 64 KiB pages too. */
static inline size_t preload_page_size(void) { return (size_t)getauxval(AT_PAGESZ); }
static inline uintptr_t preload_page_up(uintptr_t n) { return (n + preload_page_size() - 1) & ~(uintptr_t)(preload_page_size() - 1); }
static inline uintptr_t preload_page_down(uintptr_t n) { return n & ~(uintptr_t)(preload_page_size() - 1); }
/* The monotonic clock (ns) when a report will read the time spent inside hugify (HUGIFY_REPORT), else 0. */
uint64_t preload_now_ns(void);
void preload_add_ns(uint64_t nanoseconds);
uint64_t preload_total_ns(void);

/* True in the process `hugify run` started (HUGIFY_RUN_PID), or in every process without it. */
bool preload_is_top_level(void);

/* ---- heap_cover.c: the heap modes inside the host ---- */

/* Check what the CLI set up for the heap mode (glibc tunables, the preloaded allocator) and switch the
 * mmap cover on for auto/thp: anonymous private mappings of 2 MiB or more made through mmap() (other
 * allocators, runtimes, the program itself) are placed 2 MiB-aligned and advised MADV_HUGEPAGE. */
void preload_heap_start(const struct hugify_options *options);
/* --heap tcmalloc: whether an munmap of [addr, addr + length) is TCMalloc's alignment slack inside one of the
 * carver's regions, to be left mapped (heap_cover.c, "TCMalloc's chunks"). */
bool preload_heap_keeps(void *addr, size_t length);
/* Before the program unmaps or drops (MADV_DONTNEED) [addr, addr + length): a huge page of the runtimes'
 * carver that the range covers in part is split, so the part is freed now, not at the kernel's deferred split. */
void preload_heap_releasing(void *addr, size_t length);
/* Whether `key=value` is one of the colon-separated settings of GLIBC_TUNABLES. Allocates nothing (safe
 * before malloc is initialized). */
bool preload_glibc_tunable_is(const char *key, const char *value);
/* The file malloc resolves to in this process ("" when unknown). */
const char *preload_malloc_library(void);
/* The runtime that owns malloc in this process ("AddressSanitizer", "valgrind memcheck": elf_image.h's
 * heap owners); NULL for an ordinary allocator. A loaded runtime library is found at start, a runtime
 * linked into the program (its init symbol) at the first call. */
const char *preload_heap_owner(void);
/* True when the program runs under valgrind (its vgpreload_core is loaded), found at start. */
bool preload_under_valgrind(void);
/* At exit, with the heap as measured: --heap hugetlb records the shortfall against the pool as a fallback. */
void preload_heap_at_exit(uint64_t heap_resident, uint64_t heap_hugetlb);

/* ---- peak.c: the process's memory at its peak (only while a report is wanted) ---- */

struct preload_peak {
  uint64_t memory_bytes;          /* the highest RSS + hugetlb pages seen (a running maximum of samples) */
  uint64_t snapshot_memory_bytes; /* RSS + hugetlb when the snapshot below was taken */
  double snapshot_seconds;        /* when, from the preload's start (or the fork) */
  double finished_seconds;        /* when tracking ended (at exit) */
  uint64_t allocated_resident, allocated_thp, allocated_hugetlb; /* heap + anon (private anonymous memory) at the snapshot */
  unsigned samples, snapshots;    /* how often memory was looked at, how often heap + anon was measured */
  unsigned interval_ms;           /* the sampler's interval (0: only before large unmaps) */
  double sampler_cpu_seconds;     /* CPU time of the sampler thread */
};
/* Start tracking when a report is wanted: the unmap hooks, and the sampler thread (HUGIFY_PEAK_INTERVAL_MS). */
void preload_peak_start(const struct hugify_options *options);
/* At exit: take a last sample, stop, and return what was kept. */
void preload_peak_finish(struct preload_peak *out);

/* ---- report.c: the exit report (HUGIFY_REPORT) ---- */

/* Measure /proc/self/smaps now and write the report where HUGIFY_REPORT says. Registered with atexit. */
void preload_report_at_exit(void);

#endif
