/* units.h - sizes as people write them ("2M", "2MB", "2048kB", "1G", "8GiB") and back. */
#ifndef HUGIFY_UNITS_H
#define HUGIFY_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Binary units (K = 1024). Accepts digits followed by one of: "", B, k, K, kB, KB, KiB, M, MB, MiB, G,
 * GB, GiB, T, TB, TiB (case-insensitive). Plain digits are bytes. False on anything else or overflow. */
bool parse_size(const char *text, uint64_t *bytes);
/* "2 MiB", "1 GiB", "512 KiB", "17 B", "1.5 GiB" (one decimal when not whole). */
void format_bytes(uint64_t bytes, char *out, size_t cap);
/* "2M", "1G", "64K": the short page-size label used in commands and sysfs-like places. */
void format_page_size(uint64_t bytes, char *out, size_t cap);

#endif
