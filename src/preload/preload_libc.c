/* SPDX-License-Identifier: MIT */
/* preload_libc.c - the only file of the preload that names a C library's own functions (preload.h,
 * "the C library"). The same sources build two preloads: libhugify-preload.so against glibc and
 * libhugify-preload-musl.so with musl-gcc (src/preload/CMakeLists.txt).
 *
 * The glibc build names glibc's own functions (gnu_get_libc_version, mallopt, __register_atfork, which
 * glibc's pthread_atfork calls from libc_nonshared.a) weakly. musl's loader reads LD_PRELOAD too, and
 * stops a program, exit 127, on a symbol it cannot resolve; a weak one it resolves to 0. So the glibc
 * preload that `hugify env` puts into every process of a service or a container also loads into a musl
 * program (Alpine's), finds those functions absent, and runs only the mmap cover there (preload.c). */
#include "preload.h"

#include "units.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __GLIBC__
#include <gnu/libc-version.h>
#include <malloc.h>

extern const char *gnu_get_libc_version(void) __attribute__((weak));
extern int mallopt(int parameter, int value) __attribute__((weak));
extern int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void), void *dso)
    __attribute__((weak));
/* this object's, from crtbeginS.o: glibc drops the handlers of an object that is unloaded */
extern void *__dso_handle __attribute__((weak, visibility("hidden")));

bool preload_libc_is_native(void) { return gnu_get_libc_version != NULL; }

bool preload_glibc_before(unsigned major, unsigned minor) {
  return gnu_get_libc_version && !version_at_least(gnu_get_libc_version(), major, minor);
}

void preload_malloc_initialize(void) {
  /* M_KEEP: a parameter glibc ignores ("not used in this malloc"); the call only initializes malloc */
  if (mallopt) mallopt(M_KEEP, 0);
}

int preload_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  if (__register_atfork) return __register_atfork(prepare, parent, child, __dso_handle);
  /* Another C library (a musl program under hugify env's environment): its own pthread_atfork. */
  int (*atfork)(void (*)(void), void (*)(void), void (*)(void)) =
      (int (*)(void (*)(void), void (*)(void), void (*)(void)))dlsym(RTLD_DEFAULT, "pthread_atfork");
  return atfork ? atfork(prepare, parent, child) : ENOSYS;
}

void preload_libc_hand_on(void) {}
#else
/* Built with musl-gcc: musl is the C library, and it has none of glibc's malloc workaround to need. */
bool preload_libc_is_native(void) { return true; }
bool preload_glibc_before(unsigned major, unsigned minor) { return (void)major, (void)minor, false; }
void preload_malloc_initialize(void) {}
int preload_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  return pthread_atfork(prepare, parent, child);
}

#define MUSL_PRELOAD_NAME "libhugify-preload-musl.so"
#define GLIBC_PRELOAD_NAME "libhugify-preload.so"

/* glibc's loader cannot load this build (its DT_NEEDED libc.so is musl's, a linker script on a glibc
 * system: "invalid ELF header", exit 127), and a musl program may exec a glibc one (/bin/sh on a Debian
 * host). So its children find the glibc build in LD_PRELOAD instead, the one beside this file, which both
 * loaders load; without it there, none. */
void preload_libc_hand_on(void) {
  const char *list = getenv("LD_PRELOAD");
  Dl_info self;
  if (!list || !strstr(list, MUSL_PRELOAD_NAME) || !dladdr((void *)preload_libc_hand_on, &self) || !self.dli_fname)
    return;
  const char *slash = strrchr(self.dli_fname, '/');
  size_t directory = slash ? (size_t)(slash + 1 - self.dli_fname) : 0;
  char glibc_build[4096];
  if (directory + sizeof GLIBC_PRELOAD_NAME > sizeof glibc_build) return;
  memcpy(glibc_build, self.dli_fname, directory);
  memcpy(glibc_build + directory, GLIBC_PRELOAD_NAME, sizeof GLIBC_PRELOAD_NAME);
  bool present = access(glibc_build, R_OK) == 0;
  char *handed = malloc(strlen(list) + strlen(glibc_build) + 2);
  if (!handed) return;
  size_t used = 0;
  for (const char *entry = list; *entry;) { /* musl and glibc split the list at ':' and blanks */
    size_t length = strcspn(entry, ": \t\n");
    bool ours = length >= sizeof MUSL_PRELOAD_NAME - 1 &&
                memcmp(entry + length - (sizeof MUSL_PRELOAD_NAME - 1), MUSL_PRELOAD_NAME, sizeof MUSL_PRELOAD_NAME - 1) == 0;
    const char *kept = ours ? (present ? glibc_build : NULL) : entry;
    size_t kept_length = ours ? strlen(glibc_build) : length;
    if (kept && kept_length) {
      if (used) handed[used++] = ':';
      memcpy(handed + used, kept, kept_length);
      used += kept_length;
    }
    entry += length;
    entry += strspn(entry, ": \t\n");
  }
  handed[used] = '\0';
  setenv("LD_PRELOAD", handed, 1);
  free(handed);
}
#endif
