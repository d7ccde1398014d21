/* SPDX-License-Identifier: MIT */
/* safe_file.c - the file rules of safe_file.h: create, replace, append and read without following links,
 * without predictable temporary names, and without writing onto (or hanging on) devices and FIFOs. */
#include "safe_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reason.h"

static int refuse(int err, char *reason, size_t cap, const char *format, ...) __attribute__((format(printf, 4, 5)));
static int refuse(int err, char *reason, size_t cap, const char *format, ...) {
  if (reason && cap) {
    char clause[PATH_MAX + 256];
    va_list args;
    va_start(args, format);
    vsnprintf(clause, sizeof clause, format, args);
    va_end(args);
    reason_add(reason, cap, "%s", clause);
  }
  return -err;
}

static enum safe_file_kind kind_of(mode_t mode) {
  if (S_ISREG(mode)) return SAFE_FILE_REGULAR;
  if (S_ISLNK(mode)) return SAFE_FILE_LINK;
  if (S_ISCHR(mode) || S_ISFIFO(mode)) return SAFE_FILE_STREAM;
  return SAFE_FILE_OTHER;
}

enum safe_file_kind safe_file_kind(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT ? SAFE_FILE_ABSENT : SAFE_FILE_ERROR;
  return kind_of(st.st_mode);
}

int safe_file_write_all(int fd, const void *data, size_t length) {
  const char *p = data;
  while (length) {
    ssize_t n = write(fd, p, length);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) return -EIO;
    p += n;
    length -= (size_t)n;
  }
  return 0;
}

/* The target is a character device or FIFO the caller allows: write into it, never create or replace. */
static int write_into_stream(const char *path, const void *data, size_t length, char *reason, size_t cap) {
  int fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENXIO) return refuse(err, reason, cap, "%s: a FIFO without a reader; nothing written", path);
    return refuse(err, reason, cap, "%s: %s", path, strerror(err));
  }
  struct stat st;
  int rc = fstat(fd, &st) != 0 ? -errno : 0;
  /* Replaced since the lstat: a regular file opened without O_TRUNC is closed before a byte is written. */
  if (rc == 0 && kind_of(st.st_mode) != SAFE_FILE_STREAM) {
    close(fd);
    return refuse(EINVAL, reason, cap, "%s: changed while it was opened; nothing written", path);
  }
  if (rc == 0) {
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK); /* the reader is there: wait for it */
    rc = safe_file_write_all(fd, data, length);
  }
  close(fd);
  return rc ? refuse(-rc, reason, cap, "%s: %s", path, strerror(-rc)) : 0;
}

int safe_file_replace(const char *path, const void *data, size_t length, mode_t mode, unsigned flags, char *reason,
                      size_t cap) {
  if (!path || !path[0]) return refuse(EINVAL, reason, cap, "no file name");
  switch (safe_file_kind(path)) {
  case SAFE_FILE_ABSENT:
  case SAFE_FILE_REGULAR: break;
  case SAFE_FILE_LINK:
    return refuse(ELOOP, reason, cap, "%s is a symbolic link; hugify never writes through or replaces a link "
                  "(name the file itself)", path);
  case SAFE_FILE_STREAM:
    if (flags & SAFE_FILE_ALLOW_DEVICE) return write_into_stream(path, data, length, reason, cap);
    return refuse(EINVAL, reason, cap, "%s is a device or FIFO, not a regular file; refused", path);
  case SAFE_FILE_OTHER:
    return refuse(EINVAL, reason, cap, "%s is a directory, block device or socket, not a regular file; refused",
                  path);
  case SAFE_FILE_ERROR: return refuse(errno, reason, cap, "%s: %s", path, strerror(errno));
  }
  /* dir/.name.XXXXXX in the target's directory, so that the rename never crosses file systems */
  char temporary[PATH_MAX];
  const char *slash = strrchr(path, '/');
  int dir_length = slash ? (int)(slash - path) + 1 : 0;
  if (snprintf(temporary, sizeof temporary, "%.*s.%s.XXXXXX", dir_length, path, slash ? slash + 1 : path) >=
      (int)sizeof temporary)
    return refuse(ENAMETOOLONG, reason, cap, "%s: the path is too long", path);
  int fd = mkostemp(temporary, O_CLOEXEC); /* O_CREAT|O_EXCL, 0600: a planted link makes it fail, never follow */
  if (fd < 0) return refuse(errno, reason, cap, "cannot create a file next to %s: %s", path, strerror(errno));
  int rc = safe_file_write_all(fd, data, length);
  if (rc == 0 && fchmod(fd, mode) != 0) rc = -errno;
  if (rc == 0 && (flags & SAFE_FILE_DURABLE) && fsync(fd) != 0) rc = -errno;
  if (close(fd) != 0 && rc == 0) rc = -errno;
  if (rc) {
    unlink(temporary);
    return refuse(-rc, reason, cap, "writing %s: %s", path, strerror(-rc));
  }
  /* Checked again just before the rename: whatever took the target's place meanwhile is not replaced. */
  enum safe_file_kind now = safe_file_kind(path);
  if (now != SAFE_FILE_ABSENT && now != SAFE_FILE_REGULAR) {
    unlink(temporary);
    return refuse(EEXIST, reason, cap, "%s changed into a link or device while it was written; left alone", path);
  }
  if (rename(temporary, path) != 0) {
    int err = errno;
    unlink(temporary);
    return refuse(err, reason, cap, "renaming onto %s: %s", path, strerror(err));
  }
  return 0;
}

/* Open with `flags` (O_CREAT, 0600, never through a link) and refuse what is not a regular file of ours
 * with one link; blocking again once checked. The fd or -errno with the reason. */
static int open_own_file(const char *path, int flags, char *reason, size_t cap) {
  int fd = open(path, flags | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP) return refuse(err, reason, cap, "%s is a symbolic link; refused", path);
    return refuse(err, reason, cap, "%s: %s", path, strerror(err));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return refuse(err, reason, cap, "%s: %s", path, strerror(err));
  }
  /* nlink: a hard link planted to another file of this user would pass the other two checks */
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
    close(fd);
    return refuse(EPERM, reason, cap, "%s is %s; refused", path,
                  !S_ISREG(st.st_mode)       ? "not a regular file"
                  : st.st_uid != geteuid() ? "owned by another user"
                                           : "a hard link to another file");
  }
  int now = fcntl(fd, F_GETFL);
  if (now >= 0) fcntl(fd, F_SETFL, now & ~O_NONBLOCK);
  return fd;
}

int safe_file_open_append(const char *path, char *reason, size_t cap) {
  return open_own_file(path, O_WRONLY | O_APPEND, reason, cap);
}

int safe_file_open_scratch(const char *path, bool append, char *reason, size_t cap) {
  int fd = open_own_file(path, O_RDWR | (append ? O_APPEND : 0), reason, cap);
  if (fd >= 0 && ftruncate(fd, 0) != 0) {
    int err = errno;
    close(fd);
    return refuse(err, reason, cap, "%s: %s", path, strerror(err));
  }
  return fd;
}

int safe_file_open_read(const char *path, bool follow) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
  if (fd < 0) return -errno;
  struct stat st;
  int err = fstat(fd, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : !S_ISREG(st.st_mode) ? EINVAL : 0;
  if (err) {
    close(fd);
    return -err;
  }
  /* Regular files never block; clearing O_NONBLOCK keeps reads of network file systems ordinary. */
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}
