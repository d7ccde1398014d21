/* SPDX-License-Identifier: MIT */
/* reason.c - the reason buffers every result struct carries. */
#include "reason.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void reason_add(char *reason, size_t cap, const char *format, ...) {
  if (!reason || cap == 0) return;
  size_t used = strnlen(reason, cap);
  if (used + 3 >= cap) return;
  size_t start = used;
  if (used) { memcpy(reason + used, "; ", 3); used += 2; }
  va_list args;
  va_start(args, format);
  int n = vsnprintf(reason + used, cap - used, format, args);
  va_end(args);
  if (n < 0) {
    reason[start] = '\0';
    return;
  }
  if ((size_t)n < cap - used) return;
  /* It did not fit: end at the last blank that leaves room for "...", so no word is cut in two (a path or a
   * number cut short would mislead). A clause with no such blank is left out whole. */
  if (cap < 4) {
    reason[start] = '\0';
    return;
  }
  size_t end = cap - 4;
  while (end > used && reason[end] != ' ') end--;
  if (end <= used) {
    reason[start] = '\0';
    return;
  }
  memcpy(reason + end, "...", 4);
}
