/* SPDX-License-Identifier: MIT */
/* reason.h - the reason buffers every result struct carries (HUGIFY_REASON_MAX bytes, "; "-separated
 * clauses). Below every other library file: it uses none of them. */
#ifndef HUGIFY_REASON_H
#define HUGIFY_REASON_H

#include <stddef.h>

/* Append printf-formatted text to a reason buffer, separated by "; " from what is there. Text that does not
 * fit ends at a blank with "..." (never in the middle of a word); a clause with no blank to end at is left
 * out. */
void reason_add(char *reason, size_t cap, const char *format, ...) __attribute__((format(printf, 3, 4)));

#endif
