/* SPDX-License-Identifier: MIT */
/* preload_c23.c - the glibc preload's own C23 names. With _GNU_SOURCE, glibc 2.38 and later (Debian 13's
 * 2.41) redirect strtol, strtoul, strtoull and sscanf to __isoc23_* (C23's binary "0b" prefix), names only
 * glibc 2.38+ has: musl's loader, which also loads this preload under `hugify env`'s environment, then
 * refused every musl program ("Error relocating libhugify-preload.so: __isoc23_strtoul: symbol not found",
 * exit 127). Defined here, hidden, in a file compiled without _GNU_SOURCE (so the calls below are the
 * plain C11 functions every libc has): the preload's references bind to these, and the program's own
 * __isoc23_* calls still go to glibc. Nothing hugify parses is written in binary. */
#undef _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#if defined __GLIBC__ && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 38))
#define HIDDEN __attribute__((visibility("hidden")))
HIDDEN long __isoc23_strtol(const char *text, char **end, int base);
HIDDEN unsigned long __isoc23_strtoul(const char *text, char **end, int base);
HIDDEN unsigned long long __isoc23_strtoull(const char *text, char **end, int base);
HIDDEN int __isoc23_sscanf(const char *text, const char *format, ...);

long __isoc23_strtol(const char *text, char **end, int base) { return strtol(text, end, base); }
unsigned long __isoc23_strtoul(const char *text, char **end, int base) { return strtoul(text, end, base); }
unsigned long long __isoc23_strtoull(const char *text, char **end, int base) { return strtoull(text, end, base); }
int __isoc23_sscanf(const char *text, const char *format, ...) {
  va_list arguments;
  va_start(arguments, format);
  int count = vsscanf(text, format, arguments);
  va_end(arguments);
  return count;
}
#endif
