/* SPDX-License-Identifier: MIT */
/* preload_state.c - the state the preload's steps share (declared in preload.h): the options this
 * process started with, the fallbacks recorded for the report, the time spent inside hugify, and which
 * process is the top-level one. The constructor (preload.c) fills it; the steps (heap_cover.c, peak.c,
 * report.c, text_step.c) read it and record into it. It calls none of them. Lock-free: a fallback may be
 * recorded from any thread, at exit too. */
#include "preload.h"

#include "measure.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct hugify_options options;
static struct preload_fallback_entry fallbacks[PRELOAD_MAX_FALLBACKS];
static atomic_uint fallbacks_claimed;
static atomic_bool fallbacks_ready[PRELOAD_MAX_FALLBACKS];
static atomic_uint_fast64_t inside_ns;
/* Only a report reads the time spent inside hugify; without one the clock is never read (its first read
 * faults in libc's clock_gettime and the vDSO's data page: two of the faults a 1 ms program pays). */
static bool timed;

const struct hugify_options *preload_options(void) { return &options; }

int preload_read_options(char *warnings, size_t cap) {
  int bad = options_from_environment(&options, warnings, cap);
  /* The glibc build loaded by another C library's loader (preload_libc.c): the text remap and the report
   * run a good deal of code through a C library it was not compiled for; the cover needs only mmap. */
  if (!preload_libc_is_native()) {
    options.text = TEXT_OFF;
    options.report[0] = '\0';
  }
  timed = options.report[0] != '\0';
  return bad;
}

void preload_become_top_level(bool tell_children) {
  options.run_pid = (int)getpid();
  if (tell_children) {
    char pid[24];
    snprintf(pid, sizeof pid, "%d", options.run_pid);
    setenv("HUGIFY_RUN_PID", pid, 1);
  }
}

uint64_t preload_now_ns(void) { return timed ? measure_now_ns() : 0; }
void preload_add_ns(uint64_t nanoseconds) { atomic_fetch_add_explicit(&inside_ns, nanoseconds, memory_order_relaxed); }
uint64_t preload_total_ns(void) { return atomic_load_explicit(&inside_ns, memory_order_relaxed); }

bool preload_is_top_level(void) { return options.run_pid == 0 || options.run_pid == getpid(); }

/* Each slot is published with `ready` (release) after its text is written; a reader takes the slots up to
 * the first one that is not ready yet (acquire), so it never reads a slot another thread is still filling
 * (at exit, the report may run while another thread records a fallback). */
static void record_fallback(bool announce, const char *what, const char *format, va_list args) {
  unsigned slot = atomic_fetch_add(&fallbacks_claimed, 1);
  char reason[sizeof fallbacks[0].reason];
  vsnprintf(reason, sizeof reason, format, args);
  if (slot < PRELOAD_MAX_FALLBACKS) {
    snprintf(fallbacks[slot].what, sizeof fallbacks[slot].what, "%s", what);
    memcpy(fallbacks[slot].reason, reason, sizeof reason);
    atomic_store_explicit(&fallbacks_ready[slot], true, memory_order_release);
  }
  if (announce && options.verbose && preload_is_top_level())
    dprintf(STDERR_FILENO, "hugify: %s: %s; carrying on without huge pages there\n", what, reason);
}

void preload_fallback(const char *what, const char *format, ...) {
  va_list args;
  va_start(args, format);
  record_fallback(true, what, format, args);
  va_end(args);
}

void preload_fallback_quiet(const char *what, const char *format, ...) {
  va_list args;
  va_start(args, format);
  record_fallback(false, what, format, args);
  va_end(args);
}

const struct preload_fallback_entry *preload_fallbacks(unsigned *count) {
  unsigned n = 0;
  while (n < PRELOAD_MAX_FALLBACKS && atomic_load_explicit(&fallbacks_ready[n], memory_order_acquire)) n++;
  *count = n;
  return fallbacks;
}
