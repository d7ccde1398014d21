/* SPDX-License-Identifier: MIT */
/* bench_plan.c - what `hugify bench` measures: the experiments (their names, titles and units) and the plan
 * of working-set sizes for each, from which the timing engine sizes its buffers. The other files of the
 * bench call it; it calls none of them. */
#include <stdint.h>

#include "bench_run.h"

const struct experiment_info experiment_info[EXP_COUNT] = {
    {"random", "random: independent 8-byte reads", "ns per read"},
    {"chase", "chase: dependent loads around a random cycle", "ns per load"},
    {"touch", "touch: first touch of the working set", "ns per 4 KiB"},
    {"hash", "hash: open-addressing lookups", "ns per lookup"},
    {"strings", "strings: short strings in a hash set, shuffled lookups", "ns per lookup"},
    {"absl", "absl: reserve + try_emplace into absl::flat_hash_map (the seed: 10 M)", "ns per insert"},
};

static void plan_sizes(struct bench *b, enum experiment e, uint64_t largest) {
  int n = 0;
  uint64_t top = MIN_SIZE;
  while (top * 2 <= largest) top *= 2;
  for (uint64_t size = MIN_SIZE; size <= top && n < 39; size <<= b->octaves) b->items[e][n++] = (struct item){size, 0};
  if (b->items[e][n - 1].size != top) b->items[e][n++] = (struct item){top, 0};
  b->item_count[e] = n;
}

/* The seed's 10 M, 30 M and 60 M strings, scaled down together until the largest fits. */
static void plan_strings(struct bench *b) {
  static const double seed_counts[] = {10e6, 30e6, 60e6};
  double scale = 1.0;
  while (strings_footprint((uint64_t)(seed_counts[2] * scale)) > b->max_size && scale > 1e-6) scale *= 0.9;
  int n = 0;
  for (int i = 0; i < 3; i++) {
    uint64_t count = (uint64_t)(seed_counts[i] * scale);
    if (count < 1000) continue;
    b->items[EXP_STRINGS][n++] = (struct item){strings_footprint(count), count};
  }
  b->item_count[EXP_STRINGS] = n;
}

void plan_experiments(struct bench *b) {
  plan_sizes(b, EXP_RANDOM, b->max_size);
  plan_sizes(b, EXP_CHASE, b->max_size);
  plan_sizes(b, EXP_HASH, b->max_size < HASH_MAX_SIZE ? b->max_size : HASH_MAX_SIZE);
  plan_strings(b);
  b->items[EXP_TOUCH][0] = (struct item){b->max_size, 0};
  b->item_count[EXP_TOUCH] = 1;
}

/* Bytes the kind's buffer must hold for every planned measurement but the first touch. */
uint64_t buffer_wanted(const struct bench *b) {
  uint64_t want = 0;
  for (int e = 0; e < EXP_COUNT; e++) {
    if (!b->run[e] || e == EXP_TOUCH || e == EXP_ABSL) continue;
    for (int i = 0; i < b->item_count[e]; i++)
      if (b->items[e][i].size > want) want = b->items[e][i].size;
  }
  return want;
}
