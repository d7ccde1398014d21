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

double agent_own_cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
         (double)u.ru_stime.tv_usec * 1e-6;
}

enum process_metric { RESIDENT, HUGE, COLLAPSIBLE, COLLAPSED, FAILURES, LASTING, RECOLLAPSED, UNDONE, BLOAT, BACKED_OFF };

static double process_value(const struct agent *a, const struct process_state *p, enum process_metric which) {
  switch (which) {
  case COLLAPSIBLE: return (double)p->collapsible;
  case COLLAPSED: return (double)p->collapsed_bytes;
  case RECOLLAPSED: return (double)p->ledger.recollapsed_bytes;
  case UNDONE: return (double)p->ledger.undone_bytes;
  case BLOAT: return (double)p->bloat_bytes;
  case BACKED_OFF: return agent_ledger_allows(&p->ledger, a->passes) ? 0 : 1;
  default: return 0;
  }
}

/* One family of per-process samples, labelled pid and comm (and class or reason). */
static void process_family(const struct agent *a, FILE *out, enum process_metric which, const char *name,
                           const char *type, const char *help) {
  prometheus_family(out, name, type, help);
  for (size_t i = 0; i < a->process_count; i++) {
    const struct process_state *p = &a->processes[i];
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)p->pid);
    const char *labels[] = {"pid", pid, "comm", p->comm, NULL, NULL, NULL};
    if (which == LASTING) {
      labels[4] = "passes";
      double shares[2] = {agent_ledger_early_share(&p->ledger), agent_ledger_late_share(&p->ledger)};
      for (int k = 0; k < 2; k++) {
        if (shares[k] < 0) continue; /* nothing judged yet: no sample rather than a made-up 0 or 1 */
        labels[5] = k == 0 ? "1" : "10";
        prometheus_sample(out, name, labels, shares[k]);
      }
    } else if (which == BACKED_OFF) {
      labels[4] = "allocator";
      labels[5] = allocator_name(p->allocator);
      prometheus_sample(out, name, labels, process_value(a, p, which));
    } else if (which != FAILURES && which != RESIDENT && which != HUGE) {
      prometheus_sample(out, name, labels, process_value(a, p, which));
    } else if (which == FAILURES) {
      labels[4] = "reason";
      for (size_t k = 0; k < FAILURE_KINDS && p->failures[k].reason[0]; k++) {
        labels[5] = p->failures[k].reason;
        prometheus_sample(out, name, labels, (double)p->failures[k].windows);
      }
    } else {
      labels[4] = "class";
      for (int k = 0; k < HUGIFY_CLASS_COUNT; k++) {
        labels[5] = hugify_memory_class_name(k);
        const struct hugify_usage *u = &p->classes[k];
        prometheus_sample(out, name, labels, (double)(which == RESIDENT ? u->resident : hugify_usage_huge(u)));
      }
    }
  }
}

static void render_metrics(struct agent *a, FILE *out) {
  process_family(a, out, RESIDENT, "hugify_agent_process_resident_bytes", "gauge",
                 "Resident memory of a selected process by class (smaps; hugetlb included).");
  process_family(a, out, HUGE, "hugify_agent_process_huge_bytes", "gauge",
                 "Memory of a selected process on huge pages (THP and hugetlb) by class.");
  process_family(a, out, COLLAPSIBLE, "hugify_agent_process_collapsible_bytes", "gauge",
                 "Resident memory of a selected process that is not huge but could be collapsed.");
  process_family(a, out, COLLAPSED, "hugify_agent_process_collapsed_bytes_total", "counter",
                 "Bytes the agent put on huge pages in a process (windows collapsed).");
  process_family(a, out, FAILURES, "hugify_agent_process_collapse_failures_total", "counter",
                 "2 MiB windows the kernel refused to collapse, by errno.");
  process_family(a, out, LASTING, "hugify_agent_process_lasting_ratio", "gauge",
                 "Share of the bytes the agent collapsed that were still huge 1 and 10 passes later.");
  process_family(a, out, RECOLLAPSED, "hugify_agent_process_recollapsed_bytes_total", "counter",
                 "Bytes collapsed again: windows the agent had collapsed before and that were split since.");
  process_family(a, out, UNDONE, "hugify_agent_process_undone_bytes_total", "counter",
                 "Collapsed bytes found split again within a few passes (the allocator gave the memory back).");
  process_family(a, out, BLOAT, "hugify_agent_process_bloat_bytes_total", "counter",
                 "Bytes the agent's collapses zero-filled: per window collapsed, 2 MiB minus the bytes present before.");
  process_family(a, out, BACKED_OFF, "hugify_agent_process_churn_backoff", "gauge",
                 "1 while the process is backed off because its collapses do not last.");
  prometheus_family(out, "hugify_agent_selected_processes", "gauge", "Processes selected in the last pass.");
  prometheus_sample(out, "hugify_agent_selected_processes", NULL, (double)a->process_count);
  prometheus_family(out, "hugify_agent_collapsed_bytes_total", "counter", "Bytes the agent put on huge pages.");
  prometheus_sample(out, "hugify_agent_collapsed_bytes_total", NULL, (double)a->collapsed_bytes);
  prometheus_family(out, "hugify_agent_recollapsed_bytes_total", "counter", "Bytes collapsed again after a split.");
  prometheus_sample(out, "hugify_agent_recollapsed_bytes_total", NULL, (double)a->recollapsed_bytes);
  prometheus_family(out, "hugify_agent_bloat_bytes_total", "counter", "Bytes the agent's collapses zero-filled.");
  prometheus_sample(out, "hugify_agent_bloat_bytes_total", NULL, (double)a->bloat_bytes);
  prometheus_family(out, "hugify_agent_churn_backoffs_total", "counter",
                    "Times a process was backed off because its collapses did not last.");
  prometheus_sample(out, "hugify_agent_churn_backoffs_total", NULL, (double)a->churn_backoffs);
  prometheus_histogram(out, "hugify_agent_pause_seconds",
                       "How long each collapse call held up the process it acted on (an upper bound, from its "
                       "threads' schedstat; calls while no thread of it ran are not counted).",
                       pause_bucket_bounds, PAUSE_BUCKETS, a->harm.pauses.counts, a->harm.pauses.sum);
  prometheus_family(out, "hugify_agent_longest_call_seconds", "gauge", "The longest single collapse call.");
  prometheus_sample(out, "hugify_agent_longest_call_seconds", NULL, a->harm.longest_call);
  prometheus_family(out, "hugify_agent_passes_total", "counter", "Passes over the processes.");
  prometheus_sample(out, "hugify_agent_passes_total", NULL, (double)a->passes);
  prometheus_family(out, "hugify_agent_cpu_seconds_total", "counter", "CPU time of the agent (user and system).");
  prometheus_sample(out, "hugify_agent_cpu_seconds_total", NULL, agent_own_cpu_seconds());
  prometheus_family(out, "hugify_agent_cpu_budget_fraction", "gauge", "The CPU budget, as a fraction of one core.");
  prometheus_sample(out, "hugify_agent_cpu_budget_fraction", NULL, a->config.cpu_budget);
  prometheus_family(out, "hugify_agent_budget_stops_total", "counter", "Collapses cut short because the CPU budget was spent.");
  prometheus_sample(out, "hugify_agent_budget_stops_total", NULL, (double)a->budget_stops);
  prometheus_family(out, "hugify_agent_memory_gate_open", "gauge",
                    "1 when available memory and memory pressure allow collapsing, else 0.");
  prometheus_sample(out, "hugify_agent_memory_gate_open", NULL, a->memory_open ? 1 : 0);
  prometheus_family(out, "hugify_agent_memory_gate_closed_passes_total", "counter", "Passes without collapse because memory was short.");
  prometheus_sample(out, "hugify_agent_memory_gate_closed_passes_total", NULL, (double)a->memory_gate_closed_passes);
  prometheus_family(out, "hugify_agent_last_pass_seconds", "gauge", "Wall time of the last pass.");
  prometheus_sample(out, "hugify_agent_last_pass_seconds", NULL, a->last_pass_seconds);
  prometheus_family(out, "hugify_agent_last_pass_timestamp_seconds", "gauge", "When the last pass ended (Unix time).");
  prometheus_sample(out, "hugify_agent_last_pass_timestamp_seconds", NULL, a->last_pass_end);
}

void agent_publish_metrics(struct agent *a) {
  char *text = NULL;
  size_t length = 0;
  FILE *out = open_memstream(&text, &length);
  if (!out) return;
  render_metrics(a, out);
  fclose(out);
  if (a->config.metrics_file[0]) {
    char reason[512];
    /* a new file (O_EXCL|O_NOFOLLOW, 0600) in the same directory, then renamed over: readers see whole files */
    if (safe_file_replace(a->config.metrics_file, text, length, 0644, 0, reason, sizeof reason) != 0)
      fprintf(stderr, "hugify agent: metrics: %s\n", reason);
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
