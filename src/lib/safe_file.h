/* SPDX-License-Identifier: MIT */
/* safe_file.h - how hugify creates, replaces, appends to and reads files, often as root and often in
 * directories other users can write (/tmp, a service's working directory). Every file hugify writes goes
 * through here (the run report, the perf map, `pool --persist` files, the agent's metrics file, `env
 * --install` drop-ins), so the rules hold everywhere:
 *
 *  - Never through a link: the last component of a path hugify writes is opened with O_NOFOLLOW (or
 *    lstat'ed before a rename); a symbolic link there is refused with ELOOP, never followed and never
 *    replaced. (Links in the directory part are the caller's choice: that is the path the user named.)
 *  - Replace = new file + rename: the new contents go to a fresh temporary created with
 *    O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, under an unpredictable name (mkostemp) in the target's own
 *    directory; it is written, given its final mode, optionally fsync'ed, then renamed over the target. A
 *    reader sees the old file or the new one, never half of one; a link planted at a guessable name cannot
 *    redirect the write.
 *  - Only regular files are replaced. A character device or FIFO (/dev/null, a terminal, a pipe) is written
 *    *into* only when the caller allows it (SAFE_FILE_ALLOW_DEVICE: the user named that device), with
 *    O_NONBLOCK so that a FIFO without a reader fails instead of hanging; block devices, directories and
 *    sockets are always refused.
 *  - Append = O_WRONLY|O_APPEND|O_CREAT|O_NOFOLLOW, mode 0600, then fstat: a regular file owned by the
 *    effective user (perf's own rule for /tmp/perf-PID.map), else it is closed and refused.
 *  - Read = O_RDONLY|O_NONBLOCK, then fstat: a regular file (procfs and sysfs files are regular), else
 *    refused (a FIFO would hang the reader, /dev/zero would grow it without bound); reads stop at a cap.
 *
 * All functions return 0 (or an fd) on success, else -errno; `reason` (may be NULL) gets one clause saying
 * what was refused and why. Async-signal-unsafe (malloc in the caller's buffers only), thread-safe. */
#ifndef HUGIFY_SAFE_FILE_H
#define HUGIFY_SAFE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SAFE_FILE_ALLOW_DEVICE 1u /* a character device or FIFO at the target is written into, not replaced */
#define SAFE_FILE_DURABLE 2u      /* fsync the new file before the rename (files that must survive a crash) */

/* What is at `path` now, without following a final link. */
enum safe_file_kind {
  SAFE_FILE_ABSENT,
  SAFE_FILE_REGULAR,
  SAFE_FILE_LINK,
  SAFE_FILE_STREAM, /* character device or FIFO */
  SAFE_FILE_OTHER,  /* directory, block device, socket */
  SAFE_FILE_ERROR,  /* lstat failed for another reason than ENOENT */
};
enum safe_file_kind safe_file_kind(const char *path);

/* Replace the file at `path` with `length` bytes of `data` (temporary + rename, the rules above); the new
 * file gets `mode`. With SAFE_FILE_ALLOW_DEVICE, a character device or FIFO at `path` is written into. */
int safe_file_replace(const char *path, const void *data, size_t length, mode_t mode, unsigned flags, char *reason,
                      size_t cap);

/* Open `path` for appending (created 0600 when absent). Returns the fd (O_CLOEXEC) or -errno. */
int safe_file_open_append(const char *path, char *reason, size_t cap);

/* Open `path` read-write as a scratch file in a directory of our own (check's logs): created 0600 or
 * truncated, never through a symbolic link, refused unless a regular file of ours with one link; appending
 * when `append`. Returns the fd (O_CLOEXEC) or -errno with the reason. */
int safe_file_open_scratch(const char *path, bool append, char *reason, size_t cap);

/* Open `path` for reading: O_RDONLY|O_NONBLOCK|O_CLOEXEC, refused (-EINVAL) unless a regular file. With
 * `follow` false, a final link is refused too (-ELOOP). Returns the fd or -errno. */
int safe_file_open_read(const char *path, bool follow);

/* Write all of data to fd (EINTR and short writes retried). Returns 0 or -errno. */
int safe_file_write_all(int fd, const void *data, size_t length);

#ifdef __cplusplus
}
#endif

#endif
