/* SPDX-License-Identifier: MIT */
/* peak.c - the process's memory at its peak, for the report.
 *
 * A report taken at exit misses memory the program freed before it exited (a hash table destroyed at the
 * end of main is gone from smaps by the time atexit runs). So, while a report is wanted, the preload keeps
 * a snapshot of the process's private anonymous memory (heap + anon, in the classes of `hugify inspect`)
 * taken near the moment its memory use was highest:
 *
 * - before every munmap, shrinking mremap and madvise(DONTNEED|FREE|REMOVE) of 2 MiB or more that goes
 *   through the PLT (other allocators, runtimes, the program itself), while the memory is still there;
 * - from a sampler thread every HUGIFY_PEAK_INTERVAL_MS (default 20 ms; less often while memory stays
 *   put), because glibc's malloc unmaps through internal calls that no preload can see.
 *
 * A sample reads /proc/self/status (VmRSS + HugetlbPages: kernel counters, no page walk); only when the
 * process uses more memory than at the last snapshot (1/16 more, or more at all after 2 s) is
 * /proc/self/smaps_rollup read, which walks the page tables once. That keeps the cost to about a dozen
 * walks per doubling of the process's memory; the sampler's own CPU time is reported. A peak that lasts
 * less than one interval, given back by glibc's internal calls, can be missed. The sampler blocks every
 * signal, so the host's signals are never delivered on it; a forked child starts its own. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "os.h"
#include "preload.h"
#include "procfs.h"

#define PEAK_UNMAP_MIN OS_MIB(2)       /* an unmap worth a sample first: a cost, not a page size */
#define PEAK_FIRST_SNAPSHOT OS_MIB(4)  /* below this the exit report tells the same story */
#define PEAK_GROWTH_NUMERATOR 17         /* a new snapshot at 17/16 of the last one's memory ... */
#define PEAK_GROWTH_DENOMINATOR 16
#define PEAK_REFRESH_NS 2000000000ull    /* ... or at any new high 2 s after it */
#define PEAK_IDLE_MS 640                 /* the longest pause while memory does not move */

static pthread_mutex_t peak_lock = PTHREAD_MUTEX_INITIALIZER;
static struct preload_peak peak;           /* guarded by peak_lock */
static uint64_t snapshot_memory, snapshot_ns, started_ns; /* guarded by peak_lock */
static atomic_int tracking;                 /* 1 while a report is wanted and the process runs */
static unsigned interval_ms;
static pthread_t sampler;
static atomic_int sampler_running;

typedef int (*munmap_function)(void *, size_t);
typedef void *(*mremap_function)(void *, size_t, size_t, int, ...);
typedef int (*madvise_function)(void *, size_t, int);
static munmap_function next_munmap;
static mremap_function next_mremap;
static madvise_function next_madvise;

/* RSS + hugetlb pages of this process now (bytes), or 0 when /proc cannot be read. */
static uint64_t memory_now(void) {
  char text[4096];
  uint64_t rss = 0, hugetlb = 0;
  if (os_read_small("/proc/self/status", text, sizeof text) <= 0 || !parse_keyed_value(text, "VmRSS", &rss)) return 0;
  parse_keyed_value(text, "HugetlbPages", &hugetlb);
  return rss + hugetlb;
}

/* heap + anon now, from smaps_rollup: all private anonymous memory, hugetlb included (thread stacks
 * too, which are small). */
static bool measure_allocated(struct preload_peak *out) {
  char text[4096];
  if (os_read_small("/proc/self/smaps_rollup", text, sizeof text) <= 0) return false;
  uint64_t anonymous = 0, thp = 0, hugetlb = 0;
  if (!parse_keyed_value(text, "Anonymous", &anonymous)) return false;
  parse_keyed_value(text, "AnonHugePages", &thp);
  parse_keyed_value(text, "Private_Hugetlb", &hugetlb);
  out->allocated_resident = anonymous + hugetlb;
  out->allocated_thp = thp;
  out->allocated_hugetlb = hugetlb;
  return true;
}

/* One sample: the running maximum always; a heap + anon snapshot when memory grew enough since the last one.
 * `before_unmap`: memory is about to go, so any level at or above the last snapshot's is worth keeping. */
static uint64_t sample(bool before_unmap) {
  if (!atomic_load_explicit(&tracking, memory_order_relaxed)) return 0;
  uint64_t memory = memory_now();
  if (memory == 0) return 0;
  if (before_unmap ? pthread_mutex_trylock(&peak_lock) != 0 : pthread_mutex_lock(&peak_lock) != 0) return memory;
  uint64_t now = preload_now_ns();
  peak.samples++;
  if (memory > peak.memory_bytes) peak.memory_bytes = memory;
  bool grown = memory >= PEAK_FIRST_SNAPSHOT &&
               (snapshot_memory == 0 ||
                memory / PEAK_GROWTH_NUMERATOR >= snapshot_memory / PEAK_GROWTH_DENOMINATOR ||
                (memory > snapshot_memory && (before_unmap || now - snapshot_ns >= PEAK_REFRESH_NS)));
  struct preload_peak measured;
  if (grown && measure_allocated(&measured)) {
    peak.allocated_resident = measured.allocated_resident;
    peak.allocated_thp = measured.allocated_thp;
    peak.allocated_hugetlb = measured.allocated_hugetlb;
    peak.snapshot_memory_bytes = memory;
    peak.snapshot_seconds = (double)(now - started_ns) / 1e9;
    peak.snapshots++;
    snapshot_memory = memory;
    snapshot_ns = now;
  }
  pthread_mutex_unlock(&peak_lock);
  return memory;
}

/* Every interval while memory moves; while it stays within 1/64 of the last sample the pause doubles, up
 * to PEAK_IDLE_MS, so an idle server is woken a few times a second, not fifty. */
static void *sampler_main(void *unused) {
  (void)unused;
  unsigned pause_ms = interval_ms;
  uint64_t previous = 0;
  while (atomic_load_explicit(&tracking, memory_order_relaxed)) {
    uint64_t memory = sample(false);
    uint64_t change = memory > previous ? memory - previous : previous - memory;
    pause_ms = change > previous / 64 ? interval_ms : (pause_ms * 2 < PEAK_IDLE_MS ? pause_ms * 2 : PEAK_IDLE_MS);
    if (pause_ms < interval_ms) pause_ms = interval_ms;
    previous = memory;
    struct timespec pause = {.tv_sec = pause_ms / 1000, .tv_nsec = (long)(pause_ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
  }
  return NULL;
}

static void start_sampler(void) {
  if (interval_ms == 0) return;
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved); /* the thread inherits "every signal blocked" */
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, 64 << 10);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&sampler, &attributes, sampler_main, NULL);
  pthread_attr_destroy(&attributes);
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  if (rc != 0) {
    preload_fallback("peak sampler", "cannot start the sampler thread: %s; the peak is measured only before "
                     "large unmaps", strerror(rc));
    return;
  }
  pthread_setname_np(sampler, "hugify-peak");
  atomic_store(&sampler_running, 1);
}

/* A forked child measures its own peak from now on, with its own sampler (threads do not survive fork). */
static void restart_in_child(void) {
  pthread_mutex_init(&peak_lock, NULL);
  memset(&peak, 0, sizeof peak);
  snapshot_memory = snapshot_ns = 0;
  started_ns = preload_now_ns();
  atomic_store(&sampler_running, 0);
  if (atomic_load(&tracking)) start_sampler();
}

void preload_peak_start(const struct hugify_options *options) {
  next_munmap = (munmap_function)dlsym(RTLD_NEXT, "munmap");
  next_mremap = (mremap_function)dlsym(RTLD_NEXT, "mremap");
  next_madvise = (madvise_function)dlsym(RTLD_NEXT, "madvise");
  if (!options->report[0]) return;
  interval_ms = options->peak_interval_ms;
  started_ns = preload_now_ns();
  atomic_store(&tracking, 1);
  preload_atfork(NULL, NULL, restart_in_child);
  start_sampler();
}

void preload_peak_finish(struct preload_peak *out) {
  sample(false); /* the memory as it is at exit counts too */
  atomic_store(&tracking, 0);
  pthread_mutex_lock(&peak_lock);
  *out = peak;
  pthread_mutex_unlock(&peak_lock);
  clockid_t clock;
  struct timespec used;
  if (atomic_load(&sampler_running) && pthread_getcpuclockid(sampler, &clock) == 0 &&
      clock_gettime(clock, &used) == 0)
    out->sampler_cpu_seconds = (double)used.tv_sec + (double)used.tv_nsec / 1e9;
  out->interval_ms = interval_ms;
  out->finished_seconds = (double)(preload_now_ns() - started_ns) / 1e9;
}

/* ---- the hooks: measure, then do what was asked ------------------------------------------------- */

static bool releases_memory(int advice) {
  return advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE || advice == MADV_DONTNEED_LOCKED;
}

__attribute__((visibility("default"))) int munmap(void *addr, size_t length) {
  if (preload_heap_keeps(addr, length)) return 0;
  preload_heap_releasing(addr, length);
  if (length >= PEAK_UNMAP_MIN) sample(true);
  if (next_munmap) return next_munmap(addr, length);
  return (int)syscall(SYS_munmap, addr, length); /* before our constructor ran */
}

__attribute__((visibility("default"))) void *mremap(void *old_address, size_t old_size, size_t new_size, int flags,
                                                    ...) {
  void *new_address = NULL;
  if (flags & MREMAP_FIXED) {
    va_list args;
    va_start(args, flags);
    new_address = va_arg(args, void *);
    va_end(args);
  }
  if (old_size >= PEAK_UNMAP_MIN && new_size < old_size) sample(true);
  if (next_mremap) return next_mremap(old_address, old_size, new_size, flags, new_address);
  long result = syscall(SYS_mremap, old_address, old_size, new_size, flags, new_address);
  return result == -1 ? MAP_FAILED : (void *)result;
}

__attribute__((visibility("default"))) int madvise(void *addr, size_t length, int advice) {
  if (length >= PEAK_UNMAP_MIN && releases_memory(advice)) sample(true);
  if (advice == MADV_DONTNEED || advice == MADV_DONTNEED_LOCKED) preload_heap_releasing(addr, length);
  if (next_madvise) return next_madvise(addr, length, advice);
  return (int)syscall(SYS_madvise, addr, length, advice);
}
