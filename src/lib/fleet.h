/* SPDX-License-Identifier: MIT */
/* fleet.h - processes grouped by cgroup, systemd unit or container (hugify inspect --all --by, hugify top):
 * the sums of their smaps_rollup walks beside the THP bytes the kernel charges each group (memory.stat), and
 * why the two differ. Not exported. */
#ifndef HUGIFY_FLEET_H
#define HUGIFY_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgroup.h"
#include "inspect.h"

struct fleet_group {
  char name[256];          /* the cgroup path, unit or container id; "" = the processes that name none */
  char cgroup[256];        /* the cgroup that is the group (memory.stat's figures cover it and below) */
  const char *runtime;     /* by container: "docker", "podman", "cri-o", "containerd" or "" */
  size_t processes;
  struct smaps_rollup memory;  /* the sums of its processes' smaps_rollup */
  struct cgroup_thp walk;      /* the same sums as THP kinds: AnonHugePages, ShmemPmdMapped, FilePmdMapped */
  bool has_kernel;             /* kernel holds the group's memory.stat */
  struct cgroup_thp kernel;
  char difference[400];        /* why kernel and walk differ, "" when they agree (or no kernel figure) */
};
struct fleet {
  enum cgroup_key by;
  struct cgroup_memory_root memory;
  struct fleet_group *groups;  /* by anonymous memory not on huge pages, most first (malloc'd) */
  size_t count;
};

/* Group the ranked processes (their /proc/PID/cgroup read now; a process gone since is left out) and read each
 * group's memory.stat. 0 or -ENOMEM. */
int fleet_group_processes(const struct inspect_ranking *ranking, enum cgroup_key by, struct fleet *out);
void fleet_free(struct fleet *fleet);
/* A process's cgroup (in the memory controller's hierarchy), "" when unknown. */
void fleet_cgroup_of(const struct cgroup_memory_root *memory, int pid, char *out, size_t cap);

#endif
