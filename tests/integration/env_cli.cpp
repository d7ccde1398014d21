// SPDX-License-Identifier: MIT
// env_cli.cpp - `hugify env`: its output read back by the programs that consume it (sh, systemd's parser
// through systemd-analyze, a YAML parser), compared with the environment `hugify run` gives a program,
// and the drop-in writer's refusals (links, bad names) on a scratch root.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using test_support::command_result;

// The variables hugify sets for a program (HUGIFY_REPORT differs by design: `hugify run --report` points
// it into a directory of its own and sums the reports; it is checked on its own).
const std::vector<std::string> kManaged = {"LD_PRELOAD", "ASAN_OPTIONS", "GLIBC_TUNABLES", "HUGIFY_HEAP", "HUGIFY_TEXT"};

// A user's GLIBC_TUNABLES with every character the forms must quote: ' " \ $ % and a space.
const std::string kAwkward = "glibc.malloc.check=0:glibc.x=it's \"a\" \\$HOME %b";

// The test's own directory (removed afterwards).
struct scratch_dir : test_support::scratch_dir {
  scratch_dir() : test_support::scratch_dir("hugify-env-test") {}
};

std::map<std::string, std::string> parse_env_output(const std::string &text) {
  std::map<std::string, std::string> variables;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    size_t equals = line.find('=');
    if (equals != std::string::npos) variables[line.substr(0, equals)] = line.substr(equals + 1);
  }
  return variables;
}

std::map<std::string, std::string> managed(const std::map<std::string, std::string> &all) {
  std::map<std::string, std::string> picked;
  for (const auto &name : kManaged)
    if (all.count(name)) picked[name] = all.at(name);
  return picked;
}

// What a program started by `hugify run OPTIONS --` sees.
std::map<std::string, std::string> run_environment(const std::vector<std::string> &options,
                                                   const std::map<std::string, std::string> &env) {
  std::vector<std::string> args = {"run"};
  args.insert(args.end(), options.begin(), options.end());
  args.insert(args.end(), {"--", "/usr/bin/env"});
  command_result result = test_support::hugify(args, env);
  EXPECT_EQ(result.status, 0) << result.err;
  return parse_env_output(result.out);
}

// What a program started by sh after eval "$(hugify env OPTIONS)" sees.
std::map<std::string, std::string> shell_environment(const std::vector<std::string> &options,
                                                     const std::map<std::string, std::string> &env) {
  std::string command = "eval \"$(\"$0\" env";
  for (const auto &option : options) command += " '" + option + "'";
  command += ")\" && exec /usr/bin/env";
  command_result result = test_support::run({"sh", "-c", command, HUGIFY_CLI_PATH}, env);
  EXPECT_EQ(result.status, 0) << result.err;
  return parse_env_output(result.out);
}

// systemd's unquoting of one Environment="..." word: \x escapes, %% for %.
std::string systemd_unquote(const std::string &line) {
  const std::string prefix = "Environment=\"";
  EXPECT_EQ(line.rfind(prefix, 0), 0u) << line;
  EXPECT_EQ(line.back(), '"') << line;
  std::string inner = line.substr(prefix.size(), line.size() - prefix.size() - 1), value;
  for (size_t i = 0; i < inner.size(); i++) {
    if (inner[i] == '\\' && i + 1 < inner.size()) value += inner[++i];
    else if (inner[i] == '%' && i + 1 < inner.size() && inner[i + 1] == '%') value += inner[i++];
    else {
      EXPECT_NE(inner[i], '"') << "an unescaped quote in " << line;
      value += inner[i];
    }
  }
  return value;
}

std::map<std::string, std::string> parse_systemd(const std::string &text) {
  std::map<std::string, std::string> variables;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("Environment=", 0) != 0) continue;
    std::string assignment = systemd_unquote(line);
    variables[assignment.substr(0, assignment.find('='))] = assignment.substr(assignment.find('=') + 1);
  }
  return variables;
}

bool have_program(const std::string &name) {
  return test_support::run({"sh", "-c", "command -v " + name}).status == 0;
}

TEST(Env, ShellFormGivesTheEnvironmentOfRun) {
  scratch_dir dir;
  ASSERT_FALSE(dir.path.empty());
  const std::vector<std::string> options = {"--report", dir.path + "/report.json", "--heap", "thp"};
  const std::map<std::string, std::string> env = {{"GLIBC_TUNABLES", kAwkward}};
  auto by_run = managed(run_environment(options, env));
  auto by_env = managed(shell_environment(options, env));
  EXPECT_EQ(by_env, by_run);
  ASSERT_TRUE(by_env.count("GLIBC_TUNABLES"));
  EXPECT_EQ(by_env["GLIBC_TUNABLES"].rfind(kAwkward, 0), 0u) << "the user's tunables come first, untouched";
  EXPECT_NE(by_env["GLIBC_TUNABLES"].find("glibc.malloc.hugetlb=1"), std::string::npos);
  EXPECT_EQ(shell_environment(options, env)["HUGIFY_REPORT"], dir.path + "/report.json");
  EXPECT_NE(by_env["LD_PRELOAD"].find("libhugify-preload.so"), std::string::npos);
}

TEST(Env, NoReportUnsetsAnInheritedOne) {
  auto by_env = shell_environment({}, {{"HUGIFY_REPORT", "/tmp/stale-report.json"}});
  EXPECT_EQ(by_env.count("HUGIFY_REPORT"), 0u);
  EXPECT_EQ(by_env["HUGIFY_HEAP"], "auto");
}

TEST(Env, TextModeAutoByDefaultOnAndOffAsAsked) {
  EXPECT_EQ(shell_environment({}, {})["HUGIFY_TEXT"], "auto");
  EXPECT_EQ(shell_environment({"--text", "on"}, {})["HUGIFY_TEXT"], "1");
  EXPECT_EQ(shell_environment({"--text", "off"}, {})["HUGIFY_TEXT"], "0");
  EXPECT_EQ(managed(run_environment({"--text", "auto"}, {})), managed(shell_environment({}, {})));
}

// A program started from the printed environment reports as the preload does under `hugify run`: the
// first process that loads the preload is the top level and writes FILE; a forked and exec'd child writes
// FILE.<pid>. (`hugify run --report` collects the same per-process reports in a directory of its own and sums
// them into FILE, hugify.run/1, with process_count 2 here.)
TEST(Env, PreloadReportsAsUnderRun) {
  scratch_dir dir;
  ASSERT_FALSE(dir.path.empty());
  // bash (dynamically linked, and it exits through exit(), unlike dash) holds the preload; /bin/true is a
  // forked and exec'd child.
  std::string body = "/bin/true & wait";
  std::string report = dir.path + "/env.json";
  command_result by_env = test_support::run(
      {"sh", "-c", "eval \"$(\"$0\" env --report \"$1\")\" && exec bash -c '" + body + "'", HUGIFY_CLI_PATH, report});
  ASSERT_EQ(by_env.status, 0) << by_env.err;
  auto top = test_support::load_json(report);
  EXPECT_EQ(top["schema"].text(), "hugify.report/2");
  EXPECT_TRUE(top["top_level"].flag()) << test_support::read_file(report);
  size_t children = 0;
  for (const auto &entry : fs::directory_iterator(dir.path))
    if (entry.path().filename().string().rfind("env.json.", 0) == 0) {
      children++;
      EXPECT_FALSE(test_support::load_json(entry.path().string())["top_level"].flag());
    }
  EXPECT_EQ(children, 1u) << "the child's report is FILE.<pid>";

  command_result by_run = test_support::hugify({"run", "--report", dir.path + "/run.json", "--", "bash", "-c", body});
  ASSERT_EQ(by_run.status, 0) << by_run.err;
  auto summed = test_support::load_json(dir.path + "/run.json");
  EXPECT_EQ(summed["process_count"].u64(), 2u) << "the same two per-process reports, summed by hugify run";
}

TEST(Env, SystemdFormQuotesAsSystemdReadsIt) {
  const std::map<std::string, std::string> env = {{"GLIBC_TUNABLES", kAwkward}};
  command_result result = test_support::hugify({"env", "--systemd", "--report", "/var/tmp/r%i.json"}, env);
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("[Service]\n"), std::string::npos);
  auto by_systemd = parse_systemd(result.out);
  EXPECT_EQ(by_systemd["HUGIFY_REPORT"], "/var/tmp/r%i.json") << "% doubled for systemd, read back single";
  EXPECT_EQ(managed(by_systemd), managed(run_environment({}, env)));
}

TEST(Env, InstallWritesADropInSystemdAccepts) {
  scratch_dir root;
  ASSERT_FALSE(root.path.empty());
  std::string units = root.path + "/etc/systemd/system";
  fs::create_directories(units);
  std::ofstream(units + "/hugify-test.service") << "[Unit]\nDescription=hugify env test\n[Service]\n"
                                                   "ExecStart=/bin/true\nMemoryDenyWriteExecute=true\n";
  const std::map<std::string, std::string> env = {{"GLIBC_TUNABLES", kAwkward}};

  command_result dry = test_support::hugify({"env", "--install", "hugify-test", "--root", root.path, "--dry-run"}, env);
  ASSERT_EQ(dry.status, 0) << dry.err;
  EXPECT_FALSE(fs::exists(units + "/hugify-test.service.d")) << "--dry-run wrote something";
  EXPECT_NE(dry.out.find(units + "/hugify-test.service.d/hugify.conf"), std::string::npos) << dry.out;

  command_result first = test_support::hugify({"env", "--install", "hugify-test.service", "--root", root.path}, env);
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.err.find("MemoryDenyWriteExecute"), std::string::npos) << "the unit's MDWE deserves a warning";
  std::string drop_in = units + "/hugify-test.service.d/hugify.conf";
  std::string written = test_support::read_file(drop_in);
  EXPECT_EQ(managed(parse_systemd(written)), managed(run_environment({}, env)));

  // Again: replaced in place, no temporary left behind.
  command_result second = test_support::hugify({"env", "--install", "hugify-test", "--root", root.path, "--heap", "off"});
  ASSERT_EQ(second.status, 0) << second.err;
  EXPECT_EQ(parse_systemd(test_support::read_file(drop_in))["HUGIFY_HEAP"], "off");
  size_t files = 0;
  for (const auto &entry : fs::directory_iterator(units + "/hugify-test.service.d")) (void)entry, files++;
  EXPECT_EQ(files, 1u);

  if (!have_program("systemd-analyze"))
    REQUIRE_PREREQUISITE("systemd-analyze is not installed (Debian: systemd): the drop-in was not verified");
  std::string verify = "SYSTEMD_UNIT_PATH=\"$0\": systemd-analyze verify \"$0/hugify-test.service\" 2>&1";
  command_result verified = test_support::run({"sh", "-c", verify, units});
  EXPECT_EQ(verified.out.find("hugify.conf"), std::string::npos) << "systemd complained about the drop-in:\n" << verified.out;
}

TEST(Env, InstallRefusesLinksAndBadNames) {
  scratch_dir root;
  ASSERT_FALSE(root.path.empty());
  std::string units = root.path + "/etc/systemd/system", elsewhere = root.path + "/elsewhere";
  fs::create_directories(units);
  fs::create_directories(elsewhere);

  fs::create_directory_symlink(elsewhere, units + "/linked.service.d");
  command_result linked_dir = test_support::hugify({"env", "--install", "linked", "--root", root.path});
  EXPECT_EQ(linked_dir.status, 2) << linked_dir.err;
  EXPECT_TRUE(fs::is_empty(elsewhere)) << "wrote through a linked directory";

  fs::create_directory(units + "/target.service.d");
  fs::create_symlink(elsewhere + "/victim", units + "/target.service.d/hugify.conf");
  command_result linked_file = test_support::hugify({"env", "--install", "target", "--root", root.path});
  EXPECT_EQ(linked_file.status, 2) << linked_file.err;
  EXPECT_FALSE(fs::exists(elsewhere + "/victim")) << "wrote through a linked file";
  EXPECT_TRUE(fs::is_symlink(units + "/target.service.d/hugify.conf"));

  for (const std::string bad : {"../escape", "a/b", ".hidden", "bad name"}) {
    command_result result = test_support::hugify({"env", "--install", bad, "--root", root.path});
    EXPECT_EQ(result.status, 2) << bad << ": " << result.err;
  }
  EXPECT_FALSE(fs::exists(root.path + "/etc/systemd/escape.service.d"));
}

TEST(Env, DockerAndKubernetesForms) {
  const std::map<std::string, std::string> env = {{"GLIBC_TUNABLES", "glibc.malloc.check=0"}};
  auto by_run = managed(run_environment({}, env));

  command_result docker = test_support::hugify({"env", "--docker"}, env);
  ASSERT_EQ(docker.status, 0) << docker.err;
  EXPECT_NE(docker.err.find("must exist inside the container"), std::string::npos) << docker.err;
  // As `docker run $(hugify env --docker) IMAGE` would split it: words, no quote removal.
  std::map<std::string, std::string> by_docker;
  std::istringstream words(docker.out);
  std::string flag, value;
  bool mounted = false;
  while (words >> flag >> value) {
    if (flag == "-e") by_docker[value.substr(0, value.find('='))] = value.substr(value.find('=') + 1);
    else if (flag == "-v") mounted |= value == by_run["LD_PRELOAD"] + ":" + by_run["LD_PRELOAD"] + ":ro";
    else ADD_FAILURE() << "unexpected word " << flag;
  }
  EXPECT_EQ(by_docker, by_run);
  EXPECT_TRUE(mounted) << docker.out;

  command_result kubernetes = test_support::hugify({"env", "--kubernetes"}, env);
  ASSERT_EQ(kubernetes.status, 0) << kubernetes.err;
  const std::string reader =
      "import sys, yaml\n"
      "spec = yaml.safe_load(sys.stdin)\n"
      "for item in spec['env']: print(item['name'] + '=' + item['value'])\n"
      "assert spec['volumeMounts'][0]['mountPath'] == spec['volumes'][0]['hostPath']['path']\n";
  if (test_support::run({"python3", "-c", "import yaml"}).status != 0)
    GTEST_SKIP() << "python3 with PyYAML is not installed: the Kubernetes form was not parsed";
  scratch_dir dir;
  std::ofstream(dir.path + "/spec.yaml") << kubernetes.out;
  command_result parsed = test_support::run({"sh", "-c", "python3 -c \"$1\" < \"$0\"", dir.path + "/spec.yaml", reader});
  ASSERT_EQ(parsed.status, 0) << parsed.err;
  EXPECT_EQ(parse_env_output(parsed.out), by_run);
}

TEST(Env, BadUsage) {
  for (const std::vector<std::string> &args : std::vector<std::vector<std::string>>{
           {"env", "--install", "x", "--docker"}, {"env", "--dry-run"}, {"env", "--systemd", "--docker"},
           {"env", "--heap", "banana"}, {"env", "--frobnicate"}, {"env", "stray"}, {"env", "--install"},
           {"env", "--text", "maybe"}}) {
    command_result result = test_support::hugify(args);
    EXPECT_EQ(result.status, 2) << args.back() << ": " << result.err;
  }
}

}  // namespace
