/* SPDX-License-Identifier: MIT */
/* cmd_collapse.c - hugify collapse: put a running process's anonymous memory on huge pages now
 * (hugify_collapse: process_madvise + MADV_COLLAPSE in bounded chunks). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "os.h"
#include "hugify.h"
#include "inspect.h"
#include "procfs.h"
#include "units.h"

struct collapse_args {
  uint64_t min_size, chunk_size;
  int pace; /* enum hugify_collapse_pace: the index in pace_names */
  bool dry_run, override_opt_out;
  struct json_output json;
};

static const char *const pace_names[] = {"gentle", "full", NULL}; /* enum hugify_collapse_pace */

static const struct option_spec collapse_options[] = {
    OPT_GROUP("Options"),
    OPT_SIZE("min-size", struct collapse_args, min_size, "SIZE", 0,
             "only mappings with at least SIZE in aligned huge-page (PMD) windows (default: one)"),
    OPT_ENUM("pace", struct collapse_args, pace, "gentle|full", pace_names,
             "gentle (default): one PMD window (2 MiB on x86-64) per call, each call followed by a rest as long as\n"
             "its CPU time, so the process never waits for more than one window at a time;\n"
             "full: calls of --chunk back to back, the least wall time, longer stalls"),
    OPT_SIZE("chunk", struct collapse_args, chunk_size, "SIZE", 1,
             "with --pace full: at most SIZE per kernel call, at least one PMD (default 64M; implies\n"
             "--pace full)"),
    OPT_FLAG("dry-run", 0, struct collapse_args, dry_run, "show what would be collapsed; change nothing"),
    OPT_FLAG("override-opt-out", 0, struct collapse_args, override_opt_out,
             "collapse memory the program excluded anyway, where the kernel allows it ('disabled\n"
             "except where advised', THPeligible: 0); it refuses MADV_NOHUGEPAGE and THP-disabled ones"),
    OPT_JSON(struct collapse_args, json,
             "JSON on stdout instead of the text (schema hugify.collapse/1: docs/collapse.md);\n"
             "--json=FILE: the text on stdout and the JSON to FILE"),
    OPT_END,
};

const struct command_help help_collapse = {
    "usage: hugify collapse PID [--min-size SIZE] [--pace gentle|full] [--chunk SIZE] [--dry-run]\n"
    "                           [--override-opt-out] [--json[=FILE]]\n"
    "\n"
    "Put the existing anonymous memory of a running process on transparent huge pages now, without\n"
    "restarting it: process_madvise(pidfd, ranges, MADV_COLLAPSE) over its eligible mappings (private\n"
    "anonymous, writable, at least one 2 MiB-aligned 2 MiB window, not MADV_NOHUGEPAGE, not hugetlb).\n"
    "Windows already huge, or with more empty pages than khugepaged/max_ptes_none allows, are left alone.\n"
    "Each window is copied while the process's page faults wait, so by default the work is paced: one\n"
    "window per kernel call, a huge page faulted in and freed by hugify right before each call (on a VM\n"
    "that backs memory lazily this makes the copy ~10x shorter), and a rest after each call as long as\n"
    "its CPU time. The process is then held up for one window's copy at a time (about 0.5-5 ms), never\n"
    "several in a row. Measured on Redis under load (docs/collapse.md): worst request 9.6 ms instead of\n"
    "73-82 ms, at 1.2x the wall time of --pace full and no more CPU.\n"
    "Prints coverage before and after per mapping and in total, what the collapse cost the process (the\n"
    "longest and p99 pause its threads felt, inferred from their schedstat; the memory added, i.e. bloat;\n"
    "the CPU spent), and every range the kernel refused with its reason. Works in THP mode 'madvise' and\n"
    "'never' too (MADV_COLLAPSE ignores the mode).\n"
    "Memory the program excluded from THP is skipped and listed: THP disabled for the process (prctl\n"
    "PR_SET_THP_DISABLE, also 'except where advised'), MADV_NOHUGEPAGE, and THPeligible: 0 while a THP size\n"
    "is 'always'. 'Disabled except where advised' shows only while some THP size is 'always' (docs/agent.md).\n"
    "\n",
    collapse_options,
    "\n"
    "Needs: Linux 6.1+ (MADV_COLLAPSE), ptrace read access to the process (its user, or root) and\n"
    "CAP_SYS_NICE (root, or: setcap cap_sys_nice,cap_sys_ptrace+ep $(command -v hugify)).\n"
    "\n"
    "Examples:\n"
    "  hugify collapse 1234                   collapse everything eligible in process 1234\n"
    "  hugify collapse 1234 --dry-run         what would be collapsed, and current coverage\n"
    "  hugify collapse 1234 --min-size 64M    only big mappings\n"
    "  hugify collapse 1234 --pace full       as fast as possible (a process that can wait)\n"
    "  hugify collapse 1234 --override-opt-out  also what the program excluded, where the kernel allows it\n"
    "  hugify inspect 1234                    see coverage, and why memory is not huge, before and after\n"
    "\n"
    "Exit status: 0 done; 1 some ranges failed, the process exited mid-way, no such process, or nothing was\n"
    "tried because the program excluded it all from THP; 2 bad usage; 3 not permitted, or the kernel lacks\n"
    "MADV_COLLAPSE / process_madvise.\n",
};

static void show_progress(void *context, uint64_t done, uint64_t total) {
  (void)context;
  char a[32], b[32];
  format_bytes(done, a, sizeof a);
  format_bytes(total, b, sizeof b);
  progress(done >= total, "collapsing: %s of %s", a, b);
}

static void coverage(const char *label, uint64_t huge, uint64_t resident) {
  char h[32], r[32], p[32];
  format_bytes(huge, h, sizeof h);
  format_bytes(resident, r, sizeof r);
  format_percent(huge, resident, p, sizeof p);
  printf("  %-7s %s on huge pages of %s resident (%s)\n", label, h, r, p);
}

/* The harm ledger: what the collapse cost the process (pause, memory added, CPU). */
static void print_harm(const struct hugify_collapse_report *r, const char *pace) {
  char bloat[32];
  format_bytes(r->bloat_bytes, bloat, sizeof bloat);
  printf("  pace:   %s", pace);
  if (r->pace == HUGIFY_COLLAPSE_PACE_GENTLE) printf(" (rests %.3f s in total)", r->gap_seconds);
  printf("\n  cost:   ");
  if (r->self) printf("pause not measured (own memory)");
  else if (r->pause_count == 0) printf("no pause: no thread of the process was running");
  else
    printf("longest pause %.1f ms, p99 %.1f ms (%u calls while it ran, %.3f s in total; an upper bound, from its "
           "threads' schedstat)", r->longest_pause * 1e3, r->p99_pause * 1e3, r->pause_count, r->total_pause);
  printf("; memory added %s (bloat); CPU %.3f s\n", bloat, r->cpu_seconds);
}

static void print_text(const struct hugify_collapse_report *r) {
  char attempted[32], eligible[32], seconds_per_gib[32];
  format_bytes(r->attempted, attempted, sizeof attempted);
  format_bytes(r->eligible, eligible, sizeof eligible);
  if (r->attempted) snprintf(seconds_per_gib, sizeof seconds_per_gib, ", %.2f s/GiB",
                             r->seconds / ((double)r->attempted / (double)(UINT64_C(1) << 30)));
  else seconds_per_gib[0] = '\0';
  char pace[64];
  if (r->pace == HUGIFY_COLLAPSE_PACE_GENTLE) snprintf(pace, sizeof pace, "one window per call, paced");
  else snprintf(pace, sizeof pace, "in chunks of %llu MiB", (unsigned long long)(r->chunk_size >> 20));
  if (r->dry_run)
    printf("process %d (%s): dry run: would collapse %s of %s in aligned windows, %s\n",
           (int)r->pid, r->command, attempted, eligible, pace);
  else {
    char failed[32];
    format_bytes(r->failed, failed, sizeof failed);
    printf("process %d (%s): tried %s of %s in aligned windows, %s failed; %.3f s%s (CPU %.3f s), %u calls, "
           "longest %.3f s\n",
           (int)r->pid, r->command, attempted, eligible, failed, r->seconds, seconds_per_gib, r->cpu_seconds,
           r->calls, r->longest_call);
    print_harm(r, pace);
  }
  coverage("before:", r->huge_before, r->resident_before);
  if (!r->dry_run && !r->exited) coverage("after:", r->huge_after, r->resident_after);
  if (r->mapping_count == 0 && r->exclusion_count == 0)
    printf("  nothing eligible (private anonymous writable memory, or shared memory placed on a 2 MiB boundary, "
           "with >= one aligned 2 MiB window)\n");

  if (r->mapping_count) {
    static const char *const headers[] = {"mapping", "eligible", "tried", "empty", "failed", "before", "after", "path"};
    static const bool right[] = {false, true, true, true, true, true, true, false};
    struct table t;
    table_init(&t, 8, headers, right);
    for (size_t i = 0; i < r->mapping_count; i++) {
      const struct hugify_collapse_mapping *m = &r->mappings[i];
      char range[48], e[32], a[32], s[32], f[32], before[32], after[32];
      snprintf(range, sizeof range, "%llx-%llx", (unsigned long long)m->start, (unsigned long long)m->end);
      format_bytes(m->eligible, e, sizeof e);
      format_bytes(m->attempted, a, sizeof a);
      format_bytes(m->skipped_empty, s, sizeof s);
      format_bytes(m->failed, f, sizeof f);
      format_percent(m->huge_before, m->resident_before, before, sizeof before);
      if (r->dry_run || r->exited) snprintf(after, sizeof after, "-");
      else format_percent(m->huge_after, m->resident_after, after, sizeof after);
      table_row(&t, range, e, a, s, f, before, after, m->path[0] ? m->path : "[anon]");
    }
    putchar('\n');
    table_print(&t, stdout, "  ");
    table_free(&t);
    printf("  (before/after: share of the mapping's resident memory on huge pages, from smaps)\n");
  }
  if (r->exclusion_count) {
    printf("\n  excluded from THP by the program (%s):\n",
           r->override_opt_out ? "--override-opt-out: collapsed anyway where the kernel allows it"
                               : "skipped; --override-opt-out collapses what the kernel allows");
    bool seen[HUGIFY_WHY_COUNT] = {false};
    for (size_t i = 0; i < r->exclusion_count; i++) {
      const struct hugify_collapse_exclusion *e = &r->exclusions[i];
      char size[32];
      format_bytes(e->eligible, size, sizeof size);
      printf("    %llx-%llx %8s  %-18s %s%s\n", (unsigned long long)e->start, (unsigned long long)e->end, size,
             hugify_not_huge_reason_name(e->why), e->path[0] ? e->path : "[anon]",
             e->overridden ? " (overridden)" : "");
      seen[e->why] = true;
    }
    for (int why = 0; why < HUGIFY_WHY_COUNT; why++)
      if (seen[why]) printf("    %s: %s\n", hugify_not_huge_reason_name(why), hugify_not_huge_reason_text(why));
  }
  if (r->failure_count) {
    printf("\n  failed ranges:\n");
    for (size_t i = 0; i < r->failure_count; i++) {
      const struct hugify_collapse_failure *f = &r->failures[i];
      char size[32];
      format_bytes(f->end - f->start, size, sizeof size);
      printf("    %llx-%llx (%s) %s\n", (unsigned long long)f->start, (unsigned long long)f->end, size, f->reason);
    }
  }
  if (r->reason[0]) printf("  note: %s\n", r->reason);
}

/* What stands between the shared memory and huge pages, and the exact change that removes it. */
static void explain_shmem(const struct hugify_collapse_report *r, FILE *out) {
  char bytes[32];
  if (r->shmem_denied) {
    format_bytes(r->shmem_denied, bytes, sizeof bytes);
    fprintf(out, "hugify collapse: %s of shared memory cannot go on huge pages: shmem_enabled is 'deny'. Fix: echo "
            "advise > " OS_SYSFS_THP "/shmem_enabled, then restart the program (under `hugify run` its shared memory "
            "is huge from the start)\n", bytes);
  }
  if (r->shmem_unaligned) {
    format_bytes(r->shmem_unaligned, bytes, sizeof bytes);
    bool never = strcmp(r->shmem_mode, "never") == 0;
    fprintf(out, "hugify collapse: %s of shared memory cannot go on huge pages, now or later: it was mapped %s, so "
            "the kernel did not place it on a 2 MiB boundary. Fix: %srestart the program (the kernel then places "
            "it so that it can be huge), or restart it under `hugify run`, which places it so whatever the setting\n",
            bytes, never ? "while shmem_enabled is 'never'" : "before shmem_enabled allowed huge pages",
            never ? "echo advise > " OS_SYSFS_THP "/shmem_enabled, then " : "");
  }
}

/* The harm ledger's time figures: the calls, the pace's rests and the pause the target felt. */
static void put_time_costs(struct json_writer *j, const struct hugify_collapse_report *r) {
  json_put_double(j, "seconds", r->seconds);
  json_put_double(j, "cpu_seconds", r->cpu_seconds);
  json_put_double(j, "longest_call_seconds", r->longest_call);
  json_put_string(j, "pace", r->pace == HUGIFY_COLLAPSE_PACE_GENTLE ? "gentle" : "full");
  json_put_double(j, "gap_seconds", r->gap_seconds);
  json_open_object(j, "pause");
  json_put_bool(j, "measured", !r->self && !r->dry_run);
  json_put_u64(j, "count", r->pause_count);
  json_put_double(j, "longest_seconds", r->longest_pause);
  json_put_double(j, "p99_seconds", r->p99_pause);
  json_put_double(j, "total_seconds", r->total_pause);
  json_close(j);
}

static void put_total(struct json_writer *j, const struct hugify_collapse_report *r) {
  json_open_object(j, "total");
  json_put_u64(j, "eligible_bytes", r->eligible);
  json_put_u64(j, "attempted_bytes", r->attempted);
  json_put_u64(j, "skipped_empty_bytes", r->skipped_empty);
  json_put_u64(j, "failed_bytes", r->failed);
  json_put_u64(j, "excluded_bytes", r->excluded);
  json_put_u64(j, "resident_before_bytes", r->resident_before);
  json_put_u64(j, "huge_before_bytes", r->huge_before);
  json_put_u64(j, "resident_after_bytes", r->resident_after);
  json_put_u64(j, "huge_after_bytes", r->huge_after);
  json_put_u64(j, "bloat_bytes", r->bloat_bytes); /* zero-filled inside new huge pages (collapse_window_bloat) */
  json_put_fraction(j, "huge_before_fraction", r->huge_before, r->resident_before);
  if (r->dry_run || r->exited) json_put_null(j, "huge_after_fraction");
  else json_put_fraction(j, "huge_after_fraction", r->huge_after, r->resident_after);
  json_close(j);
}

/* The per-range lists: mappings, exclusions and failures. */
static void put_ranges(struct json_writer *j, const struct hugify_collapse_report *r) {
  json_open_array(j, "mappings");
  for (size_t i = 0; i < r->mapping_count; i++) {
    const struct hugify_collapse_mapping *m = &r->mappings[i];
    json_open_object(j, NULL);
    json_put_hex(j, "start", m->start);
    json_put_hex(j, "end", m->end);
    json_put_string(j, "path", m->path);
    json_put_u64(j, "eligible_bytes", m->eligible);
    json_put_u64(j, "attempted_bytes", m->attempted);
    json_put_u64(j, "skipped_empty_bytes", m->skipped_empty);
    json_put_u64(j, "failed_bytes", m->failed);
    json_put_u64(j, "resident_before_bytes", m->resident_before);
    json_put_u64(j, "huge_before_bytes", m->huge_before);
    json_put_u64(j, "resident_after_bytes", m->resident_after);
    json_put_u64(j, "huge_after_bytes", m->huge_after);
    json_close(j);
  }
  json_close(j);
  json_open_array(j, "excluded");
  for (size_t i = 0; i < r->exclusion_count; i++) {
    const struct hugify_collapse_exclusion *e = &r->exclusions[i];
    json_open_object(j, NULL);
    json_put_hex(j, "start", e->start);
    json_put_hex(j, "end", e->end);
    json_put_string(j, "path", e->path);
    json_put_u64(j, "eligible_bytes", e->eligible);
    json_put_u64(j, "resident_bytes", e->resident);
    json_put_string(j, "reason", hugify_not_huge_reason_name(e->why));
    json_put_bool(j, "overridden", e->overridden);
    json_close(j);
  }
  json_close(j);
  json_open_array(j, "failures");
  for (size_t i = 0; i < r->failure_count; i++) {
    const struct hugify_collapse_failure *f = &r->failures[i];
    json_open_object(j, NULL);
    json_put_hex(j, "start", f->start);
    json_put_hex(j, "end", f->end);
    json_put_u64(j, "size_bytes", f->end - f->start);
    json_put_i64(j, "errno", f->error);
    json_put_string(j, "reason", f->reason);
    json_close(j);
  }
  json_close(j);
}

static void print_json(FILE *out, const struct hugify_collapse_report *r) {
  struct json_writer j;
  json_begin(&j, out, "hugify.collapse/1");
  json_put_i64(&j, "pid", r->pid);
  json_put_string(&j, "command", r->command);
  json_put_bool(&j, "dry_run", r->dry_run);
  json_put_bool(&j, "exited", r->exited);
  if (r->thp_disabled < 0) json_put_null(&j, "thp_disabled");
  else json_put_bool(&j, "thp_disabled", r->thp_disabled == 1);
  json_put_string(&j, "thp_stance", hugify_thp_stance_name(r->thp_stance));
  json_put_bool(&j, "thp_stance_visible", r->thp_stance_visible);
  json_put_bool(&j, "override_opt_out", r->override_opt_out);
  put_time_costs(&j, r);
  json_put_string(&j, "shmem_enabled", r->shmem_mode[0] ? r->shmem_mode : NULL);
  json_put_u64(&j, "shmem_unaligned_bytes", r->shmem_unaligned);
  json_put_u64(&j, "shmem_denied_bytes", r->shmem_denied);
  json_put_u64(&j, "calls", r->calls);
  json_put_u64(&j, "chunk_bytes", r->chunk_size);
  put_total(&j, r);
  put_ranges(&j, r);
  json_put_string(&j, "note", r->reason);
  json_end(&j);
}

int cmd_collapse(int argc, char **argv) {
  struct collapse_args args = {0};
  struct option_result parsed;
  if (parse_command_options("collapse", collapse_options, OPTIONS_ANYWHERE, argc, argv, &args, &parsed) != EXIT_DONE)
    return EXIT_USAGE;
  if (parsed.operand_count > 1) return usage_error("collapse", "one process at a time ('%s' is extra)", argv[parsed.operands[1]]);
  uint64_t pid = 0;
  if (parsed.operand_count == 1 && !parse_count(argv[parsed.operands[0]], 1, 0x7fffffff, &pid))
    return usage_error("collapse", "'%s' is not a process id", argv[parsed.operands[0]]);
  bool pace_given = option_table_given(collapse_options, &parsed, "pace");
  if (args.chunk_size && pace_given && args.pace == HUGIFY_COLLAPSE_PACE_GENTLE)
    return usage_error("collapse", "--chunk sets the call size of --pace full; the gentle pace sends one PMD "
                                   "window per call");
  if (args.chunk_size && args.chunk_size < hugify_pmd_size())
    return usage_error("collapse", "--chunk must hold one huge page at least: %llu MiB here (the PMD size)",
                       (unsigned long long)(hugify_pmd_size() >> 20));
  if (args.chunk_size) args.pace = HUGIFY_COLLAPSE_PACE_FULL;
  struct hugify_collapse_opts opts = {
      .min_size = args.min_size, .chunk_size = args.chunk_size, .pace = (uint32_t)args.pace,
      .flags = (args.dry_run ? HUGIFY_COLLAPSE_DRY_RUN : 0u) | (args.override_opt_out ? HUGIFY_COLLAPSE_OVERRIDE_OPT_OUT : 0u)};
  struct json_output json = args.json;
  if (pid == 0) return usage_error("collapse", "which process? Give its PID");
  bool text = json_output_text(&json);
  if (text) opts.progress = show_progress;
  FILE *out = json_output_open(&json, "collapse");
  if (json.wanted && !out) return EXIT_USAGE;

  struct hugify_collapse_report report;
  int rc = hugify_collapse((pid_t)pid, &opts, &report);
  if (rc != 0) {
    int code = exit_code_for(rc);
    fail(code, "collapse", "%s", report.reason[0] ? report.reason : strerror(-rc));
    hugify_collapse_report_free(&report);
    json_output_close(out, &json, "collapse");
    return code;
  }
  if (text) print_text(&report);
  explain_shmem(&report, stderr);
  int status = EXIT_DONE;
  if (out) {
    print_json(out, &report);
    if (!json_output_close(out, &json, "collapse")) status = EXIT_SHORT;
  }
  if (report.exited) status = fail(EXIT_SHORT, "collapse", "process %d exited during the collapse", (int)pid);
  else if (report.failed) status = EXIT_SHORT;
  else if (report.attempted == 0 && report.shmem_unaligned + report.shmem_denied > 0)
    status = EXIT_PRIVILEGE; /* nothing could be done, for lack of a setting (said above) */
  else if (report.attempted == 0 && report.excluded > 0 && report.huge_before > 0) {
    /* What could be collapsed already is: the exclusions (thread stacks, a guard) are not why nothing was done */
    char huge[32], excluded[32];
    format_bytes(report.huge_before, huge, sizeof huge);
    format_bytes(report.excluded, excluded, sizeof excluded);
    fprintf(stderr, "hugify collapse: nothing left to collapse: %s of process %d's memory is already on huge pages; "
                    "it excluded %s from THP (listed)\n",
            huge, (int)pid, excluded);
  } else if (report.attempted == 0 && report.excluded > 0) {
    char excluded[32];
    format_bytes(report.excluded, excluded, sizeof excluded);
    bool overridable = false;
    for (size_t i = 0; i < report.exclusion_count; i++)
      overridable |= !report.exclusions[i].overridden && opt_out_overridable(report.exclusions[i].why);
    /* 1, not 3: nothing is missing from the machine or the caller; the program's own decision was kept */
    status = fail(EXIT_SHORT, "collapse", "nothing %s: process %d excluded %s of its memory from THP (listed)%s",
                  report.dry_run ? "would be collapsed" : "collapsed", (int)pid, excluded,
                  overridable ? "; --override-opt-out collapses it anyway"
                              : "; the kernel refuses MADV_COLLAPSE for it too, so only the program can change that");
  }
  hugify_collapse_report_free(&report);
  return status;
}
