/* SPDX-License-Identifier: MIT */
/* units.c - sizes as people write them, and back. */
#include "units.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The decimal digits at *text (at least one) as a number; *text moves past them. False on overflow. */
static bool leading_digits(const char **text, uint64_t *value) {
  const char *p = *text;
  if (!p || !isdigit((unsigned char)*p)) return false;
  uint64_t v = 0;
  for (; isdigit((unsigned char)*p); p++) {
    unsigned digit = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *text = p;
  *value = v;
  return true;
}

bool parse_count(const char *text, uint64_t low, uint64_t high, uint64_t *value) {
  uint64_t v;
  if (!leading_digits(&text, &v) || *text || v < low || v > high) return false;
  *value = v;
  return true;
}

bool parse_decimal(const char *text, double low, double high, double *value) {
  if (!text) return false;
  const char *p = text;
  size_t digits = 0;
  for (; isdigit((unsigned char)*p); p++) digits++;
  if (*p == '.')
    for (p++; isdigit((unsigned char)*p); p++) digits++;
  if (digits == 0) return false;
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (!isdigit((unsigned char)*p)) return false;
    while (isdigit((unsigned char)*p)) p++;
  }
  if (*p) return false;
  char *end;
  double v = strtod(text, &end); /* the syntax is checked above: no sign, blank, hex, inf or nan gets here */
  if (end != p || !isfinite(v) || !(v >= low && v <= high)) return false;
  *value = v;
  return true;
}

bool words_equal(const char *a, const char *b) {
  for (;; a++, b++) {
    unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
    if (x >= 'A' && x <= 'Z') x = (unsigned char)(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = (unsigned char)(y - 'A' + 'a');
    if (x != y) return false;
    if (x == '\0') return true;
  }
}

bool version_at_least(const char *text, uint64_t major, uint64_t minor) {
  uint64_t have_major, have_minor;
  if (!leading_digits(&text, &have_major) || *text++ != '.' || !leading_digits(&text, &have_minor)) return false;
  return have_major > major || (have_major == major && have_minor >= minor);
}

bool count_from_double(double value, uint64_t *count) {
  if (!(value >= 0 && value < 0x1p63)) return false;
  *count = (uint64_t)value;
  return true;
}

bool parse_size(const char *text, uint64_t *bytes) {
  uint64_t v;
  if (!leading_digits(&text, &v)) return false;
  static const struct { const char *suffix; unsigned shift; } units[] = {
      {"", 0}, {"b", 0}, {"k", 10}, {"kb", 10}, {"kib", 10}, {"m", 20}, {"mb", 20}, {"mib", 20},
      {"g", 30}, {"gb", 30}, {"gib", 30}, {"t", 40}, {"tb", 40}, {"tib", 40},
  };
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (!words_equal(text, units[i].suffix)) continue;
    if (units[i].shift && v > (UINT64_MAX >> units[i].shift)) return false;
    *bytes = v << units[i].shift;
    return true;
  }
  return false;
}

static const char *const unit_names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};

void format_bytes(uint64_t bytes, char *out, size_t cap) {
  unsigned unit = 0;
  double value = (double)bytes;
  while (value >= 1024 && unit + 1 < sizeof unit_names / sizeof unit_names[0]) { value /= 1024; unit++; }
  if (unit == 0 || value == (double)(uint64_t)value) snprintf(out, cap, "%.0f %s", value, unit_names[unit]);
  else snprintf(out, cap, "%.1f %s", value, unit_names[unit]);
}

void format_page_size(uint64_t bytes, char *out, size_t cap) {
  static const char letters[] = "BKMGT";
  unsigned unit = 0;
  while (unit < 4 && bytes >= 1024 && bytes % 1024 == 0) { bytes /= 1024; unit++; }
  if (unit == 0) snprintf(out, cap, "%lluB", (unsigned long long)bytes);
  else snprintf(out, cap, "%llu%c", (unsigned long long)bytes, letters[unit]);
}
