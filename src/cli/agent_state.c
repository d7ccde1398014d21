/* SPDX-License-Identifier: MIT */
/* agent_state.c - the daemon's state file (--state-file): after every pass the daemon replaces it with that
 * pass's JSON object (schema hugify.agent/1, the one --json writes), so that `hugify agent --status`, a new
 * process, can show what only the daemon knows: its ledger of collapses that last, its back-offs and the
 * pauses it caused. Written like the metrics file (safe_file_replace: never through a link, a reader sees a
 * whole file); read with jansson, and only from a regular file of root or of the reader, writable by no one
 * else (the table it feeds is trusted by whoever reads it). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
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
  char reason[512];
  if (safe_file_replace(path, text, length, 0644, 0, reason, sizeof reason) != 0)
    fprintf(stderr, "hugify agent: state file: %s\n", reason);
  free(text);
}

static double number_or(const struct json_doc *doc, const char *path, double fallback) {
  double value;
  return json_doc_number(doc, path, &value) ? value : fallback;
}

static uint64_t count_of(const struct json_doc *doc, const char *path) {
  double value = number_or(doc, path, 0);
  return value > 0 ? (uint64_t)value : 0;
}

static bool read_processes(struct daemon_state *d, const struct json_doc *doc) {
  size_t count = json_doc_array_size(doc, "processes");
  d->processes = calloc(count ? count : 1, sizeof *d->processes);
  if (!d->processes) return false;
  for (size_t i = 0; i < count; i++) {
    const struct json_doc *item = json_doc_array_item(doc, "processes", i);
    struct daemon_process *p = &d->processes[d->process_count];
    double pid;
    if (!json_doc_number(item, "pid", &pid) || !json_doc_string(item, "comm", p->comm, sizeof p->comm)) continue;
    p->pid = (pid_t)pid;
    p->collapsed = count_of(item, "collapsed_bytes");
    json_doc_string(item, "last_action", p->last_action, sizeof p->last_action);
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
static int read_document(struct agent *a, const struct json_doc *doc, const char *path) {
  struct daemon_state *d = &a->daemon;
  char schema[32] = "", mode[16] = "";
  json_doc_string(doc, "schema", schema, sizeof schema);
  json_doc_string(doc, "mode", mode, sizeof mode);
  double written, pid;
  if (strcmp(schema, "hugify.agent/1") != 0 || strcmp(mode, "pass") != 0 ||
      !json_doc_number(doc, "time_unix_seconds", &written) || !json_doc_number(doc, "agent_pid", &pid))
    return fail(EXIT_USAGE, COMMAND,
                "%s %s is not the agent daemon's state (a hugify.agent/1 object of mode \"pass\" with "
                "time_unix_seconds and agent_pid; found schema \"%s\", mode \"%s\")",
                STATE_OPTION, path, schema, mode);
  d->pid = (pid_t)pid;
  d->interval = number_or(doc, "interval_seconds", a->config.interval);
  d->passes = count_of(doc, "passes");
  d->collapsed = count_of(doc, "collapsed_bytes");
  d->recollapsed = count_of(doc, "recollapsed_bytes");
  d->churn_backoffs = count_of(doc, "churn_backoffs");
  json_doc_string(doc, "heat.signal", d->heat, sizeof d->heat);
  json_doc_string(doc, "heat.reason", d->heat_reason, sizeof d->heat_reason);
  d->heat_targets = count_of(doc, "heat.damon_targets");
  d->heat_regions = count_of(doc, "heat.damon_regions");
  d->heat_reads = count_of(doc, "heat.damon_reads");
  d->heat_kdamond_cpu = number_or(doc, "heat.kdamond_cpu_seconds", -1);
  d->longest_call = number_or(doc, "longest_call_seconds", 0);
  double pauses;
  d->has_pauses = json_doc_number(doc, "pause.count", &pauses);
  d->pause_count = d->has_pauses ? (uint64_t)pauses : 0;
  d->pause_longest = number_or(doc, "pause.longest_seconds", 0);
  d->pause_p99 = number_or(doc, "pause.p99_seconds", 0);
  d->age_seconds = measure_clock_seconds(CLOCK_REALTIME) - written;
  bool running = kill(d->pid, 0) == 0 || errno == EPERM;
  double limit = AGENT_STATE_FRESH_PASSES * d->interval + 1;
  if (!running)
    snprintf(d->note, sizeof d->note, "the daemon (pid %d) that wrote %.200s %.0f s ago is not running",
             (int)d->pid, path, d->age_seconds);
  else if (d->age_seconds > limit)
    snprintf(d->note, sizeof d->note, "%.200s is stale: written %.0f s ago, more than %d intervals of %.3g s",
             path, d->age_seconds, AGENT_STATE_FRESH_PASSES, d->interval);
  else if (!read_processes(d, doc))
    return fail(EXIT_SHORT, COMMAND, "out of memory reading %s", path);
  d->fresh = running && d->age_seconds <= limit;
  return 0;
}

int agent_read_state(struct agent *a) {
  struct daemon_state *d = &a->daemon;
  const char *path = a->config.state_file;
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
  rc = read_document(a, doc, path);
  json_doc_free(doc);
  return rc;
}

const struct daemon_process *agent_daemon_process(const struct daemon_state *d, pid_t pid, const char *comm) {
  for (size_t i = 0; d->fresh && i < d->process_count; i++)
    if (d->processes[i].pid == pid && strcmp(d->processes[i].comm, comm) == 0) return &d->processes[i];
  return NULL;
}
