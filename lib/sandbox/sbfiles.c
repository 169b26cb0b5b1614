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

#include "boxarchive.h"
#include "buf.h"
#include "fswalk.h"
#include "json.h"
#include "sbcopy.h"
#include "sbfiles.h"
#include "sha256.h"
#include "utf8.h"
#include "banned.h"

#define HASH_BUF 65536
#define TMP_TRIES 16
/* A snapshot's archive is never much larger than the content it may hold. */
#define MAX_ARCHIVE_BYTES (2 * BOX_ARCHIVE_MAX_BYTES)

static void close_keep_errno(int fd)
{
	int e = errno;

	close(fd);
	errno = e;
}

static int fsync_dir(int dirfd, struct box_err *err)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r;

	if (fd < 0)
		return box_err_sys(err, "cannot open a directory to fsync it");
	r = fsync(fd);
	if (r < 0)
		box_err_sys(err, "cannot fsync a directory");
	close(fd);
	return r < 0 ? -1 : 0;
}

/* ------------------------------------------------------------------ outputs */

struct out_ent {
	char *path;
	int is_link;
	int64_t size;
	char hex[BOX_SHA256_HEX_LEN + 1];
};

/* An inode already hashed: its other names reuse the digest. */
struct ino_ent {
	dev_t dev;
	ino_t ino;
	int used;
	int64_t size;
	char hex[BOX_SHA256_HEX_LEN + 1];
};

struct outs {
	struct out_ent *v;
	size_t n, cap;
	size_t max, seen;
	int64_t max_bytes, hashed;
	size_t max_path_bytes, path_bytes;
	struct ino_ent *inos;      /* open addressing, ino_cap a power of two */
	size_t ino_n, ino_cap;
	char path[BOX_ARCHIVE_MAX_PATH + 1];
	char *buf;
	struct box_err *err;
};

static int outs_add(struct outs *o, int is_link, int64_t size, const char *hex)
{
	struct out_ent *e;
	size_t plen = strlen(o->path);

	if (plen > o->max_path_bytes - o->path_bytes)
		return box_err_limit(o->err, BOX_E_LIMIT, "path_bytes", (int64_t)o->max_path_bytes,
				     "bytes", "the paths under the output directory take more than "
				     "%zu bytes", o->max_path_bytes);
	o->path_bytes += plen;
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 64;
		struct out_ent *v = realloc(o->v, cap * sizeof(*v));

		if (!v)
			return box_err_set(o->err, BOX_E_INTERNAL, "out of memory");
		o->v = v;
		o->cap = cap;
	}
	e = &o->v[o->n];
	e->path = strdup(o->path);
	if (!e->path)
		return box_err_set(o->err, BOX_E_INTERNAL, "out of memory");
	e->is_link = is_link;
	e->size = size;
	snprintf(e->hex, sizeof(e->hex), "%s", hex ? hex : "");
	o->n++;
	return 0;
}

static size_t ino_slot(const struct outs *o, dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)ino * UINT64_C(0x9e3779b97f4a7c15)) ^ (uint64_t)dev;

	return (size_t)(h ^ (h >> 29)) & (o->ino_cap - 1);
}

/* The entry of (dev, ino): the hashed one, or the free slot where it would go. */
static struct ino_ent *ino_find(const struct outs *o, dev_t dev, ino_t ino)
{
	size_t k;

	if (!o->ino_cap)
		return NULL;
	for (k = ino_slot(o, dev, ino);; k = (k + 1) & (o->ino_cap - 1)) {
		struct ino_ent *e = &o->inos[k];

		if (!e->used || (e->dev == dev && e->ino == ino))
			return e;
	}
}

static int ino_add(struct outs *o, const struct stat *sb, int64_t size, const char *hex)
{
	struct ino_ent *e;

	/* kept at most half full, so that a probe always ends on a free slot */
	if ((o->ino_n + 1) * 2 > o->ino_cap) {
		struct outs grown = *o;

		grown.ino_cap = o->ino_cap ? o->ino_cap * 2 : 256;
		grown.inos = calloc(grown.ino_cap, sizeof(*grown.inos));
		if (!grown.inos)
			return box_err_set(o->err, BOX_E_INTERNAL, "out of memory");
		for (size_t k = 0; k < o->ino_cap; k++)
			if (o->inos[k].used)
				*ino_find(&grown, o->inos[k].dev, o->inos[k].ino) = o->inos[k];
		free(o->inos);
		o->inos = grown.inos;
		o->ino_cap = grown.ino_cap;
	}
	e = ino_find(o, sb->st_dev, sb->st_ino);
	e->used = 1;
	e->dev = sb->st_dev;
	e->ino = sb->st_ino;
	e->size = size;
	snprintf(e->hex, sizeof(e->hex), "%s", hex);
	o->ino_n++;
	return 0;
}

/* The listing of a name whose inode was hashed already, or 0 when it was not. */
static int ino_listed(struct outs *o, const struct stat *sb, int *done)
{
	const struct ino_ent *e = ino_find(o, sb->st_dev, sb->st_ino);

	*done = e && e->used;
	return *done ? outs_add(o, 0, e->size, e->hex) : 0;
}

/* Hashes at most the size fstat gave after the open, so a file that keeps growing ends; the
 * bytes a file would add to those hashed are checked before any is read. */
static int hash_file(struct outs *o, int dirfd, const char *name)
{
	struct box_sha256 h = { NULL };
	unsigned char d[BOX_SHA256_LEN];
	char hex[BOX_SHA256_HEX_LEN + 1];
	struct stat sb;
	int64_t left, done = 0;
	int fd, ret = -1, listed;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		/* gone, or swapped for a link since it was listed */
		if (errno == ENOENT || errno == ELOOP)
			return 0;
		return box_err_sys(o->err, "cannot open %s", o->path);
	}
	if (fstat(fd, &sb) < 0) {
		box_err_sys(o->err, "cannot stat %s", o->path);
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		ret = 0;
		goto out;
	}
	/* swapped for another name of an inode already hashed */
	if (ino_listed(o, &sb, &listed) < 0 || listed) {
		ret = listed ? 0 : -1;
		goto out;
	}
	if (sb.st_size > o->max_bytes - o->hashed) {
		box_err_limit(o->err, BOX_E_LIMIT, "bytes", o->max_bytes, "bytes",
			      "the files under the output directory hold more than %lld bytes "
			      "(%s has %lld)", (long long)o->max_bytes, o->path,
			      (long long)sb.st_size);
		goto out;
	}
	o->hashed += sb.st_size;
	if (box_sha256_init(&h, o->err) < 0)
		goto out;
	for (left = sb.st_size; left > 0;) {
		ssize_t r = read(fd, o->buf, left < HASH_BUF ? (size_t)left : HASH_BUF);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			box_err_sys(o->err, "cannot read %s", o->path);
			goto out;
		}
		if (r == 0)
			break;
		if (box_sha256_update(&h, o->buf, (size_t)r, o->err) < 0)
			goto out;
		left -= r;
		done += r;
	}
	if (box_sha256_final(&h, d, o->err) < 0)
		goto out;
	box_sha256_hex(d, hex);
	ret = outs_add(o, 0, done, hex) < 0 || ino_add(o, &sb, done, hex) < 0 ? -1 : 0;
out:
	box_sha256_release(&h);
	close(fd);
	return ret;
}

/* One entry of a directory, its relative path already in o->path (plen bytes). */
static int outs_walk(struct outs *o, int fd, size_t len, unsigned depth);

static int outs_entry(struct outs *o, int fd, const char *name, size_t plen, unsigned depth)
{
	struct stat sb;
	int sub, ret, listed;

	if (fstatat(fd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : box_err_sys(o->err, "cannot stat %s", o->path);
	if (S_ISLNK(sb.st_mode))
		return outs_add(o, 1, 0, NULL);
	if (S_ISREG(sb.st_mode)) {
		if (ino_listed(o, &sb, &listed) < 0)
			return -1;
		return listed ? 0 : hash_file(o, fd, name);
	}
	if (!S_ISDIR(sb.st_mode))
		return 0;   /* FIFOs, sockets, devices: never opened */
	sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0 && (errno == ENOENT || errno == ENOTDIR || errno == ELOOP))
		return 0;
	if (sub < 0)
		return box_err_sys(o->err, "cannot open %s", o->path);
	ret = outs_walk(o, sub, plen, depth + 1);
	close(sub);
	return ret;
}

/* o->path holds the relative path of the directory fd ("" for the root), len its length.
 * Recursive, at most BOX_ARCHIVE_MAX_DEPTH levels deep (two descriptors a level). */
static int outs_walk(struct outs *o, int fd, size_t len, unsigned depth)
{
	struct dirent *de;
	int dfd, ret = 0;
	DIR *d;

	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return box_err_sys(o->err, "cannot open %s", len ? o->path : "the output directory");
	d = fdopendir(dfd);
	if (!d) {
		close_keep_errno(dfd);
		return box_err_sys(o->err, "cannot read %s", len ? o->path : "the output directory");
	}
	for (;;) {
		size_t nlen, plen;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				ret = box_err_sys(o->err, "cannot read %s",
						  len ? o->path : "the output directory");
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (o->seen >= o->max) {
			ret = box_err_limit(o->err, BOX_E_LIMIT, "files", (int64_t)o->max, "files",
					    "more than %zu entries under the output directory",
					    o->max);
			break;
		}
		o->seen++;
		if (depth + 1 > BOX_ARCHIVE_MAX_DEPTH) {
			ret = box_err_limit(o->err, BOX_E_LIMIT, "depth", BOX_ARCHIVE_MAX_DEPTH,
					    "components", "an output is deeper than %d levels",
					    BOX_ARCHIVE_MAX_DEPTH);
			break;
		}
		nlen = strlen(de->d_name);
		plen = len + (len ? 1 : 0) + nlen;
		if (plen > BOX_ARCHIVE_MAX_PATH) {
			ret = box_err_limit(o->err, BOX_E_LIMIT, "path_length", BOX_ARCHIVE_MAX_PATH,
					    "bytes", "an output path is longer than %d bytes",
					    BOX_ARCHIVE_MAX_PATH);
			break;
		}
		if (len)
			o->path[len] = '/';
		memcpy(o->path + plen - nlen, de->d_name, nlen + 1);
		ret = outs_entry(o, fd, de->d_name, plen, depth);
		o->path[len] = 0;
		if (ret < 0)
			break;
	}
	closedir(d);
	return ret;
}

static int cmp_ent(const void *a, const void *b)
{
	const struct out_ent *x = a, *y = b;

	return strcmp(x->path, y->path);
}

static cJSON *outs_json(struct outs *o)
{
	struct box_buf name = BOX_BUF_INIT(4 * BOX_ARCHIVE_MAX_PATH + 4);
	cJSON *arr = cJSON_CreateArray();

	if (!arr)
		goto oom;
	for (size_t i = 0; i < o->n; i++) {
		const struct out_ent *e = &o->v[i];
		cJSON *obj = cJSON_CreateObject();
		int lossy;

		if (!obj)
			goto oom;
		cJSON_AddItemToArray(arr, obj);
		box_buf_truncate(&name, 0);
		lossy = box_utf8_sanitize(e->path, strlen(e->path), &name, o->err);
		if (lossy < 0)
			goto fail;
		if (!cJSON_AddStringToObject(obj, "path", name.data ? name.data : ""))
			goto oom;
		if (e->is_link) {
			if (!cJSON_AddStringToObject(obj, "type", "symlink"))
				goto oom;
		} else if (!box_json_add_int64(obj, "size", e->size) ||
			   !cJSON_AddStringToObject(obj, "sha256", e->hex)) {
			goto oom;
		}
		if (lossy && !cJSON_AddTrueToObject(obj, "lossy"))
			goto oom;
	}
	box_buf_release(&name);
	return arr;
oom:
	box_err_set(o->err, BOX_E_INTERNAL, "out of memory");
fail:
	box_buf_release(&name);
	cJSON_Delete(arr);
	return NULL;
}

cJSON *box_sbfiles_outputs(int dirfd, const struct box_sbfiles_out_limits *lim,
			   struct box_err *err)
{
	struct outs o;
	cJSON *res = NULL;

	memset(&o, 0, sizeof(o));
	o.max = lim && lim->max_files ? lim->max_files : BOX_SBFILES_MAX_FILES;
	o.max_bytes = lim && lim->max_bytes > 0 ? lim->max_bytes : BOX_SBFILES_MAX_HASH_BYTES;
	o.max_path_bytes = lim && lim->max_path_bytes ? lim->max_path_bytes :
			   BOX_SBFILES_MAX_PATH_BYTES;
	o.err = err;
	o.buf = malloc(HASH_BUF);
	if (!o.buf) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	if (outs_walk(&o, dirfd, 0, 0) == 0) {
		if (o.n)
			qsort(o.v, o.n, sizeof(*o.v), cmp_ent);
		res = outs_json(&o);
	}
	for (size_t i = 0; i < o.n; i++)
		free(o.v[i].path);
	free(o.v);
	free(o.inos);
	free(o.buf);
	return res;
}

/* ------------------------------------------------------------------ snapshot */

int box_sbfiles_snapshot(int srcdirfd, int snapdirfd, char digest[BOX_SBFILES_DIGEST_LEN + 1],
			 struct box_sbfiles_stats *st, struct box_err *err)
{
	struct box_archive_stats ast;
	char tmp[64], final[BOX_SHA256_HEX_LEN + 16], hex[BOX_SHA256_HEX_LEN + 1];
	int64_t size;
	int fd = -1, existed = 0;

	memset(&ast, 0, sizeof(ast));
	if (st)
		memset(st, 0, sizeof(*st));
	for (int i = 0; i < TMP_TRIES && fd < 0; i++) {
		if (box_sbcopy_tmp_name(tmp, sizeof(tmp), "snapshot", err) < 0)
			return -1;
		fd = openat(snapdirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0644);
		if (fd < 0 && errno != EEXIST)
			return box_err_sys(err, "cannot create a snapshot file");
	}
	if (fd < 0)
		return box_err_set(err, BOX_E_IO, "create a snapshot file: %d names taken",
				   TMP_TRIES);
	if (box_archive_pack_ex(srcdirfd, fd, BOX_ARCHIVE_SYMLINKS | BOX_ARCHIVE_ANY_LINKS |
				BOX_ARCHIVE_SKIP_SPECIAL | BOX_ARCHIVE_FAST, &ast, err) < 0)
		goto fail;
	if (ast.bytes > BOX_ARCHIVE_MAX_BYTES) {
		box_err_limit(err, BOX_E_LIMIT, "bytes", BOX_ARCHIVE_MAX_BYTES, "bytes",
			      "the tree holds more than %lld bytes, too many to restore",
			      (long long)BOX_ARCHIVE_MAX_BYTES);
		goto fail;
	}
	if (lseek(fd, 0, SEEK_SET) < 0) {
		box_err_sys(err, "cannot rewind the snapshot");
		goto fail;
	}
	if (box_sha256_fd(fd, hex, &size, err) < 0)
		goto fail;
	if (fsync(fd) < 0) {
		box_err_sys(err, "cannot fsync the snapshot");
		goto fail;
	}
	if (close(fd) < 0) {
		fd = -1;
		box_err_sys(err, "cannot write the snapshot");
		goto fail;
	}
	fd = -1;
	snprintf(final, sizeof(final), "%s.tar.gz", hex);
	if (renameat2(snapdirfd, tmp, snapdirfd, final, RENAME_NOREPLACE) < 0) {
		if (errno != EEXIST) {
			box_err_sys(err, "cannot rename the snapshot into place");
			goto fail;
		}
		existed = 1;
		unlinkat(snapdirfd, tmp, 0);
	}
	if (!existed && fsync_dir(snapdirfd, err) < 0)
		return -1;
	snprintf(digest, BOX_SBFILES_DIGEST_LEN + 1, "sha256:%s", hex);
	if (st) {
		st->entries = ast.entries;
		st->files = ast.files;
		st->bytes = ast.bytes;
		st->archive_bytes = size;
		st->existed = existed;
		st->skipped = ast.skipped;
	}
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlinkat(snapdirfd, tmp, 0);
	return -1;
}

/* ------------------------------------------------------------------ restore */

static int parse_digest(const char *digest, char hex[BOX_SHA256_HEX_LEN + 1])
{
	if (!digest || strncmp(digest, "sha256:", 7) != 0 ||
	    strlen(digest) != BOX_SBFILES_DIGEST_LEN)
		return -1;
	for (int i = 0; i < BOX_SHA256_HEX_LEN; i++) {
		char c = digest[7 + i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return -1;
		hex[i] = c;
	}
	hex[BOX_SHA256_HEX_LEN] = 0;
	return 0;
}

static int same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Opens the snapshot and checks its digest; returns an fd rewound to the start. */
static int open_verified(int snapdirfd, const char *hex, struct stat *sb, struct box_err *err)
{
	char name[BOX_SHA256_HEX_LEN + 16], got[BOX_SHA256_HEX_LEN + 1];
	int fd;

	snprintf(name, sizeof(name), "%s.tar.gz", hex);
	fd = openat(snapdirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return box_err_set(err, BOX_E_NOT_FOUND, "no snapshot sha256:%s", hex);
		if (errno == ELOOP)
			return box_err_set(err, BOX_E_INTEGRITY,
					   "snapshot sha256:%s is a symlink", hex);
		return box_err_sys(err, "cannot open snapshot sha256:%s", hex);
	}
	if (fstat(fd, sb) < 0) {
		box_err_sys(err, "cannot stat snapshot sha256:%s", hex);
		goto fail;
	}
	if (!S_ISREG(sb->st_mode)) {
		box_err_set(err, BOX_E_INTEGRITY, "snapshot sha256:%s is not a regular file", hex);
		goto fail;
	}
	if (sb->st_size > MAX_ARCHIVE_BYTES) {
		box_err_limit(err, BOX_E_LIMIT, "archive_bytes", MAX_ARCHIVE_BYTES, "bytes",
			      "snapshot sha256:%s is larger than %lld bytes", hex,
			      (long long)MAX_ARCHIVE_BYTES);
		goto fail;
	}
	if (box_sha256_fd(fd, got, NULL, err) < 0)
		goto fail;
	if (strcmp(got, hex) != 0) {
		box_err_set(err, BOX_E_INTEGRITY, "snapshot sha256:%s has digest sha256:%s", hex,
			    got);
		goto fail;
	}
	if (lseek(fd, 0, SEEK_SET) < 0) {
		box_err_sys(err, "cannot rewind snapshot sha256:%s", hex);
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/* Puts tmp in name's place; old gets the name now holding the old tree ("" if none). */
static int swap_in(int parentfd, const char *tmp, const char *name, char *old, size_t oldsz,
		   struct box_err *err)
{
	struct stat sb;

	*old = 0;
	if (fstatat(parentfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return box_err_sys(err, "cannot stat %s", name);
		if (renameat2(parentfd, tmp, parentfd, name, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno == EEXIST)
			return box_err_set(err, BOX_E_CONFLICT, "%s appeared during the restore",
					   name);
		return box_err_sys(err, "cannot rename the restored tree to %s", name);
	}
	if (renameat2(parentfd, tmp, parentfd, name, RENAME_EXCHANGE) == 0) {
		snprintf(old, oldsz, "%s", tmp);
		return 0;
	}
	/* file systems without RENAME_EXCHANGE: two renames, undone if the second fails */
	if (errno != EINVAL && errno != ENOSYS)
		return box_err_sys(err, "cannot swap the restored tree with %s", name);
	if (box_sbcopy_tmp_name(old, oldsz, "sbold", err) < 0)
		return -1;
	if (renameat2(parentfd, name, parentfd, old, RENAME_NOREPLACE) < 0) {
		*old = 0;
		return box_err_sys(err, "cannot move %s aside", name);
	}
	if (renameat(parentfd, tmp, parentfd, name) < 0) {
		box_err_sys(err, "cannot rename the restored tree to %s", name);
		renameat(parentfd, old, parentfd, name);
		*old = 0;
		return -1;
	}
	return 0;
}

int box_sbfiles_restore(int snapdirfd, const char *digest, int parentfd, const char *name,
			int64_t max_bytes, struct box_err *err)
{
	return box_sbfiles_restore_as(snapdirfd, digest, parentfd, name, max_bytes, (uid_t)-1,
				      (gid_t)-1, err);
}

int box_sbfiles_restore_as(int snapdirfd, const char *digest, int parentfd, const char *name,
			   int64_t max_bytes, uid_t uid, gid_t gid, struct box_err *err)
{
	struct box_archive_limits lim = {
		max_bytes > 0 && max_bytes < BOX_ARCHIVE_MAX_BYTES ? max_bytes : BOX_ARCHIVE_MAX_BYTES,
		BOX_ARCHIVE_MAX_ENTRIES, BOX_ARCHIVE_MAX_PATH, BOX_ARCHIVE_MAX_DEPTH,
	};
	struct box_err ignored;
	char hex[BOX_SHA256_HEX_LEN + 1], tmp[64], old[64];
	struct stat before, after;
	int fd, dfd = -1, made = 0;

	if (parse_digest(digest, hex) < 0)
		return box_err_set(err, BOX_E_INVALID, "invalid snapshot digest (sha256:<64 hex>)");
	if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") ||
	    strlen(name) > NAME_MAX)
		return box_err_set(err, BOX_E_INVALID, "invalid name to restore to");
	fd = open_verified(snapdirfd, hex, &before, err);
	if (fd < 0)
		return -1;
	for (int i = 0; i < TMP_TRIES && !made; i++) {
		if (box_sbcopy_tmp_name(tmp, sizeof(tmp), "sbrestore", err) < 0)
			goto fail;
		if (mkdirat(parentfd, tmp, 0700) == 0)
			made = 1;
		else if (errno != EEXIST) {
			box_err_sys(err, "cannot create a directory to restore into");
			goto fail;
		}
	}
	if (!made) {
		box_err_set(err, BOX_E_IO, "create a directory to restore into: %d names taken",
			    TMP_TRIES);
		goto fail;
	}
	dfd = openat(parentfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		box_err_sys(err, "cannot open the directory to restore into");
		goto fail;
	}
	if (box_archive_extract_ex(fd, dfd, &lim, BOX_ARCHIVE_SYMLINKS | BOX_ARCHIVE_ANY_LINKS,
				   NULL, err) < 0) {
		if (err->code == BOX_E_LIMIT && !strcmp(err->limit, "bytes") && max_bytes > 0 &&
		    max_bytes == lim.max_bytes)
			box_err_limit(err, BOX_E_LIMIT, "disk", max_bytes, "bytes", "snapshot %s "
				      "holds more than the %lld bytes allowed; nothing was replaced",
				      digest, (long long)max_bytes);
		goto fail;
	}
	if (fstat(fd, &after) < 0) {
		box_err_sys(err, "cannot stat snapshot %s", digest);
		goto fail;
	}
	if (!same_file(&before, &after)) {
		box_err_set(err, BOX_E_INTEGRITY, "snapshot %s changed while it was restored",
			    digest);
		goto fail;
	}
	if (fchmod(dfd, 0755) < 0) {
		box_err_sys(err, "cannot chmod the restored tree");
		goto fail;
	}
	/* the tree is the guest's before it takes the name: a restore never leaves it a tree
	 * it cannot change, whenever it is cut short */
	if ((uid != (uid_t)-1 || gid != (gid_t)-1) &&
	    box_sbcopy_chown_tree(dfd, ".", uid, gid, err) < 0)
		goto fail;
	close(dfd);
	dfd = -1;
	if (swap_in(parentfd, tmp, name, old, sizeof(old), err) < 0)
		goto fail;
	close(fd);
	if (*old && box_fswalk_remove(parentfd, old, &ignored) < 0) {
		box_err_set(err, BOX_E_IO, "the snapshot is in place, but the old tree (%s) could "
			    "not be removed: %.600s", old, ignored.message);
		return -1;
	}
	return fsync_dir(parentfd, err);
fail:
	if (dfd >= 0)
		close(dfd);
	close(fd);
	if (made)
		box_fswalk_remove(parentfd, tmp, &ignored);
	return -1;
}
