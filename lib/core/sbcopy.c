#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "fswalk.h"
#include "sbcopy.h"
#include "banned.h"

#define COPY_BUF 65536
#define TMP_TRIES 16

static int valid_name(const char *name)
{
	return name && *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..") &&
	       strlen(name) <= NAME_MAX;
}

static void close_keep_errno(int fd)
{
	int e = errno;

	close(fd);
	errno = e;
}

/* A failed write: a full disk or quota is a limit the caller can name, not an I/O fault. */
static int write_err(struct box_err *err, const char *what, const char *name)
{
	if (errno == ENOSPC || errno == EDQUOT) {
		box_err_sys(err, "cannot %s %s", what, name);
		err->code = BOX_E_LIMIT;
		snprintf(err->limit, sizeof(err->limit), "disk");
		return -1;
	}
	return box_err_sys(err, "cannot %s %s", what, name);
}

int box_sbcopy_tmp_name(char *out, size_t outsz, const char *tag, struct box_err *err)
{
	unsigned char r[8];
	ssize_t got;

	do
		got = getrandom(r, sizeof(r), 0);
	while (got < 0 && errno == EINTR);
	if (got != (ssize_t)sizeof(r))
		return box_err_sys(err, "getrandom");
	snprintf(out, outsz, ".%s-%02x%02x%02x%02x%02x%02x%02x%02x.tmp", tag, r[0], r[1], r[2],
		 r[3], r[4], r[5], r[6], r[7]);
	return 0;
}

/* ------------------------------------------------------------------ copy */

struct cp {
	uint64_t max_files, max_bytes, seen;
	unsigned max_depth;
	struct box_sbcopy_stats st;
	char *buf;
	char *link;
	struct box_err *err;
};

/*
 * A link target that cannot leave the tree: relative, its ".." components all in front and
 * no more of them than the link's depth, then plain components. Leading ".." climb through
 * real directories (the walk never descends through links), and plain components only
 * descend, through links that obey the same rule, so resolution stays inside.
 */
static int safe_target(const char *t, unsigned parent_depth)
{
	unsigned up = 0;
	int seen_plain = 0;
	const char *p = t;

	if (*t == 0 || *t == '/')
		return 0;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if (n == 0) {
			return 0;
		} else if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (seen_plain || ++up > parent_depth)
				return 0;
		} else if (!(n == 1 && p[0] == '.')) {
			seen_plain = 1;
		}
		if (!slash)
			break;
		p = slash + 1;
	}
	return 1;
}

static int copy_fd(struct cp *cp, int in, int dstdir, const char *name, mode_t srcmode)
{
	mode_t mode = (srcmode & 0111) ? 0755 : 0644;
	int out;

	out = openat(dstdir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return write_err(cp->err, "create", name);
	for (;;) {
		ssize_t r = read(in, cp->buf, COPY_BUF);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			box_err_sys(cp->err, "cannot read %s", name);
			goto fail;
		}
		if (r == 0)
			break;
		if ((uint64_t)r > cp->max_bytes - cp->st.bytes) {
			box_err_limit(cp->err, BOX_E_LIMIT, "bytes", (int64_t)cp->max_bytes, "bytes",
				      "input is larger than %llu bytes",
				      (unsigned long long)cp->max_bytes);
			goto fail;
		}
		if (box_write_all(out, cp->buf, (size_t)r) < 0) {
			write_err(cp->err, "write", name);
			goto fail;
		}
		cp->st.bytes += (uint64_t)r;
	}
	if (fchmod(out, mode) < 0) {
		box_err_sys(cp->err, "cannot chmod %s", name);
		goto fail;
	}
	if (close(out) < 0)
		return write_err(cp->err, "write", name);
	cp->st.files++;
	return 0;
fail:
	close(out);
	return -1;
}

static int copy_dir(struct cp *cp, int src, int dst, unsigned depth);

static int copy_entry(struct cp *cp, int src, int dst, const char *name, unsigned depth)
{
	struct stat sb, sb2;
	int in, out, r;
	ssize_t n;

	if (fstatat(src, name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return box_err_sys(cp->err, "cannot stat %s", name);
	}
	if (S_ISLNK(sb.st_mode)) {
		n = readlinkat(src, name, cp->link, PATH_MAX);
		if (n < 0 && (errno == ENOENT || errno == EINVAL))
			return 0;
		if (n < 0)
			return box_err_sys(cp->err, "cannot read the link %s", name);
		if (n >= PATH_MAX || memchr(cp->link, 0, (size_t)n)) {
			cp->st.skipped_links++;
			return 0;
		}
		cp->link[n] = 0;
		if (!safe_target(cp->link, depth - 1)) {
			cp->st.skipped_links++;
			return 0;
		}
		if (symlinkat(cp->link, dst, name) < 0)
			return write_err(cp->err, "create the link", name);
		cp->st.links++;
		return 0;
	}
	if (S_ISREG(sb.st_mode)) {
		in = openat(src, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (in < 0 && errno == ENOENT)
			return 0;
		if (in < 0 && errno == ELOOP) {
			cp->st.skipped_links++;
			return 0;
		}
		if (in < 0)
			return box_err_sys(cp->err, "cannot open %s", name);
		if (fstat(in, &sb2) < 0) {
			box_err_sys(cp->err, "cannot stat %s", name);
			close(in);
			return -1;
		}
		if (!S_ISREG(sb2.st_mode)) {
			cp->st.skipped_other++;
			close(in);
			return 0;
		}
		r = copy_fd(cp, in, dst, name, sb2.st_mode);
		close(in);
		return r;
	}
	if (!S_ISDIR(sb.st_mode)) {
		cp->st.skipped_other++;
		return 0;
	}
	in = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0 && errno == ENOENT)
		return 0;
	if (in < 0)
		return box_err_sys(cp->err, "cannot open the directory %s", name);
	if (mkdirat(dst, name, 0700) < 0) {
		write_err(cp->err, "create the directory", name);
		close(in);
		return -1;
	}
	out = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (out < 0) {
		box_err_sys(cp->err, "cannot open the directory %s", name);
		close(in);
		return -1;
	}
	cp->st.dirs++;
	r = copy_dir(cp, in, out, depth);
	if (r == 0 && fchmod(out, 0755) < 0)
		r = box_err_sys(cp->err, "cannot chmod %s", name);
	close(in);
	close(out);
	return r;
}

/* depth: that of the directory src, the root being 0. */
static int copy_dir(struct cp *cp, int src, int dst, unsigned depth)
{
	struct dirent *de;
	int dfd, ret = 0;
	DIR *d;

	dfd = openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return box_err_sys(cp->err, "cannot open a directory to copy");
	d = fdopendir(dfd);
	if (!d) {
		close_keep_errno(dfd);
		return box_err_sys(cp->err, "cannot read a directory to copy");
	}
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				ret = box_err_sys(cp->err, "cannot read a directory to copy");
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (cp->seen >= cp->max_files) {
			ret = box_err_limit(cp->err, BOX_E_LIMIT, "files", (int64_t)cp->max_files,
					    "files", "input has more than %llu entries",
					    (unsigned long long)cp->max_files);
			break;
		}
		cp->seen++;
		if (depth + 1 > cp->max_depth) {
			ret = box_err_limit(cp->err, BOX_E_LIMIT, "depth", cp->max_depth,
					    "components", "input is deeper than %u levels",
					    cp->max_depth);
			break;
		}
		ret = copy_entry(cp, src, dst, de->d_name, depth + 1);
		if (ret < 0)
			break;
	}
	closedir(d);
	return ret;
}

/* Opens src itself, following it: the caller named it. Returns an fd and fills *sb. */
static int open_root(const char *src, struct stat *sb, struct box_err *err)
{
	struct stat sb2;
	int fd;

	if (stat(src, sb) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return box_err_set(err, BOX_E_NOT_FOUND, "%s does not exist", src);
		return box_err_sys(err, "cannot stat %s", src);
	}
	if (S_ISDIR(sb->st_mode))
		fd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else if (S_ISREG(sb->st_mode))
		fd = open(src, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	else
		return box_err_set(err, BOX_E_INVALID,
				   "%s is neither a regular file nor a directory", src);
	if (fd < 0)
		return box_err_sys(err, "cannot open %s", src);
	if (fstat(fd, &sb2) < 0 || sb2.st_dev != sb->st_dev || sb2.st_ino != sb->st_ino) {
		close(fd);
		return box_err_set(err, BOX_E_IO, "%s changed while it was opened", src);
	}
	return fd;
}

static int copy_root(struct cp *cp, int in, const struct stat *sb, int destdirfd, char *tmp,
		     size_t tmpsz)
{
	for (int i = 0; i < TMP_TRIES; i++) {
		int out, r;

		if (box_sbcopy_tmp_name(tmp, tmpsz, "sbcopy", cp->err) < 0)
			return -1;
		if (S_ISREG(sb->st_mode)) {
			r = copy_fd(cp, in, destdirfd, tmp, sb->st_mode);
			if (r < 0 && cp->err->sys_errno == EEXIST)
				continue;
			return r;
		}
		if (mkdirat(destdirfd, tmp, 0700) < 0) {
			if (errno == EEXIST)
				continue;
			return write_err(cp->err, "create", tmp);
		}
		out = openat(destdirfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (out < 0)
			return box_err_sys(cp->err, "cannot open %s", tmp);
		cp->st.dirs++;
		r = copy_dir(cp, in, out, 0);
		if (r == 0 && fchmod(out, 0755) < 0)
			r = box_err_sys(cp->err, "cannot chmod %s", tmp);
		close(out);
		return r;
	}
	*tmp = 0;
	return box_err_set(cp->err, BOX_E_IO, "create a temporary copy: %d names taken",
			   TMP_TRIES);
}

int box_sbcopy_in(const char *src, int destdirfd, const char *name,
		  const struct box_sbcopy_limits *lim, struct box_sbcopy_stats *st,
		  struct box_err *err)
{
	struct cp cp;
	struct stat sb;
	char tmp[64];
	int in, r;

	memset(&cp, 0, sizeof(cp));
	cp.err = err;
	cp.max_files = lim && lim->max_files ? lim->max_files : BOX_SBCOPY_MAX_FILES;
	cp.max_bytes = lim && lim->max_bytes ? lim->max_bytes : (uint64_t)BOX_SBCOPY_MAX_BYTES;
	cp.max_depth = lim && lim->max_depth ? lim->max_depth : BOX_SBCOPY_MAX_DEPTH;
	if (st)
		memset(st, 0, sizeof(*st));
	if (!src || !*src)
		return box_err_set(err, BOX_E_INVALID, "empty source path");
	if (!valid_name(name))
		return box_err_set(err, BOX_E_INVALID, "invalid destination name");
	if (cp.max_depth > BOX_SBCOPY_DEPTH_CEILING)
		return box_err_set(err, BOX_E_INVALID, "max_depth is above %d",
				   BOX_SBCOPY_DEPTH_CEILING);
	if (fstatat(destdirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0)
		return box_err_set(err, BOX_E_CONFLICT, "%s already exists", name);
	if (errno != ENOENT)
		return box_err_sys(err, "cannot stat %s", name);
	in = open_root(src, &sb, err);
	if (in < 0)
		return -1;
	cp.buf = malloc(COPY_BUF);
	cp.link = malloc(PATH_MAX);
	if (!cp.buf || !cp.link) {
		r = box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	*tmp = 0;
	r = copy_root(&cp, in, &sb, destdirfd, tmp, sizeof(tmp));
	if (r == 0 && renameat2(destdirfd, tmp, destdirfd, name, RENAME_NOREPLACE) < 0) {
		if (errno == EEXIST)
			r = box_err_set(err, BOX_E_CONFLICT, "%s already exists", name);
		else
			r = box_err_sys(err, "cannot rename the copy to %s", name);
	}
	if (r < 0 && *tmp)
		(void)box_fswalk_remove(destdirfd, tmp, &(struct box_err){ 0 });
out:
	close(in);
	free(cp.buf);
	free(cp.link);
	if (st)
		*st = cp.st;
	return r;
}

/* One directory of box_sbcopy_chown_tree: its entries, then those of its subdirectories. */
static int chown_dir(int fd, uid_t uid, gid_t gid, unsigned depth, uint64_t *count,
		     struct box_err *err)
{
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (depth > BOX_SBCOPY_DEPTH_CEILING)
		return box_err_limit(err, BOX_E_LIMIT, "depth", BOX_SBCOPY_DEPTH_CEILING, "levels",
				     "a tree deeper than %d levels", BOX_SBCOPY_DEPTH_CEILING);
	if (fchown(fd, uid, gid) < 0) {
		close(fd);
		return box_err_sys(err, "chown");
	}
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return box_err_sys(err, "opendir");
	}
	while (r == 0 && (errno = 0, de = readdir(d))) {
		int sub;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (++*count > BOX_SBCOPY_CHOWN_MAX_ENTRIES) {
			r = box_err_limit(err, BOX_E_LIMIT, "entries", BOX_SBCOPY_CHOWN_MAX_ENTRIES,
					  "entries", "more than %d entries",
					  BOX_SBCOPY_CHOWN_MAX_ENTRIES);
			break;
		}
		sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			r = chown_dir(sub, uid, gid, depth + 1, count, err);
		else if (fchownat(dirfd(d), de->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 &&
			 errno != ENOENT)
			r = box_err_sys(err, "chown %.200s", de->d_name);
	}
	if (r == 0 && errno)
		r = box_err_sys(err, "readdir");
	closedir(d);
	return r;
}

int box_sbcopy_chown_tree(int dirfd, const char *name, uid_t uid, gid_t gid,
			  struct box_err *err)
{
	uint64_t count = 0;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0)
		return chown_dir(fd, uid, gid, 0, &count, err);
	if (errno != ENOTDIR && errno != ELOOP)
		return box_err_sys(err, "cannot open %.200s", name);
	if (fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return box_err_sys(err, "chown %.200s", name);
	return 0;
}
