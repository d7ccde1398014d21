/* SPDX-License-Identifier: MIT */
/* scale_host - a host of thousands of processes for the agent to serve (bench/agent_scale.sh, issue 34):
 * PROCESSES children kept alive for SECONDS, of three kinds, each with its heap written page by page on
 * 4 KiB pages (never advised):
 *
 *   small   most of them: a heap of SMALL_MIN..SMALL_MAX, a life of LIFE_MIN..LIFE_MAX seconds, then
 *           replaced by a new one, so hundreds come and go every minute (comm "scale_small")
 *   medium  one in MEDIUM_EVERY of the replacements: a MEDIUM heap (above the agent's default --min-rss,
 *           so the agent measures and collapses it) and the same short life (comm "scale_medium")
 *   large   LARGE processes alive for the whole run, a dense heap of LARGE_MIN..LARGE_MAX (comm "scale_large")
 *
 *   scale_host [--processes 2000] [--large 4] [--large-min 256M] [--large-max 448M] [--small-min 1M]
 *              [--small-max 2M] [--medium 24M] [--medium-every 100] [--life-min 10] [--life-max 120]
 *              [--seconds 1800] [--uid UID]
 *
 * The children drop to --uid (default 43434, a uid of their own, so an agent can select exactly them with
 * --uid) and die with their parent (PR_SET_PDEATHSIG). Every 10 s, and at the end, one line on stdout:
 * "scale_host: T s: live N (small S, medium M, large L), started X, exited Y". SIGTERM/SIGINT end the run:
 * every child is killed and reaped before it exits. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "units.h"

enum kind { SMALL, MEDIUM, LARGE, KINDS };
static const char *const kind_names[KINDS] = {"scale_small", "scale_medium", "scale_large"};

struct settings {
  long processes, large, medium_every;
  uint64_t large_min, large_max, small_min, small_max, medium;
  double life_min, life_max, seconds;
  uid_t uid;
};

struct child {
  pid_t pid;
  enum kind kind;
};

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double uniform(double lo, double hi) { return lo + (hi - lo) * ((double)random() / RAND_MAX); }

/* The child: its name, its uid, its heap written, then its life (forever for a large one). */
static void run_child(const struct settings *s, enum kind kind, uint64_t heap, double life) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) _exit(0); /* the parent died before the line above */
  prctl(PR_SET_NAME, kind_names[kind]);
  if (getuid() == 0 && (setgid(s->uid) != 0 || setuid(s->uid) != 0)) _exit(3);
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  char *p = mmap(NULL, heap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) _exit(1);
  for (uint64_t at = 0; at < heap; at += 4096) p[at] = (char)(at >> 12 | 1);
  if (kind == LARGE) for (;;) pause();
  struct timespec ts = {(time_t)life, (long)((life - (double)(time_t)life) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
  _exit(0);
}

static pid_t start_child(const struct settings *s, enum kind kind) {
  uint64_t heap = kind == LARGE    ? (uint64_t)uniform((double)s->large_min, (double)s->large_max)
                  : kind == MEDIUM ? s->medium
                                   : (uint64_t)uniform((double)s->small_min, (double)s->small_max);
  heap = (heap + 4095) & ~(uint64_t)4095;
  double life = uniform(s->life_min, s->life_max);
  long seed = random();
  pid_t pid = fork();
  if (pid == 0) {
    srandom((unsigned)seed);
    run_child(s, kind, heap, life);
  }
  return pid;
}

static int parse(int argc, char **argv, struct settings *s) {
  for (int i = 1; i < argc; i++) {
    const char *name = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (!value) goto usage;
    i++;
    uint64_t bytes = 0;
    if (!strcmp(name, "--processes")) s->processes = atol(value);
    else if (!strcmp(name, "--large")) s->large = atol(value);
    else if (!strcmp(name, "--medium-every")) s->medium_every = atol(value);
    else if (!strcmp(name, "--life-min")) s->life_min = atof(value);
    else if (!strcmp(name, "--life-max")) s->life_max = atof(value);
    else if (!strcmp(name, "--seconds")) s->seconds = atof(value);
    else if (!strcmp(name, "--uid")) s->uid = (uid_t)atol(value);
    else if (!parse_size(value, &bytes)) goto usage;
    else if (!strcmp(name, "--large-min")) s->large_min = bytes;
    else if (!strcmp(name, "--large-max")) s->large_max = bytes;
    else if (!strcmp(name, "--small-min")) s->small_min = bytes;
    else if (!strcmp(name, "--small-max")) s->small_max = bytes;
    else if (!strcmp(name, "--medium")) s->medium = bytes;
    else goto usage;
  }
  if (s->processes < 1 || s->large < 0 || s->large > s->processes || s->medium_every < 1 || s->life_min <= 0 ||
      s->life_max < s->life_min || s->seconds <= 0 || s->small_min < 4096 || s->small_max < s->small_min ||
      s->large_max < s->large_min || s->large_min < 4096 || s->medium < 4096)
    goto usage;
  return 0;
usage:
  fprintf(stderr, "usage: scale_host [--processes N] [--large N] [--large-min SIZE] [--large-max SIZE] "
                  "[--small-min SIZE] [--small-max SIZE] [--medium SIZE] [--medium-every N] [--life-min S] "
                  "[--life-max S] [--seconds S] [--uid UID]\n");
  return 2;
}

int main(int argc, char **argv) {
  struct settings s = {.processes = 2000, .large = 4, .medium_every = 100, .large_min = 256ull << 20,
                       .large_max = 448ull << 20, .small_min = 1ull << 20, .small_max = 2ull << 20,
                       .medium = 24ull << 20, .life_min = 10, .life_max = 120, .seconds = 1800, .uid = 43434};
  if (parse(argc, argv, &s) != 0) return 2;
  setvbuf(stdout, NULL, _IOLBF, 0);
  srandom((unsigned)getpid());
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  struct child *children = calloc((size_t)s.processes, sizeof *children);
  if (!children) return 1;
  uint64_t started = 0, exited = 0, replacements = 0;
  double start = now(), next_line = start;
  while (!stop) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      exited++;
      for (long i = 0; i < s.processes; i++)
        if (children[i].pid == pid) children[i].pid = 0;
    }
    double t = now();
    if (t - start >= s.seconds) break;
    long live[KINDS] = {0};
    for (long i = 0; i < s.processes && !stop; i++) {
      if (!children[i].pid) { /* the first fill, or a replacement */
        enum kind kind = i < s.large ? LARGE : SMALL;
        if (kind == SMALL && started >= (uint64_t)s.processes && ++replacements % (uint64_t)s.medium_every == 0)
          kind = MEDIUM;
        pid_t child = start_child(&s, kind);
        if (child < 0) break; /* out of pids or memory for now: try again next round */
        children[i] = (struct child){child, kind};
        started++;
      }
      live[children[i].kind]++;
    }
    if (t >= next_line) {
      printf("scale_host: %.0f s: live %ld (small %ld, medium %ld, large %ld), started %llu, exited %llu\n", t - start,
             live[SMALL] + live[MEDIUM] + live[LARGE], live[SMALL], live[MEDIUM], live[LARGE],
             (unsigned long long)started, (unsigned long long)exited);
      next_line += 10;
    }
    usleep(100 * 1000);
  }
  for (long i = 0; i < s.processes; i++)
    if (children[i].pid) kill(children[i].pid, SIGKILL);
  while (wait(NULL) > 0 || errno == EINTR) {}
  printf("scale_host: %.0f s: the end, started %llu\n", now() - start, (unsigned long long)started);
  free(children);
  return 0;
}
