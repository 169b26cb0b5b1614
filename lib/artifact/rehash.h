/*
 * The cold half of lib/artifact/verify.h, run by the box-verify helper (it needs libcrypto and
 * libarchive): re-hash a store entry, reusing the content digests of the stat cache for
 * entries whose stat is unchanged, compare with the expected tree digest, rewrite the cache.
 */
#ifndef BOX_REHASH_H
#define BOX_REHASH_H

#include <stddef.h>
#include "err.h"
#include "verify.h"

/* What a re-hash did. */
struct box_rehash_stats {
	char tree[BOX_VERIFY_DIGEST_LEN + 1];   /* the digest of the tree as it is */
	size_t hashed;                          /* files and links read */
	size_t reused;                          /* content digests taken from the cache */
	int cache_written;                      /* a new cache is in place */
};

/*
 * Computes the tree digest of the entry hex (64 hex digits) in the directory shafd
 * (ROOT/sha256) with box_archive_tree_digest_ex, reading only the files and links that the
 * cache sha256/<hex>.stat cannot vouch for (box_verify_rec_fresh). When it equals expected,
 * writes a new cache for it (box_atomic_replace, mode 0644; a store that cannot be written
 * is no error, cache_written then says 0) and returns 0. Fills *st (may be NULL).
 * Returns -1 with integrity_failed when the digest differs: "store entry sha256:HEX does not
 * match its tree digest EXPECTED", followed, when the old cache was one of this entry at
 * that digest, by the first difference from it ("main.lua changed", "x was added", "y was
 * removed"); with not_found (no entry), io_error, limit_exceeded (box_archive_tree_digest's
 * bounds), internal.
 */
int box_rehash_entry(int shafd, const char *hex, const char *expected,
		     struct box_rehash_stats *st, struct box_err *err);

#endif
