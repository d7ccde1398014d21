/* SPDX-License-Identifier: MIT */
/* heap_cover.c - the heap modes inside the host.
 *
 * glibc malloc is set up by `hugify run` before the program starts, through GLIBC_TUNABLES (see
 * docs/run.md: glibc.malloc.hugetlb=1 plus top_pad and mmap_threshold, which make glibc 2.36 advise its
 * thread arenas too). glibc's own mmap calls do not go through the PLT, so nothing here can see them.
 * What this file adds is the rest of the process: every anonymous private mapping of 2 MiB or more made
 * through mmap() — by other allocators, language runtimes, the program itself — is placed at a 2 MiB
 * boundary (the kernel only does that for lengths that are multiples of 2 MiB) and advised
 * MADV_HUGEPAGE, unless the process disabled THP with prctl or asked for a stack.
 *
 * Shared memory is memory too: shared anonymous mappings (mmap MAP_SHARED|MAP_ANONYMOUS) and SysV segments
 * (shmat) of 2 MiB or more are placed so that their offset 0 sits on a 2 MiB boundary and advised. The
 * placement matters more than the advice: a shmem page can only be PMD-mapped where the address and the
 * file offset agree modulo 2 MiB, and the kernel aligns shared mappings itself only while shmem_enabled
 * allows huge pages. Measured on 6.18: a shared mapping made under 'never' got an unaligned address and
 * MADV_COLLAPSE failed with EINVAL, even after shmem_enabled was changed to 'advise'; an aligned one
 * collapses under 'never' too. So under 'never' the pages are not huge at fault time, but `hugify collapse`
 * can still make them huge later; the report says so, once. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "elf_image.h"
#include "inspect.h"
#include "os.h"
#include "probe.h"
#include "preload.h"

// x86-64's MAP_32BIT (a mapping in the low 2 GiB) has no counterpart elsewhere (arm64): nothing to leave out.
#ifndef MAP_32BIT
#define MAP_32BIT 0
#endif
/* The cover's unit: the PMD huge page, or, where it is too big to fault and collapse wisely (512 MiB on
 * 64 KiB pages), the largest mTHP size faults take (page_sizes_choose). Set by preload_heap_start before
 * anything is covered; 0: nothing is (no size to cover for). */
static size_t cover_size;
static bool cover_is_pmd; /* the kernel aligns an anonymous mapping of whole PMDs itself */

typedef void *(*mmap_function)(void *, size_t, int, int, int, off_t);
static mmap_function next_mmap;   /* the mmap after ours (libc's), resolved in the constructor */
static atomic_int cover_active;   /* 1: auto/thp mode and THP usable in this process */
static atomic_int cover_pending;  /* 1: auto/thp mode, THP not checked yet (cover_on checks it); 2: being checked */
static atomic_int cover_warned;   /* one fallback line for a failing madvise */
static atomic_int shared_active;  /* 1: auto/thp mode and THP not disabled by prctl: cover shared memory */
static atomic_int shared_noted;   /* the one fallback line about shmem_enabled */
static char shmem_mode_kept[24];  /* shmem_enabled as it applies to 2 MiB pages, read at the first use */
static atomic_int shmem_mode_state; /* 0: not read; 1: being stored; 2: shmem_mode_kept holds it */
static uint64_t pool_free_at_start, pool_total_at_start; /* --heap hugetlb: the 2 MiB pool at start */
static const char *heap_owner;    /* a sanitizer's or valgrind's allocator owns malloc (NULL: none) */
static bool under_valgrind;       /* valgrind's core is loaded: the program runs on valgrind's JIT */

/* The program's own mapping goes on to the next mmap (libc's, or a sanitizer's interceptor); the preload's
 * trimming and advice use os.h's system calls, so they are never sampled or covered again (docs/design.md,
 * "the preload's own memory calls"). */
static void *call_next_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
  if (next_mmap) return next_mmap(addr, length, prot, flags, fd, offset);
  /* Before our constructor ran (another preloaded library's constructor): the system call itself. */
  void *result;
  int rc = os_mmap(addr, length, prot, flags, fd, offset, &result);
  if (rc) errno = -rc;
  return rc ? MAP_FAILED : result;
}

static bool thp_disabled_by_prctl(void) { return prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) > 0; }

static void advise(void *start, size_t length) {
  if (thp_disabled_by_prctl()) return; /* the program said no (possibly after we started) */
  int rc = os_madvise(start, length, MADV_HUGEPAGE);
  if (rc != 0 && !atomic_exchange(&cover_warned, 1))
    preload_fallback("heap mmap cover", "madvise(MADV_HUGEPAGE) failed: %s", strerror(-rc));
}

/* Without a report or HUGIFY_VERBOSE, the THP mode is read at the first mapping the cover would take, not
 * at start: a short program that never maps 2 MiB never pays for it. What the check calls (open, read,
 * close, prctl, snprintf) allocates nothing, so it is safe inside malloc's own mmap. Nothing waits for the
 * check, as nothing waits for the carver's lock: a signal handler that maps while its own thread is inside
 * the check would wait for itself for ever (pthread_once did: RunPreload.CarverServesASignalHandler...
 * hung 13 times in 30 under load), so a mapping made while another call is checking is an ordinary one. */
static void check_thp_usable(const char *mode_name);
static bool cover_on(void) {
  if (atomic_load_explicit(&cover_pending, memory_order_acquire)) {
    int expected = 1;
    if (!atomic_compare_exchange_strong(&cover_pending, &expected, 2)) return false; /* being checked: not now */
    check_thp_usable(options_heap_name(preload_options()->heap));
    atomic_store_explicit(&cover_pending, 0, memory_order_release);
  }
  return atomic_load_explicit(&cover_active, memory_order_relaxed);
}

/* Only fresh anonymous private memory big enough to hold a huge page, and nothing with placement or
 * page-size wishes of its own: stacks (MAP_STACK gets MADV_NOHUGEPAGE from the kernel), MAP_GROWSDOWN,
 * MAP_32BIT, MAP_HUGETLB, shared memory. */
static bool wants_cover(size_t length, int flags) {
  if (!cover_size || length < cover_size || !(flags & MAP_ANONYMOUS) || (flags & MAP_TYPE) != MAP_PRIVATE) return false;
  return !(flags & (MAP_STACK | MAP_GROWSDOWN | MAP_32BIT | MAP_HUGETLB)) && cover_on();
}

/* ---- shared memory --------------------------------------------------------------------------------- */

static bool wants_shared_cover(size_t length, int flags) {
  if (!atomic_load_explicit(&shared_active, memory_order_relaxed) || !cover_size || length < cover_size) return false;
  if (!(flags & MAP_ANONYMOUS) || (flags & MAP_TYPE) != MAP_SHARED) return false;
  return !(flags & (MAP_STACK | MAP_GROWSDOWN | MAP_32BIT | MAP_HUGETLB));
}

/* Two sysfs files: read when a program first makes shared memory this large, not in every process. Nothing
 * waits for another reader (a signal handler that maps shared memory while its own thread reads would wait
 * for itself, as pthread_once did for the THP check): a call that finds it unread reads its own copy, and
 * the first to finish keeps it for the others. */
static void read_shmem_mode(char *out, size_t cap) {
  if (atomic_load_explicit(&shmem_mode_state, memory_order_acquire) == 2) {
    snprintf(out, cap, "%s", shmem_mode_kept);
    return;
  }
  inspect_shmem_mode(out, cap);
  int expected = 0;
  if (!atomic_compare_exchange_strong(&shmem_mode_state, &expected, 1)) return;
  snprintf(shmem_mode_kept, sizeof shmem_mode_kept, "%s", out);
  atomic_store_explicit(&shmem_mode_state, 2, memory_order_release);
}

/* Advise shared memory we placed; say once what shmem_enabled does to it. */
static void advise_shared(void *start, size_t length, const char *how) {
  if (thp_disabled_by_prctl()) return;
  char shmem_mode[sizeof shmem_mode_kept];
  read_shmem_mode(shmem_mode, sizeof shmem_mode);
  os_madvise(start, length, MADV_HUGEPAGE); /* EINVAL on hugetlb segments: those are huge already */
  bool at_fault = strcmp(shmem_mode, "advise") == 0 || strcmp(shmem_mode, "always") == 0 ||
                  strcmp(shmem_mode, "within_size") == 0 || strcmp(shmem_mode, "force") == 0;
  if (at_fault || atomic_exchange(&shared_noted, 1)) return;
  char what[64];
  snprintf(what, sizeof what, "shared memory (%s)", how);
  if (strcmp(shmem_mode, "deny") == 0)
    preload_fallback(what, "shmem_enabled is 'deny': it stays on 4 KiB pages and cannot be collapsed; fix: echo "
                     "advise > " OS_SYSFS_THP "/shmem_enabled, then restart the program");
  else
    preload_fallback(what, "shmem_enabled is '%s': it stays on base pages when touched (placed PMD-aligned, so "
                     "`hugify collapse PID` can move it); fix: echo advise > " OS_SYSFS_THP "/shmem_enabled, then "
                     "restart the program", shmem_mode[0] ? shmem_mode : "absent");
}

/* A reservation of length + 2 MiB, inaccessible: the aligned address inside it, *base and *size of it. */
static char *reserve_aligned(size_t length, char **base, size_t *size) {
  size_t rounded = preload_page_up(length);
  *size = rounded + cover_size;
  if (*size < rounded) return NULL;
  *base = call_next_mmap(NULL, *size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (*base == MAP_FAILED) return NULL;
  return (char *)(((uintptr_t)*base + cover_size - 1) & ~(uintptr_t)(cover_size - 1));
}

/* Give back the parts of a reservation around [used, used + length). */
static void release_around(char *base, size_t size, char *used, size_t length) {
  size_t rounded = preload_page_up(length);
  if (used > base) os_munmap(base, (size_t)(used - base));
  char *end = used + rounded;
  if (end < base + size) os_munmap(end, (size_t)(base + size - end));
}

/* A shared anonymous mapping whose offset 0 is 2 MiB-aligned: mapped with MAP_FIXED over our own
 * reservation (never over anything of the program's). */
static void *map_shared_aligned(size_t length, int prot, int flags, off_t offset) {
  char *base;
  size_t size;
  char *aligned = reserve_aligned(length, &base, &size);
  if (!aligned) return call_next_mmap(NULL, length, prot, flags, -1, offset);
  void *result = call_next_mmap(aligned, length, prot, flags | MAP_FIXED, -1, offset);
  if (result == MAP_FAILED) {
    os_munmap(base, size); /* errno stays the kernel's answer to the program's mmap */
    return MAP_FAILED;
  }
  release_around(base, size, aligned, length);
  advise_shared(result, length, "mmap MAP_SHARED|MAP_ANONYMOUS");
  return result;
}

typedef void *(*shmat_function)(int, const void *, int);
static shmat_function next_shmat;

/* shmat: a segment of 2 MiB or more attached where the program lets the kernel choose goes to a 2 MiB
 * boundary (SHM_REMAP over our reservation), and is advised. */
__attribute__((visibility("default"))) void *shmat(int id, const void *address, int flags) {
  if (!next_shmat) next_shmat = (shmat_function)dlsym(RTLD_NEXT, "shmat");
  if (!next_shmat) { errno = ENOSYS; return (void *)-1; }
  struct shmid_ds segment;
  if (address || !atomic_load_explicit(&shared_active, memory_order_relaxed) || !cover_size ||
      shmctl(id, IPC_STAT, &segment) != 0 || segment.shm_segsz < cover_size)
    return next_shmat(id, address, flags);
  uint64_t started = preload_now_ns();
  int saved = errno;
  char *base;
  size_t size;
  char *aligned = reserve_aligned(segment.shm_segsz, &base, &size);
  void *result = aligned ? next_shmat(id, aligned, flags | SHM_REMAP) : (void *)-1;
  if (result == (void *)-1) {
    if (aligned) os_munmap(base, size);
    result = next_shmat(id, NULL, flags); /* as the program asked, with the kernel's own errno */
  } else {
    release_around(base, size, aligned, segment.shm_segsz);
    advise_shared(result, segment.shm_segsz, "shmat");
    errno = saved;
  }
  preload_add_ns(preload_now_ns() - started);
  return result;
}

/* ---- carving small mappings out of 2 MiB-aligned regions -----------------------------------------------
 * Two kinds of request are too small for the cover yet make up most of some programs' memory: runtimes'
 * arenas (CPython's 1 MiB object arenas; HUGIFY_RUNTIME_ARENAS, on by default) and gperftools' TCMalloc's
 * 1 MiB chunks (--heap tcmalloc). Each lands wherever the kernel puts it and is touched before its neighbour exists, so
 * it stays on 4 KiB pages. One carver serves both: a request is handed the next piece of the carver's
 * current region, a 2 MiB-aligned read+write mapping of the preload's, advised MADV_HUGEPAGE, handed out
 * from the bottom up, so neighbouring pieces fill whole huge pages. What it keeps exact:
 * - The program's munmap, mprotect and mremap of its piece act on that piece only (the kernel splits the
 *   region's mapping there); a piece is never handed out twice (no reuse of holes).
 * - A region's unused top stays mapped when the next region starts (unmapping it would split the huge
 *   page its pieces are on): address space, and of memory only what a huge page there zero-filled.
 * - The carver's lock is only *tried*: a thread that finds it held, a signal handler that interrupted its
 *   holder, or a forked child of a thread that held it, gets an ordinary mapping (the caller maps as
 *   usual). Nothing ever waits on it, so nothing can deadlock on it. A forked child shares the regions
 *   copy-on-write, as any mapping.
 * - Runtimes give pieces back whole: when the program unmaps (or MADV_DONTNEEDs) a
 *   piece that shares a huge page with a piece still in use, the kernel splits the page's mapping but keeps
 *   the whole 2 MiB resident until its deferred split runs, under memory pressure: CPython freeing every
 *   other arena kept all of it (bench/runtimes/arena_free.py). So the huge page is split first
 *   (MADV_COLD of the part, which splits a huge page it covers in part) and the part is freed at once; the
 *   rest was already on 4 KiB mappings (docs/runtimes.md, "Bloat").
 * A carver lists its regions (for those checks); it stops carving when the list is full. */
struct carver {
  size_t region_size;          /* a multiple of 2 MiB */
  atomic_flag lock;            /* tried, never waited for */
  char *next, *end;            /* the current region's unused part; guarded by lock */
  char **regions;              /* every region carved so far (read without the lock) */
  int region_max;
  atomic_int region_count;
};

/* Each 2 MiB window that begins inside a fresh piece gets its first touch now, a write of the zero already
 * there: the fault takes a huge page for the whole window. A program whose first touch is a read would
 * otherwise get the huge zero page, and before Linux 6.13 a write to it splits it onto 4 KiB pages (6.1
 * measured: every runtime arena on 4 KiB pages; 6.13+ allocates a huge page there). A window that begins
 * inside an earlier piece was touched when that piece was carved. */
static void first_write(char *piece, size_t length) {
  uintptr_t window = ((uintptr_t)piece + cover_size - 1) & ~(uintptr_t)(cover_size - 1);
  for (; window < (uintptr_t)piece + length; window += cover_size) *(volatile char *)window = 0;
}

/* A piece of `length` bytes from the carver's current region, or NULL (then the caller maps as usual). */
static void *carve(struct carver *carver, size_t length) {
  size_t rounded = preload_page_up(length);
  if (atomic_flag_test_and_set_explicit(&carver->lock, memory_order_acquire)) return NULL;
  if ((size_t)(carver->end - carver->next) < rounded) {
    int count = atomic_load_explicit(&carver->region_count, memory_order_relaxed);
    void *region;
    if (count >= carver->region_max ||
        os_map_aligned(carver->region_size, cover_size, PROT_READ | PROT_WRITE, &region) != 0) {
      atomic_flag_clear_explicit(&carver->lock, memory_order_release);
      return NULL;
    }
    advise(region, carver->region_size);
    carver->regions[count] = region;
    atomic_store_explicit(&carver->region_count, count + 1, memory_order_release);
    carver->next = region;
    carver->end = carver->next + carver->region_size;
  }
  char *piece = carver->next;
  carver->next += rounded;
  atomic_flag_clear_explicit(&carver->lock, memory_order_release);
  first_write(piece, rounded);
  return piece;
}

/* Whether [addr, addr + length) lies inside one of the carver's regions. */
static bool carver_holds(struct carver *carver, void *addr, size_t length) {
  int count = atomic_load_explicit(&carver->region_count, memory_order_acquire);
  for (int i = 0; i < count; i++)
    if ((char *)addr >= carver->regions[i] && (char *)addr + length <= carver->regions[i] + carver->region_size)
      return true;
  return false;
}

/* Before [addr, addr + length) is unmapped or dropped: the part of it in a 2 MiB window it does not cover
 * whole (its head and its tail), when that window is one of the carver's, has its huge page split. */
static void split_before_release(struct carver *carver, void *addr, size_t length) {
  uintptr_t start = (uintptr_t)addr, end = start + length;
  uintptr_t head_end = (start + cover_size - 1) & ~(uintptr_t)(cover_size - 1);
  uintptr_t tail_start = end & ~(uintptr_t)(cover_size - 1);
  if (end <= start) return;
  if (head_end > end) head_end = end;
  if (head_end > start && carver_holds(carver, addr, head_end - start)) os_madvise(addr, head_end - start, MADV_COLD);
  if (tail_start < start) tail_start = start;
  if (tail_start >= head_end && end > tail_start && carver_holds(carver, (void *)tail_start, end - tail_start))
    os_madvise((void *)tail_start, end - tail_start, MADV_COLD);
}

/* Runtimes' arenas (HUGIFY_RUNTIME_ARENAS, on by default): an anonymous private read+write mmap of 64 KiB
 * up to 2 MiB, with no address, no placement flags and no reservation (PROT_NONE, MAP_NORESERVE: guard pages
 * and reservations are never turned into memory), from 2 MiB regions. The first RUNTIME_AFTER such mappings
 * pass through: a short program does not pay for a region. */
#define RUNTIME_PIECE_MIN (64u << 10)
#define RUNTIME_AFTER 8
static bool runtime_enabled;
static atomic_uint runtime_seen;
#define RUNTIME_REGION_MAX 65536 /* 128 GiB of arenas; then they are left to the kernel */
static char *runtime_regions[RUNTIME_REGION_MAX];
static struct carver runtime_carver = {.region_size = 0, /* cover_size, at start */ .lock = ATOMIC_FLAG_INIT, .regions = runtime_regions,
                                       .region_max = RUNTIME_REGION_MAX};

static bool wants_runtime_piece(void *addr, size_t length, int prot, int flags) {
  if (!runtime_enabled || addr || length < RUNTIME_PIECE_MIN || length >= cover_size || prot != (PROT_READ | PROT_WRITE))
    return false;
  if (!(flags & MAP_ANONYMOUS) || (flags & MAP_TYPE) != MAP_PRIVATE) return false;
  if (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_STACK | MAP_GROWSDOWN | MAP_32BIT | MAP_HUGETLB | MAP_NORESERVE |
               MAP_POPULATE))
    return false;
  return cover_on() && atomic_fetch_add_explicit(&runtime_seen, 1, memory_order_relaxed) >= RUNTIME_AFTER;
}

/* TCMalloc's chunks (--heap tcmalloc): gperftools takes its memory 1 MiB at a time (2.10, Debian 12: mmap of
 * 1 MiB + 4 KiB, then munmap of the 4 KiB that is not 8 KiB-aligned; measured: 10.8 % of a 256 MiB heap of
 * 64-byte nodes huge. 2.16, Debian 13: exactly 1 MiB, with the end of its previous chunk as a hint, which a
 * top-down kernel places below it instead: each chunk touched alone, 16 of 63 MiB huge). In that mode such
 * requests (exactly MAP_PRIVATE|MAP_ANONYMOUS, read-write, 1 MiB up to 2 MiB, no address or only a hint:
 * never MAP_FIXED) are carved from regions of 64 MiB (address space: resident only as used), and an munmap
 * of at most 8 KiB inside a region (that alignment slack) is not done: a hole would split the huge page
 * around it. So this carver lists its regions. A hint is a wish the kernel too may not grant: gperftools
 * takes the chunk wherever it lands. */
#define TCMALLOC_REGION_MAX 4096 /* 256 GiB of heap; then TCMalloc's chunks are left to the kernel */
#define TCMALLOC_PIECE_MIN ((size_t)OS_MIB(1))
#define TCMALLOC_SLACK_MAX 8192
static atomic_int tcmalloc_active;
static char *tcmalloc_regions[TCMALLOC_REGION_MAX];
static struct carver tcmalloc_carver = {.region_size = OS_MIB(64), .lock = ATOMIC_FLAG_INIT,
                                        .regions = tcmalloc_regions, .region_max = TCMALLOC_REGION_MAX};

static bool wants_tcmalloc_piece(size_t length, int prot, int flags) { /* any address: a hint (flags: no MAP_FIXED) */
  return atomic_load_explicit(&tcmalloc_active, memory_order_relaxed) && flags == (MAP_PRIVATE | MAP_ANONYMOUS) &&
         prot == (PROT_READ | PROT_WRITE) && length >= TCMALLOC_PIECE_MIN && length < cover_size &&
         wants_cover(cover_size, flags);
}

bool preload_heap_keeps(void *addr, size_t length) {
  if (!atomic_load_explicit(&tcmalloc_active, memory_order_relaxed) || length > TCMALLOC_SLACK_MAX) return false;
  return carver_holds(&tcmalloc_carver, addr, length);
}

void preload_heap_releasing(void *addr, size_t length) {
  if (runtime_enabled) split_before_release(&runtime_carver, addr, length);
}

/* The carver that serves this request, or NULL. */
static struct carver *carver_for(void *addr, size_t length, int prot, int flags) {
  if (wants_tcmalloc_piece(length, prot, flags)) return &tcmalloc_carver;
  if (wants_runtime_piece(addr, length, prot, flags)) return &runtime_carver;
  return NULL;
}

/* ---- private anonymous memory ------------------------------------------------------------------------- */

/* A mapping of `length` bytes aligned to the cover size: map one cover size more, unmap the ends. */
static void *map_aligned(size_t length, int prot, int flags, int fd, off_t offset) {
  size_t rounded = preload_page_up(length), reserve = rounded + cover_size - preload_page_size();
  if (reserve < rounded) return call_next_mmap(NULL, length, prot, flags, fd, offset);
  char *raw = call_next_mmap(NULL, reserve, prot, flags & ~MAP_POPULATE, fd, offset);
  if (raw == MAP_FAILED) return call_next_mmap(NULL, length, prot, flags, fd, offset);
  uintptr_t aligned = ((uintptr_t)raw + cover_size - 1) & ~(uintptr_t)(cover_size - 1);
  size_t head = aligned - (uintptr_t)raw, tail = reserve - head - rounded;
  if (head) os_munmap(raw, head);
  if (tail) os_munmap((char *)aligned + rounded, tail);
  advise((void *)aligned, rounded);
  if (flags & MAP_POPULATE)
    os_madvise((void *)aligned, rounded, (prot & PROT_WRITE) ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
  return (void *)aligned;
}

__attribute__((visibility("default"))) void *mmap(void *addr, size_t length, int prot, int flags, int fd,
                                                  off_t offset) {
  struct carver *carver = carver_for(addr, length, prot, flags);
  if (carver) {
    uint64_t started = preload_now_ns();
    void *piece = carve(carver, length);
    preload_add_ns(preload_now_ns() - started);
    if (piece) return piece;
  }
  if (wants_shared_cover(length, flags)) {
    uint64_t started = preload_now_ns();
    int saved = errno;
    void *result;
    if (addr || (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE))) {
      result = call_next_mmap(addr, length, prot, flags, fd, offset);
      if (result != MAP_FAILED) advise_shared(result, length, "mmap MAP_SHARED|MAP_ANONYMOUS");
    } else {
      result = map_shared_aligned(length, prot, flags, offset);
    }
    if (result != MAP_FAILED) errno = saved;
    preload_add_ns(preload_now_ns() - started);
    return result;
  }
  if (!wants_cover(length, flags)) return call_next_mmap(addr, length, prot, flags, fd, offset);
  uint64_t started = preload_now_ns();
  int saved = errno;
  void *result;
  /* The kernel aligns anonymous mappings whose length is a multiple of the PMD size by itself (not of an
   * mTHP size); a caller's address (hint or fixed) is the caller's business. Either way it is advised. */
  if (addr || (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) || (cover_is_pmd && length % cover_size == 0)) {
    result = call_next_mmap(addr, length, prot, flags, fd, offset);
    if (result != MAP_FAILED) advise(result, length);
  } else {
    result = map_aligned(length, prot, flags, fd, offset);
  }
  if (result != MAP_FAILED) errno = saved;
  preload_add_ns(preload_now_ns() - started);
  return result;
}

#ifdef __GLIBC__ /* musl's headers make mmap64 a name for mmap: its programs call mmap */
__attribute__((visibility("default"), alias("mmap"))) void *mmap64(void *addr, size_t length, int prot,
                                                                   int flags, int fd, off_t offset);
#endif

/* ---- the modes ---------------------------------------------------------------------------------- */

bool preload_glibc_tunable_is(const char *key, const char *value) {
  /* No snprintf: this runs first in the constructor, and its first use faults in libc's printf code. */
  const char *tunables = getenv("GLIBC_TUNABLES");
  size_t key_length = strlen(key), value_length = strlen(value);
  for (const char *p = tunables; p && *p; p = strchr(p, ':'), p = p ? p + 1 : NULL)
    if (strncmp(p, key, key_length) == 0 && p[key_length] == '=' &&
        strncmp(p + key_length + 1, value, value_length) == 0 &&
        (p[key_length + 1 + value_length] == ':' || p[key_length + 1 + value_length] == '\0'))
      return true;
  return false;
}

/* The library that malloc resolves to in this process ("" when unknown). */
const char *preload_malloc_library(void) {
  Dl_info info;
  void *address = dlsym(RTLD_DEFAULT, "malloc");
  if (!address || !dladdr(address, &info) || !info.dli_fname) return "";
  return info.dli_fname;
}

static int find_library_owner(struct dl_phdr_info *info, size_t size, void *context) {
  (void)size;
  const char **owner = context;
  /* valgrind preloads vgpreload_core-ARCH.so into every program it runs, whatever the tool */
  const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
  if (slash && strncmp(slash + 1, "vgpreload_core", 14) == 0) under_valgrind = true;
  if (!*owner) *owner = elf_heap_owner_of_library(info->dlpi_name);
  return 0;
}

/* A sanitizer runtime as a loaded library (gcc's libasan.so, valgrind's vgpreload_memcheck): found at
 * start, from the names of the loaded objects. */
static const char *find_library_heap_owner(void) {
  const char *owner = NULL;
  dl_iterate_phdr(find_library_owner, &owner);
  return owner;
}

static const char *owner_fallback_detail(const char *allocator) {
  return under_valgrind ? "valgrind redirects malloc to its core" : allocator[0] ? allocator : "its runtime";
}

/* A runtime linked into the program (clang's static sanitizer runtimes): their init symbol. Five dlsym
 * misses cost about 20 us, a tenth of what the preload adds to /bin/true, and only the report and
 * HUGIFY_VERBOSE need the answer: looked up at the first question (preload_heap_owner), not at start. Asked
 * only by the constructor (HUGIFY_VERBOSE) and the report at exit, never from a mapping, so no signal handler
 * can wait here for its own thread (dlsym could not be called from one anyway). */
static pthread_once_t symbol_owner_once = PTHREAD_ONCE_INIT;
static void find_symbol_heap_owner(void) {
  if (heap_owner) return;
  for (size_t i = 0; !heap_owner && elf_heap_owner_symbol(i); i++)
    if (dlsym(RTLD_DEFAULT, elf_heap_owner_symbol(i))) heap_owner = elf_heap_owner_of_symbol(elf_heap_owner_symbol(i));
  if (heap_owner && preload_options()->heap != HEAP_OFF)
    preload_fallback("heap", "malloc is %s's allocator (%s): it maps its memory with its own system calls, which "
                     "neither glibc's tunables nor the mmap cover reach (the program's own mmaps are still covered)",
                     heap_owner, owner_fallback_detail(preload_malloc_library()));
}

const char *preload_heap_owner(void) {
  pthread_once(&symbol_owner_once, find_symbol_heap_owner);
  return heap_owner;
}
bool preload_under_valgrind(void) { return under_valgrind; }

static void check_thp_usable(const char *mode_name) {
  char thp[16];
  probe_thp_setting("enabled", thp, sizeof thp);
  if (thp[0] == '\0' || strcmp(thp, "never") == 0) {
    preload_fallback("heap", "--heap %s: transparent huge pages are %s on this machine (change with: echo "
                     "madvise > " OS_SYSFS_THP "/enabled)", mode_name, thp[0] ? "'never'" : "absent");
    return;
  }
  if (thp_disabled_by_prctl()) {
    preload_fallback("heap", "the process disabled THP (prctl PR_SET_THP_DISABLE, inherited from its parent)");
    return;
  }
  atomic_store(&cover_active, 1);
}

static void read_pool(uint64_t *free_pages, uint64_t *total_pages) {
  struct hugify_hugetlb_size pool;
  *free_pages = *total_pages = 0;
  if (os_hugetlb_read(os_pmd_size(), &pool) == 0) {
    *free_pages = pool.available;
    *total_pages = pool.total;
  }
}

/* The cover's unit from the kernel's sizes: the PMD's file alone where it can be collapsed (every start
 * reads it), the mTHP settings only where it is too big (512 MiB on 64 KiB pages). */
static void set_cover_size(bool told) {
  struct page_sizes_choice choice = {.collapse = true, .fault_size = os_pmd_size()};
  if (!page_sizes_collapse_wise(choice.fault_size)) os_page_sizes_choose("", os_page_sizes(), &choice);
  cover_size = (size_t)choice.fault_size;
  cover_is_pmd = choice.fault_size == os_pmd_size();
  runtime_carver.region_size = cover_size;
  char pmd[32];
  page_sizes_name(os_pmd_size(), pmd, sizeof pmd);
  if (told && !cover_size)
    preload_fallback("heap", "the PMD huge page is %s, too big to fault or collapse wisely, and no smaller mTHP "
                     "size is enabled: memory stays on base pages (fix: echo madvise > " OS_SYSFS_THP
                     "/hugepages-2048kB/enabled, or another size there)", pmd);
  else if (told && !cover_is_pmd)
    preload_fallback("heap", "the PMD huge page is %s, too big to fault or collapse wisely: memory is aligned "
                     "and advised for the largest enabled mTHP size instead", pmd);
}

void preload_heap_start(const struct hugify_options *options) {
  next_mmap = (mmap_function)dlsym(RTLD_NEXT, "mmap");
  heap_owner = find_library_heap_owner();
  /* Most of what follows only says things (fallbacks), for a report or for stderr. Without either (a short
   * program under `hugify env`), it is skipped, and the THP mode is read at the first mapping the cover
   * would take (cover_on), not here: the start stays near an empty preload's (docs/run.md). */
  bool told = options->report[0] || options->verbose;
  const char *allocator = told ? preload_malloc_library() : "";
  /* Under valgrind, dlsym still finds libc's malloc: valgrind redirects it below the symbol tables. A
   * static sanitizer runtime (found later) owns malloc itself, so malloc is not libc's then. */
  bool glibc = strstr(allocator, "/libc.so") != NULL && !heap_owner;
  bool musl = strstr(allocator, "/ld-musl-") != NULL && !heap_owner; /* musl's libc is its loader */
  if (told && heap_owner && options->heap != HEAP_OFF)
    preload_fallback("heap", "malloc is %s's allocator (%s): it maps its memory with its own system calls, which "
                     "neither glibc's tunables nor the mmap cover reach (the program's own mmaps are still covered)",
                     heap_owner, owner_fallback_detail(allocator));
  if (options->verbose) preload_heap_owner(); /* its line on stderr comes at start, as the others do */
  if (options->heap != HEAP_OFF) set_cover_size(told);
  switch (options->heap) {
  case HEAP_OFF: return;
  case HEAP_AUTO:
  case HEAP_THP:
    /* Shared memory follows shmem_enabled, not enabled: covered whatever the THP mode. */
    if (!thp_disabled_by_prctl()) atomic_store(&shared_active, 1);
    if (told) check_thp_usable(options_heap_name(options->heap));
    else atomic_store(&cover_pending, 1);
    runtime_enabled = options->runtime_arenas && !heap_owner; /* a sanitizer's interceptors see every mapping */
    if (glibc && !preload_glibc_tunable_is("glibc.malloc.hugetlb", "1"))
      preload_fallback("heap glibc malloc", "GLIBC_TUNABLES lacks glibc.malloc.hugetlb=1 (start the program with "
                       "`hugify run`): malloc's own memory is not advised");
    if (musl)
      preload_fallback("heap musl malloc", "musl's malloc maps its memory with its own system calls and has no "
                       "huge-page setting: only mmap() called by name (the program's, a runtime's) is placed and "
                       "advised");
    return;
  case HEAP_HUGETLB:
    if (told) read_pool(&pool_free_at_start, &pool_total_at_start);
    if (glibc && !preload_glibc_tunable_is("glibc.malloc.hugetlb", "2"))
      preload_fallback("heap glibc malloc", "GLIBC_TUNABLES lacks glibc.malloc.hugetlb=2 (start the program with "
                       "`hugify run --heap hugetlb`)");
    return;
  case HEAP_MIMALLOC:
  case HEAP_JEMALLOC:
  case HEAP_TCMALLOC: {
    const char *name = options->heap == HEAP_MIMALLOC   ? "libmimalloc"
                       : options->heap == HEAP_JEMALLOC ? "libjemalloc"
                                                        : "libtcmalloc";
    if (told && !strstr(allocator, name))
      preload_fallback("heap", "--heap %s: malloc is %s, not %s (start the program with `hugify run --heap %s`)",
                       options_heap_name(options->heap), allocator[0] ? allocator : "unknown", name,
                       options_heap_name(options->heap));
    /* gperftools' TCMalloc has no huge-page setting of its own: its chunks (mmap, TCMALLOC_SKIP_SBRK) are
     * placed and advised by the cover, as other allocators' are in auto mode. */
    if (options->heap == HEAP_TCMALLOC) {
      check_thp_usable(options_heap_name(options->heap));
      atomic_store(&tcmalloc_active, atomic_load(&cover_active));
    }
    return;
  }
  case HEAP_MODE_COUNT: return;
  }
}

void preload_heap_at_exit(uint64_t heap_resident, uint64_t heap_hugetlb) {
  if (preload_options()->heap != HEAP_HUGETLB || heap_resident <= heap_hugetlb + os_pmd_size()) return;
  uint64_t free_now, total_now;
  read_pool(&free_now, &total_now);
  preload_fallback("heap hugetlb",
                   "%llu MiB of the heap on normal pages: the PMD-size pool had %llu free pages (of %llu) at start and "
                   "%llu at exit; glibc falls back to normal pages when the pool is short and for the main arena's "
                   "first allocations (grow it with `hugify pool`)",
                   (unsigned long long)((heap_resident - heap_hugetlb) >> 20), (unsigned long long)pool_free_at_start,
                   (unsigned long long)pool_total_at_start, (unsigned long long)free_now);
}
