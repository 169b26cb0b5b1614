/*
 * Base64 (RFC 4648, standard alphabet). Hand-written on purpose, the one exception to "use
 * libcrypto": box-run offers base64 to every script, and linking libcrypto would make its
 * start-up load that library (1.5 ms instead of 0.8 ms for an empty main, measured on Debian
 * 12; see DESIGN.md). Everything else that needs crypto goes through libcrypto. The unit test
 * cross-checks this code against libcrypto's EVP_EncodeBlock/EVP_DecodeBlock.
 */
#ifndef BOX_BASE64_H
#define BOX_BASE64_H

#include <stddef.h>
#include "buf.h"
#include "err.h"

/* Length of the padded encoding of n bytes; 0 if it would not fit in a size_t. */
size_t box_base64_encoded_len(size_t n);

/* Appends the padded encoding of in[0..n) to out. Returns 0, or -1 with limit_exceeded
 * (out->max) or internal; out is unchanged on failure. */
int box_base64_encode(const void *in, size_t n, struct box_buf *out, struct box_err *err);

/*
 * Strictly decodes in[0..n) and appends the bytes to out. The standard alphabet only; "="
 * padding may be left out, but when present it must make the length a multiple of 4; the
 * unused low bits of the last character must be zero; no whitespace or other byte is
 * skipped. Returns 0, or -1 with invalid_request (the message names the offending offset),
 * limit_exceeded (out->max) or internal; out is unchanged on failure.
 */
int box_base64_decode(const char *in, size_t n, struct box_buf *out, struct box_err *err);

#endif
