// SPDX-License-Identifier: MIT
// hugify agent's metrics: read back by a real Prometheus parser (prometheus_client) and compared with
// `hugify inspect`, never written through a link, and the dashboard and alert rules the package installs
// (dist/grafana, dist/prometheus) checked with promtool and against a real Prometheus scraping a live agent.
#include "agent_test.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

extern "C" {
#include "fleet.h"
}

namespace {

using namespace agent_test;

// Issue 33: the dashboard and the alert rules the hugify package installs (dist/grafana, dist/prometheus).
const std::string dist = std::string(HUGIFY_FIXTURES_DIR) + "/../../dist";

TEST(Agent, MetricsParseAndMatchInspect) {
  REQUIRE_COLLAPSE();
  std::string python = python_with_prometheus();
  if (python.empty()) GTEST_SKIP() << "no python3 with prometheus_client (apt-get install python3-prometheus-client)";
  process target;
  start_target(target, {"--dense", "8M", "--sparse", "8M"});
  std::string dir = temp_dir(), metrics = dir + "/agent.prom", pid = std::to_string(target.pid);
  auto r = test_support::hugify({"agent", "--once", "--pid", pid, "--min-rss", "0", "--metrics-file", metrics});
  ASSERT_EQ(r.status, 0) << r.err;
  struct stat st;
  ASSERT_EQ(stat(metrics.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  auto parsed = parse_with_prometheus_client(python, metrics);
  ASSERT_EQ(parsed.status, 0) << parsed.err;
  auto inspect = test_support::hugify({"inspect", pid, "--json"});
  ASSERT_EQ(inspect.status, 0) << inspect.err;
  // the heap and anon classes as inspect gives them, against the parsed samples
  for (const std::string klass : {"heap", "anon", "stack", "shm"}) {
    size_t at = inspect.out.find("\"" + klass + "\": {");
    ASSERT_NE(at, std::string::npos) << inspect.out;
    std::string object = inspect.out.substr(at, inspect.out.find('}', at) - at);
    auto number = [&](const std::string &key) { // "resident_bytes" (hugify.inspect/2) or "resident" (/1)
      for (const std::string &name : {key + "_bytes", key}) {
        size_t k = object.find("\"" + name + "\": ");
        if (k != std::string::npos) return std::stod(object.substr(k + name.size() + 4));
      }
      ADD_FAILURE() << "no " << key << " in " << object;
      return -1.0;
    };
    // host totals by class: the one selected process (no pid or comm label: docs/agent.md, "Metrics and labels")
    std::string labels = "class=" + klass;
    EXPECT_EQ(metric(parsed.out, "hugify_agent_resident_bytes", labels), number("resident")) << klass;
    EXPECT_EQ(metric(parsed.out, "hugify_agent_huge_bytes", labels), number("huge")) << klass;
  }
  EXPECT_EQ(parsed.out.find("pid="), std::string::npos) << "no series per process\n" << parsed.out;
  EXPECT_GE(metric(parsed.out, "hugify_agent_collapsed_bytes_total{}"), (double)(8 * MiB));
  // its cgroup has a series of its own, with the kernel's figure beside it when memory.stat has one
  struct cgroup_memory_root memory;
  cgroup_memory_hierarchy("", &memory);
  char cgroup[512];
  fleet_cgroup_of(&memory, target.pid, cgroup, sizeof cgroup);
  ASSERT_TRUE(cgroup[0]);
  EXPECT_EQ(metric(parsed.out, "hugify_agent_cgroup_processes", std::string("cgroup=") + cgroup), 1) << parsed.out;
  EXPECT_GE(metric(parsed.out, "hugify_agent_cgroup_huge_bytes", std::string("cgroup=") + cgroup), (double)(8 * MiB));
  if (memory.version) {
    EXPECT_GE(metric(parsed.out, "hugify_agent_cgroup_kernel_thp_bytes", std::string("cgroup=") + cgroup + ",kind=anon"),
              0) << parsed.out;
  }
  EXPECT_GE(metric(parsed.out, "hugify_agent_cpu_seconds_total{}"), 0);
  // --once has neither a budget nor a pass's CPU ceiling (docs/agent.md, "CPU budget"): nothing cut by them
  EXPECT_EQ(metric(parsed.out, "hugify_agent_budget_stops_total{}"), 0) << parsed.out;
  EXPECT_EQ(metric(parsed.out, "hugify_agent_pass_ceiling_stops_total{}"), 0) << parsed.out;
  // The pause histogram: parsed by the client, buckets cumulative, +Inf equal to the count.
  double previous = 0;
  int buckets = 0;
  std::istringstream lines(parsed.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("hugify_agent_pause_seconds_bucket{", 0) != 0) continue;
    double bucket = std::stod(line.substr(line.rfind(' ') + 1));
    EXPECT_GE(bucket, previous) << line << "\n" << parsed.out;
    previous = bucket;
    buckets++;
  }
  EXPECT_GE(buckets, 2) << parsed.out;
  EXPECT_EQ(metric(parsed.out, "hugify_agent_pause_seconds_bucket", "le=+Inf"), previous) << "+Inf comes last";
  EXPECT_EQ(previous, metric(parsed.out, "hugify_agent_pause_seconds_count{}")) << parsed.out;
  EXPECT_GE(metric(parsed.out, "hugify_agent_pause_seconds_sum{}"), 0) << parsed.out;
  EXPECT_GT(metric(parsed.out, "hugify_agent_longest_call_seconds{}"), 0) << "it collapsed something";

  // The same distribution in the JSON (another pass: nothing left to collapse, the figures are there).
  auto once = test_support::hugify({"agent", "--once", "--pid", pid, "--min-rss", "0", "--json"});
  ASSERT_EQ(once.status, 0) << once.err;
  std::string error;
  auto doc = test_support::parse_json(once.out, &error);
  ASSERT_TRUE(doc.present()) << error << once.out;
  EXPECT_TRUE(test_support::is_number(doc["longest_call_seconds"])) << once.out;
  auto pause = doc["pause"];
  ASSERT_TRUE(pause.present()) << once.out;
  EXPECT_GE(pause["longest_seconds"].number(), pause["p99_seconds"].number());
  uint64_t cumulative = 0;
  for (const auto &bucket : pause["buckets"].items()) {
    EXPECT_GE(bucket["count"].u64(), cumulative) << once.out;
    cumulative = bucket["count"].u64();
  }
  EXPECT_EQ(cumulative, pause["count"].u64()) << "the last bucket (le null: +Inf) holds every pause";

  // The same over HTTP, from a daemon bound to localhost.
  std::string port = free_port();
  ASSERT_FALSE(port.empty());
  process agent;
  agent.start(agent_argv({"--pid", pid, "--min-rss", "0", "--interval", "0.2", "--metrics-file", metrics,
                          "--listen", port}),
              dir + "/agent.err");
  ASSERT_GE(wait_passes(agent, metrics, 1), 1) << test_support::read_file(dir + "/agent.err");
  const char *fetch =
      "import sys, urllib.request\n"
      "from prometheus_client.parser import text_string_to_metric_families\n"
      "with urllib.request.urlopen('http://127.0.0.1:%s/metrics' % sys.argv[1], timeout=30) as r:\n"
      "    assert r.headers['Content-Type'].startswith('text/plain; version=0.0.4'), r.headers['Content-Type']\n"
      "    names = {f.name for f in text_string_to_metric_families(r.read().decode())}\n"
      "print(sorted(names))\n";
  auto http = test_support::run({python, "-c", fetch, port});
  EXPECT_EQ(http.status, 0) << http.err;
  EXPECT_NE(http.out.find("hugify_agent_cgroup_huge_bytes"), std::string::npos) << http.out;
  EXPECT_EQ(agent.stop(SIGTERM), 0);
}

TEST(Agent, MetricsFileIsNeverWrittenThroughALink) {
  std::string dir = temp_dir(), metrics = dir + "/agent.prom", elsewhere = dir + "/elsewhere";
  ASSERT_EQ(symlink(elsewhere.c_str(), metrics.c_str()), 0);
  auto r = test_support::hugify({"agent", "--once", "--dry-run", "--pid", std::to_string(getpid()), "--min-rss", "0",
                                 "--metrics-file", metrics});
  EXPECT_NE(r.err.find("metrics"), std::string::npos) << r.err;
  struct stat st;
  EXPECT_NE(stat(elsewhere.c_str(), &st), 0) << "the link was followed";
  EXPECT_EQ(lstat(metrics.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link was replaced";
}

TEST(Agent, AlertRulesPassPromtool) {
  if (test_support::run({"sh", "-c", "command -v promtool"}).status != 0)
    GTEST_SKIP() << "no promtool (Debian: apt-get install prometheus)";
  auto check = test_support::run({"promtool", "check", "rules", dist + "/prometheus/hugify-rules.yml"});
  EXPECT_EQ(check.status, 0) << check.out << check.err;
  auto unit = test_support::run({"sh", "-c", "cd \"$1\" && promtool test rules hugify-rules.test.yml", "sh",
                                 dist + "/prometheus"});
  EXPECT_EQ(unit.status, 0) << unit.out << unit.err;
}

// Every query of the dashboard, its variables given fixed values, against a real Prometheus (127.0.0.1 only,
// a temporary directory, stopped after) that scraped a real agent serving a process it collapsed.
TEST(Agent, DashboardQueriesReturnDataFromALiveAgent) {
  REQUIRE_COLLAPSE();
  if (test_support::run({"sh", "-c", "command -v prometheus"}).status != 0)
    GTEST_SKIP() << "no prometheus (Debian: apt-get install prometheus)";
  process target;
  start_target(target, {"--dense", "8M"});
  std::string dir = temp_dir(), agent_port = free_port(), prometheus_port = free_port();
  ASSERT_FALSE(agent_port.empty() || prometheus_port.empty());
  process agent;
  agent.start(agent_argv({"--pid", std::to_string(target.pid), "--min-rss", "0", "--interval", "0.5",
                          "--cpu-budget", "100", "--listen", "127.0.0.1:" + agent_port}),
              dir + "/agent.err");
  std::string instance = "127.0.0.1:" + agent_port;
  {
    std::ofstream config(dir + "/prometheus.yml");
    config << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
           << "rule_files:\n  - " << dist << "/prometheus/hugify-rules.yml\n"
           << "scrape_configs:\n  - job_name: hugify\n    static_configs:\n      - targets: ['" << instance << "']\n";
  }
  process prometheus;
  prometheus.start({"prometheus", "--config.file=" + dir + "/prometheus.yml", "--storage.tsdb.path=" + dir + "/data",
                    "--web.listen-address=127.0.0.1:" + prometheus_port},
                   dir + "/prometheus.err");
  std::string url = "http://127.0.0.1:" + prometheus_port;
  // until every query has data: the lasting share needs a pass after the collapse, rates two scrapes
  test_support::command_result r;
  for (int attempt = 0; attempt < 60; attempt++) {
    usleep(1000 * 1000);
    r = test_support::run({"python3", std::string(HUGIFY_FIXTURES_DIR) + "/../dashboard_queries.py",
                           dist + "/grafana/hugify.json", url, instance, dist + "/prometheus/hugify-rules.yml"});
    if (r.status == 0 && attempt >= 12) break; /* and the rates span 10 s of scrapes */
  }
  EXPECT_EQ(r.status, 0) << r.out << r.err << test_support::read_file(dir + "/prometheus.err");
  std::printf("%s", r.out.c_str());
  EXPECT_EQ(prometheus.stop(SIGTERM), 0);
  EXPECT_EQ(agent.stop(SIGTERM), 0);
}

}  // namespace
