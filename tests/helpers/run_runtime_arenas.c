/* SPDX-License-Identifier: MIT */
/* run_runtime_arenas.c - maps pieces the way a runtime maps its arenas (1 MiB and 256 KiB anonymous read+write
 * mmaps), then checks that each behaves as its own mapping: its bytes stay its own, munmap of one piece
 * leaves its neighbours, mprotect of one piece changes only it, mremap moves it with its bytes, a forked
 * child reads them. Under `hugify run` (HUGIFY_RUNTIME_ARENAS, on by default) the pieces come out of the preload's
 * 2 MiB regions. Then, if the unmapped piece was on a huge page it shared with a neighbour, whether that
 * page was split (so the unmapped part was freed at once: "split yes", else "split no"; "split n/a" when it
 * was not huge or the page flags cannot be read). Prints "piece ADDRESS LENGTH" lines, then "ready" and
 * waits for stdin to close (--hold); exit status 0 when every check held, 1 otherwise.
 * --signals: maps and unmaps 1 MiB pieces in a loop while a timer's signal handler does the same, so the
 * handler often interrupts the carver's lock holder (its own thread): the handler must get an ordinary
 * mapping, not wait for a lock that cannot be released. Prints "signals N" and exits 0 (a hang is the bug). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define PIECES 48

static int check(unsigned char *p, size_t length, unsigned char value) {
  for (size_t i = 0; i < length; i += 4096)
    if (p[i] != value || p[length - 1] != value) return 0;
  return 1;
}

/* Whether the page at `address` is part of a transparent huge page (pagemap's PFN, then kpageflags' THP
 * bit; both need CAP_SYS_ADMIN): 1, 0, or -1 when it cannot be told. */
static int on_huge_page(const void *address) {
  uint64_t entry = 0, flags = 0;
  int pagemap = open("/proc/self/pagemap", O_RDONLY), kpageflags = open("/proc/kpageflags", O_RDONLY);
  int result = -1;
  if (pagemap >= 0 && kpageflags >= 0 &&
      pread(pagemap, &entry, sizeof entry, (off_t)((uintptr_t)address / 4096 * 8)) == sizeof entry &&
      (entry >> 63) && (entry & ((1ull << 55) - 1)) &&
      pread(kpageflags, &flags, sizeof flags, (off_t)((entry & ((1ull << 55) - 1)) * 8)) == sizeof flags)
    result = (flags >> 22) & 1; /* KPF_THP */
  if (pagemap >= 0) close(pagemap);
  if (kpageflags >= 0) close(kpageflags);
  return result;
}

/* The page of the same 2 MiB window next to [piece, piece + length), or NULL when the piece fills it. */
static unsigned char *window_neighbour(unsigned char *piece, size_t length) {
  uintptr_t window = (uintptr_t)piece & ~(uintptr_t)((2u << 20) - 1);
  if ((uintptr_t)piece > window) return piece - 4096;
  if ((uintptr_t)piece + length < window + (2u << 20)) return piece + length;
  return NULL;
}

static volatile sig_atomic_t handled, handler_failed;

static void map_in_handler(int signal_number) {
  (void)signal_number;
  unsigned char *p = mmap(NULL, 1u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    handler_failed = 1;
    return;
  }
  p[0] = 1;
  munmap(p, 1u << 20);
  handled++;
}

static int signals(void) {
  struct sigaction action = {.sa_handler = map_in_handler, .sa_flags = SA_RESTART};
  sigaction(SIGALRM, &action, NULL);
  struct itimerval every = {.it_interval = {0, 50}, .it_value = {0, 50}};
  setitimer(ITIMER_REAL, &every, NULL);
  for (int i = 0; i < 20000 && handled < 2000; i++) {
    unsigned char *p = mmap(NULL, 1u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    p[0] = 1;
    munmap(p, 1u << 20);
  }
  struct itimerval stop = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &stop, NULL);
  printf("signals %d\n", (int)handled);
  return handler_failed ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--signals") == 0) return signals();
  int hold = argc > 1 && strcmp(argv[1], "--hold") == 0, ok = 1;
  unsigned char *piece[PIECES];
  size_t length[PIECES];
  for (int i = 0; i < PIECES; i++) {
    length[i] = i % 3 == 2 ? 256u << 10 : 1u << 20;
    piece[i] = mmap(NULL, length[i], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (piece[i] == MAP_FAILED) return 1;
    ok &= check(piece[i], length[i], 0); /* fresh memory is zero */
    memset(piece[i], i + 1, length[i]);
  }
  for (int i = 0; i < PIECES; i++) {
    ok &= check(piece[i], length[i], (unsigned char)(i + 1));
    printf("piece %lx %zu\n", (unsigned long)(uintptr_t)piece[i], length[i]);
  }
  unsigned char *neighbour = window_neighbour(piece[20], length[20]);
  int was_huge = neighbour && on_huge_page(piece[20]) == 1 && on_huge_page(neighbour) == 1;
  munmap(piece[20], length[20]); /* a hole: the neighbours stay */
  printf("split %s\n", !was_huge ? "n/a" : on_huge_page(neighbour) == 0 ? "yes" : "no");
  ok &= check(piece[19], length[19], 20) && check(piece[21], length[21], 22);
  ok &= mprotect(piece[22], length[22], PROT_READ) == 0 && check(piece[22], length[22], 23);
  ok &= check(piece[23], length[23], 24);
  piece[23][0] = 24; /* still writable */
  unsigned char *moved = mremap(piece[24], length[24], 2 * length[24], MREMAP_MAYMOVE);
  ok &= moved != MAP_FAILED && check(moved, length[24], 25) && moved[2 * length[24] - 1] == 0;
  ok &= check(piece[25], length[25], 26);
  pid_t child = fork();
  if (child == 0) _exit(check(piece[30], length[30], 31) && check(piece[31], length[31], 32) ? 0 : 1);
  int status = 0;
  waitpid(child, &status, 0);
  ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
  printf("checks %s\n", ok ? "ok" : "FAILED");
  if (hold) {
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (read(STDIN_FILENO, buf, sizeof buf) > 0) {
    }
  }
  return ok ? 0 : 1;
}
