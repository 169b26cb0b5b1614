/* The store verifier: the stat cache (warm path, lib/artifact/verify.c) and the re-hash behind it
 * (cold path, lib/artifact/rehash.c), on store entries built here. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic.h"
#include "boxarchive.h"
#include "buf.h"
#include "rehash.h"
#include "verify.h"
#include "tap.h"
#include "banned.h"

#define HEXA "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HEXB "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static char top[64], store[128];
static int shafd = -1;

/* past the coarse clock tick of file timestamps, so that what follows is not racily clean */
static void tick(void)
{
	struct timespec ts = { 0, 30 * 1000 * 1000 };

	nanosleep(&ts, NULL);
}

static void put(const char *hex, const char *path, const char *text, mode_t mode)
{
	char p[512];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", hex, path);
	fd = openat(shafd, p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd < 0 || box_write_all(fd, text, strlen(text)) < 0 || fchmod(fd, mode) < 0) {
		printf("Bail out! cannot write %s: %s\n", p, strerror(errno));
		exit(1);
	}
	close(fd);
}

static void subdir(const char *hex, const char *path)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", hex, path);
	if (mkdirat(shafd, p, 0755) < 0) {
		printf("Bail out! mkdir %s: %s\n", p, strerror(errno));
		exit(1);
	}
}

static int sh(const char *cmd)
{
	int r = system(cmd);

	if (r != 0)
		printf("# %s: status %d\n", cmd, r);
	return r;
}

static void rm_entry(const char *hex)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "rm -rf %s/sha256/%s %s/sha256/%s.*", store, hex, store, hex);
	sh(cmd);
}

/* A fresh entry hex: main.sh, lib/util.lua, lib/link -> util.lua, box-artifact.json. Its
 * tree digest goes into tree (and the store's note), no cache yet. */
static void make_entry(const char *hex, char tree[BOX_VERIFY_DIGEST_LEN + 1])
{
	struct box_err err;
	char p[512], name[80];
	int fd;

	rm_entry(hex);
	if (mkdirat(shafd, hex, 0755) < 0) {
		printf("Bail out! mkdir %s\n", hex);
		exit(1);
	}
	put(hex, "main.sh", "#!/bin/sh\necho '{}'\n", 0755);
	put(hex, "box-artifact.json", "{\"name\": \"x\"}\n", 0644);
	subdir(hex, "lib");
	put(hex, "lib/util.lua", "return 1\n", 0644);
	snprintf(p, sizeof(p), "%s/lib/link", hex);
	if (symlinkat("util.lua", shafd, p) < 0) {
		printf("Bail out! symlink\n");
		exit(1);
	}
	box_err_init(&err);
	fd = openat(shafd, hex, O_RDONLY | O_DIRECTORY);
	if (fd < 0 || box_archive_tree_digest(fd, tree, &err) < 0) {
		printf("Bail out! digest: %s\n", err.message);
		exit(1);
	}
	close(fd);
	snprintf(name, sizeof(name), "%s.tree", hex);
	if (box_atomic_write(shafd, name, tree, strlen(tree), 0644, &err) < 0) {
		printf("Bail out! note: %s\n", err.message);
		exit(1);
	}
	tick();
}

static int warm(const char *hex, const char *tree)
{
	struct box_err err;

	box_err_init(&err);
	return box_verify_warm(shafd, hex, tree, &err);
}

static int rehash(const char *hex, const char *tree, struct box_rehash_stats *st,
		  struct box_err *err)
{
	int r;

	box_err_init(err);
	r = box_rehash_entry(shafd, hex, tree, st, err);
	tick();
	return r;
}

/* Rewrites the cache of hex with fn applied to its records and its mtime set to *mtime. */
static void forge(const char *hex, void (*fn)(struct box_verify_cache *), const struct timespec *mtime)
{
	struct box_verify_cache c;
	struct box_err err;
	struct timespec ts[2];
	char name[80], *text;
	size_t len;

	box_verify_cache_init(&c);
	box_err_init(&err);
	box_verify_cache_name(hex, name);
	if (box_verify_cache_read(shafd, hex, &c, &err) != 1) {
		printf("Bail out! no cache to forge\n");
		exit(1);
	}
	if (fn)
		fn(&c);
	text = box_verify_cache_format(&c, &len, &err);
	if (!text || box_atomic_write(shafd, name, text, len, 0644, &err) < 0) {
		printf("Bail out! forge: %s\n", err.message);
		exit(1);
	}
	free(text);
	box_verify_cache_release(&c);
	ts[0] = *mtime;
	ts[1] = *mtime;
	utimensat(shafd, name, ts, 0);
}

static void write_raw(const char *hex, const char *text)
{
	struct box_err err;
	char name[80];

	box_verify_cache_name(hex, name);
	box_err_init(&err);
	if (box_atomic_write(shafd, name, text, strlen(text), 0644, &err) < 0) {
		printf("Bail out! %s\n", err.message);
		exit(1);
	}
	tick();
}

static struct stat stat_of(const char *hex, const char *path)
{
	struct stat st;
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", hex, path);
	memset(&st, 0, sizeof(st));
	fstatat(shafd, p, &st, AT_SYMLINK_NOFOLLOW);
	return st;
}

/* main.sh's record takes the stat main.sh has now: a change the stat cannot show */
static void adopt_main(struct box_verify_cache *c)
{
	struct box_verify_rec *r = (struct box_verify_rec *)box_verify_cache_find(c, "main.sh");
	struct stat st = stat_of(HEXA, "main.sh");

	r->mtim = st.st_mtim;
	r->ctim = st.st_ctim;
}

static void test_clean(void)
{
	char tree[BOX_VERIFY_DIGEST_LEN + 1], again[BOX_VERIFY_DIGEST_LEN + 1];
	struct box_rehash_stats st;
	struct box_err err;

	make_entry(HEXA, tree);
	is_int(warm(HEXA, tree), 0, "no cache: the warm check cannot vouch for the entry");
	is_int(rehash(HEXA, tree, &st, &err), 0, "the cold path finds the tree as recorded");
	is_str(st.tree, tree, "  with the digest box_archive_tree_digest computes");
	is_int(st.hashed, 4, "  reading its three files and its link");
	is_int(st.reused, 0, "  reusing nothing");
	ok(st.cache_written, "  and writes a cache");
	is_int(warm(HEXA, tree), 1, "then the warm check vouches for it, stat-only");
	is_int(rehash(HEXA, tree, &st, &err), 0, "a cold path again");
	is_int(st.hashed, 0, "  reads nothing");
	is_int(st.reused, 4, "  and reuses every content digest");
	is_int(box_verify_expected(shafd, HEXA, "", again, &err), 0, "the store's note is the expected digest");
	is_str(again, tree, "  as recorded at pull time");
	is_int(warm(HEXA, "sha256:" HEXB), 0, "a cache verified against another tree digest vouches for nothing");
}

static void test_content_same_size(void)
{
	char tree[BOX_VERIFY_DIGEST_LEN + 1], p[512];
	struct box_rehash_stats st;
	struct box_err err;
	struct timespec ts[2];
	struct stat before;
	int fd;

	make_entry(HEXA, tree);
	rehash(HEXA, tree, &st, &err);
	before = stat_of(HEXA, "main.sh");
	ts[0] = before.st_atim;
	ts[1] = before.st_mtim;
	snprintf(p, sizeof(p), "%s/main.sh", HEXA);
	fd = openat(shafd, p, O_WRONLY);
	ok(fd >= 0 && pwrite(fd, "#!/bin/sh\necho '[]'\n", 20, 0) == 20, "main.sh rewritten in place, same size");
	close(fd);
	utimensat(shafd, p, ts, 0);
	ok(stat_of(HEXA, "main.sh").st_size == before.st_size &&
	   stat_of(HEXA, "main.sh").st_mtim.tv_nsec == before.st_mtim.tv_nsec &&
	   stat_of(HEXA, "main.sh").st_ino == before.st_ino, "  its size, mtime and inode as before");
	is_int(warm(HEXA, tree), 0, "the warm check sees its ctime change");
	is_int(rehash(HEXA, tree, &st, &err), -1, "the cold path refuses the entry");
	is_int(err.code, BOX_E_INTEGRITY, "  integrity_failed");
	ok(strstr(err.message, "main.sh changed") != NULL, "  naming the file: %s", err.message);
	is_int(st.hashed, 1, "  having read only the file whose stat changed");
	is_int(warm(HEXA, tree), 0, "a refused entry gets no cache that vouches for it");
}

static void test_added_removed(void)
{
	char tree[BOX_VERIFY_DIGEST_LEN + 1], p[512];
	struct box_rehash_stats st;
	struct box_err err;

	make_entry(HEXA, tree);
	rehash(HEXA, tree, &st, &err);
	put(HEXA, "lib/extra.lua", "os.exit()\n", 0644);
	is_int(warm(HEXA, tree), 0, "a file added in a subdirectory: the warm check cannot vouch");
	is_int(rehash(HEXA, tree, &st, &err), -1, "  the cold path refuses");
	ok(err.code == BOX_E_INTEGRITY && strstr(err.message, "lib/extra.lua was added"),
	   "  integrity_failed naming it: %s", err.message);
	snprintf(p, sizeof(p), "%s/lib/extra.lua", HEXA);
	unlinkat(shafd, p, 0);
	tick();
	is_int(rehash(HEXA, tree, &st, &err), 0, "removed again, the tree is as recorded");
	is_int(warm(HEXA, tree), 1, "  and the warm check vouches again");

	snprintf(p, sizeof(p), "%s/box-artifact.json", HEXA);
	unlinkat(shafd, p, 0);
	is_int(warm(HEXA, tree), 0, "a file removed: the warm check cannot vouch");
	is_int(rehash(HEXA, tree, &st, &err), -1, "  the cold path refuses");
	ok(err.code == BOX_E_INTEGRITY && strstr(err.message, "box-artifact.json was removed"),
	   "  integrity_failed naming it: %s", err.message);
}

static void test_modes_links_types(void)
{
	char tree[BOX_VERIFY_DIGEST_LEN + 1], p[512];
	struct box_rehash_stats st;
	struct box_err err;

	make_entry(HEXA, tree);
	rehash(HEXA, tree, &st, &err);
	snprintf(p, sizeof(p), "%s/main.sh", HEXA);
	fchmodat(shafd, p, 0644, 0);
	is_int(warm(HEXA, tree), 0, "chmod -x: the warm check cannot vouch");
	is_int(rehash(HEXA, tree, &st, &err), -1, "  the cold path refuses");
	ok(err.code == BOX_E_INTEGRITY && strstr(err.message, "main.sh changed"), "  %s", err.message);
	fchmodat(shafd, p, 0700, 0);
	is_int(warm(HEXA, tree), 0, "chmod 700: the warm check cannot vouch");
	is_int(rehash(HEXA, tree, &st, &err), 0, "  but the digest keeps only the execute bit: it matches");
	is_int(st.hashed, 1, "  re-reading only main.sh, whose stat changed");
	/* a cache written in the tick of the chmod would be racily clean: write it again */
	rehash(HEXA, tree, &st, &err);
	is_int(warm(HEXA, tree), 1, "  its new cache records mode 0700 and vouches for it");

	snprintf(p, sizeof(p), "%s/lib/link", HEXA);
	unlinkat(shafd, p, 0);
	symlinkat("../main.sh", shafd, p);
	is_int(warm(HEXA, tree), 0, "a symlink retargeted: the warm check cannot vouch");
	is_int(rehash(HEXA, tree, &st, &err), -1, "  the cold path refuses");
	ok(err.code == BOX_E_INTEGRITY && strstr(err.message, "lib/link changed"), "  %s", err.message);

	make_entry(HEXA, tree);
	rehash(HEXA, tree, &st, &err);
	snprintf(p, sizeof(p), "%s/lib/util.lua", HEXA);
	unlinkat(shafd, p, 0);
	mkdirat(shafd, p, 0755);
	is_int(warm(HEXA, tree), 0, "a file replaced by a directory: the warm check cannot vouch");
	is_int(rehash(HEXA, tree, &st, &err), -1, "  the cold path refuses");
	ok(err.code == BOX_E_INTEGRITY && strstr(err.message, "lib/util.lua changed"), "  %s", err.message);

	make_entry(HEXA, tree);
	rehash(HEXA, tree, &st, &err);
	snprintf(p, sizeof(p), "mv %s/sha256/%s/lib %s/sha256/%s/lib.real", store, HEXA, store, HEXA);
	sh(p);
	snprintf(p, sizeof(p), "%s/lib", HEXA);
	symlinkat("lib.real", shafd, p);
	is_int(warm(HEXA, tree), 0, "a directory swapped for a symlink to its content: cannot vouch");
	is_int(rehash(HEXA, tree, &st, &err), -1, "  the cold path refuses");
}

static void test_racy(void)
{
	char tree[BOX_VERIFY_DIGEST_LEN + 1], p[512];
	struct box_rehash_stats st;
	struct box_err err;
	struct stat now;
	struct timespec later;
	int fd;

	make_entry(HEXA, tree);
	rehash(HEXA, tree, &st, &err);
	/* main.sh changes in the same timestamp tick as the cache is written: with a coarse
	 * clock its stat then looks exactly as the cache recorded it */
	snprintf(p, sizeof(p), "%s/main.sh", HEXA);
	fd = openat(shafd, p, O_WRONLY);
	ok(fd >= 0 && pwrite(fd, "#!/bin/sh\necho '[]'\n", 20, 0) == 20, "main.sh rewritten, same size");
	close(fd);
	now = stat_of(HEXA, "main.sh");
	forge(HEXA, adopt_main, &now.st_ctim);
	is_int(warm(HEXA, tree), 0, "racily clean (changed no earlier than the cache was written): re-hash");
	is_int(rehash(HEXA, tree, &st, &err), -1, "  and the cold path reads it instead of trusting its stat");
	ok(err.code == BOX_E_INTEGRITY && strstr(err.message, "main.sh changed"), "  %s", err.message);
	/* the same cache written a tick later: now the stat is trusted, which is why the rule
	 * above must hold */
	later = now.st_ctim;
	later.tv_sec += 1;
	forge(HEXA, adopt_main, &later);
	is_int(warm(HEXA, tree), 1, "control: the same cache written later would vouch for main.sh");
}

static void test_bad_caches(void)
{
	char tree[BOX_VERIFY_DIGEST_LEN + 1], treeb[BOX_VERIFY_DIGEST_LEN + 1], name[80], cmd[2048];
	struct box_rehash_stats st;
	struct box_err err;
	struct box_buf b = BOX_BUF_INIT(BOX_VERIFY_CACHE_MAX);
	char *evil;

	make_entry(HEXA, tree);
	rehash(HEXA, tree, &st, &err);
	box_verify_cache_name(HEXA, name);
	box_err_init(&err);
	box_buf_read_file(&b, shafd, name, &err);

	write_raw(HEXA, "box-stat-cache-v1\nentry " HEXA "\ngarbage\n");
	is_int(warm(HEXA, tree), 0, "a corrupt cache: the warm check cannot vouch (no error)");
	is_int(rehash(HEXA, tree, &st, &err), 0, "  the cold path re-hashes");
	is_int(st.hashed, 4, "  everything");
	ok(st.cache_written, "  and replaces the cache");

	/* the good text cut in the middle of a record */
	b.data[b.len - 10] = 0;
	write_raw(HEXA, b.data);
	is_int(warm(HEXA, tree), 0, "a truncated cache vouches for nothing");
	rehash(HEXA, tree, &st, &err);
	is_int(st.hashed, 4, "  the cold path re-hashes everything");

	/* a cache naming a path outside the entry */
	evil = strstr(b.data, " lib/util.lua");
	if (evil)
		memcpy(evil, " ../../x.lua", 12);
	write_raw(HEXA, b.data);
	is_int(warm(HEXA, tree), 0, "a cache with a path leaving the entry is refused");

	rehash(HEXA, tree, &st, &err);
	box_verify_cache_name(HEXA, name);
	fchmodat(shafd, name, 0666, 0);
	is_int(warm(HEXA, tree), 0, "a cache that others may write vouches for nothing");
	fchmodat(shafd, name, 0644, 0);
	is_int(warm(HEXA, tree), 1, "  (the same cache, mode 0644, does)");

	/* another entry's cache under this entry's name, header and all */
	make_entry(HEXB, treeb);
	snprintf(cmd, sizeof(cmd), "cp %s/sha256/%s.stat %s/sha256/%s.stat", store, HEXA, store, HEXB);
	is_int(sh(cmd), 0, "entry a's cache copied as entry b's");
	tick();
	is_int(warm(HEXB, treeb), 0, "  vouches for nothing about b");
	is_int(rehash(HEXB, treeb, &st, &err), 0, "  the cold path verifies b");
	is_int(st.reused, 0, "  reusing none of a's digests");
	/* and with its header rewritten to name b: the inodes still are a's */
	snprintf(cmd, sizeof(cmd), "sed 's/^entry .*/entry %s/; s/^tree .*/tree %s/' %s/sha256/%s.stat > %s/sha256/%s.stat.x"
		 " && mv %s/sha256/%s.stat.x %s/sha256/%s.stat", HEXB, treeb, store, HEXA, store, HEXB,
		 store, HEXB, store, HEXB);
	is_int(sh(cmd), 0, "entry a's records under a header naming b");
	tick();
	is_int(warm(HEXB, treeb), 0, "  vouch for nothing about b");
	rehash(HEXB, treeb, &st, &err);
	is_int(st.reused, 0, "  and reuse none of a's digests");
	box_buf_release(&b);
}

static void test_expected_and_entry(void)
{
	char tree[BOX_VERIFY_DIGEST_LEN + 1], got[BOX_VERIFY_DIGEST_LEN + 1], name[80];
	struct box_verify_pin *pin;
	struct box_rehash_stats st;
	struct box_err err;
	const char *lib = getenv("BOX_LIBEXEC_DIR");
	char *saved = lib ? strdup(lib) : NULL;

	make_entry(HEXA, tree);
	box_err_init(&err);
	is_int(box_verify_expected(shafd, HEXA, "sha256:" HEXB, got, &err), 0, "box.lock's tree_digest comes first");
	is_str(got, "sha256:" HEXB, "  over the store's note");
	snprintf(name, sizeof(name), "%s.tree", HEXA);
	unlinkat(shafd, name, 0);
	is_int(box_verify_expected(shafd, HEXA, "", got, &err), -1, "no tree digest anywhere");
	is_int(err.code, BOX_E_INTEGRITY, "  is integrity_failed");
	box_atomic_write(shafd, name, "sha256:xyz", 10, 0644, &err);
	box_err_init(&err);
	is_int(box_verify_expected(shafd, HEXA, "", got, &err), -1, "a note that is no digest");
	is_int(err.code, BOX_E_INTEGRITY, "  is integrity_failed");
	box_atomic_write(shafd, name, tree, strlen(tree), 0644, &err);

	box_err_init(&err);
	pin = box_verify_pin_new(store, "sha256:" HEXA, "", "x@1.0.0", &err);
	ok(pin != NULL, "a pin without a tree digest of its own");
	if (!saved) {
		tap_skip("BOX_LIBEXEC_DIR is not set: no box-verify helper to run");
	} else {
		is_int(box_verify_entry(pin, &err), 0, "box_verify_entry: the helper verifies it (%s)", err.message);
		setenv("BOX_LIBEXEC_DIR", "/nonexistent", 1);
		is_int(box_verify_entry(pin, &err), 0, "  then the warm check alone, without the helper");
		put(HEXA, "lib/extra.lua", "x\n", 0644);
		box_err_init(&err);
		is_int(box_verify_entry(pin, &err), -1, "  a change and no helper: refused, never let through");
		ok(err.code != BOX_E_INTEGRITY && err.code != BOX_OK, "  as %s: %s",
		   box_err_code_name(err.code), err.message);
		setenv("BOX_LIBEXEC_DIR", saved, 1);
		box_err_init(&err);
		is_int(box_verify_entry(pin, &err), -1, "  with the helper: refused");
		is_int(err.code, BOX_E_INTEGRITY, "  integrity_failed");
		ok(strstr(err.message, "artifact x@1.0.0: ") == err.message &&
		   strstr(err.message, "lib/extra.lua was added") && strstr(err.message, "box-pull"),
		   "  naming the artifact, the file and the remedy: %s", err.message);
	}
	box_verify_pin_free(pin);
	pin = box_verify_pin_new(store, "sha256:" HEXB "0", "", "x", &err);
	ok(pin == NULL && err.code == BOX_E_INVALID, "a pin needs a valid digest");
	box_err_init(&err);
	rm_entry(HEXB);
	pin = box_verify_pin_new(store, "sha256:" HEXB, "sha256:" HEXA, "y@2.0.0", &err);
	is_int(box_verify_entry(pin, &err), -1, "a missing entry");
	is_int(err.code, BOX_E_NOT_FOUND, "  is not_found");
	box_verify_pin_free(pin);
	is_int(rehash(HEXB, tree, &st, &err), -1, "  for the cold path too");
	is_int(err.code, BOX_E_NOT_FOUND, "  not_found");
	free(saved);
}

int main(void)
{
	char path[160];

	snprintf(top, sizeof(top), "/tmp/t-verify.XXXXXX");
	if (!mkdtemp(top)) {
		printf("Bail out! mkdtemp\n");
		return 1;
	}
	snprintf(store, sizeof(store), "%s/store", top);
	snprintf(path, sizeof(path), "%s/sha256", store);
	if (mkdir(store, 0755) < 0 || mkdir(path, 0755) < 0 ||
	    (shafd = open(path, O_RDONLY | O_DIRECTORY)) < 0) {
		printf("Bail out! store\n");
		return 1;
	}
	test_clean();
	test_content_same_size();
	test_added_removed();
	test_modes_links_types();
	test_racy();
	test_bad_caches();
	test_expected_and_entry();
	close(shafd);
	snprintf(path, sizeof(path), "rm -rf %s", top);
	if (system(path) != 0)
		printf("# could not remove %s\n", top);
	return done_testing();
}
