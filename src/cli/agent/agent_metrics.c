/* SPDX-License-Identifier: MIT */
/* agent_metrics.c - the agent's Prometheus metrics: rendered after every pass, written to --metrics-file
 * (replaced atomically) and served over HTTP at /metrics (libmicrohttpd) on --listen. The HTTP server is
 * loaded with dlopen only then: linked, it and its TLS stack (gnutls and a dozen more libraries) would be
 * loaded and relocated at every start of every command (docs/run.md, "What run costs"). */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "agent.h"
#include "prometheus.h"
#include "safe_file.h"
#include "units.h"

/* ---- metrics ------------------------------------------------------------------------------------ */

/* The label scheme (docs/agent.md, "Metrics and labels"): host totals without labels, and gauges per cgroup
 * for the --metrics-cgroups cgroups with most memory that is or could be on huge pages, the rest summed as
 * cgroup="other". No pid or comm label: a host of thousands of short processes makes a bounded number of
 * series. Labels otherwise come from small fixed sets (class, reason, passes, kind). */

/* The figures of one cgroup (or of "other"): sums over the selected processes in it. */
struct cgroup_sum {
  const char *cgroup;
  uint64_t resident, huge, collapsible;
  unsigned processes, backed_off;
};

static uint64_t eligible(const struct cgroup_sum *c) { return c->huge + c->collapsible; }

static int by_eligible(const void *x, const void *y) {
  const struct cgroup_sum *a = x, *b = y;
  uint64_t ea = eligible(a), eb = eligible(b);
  return ea < eb ? 1 : ea > eb ? -1 : strcmp(a->cgroup, b->cgroup);
}

static void add_to(struct cgroup_sum *c, const struct agent *a, const struct process_state *p) {
  c->resident += p->total.resident;
  c->huge += hugify_usage_huge(&p->total);
  c->collapsible += p->collapsible;
  c->processes++;
  c->backed_off += !agent_ledger_allows(&p->ledger, a->passes);
}

/* The cgroups of the selected processes, most eligible memory first; the ones past `keep` summed into the
 * entry at index `keep` ("other"). Returns how many entries to print, *out malloc'd (NULL when empty). */
static size_t cgroup_sums(const struct agent *a, size_t keep, struct cgroup_sum **out) {
  struct cgroup_sum *sums = calloc(a->process_count + 1, sizeof *sums);
  size_t count = 0;
  *out = sums;
  if (!sums) return 0;
  for (size_t i = 0; i < a->process_count; i++) {
    const struct process_state *p = &a->processes[i];
    const char *name = p->cgroup[0] ? p->cgroup : "unknown";
    size_t k = 0;
    while (k < count && strcmp(sums[k].cgroup, name) != 0) k++;
    if (k == count) sums[count++].cgroup = name;
    add_to(&sums[k], a, p);
  }
  if (count > 1) qsort(sums, count, sizeof *sums, by_eligible);
  if (count <= keep) return count;
  struct cgroup_sum other = {.cgroup = "other"};
  for (size_t k = keep; k < count; k++) {
    other.resident += sums[k].resident, other.huge += sums[k].huge, other.collapsible += sums[k].collapsible;
    other.processes += sums[k].processes, other.backed_off += sums[k].backed_off;
  }
  sums[keep] = other;
  return keep + 1;
}

enum cgroup_metric { CG_RESIDENT, CG_HUGE, CG_COLLAPSIBLE, CG_PROCESSES, CG_BACKED_OFF };

static void cgroup_family(FILE *out, const struct cgroup_sum *sums, size_t count, enum cgroup_metric which,
                          const char *name, const char *help) {
  prometheus_family(out, name, "gauge", help);
  for (size_t k = 0; k < count; k++) {
    const struct cgroup_sum *c = &sums[k];
    double value = which == CG_RESIDENT ? (double)c->resident : which == CG_HUGE ? (double)c->huge
                 : which == CG_COLLAPSIBLE ? (double)c->collapsible : which == CG_PROCESSES ? (double)c->processes
                 : (double)c->backed_off;
    const char *labels[] = {"cgroup", c->cgroup, NULL, NULL};
    prometheus_sample(out, name, labels, value);
  }
}

/* The kernel's THP bytes of each cgroup with series of its own (memory.stat), by kind. */
static void kernel_family(const struct agent *a, FILE *out, const struct cgroup_sum *sums, size_t count) {
  const char *name = "hugify_agent_cgroup_kernel_thp_bytes";
  prometheus_family(out, name, "gauge",
                    "THP bytes the kernel charges the cgroup (memory.stat anon_thp, shmem_thp, file_thp; cgroup v1: "
                    "rss_huge), beside the agent's walks of its processes.");
  for (size_t k = 0; k < count; k++) {
    struct cgroup_thp t;
    if (sums[k].cgroup[0] != '/' || cgroup_read_thp("", &a->memory_root, sums[k].cgroup, &t) != 0) continue;
    const char *kinds[] = {"anon", "shmem", "file"};
    const uint64_t values[] = {t.anon, t.shmem, t.file};
    const bool present[] = {true, t.has_shmem, t.has_file};
    for (int i = 0; i < 3; i++) {
      if (!present[i]) continue;
      const char *labels[] = {"cgroup", sums[k].cgroup, "kind", kinds[i], NULL, NULL};
      prometheus_sample(out, name, labels, (double)values[i]);
    }
  }
}

/* Host totals of the selected processes by class (resident or huge). */
static void class_family(const struct agent *a, FILE *out, bool huge, const char *name, const char *help) {
  prometheus_family(out, name, "gauge", help);
  for (int k = 0; k < HUGIFY_CLASS_COUNT; k++) {
    double sum = 0;
    for (size_t i = 0; i < a->process_count; i++) {
      const struct hugify_usage *u = &a->processes[i].classes[k];
      sum += (double)(huge ? hugify_usage_huge(u) : u->resident);
    }
    const char *labels[] = {"class", hugify_memory_class_name(k), NULL, NULL};
    prometheus_sample(out, name, labels, sum);
  }
}

/* Windows the kernel refused, by errno, over every process the agent served (also those gone). */
static void failure_family(const struct agent *a, FILE *out) {
  struct failure_count totals[FAILURE_KINDS];
  memcpy(totals, a->retired_failures, sizeof totals);
  for (size_t i = 0; i < a->process_count; i++) agent_add_failures(totals, a->processes[i].failures);
  const char *name = "hugify_agent_collapse_failures_total";
  prometheus_family(out, name, "counter", "Huge-page (PMD) windows the kernel refused to collapse, by errno.");
  for (size_t r = 0; r < FAILURE_KINDS && totals[r].reason[0]; r++) {
    const char *labels[] = {"reason", totals[r].reason, NULL, NULL};
    prometheus_sample(out, name, labels, (double)totals[r].windows);
  }
}

/* The share of collapsed bytes still huge 1 and 10 passes later, over the processes, weighted by what the
 * agent collapsed in each; no sample until one is judged. */
static void lasting_family(const struct agent *a, FILE *out) {
  const char *name = "hugify_agent_lasting_ratio";
  prometheus_family(out, name, "gauge", "Share of the bytes the agent collapsed that were still huge 1 and 10 passes later.");
  for (int k = 0; k < 2; k++) {
    double sum = 0, weight = 0;
    for (size_t i = 0; i < a->process_count; i++) {
      const struct process_state *p = &a->processes[i];
      double share = k == 0 ? agent_ledger_early_share(&p->ledger) : agent_ledger_late_share(&p->ledger);
      if (share < 0) continue;
      double w = p->collapsed_bytes ? (double)p->collapsed_bytes : 1;
      sum += share * w, weight += w;
    }
    if (weight <= 0) continue;
    const char *labels[] = {"passes", k == 0 ? "1" : "10", NULL, NULL};
    prometheus_sample(out, name, labels, sum / weight);
  }
}

static void host_gauge(FILE *out, const char *name, const char *type, const char *help, double value) {
  prometheus_family(out, name, type, help);
  prometheus_sample(out, name, NULL, value);
}

static void render_cgroups(struct agent *a, FILE *out) {
  struct cgroup_sum *sums;
  size_t count = cgroup_sums(a, (size_t)a->config.metrics_cgroups, &sums);
  cgroup_family(out, sums, count, CG_RESIDENT, "hugify_agent_cgroup_resident_bytes",
                "Resident memory of the selected processes in the cgroup (smaps; hugetlb included).");
  cgroup_family(out, sums, count, CG_HUGE, "hugify_agent_cgroup_huge_bytes",
                "Of which on huge pages (THP and hugetlb).");
  cgroup_family(out, sums, count, CG_COLLAPSIBLE, "hugify_agent_cgroup_collapsible_bytes",
                "Resident memory of the selected processes in the cgroup that is not huge but could be collapsed.");
  cgroup_family(out, sums, count, CG_PROCESSES, "hugify_agent_cgroup_processes", "Selected processes in the cgroup.");
  cgroup_family(out, sums, count, CG_BACKED_OFF, "hugify_agent_cgroup_backed_off_processes",
                "Processes of the cgroup backed off because their collapses do not last.");
  kernel_family(a, out, sums, count);
  free(sums);
}

/* The access signal: processes by the signal their last plan used (a fixed set of labels), and the
 * monitoring's own work. */
static void heat_family(const struct agent *a, FILE *out) {
  const char *name = "hugify_agent_heat_processes";
  prometheus_family(out, name, "gauge", "Selected processes by the access signal their last plan used (none: densest first).");
  static const enum heat_signal signals[] = {HEAT_DAMON, HEAT_SOFT_DIRTY, HEAT_NONE};
  for (size_t s = 0; s < sizeof signals / sizeof signals[0]; s++) {
    double count = 0;
    for (size_t i = 0; i < a->process_count; i++) count += a->processes[i].heat_signal == signals[s];
    const char *labels[] = {"signal", heat_signal_name(signals[s]), NULL, NULL};
    prometheus_sample(out, name, labels, count);
  }
  const struct heat_work *w = &a->heat.work;
  const struct { const char *name, *type, *help; double value; bool shown; } work[] = {
      {"hugify_agent_heat_damon_targets", "gauge", "Processes DAMON monitors for the agent.", (double)w->targets, true},
      {"hugify_agent_heat_damon_regions", "gauge", "Regions DAMON reported at the agent's last read.",
       (double)w->regions, true},
      {"hugify_agent_heat_damon_reads_total", "counter",
       "Reads of DAMON's regions (one per pass; two when the first found none).", (double)w->reads, true},
      {"hugify_agent_heat_damon_monitored_seconds_total", "counter",
       "Time DAMON monitored for the agent (aggregations: this / 0.1 s; samples: this / 5 ms per region).",
       w->monitored_seconds, true},
      {"hugify_agent_heat_kdamond_cpu_seconds_total", "counter", "CPU time of the agent's kdamond thread (its schedstat).",
       w->kdamond_cpu, w->kdamond_cpu >= 0 && a->heat.signal == HEAT_DAMON},
      {"hugify_agent_heat_soft_dirty_clears_total", "counter",
       "Soft-dirty resets (clear_refs 4) of the selected processes.", (double)w->clears, true},
      {"hugify_agent_first_touch_applied_bytes_total", "counter",
       "Bytes the agent's DAMOS hugepage scheme (--first-touch) marked MADV_HUGEPAGE (DAMON's sz_applied).",
       (double)w->first_touch_applied_bytes, a->heat.first_touch},
  };
  for (size_t k = 0; k < sizeof work / sizeof work[0]; k++)
    if (work[k].shown) host_gauge(out, work[k].name, work[k].type, work[k].help, work[k].value);
}

static void render_metrics(struct agent *a, FILE *out) {
  render_cgroups(a, out);
  class_family(a, out, false, "hugify_agent_resident_bytes",
               "Resident memory of the selected processes by class (smaps; hugetlb included).");
  class_family(a, out, true, "hugify_agent_huge_bytes", "Of which on huge pages (THP and hugetlb), by class.");
  double collapsible = 0, undone = (double)a->retired_undone, backed_off = 0;
  for (size_t i = 0; i < a->process_count; i++) {
    collapsible += (double)a->processes[i].collapsible;
    undone += (double)a->processes[i].ledger.undone_bytes;
    backed_off += !agent_ledger_allows(&a->processes[i].ledger, a->passes);
  }
  host_gauge(out, "hugify_agent_collapsible_bytes", "gauge",
             "Resident memory of the selected processes that is not huge but could be collapsed.", collapsible);
  failure_family(a, out);
  lasting_family(a, out);
  heat_family(a, out);
  host_gauge(out, "hugify_agent_undone_bytes_total", "counter",
             "Collapsed bytes found split again within a few passes (the allocator gave the memory back).", undone);
  host_gauge(out, "hugify_agent_backed_off_processes", "gauge",
             "Processes backed off now because their collapses do not last.", backed_off);
  host_gauge(out, "hugify_agent_selected_processes", "gauge", "Processes selected in the last pass.",
             (double)a->process_count);
  host_gauge(out, "hugify_agent_collapsed_bytes_total", "counter", "Bytes the agent put on huge pages.",
             (double)a->collapsed_bytes);
  host_gauge(out, "hugify_agent_recollapsed_bytes_total", "counter", "Bytes collapsed again after a split.",
             (double)a->recollapsed_bytes);
  host_gauge(out, "hugify_agent_bloat_bytes_total", "counter",
             "Bytes the agent's collapses zero-filled: per window collapsed, the PMD size minus the bytes present before.",
             (double)a->bloat_bytes);
  host_gauge(out, "hugify_agent_churn_backoffs_total", "counter",
             "Times a process was backed off because its collapses did not last.", (double)a->churn_backoffs);
  host_gauge(out, "hugify_agent_kernel_collapsed_bytes_total", "counter",
             "Bytes in the selected processes that became huge without the agent (khugepaged's, or a fault's).",
             (double)a->kernel_bytes);
  host_gauge(out, "hugify_agent_kernel_collapse_allocs_total", "counter",
             "The kernel's thp_collapse_alloc (/proc/vmstat) since the agent started: host-wide, the agent's own "
             "collapses included.", (double)a->kernel_collapse_allocs);
  host_gauge(out, "hugify_agent_damos_processes", "gauge",
             "Selected processes left to the kernel: another owner's DAMOS collapse or hugepage scheme targets them.",
             (double)a->damos_processes);
  host_gauge(out, "hugify_agent_damos_huge_bytes", "gauge",
             "Huge bytes of the processes left to another owner's DAMOS scheme (made huge by the kernel).",
             (double)a->damos_huge_bytes);
  host_gauge(out, "hugify_agent_thp_disabled_processes", "gauge",
             "Processes the selectors match that disabled THP (prctl PR_SET_THP_DISABLE, e.g. systemd MemoryTHP=).",
             (double)a->thp_disabled_count);
  prometheus_histogram(out, "hugify_agent_pause_seconds",
                       "How long each collapse call held up the process it acted on (an upper bound, from its "
                       "threads' schedstat; calls while no thread of it ran are not counted).",
                       pause_bucket_bounds, PAUSE_BUCKETS, a->harm.pauses.counts, a->harm.pauses.sum);
  host_gauge(out, "hugify_agent_longest_call_seconds", "gauge", "The longest single collapse call.", a->harm.longest_call);
  host_gauge(out, "hugify_agent_passes_total", "counter", "Passes over the processes.", (double)a->passes);
  host_gauge(out, "hugify_agent_cpu_seconds_total", "counter", "CPU time of the agent (user and system).",
             agent_own_cpu_seconds());
  host_gauge(out, "hugify_agent_cpu_budget_fraction", "gauge", "The CPU budget, as a fraction of one core.",
             a->config.cpu_budget);
  host_gauge(out, "hugify_agent_budget_stops_total", "counter", "Collapses cut short because the CPU budget was spent.",
             (double)a->budget_stops);
  host_gauge(out, "hugify_agent_pass_ceiling_stops_total", "counter",
             "Collapses cut short because their pass reached its CPU ceiling (the budget would have allowed more).",
             (double)a->pass_ceiling_stops);
  host_gauge(out, "hugify_agent_memory_gate_open", "gauge",
             "1 when available memory and memory pressure allow collapsing, else 0.", a->memory_open ? 1 : 0);
  host_gauge(out, "hugify_agent_memory_gate_closed_passes_total", "counter",
             "Passes without collapse because memory was short.", (double)a->memory_gate_closed_passes);
  host_gauge(out, "hugify_agent_last_pass_seconds", "gauge", "Wall time of the last pass.", a->last_pass_seconds);
  host_gauge(out, "hugify_agent_last_pass_timestamp_seconds", "gauge", "When the last pass ended (Unix time).",
             a->last_pass_end);
}

void agent_publish_metrics(struct agent *a) {
  char *text = NULL;
  size_t length = 0;
  FILE *out = open_memstream(&text, &length);
  if (!out) return;
  render_metrics(a, out);
  fclose(out);
  if (a->config.metrics_file[0]) {
    char reason[512] = "";
    /* a new file (O_EXCL|O_NOFOLLOW, 0600) in the same directory, then renamed over: readers see whole files */
    int rc = safe_file_replace(a->config.metrics_file, text, length, 0644, 0, reason, sizeof reason);
    agent_note_write("metrics", rc, reason, &a->metrics_write_failing);
  }
  pthread_mutex_lock(&a->metrics_lock);
  free(a->metrics);
  a->metrics = text;
  a->metrics_length = length;
  pthread_mutex_unlock(&a->metrics_lock);
}

/* The few functions of libmicrohttpd the agent calls, found by dlsym (their types from its header). */
static struct {
  __typeof__(MHD_start_daemon) *start_daemon;
  __typeof__(MHD_stop_daemon) *stop_daemon;
  __typeof__(MHD_create_response_from_buffer) *create_response_from_buffer;
  __typeof__(MHD_add_response_header) *add_response_header;
  __typeof__(MHD_queue_response) *queue_response;
  __typeof__(MHD_destroy_response) *destroy_response;
} mhd;

/* dlopen HUGIFY_MICROHTTPD_SONAME once: 0, or -ENOENT with the loader's message in reason. */
static int load_microhttpd(char *reason, size_t cap) {
  if (mhd.start_daemon) return 0;
  void *library = dlopen(HUGIFY_MICROHTTPD_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    snprintf(reason, cap, "%s", dlerror());
    return -ENOENT;
  }
  struct { const char *name; void **slot; } wanted[] = {
      {"MHD_start_daemon", (void **)&mhd.start_daemon},
      {"MHD_stop_daemon", (void **)&mhd.stop_daemon},
      {"MHD_create_response_from_buffer", (void **)&mhd.create_response_from_buffer},
      {"MHD_add_response_header", (void **)&mhd.add_response_header},
      {"MHD_queue_response", (void **)&mhd.queue_response},
      {"MHD_destroy_response", (void **)&mhd.destroy_response},
  };
  for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
    void *symbol = dlsym(library, wanted[i].name);
    if (!symbol) {
      snprintf(reason, cap, "%s has no %s", HUGIFY_MICROHTTPD_SONAME, wanted[i].name);
      memset(&mhd, 0, sizeof mhd);
      dlclose(library);
      return -ENOENT;
    }
    memcpy(wanted[i].slot, &symbol, sizeof symbol);
  }
  return 0;
}

void agent_stop_http(struct agent *a) {
  if (a->http) mhd.stop_daemon(a->http);
  a->http = NULL;
}

static enum MHD_Result serve_http(void *context, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload, size_t *upload_size,
                                  void **request) {
  (void)version, (void)upload, (void)upload_size, (void)request;
  struct agent *a = context;
  struct MHD_Response *response;
  unsigned status = MHD_HTTP_OK;
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
    static const char text[] = "only GET\n";
    response = mhd.create_response_from_buffer(sizeof text - 1, (void *)text, MHD_RESPMEM_PERSISTENT);
    status = MHD_HTTP_METHOD_NOT_ALLOWED;
  } else if (strcmp(url, "/metrics") == 0) {
    pthread_mutex_lock(&a->metrics_lock);
    response = mhd.create_response_from_buffer(a->metrics_length, a->metrics ? a->metrics : (char *)"",
                                               MHD_RESPMEM_MUST_COPY);
    pthread_mutex_unlock(&a->metrics_lock);
    if (response) mhd.add_response_header(response, "Content-Type", PROMETHEUS_CONTENT_TYPE);
  } else {
    static const char text[] = "hugify agent: metrics are at /metrics\n";
    response = mhd.create_response_from_buffer(sizeof text - 1, (void *)text, MHD_RESPMEM_PERSISTENT);
    status = MHD_HTTP_NOT_FOUND;
  }
  if (!response) return MHD_NO;
  enum MHD_Result rc = mhd.queue_response(connection, status, response);
  mhd.destroy_response(response);
  return rc;
}

/* --listen [ADDR:]PORT -> a socket address (IPv4 or [IPv6]). */
static bool parse_listen(const char *text, struct sockaddr_storage *out, char *reason, size_t cap) {
  memset(out, 0, sizeof *out);
  char host[128] = "127.0.0.1";
  const char *port_text = text, *colon = strrchr(text, ':');
  if (colon) {
    size_t n = (size_t)(colon - text);
    if (n >= sizeof host) n = sizeof host - 1;
    memcpy(host, text, n);
    host[n] = '\0';
    port_text = colon + 1;
    if (host[0] == '[' && n >= 2 && host[n - 1] == ']') memmove(host, host + 1, n - 2), host[n - 2] = '\0';
  }
  uint64_t port;
  if (!parse_count(port_text, 1, 65535, &port)) {
    snprintf(reason, cap, "listen: '%s' has no port from 1 to 65535", text);
    return false;
  }
  struct sockaddr_in *v4 = (struct sockaddr_in *)out;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
  if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
  } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
  } else {
    snprintf(reason, cap, "listen: '%s' is not an IPv4 or [IPv6] address", host);
    return false;
  }
  return true;
}

int agent_start_http(struct agent *a) {
  struct sockaddr_storage address;
  char reason[256];
  if (!parse_listen(a->config.listen, &address, reason, sizeof reason)) return fail(EXIT_USAGE, COMMAND, "%s", reason);
  if (load_microhttpd(reason, sizeof reason) != 0)
    return fail(EXIT_PRIVILEGE, COMMAND, "--listen needs libmicrohttpd (%s); install it (Debian: apt install "
                "libmicrohttpd12), or use --metrics-file instead", reason);
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
  if (address.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  uint16_t port = ntohs(address.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&address)->sin6_port
                                                      : ((struct sockaddr_in *)&address)->sin_port);
  a->http = mhd.start_daemon(flags, port, NULL, NULL, serve_http, a, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address,
                             MHD_OPTION_CONNECTION_LIMIT, (unsigned)16, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
                             MHD_OPTION_END);
  if (!a->http) return fail(EXIT_SHORT, COMMAND, "cannot listen on %s: %s", a->config.listen, strerror(errno));
  return 0;
}
