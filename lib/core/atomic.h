/* Atomic replacement of files and flock-based locks for persistent state. */
#ifndef BOX_ATOMIC_H
#define BOX_ATOMIC_H

#include <stddef.h>
#include <sys/types.h>
#include "err.h"

/*
 * Replaces the file name (one path component, no '/') in the directory dirfd (an O_PATH or
 * O_RDONLY directory fd, or AT_FDCWD) with len bytes of data: a temp file with a random name
 * is created in the same directory (O_EXCL|O_NOFOLLOW, mode filtered by the umask), written,
 * fsynced and renamed over name, then the directory is fsynced. A symlink at name is replaced,
 * never followed.
 * Returns 0, or -1 with err set: invalid_request for a bad name, io_error (and the others of
 * box_err_sys) otherwise. On failure before the rename the temp file is removed and the old
 * file is untouched; only a failing fsync of the directory reports -1 after the rename (the
 * new content is then in place but maybe not durable).
 */
int box_atomic_write(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
		     struct box_err *err);

/* box_atomic_write without the fsyncs: readers still see the old file or the new one, never a
 * mix, but a crash may lose the new content. For scratch files that a run rewrites often (a
 * script's workspace), where an fsync per write would cost more than the write. */
int box_atomic_replace(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
		       struct box_err *err);

/* box_atomic_replace that keeps the new file open: on success *fd is a descriptor of the file
 * now at name, open for writing with O_APPEND, which the caller closes. It is the inode this
 * call created, whatever is renamed over name afterwards. */
int box_atomic_replace_open(int dirfd, const char *name, const void *data, size_t len,
			    mode_t mode, int *fd, struct box_err *err);

/* box_atomic_replace (fd NULL) or box_atomic_replace_open whose new file is given to uid:gid
 * before it takes name ((uid_t)-1 and (gid_t)-1: kept). */
int box_atomic_replace_as(int dirfd, const char *name, const void *data, size_t len,
			  mode_t mode, uid_t uid, gid_t gid, int *fd, struct box_err *err);

/*
 * Takes an flock on fd (exclusive or shared), retrying LOCK_NB with short sleeps for up to
 * timeout_ms milliseconds (0: one try; negative: wait without limit).
 * Returns 0, or -1 with conflict (retryable = 1) when the time ran out, io_error otherwise.
 */
int box_lock_fd(int fd, int exclusive, int timeout_ms, struct box_err *err);

/*
 * Opens (creating it 0600 if missing, never following a symlink) the lock file path relative
 * to dirfd and locks it as box_lock_fd() does. Returns the locked fd, which the caller closes
 * to release the lock, or -1 with err set.
 */
int box_lock_open(int dirfd, const char *path, int exclusive, int timeout_ms,
		  struct box_err *err);

/* mkdir -p: creates path and its missing parents (0755); existing directories are fine.
 * Returns 0, or -1 with io_error naming the component that failed (invalid_request for an
 * empty path or one of 4096 bytes or more). */
int box_mkdirs(const char *path, struct box_err *err);

#endif
