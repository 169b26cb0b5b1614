/* SHA-256 through libcrypto's EVP interface (never a hand-written digest). */
#ifndef BOX_SHA256_H
#define BOX_SHA256_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include "err.h"

#define BOX_SHA256_LEN 32
#define BOX_SHA256_HEX_LEN 64

/* A running digest; owns ctx. Zero it (or call box_sha256_init) before use. */
struct box_sha256 {
	EVP_MD_CTX *ctx;
};

/* Starts a digest (allocates ctx). Returns 0, or -1 with internal; *s is then empty. */
int box_sha256_init(struct box_sha256 *s, struct box_err *err);

/* Feeds n bytes. Returns 0, or -1 with internal. */
int box_sha256_update(struct box_sha256 *s, const void *data, size_t n, struct box_err *err);

/* Writes the digest to out. Returns 0, or -1 with internal. The ctx is kept: call
 * box_sha256_release() afterwards (or box_sha256_init again to start over). */
int box_sha256_final(struct box_sha256 *s, unsigned char out[BOX_SHA256_LEN], struct box_err *err);

/* Frees the ctx; safe on a zeroed or already released struct. */
void box_sha256_release(struct box_sha256 *s);

/* Lowercase hex of a digest, NUL-terminated. */
void box_sha256_hex(const unsigned char d[BOX_SHA256_LEN], char hex[BOX_SHA256_HEX_LEN + 1]);

/* Digest of a buffer as lowercase hex. Returns 0 or -1 (internal). */
int box_sha256_buf(const void *data, size_t n, char hex[BOX_SHA256_HEX_LEN + 1],
		   struct box_err *err);

/* Digest of everything read from fd up to end of file (EINTR retried; the caller bounds the
 * size, e.g. by fstat, if the source is not trusted). *size (if not NULL) gets the byte count.
 * Returns 0, or -1 with io_error or internal. */
int box_sha256_fd(int fd, char hex[BOX_SHA256_HEX_LEN + 1], int64_t *size, struct box_err *err);

#endif
