/* SPDX-License-Identifier: MIT */
/* bench_absl.c - the absl experiment of `hugify bench`: an external program (bench/absl_insert) run under
 * each allocator, its figures read from its output. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_run.h"
#include "cli.h"
#include "hugify.h"
#include "json_read.h"
#include "measure.h"
#include "options.h"
#include "os.h"
#include "procfs.h"
#include "units.h"

/* ---- absl: the external program ------------------------------------------------------------------- */

/* One result line of absl_hash_map --json: {"allocator":"std","count":N,"seconds":S,...}. */
static bool parse_absl_line(const char *line, struct absl_run *run) {
  struct json_doc *doc = json_doc_read_text(line, NULL, 0);
  if (!doc) return false;
  uint64_t repeat = 1;
  memset(run, 0, sizeof *run);
  bool ok = json_doc_string(doc, "allocator", run->allocator, sizeof run->allocator) &&
            json_doc_number(doc, "count", &run->count) && json_doc_number(doc, "seconds", &run->seconds);
  if (!json_doc_number(doc, "seconds_min", &run->seconds_min)) run->seconds_min = run->seconds;
  if (!json_doc_number(doc, "seconds_max", &run->seconds_max)) run->seconds_max = run->seconds;
  if (!json_doc_number(doc, "huge_fraction", &run->huge_fraction)) run->huge_fraction = NAN;
  json_doc_count(doc, "repeat", &repeat);
  run->repeat = repeat > INT_MAX ? INT_MAX : (int)repeat;
  json_doc_free(doc);
  return ok && run->count > 0 && run->seconds > 0;
}

/* Run the program with its stdout in a memory file; its output (malloc'd), or NULL with the reason. */
static char *run_absl_program(struct bench *b, const char *const *argv) {
  int fd = memfd_create("hugify-bench-absl", MFD_CLOEXEC);
  if (fd < 0) {
    snprintf(b->absl_reason, sizeof b->absl_reason, "cannot create a memory file: %s", strerror(errno));
    return NULL;
  }
  struct measure_command command = {.argv = argv, .stdout_fd = fd, .stderr_fd = -1};
  struct measure_run run;
  int rc = measure_command_run(&command, &run);
  char *output = NULL;
  if (rc != 0 || run.status != 0) {
    snprintf(b->absl_reason, sizeof b->absl_reason, "%.300s failed (%s %d)", b->absl_program,
             rc != 0 ? "could not start: errno" : "exit status", rc != 0 ? -rc : run.status);
  } else {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (os_read_file(path, &output, NULL) != 0) snprintf(b->absl_reason, sizeof b->absl_reason, "cannot read the output of %.300s", b->absl_program);
  }
  close(fd);
  return output;
}

void run_absl(struct bench *b) {
  progress(false, "bench: absl (%d/%d)", ++b->step_done, b->step_total);
  static const char *const candidates[] = {"../bench/absl_hash_map", "../libexec/hugify/absl_hash_map", NULL};
  if (measure_find_beside_self(candidates, b->absl_program, sizeof b->absl_program) != 0) {
    b->absl_program[0] = '\0';
    snprintf(b->absl_reason, sizeof b->absl_reason,
             "libabsl-dev not installed / absl_hash_map not found (build hugify with libabsl-dev installed)");
    return;
  }
  /* The seed's 10 M elements make a table of about 288 MiB: scaled down with --max-size like the rest. */
  double share = (double)b->max_size / (double)OS_MIB(288), count = 10e6 * (share < 1.0 ? share : 1.0);
  char count_text[32], repeat_text[8];
  snprintf(count_text, sizeof count_text, "%.0f", count < 10000 ? 10000 : count);
  snprintf(repeat_text, sizeof repeat_text, "%d", b->repeats);
  const char *argv[] = {b->absl_program, "--allocator", "both", "--count", count_text, "--repeat", repeat_text,
                        "--json", NULL};
  char *output = run_absl_program(b, argv);
  if (!output) return;
  static const char *const allocators[] = {"std", "hugify"};
  for (int a = 0; a < 2; a++) {
    bool found = false;
    char *copy = strdup(output), *save = NULL;
    for (char *line = copy ? strtok_r(copy, "\n", &save) : NULL; line && !found; line = strtok_r(NULL, "\n", &save)) {
      struct absl_run run;
      if (!parse_absl_line(line, &run) || strcmp(run.allocator, allocators[a]) != 0) continue;
      b->absl[b->absl_count++] = run;
      found = true;
    }
    free(copy);
    if (!found) {
      snprintf(b->absl_reason, sizeof b->absl_reason, "%.300s printed no result line for the %s allocator",
               b->absl_program, allocators[a]);
      b->absl_count = 0;
      free(output);
      return;
    }
  }
  free(output);
  b->absl_ran = true;
}
