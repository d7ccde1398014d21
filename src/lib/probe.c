/* probe.c - what this machine offers, found by trying it: feature probes, THP settings, hugify_probe. */
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "os.h"
#include "procfs.h"

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

/* ---- THP settings and page sizes ------------------------------------------------------------------ */

void probe_thp_setting(const char *leaf, char *buf, size_t cap) {
  char path[256], text[256];
  snprintf(path, sizeof path, OS_SYSFS_THP "/%s", leaf);
  buf[0] = '\0';
  if (os_read_small(path, text, sizeof text) < 0) return;
  parse_bracketed_choice(text, buf, cap);
}

/* The PMD size, read once (it is fixed for the life of the kernel); threads race to read it otherwise. */
static uint64_t pmd_size;
static pthread_once_t pmd_size_once = PTHREAD_ONCE_INIT;
static void read_pmd_size(void) {
  if (os_read_u64(OS_SYSFS_THP "/hpage_pmd_size", &pmd_size) != 0 || pmd_size == 0) pmd_size = OS_HUGE_2M;
}

uint64_t page_kind_size(enum hugify_page_kind kind) {
  switch (kind) {
  case HUGIFY_PAGE_1G: return OS_HUGE_1G;
  case HUGIFY_PAGE_2M: return OS_HUGE_2M;
  case HUGIFY_PAGE_THP: pthread_once(&pmd_size_once, read_pmd_size); return pmd_size;
  default: return (uint64_t)sysconf(_SC_PAGESIZE);
  }
}

/* ---- feature probes --------------------------------------------------------------------------------- */

struct feature_cache {
  pthread_once_t once;
  enum hugify_feature_state state;
  char reason[HUGIFY_REASON_MAX];
};

static struct feature_cache madv_collapse_cache = {PTHREAD_ONCE_INIT, HUGIFY_FEATURE_UNKNOWN, ""};
static void probe_madv_collapse_once(void) {
  struct feature_cache *c = &madv_collapse_cache;
  size_t length = 2 * OS_HUGE_2M;
  void *scratch;
  int rc = os_map_aligned(length, OS_HUGE_2M, PROT_READ | PROT_WRITE, &scratch);
  if (rc) {
    snprintf(c->reason, sizeof c->reason, "MADV_COLLAPSE: scratch mapping failed (%s)", strerror(-rc));
    return;
  }
  char *p = scratch;
  p[0] = 1;
  int collapsed = os_madvise(p, OS_HUGE_2M, MADV_COLLAPSE);
  if (collapsed == 0) {
    c->state = HUGIFY_FEATURE_YES;
  } else if (collapsed == -EINVAL) {
    c->state = HUGIFY_FEATURE_NO;
    snprintf(c->reason, sizeof c->reason, "MADV_COLLAPSE: not supported by this kernel (needs Linux 6.1+)");
  } else {
    /* EAGAIN/ENOMEM: the kernel knows the advice but could not get a huge page right now. */
    c->state = HUGIFY_FEATURE_YES;
    snprintf(c->reason, sizeof c->reason, "MADV_COLLAPSE: supported, but the probe collapse failed (%s)",
             strerror(-collapsed));
  }
  os_munmap(p, length);
}

static struct feature_cache process_madvise_cache = {PTHREAD_ONCE_INIT, HUGIFY_FEATURE_UNKNOWN, ""};
static void probe_process_madvise_once(void) {
  struct feature_cache *c = &process_madvise_cache;
  /* An invalid pidfd: EBADF means the syscall exists, ENOSYS that it does not. */
  if (os_process_madvise(-1, NULL, 0, MADV_COLLAPSE) == -ENOSYS) {
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
  void *where = NULL;
  int rc = ok ? os_map_aligned(OS_HUGE_2M, OS_HUGE_2M, PROT_NONE, &where) : -EIO;
  void *mapped = NULL;
  if (!rc) rc = os_mmap(where, OS_HUGE_2M, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, 0, &mapped);
  char *p = mapped;
  close(fd); /* no writer may remain for a read-only file THP */
  unlink(path);
  if (!p) {
    if (where) os_munmap(where, OS_HUGE_2M);
    snprintf(c->reason, sizeof c->reason, "file THP for text: could not set up a probe file (%s)", strerror(-rc));
    return;
  }
  os_madvise(p, OS_HUGE_2M, MADV_HUGEPAGE);
  volatile char touch = p[0];
  (void)touch;
  int collapsed = os_madvise(p, OS_HUGE_2M, MADV_COLLAPSE);
  if (collapsed == 0) {
    c->state = HUGIFY_FEATURE_YES;
  } else {
    int err = -collapsed;
    c->state = err == EINVAL ? HUGIFY_FEATURE_NO : HUGIFY_FEATURE_UNKNOWN;
    snprintf(c->reason, sizeof c->reason,
             "file THP for text: MADV_COLLAPSE of file-backed text failed (%s)%s", strerror(err),
             err == EINVAL ? "; the kernel lacks CONFIG_READ_ONLY_THP_FOR_FS" : "");
  }
  os_munmap(p, OS_HUGE_2M);
}

static struct feature_cache pagemap_scan_cache = {PTHREAD_ONCE_INIT, HUGIFY_FEATURE_UNKNOWN, ""};
static void probe_pagemap_scan_once(void) {
  struct feature_cache *c = &pagemap_scan_cache;
  static char probe_page[8192];
  struct resident_bytes r;
  uintptr_t start = ((uintptr_t)probe_page + 4095) & ~(uintptr_t)4095;
  int rc = os_pagemap_resident(start, start + 4096, &r);
  c->state = rc == 0 ? HUGIFY_FEATURE_YES : HUGIFY_FEATURE_NO;
  if (rc)
    snprintf(c->reason, sizeof c->reason,
             "PAGEMAP_SCAN: %s (needs Linux 6.7+); the pagemap entries are read instead (huge pages exact as root "
             "through /proc/kpageflags, from smaps without)", strerror(-rc));
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

static enum hugify_feature_state report_feature(struct feature_cache *c, void (*probe)(void), char *reason,
                                                size_t cap) {
  pthread_once(&c->once, probe);
  if (c->reason[0]) reason_add(reason, cap, "%s", c->reason);
  return c->state;
}

enum hugify_feature_state probe_madv_collapse(char *reason, size_t cap) {
  return report_feature(&madv_collapse_cache, probe_madv_collapse_once, reason, cap);
}
enum hugify_feature_state probe_process_madvise(char *reason, size_t cap) {
  return report_feature(&process_madvise_cache, probe_process_madvise_once, reason, cap);
}
enum hugify_feature_state probe_file_thp_text(char *reason, size_t cap) {
  return report_feature(&file_thp_cache, probe_file_thp_once, reason, cap);
}
enum hugify_feature_state probe_pagemap_scan(char *reason, size_t cap) {
  return report_feature(&pagemap_scan_cache, probe_pagemap_scan_once, reason, cap);
}
enum hugify_feature_state probe_pmu(char *reason, size_t cap) {
  return report_feature(&pmu_cache, probe_pmu_once, reason, cap);
}

int probe_can_change_pools(void) {
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

  char *meminfo;
  if (os_read_file("/proc/meminfo", &meminfo, NULL) == 0) {
    parse_keyed_value(meminfo, "Hugepagesize", &sys->default_hugetlb_size);
    free(meminfo);
  }
  uint64_t sizes[HUGIFY_MAX_HUGETLB_SIZES];
  int count = os_hugetlb_sizes(sizes, HUGIFY_MAX_HUGETLB_SIZES);
  if (count < 0) reason_add(sys->reason, sizeof sys->reason, "hugetlb: %s absent (%s)", OS_SYSFS_HUGEPAGES,
                               strerror(-count));
  for (int i = 0; i < count; i++)
    if (os_hugetlb_read(sizes[i], &sys->hugetlb[sys->hugetlb_size_count]) == 0) sys->hugetlb_size_count++;

  probe_thp_setting("enabled", sys->thp_enabled, sizeof sys->thp_enabled);
  probe_thp_setting("defrag", sys->thp_defrag, sizeof sys->thp_defrag);
  if (os_read_u64(OS_SYSFS_THP "/hpage_pmd_size", &sys->thp_pmd_size) != 0) sys->thp_pmd_size = 0;
  if (!sys->thp_enabled[0]) reason_add(sys->reason, sizeof sys->reason, "THP: not built into this kernel");

  sys->madv_collapse = probe_madv_collapse(sys->reason, sizeof sys->reason);
  sys->process_madvise = probe_process_madvise(sys->reason, sizeof sys->reason);
  sys->file_thp_text = probe_file_thp_text(sys->reason, sizeof sys->reason);
  sys->pagemap_scan = probe_pagemap_scan(sys->reason, sizeof sys->reason);
  sys->pmu = probe_pmu(sys->reason, sizeof sys->reason);
  sys->can_change_pools = probe_can_change_pools();
  return 0;
}
