#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "sbrepro.h"
#include "nsbox.h"
#include "atomic.h"
#include "buf.h"
#include "clock.h"
#include "json.h"
#include "libexec.h"
#include "proc.h"
#include "provenance.h"
#include "sbstate.h"
#include "tools.h"
#include "verify.h"
#include "banned.h"

/* What the local provider binds read-only into the guest (lib/sandbox/local/nsholder.c's
 * sysdirs, /usr and /etc), walked from "/": a root that is a symlink (/bin -> usr/bin) is
 * one entry with its target. */
static const char *const default_roots[] = { "/bin", "/sbin", "/lib", "/lib32", "/lib64",
					     "/libx32", "/usr", "/etc" };

#define ROOTS_MAX 16
#define ROOTFS_FILE "rootfs.json"    /* the session's digest, in its directory */
#define ROOTFS_LOCK "rootfs.lock"    /* held by whoever walks for the session */
#define ROOTFS_WAIT_MS 600000        /* an exec waits this long for a walk under way */
#define ROOTFS_FILE_MAX ((size_t)64 << 10)
#define DIR_ENTRIES_MAX 1000000     /* names of one directory read at most */

/* The roots walked: default_roots, or the absolute paths of BOX_SBREPRO_ROOTS (':'-separated;
 * the test suites' small fake trees). Their count; names point into buf or default_roots. */
static size_t roots_of(const char *v[ROOTS_MAX], char *buf, size_t n)
{
	const char *env = getenv("BOX_SBREPRO_ROOTS");
	char *p, *save = NULL;
	size_t k = 0;

	if (env && *env == '/' && box_fmt(buf, n, "%s", env) >= 0) {
		for (p = strtok_r(buf, ":", &save); p && k < ROOTS_MAX; p = strtok_r(NULL, ":", &save))
			if (*p == '/')
				v[k++] = p;
		if (k > 0)
			return k;
	}
	for (k = 0; k < sizeof(default_roots) / sizeof(default_roots[0]); k++)
		v[k] = default_roots[k];
	return k;
}

/* ---- the walk: a tree of per-directory digests ---- */

struct walk {
	int64_t entries;
	int complete;
	struct box_err *err;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names of the directory dfd (left open), or NULL; *n gets their count. An
 * unreadable directory has none. */
static char **names_of(int dfd, size_t *n, struct box_err *err)
{
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	char **v = NULL, **nv;
	size_t cap = 0;

	*n = 0;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return calloc(1, sizeof(char *));
	}
	while ((e = readdir(d)) && *n < DIR_ENTRIES_MAX) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (*n + 1 >= cap) {
			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				goto oom;
			v = nv;
		}
		if (!(v[*n] = strdup(e->d_name)))
			goto oom;
		(*n)++;
	}
	closedir(d);
	if (!v)
		return calloc(1, sizeof(char *));
	qsort(v, *n, sizeof(*v), by_name);
	return v;
oom:
	closedir(d);
	while (v && *n)
		free(v[--*n]);
	free(v);
	box_err_set(err, BOX_E_INTERNAL, "out of memory");
	return NULL;
}

static void names_free(char **v, size_t n)
{
	while (n)
		free(v[--n]);
	free(v);
}

static int walk_dir(struct walk *w, int dfd, const char *path, int depth, char out[72]);

/* One entry's line: "TYPE MODE UID GID SIZE MTIME LEN:NAME[ -> TARGET | SUBTREE]" (the
 * name's length keeps names with newlines apart) */
static int entry_line(struct walk *w, int dfd, const char *path, const char *name, int depth,
		      struct box_buf *b)
{
	struct stat st;
	char target[4096], sub[72], child[4096];
	ssize_t n;
	int fd;
	char type;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;   /* gone meanwhile: the key's stamps tell the next check */
	type = S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : S_ISREG(st.st_mode) ? 'f' :
	       'o';
	if (box_buf_printf(b, w->err, "%c %o %u %u %lld %lld.%09ld %zu:%s", type,
			   (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)st.st_gid,
			   type == 'd' ? 0LL : (long long)st.st_size, (long long)st.st_mtim.tv_sec,
			   (long)st.st_mtim.tv_nsec, strlen(name), name) < 0)
		return -1;
	if (type == 'l') {
		n = readlinkat(dfd, name, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = 0;
		if (box_buf_printf(b, w->err, " -> %s", target) < 0)
			return -1;
	} else if (type == 'd') {
		box_fmt(child, sizeof(child), "%s/%s", strcmp(path, "/") ? path : "", name);
		fd = depth < BOX_SBREPRO_ROOTFS_MAX_DEPTH ?
		     openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
		if (fd < 0) {
			if (box_buf_puts(b, " unreadable", w->err) < 0)
				return -1;
		} else if (walk_dir(w, fd, child, depth + 1, sub) < 0) {
			return -1;
		} else if (box_buf_printf(b, w->err, " %s", sub) < 0) {
			return -1;
		}
	}
	return box_buf_puts(b, "\n", w->err);
}

/* The digest of the directory dfd (closed here) at path. */
static int walk_dir(struct walk *w, int dfd, const char *path, int depth, char out[72])
{
	struct box_buf b = BOX_BUF_INIT((size_t)256 << 20);
	char **names;
	size_t n, i;
	int rc = 0;

	names = names_of(dfd, &n, w->err);
	if (!names) {
		close(dfd);
		return -1;
	}
	for (i = 0; i < n && rc == 0; i++) {
		if (w->entries >= BOX_SBREPRO_ROOTFS_MAX_ENTRIES) {
			w->complete = 0;
			break;
		}
		w->entries++;
		rc = entry_line(w, dfd, path, names[i], depth, &b);
	}
	names_free(names, n);
	close(dfd);
	if (rc == 0)
		rc = box_digest_sha256(b.data ? b.data : "", b.len, out, w->err);
	box_buf_release(&b);
	return rc;
}

/* The walk of the roots: the digest of one line per root that exists. */
static int walk_roots(struct walk *w, char out[72])
{
	struct box_buf b = BOX_BUF_INIT((size_t)1 << 20);
	int rootfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	const char *roots[ROOTS_MAX];
	char buf[4096];
	size_t i, n = roots_of(roots, buf, sizeof(buf));
	int rc = 0;

	if (rootfd < 0)
		return box_err_sys(w->err, "cannot open /");
	for (i = 0; i < n && rc == 0; i++)
		rc = entry_line(w, rootfd, "/", roots[i] + 1, -1, &b);
	close(rootfd);
	if (rc == 0)
		rc = box_digest_sha256(b.data ? b.data : "", b.len, out, w->err);
	box_buf_release(&b);
	return rc;
}

int box_sbrepro_rootfs(struct box_sbrepro_rootfs *out, struct box_err *err)
{
	struct walk w = { 0, 1, err };
	int64_t t0 = box_now_ms();

	memset(out, 0, sizeof(*out));
	if (walk_roots(&w, out->digest) < 0)
		return -1;
	out->entries = w.entries;
	out->complete = w.complete;
	out->walk_ms = box_now_ms() - t0;
	return 0;
}

/* ---- the session's digest ---- */

static int valid_digest(const char *s)
{
	size_t i;

	if (!s || strlen(s) != 71 || strncmp(s, "sha256:", 7) != 0)
		return 0;
	for (i = 7; i < 71; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return 0;
	return 1;
}

/* 1 with *out filled when the session directory dfd holds its digest, else 0 */
static int session_read(int dfd, struct box_sbrepro_rootfs *out)
{
	struct box_buf b = BOX_BUF_INIT(ROOTFS_FILE_MAX);
	struct box_err e;
	cJSON *c = NULL;
	const char *digest;
	int hit = 0;

	box_err_init(&e);
	if (box_buf_read_file(&b, dfd, ROOTFS_FILE, &e) < 0 ||
	    !(c = box_json_parse(b.data ? b.data : "", b.len, &e)))
		goto out;
	digest = box_json_get_str(c, "digest", NULL);
	if (box_json_get_int(c, "version", 0) != 2 || !valid_digest(digest))
		goto out;
	memcpy(out->digest, digest, 72);
	out->entries = box_json_get_int(c, "entries", 0);
	out->complete = box_json_get_bool(c, "complete", 0);
	out->walk_ms = box_json_get_int(c, "walk_ms", 0);
	out->cached = 1;
	hit = 1;
out:
	cJSON_Delete(c);
	box_buf_release(&b);
	return hit;
}

/* Writes the session's digest (temp file + rename); 0, or -1 with err. */
static int session_write(int dfd, const struct box_sbrepro_rootfs *r, struct box_err *err)
{
	cJSON *c = cJSON_CreateObject();
	char at[BOX_SBSTATE_TIME_MAX], *text = NULL;
	int rc;

	box_sbstate_now(at);
	box_json_add_int64(c, "version", 2);
	cJSON_AddStringToObject(c, "digest", r->digest);
	box_json_add_int64(c, "entries", r->entries);
	cJSON_AddBoolToObject(c, "complete", r->complete);
	box_json_add_int64(c, "walk_ms", r->walk_ms);
	cJSON_AddStringToObject(c, "computed_at", at);
	text = c ? cJSON_PrintUnformatted(c) : NULL;
	rc = text ? box_atomic_replace(dfd, ROOTFS_FILE, text, strlen(text), 0600, err) :
	     box_err_set(err, BOX_E_INTERNAL, "out of memory");
	cJSON_free(text);
	cJSON_Delete(c);
	return rc;
}

int box_sbrepro_rootfs_session(const char *sdir, struct box_sbrepro_rootfs *out,
			       struct box_err *err)
{
	int dfd = open(sdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), lk, rc = 0;

	memset(out, 0, sizeof(*out));
	if (dfd < 0)
		return box_err_sys(err, "cannot open %s", sdir);
	/* the file is replaced whole: read without the lock */
	if (session_read(dfd, out)) {
		close(dfd);
		return 0;
	}
	/* one walk per session: another's under way is waited for */
	lk = box_lock_open(dfd, ROOTFS_LOCK, 1, ROOTFS_WAIT_MS, err);
	if (lk < 0) {
		close(dfd);
		return -1;
	}
	if (!session_read(dfd, out) && (rc = box_sbrepro_rootfs(out, err)) == 0)
		rc = session_write(dfd, out, err);
	close(lk);
	close(dfd);
	return rc;
}

/* ---- provenance ---- */

cJSON *box_sbrepro_tools(const char *path, struct box_err *err)
{
	struct box_toolset *set = box_tools_load(path, err);
	cJSON *arr;
	size_t i;

	if (!set)
		return NULL;
	arr = cJSON_CreateArray();
	for (i = 0; arr && i < set->n; i++) {
		const struct box_tool *t = &set->tools[i];
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			break;
		}
		cJSON_AddStringToObject(o, "name", t->name);
		if (t->artifact)
			cJSON_AddStringToObject(o, "artifact", t->artifact);
		if (t->pin)
			cJSON_AddStringToObject(o, "digest", t->pin->digest);
	}
	if (!arr || i < set->n) {
		box_tools_free(set);
		return cJSON_Delete(arr), box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	}
	box_tools_free(set);
	return arr;
}

/* the request as provenance and history see it: "events" (how the result is delivered)
 * left out */
static cJSON *request_of(const cJSON *req)
{
	cJSON *c = cJSON_Duplicate(req, 1);

	cJSON_DeleteItemFromObjectCaseSensitive(c, "events");
	return c;
}

cJSON *box_sbrepro_provenance(const char *sdir, const cJSON *req, const cJSON *policy,
			      const cJSON *tools, struct box_err *err)
{
	cJSON *o = cJSON_CreateObject(), *r = request_of(req), *fs;
	struct box_sbrepro_rootfs rootfs;
	struct utsname u;
	char d[72];
	int rc;

	if (!o || !r) {
		cJSON_Delete(o);
		cJSON_Delete(r);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	}
	cJSON_AddStringToObject(o, "box_version", PACKAGE_VERSION);
	cJSON_AddStringToObject(o, "kernel", uname(&u) == 0 ? u.release : "unknown");
	rc = box_digest_json(r, d, err);
	cJSON_Delete(r);
	if (rc == 0)
		cJSON_AddStringToObject(o, "request_sha256", d);
	if (rc == 0 && policy && (rc = box_digest_json(policy, d, err)) == 0)
		cJSON_AddStringToObject(o, "policy_sha256", d);
	if (rc == 0)
		cJSON_AddItemToObject(o, "tools", tools ? cJSON_Duplicate(tools, 1) :
					  cJSON_CreateArray());
	if (rc == 0 && (rc = sdir ? box_sbrepro_rootfs_session(sdir, &rootfs, err) :
			 box_sbrepro_rootfs(&rootfs, err)) == 0) {
		fs = cJSON_AddObjectToObject(o, "rootfs");
		cJSON_AddStringToObject(fs, "sha256", rootfs.digest);
		box_json_add_int64(fs, "entries", rootfs.entries);
		cJSON_AddBoolToObject(fs, "complete", rootfs.complete);
	}
	if (rc < 0) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* ---- history ---- */

int64_t box_sbrepro_history_cap(int64_t disk_bytes)
{
	int64_t cap = disk_bytes / 16;

	return cap < BOX_SBREPRO_HISTORY_BYTES ? cap : BOX_SBREPRO_HISTORY_BYTES;
}

static int add_text_digest(cJSON *o, const char *name, const char *text, struct box_err *err)
{
	char d[72];

	if (box_digest_sha256(text ? text : "", text ? strlen(text) : 0, d, err) < 0)
		return -1;
	cJSON_AddStringToObject(o, name, d);
	return 0;
}

/* The digest of a text member of res, which box_sbexec_to_json writes as raw JSON text. */
static int add_member_digest(cJSON *o, const char *name, const cJSON *res, const char *member,
			     struct box_err *err)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(res, member);
	cJSON *parsed = NULL;
	int rc;

	if (cJSON_IsRaw(v)) {
		parsed = cJSON_Parse(v->valuestring);
		v = parsed;
	}
	rc = add_text_digest(o, name, cJSON_IsString(v) ? v->valuestring : "", err);
	cJSON_Delete(parsed);
	return rc;
}

cJSON *box_sbrepro_history_entry(const cJSON *req, const cJSON *res, struct box_err *err)
{
	static const char *const copied[] = { "ok", "exit_code", "signal", "duration_ms",
		"resource_limit", "truncated", "provenance" };
	cJSON *o = cJSON_CreateObject(), *r = request_of(req), *v;
	const char *in = box_json_get_str(req, "stdin", NULL);
	char at[BOX_SBSTATE_TIME_MAX];
	size_t i;
	int rc = 0;

	if (!o || !r) {
		cJSON_Delete(o);
		cJSON_Delete(r);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	}
	box_sbstate_now(at);
	cJSON_AddStringToObject(o, "at", at);
	if (in) {
		cJSON_DeleteItemFromObjectCaseSensitive(r, "stdin");
		rc = add_text_digest(r, "stdin_sha256", in, err);
	}
	cJSON_AddItemToObject(o, "request", r);
	for (i = 0; i < sizeof(copied) / sizeof(copied[0]); i++)
		if ((v = cJSON_GetObjectItemCaseSensitive(res, copied[i])))
			cJSON_AddItemToObject(o, copied[i], cJSON_Duplicate(v, 1));
	if (rc == 0)
		rc = add_member_digest(o, "stdout_sha256", res, "stdout", err);
	if (rc == 0)
		rc = add_member_digest(o, "stderr_sha256", res, "stderr", err);
	if ((v = cJSON_GetObjectItemCaseSensitive(res, "error")))
		cJSON_AddStringToObject(o, "error", box_json_get_str(v, "code", "internal"));
	box_json_add_int64(o, "outputs",
			   cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(res, "outputs")));
	if (rc < 0) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* The line of entry, trimmed to argv, command and stdin digests when it is larger than a
 * quarter of max_bytes. A string to free(), or NULL with err. */
static char *entry_text(const cJSON *entry, int64_t max_bytes, struct box_err *err)
{
	static const char *const big[] = { "argv", "command", "env", "stdin" };
	cJSON *c, *r, *v;
	char *s = box_canonical_json(entry), *argv = NULL;
	size_t i;
	int rc = 0;

	if (!s)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	if ((int64_t)strlen(s) <= max_bytes / 4)
		return s;
	cJSON_free(s);
	c = cJSON_Duplicate(entry, 1);
	r = cJSON_GetObjectItemCaseSensitive(c, "request");
	for (i = 0; c && i < sizeof(big) / sizeof(big[0]) && rc == 0; i++) {
		char name[32];

		if (!(v = cJSON_GetObjectItemCaseSensitive(r, big[i])))
			continue;
		argv = cJSON_PrintUnformatted(v);
		box_fmt(name, sizeof(name), "%s_sha256", big[i]);
		rc = argv ? add_text_digest(r, name, argv, err) :
		     box_err_set(err, BOX_E_INTERNAL, "out of memory");
		cJSON_free(argv);
		cJSON_DeleteItemFromObjectCaseSensitive(r, big[i]);
	}
	cJSON_AddTrueToObject(c, "trimmed");
	s = rc == 0 && c ? box_canonical_json(c) : NULL;
	cJSON_Delete(c);
	if (!s && rc == 0)
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
	return s;
}

/* Removes the temp files (.box-*.tmp, lib/core/atomic.c) of the session directory dfd that
 * are older than TEMP_STALE_S: what a writer killed between its temp file and its rename left
 * (history, rootfs.json, the network rules). A writer holds its temp file for milliseconds. */
#define TEMP_STALE_S 60

static void sweep_temps(int dfd)
{
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	struct stat st;
	size_t n;
	time_t now = time(NULL);

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d))) {
		n = strlen(e->d_name);
		if (strncmp(e->d_name, ".box-", 5) != 0 || n < 10 ||
		    strcmp(e->d_name + n - 4, ".tmp") != 0)
			continue;
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		    st.st_mtime < now - TEMP_STALE_S)
			unlinkat(dfd, e->d_name, 0);
	}
	closedir(d);
}

int box_sbrepro_history_add(const char *sdir, const cJSON *entry, int64_t max_bytes,
			    struct box_err *err)
{
	struct box_buf old = BOX_BUF_INIT((size_t)max_bytes + 1), out;
	char *line = entry_text(entry, max_bytes, err), *p, *start, *end;
	size_t lines = 0, len;
	int dfd, rc = -1;

	if (!line)
		return -1;
	len = strlen(line);
	box_buf_init(&out, (size_t)max_bytes + len + 2);
	dfd = open(sdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		box_err_sys(err, "cannot open %s", sdir);
		goto out;
	}
	/* a file larger than the cap (edited by hand) starts over */
	if (box_buf_read_file(&old, dfd, BOX_SBREPRO_HISTORY_FILE, err) < 0) {
		if (err->code == BOX_E_NOT_FOUND || err->sys_errno == ENOENT) {
			box_err_init(err);
		} else if (err->code == BOX_E_LIMIT) {
			box_err_init(err);
			box_buf_truncate(&old, 0);
		} else {
			goto out;
		}
	}
	start = old.data ? old.data : "";
	end = start + old.len;
	/* keep whole lines only; a torn last line (never written by this function) is dropped */
	while (end > start && end[-1] != '\n')
		end--;
	for (p = start; p < end; p++)
		lines += *p == '\n';
	while (start < end && (lines + 1 > BOX_SBREPRO_HISTORY_MAX ||
			       (int64_t)(end - start + len + 1) > max_bytes)) {
		p = memchr(start, '\n', (size_t)(end - start));
		start = p + 1;
		lines--;
	}
	if (box_buf_append(&out, start, (size_t)(end - start), err) < 0 ||
	    box_buf_append(&out, line, len, err) < 0 || box_buf_append(&out, "\n", 1, err) < 0)
		goto out;
	rc = box_atomic_replace(dfd, BOX_SBREPRO_HISTORY_FILE, out.data, out.len, 0600, err);
	sweep_temps(dfd);
out:
	if (dfd >= 0)
		close(dfd);
	cJSON_free(line);
	box_buf_release(&old);
	box_buf_release(&out);
	return rc;
}

cJSON *box_sbrepro_history_read(const char *sdir, int64_t limit, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT((size_t)BOX_SBREPRO_HISTORY_BYTES * 2);
	cJSON *arr = cJSON_CreateArray(), *e, *first;
	char path[4096], *line, *next;
	struct box_err pe;

	if (!arr)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	box_fmt(path, sizeof(path), "%s/%s", sdir, BOX_SBREPRO_HISTORY_FILE);
	if (box_buf_read_file(&b, AT_FDCWD, path, err) < 0) {
		if (err->code != BOX_E_NOT_FOUND && err->sys_errno != ENOENT) {
			cJSON_Delete(arr);
			arr = NULL;
		} else {
			box_err_init(err);
		}
		box_buf_release(&b);
		return arr;
	}
	for (line = b.data; line && line < b.data + b.len; line = next) {
		next = memchr(line, '\n', (size_t)(b.data + b.len - line));
		if (!next)
			break;   /* a torn last line */
		box_err_init(&pe);
		e = box_json_parse(line, (size_t)(next - line), &pe);
		next++;
		if (e && cJSON_IsObject(e))
			cJSON_AddItemToArray(arr, e);
		else
			cJSON_Delete(e);
	}
	while (limit > 0 && cJSON_GetArraySize(arr) > limit) {
		first = arr->child;
		cJSON_Delete(cJSON_DetachItemViaPointer(arr, first));
	}
	box_buf_release(&b);
	return arr;
}

/* ---- the helper ---- */

#define HELPER_OUT_MAX ((size_t)1 << 20)
#define HELPER_TIMEOUT_MS 600000

cJSON *box_sbrepro_helper(const char *const *args, struct box_err *err)
{
	return box_nsbox_sbfiles_run(args, HELPER_TIMEOUT_MS, "timeout_ms", HELPER_OUT_MAX, err);
}
