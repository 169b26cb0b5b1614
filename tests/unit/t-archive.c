#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "boxarchive.h"
#include "fswalk.h"
#include "sha256.h"
#include "tap.h"
#include "banned.h"

static char top[64];
static int topfd = -1;
static unsigned int xflags;     /* not 0: the harness goes through the _ex functions */
static const char sentinel[] = "sentinel: must stay byte-identical\n";

/* ------------------------------------------------------------------ file helpers */

static int put(int dfd, const char *name, const char *data, mode_t mode)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	size_t n = strlen(data);

	if (fd < 0)
		return -1;
	if (write(fd, data, n) != (ssize_t)n) {
		close(fd);
		return -1;
	}
	if (fchmod(fd, mode) < 0) {
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

static int64_t file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) < 0 ? -1 : (int64_t)sb.st_size;
}

static void sha_file(const char *path, char hex[BOX_SHA256_HEX_LEN + 1])
{
	struct box_err err;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	hex[0] = 0;
	if (fd >= 0 && box_sha256_fd(fd, hex, NULL, &err) < 0)
		hex[0] = 0;
	if (fd >= 0)
		close(fd);
}

/* Only regular files 0644/0755 and directories 0755 below fd: what the extractor may leave. */
static int tree_is_safe(int fd, int depth)
{
	struct dirent *de;
	int ok = 1, dfd;
	DIR *d;

	if (depth > 80)
		return 0;
	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d)
		return 0;
	while (ok && (de = readdir(d))) {
		struct stat sb;
		int m;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(fd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
			ok = 0;
			break;
		}
		m = (int)(sb.st_mode & 07777);
		if (S_ISLNK(sb.st_mode) && (xflags & BOX_ARCHIVE_SYMLINKS)) {
			ok = 1;
		} else if (S_ISREG(sb.st_mode)) {
			ok = m == 0644 || m == 0755;
		} else if (S_ISDIR(sb.st_mode) && m == 0755) {
			int sub = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);

			ok = sub >= 0 && tree_is_safe(sub, depth + 1);
			if (sub >= 0)
				close(sub);
		} else {
			ok = 0;
		}
	}
	closedir(d);
	return ok;
}

/* top holds exactly "sentinel" (intact) and "arc": nothing was written next to the dest. */
static int top_is_clean(void)
{
	int dfd = openat(topfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	char buf[256];
	int n = 0, ok = 1;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n++;
		if (strcmp(de->d_name, "sentinel") && strcmp(de->d_name, "arc"))
			ok = 0;
	}
	closedir(d);
	return ok && n == 2 && get(topfd, "sentinel", buf, sizeof(buf)) ==
		(int)strlen(sentinel) && !strcmp(buf, sentinel) && mode_of(topfd, "sentinel") == 0600;
}

static void arc_path(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/arc/%s", top, name);
}

/* ------------------------------------------------------------------ archive writers */

enum { FMT_PAX, FMT_GNU, FMT_ZIP };
enum { FLT_NONE, FLT_GZIP, FLT_XZ, FLT_BZIP2 };

struct ent {
	const char *path;
	unsigned int type;      /* AE_IF*, 0 for a regular file */
	unsigned int perm;      /* 0 for 0644 */
	const char *data;
	const char *symlink;
	const char *hardlink;
};

static struct archive *writer(int fmt, int flt)
{
	struct archive *a = archive_write_new();
	int r = ARCHIVE_OK;

	if (fmt == FMT_ZIP)
		r = archive_write_set_format_zip(a);
	else if (fmt == FMT_GNU)
		r = archive_write_set_format_gnutar(a);
	else
		r = archive_write_set_format_pax(a);
	if (r == ARCHIVE_OK && flt == FLT_GZIP)
		r = archive_write_add_filter_gzip(a);
	else if (r == ARCHIVE_OK && flt == FLT_XZ)
		r = archive_write_add_filter_xz(a);
	else if (r == ARCHIVE_OK && flt == FLT_BZIP2)
		r = archive_write_add_filter_bzip2(a);
	if (r != ARCHIVE_OK) {
		archive_write_free(a);
		return NULL;
	}
	return a;
}

static int write_ents(struct archive *a, const struct ent *v, size_t n)
{
	struct archive_entry *e = archive_entry_new();
	int ret = 0;

	for (size_t i = 0; i < n && !ret; i++) {
		unsigned int type = v[i].type ? v[i].type : AE_IFREG;
		size_t len = v[i].data ? strlen(v[i].data) : 0;

		archive_entry_clear(e);
		archive_entry_copy_pathname(e, v[i].path);
		archive_entry_set_filetype(e, type);
		archive_entry_set_perm(e, v[i].perm ? v[i].perm : (type == AE_IFDIR ? 0755 : 0644));
		archive_entry_set_size(e, type == AE_IFREG ? (la_int64_t)len : 0);
		if (type == AE_IFCHR || type == AE_IFBLK)
			archive_entry_set_rdev(e, makedev(1, 3));
		if (v[i].symlink)
			archive_entry_copy_symlink(e, v[i].symlink);
		if (v[i].hardlink) {
			archive_entry_copy_hardlink(e, v[i].hardlink);
			archive_entry_set_size(e, 0);
		}
		if (archive_write_header(a, e) < ARCHIVE_WARN)
			ret = -1;
		else if (len && !v[i].hardlink &&
			 archive_write_data(a, v[i].data, len) != (la_ssize_t)len)
			ret = -1;
	}
	archive_entry_free(e);
	return ret;
}

/* Writes the entries as an archive named name under arc/; 0, or -1 (-2: filter missing). */
static int make_arc(const char *name, int fmt, int flt, const struct ent *v, size_t n)
{
	char path[256];
	struct archive *a = writer(fmt, flt);
	int r;

	if (!a)
		return -2;
	arc_path(path, sizeof(path), name);
	if (archive_write_open_filename(a, path) != ARCHIVE_OK) {
		archive_write_free(a);
		return -1;
	}
	r = write_ents(a, v, n);
	if (archive_write_close(a) != ARCHIVE_OK)
		r = -1;
	archive_write_free(a);
	return r;
}

/* ------------------------------------------------------------------ extraction harness */

static struct box_archive_limits deflim(void)
{
	struct box_archive_limits lim;

	box_archive_default_limits(INT64_C(1) << 40, &lim);
	return lim;
}

/* Extracts arc/name into a fresh top/dest; returns the result, dest left in place. */
static int extract_to_dest(const char *name, const struct box_archive_limits *lim,
			   struct box_archive_stats *st, struct box_err *err, int *destfd)
{
	char path[256];
	int infd, r;

	box_err_init(err);
	if (mkdirat(topfd, "dest", 0700) < 0)
		return -100;
	*destfd = openat(topfd, "dest", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	arc_path(path, sizeof(path), name);
	infd = open(path, O_RDONLY | O_CLOEXEC);
	if (infd < 0 || *destfd < 0)
		return -100;
	if (xflags)
		r = box_archive_extract_ex(infd, *destfd, lim, xflags, st, err);
	else
		r = box_archive_extract(infd, *destfd, lim, st, err);
	close(infd);
	return r;
}

/* The same through a pipe fed by a child: a non-seekable input. */
static int extract_piped(const char *name, const struct box_archive_limits *lim,
			 struct box_archive_stats *st, struct box_err *err, int *destfd)
{
	char path[256];
	int p[2], r, status;
	pid_t pid;

	box_err_init(err);
	if (mkdirat(topfd, "dest", 0700) < 0 || pipe(p) < 0)
		return -100;
	*destfd = openat(topfd, "dest", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	arc_path(path, sizeof(path), name);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char buf[65536];
		ssize_t n;
		int fd = open(path, O_RDONLY);

		close(p[0]);
		while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
			if (write(p[1], buf, (size_t)n) != n)
				break;
		_exit(0);
	}
	close(p[1]);
	r = box_archive_extract(p[0], *destfd, lim, st, err);
	close(p[0]);
	waitpid(pid, &status, 0);
	return r;
}

static void drop_dest(int destfd)
{
	struct box_err err;

	if (destfd >= 0)
		close(destfd);
	box_err_init(&err);
	if (box_fswalk_remove(topfd, "dest", &err) < 0)
		printf("# remove_tree: %s\n", err.message);
}

/*
 * One hostile archive: refused with want, the message naming the entry (mention), only safe
 * files left in dest, dest removable, nothing written outside.
 */
static void refused(const char *label, const char *name, const struct box_archive_limits *lim,
		    enum box_code want, const char *mention)
{
	struct box_archive_limits dl = deflim();
	struct box_archive_stats st;
	struct box_err err;
	int destfd = -1, r;

	r = extract_to_dest(name, lim ? lim : &dl, &st, &err, &destfd);
	is_int(r, -1, "%s: refused", label);
	if (!is_int(err.code, want, "%s: %s", label, box_err_code_name(want)))
		printf("#   message: %s\n", err.message);
	if (mention && !ok(strstr(err.message, mention) != NULL, "%s: message names %s", label,
			   mention))
		printf("#   message: %s\n", err.message);
	ok(destfd >= 0 && tree_is_safe(destfd, 0), "%s: dest holds only 0644/0755 files and dirs",
	   label);
	drop_dest(destfd);
	ok(!exists(topfd, "dest"), "%s: dest removed by box_fswalk_remove", label);
	ok(top_is_clean(), "%s: nothing outside dest changed", label);
}

static void hostile(const char *label, int fmt, const struct ent *v, size_t n,
		    enum box_code want, const char *mention)
{
	if (!ok(make_arc("h", fmt, fmt == FMT_ZIP ? FLT_NONE : FLT_GZIP, v, n) == 0,
		"%s: archive built", label))
		return;
	refused(label, "h", NULL, want, mention);
}

#define N(v) (sizeof(v) / sizeof((v)[0]))

static void test_hostile_paths(void)
{
	char abspath[128];

	snprintf(abspath, sizeof(abspath), "%s/abs-escape", top);
	{
		struct ent v[] = { { "ok.txt", 0, 0, "fine", NULL, NULL },
				   { abspath, 0, 0, "pwned", NULL, NULL } };
		hostile("absolute path", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "abs-escape");
	}
	{
		struct ent v[] = { { "../x", 0, 0, "pwned", NULL, NULL } };
		hostile("../x", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "../x");
	}
	{
		struct ent v[] = { { "a/", AE_IFDIR, 0, NULL, NULL, NULL },
				   { "a/../../x", 0, 0, "pwned", NULL, NULL } };
		hostile("a/../../x", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "a/../../x");
	}
	{
		struct ent v[] = { { "a/./b", 0, 0, "x", NULL, NULL } };
		hostile("a/./b", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "a/./b");
	}
	{
		struct ent v[] = { { "..\\x", 0, 0, "pwned", NULL, NULL } };
		hostile("backslash", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "..\\x");
	}
	{
		struct ent v[] = { { "a\001b", 0, 0, "x", NULL, NULL } };
		hostile("control char", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "a?b");
	}
	{
		struct ent v[] = { { "a\nb", 0, 0, "x", NULL, NULL } };
		hostile("newline", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "a?b");
	}
	{
		struct ent v[] = { { "del\177", 0, 0, "x", NULL, NULL } };
		hostile("DEL char", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "del?");
	}
	{
		struct ent v[] = { { "a//b", 0, 0, "x", NULL, NULL } };
		hostile("empty component", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "a//b");
	}
	{
		char longc[300];

		memset(longc, 'n', 256);
		longc[256] = 0;
		struct ent v[] = { { longc, 0, 0, "x", NULL, NULL } };
		hostile("256-byte component", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "nnnn");
	}
	{
		struct ent v[] = { { "f", 0, 0, "one", NULL, NULL },
				   { "f", 0, 0, "two", NULL, NULL } };
		hostile("duplicate file", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "duplicate");
	}
	{
		struct ent v[] = { { "./f", 0, 0, "one", NULL, NULL },
				   { "f", 0, 0, "two", NULL, NULL } };
		hostile("duplicate ./f and f", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "duplicate");
	}
	{
		struct ent v[] = { { "d/", AE_IFDIR, 0, NULL, NULL, NULL },
				   { "d/", AE_IFDIR, 0, NULL, NULL, NULL } };
		hostile("duplicate dir", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "duplicate");
	}
	{
		struct ent v[] = { { "f", 0, 0, "file", NULL, NULL },
				   { "f/", AE_IFDIR, 0, NULL, NULL, NULL } };
		hostile("file then dir", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "f");
	}
	{
		struct ent v[] = { { "d/", AE_IFDIR, 0, NULL, NULL, NULL },
				   { "d", 0, 0, "file", NULL, NULL } };
		hostile("dir then file", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "duplicate");
	}
	{
		struct ent v[] = { { "d/x", 0, 0, "x", NULL, NULL },
				   { "d", 0, 0, "file", NULL, NULL } };
		hostile("implicit dir then file", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "d");
	}
	{
		struct ent v[] = { { "f", 0, 0, "file", NULL, NULL },
				   { "f/x", 0, 0, "x", NULL, NULL } };
		hostile("file then child", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "f/x");
	}
}

static void test_hostile_types(void)
{
	{
		struct ent v[] = { { "target", 0, 0, "t", NULL, NULL },
				   { "l", AE_IFLNK, 0777, NULL, "target", NULL } };
		hostile("symlink inside", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "symlink");
	}
	{
		struct ent v[] = { { "l", AE_IFLNK, 0777, NULL, "/etc", NULL },
				   { "l/pwned", 0, 0, "x", NULL, NULL } };
		hostile("symlink outside", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "l");
	}
	{
		struct ent v[] = { { "up", AE_IFLNK, 0777, NULL, "../..", NULL } };
		hostile("symlink ..", FMT_GNU, v, N(v), BOX_E_INTEGRITY, "up");
	}
	{
		struct ent v[] = { { "f", 0, 0, "data", NULL, NULL },
				   { "h", 0, 0, NULL, NULL, "f" } };
		hostile("hard link", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "hard link");
	}
	{
		struct ent v[] = { { "h", 0, 0, NULL, NULL, "/etc/passwd" } };
		hostile("hard link outside", FMT_GNU, v, N(v), BOX_E_INTEGRITY, "h");
	}
	{
		struct ent v[] = { { "null", AE_IFCHR, 0666, NULL, NULL, NULL } };
		hostile("char device", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "null");
	}
	{
		struct ent v[] = { { "disk", AE_IFBLK, 0660, NULL, NULL, NULL } };
		hostile("block device", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "disk");
	}
	{
		struct ent v[] = { { "fifo", AE_IFIFO, 0644, NULL, NULL, NULL } };
		hostile("FIFO", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "fifo");
	}
	{
		struct ent v[] = { { "ok", 0, 0, "fine", NULL, NULL },
				   { "../zip-escape", 0, 0, "pwned", NULL, NULL } };
		hostile("zip with ..", FMT_ZIP, v, N(v), BOX_E_INTEGRITY, "../zip-escape");
	}
	{
		struct ent v[] = { { "/tmp/zip-abs", 0, 0, "pwned", NULL, NULL } };
		hostile("zip absolute", FMT_ZIP, v, N(v), BOX_E_INTEGRITY, "zip-abs");
	}
	{
		struct ent v[] = { { "zl", AE_IFLNK, 0777, NULL, "/etc/passwd", NULL } };
		hostile("zip symlink", FMT_ZIP, v, N(v), BOX_E_INTEGRITY, "zl");
	}
}

/* Set-id and sticky bits are dropped and modes normalised, whatever the umask. */
static void test_modes(void)
{
	struct ent v[] = {
		{ "suid", 0, 04755, "#!/bin/sh\n", NULL, NULL },
		{ "sgid", 0, 02644, "g", NULL, NULL },
		{ "sticky/", AE_IFDIR, 01777, NULL, NULL, NULL },
		{ "sticky/uonly", 0, 0100, "x", NULL, NULL },
		{ "ro", 0, 0400, "r", NULL, NULL },
		{ "ww", 0, 0666, "w", NULL, NULL },
		{ "./dotslash", 0, 0644, "d", NULL, NULL },
		{ "implicit/dir/f", 0, 0644, "i", NULL, NULL },
		{ "implicit/", AE_IFDIR, 0700, NULL, NULL, NULL },
	};
	struct box_archive_limits lim = deflim();
	struct box_archive_stats st;
	struct box_err err;
	mode_t old = umask(077);
	int destfd = -1;
	char buf[64];

	ok(make_arc("modes", FMT_PAX, FLT_GZIP, v, N(v)) == 0, "modes: archive built");
	if (!is_int(extract_to_dest("modes", &lim, &st, &err, &destfd), 0, "modes: extracted"))
		printf("#   %s\n", err.message);
	is_int(mode_of(destfd, "suid"), 0755, "setuid 04755 -> 0755");
	is_int(mode_of(destfd, "sgid"), 0644, "setgid 02644 -> 0644");
	is_int(mode_of(destfd, "sticky"), 0755, "sticky dir 01777 -> 0755");
	is_int(mode_of(destfd, "sticky/uonly"), 0755, "0100 -> 0755");
	is_int(mode_of(destfd, "ro"), 0644, "0400 -> 0644");
	is_int(mode_of(destfd, "ww"), 0644, "0666 -> 0644");
	is_int(mode_of(destfd, "implicit"), 0755, "implicit dir 0755 under umask 077");
	is_int(mode_of(destfd, "implicit/dir"), 0755, "nested implicit dir 0755");
	ok(get(destfd, "dotslash", buf, sizeof(buf)) == 1 && !strcmp(buf, "d"),
	   "./ prefix dropped");
	ok(get(destfd, "implicit/dir/f", buf, sizeof(buf)) == 1 && !strcmp(buf, "i"),
	   "file under implicit dirs");
	is_int(st.files, 7, "stats: 7 files");
	is_int(st.dirs, 2, "stats: 2 explicit dirs (the later entry for an implicit one is fine)");
	ok(tree_is_safe(destfd, 0), "modes: tree safe");
	umask(old);
	drop_dest(destfd);
}

/* Patches a ustar header's size field (and its checksum). */
static void tar_set_size(unsigned char *h, unsigned long size)
{
	unsigned int sum = 0;
	char tmp[16];

	snprintf(tmp, sizeof(tmp), "%011lo", size);
	memcpy(h + 124, tmp, 12);
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf(tmp, sizeof(tmp), "%06o", sum);
	memcpy(h + 148, tmp, 7);
	h[155] = ' ';
}

static void test_lying_sizes(void)
{
	struct ent v[] = { { "small", 0, 0, "0123456789", NULL, NULL } };
	static unsigned char mem[1 << 16];
	struct box_archive_limits lim = deflim();
	struct archive *a;
	size_t used = 0;
	char path[256];
	int fd;

	/* a tar header claiming 1 MiB for 10 bytes of data */
	a = archive_write_new();
	archive_write_set_format_ustar(a);
	archive_write_open_memory(a, mem, sizeof(mem), &used);
	write_ents(a, v, 1);
	archive_write_close(a);
	archive_write_free(a);
	tar_set_size(mem, 1UL << 20);
	arc_path(path, sizeof(path), "lie.tar");
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ok(fd >= 0 && write(fd, mem, used) == (ssize_t)used && close(fd) == 0,
	   "tar with an overstated size built");
	refused("tar size overstated", "lie.tar", &lim, BOX_E_INTEGRITY, "small");

	/* a zip whose descriptor and central directory claim 100 bytes for 200 MiB */
	{
		static char zeros[1 << 20];
		struct box_archive_stats st;
		struct box_err err;
		int destfd = -1;
		struct archive_entry *e = archive_entry_new();
		unsigned char *z;
		int64_t n;

		a = writer(FMT_ZIP, FLT_NONE);
		arc_path(path, sizeof(path), "lie.zip");
		if (!ok(a && archive_write_open_filename(a, path) == ARCHIVE_OK, "zip: writer open")) {
			if (a)
				archive_write_free(a);
			archive_entry_free(e);
			return;
		}
		archive_entry_copy_pathname(e, "zeros");
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_size(e, 200 << 20);
		archive_write_header(a, e);
		for (int i = 0; i < 200; i++)
			archive_write_data(a, zeros, sizeof(zeros));
		archive_write_close(a);
		archive_write_free(a);
		archive_entry_free(e);
		n = file_size(path);
		z = malloc((size_t)n);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (z && fd >= 0 && read(fd, z, (size_t)n) == n) {
			int patched = 0;

			for (int64_t i = 0; i + 28 < n; i++) {
				if (!memcmp(z + i, "PK\007\010", 4)) {
					z[i + 12] = 100, z[i + 13] = z[i + 14] = z[i + 15] = 0;
					patched++;
				}
				if (!memcmp(z + i, "PK\001\002", 4)) {
					z[i + 24] = 100, z[i + 25] = z[i + 26] = z[i + 27] = 0;
					patched++;
				}
			}
			is_int(patched, 2, "zip sizes patched to 100");
			ok(pwrite(fd, z, (size_t)n, 0) == n, "zip rewritten");
		}
		free(z);
		if (fd >= 0)
			close(fd);
		refused("zip sizes that disagree, seekable", "lie.zip", &lim, BOX_E_INTEGRITY,
			"zeros");
		/* through a pipe the zip is read as a stream: no size is known before the data */
		lim.max_bytes = 1 << 20;
		is_int(extract_piped("lie.zip", &lim, &st, &err, &destfd), -1,
		       "zip bomb through a pipe, 1 MiB cap: refused");
		is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
		is_str(err.limit, "bytes", "  limit bytes");
		ok(st.bytes <= 1 << 20, "  at most 1 MiB written (%lld)", (long long)st.bytes);
		ok(st.archive_bytes < n / 2, "  stopped early (read %lld of %lld bytes)",
		   (long long)st.archive_bytes, (long long)n);
		ok(tree_is_safe(destfd, 0), "  dest safe");
		drop_dest(destfd);
		lim = deflim();
		is_int(extract_piped("lie.zip", &lim, &st, &err, &destfd), -1,
		       "zip with a lying descriptor through a pipe, no cap hit: refused");
		if (!is_int(err.code, BOX_E_INTEGRITY, "  integrity_failed"))
			printf("#   %s\n", err.message);
		drop_dest(destfd);
		ok(top_is_clean(), "  nothing outside dest");
	}
}

static void test_bomb(void)
{
	static char zeros[1 << 20];
	int mb = 200;
	struct box_archive_limits lim = deflim();
	struct box_archive_stats st;
	struct archive_entry *e;
	struct archive *a;
	struct box_err err;
	char path[256];
	int64_t size;
	int destfd = -1;

	a = writer(FMT_PAX, FLT_GZIP);
	arc_path(path, sizeof(path), "bomb.tar.gz");
	if (!ok(a && archive_write_open_filename(a, path) == ARCHIVE_OK, "bomb: writer open")) {
		if (a)
			archive_write_free(a);
		return;
	}
	/* two entries: one with an honest header, one in a GNU-sparse-free plain tar that
	 * the header pre-check cannot see coming is the zip case above */
	e = archive_entry_new();
	archive_entry_copy_pathname(e, "zeros");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)mb << 20);
	archive_write_header(a, e);
	for (int i = 0; i < mb; i++)
		archive_write_data(a, zeros, sizeof(zeros));
	archive_write_close(a);
	archive_write_free(a);
	archive_entry_free(e);
	size = file_size(path);
	ok(size > 0 && size < ((int64_t)mb << 20) / 500, "bomb: %d MB of zeros in %lld bytes",
	   mb, (long long)size);
	lim.max_bytes = 10 << 20;
	is_int(extract_to_dest("bomb.tar.gz", &lim, &st, &err, &destfd), -1, "bomb refused");
	is_int(err.code, BOX_E_LIMIT, "bomb: limit_exceeded");
	is_str(err.limit, "bytes", "bomb: limit bytes");
	ok(err.has_configured && err.configured == 10 << 20, "bomb: configured 10 MiB");
	ok(st.bytes <= 10 << 20, "bomb: at most 10 MiB written (%lld)", (long long)st.bytes);
	ok(st.archive_bytes < size / 2, "bomb: stopped early (read %lld of %lld bytes)",
	   (long long)st.archive_bytes, (long long)size);
	drop_dest(destfd);
	ok(top_is_clean(), "bomb: nothing outside dest");

	/* many small files, each header honest, past the total cap */
	{
		char name[32], data[4097];
		struct ent v[40];

		memset(data, 'z', 4096);
		data[4096] = 0;
		for (int i = 0; i < 40; i++) {
			snprintf(name, sizeof(name), "f%02d", i);
			v[i] = (struct ent){ strdup(name), 0, 0, data, NULL, NULL };
		}
		ok(make_arc("many.tar.gz", FMT_PAX, FLT_GZIP, v, 40) == 0, "40 x 4 KiB built");
		lim.max_bytes = 100000;
		refused("total bytes past the cap", "many.tar.gz", &lim, BOX_E_LIMIT, "f24");
		lim.max_bytes = 40 * 4096;
		is_int(extract_to_dest("many.tar.gz", &lim, &st, &err, &destfd), 0,
		       "exactly at the byte cap: accepted");
		is_int(st.bytes, 40 * 4096, "  all bytes counted");
		drop_dest(destfd);
		for (int i = 0; i < 40; i++)
			free((char *)v[i].path);
	}
}

static void test_counts(void)
{
	struct box_archive_limits lim = deflim();
	struct box_archive_stats st;
	struct box_err err;
	struct archive_entry *e;
	struct archive *a;
	int destfd = -1;
	char path[256], name[32];

	/* 10,001 empty files */
	a = writer(FMT_PAX, FLT_GZIP);
	arc_path(path, sizeof(path), "count.tar.gz");
	if (!ok(a && archive_write_open_filename(a, path) == ARCHIVE_OK, "count: writer open")) {
		if (a)
			archive_write_free(a);
		return;
	}
	e = archive_entry_new();
	for (int i = 0; i < 10001; i++) {
		snprintf(name, sizeof(name), "e%05d", i);
		archive_entry_clear(e);
		archive_entry_copy_pathname(e, name);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_size(e, 0);
		archive_write_header(a, e);
	}
	archive_write_close(a);
	archive_write_free(a);
	archive_entry_free(e);
	refused("10,001 entries", "count.tar.gz", NULL, BOX_E_LIMIT, "10000");
	{
		struct ent v[] = { { "a", 0, 0, "", NULL, NULL }, { "b", 0, 0, "", NULL, NULL },
				   { "c/", AE_IFDIR, 0, NULL, NULL, NULL } };

		ok(make_arc("three", FMT_PAX, FLT_GZIP, v, 3) == 0, "3 entries built");
		lim.max_entries = 3;
		is_int(extract_to_dest("three", &lim, &st, &err, &destfd), 0, "3 entries, cap 3");
		drop_dest(destfd);
		lim.max_entries = 2;
		refused("3 entries, cap 2", "three", &lim, BOX_E_LIMIT, NULL);
	}
}

static void test_path_caps(void)
{
	struct box_archive_limits lim = deflim();
	struct box_archive_stats st;
	struct box_err err;
	int destfd = -1;
	char p[6000], q[6000];
	size_t n = 0;

	/* 5000 bytes: 25 components of 199 bytes + slashes */
	for (int i = 0; i < 25; i++) {
		memset(p + n, 'a' + i % 26, 199);
		n += 199;
		p[n++] = i == 24 ? 0 : '/';
	}
	{
		struct ent v[] = { { p, 0, 0, "deep", NULL, NULL } };

		is_int((int)strlen(p), 4999, "path of 4999 bytes");
		hostile("path of 4999 bytes", FMT_PAX, v, 1, BOX_E_LIMIT, NULL);
	}
	/* exactly 4096: 17 components of 240 bytes */
	n = 0;
	for (int i = 0; i < 17; i++) {
		memset(q + n, 'A' + i, 240);
		n += 240;
		q[n++] = i == 16 ? 0 : '/';
	}
	{
		struct ent v[] = { { q, 0, 0, "edge", NULL, NULL } };
		char buf[16];
		int fd;

		is_int((int)strlen(q), 4096, "path of 4096 bytes");
		ok(make_arc("p4096", FMT_PAX, FLT_GZIP, v, 1) == 0, "4096 built");
		is_int(extract_to_dest("p4096", &lim, &st, &err, &destfd), 0,
		       "path of 4096 bytes accepted");
		for (int i = 0; i < 16; i++)
			q[241 * i + 240] = 0;
		fd = destfd;
		for (int i = 0; i < 16 && fd >= 0; i++) {
			int sub = openat(fd, q + 241 * i, O_RDONLY | O_DIRECTORY);

			if (fd != destfd)
				close(fd);
			fd = sub;
		}
		ok(fd >= 0 && get(fd, q + 241 * 16, buf, sizeof(buf)) == 4 && !strcmp(buf, "edge"),
		   "  its content is there");
		if (fd >= 0 && fd != destfd)
			close(fd);
		drop_dest(destfd);
		lim.max_path = 4095;
		for (int i = 0; i < 16; i++)
			q[241 * i + 240] = '/';
		refused("4096 bytes with max_path 4095", "p4096", &lim, BOX_E_LIMIT, NULL);
		lim = deflim();
	}
	/* depth 65 and 64 */
	n = 0;
	for (int i = 0; i < 65; i++) {
		p[n++] = 'd';
		p[n++] = '/';
	}
	p[n - 1] = 0;
	{
		struct ent v[] = { { p, 0, 0, "x", NULL, NULL } };

		hostile("depth 65", FMT_PAX, v, 1, BOX_E_LIMIT, NULL);
		p[n - 3] = 0;
		ok(make_arc("d64", FMT_PAX, FLT_GZIP, v, 1) == 0, "depth 64 built");
		is_int(extract_to_dest("d64", &lim, &st, &err, &destfd), 0, "depth 64 accepted");
		drop_dest(destfd);
	}
	{
		struct ent v[] = { { "a/b/c/d", 0, 0, "x", NULL, NULL } };
		struct box_err e2;

		ok(make_arc("d4", FMT_PAX, FLT_GZIP, v, 1) == 0, "depth 4 built");
		lim.max_depth = 3;
		box_err_init(&e2);
		is_int(extract_to_dest("d4", &lim, &st, &e2, &destfd), -1, "depth 4, cap 3");
		is_str(e2.limit, "depth", "  limit depth");
		drop_dest(destfd);
	}
}

static void test_formats(void)
{
	struct ent v[] = { { "a.txt", 0, 0, "hello", NULL, NULL } };
	struct box_archive_limits lim = deflim();
	struct box_archive_stats st;
	struct box_err err;
	char path[256];
	int destfd = -1, r, fd;

	r = make_arc("x.tar.xz", FMT_PAX, FLT_XZ, v, 1);
	if (r == -2)
		tap_skip("libarchive has no xz writer");
	else
		refused("tar.xz", "x.tar.xz", NULL, BOX_E_INTEGRITY, NULL);
	r = make_arc("x.tar.bz2", FMT_PAX, FLT_BZIP2, v, 1);
	if (r == -2)
		tap_skip("libarchive has no bzip2 writer");
	else
		refused("tar.bz2", "x.tar.bz2", NULL, BOX_E_INTEGRITY, NULL);

	arc_path(path, sizeof(path), "garbage");
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	for (int i = 0; i < 100 && fd >= 0; i++)
		if (write(fd, "not an archive at all, just text\n", 33) != 33)
			break;
	if (fd >= 0)
		close(fd);
	refused("garbage", "garbage", NULL, BOX_E_INTEGRITY, NULL);

	arc_path(path, sizeof(path), "empty");
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	refused("empty input", "empty", NULL, BOX_E_INTEGRITY, NULL);

	/* a truncated tar.gz */
	ok(make_arc("t.tar.gz", FMT_PAX, FLT_GZIP, v, 1) == 0, "tar.gz built");
	arc_path(path, sizeof(path), "t.tar.gz");
	ok(truncate(path, file_size(path) / 2) == 0, "truncated to half");
	refused("truncated tar.gz", "t.tar.gz", NULL, BOX_E_INTEGRITY, NULL);

	/* the accepted formats: plain tar, tar.gz (pax and GNU), zip */
	ok(make_arc("plain.tar", FMT_PAX, FLT_NONE, v, 1) == 0, "plain tar built");
	is_int(extract_to_dest("plain.tar", &lim, &st, &err, &destfd), 0, "plain tar accepted");
	drop_dest(destfd);
	ok(make_arc("gnu.tgz", FMT_GNU, FLT_GZIP, v, 1) == 0, "gnu tar.gz built");
	is_int(extract_to_dest("gnu.tgz", &lim, &st, &err, &destfd), 0, "GNU tar.gz accepted");
	drop_dest(destfd);
	{
		struct ent z[] = { { "dir/", AE_IFDIR, 0, NULL, NULL, NULL },
				   { "dir/a.txt", 0, 0755, "zipped", NULL, NULL } };
		char buf[16];

		ok(make_arc("ok.zip", FMT_ZIP, FLT_NONE, z, 2) == 0, "zip built");
		r = extract_to_dest("ok.zip", &lim, &st, &err, &destfd);
		if (!is_int(r, 0, "zip accepted"))
			printf("#   %s\n", err.message);
		ok(get(destfd, "dir/a.txt", buf, sizeof(buf)) == 6 && !strcmp(buf, "zipped"),
		   "  zip content");
		is_int(mode_of(destfd, "dir/a.txt"), 0755, "  zip mode 0755");
		drop_dest(destfd);
	}
	{
		struct box_archive_limits bad = deflim();

		bad.max_entries = 0;
		box_err_init(&err);
		is_int(box_archive_extract(0, topfd, &bad, NULL, &err), -1, "max_entries 0");
		is_int(err.code, BOX_E_INVALID, "  invalid_request");
		ok(top_is_clean(), "  nothing written");
	}
}

/* ------------------------------------------------------------------ pack, digest, remove */

static int make_src(const char *name, int reverse, int64_t mtime)
{
	static const char *dirs[] = { "bin", "lib", "lib/deep", "lib/deep/er", "empty" };
	static const char *dirs_rev[] = { "empty", "lib", "lib/deep", "lib/deep/er", "bin" };
	static const struct {
		const char *path, *data;
		mode_t mode;
	} files[] = {
		{ "README", "hello\n", 0644 },
		{ "bin/tool", "#!/bin/sh\necho hi\n", 0700 },
		{ "lib/a.lua", "return 1\n", 0600 },
		{ "lib/a.lua.bak", "old\n", 0664 },
		{ "lib/deep/er/x", "", 0644 },
		{ "lib/deep/er/a-name-longer-than-one-hundred-bytes-so-that-the-pax-writer-needs-an-"
		  "extended-header-for-it.txt", "long\n", 0644 },
		{ "caf\303\251.txt", "utf-8 name\n", 0644 },
		{ "sp ace", "s", 0755 },
	};
	int fd, n = (int)N(files), ok_ = 1;
	struct timespec ts[2];

	if (mkdirat(topfd, name, 0755) < 0)
		return -1;
	fd = openat(topfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* the copy: another creation order (so another readdir order), other modes with the
	 * same execute bits */
	for (int i = 0; i < (int)N(dirs); i++) {
		ok_ &= mkdirat(fd, reverse ? dirs_rev[i] : dirs[i], 0700) == 0;
		if (reverse)
			fchmodat(fd, dirs_rev[i], 0751, 0);
	}
	for (int i = 0; i < n; i++) {
		int k = reverse ? n - 1 - i : i;
		mode_t m = files[k].mode;

		if (reverse)
			m = (m & 0111) ? 0711 : 0640;
		ok_ &= put(fd, files[k].path, files[k].data, m) == 0;
	}
	ts[0].tv_sec = ts[1].tv_sec = mtime;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	for (int i = 0; i < n; i++)
		utimensat(fd, files[i].path, ts, AT_SYMLINK_NOFOLLOW);
	for (int i = 0; i < (int)N(dirs); i++)
		utimensat(fd, dirs[i], ts, AT_SYMLINK_NOFOLLOW);
	if (geteuid() == 0 && reverse)
		for (int i = 0; i < n; i++)
			ok_ &= fchownat(fd, files[i].path, 1234, 5678, AT_SYMLINK_NOFOLLOW) == 0;
	close(fd);
	return ok_ ? 0 : -1;
}

static int pack_to(const char *src, const char *out, struct box_archive_stats *st,
		   struct box_err *err)
{
	char path[256];
	int dfd, ofd, r;

	box_err_init(err);
	arc_path(path, sizeof(path), out);
	dfd = openat(topfd, src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ofd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (dfd < 0 || ofd < 0)
		return -100;
	r = xflags ? box_archive_pack_ex(dfd, ofd, xflags, st, err) :
		box_archive_pack(dfd, ofd, st, err);
	close(dfd);
	close(ofd);
	return r;
}

static int digest_of(const char *name, char hex[BOX_ARCHIVE_DIGEST_LEN + 1])
{
	struct box_err err;
	int fd = openat(topfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;

	hex[0] = 0;
	if (fd < 0)
		return -1;
	box_err_init(&err);
	r = box_archive_tree_digest(fd, hex, &err);
	if (r < 0)
		printf("# digest: %s\n", err.message);
	close(fd);
	return r;
}

static void test_pack(void)
{
	struct box_archive_stats st, st2;
	struct box_archive_limits lim;
	struct box_err err;
	char p1[256], h1[65], h2[65], h3[65], h4[65], hdr[10];
	char d1[BOX_ARCHIVE_DIGEST_LEN + 1], d2[BOX_ARCHIVE_DIGEST_LEN + 1];
	char d3[BOX_ARCHIVE_DIGEST_LEN + 1];
	int destfd = -1, fd, r;
	pid_t pid;

	ok(make_src("src", 0, 1700000000) == 0, "source tree made");
	ok(make_src("copy", 1, 12345) == 0, "copy made in another order, other mtimes%s",
	   geteuid() == 0 ? " and owners" : "");
	if (geteuid() != 0)
		tap_skip("not root: copy has the same owners");
	r = pack_to("src", "p1.tgz", &st, &err);
	if (!is_int(r, 0, "pack"))
		printf("#   %s\n", err.message);
	is_int(st.files, 8, "  8 files");
	is_int(st.dirs, 5, "  5 dirs");
	is_int(st.entries, 13, "  13 entries");
	arc_path(p1, sizeof(p1), "p1.tgz");
	is_int(st.archive_bytes, file_size(p1), "  archive_bytes is the file size");
	fd = open(p1, O_RDONLY | O_CLOEXEC);
	ok(fd >= 0 && read(fd, hdr, 10) == 10, "  gzip header read");
	if (fd >= 0)
		close(fd);
	ok((unsigned char)hdr[0] == 0x1f && (unsigned char)hdr[1] == 0x8b && hdr[2] == 8,
	   "  gzip magic, deflate");
	is_int(hdr[3], 0, "  gzip flags 0: no name, no comment, no extra");
	ok(!hdr[4] && !hdr[5] && !hdr[6] && !hdr[7], "  gzip mtime 0");

	is_int(pack_to("src", "p2.tgz", &st2, &err), 0, "pack again");
	is_int(pack_to("copy", "p3.tgz", &st2, &err), 0, "pack the copy");
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct box_archive_stats s4;

		_exit(pack_to("src", "p4.tgz", &s4, &err) == 0 ? 0 : 1);
	}
	ok(pid > 0 && waitpid(pid, &r, 0) == pid && WIFEXITED(r) && WEXITSTATUS(r) == 0,
	   "pack in another process");
	sha_file(p1, h1);
	arc_path(p1, sizeof(p1), "p2.tgz");
	sha_file(p1, h2);
	arc_path(p1, sizeof(p1), "p3.tgz");
	sha_file(p1, h3);
	arc_path(p1, sizeof(p1), "p4.tgz");
	sha_file(p1, h4);
	ok(h1[0] && !strcmp(h1, h2), "reproducible: same sha256 twice");
	is_str(h3, h1, "reproducible: the copy (order, mtimes, owners, 0600/0700 modes) gives the same sha256");
	is_str(h4, h1, "reproducible: another process gives the same sha256");

	/* round trip */
	arc_path(p1, sizeof(p1), "p1.tgz");
	box_archive_default_limits(file_size(p1), &lim);
	r = extract_to_dest("p1.tgz", &lim, &st2, &err, &destfd);
	if (!is_int(r, 0, "extract the pack with the default limits"))
		printf("#   %s\n", err.message);
	is_int(st2.files, 8, "  8 files");
	is_int(st2.dirs, 5, "  5 dirs");
	is_int(st2.bytes, st.bytes, "  same byte count");
	{
		char buf[64];

		ok(get(destfd, "bin/tool", buf, sizeof(buf)) > 0 && !strcmp(buf, "#!/bin/sh\necho hi\n"),
		   "  bin/tool content");
		is_int(mode_of(destfd, "bin/tool"), 0755, "  bin/tool 0700 -> 0755");
		is_int(mode_of(destfd, "lib/a.lua"), 0644, "  lib/a.lua 0600 -> 0644");
		is_int(mode_of(destfd, "lib/a.lua.bak"), 0644, "  0664 -> 0644");
		is_int(mode_of(destfd, "empty"), 0755, "  empty dir 0755");
		ok(get(destfd, "caf\303\251.txt", buf, sizeof(buf)) == 11, "  UTF-8 name kept");
		ok(get(destfd, "lib/deep/er/a-name-longer-than-one-hundred-bytes-so-that-the-pax-"
		       "writer-needs-an-extended-header-for-it.txt", buf, sizeof(buf)) == 5,
		   "  long name kept");
		ok(tree_is_safe(destfd, 0), "  tree safe");
	}
	close(destfd);

	/* tree digests */
	ok(digest_of("src", d1) == 0 && !strncmp(d1, "sha256:", 7) && strlen(d1) == 71,
	   "tree digest: sha256:<64 hex>");
	ok(digest_of("dest", d2) == 0 && !strcmp(d1, d2), "tree digest: same after pack/extract");
	ok(digest_of("copy", d3) == 0 && !strcmp(d1, d3), "tree digest: same for the copy");
	{
		int dfd = openat(topfd, "dest", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		char dx[BOX_ARCHIVE_DIGEST_LEN + 1];

		ok(put(dfd, "README", "hellO\n", 0644) == 0 && digest_of("dest", dx) == 0 &&
		   strcmp(dx, d1), "digest changes with one byte of content");
		ok(put(dfd, "README", "hello\n", 0644) == 0 && digest_of("dest", dx) == 0 &&
		   !strcmp(dx, d1), "  and is back when reverted");
		ok(renameat(dfd, "README", dfd, "READMF") == 0 && digest_of("dest", dx) == 0 &&
		   strcmp(dx, d1), "digest changes with a rename");
		renameat(dfd, "READMF", dfd, "README");
		ok(fchmodat(dfd, "README", 0744, 0) == 0 && digest_of("dest", dx) == 0 &&
		   strcmp(dx, d1), "digest changes with an execute bit");
		ok(fchmodat(dfd, "README", 0600, 0) == 0 && digest_of("dest", dx) == 0 &&
		   !strcmp(dx, d1), "  but not with 0644 -> 0600 (normalised modes)");
		fchmodat(dfd, "README", 0644, 0);
		ok(put(dfd, "extra", "", 0644) == 0 && digest_of("dest", dx) == 0 && strcmp(dx, d1),
		   "digest changes with an extra empty file");
		unlinkat(dfd, "extra", 0);
		ok(unlinkat(dfd, "empty", AT_REMOVEDIR) == 0 && digest_of("dest", dx) == 0 &&
		   strcmp(dx, d1), "digest changes with a missing empty dir");
		mkdirat(dfd, "empty", 0755);
		ok(digest_of("dest", dx) == 0 && !strcmp(dx, d1), "  back");
		ok(unlinkat(dfd, "lib/deep/er/x", 0) == 0 && mkdirat(dfd, "lib/deep/er/x", 0755) == 0 &&
		   digest_of("dest", dx) == 0 && strcmp(dx, d1), "digest changes when a file becomes a dir");
		unlinkat(dfd, "lib/deep/er/x", AT_REMOVEDIR);
		put(dfd, "lib/deep/er/x", "", 0644);
		ok(symlinkat("README", dfd, "link") == 0 && digest_of("dest", dx) == 0 &&
		   strcmp(dx, d1), "digest changes with an extra symlink (listed, not followed)");
		unlinkat(dfd, "link", 0);
		ok(digest_of("dest", dx) == 0 && !strcmp(dx, d1), "  back");
		close(dfd);
	}
	drop_dest(-1);
	ok(!exists(topfd, "dest"), "dest removed");
}

static void test_pack_refusals(void)
{
	struct box_archive_stats st;
	struct box_err err;
	int fd;

	mkdirat(topfd, "bad", 0755);
	fd = openat(topfd, "bad", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	put(fd, "ok", "x", 0644);
	ok(symlinkat("ok", fd, "lnk") == 0, "source with a symlink");
	is_int(pack_to("bad", "bad.tgz", &st, &err), -1, "pack refuses a symlink");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	is_str(err.path, "lnk", "  path names it");
	unlinkat(fd, "lnk", 0);
	mkdirat(fd, "sub", 0755);
	ok(mkfifoat(fd, "sub/fifo", 0644) == 0, "source with a FIFO");
	is_int(pack_to("bad", "bad.tgz", &st, &err), -1, "pack refuses a FIFO");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	is_str(err.path, "sub/fifo", "  path names it");
	unlinkat(fd, "sub/fifo", 0);
	ok(put(fd, "back\\slash", "", 0644) == 0, "source with a backslash name");
	is_int(pack_to("bad", "bad.tgz", &st, &err), -1, "pack refuses it");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	unlinkat(fd, "back\\slash", 0);
	is_int(pack_to("bad", "bad.tgz", &st, &err), 0, "clean source packs");
	{
		char p[200];
		int n = 0, dfd = dup(fd);

		for (int i = 0; i < 65; i++) {
			int sub;

			mkdirat(dfd, "d", 0755);
			sub = openat(dfd, "d", O_RDONLY | O_DIRECTORY);
			close(dfd);
			dfd = sub;
			n += snprintf(p + n, sizeof(p) - (size_t)n, "d/");
		}
		close(dfd);
		is_int(pack_to("bad", "bad.tgz", &st, &err), -1, "pack refuses depth 65");
		is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
		is_str(err.limit, "depth", "  limit depth");
	}
	close(fd);
	{
		struct box_err e2;

		box_err_init(&e2);
		is_int(box_fswalk_remove(topfd, "bad", &e2), 0, "remove a 66-deep tree");
		ok(!exists(topfd, "bad"), "  gone");
	}
	/* 10,001 entries */
	mkdirat(topfd, "wide", 0755);
	fd = openat(topfd, "wide", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < 10001; i++) {
		char name[16];
		int f;

		snprintf(name, sizeof(name), "%05d", i);
		f = openat(fd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (f >= 0)
			close(f);
	}
	close(fd);
	is_int(pack_to("wide", "wide.tgz", &st, &err), -1, "pack refuses 10,001 entries");
	is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
	is_str(err.limit, "entries", "  limit entries");
	{
		char dx[BOX_ARCHIVE_DIGEST_LEN + 1];
		struct box_err e2;

		fd = openat(topfd, "wide", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		box_err_init(&e2);
		is_int(box_archive_tree_digest(fd, dx, &e2), -1, "digest refuses 10,001 entries");
		is_int(e2.code, BOX_E_LIMIT, "  limit_exceeded");
		unlinkat(fd, "00000", 0);
		is_int(box_archive_tree_digest(fd, dx, &e2), 0, "  10,000 are fine");
		close(fd);
		is_int(box_fswalk_remove(topfd, "wide", &e2), 0, "remove 10,000 files");
	}
}

static void test_remove(void)
{
	struct box_err err;
	int fd, sub;
	char buf[64];

	box_err_init(&err);
	mkdirat(topfd, "keep", 0755);
	fd = openat(topfd, "keep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	put(fd, "precious", "do not delete", 0644);
	close(fd);
	mkdirat(topfd, "rm", 0755);
	fd = openat(topfd, "rm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	mkdirat(fd, "ro", 0755);
	sub = openat(fd, "ro", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	put(sub, "f", "x", 0444);
	close(sub);
	fchmodat(fd, "ro", 0555, 0);
	ok(symlinkat("../keep", fd, "link-dir") == 0, "symlink to a directory outside");
	ok(symlinkat("../keep/precious", fd, "link-file") == 0, "symlink to a file outside");
	close(fd);
	is_int(box_fswalk_remove(topfd, "rm", &err), 0, "remove_tree");
	ok(!exists(topfd, "rm"), "  tree gone, read-only dir included");
	ok(get(topfd, "keep/precious", buf, sizeof(buf)) == 13, "  symlink targets untouched");
	is_int(box_fswalk_remove(topfd, "rm", &err), 0, "missing name is fine");
	is_int(box_fswalk_remove(topfd, "keep/precious", &err), -1, "a path is refused");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	is_int(box_fswalk_remove(topfd, "..", &err), -1, ".. is refused");
	is_int(box_fswalk_remove(topfd, "", &err), -1, "empty is refused");
	ok(exists(topfd, "keep/precious"), "  nothing removed by the refusals");
	ok(symlinkat("keep", topfd, "lnk") == 0, "top-level symlink");
	is_int(box_fswalk_remove(topfd, "lnk", &err), 0, "  removed");
	ok(!exists(topfd, "lnk") && exists(topfd, "keep/precious"), "  not followed");
	is_int(box_fswalk_remove(topfd, "keep", &err), 0, "cleanup");
}

static void test_default_limits(void)
{
	struct box_archive_limits l;

	box_archive_default_limits(1000, &l);
	is_int(l.max_bytes, 20000, "default limits: 20 x compressed");
	is_int(l.max_entries, 10000, "  10000 entries");
	is_int(l.max_path, 4096, "  4096 path bytes");
	is_int(l.max_depth, 64, "  depth 64");
	box_archive_default_limits(INT64_C(1) << 40, &l);
	is_int(l.max_bytes, INT64_C(1) << 30, "  1 GiB at most");
	box_archive_default_limits((INT64_C(1) << 30) / 20 + 1, &l);
	is_int(l.max_bytes, INT64_C(1) << 30, "  1 GiB just past the ratio");
	box_archive_default_limits(INT64_MAX, &l);
	is_int(l.max_bytes, INT64_C(1) << 30, "  no overflow");
	box_archive_default_limits(0, &l);
	is_int(l.max_bytes, 0, "  0 for an empty input");
}

/* ------------------------------------------------------------------ symlinks (opt-in) */

static int link_is(int dfd, const char *name, const char *want)
{
	char buf[5000];
	ssize_t n = readlinkat(dfd, name, buf, sizeof(buf) - 1);

	if (n < 0)
		return 0;
	buf[n] = 0;
	return !strcmp(buf, want);
}

static char long_target[256];

/* A virtualenv-like tree; reverse creates it in another order, with other modes and times. */
static int make_link_src(const char *name, int reverse)
{
	static const char *dirs[] = { "venv", "venv/bin", "venv/lib", "venv/lib/site" };
	static const struct {
		const char *path, *target;
	} links[] = {
		{ "venv/bin/python", "python3.11" },
		{ "venv/bin/python3", "python3.11" },
		{ "venv/lib64", "lib" },
		{ "venv/bin/up", "../../README" },
		{ "venv/bin/dangling", "nothere" },
		{ "here", "." },
		{ "caf\303\251-link", "caf\303\251" },
		{ "long", long_target },
		{ "venv/lib/site/back", "../../bin/python3" },
	};
	int fd, n = (int)N(links), ok_ = 1;
	struct timespec ts[2];

	memset(long_target, 'x', 200);
	memcpy(long_target, "venv/", 5);
	long_target[200] = 0;
	if (mkdirat(topfd, name, 0755) < 0)
		return -1;
	fd = openat(topfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (int i = 0; i < (int)N(dirs); i++)
		ok_ &= mkdirat(fd, dirs[i], reverse ? 0700 : 0755) == 0;
	if (reverse)
		for (int i = n - 1; i >= 0; i--)
			ok_ &= symlinkat(links[i].target, fd, links[i].path) == 0;
	ok_ &= put(fd, "README", "readme\n", reverse ? 0600 : 0644) == 0;
	ok_ &= put(fd, "venv/bin/python3.11", "#!elf\n", reverse ? 0700 : 0755) == 0;
	ok_ &= put(fd, "venv/lib/site/mod.py", "x = 1\n", 0644) == 0;
	if (!reverse)
		for (int i = 0; i < n; i++)
			ok_ &= symlinkat(links[i].target, fd, links[i].path) == 0;
	ts[0].tv_sec = ts[1].tv_sec = reverse ? 12345 : 1700000000;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	for (int i = 0; i < n; i++)
		utimensat(fd, links[i].path, ts, AT_SYMLINK_NOFOLLOW);
	close(fd);
	return ok_ ? 0 : -1;
}

static void test_links_pack(void)
{
	struct box_archive_stats st, st2;
	struct box_archive_limits lim = deflim();
	struct box_err err;
	char p[256], h1[65], h2[65];
	char d1[BOX_ARCHIVE_DIGEST_LEN + 1], d2[BOX_ARCHIVE_DIGEST_LEN + 1];
	char d3[BOX_ARCHIVE_DIGEST_LEN + 1], dx[BOX_ARCHIVE_DIGEST_LEN + 1];
	int destfd = -1, r;

	xflags = BOX_ARCHIVE_SYMLINKS;
	ok(make_link_src("lsrc", 0) == 0, "links: venv-like tree made");
	ok(make_link_src("lcopy", 1) == 0, "links: copy made in another order");
	r = pack_to("lsrc", "l1.tgz", &st, &err);
	if (!is_int(r, 0, "links: pack_ex keeps contained symlinks"))
		printf("#   %s\n", err.message);
	is_int(st.links, 9, "  9 links");
	is_int(st.files, 3, "  3 files");
	is_int(st.dirs, 4, "  4 dirs");
	is_int(st.entries, 16, "  16 entries");
	is_int(st.bytes, 7 + 6 + 6, "  bytes count file content only");
	is_int(pack_to("lcopy", "l2.tgz", &st2, &err), 0, "links: pack the copy");
	arc_path(p, sizeof(p), "l1.tgz");
	sha_file(p, h1);
	arc_path(p, sizeof(p), "l2.tgz");
	sha_file(p, h2);
	ok(h1[0] && !strcmp(h1, h2), "links: reproducible, the copy gives the same sha256");

	r = extract_to_dest("l1.tgz", &lim, &st2, &err, &destfd);
	if (!is_int(r, 0, "links: extract_ex accepts them"))
		printf("#   %s\n", err.message);
	is_int(st2.links, 9, "  9 links");
	is_int(st2.files, 3, "  3 files");
	is_int(st2.entries, 16, "  16 entries");
	ok(link_is(destfd, "venv/bin/python", "python3.11"), "  venv/bin/python -> python3.11");
	ok(link_is(destfd, "venv/lib64", "lib"), "  venv/lib64 -> lib");
	ok(link_is(destfd, "venv/bin/up", "../../README"), "  climbing link kept");
	ok(link_is(destfd, "venv/bin/dangling", "nothere"), "  dangling link kept");
	ok(link_is(destfd, "here", "."), "  link to . kept");
	ok(link_is(destfd, "caf\303\251-link", "caf\303\251"), "  non-ASCII target kept");
	ok(link_is(destfd, "long", long_target), "  200-byte target kept (pax linkpath)");
	is_int(mode_of(destfd, "venv/bin/python3.11"), 0755, "  files still normalised");
	close(destfd);
	ok(digest_of("lsrc", d1) == 0 && digest_of("lcopy", d2) == 0 && !strcmp(d1, d2),
	   "links: tree digest of the copy equals the source's");
	ok(digest_of("dest", d3) == 0 && !strcmp(d1, d3), "links: digest after pack/extract_ex");
	{
		int dfd = openat(topfd, "dest", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		ok(unlinkat(dfd, "venv/lib64", 0) == 0 &&
		   symlinkat("lib/site", dfd, "venv/lib64") == 0 && digest_of("dest", dx) == 0 &&
		   strcmp(dx, d1), "links: a changed target changes the digest");
		ok(unlinkat(dfd, "venv/lib64", 0) == 0 && symlinkat("lib", dfd, "venv/lib64") == 0 &&
		   digest_of("dest", dx) == 0 && !strcmp(dx, d1), "  and is back when reverted");
		ok(unlinkat(dfd, "venv/lib64", 0) == 0 &&
		   put(dfd, "venv/lib64", "lib", 0644) == 0 &&
		   digest_of("dest", dx) == 0 && strcmp(dx, d1),
		   "links: a file holding the target text is not the link");
		close(dfd);
	}
	drop_dest(-1);
	r = extract_to_dest("l1.tgz", &lim, &st2, &err, &destfd);
	close(destfd);
	ok(r == 0 && digest_of("dest", dx) == 0 && !strcmp(dx, d1),
	   "links: a second extraction gives the same digest");
	drop_dest(-1);

	xflags = 0;
	is_int(pack_to("lsrc", "l3.tgz", &st, &err), -1, "links: plain pack still refuses them");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	ok(strstr(err.message, "a symlink") != NULL, "  as a symlink");
	box_err_init(&err);
	is_int(box_fswalk_remove(topfd, "lsrc", &err), 0, "links: cleanup");
	is_int(box_fswalk_remove(topfd, "lcopy", &err), 0, "  cleanup");
	refused("links: plain extract of a pack_ex archive", "l1.tgz", NULL, BOX_E_INTEGRITY,
		"symlinks are refused");
}

static void test_links_pack_refusals(void)
{
	static const struct {
		const char *path, *target, *what;
	} bad[] = {
		{ "abs", "/etc/passwd", "absolute" },
		{ "esc", "../x", "one level up from the top" },
		{ "sub/esc", "../../x", "two up from depth 2" },
		{ "sub/mid", "x/../../y", "\"..\" after a plain component" },
		{ "sub/back", "x/..", "\"..\" at the end" },
		{ "sub/dots", "./../..", "\".\" then too many \"..\"" },
		{ "sub/dbl", "a//b", "an empty component" },
	};
	struct box_archive_stats st;
	struct box_err err;
	char p[256];
	int fd, ofd;

	xflags = BOX_ARCHIVE_SYMLINKS;
	mkdirat(topfd, "lbad", 0755);
	fd = openat(topfd, "lbad", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	put(fd, "ok", "x", 0644);
	mkdirat(fd, "sub", 0755);
	ok(symlinkat("../ok", fd, "sub/fine") == 0 && symlinkat("sub/fine", fd, "chain") == 0,
	   "links: contained links in the source");
	is_int(pack_to("lbad", "lb.tgz", &st, &err), 0, "  pack");
	is_int(st.links, 2, "  2 links");
	for (size_t i = 0; i < N(bad); i++) {
		ok(symlinkat(bad[i].target, fd, bad[i].path) == 0, "links: %s -> %s", bad[i].path,
		   bad[i].target);
		is_int(pack_to("lbad", "lb.tgz", &st, &err), -1, "  refused (%s)", bad[i].what);
		is_int(err.code, BOX_E_POLICY, "  policy_denied");
		is_str(err.path, bad[i].path, "  path names it");
		unlinkat(fd, bad[i].path, 0);
	}
	ok(mkfifoat(fd, "fifo", 0644) == 0, "links: a FIFO");
	is_int(pack_to("lbad", "lb.tgz", &st, &err), -1, "  still refused");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	unlinkat(fd, "fifo", 0);
	arc_path(p, sizeof(p), "lb.tgz");
	ofd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC);
	box_err_init(&err);
	is_int(box_archive_pack_ex(fd, ofd, 0x80, &st, &err), -1, "links: unknown pack flag");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	close(ofd);
	close(fd);
	box_err_init(&err);
	is_int(box_fswalk_remove(topfd, "lbad", &err), 0, "links: cleanup");
	xflags = 0;
}

/* An entry written through an extracted link: refused, victim never created. */
static void through(const char *label, const struct ent *v, size_t n, const char *victim)
{
	struct box_archive_limits lim = deflim();
	struct box_archive_stats st;
	struct box_err err;
	int destfd = -1, r;

	if (!ok(make_arc("h", FMT_PAX, FLT_GZIP, v, n) == 0, "%s: archive built", label))
		return;
	r = extract_to_dest("h", &lim, &st, &err, &destfd);
	is_int(r, -1, "%s: refused", label);
	if (!is_int(err.code, BOX_E_INTEGRITY, "%s: integrity_failed", label))
		printf("#   message: %s\n", err.message);
	ok(destfd >= 0 && !exists(destfd, victim), "%s: %s not created", label, victim);
	drop_dest(destfd);
	ok(top_is_clean(), "%s: nothing outside dest changed", label);
}

static void test_links_extract(void)
{
	struct box_archive_limits lim = deflim();
	struct box_archive_stats st;
	struct box_err err;
	static char t4095[4096], t4096[4097];
	int destfd = -1, r, infd;
	char p[256];

	xflags = BOX_ARCHIVE_SYMLINKS;
	{
		struct ent v[] = { { "sub/f", 0, 0, "data", NULL, NULL },
				   { "l", AE_IFLNK, 0777, NULL, "sub/f", NULL },
				   { "sub/up", AE_IFLNK, 0777, NULL, "../l", NULL },
				   { "sub/deep/x", 0, 0, "x", NULL, NULL } };

		ok(make_arc("ok", FMT_GNU, FLT_GZIP, v, N(v)) == 0, "links: gnutar with links");
		r = extract_to_dest("ok", &lim, &st, &err, &destfd);
		if (!is_int(r, 0, "  extracted"))
			printf("#   %s\n", err.message);
		is_int(st.links, 2, "  2 links");
		ok(link_is(destfd, "l", "sub/f") && link_is(destfd, "sub/up", "../l"), "  targets");
		drop_dest(destfd);
	}
	{
		struct ent v[] = { { "f", 0, 0, "data", NULL, NULL },
				   { "zl", AE_IFLNK, 0777, NULL, "f", NULL } };

		ok(make_arc("z.zip", FMT_ZIP, FLT_NONE, v, N(v)) == 0, "links: zip with a link");
		r = extract_to_dest("z.zip", &lim, &st, &err, &destfd);
		if (!is_int(r, 0, "  extracted (seekable)"))
			printf("#   %s\n", err.message);
		ok(link_is(destfd, "zl", "f"), "  zl -> f");
		drop_dest(destfd);
	}
	memset(t4095, 'a', 4095);
	for (int i = 1; i < 4095; i += 2)
		t4095[i] = '/';
	memcpy(t4096, t4095, 4095);
	t4096[4095] = 'b';
	{
		struct ent v[] = { { "l", AE_IFLNK, 0777, NULL, t4095, NULL } };

		ok(make_arc("max", FMT_PAX, FLT_GZIP, v, N(v)) == 0, "links: a 4095-byte target");
		r = extract_to_dest("max", &lim, &st, &err, &destfd);
		if (!is_int(r, 0, "  extracted"))
			printf("#   %s\n", err.message);
		ok(link_is(destfd, "l", t4095), "  kept whole");
		drop_dest(destfd);
	}
	{
		struct ent v[] = { { "l", AE_IFLNK, 0777, NULL, t4096, NULL } };
		hostile("links: a 4096-byte target", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "l");
	}
	{
		struct ent v[] = { { "l", AE_IFLNK, 0777, NULL, "/etc", NULL },
				   { "l/pwned", 0, 0, "x", NULL, NULL } };
		hostile("links: absolute target", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "l");
	}
	{
		struct ent v[] = { { "up", AE_IFLNK, 0777, NULL, "..", NULL } };
		hostile("links: .. at the top", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "up");
	}
	{
		struct ent v[] = { { "d/up", AE_IFLNK, 0777, NULL, "../..", NULL } };
		hostile("links: ../.. at depth 2", FMT_GNU, v, N(v), BOX_E_INTEGRITY, "d/up");
	}
	{
		struct ent v[] = { { "d/m", AE_IFLNK, 0777, NULL, "x/../..", NULL } };
		hostile("links: .. after a plain component", FMT_PAX, v, N(v), BOX_E_INTEGRITY,
			"d/m");
	}
	{
		struct ent v[] = { { "d/e", AE_IFLNK, 0777, NULL, "a//b", NULL } };
		hostile("links: empty component", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "d/e");
	}
	{
		struct ent v[] = { { "f", 0, 0, "data", NULL, NULL },
				   { "h", 0, 0, NULL, NULL, "f" } };
		hostile("links: hard links stay refused", FMT_PAX, v, N(v), BOX_E_INTEGRITY,
			"hard link");
	}
	{
		struct ent v[] = { { "null", AE_IFCHR, 0666, NULL, NULL, NULL } };
		hostile("links: devices stay refused", FMT_PAX, v, N(v), BOX_E_INTEGRITY, "null");
	}
	{
		struct ent v[] = { { "sub/", AE_IFDIR, 0, NULL, NULL, NULL },
				   { "a", AE_IFLNK, 0777, NULL, "sub", NULL },
				   { "a/x", 0, 0, "pwned", NULL, NULL } };
		through("links: a -> sub then a/x", v, N(v), "sub/x");
	}
	{
		struct ent v[] = { { "sub/", AE_IFDIR, 0, NULL, NULL, NULL },
				   { "a", AE_IFLNK, 0777, NULL, "sub", NULL },
				   { "a/b/c", 0, 0, "pwned", NULL, NULL } };
		through("links: a -> sub then a/b/c", v, N(v), "sub/b");
	}
	{
		struct ent v[] = { { "a", AE_IFLNK, 0777, NULL, "nothere", NULL },
				   { "a/x", 0, 0, "pwned", NULL, NULL } };
		through("links: dangling a then a/x", v, N(v), "nothere");
	}
	{
		struct ent v[] = { { "l", AE_IFLNK, 0777, NULL, ".", NULL },
				   { "l/x", 0, 0, "pwned", NULL, NULL } };
		through("links: l -> . then l/x", v, N(v), "x");
	}
	{
		struct ent v[] = { { "sub/", AE_IFDIR, 0, NULL, NULL, NULL },
				   { "a", AE_IFLNK, 0777, NULL, "sub", NULL },
				   { "a/", AE_IFDIR, 0, NULL, NULL, NULL },
				   { "a/x", 0, 0, "pwned", NULL, NULL } };
		through("links: a -> sub then a/ then a/x", v, N(v), "sub/x");
	}
	{
		struct ent v[] = { { "d/x", 0, 0, "x", NULL, NULL },
				   { "d", AE_IFLNK, 0777, NULL, "e", NULL } };
		through("links: a link over an implicit directory", v, N(v), "e");
	}
	{
		struct ent v[] = { { "f", 0, 0, "x", NULL, NULL },
				   { "f", AE_IFLNK, 0777, NULL, "g", NULL } };
		through("links: a link over a file", v, N(v), "g");
	}
	{
		struct ent v[] = { { "f", 0, 0, "x", NULL, NULL } };

		make_arc("one", FMT_PAX, FLT_GZIP, v, N(v));
		arc_path(p, sizeof(p), "one");
		infd = open(p, O_RDONLY | O_CLOEXEC);
		box_err_init(&err);
		is_int(box_archive_extract_ex(infd, topfd, &lim, 0x80, &st, &err), -1,
		       "links: unknown extract flag");
		is_int(err.code, BOX_E_INVALID, "  invalid_request");
		ok(top_is_clean(), "  nothing written");
		if (infd >= 0)
			close(infd);
	}
	xflags = 0;
}

int main(void)
{
	int fd;

	snprintf(top, sizeof(top), "/tmp/t-archive.XXXXXX");
	if (!mkdtemp(top))
		return 99;
	topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (topfd < 0 || mkdirat(topfd, "arc", 0755) < 0 ||
	    put(topfd, "sentinel", sentinel, 0600) < 0)
		return 99;
	test_default_limits();
	test_hostile_paths();
	test_hostile_types();
	test_modes();
	test_lying_sizes();
	test_bomb();
	test_counts();
	test_path_caps();
	test_formats();
	test_links_pack();
	test_links_pack_refusals();
	test_links_extract();
	test_pack();
	test_pack_refusals();
	test_remove();
	{
		struct box_err err;
		char *slash = strrchr(top, '/');
		int parent;

		*slash = 0;
		parent = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		*slash = '/';
		box_err_init(&err);
		fd = parent >= 0 ? box_fswalk_remove(parent, slash + 1, &err) : -1;
		if (parent >= 0)
			close(parent);
		close(topfd);
		is_int(fd, 0, "test directory removed");
	}
	return done_testing();
}
