/* SPDX-License-Identifier: MIT */
/* agent.c - hugify agent: keep a machine's long-running processes on huge pages within a CPU and memory
 * budget, with Prometheus metrics. The decisions are the library's (agent_policy.h: selection, bloat guard,
 * window order, budgets, back-off; collapse.h: the collapse itself); this file is the command: privileges,
 * --once and --status, the daemon's loop and its signals (SIGTERM/SIGHUP). agent.h lists the other files. */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "units.h"
#include "os.h"
#include "probe.h"
#include "procfs.h"

/* ---- privileges --------------------------------------------------------------------------------- */

static bool has_capability(int bit) {
  char *text = agent_read_text("/proc/self/status");
  uint64_t caps = 0;
  bool found = text && parse_capabilities(text, &caps);
  free(text);
  return found && ((caps >> bit) & 1);
}

/* ---- the command -------------------------------------------------------------------------------- */

static int check_privileges(const struct agent_config *c, bool observe_only) {
  char missing[HUGIFY_REASON_MAX];
  if (!observe_only && (probe_require(PROBE_MADV_COLLAPSE, missing, sizeof missing) ||
                        probe_require(PROBE_PROCESS_MADVISE_COLLAPSE, missing, sizeof missing)))
    return fail(EXIT_PRIVILEGE, COMMAND, "%s", missing);
  if (!observe_only && !page_sizes_collapse_wise(hugify_pmd_size())) /* 512 MiB on 64 KiB pages */
    return fail(EXIT_PRIVILEGE, COMMAND, "the PMD huge page is %llu MiB on this kernel: too big to collapse wisely "
                "(`hugify status` says why); faults get mTHP folios instead where a size below it is enabled",
                (unsigned long long)(hugify_pmd_size() >> 20));
  if (!observe_only && !c->dry_run && !has_capability(CAP_SYS_NICE_BIT))
    return fail(EXIT_PRIVILEGE, COMMAND,
                "missing CAP_SYS_NICE: process_madvise(MADV_COLLAPSE) on another process needs it. Run as root, "
                "or grant it (systemd: AmbientCapabilities=CAP_SYS_NICE CAP_SYS_PTRACE; or setcap "
                "cap_sys_nice,cap_sys_ptrace+ep $(command -v hugify))");
  if (!has_capability(CAP_SYS_PTRACE_BIT)) {
    /* without it only our own user's processes are readable: fine when that is all that is selected */
    const struct agent_selectors *s = &c->selectors;
    bool own_only = s->uid_count > 0 && s->pid_count + s->comm_count + s->exe_count + s->cgroup_count == 0;
    for (size_t i = 0; i < s->uid_count; i++) own_only &= s->uids[i] == geteuid();
    if (!own_only)
      return fail(EXIT_PRIVILEGE, COMMAND,
                  "missing CAP_SYS_PTRACE: reading other users' memory maps (/proc/PID/smaps, pagemap) and "
                  "process_madvise on them need ptrace read access. Run as root, grant CAP_SYS_PTRACE, or select "
                  "only your own processes (--uid %u)",
                  (unsigned)geteuid());
  }
  return 0;
}

static bool any_failures(const struct agent *a) {
  for (size_t i = 0; i < a->process_count; i++)
    if (a->processes[i].failures[0].reason[0]) return true;
  return false;
}

/* --once or --status: one pass, its table or JSON. */
static int run_once(struct agent *a, FILE *json, bool status) {
  agent_run_pass(a, !status);
  if (!status) agent_publish_metrics(a);
  if (json_output_text(&a->cl.json)) agent_print_table(a, status);
  if (json) {
    agent_print_json(a, json, status ? "status" : "once");
    if (!json_output_close(json, &a->cl.json, COMMAND)) return EXIT_SHORT;
  }
  free(a->daemon.processes);
  return !status && any_failures(a) ? EXIT_SHORT : EXIT_DONE;
}

/* SIGHUP: the file and the command line again; a bad file keeps the old settings. */
static void reload(struct agent *a) {
  struct agent_config *c = &a->config, fresh;
  if (agent_load_config(&fresh, &a->cl, false) == 0) {
    bool listen_changed = strcmp(fresh.listen, c->listen) != 0;
    *c = fresh;
    a->budget.fraction = c->cpu_budget;
    for (size_t i = 0; i < a->process_count; i++) a->processes[i].idle_signature = 0;
    fprintf(stderr, "hugify agent: configuration reloaded%s\n",
            listen_changed ? " (a new --listen address takes effect at restart)" : "");
  } else {
    fprintf(stderr, "hugify agent: reload failed, keeping the old configuration: %s\n", fresh.error);
  }
}

/* Until the next pass is due, taking the signals as they come. */
static void wait_interval(struct agent *a) {
  double deadline = measure_clock_seconds(CLOCK_MONOTONIC) + a->config.interval;
  for (;;) {
    double left = deadline - measure_clock_seconds(CLOCK_MONOTONIC);
    if (left <= 0) break;
    struct timespec wait = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
    int signal = sigtimedwait(&a->signals, NULL, &wait);
    if (signal == SIGTERM || signal == SIGINT) a->stop_requested = true;
    else if (signal == SIGHUP) {
      reload(a);
      continue; /* the rest of the interval */
    } else if (signal < 0 && errno == EINTR) continue;
    break;
  }
}

/* The daemon's heap stays flat over weeks: a pass's buffers of 16 KiB and more (every smaps text the library
 * reads for a process, pagemap reads, plans, the state file's JSON) are mapped and unmapped on their own rather
 * than taken from the heap, where, freed between long-lived small blocks (the ledgers), they stayed resident
 * and the next one extended it (malloc_info showed a heap two-thirds free, in 32 KiB chunks: smaps texts grown
 * from 16 KiB). glibc raises its mapping threshold to the size of each such block freed (so they all end up
 * in the heap); a threshold set once stays. A mapping costs a few microseconds, a few dozen a pass. */
static void keep_heap_flat(void) {
#ifdef M_MMAP_THRESHOLD
  mallopt(M_MMAP_THRESHOLD, 16 << 10);
#endif
}

/* After each pass, what it freed goes back to the kernel: the heap's free top, and the whole free pages
 * inside it, of every arena (the HTTP thread's too). Without it a block under 16 KiB that found no free
 * chunk of its size grew the heap by its top once in a while (+64 KiB at minute 16 of the 30-minute run
 * over 2000 processes) and the pages stayed resident for good. It walks the arenas' free chunks: a few
 * dozen microseconds a pass here (docs/reliability.md). Non-glibc builds keep their allocator's own rule. */
static void give_back_heap(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

/* The daemon: signals are taken synchronously between passes (and checked between kernel calls). */
static int run_daemon(struct agent *a, FILE *json) {
  struct agent_config *c = &a->config;
  int rc;
  keep_heap_flat();
  sigemptyset(&a->signals);
  sigaddset(&a->signals, SIGTERM);
  sigaddset(&a->signals, SIGINT);
  sigaddset(&a->signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &a->signals, NULL); /* before the HTTP thread starts: it inherits the mask */
  if (c->state_file[0] && (rc = output_file_check(c->state_file, COMMAND, "--state-file", "or none", NULL)) != 0) {
    json_output_close(json, &a->cl.json, COMMAND);
    return rc;
  }
  char heat_reason[HUGIFY_REASON_MAX] = "";
  if ((rc = heat_open(&a->heat, (enum heat_mode)c->heat, heat_reason, sizeof heat_reason)) != 0 ||
      (c->first_touch && (rc = heat_first_touch(&a->heat, c->min_present, page_kind_size(HUGIFY_PAGE_THP), heat_reason,
                                                 sizeof heat_reason)) != 0)) {
    heat_close(&a->heat);
    json_output_close(json, &a->cl.json, COMMAND);
    return fail(rc == -EINVAL ? EXIT_USAGE : EXIT_PRIVILEGE, COMMAND, "%s", heat_reason);
  }
  agent_resume_state(a);
  if (c->listen[0] && (rc = agent_start_http(a)) != 0) {
    heat_close(&a->heat);
    json_output_close(json, &a->cl.json, COMMAND);
    return rc;
  }
  fprintf(stderr, "hugify agent: started (pid %d): interval %.3g s, CPU budget %.3g %% of a core, bloat guard %.3g "
          "%%, heat %s (%s)%s%s%s%s\n", (int)getpid(), c->interval, c->cpu_budget * 100, c->min_present * 100,
          heat_signal_name(a->heat.signal), a->heat.reason, a->heat.first_touch ? ", first touch" : "",
          c->dry_run ? ", dry run" : "",
          c->listen[0] ? ", metrics on http://" : "", c->listen);
  while (!a->stop_requested) {
    agent_budget_refill(&a->budget, measure_clock_seconds(CLOCK_MONOTONIC));
    if (agent_budget_allows(&a->budget)) {
      uint64_t before = a->collapsed_bytes;
      agent_run_pass(a, true);
      if (a->collapsed_bytes != before) {
        char made[32];
        format_bytes(a->collapsed_bytes - before, made, sizeof made);
        fprintf(stderr, "hugify agent: pass %llu: collapsed %s over %zu selected processes\n",
                (unsigned long long)a->passes, made, a->process_count);
      }
    }
    agent_publish_metrics(a);
    agent_write_state(a);
    if (json) agent_print_json(a, json, "pass"), fflush(json);
    give_back_heap();
    wait_interval(a);
  }
  agent_stop_http(a);
  heat_close(&a->heat); /* the kdamond off and removed: nothing of the monitoring is left running */
  agent_publish_metrics(a);
  if (json && !json_output_close(json, &a->cl.json, COMMAND)) return EXIT_SHORT;
  fprintf(stderr, "hugify agent: stopped after %llu passes, %.3f s CPU\n", (unsigned long long)a->passes,
          agent_own_cpu_seconds());
  for (size_t i = 0; i < a->process_count; i++) agent_free_process(&a->processes[i]);
  free(a->processes);
  free(a->read_buffer);
  free(a->metrics);
  return EXIT_DONE;
}

int cmd_agent(int argc, char **argv) {
  static struct agent agent; /* large (selectors); one per process */
  struct agent *a = &agent;
  memset(a, 0, sizeof *a);
  pthread_mutex_init(&a->metrics_lock, NULL);
  int rc = agent_parse_command_line(argc, argv, &a->cl);
  if (rc) return rc;
  if ((rc = agent_load_config(&a->config, &a->cl, true)) != 0) return rc;
  struct agent_config *c = &a->config;
  bool status = a->cl.status;
  if (c->first_touch && (c->once || status))
    return usage_error(COMMAND, "--first-touch marks what DAMON finds hot between passes: not with --once or --status");
  if ((rc = check_privileges(c, status)) != 0) return rc;
  if (status && (rc = agent_read_state(&a->daemon, a->config.state_file, a->config.interval)) != 0) return rc;
  a->cpu_mark = measure_clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
  agent_budget_init(&a->budget, c->cpu_budget, 60, c->interval, measure_clock_seconds(CLOCK_MONOTONIC));

  FILE *json = NULL;
  /* --once and --status write one document; the daemon appends one per pass as it goes. */
  if (a->cl.json.wanted && !(json = status || c->once ? json_output_open(&a->cl.json, COMMAND)
                                                      : json_output_open_append(&a->cl.json, COMMAND)))
    return EXIT_USAGE;
  return status || c->once ? run_once(a, json, status) : run_daemon(a, json);
}
