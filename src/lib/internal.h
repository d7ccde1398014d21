/* internal.h - functions shared between libhugify's own files (not exported). */
#ifndef HUGIFY_INTERNAL_H
#define HUGIFY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hugify.h"

/* Measure a range known to lie inside one mapping of page kind `kind` (as hugify_alloc made it): uses
 * PAGEMAP_SCAN without reading smaps when the kernel has it, else hugify_backing(). */
int backing_measure_mapping(const void *p, size_t size, enum hugify_page_kind kind, struct hugify_backing *out);

#endif
