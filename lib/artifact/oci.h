/* An OCI Image Layout directory used as a registry of box artifacts (`oci:PATH`). */
#ifndef BOX_OCI_H
#define BOX_OCI_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "buf.h"
#include "err.h"

#define BOX_OCI_MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define BOX_OCI_MT_INDEX "application/vnd.oci.image.index.v1+json"
#define BOX_OCI_MT_LAYER_TGZ "application/vnd.oci.image.layer.v1.tar+gzip"
#define BOX_OCI_ARTIFACT_TYPE "application/vnd.box.artifact.v1"
#define BOX_OCI_MT_CONFIG "application/vnd.box.artifact.config.v1+json"
#define BOX_OCI_REF_NAME "org.opencontainers.image.ref.name"
#define BOX_OCI_TITLE "org.opencontainers.image.title"

/* "sha256:" + 64 hex digits + NUL */
#define BOX_OCI_DIGEST_LEN 72
/* Caps on what is read from a layout: a manifest (the OCI distribution spec's 4 MiB), the
 * index.json of a layout, its oci-layout file. */
#define BOX_OCI_MANIFEST_MAX (4 * 1024 * 1024)
#define BOX_OCI_INDEX_MAX (16 * 1024 * 1024)
#define BOX_OCI_LAYOUT_MAX 4096
/* Bounds on names: a repository name of the distribution spec, and a tag. */
#define BOX_OCI_NAME_MAX 255
#define BOX_OCI_TAG_MAX 128
/* The lock file, next to index.json, that every writer of index.json holds exclusively. */
#define BOX_OCI_LOCK_NAME ".box-index.lock"

/*
 * An open layout. The descriptors are owned; box_oci_close() releases them.
 * lock_timeout_ms bounds the wait for the index lock (box_oci_open sets 10000; the caller may
 * change it afterwards).
 */
struct box_oci {
	int dirfd;       /* the layout directory */
	int blobsfd;     /* blobs/sha256 */
	int lock_timeout_ms;
	/* the last index.json read for lookups, kept while the file is the same one (inode,
	 * size, change time): index.json is only ever replaced by rename */
	cJSON *index_cache;
	unsigned long long index_ino, index_size;
	long long index_ctime_ns;
};

/*
 * Naming. One layout holds many artifacts, so a manifest is tagged in index.json with
 * org.opencontainers.image.ref.name = "NAME:TAG" (NAME a repository name of the distribution
 * spec: lowercase components [a-z0-9]+ joined by '.', '_', '__' or '-'+, separated by '/', at
 * most BOX_OCI_NAME_MAX bytes; TAG [A-Za-z0-9_][A-Za-z0-9._-]{0,127}). Since NAME cannot
 * contain ':', the first ':' splits a ref name. The tags of NAME are the ref names starting
 * with "NAME:".
 */

/* 0 if name is a valid repository name, else -1 with invalid_request. */
int box_oci_name_check(const char *name, struct box_err *err);

/* 0 if tag is a valid tag, else -1 with invalid_request. */
int box_oci_tag_check(const char *tag, struct box_err *err);

/* 0 if digest is "sha256:" followed by exactly 64 lowercase hex digits, else -1 with
 * invalid_request (other algorithms are not supported). */
int box_oci_digest_check(const char *digest, struct box_err *err);

/*
 * Opens the layout at path. With create, a missing directory is made (its parent must exist)
 * and a missing oci-layout ({"imageLayoutVersion": "1.0.0"}), index.json (schemaVersion 2, no
 * manifests) and blobs/sha256/ are created (under the index lock, atomically, so concurrent
 * creators agree). Then the layout is checked: oci-layout must be an object whose
 * imageLayoutVersion is a "1.x" string, index.json an object with schemaVersion 2 and a
 * manifests array of descriptors (mediaType and digest strings, a non-negative integer size);
 * both are read with size caps. Returns 0 and fills *o, or -1:
 *   not_found        path (or, without create, oci-layout, index.json or blobs/sha256) is missing
 *   invalid_request  oci-layout or index.json is malformed, too large, or not a regular file
 *   io_error         a system call failed
 */
int box_oci_open(const char *path, int create, struct box_oci *o, struct box_err *err);

/* Closes the descriptors; safe to call twice. */
void box_oci_close(struct box_oci *o);

/*
 * Streams fd to its end into a temp file of blobs/sha256 while hashing it, then renames it to
 * blobs/sha256/<hex> (an identical blob already there is replaced by the same bytes).
 * expect_digest, if not NULL, must match (checked for syntax first). More than max_size bytes
 * (max_size < 0: no cap) is limit_exceeded (limit "blob_bytes"). On any failure the temp file
 * is removed and nothing is left behind. digest (may be NULL) gets "sha256:<hex>", *size (may
 * be NULL) the byte count. Returns 0, or -1:
 *   invalid_request  expect_digest is malformed
 *   integrity_failed the bytes do not hash to expect_digest
 *   limit_exceeded   the input is longer than max_size
 *   io_error         reading, writing or renaming failed
 */
int box_oci_put_blob_fd(struct box_oci *o, int fd, const char *expect_digest, int64_t max_size,
			char digest[BOX_OCI_DIGEST_LEN], int64_t *size, struct box_err *err);

/* The same for n bytes in memory (no size cap; written with box_atomic_write). */
int box_oci_put_blob_buf(struct box_oci *o, const void *data, size_t n, const char *expect_digest,
			 char digest[BOX_OCI_DIGEST_LEN], struct box_err *err);

/*
 * Opens the blob digest read-only (never following a symlink); *size (may be NULL) gets its
 * size. Returns the fd (the caller closes it), or -1: invalid_request (digest syntax, or the
 * blob is not a regular file), not_found, io_error. The bytes are not checked: see
 * box_oci_verify_blob(), or hash while reading.
 */
int box_oci_open_blob(struct box_oci *o, const char *digest, int64_t *size, struct box_err *err);

/* Re-hashes the blob digest. Returns 0, or -1 with integrity_failed when the bytes do not
 * hash to digest, or the errors of box_oci_open_blob(). *size (may be NULL) gets its size. */
int box_oci_verify_blob(struct box_oci *o, const char *digest, int64_t *size,
			struct box_err *err);

/*
 * Stores the manifest (or image index) json[0..len) as a blob and adds its descriptor to
 * index.json: mediaType (the manifest's own, image manifest if absent and it has layers, image
 * index if it has manifests), artifactType when the manifest has one, digest, size, and the
 * annotation org.opencontainers.image.ref.name = "NAME:TAG". The manifest must parse (at most
 * BOX_OCI_MANIFEST_MAX bytes) as an object with schemaVersion 2, and every blob it refers to
 * (config and layers, or the manifests of an index) must already be in the layout with the
 * size its descriptor says. With tag NULL the manifest is stored and listed untagged (name is
 * then ignored and may be NULL). A NAME:TAG already pointing to the same digest is left as is;
 * pointing to another digest it is moved only when replace is set, otherwise conflict. The
 * blob and index.json are written while holding an exclusive flock on BOX_OCI_LOCK_NAME, and
 * index.json is replaced atomically, so concurrent writers never lose an entry and a conflict
 * writes nothing. digest (may be NULL) gets the manifest digest. Returns 0, or -1:
 *   invalid_request  bad name/tag, malformed manifest, a blob of the wrong size
 *   not_found        a referenced blob is missing
 *   conflict         the tag points elsewhere (or the lock wait timed out, retryable)
 *   limit_exceeded   the manifest is larger than BOX_OCI_MANIFEST_MAX
 *   io_error
 */
int box_oci_put_manifest(struct box_oci *o, const char *json, size_t len, const char *name,
			 const char *tag, int replace, char digest[BOX_OCI_DIGEST_LEN],
			 struct box_err *err);

/*
 * Finds the manifest of name at ref: a tag (looked up as "NAME:TAG" in index.json) or a digest
 * "sha256:<hex>" (looked up directly among the blobs: content addressing makes the name
 * irrelevant to its integrity, and manifests inside an image index are not listed in
 * index.json). The bytes read (at most BOX_OCI_MANIFEST_MAX) must hash to the digest and, for
 * a tag, have the size of its descriptor. If the manifest is an image index, the first entry
 * with artifactType BOX_OCI_ARTIFACT_TYPE is read and checked the same way (one level only:
 * an index in an index is refused). digest (may be NULL) gets the digest of the manifest
 * returned, manifest (may be NULL; replaced) its bytes. Returns 0, or -1:
 *   invalid_request  bad name, tag or digest, or a manifest that is not a JSON object with
 *                    schemaVersion 2
 *   not_found        no such tag or blob, or an index without a box artifact
 *   integrity_failed the bytes do not match the digest or the descriptor size
 *   limit_exceeded   the manifest is larger than BOX_OCI_MANIFEST_MAX
 *   io_error
 */
int box_oci_resolve(struct box_oci *o, const char *name, const char *ref,
		    char digest[BOX_OCI_DIGEST_LEN], struct box_buf *manifest, struct box_err *err);

/* The tags of name in index.json, as a JSON array of strings sorted bytewise, without
 * duplicates (empty when name has none). Returns a tree the caller deletes, or NULL with
 * invalid_request (bad name, malformed index.json), io_error or internal (OOM). */
cJSON *box_oci_tags(struct box_oci *o, const char *name, struct box_err *err);

/*
 * The manifest of a box artifact, printed canonically (fixed key order, no whitespace, no
 * trailing newline), so the same inputs always give the same bytes and digest:
 *   {"schemaVersion":2,"mediaType":BOX_OCI_MT_MANIFEST,"artifactType":BOX_OCI_ARTIFACT_TYPE,
 *    "config":{"mediaType":BOX_OCI_MT_CONFIG,"digest":...,"size":...},
 *    "layers":[{"mediaType":BOX_OCI_MT_LAYER_TGZ,"digest":...,"size":...,
 *               "annotations":{"org.opencontainers.image.title":TITLE}}]}
 * Returns a NUL-terminated string the caller frees, its length in *len (may be NULL), or NULL
 * when a digest is malformed, a size negative, the title empty or not valid for JSON output
 * (control characters), or on OOM.
 */
char *box_oci_artifact_manifest(const char *config_digest, int64_t config_size,
				const char *layer_digest, int64_t layer_size,
				const char *layer_title, size_t *len);

/* The parts of a box artifact manifest that a puller needs. */
struct box_oci_artifact {
	char config_digest[BOX_OCI_DIGEST_LEN];
	int64_t config_size;
	char layer_digest[BOX_OCI_DIGEST_LEN];
	int64_t layer_size;
	char layer_media_type[128];
	char title[256];     /* empty if the layer has no title annotation */
};

/*
 * Reads a box artifact manifest (as box_oci_resolve returns it): schemaVersion 2, artifactType
 * BOX_OCI_ARTIFACT_TYPE, a config of media type BOX_OCI_MT_CONFIG and exactly one layer, all
 * digests valid sha256 digests and sizes non-negative integers. Returns 0 and fills *a, or -1
 * with invalid_request (err->path names the offending member).
 */
int box_oci_artifact_parse(const char *json, size_t len, struct box_oci_artifact *a,
			   struct box_err *err);

#endif
