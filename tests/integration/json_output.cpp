// SPDX-License-Identifier: MIT
// Every command's --json, the same way: --json is JSON on stdout instead of the text, --json=FILE keeps the
// text on stdout and writes the JSON to FILE, the first member is the schema, and the output is valid JSON
// (read with jansson, which rejects invalid UTF-8) even when a file name or a command line is not UTF-8.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

const std::string kReplacement = "\xef\xbf\xbd"; // U+FFFD

struct temp_dir {
  std::string path;
  temp_dir() {
    char name[] = "/tmp/hugify-json-XXXXXX";
    if (mkdtemp(name)) path = name;
  }
  ~temp_dir() {
    if (!path.empty()) test_support::run({"rm", "-rf", path});
  }
};

test_support::json_view parse(const std::string &text) {
  std::string error;
  auto doc = test_support::parse_json(text, &error);
  EXPECT_TRUE(doc.present()) << error << "\n" << text;
  return doc;
}

TEST(JsonOutput, FileNameWithInvalidUtf8StaysValidJson) {
  temp_dir dir;
  ASSERT_FALSE(dir.path.empty());
  // A copy of a real program under a name that is not UTF-8 (Linux file names are bytes).
  std::string name = dir.path + "/prog-\xff\xfe-\xc0\xaf";
  ASSERT_EQ(test_support::run({"cp", "/bin/true", name}).status, 0);
  auto r = test_support::hugify({"elf", "--json", name});
  ASSERT_EQ(r.status, 0) << r.err;
  auto doc = parse(r.out);
  EXPECT_EQ(doc.at("files.0.path").text(),
            dir.path + "/prog-" + kReplacement + kReplacement + "-" + kReplacement + kReplacement);
  EXPECT_EQ(doc.at("files.0.kind").text(), "pie");
  // An error message that quotes the name is valid too.
  auto missing = test_support::hugify({"elf", "--json", name + "-gone"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(parse(missing.out).at("files.0.error").text(), "No such file or directory");
}

TEST(JsonOutput, ProcessWithInvalidUtf8NameAndArgumentsStaysValidJson) {
  temp_dir dir;
  ASSERT_FALSE(dir.path.empty());
  std::string name = dir.path + "/sleep-\xff";
  ASSERT_EQ(test_support::run({"cp", "/bin/sleep", name}).status, 0);
  pid_t pid = fork();
  if (pid == 0) {
    // argv[0] carries the invalid bytes into the command line too (sleep itself rejects a bad argument)
    execl(name.c_str(), (name + "\xfe\xed").c_str(), "1000", static_cast<char *>(nullptr));
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  // the child is ours: wait until it sleeps in main (in nanosleep or clock_nanosleep: 35 or 230 on x86-64),
  // so its code has been run from the copy and is resident; right after exec it may not be yet
  for (int i = 0; i < 5000; i++) {
    std::string call = test_support::read_file("/proc/" + std::to_string(pid) + "/syscall");
    if (call.rfind("230 ", 0) == 0 || call.rfind("35 ", 0) == 0) break;
    usleep(1000);
  }
  auto r = test_support::hugify({"inspect", std::to_string(pid), "--json", "--maps"});
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_EQ(r.status, 0) << r.err;
  auto doc = parse(r.out);
  auto process = doc["processes"][0];
  EXPECT_EQ(process["pid"].u64(), static_cast<uint64_t>(pid));
  bool found = false;
  for (const auto &object : process["objects"].items())
    found = found || object["path"].text() == dir.path + "/sleep-" + kReplacement;
  EXPECT_TRUE(found) << "the program's code, under its name with U+FFFD\n" << r.out;
}

TEST(JsonOutput, JsonFileKeepsTheTextOnStdout) {
  temp_dir dir;
  ASSERT_FALSE(dir.path.empty());
  struct command {
    std::vector<std::string> args;
    std::string schema, text_mark;
  } commands[] = {
      {{"status"}, "hugify.status/2", "Diagnoses"},
      {{"pool", "show"}, "hugify.pool/2", "hugetlbfs mounts"},
      {{"inspect", std::to_string(getpid())}, "hugify.inspect/1", "thread stacks"},
      {{"inspect", "--all", "--top", "3"}, "hugify.inspect/1", "Processes ranked"},
      {{"elf", "/bin/true"}, "hugify.elf/1", "2 MiB-aligned text"},
  };
  for (const auto &c : commands) {
    SCOPED_TRACE(c.args[0]);
    std::string file = dir.path + "/" + c.args[0] + ".json";
    std::vector<std::string> args = c.args;
    args.push_back("--json=" + file);
    auto r = test_support::hugify(args);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find(c.text_mark), std::string::npos) << r.out;
    std::string error;
    auto doc = test_support::load_json(file, &error);
    ASSERT_TRUE(doc.present()) << error;
    EXPECT_EQ(doc.members().front().first, "schema");
    EXPECT_EQ(doc["schema"].text(), c.schema);
    // --json: the same JSON on stdout, and no text
    args.back() = "--json";
    auto json = test_support::hugify(args);
    ASSERT_EQ(json.status, 0) << json.err;
    EXPECT_EQ(parse(json.out)["schema"].text(), c.schema);
    EXPECT_EQ(json.out.find(c.text_mark), std::string::npos) << "--json prints only the JSON";
    // --json=- is stdout, like --json
    args.back() = "--json=-";
    EXPECT_EQ(parse(test_support::hugify(args).out)["schema"].text(), c.schema);
  }
}

TEST(JsonOutput, BadJsonOptionIsUsageError) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"status", "--json="}, {"pool", "--json="}, {"inspect", "1", "--json="}, {"elf", "--json=", "/bin/true"},
           {"collapse", "1", "--json="}, {"status", "--json=/nonexistent-dir/x.json"}}) {
    auto r = test_support::hugify(args);
    EXPECT_EQ(r.status, 2) << args[0] << " " << args.back() << ": " << r.err;
    EXPECT_NE(r.err.find("hugify " + args[0] + ":"), std::string::npos) << r.err;
  }
}

}  // namespace
