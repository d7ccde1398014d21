/* SPDX-License-Identifier: MIT */
/* report.c - the exit report of libhugify-preload.so (HUGIFY_REPORT): /proc/self/smaps read just before
 * the process exits (atexit), classified by hugify_inspect, code split per loaded object by the address
 * ranges of its executable segments (so moved text still counts for its object). JSON to a file, written
 * to a temporary name and renamed, so a reader never sees half a report; or text (or JSON) on stderr.
 * Schema: docs/run.md ("hugify.report/2"). Any failure here means no report, never a changed exit. */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "format.h"
#include "hugify.h"
#include "inspect.h"
#include "os.h"
#include "preload.h"
#include "safe_file.h"
#include "units.h"

#define REPORT_MAX_OBJECTS 256

struct text_object {
  char path[512];
  uintptr_t starts[HUGIFY_TEXT_MAX_SEGMENTS], ends[HUGIFY_TEXT_MAX_SEGMENTS];
  unsigned segments;
  struct hugify_usage code;
};

struct text_objects {
  struct text_object *objects;
  size_t count;
};

/* sum += share * usage, field by field. */
static void add_share(struct hugify_usage *sum, const struct hugify_usage *usage, double share) {
  sum->resident += (uint64_t)(share * (double)usage->resident);
  sum->base += (uint64_t)(share * (double)usage->base);
  sum->thp += (uint64_t)(share * (double)usage->thp);
  sum->hugetlb_2m += (uint64_t)(share * (double)usage->hugetlb_2m);
  sum->hugetlb_1g += (uint64_t)(share * (double)usage->hugetlb_1g);
  sum->anonymous += (uint64_t)(share * (double)usage->anonymous);
  sum->anon_thp += (uint64_t)(share * (double)usage->anon_thp);
}

static int collect_object(struct dl_phdr_info *info, size_t size, void *context) {
  (void)size;
  struct text_objects *list = context;
  if (list->count == REPORT_MAX_OBJECTS) return 1;
  bool main_program = list->count == 0;
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  if (!main_program && (name[0] == '\0' || strncmp(name, "linux-vdso", 10) == 0)) return 0;
  struct text_object *object = &list->objects[list->count];
  memset(object, 0, sizeof *object);
  if (main_program) {
    ssize_t n = readlink("/proc/self/exe", object->path, sizeof object->path - 1);
    object->path[n > 0 ? n : 0] = '\0';
  } else {
    snprintf(object->path, sizeof object->path, "%s", name);
  }
  for (int i = 0; i < info->dlpi_phnum && object->segments < HUGIFY_TEXT_MAX_SEGMENTS; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || ph->p_memsz == 0) continue;
    uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
    object->starts[object->segments] = preload_page_down(start);
    object->ends[object->segments] = preload_page_up(end);
    object->segments++;
  }
  if (object->segments) list->count++;
  return 0;
}

/* Each code mapping's usage, prorated to the part that lies in one of the object's segments. */
static void measure_objects(struct text_objects *list, const struct hugify_inspect_report *inspect) {
  for (size_t m = 0; m < inspect->mapping_count; m++) {
    const struct hugify_inspect_mapping *mapping = &inspect->mappings[m];
    if (mapping->memory_class != HUGIFY_CLASS_CODE || mapping->end <= mapping->start) continue;
    for (size_t o = 0; o < list->count; o++) {
      struct text_object *object = &list->objects[o];
      for (unsigned s = 0; s < object->segments; s++) {
        uint64_t lo = mapping->start > object->starts[s] ? mapping->start : object->starts[s];
        uint64_t hi = mapping->end < object->ends[s] ? mapping->end : object->ends[s];
        if (lo < hi)
          add_share(&object->code, &mapping->usage, (double)(hi - lo) / (double)(mapping->end - mapping->start));
      }
    }
  }
}

static void read_command(char *out, size_t cap) {
  char buf[4096];
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  if (n <= 0) { out[0] = '\0'; return; }
  if (buf[n - 1] == '\0') n--;
  for (ssize_t i = 0; i < n; i++) if (buf[i] == '\0') buf[i] = ' ';
  size_t length = (size_t)n < cap - 1 ? (size_t)n : cap - 1;
  memcpy(out, buf, length);
  out[length] = '\0';
}

/* The classes are hugify_inspect's, so every figure means what it means in `hugify inspect` (docs/inspect.md):
 * "heap" is [heap] (brk), "anon" the other private anonymous memory (malloc's mmaps, arenas, other
 * allocators, private hugetlb), "code" the executable mappings. What the --heap modes act on is heap +
 * anon: that is the allocated memory of the text report and of the --heap hugetlb shortfall. */
struct measured {
  struct hugify_usage classes[HUGIFY_CLASS_COUNT], total;
  struct preload_peak peak;    /* what peak.c kept */
  struct hugify_usage peak_allocated; /* heap + anon at the peak: the larger of the peak snapshot and exit */
  bool peak_at_exit;           /* the exit measurement was the larger one */
  struct text_objects objects;
  uint64_t not_huge[HUGIFY_WHY_COUNT];
  char command[1024];
  char allocator[16];          /* what backs the data (hugify_inspect's allocator): "" not identified */
  uint64_t max_rss;
  uint64_t peak_memory;        /* max(sampled RSS + hugetlb, ru_maxrss + hugetlb at exit) */
};

static struct hugify_usage allocated(const struct measured *m) {
  struct hugify_usage sum = m->classes[HUGIFY_CLASS_HEAP];
  add_share(&sum, &m->classes[HUGIFY_CLASS_ANON], 1.0);
  return sum;
}

static const char *const text_mode_names[] = {"off", "now", "auto"};
static const char *const text_state_names[] = {"off", "waiting", "running", "done", "no-window"};

/* When the code moved: "waiting" at exit means the process ended before it had used text_after_ms of CPU,
 * so the copy was never needed (docs/run.md "When the code moves"). */
static void put_text_step(struct json_writer *j, const struct hugify_options *options) {
  double at_cpu;
  enum preload_text_state state = preload_text_state(&at_cpu);
  json_open_object(j, "text_step");
  json_put_string(j, "mode", text_mode_names[options->text]);
  json_put_string(j, "state", text_state_names[state]);
  if (options->text == TEXT_AUTO) json_put_double(j, "after_cpu_seconds", options->text_after_ms / 1000.0);
  else json_put_null(j, "after_cpu_seconds");
  if (state == PRELOAD_TEXT_DONE) json_put_double(j, "at_cpu_seconds", at_cpu);
  else json_put_null(j, "at_cpu_seconds");
  json_close(j);
}

static void write_json(FILE *out, const struct measured *m, double seconds) {
  const struct hugify_options *options = preload_options();
  struct json_writer j;
  json_begin(&j, out, "hugify.report/2");
  json_put_i64(&j, "pid", getpid());
  json_put_i64(&j, "parent_pid", getppid());
  json_put_bool(&j, "top_level", preload_is_top_level());
  json_put_string(&j, "command", m->command);
  json_put_string(&j, "heap_mode", options_heap_name(options->heap));
  json_put_bool(&j, "text_remap", options->text);
  put_text_step(&j, options);
  json_put_string(&j, "glibc_tunables", getenv("GLIBC_TUNABLES"));
  json_put_string(&j, "malloc", preload_malloc_library());
  json_put_string(&j, "heap_owner", preload_heap_owner()); /* null: an ordinary allocator */
  enum allocator_kind allocator = allocator_of_name(m->allocator);
  json_put_string(&j, "allocator", m->allocator[0] ? m->allocator : NULL);
  json_put_string(&j, "allocator_data", m->allocator[0] ? allocator_description(allocator) : NULL);
  json_put_bool(&j, "allocator_is_runtime", allocator_is_runtime(allocator));
  json_put_usage(&j, "total", &m->total);
  json_open_object(&j, "classes");
  for (int k = 0; k < HUGIFY_CLASS_COUNT; k++) json_put_usage(&j, hugify_memory_class_name(k), &m->classes[k]);
  json_close(&j);
  json_open_object(&j, "peak");
  json_put_u64(&j, "memory_bytes", m->peak_memory);
  json_put_string(&j, "measured_at", m->peak_at_exit ? "exit" : "sample");
  json_put_double(&j, "measured_seconds", m->peak_at_exit ? m->peak.finished_seconds : m->peak.snapshot_seconds);
  json_open_object(&j, "allocated");
  json_put_u64(&j, "resident_bytes", m->peak_allocated.resident);
  json_put_u64(&j, "thp_bytes", m->peak_allocated.thp);
  json_put_u64(&j, "hugetlb_bytes", m->peak_allocated.hugetlb_2m + m->peak_allocated.hugetlb_1g);
  json_put_u64(&j, "huge_bytes", hugify_usage_huge(&m->peak_allocated));
  json_put_fraction(&j, "huge_fraction", hugify_usage_huge(&m->peak_allocated), m->peak_allocated.resident);
  json_close(&j);
  json_put_u64(&j, "samples", m->peak.samples);
  json_put_u64(&j, "snapshots", m->peak.snapshots);
  json_put_double(&j, "interval_seconds", m->peak.interval_ms / 1000.0);
  json_put_double(&j, "sampler_cpu_seconds", m->peak.sampler_cpu_seconds);
  json_close(&j);
  json_open_array(&j, "objects");
  for (size_t i = 0; i < m->objects.count; i++) {
    const struct text_object *object = &m->objects.objects[i];
    json_open_object(&j, NULL);
    json_put_string(&j, "path", object->path);
    json_put_usage(&j, "code", &object->code);
    json_close(&j);
  }
  json_close(&j);
  json_put_not_huge(&j, "not_huge_bytes", m->not_huge);
  json_put_u64(&j, "max_rss_bytes", m->max_rss);
  json_put_u64(&j, "peak_memory_bytes", m->peak_memory);
  json_open_array(&j, "fallbacks");
  unsigned count;
  const struct preload_fallback_entry *fallbacks = preload_fallbacks(&count);
  for (unsigned i = 0; i < count; i++) {
    json_open_object(&j, NULL);
    json_put_string(&j, "what", fallbacks[i].what);
    json_put_string(&j, "reason", fallbacks[i].reason);
    json_close(&j);
  }
  json_close(&j);
  json_put_double(&j, "hugify_seconds", seconds);
  json_end(&j);
}

static void text_row(struct table *t, const char *name, const struct hugify_usage *usage) {
  char resident[32], huge[32], share[16];
  format_bytes(usage->resident, resident, sizeof resident);
  format_bytes(hugify_usage_huge(usage), huge, sizeof huge);
  format_percent(hugify_usage_huge(usage), usage->resident, share, sizeof share);
  table_row(t, name, resident, huge, share);
}

static void write_text(FILE *out, const struct measured *m, double seconds) {
  const char *owner = preload_heap_owner();
  fprintf(out, "hugify run: pid %d (%s), heap %s%s%s%s, %.3f s inside hugify\n", (int)getpid(), m->command,
          options_heap_name(preload_options()->heap), owner ? " (malloc is " : "", owner ? owner : "",
          owner ? "'s allocator)" : "", seconds);
  static const char *const headers[] = {"memory", "resident", "on huge pages", "share"};
  static const bool right[] = {false, true, true, true};
  struct table t;
  table_init(&t, 4, headers, right);
  /* the classes of `hugify inspect`, code with one row per object, heap + anon (what --heap acts on) */
  for (int k = HUGIFY_CLASS_HEAP; k < HUGIFY_CLASS_COUNT; k++)
    if (k == HUGIFY_CLASS_HEAP || k == HUGIFY_CLASS_ANON || m->classes[k].resident)
      text_row(&t, hugify_memory_class_name(k), &m->classes[k]);
  struct hugify_usage heap_and_anon = allocated(m);
  text_row(&t, "heap + anon at exit", &heap_and_anon);
  text_row(&t, "heap + anon at peak", &m->peak_allocated);
  text_row(&t, "code", &m->classes[HUGIFY_CLASS_CODE]);
  for (size_t i = 0; i < m->objects.count; i++) {
    const struct text_object *object = &m->objects.objects[i];
    if (object->code.resident == 0) continue;
    char name[560];
    snprintf(name, sizeof name, "  %s", object->path);
    text_row(&t, name, &object->code);
  }
  text_row(&t, "total", &m->total);
  table_print(&t, out, "  ");
  table_free(&t);
  enum allocator_kind allocator = allocator_of_name(m->allocator);
  if (allocator_is_runtime(allocator)) /* the heap modes act on malloc and large mmaps: say who holds the data */
    fprintf(out, "  data: %s (%s), not malloc's (docs/runtimes.md)\n", allocator_description(allocator), m->allocator);
  double at_cpu;
  if (preload_text_state(&at_cpu) == PRELOAD_TEXT_WAITING)
    fprintf(out, "  text: not moved: the process used less than %u ms of CPU (HUGIFY_TEXT_AFTER_MS)\n",
            preload_options()->text_after_ms);
  unsigned count;
  const struct preload_fallback_entry *fallbacks = preload_fallbacks(&count);
  for (unsigned i = 0; i < count; i++) fprintf(out, "  fallback: %s: %s\n", fallbacks[i].what, fallbacks[i].reason);
  fflush(out);
}

static bool measure(struct measured *m) {
  struct hugify_inspect_report inspect;
  if (hugify_inspect(0, &inspect) != 0) {
    hugify_inspect_report_free(&inspect);
    return false;
  }
  memcpy(m->classes, inspect.classes, sizeof m->classes);
  m->total = inspect.total;
  memcpy(m->not_huge, inspect.not_huge, sizeof m->not_huge);
  memcpy(m->allocator, inspect.allocator, sizeof m->allocator);
  enum heap_mode mode = preload_options()->heap;
  for (size_t i = 0; i < inspect.mapping_count && (mode == HEAP_AUTO || mode == HEAP_THP); i++) {
    const struct hugify_inspect_mapping *mapping = &inspect.mappings[i];
    if (strcmp(mapping->path, "[heap]") == 0 && mapping->why == HUGIFY_WHY_NOT_ADVISED &&
        mapping->usage.resident >= os_pmd_size())
      preload_fallback("heap glibc malloc", "glibc.malloc.hugetlb=1 did not take effect: [heap] (%llu KiB resident) "
                       "was never advised (malloc was initialized before the preload)",
                       (unsigned long long)(mapping->usage.resident >> 10));
  }
  m->objects.objects = calloc(REPORT_MAX_OBJECTS, sizeof *m->objects.objects);
  if (m->objects.objects) {
    dl_iterate_phdr(collect_object, &m->objects);
    measure_objects(&m->objects, &inspect);
  }
  hugify_inspect_report_free(&inspect);
  read_command(m->command, sizeof m->command);
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0) m->max_rss = (uint64_t)usage.ru_maxrss << 10;
  uint64_t hugetlb_at_exit = m->total.hugetlb_2m + m->total.hugetlb_1g;
  m->peak_memory = m->peak.memory_bytes > m->max_rss + hugetlb_at_exit ? m->peak.memory_bytes : m->max_rss + hugetlb_at_exit;
  struct hugify_usage at_exit = allocated(m);
  m->peak_at_exit = at_exit.resident >= m->peak.allocated_resident;
  if (m->peak_at_exit) {
    m->peak_allocated = at_exit;
  } else { /* smaps_rollup does not split hugetlb by size: the text table only needs the sum */
    m->peak_allocated.resident = m->peak.allocated_resident;
    m->peak_allocated.thp = m->peak.allocated_thp;
    m->peak_allocated.hugetlb_2m = m->peak.allocated_hugetlb;
  }
  return true;
}

/* The rules of safe_file.h: a new file renamed over a regular one; a character device or FIFO the user
 * named (/dev/null, a terminal, a pipe) is written into; a link, a directory or a block device is refused. */
static void write_file(const char *path, const struct measured *m, double seconds) {
  char *text = NULL;
  size_t length = 0;
  FILE *out = open_memstream(&text, &length);
  if (!out) {
    preload_fallback("report", "cannot write %s: %s", path, strerror(errno));
    return;
  }
  write_json(out, m, seconds);
  bool ok = !ferror(out);
  ok = fclose(out) == 0 && ok;
  char reason[512] = "";
  if (!ok) preload_fallback("report", "cannot write %s: out of memory", path);
  else if (safe_file_replace(path, text, length, 0644, SAFE_FILE_ALLOW_DEVICE, reason, sizeof reason) != 0)
    preload_fallback("report", "%s", reason);
  free(text);
}

void preload_report_at_exit(void) {
  const struct hugify_options *options = preload_options();
  bool to_stderr = strcmp(options->report, "-") == 0;
  if (to_stderr && !preload_is_top_level()) return;
  int saved = errno;
  uint64_t started = preload_now_ns();
  struct measured *m = calloc(1, sizeof *m);
  if (m) preload_peak_finish(&m->peak);
  if (!m || !measure(m)) {
    preload_fallback("report", "could not read /proc/self/smaps");
    free(m);
    errno = saved;
    return;
  }
  struct hugify_usage heap_and_anon = allocated(m);
  preload_heap_at_exit(heap_and_anon.resident, heap_and_anon.hugetlb_2m + heap_and_anon.hugetlb_1g);
  preload_add_ns(preload_now_ns() - started);
  double seconds = (double)preload_total_ns() / 1e9;
  if (to_stderr) {
    if (options->report_json) write_json(stderr, m, seconds);
    else write_text(stderr, m, seconds);
  } else if (preload_is_top_level()) {
    write_file(options->report, m, seconds);
  } else if (safe_file_kind(options->report) != SAFE_FILE_STREAM) {
    /* A child reports to FILE.<pid>; when FILE is a device or FIFO (one stream, the top-level process's),
     * children write nothing: never /dev/null.<pid> files in /dev, never reports interleaved in a pipe. */
    char path[4200];
    snprintf(path, sizeof path, "%s.%d", options->report, (int)getpid());
    write_file(path, m, seconds);
  }
  free(m->objects.objects);
  free(m);
  errno = saved;
}
