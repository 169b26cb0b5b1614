/* box-verify: the helper that re-hashes a store entry for box-run, box-sandbox and box-tool's
 * host side (lib/artifact/verify.h), so that they never load libcrypto or libarchive themselves. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "buf.h"
#include "json.h"
#include "lockfile.h"
#include "rehash.h"
#include "banned.h"
#include "proc.h"

static const char usage[] =
	"Usage: box-verify STORE HEX TREE_DIGEST\n"
	"       box-verify --help | --version\n"
	"\n"
	"Store verification of box-run and box-sandbox, not meant to be run by hand. Computes\n"
	"the tree digest of STORE/sha256/HEX, reading only what the stat cache STORE/sha256/\n"
	"HEX.stat cannot vouch for, compares it with TREE_DIGEST and, when they match, rewrites\n"
	"the cache. Prints one JSON object; exit status 5 when the tree does not match.\n";

static const struct box_cli cli = { .name = "box-verify" };

static cJSON *verify(char **argv, struct box_err *err)
{
	struct box_rehash_stats st;
	char digest[80], dir[PATH_MAX];
	cJSON *res;
	int fd, r;

	snprintf(digest, sizeof(digest), "sha256:%.70s", argv[1]);
	if (!box_digest_valid(digest) || !box_digest_valid(argv[2])) {
		box_err_set(err, BOX_E_USAGE, "HEX needs 64 hex digits, TREE_DIGEST sha256:HEX");
		return NULL;
	}
	if (box_fmt(dir, sizeof(dir), "%s/sha256", argv[0]) < 0) {
		box_err_set(err, BOX_E_USAGE, "STORE is too long");
		return NULL;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		box_err_sys(err, "cannot open %s", dir);
		return NULL;
	}
	r = box_rehash_entry(fd, argv[1], argv[2], &st, err);
	close(fd);
	if (r < 0)
		return NULL;
	res = cJSON_CreateObject();
	if (!res || !cJSON_AddTrueToObject(res, "ok") ||
	    !cJSON_AddStringToObject(res, "tree_digest", st.tree) ||
	    !box_json_add_int64(res, "hashed", (int64_t)st.hashed) ||
	    !box_json_add_int64(res, "reused", (int64_t)st.reused) ||
	    !cJSON_AddBoolToObject(res, "cache_written", st.cache_written)) {
		cJSON_Delete(res);
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	return res;
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
		puts("box-verify (box) " PACKAGE_VERSION);
		return fflush(stdout) == 0 ? 0 : 8;
	}
	if (argc != 4)
		box_err_set(&err, BOX_E_USAGE, "usage: box-verify STORE HEX TREE_DIGEST");
	else
		res = verify(argv + 1, &err);
	if (!res)
		return box_cli_fail(&cli, &err);
	status = box_cli_emit(res) < 0 && errno != EPIPE ? 8 : 0;
	cJSON_Delete(res);
	return status;
}
