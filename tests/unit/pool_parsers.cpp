// SPDX-License-Identifier: MIT
// hugify status / pool: the parsers, the status gathering and diagnoses, the pool plan and the persistence
// texts, on captured trees: tests/fixtures/pool/kvm-6.18 (this machine: 2M + 1G pools, mTHP, one node),
// numa2-6.8 (a two-node server, constructed from the kernel docs) and kernel-5.15 (no mTHP, no MADV_COLLAPSE,
// a cgroup hugetlb limit below the pool). See tests/fixtures/pool/README.md.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "test_support.hpp"

extern "C" {
#include "cgroup.h"
#include "os.h"
#include "pool.h"
#include "procfs.h"
#include "status.h"
#include "units.h"
}

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

std::string tree(const std::string &name) { return std::string(HUGIFY_FIXTURES_DIR) + "/pool/" + name; }

std::unique_ptr<status_snapshot> read_status(const std::string &name) {
  auto s = std::make_unique<status_snapshot>();
  EXPECT_EQ(status_read(tree(name).c_str(), s.get()), 0);
  return s;
}

std::set<std::string> diagnosis_ids(const status_snapshot &s) {
  status_diagnosis d[STATUS_MAX_DIAGNOSES];
  unsigned n = status_diagnose(&s, d, STATUS_MAX_DIAGNOSES);
  std::set<std::string> ids;
  for (unsigned i = 0; i < n; i++) {
    ids.insert(d[i].id);
    EXPECT_GT(std::strlen(d[i].message), 20u) << d[i].id;
  }
  return ids;
}

// ---- parsers ----------------------------------------------------------------------------------------

TEST(PoolVmstat, ThisMachineHasEveryCounter) {
  vmstat_counters c;
  parse_vmstat(test_support::fixture("pool/kvm-6.18/proc/vmstat").c_str(), &c);
  for (int i = 0; i < VMSTAT_COUNTER_COUNT; i++) EXPECT_TRUE(c.present[i]) << vmstat_counter_names[i];
  EXPECT_EQ(c.value[VMSTAT_THP_FAULT_ALLOC], 238410u);
  EXPECT_EQ(c.value[VMSTAT_THP_COLLAPSE_ALLOC], 12u);
  EXPECT_EQ(c.value[VMSTAT_HTLB_BUDDY_ALLOC_SUCCESS], 140u);
  EXPECT_EQ(c.value[VMSTAT_COMPACT_STALL], 0u);
}

TEST(PoolVmstat, OlderKernelLacksSomeCounters) {
  vmstat_counters c;
  parse_vmstat(test_support::fixture("pool/kernel-5.15/proc/vmstat").c_str(), &c);
  EXPECT_FALSE(c.present[VMSTAT_THP_SWPOUT]);
  EXPECT_TRUE(c.present[VMSTAT_COMPACT_STALL]);
  EXPECT_EQ(c.value[VMSTAT_COMPACT_STALL], 12u);
  EXPECT_EQ(c.value[VMSTAT_THP_SWPOUT], 0u);
}

TEST(PoolBuddyinfo, ZonesOrdersAndWhatCouldBeReserved) {
  buddyinfo_zone zones[8];
  long n = parse_buddyinfo(test_support::fixture("pool/kvm-6.18/proc/buddyinfo").c_str(), zones, 8);
  ASSERT_EQ(n, 3);
  EXPECT_STREQ(zones[0].zone, "DMA");
  EXPECT_STREQ(zones[2].zone, "Normal");
  EXPECT_EQ(zones[2].node, 0);
  ASSERT_EQ(zones[2].order_count, 11u);
  EXPECT_EQ(zones[2].free_blocks[0], 171u);
  EXPECT_EQ(zones[2].free_blocks[10], 196u);
  bool bound = true;
  // 2 MiB = order 9: DMA32 2 + 240*2, Normal 40 + 196*2; the DMA zone is left out.
  EXPECT_EQ(buddyinfo_free_pages(zones, 3, 0, 4096, 2 * MiB, &bound), 2u + 480 + 40 + 392);
  EXPECT_FALSE(bound);
  EXPECT_EQ(buddyinfo_free_pages(zones, 3, 1, 4096, 2 * MiB, &bound), 0u); // no node 1
  // 1 GiB is past the largest order: (240 + 196) blocks of 4 MiB = 1744 MiB, at most one page.
  EXPECT_EQ(buddyinfo_free_pages(zones, 3, -1, 4096, GiB, &bound), 1u);
  EXPECT_TRUE(bound);
}

TEST(PoolBuddyinfo, TwoNodesAndMalformedText) {
  buddyinfo_zone zones[8];
  ASSERT_EQ(parse_buddyinfo(test_support::fixture("pool/numa2-6.8/proc/buddyinfo").c_str(), zones, 8), 4);
  EXPECT_EQ(zones[3].node, 1);
  bool bound;
  EXPECT_EQ(buddyinfo_free_pages(zones, 4, 1, 4096, 2 * MiB, &bound), 73u + 2 * 4);
  EXPECT_EQ(parse_buddyinfo("Node x, zone Normal 1 2\n", zones, 8), -EINVAL);
  EXPECT_EQ(parse_buddyinfo("Node 0, zone Normal 1 two\n", zones, 8), -EINVAL);
}

TEST(PoolMounts, HugetlbfsOptionsAsTheKernelPrintsThem) {
  mount_entry *mounts = nullptr;
  long n = parse_mounts(test_support::fixture("pool/kvm-6.18/proc/mounts").c_str(), &mounts);
  ASSERT_GT(n, 5);
  std::vector<hugetlbfs_options> huge;
  std::vector<std::string> paths;
  std::string cgroup2;
  for (long i = 0; i < n; i++) {
    if (std::string(mounts[i].type) == "cgroup2") cgroup2 = mounts[i].path;
    if (std::string(mounts[i].type) != "hugetlbfs") continue;
    hugetlbfs_options o;
    EXPECT_TRUE(parse_hugetlbfs_options(mounts[i].options, &o)) << mounts[i].options;
    huge.push_back(o);
    paths.push_back(mounts[i].path);
  }
  free(mounts);
  EXPECT_EQ(cgroup2, "/sys/fs/cgroup/unified");
  ASSERT_EQ(huge.size(), 2u);
  EXPECT_EQ(paths[0], "/tmp/pool-cap-m2");
  EXPECT_EQ(huge[0].page_size, 2 * MiB);
  EXPECT_EQ(huge[0].size, 16 * MiB);
  EXPECT_EQ(huge[0].min_size, 4 * MiB);
  EXPECT_EQ(huge[0].mode, 01770u);
  EXPECT_EQ(huge[0].gid, 100u);
  EXPECT_EQ(huge[0].uid, 0u);
  EXPECT_EQ(huge[1].page_size, GiB); // printed "pagesize=1024M"
  EXPECT_EQ(huge[1].mode, 0755u);    // not printed: the default
  EXPECT_EQ(huge[1].size, 0u);
}

TEST(PoolMounts, OctalEscapesAndBadOptions) {
  mount_entry *mounts = nullptr;
  ASSERT_EQ(parse_mounts("none /mnt/huge\\040pages hugetlbfs ro,pagesize=64K 0 0\n", &mounts), 1);
  EXPECT_STREQ(mounts[0].path, "/mnt/huge pages");
  hugetlbfs_options o;
  EXPECT_TRUE(parse_hugetlbfs_options(mounts[0].options, &o));
  EXPECT_TRUE(o.read_only);
  EXPECT_EQ(o.page_size, 64 * KiB);
  free(mounts);
  EXPECT_FALSE(parse_hugetlbfs_options("pagesize=2Q", &o));
  EXPECT_FALSE(parse_hugetlbfs_options("mode=99", &o));
  EXPECT_TRUE(parse_hugetlbfs_options("size=50%", &o)); // a percentage as written: bytes not known
  EXPECT_EQ(o.size, 0u);
}

// An option longer than the parser's buffer was cut, and its tail then read as an option of its own:
// 128 'a's followed by "ro" made the mount read-only.
TEST(PoolMounts, OverLongHugetlbfsOptionIsNotReadAsItsTail) {
  hugetlbfs_options o;
  std::string options = std::string(128, 'a') + "ro,pagesize=2M";
  EXPECT_TRUE(parse_hugetlbfs_options(options.c_str(), &o)); // skipped as an unknown option
  EXPECT_FALSE(o.read_only);
  EXPECT_EQ(o.page_size, 2 * MiB);
  options = "pagesize=2M," + std::string(200, 'x') + "size=1G";
  EXPECT_TRUE(parse_hugetlbfs_options(options.c_str(), &o));
  EXPECT_EQ(o.size, 0u);
  EXPECT_EQ(o.page_size, 2 * MiB);
}

TEST(PoolCmdline, PerNodeCountsAndSizes) {
  cmdline_hugepages c;
  ASSERT_TRUE(parse_cmdline_hugepages(test_support::fixture("pool/numa2-6.8/proc/cmdline").c_str(), &c));
  EXPECT_EQ(c.default_size, 2 * MiB);
  EXPECT_STREQ(c.transparent_hugepage, "always");
  ASSERT_EQ(c.pool_count, 2u);
  EXPECT_EQ(c.pools[0].page_size, GiB);
  EXPECT_TRUE(c.pools[0].per_node);
  EXPECT_EQ(c.pools[0].pages, 4u);
  EXPECT_EQ(c.pools[0].node_pages[0], 2u);
  EXPECT_EQ(c.pools[0].node_pages[1], 2u);
  EXPECT_EQ(c.pools[1].page_size, 2 * MiB);
  EXPECT_FALSE(c.pools[1].per_node);
  EXPECT_EQ(c.pools[1].pages, 2048u);
  EXPECT_STREQ(c.params,
               "default_hugepagesz=2M hugepagesz=1G hugepages=0:2,1:2 hugepagesz=2M hugepages=2048 "
               "transparent_hugepage=always");
}

TEST(PoolCmdline, DefaultSizeThisMachineAndInitArguments) {
  cmdline_hugepages c;
  ASSERT_TRUE(parse_cmdline_hugepages(test_support::fixture("pool/kernel-5.15/proc/cmdline").c_str(), &c));
  ASSERT_EQ(c.pool_count, 1u);
  EXPECT_EQ(c.pools[0].page_size, 0u); // the default size: not named on this command line
  EXPECT_EQ(c.pools[0].pages, 1024u);
  EXPECT_STREQ(c.transparent_hugepage, "never");
  // This machine: nothing about huge pages; what follows "--" is init's, not the kernel's.
  ASSERT_TRUE(parse_cmdline_hugepages(test_support::fixture("pool/kvm-6.18/proc/cmdline").c_str(), &c));
  EXPECT_EQ(c.pool_count, 0u);
  EXPECT_STREQ(c.params, "");
  ASSERT_TRUE(parse_cmdline_hugepages("quiet -- hugepages=5", &c));
  EXPECT_EQ(c.pool_count, 0u);
  EXPECT_FALSE(parse_cmdline_hugepages("hugepagesz=1G hugepages=0:x", &c));
  EXPECT_FALSE(parse_cmdline_hugepages("hugepagesz=banana hugepages=1", &c));
}

TEST(PoolSmallFiles, LimitsStatusIdListsCgroup) {
  uint64_t soft = 0, hard = 0;
  ASSERT_TRUE(parse_limit(test_support::fixture("pool/kvm-6.18/proc/self/limits").c_str(), "Max locked memory", &soft,
                          &hard));
  EXPECT_EQ(soft, 8 * MiB);
  EXPECT_EQ(hard, 8 * MiB);
  ASSERT_TRUE(parse_limit(test_support::fixture("pool/numa2-6.8/proc/self/limits").c_str(), "Max locked memory", &soft,
                          &hard));
  EXPECT_EQ(soft, UINT64_MAX);
  EXPECT_FALSE(parse_limit("Max cpu time unlimited unlimited seconds\n", "Max locked memory", &soft, &hard));

  char text[64];
  ASSERT_TRUE(parse_keyed_text(test_support::fixture("pool/kvm-6.18/proc/self/status").c_str(), "Cpus_allowed_list",
                               text, sizeof text));
  EXPECT_STREQ(text, "0-1");
  EXPECT_FALSE(parse_keyed_text("Cpus_allowed: 3\n", "Cpus_allowed_list", text, sizeof text));

  uint64_t bits[2];
  ASSERT_TRUE(parse_id_list("0-3,8,10-11\n", bits, 128));
  EXPECT_EQ(bits[0], 0xd0fu);
  ASSERT_TRUE(parse_id_list("", bits, 128));
  EXPECT_EQ(bits[0], 0u);
  ASSERT_TRUE(parse_id_list("64,200", bits, 128)); // 200 is past the bitmap: ignored
  EXPECT_TRUE(id_list_has(bits, 64));
  EXPECT_FALSE(parse_id_list("3-1", bits, 128));
  EXPECT_FALSE(parse_id_list("a", bits, 128));

  char path[128];
  ASSERT_TRUE(parse_cgroup_v2_path(test_support::fixture("pool/kvm-6.18/proc/self/cgroup").c_str(), path, sizeof path));
  EXPECT_STREQ(path, "/");
  ASSERT_TRUE(
      parse_cgroup_v2_path(test_support::fixture("pool/kernel-5.15/proc/self/cgroup").c_str(), path, sizeof path));
  EXPECT_STREQ(path, "/user.slice/user-1000.slice/session-3.scope");
  EXPECT_FALSE(parse_cgroup_v2_path("4:memory:/a\n1:cpu:/\n", path, sizeof path));
  uint64_t limit;
  ASSERT_TRUE(parse_cgroup_limit("max\n", &limit));
  EXPECT_EQ(limit, UINT64_MAX);
  ASSERT_TRUE(parse_cgroup_limit("536870912\n", &limit));
  EXPECT_EQ(limit, 512 * MiB);
  EXPECT_FALSE(parse_cgroup_limit("maximum", &limit));
  cgroup_hugetlb_size_name(2 * MiB, text, sizeof text);
  EXPECT_STREQ(text, "2MB");
  cgroup_hugetlb_size_name(GiB, text, sizeof text);
  EXPECT_STREQ(text, "1GB");
  cgroup_hugetlb_size_name(64 * KiB, text, sizeof text);
  EXPECT_STREQ(text, "64KB");
}

TEST(PoolUnits, PageSizeFormsTheIssueAccepts) {
  for (const char *form : {"2M", "2MB", "2048kB", "2mb", "2MiB"}) {
    uint64_t bytes = 0;
    EXPECT_TRUE(parse_size(form, &bytes)) << form;
    EXPECT_EQ(bytes, 2 * MiB) << form;
  }
  for (const char *form : {"1G", "1GB", "1024M"}) {
    uint64_t bytes = 0;
    EXPECT_TRUE(parse_size(form, &bytes)) << form;
    EXPECT_EQ(bytes, GiB) << form;
  }
  uint64_t bytes;
  EXPECT_FALSE(parse_size("2X", &bytes));
  EXPECT_FALSE(parse_size("-2M", &bytes));
}

// ---- the whole status on captured trees ------------------------------------------------------------

// `available` (free minus reserved) is computed in one place, os_hugetlb_read_under; never below 0.
TEST(PoolAvailable, FreeMinusReservedNeverNegative) {
  char root[] = "/tmp/hugify-available-XXXXXX";
  ASSERT_NE(mkdtemp(root), nullptr);
  std::string dir = std::string(root) + OS_SYSFS_HUGEPAGES "/hugepages-2048kB";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  auto write = [&](const char *leaf, const char *value) {
    FILE *f = std::fopen((dir + "/" + leaf).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(value, f);
    std::fclose(f);
  };
  for (const char *leaf : {"nr_hugepages", "surplus_hugepages", "nr_overcommit_hugepages"}) write(leaf, "0\n");
  struct { const char *free, *reserved; uint64_t available; } cases[] = {{"10\n", "8\n", 2}, {"3\n", "5\n", 0},
                                                                          {"4\n", "4\n", 0}, {"7\n", "0\n", 7}};
  for (const auto &c : cases) {
    write("free_hugepages", c.free);
    write("resv_hugepages", c.reserved);
    hugify_hugetlb_size pool;
    ASSERT_EQ(os_hugetlb_read_under(root, 2 * MiB, &pool), 0);
    EXPECT_EQ(pool.available, c.available) << c.free << " free, " << c.reserved << " reserved";
  }
  ASSERT_EQ(std::system((std::string("rm -rf ") + root).c_str()), 0);
}

// The one cgroup v2 hugetlb-limit walk (status shows it, hugify_alloc falls back on it): the mount point
// comes from /proc/mounts, "max" is no limit, the tightest max and the least room are found on the way up.
TEST(CgroupHugetlbLimit, WalkFindsTightestMaxAndLeastRoom) {
  char mount[64];
  ASSERT_TRUE(cgroup_v2_mount("proc /proc proc rw 0 0\ncgroup2 /mnt/cg2 cgroup2 rw,nosuid 0 0\n", mount, sizeof mount));
  EXPECT_STREQ(mount, "/mnt/cg2");
  EXPECT_FALSE(cgroup_v2_mount("proc /proc proc rw 0 0\n", mount, sizeof mount));
  std::map<std::string, std::string> files = {
      {"/mnt/cg2/a/b/hugetlb.2MB.max", "max\n"},        {"/mnt/cg2/a/b/hugetlb.2MB.current", "4194304\n"},
      {"/mnt/cg2/a/hugetlb.2MB.max", "16777216\n"},     {"/mnt/cg2/a/hugetlb.2MB.current", "14680064\n"},
      {"/mnt/cg2/hugetlb.2MB.max", "8388608\n"},        {"/mnt/cg2/hugetlb.2MB.current", "0\n"},
  };
  auto read_line = [](void *context, const char *path, char *buf, size_t cap) {
    auto *f = static_cast<std::map<std::string, std::string> *>(context);
    auto it = f->find(path);
    if (it == f->end()) return false;
    std::snprintf(buf, cap, "%s", it->second.c_str());
    return true;
  };
  cgroup_hugetlb_limit limit;
  ASSERT_TRUE(cgroup_hugetlb_limit_walk("/mnt/cg2", "/a/b/", 2 * MiB, read_line, &files, &limit));
  EXPECT_EQ(limit.max, 8 * MiB);         // the root's limit is the tightest
  EXPECT_STREQ(limit.limited_by, "/");
  EXPECT_EQ(limit.current, 4 * MiB);     // the leaf's usage
  EXPECT_EQ(limit.room, 2 * MiB);        // but /a, 14 of 16 MiB used, leaves the least room
  EXPECT_STREQ(limit.room_limited_by, "/a");
  EXPECT_EQ(limit.rsvd_max, UINT64_MAX); // no rsvd files: no limit
  files.clear();
  EXPECT_FALSE(cgroup_hugetlb_limit_walk("/mnt/cg2", "/a", 2 * MiB, read_line, &files, &limit));
  EXPECT_EQ(limit.room, UINT64_MAX);
}

TEST(PoolStatusTree, ThisMachine) {
  auto s = read_status("kvm-6.18");
  EXPECT_FALSE(s->live);
  EXPECT_EQ(std::string(s->kernel_release).substr(0, 4), "6.18");
  EXPECT_EQ(s->default_hugetlb_size, 2 * MiB);
  ASSERT_EQ(s->pool_count, 2u);
  EXPECT_EQ(s->pools[0].global.page_size, 2 * MiB);
  EXPECT_TRUE(s->pools[0].is_default);
  EXPECT_EQ(s->pools[0].global.total, 40u);
  EXPECT_EQ(s->pools[0].global.free, 10u);
  EXPECT_EQ(s->pools[0].global.reserved, 8u);
  EXPECT_EQ(s->pools[0].global.available, 2u); // free - reserved
  EXPECT_EQ(s->pools[1].global.page_size, GiB);
  EXPECT_EQ(s->pools[1].global.total, 2u);
  ASSERT_EQ(s->pools[1].node_count, 1u);
  EXPECT_EQ(s->pools[1].nodes[0].total, 2u);
  ASSERT_EQ(s->mount_count, 2u);
  EXPECT_EQ(s->mounts[1].page_size, GiB);
  EXPECT_TRUE(s->thp_present);
  EXPECT_STREQ(s->thp_enabled, "madvise");
  EXPECT_STREQ(s->thp_defrag, "madvise");
  EXPECT_STREQ(s->thp_shmem_enabled, "never");
  EXPECT_EQ(s->thp_pmd_size, 2 * MiB);
  ASSERT_EQ(s->mthp_count, 9u); // 8K .. 2M
  EXPECT_EQ(s->mthp[0].page_size, 8 * KiB);
  EXPECT_STREQ(s->mthp[0].enabled, ""); // 8K has only shmem_enabled
  EXPECT_STREQ(s->mthp[8].enabled, "inherit");
  EXPECT_STREQ(s->mthp[8].shmem_enabled, "inherit");
  EXPECT_EQ(s->khugepaged.max_ptes_none, 511u);
  EXPECT_EQ(s->khugepaged.pages_to_scan, 4096u);
  EXPECT_EQ(s->anon_huge, 135168 * KiB);
  EXPECT_EQ(s->hugetlb_bytes, 2179072 * KiB);
  EXPECT_TRUE(s->counters_known);
  EXPECT_EQ(s->zone_count, 3u);
  EXPECT_EQ(s->boot.pool_count, 0u);
  EXPECT_TRUE(s->memlock_known);
  EXPECT_EQ(s->memlock_soft, 8 * MiB);
  EXPECT_EQ(s->cgroup_version, 2);
  EXPECT_STREQ(s->cgroup_path, "/");
  EXPECT_EQ(s->cgroup_limit_count, 0u); // the root cgroup has no hugetlb limits
  ASSERT_EQ(s->node_count, 1u);
  EXPECT_TRUE(s->nodes[0].caller_cpus);
  EXPECT_EQ(s->features[PROBE_MADV_COLLAPSE].state, HUGIFY_FEATURE_UNKNOWN); // a captured tree is not probed
  EXPECT_EQ(s->features[PROBE_THP].state, HUGIFY_FEATURE_YES);
  EXPECT_EQ(s->features[PROBE_MTHP].state, HUGIFY_FEATURE_YES); // hugepages-8kB .. hugepages-2048kB
  EXPECT_EQ(s->unreadable_count, 0u);
  bool bound;
  EXPECT_EQ(status_could_reserve(s.get(), 0, 2 * MiB, &bound), 914u);
  auto ids = diagnosis_ids(*s);
  EXPECT_EQ(ids, (std::set<std::string>{"max_ptes_none_bloat"}));
}

TEST(PoolStatusTree, TwoNodeServer) {
  auto s = read_status("numa2-6.8");
  ASSERT_EQ(s->pool_count, 2u);
  const hugify_pool &two = s->pools[0], &one = s->pools[1];
  ASSERT_EQ(two.node_count, 2u);
  EXPECT_EQ(two.nodes[0].total + two.nodes[1].total, two.global.total);
  ASSERT_EQ(one.node_count, 2u);
  EXPECT_EQ(one.nodes[0].total, 0u);
  EXPECT_EQ(one.nodes[1].total, 2u);
  ASSERT_EQ(s->node_count, 2u);
  EXPECT_TRUE(s->nodes[0].caller_cpus);
  EXPECT_FALSE(s->nodes[1].caller_cpus); // Cpus_allowed_list 0-15 = node 0's CPUs
  EXPECT_TRUE(s->nodes[1].caller_mems);
  EXPECT_TRUE(s->nodes[1].has_cpu);
  EXPECT_EQ(s->nodes[1].mem_total, 66085012 * KiB);
  EXPECT_EQ(s->mthp_count, 8u);
  EXPECT_STREQ(s->mthp[0].shmem_enabled, ""); // per-size shmem controls came after 6.8
  EXPECT_EQ(s->memlock_soft, UINT64_MAX);
  EXPECT_STREQ(s->cgroup_path, "/system.slice/postgresql.service");
  ASSERT_EQ(s->cgroup_limit_count, 2u);
  EXPECT_EQ(s->cgroup_limits[0].max, UINT64_MAX);
  EXPECT_EQ(s->cgroup_limits[0].current, 200 * MiB);
  ASSERT_EQ(s->mount_count, 2u);
  EXPECT_EQ(s->mounts[1].options.uid, 112u);
  bool bound;
  EXPECT_EQ(status_could_reserve(s.get(), 1, 2 * MiB, &bound), 81u);
  EXPECT_EQ(status_could_reserve(s.get(), 0, GiB, &bound), (9811 + 713) * 4 * MiB / GiB);
  EXPECT_TRUE(bound);
  EXPECT_EQ(diagnosis_ids(*s), (std::set<std::string>{"defrag_always", "always_bloat", "pool_on_other_node",
                                                      "pool_without_mount", "boot_pages_missing",
                                                      "gigantic_none_free"}));
  status_diagnosis d[STATUS_MAX_DIAGNOSES];
  unsigned n = status_diagnose(s.get(), d, STATUS_MAX_DIAGNOSES);
  int remote = 0;
  for (unsigned i = 0; i < n; i++) {
    std::string id = d[i].id, fix = d[i].fix;
    if (id == "pool_on_other_node") {
      remote++;
      EXPECT_NE(fix.find("--node 0"), std::string::npos) << fix;
    }
    if (id == "pool_on_other_node" && std::string(d[i].message).find("2M") != std::string::npos) {
      EXPECT_EQ(fix, "hugify pool set 2M=2048 --node 0 && hugify pool set 2M=0 --node 1");
    }
    if (id == "boot_pages_missing") {
      EXPECT_NE(std::string(d[i].message).find("node 0 has 0 of 2"), std::string::npos) << d[i].message;
    }
    if (id == "pool_without_mount") {
      EXPECT_EQ(fix, "hugify pool mount --size 1G");
    }
  }
  EXPECT_EQ(remote, 2); // the 2M and the 1G pages on node 1
}

TEST(PoolStatusTree, OlderKernelWithoutMthpAndACgroupLimit) {
  auto s = read_status("kernel-5.15");
  EXPECT_EQ(s->mthp_count, 0u);
  EXPECT_STREQ(s->thp_enabled, "never");
  EXPECT_EQ(s->pools[1].global.page_size, GiB);
  ASSERT_EQ(s->boot.pool_count, 1u);
  EXPECT_EQ(s->boot.pools[0].page_size, 2 * MiB); // resolved to the default size
  ASSERT_GE(s->cgroup_limit_count, 1u);
  EXPECT_EQ(s->cgroup_limits[0].max, 512 * MiB);
  EXPECT_STREQ(s->cgroup_limits[0].limited_by, "/user.slice");
  EXPECT_EQ(s->cgroup_limits[0].current, 0u);
  EXPECT_EQ(diagnosis_ids(*s), (std::set<std::string>{"thp_never", "cgroup_limit_below_pool"}));
  // The probes are what says a kernel lacks MADV_COLLAPSE (no file does); as they would find it on 5.15:
  s->live = true;
  s->features[PROBE_MADV_COLLAPSE].state = HUGIFY_FEATURE_NO;
  EXPECT_TRUE(diagnosis_ids(*s).count("no_madv_collapse"));
  EXPECT_EQ(s->features[PROBE_MTHP].state, HUGIFY_FEATURE_NO); // no hugepages-<N>kB directories before 6.8
  // A limit as tight on reservations makes mmap fail cleanly: a note, no longer a SIGBUS warning.
  s->cgroup_limits[0].rsvd_max = 512 * MiB;
  status_diagnosis d[STATUS_MAX_DIAGNOSES];
  unsigned n = status_diagnose(s.get(), d, STATUS_MAX_DIAGNOSES);
  for (unsigned i = 0; i < n; i++)
    if (std::string(d[i].id) == "cgroup_limit_below_pool") {
      EXPECT_EQ(d[i].severity, STATUS_NOTE);
    }
}

// Shared memory is memory: gigabytes of it under shmem_enabled never is a diagnosis, with the fix and its
// persistent form; the per-size control (hugepages-2048kB/shmem_enabled) wins unless it says inherit.
TEST(PoolStatusTree, SharedMemoryUnderShmemNever) {
  auto s = read_status("kvm-6.18");
  ASSERT_STREQ(s->thp_shmem_enabled, "never");
  EXPECT_FALSE(diagnosis_ids(*s).count("shmem_never")) << "8.7 MiB of Shmem is not worth a word";
  s->shmem = 3 * GiB;
  s->shmem_huge = 0;
  ASSERT_TRUE(diagnosis_ids(*s).count("shmem_never"));
  status_diagnosis d[STATUS_MAX_DIAGNOSES];
  unsigned n = status_diagnose(s.get(), d, STATUS_MAX_DIAGNOSES);
  for (unsigned i = 0; i < n; i++)
    if (std::string(d[i].id) == "shmem_never") {
      EXPECT_NE(std::string(d[i].message).find("3.0 GiB of shared memory"), std::string::npos) << d[i].message;
      EXPECT_NE(std::string(d[i].fix).find("echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled"),
                std::string::npos) << d[i].fix;
      EXPECT_NE(std::string(d[i].fix).find("transparent_hugepage_shmem=advise"), std::string::npos) << d[i].fix;
    }
  snprintf(s->thp_shmem_enabled, sizeof s->thp_shmem_enabled, "advise");
  EXPECT_FALSE(diagnosis_ids(*s).count("shmem_never"));
  for (unsigned i = 0; i < s->mthp_count; i++)
    if (s->mthp[i].page_size == 2 * MiB) snprintf(s->mthp[i].shmem_enabled, sizeof s->mthp[i].shmem_enabled, "never");
  EXPECT_TRUE(diagnosis_ids(*s).count("shmem_never")) << "the 2 MiB control says never";
}

// Debian 12's 6.1: THP 'always' (Debian's build default) with max_ptes_none 511 is memory bloat, said with both
// fixes; no mTHP directories, no DAMON; the calls (MADV_COLLAPSE, PAGEMAP_SCAN) a tree cannot answer.
TEST(PoolStatusTree, Debian12KernelAlwaysWithMaxPtesNone511Bloats) {
  auto s = read_status("debian12-6.1");
  EXPECT_STREQ(s->kernel_release, "6.1.0-56-amd64");
  ASSERT_TRUE(s->thp_present);
  EXPECT_STREQ(s->thp_enabled, "always");
  EXPECT_EQ(s->mthp_count, 0u);
  EXPECT_EQ(s->features[PROBE_THP].state, HUGIFY_FEATURE_YES);
  EXPECT_EQ(s->features[PROBE_MTHP].state, HUGIFY_FEATURE_NO);
  EXPECT_EQ(s->features[PROBE_DAMON_VADDR].state, HUGIFY_FEATURE_NO);
  EXPECT_EQ(s->features[PROBE_PAGE_IDLE].state, HUGIFY_FEATURE_NO);
  for (enum probe_feature f : {PROBE_MADV_COLLAPSE, PROBE_PAGEMAP_SCAN, PROBE_SOFT_DIRTY, PROBE_THP_EXCEPT_ADVISED}) {
    EXPECT_EQ(s->features[f].state, HUGIFY_FEATURE_UNKNOWN) << probe_features[f].id;
    EXPECT_NE(std::string(s->features[f].detail).find("not probed"), std::string::npos) << s->features[f].detail;
  }
  ASSERT_EQ(diagnosis_ids(*s), (std::set<std::string>{"always_bloat"}));
  status_diagnosis d[STATUS_MAX_DIAGNOSES];
  ASSERT_EQ(status_diagnose(s.get(), d, STATUS_MAX_DIAGNOSES), 1u);
  EXPECT_EQ(d[0].severity, STATUS_WARNING);
  EXPECT_NE(std::string(d[0].message).find("'always' with khugepaged max_ptes_none 511"), std::string::npos)
      << d[0].message;
  EXPECT_NE(std::string(d[0].message).find("memory bloat"), std::string::npos) << d[0].message;
  EXPECT_NE(std::string(d[0].fix).find("echo 255 > /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none"),
            std::string::npos) << d[0].fix;
  EXPECT_NE(std::string(d[0].fix).find("echo madvise > /sys/kernel/mm/transparent_hugepage/enabled"),
            std::string::npos) << d[0].fix;
  EXPECT_NE(std::string(d[0].fix).find("hugify agent"), std::string::npos) << d[0].fix;
  // what the probes find on that kernel (no file says it): PAGEMAP_SCAN is missing, with its version
  s->features[PROBE_PAGEMAP_SCAN].state = HUGIFY_FEATURE_NO;
  unsigned n = status_diagnose(s.get(), d, STATUS_MAX_DIAGNOSES);
  bool said = false;
  for (unsigned i = 0; i < n; i++)
    if (std::string(d[i].id) == "no_pagemap_scan") {
      said = true;
      EXPECT_NE(std::string(d[i].message).find("PAGEMAP_SCAN (Linux 6.7+)"), std::string::npos) << d[i].message;
      EXPECT_STREQ(d[i].fix, "run Linux 6.7 or later");
    }
  EXPECT_TRUE(said);
  // max_ptes_none 255: khugepaged collapses only ranges at least half in use; madvise: only advised memory
  s->khugepaged.max_ptes_none = 255;
  EXPECT_FALSE(diagnosis_ids(*s).count("always_bloat"));
  s->khugepaged.max_ptes_none = 511;
  snprintf(s->thp_enabled, sizeof s->thp_enabled, "madvise");
  EXPECT_FALSE(diagnosis_ids(*s).count("always_bloat"));
  EXPECT_TRUE(diagnosis_ids(*s).count("max_ptes_none_bloat"));
}

// Debian 12's PREEMPT_RT 6.1 has no THP: status says so, and that hugetlb is the road; every feature that needs
// THP is "no" for that reason (not for a version), even in a tree, where calls are not tried.
TEST(PoolStatusTree, KernelWithoutThpPointsToHugetlb) {
  auto s = read_status("debian12-6.1-rt");
  EXPECT_FALSE(s->thp_present);
  EXPECT_TRUE(s->hugetlb_present);
  EXPECT_EQ(s->anon_huge, STATUS_UNKNOWN); // no AnonHugePages line without THP
  EXPECT_EQ(s->unreadable_count, 0u) << s->unreadable[0].path;
  EXPECT_EQ(s->features[PROBE_THP].state, HUGIFY_FEATURE_NO);
  for (int f = 0; f < PROBE_FEATURE_COUNT; f++) {
    if (!probe_features[f].needs_thp) continue;
    EXPECT_EQ(s->features[f].state, HUGIFY_FEATURE_NO) << probe_features[f].id;
    EXPECT_NE(std::string(s->features[f].detail).find("CONFIG_TRANSPARENT_HUGEPAGE"), std::string::npos)
        << probe_features[f].id << ": " << s->features[f].detail;
  }
  ASSERT_EQ(diagnosis_ids(*s), (std::set<std::string>{"thp_absent"}));
  status_diagnosis d[STATUS_MAX_DIAGNOSES];
  ASSERT_EQ(status_diagnose(s.get(), d, STATUS_MAX_DIAGNOSES), 1u);
  EXPECT_NE(std::string(d[0].message).find("THP is not built into this kernel"), std::string::npos) << d[0].message;
  EXPECT_NE(std::string(d[0].message).find("hugetlb is the road"), std::string::npos) << d[0].message;
  EXPECT_EQ(std::string(d[0].message).find("6.1"), std::string::npos) << "no version is the cause: " << d[0].message;
  EXPECT_NE(std::string(d[0].fix).find("hugify pool set 2M="), std::string::npos) << d[0].fix;
  EXPECT_NE(std::string(d[0].fix).find("hugify run --heap hugetlb"), std::string::npos) << d[0].fix;
}

// Debian 14's 7.2 (captured in its guest with a kdamond of the capture's own holding a collapse scheme on a
// sleeping process; the kdamond stayed off: DAMON_STAT, on by default there, holds DAMON): what the kernel
// collapses by itself. The scheme is listed with its kdamond and target, and says that the kernel takes the
// action collapse (hugepage, which no scheme there names, a tree cannot try); DAMON_STAT is named with the fix;
// khugepaged counts its collapses per size below the PMD size. The figures are the tree's files.
TEST(PoolStatusTree, Debian14KernelsOwnCollapses) {
  auto s = read_status("debian14-7.2");
  const std::string kdamond = "pool/debian14-7.2/sys/kernel/mm/damon/admin/kdamonds/0/";
  EXPECT_EQ(std::string(s->kernel_release).substr(0, 5), "7.2.1");
  EXPECT_STREQ(s->thp_enabled, "always");
  EXPECT_EQ(s->features[PROBE_DAMON_VADDR].state, HUGIFY_FEATURE_YES) << s->features[PROBE_DAMON_VADDR].detail;
  EXPECT_EQ(s->features[PROBE_DAMOS_COLLAPSE].state, HUGIFY_FEATURE_YES) << s->features[PROBE_DAMOS_COLLAPSE].detail;
  EXPECT_EQ(s->features[PROBE_DAMOS_HUGEPAGE].state, HUGIFY_FEATURE_UNKNOWN);
  EXPECT_NE(std::string(s->features[PROBE_DAMOS_HUGEPAGE].detail).find("another user's"), std::string::npos)
      << s->features[PROBE_DAMOS_HUGEPAGE].detail;
  EXPECT_EQ(s->features[PROBE_KHUGEPAGED_MTHP].state, HUGIFY_FEATURE_YES) << s->features[PROBE_KHUGEPAGED_MTHP].detail;

  ASSERT_TRUE(s->damon_present);
  ASSERT_EQ(s->damon_scheme_count, 1u);
  const probe_damon_scheme &d = s->damon_schemes[0];
  EXPECT_STREQ(d.action, "collapse");
  EXPECT_STREQ(d.state, "off");
  EXPECT_STREQ(d.operations, "vaddr");
  EXPECT_EQ(d.kdamond_pid, 0) << "off: its pid file says -1";
  ASSERT_EQ(s->damon_module_count, 1u);
  EXPECT_STREQ(s->damon_modules[0].name, "damon_stat");
  EXPECT_EQ(s->damon_modules[0].kdamond_pid, 52);
  ASSERT_TRUE(diagnosis_ids(*s).count("damon_held"));
  ASSERT_EQ(d.target_count, 1u);
  EXPECT_EQ(d.targets[0], std::stoi(test_support::fixture(kdamond + "contexts/0/targets/0/pid_target")));

  unsigned counted = 0;
  for (unsigned i = 0; i < s->mthp_count; i++) {
    const status_mthp &m = s->mthp[i];
    SCOPED_TRACE(m.page_size);
    std::string stats = "pool/debian14-7.2/sys/kernel/mm/transparent_hugepage/hugepages-" +
                        std::to_string(m.page_size >> 10) + "kB/stats/";
    if (!m.collapse_known) continue;
    counted++;
    for (size_t f = 0; f < STATUS_MTHP_COLLAPSE_FIELDS; f++) {
      std::string text = test_support::fixture(stats + status_mthp_collapse_fields[f]);
      EXPECT_EQ(m.collapse[f], text.empty() ? STATUS_UNKNOWN : std::stoull(text)) << status_mthp_collapse_fields[f];
    }
  }
  EXPECT_GE(counted, 2u) << "a size below the PMD size and the PMD size itself";

  auto text = test_support::hugify({"status", "--root", tree("debian14-7.2")});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("DAMON vaddr: yes; DAMOS actions hugify can use: collapse\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("scheme 0: collapse, targets " + std::to_string(d.targets[0])), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("khugepaged per size"), std::string::npos) << text.out;
  auto json = test_support::hugify({"status", "--root", tree("debian14-7.2"), "--json"});
  ASSERT_EQ(json.status, 0) << json.err;
  test_support::json_view doc = test_support::parse_json(json.out);
  EXPECT_EQ(doc["schema"].text(), "hugify.status/2");
  ASSERT_EQ(doc["damon"]["actions"].size(), 1u);
  EXPECT_EQ(doc["damon"]["actions"][0].text(), "collapse");
  EXPECT_EQ(doc["damon"]["schemes"][0]["targets"][0].u64(), static_cast<uint64_t>(d.targets[0]));
  EXPECT_EQ(doc["features"]["damos_collapse"].text(), "yes");
}

// Kernels before 7.2's counters: no size has any, and status says so; a tree without DAMON lists no scheme.
TEST(PoolStatusTree, NoPerSizeCollapseCountersBefore72) {
  auto s = read_status("kvm-6.18");
  for (unsigned i = 0; i < s->mthp_count; i++) EXPECT_FALSE(s->mthp[i].collapse_known) << s->mthp[i].page_size;
  EXPECT_EQ(s->features[PROBE_KHUGEPAGED_MTHP].state, HUGIFY_FEATURE_NO);
  EXPECT_EQ(s->damon_scheme_count, 0u);
  auto text = test_support::hugify({"status", "--root", tree("kvm-6.18")});
  EXPECT_NE(text.out.find("khugepaged's collapses per size: not counted by this kernel (khugepaged mTHP collapse, "
                          "Linux 7.2+)"), std::string::npos) << text.out;
}

// One table holds each feature's first version: every entry is filled, and its ids are distinct.
TEST(PoolStatusTree, FeatureTableIsComplete) {
  std::set<std::string> ids;
  for (int f = 0; f < PROBE_FEATURE_COUNT; f++) {
    const probe_feature_info &x = probe_features[f];
    ASSERT_NE(x.id, nullptr) << f;
    EXPECT_TRUE(ids.insert(x.id).second) << x.id;
    EXPECT_GT(std::strlen(x.name), 0u) << x.id;
    EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(x.since[0]))) << x.id;
    EXPECT_GT(std::strlen(x.source), 0u) << x.id;
    EXPECT_GT(std::strlen(x.without), 0u) << x.id;
  }
}

TEST(PoolStatusTree, MissingTreeIsReportedNotFatal) {
  auto s = std::make_unique<status_snapshot>();
  ASSERT_EQ(status_read("/nonexistent-hugify-root", s.get()), 0);
  EXPECT_FALSE(s->hugetlb_present);
  EXPECT_FALSE(s->thp_present);
  EXPECT_EQ(s->mem_total, STATUS_UNKNOWN);
  EXPECT_EQ(diagnosis_ids(*s), (std::set<std::string>{"thp_absent"}));
}

// ---- the pool plan and setting it on a copy of a tree ------------------------------------------------

struct numa_pools {
  hugify_pool pools[HUGIFY_MAX_HUGETLB_SIZES];
  unsigned count = 0;
  uint64_t memory[HUGIFY_MAX_NODES];
};

std::unique_ptr<numa_pools> load(const std::string &root) {
  auto p = std::make_unique<numa_pools>();
  int n = pool_list_at(root.c_str(), p->pools, HUGIFY_MAX_HUGETLB_SIZES);
  EXPECT_GT(n, 0);
  p->count = n > 0 ? static_cast<unsigned>(n) : 0;
  EXPECT_TRUE(pool_node_memory_at(root.c_str(), &p->pools[0], p->memory));
  return p;
}

TEST(PoolPlan, SpreadsOverNodesNeverMultiplies) {
  auto p = load(tree("numa2-6.8"));
  hugify_pool_result r;
  ASSERT_EQ(pool_plan(p->pools, p->count, p->memory, 2 * MiB, -1, 3001, &r), 0);
  EXPECT_EQ(r.before, 2048u);
  EXPECT_EQ(r.requested, 3001u);
  ASSERT_EQ(r.node_count, 2u);
  EXPECT_EQ(r.nodes[0].requested, 1501u);
  EXPECT_EQ(r.nodes[1].requested, 1500u);
  EXPECT_FALSE(r.beyond_memory);
  ASSERT_EQ(pool_plan(p->pools, p->count, p->memory, GiB, 1, 5, &r), 0);
  EXPECT_EQ(r.nodes[0].requested, 0u); // node 0 untouched
  EXPECT_EQ(r.nodes[1].requested, 5u);
  EXPECT_EQ(r.requested, 5u);
}

TEST(PoolPlan, BeyondMemoryUnknownSizeUnknownNode) {
  auto p = load(tree("numa2-6.8"));
  hugify_pool_result r;
  // node 1 holds 66085012 kB; its 2 GiB of 2M pages stay: at most 61 1 GiB pages fit beside them.
  ASSERT_EQ(pool_plan(p->pools, p->count, p->memory, GiB, 1, 62, &r), 0);
  EXPECT_TRUE(r.beyond_memory);
  EXPECT_NE(std::string(r.reason).find("at most 61"), std::string::npos) << r.reason;
  ASSERT_EQ(pool_plan(p->pools, p->count, p->memory, GiB, 1, 61, &r), 0);
  EXPECT_FALSE(r.beyond_memory);
  EXPECT_EQ(pool_plan(p->pools, p->count, p->memory, 4 * MiB, -1, 1, &r), -EINVAL);
  EXPECT_NE(std::string(r.reason).find("2M, 1G"), std::string::npos) << r.reason;
  EXPECT_EQ(pool_plan(p->pools, p->count, p->memory, 2 * MiB, 7, 1, &r), -EINVAL);
  EXPECT_NE(std::string(r.reason).find("nodes: 0, 1"), std::string::npos) << r.reason;
}

class PoolTreeCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/hugify-pool-tree-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    root = dir;
    ASSERT_EQ(test_support::run({"cp", "-r", tree("numa2-6.8") + "/.", root}).status, 0);
  }
  void TearDown() override { test_support::run({"rm", "-rf", root}); }
  uint64_t node_file(int node, const char *size_dir) {
    return test_support::read_u64(root + "/sys/devices/system/node/node" + std::to_string(node) +
                                  "/hugepages/" + size_dir + "/nr_hugepages");
  }
  std::string root;
};

TEST_F(PoolTreeCopy, SetWritesEachNodeAndReadsBack) {
  hugify_pool_result r;
  ASSERT_EQ(pool_set_at(root.c_str(), 2 * MiB, -1, 3001, 0, &r), 0) << r.reason;
  EXPECT_EQ(node_file(0, "hugepages-2048kB"), 1501u);
  EXPECT_EQ(node_file(1, "hugepages-2048kB"), 1500u);
  EXPECT_EQ(r.got, 3001u);
  EXPECT_EQ(r.compactions, 0u);
  ASSERT_EQ(pool_set_at(root.c_str(), 2 * MiB, 1, 100, 0, &r), 0) << r.reason;
  EXPECT_EQ(node_file(0, "hugepages-2048kB"), 1501u);
  EXPECT_EQ(node_file(1, "hugepages-2048kB"), 100u);
  EXPECT_EQ(r.requested, 1601u);
  // A dry run writes nothing; a request beyond memory writes nothing and says so.
  ASSERT_EQ(pool_set_at(root.c_str(), 2 * MiB, -1, 8, HUGIFY_POOL_DRY_RUN, &r), 0);
  EXPECT_EQ(node_file(1, "hugepages-2048kB"), 100u);
  EXPECT_EQ(r.nodes[1].requested, 4u);
  ASSERT_EQ(pool_set_at(root.c_str(), GiB, -1, 1000, 0, &r), -ENOMEM);
  EXPECT_TRUE(r.beyond_memory);
  EXPECT_EQ(node_file(0, "hugepages-1048576kB"), 0u);
  EXPECT_EQ(node_file(1, "hugepages-1048576kB"), 2u);
  EXPECT_EQ(pool_set_at(root.c_str(), 2 * MiB, -1, 1, 0x80, &r), -EINVAL); // unknown flag
}

TEST_F(PoolTreeCopy, UnwritableFileIsRefusedBeforeAnyWrite) {
  // A read-only sysctl holding a number stands in for a pool file the caller may not write: the kernel refuses
  // writes to it even from root, so this runs the same with and without privilege.
  std::string file = root + "/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages";
  ASSERT_EQ(access("/proc/sys/kernel/ngroups_max", W_OK), -1);
  ASSERT_EQ(unlink(file.c_str()), 0);
  ASSERT_EQ(symlink("/proc/sys/kernel/ngroups_max", file.c_str()), 0);
  char reason[HUGIFY_REASON_MAX] = "";
  EXPECT_EQ(pool_check_writable_at(root.c_str(), 2 * MiB, -1, reason, sizeof reason), -EACCES);
  EXPECT_NE(std::string(reason).find("is not writable (Permission denied)"), std::string::npos) << reason;
  hugify_pool_result r;
  EXPECT_EQ(pool_set_at(root.c_str(), 2 * MiB, -1, 4000, 0, &r), -EACCES);
  EXPECT_EQ(node_file(0, "hugepages-2048kB"), 1024u); // node 0 comes first and was not written either
  EXPECT_EQ(pool_check_writable_at(root.c_str(), 2 * MiB, 0, reason, sizeof reason), 0); // node 0 alone may be
}

TEST_F(PoolTreeCopy, WhatCannotBeReadIsListed) {
  // A write-only sysctl stands in for a file the caller may not read (refused even to root).
  std::string file = root + "/proc/vmstat";
  ASSERT_EQ(unlink(file.c_str()), 0);
  ASSERT_EQ(symlink("/proc/sys/vm/compact_memory", file.c_str()), 0);
  auto s = std::make_unique<status_snapshot>();
  ASSERT_EQ(status_read(root.c_str(), s.get()), 0);
  EXPECT_FALSE(s->counters_known);
  ASSERT_EQ(s->unreadable_count, 1u);
  EXPECT_STREQ(s->unreadable[0].path, "/proc/vmstat");
  EXPECT_EQ(s->unreadable[0].error, EACCES);
  EXPECT_EQ(s->pool_count, 2u); // the rest is read all the same
  auto text = test_support::hugify({"status", "--root", root});
  EXPECT_EQ(text.status, 0);
  EXPECT_NE(text.out.find("/proc/vmstat: Permission denied"), std::string::npos) << text.out;
}

// ---- persistence texts ------------------------------------------------------------------------------

TEST(PoolPersist, SysctlForTheDefaultSizeCommandLineForTheRest) {
  hugify_pool_request requests[] = {{GiB, -1, 2}, {2 * MiB, -1, 512}};
  char *sysctl = hugify_pool_sysctl_text(requests, 2, 2 * MiB);
  ASSERT_NE(sysctl, nullptr);
  EXPECT_NE(std::string(sysctl).find("\nvm.nr_hugepages = 512\n"), std::string::npos) << sysctl;
  free(sysctl);
  char *cmdline = hugify_pool_cmdline_text(requests, 2, 2 * MiB);
  EXPECT_STREQ(cmdline, "hugepagesz=1G hugepages=2");
  free(cmdline);
  // per node: the command line's node format; no sysctl
  hugify_pool_request per_node[] = {{2 * MiB, 0, 256}, {2 * MiB, 1, 128}, {2 * MiB, 0, 300}};
  errno = 0;
  EXPECT_EQ(hugify_pool_sysctl_text(per_node, 3, 2 * MiB), nullptr);
  EXPECT_EQ(errno, ENOENT);
  cmdline = hugify_pool_cmdline_text(per_node, 3, 2 * MiB);
  EXPECT_STREQ(cmdline, "hugepagesz=2M hugepages=1:128,0:300");
  free(cmdline);
  // a gigantic default size still needs the command line
  hugify_pool_request gigantic[] = {{GiB, -1, 4}};
  EXPECT_EQ(hugify_pool_sysctl_text(gigantic, 1, GiB), nullptr);
  cmdline = hugify_pool_cmdline_text(gigantic, 1, GiB);
  EXPECT_STREQ(cmdline, "hugepagesz=1G hugepages=4");
  free(cmdline);
}

TEST(PoolPersist, MountUnitNamedAsSystemdEscapesThePath) {
  char name[256];
  char *unit = hugify_pool_mount_unit_text(GiB, nullptr, name, sizeof name);
  ASSERT_NE(unit, nullptr);
  EXPECT_STREQ(name, "dev-hugepages1G.mount");
  std::string text = unit;
  free(unit);
  EXPECT_NE(text.find("\nWhere=/dev/hugepages1G\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nType=hugetlbfs\n"), std::string::npos);
  EXPECT_NE(text.find("\nOptions=nosuid,nodev,pagesize=1G,mode=1770,uid=0,gid=0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ConditionPathExists=/sys/kernel/mm/hugepages/hugepages-1048576kB\n"), std::string::npos);
  hugify_mount_opts opts{"/mnt/huge pages/2M-db/", 0750, 112, 118, 8 * GiB, GiB};
  unit = hugify_pool_mount_unit_text(2 * MiB, &opts, name, sizeof name);
  ASSERT_NE(unit, nullptr);
  EXPECT_STREQ(name, "mnt-huge\\x20pages-2M\\x2ddb.mount");
  EXPECT_NE(std::string(unit).find("Options=nosuid,nodev,pagesize=2M,mode=750,uid=112,gid=118,size=8589934592,"
                                   "min_size=1073741824\n"),
            std::string::npos)
      << unit;
  free(unit);
  hugify_mount_opts relative{"mnt/huge"};
  EXPECT_EQ(hugify_pool_mount_unit_text(2 * MiB, &relative, name, sizeof name), nullptr);
  char dir[64];
  hugify_pool_mount_dir(2 * MiB, dir, sizeof dir);
  EXPECT_STREQ(dir, "/dev/hugepages2M");
}

}  // namespace
