/* SPDX-License-Identifier: MIT */
/* text.c - hugify_remap_text: the code of the main program and of every loaded shared object onto huge
 * pages, at run time.
 *
 * Per executable PT_LOAD segment with a 2 MiB-aligned window: in place (MADV_COLLAPSE of the file mapping)
 * when the kernel can put file text on huge pages, else copy and swap: build a byte-identical copy of the
 * window in fresh huge-page memory elsewhere, make it read+execute, and move it over the original with ONE
 * mremap(MREMAP_MAYMOVE | MREMAP_FIXED). The kernel does that under the mmap write lock: another thread
 * running or faulting in the window waits and then finds the copy; there is no moment without code at
 * those addresses. Every step before the swap works on the copy only, so a failure there unmaps the copy
 * and leaves the original untouched.
 *
 * Our own code may be inside a window being moved (libhugify linked statically into a big program, or
 * libc inside a static binary): during the copy we execute from the original, which is only read; the
 * swap is one system call, and on return the instruction fetch continues from the copy at the same
 * addresses, byte for byte the same instructions (the kernel flushed the TLB for the old pages). So the
 * remap needs no trampoline outside the window. What must not happen is a change of the original between
 * copy and swap: nothing in this process patches code, and windows with modified private pages (uprobes,
 * debugger breakpoints, text relocations) are refused at the check step.
 *
 * The work runs inside dl_iterate_phdr's callback, which holds the loader's lock: no object can be
 * dlclose'd (and its range reused) between looking at it and swapping it. */
#include <errno.h>
#include <fnmatch.h>
#include <link.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "elf_image.h"
#include "array.h"
#include "internal.h"
#include "measure.h"
#include "os.h"
#include "probe.h"
#include "procfs.h"
#include "safe_file.h"
#include "units.h"

static const char *const step_names[HUGIFY_TEXT_STEP_COUNT] = {
    "?", "check", "in-place", "reserve", "advise", "copy", "collapse", "protect", "name", "swap", "verify", "perf-map",
};

const char *hugify_text_step_name(enum hugify_text_step step) {
  return step > 0 && step < HUGIFY_TEXT_STEP_COUNT ? step_names[step] : "?";
}

const char *hugify_text_path_name(enum hugify_text_path path) {
  switch (path) {
  case HUGIFY_TEXT_SKIPPED: return "skipped";
  case HUGIFY_TEXT_IN_PLACE: return "in-place";
  case HUGIFY_TEXT_COPY_SWAP: return "copy-swap";
  }
  return "?";
}

void hugify_text_report_free(struct hugify_text_report *report) {
  if (!report) return;
  free(report->objects);
  report->objects = NULL;
  report->object_count = 0;
}

struct remap {
  struct hugify_text_opts opts;
  int fail_step;           /* text_inject_failure's step for this call, 0 = none */
  struct hugify_text_report *report;
  size_t cap;              /* of report->objects */
  int error;               /* -ENOMEM when the report could not grow */
  bool names_unsupported;  /* PR_SET_VMA_ANON_NAME said EINVAL: the kernel lacks CONFIG_ANON_VMA_NAME */
  char exe[HUGIFY_TEXT_PATH_MAX];
};


/* Fault injection (tests): the step fails as if its system call had. */
static bool injected(const struct remap *r, int step) { return r->fail_step == step; }

/* Test-only fault injection (text_inject_failure): read when a call starts, under remap_lock's order. */
static _Atomic int injected_step;

int text_inject_failure(int step) {
  if (step < 0 || step >= HUGIFY_TEXT_STEP_COUNT) return -EINVAL;
  injected_step = step;
  return 0;
}

static void step_failed(struct hugify_text_segment *s, int step, int err, const char *detail) {
  if (!s->failed_step) s->failed_step = step;
  reason_add(s->reason, sizeof s->reason, "%s failed: %s", hugify_text_step_name(step),
                err ? strerror(err) : detail ? detail : "injected fault (test)");
}

/* ---- object filters -------------------------------------------------------------------------------- */

/* Any of the ':'-separated patterns matches the path or its file name. */
static bool matches_any(const char *patterns, const char *path) {
  const char *name = strrchr(path, '/');
  name = name ? name + 1 : path;
  for (const char *p = patterns; *p;) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    char pattern[512];
    if (len > 0 && len < sizeof pattern) {
      memcpy(pattern, p, len);
      pattern[len] = '\0';
      if (fnmatch(pattern, path, 0) == 0 || fnmatch(pattern, name, 0) == 0) return true;
    }
    p += len + (colon ? 1 : 0);
  }
  return false;
}

/* Why this object is not to be touched, or NULL. */
static const char *object_filtered(const struct remap *r, const struct hugify_text_object *o, char *why, size_t cap) {
  const struct hugify_text_opts *opts = &r->opts;
  if ((opts->flags & HUGIFY_TEXT_MAIN_ONLY) && !o->main_program) return "not the main program (main program only)";
  if (opts->include && opts->include[0] && !matches_any(opts->include, o->path)) return "not in the include patterns";
  if (opts->exclude && opts->exclude[0] && matches_any(opts->exclude, o->path)) return "in the exclude patterns";
  char have[32], want[32];
  if (o->text_bytes < opts->min_size) {
    format_bytes(o->text_bytes, have, sizeof have);
    format_bytes(opts->min_size, want, sizeof want);
    snprintf(why, cap, "%s of code, below the minimum size %s", have, want);
    return why;
  }
  if (o->window_bytes == 0) {
    char pmd[32];
    format_bytes(o->text_bytes, have, sizeof have);
    page_sizes_name(os_pmd_size(), pmd, sizeof pmd);
    snprintf(why, cap, "no %s-aligned window in its %s of code", pmd, have);
    return why;
  }
  return NULL;
}

/* ---- check: what backs the window now ------------------------------------------------------------ */

struct window_state {
  uint64_t file_offset; /* of the window's first byte in the file (for path 1) */
  bool file_backed;
};

/* The window must be covered, without gaps, by private r-x mappings of one file that hold no modified
 * private pages and are not on huge pages already. With PAGEMAP_SCAN: /proc/self/maps (no page walk) and
 * the page flags of the window only; without: /proc/self/smaps. Returns 0, or fills `why` and returns -errno
 * (-EINVAL: the window is not one to move). */
static int check_window(const struct hugify_text_segment *s, struct window_state *state, char *why, size_t cap) {
  bool pagemap = probe_pagemap_scan(NULL, 0) == HUGIFY_FEATURE_YES;
  struct smaps_vma *vmas = NULL;
  long count;
  if (pagemap) {
    char *text;
    count = os_read_file("/proc/self/maps", &text, NULL);
    if (count == 0) {
      count = parse_smaps(text, &vmas);
      free(text);
    }
  } else {
    count = os_read_smaps(0, &vmas);
  }
  if (count < 0) {
    snprintf(why, cap, "/proc/self/%s unreadable (%s)", pagemap ? "maps" : "smaps", strerror((int)-count));
    return (int)count;
  }
  uint64_t at = s->window_start, modified = 0, huge = 0, inode = 0;
  int rc = 0;
  for (long i = 0; i < count && at < s->window_end && rc == 0; i++) {
    const struct smaps_vma *v = &vmas[i];
    if (v->end <= at) continue;
    if (v->start > at) { snprintf(why, cap, "a gap in the mapping at 0x%llx", (unsigned long long)at); rc = -EINVAL; break; }
    if (strncmp(v->path, "[anon:hugify-text", 17) == 0) { snprintf(why, cap, "already moved"); rc = -EINVAL; break; }
    if (strcmp(v->perms, "r-xp") != 0) {
      snprintf(why, cap, "mapped %s, not private read+execute (%.200s)", v->perms, v->path[0] ? v->path : "anonymous");
      rc = -EINVAL;
      break;
    }
    if (at == s->window_start) {
      state->file_backed = v->inode != 0;
      state->file_offset = v->offset + (at - v->start);
      inode = v->inode;
    } else if (v->inode != inode) {
      snprintf(why, cap, "the window spans different files");
      rc = -EINVAL;
      break;
    }
    uint64_t hi = v->end < s->window_end ? v->end : s->window_end;
    double share = v->size ? (double)(hi - at) / (double)v->size : 0;
    if (v->inode) modified += (uint64_t)(share * (double)v->anonymous);
    huge += (uint64_t)(share * (double)(smaps_vma_thp_bytes(v) + smaps_vma_hugetlb_bytes(v)));
    at = hi;
  }
  free(vmas);
  if (rc) return rc;
  if (at < s->window_end) { snprintf(why, cap, "not mapped to the end of the segment"); return -EINVAL; }
  if (pagemap) {
    struct resident_bytes resident;
    if (state->file_backed && os_pagemap_anonymous(s->window_start, s->window_end, &modified) != 0) modified = 1;
    if (os_pagemap_resident(s->window_start, s->window_end, &resident) == 0) huge = resident.huge;
  }
  char size[32];
  if (modified) {
    format_bytes(modified, size, sizeof size);
    snprintf(why, cap, "%s of the window are modified private pages (uprobes, debugger breakpoints or text "
                       "relocations), or they could not be looked at: a copy could carry a uprobe's breakpoint",
             size);
    return -EINVAL;
  }
  if (huge >= s->window_end - s->window_start) { snprintf(why, cap, "already on huge pages"); return -EINVAL; }
  return 0;
}

/* ---- path 1: in place ------------------------------------------------------------------------------ */

static bool try_in_place(struct remap *r, struct hugify_text_segment *s, const struct window_state *state) {
  if ((r->opts.flags & HUGIFY_TEXT_NO_IN_PLACE) || !state->file_backed || r->opts.kind == HUGIFY_PAGE_2M ||
      state->file_offset % os_pmd_size() != 0)
    return false;
  /* Probed only now, for a window that could use it: the probe writes a 4 MiB scratch file. */
  if (probe_file_thp_text(NULL, 0) != HUGIFY_FEATURE_YES) return false;
  void *window = (void *)(uintptr_t)s->window_start;
  size_t length = s->window_end - s->window_start;
  if (injected(r, HUGIFY_TEXT_STEP_IN_PLACE)) { step_failed(s, HUGIFY_TEXT_STEP_IN_PLACE, 0, NULL); return false; }
  int rc = os_madvise(window, length, MADV_HUGEPAGE);
  if (rc == 0) rc = os_madvise(window, length, MADV_COLLAPSE);
  if (rc != 0) {
    step_failed(s, HUGIFY_TEXT_STEP_IN_PLACE, -rc, NULL);
    return false;
  }
  struct hugify_backing b;
  if (hugify_measure_backing(window, length, &b) != 0 || b.resident_thp == 0) {
    reason_add(s->reason, sizeof s->reason, "in-place collapse left no huge pages");
    return false;
  }
  s->path = HUGIFY_TEXT_IN_PLACE;
  s->kind = HUGIFY_PAGE_THP;
  s->huge_bytes = b.resident_thp;
  return true;
}

/* ---- path 2: copy and swap ------------------------------------------------------------------------- */

/* A 2 MiB-aligned anonymous read+write mapping of `length` bytes (THP), or one from the 2 MiB hugetlb pool.
 * Returns 0 or -errno. */
static int reserve_copy(size_t length, bool hugetlb, void **copy) {
  if (hugetlb) /* never MAP_NORESERVE: the pool pages are reserved now or the mmap fails */
    return os_mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | os_map_hugetlb_flags(os_pmd_size()),
                   -1, 0, copy);
  return os_map_aligned(length, os_pmd_size(), PROT_READ | PROT_WRITE, copy);
}

/* hugetlb when asked for and the pool has free pages for the whole window; otherwise not, saying why (the
 * caller tries THP). */
static bool use_hugetlb(const struct remap *r, struct hugify_text_segment *s, size_t length) {
  if (r->opts.kind != HUGIFY_PAGE_2M) return false;
  struct hugify_hugetlb_size pool;
  if (os_hugetlb_read(os_pmd_size(), &pool) != 0) {
    char pmd[32];
    page_sizes_name(os_pmd_size(), pmd, sizeof pmd);
    reason_add(s->reason, sizeof s->reason, "2M: no hugetlb pool of %s pages (the PMD size)", pmd);
    return false;
  }
  uint64_t available = pool.available, pages = length / os_pmd_size();
  if (available >= pages) return true;
  reason_add(s->reason, sizeof s->reason, "2M: the pool has %llu free pages, %llu needed",
                (unsigned long long)available, (unsigned long long)pages);
  return false;
}

static void name_of(const char *path, char *name, size_t cap) {
  /* The kernel takes at most 79 printable characters without []\$`: keep the end of long paths. */
  const char *prefix = "hugify-text:";
  size_t room = 79 - strlen(prefix), len = strlen(path);
  const char *tail = len > room ? path + len - room : path;
  size_t used = strlen(prefix), rest = strlen(tail);
  if (used + rest + 1 > cap) rest = cap - used - 1;
  memcpy(name, prefix, used);
  memcpy(name + used, tail, rest);
  name[used + rest] = '\0';
  for (char *c = name; *c; c++)
    if (*c < 0x20 || *c > 0x7e || strchr("[]\\$`", *c)) *c = '_';
}

/* Steps reserve .. swap. Returns true when the window was swapped. */
static bool copy_and_swap(struct remap *r, const struct hugify_text_object *o, struct hugify_text_segment *s,
                          bool hugetlb) {
  char *window = (char *)(uintptr_t)s->window_start;
  size_t length = s->window_end - s->window_start;
  enum hugify_page_kind kind = hugetlb ? HUGIFY_PAGE_2M : HUGIFY_PAGE_THP;

  if (injected(r, HUGIFY_TEXT_STEP_RESERVE)) { step_failed(s, HUGIFY_TEXT_STEP_RESERVE, 0, NULL); return false; }
  void *reserved;
  int err = -reserve_copy(length, hugetlb, &reserved);
  if (err) { step_failed(s, HUGIFY_TEXT_STEP_RESERVE, err, NULL); return false; }
  char *copy = reserved;

  int step = 0;
  if (!hugetlb) {
    if (injected(r, HUGIFY_TEXT_STEP_ADVISE)) { step = HUGIFY_TEXT_STEP_ADVISE; goto undo; }
    if ((err = -os_madvise(copy, length, MADV_HUGEPAGE)) != 0) { step = HUGIFY_TEXT_STEP_ADVISE; goto undo; }
  }
  if (injected(r, HUGIFY_TEXT_STEP_COPY)) { step = HUGIFY_TEXT_STEP_COPY; goto undo; }
  memcpy(copy, window, length); /* the first write to each 2 MiB faults in a huge page */

  if (!hugetlb) {
    struct hugify_backing b;
    backing_measure_collapse_measure(copy, length, &b);
    if (injected(r, HUGIFY_TEXT_STEP_COLLAPSE)) { step = HUGIFY_TEXT_STEP_COLLAPSE; goto undo; }
    if (b.resident_thp == 0) { /* swapping 4 KiB pages for 4 KiB pages would only cost memory */
      char mode[16];
      probe_thp_setting("enabled", mode, sizeof mode);
      step_failed(s, HUGIFY_TEXT_STEP_COLLAPSE, 0, "no huge page could be had for the copy");
      reason_add(s->reason, sizeof s->reason, "THP is '%s'; memory may be fragmented", mode);
      os_munmap(copy, length);
      return false;
    }
  }

  if (injected(r, HUGIFY_TEXT_STEP_PROTECT)) { step = HUGIFY_TEXT_STEP_PROTECT; goto undo; }
  if ((err = -os_mprotect(copy, length, PROT_READ | PROT_EXEC)) != 0) { step = HUGIFY_TEXT_STEP_PROTECT; goto undo; }

  /* The name helps people and tools; its absence (older kernel, hugetlb) is not a reason to stop. */
  char name[80];
  name_of(o->path, name, sizeof name);
  if (injected(r, HUGIFY_TEXT_STEP_NAME)) {
    step_failed(s, HUGIFY_TEXT_STEP_NAME, 0, NULL);
  } else if (!hugetlb && !r->names_unsupported && (err = -os_name_anon(copy, length, name)) != 0) {
    if (err == EINVAL) r->names_unsupported = true; /* reported once, for the whole call */
    else step_failed(s, HUGIFY_TEXT_STEP_NAME, err, NULL);
  }
  err = 0;

  if (injected(r, HUGIFY_TEXT_STEP_SWAP)) { step = HUGIFY_TEXT_STEP_SWAP; goto undo; }
  void *moved;
  if ((err = -os_mremap(copy, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, window, &moved)) != 0) {
    step = HUGIFY_TEXT_STEP_SWAP;
    goto undo;
  }
  s->path = HUGIFY_TEXT_COPY_SWAP;
  s->kind = kind;
  return true;

undo: /* the copy is not live code yet: dropping it changes nothing the program can see */
  step_failed(s, step, err, NULL);
  os_munmap(copy, length);
  return false;
}

static void verify(struct remap *r, struct hugify_text_segment *s) {
  size_t length = s->window_end - s->window_start;
  struct hugify_backing b;
  int rc = injected(r, HUGIFY_TEXT_STEP_VERIFY) ? -EIO : hugify_measure_backing((void *)(uintptr_t)s->window_start, length, &b);
  if (rc != 0) {
    step_failed(s, HUGIFY_TEXT_STEP_VERIFY, injected(r, HUGIFY_TEXT_STEP_VERIFY) ? 0 : -rc, NULL);
    reason_add(s->reason, sizeof s->reason, "moved, but not measured");
    return;
  }
  s->huge_bytes = b.resident_thp + b.resident_2m + b.resident_1g;
  if (s->huge_bytes < length) {
    char have[32], want[32];
    format_bytes(s->huge_bytes, have, sizeof have);
    format_bytes(length, want, sizeof want);
    reason_add(s->reason, sizeof s->reason, "%s of %s on huge pages after the move", have, want);
  }
}

/* The THP path (instead of hugetlb: then "used THP" is said), when the kernel has THP at all; on one built
 * without it (PREEMPT_RT kernels) the window stays as it is, and the reason names what is missing and the
 * road that is left. */
static bool thp_copy_and_swap(struct remap *r, const struct hugify_text_object *o, struct hugify_text_segment *s,
                              bool instead_of_hugetlb) {
  char mode[16];
  probe_thp_setting("enabled", mode, sizeof mode);
  if (!mode[0]) {
    reason_add(s->reason, sizeof s->reason,
               "this kernel has no transparent huge pages (built without CONFIG_TRANSPARENT_HUGEPAGE): left on "
               "4 KiB pages; a hugetlb pool can hold the code (--kind 2m, HUGIFY_TEXT_PAGES=2M)");
    return false;
  }
  if (instead_of_hugetlb) reason_add(s->reason, sizeof s->reason, "used THP");
  return copy_and_swap(r, o, s, false);
}

static void move_segment(struct remap *r, const struct hugify_text_object *o, struct hugify_text_segment *s) {
  uint64_t start = measure_now_ns();
  struct window_state state = {0, false};
  char why[HUGIFY_REASON_MAX] = "";
  if (injected(r, HUGIFY_TEXT_STEP_CHECK)) {
    step_failed(s, HUGIFY_TEXT_STEP_CHECK, 0, NULL);
  } else if (check_window(s, &state, why, sizeof why) != 0) {
    reason_add(s->reason, sizeof s->reason, "%s", why);
  } else if (try_in_place(r, s, &state)) {
    /* done; measured by try_in_place */
  } else {
    size_t length = s->window_end - s->window_start;
    bool hugetlb = use_hugetlb(r, s, length), moved = hugetlb && copy_and_swap(r, o, s, true);
    if (hugetlb && !moved && r->fail_step == 0) {
      /* hugetlb pages could not be had or moved (mremap of hugetlb needs Linux 5.16): the original is
       * intact, so THP is still worth a try */
      reason_add(s->reason, sizeof s->reason, "trying THP");
      s->failed_step = 0;
    }
    if (!moved && (!hugetlb || r->fail_step == 0))
      moved = thp_copy_and_swap(r, o, s, !hugetlb && r->opts.kind == HUGIFY_PAGE_2M);
    if (moved) verify(r, s);
  }
  s->nanoseconds = measure_now_ns() - start;
}

/* ---- walking the loaded objects -------------------------------------------------------------------- */

static struct hugify_text_object *new_object(struct remap *r) {
  struct hugify_text_report *report = r->report;
  if (ARRAY_GROW(report->objects, report->object_count + 1, r->cap) != 0) return NULL;
  struct hugify_text_object *o = &report->objects[report->object_count++];
  memset(o, 0, sizeof *o);
  return o;
}

static int visit_object(struct dl_phdr_info *info, size_t info_size, void *data) {
  (void)info_size;
  struct remap *r = data;
  struct hugify_text_object *o = new_object(r);
  if (!o) { r->error = -ENOMEM; return 1; }
  o->main_program = r->report->object_count == 1;
  snprintf(o->path, sizeof o->path, "%s", o->main_program ? r->exe : info->dlpi_name);
  if (!o->path[0]) snprintf(o->path, sizeof o->path, "[unnamed object at 0x%llx]", (unsigned long long)info->dlpi_addr);
  o->base = info->dlpi_addr;
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uint64_t start = o->base + ph->p_vaddr, end = start + ph->p_memsz, window_start, window_end;
    o->text_bytes += ph->p_memsz;
    o->window_bytes += elf_huge_window(start, end, &window_start, &window_end);
    if (o->segment_count++ >= HUGIFY_TEXT_MAX_SEGMENTS) continue;
    struct hugify_text_segment *s = &o->segments[o->segment_count - 1];
    s->start = start & ~(page - 1);
    s->end = (end + page - 1) & ~(page - 1);
    s->window_start = window_start;
    s->window_end = window_end;
    s->kind = HUGIFY_PAGE_4K;
  }
  if (o->segment_count > HUGIFY_TEXT_MAX_SEGMENTS)
    reason_add(o->reason, sizeof o->reason, "%u more executable segments were not looked at",
                  o->segment_count - HUGIFY_TEXT_MAX_SEGMENTS);
  struct hugify_text_report *report = r->report;
  report->text_bytes += o->text_bytes;
  report->window_bytes += o->window_bytes;
  char why[HUGIFY_REASON_MAX];
  const char *filtered = o->segment_count == 0 ? "no executable segment" : object_filtered(r, o, why, sizeof why);
  unsigned kept = o->segment_count < HUGIFY_TEXT_MAX_SEGMENTS ? o->segment_count : HUGIFY_TEXT_MAX_SEGMENTS;
  if (filtered) {
    reason_add(o->reason, sizeof o->reason, "%s", filtered);
    report->skipped_segments += o->segment_count;
    return 0;
  }
  uint64_t start = measure_now_ns();
  for (unsigned i = 0; i < kept; i++) {
    struct hugify_text_segment *s = &o->segments[i];
    if (s->window_end == s->window_start) {
      char pmd[32];
      page_sizes_name(os_pmd_size(), pmd, sizeof pmd);
      snprintf(s->reason, sizeof s->reason, "no %s-aligned window", pmd);
      report->skipped_segments++;
      continue;
    }
    move_segment(r, o, s);
    if (s->path == HUGIFY_TEXT_SKIPPED) { report->skipped_segments++; continue; }
    report->moved_segments++;
    report->moved_bytes += s->window_end - s->window_start;
    o->huge_bytes += s->huge_bytes;
  }
  o->nanoseconds = measure_now_ns() - start;
  report->huge_bytes += o->huge_bytes;
  return 0;
}

/* ---- perf map ------------------------------------------------------------------------------------- */

struct perf_writer {
  FILE *out;
  const struct hugify_text_object *object;
  long written;
};

static void write_symbol(void *context, uint64_t value, uint64_t size, const char *name) {
  struct perf_writer *w = context;
  uint64_t address = w->object->base + value;
  unsigned kept = w->object->segment_count < HUGIFY_TEXT_MAX_SEGMENTS ? w->object->segment_count : HUGIFY_TEXT_MAX_SEGMENTS;
  for (unsigned i = 0; i < kept; i++) {
    const struct hugify_text_segment *s = &w->object->segments[i];
    if (s->path != HUGIFY_TEXT_COPY_SWAP || address < s->window_start || address >= s->window_end) continue;
    fprintf(w->out, "%llx %llx %s\n", (unsigned long long)address, (unsigned long long)size, name);
    w->written++;
    return;
  }
}

/* perf looks up code in anonymous executable memory in /tmp/perf-PID.map. Appended to, so a JIT's own
 * entries (node --perf-basic-prof) stay. */
static void write_perf_map(struct remap *r) {
  struct hugify_text_report *report = r->report;
  if (injected(r, HUGIFY_TEXT_STEP_PERF_MAP)) {
    reason_add(report->reason, sizeof report->reason, "perf-map failed: injected fault (test)");
    return;
  }
  char path[64];
  snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
  FILE *out = NULL;
  for (size_t i = 0; i < report->object_count; i++) {
    const struct hugify_text_object *o = &report->objects[i];
    bool moved = false;
    for (unsigned k = 0; k < o->segment_count && k < HUGIFY_TEXT_MAX_SEGMENTS; k++)
      moved |= o->segments[k].path == HUGIFY_TEXT_COPY_SWAP;
    if (!moved) continue;
    if (!out) {
      /* As root in /tmp: never through a planted link, only a file of our own, not readable by others
       * (it holds this process's code addresses). perf reads it as the same user or root. */
      char why[256] = "";
      int fd = safe_file_open_append(path, why, sizeof why);
      if (fd < 0 || !(out = fdopen(fd, "a"))) {
        if (fd >= 0) close(fd);
        reason_add(report->reason, sizeof report->reason, "perf-map failed: %s", why[0] ? why : strerror(errno));
        return;
      }
    }
    size_t size;
    void *image;
    int rc = elf_map_file(o->main_program ? "/proc/self/exe" : o->path, &image, &size);
    if (rc != 0) {
      reason_add(report->reason, sizeof report->reason, "perf-map: %s: %s", o->path, strerror(-rc));
      continue;
    }
    struct perf_writer w = {out, o, 0};
    if (elf_functions(image, size, write_symbol, &w) < 0)
      reason_add(report->reason, sizeof report->reason, "perf-map: %s: unreadable section headers", o->path);
    else if (w.written == 0)
      reason_add(report->reason, sizeof report->reason, "perf-map: %s: no function symbols (stripped)", o->path);
    elf_unmap(image, size);
  }
  if (out && fclose(out) != 0)
    reason_add(report->reason, sizeof report->reason, "perf-map failed: %s: %s", path, strerror(errno));
  else if (out)
    snprintf(report->perf_map, sizeof report->perf_map, "%s", path);
}

/* ---- hugify_remap_text ---------------------------------------------------------------------------- */

static pthread_mutex_t remap_lock = PTHREAD_MUTEX_INITIALIZER;

int hugify_remap_text(const struct hugify_text_opts *opts, struct hugify_text_report *report) {
  if (!report) return -EINVAL;
  memset(report, 0, sizeof *report);
  struct remap r;
  memset(&r, 0, sizeof r);
  if (opts) r.opts = *opts;
  if (r.opts.kind == HUGIFY_PAGE_4K) r.opts.kind = HUGIFY_PAGE_THP;
  if ((r.opts.flags & ~HUGIFY_TEXT_FLAGS_ALL) || (r.opts.kind != HUGIFY_PAGE_THP && r.opts.kind != HUGIFY_PAGE_2M)) {
    snprintf(report->reason, sizeof report->reason, "invalid options: %s",
             r.opts.flags & ~HUGIFY_TEXT_FLAGS_ALL ? "unknown flags" : "page kind must be THP or 2M");
    return -EINVAL;
  }
  r.fail_step = injected_step;
  r.report = report;
  uint64_t start = measure_now_ns();
  ssize_t n = readlink("/proc/self/exe", r.exe, sizeof r.exe - 1);
  r.exe[n > 0 ? n : 0] = '\0';

  pthread_mutex_lock(&remap_lock);
  dl_iterate_phdr(visit_object, &r);
  if (r.error == 0 && (r.opts.flags & HUGIFY_TEXT_PERF_MAP) && report->moved_segments) write_perf_map(&r);
  pthread_mutex_unlock(&remap_lock);

  report->nanoseconds = measure_now_ns() - start;
  if (r.names_unsupported)
    reason_add(report->reason, sizeof report->reason,
                  "moved code is not named: this kernel cannot name anonymous memory (CONFIG_ANON_VMA_NAME); it shows "
                  "as anonymous r-xp memory in /proc/PID/maps");
  if (r.error) reason_add(report->reason, sizeof report->reason, "out of memory for the report; stopped early");
  return r.error;
}
