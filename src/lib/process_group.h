/* SPDX-License-Identifier: MIT */
/* process_group.h - programs that run beside hugify while it measures: a server under test and the load that
 * drives it (`hugify check --load`). Each runs in a process group of its own, so that stopping it stops
 * everything it started (postgres backends, the children of a `sh -c`), and so that a Ctrl-C at the
 * terminal reaches hugify alone, which then stops them in order. Every group started here is kept in a
 * small table until it is reaped, so a signal handler can stop them all (group_signal_all).
 *
 * Internal (src/lib). Returns 0 or -errno; reasons in words go into a caller's buffer. Never prints. */
#ifndef HUGIFY_PROCESS_GROUP_H
#define HUGIFY_PROCESS_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct group_process {
  pid_t pid;          /* the leader; its pid is the group's id; 0 once reaped */
  double started;     /* CLOCK_MONOTONIC seconds at exec */
  int status;         /* wait status, once reaped */
  double user_seconds, system_seconds; /* of the leader and the children it reaped, once reaped */
};

/* Start argv (argv[0] looked up in PATH) in a new process group: stdin /dev/null, stdout and stderr to
 * output_fd (or inherited when -1), "NAME=VALUE" of `set` (NULL-terminated, or NULL) in its environment. 0 or
 * -errno (fork failed; a program that cannot be executed exits 127/126 and is seen as an early exit). */
int group_start(const char *const *argv, const char *const *set, int output_fd, struct group_process *out);
/* Start `/bin/sh -c command` the same way. */
int group_start_shell(const char *command, int output_fd, struct group_process *out);

/* Reap the leader if it has exited (without waiting): true when it has (status and CPU times filled). */
bool group_exited(struct group_process *process);
/* Wait for the leader to exit, at most timeout_seconds (< 0: no limit). 0 when it exited, -ETIMEDOUT. A
 * signal to hugify does not end the wait early unless group_interrupted() says so (then -EINTR). */
int group_wait(struct group_process *process, double timeout_seconds);

/* Stop the whole group: SIGTERM, wait up to term_seconds for the leader, then SIGKILL to the group; the
 * leader is reaped either way, and what is left of the group gets SIGKILL. Returns 1 when SIGKILL was
 * needed, 0 when SIGTERM sufficed or it had exited already. */
int group_stop(struct group_process *process, double term_seconds);

/* Ready: a TCP connection to 127.0.0.1:port is accepted (port > 0), else `ready_command` (sh -c) exits 0,
 * polled every 100 ms for at most timeout_seconds. 0 when ready; -ETIMEDOUT (reason says which check);
 * -ECHILD when the server exited first (reason has its status); -EINTR when interrupted. */
int group_wait_ready(struct group_process *server, int port, const char *ready_command, double timeout_seconds,
                     char *reason, size_t cap);

/* For signal handlers (async-signal-safe): send `signal_number` to every live group started here, and
 * remember that hugify was interrupted. */
void group_signal_all(int signal_number);
bool group_interrupted(void);

/* "exit status 3", "killed by signal 9 (SIGKILL)" for a wait status. */
void group_describe_status(int status, char *out, size_t cap);

#endif
