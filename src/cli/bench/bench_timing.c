/* SPDX-License-Identifier: MIT */
/* bench_timing.c - the timing engine of `hugify bench`: memory of one page kind (hugify_alloc, one-kind
 * chain, HUGIFY_STRICT; coverage measured before timing), calibration, interleaved repetitions, and the
 * runs of every experiment over the plan. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_run.h"
#include "array.h"
#include "cli.h"
#include "hugify.h"
#include "json_read.h"
#include "measure.h"
#include "options.h"
#include "os.h"
#include "procfs.h"
#include "units.h"

static volatile uint64_t bench_sink; /* every workload's result lands here, so no load is optimised away */

/* ---- memory of one kind ------------------------------------------------------------------------- */

/* The pool command that would give `bytes` of this hugetlb kind on top of what is in use now. */
static void enable_hint(const struct bench *b, enum hugify_page_kind kind, uint64_t bytes, char *out, size_t cap) {
  out[0] = '\0';
  if (kind != HUGIFY_PAGE_2M && kind != HUGIFY_PAGE_1G) return;
  uint64_t page = kind == HUGIFY_PAGE_2M ? hugify_pmd_size() : UINT64_C(1) << 30, in_use = 0;
  for (unsigned i = 0; i < b->system.hugetlb_size_count; i++) {
    const struct hugify_hugetlb_size *h = &b->system.hugetlb[i];
    if (h->page_size != page) continue;
    uint64_t available = h->available;
    in_use = h->total > available ? h->total - available : 0;
  }
  snprintf(out, cap, "hugify pool set %s=%llu", hugify_page_kind_name(kind),
           (unsigned long long)(in_use + (bytes + page - 1) / page));
}

/* A block of `want` bytes (or the largest power-of-two fraction of it that can be had) of exactly this
 * kind. populate: faulted in (and, for THP, collapsed) by the library. NULL when not even 8 KiB could be
 * had. The first failure's reason, and the pool command for the whole run, go to the kind's state. */
static void *kind_alloc(struct bench *b, enum hugify_page_kind kind, uint64_t want, bool populate, uint64_t *got,
                        uint64_t *mapped) {
  struct kind_state *state = &b->kinds[kind];
  state->attempted = true;
  uint64_t run_wants = buffer_wanted(b) > b->max_size ? buffer_wanted(b) : b->max_size;
  if (want > state->wanted) state->wanted = want;
  if (b->unavailable & (1u << kind)) {
    snprintf(state->reason, sizeof state->reason, "HUGIFY_BENCH_UNAVAILABLE lists %s (a test setting)",
             hugify_page_kind_name(kind));
    enable_hint(b, kind, run_wants, state->enable, sizeof state->enable);
    return NULL;
  }
  for (uint64_t size = want; size >= MIN_SIZE; size /= 2) {
    struct hugify_opts opts = {.kinds = {kind}, .kind_count = 1,
                               .flags = HUGIFY_STRICT | (populate ? HUGIFY_POPULATE : 0u)};
    struct hugify_info info;
    void *p = hugify_alloc((size_t)size, &opts, &info);
    if (!p && kind == HUGIFY_PAGE_THP && populate) {
      /* THP not fully huge after populate and collapse: keep the block (a one-kind chain cannot fall back
       * to another kind); the coverage check before each timing flags what is not huge enough. */
      opts.flags = HUGIFY_POPULATE;
      p = hugify_alloc((size_t)size, &opts, &info);
    }
    if (p) {
      *got = size;
      *mapped = info.mapped ? info.mapped : size;
      if (size > state->largest) state->largest = size;
      if (size < want) enable_hint(b, kind, run_wants, state->enable, sizeof state->enable);
      return p;
    }
    if (!state->reason[0]) { /* "2M: pool has ..." -> "pool has ..." */
      const char *name = hugify_page_kind_name(kind), *reason = info.reason;
      if (strncmp(reason, name, strlen(name)) == 0 && strncmp(reason + strlen(name), ": ", 2) == 0)
        reason += strlen(name) + 2;
      snprintf(state->reason, sizeof state->reason, "%s", reason);
    }
  }
  enable_hint(b, kind, run_wants, state->enable, sizeof state->enable);
  return NULL;
}

/* Share of [p, p+size) on this kind's pages (4K: on base pages), measured; -1 when it cannot be. */
static double kind_coverage(struct bench *b, const void *p, uint64_t size, enum hugify_page_kind kind) {
  struct hugify_backing backing;
  if (hugify_measure_backing(p, (size_t)size, &backing) != 0) {
    b->backing_failed = true;
    return -1;
  }
  if (backing.resident == 0) return 0;
  uint64_t on[KINDS] = {backing.resident_4k, backing.resident_thp, backing.resident_2m, backing.resident_1g};
  return (double)on[kind] / (double)backing.resident;
}

/* ---- timing ------------------------------------------------------------------------------------- */

static double thread_system_seconds(void) {
  struct rusage usage;
  if (getrusage(RUSAGE_THREAD, &usage) != 0) return 0;
  return (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec * 1e-6;
}

/* --inject-noise: burn `seconds` more CPU time inside the timed window. */
static void busy_wait(double seconds) {
  double until = measure_thread_cpu_now() + seconds;
  while (measure_thread_cpu_now() < until) {
  }
}

/* Operations for one timed run of about the target time, calibrated on w (its runs warm it up). Time is
 * the CPU time of this thread (user + kernel), so time in which other programs had the CPU is not counted. */
static uint64_t calibrate(const struct bench *b, struct workload *w, uint64_t *ops_done) {
  uint64_t ops = 256;
  double elapsed;
  *ops_done = 0;
  for (;;) {
    double start = measure_thread_cpu_now();
    bench_sink += w->run(w, ops);
    elapsed = measure_thread_cpu_now() - start;
    *ops_done += ops;
    if (elapsed >= b->target_seconds / 8 || ops >= (UINT64_C(1) << 36)) break;
    ops *= elapsed < b->target_seconds / 64 ? 8 : 2;
  }
  uint64_t per_run = (uint64_t)((double)ops * b->target_seconds / (elapsed > 1e-9 ? elapsed : 1e-9));
  return per_run < 16 ? 16 : per_run;
}

/* One repetition of point p: `ops` operations of w, timed. */
static void time_repetition(const struct bench *b, struct point *p, struct workload *w, uint64_t ops) {
  double system = thread_system_seconds(), start = measure_thread_cpu_now();
  bench_sink += w->run(w, ops);
  double elapsed = measure_thread_cpu_now() - start;
  if ((int)p->kind == b->inject_noise && p->repeats == 1) { /* the test hook: one repetition twice as long */
    busy_wait(elapsed);
    elapsed = measure_thread_cpu_now() - start;
  }
  p->ns[p->repeats] = elapsed * 1e9 / (double)ops;
  p->system[p->repeats] = thread_system_seconds() - system;
  p->repeats++;
  p->ops += ops;
}

/* Index of a new zeroed point (indexes, not pointers: the array grows). -1 when out of memory. */
static long add_point(struct bench *b) {
  if (ARRAY_GROW(b->points, b->point_count + 1, b->point_cap) != 0) return -1;
  memset(&b->points[b->point_count], 0, sizeof b->points[0]);
  return (long)b->point_count++;
}


static bool build_workload(enum experiment e, struct item item, void *buffer, struct workload *w) {
  uint64_t seed = UINT64_C(0x4855474946590000) ^ (item.size * 31 + (uint64_t)e);
  switch (e) {
  case EXP_RANDOM: workload_random(w, buffer, (size_t)item.size, seed); return true;
  case EXP_CHASE: workload_chase(w, buffer, (size_t)item.size, seed); return true;
  case EXP_HASH: workload_hash(w, buffer, (size_t)item.size, seed); return true;
  case EXP_STRINGS: workload_strings(w, buffer, item.count, seed); return true;
  default: return false;
  }
}

/* Time one item on the kinds listed (each with its buffer): the workload is built once, on the first
 * kind's buffer, and copied (relocated) to the others before any run, so every kind times the same data.
 * The repetitions go round the kinds in a balanced order, so a disturbance of the machine lands on one
 * repetition of one kind, not on all repetitions of one kind. */
static void run_item(struct bench *b, enum experiment e, struct item item, const int *kinds, int n,
                     void *const *buffers, bool interleaved) {
  char size_text[32];
  format_bytes(item.size, size_text, sizeof size_text);
  progress(false, "bench: %s, %s%s (%d/%d)", experiment_info[e].name, item.count ? "" : size_text,
           item.count ? "strings" : "", b->step_done += n, b->step_total);
  struct workload w[KINDS];
  long index[KINDS];
  if (!build_workload(e, item, buffers[kinds[0]], &w[0])) return;
  for (int i = 1; i < n; i++) workload_copy(&w[i], &w[0], buffers[kinds[i]]);
  for (int i = 0; i < n; i++) {
    if ((index[i] = add_point(b)) < 0) return;
    struct point *p = &b->points[index[i]];
    p->experiment = e;
    p->kind = (enum hugify_page_kind)kinds[i];
    p->item = item;
    p->size = w[i].size;
    p->interleaved = interleaved && n > 1;
    p->coverage = kind_coverage(b, buffers[kinds[i]], w[i].size, p->kind);
  }
  uint64_t warmed, per_run = calibrate(b, &w[0], &warmed);
  for (int i = 1; i < n; i++) bench_sink += w[i].run(&w[i], warmed); /* the same warm-up for every kind */
  for (int r = 0; r < b->repeats; r++)
    for (int position = 0; position < n; position++) {
      int i = measure_round_order((size_t)r, position, n);
      time_repetition(b, &b->points[index[i]], &w[i], per_run);
    }
}

/* First touch of a fresh block, per kind, the repetitions interleaved across the kinds. A hugetlb page is
 * faulted whole: touch all that was mapped, and count it per 4 KiB. */
static void run_touch(struct bench *b) {
  int kinds[KINDS], n = 0;
  long index[KINDS];
  for (int k = 0; k < KINDS; k++)
    if (b->kinds[k].selected) kinds[n++] = k;
  for (int i = 0; i < n; i++) index[i] = -1;
  progress(false, "bench: touch (%d/%d)", b->step_done += n, b->step_total);
  for (int r = 0; r < 3; r++) /* 3, not 5: each repetition faults --max-size of fresh memory per kind */
    for (int position = 0; position < n; position++) {
      int i = measure_round_order((size_t)r, position, n);
      enum hugify_page_kind kind = (enum hugify_page_kind)kinds[i];
      if (r > 0 && index[i] < 0) continue; /* could not be had the first time: not asked again */
      uint64_t got, mapped;
      char *block = kind_alloc(b, kind, b->max_size, false, &got, &mapped);
      if (!block) continue;
      if (index[i] < 0 && (index[i] = add_point(b)) < 0) {
        hugify_free(block, (size_t)got);
        return;
      }
      struct point *p = &b->points[index[i]];
      double system = thread_system_seconds(), start = measure_thread_cpu_now();
      for (uint64_t offset = 0; offset < mapped; offset += 4096) ((volatile char *)block)[offset] = 1;
      if ((int)kind == b->inject_noise && p->repeats == 1) busy_wait(measure_thread_cpu_now() - start);
      double elapsed = measure_thread_cpu_now() - start;
      double measured = kind_coverage(b, block, mapped, kind);
      hugify_free(block, (size_t)got);
      if (p->repeats == 0 || measured < p->coverage) p->coverage = measured;
      p->experiment = EXP_TOUCH;
      p->kind = kind;
      p->item = b->items[EXP_TOUCH][0];
      p->size = mapped;
      p->interleaved = n > 1;
      p->seconds[p->repeats] = elapsed;
      p->ns[p->repeats] = elapsed * 1e9 / (double)(mapped / 4096);
      p->system[p->repeats] = thread_system_seconds() - system;
      p->ops += mapped / 4096;
      p->repeats++;
    }
}

/* Run every planned item in (lo, hi] on the kinds that have a buffer large enough for it. */
static void run_items(struct bench *b, void *const *buffers, const uint64_t *got, uint64_t lo, uint64_t hi,
                      bool interleaved) {
  for (int e = 0; e < EXP_COUNT; e++) {
    if (!b->run[e] || e == EXP_TOUCH || e == EXP_ABSL) continue;
    for (int i = 0; i < b->item_count[e]; i++) {
      const struct item *item = &b->items[e][i];
      if (item->size <= lo || item->size > hi) continue;
      int kinds[KINDS], n = 0;
      for (int k = 0; k < KINDS; k++) {
        if (!b->kinds[k].selected) continue;
        if (buffers[k] && item->size <= got[k]) kinds[n++] = k;
        else b->step_done++;
      }
      if (n) run_item(b, (enum experiment)e, *item, kinds, n, buffers, interleaved);
    }
  }
}

/* Working sets up to a share of the memory budget run with every kind's buffer live at once, the
 * repetitions interleaved across the kinds; the larger ones run one kind at a time (repetitions back to
 * back: said in the JSON as "interleaved": false). */
void run_all(struct bench *b) {
  if (b->run[EXP_TOUCH]) run_touch(b);
  uint64_t want = buffer_wanted(b);
  if (!want) return;
  int selected = 0;
  for (int k = 0; k < KINDS; k++) selected += b->kinds[k].selected;
  uint64_t budget = b->mem_available / 2 < INTERLEAVED_BUDGET ? b->mem_available / 2 : INTERLEAVED_BUDGET, shared = MIN_SIZE;
  while (shared * 2 * (uint64_t)selected <= budget) shared *= 2;
  if (shared > want) shared = want;

  void *buffers[KINDS] = {NULL};
  uint64_t got[KINDS] = {0}, mapped;
  bool complete[KINDS] = {false};
  for (int k = 0; k < KINDS; k++) {
    if (!b->kinds[k].selected) continue;
    buffers[k] = kind_alloc(b, (enum hugify_page_kind)k, shared, true, &got[k], &mapped);
    complete[k] = buffers[k] && got[k] == shared;
  }
  run_items(b, buffers, got, 0, shared, true);
  for (int k = 0; k < KINDS; k++)
    if (buffers[k]) hugify_free(buffers[k], (size_t)got[k]);
  if (want <= shared) return;

  /* One kind at a time, each on a block for the largest working set; a kind that could not even have the
   * shared block is not asked again. */
  for (int k = 0; k < KINDS; k++) {
    if (!b->kinds[k].selected) continue;
    void *one[KINDS] = {NULL};
    uint64_t one_got[KINDS] = {0};
    if (complete[k]) one[k] = kind_alloc(b, (enum hugify_page_kind)k, want, true, &one_got[k], &mapped);
    run_items(b, one, one_got, shared, want, false);
    if (one[k]) hugify_free(one[k], (size_t)one_got[k]);
  }
}
