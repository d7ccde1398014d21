/* reason.c - the reason buffers every result struct carries. */
#include "reason.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void reason_add(char *reason, size_t cap, const char *format, ...) {
  if (!reason || cap == 0) return;
  size_t used = strnlen(reason, cap);
  if (used + 3 >= cap) return;
  if (used) { memcpy(reason + used, "; ", 3); used += 2; }
  va_list args;
  va_start(args, format);
  vsnprintf(reason + used, cap - used, format, args);
  va_end(args);
}
