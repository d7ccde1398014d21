/* SPDX-License-Identifier: MIT */
/* inspect.h - the pure part of hugify_inspect and hugify_collapse: which class a mapping is, why its
 * memory is not huge, whether MADV_COLLAPSE may touch it. Functions of parsed smaps only, so they are
 * tested on fixture text (tests/unit/inspect_classify.cpp). Not exported. */
#ifndef HUGIFY_INSPECT_H
#define HUGIFY_INSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hugify.h"
#include "procfs.h"

/* What a process's mappings do not show, for allocator_of_mappings: its executable is a Go program (its ELF),
 * and PYTHONMALLOC in its environment gives CPython's objects to malloc. */
struct allocator_facts {
  bool go_program;
  bool python_malloc;
};

/* What inspect_classify needs besides smaps, read by hugify_inspect (or written by a test). */
struct inspect_context {
  int thp_disabled;               /* 1: THP_enabled: 0 in /proc/PID/status; 0; -1 unknown */
  bool thp_stance_visible;        /* some THP size is "always" (inspect_thp_stance_visible) */
  const char *thp_mode;           /* system THP mode: "always", "madvise", "never", "" (no THP) */
  const char *shmem_mode;         /* shmem_enabled: "always", "within_size", "advise", "never", ... */
  uint64_t pmd_size;              /* THP size (0: 2 MiB) */
  const uint64_t *stack_pointers; /* of threads blocked in the kernel (os_read_stack_pointers) */
  size_t stack_pointer_count;
  struct allocator_facts allocator; /* what the mappings do not show of the allocator (allocator_of_mappings) */
};

/* Largest PROT_NONE mapping taken for a thread stack's guard page (glibc/musl use one page by default;
 * pthread_attr_setguardsize can make it larger). */
#define INSPECT_GUARD_MAX ((uint64_t)1024 * 1024)

/* Fill report->total, classes, not_huge, collapsible, mappings, objects, stacks_by_*, thp_stance and allocator
 * from smaps. Leaves pid, command, the other thp_* fields and reason alone. Returns 0 or -ENOMEM (arrays malloc'd; free with
 * hugify_inspect_report_free). */
int inspect_classify(const struct smaps_vma *vmas, size_t count, const struct inspect_context *context,
                     struct hugify_inspect_report *report);

/* Usage of one mapping as smaps gives it (see struct hugify_usage). */
void inspect_vma_usage(const struct smaps_vma *vma, struct hugify_usage *usage);

/* Bytes of [start, end) in windows of `window` bytes aligned to `window`. */
uint64_t aligned_window_bytes(uint64_t start, uint64_t end, uint64_t window);

/* Private anonymous memory: no file behind it ("", "[heap]", "[stack]", "[anon:NAME]"). */
bool vma_is_private_anonymous(const struct smaps_vma *vma);

/* The shape MADV_COLLAPSE works on, whatever the program asked: private anonymous, writable, not hugetlb, at
 * least one aligned window of pmd_size. */
bool vma_collapse_candidate(const struct smaps_vma *vma, uint64_t pmd_size);
/* Whether MADV_COLLAPSE may be asked for this mapping: a candidate not marked MADV_NOHUGEPAGE. */
bool vma_collapse_eligible(const struct smaps_vma *vma, uint64_t pmd_size);

/* ---- what the program excluded from THP ---- */

/* The process's THP stance from THP_enabled (thp_disabled: 1, 0, -1 unknown), whether "disabled except
 * advised" can show at all (`visible`: some THP size is "always"), and smaps: with THP_enabled: 1 and
 * `visible`, the unadvised writable anonymous mappings with an aligned window say it: THPeligible 1 in any
 * of them is "enabled", 0 in all is "disabled except advised" (measured on Linux 6.18). */
enum hugify_thp_stance inspect_thp_stance(int thp_disabled, bool visible, const struct smaps_vma *vmas,
                                          size_t count, uint64_t pmd_size);
/* Why the program excluded this mapping from THP: HUGIFY_WHY_THP_DISABLED (the whole process),
 * HUGIFY_WHY_NOHUGEPAGE, HUGIFY_WHY_THP_EXCEPT_ADVISED (an unadvised anonymous or shared memory mapping of a
 * process that disabled THP except where advised), HUGIFY_WHY_THP_NOT_ELIGIBLE (a collapse candidate with
 * THPeligible: 0 while `visible`); HUGIFY_WHY_NONE when it did not. */
enum hugify_not_huge_reason vma_opt_out(const struct smaps_vma *vma, enum hugify_thp_stance stance, bool visible,
                                        uint64_t pmd_size);
/* Whether the opt-out can be overridden: the kernel itself refuses MADV_COLLAPSE for THP_DISABLED and
 * NOHUGEPAGE (EINVAL, measured on Linux 6.18), not for the other two. */
bool opt_out_overridable(enum hugify_not_huge_reason why);
/* True when some THP size is in mode "always" (directly, or by "inherit" while the top level is) given the
 * top-level mode: only then does "disabled except advised" show in smaps. Reads sysfs. */
bool inspect_thp_stance_visible(const char *thp_mode);
/* Shared memory (shmem): shared anonymous, SysV, memfd, tmpfs files; hugetlb excluded. */
bool vma_is_shmem(const struct smaps_vma *vma);
/* A shmem mapping can be PMD-mapped only where its address and its file offset agree modulo the PMD size. */
bool vma_shmem_aligned(const struct smaps_vma *vma, uint64_t pmd_size);
/* shmem_enabled as it applies to PMD-sized pages: the per-size knob unless it says "inherit". */
void inspect_shmem_mode(char *out, size_t cap);

/* ---- every process, ranked (hugify inspect --all) ---- */

struct inspect_process {
  int pid;
  char command[64];          /* /proc/PID/comm */
  struct smaps_rollup memory;
};
struct inspect_ranking {
  struct inspect_process *processes; /* by anonymous memory not on huge pages, most first (malloc'd) */
  size_t count;
  unsigned unreadable;               /* processes whose smaps_rollup this caller may not read */
};
/* Read /proc/PID/smaps_rollup of every process and rank them by anonymous memory not on huge pages (ties:
 * by pid). Kernel threads are left out. Returns 0 or -errno (/proc cannot be listed, out of memory). */
int inspect_rank_processes(struct inspect_ranking *out);
void inspect_ranking_free(struct inspect_ranking *ranking);

/* ---- which allocator ---- */

/* What backs a process's data: the malloc it uses, identified by a library it maps, or a runtime whose own
 * allocator takes the data with mmap, bypassing malloc (inspect reports it; the agent names its setting that
 * keeps huge pages through churn). One table in inspect.c, a row per kind. */
enum allocator_kind {
  ALLOCATOR_UNKNOWN = 0, /* statically linked or not identified */
  ALLOCATOR_GLIBC,
  ALLOCATOR_JEMALLOC,
  ALLOCATOR_MIMALLOC,
  ALLOCATOR_TCMALLOC,
  ALLOCATOR_PYMALLOC,    /* CPython's obmalloc (not with PYTHONMALLOC=malloc) */
  ALLOCATOR_V8,          /* node's V8 heap */
  ALLOCATOR_JVM,         /* the JVM's Java heap */
  ALLOCATOR_GO,          /* the Go runtime's heap */
  ALLOCATOR_COUNT
};
/* The allocator a mapping's path names (".../libjemalloc.so.2" -> jemalloc, "/usr/bin/python3.11" ->
 * pymalloc), or UNKNOWN. */
enum allocator_kind allocator_of_path(const char *path);
/* The allocator a program's name says it runs ("python3.11" -> pymalloc, "node" -> v8), or UNKNOWN: for a
 * program about to run (check offers PYTHONMALLOC=malloc for CPython). */
enum allocator_kind allocator_of_program(const char *name);
/* Of two identifications, the one that tells more (a runtime over a malloc library over glibc over unknown). */
enum allocator_kind allocator_prefer(enum allocator_kind a, enum allocator_kind b);
/* Whether the data bypasses malloc: a runtime's own allocator (pymalloc, v8, jvm, go). */
bool allocator_is_runtime(enum allocator_kind allocator);
/* "glibc", "jemalloc", "mimalloc", "tcmalloc", "pymalloc", "v8", "jvm", "go", "unknown" (at most 15 bytes: the
 * report's allocator[16]). */
const char *allocator_name(enum allocator_kind allocator);
/* What holds the data, for people: "CPython obmalloc arenas (1 MiB mmaps)". */
const char *allocator_description(enum allocator_kind allocator);
/* The setting that keeps this allocator's huge pages through churn (docs/servers.md, measured on Redis). */
const char *allocator_advice(enum allocator_kind allocator);

/* The allocator of allocator_name's name ("jemalloc" -> ALLOCATOR_JEMALLOC); UNKNOWN for any other. */
enum allocator_kind allocator_of_name(const char *name);
/* The allocator of a process from its mappings' paths (the most telling one, allocator_prefer) and what they do
 * not show (facts: NULL when not known). */
enum allocator_kind allocator_of_mappings(const struct smaps_vma *vmas, size_t count,
                                          const struct allocator_facts *facts);

/* The setting of the report's allocator that keeps huge pages through churn, when its heap shows memory given
 * back inside huge pages: heap and anonymous memory partly huge while eligible windows of it are on 4 KiB
 * pages (or any such windows while THP is "always", where they would have been huge from the first fault).
 * NULL otherwise, and when the allocator is not identified. */
const char *inspect_churn_advice(const struct hugify_inspect_report *report);

/* A process's resident memory by folio size (procfs.h struct folio_bytes: base pages, each mTHP size, PMD
 * THPs, hugetlb), from its pagemap and /proc/kpageflags over every mapping with resident pages. 0, or -EPERM
 * (PFNs and kpageflags need CAP_SYS_ADMIN: root) / -errno, with the reason in `reason`. */
int inspect_folio_sizes(int pid, struct folio_bytes *out, char *reason, size_t cap);

#endif
