/* SPDX-License-Identifier: MIT */
/* cmd_pool.c - hugify pool: reserve, show, clear, mount and persist hugetlb pools per size and NUMA node. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "array.h"
#include "pool.h"
#include "pool_view.h"
#include "os.h"
#include "procfs.h"
#include "safe_file.h"
#include "status.h"
#include "units.h"


#define MAX_REQUESTS 16

struct pool_args {
  const char *verb;
  const char *root;
  bool dry_run, persist;
  struct json_output json;
  uint64_t node_number, uid, gid; /* as typed; node and mount.uid/gid below hold them */
  const char *mode_text, *bytes_text, *size_text; /* checked against the machine's page sizes */
  FILE *json_out; /* where the JSON goes (NULL: none) */
  bool text;      /* the text goes to stdout */
  int node;              /* -1: not given */
  uint64_t bytes;        /* --bytes, 0: not given */
  uint64_t size;         /* --size, 0: not given */
  unsigned request_count;
  struct hugify_pool_request requests[MAX_REQUESTS];
  int relative[MAX_REQUESTS];   /* SIZE=+N: 1, SIZE=-N: -1 (count holds N until resolved), SIZE=N: 0 */
  struct hugify_mount_opts mount;
  bool mode_given;
};

static const struct option_spec pool_options[] = {
    OPT_GROUP("Options"),
    OPT_COUNT("node", struct pool_args, node_number, "N", 0, HUGIFY_MAX_NODES * 64, "only NUMA node N (set, clear)"),
    OPT_STRING("bytes", struct pool_args, bytes_text, "BYTES",
             "set: as many pages as cover BYTES (8G, 512M), of --size (default: the default size)"),
    OPT_STRING("size", struct pool_args, size_text, "SIZE", "the page size (set --bytes, clear, mount)"),
    OPT_FLAG("dry-run", 0, struct pool_args, dry_run,
             "write nothing: show the plan, and the diff of every file --persist would write"),
    OPT_FLAG("persist", 0, struct pool_args, persist,
             "keep it across reboots: set writes " HUGIFY_POOL_SYSCTL_FILE " (default size)\n"
             "and prints the kernel command line for the rest (1G pages need it: memory is\n"
             "unfragmented only at boot); mount writes a systemd mount unit to " HUGIFY_POOL_UNIT_DIR),
    OPT_STRING("dir", struct pool_args, mount.dir, "DIR", "mount point (default /dev/hugepages2M, /dev/hugepages1G, ...)"),
    OPT_STRING("mode", struct pool_args, mode_text, "MODE", "octal permissions of the mount (default 1770)"),
    OPT_COUNT("uid", struct pool_args, uid, "UID", 0, UINT32_MAX - 1, "the mount's owner"),
    OPT_COUNT("gid", struct pool_args, gid, "GID", 0, UINT32_MAX - 1, "the mount's group"),
    OPT_SIZE("max-size", struct pool_args, mount.max_size, "BYTES", 1, "the most the mount may hold"),
    OPT_SIZE("min-size", struct pool_args, mount.min_size, "BYTES", 1, "reserved for the mount at mount time"),
    OPT_JSON(struct pool_args, json,
             "JSON on stdout instead of the text (schemas hugify.pool/2, hugify.pool.set/2,\n"
             "hugify.pool.mount/2: docs/pool.md); --json=FILE: the text on stdout, the JSON to FILE"),
    VIEW_ROOT_OPTION(struct pool_args, root),
    OPT_END,
};

const struct command_help help_pool = {
    "usage: hugify pool [show] [--json[=FILE]]\n"
    "       hugify pool set SIZE=COUNT... [--node N] [--dry-run] [--persist] [--json[=FILE]]\n"
    "       hugify pool set --bytes BYTES [--size SIZE] [--node N] [--dry-run] [--persist] [--json[=FILE]]\n"
    "       hugify pool clear [--size SIZE] [--node N] [--dry-run] [--json[=FILE]]\n"
    "       hugify pool mount [--size SIZE] [--dir DIR] [--mode MODE] [--uid UID] [--gid GID]\n"
    "                         [--max-size BYTES] [--min-size BYTES] [--persist] [--dry-run] [--json[=FILE]]\n"
    "\n"
    "Reserve hugetlb pages and check that they are really there.\n"
    "\n"
    "  show    the pools per page size and NUMA node: total, free, reserved, surplus, overcommit (default)\n"
    "  set     set pools to COUNT pages: writes sysfs, reads back what the kernel gave, compacts memory and\n"
    "          tries again when short. Without --node, a NUMA machine gets the count spread over its nodes\n"
    "          (the total, never the count on every node). Bigger sizes are set first. A request larger\n"
    "          than memory writes nothing. SIZE=+N / SIZE=-N: N more / fewer pages than the pool has now\n"
    "          (of --node N, else the machine): a program's hugetlb shared memory on top of what is there\n"
    "  clear   set pools to 0 (all sizes, or --size). Pages in use stay (as surplus) until freed.\n"
    "  mount   mount hugetlbfs of a page size (default: the default size) at /dev/hugepages<SIZE>\n"
    "\n"
    "Sizes: 2M, 2MB, 2048kB, 1G, 1GB (any size this kernel has). COUNT: whole pages.\n"
    "\n",
    pool_options,
    "\n"
    "Examples:\n"
    "  hugify pool\n"
    "  sudo hugify pool set 2M=512 1G=2\n"
    "  sudo hugify pool set --bytes 8G --size 2M --node 0\n"
    "  sudo hugify pool set 2M=+$(postgres -C shared_memory_size_in_huge_pages -D DATADIR)\n"
    "  hugify pool set 2M=1024 1G=4 --persist --dry-run\n"
    "  sudo hugify pool mount --size 1G --gid 1000 --persist\n"
    "  sudo hugify pool clear --size 1G\n"
    "\n"
    "Exit status: 0 done, 1 fell short (the shortfall per node is printed), 2 bad usage (a size or count\n"
    "not understood), 3 missing privilege (nothing was written) or no hugetlb support.\n",
};

/* The machine's pools, for sizes and the default size. */
struct machine {
  struct hugify_pool pools[HUGIFY_MAX_HUGETLB_SIZES];
  int count;
  uint64_t default_size;
  char sizes[128];
};

static int bad_size(const struct machine *m, const char *what) {
  return usage_error("pool",
                     "'%s' is not understood.\n"
                     "Accepted: SIZE=COUNT with SIZE as 2M, 2MB, 2048kB, 1G or 1GB and COUNT a whole number of pages\n"
                     "(+N or -N: that many more or fewer than the pool has now),\n"
                     "or --bytes BYTES [--size SIZE]. Page sizes on this machine: %s",
                     what, m->sizes);
}

static bool known_size(const struct machine *m, uint64_t size) {
  for (int i = 0; i < m->count; i++)
    if (m->pools[i].global.page_size == size) return true;
  return false;
}

/* "2M=512", or relative to the pool as it is: "2M=+537" (a program's own need on top of what is there),
 * "2M=-64". */
static int parse_request(const struct machine *m, const char *arg, struct hugify_pool_request *r, int *relative) {
  const char *eq = strchr(arg, '=');
  char size_text[64];
  if (!eq || (size_t)(eq - arg) >= sizeof size_text) return bad_size(m, arg);
  memcpy(size_text, arg, (size_t)(eq - arg));
  size_text[eq - arg] = '\0';
  if (!parse_size(size_text, &r->page_size) || !known_size(m, r->page_size)) return bad_size(m, arg);
  *relative = eq[1] == '+' ? 1 : eq[1] == '-' ? -1 : 0;
  const char *count = eq + 1 + (*relative != 0);
  if (!parse_count(count, 0, UINT64_MAX, &r->count)) return bad_size(m, arg);
  if (r->count > UINT64_MAX / r->page_size)
    return usage_error("pool", "'%s': that many pages is more than 2^64 bytes; no machine has that", arg);
  r->node = -1;
  return EXIT_DONE;
}

/* The verb, then the options and (for set) SIZE=COUNT requests, checked against the machine's sizes. */
static int parse_args(int argc, char **argv, struct pool_args *a, struct option_result *parsed) {
  memset(a, 0, sizeof *a);
  a->root = "/";
  a->node = -1;
  int first = 1;
  a->verb = first < argc && argv[first][0] != '-' ? argv[first++] : "show";
  if (strcmp(a->verb, "show") && strcmp(a->verb, "set") && strcmp(a->verb, "clear") && strcmp(a->verb, "mount"))
    return usage_error("pool", "'%s' is not a pool command: show, set, clear or mount", a->verb);
  if (parse_command_options("pool", pool_options, OPTIONS_ANYWHERE, argc - (first - 1), argv + (first - 1), a,
                            parsed) != EXIT_DONE)
    return EXIT_USAGE;
  for (int i = 0; i < parsed->operand_count; i++) parsed->operands[i] += first - 1; /* indexes into argv */
  if (option_table_given(pool_options, parsed, "node")) a->node = (int)a->node_number;
  a->mount.uid = (uid_t)a->uid;
  a->mount.gid = (gid_t)a->gid;
  if (a->mode_text) {
    char *end;
    unsigned long mode = strtoul(a->mode_text, &end, 8);
    if (*end || !a->mode_text[0] || a->mode_text[0] == '-' || mode > 07777 || mode == 0)
      return usage_error("pool", "--mode takes octal permissions such as 1770, not '%s'", a->mode_text);
    a->mount.mode = (unsigned)mode;
  }
  return EXIT_DONE;
}

/* What needs the machine (read at --root): the page sizes it has, and the SIZE=COUNT requests. */
static int check_against_machine(char **argv, const struct option_result *parsed, const struct machine *m,
                                 struct pool_args *a) {
  if (a->bytes_text && (!parse_size(a->bytes_text, &a->bytes) || a->bytes == 0)) return bad_size(m, a->bytes_text);
  if (a->size_text && (!parse_size(a->size_text, &a->size) || !known_size(m, a->size))) return bad_size(m, a->size_text);
  for (int i = 0; i < parsed->operand_count; i++) {
    const char *arg = argv[parsed->operands[i]];
    if (strcmp(a->verb, "set") != 0) return usage_error("pool", "unexpected argument '%s'", arg);
    if (a->request_count == MAX_REQUESTS) return usage_error("pool", "at most %d SIZE=COUNT", MAX_REQUESTS);
    int rc = parse_request(m, arg, &a->requests[a->request_count], &a->relative[a->request_count]);
    if (rc) return rc;
    a->request_count++;
  }
  return EXIT_DONE;
}

/* ---- files: diff and write -------------------------------------------------------------------------- */

struct lines {
  char **line;
  size_t count;
};

static void split_lines(const char *text, struct lines *out) {
  out->count = 0;
  out->line = NULL;
  size_t cap = 0;
  for (const char *p = text ? text : ""; *p;) {
    const char *end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (ARRAY_GROW(out->line, out->count + 1, cap) != 0) break;
    out->line[out->count++] = strndup(p, len);
    p += len + (end ? 1 : 0);
  }
}

static void free_lines(struct lines *l) {
  for (size_t i = 0; i < l->count; i++) free(l->line[i]);
  free(l->line);
}

/* Unified diff of two small texts (one hunk holding the whole file), "" when they are equal. malloc'd. */
static char *unified_diff(const char *path, const char *old_text, const char *new_text) {
  struct lines a, b;
  split_lines(old_text, &a);
  split_lines(new_text, &b);
  size_t n = a.count, m = b.count;
  size_t *lcs = calloc((n + 1) * (m + 1), sizeof *lcs); /* lcs[i][j]: common lines of a[i..], b[j..] */
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i * (m + 1) + j] = strcmp(a.line[i], b.line[j]) == 0 ? lcs[(i + 1) * (m + 1) + j + 1] + 1
                             : lcs[(i + 1) * (m + 1) + j] > lcs[i * (m + 1) + j + 1] ? lcs[(i + 1) * (m + 1) + j]
                                                                                       : lcs[i * (m + 1) + j + 1];
  char *text = NULL;
  size_t size = 0;
  FILE *out = open_memstream(&text, &size);
  if (lcs[0] != n || n != m) {
    fprintf(out, "--- %s\n+++ %s\n@@ -%zu,%zu +%zu,%zu @@\n", old_text ? path : "/dev/null", path, n ? (size_t)1 : 0, n,
            m ? (size_t)1 : 0, m);
    size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && strcmp(a.line[i], b.line[j]) == 0) { fprintf(out, " %s\n", a.line[i]); i++; j++; }
      else if (j < m && (i == n || lcs[i * (m + 1) + j + 1] >= lcs[(i + 1) * (m + 1) + j]))
        fprintf(out, "+%s\n", b.line[j++]);
      else fprintf(out, "-%s\n", a.line[i++]);
    }
  }
  fclose(out);
  free(lcs);
  free_lines(&a);
  free_lines(&b);
  return text;
}

struct file_change {
  char path[1024];   /* as it is on the target system */
  char *diff;        /* "" when unchanged */
  bool written;
  int error;         /* errno of a failed write */
};

/* Diff (and unless dry_run, write) root + path with text. */
static void change_file(const char *root, const char *path, const char *text, bool dry_run, struct file_change *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->path, sizeof c->path, "%s", path);
  char full[2048];
  root_path(full, sizeof full, root, path);
  char *old_text;
  os_read_file(full, &old_text, NULL);
  c->diff = unified_diff(path, old_text, text);
  bool same = old_text && strcmp(old_text, text) == 0;
  free(old_text);
  if (dry_run || same) return;
  char dir[2048];
  snprintf(dir, sizeof dir, "%s", full);
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) *slash = '\0';
  bool created;
  int rc = pool_make_directories(dir, &created);
  /* as root into /etc: a new file renamed into place (safe_file.h), never through a link, synced first */
  if (rc == 0) rc = safe_file_replace(full, text, strlen(text), 0644, SAFE_FILE_DURABLE, NULL, 0);
  c->written = rc == 0;
  c->error = -rc;
}

/* Whether the persistence files could be written (so that nothing is written when they cannot). */
static int check_persist_writable(const char *root, const char *path) {
  char full[2048];
  root_path(full, sizeof full, root, path);
  for (char *slash = strrchr(full, '/'); slash && slash != full; slash = strrchr(full, '/')) {
    if (access(full, F_OK) == 0) return access(full, W_OK) == 0 ? 0 : -errno;
    *slash = '\0';
  }
  return access(full[0] ? full : "/", W_OK) == 0 ? 0 : -errno;
}

static void json_changes(struct json_writer *j, const struct file_change *changes, unsigned count) {
  json_open_array(j, "files");
  for (unsigned i = 0; i < count; i++) {
    json_open_object(j, NULL);
    json_put_string(j, "path", changes[i].path);
    json_put_bool(j, "changed", changes[i].diff && changes[i].diff[0]);
    json_put_bool(j, "written", changes[i].written);
    json_put_string(j, "diff", changes[i].diff ? changes[i].diff : "");
    json_put_string(j, "error", changes[i].error ? strerror(changes[i].error) : NULL);
    json_close(j);
  }
  json_close(j);
}

static void print_changes(const struct file_change *changes, unsigned count, bool dry_run) {
  for (unsigned i = 0; i < count; i++) {
    const struct file_change *c = &changes[i];
    if (c->error) printf("could not write %s (%s)\n", c->path, strerror(c->error));
    else if (!c->diff || !c->diff[0]) printf("%s is up to date\n", c->path);
    else if (dry_run) printf("would change %s:\n%s", c->path, c->diff);
    else printf("wrote %s:\n%s", c->path, c->diff);
  }
}

/* ---- show ------------------------------------------------------------------------------------------- */

static int pool_show(const struct pool_args *a) {
  struct status_snapshot *s = malloc(sizeof *s);
  if (!s) return fail(EXIT_SHORT, "pool", "out of memory");
  status_read(a->root, s);
  if (!s->hugetlb_present) {
    free(s);
    return fail(EXIT_PRIVILEGE, "pool", "this kernel has no hugetlb support (it needs CONFIG_HUGETLBFS)");
  }
  if (a->json_out) {
    struct json_writer j;
    json_begin(&j, a->json_out, "hugify.pool/2");
    json_put_u64(&j, "default_page_size_bytes", s->default_hugetlb_size);
    view_pool_json(&j, "pools", s->pools, s->pool_count);
    view_mount_json(&j, "mounts", s);
    json_end(&j);
  }
  if (a->text) {
    view_pool_table(stdout, s->pools, s->pool_count, "");
    printf("\nhugetlbfs mounts\n");
    view_mount_table(stdout, s, "  ");
  }
  free(s);
  return EXIT_DONE;
}

/* ---- set / clear ------------------------------------------------------------------------------------ */

static int compare_requests(const void *x, const void *y) {
  const struct hugify_pool_request *a = x, *b = y;
  return a->page_size < b->page_size ? 1 : a->page_size > b->page_size ? -1 : 0; /* bigger sizes first */
}

static void result_rows(struct table *t, const struct hugify_pool_result *r, bool dry_run) {
  char label[32], node[16], before[24], asked[24], got[24], shortfall[24];
  format_page_size(r->page_size, label, sizeof label);
  uint64_t total_short = r->got < r->requested ? r->requested - r->got : 0;
  if (r->node >= 0) snprintf(node, sizeof node, "%d", r->node);
  else snprintf(node, sizeof node, "all");
  snprintf(before, sizeof before, "%llu", (unsigned long long)r->before);
  snprintf(asked, sizeof asked, "%llu", (unsigned long long)r->requested);
  snprintf(got, sizeof got, "%llu", (unsigned long long)r->got);
  snprintf(shortfall, sizeof shortfall, "%llu", (unsigned long long)total_short);
  if (r->node < 0) table_row(t, label, node, before, asked, dry_run ? "-" : got, dry_run ? "-" : shortfall);
  if (r->node_count < 2 && r->node < 0) return;
  for (unsigned i = 0; i < r->node_count; i++) {
    const struct hugify_pool_node_result *n = &r->nodes[i];
    if (r->node >= 0 && n->node != r->node) continue;
    snprintf(node, sizeof node, "%d", n->node);
    snprintf(before, sizeof before, "%llu", (unsigned long long)n->before);
    snprintf(asked, sizeof asked, "%llu", (unsigned long long)n->requested);
    snprintf(got, sizeof got, "%llu", (unsigned long long)n->got);
    snprintf(shortfall, sizeof shortfall, "%llu",
             (unsigned long long)(n->got < n->requested ? n->requested - n->got : 0));
    table_row(t, r->node >= 0 ? label : "", node, before, asked, dry_run ? "-" : got, dry_run ? "-" : shortfall);
  }
}

/* "got" and "short": null when nothing was read back (a dry run). */
static void json_got(struct json_writer *j, bool measured, uint64_t got, uint64_t requested) {
  if (!measured) {
    json_put_null(j, "got");
    json_put_null(j, "short");
    return;
  }
  json_put_u64(j, "got", got);
  json_put_u64(j, "short", got < requested ? requested - got : 0);
}

static void json_result(struct json_writer *j, const struct hugify_pool_result *r, int rc, bool written) {
  char label[32];
  format_page_size(r->page_size, label, sizeof label);
  json_open_object(j, NULL);
  json_put_u64(j, "page_size_bytes", r->page_size);
  json_put_string(j, "label", label);
  if (r->node >= 0) json_put_i64(j, "node", r->node);
  else json_put_null(j, "node");
  json_put_u64(j, "before", r->before);
  json_put_u64(j, "requested", r->requested);
  bool measured = written || r->beyond_memory; /* a dry run has nothing read back */
  json_got(j, measured, r->got, r->requested);
  json_put_u64(j, "surplus", r->surplus);
  json_put_u64(j, "compactions", r->compactions);
  json_put_bool(j, "beyond_memory", r->beyond_memory);
  if (measured) json_put_bool(j, "filled", rc == 0);
  else json_put_null(j, "filled");
  json_open_array(j, "nodes");
  for (unsigned i = 0; i < r->node_count; i++) {
    const struct hugify_pool_node_result *n = &r->nodes[i];
    json_open_object(j, NULL);
    json_put_i64(j, "node", n->node);
    json_put_u64(j, "before", n->before);
    json_put_u64(j, "requested", n->requested);
    json_got(j, measured, n->got, n->requested);
    json_close(j);
  }
  json_close(j);
  json_put_string(j, "reason", r->reason);
  json_close(j);
}

static int privilege_error(const struct pool_args *a, const char *reason) {
  return fail(EXIT_PRIVILEGE, "pool", "%s.\nNothing was written. Run it as root: sudo hugify pool %s ...", reason,
              a->verb);
}

/* SIZE=+N / SIZE=-N: N more or fewer persistent pages than the pool (of --node, else the machine) has now. */
static int resolve_relative(const struct machine *m, struct pool_args *a, unsigned i) {
  struct hugify_pool_request *r = &a->requests[i];
  const struct hugify_pool *pool = NULL;
  for (int k = 0; k < m->count; k++)
    if (m->pools[k].global.page_size == r->page_size) pool = &m->pools[k];
  if (!pool) return bad_size(m, "SIZE=+N");
  uint64_t total = pool->global.total, surplus = pool->global.surplus;
  if (r->node >= 0) {
    bool found = false;
    for (unsigned k = 0; k < pool->node_count; k++)
      if (pool->nodes[k].node == r->node) total = pool->nodes[k].total, surplus = pool->nodes[k].surplus, found = true;
    if (!found) return usage_error("pool", "--node %d: this machine has no such node for that page size", r->node);
  }
  uint64_t now = total > surplus ? total - surplus : 0;
  char label[32];
  format_page_size(r->page_size, label, sizeof label);
  if (a->relative[i] > 0) {
    if (r->count > UINT64_MAX / r->page_size - now)
      return usage_error("pool", "%s=+%llu: more than 2^64 bytes", label, (unsigned long long)r->count);
    r->count = now + r->count;
  } else {
    if (r->count > now)
      return usage_error("pool", "%s=-%llu: the pool has only %llu pages", label, (unsigned long long)r->count,
                         (unsigned long long)now);
    r->count = now - r->count;
  }
  a->relative[i] = 0;
  return EXIT_DONE;
}

/* The requests of `set` / `clear` from the arguments (usage errors here write nothing). */
static int set_requests(struct pool_args *a, const struct machine *m) {
  if (strcmp(a->verb, "clear") == 0) {
    if (a->request_count || a->bytes) return usage_error("pool", "clear takes --size, not counts");
    if (a->persist) return usage_error("pool", "clear does not persist: remove " HUGIFY_POOL_SYSCTL_FILE
                                               " and the hugepages= boot parameters instead");
    for (int i = 0; i < m->count; i++) {
      if (a->size && m->pools[i].global.page_size != a->size) continue;
      a->requests[a->request_count++] = (struct hugify_pool_request){m->pools[i].global.page_size, -1, 0};
    }
  } else if (a->bytes) {
    if (a->request_count) return usage_error("pool", "give either SIZE=COUNT or --bytes, not both");
    uint64_t size = a->size ? a->size : m->default_size;
    if (!size) return bad_size(m, "--bytes without --size (this machine has no default huge page size)");
    /* rounded up without (bytes + size - 1), which wraps to 0 pages near UINT64_MAX and clears the pool */
    a->requests[a->request_count++] = (struct hugify_pool_request){size, -1, a->bytes / size + (a->bytes % size != 0)};
  } else if (!a->request_count) {
    return usage_error("pool", "set needs SIZE=COUNT (such as 2M=512) or --bytes BYTES");
  } else if (a->size) {
    return usage_error("pool", "--size goes with --bytes; SIZE=COUNT names its size");
  }
  if (a->mount.dir || a->mount.mode || a->mount.uid || a->mount.gid || a->mount.max_size || a->mount.min_size)
    return usage_error("pool", "--dir, --mode, --uid, --gid, --max-size and --min-size are for 'pool mount'");
  for (unsigned i = 0; i < a->request_count; i++) {
    a->requests[i].node = a->node;
    if (a->relative[i]) {
      int rc = resolve_relative(m, a, i);
      if (rc != EXIT_DONE) return rc;
    }
  }
  qsort(a->requests, a->request_count, sizeof a->requests[0], compare_requests);
  return EXIT_DONE;
}

struct set_outcome {
  struct hugify_pool_result *results;
  int *codes;
  bool written, beyond;
  struct file_change change; /* --persist: the sysctl.d file */
  bool have_change;
  char *cmdline;             /* --persist: the boot parameters */
};

static void print_set_json(const struct pool_args *a, const struct set_outcome *o) {
  struct json_writer j;
  json_begin(&j, a->json_out, "hugify.pool.set/2");
  json_put_string(&j, "command", a->verb);
  json_put_bool(&j, "dry_run", a->dry_run);
  json_put_bool(&j, "written", o->written);
  json_open_array(&j, "results");
  for (unsigned i = 0; i < a->request_count; i++) json_result(&j, &o->results[i], o->codes[i], o->written);
  json_close(&j);
  if (a->persist) {
    json_open_object(&j, "persist");
    json_changes(&j, &o->change, o->have_change ? 1 : 0);
    json_put_string(&j, "kernel_cmdline", o->cmdline && o->cmdline[0] ? o->cmdline : NULL);
    json_close(&j);
  }
  json_end(&j);
}

static void print_set_text(const struct pool_args *a, const struct set_outcome *o) {
  static const char *const headers[] = {"size", "node", "before", "asked", "got", "short"};
  static const bool right[] = {false, false, true, true, true, true};
  struct table t;
  table_init(&t, 6, headers, right);
  for (unsigned i = 0; i < a->request_count; i++) result_rows(&t, &o->results[i], a->dry_run);
  if (a->dry_run) printf("Dry run: nothing written. The plan:\n");
  else if (o->beyond) printf("Nothing written:\n");
  table_print(&t, stdout, "");
  table_free(&t);
  for (unsigned i = 0; i < a->request_count; i++) {
    const struct hugify_pool_result *r = &o->results[i];
    char label[32];
    format_page_size(r->page_size, label, sizeof label);
    if (r->reason[0]) printf("%s: %s\n", label, r->reason);
    if (r->compactions) printf("%s: compacted memory %u time%s to find more pages\n", label, r->compactions,
                               r->compactions == 1 ? "" : "s");
    if (o->written && r->surplus)
      printf("%s: %llu pages are still in use beyond the new size (surplus); they return to the system when "
             "freed\n", label, (unsigned long long)r->surplus);
  }
  if (o->have_change) print_changes(&o->change, 1, a->dry_run);
  if (o->cmdline && o->cmdline[0])
    printf("Kernel command line for boot (add to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, "
           "reboot):\n  %s\n", o->cmdline);
}

/* Plan every request, then (not a dry run, nothing beyond memory) check the --persist file and commit:
 * the library's transaction (pool_plan_at, pool_commit_at) writes nothing unless all of it can be. */
static int set_pools(struct pool_args *a, struct set_outcome *o) {
  char reason[HUGIFY_REASON_MAX] = "";
  int failed = -1;
  int rc = pool_plan_at(a->root, a->requests, a->request_count, o->results, o->codes, &o->beyond, &failed, reason,
                        sizeof reason);
  if (rc == -EINVAL) return usage_error("pool", "%s", reason);
  if (rc) return fail(EXIT_SHORT, "pool", "%s", reason);
  if (a->dry_run || o->beyond) return EXIT_DONE;
  rc = a->persist ? check_persist_writable(a->root, HUGIFY_POOL_SYSCTL_FILE) : 0;
  if (rc) {
    snprintf(reason, sizeof reason, "cannot write " HUGIFY_POOL_SYSCTL_FILE " (%s)", strerror(-rc));
    return privilege_error(a, reason);
  }
  progress(false, "setting %u pool%s...", a->request_count, a->request_count == 1 ? "" : "s");
  rc = pool_commit_at(a->root, a->requests, a->request_count, o->results, o->codes, &o->written, &failed, reason,
                      sizeof reason);
  progress(true, "pools set");
  if (rc == -EACCES || rc == -EPERM || rc == -EROFS) return privilege_error(a, reason);
  return rc ? fail(EXIT_SHORT, "pool", "%s", reason) : EXIT_DONE;
}

static int pool_set(struct pool_args *a, const struct machine *m) {
  int exit_code = set_requests(a, m);
  if (exit_code != EXIT_DONE) return exit_code;
  struct set_outcome o = {.results = calloc(a->request_count ? a->request_count : 1, sizeof *o.results),
                          .codes = calloc(a->request_count ? a->request_count : 1, sizeof *o.codes)};
  if (!o.results || !o.codes) exit_code = fail(EXIT_SHORT, "pool", "out of memory");
  else exit_code = set_pools(a, &o);
  if (exit_code != EXIT_DONE && !o.written) {
    free(o.results);
    free(o.codes);
    return exit_code;
  }
  /* Persistence: the requests as asked, whether or not the pool filled now (boot has unfragmented memory). */
  if (a->persist && !o.beyond) {
    char *sysctl = hugify_pool_sysctl_text(a->requests, a->request_count, m->default_size);
    if (sysctl) {
      change_file(a->root, HUGIFY_POOL_SYSCTL_FILE, sysctl, a->dry_run, &o.change);
      o.have_change = true;
      if (o.change.error) exit_code = EXIT_PRIVILEGE;
      free(sysctl);
    }
    o.cmdline = hugify_pool_cmdline_text(a->requests, a->request_count, m->default_size);
  }
  if (a->json_out) print_set_json(a, &o);
  if (a->text) print_set_text(a, &o);
  bool short_any = false;
  for (unsigned i = 0; i < a->request_count; i++) short_any |= o.codes[i] == -ENOMEM;
  if (short_any && exit_code == EXIT_DONE) {
    for (unsigned i = 0; i < a->request_count; i++)
      if (o.codes[i] == -ENOMEM && o.results[i].reason[0]) fprintf(stderr, "hugify pool: %s\n", o.results[i].reason);
    exit_code = EXIT_SHORT;
  }
  free(o.cmdline);
  free(o.change.diff);
  free(o.results);
  free(o.codes);
  return exit_code;
}

/* ---- mount ------------------------------------------------------------------------------------------ */

static int pool_mount(struct pool_args *a, const struct machine *m) {
  if (a->request_count || a->bytes || a->node >= 0)
    return usage_error("pool", "mount takes --size (and mount options), not counts or --node");
  uint64_t size = a->size ? a->size : m->default_size;
  if (!size) return bad_size(m, "mount without --size (this machine has no default huge page size)");
  char dir[1024], label[32], reason[HUGIFY_REASON_MAX] = "";
  format_page_size(size, label, sizeof label);
  if (a->mount.dir) snprintf(dir, sizeof dir, "%s", a->mount.dir);
  else hugify_pool_mount_dir(size, dir, sizeof dir);
  if (a->mount.dir && pool_check_mount_dir(a->mount.dir, reason, sizeof reason) != 0)
    return usage_error("pool", "--dir: %s", reason);
  if (a->mount.min_size && a->mount.max_size && a->mount.min_size > a->mount.max_size)
    return usage_error("pool", "--min-size is larger than --max-size");
  char unit_name[256] = "", unit_path[1024] = "";
  char *unit = a->persist ? hugify_pool_mount_unit_text(size, &a->mount, unit_name, sizeof unit_name) : NULL;
  if (a->persist && !unit && errno == ENAMETOOLONG)
    return usage_error("pool", "--dir %s: its systemd unit name would be longer than 255 characters", dir);
  if (a->persist && !unit) return fail(EXIT_SHORT, "pool", "cannot make the mount unit: %s", strerror(errno));
  if (unit) snprintf(unit_path, sizeof unit_path, HUGIFY_POOL_UNIT_DIR "/%s", unit_name);
  bool live = strcmp(a->root, "/") == 0 || a->root[0] == '\0';
  if (unit && !a->dry_run) {
    int rc = check_persist_writable(a->root, unit_path);
    if (rc) {
      snprintf(reason, sizeof reason, "cannot write %s (%s)", unit_path, strerror(-rc));
      free(unit);
      return privilege_error(a, reason);
    }
  }
  int rc = 0, exit_code = EXIT_DONE;
  bool mounted = false;
  if (!a->dry_run && live) {
    struct hugify_mount_result mount;
    rc = hugify_pool_mount(size, &a->mount, &mount);
    snprintf(reason, sizeof reason, "%s", mount.reason);
    mounted = rc == 0;
    if (rc == -EPERM || rc == -EACCES || rc == -EROFS) { free(unit); return privilege_error(a, reason); }
    if (rc == -EINVAL) { free(unit); return usage_error("pool", "%s", reason); }
    if (rc) exit_code = EXIT_SHORT;
  }
  struct file_change change = {0};
  if (unit) {
    change_file(a->root, unit_path, unit, a->dry_run, &change);
    if (change.error) exit_code = EXIT_PRIVILEGE;
  }
  if (a->json_out) {
    struct json_writer j;
    json_begin(&j, a->json_out, "hugify.pool.mount/2");
    json_put_u64(&j, "page_size_bytes", size);
    json_put_string(&j, "dir", dir);
    json_put_bool(&j, "dry_run", a->dry_run);
    json_put_bool(&j, "mounted", mounted);
    json_put_string(&j, "reason", reason[0] ? reason : NULL);
    if (unit) {
      json_open_object(&j, "persist");
      json_put_string(&j, "unit", unit_name);
      json_changes(&j, &change, 1);
      json_close(&j);
    }
    json_end(&j);
  }
  if (a->text) {
    if (a->dry_run) printf("Dry run: would mount hugetlbfs of %s pages at %s\n", label, dir);
    else if (!live) printf("Not mounted: --root %s is not this machine\n", a->root);
    else if (mounted && reason[0]) printf("%s\n", reason);
    else if (mounted) printf("Mounted hugetlbfs of %s pages at %s\n", label, dir);
    if (unit) {
      print_changes(&change, 1, a->dry_run);
      if (!a->dry_run && !change.error)
        printf("Enable it at boot: systemctl daemon-reload && systemctl enable %s\n", unit_name);
    }
  }
  if (rc && reason[0]) fprintf(stderr, "hugify pool: %s\n", reason);
  free(unit);
  free(change.diff);
  return exit_code;
}

int cmd_pool(int argc, char **argv) {
  struct pool_args *a = malloc(sizeof *a);
  struct machine *m = calloc(1, sizeof *m);
  static struct option_result parsed; /* large: off the stack */
  if (!a || !m) {
    free(a);
    free(m);
    return fail(EXIT_SHORT, "pool", "out of memory");
  }
  int rc = parse_args(argc, argv, a, &parsed);
  if (rc == EXIT_DONE) {
    int root_rc = status_check_root(a->root);
    if (root_rc)
      rc = usage_error("pool", "--root %s: %s (it names a directory holding a captured sys/ and proc/ tree)", a->root,
                       strerror(-root_rc));
  }
  if (rc == EXIT_DONE) {
    m->count = pool_list_at(a->root, m->pools, HUGIFY_MAX_HUGETLB_SIZES);
    if (m->count < 0) m->count = 0;
    m->default_size = pool_default_size_at(a->root);
    pool_size_list(m->pools, (unsigned)m->count, m->sizes, sizeof m->sizes);
    rc = check_against_machine(argv, &parsed, m, a);
  }
  if (rc == EXIT_DONE) {
    a->json_out = json_output_open(&a->json, "pool");
    a->text = json_output_text(&a->json);
    if (a->json.wanted && !a->json_out) rc = EXIT_USAGE;
  }
  if (rc == EXIT_DONE) {
    if (m->count == 0 && strcmp(a->verb, "show") != 0)
      rc = fail(EXIT_PRIVILEGE, "pool", "this kernel has no hugetlb pages (it needs CONFIG_HUGETLBFS)");
    else if (strcmp(a->verb, "show") == 0) rc = pool_show(a);
    else if (strcmp(a->verb, "mount") == 0) rc = pool_mount(a, m);
    else rc = pool_set(a, m);
    if (!json_output_close(a->json_out, &a->json, "pool") && rc == EXIT_DONE) rc = EXIT_SHORT;
  }
  free(a);
  free(m);
  return rc;
}
