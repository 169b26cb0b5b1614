#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verify.h"
#include "buf.h"
#include "json.h"
#include "libexec.h"
#include "lockfile.h"
#include "proc.h"
#include "banned.h"

#define CACHE_MAGIC "box-stat-cache-v1\n"

static int hex64_valid(const char *s)
{
	size_t i;

	for (i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[64] == 0;
}

/* ------------------------------------------------------------------ pins */

struct box_verify_pin *box_verify_pin_new(const char *store, const char *digest,
					  const char *tree, const char *label,
					  struct box_err *err)
{
	struct box_verify_pin *p;

	if (!box_digest_valid(digest) || (tree[0] && !box_digest_valid(tree))) {
		box_err_set(err, BOX_E_INVALID, "bad digest to verify");
		return NULL;
	}
	if (!(p = calloc(1, sizeof(*p))) || !(p->store = strdup(store))) {
		free(p);
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	snprintf(p->digest, sizeof(p->digest), "%s", digest);
	snprintf(p->tree, sizeof(p->tree), "%s", tree);
	snprintf(p->label, sizeof(p->label), "%s", label);
	return p;
}

struct box_verify_pin *box_verify_pin_dup(const struct box_verify_pin *pin, struct box_err *err)
{
	return box_verify_pin_new(pin->store, pin->digest, pin->tree, pin->label, err);
}

void box_verify_pin_free(struct box_verify_pin *pin)
{
	if (!pin)
		return;
	free(pin->store);
	free(pin);
}

/* ------------------------------------------------------------------ the stat cache */

void box_verify_cache_init(struct box_verify_cache *c)
{
	memset(c, 0, sizeof(*c));
}

void box_verify_cache_release(struct box_verify_cache *c)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		free(c->v[i].path);
	free(c->v);
	box_verify_cache_init(c);
}

void box_verify_cache_name(const char *hex, char out[80])
{
	snprintf(out, 80, "%.64s.stat", hex);
}

static int rec_cmp(const void *a, const void *b)
{
	return strcmp(((const struct box_verify_rec *)a)->path,
		      ((const struct box_verify_rec *)b)->path);
}

const struct box_verify_rec *box_verify_cache_find(const struct box_verify_cache *c,
						   const char *path)
{
	struct box_verify_rec key = { .path = (char *)path };

	if (!c->n)
		return NULL;
	return bsearch(&key, c->v, c->n, sizeof(*c->v), rec_cmp);
}

static int ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static int ts_equal(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

int box_verify_rec_fresh(const struct box_verify_rec *r, const struct stat *st,
			 const struct timespec *written)
{
	if (r->mode != st->st_mode || r->dev != (uint64_t)st->st_dev ||
	    r->ino != (uint64_t)st->st_ino || !ts_equal(&r->mtim, &st->st_mtim) ||
	    !ts_equal(&r->ctim, &st->st_ctim))
		return 0;
	if (!S_ISDIR(st->st_mode) && r->size != (int64_t)st->st_size)
		return 0;
	/* racily clean, as git's index: changed in the same timestamp tick as the cache was
	 * written, the entry may have changed after it was hashed with its stat unchanged */
	return ts_before(&r->mtim, written) && ts_before(&r->ctim, written);
}

int box_verify_cache_add(struct box_verify_cache *c, const char *path, const struct stat *st,
			 const char *content, struct box_err *err)
{
	struct box_verify_rec *r;

	if (c->n >= BOX_VERIFY_CACHE_ENTRIES)
		return box_err_limit(err, BOX_E_LIMIT, "entries", BOX_VERIFY_CACHE_ENTRIES,
				     "entries", "more than %d entries in a stat cache",
				     BOX_VERIFY_CACHE_ENTRIES);
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		struct box_verify_rec *v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
		c->v = v;
		c->cap = cap;
	}
	r = &c->v[c->n];
	memset(r, 0, sizeof(*r));
	if (!(r->path = strdup(path)))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	r->mode = st->st_mode;
	r->size = S_ISDIR(st->st_mode) ? 0 : (int64_t)st->st_size;
	r->dev = (uint64_t)st->st_dev;
	r->ino = (uint64_t)st->st_ino;
	r->mtim = st->st_mtim;
	r->ctim = st->st_ctim;
	snprintf(r->content, sizeof(r->content), "%s", content);
	c->n++;
	return 0;
}

char *box_verify_cache_format(const struct box_verify_cache *c, size_t *len,
			      struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_VERIFY_CACHE_MAX);
	size_t i;

	if (box_buf_printf(&b, err, CACHE_MAGIC "entry %s\ntree %s\ncount %zu\n", c->entry,
			   c->tree, c->n) < 0)
		goto fail;
	for (i = 0; i < c->n; i++) {
		const struct box_verify_rec *r = &c->v[i];

		if (box_buf_printf(&b, err, "%o %" PRId64 " %" PRIu64 " %" PRIu64 " %lld %ld %lld %ld %"
				   PRId64 " %s %s\n", (unsigned int)r->mode, r->size, r->dev, r->ino,
				   (long long)r->mtim.tv_sec, (long)r->mtim.tv_nsec,
				   (long long)r->ctim.tv_sec, (long)r->ctim.tv_nsec, r->children,
				   r->content, r->path) < 0)
			goto fail;
	}
	return box_buf_detach(&b, len);
fail:
	box_buf_release(&b);
	return NULL;
}

/* One space-terminated unsigned number of the record at *p, in base (8 or 10), at most max;
 * 0 or -1. By hand rather than strtoull: it runs for every field of every record at every
 * check, and needs neither a locale, signs nor spaces. */
static int num(const char **p, unsigned base, uint64_t max, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	unsigned d;

	if (*s < '0' || *s > '9')
		return -1;
	for (; *s != ' '; s++) {
		d = (unsigned)(*s - '0');
		if (d >= base || v > (max - d) / base)
			return -1;
		v = v * base + d;
	}
	*out = v;
	*p = s + 1;
	return 0;
}

static int path_ok(const char *s, size_t n)
{
	size_t i, start = 0;

	if (n == 0)
		return 1;   /* the root */
	if (n > 4096 || s[0] == '/' || s[n - 1] == '/')
		return 0;
	for (i = 0; i <= n; i++) {
		if (i < n && ((unsigned char)s[i] < 0x20 || s[i] == 0x7f))
			return 0;
		if (i == n || s[i] == '/') {
			size_t k = i - start;

			if (k == 0 || (k == 1 && s[start] == '.') ||
			    (k == 2 && s[start] == '.' && s[start + 1] == '.'))
				return 0;
			start = i + 1;
		}
	}
	return 1;
}

/* One record line [s, eol) into r; 0 or -1 (malformed). */
static int parse_rec(const char *s, const char *eol, struct box_verify_rec *r)
{
	uint64_t mode, size, ms, mns, cs, cns, children;
	const char *p = s;

	if (num(&p, 8, 0177777, &mode) || num(&p, 10, INT64_MAX, &size) ||
	    num(&p, 10, UINT64_MAX, &r->dev) || num(&p, 10, UINT64_MAX, &r->ino) ||
	    num(&p, 10, INT64_MAX, &ms) || num(&p, 10, 999999999, &mns) ||
	    num(&p, 10, INT64_MAX, &cs) || num(&p, 10, 999999999, &cns) ||
	    num(&p, 10, BOX_VERIFY_CACHE_ENTRIES, &children))
		return -1;
	if (eol - p >= 65 && p[64] == ' ') {
		memcpy(r->content, p, 64);
		r->content[64] = 0;
		if (!hex64_valid(r->content))
			return -1;
		p += 65;
	} else if (eol - p >= 2 && p[0] == '-' && p[1] == ' ') {
		snprintf(r->content, sizeof(r->content), "-");
		p += 2;
	} else {
		return -1;
	}
	if (!path_ok(p, (size_t)(eol - p)) || !(r->path = strndup(p, (size_t)(eol - p))))
		return -1;
	r->mode = (mode_t)mode;
	r->size = (int64_t)size;
	r->mtim.tv_sec = (time_t)ms;
	r->mtim.tv_nsec = (long)mns;
	r->ctim.tv_sec = (time_t)cs;
	r->ctim.tv_nsec = (long)cns;
	r->children = (int64_t)children;
	return 0;
}

/* The text of a cache into *c; 0 or -1 (malformed; what was parsed stays in c). */
static int parse_cache(const char *s, size_t len, struct box_verify_cache *c)
{
	const char *end = s + len, *p = s, *eol;
	char hdr[160];
	uint64_t count;
	size_t i;

	if (len < sizeof(CACHE_MAGIC) - 1 || memcmp(s, CACHE_MAGIC, sizeof(CACHE_MAGIC) - 1))
		return -1;
	p += sizeof(CACHE_MAGIC) - 1;
	/* entry, tree and count: three fixed-form lines */
	if (!(eol = memchr(p, '\n', (size_t)(end - p))) || eol - p != 6 + 64 ||
	    memcmp(p, "entry ", 6))
		return -1;
	memcpy(c->entry, p + 6, 64);
	c->entry[64] = 0;
	p = eol + 1;
	if (!(eol = memchr(p, '\n', (size_t)(end - p))) || eol - p != 5 + BOX_VERIFY_DIGEST_LEN ||
	    memcmp(p, "tree ", 5))
		return -1;
	memcpy(c->tree, p + 5, BOX_VERIFY_DIGEST_LEN);
	c->tree[BOX_VERIFY_DIGEST_LEN] = 0;
	if (!hex64_valid(c->entry) || !box_digest_valid(c->tree))
		return -1;
	p = eol + 1;
	if (!(eol = memchr(p, '\n', (size_t)(end - p))) || eol - p >= (ptrdiff_t)sizeof(hdr) - 1)
		return -1;
	memcpy(hdr, p, (size_t)(eol - p));
	hdr[eol - p] = ' ';
	hdr[eol - p + 1] = 0;
	p = hdr + 6;
	if (strncmp(hdr, "count ", 6) || num(&p, 10, BOX_VERIFY_CACHE_ENTRIES, &count) || *p ||
	    count == 0)
		return -1;
	p = eol + 1;
	if (!(c->v = calloc((size_t)count, sizeof(*c->v))))
		return -1;
	c->cap = (size_t)count;
	for (i = 0; i < count; i++) {
		if (!(eol = memchr(p, '\n', (size_t)(end - p))))
			return -1;
		if (parse_rec(p, eol, &c->v[i]) < 0)
			return -1;
		c->n++;
		/* the root first, then strictly increasing paths: what bsearch and the
		 * parents-before-children walk of box_verify_warm rely on */
		if ((i == 0) != (c->v[i].path[0] == 0) ||
		    (i > 0 && strcmp(c->v[i - 1].path, c->v[i].path) >= 0) ||
		    (!S_ISDIR(c->v[i].mode) && c->v[i].children))
			return -1;
		p = eol + 1;
	}
	return p == end ? 0 : -1;
}

int box_verify_cache_read(int shafd, const char *hex, struct box_verify_cache *c,
			  struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_VERIFY_CACHE_MAX);
	char name[80];
	struct stat st;
	int fd, r = 0;

	box_verify_cache_name(hex, name);
	fd = openat(shafd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ELOOP)
			return 0;
		return box_err_sys(err, "cannot open the stat cache %s", name);
	}
	/* the cache vouches for content: only one written by us (or root), that no one else
	 * may have rewritten */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 022) ||
	    (st.st_uid != geteuid() && st.st_uid != 0) || (size_t)st.st_size > BOX_VERIFY_CACHE_MAX)
		goto out;
	if (box_buf_read_fd(&b, fd, err) < 0) {
		r = err->code == BOX_E_LIMIT ? 0 : -1;
		goto out;
	}
	if (parse_cache(b.data ? b.data : "", b.len, c) < 0) {
		box_verify_cache_release(c);
		goto out;
	}
	c->written = st.st_mtim;
	r = 1;
out:
	close(fd);
	box_buf_release(&b);
	return r;
}

/* ------------------------------------------------------------------ checks */

int box_verify_expected(int shafd, const char *hex, const char *tree,
			char out[BOX_VERIFY_DIGEST_LEN + 1], struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_VERIFY_DIGEST_LEN + 1);
	struct box_err e;
	char name[80];
	int ok;

	if (tree && tree[0]) {
		snprintf(out, BOX_VERIFY_DIGEST_LEN + 1, "%s", tree);
		return 0;
	}
	box_err_init(&e);
	snprintf(name, sizeof(name), "%.64s.tree", hex);
	if (box_buf_read_file(&b, shafd, name, &e) < 0 && e.code != BOX_E_NOT_FOUND &&
	    e.code != BOX_E_LIMIT) {
		*err = e;
		return -1;
	}
	ok = b.len == BOX_VERIFY_DIGEST_LEN && box_digest_valid(b.data);
	if (ok)
		memcpy(out, b.data, BOX_VERIFY_DIGEST_LEN + 1);
	box_buf_release(&b);
	if (!ok)
		return box_err_set(err, BOX_E_INTEGRITY,
				   "no tree digest is recorded for store entry sha256:%.64s (box.lock "
				   "has none and the store no valid note)", hex);
	return 0;
}

/* Entries of the directory at path below entfd ("" for entfd itself); -1 when unreadable. */
static int64_t count_entries(int entfd, const char *path)
{
	struct dirent *de;
	int64_t n = 0;
	DIR *d;
	int fd;

	fd = openat(entfd, path[0] ? path : ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d)) && n <= BOX_VERIFY_CACHE_ENTRIES)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

int box_verify_open_entry(int shafd, const char *hex, struct box_err *err)
{
	int fd = openat(shafd, hex, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0)
		return fd;
	if (errno == ENOENT)
		return box_err_set(err, BOX_E_NOT_FOUND, "store entry sha256:%.64s is missing", hex);
	if (errno == ENOTDIR || errno == ELOOP)
		return box_err_set(err, BOX_E_INTEGRITY,
				   "store entry sha256:%.64s is not a directory", hex);
	return box_err_sys(err, "cannot open store entry sha256:%.64s", hex);
}

int box_verify_warm(int shafd, const char *hex, const char *expected, struct box_err *err)
{
	struct box_verify_cache c;
	struct stat st;
	size_t i;
	int entfd, r;

	if ((entfd = box_verify_open_entry(shafd, hex, err)) < 0)
		return -1;
	box_verify_cache_init(&c);
	r = box_verify_cache_read(shafd, hex, &c, err);
	if (r == 1 && (strcmp(c.entry, hex) || strcmp(c.tree, expected)))
		r = 0;
	/* parents come before their children in c, so a directory swapped for a symlink is
	 * seen as changed before fstatat could resolve a path through it */
	for (i = 0; r == 1 && i < c.n; i++) {
		const struct box_verify_rec *rec = &c.v[i];

		if ((i == 0 ? fstat(entfd, &st) : fstatat(entfd, rec->path, &st,
							   AT_SYMLINK_NOFOLLOW)) < 0 ||
		    !box_verify_rec_fresh(rec, &st, &c.written) ||
		    (S_ISDIR(rec->mode) && count_entries(entfd, rec->path) != rec->children))
			r = 0;
	}
	box_verify_cache_release(&c);
	close(entfd);
	return r;
}

/* The box-verify helper, found as every helper is (lib/core/libexec.h). */
static int helper_path(char *out, size_t n, struct box_err *err)
{
	return box_libexec_find("box-verify", out, n, err);
}

/* The cold path: box-verify re-hashes the entry and rewrites the cache (lib/artifact/rehash.h). */
static int rehash(const struct box_verify_pin *pin, const char *hex, const char *expected,
		  struct box_err *err)
{
	struct box_proc_env env = { .n = 0 };
	struct box_proc_result pr = { .out = BOX_BUF_INIT(0) };
	struct box_proc_opts po = { 0 };
	char path[PATH_MAX];
	const char *argv[] = { path, pin->store, hex, expected, NULL };
	struct box_err e;
	cJSON *res = NULL;
	int rc = -1;

	if (helper_path(path, sizeof(path), err) < 0) {
		e = *err;
		box_err_set(err, BOX_E_IO, "the verify helper cannot be run (set BOX_LIBEXEC_DIR or "
			    "reinstall box): %.300s", e.message);
		goto out;
	}
	if (box_proc_env_build(&env, NULL, "helper", err) < 0)
		goto out;
	po.argv = argv;
	po.envp = env.v;
	po.timeout_ms = BOX_VERIFY_HELPER_TIMEOUT_MS;
	po.max_stdout = 64 * 1024;
	if (box_proc_run(&po, &pr, err) < 0) {
		e = *err;
		box_err_set(err, BOX_E_IO, "the verify helper cannot be run (set BOX_LIBEXEC_DIR or reinstall "
			    "box): %.300s", e.message);
		goto out;
	}
	box_err_init(&e);
	res = box_json_parse(pr.out.data ? pr.out.data : "", pr.out.len, &e);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "ok"))) {
		rc = 0;
	} else if (cJSON_IsObject(res) &&
		   box_err_from_json(err, cJSON_GetObjectItemCaseSensitive(res, "error")) == 0) {
		rc = -1;
	} else {
		box_err_set(err, BOX_E_INTERNAL, "the verify helper %s failed (%s %d): %.300s", path,
			    pr.exited ? "status" : "signal", pr.exited ? pr.exit_code : pr.signal,
			    pr.err_tail);
	}
out:
	cJSON_Delete(res);
	box_proc_result_release(&pr);
	box_proc_env_release(&env);
	return rc;
}

/* "artifact NAME@VERSION: " before err's message, and what to do about it after. */
static int blame(const struct box_verify_pin *pin, struct box_err *err)
{
	char msg[BOX_ERR_MSG_MAX];
	const char *hint = err->code == BOX_E_INTEGRITY ? "; remove it and run box-pull again" :
			   err->code == BOX_E_NOT_FOUND ? ": run box-pull" : "";

	memcpy(msg, err->message, sizeof(msg));
	snprintf(err->message, sizeof(err->message), "artifact %.200s: %.260s%s", pin->label, msg,
		 hint);
	return -1;
}

int box_verify_entry(const struct box_verify_pin *pin, struct box_err *err)
{
	char dir[PATH_MAX], expected[BOX_VERIFY_DIGEST_LEN + 1];
	const char *hex = pin->digest + 7;
	int shafd, r;

	if (box_fmt(dir, sizeof(dir), "%s/sha256", pin->store) < 0)
		return box_err_set(err, BOX_E_INVALID, "the store path is too long");
	shafd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (shafd < 0) {
		if (errno == ENOENT)
			box_err_set(err, BOX_E_NOT_FOUND, "the store %.200s is missing", pin->store);
		else
			box_err_sys(err, "cannot open the store %.200s", pin->store);
		return blame(pin, err);
	}
	r = box_verify_expected(shafd, hex, pin->tree, expected, err);
	if (r == 0)
		r = box_verify_warm(shafd, hex, expected, err);
	close(shafd);
	if (r == 0)
		r = rehash(pin, hex, expected, err) == 0 ? 1 : -1;
	return r == 1 ? 0 : blame(pin, err);
}
