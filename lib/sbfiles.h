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
#define BOX_SBFILES_DIGEST_LEN 71        /* "sha256:" + 64 hex digits, without the NUL */

/*
 * The files under dirfd (the host side of /output) as a JSON array sorted by path (byte
 * order of the raw names): {"path": "rel/path", "size": N, "sha256": "<hex>"} for a regular
 * file, {"path": ..., "type": "symlink"} for a symlink (never followed, never read); other
 * types are left out, directories are walked. A name that is not UTF-8 is given with U+FFFD
 * in place of the bad bytes and "lossy": true on its entry.
 * A file is opened O_NOFOLLOW|O_NONBLOCK and fstat'ed after the open: swapped for a FIFO,
 * device or link meanwhile, it is left out, never read. At most the size fstat gave is read
 * (a file still growing is hashed up to it); "size" is the number of bytes hashed.
 * max_files (0: BOX_SBFILES_MAX_FILES) bounds the entries met below dirfd, of any type,
 * directories included; depth and path length are bounded by BOX_ARCHIVE_MAX_DEPTH and
 * BOX_ARCHIVE_MAX_PATH.
 * Returns a new array (the caller frees it), or NULL with err set: limit_exceeded ("files",
 * "depth" or "path_length"), io_error, internal.
 */
cJSON *box_sbfiles_outputs(int dirfd, size_t max_files, struct box_err *err);

struct box_sbfiles_stats {
	int64_t entries;        /* files + directories in the archive */
	int64_t files;
	int64_t bytes;          /* file content bytes */
	int64_t archive_bytes;  /* size of the .tar.gz */
	int existed;            /* snapshot: an identical snapshot was already there */
};

/*
 * Packs the tree under srcdirfd with box_archive_pack_ex(BOX_ARCHIVE_SYMLINKS) (reproducible:
 * the same tree gives the same bytes; symlinks whose target stays inside the tree are kept as
 * symlinks, never followed) into snapdirfd as "<hex>.tar.gz", named by the SHA-256 of the
 * archive bytes, and writes "sha256:<hex>" to digest. The archive is written to a temporary
 * file in snapdirfd,
 * fsynced and renamed in place (RENAME_NOREPLACE), then snapdirfd is fsynced; an existing
 * snapshot of that name is kept as it is (st->existed = 1). st may be NULL.
 * Returns 0, or -1 with err set: the errors of box_archive_pack_ex() (policy_denied for a
 * symlink that is absolute or leads out of the tree, err->path naming it; invalid_request for a
 * FIFO, socket or device in the tree; limit_exceeded for its caps), limit_exceeded with limit
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
 * box_archive_extract_ex(BOX_ARCHIVE_SYMLINKS) (symlinks only with a contained target, never
 * written through; no hard links, devices, FIFOs or set-id bits; caps: BOX_ARCHIVE_MAX_BYTES
 * of content, BOX_ARCHIVE_MAX_ENTRIES entries, path and depth caps; no compression-ratio cap,
 * the digest vouching for a snapshot box made) into a fresh temporary directory in parentfd,
 * which then takes name's place in one renameat2(RENAME_EXCHANGE) (rename the old away, the
 * new in, where the file system lacks it); the old tree is then removed. A failure before that
 * leaves parentfd/name untouched and no temporary directory behind. A failure to remove the
 * old tree after the swap is not reported (it may stay under a ".sbrestore-*.tmp" or
 * ".sbold-*.tmp" name in parentfd).
 * The restored root directory has mode 0755.
 * Returns 0, or -1 with err set: invalid_request (bad digest or name), not_found (no such
 * snapshot), integrity_failed (digest mismatch, the file changed, an archive the extractor
 * refuses), limit_exceeded (a cap), io_error.
 */
int box_sbfiles_restore(int snapdirfd, const char *digest, int parentfd, const char *name,
			struct box_err *err);

/* box_sbfiles_restore whose tree (its root included) is given to uid:gid before it takes
 * name's place (box_sbcopy_chown_tree); (uid_t)-1 and (gid_t)-1 keep the owners. */
int box_sbfiles_restore_as(int snapdirfd, const char *digest, int parentfd, const char *name,
			   uid_t uid, gid_t gid, struct box_err *err);

#endif
