#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic.h"
#include "clock.h"
#include "buf.h"
#include "banned.h"

#define TMP_TRIES 16

static int make_temp(int dirfd, char *tmp, size_t tmpsz, mode_t mode, struct box_err *err)
{
	for (int i = 0; i < TMP_TRIES; i++) {
		unsigned char r[8];
		ssize_t got;
		int fd;

		do
			got = getrandom(r, sizeof(r), 0);
		while (got < 0 && errno == EINTR);
		if (got != (ssize_t)sizeof(r))
			return box_err_sys(err, "getrandom");
		snprintf(tmp, tmpsz, ".box-%02x%02x%02x%02x%02x%02x%02x%02x.tmp",
			 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST)
			return box_err_sys(err, "create temp file %s", tmp);
	}
	return box_err_set(err, BOX_E_IO, "create temp file: %d names taken", TMP_TRIES);
}

static int fsync_dir(int dirfd, struct box_err *err)
{
	/* dirfd may be O_PATH, which fsync refuses: sync through a fresh descriptor */
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r;

	if (fd < 0)
		return box_err_sys(err, "open directory for fsync");
	r = fsync(fd);
	if (r < 0)
		box_err_sys(err, "fsync directory");
	close(fd);
	return r < 0 ? -1 : 0;
}

static int replace(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
		   int sync, int *keep, uid_t uid, gid_t gid, struct box_err *err)
{
	char tmp[64];
	int fd;

	if (!name || !name[0] || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		return box_err_set(err, BOX_E_INVALID, "bad file name for an atomic write: '%s'",
				   name ? name : "");
	fd = make_temp(dirfd, tmp, sizeof(tmp), mode, err);
	if (fd < 0)
		return -1;
	if (box_write_all(fd, data, len) < 0) {
		box_err_sys(err, "write %s", tmp);
		goto fail;
	}
	if (sync && fsync(fd) < 0) {
		box_err_sys(err, "fsync %s", tmp);
		goto fail;
	}
	/* owned before it has its name: nobody ever sees it with other owners */
	if ((uid != (uid_t)-1 || gid != (gid_t)-1) && fchown(fd, uid, gid) < 0) {
		box_err_sys(err, "chown %s", tmp);
		goto fail;
	}
	if (keep) {
		/* the caller writes on at the end, whoever else appends to the name */
		if (fcntl(fd, F_SETFL, O_APPEND) < 0) {
			box_err_sys(err, "fcntl %s", tmp);
			goto fail;
		}
		if (renameat(dirfd, tmp, dirfd, name) < 0) {
			box_err_sys(err, "rename %s to %s", tmp, name);
			goto fail;
		}
		*keep = fd;
		return 0;
	}
	if (close(fd) < 0) {
		fd = -1;
		box_err_sys(err, "close %s", tmp);
		goto fail;
	}
	fd = -1;
	if (renameat(dirfd, tmp, dirfd, name) < 0) {
		box_err_sys(err, "rename %s to %s", tmp, name);
		goto fail;
	}
	return sync ? fsync_dir(dirfd, err) : 0;
fail:
	if (fd >= 0)
		close(fd);
	unlinkat(dirfd, tmp, 0);
	box_err_path(err, name);
	return -1;
}

int box_atomic_write(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
		     struct box_err *err)
{
	return replace(dirfd, name, data, len, mode, 1, NULL, (uid_t)-1, (gid_t)-1, err);
}

int box_atomic_replace(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
		       struct box_err *err)
{
	return replace(dirfd, name, data, len, mode, 0, NULL, (uid_t)-1, (gid_t)-1, err);
}

int box_atomic_replace_open(int dirfd, const char *name, const void *data, size_t len,
			    mode_t mode, int *fd, struct box_err *err)
{
	return replace(dirfd, name, data, len, mode, 0, fd, (uid_t)-1, (gid_t)-1, err);
}

int box_atomic_replace_as(int dirfd, const char *name, const void *data, size_t len,
			  mode_t mode, uid_t uid, gid_t gid, int *fd, struct box_err *err)
{
	return replace(dirfd, name, data, len, mode, 0, fd, uid, gid, err);
}

int box_lock_fd(int fd, int exclusive, int timeout_ms, struct box_err *err)
{
	int op = exclusive ? LOCK_EX : LOCK_SH;
	int64_t deadline = box_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);

	if (timeout_ms < 0) {
		while (flock(fd, op) < 0)
			if (errno != EINTR)
				return box_err_sys(err, "flock");
		return 0;
	}
	for (;;) {
		int64_t left;
		struct timespec ts;

		if (flock(fd, op | LOCK_NB) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK)
			return box_err_sys(err, "flock");
		left = deadline - box_now_ms();
		if (left <= 0)
			break;
		if (left > 10)
			left = 10;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)left * 1000000L;
		nanosleep(&ts, NULL);
	}
	box_err_set(err, BOX_E_CONFLICT, "lock held by another process (waited %d ms)",
		    timeout_ms);
	err->retryable = 1;
	return -1;
}

int box_lock_open(int dirfd, const char *path, int exclusive, int timeout_ms,
		  struct box_err *err)
{
	int fd = openat(dirfd, path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0) {
		box_err_sys(err, "open lock file %s", path);
		box_err_path(err, path);
		return -1;
	}
	if (box_lock_fd(fd, exclusive, timeout_ms, err) < 0) {
		close(fd);
		box_err_path(err, path);
		return -1;
	}
	return fd;
}

int box_mkdirs(const char *path, struct box_err *err)
{
	char p[4096];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(p))
		return box_err_set(err, BOX_E_INVALID, "bad directory path");
	memcpy(p, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != 0)
			continue;
		p[i] = 0;
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			box_err_sys(err, "create %s", p);
			box_err_path(err, p);
			return -1;
		}
		p[i] = i < n ? '/' : 0;
	}
	return 0;
}
