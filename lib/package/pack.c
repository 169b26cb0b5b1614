#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pack.h"
#include "artifact.h"
#include "atomic.h"
#include "boxarchive.h"
#include "buf.h"
#include "confine.h"
#include "oci.h"
#include "repo.h"
#include "sha256.h"
#include "tools.h"
#include "banned.h"

const struct box_field box_pack_fields[] = {
	{ "dir", BOX_F_STRING, 0, 4096, 0, "the artifact directory (holds box-artifact.json)", "DIR" },
	{ "registry", BOX_F_STRING, 0, 4096, 'r',
	  "registry: oci:PATH, https://HOST[/PREFIX] or HOST[:PORT]/PREFIX (default $BOX_REGISTRY, "
	  "else oci:$BOX_HOME/registry)", "REF" },
	{ "force", BOX_F_BOOL, 0, 0, 'f', "move the tag NAME:VERSION even if it names another digest",
	  NULL },
	{ "insecure", BOX_F_BOOL, 0, 0, 0,
	  "allow a plain http:// registry that is not on a loopback address", NULL },
	{ NULL },
};

static int read_manifest_file(int dirfd, struct box_buf *b, struct box_err *err)
{
	int fd = openat(dirfd, BOX_ARTIFACT_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	int r;

	if (fd < 0 && errno == ENOENT) {
		box_err_set(err, BOX_E_INVALID, "the directory has no %s: it is not an artifact",
			    BOX_ARTIFACT_FILE);
		box_err_path(err, "$.dir");
		return -1;
	}
	if (fd < 0)
		return box_err_sys(err, "%s", BOX_ARTIFACT_FILE);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return box_err_set(err, BOX_E_INVALID, "%s is not a regular file", BOX_ARTIFACT_FILE);
	}
	r = box_buf_read_fd(b, fd, err);
	close(fd);
	return r;
}

/* the entry point must be a regular file of the artifact */
static int check_entry_file(int dirfd, const char *entry, struct box_err *err)
{
	struct stat st;
	int fd = box_confine_open(dirfd, entry, O_PATH | O_NOFOLLOW, 0, err);

	if (fd < 0) {
		box_err_set(err, BOX_E_INVALID, "entry %s is not in the artifact directory", entry);
		box_err_path(err, "$.entry");
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		box_err_set(err, BOX_E_INVALID, "entry %s is not a regular file", entry);
		box_err_path(err, "$.entry");
		return -1;
	}
	close(fd);
	return 0;
}

/* Hashes fd from offset 0, then pushes it: a remote registry wants the digest first. */
static int put_blob(struct box_repo *r, const char *name, int fd, char digest[BOX_OCI_DIGEST_LEN],
		    int64_t *size, struct box_err *err)
{
	char hex[BOX_SHA256_HEX_LEN + 1];

	if (box_sha256_fd(fd, hex, size, err) < 0)
		return -1;
	snprintf(digest, BOX_OCI_DIGEST_LEN, "sha256:%s", hex);
	if (lseek(fd, 0, SEEK_SET) < 0)
		return box_err_sys(err, "lseek");
	return box_repo_put_blob(r, name, fd, digest, *size, err);
}

static cJSON *blob_json(const char *digest, int64_t size)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "digest", digest);
	box_json_add_int64(o, "size", size);
	return o;
}

cJSON *box_pack(const cJSON *req, struct box_err *err)
{
	const char *dir = box_json_get_str(req, "dir", NULL);
	char ref[4200], cdigest[BOX_OCI_DIGEST_LEN], ldigest[BOX_OCI_DIGEST_LEN];
	char mdigest[BOX_OCI_DIGEST_LEN], title[400];
	struct box_buf man = BOX_BUF_INIT(BOX_ARTIFACT_MAX);
	struct box_archive_stats st;
	struct box_artifact a;
	struct box_repo o;
	int dirfd = -1, tmpfd = -1, cfd = -1, have_oci = 0;
	int64_t lsize = 0, csize = 0;
	char *manifest = NULL;
	size_t mlen = 0, i;
	cJSON *res = NULL;
	const char *tmpdir = getenv("TMPDIR");

	if (!dir) {
		box_err_set(err, BOX_E_INVALID, "no artifact directory: give DIR or \"dir\"");
		box_err_path(err, "$.dir");
		return NULL;
	}
	if (box_json_get_str(req, "registry", NULL))
		snprintf(ref, sizeof(ref), "%s", box_json_get_str(req, "registry", ""));
	else if (box_default_registry(ref, sizeof(ref), err) < 0)
		return NULL;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		box_err_sys(err, "open %s", dir);
		box_err_path(err, dir);
		return NULL;
	}
	if (read_manifest_file(dirfd, &man, err) < 0 ||
	    box_artifact_parse(man.data ? man.data : "", man.len, &a, err) < 0 ||
	    (a.entry[0] && check_entry_file(dirfd, a.entry, err) < 0) ||
	    box_tools_check_artifact(dir, man.data ? man.data : "", man.len, err) < 0)
		goto out;
	if (box_repo_open(ref, 1, box_json_get_bool(req, "insecure", 0), &o, err) < 0)
		goto out;
	have_oci = 1;
	/* the archive goes to an unnamed temporary file first: the registry takes only a
	 * complete, hashed blob */
	tmpfd = open(tmpdir && *tmpdir ? tmpdir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (tmpfd < 0) {
		box_err_sys(err, "temporary file");
		goto out;
	}
	if (box_archive_pack(dirfd, tmpfd, &st, err) < 0)
		goto out;
	if (lseek(tmpfd, 0, SEEK_SET) < 0) {
		box_err_sys(err, "lseek");
		goto out;
	}
	if (put_blob(&o, a.name, tmpfd, ldigest, &lsize, err) < 0)
		goto out;
	cfd = memfd_create("box-config", MFD_CLOEXEC);
	if (cfd < 0 || box_write_all(cfd, man.data, man.len) < 0 || lseek(cfd, 0, SEEK_SET) < 0) {
		box_err_sys(err, "config blob");
		goto out;
	}
	if (put_blob(&o, a.name, cfd, cdigest, &csize, err) < 0)
		goto out;
	snprintf(title, sizeof(title), "%s-%s.tar.gz", a.name, a.version);
	for (i = 0; title[i]; i++)
		if (title[i] == '/')
			title[i] = '-';
	manifest = box_oci_artifact_manifest(cdigest, (int64_t)man.len, ldigest, lsize, title, &mlen);
	if (!manifest) {
		box_err_set(err, BOX_E_INTERNAL, "cannot build the manifest");
		goto out;
	}
	if (box_repo_put_manifest(&o, a.name, a.version, manifest, mlen,
				  box_json_get_bool(req, "force", 0), mdigest, err) < 0)
		goto out;
	res = cJSON_CreateObject();
	if (!res) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	cJSON_AddTrueToObject(res, "ok");
	cJSON_AddStringToObject(res, "name", a.name);
	cJSON_AddStringToObject(res, "version", a.version);
	cJSON_AddStringToObject(res, "kind", a.kind);
	cJSON_AddStringToObject(res, "digest", mdigest);
	cJSON_AddStringToObject(res, "registry", ref);
	cJSON_AddItemToObject(res, "config", blob_json(cdigest, (int64_t)man.len));
	cJSON_AddItemToObject(res, "layer", blob_json(ldigest, lsize));
	box_json_add_int64(res, "files", st.files);
	box_json_add_int64(res, "bytes", st.bytes);
out:
	free(manifest);
	if (tmpfd >= 0)
		close(tmpfd);
	if (cfd >= 0)
		close(cfd);
	if (have_oci)
		box_repo_close(&o);
	close(dirfd);
	box_buf_release(&man);
	return res;
}
