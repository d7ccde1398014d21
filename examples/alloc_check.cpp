// SPDX-License-Identifier: MIT
// alloc_check.cpp - a consumer of the installed hugify.hpp: a std::vector on hugify::allocator and a
// std::pmr::list on hugify::memory_resource, each checked with hugify_measure_backing. Exit 0 when both are on
// huge pages, 1 when either fell short.
#include <hugify.hpp>

#include <cstdint>
#include <cstdio>
#include <list>
#include <memory_resource>
#include <numeric>
#include <vector>

int main() {
  std::vector<std::uint64_t, hugify::allocator<std::uint64_t>> v(std::size_t{8} << 20); // 64 MiB: one hugify block
  std::iota(v.begin(), v.end(), std::uint64_t{0});
  struct hugify_backing b{};
  hugify_measure_backing(v.data(), v.size() * sizeof v[0], &b);
  double vector_huge = hugify_backing_huge_fraction(&b);

  hugify::memory_resource resource;
  std::pmr::list<std::uint64_t> list(v.begin(), v.begin() + 500000, &resource); // small nodes, huge chunks
  struct hugify_backing nodes = resource.backing();
  double list_huge = hugify_backing_huge_fraction(&nodes);

  bool sums = std::accumulate(list.begin(), list.end(), std::uint64_t{0}) == 500000ull * 499999 / 2;
  std::printf("hugify.hpp: vector %.1f%% on huge pages, pmr::list of %zu nodes %.1f%% (%zu chunks)\n",
              100.0 * vector_huge, list.size(), 100.0 * list_huge, resource.chunk_count());
  bool ok = sums && vector_huge >= 0.95 && list_huge >= 0.95;
  if (!ok) std::fprintf(stderr, "alloc_check_cxx: fell short (is THP 'never' and the hugetlb pool empty?)\n");
  return ok ? 0 : 1;
}
