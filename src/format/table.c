/* SPDX-License-Identifier: MIT */
/* table.c - text tables and the small number formats of text output. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "array.h"

void table_init(struct table *t, int columns, const char *const *headers, const bool *right_aligned) {
  memset(t, 0, sizeof *t);
  t->columns = columns > TABLE_MAX_COLUMNS ? TABLE_MAX_COLUMNS : columns;
  for (int c = 0; c < t->columns; c++) {
    t->headers[c] = headers[c];
    t->right[c] = right_aligned ? right_aligned[c] : false;
  }
}

void table_row(struct table *t, ...) {
  if (array_grow(&t->cells, (size_t)t->rows + 1, &t->cap, (size_t)t->columns * sizeof *t->cells) != 0) return;
  va_list args;
  va_start(args, t);
  for (int c = 0; c < t->columns; c++) {
    const char *value = va_arg(args, const char *);
    t->cells[t->rows * t->columns + c] = strdup(value ? value : "");
  }
  va_end(args);
  t->rows++;
}

void table_print(const struct table *t, FILE *out, const char *indent) {
  size_t width[TABLE_MAX_COLUMNS];
  for (int c = 0; c < t->columns; c++) {
    width[c] = strlen(t->headers[c]);
    for (int r = 0; r < t->rows; r++) {
      const char *cell = t->cells[r * t->columns + c];
      size_t length = cell ? strlen(cell) : 0;
      if (length > width[c]) width[c] = length;
    }
  }
  for (int r = -1; r < t->rows; r++) {
    fputs(indent ? indent : "", out);
    for (int c = 0; c < t->columns; c++) {
      const char *cell = r < 0 ? t->headers[c] : t->cells[r * t->columns + c];
      if (!cell) cell = "";
      bool last = c == t->columns - 1;
      if (t->right[c]) fprintf(out, "%*s", (int)width[c], cell);
      else if (last) fputs(cell, out);
      else fprintf(out, "%-*s", (int)width[c], cell);
      if (!last) fputs("  ", out);
    }
    fputc('\n', out);
  }
}

void table_free(struct table *t) {
  for (int i = 0; i < t->rows * t->columns; i++) free(t->cells[i]);
  free(t->cells);
  memset(t, 0, sizeof *t);
}

void format_percent(uint64_t part, uint64_t whole, char *out, size_t cap) {
  if (whole == 0) snprintf(out, cap, "-");
  else snprintf(out, cap, "%.1f%%", 100.0 * (double)part / (double)whole);
}
