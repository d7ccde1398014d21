/* SPDX-License-Identifier: MIT */
/* check_config.c - the configurations `hugify check` compares: their table, the command line each stands
 * for (ready to paste), and what each may be credited with. check.c and check_output.c call it; it calls
 * neither. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

/* In order of simplicity: the verdict prefers an earlier one unless a later one is measurably better. */
const struct config_kind config_kinds[CONFIG_COUNT] = {
    [CONFIG_PLAIN] = {"plain", {NULL}, "CMD as it is"},
    [CONFIG_HEAP] = {"heap", {"--text", "off", "--heap", "auto", NULL}, "heap on transparent huge pages"},
    [CONFIG_HEAP_TEXT] = {"heap+text", {"--text", "on", "--heap", "auto", NULL}, "heap and code on huge pages"},
    [CONFIG_TEXT] = {"text", {"--text", "on", "--heap", "off", NULL}, "code on huge pages"},
    /* CPython's objects go to glibc's malloc, whose heap `run` covers, instead of obmalloc's 1 MiB arenas */
    [CONFIG_PYMALLOC_OFF] = {"pymalloc-off", {"--text", "off", "--heap", "auto", NULL},
                             "heap, CPython's objects from malloc", {"PYTHONMALLOC=malloc", NULL}, ALLOCATOR_PYMALLOC},
    [CONFIG_HUGETLB] = {"hugetlb", {"--text", "off", "--heap", "hugetlb", NULL}, "heap from the hugetlb pool"},
    [CONFIG_MIMALLOC] = {"mimalloc", {"--text", "off", "--heap", "mimalloc", NULL}, "mimalloc, large OS pages"},
    [CONFIG_JEMALLOC] = {"jemalloc", {"--text", "off", "--heap", "jemalloc", NULL}, "jemalloc, thp:always"},
    [CONFIG_TCMALLOC] = {"tcmalloc", {"--text", "off", "--heap", "tcmalloc", NULL}, "TCMalloc (gperftools), advised"},
    /* a static program: `hugify run` collapses its anonymous memory from outside while it runs (run_outside.c) */
    [CONFIG_OUTSIDE] = {"outside", {"--text", "off", "--heap", "auto", NULL},
                        "a static program's memory collapsed from outside"},
};

const char *const latency_figure_names[LATENCY_FIGURES] = {"p50", "p99", "max"};

static void append(char *out, size_t cap, const char *format, ...) __attribute__((format(printf, 3, 4)));
static void append(char *out, size_t cap, const char *format, ...) {
  size_t used = strlen(out);
  if (used + 1 >= cap) return;
  va_list args;
  va_start(args, format);
  vsnprintf(out + used, cap - used, format, args);
  va_end(args);
}

static void append_quoted(char *out, size_t cap, const char *word) {
  bool plain = *word != '\0';
  for (const char *p = word; *p; p++)
    if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+%@", *p)) plain = false;
  if (plain) {
    append(out, cap, "%s", word);
    return;
  }
  append(out, cap, "'");
  for (const char *p = word; *p; p++) {
    if (*p == '\'') append(out, cap, "'\\''");
    else append(out, cap, "%c", *p);
  }
  append(out, cap, "'");
}

/* "hugify run --text off --heap auto -- CMD ARGS" (or just "CMD ARGS" for plain), ready to paste. */
void check_command_line(const struct check *c, const struct config *config, char *out, size_t cap) {
  out[0] = '\0';
  if (config->kind->environment[0]) append(out, cap, "%s ", config->kind->environment[0]);
  if (config->id != CONFIG_PLAIN) {
    append_quoted(out, cap, c->hugify_word);
    append(out, cap, " run");
    for (const char *const *a = config->kind->run_args; *a; a++) append(out, cap, " %s", *a);
    append(out, cap, " --");
  }
  for (char **a = c->command; *a; a++) {
    if (out[0]) append(out, cap, " ");
    append_quoted(out, cap, *a);
  }
}

/* "heap, heap+text, ...": the configurations --configs may name besides plain. */
void check_config_names(char *out, size_t cap) {
  out[0] = '\0';
  for (int k = CONFIG_PLAIN + 1; k < CONFIG_COUNT; k++)
    append(out, cap, "%s%s", k > CONFIG_PLAIN + 1 ? ", " : "", config_kinds[k].name);
}

/* A configuration is credited only with what it changed. One that remaps code but ended with no code on huge
 * pages (a program whose code is smaller than one 2 MiB page, or a remap that was refused) runs exactly as its
 * twin without the remap: whatever separates their times is not the code's, so it is never chosen. */
bool check_moved_no_code(const struct config *config) {
  return (config->id == CONFIG_HEAP_TEXT || config->id == CONFIG_TEXT) && config->coverage.present &&
         config->coverage.text_huge == 0;
}
