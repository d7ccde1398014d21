// SPDX-License-Identifier: MIT
// hugify.hpp on real memory: hugify::allocator with std::vector, std::unordered_map and
// absl::flat_hash_map; hugify::memory_resource under std::pmr containers with a million nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <list>
#include <memory>
#include <memory_resource>
#include <numeric>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "hugify.hpp"
#include "test_support.hpp"

#if HUGIFY_HAVE_ABSL
#include <absl/container/flat_hash_map.h>
#endif

namespace {

constexpr size_t MiB = size_t{1} << 20;
constexpr uint64_t k2M = uint64_t{2} << 20, k1G = uint64_t{1} << 30;

// Huge-page bytes of a range by an independent read of /proc/self/smaps (not libhugify's parser).
uint64_t smaps_huge_bytes(const void *p, size_t size) {
  uintptr_t at = reinterpret_cast<uintptr_t>(p);
  return test_support::smaps_field(0, at, size, "AnonHugePages") +
         test_support::smaps_field(0, at, size, "Private_Hugetlb") +
         test_support::smaps_field(0, at, size, "Shared_Hugetlb");
}

// What smaps counts as resident there: Rss, which leaves hugetlb pages out, and the hugetlb pages.
uint64_t smaps_resident_bytes(const void *p, size_t size) {
  uintptr_t at = reinterpret_cast<uintptr_t>(p);
  return test_support::smaps_field(0, at, size, "Rss") + test_support::smaps_field(0, at, size, "Private_Hugetlb") +
         test_support::smaps_field(0, at, size, "Shared_Hugetlb");
}

struct hugify_backing backing_of(const void *p, size_t size) {
  struct hugify_backing b{};
  EXPECT_EQ(hugify_measure_backing(p, size, &b), 0);
  return b;
}

// ---- hugify::allocator -------------------------------------------------------------------------------

TEST(CxxAllocator, VectorOf256MiBIsOnHugePages) {
  const size_t count = 256 * MiB / sizeof(uint64_t);
  size_t live = hugify_live_blocks();
  std::vector<uint64_t, hugify::allocator<uint64_t>> v(count);
  EXPECT_EQ(hugify_live_blocks(), live + 1);
  std::iota(v.begin(), v.end(), uint64_t{0});
  const size_t bytes = count * sizeof(uint64_t);
  struct hugify_backing b = backing_of(v.data(), bytes);
  EXPECT_GE(hugify_backing_huge_fraction(&b), 0.95) << "4K " << b.resident_4k << " THP " << b.resident_thp
                                                    << " 2M " << b.resident_2m << " 1G " << b.resident_1g;
  EXPECT_GE(static_cast<double>(b.resident_thp + b.resident_2m + b.resident_1g), 0.95 * static_cast<double>(bytes));
  EXPECT_GE(static_cast<double>(smaps_huge_bytes(v.data(), bytes)), 0.95 * static_cast<double>(bytes))
      << "independent smaps read (AnonHugePages + Private_Hugetlb + Shared_Hugetlb)";
  EXPECT_EQ(v[count - 1], count - 1);
  EXPECT_EQ(std::accumulate(v.begin(), v.end(), uint64_t{0}), uint64_t{count} * (count - 1) / 2);
  v.clear();
  v.shrink_to_fit();
  EXPECT_EQ(hugify_live_blocks(), live);
}

TEST(CxxAllocator, ThpOnlyPolicyGivesThp) {
  const size_t bytes = 64 * MiB;
  std::vector<char, hugify::allocator<char, hugify::populate<hugify::thp_only>>> v(bytes, 'x');
  struct hugify_backing b = backing_of(v.data(), bytes);
  EXPECT_GE(static_cast<double>(b.resident_thp), 0.95 * static_cast<double>(bytes));
  EXPECT_EQ(b.resident_2m + b.resident_1g, 0u);
  EXPECT_GE(static_cast<double>(test_support::smaps_field(0, reinterpret_cast<uintptr_t>(v.data()), bytes, "AnonHugePages")),
            0.95 * static_cast<double>(bytes));
}

TEST(CxxAllocator, Hugetlb2MPolicyGivesPoolPages) {
  std::string why = test_support::ensure_free_hugetlb(k2M, 16);
  if (!why.empty()) GTEST_SKIP() << why;
  const size_t bytes = 32 * MiB;
  std::vector<char, hugify::allocator<char, hugify::strict<hugify::hugetlb_2m>>> v(bytes, 'y');
  struct hugify_backing b = backing_of(v.data(), bytes);
  EXPECT_EQ(b.resident_2m, bytes);
  EXPECT_EQ(test_support::smaps_field(0, reinterpret_cast<uintptr_t>(v.data()), bytes, "Private_Hugetlb"), bytes);
}

TEST(CxxAllocator, Hugetlb1GPolicyGivesA1GPage) {
  std::string why = test_support::ensure_free_hugetlb(k1G, 1);
  if (!why.empty()) GTEST_SKIP() << why;
  const size_t bytes = 4 * MiB; // an explicit chain is tried whatever the size: one whole 1 GiB page
  std::vector<char, hugify::allocator<char, hugify::strict<hugify::hugetlb_1g>>> v(bytes, 'z');
  struct hugify_backing b = backing_of(v.data(), bytes);
  EXPECT_EQ(b.resident_1g, bytes);
}

TEST(CxxAllocator, StrictPolicyThrowsWithTheReasonWhenThePoolIsShort) {
  // Ask for one page more than the pool has free: the mmap reservation fails (nothing is faulted).
  uint64_t free_pages = test_support::free_hugetlb(k2M);
  using strict_2m = hugify::allocator<char, hugify::strict<hugify::hugetlb_2m>>;
  size_t live = hugify_live_blocks();
  try {
    strict_2m().allocate((free_pages + 1) * k2M);
    FAIL() << "allocate did not throw";
  } catch (const hugify::alloc_error &e) {
    EXPECT_EQ(e.error(), ENOMEM);
    EXPECT_EQ(e.requested(), (free_pages + 1) * k2M);
    EXPECT_NE(std::string(e.what()).find("2M"), std::string::npos) << e.what();
  }
  EXPECT_EQ(hugify_live_blocks(), live);
  // Still a std::bad_alloc for code that only knows the standard.
  EXPECT_THROW(strict_2m().allocate((free_pages + 1) * k2M), std::bad_alloc);
}

struct bad_kind_policy {
  static constexpr size_t huge_threshold = size_t{1} << 21;
  static hugify_opts opts() noexcept {
    hugify_opts o{};
    o.kinds[0] = static_cast<hugify_page_kind>(9);
    o.kind_count = 1;
    return o;
  }
};

TEST(CxxAllocator, InvalidPolicyThrowsEinval) {
  try {
    hugify::allocator<uint64_t, bad_kind_policy>().allocate(MiB);
    FAIL() << "allocate did not throw";
  } catch (const hugify::alloc_error &e) {
    EXPECT_EQ(e.error(), EINVAL);
    EXPECT_NE(std::string(e.what()).find("invalid request"), std::string::npos) << e.what();
  }
  EXPECT_THROW(hugify::allocator<uint64_t>().allocate(SIZE_MAX / 4), std::bad_array_new_length);
}

// The small-request rule: below Policy::huge_threshold bytes (2 MiB) requests go to ::operator new and
// map nothing; from the threshold on, each request is one hugify_alloc block.
TEST(CxxAllocator, SmallRequestsDoNotTakeHugePages) {
  using alloc = hugify::allocator<uint64_t>;
  constexpr size_t threshold_elements = hugify::default_policy::huge_threshold / sizeof(uint64_t);
  static_assert(hugify::default_policy::huge_threshold == 2 * MiB);
  static_assert(!alloc::uses_huge_pages(threshold_elements - 1) && alloc::uses_huge_pages(threshold_elements));
  size_t live = hugify_live_blocks();
  {
    std::vector<std::vector<uint64_t, alloc>> small;
    for (size_t i = 0; i < 1000; i++) small.emplace_back(1 + i * 7, i);
    std::vector<uint64_t, alloc> just_below(threshold_elements - 1, 1);
    EXPECT_EQ(hugify_live_blocks(), live) << "a request below the threshold mapped a block";
    for (size_t i = 0; i < small.size(); i++) ASSERT_EQ(small[i].size(), 1 + i * 7);
    std::vector<uint64_t, alloc> at(threshold_elements, 2);
    EXPECT_EQ(hugify_live_blocks(), live + 1);
  }
  EXPECT_EQ(hugify_live_blocks(), live);
  // Over-aligned small objects keep their alignment through ::operator new.
  struct alignas(256) wide { char bytes[256]; };
  hugify::allocator<wide> wide_alloc;
  wide *w = wide_alloc.allocate(3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w) % 256, 0u);
  wide_alloc.deallocate(w, 3);
}

TEST(CxxAllocator, RebindAndEquality) {
  using A = hugify::allocator<uint64_t>;
  using traits = std::allocator_traits<A>;
  static_assert(std::is_same_v<traits::rebind_alloc<int>, hugify::allocator<int>>);
  static_assert(std::is_same_v<traits::rebind_alloc<int>::policy_type, hugify::default_policy>);
  static_assert(std::is_same_v<std::allocator_traits<hugify::allocator<char, hugify::thp_only>>::rebind_alloc<long>,
                               hugify::allocator<long, hugify::thp_only>>);
  static_assert(traits::is_always_equal::value && std::is_empty_v<A>);
  A a;
  hugify::allocator<int> b(a);
  A c(b);
  EXPECT_TRUE(a == b);
  EXPECT_TRUE(a == c);
  EXPECT_FALSE(a != b);
  EXPECT_FALSE((a == hugify::allocator<uint64_t, hugify::thp_only>()));
  // Memory from one instance is freed by another (stateless).
  uint64_t *p = a.allocate(4 * MiB / sizeof(uint64_t));
  p[0] = 42;
  c.deallocate(p, 4 * MiB / sizeof(uint64_t));
}

TEST(CxxAllocator, UnorderedMapRuns) {
  using map = std::unordered_map<uint64_t, uint64_t, std::hash<uint64_t>, std::equal_to<uint64_t>,
                                 hugify::allocator<std::pair<const uint64_t, uint64_t>>>;
  size_t live = hugify_live_blocks();
  {
    map m;
    m.reserve(500000); // the bucket array (> 2 MiB) is a hugify block; the nodes come from ::operator new
    for (uint64_t i = 0; i < 500000; i++) m.emplace(i, i * 3);
    EXPECT_EQ(hugify_live_blocks(), live + 1);
    ASSERT_EQ(m.size(), 500000u);
    for (uint64_t i = 0; i < 500000; i += 997) ASSERT_EQ(m.at(i), i * 3);
    map moved = std::move(m);
    EXPECT_EQ(moved.at(499999), 499999u * 3);
  }
  EXPECT_EQ(hugify_live_blocks(), live);
}

#if HUGIFY_HAVE_ABSL
struct mix_hash {
  size_t operator()(uint64_t h) const noexcept { return h * 0x9e3779b97f4a7c15ull; }
};

TEST(CxxAllocator, AbslFlatHashMapInTheSeedsForm) {
  using K = uint64_t;
  using V = uint64_t;
  using map = absl::flat_hash_map<K, V, mix_hash, std::equal_to<K>, hugify::allocator<std::pair<const K, V>>>;
  const size_t count = 1000000;
  size_t live = hugify_live_blocks();
  {
    map m;
    m.reserve(count);
    EXPECT_EQ(hugify_live_blocks(), live + 1); // the one backing array (about 34 MiB)
    for (K i = 0; i < count; i++) ASSERT_TRUE(m.try_emplace(i, i + 1).second);
    ASSERT_EQ(m.size(), count);
    for (K i = 0; i < count; i++) ASSERT_EQ(m.find(i)->second, i + 1);
    EXPECT_TRUE(m.find(count) == m.end());
    // The slots span the backing array: measure from the lowest to the highest element.
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (const auto &entry : m) {
      lo = std::min(lo, reinterpret_cast<uintptr_t>(&entry));
      hi = std::max(hi, reinterpret_cast<uintptr_t>(&entry + 1));
    }
    ASSERT_GT(hi - lo, 16 * MiB);
    struct hugify_backing b = backing_of(reinterpret_cast<void *>(lo), hi - lo);
    EXPECT_GE(hugify_backing_huge_fraction(&b), 0.95);
    // smaps gives a mapping's figures for the whole mapping, shared out here by length: a window of the
    // block nothing touched would count as small. abseil 20240722 puts an 8-byte GrowthInfo before the
    // control bytes, so its array is 34 MiB + 8 bytes (20220623's: 34 MiB exactly) and the block's 18th
    // 2 MiB window holds only the last slot's last 8 bytes, untouched while that slot is free: 34 of
    // 36 MiB resident, all huge, read as 94.4 %. So what smaps says is resident there, shared out alike.
    void *from = reinterpret_cast<void *>(lo);
    EXPECT_GE(static_cast<double>(smaps_huge_bytes(from, hi - lo)),
              0.95 * static_cast<double>(smaps_resident_bytes(from, hi - lo)));
    m.erase(7);
    EXPECT_EQ(m.count(7), 0u);
    map copy = m;
    EXPECT_EQ(copy.size(), count - 1);
    EXPECT_EQ(hugify_live_blocks(), live + 2);
  }
  EXPECT_EQ(hugify_live_blocks(), live);
}
#else
TEST(CxxAllocator, AbslFlatHashMapInTheSeedsForm) {
  GTEST_SKIP() << "libabsl-dev is not installed (apt-get install libabsl-dev)";
}
#endif

// ---- hugify::memory_resource -------------------------------------------------------------------------

TEST(CxxMemoryResource, PmrUnorderedMapWithAMillionNodesIsOnHugePages) {
  size_t live = hugify_live_blocks();
  {
    hugify::memory_resource resource;
    std::pmr::unordered_map<uint64_t, uint64_t> m(&resource);
    const uint64_t count = 1000000;
    for (uint64_t i = 0; i < count; i++) m.emplace(i, ~i);
    ASSERT_EQ(m.size(), count);
    for (uint64_t i = 0; i < count; i++) ASSERT_EQ(m.at(i), ~i);
    EXPECT_GE(resource.bytes_allocated(), count * 24);
    EXPECT_GT(resource.chunk_count(), 1u);
    struct hugify_backing b = resource.backing();
    EXPECT_GE(b.resident, count * 24);
    EXPECT_GE(hugify_backing_huge_fraction(&b), 0.95)
        << "4K " << b.resident_4k << " THP " << b.resident_thp << " 2M " << b.resident_2m << " 1G " << b.resident_1g;
    // The nodes themselves lie in the resource's memory: a node's page is resident and huge.
    struct hugify_backing node = backing_of(&*m.find(count / 2), sizeof(std::pair<const uint64_t, uint64_t>));
    EXPECT_EQ(node.resident_4k, 0u);
    EXPECT_GT(hugify_live_blocks(), live);
  }
  EXPECT_EQ(hugify_live_blocks(), live) << "the destructor unmaps every chunk";
}

TEST(CxxMemoryResource, PmrListWithAMillionNodes) {
  hugify::memory_resource resource;
  std::pmr::list<uint64_t> list(&resource);
  const uint64_t count = 1000000;
  for (uint64_t i = 0; i < count; i++) list.push_back(i);
  uint64_t sum = 0;
  for (uint64_t v : list) sum += v;
  EXPECT_EQ(sum, count * (count - 1) / 2);
  EXPECT_EQ(list.size(), count);
  struct hugify_backing b = resource.backing();
  EXPECT_GE(b.resident, count * 24);
  EXPECT_GE(hugify_backing_huge_fraction(&b), 0.95);
  // Erase and refill: freed nodes are reused, no new chunk.
  size_t chunks = resource.chunk_count(), bytes = resource.bytes_allocated();
  for (int round = 0; round < 3; round++) {
    list.remove_if([](uint64_t v) { return v % 2 == 0; });
    for (uint64_t i = 0; i < count / 2; i++) list.push_back(i * 2);
  }
  EXPECT_EQ(list.size(), count);
  EXPECT_EQ(resource.chunk_count(), chunks);
  EXPECT_EQ(resource.bytes_allocated(), bytes);
}

TEST(CxxMemoryResource, ReleaseReturnsEveryMapping) {
  size_t live = hugify_live_blocks();
  hugify::memory_resource resource;
  std::vector<void *> blocks;
  for (size_t i = 0; i < 20000; i++) blocks.push_back(resource.allocate(8 + i % 700, 8));
  void *large = resource.allocate(4 * MiB, 64);
  EXPECT_EQ(resource.large_block_count(), 1u);
  EXPECT_GT(hugify_live_blocks(), live + 1);
  resource.release();
  EXPECT_EQ(hugify_live_blocks(), live);
  EXPECT_EQ(resource.chunk_count(), 0u);
  EXPECT_EQ(resource.bytes_allocated(), 0u);
  (void)large;
  // Usable again after release.
  std::pmr::vector<int> v(1000, 5, &resource);
  EXPECT_EQ(std::accumulate(v.begin(), v.end(), 0), 5000);
  EXPECT_EQ(resource.chunk_count(), 1u);
}

TEST(CxxMemoryResource, LargeBlocksAreTheirOwnMappingAndFreedAtOnce) {
  hugify::memory_resource resource;
  size_t live = hugify_live_blocks();
  void *p = resource.allocate(8 * MiB, 4096);
  EXPECT_EQ(hugify_live_blocks(), live + 1);
  EXPECT_EQ(resource.chunk_count(), 0u);
  resource.deallocate(p, 8 * MiB, 4096);
  EXPECT_EQ(hugify_live_blocks(), live);
}

TEST(CxxMemoryResource, AlignmentAndReuse) {
  hugify::memory_resource resource;
  for (size_t align : {1, 2, 8, 16, 32, 64, 128, 512, 4096}) {
    for (size_t bytes : {1, 24, 100, 700, 5000, 70000}) {
      void *p = resource.allocate(bytes, align);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << bytes << " bytes aligned " << align;
      std::memset(p, 0xab, bytes);
      resource.deallocate(p, bytes, align);
      EXPECT_EQ(resource.allocate(bytes, align), p) << "a freed block is reused by its class";
    }
  }
  EXPECT_THROW((void)resource.allocate(64, 8192), std::bad_alloc);
  EXPECT_TRUE(resource.is_equal(resource));
  hugify::memory_resource other;
  EXPECT_FALSE(resource.is_equal(other));
}

TEST(CxxMemoryResource, ChunksFollowTheChain) {
  std::string why = test_support::ensure_free_hugetlb(k2M, 8);
  if (!why.empty()) GTEST_SKIP() << why;
  hugify::memory_resource::options options;
  options.alloc.kinds[0] = HUGIFY_PAGE_2M;
  options.alloc.kind_count = 1;
  options.alloc.flags = HUGIFY_STRICT;
  options.first_chunk = options.max_chunk = 4 * MiB;
  hugify::memory_resource resource(options);
  std::pmr::vector<uint64_t> v(100000, 1, &resource);
  EXPECT_EQ(resource.last_chunk_kind(), HUGIFY_PAGE_2M);
  struct hugify_backing b = resource.backing();
  EXPECT_EQ(b.size, 4 * MiB);
  EXPECT_EQ(b.resident, b.resident_2m);
  EXPECT_GT(b.resident_2m, 0u);
}

}  // namespace
