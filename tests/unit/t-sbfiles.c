#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "boxarchive.h"
#include "fswalk.h"
#include "sbcopy.h"
#include "sbfiles.h"
#include "sha256.h"
#include "tap.h"
#include "banned.h"

static char top[64];
static int topfd = -1;

static int put(int dfd, const char *name, const char *data, size_t n, mode_t mode)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -1;
	if (write(fd, data, n) != (ssize_t)n || fchmod(fd, mode) < 0) {
		close(fd);
		return -1;
	}
	return close(fd);
}

static int puts_at(int dfd, const char *name, const char *s)
{
	return put(dfd, name, s, strlen(s), 0644);
}

static int exists(int dfd, const char *name)
{
	struct stat sb;

	return fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
}

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

static int opendir_at(int dfd, const char *name)
{
	return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* The tree digest of dfd/name, or "" when it cannot be computed. */
static const char *tree_digest(int dfd, const char *name, char out[BOX_ARCHIVE_DIGEST_LEN + 1])
{
	struct box_err err;
	int fd = opendir_at(dfd, name);

	*out = 0;
	if (fd < 0)
		return out;
	if (box_archive_tree_digest(fd, out, &err) < 0)
		*out = 0;
	close(fd);
	return out;
}

static const char *member_str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int64_t member_int(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	char *end;
	long long n;

	/* box_json_add_int64 makes raw nodes holding the exact digits */
	if (!cJSON_IsRaw(v))
		return -1;
	n = strtoll(v->valuestring, &end, 10);
	return *end ? -1 : n;
}

static void on_alarm(int sig)
{
	static const char msg[] = "Bail out! blocked (a FIFO was opened?)\n";

	(void)sig;
	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(1);
}

/* ------------------------------------------------------------------ outputs */

static void test_outputs(void)
{
	char hex[BOX_SHA256_HEX_LEN + 1];
	struct box_err err;
	const cJSON *e;
	cJSON *arr;
	int o;

	mkdirat(topfd, "out", 0755);
	o = opendir_at(topfd, "out");
	puts_at(o, "b.txt", "bbb");
	mkdirat(o, "a", 0755);
	puts_at(o, "a/z.txt", "");
	symlinkat("/etc/passwd", o, "link");
	mkfifoat(o, "fifo", 0644);
	mkdirat(o, "empty", 0755);
	puts_at(o, "\xff.bin", "x");

	signal(SIGALRM, on_alarm);
	alarm(20);
	box_err_init(&err);
	arr = box_sbfiles_outputs(o, NULL, &err);
	alarm(0);
	if (!ok(arr != NULL, "outputs lists the directory (a FIFO does not block it)")) {
		printf("# %s\n", err.message);
		close(o);
		return;
	}
	is_int(cJSON_GetArraySize(arr), 4, "files and symlinks listed, FIFO and directories not");
	e = cJSON_GetArrayItem(arr, 0);
	is_str(member_str(e, "path"), "a/z.txt", "sorted by path, nested path relative");
	is_int(member_int(e, "size"), 0, "empty file size 0");
	is_str(member_str(e, "sha256"),
	       "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	       "sha256 of the empty file");
	e = cJSON_GetArrayItem(arr, 1);
	box_sha256_buf("bbb", 3, hex, &err);
	is_str(member_str(e, "path"), "b.txt", "second entry");
	is_int(member_int(e, "size"), 3, "its size");
	is_str(member_str(e, "sha256"), hex, "its sha256");
	ok(!cJSON_GetObjectItemCaseSensitive(e, "type"), "a file has no type member");
	e = cJSON_GetArrayItem(arr, 2);
	is_str(member_str(e, "path"), "link", "a symlink is listed");
	is_str(member_str(e, "type"), "symlink", "... as a symlink");
	ok(!cJSON_GetObjectItemCaseSensitive(e, "sha256") &&
	   !cJSON_GetObjectItemCaseSensitive(e, "size"), "... without reading its target");
	e = cJSON_GetArrayItem(arr, 3);
	is_str(member_str(e, "path"), "\xef\xbf\xbd.bin", "a non-UTF-8 name is sanitised");
	ok(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "lossy")), "... and marked lossy");
	cJSON_Delete(arr);

	/* entries: b.txt a a/z.txt link fifo empty \xff.bin = 7 */
	arr = box_sbfiles_outputs(o, &(struct box_sbfiles_out_limits){ .max_files = 7 }, &err);
	ok(arr != NULL, "max_files equal to the entries passes");
	cJSON_Delete(arr);
	arr = box_sbfiles_outputs(o, &(struct box_sbfiles_out_limits){ .max_files = 6 }, &err);
	ok(!arr && err.code == BOX_E_LIMIT, "one entry too many is limit_exceeded");
	is_str(err.limit, "files", "... naming files");
	is_int(err.configured, 6, "... with the configured cap");
	close(o);

	mkdirat(topfd, "none", 0755);
	o = opendir_at(topfd, "none");
	arr = box_sbfiles_outputs(o, NULL, &err);
	ok(cJSON_IsArray(arr) && cJSON_GetArraySize(arr) == 0, "an empty directory gives []");
	cJSON_Delete(arr);
	close(o);
}

/* The bounds of a listing: each inode hashed once, distinct bytes, path bytes, depth. */
static void test_outputs_bounds(void)
{
	struct box_sbfiles_out_limits lim = { 0 };
	char name[16], hex[BOX_SHA256_HEX_LEN + 1];
	struct box_err err;
	const cJSON *e;
	cJSON *arr;
	int o, fd, k, d;
	char data[100];

	memset(data, 'x', sizeof(data));
	mkdirat(topfd, "bounds", 0755);
	o = opendir_at(topfd, "bounds");
	put(o, "big", data, sizeof(data), 0644);
	for (k = 0; k < 5; k++) {
		snprintf(name, sizeof(name), "l%d", k);
		linkat(o, "big", o, name, 0);
	}
	box_sha256_buf(data, sizeof(data), hex, &err);
	box_err_init(&err);
	lim.max_bytes = 150;
	arr = box_sbfiles_outputs(o, &lim, &err);
	ok(arr != NULL, "a file of 100 bytes with 5 more links fits 150 bytes: hashed once");
	is_int(cJSON_GetArraySize(arr), 6, "... each name listed");
	for (k = 0; k < 6; k++) {
		e = cJSON_GetArrayItem(arr, k);
		if (member_int(e, "size") != 100 || !member_str(e, "sha256") ||
		    strcmp(member_str(e, "sha256"), hex) != 0)
			break;
	}
	is_int(k, 6, "... each with the size and digest of the one inode");
	cJSON_Delete(arr);
	put(o, "other", data, sizeof(data), 0644);
	arr = box_sbfiles_outputs(o, &lim, &err);
	ok(!arr && err.code == BOX_E_LIMIT && strcmp(err.limit, "bytes") == 0 &&
	   err.configured == 150 && strcmp(err.unit, "bytes") == 0,
	   "a second distinct file of 100 bytes passes 150: limit_exceeded bytes");
	unlinkat(o, "other", 0);

	/* 60 GiB, sparse: refused from its size, before a byte is read */
	fd = openat(o, "huge", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ok(fd >= 0 && ftruncate(fd, (off_t)60 << 30) == 0, "a 60 GiB sparse file");
	close(fd);
	box_err_init(&err);
	alarm(20);
	arr = box_sbfiles_outputs(o, NULL, &err);
	alarm(0);
	ok(!arr && err.code == BOX_E_LIMIT && strcmp(err.limit, "bytes") == 0 &&
	   err.configured == BOX_SBFILES_MAX_HASH_BYTES, "... is over the default 1 GiB");
	unlinkat(o, "huge", 0);

	lim.max_bytes = 0;
	lim.max_path_bytes = 10;   /* "big" + "l0".."l4": 3 + 5 * 2 = 13 bytes */
	arr = box_sbfiles_outputs(o, &lim, &err);
	ok(!arr && err.code == BOX_E_LIMIT && strcmp(err.limit, "path_bytes") == 0 &&
	   err.configured == 10, "13 bytes of paths over 10: limit_exceeded path_bytes");
	lim.max_path_bytes = 13;
	arr = box_sbfiles_outputs(o, &lim, &err);
	ok(arr != NULL, "13 bytes of paths fit 13");
	cJSON_Delete(arr);
	close(o);

	/* 64 levels are listed, 65 are limit_exceeded depth */
	mkdirat(topfd, "deep", 0755);
	o = opendir_at(topfd, "deep");
	d = dup(o);
	for (k = 0; k < 65; k++) {
		int sub;

		mkdirat(d, "d", 0755);
		sub = opendir_at(d, "d");
		close(d);
		d = sub;
		if (k == 62)
			puts_at(d, "f", "x");
	}
	close(d);
	box_err_init(&err);
	arr = box_sbfiles_outputs(o, NULL, &err);
	ok(!arr && err.code == BOX_E_LIMIT && strcmp(err.limit, "depth") == 0 &&
	   err.configured == BOX_ARCHIVE_MAX_DEPTH, "65 levels: limit_exceeded depth");
	close(o);
}

/* ------------------------------------------------------------------ snapshot / restore */

static void make_tree(void)
{
	int w;

	mkdirat(topfd, "ws", 0755);
	w = opendir_at(topfd, "ws");
	puts_at(w, "hello.txt", "hello world\n");
	put(w, "tool", "#!/bin/sh\necho hi\n", 18, 04755);
	mkdirat(w, "sub", 0700);
	mkdirat(w, "sub/deeper", 0755);
	puts_at(w, "sub/deeper/data.json", "{\"a\": 1}\n");
	mkdirat(w, "emptydir", 0755);
	close(w);
	mkdirat(topfd, "snaps", 0755);
	mkdirat(topfd, "sessions", 0755);
}

/* Writes data under the name of its own digest: an archive that passes the check. */
static void put_self_named(int snapfd, const void *data, size_t n, char digest[80])
{
	char hex[BOX_SHA256_HEX_LEN + 1], name[96];
	struct box_err err;

	box_sha256_buf(data, n, hex, &err);
	snprintf(name, sizeof(name), "%s.tar.gz", hex);
	put(snapfd, name, data, n, 0644);
	snprintf(digest, 80, "sha256:%s", hex);
}

static void add_entry(struct archive *a, struct archive_entry *e, const char *path,
		      unsigned int type, const char *data_or_target)
{
	size_t n = type == AE_IFREG ? strlen(data_or_target) : 0;

	archive_entry_clear(e);
	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, type);
	archive_entry_set_perm(e, type == AE_IFLNK ? 0777 : type == AE_IFDIR ? 0755 : 0644);
	archive_entry_set_size(e, (la_int64_t)n);
	if (type == AE_IFLNK)
		archive_entry_set_symlink(e, data_or_target);
	archive_write_header(a, e);
	if (n)
		archive_write_data(a, data_or_target, n);
}

/* A tar.gz of "sub/", "a" -> "sub", "a/x": a write through an extracted link. */
static size_t through_archive(char *buf, size_t cap, const char *target)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	size_t used = 0;

	archive_write_set_format_pax_restricted(a);
	archive_write_add_filter_gzip(a);
	archive_write_open_memory(a, buf, cap, &used);
	add_entry(a, e, "sub/", AE_IFDIR, NULL);
	add_entry(a, e, "a", AE_IFLNK, target);
	add_entry(a, e, "a/x", AE_IFREG, "pwned");
	archive_entry_free(e);
	archive_write_close(a);
	archive_write_free(a);
	return used;
}

static int link_is(int dfd, const char *name, const char *want)
{
	char buf[256];
	ssize_t n = readlinkat(dfd, name, buf, sizeof(buf) - 1);

	if (n < 0)
		return 0;
	buf[n] = 0;
	return !strcmp(buf, want);
}

/* A tar.gz holding a file and a symlink, built with libarchive. */
static size_t symlink_archive(char *buf, size_t cap)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	size_t used = 0;

	archive_write_set_format_pax_restricted(a);
	archive_write_add_filter_gzip(a);
	archive_write_open_memory(a, buf, cap, &used);
	archive_entry_set_pathname(e, "f");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, 1);
	archive_write_header(a, e);
	archive_write_data(a, "x", 1);
	archive_entry_clear(e);
	archive_entry_set_pathname(e, "evil");
	archive_entry_set_filetype(e, AE_IFLNK);
	archive_entry_set_perm(e, 0777);
	archive_entry_set_symlink(e, "/etc");
	archive_write_header(a, e);
	archive_entry_free(e);
	archive_write_close(a);
	archive_write_free(a);
	return used;
}

static void test_snapshot_restore(void)
{
	char d1[BOX_SBFILES_DIGEST_LEN + 1], d2[BOX_SBFILES_DIGEST_LEN + 1];
	char t0[BOX_ARCHIVE_DIGEST_LEN + 1], t1[BOX_ARCHIVE_DIGEST_LEN + 1];
	char t2[BOX_ARCHIVE_DIGEST_LEN + 1], name[96], hex[BOX_SHA256_HEX_LEN + 1];
	char bad[80], abuf[4096];
	struct box_sbfiles_stats st;
	struct box_err err;
	int64_t size;
	int w, snap, sess, fd, r;
	size_t n;

	make_tree();
	w = opendir_at(topfd, "ws");
	snap = opendir_at(topfd, "snaps");
	sess = opendir_at(topfd, "sessions");
	tree_digest(topfd, "ws", t0);
	ok(*t0, "tree digest of the source");

	box_err_init(&err);
	r = box_sbfiles_snapshot(w, snap, d1, &st, &err);
	if (!is_int(r, 0, "snapshot succeeds"))
		printf("# %s\n", err.message);
	ok(!strncmp(d1, "sha256:", 7) && strlen(d1) == BOX_SBFILES_DIGEST_LEN,
	   "digest is sha256:<64 hex>");
	is_int(st.existed, 0, "a new snapshot");
	is_int(st.files, 3, "files counted");
	snprintf(name, sizeof(name), "%s.tar.gz", d1 + 7);
	fd = openat(snap, name, O_RDONLY | O_CLOEXEC);
	ok(fd >= 0, "the archive is named by its digest");
	ok(fd >= 0 && box_sha256_fd(fd, hex, &size, &err) == 0 && !strcmp(hex, d1 + 7),
	   "... which is the sha256 of its bytes");
	is_int(size, st.archive_bytes, "archive_bytes is its size");
	if (fd >= 0)
		close(fd);

	r = box_sbfiles_snapshot(w, snap, d2, &st, &err);
	is_int(r, 0, "snapshot of the same tree again succeeds");
	is_str(d2, d1, "... with the same digest");
	is_int(st.existed, 1, "... keeping the existing snapshot");
	is_int(count_entries(topfd, "snaps"), 1, "one archive, no temporaries");

	r = box_sbfiles_restore(snap, d1, sess, "r1", 0, &err);
	if (!is_int(r, 0, "restore into an absent name succeeds"))
		printf("# %s\n", err.message);
	r = box_sbfiles_restore(snap, d1, sess, "r2", 0, &err);
	is_int(r, 0, "restore a second time succeeds");
	is_str(tree_digest(sess, "r1", t1), t0, "the restored tree equals the source");
	is_str(tree_digest(sess, "r2", t2), t1, "two restores give identical trees");
	is_int(count_entries(topfd, "sessions"), 2, "no temporaries beside the restores");

	fd = opendir_at(sess, "r1");
	puts_at(fd, "added-later", "junk");
	unlinkat(fd, "hello.txt", 0);
	close(fd);
	ok(strcmp(tree_digest(sess, "r1", t1), t0) != 0, "the tree was changed");
	r = box_sbfiles_restore(snap, d1, sess, "r1", 0, &err);
	is_int(r, 0, "restore over an existing tree succeeds");
	is_str(tree_digest(sess, "r1", t1), t0, "... and brings it back");
	is_int(count_entries(topfd, "sessions"), 2, "... leaving no old tree behind");
	if (geteuid() == 0) {
		struct stat o;
		char cmd[512];

		r = box_sbfiles_restore_as(snap, d1, sess, "r3", 0, 123457, 123458, &err);
		is_int(r, 0, "restore given to other ids succeeds");
		snprintf(cmd, sizeof(cmd), "test -z \"$(find %s/sessions/r3 ! -uid 123457 -o "
			 "! -gid 123458)\" && test -n \"$(find %s/sessions/r3 -mindepth 2)\"", top, top);
		ok(system(cmd) == 0, "... every entry of it, the root included, is theirs");
		ok(fstatat(sess, "r1", &o, 0) == 0 && o.st_uid == 0, "... another tree is not");
		is_str(tree_digest(sess, "r3", t2), t0, "... with the same content");
		box_fswalk_remove(sess, "r3", &err);
	} else {
		tap_skip("chown to other ids needs root");
	}

	/* a failed restore keeps the old tree */
	fd = opendir_at(sess, "r1");
	puts_at(fd, "marker", "old");
	close(fd);
	tree_digest(sess, "r1", t1);

	fd = openat(snap, name, O_RDWR | O_CLOEXEC);
	ok(fd >= 0 && pwrite(fd, "X", 1, 20) == 1, "tampered with the snapshot");
	if (fd >= 0)
		close(fd);
	r = box_sbfiles_restore(snap, d1, sess, "r1", 0, &err);
	ok(r == -1 && err.code == BOX_E_INTEGRITY, "a tampered snapshot is integrity_failed");
	is_str(tree_digest(sess, "r1", t2), t1, "... and the old tree is untouched");
	is_int(count_entries(topfd, "sessions"), 2, "... with no temporary left");

	put_self_named(snap, "this is not an archive", 22, bad);
	r = box_sbfiles_restore(snap, bad, sess, "r1", 0, &err);
	ok(r == -1 && err.code == BOX_E_INTEGRITY, "a corrupt archive is integrity_failed");
	is_str(tree_digest(sess, "r1", t2), t1, "... and the old tree is untouched");
	is_int(count_entries(topfd, "sessions"), 2, "... with no temporary left");

	n = symlink_archive(abuf, sizeof(abuf));
	ok(n > 0, "built an archive holding a symlink");
	put_self_named(snap, abuf, n, bad);
	r = box_sbfiles_restore(snap, bad, sess, "rabs", 0, &err);
	ok(r == 0, "an archive with an absolute symlink restores");
	fd = opendir_at(sess, "rabs");
	ok(link_is(fd, "evil", "/etc"), "... the link as it was");
	if (fd >= 0)
		close(fd);
	ok(box_fswalk_remove(sess, "rabs", &err) == 0, "... removed again");
	is_str(tree_digest(sess, "r1", t2), t1, "... and r1 is untouched");
	is_int(count_entries(topfd, "sessions"), 2, "... with no temporary left");


	r = box_sbfiles_restore(snap, "sha256:0000000000000000000000000000000000000000000000000000000000000000",
				sess, "r1", 0, &err);
	ok(r == -1 && err.code == BOX_E_NOT_FOUND, "an unknown digest is not_found");
	r = box_sbfiles_restore(snap, "sha256:xyz", sess, "r1", 0, &err);
	ok(r == -1 && err.code == BOX_E_INVALID, "a malformed digest is invalid_request");
	r = box_sbfiles_restore(snap, "sha256:../../etc/passwd", sess, "r1", 0, &err);
	ok(r == -1 && err.code == BOX_E_INVALID, "a digest with a path is invalid_request");
	r = box_sbfiles_restore(snap, d1, sess, "../r1", 0, &err);
	ok(r == -1 && err.code == BOX_E_INVALID, "a name with a slash is invalid_request");

	for (int k = 0; k < 2; k++) {
		char target[128];

		snprintf(target, sizeof(target), "%s", k ? top : "sub");
		n = through_archive(abuf, sizeof(abuf), target);
		ok(n > 0, "built an archive writing through a link it holds (%s)", target);
		put_self_named(snap, abuf, n, bad);
		r = box_sbfiles_restore(snap, bad, sess, "r1", 0, &err);
		ok(r == -1 && err.code == BOX_E_INTEGRITY,
		   "a write through an extracted link is refused");
		is_str(tree_digest(sess, "r1", t2), t1, "... and the old tree is untouched");
		is_int(count_entries(topfd, "sessions"), 2, "... with no temporary left");
		ok(faccessat(topfd, "x", F_OK, AT_SYMLINK_NOFOLLOW) < 0, "... nothing written there");
	}

	/* a virtualenv: contained links are kept as links */
	mkdirat(w, "venv", 0755);
	mkdirat(w, "venv/bin", 0755);
	put(w, "venv/bin/python3.11", "#!elf\n", 6, 0755);
	ok(symlinkat("python3.11", w, "venv/bin/python") == 0 &&
	   symlinkat("../../hello.txt", w, "venv/bin/hello") == 0 &&
	   symlinkat("bin", w, "venv/Scripts") == 0 && symlinkat("gone", w, "dangling") == 0,
	   "links added to the tree");
	tree_digest(topfd, "ws", t0);
	r = box_sbfiles_snapshot(w, snap, d2, &st, &err);
	if (!is_int(r, 0, "a tree with contained links snapshots"))
		printf("# %s\n", err.message);
	is_int(st.files, 4, "... 4 files");
	is_int(st.entries, 4 + 5 + 4, "... links counted in entries");
	ok(strcmp(d2, d1) != 0, "... another snapshot");
	r = box_sbfiles_restore(snap, d2, sess, "r3", 0, &err);
	if (!is_int(r, 0, "it restores"))
		printf("# %s\n", err.message);
	is_str(tree_digest(sess, "r3", t1), t0, "... to a tree equal to the source");
	fd = opendir_at(sess, "r3");
	ok(link_is(fd, "venv/bin/python", "python3.11") && link_is(fd, "venv/Scripts", "bin") &&
	   link_is(fd, "venv/bin/hello", "../../hello.txt") && link_is(fd, "dangling", "gone"),
	   "... with the links as links");
	if (fd >= 0)
		close(fd);
	r = box_sbfiles_restore(snap, d2, sess, "r3", 0, &err);
	is_int(r, 0, "restoring it again succeeds");
	is_str(tree_digest(sess, "r3", t2), t0, "... with the same tree digest");
	/* a snapshot over max_bytes: refused before anything is replaced */
	fd = opendir_at(sess, "r3");
	puts_at(fd, "marker", "old");
	close(fd);
	tree_digest(sess, "r3", t1);
	r = box_sbfiles_restore(snap, d2, sess, "r3", 3, &err);
	ok(r == -1 && err.code == BOX_E_LIMIT && !strcmp(err.limit, "disk") &&
	   err.configured == 3, "a snapshot over max_bytes is limit_exceeded disk (%s)",
	   err.message);
	is_str(tree_digest(sess, "r3", t2), t1, "... and the old tree is untouched");
	is_int(count_entries(topfd, "sessions"), 3, "... with no temporary left");
	r = box_sbfiles_restore(snap, d2, sess, "r3", 1 << 20, &err);
	is_int(r, 0, "under max_bytes it restores");
	r = box_sbfiles_snapshot(w, snap, bad, &st, &err);
	ok(r == 0 && !strcmp(bad, d2) && st.existed == 1, "a second snapshot is the same");

	/* links of any kind are kept as they are; FIFOs are left out and counted */
	symlinkat("../../../etc/passwd", w, "venv/bin/esc");
	symlinkat("/usr/bin/python3", w, "venv/bin/abs");
	mkfifoat(w, "fifo", 0644);
	mkfifoat(w, "venv/fifo", 0644);
	box_err_init(&err);
	r = box_sbfiles_snapshot(w, snap, bad, &st, &err);
	ok(r == 0, "a tree with absolute and escaping links and FIFOs snapshots (%s)", err.message);
	is_int(st.skipped, 2, "... the FIFOs left out and counted");
	r = box_sbfiles_restore(snap, bad, sess, "r4", 0, &err);
	ok(r == 0, "... and restores");
	fd = opendir_at(sess, "r4");
	ok(link_is(fd, "venv/bin/esc", "../../../etc/passwd") &&
	   link_is(fd, "venv/bin/abs", "/usr/bin/python3") &&
	   faccessat(fd, "fifo", F_OK, AT_SYMLINK_NOFOLLOW) < 0, "... with the links as they were");
	if (fd >= 0)
		close(fd);
	close(w);
	close(snap);
	close(sess);
}

int main(void)
{
	char cmd[256];

	snprintf(top, sizeof(top), "/tmp/t-sbfiles-XXXXXX");
	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 1;
	}
	topfd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	test_outputs();
	test_outputs_bounds();
	test_snapshot_restore();
	close(topfd);
	ok(exists(AT_FDCWD, top), "the scratch directory is still there");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", top);
	return done_testing();
}
