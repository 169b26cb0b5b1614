/* lib/sandbox/sbrepro.c: the exec history (count and byte caps, trimming, torn lines, atomic
 * replacement), its entries (digests of the kept output, stdin never kept), the provenance
 * and the cache of the rootfs digest. */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "sbrepro.h"
#include "json.h"
#include "tap.h"
#include "banned.h"

static char dir[64];

static cJSON *entry_n(int i, size_t pad)
{
	char *big = malloc(pad + 1);
	cJSON *req = cJSON_CreateObject(), *res = cJSON_CreateObject(), *e;
	struct box_err err;

	box_err_init(&err);
	memset(big, 'x', pad);
	big[pad] = 0;
	cJSON_AddStringToObject(req, "op", "exec");
	box_json_add_int64(req, "n", i);
	cJSON_AddStringToObject(req, "command", big);
	cJSON_AddStringToObject(req, "stdin", "secret");
	cJSON_AddTrueToObject(req, "events");
	cJSON_AddTrueToObject(res, "ok");
	box_json_add_int64(res, "exit_code", 0);
	cJSON_AddItemToObject(res, "stdout", cJSON_CreateRaw("\"hi\\n\""));
	cJSON_AddStringToObject(res, "stderr", "");
	e = box_sbrepro_history_entry(req, res, &err);
	cJSON_Delete(req);
	cJSON_Delete(res);
	free(big);
	return e;
}

static int add(int i, size_t pad, int64_t cap)
{
	struct box_err err;
	cJSON *e = entry_n(i, pad);
	int r;

	box_err_init(&err);
	r = e ? box_sbrepro_history_add(dir, e, cap, &err) : -1;
	cJSON_Delete(e);
	return r;
}

static long file_size(void)
{
	char p[128];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, BOX_SBREPRO_HISTORY_FILE);
	return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

static int entries_in_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.' || strncmp(e->d_name, ".box-", 5) == 0;
	if (d)
		closedir(d);
	return n;
}

static void test_entry(void)
{
	cJSON *e = entry_n(1, 3);
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(e, "request");

	ok(e != NULL, "an entry is made");
	is_str(box_json_get_str(e, "stdout_sha256", ""),
	       "sha256:98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4",
	       "stdout's digest is that of the text, not of its raw JSON form");
	ok(!cJSON_GetObjectItemCaseSensitive(r, "stdin") &&
	   strncmp(box_json_get_str(r, "stdin_sha256", ""), "sha256:", 7) == 0,
	   "stdin is kept as its digest only");
	ok(!cJSON_GetObjectItemCaseSensitive(r, "events"), "events is not part of the request");
	cJSON_Delete(e);
}

static void test_bounds(void)
{
	struct box_err err;
	cJSON *h;
	int i;

	for (i = 1; i <= BOX_SBREPRO_HISTORY_MAX + 5; i++)
		if (add(i, 10, BOX_SBREPRO_HISTORY_BYTES) < 0)
			break;
	is_int(i, BOX_SBREPRO_HISTORY_MAX + 6, "every add succeeds");
	box_err_init(&err);
	h = box_sbrepro_history_read(dir, 0, &err);
	is_int(cJSON_GetArraySize(h), BOX_SBREPRO_HISTORY_MAX, "the count is capped");
	is_int(box_json_get_int(cJSON_GetObjectItemCaseSensitive(h->child, "request"), "n", 0), 6,
	       "the oldest are dropped");
	cJSON_Delete(h);
	h = box_sbrepro_history_read(dir, 2, &err);
	ok(cJSON_GetArraySize(h) == 2 && box_json_get_int(cJSON_GetObjectItemCaseSensitive(
		   h->child->next, "request"), "n", 0) == BOX_SBREPRO_HISTORY_MAX + 5,
	   "limit gives the newest, oldest first");
	cJSON_Delete(h);
	is_int(entries_in_dir(), 1, "no temporary file is left");
	/* bytes: entries of ~1 kB under an 8 KiB cap */
	for (i = 1; i <= 20; i++)
		add(i, 1000, 8192);
	ok(file_size() > 0 && file_size() <= 8192, "the byte cap holds (%ld)", file_size());
	h = box_sbrepro_history_read(dir, 0, &err);
	ok(cJSON_GetArraySize(h) >= 4 && cJSON_GetArraySize(h) < 20, "the newest that fit are kept");
	cJSON_Delete(h);
	/* an entry over a quarter of the cap keeps digests */
	add(99, 5000, 8192);
	h = box_sbrepro_history_read(dir, 1, &err);
	ok(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(h->child, "trimmed")) &&
	   !cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(h->child, "request"),
					     "command") &&
	   cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(h->child, "request"),
					    "command_sha256"), "a large entry is trimmed to digests");
	cJSON_Delete(h);
	ok(file_size() <= 8192, "and the cap still holds");
}

static void test_torn(void)
{
	struct box_err err;
	char p[128];
	FILE *f;
	cJSON *h;

	snprintf(p, sizeof(p), "%s/%s", dir, BOX_SBREPRO_HISTORY_FILE);
	unlink(p);
	add(1, 1, BOX_SBREPRO_HISTORY_BYTES);
	f = fopen(p, "a");
	fputs("not json\n{\"at\": \"torn", f);
	fclose(f);
	box_err_init(&err);
	h = box_sbrepro_history_read(dir, 0, &err);
	is_int(cJSON_GetArraySize(h), 1, "bad and torn lines are skipped");
	cJSON_Delete(h);
	add(2, 1, BOX_SBREPRO_HISTORY_BYTES);
	h = box_sbrepro_history_read(dir, 0, &err);
	is_int(cJSON_GetArraySize(h), 2, "the next add drops the torn line");
	cJSON_Delete(h);
	unlink(p);
	h = box_sbrepro_history_read(dir, 0, &err);
	ok(h && cJSON_GetArraySize(h) == 0, "no file: an empty history");
	cJSON_Delete(h);
	is_int(box_sbrepro_history_cap((int64_t)1 << 20), 65536, "cap: disk_bytes / 16");
	is_int(box_sbrepro_history_cap((int64_t)1 << 40), BOX_SBREPRO_HISTORY_BYTES,
	       "cap: at most BOX_SBREPRO_HISTORY_BYTES");
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

/* the session digest of a new session directory NAME under dir */
static int session_digest(const char *name, struct box_sbrepro_rootfs *r)
{
	char sd[256];
	struct box_err err;

	box_err_init(&err);
	snprintf(sd, sizeof(sd), "%s/%s", dir, name);
	mkdir(sd, 0700);
	memset(r, 0, sizeof(*r));
	if (box_sbrepro_rootfs_session(sd, r, &err) < 0) {
		printf("# %s: %s: %s\n", name, box_err_code_name(err.code), err.message);
		return -1;
	}
	return 0;
}

/* the verification walk, in a child (it lowers its own priority) */
static int verify(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		struct box_err err;

		box_err_init(&err);
		_exit(box_sbrepro_rootfs_verify(&err) == 0 ? 0 : 1);
	}
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 ?
	       0 : -1;
}

/* A fake root filesystem (BOX_SBREPRO_ROOTS) and a cache of our own (XDG_CACHE_HOME): the
 * first session walks and fills the cache, the next take it; a file changed in place three
 * levels down, with its directories' stamps put back, is seen by sessions after the next
 * verification walk; a directory change is a miss (a walk); the session keeps its digest. */
static void test_rootfs_session(void)
{
	struct box_sbrepro_rootfs a, b, c, d;
	int rc;
	char roots[512], p[256], cache[256];
	struct stat st;

	snprintf(roots, sizeof(roots), "%s/fake/usr:%s/fake/etc", dir, dir);
	setenv("BOX_SBREPRO_ROOTS", roots, 1);
	snprintf(p, sizeof(p), "%s/xdg", dir);
	setenv("XDG_CACHE_HOME", p, 1);
	snprintf(cache, sizeof(cache), "%s/xdg/box/rootfs.json", dir);
	setenv("BOX_SBREPRO_VERIFY_INTERVAL", "3600", 1);
	ok(sh("mkdir -p %s/fake/usr/lib/x/y %s/fake/etc && echo one >%s/fake/usr/lib/x/y/f && "
	      "echo conf >%s/fake/etc/c && ln -s lib %s/fake/usr/l", dir, dir, dir, dir, dir) == 0,
	   "fake rootfs");
	/* the call first: an argument of ok() may be evaluated before its condition */
	rc = session_digest("s1", &a);
	ok(rc == 0 && !a.cached && !a.from_cache && a.entries == 6 && a.complete &&
	   a.verified_at[0], "first use walks (%lld entries)", (long long)a.entries);
	snprintf(p, sizeof(p), "%s/s1/rootfs.json", dir);
	ok(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600, "kept in the session directory");
	ok(stat(cache, &st) == 0 && S_ISREG(st.st_mode), "and in the host-wide cache");
	ok(session_digest("s1", &b) == 0 && b.cached && !strcmp(a.digest, b.digest) &&
	   b.entries == a.entries && !b.from_cache, "the next use reads it");
	ok(session_digest("s2", &c) == 0 && !c.cached && c.from_cache && !strcmp(a.digest, c.digest) &&
	   !strcmp(a.verified_at, c.verified_at), "a new session takes the cache");
	/* in place, same size, directory stamps restored: only the file's mtime tells */
	ok(sh("cd %s/fake/usr/lib/x && t=$(stat -c %%y . y) && sleep 0.01 && echo two >y/f && "
	      "touch -d \"$(stat -c %%y . | head -1)\" . && touch -d \"$(echo \"$t\" | sed -n 2p)\" y",
	      dir) == 0, "file changed in place three levels down");
	ok(session_digest("s3", &d) == 0 && d.from_cache && !strcmp(a.digest, d.digest),
	   "before a verification, the next session takes the cache (not seen)");
	ok(verify() == 0, "a verification walk");
	ok(session_digest("s4", &d) == 0 && d.from_cache && strcmp(a.digest, d.digest) != 0,
	   "the session after it sees the change");
	ok(session_digest("s1", &b) == 0 && !strcmp(a.digest, b.digest),
	   "the session that walked keeps its digest");
	ok(sh("echo new >%s/fake/etc/n", dir) == 0 && session_digest("s5", &c) == 0 &&
	   !c.from_cache && c.entries == 7 && strcmp(c.digest, d.digest) != 0,
	   "a directory change: a miss, walked");
	/* hostile cache files: walked over, and replaced by a good one */
	{
		/* $C: the cache file */
		static const char *const bad[] = {
			"echo garbage >$C", "head -c 100 $C.good >$C",
			"jq -c '.entries = \"7\"' $C.good >$C",
			"jq -c '.dirs = [1, 2]' $C.good >$C",
			"jq -c '.dirs = \"/\"' $C.good >$C",
			"jq -c '.digest = \"sha256:00\"' $C.good >$C",
			"jq -c '.verified_at = 5' $C.good >$C",
			"jq -c '.dirs = [range(200000) | \"/\"]' $C.good >$C",
			"head -c 5000000 /dev/zero | tr '\\0' ' ' >$C",
			"ln -s $C.good $C",
		};
		char name[16];
		int i;

		setenv("C", cache, 1);
		ok(sh("cp $C $C.good && cp $C $C.orig") == 0, "a good cache kept aside");
		for (i = 0; i < (int)(sizeof(bad) / sizeof(bad[0])); i++) {
			snprintf(name, sizeof(name), "h%d", i);
			ok(sh("rm -f $C && %s", bad[i]) == 0 && session_digest(name, &b) == 0 &&
			   !b.from_cache && !strcmp(b.digest, c.digest) && lstat(cache, &st) == 0 &&
			   S_ISREG(st.st_mode) && st.st_size < 4096 &&
			   sh("jq -e '.version == 3 and .digest == \"%s\"' $C >/dev/null", c.digest) ==
			   0, "hostile cache %d (%s): walked, rewritten", i, bad[i]);
		}
		ok(sh("cmp -s $C.good $C.orig") == 0, "the symlink's target is untouched");
		unsetenv("C");
	}
	/* a file that is not the session's digest is read over, and replaced */
	snprintf(p, sizeof(p), "%s/s5/rootfs.json", dir);
	for (int i = 0; i < 3; i++) {
		static const char *const bad[] = { "garbage", "{\"version\":3,\"digest\":\"x\"}",
						   "{\"version\":2,\"digest\":\"sha256:00\"}" };
		FILE *f = fopen(p, "w");

		fputs(bad[i], f);
		fclose(f);
		ok(session_digest("s5", &b) == 0 && !b.cached && !strcmp(b.digest, c.digest),
		   "a bad session file (%d) is done again", i);
	}
	/* a missing session directory */
	{
		struct box_err err;

		box_err_init(&err);
		snprintf(p, sizeof(p), "%s/nope", dir);
		ok(box_sbrepro_rootfs_session(p, &b, &err) < 0 && err.code != BOX_OK,
		   "no session directory: an error");
	}
	unsetenv("BOX_SBREPRO_ROOTS");
	unsetenv("BOX_SBREPRO_VERIFY_INTERVAL");
	unsetenv("XDG_CACHE_HOME");
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/t-sbrepro.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	test_entry();
	test_bounds();
	test_torn();
	test_rootfs_session();
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			ok(0, "cleanup");
	}
	return done_testing();
}
