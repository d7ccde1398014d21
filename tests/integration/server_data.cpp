// server_data.cpp - a server's data is the same after hugify acts on it. Redis (Debian's redis-server,
// 127.0.0.1, no persistence): DEBUG DIGEST before and after each of 100 collapses, with a burst of writes
// running during another collapse in every round; at the end every write is there with its value, and no
// client saw an error. Asserts data and errors only, never a time.
#include <unistd.h>

#include <chrono>
#include <fstream>
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

}  // namespace
