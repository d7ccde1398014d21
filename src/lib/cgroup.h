/* SPDX-License-Identifier: MIT */
/* cgroup.h - the hugetlb limits of a cgroup v2 and its ancestors (hugify status shows them; hugify_alloc
 * falls back before a fault would exceed them: a hugetlb cgroup limit is charged at fault time, SIGBUS);
 * which cgroup, systemd unit or container a process is in, and the THP bytes the kernel charges a cgroup
 * (memory.stat: inspect --by, status, the agent's metrics). Not exported. */
#ifndef HUGIFY_CGROUP_H
#define HUGIFY_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "procfs.h"

#define CGROUP_UNKNOWN UINT64_MAX

struct cgroup_hugetlb_limit {
  uint64_t page_size;
  uint64_t max, current, rsvd_max, rsvd_current; /* bytes; max/rsvd_max: the tightest on the way up,
                                                  * UINT64_MAX = "max" (no limit); current: the leaf's */
  char limited_by[256]; /* the cgroup whose hugetlb.<size>.max is the tightest ("" when none is set) */
  uint64_t room;        /* bytes that can still be charged: the least max - current over the levels that
                         * set a limit; UINT64_MAX when none does */
  char room_limited_by[256]; /* the cgroup that leaves the least room ("" when none) */
};

/* Reads one line of the file at `path` (an absolute path: a test or `hugify status --root` may prefix it)
 * into buf; false when it cannot. */
typedef bool (*cgroup_read_line_fn)(void *context, const char *path, char *buf, size_t cap);

/* Pure: where the cgroup v2 hierarchy is mounted, from the text of /proc/mounts. False when it is not. */
bool cgroup_v2_mount(const char *mounts_text, char *out, size_t cap);

/* Walk from `cgroup` (a v2 path such as "/user.slice/x.scope") up to the root of the hierarchy mounted at
 * `mount`, reading hugetlb.<size>.{max,rsvd.max,current,rsvd.current} of each level. "max" is no limit.
 * Returns true when any of those files could be read (the kernel has the hugetlb controller there). */
bool cgroup_hugetlb_limit_walk(const char *mount, const char *cgroup, uint64_t page_size, cgroup_read_line_fn read_line,
                               void *context, struct cgroup_hugetlb_limit *out);

/* ---- which cgroup, unit, container ---- */

/* Where memory.stat lives: the cgroup v2 hierarchy when the memory controller is enabled there, else the
 * cgroup v1 hierarchy of the memory controller (hybrid hosts), else nowhere (version 0; mount then is the v2
 * hierarchy, if any, so processes are still grouped by their v2 path). */
struct cgroup_memory_root {
  int version;     /* 2, 1, 0 (no memory controller) */
  char mount[512]; /* "/sys/fs/cgroup", "/sys/fs/cgroup/memory"; "" when none */
};
/* Reads root + /proc/mounts and the v2 root's cgroup.controllers (root: "" for this machine, or a captured
 * tree). False when no cgroup hierarchy is mounted. */
bool cgroup_memory_hierarchy(const char *root, struct cgroup_memory_root *out);
/* Pure: a process's cgroup from the text of /proc/PID/cgroup, in the hierarchy of `memory` (the v1 memory
 * controller's path on v1, the v2 path otherwise). False when it has none. */
bool cgroup_path_of(const struct cgroup_memory_root *memory, const char *proc_cgroup_text, char *out, size_t cap);
/* The THP bytes the kernel charges the cgroup at `path` (its memory.stat: the cgroup and its descendants).
 * 0 or -errno (-ENOENT: no memory controller; -ENODATA: no THP counters in it). */
int cgroup_read_thp(const char *root, const struct cgroup_memory_root *memory, const char *path, struct cgroup_thp *out);

/* The cgroups right below the root of the memory hierarchy (system.slice, user.slice, ...), with the THP
 * bytes memory.stat charges each (itself and below), most THP first; at most cap. Returns how many. */
struct cgroup_named_thp {
  char path[256];
  struct cgroup_thp thp;
};
size_t cgroup_tree_thp(const char *root, const struct cgroup_memory_root *memory, struct cgroup_named_thp *out,
                       size_t cap);
/* anon + shmem + file */
uint64_t cgroup_thp_total(const struct cgroup_thp *t);

enum cgroup_key { CGROUP_BY_CGROUP, CGROUP_BY_UNIT, CGROUP_BY_CONTAINER };
/* Pure. What a cgroup path names: by cgroup, the path itself; by unit, the deepest systemd unit in it
 * ("*.service" or "*.scope", else the deepest "*.slice"); by container, the deepest container id (64 hex
 * digits, bare as cgroupfs drivers name it or as docker-ID.scope, libpod-ID.scope, crio-ID.scope,
 * cri-containerd-ID.scope; conmon's scopes are not the container). name: the unit or id; prefix: the cgroup
 * that is the unit or the container (its memory.stat covers everything below); runtime (may be NULL):
 * "docker", "podman", "cri-o", "containerd" or "" when the path does not say. False when it names none. */
bool cgroup_key_of(const char *path, enum cgroup_key by, char *name, size_t name_cap, char *prefix, size_t prefix_cap,
                   const char **runtime);
/* "cgroup", "unit", "container". */
const char *cgroup_key_name(enum cgroup_key by);

/* Pure. Why the kernel's THP bytes of a cgroup and the sum of its processes' smaps walks differ (beyond 2 %
 * and 2 MiB), or NULL when they agree. walk: the sums of AnonHugePages, ShmemPmdMapped, FilePmdMapped. */
const char *cgroup_thp_difference(const struct cgroup_thp *kernel, const struct cgroup_thp *walk, unsigned unreadable,
                                  char *out, size_t cap);
/* Within 2 % (or 2 MiB, one huge page) of each other. */
bool cgroup_thp_agrees(uint64_t kernel, uint64_t walk);

#endif
