// SPDX-License-Identifier: MIT
// check_load.cpp - `hugify check --load` on real servers: the bundled test server (run_shm_server, driven
// by server_load) and Redis when it is installed. Each test checks that no process it caused is left:
// every server is started with a marker (a path in the test's own scratch directory) on its command line,
// and /proc is searched for it afterwards.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using test_support::command_result;

// The test's own directory (removed afterwards).
struct scratch_dir : test_support::scratch_dir {
  scratch_dir() : test_support::scratch_dir("hugify-check-load") {}
};

// A TCP port on 127.0.0.1 that was free a moment ago.
using test_support::free_port;

// Processes whose command line mentions `marker` (other than this test program).
std::vector<int> processes_mentioning(const std::string &marker) {
  std::vector<int> found;
  DIR *proc = opendir("/proc");
  if (!proc) return found;
  while (dirent *entry = readdir(proc)) {
    int pid = std::atoi(entry->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(marker) != std::string::npos) found.push_back(pid);
  }
  closedir(proc);
  return found;
}

// The server command of the bundled test server, marked with the scratch directory.
std::vector<std::string> test_server(const scratch_dir &dir, int port, const std::vector<std::string> &extra = {}) {
  std::vector<std::string> argv = {test_support::helper_path("run_shm_server"), "--port", std::to_string(port),
                                   "--port-file", dir.path + "/port", "--shared", "32M", "--heap", "32M"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::string load_command(int port, int requests = 40) {
  return test_support::helper_path("server_load") + " --port " + std::to_string(port) + " --requests " +
         std::to_string(requests) + " --steps 2000";
}

std::vector<std::string> check_args(const std::vector<std::string> &options, const std::vector<std::string> &server) {
  std::vector<std::string> args = {"check"};
  args.insert(args.end(), options.begin(), options.end());
  args.push_back("--");
  args.insert(args.end(), server.begin(), server.end());
  return args;
}

// `hugify check ARGS` with its scratch directory (and the log it keeps) inside the test's own.
command_result check(const scratch_dir &dir, const std::vector<std::string> &args) {
  return test_support::hugify(args, {{"TMPDIR", dir.path}});
}

TEST(CheckLoad, TestServerGetsAVerdictAndNothingIsLeft) {
  scratch_dir dir;
  int port = free_port();
  // 6 rounds x 4 configurations (plain, heap, heap+text, text), as a server check would be run.
  auto result = check(dir, check_args({"--runs", "6", "--configs", "heap,heap+text,text", "--ready-port",
                                       std::to_string(port), "--load", load_command(port), "--score",
                                       "requests per second ([0-9.]+)", "--json=" + dir.path + "/check.json"},
                                                test_server(dir, port)));
  EXPECT_EQ(result.status, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("plain"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("heap"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("server CPU"), std::string::npos) << "the server's CPU time per round is shown\n" << result.out;
  EXPECT_TRUE(result.out.find("no measurable gain") != std::string::npos || result.out.find("faster") != std::string::npos ||
              result.out.find("slower") != std::string::npos)
      << "a verdict\n" << result.out;
  EXPECT_NE(result.out.find("6 rounds of 4 configurations"), std::string::npos) << result.out;
  auto doc = test_support::load_json(dir.path + "/check.json");
  EXPECT_EQ(doc["metric"].text(), "score");
  EXPECT_EQ(doc["configs"][1]["score_per_round"].size(), 6u);
  EXPECT_GT(doc["configs"][0]["cpu_seconds"].number(), 0.0) << "the server's CPU time per round";
  EXPECT_TRUE(processes_mentioning(dir.path).empty());
}

TEST(CheckLoad, WallTimeOfTheLoadWithoutScore) {
  scratch_dir dir;
  int port = free_port();
  auto result = check(dir, check_args({"--runs", "6", "--configs", "heap", "--ready",
                                                 "bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) + "'",
                                                 "--load", load_command(port, 20)},
                                                test_server(dir, port)));
  EXPECT_EQ(result.status, 0) << result.out << result.err;
  EXPECT_TRUE(processes_mentioning(dir.path).empty());
}

TEST(CheckLoad, FailingLoadEndsTheCheckWithItsOutput) {
  scratch_dir dir;
  int port = free_port();
  auto result = check(dir, check_args({"--runs", "6", "--ready-port", std::to_string(port), "--load",
                                                 "echo the load broke; exit 4"},
                                                test_server(dir, port)));
  EXPECT_EQ(result.status, 1) << result.out << result.err;
  EXPECT_NE(result.err.find("the load command failed (exit status 4)"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("the load broke"), std::string::npos) << result.err;
  EXPECT_TRUE(processes_mentioning(dir.path).empty());
}

TEST(CheckLoad, ServerThatDiesEndsTheCheckWithItsLog) {
  scratch_dir dir;
  int port = free_port();
  auto result = check(dir, check_args({"--runs", "6", "--ready-port", std::to_string(port), "--load",
                                                 load_command(port)},
                                                test_server(dir, port, {"--die-after", "5"})));
  EXPECT_EQ(result.status, 1) << result.out << result.err;
  EXPECT_NE(result.err.find("the server ended during the load"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("listening"), std::string::npos) << "the server's own output is shown\n" << result.err;
  EXPECT_TRUE(processes_mentioning(dir.path).empty());
}

TEST(CheckLoad, ServerNeverReadyIsBounded) {
  scratch_dir dir;
  int port = free_port();
  auto result = check(dir, check_args({"--runs", "6", "--ready", "false", "--ready-timeout", "2", "--load", "true"},
                                                test_server(dir, port)));
  EXPECT_EQ(result.status, 1) << result.out << result.err;
  EXPECT_NE(result.err.find("did not succeed within 2 s"), std::string::npos) << result.err;
  EXPECT_TRUE(processes_mentioning(dir.path).empty());
}

TEST(CheckLoad, ServerIgnoringSigtermIsKilled) {
  scratch_dir dir;
  int port = free_port();
  // The shell ignores SIGTERM, and so does the sleep it starts after the server: only SIGKILL ends them.
  std::string server = "trap '' TERM; " + test_support::helper_path("run_shm_server") + " --port " + std::to_string(port) +
                       " --shared 8M --heap 8M; sleep 300 # " + dir.path;
  auto result = check(dir, check_args({"--runs", "6", "--configs", "heap", "--ready-port", std::to_string(port),
                                                 "--stop-timeout", "1", "--load", load_command(port, 5)},
                                                {"sh", "-c", server}));
  EXPECT_EQ(result.status, 0) << result.out << result.err;
  EXPECT_TRUE(processes_mentioning(dir.path).empty());
}

TEST(CheckLoad, InterruptedCheckStopsTheServer) {
  scratch_dir dir;
  int port = free_port();
  auto args = check_args({"--runs", "6", "--ready-port", std::to_string(port), "--load", "sleep 300 # " + dir.path},
                         test_server(dir, port));
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0), dup2(null, 1), dup2(null, 2);
    std::vector<char *> argv = {const_cast<char *>(HUGIFY_CLI_PATH)};
    for (auto &arg : args) argv.push_back(const_cast<char *>(arg.c_str()));
    argv.push_back(nullptr);
    execv(HUGIFY_CLI_PATH, argv.data());
    _exit(127);
  }
  // Wait (bounded) until the load runs: the server is up then.
  bool loading = false;
  for (int i = 0; i < 6000 && !loading; i++) {
    for (int found : processes_mentioning(dir.path)) // the load's shell: "sh -c sleep 300 # DIR" (not hugify's)
      if (test_support::read_file("/proc/" + std::to_string(found) + "/cmdline").rfind(std::string("/bin/sh\0-c\0sleep", 16), 0) == 0)
        loading = true;
    if (!loading) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(loading) << "the load never started";
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << "status " << status;
  EXPECT_TRUE(processes_mentioning(dir.path).empty());
}

TEST(CheckLoad, LoadOptionsNeedEachOther) {
  for (const std::vector<std::string> &args : std::vector<std::vector<std::string>>{
           {"check", "--load", "true", "--", "true"},
           {"check", "--ready-port", "80", "--", "true"},
           {"check", "--load", "true", "--ready-port", "80", "--ready", "true", "--", "true"},
           {"check", "--load", "true", "--ready-port", "99999", "--", "true"},
           {"check", "--load", "true", "--ready", "true", "--score", "([", "--", "true"},
           {"check", "--load", "true", "--ready", "true", "--latency-p99", "p99=([0-9", "--", "true"},
           {"check", "--load", "true", "--ready", "true", "--latency-max", "max=[0-9]+", "--", "true"},
           {"check", "--load", "true", "--ready", "true", "--latency", "wrk", "--latency-p99", "p99=([0-9]+)", "--", "true"},
           {"check", "--load", "true", "--ready", "true", "--latency", "ab", "--", "true"},
           {"check", "--load", "true", "--ready", "true", "--latency-unit", "us", "--", "true"},
           {"check", "--latency", "pgbench", "--", "true"},
       }) {
    auto result = test_support::hugify(args);
    EXPECT_EQ(result.status, 2) << args[1] << ": " << result.err;
  }
}

using test_support::installed;

// Redis, when installed: a real server checked end to end (a small key space: this asserts behaviour, not
// a speed-up; docs/servers.md has the measured figures).
TEST(CheckLoad, RedisCheckCompletes) {
  if (!installed("redis-server") || !installed("redis-benchmark"))
    GTEST_SKIP() << "redis-server / redis-benchmark are not installed (Debian: redis-server, redis-tools)";
  scratch_dir dir;
  int port = free_port();
  std::string p = std::to_string(port);
  std::string load = "redis-benchmark -p " + p + " -t set,get -r 100000 -n 100000 -P 16 -q";
  auto result = check(dir, check_args(
      {"--runs", "6", "--configs", "heap", "--ready", "redis-cli -p " + p + " ping | grep -q PONG", "--load", load,
       "--score", "GET: ([0-9.]+) requests per second"},
      {"redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir.path}));
  EXPECT_EQ(result.status, 0) << result.out << result.err;
  EXPECT_TRUE(processes_mentioning(":" + p).empty());
}

// The latency figures of one configuration in the JSON are consistent: every round has p50 <= p99 <= max
// where the load gave them, and the medians keep that order. Never their values (that would be a speed).
void expect_consistent_latency(const test_support::json_view &config, bool has_p50) {
  const auto &latency = config["latency"];
  ASSERT_TRUE(latency.present() && !latency.is_null()) << config["name"].text();
  size_t rounds = config["runs"].u64();
  ASSERT_EQ(latency["p99_seconds_per_round"].size(), rounds);
  ASSERT_EQ(latency["max_seconds_per_round"].size(), rounds);
  for (size_t r = 0; r < rounds; r++) {
    double p99 = latency["p99_seconds_per_round"][r].number(), max = latency["max_seconds_per_round"][r].number();
    EXPECT_GT(p99, 0.0);
    EXPECT_LE(p99, max) << "round " << r;
    if (has_p50) {
      EXPECT_LE(latency["p50_seconds_per_round"][r].number(), p99) << "round " << r;
    }
  }
  if (has_p50) {
    EXPECT_LE(latency["p50_seconds"].number(), latency["p99_seconds"].number());
  }
  EXPECT_LE(latency["p99_seconds"].number(), latency["max_seconds"].number());
  const auto &interval = latency["p99_interval"];
  ASSERT_TRUE(interval.present() && !interval.is_null()) << "6 rounds give a 95 % interval of the median";
  EXPECT_LE(interval["low"].number(), latency["p99_seconds"].number());
  EXPECT_GE(interval["high"].number(), latency["p99_seconds"].number());
}

// Redis under redis-benchmark --precision 3: p50, p99 and max per configuration, with intervals, in the
// text and the JSON; the verdict carries the chosen configuration's tail when there is a gain.
TEST(CheckLoad, RedisLatencyPerConfiguration) {
  if (!installed("redis-server") || !installed("redis-benchmark"))
    GTEST_SKIP() << "redis-server / redis-benchmark are not installed (Debian: redis-server, redis-tools)";
  scratch_dir dir;
  int port = free_port();
  std::string p = std::to_string(port);
  std::string load = "redis-benchmark -p " + p + " -t get -r 10000 -n 50000 -P 16 --precision 3";
  auto result = check(dir, check_args(
      {"--runs", "6", "--configs", "heap", "--ready", "redis-cli -p " + p + " ping | grep -q PONG", "--load", load,
       "--score", "throughput summary: ([0-9.]+) requests per second", "--json=" + dir.path + "/check.json"},
      {"redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir.path}));
  ASSERT_EQ(result.status, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("p99 vs plain"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("from the load's output (redis-benchmark"), std::string::npos) << result.out;
  auto doc = test_support::load_json(dir.path + "/check.json");
  EXPECT_EQ(doc["load"]["latency"].text(), "auto");
  ASSERT_EQ(doc["configs"].size(), 2u);
  for (size_t i = 0; i < 2; i++) {
    expect_consistent_latency(doc["configs"][i], true);
    EXPECT_EQ(doc["configs"][i]["latency"]["tool"].text(), "redis-benchmark");
  }
  EXPECT_TRUE(doc["configs"][0]["latency"]["p99_vs_plain"].is_null()) << "plain against itself";
  const auto &ratio = doc["configs"][1]["latency"]["p99_vs_plain"];
  ASSERT_TRUE(ratio.present() && !ratio.is_null());
  EXPECT_LE(ratio["low"].number(), ratio["estimate"].number());
  EXPECT_LE(ratio["estimate"].number(), ratio["high"].number());
  const auto &verdict = doc["verdict"];
  if (verdict["outcome"].text() == "gain") {
    ASSERT_TRUE(verdict["tail"].present() && !verdict["tail"].is_null());
    EXPECT_TRUE(verdict["tail"]["p99_vs_plain"].present());
  } else {
    EXPECT_TRUE(verdict["tail"].is_null());
  }
  EXPECT_TRUE(processes_mentioning(":" + p).empty());
}

// Any other load: --latency-p50/-p99/-max take the figures from its output with the user's patterns (a
// unit group, or --latency-unit); a tool named with --latency that prints none ends the check (exit 1)
// with what the tool needs.
TEST(CheckLoad, LatencyPatternsAndANamedToolWithoutFigures) {
  scratch_dir dir;
  int port = free_port();
  std::string load = load_command(port, 10) + " && echo 'p50=850us p99=2.5ms' && echo 'worst 12'";
  auto result = check(dir, check_args({"--runs", "6", "--configs", "heap", "--ready-port", std::to_string(port),
                                       "--load", load, "--latency-p50", "p50=([0-9.]+)(us|ms)", "--latency-p99",
                                       "p99=([0-9.]+)(us|ms)", "--latency-max", "worst ([0-9]+)", "--latency-unit",
                                       "ms", "--json=" + dir.path + "/check.json"},
                                      test_server(dir, port)));
  ASSERT_EQ(result.status, 0) << result.out << result.err;
  auto doc = test_support::load_json(dir.path + "/check.json");
  EXPECT_EQ(doc["load"]["latency"].text(), "regex");
  for (size_t i = 0; i < 2; i++) {
    const auto &latency = doc["configs"][i]["latency"];
    expect_consistent_latency(doc["configs"][i], true);
    EXPECT_EQ(latency["tool"].text(), "regex");
    EXPECT_DOUBLE_EQ(latency["p50_seconds"].number(), 850e-6) << "the printed figure, in seconds";
    EXPECT_DOUBLE_EQ(latency["p99_seconds"].number(), 2.5e-3);
    EXPECT_DOUBLE_EQ(latency["max_seconds"].number(), 12e-3) << "--latency-unit ms";
  }
  EXPECT_EQ(doc["configs"][1]["latency"]["p99_vs_plain"]["judgement"].text(), "no measurable difference");

  result = check(dir, check_args({"--runs", "6", "--configs", "heap", "--ready-port", std::to_string(port), "--load",
                                  load_command(port, 10), "--latency", "pgbench"},
                                 test_server(dir, port)));
  EXPECT_EQ(result.status, 1) << result.out << result.err;
  EXPECT_NE(result.err.find("--latency found no latency in the load's output"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("--log --log-prefix"), std::string::npos) << result.err;
  EXPECT_TRUE(processes_mentioning(dir.path).empty());
}

}  // namespace
