/*
 * The file side of box-sandbox that needs libcrypto and libarchive, kept out of box-sandbox
 * itself (start-up cost) and run through the box-sbfiles helper: the listing of /output,
 * snapshots of a sandbox's writable tree and their restore.
 */
#ifndef BOX_SBFILES_H
#define BOX_SBFILES_H

#include <stddef.h>
#include <sys/types.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "err.h"

#define BOX_SBFILES_MAX_FILES 10000      /* default cap of box_sbfiles_outputs */
#define BOX_SBFILES_MAX_HASH_BYTES (INT64_C(1) << 30)  /* default: distinct bytes hashed */
#define BOX_SBFILES_MAX_PATH_BYTES ((size_t)4 << 20)   /* default: bytes of all paths listed */
#define BOX_SBFILES_DIGEST_LEN 71        /* "sha256:" + 64 hex digits, without the NUL */

/* The bounds of a listing of /output; a 0 member means its default. */
struct box_sbfiles_out_limits {
	size_t max_files;        /* entries met, of any type (BOX_SBFILES_MAX_FILES) */
	int64_t max_bytes;       /* bytes of distinct files hashed (BOX_SBFILES_MAX_HASH_BYTES) */
	size_t max_path_bytes;   /* bytes of the paths listed (BOX_SBFILES_MAX_PATH_BYTES) */
};

/*
 * The files under dirfd (the host side of /output) as a JSON array sorted by path (byte
 * order of the raw names): {"path": "rel/path", "size": N, "sha256": "<hex>"} for a regular
 * file, {"path": ..., "type": "symlink"} for a symlink (never followed, never read); other
 * types (FIFOs, sockets, devices) are left out and never opened, directories are walked.
 * A name that is not UTF-8 is given with U+FFFD in place of the bad bytes and "lossy": true
 * on its entry.
 * A file is opened O_NOFOLLOW|O_NONBLOCK and fstat'ed after the open: swapped for a FIFO,
 * device or link meanwhile, it is left out, never read. At most the size fstat gave is read
 * (a file still growing is hashed up to it); "size" is the number of bytes hashed.
 * Each inode is hashed once: its other names (hard links) get the same size and digest.
 * Bounds (lim may be NULL: the defaults): the entries met below dirfd, of any type,
 * directories included; the bytes hashed, summed over distinct inodes and checked against
 * the size fstat gives before a byte of the file is read; the bytes of the paths listed
 * (which bounds the JSON to about 6 times that); depth and path length by
 * BOX_ARCHIVE_MAX_DEPTH and BOX_ARCHIVE_MAX_PATH.
 * Returns a new array (the caller frees it), or NULL with err set: limit_exceeded ("files",
 * "bytes", "path_bytes", "depth" or "path_length"), io_error (a directory or file that cannot
 * be opened or read, such as a chmod 000 one the caller does not own; the message names it
 * relative to dirfd), internal.
 */
cJSON *box_sbfiles_outputs(int dirfd, const struct box_sbfiles_out_limits *lim,
			   struct box_err *err);

struct box_sbfiles_stats {
	int64_t entries;        /* files + directories in the archive */
	int64_t files;
	int64_t bytes;          /* file content bytes */
	int64_t archive_bytes;  /* size of the .tar.gz */
	int existed;            /* snapshot: an identical snapshot was already there */
	int64_t skipped;        /* snapshot: devices, FIFOs and sockets left out */
};

/*
 * Packs the tree under srcdirfd with box_archive_pack_ex(BOX_ARCHIVE_SYMLINKS |
 * BOX_ARCHIVE_ANY_LINKS | BOX_ARCHIVE_SKIP_SPECIAL) (reproducible: the same tree gives the same
 * bytes; every symlink is kept as a symlink, its target as it is, never followed; devices,
 * FIFOs and sockets are left out and counted in st->skipped) into snapdirfd as "<hex>.tar.gz", named by the SHA-256 of the
 * archive bytes, and writes "sha256:<hex>" to digest. The archive is written to a temporary
 * file in snapdirfd,
 * fsynced and renamed in place (RENAME_NOREPLACE), then snapdirfd is fsynced; an existing
 * snapshot of that name is kept as it is (st->existed = 1). st may be NULL.
 * Returns 0, or -1 with err set: the errors of box_archive_pack_ex() (policy_denied for a
 * symlink target over BOX_ARCHIVE_MAX_LINK bytes, err->path naming it; limit_exceeded for its
 * caps), limit_exceeded with limit
 * "bytes" when the content is over BOX_ARCHIVE_MAX_BYTES (it could not be restored), io_error.
 * Nothing is left in snapdirfd on failure.
 */
int box_sbfiles_snapshot(int srcdirfd, int snapdirfd, char digest[BOX_SBFILES_DIGEST_LEN + 1],
			 struct box_sbfiles_stats *st, struct box_err *err);

/*
 * Replaces parentfd/name (one path component; it may be absent) with the tree of the snapshot
 * digest ("sha256:<64 lowercase hex>") found in snapdirfd.
 * The archive's SHA-256 is checked before anything is extracted, and the file must not change
 * (size, times, inode) until the extraction ends. It is then extracted with
 * box_archive_extract_ex(BOX_ARCHIVE_SYMLINKS | BOX_ARCHIVE_ANY_LINKS) (symlinks as they
 * were, never written through; no hard links, devices, FIFOs or set-id bits; caps: max_bytes
 * of content (0 or above BOX_ARCHIVE_MAX_BYTES: BOX_ARCHIVE_MAX_BYTES; a snapshot over a
 * positive max_bytes is limit_exceeded with limit "disk" and configured max_bytes), BOX_ARCHIVE_MAX_ENTRIES entries, path and depth caps; no compression-ratio cap,
 * the digest vouching for a snapshot box made) into a fresh temporary directory in parentfd,
 * which then takes name's place in one renameat2(RENAME_EXCHANGE) (rename the old away, the
 * new in, where the file system lacks it); the old tree is then removed. A failure before that
 * leaves parentfd/name untouched and no temporary directory behind. A failure to remove the
 * old tree after the swap is io_error (the new tree is in place; the old one stays under a
 * ".sbrestore-*.tmp" or ".sbold-*.tmp" name in parentfd).
 * The restored root directory has mode 0755.
 * Returns 0, or -1 with err set: invalid_request (bad digest or name), not_found (no such
 * snapshot), integrity_failed (digest mismatch, the file changed, an archive the extractor
 * refuses), limit_exceeded (a cap), io_error.
 */
int box_sbfiles_restore(int snapdirfd, const char *digest, int parentfd, const char *name,
			int64_t max_bytes, struct box_err *err);

/* box_sbfiles_restore whose tree (its root included) is given to uid:gid before it takes
 * name's place (box_sbcopy_chown_tree); (uid_t)-1 and (gid_t)-1 keep the owners. */
int box_sbfiles_restore_as(int snapdirfd, const char *digest, int parentfd, const char *name,
			   int64_t max_bytes, uid_t uid, gid_t gid, struct box_err *err);

#endif
