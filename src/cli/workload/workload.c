/* SPDX-License-Identifier: MIT */
/* hugify-workload - the bundled TLB-bound workload that `hugify check` runs when given no command.
 *
 * It mallocs one working set (plain malloc, so `hugify run --heap ...` changes how it is backed), writes
 * all of it, then follows a chain of dependent loads from page to page: each load reads one 64-byte line
 * of a 4 KiB page chosen by the value the previous load returned. The lines read are 1/64 of the working
 * set and stay in the CPU caches, while every load lands on another page: on 4 KiB pages nearly every load
 * misses the TLB and waits for a page walk; on 2 MiB pages 64 MiB is 32 TLB entries and none does. So the
 * time goes to address translation, which is what huge pages change. --size 64K (16 pages) fits in the
 * TLB with either page size: huge pages cannot help it. Prints one line of figures to stdout. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "measure.h"
#include "units.h"

#define PAGE 4096u /* the base page the chain hops between */
#define LINE 64u

static const char usage[] =
    "usage: hugify-workload [--size SIZE] [--loads N]\n"
    "\n"
    "TLB-bound workload for `hugify check`: malloc SIZE bytes (default 64M, rounded down to a power of\n"
    "two), write them, then follow N dependent loads (default 10000000), each to one cache line of a\n"
    "4 KiB page picked by the previous load. The lines fit in the caches, the pages overflow the TLB: on\n"
    "4 KiB pages the time is page walks. --size 64K fits in the TLB: huge pages cannot help it.\n";

static int bad_usage(const char *format, const char *arg) {
  fprintf(stderr, "hugify-workload: ");
  fprintf(stderr, format, arg);
  fprintf(stderr, "\n%s", usage);
  return 2;
}

int main(int argc, char **argv) {
  uint64_t size = (uint64_t)64 * 1024 * 1024, loads = 10000000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(usage, stdout);
      return 0;
    }
    if (i + 1 >= argc) return bad_usage("'%s' needs a value", argv[i]);
    const char *option = argv[i], *value = argv[++i];
    if (strcmp(option, "--size") == 0) {
      if (!parse_size(value, &size) || size < PAGE || size > (UINT64_C(1) << 40))
        return bad_usage("--size '%s': expected a size from 4K to 1T", value);
    } else if (strcmp(option, "--loads") == 0) {
      char *end;
      errno = 0;
      loads = strtoull(value, &end, 10);
      if (errno || *end || end == value || value[0] == '-') return bad_usage("--loads '%s': expected a count", value);
    } else {
      return bad_usage("unknown option '%s'", option);
    }
  }

  /* A power-of-two number of pages, so the next page is a mask away from the loaded value. */
  uint64_t pages = 1;
  while (pages * 2 * PAGE <= size) pages *= 2;
  uint64_t words = pages * PAGE / sizeof(uint64_t);
  double start = measure_now();
  uint64_t *table = malloc(words * sizeof *table);
  if (!table) {
    fprintf(stderr, "hugify-workload: cannot allocate %" PRIu64 " bytes\n", words * sizeof *table);
    return 1;
  }
  struct bench_rng rng;
  bench_rng_seed(&rng, 42);
  for (uint64_t i = 0; i < words; i++) table[i] = bench_rng_next(&rng);
  double filled = measure_now();

  /* The line read in a page rotates with the page number, so the lines spread over all cache sets. */
  const uint64_t words_per_page = PAGE / sizeof(uint64_t), words_per_line = LINE / sizeof(uint64_t);
  const uint64_t lines_per_page = PAGE / LINE, page_mask = pages - 1;
  uint64_t page = 0, checksum = 0;
  for (uint64_t i = 0; i < loads; i++) {
    uint64_t value = table[page * words_per_page + (page * 7 % lines_per_page) * words_per_line];
    checksum += value;
    page = (value + i) & page_mask; /* the next address depends on this load: no overlap, no prefetch */
  }
  double done = measure_now();

  char size_text[32];
  format_bytes(words * sizeof *table, size_text, sizeof size_text);
  printf("hugify-workload: %s working set (%" PRIu64 " pages), fill %.3f s, %" PRIu64
         " dependent loads %.3f s (%.1f ns each), checksum %016" PRIx64 "\n",
         size_text, pages, filled - start, loads, done - filled,
         loads ? (done - filled) * 1e9 / (double)loads : 0.0, checksum);
  /* Not freed: `hugify run --report` measures the program as it exits, and this is what it should see. */
  return 0;
}
