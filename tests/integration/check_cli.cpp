// SPDX-License-Identifier: MIT
// hugify check: real A/B runs of the bundled workload through `hugify run`: every round is run and logged,
// a configuration is credited only with what it changed, the JSON is read back with jansson against the
// schema of docs/check.md, a failing CMD stops the check with its output, and this machine's missing PMU is
// said once. No test here asserts a verdict that depends on speed: the choice of a verdict is tested on
// scripted timings in tests/unit/measure.cpp.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <set>
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

// What the tests assert on, from a hugify.check/2 document that read_check_json validated field by field
// against docs/check.md (with jansson, like every JSON the tests read).
struct check_summary {
  std::string outcome, config;   // the verdict; config "" without a gain
  double low = 0;                // the verdict's lower bound (gain only)
  double heap_data_huge = -1;    // the "heap" configuration's data (heap + anon) on huge pages, from its report
  bool counters_available = false;
  std::string counters_reason, stopped, failure_config;
  int64_t failure_status = -1;
};

// An interval (or null): numbers in order, a 95 % confidence, one of the three judgements.
void expect_interval(const test_support::json_view &x, const std::string &why) {
  if (x.is_null()) return;
  for (const char *k : {"estimate", "low", "high", "confidence"}) EXPECT_TRUE(is_number(x[k])) << why << "." << k;
  EXPECT_LE(x["low"].number(), x["estimate"].number()) << why;
  EXPECT_LE(x["estimate"].number(), x["high"].number()) << why;
  EXPECT_GE(x["confidence"].number(), 0.95) << why;
  EXPECT_LE(x["confidence"].number(), 1.0) << why;
  std::string j = x["judgement"].text();
  EXPECT_TRUE(j == "measurable gain" || j == "measurably slower" || j == "no measurable gain") << why << ": " << j;
}

// Reads and validates a check JSON, field by field against the schema of docs/check.md; returns what the
// tests assert on. A violation fails the test.
check_summary read_check_json(const std::string &path) {
  std::string error;
  auto d = test_support::load_json(path, &error);
  check_summary s;
  if (!d.present()) {
    ADD_FAILURE() << error << "\n" << test_support::read_file(path);
    return s;
  }
  EXPECT_EQ(d.members().at(0).first, "schema");
  EXPECT_EQ(d["schema"].text(), "hugify.check/2");
  EXPECT_GT(d["command"].size(), 0u);
  for (const auto &a : d["command"].items()) EXPECT_TRUE(is_string(a)) << "command";
  EXPECT_TRUE(is_bool(d["bundled_workload"]));
  EXPECT_EQ(d["log_path"].text().rfind('/', 0), 0u) << "log_path";
  EXPECT_TRUE(d["metric"].text() == "cpu" || d["metric"].text() == "wall") << d["metric"].text();
  EXPECT_TRUE(is_string(d["method"]));
  EXPECT_EQ(d["confidence"].number(), 0.95);
  EXPECT_EQ(d["precision_fraction"].number(), 0.02);
  EXPECT_EQ(d["min_gain_fraction"].number(), 0.02);
  EXPECT_TRUE(is_int(d["warmup_rounds"]) && is_int(d["rounds"])) << "rounds";
  EXPECT_TRUE(d["budget_seconds"].is_null() || is_number(d["budget_seconds"]));
  EXPECT_GT(d["elapsed_seconds"].number(), 0);
  EXPECT_TRUE(d["noise"]["cause"].is_null() || is_string(d["noise"]["cause"]));
  EXPECT_TRUE(is_int(d["noise"]["cpus"]) && d["noise"]["cpus"].u64() > 0) << "noise.cpus";
  s.stopped = d["stopped"].text();
  EXPECT_TRUE(s.stopped == "converged" || s.stopped == "budget" || s.stopped == "runs" || s.stopped == "limit" ||
              s.stopped == "failed") << s.stopped;
  EXPECT_TRUE(is_bool(d["counters"]["available"]));
  s.counters_available = d["counters"]["available"].flag();
  EXPECT_TRUE(d["counters"]["reason"].is_null() || is_string(d["counters"]["reason"]));
  s.counters_reason = d["counters"]["reason"].text();

  std::vector<std::string> names;
  const std::set<std::string> known = {"plain", "heap", "heap+text", "text", "pymalloc-off", "hugetlb", "mimalloc",
                                       "jemalloc", "tcmalloc"};
  auto configs = d["configs"].items();
  for (size_t i = 0; i < configs.size(); i++) {
    const auto &c = configs[i];
    std::string name = c["name"].text();
    names.push_back(name);
    EXPECT_TRUE(known.count(name)) << "config name " << name;
    EXPECT_FALSE(c["command_line"].text().empty()) << name;
    EXPECT_TRUE(is_int(c["runs"])) << name;
    if (s.stopped != "failed") {
      EXPECT_EQ(c["runs"].u64(), d["rounds"].u64()) << "one run per round: " << name;
      for (const char *k : {"wall_seconds_per_round", "cpu_seconds_per_round", "system_seconds_per_round"})
        EXPECT_EQ(c[k].size(), c["runs"].u64()) << name << "." << k;
      for (const char *k : {"wall_seconds_per_round", "cpu_seconds_per_round"})
        for (const auto &t : c[k].items()) EXPECT_GT(t.number(), 0) << name << "." << k;
      EXPECT_GT(c["max_rss_bytes"].number(), 0) << name;
      EXPECT_TRUE(is_int(c["minor_faults"])) << name;
    }
    for (const char *k : {"wall_seconds", "cpu_seconds", "system_seconds"}) EXPECT_TRUE(is_number(c[k])) << name << "." << k;
    if (i == 0) {
      EXPECT_EQ(name, "plain") << "configs start with plain";
      for (const char *k : {"ratio", "wall_ratio", "cpu_ratio", "coverage"}) EXPECT_TRUE(c[k].is_null()) << "plain has no " << k;
    } else {
      std::string line = c["command_line"].text();
      size_t run = line.find(" run ");
      EXPECT_TRUE(run != std::string::npos && line.compare(run + 5, 7, "--text ") == 0) << "a hugify run command line: " << line;
      if (s.stopped != "failed") {
        for (const char *k : {"ratio", "wall_ratio", "cpu_ratio"}) expect_interval(c[k], name + "." + k);
        EXPECT_TRUE(json_equal(c["ratio"].get(), c[d["metric"].text() + "_ratio"].get())) << "ratio is the metric's";
      }
    }
    const auto &cov = c["coverage"];
    if (!cov.is_null()) {
      for (const char *k : {"reports", "heap_resident_bytes", "heap_huge_bytes", "anon_resident_bytes", "anon_huge_bytes",
                            "text_resident_bytes", "text_huge_bytes"})
        EXPECT_TRUE(is_int(cov[k])) << name << ".coverage." << k;
      EXPECT_TRUE(is_number(cov["hugify_seconds"])) << name;
      double resident = cov["heap_resident_bytes"].number() + cov["anon_resident_bytes"].number();
      if (name == "heap")
        s.heap_data_huge = resident > 0 ? (cov["heap_huge_bytes"].number() + cov["anon_huge_bytes"].number()) / resident : 0;
    }
    EXPECT_TRUE(c["counters"].is_null() || json_is_object(c["counters"]["totals"].get())) << name << ".counters";
  }
  for (const auto &k : d["skipped"].items()) EXPECT_FALSE(k["name"].text().empty() || k["reason"].text().empty());

  const auto &v = d["verdict"];
  s.outcome = v["outcome"].text();
  const auto &cvd = d["code_vs_data"];
  if (!cvd.is_null()) {
    expect_interval(cvd["data"], "data");
    expect_interval(cvd["code"], "code");
    EXPECT_TRUE(is_bool(cvd["code_on_huge_pages"]));
    if (!cvd["code_on_huge_pages"].flag()) {
      EXPECT_NE(v["config"].text(), "heap+text") << "heap+text with no code on huge pages is never the verdict";
    }
  }
  EXPECT_TRUE(s.outcome == "gain" || s.outcome == "no measurable gain" || s.outcome == "command failed") << s.outcome;
  if (s.outcome == "gain") {
    s.config = v["config"].text();
    EXPECT_NE(std::find(names.begin() + 1, names.end(), s.config), names.end()) << "verdict.config " << s.config;
    s.low = v["low"].number();
    EXPECT_LE(v["low"].number(), v["ratio"].number());
    EXPECT_LE(v["ratio"].number(), v["high"].number());
    std::string line = v["command_line"].text(), last = d["command"][d["command"].size() - 1].text();
    EXPECT_NE(line.find(" run --text "), std::string::npos) << line;
    EXPECT_TRUE(line.size() >= last.size() && line.compare(line.size() - last.size(), last.size(), last) == 0) << line;
  } else {
    EXPECT_TRUE(v["config"].is_null()) << "no config without a gain";
  }
  const auto &f = d["failure"];
  if (s.outcome == "command failed") {
    EXPECT_TRUE(is_int(f["round"]) && is_bool(f["warmup"])) << "failure round";
    EXPECT_TRUE(is_int(f["exit_status"]) && is_string(f["output"])) << "failure";
    s.failure_config = f["config"].text();
    s.failure_status = (int64_t)f["exit_status"].number();
  } else {
    EXPECT_TRUE(f.is_null()) << "no failure";
  }
  return s;
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

void expect_pmu_said_once_or_counted(const std::string &out, const check_summary &summary) {
  hugify_system sys;
  ASSERT_EQ(hugify_probe(&sys), 0);
  if (sys.pmu == HUGIFY_FEATURE_YES) {
    EXPECT_TRUE(summary.counters_available);
    EXPECT_EQ(count(out, "no PMU"), 0u) << out;
  } else {
    // This machine: no PMU. Said once, plainly; the JSON carries the reason; timing decides.
    EXPECT_EQ(count(out, "no PMU: counters not supported, relying on timing\n"), 1u) << out;
    EXPECT_FALSE(summary.counters_available);
    EXPECT_EQ(summary.counters_reason.rfind("no PMU: ", 0), 0u) << summary.counters_reason;
  }
}

// The bundled TLB-bound workload, measured for real. What the test asserts does not depend on how fast this
// shared machine was: the verdict's choice is tested on scripted timings (MeasureChoose.* in
// tests/unit/measure.cpp), and the figure itself is a benchmark (`hugify check` with no CMD; docs/check.md).
// CI twice saw this workload's verdict turn into "no measurable gain" when the kernel time of some rounds
// swung tenfold (the host backs fresh guest memory lazily).
TEST(CheckCli, BundledTlbBoundWorkloadIsMeasuredAndCreditedOnlyWithWhatItChanged) {
  std::string json = temp_path("bundled.json");
  auto r = test_support::hugify({"check", "--configs", "heap,heap+text", "--runs", "12", "--json=" + json});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  auto summary = read_check_json(json);
  std::cout << r.out;
  EXPECT_EQ(summary.stopped, "runs");
  // Whichever verdict the timings gave, it is said in words, and only the heap can be credited: the workload's
  // code is a few KiB, less than one 2 MiB page, so heap+text puts no code on huge pages and runs as heap does.
  if (summary.outcome == "gain") {
    EXPECT_EQ(summary.config, "heap") << r.out;
    EXPECT_GT(summary.low, 1.0) << "a gain's interval lies above 1\n" << r.out;
    EXPECT_NE(r.out.find("Verdict: heap (heap on transparent huge pages) - "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" run --text off --heap auto -- " + workload() + "\n"), std::string::npos) << r.out;
  } else {
    EXPECT_EQ(summary.outcome, "no measurable gain") << r.out;
    EXPECT_NE(r.out.find("Verdict: no measurable gain - "), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("the text remap (code) put no code on huge pages, so its "), std::string::npos) << r.out;
  EXPECT_GT(summary.heap_data_huge, 0.9) << "the heap config's data on huge pages, from the run report\n" << r.out;
  EXPECT_NE(r.out.find("(the bundled TLB-bound workload)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Code vs data: the heap (data) gave "), std::string::npos) << r.out;
  expect_pmu_said_once_or_counted(r.out, summary);
  // CMD's output went to the log, not to the screen.
  EXPECT_EQ(r.out.find("hugify-workload: "), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("hugify-workload: "), std::string::npos) << r.err;
  remove_check_dirs(r.out);
  unlink(json.c_str());
}

// 64 KiB: 16 pages, inside every TLB; the verdict (most likely "no measurable gain") is the timings', so the
// test asserts what check did: the rounds, the log, a verdict in words.
TEST(CheckCli, TinyWorkingSetRunsEveryRoundIntoTheLog) {
  std::string json = temp_path("tiny.json");
  // Enough loads for ~0.3 s a run, so starting through hugify run (a few ms) is not all there is to compare.
  auto r = test_support::hugify({"check", "--configs", "heap", "--runs", "8", "--json=" + json, "--", workload(),
                                 "--size", "64K", "--loads", "60000000"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::cout << r.out;
  auto summary = read_check_json(json);
  EXPECT_EQ(summary.stopped, "runs");
  EXPECT_NE(r.out.find("\nVerdict: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Run it with") != std::string::npos, summary.outcome == "gain") << r.out;
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

// CPython: check offers pymalloc-off (PYTHONMALLOC=malloc for `hugify run` and CMD) by default, and only for
// CPython. What is asserted is what ran: each configuration's command line and the variable the child saw,
// counted per run in a file the script appends to, and what the reports say held the data.
TEST(CheckCli, CpythonGetsThePymallocOffConfiguration) {
  if (test_support::run({"python3", "-c", "pass"}).status != 0) GTEST_SKIP() << "python3 is not installed";
  test_support::scratch_dir dir("hugify-check-python");
  std::string script = dir.path + "/seen.py", seen = dir.path + "/seen.txt", json = dir.path + "/check.json";
  test_support::run({"sh", "-c", "printf '%s\n' '#!/usr/bin/env python3' 'import os, sys' "
                     "'open(sys.argv[1], \"a\").write(os.environ.get(\"PYTHONMALLOC\", \"-\") + \"\\n\")' > " + script +
                     " && chmod +x " + script});
  auto r = test_support::hugify({"check", "--runs", "6", "--json=" + json, "--", script, seen},
                                {{"PYTHONMALLOC", "\x01unset"}});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  read_check_json(json);
  auto d = test_support::load_json(json);
  size_t runs_with = 0, runs_without = 0;
  bool offered = false;
  for (const auto &c : d["configs"].items()) {
    std::string name = c["name"].text(), line = c["command_line"].text();
    size_t runs = c["runs"].u64() + 1; // and the warm-up round
    if (name == "pymalloc-off") {
      offered = true;
      runs_with += runs;
      EXPECT_EQ(line.rfind("PYTHONMALLOC=malloc ", 0), 0u) << line;
      EXPECT_NE(line.find(" run --text off --heap auto -- " + script + " " + seen), std::string::npos) << line;
      EXPECT_EQ(c["environment"].text(), "PYTHONMALLOC=malloc");
      EXPECT_EQ(c["coverage"]["allocator"].text(), "glibc") << "the objects are malloc's";
      EXPECT_FALSE(c["coverage"]["allocator_is_runtime"].flag());
    } else {
      runs_without += runs;
      EXPECT_TRUE(c["environment"].is_null()) << name;
      EXPECT_EQ(line.find("PYTHONMALLOC"), std::string::npos) << line;
      if (name == "heap") {
        EXPECT_EQ(c["coverage"]["allocator"].text(), "pymalloc") << "obmalloc's arenas";
        EXPECT_TRUE(c["coverage"]["allocator_is_runtime"].flag());
      }
    }
  }
  EXPECT_TRUE(offered) << "pymalloc-off is a default configuration for CPython\n" << r.out;
  std::string text = test_support::read_file(seen);
  EXPECT_EQ(count(text, "malloc\n"), runs_with) << text;
  EXPECT_EQ(count(text, "-\n"), runs_without) << text;
  EXPECT_NE(r.out.find("  data: CPython obmalloc arenas (1 MiB mmaps): heap"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("glibc's malloc: pymalloc-off"), std::string::npos) << r.out;

  // Not CPython: not offered by default, but asked for by name it runs.
  auto other = test_support::hugify({"check", "--runs", "6", "--json", "--", "true"});
  ASSERT_EQ(other.status, 0) << other.out << other.err;
  for (const auto &c : test_support::parse_json(other.out)["configs"].items()) EXPECT_NE(c["name"].text(), "pymalloc-off");
  auto asked = test_support::hugify({"check", "--runs", "6", "--configs", "pymalloc-off", "--json", "--", "true"});
  ASSERT_EQ(asked.status, 0) << asked.out << asked.err;
  EXPECT_EQ(test_support::parse_json(asked.out)["configs"][1]["name"].text(), "pymalloc-off") << asked.out;
  remove_check_dirs(r.out + other.out + asked.out);
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
  auto summary = read_check_json(json);
  EXPECT_EQ(summary.outcome, "command failed");
  EXPECT_EQ(summary.stopped, "failed");
  EXPECT_EQ(summary.failure_config, "heap");
  EXPECT_EQ(summary.failure_status, 5);
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

// The tcmalloc configuration (gperftools' TCMalloc under the cover): compared with plain like the others, or,
// without libtcmalloc-minimal4, refused with the install command.
TEST(CheckCli, TcmallocConfiguration) {
  std::string json = temp_path("tcmalloc.json");
  auto r = test_support::hugify({"check", "--configs", "tcmalloc", "--runs", "6", "--warmup", "0", "--json=" + json,
                                 "--", workload(), "--size", "8M", "--loads", "2000000"});
  std::string missing = test_support::allocator_missing("tcmalloc");
  if (!missing.empty()) {
    EXPECT_NE(r.status, 0) << r.out;
    EXPECT_NE((r.out + r.err).find("apt-get install libtcmalloc-minimal4"), std::string::npos) << r.out << r.err;
    GTEST_SKIP() << missing;
  }
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  auto summary = read_check_json(json);
  EXPECT_EQ(summary.stopped, "runs");
  std::vector<std::string> expected = {"plain", "tcmalloc"};
  auto doc = test_support::load_json(json);
  std::vector<std::string> names;
  for (const auto &c : doc["configs"].items()) {
    names.push_back(c["name"].text());
    if (names.back() == "tcmalloc") {
      EXPECT_NE(c["command_line"].text().find("--heap tcmalloc"), std::string::npos) << c["command_line"].text();
    }
  }
  EXPECT_EQ(names, expected) << r.out;
  remove_check_dirs(r.out);
}

}  // namespace
