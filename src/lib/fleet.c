/* SPDX-License-Identifier: MIT */
/* fleet.c - processes grouped by cgroup, unit or container, beside the kernel's per-cgroup THP figures. */
#include "fleet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "os.h"

void fleet_cgroup_of(const struct cgroup_memory_root *memory, int pid, char *out, size_t cap) {
  char path[64], *text = NULL;
  snprintf(path, sizeof path, "/proc/%d/cgroup", pid);
  out[0] = '\0';
  if (os_read_file(path, &text, NULL) == 0 && !cgroup_path_of(memory, text, out, cap)) out[0] = '\0';
  free(text);
}

static uint64_t anon_not_huge(const struct fleet_group *g) { return g->memory.anonymous - g->memory.anon_thp; }

static int by_anon_not_huge(const void *a, const void *b) {
  const struct fleet_group *x = a, *y = b;
  uint64_t nx = anon_not_huge(x), ny = anon_not_huge(y);
  return nx < ny ? 1 : nx > ny ? -1 : strcmp(x->name, y->name);
}

static void add_process(struct fleet_group *g, const struct smaps_rollup *m) {
  g->processes++;
  g->memory.rss += m->rss;
  g->memory.anonymous += m->anonymous;
  g->memory.anon_thp += m->anon_thp;
  g->memory.hugetlb += m->hugetlb;
  g->memory.shmem_thp += m->shmem_thp;
  g->memory.file_thp += m->file_thp;
  g->walk.anon = g->memory.anon_thp;
  g->walk.shmem = g->memory.shmem_thp;
  g->walk.file = g->memory.file_thp;
  g->walk.has_shmem = g->walk.has_file = true; /* smaps_rollup has both */
}

/* The group named `name`, added when new; NULL when out of memory. */
static struct fleet_group *group_named(struct fleet *f, size_t *cap, const char *name, const char *cgroup,
                                       const char *runtime) {
  for (size_t i = 0; i < f->count; i++)
    if (strcmp(f->groups[i].name, name) == 0) return &f->groups[i];
  if (ARRAY_GROW(f->groups, f->count + 1, *cap)) return NULL;
  struct fleet_group *g = &f->groups[f->count++];
  memset(g, 0, sizeof *g);
  snprintf(g->name, sizeof g->name, "%s", name);
  snprintf(g->cgroup, sizeof g->cgroup, "%s", cgroup);
  g->runtime = runtime;
  return g;
}

int fleet_group_processes(const struct inspect_ranking *ranking, enum cgroup_key by, struct fleet *out) {
  memset(out, 0, sizeof *out);
  out->by = by;
  cgroup_memory_hierarchy("", &out->memory);
  size_t cap = 0;
  for (size_t i = 0; i < ranking->count; i++) {
    const struct inspect_process *p = &ranking->processes[i];
    char path[512], name[256] = "", prefix[256] = "";
    const char *runtime = "";
    fleet_cgroup_of(&out->memory, p->pid, path, sizeof path);
    if (!path[0]) continue; /* gone */
    if (!cgroup_key_of(path, by, name, sizeof name, prefix, sizeof prefix, &runtime)) name[0] = prefix[0] = '\0';
    struct fleet_group *g = group_named(out, &cap, name, prefix, runtime);
    if (!g) {
      fleet_free(out);
      return -ENOMEM;
    }
    add_process(g, &p->memory);
  }
  for (size_t i = 0; i < out->count; i++) {
    struct fleet_group *g = &out->groups[i];
    g->has_kernel = g->cgroup[0] && cgroup_read_thp("", &out->memory, g->cgroup, &g->kernel) == 0;
    if (g->has_kernel && !cgroup_thp_difference(&g->kernel, &g->walk, ranking->unreadable, g->difference,
                                                sizeof g->difference))
      g->difference[0] = '\0';
  }
  if (out->count > 1) qsort(out->groups, out->count, sizeof *out->groups, by_anon_not_huge);
  return 0;
}

void fleet_free(struct fleet *fleet) {
  free(fleet->groups);
  fleet->groups = NULL;
  fleet->count = 0;
}
