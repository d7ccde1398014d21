/* SPDX-License-Identifier: MIT */
/* collapse.c - hugify_collapse: the existing anonymous memory of this or another process onto THP now,
 * with MADV_COLLAPSE (madvise for the caller, process_madvise through a pidfd for another process).
 *
 * The plan is made per 2 MiB window from smaps (which mappings) and one walk of the target's pagemap per
 * mapping (which windows hold pages, which are huge already: PAGEMAP_SCAN on 6.7+, else the pagemap
 * entries and, as root, kpageflags; os_walk_windows). These are the signals; which windows go, in which
 * order, is the planner's (planner.h), and this file executes its plan. Windows go to the kernel one per call (the gentle pace, below) or in
 * calls of at most chunk_size bytes (the full pace). When a call stops short, the window that failed is
 * found by asking again one window at a time, so every failed range is reported with the kernel's own
 * errno (a one-window call's errno is the window's already).
 *
 * How fast (enum hugify_collapse_pace): each window is copied under the target's mmap lock held for write,
 * and the target's page faults wait (docs/design.md, "What a collapse costs the process it acts on"). The
 * gentle pace, the default, sends one window per call, faults a huge page into this process and frees it
 * right before each call (warm_huge_page), and sleeps after each call as long as its CPU time. Around every
 * call the pause the target felt is read from its threads' schedstat (pause.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "agent_policy.h"
#include "array.h"
#include "collapse.h"
#include "heat.h"
#include "inspect.h"
#include "internal.h"
#include "measure.h"
#include "os.h"
#include "pause.h"
#include "planner.h"
#include "probe.h"
#include "procfs.h"

#define DEFAULT_CHUNK OS_MIB(64)
#define MAX_IOVECS_PER_CALL 512 /* well under UIO_MAXIOV (1024) */
/* The gentle pace's sleep after a call, per second of the call's CPU time: the target gets at least as
 * long to run as a window's work took. Paced by CPU time, not by the call's span, which also holds
 * lru_add_drain_all's sleep that costs the target nothing. Measured on Redis under GET load: with warm
 * pages, 1 gave the same worst request as back to back in less wall time than pacing by span. */
#define GENTLE_GAP_PER_CPU_SECOND 1.0

struct collapse_context {
  const struct hugify_collapse_opts *opts;
  uint64_t done;  /* bytes tried so far, for opts->progress */
  pid_t pid;
  int pidfd;   /* -1 for the caller's own memory */
  uint64_t pmd;
  struct hugify_collapse_report *report;
  size_t failure_cap;
  struct collapse_policy *policy; /* NULL for plain hugify_collapse */
  size_t exclusion_cap;
  bool unadvised_planned; /* a mapping without MADV_HUGEPAGE was planned (see the note on unseen opt-outs) */
  struct agent_window *planned;   /* the planned windows in address order, with their present pages */
  size_t planned_count;
  uint64_t page;
  bool gentle;                    /* HUGIFY_COLLAPSE_PACE_GENTLE */
  double gap_owed;                /* seconds to sleep before the next call (the gentle pace) */
  struct pause_probe probe;       /* another process's threads, for the pause of each call */
  bool probing;
  double *pauses;                 /* each measured call's pause (malloc'd), for the report's p99 */
  size_t pause_count, pause_cap;
  bool layout_fresh;              /* the mappings were read from smaps for this plan (not the layout's) */
  uint64_t cursor_in;             /* the sweep's cursor this plan started from */
  bool slicing;                   /* a sweep: the plan walked part of the process */
  uint64_t slice_end;             /* where its walk from the cursor stopped (UINT64_MAX: the end) */
  uint64_t resume_from;           /* the first window of the slice that was planned and not tried, or held
                                     back (cold, probe, budget): the next plan goes on there (UINT64_MAX: none) */
};

uint64_t collapse_window_bloat(uint32_t present_pages, uint64_t window_bytes, uint64_t page_bytes) {
  uint64_t present = (uint64_t)present_pages * page_bytes;
  return present < window_bytes ? window_bytes - present : 0;
}

static int compare_window_start(const void *key, const void *element) {
  uint64_t start = *(const uint64_t *)key, other = ((const struct agent_window *)element)->start;
  return start < other ? -1 : start > other;
}

/* The kernel made [start, start + length) huge: count its bloat, and tell the agent's ledger. */
static void collapsed(struct collapse_context *c, uint64_t start, uint64_t length) {
  for (uint64_t at = start; at < start + length; at += c->pmd) {
    const struct agent_window *w = c->planned_count ? bsearch(&at, c->planned, c->planned_count, sizeof *c->planned,
                                                              compare_window_start) : NULL; /* NULL: nothing planned */
    if (w) c->report->bloat_bytes += collapse_window_bloat(w->present_pages, c->pmd, c->page);
    if (c->policy && c->policy->ledger) agent_ledger_collapsed(c->policy->ledger, c->policy->pass, at);
  }
}

/* The budget's word before a call into the kernel. */
static bool may_continue(struct collapse_context *c) {
  if (!c->policy || !c->policy->keep_going || c->policy->keep_going(c->policy->context)) return true;
  c->policy->stopped = true;
  return false;
}

void hugify_collapse_report_free(struct hugify_collapse_report *report) {
  if (!report) return;
  free(report->mappings);
  free(report->failures);
  free(report->exclusions);
  report->mappings = NULL;
  report->failures = NULL;
  report->exclusions = NULL;
  report->mapping_count = report->failure_count = report->exclusion_count = 0;
}

/* Fault a huge page into this process and free it, right before a call: the collapse's allocation (same
 * CPU, its free lists) then likely gets a page the host has backed already, and the copy under the target's
 * write lock does not wait for the host to back a fresh 2 MiB (4.5-4.8 ms instead of 0.5 ms per window on
 * a guest whose memory is backed lazily). One write is enough: the fault zeroes the whole page. The unmap
 * also empties this CPU's LRU batches, so the call's lru_add_drain_all waits less. */
static void warm_huge_page(uint64_t pmd) {
  void *raw;
  if (os_mmap(NULL, 2 * pmd, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &raw) != 0)
    return; /* only a lever: the collapse goes on without it */
  char *aligned = (char *)(((uintptr_t)raw + pmd - 1) & ~(uintptr_t)(pmd - 1));
  os_madvise(aligned, pmd, MADV_HUGEPAGE);
  *(volatile char *)aligned = 1;
  os_munmap(raw, 2 * pmd);
}

static void record_pause(struct collapse_context *c, double start, double end) {
  double pause;
  if (pause_probe_after(&c->probe, start, end, &pause) <= 0) return; /* no thread of the target was busy */
  struct hugify_collapse_report *r = c->report;
  if (c->policy && c->policy->pauses) pause_histogram_add(c->policy->pauses, pause);
  if (ARRAY_GROW(c->pauses, c->pause_count + 1, c->pause_cap) != 0) return;
  c->pauses[c->pause_count++] = pause;
  r->pause_count++;
  r->total_pause += pause;
  if (pause > r->longest_pause) r->longest_pause = pause;
}

/* process_madvise semantics for both cases: the bytes of the leading ranges that were fully advised, or
 * -errno when the first range failed. */
static ssize_t advise(struct collapse_context *c, const struct iovec *ranges, size_t count) {
  double warm_cpu_start = measure_thread_cpu_now();
  if (c->gentle) {
    os_sleep(c->gap_owed);
    c->report->gap_seconds += c->gap_owed > 0 ? c->gap_owed : 0;
    c->gap_owed = 0;
    warm_huge_page(c->pmd);
  }
  if (c->probing) pause_probe_before(&c->probe, measure_now());
  double start = measure_now(), cpu_start = measure_thread_cpu_now();
  ssize_t done;
  if (c->pidfd >= 0) {
    done = os_process_madvise(c->pidfd, ranges, count, MADV_COLLAPSE);
  } else {
    done = 0;
    for (size_t i = 0; i < count; i++) {
      int rc = os_madvise(ranges[i].iov_base, ranges[i].iov_len, MADV_COLLAPSE);
      if (rc != 0) {
        if (done == 0) done = rc;
        break;
      }
      done += (ssize_t)ranges[i].iov_len;
    }
  }
  double end = measure_now(), took = end - start, cpu = measure_thread_cpu_now() - cpu_start;
  if (c->probing) record_pause(c, start, end);
  if (c->gentle) c->gap_owed = GENTLE_GAP_PER_CPU_SECOND * cpu;
  /* the CPU spent includes the warm page: on a lazily backed guest its first touch costs what the copy
   * no longer does under the target's lock */
  c->report->cpu_seconds += measure_thread_cpu_now() - warm_cpu_start;
  c->report->seconds += took;
  if (took > c->report->longest_call) c->report->longest_call = took;
  c->report->calls++;
  for (size_t i = 0; i < count; i++) c->done += ranges[i].iov_len;
  if (c->done > c->report->attempted) c->done = c->report->attempted; /* retries count once */
  if (c->opts->progress) c->opts->progress(c->opts->progress_context, c->done, c->report->attempted);
  return done;
}

static const char *errno_name(int error) {
  switch (error) {
  case EAGAIN: return "EAGAIN";
  case ENOMEM: return "ENOMEM";
  case EBUSY: return "EBUSY";
  case EINVAL: return "EINVAL";
  case EPERM: return "EPERM";
  case EACCES: return "EACCES";
  case ESRCH: return "ESRCH";
  case EFAULT: return "EFAULT";
  default: return "error";
  }
}

static void describe_failure(int error, int thp_disabled, char *out, size_t cap) {
  const char *text;
  switch (error) {
  case EAGAIN: text = "a page was busy (locked, pinned or being migrated); trying again may work"; break;
  case ENOMEM: text = "no free huge page could be had (memory short or fragmented; try "
                      "'echo 1 > /proc/sys/vm/compact_memory'), or the range is no longer mapped"; break;
  case EBUSY: text = "the memory cgroup could not be charged for the huge page (the target's cgroup is at its "
                     "limit: memory.max, or v1's memory.limit_in_bytes; nothing is OOM-killed for it)"; break;
  case EINVAL:
    text = thp_disabled ? "the process disabled THP (prctl PR_SET_THP_DISABLE): the kernel refuses MADV_COLLAPSE"
                        : "the kernel refused the range (no longer eligible: remapped, or marked "
                          "MADV_NOHUGEPAGE, during the collapse)";
    break;
  default: text = strerror(error); break;
  }
  snprintf(out, cap, "%s: %s", errno_name(error), text);
}

/* Record a failed window; a window right after the last failure with the same errno extends it. */
static int add_failure(struct collapse_context *c, uint64_t start, uint64_t end, int error) {
  struct hugify_collapse_report *r = c->report;
  if (r->failure_count > 0) {
    struct hugify_collapse_failure *last = &r->failures[r->failure_count - 1];
    if (last->end == start && last->error == error) { last->end = end; return 0; }
  }
  if (ARRAY_GROW(r->failures, r->failure_count + 1, c->failure_cap) != 0) return -ENOMEM;
  struct hugify_collapse_failure *f = &r->failures[r->failure_count++];
  memset(f, 0, sizeof *f);
  f->start = start;
  f->end = end;
  f->error = error;
  describe_failure(error, r->thp_disabled == 1, f->reason, sizeof f->reason);
  return 0;
}

static struct hugify_collapse_mapping *mapping_of(struct hugify_collapse_report *r, uint64_t address) {
  for (size_t i = 0; i < r->mapping_count; i++)
    if (address >= r->mappings[i].start && address < r->mappings[i].end) return &r->mappings[i];
  return NULL;
}

/* The kernel refused the window at `at` with `error`: a failure of the report and of its mapping. */
static int window_failed(struct collapse_context *c, uint64_t at, int error) {
  if (add_failure(c, at, at + c->pmd, error) != 0) return -ENOMEM;
  struct hugify_collapse_mapping *m = mapping_of(c->report, at);
  if (m) m->failed += c->pmd;
  return 0;
}

/* Retry a range window by window, recording each window the kernel refuses. Returns -ESRCH when the
 * target is gone, else 0. */
static int retry_by_window(struct collapse_context *c, const struct iovec *range) {
  uint64_t start = (uint64_t)(uintptr_t)range->iov_base, end = start + range->iov_len;
  for (uint64_t at = start; at < end; at += c->pmd) {
    if (!may_continue(c)) return 0;
    struct iovec window = {(void *)(uintptr_t)at, (size_t)c->pmd};
    ssize_t done = advise(c, &window, 1);
    if (done == (ssize_t)c->pmd) { collapsed(c, at, c->pmd); continue; }
    int error = done < 0 ? (int)-done : EIO;
    if (error == ESRCH) return -ESRCH;
    if (window_failed(c, at, error) != 0) return -ENOMEM;
  }
  return 0;
}

/* The budget ended the pass: the ranges left were planned but not asked for. */
static void untried(struct collapse_context *c, const struct iovec *ranges, size_t count) {
  for (size_t i = 0; i < count; i++) {
    uint64_t start = (uint64_t)(uintptr_t)ranges[i].iov_base;
    if (start >= c->cursor_in && start < c->slice_end && start < c->resume_from) c->resume_from = start;
    for (uint64_t at = start; at < start + ranges[i].iov_len; at += c->pmd) {
      struct hugify_collapse_mapping *m = mapping_of(c->report, at);
      if (m) m->attempted -= c->pmd;
    }
    c->report->attempted -= ranges[i].iov_len;
  }
}

/* Advise all ranges, at most chunk bytes and MAX_IOVECS_PER_CALL ranges per call. Ranges are windows or
 * runs of windows no longer than chunk. Returns 0, -ESRCH (target gone) or -ENOMEM. */
static int run_ranges(struct collapse_context *c, const struct iovec *ranges, size_t count, uint64_t chunk) {
  size_t next = 0;
  while (next < count) {
    size_t n = 0;
    uint64_t bytes = 0;
    while (next + n < count && n < MAX_IOVECS_PER_CALL && bytes + ranges[next + n].iov_len <= chunk) {
      bytes += ranges[next + n].iov_len;
      n++;
    }
    if (n == 0) n = 1, bytes = ranges[next].iov_len; /* cannot happen: ranges are split to <= chunk */
    if (!may_continue(c)) {
      untried(c, &ranges[next], count - next);
      return 0;
    }
    ssize_t done = advise(c, &ranges[next], n);
    if (done == (ssize_t)bytes) {
      for (size_t i = next; i < next + n; i++) collapsed(c, (uint64_t)(uintptr_t)ranges[i].iov_base, ranges[i].iov_len);
      next += n;
      continue;
    }
    if (done == -ESRCH) return -ESRCH;
    if (done < 0 && ranges[next].iov_len == c->pmd) {
      /* the first range, one window, failed with this errno: asking again would only repeat it */
      if (window_failed(c, (uint64_t)(uintptr_t)ranges[next].iov_base, (int)-done) != 0) return -ENOMEM;
      next++;
      continue;
    }
    /* The range at which the kernel stopped failed; the ones after it were not tried. */
    size_t failed = next;
    for (uint64_t covered = done > 0 ? (uint64_t)done : 0; failed + 1 < next + n && covered >= ranges[failed].iov_len;) {
      collapsed(c, (uint64_t)(uintptr_t)ranges[failed].iov_base, ranges[failed].iov_len);
      covered -= ranges[failed++].iov_len;
    }
    int rc = retry_by_window(c, &ranges[failed]);
    if (rc) return rc;
    next = failed + 1;
  }
  return 0;
}

/* Sum Rss and AnonHugePages (ShmemPmdMapped for shared memory) of the vmas overlapping [start, end), prorated where they overlap partly. */
static void measure(const struct smaps_vma *vmas, long count, uint64_t start, uint64_t end, uint64_t *resident,
                    uint64_t *huge) {
  double rss = 0, thp = 0;
  for (long i = 0; i < count; i++) {
    uint64_t lo = vmas[i].start > start ? vmas[i].start : start, hi = vmas[i].end < end ? vmas[i].end : end;
    if (lo >= hi || vmas[i].size == 0) continue;
    double share = lo == vmas[i].start && hi == vmas[i].end ? 1.0 : (double)(hi - lo) / (double)vmas[i].size;
    rss += share * (double)vmas[i].rss;
    thp += share * (double)(vmas[i].anon_huge + vmas[i].shmem_pmd_mapped); /* one of them is 0 */
  }
  *resident = (uint64_t)rss;
  *huge = (uint64_t)thp;
}

static bool still_mapped(const struct smaps_vma *vmas, long count, uint64_t start, uint64_t end) {
  for (long i = 0; i < count && start < end; i++)
    if (vmas[i].start <= start && vmas[i].end > start) start = vmas[i].end;
  return start >= end;
}

#define CAPABILITY_SYS_NICE 23

/* True when the caller's effective set holds capability `bit` (false when unreadable). */
static bool own_capability(unsigned bit) {
  char status[4096];
  uint64_t effective;
  return os_read_small("/proc/self/status", status, sizeof status) > 0 && parse_capabilities(status, &effective) &&
         (effective >> bit & 1);
}

/* Check that we may collapse pid at all, before reading anything: a zero-length process_madvise does every
 * check the real call does (process exists, ptrace read access, CAP_SYS_NICE, advice allowed remotely). */
static int check_target(struct collapse_context *c, struct hugify_collapse_report *r, bool dry_run) {
  c->pidfd = os_pidfd_open(c->pid);
  if (c->pidfd < 0) {
    int err = -c->pidfd;
    c->pidfd = -1;
    if (err == ESRCH) {
      snprintf(r->reason, sizeof r->reason, "no process %d", (int)c->pid);
      return -ESRCH;
    }
    if (err == ENOSYS) {
      snprintf(r->reason, sizeof r->reason, "pidfd_open: not supported by this kernel (needs Linux 5.3+)");
      return -ENOSYS;
    }
    snprintf(r->reason, sizeof r->reason, "pidfd_open(%d): %s", (int)c->pid, strerror(err));
    return -err;
  }
  ssize_t rc = os_process_madvise(c->pidfd, NULL, 0, MADV_COLLAPSE);
  if (rc == 0) return 0;
  int err = (int)-rc;
  switch (err) {
  case ESRCH: {
    /* a process without memory: a kernel thread (ps shows it in [brackets]) is not one that exited */
    char path[64], stat[1024];
    unsigned long flags;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)c->pid);
    if (os_read_small(path, stat, sizeof stat) > 0 && parse_stat_flags(stat, &flags) && (flags & PROCFS_PF_KTHREAD)) {
      snprintf(r->reason, sizeof r->reason, "process %d is a kernel thread: it has no user memory to collapse",
               (int)c->pid);
      return -EINVAL;
    }
    snprintf(r->reason, sizeof r->reason, "no process %d (it exited)", (int)c->pid);
    return -ESRCH;
  }
  case EACCES:
    snprintf(r->reason, sizeof r->reason,
             "not permitted to collapse process %d: process_madvise needs ptrace read access to it (run as its "
             "user or as root, or grant CAP_SYS_PTRACE) and CAP_SYS_NICE",
             (int)c->pid);
    return -EPERM;
  case EPERM:
    /* The kernel says EPERM both without CAP_SYS_NICE and without ptrace read access to the target: name the
     * one that is missing */
    if (own_capability(CAPABILITY_SYS_NICE))
      snprintf(r->reason, sizeof r->reason,
               "not permitted to collapse process %d: process_madvise needs ptrace read access to it (run as its "
               "user or as root, or grant CAP_SYS_PTRACE)",
               (int)c->pid);
    else
      snprintf(r->reason, sizeof r->reason,
               "not permitted to collapse process %d: process_madvise on another process needs CAP_SYS_NICE (run "
               "as root, or: setcap cap_sys_nice,cap_sys_ptrace+ep $(command -v hugify))",
               (int)c->pid);
    if (dry_run) return 0; /* a dry run can still plan, when smaps is readable */
    return -EPERM;
  case EINVAL:
    snprintf(r->reason, sizeof r->reason,
             "this kernel's process_madvise does not accept MADV_COLLAPSE (needs Linux 6.1+)");
    return -ENOSYS;
  default:
    snprintf(r->reason, sizeof r->reason, "process_madvise(%d): %s", (int)c->pid, strerror(err));
    return -err;
  }
}

static int read_smaps_of(pid_t pid, bool self, struct smaps_vma **vmas, struct hugify_collapse_report *r) {
  long count = os_read_smaps(self ? 0 : pid, vmas);
  if (count >= 0) return (int)count;
  int err = (int)-count;
  if (err == ENOENT || err == ESRCH) {
    snprintf(r->reason, sizeof r->reason, "no process %d", (int)pid);
    return -ESRCH;
  }
  if (err == EACCES || err == EPERM) {
    snprintf(r->reason, sizeof r->reason,
             "not permitted to read /proc/%d/smaps: needs ptrace read access to process %d (its user, or root)",
             (int)pid, (int)pid);
    return -EPERM;
  }
  snprintf(r->reason, sizeof r->reason, "cannot read /proc/%d/smaps: %s", (int)pid, strerror(err));
  return -err;
}

void collapse_layout_free(struct collapse_layout *layout) {
  if (!layout) return;
  free(layout->vmas);
  free(layout->fresh);
  layout->fresh = NULL;
  layout->fresh_count = 0;
  layout->vmas = NULL;
  layout->count = 0;
  layout->maps_hash = 0;
  layout->reuses = 0;
}

/* FNV-1a: /proc/PID/maps' text, to tell whether the mappings changed. */
static uint64_t text_hash(const char *text) {
  uint64_t hash = UINT64_C(14695981039346656037);
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) hash = (hash ^ *p) * UINT64_C(1099511628211);
  return hash;
}

/* What `now` maps that `before` did not (a mapping of a new start, or the part past its old end: a heap that
 * grew), into layout->fresh; nothing on a first read (every window is new then, and the sweep covers it). */
static void note_fresh(struct collapse_layout *layout, const struct smaps_vma *now, long count) {
  free(layout->fresh);
  layout->fresh = NULL;
  layout->fresh_count = 0;
  if (!layout->vmas || count <= 0 || !(layout->fresh = malloc((size_t)count * sizeof *layout->fresh))) return;
  long old = 0;
  for (long i = 0; i < count; i++) { /* both lists are in address order */
    while (old < layout->count && layout->vmas[old].start < now[i].start) old++;
    bool same = old < layout->count && layout->vmas[old].start == now[i].start;
    uint64_t from = same ? layout->vmas[old].end : now[i].start;
    if (from < now[i].end) layout->fresh[layout->fresh_count++] = (struct collapse_range){from, now[i].end};
  }
}

/* The target's mappings: the policy's layout while /proc/PID/maps is what it was at its smaps read, else smaps
 * read again (and kept in the layout, with what it found new). *owned: the caller frees *vmas (false: they
 * are the layout's). */
static long read_mappings(struct collapse_context *c, bool self, struct smaps_vma **vmas, bool *owned) {
  struct collapse_layout *layout = c->policy ? c->policy->layout : NULL;
  *owned = true;
  c->layout_fresh = true;
  if (!layout || probe_pagemap_scan(NULL, 0) != HUGIFY_FEATURE_YES) {
    long count = read_smaps_of(c->pid, self, vmas, c->report);
    if (layout && count >= 0) layout->smaps_reads++;
    return count;
  }
  char path[64], *text = NULL;
  snprintf(path, sizeof path, "/proc/%d/maps", (int)c->pid);
  bool maps_read = os_read_file(path, &text, NULL) == 0;
  uint64_t hash = maps_read ? text_hash(text) : 0;
  free(text);
  if (maps_read && layout->vmas && hash == layout->maps_hash && layout->reuses < COLLAPSE_LAYOUT_REUSES) {
    layout->reuses++;
    layout->fresh_count = 0; /* walked by the plan after the read that found them */
    *vmas = layout->vmas;
    *owned = c->layout_fresh = false;
    return layout->count;
  }
  long count = read_smaps_of(c->pid, self, vmas, c->report);
  if (count < 0) return count;
  note_fresh(layout, *vmas, count);
  free(layout->vmas);
  layout->vmas = *vmas;
  layout->count = count;
  layout->maps_hash = hash;
  layout->reuses = maps_read ? 0 : COLLAPSE_LAYOUT_REUSES; /* maps unreadable: smaps again next time */
  layout->smaps_reads++;
  *owned = false;
  return count;
}

/* Append a range to the list, merging with the previous one when contiguous and the result stays within
 * chunk bytes. */
static int push_range(struct iovec **ranges, size_t *count, size_t *cap, uint64_t start, uint64_t length,
                      uint64_t chunk) {
  if (*count > 0) {
    struct iovec *last = &(*ranges)[*count - 1];
    if ((uint64_t)(uintptr_t)last->iov_base + last->iov_len == start && last->iov_len + length <= chunk) {
      last->iov_len += (size_t)length;
      return 0;
    }
  }
  if (ARRAY_GROW(*ranges, *count + 1, *cap) != 0) return -ENOMEM;
  (*ranges)[(*count)++] = (struct iovec){(void *)(uintptr_t)start, (size_t)length};
  return 0;
}

/* A mapping the program excluded from THP, that would otherwise be planned: recorded, and skipped unless
 * overridden. Returns true when it is to be skipped (or -ENOMEM in *rc). */
static bool exclude(struct collapse_context *c, const struct smaps_vma *vma, uint64_t min_size, int *rc) {
  struct hugify_collapse_report *r = c->report;
  enum hugify_not_huge_reason why = vma_opt_out(vma, r->thp_stance, r->thp_stance_visible, c->pmd);
  if (why == HUGIFY_WHY_NONE) return false;
  uint64_t eligible = aligned_window_bytes(vma->start, vma->end, c->pmd);
  bool shape = vma_is_shmem(vma) ? vma_shmem_aligned(vma, c->pmd) && eligible >= c->pmd
                                 : vma_collapse_candidate(vma, c->pmd);
  bool overridden = r->override_opt_out && opt_out_overridable(why);
  /* listed only when it holds memory a collapse would have changed */
  if (!shape || eligible < min_size || vma->rss <= vma->anon_huge + vma->shmem_pmd_mapped) return !overridden;
  if (ARRAY_GROW(r->exclusions, r->exclusion_count + 1, c->exclusion_cap) != 0) { *rc = -ENOMEM; return true; }
  struct hugify_collapse_exclusion *e = &r->exclusions[r->exclusion_count++];
  memset(e, 0, sizeof *e);
  e->start = vma->start;
  e->end = vma->end;
  snprintf(e->path, sizeof e->path, "%s", vma->path);
  e->eligible = eligible;
  e->resident = vma->rss;
  e->why = why;
  e->overridden = overridden;
  if (!overridden) r->excluded += eligible;
  return !overridden;
}

/* A range of addresses the plan walks whatever the sweep's cursor: a window the ledger watches, a hot region. */
struct walk_range {
  uint64_t start, end;
};

/* What planning carries from one mapping to the next. */
struct plan_state {
  struct os_walk walk;          /* the target's pagemap; walk.pagemap -1 when it could not be opened */
  uint64_t page;
  uint32_t pmd_pages;
  double min_present;           /* the share of a window's pages that must be present to try it */
  struct agent_window *windows; /* every window planned, in address order */
  struct resident_bytes *scan;  /* one mapping's walk per window */
  size_t window_count, window_cap;
  uint64_t unknown, zero;       /* bytes of windows whose presence could not be read; of zero-page mappings */
  uint64_t unwritten;           /* bytes of windows soft-dirty tracking write-protected and nothing wrote since */
  uint64_t split_in_place;      /* bytes kpageflags called huge beyond what smaps says is PMD-mapped */
  bool all_scanned, approximated;
  int walk_error;               /* os_walk_open's -errno: the pagemap could not be opened */
  /* the sweep (collapse_policy.walk_limit; collapse_context.slicing says whether this plan is one): */
  uint64_t cursor, limit;       /* windows from the cursor on are walked until limit bytes of them were not huge */
  bool slice_full;              /* the limit was reached, at slice_end */
  uint64_t slice_end;
  struct walk_range *extra;     /* walked wherever they lie (sorted, apart) */
  size_t extra_count, extra_next;
  uint64_t walked, walked_small; /* bytes of windows walked, and of them not huge */
};

static void open_walk(struct collapse_context *c, struct plan_state *s) {
  bool scan = probe_pagemap_scan(NULL, 0) == HUGIFY_FEATURE_YES;
  int rc = os_walk_open(c->pidfd >= 0 ? (int)c->pid : 0, scan, &s->walk);
  s->walk_error = rc;
  if (rc)
    reason_add(c->report->reason, sizeof c->report->reason,
               "/proc/%d/pagemap unreadable (%s): no window's presence is known, so none is tried; run as root, "
               "or grant CAP_SYS_PTRACE (ptrace read access) and CAP_DAC_READ_SEARCH (the file is mode 0400 of "
               "the process's user)", (int)c->pid, errno_name(-rc));
}

/* The walk's figures per window of [first, first + n windows) of the mapping; without PFNs, which windows are
 * huge comes from smaps (the mapping walked whole: never in a sweep). whole: the whole mapping, so smaps'
 * counts of it cross-check the walk (when they were read for this plan). */
static bool walk_mapping(struct collapse_context *c, struct plan_state *s, const struct smaps_vma *vma,
                         uint64_t first, size_t n, bool whole) {
  if (s->walk.pagemap < 0 || os_walk_windows(&s->walk, first, first + n * c->pmd, c->pmd, s->scan) != 0) return false;
  uint64_t pmd_mapped = vma->anon_huge + vma->shmem_pmd_mapped, huge = 0;
  if (s->walk.source == OS_WALK_PRESENCE && !pagemap_huge_from_smaps(s->scan, n, c->pmd, pmd_mapped))
    s->approximated = true;
  if (!whole || !c->layout_fresh) return true;
  for (size_t k = 0; s->walk.source == OS_WALK_KPAGEFLAGS && k < n; k++) huge += s->scan[k].huge;
  if (huge > pmd_mapped) s->split_in_place += huge - pmd_mapped; /* cross-check: smaps counts PMDs only */
  return true;
}

/* The guard: the agent's --min-present, else what khugepaged/max_ptes_none allows. */
static double min_present_share(const struct collapse_context *c, uint32_t pmd_pages) {
  if (c->policy) return c->policy->min_present;
  uint64_t max_ptes_none = pmd_pages - 1;
  if (os_read_u64(OS_SYSFS_THP "/khugepaged/max_ptes_none", &max_ptes_none) != 0 || max_ptes_none >= pmd_pages)
    max_ptes_none = pmd_pages - 1;
  return (double)(pmd_pages - max_ptes_none) / (double)pmd_pages;
}

/* The mapping's entry in the report, or NULL when the mapping is not to be collapsed (the reason counted). */
static struct hugify_collapse_mapping *plan_mapping_entry(struct collapse_context *c, const struct smaps_vma *vma,
                                                          uint64_t min_size) {
  struct hugify_collapse_report *r = c->report;
  bool shmem = vma_is_shmem(vma);
  if (shmem && vma->rss > 0 && !(vma->vm_flags & SMAPS_VM_NOHUGEPAGE)) {
    /* Shared memory: collapsible where its address agrees with its offset, unless shmem_enabled is deny
     * (then the kernel refuses with EINVAL, and a misaligned mapping cannot hold a huge page at all). */
    uint64_t not_huge = vma->rss > vma->shmem_pmd_mapped ? vma->rss - vma->shmem_pmd_mapped : 0;
    if (strcmp(r->shmem_mode, "deny") == 0) { r->shmem_denied += not_huge; return NULL; }
    if (!vma_shmem_aligned(vma, c->pmd)) { r->shmem_unaligned += not_huge; return NULL; }
  } else if (!vma_collapse_eligible(vma, c->pmd)) {
    return NULL;
  }
  uint64_t eligible = aligned_window_bytes(vma->start, vma->end, c->pmd);
  if ((shmem && eligible < c->pmd) || eligible < min_size) return NULL;
  struct hugify_collapse_mapping *m = &r->mappings[r->mapping_count++];
  if (vma->rss && !(vma->vm_flags & SMAPS_VM_HUGEPAGE)) c->unadvised_planned = true;
  m->start = vma->start;
  m->end = vma->end;
  snprintf(m->path, sizeof m->path, "%s", vma->path);
  m->eligible = eligible;
  m->resident_before = m->resident_after = vma->rss;
  m->huge_before = m->huge_after = vma->anon_huge + vma->shmem_pmd_mapped;
  return m;
}

/* Room for n more windows in s->windows and s->scan. */
static int reserve_windows(struct plan_state *s, size_t n) {
  if (s->window_count + n <= s->window_cap) return 0;
  size_t window_cap = s->window_cap, scan_cap = s->window_cap; /* two arrays of one capacity */
  if (ARRAY_GROW(s->windows, s->window_count + n, window_cap) != 0 ||
      ARRAY_GROW(s->scan, s->window_count + n, scan_cap) != 0)
    return -ENOMEM;
  s->window_cap = window_cap < scan_cap ? window_cap : scan_cap;
  return 0;
}

/* The windows [from, from + n windows) of one mapping with their signals, appended to s->windows: the walk's
 * present and huge pages, the ledger's state (the same walk judges the agent's earlier collapses), the
 * mapping's facts. */
static void add_windows(struct collapse_context *c, struct plan_state *s, const struct smaps_vma *vma, uint64_t from,
                        size_t n, bool whole) {
  bool scanned = walk_mapping(c, s, vma, from, n, whole);
  s->all_scanned &= scanned;
  struct agent_ledger *ledger = c->policy ? c->policy->ledger : NULL;
  uint8_t facts = vma_is_shmem(vma) ? (uint8_t)(PLAN_FACT_SHARED | (vma->path[0] == '/' ? PLAN_FACT_FILE : 0)) : 0;
  for (size_t k = 0; k < n; k++) {
    struct agent_window w = {.start = from + k * c->pmd, .heat = -1, .facts = facts};
    if (scanned) {
      bool huge = s->scan[k].huge >= c->pmd;
      s->walked += c->pmd;
      s->walked_small += huge ? 0 : c->pmd;
      w.present_pages = huge ? 0 : (uint32_t)((s->scan[k].base + s->scan[k].huge) / s->page);
      w.huge_pages = huge ? s->pmd_pages : 0;
      if (!huge) {
        s->zero += s->scan[k].zero;
        /* DAMON's is judged again once every window is known (heat_of_windows, in plan) */
        w.heat = heat_of(c->policy ? c->policy->heat : NULL, w.start, c->pmd, &s->scan[k]);
        if (!heat_collapsible(c->policy ? c->policy->heat : NULL, w.heat)) w.facts |= PLAN_FACT_UNWRITTEN;
      }
      /* out of memory there only loses telling the kernel's collapses apart this pass */
      if (ledger) (void)agent_ledger_observe(ledger, c->policy->pass, &w, huge);
    } else if (vma->rss) { /* presence unknown: never tried (a collapse of it could fill it with zeroes) */
      w.facts |= PLAN_FACT_UNKNOWN;
    }
    s->windows[s->window_count++] = w;
  }
}

/* A sweep's windows of one mapping from `at` on, up to `stop`, that lie in the extra ranges (the ledger's
 * watched windows, DAMON's hot regions); returns where it stopped. The ranges are visited in address order
 * across the mappings (s->extra_next). */
static uint64_t add_extra_windows(struct collapse_context *c, struct plan_state *s, const struct smaps_vma *vma,
                                  uint64_t at, uint64_t stop) {
  while (s->extra_next < s->extra_count && s->extra[s->extra_next].end <= at) s->extra_next++;
  if (s->extra_next == s->extra_count || s->extra[s->extra_next].start >= stop) return stop;
  const struct walk_range *r = &s->extra[s->extra_next];
  uint64_t from = r->start > at ? r->start & ~(c->pmd - 1) : at;
  uint64_t to = (r->end + c->pmd - 1) & ~(c->pmd - 1);
  if (from < at) from = at;
  if (to > stop) to = stop;
  add_windows(c, s, vma, from, (size_t)((to - from) / c->pmd), false);
  return to;
}

/* Every window of one mapping, or in a sweep the ones it walks: from the cursor on, SWEEP_CHUNK_WINDOWS at a
 * time until walk_limit bytes of windows not huge were read, and the extra ranges wherever they lie. */
#define SWEEP_CHUNK_WINDOWS 32
static int plan_mapping_windows(struct collapse_context *c, struct plan_state *s, const struct smaps_vma *vma,
                                struct hugify_collapse_mapping *m) {
  uint64_t first = (vma->start + c->pmd - 1) & ~(c->pmd - 1);
  size_t n = (size_t)(m->eligible / c->pmd);
  if (reserve_windows(s, n) != 0) return -ENOMEM;
  if (!c->slicing) {
    add_windows(c, s, vma, first, n, true);
    return 0;
  }
  uint64_t end = first + n * c->pmd;
  for (uint64_t at = first; at < end;) {
    if (!s->slice_full && at >= s->cursor) {
      uint64_t to = end - at > SWEEP_CHUNK_WINDOWS * c->pmd ? at + SWEEP_CHUNK_WINDOWS * c->pmd : end;
      add_windows(c, s, vma, at, (size_t)((to - at) / c->pmd), false);
      at = to;
      if (s->walked_small >= s->limit) s->slice_full = true, s->slice_end = at;
      continue;
    }
    uint64_t stop = !s->slice_full && s->cursor > at && s->cursor < end ? s->cursor : end;
    at = add_extra_windows(c, s, vma, at, stop);
  }
  return 0;
}

static int compare_range(const void *a, const void *b) {
  const struct walk_range *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* A sweep's extra ranges: the windows the ledger must judge this pass (collapsed in the last
 * AGENT_UNDONE_PASSES + 1 passes, or AGENT_LATE_PASSES ago: agent_ledger_watching), what the process mapped
 * since the last read of its mappings (a new mapping, a heap that grew: what changed goes first), and DAMON's
 * regions found accessed, so the hot set goes first wherever the cursor is. Sorted, overlaps merged. */
static int sweep_extra_ranges(const struct collapse_context *c, struct plan_state *s) {
  const struct agent_ledger *l = c->policy->ledger;
  const struct heat_snapshot *heat = c->policy->heat;
  const struct collapse_layout *layout = c->policy->layout;
  size_t fresh = layout ? layout->fresh_count : 0;
  size_t count = (l ? l->count : 0) + (heat ? heat->count : 0) + fresh, used = 0;
  if (count == 0) return 0;
  s->extra = malloc(count * sizeof *s->extra);
  if (!s->extra) return -ENOMEM;
  uint64_t pass = c->policy->pass;
  for (size_t i = 0; l && i < l->count; i++) {
    const struct agent_ledger_window *w = &l->windows[i];
    uint64_t age = pass > w->collapsed_pass ? pass - w->collapsed_pass : 0;
    if (age > 0 && (age <= AGENT_UNDONE_PASSES + 1 || age == AGENT_LATE_PASSES))
      s->extra[used++] = (struct walk_range){w->start, w->start + l->window_bytes};
  }
  for (size_t i = 0; heat && i < heat->count; i++)
    if (heat->regions[i].nr_accesses > 0) s->extra[used++] = (struct walk_range){heat->regions[i].start, heat->regions[i].end};
  for (size_t i = 0; i < fresh; i++) s->extra[used++] = (struct walk_range){layout->fresh[i].start, layout->fresh[i].end};
  if (used > 1) qsort(s->extra, used, sizeof *s->extra, compare_range);
  size_t merged = 0;
  for (size_t i = 0; i < used; i++) {
    if (merged && s->extra[i].start <= s->extra[merged - 1].end) {
      if (s->extra[i].end > s->extra[merged - 1].end) s->extra[merged - 1].end = s->extra[i].end;
    } else {
      s->extra[merged++] = s->extra[i];
    }
  }
  s->extra_count = merged;
  return 0;
}

/* Whether the window at `start` is in the sweep's slice: from the cursor on, before where the walk stopped. */
static bool in_slice(const struct collapse_context *c, uint64_t start) {
  return start >= c->cursor_in && start < c->slice_end;
}

/* The planner's word on every window (planner.h), its cuts in the mappings' figures, and the plan as
 * ranges in its order: for `hugify collapse` every window worth a call in address order; for the agent
 * its order cut to its budget. The windows are kept in address order too, for the bloat of each one
 * collapsed. */
static int plan_ranges(struct collapse_context *c, struct plan_state *s, uint64_t chunk, struct iovec **ranges,
                       size_t *range_count) {
  struct hugify_collapse_report *r = c->report;
  size_t window_count = s->window_count, cap = 0;
  if (window_count > 0 && (c->planned = malloc(window_count * sizeof *c->planned)) != NULL) {
    memcpy(c->planned, s->windows, window_count * sizeof *c->planned);
    c->planned_count = window_count;
  }
  struct plan_input in = {.order = c->policy ? PLAN_ORDER_AGENT : PLAN_ORDER_ADDRESS, .pmd_pages = s->pmd_pages,
                          .window_bytes = c->pmd, .min_present = s->min_present,
                          .budget = {.max_windows = SIZE_MAX, .max_bytes = UINT64_MAX,
                                     .probe_windows = AGENT_PROBE_WINDOWS},
                          .opt_out_bytes = r->excluded}; /* nothing is read of them, no window each */
  if (c->policy && c->policy->ledger) in.process = agent_ledger_process(c->policy->ledger, c->policy->pass);
  struct plan_result result;
  planner_plan(s->windows, window_count, &in, &result);
  if (c->policy && c->policy->ledger)
    agent_ledger_planned(c->policy->ledger, c->policy->pass, result.cut_bytes[PLAN_CUT_COLD] > 0);
  for (size_t k = result.kept; c->slicing && k < window_count; k++) {
    enum plan_cut cut = s->windows[k].cut;
    bool waits = cut == PLAN_CUT_COLD || cut == PLAN_CUT_PROBE || cut == PLAN_CUT_BUDGET;
    if (waits && in_slice(c, s->windows[k].start) && s->windows[k].start < c->resume_from)
      c->resume_from = s->windows[k].start;
  }
  for (size_t k = 0; k < window_count; k++) {
    enum plan_cut cut = s->windows[k].cut;
    struct hugify_collapse_mapping *m = cut == PLAN_KEPT || cut == PLAN_CUT_SPARSE || cut == PLAN_CUT_EMPTY
                                            ? mapping_of(r, s->windows[k].start) : NULL;
    if (m && cut == PLAN_KEPT) m->attempted += c->pmd;
    else if (m) m->skipped_empty += c->pmd;
  }
  s->unknown = result.cut_bytes[PLAN_CUT_UNKNOWN];
  s->unwritten = result.cut_bytes[PLAN_CUT_UNWRITTEN];
  if (c->policy) {
    c->policy->plan = result;
    c->policy->order = planner_order_name(&in, &result);
    c->policy->planned = result.cut_bytes[PLAN_KEPT];
    c->policy->backed_off = result.cut_bytes[PLAN_CUT_HELD] + result.cut_bytes[PLAN_CUT_CHURN];
  }
  int rc = 0;
  for (size_t k = 0; k < result.kept && rc == 0; k++)
    rc = push_range(ranges, range_count, &cap, s->windows[k].start, c->pmd, chunk);
  return rc;
}

/* What the plan could not know, and the memory it leaves on 4 KiB pages on purpose, in the reason. */
static void plan_reasons(struct collapse_context *c, const struct plan_state *s) {
  char *reason = c->report->reason;
  size_t cap = sizeof c->report->reason;
  if (s->unknown)
    reason_add(reason, cap, "%llu MiB in windows whose presence could not be read were not tried",
               (unsigned long long)(s->unknown >> 20));
  if (s->approximated)
    reason_add(reason, cap, "which windows are huge already is approximated from smaps (%s: no PFNs without "
               "CAP_SYS_ADMIN; run as root for kpageflags)", os_walk_name(s->walk.source));
  if (s->split_in_place)
    reason_add(reason, cap, "%llu MiB that kpageflags shows as whole huge pages are not PMD-mapped by smaps' "
               "count (a PMD split in place; no PAGEMAP_SCAN to tell which windows): taken as huge",
               (unsigned long long)(s->split_in_place >> 20));
  if (s->unwritten)
    reason_add(reason, cap, "%llu MiB not written since the last pass were left: soft-dirty tracking "
               "write-protected them, and the kernel collapses no window without a writable page until the "
               "program writes it (cold memory, by the soft-dirty signal)", (unsigned long long)(s->unwritten >> 20));
  if (s->zero >= c->pmd)
    reason_add(reason, cap, "%llu MiB were read but never written: they map the shared zero page (no memory of "
               "their own, not on huge pages of their own) until written, and are not collapsed (that would "
               "fill them with new zeroed memory)",
               (unsigned long long)(s->zero >> 20));
}

/* Plan the windows of every eligible mapping. One walk of the target's pagemap per mapping (PAGEMAP_SCAN,
 * else its entries and kpageflags: os_walk_windows): skip windows that are huge already, and windows with
 * fewer present pages than the guard wants (plain collapse: khugepaged/max_ptes_none, since MADV_COLLAPSE
 * ignores that knob and would fill them with zeroes; the agent: its --min-present). A window whose
 * presence could not be read is never tried. The planner (planner.h) orders and cuts them: address order
 * for plain collapse, the agent's order across the whole process with a policy. */
static int plan(struct collapse_context *c, const struct smaps_vma *vmas, long count, uint64_t min_size,
                uint64_t chunk, struct iovec **ranges, size_t *range_count) {
  struct hugify_collapse_report *r = c->report;
  r->mappings = calloc(count > 0 ? (size_t)count : 1, sizeof *r->mappings);
  if (!r->mappings) return -ENOMEM;
  struct plan_state s = {.page = (uint64_t)sysconf(_SC_PAGESIZE)};
  open_walk(c, &s);
  s.pmd_pages = (uint32_t)(c->pmd / s.page);
  s.min_present = min_present_share(c, s.pmd_pages);
  s.all_scanned = s.walk.pagemap >= 0;
  int rc = 0;
  /* a sweep walks part of the process: not where which windows are huge is apportioned from smaps' counts of
   * whole mappings (no PFNs), nor with soft-dirty heat (each plan clears the bits of every window) */
  const struct heat_snapshot *heat = c->policy ? c->policy->heat : NULL;
  if (c->policy && c->policy->walk_limit && s.walk.source != OS_WALK_PRESENCE &&
      !(heat && heat->signal == HEAT_SOFT_DIRTY)) {
    c->slicing = true;
    s.cursor = c->cursor_in;
    s.limit = c->policy->walk_limit;
    rc = sweep_extra_ranges(c, &s);
  }
  for (long i = 0; i < count && rc == 0; i++) {
    const struct smaps_vma *vma = &vmas[i];
    if (c->policy) c->policy->allocator = allocator_prefer(c->policy->allocator, allocator_of_path(vma->path));
    if (exclude(c, vma, min_size, &rc)) continue; /* its windows reach the planner as bytes: r->excluded */
    struct hugify_collapse_mapping *m = plan_mapping_entry(c, vma, min_size);
    if (!m) continue;
    rc = plan_mapping_windows(c, &s, vma, m);
  }
  os_walk_close(&s.walk);
  free(s.scan);
  free(s.extra);
  c->slice_end = s.slice_full ? s.slice_end : UINT64_MAX;
  if (c->policy) c->policy->walked_bytes = s.walked,
                 c->policy->walked_whole = s.all_scanned && (!c->slicing || (s.cursor == 0 && !s.slice_full));
  /* Nothing could be planned for want of a privilege over the pagemap: that is the outcome (exit 3), not a
   * collapse of nothing */
  if (rc == 0 && (s.walk_error == -EACCES || s.walk_error == -EPERM)) {
    /* the walk read nothing: every window with memory is of unknown presence (those without are empty) */
    bool any_unknown = false;
    for (size_t k = 0; k < s.window_count && !any_unknown; k++)
      any_unknown = (s.windows[k].facts & PLAN_FACT_UNKNOWN) != 0;
    if (any_unknown) rc = -EPERM;
  }
  /* DAMON's heat without the regions that hold a huge window (they read its PMD's accessed bit) */
  if (rc == 0 && c->policy) rc = heat_of_windows(c->policy->heat, s.windows, s.window_count, c->pmd);
  /* a look of every window: one plan's, or the last of a sweep's (the ledger's look began at its first) */
  if (c->policy) c->policy->scanned = s.all_scanned && rc == 0 && !s.slice_full;
  /* judged on what the walk saw of earlier collapses, before the plan: it cuts by the process's state */
  if (rc == 0 && c->policy && c->policy->ledger)
    c->policy->backed_off_now = agent_ledger_judge(c->policy->ledger, c->policy->pass, c->policy->scanned);
  if (rc == 0) rc = plan_ranges(c, &s, chunk, ranges, range_count);
  for (size_t i = 0; i < r->mapping_count; i++) {
    const struct hugify_collapse_mapping *m = &r->mappings[i];
    r->eligible += m->eligible;
    r->attempted += m->attempted;
    r->skipped_empty += m->skipped_empty;
    r->resident_before += m->resident_before;
    r->huge_before += m->huge_before;
  }
  plan_reasons(c, &s);
  free(s.windows);
  return rc;
}

/* Figures after the collapse, and failure reasons refined by what the target looks like now. */
static void measure_after(struct collapse_context *c, const struct smaps_vma *vmas, long count) {
  struct hugify_collapse_report *r = c->report;
  r->resident_after = r->huge_after = 0;
  for (size_t i = 0; i < r->mapping_count; i++) {
    struct hugify_collapse_mapping *m = &r->mappings[i];
    measure(vmas, count, m->start, m->end, &m->resident_after, &m->huge_after);
    r->resident_after += m->resident_after;
    r->huge_after += m->huge_after;
    r->failed += m->failed;
  }
  for (size_t i = 0; i < r->failure_count; i++) {
    struct hugify_collapse_failure *f = &r->failures[i];
    if (!still_mapped(vmas, count, f->start, f->end))
      snprintf(f->reason, sizeof f->reason, "%s: the process unmapped or moved the range during the collapse",
               errno_name(f->error));
  }
}

int hugify_collapse(pid_t pid, const struct hugify_collapse_opts *opts, struct hugify_collapse_report *report) {
  return collapse_with_policy(pid, opts, NULL, report);
}

/* The report's first figures, the arguments checked, and the kernel features the collapse needs. */
static int collapse_start(struct collapse_context *c, pid_t pid, bool self, bool dry_run, uint64_t *chunk) {
  const struct hugify_collapse_opts *opts = c->opts;
  struct hugify_collapse_report *report = c->report;
  if (pid < 0 || (opts->flags & ~HUGIFY_COLLAPSE_FLAGS_ALL)) {
    snprintf(report->reason, sizeof report->reason, pid < 0 ? "invalid pid" : "unknown flags");
    return -EINVAL;
  }
  if (c->policy) c->policy->stopped = false, c->policy->planned = c->policy->backed_off = 0,
                 c->policy->scanned = false, c->policy->allocator = ALLOCATOR_UNKNOWN,
                 c->policy->walked_bytes = 0, c->policy->waiting = false,
                 c->policy->walked_whole = false;
  c->cursor_in = c->policy ? c->policy->cursor : 0;
  c->slice_end = c->resume_from = UINT64_MAX;
  c->pmd = page_kind_size(HUGIFY_PAGE_THP);
  c->page = (uint64_t)sysconf(_SC_PAGESIZE);
  report->pid = c->pid;
  report->self = self;
  report->dry_run = dry_run;
  if (opts->pace > HUGIFY_COLLAPSE_PACE_FULL) {
    snprintf(report->reason, sizeof report->reason, "unknown pace %u", (unsigned)opts->pace);
    return -EINVAL;
  }
  report->pace = opts->pace;
  c->gentle = opts->pace == HUGIFY_COLLAPSE_PACE_GENTLE;
  *chunk = c->gentle ? c->pmd : opts->chunk_size ? opts->chunk_size : DEFAULT_CHUNK;
  *chunk = *chunk < c->pmd ? c->pmd : *chunk & ~(c->pmd - 1);
  report->chunk_size = *chunk;
  char comm_path[64];
  snprintf(comm_path, sizeof comm_path, "/proc/%d/comm", (int)c->pid);
  if (os_read_small(comm_path, report->command, sizeof report->command) < 0) report->command[0] = '\0';

  if (probe_require(PROBE_MADV_COLLAPSE, report->reason, sizeof report->reason) ||
      (!self && probe_require(PROBE_PROCESS_MADVISE_COLLAPSE, report->reason, sizeof report->reason)))
    return -ENOSYS;
  if (!page_sizes_collapse_wise(c->pmd)) {
    char pmd[32];
    page_sizes_name(c->pmd, pmd, sizeof pmd);
    snprintf(report->reason, sizeof report->reason,
             "the PMD huge page is %s on this kernel: too big to collapse wisely (one window's copy holds the "
             "process's memory lock for long, and a sparse window grows by up to %s); faults get mTHP folios "
             "instead where a size below the PMD is enabled (`hugify status` shows them; `hugify run` aligns for "
             "them), or boot a kernel of 4 or 16 KiB pages (2 or 32 MiB PMDs)", pmd, pmd);
    return -EOPNOTSUPP;
  }
  return self ? 0 : check_target(c, report, dry_run);
}

/* The figures after the calls, from a new read of the target's smaps. */
static void collapse_after(struct collapse_context *c, bool self) {
  struct hugify_collapse_report *report = c->report;
  struct smaps_vma *vmas = NULL;
  long count = report->exited ? -ESRCH : os_read_smaps(self ? 0 : c->pid, &vmas);
  if (count >= 0) {
    measure_after(c, vmas, count);
    free(vmas);
  } else {
    report->exited = 1;
    for (size_t i = 0; i < report->mapping_count; i++) {
      report->mappings[i].resident_after = report->mappings[i].huge_after = 0;
      report->failed += report->mappings[i].failed;
    }
  }
  if (report->exited)
    reason_add(report->reason, sizeof report->reason,
               "process %d exited during the collapse: the figures after are missing", (int)c->pid);
}

/* The figures after the calls from the kernel's answers, without a new read of smaps (the agent's plans, whose
 * cost is to follow what they collapse): a window the kernel collapsed is huge now, with its bloat resident. */
static void figures_from_answers(struct collapse_context *c) {
  struct hugify_collapse_report *report = c->report;
  report->resident_after = report->huge_after = 0;
  for (size_t i = 0; i < report->mapping_count; i++) {
    struct hugify_collapse_mapping *m = &report->mappings[i];
    uint64_t made = m->attempted > m->failed ? m->attempted - m->failed : 0;
    m->huge_after = m->huge_before + made;
    if (m->huge_after > m->eligible) m->huge_after = m->eligible;
    if (m->resident_after < m->huge_after) m->resident_after = m->huge_after;
    report->resident_after += m->resident_after;
    report->huge_after += m->huge_after;
    report->failed += m->failed;
  }
  report->resident_after += report->bloat_bytes;
}

int collapse_with_policy(pid_t pid, const struct hugify_collapse_opts *opts, struct collapse_policy *policy,
                         struct hugify_collapse_report *report) {
  if (!report) return -EINVAL;
  memset(report, 0, sizeof *report);
  struct hugify_collapse_opts defaults = {0};
  if (!opts) opts = &defaults;
  bool self = pid == 0 || pid == getpid();
  bool dry_run = opts->flags & HUGIFY_COLLAPSE_DRY_RUN;
  struct collapse_context c = {.opts = opts, .pid = self ? getpid() : pid, .pidfd = -1, .report = report,
                               .policy = policy};
  uint64_t chunk = 0;
  int rc = collapse_start(&c, pid, self, dry_run, &chunk);
  if (rc != 0) goto out;
  /* a first look at the target's threads, before the plan's reads, so that the first call already knows
   * which of them are busy */
  if ((c.probing = !self && !dry_run)) pause_probe_init(&c.probe, c.pid, measure_now());

  int enabled = os_read_thp_enabled(self ? 0 : pid);
  report->thp_disabled = enabled < 0 ? -1 : !enabled;
  report->override_opt_out = (opts->flags & HUGIFY_COLLAPSE_OVERRIDE_OPT_OUT) != 0;
  if (report->thp_disabled == 1)
    reason_add(report->reason, sizeof report->reason,
                  "process %d disabled THP (prctl PR_SET_THP_DISABLE): its memory is left alone (the kernel "
                  "refuses MADV_COLLAPSE for it too)", (int)c.pid);
  char thp_mode[16];
  probe_thp_setting("enabled", thp_mode, sizeof thp_mode);
  report->thp_stance_visible = inspect_thp_stance_visible(thp_mode);

  inspect_shmem_mode(report->shmem_mode, sizeof report->shmem_mode);
  struct smaps_vma *vmas = NULL;
  bool owned;
  long count = read_mappings(&c, self, &vmas, &owned);
  if (count < 0) { rc = (int)count; goto out; }
  report->thp_stance = inspect_thp_stance(report->thp_disabled, report->thp_stance_visible, vmas, (size_t)count,
                                          c.pmd);
  struct iovec *ranges = NULL;
  size_t range_count = 0;
  rc = plan(&c, vmas, count, opts->min_size, chunk, &ranges, &range_count);
  if (rc == 0 && c.unadvised_planned && report->thp_stance == HUGIFY_THP_STANCE_UNKNOWN && !report->thp_stance_visible)
    reason_add(report->reason, sizeof report->reason,
               "whether process %d disabled THP except where it advised (PR_THP_DISABLE_EXCEPT_ADVISED) cannot be "
               "seen while no THP size is 'always': its unadvised memory was taken as allowed", (int)c.pid);
  if (owned) free(vmas);
  vmas = NULL;
  if (rc == 0 && dry_run) {
    report->resident_after = report->resident_before;
    report->huge_after = report->huge_before;
  }
  if (rc == 0 && !dry_run && range_count > 0) {
    rc = run_ranges(&c, ranges, range_count, chunk);
    report->p99_pause = pause_quantile(c.pauses, c.pause_count, 0.99);
    if (rc == -ESRCH) {
      report->exited = 1;
      rc = 0;
    }
  }
  free(ranges);
  if (policy) { /* where the sweep goes on: the first window of its slice left waiting, else where it stopped */
    policy->waiting = c.slicing && c.resume_from != UINT64_MAX;
    policy->cursor = !c.slicing ? 0 : policy->waiting ? c.resume_from : c.slice_end != UINT64_MAX ? c.slice_end : 0;
  }
  if (rc == -ENOMEM) snprintf(report->reason, sizeof report->reason, "out of memory");
  if (rc == 0 && !dry_run && policy && policy->layout && !report->exited) figures_from_answers(&c);
  else if (rc == 0 && !dry_run) collapse_after(&c, self);
out:
  if (c.pidfd >= 0) close(c.pidfd);
  free(c.planned);
  free(c.pauses);
  if (c.probing) pause_probe_free(&c.probe);
  return rc;
}
