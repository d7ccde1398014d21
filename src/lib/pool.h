/* SPDX-License-Identifier: MIT */
/* pool.h - hugetlb pools read and set under a root directory: "/" for this machine, or a captured tree
 * (tests/fixtures/pool/...) so that the same code runs on fixtures. The public hugify_pool_* functions are
 * these at "/". */
#ifndef HUGIFY_POOL_H
#define HUGIFY_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hugify.h"

#include "os.h" /* root_path */

/* "2M, 1G": the page sizes of pools, for messages ("none" when there is none). */
void pool_size_list(const struct hugify_pool *pools, unsigned count, char *out, size_t cap);

/* Node ids with a directory under root/sys/devices/system/node, ascending; 0 when there is none. */
int pool_node_ids_at(const char *root, int *ids, int cap);

/* Default huge page size (Hugepagesize of root/proc/meminfo), 0 when unknown. */
uint64_t pool_default_size_at(const char *root);

int pool_list_at(const char *root, struct hugify_pool *pools, unsigned cap);
int pool_read_at(const char *root, uint64_t page_size, struct hugify_pool *out);

/* Memory of each node in bytes (node meminfo MemTotal; on a machine with one node or none, MemTotal of
 * /proc/meminfo, which is right also where node meminfo lags behind lazily initialised memory). Fills
 * memory[] in the order of pool->nodes (one entry when pool->node_count is 0). False when unreadable. */
bool pool_node_memory_at(const char *root, const struct hugify_pool *pool, uint64_t *memory);

/* The plan: what each node is asked to hold (pure). `pools`/`pool_count` are every pool of the machine (to
 * count the memory the other sizes hold), `memory` as pool_node_memory_at gives it. Fills
 * result->{page_size,node,before,requested,node_count,nodes[].before/requested,beyond_memory,reason}.
 * Returns 0, or -EINVAL (unknown size or node; the reason says which are known). */
int pool_plan(const struct hugify_pool *pools, unsigned pool_count, const uint64_t *memory, uint64_t page_size,
              int node, uint64_t count, struct hugify_pool_result *result);

/* 0 when the caller may write the files a pool_set_at of (page_size, node) writes; else -errno and why. */
int pool_check_writable_at(const char *root, uint64_t page_size, int node, char *reason, size_t cap);

/* Several requests as one transaction, in two steps so the caller can check its own files in between:
 * pool_plan_at plans every request (HUGIFY_POOL_DRY_RUN, no privilege needed); then, when it returned 0 and
 * no request is beyond memory, pool_commit_at checks that every file can be written (nothing is written
 * when one cannot) and writes each, reading back what the kernel gave (*written: it got that far). codes[i] is each request's
 * pool_set_at result (-ENOMEM: short, not an error). Both return 0 or the first error (-EINVAL: a bad
 * request), with *failed its index and `reason` why. */
int pool_plan_at(const char *root, const struct hugify_pool_request *requests, unsigned count,
                 struct hugify_pool_result *results, int *codes, bool *beyond_memory, int *failed, char *reason,
                 size_t cap);
int pool_commit_at(const char *root, const struct hugify_pool_request *requests, unsigned count,
                   struct hugify_pool_result *results, int *codes, bool *written, int *failed, char *reason,
                   size_t cap);

int pool_set_at(const char *root, uint64_t page_size, int node, uint64_t count, unsigned flags,
                struct hugify_pool_result *result);

/* A mount point hugify can mount at and write into a systemd unit: absolute, shorter than 1024 bytes, no
 * control characters (a newline would inject unit settings), no trailing blank, no '.'/'..' components.
 * Returns 0, -EINVAL or -ENAMETOOLONG with the reason. */
int pool_check_mount_dir(const char *dir, char *reason, size_t cap);

/* mkdir -p with mode 0755; *created when at least one directory was made. Returns 0 or -errno. */
int pool_make_directories(const char *dir, bool *created);

#endif
