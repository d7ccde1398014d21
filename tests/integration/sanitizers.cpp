// SPDX-License-Identifier: MIT
// sanitizers.cpp - programs built with the sanitizers (gcc's AddressSanitizer with its shared runtime,
// gcc's ThreadSanitizer, clang's AddressSanitizer with its static runtime) and run under valgrind behave
// under `hugify run`, `hugify env` and `hugify check` as they do plain: same output, same exit status, run
// directly and as the child of a shell script; ASan still reports a heap overflow; the preload's mappings
// stay out of ASan's shadow; the report names the sanitizer's allocator. The programs are compiled here,
// into a scratch directory; a missing compiler or runtime is a skip with the compiler's message.
//
// The repository's own sanitized build (scripts/test --sanitize) sets ASAN_OPTIONS for the whole suite:
// every child here starts with ASAN_OPTIONS unset (or set by the test), so the tests prove what hugify
// sets, in both builds.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <ostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace {

using test_support::command_result;

const char kUnset[] = "\x01unset";

// One program for every build. "ok": heap blocks (malloc, so the sanitizer's allocator), a thread (TSan
// follows it), 2 MiB-and-more anonymous private and shared mmaps that the preload places (their addresses
// on stderr: output that differs from run to run stays off stdout); stdout is a checksum; the exit status
// is argv[2]. "overflow": one byte past a heap block.
const char kProgram[] = R"(#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
static void *fill(void *block) { memset(block, 7, 1 << 20); return NULL; }
int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "overflow") == 0) {
    volatile char *p = malloc(16);
    p[16] = 1;
    printf("overflow not seen %d\n", p[16]);
    free((void *)p);
    return 0;
  }
  unsigned long sum = 0;
  char *big = malloc(24 << 20), *thread_block = malloc(1 << 20);
  memset(big, 1, 24 << 20);
  pthread_t thread;
  pthread_create(&thread, NULL, fill, thread_block);
  pthread_join(thread, NULL);
  for (int i = 0; i < 3; i++) {
    size_t length = (3u << 20) + 4096u * (unsigned)i;
    char *private_map = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *shared_map = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (private_map == MAP_FAILED || shared_map == MAP_FAILED) { perror("mmap"); return 70; }
    memset(private_map, 2, length);
    memset(shared_map, 3, length);
    fprintf(stderr, "mapping %p %zu\nmapping %p %zu\n", (void *)private_map, length, (void *)shared_map, length);
    sum += (unsigned long)private_map[length - 1] + (unsigned long)shared_map[0];
    munmap(private_map, length);
    munmap(shared_map, length);
  }
  for (size_t i = 0; i < (24u << 20); i += 4096) sum += (unsigned long)big[i];
  sum += (unsigned long)thread_block[12345];
  printf("checksum %lu\n", sum);
  free(big);
  free(thread_block);
  return argc > 2 ? atoi(argv[2]) : 0;
}
)";

// A shell script that runs its arguments as a child (not exec'd), then says what it saw.
const char kScript[] = "#!/bin/sh\n\"$@\"\nstatus=$?\necho \"script: child exited $status\"\nexit $status\n";

struct build {
  const char *name, *compiler, *flag, *heap_owner;
  bool asan;
};
const build kBuilds[] = {
    {"gcc_asan", "gcc", "-fsanitize=address", "AddressSanitizer", true},
    {"gcc_tsan", "gcc", "-fsanitize=thread", "ThreadSanitizer", false},
    {"clang_asan", "clang", "-fsanitize=address", "AddressSanitizer", true},
};

void PrintTo(const build &b, std::ostream *out) { *out << b.name; } // test names, not bytes

// Children start without the suite's ASAN_OPTIONS (and without sanitizer options the user may have).
std::map<std::string, std::string> clean_env(std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> env = {{"ASAN_OPTIONS", kUnset}, {"TSAN_OPTIONS", kUnset},
                                            {"LSAN_OPTIONS", kUnset}, {"HUGIFY_REPORT", kUnset},
                                            {"HUGIFY_RUN_PID", kUnset}, {"LD_PRELOAD", kUnset}};
  for (const auto &[name, value] : extra) env[name] = value;
  return env;
}

class Sanitized : public ::testing::TestWithParam<build> {
 protected:
  test_support::scratch_dir dir{"hugify-sanitizers-test"};
  std::string program, script;

  void SetUp() override {
    ASSERT_FALSE(dir.path.empty());
    std::ofstream(dir.path + "/program.c") << kProgram;
    script = dir.path + "/script.sh";
    std::ofstream(script) << kScript;
    ASSERT_EQ(chmod(script.c_str(), 0755), 0);
    const build &b = GetParam();
    program = dir.path + "/" + b.name;
    command_result compiled =
        test_support::run({b.compiler, "-g", "-O1", b.flag, "-pthread", dir.path + "/program.c", "-o", program},
                          clean_env());
    if (compiled.status != 0)
      GTEST_SKIP() << b.compiler << " " << b.flag << " cannot build a program here: " << compiled.err;
    command_result trial = test_support::run({program, "ok", "0"}, clean_env());
    if (trial.status != 0)  // e.g. the runtime is not installed, or cannot start on this kernel
      GTEST_SKIP() << b.name << " program does not run here (exit " << trial.status << "): " << trial.err;
  }
};

// `hugify env`'s environment, then CMD, in sh.
command_result under_env(const std::vector<std::string> &cmd, const std::map<std::string, std::string> &env) {
  std::string line = "eval \"$(\"$0\" env)\" && exec";
  for (size_t i = 0; i < cmd.size(); i++) line += " \"$" + std::to_string(i + 1) + "\"";
  std::vector<std::string> argv = {"sh", "-c", line, HUGIFY_CLI_PATH};
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return test_support::run(argv, env);
}

TEST_P(Sanitized, RunAndEnvGiveThePlainOutputAndExitStatus) {
  const std::vector<std::vector<std::string>> commands = {{program, "ok", "3"}, {script, program, "ok", "5"}};
  for (const auto &cmd : commands) {
    SCOPED_TRACE(cmd[0]);
    command_result plain = test_support::run(cmd, clean_env());
    ASSERT_NE(plain.out.find("checksum"), std::string::npos) << plain.err;
    std::vector<std::string> args = {"run", "--"};
    args.insert(args.end(), cmd.begin(), cmd.end());
    command_result run = test_support::hugify(args, clean_env());
    EXPECT_EQ(run.out, plain.out) << run.err;
    EXPECT_EQ(run.status, plain.status) << run.err;
    std::vector<std::string> text_off = {"run", "--text", "off", "--"};
    text_off.insert(text_off.end(), cmd.begin(), cmd.end());
    command_result run_text_off = test_support::hugify(text_off, clean_env());
    EXPECT_EQ(run_text_off.out, plain.out) << run_text_off.err;
    EXPECT_EQ(run_text_off.status, plain.status) << run_text_off.err;
    command_result env = under_env(cmd, clean_env());
    EXPECT_EQ(env.out, plain.out) << env.err;
    EXPECT_EQ(env.status, plain.status) << env.err;
  }
}

TEST_P(Sanitized, ReportNamesTheSanitizersAllocator) {
  std::string report = dir.path + "/report.json";
  command_result run = test_support::hugify({"run", "--report", report, "--", script, program, "ok", "0"}, clean_env());
  ASSERT_EQ(run.status, 0) << run.err;
  test_support::json_view tree = test_support::load_json(report);
  EXPECT_EQ(tree["heap_owner"].text(), GetParam().heap_owner);
  bool found = false;
  for (const auto &process : tree["processes"].items()) {
    if (process["command"].text().find(GetParam().name) == std::string::npos) {
      EXPECT_TRUE(process["heap_owner"].is_null()) << process["command"].text();  // the shell: glibc's
      continue;
    }
    found = true;
    EXPECT_EQ(process["heap_owner"].text(), GetParam().heap_owner);
  }
  EXPECT_TRUE(found) << "no report from the sanitized program";
}

TEST_P(Sanitized, CheckMeasuresItAndItsRunsAreAsPlain) {
  command_result plain = test_support::run({program, "ok", "0"}, clean_env());
  ASSERT_EQ(plain.status, 0) << plain.err;
  // Every run of CMD compares its program's output with plain's: check stops at the first run that
  // differs (exit 9) or fails, so a finished check means every run was as plain.
  std::string compare = "out=$(\"$0\" ok 0) && [ \"$out\" = \"" + plain.out.substr(0, plain.out.size() - 1) +
                        "\" ] || exit 9";
  const std::vector<std::vector<std::string>> commands = {{program, "ok", "0"}, {"sh", "-c", compare, program}};
  for (const auto &cmd : commands) {
    SCOPED_TRACE(cmd[0]);
    std::vector<std::string> args = {"check", "--runs", "6", "--configs", "heap,heap+text", "--json", "--"};
    args.insert(args.end(), cmd.begin(), cmd.end());
    command_result check = test_support::hugify(args, clean_env());
    ASSERT_EQ(check.status, 0) << check.out << check.err;
    test_support::json_view result = test_support::parse_json(check.out);
    ASSERT_EQ(result["configs"].size(), 3u) << check.out;
    for (const auto &config : result["configs"].items()) {
      EXPECT_EQ(config["runs"].u64(), 6u) << config["name"].text();
      if (config["name"].text() == "plain") continue;
      EXPECT_EQ(config["coverage"]["heap_owner"].text(), GetParam().heap_owner) << config["name"].text();
    }
  }
}

TEST_P(Sanitized, CheckSkipsTheAllocatorsAndRunRefusesThem) {
  command_result check = test_support::hugify({"check", "--runs", "6", "--json", "--", program, "ok", "0"}, clean_env());
  ASSERT_EQ(check.status, 0) << check.out << check.err;
  test_support::json_view result = test_support::parse_json(check.out);
  size_t skipped = 0;
  for (const auto &entry : result["skipped"].items())
    if (entry["name"].text() == "mimalloc" || entry["name"].text() == "jemalloc" || entry["name"].text() == "tcmalloc") {
      skipped++;
      EXPECT_NE(entry["reason"].text().find(GetParam().heap_owner), std::string::npos) << entry["reason"].text();
    }
  EXPECT_EQ(skipped, 3u) << check.out;
  for (const char *engine : {"mimalloc", "jemalloc", "tcmalloc"}) {
    command_result run = test_support::hugify({"run", "--heap", engine, "--", program, "ok", "0"}, clean_env());
    EXPECT_EQ(run.status, 2) << run.err;
    EXPECT_NE(run.err.find(GetParam().heap_owner), std::string::npos) << run.err;
    EXPECT_EQ(run.out, "") << "the program must not have run";
  }
}

// What only AddressSanitizer does (find heap overflows, print its layout): instantiated for its builds alone,
// so ThreadSanitizer has no such cases rather than skipped ones.
class AddressSanitized : public Sanitized {};

std::vector<build> address_sanitizer_builds() {
  std::vector<build> builds;
  for (const build &b : kBuilds)
    if (b.asan) builds.push_back(b);
  return builds;
}

TEST_P(AddressSanitized, HeapOverflowIsStillReported) {
  for (const std::vector<std::string> &cmd :
       {std::vector<std::string>{program, "overflow"}, std::vector<std::string>{script, program, "overflow"}}) {
    std::vector<std::string> args = {"run", "--"};
    args.insert(args.end(), cmd.begin(), cmd.end());
    command_result run = test_support::hugify(args, clean_env());
    EXPECT_NE(run.status, 0) << run.err;
    EXPECT_NE(run.err.find("ERROR: AddressSanitizer: heap-buffer-overflow"), std::string::npos) << run.err;
    EXPECT_EQ(run.out.find("overflow not seen"), std::string::npos) << run.out;
  }
}

// ASan prints its layout with verbosity=1 (its shadow lies below HighMem); the preload's placed mappings
// (the program prints them) must all be 2 MiB-aligned inside HighMem. The user's ASAN_OPTIONS is kept.
TEST_P(AddressSanitized, PlacedMappingsStayOutOfTheShadow) {
  command_result run =
      test_support::hugify({"run", "--", program, "ok", "0"}, clean_env({{"ASAN_OPTIONS", "verbosity=1"}}));
  ASSERT_EQ(run.status, 0) << run.err;
  std::smatch high;
  ASSERT_TRUE(std::regex_search(run.err, high, std::regex("\\[0x([0-9a-f]+), 0x([0-9a-f]+)\\]` \\|\\| HighMem")))
      << "ASAN_OPTIONS=verbosity=1 was not kept: " << run.err;
  uint64_t low = std::stoull(high[1], nullptr, 16), top = std::stoull(high[2], nullptr, 16);
  std::regex mapping("mapping 0x([0-9a-f]+) ([0-9]+)");
  size_t count = 0;
  for (auto it = std::sregex_iterator(run.err.begin(), run.err.end(), mapping); it != std::sregex_iterator(); ++it) {
    uint64_t start = std::stoull((*it)[1], nullptr, 16), length = std::stoull((*it)[2]);
    EXPECT_GE(start, low);
    EXPECT_LE(start + length - 1, top);
    EXPECT_EQ(start % (2u << 20), 0u) << "not placed by the preload: " << std::hex << start;
    count++;
  }
  EXPECT_EQ(count, 6u) << run.err;
}

INSTANTIATE_TEST_SUITE_P(Builds, Sanitized, ::testing::ValuesIn(kBuilds),
                         [](const ::testing::TestParamInfo<build> &info) { return std::string(info.param.name); });
INSTANTIATE_TEST_SUITE_P(Builds, AddressSanitized, ::testing::ValuesIn(address_sanitizer_builds()),
                         [](const ::testing::TestParamInfo<build> &info) { return std::string(info.param.name); });

// The user's own verify_asan_link_order wins, and the rest of their ASAN_OPTIONS comes through unchanged.
TEST(AsanOptions, UsersSettingsAreKept) {
  auto run_env = [](const std::string &options) {
    command_result env = test_support::hugify(
        {"run", "--", "sh", "-c", "printf %s \"$ASAN_OPTIONS\""},
        clean_env(options.empty() ? std::map<std::string, std::string>{} : std::map<std::string, std::string>{
                                                                              {"ASAN_OPTIONS", options}}));
    EXPECT_EQ(env.status, 0) << env.err;
    return env.out;
  };
  EXPECT_EQ(run_env(""), "verify_asan_link_order=0");
  EXPECT_EQ(run_env("detect_leaks=0,halt_on_error=1"), "verify_asan_link_order=0:detect_leaks=0,halt_on_error=1");
  EXPECT_EQ(run_env("detect_leaks=0 verify_asan_link_order=1"), "detect_leaks=0 verify_asan_link_order=1");
  command_result env = test_support::hugify({"env", "--json"}, clean_env({{"ASAN_OPTIONS", "detect_leaks=0"}}));
  ASSERT_EQ(env.status, 0) << env.err;
  EXPECT_NE(env.out.find("verify_asan_link_order=0:detect_leaks=0"), std::string::npos) << env.out;
}

TEST(AsanOptions, UsersVerifyOptionIsRespected) {
  test_support::scratch_dir dir("hugify-sanitizers-test");
  std::ofstream(dir.path + "/program.c") << kProgram;
  std::string program = dir.path + "/gcc_asan";
  command_result compiled = test_support::run(
      {"gcc", "-fsanitize=address", "-pthread", dir.path + "/program.c", "-o", program}, clean_env());
  if (compiled.status != 0) GTEST_SKIP() << "gcc -fsanitize=address cannot build a program here: " << compiled.err;
  // What the issue saw, now only when the user asks for the check.
  command_result run = test_support::hugify({"run", "--", program, "ok", "0"},
                                            clean_env({{"ASAN_OPTIONS", "verify_asan_link_order=1"}}));
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(run.err.find("ASan runtime does not come first"), std::string::npos) << run.err;
}

// valgrind: the program runs under it as plain (output and exit status, no error from inside the preload:
// --error-exitcode would show one), directly and from a script; the report says the heap is valgrind's.
TEST(Valgrind, RunsAsPlain) {
  if (test_support::run({"sh", "-c", "command -v valgrind"}).status != 0)
    GTEST_SKIP() << "valgrind is not installed (apt-get install valgrind)";
  test_support::scratch_dir dir("hugify-sanitizers-test");
  std::ofstream(dir.path + "/program.c") << kProgram;
  std::string program = dir.path + "/plain";
  command_result compiled =
      test_support::run({"gcc", "-g", "-O1", "-pthread", dir.path + "/program.c", "-o", program}, clean_env());
  ASSERT_EQ(compiled.status, 0) << compiled.err;
  // The text program has 16 MiB of code for the remap: the case valgrind's memcheck flagged.
  for (const std::string &target : {program, test_support::helper_path("text_program_aligned")}) {
    SCOPED_TRACE(target);
    std::vector<std::string> cmd = {"valgrind", "-q", "--error-exitcode=99", target};
    if (target == program) cmd.insert(cmd.end(), {"ok", "4"});
    command_result plain = test_support::run(cmd, clean_env());
    ASSERT_NE(plain.status, 99) << plain.err;
    if (plain.status != 0 && target != program) { // the sanitized build's text program: ASan cannot run under valgrind
      std::printf("note: %s does not run under valgrind here (exit %d), so it is not compared\n", target.c_str(),
                  plain.status);
      continue;
    }
    std::vector<std::string> args = {"run", "--report", dir.path + "/report.json", "--"};
    args.insert(args.end(), cmd.begin(), cmd.end());
    command_result run = test_support::hugify(args, clean_env());
    EXPECT_EQ(run.out, plain.out) << run.err;
    EXPECT_EQ(run.status, plain.status) << run.err;
    test_support::json_view report = test_support::load_json(dir.path + "/report.json");
    EXPECT_EQ(report["heap_owner"].text(), "valgrind memcheck");
  }
  command_result run = test_support::hugify({"run", "--", "sh", "-c", "valgrind -q --error-exitcode=99 \"$0\" ok 6", program}, clean_env());
  EXPECT_EQ(run.status, 6) << run.err;
}

}  // namespace
