// SPDX-License-Identifier: MIT
// hugify status and hugify pool on this machine: status --json against the sysfs/procfs files read here
// directly, pool set/clear round trips that put the pool back as they found it, a request larger than memory,
// a run without privilege (exit 3, nothing changed), bad sizes (exit 2), a real hugetlbfs mount, --watch.
// The pool is shared with other tests: every change is undone at once, and in-use pages are never taken.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hugify.h"
#include "test_support.hpp"

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;
const std::string kSysfs = "/sys/kernel/mm/hugepages/hugepages-";

// ---- JSON, read with jansson (independent of hugify's writer) ----------------------------------------

using json_view = test_support::json_view;

json_view parse_json(const std::string &text) {
  std::string error;
  json_view doc = test_support::parse_json(text, &error);
  EXPECT_TRUE(doc.present()) << error << "\n" << text;
  return doc;
}

// ---- the pool, read directly --------------------------------------------------------------------------

std::string pool_file(uint64_t page_size, const std::string &leaf) {
  return kSysfs + std::to_string(page_size >> 10) + "kB/" + leaf;
}
uint64_t pool_value(uint64_t page_size, const std::string &leaf) {
  return test_support::read_u64(pool_file(page_size, leaf));
}
// The hugetlb page sizes the kernel offers (its hugepages-<N>kB directories), ascending.
std::vector<uint64_t> kernel_pool_sizes() {
  std::vector<uint64_t> sizes;
  for (const auto &entry : std::filesystem::directory_iterator("/sys/kernel/mm/hugepages")) {
    std::string name = entry.path().filename().string();
    if (name.compare(0, 10, "hugepages-") == 0) sizes.push_back(std::strtoull(name.c_str() + 10, nullptr, 10) * KiB);
  }
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}
uint64_t persistent_pages(uint64_t page_size) {
  return pool_value(page_size, "nr_hugepages") - pool_value(page_size, "surplus_hugepages");
}

// Puts the persistent 2M pool back to what it was when the test started, whatever happens in between.
class pool_guard {
 public:
  explicit pool_guard(uint64_t page_size) : size_(page_size), before_(persistent_pages(page_size)) {}
  ~pool_guard() {
    if (persistent_pages(size_) != before_) std::ofstream(pool_file(size_, "nr_hugepages")) << before_;
  }
  uint64_t before() const { return before_; }

 private:
  uint64_t size_, before_;
};

bool root() { return geteuid() == 0; }

std::string choice(const std::string &path) {
  std::string text = test_support::read_file(path);
  size_t open = text.find('['), close = text.find(']');
  if (open == std::string::npos || close == std::string::npos) return text.substr(0, text.find_first_of(" \n"));
  return text.substr(open + 1, close - open - 1);
}

std::map<std::string, uint64_t> vmstat() {
  std::map<std::string, uint64_t> values;
  std::istringstream in(test_support::read_file("/proc/vmstat"));
  std::string key;
  uint64_t value;
  while (in >> key >> value) values[key] = value;
  return values;
}

test_support::command_result as_nobody(const std::vector<std::string> &args) {
  std::vector<std::string> argv{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", HUGIFY_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return test_support::run(argv);
}

bool have_setpriv() { return access("/usr/bin/setpriv", X_OK) == 0 || access("/bin/setpriv", X_OK) == 0; }

// Start hugify with args, its stdout on a pipe (*fd), its stderr to /dev/null; the caller reads and reaps it.
pid_t spawn_hugify(const std::vector<const char *> &args, int *fd) {
  int out[2];
  if (pipe(out) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    std::vector<char *> argv{const_cast<char *>("hugify")};
    for (const char *a : args) argv.push_back(const_cast<char *>(a));
    argv.push_back(nullptr);
    execv(HUGIFY_CLI_PATH, argv.data());
    _exit(127);
  }
  close(out[1]);
  *fd = out[0];
  return pid;
}

// ---- status ---------------------------------------------------------------------------------------------

// The sizes of the hugepages-<N>kB directories under dir (hugetlb pools, or mTHP controls), in bytes.
std::vector<uint64_t> size_dirs(const std::string &dir) {
  std::vector<uint64_t> sizes;
  std::error_code error;
  for (const auto &entry : std::filesystem::directory_iterator(dir, error)) {
    unsigned long long kb;
    if (std::sscanf(entry.path().filename().c_str(), "hugepages-%llukB", &kb) == 1) sizes.push_back(kb * 1024);
  }
  return sizes;
}

// status --json's "thp" against the files, on a kernel that has THP: the mTHP controls only where it has them (6.8+).
void expect_thp_equals_the_kernel_files(const json_view &doc_thp) {
  const std::string thp = "/sys/kernel/mm/transparent_hugepage/";
  EXPECT_EQ(doc_thp["enabled"].text(), choice(thp + "enabled"));
  EXPECT_EQ(doc_thp["defrag"].text(), choice(thp + "defrag"));
  EXPECT_EQ(doc_thp["shmem_enabled"].text(), choice(thp + "shmem_enabled"));
  EXPECT_EQ(doc_thp["pmd_size_bytes"].u64(), test_support::read_u64(thp + "hpage_pmd_size"));
  EXPECT_EQ(doc_thp["use_zero_page"].u64(), test_support::read_u64(thp + "use_zero_page"));
  for (const char *leaf :
       {"pages_to_scan", "scan_sleep_millisecs", "max_ptes_none", "max_ptes_swap", "max_ptes_shared"})
    EXPECT_EQ(doc_thp["khugepaged"][leaf].u64(), test_support::read_u64(thp + "khugepaged/" + leaf)) << leaf;
  const json_view &sizes = doc_thp["sizes"];
  ASSERT_EQ(sizes.size(), size_dirs(thp).size()); // 8K..2M on 6.18 here; none before 6.8
  for (const json_view &m : sizes.items()) {
    std::string dir = thp + "hugepages-" + std::to_string(m["page_size_bytes"].u64() >> 10) + "kB/";
    if (access((dir + "enabled").c_str(), F_OK) == 0) {
      EXPECT_EQ(m["enabled"].text(), choice(dir + "enabled")) << dir;
    } else {
      EXPECT_EQ(m["enabled"].is_null(), true) << dir;
    }
  }
}

TEST(StatusLive, JsonEqualsTheKernelFiles) {
  // The pool can move under us (other tests); take the reading where the files were the same before and after.
  json_view doc;
  bool steady = false;
  std::map<std::string, uint64_t> before_counters, after_counters;
  for (int attempt = 0; attempt < 5 && !steady; attempt++) {
    std::string pools_before;
    for (const char *leaf : {"nr_hugepages", "free_hugepages", "resv_hugepages", "surplus_hugepages"})
      pools_before += test_support::read_file(pool_file(2 * MiB, leaf)) + test_support::read_file(pool_file(GiB, leaf));
    before_counters = vmstat();
    auto result = test_support::hugify({"status", "--json"});
    ASSERT_EQ(result.status, 0) << result.err;
    after_counters = vmstat();
    std::string pools_after;
    for (const char *leaf : {"nr_hugepages", "free_hugepages", "resv_hugepages", "surplus_hugepages"})
      pools_after += test_support::read_file(pool_file(2 * MiB, leaf)) + test_support::read_file(pool_file(GiB, leaf));
    doc = parse_json(result.out);
    steady = pools_before == pools_after;
  }
  ASSERT_TRUE(steady) << "the pool kept changing while status ran";
  EXPECT_EQ(doc["schema"].text(), "hugify.status/2");
  EXPECT_EQ(doc["kernel"].text() + "\n", test_support::read_file("/proc/sys/kernel/osrelease"));

  const json_view &pools = doc["hugetlb"]["pools"];
  ASSERT_EQ(pools.size(), size_dirs("/sys/kernel/mm/hugepages").size()); // 2M and 1G here; a guest may lack 1G
  for (const json_view &p : pools.items()) {
    uint64_t size = p["page_size_bytes"].u64();
    SCOPED_TRACE(size);
    EXPECT_EQ(p["total"].u64(), pool_value(size, "nr_hugepages"));
    EXPECT_EQ(p["free"].u64(), pool_value(size, "free_hugepages"));
    EXPECT_EQ(p["reserved"].u64(), pool_value(size, "resv_hugepages"));
    EXPECT_EQ(p["surplus"].u64(), pool_value(size, "surplus_hugepages"));
    EXPECT_EQ(p["overcommit"].u64(), pool_value(size, "nr_overcommit_hugepages"));
    EXPECT_EQ(p["total_bytes"].u64(), p["total"].u64() * size);
    ASSERT_EQ(p["nodes"].size(), 1u);
    EXPECT_EQ(p["nodes"][0]["total"].u64(),
              test_support::read_u64("/sys/devices/system/node/node0/hugepages/hugepages-" +
                                     std::to_string(size >> 10) + "kB/nr_hugepages"));
  }
  std::string meminfo = test_support::read_file("/proc/meminfo");
  uint64_t default_kb = std::strtoull(meminfo.c_str() + meminfo.find("Hugepagesize:") + 13, nullptr, 10);
  EXPECT_EQ(doc["hugetlb"]["default_page_size_bytes"].u64(), default_kb * 1024);

  const std::string thp = "/sys/kernel/mm/transparent_hugepage/";
  EXPECT_EQ(doc["thp"]["present"].flag(), access(thp.c_str(), F_OK) == 0);
  if (access(thp.c_str(), F_OK) == 0) expect_thp_equals_the_kernel_files(doc["thp"]);
  // Counters move all the time: each lies between what was read before and after.
  for (const auto &member : doc["counters"].members()) {
    EXPECT_GE(member.second.u64(), before_counters.at(member.first)) << member.first;
    EXPECT_LE(member.second.u64(), after_counters.at(member.first)) << member.first;
  }
  EXPECT_GE(doc["counters"].size(), doc["thp"]["present"].flag() ? 20u : 4u); // compaction and hugetlb without THP

  int hugetlbfs = 0;
  std::istringstream mounts(test_support::read_file("/proc/mounts"));
  std::string line;
  while (std::getline(mounts, line)) hugetlbfs += line.find(" hugetlbfs ") != std::string::npos;
  EXPECT_EQ(doc["hugetlb"]["mounts"].size(), static_cast<size_t>(hugetlbfs));

  struct rlimit memlock;
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &memlock), 0);
  if (memlock.rlim_cur == RLIM_INFINITY) {
    EXPECT_EQ(doc["limits"]["memlock_soft_bytes"].text(), "max");
  } else {
    EXPECT_EQ(doc["limits"]["memlock_soft_bytes"].u64(), memlock.rlim_cur);
  }

  EXPECT_EQ(doc["features"]["can_change_pools"].flag(), root());
  EXPECT_EQ(doc["cgroup"]["version"].u64(), 2u);
  std::string buddyinfo = test_support::read_file("/proc/buddyinfo");
  EXPECT_EQ(doc["fragmentation"]["zones"].size(),
            static_cast<size_t>(std::count(buddyinfo.begin(), buddyinfo.end(), '\n')));
  for (const json_view &d : doc["diagnoses"].items()) {
    EXPECT_FALSE(d["id"].text().empty());
    EXPECT_TRUE(d["severity"].text() == "warning" || d["severity"].text() == "note");
  }
}

// Each kernel feature status lists is this kernel's, told apart here without libhugify: the files, or the call
// tried once more. A "no" names the first version that has it (or, without THP, that THP is not built in).
TEST(StatusLive, KernelFeaturesAreThisKernels) {
  auto result = test_support::hugify({"status", "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  json_view doc = parse_json(result.out);
  std::map<std::string, json_view> features;
  for (const json_view &f : doc["kernel_features"].items()) features[f["id"].text()] = f;
  for (const char *id : {"thp", "madv_collapse", "process_madvise", "process_madvise_collapse", "pagemap_scan", "mthp",
                         "thp_disable_except_advised", "damon_vaddr", "soft_dirty", "page_idle", "file_thp_text"}) {
    SCOPED_TRACE(id);
    ASSERT_TRUE(features.count(id));
    const json_view &f = features[id];
    EXPECT_EQ(doc["features"][id].text(), f["state"].text());
    EXPECT_FALSE(f["source"].text().empty());
    EXPECT_FALSE(f["since"].text().empty());
  }
  auto state = [&](const char *id) { return features[id]["state"].text(); };
  auto yes_if = [](bool there) { return std::string(there ? "yes" : "no"); };
  const std::string thp = "/sys/kernel/mm/transparent_hugepage";
  bool has_thp = access(thp.c_str(), F_OK) == 0;
  EXPECT_EQ(state("thp"), yes_if(has_thp));
  EXPECT_EQ(state("mthp"), yes_if(has_thp && !size_dirs(thp).empty()));
  EXPECT_EQ(state("page_idle"), yes_if(access("/sys/kernel/mm/page_idle/bitmap", F_OK) == 0));
  if (access("/sys/kernel/mm/damon/admin", F_OK) != 0) {
    EXPECT_EQ(state("damon_vaddr"), "no");
  }
  // MADV_COLLAPSE: the kernel rejects advice it does not know with EINVAL
  void *scratch = mmap(nullptr, 4 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(scratch, MAP_FAILED);
  auto *window = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(scratch) + 2 * MiB - 1) & ~(2 * MiB - 1));
  window[0] = 1;
  bool collapse_known = madvise(window, 2 * MiB, 25 /* MADV_COLLAPSE */) == 0 || errno != EINVAL;
  munmap(scratch, 4 * MiB);
  EXPECT_EQ(state("madv_collapse"), yes_if(has_thp && collapse_known));
  if (!has_thp) {
    EXPECT_NE(features["madv_collapse"]["detail"].text().find("CONFIG_TRANSPARENT_HUGEPAGE"), std::string::npos);
  } else if (!collapse_known) {
    EXPECT_EQ(features["madv_collapse"]["since"].text(), "6.1");
  }
  // the except-advised flag of PR_SET_THP_DISABLE, in a child: EINVAL where the kernel does not know it
  pid_t child = fork();
  if (child == 0) _exit(prctl(PR_SET_THP_DISABLE, 1, 1 << 1, 0, 0) == 0 ? 0 : errno == EINVAL ? 1 : 2);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) < 2);
  EXPECT_EQ(state("thp_disable_except_advised"), yes_if(WEXITSTATUS(status) == 0));
  // the text says each, with where the answer comes from
  auto text = test_support::hugify({"status"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("Kernel features hugify uses"), std::string::npos) << text.out;
  for (const auto &f : features) {
    EXPECT_NE(text.out.find(f.second["name"].text()), std::string::npos) << f.first;
    EXPECT_NE(text.out.find(f.second["source"].text()), std::string::npos) << f.first;
  }
}

// status on a kernel without THP (Debian 12's PREEMPT_RT 6.1, as a captured tree): it works, says THP is not
// built in and that hugetlb is the road, and blames no kernel version for MADV_COLLAPSE.
TEST(StatusTree, KernelWithoutThpSaysHugetlbIsTheRoad) {
  std::string root = std::string(HUGIFY_FIXTURES_DIR) + "/pool/debian12-6.1-rt";
  auto text = test_support::hugify({"status", "--root", root});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("THP is not built into this kernel (CONFIG_TRANSPARENT_HUGEPAGE"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("hugify run --heap hugetlb"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("needs Linux 6.1"), std::string::npos) << text.out;
  auto json = test_support::hugify({"status", "--root", root, "--json"});
  ASSERT_EQ(json.status, 0) << json.err;
  json_view doc = parse_json(json.out);
  EXPECT_FALSE(doc["thp"]["present"].flag());
  EXPECT_EQ(doc["features"]["thp"].text(), "no");
  EXPECT_EQ(doc["features"]["madv_collapse"].text(), "no");
  EXPECT_EQ(doc["features"]["mthp"].text(), "no");
  EXPECT_EQ(doc["features"]["pagemap_scan"].text(), "unknown"); // a call: a tree cannot answer it
  ASSERT_EQ(doc["diagnoses"].size(), 1u);
  EXPECT_EQ(doc["diagnoses"][0]["id"].text(), "thp_absent");
}

TEST(StatusLive, TextNamesEverySection) {
  auto result = test_support::hugify({"status"});
  ASSERT_EQ(result.status, 0) << result.err;
  std::vector<const char *> sections = {"hugetlb pools", "hugetlbfs mounts", "Transparent huge pages", "In use",
                                       "Counters since boot", "Fragmentation", "could be reserved now",
                                       "Boot parameters", "memlock limit", "cgroup v2", "Kernel features hugify uses",
                                       "Diagnoses"};
  if (access("/sys/kernel/mm/transparent_hugepage", F_OK) == 0) {
    sections.insert(sections.end(), {"per size (mTHP)", "khugepaged"});
  } else {
    sections.insert(sections.end(), {"not built into this kernel", "hugify run --heap hugetlb"});
  }
  for (const char *section : sections)
    EXPECT_NE(result.out.find(section), std::string::npos) << section << "\n" << result.out;
}

TEST(StatusLive, WorksWithoutRoot) {
  if (!have_setpriv()) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  auto result = as_nobody({"status", "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  json_view doc = parse_json(result.out);
  EXPECT_FALSE(doc["features"]["can_change_pools"].flag());
  EXPECT_GE(doc["hugetlb"]["pools"].size(), 2u);
  EXPECT_TRUE(doc.has("unreadable"));
  auto text = as_nobody({"status"});
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("may change pools: no"), std::string::npos) << text.out;
}

TEST(StatusLive, WatchPrintsDeltasThatFollowTheCounters) {
  // Start the watch, wait for its first document, then fault in THP memory: the deltas must show it.
  int fd;
  pid_t pid = spawn_hugify({"status", "--json", "--watch", "0.5", "--count", "3"}, &fd);
  ASSERT_GT(pid, 0);
  std::string text;
  char buf[65536];
  ssize_t n;
  bool faulted = false;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    text.append(buf, static_cast<size_t>(n));
    if (!faulted && text.find("\n}\n") != std::string::npos) {
      faulted = true;
      size_t length = 64 * MiB;
      char *p = static_cast<char *>(
          mmap(nullptr, length + 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      ASSERT_NE(p, MAP_FAILED);
      char *aligned = reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(p) + 2 * MiB - 1) & ~(2 * MiB - 1));
      madvise(aligned, length, MADV_HUGEPAGE);
      memset(aligned, 1, length);
      munmap(p, length + 2 * MiB);
    }
  }
  close(fd);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;
  std::string error;
  auto docs = test_support::parse_json_documents(text, &error);
  EXPECT_EQ(error, "") << text;
  ASSERT_EQ(docs.size(), 4u) << text; // the status, then three intervals
  EXPECT_EQ(docs[0]["schema"].text(), "hugify.status/2");
  uint64_t faults = 0;
  for (size_t i = 1; i < docs.size(); i++) {
    EXPECT_EQ(docs[i]["schema"].text(), "hugify.status.watch/2");
    EXPECT_EQ(docs[i]["interval"].u64(), i);
    EXPECT_GE(docs[i]["elapsed_seconds"].number(), 0.5 * static_cast<double>(i) - 0.01);
    faults += docs[i]["counters"]["thp_fault_alloc"].u64();
    EXPECT_GE(docs[i]["pools"].size(), 2u);
  }
  EXPECT_GE(faults, 32u) << "64 MiB of MADV_HUGEPAGE memory faulted in during the watch";
}

TEST(StatusLive, WatchStopsOnInterrupt) {
  int fd;
  pid_t pid = spawn_hugify({"status", "--watch", "0.2"}, &fd);
  ASSERT_GT(pid, 0);
  std::string text;
  char buf[65536];
  ssize_t n;
  while (text.find("[1, +") == std::string::npos && (n = read(fd, buf, sizeof buf)) > 0)
    text.append(buf, static_cast<size_t>(n));
  kill(pid, SIGINT);
  while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(fd);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status)) << "killed by the signal instead of stopping";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(text.find("Changes every 0.2 s"), std::string::npos) << text;
  EXPECT_NE(text.find("2M pool"), std::string::npos) << text;
}

TEST(StatusLive, BadUsage) {
  EXPECT_EQ(test_support::hugify({"status", "--watch", "0"}).status, 2);
  EXPECT_EQ(test_support::hugify({"status", "--count", "3"}).status, 2);
  EXPECT_EQ(test_support::hugify({"status", "--bogus"}).status, 2);
  auto help = test_support::hugify({"help", "status"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("Examples:"), std::string::npos);
}

// ---- pool -------------------------------------------------------------------------------------------

TEST(PoolLive, SetAndRestoreRoundTrip) {
  if (!root()) GTEST_SKIP() << "changing the pool needs root";
  pool_guard guard(2 * MiB);
  uint64_t before = guard.before();
  auto grow = test_support::hugify({"pool", "set", "2M=" + std::to_string(before + 8), "--json"});
  ASSERT_EQ(grow.status, 0) << grow.out << grow.err;
  EXPECT_EQ(persistent_pages(2 * MiB), before + 8);
  json_view doc = parse_json(grow.out);
  ASSERT_EQ(doc["results"].size(), 1u);
  const json_view &r = doc["results"][0];
  EXPECT_EQ(r["before"].u64(), before);
  EXPECT_EQ(r["requested"].u64(), before + 8);
  EXPECT_EQ(r["got"].u64(), before + 8);
  EXPECT_EQ(r["short"].u64(), 0u);
  EXPECT_TRUE(r["filled"].flag());
  ASSERT_EQ(r["nodes"].size(), 1u);
  EXPECT_EQ(r["nodes"][0]["got"].u64(), before + 8);
  // Same pool through --bytes and the other spellings of the size.
  auto bytes =
      test_support::hugify({"pool", "set", "--bytes", std::to_string((before + 4) * 2) + "M", "--size", "2048kB"});
  ASSERT_EQ(bytes.status, 0) << bytes.out << bytes.err;
  EXPECT_EQ(persistent_pages(2 * MiB), before + 4);
  auto restore = test_support::hugify({"pool", "set", "2MB=" + std::to_string(before)});
  ASSERT_EQ(restore.status, 0) << restore.out << restore.err;
  EXPECT_EQ(persistent_pages(2 * MiB), before);
}

TEST(PoolLive, PublicApiReadsSetsAndReadsBack) {
  hugify_pool pools[HUGIFY_MAX_HUGETLB_SIZES];
  int count = hugify_pool_list(pools, HUGIFY_MAX_HUGETLB_SIZES);
  ASSERT_GE(count, 2);
  EXPECT_EQ(pools[0].global.page_size, 2 * MiB);
  EXPECT_EQ(pools[1].global.page_size, GiB);
  hugify_pool one;
  ASSERT_EQ(hugify_pool_read(GiB, &one), 0);
  EXPECT_EQ(one.global.overcommit, pool_value(GiB, "nr_overcommit_hugepages"));
  ASSERT_EQ(one.node_count, 1u);
  EXPECT_EQ(hugify_pool_read(3 * MiB, &one), -EINVAL);
  hugify_pool_result r;
  ASSERT_EQ(hugify_pool_set(2 * MiB, -1, 1234, HUGIFY_POOL_DRY_RUN, &r), 0) << r.reason;
  EXPECT_EQ(r.requested, 1234u);
  EXPECT_EQ(r.got, r.before); // nothing written
  if (!root()) GTEST_SKIP() << "setting the pool needs root";
  pool_guard guard(2 * MiB);
  ASSERT_EQ(hugify_pool_set(2 * MiB, 0, guard.before() + 2, 0, &r), 0) << r.reason;
  EXPECT_EQ(persistent_pages(2 * MiB), guard.before() + 2);
  EXPECT_EQ(r.nodes[0].got, guard.before() + 2);
  ASSERT_EQ(hugify_pool_set(2 * MiB, -1, guard.before(), 0, &r), 0) << r.reason;
  EXPECT_EQ(persistent_pages(2 * MiB), guard.before());
}

TEST(PoolLive, ClearRoundTripLeavesPagesInUse) {
  if (!root()) GTEST_SKIP() << "changing the pool needs root";
  pool_guard guard(2 * MiB);
  uint64_t before = guard.before();
  ASSERT_EQ(test_support::hugify({"pool", "set", "2M=" + std::to_string(before + 2)}).status, 0);
  // Hold two pages, as another program would: clearing must not take them.
  size_t length = 4 * MiB;
  void *held = mmap(nullptr, length, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (21 << MAP_HUGE_SHIFT), -1, 0);
  ASSERT_NE(held, MAP_FAILED);
  memset(held, 7, length);
  auto clear = test_support::hugify({"pool", "clear", "--size", "2M", "--json"});
  uint64_t after_clear = persistent_pages(2 * MiB), surplus = pool_value(2 * MiB, "surplus_hugepages");
  auto restore = test_support::hugify({"pool", "set", "2M=" + std::to_string(before)}); // at once
  EXPECT_EQ(restore.status, 0) << restore.err;
  EXPECT_EQ(persistent_pages(2 * MiB), before);
  ASSERT_EQ(clear.status, 0) << clear.out << clear.err;
  EXPECT_EQ(after_clear, 0u);
  EXPECT_GE(surplus, 2u); // the held pages (and anyone else's) stayed, as surplus
  EXPECT_EQ(static_cast<char *>(held)[length - 1], 7);
  json_view doc = parse_json(clear.out);
  EXPECT_EQ(doc["command"].text(), "clear");
  EXPECT_EQ(doc["results"][0]["got"].u64(), 0u);
  EXPECT_GE(doc["results"][0]["surplus"].u64(), 2u);
  munmap(held, length);
}

TEST(PoolLive, LargerThanMemoryIsShortAndWritesNothing) {
  if (!root()) GTEST_SKIP() << "the plan is checked before privilege only for root's exit code";
  std::string meminfo = test_support::read_file("/proc/meminfo");
  uint64_t total_kb = std::strtoull(meminfo.c_str() + meminfo.find("MemTotal:") + 9, nullptr, 10);
  uint64_t too_many = total_kb * 1024 / (2 * MiB) + 100;
  uint64_t before = pool_value(2 * MiB, "nr_hugepages");
  auto result = test_support::hugify({"pool", "set", "2M=" + std::to_string(too_many), "--json"});
  EXPECT_EQ(result.status, 1) << result.out << result.err;
  EXPECT_EQ(pool_value(2 * MiB, "nr_hugepages"), before);
  EXPECT_NE(result.err.find("do not fit"), std::string::npos) << result.err;
  json_view doc = parse_json(result.out);
  EXPECT_FALSE(doc["written"].flag());
  const json_view &r = doc["results"][0];
  EXPECT_TRUE(r["beyond_memory"].flag());
  EXPECT_FALSE(r["filled"].flag());
  EXPECT_GE(r["short"].u64(), 100u);
  ASSERT_EQ(r["nodes"].size(), 1u);
  EXPECT_EQ(r["nodes"][0]["requested"].u64(), too_many);
  EXPECT_EQ(r["nodes"][0]["short"].u64(), too_many - r["nodes"][0]["got"].u64());
  // In text: the shortfall per node, and the exit status
  auto text = test_support::hugify({"pool", "set", "1G=" + std::to_string(total_kb / (1024 * 1024) + 2)});
  EXPECT_EQ(text.status, 1);
  EXPECT_NE(text.out.find("Nothing written"), std::string::npos) << text.out;
}

TEST(PoolLive, WithoutPrivilegeExit3AndNothingChanges) {
  if (!have_setpriv()) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  uint64_t two = pool_value(2 * MiB, "nr_hugepages"), one = pool_value(GiB, "nr_hugepages");
  auto set = as_nobody({"pool", "set", "2M=" + std::to_string(two + 8), "1G=" + std::to_string(one)});
  EXPECT_EQ(set.status, 3) << set.out << set.err;
  EXPECT_NE(set.err.find("needs root"), std::string::npos) << set.err;
  EXPECT_NE(set.err.find("Nothing was written"), std::string::npos) << set.err;
  auto clear = as_nobody({"pool", "clear"});
  EXPECT_EQ(clear.status, 3) << clear.err;
  EXPECT_EQ(pool_value(2 * MiB, "nr_hugepages"), two);
  EXPECT_EQ(pool_value(GiB, "nr_hugepages"), one);
  std::string dir = "/tmp/hugify-pool-nobody-" + std::to_string(getpid());
  auto mount = as_nobody({"pool", "mount", "--size", "2M", "--dir", dir});
  EXPECT_EQ(mount.status, 3) << mount.err;
  EXPECT_NE(access(dir.c_str(), F_OK), 0) << "the mount point was left behind";
  auto persist = as_nobody({"pool", "set", "2M=" + std::to_string(two), "--persist"});
  EXPECT_EQ(persist.status, 3) << persist.err;
  // Without privilege a dry run still shows the plan.
  auto dry = as_nobody({"pool", "set", "2M=" + std::to_string(two + 8), "--dry-run"});
  EXPECT_EQ(dry.status, 0) << dry.err;
  EXPECT_NE(dry.out.find("Dry run"), std::string::npos);
  EXPECT_EQ(pool_value(2 * MiB, "nr_hugepages"), two);
}

TEST(PoolLive, BadSizesAndCountsExit2WithTheAcceptedForms) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"pool", "set", "3M=1"}, {"pool", "set", "2M=+x"}, {"pool", "set", "2M=abc"}, {"pool", "set", "2M"},
           {"pool", "set", "--bytes", "12Q"}, {"pool", "set", "2X=4"}, {"pool", "clear", "--size", "5M"},
           {"pool", "set", "2M=4", "--node", "9"}}) {
    auto result = test_support::hugify(args);
    EXPECT_EQ(result.status, 2) << args[2] << ": " << result.err;
    if (args.back() != "9") {
      EXPECT_NE(result.err.find("Accepted: SIZE=COUNT"), std::string::npos) << result.err;
    }
  }
  auto node = test_support::hugify({"pool", "set", "2M=4", "--node", "9"});
  EXPECT_NE(node.err.find("no node 9"), std::string::npos) << node.err;
  auto verb = test_support::hugify({"pool", "fill"});
  EXPECT_EQ(verb.status, 2);
  auto help = test_support::hugify({"pool", "--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("Examples:"), std::string::npos);
}

// SIZE=+N / SIZE=-N: relative to the persistent pool as it is (what a program's hugetlb shared memory needs
// on top of what is there, e.g. PostgreSQL's shared_memory_size_in_huge_pages).
TEST(PoolLive, RelativeCountsArePlannedFromThePoolAsItIs) {
  uint64_t two = pool_value(2 * MiB, "nr_hugepages");
  auto more = test_support::hugify({"pool", "set", "2M=+8", "--dry-run", "--json"});
  ASSERT_EQ(more.status, 0) << more.err;
  json_view doc = parse_json(more.out);
  EXPECT_EQ(doc["results"][0]["before"].u64(), two);
  EXPECT_EQ(doc["results"][0]["requested"].u64(), two + 8);
  if (two >= 4) {
    auto fewer = test_support::hugify({"pool", "set", "2M=-4", "--dry-run", "--json"});
    ASSERT_EQ(fewer.status, 0) << fewer.err;
    EXPECT_EQ(parse_json(fewer.out)["results"][0]["requested"].u64(), two - 4);
  }
  auto too_many = test_support::hugify({"pool", "set", "2M=-" + std::to_string(two + 1), "--dry-run"});
  EXPECT_EQ(too_many.status, 2) << too_many.err;
  EXPECT_NE(too_many.err.find("the pool has only"), std::string::npos) << too_many.err;
  EXPECT_EQ(pool_value(2 * MiB, "nr_hugepages"), two) << "a dry run writes nothing";
}

TEST(PoolLive, DryRunPlansAndShowsThePersistDiff) {
  // The default size's pool: the one vm.nr_hugepages sets (2 MiB on x86-64, 32 MiB on arm64's 16 KiB pages).
  uint64_t size = test_support::default_hugetlb_size();
  std::string size_name = test_support::size_arg(size);
  uint64_t two = pool_value(size, "nr_hugepages");
  bool had_sysctl = access("/etc/sysctl.d/80-hugify.conf", F_OK) == 0;
  // Plans only what fits this machine: a guest (scripts/kernels) has a few GiB, and its emulated CPU may have no
  // 1G pages (no pdpe1gb: no hugepages-1048576kB), where 8G or 1G=2 is rightly refused.
  std::string meminfo = test_support::read_file("/proc/meminfo");
  uint64_t memory = std::strtoull(meminfo.c_str() + meminfo.find("MemTotal:") + 9, nullptr, 10) * KiB;
  bool gigantic = access(pool_file(GiB, "nr_hugepages").c_str(), F_OK) == 0 && memory >= 8 * GiB;
  std::vector<std::string> args = {"pool", "set", size_name + "=" + std::to_string(two + 16), "--persist", "--dry-run"};
  if (gigantic) args.push_back("1G=2");
  auto result = test_support::hugify(args);
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(pool_value(size, "nr_hugepages"), two);
  EXPECT_EQ(access("/etc/sysctl.d/80-hugify.conf", F_OK) == 0, had_sysctl);
  EXPECT_NE(result.out.find("+vm.nr_hugepages = " + std::to_string(two + 16)), std::string::npos) << result.out;
  if (gigantic) {
    EXPECT_NE(result.out.find("hugepagesz=1G hugepages=2"), std::string::npos) << result.out;
    // 1G is planned before the smaller size (bigger pages first, while memory is least fragmented)
    EXPECT_LT(result.out.find("\n1G "), result.out.find("\n" + size_name + " ")) << result.out;
  }
  uint64_t bytes = std::min<uint64_t>(8 * GiB, memory / 4 / size * size); // 8G here
  auto json = test_support::hugify({"pool", "set", "--bytes", std::to_string(bytes / MiB) + "M", "--dry-run", "--json"});
  ASSERT_EQ(json.status, 0) << json.err;
  json_view doc = parse_json(json.out);
  EXPECT_TRUE(doc["dry_run"].flag());
  EXPECT_EQ(doc["results"][0]["requested"].u64(), bytes / size);
  EXPECT_EQ(doc["results"][0]["got"].is_null(), true);
}

TEST(PoolLive, ShowEqualsTheKernelFiles) {
  auto result = test_support::hugify({"pool", "show", "--json"});
  ASSERT_EQ(result.status, 0) << result.err;
  json_view doc = parse_json(result.out);
  EXPECT_EQ(doc["schema"].text(), "hugify.pool/2");
  // Every size the kernel lists, in ascending order: 2M and 1G on x86-64; 64K, 2M, 32M and 1G on arm64's
  // 4 KiB pages; 2M, 32M and 1G on its 16 KiB pages.
  std::vector<uint64_t> sizes = kernel_pool_sizes();
  ASSERT_GE(sizes.size(), 2u);
  ASSERT_EQ(doc["pools"].size(), sizes.size()) << result.out;
  for (size_t i = 0; i < sizes.size(); i++) {
    EXPECT_EQ(doc["pools"][i]["page_size_bytes"].u64(), sizes[i]) << i;
    EXPECT_EQ(doc["pools"][i]["overcommit"].u64(), pool_value(sizes[i], "nr_overcommit_hugepages")) << i;
  }
  auto text = test_support::hugify({"pool"});
  EXPECT_EQ(text.status, 0);
  EXPECT_NE(text.out.find(test_support::size_arg(test_support::default_hugetlb_size()) + " (default)"), std::string::npos) << text.out;
}

TEST(PoolLive, MountsHugetlbfsOfASize) {
  if (!root()) GTEST_SKIP() << "mounting needs CAP_SYS_ADMIN";
  char dir_template[] = "/tmp/hugify-pool-mount-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  std::string dir = std::string(dir_template) + "/2M";
  struct cleanup {
    std::string dir, parent;
    ~cleanup() {
      umount2(dir.c_str(), MNT_DETACH);
      rmdir(dir.c_str());
      rmdir(parent.c_str());
    }
  } cleanup{dir, dir_template};
  auto result = test_support::hugify({"pool", "mount", "--size", "2M", "--dir", dir, "--mode", "1770", "--gid", "100",
                                      "--max-size", "16M", "--json"});
  ASSERT_EQ(result.status, 0) << result.out << result.err;
  std::string line;
  {
    std::istringstream mounts(test_support::read_file("/proc/mounts"));
    while (std::getline(mounts, line) && line.find(" " + dir + " ") == std::string::npos) {}
  }
  auto again = test_support::hugify({"pool", "mount", "--size", "2M", "--dir", dir});
  auto status = test_support::hugify({"status", "--json"});
  auto other = test_support::hugify({"pool", "mount", "--size", "1G", "--dir", dir});
  EXPECT_NE(line.find(" hugetlbfs "), std::string::npos) << line;
  EXPECT_NE(line.find("pagesize=2M"), std::string::npos) << line;
  EXPECT_NE(line.find("size=16777216"), std::string::npos) << line;
  EXPECT_NE(line.find("mode=1770"), std::string::npos) << line;
  EXPECT_NE(line.find("gid=100"), std::string::npos) << line;
  EXPECT_NE(line.find("nosuid"), std::string::npos) << line;
  EXPECT_TRUE(parse_json(result.out)["mounted"].flag());
  EXPECT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("already mounted"), std::string::npos) << again.out;
  EXPECT_EQ(other.status, 1) << other.err; // a 2M hugetlbfs is there already
  json_view doc = parse_json(status.out);
  bool listed = false;
  for (const json_view &m : doc["hugetlb"]["mounts"].items())
    if (m["path"].text() == dir) {
      listed = true;
      EXPECT_EQ(m["page_size_bytes"].u64(), 2 * MiB);
      EXPECT_EQ(m["size_limit_bytes"].u64(), 16 * MiB);
      EXPECT_EQ(m["mode"].text(), "1770");
      EXPECT_EQ(m["gid"].u64(), 100u);
    }
  EXPECT_TRUE(listed) << status.out;
}

TEST(PoolLive, PersistWritesFilesUnderARoot) {
  // A copy of this machine's captured tree stands in for / : the files land under it.
  char dir[] = "/tmp/hugify-pool-persist-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string root_dir = dir;
  ASSERT_EQ(test_support::run({"cp", "-r", std::string(HUGIFY_FIXTURES_DIR) + "/pool/kvm-6.18/.", root_dir}).status, 0);
  auto set = test_support::hugify({"pool", "set", "2M=48", "1G=1", "--persist", "--root", root_dir});
  auto mount = test_support::hugify({"pool", "mount", "--size", "1G", "--persist", "--root", root_dir});
  std::string sysctl = test_support::read_file(root_dir + "/etc/sysctl.d/80-hugify.conf");
  std::string unit = test_support::read_file(root_dir + "/etc/systemd/system/dev-hugepages1G.mount");
  uint64_t total = test_support::read_u64(root_dir + "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
  auto again = test_support::hugify({"pool", "set", "2M=48", "--persist", "--dry-run", "--root", root_dir});
  test_support::run({"rm", "-rf", root_dir});
  EXPECT_EQ(set.status, 0) << set.out << set.err;
  EXPECT_EQ(total, 48u);
  EXPECT_NE(sysctl.find("\nvm.nr_hugepages = 48\n"), std::string::npos) << sysctl;
  EXPECT_NE(set.out.find("hugepagesz=1G hugepages=1"), std::string::npos) << set.out;
  EXPECT_EQ(mount.status, 0) << mount.out << mount.err;
  EXPECT_NE(unit.find("Where=/dev/hugepages1G"), std::string::npos) << unit;
  EXPECT_NE(mount.out.find("systemctl enable dev-hugepages1G.mount"), std::string::npos) << mount.out;
  EXPECT_NE(again.out.find("is up to date"), std::string::npos) << again.out;
}

}  // namespace
