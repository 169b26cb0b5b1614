#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "fswalk.h"
#include "tap.h"
#include "banned.h"

#define NOBODY 65534

static char top[64];
static int topfd = -1;

static int64_t blocks_at(int dfd, const char *name)
{
	struct stat sb;

	if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	return (int64_t)sb.st_blocks * 512;
}

static int put(int dfd, const char *name, size_t n)
{
	static char buf[65536];
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return -1;
	while (n > 0) {
		size_t k = n < sizeof(buf) ? n : sizeof(buf);

		if (write(fd, buf, k) != (ssize_t)k) {
			close(fd);
			return -1;
		}
		n -= k;
	}
	return close(fd);
}

static int exists(int dfd, const char *name)
{
	struct stat sb;

	return fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A fresh directory name under top; returns an fd to it. */
static int fresh(const char *name)
{
	struct box_err e;

	box_fswalk_remove(topfd, name, &e);
	if (mkdirat(topfd, name, 0755) < 0)
		return -1;
	return openat(topfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* A chain of depth directories "d" below fd, with extras at some levels: FIFOs, sockets,
 * symlinks (one out of the tree, one absolute), chmod 000 and read-only directories.
 * *bytes gets what the chain takes (for usage). Returns 0 or -1. */
static int chain(int fd, int depth, int extras, int64_t *bytes)
{
	int cur = dup(fd);

	*bytes = 0;
	for (int k = 0; k < depth && cur >= 0; k++) {
		int next;

		if (mkdirat(cur, "d", 0755) < 0)
			break;
		*bytes += blocks_at(cur, "d");
		if (extras && k % 97 == 0) {
			if (mkfifoat(cur, "fifo", 0600) < 0 ||
			    mknodat(cur, "sock", S_IFSOCK | 0600, 0) < 0 ||
			    symlinkat("../../../../../../../../../etc", cur, "up") < 0 ||
			    symlinkat("/etc/passwd", cur, "abs") < 0 || put(cur, "f", 5000) < 0)
				break;
			*bytes += blocks_at(cur, "f") + blocks_at(cur, "up") + blocks_at(cur, "abs") +
				  blocks_at(cur, "fifo") + blocks_at(cur, "sock");
		}
		next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(cur);
		cur = next;
	}
	if (cur < 0)
		return -1;
	close(cur);
	return 0;
}

/* chmod 000 / 0555 the directories "d" at some depths of a chain: down to the bottom, then
 * up through ".." (a locked directory is never entered again), one descriptor at a time. */
static int lock_chain(int fd, int depth, mode_t mode, int every)
{
	int cur = dup(fd), r = 0, k;

	for (k = 0; k < depth - 1 && cur >= 0; k++) {
		int next = openat(cur, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		close(cur);
		cur = next;
	}
	for (; k >= 0 && cur >= 0; k--) {
		int up;

		if (k % every == every - 1 && fchmodat(cur, "d", mode, 0) < 0)
			r = -1;
		if (k == 0)
			break;
		up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(cur);
		cur = up;
	}
	if (cur < 0)
		return -1;
	close(cur);
	return r;
}

static void test_usage_counts(void)
{
	struct box_fswalk_usage u;
	struct box_err e;
	int64_t want, chain_bytes;
	char name[16];
	int fd = fresh("usage"), s;

	/* 100000 bytes with 24 more names: one inode */
	put(fd, "a", 100000);
	for (int k = 0; k < 24; k++) {
		snprintf(name, sizeof(name), "a%d", k);
		linkat(fd, "a", fd, name, 0);
	}
	/* 1 GiB apparent, one block written */
	s = openat(fd, "sparse", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ok(s >= 0 && ftruncate(s, (off_t)1 << 30) == 0 && pwrite(s, "x", 1, 1 << 20) == 1,
	   "a sparse file is made");
	close(s);
	want = blocks_at(fd, "a") + blocks_at(fd, "sparse");
	box_fswalk_usage_init(&u, 0, 0);
	ok(box_fswalk_usage_add(&u, fd, &e) == 0 && u.complete, "a flat tree is measured");
	is_int(u.bytes, want, "hard links count once, a sparse file by its blocks");
	is_int(u.entries, 26, "every name is an entry");
	box_fswalk_usage_release(&u);

	/* 1000 levels, with FIFOs, sockets and links on the way */
	mkdirat(fd, "deep", 0755);
	s = openat(fd, "deep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ok(chain(s, 1000, 1, &chain_bytes) == 0, "a 1000-level tree is made");
	box_fswalk_usage_init(&u, 0, 0);
	ok(box_fswalk_usage_add(&u, s, &e) == 0 && u.complete, "1000 levels are measured");
	is_int(u.bytes, chain_bytes, "1000 levels count every entry's blocks");
	/* a second tree in the same measurement: the linked inode is not counted again */
	linkat(fd, "a", s, "again", 0);
	ok(box_fswalk_usage_add(&u, fd, &e) == 0, "a second tree adds up");
	is_int(u.bytes, chain_bytes + want + blocks_at(fd, "deep") + chain_bytes,
	       "the second tree adds its own entries (a, sparse, deep and the chain again)");
	box_fswalk_usage_release(&u);
	close(s);
	close(fd);
}

static void test_usage_bounds(void)
{
	struct box_fswalk_usage u;
	struct box_err e;
	char name[16];
	int fd = fresh("bounds");

	for (int k = 0; k < 600; k++) {
		snprintf(name, sizeof(name), "f%d", k);
		put(fd, name, 0);
	}
	box_fswalk_usage_init(&u, 100, 0);
	box_err_init(&e);
	ok(box_fswalk_usage_add(&u, fd, &e) < 0 && !u.complete,
	   "more entries than the bound: the walk does not finish");
	ok(e.code == BOX_E_LIMIT && !strcmp(e.limit, "entries"), "limit entries (%s)", e.limit);
	box_fswalk_usage_release(&u);

	box_fswalk_usage_init(&u, 0, box_now_ms() - 1);
	box_err_init(&e);
	ok(box_fswalk_usage_add(&u, fd, &e) < 0 && !u.complete && !strcmp(e.limit, "timeout"),
	   "a walk past its deadline does not finish (%s)", e.message);
	box_fswalk_usage_release(&u);
	close(fd);

	setenv(BOX_FSWALK_MAX_ENTRIES_ENV, "1234", 1);
	is_int(box_fswalk_max_entries(), 1234, "the operator's bound is read");
	setenv(BOX_FSWALK_MAX_ENTRIES_ENV, "-5", 1);
	is_int(box_fswalk_max_entries(), BOX_FSWALK_MAX_ENTRIES, "a bad bound: the default");
	setenv(BOX_FSWALK_MAX_ENTRIES_ENV, "12x", 1);
	is_int(box_fswalk_max_entries(), BOX_FSWALK_MAX_ENTRIES, "a bad bound: the default");
	unsetenv(BOX_FSWALK_MAX_ENTRIES_ENV);
	is_int(box_fswalk_max_entries(), BOX_FSWALK_MAX_ENTRIES, "no bound: the default");
}

/* A tree with everything the remover must handle, below fd/name. */
static int hostile(int fd, const char *name, int depth, int root)
{
	int64_t b;
	int t, r;

	if (mkdirat(fd, name, 0755) < 0)
		return -1;
	t = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r = chain(t, depth, 1, &b);
	for (int k = 0; k < 3000 && r == 0; k++) {
		char n[16];

		snprintf(n, sizeof(n), "w%d", k);
		r = put(t, n, 0);
	}
	if (r == 0 && root)
		r = mknodat(t, "null", S_IFCHR | 0600, makedev(1, 3));
	if (r == 0)
		r = put(t, "ro-file", 10) | fchmodat(t, "ro-file", 0, 0);
	if (r == 0)
		r = lock_chain(t, depth, 0555, 7) | lock_chain(t, depth, 0, 50);
	if (r == 0)
		r = fchmodat(fd, name, 0, 0);
	close(t);
	return r;
}

static void test_remove(int root, const char *who)
{
	struct box_err e;
	int fd = fresh(root ? "rm-root" : "rm-user"), keep, d;

	keep = openat(fd, "outside", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	close(keep);
	ok(hostile(fd, "t", 1200, root) == 0, "%s: a hostile 1200-level tree is made", who);
	symlinkat("outside", fd, "link");
	box_err_init(&e);
	ok(box_fswalk_remove(fd, "t", &e) == 0, "%s: it is removed (%s)", who, e.message);
	ok(!exists(fd, "t") && exists(fd, "outside"), "%s: gone, and only it", who);
	ok(box_fswalk_remove(fd, "link", &e) == 0 && !exists(fd, "link") &&
	   exists(fd, "outside"), "%s: a symlink goes, never its target", who);
	ok(box_fswalk_remove(fd, "absent", &e) == 0, "%s: an absent name is no error", who);

	ok(hostile(fd, "e", 1100, root) == 0, "%s: another is made", who);
	d = openat(fd, "e", O_PATH | O_DIRECTORY | O_CLOEXEC);
	box_err_init(&e);
	ok(box_fswalk_empty(d, &e) == 0, "%s: a chmod 000 directory is emptied through O_PATH (%s)",
	   who, e.message);
	ok(exists(fd, "e") && unlinkat(fd, "e", AT_REMOVEDIR) == 0, "%s: it stays, empty", who);
	close(d);
	close(fd);
}

static void test_bad_names(void)
{
	static const char *const bad[] = { "", ".", "..", "a/b" };
	struct box_err e;

	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		box_err_init(&e);
		ok(box_fswalk_remove(topfd, bad[k], &e) < 0 && e.code == BOX_E_INVALID,
		   "remove '%s' is invalid_request", bad[k]);
	}
	box_err_init(&e);
	ok(box_fswalk_remove(topfd, NULL, &e) < 0 && e.code == BOX_E_INVALID,
	   "remove NULL is invalid_request");
}

/* A failure to remove is reported, and a second call finishes. */
static void test_remove_fails(void)
{
	struct box_err e;
	int fd = fresh("stuck"), d;

	mkdirat(fd, "a", 0755);
	d = openat(fd, "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	put(d, "x", 10);
	/* a directory we may not write as nobody: the file in it stays */
	fflush(stdout);
	if (fork() == 0) {
		struct box_err e2;
		int r;

		box_err_init(&e2);
		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(3);
		r = box_fswalk_remove(fd, "a", &e2);
		_exit(r < 0 && e2.code == BOX_E_IO ? 0 : 1);
	} else {
		int st = -1;

		wait(&st);
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		   "an entry that cannot be removed is io_error");
	}
	ok(exists(d, "x"), "and it is still there");
	box_err_init(&e);
	ok(box_fswalk_remove(fd, "a", &e) == 0 && !exists(fd, "a"), "a second try finishes");
	close(d);
	close(fd);
}

/* As an ordinary user with 48 descriptors: 1000 levels with chmod 000 directories. */
static int as_user(void)
{
	struct rlimit rl;
	struct box_fswalk_usage u;
	struct box_err e;
	int64_t b;
	int fd, fails = 0;

	/* the soft limit only: valgrind keeps the hard one for itself */
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 100;
	rl.rlim_cur = 48;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || setgid(NOBODY) || setuid(NOBODY))
		return 100;
	fd = fresh("user");
	if (fd < 0 || chain(fd, 1000, 1, &b) < 0)
		return 101;
	box_fswalk_usage_init(&u, 0, 0);
	if (box_fswalk_usage_add(&u, fd, &e) < 0 || u.bytes != b)
		fails |= 1;
	box_fswalk_usage_release(&u);
	if (lock_chain(fd, 1000, 0, 300) < 0)
		return 102;
	box_fswalk_usage_init(&u, 0, 0);
	box_err_init(&e);
	if (box_fswalk_usage_add(&u, fd, &e) == 0 || u.complete || e.code != BOX_E_IO)
		fails |= 2;
	box_fswalk_usage_release(&u);
	close(fd);
	if (box_fswalk_remove(topfd, "user", &e) < 0 || exists(topfd, "user"))
		fails |= 4;
	return fails;
}

int main(void)
{
	pid_t pid;
	int st = -1;

	snprintf(top, sizeof(top), "/tmp/t-fswalk.XXXXXX");
	if (!mkdtemp(top))
		return 1;
	topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	test_usage_counts();
	test_usage_bounds();
	test_bad_names();
	test_remove(geteuid() == 0, geteuid() == 0 ? "root" : "user");
	if (geteuid() == 0) {
		struct rlimit rl;

		chmod(top, 0777);
		test_remove_fails();
		fflush(stdout);
		pid = fork();
		if (pid == 0)
			_exit(as_user());
		waitpid(pid, &st, 0);
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		   "as nobody with 48 fds: 1000 levels measured, chmod 000 fails closed, removed "
		   "(status %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
				_exit(100);
			rl.rlim_cur = 48;
			if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || !freopen("/dev/null", "w", stdout))
				_exit(100);
			test_remove(0, "root with 48 fds");
			_exit(tap_failed ? 1 : 0);
		}
		waitpid(pid, &st, 0);
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "root with 48 fds removes hostile trees");
	} else {
		printf("ok %d # skip not root: no second user\n", ++tap_n);
	}
	{
		int tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		box_fswalk_remove(tmp, top + 5, &(struct box_err){ 0 });
		close(tmp);
	}
	close(topfd);
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
