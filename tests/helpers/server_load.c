/* SPDX-License-Identifier: MIT */
/* server_load - the load client of run_shm_server: one connection, REQUESTS requests of "WALK STEPS",
 * each answer read before the next request (so the figure is the server's latency-bound throughput).
 * Bounded in count and in time: it stops after REQUESTS requests or SECONDS seconds, whichever is first.
 *
 *   server_load (--port PORT | --port-file FILE) [--requests N] [--steps N] [--seconds S] [--quit]
 *
 * Prints "requests N", "seconds S" and "requests per second R". Exit 0, or 1 when the server cannot be
 * reached or stops answering (the message says which). --quit sends QUIT at the end (the server exits). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int ask(int fd, const char *request, char *answer, size_t cap) {
  size_t length = strlen(request);
  if (write(fd, request, length) != (ssize_t)length) return -1;
  size_t used = 0;
  while (used + 1 < cap) {
    ssize_t n = read(fd, answer + used, 1);
    if (n <= 0) return -1;
    if (answer[used++] == '\n') break;
  }
  answer[used] = '\0';
  return 0;
}

int main(int argc, char **argv) {
  int port = 0;
  long requests = 1000, steps = 10000;
  double seconds = 30;
  int quit = 0;
  for (int i = 1; i < argc; i++) {
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--quit") == 0) { quit = 1; continue; }
    if (!value) { fprintf(stderr, "server_load: %s needs a value\n", argv[i]); return 2; }
    if (strcmp(argv[i], "--port") == 0) port = atoi(value);
    else if (strcmp(argv[i], "--port-file") == 0) {
      FILE *f = fopen(value, "r");
      if (!f || fscanf(f, "%d", &port) != 1) { fprintf(stderr, "server_load: cannot read a port from %s\n", value); return 1; }
      fclose(f);
    } else if (strcmp(argv[i], "--requests") == 0) requests = atol(value);
    else if (strcmp(argv[i], "--steps") == 0) steps = atol(value);
    else if (strcmp(argv[i], "--seconds") == 0) seconds = atof(value);
    else { fprintf(stderr, "server_load: unknown option %s\n", argv[i]); return 2; }
    i++;
  }
  if (port <= 0 || port > 65535) { fprintf(stderr, "server_load: no port given\n"); return 2; }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
    fprintf(stderr, "server_load: cannot connect to 127.0.0.1:%d: %m\n", port);
    return 1;
  }
  char request[64], answer[256];
  snprintf(request, sizeof request, "WALK %ld\n", steps);
  double start = now_seconds(), elapsed = 0;
  long done = 0;
  for (; done < requests && elapsed < seconds; done++) {
    if (ask(fd, request, answer, sizeof answer) != 0 || strncmp(answer, "OK ", 3) != 0) {
      fprintf(stderr, "server_load: the server stopped answering after %ld requests\n", done);
      return 1;
    }
    elapsed = now_seconds() - start;
  }
  if (quit) ask(fd, "QUIT\n", answer, sizeof answer);
  close(fd);
  printf("requests %ld\nseconds %.6f\nrequests per second %.1f\n", done, elapsed, elapsed > 0 ? (double)done / elapsed : 0.0);
  return 0;
}
