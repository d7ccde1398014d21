/* SPDX-License-Identifier: MIT */
/* json_read.c - JSON reading through jansson (see json_read.h). */
#include "json_read.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "units.h"

static struct json_doc *loaded(json_t *root, const json_error_t *e, char *error, size_t cap) {
  if (!root && error && cap) snprintf(error, cap, "%s (line %d, column %d)", e->text, e->line, e->column);
  return (struct json_doc *)root;
}

struct json_doc *json_doc_read_file(const char *path, char *error, size_t cap) {
  json_error_t e;
  return loaded(json_load_file(path, JSON_REJECT_DUPLICATES, &e), &e, error, cap);
}

struct json_doc *json_doc_read_text(const char *text, char *error, size_t cap) {
  json_error_t e;
  return loaded(json_loads(text, JSON_REJECT_DUPLICATES, &e), &e, error, cap);
}

void json_doc_free(struct json_doc *doc) { json_decref((json_t *)doc); }

static json_t *at_path(const struct json_doc *doc, const char *path) {
  char copy[256];
  if (!doc || snprintf(copy, sizeof copy, "%s", path) >= (int)sizeof copy) return NULL;
  json_t *node = (json_t *)doc;
  for (char *save = NULL, *key = strtok_r(copy, ".", &save); node && key; key = strtok_r(NULL, ".", &save))
    node = json_is_object(node) ? json_object_get(node, key) : NULL;
  return node;
}

bool json_doc_number(const struct json_doc *doc, const char *path, double *value) {
  json_t *node = at_path(doc, path);
  if (!json_is_number(node)) return false;
  *value = json_number_value(node);
  return true;
}

bool json_doc_count(const struct json_doc *doc, const char *path, uint64_t *value) {
  double number;
  return json_doc_number(doc, path, &number) && count_from_double(number, value);
}

bool json_doc_string(const struct json_doc *doc, const char *path, char *out, size_t cap) {
  json_t *node = at_path(doc, path);
  if (!json_is_string(node)) return false;
  snprintf(out, cap, "%s", json_string_value(node));
  return true;
}

bool json_doc_bool(const struct json_doc *doc, const char *path, bool *value) {
  json_t *node = at_path(doc, path);
  if (!json_is_boolean(node)) return false;
  *value = json_is_true(node);
  return true;
}

size_t json_doc_array_size(const struct json_doc *doc, const char *path) {
  json_t *node = at_path(doc, path);
  return json_is_array(node) ? json_array_size(node) : 0;
}

const struct json_doc *json_doc_array_item(const struct json_doc *doc, const char *path, size_t index) {
  json_t *node = at_path(doc, path);
  return json_is_array(node) ? (const struct json_doc *)json_array_get(node, index) : NULL;
}
