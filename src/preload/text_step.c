/* SPDX-License-Identifier: MIT */
/* text_step.c - the preload's text step: hugify_remap_text() with the HUGIFY_TEXT_* options.
 * Never fails the host: whatever could not be moved stays where it was (the remap guarantees that), each
 * segment that had a window and was not moved is recorded as a fallback for the exit report (and, with
 * HUGIFY_VERBOSE=1, one line on stderr), and with HUGIFY_VERBOSE=1 one summary line says what moved and
 * notes the rest (no anonymous memory names, perf map problems).
 *
 * When: HUGIFY_TEXT=1 before main; HUGIFY_TEXT=auto (`hugify run`'s default) once the process has used
 * HUGIFY_TEXT_AFTER_MS of CPU time. The copy costs about a millisecond per 2 MiB window moved and only pays
 * off over a process's life, so a compiler run of 30 ms must not pay it (docs/run.md "When the code
 * moves"). A thread of ours ("hugify-text") sleeps until then: it wakes at most every second, never
 * sooner than the CPU time could have reached the threshold with every CPU busy, checks
 * CLOCK_PROCESS_CPUTIME_ID, and does the remap once. A short program exits before it ever wakes. Even a
 * sleeping thread costs a small program (its creation and its end: about 80 us here, 12 % of /bin/true),
 * so it is started only when the objects loaded at start hold a 2 MiB window of code, i.e. there is
 * something to move: /bin/true, sh, as and the gcc driver have none, cc1plus has 9.
 *
 * Remapping while other threads run is safe because the swap is one mremap(MREMAP_FIXED) of a
 * byte-identical, already read+exec copy over the window: the kernel replaces the old mapping and moves the
 * copy's page tables under the mmap write lock in one call, so another thread's fetch either hits the old
 * pages (still mapped and cached until the TLB flush that ends the call) or faults, waits for the lock
 * and finds the copy; both hold the same bytes, and at no moment is the range unmapped. The objects are
 * walked inside dl_iterate_phdr, which holds the loader's lock, so dlclose cannot unmap one under us.
 * A fork while the copy is half built would leave the copy in the child: fork waits for the step (an
 * atfork lock). A forked child that was still waiting starts its own thread. */
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elf_image.h"
#include "hugify.h"
#include "internal.h"
#include "preload.h"
#include "units.h"

static void record_failures(const struct hugify_text_report *report) {
  for (size_t i = 0; i < report->object_count; i++) {
    const struct hugify_text_object *o = &report->objects[i];
    for (unsigned k = 0; k < o->segment_count && k < HUGIFY_TEXT_MAX_SEGMENTS; k++) {
      const struct hugify_text_segment *s = &o->segments[k];
      if (s->window_end == s->window_start || s->path != HUGIFY_TEXT_SKIPPED) continue; /* nothing to move, or moved */
      if (!s->reason[0] && !s->failed_step) continue; /* not tried: its object was filtered out (object reason) */
      char what[96]; /* "text PATH", keeping the end of a long path */
      size_t len = strlen(o->path);
      snprintf(what, sizeof what, "text %.88s", len > 88 ? o->path + len - 88 : o->path);
      preload_fallback(what, "%s", s->reason[0] ? s->reason : "not moved");
    }
  }
}

static void text_step(const struct hugify_options *options) {
  struct hugify_text_opts opts = {
      .flags = (options->text_main_only ? HUGIFY_TEXT_MAIN_ONLY : 0) | (options->perf_map ? HUGIFY_TEXT_PERF_MAP : 0),
      .kind = options->text_hugetlb ? HUGIFY_PAGE_2M : HUGIFY_PAGE_THP,
      .min_size = options->text_min_size,
      .include = options->text_include,
      .exclude = options->text_exclude,
  };
  struct hugify_text_report report;
  text_inject_failure(options->test.text_fail_step);
  int rc = hugify_remap_text(&opts, &report);
  if (rc != 0) {
    preload_fallback("text", "%s", report.reason[0] ? report.reason : "the text remap failed");
  } else {
    record_failures(&report);
  }
  if (options->verbose && preload_is_top_level() && rc == 0) {
    char moved[32], huge[32];
    format_bytes(report.moved_bytes, moved, sizeof moved);
    format_bytes(report.huge_bytes, huge, sizeof huge);
    dprintf(STDERR_FILENO, "hugify: text: %s of code moved in %u segments, %s measured on huge pages, in %.1f ms%s%s%s%s\n",
            moved, report.moved_segments, huge, (double)report.nanoseconds / 1e6,
            report.perf_map[0] ? "; perf map " : "", report.perf_map, report.reason[0] ? "; " : "", report.reason);
  }
  hugify_text_report_free(&report);
}

/* ---- when ------------------------------------------------------------------------------------------- */

static atomic_int step_state = PRELOAD_TEXT_OFF;
static atomic_uint_fast64_t step_cpu_ns; /* the process CPU time when the step began */
static pthread_mutex_t step_lock = PTHREAD_MUTEX_INITIALIZER; /* held across the step; fork waits for it */
static const struct hugify_options *step_options;

static uint64_t process_cpu_ns(void) {
  struct timespec now;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now) != 0) return 0;
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static void run_step(void) {
  pthread_mutex_lock(&step_lock);
  int waiting = PRELOAD_TEXT_WAITING;
  if (atomic_compare_exchange_strong(&step_state, &waiting, PRELOAD_TEXT_RUNNING)) {
    atomic_store(&step_cpu_ns, process_cpu_ns());
    uint64_t started = preload_now_ns();
    text_step(step_options);
    preload_add_ns(preload_now_ns() - started);
    atomic_store(&step_state, PRELOAD_TEXT_DONE);
  }
  pthread_mutex_unlock(&step_lock);
}

static void *waiter_main(void *unused) {
  (void)unused;
  uint64_t threshold = (uint64_t)step_options->text_after_ms * 1000000u;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1) cpus = 1;
  for (;;) {
    uint64_t used = process_cpu_ns();
    if (used >= threshold) break;
    uint64_t pause = (threshold - used) / (uint64_t)cpus; /* the soonest the threshold can be reached */
    if (pause < 10000000u) pause = 10000000u;
    if (pause > 1000000000u) pause = 1000000000u;
    struct timespec sleep_for = {.tv_sec = (time_t)(pause / 1000000000u), .tv_nsec = (long)(pause % 1000000000u)};
    nanosleep(&sleep_for, NULL);
  }
  run_step();
  return NULL;
}

static void start_waiter(void) {
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved); /* the host's signals are never delivered on our thread */
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, 256 << 10); /* the step's report and the walk's buffers live here */
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  pthread_t waiter;
  int rc = pthread_create(&waiter, &attributes, waiter_main, NULL);
  pthread_attr_destroy(&attributes);
  pthread_sigmask(SIG_SETMASK, &saved, NULL);
  if (rc != 0) {
    atomic_store(&step_state, PRELOAD_TEXT_DONE);
    preload_fallback("text", "cannot start the thread that waits to remap the code: %s", strerror(rc));
    return;
  }
  pthread_setname_np(waiter, "hugify-text");
}

static void before_fork(void) { pthread_mutex_lock(&step_lock); }
static void after_fork_in_parent(void) { pthread_mutex_unlock(&step_lock); }
static void after_fork_in_child(void) {
  pthread_mutex_init(&step_lock, NULL);
  if (atomic_load(&step_state) == PRELOAD_TEXT_WAITING) start_waiter(); /* threads do not survive fork */
}

static int add_windows(struct dl_phdr_info *info, size_t size, void *context) {
  (void)size;
  uint64_t *bytes = context, window_start, window_end;
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uint64_t start = info->dlpi_addr + ph->p_vaddr;
    *bytes += elf_huge_window(start, start + ph->p_memsz, &window_start, &window_end);
  }
  return 0;
}

void preload_text_start(const struct hugify_options *options) {
  step_options = options;
  atomic_store(&step_state, PRELOAD_TEXT_WAITING);
  if (options->text == TEXT_NOW || options->text_after_ms == 0) {
    run_step();
    return;
  }
  uint64_t window_bytes = 0;
  dl_iterate_phdr(add_windows, &window_bytes);
  if (window_bytes == 0) { /* nothing the remap could move: no thread */
    atomic_store(&step_state, PRELOAD_TEXT_NO_WINDOW);
    return;
  }
  preload_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
  start_waiter();
}

enum preload_text_state preload_text_state(double *cpu_seconds) {
  *cpu_seconds = (double)atomic_load(&step_cpu_ns) / 1e9;
  return (enum preload_text_state)atomic_load(&step_state);
}
