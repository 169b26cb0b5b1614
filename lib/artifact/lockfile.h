/* box.lock (exact pins of artifacts) and box.json (the ranges they were resolved from). */
#ifndef BOX_LOCKFILE_H
#define BOX_LOCKFILE_H

#include <stddef.h>
#include <cjson/cJSON.h>
#include "err.h"
#include "semver.h"

#define BOX_LOCK_VERSION 1
#define BOX_LOCK_MAX_BYTES (16 << 20)     /* cap on box.lock */
#define BOX_MANIFEST_MAX_BYTES (4 << 20)  /* cap on box.json */
#define BOX_LOCK_MAX_ENTRIES 10000       /* in box.lock, and in box.json */
#define BOX_LOCK_NAME_MAX 255             /* whole name; each component at most 128 */
#define BOX_LOCK_SOURCE_MAX 1024
#define BOX_DIGEST_LEN 71                 /* "sha256:" + 64 lowercase hex */
#define BOX_LOCK_WAIT_MS 10000            /* bounded wait for box.lock.lck */

/*
 * One pinned artifact. All strings are NUL-terminated and validated by every function that
 * takes an entry:
 *   name         lowercase [a-z0-9][a-z0-9._-]{0,127}, optionally several such components
 *                joined by "/" (like an OCI repository name)
 *   version      a semantic version (box_semver_parse)
 *   digest       "sha256:" + 64 lowercase hex: the OCI manifest digest
 *   kind         "tool", "skill" or "lua"
 *   source       the registry reference it came from: printable ASCII, non-empty
 *   tree_digest  "sha256:..." of the extracted tree, or "" when not recorded
 */
struct box_lock_entry {
	char name[BOX_LOCK_NAME_MAX + 1];
	char version[BOX_SEMVER_MAX_LEN + 1];
	char digest[BOX_DIGEST_LEN + 1];
	char kind[8];
	char source[BOX_LOCK_SOURCE_MAX + 1];
	char tree_digest[BOX_DIGEST_LEN + 1];
};

/* The lockfile in memory: entries sorted by name (bytewise), names unique. */
struct box_lock {
	struct box_lock_entry *entries;
	size_t n, cap;
	int missing;   /* box_lock_read found no file */
};

/* Empties *lk; allocates nothing. */
void box_lock_init(struct box_lock *lk);

/* Frees the entries; *lk is empty afterwards. */
void box_lock_release(struct box_lock *lk);

/* 1 if name is a valid artifact name (see struct box_lock_entry), 0 if not. */
int box_artifact_name_valid(const char *name);

/* 1 if s is "sha256:" followed by 64 lowercase hex digits, 0 if not. */
int box_digest_valid(const char *s);

/* Checks every field of e. Returns 0, or -1 with invalid_request (err->path "$.name", ...). */
int box_lock_entry_check(const struct box_lock_entry *e, struct box_err *err);

/*
 * Reads the lockfile path (relative to dirfd, or AT_FDCWD) into *lk, which must be empty
 * (box_lock_init). A missing file gives an empty lock with lk->missing = 1 and returns 0.
 * Entries may be in any order on disk; they are sorted in memory.
 * Returns 0, or -1 with: invalid_request (malformed JSON or a bad member, err->path the JSON
 * path such as "$.artifacts[2].digest", "$" for a syntax error; the message starts with
 * "PATH: "), unsupported (a lock_version other than 1),
 * limit_exceeded (more than BOX_LOCK_MAX_BYTES or BOX_LOCK_MAX_ENTRIES), io_error.
 * On failure *lk is left empty.
 */
int box_lock_read(int dirfd, const char *path, struct box_lock *lk, struct box_err *err);

/* The entry pinning name, or NULL. Borrowed from lk: valid until lk changes. */
const struct box_lock_entry *box_lock_find(const struct box_lock *lk, const char *name);

/*
 * Pins e->name (e is copied). If the name is already pinned to another version or digest
 * this is a conflict unless allow_update; other fields (kind, source, tree_digest) are
 * updated in place.
 * Returns 1 if lk changed, 0 if an identical entry was already there, -1 with
 * invalid_request (bad entry), conflict or internal (OOM); lk is unchanged on failure.
 */
int box_lock_put(struct box_lock *lk, const struct box_lock_entry *e, int allow_update,
		 struct box_err *err);

/* Unpins name. Returns 1 if it was pinned, 0 if not. */
int box_lock_remove(struct box_lock *lk, const char *name);

/*
 * The canonical text of lk: lock_version then artifacts sorted by name, members in the order
 * name, version, digest, kind, source, tree_digest (only when set), two-space indent,
 * a trailing newline. Returns a string to free(), or NULL with err set (invalid_request when
 * an entry is invalid or the entries are not sorted and unique, internal on OOM).
 */
char *box_lock_format(const struct box_lock *lk, size_t *len, struct box_err *err);

/*
 * Writes the canonical text of lk to path (relative to dirfd; its directory must exist) with
 * box_atomic_write (mode 0644 before the umask), but only if the bytes on disk differ.
 * *changed (may be NULL) says whether a write happened.
 * Returns 0, or -1 with err set (as box_lock_format, io_error); the file is then unchanged.
 */
int box_lock_write(int dirfd, const char *path, const struct box_lock *lk, int *changed,
		   struct box_err *err);

/*
 * Read-modify-write of the lockfile under an exclusive flock of the sibling file
 * "PATH.lck" (waiting at most BOX_LOCK_WAIT_MS, then conflict with retryable = 1): reads the
 * lock (missing file: empty lock), calls fn(lk, ctx, err), and writes the result if its bytes
 * differ from the file's. fn returns 0, or -1 with err set to abort without writing.
 * With frozen != 0 nothing is ever written: a change of the pins made by fn is a conflict
 * ("box.lock would change: ... (--frozen)"); a difference in formatting only is not.
 * *changed (may be NULL) says whether the file was written.
 * Returns 0, or -1 with err set (fn's error, box_lock_read's, conflict, io_error).
 */
int box_lock_update(int dirfd, const char *path,
		    int (*fn)(struct box_lock *lk, void *ctx, struct box_err *err), void *ctx,
		    int frozen, int *changed, struct box_err *err);

/* box_lock_update with the wait for the flock given in milliseconds (box_lock_fd's rules). */
int box_lock_update_wait(int dirfd, const char *path,
			 int (*fn)(struct box_lock *lk, void *ctx, struct box_err *err), void *ctx,
			 int frozen, int timeout_ms, int *changed, struct box_err *err);

/* One artifact of box.json; range was checked by box_range_parse, parse it again to use it
 * (a parsed range is large, a manifest may hold thousands). */
struct box_manifest_entry {
	char name[BOX_LOCK_NAME_MAX + 1];
	char range[BOX_RANGE_MAX_LEN + 1];
};

/* box.json: {"registry": "...", "artifacts": {"NAME": "RANGE", ...}}; entries sorted by name. */
struct box_manifest {
	char registry[BOX_LOCK_SOURCE_MAX + 1];  /* "" when box.json names none */
	struct box_manifest_entry *entries;
	size_t n;
};

void box_manifest_init(struct box_manifest *m);
void box_manifest_release(struct box_manifest *m);

/*
 * Reads and validates box.json (path relative to dirfd) into *m, which must be empty:
 * an object with an optional "registry" (printable ASCII, at most BOX_LOCK_SOURCE_MAX bytes)
 * and a required "artifacts" object mapping valid, unique names to ranges (box_range_parse).
 * Returns 0, or -1 with: not_found/io_error (cannot read), limit_exceeded (larger than
 * BOX_MANIFEST_MAX_BYTES or more than BOX_LOCK_MAX_ENTRIES artifacts), invalid_request with
 * err->path ("$.registry", "$.artifacts[\"name\"]"). *m is left empty on failure.
 */
int box_manifest_read(int dirfd, const char *path, struct box_manifest *m,
		      struct box_err *err);

/*
 * Does lk pin exactly what m asks for? Every manifest artifact must be pinned with a version
 * its range accepts, and the lock must have no other entries. *problems receives a JSON array
 * (the caller frees it) of {"name", "problem": "missing"|"out_of_range"|"extra", "range"?,
 * "version"?} in name order.
 * Returns 0 when satisfied (empty array), 1 when not (err set to conflict summing it up),
 * -1 with internal on OOM (*problems NULL).
 */
int box_lock_satisfies(const struct box_manifest *m, const struct box_lock *lk,
		       cJSON **problems, struct box_err *err);

#endif
