#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbexport.h"
#include "buf.h"
#include "fswalk.h"
#include "json.h"
#include "sbcopy.h"
#include "sbfiles.h"
#include "banned.h"

#define TMP_TRIES 16

/* A new directory of parentfd named TAG-RANDOM (name written), opened; -1 with err. */
static int new_dir(int parentfd, const char *tag, char name[64], struct box_err *err)
{
	int i, fd;

	for (i = 0; i < TMP_TRIES; i++) {
		if (box_sbcopy_tmp_name(name, 64, tag, err) < 0)
			return -1;
		if (mkdirat(parentfd, name, 0700) == 0)
			break;
		if (errno != EEXIST)
			return box_err_sys(err, "cannot create a directory for %s", tag);
	}
	if (i == TMP_TRIES)
		return box_err_set(err, BOX_E_IO, "%s: %d names taken", tag, TMP_TRIES);
	fd = openat(parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		box_err_sys(err, "cannot open %s", name);
		(void)unlinkat(parentfd, name, AT_REMOVEDIR);
	}
	return fd;
}

/* The staging tree of an export under stagefd: the meta file and workspace/. */
static int stage(int snapdirfd, const char *digest, const cJSON *meta, int stagefd,
		 struct box_err *err)
{
	char *text = cJSON_Print(meta);
	int fd, rc = -1;

	if (!text)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	fd = openat(stagefd, BOX_SBEXPORT_META, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
		    O_CLOEXEC, 0644);
	if (fd < 0 || box_write_all(fd, text, strlen(text)) < 0)
		box_err_sys(err, "cannot write %s", BOX_SBEXPORT_META);
	else
		rc = box_sbfiles_restore(snapdirfd, digest, stagefd, "workspace", 0, err);
	if (fd >= 0)
		close(fd);
	cJSON_free(text);
	return rc;
}

/* The directory part of out opened, and its last component in base; -1 with err. */
static int open_parent(const char *out, char *base, size_t n, struct box_err *err)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(out, '/');
	int fd;

	if (!*out || (slash && !slash[1]))
		return box_err_set(err, BOX_E_INVALID, "invalid export path '%.200s'", out);
	if (box_fmt(base, n, "%s", slash ? slash + 1 : out) < 0 ||
	    box_fmt(dir, sizeof(dir), "%.*s", slash ? (int)(slash - out) + (slash == out) : 1,
		    slash ? out : ".") < 0)
		return box_err_set(err, BOX_E_INVALID, "export path too long");
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return box_err_sys(err, "cannot open %s", dir);
	return fd;
}

int box_sbexport_write(int snapdirfd, const char *digest, const cJSON *meta, const char *out,
		       struct box_archive_stats *st, struct box_err *err)
{
	char stage_name[64], tmp[64 + NAME_MAX], base[NAME_MAX + 1];
	int stagefd, outdir, fd = -1, rc = -1;

	outdir = open_parent(out, base, sizeof(base), err);
	if (outdir < 0)
		return -1;
	stagefd = new_dir(snapdirfd, "sbexport", stage_name, err);
	if (stagefd < 0) {
		close(outdir);
		return -1;
	}
	if (stage(snapdirfd, digest, meta, stagefd, err) < 0)
		goto out;
	if (box_sbcopy_tmp_name(tmp, sizeof(tmp), "sbexport", err) < 0)
		goto out;
	fd = openat(outdir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		box_err_sys(err, "cannot create a file beside %s", out);
		goto out;
	}
	if (box_archive_pack_ex(stagefd, fd, BOX_ARCHIVE_SYMLINKS, st, err) < 0)
		goto out;
	if (fsync(fd) < 0 || renameat(outdir, tmp, outdir, base) < 0) {
		box_err_sys(err, "cannot write %s", out);
		goto out;
	}
	(void)fsync(outdir);
	rc = 0;
out:
	if (fd >= 0) {
		close(fd);
		if (rc < 0)
			(void)unlinkat(outdir, tmp, 0);
	}
	close(stagefd);
	(void)box_fswalk_remove(snapdirfd, stage_name, &(struct box_err){ 0 });
	close(outdir);
	return rc;
}

/* The meta of an extracted export in dirfd: it holds the meta file and workspace/ only. */
static cJSON *check_tree(int dirfd, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_SBEXPORT_META_MAX);
	struct stat st;
	cJSON *meta = NULL;
	int fd;
	DIR *d;
	struct dirent *e;

	fd = dup(dirfd);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return box_err_sys(err, "cannot read the archive's tree"), NULL;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (strcmp(e->d_name, BOX_SBEXPORT_META) && strcmp(e->d_name, "workspace")) {
			box_err_set(err, BOX_E_INVALID, "not an exported snapshot: unexpected "
				    "'%.100s' at its top", e->d_name);
			closedir(d);
			return NULL;
		}
	}
	closedir(d);
	if (fstatat(dirfd, "workspace", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
		return box_err_set(err, BOX_E_INVALID, "not an exported snapshot: no workspace/"),
		       NULL;
	if (fstatat(dirfd, BOX_SBEXPORT_META, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode))
		return box_err_set(err, BOX_E_INVALID, "not an exported snapshot: no %s",
				   BOX_SBEXPORT_META), NULL;
	fd = openat(dirfd, BOX_SBEXPORT_META, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return box_err_sys(err, "cannot open %s", BOX_SBEXPORT_META), NULL;
	if (box_buf_read_fd(&b, fd, err) == 0)
		meta = box_json_parse(b.data ? b.data : "", b.len, err);
	close(fd);
	box_buf_release(&b);
	if (meta && !cJSON_IsObject(meta)) {
		cJSON_Delete(meta);
		return box_err_set(err, BOX_E_INVALID, "%s is not an object", BOX_SBEXPORT_META),
		       NULL;
	}
	if (!meta && err->code != BOX_E_LIMIT)
		err->code = BOX_E_INVALID;
	return meta;
}

cJSON *box_sbexport_read(const char *path, int parentfd, int64_t max_bytes, char dir[64],
			 char digest[72], struct box_err *err)
{
	struct box_archive_limits lim = {
		max_bytes < BOX_ARCHIVE_MAX_BYTES ? max_bytes : BOX_ARCHIVE_MAX_BYTES,
		BOX_ARCHIVE_MAX_ENTRIES, BOX_ARCHIVE_MAX_PATH, BOX_ARCHIVE_MAX_DEPTH,
	};
	struct stat st;
	cJSON *meta = NULL;
	int in, dfd = -1, ws = -1, snaps = -1;

	in = open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0 && errno == ENOENT)
		return box_err_set(err, BOX_E_NOT_FOUND, "%s does not exist", path), NULL;
	if (in < 0)
		return box_err_sys(err, "cannot open %s", path), NULL;
	if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
		box_err_set(err, BOX_E_INVALID, "%s is not a regular file", path);
		goto fail;
	}
	if (st.st_size > 2 * max_bytes + (1 << 20)) {
		box_err_limit(err, BOX_E_LIMIT, "disk_bytes", max_bytes, "bytes",
			      "%s is %lld bytes, more than the session's disk_bytes allow", path,
			      (long long)st.st_size);
		goto fail;
	}
	dfd = new_dir(parentfd, "sbimport", dir, err);
	if (dfd < 0)
		goto fail;
	if (box_archive_extract_ex(in, dfd, &lim, BOX_ARCHIVE_SYMLINKS, NULL, err) < 0 ||
	    !(meta = check_tree(dfd, err)))
		goto fail;
	ws = openat(dfd, "workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ws < 0 || mkdirat(dfd, "snapshots", 0700) < 0 ||
	    (snaps = openat(dfd, "snapshots", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		box_err_sys(err, "cannot prepare the imported workspace");
		goto fail;
	}
	if (box_sbfiles_snapshot(ws, snaps, digest, NULL, err) < 0 ||
	    box_fswalk_remove(dfd, "workspace", err) < 0)
		goto fail;
	close(ws);
	close(snaps);
	close(dfd);
	close(in);
	return meta;
fail:
	cJSON_Delete(meta);
	if (ws >= 0)
		close(ws);
	if (snaps >= 0)
		close(snaps);
	if (dfd >= 0) {
		close(dfd);
		(void)box_fswalk_remove(parentfd, dir, &(struct box_err){ 0 });
	}
	close(in);
	return NULL;
}
