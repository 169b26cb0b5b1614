#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fswalk.h"
#include "sbcopy.h"
#include "tap.h"
#include "banned.h"

static char top[64];
static int topfd = -1;

static int put(int dfd, const char *name, const char *data, mode_t mode)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t n = strlen(data);

	if (fd < 0)
		return -1;
	if (write(fd, data, n) != (ssize_t)n || fchmod(fd, mode) < 0) {
		close(fd);
		return -1;
	}
	return close(fd);
}

static int get(int dfd, const char *name, char *buf, size_t n)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return -1;
	r = read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = 0;
	return (int)r;
}

static int mode_of(int dfd, const char *name)
{
	struct stat sb;

	if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	return (int)(sb.st_mode & 07777);
}

static int exists(int dfd, const char *name)
{
	struct stat sb;

	return fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Entries in dfd/name other than . and .. (-1 if it cannot be read). */
static int count_entries(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	int n = 0;
	DIR *d;

	if (fd < 0)
		return -1;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static const char *link_of(int dfd, const char *name)
{
	static char buf[256];
	ssize_t n = readlinkat(dfd, name, buf, sizeof(buf) - 1);

	if (n < 0)
		return NULL;
	buf[n] = 0;
	return buf;
}

static int mkdir_in(int dfd, const char *name, mode_t mode)
{
	if (mkdirat(dfd, name, 0700) < 0)
		return -1;
	return fchmodat(dfd, name, mode, 0);
}

static int opendir_at(int dfd, const char *name)
{
	return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void path_of(char *out, size_t n, const char *rel)
{
	snprintf(out, n, "%s/%s", top, rel);
}

/* ------------------------------------------------------------------ copy rules */

static void test_copy_rules(void)
{
	struct box_sbcopy_stats st;
	struct box_err err;
	char src[160], buf[64];
	int s, d, r;

	ok(mkdir_in(topfd, "src", 0755) == 0, "made the source tree");
	s = opendir_at(topfd, "src");
	put(topfd, "outside.txt", "outside-content", 0644);
	put(s, "a.txt", "hello", 0600);
	put(s, "run.sh", "#!/bin/sh\n", 04755);
	put(s, "gx", "gx", 0610);
	mkdir_in(s, "sub", 0700);
	d = opendir_at(s, "sub");
	put(d, "deep.txt", "deep", 0644);
	symlinkat("../a.txt", d, "in-link");
	symlinkat("../../outside.txt", d, "esc");
	close(d);
	symlinkat("sub/deep.txt", s, "ok-link");
	symlinkat(".", s, "dot-link");
	symlinkat("/etc/passwd", s, "abs-link");
	symlinkat("../outside.txt", s, "up-link");
	symlinkat("sub/../a.txt", s, "mid-dotdot");
	symlinkat("sub//deep.txt", s, "double-slash");
	symlinkat(top, s, "linked-dir");
	mkfifoat(s, "fifo", 0644);
	close(s);

	path_of(src, sizeof(src), "src");
	box_err_init(&err);
	r = box_sbcopy_in(src, topfd, "in", NULL, &st, &err);
	if (!is_int(r, 0, "copy of a tree succeeds"))
		printf("# %s\n", err.message);
	d = opendir_at(topfd, "in");
	ok(get(d, "a.txt", buf, sizeof(buf)) == 5 && !strcmp(buf, "hello"), "file content copied");
	is_int(mode_of(d, "a.txt"), 0644, "0600 file becomes 0644");
	is_int(mode_of(d, "run.sh"), 0755, "set-uid dropped, x bit kept");
	is_int(mode_of(d, "gx"), 0755, "any x bit gives 0755");
	is_int(mode_of(d, "sub"), 0755, "directories are 0755");
	is_int(mode_of(topfd, "in"), 0755, "the root directory is 0755");
	ok(get(d, "sub/deep.txt", buf, sizeof(buf)) == 4, "nested file copied");
	is_str(link_of(d, "sub/in-link"), "../a.txt", "an up-link within the tree is kept");
	is_str(link_of(d, "ok-link"), "sub/deep.txt", "a down-link is kept");
	is_str(link_of(d, "dot-link"), ".", "a link to . is kept");
	ok(!exists(d, "abs-link"), "an absolute link is skipped");
	ok(!exists(d, "up-link"), "a link above the root is skipped");
	ok(!exists(d, "sub/esc"), "a nested link leaving the tree is skipped");
	ok(!exists(d, "mid-dotdot"), "a .. after a plain component is skipped");
	ok(!exists(d, "double-slash"), "an empty component is skipped");
	ok(!exists(d, "linked-dir"), "a link to a directory outside is skipped");
	ok(!exists(d, "fifo"), "a FIFO is skipped");
	is_int(st.skipped_links, 6, "skipped links counted");
	is_int(st.skipped_other, 1, "skipped FIFO counted");
	is_int(st.links, 3, "kept links counted");
	is_int(st.files, 4, "files counted");
	is_int(st.dirs, 2, "directories counted (root included)");
	is_int(st.bytes, 5 + 10 + 2 + 4, "bytes counted");
	close(d);
	is_int(count_entries(topfd, "."), 3, "no temporary left beside the copy");

	r = box_sbcopy_in(src, topfd, "in", NULL, &st, &err);
	is_int(r, -1, "copy onto an existing name fails");
	is_int(err.code, BOX_E_CONFLICT, "... with conflict");
	put(topfd, "afile", "x", 0644);
	r = box_sbcopy_in(src, topfd, "afile", NULL, &st, &err);
	is_int(err.code, BOX_E_CONFLICT, "an existing file is a conflict too");
	unlinkat(topfd, "afile", 0);
	symlinkat("nowhere", topfd, "dangling");
	r = box_sbcopy_in(src, topfd, "dangling", NULL, &st, &err);
	is_int(err.code, BOX_E_CONFLICT, "an existing dangling link is a conflict");
	unlinkat(topfd, "dangling", 0);

	path_of(src, sizeof(src), "no-such-thing");
	r = box_sbcopy_in(src, topfd, "x", NULL, &st, &err);
	ok(r == -1 && err.code == BOX_E_NOT_FOUND, "a missing source is not_found");
	ok(!exists(topfd, "x"), "... and nothing is created");

	path_of(src, sizeof(src), "src");
	r = box_sbcopy_in(src, topfd, "a/b", NULL, &st, &err);
	ok(r == -1 && err.code == BOX_E_INVALID, "a name with a slash is invalid_request");
	r = box_sbcopy_in(src, topfd, "..", NULL, &st, &err);
	ok(r == -1 && err.code == BOX_E_INVALID, "the name .. is invalid_request");
	r = box_sbcopy_in(src, topfd, "", NULL, &st, &err);
	ok(r == -1 && err.code == BOX_E_INVALID, "an empty name is invalid_request");

	path_of(src, sizeof(src), "src/fifo");
	r = box_sbcopy_in(src, topfd, "x", NULL, &st, &err);
	ok(r == -1 && err.code == BOX_E_INVALID, "a FIFO as the source is invalid_request");

	path_of(src, sizeof(src), "src/run.sh");
	r = box_sbcopy_in(src, topfd, "one", NULL, &st, &err);
	is_int(r, 0, "a single file is copied");
	is_int(mode_of(topfd, "one"), 0755, "... with set-uid dropped");
	is_int(st.files, 1, "... and counted");

	symlinkat("src", topfd, "src-link");
	path_of(src, sizeof(src), "src-link");
	r = box_sbcopy_in(src, topfd, "via-link", NULL, &st, &err);
	is_int(r, 0, "a symlinked source root is followed");
	ok(exists(topfd, "via-link/sub/deep.txt"), "... and its tree copied");
}

/* ------------------------------------------------------------------ limits */

static void test_limits(void)
{
	struct box_sbcopy_limits lim;
	struct box_sbcopy_stats st;
	struct box_err err;
	char src[160];
	int s, r, before;

	/* 3 files of 4 bytes, directories l/a/b: entries l1 l2 a a/f a/b a/b/g = 6, depth 3 */
	mkdir_in(topfd, "lim", 0755);
	s = opendir_at(topfd, "lim");
	put(s, "l1", "1234", 0644);
	put(s, "l2", "1234", 0644);
	mkdir_in(s, "a", 0755);
	put(s, "a/f", "1234", 0644);
	mkdir_in(s, "a/b", 0755);
	mkfifoat(s, "a/b/g", 0644);
	close(s);
	path_of(src, sizeof(src), "lim");
	before = count_entries(topfd, ".");

	memset(&lim, 0, sizeof(lim));
	lim.max_files = 6;
	r = box_sbcopy_in(src, topfd, "f6", &lim, &st, &err);
	is_int(r, 0, "max_files equal to the entries (skipped ones included) passes");
	lim.max_files = 5;
	r = box_sbcopy_in(src, topfd, "f5", &lim, &st, &err);
	ok(r == -1 && err.code == BOX_E_LIMIT, "one entry too many is limit_exceeded");
	is_str(err.limit, "files", "... naming files");
	is_int(err.configured, 5, "... with the configured cap");
	ok(!exists(topfd, "f5"), "... and nothing is left at the name");
	is_int(count_entries(topfd, "."), before + 1, "... nor a temporary");

	memset(&lim, 0, sizeof(lim));
	lim.max_bytes = 12;
	r = box_sbcopy_in(src, topfd, "b12", &lim, &st, &err);
	is_int(r, 0, "max_bytes equal to the content passes");
	lim.max_bytes = 11;
	r = box_sbcopy_in(src, topfd, "b11", &lim, &st, &err);
	ok(r == -1 && err.code == BOX_E_LIMIT, "one byte too many is limit_exceeded");
	is_str(err.limit, "bytes", "... naming bytes");
	ok(!exists(topfd, "b11"), "... and nothing is left");

	memset(&lim, 0, sizeof(lim));
	lim.max_depth = 3;
	r = box_sbcopy_in(src, topfd, "d3", &lim, &st, &err);
	is_int(r, 0, "max_depth equal to the depth passes");
	lim.max_depth = 2;
	r = box_sbcopy_in(src, topfd, "d2", &lim, &st, &err);
	ok(r == -1 && err.code == BOX_E_LIMIT, "one level too deep is limit_exceeded");
	is_str(err.limit, "depth", "... naming depth");
	ok(!exists(topfd, "d2"), "... and nothing is left");
	is_int(count_entries(topfd, "."), before + 3, "no temporaries left by the failures");

	lim.max_depth = BOX_SBCOPY_DEPTH_CEILING + 1;
	r = box_sbcopy_in(src, topfd, "dx", &lim, &st, &err);
	ok(r == -1 && err.code == BOX_E_INVALID, "a max_depth above the ceiling is invalid_request");
}

/* ------------------------------------------------------------------ empty_dir */

static void test_empty_dir(void)
{
	struct box_err err;
	char buf[64];
	int o, sub, r, pathfd;

	mkdir_in(topfd, "keep", 0755);
	put(topfd, "keep/precious", "precious", 0644);
	mkdir_in(topfd, "out", 0755);
	o = opendir_at(topfd, "out");
	put(o, "f", "f", 0644);
	mkdir_in(o, "d", 0755);
	put(o, "d/g", "g", 0644);
	mkdir_in(o, "d/locked", 0755);
	put(o, "d/locked/h", "h", 0644);
	fchmodat(o, "d/locked", 0, 0);
	symlinkat("../keep", o, "to-dir");
	symlinkat("../keep/precious", o, "to-file");
	mkfifoat(o, "fifo", 0600);
	close(o);

	pathfd = openat(topfd, "out", O_PATH | O_DIRECTORY | O_CLOEXEC);
	box_err_init(&err);
	r = box_fswalk_empty(pathfd, &err);
	if (!is_int(r, 0, "empty_dir succeeds (O_PATH fd, a mode-0 subdirectory)"))
		printf("# %s\n", err.message);
	close(pathfd);
	is_int(count_entries(topfd, "out"), 0, "the directory is empty");
	ok(exists(topfd, "out"), "the directory itself stays");
	ok(get(topfd, "keep/precious", buf, sizeof(buf)) == 8, "targets of links are untouched");
	is_int(count_entries(topfd, "keep"), 1, "a linked directory's contents stay");

	o = opendir_at(topfd, "out");
	r = box_fswalk_empty(o, &err);
	is_int(r, 0, "emptying an empty directory succeeds");
	close(o);

	/* deeper than the copy's ceiling: removal has none */
	mkdir_in(topfd, "deep", 0755);
	o = opendir_at(topfd, "deep");
	for (int i = 0; i < BOX_SBCOPY_DEPTH_CEILING + 2; i++) {
		mkdirat(o, "d", 0755);
		sub = opendir_at(o, "d");
		close(o);
		o = sub;
	}
	close(o);
	o = opendir_at(topfd, "deep");
	r = box_fswalk_empty(o, &err);
	ok(r == 0 && count_entries(topfd, "deep") == 0, "a tree deeper than the copy's ceiling "
	   "is emptied");
	close(o);
}

/* As an ordinary user (the uid box-sandbox maps a guest's root to), directories the guest
 * locked (mode 0, or 0555 with files in them) are still emptied. Run in a child as nobody
 * when the test runs as root, where permissions would not be checked at all. */
static int empty_locked_tree(int dfd)
{
	struct box_err err;
	int o;

	if (mkdir_in(dfd, "out", 0755) < 0)
		return 10;
	o = opendir_at(dfd, "out");
	mkdir_in(o, "zero", 0755);
	put(o, "zero/f", "f", 0644);
	mkdir_in(o, "zero/inner", 0755);
	put(o, "zero/inner/g", "g", 0644);
	fchmodat(o, "zero/inner", 0, 0);
	fchmodat(o, "zero", 0, 0);
	mkdir_in(o, "ro", 0755);
	put(o, "ro/h", "h", 0644);
	fchmodat(o, "ro", 0555, 0);
	if (openat(o, "zero/f", O_RDONLY | O_CLOEXEC) >= 0 && geteuid() != 0)
		return 11;
	if (box_fswalk_empty(o, &err) < 0) {
		printf("# %s\n", err.message);
		return 12;
	}
	return count_entries(dfd, "out") == 0 ? 0 : 13;
}

static void test_empty_dir_unprivileged(void)
{
	int status = -1, d;
	pid_t pid;

	if (geteuid() != 0) {
		mkdir_in(topfd, "unpriv", 0755);
		d = opendir_at(topfd, "unpriv");
		is_int(empty_locked_tree(d), 0, "locked directories are emptied");
		close(d);
		return;
	}
	mkdir_in(topfd, "unpriv", 0755);
	if (fchownat(topfd, "unpriv", 65534, 65534, 0) < 0) {
		tap_skip("cannot chown to nobody");
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		d = opendir_at(topfd, "unpriv");
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(20);
		_exit(empty_locked_tree(d));
	}
	waitpid(pid, &status, 0);
	ok(WIFEXITED(status), "the unprivileged child ran");
	is_int(WEXITSTATUS(status), 0, "locked directories are emptied as an ordinary user");
}

/* ------------------------------------------------------------------ usage */

static void test_usage(void)
{
	struct box_fswalk_usage u;
	struct box_err err;
	char big[10000];
	int w, fd;

	mkdir_in(topfd, "ws", 0755);
	w = opendir_at(topfd, "ws");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	put(w, "f", big, 0644);
	fd = openat(topfd, "huge-outside", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ok(fd >= 0 && posix_fallocate(fd, 0, 8 << 20) == 0, "made a large file outside");
	close(fd);
	symlinkat("../huge-outside", w, "link");

	box_err_init(&err);
	box_fswalk_usage_init(&u, 0, 0);
	ok(box_fswalk_usage_add(&u, w, &err) == 0 && u.bytes >= 9999,
	   "usage counts content (%lld)", (long long)u.bytes);
	ok(u.bytes < 8 << 20, "usage does not follow links");
	box_fswalk_usage_release(&u);
	box_fswalk_usage_init(&u, 2, 0);
	ok(box_fswalk_usage_add(&u, w, &err) == 0, "max_entries equal to the entries passes");
	box_fswalk_usage_release(&u);
	box_fswalk_usage_init(&u, 1, 0);
	ok(box_fswalk_usage_add(&u, w, &err) == -1 && err.code == BOX_E_LIMIT && !u.complete,
	   "one entry too many is limit_exceeded");
	is_str(err.limit, "entries", "... naming entries");
	is_int(err.configured, 1, "... with the configured cap");
	box_fswalk_usage_release(&u);
	close(w);
}

/* box_sbcopy_chown_tree: the root and everything below, links themselves and never their
 * targets, FIFOs without opening them; a file given alone. */
static void test_chown_tree(void)
{
	struct stat st;
	struct box_err err;
	char outside[256];
	int d;

	if (geteuid() != 0) {
		tap_skip("chown to other ids needs root");
		return;
	}
	mkdir_in(topfd, "ct", 0755);
	d = opendir_at(topfd, "ct");
	mkdir_in(d, "a", 0700);
	put(d, "a/f", "x", 0600);
	mkdir_in(d, "a/b", 0755);
	put(d, "a/b/g", "y", 0644);
	path_of(outside, sizeof(outside), "ct-outside");
	put(topfd, "ct-outside", "o", 0644);
	if (symlinkat(outside, d, "a/link") < 0 || mkfifoat(d, "a/fifo", 0644) < 0)
		return (void)ok(0, "set-up");
	box_err_init(&err);
	is_int(box_sbcopy_chown_tree(topfd, "ct", 123457, 123458, &err), 0, "a tree chowned");
	for (const char *const *n = (const char *const[]){ "ct", "ct/a", "ct/a/f", "ct/a/b",
							   "ct/a/b/g", "ct/a/link", "ct/a/fifo",
							   NULL }; *n; n++)
		ok(fstatat(topfd, *n, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid == 123457 &&
		   st.st_gid == 123458, "  %s", *n);
	ok(stat(outside, &st) == 0 && st.st_uid == 0, "  a link's target is untouched");
	is_int(box_sbcopy_chown_tree(d, "a/f", 123459, 123459, &err), 0, "a file alone");
	ok(fstatat(d, "a/f", &st, 0) == 0 && st.st_uid == 123459, "  chowned");
	is_int(box_sbcopy_chown_tree(d, "a/link", 123459, 123459, &err), 0, "a symlink alone");
	ok(stat(outside, &st) == 0 && st.st_uid == 0, "  its target untouched");
	is_int(box_sbcopy_chown_tree(d, "absent", 1, 1, &err), -1, "an absent name fails");
	ok(err.code == BOX_E_NOT_FOUND, "  with not_found: %s", err.message);
	close(d);
}

int main(void)
{
	char cmd[256];

	snprintf(top, sizeof(top), "/tmp/t-sbcopy-XXXXXX");
	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 1;
	}
	topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	test_copy_rules();
	test_limits();
	test_empty_dir();
	test_empty_dir_unprivileged();
	test_usage();
	test_chown_tree();
	close(topfd);
	snprintf(cmd, sizeof(cmd), "chmod -R u+rwx %s 2>/dev/null; rm -rf %s", top, top);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", top);
	return done_testing();
}
