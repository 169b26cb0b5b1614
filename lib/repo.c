#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "repo.h"
#include "atomic.h"
#include "sha256.h"
#include "banned.h"

int box_repo_open(const char *ref, int create, int insecure, struct box_repo *r,
		  struct box_err *err)
{
	memset(r, 0, sizeof(*r));
	r->oci.dirfd = r->oci.blobsfd = -1;
	if (strlen(ref) > BOX_REGISTRY_REF_MAX) {
		box_err_set(err, BOX_E_INVALID, "registry reference too long");
		box_err_path(err, "$.registry");
		return -1;
	}
	snprintf(r->ref, sizeof(r->ref), "%s", ref);
	if (strncmp(ref, "oci:", 4) == 0) {
		/* the embedded default registry lives under BOX_HOME, which may not exist yet */
		if (create && box_mkdirs(ref + 4, err) < 0)
			return -1;
		return box_oci_open(ref + 4, create, &r->oci, err);
	}
	r->remote = 1;
	if (box_registry_init(&r->reg, ref, insecure, err) < 0) {
		if (!err->path[0])
			box_err_path(err, "$.registry");
		return -1;
	}
	return 0;
}

void box_repo_close(struct box_repo *r)
{
	if (r->remote)
		box_registry_release(&r->reg);
	else if (r->oci.dirfd >= 0)
		box_oci_close(&r->oci);
}

/* An index from a remote registry: the first manifest with the box artifactType. */
static int pick_from_index(const struct box_buf *b, char digest[BOX_OCI_DIGEST_LEN],
			   struct box_err *err)
{
	cJSON *o = cJSON_ParseWithLength(b->data, b->len), *m;
	int rc = box_err_set(err, BOX_E_NOT_FOUND, "the index holds no box artifact");

	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(o, "manifests")) {
		const cJSON *at = cJSON_GetObjectItemCaseSensitive(m, "artifactType");
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "digest");

		if (cJSON_IsString(at) && strcmp(at->valuestring, BOX_OCI_ARTIFACT_TYPE) == 0 &&
		    cJSON_IsString(d) && box_oci_digest_check(d->valuestring, err) == 0) {
			snprintf(digest, BOX_OCI_DIGEST_LEN, "%s", d->valuestring);
			rc = 0;
			break;
		}
	}
	cJSON_Delete(o);
	return rc;
}

int box_repo_resolve(struct box_repo *r, const char *name, const char *ref,
		     char digest[BOX_OCI_DIGEST_LEN], struct box_buf *manifest, struct box_err *err)
{
	char mt[BOX_REGISTRY_MEDIA_TYPE_MAX], d[BOX_OCI_DIGEST_LEN];

	if (!r->remote)
		return box_oci_resolve(&r->oci, name, ref, digest, manifest, err);
	if (box_registry_get_manifest(&r->reg, name, ref, manifest, digest, mt, err) < 0)
		return -1;
	if (strcmp(mt, BOX_MT_OCI_INDEX) != 0)
		return 0;
	if (pick_from_index(manifest, d, err) < 0)
		return -1;
	box_buf_truncate(manifest, 0);
	return box_registry_get_manifest(&r->reg, name, d, manifest, digest, mt, err);
}

cJSON *box_repo_tags(struct box_repo *r, const char *name, struct box_err *err)
{
	cJSON *tags = NULL;

	if (!r->remote)
		return box_oci_tags(&r->oci, name, err);
	if (box_registry_tags(&r->reg, name, &tags, err) < 0) {
		/* a name the registry does not know has no tags */
		if (err->code == BOX_E_NOT_FOUND)
			return cJSON_CreateArray();
		return NULL;
	}
	return tags;
}

/* Copies a local blob while hashing it: the copy is checked, not the file the layout holds,
 * so nothing can change it between the check and its use. */
static int copy_checked(struct box_repo *r, const char *digest, int64_t size, int outfd,
			struct box_err *err)
{
	unsigned char md[BOX_SHA256_LEN];
	char hex[BOX_SHA256_HEX_LEN + 1];
	struct box_sha256 h = { NULL };
	int64_t have, total = 0;
	char *buf = malloc(1 << 18);
	int in = box_oci_open_blob(&r->oci, digest, &have, err), rc = -1;

	if (in < 0 || !buf || box_sha256_init(&h, err) < 0) {
		if (in >= 0 && !buf)
			box_err_set(err, BOX_E_INTERNAL, "out of memory");
		free(buf);
		if (in >= 0)
			close(in);
		return -1;
	}
	for (;;) {
		ssize_t n = read(in, buf, 1 << 18);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			box_err_sys(err, "read blob %s", digest);
			goto out;
		}
		if (n == 0)
			break;
		total += n;
		if (total > size) {
			box_err_set(err, BOX_E_INTEGRITY, "blob %s is larger than its descriptor says",
				    digest);
			goto out;
		}
		if (box_sha256_update(&h, buf, (size_t)n, err) < 0)
			goto out;
		if (box_write_all(outfd, buf, (size_t)n) < 0) {
			box_err_sys(err, "write the blob copy");
			goto out;
		}
		if (r->progress)
			r->progress(r->progress_ctx, total, size);
	}
	if (box_sha256_final(&h, md, err) < 0)
		goto out;
	box_sha256_hex(md, hex);
	if (total != size || strcmp(hex, digest + 7) != 0)
		box_err_set(err, BOX_E_INTEGRITY, "blob %s does not match its digest or size "
			    "(got sha256:%s, %lld bytes)", digest, hex, (long long)total);
	else
		rc = 0;
out:
	box_sha256_release(&h);
	free(buf);
	close(in);
	return rc;
}

int box_repo_fetch(struct box_repo *r, const char *name, const char *digest, int64_t size,
		   int outfd, struct box_err *err)
{
	if (!r->remote)
		return copy_checked(r, digest, size, outfd, err);
	r->reg.progress = r->progress;
	r->reg.progress_ctx = r->progress_ctx;
	return box_registry_get_blob(&r->reg, name, digest, outfd, size, err);
}

int box_repo_put_blob(struct box_repo *r, const char *name, int fd, const char *digest,
		      int64_t size, struct box_err *err)
{
	char got[BOX_OCI_DIGEST_LEN];
	int64_t n;

	if (r->remote)
		return box_registry_put_blob(&r->reg, name, fd, digest, size, err);
	return box_oci_put_blob_fd(&r->oci, fd, digest, size, got, &n, err);
}

int box_repo_put_manifest(struct box_repo *r, const char *name, const char *tag,
			  const char *json, size_t len, int replace,
			  char digest[BOX_OCI_DIGEST_LEN], struct box_err *err)
{
	struct box_buf old = BOX_BUF_INIT(BOX_OCI_MANIFEST_MAX);
	char hex[BOX_SHA256_HEX_LEN + 1], cur[BOX_OCI_DIGEST_LEN];
	struct box_err e;

	if (!r->remote)
		return box_oci_put_manifest(&r->oci, json, len, name, tag, replace, digest, err);
	if (box_sha256_buf(json, len, hex, err) < 0)
		return -1;
	snprintf(digest, BOX_OCI_DIGEST_LEN, "sha256:%s", hex);
	/* a registry moves tags silently: look first */
	if (!replace && box_repo_resolve(r, name, tag, cur, &old, &e) == 0 && strcmp(cur, digest)) {
		box_buf_release(&old);
		return box_err_set(err, BOX_E_CONFLICT, "%s:%s already points to %s", name, tag, cur);
	}
	box_buf_release(&old);
	return box_registry_put_manifest(&r->reg, name, tag, json, len, BOX_OCI_MT_MANIFEST, err);
}
