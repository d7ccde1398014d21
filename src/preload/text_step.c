/* text_step.c - the preload's text step: hugify_remap_text() with the HUGIFY_TEXT_* options, before main.
 * Never fails the host: whatever could not be moved stays where it was (the remap guarantees that), each
 * segment that had a window and was not moved is recorded as a fallback for the exit report (and, with
 * HUGIFY_VERBOSE=1, one line on stderr), and with HUGIFY_VERBOSE=1 one summary line says what moved and
 * notes the rest (no anonymous memory names, perf map problems). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

void preload_text_step(const struct hugify_options *options) {
  struct hugify_text_opts opts = {
      .flags = (options->text_main_only ? HUGIFY_TEXT_MAIN_ONLY : 0) | (options->perf_map ? HUGIFY_TEXT_PERF_MAP : 0),
      .kind = options->text_hugetlb ? HUGIFY_PAGE_2M : HUGIFY_PAGE_THP,
      .min_size = options->text_min_size,
      .include = options->text_include,
      .exclude = options->text_exclude,
  };
  struct hugify_text_report report;
  text_inject_failure(options->text_fail_step);
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
