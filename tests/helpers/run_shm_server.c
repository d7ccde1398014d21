/* SPDX-License-Identifier: MIT */
/* run_shm_server - the bundled test server of the server tests (`check --load`, shared memory under
 * `run`, `inspect`, `collapse`): a shared anonymous region and a private heap, both filled, served on
 * 127.0.0.1 by a tiny line protocol that the load client (server_load) drives.
 *
 *   run_shm_server [--port PORT] [--port-file FILE] [--shared SIZE] [--heap SIZE] [--sysv SIZE]
 *                  [--die-after N]
 *
 * --port PORT       listen on 127.0.0.1:PORT (default 0: the kernel picks one)
 * --port-file FILE  write the port there once listening (written to FILE.tmp, then renamed)
 * --shared SIZE     mmap(MAP_SHARED|MAP_ANONYMOUS) region, filled (default 64M)
 * --heap SIZE       malloc'd region, filled (default 64M)
 * --sysv SIZE       a SysV segment (shmget + shmat), filled, removed at exit (default none)
 * --die-after N     SIGKILL itself while answering the Nth request (a server that dies mid-round; no core)
 *
 * Requests, one per line, answered with one line:
 *   PING        -> PONG
 *   WALK N      -> OK CHECKSUM     N dependent random reads spread over the shared region and the heap
 *   MAPS        -> SHARED 0xADDR SIZE HEAP 0xADDR SIZE SYSV 0xADDR SIZE PID PID
 *   QUIT        -> BYE, and the server exits 0
 * SIGTERM and SIGINT end it with status 0 (the way a well-behaved server stops). Connections are served
 * one at a time, which is enough for a test load and keeps the server's CPU time easy to reason about.
 * It prints "listening PORT" on stdout. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <unistd.h>

struct region {
  uint64_t *words;
  size_t size;
};

static volatile sig_atomic_t stopping;
static void on_stop(int signal_number) { (void)signal_number; stopping = 1; }

static size_t parse_size(const char *text) {
  char *end;
  unsigned long long value = strtoull(text, &end, 10);
  switch (*end) {
  case 'k': case 'K': value <<= 10; break;
  case 'm': case 'M': value <<= 20; break;
  case 'g': case 'G': value <<= 30; break;
  case '\0': break;
  default: fprintf(stderr, "run_shm_server: bad size '%s'\n", text); exit(2);
  }
  return (size_t)value;
}

static void fill(struct region *r, uint64_t salt) {
  size_t count = r->size / sizeof(uint64_t);
  for (size_t i = 0; i < count; i++) r->words[i] = (i * UINT64_C(0x9e3779b97f4a7c15)) ^ salt;
}

/* N dependent loads alternating between the regions: each index comes from the word read before. */
static uint64_t walk(struct region *regions, int region_count, uint64_t steps) {
  uint64_t x = 0x12345678;
  for (uint64_t i = 0; i < steps; i++) {
    struct region *r = &regions[i % (uint64_t)region_count];
    size_t count = r->size / sizeof(uint64_t);
    x = r->words[(x * UINT64_C(0xbf58476d1ce4e5b9) >> 7) % count] + i;
  }
  return x;
}

static void write_port_file(const char *path, int port) {
  char temporary[4096];
  snprintf(temporary, sizeof temporary, "%s.tmp", path);
  FILE *f = fopen(temporary, "w");
  if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 || rename(temporary, path) != 0) {
    perror("run_shm_server: port file");
    exit(1);
  }
}

/* Reads one line (without its newline) from the socket; false at end of stream. */
static bool read_line(int fd, char *line, size_t cap) {
  size_t used = 0;
  while (used + 1 < cap) {
    char c;
    ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) {
      if (stopping) return false;
      continue;
    }
    if (n <= 0) return false;
    if (c == '\n') break;
    line[used++] = c;
  }
  line[used] = '\0';
  return true;
}

int main(int argc, char **argv) {
  int port = 0;
  const char *port_file = NULL;
  size_t shared_size = 64u << 20, heap_size = 64u << 20, sysv_size = 0;
  long die_after = 0;
  for (int i = 1; i < argc; i++) {
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (!value) { fprintf(stderr, "run_shm_server: %s needs a value\n", argv[i]); return 2; }
    if (strcmp(argv[i], "--port") == 0) port = atoi(value);
    else if (strcmp(argv[i], "--port-file") == 0) port_file = value;
    else if (strcmp(argv[i], "--shared") == 0) shared_size = parse_size(value);
    else if (strcmp(argv[i], "--heap") == 0) heap_size = parse_size(value);
    else if (strcmp(argv[i], "--sysv") == 0) sysv_size = parse_size(value);
    else if (strcmp(argv[i], "--die-after") == 0) die_after = atol(value);
    else { fprintf(stderr, "run_shm_server: unknown option %s\n", argv[i]); return 2; }
    i++;
  }

  struct region regions[3];
  int region_count = 0;
  struct region shared = {0}, heap = {0}, sysv = {0};
  if (shared_size) {
    void *p = mmap(NULL, shared_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("run_shm_server: mmap"); return 1; }
    shared = (struct region){p, shared_size};
    fill(&shared, 1);
    regions[region_count++] = shared;
  }
  if (heap_size) {
    void *p = malloc(heap_size);
    if (!p) { perror("run_shm_server: malloc"); return 1; }
    heap = (struct region){p, heap_size};
    fill(&heap, 2);
    regions[region_count++] = heap;
  }
  int sysv_id = -1;
  if (sysv_size) {
    sysv_id = shmget(IPC_PRIVATE, sysv_size, IPC_CREAT | 0600);
    void *p = sysv_id < 0 ? (void *)-1 : shmat(sysv_id, NULL, 0);
    if (sysv_id >= 0) shmctl(sysv_id, IPC_RMID, NULL); /* removed once detached: nothing left behind */
    if (p == (void *)-1) { perror("run_shm_server: shmget/shmat"); return 1; }
    sysv = (struct region){p, sysv_size};
    fill(&sysv, 3);
    regions[region_count++] = sysv;
  }

  struct sigaction action = {.sa_handler = on_stop};
  sigaction(SIGTERM, &action, NULL); /* no SA_RESTART: accept and read return EINTR */
  sigaction(SIGINT, &action, NULL);
  signal(SIGPIPE, SIG_IGN);

  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int yes = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 16) != 0) {
    perror("run_shm_server: bind/listen");
    return 1;
  }
  socklen_t length = sizeof address;
  getsockname(listener, (struct sockaddr *)&address, &length);
  port = ntohs(address.sin_port);
  if (port_file) write_port_file(port_file, port);
  printf("listening %d\n", port);
  fflush(stdout);

  long requests = 0;
  while (!stopping) {
    int client = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (client < 0) continue; /* EINTR: the loop condition decides */
    char line[256], answer[256];
    bool quit = false;
    while (!stopping && read_line(client, line, sizeof line)) {
      if (die_after && ++requests >= die_after) raise(SIGKILL);
      unsigned long long steps;
      if (strcmp(line, "PING") == 0) snprintf(answer, sizeof answer, "PONG\n");
      else if (sscanf(line, "WALK %llu", &steps) == 1)
        snprintf(answer, sizeof answer, "OK %llu\n", (unsigned long long)walk(regions, region_count, steps));
      else if (strcmp(line, "MAPS") == 0)
        snprintf(answer, sizeof answer, "SHARED %p %zu HEAP %p %zu SYSV %p %zu PID %d\n", (void *)shared.words,
                 shared.size, (void *)heap.words, heap.size, (void *)sysv.words, sysv.size, (int)getpid());
      else if (strcmp(line, "QUIT") == 0) { snprintf(answer, sizeof answer, "BYE\n"); quit = true; }
      else snprintf(answer, sizeof answer, "ERROR unknown request\n");
      if (write(client, answer, strlen(answer)) < 0) break;
      if (quit) break;
    }
    close(client);
    if (quit) break;
  }
  close(listener);
  return 0; /* the regions stay mapped to the end, so an exit report measures them */
}
