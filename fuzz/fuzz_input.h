/* SPDX-License-Identifier: MIT */
/* fuzz_input.h - what every target needs to turn libFuzzer's bytes into the parsers' inputs. */
#ifndef HUGIFY_FUZZ_INPUT_H
#define HUGIFY_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The bytes as a NUL-terminated text, as os_read_file returns a file (a NUL inside ends it for the
 * parsers, as it would for a file read from /proc). Caller frees. */
static inline char *fuzz_text(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) abort();
  memcpy(text, data, size);
  text[size] = '\0';
  return text;
}

/* Split the text at its first newline: the first line (a key, a name, an argument) and the rest (the
 * file). Both point into `text`, which is modified. */
static inline const char *fuzz_split_first_line(char *text, const char **rest) {
  char *newline = strchr(text, '\n');
  if (!newline) { *rest = text + strlen(text); return text; }
  *newline = '\0';
  *rest = newline + 1;
  return text;
}

/* Keep a computed value alive, so the compiler cannot drop the call that made it. */
static inline void fuzz_keep(uint64_t value) { __asm__ volatile("" : : "r"(value)); }

#endif
