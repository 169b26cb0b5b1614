/* cp-in and cp-out of box-sandbox: a bounded look at the source, then a tar stream through
 * boxarchive into a hidden directory renamed into place. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbcp.h"
#include "boxarchive.h"
#include "buf.h"
#include "fswalk.h"
#include "sbcopy.h"
#include "banned.h"

struct look {
	int64_t max_bytes;
	struct box_sbcp_stats *st;
	char path[BOX_ARCHIVE_MAX_PATH + 256];
};

static int bad_name(const char *n)
{
	for (; *n; n++)
		if ((unsigned char)*n < 0x20 || *n == 0x7f)
			return 1;
	return 0;
}

/* The entries of the directory fd (owned), whose relative path is l->path (len bytes),
 * depth components below the root. Recursion is bounded by BOX_ARCHIVE_MAX_DEPTH. */
static int look_dir(struct look *l, int fd, size_t len, int depth, struct box_err *err)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		close(fd);
		return box_err_sys(err, "cannot read %s", len ? l->path : ".");
	}
	while (rc == 0 && (errno = 0, de = readdir(d))) {
		struct stat sb;
		size_t n;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		n = strlen(de->d_name);
		if (len + n + 2 > BOX_ARCHIVE_MAX_PATH) {
			box_err_limit(err, BOX_E_LIMIT, "path_length", BOX_ARCHIVE_MAX_PATH, "bytes",
				      "a path is over %d bytes", BOX_ARCHIVE_MAX_PATH);
			rc = -1;
			break;
		}
		box_fmt(l->path + len, sizeof(l->path) - len, "%s%s", len ? "/" : "", de->d_name);
		if (bad_name(de->d_name)) {
			char shown[256];
			size_t k;

			/* the message is one line: the name as it is is in err->path */
			box_fmt(shown, sizeof(shown), "%.250s", l->path);
			for (k = 0; shown[k]; k++)
				if ((unsigned char)shown[k] < 0x20 || shown[k] == 0x7f)
					shown[k] = '?';
			box_err_set(err, BOX_E_INVALID, "a name holds a control character (a newline?): "
				    "%s", shown);
			rc = -1;
		} else if (++l->st->entries > BOX_ARCHIVE_MAX_ENTRIES) {
			box_err_limit(err, BOX_E_LIMIT, "entries", BOX_ARCHIVE_MAX_ENTRIES, "entries",
				      "the tree has more than %d entries", BOX_ARCHIVE_MAX_ENTRIES);
			rc = -1;
		} else if (depth + 1 > BOX_ARCHIVE_MAX_DEPTH) {
			box_err_limit(err, BOX_E_LIMIT, "depth", BOX_ARCHIVE_MAX_DEPTH, "levels",
				      "the tree is deeper than %d levels", BOX_ARCHIVE_MAX_DEPTH);
			rc = -1;
		} else if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = box_err_sys(err, "cannot stat %s", l->path);
		} else if (S_ISREG(sb.st_mode)) {
			l->st->files++;
			l->st->bytes += sb.st_size;
			if (l->st->bytes > l->max_bytes) {
				box_err_limit(err, BOX_E_LIMIT, "bytes", l->max_bytes, "bytes",
					      "the files are over %lld bytes (at %.200s, %lld bytes; "
					      "a sparse file counts whole)", (long long)l->max_bytes,
					      l->path, (long long)sb.st_size);
				rc = -1;
			}
		} else if (S_ISLNK(sb.st_mode)) {
			l->st->links++;
		} else if (S_ISDIR(sb.st_mode)) {
			int sub = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			l->st->dirs++;
			rc = sub < 0 ? box_err_sys(err, "cannot open %s", l->path) :
			     look_dir(l, sub, strlen(l->path), depth + 1, err);
		} else {
			box_err_set(err, BOX_E_INVALID, "%.200s is not a file, directory or symlink "
				    "(a device, FIFO or socket)", l->path);
			rc = -1;
		}
		if (rc < 0 && !err->path[0]) {
			char p[256];

			box_fmt(p, sizeof(p), "%.250s", l->path);
			box_err_path(err, p);
		}
		l->path[len] = 0;
	}
	if (rc == 0 && errno)
		rc = box_err_sys(err, "cannot read %s", len ? l->path : ".");
	closedir(d);
	return rc;
}

int box_sbcp_check(int srcfd, int64_t max_bytes, struct box_sbcp_stats *st,
		   struct box_err *err)
{
	struct box_sbcp_stats own;
	struct look *l = calloc(1, sizeof(*l));
	int fd, rc;

	if (!l)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	l->max_bytes = max_bytes;
	l->st = st ? st : &own;
	memset(l->st, 0, sizeof(*l->st));
	fd = openat(srcfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	rc = fd < 0 ? box_err_sys(err, "cannot open the source") : look_dir(l, fd, 0, 0, err);
	free(l);
	return rc;
}

/* name in parentfd: 0 absent, 1 an empty directory, -1 with conflict (or io_error). */
static int target_state(int parentfd, const char *name, struct box_err *err)
{
	struct stat sb;
	DIR *d;
	struct dirent *de;
	int fd, n = 0;

	if (fstatat(parentfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : box_err_sys(err, "cannot stat %s", name);
	if (!S_ISDIR(sb.st_mode))
		return box_err_set(err, BOX_E_CONFLICT, "%.200s exists and is not a directory: the "
				   "target must be absent or an empty directory", name);
	fd = openat(parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return box_err_sys(err, "cannot read %s", name);
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	if (n)
		return box_err_set(err, BOX_E_CONFLICT, "%.200s is not empty: the target must be "
				   "absent or an empty directory (nothing is merged)", name);
	return 1;
}

/* The tree below srcfd packed into an unlinked file of parentfd and extracted into
 * parentfd/tmp (made here). */
static int stream(int srcfd, int parentfd, const char *tmp, int64_t max_bytes,
		  struct box_err *err)
{
	struct box_archive_limits lim = { max_bytes, BOX_ARCHIVE_MAX_ENTRIES,
					  BOX_ARCHIVE_MAX_PATH, BOX_ARCHIVE_MAX_DEPTH };
	int tar = openat(parentfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600), dest = -1, rc = -1;

	if (tar < 0)
		return box_err_sys(err, "cannot make a temporary file");
	if (box_archive_pack_ex(srcfd, tar, BOX_ARCHIVE_SYMLINKS | BOX_ARCHIVE_FAST, NULL,
				err) < 0)
		goto out;
	if (lseek(tar, 0, SEEK_SET) < 0) {
		box_err_sys(err, "cannot rewind the archive");
		goto out;
	}
	if (mkdirat(parentfd, tmp, 0755) < 0 ||
	    (dest = openat(parentfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		box_err_sys(err, "cannot make %s", tmp);
		goto out;
	}
	rc = box_archive_extract_ex(tar, dest, &lim, BOX_ARCHIVE_SYMLINKS, NULL, err);
out:
	close(tar);
	if (dest >= 0)
		close(dest);
	return rc;
}

int box_sbcp_copy(int srcfd, int parentfd, const char *name, int64_t max_bytes, uid_t uid,
		  gid_t gid, struct box_sbcp_stats *st, struct box_err *err)
{
	char tmp[64];
	int state, rc = -1;

	if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return box_err_set(err, BOX_E_INVALID, "bad target name '%.64s'", name);
	if ((state = target_state(parentfd, name, err)) < 0 ||
	    box_sbcp_check(srcfd, max_bytes, st, err) < 0 ||
	    box_sbcopy_tmp_name(tmp, sizeof(tmp), "box-cp", err) < 0)
		return -1;
	if (stream(srcfd, parentfd, tmp, max_bytes, err) < 0)
		goto out;
	if (uid != (uid_t)-1 && box_sbcopy_chown_tree(parentfd, tmp, uid, gid, err) < 0)
		goto out;
	if (state == 0 ? renameat2(parentfd, tmp, parentfd, name, RENAME_NOREPLACE) < 0 :
	    renameat2(parentfd, tmp, parentfd, name, RENAME_EXCHANGE) < 0) {
		if (errno == EEXIST || errno == ENOENT)
			box_err_set(err, BOX_E_CONFLICT, "%.200s changed during the copy", name);
		else
			box_err_sys(err, "cannot rename the copy to %s", name);
		goto out;
	}
	rc = 0;
out:
	/* the partial copy, or the empty directory the copy replaced */
	{
		struct box_err ign;

		box_err_init(&ign);
		(void)box_fswalk_remove(parentfd, tmp, &ign);
	}
	return rc;
}
