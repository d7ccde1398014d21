/* SPDX-License-Identifier: MIT */
/* pool_view.h - the pool and mount tables, as text and JSON: shared by `hugify status` and `hugify pool`. */
#ifndef HUGIFY_POOL_VIEW_H
#define HUGIFY_POOL_VIEW_H

#include <stdio.h>

#include "cli.h"
#include "hugify.h"
#include "status.h"

/* Common options of status and pool: --root DIR (a captured tree instead of this machine). */
#define VIEW_ROOT_OPTION(type, field) \
  OPT_STRING("root", type, field, "DIR", \
             "read (and for pool, write) the tree at DIR instead of this machine: a copy made\n" \
             "with tests/fixtures/pool/capture.sh, for tests and bug reports")

/* A value that may be STATUS_UNKNOWN: the number, or null. */
void view_json_known(struct json_writer *j, const char *key, uint64_t value);
/* "123" or "?" */
const char *view_number(uint64_t value, char *buf, size_t cap);

/* Rows per size (and per node when the machine has more than one). */
void view_pool_table(FILE *out, const struct hugify_pool *pools, unsigned count, const char *indent);
void view_pool_json(struct json_writer *j, const char *key, const struct hugify_pool *pools, unsigned count);

void view_mount_table(FILE *out, const struct status_snapshot *s, const char *indent);
void view_mount_json(struct json_writer *j, const char *key, const struct status_snapshot *s);

#endif
