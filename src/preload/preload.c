/* SPDX-License-Identifier: MIT */
/* preload.c - libhugify-preload.so: applies the HUGIFY_* settings to the host process. It never writes to
 * stdout, never changes the host's exit status, and a failure inside it means "carry on without huge
 * pages" (and, with HUGIFY_VERBOSE=1, one line on stderr saying so). The constructor runs before main,
 * the mmap cover and the fallback list are lock-free, the report runs at exit; the one thread and the one
 * lock are the peak sampler's (peak.c), and only while a report is wanted. Fork keeps all of it (the
 * child reports under its own pid); exec starts afresh. This file is the constructor: it calls the steps
 * (heap_cover.c, peak.c, report.c, text_step.c), which share their state through preload_state.c, never
 * through this file. */
#include "preload.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* glibc 2.36 reads the THP mode into a stack buffer it does not terminate (__malloc_thp_mode in
 * sysdeps/unix/sysv/linux/malloc-hugepages.c compares it with strcmp), so glibc.malloc.hugetlb=1 takes
 * effect only when the byte after it happens to be 0 when malloc initializes. Measured here: a first
 * malloc from deep inside the text step left the tunable without effect (0% of the heap advised). So
 * malloc is initialized first thing, on a stack cleared for it. Nothing if malloc is already running.
 * glibc reads the THP mode only for glibc.malloc.hugetlb=1 (hugetlb=2 reads the pool's page size, with
 * no such buffer): without that setting malloc is left to initialize when the program first uses it, so
 * a program that never does (true, a shell builtin's exec) pays neither the workaround nor glibc's own
 * malloc setup. */
/* 8 KiB: malloc's initialization through mallopt writes at most ~3.1 KiB below its caller's frame (measured
 * with tunables on glibc 2.36); each further page cleared is a fresh page of stack, a fault (16 KiB cost
 * /bin/true ~15 us more than 8 KiB here). */
/* Eight bytes a store: a byte a store took 8192 stores, about 5 us of every process's start (sampled). */
__attribute__((noinline)) static void clear_stack_below(void) {
  volatile uint64_t area[8192 / sizeof(uint64_t)];
  for (size_t i = 0; i < sizeof area / sizeof area[0]; i++) area[i] = 0;
}
/* mallopt initializes malloc (ptmalloc_init: the tunables, the THP mode) and, with a parameter glibc
 * ignores (M_KEEP, "not used in this malloc"), changes nothing; unlike a malloc(1) it does not grow the heap
 * (top_pad: 64 MiB of brk, advised) in a program that may never allocate (preload_libc.c). */
__attribute__((noinline)) static void initialize_malloc(void) { preload_malloc_initialize(); }

/* glibc 2.38 terminates the buffer (its commit 801deb07f6, "malloc: Assure that THP mode is always null
 * terminated"); the tunable came in 2.35, so 2.35 to 2.37 need the workaround (Debian 12: 2.36; Ubuntu 22.04:
 * 2.35). A newer glibc initializes malloc when the program first allocates, as without the preload. */
static bool glibc_leaves_thp_mode_unterminated(void) { return preload_glibc_before(2, 38); }

__attribute__((constructor)) static void hugify_preload_start(void) {
  if (preload_glibc_tunable_is("glibc.malloc.hugetlb", "1") && glibc_leaves_thp_mode_unterminated()) {
    clear_stack_below();
    initialize_malloc();
  }
  char warnings[1024] = "";
  int bad = preload_read_options(warnings, sizeof warnings);
  const struct hugify_options *options = preload_options();
  uint64_t started = preload_now_ns(); /* the options' own reading (~15 us) is not counted */
  /* One warning, from the process hugify run started (its children inherit the same environment). */
  if (bad > 0 && preload_is_top_level()) dprintf(STDERR_FILENO, "hugify: %s\n", warnings);
  if (bad > 0) preload_fallback_quiet("options", "%s", warnings); /* warned once above, also with HUGIFY_VERBOSE */
  /* Started without `hugify run` (hugify env: systemd, a container, a script): the first process that
   * loads the preload is the top-level one, as the program `hugify run` execs would be; its forks keep
   * this pid, and when a report, verbose output or a warning needs to know which process is the top-level
   * one, its exec'd children inherit it through HUGIFY_RUN_PID, so they report to FILE.<pid> as under
   * `hugify run`. Otherwise nothing reads it: the variable is not set (setenv would initialize malloc, and
   * with it glibc's heap, in a program that may never use it). */
  if (options->run_pid == 0) preload_become_top_level(options->report[0] || options->verbose || bad > 0);
  preload_libc_hand_on(); /* the musl build: its children find the glibc build in LD_PRELOAD */
  /* The glibc build in a program of another C library: only the mmap cover runs (preload_state.c left out
   * the text remap and the report); `hugify run` gives a musl program the musl build, which runs them all. */
  if (!preload_libc_is_native())
    preload_fallback("libc", "this program's C library is not glibc, which libhugify-preload.so is built for: only "
                     "the mmap cover runs here, without the text remap or a report (`hugify run` gives a musl program "
                     "libhugify-preload-musl.so)");

  preload_heap_start(options);
  preload_peak_start(options);
  if (options->report[0]) atexit(preload_report_at_exit);
  preload_add_ns(preload_now_ns() - started);
  /* valgrind runs a translated copy of the code, never the mapped one; and it does not know PAGEMAP_SCAN,
   * so the remap's measurement would read buffers memcheck takes for uninitialized: errors that change
   * the exit status under --error-exitcode (measured). */
  if (options->text && preload_under_valgrind())
    preload_fallback("text", "the program runs under valgrind, which executes its own translation of the code, "
                     "not the code on huge pages; the text remap is left out");
  else if (options->text)
    preload_text_start(options);
}
