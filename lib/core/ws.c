#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ws.h"
#include "atomic.h"
#include "fswalk.h"
#include "confine.h"
#include "banned.h"

int box_ws_open(struct box_ws *ws, const char *dir, int64_t quota, struct box_err *err)
{
	ws->rootfd = -1;
	ws->quota = quota;
	ws->written = 0;
	ws->own = 0;
	memset(ws->appended, 0, sizeof(ws->appended));
	if (box_confine_probe(err) < 0)
		return -1;
	ws->rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ws->rootfd < 0) {
		box_err_sys(err, "open workspace %s", dir);
		box_err_path(err, dir);
		return -1;
	}
	return 0;
}

static void appended_drop(struct box_ws_appended *a)
{
	if (!a->path)
		return;
	close(a->fd);
	free(a->path);
	a->path = NULL;
}

void box_ws_release(struct box_ws *ws)
{
	for (int i = 0; i < BOX_WS_APPEND_FILES; i++)
		appended_drop(&ws->appended[i]);
	if (ws->rootfd >= 0)
		close(ws->rootfd);
	ws->rootfd = -1;
}

static int ws_norm(const char *path, char norm[PATH_MAX], struct box_err *err)
{
	if (box_confine_normalize(path, norm, PATH_MAX, err) < 0) {
		if (path)
			box_err_path(err, path);
		return -1;
	}
	return 0;
}

/* Normalised paths are passed on relative: box_confine_normalize() is not idempotent on an
 * absolute path (a real directory named "workspace" would lose its name to the alias). */
static const char *rel(const char *norm)
{
	return norm[1] ? norm + 1 : ".";
}

static int ws_open(struct box_ws *ws, const char *norm, int flags, struct box_err *err)
{
	return box_confine_open(ws->rootfd, rel(norm), flags, 0644, err);
}

/* Splits a normalised non-root path into its parent directory and last name. */
static const char *split(const char *norm, char parent[PATH_MAX])
{
	const char *slash = strrchr(norm, '/');
	size_t n = (size_t)(slash - norm);

	if (n == 0)
		n = 1;
	memcpy(parent, norm, n);
	parent[n] = 0;
	return slash + 1;
}

static int absent(const struct box_err *err)
{
	return err->sys_errno == ENOENT || err->sys_errno == ENOTDIR;
}

/*
 * A file opened through path is used only if it is a regular file whose one link is path.
 * nlink alone is not enough: between the open and the fstat the workspace name can be
 * renamed over, leaving the opened inode with one link, outside. So the name is resolved again
 * afterwards and must still lead to the same inode, still with one link: then, at that moment,
 * the inode lived in the workspace only.
 */
static int check_file(struct box_ws *ws, int fd, const char *norm, struct stat *st,
		      struct box_err *err)
{
	struct stat again;
	int pfd, r;

	if (fstat(fd, st) < 0)
		box_err_sys(err, "stat %s", norm);
	else if (S_ISDIR(st->st_mode))
		box_err_set(err, BOX_E_INVALID, "%s is a directory", norm);
	else if (!S_ISREG(st->st_mode))
		box_err_set(err, BOX_E_POLICY, "%s is not a regular file", norm);
	else if (st->st_nlink > 1)
		box_err_set(err, BOX_E_POLICY, "hard-linked file: %s", norm);
	else
		goto resolve_again;
	box_err_path(err, norm);
	return -1;

resolve_again:
	pfd = ws_open(ws, norm, O_PATH, err);
	if (pfd < 0)
		return -1;
	r = fstat(pfd, &again);
	close(pfd);
	if (r < 0)
		box_err_sys(err, "stat %s", norm);
	else if (again.st_dev != st->st_dev || again.st_ino != st->st_ino || again.st_nlink > 1)
		box_err_set(err, BOX_E_POLICY, "%s changed while it was opened (hard link?)", norm);
	else
		return 0;
	box_err_path(err, norm);
	return -1;
}

/* Same inode, same link count, same change time: nothing linked, renamed or wrote it. */
static int unchanged(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_nlink == b->st_nlink &&
	       a->st_size == b->st_size && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/*
 * Appends the regular file norm to out, checked before (check_file) and after the read: a
 * link count seen while another process renames the file can be a passing value, so the data
 * is kept only if the file still looks the same afterwards (a rename or link changes its
 * ctime) and its name still leads to it.
 */
static int read_checked(struct box_ws *ws, const char *norm, struct box_buf *out,
			struct box_err *err)
{
	size_t old = out->len;
	struct stat st, after;
	int fd, r;

	/* O_NONBLOCK: a FIFO must not hang the parent; fstat refuses it right after */
	fd = ws_open(ws, norm, O_RDONLY | O_NONBLOCK | O_NOCTTY, err);
	if (fd < 0)
		return -1;
	if (check_file(ws, fd, norm, &st, err) < 0) {
		close(fd);
		return -1;
	}
	/* the size is only a fast refusal; box_buf_read_fd enforces the cap on what is read */
	if ((uint64_t)st.st_size > out->max - out->len)
		r = box_err_set(err, BOX_E_LIMIT, "too large");
	else
		r = box_buf_read_fd(out, fd, err);
	if (r == 0 && (fstat(fd, &after) < 0 || !unchanged(&st, &after) ||
		       check_file(ws, fd, norm, &after, err) < 0 || !unchanged(&st, &after)))
		r = box_err_set(err, BOX_E_POLICY, "%s changed while it was read (hard link?)", norm);
	close(fd);
	if (r < 0) {
		box_buf_truncate(out, old);
		if (err->code == BOX_E_LIMIT)
			box_err_limit(err, BOX_E_LIMIT, "read_bytes", (int64_t)out->max, "bytes",
				      "%s is larger than the read limit of %zu bytes", norm, out->max);
		box_err_path(err, norm);
	}
	return r;
}

int box_ws_read(struct box_ws *ws, const char *path, struct box_buf *out, struct box_err *err)
{
	char norm[PATH_MAX];

	if (ws_norm(path, norm, err) < 0)
		return -1;
	return read_checked(ws, norm, out, err);
}

static uid_t owner_uid(const struct box_ws *ws)
{
	return ws->own ? ws->uid : (uid_t)-1;
}

static gid_t owner_gid(const struct box_ws *ws)
{
	return ws->own ? ws->gid : (gid_t)-1;
}

static int mkdir_p(struct box_ws *ws, const char *norm, struct box_err *err)
{
	char prefix[PATH_MAX];
	const char *p = norm + 1;
	int fd;

	fd = ws_open(ws, "/", O_PATH | O_DIRECTORY, err);
	if (fd < 0)
		return -1;
	while (*p) {
		const char *end = strchr(p, '/');
		size_t n = end ? (size_t)(end - norm) : strlen(norm);
		int nfd, made;

		memcpy(prefix, norm, n);
		prefix[n] = 0;
		/* one name under an already confined directory: mkdirat never follows it */
		made = mkdirat(fd, prefix + (p - norm), 0755) == 0;
		if (!made && errno != EEXIST) {
			box_err_sys(err, "mkdir %s", prefix);
			box_err_path(err, prefix);
			close(fd);
			return -1;
		}
		nfd = ws_open(ws, prefix, O_PATH | O_DIRECTORY, err);
		close(fd);
		if (nfd < 0)
			return -1;
		if (made && ws->own && fchownat(nfd, "", ws->uid, ws->gid, AT_EMPTY_PATH) < 0) {
			box_err_sys(err, "chown %s", prefix);
			box_err_path(err, prefix);
			close(nfd);
			return -1;
		}
		fd = nfd;
		p = end ? end + 1 : norm + n;
	}
	close(fd);
	return 0;
}

/* The slot of ws->appended that holds norm, or NULL. */
static struct box_ws_appended *appended_find(struct box_ws *ws, const char *norm)
{
	for (int i = 0; i < BOX_WS_APPEND_FILES; i++)
		if (ws->appended[i].path && strcmp(ws->appended[i].path, norm) == 0)
			return &ws->appended[i];
	return NULL;
}

/* Keeps fd (taken) as the file of norm, in place of the oldest one. */
static void appended_keep(struct box_ws *ws, const char *norm, int fd)
{
	struct box_ws_appended *a = &ws->appended[BOX_WS_APPEND_FILES - 1];
	char *path = strdup(norm);

	if (!path) {
		close(fd);
		return;
	}
	appended_drop(a);
	memmove(&ws->appended[1], &ws->appended[0], sizeof(ws->appended[0]) * (BOX_WS_APPEND_FILES - 1));
	ws->appended[0].path = path;
	ws->appended[0].fd = fd;
}

/*
 * Whether norm still names the inode of a->fd, a regular file with one link. The inode is one
 * this box_ws created: whatever is renamed over the name between this check and the write, the
 * write lands in that inode, never in a file that was there before (a hard link to a file
 * outside, say). A name that now is a symlink, another file or nothing fails the check.
 */
static int appended_current(struct box_ws *ws, const struct box_ws_appended *a, const char *norm,
			    struct stat *st)
{
	struct box_err e;
	struct stat named;
	int pfd, r;

	if (fstat(a->fd, st) < 0 || !S_ISREG(st->st_mode) || st->st_nlink != 1)
		return 0;
	box_err_init(&e);
	pfd = ws_open(ws, norm, O_PATH | O_NOFOLLOW, &e);
	if (pfd < 0)
		return 0;
	r = fstat(pfd, &named);
	close(pfd);
	return r == 0 && named.st_dev == st->st_dev && named.st_ino == st->st_ino;
}

/* Writes data at the end of the file a holds; on failure the file is cut back to its size. */
static int append_in_place(struct box_ws_appended *a, const struct stat *st, const char *norm,
			   const void *data, size_t n, struct box_err *err)
{
	if (box_write_all(a->fd, data, n) == 0)
		return 0;
	box_err_sys(err, "append to %s", norm);
	if (ftruncate(a->fd, st->st_size) < 0)
		box_err_sys(err, "append to %s failed and its end could not be cut back", norm);
	box_err_path(err, norm);
	return -1;
}

/*
 * A first append never writes into the existing inode: the old content (read_checked) and the
 * new bytes go to a new file that replaces the name atomically, so a hard link to a file outside
 * the workspace, even one swapped in during the call, is never written through. The new file
 * stays open for the appends that follow.
 */
static int append_file(struct box_ws *ws, const char *norm, const char *base, int dfd,
		       const void *data, size_t n, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_WS_MAX_APPEND);
	struct box_ws_appended *a = appended_find(ws, norm);
	struct stat st;
	int r, fd = -1;

	if (a && appended_current(ws, a, norm, &st)) {
		if ((uint64_t)st.st_size + n > BOX_WS_MAX_APPEND) {
			box_err_limit(err, BOX_E_LIMIT, "append_bytes", BOX_WS_MAX_APPEND, "bytes",
				      "%s is too large to append to (at most %d bytes)", norm,
				      BOX_WS_MAX_APPEND);
			box_err_path(err, norm);
			return -1;
		}
		return append_in_place(a, &st, norm, data, n, err);
	}
	if (a)
		appended_drop(a);
	r = read_checked(ws, norm, &b, err);
	if (r < 0 && err->code == BOX_E_NOT_FOUND)
		r = 0;
	if (r < 0 && err->code == BOX_E_LIMIT)
		box_err_limit(err, BOX_E_LIMIT, "append_bytes", BOX_WS_MAX_APPEND, "bytes",
			      "%s is too large to append to (at most %d bytes)", norm,
			      BOX_WS_MAX_APPEND);
	if (r == 0)
		r = box_buf_append(&b, data, n, err);
	if (r == 0)
		r = box_atomic_replace_as(dfd, base, b.data ? b.data : "", b.len, 0644, owner_uid(ws),
					  owner_gid(ws), &fd, err);
	if (r == 0)
		appended_keep(ws, norm, fd);
	else
		box_err_path(err, norm);
	box_buf_release(&b);
	return r;
}

int box_ws_write(struct box_ws *ws, const char *path, const void *data, size_t n, int append,
		 struct box_err *err)
{
	char norm[PATH_MAX], parent[PATH_MAX];
	const char *base;
	int dfd, r;

	if (ws_norm(path, norm, err) < 0)
		return -1;
	if (!norm[1]) {
		box_err_set(err, BOX_E_POLICY, "cannot write the workspace root");
		box_err_path(err, norm);
		return -1;
	}
	if (ws->quota >= 0 && (uint64_t)n > (uint64_t)(ws->quota - ws->written)) {
		box_err_limit(err, BOX_E_LIMIT, "write_bytes", ws->quota, "bytes",
			      "writing %zu bytes to %s would pass the write quota of %lld bytes "
			      "(%lld written)", n, norm, (long long)ws->quota,
			      (long long)ws->written);
		box_err_path(err, norm);
		return -1;
	}
	base = split(norm, parent);
	if (mkdir_p(ws, parent, err) < 0)
		return -1;
	dfd = ws_open(ws, parent, O_PATH | O_DIRECTORY, err);
	if (dfd < 0)
		return -1;
	if (append) {
		r = append_file(ws, norm, base, dfd, data, n, err);
	} else {
		r = box_atomic_replace_as(dfd, base, data, n, 0644, owner_uid(ws), owner_gid(ws),
					  NULL, err);
		if (r < 0)
			box_err_path(err, norm);
	}
	close(dfd);
	if (r == 0)
		ws->written += (int64_t)n;
	return r;
}

int box_ws_exists(struct box_ws *ws, const char *path, struct box_err *err)
{
	char norm[PATH_MAX];
	int fd;

	if (ws_norm(path, norm, err) < 0)
		return -1;
	fd = ws_open(ws, norm, O_PATH, err);
	if (fd >= 0) {
		close(fd);
		return 1;
	}
	if (absent(err)) {
		box_err_init(err);
		return 0;
	}
	return -1;
}

static int add_str(cJSON *o, const char *k, const char *v)
{
	return cJSON_AddStringToObject(o, k, v) ? 0 : -1;
}

static int add_bool(cJSON *o, const char *k, int v)
{
	return cJSON_AddBoolToObject(o, k, v) ? 0 : -1;
}

/* A plain cJSON number, so consumers see cJSON_IsNumber: sizes and times stay far below
 * 2^53, where doubles are exact. */
static int add_int(cJSON *o, const char *k, int64_t v)
{
	return cJSON_AddNumberToObject(o, k, (double)v) ? 0 : -1;
}

static void *oom(struct box_err *err)
{
	box_err_set(err, BOX_E_INTERNAL, "out of memory");
	return NULL;
}

cJSON *box_ws_stat(struct box_ws *ws, const char *path, struct box_err *err)
{
	char norm[PATH_MAX];
	struct stat st;
	cJSON *o;
	int fd, r;

	if (ws_norm(path, norm, err) < 0)
		return NULL;
	fd = ws_open(ws, norm, O_PATH, err);
	if (fd < 0) {
		if (absent(err)) {
			box_err_set(err, BOX_E_NOT_FOUND, "%s does not exist", norm);
			box_err_path(err, norm);
		}
		return NULL;
	}
	r = fstat(fd, &st);
	if (r < 0) {
		box_err_sys(err, "stat %s", norm);
		box_err_path(err, norm);
	}
	close(fd);
	if (r < 0)
		return NULL;
	o = cJSON_CreateObject();
	if (!o || add_str(o, "name", norm[1] ? strrchr(norm, '/') + 1 : "/") ||
	    add_str(o, "path", norm) || add_bool(o, "is_dir", S_ISDIR(st.st_mode)) ||
	    add_int(o, "size", (int64_t)st.st_size) || add_int(o, "mtime", (int64_t)st.st_mtime)) {
		cJSON_Delete(o);
		return oom(err);
	}
	return o;
}

struct entry {
	char *name;
	int is_dir;
	int64_t size;
};

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

static int is_dot(const char *name)
{
	return name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]));
}

cJSON *box_ws_list(struct box_ws *ws, const char *path, size_t max_entries, struct box_err *err)
{
	char norm[PATH_MAX];
	struct entry *ents = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	cJSON *arr = NULL;
	DIR *d;
	int fd;

	if (ws_norm(path, norm, err) < 0)
		return NULL;
	fd = ws_open(ws, norm, O_RDONLY | O_DIRECTORY, err);
	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d) {
		box_err_sys(err, "opendir %s", norm);
		close(fd);
		goto out;
	}
	for (;;) {
		struct stat st;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno) {
				box_err_sys(err, "readdir %s", norm);
				goto out;
			}
			break;
		}
		if (is_dot(de->d_name))
			continue;
		if (n >= max_entries) {
			box_err_limit(err, BOX_E_LIMIT, "list_entries", (int64_t)max_entries,
				      "entries", "%s has more than %zu entries", norm, max_entries);
			goto out;
		}
		/* never follow: a symlink's target may be a host path */
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			box_err_sys(err, "stat %s/%s", norm[1] ? norm : "", de->d_name);
			goto out;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct entry *ne = realloc(ents, ncap * sizeof(*ents));

			if (!ne) {
				oom(err);
				goto out;
			}
			ents = ne;
			cap = ncap;
		}
		ents[n].name = strdup(de->d_name);
		if (!ents[n].name) {
			oom(err);
			goto out;
		}
		ents[n].is_dir = S_ISDIR(st.st_mode);
		ents[n].size = (int64_t)st.st_size;
		n++;
	}
	if (n)
		qsort(ents, n, sizeof(*ents), entry_cmp);
	arr = cJSON_CreateArray();
	for (size_t i = 0; arr && i < n; i++) {
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			cJSON_Delete(arr);
			arr = NULL;
			break;
		}
		if (add_str(o, "name", ents[i].name) || add_bool(o, "is_dir", ents[i].is_dir) ||
		    add_int(o, "size", ents[i].size)) {
			cJSON_Delete(arr);
			arr = NULL;
		}
	}
	if (!arr)
		oom(err);
out:
	if (d)
		closedir(d);
	for (size_t i = 0; i < n; i++)
		free(ents[i].name);
	free(ents);
	if (!arr)
		box_err_path(err, norm);
	return arr;
}

int box_ws_remove(struct box_ws *ws, const char *path, int recursive, struct box_err *err)
{
	char norm[PATH_MAX], parent[PATH_MAX];
	const char *base;
	struct stat st;
	int pfd, r;

	if (ws_norm(path, norm, err) < 0)
		return -1;
	if (!norm[1]) {
		box_err_set(err, BOX_E_POLICY, "cannot remove the workspace root");
		box_err_path(err, norm);
		return -1;
	}
	base = split(norm, parent);
	pfd = ws_open(ws, parent, O_PATH | O_DIRECTORY, err);
	if (pfd < 0) {
		if (absent(err)) {
			box_err_init(err);
			return 0;
		}
		return -1;
	}
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		r = errno == ENOENT ? 0 : box_err_sys(err, "stat %s", norm);
	} else if (!S_ISDIR(st.st_mode)) {
		r = unlinkat(pfd, base, 0) < 0 ? box_err_sys(err, "remove %s", norm) : 1;
	} else if (recursive) {
		r = box_fswalk_remove(pfd, base, err) < 0 ? -1 : 1;
	} else if (unlinkat(pfd, base, AT_REMOVEDIR) == 0) {
		r = 1;
	} else if (errno == ENOTEMPTY || errno == EEXIST) {
		r = box_err_set(err, BOX_E_CONFLICT, "directory %s is not empty", norm);
	} else {
		r = box_err_sys(err, "remove directory %s", norm);
	}
	close(pfd);
	if (r < 0)
		box_err_path(err, norm);
	return r;
}

int box_ws_mkdir(struct box_ws *ws, const char *path, struct box_err *err)
{
	char norm[PATH_MAX];

	if (ws_norm(path, norm, err) < 0)
		return -1;
	return mkdir_p(ws, norm, err);
}

struct walk {
	char path[PATH_MAX];
	size_t len;
	char **files;
	size_t n, cap, max;
	size_t visited;
};

static int walk_push(struct walk *w, struct box_err *err)
{
	if (w->n >= w->max)
		return box_err_limit(err, BOX_E_LIMIT, "walk_files", (int64_t)w->max, "files",
				     "more than %zu files", w->max);
	if (w->n == w->cap) {
		size_t ncap = w->cap ? w->cap * 2 : 64;
		char **nf = realloc(w->files, ncap * sizeof(*nf));

		if (!nf)
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
		w->files = nf;
		w->cap = ncap;
	}
	w->files[w->n] = strdup(w->path);
	if (!w->files[w->n])
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	w->n++;
	return 0;
}

/* fd is a directory whose guest path is w->path[0..w->len); takes ownership of fd. */
static int walk_dir(struct walk *w, int fd, int depth, struct box_err *err)
{
	size_t len = w->len;
	struct dirent *de;
	int r = 0;
	DIR *d;

	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return box_err_sys(err, "opendir %s", w->path);
	}
	while (r == 0) {
		struct stat st;
		size_t nl;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				r = box_err_sys(err, "readdir %s", w->path);
			break;
		}
		if (is_dot(de->d_name))
			continue;
		if (++w->visited > BOX_WS_MAX_VISIT) {
			r = box_err_limit(err, BOX_E_LIMIT, "walk_entries", BOX_WS_MAX_VISIT,
					  "entries", "more than %d entries to walk", BOX_WS_MAX_VISIT);
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				r = box_err_sys(err, "stat %s/%s", w->path, de->d_name);
			continue;
		}
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
			continue;
		nl = strlen(de->d_name);
		if (len + 1 + nl >= sizeof(w->path)) {
			r = box_err_limit(err, BOX_E_LIMIT, "path_length", PATH_MAX - 1, "bytes",
					  "path under %s is longer than %d bytes", w->path,
					  PATH_MAX - 1);
			break;
		}
		w->path[len] = '/';
		memcpy(w->path + len + 1, de->d_name, nl + 1);
		w->len = len + 1 + nl;
		if (S_ISREG(st.st_mode)) {
			r = walk_push(w, err);
		} else if (depth + 1 > BOX_WS_MAX_DEPTH) {
			r = box_err_limit(err, BOX_E_LIMIT, "depth", BOX_WS_MAX_DEPTH, "levels",
					  "%s is deeper than %d levels", w->path, BOX_WS_MAX_DEPTH);
		} else {
			int cfd = openat(dirfd(d), de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (cfd < 0)
				r = box_err_sys(err, "open directory %s", w->path);
			else
				r = walk_dir(w, cfd, depth + 1, err);
		}
		w->len = len;
		w->path[len] = 0;
	}
	closedir(d);
	return r;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

cJSON *box_ws_walk(struct box_ws *ws, const char *path, size_t max_files, struct box_err *err)
{
	struct walk *w;
	struct stat st;
	cJSON *arr = NULL;
	int fd, r;

	w = calloc(1, sizeof(*w));
	if (!w)
		return oom(err);
	w->max = max_files;
	if (ws_norm(path, w->path, err) < 0)
		goto out;
	fd = ws_open(ws, w->path, O_RDONLY | O_NONBLOCK | O_NOCTTY, err);
	if (fd < 0)
		goto out;
	if (fstat(fd, &st) < 0) {
		box_err_sys(err, "stat %s", w->path);
		close(fd);
		goto out;
	}
	if (S_ISREG(st.st_mode)) {
		close(fd);
		r = walk_push(w, err);
	} else if (S_ISDIR(st.st_mode)) {
		/* the root's children are "/x", not "//x" */
		w->len = w->path[1] ? strlen(w->path) : 0;
		w->path[w->len] = 0;
		r = walk_dir(w, fd, 0, err);
	} else {
		close(fd);
		r = 0;
	}
	if (r < 0)
		goto out;
	if (w->n)
		qsort(w->files, w->n, sizeof(*w->files), str_cmp);
	arr = cJSON_CreateArray();
	for (size_t i = 0; arr && i < w->n; i++) {
		cJSON *s = cJSON_CreateString(w->files[i]);

		if (!s || !cJSON_AddItemToArray(arr, s)) {
			cJSON_Delete(s);
			cJSON_Delete(arr);
			arr = NULL;
		}
	}
	if (!arr)
		oom(err);
out:
	for (size_t i = 0; i < w->n; i++)
		free(w->files[i]);
	free(w->files);
	free(w);
	return arr;
}
