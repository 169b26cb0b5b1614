/* A registry reference, local or remote, behind one set of operations: oci:PATH (an OCI Image
 * Layout directory, lib/artifact/oci.h) or an OCI Distribution registry (lib/net/registry.h). */
#ifndef BOX_REPO_H
#define BOX_REPO_H

#include <stdint.h>
#include <sys/types.h>
#include <cjson/cJSON.h>
#include "buf.h"
#include "err.h"
#include "ipc.h"
#include "oci.h"
#include "proc.h"
#include "registry.h"

struct box_repo {
	/* optional: called as a blob is fetched (bytes so far, expected size) */
	void (*progress)(void *ctx, int64_t done, int64_t total);
	void *progress_ctx;
	int remote;
	struct box_oci oci;
	/* a remote registry: the box-registry helper (lib/net/regserve.h) on a socket */
	int sock;                     /* helper.in */
	struct box_proc_child helper;
	struct box_ipc_in *in;
	char ref[BOX_REGISTRY_REF_MAX + 1];
};

/* Opens ref ("oci:PATH", "https://HOST[:PORT][/PREFIX]", "HOST[:PORT]/PREFIX", or
 * "http://..." for loopback hosts or with insecure). create: make a missing layout (and its
 * parent directories). Returns 0, or -1 with err (path "$.registry"). */
int box_repo_open(const char *ref, int create, int insecure, struct box_repo *r,
		  struct box_err *err);
void box_repo_close(struct box_repo *r);

/* The box artifact manifest of name at ref (a tag or sha256:HEX; an index is followed to the
 * manifest with the box artifactType), its digest checked. Returns 0 or -1. */
int box_repo_resolve(struct box_repo *r, const char *name, const char *ref,
		     char digest[BOX_OCI_DIGEST_LEN], struct box_buf *manifest, struct box_err *err);

/* The tags of name (an array of strings; none is an empty array), or NULL with err. */
cJSON *box_repo_tags(struct box_repo *r, const char *name, struct box_err *err);

/* Writes blob name@digest of the descriptor's size to outfd (an empty regular file) and checks
 * size and digest on the way: a mismatch is integrity_failed. Returns 0 or -1. */
int box_repo_fetch(struct box_repo *r, const char *name, const char *digest, int64_t size,
		   int outfd, struct box_err *err);

/* Pushes a blob read from fd (at offset 0) of the given digest and size. */
int box_repo_put_blob(struct box_repo *r, const char *name, int fd, const char *digest,
		      int64_t size, struct box_err *err);

/* Tags name:tag with the manifest; a tag naming another digest is a conflict unless replace.
 * digest gets the manifest's digest. */
int box_repo_put_manifest(struct box_repo *r, const char *name, const char *tag,
			  const char *json, size_t len, int replace,
			  char digest[BOX_OCI_DIGEST_LEN], struct box_err *err);

#endif
