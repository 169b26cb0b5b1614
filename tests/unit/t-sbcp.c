/* lib/sandbox/sbcp: the bounded look at a source tree, and the copy as a tar stream into an
 * absent or empty target, with nothing left behind on failure. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boxarchive.h"
#include "buf.h"
#include "fswalk.h"
#include "sbcp.h"
#include "tap.h"
#include "banned.h"

static char top[64];
static int topfd = -1;

static int put(int dfd, const char *name, const char *s)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc;

	if (fd < 0)
		return -1;
	rc = write(fd, s, strlen(s)) == (ssize_t)strlen(s) ? 0 : -1;
	return close(fd) < 0 ? -1 : rc;
}

/* a fresh directory name under top, opened */
static int fresh(const char *name)
{
	struct box_err e;

	box_err_init(&e);
	(void)box_fswalk_remove(topfd, name, &e);
	if (mkdirat(topfd, name, 0755) < 0)
		return -1;
	return openat(topfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* entries of top whose name starts with ".box-cp" */
static int leftovers(void)
{
	int fd = openat(topfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += strncmp(de->d_name, ".box-cp", 7) == 0;
	closedir(d);
	return n;
}

/* box_sbcp_copy of src to top/name: its error code (BOX_OK on success) */
static enum box_code copy(int src, const char *name, int64_t max, struct box_err *e)
{
	box_err_init(e);
	return box_sbcp_copy(src, topfd, name, max, (uid_t)-1, (gid_t)-1, NULL, e) == 0 ?
	       BOX_OK : e->code;
}

static void test_copy(void)
{
	char a[BOX_ARCHIVE_DIGEST_LEN + 1], b[BOX_ARCHIVE_DIGEST_LEN + 1];
	struct box_sbcp_stats st;
	struct box_err e;
	int src = fresh("src"), dst;

	ok(src >= 0 && mkdirat(src, "d", 0755) == 0 && put(src, "d/f", "deep\n") == 0 &&
	   put(src, "top", "x") == 0 && symlinkat("d/f", src, "l") == 0, "a source tree");
	box_err_init(&e);
	ok(box_sbcp_copy(src, topfd, "out", 1 << 20, (uid_t)-1, (gid_t)-1, &st, &e) == 0,
	   "it is copied to an absent target");
	is_int(st.files, 2, "... 2 files");
	is_int(st.dirs, 1, "... 1 directory");
	is_int(st.links, 1, "... 1 symlink");
	is_int(st.bytes, 6, "... 6 bytes");
	dst = openat(topfd, "out", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ok(dst >= 0 && box_archive_tree_digest(src, a, &e) == 0 &&
	   box_archive_tree_digest(dst, b, &e) == 0 && strcmp(a, b) == 0,
	   "... and the copy has the source's tree digest");
	if (dst >= 0)
		close(dst);
	ok(mkdirat(topfd, "empty", 0755) == 0 && copy(src, "empty", 1 << 20, &e) == BOX_OK &&
	   faccessat(topfd, "empty/d/f", F_OK, 0) == 0, "an empty directory is replaced");
	is_int(copy(src, "out", 1 << 20, &e), BOX_E_CONFLICT, "a target with entries is a conflict");
	ok(put(topfd, "afile", "x") == 0, "a file");
	is_int(copy(src, "afile", 1 << 20, &e), BOX_E_CONFLICT, "... as a target is a conflict");
	is_int(copy(src, "a/b", 1 << 20, &e), BOX_E_INVALID, "a target name with a slash");
	is_int(copy(src, "..", 1 << 20, &e), BOX_E_INVALID, "... or ..");
	is_int(copy(src, "small", 5, &e), BOX_E_LIMIT, "over max_bytes");
	is_str(e.limit, "bytes", "... the limit is bytes");
	ok(faccessat(topfd, "small", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && leftovers() == 0,
	   "... and nothing is left");
	close(src);
}

static void test_hostile(void)
{
	static const struct {
		const char *what;
		enum box_code code;
		const char *limit;
	} want[] = {
		{ "a symlink out", BOX_E_POLICY, "" },
		{ "a symlink climbing out", BOX_E_POLICY, "" },
		{ "a newline in a name", BOX_E_INVALID, "" },
		{ "65 levels", BOX_E_LIMIT, "depth" },
		{ "a sparse file over the bound", BOX_E_LIMIT, "bytes" },
		{ "10001 entries", BOX_E_LIMIT, "entries" },
		{ "a FIFO", BOX_E_INVALID, "" },
	};
	struct box_err e;
	size_t k;

	for (k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		int src = fresh("h"), fd, i, rc = 0;
		char name[32];

		switch (k) {
		case 0: rc = symlinkat("/etc", src, "out"); break;
		case 1: rc = mkdirat(src, "a", 0755) | symlinkat("../../etc", src, "a/up"); break;
		case 2: rc = put(src, "a\nb", "x"); break;
		case 3:
			for (i = 0, fd = dup(src); i < 65 && fd >= 0; i++) {
				int sub = mkdirat(fd, "d", 0755) == 0 ?
					  openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

				close(fd);
				fd = sub;
			}
			rc = fd < 0 ? -1 : close(fd);
			break;
		case 4:
			fd = openat(src, "sparse", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
			rc = fd < 0 || ftruncate(fd, (off_t)10 << 30) < 0 ? -1 : close(fd);
			break;
		case 5:
			for (i = 0; i < 10001 && rc == 0; i++) {
				box_fmt(name, sizeof(name), "f%d", i);
				rc = put(src, name, "");
			}
			break;
		case 6: rc = mkfifoat(src, "p", 0644); break;
		}
		ok(rc == 0, "a source with %s", want[k].what);
		is_int(copy(src, "got", (int64_t)1 << 30, &e), want[k].code, "... is refused");
		is_str(e.limit, want[k].limit, "... with its limit");
		ok(!strchr(e.message, '\n'), "... in a one-line message");
		ok(faccessat(topfd, "got", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && leftovers() == 0,
		   "... and nothing is left");
		close(src);
	}
}

int main(void)
{
	char cmd[128];

	box_fmt(top, sizeof(top), "/tmp/t-sbcp-XXXXXX");
	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 1;
	}
	topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	test_copy();
	test_hostile();
	close(topfd);
	box_fmt(cmd, sizeof(cmd), "rm -rf %s", top);
	ok(system(cmd) == 0, "the scratch directory is removed");
	return done_testing();
}
