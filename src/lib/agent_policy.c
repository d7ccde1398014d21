/* agent_policy.c - the pure decisions of `hugify agent` (see agent_policy.h). */
#include "agent_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- which processes ---------------------------------------------------------------------------- */

bool agent_cgroup_matches(const char *selector, const char *path) {
  size_t n = strlen(selector);
  while (n > 1 && selector[n - 1] == '/') n--; /* "/a/b/" is "/a/b" */
  if (n == 1 && selector[0] == '/') return path[0] == '/';
  return strncmp(selector, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool matches_positive(const struct agent_selectors *s, const struct agent_process *p) {
  for (size_t i = 0; i < s->pid_count; i++)
    if (s->pids[i] == p->pid) return true;
  for (size_t i = 0; i < s->uid_count; i++)
    if (s->uids[i] == p->uid) return true;
  for (size_t i = 0; i < s->comm_count; i++)
    if (strcmp(s->comms[i], p->comm) == 0) return true;
  for (size_t i = 0; i < s->exe_count; i++)
    if (p->exe[0] && strcmp(s->exes[i], p->exe) == 0) return true;
  for (size_t i = 0; i < s->cgroup_count; i++)
    if (p->cgroup[0] && agent_cgroup_matches(s->cgroups[i], p->cgroup)) return true;
  return false;
}

enum agent_selection agent_select(const struct agent_selectors *s, const struct agent_process *p) {
  if (p->kernel_thread) return AGENT_KERNEL_THREAD;
  for (size_t i = 0; i < s->exclude_comm_count; i++)
    if (strcmp(s->exclude_comms[i], p->comm) == 0) return AGENT_EXCLUDED;
  size_t positive = s->pid_count + s->uid_count + s->comm_count + s->exe_count + s->cgroup_count;
  if (positive > 0 && !matches_positive(s, p)) return AGENT_NOT_MATCHED;
  if (p->thp_disabled == 1) return AGENT_THP_DISABLED;
  if (p->rss < s->min_rss) return AGENT_TOO_SMALL;
  return AGENT_SELECTED;
}

const char *agent_selection_name(enum agent_selection selection) {
  switch (selection) {
  case AGENT_SELECTED: return "selected";
  case AGENT_NOT_MATCHED: return "not_matched";
  case AGENT_EXCLUDED: return "excluded";
  case AGENT_THP_DISABLED: return "thp_disabled";
  case AGENT_TOO_SMALL: return "too_small";
  case AGENT_KERNEL_THREAD: return "kernel_thread";
  }
  return "unknown";
}

/* ---- which windows, in which order -------------------------------------------------------------- */

bool agent_window_eligible(const struct agent_window *w, uint32_t pmd_pages, double min_present) {
  if (w->huge_pages > 0 || w->present_pages == 0) return false;
  double exact = min_present * (double)pmd_pages;
  uint32_t needed = (uint32_t)exact;
  if ((double)needed < exact) needed++; /* round up: "half" of 512 pages is 256, of 511 is 256 */
  return w->present_pages >= needed;
}

static int compare_windows(const void *a, const void *b) {
  const struct agent_window *x = a, *y = b;
  if (x->accessed_pages != y->accessed_pages) return x->accessed_pages > y->accessed_pages ? -1 : 1;
  if (x->present_pages != y->present_pages) return x->present_pages > y->present_pages ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}

size_t agent_plan_windows(struct agent_window *windows, size_t count, uint32_t pmd_pages, double min_present) {
  size_t kept = 0;
  for (size_t i = 0; i < count; i++)
    if (agent_window_eligible(&windows[i], pmd_pages, min_present)) windows[kept++] = windows[i];
  qsort(windows, kept, sizeof *windows, compare_windows);
  return kept;
}

/* ---- CPU budget --------------------------------------------------------------------------------- */

void agent_budget_init(struct agent_budget *b, double fraction, double window_seconds, double initial_seconds,
                       double now) {
  memset(b, 0, sizeof *b);
  b->fraction = fraction;
  b->window_seconds = window_seconds;
  b->tokens = fraction * initial_seconds;
  b->last = now;
}

void agent_budget_refill(struct agent_budget *b, double now) {
  if (now > b->last) {
    b->tokens += b->fraction * (now - b->last);
    double cap = b->fraction * b->window_seconds;
    if (b->tokens > cap) b->tokens = cap;
  }
  b->last = now;
}

void agent_budget_charge(struct agent_budget *b, double cpu_seconds) {
  if (cpu_seconds <= 0) return;
  b->tokens -= cpu_seconds;
  b->spent += cpu_seconds;
}

bool agent_budget_allows(const struct agent_budget *b) { return b->tokens > 0; }

/* ---- memory budget ------------------------------------------------------------------------------ */

static bool parse_avg(const char *line, const char *key, double *value) {
  const char *at = strstr(line, key);
  if (!at) return false;
  char *end;
  *value = strtod(at + strlen(key), &end);
  return end != at + strlen(key);
}

bool agent_parse_pressure(const char *text, struct agent_pressure *out) {
  memset(out, 0, sizeof *out);
  bool some = false, full = false;
  for (const char *line = text; line && *line;) {
    const char *next = strchr(line, '\n');
    char buf[256];
    size_t n = next ? (size_t)(next - line) : strlen(line);
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, line, n);
    buf[n] = '\0';
    if (strncmp(buf, "some ", 5) == 0)
      some = parse_avg(buf, "avg10=", &out->some_avg10) && parse_avg(buf, "avg60=", &out->some_avg60);
    else if (strncmp(buf, "full ", 5) == 0)
      full = parse_avg(buf, "avg10=", &out->full_avg10);
    line = next ? next + 1 : NULL;
  }
  out->present = some;
  (void)full; /* "full" is absent on older kernels for some resources; "some" is what the gate uses */
  return some;
}

bool agent_memory_allows(const struct agent_memory_limits *limits, uint64_t available,
                         const struct agent_pressure *pressure, char *reason, size_t cap) {
  if (available < limits->free_floor) {
    snprintf(reason, cap, "available memory %llu MiB is below the floor of %llu MiB",
             (unsigned long long)(available >> 20), (unsigned long long)(limits->free_floor >> 20));
    return false;
  }
  if (pressure && pressure->present && pressure->some_avg10 > limits->pressure_limit) {
    snprintf(reason, cap, "memory pressure (some avg10) %.2f %% is above the limit of %.2f %%",
             pressure->some_avg10, limits->pressure_limit);
    return false;
  }
  if (cap) reason[0] = '\0';
  return true;
}

/* ---- per-process back-off ----------------------------------------------------------------------- */

void agent_backoff_record(struct agent_backoff *b, bool progress, bool failed, double now, double interval,
                          double max_seconds) {
  if (progress || !failed) {
    b->failures = 0;
    b->next_try = 0;
    return;
  }
  b->failures++;
  double wait = interval * (double)(UINT64_C(1) << (b->failures > 31 ? 30 : b->failures - 1));
  if (wait > max_seconds) wait = max_seconds;
  b->next_try = now + wait;
}

bool agent_backoff_allows(const struct agent_backoff *b, double now) { return now >= b->next_try; }
