#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "json.h"
#include "oci.h"
#include "sha256.h"
#include "tap.h"
#include "banned.h"

#define HELLO "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
#define ZEROS "sha256:0000000000000000000000000000000000000000000000000000000000000000"

static char top[64];

static void path_of(char *out, size_t n, const char *sub)
{
	snprintf(out, n, "%s/%s", top, sub);
}

static int write_file(const char *dir, const char *name, const char *text)
{
	char p[512];
	int fd, r;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	unlink(p);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	r = box_write_all(fd, text, strlen(text));
	close(fd);
	return r;
}

static char *read_text(const char *dir, const char *name)
{
	struct box_buf b = BOX_BUF_INIT(1 << 24);
	struct box_err err;
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (box_buf_read_file(&b, AT_FDCWD, p, &err) < 0)
		return NULL;
	return box_buf_detach(&b, NULL);
}

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

/* Number of manifests in index.json, or -1 if it does not parse. */
static int index_count(const char *dir)
{
	char *t = read_text(dir, "index.json");
	struct box_err err;
	cJSON *j;
	int n;

	if (!t)
		return -1;
	j = box_json_parse(t, strlen(t), &err);
	free(t);
	if (!j)
		return -1;
	n = cJSON_GetArraySize(cJSON_GetObjectItem(j, "manifests"));
	cJSON_Delete(j);
	return n;
}

static void test_names(void)
{
	struct box_err err;
	static const char *good[] = { "hello", "acme/hello-world", "a.b_c__d", "x--y", "a0/b1/c2" };
	static const char *bad[] = { "", "Hello", "a//b", "a:b", "-a", "a_", "a___b", "/a", "a/",
				     "a..b", "a b" };
	static const char *goodtag[] = { "1.0.0", "latest", "_x", "V1-rc.2_3" };
	static const char *badtag[] = { "", ".1", "-x", "a:b", "a/b", "a b" };
	char longtag[200];

	box_err_init(&err);
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		is_int(box_oci_name_check(good[i], &err), 0, "name '%s' is valid", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		box_err_init(&err);
		ok(box_oci_name_check(bad[i], &err) == -1 && err.code == BOX_E_INVALID,
		   "name '%s' is invalid_request", bad[i]);
	}
	for (size_t i = 0; i < sizeof(goodtag) / sizeof(*goodtag); i++)
		is_int(box_oci_tag_check(goodtag[i], &err), 0, "tag '%s' is valid", goodtag[i]);
	for (size_t i = 0; i < sizeof(badtag) / sizeof(*badtag); i++) {
		box_err_init(&err);
		ok(box_oci_tag_check(badtag[i], &err) == -1 && err.code == BOX_E_INVALID,
		   "tag '%s' is invalid_request", badtag[i]);
	}
	memset(longtag, 'a', 129);
	longtag[129] = 0;
	is_int(box_oci_tag_check(longtag, &err), -1, "a 129-byte tag is refused");
	longtag[128] = 0;
	is_int(box_oci_tag_check(longtag, &err), 0, "a 128-byte tag is fine");

	is_int(box_oci_digest_check(HELLO, &err), 0, "digest syntax ok");
	box_err_init(&err);
	is_int(box_oci_digest_check("sha256:2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824", &err),
	       -1, "uppercase hex is refused");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	is_int(box_oci_digest_check("sha512:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", &err),
	       -1, "another algorithm is refused");
	is_int(box_oci_digest_check(HELLO "0", &err), -1, "65 hex digits are refused");
	is_int(box_oci_digest_check("sha256:../../etc/passwd", &err), -1, "a path is refused");
}

static void test_open(void)
{
	struct box_oci o;
	struct box_err err;
	char dir[512], *t;
	struct stat st;
	int fd;

	path_of(dir, sizeof(dir), "new");
	box_err_init(&err);
	is_int(box_oci_open(dir, 0, &o, &err), -1, "open of a missing layout fails");
	is_int(err.code, BOX_E_NOT_FOUND, "  not_found");

	box_err_init(&err);
	is_int(box_oci_open(dir, 1, &o, &err), 0, "create a layout");
	box_oci_close(&o);
	t = read_text(dir, "oci-layout");
	is_str(t, "{\"imageLayoutVersion\":\"1.0.0\"}", "  oci-layout");
	free(t);
	t = read_text(dir, "index.json");
	is_str(t, "{\"schemaVersion\":2,\"manifests\":[]}", "  index.json");
	free(t);
	path_of(dir, sizeof(dir), "new/blobs/sha256");
	ok(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), "  blobs/sha256 is a directory");

	path_of(dir, sizeof(dir), "new");
	is_int(box_oci_open(dir, 0, &o, &err), 0, "open it again");
	box_oci_close(&o);
	box_oci_close(&o);
	ok(1, "close twice is harmless");
	is_int(box_oci_open(dir, 1, &o, &err), 0, "create over an existing layout keeps it");
	box_oci_close(&o);

	write_file(dir, "oci-layout", "{\"imageLayoutVersion\":\"2.0.0\"}");
	box_err_init(&err);
	is_int(box_oci_open(dir, 0, &o, &err), -1, "a layout of version 2 is refused");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	is_str(err.path, "oci-layout", "  path oci-layout");
	write_file(dir, "oci-layout", "not json");
	box_err_init(&err);
	is_int(box_oci_open(dir, 1, &o, &err), -1, "a malformed oci-layout is refused, even with create");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	write_file(dir, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");

	write_file(dir, "index.json", "{\"schemaVersion\":1,\"manifests\":[]}");
	box_err_init(&err);
	is_int(box_oci_open(dir, 0, &o, &err), -1, "index.json of schemaVersion 1 is refused");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	is_str(err.path, "index.json", "  path index.json");
	write_file(dir, "index.json", "{\"schemaVersion\":2,\"manifests\":{}}");
	box_err_init(&err);
	is_int(box_oci_open(dir, 0, &o, &err), -1, "manifests that are not an array are refused");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	write_file(dir, "index.json", "{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"x\"}]}");
	box_err_init(&err);
	is_int(box_oci_open(dir, 0, &o, &err), -1, "a descriptor without mediaType and size is refused");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	write_file(dir, "index.json", "{\"schemaVersion\":2,\"manifests\":[]} x");
	box_err_init(&err);
	is_int(box_oci_open(dir, 0, &o, &err), -1, "trailing garbage in index.json is refused");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");

	{
		char p[600];

		snprintf(p, sizeof(p), "%s/index.json", dir);
		fd = open(p, O_WRONLY | O_TRUNC);
		ok(fd >= 0 && ftruncate(fd, BOX_OCI_INDEX_MAX + 1) == 0, "a 16 MiB + 1 index.json");
		close(fd);
		box_err_init(&err);
		is_int(box_oci_open(dir, 0, &o, &err), -1, "  is refused (size cap)");
		is_int(err.code, BOX_E_INVALID, "  invalid_request");
		unlink(p);
		ok(symlink("oci-layout", p) == 0, "index.json as a symlink");
		box_err_init(&err);
		is_int(box_oci_open(dir, 0, &o, &err), -1, "  is refused");
		is_int(err.code, BOX_E_INVALID, "  invalid_request");
		unlink(p);
		box_err_init(&err);
		is_int(box_oci_open(dir, 0, &o, &err), -1, "a layout without index.json");
		is_int(err.code, BOX_E_NOT_FOUND, "  not_found");
	}
}

static void test_blobs(struct box_oci *o)
{
	struct box_err err;
	char dg[BOX_OCI_DIGEST_LEN];
	int64_t size = -1;
	int fd, p[2], n0;

	box_err_init(&err);
	is_int(box_oci_put_blob_buf(o, "hello", 5, NULL, dg, &err), 0, "put a blob from memory");
	is_str(dg, HELLO, "  its digest");
	is_int(box_oci_put_blob_buf(o, "hello", 5, HELLO, dg, &err), 0, "put it again, expected digest");
	fd = box_oci_open_blob(o, HELLO, &size, &err);
	ok(fd >= 0, "open the blob");
	is_int(size, 5, "  5 bytes");
	if (fd >= 0)
		close(fd);
	is_int(box_oci_verify_blob(o, HELLO, &size, &err), 0, "verify it");

	box_err_init(&err);
	is_int(box_oci_open_blob(o, ZEROS, NULL, &err), -1, "open of an absent blob");
	is_int(err.code, BOX_E_NOT_FOUND, "  not_found");
	box_err_init(&err);
	is_int(box_oci_open_blob(o, "sha256:abc", NULL, &err), -1, "open of a malformed digest");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	box_err_init(&err);
	is_int(box_oci_put_blob_buf(o, "world", 5, HELLO, dg, &err), -1, "memory blob with a wrong digest");
	is_int(err.code, BOX_E_INTEGRITY, "  integrity_failed");

	n0 = count_entries(o->blobsfd);
	ok(pipe(p) == 0, "a pipe");
	write(p[1], "hello", 5);
	close(p[1]);
	box_err_init(&err);
	is_int(box_oci_put_blob_fd(o, p[0], ZEROS, -1, dg, &size, &err), -1,
	       "streamed blob with a wrong expected digest");
	is_int(err.code, BOX_E_INTEGRITY, "  integrity_failed");
	close(p[0]);
	is_int(count_entries(o->blobsfd), n0, "  nothing left behind");

	pipe(p);
	write(p[1], "hello world", 11);
	close(p[1]);
	box_err_init(&err);
	is_int(box_oci_put_blob_fd(o, p[0], NULL, 10, dg, &size, &err), -1,
	       "streamed blob over the size cap");
	is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
	is_str(err.limit, "blob_bytes", "  limit blob_bytes");
	is_int(err.configured, 10, "  configured 10");
	close(p[0]);
	is_int(count_entries(o->blobsfd), n0, "  nothing left behind");

	box_err_init(&err);
	is_int(box_oci_put_blob_fd(o, 0, "sha256:xyz", -1, dg, &size, &err), -1,
	       "a malformed expected digest");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");

	pipe(p);
	write(p[1], "hello world", 11);
	close(p[1]);
	size = 0;
	is_int(box_oci_put_blob_fd(o, p[0], "sha256:b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9",
				   11, dg, &size, &err), 0, "streamed blob, right digest, exactly at the cap");
	close(p[0]);
	is_int(size, 11, "  11 bytes");
	is_int(count_entries(o->blobsfd), n0 + 1, "  one more blob, no temp file");
	is_int(box_oci_verify_blob(o, dg, NULL, &err), 0, "  verifies");

	/* flip a byte in the stored blob */
	fd = openat(o->blobsfd, dg + 7, O_WRONLY);
	pwrite(fd, "H", 1, 0);
	close(fd);
	box_err_init(&err);
	is_int(box_oci_verify_blob(o, dg, NULL, &err), -1, "a flipped byte fails verification");
	is_int(err.code, BOX_E_INTEGRITY, "  integrity_failed");
}

#define CANON "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\"," \
	"\"artifactType\":\"application/vnd.box.artifact.v1\",\"config\":{\"mediaType\":" \
	"\"application/vnd.box.artifact.config.v1+json\",\"digest\":\"" HELLO "\",\"size\":5}," \
	"\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"" \
	ZEROS "\",\"size\":12345678901,\"annotations\":{\"org.opencontainers.image.title\":" \
	"\"hello-1.0.0.tar.gz\"}}]}"

static void test_builder(void)
{
	struct box_oci_artifact a;
	struct box_err err;
	char *m1, *m2;
	size_t l1 = 0, l2 = 0;

	m1 = box_oci_artifact_manifest(HELLO, 5, ZEROS, 12345678901LL, "hello-1.0.0.tar.gz", &l1);
	m2 = box_oci_artifact_manifest(HELLO, 5, ZEROS, 12345678901LL, "hello-1.0.0.tar.gz", &l2);
	is_str(m1, CANON, "the artifact manifest is canonical");
	ok(m1 && m2 && l1 == l2 && l1 == strlen(CANON) && memcmp(m1, m2, l1) == 0,
	   "  the same bytes twice");
	box_err_init(&err);
	is_int(box_oci_artifact_parse(m1, l1, &a, &err), 0, "parse it back");
	is_str(a.config_digest, HELLO, "  config digest");
	is_int(a.config_size, 5, "  config size");
	is_str(a.layer_digest, ZEROS, "  layer digest");
	is_int(a.layer_size, 12345678901LL, "  layer size exact past 2^32");
	is_str(a.layer_media_type, BOX_OCI_MT_LAYER_TGZ, "  layer media type");
	is_str(a.title, "hello-1.0.0.tar.gz", "  title");
	free(m1);
	free(m2);

	m1 = box_oci_artifact_manifest(HELLO, 5, ZEROS, 1, "a \"quoted\" name", &l1);
	ok(m1 && strstr(m1, "\"a \\\"quoted\\\" name\""), "a title is JSON-escaped");
	free(m1);
	ok(!box_oci_artifact_manifest("sha256:x", 5, ZEROS, 1, "t", NULL), "bad config digest: NULL");
	ok(!box_oci_artifact_manifest(HELLO, -1, ZEROS, 1, "t", NULL), "negative size: NULL");
	ok(!box_oci_artifact_manifest(HELLO, 1, ZEROS, 1, "", NULL), "empty title: NULL");
	ok(!box_oci_artifact_manifest(HELLO, 1, ZEROS, 1, "a\nb", NULL), "control character: NULL");

	{
		static const char wrong_type[] = "{\"schemaVersion\":2,\"mediaType\":"
			"\"application/vnd.oci.image.manifest.v1+json\",\"artifactType\":\"x/y\","
			"\"config\":{},\"layers\":[]}";
		static const char two_layers[] = "{\"schemaVersion\":2,\"artifactType\":"
			"\"application/vnd.box.artifact.v1\",\"config\":{\"mediaType\":"
			"\"application/vnd.box.artifact.config.v1+json\",\"digest\":\"" HELLO
			"\",\"size\":5},\"layers\":[{\"mediaType\":\"a\",\"digest\":\"" HELLO
			"\",\"size\":5},{\"mediaType\":\"a\",\"digest\":\"" HELLO "\",\"size\":5}]}";

		box_err_init(&err);
		is_int(box_oci_artifact_parse(wrong_type, strlen(wrong_type), &a, &err), -1,
		       "another artifactType is refused");
		is_int(err.code, BOX_E_INVALID, "  invalid_request");
		is_str(err.path, "$.artifactType", "  path");
		box_err_init(&err);
		is_int(box_oci_artifact_parse(two_layers, strlen(two_layers), &a, &err), -1,
		       "two layers are refused");
		is_str(err.path, "$.layers", "  path");
	}
}

/* Puts config + layer blobs and the manifest of an artifact titled title; returns its text. */
static char *put_artifact(struct box_oci *o, const char *title, size_t *len)
{
	struct box_err err;
	char cfg[BOX_OCI_DIGEST_LEN], lay[BOX_OCI_DIGEST_LEN];

	box_err_init(&err);
	if (box_oci_put_blob_buf(o, "{\"name\":\"hello\"}", 16, NULL, cfg, &err) < 0 ||
	    box_oci_put_blob_buf(o, title, strlen(title), NULL, lay, &err) < 0)
		return NULL;
	return box_oci_artifact_manifest(cfg, 16, lay, (int64_t)strlen(title), title, len);
}

static void test_manifests(const char *dir)
{
	struct box_buf got = BOX_BUF_INIT(1 << 20);
	struct box_oci o;
	struct box_err err;
	char dg[BOX_OCI_DIGEST_LEN], dg2[BOX_OCI_DIGEST_LEN], rdg[BOX_OCI_DIGEST_LEN], hex[65];
	char *m1, *m2, *t;
	size_t l1 = 0, l2 = 0;
	cJSON *tags;

	box_err_init(&err);
	if (box_oci_open(dir, 1, &o, &err) < 0) {
		ok(0, "open layout for manifests: %s", err.message);
		return;
	}
	m1 = put_artifact(&o, "one.tar.gz", &l1);
	m2 = put_artifact(&o, "two-two.tar.gz", &l2);
	ok(m1 && m2, "two artifact manifests");
	is_int(box_oci_put_manifest(&o, m1, l1, "hello", "1.0.0", 0, dg, &err), 0,
	       "put manifest hello:1.0.0");
	box_sha256_buf(m1, l1, hex, &err);
	ok(strncmp(dg, "sha256:", 7) == 0 && strcmp(dg + 7, hex) == 0, "  digest of its bytes");
	t = read_text(dir, "index.json");
	ok(t && strstr(t, "\"artifactType\":\"application/vnd.box.artifact.v1\"") &&
	   strstr(t, "\"org.opencontainers.image.ref.name\":\"hello:1.0.0\"") &&
	   strstr(t, "\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\""),
	   "  index.json has the descriptor with artifactType and ref.name");
	free(t);
	is_int(index_count(dir), 1, "  one entry");
	is_int(box_oci_put_manifest(&o, m1, l1, "hello", "1.0.0", 0, NULL, &err), 0,
	       "put the same again is fine");
	is_int(index_count(dir), 1, "  still one entry");

	is_int(box_oci_resolve(&o, "hello", "1.0.0", rdg, &got, &err), 0, "resolve by tag");
	is_str(rdg, dg, "  same digest");
	ok(got.len == l1 && memcmp(got.data, m1, l1) == 0, "  same bytes");
	box_buf_release(&got);
	is_int(box_oci_resolve(&o, "hello", dg, rdg, &got, &err), 0, "resolve by digest");
	is_str(rdg, dg, "  same digest");
	ok(got.len == l1 && memcmp(got.data, m1, l1) == 0, "  same bytes");
	box_err_init(&err);
	is_int(box_oci_resolve(&o, "hello", "9.9.9", rdg, &got, &err), -1, "resolve an unknown tag");
	is_int(err.code, BOX_E_NOT_FOUND, "  not_found");
	box_err_init(&err);
	is_int(box_oci_resolve(&o, "other", "1.0.0", rdg, &got, &err), -1, "resolve another name");
	is_int(err.code, BOX_E_NOT_FOUND, "  not_found");
	box_err_init(&err);
	is_int(box_oci_resolve(&o, "hello", ZEROS, rdg, &got, &err), -1, "resolve an unknown digest");
	is_int(err.code, BOX_E_NOT_FOUND, "  not_found");
	box_err_init(&err);
	is_int(box_oci_resolve(&o, "hello", "bad tag", rdg, &got, &err), -1, "resolve a bad tag");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");
	box_err_init(&err);
	is_int(box_oci_resolve(&o, "Hello", "1.0.0", rdg, &got, &err), -1, "resolve a bad name");
	is_int(err.code, BOX_E_INVALID, "  invalid_request");

	box_err_init(&err);
	is_int(box_oci_put_manifest(&o, m2, l2, "hello", "1.0.0", 0, dg2, &err), -1,
	       "moving a tag without replace");
	is_int(err.code, BOX_E_CONFLICT, "  conflict");
	is_int(index_count(dir), 1, "  index.json unchanged");
	box_oci_resolve(&o, "hello", "1.0.0", rdg, NULL, &err);
	is_str(rdg, dg, "  the tag still points to the first manifest");
	box_err_init(&err);
	is_int(box_oci_put_manifest(&o, m2, l2, "hello", "1.0.0", 1, dg2, &err), 0,
	       "moving it with replace");
	is_int(index_count(dir), 1, "  still one entry");
	box_oci_resolve(&o, "hello", "1.0.0", rdg, NULL, &err);
	is_str(rdg, dg2, "  the tag points to the second manifest");
	is_int(box_oci_put_manifest(&o, m1, l1, "hello", "2.0.0", 0, NULL, &err), 0, "put hello:2.0.0");
	is_int(box_oci_put_manifest(&o, m1, l1, "hello-world", "3.0.0", 0, NULL, &err), 0,
	       "put hello-world:3.0.0");
	is_int(box_oci_put_manifest(&o, m1, l1, "hello", "10.0.0", 0, NULL, &err), 0,
	       "put hello:10.0.0");
	tags = box_oci_tags(&o, "hello", &err);
	t = tags ? cJSON_PrintUnformatted(tags) : NULL;
	is_str(t, "[\"1.0.0\",\"10.0.0\",\"2.0.0\"]", "tags of hello, sorted, not those of hello-world");
	free(t);
	cJSON_Delete(tags);
	tags = box_oci_tags(&o, "nothing", &err);
	ok(tags && cJSON_GetArraySize(tags) == 0, "no tags for an unknown name");
	cJSON_Delete(tags);
	box_err_init(&err);
	ok(!box_oci_tags(&o, "A", &err) && err.code == BOX_E_INVALID, "tags of a bad name: invalid_request");

	{
		static const char missing[] = "{\"schemaVersion\":2,\"mediaType\":"
			"\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":\"a\","
			"\"digest\":\"" ZEROS "\",\"size\":1},\"layers\":[]}";
		static const char wrongsize[] = "{\"schemaVersion\":2,\"mediaType\":"
			"\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":\"a\","
			"\"digest\":\"" HELLO "\",\"size\":6},\"layers\":[]}";
		static const char v1[] = "{\"schemaVersion\":1,\"layers\":[]}";
		int n = index_count(dir);

		box_oci_put_blob_buf(&o, "hello", 5, NULL, NULL, &err);

		box_err_init(&err);
		is_int(box_oci_put_manifest(&o, missing, strlen(missing), "hello", "x", 0, NULL, &err),
		       -1, "a manifest referring to a missing blob");
		is_int(err.code, BOX_E_NOT_FOUND, "  not_found");
		box_err_init(&err);
		is_int(box_oci_put_manifest(&o, wrongsize, strlen(wrongsize), "hello", "x", 0, NULL,
					    &err), -1, "a manifest with a wrong blob size");
		is_int(err.code, BOX_E_INVALID, "  invalid_request");
		box_err_init(&err);
		is_int(box_oci_put_manifest(&o, v1, strlen(v1), "hello", "x", 0, NULL, &err), -1,
		       "schemaVersion 1");
		is_int(err.code, BOX_E_INVALID, "  invalid_request");
		box_err_init(&err);
		is_int(box_oci_put_manifest(&o, m1, l1, "hello", "bad:tag", 0, NULL, &err), -1,
		       "a bad tag");
		is_int(err.code, BOX_E_INVALID, "  invalid_request");
		is_int(index_count(dir), n, "  none of them touched index.json");
	}

	/* an image index tagged "multi" whose second entry is the box artifact */
	{
		char idx[1024], idg[BOX_OCI_DIGEST_LEN];

		snprintf(idx, sizeof(idx), "{\"schemaVersion\":2,\"mediaType\":"
			 "\"application/vnd.oci.image.index.v1+json\",\"manifests\":["
			 "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
			 "\"digest\":\"%s\",\"size\":%zu},"
			 "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
			 "\"artifactType\":\"application/vnd.box.artifact.v1\","
			 "\"digest\":\"%s\",\"size\":%zu}]}", dg, l1, dg2, l2);
		is_int(box_oci_put_manifest(&o, idx, strlen(idx), "hello", "multi", 0, idg, &err), 0,
		       "put an image index");
		t = read_text(dir, "index.json");
		ok(t && strstr(t, "\"mediaType\":\"application/vnd.oci.image.index.v1+json\""),
		   "  listed as an index");
		free(t);
		is_int(box_oci_resolve(&o, "hello", "multi", rdg, &got, &err), 0, "resolve it");
		is_str(rdg, dg2, "  picks the box artifact");
		ok(got.len == l2 && memcmp(got.data, m2, l2) == 0, "  its bytes");
	}

	/* a descriptor whose size lies */
	{
		char *ix = read_text(dir, "index.json"), *p;
		char old[64], lie[64];
		int fd;

		snprintf(old, sizeof(old), "\"size\":%zu,\"annotations\"", l1);
		snprintf(lie, sizeof(lie), "\"size\":%zu,\"annotations\"", l1 + 1);
		p = ix ? strstr(ix, old) : NULL;
		ok(p != NULL && strlen(old) == strlen(lie), "find a descriptor size to lie about");
		if (p && strlen(old) == strlen(lie)) {
			memcpy(p, lie, strlen(lie));
			write_file(dir, "index.json", ix);
			box_err_init(&err);
			is_int(box_oci_resolve(&o, "hello", "2.0.0", rdg, &got, &err), -1,
			       "  resolve fails");
			is_int(err.code, BOX_E_INTEGRITY, "  integrity_failed");
		}
		free(ix);

		/* flip a byte of the stored manifest */
		fd = openat(o.blobsfd, dg2 + 7, O_RDWR);
		ok(fd >= 0 && pwrite(fd, " ", 1, 0) == 1, "flip a byte in a manifest blob");
		close(fd);
		box_err_init(&err);
		is_int(box_oci_resolve(&o, "hello", dg2, rdg, &got, &err), -1, "resolve by digest");
		is_int(err.code, BOX_E_INTEGRITY, "  integrity_failed");
		box_err_init(&err);
		is_int(box_oci_resolve(&o, "hello", "multi", rdg, &got, &err), -1,
		       "resolve through the index");
		is_int(err.code, BOX_E_INTEGRITY, "  integrity_failed");
	}
	box_buf_release(&got);
	free(m1);
	free(m2);
	box_oci_close(&o);
}

static void test_concurrent(const char *dir)
{
	struct box_oci o;
	struct box_err err;
	char *m;
	size_t len = 0;
	pid_t pids[8];
	int fails = 0;
	cJSON *tags;

	box_err_init(&err);
	if (box_oci_open(dir, 1, &o, &err) < 0) {
		ok(0, "open layout for concurrency: %s", err.message);
		return;
	}
	m = put_artifact(&o, "c.tar.gz", &len);
	box_oci_close(&o);
	fflush(stdout);
	for (int i = 0; i < 8; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			struct box_oci co;
			char tag[16];
			int r;

			snprintf(tag, sizeof(tag), "v%d", i);
			box_err_init(&err);
			r = box_oci_open(dir, 1, &co, &err) == 0 &&
			    box_oci_put_manifest(&co, m, len, "conc", tag, 0, NULL, &err) == 0;
			box_oci_close(&co);
			free(m);
			_exit(r ? 0 : 1);
		}
	}
	for (int i = 0; i < 8; i++) {
		int st = 0;

		if (pids[i] < 0 || waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0)
			fails++;
	}
	is_int(fails, 0, "8 processes put a tag each at once");
	is_int(index_count(dir), 8, "  index.json parses and has 8 entries");
	box_oci_open(dir, 0, &o, &err);
	tags = box_oci_tags(&o, "conc", &err);
	is_int(tags ? cJSON_GetArraySize(tags) : -1, 8, "  all 8 tags are listed");
	cJSON_Delete(tags);
	box_oci_close(&o);
	free(m);
}

/* Descriptors written by other tools survive a rewrite, big integers exactly. */
static void test_foreign(const char *dir)
{
	struct box_oci o;
	struct box_err err;
	char *m, *t;
	size_t len = 0;

	box_err_init(&err);
	if (box_oci_open(dir, 1, &o, &err) < 0) {
		ok(0, "open layout: %s", err.message);
		return;
	}
	write_file(dir, "index.json", "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":"
		   "\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha512:abc\","
		   "\"size\":9007199254740993,\"platform\":{\"os\":\"linux\"}}],"
		   "\"annotations\":{\"x\":\"y\"}}");
	m = put_artifact(&o, "f.tar.gz", &len);
	is_int(box_oci_put_manifest(&o, m, len, "f", "1", 0, NULL, &err), 0,
	       "put next to a foreign descriptor");
	t = read_text(dir, "index.json");
	ok(t && strstr(t, "\"size\":9007199254740993,\"platform\":{\"os\":\"linux\"}") &&
	   strstr(t, "\"annotations\":{\"x\":\"y\"}"), "  it is kept, its size exactly");
	is_int(index_count(dir), 2, "  two entries");
	free(t);
	free(m);
	box_oci_close(&o);
}

static void rm_rf(const char *path)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();

	if (pid == 0) {
		execlp("rm", "rm", "-rf", path, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

int main(void)
{
	struct box_oci o;
	struct box_err err;
	char dir[512];

	snprintf(top, sizeof(top), "/tmp/t-oci.XXXXXX");
	if (!mkdtemp(top)) {
		perror("mkdtemp");
		return 1;
	}
	test_names();
	test_open();
	path_of(dir, sizeof(dir), "blobs-layout");
	box_err_init(&err);
	if (box_oci_open(dir, 1, &o, &err) == 0) {
		test_blobs(&o);
		box_oci_close(&o);
	} else {
		ok(0, "create a layout for blobs: %s", err.message);
	}
	test_builder();
	path_of(dir, sizeof(dir), "manifests");
	test_manifests(dir);
	path_of(dir, sizeof(dir), "foreign");
	test_foreign(dir);
	path_of(dir, sizeof(dir), "concurrent");
	test_concurrent(dir);
	if (!getenv("KEEP")) rm_rf(top);
	return done_testing();
}
