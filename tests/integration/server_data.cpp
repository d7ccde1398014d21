// SPDX-License-Identifier: MIT
// server_data.cpp - a server's data is the same after hugify acts on it. Redis (Debian's redis-server,
// 127.0.0.1, no persistence): DEBUG DIGEST before and after each of 100 collapses, with a burst of writes
// running during another collapse in every round; at the end every write is there with its value, and no
// client saw an error. PostgreSQL (Debian's postgresql-15): a table's checksum the same while the agent
// collapses the server's processes under a pgbench write load, every write there, no failed transaction,
// pg_amcheck clean. Asserts data and errors only, never a time.
#include <glob.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace {

using test_support::command_result;

struct redis_server {
  test_support::scratch_dir dir{"hugify-server-data"};
  std::string port = std::to_string(test_support::free_port());
  test_support::server_process process{{"redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
                                        "--appendonly", "no", "--dir", dir.path, "--enable-debug-command", "yes"},
                                       dir.path + "/redis.log"};

  command_result cli(std::vector<std::string> args) const {
    args.insert(args.begin(), {"redis-cli", "-p", port});
    return test_support::run(args);
  }
  // Up to 30 s for PONG; false when the server ended or never answered.
  bool ready() const {
    for (int i = 0; i < 300 && process.alive(); i++) {
      if (cli({"ping"}).out.find("PONG") != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  std::string digest() const { return cli({"DEBUG", "DIGEST"}).out; }
};

// Round R's writes, as redis-cli --pipe takes them: KEYS keys w:R:I, each a value of VALUE_BYTES bytes
// that names its key (so a lost or misplaced write is seen at the end).
std::string round_writes(int round, int keys, int value_bytes) {
  std::string out;
  for (int i = 0; i < keys; i++) {
    std::string key = "w:" + std::to_string(round) + ":" + std::to_string(i);
    std::string value = key + ":" + std::string(value_bytes - key.size() - 1, 'v');
    out += "*3\r\n$3\r\nSET\r\n$" + std::to_string(key.size()) + "\r\n" + key + "\r\n$" +
           std::to_string(value.size()) + "\r\n" + value + "\r\n";
  }
  return out;
}

// `hugify collapse PID --json`: its exit status (0 done, 1 some windows fell short under the writes) and
// the bytes it made huge.
struct collapse_outcome {
  int status = -1;
  uint64_t huge_gained = 0;
  std::string error;
};
collapse_outcome collapse(int pid) {
  auto result = test_support::hugify({"collapse", std::to_string(pid), "--json"});
  collapse_outcome outcome{result.status, 0, result.err};
  auto doc = test_support::parse_json(result.out);
  uint64_t before = doc.at("total.huge_before_bytes").u64(), after = doc.at("total.huge_after_bytes").u64();
  outcome.huge_gained = after > before ? after - before : 0;
  return outcome;
}

TEST(ServerData, RedisDigestIsTheSameAcrossCollapsesUnderWrites) {
  if (!test_support::installed("redis-server") || !test_support::installed("redis-cli"))
    GTEST_SKIP() << "redis-server / redis-cli are not installed (Debian: redis-server, redis-tools)";
  if (geteuid() != 0) GTEST_SKIP() << "collapsing another process needs CAP_SYS_NICE (run as root)";
  redis_server redis;
  ASSERT_TRUE(redis.ready()) << test_support::read_file(redis.dir.path + "/redis.log");
  ASSERT_NE(redis.cli({"DEBUG", "POPULATE", "10000", "key", "1024"}).out.find("OK"), std::string::npos);

  // 512 KiB of new values per round gives the collapses fresh 4 KiB memory to work on every few rounds,
  // while DEBUG DIGEST (a SHA1 over every key, twice a round) stays cheap: few, large keys.
  const int rounds = 100, keys = 128, value_bytes = 4096;
  uint64_t gained = 0;
  for (int round = 0; round < rounds; round++) {
    std::string file = redis.dir.path + "/writes";
    std::ofstream(file) << round_writes(round, keys, value_bytes);
    command_result writes;
    std::thread writer([&] { writes = test_support::run({"sh", "-c", "redis-cli -p " + redis.port + " --pipe < " + file}); });
    auto during = collapse(redis.process.pid());
    writer.join();
    if (during.status == 3) GTEST_SKIP() << during.error;  // no MADV_COLLAPSE here: the message names it
    ASSERT_TRUE(during.status == 0 || during.status == 1) << during.error;
    ASSERT_EQ(writes.status, 0) << writes.out << writes.err;
    ASSERT_NE(writes.out.find("errors: 0, replies: " + std::to_string(keys)), std::string::npos) << writes.out;

    std::string before = redis.digest();
    auto quiet = collapse(redis.process.pid());
    std::string after = redis.digest();
    ASSERT_TRUE(quiet.status == 0 || quiet.status == 1) << quiet.error;
    ASSERT_FALSE(before.empty());
    ASSERT_EQ(before, after) << "round " << round << ": the data changed across a collapse";
    gained += during.huge_gained + quiet.huge_gained;
  }
  EXPECT_GT(gained, 0u) << "no collapse made anything huge: the test would show nothing";

  // Every write is there with its own value (a Lua check on the server: one call, no transfer of the data).
  std::string check =
      "local bad = 0 for r = 0, " + std::to_string(rounds - 1) + " do for i = 0, " + std::to_string(keys - 1) +
      " do local k = 'w:' .. r .. ':' .. i local v = redis.call('GET', k) "
      "if not v or string.sub(v, 1, #k + 1) ~= k .. ':' or #v ~= " + std::to_string(value_bytes) +
      " then bad = bad + 1 end end end return bad";
  EXPECT_EQ(redis.cli({"EVAL", check, "0"}).out, "0\n");
  EXPECT_EQ(redis.cli({"DBSIZE"}).out, std::to_string(10000 + rounds * keys) + "\n");
  EXPECT_TRUE(redis.process.alive());
}

// PostgreSQL's programs (Debian: /usr/lib/postgresql/VERSION/bin), "" when not installed.
std::string postgres_bin() {
  glob_t found{};
  std::string dir;
  if (glob("/usr/lib/postgresql/*/bin/postgres", 0, nullptr, &found) == 0 && found.gl_pathc > 0) {
    dir = found.gl_pathv[found.gl_pathc - 1];
    dir.erase(dir.rfind('/'));
  }
  globfree(&found);
  return dir;
}

struct postgres_server {
  std::string bin = postgres_bin();
  test_support::scratch_dir dir{"hugify-server-data-pg"};
  std::string port = std::to_string(test_support::free_port());
  std::vector<std::string> as_postgres = {"setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"};
  std::unique_ptr<test_support::server_process> process;

  // initdb and start, as user postgres (the server refuses root); "" or what went wrong.
  std::string start() {
    test_support::run({"chown", "-R", "postgres", dir.path});
    auto argv = as_postgres;
    argv.insert(argv.end(), {bin + "/initdb", "-D", dir.path + "/data", "-A", "trust", "-U", "postgres"});
    auto init = test_support::run(argv);
    if (init.status != 0) return "initdb: " + init.err;
    argv = as_postgres;
    argv.insert(argv.end(), {bin + "/postgres", "-D", dir.path + "/data", "-c", "listen_addresses=127.0.0.1", "-c",
                             "port=" + port, "-c", "unix_socket_directories=" + dir.path, "-c", "shared_buffers=64MB"});
    process = std::make_unique<test_support::server_process>(argv, dir.path + "/server.log");
    for (int i = 0; i < 600 && process->alive(); i++) {
      if (test_support::run({bin + "/pg_isready", "-h", "127.0.0.1", "-p", port, "-q"}).status == 0) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "postgres did not start: " + test_support::read_file(dir.path + "/server.log");
  }
  command_result sql(const std::string &query) const {
    return test_support::run({bin + "/psql", "-h", "127.0.0.1", "-p", port, "-U", "postgres", "-qAtX", "-v",
                              "ON_ERROR_STOP=1", "-c", query, "postgres"});
  }
};

TEST(ServerData, PostgresTableChecksumIsTheSameUnderTheAgent) {
  postgres_server pg;
  if (pg.bin.empty()) GTEST_SKIP() << "PostgreSQL is not installed (Debian: postgresql)";
  if (geteuid() != 0) GTEST_SKIP() << "the agent collapsing other processes needs CAP_SYS_NICE (run as root)";
  ASSERT_EQ(pg.start(), "");
  ASSERT_EQ(pg.sql("CREATE TABLE t AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 200000) g; "
                   "CREATE INDEX ON t (id); CREATE TABLE w (id int, v text)").status, 0);
  const std::string checksum_query = "SELECT md5(string_agg(id || ':' || v, ',' ORDER BY id)) FROM t";
  std::string checksum = pg.sql(checksum_query).out;
  ASSERT_EQ(checksum.size(), 33u) << checksum;

  // The agent at a raised budget and a short interval over every postgres process, for the whole load.
  std::string agent_json = pg.dir.path + "/agent.json";
  test_support::server_process agent({HUGIFY_CLI_PATH, "agent", "--comm", "postgres", "--min-rss", "0", "--interval",
                                      "0.2", "--cpu-budget", "50", "--state-file", "none", "--json=" + agent_json},
                                     pg.dir.path + "/agent.log");
  std::string script = pg.dir.path + "/insert.sql";
  std::ofstream(script) << "INSERT INTO w SELECT :client_id, repeat(md5(random()::text), 30);\n";
  const int clients = 2, transactions = 1500;
  // Rounds of writes, the reads checked all along, until the agent has collapsed something in postgres (at
  // most 5): on a busy machine one round could end before the agent's first collapse (CI once saw 0 bytes).
  auto collapsed = [&] {
    auto documents = test_support::parse_json_documents(test_support::read_file(agent_json));
    return documents.empty() ? 0 : documents.back()["collapsed_bytes"].u64();
  };
  int rounds = 0;
  while (rounds < 5 && (rounds == 0 || collapsed() == 0)) {
    rounds++;
    command_result load;
    std::atomic<bool> loaded{false};
    std::thread writer([&] {
      load = test_support::run({pg.bin + "/pgbench", "-h", "127.0.0.1", "-p", pg.port, "-U", "postgres", "-n", "-c",
                                std::to_string(clients), "-t", std::to_string(transactions), "-f", script, "postgres"});
      loaded = true;
    });
    for (int check = 0; check < 600 && !loaded; check++) { // the reads go on while the writes do (bounded)
      EXPECT_EQ(pg.sql(checksum_query).out, checksum) << "round " << rounds << ", check " << check;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    writer.join();
    EXPECT_EQ(load.status, 0) << load.out << load.err;
    EXPECT_NE(load.out.find("number of failed transactions: 0"), std::string::npos) << load.out;
  }
  EXPECT_EQ(pg.sql(checksum_query).out, checksum);
  EXPECT_TRUE(agent.alive()) << test_support::read_file(pg.dir.path + "/agent.log");
  agent.stop();

  EXPECT_EQ(pg.sql("SELECT count(*) FROM w").out, std::to_string(rounds * clients * transactions) + "\n");
  std::printf("the agent collapsed %llu MiB of postgres in %d round(s) of writes\n",
              (unsigned long long)(collapsed() >> 20), rounds);
  EXPECT_GT(collapsed(), 0u) << "the agent collapsed nothing in " << rounds << " rounds: the test would show nothing\n"
                             << test_support::read_file(pg.dir.path + "/agent.log");
  auto amcheck = test_support::run({pg.bin + "/pg_amcheck", "-h", "127.0.0.1", "-p", pg.port, "-U", "postgres",
                                    "--install-missing", "--heapallindexed", "postgres"});
  EXPECT_EQ(amcheck.status, 0) << amcheck.out << amcheck.err;
}

}  // namespace
