#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rehash.h"
#include "atomic.h"
#include "boxarchive.h"
#include "banned.h"

struct rehash {
	const struct box_verify_cache *old;   /* NULL: none of this entry */
	struct box_verify_cache *now;
	size_t hashed, reused;
	int printable;                        /* every path can go into a cache */
};

static int reuse(void *ctx, const char *path, const struct stat *st, char content[65])
{
	struct rehash *h = ctx;
	const struct box_verify_rec *r = h->old ? box_verify_cache_find(h->old, path) : NULL;

	if (!r || r->content[0] == '-' || !box_verify_rec_fresh(r, st, &h->old->written)) {
		h->hashed++;
		return 0;
	}
	memcpy(content, r->content, 65);
	h->reused++;
	return 1;
}

static int seen(void *ctx, const char *path, const struct stat *st, const char *content,
		struct box_err *err)
{
	struct rehash *h = ctx;
	const unsigned char *p;

	for (p = (const unsigned char *)path; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			h->printable = 0;
	return box_verify_cache_add(h->now, path, st, content, err);
}

/* Fills in the entry counts of the directories of c (records sorted, the root first). */
static void count_children(struct box_verify_cache *c)
{
	char parent[4100];
	size_t i;

	for (i = 1; i < c->n; i++) {
		const char *slash = strrchr(c->v[i].path, '/');
		size_t n = slash ? (size_t)(slash - c->v[i].path) : 0;
		const struct box_verify_rec *p;

		if (n >= sizeof(parent))
			continue;
		memcpy(parent, c->v[i].path, n);
		parent[n] = 0;
		p = box_verify_cache_find(c, parent);
		if (p)
			((struct box_verify_rec *)p)->children++;
	}
}

/* A printable, bounded copy of a path for a message. */
static const char *shown(const char *s, char out[124])
{
	size_t i;

	for (i = 0; s[i] && i < 120; i++)
		out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	if (s[i])
		memcpy(out + i - 3, "...", 3);
	out[i] = 0;
	return out;
}

static int same_entry(const struct box_verify_rec *a, const struct box_verify_rec *b)
{
	if ((a->mode & S_IFMT) != (b->mode & S_IFMT) || strcmp(a->content, b->content))
		return 0;
	/* the digest knows only the execute bits of a file, as one */
	return !S_ISREG(a->mode) || !!(a->mode & 0111) == !!(b->mode & 0111);
}

/* The first difference between the tree as the cache saw it and as it is, or "". */
static void first_change(const struct box_verify_cache *old, const struct box_verify_cache *now,
			 char *out, size_t n)
{
	size_t i = 1, j = 1;
	char s[124];

	out[0] = 0;
	while (i < old->n || j < now->n) {
		int c = i == old->n ? 1 : j == now->n ? -1 : strcmp(old->v[i].path, now->v[j].path);

		if (c < 0) {
			snprintf(out, n, ": %s was removed", shown(old->v[i].path, s));
			return;
		}
		if (c > 0) {
			snprintf(out, n, ": %s was added", shown(now->v[j].path, s));
			return;
		}
		if (!same_entry(&old->v[i], &now->v[j])) {
			snprintf(out, n, ": %s changed", shown(now->v[j].path, s));
			return;
		}
		i++;
		j++;
	}
}

int box_rehash_entry(int shafd, const char *hex, const char *expected,
		     struct box_rehash_stats *st, struct box_err *err)
{
	struct box_archive_digest_hooks hooks = { reuse, seen, NULL };
	struct box_verify_cache old, now;
	struct rehash h = { .now = &now, .printable = 1 };
	struct box_rehash_stats none;
	struct stat root;
	char name[80], what[200];
	char *text = NULL;
	size_t len;
	int entfd, rc = -1, r;

	if (!st)
		st = &none;
	memset(st, 0, sizeof(*st));
	box_verify_cache_init(&old);
	box_verify_cache_init(&now);
	if ((entfd = box_verify_open_entry(shafd, hex, err)) < 0)
		return -1;
	r = box_verify_cache_read(shafd, hex, &old, err);
	if (r < 0)
		goto out;
	/* a cache of another entry vouches for nothing here */
	if (r == 1 && strcmp(old.entry, hex) == 0)
		h.old = &old;
	hooks.ctx = &h;
	snprintf(now.entry, sizeof(now.entry), "%.64s", hex);
	snprintf(now.tree, sizeof(now.tree), "%s", expected);
	if (fstat(entfd, &root) < 0) {
		box_err_sys(err, "cannot stat store entry sha256:%.64s", hex);
		goto out;
	}
	if (box_verify_cache_add(&now, "", &root, "-", err) < 0 ||
	    box_archive_tree_digest_ex(entfd, &hooks, st->tree, err) < 0)
		goto out;
	st->hashed = h.hashed;
	st->reused = h.reused;
	if (strcmp(st->tree, expected) != 0) {
		what[0] = 0;
		if (h.old && strcmp(old.tree, expected) == 0)
			first_change(&old, &now, what, sizeof(what));
		box_err_set(err, BOX_E_INTEGRITY,
			    "store entry sha256:%.64s does not match its tree digest %s%s", hex,
			    expected, what);
		goto out;
	}
	rc = 0;
	if (!h.printable)
		goto out;
	count_children(&now);
	/* no flock: the cache is derived data, and each writer's is true of what it saw, the
	 * stat of every record included; a rename makes one of them whole, the other lost */
	box_verify_cache_name(hex, name);
	if ((text = box_verify_cache_format(&now, &len, err))) {
		struct box_err e;

		box_err_init(&e);
		st->cache_written = box_atomic_replace(shafd, name, text, len, 0644, &e) == 0;
	}
	box_err_init(err);
out:
	free(text);
	box_verify_cache_release(&old);
	box_verify_cache_release(&now);
	close(entfd);
	return rc;
}
