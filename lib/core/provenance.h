/* Provenance of a run: canonical JSON and SHA-256 digests computed without linking libcrypto.
 *
 * The executors (box-run) must not load libcrypto at start-up (DESIGN.md, measured facts), so
 * the digests are asked of libcrypto's EVP through dlopen, only when a run asks for them.
 */
#ifndef BOX_PROVENANCE_H
#define BOX_PROVENANCE_H

#include <stddef.h>
#include <cjson/cJSON.h>
#include "err.h"

/*
 * The canonical text of v: every object's members sorted by name (bytewise), no whitespace,
 * integers written exactly (box_json_exact), other numbers and strings as cJSON prints them.
 * Returns a string to cJSON_free(), or NULL on OOM.
 */
char *box_canonical_json(const cJSON *v);

/*
 * "sha256:" + the lowercase hex SHA-256 of n bytes, through libcrypto loaded on first use.
 * out has room for 72 bytes. Returns 0, or -1 with unsupported (libcrypto cannot be loaded)
 * or internal.
 */
int box_digest_sha256(const void *data, size_t n, char out[72], struct box_err *err);

/* box_digest_sha256 of box_canonical_json(v). */
int box_digest_json(const cJSON *v, char out[72], struct box_err *err);

#endif
