/*
 * Artifact archives: reproducible packing, safe extraction, tree digests (libarchive).
 * Named boxarchive.h, not archive.h: lib/ is on the include path, where <archive.h> must
 * stay libarchive's header.
 */
#ifndef BOX_ARCHIVE_H
#define BOX_ARCHIVE_H

#include <stdint.h>
#include <sys/stat.h>
#include "err.h"

/* Default caps, shared by packing, extraction and the tree digest. */
#define BOX_ARCHIVE_MAX_ENTRIES 10000
#define BOX_ARCHIVE_MAX_PATH 4096        /* bytes of a relative path, without a NUL */
#define BOX_ARCHIVE_MAX_DEPTH 64         /* components of a path: "a/b/c" has depth 3 */
#define BOX_ARCHIVE_MAX_BYTES (INT64_C(1) << 30)
#define BOX_ARCHIVE_BOMB_RATIO 20        /* extracted bytes per compressed byte, at most */
#define BOX_ARCHIVE_MAX_LINK 4095        /* bytes of a symlink's target, without a NUL */

/*
 * Flags of box_archive_pack_ex() and box_archive_extract_ex().
 * BOX_ARCHIVE_SYMLINKS: symlinks whose target is contained are packed and extracted as
 * symlinks (for sandbox snapshots; artifacts never use it). A target is contained when it is
 * not empty, at most BOX_ARCHIVE_MAX_LINK bytes, relative, without empty components ("a//b"),
 * and made of zero or more ".." components first, no more of them than the directories above
 * the link ("a/b/l" may climb 2), then only plain components (or "."): resolved from the
 * link's own directory it never leaves the tree, even through other contained links. This is
 * the rule lib/core/sbcopy.c applies to the links it keeps.
 */
#define BOX_ARCHIVE_SYMLINKS 0x1u
#define BOX_ARCHIVE_FAST 0x2u        /* pack: gzip level 1 (snapshots), still reproducible */
/* With BOX_ARCHIVE_SYMLINKS: every symlink is packed and extracted as it is, whatever its
 * target (absolute, leaving the tree; at most BOX_ARCHIVE_MAX_LINK bytes, not empty). For
 * sandbox snapshots, whose links a guest resolves in its own root (a Python venv's
 * bin/python is absolute). Extraction still never writes through a link: parents are opened
 * without following them. */
#define BOX_ARCHIVE_ANY_LINKS 0x4u
/* pack: devices, FIFOs and sockets are left out and counted in skipped, not refused */
#define BOX_ARCHIVE_SKIP_SPECIAL 0x8u

/* Caps on an extraction: max_bytes may be 0 (only empty files), the others must be positive. */
struct box_archive_limits {
	int64_t max_bytes;     /* total bytes of file content actually extracted */
	int64_t max_entries;   /* entries in the archive (files and directories) */
	int64_t max_path;      /* bytes of one entry's path, after "./" and a final "/" are dropped */
	int64_t max_depth;     /* components of one entry's path */
};

/* What a pack or an extraction went through (directories created implicitly not counted). */
struct box_archive_stats {
	int64_t entries;       /* files + directories + symlinks */
	int64_t files;
	int64_t dirs;
	int64_t bytes;         /* file content bytes */
	int64_t archive_bytes; /* compressed bytes written (pack) or read (extract) */
	int64_t links;         /* symlinks (BOX_ARCHIVE_SYMLINKS only), also counted in entries */
	int64_t skipped;       /* devices, FIFOs, sockets left out (BOX_ARCHIVE_SKIP_SPECIAL) */
};

/*
 * Writes a reproducible gzip-compressed tar (POSIX pax restricted: plain ustar headers, a pax
 * extended header only for what ustar cannot hold, such as paths over 100 bytes) of the tree
 * under dirfd to outfd, and fills *st (may be NULL).
 * The same tree gives the same bytes (with the same libarchive and zlib): entries in byte order
 * of their paths, which are relative with no "./" prefix (a directory "a/b" is stored as "a/b/",
 * the root itself is not stored); mtime 0, uid/gid 0, no user or group names; mode 0755 for
 * directories and for files with any execute bit, 0644 for other files; a gzip header with no
 * name and mtime 0.
 * Only regular files and directories may be in the tree; symlinks are never followed.
 * Returns 0, or -1 with err set:
 *   invalid_request  a symlink, device, FIFO or socket in the tree (err->path names it);
 *   limit_exceeded   more than BOX_ARCHIVE_MAX_ENTRIES entries, a path longer than
 *                    BOX_ARCHIVE_MAX_PATH or deeper than BOX_ARCHIVE_MAX_DEPTH;
 *   io_error         reading the tree or writing outfd failed, or a file changed while it
 *                    was packed; internal for libarchive or memory failures.
 * On failure some bytes may already have been written to outfd: write to a temporary file.
 */
int box_archive_pack(int dirfd, int outfd, struct box_archive_stats *st, struct box_err *err);

/*
 * box_archive_pack() with flags (0 or BOX_ARCHIVE_SYMLINKS; box_archive_pack() is flags 0).
 * With BOX_ARCHIVE_SYMLINKS a symlink is stored as a symlink entry holding its target text as
 * readlink gives it (never followed), with the fixed metadata of the other entries (mode 0777,
 * size 0); one whose target is not contained (see BOX_ARCHIVE_SYMLINKS) fails the pack with
 * policy_denied, err->path naming the link, so a snapshot never drops a file silently.
 * Devices, FIFOs and sockets stay invalid_request. Other flags are invalid_request.
 */
int box_archive_pack_ex(int dirfd, int outfd, unsigned int flags, struct box_archive_stats *st,
			struct box_err *err);

/* The caps of DESIGN.md for an archive of compressed_size bytes: max_bytes is
 * min(BOX_ARCHIVE_MAX_BYTES, BOX_ARCHIVE_BOMB_RATIO * compressed_size) (0 for a non-positive
 * size), the others the BOX_ARCHIVE_MAX_* defaults. */
void box_archive_default_limits(int64_t compressed_size, struct box_archive_limits *out);

/*
 * Extracts the archive read from infd (a tar, plain or gzip-compressed, or a zip; nothing else
 * is enabled; a seekable infd lets a zip be read through its central directory, a pipe only
 * as a stream, where a zip's file types and modes are unknown) under destdirfd, and fills *st (may be NULL; on failure too, with what was
 * done up to the error).
 *
 * Contract with the caller: destdirfd is an empty directory the caller created for this
 * extraction alone (e.g. store/tmp/<random>), that no one else writes to meanwhile. The
 * extractor creates everything itself (mkdirat, openat with O_CREAT|O_EXCL|O_NOFOLLOW) relative
 * to directory fds it opened with O_NOFOLLOW|O_DIRECTORY from destdirfd, so it never writes
 * outside destdirfd. It only ever creates regular files with mode 0644 or 0755 and directories
 * with mode 0755 (set explicitly, whatever the umask). On failure destdirfd may hold a partial
 * tree of such files; the caller then deletes the directory (box_fswalk_remove, lib/core/fswalk.h) and never
 * uses any of it. On success the caller may rename it into place.
 *
 * Accepted entries: regular files and directories whose path is relative (one leading "./" is
 * dropped; the entries "." and "./" are skipped), with no "." or ".." component, no empty
 * component ("a//b"), no backslash, no control character (bytes < 0x20 and 0x7f), components
 * of at most 255 bytes, and a path seen only once (a file and a directory at the same path are
 * also a duplicate; a directory entry for a parent an earlier entry created implicitly is not).
 * Missing parents are created with mode 0755. A file's mode is 0755 if the archive gives it any
 * execute bit, else 0644: set-id and sticky bits are dropped, never refused.
 * Any other entry refuses the whole archive: hard links, symlinks, devices, FIFOs, sockets.
 * Content sizes are counted from the data actually decompressed, never trusted from headers.
 * Returns 0, or -1 with err set (the message names the offending entry, err->path holds it):
 *   integrity_failed  an entry refused above, or an archive libarchive cannot read or warns
 *                     about (unknown format or compression, truncated, corrupt, sizes that do
 *                     not match, a name that does not convert to the locale's charset);
 *   limit_exceeded    past lim->max_bytes (limit "bytes"), max_entries ("entries"), max_path
 *                     ("path_length") or max_depth ("depth"); the extraction stops as soon as
 *                     a cap is passed, without decompressing the rest;
 *   invalid_request   lim holds a negative max_bytes or another non-positive cap;
 *   io_error          reading infd or writing under destdirfd failed (also a full disk:
 *                     limit_exceeded for EDQUOT); internal for memory.
 */
int box_archive_extract(int infd, int destdirfd, const struct box_archive_limits *lim,
			struct box_archive_stats *st, struct box_err *err);

/*
 * box_archive_extract() with flags (0 or BOX_ARCHIVE_SYMLINKS; box_archive_extract() is
 * flags 0). With BOX_ARCHIVE_SYMLINKS a symlink entry (its name obeying the rules above) whose
 * target is contained (see BOX_ARCHIVE_SYMLINKS) is created with symlinkat; any other symlink
 * entry is integrity_failed as without the flag, and so is an entry whose path goes through a
 * symlink made earlier ("l" -> "d", then "l/x"): parents are opened with O_NOFOLLOW one
 * component at a time, nothing is ever created through a link. The destination may then hold
 * symlinks besides 0644/0755 files and 0755 directories. Hard links stay refused. Other flags
 * are invalid_request.
 */
int box_archive_extract_ex(int infd, int destdirfd, const struct box_archive_limits *lim,
			   unsigned int flags, struct box_archive_stats *st, struct box_err *err);

#define BOX_ARCHIVE_DIGEST_LEN 71 /* "sha256:" + 64 hex digits, without the NUL */

/*
 * The digest of the tree under dirfd, "sha256:<64 hex>" (NUL-terminated) in hex.
 * It is the SHA-256 of a canonical listing: the line "box-tree-v1\n", then for every entry
 * below dirfd, in byte order of the relative paths (no "./", no trailing "/"):
 *   PATH NUL TYPE " " MODE " " SIZE " " CONTENT "\n"
 * TYPE is "f" (regular file), "d" (directory), "l" (symlink, never followed) or "o" (anything
 * else); MODE is the normalised mode in octal: "0755" for directories and for files with any
 * execute bit, "0644" for other files, "0000" for other types; SIZE is the size in decimal
 * (0 for directories); CONTENT is the hex SHA-256 of the file's bytes (of a symlink's target)
 * or "-". So any change of content, name, type, execute bit, an extra or a missing entry
 * changes the digest; other permission bits, owners and times do not; a symlink's target text
 * is part of it, so a changed target changes the digest. The digest of a tree equals that of
 * its box_archive_pack() archive extracted by box_archive_extract(), and of its
 * box_archive_pack_ex() archive extracted by box_archive_extract_ex() with the same flags.
 * Bounded by the BOX_ARCHIVE_MAX_* entries, path length and depth.
 * Returns 0, or -1 with err set: limit_exceeded past a bound, io_error (or not_found) when the
 * tree cannot be read or a file changes while it is read, internal for memory.
 */
int box_archive_tree_digest(int dirfd, char hex[BOX_ARCHIVE_DIGEST_LEN + 1], struct box_err *err);

/*
 * Hooks into box_archive_tree_digest_ex, for a cache of content digests (lib/artifact/rehash.c). path
 * is relative as in the listing; st holds only st_mode, st_size (0 for a directory), st_dev,
 * st_ino, st_mtim and st_ctim, as the walk took them with fstatat(AT_SYMLINK_NOFOLLOW).
 *   reuse  (may be NULL) called for a regular file or a symlink before its content is read:
 *          returns 1 after writing into content the hex SHA-256 the caller vouches for (of
 *          the file's bytes, of the link's target text), so that it is not read; 0 to read it
 *   seen   (may be NULL) called for every entry, in listing order, with its content digest
 *          (hex, or "-" for directories and other types); returns 0, or -1 with err set to
 *          stop the digest
 */
struct box_archive_digest_hooks {
	int (*reuse)(void *ctx, const char *path, const struct stat *st, char content[65]);
	int (*seen)(void *ctx, const char *path, const struct stat *st, const char *content,
		    struct box_err *err);
	void *ctx;
};

/* box_archive_tree_digest() with hooks (NULL: none; box_archive_tree_digest() is that). The
 * digest is the same whatever the hooks do, provided reuse only vouches for true digests. */
int box_archive_tree_digest_ex(int dirfd, const struct box_archive_digest_hooks *hooks,
			       char hex[BOX_ARCHIVE_DIGEST_LEN + 1], struct box_err *err);

#endif
