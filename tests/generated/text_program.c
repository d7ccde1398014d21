/* SPDX-License-Identifier: MIT */
/* text_program.c - the text remap's test program: runs >= 16 MiB of generated code (text_generator.c)
 * that lives in this executable (text_program_static, text_program_aligned) or in a shared object
 * (text_program_shared), optionally after hugify_remap_text(), and checks the result.
 *
 * usage: text_program [--remap [--remap]] [--kind thp|2m] [--fail-step K] [--main-only] [--exclude PATTERNS]
 *                     [--perf-map] [--busy-ms N] [--hold]
 * --busy-ms N: run the generated code over and over until the process has used N ms of CPU time (the
 * preload's HUGIFY_TEXT=auto remaps it meanwhile, from its own thread); every run's checksum must hold.
 * stdout, one fact per line:
 *   remap RC moved_bytes N huge_bytes N window_bytes N moved_segments N nanoseconds N reason TEXT
 *   segment PATH START END WINDOW_START WINDOW_END PATH_USED KIND HUGE_BYTES FAILED_STEP REASON
 *   perf_map FILE
 *   window START END          the 2 MiB windows of the object holding the generated code (hex)
 *   function NAME ADDRESS     a few generated functions (hex address)
 *   checksum 0xHEX ok|BAD
 *   ready                     (--hold: then waits until stdin closes, so a test can read our smaps)
 * Exit status 0 when the checksum is right, 1 when it is not, 2 bad usage. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <stdbool.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hugify.h"
#include "internal.h" /* text_inject_failure */

uint64_t hugify_generated_run(void);
extern const uint64_t hugify_generated_expected;
extern const unsigned hugify_generated_count;
extern uint64_t (*const hugify_generated_table[])(uint64_t);

struct code_object {
  uintptr_t base;
};

static int print_windows(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  struct code_object *code = data;
  if (info->dlpi_addr != code->base) return 0;
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uintptr_t huge = (uintptr_t)2 << 20, page = 4096;
    uintptr_t start = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
    uintptr_t end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + page - 1) & ~(page - 1);
    uintptr_t lo = (start + huge - 1) & ~(huge - 1), hi = end & ~(huge - 1);
    if (hi > lo) printf("window %" PRIxPTR " %" PRIxPTR "\n", lo, hi);
  }
  return 1;
}

static void print_report(int rc, const struct hugify_text_report *r) {
  printf("remap %d moved_bytes %" PRIu64 " huge_bytes %" PRIu64 " window_bytes %" PRIu64 " moved_segments %u "
         "nanoseconds %" PRIu64 " reason %s\n",
         rc, r->moved_bytes, r->huge_bytes, r->window_bytes, r->moved_segments, r->nanoseconds, r->reason);
  for (size_t i = 0; i < r->object_count; i++) {
    const struct hugify_text_object *o = &r->objects[i];
    for (unsigned k = 0; k < o->segment_count && k < HUGIFY_TEXT_MAX_SEGMENTS; k++) {
      const struct hugify_text_segment *s = &o->segments[k];
      printf("segment %s %" PRIx64 " %" PRIx64 " %" PRIx64 " %" PRIx64 " %s %s %" PRIu64 " %d %s\n", o->path, s->start,
             s->end, s->window_start, s->window_end, hugify_text_path_name(s->path), hugify_page_kind_name(s->kind),
             s->huge_bytes, s->failed_step, s->reason[0] ? s->reason : o->reason[0] ? o->reason : "-");
    }
  }
  if (r->perf_map[0]) printf("perf_map %s\n", r->perf_map);
}

int main(int argc, char **argv) {
  struct hugify_text_opts opts = {0};
  int remaps = 0;
  bool hold = false;
  long busy_ms = 0;
  for (int i = 1; i < argc; i++) {
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--remap") == 0) remaps++; /* twice: the second call must find nothing left to move */
    else if (strcmp(argv[i], "--hold") == 0) hold = true;
    else if (strcmp(argv[i], "--busy-ms") == 0 && next) busy_ms = atol(argv[++i]);
    else if (strcmp(argv[i], "--main-only") == 0) opts.flags |= HUGIFY_TEXT_MAIN_ONLY;
    else if (strcmp(argv[i], "--perf-map") == 0) opts.flags |= HUGIFY_TEXT_PERF_MAP;
    else if (strcmp(argv[i], "--kind") == 0 && next) {
      opts.kind = strcmp(next, "2m") == 0 ? HUGIFY_PAGE_2M : HUGIFY_PAGE_THP;
      i++;
    } else if (strcmp(argv[i], "--fail-step") == 0 && next) {
      text_inject_failure(atoi(next));
      i++;
    } else if (strcmp(argv[i], "--exclude") == 0 && next) {
      opts.exclude = next;
      i++;
    } else {
      fprintf(stderr, "text_program: bad argument '%s'\n", argv[i]);
      return 2;
    }
  }
  for (int k = 0; k < remaps; k++) {
    struct hugify_text_report report;
    int rc = hugify_remap_text(&opts, &report);
    print_report(rc, &report);
    hugify_text_report_free(&report);
  }
  Dl_info where;
  struct code_object code = {0};
  if (dladdr((void *)hugify_generated_table[0], &where)) code.base = (uintptr_t)where.dli_fbase;
  /* dli_fbase is the lowest mapped address; dlpi_addr the load bias: equal for PIE and shared objects. */
  dl_iterate_phdr(print_windows, &code);
  unsigned n = hugify_generated_count, picks[] = {0, n / 3, n / 2, n - 1};
  for (unsigned i = 0; i < sizeof picks / sizeof picks[0]; i++)
    printf("function hugify_generated_%u %" PRIxPTR "\n", picks[i], (uintptr_t)hugify_generated_table[picks[i]]);
  uint64_t x = hugify_generated_run();
  bool ok = x == hugify_generated_expected;
  for (struct timespec used = {0, 0}; ok && (used.tv_sec * 1000 + used.tv_nsec / 1000000) < busy_ms;) {
    ok = hugify_generated_run() == hugify_generated_expected;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
  }
  printf("checksum 0x%016" PRIx64 " %s\n", x, ok ? "ok" : "BAD");
  fflush(stdout);
  if (hold) {
    printf("ready\n");
    fflush(stdout);
    char buf[256];
    while (read(STDIN_FILENO, buf, sizeof buf) > 0) {
    }
  }
  return ok ? 0 : 1;
}
