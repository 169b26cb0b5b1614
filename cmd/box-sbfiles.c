/* box-sbfiles: the helper box-sandbox starts for the file work that needs libcrypto and
 * libarchive (listing /output, snapshots, restores), so box-sandbox itself never loads them. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "buf.h"
#include "json.h"
#include "sbexport.h"
#include "sbfiles.h"
#include "sbcp.h"
#include "confine.h"
#include "sbrepro.h"
#include "banned.h"
#include "proc.h"

static const char usage[] =
	"Usage: box-sbfiles outputs [--max-files N] [--max-bytes N] DIR\n"
	"       box-sbfiles snapshot SRC_DIR SNAP_DIR\n"
	"       box-sbfiles restore SNAP_DIR DIGEST DEST_PARENT NAME [MAX_BYTES [UID:GID]]\n"
	"       box-sbfiles export SNAP_DIR DIGEST META_JSON FILE\n"
	"       box-sbfiles import FILE PARENT MAX_BYTES\n"
	"       box-sbfiles cp-in SRC_DIR ROOT GUEST_DIR MAX_BYTES [UID:GID]\n"
	"       box-sbfiles cp-out ROOT GUEST_DIR DEST_DIR MAX_BYTES\n"
	"       box-sbfiles rootfs-verify\n"
	"       box-sbfiles --help | --version\n"
	"\n"
	"File work of box-sandbox, not meant to be run by hand. Prints one JSON object.\n"
	"  outputs   list the files under DIR: path, size, sha256 (symlinks never followed,\n"
	"            each inode hashed once, at most N bytes of distinct files hashed)\n"
	"  snapshot  pack SRC_DIR into SNAP_DIR/<hex>.tar.gz and print its digest\n"
	"  restore   replace DEST_PARENT/NAME with the snapshot DIGEST from SNAP_DIR (owned by\n"
	"            UID:GID when given)\n"
	"  export    write the snapshot DIGEST and META_JSON as a self-contained archive FILE\n"
	"  import    extract the archive FILE into a new directory of PARENT, its workspace\n"
	"            as a snapshot, and print the directory, the digest and the meta\n"
	"  cp-in     copy the host tree SRC_DIR to GUEST_DIR, a path inside ROOT (symlinks\n"
	"            resolved inside it), absent or empty, as a tar stream\n"
	"  cp-out    copy the tree GUEST_DIR inside ROOT to the host's DEST_DIR, absent or\n"
	"            empty, as a tar stream; the guest's tree is checked first\n"
	"  rootfs-verify  walk the guest's root filesystem at idle priority and rewrite the\n"
	"            host-wide cache of its digest (one at a time; see box-sandbox(1))\n";

static const struct box_cli cli = { .name = "box-sbfiles" };

static int open_dir(const char *path, struct box_err *err)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT)
		return box_err_set(err, BOX_E_NOT_FOUND, "%s does not exist", path);
	if (fd < 0)
		return box_err_sys(err, "cannot open %s", path);
	return fd;
}

/* A value of --max-files or --max-bytes: 1 to max. */
static int count_arg(const char *flag, const char *v, unsigned long long max,
		     unsigned long long *out, struct box_err *err)
{
	char *end;

	errno = 0;
	*out = strtoull(v, &end, 10);
	if (errno || end == v || *end || v[0] == '-' || *out == 0 || *out > max)
		return box_err_set(err, BOX_E_USAGE, "%s needs a positive integer", flag);
	return 0;
}

static cJSON *outputs(int argc, char **argv, struct box_err *err)
{
	struct box_sbfiles_out_limits lim = { 0 };
	unsigned long long v;
	cJSON *list, *res;
	int fd;

	while (argc >= 3 && (strcmp(argv[0], "--max-files") == 0 ||
			     strcmp(argv[0], "--max-bytes") == 0)) {
		int files = argv[0][6] == 'f';

		if (count_arg(argv[0], argv[1], files ? 100000000 : (unsigned long long)INT64_MAX,
			      &v, err) < 0)
			return NULL;
		if (files)
			lim.max_files = (size_t)v;
		else
			lim.max_bytes = (int64_t)v;
		argv += 2;
		argc -= 2;
	}
	if (argc != 1 || argv[0][0] == '-') {
		box_err_set(err, BOX_E_USAGE, "usage: box-sbfiles outputs [--max-files N] "
			    "[--max-bytes N] DIR");
		return NULL;
	}
	fd = open_dir(argv[0], err);
	if (fd < 0)
		return NULL;
	list = box_sbfiles_outputs(fd, &lim, err);
	close(fd);
	if (!list)
		return NULL;
	res = cJSON_CreateObject();
	if (!res || !cJSON_AddTrueToObject(res, "ok")) {
		cJSON_Delete(res);
		cJSON_Delete(list);
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	cJSON_AddItemToObject(res, "outputs", list);
	return res;
}

static cJSON *snapshot(int argc, char **argv, struct box_err *err)
{
	char digest[BOX_SBFILES_DIGEST_LEN + 1];
	struct box_sbfiles_stats st;
	int src, snap, r;
	cJSON *res;

	if (argc != 2) {
		box_err_set(err, BOX_E_USAGE, "usage: box-sbfiles snapshot SRC_DIR SNAP_DIR");
		return NULL;
	}
	src = open_dir(argv[0], err);
	if (src < 0)
		return NULL;
	snap = open_dir(argv[1], err);
	if (snap < 0) {
		close(src);
		return NULL;
	}
	r = box_sbfiles_snapshot(src, snap, digest, &st, err);
	close(src);
	close(snap);
	if (r < 0)
		return NULL;
	res = cJSON_CreateObject();
	if (!res || !cJSON_AddTrueToObject(res, "ok") ||
	    !cJSON_AddStringToObject(res, "digest", digest) ||
	    !box_json_add_int64(res, "archive_bytes", st.archive_bytes) ||
	    !box_json_add_int64(res, "entries", st.entries) ||
	    !box_json_add_int64(res, "files", st.files) ||
	    !box_json_add_int64(res, "bytes", st.bytes) ||
	    !box_json_add_int64(res, "skipped", st.skipped) ||
	    !cJSON_AddBoolToObject(res, "existed", st.existed)) {
		cJSON_Delete(res);
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	return res;
}

static cJSON *restore(int argc, char **argv, struct box_err *err)
{
	int64_t max_bytes = 0;
	int snap, parent, r;
	unsigned long uid = (unsigned long)-1, gid = (unsigned long)-1;
	cJSON *res;
	char *end;

	if (argc == 5 || argc == 6) {
		errno = 0;
		max_bytes = strtoll(argv[4], &end, 10);
		if (errno || *end || argv[4][0] < '0' || argv[4][0] > '9' || max_bytes <= 0)
			argc = 0;
	}
	if (argc == 6) {
		errno = 0;
		uid = strtoul(argv[5], &end, 10);
		if (!errno && *end == ':' && argv[5][0] >= '0' && argv[5][0] <= '9' &&
		    end[1] >= '0' && end[1] <= '9')
			gid = strtoul(end + 1, &end, 10);
		if (errno || *end || uid >= 0xffffffffUL || gid >= 0xffffffffUL) {
			box_err_set(err, BOX_E_USAGE, "invalid UID:GID '%.64s'", argv[5]);
			return NULL;
		}
	}
	if (argc < 4 || argc > 6) {
		box_err_set(err, BOX_E_USAGE, "usage: box-sbfiles restore SNAP_DIR DIGEST "
			    "DEST_PARENT NAME [MAX_BYTES [UID:GID]]");
		return NULL;
	}
	snap = open_dir(argv[0], err);
	if (snap < 0)
		return NULL;
	parent = open_dir(argv[2], err);
	if (parent < 0) {
		close(snap);
		return NULL;
	}
	r = box_sbfiles_restore_as(snap, argv[1], parent, argv[3], max_bytes, (uid_t)uid,
				   (gid_t)gid, err);
	close(snap);
	close(parent);
	if (r < 0)
		return NULL;
	res = cJSON_CreateObject();
	if (!res || !cJSON_AddTrueToObject(res, "ok") ||
	    !cJSON_AddStringToObject(res, "digest", argv[1])) {
		cJSON_Delete(res);
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	return res;
}

static cJSON *export(int argc, char **argv, struct box_err *err)
{
	struct box_archive_stats st = { 0 };
	cJSON *meta, *res;
	int snap, r;

	if (argc != 4)
		return box_err_set(err, BOX_E_USAGE, "usage: box-sbfiles export SNAP_DIR DIGEST "
				   "META_JSON FILE"), NULL;
	if (!(meta = box_json_parse(argv[2], strlen(argv[2]), err)))
		return NULL;
	snap = open_dir(argv[0], err);
	r = snap < 0 ? -1 : box_sbexport_write(snap, argv[1], meta, argv[3], &st, err);
	if (snap >= 0)
		close(snap);
	cJSON_Delete(meta);
	if (r < 0)
		return NULL;
	res = cJSON_CreateObject();
	if (!res || !cJSON_AddTrueToObject(res, "ok") ||
	    !box_json_add_int64(res, "export_bytes", st.archive_bytes)) {
		cJSON_Delete(res);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	}
	return res;
}

static cJSON *import(int argc, char **argv, struct box_err *err)
{
	char dir[64], digest[72], *end;
	long long max;
	cJSON *meta, *res;
	int parent;

	if (argc != 3)
		return box_err_set(err, BOX_E_USAGE, "usage: box-sbfiles import FILE PARENT "
				   "MAX_BYTES"), NULL;
	errno = 0;
	max = strtoll(argv[2], &end, 10);
	if (errno || *end || end == argv[2] || max < 0)
		return box_err_set(err, BOX_E_USAGE, "invalid MAX_BYTES '%.40s'", argv[2]), NULL;
	parent = open_dir(argv[1], err);
	if (parent < 0)
		return NULL;
	meta = box_sbexport_read(argv[0], parent, max, dir, digest, err);
	close(parent);
	if (!meta)
		return NULL;
	res = cJSON_CreateObject();
	if (!res || !cJSON_AddTrueToObject(res, "ok") || !cJSON_AddStringToObject(res, "dir", dir) ||
	    !cJSON_AddStringToObject(res, "digest", digest)) {
		cJSON_Delete(res);
		cJSON_Delete(meta);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	}
	cJSON_AddItemToObject(res, "meta", meta);
	return res;
}

/* A positive byte count of MAX_BYTES, or -1. */
static int64_t bytes_arg(const char *v)
{
	char *end;
	long long n;

	errno = 0;
	n = strtoll(v, &end, 10);
	return errno || *end || v[0] < '0' || v[0] > '9' || n <= 0 ? -1 : (int64_t)n;
}

/* The guest directory rel inside the host's root directory: its parent opened confined to
 * root (symlinks resolved inside it) into *parent, its last component into name. */
static int guest_parent(const char *root, const char *rel, int *parent, char *name, size_t nn,
			struct box_err *err)
{
	char norm[4096], *slash;
	int rootfd;

	while (*rel == '/')
		rel++;
	if (box_confine_normalize(*rel ? rel : ".", norm, sizeof(norm), err) < 0)
		return -1;
	if (strcmp(norm, "/") == 0)
		return box_err_set(err, BOX_E_INVALID, "the guest directory is a root: name a "
				   "directory below it"), -1;
	slash = strrchr(norm, '/');
	box_fmt(name, nn, "%s", slash + 1);
	*slash = 0;
	if ((rootfd = open_dir(root, err)) < 0)
		return -1;
	*parent = box_confine_open(rootfd, norm[0] ? norm + 1 : ".", O_RDONLY | O_DIRECTORY,
				   0, err);
	close(rootfd);
	return *parent < 0 ? -1 : 0;
}

static cJSON *cp_result(const struct box_sbcp_stats *st, struct box_err *err)
{
	cJSON *res = cJSON_CreateObject();

	if (!res || !cJSON_AddTrueToObject(res, "ok") ||
	    !box_json_add_int64(res, "files", st->files) ||
	    !box_json_add_int64(res, "dirs", st->dirs) ||
	    !box_json_add_int64(res, "links", st->links) ||
	    !box_json_add_int64(res, "bytes", st->bytes)) {
		cJSON_Delete(res);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	}
	return res;
}

/* cp-in SRC_DIR ROOT GUEST_DIR MAX_BYTES [UID:GID] and cp-out ROOT GUEST_DIR DEST_DIR
 * MAX_BYTES */
static cJSON *cp(int in, int argc, char **argv, struct box_err *err)
{
	struct box_sbcp_stats st = { 0 };
	unsigned long uid = (unsigned long)-1, gid = (unsigned long)-1;
	int64_t max = argc >= 4 ? bytes_arg(argv[3]) : -1;
	char name[256], *end;
	int src = -1, parent = -1, r = -1;

	if (max < 0 || argc < 4 || argc > (in ? 5 : 4))
		return box_err_set(err, BOX_E_USAGE, "usage: box-sbfiles cp-in SRC_DIR ROOT "
				   "GUEST_DIR MAX_BYTES [UID:GID] | cp-out ROOT GUEST_DIR DEST_DIR "
				   "MAX_BYTES"), NULL;
	if (argc == 5) {
		errno = 0;
		uid = strtoul(argv[4], &end, 10);
		if (!errno && *end == ':')
			gid = strtoul(end + 1, &end, 10);
		if (errno || *end || uid >= 0xffffffffUL || gid >= 0xffffffffUL)
			return box_err_set(err, BOX_E_USAGE, "invalid UID:GID '%.64s'", argv[4]),
			       NULL;
	}
	if (in) {
		if ((src = open_dir(argv[0], err)) >= 0 &&
		    guest_parent(argv[1], argv[2], &parent, name, sizeof(name), err) == 0)
			r = box_sbcp_copy(src, parent, name, max, (uid_t)uid, (gid_t)gid, &st, err);
	} else {
		const char *dest = argv[2], *slash = strrchr(dest, '/');
		char pdir[4096], gname[256];
		int g;

		box_fmt(name, sizeof(name), "%s", slash ? slash + 1 : dest);
		box_fmt(pdir, sizeof(pdir), "%.*s", slash ? (int)(slash - dest) + (slash == dest) : 1,
			slash ? dest : ".");
		/* the guest's directory itself is never a symlink, and nothing below it is followed */
		if (guest_parent(argv[0], argv[1], &g, gname, sizeof(gname), err) == 0) {
			src = openat(g, gname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (src < 0 && (errno == ELOOP || errno == ENOTDIR))
				box_err_set(err, BOX_E_POLICY, "the guest directory %.200s is a symlink "
					    "or not a directory", argv[1]);
			else if (src < 0)
				box_err_sys(err, "cannot open the guest directory %.200s", argv[1]);
			close(g);
		}
		if (src >= 0 && (parent = open_dir(pdir, err)) >= 0)
			r = box_sbcp_copy(src, parent, name, max, (uid_t)-1, (gid_t)-1, &st, err);
	}
	if (src >= 0)
		close(src);
	if (parent >= 0)
		close(parent);
	return r < 0 ? NULL : cp_result(&st, err);
}

int main(int argc, char **argv)
{
	struct box_err err;
	cJSON *res = NULL;
	int status;

	if (box_proc_std_fds() < 0)
		return 8;
	signal(SIGPIPE, SIG_IGN);
	box_err_init(&err);
	if (argc == 2 && strcmp(argv[1], "--help") == 0) {
		fputs(usage, stdout);
		return fflush(stdout) == 0 ? 0 : 8;
	}
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		puts("box-sbfiles (box) " PACKAGE_VERSION);
		return fflush(stdout) == 0 ? 0 : 8;
	}
	if (argc < 2)
		box_err_set(&err, BOX_E_USAGE, "a command is needed (see --help)");
	else if (strcmp(argv[1], "outputs") == 0)
		res = outputs(argc - 2, argv + 2, &err);
	else if (strcmp(argv[1], "snapshot") == 0)
		res = snapshot(argc - 2, argv + 2, &err);
	else if (strcmp(argv[1], "restore") == 0)
		res = restore(argc - 2, argv + 2, &err);
	else if (strcmp(argv[1], "export") == 0)
		res = export(argc - 2, argv + 2, &err);
	else if (strcmp(argv[1], "import") == 0)
		res = import(argc - 2, argv + 2, &err);
	else if (strcmp(argv[1], "cp-in") == 0 || strcmp(argv[1], "cp-out") == 0)
		res = cp(argv[1][3] == 'i', argc - 2, argv + 2, &err);
	else if (strcmp(argv[1], "rootfs-verify") == 0 && argc == 2)
		res = box_sbrepro_rootfs_verify(&err) == 0 ? cJSON_CreateObject() : NULL;
	else
		box_err_set(&err, BOX_E_USAGE, "unknown command \"%s\" (see --help)", argv[1]);
	if (!res)
		return box_cli_fail(&cli, &err);
	status = box_cli_emit(res) < 0 && errno != EPIPE ? 8 : 0;
	cJSON_Delete(res);
	return status;
}
