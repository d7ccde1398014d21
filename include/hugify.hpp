// SPDX-License-Identifier: MIT
// hugify.hpp - C++17, header-only: huge-page memory for standard containers.
//
//   hugify::allocator<T, Policy>  a stateless allocator for std::vector, std::unordered_map,
//                                 absl::flat_hash_map...: large requests go to hugify_alloc (the fallback
//                                 chain of hugify.h), small ones to ::operator new.
//   hugify::memory_resource       a std::pmr::memory_resource that carves allocations out of huge-page
//                                 backed chunks, so node-based pmr containers (millions of small nodes)
//                                 get huge pages too.
//   hugify::alloc_error           the std::bad_alloc both throw, carrying errno and hugify's reason.
//
// The small-request rule of hugify::allocator (why a std::unordered_map's nodes are not on huge pages):
//   a request of n objects is "large" when n * sizeof(T) >= one huge page: Policy::run_time_threshold()
//   where the policy has it (every policy below: hugify_pmd_size(), the kernel's PMD, 2 MiB on x86-64 and
//   32 MiB on arm64's 16 KiB pages), else Policy::huge_threshold (the compile-time constant, 2 MiB). Large requests are mapped by hugify_alloc with Policy::opts() and unmapped by
//   hugify_free with the same size; smaller ones go to ::operator new / ::operator delete. The rule is a
//   pure function of the size, so deallocate() always takes the path allocate() took. A small request
//   never maps (and never burns) a huge page of its own; put node-based containers on
//   hugify::memory_resource (std::pmr) to give their nodes huge pages.
//
// See docs/library.md for the reference with examples.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory_resource>
#include <new>
#include <type_traits>
#include <vector>

#include "hugify.h"

namespace hugify {

// ---- errors ---------------------------------------------------------------------------------------

// Thrown by hugify::allocator and hugify::memory_resource when hugify_alloc fails. A std::bad_alloc, so
// code that handles out-of-memory keeps working; what() says why (every page kind that was tried).
class alloc_error : public std::bad_alloc {
 public:
  alloc_error(int error, std::size_t requested, const char *reason) noexcept : error_(error), requested_(requested) {
    std::snprintf(message_, sizeof message_, "hugify: cannot allocate %zu bytes (%s): %s", requested,
                  std::strerror(error), reason && reason[0] ? reason : "no reason given");
  }
  const char *what() const noexcept override { return message_; }
  int error() const noexcept { return error_; }                 // errno: ENOMEM, or EINVAL for bad input
  std::size_t requested() const noexcept { return requested_; } // bytes asked for
 private:
  int error_;
  std::size_t requested_;
  char message_[HUGIFY_REASON_MAX + 128];
};

// ---- policies: which page kinds (the chain), flags, and the small-request threshold -----------------

// A policy is a type with
//   static hugify_opts opts() noexcept;              the chain and flags passed to hugify_alloc
//   static constexpr std::size_t huge_threshold;     requests of at least this many bytes use hugify_alloc
//   static std::size_t run_time_threshold() noexcept; optional (since 0.3.1): the same from the running
//                                                     kernel, preferred to huge_threshold where present
// hugify::policy builds one from flags and an explicit chain; write your own struct for anything else.
template <unsigned Flags, hugify_page_kind... Kinds>
struct policy {
  static_assert(sizeof...(Kinds) <= HUGIFY_PAGE_KIND_COUNT, "at most one entry per page kind");
  static_assert((Flags & ~HUGIFY_FLAGS_ALL) == 0, "unknown hugify flags");
  static constexpr std::size_t huge_threshold = std::size_t{1} << 21; // x86-64's PMD (API: kept)
  static std::size_t run_time_threshold() noexcept { return static_cast<std::size_t>(hugify_pmd_size()); }
  static hugify_opts opts() noexcept {
    hugify_opts o{};
    const hugify_page_kind chain[] = {Kinds..., HUGIFY_PAGE_4K}; // the trailing entry only avoids a 0-size array
    o.kind_count = sizeof...(Kinds);
    for (unsigned i = 0; i < o.kind_count; i++) o.kinds[i] = chain[i];
    o.flags = Flags;
    return o;
  }
};

// The library's default chain: 1 GiB hugetlb, 2 MiB hugetlb, THP, 4 KiB, skipping a hugetlb kind when the
// request is smaller than one of its pages; memory is faulted in on first touch.
using default_policy = policy<0>;
// Exactly one kind each (an explicit chain is tried as given, whatever the size: hugetlb_1g rounds every
// large request up to whole 1 GiB pages). When that kind cannot be had, allocate() throws.
using thp_only = policy<0, HUGIFY_PAGE_THP>;
using hugetlb_2m = policy<0, HUGIFY_PAGE_2M>;
using hugetlb_1g = policy<0, HUGIFY_PAGE_1G>;

// Modifiers: strict<P> = only P's first kind, and with populate a THP block must be fully huge;
// populate<P> = fault the memory in at allocation (and MADV_COLLAPSE THP), measured by hugify_alloc.
template <class P, unsigned ExtraFlags>
struct with_flags : P {
  static hugify_opts opts() noexcept {
    hugify_opts o = P::opts();
    o.flags |= ExtraFlags;
    return o;
  }
};
template <class P>
using strict = with_flags<P, HUGIFY_STRICT>;
template <class P>
using populate = with_flags<P, HUGIFY_POPULATE>;

namespace detail {

// The threshold in effect: Policy::run_time_threshold() where the policy has one, else its constant (int and
// long: the first overload wins where both fit).
template <class Policy>
auto threshold_of(int) noexcept -> decltype(Policy::run_time_threshold()) { return Policy::run_time_threshold(); }
template <class Policy>
std::size_t threshold_of(long) noexcept { return Policy::huge_threshold; }

inline void *small_allocate(std::size_t bytes, std::size_t alignment) {
  if (alignment > __STDCPP_DEFAULT_NEW_ALIGNMENT__) return ::operator new(bytes, std::align_val_t(alignment));
  return ::operator new(bytes);
}

inline void small_deallocate(void *p, std::size_t bytes, std::size_t alignment) noexcept {
  if (alignment > __STDCPP_DEFAULT_NEW_ALIGNMENT__) ::operator delete(p, bytes, std::align_val_t(alignment));
  else ::operator delete(p, bytes);
}

// hugify_alloc or throw alloc_error with its reason.
inline void *huge_allocate(std::size_t bytes, const hugify_opts &opts, hugify_info *info) {
  void *p = hugify_alloc(bytes, &opts, info);
  if (!p) throw alloc_error(errno, bytes, info->reason);
  return p;
}

}  // namespace detail

// ---- hugify::allocator ------------------------------------------------------------------------------

// Stateless: every instance (of any T, same Policy) is equal, so containers move and swap storage freely.
// Thread-safe (hugify_alloc and ::operator new are).
template <class T, class Policy = default_policy>
class allocator {
  static_assert(alignof(T) <= 4096, "hugify::allocator: alignment above 4 KiB is not supported");

 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using policy_type = Policy;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::true_type;
  template <class U>
  struct rebind {
    using other = allocator<U, Policy>;
  };

  allocator() noexcept = default;
  template <class U>
  allocator(const allocator<U, Policy> &) noexcept {}

  // Whether a request for n objects goes to hugify_alloc at Policy::huge_threshold (the compile-time rule,
  // constexpr as before 0.3.1), and at the threshold in effect on this kernel (the small-request rule
  // above), which allocate() and deallocate() follow.
  static constexpr bool uses_huge_pages(std::size_t n) noexcept {
    return n <= max_size() && n * sizeof(T) >= Policy::huge_threshold;
  }
  static bool uses_huge_pages_here(std::size_t n) noexcept {
    return n <= max_size() && n * sizeof(T) >= detail::threshold_of<Policy>(0);
  }
  static constexpr std::size_t max_size() noexcept { return std::numeric_limits<std::size_t>::max() / sizeof(T); }

  // Throws std::bad_array_new_length when n * sizeof(T) overflows, hugify::alloc_error (a std::bad_alloc)
  // when hugify_alloc fails, std::bad_alloc when ::operator new does.
  T *allocate(std::size_t n) {
    if (n > max_size()) throw std::bad_array_new_length();
    if (!uses_huge_pages_here(n)) return static_cast<T *>(detail::small_allocate(n * sizeof(T), alignof(T)));
    hugify_opts opts = Policy::opts();
    hugify_info info;
    return static_cast<T *>(detail::huge_allocate(n * sizeof(T), opts, &info));
  }

  void deallocate(T *p, std::size_t n) noexcept {
    if (!p) return;
    if (!uses_huge_pages_here(n)) detail::small_deallocate(p, n * sizeof(T), alignof(T));
    else hugify_free(p, n * sizeof(T)); // -EINVAL only for a pointer this allocator never returned
  }
};

template <class T, class P, class U, class Q>
constexpr bool operator==(const allocator<T, P> &, const allocator<U, Q> &) noexcept {
  return std::is_same_v<P, Q>;
}
template <class T, class P, class U, class Q>
constexpr bool operator!=(const allocator<T, P> &a, const allocator<U, Q> &b) noexcept {
  return !(a == b);
}

// ---- hugify::memory_resource ------------------------------------------------------------------------

// A pool resource over huge-page chunks. Chunks come from hugify_alloc (options::alloc; default chain,
// faulted on first touch), the first one options::first_chunk bytes, each next one twice as large up to
// options::max_chunk. Requests up to max_pooled bytes are rounded to a size class (multiples of 16 up to
// 512 bytes, then powers of two) and carved out of the chunks in 64 KiB runs per class; freed blocks go
// to their class's free list and are reused, never returned to the kernel before release(). Larger
// requests get a block of their own from hugify_alloc, unmapped by deallocate().
// Alignment: up to 4096 bytes (more throws alloc_error with EINVAL).
// NOT thread-safe, like std::pmr::unsynchronized_pool_resource: use one per thread, or guard it with a
// mutex (std::pmr::synchronized_pool_resource's role) yourself.
class memory_resource : public std::pmr::memory_resource {
 public:
  struct options {
    hugify_opts alloc{};                           // chain and flags for chunks and large blocks
    std::size_t first_chunk = 0;                        // 0: one huge page (hugify_pmd_size(), at most
                                                        // max_chunk); 2 MiB before 0.3.1
    std::size_t max_chunk = std::size_t{64} * 1024 * 1024; // 64 MiB
  };
  static constexpr std::size_t max_pooled = std::size_t{1024} * 1024; // larger requests: a block of their own
  static constexpr std::size_t max_alignment = 4096;

  memory_resource() : memory_resource(options{}) {}
  explicit memory_resource(const options &o) : options_(o) {
    if (options_.first_chunk == 0) {
      std::size_t pmd = static_cast<std::size_t>(hugify_pmd_size());
      options_.first_chunk = pmd < options_.max_chunk ? pmd : options_.max_chunk;
    }
    if (options_.first_chunk < max_pooled) options_.first_chunk = max_pooled;
    if (options_.max_chunk < options_.first_chunk) options_.max_chunk = options_.first_chunk;
    next_chunk_ = options_.first_chunk;
  }
  memory_resource(const memory_resource &) = delete;
  memory_resource &operator=(const memory_resource &) = delete;
  ~memory_resource() override { release(); }

  // Unmap every chunk and large block (all memory handed out becomes invalid) and start over.
  void release() noexcept {
    for (const block &b : chunks_) hugify_free(b.address, b.size);
    for (const block &b : large_) hugify_free(b.address, b.size);
    chunks_.clear();
    large_.clear();
    for (size_class &c : classes_) c = size_class{};
    cursor_ = limit_ = nullptr;
    next_chunk_ = options_.first_chunk;
  }

  // What backs the resource's memory now (measured, summed over chunks and large blocks): a chunk's
  // pages that were never touched are not resident and do not count.
  struct hugify_backing backing() const {
    struct hugify_backing sum{};
    sum.exact = 1;
    auto add = [&sum](const block &b) {
      struct hugify_backing one{};
      if (hugify_measure_backing(b.address, b.size, &one) != 0) return;
      sum.size += one.size;
      sum.mapped += one.mapped;
      sum.resident += one.resident;
      sum.resident_4k += one.resident_4k;
      sum.resident_thp += one.resident_thp;
      sum.resident_2m += one.resident_2m;
      sum.resident_1g += one.resident_1g;
      sum.exact = sum.exact && one.exact;
    };
    for (const block &b : chunks_) add(b);
    for (const block &b : large_) add(b);
    return sum;
  }

  std::size_t chunk_count() const noexcept { return chunks_.size(); }
  std::size_t large_block_count() const noexcept { return large_.size(); }
  // Bytes asked of hugify_alloc for the chunks and large blocks alive now.
  std::size_t bytes_allocated() const noexcept {
    std::size_t total = 0;
    for (const block &b : chunks_) total += b.size;
    for (const block &b : large_) total += b.size;
    return total;
  }
  // The page kind hugify_alloc mapped for the most recent chunk (HUGIFY_PAGE_4K before the first one).
  hugify_page_kind last_chunk_kind() const noexcept { return last_kind_; }

 protected:
  void *do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (alignment > max_alignment || (alignment & (alignment - 1)) != 0)
      throw alloc_error(EINVAL, bytes, "hugify::memory_resource: alignment must be a power of two up to 4096");
    std::size_t size = class_bytes(bytes, alignment);
    if (size > max_pooled) {
      large_.reserve(large_.size() + 1); // may throw; before the mapping, so nothing leaks
      hugify_info info;
      void *p = detail::huge_allocate(bytes, options_.alloc, &info);
      large_.push_back(block{p, bytes});
      return p;
    }
    size_class &c = classes_[class_index(size)];
    if (c.free_list) {
      void *p = c.free_list;
      c.free_list = *static_cast<void **>(p);
      return p;
    }
    if (static_cast<std::size_t>(c.limit - c.cursor) < size) {
      std::size_t run = size < run_bytes ? run_bytes - run_bytes % size : size;
      c.cursor = carve(run, natural_alignment(size));
      c.limit = c.cursor + run;
    }
    void *p = c.cursor;
    c.cursor += size;
    return p;
  }

  void do_deallocate(void *p, std::size_t bytes, std::size_t alignment) override {
    if (!p) return;
    std::size_t size = class_bytes(bytes, alignment);
    if (size > max_pooled) {
      for (std::size_t i = large_.size(); i-- > 0;) {
        if (large_[i].address != p) continue;
        hugify_free(p, large_[i].size);
        large_[i] = large_.back();
        large_.pop_back();
        return;
      }
      return;
    }
    size_class &c = classes_[class_index(size)];
    *static_cast<void **>(p) = c.free_list;
    c.free_list = p;
  }

  bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override { return this == &other; }

 private:
  struct block {
    void *address;
    std::size_t size;
  };
  struct size_class {
    void *free_list = nullptr;
    char *cursor = nullptr, *limit = nullptr; // the class's current run
  };
  static constexpr std::size_t granule = 16, granule_limit = 512, run_bytes = std::size_t{64} << 10;
  static constexpr std::size_t granule_classes = granule_limit / granule; // 16, 32, ... 512
  static constexpr std::size_t class_count = granule_classes + 11;       // 1 KiB, 2 KiB, ... 1 MiB

  static std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }
  static std::size_t power_of_two_at_least(std::size_t n) {
    std::size_t p = 1;
    while (p < n) p <<= 1;
    return p;
  }
  // The class a request falls in; a multiple of the alignment, so its natural alignment satisfies it.
  static std::size_t class_bytes(std::size_t bytes, std::size_t alignment) {
    std::size_t n = round_up(bytes ? bytes : 1, alignment > granule ? alignment : granule);
    if (n <= granule_limit || n > max_pooled) return n;
    return power_of_two_at_least(n);
  }
  static std::size_t class_index(std::size_t size) {
    if (size <= granule_limit) return size / granule - 1;
    std::size_t index = granule_classes;
    for (std::size_t p = 1024; p < size; p <<= 1) index++;
    return index;
  }
  // The largest power of two dividing size, at most 4096: blocks of a class packed at this alignment all
  // keep it, and it is at least any alignment that class_bytes folded into the size.
  static std::size_t natural_alignment(std::size_t size) {
    std::size_t a = size & (~size + 1);
    return a < max_alignment ? a : max_alignment;
  }

  // `bytes` aligned to `alignment` from the current chunk, or from a new one.
  char *carve(std::size_t bytes, std::size_t alignment) {
    std::size_t padding = (alignment - reinterpret_cast<std::uintptr_t>(cursor_) % alignment) % alignment;
    std::size_t left = static_cast<std::size_t>(limit_ - cursor_);
    if (left >= padding && left - padding >= bytes) {
      char *p = cursor_ + padding;
      cursor_ = p + bytes;
      return p;
    }
    std::size_t size = next_chunk_;
    while (size < bytes) size *= 2;
    chunks_.reserve(chunks_.size() + 1);
    hugify_info info;
    char *chunk = static_cast<char *>(detail::huge_allocate(size, options_.alloc, &info));
    chunks_.push_back(block{chunk, size});
    last_kind_ = info.kind;
    if (next_chunk_ < options_.max_chunk) next_chunk_ = next_chunk_ * 2 < options_.max_chunk ? next_chunk_ * 2 : options_.max_chunk;
    cursor_ = chunk + bytes; // chunks are page aligned
    limit_ = chunk + size;
    return chunk;
  }

  options options_;
  std::size_t next_chunk_;
  std::vector<block> chunks_, large_;
  size_class classes_[class_count];
  char *cursor_ = nullptr, *limit_ = nullptr; // unused tail of the newest chunk
  hugify_page_kind last_kind_ = HUGIFY_PAGE_4K;
};

}  // namespace hugify
