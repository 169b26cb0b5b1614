/*
 * Walks of a file tree that a hostile guest may have built: iterative (no recursion, any
 * depth), fd-relative (every directory opened O_NOFOLLOW from its parent, never a path), with
 * a bounded number of open directories (BOX_FSWALK_OPEN_DIRS; a parent closed to stay under
 * it is reopened through ".." of its child and checked by device and inode).
 *
 * Two walks: measuring the bytes a tree takes (the disk limit of box-sandbox), and removing a
 * tree whatever its depth, width, modes and file types.
 */
#ifndef BOX_FSWALK_H
#define BOX_FSWALK_H

#include <stdint.h>
#include <sys/stat.h>
#include "err.h"

#define BOX_FSWALK_OPEN_DIRS 16               /* directories a walk holds open at most */
#define BOX_FSWALK_MAX_ENTRIES 1000000        /* default bound of a usage walk */
#define BOX_FSWALK_MAX_ENTRIES_ENV "BOX_DISK_WALK_MAX_ENTRIES"

/* The bound of a usage walk: BOX_DISK_WALK_MAX_ENTRIES from the environment (the operator's:
 * an integer 1..10^9), else BOX_FSWALK_MAX_ENTRIES. */
uint64_t box_fswalk_max_entries(void);

/* A measurement, possibly of several trees (an inode linked from two of them counts once). */
struct box_fswalk_usage {
	int64_t bytes;         /* st_blocks * 512 of every inode met below the roots, once each */
	uint64_t entries;      /* entries met (all trees) */
	uint64_t max_entries;  /* bound of entries over all trees */
	int64_t deadline_ms;   /* box_now_ms() past which a walk gives up; 0: none */
	int complete;          /* 1 until a walk could not finish: then the total is a floor */
	/* private: the inodes with more than one link seen so far */
	struct box_fswalk_inoset *seen;
};

/* Starts a measurement; allocates nothing. max_entries 0: box_fswalk_max_entries(). */
void box_fswalk_usage_init(struct box_fswalk_usage *u, uint64_t max_entries,
			   int64_t deadline_ms);

/* Frees what the measurement holds. */
void box_fswalk_usage_release(struct box_fswalk_usage *u);

/*
 * Adds what the tree below dirfd takes (the entries below it, directories included; dirfd
 * itself not; symlinks not followed). Returns 0, or -1 with err set and u->complete 0 when
 * the walk could not finish: limit_exceeded (limit "entries" past max_entries, "timeout"
 * past the deadline), io_error (a directory that cannot be opened or read, an entry that
 * cannot be stat'ed, a directory that changed under the walk), internal (memory). What was
 * counted before stays in u->bytes.
 */
int box_fswalk_usage_add(struct box_fswalk_usage *u, int dirfd, struct box_err *err);

/* Counts one inode (a file held open, say) unless it was counted already. */
void box_fswalk_usage_count(struct box_fswalk_usage *u, const struct stat *sb);

/*
 * Removes everything inside the directory dirfd (which may be O_PATH) and keeps it. Never
 * follows a symlink (links are removed, not their targets). A directory that denies its
 * owner read, write or search is chmod'ed 0700 first (through AT_SYMLINK_NOFOLLOW or an
 * opened fd, never through a link). Any depth, width and file type; no entry bound (each
 * step removes something); entries that keep appearing end it after a few passes.
 * Returns 0, or -1 with io_error naming the entry that could not be removed (an immutable
 * file, say): what was removed stays removed, and a later call finishes the job.
 */
int box_fswalk_empty(int dirfd, struct box_err *err);

/*
 * Removes dirfd/name: a file of any type, a symlink (never its target) or a whole tree, under
 * the rules of box_fswalk_empty. name is one path component (no '/', not "." or ".."):
 * invalid_request otherwise. An absent name is not an error. Returns 0 or -1 with err.
 */
int box_fswalk_remove(int dirfd, const char *name, struct box_err *err);

#endif
