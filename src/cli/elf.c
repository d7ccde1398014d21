/* SPDX-License-Identifier: MIT */
/* elf.c - hugify elf: what the text remap would put on huge pages for a binary or shared object, read
 * from its program headers; and the linker flags (with their file-size cost) that give 2 MiB-aligned text. */
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hugify.h"
#include "os.h"
#include "units.h"

struct elf_args {
  struct json_output json;
};

static const struct option_spec elf_options[] = {
    OPT_GROUP("Options"),
    OPT_JSON(struct elf_args, json,
             "JSON on stdout instead of the text (schema hugify.elf/1: docs/elf.md);\n"
             "--json=FILE: the text on stdout and the JSON to FILE"),
    OPT_END,
};

const struct command_help help_elf = {
    "usage: hugify elf [--json[=FILE]] FILE...\n"
    "\n"
    "What hugify's text remap (hugify run, HUGIFY_TEXT=1) would put on huge pages for each FILE, an\n"
    "executable or shared object, from its program headers: the executable segments with their sizes and\n"
    "p_align, the bytes that lie in whole 2 MiB windows when the file is loaded at a 2 MiB-aligned address\n"
    "and at a typical 4 KiB-aligned one (worst case and average), and where this file will actually load.\n"
    "Code outside whole 2 MiB windows (each segment's head and tail) stays on 4 KiB pages; linking with\n"
    "  " HUGIFY_ELF_LINK_FLAGS "\n"
    "starts every executable segment on a 2 MiB boundary, so only the tail stays: the output shows what that\n"
    "gains and what it costs in file size. In CMake: find_package(hugify) then hugify_enable_huge_text(target).\n"
    "Also shows whether the file has function symbols for the perf map (HUGIFY_PERF_MAP=1).\n"
    "\n",
    elf_options,
    "\n"
    "Examples:\n"
    "  hugify elf /usr/bin/node\n"
    "  hugify elf $(g++ -print-prog-name=cc1plus) /lib/x86_64-linux-gnu/libc.so.6\n"
    "  hugify elf --json ./myserver | jq '.files[0].huge'\n"
    "\n"
    "Exit status: 0 done, 1 a FILE could not be read or is not a 64-bit ELF executable or shared object,\n"
    "2 bad usage.\n",
};

static const char *kind_name(enum hugify_elf_kind kind) {
  switch (kind) {
  case HUGIFY_ELF_EXECUTABLE: return "executable";
  case HUGIFY_ELF_PIE: return "pie";
  case HUGIFY_ELF_SHARED_OBJECT: return "shared-object";
  }
  return "?";
}

static const char *kind_text(enum hugify_elf_kind kind) {
  switch (kind) {
  case HUGIFY_ELF_EXECUTABLE: return "executable (fixed address)";
  case HUGIFY_ELF_PIE: return "position-independent executable";
  case HUGIFY_ELF_SHARED_OBJECT: return "shared object";
  }
  return "?";
}

/* Where the loader puts it: a fixed address, a multiple of max p_align (glibc 2.35+), or any page. */
static const char *load_name(const struct hugify_elf_info *info) {
  if (info->kind == HUGIFY_ELF_EXECUTABLE) return "fixed";
  return info->max_align >= os_pmd_size() ? "2m-aligned" : "4k-aligned"; /* "2m": the PMD size, named for x86-64 */
}

static const char *symbol_table(const struct hugify_elf_info *info) {
  if (info->has_symtab < 0) return "unknown";
  if (info->has_symtab) return "symtab";
  return info->symbols > 0 ? "dynsym" : "none";
}

static void flags_text(unsigned flags, char out[4]) {
  out[0] = flags & PF_R ? 'r' : '-';
  out[1] = flags & PF_W ? 'w' : '-';
  out[2] = flags & PF_X ? 'x' : '-';
  out[3] = '\0';
}

static double percent(uint64_t part, uint64_t whole) { return whole ? 100.0 * (double)part / (double)whole : 0.0; }

/* ---- text ------------------------------------------------------------------------------------------ */

/* Whether the text is aligned for huge pages, and what relinking would give: the link flags of this kernel's
 * PMD (HUGIFY_ELF_LINK_FLAGS is 2 MiB's). */
static void print_alignment(const struct hugify_elf_info *info, const char *pmd) {
  char a[32], b[32], c[32];
  if (info->text_aligned) {
    printf("  %s-aligned text: yes (p_align %s)\n", pmd, (format_bytes(info->max_align, a, sizeof a), a));
    return;
  }
  if (info->huge_relinked <= info->huge_expected) {
    printf("  %s-aligned text: no; relinking would not add huge pages (no segment gains a whole %s window)\n", pmd,
           pmd);
    return;
  }
  format_bytes(info->huge_relinked, a, sizeof a);
  format_bytes(info->relinked_size_estimate, b, sizeof b);
  format_bytes(info->relinked_size_estimate > info->file_size ? info->relinked_size_estimate - info->file_size : 0, c,
               sizeof c);
  char flags[128] = HUGIFY_ELF_LINK_FLAGS;
  if (hugify_pmd_size() != (uint64_t)1024 * 1024 * 2) /* not the constant's PMD: the flags of this one */
    snprintf(flags, sizeof flags, "-Wl,-z,max-page-size=0x%llx -Wl,-z,common-page-size=0x%llx",
             (unsigned long long)hugify_pmd_size(), (unsigned long long)hugify_pmd_size());
  printf("  %s-aligned text: no. Linked with\n"
         "      %s\n"
         "    (CMake: hugify_enable_huge_text(target)) it would have %s on huge pages (%.1f %%);\n"
         "    the file would grow to about %s (+%s, padding between segments; not loaded into memory).\n",
         pmd, flags, a, percent(info->huge_relinked, info->text_bytes), b, c);
}

static void print_file(const char *path, const struct hugify_elf_info *info) {
  char size[32], text[32], a[32], b[32], pmd[32], short_pmd[16], window_header[40], aligned_at[64];
  format_bytes(info->file_size, size, sizeof size);
  format_bytes(info->text_bytes, text, sizeof text);
  page_sizes_name(os_pmd_size(), pmd, sizeof pmd);
  format_page_size(os_pmd_size(), short_pmd, sizeof short_pmd);
  snprintf(window_header, sizeof window_header, "in %s windows*", short_pmd);
  snprintf(aligned_at, sizeof aligned_at, "loaded at a %s-aligned address", pmd);
  printf("%s: %s, machine %u, %s\n", path, kind_text(info->kind), info->machine, size);
  const char *const headers[] = {"segment", "flags", "offset", "address", "size", "p_align", window_header};
  static const bool right[] = {true, false, true, true, true, true, true};
  struct table t;
  table_init(&t, 7, headers, right);
  for (unsigned i = 0; i < info->load_count; i++) {
    const struct hugify_elf_load *l = &info->loads[i];
    char n[16], flags[4], offset[24], address[24], window[32];
    snprintf(n, sizeof n, "%u", i + 1);
    flags_text(l->flags, flags);
    snprintf(offset, sizeof offset, "0x%llx", (unsigned long long)l->offset);
    snprintf(address, sizeof address, "0x%llx", (unsigned long long)l->vaddr);
    format_bytes(l->memory_size, a, sizeof a);
    format_bytes(l->align, b, sizeof b);
    if (l->flags & PF_X) format_bytes(l->huge_at_2m, window, sizeof window);
    else snprintf(window, sizeof window, "-");
    table_row(&t, n, flags, offset, address, a, b, window);
  }
  table_print(&t, stdout, "  ");
  table_free(&t);
  printf("  * executable segments, %s\n", aligned_at);
  printf("  code: %s in %u executable segment%s\n", text, info->text_segments, info->text_segments == 1 ? "" : "s");
  if (info->text_segments == 0) return;

  printf("  on huge pages with hugify's text remap:\n");
  format_bytes(info->huge_at_2m, a, sizeof a);
  printf("    %-38s %s (%.1f %%)\n", aligned_at, a, percent(info->huge_at_2m, info->text_bytes));
  format_bytes(info->huge_at_4k_min, a, sizeof a);
  format_bytes(info->huge_at_4k_mean, b, sizeof b);
  printf("    %-38s %s worst case, %s on average\n", "loaded at a 4 KiB-aligned address", a, b);
  format_bytes(info->huge_expected, a, sizeof a);
  const char *load = load_name(info);
  printf("    %-38s %s (%.1f %%)\n",
         strcmp(load, "fixed") == 0        ? "where it loads (fixed address)"
         : strcmp(load, "2m-aligned") == 0 ? "where it loads (PMD-aligned)"
                                           : "where it loads (any page: worst case)",
         a, percent(info->huge_expected, info->text_bytes));
  if (info->symbols < 0) printf("  function symbols: unknown (section headers beyond the file)\n");
  else printf("  function symbols for the perf map: %d (%s)\n", info->symbols, symbol_table(info));

  print_alignment(info, pmd);
}

/* ---- JSON ------------------------------------------------------------------------------------------ */

static void json_file(struct json_writer *j, const char *path, int rc, const struct hugify_elf_info *info) {
  json_open_object(j, NULL);
  json_put_string(j, "path", path);
  if (rc != 0) {
    json_put_string(j, "error", info->reason[0] ? info->reason : strerror(-rc));
    json_close(j);
    return;
  }
  json_put_null(j, "error");
  json_put_string(j, "kind", kind_name(info->kind));
  json_put_u64(j, "machine", info->machine);
  json_put_u64(j, "file_size_bytes", info->file_size);
  json_put_u64(j, "text_bytes", info->text_bytes);
  json_put_u64(j, "text_segments", info->text_segments);
  json_put_u64(j, "max_align_bytes", info->max_align);
  json_put_bool(j, "text_aligned", info->text_aligned);
  json_open_array(j, "segments");
  for (unsigned i = 0; i < info->load_count; i++) {
    const struct hugify_elf_load *l = &info->loads[i];
    char flags[4];
    flags_text(l->flags, flags);
    json_open_object(j, NULL);
    json_put_u64(j, "file_offset", l->offset);
    json_put_hex(j, "address", l->vaddr);
    json_put_u64(j, "file_size_bytes", l->file_size);
    json_put_u64(j, "memory_size_bytes", l->memory_size);
    json_put_u64(j, "align_bytes", l->align);
    json_put_string(j, "flags", flags);
    json_put_bool(j, "executable", (l->flags & PF_X) != 0);
    json_put_u64(j, "huge_at_2m_bytes", l->huge_at_2m);
    json_close(j);
  }
  json_close(j);
  json_open_object(j, "huge");
  json_put_u64(j, "at_2m_aligned_bytes", info->huge_at_2m);
  json_put_u64(j, "at_4k_aligned_worst_bytes", info->huge_at_4k_min);
  json_put_u64(j, "at_4k_aligned_mean_bytes", info->huge_at_4k_mean);
  json_put_string(j, "load", load_name(info));
  json_put_u64(j, "expected_bytes", info->huge_expected);
  json_put_fraction(j, "expected_fraction", info->huge_expected, info->text_bytes);
  json_put_u64(j, "relinked_bytes", info->huge_relinked);
  json_put_fraction(j, "relinked_fraction", info->huge_relinked, info->text_bytes);
  json_close(j);
  json_open_object(j, "symbols");
  json_put_string(j, "table", symbol_table(info));
  if (info->symbols < 0) json_put_null(j, "functions");
  else json_put_u64(j, "functions", (uint64_t)info->symbols);
  json_close(j);
  json_open_object(j, "relink");
  json_put_string(j, "flags", HUGIFY_ELF_LINK_FLAGS);
  json_put_string(j, "cmake", "hugify_enable_huge_text(target)");
  json_put_u64(j, "estimated_file_size_bytes", info->relinked_size_estimate);
  json_put_u64(j, "estimated_growth_bytes",
           info->relinked_size_estimate > info->file_size ? info->relinked_size_estimate - info->file_size : 0);
  json_close(j);
  json_close(j);
}

int cmd_elf(int argc, char **argv) {
  struct elf_args args = {0};
  static struct option_result parsed; /* large: off the stack */
  if (parse_command_options("elf", elf_options, OPTIONS_ANYWHERE, argc, argv, &args, &parsed) != EXIT_DONE)
    return EXIT_USAGE;
  if (parsed.operand_count == 0) return usage_error("elf", "no FILE given");
  struct json_output json = args.json;

  FILE *out = json_output_open(&json, "elf");
  if (json.wanted && !out) return EXIT_USAGE;
  bool text = json_output_text(&json);
  struct json_writer j;
  if (out) {
    json_begin(&j, out, "hugify.elf/1");
    json_open_array(&j, "files");
  }
  int status = EXIT_DONE, printed = 0;
  for (int k = 0; k < parsed.operand_count; k++) {
    const char *file = argv[parsed.operands[k]];
    struct hugify_elf_info info;
    int rc = hugify_elf_read(file, &info);
    if (rc != 0) status = EXIT_SHORT;
    if (out) json_file(&j, file, rc, &info);
    if (!text) continue;
    if (rc != 0) {
      fail(EXIT_SHORT, "elf", "%s: %s", file, info.reason[0] ? info.reason : strerror(-rc));
      continue;
    }
    if (printed++) putchar('\n');
    print_file(file, &info);
  }
  if (out) {
    json_close(&j);
    json_end(&j);
    if (!json_output_close(out, &json, "elf")) status = EXIT_SHORT;
  }
  return status;
}
