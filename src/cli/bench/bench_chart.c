/* SPDX-License-Identifier: MIT */
/* bench_chart.c - the chart of `hugify bench`: the speedup over 4 KiB pages against the working-set size,
 * one panel per experiment, drawn with chart.c. */
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
#include "cli.h"
#include "hugify.h"
#include "json_read.h"
#include "measure.h"
#include "options.h"
#include "os.h"
#include "procfs.h"
#include "units.h"

/* ---- the chart ---------------------------------------------------------------------------------- */

#define CHART_POINTS 40 /* per series: at most the items of an experiment */

static const char *const kind_colors[KINDS] = {"#8a8a8a", "#0072B2", "#D55E00", "#009E73"};

/* Room for the points of every series: x, y, low, high per series, and which are drawn hollow. */
struct chart_room {
  double *values;
  bool *hollow;
};

/* "on 4 KiB pages: 2.1 ns per load at 8 KiB, 95 at 1 GiB": the baseline at both ends. */
static void panel_subtitle(const struct bench *b, enum experiment e, char *out, size_t cap, const char **subtitle) {
  const struct point *first = NULL, *last = NULL;
  for (int i = 0; i < b->item_count[e]; i++) {
    const struct point *p = find_point(b, e, HUGIFY_PAGE_4K, &b->items[e][i]);
    if (p && !first) first = p;
    if (p) last = p;
  }
  if (!first || !last) {
    *subtitle = "no 4 KiB baseline: speedups unknown";
    return;
  }
  char a[32], z[32];
  format_bytes(first->size, a, sizeof a);
  format_bytes(last->size, z, sizeof z);
  snprintf(out, cap, "on 4 KiB pages: %.3g %s at %s, %.3g at %s", first->spread.median, experiment_info[e].unit, a,
           last->spread.median, z);
  *subtitle = out;
}

/* One series per page kind that has points: the speedup against the working set, with its spread. */
static void panel_series(const struct bench *b, enum experiment e, int panel_index, struct chart_room *room,
                         struct chart_panel *panel, struct chart_series *series) {
  for (int k = 0; k < KINDS; k++) {
    double *x = room->values + ((size_t)(panel_index * KINDS + k) * 4) * CHART_POINTS, *y = x + CHART_POINTS,
           *low = y + CHART_POINTS, *high = low + CHART_POINTS;
    bool *h = room->hollow + (size_t)(panel_index * KINDS + k) * CHART_POINTS;
    int n = 0;
    for (int i = 0; i < b->item_count[e] && n < CHART_POINTS; i++) {
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
    series[panel->series_count++] = (struct chart_series){
        hugify_page_kind_name((enum hugify_page_kind)k), kind_colors[k], k == HUGIFY_PAGE_4K, n, x, y, h,
        k == HUGIFY_PAGE_4K ? NULL : low, k == HUGIFY_PAGE_4K ? NULL : high};
  }
}

/* Under the chart: first touch per kind, the absl figures, and why a kind is missing. */
static void chart_footnote(const struct bench *b, char *footnote, size_t cap) {
  size_t used = 0;
  footnote[0] = '\0';
  const struct point *touch_base = find_point(b, EXP_TOUCH, HUGIFY_PAGE_4K, &b->items[EXP_TOUCH][0]);
  if (touch_base) {
    used += (size_t)snprintf(footnote + used, cap - used, "first touch, per 4 KiB: 4K %.0f ns", touch_base->spread.median);
    for (int k = 1; k < KINDS && used < cap; k++) {
      const struct point *p = find_point(b, EXP_TOUCH, (enum hugify_page_kind)k, &b->items[EXP_TOUCH][0]);
      if (p)
        used += (size_t)snprintf(footnote + used, cap - used, ", %s %.0f ns (%.1f\xc3\x97)",
                                 hugify_page_kind_name((enum hugify_page_kind)k), p->spread.median, p->speedup);
    }
  }
  if (b->absl_ran && b->absl_count == 2 && used < cap)
    used += (size_t)snprintf(footnote + used, cap - used,
                             "%sabsl::flat_hash_map, %.3g M try_emplace: std %.2f s, hugify %.2f s (%.2f\xc3\x97)",
                             used ? "\n" : "", b->absl[0].count / 1e6, b->absl[0].seconds, b->absl[1].seconds, b->absl[0].seconds / b->absl[1].seconds);
  for (int k = 0; k < KINDS && used < cap; k++) {
    if (!kind_short(b, (enum hugify_page_kind)k)) continue;
    char text[HUGIFY_REASON_MAX + 256];
    kind_skip_text(b, (enum hugify_page_kind)k, text, sizeof text);
    used += (size_t)snprintf(footnote + used, cap - used, "%s%s", used ? "\n" : "", text);
  }
}

int write_chart(const struct bench *b, FILE *out) {
  static const enum experiment charted[] = {EXP_CHASE, EXP_RANDOM, EXP_HASH, EXP_STRINGS};
  struct chart_panel panels[4];
  struct chart_series series[4][KINDS];
  char subtitles[4][160];
  struct chart_room room = {calloc(4 * KINDS * 4 * CHART_POINTS, sizeof *room.values),
                            calloc(4 * KINDS * CHART_POINTS, sizeof *room.hollow)};
  if (!room.values || !room.hollow) { free(room.values); free(room.hollow); return -ENOMEM; }
  int panel_count = 0;
  for (size_t c = 0; c < sizeof charted / sizeof charted[0]; c++) {
    enum experiment e = charted[c];
    if (!b->run[e] || !experiment_has_points(b, e)) continue;
    struct chart_panel *panel = &panels[panel_count];
    panel->id = experiment_info[e].name;
    panel->title = experiment_info[e].title;
    panel->series = series[panel_count];
    panel->series_count = 0;
    panel_subtitle(b, e, subtitles[panel_count], sizeof subtitles[0], &panel->subtitle);
    panel_series(b, e, panel_count, &room, panel, series[panel_count]);
    panel_count++;
  }

  char subtitle[512], footnote[2048];
  snprintf(subtitle, sizeof subtitle, "%s%sLinux %s \xc2\xb7 THP %s \xc2\xb7 hugify bench, median of %d timings per point, interleaved "
           "across the kinds; bars: their min-max%s",
           b->cpu[0] ? b->cpu : "", b->cpu[0] ? " \xc2\xb7 " : "", b->system.kernel_release,
           b->system.thp_enabled[0] ? b->system.thp_enabled : "absent", b->repeats, b->quick ? " (--quick)" : "");
  chart_footnote(b, footnote, sizeof footnote);
  struct chart chart = {"What huge pages buy on this machine", subtitle, "working set (log scale)",
                        "speedup over 4 KiB pages", footnote, panel_count, panels};
  int rc = chart_write_svg(&chart, out);
  free(room.values);
  free(room.hollow);
  return rc;
}
