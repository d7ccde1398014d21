// hugify bench: every experiment on every page kind this machine can give (small sizes), its JSON and
// its SVG chart read back with independent parsers (python3's json and xml.etree), and kinds that
// cannot be had reported skipped with their reason and the pool command. Every point carries its spread
// (median, min, max of >= 3 interleaved timings; error bars in the chart), and a point made noisy on
// purpose (--inject-noise, the test hook) is flagged.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

constexpr uint64_t k2M = uint64_t{2} << 20, k1G = uint64_t{1} << 30;

std::string temp_path(const std::string &name) {
  return "/tmp/hugify_bench_cli_" + std::to_string(getpid()) + "_" + name;
}

bool has_python() { return test_support::run({"python3", "-c", "import json, xml.etree.ElementTree"}).status == 0; }

// Reads the bench JSON (argv[1]) and prints, one per line:
//   kind NAME STATUS REASON-NONEMPTY ENABLE
//   points EXPERIMENT KIND COUNT
//   noisy EXPERIMENT KIND SIZE
//   absl STATUS RUNS REASON
// after checking every field's type; any violation exits non-zero with the reason on stderr.
const char *const json_check = R"PY(
import json, math, sys
d = json.load(open(sys.argv[1]))
def need(c, why):
    if not c:
        sys.exit("bad JSON: " + why)
need(list(d)[0] == "schema" and d["schema"] == "hugify.bench/2", "schema")
need(isinstance(d["quick"], bool) and isinstance(d["max_size_bytes"], int) and d["max_size_bytes"] > 0, "header")
need(isinstance(d["elapsed_seconds"], (int, float)) and d["repetitions"] >= 3, "repetitions")
need(d["noisy_spread_fraction"] == 0.1 and d["coverage_min_fraction"] == 0.95, "thresholds")
need(d["noise_cause"] is None or isinstance(d["noise_cause"], str), "noise_cause")
need(isinstance(d["machine"]["kernel"], str) and d["machine"]["base_page_size_bytes"] == 4096, "machine")
need(isinstance(d["machine"]["load_average"], (int, float)), "load_average")
need(isinstance(d["exit_status"], int), "exit_status")
need([k["kind"] for k in d["kinds"]] == ["4K", "THP", "2M", "1G"], "kinds")
for k in d["kinds"]:
    need(k["status"] in ("ok", "partial", "skipped", "not selected", "not run"), "kind status")
    if k["status"] in ("partial", "skipped"):
        need(isinstance(k["reason"], str) and k["reason"], "skip reason")
    print("kind", k["kind"], k["status"], 1 if k["reason"] else 0, k["enable"] or "-")
for e in d["experiments"]:
    need(e["name"] in ("random", "chase", "touch", "hash", "strings", "absl"), "experiment name")
    need(isinstance(e["unit"], str) and e["unit"].startswith("ns per"), "unit")
    if e["name"] == "absl":
        for r in e["runs"]:
            need(r["allocator"] in ("std", "hugify") and r["count"] > 0 and r["seconds"] > 0, "absl run")
            need(r["min_seconds"] <= r["seconds"] <= r["max_seconds"] and r["repetitions"] >= 3, "absl spread")
        print("absl", e["status"], len(e["runs"]), (e["reason"] or "-").replace(" ", "_"))
        continue
    counts = {}
    for p in e["points"]:
        need(p["kind"] in ("4K", "THP", "2M", "1G"), "point kind")
        need(isinstance(p["size_bytes"], int) and p["size_bytes"] > 0, "point size")
        need(isinstance(p["ns_per_op"], (int, float)) and p["ns_per_op"] > 0, "ns_per_op")
        # The spread: >= 3 timings, their median, min and max; noisy exactly when it exceeds the threshold.
        samples = p["ns_per_op_samples"]
        need(p["repetitions"] >= 3 and len(samples) == p["repetitions"], "repetitions")
        need(p["min_ns_per_op"] == min(samples) and p["max_ns_per_op"] == max(samples), "min/max")
        need(p["min_ns_per_op"] <= p["ns_per_op"] <= p["max_ns_per_op"], "median within min/max")
        need(abs(p["spread_fraction"] - (max(samples) - min(samples)) / p["ns_per_op"]) < 1e-3 * (1 + p["spread_fraction"]), "spread_fraction")
        need(p["noisy"] == (p["spread_fraction"] > d["noisy_spread_fraction"]) or abs(p["spread_fraction"] - d["noisy_spread_fraction"]) < 1e-4, "noisy")
        need(p["interval"] is None or p["interval"]["low_ns_per_op"] <= p["ns_per_op"] <= p["interval"]["high_ns_per_op"], "interval")
        need(isinstance(p["interleaved"], bool) and isinstance(p["tie"], bool), "interleaved, tie")
        need(isinstance(p["ops"], int) and p["ops"] > 0, "ops")
        need(0 <= p["coverage_fraction"] <= 1 and p["low_coverage"] == (p["coverage_fraction"] < d["coverage_min_fraction"]), "coverage")
        need(p["speedup"] is None or p["speedup"] > 0, "speedup")
        need(p["speedup"] is None or p["min_speedup"] <= p["speedup"] <= p["max_speedup"], "speedup spread")
        if p["kind"] == "4K":
            need(abs(p["speedup"] - 1) < 1e-9 and not p["tie"], "4K speedup is 1")
        if p["noisy"]:
            print("noisy", e["name"], p["kind"], p["size_bytes"])
        if e["name"] == "strings":
            need(p["count"] > 0, "strings count")
        if e["name"] == "touch":
            need(p["seconds"] > 0, "touch seconds")
        counts[p["kind"]] = counts.get(p["kind"], 0) + 1
    for s in e["skipped"]:
        need(s["reason"], "skipped reason")
    for kind, n in counts.items():
        print("points", e["name"], kind, n)
)PY";

// Reads the SVG (argv[1]) with xml.etree and prints "panel EXPERIMENT KIND KIND ..." per panel.
const char *const svg_check = R"PY(
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
if root.tag != ns + "svg": sys.exit("not an svg root: " + root.tag)
for panel in root.iter(ns + "g"):
    if panel.get("class") != "panel": continue
    kinds = [g.get("data-kind") for g in panel.iter(ns + "g") if g.get("class") == "series"]
    bars = 0
    for g in panel.iter(ns + "g"):
        if g.get("class") == "series" and g.find(ns + "polyline") is None: sys.exit("series without a line")
        if g.get("class") != "series": continue
        for bar in g.iter(ns + "path"):
            if bar.get("class") != "error-bar": continue
            if not float(bar.get("data-low")) <= float(bar.get("data-high")): sys.exit("error bar upside down")
            bars += 1
    print("panel", panel.get("data-experiment"), bars, *kinds)
)PY";

std::vector<std::vector<std::string>> lines_of(const std::string &text) {
  std::vector<std::vector<std::string>> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> row;
    std::string word;
    while (words >> word) row.push_back(word);
    if (!row.empty()) out.push_back(row);
  }
  return out;
}

// One full run (every experiment, every kind, tiny sizes), then its tables, JSON and chart. One test, so
// the run (the slow part) happens once: ctest starts every test in its own process.
TEST(BenchCli, EveryExperimentOnEveryAvailableKind) {
  std::string pool_2m = test_support::ensure_free_hugetlb(k2M, 8);
  ASSERT_TRUE(pool_2m.empty()) << "the 2 MiB pool is needed here: " << pool_2m;
  std::string pool_1g = test_support::ensure_free_hugetlb(k1G, 1);
  std::set<std::string> kinds = {"4K", "THP", "2M"};
  if (pool_1g.empty()) kinds.insert("1G");
  std::string json = temp_path("run.json"), svg = temp_path("run.svg");
  auto result = test_support::hugify({"bench", "--quick", "--max-size", "4M", "--json=" + json, "--chart", svg});
  std::cout << "1G pages: " << (pool_1g.empty() ? "available" : pool_1g) << "\n";

  // Tables on stdout; progress only on a terminal (the test's stderr is a pipe).
  ASSERT_EQ(result.status, 0) << result.out << result.err;
  for (const char *title : {"random: ", "chase: ", "touch: ", "hash: ", "strings: ", "absl: "})
    EXPECT_NE(result.out.find(std::string("\n") + title), std::string::npos) << title << "\n" << result.out;
  EXPECT_NE(result.out.find("chart: " + svg), std::string::npos);
  EXPECT_EQ(result.err.find("bench: "), std::string::npos) << result.err;
  if (!has_python()) GTEST_SKIP() << "python3 with json and xml.etree is needed to read the JSON and SVG";

  // JSON: every experiment has points for every kind the machine could give; 1G, when the kernel could
  // not give a page, is listed as skipped with its reason and the pool command.
  auto check = test_support::run({"python3", "-c", json_check, json});
  ASSERT_EQ(check.status, 0) << check.err << test_support::read_file(json);
  std::map<std::string, std::set<std::string>> seen;
  bool absl_seen = false;
  for (const auto &row : lines_of(check.out)) {
    if (row[0] == "points") seen[row[1]].insert(row[2]);
    if (row[0] == "kind" && row[1] == "1G" && !kinds.count("1G")) {
      EXPECT_EQ(row[2], "skipped") << pool_1g;
      EXPECT_EQ(row[3], "1");
      EXPECT_EQ(row[4], "hugify") << "enable hint missing";
    }
    if (row[0] == "kind" && kinds.count(row[1])) {
      EXPECT_EQ(row[2], "ok") << row[1];
    }
    if (row[0] == "absl") {
      absl_seen = true;
      if (access(HUGIFY_BENCH_DIR "/absl_hash_map", X_OK) == 0) {
        EXPECT_EQ(row[1], "ran") << row[3];
        EXPECT_EQ(row[2], "2");
      } else {
        EXPECT_EQ(row[1], "skipped");
        EXPECT_NE(row[3].find("absl_hash_map_not_found"), std::string::npos) << row[3];
      }
    }
  }
  EXPECT_TRUE(absl_seen);
  for (const char *experiment : {"random", "chase", "touch", "hash", "strings"})
    EXPECT_EQ(seen[experiment], kinds) << experiment;

  // The chart: well-formed SVG, a panel per size-swept experiment, one series per kind in each, an error
  // bar on every point of every huge kind (the 4K baseline is 1 by definition).
  check = test_support::run({"python3", "-c", svg_check, svg});
  ASSERT_EQ(check.status, 0) << check.err;
  std::set<std::string> panels;
  for (const auto &row : lines_of(check.out)) {
    ASSERT_EQ(row[0], "panel");
    panels.insert(row[1]);
    EXPECT_GT(std::stoi(row[2]), 0) << "error bars in " << row[1];
    EXPECT_EQ(std::multiset<std::string>(row.begin() + 3, row.end()),
              std::multiset<std::string>(kinds.begin(), kinds.end()))
        << check.out;
  }
  EXPECT_EQ(panels, (std::set<std::string>{"random", "chase", "hash", "strings"}));
  std::remove(json.c_str());
  std::remove(svg.c_str());
}

TEST(BenchCli, ForcedUnavailableKindIsSkippedWithReason) {
  // Named in --pages: a kind that could not be run is a shortfall (exit 1), reported in the JSON.
  std::string json = temp_path("forced.json");
  auto named = test_support::hugify({"bench", "chase", "--quick", "--pages", "2M", "--max-size", "64K", "--json=" + json},
                                    {{"HUGIFY_BENCH_UNAVAILABLE", "2M"}});
  EXPECT_EQ(named.status, 1) << named.err;
  std::string text = test_support::read_file(json);
  EXPECT_NE(text.find("HUGIFY_BENCH_UNAVAILABLE lists 2M"), std::string::npos) << text;
  if (has_python()) {
    auto check = test_support::run({"python3", "-c", json_check, json});
    ASSERT_EQ(check.status, 0) << check.err;
    auto rows = lines_of(check.out);
    bool seen = false;
    for (const auto &row : rows) {
      if (row[0] == "kind" && row[1] == "2M") {
        seen = true;
        EXPECT_EQ(row[2], "skipped");
        EXPECT_EQ(row[3], "1");
        EXPECT_EQ(row[4], "hugify");
      }
      EXPECT_FALSE(row[0] == "points" && row[2] == "2M") << "a skipped kind has no points";
    }
    EXPECT_TRUE(seen) << check.out;
  }
  std::remove(json.c_str());

  // Not named: listed as skipped in the table with the reason and the pool command; the run is done.
  auto unnamed = test_support::hugify({"bench", "random", "--quick", "--max-size", "64K"},
                                      {{"HUGIFY_BENCH_UNAVAILABLE", "2M,1G"}});
  EXPECT_EQ(unnamed.status, 0) << unnamed.err;
  EXPECT_NE(unnamed.out.find("2M: skipped: HUGIFY_BENCH_UNAVAILABLE lists 2M (a test setting); enable with: "
                             "hugify pool set 2M="),
            std::string::npos)
      << unnamed.out;
  EXPECT_NE(unnamed.out.find("1G: skipped: "), std::string::npos);
  EXPECT_EQ(unnamed.out.find("2M ns"), std::string::npos) << "no column for a kind without a single point";
}

// The test hook --inject-noise THP makes one repetition of every THP point twice as long (a busy wait
// inside the timed window): every THP point must come out flagged noisy, in the JSON, the table and the
// chart (hollow), and never pass for a clean figure. The exit status stays 0: noisy is a flag, not a
// failure.
TEST(BenchCli, ForcedNoisyPointIsFlagged) {
  if (!has_python()) GTEST_SKIP() << "python3 with json and xml.etree is needed to read the JSON and SVG";
  std::string json = temp_path("noisy.json"), svg = temp_path("noisy.svg");
  auto r = test_support::hugify({"bench", "chase", "random", "--quick", "--pages", "4K,THP", "--max-size", "256K",
                                 "--inject-noise", "THP", "--json=" + json, "--chart", svg});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  auto check = test_support::run({"python3", "-c", json_check, json});
  ASSERT_EQ(check.status, 0) << check.err << test_support::read_file(json);
  std::map<std::string, int> thp_points, thp_noisy;
  for (const auto &row : lines_of(check.out)) {
    if (row[0] == "points" && row[2] == "THP") thp_points[row[1]] = std::stoi(row[3]);
    if (row[0] == "noisy" && row[2] == "THP") thp_noisy[row[1]]++;
  }
  for (const char *experiment : {"chase", "random"}) {
    EXPECT_GT(thp_points[experiment], 0) << experiment;
    EXPECT_EQ(thp_noisy[experiment], thp_points[experiment]) << "every THP point of " << experiment << " is noisy\n"
                                                             << r.out;
  }
  EXPECT_NE(r.out.find("? noisy: the timings spread over 10 % of their median"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Noisy points: "), std::string::npos) << r.out;
  std::string chart = test_support::read_file(svg);
  EXPECT_NE(chart.find("hollow point: noisy"), std::string::npos);
  std::remove(json.c_str());
  std::remove(svg.c_str());
}

TEST(BenchCli, BadUsageIsExitTwo) {
  for (const auto &args : std::vector<std::vector<std::string>>{{"bench", "--pages", "3M"},
                                                                 {"bench", "--pages"},
                                                                 {"bench", "--max-size", "banana"},
                                                                 {"bench", "--max-size", "4K"},
                                                                 {"bench", "walk"},
                                                                 {"bench", "--inject-noise", "3M"},
                                                                 {"bench", "--json="},
                                                                 {"bench", "--frobnicate"}}) {
    auto r = test_support::hugify(args);
    EXPECT_EQ(r.status, 2) << args.back() << ": " << r.err;
    EXPECT_NE(r.err.find("Try 'hugify bench --help'"), std::string::npos) << r.err;
  }
  auto help = test_support::hugify({"bench", "--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("Examples:"), std::string::npos);
}

}  // namespace
