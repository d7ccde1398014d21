/* SPDX-License-Identifier: MIT */
/* os.c - raw syscall wrappers and file readers. Every function returns -errno on failure (as liburing's
 * wrappers do); the parsing of what is read is procfs.c's (pure), the probing of features probe.c's. */
#include "os.h"
#include "array.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "procfs.h"
#include "safe_file.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif

/* ---- files ------------------------------------------------------------------------------------ */

int os_read_file(const char *path, char **text, size_t *length) {
  *text = NULL;
  int fd = safe_file_open_read(path, true); /* a FIFO would hang the read, /dev/zero grow it without end */
  if (fd < 0) return fd;
  return os_read_fd(fd, text, length);
}

/* Read fd to its end into *buf (grown as needed, at least 16 KiB), NUL-terminated; closes fd. */
static int read_fd_into(int fd, char **buf, size_t *cap, size_t *length) {
  size_t used = 0;
  int rc = *cap < 16384 ? ARRAY_GROW(*buf, 16384, *cap) : 0;
  while (rc == 0) {
    if (used >= OS_READ_FILE_MAX) { rc = -EFBIG; break; }
    if (*cap - used < 4096 && (rc = ARRAY_GROW(*buf, *cap + 1, *cap))) break;
    ssize_t n = read(fd, *buf + used, *cap - used - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) rc = -errno;
    if (n <= 0) break;
    used += (size_t)n;
  }
  close(fd);
  if (rc) return rc;
  (*buf)[used] = '\0';
  if (length) *length = used;
  return 0;
}

int os_read_fd(int fd, char **text, size_t *length) {
  *text = NULL;
  size_t cap = 0;
  int rc = read_fd_into(fd, text, &cap, length);
  if (rc) free(*text), *text = NULL;
  return rc;
}

int os_read_file_reusing(const char *path, char **buffer, size_t *cap, size_t *length) {
  int fd = safe_file_open_read(path, true);
  return fd < 0 ? fd : read_fd_into(fd, buffer, cap, length);
}

ssize_t os_read_small(const char *path, char *buf, size_t cap) {
  if (cap == 0) return -EINVAL;
  int fd = safe_file_open_read(path, true);
  if (fd < 0) return fd;
  ssize_t n;
  do n = read(fd, buf, cap - 1); while (n < 0 && errno == EINTR);
  int saved = errno;
  close(fd);
  if (n < 0) return -saved;
  buf[n] = '\0';
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = '\0';
  return n;
}

void root_path(char *buf, size_t cap, const char *root, const char *path) {
  size_t n = root ? strlen(root) : 0;
  while (n > 0 && root[n - 1] == '/') n--;
  snprintf(buf, cap, "%.*s%s", (int)n, n ? root : "", path);
}

int os_read_u64(const char *path, uint64_t *value) {
  char buf[64];
  ssize_t n = os_read_small(path, buf, sizeof buf);
  if (n < 0) return (int)n;
  return parse_u64(buf, value) ? 0 : -EINVAL;
}

int os_for_each_process(int (*visit)(pid_t pid, void *context), void *context) {
  DIR *proc = opendir("/proc");
  if (!proc) return -errno;
  int rc = 0;
  for (struct dirent *entry; rc == 0 && (entry = readdir(proc));) {
    uint64_t id;
    if (!parse_u64(entry->d_name, &id) || id == 0 || id > INT32_MAX) continue; /* not a process */
    rc = visit((pid_t)id, context);
  }
  closedir(proc);
  return rc;
}

int os_write_file(const char *path, const char *text) {
  /* O_TRUNC as `echo >` does: sysfs ignores it; a regular file (a captured tree in tests) needs it */
  int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t len = strlen(text);
  ssize_t n;
  do n = write(fd, text, len); while (n < 0 && errno == EINTR);
  int saved = errno;
  close(fd);
  if (n < 0) return -saved;
  return (size_t)n == len ? 0 : -EIO;
}

/* ---- /proc readers: the file read here, its text parsed by procfs.c --------------------------- */

/* /proc/PID/LEAF, or /proc/self/LEAF for pid 0. */
static void proc_path(char *out, size_t cap, int pid, const char *leaf) {
  if (pid > 0) snprintf(out, cap, "/proc/%d/%s", pid, leaf);
  else snprintf(out, cap, "/proc/self/%s", leaf);
}

long os_read_smaps(int pid, struct smaps_vma **out) {
  char path[64];
  proc_path(path, sizeof path, pid, "smaps");
  char *text;
  int rc = os_read_file(path, &text, NULL);
  if (rc) return rc;
  long count = parse_smaps(text, out);
  free(text);
  return count;
}

long os_read_stack_pointers(int pid, uint64_t **out) {
  char dir_path[64];
  proc_path(dir_path, sizeof dir_path, pid, "task");
  DIR *dir = opendir(dir_path);
  if (!dir) return -errno;
  size_t count = 0, cap = 0;
  uint64_t *sps = NULL;
  int first_error = 0;
  bool read_any = false;
  struct dirent *entry;
  while ((entry = readdir(dir))) {
    if (entry->d_name[0] == '.') continue;
    char path[sizeof dir_path + sizeof entry->d_name + 16], text[256];
    snprintf(path, sizeof path, "%s/%s/syscall", dir_path, entry->d_name);
    ssize_t n = os_read_small(path, text, sizeof text);
    if (n < 0) { if (!first_error) first_error = (int)-n; continue; }
    read_any = true;
    uint64_t sp;
    if (!parse_task_syscall_sp(text, &sp)) continue;
    if (ARRAY_GROW(sps, count + 1, cap) != 0) { free(sps); closedir(dir); return -ENOMEM; }
    sps[count++] = sp;
  }
  closedir(dir);
  if (!read_any) { free(sps); return -(first_error ? first_error : ENOENT); }
  *out = sps;
  return (long)count;
}

long os_read_task_times(int pid, struct os_task_times *out, size_t cap) {
  char dir_path[64];
  proc_path(dir_path, sizeof dir_path, pid, "task");
  DIR *dir = opendir(dir_path);
  if (!dir) return -errno;
  size_t count = 0;
  struct dirent *entry;
  while (count < cap && (entry = readdir(dir))) {
    if (entry->d_name[0] == '.') continue;
    char path[sizeof dir_path + sizeof entry->d_name + 16], text[128];
    snprintf(path, sizeof path, "%s/%s/schedstat", dir_path, entry->d_name);
    if (os_read_small(path, text, sizeof text) < 0) continue; /* the thread exited */
    struct os_task_times *t = &out[count];
    if (parse_schedstat(text, &t->run_ns, &t->wait_ns)) t->tid = atoi(entry->d_name), count++;
  }
  closedir(dir);
  return (long)count;
}

int os_read_thp_enabled(int pid) {
  char path[64];
  proc_path(path, sizeof path, pid, "status");
  char *text;
  int rc = os_read_file(path, &text, NULL);
  if (rc) return rc;
  uint64_t value;
  bool found = parse_keyed_value(text, "THP_enabled", &value);
  free(text);
  return found ? value != 0 : -ENOENT;
}

/* ---- syscalls --------------------------------------------------------------------------------- */

int os_pidfd_open(pid_t pid) {
  long fd = syscall(SYS_pidfd_open, pid, 0);
  return fd < 0 ? -errno : (int)fd;
}

ssize_t os_process_madvise(int pidfd, const struct iovec *ranges, size_t count, int advice) {
  long done = syscall(SYS_process_madvise, pidfd, ranges, count, advice, 0);
  return done < 0 ? -errno : done;
}

/* ---- memory system calls: syscall(2), never the (possibly interposed) libc names ---- */

int os_mmap(void *address, size_t length, int prot, int flags, int fd, off_t offset, void **out) {
  long result = syscall(SYS_mmap, address, length, prot, flags, fd, offset);
  *out = result == -1 ? NULL : (void *)result;
  return result == -1 ? -errno : 0;
}

int os_munmap(void *address, size_t length) { return syscall(SYS_munmap, address, length) == 0 ? 0 : -errno; }

int os_mremap(void *old_address, size_t old_length, size_t new_length, int flags, void *new_address, void **out) {
  long result = syscall(SYS_mremap, old_address, old_length, new_length, flags, new_address);
  *out = result == -1 ? NULL : (void *)result;
  return result == -1 ? -errno : 0;
}

int os_madvise(void *address, size_t length, int advice) {
  return syscall(SYS_madvise, address, length, advice) == 0 ? 0 : -errno;
}

int os_mprotect(void *address, size_t length, int prot) {
  return syscall(SYS_mprotect, address, length, prot) == 0 ? 0 : -errno;
}

int os_map_aligned(size_t length, size_t alignment, int prot, void **out) {
  *out = NULL;
  size_t page = (size_t)sysconf(_SC_PAGESIZE), slack = alignment > page ? alignment : 0;
  if (length == 0 || length + slack < length) return -EINVAL;
  void *mapped;
  int rc = os_mmap(NULL, length + slack, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &mapped);
  if (rc) return rc;
  char *raw = mapped, *aligned = raw;
  if (slack) {
    aligned = (char *)(((uintptr_t)raw + slack - 1) & ~(uintptr_t)(slack - 1));
    if (aligned > raw) os_munmap(raw, (size_t)(aligned - raw));
    if (raw + slack > aligned) os_munmap(aligned + length, (size_t)(raw + slack - aligned));
  }
  *out = aligned;
  return 0;
}

int os_name_anon(void *start, size_t length, const char *name) {
  if (prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)start, length, (unsigned long)name) != 0)
    return -errno;
  return 0;
}

/* ---- hugetlb sizes ---------------------------------------------------------------------------- */

static int compare_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int os_hugepage_size_dirs(const char *path, uint64_t *sizes, int cap) {
  DIR *dir = opendir(path);
  if (!dir) return -errno;
  int count = 0;
  struct dirent *entry;
  while ((entry = readdir(dir)) && count < cap) {
    uint64_t bytes;
    if (parse_hugepages_dir_name(entry->d_name, &bytes)) sizes[count++] = bytes;
  }
  closedir(dir);
  qsort(sizes, (size_t)count, sizeof *sizes, compare_u64);
  return count;
}

/* The names in a directory, one a line, into buf (cut at cap): what page_sizes_parse reads. */
static int list_names(const char *path, char *buf, size_t cap) {
  buf[0] = '\0';
  DIR *dir = opendir(path);
  if (!dir) return -errno;
  size_t used = 0;
  for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
    int n = snprintf(buf + used, cap - used, "%s\n", entry->d_name);
    if (n < 0 || (size_t)n >= cap - used) break;
    used += (size_t)n;
  }
  buf[used] = '\0';
  closedir(dir);
  return 0;
}

int os_page_sizes_read(const char *root, struct page_sizes *out) {
  char path[4096], pmd[64], thp_dirs[2048], hugetlb_dirs[2048];
  long base = sysconf(_SC_PAGESIZE);
  snprintf(path, sizeof path, "%s" OS_SYSFS_THP "/hpage_pmd_size", root);
  bool has_pmd = os_read_small(path, pmd, sizeof pmd) >= 0;
  snprintf(path, sizeof path, "%s" OS_SYSFS_THP, root);
  list_names(path, thp_dirs, sizeof thp_dirs);
  snprintf(path, sizeof path, "%s" OS_SYSFS_HUGEPAGES, root);
  list_names(path, hugetlb_dirs, sizeof hugetlb_dirs);
  struct page_sizes_report report = {base > 0 ? (uint64_t)base : 4096, has_pmd ? pmd : NULL, thp_dirs, hugetlb_dirs};
  return page_sizes_parse(&report, out);
}

static struct page_sizes system_sizes;
static pthread_once_t system_sizes_once = PTHREAD_ONCE_INIT;
static void read_system_sizes(void) {
  if (os_page_sizes_read("", &system_sizes) == 0) return;
  long base = sysconf(_SC_PAGESIZE);
  struct page_sizes_report bare = {base > 0 ? (uint64_t)base : 4096, NULL, NULL, NULL};
  page_sizes_parse(&bare, &system_sizes);
}

const struct page_sizes *os_page_sizes(void) {
  pthread_once(&system_sizes_once, read_system_sizes);
  return &system_sizes;
}

/* The PMD alone, read once: one small file, not the directories (the preload asks it at every start). */
static uint64_t pmd_size, base_page;
static pthread_once_t pmd_size_once = PTHREAD_ONCE_INIT;
static void read_pmd_size(void) {
  char text[64];
  long base = sysconf(_SC_PAGESIZE);
  bool has_pmd = os_read_small(OS_SYSFS_THP "/hpage_pmd_size", text, sizeof text) >= 0;
  struct page_sizes_report report = {base > 0 ? (uint64_t)base : 4096, has_pmd ? text : NULL, NULL, NULL};
  struct page_sizes sizes;
  if (page_sizes_parse(&report, &sizes) != 0) { /* a PMD size no kernel reports: what the base page implies */
    report.pmd_size = NULL;
    page_sizes_parse(&report, &sizes);
  }
  pmd_size = sizes.pmd;
  base_page = sizes.base;
}

uint64_t os_pmd_size(void) {
  pthread_once(&pmd_size_once, read_pmd_size);
  return pmd_size;
}

uint64_t os_base_page(void) {
  pthread_once(&pmd_size_once, read_pmd_size);
  return base_page;
}

void os_page_sizes_choose(const char *root, const struct page_sizes *sizes, struct page_sizes_choice *out) {
  char path[4096], text[256], top[32] = "", size[32];
  bool takes[PAGE_SIZES_MAX] = {false};
  snprintf(path, sizeof path, "%s" OS_SYSFS_THP "/enabled", root);
  if (os_read_small(path, text, sizeof text) >= 0) parse_bracketed_choice(text, top, sizeof top);
  for (unsigned i = 0; i < sizes->mthp_count; i++) {
    snprintf(path, sizeof path, "%s" OS_SYSFS_THP "/hugepages-%llukB/enabled", root,
             (unsigned long long)(sizes->mthp[i] >> 10));
    if (os_read_small(path, text, sizeof text) < 0) continue;
    parse_bracketed_choice(text, size, sizeof size);
    takes[i] = page_sizes_faults_take(size, top);
  }
  page_sizes_choose(sizes, takes, out);
}

int os_hugetlb_sizes(uint64_t *sizes, int cap) { return os_hugepage_size_dirs(OS_SYSFS_HUGEPAGES, sizes, cap); }

void os_hugetlb_path(char *buf, size_t cap, uint64_t page_size, const char *leaf) {
  snprintf(buf, cap, OS_SYSFS_HUGEPAGES "/hugepages-%llukB/%s", (unsigned long long)(page_size >> 10), leaf);
}

int os_hugetlb_read(uint64_t page_size, struct hugify_hugetlb_size *out) {
  return os_hugetlb_read_under("", page_size, out);
}

int os_hugetlb_read_under(const char *root, uint64_t page_size, struct hugify_hugetlb_size *out) {
  static const struct { const char *leaf; size_t offset; } files[] = {
      {"nr_hugepages", offsetof(struct hugify_hugetlb_size, total)},
      {"free_hugepages", offsetof(struct hugify_hugetlb_size, free)},
      {"resv_hugepages", offsetof(struct hugify_hugetlb_size, reserved)},
      {"surplus_hugepages", offsetof(struct hugify_hugetlb_size, surplus)},
      {"nr_overcommit_hugepages", offsetof(struct hugify_hugetlb_size, overcommit)},
  };
  memset(out, 0, sizeof *out);
  out->page_size = page_size;
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char leaf[256], path[4096];
    os_hugetlb_path(leaf, sizeof leaf, page_size, files[i].leaf);
    snprintf(path, sizeof path, "%s%s", root, leaf);
    int rc = os_read_u64(path, (uint64_t *)((char *)out + files[i].offset));
    if (rc) return rc;
  }
  out->available = out->free > out->reserved ? out->free - out->reserved : 0;
  return 0;
}

int os_map_hugetlb_flags(uint64_t page_size) {
  int log2 = 0;
  while ((UINT64_C(1) << log2) < page_size) log2++;
  return MAP_HUGETLB | (log2 << MAP_HUGE_SHIFT);
}


/* PAGEMAP_SCAN, as in linux/fs.h of Linux 6.7+. */
struct os_pm_scan_arg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
  uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
struct os_page_region { uint64_t start, end, categories; };
#define OS_PAGEMAP_SCAN _IOWR('f', 16, struct os_pm_scan_arg)
#define OS_PAGE_IS_FILE (1u << 2)
#define OS_PAGE_IS_PRESENT (1u << 3)
#define OS_PAGE_IS_SWAPPED (1u << 4)
#define OS_PAGE_IS_PFNZERO (1u << 5)
#define OS_PAGE_IS_HUGE (1u << 6)
#define OS_PAGE_IS_SOFT_DIRTY (1u << 7)

static int pagemap_fd = -1;
static pthread_once_t pagemap_once = PTHREAD_ONCE_INIT;
static void open_pagemap(void) { pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC); }

int os_pagemap_resident(uintptr_t start, uintptr_t end, struct resident_bytes *out) {
  memset(out, 0, sizeof *out);
  pthread_once(&pagemap_once, open_pagemap);
  if (pagemap_fd < 0) return -ENOENT;
  return os_pagemap_resident_fd(pagemap_fd, start, end, out);
}

/* One PAGEMAP_SCAN walk of [start, end) for the pages that match `filter`'s category masks: `each` gets
 * every matching region, clipped to [start, end). The scan works on whole pages. */
static int pagemap_scan_regions(int fd, uintptr_t start, uintptr_t end, const struct os_pm_scan_arg *filter,
                                void (*each)(void *context, uint64_t from, uint64_t to, uint64_t categories),
                                void *context) {
  /* zeroed: valgrind does not know PAGEMAP_SCAN, so it would take what the kernel writes here as unset */
  struct os_page_region regions[256] = {{0}};
  struct os_pm_scan_arg arg;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), at = start & ~(page - 1);
  uintptr_t scan_end = (end + page - 1) & ~(page - 1), first = at;
  while (at < scan_end) {
    arg = *filter;
    arg.size = sizeof arg;
    arg.start = at;
    arg.end = scan_end;
    arg.vec = (uintptr_t)regions;
    arg.vec_len = sizeof regions / sizeof regions[0];
    long n = ioctl(fd, OS_PAGEMAP_SCAN, &arg);
    if (n < 0) return errno == EINVAL && at == first ? -ENOTTY : -errno;
    for (long i = 0; i < n; i++) {
      uint64_t from = regions[i].start > start ? regions[i].start : start;
      uint64_t to = regions[i].end < end ? regions[i].end : end;
      if (to > from) each(context, from, to, regions[i].categories);
    }
    if (arg.walk_end <= at) break;
    at = arg.walk_end;
  }
  return 0;
}

/* The bytes of the matching regions: zero-page ones in ->zero, huge ones in ->huge, the rest in ->base. */
static void add_region(void *context, uint64_t from, uint64_t to, uint64_t categories) {
  struct resident_bytes *r = context;
  if (categories & OS_PAGE_IS_PFNZERO) r->zero += to - from;
  else if (categories & OS_PAGE_IS_HUGE) r->huge += to - from;
  else r->base += to - from, r->dirty += categories & OS_PAGE_IS_SOFT_DIRTY ? to - from : 0;
}

/* present, with "huge", "the shared zero page (4 KiB or huge)" and "soft-dirty" returned */
static const struct os_pm_scan_arg resident_filter = {
    .category_mask = OS_PAGE_IS_PRESENT, .return_mask = OS_PAGE_IS_HUGE | OS_PAGE_IS_PFNZERO | OS_PAGE_IS_SOFT_DIRTY};

struct window_sum {
  uintptr_t start;
  uint64_t window;
  struct resident_bytes *windows;
};
static void add_window(void *context, uint64_t from, uint64_t to, uint64_t categories) {
  struct window_sum *s = context;
  while (from < to) {
    size_t index = (size_t)((from - s->start) / s->window);
    uint64_t window_end = s->start + (index + 1) * s->window, upto = to < window_end ? to : window_end;
    add_region(&s->windows[index], from, upto, categories);
    from = upto;
  }
}

int os_pagemap_windows_fd(int fd, uintptr_t start, uintptr_t end, uint64_t window, struct resident_bytes *windows) {
  size_t count = (size_t)((end - start + window - 1) / window);
  memset(windows, 0, count * sizeof *windows);
  struct window_sum sum = {start, window, windows};
  return pagemap_scan_regions(fd, start, end, &resident_filter, add_window, &sum);
}

int os_pagemap_resident_fd(int fd, uintptr_t start, uintptr_t end, struct resident_bytes *out) {
  memset(out, 0, sizeof *out);
  return pagemap_scan_regions(fd, start, end, &resident_filter, add_region, out);
}

/* ---- PAGEMAP_SCAN: private anonymous pages inside a file mapping (text remap) -------------------- */

int os_pagemap_anonymous(uintptr_t start, uintptr_t end, uint64_t *bytes) {
  *bytes = 0;
  pthread_once(&pagemap_once, open_pagemap);
  if (pagemap_fd < 0) return -ENOENT;
  /* not a page-cache page, but one that is there (in memory or swapped) */
  const struct os_pm_scan_arg filter = {.category_mask = OS_PAGE_IS_FILE,
                                        .category_inverted = OS_PAGE_IS_FILE,
                                        .category_anyof_mask = OS_PAGE_IS_PRESENT | OS_PAGE_IS_SWAPPED,
                                        .return_mask = OS_PAGE_IS_PRESENT | OS_PAGE_IS_SWAPPED};
  struct resident_bytes found = {0, 0, 0, 0};
  int rc = pagemap_scan_regions(pagemap_fd, start, end, &filter, add_region, &found);
  *bytes = found.base + found.zero; /* a private page is never the zero page; summed all the same */
  return rc;
}

/* ---- the plan's walk without PAGEMAP_SCAN: pagemap entries, kpageflags ----------------------------- */

#define WALK_BATCH_PMDS 16 /* entries read per pread: 16 PMDs' worth (64 KiB of entries for 32 MiB) */

static int pread_all(int fd, void *buf, size_t length, uint64_t offset) {
  size_t done = 0;
  while (done < length) {
    ssize_t n = pread(fd, (char *)buf + done, length - done, (off_t)(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) return -EIO;
    done += (size_t)n;
  }
  return 0;
}

/* The shared zero page's PFN, from a page of ours that was read and never written (0: PFNs hidden). */
static uint64_t zero_pfn;
static pthread_once_t zero_pfn_once = PTHREAD_ONCE_INIT;
static void learn_zero_pfn(void) {
  long page = sysconf(_SC_PAGESIZE);
  void *p;
  if (os_mmap(NULL, (size_t)page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &p) != 0) return;
  (void)*(volatile const char *)p;
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  uint64_t entry = 0;
  if (fd >= 0 && pread_all(fd, &entry, sizeof entry, (uint64_t)((uintptr_t)p / (uintptr_t)page) * 8) == 0)
    zero_pfn = pagemap_pfn(entry);
  if (fd >= 0) close(fd);
  os_munmap(p, (size_t)page);
}

int os_walk_open(int pid, bool scan, struct os_walk *w) {
  char path[64];
  proc_path(path, sizeof path, pid, "pagemap");
  w->kpageflags = -1;
  w->zero_pfn = 0;
  w->source = scan ? OS_WALK_SCAN : OS_WALK_PRESENCE;
  w->pagemap = open(path, O_RDONLY | O_CLOEXEC);
  if (w->pagemap < 0) return -errno;
  if (scan) return 0;
  pthread_once(&zero_pfn_once, learn_zero_pfn);
  if (zero_pfn == 0) return 0; /* PFNs hidden: no CAP_SYS_ADMIN */
  w->kpageflags = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
  if (w->kpageflags < 0) return 0;
  w->zero_pfn = zero_pfn;
  w->source = OS_WALK_KPAGEFLAGS;
  return 0;
}

void os_walk_close(struct os_walk *w) {
  if (w->pagemap >= 0) close(w->pagemap);
  if (w->kpageflags >= 0) close(w->kpageflags);
  w->pagemap = w->kpageflags = -1;
}

const char *os_walk_name(enum os_walk_source source) {
  switch (source) {
  case OS_WALK_SCAN: return "PAGEMAP_SCAN";
  case OS_WALK_KPAGEFLAGS: return "pagemap + kpageflags";
  case OS_WALK_PRESENCE: break;
  }
  return "pagemap presence only";
}

/* What one PMD's entries are: a whole aligned run has its kpageflags read (one pread for the PMD). */
static enum kpage_run judge_pmd(const struct os_walk *w, const uint64_t *entries, size_t pmd_pages, uint64_t *flags) {
  if (w->kpageflags < 0 || !pagemap_aligned_run(entries, pmd_pages, pmd_pages) ||
      pread_all(w->kpageflags, flags, pmd_pages * sizeof *flags, pagemap_pfn(entries[0]) * 8) != 0)
    return KPAGE_RUN_SMALL;
  return kpageflags_run(flags, pmd_pages);
}

/* Batches of whole PMDs (each judged on all its entries, even where [start, end) has only part of it), the
 * part inside [start, end) counted into its windows. */
static int walk_entries(const struct os_walk *w, uintptr_t start, uintptr_t end, uint64_t window,
                        struct resident_bytes *windows) {
  /* a PMD of 512 (4 KiB pages), 2048 (16 KiB) or 8192 (64 KiB) entries: its kpageflags in one read */
  uint64_t page = os_base_page(), pmd = os_pmd_size(), pmd_pages = pmd / page;
  uint64_t *entries = malloc((WALK_BATCH_PMDS + 1) * pmd_pages * sizeof *entries);
  if (!entries) return -ENOMEM;
  uint64_t *flags = entries + WALK_BATCH_PMDS * pmd_pages;
  uintptr_t first = start & ~(pmd - 1), last = (end + pmd - 1) & ~(pmd - 1);
  uintptr_t from_page = start & ~(page - 1), to_page = (end + page - 1) & ~(page - 1);
  int rc = 0;
  for (uintptr_t batch = first; batch < last && rc == 0; batch += WALK_BATCH_PMDS * pmd) {
    uintptr_t batch_end = last - batch < WALK_BATCH_PMDS * pmd ? last : batch + WALK_BATCH_PMDS * pmd;
    rc = pread_all(w->pagemap, entries, (batch_end - batch) / page * sizeof *entries, batch / page * 8);
    for (uintptr_t at = batch; rc == 0 && at < batch_end; at += pmd) {
      const uint64_t *own = entries + (at - batch) / page;
      enum kpage_run run = judge_pmd(w, own, (size_t)pmd_pages, flags);
      uintptr_t piece = at > from_page ? at : from_page, pmd_end = at + pmd < to_page ? at + pmd : to_page;
      while (piece < pmd_end) { /* the PMD's part in each window */
        size_t index = (size_t)((piece > start ? piece - start : 0) / window);
        uintptr_t window_end = start + (index + 1) * window, upto = pmd_end < window_end ? pmd_end : window_end;
        pagemap_count(own + (piece - at) / page, (upto - piece) / page, run, w->zero_pfn, page, &windows[index]);
        piece = upto;
      }
    }
  }
  free(entries);
  return rc;
}

/* The kpageflags of each entry's PFN (0 for an entry without one), one read per run of consecutive PFNs. */
static int read_flags(int kpageflags, const uint64_t *entries, size_t n, uint64_t *flags) {
  for (size_t i = 0; i < n;) {
    uint64_t pfn = pagemap_pfn(entries[i]);
    size_t k = 1;
    if (!pfn) { flags[i++] = 0; continue; }
    while (i + k < n && pagemap_pfn(entries[i + k]) == pfn + k) k++;
    int rc = pread_all(kpageflags, flags + i, k * sizeof *flags, pfn * 8);
    if (rc) return rc;
    i += k;
  }
  return 0;
}

int os_walk_folios(const struct os_walk *w, uintptr_t start, uintptr_t end, struct folio_bytes *out) {
  if (w->source != OS_WALK_KPAGEFLAGS || w->kpageflags < 0) return -EPERM;
  uint64_t page = os_base_page(), pmd = os_pmd_size(), pmd_pages = pmd / page;
  uint64_t *entries = malloc(2 * pmd_pages * sizeof *entries);
  if (!entries) return -ENOMEM;
  uint64_t *flags = entries + pmd_pages;
  int rc = 0;
  for (uintptr_t at = start & ~(pmd - 1); at < end && rc == 0; at += pmd) {
    uintptr_t from = at > start ? at : start, to = at + pmd < end ? at + pmd : end;
    size_t n = (size_t)((to - from + page - 1) / page);
    rc = pread_all(w->pagemap, entries, n * sizeof *entries, from / page * 8);
    if (rc == 0) rc = read_flags(w->kpageflags, entries, n, flags);
    if (rc == 0) kpageflags_folios(entries, flags, n, w->zero_pfn, page, out);
  }
  free(entries);
  return rc;
}

int os_walk_windows(const struct os_walk *w, uintptr_t start, uintptr_t end, uint64_t window,
                    struct resident_bytes *windows) {
  if (w->source == OS_WALK_SCAN) return os_pagemap_windows_fd(w->pagemap, start, end, window, windows);
  memset(windows, 0, (size_t)((end - start + window - 1) / window) * sizeof *windows);
  return walk_entries(w, start, end, window, windows);
}

int os_hypervisor_signature(char signature[12]) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax, ebx, ecx, edx;
  __cpuid(1, eax, ebx, ecx, edx);
  if (!(ecx & (1u << 31))) return -ENOENT; /* the "hypervisor present" bit */
  __cpuid(0x40000000, eax, ebx, ecx, edx);
  memcpy(signature, &ebx, 4);
  memcpy(signature + 4, &ecx, 4);
  memcpy(signature + 8, &edx, 4);
  return 0;
#else
  (void)signature;
  return -ENOENT;
#endif
}

void os_sleep(double seconds) {
  if (seconds <= 0) return;
  struct timespec t = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}
