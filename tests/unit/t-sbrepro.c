/* lib/sandbox/sbrepro.c: the exec history (count and byte caps, trimming, torn lines, atomic
 * replacement), its entries (digests of the kept output, stdin never kept), the provenance
 * and the cache of the rootfs digest. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static void test_cache_path(void)
{
	char p[256];

	setenv("XDG_CACHE_HOME", "/c", 1);
	ok(box_sbrepro_rootfs_cache_path(p, sizeof(p)) == 0 && !strcmp(p, "/c/box/rootfs.json"),
	   "XDG_CACHE_HOME first");
	setenv("XDG_CACHE_HOME", "relative", 1);
	setenv("HOME", "/h", 1);
	ok(box_sbrepro_rootfs_cache_path(p, sizeof(p)) == 0 &&
	   !strcmp(p, "/h/.cache/box/rootfs.json"), "a relative XDG_CACHE_HOME is ignored");
	unsetenv("XDG_CACHE_HOME");
	unsetenv("HOME");
	setenv("BOX_STATE_DIR", "/s", 1);
	ok(box_sbrepro_rootfs_cache_path(p, sizeof(p)) == 0 && !strcmp(p, "/s/cache/rootfs.json"),
	   "then BOX_STATE_DIR");
	unsetenv("BOX_STATE_DIR");
	ok(box_sbrepro_rootfs_cache_path(p, sizeof(p)) < 0, "none: no cache");
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/t-sbrepro.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	test_entry();
	test_bounds();
	test_torn();
	test_cache_path();
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			ok(0, "cleanup");
	}
	return done_testing();
}
