/* procfs.c - pure parsers for /proc and /sys text, and the one-line readers that feed them. */
#include "procfs.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os.h"

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
    while (*end == ' ' || *end == '\t') end++;
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
  if (!vmas) { errno = ENOMEM; return -1; }
  for (const char *line = text; *line;) {
    const char *end = strchr(line, '\n');
    if (!end) end = line + strlen(line);
    size_t len = (size_t)(end - line);
    /* A header starts with a hex address and a '-'; a field with a capitalised name and a ':'. */
    const char *dash = memchr(line, '-', len), *space = memchr(line, ' ', len);
    bool header = dash && isxdigit((unsigned char)line[0]) && (!space || dash < space) &&
                  !memchr(line, ':', (size_t)(dash - line));
    if (header) {
      if (count == cap) {
        struct smaps_vma *bigger = realloc(vmas, 2 * cap * sizeof *vmas);
        if (!bigger) { free(vmas); errno = ENOMEM; return -1; }
        vmas = bigger;
        cap *= 2;
      }
      memset(&vmas[count], 0, sizeof vmas[count]);
      if (!parse_vma_header(line, len, &vmas[count])) { free(vmas); errno = EINVAL; return -1; }
      count++;
    } else if (len > 0) {
      if (count == 0) { free(vmas); errno = EINVAL; return -1; }
      parse_smaps_field(line, end, &vmas[count - 1]);
    }
    line = *end ? end + 1 : end;
  }
  *out = vmas;
  return (long)count;
}

long procfs_read_smaps(int pid, struct smaps_vma **out) {
  char path[64];
  if (pid > 0) snprintf(path, sizeof path, "/proc/%d/smaps", pid);
  else snprintf(path, sizeof path, "/proc/self/smaps");
  char *text = os_read_file(path, NULL);
  if (!text) return -errno;
  long count = parse_smaps(text, out);
  int saved = errno;
  free(text);
  return count < 0 ? -saved : count;
}

bool smaps_vma_is_hugetlb(const struct smaps_vma *vma) {
  return (vma->vm_flags & SMAPS_VM_HUGETLB) || vma->kernel_page_size > 4096 * 16;
}

uint64_t smaps_vma_thp_bytes(const struct smaps_vma *vma) {
  return vma->anon_huge + vma->shmem_pmd_mapped + vma->file_pmd_mapped;
}

uint64_t smaps_vma_hugetlb_bytes(const struct smaps_vma *vma) { return vma->private_hugetlb + vma->shared_hugetlb; }
