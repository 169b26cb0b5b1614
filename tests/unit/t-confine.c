#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <seccomp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "tap.h"
#include "banned.h"

static char base[64], root[128], secret[128];

static void norm_is(const char *in, const char *want)
{
	struct box_err err;
	char out[PATH_MAX];

	box_err_init(&err);
	if (is_int(box_confine_normalize(in, out, sizeof(out), &err), 0, "normalize '%s'", in))
		is_str(out, want, "normalize '%s' -> '%s'", in, want);
	else
		printf("# %s\n", err.message);
}

static void norm_fails(const char *in, enum box_code code)
{
	struct box_err err;
	char out[PATH_MAX];

	box_err_init(&err);
	is_int(box_confine_normalize(in, out, sizeof(out), &err), -1, "normalize '%.40s' fails", in);
	is_str(box_err_code_name(err.code), box_err_code_name(code), "  with %s",
	       box_err_code_name(code));
}

static void test_normalize(void)
{
	char big[PATH_MAX + 8], out[PATH_MAX], small[4];
	struct box_err err;
	size_t o = 0;

	norm_is("x", "/x");
	norm_is("/x", "/x");
	norm_is("/workspace/x", "/x");
	norm_is("/workspace", "/");
	norm_is("/workspace/", "/");
	norm_is("//workspace//x/", "/x");
	norm_is("workspace/x", "/workspace/x");
	norm_is("/workspacex/y", "/workspacex/y");
	norm_is("/workspace/workspace/x", "/workspace/x");
	norm_is("//a//./b/", "/a/b");
	norm_is("a/b/../c", "/a/c");
	norm_is("a/b/../../c/./d/..", "/c");
	norm_is(".", "/");
	norm_is("/", "/");
	norm_is("a/..", "/");
	norm_is("...", "/...");
	norm_is("a/..b/.c", "/a/..b/.c");

	norm_fails("../x", BOX_E_POLICY);
	norm_fails("/..", BOX_E_POLICY);
	norm_fails("a/../../b", BOX_E_POLICY);
	norm_fails("/workspace/../x", BOX_E_POLICY);
	norm_fails("a/b/../../../etc/passwd", BOX_E_POLICY);
	norm_fails("", BOX_E_INVALID);
	norm_fails(NULL, BOX_E_INVALID);

	box_err_init(&err);
	box_confine_normalize("../x", out, sizeof(out), &err);
	is_str(err.message, "path escapes the workspace", "escape message");

	box_err_init(&err);
	is_int(box_confine_normalize_n("a\0b", 3, out, sizeof(out), &err), -1, "embedded NUL refused");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	is_int(box_confine_normalize_n("a/b", 3, out, sizeof(out), &err), 0, "counted path");
	is_str(out, "/a/b", "  normalised");

	memset(big, 'a', PATH_MAX - 1);
	big[PATH_MAX - 1] = 0;
	norm_fails(big, BOX_E_INVALID);
	big[PATH_MAX - 2] = 0;
	big[0] = '/';
	norm_is(big, big);

	/* exactly 64 components pass, 65 do not */
	for (int i = 0; i < 65; i++) {
		big[o++] = '/';
		big[o++] = 'd';
	}
	big[o] = 0;
	norm_fails(big, BOX_E_INVALID);
	big[o - 2] = 0;
	norm_is(big, big);
	norm_is("/./././././././././././././././././././././././././././././././././././././././x",
		"/x");

	box_err_init(&err);
	is_int(box_confine_normalize("abcdef", small, sizeof(small), &err), -1, "small output refused");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
}

static int slurp(int fd, char *buf, size_t n)
{
	ssize_t r = read(fd, buf, n - 1);

	close(fd);
	if (r < 0)
		return -1;
	buf[r] = 0;
	return 0;
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		printf("Bail out! cannot write %s\n", path);
		exit(1);
	}
	close(fd);
}

static void setup(void)
{
	char p[256];

	snprintf(base, sizeof(base), "/tmp/box-t-confine-XXXXXX");
	if (!mkdtemp(base)) {
		printf("Bail out! mkdtemp\n");
		exit(1);
	}
	snprintf(root, sizeof(root), "%s/root", base);
	snprintf(secret, sizeof(secret), "%s/secret", base);
	mkdir(root, 0755);
	write_file(secret, "HOST");
	snprintf(p, sizeof(p), "%s/f", root);
	write_file(p, "IN");
	snprintf(p, sizeof(p), "%s/etc", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/etc/passwd", root);
	write_file(p, "ROOTPASSWD");
	snprintf(p, sizeof(p), "%s/abs", root);
	if (symlink("/etc/passwd", p) < 0)
		exit(1);
	snprintf(p, sizeof(p), "%s/host", root);
	if (symlink(secret, p) < 0)
		exit(1);
	snprintf(p, sizeof(p), "%s/up", root);
	if (symlink("../../..", p) < 0)
		exit(1);
	snprintf(p, sizeof(p), "%s/rel", root);
	if (symlink("../secret", p) < 0)
		exit(1);
	snprintf(p, sizeof(p), "%s/newlink", root);
	{
		char target[160];

		snprintf(target, sizeof(target), "%s/created", base);
		if (symlink(target, p) < 0)
			exit(1);
	}
}

static void cleanup(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		printf("# cleanup of %s failed\n", base);
}

static void read_is(int rootfd, const char *path, const char *want)
{
	struct box_err err;
	char buf[64];
	int fd;

	box_err_init(&err);
	fd = box_confine_open(rootfd, path, O_RDONLY, 0, &err);
	if (!ok(fd >= 0, "open '%s'", path)) {
		printf("# %s\n", err.message);
		return;
	}
	slurp(fd, buf, sizeof(buf));
	is_str(buf, want, "  '%s' reads '%s'", path, want);
}

static void open_fails(int rootfd, const char *path, int flags, enum box_code code)
{
	struct box_err err;
	int fd;

	box_err_init(&err);
	fd = box_confine_open(rootfd, path, flags, 0644, &err);
	is_int(fd, -1, "open '%s' fails", path);
	if (fd >= 0)
		close(fd);
	is_str(box_err_code_name(err.code), box_err_code_name(code), "  with %s (%s)",
	       box_err_code_name(code), err.message);
}

static void test_open(void)
{
	struct box_err err;
	struct stat a, b;
	char p[256];
	int rootfd, fd;

	setup();
	rootfd = open(root, O_RDONLY | O_DIRECTORY);

	read_is(rootfd, "f", "IN");
	read_is(rootfd, "/f", "IN");
	read_is(rootfd, "/workspace/f", "IN");
	/* absolute paths are the root's, not the host's */
	read_is(rootfd, "/etc/passwd", "ROOTPASSWD");
	/* a symlink to an absolute host path resolves inside the root */
	read_is(rootfd, "abs", "ROOTPASSWD");
	open_fails(rootfd, "host", O_RDONLY, BOX_E_NOT_FOUND);
	open_fails(rootfd, "rel", O_RDONLY, BOX_E_NOT_FOUND);
	/* "../../.." from inside the root is the root */
	read_is(rootfd, "up/f", "IN");
	read_is(rootfd, "up/up/up/etc/passwd", "ROOTPASSWD");
	fd = box_confine_open(rootfd, "up", O_RDONLY | O_DIRECTORY, 0, &err);
	ok(fd >= 0 && fstat(fd, &a) == 0 && fstat(rootfd, &b) == 0 && a.st_ino == b.st_ino,
	   "symlink to ../../.. is the root itself");
	if (fd >= 0)
		close(fd);
	open_fails(rootfd, "../secret", O_RDONLY, BOX_E_POLICY);
	open_fails(rootfd, "/../secret", O_RDONLY, BOX_E_POLICY);
	open_fails(rootfd, "missing", O_RDONLY, BOX_E_NOT_FOUND);
	open_fails(rootfd, "abs", O_RDONLY | O_NOFOLLOW, BOX_E_POLICY);

	/* O_CREAT through a dangling absolute symlink creates nothing on the host */
	open_fails(rootfd, "newlink", O_WRONLY | O_CREAT, BOX_E_NOT_FOUND);
	snprintf(p, sizeof(p), "%s/created", base);
	ok(access(p, F_OK) != 0, "nothing created on the host through a symlink");

	fd = box_confine_open(rootfd, "new", O_WRONLY | O_CREAT | O_EXCL, 0600, &err);
	ok(fd >= 0, "create a file inside the root");
	if (fd >= 0) {
		ok(fstat(fd, &a) == 0 && (a.st_mode & 0777) == 0600, "  with the mode asked for");
		close(fd);
	}

	box_err_init(&err);
	box_confine_open(rootfd, "/workspace/a/./b/../missing", O_RDONLY, 0, &err);
	is_str(err.path, "/a/missing", "error path is the normalised path");
	is_int(err.sys_errno, ENOENT, "  with its errno");
	close(rootfd);

	/* magic links of /proc are refused even when the root holds them */
	rootfd = open("/proc", O_RDONLY | O_DIRECTORY);
	fd = box_confine_open(rootfd, "self/status", O_RDONLY, 0, &err);
	ok(fd >= 0, "/proc/self/status itself opens (self is a plain symlink)");
	if (fd >= 0)
		close(fd);
	open_fails(rootfd, "self/root/etc/passwd", O_RDONLY, BOX_E_POLICY);
	box_err_init(&err);
	box_confine_open(rootfd, "thread-self/root", O_PATH, 0, &err);
	is_int(err.sys_errno, ELOOP, "  refused as a magic link (ELOOP, RESOLVE_NO_MAGICLINKS)");
	open_fails(rootfd, "/proc/self/root", O_RDONLY, BOX_E_NOT_FOUND);
	open_fails(rootfd, "self/cwd", O_RDONLY | O_DIRECTORY, BOX_E_POLICY);
	fd = open(secret, O_RDONLY);
	snprintf(p, sizeof(p), "self/fd/%d", fd);
	open_fails(rootfd, p, O_RDONLY, BOX_E_POLICY);
	close(fd);
	close(rootfd);

	cleanup();
}

/* In a child: openat2 made to fail with ENOSYS by seccomp, as on a kernel before 5.6. */
static int enosys_child(void)
{
	struct box_err err;
	scmp_filter_ctx ctx;
	int nr, fd;

	nr = seccomp_syscall_resolve_name("openat2");
	if (nr < 0)
		nr = 437;
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0) < 0 ||
	    seccomp_load(ctx) < 0)
		return 10;
	seccomp_release(ctx);
	box_err_init(&err);
	fd = box_confine_open(AT_FDCWD, "x", O_RDONLY, 0, &err);
	if (fd != -1)
		return 11;
	if (err.code != BOX_E_UNSUPPORTED)
		return 12;
	if (!strstr(err.message, "Linux 5.6 or later needed"))
		return 13;
	box_err_init(&err);
	if (box_confine_probe(&err) != -1 || err.code != BOX_E_UNSUPPORTED)
		return 14;
	return 0;
}

static void test_enosys(void)
{
	pid_t pid;
	int st = -1;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(enosys_child());
	ok(pid > 0 && waitpid(pid, &st, 0) == pid, "child ran");
	ok(WIFEXITED(st), "child exited");
	is_int(WEXITSTATUS(st), 0,
	       "without openat2: open and probe fail with unsupported (child status)");
}

/* valgrind 3.19 (Debian 12) does not know openat2 and answers ENOSYS itself */
static int under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");

	return getenv("BOX_UNDER_VALGRIND") || (p && strstr(p, "vgpreload"));
}

int main(void)
{
	struct box_err err;

	test_normalize();
	box_err_init(&err);
	if (under_valgrind() && box_confine_probe(&err) < 0) {
		tap_skip("valgrind lacks openat2: confined opens not tested");
	} else {
		is_int(box_confine_probe(&err), 0, "openat2 works here");
		test_open();
	}
	test_enosys();
	return done_testing();
}
