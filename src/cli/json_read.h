/* SPDX-License-Identifier: MIT */
/* json_read.h - reading the JSON hugify gets back (the preload's run reports, the bench programs' result
 * lines), through jansson. Behind these few calls so that no file meets both jansson's names and the
 * JSON writer's (json_object, json_string, ... exist in both). */
#ifndef HUGIFY_CLI_JSON_READ_H
#define HUGIFY_CLI_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_doc; /* a parsed document */

/* Parse a file / a string (strict RFC 8259, duplicate keys refused). NULL on error, with jansson's message
 * and line:column in `error` (which may be NULL). */
struct json_doc *json_doc_read_file(const char *path, char *error, size_t cap);
struct json_doc *json_doc_read_text(const char *text, char *error, size_t cap);
void json_doc_free(struct json_doc *doc);

/* The number / string at a dotted path of object keys ("heap.huge_bytes"); false when absent or of another
 * type. */
bool json_doc_number(const struct json_doc *doc, const char *path, double *value);
bool json_doc_string(const struct json_doc *doc, const char *path, char *out, size_t cap);
/* The number at a dotted path as a count (count_from_double): false when absent, of another type, negative or
 * past 2^63. */
bool json_doc_count(const struct json_doc *doc, const char *path, uint64_t *value);
bool json_doc_bool(const struct json_doc *doc, const char *path, bool *value);
/* The array at a dotted path: its length (0 when absent or not an array), and its item `index` (an object
 * to read with the calls above; borrowed from `doc`, NULL when out of range). */
size_t json_doc_array_size(const struct json_doc *doc, const char *path);
const struct json_doc *json_doc_array_item(const struct json_doc *doc, const char *path, size_t index);

#endif
