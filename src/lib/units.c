/* units.c - sizes as people write them, and back. */
#include "units.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

bool parse_size(const char *text, uint64_t *bytes) {
  if (!text || !isdigit((unsigned char)*text)) return false;
  uint64_t v = 0;
  for (; isdigit((unsigned char)*text); text++) {
    unsigned digit = (unsigned)(*text - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  static const struct { const char *suffix; unsigned shift; } units[] = {
      {"", 0}, {"b", 0}, {"k", 10}, {"kb", 10}, {"kib", 10}, {"m", 20}, {"mb", 20}, {"mib", 20},
      {"g", 30}, {"gb", 30}, {"gib", 30}, {"t", 40}, {"tb", 40}, {"tib", 40},
  };
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcasecmp(text, units[i].suffix) != 0) continue;
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
