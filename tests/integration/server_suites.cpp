// SPDX-License-Identifier: MIT
// server_suites.cpp - the servers' own test suites give the same result with hugify as without (issue 34,
// item 1): a chosen part of each, run twice side by side, once against the server as it is and once against
// the server started with `hugify env`'s environment (the preload: heap cover, text remap) while a loop of
// `hugify collapse` keeps collapsing its processes. The pass/fail/skip sets are compared, never timings.
// Each runs at the release's versions, read from what is installed (Debian 12: Redis 7.0, PostgreSQL 15,
// CPython 3.11; Debian 13: 8.0, 17, 3.13). Redis: runtest from Debian's source package of the installed
// redis-server, against /usr/bin/redis-server. PostgreSQL: pg_regress (Debian's postgresql-N ships it) with
// the parallel schedule's first groups, from the postgresql-N source package, against two temporary clusters
// on 127.0.0.1. CPython: Debian's libpythonX.Y-testsuite, `python3 -m test` plain and under `hugify run`.
// The sources come from scripts/suite-source (fetched once into /var/cache/hugify/src; where the archive no
// longer serves the installed version, the newest of the same major stands in, and the test prints which);
// the whole suites' runs are in docs/reliability.md. A missing package or source is a skip that says which,
// and a failure in CI (HUGIFY_TEST_STRICT, test_support::strict_prerequisites).
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using test_support::command_result;

// A server's Debian source tree at the installed version (scripts/suite-source): its directory, or "" and
// why not in *why. Prints the version it holds (another of the same major when the archive no longer
// serves the installed one).
std::string suite_source(const std::string &name, std::string *why) {
  std::string said, dir = test_support::fetched_dir({"suite-source", name}, &said);
  while (!said.empty() && std::isspace(static_cast<unsigned char>(said.back()))) said.pop_back();
  if (dir.empty()) {
    *why = "the " + name + " source package could not be had (scripts/suite-source " + name + "): " + said;
    return "";
  }
  std::string holds = test_support::read_file(dir + "/.complete");
  std::printf("the suite's source: %s%s", holds.c_str(), holds.empty() || holds.back() != '\n' ? "\n" : "");
  return dir;
}

// The first line of a command's output ("" when it failed).
std::string first_line(const std::vector<std::string> &argv) {
  auto result = test_support::run(argv);
  return result.status == 0 ? result.out.substr(0, result.out.find('\n')) : "";
}

// tests/helpers/suite_results.py: "STATUS\tNAME" lines, sorted, of a suite's output in FORMAT.
std::string results(const std::string &format, const std::string &file) {
  auto parsed = test_support::run({"python3", test_support::source_path("tests/helpers/suite_results.py"), format, file});
  return parsed.status == 0 ? parsed.out : "suite_results.py failed: " + parsed.err;
}

size_t count(const std::string &lines, const std::string &status) {
  size_t n = 0;
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);) n += line.rfind(status + "\t", 0) == 0;
  return n;
}

// The lines of one outcome that the other lacks, as "plain: ..." / "hugify: ..." (empty when the same).
std::string difference(const std::string &plain, const std::string &hugify) {
  auto lines = [](const std::string &text) {
    std::multiset<std::string> set;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) set.insert(line);
    return set;
  };
  auto a = lines(plain), b = lines(hugify);
  std::string out;
  for (auto line = a.begin(); line != a.end(); line = a.upper_bound(*line))
    if (a.count(*line) != b.count(*line)) out += "plain: " + *line + "\n";
  for (auto line = b.begin(); line != b.end(); line = b.upper_bound(*line))
    if (a.count(*line) != b.count(*line)) out += "hugify: " + *line + "\n";
  return out;
}

// `hugify env [OPTIONS]` written once for the wrappers to source ("" or what went wrong).
std::string write_hugify_env(const std::string &file, const std::vector<std::string> &options = {}) {
  std::vector<std::string> args = {"env"};
  args.insert(args.end(), options.begin(), options.end());
  auto env = test_support::hugify(args);
  if (env.status != 0) return "hugify env: " + env.err;
  std::ofstream(file) << env.out;
  return "";
}

// A process's descendants (children of every thread, recursively).
void descendants(int pid, std::vector<int> *out) {
  std::error_code ignored;
  for (const auto &task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ignored)) {
    std::istringstream children(test_support::read_file(task.path().string() + "/children"));
    for (int child; children >> child;) {
      out->push_back(child);
      descendants(child, out);
    }
  }
}

std::string exe_of(int pid) {
  std::error_code ignored;
  return fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ignored).string();
}

// `hugify collapse PID` over and over, on whatever `targets` names at that moment, until destroyed: the
// processes collapsed (exit 0, or 1 when some windows fell short) and the bytes made huge.
class collapse_loop {
 public:
  explicit collapse_loop(std::function<std::vector<int>()> targets) : targets_(std::move(targets)) {
    thread_ = std::thread([this] {
      while (!stop_) {
        for (int pid : targets_()) {
          auto result = test_support::hugify({"collapse", std::to_string(pid), "--json"});
          if (result.status == 3) unable_ = result.err;
          if (result.status != 0 && result.status != 1) continue;  // gone meanwhile, or not collapsible
          collapsed_++;
          auto doc = test_support::parse_json(result.out);
          uint64_t before = doc.at("total.huge_before_bytes").u64(), after = doc.at("total.huge_after_bytes").u64();
          gained_ += after > before ? after - before : 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  ~collapse_loop() { finish(); }
  void finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int collapsed() const { return collapsed_; }
  uint64_t gained() const { return gained_; }
  std::string unable() const { return unable_; }  // collapse's exit-3 message (no MADV_COLLAPSE, ...)

 private:
  std::function<std::vector<int>()> targets_;
  std::atomic<bool> stop_{false};
  std::atomic<int> collapsed_{0};
  std::atomic<uint64_t> gained_{0};
  std::string unable_;
  std::thread thread_;
};

// Runs plain() and under_hugify() side by side (so both see the same load) and reads their outcomes with
// read(). When they differ, both run once more and the second outcome stands: a difference that is not seen
// again is a flake of the loaded machine (printed), one that is seen twice is hugify's.
struct outcomes {
  std::string plain, hugify;
};
outcomes side_by_side(const std::function<void()> &plain, const std::function<void()> &under_hugify,
                      const std::function<outcomes()> &read) {
  for (int attempt = 1;; attempt++) {
    std::thread first(plain);
    under_hugify();
    first.join();
    outcomes seen = read();
    std::string differs = difference(seen.plain, seen.hugify);
    if (differs.empty() || attempt == 2) return seen;
    std::printf("the outcomes differ; both run again to tell a flake from hugify's doing:\n%s", differs.c_str());
  }
}

// The same outcome, test by test (and the same exit status of the suite's runner).
void expect_same(const outcomes &seen, const command_result &plain_run, const command_result &hugify_run,
                 const std::string &logs) {
  const std::string &plain = seen.plain, &hugify = seen.hugify;
  EXPECT_EQ(plain_run.status, hugify_run.status) << logs;
  EXPECT_GT(count(plain, "passed"), 0u) << "the plain run passed nothing: " << plain << logs;
  EXPECT_EQ(difference(plain, hugify), "") << "the outcomes differ (plain vs hugify); " << logs;
  std::printf("plain:  passed %zu failed %zu skipped %zu\nhugify: passed %zu failed %zu skipped %zu\n",
              count(plain, "passed"), count(plain, "failed"), count(plain, "skipped"), count(hugify, "passed"),
              count(hugify, "failed"), count(hugify, "skipped"));
}

// ---- Redis ----

// Units of runtest chosen for CI: the data types whose values move between encodings and sizes (the heap's
// growth and shrinking), keyspace and expiry; the whole suite's run is in docs/reliability.md.
const std::vector<std::string> redis_units = {"unit/type/hash", "unit/type/incr", "unit/keyspace", "unit/expire"};

// A runtest tree in DIR: the source's runtest and tests/, and a src/ whose programs are the installed ones
// (runtest has no option for the server's path; it runs src/redis-server). With ENV_FILE, the server
// programs are wrappers that note their pid in PIDS and exec the installed program in that environment.
void redis_tree(const std::string &source, const std::string &dir, const std::string &env_file,
                const std::string &pids) {
  fs::create_directories(dir + "/src");
  fs::copy(source + "/runtest", dir + "/runtest");
  fs::copy(source + "/tests", dir + "/tests", fs::copy_options::recursive);
  for (std::string program : {"redis-cli", "redis-benchmark"})
    fs::create_symlink("/usr/bin/" + program, dir + "/src/" + program);
  for (std::string program : {"redis-server", "redis-check-aof", "redis-check-rdb"}) {
    if (env_file.empty()) {
      fs::create_symlink("/usr/bin/" + program, dir + "/src/" + program);
      continue;
    }
    std::string wrapper = dir + "/src/" + program;
    std::ofstream(wrapper) << "#!/bin/sh\necho $$ >> " << pids << "\n. " << env_file << "\nexec /usr/bin/" << program
                           << " \"$@\"\n";
    fs::permissions(wrapper, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  }
}

command_result runtest(const std::string &dir, int baseport) {
  std::string command = "cd " + dir + " && exec ./runtest --clients 2 --baseport " + std::to_string(baseport) +
                        " --portcount 400 --timeout 600";
  for (const auto &unit : redis_units) command += " --single " + unit;
  return test_support::run({"sh", "-c", command + " > " + dir + "/runtest.log 2>&1"});
}

// The pids in FILE (one a line) that are still a redis-server (Debian's is a link to redis-check-rdb, the
// one program that is all three).
std::vector<int> live_redis(const std::string &file) {
  std::vector<int> pids;
  std::error_code ignored;
  std::string server = fs::canonical("/usr/bin/redis-server", ignored).string();
  std::istringstream in(test_support::read_file(file));
  for (int pid; in >> pid;)
    if (exe_of(pid) == server) pids.push_back(pid);
  return pids;
}

TEST(ServerSuites, RedisRuntestSameWithHugify) {
  for (std::string program : {"redis-server", "redis-cli", "tclsh"})
    if (!test_support::installed(program))
      REQUIRE_PREREQUISITE(program + " is not installed (Debian: redis-server, redis-tools, tcl)");
  if (geteuid() != 0) GTEST_SKIP() << "collapsing the servers needs CAP_SYS_NICE (run as root)";
  std::printf("%s\n", first_line({"redis-server", "--version"}).c_str());
  std::string why, source = suite_source("redis", &why);
  REQUIRE_PREREQUISITE(why);
  test_support::scratch_dir dir("hugify-server-suites");
  ASSERT_EQ(write_hugify_env(dir.path + "/hugify.env"), "");
  std::string plain = dir.path + "/plain", hugify = dir.path + "/hugify", pids = dir.path + "/pids";
  redis_tree(source, plain, "", "");
  redis_tree(source, hugify, dir.path + "/hugify.env", pids);
  int base = 20000 + (getpid() % 100) * 100;  // two ranges of its own; runtest skips a port in use anyway
  command_result plain_run, hugify_run;
  collapse_loop loop([&] { return live_redis(pids); });
  auto seen = side_by_side([&] { plain_run = runtest(plain, base); },
                           [&] { hugify_run = runtest(hugify, base + 5000); },
                           [&] {
                             return outcomes{results("redis", plain + "/runtest.log"),
                                             results("redis", hugify + "/runtest.log")};
                           });
  loop.finish();
  if (!loop.unable().empty() && loop.collapsed() == 0) GTEST_SKIP() << loop.unable();
  std::string logs = "logs:\n" + test_support::read_file(plain + "/runtest.log").substr(0, 4000) +
                     "\n----\n" + test_support::read_file(hugify + "/runtest.log").substr(0, 4000);
  expect_same(seen, plain_run, hugify_run, logs);
  EXPECT_GT(loop.collapsed(), 0) << "no server was collapsed: the run would show nothing";
  std::printf("hugify collapse ran %d times on the servers, %llu bytes made huge\n", loop.collapsed(),
              (unsigned long long)loop.gained());
}

// ---- PostgreSQL ----

// The installed server's major version (Debian installs each under /usr/lib/postgresql/MAJOR: 15 on Debian
// 12, 17 on 13): the newest there, "" when none.
std::string postgres_major() {
  int newest = 0;
  std::error_code ignored;
  for (const auto &entry : fs::directory_iterator("/usr/lib/postgresql", ignored)) {
    int major = std::atoi(entry.path().filename().c_str());
    if (major > newest && fs::exists(entry.path() / "bin/postgres")) newest = major;
  }
  return newest > 0 ? std::to_string(newest) : "";
}
const std::string pg_major = postgres_major();
const std::string pg_lib = "/usr/lib/postgresql/" + pg_major;
const std::string pg_bin = pg_lib + "/bin";
const std::string pg_regress = pg_lib + "/lib/pgxs/src/test/regress/pg_regress";
const std::vector<std::string> as_postgres = {"setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"};

// The parallel schedule's first GROUPS lines of tests (each depends only on those before it).
std::string schedule_head(const std::string &schedule, int groups) {
  std::istringstream in(test_support::read_file(schedule));
  std::string out;
  for (std::string line; groups > 0 && std::getline(in, line);)
    if (line.rfind("test:", 0) == 0) {
      out += line + "\n";
      groups--;
    }
  return out;
}

std::vector<std::string> with(std::vector<std::string> prefix, const std::vector<std::string> &argv) {
  prefix.insert(prefix.end(), argv.begin(), argv.end());
  return prefix;
}

// A temporary cluster in DIR on 127.0.0.1, started as user postgres (plain, or with the environment in
// ENV_FILE).
struct regress_cluster {
  std::string dir, port = std::to_string(test_support::free_port());
  std::unique_ptr<test_support::server_process> server;
  std::string error;
  regress_cluster(const std::string &d, const std::string &env_file) : dir(d) {
    fs::create_directories(dir);
    test_support::run({"chown", "postgres:", dir});
    auto init = test_support::run(with(as_postgres, {pg_bin + "/initdb", "-D", dir + "/data", "-A", "trust", "-U",
                                                     "postgres", "--no-locale", "-E", "UTF8", "--no-sync"}));
    if (init.status != 0) {
      error = "initdb: " + init.out + init.err;
      return;
    }
    std::string start = (env_file.empty() ? "" : ". " + env_file + " && ") + "exec " + pg_bin + "/postgres -D " +
                        dir + "/data -p " + port + " -c listen_addresses=127.0.0.1 -k " + dir;
    server = std::make_unique<test_support::server_process>(with(as_postgres, {"sh", "-c", start}),
                                                            dir + "/server.log");
    for (int i = 0; i < 600 && server->alive(); i++) {
      if (test_support::run({pg_bin + "/pg_isready", "-h", "127.0.0.1", "-p", port, "-q"}).status == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    error = "postgres did not start: " + test_support::read_file(dir + "/server.log");
  }
  // The server's processes: the postmaster (exec'd by setpriv and sh) and its children.
  std::vector<int> processes() const {
    std::vector<int> all, servers;
    if (!server) return servers;
    all.push_back(server->pid());
    descendants(server->pid(), &all);
    for (int pid : all)
      if (exe_of(pid) == pg_bin + "/postgres") servers.push_back(pid);
    return servers;
  }
  command_result regress(const std::string &inputdir, const std::string &dlpath, const std::string &schedule) const {
    return test_support::run(
        {"sh", "-c",
         "cd " + dir + " && exec setpriv --reuid=postgres --regid=postgres --init-groups -- " + pg_regress +
             " --inputdir=" + inputdir + " --outputdir=" + dir + " --bindir=" + pg_bin + " --dlpath=" + dlpath +
             " --schedule=" + schedule + " --max-concurrent-tests=20 --host=127.0.0.1 --port=" + port + " > " + dir +
             "/regress.log 2>&1"});
  }
};

// regress.so (the suite's C functions, src/test/regress/regress.c) built with PGXS, beside the installed
// autoinc.so and refint.so that the suite loads from the same directory; "" or what went wrong.
std::string build_regress_library(const std::string &regress_source, const std::string &dir) {
  fs::create_directories(dir);
  fs::copy(regress_source + "/regress.c", dir + "/regress.c");
  std::ofstream(dir + "/Makefile") << "MODULES = regress\nPG_CONFIG = " + pg_bin + "/pg_config\n"
                                      "PGXS := $(shell $(PG_CONFIG) --pgxs)\ninclude $(PGXS)\n";
  auto made = test_support::run({"make", "-C", dir, "-s", "with_llvm=no"});
  if (made.status != 0) return "building regress.so: " + made.out + made.err;
  for (std::string library : {"autoinc.so", "refint.so"})
    fs::create_symlink(pg_lib + "/lib/" + library, dir + "/" + library);
  return "";
}

TEST(ServerSuites, PostgresRegressSameWithHugify) {
  if (pg_major.empty())
    REQUIRE_PREREQUISITE("PostgreSQL is not installed (Debian: postgresql, whose postgresql-N ships pg_regress)");
  if (!fs::exists(pg_regress))
    REQUIRE_PREREQUISITE("PostgreSQL " + pg_major + "'s pg_regress is missing (Debian: postgresql-" + pg_major + ")");
  if (!fs::exists(pg_bin + "/pg_config") || !fs::exists("/usr/include/postgresql/" + pg_major + "/server/postgres.h"))
    REQUIRE_PREREQUISITE("the server's headers for regress.c are not installed (Debian: postgresql-server-dev-" +
                         pg_major + ")");
  if (geteuid() != 0) GTEST_SKIP() << "the server runs as user postgres, and collapsing it needs CAP_SYS_NICE (root)";
  std::printf("%s\n", first_line({pg_bin + "/postgres", "--version"}).c_str());
  std::string why, source = suite_source("postgresql-" + pg_major, &why);
  REQUIRE_PREREQUISITE(why);
  std::string regress_source = source + "/src/test/regress";
  test_support::scratch_dir dir("hugify-server-suites-pg");
  fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
  ASSERT_EQ(build_regress_library(regress_source, dir.path + "/lib"), "");
  // --text on: the backends are forks of the postmaster, which seldom uses the 200 ms of CPU after which
  // `--text auto` moves the code (and a fork has no thread of its parent's to do it): moved before main, the
  // postgres binary's 5.2 MiB of code is on huge pages in every process.
  ASSERT_EQ(write_hugify_env(dir.path + "/hugify.env", {"--text", "on"}), "");
  std::string schedule = dir.path + "/schedule";
  // test_setup, tablespace and the two groups of types (41 tests): a fifth of the whole suite (217).
  std::ofstream(schedule) << schedule_head(regress_source + "/parallel_schedule", 4);
  regress_cluster plain(dir.path + "/plain", ""), hugify(dir.path + "/hugify", dir.path + "/hugify.env");
  ASSERT_EQ(plain.error, "");
  ASSERT_EQ(hugify.error, "");
  auto servers = hugify.processes();
  ASSERT_FALSE(servers.empty());
  auto inspect = test_support::hugify({"inspect", std::to_string(servers.front()), "--json"});
  EXPECT_GT(test_support::parse_json(inspect.out).at("processes.0.classes.code.huge_bytes").u64(), 0u)
      << "the text remap did not move the postmaster's code: " << inspect.out << inspect.err;
  command_result plain_run, hugify_run;
  collapse_loop loop([&] { return hugify.processes(); });
  auto seen = side_by_side([&] { plain_run = plain.regress(regress_source, dir.path + "/lib", schedule); },
                           [&] { hugify_run = hugify.regress(regress_source, dir.path + "/lib", schedule); },
                           [&] {
                             return outcomes{results("pg_regress", plain.dir + "/regress.log"),
                                             results("pg_regress", hugify.dir + "/regress.log")};
                           });
  loop.finish();
  if (!loop.unable().empty() && loop.collapsed() == 0) GTEST_SKIP() << loop.unable();
  std::string logs = "logs:\n" + test_support::read_file(plain.dir + "/regress.log") + "\n----\n" +
                     test_support::read_file(hugify.dir + "/regress.log") +
                     test_support::read_file(hugify.dir + "/regression.diffs");
  expect_same(seen, plain_run, hugify_run, logs);
  EXPECT_GT(loop.collapsed(), 0) << "no server process was collapsed: the run would show nothing";
  std::printf("hugify collapse ran %d times on the server's processes, %llu bytes made huge\n", loop.collapsed(),
              (unsigned long long)loop.gained());
}

// ---- CPython ----

// Modules chosen for CI: memory (mmap, gc, the containers, bytes), threads and subprocesses, ctypes' own
// mappings; the whole suite's run is in docs/reliability.md.
const std::vector<std::string> cpython_modules = {"test_mmap", "test_gc", "test_dict", "test_list", "test_bytes",
                                                  "test_threading", "test_ctypes", "test_weakref"};

// The installed python3's version ("3.11" on Debian 12, "3.13" on 13), "" when there is none.
std::string python_version() {
  return first_line({"python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"});
}

command_result regrtest(const std::string &python, const std::vector<std::string> &prefix, const std::string &junit) {
  auto argv = with(prefix, {python, "-m", "test", "-j2", "--timeout", "600", "--junit-xml", junit});
  argv.insert(argv.end(), cpython_modules.begin(), cpython_modules.end());
  return test_support::run(argv);
}

TEST(ServerSuites, CpythonRegressionSameUnderRun) {
  std::string version = python_version(), python = "/usr/bin/python" + version;
  if (version.empty()) REQUIRE_PREREQUISITE("python3 is not installed (Debian: python3)");
  if (!fs::exists(python) || !fs::exists("/usr/lib/python" + version + "/test/libregrtest"))
    REQUIRE_PREREQUISITE("Debian's CPython " + version + " test suite is not installed (Debian: libpython" + version +
                         "-testsuite)");
  std::printf("CPython %s\n", version.c_str());
  test_support::scratch_dir dir("hugify-server-suites-py");
  command_result plain_run, hugify_run;
  auto seen = side_by_side(
      [&] { plain_run = regrtest(python, {}, dir.path + "/plain.xml"); },
      [&] { hugify_run = regrtest(python, {HUGIFY_CLI_PATH, "run", "--"}, dir.path + "/hugify.xml"); },
      [&] { return outcomes{results("junit", dir.path + "/plain.xml"), results("junit", dir.path + "/hugify.xml")}; });
  std::string logs = "plain:\n" + plain_run.out.substr(0, 6000) + "\n----\nhugify:\n" + hugify_run.out.substr(0, 6000);
  expect_same(seen, plain_run, hugify_run, logs);
}

}  // namespace
