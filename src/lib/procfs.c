/* SPDX-License-Identifier: MIT */
/* procfs.c - pure parsers: text of /proc and /sys files -> structs. No I/O here: os.c reads the files. */
#include "procfs.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "units.h"

bool parse_u64(const char *text, uint64_t *value) {
  while (isspace((unsigned char)*text)) text++;
  if (!isdigit((unsigned char)*text)) return false;
  uint64_t v = 0;
  for (; isdigit((unsigned char)*text); text++) {
    unsigned digit = (unsigned)(*text - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  while (isspace((unsigned char)*text)) text++;
  if (*text) return false;
  *value = v;
  return true;
}

bool parse_hugepages_dir_name(const char *name, uint64_t *bytes) {
  const char *prefix = "hugepages-";
  size_t plen = strlen(prefix), len = strlen(name);
  if (len <= plen + 2 || strncmp(name, prefix, plen) != 0 || strcmp(name + len - 2, "kB") != 0) return false;
  char digits[32];
  size_t dlen = len - plen - 2;
  if (dlen >= sizeof digits) return false;
  memcpy(digits, name + plen, dlen);
  digits[dlen] = '\0';
  uint64_t kb;
  if (!parse_u64(digits, &kb) || kb == 0 || kb > (UINT64_MAX >> 10)) return false;
  *bytes = kb << 10;
  return true;
}

void parse_bracketed_choice(const char *text, char *out, size_t cap) {
  if (cap == 0) return;
  const char *open = strchr(text, '['), *close = open ? strchr(open, ']') : NULL;
  const char *from = text, *to = text + strlen(text);
  if (open && close) { from = open + 1; to = close; }
  while (from < to && isspace((unsigned char)*from)) from++;
  while (to > from && isspace((unsigned char)to[-1])) to--;
  size_t n = (size_t)(to - from);
  if (n >= cap) n = cap - 1;
  memcpy(out, from, n);
  out[n] = '\0';
}

bool parse_keyed_value(const char *text, const char *key, uint64_t *value) {
  size_t klen = strlen(key);
  for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
    if (strncmp(line, key, klen) != 0 || (line[klen] != ':' && line[klen] != ' ')) continue;
    const char *p = line + klen + 1;
    while (*p == ' ' || *p == '\t') p++;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p || errno) return false;
    if (!*end) return false; /* cut short inside the number (a process exiting under the read): not a value */
    while (*end == ' ' || *end == '\t') end++;
    if (!*end || (end[0] == 'k' && end[1] != 'B')) return false; /* ... or inside its unit */
    if (strncmp(end, "kB", 2) == 0) {
      if (v > (UINT64_MAX >> 10)) return false;
      v <<= 10;
    }
    *value = v;
    return true;
  }
  return false;
}

/* ---- smaps ------------------------------------------------------------------------------------- */

static const struct { const char *name; size_t offset; } smaps_fields[] = {
#define FIELD(name, member) {name, offsetof(struct smaps_vma, member)}
    FIELD("Size", size), FIELD("KernelPageSize", kernel_page_size), FIELD("MMUPageSize", mmu_page_size),
    FIELD("Rss", rss), FIELD("Pss", pss), FIELD("Shared_Clean", shared_clean),
    FIELD("Shared_Dirty", shared_dirty), FIELD("Private_Clean", private_clean),
    FIELD("Private_Dirty", private_dirty), FIELD("Referenced", referenced), FIELD("Anonymous", anonymous),
    FIELD("LazyFree", lazy_free), FIELD("AnonHugePages", anon_huge), FIELD("ShmemPmdMapped", shmem_pmd_mapped),
    FIELD("FilePmdMapped", file_pmd_mapped), FIELD("Shared_Hugetlb", shared_hugetlb),
    FIELD("Private_Hugetlb", private_hugetlb), FIELD("Swap", swap), FIELD("SwapPss", swap_pss),
    FIELD("Locked", locked),
#undef FIELD
};

static const struct { char code[3]; unsigned flag; } vm_flag_codes[] = {
    {"rd", SMAPS_VM_READ}, {"wr", SMAPS_VM_WRITE}, {"ex", SMAPS_VM_EXEC}, {"sh", SMAPS_VM_SHARED},
    {"hg", SMAPS_VM_HUGEPAGE}, {"nh", SMAPS_VM_NOHUGEPAGE}, {"ht", SMAPS_VM_HUGETLB},
    {"gd", SMAPS_VM_GROWSDOWN}, {"mg", SMAPS_VM_MERGEABLE}, {"de", SMAPS_VM_DONTEXPAND}, {"io", SMAPS_VM_IO},
    {"lo", SMAPS_VM_LOCKED},
};

/* "7f00-7f10 r-xp 00000000 fd:01 1234   /usr/bin/x" */
static bool parse_vma_header(const char *line, size_t len, struct smaps_vma *vma) {
  char buf[SMAPS_PATH_MAX + 128];
  if (len >= sizeof buf) len = sizeof buf - 1;
  memcpy(buf, line, len);
  buf[len] = '\0';
  unsigned long long start, end, offset, inode;
  int path_at = 0;
  if (sscanf(buf, "%llx-%llx %4s %llx %15s %llu %n", &start, &end, vma->perms, &offset, vma->device, &inode,
             &path_at) < 6)
    return false;
  if (end < start) return false;
  vma->start = start;
  vma->end = end;
  vma->offset = offset;
  vma->inode = inode;
  snprintf(vma->path, sizeof vma->path, "%s", path_at > 0 ? buf + path_at : "");
  vma->size = end - start;
  vma->thp_eligible = -1;
  return true;
}

static void parse_vm_flags(const char *p, const char *end, struct smaps_vma *vma) {
  vma->has_vm_flags = true;
  while (p + 2 <= end) {
    while (p < end && *p == ' ') p++;
    if (p + 2 > end) break;
    for (size_t i = 0; i < sizeof vm_flag_codes / sizeof vm_flag_codes[0]; i++)
      if (p[0] == vm_flag_codes[i].code[0] && p[1] == vm_flag_codes[i].code[1]) vma->vm_flags |= vm_flag_codes[i].flag;
    while (p < end && *p != ' ') p++;
  }
}

/* One "Name:   value kB" line into its field. Unknown names are skipped. */
static void parse_smaps_field(const char *line, const char *end, struct smaps_vma *vma) {
  const char *colon = memchr(line, ':', (size_t)(end - line));
  if (!colon) return;
  size_t nlen = (size_t)(colon - line);
  if (nlen == 7 && memcmp(line, "VmFlags", 7) == 0) { parse_vm_flags(colon + 1, end, vma); return; }
  unsigned long long v = strtoull(colon + 1, NULL, 10);
  if (nlen == 11 && memcmp(line, "THPeligible", 11) == 0) { vma->thp_eligible = v != 0; return; }
  for (size_t i = 0; i < sizeof smaps_fields / sizeof smaps_fields[0]; i++) {
    if (strlen(smaps_fields[i].name) == nlen && memcmp(line, smaps_fields[i].name, nlen) == 0) {
      *(uint64_t *)((char *)vma + smaps_fields[i].offset) = (uint64_t)v << 10; /* all in kB */
      return;
    }
  }
}

long parse_smaps(const char *text, struct smaps_vma **out) {
  size_t count = 0, cap = 64;
  struct smaps_vma *vmas = malloc(cap * sizeof *vmas);
  if (!vmas) return -ENOMEM;
  for (const char *line = text; *line;) {
    const char *end = strchr(line, '\n');
    if (!end) end = line + strlen(line);
    size_t len = (size_t)(end - line);
    /* A header starts with a hex address and a '-'; a field with a capitalised name and a ':'. */
    const char *dash = memchr(line, '-', len), *space = memchr(line, ' ', len);
    bool header = dash && isxdigit((unsigned char)line[0]) && (!space || dash < space) &&
                  !memchr(line, ':', (size_t)(dash - line));
    if (header) {
      if (ARRAY_GROW(vmas, count + 1, cap) != 0) { free(vmas); return -ENOMEM; }
      memset(&vmas[count], 0, sizeof vmas[count]);
      if (!parse_vma_header(line, len, &vmas[count])) { free(vmas); return -EINVAL; }
      count++;
    } else if (len > 0) {
      if (count == 0) { free(vmas); return -EINVAL; }
      parse_smaps_field(line, end, &vmas[count - 1]);
    }
    line = *end ? end + 1 : end;
  }
  *out = vmas;
  return (long)count;
}

bool smaps_vma_is_hugetlb(const struct smaps_vma *vma) {
  return (vma->vm_flags & SMAPS_VM_HUGETLB) || vma->kernel_page_size > 4096 * 16;
}

uint64_t smaps_vma_thp_bytes(const struct smaps_vma *vma) {
  return vma->anon_huge + vma->shmem_pmd_mapped + vma->file_pmd_mapped;
}

uint64_t smaps_vma_hugetlb_bytes(const struct smaps_vma *vma) { return vma->private_hugetlb + vma->shared_hugetlb; }

/* ---- /proc/PID/task/TID/syscall, /proc/PID/status ------------------------------------------------ */

bool parse_task_syscall_sp(const char *text, uint64_t *sp) {
  const char *fields[16];
  int count = 0;
  for (const char *p = text; *p && count < 16;) {
    while (*p == ' ' || *p == '\n') p++;
    if (!*p) break;
    fields[count++] = p;
    while (*p && *p != ' ' && *p != '\n') p++;
  }
  if (count < 3 || strncmp(fields[count - 2], "0x", 2) != 0) return false;
  char *end;
  errno = 0;
  unsigned long long value = strtoull(fields[count - 2] + 2, &end, 16);
  if (errno || end == fields[count - 2] + 2 || (*end && *end != ' ')) return false;
  *sp = value;
  return true;
}

/* ---- hugify pool / status ---------------------------------------------------------------------- */

const char *const vmstat_counter_names[VMSTAT_COUNTER_COUNT] = {
    "thp_fault_alloc", "thp_fault_fallback", "thp_fault_fallback_charge", "thp_collapse_alloc",
    "thp_collapse_alloc_failed", "thp_file_alloc", "thp_file_fallback", "thp_file_mapped",
    "thp_split_page", "thp_split_page_failed", "thp_deferred_split_page", "thp_split_pmd",
    "thp_zero_page_alloc", "thp_zero_page_alloc_failed", "thp_swpout", "thp_swpout_fallback",
    "thp_migration_success", "thp_migration_fail", "compact_stall", "compact_success",
    "compact_fail", "compact_daemon_wake", "htlb_buddy_alloc_success", "htlb_buddy_alloc_fail",
};

void parse_vmstat(const char *text, struct vmstat_counters *out) {
  memset(out, 0, sizeof *out);
  for (int i = 0; i < VMSTAT_COUNTER_COUNT; i++)
    out->present[i] = parse_keyed_value(text, vmstat_counter_names[i], &out->value[i]);
}

/* Next line of text: [*line, *end); false at the end. */
static bool text_next_line(const char **cursor, const char **line, const char **end) {
  if (!**cursor) return false;
  *line = *cursor;
  *end = strchr(*line, '\n');
  if (!*end) *end = *line + strlen(*line);
  *cursor = **end ? *end + 1 : *end;
  return true;
}

long parse_buddyinfo(const char *text, struct buddyinfo_zone *zones, size_t cap) {
  size_t count = 0;
  const char *cursor = text, *line, *end;
  while (text_next_line(&cursor, &line, &end)) {
    if (end == line) continue;
    char buf[512];
    size_t len = (size_t)(end - line);
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, line, len);
    buf[len] = '\0';
    struct buddyinfo_zone zone;
    memset(&zone, 0, sizeof zone);
    int used = 0;
    if (sscanf(buf, "Node %d, zone %15s%n", &zone.node, zone.zone, &used) != 2 || zone.node < 0) return -EINVAL;
    const char *p = buf + used;
    while (*p) {
      char *after;
      while (*p == ' ' || *p == '\t') p++;
      if (!*p) break;
      if (!isdigit((unsigned char)*p)) return -EINVAL;
      unsigned long long blocks = strtoull(p, &after, 10);
      if (zone.order_count < BUDDYINFO_MAX_ORDERS) zone.free_blocks[zone.order_count++] = blocks;
      p = after;
    }
    if (count < cap) zones[count++] = zone;
  }
  return (long)count;
}

uint64_t buddyinfo_free_pages(const struct buddyinfo_zone *zones, size_t count, int node, uint64_t base_page_size,
                              uint64_t bytes, bool *upper_bound) {
  if (upper_bound) *upper_bound = false;
  if (base_page_size == 0 || bytes < base_page_size) return 0;
  unsigned order = 0;
  while ((base_page_size << order) < bytes && order < 63) order++;
  uint64_t pages = 0, largest_bytes = 0;
  for (size_t i = 0; i < count; i++) {
    const struct buddyinfo_zone *z = &zones[i];
    if ((node >= 0 && z->node != node) || strcmp(z->zone, "DMA") == 0 || z->order_count == 0) continue;
    if (order < z->order_count) {
      for (unsigned o = order; o < z->order_count; o++) pages += z->free_blocks[o] << (o - order);
    } else {
      unsigned top = z->order_count - 1;
      largest_bytes += z->free_blocks[top] * (base_page_size << top);
    }
  }
  if (largest_bytes) {
    if (upper_bound) *upper_bound = true;
    pages += largest_bytes / bytes;
  }
  return pages;
}

/* Copy one white-space separated field of a mounts line, decoding the kernel's octal escapes. */
static const char *mount_field(const char *p, const char *end, char *out, size_t cap) {
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  size_t n = 0;
  while (p < end && *p != ' ' && *p != '\t') {
    char c = *p++;
    if (c == '\\' && end - p >= 3 && p[0] >= '0' && p[0] <= '3' && p[1] >= '0' && p[1] <= '7' && p[2] >= '0' &&
        p[2] <= '7') {
      c = (char)((p[0] - '0') * 64 + (p[1] - '0') * 8 + (p[2] - '0'));
      p += 3;
    }
    if (n + 1 < cap) out[n++] = c;
  }
  out[n] = '\0';
  return p;
}

long parse_mounts(const char *text, struct mount_entry **out) {
  size_t count = 0, cap = 32;
  struct mount_entry *mounts = malloc(cap * sizeof *mounts);
  if (!mounts) return -ENOMEM;
  const char *cursor = text, *line, *end;
  while (text_next_line(&cursor, &line, &end)) {
    if (ARRAY_GROW(mounts, count + 1, cap) != 0) { free(mounts); return -ENOMEM; }
    struct mount_entry *m = &mounts[count];
    const char *p = mount_field(line, end, m->source, sizeof m->source);
    p = mount_field(p, end, m->path, sizeof m->path);
    p = mount_field(p, end, m->type, sizeof m->type);
    mount_field(p, end, m->options, sizeof m->options);
    if (m->path[0] == '/' && m->type[0]) count++;
  }
  *out = mounts;
  return (long)count;
}

bool parse_hugetlbfs_options(const char *options, struct hugetlbfs_options *out) {
  memset(out, 0, sizeof *out);
  out->mode = 0755;
  bool ok = true;
  const char *p = options;
  while (*p) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    char option[128];
    const char *start = p;
    p += len + (comma ? 1 : 0);
    /* longer than any option the kernel prints: unknown, skipped whole (its tail is no option of its own) */
    if (len >= sizeof option) continue;
    memcpy(option, start, len);
    option[len] = '\0';
    char *value = strchr(option, '=');
    if (!value) {
      if (strcmp(option, "ro") == 0) out->read_only = true;
      continue;
    }
    *value++ = '\0';
    uint64_t number = 0;
    if (strcmp(option, "pagesize") == 0) {
      ok &= parse_size(value, &out->page_size);
    } else if (strcmp(option, "size") == 0 || strcmp(option, "min_size") == 0) {
      /* The kernel prints bytes; a written percentage ("50%") is kept as 0 = not known in bytes. */
      if (strchr(value, '%')) continue;
      ok &= parse_size(value, option[0] == 's' ? &out->size : &out->min_size);
    } else if (strcmp(option, "nr_inodes") == 0) {
      ok &= parse_size(value, &out->nr_inodes);
    } else if (strcmp(option, "mode") == 0) {
      char *after;
      unsigned long mode = strtoul(value, &after, 8);
      if (*after || mode > 07777) ok = false;
      else out->mode = (unsigned)mode;
    } else if (strcmp(option, "uid") == 0 || strcmp(option, "gid") == 0) {
      if (!parse_u64(value, &number) || number > UINT32_MAX) ok = false;
      else if (option[0] == 'u') out->uid = (uint32_t)number;
      else out->gid = (uint32_t)number;
    }
  }
  return ok;
}

/* "0:2,1:2" -> per-node counts; false on malformed text. */
static bool parse_node_counts(const char *value, struct cmdline_pool *pool) {
  pool->per_node = true;
  pool->pages = 0;
  memset(pool->node_pages, 0, sizeof pool->node_pages);
  const char *p = value;
  while (*p) {
    char *after;
    if (!isdigit((unsigned char)*p)) return false;
    unsigned long node = strtoul(p, &after, 10);
    if (*after != ':' || !isdigit((unsigned char)after[1])) return false;
    unsigned long long pages = strtoull(after + 1, &after, 10);
    if (*after && *after != ',') return false;
    if (node < CMDLINE_MAX_NODES) pool->node_pages[node] = pages;
    pool->pages += pages;
    p = *after ? after + 1 : after;
  }
  return true;
}

static struct cmdline_pool *cmdline_pool_for(struct cmdline_hugepages *out, uint64_t page_size) {
  for (unsigned i = 0; i < out->pool_count; i++)
    if (out->pools[i].page_size == page_size) return &out->pools[i];
  if (out->pool_count == CMDLINE_MAX_POOLS) return NULL;
  struct cmdline_pool *pool = &out->pools[out->pool_count++];
  memset(pool, 0, sizeof *pool);
  pool->page_size = page_size;
  return pool;
}

bool parse_cmdline_hugepages(const char *text, struct cmdline_hugepages *out) {
  memset(out, 0, sizeof *out);
  bool ok = true, size_given = false;
  uint64_t current_size = 0; /* the size the next hugepages= applies to; 0 = the default size */
  const char *p = text;
  while (*p) {
    while (isspace((unsigned char)*p)) p++;
    if (!*p) break;
    const char *start = p;
    while (*p && !isspace((unsigned char)*p)) p++;
    size_t len = (size_t)(p - start);
    if (len == 2 && start[0] == '-' && start[1] == '-') break;
    char param[256];
    if (len >= sizeof param) continue;
    memcpy(param, start, len);
    param[len] = '\0';
    char *value = strchr(param, '=');
    if (!value) continue;
    *value++ = '\0';
    bool huge = true;
    if (strcmp(param, "hugepagesz") == 0) {
      uint64_t size;
      if (parse_size(value, &size) && size) { current_size = size; size_given = true; }
      else ok = false;
    } else if (strcmp(param, "default_hugepagesz") == 0) {
      if (!parse_size(value, &out->default_size)) ok = false;
    } else if (strcmp(param, "hugepages") == 0) {
      struct cmdline_pool *pool = cmdline_pool_for(out, size_given ? current_size : 0);
      if (!pool) ok = false;
      else if (strchr(value, ':')) ok &= parse_node_counts(value, pool);
      else if (!parse_u64(value, &pool->pages)) ok = false;
      else pool->per_node = false;
    } else if (strcmp(param, "transparent_hugepage") == 0) {
      snprintf(out->transparent_hugepage, sizeof out->transparent_hugepage, "%s", value);
    } else {
      huge = strncmp(param, "hugetlb", 7) == 0 || strncmp(param, "transparent_hugepage", 20) == 0 ||
             strcmp(param, "thp_anon") == 0;
    }
    if (huge) {
      size_t used = strlen(out->params);
      snprintf(out->params + used, sizeof out->params - used, "%s%.*s", used ? " " : "", (int)len, start);
    }
  }
  /* hugepages= given before any hugepagesz= names the default size once default_hugepagesz= is known */
  for (unsigned i = 0; i < out->pool_count; i++)
    if (out->pools[i].page_size == 0 && out->default_size) out->pools[i].page_size = out->default_size;
  return ok;
}

bool parse_limit(const char *text, const char *name, uint64_t *soft, uint64_t *hard) {
  size_t nlen = strlen(name);
  const char *cursor = text, *line, *end;
  while (text_next_line(&cursor, &line, &end)) {
    if ((size_t)(end - line) <= nlen || strncmp(line, name, nlen) != 0 || line[nlen] != ' ') continue;
    char first[32], second[32];
    char buf[256];
    size_t len = (size_t)(end - line - (ptrdiff_t)nlen);
    if (len >= sizeof buf) len = sizeof buf - 1;
    memcpy(buf, line + nlen, len);
    buf[len] = '\0';
    if (sscanf(buf, "%31s %31s", first, second) != 2) return false;
    const char *words[2] = {first, second};
    uint64_t *values[2] = {soft, hard};
    for (int i = 0; i < 2; i++) {
      if (strcmp(words[i], "unlimited") == 0) *values[i] = UINT64_MAX;
      else if (!parse_u64(words[i], values[i])) return false;
    }
    return true;
  }
  return false;
}

bool parse_keyed_text(const char *text, const char *key, char *out, size_t cap) {
  size_t klen = strlen(key);
  const char *cursor = text, *line, *end;
  while (text_next_line(&cursor, &line, &end)) {
    if ((size_t)(end - line) <= klen || strncmp(line, key, klen) != 0 || line[klen] != ':') continue;
    if (!*end) return false; /* the text ends inside the line: cut short, its value may be too */
    const char *from = line + klen + 1;
    while (from < end && isspace((unsigned char)*from)) from++;
    while (end > from && isspace((unsigned char)end[-1])) end--;
    size_t n = (size_t)(end - from);
    if (cap == 0) return true;
    if (n >= cap) n = cap - 1;
    memcpy(out, from, n);
    out[n] = '\0';
    return true;
  }
  return false;
}

bool parse_id_list(const char *text, uint64_t *bitmap, unsigned max_ids) {
  memset(bitmap, 0, ((max_ids + 63) / 64) * sizeof *bitmap);
  const char *p = text;
  while (isspace((unsigned char)*p)) p++;
  while (*p && !isspace((unsigned char)*p)) {
    char *after;
    if (!isdigit((unsigned char)*p)) return false;
    unsigned long first = strtoul(p, &after, 10), last = first;
    if (*after == '-') {
      if (!isdigit((unsigned char)after[1])) return false;
      last = strtoul(after + 1, &after, 10);
      if (last < first) return false;
    }
    if (*after && *after != ',' && !isspace((unsigned char)*after)) return false;
    for (unsigned long id = first; id <= last && id < max_ids; id++) bitmap[id / 64] |= UINT64_C(1) << (id % 64);
    p = *after == ',' ? after + 1 : after;
  }
  while (isspace((unsigned char)*p)) p++;
  return *p == '\0';
}

/* The n bytes at `from` into out (cut to cap - 1, NUL-ended; nothing when cap is 0). True. */
static bool copy_cut(char *out, size_t cap, const char *from, size_t n) {
  if (cap == 0) return true;
  if (n >= cap) n = cap - 1;
  memcpy(out, from, n);
  out[n] = '\0';
  return true;
}

bool parse_cgroup_v2_path(const char *text, char *out, size_t cap) {
  const char *cursor = text, *line, *end;
  while (text_next_line(&cursor, &line, &end))
    if (end - line >= 4 && strncmp(line, "0::", 3) == 0) return copy_cut(out, cap, line + 3, (size_t)(end - line - 3));
  return false;
}

bool parse_cgroup_v1_path(const char *text, const char *controller, char *out, size_t cap) {
  const char *cursor = text, *line, *end;
  size_t want = strlen(controller);
  while (text_next_line(&cursor, &line, &end)) {
    const char *first = memchr(line, ':', (size_t)(end - line));
    const char *second = first ? memchr(first + 1, ':', (size_t)(end - first - 1)) : NULL;
    if (!second || second == first + 1) continue; /* "0::/path" is v2 */
    bool named = false;
    for (const char *c = first + 1; c < second && !named;) {
      const char *comma = memchr(c, ',', (size_t)(second - c));
      const char *stop = comma ? comma : second;
      named = (size_t)(stop - c) == want && strncmp(c, controller, want) == 0;
      c = stop + 1;
    }
    if (named && second[1] == '/') return copy_cut(out, cap, second + 1, (size_t)(end - second - 1));
  }
  return false;
}

bool parse_memory_stat_thp(const char *text, struct cgroup_thp *out) {
  memset(out, 0, sizeof *out);
  if (parse_keyed_value(text, "anon_thp", &out->anon)) {
    out->has_shmem = parse_keyed_value(text, "shmem_thp", &out->shmem);
    out->has_file = parse_keyed_value(text, "file_thp", &out->file);
    return true;
  }
  return parse_keyed_value(text, "rss_huge", &out->anon); /* v1: this cgroup's own, not total_rss_huge */
}

bool parse_cgroup_limit(const char *text, uint64_t *value) {
  while (isspace((unsigned char)*text)) text++;
  if (strncmp(text, "max", 3) == 0) {
    const char *rest = text + 3;
    while (isspace((unsigned char)*rest)) rest++;
    if (*rest) return false;
    *value = UINT64_MAX;
    return true;
  }
  return parse_u64(text, value);
}

void cgroup_hugetlb_size_name(uint64_t page_size, char *out, size_t cap) {
  if (page_size >= (UINT64_C(1) << 30)) snprintf(out, cap, "%lluGB", (unsigned long long)(page_size >> 30));
  else if (page_size >= (uint64_t)1024 * 1024) snprintf(out, cap, "%lluMB", (unsigned long long)(page_size >> 20));
  else snprintf(out, cap, "%lluKB", (unsigned long long)(page_size >> 10));
}

/* The field `index` of /proc/PID/stat counted after the command (0: the state, the 3rd field), parsed as an
 * unsigned decimal that a space ends: a text cut short inside the number is malformed, not a smaller value. */
static bool stat_field(const char *text, int index, uint64_t *value) {
  const char *p = text ? strrchr(text, ')') : NULL;
  if (!p) return false;
  p++;
  for (int field = 0; field < index; field++) {
    while (*p == ' ') p++;
    if (!*p) return false;
    p += strcspn(p, " ");
  }
  while (*p == ' ') p++;
  if (!isdigit((unsigned char)*p)) return false;
  char *end;
  errno = 0;
  unsigned long long parsed = strtoull(p, &end, 10);
  if (errno == ERANGE || *end != ' ') return false;
  *value = parsed;
  return true;
}

bool parse_stat_flags(const char *text, unsigned long *flags) {
  uint64_t value; /* after the command: state ppid pgrp session tty_nr tpgid flags */
  if (!stat_field(text, 6, &value)) return false;
  *flags = (unsigned long)value;
  return true;
}

bool parse_stat_start_time(const char *text, uint64_t *ticks) {
  return stat_field(text, 19, ticks); /* starttime, the 22nd field: 19 after the state */
}

bool parse_stat_rss(const char *text, uint64_t *pages) {
  return stat_field(text, 21, pages); /* rss, the 24th field: 21 after the state */
}

bool parse_stat_faults(const char *text, uint64_t *faults) {
  uint64_t minor, major;
  if (!stat_field(text, 7, &minor) || !stat_field(text, 9, &major)) return false; /* minflt, majflt */
  *faults = minor + major;
  return true;
}

bool parse_schedstat(const char *text, uint64_t *run_ns, uint64_t *wait_ns) {
  if (!text) return false;
  char *end;
  const char *p = text;
  uint64_t values[2];
  for (int i = 0; i < 2; i++) {
    while (*p == ' ') p++;
    if (!isdigit((unsigned char)*p)) return false;
    errno = 0;
    values[i] = strtoull(p, &end, 10);
    if (errno == ERANGE) return false;
    p = end;
  }
  *run_ns = values[0];
  *wait_ns = values[1];
  return true;
}

bool parse_smaps_rollup(const char *text, struct smaps_rollup *out) {
  memset(out, 0, sizeof *out);
  uint64_t private_hugetlb = 0, shared_hugetlb = 0;
  if (!parse_keyed_value(text, "Anonymous", &out->anonymous) || !parse_keyed_value(text, "AnonHugePages", &out->anon_thp) ||
      !parse_keyed_value(text, "Rss", &out->rss))
    return false;
  parse_keyed_value(text, "Private_Hugetlb", &private_hugetlb);
  parse_keyed_value(text, "Shared_Hugetlb", &shared_hugetlb);
  if (out->anon_thp > out->anonymous) out->anon_thp = out->anonymous;
  parse_keyed_value(text, "ShmemPmdMapped", &out->shmem_thp);
  parse_keyed_value(text, "FilePmdMapped", &out->file_thp);
  out->hugetlb = private_hugetlb + shared_hugetlb;
  return true;
}

/* ---- the machine under us -------------------------------------------------------------------------- */

bool parse_loadavg(const char *text, double *one_minute) {
  if (!isdigit((unsigned char)text[0])) return false;
  char *end;
  double load = strtod(text, &end);
  if (end == text || (*end != ' ' && *end != '\n' && *end != '\0') || !(load >= 0) || load > 1e9) return false;
  *one_minute = load;
  return true;
}

bool parse_cpuinfo_hypervisor(const char *text) {
  for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
    if (strncmp(line, "flags", 5) != 0) continue;
    const char *colon = strchr(line, ':'), *end = strchr(line, '\n');
    if (!colon || (end && colon > end)) return false;
    size_t length = end ? (size_t)(end - colon) : strlen(colon);
    for (const char *p = colon + 1; p < colon + length; p++)
      if (strncmp(p, "hypervisor", 10) == 0 && p[-1] == ' ' && (p[10] == ' ' || p[10] == '\n' || p[10] == '\0'))
        return true;
    return false; /* every processor lists the same flags: the first line says it */
  }
  return false;
}

const char *hypervisor_name(const char signature[12]) {
  static const struct { char signature[13]; const char *name; } known[] = {
      {"KVMKVMKVM\0\0\0", "KVM"}, {"Microsoft Hv", "Hyper-V"}, {"VMwareVMware", "VMware"},
      {"XenVMMXenVMM", "Xen"},     {"TCGTCGTCGTCG", "QEMU (TCG)"}, {"ACRNACRNACRN", "ACRN"},
      {"bhyve bhyve ", "bhyve"},   {" lrpepyh  vr", "Parallels"}, {"VBoxVBoxVBox", "VirtualBox"},
  };
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (memcmp(signature, known[i].signature, 12) == 0) return known[i].name;
  return NULL;
}

/* ---- /proc/pressure/memory and /proc/PID/status capabilities ---------------------------------- */

static bool parse_psi_average(const char *line, const char *key, double *value) {
  const char *at = strstr(line, key);
  if (!at) return false;
  char *end;
  *value = strtod(at + strlen(key), &end);
  return end != at + strlen(key);
}

bool parse_psi_pressure(const char *text, struct psi_pressure *out) {
  memset(out, 0, sizeof *out);
  bool some = false, full = false;
  for (const char *line = text; line && *line;) {
    const char *next = strchr(line, '\n');
    char buf[256];
    size_t n = next ? (size_t)(next - line) : strlen(line);
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, line, n);
    buf[n] = '\0';
    if (strncmp(buf, "some ", 5) == 0)
      some = parse_psi_average(buf, "avg10=", &out->some_avg10) && parse_psi_average(buf, "avg60=", &out->some_avg60);
    else if (strncmp(buf, "full ", 5) == 0)
      full = parse_psi_average(buf, "avg10=", &out->full_avg10);
    line = next ? next + 1 : NULL;
  }
  (void)full; /* "full" is absent on older kernels for some resources; "some" is what the gate uses */
  if (!some) memset(out, 0, sizeof *out); /* no half-read figures (found by fuzz/machine.c) */
  out->present = some;
  return some;
}

bool parse_capabilities(const char *status, uint64_t *effective) {
  char value[64];
  if (!parse_keyed_text(status, "CapEff", value, sizeof value)) return false;
  /* 16 hex digits (older kernels: 8), nothing else */
  size_t digits = strspn(value, "0123456789abcdefABCDEF");
  if (digits == 0 || digits > 16 || value[digits] != '\0') return false;
  *effective = strtoull(value, NULL, 16);
  return true;
}

bool parse_environ_value(const char *data, size_t length, const char *name, char *out, size_t cap) {
  size_t name_length = strlen(name);
  for (size_t at = 0; at < length;) {
    const char *entry = data + at;
    const char *end = memchr(entry, '\0', length - at);
    size_t entry_length = end ? (size_t)(end - entry) : length - at;
    if (entry_length > name_length && memcmp(entry, name, name_length) == 0 && entry[name_length] == '=') {
      size_t value_length = entry_length - name_length - 1;
      if (value_length >= cap) return false;
      memcpy(out, entry + name_length + 1, value_length);
      out[value_length] = '\0';
      return true;
    }
    at += entry_length + 1;
  }
  return false;
}

/* ---- /proc/PID/pagemap and /proc/kpageflags words ---------------------------------------------- */

uint64_t pagemap_pfn(uint64_t entry) {
  return (entry & PAGEMAP_PRESENT) && !(entry & PAGEMAP_SWAPPED) ? entry & PAGEMAP_PFN_MASK : 0;
}

bool pagemap_aligned_run(const uint64_t *entries, size_t n, size_t pmd_pages) {
  if (n == 0 || n != pmd_pages) return false;
  uint64_t head = pagemap_pfn(entries[0]);
  if (head == 0 || head % pmd_pages != 0) return false;
  for (size_t i = 1; i < n; i++)
    if (pagemap_pfn(entries[i]) != head + i) return false;
  return true;
}

static bool all_have(const uint64_t *flags, size_t from, size_t n, uint64_t bits) {
  for (size_t i = from; i < n; i++)
    if ((flags[i] & bits) != bits) return false;
  return true;
}

enum kpage_run kpageflags_run(const uint64_t *flags, size_t n) {
  if (n == 0) return KPAGE_RUN_SMALL;
  if (all_have(flags, 0, n, KPAGE_ZERO_PAGE)) return KPAGE_RUN_HUGE_ZERO;
  if (all_have(flags, 0, n, KPAGE_HUGE)) return KPAGE_RUN_HUGE; /* a 1 GiB page's window starts at a tail */
  bool thp = (flags[0] & (KPAGE_THP | KPAGE_COMPOUND_HEAD)) == (KPAGE_THP | KPAGE_COMPOUND_HEAD) &&
             all_have(flags, 1, n, KPAGE_THP | KPAGE_COMPOUND_TAIL);
  return thp ? KPAGE_RUN_HUGE : KPAGE_RUN_SMALL;
}

/* How many entries from `i` map the folio whose head entries[i] maps: tails at the following PFNs. */
static size_t folio_run(const uint64_t *entries, const uint64_t *flags, size_t i, size_t n) {
  uint64_t head = pagemap_pfn(entries[i]);
  size_t k = 1;
  while (i + k < n && pagemap_pfn(entries[i + k]) == head + k &&
         (flags[i + k] & (KPAGE_COMPOUND_HEAD | KPAGE_COMPOUND_TAIL)) == KPAGE_COMPOUND_TAIL)
    k++;
  return k;
}

void kpageflags_folios(const uint64_t *entries, const uint64_t *flags, size_t n, uint64_t zero_pfn, uint64_t page,
                       struct folio_bytes *out) {
  for (size_t i = 0; i < n;) {
    uint64_t pfn = pagemap_pfn(entries[i]), f = flags[i];
    if (!pfn || pfn == zero_pfn || (f & KPAGE_ZERO_PAGE)) { i++; continue; }
    if (f & KPAGE_HUGE) { out->hugetlb += page; i++; continue; }
    if (!(f & (KPAGE_COMPOUND_HEAD | KPAGE_COMPOUND_TAIL))) { out->by_order[0] += page; i++; continue; }
    if (!(f & KPAGE_COMPOUND_HEAD)) { out->partial += page; i++; continue; } /* its head is not here */
    size_t k = folio_run(entries, flags, i, n);
    unsigned order = 0;
    while (order + 1 < FOLIO_ORDERS && ((size_t)1 << (order + 1)) <= k) order++;
    if (k == ((size_t)1 << order) && pfn % k == 0) out->by_order[order] += k * page;
    else out->partial += k * page;
    i += k;
  }
}

void pagemap_count(const uint64_t *entries, size_t n, enum kpage_run run, uint64_t zero_pfn, uint64_t page,
                   struct resident_bytes *out) {
  if (run == KPAGE_RUN_HUGE) { out->huge += n * page; return; }
  if (run == KPAGE_RUN_HUGE_ZERO) { out->zero += n * page; return; }
  for (size_t i = 0; i < n; i++) {
    if (!(entries[i] & PAGEMAP_PRESENT) || (entries[i] & PAGEMAP_SWAPPED)) continue;
    if (zero_pfn && pagemap_pfn(entries[i]) == zero_pfn) {
      out->zero += page;
      continue;
    }
    out->base += page;
    if (entries[i] & PAGEMAP_SOFT_DIRTY) out->dirty += page;
  }
}

bool pagemap_huge_from_smaps(struct resident_bytes *windows, size_t n, uint64_t window, uint64_t huge_bytes) {
  uint64_t full = 0, left = huge_bytes;
  for (size_t i = 0; i < n; i++) {
    if (windows[i].base + windows[i].huge < window) continue;
    full += window;
    if (left < window) continue;
    windows[i].huge += windows[i].base;
    windows[i].base = 0;
    left -= window;
  }
  return huge_bytes == 0 || huge_bytes == full;
}

/* ---- DAMON's tried regions -------------------------------------------------------------------------- */

long parse_damon_tried_regions(const char *text, struct damon_region *out, size_t cap) {
  memset(out, 0, cap * sizeof *out);
  size_t count = 0;
  for (const char *line = text; *line; line += strcspn(line, "\n"), line += *line == '\n') {
    size_t length = strcspn(line, "\n");
    if (length == 0) continue;
    const char *colon = memchr(line, ':', length);
    if (!colon) return -EINVAL;
    /* IDX/FIELD just before the colon; other files (total_bytes, sz_filter_passed) are skipped */
    const char *field = colon;
    while (field > line && field[-1] != '/') field--;
    size_t name = (size_t)(colon - field);
    int which = name == 5 && !memcmp(field, "start", 5)         ? 0
                : name == 3 && !memcmp(field, "end", 3)         ? 1
                : name == 11 && !memcmp(field, "nr_accesses", 11) ? 2
                : name == 3 && !memcmp(field, "age", 3)         ? 3
                                                                : -1;
    if (which < 0) continue;
    if (field == line) return -EINVAL;
    const char *index_end = field - 1, *index = index_end;
    while (index > line && isdigit((unsigned char)index[-1])) index--;
    if (index == index_end || (index > line && index[-1] != '/')) return -EINVAL;
    uint64_t i = 0, value = 0;
    for (const char *d = index; d < index_end; d++) {
      if (i > cap) return -EINVAL;
      i = i * 10 + (uint64_t)(*d - '0');
    }
    if (i >= cap) return -EINVAL;
    const char *v = colon + 1, *end = line + length;
    if (v == end) return -EINVAL;
    for (; v < end; v++) {
      if (!isdigit((unsigned char)*v) || value > (UINT64_MAX - 9) / 10) return -EINVAL;
      value = value * 10 + (uint64_t)(*v - '0');
    }
    struct damon_region *r = &out[i];
    uint32_t small = value > UINT32_MAX ? UINT32_MAX : (uint32_t)value;
    if (which == 0) r->start = value;
    else if (which == 1) r->end = value;
    else if (which == 2) r->nr_accesses = small;
    else r->age = small;
    if (i + 1 > count) count = (size_t)i + 1;
  }
  for (size_t i = 0; i < count; i++) /* a region without its start or end (or an empty one) */
    if (out[i].end <= out[i].start) return -EINVAL;
  return (long)count;
}

size_t damon_split_targets(const struct damon_region *regions, size_t count, size_t *firsts, size_t cap) {
  size_t targets = 0;
  for (size_t i = 0; i < count; i++) {
    if (i > 0 && regions[i].start >= regions[i - 1].end) continue;
    if (targets < cap) firsts[targets] = i;
    targets++;
  }
  return targets < cap ? targets : cap;
}
