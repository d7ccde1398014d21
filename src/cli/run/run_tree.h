/* SPDX-License-Identifier: MIT */
/* run_tree.h - the reports of every process of a `hugify run --report` tree, read back and summed. */
#ifndef HUGIFY_RUN_TREE_H
#define HUGIFY_RUN_TREE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "cli.h"

struct json_writer;

/* What acts on CMD's tree from outside while it runs (run_outside.c: the collapse of a static program), and
 * says so in the report. */
struct run_watcher {
  double interval;                                        /* seconds before the first pass */
  double (*pass)(void *context, pid_t root);              /* one pass over the tree of root; the seconds
                                                             until the next */
  void (*json)(void *context, struct json_writer *j);     /* its member(s) of the hugify.run/1 document */
  void (*text)(void *context, FILE *out);                 /* its lines of the table */
  void *context;
};

struct run_tree {
  json_t *processes;   /* array of hugify.report/2 objects, one per process that wrote one */
  unsigned unreadable; /* files in the directory that were not a report (a process killed mid-write) */
  const struct run_watcher *watcher; /* NULL: none */
};

/* Read every report in dir. 0, or -errno with a reason (the directory cannot be read). */
int run_tree_read(const char *dir, struct run_tree *tree, char *reason, size_t cap);
void run_tree_free(struct run_tree *tree);

/* Start CMD (path, argv) as a child with HUGIFY_RUN_PID set to its pid, pass signals on to it, wait for it
 * (with a watcher: its passes, each after the wait the one before asked for, until CMD ends), then read the reports in `dir`
 * (where HUGIFY_REPORT points), write them to `target` (FILE, or - for stderr: a table, or JSON with `json`)
 * and remove `dir`. dir and target NULL: no report. Returns, or ends like, CMD's status. */
int run_tree_run(const char *path, char *const argv[], const char *dir, const char *target, bool json,
                 const struct run_watcher *watcher);

/* The hugify.run/1 document (docs/run.md): sums over the tree, the largest process, every report. */
void run_tree_write_json(FILE *out, const struct run_tree *tree, const char *command, int exit_status);
/* The same for a person: one row per process and a sum. */
void run_tree_write_text(FILE *out, const struct run_tree *tree, const char *command);

#endif
