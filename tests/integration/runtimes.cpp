// SPDX-License-Identifier: MIT
// runtimes.cpp - runtimes whose own allocator holds the data: what `hugify run` does with a Go program (a
// static one is refused with the reason, a cgo one runs with a note), and what inspect names as the data's
// allocator for Go and CPython, on real programs built or started here. Go programs are built once per kind
// with Debian's Go toolchain (golang-go, which scripts/test installs; else go on PATH), standard library
// only, so no network is needed; without Go the tests skip with the reason, and fail in CI
// (HUGIFY_TEST_STRICT).
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "elf_image.h"
#include "test_support.hpp"

namespace {

// Allocates and touches 64 MiB in its heap, then runs the command of its arguments with its own pid appended
// (`hugify inspect --json PID`) and prints that command's output: inspect sees a live Go heap, in order.
const char *const go_source = R"(package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

var keep []byte

func main() {
	keep = make([]byte, 64<<20)
	for i := range keep {
		keep[i] = byte(i)
	}
	fmt.Println("go program ran")
	if len(os.Args) > 1 {
		out, err := exec.Command(os.Args[1], append(os.Args[2:], strconv.Itoa(os.Getpid()))...).Output()
		if err != nil {
			fmt.Println("inspect failed:", err)
			os.Exit(1)
		}
		os.Stdout.Write(out)
	}
}
)";

// Debian's Go toolchain (golang-go: /usr/lib/go/bin/go, which scripts/test installs), else the first go on
// PATH; "" when there is none.
std::string find_go() {
  auto r = test_support::run({"sh", "-c", "test -x /usr/lib/go/bin/go && echo /usr/lib/go/bin/go || command -v go"});
  std::string path = r.out.substr(0, r.out.find('\n'));
  return r.status == 0 ? path : "";
}

class GoPrograms : public ::testing::Test {
protected:
  static inline test_support::scratch_dir *dir;
  static inline std::string skip_reason, static_program, cgo_program;

  // One build per kind for the whole suite: a cold Go build of the standard library takes ~20 s here.
  static void SetUpTestSuite() {
    std::string go = find_go();
    if (go.empty()) {
      skip_reason = "no Go toolchain: Debian's golang-go is not installed (/usr/lib/go/bin/go, nor go on PATH)";
      return;
    }
    std::printf("the Go toolchain: %s\n", go.c_str());
    dir = new test_support::scratch_dir("hugify-runtimes-go");
    std::ofstream(dir->path + "/main.go") << go_source;
    // A cache outside the scratch directory, so a second run does not rebuild the standard library; nothing
    // in HOME is needed (a root CI job from a clean clone has none of its own).
    const char *tmp = std::getenv("TMPDIR");
    std::string cache = std::string(tmp && *tmp ? tmp : "/tmp") + "/hugify-test-go";
    std::map<std::string, std::string> env = {{"GOCACHE", cache + "/cache"}, {"GOPATH", cache + "/path"},
                                              {"GOTOOLCHAIN", "local"}, {"GOTELEMETRY", "off"},
                                              {"GOFLAGS", "-buildvcs=false"}, {"GO111MODULE", "off"}};
    static_program = dir->path + "/static_go";
    cgo_program = dir->path + "/cgo_go";
    env["CGO_ENABLED"] = "0";
    auto built = test_support::run({go, "build", "-o", static_program, dir->path + "/main.go"}, env);
    if (built.status != 0) {
      skip_reason = "go build (static) failed: " + built.err;
      return;
    }
    env["CGO_ENABLED"] = "1";
    built = test_support::run({go, "build", "-ldflags=-linkmode=external", "-o", cgo_program, dir->path + "/main.go"}, env);
    if (built.status != 0) skip_reason = "go build with cgo (needs a C compiler) failed: " + built.err;
  }
  static void TearDownTestSuite() {
    delete dir;
    dir = nullptr;
  }
  void SetUp() override { REQUIRE_PREREQUISITE(skip_reason); }
};

bool is_go_file(const std::string &path) {
  size_t size = 0;
  void *image;
  if (elf_map_file(path.c_str(), &image, &size) != 0) return false;
  bool go = elf_is_go(image, size);
  elf_unmap(image, size);
  return go;
}

TEST_F(GoPrograms, TheElfReaderKnowsThemAndOnlyThem) {
  EXPECT_TRUE(is_go_file(static_program));
  EXPECT_TRUE(is_go_file(cgo_program));
  EXPECT_FALSE(is_go_file(HUGIFY_CLI_PATH));
  EXPECT_FALSE(is_go_file(test_support::helper_path("static_hello")));
}

// Nothing run sets reaches a static Go program: it runs, and run collapses its memory from outside
// (static_programs.cpp: what that puts on huge pages).
TEST_F(GoPrograms, RunRunsAStaticGoProgramAndCollapsesItFromOutside) {
  auto r = test_support::hugify({"run", "--", static_program});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "go program ran\n") << r.err;
  EXPECT_NE(r.err.find("is a statically linked Go program"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("from outside"), std::string::npos) << r.err;
}

// A static glibc program runs too, with the same note.
TEST_F(GoPrograms, RunStillRunsAStaticGlibcProgramWithTheNote) {
  auto r = test_support::hugify({"run", "--", test_support::helper_path("static_hello")});
  EXPECT_NE(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("is statically linked (no program interpreter)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Go program"), std::string::npos) << r.err;
}

// A cgo Go program runs, exit status kept, and run says whose its heap is and where to turn.
TEST_F(GoPrograms, RunGoesOnForACgoProgramAndSaysItsHeapIsTheRuntimes) {
  auto r = test_support::hugify({"run", "--", cgo_program});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("go program ran"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("is a Go program: its heap is the Go runtime's own"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("writes no report"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hugify collapse PID"), std::string::npos) << r.err;
}

// inspect names the Go runtime as what holds the data (the executable's ELF), static or with cgo, and does not
// take the heap arena that holds a goroutine's stack for a thread stack.
TEST_F(GoPrograms, InspectNamesTheGoRuntimesHeap) {
  for (const std::string &program : {static_program, cgo_program}) {
    auto r = test_support::run({program, HUGIFY_CLI_PATH, "inspect", "--json"});
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    std::string json = r.out.substr(r.out.find('{'));
    auto process = test_support::parse_json(json)["processes"][0];
    EXPECT_EQ(process["allocator"].text(), "go") << program;
    EXPECT_TRUE(process["allocator_is_runtime"].flag()) << program;
    EXPECT_NE(process["allocator_data"].text().find("Go runtime"), std::string::npos) << program;
    EXPECT_GE(process["classes"]["anon"]["resident_bytes"].number(), 64.0 * (1 << 20))
        << "the 64 MiB it touched is its anonymous memory, not a stack: " << program;
  }
}

// CPython: obmalloc holds the objects unless PYTHONMALLOC=malloc was in the environment it started with.
TEST(RuntimeAllocator, InspectNamesCpythonsObmallocUnlessPythonmallocIsMalloc) {
  if (test_support::run({"python3", "-c", "pass"}).status != 0) GTEST_SKIP() << "python3 is not installed";
  // python3 runs `hugify inspect [--json] ITS_PID` and prints what it said
  const std::string script = "import os, subprocess, sys; "
                             "sys.stdout.write(subprocess.run(sys.argv[1:] + [str(os.getpid())], "
                             "capture_output=True, text=True).stdout)";
  for (const char *setting : {"\x01unset", "malloc", "pymalloc"}) {
    auto r = test_support::run({"python3", "-c", script, HUGIFY_CLI_PATH, "inspect", "--json"}, {{"PYTHONMALLOC", setting}});
    ASSERT_EQ(r.status, 0) << r.err;
    auto process = test_support::parse_json(r.out)["processes"][0];
    bool malloc = std::string(setting) == "malloc";
    EXPECT_EQ(process["allocator"].text(), malloc ? "glibc" : "pymalloc") << setting;
    EXPECT_EQ(process["allocator_is_runtime"].flag(), !malloc) << setting;
    auto text = test_support::run({"python3", "-c", script, HUGIFY_CLI_PATH, "inspect"}, {{"PYTHONMALLOC", setting}});
    EXPECT_NE(text.out.find(malloc ? "  allocator: glibc\n"
                                   : "  allocator: pymalloc: data in CPython obmalloc arenas (1 MiB mmaps), not malloc's\n"),
              std::string::npos) << text.out;
  }
}

// The run report says it too (hugify.report/2 and hugify.run/1: allocator, allocator_data, allocator_is_runtime).
TEST(RuntimeAllocator, RunReportNamesTheRuntime) {
  if (test_support::run({"python3", "-c", "pass"}).status != 0) GTEST_SKIP() << "python3 is not installed";
  test_support::scratch_dir dir("hugify-runtimes-report");
  std::string report = dir.path + "/r.json";
  auto r = test_support::hugify({"run", "--report", report, "--", "python3", "-c", "x = [str(i) for i in range(100000)]"},
                                {{"PYTHONMALLOC", "\x01unset"}});
  ASSERT_EQ(r.status, 0) << r.err;
  auto tree = test_support::load_json(report);
  EXPECT_EQ(tree["allocator"].text(), "pymalloc");
  EXPECT_TRUE(tree["allocator_is_runtime"].flag());
  bool found = false; // python3 may be a wrapper script (pyenv's shims): its shells are processes of the tree
  for (const auto &process : tree["processes"].items())
    if (process["allocator"].text() == "pymalloc") {
      found = true;
      EXPECT_EQ(process["allocator_data"].text(), "CPython obmalloc arenas (1 MiB mmaps)");
    }
  EXPECT_TRUE(found);
  auto text = test_support::hugify({"run", "--report", "-", "--", "python3", "-c", "pass"}, {{"PYTHONMALLOC", "\x01unset"}});
  EXPECT_NE(text.err.find("data (pid "), std::string::npos) << text.err;
  EXPECT_NE(text.err.find("): CPython obmalloc arenas (1 MiB mmaps) (pymalloc), not malloc's"), std::string::npos) << text.err;
  auto with_malloc = test_support::hugify({"run", "--report", report, "--", "python3", "-c", "pass"},
                                          {{"PYTHONMALLOC", "malloc"}});
  ASSERT_EQ(with_malloc.status, 0) << with_malloc.err;
  EXPECT_EQ(test_support::load_json(report)["allocator"].text(), "glibc");
}

}  // namespace
