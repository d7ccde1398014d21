/* SPDX-License-Identifier: MIT */
/* cgroup.c - the hugetlb limits of a cgroup v2 and its ancestors; which cgroup, unit or container a process
 * is in, and the THP bytes the kernel charges a cgroup. */
#include "cgroup.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "os.h"
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

/* ---- which cgroup, unit, container ------------------------------------------------------------ */

/* A comma-separated option list holds `word`. */
static bool has_option(const char *options, const char *word) {
  size_t n = strlen(word);
  for (const char *c = options; c && *c;) {
    const char *comma = strchr(c, ',');
    size_t len = comma ? (size_t)(comma - c) : strlen(c);
    if (len == n && strncmp(c, word, n) == 0) return true;
    c = comma ? comma + 1 : NULL;
  }
  return false;
}

/* A white-space-separated list (cgroup.controllers) holds `word`. */
static bool has_word(const char *text, const char *word) {
  size_t n = strlen(word);
  for (const char *c = text; (c = strstr(c, word)); c += n)
    if ((c == text || isspace((unsigned char)c[-1])) && (!c[n] || isspace((unsigned char)c[n]))) return true;
  return false;
}

static char *read_under(const char *root, const char *path) {
  char full[2048];
  snprintf(full, sizeof full, "%s%s", root, path);
  char *text = NULL;
  return os_read_file(full, &text, NULL) == 0 ? text : NULL;
}

bool cgroup_memory_hierarchy(const char *root, struct cgroup_memory_root *out) {
  memset(out, 0, sizeof *out);
  char *mounts_text = read_under(root, "/proc/mounts");
  struct mount_entry *mounts = NULL;
  long count = mounts_text ? parse_mounts(mounts_text, &mounts) : 0;
  free(mounts_text);
  for (long i = 0; i < count && !out->mount[0]; i++) {
    if (strcmp(mounts[i].type, "cgroup2") != 0) continue;
    snprintf(out->mount, sizeof out->mount, "%s", mounts[i].path);
    char path[600];
    snprintf(path, sizeof path, "%s/cgroup.controllers", mounts[i].path);
    char *controllers = read_under(root, path);
    if (controllers && has_word(controllers, "memory")) out->version = 2;
    free(controllers);
  }
  for (long i = 0; i < count && out->version == 0; i++)
    if (strcmp(mounts[i].type, "cgroup") == 0 && has_option(mounts[i].options, "memory")) {
      out->version = 1;
      snprintf(out->mount, sizeof out->mount, "%s", mounts[i].path);
    }
  free(mounts);
  return out->mount[0] != '\0';
}

bool cgroup_path_of(const struct cgroup_memory_root *memory, const char *text, char *out, size_t cap) {
  if (memory->version == 1) return parse_cgroup_v1_path(text, "memory", out, cap);
  return parse_cgroup_v2_path(text, out, cap);
}

int cgroup_read_thp(const char *root, const struct cgroup_memory_root *memory, const char *path, struct cgroup_thp *out) {
  memset(out, 0, sizeof *out);
  if (memory->version == 0) return -ENOENT;
  char file[1024];
  snprintf(file, sizeof file, "%s%s/memory.stat", memory->mount, strcmp(path, "/") ? path : "");
  char *text = read_under(root, file);
  if (!text) return -ENOENT; /* the v2 root has no memory.stat */
  bool ok = parse_memory_stat_thp(text, out);
  free(text);
  return ok ? 0 : -ENODATA;
}

uint64_t cgroup_thp_total(const struct cgroup_thp *t) { return t->anon + t->shmem + t->file; }

static int by_thp(const void *x, const void *y) {
  const struct cgroup_named_thp *a = x, *b = y;
  uint64_t ta = cgroup_thp_total(&a->thp), tb = cgroup_thp_total(&b->thp);
  return ta < tb ? 1 : ta > tb ? -1 : strcmp(a->path, b->path);
}

size_t cgroup_tree_thp(const char *root, const struct cgroup_memory_root *memory, struct cgroup_named_thp *out,
                       size_t cap) {
  char dir_path[1024];
  snprintf(dir_path, sizeof dir_path, "%s%s", root, memory->mount);
  DIR *dir = memory->version ? opendir(dir_path) : NULL;
  if (!dir) return 0;
  size_t count = 0, seen = 0, all_cap = 0;
  struct cgroup_named_thp *all = NULL;
  for (struct dirent *e; (e = readdir(dir));) {
    if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
    if (ARRAY_GROW(all, seen + 1, all_cap)) break;
    struct cgroup_named_thp *c = &all[seen];
    snprintf(c->path, sizeof c->path, "/%.250s", e->d_name);
    if (cgroup_read_thp(root, memory, c->path, &c->thp) == 0) seen++;
  }
  closedir(dir);
  if (seen > 1) qsort(all, seen, sizeof *all, by_thp);
  count = seen < cap ? seen : cap;
  if (count) memcpy(out, all, count * sizeof *out);
  free(all);
  return count;
}

const char *cgroup_key_name(enum cgroup_key by) {
  return by == CGROUP_BY_UNIT ? "unit" : by == CGROUP_BY_CONTAINER ? "container" : "cgroup";
}

static bool ends_with(const char *s, size_t n, const char *suffix) {
  size_t k = strlen(suffix);
  return n >= k && strncmp(s + n - k, suffix, k) == 0;
}

static bool is_hex64(const char *s, size_t n) {
  if (n != 64) return false;
  for (size_t i = 0; i < n; i++)
    if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) return false;
  return true;
}

/* A path component that is a container: its id (the 64 hex digits) and the runtime its name says. */
static bool container_component(const char *c, size_t n, const char *parent, size_t parent_n, const char **id,
                                const char **runtime) {
  static const struct { const char *prefix, *runtime; } scopes[] = {
      {"docker-", "docker"}, {"libpod-", "podman"}, {"crio-", "cri-o"}, {"cri-containerd-", "containerd"}};
  if (is_hex64(c, n)) { /* cgroupfs drivers: /docker/ID, /kubepods/.../podUID/ID */
    *id = c;
    *runtime = parent_n == 6 && strncmp(parent, "docker", 6) == 0 ? "docker" : "";
    return true;
  }
  for (size_t k = 0; k < sizeof scopes / sizeof scopes[0]; k++) {
    size_t p = strlen(scopes[k].prefix);
    size_t body = n - p - (ends_with(c, n, ".scope") ? 6 : 0);
    if (n > p && strncmp(c, scopes[k].prefix, p) == 0 && n - p >= 64 && is_hex64(c + p, body)) {
      *id = c + p;
      *runtime = scopes[k].runtime;
      return true;
    }
  }
  return false;
}

static bool copy_span(char *out, size_t cap, const char *s, size_t n) {
  if (!out || !cap) return true;
  if (n >= cap) n = cap - 1;
  memcpy(out, s, n);
  out[n] = '\0';
  return true;
}

bool cgroup_key_of(const char *path, enum cgroup_key by, char *name, size_t name_cap, char *prefix, size_t prefix_cap,
                   const char **runtime) {
  const char *none = "";
  if (!runtime) runtime = &none;
  *runtime = "";
  if (by == CGROUP_BY_CGROUP) {
    if (!path[0]) return false;
    copy_span(name, name_cap, path, strlen(path));
    return copy_span(prefix, prefix_cap, path, strlen(path));
  }
  const char *best = NULL, *best_end = NULL, *slice = NULL, *slice_end = NULL, *id = NULL;
  const char *parent = "", *parent_end = parent;
  for (const char *c = path; *c;) {
    while (*c == '/') c++;
    if (!*c) break;
    const char *end = c + strcspn(c, "/");
    size_t n = (size_t)(end - c);
    const char *found_id, *found_runtime;
    if (by == CGROUP_BY_UNIT && (ends_with(c, n, ".service") || ends_with(c, n, ".scope"))) best = c, best_end = end;
    if (by == CGROUP_BY_UNIT && ends_with(c, n, ".slice")) slice = c, slice_end = end;
    if (by == CGROUP_BY_CONTAINER &&
        container_component(c, n, parent, (size_t)(parent_end - parent), &found_id, &found_runtime))
      best = c, best_end = end, id = found_id, *runtime = found_runtime;
    parent = c, parent_end = end;
    c = end;
  }
  if (!best && slice) best = slice, best_end = slice_end;
  if (!best) return false;
  if (id) copy_span(name, name_cap, id, 64);
  else copy_span(name, name_cap, best, (size_t)(best_end - best));
  return copy_span(prefix, prefix_cap, path, (size_t)(best_end - path));
}

bool cgroup_thp_agrees(uint64_t kernel, uint64_t walk) {
  uint64_t difference = kernel > walk ? kernel - walk : walk - kernel;
  uint64_t larger = kernel > walk ? kernel : walk;
  return difference <= os_pmd_size() || difference * 50 <= larger; /* one huge page, or 2 % */
}

const char *cgroup_thp_difference(const struct cgroup_thp *kernel, const struct cgroup_thp *walk, unsigned unreadable,
                                  char *out, size_t cap) {
  const char *why = NULL;
  if (!cgroup_thp_agrees(kernel->anon, walk->anon))
    why = kernel->anon > walk->anon
              ? "anonymous THP charged here that its processes do not map now: a process that moved out keeps its "
                "charges here, and memory of processes that could not be read or exited with children is counted"
              : "its processes map anonymous THP charged elsewhere: a process that moved in keeps its charges in the "
                "cgroup it came from (huge pages shared after fork are counted once per process)";
  else if (kernel->has_shmem && !cgroup_thp_agrees(kernel->shmem, walk->shmem))
    why = kernel->shmem > walk->shmem
              ? "shared memory (shmem, tmpfs) on THP charged here but not mapped huge by its processes: files on "
                "tmpfs, segments whose users left, or memory of a process that moved out"
              : "its processes map shared THP charged elsewhere: shared memory is charged once, to the cgroup that "
                "first touched it, and a walk counts it in every process that maps it";
  else if (kernel->has_file && !cgroup_thp_agrees(kernel->file, walk->file))
    why = kernel->file > walk->file ? "page cache on THP charged here but not mapped huge by its processes"
                                    : "its processes map file THP charged to the cgroup that first read the file";
  if (!why) return NULL;
  snprintf(out, cap, "%s%s", why, unreadable ? "; some of its processes could not be read" : "");
  return out;
}
