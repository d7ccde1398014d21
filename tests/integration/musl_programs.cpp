// SPDX-License-Identifier: MIT
// musl_programs.cpp - programs of another C library than glibc: a musl program (tests/helpers/musl_heap.c,
// built with musl-gcc) under `hugify run` (libhugify-preload-musl.so) and under `hugify env`'s environment
// (libhugify-preload.so, which musl's loader loads too), and a program whose interpreter hugify does not
// know. Each starts as it does without hugify: same stdout, same exit status.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "elf_image.h"
#include "test_support.hpp"

namespace {

const char *const kMuslPreload = "libhugify-preload-musl.so";

std::string musl_heap() { return test_support::helper_path("musl_heap"); }

// The reason a musl test cannot run here, or "".
std::string musl_missing() {
  if (access(musl_heap().c_str(), X_OK) != 0)
    return "musl-gcc was not installed when hugify was built (Debian: apt-get install musl-tools), so there is "
           "no musl program to run";
  return "";
}

std::string preload_dir() { return std::filesystem::path(HUGIFY_PRELOAD_PATH).parent_path(); }

struct temp_dir {
  std::string path;
  temp_dir() {
    char name[] = "/tmp/hmXXXXXX"; // short: a fake interpreter's path must fit where the real one was
    path = mkdtemp(name) ? name : "/nonexistent";
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
};

// The names an ELF file's dynamic symbol table defines (defined) or needs (strong undefined), from nm -D.
std::set<std::string> dynamic_symbols(const std::string &file, bool defined, bool *ok) {
  auto nm = test_support::run({"nm", "-D", defined ? "--defined-only" : "--undefined-only", file});
  *ok = nm.status == 0;
  std::set<std::string> names;
  std::istringstream lines(nm.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<std::string> words;
    for (std::string word; fields >> word;) words.push_back(word);
    if (words.size() < 2) continue;
    const std::string &kind = words[words.size() - 2];
    if (!defined && kind != "U") continue; // w, v: weak, resolved to 0 where absent
    names.insert(words.back().substr(0, words.back().find('@')));
  }
  return names;
}

// `hugify env --json`'s variables, as an environment for test_support::run.
std::map<std::string, std::string> env_variables(const std::vector<std::string> &options) {
  std::vector<std::string> args{"env", "--json"};
  args.insert(args.end(), options.begin(), options.end());
  auto env = test_support::hugify(args);
  EXPECT_EQ(env.status, 0) << env.err;
  std::string error;
  auto doc = test_support::parse_json(env.out, &error);
  EXPECT_TRUE(doc.present()) << error;
  std::map<std::string, std::string> variables;
  const char *name;
  json_t *value;
  json_t *object = const_cast<json_t *>(doc["variables"].get()); // jansson iterates through a non-const pointer
  json_object_foreach(object, name, value) variables[name] = json_string_value(value);
  return variables;
}

bool cover_expected() { return test_support::thp_mode() != "never" && !test_support::thp_mode().empty(); }

} // namespace

TEST(MuslPrograms, RunGivesTheMuslPreloadAndKeepsOutputAndStatus) {
  if (std::string why = musl_missing(); !why.empty()) GTEST_SKIP() << why;
  auto plain = test_support::run({musl_heap(), "--describe"});
  ASSERT_EQ(plain.status, 7) << plain.err;
  EXPECT_NE(plain.err.find("advised=0"), std::string::npos) << plain.err;
  temp_dir dir;
  std::string report = dir.path + "/report.json";
  auto run = test_support::hugify({"run", "--report", report, "--", musl_heap(), "--describe"});
  EXPECT_EQ(run.status, 7) << run.err;
  EXPECT_EQ(run.out, plain.out);
  EXPECT_EQ(run.out, "musl heap\n");
  // the musl build ran inside it: it wrote the report, and said what it cannot reach (musl's own malloc)
  std::string error;
  auto tree = test_support::load_json(report, &error);
  ASSERT_TRUE(tree.present()) << error << "\n" << run.err;
  EXPECT_EQ(tree["schema"].text(), "hugify.run/1");
  auto top = tree["processes"][0];
  bool named = false;
  for (size_t i = 0; top["fallbacks"][i].present(); i++) named |= top["fallbacks"][i]["what"].text() == "heap musl malloc";
  EXPECT_TRUE(named) << test_support::read_file(report);
  if (!cover_expected()) GTEST_SKIP() << "THP is '" << test_support::thp_mode() << "': the cover stays off";
  EXPECT_NE(run.err.find("aligned=1 advised=1"), std::string::npos) << run.err;
}

TEST(MuslPrograms, ItsGlibcChildrenStartToo) {
  // glibc's loader cannot load the musl build: the musl program's children get the glibc one instead
  if (std::string why = musl_missing(); !why.empty()) GTEST_SKIP() << why;
  auto run = test_support::hugify({"run", "--", musl_heap(), "--sh", "echo \"child $LD_PRELOAD\"; exit 4"});
  EXPECT_EQ(run.status, 4) << run.err;
  EXPECT_EQ(run.out, "musl heap\nchild " + test_support::run({"realpath", HUGIFY_PRELOAD_PATH}).out) << run.err;
}

TEST(MuslPrograms, EnvEnvironmentStartsAMuslProgramAsWithoutHugify) {
  if (std::string why = musl_missing(); !why.empty()) GTEST_SKIP() << why;
  auto plain = test_support::run({musl_heap(), "--describe"});
  auto variables = env_variables({});
  ASSERT_NE(variables["LD_PRELOAD"].find("libhugify-preload.so"), std::string::npos) << variables["LD_PRELOAD"];
  auto under_env = test_support::run({musl_heap(), "--describe"}, variables);
  EXPECT_EQ(under_env.status, 7) << under_env.err;
  EXPECT_EQ(under_env.out, plain.out);
  EXPECT_EQ(under_env.err.find("hugify"), std::string::npos) << "silent without HUGIFY_VERBOSE: " << under_env.err;
  // the same through a shell, as the documentation shows it: eval "$(hugify env)"
  auto shell = test_support::run({"sh", "-c", "eval \"$(\"$0\" env --shell --verbose)\" && exec \"$1\"",
                                  HUGIFY_CLI_PATH, musl_heap()});
  EXPECT_EQ(shell.status, 7) << shell.err;
  EXPECT_EQ(shell.out, plain.out);
  EXPECT_NE(shell.err.find("not glibc"), std::string::npos) << "said with HUGIFY_VERBOSE: " << shell.err;
  if (!cover_expected()) GTEST_SKIP() << "THP is '" << test_support::thp_mode() << "': the cover stays off";
  EXPECT_NE(under_env.err.find("aligned=1 advised=1"), std::string::npos) << under_env.err;
}

TEST(MuslPrograms, GlibcPreloadNeedsNothingMuslLacks) {
  // musl's loader stops a program on an unresolved strong symbol: every one the glibc preload needs must be
  // in musl's libc (its loader, the musl program's interpreter); glibc's own functions are weak.
  if (std::string why = musl_missing(); !why.empty()) GTEST_SKIP() << why;
  void *data = nullptr;
  size_t size = 0;
  hugify_elf_info elf;
  ASSERT_EQ(elf_map_file(musl_heap().c_str(), &data, &size), 0);
  ASSERT_EQ(hugify_elf_parse(data, size, &elf), 0);
  elf_unmap(data, size);
  ASSERT_EQ(elf_libc_of_interpreter(elf.interpreter), ELF_LIBC_MUSL) << elf.interpreter;
  bool ok = false;
  auto musl = dynamic_symbols(elf.interpreter, true, &ok);
  if (!ok) GTEST_SKIP() << "nm (binutils) is not installed";
  auto needed = dynamic_symbols(HUGIFY_PRELOAD_PATH, false, &ok);
  ASSERT_TRUE(ok);
  ASSERT_FALSE(needed.empty());
  for (const std::string &name : needed) EXPECT_TRUE(musl.count(name)) << name << " is not in " << elf.interpreter;
}

TEST(MuslPrograms, BothPreloadsExportOnlyTheirInterposers) {
  if (std::string why = musl_missing(); !why.empty()) GTEST_SKIP() << why;
  bool ok = false;
  std::set<std::string> glibc = dynamic_symbols(HUGIFY_PRELOAD_PATH, true, &ok);
  if (!ok) GTEST_SKIP() << "nm (binutils) is not installed";
  EXPECT_EQ(glibc, (std::set<std::string>{"madvise", "mmap", "mmap64", "mremap", "munmap", "shmat"}));
  // musl's headers make mmap64 a name for mmap: nothing calls it there
  EXPECT_EQ(dynamic_symbols(preload_dir() + "/" + kMuslPreload, true, &ok),
            (std::set<std::string>{"madvise", "mmap", "mremap", "munmap", "shmat"}));
}

TEST(MuslPrograms, WithoutTheMuslPreloadItRunsPlainAndSaysSo) {
  if (std::string why = musl_missing(); !why.empty()) GTEST_SKIP() << why;
  temp_dir dir; // the glibc preload alone, as a build without musl-gcc installs it
  std::string alone = dir.path + "/libhugify-preload.so";
  std::filesystem::copy_file(HUGIFY_PRELOAD_PATH, alone);
  auto run = test_support::hugify({"run", "--", musl_heap(), "--describe"}, {{"HUGIFY_PRELOAD_PATH", alone}});
  EXPECT_EQ(run.status, 7) << run.err;
  EXPECT_EQ(run.out, "musl heap\n");
  EXPECT_NE(run.err.find(std::string(kMuslPreload) + " is not installed"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("advised=0"), std::string::npos) << "no preload at all: " << run.err;
}

TEST(MuslPrograms, AnAllocatorBuiltForGlibcIsRefused) {
  if (std::string why = musl_missing(); !why.empty()) GTEST_SKIP() << why;
  auto run = test_support::hugify({"run", "--heap", "jemalloc", "--", musl_heap()});
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_NE(run.err.find("built for glibc"), std::string::npos) << run.err;
  EXPECT_EQ(run.out, "");
}

TEST(UnknownLibc, ProgramGetsNoPreloadAMessageAndItsOwnStatus) {
  // /usr/bin/env whose PT_INTERP names a loader hugify does not know (a link to the real one, so it runs)
  temp_dir dir;
  void *data = nullptr;
  size_t size = 0;
  hugify_elf_info elf;
  ASSERT_EQ(elf_map_file("/usr/bin/env", &data, &size), 0);
  ASSERT_EQ(hugify_elf_parse(data, size, &elf), 0);
  std::string bytes(static_cast<const char *>(data), size);
  elf_unmap(data, size);
  std::string fake = dir.path + "/ld-x.so";
  ASSERT_LE(fake.size(), strlen(elf.interpreter));
  ASSERT_EQ(symlink(elf.interpreter, fake.c_str()), 0);
  size_t at = bytes.find(std::string(elf.interpreter) + '\0');
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, fake.size() + 1, fake + '\0');
  std::string program = dir.path + "/other_env";
  std::ofstream(program, std::ios::binary) << bytes;
  ASSERT_EQ(chmod(program.c_str(), 0755), 0);

  auto run = test_support::hugify({"run", "--", program});
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.out.find("libhugify-preload"), std::string::npos) << "no preload in its environment:\n" << run.out;
  EXPECT_NE(run.err.find("neither glibc's (ld-linux) nor musl's"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(fake), std::string::npos) << run.err;
  auto status = test_support::hugify({"run", "--", program, "sh", "-c", "echo out; exit 6"});
  EXPECT_EQ(status.status, 6) << status.err;
  EXPECT_EQ(status.out, "out\n");
}
