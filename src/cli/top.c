/* SPDX-License-Identifier: MIT */
/* top.c - hugify top: a live view of the processes (or cgroups) with most memory that could be on huge pages
 * and is not, each one's huge share and its change since the last refresh, what the running agent did to it
 * last (its state file), and a header with the host's THP counters per second. Interactive on a terminal
 * (keys: sort, processes/cgroups, collapse the selected process after a confirmation); --batch or --json
 * without one, as top -b.
 *
 * Cost: a refresh reads /proc/PID/stat of every process (one small read: its size and start time);
 * /proc/PID/smaps_rollup (a walk of the process's page tables, the costly read) only for a process that is
 * new, whose resident size changed, or whose last walk is TOP_REWALK refreshes old (spread over the
 * refreshes by pid). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_state.h"
#include "array.h"
#include "cli.h"
#include "fleet.h"
#include "measure.h"
#include "os.h"
#include "procfs.h"
#include "units.h"

#define TOP_REWALK 10 /* refreshes: an unchanged process is walked again at least this often */

enum top_sort { SORT_NOT_HUGE, SORT_SHARE, SORT_CHANGE, SORT_RSS, SORT_COUNT };
static const char *const sort_names[] = {"not-huge", "share", "change", "rss", NULL}; /* enum top_sort */

struct top_args {
  bool batch, cgroups;
  double interval;
  uint64_t count, rows;
  int sort;
  const char *state_file;
  struct json_output json;
};

static const struct option_spec top_options[] = {
    OPT_GROUP("Options"),
    OPT_FLAG("batch", 'b', struct top_args, batch, "text on stdout, no terminal needed (as top -b)"),
    OPT_JSON(struct top_args, json, "one JSON document per refresh (schema hugify.top/1, docs/top.md)"),
    OPT_DECIMAL("interval", struct top_args, interval, "SECONDS", 0.1, 86400, "time between refreshes (default 2)"),
    OPT_COUNT("count", struct top_args, count, "N", 1, 100000000, "stop after N refreshes (--batch, --json; default 1)"),
    OPT_FLAG("cgroups", 0, struct top_args, cgroups, "one row per cgroup instead of per process (key: c)"),
    OPT_ENUM("sort", struct top_args, sort, "not-huge|share|change|rss", sort_names,
             "order of the rows (default not-huge: anonymous memory not on huge pages; key: s)"),
    OPT_COUNT("rows", struct top_args, rows, "N", 0, 1000000, "rows shown with --batch and --json (default 20, 0 = all)"),
    OPT_STRING("state-file", struct top_args, state_file, "FILE",
               "the running agent's state file (default " AGENT_STATE_FILE_DEFAULT ")"),
    OPT_END,
};

const struct command_help help_top = {
    "usage: hugify top [--cgroups] [--sort KEY] [--interval SECONDS]\n"
    "       hugify top --batch|--json [--count N] [--rows N] [--interval SECONDS]\n"
    "\n"
    "A live view, as top and htop: the processes (or cgroups) with most anonymous memory not on huge pages,\n"
    "each one's huge share and its change since the last refresh, what the running hugify agent did to it\n"
    "last and the pause that caused (from its state file), and a header with the host's THP counters per\n"
    "second (as status --watch). Keys: q quit, s sort, c processes/cgroups, up/down (j/k) select,\n"
    "C collapse the selected process (asks first). It reads smaps_rollup only of processes whose size changed.\n"
    "\n",
    top_options,
    "\n"
    "Examples:\n"
    "  hugify top                                 the live view\n"
    "  hugify top --cgroups --sort share          per cgroup, least covered first\n"
    "  hugify top --batch --count 3 --interval 1  three refreshes as text\n"
    "  hugify top --json --rows 0                 every process once, as JSON\n"
    "\n"
    "Exit status: 0 done; 2 bad usage; 3 no terminal for the live view (use --batch or --json).\n",
};

/* ---- what a refresh sees -------------------------------------------------------------------------- */

struct top_row {
  int pid;                 /* 0 in the cgroup view */
  uint64_t start_time;     /* with the pid, the process (a reused pid is a new row) */
  char name[64];           /* comm, or "" */
  char cgroup[256];
  uint64_t rss_pages;      /* stat's rss: when it changes, the next refresh walks again */
  struct smaps_rollup m;
  unsigned walked_at;      /* the refresh of the last walk */
  unsigned processes;      /* cgroup view */
  double share, previous;  /* huge share now and at the last refresh (-1: none) */
  bool seen;
  const struct daemon_process *agent;
};

struct top {
  struct top_args args;
  struct cgroup_memory_root memory;
  struct top_row *procs, *groups;
  size_t count, cap, group_count, group_cap;
  unsigned refresh, walked;
  struct vmstat_counters vm, vm_before;
  double vm_time, vm_seconds;
  struct daemon_state agent; /* the running agent's, read from its state file (args.state_file) */
  size_t selected;
  char message[320];
};

static uint64_t huge_of(const struct smaps_rollup *m) { return m->anon_thp + m->shmem_thp + m->file_thp + m->hugetlb; }
static uint64_t not_huge_of(const struct smaps_rollup *m) { return m->anonymous - m->anon_thp; }
static double share_of(const struct smaps_rollup *m) { return m->rss ? (double)huge_of(m) / (double)m->rss : 0; }

static void row_reset(struct top_row *r, int pid, const char *cgroup) {
  memset(r, 0, sizeof *r);
  r->pid = pid;
  r->previous = -1;
  snprintf(r->cgroup, sizeof r->cgroup, "%s", cgroup);
}

static struct top_row *row_of(struct top_row **rows, size_t *count, size_t *cap, int pid, const char *cgroup) {
  for (size_t i = 0; i < *count; i++)
    if (pid ? (*rows)[i].pid == pid : strcmp((*rows)[i].cgroup, cgroup) == 0) return &(*rows)[i];
  if (ARRAY_GROW(*rows, *count + 1, *cap)) return NULL;
  struct top_row *r = &(*rows)[(*count)++];
  row_reset(r, pid, cgroup);
  return r;
}

/* One process: stat always, smaps_rollup when it changed. 0, or -ENOMEM to stop. */
static int see_process(pid_t pid, void *context) {
  struct top *t = context;
  char path[64], stat[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  uint64_t resident = 0, start_time = 0; /* one read: the size, and with the pid, which process it is */
  if (os_read_small(path, stat, sizeof stat) < 0 || !parse_stat_rss(stat, &resident) ||
      !parse_stat_start_time(stat, &start_time) || !resident)
    return 0; /* gone, or a kernel thread */
  bool known = false;
  for (size_t i = 0; i < t->count && !known; i++) known = t->procs[i].pid == pid;
  struct top_row *r = row_of(&t->procs, &t->count, &t->cap, pid, "");
  if (!r) return -ENOMEM;
  if (known && r->start_time != start_time) { /* the pid was reused: a new process, nothing of the old row */
    row_reset(r, pid, "");
    known = false;
  }
  r->start_time = start_time;
  if (!known) {
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    if (os_read_small(path, r->name, sizeof r->name) < 0) r->name[0] = '\0';
    r->name[strcspn(r->name, "\n")] = '\0';
    fleet_cgroup_of(&t->memory, pid, r->cgroup, sizeof r->cgroup);
  }
  r->seen = true;
  /* unchanged: walked again once every TOP_REWALK refreshes, on a refresh that depends on its pid (so the
   * processes' re-walks are spread over the refreshes, not all on one) */
  if (known && r->rss_pages == resident && (t->refresh + (unsigned)pid) % TOP_REWALK != 0) return 0;
  snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
  char *text = NULL;
  if (os_read_file(path, &text, NULL) == 0 && parse_smaps_rollup(text, &r->m)) {
    r->rss_pages = resident;
    r->walked_at = t->refresh;
    t->walked++;
  }
  free(text);
  return 0;
}

/* Drop the rows not seen this refresh and compute the others' share; the rows kept. */
static size_t keep_seen(struct top_row *rows, size_t count) {
  size_t kept = 0;
  for (size_t i = 0; i < count; i++) {
    if (!rows[i].seen) continue;
    rows[i].share = share_of(&rows[i].m);
    rows[kept++] = rows[i];
  }
  return kept;
}

static void sum_groups(struct top *t) {
  for (size_t i = 0; i < t->group_count; i++) {
    struct top_row *g = &t->groups[i];
    g->previous = g->seen ? g->share : g->previous;
    memset(&g->m, 0, sizeof g->m);
    g->processes = 0;
    g->seen = false;
  }
  for (size_t i = 0; i < t->count; i++) {
    const struct top_row *p = &t->procs[i];
    struct top_row *g = row_of(&t->groups, &t->group_count, &t->group_cap, 0, p->cgroup[0] ? p->cgroup : "?");
    if (!g) return;
    g->seen = true;
    g->processes++;
    g->m.rss += p->m.rss, g->m.anonymous += p->m.anonymous, g->m.anon_thp += p->m.anon_thp;
    g->m.shmem_thp += p->m.shmem_thp, g->m.file_thp += p->m.file_thp, g->m.hugetlb += p->m.hugetlb;
  }
  t->group_count = keep_seen(t->groups, t->group_count);
}

static void read_agent(struct top *t) {
  free(t->agent.processes);
  memset(&t->agent, 0, sizeof t->agent);
  if (access(t->args.state_file, R_OK) == 0) agent_read_state(&t->agent, t->args.state_file, 0);
  for (size_t i = 0; i < t->count; i++)
    t->procs[i].agent = agent_daemon_process(&t->agent, t->procs[i].pid, 0, t->procs[i].name);
}

/* One refresh: the counters, every process, the groups, the agent's state. */
static int refresh(struct top *t) {
  t->refresh++;
  t->walked = 0;
  char *text = NULL;
  double now = measure_clock_seconds(CLOCK_MONOTONIC);
  t->vm_before = t->vm;
  if (os_read_file("/proc/vmstat", &text, NULL) == 0) parse_vmstat(text, &t->vm);
  free(text);
  t->vm_seconds = t->refresh > 1 ? now - t->vm_time : 0;
  t->vm_time = now;
  for (size_t i = 0; i < t->count; i++) {
    t->procs[i].seen = false;
    t->procs[i].previous = t->refresh > 1 ? t->procs[i].share : -1;
  }
  int rc = os_for_each_process(see_process, t);
  t->count = keep_seen(t->procs, t->count);
  sum_groups(t);
  read_agent(t);
  return rc;
}

/* ---- order ---------------------------------------------------------------------------------------- */

static enum top_sort sort_key;

static double change_of(const struct top_row *r) { return r->previous < 0 ? 0 : r->share - r->previous; }

static int by_key(const void *x, const void *y) {
  const struct top_row *a = x, *b = y;
  double ka, kb;
  switch (sort_key) {
  case SORT_SHARE: ka = -a->share, kb = -b->share; break; /* least covered first */
  case SORT_CHANGE: ka = change_of(a), kb = change_of(b); break; /* most lost first */
  case SORT_RSS: ka = (double)a->m.rss, kb = (double)b->m.rss; break;
  default: ka = (double)not_huge_of(&a->m), kb = (double)not_huge_of(&b->m); break;
  }
  if (sort_key == SORT_CHANGE) return ka < kb ? -1 : ka > kb ? 1 : a->pid - b->pid;
  return ka < kb ? 1 : ka > kb ? -1 : a->pid - b->pid;
}

static void order(struct top *t, struct top_row **rows, size_t *count) {
  sort_key = (enum top_sort)t->args.sort;
  *rows = t->args.cgroups ? t->groups : t->procs;
  *count = t->args.cgroups ? t->group_count : t->count;
  if (*count > 1) qsort(*rows, *count, sizeof **rows, by_key);
}

/* ---- text ----------------------------------------------------------------------------------------- */

static const enum vmstat_counter header_counters[] = {
    VMSTAT_THP_FAULT_ALLOC, VMSTAT_THP_FAULT_FALLBACK, VMSTAT_THP_COLLAPSE_ALLOC, VMSTAT_THP_SPLIT_PAGE,
    VMSTAT_COMPACT_STALL};

static double per_second(const struct top *t, enum vmstat_counter c) {
  if (t->vm_seconds <= 0 || !t->vm.present[c]) return -1;
  return (double)(t->vm.value[c] - t->vm_before.value[c]) / t->vm_seconds;
}

static void header(const struct top *t, FILE *out, const char *eol) {
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  fprintf(out, "hugify top - %02d:%02d:%02d, refresh %u: %zu processes, %u walked (smaps_rollup), %zu cgroups%s",
          tm.tm_hour, tm.tm_min, tm.tm_sec, t->refresh, t->count, t->walked, t->group_count, eol);
  fputs("THP/s:", out);
  for (size_t i = 0; i < sizeof header_counters / sizeof header_counters[0]; i++) {
    double rate = per_second(t, header_counters[i]);
    if (rate < 0) fprintf(out, " %s -", vmstat_counter_names[header_counters[i]]);
    else fprintf(out, " %s %.1f", vmstat_counter_names[header_counters[i]], rate);
  }
  fputs(eol, out);
  const struct daemon_state *d = &t->agent;
  if (d->fresh) {
    char collapsed[32];
    format_bytes(d->collapsed, collapsed, sizeof collapsed);
    fprintf(out, "agent: pid %d, %llu passes, collapsed %s, pauses p99 %.1f ms longest %.1f ms%s", (int)d->pid,
            (unsigned long long)d->passes, collapsed, d->pause_p99 * 1e3, d->pause_longest * 1e3, eol);
  } else {
    if (d->note[0]) fprintf(out, "agent: %s%s", d->note, eol);
    else fprintf(out, "agent: no state file %s (no agent running, or --state-file)%s", t->args.state_file, eol);
  }
}

/* One row's cells: name, pid/procs, rss, not huge, huge share, change, the agent's last action. */
static void row_text(const struct top *t, const struct top_row *r, char cells[7][240]) {
  if (t->args.cgroups) snprintf(cells[0], 240, "%.200s", r->cgroup);
  else snprintf(cells[0], 240, "%d %.60s", r->pid, r->name);
  if (t->args.cgroups) snprintf(cells[1], 240, "%u", r->processes);
  else snprintf(cells[1], 240, "%.120s", r->cgroup);
  format_bytes(r->m.rss, cells[2], 240);
  format_bytes(not_huge_of(&r->m), cells[3], 240);
  format_percent(huge_of(&r->m), r->m.rss, cells[4], 240);
  if (r->previous < 0) snprintf(cells[5], 240, "-");
  else snprintf(cells[5], 240, "%+.1f", 100 * change_of(r));
  cells[6][0] = '\0';
  if (r->agent && r->agent->last_action[0]) {
    if (r->agent->last_pause >= 0)
      snprintf(cells[6], 240, "%.180s (pause %.1f ms)", r->agent->last_action, r->agent->last_pause * 1e3);
    else snprintf(cells[6], 240, "%.200s", r->agent->last_action);
  }
}

static void table_of(const struct top *t, const struct top_row *rows, size_t shown, size_t selected, FILE *out,
                     const char *eol, int width) {
  static const char *const headers[] = {"process", "cgroup", "rss", "not huge", "huge", "change", "agent last"};
  static const char *const group_headers[] = {"cgroup", "procs", "rss", "not huge", "huge", "change", "agent last"};
  static const bool right[] = {false, false, true, true, true, true, false};
  struct table tab;
  table_init(&tab, 7, t->args.cgroups ? group_headers : headers, right);
  for (size_t i = 0; i < shown; i++) {
    char cells[7][240];
    row_text(t, &rows[i], cells);
    if (i == selected && out == stdout && width > 0) memmove(cells[0] + 1, cells[0], 238), cells[0][0] = '>';
    table_row(&tab, cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6]);
  }
  char *text = NULL;
  size_t length = 0;
  FILE *mem = open_memstream(&text, &length);
  if (mem) {
    table_print(&tab, mem, " ");
    fclose(mem);
    for (char *line = text, *next; line && *line; line = next) {
      next = strchr(line, '\n');
      if (next) *next++ = '\0';
      fprintf(out, "%.*s%s", width > 0 ? width : (int)strlen(line), line, eol);
    }
    free(text);
  }
  table_free(&tab);
}

static size_t rows_shown(size_t count, uint64_t rows) { return rows && rows < count ? (size_t)rows : count; }

static void print_batch(struct top *t) {
  struct top_row *rows;
  size_t count;
  order(t, &rows, &count);
  header(t, stdout, "\n");
  putchar('\n');
  table_of(t, rows, rows_shown(count, t->args.rows), (size_t)-1, stdout, "\n", 0);
  putchar('\n');
  fflush(stdout);
}

/* ---- JSON ----------------------------------------------------------------------------------------- */

static void print_json(struct top *t, FILE *out) {
  struct top_row *rows;
  size_t count;
  order(t, &rows, &count);
  struct json_writer j;
  json_begin(&j, out, "hugify.top/1");
  json_put_u64(&j, "refresh", t->refresh);
  json_put_string(&j, "view", t->args.cgroups ? "cgroups" : "processes");
  json_put_string(&j, "sort", sort_names[t->args.sort]);
  json_put_u64(&j, "processes", t->count);
  json_put_u64(&j, "walked", t->walked);
  json_open_object(&j, "counters_per_second");
  for (int c = 0; c < VMSTAT_COUNTER_COUNT; c++) {
    if (!t->vm.present[c]) continue;
    double rate = per_second(t, (enum vmstat_counter)c);
    if (rate < 0) json_put_null(&j, vmstat_counter_names[c]);
    else json_put_double(&j, vmstat_counter_names[c], rate);
  }
  json_close(&j);
  json_open_array(&j, "rows");
  for (size_t i = 0; i < rows_shown(count, t->args.rows); i++) {
    const struct top_row *r = &rows[i];
    json_open_object(&j, NULL);
    if (!t->args.cgroups) {
      json_put_i64(&j, "pid", r->pid);
      json_put_string(&j, "command", r->name);
    } else {
      json_put_u64(&j, "processes", r->processes);
    }
    json_put_string(&j, "cgroup", r->cgroup[0] ? r->cgroup : NULL);
    json_put_u64(&j, "rss_bytes", r->m.rss);
    json_put_u64(&j, "anonymous_bytes", r->m.anonymous);
    json_put_u64(&j, "anon_not_huge_bytes", not_huge_of(&r->m));
    json_put_u64(&j, "huge_bytes", huge_of(&r->m));
    json_put_fraction(&j, "huge_fraction", huge_of(&r->m), r->m.rss);
    if (r->previous < 0) json_put_null(&j, "huge_fraction_change");
    else json_put_double(&j, "huge_fraction_change", change_of(r));
    if (r->agent) {
      json_open_object(&j, "agent");
      json_put_string(&j, "last_action", r->agent->last_action[0] ? r->agent->last_action : NULL);
      if (r->agent->last_pause >= 0) json_put_double(&j, "last_pause_seconds", r->agent->last_pause);
      else json_put_null(&j, "last_pause_seconds");
      json_close(&j);
    } else {
      json_put_null(&j, "agent");
    }
    json_close(&j);
  }
  json_close(&j);
  json_end(&j);
  fflush(out);
}

/* ---- the live view -------------------------------------------------------------------------------- */

static volatile sig_atomic_t stop_requested;
static void on_stop(int signal_number) { (void)signal_number; stop_requested = 1; }

static void draw(struct top *t) {
  struct winsize ws = {.ws_row = 24, .ws_col = 80};
  ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws);
  struct top_row *rows;
  size_t count;
  order(t, &rows, &count);
  if (t->selected >= count) t->selected = count ? count - 1 : 0;
  fputs("\033[H\033[2J", stdout);
  header(t, stdout, "\r\n");
  printf("keys: q quit, s sort (%s), c %s, up/down select, C collapse the selected process\r\n",
         sort_names[t->args.sort], t->args.cgroups ? "processes" : "cgroups");
  size_t room = ws.ws_row > 7 ? (size_t)ws.ws_row - 7 : 1;
  size_t first = t->selected >= room ? t->selected - room + 1 : 0;
  table_of(t, rows + first, count - first < room ? count - first : room, t->selected - first, stdout, "\r\n",
           ws.ws_col);
  printf("\033[%d;1H%s", ws.ws_row, t->message);
  fflush(stdout);
}

/* A key: a byte, or 'U'/'D' for the arrows; 0 when none came within `seconds`; -1 at EOF. */
static int read_key(double seconds) {
  struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
  if (poll(&p, 1, (int)(seconds * 1000)) <= 0) return 0;
  unsigned char c[3];
  ssize_t n = read(STDIN_FILENO, c, sizeof c);
  if (n <= 0) return -1;
  if (n == 3 && c[0] == 27 && c[1] == '[') return c[2] == 'A' ? 'U' : c[2] == 'B' ? 'D' : 0;
  return c[0];
}

/* C, then y: collapse the selected process at the gentle pace, and say what it cost. */
static void collapse_selected(struct top *t) {
  struct top_row *rows;
  size_t count;
  order(t, &rows, &count);
  if (t->args.cgroups || t->selected >= count) {
    snprintf(t->message, sizeof t->message, "select a process first (c: the process view)");
    return;
  }
  const struct top_row *r = &rows[t->selected];
  int pid = r->pid;
  snprintf(t->message, sizeof t->message, "collapse process %d (%.60s) at the gentle pace? [y/N]", pid, r->name);
  draw(t);
  if (read_key(30) != 'y') {
    snprintf(t->message, sizeof t->message, "not collapsed");
    return;
  }
  snprintf(t->message, sizeof t->message, "collapsing %d ...", pid);
  draw(t);
  struct hugify_collapse_opts opts = {0};
  struct hugify_collapse_report report;
  int rc = hugify_collapse(pid, &opts, &report);
  char made[32];
  format_bytes(report.attempted - report.failed, made, sizeof made);
  if (rc == 0)
    snprintf(t->message, sizeof t->message, "process %d: collapsed %s, longest pause %.1f ms, bloat %llu KiB", pid,
             made, report.longest_pause * 1e3, (unsigned long long)(report.bloat_bytes >> 10));
  else snprintf(t->message, sizeof t->message, "process %d: %.250s", pid, report.reason);
  hugify_collapse_report_free(&report);
}

static int live(struct top *t) {
  struct termios saved, raw;
  if (tcgetattr(STDIN_FILENO, &saved) != 0)
    return fail(EXIT_PRIVILEGE, "top", "no terminal for the live view: use --batch or --json");
  raw = saved;
  raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
  raw.c_cc[VMIN] = 1, raw.c_cc[VTIME] = 0;
  tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  fputs("\033[?1049h\033[?25l", stdout);
  struct sigaction action = {.sa_handler = on_stop};
  sigaction(SIGINT, &action, NULL);
  sigaction(SIGTERM, &action, NULL);
  double next = 0;
  while (!stop_requested) {
    double now = measure_clock_seconds(CLOCK_MONOTONIC);
    if (now >= next) {
      refresh(t);
      next = now + t->args.interval;
    }
    draw(t);
    int key = read_key(next - measure_clock_seconds(CLOCK_MONOTONIC));
    if (key == 'q' || key < 0) break;
    if (key == 's') t->args.sort = (t->args.sort + 1) % SORT_COUNT, t->selected = 0;
    if (key == 'c') t->args.cgroups = !t->args.cgroups, t->selected = 0;
    if ((key == 'j' || key == 'D')) t->selected++;
    if ((key == 'k' || key == 'U') && t->selected > 0) t->selected--;
    if (key == 'C') collapse_selected(t), next = 0;
  }
  fputs("\033[?25h\033[?1049l", stdout);
  fflush(stdout);
  tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  return EXIT_DONE;
}

int cmd_top(int argc, char **argv) {
  static struct top t; /* large: off the stack */
  static struct option_result parsed;
  t.args = (struct top_args){.interval = 2, .rows = 20, .state_file = AGENT_STATE_FILE_DEFAULT};
  if (parse_command_options("top", top_options, 0, argc, argv, &t.args, &parsed) != EXIT_DONE) return EXIT_USAGE;
  if (parsed.operand_count) return usage_error("top", "top takes no operand");
  bool batch = t.args.batch || t.args.json.wanted;
  if (t.args.count && !batch) return usage_error("top", "--count is for --batch and --json");
  if (!t.args.count) t.args.count = 1;
  cgroup_memory_hierarchy("", &t.memory);
  if (!batch) return isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)
                         ? live(&t)
                         : fail(EXIT_PRIVILEGE, "top", "no terminal for the live view: use --batch or --json");
  FILE *json = json_output_open(&t.args.json, "top");
  if (t.args.json.wanted && !json) return EXIT_USAGE;
  struct sigaction action = {.sa_handler = on_stop};
  sigaction(SIGINT, &action, NULL);
  int status = EXIT_DONE;
  for (uint64_t i = 0; i < t.args.count && !stop_requested; i++) {
    if (i) {
      struct timespec pause = {(time_t)t.args.interval, (long)((t.args.interval - (double)(time_t)t.args.interval) * 1e9)};
      nanosleep(&pause, NULL); /* EINTR on Ctrl-C */
    }
    if (refresh(&t) == -ENOMEM) {
      status = fail(EXIT_SHORT, "top", "out of memory");
      break;
    }
    if (json) print_json(&t, json);
    if (json_output_text(&t.args.json)) print_batch(&t);
  }
  if (json && !json_output_close(json, &t.args.json, "top") && status == EXIT_DONE) status = EXIT_SHORT;
  return status;
}
