#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "fswalk.h"
#include "banned.h"

#define RM_MAX_PASSES 8
#define DEADLINE_EVERY 256   /* entries between two looks at the clock */

uint64_t box_fswalk_max_entries(void)
{
	const char *v = getenv(BOX_FSWALK_MAX_ENTRIES_ENV);
	unsigned long long n;
	char *end;

	if (!v || !*v)
		return BOX_FSWALK_MAX_ENTRIES;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || *end || n < 1 || n > 1000000000ULL || *v == '-')
		return BOX_FSWALK_MAX_ENTRIES;
	return n;
}

static void close_keep_errno(int fd)
{
	int e = errno;

	close(fd);
	errno = e;
}

static int is_dot(const char *n)
{
	return n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0));
}

/* ------------------------------------------------------------------ the walk */

/* One directory on the way down from the root. */
struct frame {
	DIR *d;        /* NULL: closed to stay under BOX_FSWALK_OPEN_DIRS */
	dev_t dev;
	ino_t ino;
	long pos;      /* where reading goes on when it is reopened (usage) */
	char *name;    /* its name in its parent (removal; NULL for the root) */
	int found;     /* removal: entries met in this pass */
	unsigned passes;
};

struct walk {
	struct frame *f;
	size_t n, cap;
	size_t lo;     /* frames below lo are closed, lo..n-1 open */
	int seek;      /* reopened directories go on where they were (else from the start) */
	struct box_err *err;
};

static void walk_release(struct walk *w)
{
	for (size_t k = 0; k < w->n; k++) {
		if (w->f[k].d)
			closedir(w->f[k].d);
		free(w->f[k].name);
	}
	free(w->f);
	w->f = NULL;
	w->n = w->cap = w->lo = 0;
}

/* Makes fd (a directory, owned) the new deepest frame; name (may be NULL) is taken. */
static int walk_push(struct walk *w, int fd, char *name)
{
	struct frame *fr;
	struct stat sb;

	if (fstat(fd, &sb) < 0) {
		box_err_sys(w->err, "cannot stat a directory of the tree");
		goto fail;
	}
	if (w->n == w->cap) {
		size_t ncap = w->cap ? w->cap * 2 : 64;
		struct frame *nf = realloc(w->f, ncap * sizeof(*nf));

		if (!nf) {
			box_err_set(w->err, BOX_E_INTERNAL, "out of memory");
			goto fail;
		}
		w->f = nf;
		w->cap = ncap;
	}
	if (w->n - w->lo >= BOX_FSWALK_OPEN_DIRS) {
		struct frame *old = &w->f[w->lo++];

		old->pos = telldir(old->d);
		closedir(old->d);
		old->d = NULL;
	}
	fr = &w->f[w->n];
	memset(fr, 0, sizeof(*fr));
	fr->d = fdopendir(fd);
	if (!fr->d) {
		box_err_sys(w->err, "cannot read a directory of the tree");
		goto fail;
	}
	fr->dev = sb.st_dev;
	fr->ino = sb.st_ino;
	fr->name = name;
	w->n++;
	return 0;
fail:
	close_keep_errno(fd);
	free(name);
	return -1;
}

/* Drops the deepest frame; its parent, if closed, is reopened through ".." of it and must be
 * the directory it was (a rename under the walk would otherwise lead it elsewhere). */
static int walk_pop(struct walk *w)
{
	struct frame *top = &w->f[w->n - 1], *up = w->n > 1 ? &w->f[w->n - 2] : NULL;
	int r = 0;

	if (up && !up->d) {
		struct stat sb;
		int fd = openat(dirfd(top->d), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd < 0) {
			r = box_err_sys(w->err, "cannot reopen a directory of the tree");
		} else if (fstat(fd, &sb) < 0 || sb.st_dev != up->dev || sb.st_ino != up->ino) {
			close(fd);
			r = box_err_set(w->err, BOX_E_IO, "a directory of the tree moved during "
					"the walk");
		} else if (!(up->d = fdopendir(fd))) {
			r = box_err_sys(w->err, "cannot read a directory of the tree");
			close_keep_errno(fd);
		} else {
			if (w->seek)
				seekdir(up->d, up->pos);
			w->lo = w->n - 2;
		}
	}
	closedir(top->d);
	free(top->name);
	w->n--;
	return r;
}

/* ------------------------------------------------------------------ usage */

struct box_fswalk_inoset {
	struct { dev_t dev; ino_t ino; } *slot;
	size_t n, cap;   /* cap a power of two; slot with ino 0 and dev 0 is free */
	int used_zero;   /* the pair (0, 0) itself was seen */
};

static size_t ino_hash(dev_t dev, ino_t ino, size_t cap)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev * 0xc2b2ae3d27d4eb4fULL;

	return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* 1 when (dev, ino) is new (and now kept), 0 when seen, -1 on OOM. */
static int inoset_add(struct box_fswalk_inoset *s, dev_t dev, ino_t ino)
{
	size_t k;

	if (dev == 0 && ino == 0) {
		if (s->used_zero)
			return 0;
		s->used_zero = 1;
		return 1;
	}
	if ((s->n + 1) * 2 > s->cap) {
		struct box_fswalk_inoset g = { NULL, 0, s->cap ? s->cap * 2 : 256, s->used_zero };

		g.slot = calloc(g.cap, sizeof(*g.slot));
		if (!g.slot)
			return -1;
		for (size_t i = 0; i < s->cap; i++) {
			if (s->slot[i].dev == 0 && s->slot[i].ino == 0)
				continue;
			k = ino_hash(s->slot[i].dev, s->slot[i].ino, g.cap);
			while (g.slot[k].dev || g.slot[k].ino)
				k = (k + 1) & (g.cap - 1);
			g.slot[k] = s->slot[i];
			g.n++;
		}
		free(s->slot);
		*s = g;
	}
	k = ino_hash(dev, ino, s->cap);
	while (s->slot[k].dev || s->slot[k].ino) {
		if (s->slot[k].dev == dev && s->slot[k].ino == ino)
			return 0;
		k = (k + 1) & (s->cap - 1);
	}
	s->slot[k].dev = dev;
	s->slot[k].ino = ino;
	s->n++;
	return 1;
}

void box_fswalk_usage_init(struct box_fswalk_usage *u, uint64_t max_entries,
			   int64_t deadline_ms)
{
	memset(u, 0, sizeof(*u));
	u->max_entries = max_entries ? max_entries : box_fswalk_max_entries();
	u->deadline_ms = deadline_ms;
	u->complete = 1;
}

void box_fswalk_usage_release(struct box_fswalk_usage *u)
{
	if (u->seen) {
		free(u->seen->slot);
		free(u->seen);
	}
	u->seen = NULL;
}

/* 1 counted, 0 seen before, -1 OOM (then counted all the same: never less than the truth) */
static int count(struct box_fswalk_usage *u, const struct stat *sb)
{
	int64_t n = (int64_t)sb->st_blocks * 512;
	int fresh = 1;

	if (sb->st_nlink != 1 && !S_ISDIR(sb->st_mode)) {
		if (!u->seen && !(u->seen = calloc(1, sizeof(*u->seen))))
			fresh = -1;
		else
			fresh = inoset_add(u->seen, sb->st_dev, sb->st_ino);
		if (fresh == 0)
			return 0;
	}
	u->bytes = n > INT64_MAX - u->bytes ? INT64_MAX : u->bytes + n;
	return fresh;
}

void box_fswalk_usage_count(struct box_fswalk_usage *u, const struct stat *sb)
{
	(void)count(u, sb);
}

/* One entry of the directory on top: counted, and pushed when it is a directory. */
static int usage_entry(struct box_fswalk_usage *u, struct walk *w, const char *name)
{
	int fd = dirfd(w->f[w->n - 1].d), sub;
	struct stat sb;

	if (fstatat(fd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return box_err_sys(w->err, "cannot stat %s", name);
	}
	if (count(u, &sb) < 0)
		return box_err_set(w->err, BOX_E_INTERNAL, "out of memory");
	if (!S_ISDIR(sb.st_mode))
		return 0;
	sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0) {
		/* gone, or swapped for something else since the fstatat */
		if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
			return 0;
		return box_err_sys(w->err, "cannot open %s to measure it", name);
	}
	return walk_push(w, sub, NULL);
}

int box_fswalk_usage_add(struct box_fswalk_usage *u, int dirfd, struct box_err *err)
{
	struct walk w = { .seek = 1, .err = err };
	int fd, r = 0;

	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		u->complete = 0;
		return box_err_sys(err, "cannot open a tree to measure");
	}
	if (walk_push(&w, fd, NULL) < 0) {
		u->complete = 0;
		return -1;
	}
	while (w.n && r == 0) {
		struct dirent *de;

		errno = 0;
		de = readdir(w.f[w.n - 1].d);
		if (!de) {
			r = errno ? box_err_sys(err, "cannot read a directory to measure") :
				    walk_pop(&w);
			continue;
		}
		if (is_dot(de->d_name))
			continue;
		if (u->entries >= u->max_entries) {
			r = box_err_limit(err, BOX_E_LIMIT, "entries", (int64_t)u->max_entries,
					  "entries", "the tree has more than %llu entries to measure",
					  (unsigned long long)u->max_entries);
			break;
		}
		if (++u->entries % DEADLINE_EVERY == 0 && u->deadline_ms > 0 &&
		    box_now_ms() > u->deadline_ms) {
			r = box_err_set(err, BOX_E_LIMIT, "the tree could not be measured in time");
			snprintf(err->limit, sizeof(err->limit), "timeout");
			break;
		}
		r = usage_entry(u, &w, de->d_name);
	}
	walk_release(&w);
	if (r < 0)
		u->complete = 0;
	return r;
}

/* ------------------------------------------------------------------ removal */

/* Opens the directory name in fd for emptying, making it listable and writable first; a
 * chmod through AT_SYMLINK_NOFOLLOW never reaches the target of a link swapped in. */
static int rm_open_dir(int fd, const char *name)
{
	struct stat sb;
	int sub;

	sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0 && errno == EACCES && fchmodat(fd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
		sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return -1;
	if (fstat(sub, &sb) < 0 || ((sb.st_mode & 0700) != 0700 && fchmod(sub, 0700) < 0)) {
		close_keep_errno(sub);
		return -1;
	}
	return sub;
}

static int is_dir_at(int fd, const char *name)
{
	struct stat sb;

	return fstatat(fd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode);
}

/* One entry of the directory on top: removed, or pushed to be emptied first. */
static int rm_entry(struct walk *w, const char *name)
{
	int fd = dirfd(w->f[w->n - 1].d), sub, e;
	char *copy;

	if (unlinkat(fd, name, 0) == 0 || errno == ENOENT)
		return 0;
	e = errno;
	if (e != EISDIR && !is_dir_at(fd, name)) {
		errno = e;
		return box_err_sys(w->err, "cannot remove %s", name);
	}
	if (unlinkat(fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	sub = rm_open_dir(fd, name);
	if (sub < 0) {
		if (errno == ENOENT)
			return 0;
		return box_err_sys(w->err, "cannot open %s to remove it", name);
	}
	if (!(copy = strdup(name))) {
		close(sub);
		return box_err_set(w->err, BOX_E_INTERNAL, "out of memory");
	}
	return walk_push(w, sub, copy);
}

/* The end of a pass over the directory on top: read it again while passes find entries;
 * once empty, drop it and remove it from its parent. */
static int rm_done(struct walk *w)
{
	struct frame *fr = &w->f[w->n - 1];
	char *name;
	int r;

	if (fr->found) {
		if (++fr->passes >= RM_MAX_PASSES)
			return box_err_set(w->err, BOX_E_IO, "entries keep appearing in %s",
					   fr->name ? fr->name : "the directory to empty");
		fr->found = 0;
		rewinddir(fr->d);
		return 0;
	}
	name = fr->name;
	fr->name = NULL;
	r = walk_pop(w);
	if (r == 0 && name && w->n) {
		struct frame *up = &w->f[w->n - 1];

		if (unlinkat(dirfd(up->d), name, AT_REMOVEDIR) < 0 && errno != ENOENT)
			r = box_err_sys(w->err, "cannot remove %s", name);
		up->found = 1;
	}
	free(name);
	return r;
}

/* Empties the directory fd (owned); 0 or -1 with err. */
static int rm_walk(int fd, struct box_err *err)
{
	struct walk w = { .seek = 0, .err = err };
	int r = 0;

	if (walk_push(&w, fd, NULL) < 0)
		return -1;
	while (w.n && r == 0) {
		struct frame *fr = &w.f[w.n - 1];
		struct dirent *de;

		errno = 0;
		de = readdir(fr->d);
		if (!de) {
			r = errno ? box_err_sys(err, "cannot read a directory to remove") :
				    rm_done(&w);
			continue;
		}
		if (is_dot(de->d_name))
			continue;
		fr->found = 1;
		r = rm_entry(&w, de->d_name);
	}
	walk_release(&w);
	return r;
}

int box_fswalk_empty(int dirfd, struct box_err *err)
{
	struct stat sb;
	int fd;

	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno == EACCES) {
		char self[64];

		snprintf(self, sizeof(self), "/proc/self/fd/%d", dirfd);
		if (chmod(self, 0700) == 0)
			fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		else
			errno = EACCES;
	}
	if (fd < 0)
		return box_err_sys(err, "cannot open the directory to empty");
	if (fstat(fd, &sb) < 0 || ((sb.st_mode & 0700) != 0700 &&
				   fchmod(fd, (sb.st_mode & 07777) | 0700) < 0)) {
		box_err_sys(err, "cannot make the directory to empty writable");
		close(fd);
		return -1;
	}
	return rm_walk(fd, err);
}

int box_fswalk_remove(int dirfd, const char *name, struct box_err *err)
{
	int fd, e;

	if (!name || !*name || strchr(name, '/') || is_dot(name) || strlen(name) > NAME_MAX)
		return box_err_set(err, BOX_E_INVALID, "invalid name to remove");
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	e = errno;
	if (e != EISDIR && !is_dir_at(dirfd, name)) {
		errno = e;
		return box_err_sys(err, "cannot remove %s", name);
	}
	if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	fd = rm_open_dir(dirfd, name);
	if (fd < 0)
		return errno == ENOENT ? 0 : box_err_sys(err, "cannot open %s to remove it", name);
	if (rm_walk(fd, err) < 0)
		return -1;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return box_err_sys(err, "cannot remove %s", name);
	return 0;
}
