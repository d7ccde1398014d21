/* SPDX-License-Identifier: MIT */
/* heat.c - the agent's access signal: DAMON's virtual-address monitoring through its sysfs interface,
 * soft-dirty bits, or none (heat.h). The tried regions' text is parsed by procfs.c (pure). */
#include "heat.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "array.h"
#include "measure.h"
#include "os.h"
#include "probe.h"

#define DAMON_ADMIN PROBE_DAMON_ADMIN
#define DAMON_SAMPLE_US 5000     /* DAMON's defaults: a sample every 5 ms, */
#define DAMON_AGGR_US 100000     /* nr_accesses summed over 100 ms, */
#define DAMON_UPDATE_US 1000000  /* the targets' mappings looked up again every second */
#define DAMON_MIN_REGIONS 100   /* DAMON's default is 10: more from the start converge on a hot set sooner */
#define DAMON_MAX_REGIONS 1000   /* per target */
#define DAMON_REGIONS_CAP (DAMON_MAX_REGIONS * 2) /* a target may briefly hold more before merging */

const char *heat_signal_name(enum heat_signal signal) {
  switch (signal) {
  case HEAT_DAMON: return "damon";
  case HEAT_SOFT_DIRTY: return "soft-dirty";
  case HEAT_NONE: break;
  }
  return "none";
}

int32_t heat_of(const struct heat_snapshot *snapshot, uint64_t start, uint64_t length,
                const struct resident_bytes *scan) {
  if (!snapshot || (snapshot->signal == HEAT_SOFT_DIRTY && !scan) || snapshot->signal == HEAT_NONE)
    return HEAT_UNKNOWN;
  if (snapshot->signal == HEAT_SOFT_DIRTY) return (int32_t)(scan->dirty >> 12);
  uint64_t end = start + length, covered = 0;
  double sum = 0;
  /* the regions are sorted: the first that ends after start, then on while they begin before end */
  size_t low = 0, high = snapshot->count;
  while (low < high) {
    size_t mid = low + (high - low) / 2;
    if (snapshot->regions[mid].end <= start) low = mid + 1;
    else high = mid;
  }
  for (size_t i = low; i < snapshot->count && snapshot->regions[i].start < end; i++) {
    const struct damon_region *r = &snapshot->regions[i];
    uint64_t from = r->start > start ? r->start : start, to = r->end < end ? r->end : end;
    if (to <= from) continue;
    covered += to - from;
    sum += (double)r->nr_accesses * (double)(to - from);
  }
  if (covered == 0) return HEAT_UNKNOWN;
  double heat = 100.0 * sum / (double)covered;
  return heat > INT32_MAX ? INT32_MAX : (int32_t)heat;
}

void heat_history_free(struct heat_history *history) {
  free(history->windows);
  *history = (struct heat_history){0};
}

/* The history's entry of the window at start, NULL when it has none. */
static const struct heat_window *history_of(const struct heat_history *history, uint64_t start) {
  size_t low = 0, high = history ? history->count : 0;
  while (low < high) {
    size_t mid = low + (high - low) / 2;
    if (history->windows[mid].start < start) low = mid + 1;
    else high = mid;
  }
  return history && low < history->count && history->windows[low].start == start ? &history->windows[low] : NULL;
}

int heat_of_windows(const struct heat_snapshot *snapshot, struct agent_window *windows, size_t count,
                    uint64_t window_bytes) {
  if (!snapshot || snapshot->signal != HEAT_DAMON || count == 0) return 0;
  struct damon_region *clean = malloc((snapshot->count ? snapshot->count : 1) * sizeof *clean);
  struct heat_window *measured = snapshot->history ? malloc(count * sizeof *measured) : NULL;
  if (!clean || (snapshot->history && !measured)) {
    free(clean);
    free(measured);
    return -ENOMEM;
  }
  /* both in address order, the regions not overlapping: one sweep */
  size_t kept = 0, first = 0;
  for (size_t i = 0; i < snapshot->count; i++) {
    const struct damon_region *r = &snapshot->regions[i];
    while (first < count && windows[first].start + window_bytes <= r->start) first++;
    bool huge = false;
    for (size_t k = first; k < count && windows[k].start < r->end && !huge; k++) huge = windows[k].huge_pages > 0;
    if (!huge) clean[kept++] = *r;
  }
  struct heat_snapshot judged = {.signal = HEAT_DAMON, .regions = clean, .count = kept};
  size_t recorded = 0;
  for (size_t k = 0; k < count; k++) {
    struct agent_window *w = &windows[k];
    const struct heat_window *last = history_of(snapshot->history, w->start);
    struct heat_window entry = last ? *last : (struct heat_window){w->start, HEAT_UNKNOWN};
    if (w->huge_pages == 0 && !(w->facts & PLAN_FACT_UNKNOWN)) {
      int32_t now = heat_of(&judged, w->start, window_bytes, NULL);
      if (now != HEAT_UNKNOWN)
        entry.heat = entry.heat == HEAT_UNKNOWN ? now : (int32_t)(((int64_t)entry.heat + now) / 2);
      w->heat = entry.heat; /* unmeasured now: what it was given at its last measurement */
    }
    /* a huge window keeps its entry, for when it is split again */
    if (measured && entry.heat != HEAT_UNKNOWN) measured[recorded++] = entry;
  }
  free(clean);
  if (snapshot->history) {
    free(snapshot->history->windows);
    snapshot->history->windows = measured;
    snapshot->history->count = recorded;
  }
  return 0;
}

bool heat_collapsible(const struct heat_snapshot *snapshot, int32_t heat) {
  return !snapshot || snapshot->signal != HEAT_SOFT_DIRTY || heat != 0;
}

/* ---- DAMON's sysfs ----------------------------------------------------------------------------------- */

static int damon_write(const struct heat_source *h, const char *leaf, const char *value, char *reason,
                       size_t cap) {
  char path[512];
  snprintf(path, sizeof path, DAMON_ADMIN "/kdamonds/%d/%s", h->kdamond, leaf);
  int rc = os_write_file(path, value);
  if (rc) reason_add(reason, cap, "writing '%s' to %s failed (%s)", value, path, strerror(-rc));
  return rc;
}

static int damon_write_u64(const struct heat_source *h, const char *leaf, uint64_t value, char *reason,
                           size_t cap) {
  char text[32];
  snprintf(text, sizeof text, "%llu", (unsigned long long)value);
  return damon_write(h, leaf, text, reason, cap);
}

static int damon_read(const struct heat_source *h, const char *leaf, char *buf, size_t cap) {
  char path[512];
  snprintf(path, sizeof path, DAMON_ADMIN "/kdamonds/%d/%s", h->kdamond, leaf);
  ssize_t n = os_read_small(path, buf, cap);
  return n < 0 ? (int)n : 0;
}

#define CONTEXT "contexts/0/"
#define SCHEME CONTEXT "schemes/0/"

/* A kdamond of our own: kdamond 0, made where there is none (nr_kdamonds 0), put back at heat_close. Where
 * kdamonds exist they are another user's, even one off with no context (its user may be setting it up), and
 * nr_kdamonds is never written then: writing it removes the kdamonds there. */
static int claim_kdamond(struct heat_source *h, char *reason, size_t cap) {
  uint64_t count = 0;
  int rc = os_read_u64(DAMON_ADMIN "/kdamonds/nr_kdamonds", &count);
  if (rc) {
    reason_add(reason, cap, DAMON_ADMIN "/kdamonds/nr_kdamonds unreadable (%s)", strerror(-rc));
    return rc;
  }
  if (count > 0) {
    reason_add(reason, cap, PROBE_DAMON_OTHERS ": hugify does not touch them, and uses DAMON only where no "
               "kdamond exists; stop their user (their state off, kdamonds/nr_kdamonds 0)", (unsigned long long)count);
    return -EBUSY;
  }
  /* a DAMON user inside the kernel (DAMON_STAT) would refuse our kdamond its start: nothing is claimed */
  if (probe_damon_held(reason, cap)) return -EBUSY;
  if ((rc = os_write_file(DAMON_ADMIN "/kdamonds/nr_kdamonds", "1")) != 0) {
    reason_add(reason, cap, "DAMON: nr_kdamonds could not be set (%s)%s", strerror(-rc),
               rc == -EACCES || rc == -EPERM ? ": run as root" : "");
    return rc;
  }
  h->kdamond = 0;
  return 0;
}

/* The context: vaddr operations (refused by a kernel without CONFIG_DAMON_VADDR), DAMON's default intervals,
 * and a `stat` scheme over every region (it acts on nothing; its tried regions are the readout). */
static int set_up_context(struct heat_source *h, char *reason, size_t cap) {
  char operations[128] = "";
  int rc = damon_write(h, "contexts/nr_contexts", "1", reason, cap);
  if (rc) return rc;
  damon_read(h, CONTEXT "avail_operations", operations, sizeof operations);
  if (!probe_damon_lists_vaddr(operations)) {
    char detail[160];
    snprintf(detail, sizeof detail, "avail_operations: %s", operations);
    probe_missing(PROBE_DAMON_VADDR, detail, reason, cap);
    return -EOPNOTSUPP;
  }
  struct { const char *leaf; uint64_t value; } numbers[] = {
      {CONTEXT "monitoring_attrs/intervals/sample_us", DAMON_SAMPLE_US},
      {CONTEXT "monitoring_attrs/intervals/aggr_us", DAMON_AGGR_US},
      {CONTEXT "monitoring_attrs/intervals/update_us", DAMON_UPDATE_US},
      {CONTEXT "monitoring_attrs/nr_regions/min", DAMON_MIN_REGIONS},
      {CONTEXT "monitoring_attrs/nr_regions/max", DAMON_MAX_REGIONS},
      {CONTEXT "schemes/nr_schemes", 1},
  };
  if ((rc = damon_write(h, CONTEXT "operations", "vaddr", reason, cap)) != 0) return rc;
  for (size_t i = 0; i < sizeof numbers / sizeof numbers[0] && rc == 0; i++)
    rc = damon_write_u64(h, numbers[i].leaf, numbers[i].value, reason, cap);
  if (rc == 0) rc = damon_write(h, SCHEME "action", "stat", reason, cap);
  /* every region: sizes, frequencies and ages from 0 to the most there is */
  static const char *const maxima[][2] = {{SCHEME "access_pattern/sz/max", "18446744073709551615"},
                                          {SCHEME "access_pattern/nr_accesses/max", "4294967295"},
                                          {SCHEME "access_pattern/age/max", "4294967295"}};
  for (size_t i = 0; i < sizeof maxima / sizeof maxima[0] && rc == 0; i++)
    rc = damon_write(h, maxima[i][0], maxima[i][1], reason, cap);
  h->work.sample_us = DAMON_SAMPLE_US;
  h->work.aggr_us = DAMON_AGGR_US;
  return rc;
}

static void damon_account_on_time(struct heat_source *h) {
  if (h->on) h->work.monitored_seconds += measure_now() - h->on_since, h->on_since = measure_now();
}

static void damon_off(struct heat_source *h) {
  char state[32];
  damon_account_on_time(h);
  if (damon_read(h, "state", state, sizeof state) == 0 && strcmp(state, "off") != 0)
    damon_write(h, "state", "off", NULL, 0);
  h->on = false;
  h->kdamond_pid = 0;
}

static int damon_on(struct heat_source *h, char *reason, size_t cap) {
  int rc = damon_write(h, "state", "on", reason, cap);
  if (rc) return rc;
  memset(h->first_touch_seen, 0, sizeof h->first_touch_seen); /* a start sets the scheme's stats to 0 */
  char pid[32];
  h->on = true;
  h->on_since = measure_now();
  h->kdamond_pid = damon_read(h, "pid", pid, sizeof pid) == 0 ? (pid_t)atoi(pid) : 0;
  h->work.restarts++;
  return 0;
}

/* CPU of the kdamond thread so far (HEAT_NO_CPU unknown): its schedstat's time on a CPU. */
static double kdamond_cpu(const struct heat_source *h) {
  char path[64], text[128];
  uint64_t run = 0, wait;
  snprintf(path, sizeof path, "/proc/%d/schedstat", (int)h->kdamond_pid);
  bool read = h->kdamond_pid > 0 && os_read_small(path, text, sizeof text) >= 0 && parse_schedstat(text, &run, &wait);
  return read ? (double)run / 1e9 : HEAT_NO_CPU;
}

/* ---- first touch: the hugepage scheme ----------------------------------------------------------------- */

#define FIRST_TOUCH CONTEXT "schemes/1/"

uint32_t heat_first_touch_min_accesses(double min_present, uint64_t sample_us, uint64_t aggr_us) {
  uint64_t samples = sample_us ? aggr_us / sample_us : 1;
  double least = min_present * (double)samples;
  uint32_t whole = (uint32_t)least;
  if ((double)whole < least) whole++;
  return whole ? whole : 1;
}

int heat_first_touch(struct heat_source *h, double min_present, uint64_t pmd_bytes, char *reason, size_t cap) {
  if (h->signal != HEAT_DAMON) {
    reason_add(reason, cap, "--first-touch marks regions DAMON finds hot: it needs DAMON's vaddr monitoring as the "
               "heat signal (%s)", h->reason);
    return -EOPNOTSUPP;
  }
  char detail[256] = "";
  if (probe_feature(PROBE_DAMOS_HUGEPAGE, detail, sizeof detail) == HUGIFY_FEATURE_NO) {
    probe_missing(PROBE_DAMOS_HUGEPAGE, detail, reason, cap);
    return -EOPNOTSUPP;
  }
  char least[16], size[32];
  snprintf(least, sizeof least, "%u", heat_first_touch_min_accesses(min_present, DAMON_SAMPLE_US, DAMON_AGGR_US));
  snprintf(size, sizeof size, "%llu", (unsigned long long)pmd_bytes);
  const char *const leaves[][2] = {{CONTEXT "schemes/nr_schemes", "2"},
                                   {FIRST_TOUCH "access_pattern/sz/min", size},
                                   {FIRST_TOUCH "access_pattern/sz/max", "18446744073709551615"},
                                   {FIRST_TOUCH "access_pattern/nr_accesses/min", least},
                                   {FIRST_TOUCH "access_pattern/nr_accesses/max", "4294967295"},
                                   {FIRST_TOUCH "access_pattern/age/max", "4294967295"}};
  int rc = 0;
  for (size_t i = 0; i < sizeof leaves / sizeof leaves[0] && rc == 0; i++)
    rc = damon_write(h, leaves[i][0], leaves[i][1], reason, cap);
  if (rc == 0 && (rc = damon_write(h, FIRST_TOUCH "action", "hugepage", reason, cap)) == -EINVAL)
    probe_missing(PROBE_DAMOS_HUGEPAGE, "EINVAL: DAMON's schemes do not take the action 'hugepage'", reason, cap);
  if (rc) damon_write(h, CONTEXT "schemes/nr_schemes", "1", NULL, 0);
  h->first_touch = rc == 0;
  return rc == -EINVAL ? -EOPNOTSUPP : rc;
}

/* The hugepage scheme's stats (DAMON's, since the kdamond's start) into the work's totals. */
static void first_touch_stats(struct heat_source *h) {
  if (!h->first_touch || damon_write(h, "state", "update_schemes_stats", NULL, 0) != 0) return;
  static const char *const leaves[3] = {FIRST_TOUCH "stats/nr_tried", FIRST_TOUCH "stats/nr_applied",
                                        FIRST_TOUCH "stats/sz_applied"};
  uint64_t *totals[3] = {&h->work.first_touch_tried_regions, &h->work.first_touch_applied_regions,
                         &h->work.first_touch_applied_bytes};
  for (int i = 0; i < 3; i++) {
    char text[32];
    if (damon_read(h, leaves[i], text, sizeof text) != 0) continue;
    uint64_t now = strtoull(text, NULL, 10);
    *totals[i] += now >= h->first_touch_seen[i] ? now - h->first_touch_seen[i] : now;
    h->first_touch_seen[i] = now;
  }
}

/* ---- the source ------------------------------------------------------------------------------------- */

int heat_open(struct heat_source *h, enum heat_mode mode, char *reason, size_t cap) {
  memset(h, 0, sizeof *h);
  h->mode = mode;
  h->kdamond = -1;
  h->work.kdamond_cpu = HEAT_NO_CPU;
  if (mode == HEAT_MODE_NONE) {
    snprintf(h->reason, sizeof h->reason, "--heat none: densest first");
    return 0;
  }
  int rc = -EOPNOTSUPP;
  if (mode == HEAT_MODE_AUTO || mode == HEAT_MODE_DAMON) {
    char why[384] = "";
    /* the probe first: a kernel without vaddr (seen in another user's context, or in one set up and removed
     * where no kdamond was) is said so, and nothing is claimed */
    if ((rc = probe_require(PROBE_DAMON_VADDR, why, sizeof why)) == 0 && (rc = claim_kdamond(h, why, sizeof why)) == 0 &&
        (rc = set_up_context(h, why, sizeof why)) != 0) {
      heat_close(h);
      h->mode = mode;
    }
    if (rc == 0) {
      h->signal = HEAT_DAMON;
      snprintf(h->reason, sizeof h->reason, "DAMON vaddr, kdamond %d", h->kdamond);
      return 0;
    }
    if (mode == HEAT_MODE_DAMON) {
      reason_add(reason, cap, "--heat damon: %s", why);
      return rc == -EACCES || rc == -EPERM || rc == -EBUSY ? rc : -EOPNOTSUPP;
    }
    snprintf(h->reason, sizeof h->reason, "no DAMON (%s)", why);
  }
  if (mode == HEAT_MODE_AUTO) {
    /* Not soft-dirty: its clear write-protects every page, and the kernel refuses to collapse a window with
     * no writable page, so memory that is read and not written (a lookup table: the best case for huge
     * pages) would never be collapsed again. Only when asked for (--heat soft-dirty). */
    reason_add(h->reason, sizeof h->reason, "densest first (soft-dirty is used only with --heat soft-dirty)");
    return 0;
  }
  char detail[256] = "";
  if (probe_feature(PROBE_SOFT_DIRTY, detail, sizeof detail) == HUGIFY_FEATURE_YES) {
    h->signal = HEAT_SOFT_DIRTY;
    reason_add(h->reason, sizeof h->reason, "soft-dirty: written memory first");
    return 0;
  }
  if (mode == HEAT_MODE_SOFT_DIRTY) {
    reason_add(reason, cap, "--heat soft-dirty: this kernel has no soft-dirty bits (%s): CONFIG_MEM_SOFT_DIRTY, "
               "Linux 3.11+ (Debian's 6.1 and 6.12 have it)", detail);
    return -EOPNOTSUPP;
  }
  reason_add(h->reason, sizeof h->reason, "no soft-dirty (CONFIG_MEM_SOFT_DIRTY): densest first");
  return 0;
}

static struct heat_target *target_of(const struct heat_source *h, pid_t pid) {
  for (size_t i = 0; i < h->target_count; i++)
    if (h->targets[i].pid == pid) return &h->targets[i];
  return NULL;
}

static bool same_targets(const struct heat_source *h, const pid_t *pids, size_t count) {
  if (count != h->target_count) return false;
  for (size_t i = 0; i < count; i++)
    if (h->targets[i].pid != pids[i]) return false;
  return true;
}

/* Forget every target's regions and history (the array stays, empty). */
static void drop_targets(struct heat_source *h) {
  for (size_t i = 0; i < h->target_count; i++) free(h->targets[i].regions), heat_history_free(&h->targets[i].history);
  h->target_count = 0;
}

int heat_set_targets(struct heat_source *h, const pid_t *pids, size_t count, char *reason, size_t cap) {
  if (h->signal == HEAT_NONE) return 0;
  if (count > HEAT_TARGETS_MAX) count = HEAT_TARGETS_MAX;
  if (same_targets(h, pids, count)) return 0;
  /* the new list, keeping what is known of the processes that stay */
  struct heat_target *next = calloc(count ? count : 1, sizeof *next);
  if (!next) return -ENOMEM;
  for (size_t i = 0; i < count; i++) {
    struct heat_target *old = target_of(h, pids[i]);
    if (old) next[i] = *old, old->regions = NULL, old->history = (struct heat_history){0};
    next[i].pid = pids[i];
    if (h->signal == HEAT_DAMON) next[i].fresh = false; /* DAMON starts over on every change */
  }
  drop_targets(h);
  free(h->targets);
  h->targets = next;
  h->target_count = h->target_cap = count;
  h->work.targets = count;
  if (h->signal != HEAT_DAMON) return 0;
  damon_off(h);
  int rc = damon_write_u64(h, CONTEXT "targets/nr_targets", count, reason, cap);
  for (size_t i = 0; i < count && rc == 0; i++) {
    char leaf[128];
    snprintf(leaf, sizeof leaf, CONTEXT "targets/%zu/pid_target", i);
    rc = damon_write_u64(h, leaf, (uint64_t)pids[i], reason, cap);
  }
  /* a process that exited between the pass and now makes the kdamond refuse to start: the next pass retries */
  if (rc == 0 && count > 0) rc = damon_on(h, reason, cap);
  if (rc) drop_targets(h), h->work.targets = 0;
  return rc;
}

/* Read the scheme's tried regions as `grep -r .` would print them: "IDX/FIELD:VALUE" lines. */
static int read_tried_regions(const struct heat_source *h, char **text, size_t *length) {
  char dir[512];
  snprintf(dir, sizeof dir, DAMON_ADMIN "/kdamonds/%d/" SCHEME "tried_regions", h->kdamond);
  DIR *d = opendir(dir);
  if (!d) return -errno;
  size_t cap = 0;
  *length = 0;
  *text = NULL;
  int rc = 0;
  static const char *const fields[] = {"start", "end", "nr_accesses", "age"};
  for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    for (size_t f = 0; f < 4 && rc == 0; f++) {
      char path[1024], value[32], entry[512];
      snprintf(path, sizeof path, "%s/%s/%s", dir, e->d_name, fields[f]);
      if (os_read_small(path, value, sizeof value) < 0) continue; /* a torn read: the region is dropped */
      int n = snprintf(entry, sizeof entry, "%s/%s:%s\n", e->d_name, fields[f], value);
      if (n < 0 || (size_t)n >= sizeof entry || (rc = ARRAY_GROW(*text, *length + (size_t)n + 1, cap)) != 0) break;
      memcpy(*text + *length, entry, (size_t)n);
      *length += (size_t)n;
    }
  }
  closedir(d);
  if (rc == 0 && (rc = ARRAY_GROW(*text, *length + 1, cap)) == 0) (*text)[*length] = '\0';
  return rc;
}

int heat_refresh(struct heat_source *h, char *reason, size_t cap) {
  if (h->signal != HEAT_DAMON || h->target_count == 0) return 0;
  char state[32] = "";
  damon_read(h, "state", state, sizeof state);
  if (strcmp(state, "on") != 0) { /* every target exited: DAMON stops by itself */
    damon_account_on_time(h);
    h->on = false;
    drop_targets(h); /* set again at the end of the pass */
    return 0;
  }
  damon_account_on_time(h);
  first_touch_stats(h);
  char *text = NULL;
  size_t length = 0;
  /* The update at times returns before the scheme's next apply filled the directory (seen on 6.12 under
   * emulation: empty at most reads of a run's first 90 s): one more update then. */
  for (int attempt = 0; attempt < 2 && length == 0; attempt++) {
    free(text);
    text = NULL;
    int rc = damon_write(h, "state", "update_schemes_tried_regions", reason, cap);
    if (rc) return rc;
    h->work.reads++;
    if ((rc = read_tried_regions(h, &text, &length)) != 0) {
      reason_add(reason, cap, "DAMON's tried regions unreadable (%s)", strerror(-rc));
      return rc;
    }
  }
  size_t region_cap = h->target_count * DAMON_REGIONS_CAP;
  struct damon_region *regions = calloc(region_cap, sizeof *regions);
  size_t runs_cap = h->target_count * 4, *firsts = calloc(runs_cap, sizeof *firsts);
  long count = regions && firsts ? parse_damon_tried_regions(text, regions, region_cap) : -ENOMEM;
  free(text);
  size_t runs = count > 0 ? damon_split_targets(regions, (size_t)count, firsts, runs_cap) : 0;
  h->work.regions = count > 0 ? (uint64_t)count : 0;
  h->work.kdamond_cpu = kdamond_cpu(h);
  /* One run of regions per target; the kernel may have added a second apply's worth after the first (k runs
   * per target): the first apply's are taken. Anything else is not attributable. */
  if (count >= 0 && (runs == 0 || runs % h->target_count != 0)) {
    reason_add(reason, cap, "DAMON's %ld regions split into %zu runs for %zu targets: the last pass's heat is kept",
               count, runs, h->target_count);
    count = -EPROTO;
  }
  for (size_t t = 0; t < h->target_count && count >= 0; t++) { /* on failure the last read's regions stay */
    struct heat_target *target = &h->targets[t];
    size_t first = firsts[t], end = t + 1 < runs ? firsts[t + 1] : (size_t)count;
    struct damon_region *copy = malloc((end - first) * sizeof *copy + 1);
    if (!copy) continue;
    memcpy(copy, regions + first, (end - first) * sizeof *copy);
    free(target->regions);
    target->regions = copy;
    target->count = end - first;
    target->fresh = true;
  }
  free(regions);
  free(firsts);
  if (count < 0 && count != -EPROTO) reason_add(reason, cap, "DAMON's tried regions malformed");
  return count < 0 ? (int)count : 0;
}

const struct heat_snapshot *heat_snapshot_of(const struct heat_source *h, pid_t pid) {
  struct heat_target *t = h->signal == HEAT_NONE ? NULL : target_of(h, pid);
  if (!t || !t->fresh) return NULL;
  t->snapshot = (struct heat_snapshot){h->signal, t->regions, t->count, &t->history};
  return &t->snapshot;
}

void heat_after_plan(struct heat_source *h, pid_t pid) {
  if (h->signal != HEAT_SOFT_DIRTY) return;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/clear_refs", (int)pid);
  if (os_write_file(path, "4") != 0) return;
  h->work.clears++;
  struct heat_target *t = target_of(h, pid);
  if (!t && ARRAY_GROW(h->targets, h->target_count + 1, h->target_cap) == 0) {
    t = &h->targets[h->target_count++];
    memset(t, 0, sizeof *t);
    t->pid = pid;
  }
  if (t) t->fresh = true;
}

void heat_close(struct heat_source *h) {
  if (h->kdamond >= 0) {
    damon_off(h);
    /* leave nothing: no targets, no context, and nr_kdamonds back to 0 (the kdamond was ours) */
    damon_write(h, CONTEXT "targets/nr_targets", "0", NULL, 0);
    damon_write(h, "contexts/nr_contexts", "0", NULL, 0);
    os_write_file(DAMON_ADMIN "/kdamonds/nr_kdamonds", "0");
  }
  drop_targets(h);
  free(h->targets);
  struct heat_work work = h->work;
  enum heat_signal signal = h->signal;
  char why[sizeof h->reason];
  memcpy(why, h->reason, sizeof why);
  memset(h, 0, sizeof *h);
  h->kdamond = -1;
  h->work = work;
  h->signal = signal;
  memcpy(h->reason, why, sizeof why);
}
