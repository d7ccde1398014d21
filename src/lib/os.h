/* SPDX-License-Identifier: MIT */
/* os.h - raw syscall wrappers and file readers, and the Linux-specific constants that older headers may
 * lack. One error convention: functions return -errno on failure (like liburing's wrappers), never -1 with
 * errno. What is read is parsed by procfs.h (pure); feature probes and THP settings are probe.h's. */
#ifndef HUGIFY_OS_H
#define HUGIFY_OS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/uio.h> /* struct iovec: glibc's sys/mman.h brings it, musl's does not */

#include "hugify.h"
#include "page_sizes.h"
#include "procfs.h" /* struct resident_bytes */
#include "reason.h" /* reason_add: most users of os.h fill reasons */

struct smaps_vma;

/* Constants newer than Debian 12's headers (glibc 2.36, linux-libc-dev 6.1), or missing from older ones:
 * the one place for them (the library, the preload, the test helpers and the benches include os.h). */
#ifndef MADV_HUGEPAGE
#define MADV_HUGEPAGE 14
#endif
#ifndef MADV_NOHUGEPAGE
#define MADV_NOHUGEPAGE 15
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGETLB
#define MAP_HUGETLB 0x40000
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MREMAP_FIXED
#define MREMAP_FIXED 2
#endif
#ifndef PR_SET_THP_DISABLE
#define PR_SET_THP_DISABLE 41
#endif
#ifndef PR_GET_THP_DISABLE
#define PR_GET_THP_DISABLE 42
#endif
#ifndef PR_THP_DISABLE_EXCEPT_ADVISED /* Linux 6.18: THP off except where the program said MADV_HUGEPAGE */
#define PR_THP_DISABLE_EXCEPT_ADVISED (1 << 1)
#endif
#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

#define OS_HUGE_1G (UINT64_C(1) << 30)
#define OS_MIB(n) ((uint64_t)(n) * 1024 * 1024) /* a size in MiB; never a page size: those are os_page_sizes() */
#define OS_SYSFS_HUGEPAGES "/sys/kernel/mm/hugepages"
#define OS_SYSFS_THP "/sys/kernel/mm/transparent_hugepage"

/* ---- files ---- */
/* Whole file into *text, a malloc'd NUL-terminated buffer (procfs files report size 0, so read to EOF). Only
 * a regular file is read (a FIFO or device is -EINVAL: safe_file_open_read), and at most OS_READ_FILE_MAX
 * bytes (-EFBIG beyond: smaps of 65530 mappings is ~70 MB). Returns 0 or -errno (*text NULL). length may be
 * NULL. */
#define OS_READ_FILE_MAX OS_MIB(256)
int os_read_file(const char *path, char **text, size_t *length);
/* The same from an fd opened by the caller (safe_file_open_read, then checks on it), which it closes. */
int os_read_fd(int fd, char **text, size_t *length);
/* The same into a buffer the caller keeps across reads (*buffer malloc'd and grown here, *cap its size; both
 * 0 the first time; the caller frees it): a loop reading thousands of /proc files allocates nothing per
 * file. Returns 0 or -errno (the buffer kept either way). */
int os_read_file_reusing(const char *path, char **buffer, size_t *cap, size_t *length);
/* Small regular file into buf (NUL-terminated, trailing newline removed); one read of at most cap - 1 bytes.
 * Returns length or -errno. */
ssize_t os_read_small(const char *path, char *buf, size_t cap);
/* root + absolute path into buf ("/" or "" as root: the path itself): a captured tree's copy of a file. */
void root_path(char *buf, size_t cap, const char *root, const char *path);
/* Decimal unsigned integer file (sysfs counters). Returns 0 or -errno. */
int os_read_u64(const char *path, uint64_t *value);
/* The one walk over /proc: visit(pid) for every process there now, until a visit returns nonzero (which is
 * then returned). 0, or -errno when /proc cannot be read. */
int os_for_each_process(int (*visit)(pid_t pid, void *context), void *context);
/* Write text to an existing file (sysfs knob). Returns 0 or -errno. */
int os_write_file(const char *path, const char *text);

/* ---- /proc/PID readers (pid 0 = self) ---- */
/* Read and parse /proc/<pid>/smaps. *out malloc'd; returns the count or -errno. */
long os_read_smaps(int pid, struct smaps_vma **out);
/* Stack pointers of the threads of pid that are blocked in the kernel; *out malloc'd. Returns the count, or
 * -errno when no thread's file could be read (EACCES: needs PTRACE_MODE_ATTACH on the target). */
long os_read_stack_pointers(int pid, uint64_t **out);
/* Each thread's time on a CPU and waiting for one (/proc/PID/task/TID/schedstat), at most cap threads.
 * Returns the count, or -errno when the task directory cannot be read. */
struct os_task_times { int tid; uint64_t run_ns, wait_ns; };
long os_read_task_times(int pid, struct os_task_times *out, size_t cap);
/* THP_enabled of /proc/PID/status: 1, 0 (THP disabled by prctl PR_SET_THP_DISABLE), or -errno (-ENOENT also
 * when the kernel does not report the field). */
int os_read_thp_enabled(int pid);

/* ---- memory system calls ----
 * The library's own mappings go through these, never through mmap()/munmap()/mremap()/madvise() by name:
 * inside libhugify-preload.so those names are the preload's interposed wrappers (exported, no
 * -Bsymbolic), so a call by name from the library would be covered, sampled and timed as if the host had
 * made it. These are the system calls themselves (syscall(2), as mimalloc's prim layer does), -errno on
 * failure. */
/* The new mapping in *out (NULL on failure). Returns 0 or -errno. */
int os_mmap(void *address, size_t length, int prot, int flags, int fd, off_t offset, void **out);
int os_munmap(void *address, size_t length);
/* mremap; new_address is used with MREMAP_FIXED. The mapping's address in *out. Returns 0 or -errno. */
int os_mremap(void *old_address, size_t old_length, size_t new_length, int flags, void *new_address, void **out);
int os_madvise(void *address, size_t length, int advice);
int os_mprotect(void *address, size_t length, int prot);

/* ---- syscalls ---- */
/* A pidfd, or -errno. */
int os_pidfd_open(pid_t pid);
/* Bytes advised, or -errno. */
ssize_t os_process_madvise(int pidfd, const struct iovec *ranges, size_t count, int advice);
/* A private anonymous mapping of `length` bytes whose start is a multiple of `alignment` (a power of two;
 * 0 or up to the base page size: any), carved out of a larger mapping. Returns 0 or -errno. */
int os_map_aligned(size_t length, size_t alignment, int prot, void **out);
/* Name an anonymous mapping (shows in maps/smaps as [anon:NAME]). Returns 0 or -errno. */
int os_name_anon(void *start, size_t length, const char *name);

/* ---- page sizes (page_sizes.h): the base page, the PMD, the mTHP and hugetlb sizes ---- */
/* Read under a directory that stands in for / ("" for /: a captured tree's base page is this machine's).
 * 0 or -errno (-EINVAL: the kernel reports sizes page_sizes_parse cannot take). */
int os_page_sizes_read(const char *root, struct page_sizes *out);
/* This kernel's, read once (they are fixed for its life); never NULL (on a failed read: the base page and
 * the PMD it implies, no mTHP or hugetlb sizes). */
const struct page_sizes *os_page_sizes(void);
uint64_t os_pmd_size(void);  /* os_page_sizes()->pmd, from hpage_pmd_size alone (read once) */
uint64_t os_base_page(void); /* os_page_sizes()->base */
/* What to do on these sizes now: whether faults take each mTHP size is read each call (settings change). */
void os_page_sizes_choose(const char *root, const struct page_sizes *sizes, struct page_sizes_choice *out);

/* ---- hugetlb sizes ---- */
/* Page sizes of /sys/kernel/mm/hugepages, ascending. Returns the count (<= cap) or -errno. */
int os_hugetlb_sizes(uint64_t *sizes, int cap);
/* The same for any directory of "hugepages-<N>kB" entries (per-node pools, mTHP controls, a captured tree). */
int os_hugepage_size_dirs(const char *path, uint64_t *sizes, int cap);
/* The per-size counters of /sys/kernel/mm/hugepages/hugepages-NkB, and `available` (free - reserved) from
 * them: the one place that subtraction is made. Returns 0 or -errno. */
int os_hugetlb_read(uint64_t page_size, struct hugify_hugetlb_size *out);
/* The same under a directory that stands in for / ("" for /): a captured tree (hugify status --root). */
int os_hugetlb_read_under(const char *root, uint64_t page_size, struct hugify_hugetlb_size *out);
/* Path of a per-size sysfs file: OS_SYSFS_HUGEPAGES/hugepages-<N>kB/<leaf>. */
void os_hugetlb_path(char *buf, size_t cap, uint64_t page_size, const char *leaf);
/* mmap flags selecting a hugetlb page size. */
int os_map_hugetlb_flags(uint64_t page_size);

/* ---- PAGEMAP_SCAN (Linux 6.7+): present pages of a range, split into huge / not huge ---- */
/* Returns 0, -ENOTTY when the kernel lacks PAGEMAP_SCAN, or -errno. Zero-page mappings count in `zero`
 * only. */
int os_pagemap_resident(uintptr_t start, uintptr_t end, struct resident_bytes *out);
/* The same over an open /proc/PID/pagemap (another process's memory; needs PTRACE_MODE_READ to open). */
int os_pagemap_resident_fd(int pagemap_fd, uintptr_t start, uintptr_t end, struct resident_bytes *out);
/* The same per window of `window` bytes from start, in one walk: windows[(end - start + window - 1) /
 * window] is filled (zeroed first). Returns 0, -ENOTTY or -errno. */
int os_pagemap_windows_fd(int pagemap_fd, uintptr_t start, uintptr_t end, uint64_t window,
                          struct resident_bytes *windows);


/* ---- the plan's walk on every kernel: PAGEMAP_SCAN where the kernel has it (6.7+), else the pagemap
 * entries read in batches and, with CAP_SYS_ADMIN, the kpageflags of the PFNs of each run that can be one
 * huge page (procfs.h decodes both) ---- */
enum os_walk_source {
  OS_WALK_SCAN,       /* PAGEMAP_SCAN: exact */
  OS_WALK_KPAGEFLAGS, /* pagemap + kpageflags: exact presence and zero page; huge = a whole THP mapped in place */
  OS_WALK_PRESENCE,   /* pagemap without PFNs (no CAP_SYS_ADMIN): presence only (the zero page counts as
                       * present), `huge` always 0: the caller takes hugeness from smaps */
};
struct os_walk {
  int pagemap, kpageflags; /* fds, -1 when not open */
  uint64_t zero_pfn;       /* the shared zero page's PFN, 0 when not known */
  enum os_walk_source source;
};
/* Open the walk of pid's memory (0: the caller's). scan: the kernel has PAGEMAP_SCAN (probe.h says) and it
 * is to be used; false reads the entries even where it has it (tests compare the two). 0 or -errno (the
 * pagemap cannot be opened: EACCES/EPERM without PTRACE_MODE_READ on the process). */
int os_walk_open(int pid, bool scan, struct os_walk *w);
void os_walk_close(struct os_walk *w);
/* One walk of [start, end) per window of `window` bytes from start (windows[(end - start + window - 1) /
 * window] zeroed first), as os_pagemap_windows_fd. 0 or -errno. */
int os_walk_windows(const struct os_walk *w, uintptr_t start, uintptr_t end, uint64_t window,
                    struct resident_bytes *windows);
/* What the walk is, for reasons: "PAGEMAP_SCAN", "pagemap + kpageflags", "pagemap presence only". */
const char *os_walk_name(enum os_walk_source source);

/* Memory of [start, end) by folio size (procfs.h kpageflags_folios), through an open walk that reads
 * kpageflags (OS_WALK_KPAGEFLAGS: root). Entries are read a PMD at a time (an anonymous folio never crosses a
 * PMD boundary). 0, -EPERM (PFNs hidden: no CAP_SYS_ADMIN) or -errno. */
int os_walk_folios(const struct os_walk *w, uintptr_t start, uintptr_t end, struct folio_bytes *out);

/* Bytes of [start, end) backed by private anonymous pages, present or swapped: in a file mapping, the
 * pages written since it was mapped (copy-on-write: breakpoints, uprobes, relocations). Returns 0,
 * -ENOTTY when the kernel lacks PAGEMAP_SCAN, or -errno. */
int os_pagemap_anonymous(uintptr_t start, uintptr_t end, uint64_t *bytes);

/* The hypervisor's 12-byte CPUID signature (leaf 0x40000000) when this CPU says it runs as a guest.
 * Returns 0, or -ENOENT (not a guest, or not an x86 CPU). */
int os_hypervisor_signature(char signature[12]);

/* Sleep this long (nothing for 0 or less), resuming after signals. */
void os_sleep(double seconds);

#endif
