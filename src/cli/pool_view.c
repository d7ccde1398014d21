/* SPDX-License-Identifier: MIT */
/* pool_view.c - the pool and mount tables, as text and JSON. */
#include "pool_view.h"

#include <string.h>

#include "units.h"

void view_json_known(struct json_writer *j, const char *key, uint64_t value) {
  if (value == STATUS_UNKNOWN) json_put_null(j, key);
  else json_put_u64(j, key, value);
}

const char *view_number(uint64_t value, char *buf, size_t cap) {
  if (value == STATUS_UNKNOWN) snprintf(buf, cap, "?");
  else snprintf(buf, cap, "%llu", (unsigned long long)value);
  return buf;
}

void view_pool_table(FILE *out, const struct hugify_pool *pools, unsigned count, const char *indent) {
  static const char *const headers[] = {"size", "node", "total", "free", "reserved", "surplus", "overcommit",
                                        "pool bytes", "free bytes"};
  static const bool right[] = {false, false, true, true, true, true, true, true, true};
  struct table t;
  table_init(&t, 9, headers, right);
  for (unsigned i = 0; i < count; i++) {
    const struct hugify_pool *p = &pools[i];
    const struct hugify_hugetlb_size *g = &p->global;
    char label[40], total[24], free_pages[24], reserved[24], surplus[24], overcommit[24], bytes[32], free_bytes[32];
    format_page_size(g->page_size, label, sizeof label);
    if (p->is_default) strncat(label, " (default)", sizeof label - strlen(label) - 1);
    snprintf(total, sizeof total, "%llu", (unsigned long long)g->total);
    snprintf(free_pages, sizeof free_pages, "%llu", (unsigned long long)g->free);
    snprintf(reserved, sizeof reserved, "%llu", (unsigned long long)g->reserved);
    snprintf(surplus, sizeof surplus, "%llu", (unsigned long long)g->surplus);
    snprintf(overcommit, sizeof overcommit, "%llu", (unsigned long long)g->overcommit);
    format_bytes(g->total * g->page_size, bytes, sizeof bytes);
    format_bytes(g->free * g->page_size, free_bytes, sizeof free_bytes);
    table_row(&t, label, "all", total, free_pages, reserved, surplus, overcommit, bytes, free_bytes);
    if (p->node_count < 2) continue;
    for (unsigned n = 0; n < p->node_count; n++) {
      const struct hugify_pool_node *node = &p->nodes[n];
      char id[16];
      snprintf(id, sizeof id, "%d", node->node);
      snprintf(total, sizeof total, "%llu", (unsigned long long)node->total);
      snprintf(free_pages, sizeof free_pages, "%llu", (unsigned long long)node->free);
      snprintf(surplus, sizeof surplus, "%llu", (unsigned long long)node->surplus);
      format_bytes(node->total * g->page_size, bytes, sizeof bytes);
      format_bytes(node->free * g->page_size, free_bytes, sizeof free_bytes);
      table_row(&t, "", id, total, free_pages, "-", surplus, "-", bytes, free_bytes);
    }
  }
  table_print(&t, out, indent);
  table_free(&t);
}

void view_pool_json(struct json_writer *j, const char *key, const struct hugify_pool *pools, unsigned count) {
  json_open_array(j, key);
  for (unsigned i = 0; i < count; i++) {
    const struct hugify_pool *p = &pools[i];
    char label[32];
    format_page_size(p->global.page_size, label, sizeof label);
    json_open_object(j, NULL);
    json_put_u64(j, "page_size_bytes", p->global.page_size);
    json_put_string(j, "label", label);
    json_put_bool(j, "default", p->is_default);
    json_put_u64(j, "total", p->global.total);
    json_put_u64(j, "free", p->global.free);
    json_put_u64(j, "reserved", p->global.reserved);
    json_put_u64(j, "surplus", p->global.surplus);
    json_put_u64(j, "overcommit", p->global.overcommit);
    json_put_u64(j, "total_bytes", p->global.total * p->global.page_size);
    json_put_u64(j, "free_bytes", p->global.free * p->global.page_size);
    json_open_array(j, "nodes");
    for (unsigned n = 0; n < p->node_count; n++) {
      json_open_object(j, NULL);
      json_put_i64(j, "node", p->nodes[n].node);
      json_put_u64(j, "total", p->nodes[n].total);
      json_put_u64(j, "free", p->nodes[n].free);
      json_put_u64(j, "surplus", p->nodes[n].surplus);
      json_close(j);
    }
    json_close(j);
    json_close(j);
  }
  json_close(j);
}

void view_mount_table(FILE *out, const struct status_snapshot *s, const char *indent) {
  if (s->mount_count == 0) {
    fprintf(out, "%s(no hugetlbfs mounted)\n", indent);
    return;
  }
  static const char *const headers[] = {"path", "page size", "size limit", "min size", "mode", "uid", "gid"};
  static const bool right[] = {false, false, true, true, false, true, true};
  struct table t;
  table_init(&t, 7, headers, right);
  for (unsigned i = 0; i < s->mount_count; i++) {
    const struct status_mount *m = &s->mounts[i];
    char label[32], size[32] = "none", min[32] = "none", mode[16], uid[16], gid[16];
    format_page_size(m->page_size, label, sizeof label);
    if (m->options.size) format_bytes(m->options.size, size, sizeof size);
    if (m->options.min_size) format_bytes(m->options.min_size, min, sizeof min);
    snprintf(mode, sizeof mode, "%04o", m->options.mode);
    snprintf(uid, sizeof uid, "%u", (unsigned)m->options.uid);
    snprintf(gid, sizeof gid, "%u", (unsigned)m->options.gid);
    table_row(&t, m->path, label, size, min, mode, uid, gid);
  }
  table_print(&t, out, indent);
  table_free(&t);
}

void view_mount_json(struct json_writer *j, const char *key, const struct status_snapshot *s) {
  json_open_array(j, key);
  for (unsigned i = 0; i < s->mount_count; i++) {
    const struct status_mount *m = &s->mounts[i];
    char mode[16];
    snprintf(mode, sizeof mode, "%04o", m->options.mode);
    json_open_object(j, NULL);
    json_put_string(j, "path", m->path);
    json_put_u64(j, "page_size_bytes", m->page_size);
    if (m->options.size) json_put_u64(j, "size_limit_bytes", m->options.size);
    else json_put_null(j, "size_limit_bytes");
    if (m->options.min_size) json_put_u64(j, "min_size_bytes", m->options.min_size);
    else json_put_null(j, "min_size_bytes");
    json_put_string(j, "mode", mode);
    json_put_u64(j, "uid", m->options.uid);
    json_put_u64(j, "gid", m->options.gid);
    json_put_bool(j, "read_only", m->options.read_only);
    json_close(j);
  }
  json_close(j);
}
