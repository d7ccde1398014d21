/* SPDX-License-Identifier: MIT */
/* manual.h - the man pages hugify(1), hugify-COMMAND(1) and the bash completion, generated from the command
 * table and the option tables, the same source as --help, so they cannot drift. The build runs them through
 * the hidden `hugify help --man DIR` and `hugify help --completion` (src/cli/CMakeLists.txt). */
#ifndef HUGIFY_MANUAL_H
#define HUGIFY_MANUAL_H

#include <stddef.h>
#include <stdio.h>

#include "cli.h"

/* hugify(1): `overview` is the text of `hugify --help`. */
void manual_page_main(const struct command *commands, size_t count, const char *overview, FILE *out);
/* hugify-NAME(1), from the command's help (or, while it has none, its usage text, verbatim). */
void manual_page_command(const struct command *command, FILE *out);
/* The bash completion script: function _hugify, registered for hugify. */
void manual_completion(const struct command *commands, size_t count, FILE *out);

#endif
