/* SPDX-License-Identifier: MIT */
/* static_hello.c - a statically linked program (built with -static): `hugify run` must say that
 * LD_PRELOAD cannot reach it, and still run it with its own exit status and output. */
#include <stdio.h>

int main(void) {
  puts("static hello");
  return 5;
}
