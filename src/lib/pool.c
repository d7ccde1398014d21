/* SPDX-License-Identifier: MIT */
/* pool.c - hugetlb pools: read and set per size and NUMA node, read back, mounts, persistence files. */
#include "pool.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os.h"
#include "procfs.h"
#include "units.h"

#define SYSFS_NODES "/sys/devices/system/node"
#define COMPACTION_ROUNDS 2

uint64_t pool_default_size_at(const char *root) {
  char path[4096];
  root_path(path, sizeof path, root, "/proc/meminfo");
  char *text;
  os_read_file(path, &text, NULL);
  uint64_t size = 0;
  if (text && !parse_keyed_value(text, "Hugepagesize", &size)) size = 0;
  free(text);
  return size;
}

int pool_node_ids_at(const char *root, int *ids, int cap) {
  char path[4096];
  root_path(path, sizeof path, root, SYSFS_NODES);
  DIR *d = opendir(path);
  if (!d) return 0;
  int count = 0;
  struct dirent *entry;
  while ((entry = readdir(d)) && count < cap) {
    uint64_t id;
    if (strncmp(entry->d_name, "node", 4) == 0 && parse_u64(entry->d_name + 4, &id) && id < 1048576u) /* any node number: the kernel has at most 1024 */
      ids[count++] = (int)id;
  }
  closedir(d);
  for (int i = 1; i < count; i++) /* insertion sort: a handful of nodes */
    for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) { int t = ids[j]; ids[j] = ids[j - 1]; ids[j - 1] = t; }
  return count;
}

static void global_pool_path(char *buf, size_t cap, const char *root, uint64_t page_size, const char *leaf) {
  char path[256];
  snprintf(path, sizeof path, OS_SYSFS_HUGEPAGES "/hugepages-%llukB/%s", (unsigned long long)(page_size >> 10), leaf);
  root_path(buf, cap, root, path);
}

static void node_pool_path(char *buf, size_t cap, const char *root, int node, uint64_t page_size, const char *leaf) {
  char path[256];
  snprintf(path, sizeof path, SYSFS_NODES "/node%d/hugepages/hugepages-%llukB/%s", node,
           (unsigned long long)(page_size >> 10), leaf);
  root_path(buf, cap, root, path);
}

int pool_read_at(const char *root, uint64_t page_size, struct hugify_pool *out) {
  static const struct { const char *leaf; size_t offset; } node_files[] = {
      {"nr_hugepages", offsetof(struct hugify_pool_node, total)},
      {"free_hugepages", offsetof(struct hugify_pool_node, free)},
      {"surplus_hugepages", offsetof(struct hugify_pool_node, surplus)},
  };
  memset(out, 0, sizeof *out);
  out->global.page_size = page_size;
  char path[4096];
  global_pool_path(path, sizeof path, root, page_size, "");
  struct stat st;
  if (stat(path, &st) != 0) return errno == ENOENT ? -EINVAL : -errno;
  char prefix[4096];
  root_path(prefix, sizeof prefix, root, "");
  int rc = os_hugetlb_read_under(prefix, page_size, &out->global);
  if (rc) return rc;
  out->is_default = pool_default_size_at(root) == page_size;
  int ids[HUGIFY_MAX_NODES];
  int nodes = pool_node_ids_at(root, ids, HUGIFY_MAX_NODES);
  for (int n = 0; n < nodes; n++) {
    struct hugify_pool_node *node = &out->nodes[out->node_count];
    memset(node, 0, sizeof *node);
    node->node = ids[n];
    bool ok = true;
    for (size_t i = 0; ok && i < sizeof node_files / sizeof node_files[0]; i++) {
      node_pool_path(path, sizeof path, root, ids[n], page_size, node_files[i].leaf);
      ok = os_read_u64(path, (uint64_t *)((char *)node + node_files[i].offset)) == 0;
    }
    if (ok) out->node_count++; /* a node without memory has no pool directory */
  }
  return 0;
}

int pool_list_at(const char *root, struct hugify_pool *pools, unsigned cap) {
  char dir[4096];
  root_path(dir, sizeof dir, root, OS_SYSFS_HUGEPAGES);
  uint64_t sizes[HUGIFY_MAX_HUGETLB_SIZES];
  int count = os_hugepage_size_dirs(dir, sizes, HUGIFY_MAX_HUGETLB_SIZES);
  if (count < 0) return count;
  unsigned stored = 0;
  for (int i = 0; i < count && stored < cap; i++) {
    int rc = pool_read_at(root, sizes[i], &pools[stored]);
    if (rc) return rc;
    stored++;
  }
  return (int)stored;
}

int hugify_pool_list(struct hugify_pool *pools, unsigned cap) {
  if (!pools && cap) return -EINVAL;
  return pool_list_at("/", pools, cap);
}

int hugify_pool_read(uint64_t page_size, struct hugify_pool *out) {
  if (!out || page_size == 0) return -EINVAL;
  return pool_read_at("/", page_size, out);
}

bool pool_node_memory_at(const char *root, const struct hugify_pool *pool, uint64_t *memory) {
  char path[4096];
  if (pool->node_count <= 1) {
    root_path(path, sizeof path, root, "/proc/meminfo");
    char *text;
    os_read_file(path, &text, NULL);
    bool ok = text && parse_keyed_value(text, "MemTotal", &memory[0]);
    free(text);
    return ok;
  }
  for (unsigned i = 0; i < pool->node_count; i++) {
    char file[128], key[64];
    snprintf(file, sizeof file, SYSFS_NODES "/node%d/meminfo", pool->nodes[i].node);
    snprintf(key, sizeof key, "Node %d MemTotal", pool->nodes[i].node);
    root_path(path, sizeof path, root, file);
    char *text;
    os_read_file(path, &text, NULL);
    bool ok = text && parse_keyed_value(text, key, &memory[i]);
    free(text);
    if (!ok) return false;
  }
  return true;
}

/* ---- the plan ----------------------------------------------------------------------------------- */

static uint64_t persistent(uint64_t total, uint64_t surplus) { return total > surplus ? total - surplus : 0; }

static const struct hugify_pool *find_pool(const struct hugify_pool *pools, unsigned count, uint64_t page_size) {
  for (unsigned i = 0; i < count; i++)
    if (pools[i].global.page_size == page_size) return &pools[i];
  return NULL;
}

/* Bytes the persistent pools of sizes other than page_size hold on a node (node < 0: machine-wide). */
static uint64_t other_pools_bytes(const struct hugify_pool *pools, unsigned count, uint64_t page_size, int node) {
  uint64_t bytes = 0;
  for (unsigned i = 0; i < count; i++) {
    const struct hugify_pool *p = &pools[i];
    if (p->global.page_size == page_size) continue;
    if (node < 0) bytes += persistent(p->global.total, p->global.surplus) * p->global.page_size;
    for (unsigned n = 0; node >= 0 && n < p->node_count; n++)
      if (p->nodes[n].node == node) bytes += persistent(p->nodes[n].total, p->nodes[n].surplus) * p->global.page_size;
  }
  return bytes;
}

void pool_size_list(const struct hugify_pool *pools, unsigned count, char *out, size_t cap) {
  out[0] = '\0';
  for (unsigned i = 0; i < count; i++) {
    char label[32];
    format_page_size(pools[i].global.page_size, label, sizeof label);
    size_t used = strlen(out);
    snprintf(out + used, cap - used, "%s%s", i ? ", " : "", label);
  }
  if (!count) snprintf(out, cap, "none");
}

/* Whether `pages` of page_size fit beside `other` bytes in `memory`; else how many would (*fit). */
static bool fits(uint64_t pages, uint64_t page_size, uint64_t other, uint64_t memory, uint64_t *fit) {
  uint64_t room = memory > other ? memory - other : 0;
  *fit = room / page_size;
  return pages <= *fit;
}

int pool_plan(const struct hugify_pool *pools, unsigned pool_count, const uint64_t *memory, uint64_t page_size,
              int node, uint64_t count, struct hugify_pool_result *result) {
  memset(result, 0, sizeof *result);
  result->page_size = page_size;
  result->node = node;
  char label[32], sizes[128];
  format_page_size(page_size, label, sizeof label);
  const struct hugify_pool *pool = find_pool(pools, pool_count, page_size);
  if (!pool) {
    pool_size_list(pools, pool_count, sizes, sizeof sizes);
    reason_add(result->reason, sizeof result->reason, "this machine has no %s hugetlb pages (it has: %s)", label,
                  sizes);
    return -EINVAL;
  }
  result->before = persistent(pool->global.total, pool->global.surplus);
  result->node_count = pool->node_count;
  int index = -1;
  uint64_t node_sum = 0;
  for (unsigned i = 0; i < pool->node_count; i++) {
    struct hugify_pool_node_result *n = &result->nodes[i];
    n->node = pool->nodes[i].node;
    n->before = n->requested = persistent(pool->nodes[i].total, pool->nodes[i].surplus);
    node_sum += n->before;
    if (n->node == node) index = (int)i;
  }
  if (pool->node_count > 1) result->before = node_sum; /* what per-node writes change */
  if (node >= 0 && index < 0) {
    char ids[256] = "";
    for (unsigned i = 0; i < pool->node_count; i++) {
      size_t used = strlen(ids);
      snprintf(ids + used, sizeof ids - used, "%s%d", i ? ", " : "", pool->nodes[i].node);
    }
    reason_add(result->reason, sizeof result->reason, "this machine has no node %d with a %s pool (nodes: %s)",
                  node, label, ids[0] ? ids : "none: the kernel has no per-node pools");
    return -EINVAL;
  }
  if (node >= 0) {
    result->nodes[index].requested = count;
    result->requested = result->before - result->nodes[index].before + count;
  } else {
    result->requested = count;
    unsigned n = pool->node_count;
    for (unsigned i = 0; i < n; i++) result->nodes[i].requested = count / n + (i < count % n ? 1 : 0);
  }
  /* Beyond memory: more than the node (or machine) could hold next to the other pools. */
  if (!memory) return 0;
  uint64_t fit;
  if (pool->node_count <= 1) {
    if (!fits(result->requested, page_size, other_pools_bytes(pools, pool_count, page_size, -1), memory[0], &fit)) {
      char have[32];
      format_bytes(memory[0], have, sizeof have);
      result->beyond_memory = 1;
      reason_add(result->reason, sizeof result->reason,
                    "%llu %s pages do not fit in this machine's %s of memory: at most %llu could, beside the "
                    "other pools",
                    (unsigned long long)result->requested, label, have, (unsigned long long)fit);
    }
    return 0;
  }
  for (unsigned i = 0; i < pool->node_count; i++) {
    struct hugify_pool_node_result *n = &result->nodes[i];
    if (fits(n->requested, page_size, other_pools_bytes(pools, pool_count, page_size, n->node), memory[i], &fit))
      continue;
    char have[32];
    format_bytes(memory[i], have, sizeof have);
    result->beyond_memory = 1;
    reason_add(result->reason, sizeof result->reason,
                  "node %d: %llu %s pages do not fit in its %s of memory: at most %llu could, beside the other pools",
                  n->node, (unsigned long long)n->requested, label, have, (unsigned long long)fit);
  }
  return 0;
}

/* ---- setting ------------------------------------------------------------------------------------ */

struct pool_writer {
  const char *root;
  uint64_t page_size;
  bool per_node; /* write the node files; else the machine-wide file */
  struct hugify_pool_result *result;
};

static void target_path(const struct pool_writer *w, unsigned i, char *path, size_t cap) {
  if (w->per_node) node_pool_path(path, cap, w->root, w->result->nodes[i].node, w->page_size, "nr_hugepages");
  else global_pool_path(path, cap, w->root, w->page_size, "nr_hugepages");
}

static int writable(const struct pool_writer *w, char *reason, size_t cap) {
  char path[4096];
  for (unsigned i = 0; i < (w->per_node ? w->result->node_count : 1); i++) {
    target_path(w, i, path, sizeof path);
    if (access(path, W_OK) != 0) {
      int err = errno;
      reason_add(reason, cap, "%s is not writable (%s)%s", path, strerror(err),
                    err == EACCES || err == EPERM ? ": changing the pool needs root" : "");
      return -err;
    }
  }
  return 0;
}

int pool_check_writable_at(const char *root, uint64_t page_size, int node, char *reason, size_t cap) {
  struct hugify_pool_result *plan = calloc(1, sizeof *plan);
  struct hugify_pool *pool = calloc(1, sizeof *pool);
  int rc = plan && pool ? pool_read_at(root, page_size, pool) : -ENOMEM;
  if (rc == 0) {
    plan->node_count = pool->node_count;
    for (unsigned i = 0; i < pool->node_count; i++) plan->nodes[i].node = pool->nodes[i].node;
    struct pool_writer w = {root, page_size, node >= 0 || pool->node_count > 1, plan};
    if (node >= 0) { /* only that node's file is written */
      plan->node_count = 1;
      plan->nodes[0].node = node;
    }
    rc = writable(&w, reason, cap);
  }
  free(plan);
  free(pool);
  return rc;
}

static int write_count(const char *path, uint64_t count) {
  char text[32];
  snprintf(text, sizeof text, "%llu", (unsigned long long)count);
  return os_write_file(path, text);
}

/* Write the targets: shrinking nodes first, so their memory is free for the growing ones. `targets` per
 * node (per_node) or targets[0] machine-wide; only_short: only where got < target. */
static int write_targets(const struct pool_writer *w, const uint64_t *targets, bool only_short) {
  char path[4096];
  if (!w->per_node) {
    if (only_short && w->result->got >= targets[0]) return 0;
    target_path(w, 0, path, sizeof path);
    return write_count(path, targets[0]);
  }
  for (int pass = 0; pass < 2; pass++) {
    for (unsigned i = 0; i < w->result->node_count; i++) {
      const struct hugify_pool_node_result *n = &w->result->nodes[i];
      bool shrink = targets[i] < n->got;
      if ((pass == 0) != shrink || targets[i] == n->got) continue;
      if (only_short && n->got >= targets[i]) continue;
      target_path(w, i, path, sizeof path);
      int rc = write_count(path, targets[i]);
      if (rc) return rc;
    }
  }
  return 0;
}

static uint64_t got_sum(const struct hugify_pool_result *r) {
  uint64_t sum = r->got;
  if (r->node_count) {
    sum = 0;
    for (unsigned i = 0; i < r->node_count; i++) sum += r->nodes[i].got;
  }
  return sum;
}

static int read_back(const struct pool_writer *w) {
  struct hugify_pool now;
  int rc = pool_read_at(w->root, w->page_size, &now);
  if (rc) return rc;
  w->result->got = persistent(now.global.total, now.global.surplus);
  w->result->surplus = now.global.surplus;
  for (unsigned i = 0; i < w->result->node_count; i++)
    for (unsigned j = 0; j < now.node_count; j++)
      if (now.nodes[j].node == w->result->nodes[i].node)
        w->result->nodes[i].got = persistent(now.nodes[j].total, now.nodes[j].surplus);
  /* The kernel keeps the machine-wide count equal to the sum over nodes; the file that was written is the
   * one to believe (a captured tree does not update the other). */
  if (w->per_node) w->result->got = got_sum(w->result);
  else if (w->result->node_count == 1) w->result->nodes[0].got = w->result->got;
  return 0;
}

static bool is_short(const struct pool_writer *w, const uint64_t *targets) {
  if (!w->per_node) return w->result->got < targets[0];
  for (unsigned i = 0; i < w->result->node_count; i++)
    if (w->result->nodes[i].got < targets[i]) return true;
  return false;
}

/* Compaction makes free memory contiguous; hugetlb allocation itself only compacts a little. */
static void compact(const struct pool_writer *w, const uint64_t *targets) {
  char path[4096], file[128];
  if (!w->per_node) {
    root_path(path, sizeof path, w->root, "/proc/sys/vm/compact_memory");
    os_write_file(path, "1");
  } else {
    for (unsigned i = 0; i < w->result->node_count; i++) {
      if (w->result->nodes[i].got >= targets[i]) continue;
      snprintf(file, sizeof file, SYSFS_NODES "/node%d/compact", w->result->nodes[i].node);
      root_path(path, sizeof path, w->root, file);
      os_write_file(path, "1");
    }
  }
  w->result->compactions++;
}

static void describe_shortfall(const struct pool_writer *w, const char *label) {
  struct hugify_pool_result *r = w->result;
  if (!w->per_node) {
    if (r->got < r->requested)
      reason_add(r->reason, sizeof r->reason, "got %llu of %llu %s pages (short by %llu)",
                    (unsigned long long)r->got, (unsigned long long)r->requested, label,
                    (unsigned long long)(r->requested - r->got));
    return;
  }
  for (unsigned i = 0; i < r->node_count; i++) {
    const struct hugify_pool_node_result *n = &r->nodes[i];
    if (n->got < n->requested)
      reason_add(r->reason, sizeof r->reason, "node %d: got %llu of %llu %s pages (short by %llu)", n->node,
                    (unsigned long long)n->got, (unsigned long long)n->requested, label,
                    (unsigned long long)(n->requested - n->got));
  }
}

/* A spread plan in which some nodes stayed short: offer the deficit to the nodes that were filled. */
static int rebalance(const struct pool_writer *w, uint64_t *targets, const char *label) {
  struct hugify_pool_result *r = w->result;
  uint64_t deficit = 0;
  unsigned full = 0;
  for (unsigned i = 0; i < r->node_count; i++) {
    if (r->nodes[i].got < targets[i]) deficit += targets[i] - r->nodes[i].got;
    else full++;
  }
  if (deficit == 0 || full == 0) return 0;
  uint64_t share = deficit / full, extra = deficit % full;
  for (unsigned i = 0, k = 0; i < r->node_count; i++) {
    if (r->nodes[i].got < targets[i]) { targets[i] = r->nodes[i].got; continue; }
    targets[i] = r->nodes[i].got + share + (k++ < extra ? 1 : 0);
  }
  int rc = write_targets(w, targets, false);
  if (rc == 0) rc = read_back(w);
  if (rc == 0)
    reason_add(r->reason, sizeof r->reason,
                  "the %llu %s pages the short nodes could not give were asked of the others",
                  (unsigned long long)deficit, label);
  return rc;
}

int pool_set_at(const char *root, uint64_t page_size, int node, uint64_t count, unsigned flags,
                struct hugify_pool_result *result) {
  struct hugify_pool_result scratch;
  if (!result) result = &scratch;
  memset(result, 0, sizeof *result);
  if (flags & ~HUGIFY_POOL_DRY_RUN || page_size == 0) return -EINVAL;
  struct hugify_pool *pools = calloc(HUGIFY_MAX_HUGETLB_SIZES, sizeof *pools);
  if (!pools) return -ENOMEM;
  int pool_count = pool_list_at(root, pools, HUGIFY_MAX_HUGETLB_SIZES);
  if (pool_count < 0) {
    reason_add(result->reason, sizeof result->reason, "cannot read the hugetlb pools (%s)", strerror(-pool_count));
    free(pools);
    return pool_count;
  }
  uint64_t memory[HUGIFY_MAX_NODES];
  const struct hugify_pool *pool = find_pool(pools, (unsigned)pool_count, page_size);
  bool bounded = pool && pool_node_memory_at(root, pool, memory);
  int rc = pool_plan(pools, (unsigned)pool_count, bounded ? memory : NULL, page_size, node, count, result);
  free(pools);
  if (rc) return rc;
  result->got = result->before;
  for (unsigned i = 0; i < result->node_count; i++) result->nodes[i].got = result->nodes[i].before;
  if (result->beyond_memory) return -ENOMEM;
  if (flags & HUGIFY_POOL_DRY_RUN) return 0;

  struct pool_writer w = {root, page_size, node >= 0 || result->node_count > 1, result};
  uint64_t targets[HUGIFY_MAX_NODES];
  if (w.per_node) for (unsigned i = 0; i < result->node_count; i++) targets[i] = result->nodes[i].requested;
  else targets[0] = result->requested;

  /* Every file is checked before the first is written: without the privilege, nothing changes. */
  rc = writable(&w, result->reason, sizeof result->reason);
  if (rc) return rc;
  char label[32];
  format_page_size(page_size, label, sizeof label);
  rc = write_targets(&w, targets, false);
  if (rc == 0) rc = read_back(&w);
  for (unsigned round = 0; rc == 0 && round < COMPACTION_ROUNDS && is_short(&w, targets); round++) {
    uint64_t had = got_sum(result);
    compact(&w, targets);
    rc = write_targets(&w, targets, true);
    if (rc == 0) rc = read_back(&w);
    if (rc == 0 && got_sum(result) <= had) break; /* compaction freed nothing usable */
  }
  if (rc == 0 && node < 0 && w.per_node && result->got < result->requested) rc = rebalance(&w, targets, label);
  if (rc) {
    reason_add(result->reason, sizeof result->reason, "writing the %s pool failed (%s)", label, strerror(-rc));
    return rc;
  }
  bool filled = result->got >= result->requested;
  for (unsigned i = 0; node >= 0 && i < result->node_count; i++)
    if (result->nodes[i].node == node) filled = result->nodes[i].got >= count;
  if (!filled) describe_shortfall(&w, label);
  return filled ? 0 : -ENOMEM;
}

int pool_plan_at(const char *root, const struct hugify_pool_request *requests, unsigned count,
                 struct hugify_pool_result *results, int *codes, bool *beyond_memory, int *failed, char *reason,
                 size_t cap) {
  *beyond_memory = false;
  for (unsigned i = 0; i < count; i++) {
    const struct hugify_pool_request *r = &requests[i];
    codes[i] = pool_set_at(root, r->page_size, r->node, r->count, HUGIFY_POOL_DRY_RUN, &results[i]);
    *beyond_memory |= results[i].beyond_memory;
    if (codes[i] && codes[i] != -ENOMEM) {
      *failed = (int)i;
      snprintf(reason, cap, "%s", results[i].reason);
      return codes[i];
    }
  }
  return 0;
}

int pool_commit_at(const char *root, const struct hugify_pool_request *requests, unsigned count,
                   struct hugify_pool_result *results, int *codes, bool *written, int *failed, char *reason,
                   size_t cap) {
  *written = false;
  for (unsigned i = 0; i < count; i++) { /* nothing is written unless every file can be */
    int rc = pool_check_writable_at(root, requests[i].page_size, requests[i].node, reason, cap);
    if (rc) {
      *failed = (int)i;
      return rc;
    }
  }
  int first = 0;
  *written = true;
  for (unsigned i = 0; i < count; i++) {
    const struct hugify_pool_request *r = &requests[i];
    codes[i] = pool_set_at(root, r->page_size, r->node, r->count, 0, &results[i]);
    if (codes[i] && codes[i] != -ENOMEM && !first) { /* not expected after the check; reported all the same */
      first = codes[i];
      *failed = (int)i;
      snprintf(reason, cap, "%s", results[i].reason);
    }
  }
  return first;
}

int hugify_pool_set(uint64_t page_size, int node, uint64_t count, unsigned flags, struct hugify_pool_result *result) {
  return pool_set_at("/", page_size, node, count, flags, result);
}

/* ---- mounts ------------------------------------------------------------------------------------- */

void hugify_pool_mount_dir(uint64_t page_size, char *buf, size_t cap) {
  char label[32];
  format_page_size(page_size, label, sizeof label);
  snprintf(buf, cap, "/dev/hugepages%s", label);
}

struct mount_settings {
  char dir[1024];
  unsigned mode;
  uid_t uid;
  gid_t gid;
  uint64_t max_size, min_size;
};

int pool_check_mount_dir(const char *dir, char *reason, size_t cap) {
  size_t length = strlen(dir);
  if (dir[0] != '/') {
    reason_add(reason, cap, "the mount point must be an absolute path, not '%s'", dir);
    return -EINVAL;
  }
  if (length >= sizeof ((struct mount_settings *)0)->dir) {
    reason_add(reason, cap, "the mount point is %zu characters long; at most %zu", length,
                  sizeof ((struct mount_settings *)0)->dir - 1);
    return -ENAMETOOLONG;
  }
  /* It goes into a systemd unit, one setting per line: a newline would add settings of its own. */
  for (const char *p = dir; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) {
      reason_add(reason, cap, "the mount point holds a control character (byte 0x%02x at %zu)", (unsigned)*p,
                    (size_t)(p - dir));
      return -EINVAL;
    }
  if (length > 1 && dir[length - 1] == ' ') {
    reason_add(reason, cap, "the mount point ends in a blank (systemd would drop it)");
    return -EINVAL;
  }
  /* systemd takes only normalized paths for Where= (and the unit name must match it) */
  for (const char *p = dir; (p = strchr(p, '/')); p++)
    if ((p[1] == '.' && (p[2] == '/' || !p[2])) || (p[1] == '.' && p[2] == '.' && (p[3] == '/' || !p[3]))) {
      reason_add(reason, cap, "the mount point has a '.' or '..' component: give it without them");
      return -EINVAL;
    }
  return 0;
}

static void mount_settings(uint64_t page_size, const struct hugify_mount_opts *opts, struct mount_settings *s) {
  memset(s, 0, sizeof *s);
  if (opts && opts->dir) snprintf(s->dir, sizeof s->dir, "%s", opts->dir);
  else hugify_pool_mount_dir(page_size, s->dir, sizeof s->dir);
  size_t n = strlen(s->dir);
  while (n > 1 && s->dir[n - 1] == '/') s->dir[--n] = '\0';
  s->mode = opts && opts->mode ? opts->mode : 01770;
  if (opts) {
    s->uid = opts->uid;
    s->gid = opts->gid;
    s->max_size = opts->max_size;
    s->min_size = opts->min_size;
  }
}

static void mount_options(uint64_t page_size, const struct mount_settings *s, bool with_flags, char *buf, size_t cap) {
  char label[32];
  format_page_size(page_size, label, sizeof label);
  snprintf(buf, cap, "%spagesize=%s,mode=%o,uid=%u,gid=%u", with_flags ? "nosuid,nodev," : "", label, s->mode,
           (unsigned)s->uid, (unsigned)s->gid);
  if (s->max_size) {
    size_t used = strlen(buf);
    snprintf(buf + used, cap - used, ",size=%llu", (unsigned long long)s->max_size);
  }
  if (s->min_size) {
    size_t used = strlen(buf);
    snprintf(buf + used, cap - used, ",min_size=%llu", (unsigned long long)s->min_size);
  }
}

int pool_make_directories(const char *dir, bool *created) {
  char path[1024];
  snprintf(path, sizeof path, "%s", dir);
  *created = false;
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char saved = *p;
    *p = '\0';
    if (mkdir(path, 0755) == 0) *created = true;
    else if (errno != EEXIST) return -errno;
    *p = saved;
    if (!saved) return 0;
  }
}

int hugify_pool_mount(uint64_t page_size, const struct hugify_mount_opts *opts, struct hugify_mount_result *result) {
  if (result) memset(result, 0, sizeof *result);
  char *reason = result ? result->reason : NULL;
  size_t cap = result ? sizeof result->reason : 0;
  struct mount_settings s;
  mount_settings(page_size, opts, &s);
  char label[32];
  format_page_size(page_size, label, sizeof label);
  struct hugify_pool pool;
  if (page_size == 0 || pool_read_at("/", page_size, &pool) != 0) {
    reason_add(reason, cap, "this machine has no %s hugetlb pages", label);
    return -EINVAL;
  }
  int checked = pool_check_mount_dir(opts && opts->dir ? opts->dir : s.dir, reason, cap);
  if (checked) return checked == -ENAMETOOLONG ? -EINVAL : checked;
  if (s.min_size && s.max_size && s.min_size > s.max_size) {
    reason_add(reason, cap, "min_size is larger than the size limit");
    return -EINVAL;
  }
  char *text;
  os_read_file("/proc/self/mounts", &text, NULL);
  struct mount_entry *mounts = NULL;
  long count = text ? parse_mounts(text, &mounts) : -1;
  free(text);
  for (long i = count - 1; i >= 0; i--) { /* the last mount on a path is the one in effect */
    if (strcmp(mounts[i].path, s.dir) != 0) continue;
    struct hugetlbfs_options o;
    bool same = strcmp(mounts[i].type, "hugetlbfs") == 0 && parse_hugetlbfs_options(mounts[i].options, &o) &&
                (o.page_size ? o.page_size : pool_default_size_at("/")) == page_size;
    if (same) reason_add(reason, cap, "%s pages are already mounted at %s", label, s.dir);
    else reason_add(reason, cap, "%s already has a %s mount", s.dir, mounts[i].type);
    free(mounts);
    return same ? 0 : -EBUSY;
  }
  free(mounts);
  bool created = false;
  int rc = pool_make_directories(s.dir, &created);
  if (rc) {
    reason_add(reason, cap, "cannot create %s (%s)", s.dir, strerror(-rc));
    return rc;
  }
  char options[256];
  mount_options(page_size, &s, false, options, sizeof options);
  if (mount("hugetlbfs", s.dir, "hugetlbfs", MS_NOSUID | MS_NODEV, options) != 0) {
    rc = -errno;
    if (created) rmdir(s.dir);
    reason_add(reason, cap, "mounting hugetlbfs (%s) at %s failed (%s)%s", options, s.dir, strerror(-rc),
                  rc == -EPERM ? ": mounting needs root (CAP_SYS_ADMIN)"
                  : rc == -ENOMEM || rc == -ENOSPC ? ": the pool cannot cover min_size" : "");
    return rc;
  }
  return 0;
}

/* ---- persistence -------------------------------------------------------------------------------- */

/* Larger than the biggest buddy block (MAX_PAGE_ORDER 10): the kernel can seldom find them once running. */
static bool is_gigantic(uint64_t page_size) {
  long base = sysconf(_SC_PAGESIZE);
  return page_size > ((uint64_t)(base > 0 ? base : 4096) << 10);
}

static bool sysctl_can_apply(const struct hugify_pool_request *r, uint64_t default_size) {
  return r->node < 0 && r->page_size == default_size && !is_gigantic(r->page_size);
}

char *hugify_pool_sysctl_text(const struct hugify_pool_request *requests, unsigned count, uint64_t default_size) {
  const struct hugify_pool_request *last = NULL;
  for (unsigned i = 0; i < count; i++)
    if (sysctl_can_apply(&requests[i], default_size)) last = &requests[i];
  if (!last) { errno = ENOENT; return NULL; }
  char label[32], *text = NULL;
  format_page_size(default_size, label, sizeof label);
  if (asprintf(&text,
               "# Written by `hugify pool set --persist`: the hugetlb pool of the default page size (%s),\n"
               "# applied at boot by systemd-sysctl. Other sizes and per-node counts are kernel command-line\n"
               "# parameters (hugify prints them).\n"
               "vm.nr_hugepages = %llu\n",
               label, (unsigned long long)last->count) < 0)
    return NULL;
  return text;
}

char *hugify_pool_cmdline_text(const struct hugify_pool_request *requests, unsigned count, uint64_t default_size) {
  size_t cap = 64 + (size_t)count * 64 * 2, used = 0;
  char *text = calloc(1, cap);
  if (!text) return NULL;
  for (unsigned i = 0; i < count; i++) {
    const struct hugify_pool_request *r = &requests[i];
    if (sysctl_can_apply(r, default_size)) continue;
    bool seen = false; /* one parameter pair per size, written where the size first appears */
    for (unsigned j = 0; j < i; j++)
      seen |= requests[j].page_size == r->page_size && !sysctl_can_apply(&requests[j], default_size);
    if (seen) continue;
    /* the last machine-wide request of this size wins; else the per-node ones, the last per node */
    const struct hugify_pool_request *whole = NULL;
    for (unsigned j = i; j < count; j++)
      if (requests[j].page_size == r->page_size && requests[j].node < 0) whole = &requests[j];
    char label[32];
    format_page_size(r->page_size, label, sizeof label);
    used += (size_t)snprintf(text + used, cap - used, "%shugepagesz=%s hugepages=", used ? " " : "", label);
    if (whole) {
      used += (size_t)snprintf(text + used, cap - used, "%llu", (unsigned long long)whole->count);
      continue;
    }
    bool first = true;
    for (unsigned j = i; j < count; j++) {
      if (requests[j].page_size != r->page_size) continue;
      bool later = false;
      for (unsigned k = j + 1; k < count; k++)
        later |= requests[k].page_size == r->page_size && requests[k].node == requests[j].node;
      if (later) continue;
      used += (size_t)snprintf(text + used, cap - used, "%s%d:%llu", first ? "" : ",", requests[j].node,
                               (unsigned long long)requests[j].count);
      first = false;
    }
  }
  return text;
}

/* systemd's path escaping (systemd-escape --path): "/dev/hugepages1G" -> "dev-hugepages1G". */
static void systemd_escape_path(const char *path, char *out, size_t cap) {
  size_t n = 0;
  while (*path == '/') path++;
  if (!*path) { snprintf(out, cap, "-"); return; }
  for (const char *p = path; *p && n + 5 < cap; p++) {
    unsigned char c = (unsigned char)*p;
    if (c == '/') {
      if (p[1] == '/' || p[1] == '\0') continue;
      out[n++] = '-';
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' || c == '_' ||
               (c == '.' && p != path)) {
      out[n++] = (char)c;
    } else {
      n += (size_t)snprintf(out + n, cap - n, "\\x%02x", c);
    }
  }
  out[n] = '\0';
}

/* A value of a unit file setting: systemd expands %-specifiers in Where= and Description=, so '%' is "%%". */
static void systemd_escape_specifiers(const char *text, char *out, size_t cap) {
  size_t n = 0;
  for (const char *p = text; *p && n + 3 < cap; p++) {
    if (*p == '%') out[n++] = '%';
    out[n++] = *p;
  }
  out[n] = '\0';
}

#define SYSTEMD_UNIT_NAME_MAX 255 /* systemd's UNIT_NAME_MAX - 1 */

char *hugify_pool_mount_unit_text(uint64_t page_size, const struct hugify_mount_opts *opts, char *unit_name,
                                  size_t cap) {
  struct mount_settings s;
  mount_settings(page_size, opts, &s);
  if (pool_check_mount_dir(opts && opts->dir ? opts->dir : s.dir, NULL, 0) != 0) { errno = EINVAL; return NULL; }
  char escaped[4 * sizeof s.dir + 8], where[2 * sizeof s.dir], label[32], options[256];
  systemd_escape_path(s.dir, escaped, sizeof escaped);
  if (strlen(escaped) + strlen(".mount") > SYSTEMD_UNIT_NAME_MAX) { errno = ENAMETOOLONG; return NULL; }
  if (unit_name && cap) snprintf(unit_name, cap, "%s.mount", escaped);
  systemd_escape_specifiers(s.dir, where, sizeof where);
  format_page_size(page_size, label, sizeof label);
  mount_options(page_size, &s, true, options, sizeof options);
  char *text = NULL;
  if (asprintf(&text,
               "# Written by `hugify pool mount --persist`: hugetlbfs of %s pages at %s.\n"
               "[Unit]\n"
               "Description=Huge pages file system (%s pages) at %s\n"
               "Documentation=https://docs.kernel.org/admin-guide/mm/hugetlbpage.html\n"
               "DefaultDependencies=no\n"
               "Before=sysinit.target\n"
               "ConditionPathExists=" OS_SYSFS_HUGEPAGES "/hugepages-%llukB\n"
               "ConditionCapability=CAP_SYS_ADMIN\n"
               "\n"
               "[Mount]\n"
               "What=hugetlbfs\n"
               "Where=%s\n"
               "Type=hugetlbfs\n"
               "Options=%s\n"
               "\n"
               "[Install]\n"
               "WantedBy=sysinit.target\n",
               label, s.dir, label, where, (unsigned long long)(page_size >> 10), where, options) < 0)
    return NULL;
  return text;
}
