/* probe.h - what this machine offers: kernel features found by trying them (each result cached after the
 * first call), the THP settings, the page size of each kind, and hugify_probe, which gathers them. Sits
 * above os.c (syscalls, file readers) and procfs.c (pure parsers). Not exported. */
#ifndef HUGIFY_PROBE_H
#define HUGIFY_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "hugify.h"

/* Feature probes: enum hugify_feature_state; the reason for NO/UNKNOWN is appended to reason (may be NULL). */
enum hugify_feature_state probe_madv_collapse(char *reason, size_t cap);
enum hugify_feature_state probe_process_madvise(char *reason, size_t cap);
enum hugify_feature_state probe_file_thp_text(char *reason, size_t cap);
enum hugify_feature_state probe_pagemap_scan(char *reason, size_t cap);
enum hugify_feature_state probe_pmu(char *reason, size_t cap);
/* Whether the caller may write nr_hugepages. */
int probe_can_change_pools(void);

/* Selected word of a THP sysfs choice file under /sys/kernel/mm/transparent_hugepage ("enabled",
 * "defrag", "shmem_enabled": "always [madvise] never" -> "madvise"); "" if absent. */
void probe_thp_setting(const char *leaf, char *buf, size_t cap);

/* Page size in bytes of a kind (THP: the PMD size, read once). */
uint64_t page_kind_size(enum hugify_page_kind kind);

#endif
