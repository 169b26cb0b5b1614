/* Snapshots that leave their machine: `snapshot --export FILE` writes one as a self-contained
 * archive, `create --from-snapshot FILE` reads it back (run in the box-sbfiles helper, which
 * links libarchive). */
#ifndef BOX_SBEXPORT_H
#define BOX_SBEXPORT_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include "err.h"
#include "boxarchive.h"

#define BOX_SBEXPORT_META "box-snapshot.json"
#define BOX_SBEXPORT_META_MAX (64 << 10)   /* bytes of the meta file read at most */

/*
 * Writes the snapshot digest of snapdirfd as an exported archive at out: a reproducible
 * gzip-compressed tar (box_archive_pack_ex, contained symlinks kept) of BOX_SBEXPORT_META
 * (meta's text) and workspace/ (the snapshot's tree, restored into a staging directory of
 * snapdirfd that is removed afterwards). The archive is written to a temporary file beside
 * out, fsynced and renamed over it. st (may be NULL) gets the pack's figures.
 * Returns 0, or -1 with err: box_sbfiles_restore's errors, box_archive_pack_ex's, io_error
 * (out's directory). Nothing is left at out or beside it on failure.
 */
int box_sbexport_write(int snapdirfd, const char *digest, const cJSON *meta, const char *out,
		       struct box_archive_stats *st, struct box_err *err);

/*
 * Reads the exported archive at path into a new directory of parentfd (its name written to
 * dir): extracted with box_archive_extract_ex (the rules of box-pull, contained symlinks
 * allowed) with at most max_bytes of content, it must hold BOX_SBEXPORT_META (a regular
 * file, a JSON object of at most BOX_SBEXPORT_META_MAX bytes) and workspace/ (a directory)
 * and nothing else; workspace/ is then packed as a snapshot into dir/snapshots (its digest in
 * digest) and removed. Returns the meta object (new), or NULL with err: not_found (no file),
 * limit_exceeded (a file larger than 2 * max_bytes + 1 MiB, or the extraction's caps),
 * integrity_failed (an archive the extractor refuses), invalid_request (what it holds is not
 * the above), io_error. On failure nothing is left in parentfd.
 */
cJSON *box_sbexport_read(const char *path, int parentfd, int64_t max_bytes, char dir[64],
			 char digest[72], struct box_err *err);

#endif
