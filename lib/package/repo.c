#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "repo.h"
#include "libexec.h"
#include "proc.h"
#include "atomic.h"
#include "base64.h"
#include "json.h"
#include "regserve.h"
#include "sha256.h"
#include "banned.h"

/* One request to the helper (req is consumed; fd >= 0 is passed along): its answer, or NULL
 * with the helper's error. */
static cJSON *call(struct box_repo *r, cJSON *req, int fd, struct box_err *err)
{
	struct box_buf frame = BOX_BUF_INIT(BOX_REGSERVE_MAX_FRAME);
	char *text = req ? cJSON_PrintUnformatted(req) : NULL;
	struct box_ipc_field f;
	cJSON *ans = NULL;
	uint8_t op;
	int k;

	cJSON_Delete(req);
	if (!text)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	f.p = text;
	f.n = strlen(text);
	k = box_ipc_send(r->sock, BOX_REGSERVE_ANSWER, &f, 1, -1, err);
	free(text);
	if (k < 0)
		return NULL;
	for (;;) {
		struct box_ipc_field g[1];

		box_buf_truncate(&frame, 0);
		k = box_ipc_recv(r->sock, r->in, &op, &frame, -1, err);
		if (k <= 0) {
			if (k == 0)
				box_err_set(err, BOX_E_INTERNAL, "the registry helper ended without an answer");
			break;
		}
		cJSON_Delete(ans);
		ans = box_ipc_split(frame.data, frame.len, g, 1) == 1 ?
		      box_json_parse(g[0].p, g[0].n, err) : NULL;
		if (!ans) {
			box_err_set(err, BOX_E_INTERNAL, "the registry helper answered garbage");
			break;
		}
		if (op == BOX_REGSERVE_READY) {
			if (fd < 0 || box_ipc_send_fds(r->sock, &fd, 1, err) < 0) {
				if (fd < 0)
					box_err_set(err, BOX_E_INTERNAL, "the registry helper asks for an fd");
				break;
			}
			fd = -1;
			continue;
		}
		if (op == BOX_REGSERVE_PROGRESS) {
			if (r->progress)
				r->progress(r->progress_ctx, box_json_get_int(ans, "done", 0),
					    box_json_get_int(ans, "total", 0));
			continue;
		}
		if (!box_json_get_bool(ans, "ok", 0)) {
			if (box_err_from_json(err, cJSON_GetObjectItemCaseSensitive(ans, "error")) < 0)
				box_err_set(err, BOX_E_INTERNAL, "the registry helper failed");
			break;
		}
		box_buf_release(&frame);
		return ans;
	}
	cJSON_Delete(ans);
	box_buf_release(&frame);
	return NULL;
}

/* Starts box-registry (found by box_libexec_find) through the one child runner of lib/proc:
 * its own process group, only fds 0-2, killed with its caller; it serves the protocol of
 * lib/net/regserve.h on its stdin, a socket, and writes its diagnostics to our stderr. */
static int helper_start(struct box_repo *r, struct box_err *err)
{
	extern char **environ;
	char path[PATH_MAX];
	const char *argv[] = { path, NULL };
	struct box_proc_opts o = { 0 };

	if (box_libexec_find("box-registry", path, sizeof(path), err) < 0)
		return -1;
	if (!(r->in = calloc(1, sizeof(*r->in))))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	o.argv = argv;
	o.envp = environ;
	o.stderr_inherit = 1;
	o.die_with_parent = 1;
	if (box_proc_spawn(&o, &r->helper, err) < 0)
		return -1;
	r->sock = r->helper.in;
	return 0;
}

int box_repo_open(const char *ref, int create, int insecure, struct box_repo *r,
		  struct box_err *err)
{
	cJSON *req, *ans;

	memset(r, 0, sizeof(*r));
	r->oci.dirfd = r->oci.blobsfd = -1;
	r->sock = -1;
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
	if (helper_start(r, err) < 0) {
		box_repo_close(r);
		return -1;
	}
	req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "op", "init");
	cJSON_AddStringToObject(req, "ref", ref);
	cJSON_AddBoolToObject(req, "insecure", insecure);
	ans = call(r, req, -1, err);
	if (!ans) {
		if (!err->path[0])
			box_err_path(err, "$.registry");
		box_repo_close(r);
		return -1;
	}
	cJSON_Delete(ans);
	return 0;
}

void box_repo_close(struct box_repo *r)
{
	if (r->remote) {
		/* every answer has been read: nothing the helper does is left to wait for */
		if (r->sock >= 0)
			box_proc_stop(&r->helper);
		free(r->in);
		r->sock = -1;
		r->in = NULL;
	} else if (r->oci.dirfd >= 0) {
		box_oci_close(&r->oci);
	}
}

/* A manifest from the helper: body decoded into *body (appended), digest and media type. */
static int get_manifest(struct box_repo *r, const char *name, const char *ref,
			struct box_buf *body, char digest[BOX_OCI_DIGEST_LEN],
			char mt[BOX_REGISTRY_MEDIA_TYPE_MAX], struct box_err *err)
{
	cJSON *req = cJSON_CreateObject(), *ans;
	const char *b64;
	int rc;

	cJSON_AddStringToObject(req, "op", "manifest");
	cJSON_AddStringToObject(req, "name", name);
	cJSON_AddStringToObject(req, "ref", ref);
	if (!(ans = call(r, req, -1, err)))
		return -1;
	b64 = box_json_get_str(ans, "body", "");
	snprintf(digest, BOX_OCI_DIGEST_LEN, "%s", box_json_get_str(ans, "digest", ""));
	snprintf(mt, BOX_REGISTRY_MEDIA_TYPE_MAX, "%s", box_json_get_str(ans, "media_type", ""));
	rc = box_oci_digest_check(digest, err) < 0 ? -1 :
	     box_base64_decode(b64, strlen(b64), body, err);
	cJSON_Delete(ans);
	return rc;
}

/* blob or put_blob through the helper, with fd passed to it. */
static int blob_op(struct box_repo *r, const char *op, const char *name, const char *digest,
		   int64_t size, int fd, struct box_err *err)
{
	cJSON *req = cJSON_CreateObject(), *ans;

	cJSON_AddStringToObject(req, "op", op);
	cJSON_AddStringToObject(req, "name", name);
	cJSON_AddStringToObject(req, "digest", digest);
	box_json_add_int64(req, "size", size);
	ans = call(r, req, fd, err);
	cJSON_Delete(ans);
	return ans ? 0 : -1;
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
	if (get_manifest(r, name, ref, manifest, digest, mt, err) < 0)
		return -1;
	if (strcmp(mt, BOX_MT_OCI_INDEX) != 0)
		return 0;
	if (pick_from_index(manifest, d, err) < 0)
		return -1;
	box_buf_truncate(manifest, 0);
	return get_manifest(r, name, d, manifest, digest, mt, err);
}

cJSON *box_repo_tags(struct box_repo *r, const char *name, struct box_err *err)
{
	cJSON *req, *ans, *tags;

	if (!r->remote)
		return box_oci_tags(&r->oci, name, err);
	req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "op", "tags");
	cJSON_AddStringToObject(req, "name", name);
	if (!(ans = call(r, req, -1, err))) {
		/* a name the registry does not know has no tags */
		if (err->code == BOX_E_NOT_FOUND)
			return cJSON_CreateArray();
		return NULL;
	}
	tags = cJSON_DetachItemFromObjectCaseSensitive(ans, "tags");
	cJSON_Delete(ans);
	if (!cJSON_IsArray(tags)) {
		cJSON_Delete(tags);
		return box_err_set(err, BOX_E_INTERNAL, "the registry helper sent no tags"), NULL;
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
	return blob_op(r, "blob", name, digest, size, outfd, err);
}

int box_repo_put_blob(struct box_repo *r, const char *name, int fd, const char *digest,
		      int64_t size, struct box_err *err)
{
	char got[BOX_OCI_DIGEST_LEN];
	int64_t n;

	if (r->remote)
		return blob_op(r, "put_blob", name, digest, size, fd, err);
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
	{
		struct box_buf b64 = BOX_BUF_INIT(BOX_REGSERVE_MAX_FRAME);
		cJSON *req, *ans;

		if (box_base64_encode(json, len, &b64, err) < 0)
			return -1;
		req = cJSON_CreateObject();
		cJSON_AddStringToObject(req, "op", "put_manifest");
		cJSON_AddStringToObject(req, "name", name);
		cJSON_AddStringToObject(req, "tag", tag);
		cJSON_AddStringToObject(req, "media_type", BOX_OCI_MT_MANIFEST);
		cJSON_AddItemToObject(req, "body", box_json_string_n(b64.data ? b64.data : "",
								     b64.len));
		box_buf_release(&b64);
		ans = call(r, req, -1, err);
		cJSON_Delete(ans);
		return ans ? 0 : -1;
	}
}
