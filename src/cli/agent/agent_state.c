/* SPDX-License-Identifier: MIT */
/* agent_state.c - the daemon's state file (--state-file): after every pass the daemon replaces it with that
 * pass's JSON object (schema hugify.agent/1, the one --json writes), so that `hugify agent --status`, a new
 * process, can show what only the daemon knows: its ledger of collapses that last, its back-offs and the
 * pauses it caused. Written like the metrics file (safe_file_replace: never through a link, a reader sees a
 * whole file); read with jansson, and only from a regular file of root or of the reader, writable by no one
 * else (the table it feeds is trusted by whoever reads it). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "procfs.h"
#include "units.h"
#include "json_read.h"
#include "measure.h"
#include "os.h"
#include "safe_file.h"

#define STATE_OPTION "--state-file"

void agent_write_state(struct agent *a) {
  const char *path = a->config.state_file;
  if (!path[0]) return;
  char *text = NULL;
  size_t length = 0;
  FILE *out = open_memstream(&text, &length);
  if (!out) return;
  agent_print_json(a, out, "pass");
  fclose(out);
  /* the default's directory: systemd makes it (RuntimeDirectory=hugify); a daemon started by hand makes it */
  if (strcmp(path, AGENT_STATE_FILE_DEFAULT) == 0) mkdir("/run/hugify", 0755);
  char reason[512] = "";
  int rc = safe_file_replace(path, text, length, 0644, 0, reason, sizeof reason);
  agent_note_write("state file", rc, reason, &a->state_write_failing);
  free(text);
}

static double number_or(const struct json_doc *doc, const char *path, double fallback) {
  double value;
  return json_doc_number(doc, path, &value) ? value : fallback;
}

static uint64_t count_of(const struct json_doc *doc, const char *path) {
  uint64_t value;
  return json_doc_count(doc, path, &value) ? value : 0;
}

/* The pid at a path: a count that fits pid_t. */
static bool pid_at(const struct json_doc *doc, const char *path, pid_t *pid) {
  uint64_t value;
  if (!json_doc_count(doc, path, &value) || value > INT_MAX) return false;
  *pid = (pid_t)value;
  return true;
}

static bool read_processes(struct daemon_state *d, const struct json_doc *doc) {
  size_t count = json_doc_array_size(doc, "processes");
  d->processes = calloc(count ? count : 1, sizeof *d->processes);
  if (!d->processes) return false;
  for (size_t i = 0; i < count; i++) {
    const struct json_doc *item = json_doc_array_item(doc, "processes", i);
    struct daemon_process *p = &d->processes[d->process_count];
    if (!pid_at(item, "pid", &p->pid) || !json_doc_string(item, "comm", p->comm, sizeof p->comm)) continue;
    p->start_time = count_of(item, "start_time_ticks");
    p->collapsed = count_of(item, "collapsed_bytes");
    p->kernel_collapsed = count_of(item, "kernel_collapsed_bytes");
    json_doc_string(item, "last_action", p->last_action, sizeof p->last_action);
    p->bloat = count_of(item, "lasting.bloat_bytes");
    json_doc_string(item, "heat", p->heat, sizeof p->heat);
    p->last_pause = number_or(item, "last_pause_seconds", -1);
    p->last_action_time = number_or(item, "last_collapse_time", 0);
    p->early_share = number_or(item, "lasting.huge_after_1_pass_fraction", -1);
    p->late_share = number_or(item, "lasting.huge_after_10_passes_fraction", -1);
    p->recollapsed = count_of(item, "lasting.recollapsed_bytes");
    p->undone = count_of(item, "lasting.undone_bytes");
    json_doc_bool(item, "lasting.backed_off", &p->backed_off);
    p->backoff_passes_left = count_of(item, "lasting.backoff_passes_left");
    json_doc_string(item, "lasting.allocator", p->allocator, sizeof p->allocator);
    json_doc_string(item, "lasting.advice", p->advice, sizeof p->advice);
    d->process_count++;
  }
  return true;
}

/* The parsed state: the daemon's totals and processes, and whether it is fresh. */
static int read_document(struct daemon_state *d, const struct json_doc *doc, const char *path, double interval) {
  char schema[32] = "", mode[16] = "";
  json_doc_string(doc, "schema", schema, sizeof schema);
  json_doc_string(doc, "mode", mode, sizeof mode);
  double written;
  if (strcmp(schema, "hugify.agent/1") != 0 || strcmp(mode, "pass") != 0 ||
      !json_doc_number(doc, "time_unix_seconds", &written) || !pid_at(doc, "agent_pid", &d->pid))
    return fail(EXIT_USAGE, COMMAND,
                "%s %s is not the agent daemon's state (a hugify.agent/1 object of mode \"pass\" with "
                "time_unix_seconds and agent_pid; found schema \"%s\", mode \"%s\")",
                STATE_OPTION, path, schema, mode);
  d->interval = number_or(doc, "interval_seconds", interval);
  d->passes = count_of(doc, "passes");
  d->collapsed = count_of(doc, "collapsed_bytes");
  d->recollapsed = count_of(doc, "recollapsed_bytes");
  d->bloat = count_of(doc, "bloat_bytes");
  d->budget_stops = count_of(doc, "budget_stops");
  d->pass_ceiling_stops = count_of(doc, "pass_ceiling_stops");
  d->churn_backoffs = count_of(doc, "churn_backoffs");
  d->kernel_collapsed = count_of(doc, "kernel.collapsed_bytes");
  d->kernel_collapse_allocs = count_of(doc, "kernel.thp_collapse_alloc");
  json_doc_string(doc, "heat.signal", d->heat, sizeof d->heat);
  json_doc_string(doc, "heat.reason", d->heat_reason, sizeof d->heat_reason);
  d->heat_targets = count_of(doc, "heat.damon_targets");
  d->heat_regions = count_of(doc, "heat.damon_regions");
  d->heat_reads = count_of(doc, "heat.damon_reads");
  d->heat_kdamond_cpu = number_or(doc, "heat.kdamond_cpu_seconds", -1);
  d->longest_call = number_or(doc, "longest_call_seconds", 0);
  d->has_pauses = json_doc_count(doc, "pause.count", &d->pause_count);
  if (!d->has_pauses) d->pause_count = 0;
  d->pause_longest = number_or(doc, "pause.longest_seconds", 0);
  d->pause_p99 = number_or(doc, "pause.p99_seconds", 0);
  d->age_seconds = measure_clock_seconds(CLOCK_REALTIME) - written;
  /* a daemon restarted as pid 1 of a container finds its own pid in the file */
  bool running = d->writer_running = d->pid != getpid() && (kill(d->pid, 0) == 0 || errno == EPERM);
  double limit = AGENT_STATE_FRESH_PASSES * d->interval + 1;
  if (!running)
    snprintf(d->note, sizeof d->note, "the daemon (pid %d) that wrote %.200s %.0f s ago is not running",
             (int)d->pid, path, d->age_seconds);
  else if (d->age_seconds > limit)
    snprintf(d->note, sizeof d->note, "%.200s is stale: written %.0f s ago, more than %d intervals of %.3g s",
             path, d->age_seconds, AGENT_STATE_FRESH_PASSES, d->interval);
  if ((d->fresh = running && d->age_seconds <= limit) || (d->resuming && !running)) {
    if (!read_processes(d, doc)) return fail(EXIT_SHORT, COMMAND, "out of memory reading %s", path);
  }
  return 0;
}

int agent_read_state(struct daemon_state *d, const char *path, double interval) {
  if (!path[0]) return 0;
  d->tried = true;
  d->age_seconds = -1;
  int fd = safe_file_open_read(path, false);
  if (fd == -ENOENT) {
    snprintf(d->note, sizeof d->note, "no daemon state at %.240s (no daemon running, or it writes elsewhere: "
             "--state-file)", path);
    return 0;
  }
  if (fd == -EACCES || fd == -EPERM)
    return fail(EXIT_PRIVILEGE, COMMAND, "cannot read the daemon's state %s: %s. Run as the daemon's user or root, "
                "or name a state file you may read (%s FILE, or none)", path, strerror(-fd), STATE_OPTION);
  if (fd < 0)
    return fail(EXIT_USAGE, COMMAND, "%s %s: %s", STATE_OPTION, path,
                fd == -ELOOP ? "a symbolic link: hugify never reads its state through a link (name the file itself)"
                : fd == -EINVAL ? "not a regular file" : strerror(-fd));
  struct stat st = {0};
  if (fstat(fd, &st) != 0 || (st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & 022)) {
    close(fd);
    return fail(EXIT_USAGE, COMMAND, "%s %s is owned by uid %u with mode %03o: the daemon's state is a file of "
                "root or of you that no one else may write; not shown", STATE_OPTION, path, (unsigned)st.st_uid,
                (unsigned)(st.st_mode & 0777));
  }
  char *text = NULL;
  int rc = os_read_fd(fd, &text, NULL);
  if (rc != 0) return fail(EXIT_USAGE, COMMAND, "%s %s: %s", STATE_OPTION, path, strerror(-rc));
  char error[200];
  struct json_doc *doc = json_doc_read_text(text, error, sizeof error);
  free(text);
  if (!doc) return fail(EXIT_USAGE, COMMAND, "%s %s is not the agent daemon's state: not JSON: %s", STATE_OPTION, path, error);
  rc = read_document(d, doc, path, interval);
  json_doc_free(doc);
  return rc;
}

const struct daemon_process *agent_daemon_process(const struct daemon_state *d, pid_t pid, uint64_t start_time,
                                                  const char *comm) {
  for (size_t i = 0; d->fresh && i < d->process_count; i++) {
    const struct daemon_process *p = &d->processes[i];
    /* the same process: its pid and start time when both are known (a reused pid is another process) */
    if (p->pid == pid && (start_time && p->start_time ? p->start_time == start_time : strcmp(p->comm, comm) == 0))
      return p;
  }
  return NULL;
}

/* A process of the state file that is still the same process (pid and start time): the daemon's table
 * starts with its totals; its ledger's windows are not in the file and are judged afresh. */
static bool resume_process(struct agent *a, const struct daemon_process *d) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)d->pid);
  char *text = agent_read_text(path);
  uint64_t start_time = 0;
  bool same = parse_stat_start_time(text, &start_time) && d->start_time && start_time == d->start_time;
  free(text);
  struct process_state *p = same ? agent_add_process(a, d->pid, start_time, d->comm) : NULL;
  if (!p) return false;
  p->collapsed_bytes = d->collapsed;
  p->bloat_bytes = d->bloat;
  snprintf(p->last_action, sizeof p->last_action, "%s", d->last_action);
  p->last_pause = d->last_pause;
  p->last_action_time = d->last_action_time;
  return true;
}

void agent_resume_state(struct agent *a) {
  struct daemon_state *d = &a->daemon;
  if (!a->config.state_file[0]) return;
  d->resuming = true;
  int rc = agent_read_state(d, a->config.state_file, a->config.interval);
  d->resuming = false;
  bool running = d->writer_running;
  if (rc != 0 || d->age_seconds < 0 || running) {
    if (rc != 0 || running)
      fprintf(stderr, "hugify agent: starting without the earlier state: %s\n",
              rc != 0 ? "the state file above is replaced after the first pass" : d->note);
    free(d->processes);
    memset(d, 0, sizeof *d);
    return;
  }
  a->passes = d->passes;
  a->collapsed_bytes = d->collapsed;
  a->recollapsed_bytes = d->recollapsed;
  a->bloat_bytes = d->bloat;
  a->churn_backoffs = d->churn_backoffs;
  a->budget_stops = d->budget_stops;
  a->pass_ceiling_stops = d->pass_ceiling_stops;
  size_t kept = 0;
  for (size_t i = 0; i < d->process_count; i++) kept += resume_process(a, &d->processes[i]);
  char made[32];
  format_bytes(d->collapsed, made, sizeof made);
  fprintf(stderr, "hugify agent: resumed from %s (daemon pid %d, gone, wrote it %.0f s ago): %llu passes, collapsed %s; "
          "%zu of its %zu processes still run (same pid and start time)\n", a->config.state_file, (int)d->pid,
          d->age_seconds, (unsigned long long)d->passes, made, kept, d->process_count);
  free(d->processes);
  memset(d, 0, sizeof *d);
}
