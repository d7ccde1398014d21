/* cgroup.h - the hugetlb limits of a cgroup v2 and its ancestors (hugify status shows them; hugify_alloc
 * falls back before a fault would exceed them: a hugetlb cgroup limit is charged at fault time, SIGBUS).
 * Not exported. */
#ifndef HUGIFY_CGROUP_H
#define HUGIFY_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
