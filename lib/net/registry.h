/*
 * OCI Distribution client (box-pack pushes with it, box-pull pulls with it): manifests, blobs,
 * tag lists, Basic and Bearer auth, typed errors from the registry's error bodies.
 *
 * Unlike http.h (box-run's guest client) it does not pin addresses or refuse private networks:
 * the registry is configured by the operator, not chosen by untrusted code. It never prints.
 */
#ifndef BOX_REGISTRY_H
#define BOX_REGISTRY_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "buf.h"
#include "err.h"

#define BOX_REGISTRY_REF_MAX 1024
#define BOX_REGISTRY_HOST_MAX 262            /* "[v6]:port" or "name:port" */
#define BOX_REGISTRY_NAME_MAX 255            /* repository name, prefix included */
#define BOX_REGISTRY_DIGEST_MAX 72           /* "sha256:" + 64 hex + NUL fits */
#define BOX_REGISTRY_MEDIA_TYPE_MAX 128
#define BOX_REGISTRY_MAX_MANIFEST (4 * 1024 * 1024)
#define BOX_REGISTRY_MAX_REDIRECTS 5
#define BOX_REGISTRY_MAX_RESUMES 4           /* Range retries of one interrupted blob download */
#define BOX_REGISTRY_MAX_429 3               /* 429 answers waited out per request */
#define BOX_REGISTRY_MAX_RETRY_AFTER_S 10    /* cap on one Retry-After wait */
#define BOX_REGISTRY_MAX_TAG_PAGES 100
#define BOX_REGISTRY_MAX_TAGS 10000
#define BOX_REGISTRY_DEFAULT_TIMEOUT_MS 300000

#define BOX_MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define BOX_MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define BOX_MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define BOX_MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"

/*
 * One registry. Filled by box_registry_init; the caller may then change timeout_ms (bound on
 * the whole of each operation, 0: BOX_REGISTRY_DEFAULT_TIMEOUT_MS) and retry_after_cap_s (0
 * means no waiting at all on 429; tests use it). Not thread-safe: one operation at a time.
 */
struct box_registry {
	char scheme[8];                          /* "https" or "http" */
	char host[BOX_REGISTRY_HOST_MAX + 1];    /* lowercase, as in URLs and as docker's config.json
						  * keys it: "example.com:5000", "[::1]:5000" */
	char prefix[BOX_REGISTRY_NAME_MAX + 1];  /* repository prefix, "" or "a/b" */
	int insecure;
	int64_t timeout_ms;
	int retry_after_cap_s;

	/* auth state for the run (owned) */
	char *userpass;        /* "user:password", loaded at the first 401 */
	int creds_loaded;
	int use_basic;         /* the registry asked for Basic */
	char *token;           /* cached Bearer token */
	void *curl;            /* CURL handle reused for connection reuse */

	/* optional: called as blob bytes arrive (done so far, expected size); set by the caller */
	void (*progress)(void *ctx, int64_t done, int64_t total);
	void *progress_ctx;
};

/*
 * Parses a registry reference: "https://HOST[:PORT][/PREFIX]", "http://HOST[:PORT][/PREFIX]"
 * (only for loopback hosts — 127.0.0.0/8, ::1, localhost — unless insecure) or the bare
 * "HOST[:PORT][/PREFIX]" (https), where a bare HOST must contain a dot or a port or be
 * "localhost", as docker decides. PREFIX components follow the OCI repository name grammar.
 * Allocates nothing but the curl handle at first use. Returns 0, or -1 with invalid_request
 * (malformed) or policy_denied (plain http to a non-loopback host); *reg is then empty.
 */
int box_registry_init(struct box_registry *reg, const char *ref, int insecure,
		      struct box_err *err);

/* Frees the credentials, the token and the curl handle; *reg is empty afterwards. */
void box_registry_release(struct box_registry *reg);

/*
 * GETs manifest name:ref (ref a tag or "sha256:HEX") with Accept naming the OCI manifest and
 * index and the Docker v2 manifest and list types. The body (at most BOX_REGISTRY_MAX_MANIFEST
 * bytes, else limit_exceeded "manifest_bytes") is appended to *body; digest gets
 * "sha256:HEX" computed over it, media_type the Content-Type (parameters dropped). When ref is
 * a digest it must match, and Docker-Content-Digest must match when present
 * (integrity_failed). Errors: see the end of this header.
 */
int box_registry_get_manifest(struct box_registry *reg, const char *name, const char *ref,
			      struct box_buf *body, char digest[BOX_REGISTRY_DIGEST_MAX],
			      char media_type[BOX_REGISTRY_MEDIA_TYPE_MAX], struct box_err *err);

/*
 * Streams blob name@digest to outfd while hashing it. outfd is a regular file open for reading
 * and writing; what it already holds is taken as a prefix of the blob (re-hashed from the
 * file, then the rest requested with "Range: bytes=N-"), so an interrupted download is resumed
 * (at most BOX_REGISTRY_MAX_RESUMES times per call). Redirects (at most
 * BOX_REGISTRY_MAX_REDIRECTS) are followed; Authorization is only ever sent to the registry's
 * own scheme, host and port. expected_size >= 0 is the descriptor's size: more bytes stop the
 * download, and any size or digest mismatch at the end is integrity_failed (the file then
 * holds what was received; the caller discards it).
 */
int box_registry_get_blob(struct box_registry *reg, const char *name, const char *digest,
			  int outfd, int64_t expected_size, struct box_err *err);

/*
 * The tags of name (tags/list, following Link rel="next" pages, at most
 * BOX_REGISTRY_MAX_TAG_PAGES pages and BOX_REGISTRY_MAX_TAGS tags) as a new JSON array of
 * strings in *tags (the caller cJSON_Deletes it). A repository with no tags gives [].
 */
int box_registry_tags(struct box_registry *reg, const char *name, cJSON **tags,
		      struct box_err *err);

/*
 * Uploads size bytes of fd (read from offset 0 with pread) as blob digest, unless a HEAD shows
 * the registry has it already: POST /blobs/uploads/, then PUT Location?digest= (a monolithic
 * upload; relative and absolute Locations handled). The registry checks the digest
 * (DIGEST_INVALID is integrity_failed).
 */
int box_registry_put_blob(struct box_registry *reg, const char *name, int fd, const char *digest,
			  int64_t size, struct box_err *err);

/* PUTs body[0..len) as manifest name:tag with Content-Type media_type. */
int box_registry_put_manifest(struct box_registry *reg, const char *name, const char *tag,
			      const void *body, size_t len, const char *media_type,
			      struct box_err *err);

/*
 * Errors of every operation: invalid_request (bad name, tag or digest), not_found
 * (MANIFEST_UNKNOWN, BLOB_UNKNOWN, NAME_UNKNOWN, 404), policy_denied (401/403, UNAUTHORIZED,
 * DENIED, missing or refused credentials, a redirect to a refused scheme), integrity_failed
 * (digest or size mismatch, DIGEST_INVALID), limit_exceeded (429 still after
 * BOX_REGISTRY_MAX_429 waits, retryable; body caps), timeout (timeout_ms), provider_error (5xx,
 * retryable; other unexpected statuses), io_error (connection, TLS, local file).
 */

/* ---- pure helpers, exposed for the unit tests ---- */

#define BOX_REGISTRY_CHALLENGE_MAX 1024

/* A parsed WWW-Authenticate challenge. scheme is "basic" or "bearer" (lowercase). */
struct box_registry_challenge {
	char scheme[16];
	char realm[BOX_REGISTRY_CHALLENGE_MAX];
	char service[BOX_REGISTRY_CHALLENGE_MAX];
	char scope[BOX_REGISTRY_CHALLENGE_MAX];
};

/*
 * Parses the first Basic or Bearer challenge of a WWW-Authenticate value (auth-params as
 * token=token or token="quoted" with \-escapes; at most 64 parameters; values longer than
 * BOX_REGISTRY_CHALLENGE_MAX - 1 bytes, control characters, unterminated quotes are refused).
 * Returns 0, or -1 with policy_denied when no usable challenge is found.
 */
int box_registry_parse_challenge(const char *value, struct box_registry_challenge *out,
				 struct box_err *err);

/*
 * Turns an error response (status and body) into a typed error: the first entry of an OCI
 * {"errors":[{"code","message"}]} body decides when it is known, else the status. A body that
 * is not JSON still gives an error typed by the status. what names the request for the
 * message. Always returns -1.
 */
int box_registry_error(long status, const char *body, size_t len, const char *what,
		       struct box_err *err);

/*
 * The URL of the rel="next" link of a Link header value, resolved against base (an absolute
 * URL); NULL when there is none. *out is malloc'ed. Returns 0 (with *out possibly NULL), or -1
 * with invalid_request for a malformed link.
 */
int box_registry_next_link(const char *base, const char *link, char **out, struct box_err *err);

/*
 * The "user:password" of host in a docker config.json text (auths[host].auth, base64; also
 * matched: "https://host", "http://host" and those with a "/v1/" or "/v2/" suffix). *out is
 * malloc'ed, NULL when the file has no entry. Returns 0, or -1 with invalid_request.
 */
int box_registry_config_auth(const char *json, size_t len, const char *host, char **out,
			     struct box_err *err);

/* 1 if s is a valid repository name component path ("a/b-c/d.e"), 0 otherwise. */
int box_registry_valid_name(const char *s);
/* 1 if s is a valid tag, 0 otherwise. */
int box_registry_valid_tag(const char *s);
/* 1 if s is "sha256:" followed by 64 lowercase hex digits, 0 otherwise. */
int box_registry_valid_digest(const char *s);

#endif
