/* procfs.h - pure parsers: text of /proc and /sys files -> structs. Reading is separate (os.h,
 * procfs_read_*), so every parser is tested on fixture text captured from real machines. */
#ifndef HUGIFY_PROCFS_H
#define HUGIFY_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- small values ---- */
/* Decimal unsigned integer, optional surrounding white space; false on anything else or overflow. */
bool parse_u64(const char *text, uint64_t *value);
/* "hugepages-2048kB" -> 2097152. */
bool parse_hugepages_dir_name(const char *name, uint64_t *bytes);
/* "always [madvise] never" -> "madvise"; a file without brackets yields its whole (trimmed) text. */
void parse_bracketed_choice(const char *text, char *out, size_t cap);

/* ---- "Key: value [kB]" files: /proc/meminfo, /proc/PID/status; "key value": /proc/vmstat ---- */
/* Value of `key` (exact match before ':' or ' '); a "kB" suffix multiplies by 1024. */
bool parse_keyed_value(const char *text, const char *key, uint64_t *value);

/* ---- /proc/PID/smaps and /proc/PID/maps ---- */
enum smaps_vm_flag {
  SMAPS_VM_READ = 1u << 0,       /* rd */
  SMAPS_VM_WRITE = 1u << 1,      /* wr */
  SMAPS_VM_EXEC = 1u << 2,       /* ex */
  SMAPS_VM_SHARED = 1u << 3,     /* sh */
  SMAPS_VM_HUGEPAGE = 1u << 4,   /* hg: MADV_HUGEPAGE */
  SMAPS_VM_NOHUGEPAGE = 1u << 5, /* nh: MADV_NOHUGEPAGE */
  SMAPS_VM_HUGETLB = 1u << 6,    /* ht */
  SMAPS_VM_GROWSDOWN = 1u << 7,  /* gd: stack */
  SMAPS_VM_MERGEABLE = 1u << 8,  /* mg */
  SMAPS_VM_DONTEXPAND = 1u << 9, /* de */
  SMAPS_VM_IO = 1u << 10,        /* io */
  SMAPS_VM_LOCKED = 1u << 11,    /* lo */
};

#define SMAPS_PATH_MAX 512

struct smaps_vma {
  uint64_t start, end, offset, inode;
  char perms[5];            /* "r-xp" */
  char device[16];          /* "fd:01" */
  char path[SMAPS_PATH_MAX];/* "" for anonymous; "[heap]", "[stack]", "[anon:name]", "/usr/lib/..." */
  /* all sizes in bytes; present only in smaps (0 from maps) */
  uint64_t size, kernel_page_size, mmu_page_size, rss, pss, shared_clean, shared_dirty, private_clean,
      private_dirty, referenced, anonymous, lazy_free, anon_huge, shmem_pmd_mapped, file_pmd_mapped,
      shared_hugetlb, private_hugetlb, swap, swap_pss, locked;
  int thp_eligible;         /* 0/1, -1 when the kernel does not report it */
  unsigned vm_flags;        /* enum smaps_vm_flag; 0 from maps */
  bool has_vm_flags;
};

/* Parse smaps (or maps) text. *out is malloc'd (caller frees); returns the count, or -1 on malformed
 * text / no memory (errno EINVAL / ENOMEM). */
long parse_smaps(const char *text, struct smaps_vma **out);
/* Read and parse /proc/<pid>/smaps (pid 0 = self). Returns the count or -errno. */
long procfs_read_smaps(int pid, struct smaps_vma **out);

/* Huge-page bytes of a VMA by kind (from its smaps fields). */
uint64_t smaps_vma_thp_bytes(const struct smaps_vma *vma);
uint64_t smaps_vma_hugetlb_bytes(const struct smaps_vma *vma);
bool smaps_vma_is_hugetlb(const struct smaps_vma *vma);

#endif
