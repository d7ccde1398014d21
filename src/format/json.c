/* SPDX-License-Identifier: MIT */
/* json.c - the JSON writer: one document per call sequence, always valid JSON (RFC 8259). */
#include <math.h>
#include <string.h>

#include "format.h"

/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong forms, no surrogates, nothing
 * above U+10FFFF), or 0 when the bytes there are not one. */
static size_t utf8_sequence(const unsigned char *p) {
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  size_t length;
  unsigned char low = 0x80, high = 0xbf; /* the allowed range of the second byte */
  if (c >= 0xc2 && c <= 0xdf) length = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    length = 3;
    if (c == 0xe0) low = 0xa0;        /* overlong */
    else if (c == 0xed) high = 0x9f;  /* surrogates */
  } else if (c >= 0xf0 && c <= 0xf4) {
    length = 4;
    if (c == 0xf0) low = 0x90;        /* overlong */
    else if (c == 0xf4) high = 0x8f;  /* above U+10FFFF */
  } else {
    return 0;
  }
  if (p[1] < low || p[1] > high) return 0;
  for (size_t i = 2; i < length; i++)
    if (p[i] < 0x80 || p[i] > 0xbf) return 0; /* also stops at the terminating NUL */
  return length;
}

void json_quote(FILE *out, const char *value) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)value; *p;) {
    switch (*p) {
    case '"': fputs("\\\"", out); p++; continue;
    case '\\': fputs("\\\\", out); p++; continue;
    case '\n': fputs("\\n", out); p++; continue;
    case '\t': fputs("\\t", out); p++; continue;
    case '\r': fputs("\\r", out); p++; continue;
    default: break;
    }
    if (*p < 0x20) {
      fprintf(out, "\\u%04x", *p);
      p++;
      continue;
    }
    size_t length = utf8_sequence(p);
    if (length == 0) {
      fputs("\\ufffd", out); /* one replacement character per byte that is not UTF-8 */
      p++;
      continue;
    }
    fwrite(p, 1, length, out);
    p += length;
  }
  fputc('"', out);
}

static void json_indent(struct json_writer *j) {
  fputc('\n', j->out);
  for (int i = 0; i < j->depth; i++) fputs("  ", j->out);
}

static void json_key(struct json_writer *j, const char *key) {
  if (j->need_comma[j->depth]) fputc(',', j->out);
  j->need_comma[j->depth] = true;
  json_indent(j);
  if (key) {
    json_quote(j->out, key);
    fputs(": ", j->out);
  }
}

void json_begin(struct json_writer *j, FILE *out, const char *schema) {
  memset(j, 0, sizeof *j);
  j->out = out;
  fputc('{', out);
  j->depth = 1;
  json_put_string(j, "schema", schema);
}

void json_end(struct json_writer *j) {
  while (j->depth > 1) json_close(j);
  j->depth = 0;
  fputs("\n}\n", j->out);
  fflush(j->out);
}

static void json_open(struct json_writer *j, const char *key, char bracket) {
  json_key(j, key);
  fputc(bracket, j->out);
  if (j->depth + 1 < JSON_MAX_DEPTH) j->depth++;
  j->need_comma[j->depth] = false;
  j->closer[j->depth] = bracket == '{' ? '}' : ']';
}

void json_open_object(struct json_writer *j, const char *key) { json_open(j, key, '{'); }
void json_open_array(struct json_writer *j, const char *key) { json_open(j, key, '['); }

void json_close(struct json_writer *j) {
  if (j->depth <= 1) return; /* the top-level object is closed by json_end */
  bool had_items = j->need_comma[j->depth];
  char closer = j->closer[j->depth];
  j->depth--;
  if (had_items) json_indent(j);
  fputc(closer, j->out);
}

void json_put_string(struct json_writer *j, const char *key, const char *value) {
  json_key(j, key);
  if (value) json_quote(j->out, value);
  else fputs("null", j->out);
}

void json_put_u64(struct json_writer *j, const char *key, uint64_t value) {
  json_key(j, key);
  fprintf(j->out, "%llu", (unsigned long long)value);
}

void json_put_i64(struct json_writer *j, const char *key, int64_t value) {
  json_key(j, key);
  fprintf(j->out, "%lld", (long long)value);
}

void json_put_double(struct json_writer *j, const char *key, double value) {
  json_key(j, key);
  if (isfinite(value)) fprintf(j->out, "%.6g", value);
  else fputs("null", j->out);
}

void json_put_bool(struct json_writer *j, const char *key, bool value) {
  json_key(j, key);
  fputs(value ? "true" : "false", j->out);
}

void json_put_null(struct json_writer *j, const char *key) {
  json_key(j, key);
  fputs("null", j->out);
}

void json_put_hex(struct json_writer *j, const char *key, uint64_t value) {
  char text[24];
  snprintf(text, sizeof text, "0x%llx", (unsigned long long)value);
  json_put_string(j, key, text);
}

void json_put_fraction(struct json_writer *j, const char *key, uint64_t part, uint64_t whole) {
  if (whole) json_put_double(j, key, (double)part / (double)whole);
  else json_put_null(j, key);
}
