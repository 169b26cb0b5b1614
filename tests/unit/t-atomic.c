#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "atomic.h"
#include "tap.h"
#include "banned.h"

static char dir[64];

static int read_back(int dfd, const char *name, char *buf, size_t n)
{
	int fd = openat(dfd, name, O_RDONLY);
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

/* Number of temp files the atomic writer left behind. */
static int temps_left(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strncmp(de->d_name, ".box-", 5) == 0)
			n++;
	closedir(d);
	return n;
}

static void test_write(int dfd)
{
	struct box_err err;
	struct stat st;
	char buf[64];
	int fd;

	box_err_init(&err);
	is_int(box_atomic_write(dfd, "state.json", "first", 5, 0600, &err), 0, "create a file");
	is_int(read_back(dfd, "state.json", buf, sizeof(buf)), 5, "  5 bytes");
	is_str(buf, "first", "  content");
	ok(fstatat(dfd, "state.json", &st, 0) == 0 && (st.st_mode & 0777) == 0600, "  mode 0600");

	/* an open reader keeps the old inode: proof that the name was replaced, not rewritten */
	fd = openat(dfd, "state.json", O_RDONLY);
	is_int(box_atomic_write(dfd, "state.json", "second!", 7, 0644, &err), 0, "replace it");
	is_int(read_back(dfd, "state.json", buf, sizeof(buf)), 7, "  new length");
	is_str(buf, "second!", "  new content");
	ok(fd >= 0 && read(fd, buf, sizeof(buf)) == 5 && memcmp(buf, "first", 5) == 0,
	   "  an earlier reader still sees the old file");
	if (fd >= 0)
		close(fd);
	is_int(temps_left(dfd), 0, "  no temp file left");

	is_int(box_atomic_write(dfd, "bin", "a\0b", 3, 0644, &err), 0, "binary data");
	ok(fstatat(dfd, "bin", &st, 0) == 0 && st.st_size == 3, "  3 bytes with a NUL");
	is_int(box_atomic_write(dfd, "empty", "", 0, 0644, &err), 0, "empty file");
	ok(fstatat(dfd, "empty", &st, 0) == 0 && st.st_size == 0, "  0 bytes");

	/* a symlink at the name is replaced, its target never written */
	is_int(box_atomic_write(dfd, "target", "keep", 4, 0644, &err), 0, "target file");
	ok(symlinkat("target", dfd, "link") == 0, "symlink to it");
	is_int(box_atomic_write(dfd, "link", "new", 3, 0644, &err), 0, "write over the symlink");
	read_back(dfd, "target", buf, sizeof(buf));
	is_str(buf, "keep", "  the target is untouched");
	ok(fstatat(dfd, "link", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode),
	   "  the symlink became a regular file");

	/* renameat of a file over a directory fails: old state kept, temp removed */
	ok(mkdirat(dfd, "adir", 0755) == 0, "a directory");
	box_err_init(&err);
	is_int(box_atomic_write(dfd, "adir", "x", 1, 0644, &err), -1, "writing over a directory fails");
	is_int(err.code, BOX_E_IO, "  io_error");
	is_int(err.sys_errno, EISDIR, "  EISDIR");
	is_str(err.path, "adir", "  path");
	ok(fstatat(dfd, "adir", &st, 0) == 0 && S_ISDIR(st.st_mode), "  the directory is still there");
	is_int(temps_left(dfd), 0, "  the temp file is gone");

	box_err_init(&err);
	is_int(box_atomic_write(dfd, "a/b", "x", 1, 0644, &err), -1, "name with a slash refused");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	is_int(box_atomic_write(dfd, "..", "x", 1, 0644, &err), -1, "'..' refused");
	is_int(box_atomic_write(dfd, "", "x", 1, 0644, &err), -1, "empty name refused");

	is_int(box_atomic_write(AT_FDCWD, "cwd-file", "c", 1, 0644, &err), 0, "AT_FDCWD works");
	fd = openat(dfd, ".", O_PATH | O_DIRECTORY);
	is_int(box_atomic_write(fd, "via-opath", "p", 1, 0644, &err), 0, "an O_PATH dirfd works");
	close(fd);
	is_int(read_back(dfd, "via-opath", buf, sizeof(buf)), 1, "  file written");
}

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Child side of the contention tests; the exit status tells the parent what happened. */
static int child_lock(int dfd, int exclusive, int timeout_ms, long *ms)
{
	struct timespec t0;
	struct box_err err;
	int fd;

	box_err_init(&err);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fd = box_lock_open(dfd, "lock", exclusive, timeout_ms, &err);
	*ms = elapsed_ms(&t0);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (err.code == BOX_E_CONFLICT && err.retryable && strcmp(err.path, "lock") == 0)
		return 7;
	return 9;
}

static int run_child(int dfd, int exclusive, int timeout_ms, long min_ms, long max_ms)
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		long ms;
		int r = child_lock(dfd, exclusive, timeout_ms, &ms);

		if (ms < min_ms || ms > max_ms)
			_exit(20);
		_exit(r);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void test_lock(int dfd)
{
	struct box_err err;
	struct stat st;
	int fd, fd2;

	box_err_init(&err);
	fd = box_lock_open(dfd, "lock", 1, 0, &err);
	ok(fd >= 0, "take an exclusive lock");
	ok(fstatat(dfd, "lock", &st, 0) == 0 && (st.st_mode & 0777) == 0600, "  lock file 0600");
	ok(fcntl(fd, F_GETFD) & FD_CLOEXEC, "  close-on-exec");

	is_int(run_child(dfd, 1, 300, 250, 5000), 7,
	   "another process: conflict, retryable, after about 300 ms");
	is_int(run_child(dfd, 0, 0, 0, 5000), 7, "  a shared lock conflicts too, at once");

	close(fd);
	is_int(run_child(dfd, 1, 300, 0, 5000), 0, "once released, the other process gets it at once");

	fd = box_lock_open(dfd, "lock", 0, 0, &err);
	ok(fd >= 0, "shared lock");
	is_int(run_child(dfd, 0, 100, 0, 5000), 0, "  another shared lock is fine");
	is_int(run_child(dfd, 1, 100, 50, 5000), 7, "  an exclusive one conflicts");

	close(fd);
	is_int(run_child(dfd, 1, 300, 0, 5000), 0, "  released: an exclusive lock is free again");

	/* the waiting side succeeds when the holder lets go within the timeout */
	fd = box_lock_open(dfd, "lock", 1, 0, &err);
	fflush(stdout);
	{
		pid_t pid = fork();
		int status = -1;

		if (pid == 0) {
			long ms;

			close(fd);
			_exit(child_lock(dfd, 1, 2000, &ms) == 0 && ms >= 100 ? 0 : 1);
		}
		usleep(200 * 1000);
		close(fd);
		waitpid(pid, &status, 0);
		ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		   "a waiter gets the lock when the holder releases it");
	}

	fd = open("/dev/null", O_RDONLY);
	fd2 = dup(fd);
	box_err_init(&err);
	is_int(box_lock_fd(fd, 1, 0, &err), 0, "box_lock_fd on any fd");
	close(fd);
	close(fd2);

	ok(symlinkat("lock", dfd, "lock-link") == 0, "symlink to the lock file");
	box_err_init(&err);
	is_int(box_lock_open(dfd, "lock-link", 1, 0, &err), -1, "a symlinked lock file is refused");
	is_int(err.sys_errno, ELOOP, "  ELOOP");
}

int main(void)
{
	int dfd;
	char cmd[128];

	snprintf(dir, sizeof(dir), "/tmp/box-t-atomic-XXXXXX");
	if (!mkdtemp(dir) || chdir(dir) < 0) {
		printf("Bail out! temp dir\n");
		return 1;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY);
	test_write(dfd);
	test_lock(dfd);
	close(dfd);
	if (chdir("/") == 0) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			printf("# cleanup failed\n");
	}
	(void)tap_skip;
	return done_testing();
}
