/* bench.c - hugify bench: the seeds' experiments on this machine, for every page kind it can get, as
 * tables, JSON and an SVG chart of the speedup over 4 KiB pages against the working-set size.
 *
 * Every kind's memory comes from hugify_alloc with a one-kind chain and HUGIFY_STRICT, so a kind that
 * cannot be had is reported skipped with the library's reason, never replaced by another kind; and what
 * backs each working set is measured with hugify_measure_backing right before it is timed.
 *
 * Every point is timed several times (3, or 5 without --quick), the repetitions interleaved across the page
 * kinds in a balanced order (src/lib/measure.c), never back to back: the figure is the median, with the
 * min/max beside it; a point whose spread exceeds NOISY_SPREAD of its median is flagged noisy, and kinds
 * within each other's spread are a tie, not a ranking. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "hugify.h"
#include "json_read.h"
#include "measure.h"
#include "options.h"
#include "os.h"
#include "procfs.h"
#include "units.h"

struct bench_args {
  const char *pages, *chart, *inject_noise;
  uint64_t max_size;
  bool quick;
  struct json_output json;
};

static const struct option_spec bench_options[] = {
    OPT_GROUP("Options"),
    OPT_STRING("pages", struct bench_args, pages, "KINDS",
               "page kinds to time, from 4K,THP,2M,1G (default: all). 4K is always timed:\n"
               "it is the baseline of every speedup"),
    OPT_SIZE("max-size", struct bench_args, max_size, "SIZE", 8 << 10,
             "largest working set (default: 4 GiB or half the available memory, whichever\n"
             "is smaller; 256 MiB with --quick)"),
    OPT_FLAG("quick", 0, struct bench_args, quick, "a first look in under a minute: fewer sizes, shorter timings"),
    OPT_JSON(struct bench_args, json,
             "the results as JSON on stdout instead of the tables (schema hugify.bench/2,\n"
             "docs/bench.md); --json=FILE: the tables on stdout and the JSON to FILE (--json=- is stdout)"),
    OPT_STRING("chart", struct bench_args, chart, "FILE.svg",
               "write the chart: speedup over 4K vs working-set size, one line per kind, the\n"
               "spread of each point as an error bar"),
    OPT_STRING("inject-noise", struct bench_args, inject_noise, "KIND",
               "test hook: one repetition of every point of KIND takes twice its time (a busy\n"
               "wait inside the timing), so those points must come out flagged noisy"),
    OPT_END,
};

const struct command_help help_bench = {
    "usage: hugify bench [EXPERIMENT...] [--pages KINDS] [--max-size SIZE] [--quick]\n"
    "                    [--json | --json=FILE] [--chart FILE.svg]\n"
    "\n"
    "What huge pages buy on this machine: the seed experiments, timed on each page kind, with the\n"
    "speedup over 4 KiB pages against the working-set size. Before every timing, hugify_measure_backing\n"
    "checks what really backs the working set; a point under 95 % on its page kind is flagged.\n"
    "Every point is timed 3 times (--quick) or 5 times, interleaved across the page kinds: the median is\n"
    "shown with its spread (min-max); a point whose spread exceeds 10 % of its median is flagged noisy,\n"
    "and kinds within each other's spread are reported as a tie, not ranked.\n"
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
    "\n",
    bench_options,
    "\n"
    "A kind that cannot be had (no hugetlb pool, no 1 GiB page) is listed as skipped with the reason and\n"
    "the command that enables it, e.g. 'hugify pool set 2M=2048'.\n"
    "\n"
    "When points are noisy, the likely cause is named (machine load, large kernel-time variance).\n"
    "\n"
    "Exit status: 0 done (noisy points are flagged, not an error); 1 a point was under 95 % coverage, or a kind named in --pages (or an\n"
    "experiment named on the command line) could not be run in full; 2 bad usage; 3 the backing of\n"
    "memory cannot be measured here (/proc/self/smaps unreadable).\n"
    "\n"
    "Examples:\n"
    "  hugify bench --quick --chart bench.svg\n"
    "  hugify bench chase random --pages 4K,THP,2M --max-size 2G --json=bench.json\n"
    "  hugify pool set 2M=2048 && hugify bench hash strings --chart hash.svg\n",
};

#define COMMAND "bench"
#define MIN_SIZE (UINT64_C(8) << 10)
#define HASH_MAX_SIZE (UINT64_C(1) << 30)
#define COVERAGE_MIN 0.95
#define INTERLEAVED_BUDGET (UINT64_C(4) << 30) /* all kinds' buffers at once, at most */
#define NOISY_SPREAD 0.10      /* a point whose (max - min) / median exceeds this is noisy */
#define MAX_REPEATS 8
#define CONFIDENCE 0.95
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
  uint64_t ops;      /* operations timed, over all repetitions */
  int repeats;
  double ns[MAX_REPEATS];      /* ns per operation (touch: per 4 KiB), per repetition */
  double system[MAX_REPEATS];  /* kernel seconds, per repetition */
  double seconds[MAX_REPEATS]; /* touch: the whole first touch, per repetition */
  bool interleaved;  /* repetitions interleaved with the other kinds' (false: too large to hold them all) */
  double coverage;   /* share of the working set on this kind's pages, measured before timing */
  /* summarised (summarise()) */
  struct measure_spread spread;  /* of ns */
  double speedup, speedup_min, speedup_max; /* 4K ns / this ns, per repetition: median, min, max */
  bool tie;          /* within the 4K baseline's spread: no measurable difference */
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
  double count, seconds, seconds_min, seconds_max, huge_fraction;
  int repeat;
};

struct bench {
  /* settings */
  bool quick, run[EXP_COUNT], experiments_named, absl_named, kinds_named;
  uint64_t max_size;
  struct json_output json; /* --json / --json=FILE */
  const char *chart_path;
  FILE *json_file;          /* opened before the run, so a bad path fails at once */
  struct output_file chart; /* --chart: its stream is open (NULL without --chart) from the start */
  unsigned unavailable; /* bit per kind: HUGIFY_BENCH_UNAVAILABLE */
  int inject_noise;     /* --inject-noise KIND: that kind, or -1 */
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
  struct measure_noise machine;
  char noise[512]; /* the likely cause when points are noisy, "" if none */
};

static volatile uint64_t sink; /* every workload's result lands here, so no load is optimised away */

/* ---- arguments ---------------------------------------------------------------------------------- */

static int parse_arguments(struct bench *b, int argc, char **argv) {
  struct bench_args args = {0};
  static struct option_result parsed; /* large: off the stack */
  if (parse_command_options(COMMAND, bench_options, OPTIONS_ANYWHERE, argc, argv, &args, &parsed) != EXIT_DONE)
    return EXIT_USAGE;
  b->quick = args.quick;
  b->json = args.json;
  b->chart_path = args.chart;
  b->inject_noise = -1;
  if (args.pages) {
    unsigned selected;
    if (!options_parse_kinds(args.pages, &selected) || !selected)
      return usage_error(COMMAND, "--pages '%s': expected a list of page kinds such as 4K,THP,2M,1G", args.pages);
    for (int k = 0; k < KINDS; k++) b->kinds[k].selected |= (selected >> k) & 1;
    b->kinds_named = true;
  }
  if (args.inject_noise) {
    enum hugify_page_kind kind;
    if (hugify_page_kind_parse(args.inject_noise, &kind) != 0)
      return usage_error(COMMAND, "--inject-noise '%s': expected a page kind (4K, THP, 2M or 1G)", args.inject_noise);
    b->inject_noise = (int)kind;
  }
  for (int i = 0; i < parsed.operand_count; i++) {
    const char *word = argv[parsed.operands[i]];
    int e = 0;
    while (e < EXP_COUNT && strcmp(word, experiment_info[e].name) != 0) e++;
    if (e == EXP_COUNT && strcmp(word, "all") != 0)
      return usage_error(COMMAND, "no experiment '%s' (expected random, chase, touch, hash, strings, absl)", word);
    for (int k = 0; k < EXP_COUNT; k++) b->run[k] |= e == EXP_COUNT || k == e;
    b->experiments_named = true;
    b->absl_named |= e == EXP_ABSL;
  }
  if (!b->experiments_named)
    for (int e = 0; e < EXP_COUNT; e++) b->run[e] = true;
  if (!b->kinds_named)
    for (int k = 0; k < KINDS; k++) b->kinds[k].selected = true;
  b->kinds[HUGIFY_PAGE_4K].selected = true; /* the baseline */

  char *meminfo;
  os_read_file("/proc/meminfo", &meminfo, NULL);
  if (!meminfo || !parse_keyed_value(meminfo, "MemAvailable", &b->mem_available)) b->mem_available = 0;
  free(meminfo);
  if (args.max_size) {
    b->max_size = args.max_size;
    if (b->mem_available && b->max_size > b->mem_available) {
      char want[32], have[32];
      format_bytes(b->max_size, want, sizeof want);
      format_bytes(b->mem_available, have, sizeof have);
      return usage_error(COMMAND, "--max-size %s is more than the %s of memory available", want, have);
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
    sink += w->run(w, ops);
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
  sink += w->run(w, ops);
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
  if (b->point_count == b->point_cap) {
    size_t cap = b->point_cap ? b->point_cap * 2 : 128;
    struct point *points = realloc(b->points, cap * sizeof *points);
    if (!points) return -1;
    b->points = points;
    b->point_cap = cap;
  }
  memset(&b->points[b->point_count], 0, sizeof b->points[0]);
  return (long)b->point_count++;
}

static int step_done, step_total;

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
           item.count ? "strings" : "", step_done += n, step_total);
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
  for (int i = 1; i < n; i++) sink += w[i].run(&w[i], warmed); /* the same warm-up for every kind */
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
  progress(false, "bench: touch (%d/%d)", step_done += n, step_total);
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
        else step_done++;
      }
      if (n) run_item(b, (enum experiment)e, *item, kinds, n, buffers, interleaved);
    }
  }
}

/* Working sets up to a share of the memory budget run with every kind's buffer live at once, the
 * repetitions interleaved across the kinds; the larger ones run one kind at a time (repetitions back to
 * back: said in the JSON as "interleaved": false). */
static void run_all(struct bench *b) {
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

/* ---- absl: the external program ------------------------------------------------------------------- */

/* One result line of absl_hash_map --json: {"allocator":"std","count":N,"seconds":S,...}. */
static bool parse_absl_line(const char *line, struct absl_run *run) {
  struct json_doc *doc = json_doc_read_text(line, NULL, 0);
  if (!doc) return false;
  double repeat = 1;
  memset(run, 0, sizeof *run);
  bool ok = json_doc_string(doc, "allocator", run->allocator, sizeof run->allocator) &&
            json_doc_number(doc, "count", &run->count) && json_doc_number(doc, "seconds", &run->seconds);
  if (!json_doc_number(doc, "seconds_min", &run->seconds_min)) run->seconds_min = run->seconds;
  if (!json_doc_number(doc, "seconds_max", &run->seconds_max)) run->seconds_max = run->seconds;
  if (!json_doc_number(doc, "huge_fraction", &run->huge_fraction)) run->huge_fraction = NAN;
  json_doc_number(doc, "repeat", &repeat);
  run->repeat = (int)repeat;
  json_doc_free(doc);
  return ok && run->count > 0 && run->seconds > 0;
}

/* Run the program with its stdout in a memory file; its output (malloc'd), or NULL with the reason. */
static char *run_absl_program(struct bench *b, const char *const *argv) {
  int fd = memfd_create("hugify-bench-absl", MFD_CLOEXEC);
  if (fd < 0) {
    snprintf(b->absl_reason, sizeof b->absl_reason, "cannot create a memory file: %s", strerror(errno));
    return NULL;
  }
  struct measure_command command = {.argv = argv, .stdout_fd = fd, .stderr_fd = -1};
  struct measure_run run;
  int rc = measure_command_run(&command, &run);
  char *output = NULL;
  if (rc != 0 || run.status != 0) {
    snprintf(b->absl_reason, sizeof b->absl_reason, "%.300s failed (%s %d)", b->absl_program,
             rc != 0 ? "could not start: errno" : "exit status", rc != 0 ? -rc : run.status);
  } else {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (os_read_file(path, &output, NULL) != 0) snprintf(b->absl_reason, sizeof b->absl_reason, "cannot read the output of %.300s", b->absl_program);
  }
  close(fd);
  return output;
}

static void run_absl(struct bench *b) {
  progress(false, "bench: absl (%d/%d)", ++step_done, step_total);
  static const char *const candidates[] = {"../bench/absl_hash_map", "../libexec/hugify/absl_hash_map", NULL};
  if (measure_find_beside_self(candidates, b->absl_program, sizeof b->absl_program) != 0) {
    b->absl_program[0] = '\0';
    snprintf(b->absl_reason, sizeof b->absl_reason,
             "libabsl-dev not installed / absl_hash_map not found (build hugify with libabsl-dev installed)");
    return;
  }
  /* The seed's 10 M elements make a table of about 288 MiB: scaled down with --max-size like the rest. */
  double count = 10e6 * fmin(1.0, (double)b->max_size / (double)(UINT64_C(288) << 20));
  char count_text[32], repeat_text[8];
  snprintf(count_text, sizeof count_text, "%.0f", count < 10000 ? 10000 : count);
  snprintf(repeat_text, sizeof repeat_text, "%d", b->repeats);
  const char *argv[] = {b->absl_program, "--allocator", "both", "--count", count_text, "--repeat", repeat_text,
                        "--json", NULL};
  char *output = run_absl_program(b, argv);
  if (!output) return;
  static const char *const allocators[] = {"std", "hugify"};
  for (int a = 0; a < 2; a++) {
    bool found = false;
    char *copy = strdup(output), *save = NULL;
    for (char *line = copy ? strtok_r(copy, "\n", &save) : NULL; line && !found; line = strtok_r(NULL, "\n", &save)) {
      struct absl_run run;
      if (!parse_absl_line(line, &run) || strcmp(run.allocator, allocators[a]) != 0) continue;
      b->absl[b->absl_count++] = run;
      found = true;
    }
    free(copy);
    if (!found) {
      snprintf(b->absl_reason, sizeof b->absl_reason, "%.300s printed no result line for the %s allocator",
               b->absl_program, allocators[a]);
      b->absl_count = 0;
      free(output);
      return;
    }
  }
  free(output);
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

/* Medians, spreads and speedups of every point, once all are timed. The speedup is paired per repetition
 * (4K's i-th timing over this kind's i-th: they ran in the same round), so a slow round shows as spread. */
static void summarise(struct bench *b) {
  for (size_t i = 0; i < b->point_count; i++) {
    struct point *p = &b->points[i];
    measure_spread_of(p->ns, (size_t)p->repeats, CONFIDENCE, NOISY_SPREAD, &p->spread);
  }
  for (size_t i = 0; i < b->point_count; i++) {
    struct point *p = &b->points[i];
    const struct point *base = find_point(b, p->experiment, HUGIFY_PAGE_4K, &p->item);
    p->speedup = p->speedup_min = p->speedup_max = NAN;
    p->tie = false;
    if (!base || base->repeats == 0 || p->repeats == 0) continue;
    double ratios[MAX_REPEATS];
    int n = p->repeats < base->repeats ? p->repeats : base->repeats;
    for (int r = 0; r < n; r++) ratios[r] = p->ns[r] > 0 ? base->ns[r] / p->ns[r] : NAN;
    struct measure_spread s;
    measure_spread_of(ratios, (size_t)n, CONFIDENCE, NOISY_SPREAD, &s);
    p->speedup = s.median;
    p->speedup_min = s.min;
    p->speedup_max = s.max;
    p->tie = p != base && measure_overlap(&p->spread, &base->spread);
  }
}

static bool low_coverage(const struct point *p) { return p->coverage < COVERAGE_MIN; }
static bool noisy(const struct point *p) { return p->spread.noisy; }

/* When points are noisy: the likely cause, from the machine's load and the kernel time of the noisiest. */
static void diagnose_noise(struct bench *b) {
  const struct point *worst = NULL;
  for (size_t i = 0; i < b->point_count; i++)
    if (noisy(&b->points[i]) && (!worst || b->points[i].spread.relative_spread > worst->spread.relative_spread))
      worst = &b->points[i];
  measure_noise_read(&b->machine);
  b->machine.system_spread = b->machine.system_share = -1;
  b->noise[0] = '\0';
  if (!worst) return;
  struct measure_spread system;
  measure_spread_of(worst->system, (size_t)worst->repeats, CONFIDENCE, NOISY_SPREAD, &system);
  double cpu = worst->spread.median * 1e-9 * (double)worst->ops / (double)worst->repeats;
  if (system.median > 0.001) {
    b->machine.system_spread = (system.max - system.min) / system.median;
    b->machine.system_share = cpu > 0 ? system.median / cpu : 0;
  }
  measure_noise_cause(&b->machine, b->noise, sizeof b->noise);
}

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

/* "245 (240-251)": the median and the range of the timings; "?" when noisy, "!" when under coverage. */
static void format_measured(const struct point *p, char *out, size_t cap) {
  char ns[16], low[16], high[16];
  format_ns(p->spread.median, ns, sizeof ns);
  format_ns(p->spread.min, low, sizeof low);
  format_ns(p->spread.max, high, sizeof high);
  snprintf(out, cap, "%s (%s-%s)%s%s", ns, low, high, noisy(p) ? "?" : "", low_coverage(p) ? "!" : "");
}

static void format_speedup(const struct point *p, char *out, size_t cap) {
  if (!isfinite(p->speedup)) snprintf(out, cap, "-");
  else snprintf(out, cap, "%.2fx%s", p->speedup, p->tie ? " tie" : "");
}

/* The fastest kind of an item, and every kind within its spread: "2M=1G", "THP", or "tie" when 4K is
 * among them. */
static void format_fastest(const struct bench *b, enum experiment e, const struct item *item, char *out, size_t cap) {
  const struct point *fastest = NULL;
  for (int k = 0; k < KINDS; k++) {
    const struct point *p = find_point(b, e, (enum hugify_page_kind)k, item);
    if (p && p->repeats && (!fastest || p->spread.median < fastest->spread.median)) fastest = p;
  }
  out[0] = '\0';
  if (!fastest) return;
  bool with_base = false;
  for (int k = 0; k < KINDS; k++) {
    const struct point *p = find_point(b, e, (enum hugify_page_kind)k, item);
    if (!p || !p->repeats || (p != fastest && !measure_overlap(&p->spread, &fastest->spread))) continue;
    with_base |= k == HUGIFY_PAGE_4K;
    size_t used = strlen(out);
    snprintf(out + used, cap - used, "%s%s", used ? "=" : "", hugify_page_kind_name((enum hugify_page_kind)k));
  }
  if (with_base) snprintf(out, cap, "tie");
}

/* table_row with `n` values from an array (table_row takes exactly the table's column count). */
static void table_row_of(struct table *t, const char *const *r, int n) {
  switch (n) {
  case 2: table_row(t, r[0], r[1]); break;
  case 3: table_row(t, r[0], r[1], r[2]); break;
  case 4: table_row(t, r[0], r[1], r[2], r[3]); break;
  case 5: table_row(t, r[0], r[1], r[2], r[3], r[4]); break;
  case 6: table_row(t, r[0], r[1], r[2], r[3], r[4], r[5]); break;
  case 7: table_row(t, r[0], r[1], r[2], r[3], r[4], r[5], r[6]); break;
  case 8: table_row(t, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]); break;
  default: table_row(t, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]); break;
  }
}

/* The kinds with at least one point in this experiment (the others get a skip line, not a column). */
static void shown_kinds(const struct bench *b, enum experiment e, bool *shown) {
  for (int k = 0; k < KINDS; k++) {
    shown[k] = false;
    for (int i = 0; i < b->item_count[e] && !shown[k]; i++)
      shown[k] = find_point(b, e, (enum hugify_page_kind)k, &b->items[e][i]) != NULL;
  }
}

static void print_legend(const struct bench *b, bool any_noisy, bool any_low, FILE *out) {
  fprintf(out, "  ns: median (min-max) of %d timings, interleaved across the kinds; tie: within the 4K range (no "
               "measurable difference); fastest: the kinds within the fastest one's range\n",
          b->repeats);
  if (any_noisy)
    fprintf(out, "  ? noisy: the timings spread over %.0f %% of their median: not a clean measurement\n",
            100.0 * NOISY_SPREAD);
  if (any_low) fprintf(out, "  ! under 95 %% of the working set on that page kind: not a clean measurement\n");
}

static void print_experiment_table(const struct bench *b, enum experiment e, FILE *out) {
  enum { MAX_COLUMNS = 2 + 2 * KINDS };
  const char *headers[MAX_COLUMNS];
  bool right[MAX_COLUMNS], shown[KINDS];
  char names[2 * KINDS][24];
  shown_kinds(b, e, shown);
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
  headers[columns] = "fastest";
  right[columns++] = false;
  struct table t;
  table_init(&t, columns, headers, right);
  bool any_noisy = false, any_low = false;
  for (int i = 0; i < b->item_count[e]; i++) {
    const struct item *item = &b->items[e][i];
    char cells[MAX_COLUMNS][80];
    const char *row[MAX_COLUMNS];
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
        format_measured(p, cells[c], sizeof cells[c]);
        any_noisy |= noisy(p);
        any_low |= low_coverage(p);
      } else {
        snprintf(cells[c], sizeof cells[c], "-");
      }
      row[c] = cells[c];
      c++;
      if (k == HUGIFY_PAGE_4K) continue;
      if (p) format_speedup(p, cells[c], sizeof cells[c]);
      else snprintf(cells[c], sizeof cells[c], "-");
      row[c] = cells[c];
      c++;
    }
    format_fastest(b, e, item, cells[c], sizeof cells[c]);
    row[c] = cells[c];
    c++;
    if (any) table_row_of(&t, row, columns);
  }
  fprintf(out, "\n%s (%s; speedup over 4K)\n", experiment_info[e].title, experiment_info[e].unit);
  table_print(&t, out, "  ");
  table_free(&t);
  print_legend(b, any_noisy, any_low, out);
}

static void print_touch_table(const struct bench *b, FILE *out) {
  static const char *const headers[] = {"kind", "size", "seconds", "ns per 4 KiB", "speedup", "on kind"};
  static const bool right[] = {false, true, true, true, true, true};
  struct table t;
  table_init(&t, 6, headers, right);
  for (int k = 0; k < KINDS; k++) {
    const struct point *p = find_point(b, EXP_TOUCH, (enum hugify_page_kind)k, &b->items[EXP_TOUCH][0]);
    if (!p) continue;
    char size[32], seconds[32], ns[64], gain[32], coverage[32];
    format_bytes(p->size, size, sizeof size);
    snprintf(seconds, sizeof seconds, "%.3f", stats_median(p->seconds, (size_t)p->repeats));
    format_measured(p, ns, sizeof ns);
    format_speedup(p, gain, sizeof gain);
    snprintf(coverage, sizeof coverage, "%.1f %%%s", 100 * p->coverage, low_coverage(p) ? "!" : "");
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
  static const char *const headers[] = {"allocator", "inserts", "seconds", "min-max", "ns per insert", "on huge pages",
                                        "speedup"};
  static const bool right[] = {false, true, true, true, true, true, true};
  struct table t;
  table_init(&t, 7, headers, right);
  for (int i = 0; i < b->absl_count; i++) {
    const struct absl_run *r = &b->absl[i];
    char count[32], seconds[32], range[48], ns[32], huge[32], gain[32];
    format_count((uint64_t)r->count, count, sizeof count);
    snprintf(seconds, sizeof seconds, "%.3f", r->seconds);
    snprintf(range, sizeof range, "%.3f-%.3f", r->seconds_min, r->seconds_max);
    format_ns(r->seconds * 1e9 / r->count, ns, sizeof ns);
    snprintf(huge, sizeof huge, isfinite(r->huge_fraction) ? "%.1f %%" : "-", 100 * r->huge_fraction);
    bool tie = i > 0 && r->seconds_min <= b->absl[0].seconds_max && b->absl[0].seconds_min <= r->seconds_max;
    snprintf(gain, sizeof gain, "%.2fx%s", b->absl[0].seconds / r->seconds, tie ? " tie" : "");
    table_row(&t, r->allocator, count, seconds, range, ns, huge, gain);
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
  size_t noisy_count = 0;
  for (size_t i = 0; i < b->point_count; i++) noisy_count += noisy(&b->points[i]);
  if (noisy_count)
    fprintf(out, "\nNoisy points: %zu of %zu; %s%s.\n", noisy_count, b->point_count,
            b->noise[0] ? "likely cause: " : "no likely cause found (load average and kernel time are steady)",
            b->noise);
}

static void json_machine(struct json_writer *j, const struct bench *b) {
  json_open_object(j, "machine");
  json_put_string(j, "kernel", b->system.kernel_release);
  json_put_string(j, "cpu", b->cpu);
  json_put_i64(j, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
  json_put_u64(j, "mem_available_bytes", b->mem_available);
  json_put_u64(j, "base_page_size_bytes", b->system.base_page_size);
  json_put_string(j, "thp_enabled", b->system.thp_enabled);
  json_put_string(j, "thp_defrag", b->system.thp_defrag);
  if (b->machine.load_average >= 0) json_put_double(j, "load_average", b->machine.load_average);
  else json_put_null(j, "load_average");
  json_close(j);
}

static void json_kinds(struct json_writer *j, const struct bench *b) {
  json_open_array(j, "kinds");
  for (int k = 0; k < KINDS; k++) {
    const struct kind_state *s = &b->kinds[k];
    enum hugify_page_kind kind = (enum hugify_page_kind)k;
    json_open_object(j, NULL);
    json_put_string(j, "kind", hugify_page_kind_name(kind));
    json_put_bool(j, "selected", s->selected);
    json_put_string(j, "status", !s->selected ? "not selected" : !s->attempted ? "not run"
                             : kind_skipped(b, kind) ? "skipped" : kind_short(b, kind) ? "partial" : "ok");
    json_put_u64(j, "wanted_bytes", s->wanted);
    json_put_u64(j, "largest_bytes", s->largest);
    json_put_string(j, "reason", kind_short(b, kind) ? s->reason : NULL);
    json_put_string(j, "enable", kind_short(b, kind) && s->enable[0] ? s->enable : NULL);
    json_close(j);
  }
  json_close(j);
}

static void json_absl(struct json_writer *j, const struct bench *b) {
  json_put_string(j, "status", b->absl_ran ? "ran" : "skipped");
  json_put_string(j, "reason", b->absl_ran ? NULL : b->absl_reason);
  json_put_string(j, "program", b->absl_program[0] ? b->absl_program : NULL);
  json_open_array(j, "runs");
  for (int i = 0; i < b->absl_count; i++) {
    const struct absl_run *r = &b->absl[i];
    json_open_object(j, NULL);
    json_put_string(j, "allocator", r->allocator);
    json_put_u64(j, "count", (uint64_t)r->count);
    json_put_u64(j, "repetitions", (uint64_t)r->repeat);
    json_put_double(j, "seconds", r->seconds);
    json_put_double(j, "min_seconds", r->seconds_min);
    json_put_double(j, "max_seconds", r->seconds_max);
    json_put_double(j, "ns_per_op", r->seconds * 1e9 / r->count);
    json_put_double(j, "huge_fraction", r->huge_fraction);
    json_put_double(j, "speedup", b->absl[0].seconds / r->seconds);
    json_put_bool(j, "tie", i > 0 && r->seconds_min <= b->absl[0].seconds_max && b->absl[0].seconds_min <= r->seconds_max);
    json_close(j);
  }
  json_close(j);
}

static void json_point(struct json_writer *j, const struct point *p) {
  json_open_object(j, NULL);
  json_put_string(j, "kind", hugify_page_kind_name(p->kind));
  json_put_u64(j, "size_bytes", p->size);
  if (p->experiment == EXP_STRINGS) json_put_u64(j, "count", p->item.count);
  if (p->experiment == EXP_TOUCH) json_put_double(j, "seconds", stats_median(p->seconds, (size_t)p->repeats));
  json_put_u64(j, "repetitions", (uint64_t)p->repeats);
  json_put_bool(j, "interleaved", p->interleaved);
  json_put_double(j, "ns_per_op", p->spread.median);
  json_put_double(j, "min_ns_per_op", p->spread.min);
  json_put_double(j, "max_ns_per_op", p->spread.max);
  if (p->spread.interval_rc == 0) {
    json_open_object(j, "interval");
    json_put_double(j, "low_ns_per_op", p->spread.interval.low);
    json_put_double(j, "high_ns_per_op", p->spread.interval.high);
    json_put_double(j, "confidence", p->spread.interval.coverage);
    json_close(j);
  } else {
    json_put_null(j, "interval");
  }
  json_open_array(j, "ns_per_op_samples");
  for (int r = 0; r < p->repeats; r++) json_put_double(j, NULL, p->ns[r]);
  json_close(j);
  json_put_double(j, "spread_fraction", p->spread.relative_spread);
  json_put_bool(j, "noisy", noisy(p));
  json_put_u64(j, "ops", p->ops);
  json_put_double(j, "speedup", p->speedup);
  json_put_double(j, "min_speedup", p->speedup_min);
  json_put_double(j, "max_speedup", p->speedup_max);
  json_put_bool(j, "tie", p->tie);
  json_put_double(j, "coverage_fraction", p->coverage);
  json_put_bool(j, "low_coverage", low_coverage(p));
  json_close(j);
}

/* The planned measurements of experiment e that a selected kind has no point for, per kind. */
static void json_skipped_items(struct json_writer *j, const struct bench *b, enum experiment e) {
  json_open_array(j, "skipped");
  for (int k = 0; k < KINDS; k++) {
    bool any = false;
    for (int i = 0; i < b->item_count[e]; i++) {
      const struct item *item = &b->items[e][i];
      if (!kind_missing(b, e, (enum hugify_page_kind)k, item)) continue;
      if (!any) {
        json_open_object(j, NULL);
        json_put_string(j, "kind", hugify_page_kind_name((enum hugify_page_kind)k));
        json_put_string(j, "reason", b->kinds[k].reason);
        json_put_string(j, "enable", b->kinds[k].enable[0] ? b->kinds[k].enable : NULL);
        json_open_array(j, e == EXP_STRINGS ? "counts" : "sizes_bytes");
        any = true;
      }
      json_put_u64(j, NULL, e == EXP_STRINGS ? item->count : item->size);
    }
    if (any) {
      json_close(j);
      json_close(j);
    }
  }
  json_close(j);
}

static void json_experiment(struct json_writer *j, const struct bench *b, enum experiment e) {
  json_open_object(j, NULL);
  json_put_string(j, "name", experiment_info[e].name);
  json_put_string(j, "title", experiment_info[e].title);
  json_put_string(j, "unit", experiment_info[e].unit);
  if (e == EXP_ABSL) {
    json_absl(j, b);
  } else {
    json_put_string(j, "status", experiment_has_points(b, e) ? "ran" : "skipped");
    json_open_array(j, "points");
    for (size_t i = 0; i < b->point_count; i++)
      if (b->points[i].experiment == e) json_point(j, &b->points[i]);
    json_close(j);
    json_skipped_items(j, b, e);
  }
  json_close(j);
}

static void write_json(const struct bench *b, FILE *out, int exit_status) {
  struct json_writer j;
  json_begin(&j, out);
  json_put_string(&j, "schema", "hugify.bench/2");
  json_put_bool(&j, "quick", b->quick);
  json_put_u64(&j, "max_size_bytes", b->max_size);
  json_put_double(&j, "elapsed_seconds", b->seconds);
  json_put_u64(&j, "repetitions", (uint64_t)b->repeats);
  json_put_double(&j, "coverage_min_fraction", COVERAGE_MIN);
  json_put_double(&j, "noisy_spread_fraction", NOISY_SPREAD);
  json_machine(&j, b);
  json_kinds(&j, b);
  json_open_array(&j, "experiments");
  for (int e = 0; e < EXP_COUNT; e++)
    if (b->run[e]) json_experiment(&j, b, (enum experiment)e);
  json_close(&j);
  json_put_string(&j, "noise_cause", b->noise[0] ? b->noise : NULL);
  json_put_i64(&j, "exit_status", exit_status);
  json_end(&j);
}

/* ---- the chart ---------------------------------------------------------------------------------- */

static int write_chart(const struct bench *b, FILE *out) {
  static const enum experiment charted[] = {EXP_CHASE, EXP_RANDOM, EXP_HASH, EXP_STRINGS};
  struct chart_panel panels[4];
  struct chart_series series[4][KINDS];
  char subtitles[4][160];
  double *values = calloc(4 * KINDS * 4 * 40, sizeof *values); /* x, y, low, high per series */
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
               first->spread.median, experiment_info[e].unit, a, last->spread.median, z);
      panel->subtitle = subtitles[panel_count];
    } else {
      panel->subtitle = "no 4 KiB baseline: speedups unknown";
    }
    for (int k = 0; k < KINDS; k++) {
      double *x = values + ((size_t)(panel_count * KINDS + k) * 4) * 40, *y = x + 40, *low = y + 40, *high = low + 40;
      bool *h = hollow + (size_t)(panel_count * KINDS + k) * 40;
      int n = 0;
      for (int i = 0; i < b->item_count[e] && n < 40; i++) {
        const struct point *p = find_point(b, e, (enum hugify_page_kind)k, &b->items[e][i]);
        if (!p) continue;
        x[n] = (double)p->size;
        y[n] = p->speedup;
        low[n] = p->speedup_min;
        high[n] = p->speedup_max;
        h[n] = low_coverage(p) || noisy(p);
        n++;
      }
      if (!n) continue;
      series[panel_count][panel->series_count++] = (struct chart_series){
          hugify_page_kind_name((enum hugify_page_kind)k), kind_colors[k], k == HUGIFY_PAGE_4K, n, x, y, h,
          k == HUGIFY_PAGE_4K ? NULL : low, k == HUGIFY_PAGE_4K ? NULL : high};
    }
    panel_count++;
  }

  char subtitle[512], footnote[2048] = "";
  snprintf(subtitle, sizeof subtitle, "%s%sLinux %s \xc2\xb7 THP %s \xc2\xb7 hugify bench, median of %d timings per point, interleaved "
           "across the kinds; bars: their min-max%s",
           b->cpu[0] ? b->cpu : "", b->cpu[0] ? " \xc2\xb7 " : "", b->system.kernel_release,
           b->system.thp_enabled[0] ? b->system.thp_enabled : "absent", b->repeats, b->quick ? " (--quick)" : "");
  size_t used = 0;
  const struct point *touch_base = find_point(b, EXP_TOUCH, HUGIFY_PAGE_4K, &b->items[EXP_TOUCH][0]);
  if (touch_base) {
    used += (size_t)snprintf(footnote + used, sizeof footnote - used, "first touch, per 4 KiB: 4K %.0f ns", touch_base->spread.median);
    for (int k = 1; k < KINDS && used < sizeof footnote; k++) {
      const struct point *p = find_point(b, EXP_TOUCH, (enum hugify_page_kind)k, &b->items[EXP_TOUCH][0]);
      if (p)
        used += (size_t)snprintf(footnote + used, sizeof footnote - used, ", %s %.0f ns (%.1f\xc3\x97)",
                                 hugify_page_kind_name((enum hugify_page_kind)k), p->spread.median, p->speedup);
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
  char *text;
  os_read_file("/proc/cpuinfo", &text, NULL);
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
    if (low_coverage(&b->points[i])) status = EXIT_SHORT;
  for (int k = 0; k < KINDS; k++)
    if (kind_short(b, (enum hugify_page_kind)k) && (b->kinds_named || k == HUGIFY_PAGE_4K)) status = EXIT_SHORT;
  if (b->absl_named && !b->absl_ran) status = EXIT_SHORT;
  if (b->backing_failed) status = EXIT_PRIVILEGE;

  bool json_stdout = !json_output_text(&b->json);
  if (!json_stdout) print_tables(b, stdout);
  if (b->json_file) {
    write_json(b, b->json_file, status);
    if (!json_output_close(b->json_file, &b->json, COMMAND)) status = EXIT_SHORT;
  }
  if (b->chart.stream) {
    int rc = write_chart(b, b->chart.stream);
    if (!output_file_close(&b->chart, COMMAND) || rc != 0) return fail(EXIT_SHORT, COMMAND, "writing %s failed", b->chart_path);
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
  if (rc == EXIT_DONE && b->json.wanted && !(b->json_file = json_output_open(&b->json, COMMAND))) rc = EXIT_USAGE;
  if (rc == EXIT_DONE && b->chart_path &&
      !output_file_open(&b->chart, b->chart_path, COMMAND, "--chart", "or give another name"))
    rc = EXIT_USAGE;
  if (rc != EXIT_DONE) {
    if (b->json_file && b->json_file != stdout) {
      fclose(b->json_file);
      free(b->json.file.buffer);
    }
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

  b->started = measure_now();
  run_all(b);
  if (b->run[EXP_ABSL]) run_absl(b);
  b->seconds = measure_now() - b->started;
  summarise(b);
  diagnose_noise(b);
  progress(true, "bench: done in %.0f s", b->seconds);

  rc = finish(b);
  free(b->points);
  free(b);
  return rc;
}
