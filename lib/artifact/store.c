#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fswalk.h"
#include "oci.h"
#include "store.h"
#include "atomic.h"
#include "banned.h"

/* Bound on the names one clean of tmp/ looks at. */
#define TMP_MAX_NAMES 10000000L

static int open_sub(int dirfd, const char *name, struct box_err *err)
{
	int fd;

	if (mkdirat(dirfd, name, 0755) < 0 && errno != EEXIST)
		return box_err_sys(err, "create store/%s", name);
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return box_err_sys(err, "open store/%s", name);
	return fd;
}

int box_store_open(const char *root, struct box_store *s, struct box_err *err)
{
	s->rootfd = s->shafd = s->tmpfd = -1;
	s->sync = 1;
	s->root[0] = 0;
	if (!root || !root[0] || strlen(root) >= sizeof(s->root) - 80)
		return box_err_set(err, BOX_E_INVALID, "bad store path");
	snprintf(s->root, sizeof(s->root), "%s", root);
	if (box_mkdirs(root, err) < 0)
		return -1;
	s->rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->rootfd < 0) {
		box_err_sys(err, "open store %s", root);
		goto fail;
	}
	s->shafd = open_sub(s->rootfd, "sha256", err);
	if (s->shafd < 0)
		goto fail;
	s->tmpfd = open_sub(s->rootfd, "tmp", err);
	if (s->tmpfd < 0)
		goto fail;
	return 0;
fail:
	box_err_path(err, root);
	box_store_close(s);
	return -1;
}

void box_store_close(struct box_store *s)
{
	if (s->tmpfd >= 0)
		close(s->tmpfd);
	if (s->shafd >= 0)
		close(s->shafd);
	if (s->rootfd >= 0)
		close(s->rootfd);
	s->rootfd = s->shafd = s->tmpfd = -1;
}

int box_store_tmpdir(struct box_store *s, char name[64], int *fd, struct box_err *err)
{
	for (int i = 0; i < 16; i++) {
		unsigned char r[8];

		if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
			return box_err_sys(err, "getrandom");
		snprintf(name, 64, "x%02x%02x%02x%02x%02x%02x%02x%02x",
			 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
		if (mkdirat(s->tmpfd, name, 0755) < 0) {
			if (errno == EEXIST)
				continue;
			return box_err_sys(err, "create store/tmp/%s", name);
		}
		*fd = openat(s->tmpfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (*fd < 0 || flock(*fd, LOCK_EX | LOCK_NB) < 0) {
			box_err_sys(err, "open store/tmp/%s", name);
			if (*fd >= 0)
				close(*fd);
			*fd = -1;
			unlinkat(s->tmpfd, name, AT_REMOVEDIR);
			return -1;
		}
		return 0;
	}
	return box_err_set(err, BOX_E_IO, "create store/tmp entry: names taken");
}

static int name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	return n > 0 && n < 64 && !strchr(name, '/') && strcmp(name, ".") != 0 &&
	       strcmp(name, "..") != 0;
}

int box_store_abort(struct box_store *s, const char *tmpname, struct box_err *err)
{
	if (!name_ok(tmpname))
		return box_err_set(err, BOX_E_INVALID, "bad store tmp name");
	return box_fswalk_remove(s->tmpfd, tmpname, err);
}

static int fsync_fd(int fd, const char *what, struct box_err *err)
{
	if (fsync(fd) < 0)
		return box_err_sys(err, "fsync %s", what);
	return 0;
}

int box_store_commit(struct box_store *s, const char *tmpname, const char *digest,
		     struct box_err *err)
{
	const char *hex;
	struct stat st;
	int r;

	if (box_oci_digest_check(digest, err) < 0)
		return -1;
	if (!name_ok(tmpname))
		return box_err_set(err, BOX_E_INVALID, "bad store tmp name");
	hex = digest + 7;
	if (fstatat(s->tmpfd, tmpname, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)) {
		if (errno == ENOENT)
			return box_err_set(err, BOX_E_NOT_FOUND, "store/tmp/%s: no such directory",
					   tmpname);
		return box_err_set(err, BOX_E_IO, "store/tmp/%s: not a directory", tmpname);
	}
	if (s->sync) {
		int fd = openat(s->tmpfd, tmpname, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
				O_NOFOLLOW);

		if (fd < 0)
			return box_err_sys(err, "open store/tmp/%s", tmpname);
		r = syncfs(fd);
		close(fd);
		if (r < 0)
			return box_err_sys(err, "sync store/tmp/%s", tmpname);
	}
	r = renameat2(s->tmpfd, tmpname, s->shafd, hex, RENAME_NOREPLACE);
	if (r < 0 && errno == EINVAL) {
		/* a file system without RENAME_NOREPLACE: a plain rename fails on a non-empty
		 * directory, and replacing an empty one loses nothing */
		r = renameat(s->tmpfd, tmpname, s->shafd, hex);
	}
	if (r < 0) {
		if (errno != EEXIST && errno != ENOTEMPTY)
			return box_err_sys(err, "rename store/tmp/%s to %s", tmpname, digest);
		if (fstatat(s->shafd, hex, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
			return box_err_set(err, BOX_E_IO, "store entry %s is not a directory",
					   digest);
		return box_store_abort(s, tmpname, err);
	}
	return fsync_fd(s->shafd, "store/sha256", err);
}

int box_store_has(struct box_store *s, const char *digest, struct box_err *err)
{
	struct stat st;

	if (box_oci_digest_check(digest, err) < 0)
		return -1;
	if (fstatat(s->shafd, digest + 7, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return box_err_sys(err, "stat store entry %s", digest);
	}
	return S_ISDIR(st.st_mode) ? 1 : 0;
}

int box_store_path(struct box_store *s, const char *digest, char *out, size_t outsz,
		   struct box_err *err)
{
	int n;

	if (box_oci_digest_check(digest, err) < 0)
		return -1;
	n = snprintf(out, outsz, "%s/sha256/%s", s->root, digest + 7);
	if (n < 0 || (size_t)n >= outsz)
		return box_err_limit(err, BOX_E_LIMIT, "path_bytes", (int64_t)outsz, "bytes",
				     "store path longer than %zu bytes", outsz);
	return 0;
}

int box_store_open_entry(struct box_store *s, const char *digest, struct box_err *err)
{
	int fd;

	if (box_oci_digest_check(digest, err) < 0)
		return -1;
	fd = openat(s->shafd, digest + 7, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ENOENT)
			return box_err_set(err, BOX_E_NOT_FOUND, "%s is not in the store", digest);
		return box_err_sys(err, "open store entry %s", digest);
	}
	return fd;
}

int box_store_clean_tmp(struct box_store *s, struct box_err *err)
{
	time_t now = time(NULL);
	struct dirent *de;
	int removed = 0, fd;
	long budget = TMP_MAX_NAMES;
	DIR *d;

	fd = openat(s->tmpfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return box_err_sys(err, "open store/tmp");
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return box_err_sys(err, "read store/tmp");
	}
	while ((de = readdir(d))) {
		struct stat st;
		int lock = -1, r;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (--budget < 0)
			break;
		if (fstatat(s->tmpfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (now - st.st_mtime < BOX_STORE_TMP_AGE_S)
			continue;
		if (S_ISDIR(st.st_mode)) {
			lock = openat(s->tmpfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
				      O_NOFOLLOW);
			if (lock < 0)
				continue;
			if (flock(lock, LOCK_EX | LOCK_NB) < 0) {
				close(lock);
				continue;
			}
		}
		r = box_fswalk_remove(s->tmpfd, de->d_name, err);
		if (lock >= 0)
			close(lock);
		if (r < 0) {
			closedir(d);
			return -1;
		}
		removed++;
	}
	closedir(d);
	return removed;
}

int box_store_lock(struct box_store *s, int exclusive, struct box_err *err)
{
	return box_lock_open(s->rootfd, BOX_STORE_LOCK, exclusive, BOX_STORE_LOCK_WAIT_MS, err);
}

int box_store_remove(struct box_store *s, const char *digest, struct box_err *err)
{
	char name[64], note[80];
	int fd;

	if (box_oci_digest_check(digest, err) < 0)
		return -1;
	/* a fresh, locked name under tmp/ to move the entry to: one rename takes it out of the
	 * store, and a crash before it is gone leaves only a tmp/ leftover that
	 * box_store_clean_tmp removes once its lock is released */
	if (box_store_tmpdir(s, name, &fd, err) < 0)
		return -1;
	close(fd);
	if (unlinkat(s->tmpfd, name, AT_REMOVEDIR) < 0 ||
	    renameat(s->shafd, digest + 7, s->tmpfd, name) < 0) {
		if (errno == ENOENT)
			return box_err_set(err, BOX_E_NOT_FOUND, "%s is not in the store", digest);
		return box_err_sys(err, "move store entry %s out", digest);
	}
	/* marked in use, as box_store_tmpdir's are, while it is removed */
	fd = openat(s->tmpfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0)
		flock(fd, LOCK_EX | LOCK_NB);
	if (fsync_fd(s->shafd, "store/sha256", err) < 0)
		goto fail;
	snprintf(note, sizeof(note), "%.64s.tree", digest + 7);
	if (unlinkat(s->shafd, note, 0) < 0 && errno != ENOENT) {
		box_err_sys(err, "remove %s", note);
		goto fail;
	}
	if (box_fswalk_remove(s->tmpfd, name, err) < 0)
		goto fail;
	if (fd >= 0)
		close(fd);
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	return -1;
}
