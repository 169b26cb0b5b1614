#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "store.h"
#include "tap.h"
#include "banned.h"

#define DA "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define DB "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define HEXB "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define HEXA "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static char top[64];

static int count_entries(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static int put_file(int dirfd, const char *name, const char *text)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int r;

	if (fd < 0)
		return -1;
	r = box_write_all(fd, text, strlen(text));
	close(fd);
	return r;
}

static char *get_file(int dirfd, const char *name)
{
	struct box_buf b = BOX_BUF_INIT(4096);
	struct box_err err;

	if (box_buf_read_file(&b, dirfd, name, &err) < 0)
		return NULL;
	return box_buf_detach(&b, NULL);
}

static int exists_at(int dirfd, const char *name)
{
	struct stat st;

	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void age(int dirfd, const char *name, int seconds)
{
	struct timespec ts[2];

	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= seconds;
	ts[1] = ts[0];
	utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW);
}

/* A small tree: file, sub/file, sub/ro/ (a directory without write permission) with a file. */
static int fill(int fd, const char *text)
{
	int sub, ro, r;

	if (put_file(fd, "file", text) < 0 || mkdirat(fd, "sub", 0755) < 0)
		return -1;
	sub = openat(fd, "sub", O_RDONLY | O_DIRECTORY);
	if (sub < 0)
		return -1;
	r = put_file(sub, "file", text) < 0 || mkdirat(sub, "ro", 0755) < 0 ? -1 : 0;
	ro = openat(sub, "ro", O_RDONLY | O_DIRECTORY);
	if (ro >= 0) {
		put_file(ro, "inner", text);
		fchmod(ro, 0555);
		close(ro);
	}
	symlinkat("/etc/passwd", sub, "link");
	close(sub);
	return r;
}

static void test_basic(const char *root)
{
	struct box_store s;
	struct box_err err;
	char name[64], name2[64], path[4200], want[4200], *t;
	int fd, fd2, e;

	box_err_init(&err);
	is_int(box_store_open(root, &s, &err), 0, "open a store (creating its parents)");
	ok(exists_at(s.rootfd, "sha256") && exists_at(s.rootfd, "tmp"), "  sha256/ and tmp/");
	is_int(box_store_has(&s, DA, &err), 0, "an absent entry");
	box_err_init(&err);
	is_int(box_store_has(&s, "sha256:AA", &err), -1, "has with a bad digest");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	box_err_init(&err);
	is_int(box_store_open_entry(&s, DA, &err), -1, "open an absent entry");
	is_int(err.code, BOX_E_NOT_FOUND, "  not_found");

	is_int(box_store_tmpdir(&s, name, &fd, &err), 0, "a tmp dir");
	ok(fd >= 0 && exists_at(s.tmpfd, name), "  exists under tmp/");
	is_int(box_store_tmpdir(&s, name2, &fd2, &err), 0, "another one");
	ok(strcmp(name, name2) != 0, "  with another name");
	is_int(fill(fd, "first"), 0, "  filled");
	is_int(fill(fd2, "second"), 0, "  filled too");
	is_int(count_entries(s.shafd), 0, "nothing visible before commit");
	is_int(box_store_commit(&s, name, DA, &err), 0, "commit the first");
	is_int(box_store_has(&s, DA, &err), 1, "  has it");
	ok(!exists_at(s.tmpfd, name), "  gone from tmp/");
	t = get_file(s.shafd, HEXA "/sub/file");
	is_str(t, "first", "  its content");
	free(t);
	close(fd);

	is_int(box_store_commit(&s, name2, DA, &err), 0, "commit the same digest again");
	ok(!exists_at(s.tmpfd, name2), "  the second tmp dir is removed (read-only subdir too)");
	t = get_file(s.shafd, HEXA "/sub/file");
	is_str(t, "first", "  the entry keeps the first content");
	free(t);
	is_int(count_entries(s.shafd), 1, "  one entry");
	close(fd2);

	box_err_init(&err);
	is_int(box_store_commit(&s, "xnothere", DB, &err), -1, "commit of a missing tmp dir");
	is_int(err.code, BOX_E_NOT_FOUND, "  not_found");
	box_err_init(&err);
	is_int(box_store_commit(&s, "../sha256", DB, &err), -1, "commit of a path");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	box_err_init(&err);
	is_int(box_store_commit(&s, "x", "sha256:zz", &err), -1, "commit with a bad digest");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");

	is_int(box_store_path(&s, DA, path, sizeof(path), &err), 0, "path of an entry");
	snprintf(want, sizeof(want), "%s/sha256/%s", root, HEXA);
	is_str(path, want, "  ROOT/sha256/<hex>");
	box_err_init(&err);
	is_int(box_store_path(&s, DA, path, 20, &err), -1, "path into a small buffer");
	is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
	fd = box_store_open_entry(&s, DA, &err);
	ok(fd >= 0 && exists_at(fd, "file"), "open an entry");
	if (fd >= 0)
		close(fd);

	is_int(box_store_tmpdir(&s, name, &fd, &err), 0, "a tmp dir to abort");
	fill(fd, "x");
	is_int(box_store_abort(&s, name, &err), 0, "abort it");
	ok(!exists_at(s.tmpfd, name), "  gone");
	close(fd);
	e = box_store_abort(&s, "/", &err);
	is_int(e, -1, "abort of a bad name");
	box_store_close(&s);
	box_store_close(&s);
	ok(1, "close twice is harmless");
}

static void test_clean(const char *root)
{
	struct box_store s;
	struct box_err err;
	char held[64], dead[64], fresh[64];
	int fh, fd, ff;

	box_err_init(&err);
	if (box_store_open(root, &s, &err) < 0) {
		ok(0, "open store: %s", err.message);
		return;
	}
	box_store_tmpdir(&s, held, &fh, &err);
	box_store_tmpdir(&s, dead, &fd, &err);
	box_store_tmpdir(&s, fresh, &ff, &err);
	fill(fh, "held");
	fill(fd, "dead");
	close(fd);  /* its owner was killed: the lock is gone */
	close(ff);
	put_file(s.tmpfd, "stray", "x");
	age(s.tmpfd, held, 120);
	age(s.tmpfd, dead, 120);
	age(s.tmpfd, "stray", 120);
	is_int(box_store_clean_tmp(&s, &err), 2, "clean removes the old unlocked dir and file");
	ok(!exists_at(s.tmpfd, dead) && !exists_at(s.tmpfd, "stray"), "  they are gone");
	ok(exists_at(s.tmpfd, held), "  a dir still locked by its owner stays");
	ok(exists_at(s.tmpfd, fresh), "  a fresh dir stays");
	close(fh);
	is_int(box_store_clean_tmp(&s, &err), 1, "once its owner is gone, the old dir goes");
	ok(!exists_at(s.tmpfd, held), "  gone");
	age(s.tmpfd, fresh, 61);
	is_int(box_store_clean_tmp(&s, &err), 1, "a dir older than a minute goes");
	is_int(count_entries(s.tmpfd), 0, "  tmp/ is empty");
	box_store_close(&s);
}

static void test_race(const char *root)
{
	struct box_store s;
	struct box_err err;
	pid_t pids[6];
	int fails = 0;
	char *t;

	fflush(stdout);
	for (int i = 0; i < 6; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			struct box_store cs;
			char name[64], text[16];
			int fd, r;

			box_err_init(&err);
			snprintf(text, sizeof(text), "p%d", i);
			r = box_store_open(root, &cs, &err) == 0 &&
			    box_store_tmpdir(&cs, name, &fd, &err) == 0 && fill(fd, text) == 0 &&
			    box_store_commit(&cs, name, DB, &err) == 0;
			box_store_close(&cs);
			_exit(r ? 0 : 1);
		}
	}
	for (int i = 0; i < 6; i++) {
		int st = 0;

		if (pids[i] < 0 || waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0)
			fails++;
	}
	is_int(fails, 0, "6 processes commit the same digest at once");
	box_err_init(&err);
	box_store_open(root, &s, &err);
	is_int(box_store_has(&s, DB, &err), 1, "  the entry exists");
	t = get_file(s.shafd, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/file");
	ok(t && t[0] == 'p', "  with one puller's complete content");
	free(t);
	is_int(count_entries(s.tmpfd), 0, "  no tmp dir left");
	box_store_close(&s);
}

static void rm_rf(const char *path)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();

	if (pid == 0) {
		execlp("sh", "sh", "-c", "chmod -R u+w \"$1\" 2>/dev/null; rm -rf \"$1\"", "sh",
		       path, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

static void test_remove_and_lock(const char *root)
{
	struct box_store s;
	struct box_err err;
	char name[64];
	int fd, l1, l2;

	box_err_init(&err);
	is_int(box_store_open(root, &s, &err), 0, "open for remove");
	is_int(box_store_tmpdir(&s, name, &fd, &err), 0, "a tmp dir for DB");
	fill(fd, "to go");
	close(fd);
	is_int(box_store_commit(&s, name, DB, &err), 0, "  committed");
	is_int(put_file(s.shafd, HEXB ".tree", "sha256:x"), 0, "  with a tree note");
	is_int(box_store_remove(&s, DB, &err), 0, "remove it");
	is_int(box_store_has(&s, DB, &err), 0, "  gone from the store");
	ok(!exists_at(s.shafd, HEXB ".tree"), "  its tree note too");
	is_int(count_entries(s.tmpfd), 0, "  nothing left in tmp/");
	is_int(box_store_has(&s, DA, &err), 1, "  the other entry stays");
	box_err_init(&err);
	is_int(box_store_remove(&s, DB, &err), -1, "remove it again");
	is_int(err.code, BOX_E_NOT_FOUND, "  not_found");
	box_err_init(&err);
	is_int(box_store_remove(&s, "sha256:zz", &err), -1, "remove with a bad digest");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");

	l1 = box_store_lock(&s, 0, &err);
	l2 = box_store_lock(&s, 0, &err);
	ok(l1 >= 0 && l2 >= 0, "two shared store locks at once");
	ok(exists_at(s.rootfd, BOX_STORE_LOCK), "  in ROOT/" BOX_STORE_LOCK);
	if (l1 >= 0)
		close(l1);
	if (l2 >= 0)
		close(l2);
	l1 = box_store_lock(&s, 1, &err);
	ok(l1 >= 0, "an exclusive one once they are released");
	if (l1 >= 0)
		close(l1);
	box_store_close(&s);
}

int main(void)
{
	struct box_store s;
	struct box_err err;
	char root[512];

	snprintf(top, sizeof(top), "/tmp/t-store.XXXXXX");
	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 1;
	}
	box_err_init(&err);
	is_int(box_store_open("", &s, &err), -1, "open of an empty path");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	snprintf(root, sizeof(root), "%s/home/box/store", top);
	test_basic(root);
	test_clean(root);
	test_race(root);
	test_remove_and_lock(root);
	rm_rf(top);
	return done_testing();
}
