// SPDX-License-Identifier: MIT
// static_programs.cpp - programs nothing can be preloaded into, under `hugify run`: a musl -static program, a
// glibc -static one (tests/helpers/static_lookup.c) and a static Go program (built here with Debian's Go,
// golang-go). run stays their parent and collapses their tree's anonymous memory from outside while they run
// (src/cli/run/run_outside.c): each keeps its output and exit status, and run's report says how much of its
// heap was on huge pages at its peak. The programs stop once their own smaps_rollup shows 90 % of their
// anonymous memory huge, or at a deadline: no figure here is a timing.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace {

const char *const kDeadline = "120"; // seconds: a program gives up waiting for huge pages after this

// Why `hugify run` cannot collapse another process here, or "".
std::string cannot_collapse() {
  std::string feature = test_support::missing_kernel_feature("madv_collapse");
  if (!feature.empty()) return feature;
  if (geteuid() != 0) return "collapsing another process's memory (process_madvise) needs CAP_SYS_NICE: run as root";
  std::string mode = test_support::thp_mode();
  if (mode == "never") return "THP is 'never' here";
  return "";
}

// Runs program plain and under `hugify run --report`; both must print the same and exit alike. The report.
test_support::json_view run_both(const std::vector<std::string> &plain, const std::vector<std::string> &under,
                                 const std::string &report) {
  auto alone = test_support::run(plain);
  std::vector<std::string> args{"run", "--report", report, "--"};
  args.insert(args.end(), under.begin(), under.end());
  auto hugified = test_support::hugify(args);
  EXPECT_EQ(hugified.status, alone.status) << hugified.err;
  EXPECT_EQ(hugified.out, alone.out) << hugified.err;
  EXPECT_NE(hugified.err.find("from outside"), std::string::npos) << hugified.err;
  std::string error;
  auto doc = test_support::load_json(report, &error);
  EXPECT_TRUE(doc.present()) << error << hugified.err;
  return doc;
}

// What the report must say of a program whose heap is `mib` MiB: collapsed from outside, at least 90 % of its
// anonymous memory huge at its peak, and what it cost.
void expect_outside(const test_support::json_view &doc, uint64_t mib, uint64_t processes, bool collapsed = true) {
  auto outside = doc["outside"];
  ASSERT_TRUE(outside.present()) << "the report has no outside member";
  EXPECT_GE(outside["process_count"].u64(), processes);
  EXPECT_GE(outside["passes"].u64(), 1u);
  auto peak = outside.at("peak.allocated");
  EXPECT_GE(peak["resident_bytes"].u64(), mib << 20);
  EXPECT_GE(peak["huge_fraction"].number(), 0.9) << "huge " << peak["huge_bytes"].u64() << " of "
                                                 << peak["resident_bytes"].u64();
  if (collapsed && test_support::thp_mode() == "madvise") { // under "always" the kernel may have done it first
    EXPECT_GT(outside["collapsed_bytes"].u64(), 0u);
  }
  EXPECT_TRUE(outside["failure"].is_null()) << outside["failure"].text();
  EXPECT_EQ(outside["min_present_fraction"].number(), 0.5);
  EXPECT_TRUE(outside["cut_bytes"].has("sparse")); // the bloat guard's cut
  EXPECT_GE(outside["cpu_seconds"].number(), outside["collapse_cpu_seconds"].number() * 0.99);
  EXPECT_GE(outside.at("pause.longest_seconds").number(), outside.at("pause.p99_seconds").number() * 0.999);
}

class StaticPrograms : public ::testing::Test {
 protected:
  test_support::scratch_dir dir{"hugify-static"};
  void SetUp() override {
    std::string reason = cannot_collapse();
    if (!reason.empty()) GTEST_SKIP() << reason;
  }
  void run_lookup(const std::string &program, const std::vector<std::string> &extra, uint64_t processes,
                  bool collapsed = true) {
    std::vector<std::string> plain{program, "96", "0", "7"}, under{program, "96", kDeadline, "7", "until-huge"};
    plain.insert(plain.end(), extra.begin(), extra.end());
    under.insert(under.end(), extra.begin(), extra.end());
    auto doc = run_both(plain, under, dir.path + "/report.json");
    expect_outside(doc, 96, processes, collapsed);
  }
};

TEST_F(StaticPrograms, MuslStaticProgramKeepsItsOutputAndItsHeapGoesHuge) {
  std::string program = test_support::helper_path("musl_static_lookup");
  if (access(program.c_str(), X_OK) != 0)
    GTEST_SKIP() << "musl-gcc was not installed when hugify was built (Debian: apt-get install musl-tools)";
  run_lookup(program, {}, 1);
}

// glibc's static malloc reads the GLIBC_TUNABLES run sets (glibc.malloc.hugetlb=1: its mmaps advised), so its
// heap may be huge from its faults before run collapses any of it.
TEST_F(StaticPrograms, GlibcStaticProgramKeepsItsOutputAndItsHeapGoesHuge) {
  run_lookup(test_support::helper_path("static_lookup"), {}, 1, false);
}

// The child a static program forks is part of its tree: its heap is collapsed too (musl's malloc advises
// nothing, so what is huge is run's doing).
TEST_F(StaticPrograms, TheChildOfAStaticProgramIsCollapsedToo) {
  std::string program = test_support::helper_path("musl_static_lookup");
  if (access(program.c_str(), X_OK) != 0)
    GTEST_SKIP() << "musl-gcc was not installed when hugify was built (Debian: apt-get install musl-tools)";
  run_lookup(program, {"fork"}, 2);
}

// The text of the report names what was done from outside, and a --heap that preloads is refused.
TEST_F(StaticPrograms, TheTableSaysWhatWasCollapsedAndAnAllocatorIsRefused) {
  std::string program = test_support::helper_path("static_lookup");
  auto r = test_support::hugify({"run", "--report", "-", "--", program, "32", kDeadline, "0", "until-huge"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("collapsed from outside while it ran"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bloat guard"), std::string::npos) << r.err;
  auto refused = test_support::hugify({"run", "--heap", "jemalloc", "--", program, "1", "0", "0"});
  EXPECT_EQ(refused.status, 2) << refused.err;
  EXPECT_NE(refused.err.find("no allocator can be preloaded"), std::string::npos) << refused.err;
  auto off = test_support::hugify({"run", "--heap", "off", "--report", "-", "--", program, "1", "0", "4"});
  EXPECT_EQ(off.status, 4) << off.err;
  EXPECT_NE(off.err.find("--heap off leaves its memory alone"), std::string::npos) << off.err;
}

// check compares plain with the outside collapse alone, and says why the other configurations are skipped.
TEST_F(StaticPrograms, CheckComparesPlainWithTheOutsideCollapse) {
  std::string program = test_support::helper_path("static_lookup");
  auto r = test_support::hugify({"check", "--runs", "6", "--json", "--", program, "64", "2", "0"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::string error;
  auto doc = test_support::parse_json(r.out, &error);
  ASSERT_TRUE(doc.present()) << error;
  std::vector<std::string> names;
  for (const auto &config : doc["configs"].items()) names.push_back(config["name"].text());
  EXPECT_EQ(names, (std::vector<std::string>{"plain", "outside"}));
  auto outside = doc["configs"][1];
  EXPECT_EQ(outside.at("coverage.data_measured_at").text(), "peak") << r.err;
  EXPECT_GE(outside.at("coverage.data_resident_bytes").u64(), uint64_t{64} << 20);
  bool heap_skipped = false;
  for (const auto &skipped : doc["skipped"].items())
    if (skipped["name"].text() == "heap")
      heap_skipped = skipped["reason"].text().find("nothing can be preloaded") != std::string::npos;
  EXPECT_TRUE(heap_skipped) << r.out;
}

// A Go program built by Debian's Go (golang-go: /usr/bin/go), statically linked as Go links by default: a map
// of 4 million entries, looked up until 90 % of its anonymous memory is huge (or the deadline).
const char *const go_source = R"(package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func mostlyHuge() bool {
	data, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return false
	}
	var anonymous, huge uint64
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "Anonymous:" {
			anonymous, _ = strconv.ParseUint(fields[1], 10, 64)
		}
		if len(fields) >= 2 && fields[0] == "AnonHugePages:" {
			huge, _ = strconv.ParseUint(fields[1], 10, 64)
		}
	}
	return anonymous > 0 && huge*10 >= anonymous*9
}

func main() {
	entries, _ := strconv.ParseUint(os.Args[1], 10, 64)
	seconds, _ := strconv.ParseFloat(os.Args[2], 64)
	status, _ := strconv.Atoi(os.Args[3])
	m := make(map[uint64]uint64)
	var checksum uint64
	for i := uint64(0); i < entries; i++ {
		m[i*0x9e3779b97f4a7c15] = i
		checksum += i
	}
	var sink uint64
	for end := time.Now().Add(time.Duration(seconds * float64(time.Second))); time.Now().Before(end); {
		for k := uint64(0); k < 1000000; k++ {
			sink += m[(k*7919%entries)*0x9e3779b97f4a7c15]
		}
		if len(os.Args) > 4 && mostlyHuge() && end.After(time.Now().Add(3*time.Second)) {
			end = time.Now().Add(3 * time.Second) // 3 s more: run's next pass measures it
		}
	}
	fmt.Printf("go map %d entries checksum %d\n", entries, checksum)
	os.Exit(status)
}
)";

TEST_F(StaticPrograms, StaticGoProgramKeepsItsOutputAndItsHeapGoesHuge) {
  const std::string go = "/usr/bin/go"; // Debian's golang-go, what a fresh machine has
  if (access(go.c_str(), X_OK) != 0) GTEST_SKIP() << "no Go toolchain: apt-get install golang-go";
  std::ofstream(dir.path + "/main.go") << go_source;
  const char *tmp = getenv("TMPDIR");
  std::string cache = std::string(tmp && *tmp ? tmp : "/tmp") + "/hugify-test-go";
  std::map<std::string, std::string> env{{"CGO_ENABLED", "0"}, {"GOCACHE", cache + "/cache"},
                                         {"GOPATH", cache + "/path"}, {"GO111MODULE", "off"},
                                         {"GOTOOLCHAIN", "local"}, {"GOTELEMETRY", "off"}};
  std::string program = dir.path + "/go_map";
  auto built = test_support::run({go, "build", "-o", program, dir.path + "/main.go"}, env);
  ASSERT_EQ(built.status, 0) << built.err;
  auto doc = run_both({program, "4000000", "0", "5"}, {program, "4000000", kDeadline, "5", "until-huge"},
                      dir.path + "/report.json");
  expect_outside(doc, 96, 1); // a map of 4 M uint64 pairs: well over 96 MiB of Go heap
  EXPECT_NE(doc["outside"]["why"].text().find("Go"), std::string::npos) << doc["outside"]["why"].text();
}

}  // namespace
