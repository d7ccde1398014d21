/* cgroup.c - the hugetlb limits of a cgroup v2 and its ancestors. */
#include "cgroup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "procfs.h"

bool cgroup_v2_mount(const char *mounts_text, char *out, size_t cap) {
  struct mount_entry *mounts = NULL;
  long count = parse_mounts(mounts_text, &mounts);
  bool found = false;
  for (long i = 0; i < count && !found; i++)
    if (strcmp(mounts[i].type, "cgroup2") == 0) found = snprintf(out, cap, "%s", mounts[i].path) >= 0;
  free(mounts);
  return found;
}

bool cgroup_hugetlb_limit_walk(const char *mount, const char *cgroup_path, uint64_t page_size,
                               cgroup_read_line_fn read_line, void *context, struct cgroup_hugetlb_limit *limit) {
  memset(limit, 0, sizeof *limit);
  limit->page_size = page_size;
  limit->max = limit->rsvd_max = limit->room = UINT64_MAX;
  limit->current = limit->rsvd_current = CGROUP_UNKNOWN;
  char name[32], cgroup[512], path[2048], buf[64];
  cgroup_hugetlb_size_name(page_size, name, sizeof name);
  snprintf(cgroup, sizeof cgroup, "%s", cgroup_path);
  bool any = false;
  for (bool leaf = true;; leaf = false) {
    size_t len = strlen(cgroup);
    while (len > 1 && cgroup[len - 1] == '/') cgroup[--len] = '\0';
    const char *files[] = {"max", "rsvd.max", "current", "rsvd.current"};
    uint64_t values[4];
    for (int f = 0; f < 4; f++) {
      snprintf(path, sizeof path, "%s%s/hugetlb.%s.%s", mount, strcmp(cgroup, "/") ? cgroup : "", name, files[f]);
      if (read_line(context, path, buf, sizeof buf) && parse_cgroup_limit(buf, &values[f])) any = true;
      else values[f] = CGROUP_UNKNOWN;
    }
    if (values[0] != CGROUP_UNKNOWN && values[0] < limit->max) {
      limit->max = values[0];
      snprintf(limit->limited_by, sizeof limit->limited_by, "%s", cgroup);
    }
    if (values[0] != UINT64_MAX) { /* a limit at this level: what its own usage leaves */
      uint64_t current = values[2] == CGROUP_UNKNOWN ? 0 : values[2];
      uint64_t room = values[0] > current ? values[0] - current : 0;
      if (room < limit->room) {
        limit->room = room;
        snprintf(limit->room_limited_by, sizeof limit->room_limited_by, "%s", cgroup);
      }
    }
    if (values[1] != CGROUP_UNKNOWN && values[1] < limit->rsvd_max) limit->rsvd_max = values[1];
    if (leaf) { limit->current = values[2]; limit->rsvd_current = values[3]; }
    if (strcmp(cgroup, "/") == 0 || !cgroup[0]) break;
    char *slash = strrchr(cgroup, '/');
    if (slash == cgroup) cgroup[1] = '\0';
    else if (slash) *slash = '\0';
    else break;
  }
  return any;
}
