// SPDX-License-Identifier: MIT
// hugify bench: every experiment on every page kind this machine can give (small sizes), its JSON and
// its SVG chart read back with independent parsers (jansson and python3's xml.etree), and kinds that
// cannot be had reported skipped with their reason and the pool command. Every point carries its spread
// (median, min, max of >= 3 interleaved timings; error bars in the chart), and a point made noisy on
// purpose (--inject-noise, the test hook) is flagged.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
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

// Only the chart is read with python3 (xml.etree, an SVG reader independent of hugify); the JSON is read
// with jansson.
bool has_python() { return test_support::run({"python3", "-c", "import xml.etree.ElementTree"}).status == 0; }

// What the tests assert on, from a hugify.bench/2 document that read_bench_json validated field by field
// against docs/bench.md.
struct bench_kind {
  std::string status, reason, enable; // reason and enable "" when null
};
struct bench_summary {
  std::map<std::string, bench_kind> kinds;                         // by kind: "4K", "THP", "2M", "1G"
  std::map<std::string, std::map<std::string, int>> points, noisy; // experiment -> kind -> point count
  bool absl_seen = false;                                          // the absl experiment is listed
  std::string absl_status, absl_reason;                            // absl_reason "" when null
  size_t absl_runs = 0;
};

std::string first_word(const std::string &text) {
  std::istringstream words(text);
  std::string word;
  words >> word;
  return word;
}

// Reads and validates a bench JSON, field by field against the schema of docs/bench.md; returns what the
// tests assert on. A violation fails the test.
bench_summary read_bench_json(const std::string &path) {
  std::string error;
  auto d = test_support::load_json(path, &error);
  bench_summary s;
  if (!d.present()) {
    ADD_FAILURE() << error << "\n" << test_support::read_file(path);
    return s;
  }
  EXPECT_EQ(d.members().at(0).first, "schema");
  EXPECT_EQ(d["schema"].text(), "hugify.bench/2");
  EXPECT_TRUE(is_bool(d["quick"]));
  EXPECT_TRUE(is_int(d["max_size_bytes"]) && d["max_size_bytes"].number() > 0) << "max_size_bytes";
  EXPECT_TRUE(is_number(d["elapsed_seconds"]));
  EXPECT_GE(d["repetitions"].number(), 3);
  double noisy_spread = d["noisy_spread_fraction"].number(), coverage_min = d["coverage_min_fraction"].number();
  EXPECT_EQ(noisy_spread, 0.1);
  EXPECT_EQ(coverage_min, 0.95);
  EXPECT_TRUE(d["noise_cause"].is_null() || is_string(d["noise_cause"]));
  EXPECT_TRUE(is_string(d["machine"]["kernel"]));
  EXPECT_EQ(d["machine"]["base_page_size_bytes"].number(), 4096);
  EXPECT_TRUE(is_number(d["machine"]["load_average"]));
  EXPECT_TRUE(is_int(d["exit_status"]));

  const std::set<std::string> kind_names = {"4K", "THP", "2M", "1G"};
  std::vector<std::string> kinds_in_order;
  EXPECT_TRUE(is_array(d["kinds"]));
  for (const auto &k : d["kinds"].items()) {
    std::string name = k["kind"].text();
    kinds_in_order.push_back(name);
    bench_kind &kind = s.kinds[name];
    kind.status = k["status"].text();
    EXPECT_TRUE(kind.status == "ok" || kind.status == "partial" || kind.status == "skipped" ||
                kind.status == "not selected" || kind.status == "not run") << name << ": " << kind.status;
    EXPECT_TRUE(k.has("reason") && k.has("enable")) << name;
    kind.reason = k["reason"].text();
    kind.enable = k["enable"].text();
    if (kind.status == "partial" || kind.status == "skipped") {
      EXPECT_TRUE(is_string(k["reason"]) && !kind.reason.empty()) << "the reason " << name << " is " << kind.status;
    }
  }
  EXPECT_EQ(kinds_in_order, (std::vector<std::string>{"4K", "THP", "2M", "1G"}));

  const std::set<std::string> experiment_names = {"random", "chase", "touch", "hash", "strings", "absl"};
  EXPECT_TRUE(is_array(d["experiments"]));
  for (const auto &e : d["experiments"].items()) {
    std::string name = e["name"].text();
    EXPECT_TRUE(experiment_names.count(name)) << "experiment name " << name;
    EXPECT_TRUE(is_string(e["unit"]) && e["unit"].text().rfind("ns per", 0) == 0) << name << ".unit";
    if (name == "absl") {
      EXPECT_TRUE(is_array(e["runs"]));
      for (const auto &r : e["runs"].items()) {
        std::string allocator = r["allocator"].text();
        EXPECT_TRUE(allocator == "std" || allocator == "hugify") << "absl run allocator " << allocator;
        EXPECT_GT(r["count"].number(), 0) << allocator;
        EXPECT_GT(r["seconds"].number(), 0) << allocator;
        EXPECT_LE(r["min_seconds"].number(), r["seconds"].number()) << allocator;
        EXPECT_LE(r["seconds"].number(), r["max_seconds"].number()) << allocator;
        EXPECT_GE(r["repetitions"].number(), 3) << allocator;
      }
      EXPECT_TRUE(e.has("status") && e.has("reason")) << "absl";
      s.absl_seen = true;
      s.absl_status = e["status"].text();
      s.absl_runs = e["runs"].size();
      s.absl_reason = e["reason"].text();
      continue;
    }
    EXPECT_TRUE(is_array(e["points"])) << name;
    for (const auto &p : e["points"].items()) {
      std::string kind = p["kind"].text();
      std::string where = name + " " + kind + " " + std::to_string(p["size_bytes"].u64());
      EXPECT_TRUE(kind_names.count(kind)) << where;
      EXPECT_TRUE(is_int(p["size_bytes"]) && p["size_bytes"].number() > 0) << where;
      double ns = p["ns_per_op"].number();
      EXPECT_GT(ns, 0) << where;
      // The spread: >= 3 timings, their median, min and max; noisy exactly when it exceeds the threshold.
      std::vector<double> samples;
      EXPECT_TRUE(is_array(p["ns_per_op_samples"])) << where;
      for (const auto &t : p["ns_per_op_samples"].items()) samples.push_back(t.number());
      EXPECT_GE(p["repetitions"].number(), 3) << where;
      EXPECT_EQ(samples.size(), p["repetitions"].number()) << where;
      double low = samples.empty() ? NAN : *std::min_element(samples.begin(), samples.end());
      double high = samples.empty() ? NAN : *std::max_element(samples.begin(), samples.end());
      EXPECT_EQ(p["min_ns_per_op"].number(), low) << where;
      EXPECT_EQ(p["max_ns_per_op"].number(), high) << where;
      EXPECT_LE(p["min_ns_per_op"].number(), ns) << "median within min/max: " << where;
      EXPECT_LE(ns, p["max_ns_per_op"].number()) << "median within min/max: " << where;
      double spread = p["spread_fraction"].number();
      EXPECT_LT(std::fabs(spread - (high - low) / ns), 1e-3 * (1 + spread)) << where;
      // At the threshold itself, rounding in the JSON's figures may tip the flag either way.
      EXPECT_TRUE((is_bool(p["noisy"]) && p["noisy"].flag() == (spread > noisy_spread)) ||
                  std::fabs(spread - noisy_spread) < 1e-4) << "noisy: " << where;
      const auto &interval = p["interval"];
      EXPECT_TRUE(interval.is_null() ||
                  (interval["low_ns_per_op"].number() <= ns && ns <= interval["high_ns_per_op"].number())) << where;
      EXPECT_TRUE(is_bool(p["interleaved"]) && is_bool(p["tie"])) << where;
      EXPECT_TRUE(is_int(p["ops"]) && p["ops"].number() > 0) << where;
      double coverage = p["coverage_fraction"].number();
      EXPECT_TRUE(coverage >= 0 && coverage <= 1) << where;
      EXPECT_TRUE(is_bool(p["low_coverage"]) && p["low_coverage"].flag() == (coverage < coverage_min)) << where;
      const auto &speedup = p["speedup"];
      EXPECT_TRUE(speedup.is_null() || speedup.number() > 0) << where;
      EXPECT_TRUE(speedup.is_null() || (p["min_speedup"].number() <= speedup.number() &&
                                        speedup.number() <= p["max_speedup"].number())) << where;
      if (kind == "4K") {
        EXPECT_LT(std::fabs(speedup.number() - 1), 1e-9) << "4K speedup is 1: " << where;
        EXPECT_FALSE(p["tie"].flag()) << "4K is no tie with itself: " << where;
      }
      if (p["noisy"].flag()) s.noisy[name][kind]++;
      if (name == "strings") {
        EXPECT_GT(p["count"].number(), 0) << where;
      }
      if (name == "touch") {
        EXPECT_GT(p["seconds"].number(), 0) << where;
      }
      s.points[name][kind]++;
    }
    EXPECT_TRUE(is_array(e["skipped"])) << name;
    for (const auto &k : e["skipped"].items()) EXPECT_FALSE(k["reason"].text().empty()) << name << " skipped";
  }
  return s;
}

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

  // JSON: every experiment has points for every kind the machine could give; 1G, when the kernel could
  // not give a page, is listed as skipped with its reason and the pool command.
  auto summary = read_bench_json(json);
  if (!kinds.count("1G")) {
    const bench_kind &gigantic = summary.kinds["1G"];
    EXPECT_EQ(gigantic.status, "skipped") << pool_1g;
    EXPECT_FALSE(gigantic.reason.empty());
    EXPECT_EQ(first_word(gigantic.enable), "hugify") << "enable hint missing";
  }
  for (const auto &kind : kinds) EXPECT_EQ(summary.kinds[kind].status, "ok") << kind;
  EXPECT_TRUE(summary.absl_seen);
  if (summary.absl_seen) {
    if (access(HUGIFY_BENCH_DIR "/absl_hash_map", X_OK) == 0) {
      EXPECT_EQ(summary.absl_status, "ran") << summary.absl_reason;
      EXPECT_EQ(summary.absl_runs, 2u);
    } else {
      EXPECT_EQ(summary.absl_status, "skipped");
      EXPECT_NE(summary.absl_reason.find("absl_hash_map not found"), std::string::npos) << summary.absl_reason;
    }
  }
  for (const char *experiment : {"random", "chase", "touch", "hash", "strings"}) {
    std::set<std::string> with_points;
    for (const auto &[kind, count] : summary.points[experiment]) with_points.insert(kind);
    EXPECT_EQ(with_points, kinds) << experiment;
  }

  // The chart: well-formed SVG, a panel per size-swept experiment, one series per kind in each, an error
  // bar on every point of every huge kind (the 4K baseline is 1 by definition).
  if (!has_python()) GTEST_SKIP() << "python3 with xml.etree is needed to read the SVG";
  auto check = test_support::run({"python3", "-c", svg_check, svg});
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
  auto summary = read_bench_json(json);
  EXPECT_TRUE(summary.kinds.count("2M")) << text;
  const bench_kind &forced = summary.kinds["2M"];
  EXPECT_EQ(forced.status, "skipped");
  EXPECT_FALSE(forced.reason.empty());
  EXPECT_EQ(first_word(forced.enable), "hugify");
  for (const auto &[experiment, counts] : summary.points)
    EXPECT_FALSE(counts.count("2M")) << "a skipped kind has no points: " << experiment;
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
  std::string json = temp_path("noisy.json"), svg = temp_path("noisy.svg");
  auto r = test_support::hugify({"bench", "chase", "random", "--quick", "--pages", "4K,THP", "--max-size", "256K",
                                 "--inject-noise", "THP", "--json=" + json, "--chart", svg});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  auto summary = read_bench_json(json);
  for (const char *experiment : {"chase", "random"}) {
    int thp_points = summary.points[experiment]["THP"];
    EXPECT_GT(thp_points, 0) << experiment;
    EXPECT_EQ(summary.noisy[experiment]["THP"], thp_points) << "every THP point of " << experiment << " is noisy\n"
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
