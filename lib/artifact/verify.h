/*
 * Store entries verified before use: the tree of $BOX_HOME/store/sha256/<hex>/ is checked
 * against its recorded tree digest every time something of it is about to run. The warm
 * check is stat-only (a stat cache, sha256/<hex>.stat, as git's index), so that box-run and
 * box-sandbox need neither libcrypto nor libarchive; when the cache cannot vouch for the tree
 * the helper box-verify (lib/artifact/rehash.h) re-hashes what changed and rewrites the cache.
 */
#ifndef BOX_VERIFY_H
#define BOX_VERIFY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include "err.h"

#define BOX_VERIFY_DIGEST_LEN 71                   /* "sha256:" + 64 hex digits */
#define BOX_VERIFY_CACHE_MAX ((size_t)48 << 20)    /* a stat cache, in bytes */
#define BOX_VERIFY_CACHE_ENTRIES 10001             /* the root and the archive's 10,000 */
#define BOX_VERIFY_HELPER_TIMEOUT_MS 600000        /* box-verify re-hashing up to 1 GiB */
#define BOX_VERIFY_LABEL_MAX 400

/*
 * What to verify: the store entry of digest under store, against tree (box.lock's
 * tree_digest) or, when tree is "", the digest recorded beside the entry at pull time
 * (sha256/<hex>.tree). label ("NAME@VERSION") names it in messages.
 */
struct box_verify_pin {
	char *store;                                   /* "$BOX_HOME/store", owned */
	char digest[BOX_VERIFY_DIGEST_LEN + 1];
	char tree[BOX_VERIFY_DIGEST_LEN + 1];
	char label[BOX_VERIFY_LABEL_MAX + 1];
};

/*
 * Makes a pin (copies every string). Returns a pin to box_verify_pin_free(), or NULL with
 * invalid_request (digest or tree not "sha256:" + 64 lowercase hex, tree may be "") or
 * internal (OOM).
 */
struct box_verify_pin *box_verify_pin_new(const char *store, const char *digest,
					  const char *tree, const char *label,
					  struct box_err *err);

/* A copy of pin (NULL with internal on OOM). */
struct box_verify_pin *box_verify_pin_dup(const struct box_verify_pin *pin, struct box_err *err);

/* Frees pin; NULL is fine. */
void box_verify_pin_free(struct box_verify_pin *pin);

/*
 * Checks the entry of pin before something of it runs. When the stat cache matches the tree
 * (box_verify_warm) this costs a read of the cache and one fstatat per entry; otherwise the
 * box-verify helper (in $BOX_LIBEXEC_DIR, else the configured pkglibexecdir) re-hashes the
 * entries whose stat changed (box_rehash_entry) and rewrites the cache.
 * Returns 0 when the tree matches, or -1 with err:
 *   integrity_failed: the tree differs ("artifact NAME@VERSION: store entry sha256:... does
 *     not match its tree digest sha256:...: main.lua changed; remove it and run box-pull
 *     again"), or no tree digest is recorded anywhere (box.lock has none and the store has no
 *     note: "... run box-pull again");
 *   not_found: no such entry in the store ("... run box-pull");
 *   io_error / internal: the store cannot be read, the helper cannot be run.
 */
int box_verify_entry(const struct box_verify_pin *pin, struct box_err *err);

/*
 * The tree digest to check the entry hex (64 hex digits) against: tree when it is not "",
 * else the note sha256/<hex>.tree (exactly "sha256:" + 64 hex digits) in the directory
 * shafd. Writes it to out and returns 0, or -1 with integrity_failed (no note, or a note
 * that is not a digest) or io_error.
 */
int box_verify_expected(int shafd, const char *hex, const char *tree,
			char out[BOX_VERIFY_DIGEST_LEN + 1], struct box_err *err);

/*
 * The warm check alone: 1 when the stat cache sha256/<hex>.stat is one for this entry and
 * this expected tree digest, and every entry it lists (the root first) has the same mode,
 * size (but directories), device, inode, mtime and ctime (nanoseconds included) and is not
 * racily clean (modified no earlier than the cache was written, so that a change within the
 * timestamp granularity could hide), and every directory has as many entries as then.
 * 0 when it cannot tell (no cache, an unusable one, any difference): re-hash. -1 with
 * not_found (no entry) or io_error.
 */
int box_verify_warm(int shafd, const char *hex, const char *expected, struct box_err *err);

/* Opens the entry hex in shafd as a directory (O_NOFOLLOW). Returns the fd, or -1 with
 * not_found (missing), integrity_failed (a symlink or not a directory) or io_error. */
int box_verify_open_entry(int shafd, const char *hex, struct box_err *err);

/* ------------------------------------------------------------------ the stat cache */

/* One entry of the cache. path is relative ("" for the root of the tree). */
struct box_verify_rec {
	char *path;
	mode_t mode;
	int64_t size;
	uint64_t dev, ino;
	struct timespec mtim, ctim;
	int64_t children;      /* entries of a directory, 0 otherwise */
	char content[65];      /* hex SHA-256 of a file or a link target, "-" otherwise */
};

/*
 * A stat cache: the entry it describes, the tree digest it was verified against, when it
 * was written (the cache file's mtime), and its records sorted by path, the root first.
 */
struct box_verify_cache {
	char entry[65];
	char tree[BOX_VERIFY_DIGEST_LEN + 1];
	struct timespec written;
	struct box_verify_rec *v;
	size_t n, cap;
};

/* Empties *c; allocates nothing. */
void box_verify_cache_init(struct box_verify_cache *c);

/* Frees the records; *c is empty afterwards. */
void box_verify_cache_release(struct box_verify_cache *c);

/*
 * Reads sha256/<hex>.stat from shafd into *c (which must be empty). The file must be a
 * regular file owned by the caller's euid or root, writable by no one else, at most
 * BOX_VERIFY_CACHE_MAX bytes, and well formed: a header naming the entry and tree, then
 * records whose paths are relative, without "", "." or ".." components or control bytes,
 * strictly increasing, the root first.
 * Returns 1 when read, 0 when there is no usable cache (missing, refused, malformed: *c is
 * then empty), -1 with io_error when it cannot be read at all.
 */
int box_verify_cache_read(int shafd, const char *hex, struct box_verify_cache *c,
			  struct box_err *err);

/* The record of path in c (bsearch), or NULL. */
const struct box_verify_rec *box_verify_cache_find(const struct box_verify_cache *c,
						   const char *path);

/* 1 if st is what r recorded (mode, size unless a directory, device, inode, mtime, ctime)
 * and r is not racily clean against written; 0 otherwise. */
int box_verify_rec_fresh(const struct box_verify_rec *r, const struct stat *st,
			 const struct timespec *written);

/* Appends a record (path copied). Returns 0, or -1 with internal (OOM) or limit_exceeded
 * (more than BOX_VERIFY_CACHE_ENTRIES). */
int box_verify_cache_add(struct box_verify_cache *c, const char *path, const struct stat *st,
			 const char *content, struct box_err *err);

/* The text of c (records in c's order), to free(); NULL with internal on OOM. */
char *box_verify_cache_format(const struct box_verify_cache *c, size_t *len,
			      struct box_err *err);

/* "sha256/<hex>.stat" is cache_name(hex): writes "<hex>.stat" into out. */
void box_verify_cache_name(const char *hex, char out[80]);

#endif
