/* bench.c - hugify bench: the seeds' experiments on this machine, for every page kind it can get, as
 * tables, JSON and an SVG chart of the speedup over 4 KiB pages against the working-set size.
 *
 * Every kind's memory comes from hugify_alloc with a one-kind chain and HUGIFY_STRICT, so a kind that
 * cannot be had is reported skipped with the library's reason, never replaced by another kind; and what
 * backs each working set is measured with hugify_backing right before it is timed. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "hugify.h"
#include "options.h"
#include "os.h"
#include "procfs.h"
#include "units.h"

extern char **environ;

const char usage_bench[] =
    "usage: hugify bench [EXPERIMENT...] [--pages KINDS] [--max-size SIZE] [--quick]\n"
    "                    [--json [FILE]] [--chart FILE.svg]\n"
    "\n"
    "What huge pages buy on this machine: the seed experiments, timed on each page kind, with the\n"
    "speedup over 4 KiB pages against the working-set size. Before every timing, hugify_backing\n"
    "checks what really backs the working set; a point under 95 % on its page kind is flagged.\n"
    "\n"
    "Experiments (default: all):\n"
    "  random   independent random 8-byte reads (throughput), 8 KiB .. --max-size\n"
    "  chase    dependent loads around one random cycle (latency), 8 KiB .. --max-size\n"
    "  touch    first touch of the largest working set: page faults per 4 KiB\n"
    "  hash     lookups in an open-addressing hash table, 8 KiB .. min(--max-size, 1 GiB)\n"
    "  strings  short (<20 B) random strings in a hash set, looked up in shuffled order;\n"
    "           10 M, 30 M, 60 M strings, scaled down to fit --max-size\n"
    "  absl     the seed's 10 M try_emplace into absl::flat_hash_map (scaled down to fit --max-size),\n"
    "           std::allocator vs hugify::allocator (runs absl_hash_map, built with libabsl-dev)\n"
    "\n"
    "Options:\n"
    "  --pages KINDS     page kinds to time, from 4K,THP,2M,1G (default: all). 4K is always timed:\n"
    "                    it is the baseline of every speedup\n"
    "  --max-size SIZE   largest working set (default: 4 GiB or half the available memory, whichever\n"
    "                    is smaller; 256 MiB with --quick)\n"
    "  --quick           a first look in under a minute: fewer sizes, shorter timings\n"
    "  --json [FILE]     write the results as JSON to FILE; no FILE or '-': to stdout, instead of\n"
    "                    the tables (schema: docs/bench.md)\n"
    "  --chart FILE.svg  write the chart: speedup over 4K vs working-set size, one line per kind\n"
    "\n"
    "A kind that cannot be had (no hugetlb pool, no 1 GiB page) is listed as skipped with the reason and\n"
    "the command that enables it, e.g. 'hugify pool set 2M=2048'.\n"
    "\n"
    "Exit status: 0 done; 1 a point was under 95 % coverage, or a kind named in --pages (or an\n"
    "experiment named on the command line) could not be run in full; 2 bad usage; 3 the backing of\n"
    "memory cannot be measured here (/proc/self/smaps unreadable).\n"
    "\n"
    "Examples:\n"
    "  hugify bench --quick --chart bench.svg\n"
    "  hugify bench chase random --pages 4K,THP,2M --max-size 2G --json bench.json\n"
    "  hugify pool set 2M=2048 && hugify bench hash strings --chart hash.svg\n";

#define COMMAND "bench"
#define MIN_SIZE (UINT64_C(8) << 10)
#define HASH_MAX_SIZE (UINT64_C(1) << 30)
#define COVERAGE_MIN 0.95
#define INTERLEAVED_BUDGET (UINT64_C(2) << 30) /* all kinds' buffers at once, at most */
#define KINDS HUGIFY_PAGE_KIND_COUNT

enum experiment { EXP_RANDOM, EXP_CHASE, EXP_TOUCH, EXP_HASH, EXP_STRINGS, EXP_ABSL, EXP_COUNT };

static const struct {
  const char *name, *title, *unit;
} experiment_info[EXP_COUNT] = {
    {"random", "random: independent 8-byte reads", "ns per read"},
    {"chase", "chase: dependent loads around a random cycle", "ns per load"},
    {"touch", "touch: first touch of the working set", "ns per 4 KiB"},
    {"hash", "hash: open-addressing lookups", "ns per lookup"},
    {"strings", "strings: short strings in a hash set, shuffled lookups", "ns per lookup"},
    {"absl", "absl: reserve + try_emplace into absl::flat_hash_map (the seed: 10 M)", "ns per insert"},
};

static const char *const kind_colors[KINDS] = {"#8a8a8a", "#0072B2", "#D55E00", "#009E73"};

/* A planned measurement: a working-set size (and for strings, the number of strings). */
struct item {
  uint64_t size, count;
};

struct point {
  enum experiment experiment;
  enum hugify_page_kind kind;
  struct item item;
  uint64_t size;     /* measured working set (strings: the bytes really used) */
  double ns_per_op;  /* touch: ns per 4 KiB */
  uint64_t ops;
  double seconds;    /* touch: the whole first touch */
  double coverage;   /* share of the working set on this kind's pages, measured before timing */
};

struct kind_state {
  bool selected;
  bool attempted;
  uint64_t wanted, largest;/* bytes asked for and the largest block had */
  char reason[HUGIFY_REASON_MAX];
  char enable[160];
};

struct absl_run {
  char allocator[16];
  double count, seconds, huge_fraction;
};

struct bench {
  /* settings */
  bool quick, run[EXP_COUNT], experiments_named, absl_named, kinds_named;
  uint64_t max_size;
  const char *json_path, *chart_path;
  FILE *json_file, *chart_file; /* opened before the run, so a bad path fails at once */
  unsigned unavailable; /* bit per kind: HUGIFY_BENCH_UNAVAILABLE */
  double target_seconds;
  int repeats, octaves;
  /* plan */
  struct item items[EXP_COUNT][40];
  int item_count[EXP_COUNT];
  /* results */
  struct hugify_system system;
  struct kind_state kinds[KINDS];
  struct point *points;
  size_t point_count, point_cap;
  bool absl_ran;
  char absl_reason[HUGIFY_REASON_MAX], absl_program[PATH_MAX];
  struct absl_run absl[2];
  int absl_count;
  bool backing_failed;
  double started, seconds;
  uint64_t mem_available;
  char cpu[128];
};

static volatile uint64_t sink; /* every workload's result lands here, so no load is optimised away */

/* ---- arguments ---------------------------------------------------------------------------------- */

/* "--name VALUE" or "--name=VALUE": the value, or NULL when argv[*i] is another option. */
static const char *option_value(int argc, char **argv, int *i, const char *name, bool *matched) {
  size_t length = strlen(name);
  *matched = false;
  if (strncmp(argv[*i], name, length) != 0) return NULL;
  if (argv[*i][length] == '=') { *matched = true; return argv[*i] + length + 1; }
  if (argv[*i][length] != '\0') return NULL;
  *matched = true;
  return *i + 1 < argc ? argv[++*i] : NULL;
}

static int parse_kinds(const char *list, bool *selected) {
  char copy[128];
  if (snprintf(copy, sizeof copy, "%s", list) >= (int)sizeof copy || !copy[0])
    return usage_error(COMMAND, "--pages: expected a list such as 4K,THP,2M,1G");
  char *save = NULL;
  for (char *word = strtok_r(copy, ",", &save); word; word = strtok_r(NULL, ",", &save)) {
    enum hugify_page_kind kind;
    if (hugify_page_kind_parse(word, &kind) != 0)
      return usage_error(COMMAND, "--pages: unknown page kind '%s' (expected 4K, THP, 2M or 1G)", word);
    selected[kind] = true;
  }
  return EXIT_DONE;
}

static int parse_arguments(struct bench *b, int argc, char **argv) {
  const char *max_text = NULL;
  for (int i = 1; i < argc; i++) {
    bool matched;
    const char *value;
    if (strcmp(argv[i], "--quick") == 0) { b->quick = true; continue; }
    if ((value = option_value(argc, argv, &i, "--pages", &matched)) || matched) {
      if (!value) return usage_error(COMMAND, "--pages needs a list of page kinds, such as 4K,THP,2M");
      bool selected[KINDS] = {false};
      int rc = parse_kinds(value, selected);
      if (rc != EXIT_DONE) return rc;
      for (int k = 0; k < KINDS; k++) b->kinds[k].selected |= selected[k];
      b->kinds_named = true;
      continue;
    }
    if ((value = option_value(argc, argv, &i, "--max-size", &matched)) || matched) {
      if (!value) return usage_error(COMMAND, "--max-size needs a size, such as 2G");
      max_text = value;
      continue;
    }
    if (strcmp(argv[i], "--json") == 0) { /* the FILE is optional */
      b->json_path = i + 1 < argc && (argv[i + 1][0] != '-' || strcmp(argv[i + 1], "-") == 0) ? argv[++i] : "-";
      continue;
    }
    if (strncmp(argv[i], "--json=", 7) == 0) { b->json_path = argv[i] + 7; continue; }
    if ((value = option_value(argc, argv, &i, "--chart", &matched)) || matched) {
      if (!value || !value[0]) return usage_error(COMMAND, "--chart needs a file name, such as bench.svg");
      b->chart_path = value;
      continue;
    }
    if (argv[i][0] == '-') return usage_error(COMMAND, "unknown option '%s'", argv[i]);
    int e = 0;
    while (e < EXP_COUNT && strcmp(argv[i], experiment_info[e].name) != 0) e++;
    if (e == EXP_COUNT && strcmp(argv[i], "all") != 0)
      return usage_error(COMMAND, "no experiment '%s' (expected random, chase, touch, hash, strings, absl)", argv[i]);
    for (int k = 0; k < EXP_COUNT; k++) b->run[k] |= e == EXP_COUNT || k == e;
    b->experiments_named = true;
    b->absl_named |= e == EXP_ABSL;
  }
  if (!b->experiments_named)
    for (int e = 0; e < EXP_COUNT; e++) b->run[e] = true;
  if (!b->kinds_named)
    for (int k = 0; k < KINDS; k++) b->kinds[k].selected = true;
  b->kinds[HUGIFY_PAGE_4K].selected = true; /* the baseline */

  char *meminfo = os_read_file("/proc/meminfo", NULL);
  if (!meminfo || !parse_keyed_value(meminfo, "MemAvailable", &b->mem_available)) b->mem_available = 0;
  free(meminfo);
  if (max_text) {
    if (!parse_size(max_text, &b->max_size)) return usage_error(COMMAND, "--max-size: '%s' is not a size", max_text);
    if (b->max_size < MIN_SIZE) return usage_error(COMMAND, "--max-size: at least 8K");
    if (b->mem_available && b->max_size > b->mem_available) {
      char have[32];
      format_bytes(b->mem_available, have, sizeof have);
      return usage_error(COMMAND, "--max-size %s is more than the %s of memory available", max_text, have);
    }
  } else {
    uint64_t half = b->mem_available / 2;
    b->max_size = b->quick ? UINT64_C(256) << 20 : UINT64_C(4) << 30;
    if (half && half < b->max_size) b->max_size = half;
  }
  b->target_seconds = b->quick ? 0.01 : 0.04;
  b->repeats = b->quick ? 3 : 5;
  b->octaves = b->quick ? 2 : 1;
  return EXIT_DONE;
}

/* ---- the plan ----------------------------------------------------------------------------------- */

static void plan_sizes(struct bench *b, enum experiment e, uint64_t largest) {
  int n = 0;
  uint64_t top = MIN_SIZE;
  while (top * 2 <= largest) top *= 2;
  for (uint64_t size = MIN_SIZE; size <= top && n < 39; size <<= b->octaves) b->items[e][n++] = (struct item){size, 0};
  if (b->items[e][n - 1].size != top) b->items[e][n++] = (struct item){top, 0};
  b->item_count[e] = n;
}

/* The seed's 10 M, 30 M and 60 M strings, scaled down together until the largest fits. */
static void plan_strings(struct bench *b) {
  static const double seed_counts[] = {10e6, 30e6, 60e6};
  double scale = 1.0;
  while (strings_footprint((uint64_t)(seed_counts[2] * scale)) > b->max_size && scale > 1e-6) scale *= 0.9;
  int n = 0;
  for (int i = 0; i < 3; i++) {
    uint64_t count = (uint64_t)(seed_counts[i] * scale);
    if (count < 1000) continue;
    b->items[EXP_STRINGS][n++] = (struct item){strings_footprint(count), count};
  }
  b->item_count[EXP_STRINGS] = n;
}

static void plan(struct bench *b) {
  plan_sizes(b, EXP_RANDOM, b->max_size);
  plan_sizes(b, EXP_CHASE, b->max_size);
  plan_sizes(b, EXP_HASH, b->max_size < HASH_MAX_SIZE ? b->max_size : HASH_MAX_SIZE);
  plan_strings(b);
  b->items[EXP_TOUCH][0] = (struct item){b->max_size, 0};
  b->item_count[EXP_TOUCH] = 1;
}

/* Bytes the kind's buffer must hold for every planned measurement but the first touch. */
static uint64_t buffer_wanted(const struct bench *b) {
  uint64_t want = 0;
  for (int e = 0; e < EXP_COUNT; e++) {
    if (!b->run[e] || e == EXP_TOUCH || e == EXP_ABSL) continue;
    for (int i = 0; i < b->item_count[e]; i++)
      if (b->items[e][i].size > want) want = b->items[e][i].size;
  }
  return want;
}

/* ---- memory of one kind ------------------------------------------------------------------------- */

/* The pool command that would give `bytes` of this hugetlb kind on top of what is in use now. */
static void enable_hint(const struct bench *b, enum hugify_page_kind kind, uint64_t bytes, char *out, size_t cap) {
  out[0] = '\0';
  if (kind != HUGIFY_PAGE_2M && kind != HUGIFY_PAGE_1G) return;
  uint64_t page = kind == HUGIFY_PAGE_2M ? UINT64_C(2) << 20 : UINT64_C(1) << 30, in_use = 0;
  for (unsigned i = 0; i < b->system.hugetlb_size_count; i++) {
    const struct hugify_hugetlb_size *h = &b->system.hugetlb[i];
    if (h->page_size != page) continue;
    uint64_t available = h->free > h->reserved ? h->free - h->reserved : 0;
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
  if (hugify_backing(p, (size_t)size, &backing) != 0) {
    b->backing_failed = true;
    return -1;
  }
  if (backing.resident == 0) return 0;
  uint64_t on[KINDS] = {backing.resident_4k, backing.resident_thp, backing.resident_2m, backing.resident_1g};
  return (double)on[kind] / (double)backing.resident;
}

/* ---- timing ------------------------------------------------------------------------------------- */

/* ns per operation: calibrate the operation count to the target time, then the best of `repeats` runs.
 * Time is the CPU time of this thread (user + kernel), so time in which other programs had the CPU is not
 * counted; the best run is the one least disturbed by what they left in the caches and TLB. */
static double time_workload(const struct bench *b, struct workload *w, uint64_t *total_ops) {
  uint64_t ops = 256;
  double elapsed;
  for (;;) {
    double start = bench_cpu_now();
    sink += w->run(w, ops);
    elapsed = bench_cpu_now() - start;
    if (elapsed >= b->target_seconds / 8 || ops >= (UINT64_C(1) << 36)) break;
    ops *= elapsed < b->target_seconds / 64 ? 8 : 2;
  }
  uint64_t per_run = (uint64_t)((double)ops * b->target_seconds / (elapsed > 1e-9 ? elapsed : 1e-9));
  if (per_run < 16) per_run = 16;
  double best = INFINITY;
  for (int r = 0; r < b->repeats; r++) {
    double start = bench_cpu_now();
    sink += w->run(w, per_run);
    double ns = (bench_cpu_now() - start) * 1e9 / (double)per_run;
    if (ns < best) best = ns;
  }
  *total_ops = ops + per_run * (uint64_t)b->repeats;
  return best;
}

static struct point *add_point(struct bench *b) {
  if (b->point_count == b->point_cap) {
    size_t cap = b->point_cap ? b->point_cap * 2 : 128;
    struct point *points = realloc(b->points, cap * sizeof *points);
    if (!points) return NULL;
    b->points = points;
    b->point_cap = cap;
  }
  struct point *p = &b->points[b->point_count++];
  memset(p, 0, sizeof *p);
  return p;
}

static int step_done, step_total;

/* Time one item on one kind. The workload is built on the first kind's buffer and copied (relocated) to
 * the others: the same data everywhere, built once. `built` holds that first workload as prepared. */
static void run_item(struct bench *b, enum experiment e, enum hugify_page_kind kind, void *buffer, struct item item,
                     struct workload *built, bool *have_built) {
  char size_text[32];
  format_bytes(item.size, size_text, sizeof size_text);
  progress(false, "bench: %s on %s, %s%s (%d/%d)", experiment_info[e].name, hugify_page_kind_name(kind),
           item.count ? "" : size_text, item.count ? "strings" : "", ++step_done, step_total);
  struct workload w;
  if (*have_built) {
    workload_copy(&w, built, buffer);
  } else {
    uint64_t seed = UINT64_C(0x4855474946590000) ^ (item.size * 31 + (uint64_t)e);
    switch (e) {
    case EXP_RANDOM: workload_random(&w, buffer, (size_t)item.size, seed); break;
    case EXP_CHASE: workload_chase(&w, buffer, (size_t)item.size, seed); break;
    case EXP_HASH: workload_hash(&w, buffer, (size_t)item.size, seed); break;
    case EXP_STRINGS: workload_strings(&w, buffer, item.count, seed); break;
    default: return;
    }
    *built = w; /* before any run: the runs only read the buffer, but move the cursor and the generator */
    *have_built = true;
  }
  double coverage = kind_coverage(b, buffer, w.size, kind);
  struct point *p = add_point(b);
  if (!p) return;
  p->experiment = e;
  p->kind = kind;
  p->item = item;
  p->size = w.size;
  p->coverage = coverage;
  p->ns_per_op = time_workload(b, &w, &p->ops);
}

static void run_touch(struct bench *b, enum hugify_page_kind kind) {
  uint64_t got, mapped;
  progress(false, "bench: touch on %s (%d/%d)", hugify_page_kind_name(kind), ++step_done, step_total);
  /* A hugetlb page is faulted whole: touch all that was mapped, and count it per 4 KiB. The best of a few
   * fresh blocks while they are quick to touch. */
  double seconds = INFINITY, coverage = -1;
  for (int r = 0; r < b->repeats; r++) {
    char *block = kind_alloc(b, kind, b->max_size, false, &got, &mapped);
    if (!block) {
      if (r == 0) return;
      break;
    }
    double start = bench_cpu_now();
    for (uint64_t offset = 0; offset < mapped; offset += 4096) ((volatile char *)block)[offset] = 1;
    double elapsed = bench_cpu_now() - start;
    if (elapsed < seconds) seconds = elapsed;
    double measured = kind_coverage(b, block, mapped, kind);
    if (coverage < 0 || measured < coverage) coverage = measured;
    hugify_free(block, (size_t)got);
    if (elapsed > 0.1) break; /* long enough to be a stable figure */
  }
  struct point *p = add_point(b);
  if (p) {
    p->experiment = EXP_TOUCH;
    p->kind = kind;
    p->item = b->items[EXP_TOUCH][0];
    p->size = mapped;
    p->seconds = seconds;
    p->ns_per_op = seconds * 1e9 / (double)(mapped / 4096);
    p->ops = mapped / 4096;
    p->coverage = coverage;
  }
}

/* Run every planned item in (lo, hi] on every kind, one item at a time across the kinds, so the kinds
 * of one working set are timed within moments of each other (fair on a machine with other work). */
static void run_items(struct bench *b, void *const *buffers, const uint64_t *got, uint64_t lo, uint64_t hi,
                      int only_kind) {
  for (int e = 0; e < EXP_COUNT; e++) {
    if (!b->run[e] || e == EXP_TOUCH || e == EXP_ABSL) continue;
    for (int i = 0; i < b->item_count[e]; i++) {
      const struct item *item = &b->items[e][i];
      if (item->size <= lo || item->size > hi) continue;
      struct workload built;
      bool have_built = false;
      for (int k = 0; k < KINDS; k++) {
        if (!b->kinds[k].selected || (only_kind >= 0 && k != only_kind)) continue;
        if (buffers[k] && item->size <= got[k])
          run_item(b, (enum experiment)e, (enum hugify_page_kind)k, buffers[k], *item, &built, &have_built);
        else step_done++;
      }
    }
  }
}

/* Working sets up to a share of the memory budget run with every kind's buffer live at once, item by
 * item across the kinds; the larger ones run one kind at a time. */
static void run_all(struct bench *b) {
  for (int k = 0; k < KINDS; k++)
    if (b->kinds[k].selected && b->run[EXP_TOUCH]) run_touch(b, (enum hugify_page_kind)k);
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
  run_items(b, buffers, got, 0, shared, -1);
  for (int k = 0; k < KINDS; k++)
    if (buffers[k]) hugify_free(buffers[k], (size_t)got[k]);
  if (want <= shared) return;

  /* One kind at a time, each on a block for the largest working set; a kind that could not even have the
   * shared block is not asked again. */
  void *one[KINDS] = {NULL};
  uint64_t one_got[KINDS] = {0};
  for (int k = 0; k < KINDS; k++) {
    if (!b->kinds[k].selected) continue;
    if (complete[k]) one[k] = kind_alloc(b, (enum hugify_page_kind)k, want, true, &one_got[k], &mapped);
    run_items(b, one, one_got, shared, want, k);
    if (one[k]) hugify_free(one[k], (size_t)one_got[k]);
    one[k] = NULL;
  }
}

/* ---- absl: the external program ------------------------------------------------------------------- */

static bool find_absl_program(char *out, size_t cap) {
  char self[PATH_MAX];
  ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) return false;
  self[length] = '\0';
  const char *dir = dirname(self);
  static const char *const candidates[] = {"../bench/absl_hash_map", "../libexec/hugify/absl_hash_map"};
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
    snprintf(out, cap, "%s/%s", dir, candidates[i]);
    if (access(out, X_OK) == 0) return true;
  }
  return false;
}

/* Run argv, capture its stdout (up to cap - 1 bytes). Returns the exit status, or -errno. */
static int run_capture(char *const argv[], char *out, size_t cap) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return -errno;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (rc != 0) { close(pipe_fds[0]); return -rc; }
  size_t used = 0;
  ssize_t n;
  char scratch[4096];
  while ((n = read(pipe_fds[0], used + 1 < cap ? out + used : scratch,
                   used + 1 < cap ? cap - 1 - used : sizeof scratch)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0 && used + 1 < cap) used += (size_t)n;
  out[used] = '\0';
  close(pipe_fds[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The value after "key": in one line of flat JSON. */
static const char *json_field(const char *line, const char *key) {
  char quoted[64];
  snprintf(quoted, sizeof quoted, "\"%s\"", key);
  const char *at = strstr(line, quoted);
  if (!at) return NULL;
  at += strlen(quoted);
  while (*at == ' ' || *at == ':') at++;
  return at;
}

static bool parse_absl_line(const char *line, struct absl_run *run) {
  const char *allocator = json_field(line, "allocator"), *count = json_field(line, "count"),
             *seconds = json_field(line, "seconds"), *huge = json_field(line, "huge_fraction");
  if (!allocator || *allocator != '"' || !count || !seconds) return false;
  size_t length = strcspn(allocator + 1, "\"");
  snprintf(run->allocator, sizeof run->allocator, "%.*s", (int)length, allocator + 1);
  run->count = strtod(count, NULL);
  run->seconds = strtod(seconds, NULL);
  run->huge_fraction = huge ? strtod(huge, NULL) : NAN;
  return run->count > 0 && run->seconds > 0;
}

static void run_absl(struct bench *b) {
  progress(false, "bench: absl (%d/%d)", ++step_done, step_total);
  if (!find_absl_program(b->absl_program, sizeof b->absl_program)) {
    b->absl_program[0] = '\0';
    snprintf(b->absl_reason, sizeof b->absl_reason,
             "libabsl-dev not installed / absl_hash_map not found (build hugify with libabsl-dev installed)");
    return;
  }
  /* The seed's 10 M elements make a table of about 288 MiB: scaled down with --max-size like the rest. */
  double count = 10e6 * fmin(1.0, (double)b->max_size / (double)(UINT64_C(288) << 20));
  char count_text[32], repeat_text[8], output[8192];
  snprintf(count_text, sizeof count_text, "%.0f", count < 10000 ? 10000 : count);
  snprintf(repeat_text, sizeof repeat_text, "%d", b->quick ? 1 : 3);
  char *argv[] = {b->absl_program, "--allocator", "both", "--count", count_text, "--repeat", repeat_text, "--json", NULL};
  int status = run_capture(argv, output, sizeof output);
  if (status != 0) {
    snprintf(b->absl_reason, sizeof b->absl_reason, "%.300s failed (%s %d)", b->absl_program,
             status < 0 ? "could not start: errno" : "exit status", status < 0 ? -status : status);
    return;
  }
  static const char *const allocators[] = {"std", "hugify"};
  for (int a = 0; a < 2; a++) {
    bool found = false;
    char copy[sizeof output], *save = NULL;
    memcpy(copy, output, sizeof copy);
    for (char *line = strtok_r(copy, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save)) {
      struct absl_run run;
      if (!parse_absl_line(line, &run) || strcmp(run.allocator, allocators[a]) != 0) continue;
      b->absl[b->absl_count++] = run;
      found = true;
    }
    if (!found) {
      snprintf(b->absl_reason, sizeof b->absl_reason, "%.300s printed no result line for the %s allocator",
               b->absl_program, allocators[a]);
      b->absl_count = 0;
      return;
    }
  }
  b->absl_ran = true;
}

/* ---- results ------------------------------------------------------------------------------------ */

static const struct point *find_point(const struct bench *b, enum experiment e, enum hugify_page_kind kind,
                                      const struct item *item) {
  for (size_t i = 0; i < b->point_count; i++) {
    const struct point *p = &b->points[i];
    if (p->experiment == e && p->kind == kind && p->item.size == item->size && p->item.count == item->count) return p;
  }
  return NULL;
}

static double speedup(const struct bench *b, const struct point *p) {
  const struct point *base = find_point(b, p->experiment, HUGIFY_PAGE_4K, &p->item);
  return base && p->ns_per_op > 0 ? base->ns_per_op / p->ns_per_op : NAN;
}

static bool flagged(const struct point *p) { return p->coverage < COVERAGE_MIN; }

static bool experiment_has_points(const struct bench *b, enum experiment e) {
  for (size_t i = 0; i < b->point_count; i++)
    if (b->points[i].experiment == e) return true;
  return false;
}

/* True when a selected kind has no point for this planned item. */
static bool kind_missing(const struct bench *b, enum experiment e, enum hugify_page_kind kind, const struct item *item) {
  return b->kinds[kind].selected && !find_point(b, e, kind, item);
}

/* Planned measurements of this kind that have a point, and that have none. */
static void kind_tally(const struct bench *b, enum hugify_page_kind kind, int *have, int *missing) {
  *have = *missing = 0;
  for (int e = 0; e < EXP_COUNT; e++) {
    if (!b->run[e] || e == EXP_ABSL) continue;
    for (int i = 0; i < b->item_count[e]; i++) {
      if (find_point(b, (enum experiment)e, kind, &b->items[e][i])) ++*have;
      else ++*missing;
    }
  }
}

static bool kind_skipped(const struct bench *b, enum hugify_page_kind kind) {
  int have, missing;
  kind_tally(b, kind, &have, &missing);
  return b->kinds[kind].selected && b->kinds[kind].attempted && have == 0;
}

/* The kind was asked for but some planned measurement could not be made. */
static bool kind_short(const struct bench *b, enum hugify_page_kind kind) {
  int have, missing;
  kind_tally(b, kind, &have, &missing);
  return b->kinds[kind].selected && b->kinds[kind].attempted && missing > 0;
}

static void kind_skip_text(const struct bench *b, enum hugify_page_kind kind, char *out, size_t cap) {
  const struct kind_state *k = &b->kinds[kind];
  const char *name = hugify_page_kind_name(kind);
  char largest[32];
  format_bytes(k->largest, largest, sizeof largest);
  int n = kind_skipped(b, kind)       ? snprintf(out, cap, "%s: skipped: %s", name, k->reason)
          : k->largest < k->wanted ? snprintf(out, cap, "%s: sizes above %s skipped: %s", name, largest, k->reason)
                                   : snprintf(out, cap, "%s: some measurements skipped: %s", name, k->reason);
  if (k->enable[0] && n > 0 && (size_t)n < cap) snprintf(out + n, cap - (size_t)n, "; enable with: %s", k->enable);
}

static void format_ns(double ns, char *out, size_t cap) { snprintf(out, cap, ns < 100 ? "%.1f" : "%.0f", ns); }

static void format_count(uint64_t count, char *out, size_t cap) {
  if (count >= 1000000) snprintf(out, cap, "%.3g M", (double)count / 1e6);
  else snprintf(out, cap, "%.3g k", (double)count / 1e3);
}

static void print_experiment_table(const struct bench *b, enum experiment e, FILE *out) {
  const char *headers[1 + 2 * KINDS];
  bool right[1 + 2 * KINDS];
  char names[2 * KINDS][24];
  bool shown[KINDS];
  for (int k = 0; k < KINDS; k++) { /* a kind without a single point here has a skip line, not a column */
    shown[k] = false;
    for (int i = 0; i < b->item_count[e] && !shown[k]; i++)
      shown[k] = find_point(b, e, (enum hugify_page_kind)k, &b->items[e][i]) != NULL;
  }
  int columns = 0;
  headers[columns] = e == EXP_STRINGS ? "strings" : "size";
  right[columns++] = false;
  for (int k = 0; k < KINDS; k++) {
    if (!shown[k]) continue;
    snprintf(names[2 * k], sizeof names[0], "%s ns", hugify_page_kind_name((enum hugify_page_kind)k));
    headers[columns] = names[2 * k];
    right[columns++] = true;
    if (k == HUGIFY_PAGE_4K) continue;
    snprintf(names[2 * k + 1], sizeof names[0], "%s", hugify_page_kind_name((enum hugify_page_kind)k));
    headers[columns] = names[2 * k + 1];
    right[columns++] = true;
  }
  struct table t;
  table_init(&t, columns, headers, right);
  bool any_flag = false;
  for (int i = 0; i < b->item_count[e]; i++) {
    const struct item *item = &b->items[e][i];
    char cells[1 + 2 * KINDS][64];
    const char *row[1 + 2 * KINDS];
    int c = 0;
    const struct point *base = find_point(b, e, HUGIFY_PAGE_4K, item);
    if (e == EXP_STRINGS) {
      char count[20], bytes[20];
      format_count(item->count, count, sizeof count);
      format_bytes(base ? base->size : item->size, bytes, sizeof bytes);
      snprintf(cells[c], sizeof cells[c], "%s (%s)", count, bytes);
    } else {
      format_bytes(item->size, cells[c], sizeof cells[c]);
    }
    row[c] = cells[c];
    c++;
    bool any = false;
    for (int k = 0; k < KINDS; k++) {
      if (!shown[k]) continue;
      const struct point *p = find_point(b, e, (enum hugify_page_kind)k, item);
      any |= p != NULL;
      if (p) {
        format_ns(p->ns_per_op, cells[c], sizeof cells[c]);
        if (flagged(p)) { strcat(cells[c], "!"); any_flag = true; }
      } else {
        snprintf(cells[c], sizeof cells[c], "-");
      }
      row[c] = cells[c];
      c++;
      if (k == HUGIFY_PAGE_4K) continue;
      if (p && isfinite(speedup(b, p))) snprintf(cells[c], sizeof cells[c], "%.2fx", speedup(b, p));
      else snprintf(cells[c], sizeof cells[c], "-");
      row[c] = cells[c];
      c++;
    }
    if (!any) continue;
    switch (columns) { /* table_row takes exactly `columns` values */
    case 1: table_row(&t, row[0]); break;
    case 3: table_row(&t, row[0], row[1], row[2]); break;
    case 5: table_row(&t, row[0], row[1], row[2], row[3], row[4]); break;
    case 7: table_row(&t, row[0], row[1], row[2], row[3], row[4], row[5], row[6]); break;
    default: table_row(&t, row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7]); break;
    }
    (void)base;
  }
  fprintf(out, "\n%s (%s; speedup over 4K)\n", experiment_info[e].title, experiment_info[e].unit);
  table_print(&t, out, "  ");
  table_free(&t);
  if (any_flag) fprintf(out, "  ! under 95 %% of the working set on that page kind: not a clean measurement\n");
}

static void print_touch_table(const struct bench *b, FILE *out) {
  static const char *const headers[] = {"kind", "size", "seconds", "ns per 4 KiB", "speedup", "on kind"};
  static const bool right[] = {false, true, true, true, true, true};
  struct table t;
  table_init(&t, 6, headers, right);
  for (int k = 0; k < KINDS; k++) {
    const struct point *p = find_point(b, EXP_TOUCH, (enum hugify_page_kind)k, &b->items[EXP_TOUCH][0]);
    if (!p) continue;
    char size[32], seconds[32], ns[32], gain[32], coverage[32];
    format_bytes(p->size, size, sizeof size);
    snprintf(seconds, sizeof seconds, "%.3f", p->seconds);
    format_ns(p->ns_per_op, ns, sizeof ns);
    double s = speedup(b, p);
    snprintf(gain, sizeof gain, isfinite(s) ? "%.2fx" : "-", s);
    snprintf(coverage, sizeof coverage, "%.1f %%%s", 100 * p->coverage, flagged(p) ? "!" : "");
    table_row(&t, hugify_page_kind_name((enum hugify_page_kind)k), size, seconds, ns, gain, coverage);
  }
  fprintf(out, "\n%s (%s; speedup over 4K)\n", experiment_info[EXP_TOUCH].title, experiment_info[EXP_TOUCH].unit);
  table_print(&t, out, "  ");
  table_free(&t);
}

static void print_absl(const struct bench *b, FILE *out) {
  fprintf(out, "\n%s\n", experiment_info[EXP_ABSL].title);
  if (!b->absl_ran) {
    fprintf(out, "  skipped: %s\n", b->absl_reason);
    return;
  }
  static const char *const headers[] = {"allocator", "inserts", "seconds", "ns per insert", "on huge pages", "speedup"};
  static const bool right[] = {false, true, true, true, true, true};
  struct table t;
  table_init(&t, 6, headers, right);
  for (int i = 0; i < b->absl_count; i++) {
    const struct absl_run *r = &b->absl[i];
    char count[32], seconds[32], ns[32], huge[32], gain[32];
    format_count((uint64_t)r->count, count, sizeof count);
    snprintf(seconds, sizeof seconds, "%.3f", r->seconds);
    format_ns(r->seconds * 1e9 / r->count, ns, sizeof ns);
    snprintf(huge, sizeof huge, isfinite(r->huge_fraction) ? "%.1f %%" : "-", 100 * r->huge_fraction);
    snprintf(gain, sizeof gain, "%.2fx", b->absl[0].seconds / r->seconds);
    table_row(&t, r->allocator, count, seconds, ns, huge, gain);
  }
  table_print(&t, out, "  ");
  table_free(&t);
}

static void print_tables(const struct bench *b, FILE *out) {
  char max[32];
  format_bytes(b->max_size, max, sizeof max);
  fprintf(out, "hugify bench%s: page kinds", b->quick ? " --quick" : "");
  for (int k = 0; k < KINDS; k++)
    if (b->kinds[k].selected) fprintf(out, " %s", hugify_page_kind_name((enum hugify_page_kind)k));
  fprintf(out, "; working sets 8 KiB .. %s; %.*f s\n", max, b->seconds < 10 ? 1 : 0, b->seconds);
  for (int k = 0; k < KINDS; k++) {
    if (!kind_short(b, (enum hugify_page_kind)k)) continue;
    char text[HUGIFY_REASON_MAX + 256];
    kind_skip_text(b, (enum hugify_page_kind)k, text, sizeof text);
    fprintf(out, "  %s\n", text);
  }
  for (int e = 0; e < EXP_COUNT; e++) {
    if (!b->run[e]) continue;
    if (e == EXP_ABSL) print_absl(b, out);
    else if (e == EXP_TOUCH) { if (experiment_has_points(b, EXP_TOUCH)) print_touch_table(b, out); }
    else if (experiment_has_points(b, (enum experiment)e)) print_experiment_table(b, (enum experiment)e, out);
  }
}

static void write_json(const struct bench *b, FILE *out, int exit_status) {
  struct json_writer j;
  json_begin(&j, out);
  json_put_u64(&j, "schema", 1);
  json_put_bool(&j, "quick", b->quick);
  json_put_u64(&j, "max_size", b->max_size);
  json_put_double(&j, "seconds", b->seconds);
  json_put_double(&j, "coverage_min", COVERAGE_MIN);
  json_open_object(&j, "machine");
  json_put_string(&j, "kernel", b->system.kernel_release);
  json_put_string(&j, "cpu", b->cpu);
  json_put_i64(&j, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
  json_put_u64(&j, "mem_available", b->mem_available);
  json_put_u64(&j, "base_page_size", b->system.base_page_size);
  json_put_string(&j, "thp_enabled", b->system.thp_enabled);
  json_put_string(&j, "thp_defrag", b->system.thp_defrag);
  json_close(&j);
  json_open_array(&j, "kinds");
  for (int k = 0; k < KINDS; k++) {
    const struct kind_state *s = &b->kinds[k];
    json_open_object(&j, NULL);
    json_put_string(&j, "kind", hugify_page_kind_name((enum hugify_page_kind)k));
    json_put_bool(&j, "selected", s->selected);
    json_put_string(&j, "status", !s->selected ? "not selected" : !s->attempted ? "not run"
                              : kind_skipped(b, (enum hugify_page_kind)k) ? "skipped"
                              : kind_short(b, (enum hugify_page_kind)k)   ? "partial" : "ok");
    json_put_u64(&j, "wanted", s->wanted);
    json_put_u64(&j, "largest", s->largest);
    json_put_string(&j, "reason", kind_short(b, (enum hugify_page_kind)k) ? s->reason : NULL);
    json_put_string(&j, "enable", kind_short(b, (enum hugify_page_kind)k) && s->enable[0] ? s->enable : NULL);
    json_close(&j);
  }
  json_close(&j);
  json_open_array(&j, "experiments");
  for (int e = 0; e < EXP_COUNT; e++) {
    if (!b->run[e]) continue;
    json_open_object(&j, NULL);
    json_put_string(&j, "name", experiment_info[e].name);
    json_put_string(&j, "title", experiment_info[e].title);
    json_put_string(&j, "unit", experiment_info[e].unit);
    if (e == EXP_ABSL) {
      json_put_string(&j, "status", b->absl_ran ? "ran" : "skipped");
      json_put_string(&j, "reason", b->absl_ran ? NULL : b->absl_reason);
      json_put_string(&j, "program", b->absl_program[0] ? b->absl_program : NULL);
      json_open_array(&j, "runs");
      for (int i = 0; i < b->absl_count; i++) {
        json_open_object(&j, NULL);
        json_put_string(&j, "allocator", b->absl[i].allocator);
        json_put_u64(&j, "count", (uint64_t)b->absl[i].count);
        json_put_double(&j, "seconds", b->absl[i].seconds);
        json_put_double(&j, "ns_per_op", b->absl[i].seconds * 1e9 / b->absl[i].count);
        json_put_double(&j, "huge_fraction", b->absl[i].huge_fraction);
        json_put_double(&j, "speedup", b->absl[0].seconds / b->absl[i].seconds);
        json_close(&j);
      }
      json_close(&j);
      json_close(&j);
      continue;
    }
    json_put_string(&j, "status", experiment_has_points(b, (enum experiment)e) ? "ran" : "skipped");
    json_open_array(&j, "points");
    for (size_t i = 0; i < b->point_count; i++) {
      const struct point *p = &b->points[i];
      if (p->experiment != (enum experiment)e) continue;
      json_open_object(&j, NULL);
      json_put_string(&j, "kind", hugify_page_kind_name(p->kind));
      json_put_u64(&j, "size", p->size);
      if (e == EXP_STRINGS) json_put_u64(&j, "count", p->item.count);
      if (e == EXP_TOUCH) json_put_double(&j, "seconds", p->seconds);
      json_put_double(&j, "ns_per_op", p->ns_per_op);
      json_put_u64(&j, "ops", p->ops);
      json_put_double(&j, "speedup", speedup(b, p));
      json_put_double(&j, "coverage", p->coverage);
      json_put_bool(&j, "flagged", flagged(p));
      json_close(&j);
    }
    json_close(&j);
    json_open_array(&j, "skipped");
    for (int k = 0; k < KINDS; k++) {
      bool any = false;
      for (int i = 0; i < b->item_count[e]; i++) {
        const struct item *item = &b->items[e][i];
        if (!kind_missing(b, (enum experiment)e, (enum hugify_page_kind)k, item)) continue;
        if (!any) {
          json_open_object(&j, NULL);
          json_put_string(&j, "kind", hugify_page_kind_name((enum hugify_page_kind)k));
          json_put_string(&j, "reason", b->kinds[k].reason);
          json_put_string(&j, "enable", b->kinds[k].enable[0] ? b->kinds[k].enable : NULL);
          json_open_array(&j, e == EXP_STRINGS ? "counts" : "sizes");
          any = true;
        }
        json_put_u64(&j, NULL, e == EXP_STRINGS ? item->count : item->size);
      }
      if (any) { json_close(&j); json_close(&j); }
    }
    json_close(&j);
    json_close(&j);
  }
  json_close(&j);
  json_put_i64(&j, "exit_status", exit_status);
  json_end(&j);
}

/* ---- the chart ---------------------------------------------------------------------------------- */

static int write_chart(const struct bench *b, FILE *out) {
  static const enum experiment charted[] = {EXP_CHASE, EXP_RANDOM, EXP_HASH, EXP_STRINGS};
  struct chart_panel panels[4];
  struct chart_series series[4][KINDS];
  char subtitles[4][160];
  double *values = calloc(4 * KINDS * 3 * 40, sizeof *values);
  bool *hollow = calloc(4 * KINDS * 40, sizeof *hollow);
  if (!values || !hollow) { free(values); free(hollow); return -ENOMEM; }
  int panel_count = 0;
  for (size_t c = 0; c < sizeof charted / sizeof charted[0]; c++) {
    enum experiment e = charted[c];
    if (!b->run[e] || !experiment_has_points(b, e)) continue;
    struct chart_panel *panel = &panels[panel_count];
    panel->id = experiment_info[e].name;
    panel->title = experiment_info[e].title;
    panel->series = series[panel_count];
    panel->series_count = 0;
    const struct point *first = NULL, *last = NULL;
    for (int i = 0; i < b->item_count[e]; i++) {
      const struct point *p = find_point(b, e, HUGIFY_PAGE_4K, &b->items[e][i]);
      if (p && !first) first = p;
      if (p) last = p;
    }
    if (first && last) {
      char a[32], z[32];
      format_bytes(first->size, a, sizeof a);
      format_bytes(last->size, z, sizeof z);
      snprintf(subtitles[panel_count], sizeof subtitles[0], "on 4 KiB pages: %.3g %s at %s, %.3g at %s",
               first->ns_per_op, experiment_info[e].unit, a, last->ns_per_op, z);
      panel->subtitle = subtitles[panel_count];
    } else {
      panel->subtitle = "no 4 KiB baseline: speedups unknown";
    }
    for (int k = 0; k < KINDS; k++) {
      double *x = values + ((size_t)(panel_count * KINDS + k) * 3) * 40, *y = x + 40;
      bool *h = hollow + (size_t)(panel_count * KINDS + k) * 40;
      int n = 0;
      for (int i = 0; i < b->item_count[e] && n < 40; i++) {
        const struct point *p = find_point(b, e, (enum hugify_page_kind)k, &b->items[e][i]);
        if (!p) continue;
        x[n] = (double)p->size;
        y[n] = speedup(b, p);
        h[n] = flagged(p);
        n++;
      }
      if (!n) continue;
      series[panel_count][panel->series_count++] = (struct chart_series){
          hugify_page_kind_name((enum hugify_page_kind)k), kind_colors[k], k == HUGIFY_PAGE_4K, n, x, y, h};
    }
    panel_count++;
  }

  char subtitle[512], footnote[2048] = "";
  snprintf(subtitle, sizeof subtitle, "%s%sLinux %s \xc2\xb7 THP %s \xc2\xb7 hugify bench, best of %d timings per point%s",
           b->cpu[0] ? b->cpu : "", b->cpu[0] ? " \xc2\xb7 " : "", b->system.kernel_release,
           b->system.thp_enabled[0] ? b->system.thp_enabled : "absent", b->repeats, b->quick ? " (--quick)" : "");
  size_t used = 0;
  const struct point *touch_base = find_point(b, EXP_TOUCH, HUGIFY_PAGE_4K, &b->items[EXP_TOUCH][0]);
  if (touch_base) {
    used += (size_t)snprintf(footnote + used, sizeof footnote - used, "first touch, per 4 KiB: 4K %.0f ns", touch_base->ns_per_op);
    for (int k = 1; k < KINDS && used < sizeof footnote; k++) {
      const struct point *p = find_point(b, EXP_TOUCH, (enum hugify_page_kind)k, &b->items[EXP_TOUCH][0]);
      if (p)
        used += (size_t)snprintf(footnote + used, sizeof footnote - used, ", %s %.0f ns (%.1f\xc3\x97)",
                                 hugify_page_kind_name((enum hugify_page_kind)k), p->ns_per_op, speedup(b, p));
    }
  }
  if (b->absl_ran && b->absl_count == 2 && used < sizeof footnote)
    used += (size_t)snprintf(footnote + used, sizeof footnote - used,
                             "%sabsl::flat_hash_map, %.3g M try_emplace: std %.2f s, hugify %.2f s (%.2f\xc3\x97)",
                             used ? "\n" : "", b->absl[0].count / 1e6, b->absl[0].seconds, b->absl[1].seconds, b->absl[0].seconds / b->absl[1].seconds);
  for (int k = 0; k < KINDS && used < sizeof footnote; k++) {
    if (!kind_short(b, (enum hugify_page_kind)k)) continue;
    char text[HUGIFY_REASON_MAX + 256];
    kind_skip_text(b, (enum hugify_page_kind)k, text, sizeof text);
    used += (size_t)snprintf(footnote + used, sizeof footnote - used, "%s%s", used ? "\n" : "", text);
  }
  struct chart chart = {"What huge pages buy on this machine", subtitle, "working set (log scale)",
                        "speedup over 4 KiB pages", footnote, panel_count, panels};
  int rc = chart_write_svg(&chart, out);
  free(values);
  free(hollow);
  return rc;
}

/* ---- the command -------------------------------------------------------------------------------- */

static void read_cpu_model(char *out, size_t cap) {
  out[0] = '\0';
  char *text = os_read_file("/proc/cpuinfo", NULL);
  const char *line = text ? strstr(text, "model name") : NULL;
  if (line && (line = strchr(line, ':'))) {
    line += 1 + strspn(line + 1, " \t");
    snprintf(out, cap, "%.*s", (int)strcspn(line, "\n"), line);
  }
  free(text);
}

static int finish(struct bench *b) {
  int status = EXIT_DONE;
  for (size_t i = 0; i < b->point_count; i++)
    if (flagged(&b->points[i])) status = EXIT_SHORT;
  for (int k = 0; k < KINDS; k++)
    if (kind_short(b, (enum hugify_page_kind)k) && (b->kinds_named || k == HUGIFY_PAGE_4K)) status = EXIT_SHORT;
  if (b->absl_named && !b->absl_ran) status = EXIT_SHORT;
  if (b->backing_failed) status = EXIT_PRIVILEGE;

  bool json_stdout = b->json_path && strcmp(b->json_path, "-") == 0;
  if (!json_stdout) print_tables(b, stdout);
  if (b->json_file) {
    write_json(b, b->json_file, status);
    if (!json_stdout && fclose(b->json_file) != 0) status = fail(EXIT_SHORT, COMMAND, "writing %s failed", b->json_path);
  }
  if (b->chart_file) {
    int rc = write_chart(b, b->chart_file);
    if (fclose(b->chart_file) != 0 || rc != 0) return fail(EXIT_SHORT, COMMAND, "writing %s failed", b->chart_path);
    if (!json_stdout) printf("\nchart: %s\n", b->chart_path);
  }
  if (b->backing_failed)
    fprintf(stderr, "hugify bench: /proc/self/smaps could not be read, so no page kind could be verified "
                    "(mount /proc)\n");
  return status;
}

int cmd_bench(int argc, char **argv) {
  struct bench *b = calloc(1, sizeof *b);
  if (!b) return fail(EXIT_SHORT, COMMAND, "out of memory");
  int rc = parse_arguments(b, argc, argv);
  if (rc == EXIT_DONE && b->json_path)
    b->json_file = strcmp(b->json_path, "-") == 0 ? stdout : fopen(b->json_path, "w");
  if (rc == EXIT_DONE && b->json_path && !b->json_file)
    rc = usage_error(COMMAND, "--json: cannot write %s: %s", b->json_path, strerror(errno));
  if (rc == EXIT_DONE && b->chart_path && !(b->chart_file = fopen(b->chart_path, "w")))
    rc = usage_error(COMMAND, "--chart: cannot write %s: %s", b->chart_path, strerror(errno));
  if (rc != EXIT_DONE) {
    if (b->json_file && b->json_file != stdout) fclose(b->json_file);
    free(b);
    return rc;
  }

  struct hugify_options options;
  char warnings[512] = "";
  options_from_environment(&options, warnings, sizeof warnings);
  if (warnings[0]) fprintf(stderr, "hugify bench: %s\n", warnings);
  b->unavailable = options.bench_unavailable;

  hugify_probe(&b->system);
  read_cpu_model(b->cpu, sizeof b->cpu);
  plan(b);
  step_done = 0;
  step_total = b->run[EXP_ABSL] ? 1 : 0;
  for (int k = 0; k < KINDS; k++) {
    if (!b->kinds[k].selected) continue;
    step_total += b->run[EXP_TOUCH];
    for (int e = 0; e < EXP_COUNT; e++)
      if (b->run[e] && e != EXP_TOUCH && e != EXP_ABSL) step_total += b->item_count[e];
  }

  b->started = bench_now();
  run_all(b);
  if (b->run[EXP_ABSL]) run_absl(b);
  b->seconds = bench_now() - b->started;
  progress(true, "bench: done in %.0f s", b->seconds);

  rc = finish(b);
  free(b->points);
  free(b);
  return rc;
}
