/* SPDX-License-Identifier: MIT */
/* units.h - sizes, counts and decimal numbers as people write them ("2M", "2MB", "2048kB", "1G", "8GiB";
 * "12"; "0.5") and sizes back. Pure functions, fuzzed (fuzz/values.c). */
#ifndef HUGIFY_UNITS_H
#define HUGIFY_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Binary units (K = 1024). Accepts digits followed by one of: "", B, k, K, kB, KB, KiB, M, MB, MiB, G,
 * GB, GiB, T, TB, TiB (case-insensitive). Plain digits are bytes. False on anything else or overflow. */
bool parse_size(const char *text, uint64_t *bytes);
/* A count as people write it on a command line or in a config file: decimal digits only (no sign, blank
 * or base prefix), from low to high inclusive. False otherwise, *value untouched. */
bool parse_count(const char *text, uint64_t low, uint64_t high, uint64_t *value);
/* A decimal number (seconds, percentages): digits with at most one '.', and an optional exponent ("0.5",
 * "10", "2e-3"); no sign, blank, hex, inf or nan; from low to high inclusive. False otherwise. */
bool parse_decimal(const char *text, double low, double high, double *value);
/* Whether two words are equal ignoring the case of ASCII letters: every parser's word comparison (suffixes,
 * modes, yes/no). Never the locale's (strcasecmp consults it: a Turkish locale folds 'I' differently, and its
 * first call in a process faults in libc's case tables, a cost the preload's start does not need). */
bool words_equal(const char *a, const char *b);
/* Whether a release written "MAJOR.MINOR[anything]" ("2.38", "2.36.9", "6.18.0-rc1") is at least MAJOR.MINOR.
 * False when the text does not start that way. */
bool version_at_least(const char *text, uint64_t major, uint64_t minor);
/* A count (bytes, pages, a pid) read back from JSON, where every number is a double: true when `value` lies in
 * [0, 2^63), with its whole part in *count; false otherwise (negative, too large, or a NaN), *count untouched.
 * Converting a double outside an integer type's range is undefined, and a report can hold any number. */
bool count_from_double(double value, uint64_t *count);
/* "2 MiB", "1 GiB", "512 KiB", "17 B", "1.5 GiB" (one decimal when not whole). */
void format_bytes(uint64_t bytes, char *out, size_t cap);
/* "2M", "1G", "64K": the short page-size label used in commands and sysfs-like places. */
void format_page_size(uint64_t bytes, char *out, size_t cap);

#endif
