/* The content-addressed store of extracted artifacts: ROOT/sha256/<hex>/, staged in ROOT/tmp/. */
#ifndef BOX_STORE_H
#define BOX_STORE_H

#include <stddef.h>
#include "err.h"

/* Leftovers in tmp/ younger than this are never removed by box_store_clean_tmp(). */
#define BOX_STORE_TMP_AGE_S 60
/* Bound on the depth of a tree the store removes (extraction caps depth well below it). */
#define BOX_STORE_MAX_DEPTH 128

/*
 * An open store. The descriptors are owned; box_store_close() releases them. With sync set
 * (box_store_open sets it) box_store_commit flushes the staged tree to disk (syncfs) before
 * making it visible, so that a power loss cannot leave a visible entry with lost content.
 */
struct box_store {
	int rootfd;
	int shafd;   /* ROOT/sha256 */
	int tmpfd;   /* ROOT/tmp */
	int sync;
	char root[4096];
};

/*
 * Opens the store at root (typically "$BOX_HOME/store"), creating root and its parents (0755)
 * and root/sha256 and root/tmp when missing. Returns 0, or -1 with invalid_request (empty or
 * too long path), io_error (a component is not a directory, permissions, ...).
 */
int box_store_open(const char *root, struct box_store *s, struct box_err *err);

/* Closes the descriptors; safe to call twice. */
void box_store_close(struct box_store *s);

/*
 * Makes a fresh directory with a random name under tmp/ to extract into: name gets its name,
 * *fd a directory fd on it (O_RDONLY|O_DIRECTORY) that holds an exclusive flock until the
 * caller closes it, which marks the directory as in use for box_store_clean_tmp(). The caller
 * closes *fd after box_store_commit() or box_store_abort(). Returns 0, or -1 with io_error.
 */
int box_store_tmpdir(struct box_store *s, char name[64], int *fd, struct box_err *err);

/*
 * Makes tmp/<tmpname> visible as sha256/<hex of digest> with one rename (renameat2
 * RENAME_NOREPLACE). If the entry already exists (a concurrent puller of the same digest won
 * the race), tmp/<tmpname> is removed and that is success. Entries never appear partially:
 * only this rename makes them visible. Returns 0, or -1: invalid_request (bad digest or tmp
 * name), not_found (no such tmp dir), io_error.
 */
int box_store_commit(struct box_store *s, const char *tmpname, const char *digest,
		     struct box_err *err);

/* Removes tmp/<tmpname> and everything below it (after a failed extraction). Returns 0, or
 * -1 with invalid_request (bad name) or io_error. */
int box_store_abort(struct box_store *s, const char *tmpname, struct box_err *err);

/* 1 if the entry of digest exists (a directory, not a symlink), 0 if not, -1 with
 * invalid_request (bad digest) or io_error. */
int box_store_has(struct box_store *s, const char *digest, struct box_err *err);

/* Writes "ROOT/sha256/<hex>" into out (outsz bytes). Returns 0, or -1 with invalid_request
 * (bad digest) or limit_exceeded (out too small). Does not check that the entry exists. */
int box_store_path(struct box_store *s, const char *digest, char *out, size_t outsz,
		   struct box_err *err);

/* Opens the entry of digest as a directory fd (O_RDONLY|O_DIRECTORY|O_NOFOLLOW). Returns the
 * fd, or -1 with invalid_request, not_found or io_error. */
int box_store_open_entry(struct box_store *s, const char *digest, struct box_err *err);

/*
 * Removes leftovers of killed runs from tmp/: entries last modified more than
 * BOX_STORE_TMP_AGE_S seconds ago whose directory is not locked by a live box_store_tmpdir()
 * holder. Returns the number of entries removed, or -1 with io_error (what could be removed
 * before the error is gone).
 */
int box_store_clean_tmp(struct box_store *s, struct box_err *err);

/* The store's own lock file, ROOT/lock, and how long box_store_lock waits for it. */
#define BOX_STORE_LOCK "lock"
#define BOX_STORE_LOCK_WAIT_MS 30000

/*
 * Locks the store: shared by whoever makes entries visible and pins them in a lockfile (from
 * the commit until the lockfile is written), exclusive for box_store_remove's callers (gc),
 * which must not remove an entry between its commit and its pin. Waits at most
 * BOX_STORE_LOCK_WAIT_MS (then conflict, retryable). Returns the fd to close to unlock, or -1
 * with err.
 */
int box_store_lock(struct box_store *s, int exclusive, struct box_err *err);

/*
 * Removes the entry of digest (and its tree note, sha256/<hex>.tree): one rename moves it to
 * a fresh name under tmp/, so that it leaves the store at once and a crash midway leaves only
 * a tmp/ leftover for box_store_clean_tmp; then its tree is removed. Returns 0, or -1 with
 * invalid_request (bad digest), not_found (no such entry) or io_error.
 */
int box_store_remove(struct box_store *s, const char *digest, struct box_err *err);

#endif
