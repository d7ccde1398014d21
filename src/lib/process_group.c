/* SPDX-License-Identifier: MIT */
/* process_group.c - programs in process groups of their own, beside hugify (process_group.h). */
#include "process_group.h"
#include "os.h"

#include "measure.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GROUP_TABLE 16

static atomic_int live_groups[GROUP_TABLE]; /* pgids of started, not yet reaped groups; 0 = free slot */
static atomic_int interrupted;



static void remember(pid_t pgid) {
  for (int i = 0; i < GROUP_TABLE; i++) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&live_groups[i], &expected, (int)pgid)) return;
  }
}

static void forget(pid_t pgid) {
  for (int i = 0; i < GROUP_TABLE; i++) {
    int expected = (int)pgid;
    atomic_compare_exchange_strong(&live_groups[i], &expected, 0);
  }
}

void group_signal_all(int signal_number) {
  atomic_store(&interrupted, 1);
  for (int i = 0; i < GROUP_TABLE; i++) {
    int pgid = atomic_load(&live_groups[i]);
    if (pgid > 0) kill(-pgid, signal_number);
  }
}

bool group_interrupted(void) { return atomic_load(&interrupted) != 0; }

int group_start(const char *const *argv, const char *const *set, int output_fd, struct group_process *out) {
  memset(out, 0, sizeof *out);
  /* The measurement module's start: stdin on /dev/null, output as asked, the child waiting at a gate
   * before it execs; while it waits, it is put in a group of its own (a parent may do that before exec). */
  struct measure_command command = {.argv = argv, .stdout_fd = output_fd, .stderr_fd = output_fd, .set = set};
  struct measure_child child;
  int rc = measure_start(&command, &child);
  if (rc != 0) return rc;
  setpgid(child.pid, child.pid);
  remember(child.pid);
  measure_release(&child);
  out->pid = child.pid;
  out->started = child.started;
  return 0;
}

int group_start_shell(const char *command, int output_fd, struct group_process *out) {
  const char *argv[] = {"/bin/sh", "-c", command, NULL};
  return group_start(argv, NULL, output_fd, out);
}

static double timeval_seconds(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; }

/* wait4 the leader: blocking or not. True when reaped. */
static bool reap(struct group_process *process, bool block) {
  if (process->pid <= 0) return true;
  struct rusage usage;
  memset(&usage, 0, sizeof usage);
  int status;
  pid_t got;
  do got = wait4(process->pid, &status, block ? 0 : WNOHANG, &usage);
  while (got < 0 && errno == EINTR && block && !group_interrupted());
  if (got != process->pid) {
    if (got < 0 && errno == ECHILD) { /* reaped elsewhere: nothing more to learn */
      forget(process->pid);
      process->pid = 0;
      return true;
    }
    return false;
  }
  process->status = status;
  process->user_seconds = timeval_seconds(usage.ru_utime);
  process->system_seconds = timeval_seconds(usage.ru_stime);
  /* The rest of the group (a daemon's workers) must not outlive the leader. */
  kill(-process->pid, SIGKILL);
  forget(process->pid);
  process->pid = 0;
  return true;
}

bool group_exited(struct group_process *process) { return reap(process, false); }

int group_wait(struct group_process *process, double timeout_seconds) {
  if (timeout_seconds < 0) {
    while (!reap(process, true))
      if (group_interrupted()) return -EINTR;
    return 0;
  }
  double deadline = measure_now() + timeout_seconds;
  for (double pause = 0.001;; pause = pause < 0.05 ? pause * 2 : 0.05) {
    if (reap(process, false)) return 0;
    if (group_interrupted()) return -EINTR;
    if (measure_now() >= deadline) return -ETIMEDOUT;
    os_sleep(pause);
  }
}

int group_stop(struct group_process *process, double term_seconds) {
  if (process->pid <= 0 || group_exited(process)) return 0;
  pid_t pgid = process->pid;
  kill(-pgid, SIGTERM);
  kill(pgid, SIGCONT); /* a stopped leader could not act on SIGTERM */
  double deadline = measure_now() + term_seconds;
  for (double pause = 0.001; measure_now() < deadline; pause = pause < 0.05 ? pause * 2 : 0.05) {
    if (reap(process, false)) return 0;
    os_sleep(pause);
  }
  kill(-pgid, SIGKILL);
  reap(process, true);
  return 1;
}

static bool port_accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, (struct sockaddr *)&address, sizeof address) == 0;
  close(fd);
  return ok;
}

void group_describe_status(int status, char *out, size_t cap) {
  if (WIFEXITED(status)) snprintf(out, cap, "exit status %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(out, cap, "killed by signal %d (SIG%s)", WTERMSIG(status),
             sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
  else snprintf(out, cap, "wait status %d", status);
}

int group_wait_ready(struct group_process *server, int port, const char *ready_command, double timeout_seconds,
                     char *reason, size_t cap) {
  double deadline = measure_now() + timeout_seconds;
  int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  int rc = -ETIMEDOUT;
  for (;;) {
    if (group_exited(server)) {
      char how[64];
      group_describe_status(server->status, how, sizeof how);
      snprintf(reason, cap, "the server ended before it was ready (%s)", how);
      rc = -ECHILD;
      break;
    }
    if (group_interrupted()) { rc = -EINTR; break; }
    bool ready = false;
    if (port > 0) {
      ready = port_accepts(port);
    } else if (ready_command) {
      struct group_process probe;
      if (group_start_shell(ready_command, null, &probe) == 0) {
        double left = deadline - measure_now();
        if (group_wait(&probe, left > 0 ? left : 0) == 0) ready = WIFEXITED(probe.status) && WEXITSTATUS(probe.status) == 0;
        else group_stop(&probe, 1.0);
      }
    }
    if (ready) { rc = 0; break; }
    if (measure_now() >= deadline) {
      if (port > 0) snprintf(reason, cap, "nothing accepted connections on 127.0.0.1:%d within %.0f s", port, timeout_seconds);
      else snprintf(reason, cap, "the ready command did not succeed within %.0f s: %s", timeout_seconds, ready_command);
      break;
    }
    os_sleep(0.1);
  }
  if (null >= 0) close(null);
  return rc;
}
