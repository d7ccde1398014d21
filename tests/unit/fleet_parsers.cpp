// SPDX-License-Identifier: MIT
// Which cgroup, systemd unit and container a process is in, and the kernel's per-cgroup THP figures
// (hugify inspect --all --by, status, the agent's per-cgroup metrics): the pure parsers on
// tests/fixtures/cgroup (README.md there says which were captured and which written).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

extern "C" {
#include "cgroup.h"
#include "procfs.h"
}

namespace {

constexpr uint64_t MiB = 1ull << 20;

std::vector<std::string> split_tabs(const std::string &line) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, '\t');) fields.push_back(field == "-" ? "" : field);
  return fields;
}

TEST(FleetParsers, UnitAndContainerOfEachPath) {
  std::stringstream lines(test_support::fixture("cgroup/paths.txt"));
  int checked = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    auto f = split_tabs(line);
    ASSERT_EQ(f.size(), 6u) << line;
    char name[256], prefix[256];
    const char *runtime = nullptr;
    bool unit = cgroup_key_of(f[0].c_str(), CGROUP_BY_UNIT, name, sizeof name, prefix, sizeof prefix, nullptr);
    EXPECT_EQ(unit, !f[1].empty()) << f[0];
    if (unit) {
      EXPECT_EQ(std::string(name), f[1]) << f[0];
      EXPECT_EQ(std::string(prefix), f[2]) << f[0];
    }
    bool container = cgroup_key_of(f[0].c_str(), CGROUP_BY_CONTAINER, name, sizeof name, prefix, sizeof prefix, &runtime);
    EXPECT_EQ(container, !f[3].empty()) << f[0];
    if (container) {
      EXPECT_EQ(std::string(name), f[3]) << f[0];
      EXPECT_EQ(std::string(runtime), f[4]) << f[0];
      EXPECT_EQ(std::string(prefix), f[5]) << f[0];
    }
    ASSERT_TRUE(cgroup_key_of(f[0].c_str(), CGROUP_BY_CGROUP, name, sizeof name, prefix, sizeof prefix, nullptr));
    EXPECT_EQ(std::string(name), f[0]);
    checked++;
  }
  EXPECT_GE(checked, 12);
}

TEST(FleetParsers, SmallBuffersAreCutNotOverrun) {
  char name[8], prefix[4];
  ASSERT_TRUE(cgroup_key_of("/system.slice/redis-server.service", CGROUP_BY_UNIT, name, sizeof name, prefix,
                            sizeof prefix, nullptr));
  EXPECT_EQ(std::string(name), "redis-s");
  EXPECT_EQ(std::string(prefix), "/sy");
  EXPECT_FALSE(cgroup_key_of("", CGROUP_BY_CGROUP, name, sizeof name, prefix, sizeof prefix, nullptr));
}

TEST(FleetParsers, CgroupPathPerHierarchy) {
  std::string hybrid = test_support::fixture("cgroup/proc-cgroup-hybrid-6.18.txt");
  char path[256];
  ASSERT_TRUE(parse_cgroup_v1_path(hybrid.c_str(), "memory", path, sizeof path));
  EXPECT_EQ(std::string(path).rfind("/process_api/", 0), 0u) << path;
  EXPECT_TRUE(parse_cgroup_v1_path("5:cpu,memory:/a/b\n0::/\n", "memory", path, sizeof path));
  EXPECT_EQ(std::string(path), "/a/b");
  EXPECT_FALSE(parse_cgroup_v1_path("0::/a\n", "memory", path, sizeof path)) << "v2 only";
  EXPECT_FALSE(parse_cgroup_v1_path("4:memoryx:/a\n", "memory", path, sizeof path));
  struct cgroup_memory_root v1 = {1, "/sys/fs/cgroup/memory"}, v2 = {2, "/sys/fs/cgroup"};
  ASSERT_TRUE(cgroup_path_of(&v1, hybrid.c_str(), path, sizeof path));
  EXPECT_NE(std::string(path), "/");
  ASSERT_TRUE(cgroup_path_of(&v2, hybrid.c_str(), path, sizeof path));
  EXPECT_EQ(std::string(path), "/");
}

TEST(FleetParsers, MemoryStatThp) {
  struct cgroup_thp t;
  ASSERT_TRUE(parse_memory_stat_thp(test_support::fixture("cgroup/memory.stat-v2-6.8.txt").c_str(), &t));
  EXPECT_EQ(t.anon, 1060 * MiB);
  EXPECT_EQ(t.shmem, 64 * MiB);
  EXPECT_EQ(t.file, 0u);
  EXPECT_TRUE(t.has_shmem && t.has_file);
  ASSERT_TRUE(parse_memory_stat_thp(test_support::fixture("cgroup/memory.stat-v1-6.18.txt").c_str(), &t));
  EXPECT_FALSE(t.has_shmem || t.has_file) << "v1 reports anonymous THP only";
  EXPECT_FALSE(parse_memory_stat_thp("anon 5\nfile 6\n", &t));
  ASSERT_TRUE(parse_memory_stat_thp("total_rss_huge 4194304\nrss_huge 2097152\n", &t));
  EXPECT_EQ(t.anon, 2 * MiB) << "the cgroup's own, not total_";
}

TEST(FleetParsers, DifferencesNameTheirCause) {
  struct cgroup_thp kernel = {100 * MiB, 64 * MiB, 0, true, true}, walk = {100 * MiB + MiB, 64 * MiB, 0, false, false};
  char why[400];
  EXPECT_EQ(cgroup_thp_difference(&kernel, &walk, 0, why, sizeof why), nullptr) << "within 2 MiB";
  walk.shmem = 128 * MiB;
  ASSERT_NE(cgroup_thp_difference(&kernel, &walk, 0, why, sizeof why), nullptr);
  EXPECT_NE(std::string(why).find("charged once"), std::string::npos) << why;
  walk.shmem = 64 * MiB, walk.anon = 40 * MiB;
  ASSERT_NE(cgroup_thp_difference(&kernel, &walk, 2, why, sizeof why), nullptr);
  EXPECT_NE(std::string(why).find("moved out"), std::string::npos) << why;
  EXPECT_NE(std::string(why).find("could not be read"), std::string::npos) << why;
  walk.anon = 300 * MiB;
  ASSERT_NE(cgroup_thp_difference(&kernel, &walk, 0, why, sizeof why), nullptr);
  EXPECT_NE(std::string(why).find("moved in"), std::string::npos) << why;
  EXPECT_TRUE(cgroup_thp_agrees(1000 * MiB, 1019 * MiB));
  EXPECT_FALSE(cgroup_thp_agrees(1000 * MiB, 1030 * MiB));
}

} // namespace
