/* SPDX-License-Identifier: MIT */
/* bench_workloads.c - the timed loops of `hugify bench`: random reads, pointer chase, hash lookups,
 * short strings in a hash set. Each one works inside a buffer it is given, so the page kind under test
 * backs all of its data. */
#include <string.h>

#include "bench.h"

/* ---- random numbers ------------------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* splitmix64's finalizer: a bijection on 64-bit values (0 -> 0 only), so mix(i + 1) gives distinct
 * non-zero keys that look random. */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

void bench_rng_seed(struct bench_rng *rng, uint64_t seed) {
  for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(struct bench_rng *r) {
  uint64_t result = rotl(r->s[1] * 5, 7) * 9, t = r->s[1] << 17;
  r->s[2] ^= r->s[0];
  r->s[3] ^= r->s[1];
  r->s[1] ^= r->s[2];
  r->s[0] ^= r->s[3];
  r->s[2] ^= t;
  r->s[3] = rotl(r->s[3], 45);
  return result;
}

static inline uint64_t rng_below(struct bench_rng *r, uint64_t n) {
  return (uint64_t)(((unsigned __int128)rng_next(r) * n) >> 64);
}

uint64_t bench_rng_next(struct bench_rng *rng) { return rng_next(rng); }
uint64_t bench_rng_below(struct bench_rng *rng, uint64_t n) { return rng_below(rng, n); }

static void workload_init(struct workload *w, void *buffer, size_t size, uint64_t seed) {
  memset(w, 0, sizeof *w);
  w->buffer = buffer;
  w->size = size;
  bench_rng_seed(&w->rng, seed);
}

/* ---- random: independent reads ------------------------------------------------------------------- */

static uint64_t random_run(struct workload *w, uint64_t ops) {
  const uint64_t *words = w->buffer;
  uint64_t n = w->count, sum = 0;
  struct bench_rng r = w->rng;
  for (uint64_t i = 0; i < ops; i++) sum += words[rng_below(&r, n)];
  w->rng = r;
  return sum;
}

void workload_random(struct workload *w, void *buffer, size_t size, uint64_t seed) {
  workload_init(w, buffer, size, seed);
  w->count = size / sizeof(uint64_t);
  uint64_t *words = buffer;
  for (uint64_t i = 0; i < w->count; i++) words[i] = i;
  w->run = random_run;
}

/* ---- chase: one random cycle through every line -------------------------------------------------- */

#define LINE 64

static uint64_t chase_run(struct workload *w, uint64_t ops) {
  void *p = w->cursor;
  for (uint64_t i = 0; i < ops; i++) p = *(void **)p;
  w->cursor = p;
  return (uintptr_t)p;
}

void workload_chase(struct workload *w, void *buffer, size_t size, uint64_t seed) {
  workload_init(w, buffer, size, seed);
  char *base = buffer;
  uint64_t n = size / LINE;
  w->count = n;
  for (uint64_t i = 0; i < n; i++) *(void **)(base + i * LINE) = base + i * LINE;
  /* Sattolo: j < i strictly, which turns the shuffle into a single cycle through all n lines. */
  for (uint64_t i = n - 1; i > 0; i--) {
    uint64_t j = rng_below(&w->rng, i);
    void **a = (void **)(base + i * LINE), **b = (void **)(base + j * LINE), *t = *a;
    *a = *b;
    *b = t;
  }
  w->cursor = base;
  w->run = chase_run;
}

/* ---- hash: open addressing, linear probing ------------------------------------------------------- */

struct slot {
  uint64_t key, value;
};

static uint64_t hash_run(struct workload *w, uint64_t ops) {
  const struct slot *table = w->buffer;
  uint64_t sum = 0, mask = w->mask, count = w->count;
  struct bench_rng r = w->rng;
  for (uint64_t i = 0; i < ops; i++) {
    uint64_t key = mix64(rng_below(&r, count) + 1), s = key & mask;
    while (table[s].key != key) s = (s + 1) & mask;
    sum += table[s].value;
  }
  w->rng = r;
  return sum;
}

void workload_hash(struct workload *w, void *buffer, size_t size, uint64_t seed) {
  workload_init(w, buffer, size, seed);
  struct slot *table = buffer;
  uint64_t slots = size / sizeof *table;
  w->mask = slots - 1;
  w->count = slots / 2;
  memset(table, 0, slots * sizeof *table);
  for (uint64_t i = 0; i < w->count; i++) {
    uint64_t key = mix64(i + 1), s = key & w->mask;
    while (table[s].key) s = (s + 1) & w->mask;
    table[s] = (struct slot){key, i};
  }
  w->run = hash_run;
}

/* ---- strings: short strings in a hash set, looked up in shuffled order ----------------------------
 * Layout in the buffer: order[count] (u32 offsets into the arena, shuffled), set[slots] (u32 offsets,
 * 0 = empty), arena (a 0 byte, then each string as a length byte and its characters). */

#define STRING_MIN 8
#define STRING_MAX 19 /* shorter than 20 bytes, as in the seed */

static uint64_t set_slots(uint64_t count) {
  uint64_t slots = 16;
  while (slots < count * 2) slots *= 2;
  return slots;
}

uint64_t strings_footprint(uint64_t count) {
  return count * sizeof(uint32_t) + set_slots(count) * sizeof(uint32_t) + 1 + count * (1 + STRING_MAX);
}

static uint64_t string_hash(const unsigned char *s) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (unsigned i = 0; i <= s[0]; i++) h = (h ^ s[i]) * UINT64_C(0x100000001b3);
  return mix64(h);
}

/* The slot holding a string equal to s, or the empty slot where it would go. */
static uint64_t set_find(const uint32_t *set, uint64_t mask, const unsigned char *arena, const unsigned char *s) {
  uint64_t i = string_hash(s) & mask;
  while (set[i] && memcmp(arena + set[i], s, (size_t)s[0] + 1) != 0) i = (i + 1) & mask;
  return i;
}

static uint64_t strings_run(struct workload *w, uint64_t ops) {
  uint64_t found = 0, position = w->position;
  for (uint64_t i = 0; i < ops; i++) {
    const unsigned char *s = w->arena + w->order[position];
    found += w->set[set_find(w->set, w->mask, w->arena, s)] != 0;
    if (++position == w->count) position = 0;
  }
  w->position = position;
  return found;
}

void workload_strings(struct workload *w, void *buffer, uint64_t count, uint64_t seed) {
  workload_init(w, buffer, 0, seed);
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"; /* 64 */
  uint64_t slots = set_slots(count);
  w->count = count;
  w->mask = slots - 1;
  w->order = buffer;
  w->set = w->order + count;
  w->arena = (unsigned char *)(w->set + slots);
  memset(w->set, 0, slots * sizeof *w->set);
  uint64_t used = 1;
  w->arena[0] = 0;
  for (uint64_t i = 0; i < count; i++) {
    unsigned char *s = w->arena + used;
    uint64_t bits = rng_next(&w->rng);
    s[0] = (unsigned char)(STRING_MIN + (bits & 15) % (STRING_MAX - STRING_MIN + 1));
    bits >>= 4;
    for (unsigned c = 1; c <= s[0]; c++, bits >>= 6) { /* 6 bits a character, 10 characters a draw */
      if (c == 11) bits = rng_next(&w->rng);
      s[c] = (unsigned char)alphabet[bits & 63];
    }
    w->order[i] = (uint32_t)used;
    uint64_t at = set_find(w->set, w->mask, w->arena, s);
    if (!w->set[at]) w->set[at] = (uint32_t)used; /* a repeated string stays in the order, found as the first */
    used += (uint64_t)s[0] + 1;
  }
  for (uint64_t i = count - 1; i > 0; i--) { /* Fisher-Yates */
    uint64_t j = rng_below(&w->rng, i + 1);
    uint32_t t = w->order[i];
    w->order[i] = w->order[j];
    w->order[j] = t;
  }
  w->size = (size_t)((unsigned char *)w->arena + used - (unsigned char *)buffer);
  w->run = strings_run;
}

/* ---- copies ---------------------------------------------------------------------------------------- */

void workload_copy(struct workload *w, const struct workload *from, void *buffer) {
  *w = *from;
  w->buffer = buffer;
  memcpy(buffer, from->buffer, from->size);
  ptrdiff_t delta = (char *)buffer - (char *)from->buffer;
  if (from->run == chase_run) { /* the only workload that stores pointers in its data */
    char *base = buffer;
    for (uint64_t i = 0; i < from->count; i++) *(char **)(base + i * LINE) += delta;
    w->cursor = (char *)from->cursor + delta;
  }
  if (from->run == strings_run) {
    w->order = (uint32_t *)((char *)from->order + delta);
    w->set = (uint32_t *)((char *)from->set + delta);
    w->arena = from->arena + delta;
  }
}
