/* SPDX-License-Identifier: MIT */
#ifndef HUGIFY_ARRAY_H
#define HUGIFY_ARRAY_H
/* One way to grow an array, in the manner of git's ALLOC_GROW: ARRAY_GROW(array, need, cap) makes `array`
 * (a pointer to its first element, NULL at first) hold at least `need` elements, doubling `cap` (a size_t,
 * 0 at first) from ARRAY_GROW_FIRST. Returns 0, or -ENOMEM when realloc fails or the byte count would
 * overflow; `array` and `cap` are then unchanged (still valid, still to be freed). Header-only: the
 * preload compiles no extra file for it. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_GROW_FIRST 16

/* `where` points to the array's pointer (any object pointer type: read and written with memcpy). */
static inline int array_grow(void *where, size_t need, size_t *cap, size_t element) {
  if (need <= *cap) return 0;
  size_t bigger = *cap ? *cap : ARRAY_GROW_FIRST;
  while (bigger < need) {
    if (bigger > SIZE_MAX / 2) return -ENOMEM;
    bigger *= 2;
  }
  if (element && bigger > SIZE_MAX / element) return -ENOMEM;
  void *old, *grown;
  memcpy(&old, where, sizeof old);
  grown = realloc(old, bigger * element);
  if (!grown) return -ENOMEM;
  memcpy(where, &grown, sizeof grown);
  *cap = bigger;
  return 0;
}

#define ARRAY_GROW(array, need, cap) array_grow(&(array), (need), &(cap), sizeof *(array))

#endif
