/* SPDX-License-Identifier: MIT */
/* Run reports read back: `hugify run --report` reads every process's report from its private directory
 * (a program of the tree can write anything there) and sums them (src/cli/run/run_tree.c); `hugify check`
 * reads the tree report (src/cli/json_read.c). The input is written as two reports of one tree; reading,
 * summing and writing the tree report, as JSON and as a table, must survive any bytes, and the JSON
 * written must load in jansson. The same bytes go through json_doc and check's lookups. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "json_read.h"
#include "run/run_tree.h"

static char dir[] = "/tmp/hugify-fuzz-run-report.XXXXXX";

static void write_report(const char *name, const uint8_t *data, size_t size) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *out = fopen(path, "we");
  if (!out) abort();
  if (size && fwrite(data, 1, size, out) != size) abort();
  fclose(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int made;
  if (!made) {
    if (!mkdtemp(dir)) abort();
    made = 1;
  }
  write_report("process.json", data, size);
  write_report("process.json.2", data, size);
  struct run_tree tree;
  char reason[256];
  if (run_tree_read(dir, &tree, reason, sizeof reason) != 0) abort();
  char *document = NULL;
  size_t length = 0;
  FILE *out = open_memstream(&document, &length);
  if (!out) abort();
  run_tree_write_json(out, &tree, "fuzz", 0);
  fclose(out);
  json_error_t error;
  json_t *root = json_loadb(document, length, 0, &error);
  if (!root) {
    fprintf(stderr, "the tree report is not valid JSON: %s\n%s\n", error.text, document);
    abort();
  }
  json_decref(root);
  free(document);
  FILE *null = fopen("/dev/null", "we");
  run_tree_write_text(null, &tree, "fuzz");
  fclose(null);
  run_tree_free(&tree);

  char *text = fuzz_text(data, size);
  struct json_doc *doc = json_doc_read_text(text, NULL, 0);
  if (doc) {
    double value;
    char string[64];
    json_doc_number(doc, "peak.allocated.huge_bytes", &value);
    json_doc_number(doc, "largest_process.peak_memory_bytes", &value);
    json_doc_number(doc, "classes.heap.resident_bytes", &value);
    uint64_t count;
    if (json_doc_count(doc, "peak_memory_bytes", &count) && count > INT64_MAX) abort();
    json_doc_string(doc, "schema", string, sizeof string);
    json_doc_free(doc);
  }
  free(text);
  return 0;
}
