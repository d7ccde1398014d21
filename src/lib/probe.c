/* SPDX-License-Identifier: MIT */
/* probe.c - what this machine offers, found by trying it: feature probes, THP settings, hugify_probe. */
#include "probe.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
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

uint64_t hugify_pmd_size(void) { return os_pmd_size(); }

uint64_t page_kind_size(enum hugify_page_kind kind) {
  switch (kind) {
  case HUGIFY_PAGE_1G: return OS_HUGE_1G;
  case HUGIFY_PAGE_2M: /* hugetlb pages of the PMD size: 2 MiB on x86-64, the kind's name */
  case HUGIFY_PAGE_THP: return os_pmd_size();
  default: return os_base_page();
  }
}

/* ---- the features hugify uses: one table ------------------------------------------------------------- */

/* First versions checked against the kernel's own sources and docs: MADV_COLLAPSE (mm/khugepaged.c) and its
 * acceptance by process_madvise (mm/madvise.c: process_madvise_behavior_valid) 6.1; process_madvise 5.10;
 * PAGEMAP_SCAN (fs/proc/task_mmu.c) 6.7; per-size hugepages-<N>kB controls (admin-guide/mm/transhuge.rst) 6.8;
 * PR_THP_DISABLE_EXCEPT_ADVISED 6.18; DAMON 5.15, its sysfs 5.18 (avail_operations 6.0); soft-dirty 3.11;
 * idle page tracking 4.3; CONFIG_READ_ONLY_THP_FOR_FS 5.4 (collapsed in place by MADV_COLLAPSE: 6.1); DAMOS's
 * hugepage action 5.16 (mm/damon/vaddr.c), written through DAMON's sysfs schemes 5.18. Seen, not checked against
 * the sources: the DAMOS action collapse and khugepaged's per-size collapse_alloc, both there in Debian's 7.2.12
 * (the first version that has them may be earlier: 7.2 is the first seen). */
#define PROBE_DAMOS_ACTION_SOURCE "a scheme's action, written in a kdamond of hugify's own (EINVAL: not taken), or a scheme running it"
const struct probe_feature_info probe_features[PROBE_FEATURE_COUNT] = {
    [PROBE_THP] = {"thp", "THP", "2.6.38", "CONFIG_TRANSPARENT_HUGEPAGE", OS_SYSFS_THP, 0,
                   "hugetlb only: `hugify pool` and `run --heap hugetlb`, the text remap onto a reserved pool; "
                   "collapse and agent exit 3"},
    [PROBE_MADV_COLLAPSE] = {"madv_collapse", "MADV_COLLAPSE", "6.1", "", "madvise(MADV_COLLAPSE) of a scratch "
                             "mapping", 1, "`collapse` and `agent` exit 3; `run`, `inspect`, `pool` and `check` work (huge pages "
                             "come from faults and khugepaged)"},
    [PROBE_PROCESS_MADVISE] = {"process_madvise", "process_madvise", "5.10", "", "process_madvise(-1, ...): "
                               "EBADF or ENOSYS", 0, "collapse of another process and the agent exit 3"},
    [PROBE_PROCESS_MADVISE_COLLAPSE] = {"process_madvise_collapse", "process_madvise(MADV_COLLAPSE)", "6.1", "",
                                        "process_madvise(own pidfd, no ranges, MADV_COLLAPSE)", 1,
                                        "collapse of another process and the agent exit 3"},
    [PROBE_PAGEMAP_SCAN] = {"pagemap_scan", "PAGEMAP_SCAN", "6.7", "", "ioctl(/proc/self/pagemap, PAGEMAP_SCAN)", 0,
                            "per-window presence from /proc/PID/pagemap, hugeness exact as root through "
                            "/proc/kpageflags, from smaps without"},
    [PROBE_MTHP] = {"mthp", "mTHP sizes", "6.8", "", OS_SYSFS_THP "/hugepages-<N>kB", 1,
                    "the PMD size only; status shows no per-size controls"},
    [PROBE_KHUGEPAGED_MTHP] = {"khugepaged_mthp", "khugepaged mTHP collapse", "7.2", "",
                               OS_SYSFS_THP "/hugepages-<N>kB/stats/collapse_alloc below the PMD size", 1,
                               "khugepaged collapses to the PMD size only; status shows no per-size collapse counters"},
    [PROBE_THP_EXCEPT_ADVISED] = {"thp_disable_except_advised", "PR_THP_DISABLE_EXCEPT_ADVISED", "6.18", "",
                                  "prctl(PR_SET_THP_DISABLE, 1, PR_THP_DISABLE_EXCEPT_ADVISED) in a child", 0,
                                  "nothing: no program on it can have asked for it"},
    [PROBE_DAMON_VADDR] = {"damon_vaddr", "DAMON vaddr", "5.18", "CONFIG_DAMON_SYSFS, CONFIG_DAMON_VADDR",
                           PROBE_DAMON_ADMIN ", a context's avail_operations (its own where none is)", 0,
                           "nothing: hugify finds hot memory with its own pagemap walk"},
    [PROBE_DAMOS_COLLAPSE] = {"damos_collapse", "DAMOS action collapse", "7.2", "CONFIG_DAMON_SYSFS",
                              PROBE_DAMOS_ACTION_SOURCE, 1,
                              "nothing: hugify collapses hot memory itself (`hugify agent`, DAMON's heat where it has vaddr)"},
    [PROBE_DAMOS_HUGEPAGE] = {"damos_hugepage", "DAMOS action hugepage", "5.18", "CONFIG_DAMON_SYSFS",
                              PROBE_DAMOS_ACTION_SOURCE, 1,
                              "nothing: hugify advises (`hugify run`) and collapses (`hugify agent`) memory itself"},
    [PROBE_SOFT_DIRTY] = {"soft_dirty", "soft-dirty", "3.11", "CONFIG_MEM_SOFT_DIRTY",
                          "clear_refs 4, then pagemap bit 55 of a written page, in a child", 0,
                          "nothing: hugify does not need to know which pages were written"},
    [PROBE_PAGE_IDLE] = {"page_idle", "idle page tracking", "4.3", "CONFIG_IDLE_PAGE_TRACKING",
                         "/sys/kernel/mm/page_idle/bitmap", 0,
                         "nothing: hugify judges memory by presence, not by idleness"},
    [PROBE_FILE_THP_TEXT] = {"file_thp_text", "file THP for text", "6.1", "CONFIG_READ_ONLY_THP_FOR_FS",
                             "MADV_COLLAPSE of a read-only executable file mapping", 1,
                             "the text remap copies code to anonymous huge pages or a hugetlb pool"},
};

static bool exists_under(const char *root, const char *path) {
  char full[4096];
  root_path(full, sizeof full, root, path);
  return access(full, F_OK) == 0;
}

/* ---- probes by trying -------------------------------------------------------------------------------- */

/* The window a collapse probe collapses: one PMD, or, where the PMD is too big to make a page of for a probe
 * (512 MiB), one base page (the kernel still checks the advice, and collapses nothing). */
static size_t probe_window(void) {
  return page_sizes_collapse_wise(os_pmd_size()) ? (size_t)os_pmd_size() : (size_t)os_base_page();
}

static enum hugify_feature_state try_madv_collapse(char *detail, size_t cap) {
  size_t window = probe_window(), length = 2 * window;
  void *scratch;
  int rc = os_map_aligned(length, window, PROT_READ | PROT_WRITE, &scratch);
  if (rc) {
    snprintf(detail, cap, "scratch mapping failed (%s)", strerror(-rc));
    return HUGIFY_FEATURE_UNKNOWN;
  }
  char *p = scratch;
  p[0] = 1;
  int collapsed = os_madvise(p, window, MADV_COLLAPSE);
  os_munmap(p, length);
  if (collapsed == -EINVAL) {
    snprintf(detail, cap, "EINVAL: not supported by this kernel");
    return HUGIFY_FEATURE_NO;
  }
  /* EAGAIN/ENOMEM: the kernel knows the advice but could not get a huge page right now */
  if (collapsed) snprintf(detail, cap, "supported, but the probe collapse failed (%s)", strerror(-collapsed));
  return HUGIFY_FEATURE_YES;
}

static enum hugify_feature_state try_process_madvise(char *detail, size_t cap) {
  /* An invalid pidfd: EBADF means the syscall exists, ENOSYS that it does not. */
  if (os_process_madvise(-1, NULL, 0, MADV_COLLAPSE) != -ENOSYS) return HUGIFY_FEATURE_YES;
  snprintf(detail, cap, "ENOSYS: no such system call");
  return HUGIFY_FEATURE_NO;
}

static enum hugify_feature_state try_process_madvise_collapse(char *detail, size_t cap) {
  /* No ranges: the kernel checks the advice before it looks at any memory (EINVAL when it does not take it). */
  int pidfd = os_pidfd_open(getpid());
  if (pidfd < 0) {
    snprintf(detail, cap, "pidfd_open: %s", strerror(-pidfd));
    return pidfd == -ENOSYS ? HUGIFY_FEATURE_NO : HUGIFY_FEATURE_UNKNOWN;
  }
  struct iovec none = {0};
  ssize_t rc = os_process_madvise(pidfd, &none, 0, MADV_COLLAPSE);
  close(pidfd);
  if (rc >= 0) return HUGIFY_FEATURE_YES;
  snprintf(detail, cap, "%s", rc == -EINVAL ? "EINVAL: the advice is not taken" : strerror((int)-rc));
  return rc == -EINVAL || rc == -ENOSYS ? HUGIFY_FEATURE_NO : HUGIFY_FEATURE_UNKNOWN;
}

/* Whether MADV_COLLAPSE works on a read-only, executable, file-backed private mapping of a file on a
 * regular (non-tmpfs) filesystem: that needs CONFIG_READ_ONLY_THP_FOR_FS. */
static enum hugify_feature_state try_file_thp_text(char *detail, size_t cap) {
  if (!page_sizes_collapse_wise(os_pmd_size())) {
    char pmd[32];
    page_sizes_name(os_pmd_size(), pmd, sizeof pmd);
    snprintf(detail, cap, "the PMD huge page is %s: too big to put code on", pmd);
    return HUGIFY_FEATURE_NO;
  }
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
    snprintf(detail, cap, "no writable non-tmpfs directory to probe in");
    return HUGIFY_FEATURE_UNKNOWN;
  }
  size_t window = probe_window(), length = 2 * window;
  char *chunk = calloc(1, 65536);
  int ok = chunk != NULL;
  for (size_t done = 0; ok && done < length; done += 65536)
    ok = write(fd, chunk, 65536) == 65536;
  free(chunk);
  void *where = NULL;
  int rc = ok ? os_map_aligned(window, window, PROT_NONE, &where) : -EIO;
  void *mapped = NULL;
  if (!rc) rc = os_mmap(where, window, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, 0, &mapped);
  char *p = mapped;
  close(fd); /* no writer may remain for a read-only file THP */
  unlink(path);
  if (!p) {
    if (where) os_munmap(where, window);
    snprintf(detail, cap, "could not set up a probe file (%s)", strerror(-rc));
    return HUGIFY_FEATURE_UNKNOWN;
  }
  os_madvise(p, window, MADV_HUGEPAGE);
  volatile char touch = p[0];
  (void)touch;
  int collapsed = os_madvise(p, window, MADV_COLLAPSE);
  os_munmap(p, window);
  if (collapsed == 0) return HUGIFY_FEATURE_YES;
  int err = -collapsed;
  snprintf(detail, cap, "MADV_COLLAPSE of file-backed text failed (%s)%s", strerror(err),
           err == EINVAL ? ": the kernel lacks CONFIG_READ_ONLY_THP_FOR_FS" : "");
  return err == EINVAL ? HUGIFY_FEATURE_NO : HUGIFY_FEATURE_UNKNOWN;
}

static enum hugify_feature_state try_pagemap_scan(char *detail, size_t cap) {
  struct resident_bytes r;
  size_t page = (size_t)os_base_page(); /* the ioctl takes whole pages: 4, 16 or 64 KiB */
  void *probe_page;
  int rc = os_mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &probe_page);
  if (rc) {
    snprintf(detail, cap, "scratch page: %s", strerror(-rc));
    return HUGIFY_FEATURE_UNKNOWN;
  }
  rc = os_pagemap_resident((uintptr_t)probe_page, (uintptr_t)probe_page + page, &r);
  os_munmap(probe_page, page);
  if (rc == 0) return HUGIFY_FEATURE_YES;
  snprintf(detail, cap, "%s", strerror(-rc));
  return HUGIFY_FEATURE_NO;
}

/* Runs try in a child (what it changes is the child's: a prctl, the soft-dirty bits), which exits with a
 * hugify_feature_state. */
static enum hugify_feature_state in_child(int (*try)(void), char *detail, size_t cap) {
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(detail, cap, "fork: %s", strerror(errno));
    return HUGIFY_FEATURE_UNKNOWN;
  }
  if (pid == 0) _exit(try());
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return HUGIFY_FEATURE_UNKNOWN;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : HUGIFY_FEATURE_UNKNOWN;
  return code == HUGIFY_FEATURE_YES || code == HUGIFY_FEATURE_NO ? (enum hugify_feature_state)code
                                                                 : HUGIFY_FEATURE_UNKNOWN;
}

static int child_thp_except_advised(void) {
  if (prctl(PR_SET_THP_DISABLE, 1, PR_THP_DISABLE_EXCEPT_ADVISED, 0, 0) == 0) return HUGIFY_FEATURE_YES;
  return errno == EINVAL ? HUGIFY_FEATURE_NO : HUGIFY_FEATURE_UNKNOWN;
}

static enum hugify_feature_state try_thp_except_advised(char *detail, size_t cap) {
  enum hugify_feature_state state = in_child(child_thp_except_advised, detail, cap);
  if (state == HUGIFY_FEATURE_NO) snprintf(detail, cap, "EINVAL: the flag is not known");
  return state;
}

/* Soft-dirty: after clear_refs 4, a page written again has pagemap bit 55; without CONFIG_MEM_SOFT_DIRTY the
 * bit is never set. */
static int child_soft_dirty(void) {
  void *mapped;
  size_t page_size = (size_t)os_base_page();
  if (os_mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &mapped)) return 2;
  volatile char *page = mapped;
  page[0] = 1;
  if (os_write_file("/proc/self/clear_refs", "4") != 0) return 2;
  page[0] = 2;
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  uint64_t entry = 0;
  bool read_ok = fd >= 0 && pread(fd, &entry, sizeof entry, (off_t)((uintptr_t)mapped / page_size * 8)) == sizeof entry;
  if (fd >= 0) close(fd);
  if (!read_ok || !(entry >> 63)) return 2; /* unreadable, or the page is not present */
  return (entry >> 55) & 1 ? HUGIFY_FEATURE_YES : HUGIFY_FEATURE_NO;
}

static enum hugify_feature_state try_soft_dirty(char *detail, size_t cap) {
  enum hugify_feature_state state = in_child(child_soft_dirty, detail, cap);
  if (state == HUGIFY_FEATURE_NO) snprintf(detail, cap, "a page written after clear_refs 4 has no bit 55");
  if (state == HUGIFY_FEATURE_UNKNOWN && !detail[0])
    snprintf(detail, cap, "/proc/self/clear_refs or /proc/self/pagemap could not be used");
  return state;
}

/* ---- DAMON's operations ------------------------------------------------------------------------------- */

bool probe_damon_lists_vaddr(const char *avail_operations) {
  for (const char *word = avail_operations; *word;) {
    size_t length = strcspn(word, " \n");
    if (length == 5 && strncmp(word, "vaddr", 5) == 0) return true;
    word += length + (word[length] != '\0');
  }
  return false;
}

static enum hugify_feature_state judge_operations(const char *avail_operations, char *detail, size_t cap) {
  if (probe_damon_lists_vaddr(avail_operations)) return HUGIFY_FEATURE_YES;
  char listed[256];
  snprintf(listed, sizeof listed, "%s", avail_operations);
  for (char *c = listed; *c; c++)
    if (*c == '\n') *c = ' ';
  snprintf(detail, cap, "DAMON's sysfs lists only: %s", listed[0] ? listed : "nothing");
  return HUGIFY_FEATURE_NO;
}

/* 5.18 and 5.19 have DAMON's sysfs without avail_operations: the operations cannot be told there. */
static void no_avail_operations(int err, char *detail, size_t cap) {
  snprintf(detail, cap, "DAMON's sysfs has no avail_operations (%s): Linux 6.0+ lists them", strerror(err));
}

/* The first context's avail_operations under any of the kdamonds there (reading changes nothing): 1 found
 * (in text), 0 none set up, or -errno. */
static int read_any_operations(const char *admin, uint64_t kdamonds, char *text, size_t cap) {
  for (uint64_t k = 0; k < kdamonds && k < 1024; k++) {
    char path[4096];
    uint64_t contexts = 0;
    snprintf(path, sizeof path, "%s/kdamonds/%llu/contexts/nr_contexts", admin, (unsigned long long)k);
    if (os_read_u64(path, &contexts) != 0 || contexts == 0) continue;
    snprintf(path, sizeof path, "%s/kdamonds/%llu/contexts/0/avail_operations", admin, (unsigned long long)k);
    ssize_t n = os_read_small(path, text, cap);
    return n < 0 ? (int)n : 1;
  }
  return 0;
}

/* Where no kdamond exists: kdamond 0 with one context of hugify's own, just long enough for use (0 or -errno,
 * filling detail) to read or try something in it (the context's directory), then both removed: nr_contexts and
 * nr_kdamonds back to 0. use's answer, or -errno with detail when the set-up or the removal failed. */
typedef int (*own_context_use)(const char *context, void *arg, char *detail, size_t cap);
static int with_own_context(const char *admin, const char *purpose, own_context_use use, void *arg, char *detail,
                            size_t cap) {
  char kdamonds[4096], contexts[4096], context[4096];
  snprintf(kdamonds, sizeof kdamonds, "%s/kdamonds/nr_kdamonds", admin);
  snprintf(contexts, sizeof contexts, "%s/kdamonds/0/contexts/nr_contexts", admin);
  snprintf(context, sizeof context, "%s/kdamonds/0/contexts/0", admin);
  int rc = os_write_file(kdamonds, "1");
  if (rc) {
    snprintf(detail, cap, "DAMON's sysfs has no kdamond, and one could not be set up to %s (%s)%s", purpose,
             strerror(-rc), rc == -EACCES || rc == -EPERM ? ": run as root" : "");
    return rc;
  }
  int used = -EIO;
  if ((rc = os_write_file(contexts, "1")) == 0) {
    used = use(context, arg, detail, cap);
    rc = os_write_file(contexts, "0");
  }
  int put_back = os_write_file(kdamonds, "0");
  if (put_back || rc)
    snprintf(detail, cap, "DAMON: a context of hugify's own could not be %s (%s)",
             put_back ? "removed: kdamonds/nr_kdamonds is left at 1" : "set up", strerror(-(put_back ? put_back : rc)));
  return put_back ? put_back : rc ? rc : used;
}

struct text_buffer {
  char *text;
  size_t cap;
};

static int read_operations_in(const char *context, void *arg, char *detail, size_t cap) {
  struct text_buffer *out = arg;
  char path[4200];
  snprintf(path, sizeof path, "%s/avail_operations", context);
  ssize_t n = os_read_small(path, out->text, out->cap);
  if (n < 0) no_avail_operations((int)-n, detail, cap);
  return n < 0 ? (int)n : 0;
}

/* DAMON's sysfs under admin and its number of kdamonds: true, or false with the answer in *state and why in
 * detail. */
static bool damon_kdamonds(const char *admin, uint64_t *kdamonds, enum hugify_feature_state *state, char *detail,
                           size_t cap) {
  char path[4096];
  if (access(admin, F_OK) != 0) {
    snprintf(detail, cap, "no DAMON sysfs (%s)", admin);
    *state = HUGIFY_FEATURE_NO;
    return false;
  }
  snprintf(path, sizeof path, "%s/kdamonds/nr_kdamonds", admin);
  int rc = os_read_u64(path, kdamonds);
  if (rc) {
    snprintf(detail, cap, "%s unreadable (%s)%s", path, strerror(-rc), rc == -EACCES ? ": run as root" : "");
    *state = HUGIFY_FEATURE_UNKNOWN;
  }
  return rc == 0;
}

/* Whether hugify may set a kdamond of its own up here: only where there is none at all, on a live machine.
 * Writing nr_kdamonds removes every kdamond there, and one that is off with no context may be another user's
 * in the middle of setting it up. false with why in detail (what the others lack: `lacking`). */
static bool may_set_up_own(uint64_t kdamonds, bool may_set_up, const char *lacking, char *detail, size_t cap) {
  if (kdamonds > 0)
    snprintf(detail, cap, PROBE_DAMON_OTHERS " and none %s: hugify does not touch them", (unsigned long long)kdamonds,
             lacking);
  else if (!may_set_up)
    snprintf(detail, cap, "nothing in this captured tree %s (hugify sets a context of its own up for a moment on a "
             "live machine only)", lacking);
  return kdamonds == 0 && may_set_up;
}

enum hugify_feature_state probe_damon_vaddr_at(const char *admin, bool may_set_up, char *detail, size_t cap) {
  char text[256];
  uint64_t kdamonds = 0;
  enum hugify_feature_state state;
  if (!damon_kdamonds(admin, &kdamonds, &state, detail, cap)) return state;
  int rc = read_any_operations(admin, kdamonds, text, sizeof text);
  if (rc == 1) return judge_operations(text, detail, cap);
  if (rc < 0) {
    no_avail_operations(-rc, detail, cap);
    return HUGIFY_FEATURE_UNKNOWN;
  }
  struct text_buffer operations = {text, sizeof text};
  if (!may_set_up_own(kdamonds, may_set_up, "has a context to list avail_operations", detail, cap) ||
      with_own_context(admin, "list its avail_operations", read_operations_in, &operations, detail, cap) != 0)
    return HUGIFY_FEATURE_UNKNOWN;
  return judge_operations(text, detail, cap);
}

/* ---- DAMOS actions ------------------------------------------------------------------------------------ */

static void read_leaf(const char *dir, const char *leaf, char *buf, size_t cap) {
  char path[4608];
  snprintf(path, sizeof path, "%s/%s", dir, leaf);
  if (os_read_small(path, buf, cap) < 0) buf[0] = '\0';
  buf[strcspn(buf, "\n")] = '\0';
}

static unsigned read_count(const char *dir, const char *leaf) {
  char text[32];
  read_leaf(dir, leaf, text, sizeof text);
  unsigned long count = strtoul(text, NULL, 10);
  return count > 1024 ? 1024 : (unsigned)count;
}

/* One context's schemes into out[*count...], its targets read once for them all. */
static void read_context_schemes(const char *context, const struct probe_damon_scheme *kdamond,
                                 struct probe_damon_scheme *out, unsigned cap, unsigned *count) {
  struct probe_damon_scheme base = *kdamond;
  char dir[4400], text[32];
  read_leaf(context, "operations", base.operations, sizeof base.operations);
  base.target_count = read_count(context, "targets/nr_targets");
  for (unsigned t = 0; t < base.target_count && t < PROBE_DAMON_TARGETS_MAX; t++) {
    snprintf(dir, sizeof dir, "%s/targets/%u", context, t);
    read_leaf(dir, "pid_target", text, sizeof text);
    base.targets[t] = atoi(text);
  }
  for (unsigned n = read_count(context, "schemes/nr_schemes"), k = 0; k < n; k++, (*count)++) {
    if (*count >= cap) continue;
    out[*count] = base;
    out[*count].scheme = k;
    snprintf(dir, sizeof dir, "%s/schemes/%u", context, k);
    read_leaf(dir, "action", out[*count].action, sizeof out[*count].action);
  }
}

int probe_damon_schemes(const char *admin, struct probe_damon_scheme *out, unsigned cap) {
  char path[4096], dir[4200], text[32];
  uint64_t kdamonds = 0;
  snprintf(path, sizeof path, "%s/kdamonds/nr_kdamonds", admin);
  int rc = os_read_u64(path, &kdamonds);
  if (rc) return rc;
  unsigned count = 0;
  for (unsigned k = 0; k < kdamonds && k < 1024; k++) {
    struct probe_damon_scheme kdamond = {.kdamond = k};
    snprintf(dir, sizeof dir, "%s/kdamonds/%u", admin, k);
    read_leaf(dir, "state", kdamond.state, sizeof kdamond.state);
    read_leaf(dir, "pid", text, sizeof text);
    kdamond.kdamond_pid = atoi(text) > 0 ? atoi(text) : 0;
    for (unsigned n = read_count(dir, "contexts/nr_contexts"), c = 0; c < n; c++) {
      char context[4300];
      kdamond.context = c;
      snprintf(context, sizeof context, "%s/contexts/%u", dir, c);
      read_context_schemes(context, &kdamond, out, cap, &count);
    }
  }
  return (int)count;
}

int probe_damon_modules(const char *root, struct probe_damon_module *out, unsigned cap) {
  static const char *const modules[] = {"damon_stat", "damon_reclaim", "damon_lru_sort"};
  unsigned count = 0;
  for (size_t m = 0; m < sizeof modules / sizeof modules[0] && count < cap; m++) {
    char dir[512], path[4096], text[32];
    snprintf(dir, sizeof dir, "/sys/module/%s/parameters", modules[m]);
    root_path(path, sizeof path, root, dir);
    read_leaf(path, "enabled", text, sizeof text);
    if (strcmp(text, "Y") != 0) continue;
    snprintf(out[count].name, sizeof out[count].name, "%s", modules[m]);
    read_leaf(path, "kdamond_pid", text, sizeof text);
    out[count].kdamond_pid = atoi(text) > 0 ? atoi(text) : 0;
    count++;
  }
  return (int)count;
}

int probe_damon_held(char *reason, size_t cap) {
  struct probe_damon_module held;
  if (probe_damon_modules("", &held, 1) == 0) return 0;
  char upper[16];
  for (size_t i = 0; i < sizeof upper; i++) upper[i] = (char)toupper((unsigned char)held.name[i]);
  reason_add(reason, cap, "%s, inside the kernel (kdamond pid %d), holds DAMON: no kdamond of DAMON's sysfs can start "
             "while it runs (EBUSY); fix: echo N > /sys/module/%s/parameters/enabled (or %s.enabled=N on the "
             "kernel command line)", upper, held.kdamond_pid, held.name, held.name);
  return 1;
}

struct action_try {
  const char *action;
  int written; /* the action's write: 0, -errno, or 1 when never tried */
};

/* In a context of hugify's own: one scheme, its action written, the scheme removed (the context's removal would
 * take it too). */
static int try_action_in(const char *context, void *arg, char *detail, size_t cap) {
  struct action_try *t = arg;
  char schemes[4200], action[4200];
  snprintf(schemes, sizeof schemes, "%s/schemes/nr_schemes", context);
  snprintf(action, sizeof action, "%s/schemes/0/action", context);
  int rc = os_write_file(schemes, "1");
  if (rc) {
    snprintf(detail, cap, "DAMON: a scheme of hugify's own could not be set up (%s)", strerror(-rc));
    return rc;
  }
  t->written = os_write_file(action, t->action);
  os_write_file(schemes, "0");
  if (t->written == -EINVAL) snprintf(detail, cap, "EINVAL: DAMON's schemes do not take the action '%s'", t->action);
  else if (t->written) snprintf(detail, cap, "writing the action '%s' failed (%s)", t->action, strerror(-t->written));
  return 0;
}

enum hugify_feature_state probe_damos_action_at(const char *admin, const char *action, bool may_set_up, char *detail,
                                                size_t cap) {
  uint64_t kdamonds = 0;
  enum hugify_feature_state state;
  if (!damon_kdamonds(admin, &kdamonds, &state, detail, cap)) return state;
  struct probe_damon_scheme schemes[32];
  int count = probe_damon_schemes(admin, schemes, 32);
  for (int i = 0; i < count && i < 32; i++)
    if (strcmp(schemes[i].action, action) == 0) return HUGIFY_FEATURE_YES; /* the kernel took it from its user */
  char lacking[96];
  snprintf(lacking, sizeof lacking, "has a scheme with the action '%s'", action);
  struct action_try t = {action, 1};
  if (!may_set_up_own(kdamonds, may_set_up, lacking, detail, cap) ||
      with_own_context(admin, "try a scheme's action", try_action_in, &t, detail, cap) != 0 || t.written == 1)
    return HUGIFY_FEATURE_UNKNOWN;
  return t.written == 0 ? HUGIFY_FEATURE_YES : t.written == -EINVAL ? HUGIFY_FEATURE_NO : HUGIFY_FEATURE_UNKNOWN;
}

/* ---- probes by the kernel's files -------------------------------------------------------------------- */

/* khugepaged collapses to sizes below the PMD size where it counts them per size. */
static enum hugify_feature_state khugepaged_mthp_at(const char *root, char *detail, size_t cap) {
  char dir[4096], path[4200];
  uint64_t sizes[32], pmd = 0;
  root_path(dir, sizeof dir, root, OS_SYSFS_THP);
  int count = os_hugepage_size_dirs(dir, sizes, 32);
  snprintf(path, sizeof path, "%s/hpage_pmd_size", dir);
  if (os_read_u64(path, &pmd) != 0 || pmd == 0) pmd = os_pmd_size();
  for (int i = 0; i < count; i++) {
    snprintf(path, sizeof path, "%s/hugepages-%llukB/stats/collapse_alloc", dir, (unsigned long long)(sizes[i] >> 10));
    if (sizes[i] < pmd && access(path, F_OK) == 0) return HUGIFY_FEATURE_YES;
  }
  snprintf(detail, cap, "%s", count > 0 ? "no hugepages-<N>kB/stats/collapse_alloc below the PMD size"
                                        : "no per-size directories (mTHP sizes, Linux 6.8+)");
  return HUGIFY_FEATURE_NO;
}

static enum hugify_feature_state file_feature(const char *root, enum probe_feature feature, char *detail,
                                              size_t cap) {
  char path[4096];
  switch (feature) {
  case PROBE_THP:
  case PROBE_PAGE_IDLE:
    return exists_under(root, probe_features[feature].source) ? HUGIFY_FEATURE_YES : HUGIFY_FEATURE_NO;
  case PROBE_MTHP: {
    uint64_t sizes[1];
    root_path(path, sizeof path, root, OS_SYSFS_THP);
    return os_hugepage_size_dirs(path, sizes, 1) > 0 ? HUGIFY_FEATURE_YES : HUGIFY_FEATURE_NO;
  }
  case PROBE_KHUGEPAGED_MTHP: return khugepaged_mthp_at(root, detail, cap);
  case PROBE_DAMON_VADDR:
    root_path(path, sizeof path, root, PROBE_DAMON_ADMIN);
    return probe_damon_vaddr_at(path, !root[0], detail, cap);
  case PROBE_DAMOS_COLLAPSE:
  case PROBE_DAMOS_HUGEPAGE:
    root_path(path, sizeof path, root, PROBE_DAMON_ADMIN);
    return probe_damos_action_at(path, feature == PROBE_DAMOS_COLLAPSE ? "collapse" : "hugepage", !root[0], detail,
                                 cap);
  default: return HUGIFY_FEATURE_UNKNOWN;
  }
}

/* ---- the answers ------------------------------------------------------------------------------------- */

static enum hugify_feature_state (*const tries[PROBE_FEATURE_COUNT])(char *, size_t) = {
    [PROBE_MADV_COLLAPSE] = try_madv_collapse,
    [PROBE_PROCESS_MADVISE] = try_process_madvise,
    [PROBE_PROCESS_MADVISE_COLLAPSE] = try_process_madvise_collapse,
    [PROBE_PAGEMAP_SCAN] = try_pagemap_scan,
    [PROBE_THP_EXCEPT_ADVISED] = try_thp_except_advised,
    [PROBE_SOFT_DIRTY] = try_soft_dirty,
    [PROBE_FILE_THP_TEXT] = try_file_thp_text,
};

static struct {
  bool done;
  enum hugify_feature_state state;
  char detail[HUGIFY_REASON_MAX];
} tried[PROBE_FEATURE_COUNT];
static pthread_mutex_t tried_lock = PTHREAD_MUTEX_INITIALIZER;

static const char no_thp[] = "THP is not built into this kernel (CONFIG_TRANSPARENT_HUGEPAGE)";

enum hugify_feature_state probe_feature_at(const char *root, enum probe_feature feature, char *detail,
                                           size_t cap) {
  char ignored[8];
  if (!detail) { detail = ignored; cap = sizeof ignored; }
  detail[0] = '\0';
  if ((unsigned)feature >= PROBE_FEATURE_COUNT) return HUGIFY_FEATURE_UNKNOWN;
  bool live = !root || !root[0] || strcmp(root, "/") == 0;
  if ((feature == PROBE_THP || probe_features[feature].needs_thp) && !exists_under(root, OS_SYSFS_THP)) {
    snprintf(detail, cap, "%s", no_thp);
    return HUGIFY_FEATURE_NO;
  }
  if (!tries[feature]) return file_feature(live ? "" : root, feature, detail, cap);
  if (!live) {
    snprintf(detail, cap, "not probed: the state was read from %s, not from this machine", root);
    return HUGIFY_FEATURE_UNKNOWN;
  }
  pthread_mutex_lock(&tried_lock);
  if (!tried[feature].done) {
    tried[feature].state = tries[feature](tried[feature].detail, sizeof tried[feature].detail);
    tried[feature].done = true;
  }
  enum hugify_feature_state state = tried[feature].state;
  snprintf(detail, cap, "%s", tried[feature].detail);
  pthread_mutex_unlock(&tried_lock);
  return state;
}

enum hugify_feature_state probe_feature(enum probe_feature feature, char *detail, size_t cap) {
  return probe_feature_at("/", feature, detail, cap);
}

int probe_require(enum probe_feature feature, char *reason, size_t cap) {
  char detail[HUGIFY_REASON_MAX];
  if (probe_feature(feature, detail, sizeof detail) != HUGIFY_FEATURE_NO) return 0;
  const struct probe_feature_info *f = &probe_features[feature];
  if (feature == PROBE_THP || strcmp(detail, no_thp) == 0) {
    snprintf(reason, cap,
             "%s needs transparent huge pages, and %s; fix: take huge pages from a hugetlb pool instead "
             "(hugify pool set 2M=N, then hugify run --heap hugetlb PROGRAM), or boot a kernel built with THP",
             f->name, no_thp);
    return -ENOSYS;
  }
  if (cap) reason[0] = '\0';
  probe_missing(feature, detail, reason, cap);
  return -ENOSYS;
}

void probe_fix(enum probe_feature feature, char *fix, size_t cap) {
  const struct probe_feature_info *f = &probe_features[feature];
  snprintf(fix, cap, "run Linux %s or later%s%s", f->since, f->config[0] ? " built with " : "", f->config);
}

void probe_missing(enum probe_feature feature, const char *detail, char *reason, size_t cap) {
  const struct probe_feature_info *f = &probe_features[feature];
  struct utsname name;
  char fix[128];
  if (uname(&name) != 0) snprintf(name.release, sizeof name.release, "?");
  probe_fix(feature, fix, sizeof fix);
  reason_add(reason, cap, "%s needs Linux %s%s%s (this kernel: %s, %s); fix: %s", f->name, f->since,
             f->config[0] ? " built with " : "", f->config, name.release, detail[0] ? detail : "not there", fix);
}

/* The probes hugify_probe and the library's callers had before the table: the reason as "<name>: <detail>". */
static enum hugify_feature_state report_feature(enum probe_feature feature, char *reason, size_t cap) {
  char detail[HUGIFY_REASON_MAX];
  enum hugify_feature_state state = probe_feature(feature, detail, sizeof detail);
  const struct probe_feature_info *f = &probe_features[feature];
  if (state == HUGIFY_FEATURE_NO && reason && strcmp(detail, no_thp) == 0) {
    reason_add(reason, cap, "%s: %s", f->name, detail);
  } else if (state != HUGIFY_FEATURE_YES && reason) {
    reason_add(reason, cap, "%s: %s (needs Linux %s+)", f->name, detail[0] ? detail : "not there", f->since);
  } else if (detail[0] && reason) {
    reason_add(reason, cap, "%s: %s", probe_features[feature].name, detail);
  }
  return state;
}

enum hugify_feature_state probe_madv_collapse(char *reason, size_t cap) {
  return report_feature(PROBE_MADV_COLLAPSE, reason, cap);
}
enum hugify_feature_state probe_process_madvise(char *reason, size_t cap) {
  return report_feature(PROBE_PROCESS_MADVISE, reason, cap);
}
enum hugify_feature_state probe_file_thp_text(char *reason, size_t cap) {
  return report_feature(PROBE_FILE_THP_TEXT, reason, cap);
}
enum hugify_feature_state probe_pagemap_scan(char *reason, size_t cap) {
  return report_feature(PROBE_PAGEMAP_SCAN, reason, cap);
}

/* The PMU is not a kernel feature of the table: whether this machine's CPU counts for perf. */
static struct {
  pthread_once_t once;
  enum hugify_feature_state state;
  char reason[HUGIFY_REASON_MAX];
} pmu_cache = {PTHREAD_ONCE_INIT, HUGIFY_FEATURE_UNKNOWN, ""};
static void probe_pmu_once(void) {
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
    pmu_cache.state = HUGIFY_FEATURE_YES;
    return;
  }
  int err = errno;
  if (err == ENOENT || err == EOPNOTSUPP || err == ENODEV || err == ENOSYS) {
    pmu_cache.state = HUGIFY_FEATURE_NO;
    snprintf(pmu_cache.reason, sizeof pmu_cache.reason, "PMU: hardware counters not supported on this machine (%s)",
             strerror(err));
  } else {
    snprintf(pmu_cache.reason, sizeof pmu_cache.reason,
             "PMU: perf_event_open refused (%s); see /proc/sys/kernel/perf_event_paranoid", strerror(err));
  }
}

enum hugify_feature_state probe_pmu(char *reason, size_t cap) {
  pthread_once(&pmu_cache.once, probe_pmu_once);
  if (pmu_cache.reason[0] && reason) reason_add(reason, cap, "%s", pmu_cache.reason);
  return pmu_cache.state;
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
