#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "boxarchive.h"
#include "sbcopy.h"
#include "sha256.h"
#include "buf.h"
#include "banned.h"

#define IO_CHUNK 65536
#define NAME_MAX_BYTES 255
#define SHOWN_MAX 160

/*
 * A printable, bounded copy of an untrusted name for messages: control bytes become '?', and
 * long names are cut with "...".
 */
static const char *shown(const char *s, char out[SHOWN_MAX + 4])
{
	size_t i;

	for (i = 0; s[i] && i < SHOWN_MAX; i++) {
		unsigned char c = (unsigned char)s[i];

		out[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	if (s[i]) {
		memcpy(out + i, "...", 3);
		i += 3;
	}
	out[i] = 0;
	return out;
}

static mode_t norm_mode(mode_t m)
{
	if (S_ISDIR(m) || (m & 0111))
		return 0755;
	return 0644;
}

/*
 * The containment rule of BOX_ARCHIVE_SYMLINKS for a link at depth components ("a/l" has
 * depth 2). Leading ".." climb through real directories (neither the walk nor the extractor
 * goes through links), and plain components only descend, through links obeying the same
 * rule, so resolution stays inside. lib/core/sbcopy.c's safe_target() applies the same rule; it is
 * not shared because box-sandbox links sbcopy without libarchive.
 */
static int link_contained(const char *t, size_t len, int64_t depth)
{
	const char *p = t, *end = t + len;
	int64_t up = 0;
	int seen_plain = 0;

	if (len == 0 || len > BOX_ARCHIVE_MAX_LINK || t[0] == '/' || memchr(t, 0, len))
		return 0;
	while (p < end) {
		const char *slash = memchr(p, '/', (size_t)(end - p));
		size_t n = slash ? (size_t)(slash - p) : (size_t)(end - p);

		if (n == 0)
			return 0;
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (seen_plain || ++up > depth - 1)
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

static void close_keep_errno(int fd)
{
	int e = errno;

	if (fd >= 0)
		close(fd);
	errno = e;
}

/* ------------------------------------------------------------------ tree walking */

struct node {
	char *path;     /* relative, no "./", no trailing "/" */
	char *link;     /* a packed symlink's target, else NULL */
	mode_t mode;
	int64_t size;
	dev_t dev;
	ino_t ino;
	struct timespec mtim, ctim;   /* for box_archive_tree_digest_ex's hooks */
};

struct walk {
	struct node *v;
	size_t n, cap;
	int packing;    /* refuse what a pack cannot hold instead of listing it */
	unsigned int flags;
	int64_t skipped;   /* specials left out (BOX_ARCHIVE_SKIP_SPECIAL) */
	struct box_err *err;
};

static void walk_release(struct walk *w)
{
	for (size_t i = 0; i < w->n; i++) {
		free(w->v[i].path);
		free(w->v[i].link);
	}
	free(w->v);
	w->v = NULL;
	w->n = w->cap = 0;
}

static int walk_refuse(struct walk *w, const char *path, const char *what)
{
	char s[SHOWN_MAX + 4];

	box_err_set(w->err, BOX_E_INVALID, "cannot pack %s: %s", shown(path, s), what);
	box_err_path(w->err, s);
	return -1;
}

/* A name the extractor would refuse makes an artifact nobody can pull: refuse it early. */
static int check_pack_name(struct walk *w, const char *path, const char *name)
{
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		if (*p < 0x20 || *p == 0x7f || *p == '\\')
			return walk_refuse(w, path, "a control character or backslash in the name");
	return 0;
}

/* Keeps a symlink's target as read now, so what is packed is what was checked. */
static int walk_link(struct walk *w, int fd, const char *name, int depth, struct node *nd)
{
	char t[BOX_ARCHIVE_MAX_LINK + 1], s[SHOWN_MAX + 4];
	ssize_t n;

	n = readlinkat(fd, name, t, sizeof(t));
	if (n < 0)
		return box_err_sys(w->err, "cannot read symlink %s", nd->path);
	if ((w->flags & BOX_ARCHIVE_ANY_LINKS) ? n == 0 || n > BOX_ARCHIVE_MAX_LINK :
	    !link_contained(t, (size_t)n, depth)) {
		box_err_set(w->err, BOX_E_POLICY,
			    "cannot pack %s: a symlink whose target is absolute, leaves the tree "
			    "or is longer than %d bytes", shown(nd->path, s), BOX_ARCHIVE_MAX_LINK);
		box_err_path(w->err, s);
		return -1;
	}
	nd->link = strndup(t, (size_t)n);
	if (!nd->link)
		return box_err_set(w->err, BOX_E_INTERNAL, "out of memory");
	return 0;
}

static int walk_push(struct walk *w, int fd, const char *prefix, size_t plen, const char *name,
		     int depth, const struct stat *sb)
{
	size_t nlen = strlen(name), len = plen ? plen + 1 + nlen : nlen;
	struct node *nd;

	if (w->n >= BOX_ARCHIVE_MAX_ENTRIES)
		return box_err_limit(w->err, BOX_E_LIMIT, "entries", BOX_ARCHIVE_MAX_ENTRIES,
				     "entries", "more than %d entries in the tree",
				     BOX_ARCHIVE_MAX_ENTRIES);
	if (len > BOX_ARCHIVE_MAX_PATH)
		return box_err_limit(w->err, BOX_E_LIMIT, "path_length", BOX_ARCHIVE_MAX_PATH,
				     "bytes", "a path in the tree is longer than %d bytes",
				     BOX_ARCHIVE_MAX_PATH);
	if (depth > BOX_ARCHIVE_MAX_DEPTH)
		return box_err_limit(w->err, BOX_E_LIMIT, "depth", BOX_ARCHIVE_MAX_DEPTH,
				     "components", "the tree is deeper than %d levels",
				     BOX_ARCHIVE_MAX_DEPTH);
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct node *v = realloc(w->v, cap * sizeof(*v));

		if (!v)
			return box_err_set(w->err, BOX_E_INTERNAL, "out of memory");
		w->v = v;
		w->cap = cap;
	}
	nd = &w->v[w->n];
	nd->link = NULL;
	nd->path = malloc(len + 1);
	if (!nd->path)
		return box_err_set(w->err, BOX_E_INTERNAL, "out of memory");
	if (plen) {
		memcpy(nd->path, prefix, plen);
		nd->path[plen] = '/';
		memcpy(nd->path + plen + 1, name, nlen + 1);
	} else {
		memcpy(nd->path, name, nlen + 1);
	}
	nd->mode = sb->st_mode;
	nd->size = S_ISDIR(sb->st_mode) ? 0 : (int64_t)sb->st_size;
	nd->dev = sb->st_dev;
	nd->ino = sb->st_ino;
	nd->mtim = sb->st_mtim;
	nd->ctim = sb->st_ctim;
	w->n++;
	if (w->packing) {
		if (check_pack_name(w, nd->path, name) < 0)
			return -1;
		if (S_ISLNK(sb->st_mode) && (w->flags & BOX_ARCHIVE_SYMLINKS))
			return walk_link(w, fd, name, depth, nd);
		if (S_ISLNK(sb->st_mode))
			return walk_refuse(w, nd->path, "a symlink");
		if (!S_ISREG(sb->st_mode) && !S_ISDIR(sb->st_mode) &&
		    (w->flags & BOX_ARCHIVE_SKIP_SPECIAL)) {
			free(nd->path);
			w->n--;
			w->skipped++;
			return 0;
		}
		if (!S_ISREG(sb->st_mode) && !S_ISDIR(sb->st_mode))
			return walk_refuse(w, nd->path,
					   "not a regular file or directory (device, FIFO or socket)");
	}
	return 0;
}

/* Lists the directory fd (whose own path is prefix) into w, then descends. Each level holds
 * one fd; the depth is bounded by BOX_ARCHIVE_MAX_DEPTH through walk_push. */
static int walk_dir(struct walk *w, int fd, const char *prefix, int depth)
{
	size_t plen = strlen(prefix), start = w->n, end;
	struct dirent *de;
	struct stat sb;
	DIR *d;
	int dfd;

	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return box_err_sys(w->err, "cannot open directory %s", plen ? prefix : ".");
	d = fdopendir(dfd);
	if (!d) {
		close_keep_errno(dfd);
		return box_err_sys(w->err, "cannot read directory %s", plen ? prefix : ".");
	}
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de)
			break;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(fd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
			box_err_sys(w->err, "cannot stat %s/%s", prefix, de->d_name);
			closedir(d);
			return -1;
		}
		if (walk_push(w, fd, prefix, plen, de->d_name, depth + 1, &sb) < 0) {
			closedir(d);
			return -1;
		}
	}
	if (errno) {
		box_err_sys(w->err, "cannot read directory %s", plen ? prefix : ".");
		closedir(d);
		return -1;
	}
	closedir(d);
	end = w->n;
	for (size_t i = start; i < end; i++) {
		const char *base;
		int sub, r;

		if (!S_ISDIR(w->v[i].mode))
			continue;
		base = w->v[i].path + (plen ? plen + 1 : 0);
		sub = openat(fd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			return box_err_sys(w->err, "cannot open directory %s", w->v[i].path);
		if (fstat(sub, &sb) < 0 || sb.st_dev != w->v[i].dev || sb.st_ino != w->v[i].ino) {
			close(sub);
			return box_err_set(w->err, BOX_E_IO, "%s changed while it was read",
					   w->v[i].path);
		}
		r = walk_dir(w, sub, w->v[i].path, depth + 1);
		close(sub);
		if (r < 0)
			return -1;
	}
	return 0;
}

static int node_cmp(const void *a, const void *b)
{
	return strcmp(((const struct node *)a)->path, ((const struct node *)b)->path);
}

static int walk_tree(struct walk *w, int dirfd)
{
	if (walk_dir(w, dirfd, "", 0) < 0)
		return -1;
	if (w->n)
		qsort(w->v, w->n, sizeof(*w->v), node_cmp);
	return 0;
}

/*
 * Opens the parent directory of path (relative, "/"-separated) below rootfd one component at a
 * time with O_NOFOLLOW, so a directory swapped for a symlink while we work cannot lead outside
 * the tree. Returns the fd (rootfd itself for a top-level path: do not close that one) and
 * points *base at the last component, or -1 with err set.
 */
static int open_parent_of(int rootfd, const char *path, const char **base, struct box_err *err)
{
	char comp[NAME_MAX_BYTES + 1];
	const char *p = path, *slash;
	int cur = rootfd, fd;

	while ((slash = strchr(p, '/'))) {
		size_t n = (size_t)(slash - p);

		if (n > NAME_MAX_BYTES) {
			errno = ENAMETOOLONG;
			fd = -1;
		} else {
			memcpy(comp, p, n);
			comp[n] = 0;
			fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (cur != rootfd)
			close_keep_errno(cur);
		if (fd < 0)
			return box_err_sys(err, "cannot open the directory of %s", path);
		cur = fd;
		p = slash + 1;
	}
	*base = p;
	return cur;
}

/* Opens the regular file of nd below rootfd; it must still be the inode the walk saw. */
static int open_node(int rootfd, const struct node *nd, int flags, struct box_err *err)
{
	const char *base;
	struct stat sb;
	int pfd, fd;

	pfd = open_parent_of(rootfd, nd->path, &base, err);
	if (pfd < 0)
		return -1;
	fd = openat(pfd, base, flags | O_NOFOLLOW | O_CLOEXEC);
	if (pfd != rootfd)
		close_keep_errno(pfd);
	if (fd < 0)
		return box_err_sys(err, "cannot open %s", nd->path);
	if (fstat(fd, &sb) < 0) {
		box_err_sys(err, "cannot stat %s", nd->path);
		close(fd);
		return -1;
	}
	if (sb.st_dev != nd->dev || sb.st_ino != nd->ino || !S_ISREG(sb.st_mode) ||
	    (int64_t)sb.st_size != nd->size) {
		close(fd);
		return box_err_set(err, BOX_E_IO, "%s changed while it was read", nd->path);
	}
	return fd;
}

static ssize_t read_retry(int fd, void *buf, size_t n)
{
	ssize_t r;

	do
		r = read(fd, buf, n);
	while (r < 0 && errno == EINTR);
	return r;
}

/* ------------------------------------------------------------------ packing */

struct sink {
	int fd;
	int sys_errno;  /* of a failed write, since libarchive's own errno values are private */
	int64_t bytes;
};

static la_ssize_t sink_write(struct archive *a, void *ctx, const void *buf, size_t n)
{
	struct sink *s = ctx;

	if (box_write_all(s->fd, buf, n) < 0) {
		s->sys_errno = errno;
		archive_set_error(a, errno, "write failed");
		return -1;
	}
	s->bytes += (int64_t)n;
	return (la_ssize_t)n;
}

static int pack_fail(struct archive *a, const struct sink *s, struct box_err *err,
		     const char *what)
{
	const char *msg = archive_error_string(a);

	if (s && s->sys_errno) {
		errno = s->sys_errno;
		return box_err_sys(err, "%s", what);
	}
	return box_err_set(err, BOX_E_INTERNAL, "%s: %s", what, msg ? msg : "libarchive error");
}

static int pack_file(struct archive *a, const struct sink *sink, int rootfd,
		     const struct node *nd, char *buf, struct box_err *err)
{
	int64_t left = nd->size;
	ssize_t r;
	int fd;

	fd = open_node(rootfd, nd, O_RDONLY | O_NONBLOCK, err);
	if (fd < 0)
		return -1;
	while (left > 0) {
		r = read_retry(fd, buf, left < IO_CHUNK ? (size_t)left : IO_CHUNK);
		if (r < 0) {
			box_err_sys(err, "cannot read %s", nd->path);
			goto fail;
		}
		if (r == 0)
			break;
		if (archive_write_data(a, buf, (size_t)r) != r) {
			pack_fail(a, sink, err, "cannot write the archive");
			goto fail;
		}
		left -= r;
	}
	if (left || read_retry(fd, buf, 1) != 0) {
		box_err_set(err, BOX_E_IO, "%s changed while it was read", nd->path);
		goto fail;
	}
	close(fd);
	return 0;
fail:
	close(fd);
	return -1;
}

static int pack_entries(struct archive *a, const struct sink *sink, int rootfd,
			const struct walk *w, struct box_archive_stats *st, struct box_err *err)
{
	struct archive_entry *e = archive_entry_new();
	struct box_buf name = BOX_BUF_INIT(BOX_ARCHIVE_MAX_PATH + 2);
	char *buf = malloc(IO_CHUNK);
	int ret = -1;

	if (!e || !buf) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < w->n; i++) {
		const struct node *nd = &w->v[i];
		int dir = S_ISDIR(nd->mode), lnk = nd->link != NULL;

		box_buf_truncate(&name, 0);
		if (box_buf_puts(&name, nd->path, err) < 0 ||
		    (dir && box_buf_puts(&name, "/", err) < 0))
			goto out;
		archive_entry_clear(e);
		archive_entry_copy_pathname(e, name.data);
		archive_entry_set_filetype(e, dir ? AE_IFDIR : lnk ? AE_IFLNK : AE_IFREG);
		archive_entry_set_perm(e, lnk ? 0777 : norm_mode(nd->mode));
		archive_entry_set_size(e, lnk ? 0 : nd->size);
		if (lnk)
			archive_entry_copy_symlink(e, nd->link);
		archive_entry_set_mtime(e, 0, 0);
		archive_entry_set_uid(e, 0);
		archive_entry_set_gid(e, 0);
		if (archive_write_header(a, e) != ARCHIVE_OK) {
			pack_fail(a, sink, err, "cannot write the archive");
			goto out;
		}
		if (!dir && !lnk && nd->size && pack_file(a, sink, rootfd, nd, buf, err) < 0)
			goto out;
		if (st) {
			st->entries++;
			st->dirs += dir;
			st->links += lnk;
			st->files += !dir && !lnk;
			st->bytes += lnk ? 0 : nd->size;
		}
	}
	ret = 0;
out:
	box_buf_release(&name);
	archive_entry_free(e);
	free(buf);
	return ret;
}

/* Only trees with non-ASCII names need the pax hdrcharset record: ASCII names then stay plain
 * ustar headers, which every tar reads without a word about unknown keywords. */
static int non_ascii_str(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
		if (*p >= 0x80)
			return 1;
	return 0;
}

static int non_ascii(const struct walk *w)
{
	for (size_t i = 0; i < w->n; i++)
		if (non_ascii_str(w->v[i].path) || non_ascii_str(w->v[i].link))
			return 1;
	return 0;
}

int box_archive_pack(int dirfd, int outfd, struct box_archive_stats *st, struct box_err *err)
{
	return box_archive_pack_ex(dirfd, outfd, 0, st, err);
}

int box_archive_pack_ex(int dirfd, int outfd, unsigned int flags, struct box_archive_stats *st,
			struct box_err *err)
{
	struct walk w = { .packing = 1, .flags = flags, .err = err };
	struct sink sink = { outfd, 0, 0 };
	struct archive *a = NULL;
	int ret = -1;

	if (st)
		memset(st, 0, sizeof(*st));
	if (flags & ~(BOX_ARCHIVE_SYMLINKS | BOX_ARCHIVE_FAST | BOX_ARCHIVE_ANY_LINKS |
		      BOX_ARCHIVE_SKIP_SPECIAL))
		return box_err_set(err, BOX_E_INVALID, "unknown archive flags %#x", flags);
	if (walk_tree(&w, dirfd) < 0)
		goto out;
	if (st)
		st->skipped = w.skipped;
	a = archive_write_new();
	if (!a) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	/* The gzip member gets no name and mtime 0 (gzip -n); a fixed level and no padding after
	 * the trailer keep the bytes a function of the tree alone. Non-ASCII names are stored as
	 * the raw bytes they are (pax hdrcharset=BINARY), never converted through the locale, so
	 * the output does not depend on the packer's LANG either. */
	if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
	    archive_write_add_filter_gzip(a) != ARCHIVE_OK ||
	    archive_write_set_options(a, "gzip:!timestamp") != ARCHIVE_OK ||
	    (non_ascii(&w) && archive_write_set_options(a, "pax:hdrcharset=BINARY") != ARCHIVE_OK) ||
	    archive_write_set_options(a, (flags & BOX_ARCHIVE_FAST) ? "gzip:compression-level=1" :
				      "gzip:compression-level=6") != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK) {
		pack_fail(a, NULL, err, "cannot set up the archive writer");
		goto out;
	}
	if (archive_write_open(a, &sink, NULL, sink_write, NULL) != ARCHIVE_OK) {
		pack_fail(a, &sink, err, "cannot start the archive");
		goto out;
	}
	if (pack_entries(a, &sink, dirfd, &w, st, err) < 0)
		goto out;
	if (archive_write_close(a) != ARCHIVE_OK) {
		pack_fail(a, &sink, err, "cannot finish the archive");
		goto out;
	}
	ret = 0;
out:
	if (st)
		st->archive_bytes = sink.bytes;
	if (a)
		archive_write_free(a);
	walk_release(&w);
	return ret;
}

/* ------------------------------------------------------------------ extraction */

void box_archive_default_limits(int64_t compressed_size, struct box_archive_limits *out)
{
	if (compressed_size <= 0)
		out->max_bytes = 0;
	else if (compressed_size > BOX_ARCHIVE_MAX_BYTES / BOX_ARCHIVE_BOMB_RATIO)
		out->max_bytes = BOX_ARCHIVE_MAX_BYTES;
	else
		out->max_bytes = compressed_size * BOX_ARCHIVE_BOMB_RATIO;
	out->max_entries = BOX_ARCHIVE_MAX_ENTRIES;
	out->max_path = BOX_ARCHIVE_MAX_PATH;
	out->max_depth = BOX_ARCHIVE_MAX_DEPTH;
}

struct source {
	int fd;
	int sys_errno;
	int64_t bytes;
	char buf[IO_CHUNK];
};

/* With a seekable input libarchive reads a zip through its central directory, the only place
 * that holds modes and file types (symlinks); a pipe falls back to the streaming reader. */
static la_int64_t source_seek(struct archive *a, void *ctx, la_int64_t off, int whence)
{
	struct source *s = ctx;
	off_t r = lseek(s->fd, (off_t)off, whence);

	if (r < 0) {
		archive_set_error(a, errno, "seek failed");
		return ARCHIVE_FATAL;
	}
	return (la_int64_t)r;
}

static la_ssize_t source_read(struct archive *a, void *ctx, const void **out)
{
	struct source *s = ctx;
	ssize_t r = read_retry(s->fd, s->buf, sizeof(s->buf));

	if (r < 0) {
		s->sys_errno = errno;
		archive_set_error(a, errno, "read failed");
		return -1;
	}
	s->bytes += r;
	*out = s->buf;
	return r;
}

/* The set of paths seen, to refuse duplicates: open addressing, grown at half load. */
struct pathset {
	char **slot;
	size_t cap, n;
};

static uint64_t path_hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static void pathset_release(struct pathset *ps)
{
	for (size_t i = 0; i < ps->cap; i++)
		free(ps->slot[i]);
	free(ps->slot);
	ps->slot = NULL;
	ps->cap = ps->n = 0;
}

static char **pathset_find(char **slot, size_t cap, const char *s, size_t len)
{
	size_t i = (size_t)path_hash(s, len) & (cap - 1);

	while (slot[i] && (strlen(slot[i]) != len || memcmp(slot[i], s, len)))
		i = (i + 1) & (cap - 1);
	return &slot[i];
}

/* Returns 1 if added, 0 if already there, -1 on OOM. */
static int pathset_add(struct pathset *ps, const char *s, size_t len)
{
	char **at;

	if (2 * (ps->n + 1) > ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 256;
		char **slot = calloc(cap, sizeof(*slot));

		if (!slot)
			return -1;
		for (size_t i = 0; i < ps->cap; i++)
			if (ps->slot[i])
				*pathset_find(slot, cap, ps->slot[i], strlen(ps->slot[i])) =
					ps->slot[i];
		free(ps->slot);
		ps->slot = slot;
		ps->cap = cap;
	}
	at = pathset_find(ps->slot, ps->cap, s, len);
	if (*at)
		return 0;
	*at = strndup(s, len);
	if (!*at)
		return -1;
	ps->n++;
	return 1;
}

struct extract {
	struct archive *a;
	struct source *src;
	int destfd;
	const struct box_archive_limits *lim;
	struct box_archive_stats *st;
	struct pathset seen;
	char *parent;          /* path of the cached parent directory fd ("" for destfd) */
	int parentfd;
	unsigned int flags;
	char shown[SHOWN_MAX + 4];
	char *buf;
	struct box_err *err;
};

static int refuse(struct extract *x, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int refuse(struct extract *x, const char *name, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	box_err_set(x->err, BOX_E_INTEGRITY, "archive entry %s: %s", shown(name, x->shown), why);
	box_err_path(x->err, x->shown);
	return -1;
}

/* libarchive failed: our read of the input (io_error) or the archive itself (integrity). */
static int archive_failed(struct extract *x, const char *name, const char *what)
{
	const char *msg = archive_error_string(x->a);

	if (x->src->sys_errno) {
		errno = x->src->sys_errno;
		return box_err_sys(x->err, "cannot read the archive");
	}
	if (!name) {
		box_err_set(x->err, BOX_E_INTEGRITY, "%s: %s", what, msg ? msg : "format error");
		return -1;
	}
	return refuse(x, name, "%s: %s", what, msg ? msg : "format error");
}

static int over(struct extract *x, const char *name, const char *limit, int64_t configured,
		const char *unit)
{
	box_err_limit(x->err, BOX_E_LIMIT, limit, configured, unit,
		      "archive entry %s: over the %s cap of %" PRId64 " %s",
		      shown(name, x->shown), limit, configured, unit);
	box_err_path(x->err, x->shown);
	return -1;
}

/*
 * Checks an entry's name and reduces it to the path to create (*out, *outlen: no "./", no
 * final "/" for a directory). Returns 1 to create it, 0 for the root itself, -1 if refused.
 */
static int check_name(struct extract *x, const char *name, int dir, const char **out,
		      size_t *outlen)
{
	const char *p = name, *comp;
	size_t len, n;
	int64_t depth = 0;

	if (p[0] == '.' && p[1] == '/')
		p += 2;
	else if (p[0] == '.' && !p[1])
		p++;
	len = strlen(p);
	if (dir && len && p[len - 1] == '/')
		len--;
	if (!len && p != name) {
		if (!dir)
			return refuse(x, name, "a file cannot be the root");
		return 0;
	}
	if ((int64_t)len > x->lim->max_path)
		return over(x, name, "path_length", x->lim->max_path, "bytes");
	if (!len)
		return refuse(x, name, "empty path");
	if (p[0] == '/')
		return refuse(x, name, "absolute path");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c == '\\')
			return refuse(x, name, "backslash in the path");
		if (c < 0x20 || c == 0x7f)
			return refuse(x, name, "control character in the path");
	}
	for (comp = p; comp < p + len; comp += n + 1) {
		const char *slash = memchr(comp, '/', (size_t)(p + len - comp));

		n = slash ? (size_t)(slash - comp) : (size_t)(p + len - comp);
		if (n == 0)
			return refuse(x, name, "empty path component");
		if (n == 1 && comp[0] == '.')
			return refuse(x, name, "\".\" path component");
		if (n == 2 && comp[0] == '.' && comp[1] == '.')
			return refuse(x, name, "\"..\" path component");
		if (n > NAME_MAX_BYTES)
			return refuse(x, name, "path component longer than %d bytes",
				      NAME_MAX_BYTES);
		if (++depth > x->lim->max_depth)
			return over(x, name, "depth", x->lim->max_depth, "components");
		if (!slash)
			break;
	}
	*out = p;
	*outlen = len;
	return 1;
}

/* Opens (creating what is missing, mode 0755) the directory path[0..len) below destfd. */
static int open_parent(struct extract *x, const char *name, const char *path, size_t len)
{
	char comp[NAME_MAX_BYTES + 1];
	const char *p = path, *end = path + len;
	int cur, fd;

	if (x->parent && strlen(x->parent) == len && !memcmp(x->parent, path, len))
		return x->parentfd;
	if (x->parentfd >= 0)
		close(x->parentfd);
	free(x->parent);
	x->parent = NULL;
	x->parentfd = -1;
	cur = openat(x->destfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return box_err_sys(x->err, "cannot open the destination directory");
	while (p < end) {
		const char *slash = memchr(p, '/', (size_t)(end - p));
		size_t n = slash ? (size_t)(slash - p) : (size_t)(end - p);
		int created = 0;

		memcpy(comp, p, n);
		comp[n] = 0;
		fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) {
			if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST) {
				box_err_sys(x->err, "cannot create directory for %s",
					    shown(name, x->shown));
				close(cur);
				return -1;
			}
			created = 1;
			fd = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		close_keep_errno(cur);
		if (fd < 0) {
			if (errno == ENOTDIR || errno == ELOOP)
				return refuse(x, name, "a parent is not a directory");
			return box_err_sys(x->err, "cannot open directory for %s",
					   shown(name, x->shown));
		}
		if (created && fchmod(fd, 0755) < 0) {
			box_err_sys(x->err, "cannot chmod directory for %s", shown(name, x->shown));
			close(fd);
			return -1;
		}
		cur = fd;
		p += n + 1;
	}
	x->parent = strndup(path, len);
	if (!x->parent) {
		close(cur);
		return box_err_set(x->err, BOX_E_INTERNAL, "out of memory");
	}
	x->parentfd = cur;
	return cur;
}

static int make_dir(struct extract *x, const char *name, int pfd, const char *base)
{
	struct stat sb;
	int fd;

	if (mkdirat(pfd, base, 0755) < 0) {
		if (errno != EEXIST)
			return box_err_sys(x->err, "cannot create directory %s",
					   shown(name, x->shown));
		/* Made implicitly for an earlier entry (explicit ones are in x->seen), unless a
		 * file of ours is there. */
		if (fstatat(pfd, base, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			return box_err_sys(x->err, "cannot stat %s", shown(name, x->shown));
		if (!S_ISDIR(sb.st_mode))
			return refuse(x, name, "conflicts with a file");
		return 0;
	}
	fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return box_err_sys(x->err, "cannot open directory %s", shown(name, x->shown));
	if (fchmod(fd, 0755) < 0) {
		box_err_sys(x->err, "cannot chmod directory %s", shown(name, x->shown));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int make_file(struct extract *x, struct archive_entry *e, const char *name, int pfd,
		     const char *base, mode_t mode)
{
	const struct box_archive_limits *lim = x->lim;
	int64_t got = 0;
	la_ssize_t r;
	int fd;

	fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		if (errno == EEXIST)
			return refuse(x, name, "conflicts with a directory");
		return box_err_sys(x->err, "cannot create %s", shown(name, x->shown));
	}
	/* The final mode at once, so even a partial tree holds only 0644/0755 files. */
	if (fchmod(fd, mode) < 0) {
		box_err_sys(x->err, "cannot chmod %s", shown(name, x->shown));
		goto fail;
	}
	/* Bounded by the byte cap: every round either ends the entry or adds to st->bytes. */
	for (;;) {
		r = archive_read_data(x->a, x->buf, IO_CHUNK);
		if (r == 0)
			break;
		if (r < 0) {
			archive_failed(x, name, "unreadable data");
			goto fail;
		}
		if (r > lim->max_bytes - x->st->bytes) {
			over(x, name, "bytes", lim->max_bytes, "bytes");
			goto fail;
		}
		x->st->bytes += r;
		got += r;
		if (box_write_all(fd, x->buf, (size_t)r) < 0) {
			box_err_sys(x->err, "cannot write %s", shown(name, x->shown));
			goto fail;
		}
	}
	/* A zip's central directory may claim another size than its data has. */
	if (archive_entry_size_is_set(e) && archive_entry_size(e) != got) {
		refuse(x, name, "%" PRId64 " bytes of data where the header says %" PRId64, got,
		       (int64_t)archive_entry_size(e));
		goto fail;
	}
	if (close(fd) < 0)
		return box_err_sys(x->err, "cannot write %s", shown(name, x->shown));
	return 0;
fail:
	close(fd);
	return -1;
}

/* The parent was opened without following links, so the link lands in the tree. */
static int make_link(struct extract *x, const char *name, int pfd, const char *base,
		     const char *target)
{
	if (symlinkat(target, pfd, base) < 0) {
		if (errno == EEXIST)
			return refuse(x, name, "conflicts with an existing entry");
		return box_err_sys(x->err, "cannot create symlink %s", shown(name, x->shown));
	}
	return 0;
}

static int extract_entry(struct extract *x, struct archive_entry *e)
{
	const char *name = archive_entry_pathname(e), *path = NULL, *base, *slash;
	const char *target = NULL;
	unsigned int type = archive_entry_filetype(e);
	size_t len = 0, plen;
	int dir = type == AE_IFDIR, pfd, r;
	char comp[NAME_MAX_BYTES + 1];

	if (!name)
		name = archive_entry_pathname_utf8(e);
	if (!name)
		return refuse(x, "(unnamed)", "no usable path name");
	if (archive_entry_hardlink(e) || archive_entry_hardlink_w(e))
		return refuse(x, name, "hard links are refused");
	if (type == AE_IFLNK || archive_entry_symlink(e) || archive_entry_symlink_w(e)) {
		if (!(x->flags & BOX_ARCHIVE_SYMLINKS) || type != AE_IFLNK)
			return refuse(x, name, "symlinks are refused");
		target = archive_entry_symlink(e);
		if (!target)
			return refuse(x, name, "symlink without a usable target");
	}
	if (type != AE_IFREG && !dir && !target)
		return refuse(x, name, "not a regular file or directory");
	r = check_name(x, name, dir, &path, &len);
	if (r <= 0)
		return r;
	if (target) {
		int64_t depth = 1;

		for (size_t i = 0; i < len; i++)
			depth += path[i] == '/';
		if ((x->flags & BOX_ARCHIVE_ANY_LINKS) ?
		    !*target || strlen(target) > BOX_ARCHIVE_MAX_LINK :
		    !link_contained(target, strlen(target), depth))
			return refuse(x, name, "symlink target is absolute, leaves the tree or is "
				      "longer than %d bytes", BOX_ARCHIVE_MAX_LINK);
	}
	r = pathset_add(&x->seen, path, len);
	if (r < 0)
		return box_err_set(x->err, BOX_E_INTERNAL, "out of memory");
	if (r == 0)
		return refuse(x, name, "duplicate path");
	if (!dir && archive_entry_size_is_set(e) &&
	    archive_entry_size(e) > x->lim->max_bytes - x->st->bytes)
		return over(x, name, "bytes", x->lim->max_bytes, "bytes");
	slash = memrchr(path, '/', len);
	base = slash ? slash + 1 : path;
	plen = slash ? (size_t)(slash - path) : 0;
	pfd = open_parent(x, name, path, plen);
	if (pfd < 0)
		return -1;
	memcpy(comp, base, len - (size_t)(base - path));
	comp[len - (size_t)(base - path)] = 0;
	if (dir) {
		if (make_dir(x, name, pfd, comp) < 0)
			return -1;
		x->st->dirs++;
	} else if (target) {
		if (make_link(x, name, pfd, comp, target) < 0)
			return -1;
		x->st->links++;
	} else {
		if (make_file(x, e, name, pfd, comp, norm_mode(archive_entry_perm(e))) < 0)
			return -1;
		x->st->files++;
	}
	x->st->entries++;
	return 0;
}

int box_archive_extract(int infd, int destdirfd, const struct box_archive_limits *lim,
			struct box_archive_stats *st, struct box_err *err)
{
	return box_archive_extract_ex(infd, destdirfd, lim, 0, st, err);
}

int box_archive_extract_ex(int infd, int destdirfd, const struct box_archive_limits *lim,
			   unsigned int flags, struct box_archive_stats *st, struct box_err *err)
{
	struct box_archive_stats local;
	struct extract x;
	struct source *src = NULL;
	struct archive_entry *e = NULL;
	int64_t count = 0;
	int ret = -1, r;

	if (!st)
		st = &local;
	memset(st, 0, sizeof(*st));
	memset(&x, 0, sizeof(x));
	x.destfd = destdirfd;
	x.lim = lim;
	x.st = st;
	x.parentfd = -1;
	x.flags = flags;
	x.err = err;
	if (flags & ~(BOX_ARCHIVE_SYMLINKS | BOX_ARCHIVE_ANY_LINKS))
		return box_err_set(err, BOX_E_INVALID, "unknown archive flags %#x", flags);
	if (!lim || lim->max_bytes < 0 || lim->max_entries <= 0 || lim->max_path <= 0 ||
	    lim->max_depth <= 0)
		return box_err_set(err, BOX_E_INVALID, "extraction limits must be positive");
	src = malloc(sizeof(*src));
	x.buf = malloc(IO_CHUNK);
	x.a = archive_read_new();
	if (!src || !x.buf || !x.a) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	src->fd = infd;
	src->sys_errno = 0;
	src->bytes = 0;
	x.src = src;
	if (archive_read_support_format_tar(x.a) != ARCHIVE_OK ||
	    archive_read_support_format_zip(x.a) != ARCHIVE_OK ||
	    archive_read_support_filter_gzip(x.a) != ARCHIVE_OK) {
		box_err_set(err, BOX_E_INTERNAL, "cannot set up the archive reader: %s",
			    archive_error_string(x.a));
		goto out;
	}
	if (lseek(infd, 0, SEEK_CUR) >= 0 &&
	    archive_read_set_seek_callback(x.a, source_seek) != ARCHIVE_OK) {
		box_err_set(err, BOX_E_INTERNAL, "cannot set up the archive reader: %s",
			    archive_error_string(x.a));
		goto out;
	}
	if (archive_read_open(x.a, src, NULL, source_read, NULL) != ARCHIVE_OK) {
		archive_failed(&x, NULL, "not a readable archive");
		goto out;
	}
	/* Bounded by max_entries: each round reads one header or ends. */
	for (;;) {
		r = archive_read_next_header(x.a, &e);
		if (r == ARCHIVE_EOF)
			break;
		/* A warning is a doubt about the archive (sizes that disagree, names that do not
		 * convert): refused like an error. */
		if (r != ARCHIVE_OK) {
			char what[64];

			snprintf(what, sizeof(what), "unreadable archive after %" PRId64 " entries",
				 count);
			archive_failed(&x, r == ARCHIVE_WARN && e ? archive_entry_pathname(e) : NULL,
				       what);
			goto out;
		}
		if (++count > lim->max_entries) {
			box_err_limit(err, BOX_E_LIMIT, "entries", lim->max_entries, "entries",
				      "archive has more than %" PRId64 " entries",
				      lim->max_entries);
			goto out;
		}
		if (extract_entry(&x, e) < 0)
			goto out;
	}
	ret = 0;
out:
	if (src)
		st->archive_bytes = src->bytes;
	if (x.a)
		archive_read_free(x.a);
	if (x.parentfd >= 0)
		close(x.parentfd);
	free(x.parent);
	pathset_release(&x.seen);
	free(x.buf);
	free(src);
	return ret;
}

/* ------------------------------------------------------------------ tree digest */

static int digest_content(int rootfd, const struct node *nd, char hex[BOX_SHA256_HEX_LEN + 1],
			  char *buf, struct box_err *err)
{
	struct box_sha256 h = { NULL };
	unsigned char d[BOX_SHA256_LEN];
	int64_t left = nd->size;
	ssize_t r;
	int fd, ret = -1;

	if (box_sha256_init(&h, err) < 0)
		return -1;
	fd = open_node(rootfd, nd, O_RDONLY | O_NONBLOCK, err);
	if (fd < 0)
		goto out;
	while (left > 0) {
		r = read_retry(fd, buf, left < IO_CHUNK ? (size_t)left : IO_CHUNK);
		if (r < 0) {
			box_err_sys(err, "cannot read %s", nd->path);
			goto out;
		}
		if (r == 0)
			break;
		if (box_sha256_update(&h, buf, (size_t)r, err) < 0)
			goto out;
		left -= r;
	}
	if (left || read_retry(fd, buf, 1) != 0) {
		box_err_set(err, BOX_E_IO, "%s changed while it was read", nd->path);
		goto out;
	}
	if (box_sha256_final(&h, d, err) < 0)
		goto out;
	box_sha256_hex(d, hex);
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	box_sha256_release(&h);
	return ret;
}

static int digest_link(int rootfd, const struct node *nd, char hex[BOX_SHA256_HEX_LEN + 1],
		       char *buf, struct box_err *err)
{
	const char *base;
	ssize_t n;
	int pfd, ret;

	pfd = open_parent_of(rootfd, nd->path, &base, err);
	if (pfd < 0)
		return -1;
	n = readlinkat(pfd, base, buf, IO_CHUNK);
	if (n < 0)
		ret = box_err_sys(err, "cannot read symlink %s", nd->path);
	else
		ret = box_sha256_buf(buf, (size_t)n, hex, err);
	if (pfd != rootfd)
		close(pfd);
	return ret;
}

/* What the hooks of box_archive_tree_digest_ex see of an entry: the stat the walk took. */
static void node_stat(const struct node *nd, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = nd->mode;
	st->st_size = (off_t)nd->size;
	st->st_dev = nd->dev;
	st->st_ino = nd->ino;
	st->st_mtim = nd->mtim;
	st->st_ctim = nd->ctim;
}

int box_archive_tree_digest(int dirfd, char hex[BOX_ARCHIVE_DIGEST_LEN + 1], struct box_err *err)
{
	return box_archive_tree_digest_ex(dirfd, NULL, hex, err);
}

int box_archive_tree_digest_ex(int dirfd, const struct box_archive_digest_hooks *hooks,
			       char hex[BOX_ARCHIVE_DIGEST_LEN + 1], struct box_err *err)
{
	static const char magic[] = "box-tree-v1\n";
	struct walk w = { .err = err };
	struct box_sha256 h = { NULL };
	unsigned char d[BOX_SHA256_LEN];
	char content[BOX_SHA256_HEX_LEN + 1], line[160], *buf = NULL;
	int ret = -1;

	if (walk_tree(&w, dirfd) < 0)
		goto out;
	buf = malloc(IO_CHUNK);
	if (!buf) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	if (box_sha256_init(&h, err) < 0 || box_sha256_update(&h, magic, strlen(magic), err) < 0)
		goto out;
	for (size_t i = 0; i < w.n; i++) {
		const struct node *nd = &w.v[i];
		const char *type = "o";
		unsigned int mode = 0;
		struct stat st;
		int n, reuse = 0;

		snprintf(content, sizeof(content), "-");
		node_stat(nd, &st);
		if (hooks && hooks->reuse && (S_ISREG(nd->mode) || S_ISLNK(nd->mode)))
			reuse = hooks->reuse(hooks->ctx, nd->path, &st, content) == 1;
		if (S_ISREG(nd->mode)) {
			type = "f";
			mode = norm_mode(nd->mode);
			if (!reuse && digest_content(dirfd, nd, content, buf, err) < 0)
				goto out;
		} else if (S_ISDIR(nd->mode)) {
			type = "d";
			mode = 0755;
		} else if (S_ISLNK(nd->mode)) {
			type = "l";
			if (!reuse && digest_link(dirfd, nd, content, buf, err) < 0)
				goto out;
		}
		if (hooks && hooks->seen && hooks->seen(hooks->ctx, nd->path, &st, content, err) < 0)
			goto out;
		n = snprintf(line, sizeof(line), "%s %04o %" PRId64 " %s\n", type, mode,
			     nd->size, content);
		if (box_sha256_update(&h, nd->path, strlen(nd->path) + 1, err) < 0 ||
		    box_sha256_update(&h, line, (size_t)n, err) < 0)
			goto out;
	}
	if (box_sha256_final(&h, d, err) < 0)
		goto out;
	memcpy(hex, "sha256:", 7);
	box_sha256_hex(d, hex + 7);
	ret = 0;
out:
	box_sha256_release(&h);
	free(buf);
	walk_release(&w);
	return ret;
}
