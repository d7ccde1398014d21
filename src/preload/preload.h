/* preload.h - the steps libhugify-preload.so runs inside the host, one file each. */
#ifndef HUGIFY_PRELOAD_H
#define HUGIFY_PRELOAD_H

#include "options.h"

/* text_step.c: hugify_remap_text() with the HUGIFY_TEXT_* options, before main. Never fails the host. */
void preload_text_step(const struct hugify_options *options);

#endif
