/* SPDX-License-Identifier: MIT */
/* JSON: what hugify writes is read back with jansson (run reports, `--json` of every command), so the
 * writer (src/format/json.c) must make valid JSON of any bytes — file names and command lines are bytes,
 * not text. The input becomes keys and string values (split at NUL bytes); jansson must accept the
 * document, and text that was valid UTF-8 must come back unchanged. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "fuzz_input.h"

/* Whether the bytes are valid UTF-8 by jansson's own rule (a JSON string of them loads). */
static bool is_utf8(const char *text) {
  json_t *value = json_string(text);
  bool valid = value != NULL;
  json_decref(value);
  return valid;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_text(data, size);
  /* pieces: the text cut at each NUL byte of the input */
  const char *pieces[16];
  size_t count = 0;
  for (size_t at = 0; at <= size && count < 16; at += strlen(text + at) + 1) pieces[count++] = text + at;

  char *document = NULL;
  size_t length = 0;
  FILE *out = open_memstream(&document, &length);
  if (!out) abort();
  struct json_writer writer;
  json_begin(&writer, out, "hugify.fuzz/1");
  json_put_string(&writer, "value", pieces[0]);
  json_open_array(&writer, "pieces");
  for (size_t i = 0; i < count; i++) json_put_string(&writer, NULL, pieces[i]);
  json_close(&writer);
  json_open_object(&writer, "keyed");
  for (size_t i = 1; i < count; i++) json_put_u64(&writer, pieces[i], i);
  json_close(&writer);
  json_end(&writer);
  fclose(out);

  json_error_t error;
  json_t *root = json_loadb(document, length, 0, &error); /* pieces may repeat as keys */
  if (!root) {
    fprintf(stderr, "jansson rejects the writer's output: %s (line %d, column %d)\n%s\n", error.text, error.line,
            error.column, document);
    abort();
  }
  const char *value = json_string_value(json_object_get(root, "value"));
  if (!value) abort();
  if (is_utf8(pieces[0]) && strcmp(value, pieces[0]) != 0) {
    fprintf(stderr, "valid UTF-8 changed on its way through the writer\n");
    abort();
  }
  if (json_array_size(json_object_get(root, "pieces")) != count) abort();
  json_decref(root);
  free(document);
  free(text);
  return 0;
}
