#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lockfile.h"
#include "atomic.h"
#include "buf.h"
#include "json.h"
#include "banned.h"

/* Offending text goes into messages and paths: printable ASCII only, short. */
static void shown(char *out, size_t outsz, const char *s)
{
	size_t i, j = 0;

	for (i = 0; s[i] && j + 4 < outsz; i++)
		out[j++] = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' ? s[i] : '?';
	if (s[i]) {
		memcpy(out + j, "...", 3);
		j += 3;
	}
	out[j] = 0;
}

/* Prepends prefix to the JSON path of err: "$.name" under "$.artifacts[3]". */
static void path_under(struct box_err *err, const char *prefix)
{
	char p[BOX_ERR_FIELD_MAX];

	snprintf(p, sizeof(p), "%s%s", prefix, err->path[0] == '$' ? err->path + 1 : "");
	box_err_path(err, p);
}

/* Names the file in the message of an error about its content; "$" when no member is at fault. */
static void in_file(struct box_err *err, const char *file)
{
	char msg[BOX_ERR_MSG_MAX];
	char t[160];
	size_t tl, ml;

	shown(t, sizeof(t), file);
	tl = strlen(t);
	ml = strnlen(err->message, sizeof(msg) - tl - 3);
	memcpy(msg, t, tl);
	memcpy(msg + tl, ": ", 2);
	memcpy(msg + tl + 2, err->message, ml);
	msg[tl + 2 + ml] = 0;
	memcpy(err->message, msg, sizeof(msg));
	if (!err->path[0])
		box_err_path(err, "$");
}

static int bad_at(struct box_err *err, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bad_at(struct box_err *err, const char *path, const char *fmt, ...)
{
	char msg[BOX_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	box_err_set(err, BOX_E_INVALID, "%s", msg);
	box_err_path(err, path);
	return -1;
}

void box_lock_init(struct box_lock *lk)
{
	memset(lk, 0, sizeof(*lk));
}

void box_lock_release(struct box_lock *lk)
{
	free(lk->entries);
	box_lock_init(lk);
}

static int name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
	       c == '-';
}

int box_artifact_name_valid(const char *name)
{
	size_t i = 0;

	for (;;) {
		size_t start = i;

		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9')))
			return 0;
		while (name_char(name[i]) && i - start < 128 && i < BOX_LOCK_NAME_MAX)
			i++;
		if (name[i] == 0)
			return 1;
		if (name[i] != '/' || i >= BOX_LOCK_NAME_MAX)
			return 0;
		i++;
	}
}

int box_digest_valid(const char *s)
{
	if (strncmp(s, "sha256:", 7) != 0)
		return 0;
	for (int i = 7; i < BOX_DIGEST_LEN; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[BOX_DIGEST_LEN] == 0;
}

static int source_valid(const char *s, size_t max)
{
	size_t i;

	for (i = 0; i <= max && s[i]; i++)
		if (s[i] < 0x20 || s[i] >= 0x7f)
			return 0;
	return i > 0 && i <= max;
}

/* The field is NUL-terminated within its array. */
#define TERMINATED(f) (memchr((f), 0, sizeof(f)) != NULL)

int box_lock_entry_check(const struct box_lock_entry *e, struct box_err *err)
{
	struct box_semver v;
	char t[160];

	if (!TERMINATED(e->name) || !box_artifact_name_valid(e->name)) {
		shown(t, sizeof(t), TERMINATED(e->name) ? e->name : "");
		return bad_at(err, "$.name", "invalid artifact name '%s': expected lowercase "
			      "[a-z0-9][a-z0-9._-]* components joined by '/'", t);
	}
	if (!TERMINATED(e->version) || box_semver_parse(e->version, &v, err) < 0) {
		if (!TERMINATED(e->version))
			box_err_set(err, BOX_E_INVALID, "version too long");
		box_err_path(err, "$.version");
		return -1;
	}
	if (!TERMINATED(e->digest) || !box_digest_valid(e->digest)) {
		shown(t, sizeof(t), TERMINATED(e->digest) ? e->digest : "");
		return bad_at(err, "$.digest", "invalid digest '%s': expected sha256: and 64 "
			      "lowercase hex digits", t);
	}
	if (!TERMINATED(e->kind) || (strcmp(e->kind, "tool") && strcmp(e->kind, "skill") &&
				     strcmp(e->kind, "lua"))) {
		shown(t, sizeof(t), TERMINATED(e->kind) ? e->kind : "");
		return bad_at(err, "$.kind", "invalid kind '%s': expected tool, skill or lua", t);
	}
	if (!TERMINATED(e->source) || !source_valid(e->source, BOX_LOCK_SOURCE_MAX))
		return bad_at(err, "$.source", "invalid source: expected 1 to %d printable ASCII "
			      "characters", BOX_LOCK_SOURCE_MAX);
	if (!TERMINATED(e->tree_digest) ||
	    (e->tree_digest[0] && !box_digest_valid(e->tree_digest))) {
		shown(t, sizeof(t), TERMINATED(e->tree_digest) ? e->tree_digest : "");
		return bad_at(err, "$.tree_digest", "invalid tree_digest '%s': expected sha256: "
			      "and 64 lowercase hex digits", t);
	}
	return 0;
}

/* Index of name in lk, or the insertion point with *found = 0. */
static size_t lookup(const struct box_lock *lk, const char *name, int *found)
{
	size_t lo = 0, hi = lk->n;

	*found = 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(lk->entries[mid].name, name);

		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct box_lock_entry *box_lock_find(const struct box_lock *lk, const char *name)
{
	int found;
	size_t i = lookup(lk, name, &found);

	return found ? &lk->entries[i] : NULL;
}

static int grow(struct box_lock *lk, struct box_err *err)
{
	struct box_lock_entry *p;
	size_t cap;

	if (lk->n < lk->cap)
		return 0;
	if (lk->n >= BOX_LOCK_MAX_ENTRIES)
		return box_err_limit(err, BOX_E_LIMIT, "lock_entries", BOX_LOCK_MAX_ENTRIES,
				     "entries", "box.lock holds more than %d entries",
				     BOX_LOCK_MAX_ENTRIES);
	cap = lk->cap ? lk->cap * 2 : 16;
	if (cap > BOX_LOCK_MAX_ENTRIES)
		cap = BOX_LOCK_MAX_ENTRIES;
	p = realloc(lk->entries, cap * sizeof(*p));
	if (!p)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	lk->entries = p;
	lk->cap = cap;
	return 0;
}

static int same_entry(const struct box_lock_entry *a, const struct box_lock_entry *b)
{
	return strcmp(a->name, b->name) == 0 && strcmp(a->version, b->version) == 0 &&
	       strcmp(a->digest, b->digest) == 0 && strcmp(a->kind, b->kind) == 0 &&
	       strcmp(a->source, b->source) == 0 && strcmp(a->tree_digest, b->tree_digest) == 0;
}

static void copy_entry(struct box_lock_entry *dst, const struct box_lock_entry *src)
{
	memset(dst, 0, sizeof(*dst));
	memcpy(dst->name, src->name, strlen(src->name));
	memcpy(dst->version, src->version, strlen(src->version));
	memcpy(dst->digest, src->digest, strlen(src->digest));
	memcpy(dst->kind, src->kind, strlen(src->kind));
	memcpy(dst->source, src->source, strlen(src->source));
	memcpy(dst->tree_digest, src->tree_digest, strlen(src->tree_digest));
}

int box_lock_put(struct box_lock *lk, const struct box_lock_entry *e, int allow_update,
		 struct box_err *err)
{
	struct box_lock_entry *cur;
	int found;
	size_t i;

	if (box_lock_entry_check(e, err) < 0)
		return -1;
	i = lookup(lk, e->name, &found);
	if (found) {
		cur = &lk->entries[i];
		if (same_entry(cur, e))
			return 0;
		if (!allow_update && (strcmp(cur->version, e->version) ||
				      strcmp(cur->digest, e->digest))) {
			box_err_set(err, BOX_E_CONFLICT, "box.lock pins %s to %s (%s), not %s (%s)",
				    cur->name, cur->version, cur->digest, e->version, e->digest);
			return -1;
		}
		copy_entry(cur, e);
		return 1;
	}
	if (grow(lk, err) < 0)
		return -1;
	memmove(&lk->entries[i + 1], &lk->entries[i], (lk->n - i) * sizeof(lk->entries[0]));
	copy_entry(&lk->entries[i], e);
	lk->n++;
	return 1;
}

int box_lock_remove(struct box_lock *lk, const char *name)
{
	int found;
	size_t i = lookup(lk, name, &found);

	if (!found)
		return 0;
	memmove(&lk->entries[i], &lk->entries[i + 1], (lk->n - i - 1) * sizeof(lk->entries[0]));
	lk->n--;
	return 1;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct box_lock_entry *)a)->name,
		      ((const struct box_lock_entry *)b)->name);
}

/* Copies the string member key of obj (already checked to be a string of at most max bytes
 * by box_json_check) into out; a missing or null member is an error unless optional. */
static int get_str(const cJSON *obj, const char *key, char *out, size_t outsz, int optional,
		   struct box_err *err)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, key);
	char p[64];
	size_t n;

	if (!m || cJSON_IsNull(m)) {
		out[0] = 0;
		if (optional)
			return 0;
		snprintf(p, sizeof(p), "$.%s", key);
		return bad_at(err, p, "%s: missing", key);
	}
	n = strlen(m->valuestring);
	if (n >= outsz) {
		snprintf(p, sizeof(p), "$.%s", key);
		return bad_at(err, p, "%s: too long", key);
	}
	memcpy(out, m->valuestring, n + 1);
	return 0;
}

static const struct box_field lock_fields[] = {
	{ .name = "lock_version", .type = BOX_F_INT, .min = 0, .max = INT64_MAX },
	{ .name = "artifacts", .type = BOX_F_ARRAY },
	{ 0 }
};

static const struct box_field entry_fields[] = {
	{ .name = "name", .type = BOX_F_STRING, .max = BOX_LOCK_NAME_MAX },
	{ .name = "version", .type = BOX_F_STRING, .max = BOX_SEMVER_MAX_LEN },
	{ .name = "digest", .type = BOX_F_STRING, .max = BOX_DIGEST_LEN },
	{ .name = "kind", .type = BOX_F_STRING, .max = 7 },
	{ .name = "source", .type = BOX_F_STRING, .max = BOX_LOCK_SOURCE_MAX },
	{ .name = "tree_digest", .type = BOX_F_STRING, .max = BOX_DIGEST_LEN },
	{ 0 }
};

static int read_entry(const cJSON *item, struct box_lock_entry *e, struct box_err *err)
{
	memset(e, 0, sizeof(*e));
	if (!cJSON_IsObject(item))
		return bad_at(err, "$", "expected an artifact object");
	if (box_json_check(item, entry_fields, err) < 0)
		return -1;
	if (get_str(item, "name", e->name, sizeof(e->name), 0, err) < 0 ||
	    get_str(item, "version", e->version, sizeof(e->version), 0, err) < 0 ||
	    get_str(item, "digest", e->digest, sizeof(e->digest), 0, err) < 0 ||
	    get_str(item, "kind", e->kind, sizeof(e->kind), 0, err) < 0 ||
	    get_str(item, "source", e->source, sizeof(e->source), 0, err) < 0 ||
	    get_str(item, "tree_digest", e->tree_digest, sizeof(e->tree_digest), 1, err) < 0)
		return -1;
	return box_lock_entry_check(e, err);
}

static int parse_lock(const char *text, size_t len, struct box_lock *lk, struct box_err *err)
{
	cJSON *root, *arts, *item;
	const cJSON *lv;
	int64_t v;
	size_t i = 0;
	char p[64];

	root = box_json_parse(text, len, err);
	if (!root)
		return -1;
	if (!cJSON_IsObject(root)) {
		bad_at(err, "$", "expected a JSON object");
		goto fail;
	}
	/* the version first: a newer lockfile may have members this one does not know */
	lv = cJSON_GetObjectItemCaseSensitive(root, "lock_version");
	if (!lv || cJSON_IsNull(lv)) {
		bad_at(err, "$.lock_version", "lock_version: missing");
		goto fail;
	}
	if (box_json_int64(lv, &v) && v != BOX_LOCK_VERSION) {
		box_err_set(err, BOX_E_UNSUPPORTED, "lock_version %lld is not supported (this box "
			    "reads %d)", (long long)v, BOX_LOCK_VERSION);
		box_err_path(err, "$.lock_version");
		goto fail;
	}
	if (box_json_check(root, lock_fields, err) < 0)
		goto fail;
	arts = cJSON_GetObjectItemCaseSensitive(root, "artifacts");
	if (!arts || cJSON_IsNull(arts)) {
		bad_at(err, "$.artifacts", "artifacts: missing");
		goto fail;
	}
	cJSON_ArrayForEach(item, arts) {
		if (grow(lk, err) < 0)
			goto fail;
		if (read_entry(item, &lk->entries[lk->n], err) < 0) {
			snprintf(p, sizeof(p), "$.artifacts[%zu]", i);
			path_under(err, p);
			goto fail;
		}
		lk->n++;
		i++;
	}
	if (lk->n > 1)
		qsort(lk->entries, lk->n, sizeof(lk->entries[0]), cmp_entry);
	for (i = 1; i < lk->n; i++) {
		const char *dup = lk->entries[i].name;
		size_t k = 0, seen = 0;

		if (strcmp(lk->entries[i - 1].name, dup) != 0)
			continue;
		/* report the second occurrence in file order */
		cJSON_ArrayForEach(item, arts) {
			const char *nm = cJSON_GetObjectItemCaseSensitive(item, "name")->valuestring;

			if (strcmp(nm, dup) == 0 && seen++)
				break;
			k++;
		}
		snprintf(p, sizeof(p), "$.artifacts[%zu].name", k);
		bad_at(err, p, "duplicate artifact %s", dup);
		goto fail;
	}
	cJSON_Delete(root);
	return 0;
fail:
	cJSON_Delete(root);
	box_lock_release(lk);
	return -1;
}

/* The directory part of path opened in *dfd (dirfd itself when there is none, *own = 0),
 * and its last component in *base. */
static int parent_dir(int dirfd, const char *path, int *dfd, const char **base, int *own,
		      struct box_err *err)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	size_t n;
	int fd;

	*own = 0;
	*dfd = dirfd;
	*base = slash ? slash + 1 : path;
	if (!**base || strcmp(*base, ".") == 0 || strcmp(*base, "..") == 0)
		return box_err_set(err, BOX_E_INVALID, "not a file path: '%s'", path);
	if (!slash)
		return 0;
	n = slash == path ? 1 : (size_t)(slash - path);
	if (n >= sizeof(dir))
		return box_err_set(err, BOX_E_INVALID, "path too long");
	memcpy(dir, path, n);
	dir[n] = 0;
	fd = openat(dirfd, dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return box_err_sys(err, "open directory %s", dir);
	*own = 1;
	*dfd = fd;
	return 0;
}

int box_lock_read(int dirfd, const char *path, struct box_lock *lk, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_LOCK_MAX_BYTES);
	int fd, r;

	box_lock_init(lk);
	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 && errno == ENOENT) {
		lk->missing = 1;
		return 0;
	}
	if (fd < 0) {
		box_err_sys(err, "open %s", path);
		box_err_path(err, path);
		return -1;
	}
	r = box_buf_read_fd(&b, fd, err);
	close(fd);
	if (r < 0) {
		if (!err->path[0])
			box_err_path(err, path);
		box_buf_release(&b);
		return -1;
	}
	r = parse_lock(b.data ? b.data : "", b.len, lk, err);
	if (r < 0)
		in_file(err, path);
	box_buf_release(&b);
	return r;
}

/* JSON string of printable ASCII (checked before): only '"' and '\' need escapes. */
static int put_str(struct box_buf *b, const char *s, struct box_err *err)
{
	if (box_buf_puts(b, "\"", err) < 0)
		return -1;
	for (;;) {
		size_t n = strcspn(s, "\"\\");

		if (box_buf_append(b, s, n, err) < 0)
			return -1;
		s += n;
		if (!*s)
			break;
		if (box_buf_append(b, "\\", 1, err) < 0 || box_buf_append(b, s, 1, err) < 0)
			return -1;
		s++;
	}
	return box_buf_puts(b, "\"", err);
}

static int put_member(struct box_buf *b, const char *key, const char *val, int last,
		      struct box_err *err)
{
	if (box_buf_printf(b, err, "      \"%s\": ", key) < 0 || put_str(b, val, err) < 0)
		return -1;
	return box_buf_puts(b, last ? "\n" : ",\n", err);
}

char *box_lock_format(const struct box_lock *lk, size_t *len, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_LOCK_MAX_BYTES);
	char p[64];

	for (size_t i = 0; i < lk->n; i++) {
		const struct box_lock_entry *e = &lk->entries[i];

		if (box_lock_entry_check(e, err) < 0) {
			snprintf(p, sizeof(p), "$.artifacts[%zu]", i);
			path_under(err, p);
			return NULL;
		}
		if (i && strcmp(lk->entries[i - 1].name, e->name) >= 0) {
			bad_at(err, "$.artifacts", "lock entries not sorted and unique at %s",
			       e->name);
			return NULL;
		}
	}
	if (box_buf_printf(&b, err, "{\n  \"lock_version\": %d,\n  \"artifacts\": [",
			   BOX_LOCK_VERSION) < 0)
		goto fail;
	for (size_t i = 0; i < lk->n; i++) {
		const struct box_lock_entry *e = &lk->entries[i];
		int has_tree = e->tree_digest[0] != 0;

		if (box_buf_puts(&b, i ? ",\n    {\n" : "\n    {\n", err) < 0 ||
		    put_member(&b, "name", e->name, 0, err) < 0 ||
		    put_member(&b, "version", e->version, 0, err) < 0 ||
		    put_member(&b, "digest", e->digest, 0, err) < 0 ||
		    put_member(&b, "kind", e->kind, 0, err) < 0 ||
		    put_member(&b, "source", e->source, !has_tree, err) < 0 ||
		    (has_tree && put_member(&b, "tree_digest", e->tree_digest, 1, err) < 0) ||
		    box_buf_puts(&b, "    }", err) < 0)
			goto fail;
	}
	if (box_buf_puts(&b, lk->n ? "\n  ]\n}\n" : "]\n}\n", err) < 0)
		goto fail;
	return box_buf_detach(&b, len);
fail:
	box_buf_release(&b);
	return NULL;
}

/* 1 if the file base in dfd holds exactly text[0..len). */
static int same_on_disk(int dfd, const char *base, const char *text, size_t len)
{
	struct box_buf b = BOX_BUF_INIT(BOX_LOCK_MAX_BYTES);
	struct box_err ignored;
	int same;

	box_err_init(&ignored);
	same = box_buf_read_file(&b, dfd, base, &ignored) == 0 && b.len == len &&
	       (len == 0 || memcmp(b.data, text, len) == 0);
	box_buf_release(&b);
	return same;
}

static int write_in(int dfd, const char *base, const struct box_lock *lk, int *changed,
		    struct box_err *err)
{
	size_t len;
	char *text = box_lock_format(lk, &len, err);
	int r = 0;

	if (changed)
		*changed = 0;
	if (!text)
		return -1;
	if (!same_on_disk(dfd, base, text, len)) {
		r = box_atomic_write(dfd, base, text, len, 0644, err);
		if (r == 0 && changed)
			*changed = 1;
	}
	free(text);
	return r;
}

int box_lock_write(int dirfd, const char *path, const struct box_lock *lk, int *changed,
		   struct box_err *err)
{
	const char *base;
	int own, r, dfd;

	if (changed)
		*changed = 0;
	if (parent_dir(dirfd, path, &dfd, &base, &own, err) < 0)
		return -1;
	r = write_in(dfd, base, lk, changed, err);
	if (own)
		close(dfd);
	return r;
}

/* "add a@1.0.0, change b@1.0.0 -> 1.1.0, remove c@2.0.0": what a frozen run refuses. */
static void describe_diff(const struct box_lock_entry *old, size_t nold,
			  const struct box_lock *lk, char *out, size_t outsz)
{
	size_t i = 0, j = 0, len = 0;
	int items = 0;

	out[0] = 0;
	while ((i < nold || j < lk->n) && len + 1 < outsz) {
		const struct box_lock_entry *a = i < nold ? &old[i] : NULL;
		const struct box_lock_entry *b = j < lk->n ? &lk->entries[j] : NULL;
		int c = !a ? 1 : !b ? -1 : strcmp(a->name, b->name);
		char item[BOX_LOCK_NAME_MAX + 2 * BOX_SEMVER_MAX_LEN + 32];

		item[0] = 0;
		if (c < 0)
			snprintf(item, sizeof(item), "remove %s@%s", a->name, a->version);
		else if (c > 0)
			snprintf(item, sizeof(item), "add %s@%s", b->name, b->version);
		else if (!same_entry(a, b) && strcmp(a->version, b->version))
			snprintf(item, sizeof(item), "change %s@%s -> %s", a->name, a->version,
				 b->version);
		else if (!same_entry(a, b))
			snprintf(item, sizeof(item), "change %s@%s (%s)", a->name, a->version,
				 strcmp(a->digest, b->digest) ? "digest" : "details");
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
		if (!item[0])
			continue;
		if (items && len + strlen(item) + 2 >= outsz - 8) {
			snprintf(out + len, outsz - len, ", ...");
			return;
		}
		len += (size_t)snprintf(out + len, outsz - len, "%s%s", items ? ", " : "", item);
		if (len >= outsz)
			len = outsz - 1;
		items++;
	}
}

int box_lock_update_wait(int dirfd, const char *path,
			 int (*fn)(struct box_lock *lk, void *ctx, struct box_err *err), void *ctx,
			 int frozen, int timeout_ms, int *changed, struct box_err *err)
{
	struct box_lock lk;
	struct box_lock_entry *old = NULL;
	char lck[NAME_MAX + 1], *before = NULL, *after = NULL;
	const char *base;
	size_t nold = 0, lb, la;
	int own, dfd, lfd = -1, r = -1;

	box_lock_init(&lk);
	if (changed)
		*changed = 0;
	if (parent_dir(dirfd, path, &dfd, &base, &own, err) < 0)
		return -1;
	if ((size_t)snprintf(lck, sizeof(lck), "%s.lck", base) >= sizeof(lck)) {
		box_err_set(err, BOX_E_INVALID, "lockfile name too long");
		goto out;
	}
	lfd = box_lock_open(dfd, lck, 1, timeout_ms, err);
	if (lfd < 0) {
		if (err->code == BOX_E_CONFLICT)
			box_err_set(err, BOX_E_CONFLICT, "%s is locked by another process", path);
		err->retryable = err->code == BOX_E_CONFLICT;
		goto out;
	}
	if (box_lock_read(dfd, base, &lk, err) < 0)
		goto out;
	before = box_lock_format(&lk, &lb, err);
	if (!before)
		goto out;
	if (frozen && lk.n) {
		old = malloc(lk.n * sizeof(*old));
		if (!old) {
			box_err_set(err, BOX_E_INTERNAL, "out of memory");
			goto out;
		}
		memcpy(old, lk.entries, lk.n * sizeof(*old));
		nold = lk.n;
	}
	box_err_init(err);
	if (fn(&lk, ctx, err) < 0) {
		if (err->code == BOX_OK)
			box_err_set(err, BOX_E_INTERNAL, "lockfile update failed");
		goto out;
	}
	after = box_lock_format(&lk, &la, err);
	if (!after)
		goto out;
	if (frozen) {
		char what[BOX_ERR_MSG_MAX - 64];

		if (la == lb && memcmp(before, after, la) == 0) {
			r = 0;
			goto out;
		}
		describe_diff(old, nold, &lk, what, sizeof(what));
		box_err_set(err, BOX_E_CONFLICT, "%s would change: %s (--frozen)", path, what);
		goto out;
	}
	r = write_in(dfd, base, &lk, changed, err);
out:
	if (lfd >= 0)
		close(lfd);
	if (own)
		close(dfd);
	free(before);
	free(after);
	free(old);
	box_lock_release(&lk);
	return r;
}

int box_lock_update(int dirfd, const char *path,
		    int (*fn)(struct box_lock *lk, void *ctx, struct box_err *err), void *ctx,
		    int frozen, int *changed, struct box_err *err)
{
	return box_lock_update_wait(dirfd, path, fn, ctx, frozen, BOX_LOCK_WAIT_MS, changed,
				    err);
}

void box_manifest_init(struct box_manifest *m)
{
	memset(m, 0, sizeof(*m));
}

void box_manifest_release(struct box_manifest *m)
{
	free(m->entries);
	box_manifest_init(m);
}

static const struct box_field manifest_fields[] = {
	{ .name = "registry", .type = BOX_F_STRING, .max = BOX_LOCK_SOURCE_MAX },
	{ .name = "artifacts", .type = BOX_F_OBJECT },
	{ 0 }
};

static int cmp_mentry(const void *a, const void *b)
{
	return strcmp(((const struct box_manifest_entry *)a)->name,
		      ((const struct box_manifest_entry *)b)->name);
}

static int parse_manifest(const char *text, size_t len, struct box_manifest *m,
			  struct box_err *err)
{
	cJSON *root, *arts, *item;
	struct box_range *range = NULL;
	char p[BOX_ERR_FIELD_MAX], t[160];
	size_t count = 0;

	root = box_json_parse(text, len, err);
	if (!root)
		return -1;
	if (!cJSON_IsObject(root)) {
		bad_at(err, "$", "expected a JSON object");
		goto fail;
	}
	if (box_json_check(root, manifest_fields, err) < 0)
		goto fail;
	if (get_str(root, "registry", m->registry, sizeof(m->registry), 1, err) < 0)
		goto fail;
	if (m->registry[0] && !source_valid(m->registry, BOX_LOCK_SOURCE_MAX)) {
		bad_at(err, "$.registry", "registry: expected printable ASCII");
		goto fail;
	}
	arts = cJSON_GetObjectItemCaseSensitive(root, "artifacts");
	if (!arts || cJSON_IsNull(arts)) {
		bad_at(err, "$.artifacts", "artifacts: missing");
		goto fail;
	}
	cJSON_ArrayForEach(item, arts)
		if (++count > BOX_LOCK_MAX_ENTRIES) {
			box_err_limit(err, BOX_E_LIMIT, "lock_entries", BOX_LOCK_MAX_ENTRIES,
				      "entries", "box.json names more than %d artifacts",
				      BOX_LOCK_MAX_ENTRIES);
			box_err_path(err, "$.artifacts");
			goto fail;
		}
	m->entries = calloc(count ? count : 1, sizeof(*m->entries));
	range = malloc(sizeof(*range));
	if (!m->entries || !range) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto fail;
	}
	cJSON_ArrayForEach(item, arts) {
		struct box_manifest_entry *e = &m->entries[m->n];
		const char *name = item->string;

		shown(t, sizeof(t), name);
		snprintf(p, sizeof(p), "$.artifacts[\"%s\"]", t);
		if (strlen(name) > BOX_LOCK_NAME_MAX || !box_artifact_name_valid(name)) {
			bad_at(err, p, "invalid artifact name '%s': expected lowercase "
			       "[a-z0-9][a-z0-9._-]* components joined by '/'", t);
			goto fail;
		}
		if (!cJSON_IsString(item)) {
			bad_at(err, p, "%s: expected a version range string", t);
			goto fail;
		}
		if (box_range_parse(item->valuestring, range, err) < 0) {
			box_err_path(err, p);
			goto fail;
		}
		memcpy(e->name, name, strlen(name) + 1);
		memcpy(e->range, range->text, strlen(range->text) + 1);
		m->n++;
	}
	if (m->n > 1)
		qsort(m->entries, m->n, sizeof(m->entries[0]), cmp_mentry);
	for (size_t i = 1; i < m->n; i++)
		if (strcmp(m->entries[i - 1].name, m->entries[i].name) == 0) {
			snprintf(p, sizeof(p), "$.artifacts[\"%s\"]", m->entries[i].name);
			bad_at(err, p, "duplicate artifact %s", m->entries[i].name);
			goto fail;
		}
	free(range);
	cJSON_Delete(root);
	return 0;
fail:
	free(range);
	cJSON_Delete(root);
	box_manifest_release(m);
	return -1;
}

int box_manifest_read(int dirfd, const char *path, struct box_manifest *m,
		      struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_MANIFEST_MAX_BYTES);
	int r;

	box_manifest_init(m);
	if (box_buf_read_file(&b, dirfd, path, err) < 0) {
		box_buf_release(&b);
		return -1;
	}
	r = parse_manifest(b.data ? b.data : "", b.len, m, err);
	if (r < 0)
		in_file(err, path);
	box_buf_release(&b);
	return r;
}

static int add_problem(cJSON *arr, const char *name, const char *problem, const char *range,
		       const char *version)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return -1;
	cJSON_AddItemToArray(arr, o);
	if (!cJSON_AddStringToObject(o, "name", name) ||
	    !cJSON_AddStringToObject(o, "problem", problem) ||
	    (range && !cJSON_AddStringToObject(o, "range", range)) ||
	    (version && !cJSON_AddStringToObject(o, "version", version)))
		return -1;
	return 0;
}

int box_lock_satisfies(const struct box_manifest *m, const struct box_lock *lk,
		       cJSON **problems, struct box_err *err)
{
	struct box_range *range = malloc(sizeof(*range));
	cJSON *arr = cJSON_CreateArray();
	size_t i = 0, j = 0, bad = 0;
	char first[BOX_LOCK_NAME_MAX + 32] = "";

	*problems = NULL;
	if (!range || !arr)
		goto oom;
	while (i < m->n || j < lk->n) {
		const struct box_manifest_entry *me = i < m->n ? &m->entries[i] : NULL;
		const struct box_lock_entry *le = j < lk->n ? &lk->entries[j] : NULL;
		int c = !me ? 1 : !le ? -1 : strcmp(me->name, le->name);
		const char *problem = NULL;
		struct box_semver v;

		if (c < 0) {
			problem = "missing";
			if (add_problem(arr, me->name, problem, me->range, NULL) < 0)
				goto oom;
		} else if (c > 0) {
			problem = "extra";
			if (add_problem(arr, le->name, problem, NULL, le->version) < 0)
				goto oom;
		} else if (box_range_parse(me->range, range, err) < 0 ||
			   box_semver_parse(le->version, &v, err) < 0 ||
			   !box_range_match(range, &v)) {
			problem = "out_of_range";
			if (add_problem(arr, me->name, problem, me->range, le->version) < 0)
				goto oom;
		}
		if (problem && !bad++)
			snprintf(first, sizeof(first), "%s %s", c > 0 ? le->name : me->name,
				 problem);
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
	}
	free(range);
	*problems = arr;
	if (!bad)
		return 0;
	box_err_set(err, BOX_E_CONFLICT, "box.lock does not satisfy box.json: %zu problem%s "
		    "(first: %s)", bad, bad == 1 ? "" : "s", first);
	return 1;
oom:
	free(range);
	cJSON_Delete(arr);
	return box_err_set(err, BOX_E_INTERNAL, "out of memory");
}
