/* SPDX-License-Identifier: MIT */
/* inspect.c - hugify_inspect: how much of a process is on huge pages, by class and page kind, and why
 * the rest is not. Every figure is a sum of /proc/PID/smaps fields. */
#include "inspect.h"
#include "array.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf_image.h"
#include "internal.h"
#include "os.h"
#include "probe.h"

static const char *const class_names[HUGIFY_CLASS_COUNT] = {"code", "heap", "anon", "stack", "shm", "file"};

const char *hugify_memory_class_name(enum hugify_memory_class memory_class) {
  return (unsigned)memory_class < HUGIFY_CLASS_COUNT ? class_names[memory_class] : "?";
}

static const struct { const char *name, *text; } reasons[HUGIFY_WHY_COUNT] = {
    [HUGIFY_WHY_NONE] = {"none", "all resident memory is on huge pages"},
    [HUGIFY_WHY_THP_DISABLED] = {"thp_disabled",
                                 "the process disabled THP (prctl PR_SET_THP_DISABLE, as systemd's MemoryTHP= "
                                 "does for a service; inherited across fork and exec); the kernel also refuses "
                                 "MADV_COLLAPSE for it"},
    [HUGIFY_WHY_NOHUGEPAGE] = {"nohugepage",
                               "marked MADV_NOHUGEPAGE by the program (thread stacks get it from MAP_STACK)"},
    [HUGIFY_WHY_SPECIAL] = {"special", "kernel special mapping ([vdso], [vvar], ...)"},
    [HUGIFY_WHY_FILE] = {"file",
                         "file-backed page cache: huge only with file THP (CONFIG_READ_ONLY_THP_FOR_FS); for "
                         "code, `hugify run` copies text onto huge pages"},
    [HUGIFY_WHY_SHMEM] = {"shmem",
                          "a tmpfs file (/dev/shm): huge at first touch only with the mount's huge= option (mount -o "
                          "remount,huge=within_size /dev/shm); `hugify collapse PID` works when it is 2 MiB-aligned"},
    [HUGIFY_WHY_SHMEM_UNALIGNED] = {"shmem_unaligned",
                                    "shared memory mapped while shmem_enabled was never: the kernel did not place it "
                                    "on a 2 MiB boundary, so it can never be huge. Fix: echo advise > "
                                    "/sys/kernel/mm/transparent_hugepage/shmem_enabled and restart the program (best "
                                    "under `hugify run`), or use the program's own huge-page option (PostgreSQL: "
                                    "huge_pages=on and a pool, `hugify pool`)"},
    [HUGIFY_WHY_SHMEM_DENY] = {"shmem_deny",
                               "shared memory while shmem_enabled is deny. Fix: echo advise > "
                               "/sys/kernel/mm/transparent_hugepage/shmem_enabled and restart the program"},
    [HUGIFY_WHY_SHMEM_NOT_HUGE] = {"shmem_not_huge",
                                   "shared memory that can be huge, on 4 KiB pages (shmem_enabled never, or advise "
                                   "without MADV_HUGEPAGE); `hugify collapse PID` fixes it now; for memory to come: "
                                   "echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled and `hugify run`"},
    [HUGIFY_WHY_TOO_SMALL] = {"too_small", "no aligned huge-page (PMD: 2 MiB on x86-64) window fits in the mapping"},
    [HUGIFY_WHY_THP_NEVER] = {"thp_never",
                              "system THP mode is never (or THP is absent); `hugify collapse PID` still works"},
    [HUGIFY_WHY_NOT_ADVISED] = {"not_advised",
                                "system THP mode is madvise and the program never madvised this mapping; "
                                "`hugify collapse PID` or `hugify run` fix it"},
    [HUGIFY_WHY_NOT_COLLAPSED] = {"not_collapsed",
                                  "eligible, but faulted on 4 KiB pages and not collapsed yet; "
                                  "`hugify collapse PID` fixes it"},
    [HUGIFY_WHY_THP_EXCEPT_ADVISED] = {"thp_except_advised",
                                       "the process disabled THP except where it advised (prctl PR_SET_THP_DISABLE "
                                       "with PR_THP_DISABLE_EXCEPT_ADVISED) and never advised this mapping; hugify "
                                       "leaves it alone (only `hugify collapse PID --override-opt-out` collapses it)"},
    [HUGIFY_WHY_THP_NOT_ELIGIBLE] = {"thp_not_eligible",
                                     "the kernel reports THPeligible: 0 for this anonymous mapping while a THP size "
                                     "is 'always', for a reason hugify cannot name; hugify leaves it alone "
                                     "(only `hugify collapse PID --override-opt-out` collapses it)"},
};

static const char *const stance_names[] = {
    [HUGIFY_THP_STANCE_UNKNOWN] = "unknown",
    [HUGIFY_THP_STANCE_ENABLED] = "enabled",
    [HUGIFY_THP_STANCE_DISABLED] = "disabled",
    [HUGIFY_THP_STANCE_DISABLED_EXCEPT_ADVISED] = "disabled_except_advised",
};

const char *hugify_thp_stance_name(enum hugify_thp_stance stance) {
  return (unsigned)stance < sizeof stance_names / sizeof stance_names[0] ? stance_names[stance] : "?";
}

const char *hugify_not_huge_reason_name(enum hugify_not_huge_reason why) {
  return (unsigned)why < HUGIFY_WHY_COUNT ? reasons[why].name : "?";
}
const char *hugify_not_huge_reason_text(enum hugify_not_huge_reason why) {
  return (unsigned)why < HUGIFY_WHY_COUNT ? reasons[why].text : "?";
}

uint64_t hugify_usage_huge(const struct hugify_usage *usage) {
  return usage ? usage->thp + usage->hugetlb_2m + usage->hugetlb_1g : 0;
}

/* ---- pure classification --------------------------------------------------------------------------- */

uint64_t aligned_window_bytes(uint64_t start, uint64_t end, uint64_t window) {
  uint64_t first = (start + window - 1) & ~(window - 1), last = end & ~(window - 1);
  return last > first ? last - first : 0;
}

static bool starts_with(const char *text, const char *prefix) { return strncmp(text, prefix, strlen(prefix)) == 0; }

bool vma_is_private_anonymous(const struct smaps_vma *vma) {
  if (vma->perms[3] != 'p' || vma->inode != 0) return false;
  return vma->path[0] == '\0' || strcmp(vma->path, "[heap]") == 0 || strcmp(vma->path, "[stack]") == 0 ||
         starts_with(vma->path, "[anon:");
}

bool vma_collapse_candidate(const struct smaps_vma *vma, uint64_t pmd_size) {
  return vma_is_private_anonymous(vma) && vma->perms[1] == 'w' && !smaps_vma_is_hugetlb(vma) &&
         aligned_window_bytes(vma->start, vma->end, pmd_size) >= pmd_size;
}

bool vma_collapse_eligible(const struct smaps_vma *vma, uint64_t pmd_size) {
  return vma_collapse_candidate(vma, pmd_size) && !(vma->vm_flags & SMAPS_VM_NOHUGEPAGE);
}

/* "[vdso]", "[vvar]", "[vsyscall]", "[uprobes]": bracketed names that are neither anonymous memory nor shm. */
static bool vma_is_special(const struct smaps_vma *vma) {
  return vma->path[0] == '[' && !vma_is_private_anonymous(vma) && !starts_with(vma->path, "[anon_shmem:");
}

bool vma_is_shmem(const struct smaps_vma *vma) {
  if (vma->perms[3] != 's' || smaps_vma_is_hugetlb(vma)) return false;
  static const char *const prefixes[] = {"/dev/shm/", "/SYSV", "/memfd:", "/dev/zero", "[anon_shmem:"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (starts_with(vma->path, prefixes[i])) return true;
  return false;
}

bool vma_shmem_aligned(const struct smaps_vma *vma, uint64_t pmd_size) {
  return ((vma->start - vma->offset) & (pmd_size - 1)) == 0;
}

void inspect_shmem_mode(char *out, size_t cap) {
  char size_mode[24];
  probe_thp_setting("hugepages-2048kB/shmem_enabled", size_mode, sizeof size_mode);
  if (size_mode[0] && strcmp(size_mode, "inherit") != 0) snprintf(out, cap, "%s", size_mode);
  else probe_thp_setting("shmem_enabled", out, cap);
}

static bool vma_is_shm(const struct smaps_vma *vma) {
  if (vma->perms[3] != 's') return false;
  static const char *const prefixes[] = {"/dev/shm/", "/SYSV", "/memfd:", "/dev/zero", "/anon_hugepage",
                                         "[anon_shmem:"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (starts_with(vma->path, prefixes[i])) return true;
  return smaps_vma_is_hugetlb(vma);
}

void inspect_vma_usage(const struct smaps_vma *vma, struct hugify_usage *usage) {
  memset(usage, 0, sizeof *usage);
  uint64_t thp = smaps_vma_thp_bytes(vma), hugetlb = smaps_vma_hugetlb_bytes(vma);
  usage->thp = thp;
  usage->base = vma->rss > thp ? vma->rss - thp : 0;
  if (vma->kernel_page_size >= OS_HUGE_1G) usage->hugetlb_1g = hugetlb;
  else usage->hugetlb_2m = hugetlb;
  usage->resident = vma->rss + hugetlb;
  usage->anonymous = vma->anonymous;
  usage->anon_thp = vma->anon_huge;
}

static void usage_add(struct hugify_usage *sum, const struct hugify_usage *u) {
  sum->resident += u->resident;
  sum->base += u->base;
  sum->thp += u->thp;
  sum->hugetlb_2m += u->hugetlb_2m;
  sum->hugetlb_1g += u->hugetlb_1g;
  sum->anonymous += u->anonymous;
  sum->anon_thp += u->anon_thp;
}

static bool holds_stack_pointer(const struct smaps_vma *vma, const struct inspect_context *context) {
  /* Go runs goroutines (and their system calls) on stacks it allocates in its heap arenas: a stack pointer
   * there does not make the arena a stack (seen: a 190 MiB map's arena classed as a stack) */
  if (context->allocator.go_program) return false;
  for (size_t i = 0; i < context->stack_pointer_count; i++)
    if (context->stack_pointers[i] >= vma->start && context->stack_pointers[i] < vma->end) return true;
  return false;
}

/* A pthread stack: private anonymous read-write memory directly above a small PROT_NONE guard mapping. */
static bool follows_guard(const struct smaps_vma *vmas, size_t i) {
  if (i == 0 || strcmp(vmas[i].perms, "rw-p") != 0 || vmas[i].path[0] != '\0') return false;
  const struct smaps_vma *guard = &vmas[i - 1];
  return guard->end == vmas[i].start && strcmp(guard->perms, "---p") == 0 && guard->path[0] == '\0' &&
         guard->inode == 0 && guard->end - guard->start <= INSPECT_GUARD_MAX;
}

static enum hugify_memory_class class_of(const struct smaps_vma *vmas, size_t i,
                                         const struct inspect_context *context, int *thread_stack,
                                         struct hugify_inspect_report *report) {
  const struct smaps_vma *vma = &vmas[i];
  *thread_stack = 0;
  if (vma->perms[2] == 'x') return HUGIFY_CLASS_CODE;
  if (strcmp(vma->path, "[heap]") == 0) return HUGIFY_CLASS_HEAP;
  if (strcmp(vma->path, "[stack]") == 0) return HUGIFY_CLASS_STACK;
  if (vma_is_shm(vma)) return HUGIFY_CLASS_SHM;
  if (vma_is_private_anonymous(vma)) {
    if (holds_stack_pointer(vma, context)) {
      report->stacks_by_pointer++;
      *thread_stack = 1;
      return HUGIFY_CLASS_STACK;
    }
    if (follows_guard(vmas, i)) {
      report->stacks_by_guard++;
      *thread_stack = 1;
      return HUGIFY_CLASS_STACK;
    }
    return HUGIFY_CLASS_ANON;
  }
  if (vma->perms[3] == 'p' && starts_with(vma->path, "/anon_hugepage")) return HUGIFY_CLASS_ANON;
  return HUGIFY_CLASS_FILE;
}

/* ---- what the program excluded from THP ------------------------------------------------------------- */

/* An unadvised mapping whose THPeligible tells the process's stance apart (see inspect_thp_stance). */
static bool stance_witness(const struct smaps_vma *vma, uint64_t pmd_size) {
  return vma_collapse_candidate(vma, pmd_size) && vma->thp_eligible >= 0 &&
         !(vma->vm_flags & (SMAPS_VM_HUGEPAGE | SMAPS_VM_NOHUGEPAGE));
}

enum hugify_thp_stance inspect_thp_stance(int thp_disabled, bool visible, const struct smaps_vma *vmas,
                                          size_t count, uint64_t pmd_size) {
  if (thp_disabled == 1) return HUGIFY_THP_STANCE_DISABLED;
  if (thp_disabled != 0 || !visible) return HUGIFY_THP_STANCE_UNKNOWN;
  bool witnessed = false;
  for (size_t i = 0; i < count; i++) {
    if (!stance_witness(&vmas[i], pmd_size)) continue;
    if (vmas[i].thp_eligible == 1) return HUGIFY_THP_STANCE_ENABLED;
    witnessed = true;
  }
  return witnessed ? HUGIFY_THP_STANCE_DISABLED_EXCEPT_ADVISED : HUGIFY_THP_STANCE_UNKNOWN;
}

enum hugify_not_huge_reason vma_opt_out(const struct smaps_vma *vma, enum hugify_thp_stance stance, bool visible,
                                        uint64_t pmd_size) {
  if (stance == HUGIFY_THP_STANCE_DISABLED) return HUGIFY_WHY_THP_DISABLED;
  if (vma->vm_flags & SMAPS_VM_NOHUGEPAGE) return HUGIFY_WHY_NOHUGEPAGE;
  bool anonymous = vma_is_private_anonymous(vma) && !smaps_vma_is_hugetlb(vma);
  if (!anonymous && !vma_is_shmem(vma)) return HUGIFY_WHY_NONE;
  if (stance == HUGIFY_THP_STANCE_DISABLED_EXCEPT_ADVISED && !(vma->vm_flags & SMAPS_VM_HUGEPAGE))
    return HUGIFY_WHY_THP_EXCEPT_ADVISED;
  if (anonymous && visible && vma->thp_eligible == 0 && vma_collapse_candidate(vma, pmd_size))
    return HUGIFY_WHY_THP_NOT_ELIGIBLE;
  return HUGIFY_WHY_NONE;
}

bool opt_out_overridable(enum hugify_not_huge_reason why) {
  return why == HUGIFY_WHY_THP_EXCEPT_ADVISED || why == HUGIFY_WHY_THP_NOT_ELIGIBLE;
}

static enum hugify_not_huge_reason why_not_huge(const struct smaps_vma *vma, const struct hugify_usage *usage,
                                                const struct inspect_context *context,
                                                enum hugify_thp_stance stance, uint64_t aligned) {
  if (usage->resident <= hugify_usage_huge(usage)) return HUGIFY_WHY_NONE;
  uint64_t pmd_size = context->pmd_size ? context->pmd_size : os_pmd_size();
  enum hugify_not_huge_reason opt_out = vma_opt_out(vma, stance, context->thp_stance_visible, pmd_size);
  if (opt_out != HUGIFY_WHY_NONE) return opt_out;
  if (vma_is_special(vma)) return HUGIFY_WHY_SPECIAL;
  if (vma_is_shmem(vma)) {
    uint64_t pmd = context->pmd_size ? context->pmd_size : os_pmd_size();
    if (context->shmem_mode && strcmp(context->shmem_mode, "deny") == 0) return HUGIFY_WHY_SHMEM_DENY;
    if (!vma_shmem_aligned(vma, pmd)) return HUGIFY_WHY_SHMEM_UNALIGNED;
    if (aligned == 0) return HUGIFY_WHY_TOO_SMALL;
    return starts_with(vma->path, "/dev/shm/") ? HUGIFY_WHY_SHMEM : HUGIFY_WHY_SHMEM_NOT_HUGE;
  }
  if (vma_is_shm(vma)) return HUGIFY_WHY_SHMEM;
  if (!vma_is_private_anonymous(vma)) return HUGIFY_WHY_FILE;
  if (aligned == 0) return HUGIFY_WHY_TOO_SMALL;
  const char *mode = context->thp_mode ? context->thp_mode : "";
  if (strcmp(mode, "never") == 0 || mode[0] == '\0') return HUGIFY_WHY_THP_NEVER;
  if (strcmp(mode, "madvise") == 0 && !(vma->vm_flags & SMAPS_VM_HUGEPAGE)) return HUGIFY_WHY_NOT_ADVISED;
  return HUGIFY_WHY_NOT_COLLAPSED;
}

static int object_index(struct hugify_inspect_report *report, const char *path, size_t cap) {
  const char *name = path[0] ? path : "[anon]";
  for (size_t i = 0; i < report->object_count; i++)
    if (strcmp(report->objects[i].path, name) == 0) return (int)i;
  if (report->object_count == cap) return -ENOSPC;
  struct hugify_inspect_object *object = &report->objects[report->object_count];
  memset(object, 0, sizeof *object);
  snprintf(object->path, sizeof object->path, "%s", name);
  return (int)report->object_count++;
}

int inspect_classify(const struct smaps_vma *vmas, size_t count, const struct inspect_context *context,
                     struct hugify_inspect_report *report) {
  uint64_t pmd = context->pmd_size ? context->pmd_size : os_pmd_size();
  free(report->mappings);
  free(report->objects);
  report->mappings = calloc(count ? count : 1, sizeof *report->mappings);
  report->objects = calloc(count ? count : 1, sizeof *report->objects);
  report->mapping_count = report->object_count = 0;
  if (!report->mappings || !report->objects) return -ENOMEM;
  memset(&report->total, 0, sizeof report->total);
  memset(report->classes, 0, sizeof report->classes);
  memset(report->not_huge, 0, sizeof report->not_huge);
  report->collapsible = 0;
  report->stacks_by_pointer = report->stacks_by_guard = 0;
  report->thp_stance = inspect_thp_stance(context->thp_disabled, context->thp_stance_visible, vmas, count, pmd);
  enum allocator_kind allocator = allocator_of_mappings(vmas, count, &context->allocator);
  snprintf(report->allocator, sizeof report->allocator, "%s", allocator == ALLOCATOR_UNKNOWN ? "" : allocator_name(allocator));

  for (size_t i = 0; i < count; i++) {
    const struct smaps_vma *vma = &vmas[i];
    struct hugify_inspect_mapping *m = &report->mappings[report->mapping_count++];
    m->start = vma->start;
    m->end = vma->end;
    snprintf(m->perms, sizeof m->perms, "%s", vma->perms);
    snprintf(m->path, sizeof m->path, "%s", vma->path);
    m->memory_class = class_of(vmas, i, context, &m->thread_stack, report);
    m->thp_eligible = vma->thp_eligible;
    m->aligned_bytes = aligned_window_bytes(vma->start, vma->end, pmd);
    inspect_vma_usage(vma, &m->usage);
    m->why = why_not_huge(vma, &m->usage, context, report->thp_stance, m->aligned_bytes);
    int object = m->memory_class == HUGIFY_CLASS_CODE ? object_index(report, vma->path, count) : -ENOENT;
    m->object = object >= 0 ? object : -1; /* the public report's "none" */

    usage_add(&report->total, &m->usage);
    usage_add(&report->classes[m->memory_class], &m->usage);
    if (m->object >= 0) usage_add(&report->objects[m->object].code, &m->usage);
    uint64_t huge = hugify_usage_huge(&m->usage);
    uint64_t not_huge = m->usage.resident > huge ? m->usage.resident - huge : 0;
    report->not_huge[m->why] += not_huge;
    bool collapsible_shmem = m->why == HUGIFY_WHY_SHMEM_NOT_HUGE || (m->why == HUGIFY_WHY_SHMEM && vma_shmem_aligned(vma, pmd));
    if ((vma_collapse_eligible(vma, pmd) &&
         (m->why == HUGIFY_WHY_THP_NEVER || m->why == HUGIFY_WHY_NOT_ADVISED || m->why == HUGIFY_WHY_NOT_COLLAPSED)) ||
        collapsible_shmem) {
      uint64_t room = m->aligned_bytes > m->usage.thp ? m->aligned_bytes - m->usage.thp : 0;
      report->collapsible += not_huge < room ? not_huge : room;
    }
  }
  return 0;
}

/* ---- hugify_inspect: read, then classify ----------------------------------------------------------- */

void hugify_inspect_report_free(struct hugify_inspect_report *report) {
  if (!report) return;
  free(report->mappings);
  free(report->objects);
  report->mappings = NULL;
  report->objects = NULL;
  report->mapping_count = report->object_count = 0;
}

/* mTHP sizes below the PMD size that are enabled (directly, or by "inherit" from an enabled top level). */
static void enabled_mthp_sizes(const char *thp_mode, uint64_t pmd, char *out, size_t cap) {
  out[0] = '\0';
  bool top_enabled = strcmp(thp_mode, "always") == 0 || strcmp(thp_mode, "madvise") == 0;
  for (uint64_t size = 8192; size < pmd; size *= 2) {
    char leaf[64], mode[32], label[32];
    snprintf(leaf, sizeof leaf, "hugepages-%llukB/enabled", (unsigned long long)(size >> 10));
    probe_thp_setting(leaf, mode, sizeof mode);
    bool enabled = strcmp(mode, "always") == 0 || strcmp(mode, "madvise") == 0 ||
                   (strcmp(mode, "inherit") == 0 && top_enabled);
    if (!enabled) continue;
    snprintf(label, sizeof label, "%lluK", (unsigned long long)(size >> 10));
    size_t used = strlen(out);
    snprintf(out + used, cap - used, "%s%s", used ? "," : "", label);
  }
}

bool inspect_thp_stance_visible(const char *thp_mode) {
  bool top_always = strcmp(thp_mode, "always") == 0;
  uint64_t sizes[32];
  int count = os_hugepage_size_dirs(OS_SYSFS_THP, sizes, 32);
  if (count <= 0) return top_always; /* no per-size controls: the top level is the PMD size's mode */
  for (int i = 0; i < count; i++) {
    char leaf[64], mode[32];
    snprintf(leaf, sizeof leaf, "hugepages-%llukB/enabled", (unsigned long long)(sizes[i] >> 10));
    probe_thp_setting(leaf, mode, sizeof mode);
    if (strcmp(mode, "always") == 0 || (strcmp(mode, "inherit") == 0 && top_always)) return true;
  }
  return false;
}

/* What the mappings do not show of the allocator, read only where it can change the answer: CPython's
 * PYTHONMALLOC (the environment it started with), and for a program that shows no runtime, whether its
 * executable is a Go program (its ELF's sections: a few pages of the file). Unreadable: not known. */
static void read_allocator_facts(pid_t pid, const struct smaps_vma *vmas, size_t count, struct allocator_facts *facts) {
  enum allocator_kind seen = allocator_of_mappings(vmas, count, NULL);
  char path[64];
  if (seen == ALLOCATOR_PYMALLOC) {
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    char *text = NULL, value[32];
    size_t length = 0;
    /* "malloc" and "malloc_debug" give the objects to malloc; "pymalloc", "debug", "default"... keep obmalloc */
    if (os_read_file(path, &text, &length) == 0 && parse_environ_value(text, length, "PYTHONMALLOC", value, sizeof value))
      facts->python_malloc = strncmp(value, "malloc", 6) == 0;
    free(text);
  }
  if (allocator_is_runtime(seen)) return;
  snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
  size_t size = 0;
  void *image;
  if (elf_map_file(path, &image, &size) != 0) return;
  facts->go_program = elf_is_go(image, size);
  elf_unmap(image, size);
}

/* Memory read but never written maps the shared zero page: smaps counts none of it (no Rss), so a region
 * that was only read shows as 0 % huge with nothing resident. Said in the reason where the walk can see
 * it (PAGEMAP_SCAN, or the PFNs as root); one walk per private anonymous mapping with room for 2 MiB of it. */
static void note_zero_page(pid_t pid, const struct smaps_vma *vmas, size_t count, struct hugify_inspect_report *report) {
  struct os_walk walk;
  if (os_walk_open(pid, probe_pagemap_scan(NULL, 0) == HUGIFY_FEATURE_YES, &walk) != 0) return;
  uint64_t zero = 0;
  for (size_t i = 0; i < count && walk.source != OS_WALK_PRESENCE; i++) {
    struct resident_bytes r;
    uint64_t size = vmas[i].end - vmas[i].start; /* the zero page is not in Rss: room for 2 MiB of it */
    if (vma_is_private_anonymous(&vmas[i]) && size >= vmas[i].rss + page_kind_size(HUGIFY_PAGE_THP) &&
        os_walk_windows(&walk, vmas[i].start, vmas[i].end, size, &r) == 0)
      zero += r.zero;
  }
  os_walk_close(&walk);
  if (zero >= page_kind_size(HUGIFY_PAGE_THP))
    reason_add(report->reason, sizeof report->reason,
               "%llu MiB were read but never written: they map the shared zero page and hold no memory of "
               "their own (in no figure above) until written",
               (unsigned long long)(zero >> 20));
}

int inspect_folio_sizes(int pid, struct folio_bytes *out, char *reason, size_t cap) {
  memset(out, 0, sizeof *out);
  struct os_walk walk;
  int rc = os_walk_open(pid, false, &walk);
  if (rc) {
    snprintf(reason, cap, "/proc/%d/pagemap: %s", pid, strerror(-rc));
    return rc;
  }
  struct smaps_vma *vmas = NULL;
  long count = walk.source == OS_WALK_KPAGEFLAGS ? os_read_smaps(pid, &vmas) : -EPERM;
  rc = count < 0 ? (int)count : 0;
  for (long i = 0; i < count && rc == 0; i++)
    if (vmas[i].rss || vmas[i].private_hugetlb || vmas[i].shared_hugetlb)
      rc = os_walk_folios(&walk, (uintptr_t)vmas[i].start, (uintptr_t)vmas[i].end, out);
  free(vmas);
  os_walk_close(&walk);
  if (rc == -EPERM)
    snprintf(reason, cap, "folio sizes need the PFNs of /proc/PID/pagemap and /proc/kpageflags, which only "
                          "CAP_SYS_ADMIN reads (run as root); machine-wide, `hugify status` has each size's folios");
  else if (rc)
    snprintf(reason, cap, "reading the pagemap or kpageflags of process %d: %s", pid, strerror(-rc));
  return rc;
}

int hugify_inspect(pid_t pid, struct hugify_inspect_report *report) {
  if (!report) return -EINVAL;
  memset(report, 0, sizeof *report);
  if (pid < 0) {
    snprintf(report->reason, sizeof report->reason, "invalid pid %d", (int)pid);
    return -EINVAL;
  }
  report->pid = pid > 0 ? pid : getpid();
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/comm", (int)report->pid);
  if (os_read_small(path, report->command, sizeof report->command) < 0) report->command[0] = '\0';

  struct smaps_vma *vmas = NULL;
  long count = os_read_smaps(pid, &vmas);
  if (count < 0) {
    int err = (int)-count;
    if (err == ENOENT || err == ESRCH) {
      snprintf(report->reason, sizeof report->reason, "no process %d", (int)report->pid);
      return -ESRCH;
    }
    if (err == EACCES || err == EPERM) {
      snprintf(report->reason, sizeof report->reason,
               "not permitted to read /proc/%d/smaps: it needs ptrace read access to process %d (%s) — the same "
               "user, or CAP_SYS_PTRACE (run as root)",
               (int)report->pid, (int)report->pid, report->command[0] ? report->command : "?");
      return -EPERM;
    }
    snprintf(report->reason, sizeof report->reason, "cannot read /proc/%d/smaps: %s", (int)report->pid,
             strerror(err));
    return -err;
  }

  if (count == 0)
    reason_add(report->reason, sizeof report->reason,
                  "process %d has no memory map (a kernel thread, or a process that is exiting)", (int)report->pid);
  probe_thp_setting("enabled", report->thp_mode, sizeof report->thp_mode);
  /* a kernel without THP shows THP_enabled: 0 for every process: that says nothing of a prctl */
  int enabled = report->thp_mode[0] ? os_read_thp_enabled(pid) : -EOPNOTSUPP;
  report->thp_disabled = enabled < 0 ? -1 : !enabled;
  inspect_shmem_mode(report->shmem_mode, sizeof report->shmem_mode);
  uint64_t pmd = page_kind_size(HUGIFY_PAGE_THP);
  enabled_mthp_sizes(report->thp_mode, pmd, report->mthp_sizes, sizeof report->mthp_sizes);

  uint64_t *stack_pointers = NULL;
  long pointers = os_read_stack_pointers(pid, &stack_pointers);
  if (pointers < 0) {
    reason_add(report->reason, sizeof report->reason,
                  "thread stack pointers unreadable (%s: /proc/PID/task/TID/syscall needs ptrace attach "
                  "access); thread stacks found by the guard-page pattern only",
                  strerror((int)-pointers));
    pointers = 0;
  }
  report->thp_stance_visible = inspect_thp_stance_visible(report->thp_mode);
  struct inspect_context context = {
      .thp_disabled = report->thp_disabled,
      .thp_stance_visible = report->thp_stance_visible,
      .thp_mode = report->thp_mode,
      .shmem_mode = report->shmem_mode,
      .pmd_size = pmd,
      .stack_pointers = stack_pointers,
      .stack_pointer_count = (size_t)pointers,
  };
  read_allocator_facts(report->pid, vmas, (size_t)count, &context.allocator);
  int rc = inspect_classify(vmas, (size_t)count, &context, report);
  if (rc == 0) note_zero_page(pid, vmas, (size_t)count, report);
  free(stack_pointers);
  free(vmas);
  if (rc) snprintf(report->reason, sizeof report->reason, "out of memory");
  return rc;
}

/* ---- every process, ranked -------------------------------------------------------------------- */

static uint64_t anon_not_huge(const struct inspect_process *p) { return p->memory.anonymous - p->memory.anon_thp; }

static int by_anon_not_huge(const void *a, const void *b) {
  const struct inspect_process *x = a, *y = b;
  uint64_t nx = anon_not_huge(x), ny = anon_not_huge(y);
  return nx < ny ? 1 : nx > ny ? -1 : x->pid - y->pid;
}

struct ranking_walk {
  struct inspect_ranking *out;
  size_t cap;
};

/* One process of the ranking: its smaps_rollup and comm. 0, or -ENOMEM (stops the walk). */
static int rank_one(pid_t pid, void *context) {
  struct ranking_walk *walk = context;
  struct inspect_ranking *out = walk->out;
  struct inspect_process p = {.pid = pid};
  char path[64], *text;
  snprintf(path, sizeof path, "/proc/%d/smaps_rollup", p.pid);
  int read_rc = os_read_file(path, &text, NULL);
  if (read_rc) {
    if (read_rc == -EACCES || read_rc == -EPERM) out->unreadable++;
    return 0; /* gone, or not ours to read */
  }
  bool ok = parse_smaps_rollup(text, &p.memory);
  free(text);
  if (!ok) return 0; /* kernel threads: no memory map */
  snprintf(path, sizeof path, "/proc/%d/comm", p.pid);
  if (os_read_small(path, p.command, sizeof p.command) < 0) p.command[0] = '\0';
  p.command[strcspn(p.command, "\n")] = '\0';
  if (ARRAY_GROW(out->processes, out->count + 1, walk->cap) != 0) return -ENOMEM;
  out->processes[out->count++] = p;
  return 0;
}

int inspect_rank_processes(struct inspect_ranking *out) {
  memset(out, 0, sizeof *out);
  struct ranking_walk walk = {out, 0};
  int rc = ARRAY_GROW(out->processes, 256, walk.cap);
  if (rc == 0) rc = os_for_each_process(rank_one, &walk);
  if (rc) {
    inspect_ranking_free(out);
    return rc;
  }
  if (out->count > 1) qsort(out->processes, out->count, sizeof *out->processes, by_anon_not_huge);
  return 0;
}

void inspect_ranking_free(struct inspect_ranking *ranking) {
  free(ranking->processes);
  ranking->processes = NULL;
  ranking->count = 0;
}

/* ---- which allocator ---------------------------------------------------------------------------- */

/* What backs a process's data, one row per enum allocator_kind: a malloc library the process maps, or a
 * runtime whose own allocator maps the data itself, bypassing malloc (so glibc's tunables and a preloaded
 * allocator do not reach it). A runtime is found by a library it maps or by its executable's name, Go by its
 * executable's ELF (struct allocator_facts). */
static const struct allocator_row {
  const char *name;          /* allocator_name: at most 15 bytes (the report's allocator[16]) */
  bool runtime;              /* the data bypasses malloc */
  const char *libraries[3];  /* file-name prefixes of a library that brings it */
  const char *program;       /* an executable's name, alone or followed by a version ("python3.11") */
  const char *data;          /* allocator_description */
  const char *advice;        /* allocator_advice */
} allocator_rows[ALLOCATOR_COUNT] = {
    [ALLOCATOR_UNKNOWN] = {"unknown", false, {NULL}, NULL, "not identified (no known malloc library mapped)",
                           "the allocator's setting that stops returning freed memory to the kernel inside huge "
                           "pages (its decay, trim or purge)"},
    /* jemalloc's advice is measured on a churning Redis (docs/servers.md); the other mallocs' are their
     * documented settings for the same effect, not measured here */
    [ALLOCATOR_GLIBC] = {"glibc", false, {"libc.so.6", "libc-2."}, NULL, "glibc's malloc",
                         "GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=4294967295 (glibc "
                         "advises its heap for huge pages and stops trimming it), or hugify run --heap thp"},
    [ALLOCATOR_JEMALLOC] = {"jemalloc", false, {"libjemalloc.so"}, NULL, "jemalloc",
                            "MALLOC_CONF=hpa:true in the program's environment (jemalloc 5.3 purges whole huge "
                            "pages; with the agent a churning Redis stayed 99 % huge), or "
                            "MALLOC_CONF=thp:always,dirty_decay_ms:-1 (99 % huge without the agent, but freed "
                            "memory is kept)"},
    [ALLOCATOR_MIMALLOC] = {"mimalloc", false, {"libmimalloc.so", "libmimalloc-"}, NULL, "mimalloc",
                            "MIMALLOC_ALLOW_LARGE_OS_PAGES=1 and MIMALLOC_PURGE_DELAY=-1 (mimalloc keeps its 2 MiB "
                            "pages), or hugify run --heap mimalloc"},
    [ALLOCATOR_TCMALLOC] = {"tcmalloc", false, {"libtcmalloc"}, NULL, "TCMalloc",
                            "TCMALLOC_RELEASE_RATE=0 (gperftools: freed spans are not released to the kernel)"},
    /* the runtimes: docs/runtimes.md says what each does and what was measured */
    [ALLOCATOR_PYMALLOC] = {"pymalloc", true, {"libpython"}, "python", "CPython obmalloc arenas (1 MiB mmaps)",
                            "PYTHONMALLOC=malloc under hugify run (CPython's objects then come from glibc's malloc, "
                            "whose heap hugify run keeps on huge pages; docs/runtimes.md)"},
    [ALLOCATOR_V8] = {"v8", true, {"libnode.so"}, "node", "V8's heap (256 KiB pages committed inside reservations)",
                      "none known: V8 commits and releases its 256 KiB pages itself; the agent collapses them "
                      "again as they fill (docs/runtimes.md)"},
    [ALLOCATOR_JVM] = {"jvm", true, {"libjvm.so"}, NULL, "the JVM's Java heap (one reservation)",
                       "-XX:+UseTransparentHugePages (the JVM advises its Java heap) with -Xms equal to -Xmx (the "
                       "heap is not shrunk)"},
    [ALLOCATOR_GO] = {"go", true, {NULL}, NULL, "the Go runtime's heap (arenas it reserves and commits itself)",
                      "none known: the Go runtime returns idle heap to the kernel itself (its scavenger); the agent "
                      "collapses what stays (docs/runtimes.md, Go)"},
};

static const char *file_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* "python3.11" is the program "python"; "python-config" or "pythonista" are not. */
static bool names_program(const char *name, const char *program) {
  size_t length = strlen(program);
  if (strncmp(name, program, length) != 0) return false;
  for (const char *p = name + length; *p; p++)
    if (!isdigit((unsigned char)*p) && *p != '.') return false;
  return true;
}

enum allocator_kind allocator_of_program(const char *name) {
  name = file_name(name);
  for (int k = 0; k < ALLOCATOR_COUNT; k++)
    if (allocator_rows[k].program && names_program(name, allocator_rows[k].program)) return (enum allocator_kind)k;
  if (strcmp(name, "nodejs") == 0) return ALLOCATOR_V8; /* Debian's older name of node */
  return ALLOCATOR_UNKNOWN;
}

enum allocator_kind allocator_of_path(const char *path) {
  const char *name = file_name(path);
  for (int k = 0; k < ALLOCATOR_COUNT; k++)
    for (const char *const *prefix = allocator_rows[k].libraries; *prefix; prefix++)
      if (strncmp(name, *prefix, strlen(*prefix)) == 0) return (enum allocator_kind)k;
  return path[0] == '/' ? allocator_of_program(name) : ALLOCATOR_UNKNOWN;
}

bool allocator_is_runtime(enum allocator_kind allocator) {
  return (unsigned)allocator < ALLOCATOR_COUNT && allocator_rows[allocator].runtime;
}

/* A runtime's own allocator holds the data even where a malloc library is loaded (CPython's arenas are
 * mmapped whatever malloc is); a malloc library loaded beside glibc is the one malloc resolves to (it is
 * linked or preloaded for it). */
static int allocator_rank(enum allocator_kind allocator) {
  return allocator == ALLOCATOR_UNKNOWN ? 0 : allocator == ALLOCATOR_GLIBC ? 1 : allocator_is_runtime(allocator) ? 3 : 2;
}

enum allocator_kind allocator_prefer(enum allocator_kind a, enum allocator_kind b) {
  return allocator_rank(b) > allocator_rank(a) ? b : a;
}

const char *allocator_name(enum allocator_kind allocator) {
  return (unsigned)allocator < ALLOCATOR_COUNT ? allocator_rows[allocator].name : "unknown";
}

const char *allocator_description(enum allocator_kind allocator) {
  return allocator_rows[(unsigned)allocator < ALLOCATOR_COUNT ? allocator : ALLOCATOR_UNKNOWN].data;
}

const char *allocator_advice(enum allocator_kind allocator) {
  return allocator_rows[(unsigned)allocator < ALLOCATOR_COUNT ? allocator : ALLOCATOR_UNKNOWN].advice;
}

enum allocator_kind allocator_of_name(const char *name) {
  for (int k = ALLOCATOR_UNKNOWN + 1; k < ALLOCATOR_COUNT; k++)
    if (strcmp(name, allocator_rows[k].name) == 0) return (enum allocator_kind)k;
  return ALLOCATOR_UNKNOWN;
}

enum allocator_kind allocator_of_mappings(const struct smaps_vma *vmas, size_t count,
                                          const struct allocator_facts *facts) {
  enum allocator_kind allocator = facts && facts->go_program ? ALLOCATOR_GO : ALLOCATOR_UNKNOWN;
  for (size_t i = 0; i < count; i++) {
    enum allocator_kind found = allocator_of_path(vmas[i].path);
    /* PYTHONMALLOC=malloc: CPython's objects are malloc's; the malloc library found beside it says whose */
    if (found == ALLOCATOR_PYMALLOC && facts && facts->python_malloc) continue;
    allocator = allocator_prefer(allocator, found);
  }
  return allocator;
}

const char *inspect_churn_advice(const struct hugify_inspect_report *report) {
  enum allocator_kind allocator = allocator_of_name(report->allocator);
  if (allocator == ALLOCATOR_UNKNOWN || report->collapsible == 0) return NULL;
  uint64_t huge = hugify_usage_huge(&report->classes[HUGIFY_CLASS_HEAP]) +
                  hugify_usage_huge(&report->classes[HUGIFY_CLASS_ANON]);
  bool split = huge > 0 || strcmp(report->thp_mode, "always") == 0;
  return split ? allocator_advice(allocator) : NULL;
}
