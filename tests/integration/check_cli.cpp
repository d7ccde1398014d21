// hugify check: real A/B runs of the bundled workload through `hugify run`. On its TLB-bound default the
// verdict is "heap" with an interval well above 1; on a 64 KiB working set it is "no measurable gain"; the
// JSON is read back with python3's json against the schema of docs/check.md; a failing CMD stops the check
// with its output; this machine's missing PMU is said once. The statistical tests are built to hold on a
// noisy, shared machine: the effect they look for is large, the intervals are distribution-free and
// adaptive rounds run until the budget.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "hugify.h"
#include "test_support.hpp"

namespace {

std::string bin_dir() {
  std::string cli = HUGIFY_CLI_PATH;
  return cli.substr(0, cli.rfind('/'));
}
std::string workload() { return bin_dir() + "/hugify-workload"; }

std::string temp_path(const std::string &name) {
  return "/tmp/hugify_check_cli_" + std::to_string(getpid()) + "_" + name;
}

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
  return n;
}

// Validates a hugify.check/2 document (argv[1]) field by field against docs/check.md, then prints
//   outcome|config|low|data_huge_of_config|available|reason|stopped|failure_config|failure_status
// for the test to assert on. Any violation exits non-zero with the reason on stderr.
const char *const json_check = R"PY(
import json, sys
d = json.load(open(sys.argv[1]))
def need(c, why):
    if not c:
        sys.exit("bad JSON: " + why)
num = (int, float)
def interval(x, why):
    if x is None:
        return
    need(isinstance(x, dict), why)
    for k in ("estimate", "low", "high", "confidence"):
        need(isinstance(x[k], num), why + "." + k)
    need(x["low"] <= x["estimate"] <= x["high"], why + " order")
    need(0.95 <= x["confidence"] <= 1, why + ".confidence")
    need(x["judgement"] in ("measurable gain", "measurably slower", "no measurable gain"), why + ".judgement")
need(list(d)[0] == "schema" and d["schema"] == "hugify.check/2", "schema")
need(isinstance(d["command"], list) and d["command"] and all(isinstance(a, str) for a in d["command"]), "command")
need(isinstance(d["bundled_workload"], bool), "bundled_workload")
need(isinstance(d["log_path"], str) and d["log_path"].startswith("/"), "log_path")
need(d["metric"] in ("cpu", "wall"), "metric")
need(isinstance(d["method"], str) and d["confidence"] == 0.95, "method/confidence")
need(d["precision_fraction"] == 0.02 and d["min_gain_fraction"] == 0.02, "precision/min_gain")
need(isinstance(d["warmup_rounds"], int) and isinstance(d["rounds"], int), "rounds")
need(d["budget_seconds"] is None or isinstance(d["budget_seconds"], num), "budget_seconds")
need(isinstance(d["elapsed_seconds"], num) and d["elapsed_seconds"] > 0, "elapsed_seconds")
need(d["noise"]["cause"] is None or isinstance(d["noise"]["cause"], str), "noise.cause")
need(isinstance(d["noise"]["cpus"], int) and d["noise"]["cpus"] > 0, "noise.cpus")
need(d["stopped"] in ("converged", "budget", "runs", "limit", "failed"), "stopped")
need(isinstance(d["counters"]["available"], bool), "counters.available")
need(d["counters"]["reason"] is None or isinstance(d["counters"]["reason"], str), "counters.reason")
names = [c["name"] for c in d["configs"]]
need(names and names[0] == "plain", "configs start with plain")
chosen = None
for i, c in enumerate(d["configs"]):
    need(c["name"] in ("plain", "heap", "heap+text", "text", "hugetlb", "mimalloc", "jemalloc"), "config name")
    need(isinstance(c["command_line"], str) and c["command_line"], "command_line")
    need(isinstance(c["runs"], int), "runs")
    if d["stopped"] != "failed":
        need(c["runs"] == d["rounds"], "one run per round")
        need(len(c["wall_seconds_per_round"]) == c["runs"] == len(c["cpu_seconds_per_round"]) ==
             len(c["system_seconds_per_round"]), "per-round series")
        need(all(t > 0 for t in c["wall_seconds_per_round"] + c["cpu_seconds_per_round"]), "times > 0")
        need(c["max_rss_bytes"] > 0 and isinstance(c["minor_faults"], int), "rss, faults")
    for k in ("wall_seconds", "cpu_seconds", "system_seconds"):
        need(isinstance(c[k], num), k)
    if i == 0:
        need(c["ratio"] is None and c["wall_ratio"] is None and c["cpu_ratio"] is None and c["coverage"] is None,
             "plain has no ratio or coverage")
    else:
        need(c["command_line"].split(" run ")[1].startswith("--text "), "a hugify run command line")
        if d["stopped"] != "failed":
            for k in ("ratio", "wall_ratio", "cpu_ratio"):
                interval(c[k], c["name"] + "." + k)
            need(c["ratio"] == c[d["metric"] + "_ratio"], "ratio is the metric's")
    cov = c["coverage"]
    if cov is not None:
        for k in ("reports", "heap_resident_bytes", "heap_huge_bytes", "anon_resident_bytes", "anon_huge_bytes",
                  "text_resident_bytes", "text_huge_bytes"):
            need(isinstance(cov[k], int) and cov[k] >= 0, "coverage." + k)
        need(isinstance(cov["hugify_seconds"], num), "coverage.hugify_seconds")
    need(c["counters"] is None or isinstance(c["counters"]["totals"], dict), "counters")
for s in d["skipped"]:
    need(isinstance(s["name"], str) and isinstance(s["reason"], str) and s["reason"], "skipped")
cvd = d["code_vs_data"]
if cvd is not None:
    interval(cvd["data"], "data")
    interval(cvd["code"], "code")
    need(isinstance(cvd["code_on_huge_pages"], bool), "code_on_huge_pages")
    if not cvd["code_on_huge_pages"]:
        need(d["verdict"]["config"] != "heap+text", "heap+text with no code on huge pages is never the verdict")
v = d["verdict"]
need(v["outcome"] in ("gain", "no measurable gain", "command failed"), "verdict.outcome")
low = "-"
huge = "-"
if v["outcome"] == "gain":
    need(v["config"] in names[1:], "verdict.config")
    need(isinstance(v["ratio"], num) and v["low"] <= v["ratio"] <= v["high"], "verdict ratio")
    need(" run --text " in v["command_line"] and v["command_line"].endswith(d["command"][-1]), "verdict command")
    low = v["low"]
    c = d["configs"][names.index(v["config"])]
    if c["coverage"]:
        cov = c["coverage"]
        resident = cov["heap_resident_bytes"] + cov["anon_resident_bytes"]
        huge = (cov["heap_huge_bytes"] + cov["anon_huge_bytes"]) / resident if resident else 0
else:
    need(v["config"] is None, "no config without a gain")
f = d["failure"]
fc, fs = "-", "-"
if v["outcome"] == "command failed":
    need(isinstance(f["round"], int) and isinstance(f["warmup"], bool), "failure round")
    need(isinstance(f["exit_status"], int) and isinstance(f["output"], str), "failure")
    fc, fs = f["config"], f["exit_status"]
else:
    need(f is None, "no failure")
print("|".join(str(x) for x in (v["outcome"], v["config"], low, huge, d["counters"]["available"],
                                d["counters"]["reason"], d["stopped"], fc, fs)))
)PY";

std::vector<std::string> split(const std::string &line) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t bar; (bar = line.find('|', start)) != std::string::npos; start = bar + 1)
    parts.push_back(line.substr(start, bar - start));
  std::string last = line.substr(start);
  while (!last.empty() && last.back() == '\n') last.pop_back();
  parts.push_back(last);
  return parts;
}

// hugify check keeps its log directory for the user; the tests remove the ones their output names.
void remove_check_dirs(const std::string &output) {
  const std::string marker = "/hugify-check-";
  for (size_t at = output.find(marker); at != std::string::npos; at = output.find(marker, at + 1)) {
    size_t start = output.find_last_of(" \"(\n", at);
    start = start == std::string::npos ? 0 : start + 1;
    std::string dir = output.substr(start, at + marker.size() + 6 - start);
    if (dir.rfind("/", 0) == 0) test_support::run({"rm", "-rf", dir});
  }
}

bool has_python() { return test_support::run({"python3", "-c", "import json"}).status == 0; }

// Reads and validates a check JSON; returns its summary fields (see json_check), or fails the test.
std::vector<std::string> read_check_json(const std::string &path) {
  auto check = test_support::run({"python3", "-c", json_check, path});
  EXPECT_EQ(check.status, 0) << check.err << "\n" << test_support::read_file(path);
  auto parts = split(check.out);
  if (parts.size() != 9) ADD_FAILURE() << "summary: " << check.out;
  parts.resize(9);
  return parts;
}

void expect_pmu_said_once_or_counted(const std::string &out, const std::vector<std::string> &summary) {
  hugify_system sys;
  ASSERT_EQ(hugify_probe(&sys), 0);
  if (sys.pmu == HUGIFY_FEATURE_YES) {
    EXPECT_EQ(summary[4], "True");
    EXPECT_EQ(count(out, "no PMU"), 0u) << out;
  } else {
    // This machine: no PMU. Said once, plainly; the JSON carries the reason; timing decides.
    EXPECT_EQ(count(out, "no PMU: counters not supported, relying on timing\n"), 1u) << out;
    EXPECT_EQ(summary[4], "False");
    EXPECT_EQ(summary[5].rfind("no PMU: ", 0), 0u) << summary[5];
  }
}

TEST(CheckCli, BundledTlbBoundWorkloadVerdictIsHeap) {
  if (!has_python()) GTEST_SKIP() << "python3 is needed to read the JSON";
  std::string json = temp_path("bundled.json");
  // 12 rounds: the sign-test interval is then the 3rd-lowest to 3rd-highest per-round ratio, so two rounds
  // disturbed by the rest of a shared machine cannot pull its lower bound down.
  auto r = test_support::hugify({"check", "--configs", "heap,heap+text", "--runs", "12", "--json=" + json});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  auto summary = read_check_json(json);
  std::cout << r.out;
  EXPECT_EQ(summary[0], "gain") << r.out;
  // "heap": the heap alone. The workload's code is a few KiB, less than one 2 MiB page, so heap+text puts no
  // code on huge pages and is never credited, however its times fall (CI once saw it 1.07x [1.02, 1.30] over
  // heap on a loaded machine): the code-vs-data line says the difference is not the code's.
  EXPECT_EQ(summary[1], "heap") << r.out;
  EXPECT_NE(r.out.find("the text remap (code) put no code on huge pages, so its "), std::string::npos) << r.out;
  // The gain itself is the verdict's (its interval lies above 1); the bound on it here is loose on purpose:
  // a test asserts what check found, never how fast this shared machine was (CI once saw heap 1.55x with its
  // lower bound at 1.07, after two rounds whose kernel time swung tenfold).
  EXPECT_GT(std::atof(summary[2].c_str()), 1.0) << r.out;
  EXPECT_GT(std::atof(summary[3].c_str()), 0.9) << "the heap config's data on huge pages, from the run report\n" << r.out;
  EXPECT_NE(r.out.find("(the bundled TLB-bound workload)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Verdict: heap (heap on transparent huge pages) - "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" run --text off --heap auto -- " + workload() + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Code vs data: the heap (data) gave "), std::string::npos) << r.out;
  expect_pmu_said_once_or_counted(r.out, summary);
  // CMD's output went to the log, not to the screen.
  EXPECT_EQ(r.out.find("hugify-workload: "), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("hugify-workload: "), std::string::npos) << r.err;
  remove_check_dirs(r.out);
  unlink(json.c_str());
}

TEST(CheckCli, TinyWorkingSetHasNoMeasurableGain) {
  if (!has_python()) GTEST_SKIP() << "python3 is needed to read the JSON";
  std::string json = temp_path("tiny.json");
  // 64 KiB: 16 pages, inside every TLB. Enough loads for ~0.3 s a run, so starting through hugify run
  // (a few ms) is not all there is to compare.
  auto r = test_support::hugify({"check", "--configs", "heap", "--runs", "8", "--json=" + json, "--", workload(),
                                 "--size", "64K", "--loads", "60000000"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::cout << r.out;
  auto summary = read_check_json(json);
  EXPECT_EQ(summary[0], "no measurable gain") << r.out;
  EXPECT_EQ(summary[6], "runs");
  EXPECT_NE(r.out.find("Verdict: no measurable gain"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Run it with"), std::string::npos) << r.out;
  expect_pmu_said_once_or_counted(r.out, summary);

  // The log holds every run's output, each under a header naming its round and configuration.
  size_t at = r.out.find("CMD output: ");
  ASSERT_NE(at, std::string::npos);
  std::string log = r.out.substr(at + 12, r.out.find('\n', at) - at - 12);
  std::string text = test_support::read_file(log);
  EXPECT_EQ(count(text, "hugify-workload: 64 KiB working set"), 2u * (8 + 1)) << text;  // 8 rounds + warm-up
  EXPECT_EQ(count(text, "==== measured round "), 16u) << text;
  EXPECT_NE(text.find("==== measured round 8, heap: "), std::string::npos) << text;
  remove_check_dirs(r.out);
  unlink(json.c_str());
}

TEST(CheckCli, FailingCommandStopsWithItsOutput) {
  // Fails at once: plain, warm-up round.
  auto r = test_support::hugify(
      {"check", "--configs", "heap", "--", "sh", "-c", "echo some output; echo on stderr >&2; exit 3"});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("CMD failed in the warm-up round (plain): exit status 3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("some output\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("on stderr\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/output.log)"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("Verdict"), std::string::npos) << r.out;
  remove_check_dirs(r.err);

  // Fails in the 4th run: the first measured round's heap run (warm-up: plain, heap; round 1: plain, heap).
  std::string counter = temp_path("counter"), json = temp_path("failed.json");
  unlink(counter.c_str());
  std::string script = "n=$(cat " + counter + " 2>/dev/null || echo 0); n=$((n+1)); echo $n > " + counter +
                       "; echo run $n; [ $n -lt 4 ] || exit 5";
  r = test_support::hugify({"check", "--configs", "heap", "--runs", "6", "--json=" + json, "--", "sh", "-c", script});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("CMD failed in round 1 (heap): exit status 5"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run 4\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("run 3\n"), std::string::npos) << "only the failed run's output\n" << r.err;
  if (has_python()) {
    auto summary = read_check_json(json);
    EXPECT_EQ(summary[0], "command failed");
    EXPECT_EQ(summary[6], "failed");
    EXPECT_EQ(summary[7], "heap");
    EXPECT_EQ(summary[8], "5");
  }
  remove_check_dirs(r.err);

  // Killed by a signal.
  r = test_support::hugify({"check", "--configs", "heap", "--", "sh", "-c", "kill -SEGV $$"});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("killed by signal 11"), std::string::npos) << r.err;
  remove_check_dirs(r.err);

  // Not found.
  r = test_support::hugify({"check", "--configs", "heap", "--", "/nonexistent/program"});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("exit status 127"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot run /nonexistent/program"), std::string::npos) << r.err;
  remove_check_dirs(r.err);
  unlink(counter.c_str());
  unlink(json.c_str());
}

TEST(CheckCli, BadUsage) {
  struct {
    std::vector<std::string> args;
    const char *message;
  } cases[] = {
      {{"check", "--runs", "3", "--", "true"}, "--runs '3': expected 6 to 1000"},
      {{"check", "--configs", "heap,banana", "--", "true"}, "unknown configuration 'banana'"},
      {{"check", "--configs", "plain", "--", "true"}, "besides plain"},
      {{"check", "--runs", "6", "--budget", "10", "--", "true"}, "exclude each other"},
      {{"check", "--size", "64K", "--", "true"}, "--size is for the bundled workload"},
      {{"check", "--metric", "joules"}, "expected cpu or wall"},
      {{"check", "--budget", "-1"}, "expected seconds"},
      {{"check", "--frobnicate"}, "unknown option '--frobnicate'"},
      {{"check", "--json="}, "--json=FILE needs a file name"},
  };
  for (const auto &c : cases) {
    auto r = test_support::hugify(c.args);
    EXPECT_EQ(r.status, 2) << c.args[1] << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Try 'hugify check --help'."), std::string::npos) << r.err;
  }
  auto help = test_support::hugify({"check", "--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("Examples:\n  hugify check\n"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--json=FILE"), std::string::npos) << help.out;
}

// The installed tree: PREFIX/bin/hugify finds PREFIX/libexec/hugify/hugify-workload (and run its preload).
TEST(CheckCli, InstalledTreeFindsTheBundledWorkload) {
  std::string build = bin_dir().substr(0, bin_dir().rfind('/')), prefix = temp_path("prefix");
  auto install = test_support::run({"cmake", "--install", build, "--prefix", prefix});
  ASSERT_EQ(install.status, 0) << install.out << install.err;
  struct stat st;
  ASSERT_EQ(stat((prefix + "/libexec/hugify/hugify-workload").c_str(), &st), 0) << install.out;
  auto r = test_support::run({prefix + "/bin/hugify", "check", "--configs", "heap", "--runs", "6", "--size", "64K",
                              "--json"},
                             {{"PATH", prefix + "/bin:/usr/bin:/bin"}});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\"schema\": \"hugify.check/2\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"" + prefix + "/libexec/hugify/hugify-workload\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Verdict"), std::string::npos) << "--json prints only the JSON\n" << r.out;
  // `hugify` is on PATH here, so the advice may say plain "hugify run".
  EXPECT_NE(r.out.find("\"command_line\": \"hugify run --text off --heap auto -- "), std::string::npos) << r.out;
  remove_check_dirs(r.out);
  test_support::run({"rm", "-rf", prefix});
}

}  // namespace
