/* SPDX-License-Identifier: MIT */
/* format.h - how hugify presents figures: the JSON writer, text tables, percent and fraction formatting.
 * One layer used by every front end (the CLI commands, the preload's exit report, the agent); it sits
 * above the library (src/lib: units.h formats bytes and page sizes, which the library's own messages
 * need) and below the front ends. Nothing here prints messages, parses options or knows a command. */
#ifndef HUGIFY_FORMAT_H
#define HUGIFY_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- JSON writer (streaming; commas, nesting and indentation handled) ----
 * Every document is one object whose first member is "schema": "hugify.<name>/<version>", written by
 * json_begin from its argument (tests/layering.py checks that each such string is in docs/design.md).
 * Strings come out as valid UTF-8 whatever the input: control characters are escaped and every byte that
 * is not part of a well-formed UTF-8 sequence becomes U+FFFD (file names and command lines are bytes, not
 * text). Numbers that are not finite are written as null. */
#define JSON_MAX_DEPTH 32
/* The names (json_writer, json_open_*, json_put_*) stay clear of jansson's (json_object, json_string,
 * ...): a program may write with this and read with jansson. */
struct json_writer {
  FILE *out;
  int depth;
  bool need_comma[JSON_MAX_DEPTH];
  char closer[JSON_MAX_DEPTH];
};
/* Opens the top-level object and writes its first member, "schema": schema ("hugify.status/2"). */
void json_begin(struct json_writer *j, FILE *out, const char *schema);
void json_end(struct json_writer *j);                           /* closes what is open, "}\n", flushes */
void json_open_object(struct json_writer *j, const char *key);  /* key NULL inside arrays */
void json_open_array(struct json_writer *j, const char *key);
void json_close(struct json_writer *j);                         /* closes the innermost object or array */
void json_put_string(struct json_writer *j, const char *key, const char *value); /* NULL -> null */
void json_put_u64(struct json_writer *j, const char *key, uint64_t value);
void json_put_i64(struct json_writer *j, const char *key, int64_t value);
void json_put_double(struct json_writer *j, const char *key, double value); /* NaN, inf -> null */
void json_put_bool(struct json_writer *j, const char *key, bool value);
void json_put_null(struct json_writer *j, const char *key);
/* An address or other 64-bit identity as a string "0x7f12..." (JSON numbers are doubles: 53 bits). */
void json_put_hex(struct json_writer *j, const char *key, uint64_t value);
/* part / whole as a fraction 0..1 (the `_fraction` members); null when whole is 0. */
void json_put_fraction(struct json_writer *j, const char *key, uint64_t part, uint64_t whole);
/* `value` as a JSON string literal (quotes included), escaped as above. */
void json_quote(FILE *out, const char *value);

/* ---- hugify's own figures, written the same way wherever they appear (inspect, the run report) ---- */
struct hugify_usage;
/* key: {"resident_bytes", "base_bytes", "thp_bytes", "hugetlb_2m_bytes", "hugetlb_1g_bytes", "huge_bytes",
 * "huge_fraction", "anonymous_bytes", "anon_thp_bytes"} */
void json_put_usage(struct json_writer *j, const char *key, const struct hugify_usage *usage);
/* key: {"anon_thp_bytes", "shmem_thp_bytes", "file_thp_bytes"} of a struct cgroup_thp (null: not reported). */
struct cgroup_thp;
void json_put_cgroup_thp(struct json_writer *j, const char *key, const struct cgroup_thp *thp);
/* key: {"<reason>": bytes, ...} for every reason of enum hugify_not_huge_reason but "none". */
void json_put_not_huge(struct json_writer *j, const char *key, const uint64_t *not_huge);

/* ---- text tables (column widths from the content; numbers right-aligned) ---- */
#define TABLE_MAX_COLUMNS 16
struct table {
  int columns;
  const char *headers[TABLE_MAX_COLUMNS];
  bool right[TABLE_MAX_COLUMNS];
  char **cells; /* rows * columns, malloc'd copies */
  int rows;
  size_t cap; /* rows the cells have room for */
};
void table_init(struct table *t, int columns, const char *const *headers, const bool *right_aligned);
void table_row(struct table *t, ...); /* exactly `columns` const char * values (NULL prints as "") */
void table_print(const struct table *t, FILE *out, const char *indent);
void table_free(struct table *t);

/* ---- small formatting ---- */
/* "12.5%" (one decimal) of part over whole; "-" when whole is 0. */
void format_percent(uint64_t part, uint64_t whole, char *out, size_t cap);

#endif
