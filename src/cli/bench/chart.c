/* SPDX-License-Identifier: MIT */
/* chart.c - line charts as standalone SVG: panels on a grid, log-2 x axis, linear y axis with a
 * reference line at 1, one polyline per series with an error bar per point, labels at the line ends. Small on purpose: it draws
 * what `hugify bench` needs and nothing else. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define FONT "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
#define PANEL_WIDTH 560.0
#define PANEL_HEIGHT 340.0
#define PLOT_LEFT 54.0   /* inside a panel */
#define PLOT_RIGHT 92.0  /* room for the end labels */
#define PLOT_TOP 58.0
#define PLOT_BOTTOM 46.0
#define COLUMNS 2

static void text_escaped(FILE *out, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", out); break;
    case '<': fputs("&lt;", out); break;
    case '>': fputs("&gt;", out); break;
    case '"': fputs("&quot;", out); break;
    default: fputc(*s, out);
    }
  }
}

static void text_at(FILE *out, double x, double y, const char *attributes, const char *text) {
  fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" %s>", x, y, attributes);
  text_escaped(out, text);
  fputs("</text>\n", out);
}

/* "8K", "512K", "4M", "1G" for powers of two. */
static void size_label(double bytes, char *out, size_t cap) {
  static const char units[] = "BKMGT";
  int unit = 0;
  while (bytes >= 1024 && unit < 4) { bytes /= 1024; unit++; }
  snprintf(out, cap, unit ? "%g%c" : "%gB", bytes, units[unit]);
}

/* ---- the little arithmetic the chart needs, without libm ---------------------------------------------
 * The command loads no libm: loading it cost every start of hugify (`hugify run` included) about 80 us of
 * CPU here (docs/run.md), for these few calls of `hugify bench`'s chart. Scaling by 2 is exact, and the
 * compiler inlines floor, fabs and copysign. */

/* fmin and fmax as C99 says: a NaN argument gives the other one. */
static double min_of(double a, double b) { return isnan(a) ? b : isnan(b) ? a : a < b ? a : b; }
static double max_of(double a, double b) { return isnan(a) ? b : isnan(b) ? a : a > b ? a : b; }

/* round(): half away from zero, exact (fabs(v) - floor(fabs(v)) is exact). */
static double round_half_away(double v) {
  double whole = floor(fabs(v));
  return copysign(fabs(v) - whole >= 0.5 ? whole + 1 : whole, v);
}

/* 2^e for an integer e (exact). */
static double power_of_two(int e) {
  double p = 1;
  for (int i = 0; i < (e < 0 ? -e : e); i++) p = e < 0 ? p / 2 : p * 2;
  return p;
}

/* log2(x) for x > 0: exact for powers of two (the chart's sizes); elsewhere to a few units in the last
 * place (x = m 2^e, m in [0.5, 1); ln m = 2 atanh((m - 1) / (m + 1)), |z| <= 1/3, summed to convergence). */
static double log2_of(double x) {
  if (!(x > 0) || isinf(x)) return x == 0 ? -INFINITY : x; /* NaN, negative, infinite: as given */
  int e = 0;
  double m = x;
  while (m >= 1) m /= 2, e++;
  while (m < 0.5) m *= 2, e--;
  if (m == 0.5) return e - 1;
  double z = (m - 1) / (m + 1), z2 = z * z, term = z, sum = 0;
  for (int k = 1; sum + term / k != sum; k += 2, term *= z2) sum += term / k;
  return e + 2 * sum / 0.69314718055994530942;
}

/* 10^k for an integer k, correctly rounded (powers of ten up to 1e22 are exact doubles). */
static double power_of_ten(int k) {
  double p = 1;
  for (int i = 0; i < (k < 0 ? -k : k); i++) p *= 10;
  return k < 0 ? 1 / p : p;
}

/* A "nice" tick step (1, 2, 2.5 or 5 times a power of ten) giving about `ticks` steps over span. */
static double nice_step(double span, int ticks) {
  double raw = span / ticks, steps[] = {1, 2, 2.5, 5, 10};
  int k = 0; /* the largest power of ten at most raw */
  while (power_of_ten(k + 1) <= raw && k < 300) k++;
  while (power_of_ten(k) > raw && k > -300) k--;
  double power = power_of_ten(k);
  for (int i = 0; i < 5; i++) if (steps[i] * power >= raw) return steps[i] * power;
  return 10 * power;
}

struct scale {
  double x0, x1, y0, y1;   /* data domain: log2 x, linear y */
  double left, top, width, height;
};
static double px(const struct scale *s, double x) { return s->left + (log2_of(x) - s->x0) / (s->x1 - s->x0) * s->width; }
static double py(const struct scale *s, double y) { return s->top + s->height - (y - s->y0) / (s->y1 - s->y0) * s->height; }

struct end_label {
  double y;
  const struct chart_series *series;
  double value;
};
static int compare_end_label(const void *a, const void *b) {
  double d = ((const struct end_label *)a)->y - ((const struct end_label *)b)->y;
  return d < 0 ? -1 : d > 0;
}

static bool drawable(const struct chart_series *series, int k) {
  return series->x[k] > 0 && isfinite(series->y[k]);
}

static bool has_bar(const struct chart_series *series, int k) {
  return series->low && series->high && isfinite(series->low[k]) && isfinite(series->high[k]);
}

/* The panel's scale: the data's x range in whole octaves when narrow, a y range from the data and its
 * error bars with room around it, always including 1 (the baseline). */
static struct scale panel_scale(const struct chart_panel *panel, double ox, double oy, double *ystep) {
  struct scale s = {INFINITY, -INFINITY, 1.0, 1.0, ox + PLOT_LEFT, oy + PLOT_TOP, PANEL_WIDTH - PLOT_LEFT - PLOT_RIGHT,
                    PANEL_HEIGHT - PLOT_TOP - PLOT_BOTTOM};
  for (int i = 0; i < panel->series_count; i++) {
    const struct chart_series *series = &panel->series[i];
    for (int k = 0; k < series->count; k++) {
      if (!drawable(series, k)) continue;
      double x = log2_of(series->x[k]), low = series->y[k], high = series->y[k];
      if (has_bar(series, k)) {
        low = min_of(low, series->low[k]);
        high = max_of(high, series->high[k]);
      }
      s.x0 = min_of(s.x0, x);
      s.x1 = max_of(s.x1, x);
      s.y0 = min_of(s.y0, low);
      s.y1 = max_of(s.y1, high);
    }
  }
  if (!isfinite(s.x0)) { s.x0 = 13; s.x1 = 30; }
  if (s.x1 - s.x0 < 4) { s.x0 = floor(s.x0); s.x1 = ceil(s.x1); } /* a narrow range: whole octaves, labelled */
  if (s.x1 - s.x0 < 1) { s.x0 -= 0.5; s.x1 += 0.5; }
  *ystep = nice_step((s.y1 - s.y0) * 1.1 + 0.2, 5);
  s.y0 = max_of(0, floor((s.y0 - 0.05) / *ystep) * *ystep);
  s.y1 = ceil((s.y1 + 0.05) / *ystep) * *ystep;
  return s;
}

/* Title, background, grid, axis labels and the reference line at 1. */
static void draw_frame(FILE *out, const struct chart *chart, const struct chart_panel *panel, const struct scale *s,
                       double ystep, double ox, double oy) {
  text_at(out, ox + PLOT_LEFT, oy + 24, "font-size=\"15\" font-weight=\"600\" fill=\"#222\"", panel->title);
  if (panel->subtitle) text_at(out, ox + PLOT_LEFT, oy + 42, "font-size=\"11.5\" fill=\"#666\"", panel->subtitle);
  fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"none\"/>\n", s->left,
          s->top, s->width, s->height);
  for (double y = s->y0; y <= s->y1 + ystep / 2; y += ystep) {
    char label[32];
    snprintf(label, sizeof label, "%g\xc3\x97", round_half_away(y * 100) / 100); /* "1.5×" */
    fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", s->left,
            s->left + s->width, py(s, y), py(s, y));
    text_at(out, s->left - 6, py(s, y) + 4, "font-size=\"11\" fill=\"#555\" text-anchor=\"end\"", label);
  }
  /* x grid: powers of two, labelled every 1, 2 or 3 octaves so labels do not collide */
  int first = (int)ceil(s->x0 - 1e-9), last = (int)floor(s->x1 + 1e-9), every = (last - first) > 14 ? 3 : (last - first) > 7 ? 2 : 1;
  for (int e = first; e <= last; e++) {
    double x = px(s, power_of_two(e));
    bool labelled = (e - 13) % every == 0; /* anchored so 8K, 64K, 512K, 4M ... stay put across runs */
    fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n", x, x, s->top, s->top + s->height,
            labelled ? "#e4e4e4" : "#f0f0f0");
    if (!labelled) continue;
    char label[16];
    size_label(power_of_two(e), label, sizeof label);
    text_at(out, x, s->top + s->height + 16, "font-size=\"11\" fill=\"#555\" text-anchor=\"middle\"", label);
  }
  if (chart->x_label)
    text_at(out, s->left + s->width / 2, s->top + s->height + 36, "font-size=\"11.5\" fill=\"#444\" text-anchor=\"middle\"",
            chart->x_label);
  if (chart->y_label) {
    fprintf(out, "<text transform=\"translate(%.1f %.1f) rotate(-90)\" font-size=\"11.5\" fill=\"#444\" "
                 "text-anchor=\"middle\">", ox + 14, s->top + s->height / 2);
    text_escaped(out, chart->y_label);
    fputs("</text>\n", out);
  }
  if (s->y0 <= 1 && s->y1 >= 1) /* the reference: no change */
    fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" stroke-width=\"1\"/>\n", s->left,
            s->left + s->width, py(s, 1), py(s, 1));
  fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#bbb\"/>\n", s->left,
          s->top, s->width, s->height);
}

/* One series: its line, the error bar of each point (the spread of its timings), its points (hollow when
 * flagged). Returns the index of its last drawn point, or -1. */
static int draw_series(FILE *out, const struct scale *s, const struct chart_series *series) {
  fputs("<g class=\"series\" data-kind=\"", out);
  text_escaped(out, series->name);
  fprintf(out, "\" fill=\"none\" stroke=\"%s\">\n<polyline stroke-width=\"%s\" stroke-linejoin=\"round\"%s points=\"",
          series->color, series->dashed ? "1.6" : "2.4", series->dashed ? " stroke-dasharray=\"5 4\"" : "");
  int last_point = -1;
  for (int k = 0; k < series->count; k++) {
    if (!drawable(series, k)) continue;
    fprintf(out, "%s%.1f,%.1f", last_point >= 0 ? " " : "", px(s, series->x[k]), py(s, series->y[k]));
    last_point = k;
  }
  fputs("\"/>\n", out);
  for (int k = 0; k < series->count; k++) {
    if (!drawable(series, k) || !has_bar(series, k)) continue;
    double x = px(s, series->x[k]), y0 = py(s, series->low[k]), y1 = py(s, series->high[k]);
    fprintf(out, "<path class=\"error-bar\" data-low=\"%.4g\" data-high=\"%.4g\" stroke-width=\"1.2\" "
                 "d=\"M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fH%.1f\"/>\n",
            series->low[k], series->high[k], x, y0, y1, x - 3, y0, x + 3, x - 3, y1, x + 3);
  }
  for (int k = 0; k < series->count && !series->dashed; k++) {
    if (!drawable(series, k)) continue;
    bool hollow = series->hollow && series->hollow[k];
    fprintf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\" stroke-width=\"1.5\"/>\n", px(s, series->x[k]),
            py(s, series->y[k]), hollow ? "3.6" : "2.8", hollow ? "#fff" : series->color);
  }
  fputs("</g>\n", out);
  return last_point;
}

/* Labels at the line ends ("THP 1.45×"), pushed apart so they never overlap. */
static void draw_end_labels(FILE *out, const struct scale *s, struct end_label *ends, int end_count) {
  qsort(ends, (size_t)end_count, sizeof *ends, compare_end_label);
  for (int i = 1; i < end_count; i++)
    if (ends[i].y < ends[i - 1].y + 14) ends[i].y = ends[i - 1].y + 14;
  double overflow = end_count ? ends[end_count - 1].y - (s->top + s->height) : 0;
  for (int i = end_count - 1; i >= 0 && overflow > 0; i--) {
    ends[i].y -= overflow;
    if (i > 0 && ends[i - 1].y > ends[i].y - 14) overflow = ends[i - 1].y - (ends[i].y - 14);
    else overflow = 0;
  }
  for (int i = 0; i < end_count; i++) {
    char label[64], attributes[96];
    if (ends[i].series->dashed) snprintf(label, sizeof label, "%s baseline", ends[i].series->name);
    else snprintf(label, sizeof label, "%s %.2f\xc3\x97", ends[i].series->name, ends[i].value);
    snprintf(attributes, sizeof attributes, "font-size=\"12\" font-weight=\"600\" fill=\"%s\"", ends[i].series->color);
    text_at(out, s->left + s->width + 7, ends[i].y + 4, attributes, label);
  }
}

static void draw_panel(FILE *out, const struct chart *chart, const struct chart_panel *panel, double ox, double oy) {
  double ystep;
  struct scale s = panel_scale(panel, ox, oy, &ystep);
  fprintf(out, "<g class=\"panel\" data-experiment=\"");
  text_escaped(out, panel->id);
  fputs("\">\n", out);
  draw_frame(out, chart, panel, &s, ystep, ox, oy);
  struct end_label *ends = calloc((size_t)panel->series_count + 1, sizeof *ends);
  int end_count = 0;
  for (int i = 0; i < panel->series_count; i++) {
    const struct chart_series *series = &panel->series[i];
    int last = draw_series(out, &s, series);
    if (last >= 0 && ends) ends[end_count++] = (struct end_label){py(&s, series->y[last]), series, series->y[last]};
  }
  if (ends) draw_end_labels(out, &s, ends, end_count);
  free(ends);
  fputs("</g>\n", out);
}

int chart_write_svg(const struct chart *chart, FILE *out) {
  int rows = (chart->panel_count + COLUMNS - 1) / COLUMNS, columns = chart->panel_count < COLUMNS ? chart->panel_count : COLUMNS;
  if (columns < 1) columns = 1;
  int footnote_lines = 0;
  for (const char *p = chart->footnote; p && *p; p++) footnote_lines += *p == '\n';
  if (chart->footnote && *chart->footnote) footnote_lines++;
  double header = 96, width = columns * PANEL_WIDTH + 20, height = header + rows * PANEL_HEIGHT + 16 + footnote_lines * 16;
  fprintf(out,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
          "font-family=\"%s\">\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
          width, height, width, height, FONT);
  text_at(out, 20 + PLOT_LEFT, 34, "font-size=\"21\" font-weight=\"700\" fill=\"#111\"", chart->title);
  if (chart->subtitle) text_at(out, 20 + PLOT_LEFT, 56, "font-size=\"12.5\" fill=\"#555\"", chart->subtitle);

  /* Legend: one entry per distinct series name, in first-seen order. */
  double lx = 20 + PLOT_LEFT;
  const char *seen[16];
  int seen_count = 0;
  fputs("<g class=\"legend\">\n", out);
  for (int p = 0; p < chart->panel_count; p++)
    for (int i = 0; i < chart->panels[p].series_count; i++) {
      const struct chart_series *series = &chart->panels[p].series[i];
      bool known = false;
      for (int k = 0; k < seen_count; k++) known |= strcmp(seen[k], series->name) == 0;
      if (known || seen_count == 16) continue;
      seen[seen_count++] = series->name;
      fprintf(out, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"78\" y2=\"78\" stroke=\"%s\" stroke-width=\"%s\"%s/>\n", lx,
              lx + 22, series->color, series->dashed ? "1.6" : "2.4", series->dashed ? " stroke-dasharray=\"5 4\"" : "");
      text_at(out, lx + 28, 82, "font-size=\"12.5\" fill=\"#333\"", series->name);
      lx += 28 + 8.0 * (double)strlen(series->name) + 22;
    }
  bool any_hollow = false;
  for (int p = 0; p < chart->panel_count; p++)
    for (int i = 0; i < chart->panels[p].series_count; i++)
      for (int k = 0; k < chart->panels[p].series[i].count && chart->panels[p].series[i].hollow; k++)
        any_hollow |= chart->panels[p].series[i].hollow[k];
  if (any_hollow)
    text_at(out, lx + 6, 82, "font-size=\"11.5\" fill=\"#777\"",
            "hollow point: noisy, or under 95 % of the working set on that page kind (not a clean measurement)");
  fputs("</g>\n", out);

  for (int p = 0; p < chart->panel_count; p++)
    draw_panel(out, chart, &chart->panels[p], 10 + (p % COLUMNS) * PANEL_WIDTH, header + (p / COLUMNS) * PANEL_HEIGHT);

  if (chart->footnote && *chart->footnote) {
    double y = header + rows * PANEL_HEIGHT + 12;
    const char *line = chart->footnote;
    while (*line) {
      size_t length = strcspn(line, "\n");
      char text[512];
      snprintf(text, sizeof text, "%.*s", (int)(length < sizeof text ? length : sizeof text - 1), line);
      text_at(out, 20 + PLOT_LEFT, y, "font-size=\"11.5\" fill=\"#666\"", text);
      y += 16;
      line += length;
      if (*line) line++;
    }
  }
  fputs("</svg>\n", out);
  fflush(out);
  return ferror(out) ? -EIO : 0;
}
