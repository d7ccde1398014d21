/* os.c - raw syscall wrappers and the machine probe. */
#include "os.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "procfs.h"
#include "safe_file.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

/* ---- files ------------------------------------------------------------------------------------ */

char *os_read_file(const char *path, size_t *length) {
  int fd = safe_file_open_read(path, true); /* a FIFO would hang the read, /dev/zero grow it without end */
  if (fd < 0) { errno = -fd; return NULL; }
  size_t cap = 16384, used = 0;
  char *buf = malloc(cap);
  while (buf) {
    if (used >= OS_READ_FILE_MAX) { free(buf); buf = NULL; errno = EFBIG; break; }
    if (cap - used < 4096) {
      char *bigger = realloc(buf, cap * 2);
      if (!bigger) { free(buf); buf = NULL; errno = ENOMEM; break; }
      buf = bigger;
      cap *= 2;
    }
    ssize_t n = read(fd, buf + used, cap - used - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) { int saved = errno; free(buf); buf = NULL; errno = saved; break; }
    if (n == 0) break;
    used += (size_t)n;
  }
  int saved = errno;
  close(fd);
  errno = saved;
  if (!buf) return NULL;
  buf[used] = '\0';
  if (length) *length = used;
  return buf;
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

int os_read_u64(const char *path, uint64_t *value) {
  char buf[64];
  ssize_t n = os_read_small(path, buf, sizeof buf);
  if (n < 0) return (int)n;
  return parse_u64(buf, value) ? 0 : -EINVAL;
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

/* ---- syscalls --------------------------------------------------------------------------------- */

int os_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

ssize_t os_process_madvise(int pidfd, const struct iovec *ranges, size_t count, int advice) {
  return syscall(SYS_process_madvise, pidfd, ranges, count, advice, 0);
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
  return 0;
}

int os_map_hugetlb_flags(uint64_t page_size) {
  int log2 = 0;
  while ((UINT64_C(1) << log2) < page_size) log2++;
  return MAP_HUGETLB | (log2 << MAP_HUGE_SHIFT);
}

/* ---- THP ---------------------------------------------------------------------------------------- */

void os_thp_setting(const char *leaf, char *buf, size_t cap) {
  char path[256], text[256];
  snprintf(path, sizeof path, OS_SYSFS_THP "/%s", leaf);
  buf[0] = '\0';
  if (os_read_small(path, text, sizeof text) < 0) return;
  parse_bracketed_choice(text, buf, cap);
}

/* ---- probes ------------------------------------------------------------------------------------- */

void os_reason_add(char *reason, size_t cap, const char *format, ...) {
  if (!reason || cap == 0) return;
  size_t used = strnlen(reason, cap);
  if (used + 3 >= cap) return;
  if (used) { memcpy(reason + used, "; ", 3); used += 2; }
  va_list args;
  va_start(args, format);
  vsnprintf(reason + used, cap - used, format, args);
  va_end(args);
}

/* A 2 MiB-aligned region of `length` bytes (a multiple of 2 MiB), carved out of a larger anonymous
 * mapping. Returns MAP_FAILED with errno on failure. */
static void *map_aligned_anonymous(size_t length, int prot) {
  size_t slack = OS_HUGE_2M;
  char *raw = mmap(NULL, length + slack, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return MAP_FAILED;
  uintptr_t aligned = ((uintptr_t)raw + slack - 1) & ~(uintptr_t)(slack - 1);
  size_t head = aligned - (uintptr_t)raw, tail = slack - head;
  if (head) munmap(raw, head);
  if (tail) munmap((char *)aligned + length, tail);
  return (void *)aligned;
}

struct feature_cache {
  pthread_once_t once;
  int state;
  char reason[HUGIFY_REASON_MAX];
};

static struct feature_cache madv_collapse_cache = {PTHREAD_ONCE_INIT, HUGIFY_FEATURE_UNKNOWN, ""};
static void probe_madv_collapse_once(void) {
  struct feature_cache *c = &madv_collapse_cache;
  size_t length = 2 * OS_HUGE_2M;
  char *p = map_aligned_anonymous(length, PROT_READ | PROT_WRITE);
  if (p == MAP_FAILED) {
    snprintf(c->reason, sizeof c->reason, "MADV_COLLAPSE: scratch mapping failed (%s)", strerror(errno));
    return;
  }
  p[0] = 1;
  if (madvise(p, OS_HUGE_2M, MADV_COLLAPSE) == 0) {
    c->state = HUGIFY_FEATURE_YES;
  } else if (errno == EINVAL) {
    c->state = HUGIFY_FEATURE_NO;
    snprintf(c->reason, sizeof c->reason, "MADV_COLLAPSE: not supported by this kernel (needs Linux 6.1+)");
  } else {
    /* EAGAIN/ENOMEM: the kernel knows the advice but could not get a huge page right now. */
    c->state = HUGIFY_FEATURE_YES;
    snprintf(c->reason, sizeof c->reason, "MADV_COLLAPSE: supported, but the probe collapse failed (%s)",
             strerror(errno));
  }
  munmap(p, length);
}

static struct feature_cache process_madvise_cache = {PTHREAD_ONCE_INIT, HUGIFY_FEATURE_UNKNOWN, ""};
static void probe_process_madvise_once(void) {
  struct feature_cache *c = &process_madvise_cache;
  /* An invalid pidfd: EBADF means the syscall exists, ENOSYS that it does not. */
  if (os_process_madvise(-1, NULL, 0, MADV_COLLAPSE) < 0 && errno == ENOSYS) {
    c->state = HUGIFY_FEATURE_NO;
    snprintf(c->reason, sizeof c->reason, "process_madvise: not supported by this kernel (needs Linux 5.10+)");
  } else {
    c->state = HUGIFY_FEATURE_YES;
  }
}

/* Whether MADV_COLLAPSE works on a read-only, executable, file-backed private mapping of a file on a
 * regular (non-tmpfs) filesystem: that needs CONFIG_READ_ONLY_THP_FOR_FS. */
static struct feature_cache file_thp_cache = {PTHREAD_ONCE_INIT, HUGIFY_FEATURE_UNKNOWN, ""};
static void probe_file_thp_once(void) {
  struct feature_cache *c = &file_thp_cache;
  const char *dirs[] = {getenv("TMPDIR"), "/var/tmp", "/tmp", "."};
  char path[4096] = "";
  int fd = -1;
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0] && fd < 0; i++) {
    struct statfs fs;
    if (!dirs[i] || statfs(dirs[i], &fs) != 0 || fs.f_type == TMPFS_MAGIC) continue;
    snprintf(path, sizeof path, "%s/hugify-probe-XXXXXX", dirs[i]);
    fd = mkstemp(path);
  }
  if (fd < 0) {
    snprintf(c->reason, sizeof c->reason, "file THP for text: no writable non-tmpfs directory to probe in");
    return;
  }
  size_t length = 2 * OS_HUGE_2M;
  char *chunk = calloc(1, 65536);
  int ok = chunk != NULL;
  for (size_t done = 0; ok && done < length; done += 65536)
    ok = write(fd, chunk, 65536) == 65536;
  free(chunk);
  char *where = ok ? map_aligned_anonymous(OS_HUGE_2M, PROT_NONE) : MAP_FAILED;
  char *p = where == MAP_FAILED ? MAP_FAILED
                                : mmap(where, OS_HUGE_2M, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, 0);
  close(fd); /* no writer may remain for a read-only file THP */
  unlink(path);
  if (p == MAP_FAILED) {
    if (where != MAP_FAILED) munmap(where, OS_HUGE_2M);
    snprintf(c->reason, sizeof c->reason, "file THP for text: could not set up a probe file (%s)", strerror(errno));
    return;
  }
  madvise(p, OS_HUGE_2M, MADV_HUGEPAGE);
  volatile char touch = p[0];
  (void)touch;
  if (madvise(p, OS_HUGE_2M, MADV_COLLAPSE) == 0) {
    c->state = HUGIFY_FEATURE_YES;
  } else {
    int err = errno;
    c->state = err == EINVAL ? HUGIFY_FEATURE_NO : HUGIFY_FEATURE_UNKNOWN;
    snprintf(c->reason, sizeof c->reason,
             "file THP for text: MADV_COLLAPSE of file-backed text failed (%s)%s", strerror(err),
             err == EINVAL ? "; the kernel lacks CONFIG_READ_ONLY_THP_FOR_FS" : "");
  }
  munmap(p, OS_HUGE_2M);
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

static int pagemap_fd = -1;
static pthread_once_t pagemap_once = PTHREAD_ONCE_INIT;
static void open_pagemap(void) { pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC); }

int os_pagemap_resident(uintptr_t start, uintptr_t end, struct os_resident *out) {
  out->base = out->huge = 0;
  pthread_once(&pagemap_once, open_pagemap);
  if (pagemap_fd < 0) return -ENOENT;
  return os_pagemap_resident_fd(pagemap_fd, start, end, out);
}

/* One PAGEMAP_SCAN walk of [start, end) for the pages that match `filter`'s category masks, adding the
 * bytes of each matching region to bytes[1] when it has category `split`, else to bytes[0]. The scan
 * works on whole pages; a range that starts or ends inside a page counts only its part. */
static int pagemap_scan(int fd, uintptr_t start, uintptr_t end, const struct os_pm_scan_arg *filter,
                        uint64_t split, uint64_t bytes[2]) {
  struct os_page_region regions[256];
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
      if (to > from) bytes[(regions[i].categories & split) != 0] += to - from;
    }
    if (arg.walk_end <= at) break;
    at = arg.walk_end;
  }
  return 0;
}

int os_pagemap_resident_fd(int fd, uintptr_t start, uintptr_t end, struct os_resident *out) {
  /* present and not the shared zero page, split into huge and not */
  const struct os_pm_scan_arg filter = {.category_mask = OS_PAGE_IS_PRESENT | OS_PAGE_IS_PFNZERO,
                                        .category_inverted = OS_PAGE_IS_PFNZERO,
                                        .return_mask = OS_PAGE_IS_HUGE};
  uint64_t bytes[2] = {0, 0};
  int rc = pagemap_scan(fd, start, end, &filter, OS_PAGE_IS_HUGE, bytes);
  out->base = bytes[0];
  out->huge = bytes[1];
  return rc;
}

static struct feature_cache pagemap_scan_cache = {PTHREAD_ONCE_INIT, HUGIFY_FEATURE_UNKNOWN, ""};
static void probe_pagemap_scan_once(void) {
  struct feature_cache *c = &pagemap_scan_cache;
  static char probe_page[8192];
  struct os_resident r;
  uintptr_t start = ((uintptr_t)probe_page + 4095) & ~(uintptr_t)4095;
  int rc = os_pagemap_resident(start, start + 4096, &r);
  c->state = rc == 0 ? HUGIFY_FEATURE_YES : HUGIFY_FEATURE_NO;
  if (rc) snprintf(c->reason, sizeof c->reason, "PAGEMAP_SCAN: %s (needs Linux 6.7+); backing is prorated from smaps",
                   strerror(-rc));
}

static struct feature_cache pmu_cache = {PTHREAD_ONCE_INIT, HUGIFY_FEATURE_UNKNOWN, ""};
static void probe_pmu_once(void) {
  struct feature_cache *c = &pmu_cache;
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = PERF_COUNT_HW_CPU_CYCLES;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
  if (fd >= 0) {
    close(fd);
    c->state = HUGIFY_FEATURE_YES;
    return;
  }
  int err = errno;
  if (err == ENOENT || err == EOPNOTSUPP || err == ENODEV || err == ENOSYS) {
    c->state = HUGIFY_FEATURE_NO;
    snprintf(c->reason, sizeof c->reason, "PMU: hardware counters not supported on this machine (%s)", strerror(err));
  } else {
    snprintf(c->reason, sizeof c->reason, "PMU: perf_event_open refused (%s); see /proc/sys/kernel/perf_event_paranoid",
             strerror(err));
  }
}

static int report_feature(struct feature_cache *c, void (*probe)(void), char *reason, size_t cap) {
  pthread_once(&c->once, probe);
  if (c->reason[0]) os_reason_add(reason, cap, "%s", c->reason);
  return c->state;
}

int os_probe_madv_collapse(char *reason, size_t cap) {
  return report_feature(&madv_collapse_cache, probe_madv_collapse_once, reason, cap);
}
int os_probe_process_madvise(char *reason, size_t cap) {
  return report_feature(&process_madvise_cache, probe_process_madvise_once, reason, cap);
}
int os_probe_file_thp_text(char *reason, size_t cap) {
  return report_feature(&file_thp_cache, probe_file_thp_once, reason, cap);
}
int os_probe_pagemap_scan(char *reason, size_t cap) {
  return report_feature(&pagemap_scan_cache, probe_pagemap_scan_once, reason, cap);
}
int os_probe_pmu(char *reason, size_t cap) { return report_feature(&pmu_cache, probe_pmu_once, reason, cap); }

int os_can_change_pools(void) {
  uint64_t sizes[HUGIFY_MAX_HUGETLB_SIZES];
  int count = os_hugetlb_sizes(sizes, HUGIFY_MAX_HUGETLB_SIZES);
  if (count <= 0) return 0;
  char path[256];
  os_hugetlb_path(path, sizeof path, sizes[0], "nr_hugepages");
  return access(path, W_OK) == 0;
}

/* ---- hugify_probe ------------------------------------------------------------------------------- */

int hugify_probe(struct hugify_system *sys) {
  if (!sys) return -EINVAL;
  memset(sys, 0, sizeof *sys);
  struct utsname name;
  if (uname(&name) == 0) snprintf(sys->kernel_release, sizeof sys->kernel_release, "%s", name.release);
  sys->base_page_size = (uint64_t)sysconf(_SC_PAGESIZE);

  char *meminfo = os_read_file("/proc/meminfo", NULL);
  if (meminfo) {
    parse_keyed_value(meminfo, "Hugepagesize", &sys->default_hugetlb_size);
    free(meminfo);
  }
  uint64_t sizes[HUGIFY_MAX_HUGETLB_SIZES];
  int count = os_hugetlb_sizes(sizes, HUGIFY_MAX_HUGETLB_SIZES);
  if (count < 0) os_reason_add(sys->reason, sizeof sys->reason, "hugetlb: %s absent (%s)", OS_SYSFS_HUGEPAGES,
                               strerror(-count));
  for (int i = 0; i < count; i++)
    if (os_hugetlb_read(sizes[i], &sys->hugetlb[sys->hugetlb_size_count]) == 0) sys->hugetlb_size_count++;

  os_thp_setting("enabled", sys->thp_enabled, sizeof sys->thp_enabled);
  os_thp_setting("defrag", sys->thp_defrag, sizeof sys->thp_defrag);
  if (os_read_u64(OS_SYSFS_THP "/hpage_pmd_size", &sys->thp_pmd_size) != 0) sys->thp_pmd_size = 0;
  if (!sys->thp_enabled[0]) os_reason_add(sys->reason, sizeof sys->reason, "THP: not built into this kernel");

  sys->madv_collapse = os_probe_madv_collapse(sys->reason, sizeof sys->reason);
  sys->process_madvise = os_probe_process_madvise(sys->reason, sizeof sys->reason);
  sys->file_thp_text = os_probe_file_thp_text(sys->reason, sizeof sys->reason);
  sys->pagemap_scan = os_probe_pagemap_scan(sys->reason, sizeof sys->reason);
  sys->pmu = os_probe_pmu(sys->reason, sizeof sys->reason);
  sys->can_change_pools = os_can_change_pools();
  return 0;
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
  uint64_t found[2] = {0, 0};
  int rc = pagemap_scan(pagemap_fd, start, end, &filter, 0, found);
  *bytes = found[0];
  return rc;
}
