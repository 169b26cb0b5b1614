#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic.h"
#include "json.h"
#include "oci.h"
#include "sha256.h"
#include "banned.h"

#define LAYOUT_TEXT "{\"imageLayoutVersion\":\"1.0.0\"}"
#define EMPTY_INDEX "{\"schemaVersion\":2,\"manifests\":[]}"
#define BLOB_MODE 0644
#define COPY_CHUNK (128 * 1024)
/* Bounds on the descriptors a manifest refers to and on those index.json lists. */
#define MAX_REFS 4096
#define MAX_INDEX_ENTRIES 1000000

static int is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static int is_alnum(char c)
{
	return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

int box_oci_name_check(const char *name, struct box_err *err)
{
	const char *p = name;
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > BOX_OCI_NAME_MAX)
		goto bad;
	/* components of [a-z0-9]+ joined by one '.', one or two '_', or any run of '-' */
	for (;;) {
		if (!is_lower_alnum(*p))
			goto bad;
		while (is_lower_alnum(*p))
			p++;
		if (*p == 0)
			return 0;
		if (*p == '/') {
			p++;
			continue;
		}
		if (*p == '.')
			p++;
		else if (*p == '_')
			p += p[1] == '_' ? 2 : 1;
		else if (*p == '-')
			while (*p == '-')
				p++;
		else
			goto bad;
	}
bad:
	return box_err_set(err, BOX_E_INVALID, "invalid artifact name '%.*s'", 300,
			   name ? name : "");
}

int box_oci_tag_check(const char *tag, struct box_err *err)
{
	size_t n = tag ? strlen(tag) : 0;

	if (n == 0 || n > BOX_OCI_TAG_MAX || !(is_alnum(tag[0]) || tag[0] == '_'))
		goto bad;
	for (size_t i = 1; i < n; i++)
		if (!is_alnum(tag[i]) && !strchr("._-", tag[i]))
			goto bad;
	return 0;
bad:
	return box_err_set(err, BOX_E_INVALID, "invalid tag '%.*s'", 200, tag ? tag : "");
}

static int digest_ok(const char *d)
{
	if (!d || strncmp(d, "sha256:", 7) != 0)
		return 0;
	for (int i = 0; i < BOX_SHA256_HEX_LEN; i++) {
		char c = d[7 + i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
	}
	return d[7 + BOX_SHA256_HEX_LEN] == 0;
}

int box_oci_digest_check(const char *digest, struct box_err *err)
{
	if (digest_ok(digest))
		return 0;
	return box_err_set(err, BOX_E_INVALID, "invalid digest '%.*s' (want sha256:<64 hex>)", 100,
			   digest ? digest : "");
}

/* Reads a small regular file of the layout with a cap; a symlink or anything else is refused. */
static int read_small(int dirfd, const char *name, size_t max, struct box_buf *b,
		      struct box_err *err)
{
	struct stat st;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	int r;

	if (fd < 0) {
		if (errno == ENOENT)
			box_err_set(err, BOX_E_NOT_FOUND, "%s: not found in the OCI layout", name);
		else if (errno == ELOOP)
			box_err_set(err, BOX_E_INVALID, "%s: is a symlink", name);
		else
			box_err_sys(err, "open %s", name);
		box_err_path(err, name);
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		box_err_set(err, BOX_E_INVALID, "%s: not a regular file", name);
		box_err_path(err, name);
		return -1;
	}
	box_buf_release(b);
	box_buf_init(b, max);
	/* the size is checked again while reading: the file may grow */
	r = st.st_size > (off_t)max ? box_err_limit(err, BOX_E_LIMIT, "file_bytes", (int64_t)max,
						     "bytes", "too large") :
				      box_buf_read_fd(b, fd, err);
	close(fd);
	if (r < 0) {
		box_buf_release(b);
		if (err->code == BOX_E_LIMIT)
			box_err_set(err, BOX_E_INVALID, "%s: larger than %zu bytes", name, max);
		box_err_path(err, name);
		return -1;
	}
	return 0;
}

static int check_layout(int dirfd, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_OCI_LAYOUT_MAX);
	const cJSON *v;
	cJSON *root;
	int r = -1;

	if (read_small(dirfd, "oci-layout", BOX_OCI_LAYOUT_MAX, &b, err) < 0)
		return -1;
	root = box_json_parse(b.data ? b.data : "", b.len, err);
	if (!root) {
		box_err_path(err, "oci-layout");
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(root, "imageLayoutVersion");
	if (!cJSON_IsObject(root) || !cJSON_IsString(v) || strncmp(v->valuestring, "1.", 2) != 0) {
		box_err_set(err, BOX_E_INVALID, "oci-layout: imageLayoutVersion 1.x expected");
		box_err_path(err, "oci-layout");
		goto out;
	}
	r = 0;
out:
	cJSON_Delete(root);
	box_buf_release(&b);
	return r;
}

static int bad_index(struct box_err *err, const char *what)
{
	box_err_set(err, BOX_E_INVALID, "index.json: %s", what);
	box_err_path(err, "index.json");
	return -1;
}

static int check_descriptor(const cJSON *d)
{
	int64_t size;

	return cJSON_IsObject(d) &&
	       cJSON_IsString(cJSON_GetObjectItemCaseSensitive(d, "mediaType")) &&
	       cJSON_IsString(cJSON_GetObjectItemCaseSensitive(d, "digest")) &&
	       box_json_int64(cJSON_GetObjectItemCaseSensitive(d, "size"), &size) && size >= 0;
}

/* Reads and checks index.json. */
static cJSON *read_index(struct box_oci *o, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_OCI_INDEX_MAX);
	const cJSON *m, *d;
	cJSON *root;
	int64_t sv;
	int n = 0;

	if (read_small(o->dirfd, "index.json", BOX_OCI_INDEX_MAX, &b, err) < 0)
		return NULL;
	root = box_json_parse(b.data ? b.data : "", b.len, err);
	box_buf_release(&b);
	if (!root) {
		box_err_path(err, "index.json");
		return NULL;
	}
	if (!cJSON_IsObject(root) ||
	    !box_json_int64(cJSON_GetObjectItemCaseSensitive(root, "schemaVersion"), &sv) ||
	    sv != 2) {
		bad_index(err, "schemaVersion 2 expected");
		goto fail;
	}
	m = cJSON_GetObjectItemCaseSensitive(root, "manifests");
	if (!cJSON_IsArray(m)) {
		bad_index(err, "manifests array expected");
		goto fail;
	}
	cJSON_ArrayForEach(d, m) {
		if (++n > MAX_INDEX_ENTRIES) {
			bad_index(err, "too many manifests");
			goto fail;
		}
		if (!check_descriptor(d)) {
			bad_index(err, "malformed descriptor in manifests");
			goto fail;
		}
	}
	return root;
fail:
	cJSON_Delete(root);
	return NULL;
}

/* index.json for lookups (find_tag, box_oci_tags): parsed again only when the file changed,
 * so that resolving many names in one layout does not parse it once per name. The tree is
 * borrowed from the cache. */
static const cJSON *cached_index(struct box_oci *o, struct box_err *err)
{
	struct stat st;
	long long ct;

	if (fstatat(o->dirfd, "index.json", &st, AT_SYMLINK_NOFOLLOW) < 0) {
		cJSON_Delete(o->index_cache);
		o->index_cache = NULL;
		return read_index(o, err);   /* reports the error as it is */
	}
	ct = (long long)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
	if (o->index_cache && o->index_ino == (unsigned long long)st.st_ino &&
	    o->index_size == (unsigned long long)st.st_size && o->index_ctime_ns == ct)
		return o->index_cache;
	cJSON_Delete(o->index_cache);
	o->index_cache = read_index(o, err);
	o->index_ino = (unsigned long long)st.st_ino;
	o->index_size = (unsigned long long)st.st_size;
	o->index_ctime_ns = ct;
	return o->index_cache;
}

/* Creates what a new layout needs, under the index lock so that two creators agree. */
static int create_layout(int dirfd, struct box_err *err)
{
	struct stat st;
	int lock, r = -1;

	lock = box_lock_open(dirfd, BOX_OCI_LOCK_NAME, 1, 10000, err);
	if (lock < 0)
		return -1;
	if (fstatat(dirfd, "oci-layout", &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT) {
			box_err_sys(err, "stat oci-layout");
			goto out;
		}
		if (box_atomic_write(dirfd, "oci-layout", LAYOUT_TEXT, strlen(LAYOUT_TEXT), 0644,
				     err) < 0)
			goto out;
	}
	if (fstatat(dirfd, "index.json", &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT) {
			box_err_sys(err, "stat index.json");
			goto out;
		}
		if (box_atomic_write(dirfd, "index.json", EMPTY_INDEX, strlen(EMPTY_INDEX), 0644,
				     err) < 0)
			goto out;
	}
	if ((mkdirat(dirfd, "blobs", 0755) < 0 && errno != EEXIST) ||
	    (mkdirat(dirfd, "blobs/sha256", 0755) < 0 && errno != EEXIST)) {
		box_err_sys(err, "create blobs/sha256");
		goto out;
	}
	r = 0;
out:
	close(lock);
	return r;
}

int box_oci_open(const char *path, int create, struct box_oci *o, struct box_err *err)
{
	cJSON *index;

	o->dirfd = o->blobsfd = -1;
	o->lock_timeout_ms = 10000;
	o->index_cache = NULL;
	if (!path || !path[0])
		return box_err_set(err, BOX_E_INVALID, "empty OCI layout path");
	if (create && mkdir(path, 0755) < 0 && errno != EEXIST) {
		box_err_sys(err, "create OCI layout %s", path);
		box_err_path(err, path);
		return -1;
	}
	o->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (o->dirfd < 0) {
		if (errno == ENOENT)
			box_err_set(err, BOX_E_NOT_FOUND, "OCI layout %s: no such directory", path);
		else
			box_err_sys(err, "open OCI layout %s", path);
		box_err_path(err, path);
		return -1;
	}
	if (create && create_layout(o->dirfd, err) < 0)
		goto fail;
	if (check_layout(o->dirfd, err) < 0)
		goto fail;
	index = read_index(o, err);
	if (!index)
		goto fail;
	cJSON_Delete(index);
	o->blobsfd = openat(o->dirfd, "blobs/sha256", O_RDONLY | O_DIRECTORY | O_CLOEXEC |
			    O_NOFOLLOW);
	if (o->blobsfd < 0) {
		if (errno == ENOENT)
			box_err_set(err, BOX_E_NOT_FOUND, "OCI layout %s: no blobs/sha256", path);
		else
			box_err_sys(err, "open blobs/sha256 of %s", path);
		goto fail;
	}
	return 0;
fail:
	if (!err->path[0])
		box_err_path(err, path);
	box_oci_close(o);
	return -1;
}

void box_oci_close(struct box_oci *o)
{
	cJSON_Delete(o->index_cache);
	o->index_cache = NULL;
	if (o->blobsfd >= 0)
		close(o->blobsfd);
	if (o->dirfd >= 0)
		close(o->dirfd);
	o->blobsfd = o->dirfd = -1;
}

static int temp_blob(struct box_oci *o, char name[64], struct box_err *err)
{
	for (int i = 0; i < 16; i++) {
		unsigned char r[8];
		int fd;

		if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
			return box_err_sys(err, "getrandom");
		snprintf(name, 64, ".box-%02x%02x%02x%02x%02x%02x%02x%02x.tmp",
			 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
		fd = openat(o->blobsfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
			    BLOB_MODE);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST)
			return box_err_sys(err, "create temp blob");
	}
	return box_err_set(err, BOX_E_IO, "create temp blob: names taken");
}

static int fsync_dirfd(int dirfd, struct box_err *err)
{
	if (fsync(dirfd) < 0)
		return box_err_sys(err, "fsync blobs/sha256");
	return 0;
}

int box_oci_put_blob_fd(struct box_oci *o, int fd, const char *expect_digest, int64_t max_size,
			char digest[BOX_OCI_DIGEST_LEN], int64_t *size, struct box_err *err)
{
	struct box_sha256 sha = { NULL };
	unsigned char d[BOX_SHA256_LEN];
	char tmp[64] = "", hex[BOX_SHA256_HEX_LEN + 1];
	char *chunk = NULL;
	int64_t total = 0;
	int out = -1;

	if (expect_digest && box_oci_digest_check(expect_digest, err) < 0)
		return -1;
	chunk = malloc(COPY_CHUNK);
	if (!chunk)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	if (box_sha256_init(&sha, err) < 0)
		goto fail;
	out = temp_blob(o, tmp, err);
	if (out < 0) {
		tmp[0] = 0;
		goto fail;
	}
	for (;;) {
		ssize_t r = read(fd, chunk, COPY_CHUNK);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			box_err_sys(err, "read blob");
			goto fail;
		}
		if (r == 0)
			break;
		total += r;
		if (max_size >= 0 && total > max_size) {
			box_err_limit(err, BOX_E_LIMIT, "blob_bytes", max_size, "bytes",
				      "blob larger than %lld bytes", (long long)max_size);
			goto fail;
		}
		if (box_sha256_update(&sha, chunk, (size_t)r, err) < 0)
			goto fail;
		if (box_write_all(out, chunk, (size_t)r) < 0) {
			box_err_sys(err, "write blob");
			goto fail;
		}
	}
	if (box_sha256_final(&sha, d, err) < 0)
		goto fail;
	box_sha256_hex(d, hex);
	if (expect_digest && strcmp(expect_digest + 7, hex) != 0) {
		box_err_set(err, BOX_E_INTEGRITY, "blob digest mismatch: expected %s, got sha256:%s",
			    expect_digest, hex);
		goto fail;
	}
	if (fsync(out) < 0) {
		box_err_sys(err, "fsync blob");
		goto fail;
	}
	if (close(out) < 0) {
		out = -1;
		box_err_sys(err, "close blob");
		goto fail;
	}
	out = -1;
	if (renameat(o->blobsfd, tmp, o->blobsfd, hex) < 0) {
		box_err_sys(err, "rename blob sha256:%s", hex);
		goto fail;
	}
	free(chunk);
	box_sha256_release(&sha);
	if (digest)
		snprintf(digest, BOX_OCI_DIGEST_LEN, "sha256:%s", hex);
	if (size)
		*size = total;
	return fsync_dirfd(o->blobsfd, err);
fail:
	if (out >= 0)
		close(out);
	if (tmp[0])
		unlinkat(o->blobsfd, tmp, 0);
	free(chunk);
	box_sha256_release(&sha);
	return -1;
}

int box_oci_put_blob_buf(struct box_oci *o, const void *data, size_t n, const char *expect_digest,
			 char digest[BOX_OCI_DIGEST_LEN], struct box_err *err)
{
	char hex[BOX_SHA256_HEX_LEN + 1];

	if (expect_digest && box_oci_digest_check(expect_digest, err) < 0)
		return -1;
	if (box_sha256_buf(data, n, hex, err) < 0)
		return -1;
	if (expect_digest && strcmp(expect_digest + 7, hex) != 0)
		return box_err_set(err, BOX_E_INTEGRITY,
				   "blob digest mismatch: expected %s, got sha256:%s",
				   expect_digest, hex);
	if (box_atomic_write(o->blobsfd, hex, data, n, BLOB_MODE, err) < 0)
		return -1;
	if (digest)
		snprintf(digest, BOX_OCI_DIGEST_LEN, "sha256:%s", hex);
	return 0;
}

int box_oci_open_blob(struct box_oci *o, const char *digest, int64_t *size, struct box_err *err)
{
	struct stat st;
	int fd;

	if (box_oci_digest_check(digest, err) < 0)
		return -1;
	fd = openat(o->blobsfd, digest + 7, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT)
			return box_err_set(err, BOX_E_NOT_FOUND, "blob %s not found", digest);
		if (errno == ELOOP)
			return box_err_set(err, BOX_E_INVALID, "blob %s is a symlink", digest);
		return box_err_sys(err, "open blob %s", digest);
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return box_err_set(err, BOX_E_INVALID, "blob %s is not a regular file", digest);
	}
	if (size)
		*size = st.st_size;
	return fd;
}

int box_oci_verify_blob(struct box_oci *o, const char *digest, int64_t *size,
			struct box_err *err)
{
	char hex[BOX_SHA256_HEX_LEN + 1];
	int fd = box_oci_open_blob(o, digest, NULL, err);
	int r;

	if (fd < 0)
		return -1;
	r = box_sha256_fd(fd, hex, size, err);
	close(fd);
	if (r < 0)
		return -1;
	if (strcmp(hex, digest + 7) != 0)
		return box_err_set(err, BOX_E_INTEGRITY, "blob %s hashes to sha256:%s", digest, hex);
	return 0;
}

/* 0 if the blob of descriptor d exists with the size d says. */
static int check_ref(struct box_oci *o, const cJSON *d, const char *what, struct box_err *err)
{
	const char *digest = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "digest"));
	int64_t want, have;
	int fd;

	if (!cJSON_IsObject(d) ||
	    !box_json_int64(cJSON_GetObjectItemCaseSensitive(d, "size"), &want) || want < 0 ||
	    box_oci_digest_check(digest, err) < 0) {
		box_err_set(err, BOX_E_INVALID, "manifest: malformed %s descriptor", what);
		box_err_path(err, what);
		return -1;
	}
	fd = box_oci_open_blob(o, digest, &have, err);
	if (fd < 0)
		return -1;
	close(fd);
	if (have != want) {
		box_err_set(err, BOX_E_INVALID, "manifest: %s %s has %lld bytes, not %lld", what,
			    digest, (long long)have, (long long)want);
		return -1;
	}
	return 0;
}

static int refs_exist(struct box_oci *o, const cJSON *m, int is_index, struct box_err *err)
{
	const cJSON *arr, *d;
	int n = 0;

	if (!is_index && check_ref(o, cJSON_GetObjectItemCaseSensitive(m, "config"), "config",
				   err) < 0)
		return -1;
	arr = cJSON_GetObjectItemCaseSensitive(m, is_index ? "manifests" : "layers");
	if (!cJSON_IsArray(arr)) {
		box_err_set(err, BOX_E_INVALID, "manifest: %s array expected",
			    is_index ? "manifests" : "layers");
		return -1;
	}
	cJSON_ArrayForEach(d, arr) {
		if (++n > MAX_REFS)
			return box_err_set(err, BOX_E_INVALID, "manifest: more than %d descriptors",
					   MAX_REFS);
		if (check_ref(o, d, is_index ? "manifests" : "layers", err) < 0)
			return -1;
	}
	return 0;
}

/* The media type a manifest says it has (or implies), or NULL if it is neither kind. */
static const char *manifest_kind(const cJSON *m)
{
	const char *mt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "mediaType"));

	if (mt)
		return strcmp(mt, BOX_OCI_MT_MANIFEST) == 0 || strcmp(mt, BOX_OCI_MT_INDEX) == 0 ?
		       mt : NULL;
	if (cJSON_GetObjectItemCaseSensitive(m, "manifests"))
		return BOX_OCI_MT_INDEX;
	if (cJSON_GetObjectItemCaseSensitive(m, "layers"))
		return BOX_OCI_MT_MANIFEST;
	return NULL;
}

static cJSON *parse_manifest(const char *json, size_t len, struct box_err *err)
{
	cJSON *m;
	int64_t sv;

	if (len > BOX_OCI_MANIFEST_MAX)
		return box_err_limit(err, BOX_E_LIMIT, "manifest_bytes", BOX_OCI_MANIFEST_MAX,
				     "bytes", "manifest larger than %d bytes",
				     BOX_OCI_MANIFEST_MAX), NULL;
	m = box_json_parse(json, len, err);
	if (!m)
		return NULL;
	if (!cJSON_IsObject(m) ||
	    !box_json_int64(cJSON_GetObjectItemCaseSensitive(m, "schemaVersion"), &sv) || sv != 2) {
		cJSON_Delete(m);
		return box_err_set(err, BOX_E_INVALID, "manifest: schemaVersion 2 expected"), NULL;
	}
	if (!manifest_kind(m)) {
		cJSON_Delete(m);
		return box_err_set(err, BOX_E_INVALID,
				   "manifest: neither an OCI image manifest nor an index"), NULL;
	}
	return m;
}

static const char *ref_name(const cJSON *d)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(d, "annotations");

	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, BOX_OCI_REF_NAME));
}

static cJSON *new_descriptor(const char *mt, const char *artifact_type, const char *digest,
			     size_t len, const char *ref)
{
	cJSON *d = cJSON_CreateObject(), *a;

	if (!d || !cJSON_AddStringToObject(d, "mediaType", mt) ||
	    (artifact_type && !cJSON_AddStringToObject(d, "artifactType", artifact_type)) ||
	    !cJSON_AddStringToObject(d, "digest", digest) ||
	    !box_json_add_int64(d, "size", (int64_t)len))
		goto fail;
	if (ref) {
		a = cJSON_AddObjectToObject(d, "annotations");
		if (!a || !cJSON_AddStringToObject(a, BOX_OCI_REF_NAME, ref))
			goto fail;
	}
	return d;
fail:
	cJSON_Delete(d);
	return NULL;
}

static int write_index(struct box_oci *o, cJSON *index, struct box_err *err)
{
	char *text;
	int r;

	/* integers of other writers' descriptors are kept exactly, not printed as doubles */
	box_json_exact(index);
	text = cJSON_PrintUnformatted(index);
	if (!text)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	r = box_atomic_write(o->dirfd, "index.json", text, strlen(text), 0644, err);
	free(text);
	return r;
}

/* Under the lock: decides what index.json needs; 1 if it must be rewritten, 0 if not. */
static int update_index(cJSON *index, const char *ref, const char *digest, int replace,
			cJSON *desc, struct box_err *err)
{
	cJSON *m = cJSON_GetObjectItemCaseSensitive(index, "manifests");
	cJSON *d, *next;

	for (d = m->child; d; d = d->next) {
		const char *rn = ref_name(d);
		const char *dd = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "digest"));

		if (ref && rn && strcmp(rn, ref) == 0) {
			if (strcmp(dd, digest) == 0)
				return 0;
			if (!replace)
				return box_err_set(err, BOX_E_CONFLICT,
						   "%s already points to %s", ref, dd);
		}
		if (!ref && !rn && strcmp(dd, digest) == 0)
			return 0;
	}
	for (d = m->child; d; d = next) {
		const char *rn = ref_name(d);

		next = d->next;
		if (ref && rn && strcmp(rn, ref) == 0)
			cJSON_Delete(cJSON_DetachItemViaPointer(m, d));
	}
	cJSON_AddItemToArray(m, desc);
	return 1;
}

int box_oci_put_manifest(struct box_oci *o, const char *json, size_t len, const char *name,
			 const char *tag, int replace, char digest[BOX_OCI_DIGEST_LEN],
			 struct box_err *err)
{
	char ref[BOX_OCI_NAME_MAX + BOX_OCI_TAG_MAX + 2], dg[BOX_OCI_DIGEST_LEN], hex[65];
	cJSON *m, *index = NULL, *desc = NULL;
	const char *mt, *at;
	int lock = -1, r = -1, changed;

	if (tag && (box_oci_name_check(name, err) < 0 || box_oci_tag_check(tag, err) < 0))
		return -1;
	if (tag)
		snprintf(ref, sizeof(ref), "%s:%s", name, tag);
	m = parse_manifest(json, len, err);
	if (!m)
		return -1;
	mt = manifest_kind(m);
	at = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "artifactType"));
	if (cJSON_GetObjectItemCaseSensitive(m, "artifactType") && !at) {
		box_err_set(err, BOX_E_INVALID, "manifest: artifactType must be a string");
		goto out;
	}
	if (refs_exist(o, m, strcmp(mt, BOX_OCI_MT_INDEX) == 0, err) < 0)
		goto out;
	if (box_sha256_buf(json, len, hex, err) < 0)
		goto out;
	snprintf(dg, sizeof(dg), "sha256:%s", hex);
	desc = new_descriptor(mt, at, dg, len, tag ? ref : NULL);
	if (!desc) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	lock = box_lock_open(o->dirfd, BOX_OCI_LOCK_NAME, 1, o->lock_timeout_ms, err);
	if (lock < 0)
		goto out;
	index = read_index(o, err);
	if (!index)
		goto out;
	changed = update_index(index, tag ? ref : NULL, dg, replace, desc, err);
	if (changed < 0)
		goto out;
	if (changed)
		desc = NULL; /* now owned by index */
	if (box_oci_put_blob_buf(o, json, len, NULL, NULL, err) < 0)
		goto out;
	if (changed && write_index(o, index, err) < 0)
		goto out;
	if (digest)
		snprintf(digest, BOX_OCI_DIGEST_LEN, "%s", dg);
	r = 0;
out:
	if (lock >= 0)
		close(lock);
	cJSON_Delete(desc);
	cJSON_Delete(index);
	cJSON_Delete(m);
	return r;
}

/* Reads the manifest blob digest into b (replaced), checking its size (if want >= 0) and hash. */
static int read_manifest(struct box_oci *o, const char *digest, int64_t want, struct box_buf *b,
			 struct box_err *err)
{
	char hex[BOX_SHA256_HEX_LEN + 1];
	int64_t size;
	int fd = box_oci_open_blob(o, digest, &size, err);
	int r;

	if (fd < 0)
		return -1;
	if (size > BOX_OCI_MANIFEST_MAX) {
		close(fd);
		return box_err_limit(err, BOX_E_LIMIT, "manifest_bytes", BOX_OCI_MANIFEST_MAX,
				     "bytes", "manifest %s larger than %d bytes", digest,
				     BOX_OCI_MANIFEST_MAX);
	}
	box_buf_release(b);
	box_buf_init(b, BOX_OCI_MANIFEST_MAX);
	r = box_buf_read_fd(b, fd, err);
	close(fd);
	if (r < 0)
		return -1;
	if (want >= 0 && (int64_t)b->len != want)
		return box_err_set(err, BOX_E_INTEGRITY, "manifest %s has %zu bytes, descriptor says %lld",
				   digest, b->len, (long long)want);
	if (box_sha256_buf(b->data ? b->data : "", b->len, hex, err) < 0)
		return -1;
	if (strcmp(hex, digest + 7) != 0)
		return box_err_set(err, BOX_E_INTEGRITY, "manifest %s hashes to sha256:%s", digest,
				   hex);
	return 0;
}

/* The descriptor of NAME:TAG in index.json: its digest into dg and its size. */
static int find_tag(struct box_oci *o, const char *ref, char dg[BOX_OCI_DIGEST_LEN],
		    int64_t *size, struct box_err *err)
{
	const cJSON *index = cached_index(o, err);
	const cJSON *d;
	int r = -1, found = 0;

	if (!index)
		return -1;
	cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(index, "manifests")) {
		const char *rn = ref_name(d);

		if (rn && strcmp(rn, ref) == 0) {
			const char *dd = cJSON_GetStringValue(
				cJSON_GetObjectItemCaseSensitive(d, "digest"));

			found = 1;
			if (box_oci_digest_check(dd, err) < 0)
				break;
			box_json_int64(cJSON_GetObjectItemCaseSensitive(d, "size"), size);
			snprintf(dg, BOX_OCI_DIGEST_LEN, "%s", dd);
			r = 0;
			break;
		}
	}
	if (!found)
		box_err_set(err, BOX_E_NOT_FOUND, "%s: no such tag", ref);
	return r;
}

/*
 * Other OCI tools (skopeo copy ... oci:DIR:TAG, oras, crane) tag with the bare TAG in
 * org.opencontainers.image.ref.name. 1 when descriptor d holds a box artifact whose config
 * names name, 0 when not: such a tag is simply not name's, never an error.
 */
static int bare_holds(struct box_oci *o, const cJSON *d, const char *name)
{
	struct box_buf b = BOX_BUF_INIT(BOX_OCI_MANIFEST_MAX);
	const char *dd = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "digest"));
	struct box_oci_artifact a;
	struct box_err e;
	int64_t size = -1;
	cJSON *cfg = NULL;
	int fd, r = 0;

	box_err_init(&e);
	if (!digest_ok(dd))
		return 0;
	if (!box_json_int64(cJSON_GetObjectItemCaseSensitive(d, "size"), &size))
		size = -1;
	if (read_manifest(o, dd, size, &b, &e) < 0 ||
	    box_oci_artifact_parse(b.data ? b.data : "", b.len, &a, &e) < 0 ||
	    a.config_size > BOX_OCI_MANIFEST_MAX)
		goto out;
	fd = box_oci_open_blob(o, a.config_digest, &size, &e);
	if (fd < 0)
		goto out;
	box_buf_release(&b);
	box_buf_init(&b, BOX_OCI_MANIFEST_MAX);
	r = box_buf_read_fd(&b, fd, &e);
	close(fd);
	if (r < 0) {
		r = 0;
		goto out;
	}
	cfg = box_json_parse(b.data ? b.data : "", b.len, &e);
	r = cfg && strcmp(box_json_get_str(cfg, "name", ""), name) == 0;
out:
	cJSON_Delete(cfg);
	box_buf_release(&b);
	return r;
}

/* The descriptor tagged with the bare tag whose box artifact is name's. */
static int find_bare(struct box_oci *o, const char *name, const char *tag,
		     char dg[BOX_OCI_DIGEST_LEN], int64_t *size)
{
	const cJSON *index = cached_index(o, &(struct box_err){ 0 });
	const cJSON *d;

	if (!index)
		return -1;
	cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(index, "manifests")) {
		const char *rn = ref_name(d);

		if (rn && strcmp(rn, tag) == 0 && bare_holds(o, d, name)) {
			snprintf(dg, BOX_OCI_DIGEST_LEN, "%s",
				 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "digest")));
			box_json_int64(cJSON_GetObjectItemCaseSensitive(d, "size"), size);
			return 0;
		}
	}
	return -1;
}

/* In an image index, the first box artifact: its digest into dg and its size. */
static int pick_artifact(const cJSON *idx, char dg[BOX_OCI_DIGEST_LEN], int64_t *size,
			 struct box_err *err)
{
	const cJSON *d;
	int n = 0;

	cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(idx, "manifests")) {
		const char *at = cJSON_GetStringValue(
			cJSON_GetObjectItemCaseSensitive(d, "artifactType"));
		const char *dd = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "digest"));

		if (++n > MAX_REFS)
			break;
		if (!at || strcmp(at, BOX_OCI_ARTIFACT_TYPE) != 0)
			continue;
		if (box_oci_digest_check(dd, err) < 0 ||
		    !box_json_int64(cJSON_GetObjectItemCaseSensitive(d, "size"), size) || *size < 0)
			return box_err_set(err, BOX_E_INVALID, "index: malformed descriptor");
		snprintf(dg, BOX_OCI_DIGEST_LEN, "%s", dd);
		return 0;
	}
	return box_err_set(err, BOX_E_NOT_FOUND, "index has no %s manifest", BOX_OCI_ARTIFACT_TYPE);
}

int box_oci_resolve(struct box_oci *o, const char *name, const char *ref,
		    char digest[BOX_OCI_DIGEST_LEN], struct box_buf *manifest, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_OCI_MANIFEST_MAX);
	char dg[BOX_OCI_DIGEST_LEN];
	int64_t size = -1;
	cJSON *m = NULL;
	int r = -1;

	if (box_oci_name_check(name, err) < 0)
		return -1;
	if (ref && strncmp(ref, "sha256:", 7) == 0) {
		if (box_oci_digest_check(ref, err) < 0)
			return -1;
		snprintf(dg, sizeof(dg), "%s", ref);
	} else {
		char full[BOX_OCI_NAME_MAX + BOX_OCI_TAG_MAX + 2];

		if (box_oci_tag_check(ref, err) < 0)
			return -1;
		snprintf(full, sizeof(full), "%s:%s", name, ref);
		if (find_tag(o, full, dg, &size, err) < 0) {
			if (err->code != BOX_E_NOT_FOUND || find_bare(o, name, ref, dg, &size) < 0)
				return -1;
			box_err_init(err);
		}
	}
	if (read_manifest(o, dg, size, &b, err) < 0)
		goto out;
	m = parse_manifest(b.data, b.len, err);
	if (!m)
		goto out;
	if (strcmp(manifest_kind(m), BOX_OCI_MT_INDEX) == 0) {
		if (pick_artifact(m, dg, &size, err) < 0)
			goto out;
		cJSON_Delete(m);
		m = NULL;
		if (read_manifest(o, dg, size, &b, err) < 0)
			goto out;
		m = parse_manifest(b.data, b.len, err);
		if (!m)
			goto out;
		if (strcmp(manifest_kind(m), BOX_OCI_MT_MANIFEST) != 0) {
			box_err_set(err, BOX_E_INVALID, "manifest %s: an index inside an index", dg);
			goto out;
		}
	}
	if (digest)
		snprintf(digest, BOX_OCI_DIGEST_LEN, "%s", dg);
	if (manifest) {
		box_buf_release(manifest);
		*manifest = b;
		box_buf_init(&b, BOX_OCI_MANIFEST_MAX);
	}
	r = 0;
out:
	cJSON_Delete(m);
	box_buf_release(&b);
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

cJSON *box_oci_tags(struct box_oci *o, const char *name, struct box_err *err)
{
	const cJSON *index;
	cJSON *out = NULL;
	const cJSON *d;
	const char **tags = NULL;
	size_t n = 0, cap = 0, plen;

	if (box_oci_name_check(name, err) < 0)
		return NULL;
	plen = strlen(name);
	index = cached_index(o, err);
	if (!index)
		return NULL;
	cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(index, "manifests")) {
		const char *rn = ref_name(d);

		if (rn && !strchr(rn, ':') && box_oci_tag_check(rn, &(struct box_err){ 0 }) == 0 &&
		    bare_holds(o, d, name)) {
			plen = 0;	/* a bare tag of another OCI tool whose artifact is name */
		} else if (!rn || strncmp(rn, name, (plen = strlen(name))) != 0 || rn[plen] != ':' ||
			   box_oci_tag_check(rn + plen + 1, &(struct box_err){ 0 }) < 0) {
			continue;
		} else {
			plen++;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			const char **t = realloc(tags, ncap * sizeof(*t));

			if (!t)
				goto oom;
			tags = t;
			cap = ncap;
		}
		tags[n++] = rn + plen;
	}
	if (n)
		qsort(tags, n, sizeof(*tags), cmp_str);
	out = cJSON_CreateArray();
	if (!out)
		goto oom;
	for (size_t i = 0; i < n; i++) {
		cJSON *s;

		if (i > 0 && strcmp(tags[i], tags[i - 1]) == 0)
			continue;
		s = cJSON_CreateString(tags[i]);
		if (!s)
			goto oom;
		cJSON_AddItemToArray(out, s);
	}
	free(tags);
	return out;
oom:
	box_err_set(err, BOX_E_INTERNAL, "out of memory");
	cJSON_Delete(out);
	free(tags);
	return NULL;
}

static cJSON *descriptor(const char *mt, const char *digest, int64_t size)
{
	cJSON *d = cJSON_CreateObject();

	if (!d || !cJSON_AddStringToObject(d, "mediaType", mt) ||
	    !cJSON_AddStringToObject(d, "digest", digest) || !box_json_add_int64(d, "size", size)) {
		cJSON_Delete(d);
		return NULL;
	}
	return d;
}

char *box_oci_artifact_manifest(const char *config_digest, int64_t config_size,
				const char *layer_digest, int64_t layer_size,
				const char *layer_title, size_t *len)
{
	cJSON *m = NULL, *c, *layers, *l, *a;
	char *text = NULL;

	if (!digest_ok(config_digest) || !digest_ok(layer_digest) || config_size < 0 ||
	    layer_size < 0 || !layer_title || !layer_title[0] || strlen(layer_title) > 255)
		return NULL;
	for (const char *p = layer_title; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return NULL;
	/* cJSON prints members in insertion order and unformatted output has no whitespace:
	 * building in a fixed order is what makes the text canonical */
	m = cJSON_CreateObject();
	if (!m || !box_json_add_int64(m, "schemaVersion", 2) ||
	    !cJSON_AddStringToObject(m, "mediaType", BOX_OCI_MT_MANIFEST) ||
	    !cJSON_AddStringToObject(m, "artifactType", BOX_OCI_ARTIFACT_TYPE))
		goto out;
	c = descriptor(BOX_OCI_MT_CONFIG, config_digest, config_size);
	if (!c)
		goto out;
	cJSON_AddItemToObject(m, "config", c);
	layers = cJSON_AddArrayToObject(m, "layers");
	l = descriptor(BOX_OCI_MT_LAYER_TGZ, layer_digest, layer_size);
	if (!layers || !l) {
		cJSON_Delete(l);
		goto out;
	}
	cJSON_AddItemToArray(layers, l);
	a = cJSON_AddObjectToObject(l, "annotations");
	if (!a || !cJSON_AddStringToObject(a, BOX_OCI_TITLE, layer_title))
		goto out;
	text = cJSON_PrintUnformatted(m);
	if (text && len)
		*len = strlen(text);
out:
	cJSON_Delete(m);
	return text;
}

static int get_desc(const cJSON *d, const char *path, char dg[BOX_OCI_DIGEST_LEN], int64_t *size,
		    struct box_err *err)
{
	const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "digest"));

	if (!cJSON_IsObject(d) || !digest_ok(s) ||
	    !box_json_int64(cJSON_GetObjectItemCaseSensitive(d, "size"), size) || *size < 0) {
		box_err_set(err, BOX_E_INVALID, "artifact manifest: malformed descriptor");
		box_err_path(err, path);
		return -1;
	}
	snprintf(dg, BOX_OCI_DIGEST_LEN, "%s", s);
	return 0;
}

int box_oci_artifact_parse(const char *json, size_t len, struct box_oci_artifact *a,
			   struct box_err *err)
{
	cJSON *m = parse_manifest(json, len, err);
	const cJSON *c, *layers, *l;
	const char *s;
	int r = -1;

	if (!m)
		return -1;
	memset(a, 0, sizeof(*a));
	s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "artifactType"));
	if (!s || strcmp(s, BOX_OCI_ARTIFACT_TYPE) != 0) {
		box_err_set(err, BOX_E_INVALID, "not a box artifact (artifactType %s expected)",
			    BOX_OCI_ARTIFACT_TYPE);
		box_err_path(err, "$.artifactType");
		goto out;
	}
	c = cJSON_GetObjectItemCaseSensitive(m, "config");
	s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "mediaType"));
	if (!s || strcmp(s, BOX_OCI_MT_CONFIG) != 0) {
		box_err_set(err, BOX_E_INVALID, "artifact manifest: config mediaType %s expected",
			    BOX_OCI_MT_CONFIG);
		box_err_path(err, "$.config.mediaType");
		goto out;
	}
	if (get_desc(c, "$.config", a->config_digest, &a->config_size, err) < 0)
		goto out;
	layers = cJSON_GetObjectItemCaseSensitive(m, "layers");
	if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) != 1) {
		box_err_set(err, BOX_E_INVALID, "artifact manifest: exactly one layer expected");
		box_err_path(err, "$.layers");
		goto out;
	}
	l = layers->child;
	s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(l, "mediaType"));
	if (!s || strlen(s) >= sizeof(a->layer_media_type)) {
		box_err_set(err, BOX_E_INVALID, "artifact manifest: bad layer mediaType");
		box_err_path(err, "$.layers[0].mediaType");
		goto out;
	}
	snprintf(a->layer_media_type, sizeof(a->layer_media_type), "%s", s);
	if (get_desc(l, "$.layers[0]", a->layer_digest, &a->layer_size, err) < 0)
		goto out;
	s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(l, "annotations"), BOX_OCI_TITLE));
	if (s) {
		if (strlen(s) >= sizeof(a->title)) {
			box_err_set(err, BOX_E_INVALID, "artifact manifest: layer title too long");
			box_err_path(err, "$.layers[0].annotations");
			goto out;
		}
		snprintf(a->title, sizeof(a->title), "%s", s);
	}
	r = 0;
out:
	cJSON_Delete(m);
	return r;
}
