#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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
#define KEY_DEPTH 2                 /* directories in the cache key: the roots and two levels */
#define KEY_TEXT_MAX ((size_t)64 << 20)
#define KEY_DIRS_MAX 100000         /* directories a cache file may name (a hostile one: more) */
#define MOUNTINFO_MAX ((size_t)4 << 20)
#define CACHE_MAX ((size_t)4 << 20) /* bytes of the cache file read at most */
#define CACHE_FILE "rootfs.json"
#define VERIFY_LOCK "rootfs.verify.lock"
#define VERIFY_INTERVAL_S 60        /* a verification walk starts at most this often */
#define VERIFY_LOCK_WAIT_MS 2000    /* a verifier waits this long for another's lock */

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

/* ---- the cache key: roots, mounts and directory stamps ---- */

static int under_a_root(const char *mp, const char *const *roots, size_t n)
{
	size_t i, k;

	if (strcmp(mp, "/") == 0)
		return 1;
	for (i = 0; i < n; i++) {
		k = strlen(roots[i]);
		if (strncmp(mp, roots[i], k) == 0 && (mp[k] == 0 || mp[k] == '/'))
			return 1;
	}
	return 0;
}

/* The key's head: the roots, then the lines of /proc/self/mountinfo of mounts at or under
 * them, as "MAJ:MIN ROOT MOUNTPOINT FSTYPE SOURCE" (mount ids left out: they change with
 * every mount anywhere). */
static int key_head(struct box_buf *out, struct box_err *err)
{
	struct box_buf mi = BOX_BUF_INIT(MOUNTINFO_MAX);
	const char *roots[ROOTS_MAX];
	char rbuf[4096], *line, *next, *f[7], *dash;
	size_t nr = roots_of(roots, rbuf, sizeof(rbuf)), i;
	int rc = 0;

	for (i = 0; i < nr && rc == 0; i++)
		rc = box_buf_printf(out, err, "root %s\n", roots[i]);
	if (rc < 0 || box_buf_read_file(&mi, AT_FDCWD, "/proc/self/mountinfo", err) < 0 ||
	    box_buf_append(&mi, "", 1, err) < 0) {
		box_buf_release(&mi);
		return -1;
	}
	for (line = mi.data; line && *line && rc == 0; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		dash = strstr(line, " - ");
		if (!dash)
			continue;
		*dash = 0;
		for (i = 0; i < 5; i++)
			f[i] = strsep(&line, " ");
		line = dash + 3;
		for (i = 5; i < 7; i++)
			f[i] = strsep(&line, " ");
		if (!f[4] || !f[6] || !under_a_root(f[4], roots, nr))
			continue;
		rc = box_buf_printf(out, err, "%s %s %s %s %s\n", f[2], f[3] ? f[3] : "", f[4],
				    f[5], f[6]);
	}
	box_buf_release(&mi);
	return rc;
}

/* "PATH DEV INO MTIME\n" of a directory (or "PATH -\n" when it is gone or not one) */
static int stamp(struct box_buf *out, const char *path, const struct stat *st,
		 struct box_err *err)
{
	if (!st || !S_ISDIR(st->st_mode))
		return box_buf_printf(out, err, "%s -\n", path);
	return box_buf_printf(out, err, "%s %llu %llu %lld.%09ld\n", path,
			      (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
			      (long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec);
}

/* The key of the host as it is now: the head and the stamps of the directories dirs. */
static int key_of(const cJSON *dirs, char key[72], struct box_err *err)
{
	struct box_buf t = BOX_BUF_INIT(KEY_TEXT_MAX);
	const cJSON *d;
	struct stat st;
	int rc = key_head(&t, err);

	cJSON_ArrayForEach(d, dirs) {
		if (rc < 0)
			break;
		if (!cJSON_IsString(d) || d->valuestring[0] != '/') {
			rc = box_err_set(err, BOX_E_INVALID, "cache: a directory is not a path");
			break;
		}
		rc = stamp(&t, d->valuestring, lstat(d->valuestring, &st) == 0 ? &st : NULL, err);
	}
	if (rc == 0)
		rc = box_digest_sha256(t.data ? t.data : "", t.len, key, err);
	box_buf_release(&t);
	return rc;
}

/* ---- the walk: a tree of per-directory digests ---- */

struct walk {
	int64_t entries;
	int complete;
	cJSON *dirs;          /* the directories of the cache key (NULL: no key kept) */
	struct box_buf *key;  /* the key's text: roots, mounts, then each directory's stamp */
	struct box_err *err;
};

static int stamp(struct box_buf *out, const char *path, const struct stat *st,
		 struct box_err *err);

/* A directory of the key: its stamp taken before its names are read, so that a change while
 * the walk runs makes the key differ from the host's afterwards (a miss, never a stale hit). */
static int key_dir(struct walk *w, int dfd, const char *path)
{
	struct stat st;

	if (!w->dirs)
		return 0;
	if (!cJSON_AddItemToArray(w->dirs, cJSON_CreateString(path)))
		return box_err_set(w->err, BOX_E_INTERNAL, "out of memory");
	return stamp(w->key, path, fstat(dfd, &st) == 0 ? &st : NULL, w->err);
}

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

	if (depth <= KEY_DEPTH && key_dir(w, dfd, path) < 0) {
		close(dfd);
		return -1;
	}
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
	if (key_dir(w, rootfd, "/") < 0) {
		close(rootfd);
		return -1;
	}
	for (i = 0; i < n && rc == 0; i++)
		rc = entry_line(w, rootfd, "/", roots[i] + 1, -1, &b);
	close(rootfd);
	if (rc == 0)
		rc = box_digest_sha256(b.data ? b.data : "", b.len, out, w->err);
	box_buf_release(&b);
	return rc;
}

/* A walk; with dirs and key non-NULL, the cache key of the host state it saw (key_of's). */
static int walk_keyed(struct box_sbrepro_rootfs *out, cJSON *dirs, char key[72],
		      struct box_err *err)
{
	struct box_buf kt = BOX_BUF_INIT(KEY_TEXT_MAX);
	struct walk w = { 0, 1, dirs, &kt, err };
	int64_t t0 = box_now_ms();
	int rc = dirs ? key_head(&kt, err) : 0;

	memset(out, 0, sizeof(*out));
	if (rc == 0)
		rc = walk_roots(&w, out->digest);
	if (rc == 0 && dirs)
		rc = box_digest_sha256(kt.data ? kt.data : "", kt.len, key, err);
	box_buf_release(&kt);
	if (rc < 0)
		return -1;
	out->entries = w.entries;
	out->complete = w.complete;
	out->walk_ms = box_now_ms() - t0;
	box_sbstate_now(out->verified_at);
	return 0;
}

int box_sbrepro_rootfs(struct box_sbrepro_rootfs *out, struct box_err *err)
{
	return walk_keyed(out, NULL, NULL, err);
}

/* ---- the host-wide cache ---- */

static void sweep_temps(int dfd);

int box_sbrepro_rootfs_cache_path(char *out, size_t n)
{
	const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	const char *st = getenv("BOX_STATE_DIR");
	int r;

	if (x && *x == '/')
		r = box_fmt(out, n, "%s/box/" CACHE_FILE, x);
	else if (h && *h == '/')
		r = box_fmt(out, n, "%s/.cache/box/" CACHE_FILE, h);
	else if (st && *st == '/')
		r = box_fmt(out, n, "%s/cache/" CACHE_FILE, st);
	else
		return -1;
	return r < 0 ? -1 : 0;
}

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

/* The cache directory, opened (created when create), or -1; *name gets the file's name. */
static int cache_dir(int create, const char **name)
{
	static char path[4096];
	char *slash;
	struct box_err e;

	box_err_init(&e);
	if (box_sbrepro_rootfs_cache_path(path, sizeof(path)) < 0 || !(slash = strrchr(path, '/')))
		return -1;
	*slash = 0;
	*name = slash + 1;
	if (create && box_mkdirs(path, &e) < 0)
		return -1;
	return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* The cache file of the directory dfd, parsed, or NULL: never through a symlink, a regular
 * file of CACHE_MAX bytes at most, of this version, every member of its type. */
static cJSON *cache_load(int dfd)
{
	struct box_buf b = BOX_BUF_INIT(CACHE_MAX);
	struct box_err e;
	struct stat st;
	cJSON *c = NULL, *dirs, *d;
	int fd = openat(dfd, CACHE_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), n = 0;

	box_err_init(&e);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)CACHE_MAX ||
	    box_buf_read_fd(&b, fd, &e) < 0 || !(c = box_json_parse(b.data ? b.data : "", b.len, &e)))
		goto bad;
	dirs = cJSON_GetObjectItemCaseSensitive(c, "dirs");
	if (!cJSON_IsObject(c) || box_json_get_int(c, "version", 0) != 3 ||
	    !valid_digest(box_json_get_str(c, "key", NULL)) ||
	    !valid_digest(box_json_get_str(c, "digest", NULL)) ||
	    !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(c, "entries")) ||
	    box_json_get_int(c, "entries", -1) < 0 ||
	    !cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(c, "complete")) ||
	    !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(c, "walk_ms")) ||
	    !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(c, "verify_started_s")) ||
	    strlen(box_json_get_str(c, "verified_at", "")) == 0 ||
	    strlen(box_json_get_str(c, "verified_at", "")) >= BOX_SBSTATE_TIME_MAX ||
	    !cJSON_IsArray(dirs))
		goto bad;
	cJSON_ArrayForEach(d, dirs)
		if (!cJSON_IsString(d) || d->valuestring[0] != '/' || ++n > KEY_DIRS_MAX)
			goto bad;
	if (fd >= 0)
		close(fd);
	box_buf_release(&b);
	return c;
bad:
	if (fd >= 0)
		close(fd);
	cJSON_Delete(c);
	box_buf_release(&b);
	return NULL;
}

/* 1 with *out filled (and *started, the last verification's start) when the cache holds a
 * digest whose key holds for the host now, else 0 */
static int cache_hit(struct box_sbrepro_rootfs *out, int64_t *started)
{
	const char *name;
	int dfd = cache_dir(0, &name), hit = 0;
	cJSON *c = dfd >= 0 ? cache_load(dfd) : NULL;
	struct box_err e;
	char now[72];

	box_err_init(&e);
	if (c && key_of(cJSON_GetObjectItemCaseSensitive(c, "dirs"), now, &e) == 0 &&
	    strcmp(now, box_json_get_str(c, "key", "")) == 0) {
		memcpy(out->digest, box_json_get_str(c, "digest", ""), 72);
		out->entries = box_json_get_int(c, "entries", 0);
		out->complete = box_json_get_bool(c, "complete", 0);
		out->walk_ms = box_json_get_int(c, "walk_ms", 0);
		box_fmt(out->verified_at, sizeof(out->verified_at), "%s",
			box_json_get_str(c, "verified_at", ""));
		out->from_cache = 1;
		*started = box_json_get_int(c, "verify_started_s", 0);
		hit = 1;
	}
	cJSON_Delete(c);
	if (dfd >= 0)
		close(dfd);
	return hit;
}

/* Replaces the cache file of dfd with text (temp file + rename): a symlink or anything else
 * there is replaced, never followed. Failures are ignored: the digest is right anyway. */
static void cache_put(int dfd, cJSON *c)
{
	char *text = cJSON_PrintUnformatted(c);
	struct box_err e;

	box_err_init(&e);
	if (text)
		(void)box_atomic_replace(dfd, CACHE_FILE, text, strlen(text), 0644, &e);
	cJSON_free(text);
}

/* Writes the cache of a walk r whose key (of the directories dirs, borrowed) is key, into the
 * directory dfd (-1: the cache directory, created when missing). */
static void cache_write(int dfd, const struct box_sbrepro_rootfs *r, cJSON *dirs,
			const char key[72], int64_t started)
{
	const char *name;
	int own = dfd < 0 ? cache_dir(1, &name) : -1;
	cJSON *c = cJSON_CreateObject();

	if ((dfd >= 0 || own >= 0) && c) {
		box_json_add_int64(c, "version", 3);
		cJSON_AddStringToObject(c, "key", key);
		cJSON_AddStringToObject(c, "digest", r->digest);
		box_json_add_int64(c, "entries", r->entries);
		cJSON_AddBoolToObject(c, "complete", r->complete);
		box_json_add_int64(c, "walk_ms", r->walk_ms);
		cJSON_AddStringToObject(c, "verified_at", r->verified_at);
		box_json_add_int64(c, "verify_started_s", started);
		cJSON_AddItemReferenceToObject(c, "dirs", dirs);
		cache_put(dfd >= 0 ? dfd : own, c);
	}
	cJSON_Delete(c);
	if (own >= 0)
		close(own);
}

/* A walk that rewrites the cache (in dfd, or -1 as cache_write); 0, or -1 with err. */
static int walk_and_cache(int dfd, struct box_sbrepro_rootfs *out, int64_t started,
			  struct box_err *err)
{
	cJSON *dirs = cJSON_CreateArray();
	char key[72];
	int rc;

	if (!dirs)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	rc = walk_keyed(out, dirs, key, err);
	if (rc == 0)
		cache_write(dfd, out, dirs, key, started);
	cJSON_Delete(dirs);
	return rc;
}

static int64_t verify_interval(void)
{
	const char *v = getenv("BOX_SBREPRO_VERIFY_INTERVAL");
	char *end;
	long long n;

	if (!v || !*v)
		return VERIFY_INTERVAL_S;
	errno = 0;
	n = strtoll(v, &end, 10);
	return errno || *end || n < 0 || n > 86400 ? VERIFY_INTERVAL_S : n;
}

/*
 * Starts box-sbfiles rootfs-verify, detached: its own session (setsid), a grandchild
 * reparented away from the exec that started it, "/" as its directory, /dev/null for its
 * standard fds and no other fd of ours (a client's pipes and locks stay ours).
 * It is NOT tied to the session whose exec started it (its cgroup or process group): agents
 * create many short sessions, and a verification that the session's delete ended would
 * rarely complete. Its own bounds hold instead: at most one on the host (the lock), an
 * entries cap, a time cap (BOX_SBREPRO_VERIFY_TIME_S, an alarm that survives the exec),
 * idle priority; it writes only the cache directory, by rename, never a session's.
 * Only async-signal-safe calls after fork.
 */
static void verify_spawn(void)
{
	char path[4096];
	char *const argv[] = { "box-sbfiles", "rootfs-verify", NULL };
	struct box_err e;
	struct sigaction dfl;
	sigset_t none;
	pid_t mid;
	int fd, sig, st;

	box_err_init(&e);
	if (box_libexec_find("box-sbfiles", path, sizeof(path), &e) < 0)
		return;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&none);
	mid = fork();
	if (mid < 0)
		return;
	if (mid == 0) {
		setsid();
		if (fork() != 0)
			_exit(0);
		/* no hold on the exec's working directory (a test's, a workspace) */
		if (chdir("/") < 0)
			_exit(127);
		fd = open("/dev/null", O_RDWR);
		if (fd < 0)
			_exit(127);
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (syscall(SYS_close_range, 3U, ~0U, 0U) < 0)
			for (fd = 3; fd < 65536; fd++)
				close(fd);
		for (sig = 1; sig < NSIG; sig++)
			sigaction(sig, &dfl, NULL);
		sigprocmask(SIG_SETMASK, &none, NULL);
		alarm(BOX_SBREPRO_VERIFY_TIME_S);
		execv(path, argv);
		_exit(127);
	}
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
}

/* After a cache hit whose verification began started (epoch seconds): a verification when
 * the interval has passed and none runs; verify_started_s is written to the cache first
 * (under the lock, so that of many sessions starting at once one starts it). */
static void verify_maybe(int64_t started)
{
	const char *name;
	int64_t now = (int64_t)time(NULL);
	int dfd, lk;
	cJSON *c;
	struct box_err e;

	if (now - started < verify_interval() && started <= now)
		return;
	box_err_init(&e);
	if ((dfd = cache_dir(0, &name)) < 0)
		return;
	lk = box_lock_open(dfd, VERIFY_LOCK, 1, 0, &e);
	if (lk < 0) {
		close(dfd);
		return;   /* a verification runs */
	}
	c = cache_load(dfd);
	started = c ? box_json_get_int(c, "verify_started_s", 0) : now;
	if (c && (now - started >= verify_interval() || started > now)) {
		cJSON_ReplaceItemInObjectCaseSensitive(c, "verify_started_s",
						       cJSON_CreateNumber((double)now));
		cache_put(dfd, c);
		close(lk);
		lk = -1;
		verify_spawn();
	}
	cJSON_Delete(c);
	if (lk >= 0)
		close(lk);
	close(dfd);
}

int box_sbrepro_rootfs_verify(struct box_err *err)
{
	struct box_sbrepro_rootfs r;
	const char *name;
	int dfd, lk, rc;
	cJSON *old;
	char pid[32];
	int64_t started = (int64_t)time(NULL);

	alarm(BOX_SBREPRO_VERIFY_TIME_S);
	(void)setpriority(PRIO_PROCESS, 0, 19);
	(void)sched_setscheduler(0, SCHED_IDLE, &(struct sched_param){ 0 });
	(void)syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 0,
		      3 << 13 /* IOPRIO_CLASS_IDLE */);
	/* never created here: a cache directory removed meanwhile (a test's) stays removed */
	if ((dfd = cache_dir(0, &name)) < 0)
		return box_err_set(err, BOX_E_NOT_FOUND, "no cache directory");
	lk = box_lock_open(dfd, VERIFY_LOCK, 1, VERIFY_LOCK_WAIT_MS, err);
	if (lk < 0) {
		close(dfd);
		box_err_init(err);
		return 0;   /* another verifier runs */
	}
	/* who verifies, for the operator (and the tests) */
	box_fmt(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(lk, 0) == 0)
		(void)!pwrite(lk, pid, strlen(pid), 0);
	sweep_temps(dfd);
	if ((old = cache_load(dfd))) {
		started = box_json_get_int(old, "verify_started_s", started);
		cJSON_Delete(old);
	}
	rc = walk_and_cache(dfd, &r, started, err);
	close(lk);
	close(dfd);
	return rc;
}

/* ---- the session's digest ---- */

/* 1 with *out filled when the session directory dfd holds its digest, else 0 */
static int session_read(int dfd, struct box_sbrepro_rootfs *out)
{
	struct box_buf b = BOX_BUF_INIT(ROOTFS_FILE_MAX);
	struct box_err e;
	cJSON *c = NULL;
	const char *digest, *source, *at;
	int hit = 0;

	box_err_init(&e);
	if (box_buf_read_file(&b, dfd, ROOTFS_FILE, &e) < 0 ||
	    !(c = box_json_parse(b.data ? b.data : "", b.len, &e)))
		goto out;
	digest = box_json_get_str(c, "digest", NULL);
	source = box_json_get_str(c, "source", "");
	at = box_json_get_str(c, "verified_at", "");
	if (box_json_get_int(c, "version", 0) != 3 || !valid_digest(digest) ||
	    (strcmp(source, "walk") && strcmp(source, "cache")) || !*at ||
	    strlen(at) >= sizeof(out->verified_at))
		goto out;
	memcpy(out->digest, digest, 72);
	out->entries = box_json_get_int(c, "entries", 0);
	out->complete = box_json_get_bool(c, "complete", 0);
	out->walk_ms = box_json_get_int(c, "walk_ms", 0);
	out->from_cache = strcmp(source, "cache") == 0;
	box_fmt(out->verified_at, sizeof(out->verified_at), "%s", at);
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
	box_json_add_int64(c, "version", 3);
	cJSON_AddStringToObject(c, "digest", r->digest);
	box_json_add_int64(c, "entries", r->entries);
	cJSON_AddBoolToObject(c, "complete", r->complete);
	box_json_add_int64(c, "walk_ms", r->walk_ms);
	cJSON_AddStringToObject(c, "source", r->from_cache ? "cache" : "walk");
	cJSON_AddStringToObject(c, "verified_at", r->verified_at);
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
	int dfd = open(sdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), lk, rc = 0, hit = 0;
	int64_t started = 0;

	memset(out, 0, sizeof(*out));
	if (dfd < 0)
		return box_err_sys(err, "cannot open %s", sdir);
	/* the file is replaced whole: read without the lock */
	if (session_read(dfd, out)) {
		close(dfd);
		return 0;
	}
	/* once per session: another exec's under way is waited for */
	lk = box_lock_open(dfd, ROOTFS_LOCK, 1, ROOTFS_WAIT_MS, err);
	if (lk < 0) {
		close(dfd);
		return -1;
	}
	if (!session_read(dfd, out)) {
		hit = cache_hit(out, &started);
		if (!hit)
			rc = walk_and_cache(-1, out, (int64_t)time(NULL), err);
		if (rc == 0)
			rc = session_write(dfd, out, err);
	}
	close(lk);
	close(dfd);
	/* after the session's lock is let go: the exec waits for no more than a fork */
	if (rc == 0 && hit)
		verify_maybe(started);
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
		cJSON_AddStringToObject(fs, "source", rootfs.from_cache ? "cache" : "walk");
		cJSON_AddStringToObject(fs, "verified_at", rootfs.verified_at);
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
