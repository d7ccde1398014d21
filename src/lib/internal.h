/* SPDX-License-Identifier: MIT */
/* internal.h - functions shared between libhugify's own files (not exported). */
#ifndef HUGIFY_INTERNAL_H
#define HUGIFY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hugify.h"

/* Measure a range known to lie inside one mapping of page kind `kind` (as hugify_alloc made it): uses
 * PAGEMAP_SCAN without reading smaps when the kernel has it, else hugify_measure_backing(). */
int backing_measure_mapping(const void *p, size_t size, enum hugify_page_kind kind, struct hugify_backing *out);

/* A THP mapping just faulted in (populated, or written by a copy): measure it; when part of what is resident
 * is not on huge pages and the kernel has MADV_COLLAPSE, collapse it and measure again. Returns 1 when the
 * collapse was asked for, else 0. */
int backing_measure_collapse_measure(void *p, size_t size, struct hugify_backing *out);

/* TEST ONLY: make step `step` (enum hugify_text_step) of hugify_remap_text fail for every segment from the
 * next call on; 0 turns it off. Every step before HUGIFY_TEXT_STEP_SWAP leaves the original code untouched.
 * Returns 0, or -EINVAL for a step out of range. The preload sets it from HUGIFY_TEXT_FAIL_STEP. */
int text_inject_failure(int step);

#endif
