/*
 * A thin driver of lib/net/registry.h for tests/registry.bats (not installed):
 *
 *   registry-client [-k] [-t MS] [-r S] pull REF NAME TAG OUTFILE
 *   registry-client [-k] [-t MS] [-r S] push REF NAME TAG FILE...
 *   registry-client [-k] [-t MS] [-r S] tags REF NAME
 *   registry-client [-k] [-t MS] [-r S] manifest REF NAME TAG-OR-DIGEST
 *   registry-client [-k] [-t MS] [-r S] blob REF NAME DIGEST SIZE OUTFILE
 *
 * -k insecure, -t timeout_ms, -r cap on Retry-After seconds. pull fetches the manifest by tag,
 * again by its digest, then every layer (layer 0 to OUTFILE, layer i to OUTFILE.i). push
 * uploads each FILE as a layer and a small config, then an OCI image manifest with the box
 * artifactType. Prints one JSON object; on failure the error object, a line on stderr and the
 * exit status of DESIGN.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "registry.h"
#include "sha256.h"
#include "banned.h"

static int print(cJSON *o)
{
	char *s = o ? cJSON_PrintUnformatted(o) : NULL;

	if (!s)
		return 8;
	printf("%s\n", s);
	free(s);
	cJSON_Delete(o);
	return 0;
}

static int fail(const struct box_err *err)
{
	fprintf(stderr, "registry-client: %s: %s\n", box_err_code_name(err->code), err->message);
	print(box_err_result(err));
	return box_err_exit_status(err->code);
}

static int parse_i64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return -1;
	*out = v;
	return 0;
}

static int fetch_blob(struct box_registry *reg, const char *name, const char *digest, int64_t size,
		      const char *path, struct box_err *err)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	int r;

	if (fd < 0)
		return box_err_sys(err, "open %s", path);
	r = box_registry_get_blob(reg, name, digest, fd, size, err);
	close(fd);
	return r;
}

static int cmd_pull(struct box_registry *reg, char **av, struct box_err *err)
{
	struct box_buf m1 = BOX_BUF_INIT(BOX_REGISTRY_MAX_MANIFEST), m2 = BOX_BUF_INIT(BOX_REGISTRY_MAX_MANIFEST);
	char d1[BOX_REGISTRY_DIGEST_MAX], d2[BOX_REGISTRY_DIGEST_MAX];
	char t1[BOX_REGISTRY_MEDIA_TYPE_MAX], t2[BOX_REGISTRY_MEDIA_TYPE_MAX];
	cJSON *man = NULL, *out = NULL;
	const cJSON *layers, *l;
	int i = 0, ret = -1;
	int64_t total = 0;

	if (box_registry_get_manifest(reg, av[1], av[2], &m1, d1, t1, err) < 0 ||
	    box_registry_get_manifest(reg, av[1], d1, &m2, d2, t2, err) < 0)
		goto out;
	if (m1.len != m2.len || memcmp(m1.data, m2.data, m1.len) != 0) {
		box_err_set(err, BOX_E_INTEGRITY, "manifest by tag and by digest differ");
		goto out;
	}
	man = box_json_parse(m1.data, m1.len, err);
	if (!man)
		goto out;
	layers = cJSON_GetObjectItemCaseSensitive(man, "layers");
	cJSON_ArrayForEach(l, layers) {
		const cJSON *dg = cJSON_GetObjectItemCaseSensitive(l, "digest");
		int64_t size;
		char path[4096];

		if (!cJSON_IsString(dg) || !box_json_int64(cJSON_GetObjectItemCaseSensitive(l, "size"), &size)) {
			box_err_set(err, BOX_E_INVALID, "bad layer descriptor");
			goto out;
		}
		if (i == 0)
			snprintf(path, sizeof(path), "%s", av[3]);
		else
			snprintf(path, sizeof(path), "%s.%d", av[3], i);
		if (fetch_blob(reg, av[1], dg->valuestring, size, path, err) < 0)
			goto out;
		total += size;
		i++;
	}
	out = cJSON_CreateObject();
	cJSON_AddTrueToObject(out, "ok");
	cJSON_AddStringToObject(out, "digest", d1);
	cJSON_AddStringToObject(out, "media_type", t1);
	cJSON_AddNumberToObject(out, "layers", i);
	box_json_add_int64(out, "bytes", total);
	ret = print(out) ? -1 : 0;
	if (ret < 0)
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
out:
	cJSON_Delete(man);
	box_buf_release(&m1);
	box_buf_release(&m2);
	return ret;
}

static cJSON *descriptor(const char *mt, const char *digest, int64_t size, const char *title)
{
	cJSON *d = cJSON_CreateObject();

	cJSON_AddStringToObject(d, "mediaType", mt);
	cJSON_AddStringToObject(d, "digest", digest);
	box_json_add_int64(d, "size", size);
	if (title) {
		cJSON *a = cJSON_AddObjectToObject(d, "annotations");

		cJSON_AddStringToObject(a, "org.opencontainers.image.title", title);
	}
	return d;
}

static int push_fd(struct box_registry *reg, const char *name, int fd, char digest[BOX_REGISTRY_DIGEST_MAX],
		   int64_t *size, struct box_err *err)
{
	char hex[BOX_SHA256_HEX_LEN + 1];

	if (box_sha256_fd(fd, hex, size, err) < 0)
		return -1;
	snprintf(digest, BOX_REGISTRY_DIGEST_MAX, "sha256:%s", hex);
	return box_registry_put_blob(reg, name, fd, digest, *size, err);
}

static int cmd_push(struct box_registry *reg, int n, char **av, struct box_err *err)
{
	char digest[BOX_REGISTRY_DIGEST_MAX], mdigest[BOX_REGISTRY_DIGEST_MAX];
	char tmpl[] = "/tmp/registry-client-XXXXXX", hex[BOX_SHA256_HEX_LEN + 1];
	cJSON *man = cJSON_CreateObject(), *layers, *cfg, *out;
	char *text = NULL, *config = NULL;
	int64_t size;
	int i, fd, ret = -1;

	cfg = cJSON_CreateObject();
	cJSON_AddStringToObject(cfg, "name", av[1]);
	cJSON_AddStringToObject(cfg, "version", av[2]);
	config = cJSON_PrintUnformatted(cfg);
	cJSON_Delete(cfg);
	fd = mkstemp(tmpl);
	if (fd < 0 || !config || box_write_all(fd, config, strlen(config)) < 0) {
		box_err_sys(err, "config blob");
		goto out;
	}
	unlink(tmpl);
	if (push_fd(reg, av[1], fd, digest, &size, err) < 0)
		goto out;
	cJSON_AddNumberToObject(man, "schemaVersion", 2);
	cJSON_AddStringToObject(man, "mediaType", BOX_MT_OCI_MANIFEST);
	cJSON_AddStringToObject(man, "artifactType", "application/vnd.box.artifact.v1");
	cJSON_AddItemToObject(man, "config", descriptor("application/vnd.box.artifact.config.v1+json",
							 digest, size, NULL));
	layers = cJSON_AddArrayToObject(man, "layers");
	for (i = 3; i < n; i++) {
		int lfd = open(av[i], O_RDONLY | O_CLOEXEC);
		const char *base = strrchr(av[i], '/');

		if (lfd < 0) {
			box_err_sys(err, "open %s", av[i]);
			goto out;
		}
		if (push_fd(reg, av[1], lfd, digest, &size, err) < 0) {
			close(lfd);
			goto out;
		}
		close(lfd);
		cJSON_AddItemToArray(layers, descriptor("application/vnd.oci.image.layer.v1.tar+gzip",
							digest, size, base ? base + 1 : av[i]));
	}
	text = cJSON_PrintUnformatted(man);
	if (!text || box_sha256_buf(text, strlen(text), hex, err) < 0)
		goto out;
	snprintf(mdigest, sizeof(mdigest), "sha256:%s", hex);
	if (box_registry_put_manifest(reg, av[1], av[2], text, strlen(text), BOX_MT_OCI_MANIFEST, err) < 0)
		goto out;
	out = cJSON_CreateObject();
	cJSON_AddTrueToObject(out, "ok");
	cJSON_AddStringToObject(out, "digest", mdigest);
	ret = print(out) ? -1 : 0;
out:
	if (fd >= 0)
		close(fd);
	free(config);
	free(text);
	cJSON_Delete(man);
	return ret;
}

int main(int argc, char **argv)
{
	struct box_registry reg;
	struct box_err err;
	int64_t timeout = 0, cap = -1, size;
	int insecure = 0, opt, rc = -1, n;
	char **av;
	cJSON *tags, *out;

	box_err_init(&err);
	while ((opt = getopt(argc, argv, "+kt:r:")) != -1) {
		if (opt == 'k')
			insecure = 1;
		else if (opt == 't' && parse_i64(optarg, &timeout) == 0)
			continue;
		else if (opt == 'r' && parse_i64(optarg, &cap) == 0)
			continue;
		else if (opt != 'k')
			goto usage;
	}
	av = argv + optind + 1;
	n = argc - optind - 1;
	if (n < 2)
		goto usage;
	if (box_registry_init(&reg, av[0], insecure, &err) < 0)
		return fail(&err);
	reg.timeout_ms = timeout;
	if (cap >= 0)
		reg.retry_after_cap_s = (int)cap;
	if (strcmp(argv[optind], "pull") == 0 && n == 4) {
		rc = cmd_pull(&reg, av, &err);
	} else if (strcmp(argv[optind], "push") == 0 && n >= 3) {
		rc = cmd_push(&reg, n, av, &err);
	} else if (strcmp(argv[optind], "tags") == 0 && n == 2) {
		rc = box_registry_tags(&reg, av[1], &tags, &err);
		if (rc == 0) {
			out = cJSON_CreateObject();
			cJSON_AddTrueToObject(out, "ok");
			cJSON_AddItemToObject(out, "tags", tags);
			print(out);
		}
	} else if (strcmp(argv[optind], "manifest") == 0 && n == 3) {
		struct box_buf b = BOX_BUF_INIT(BOX_REGISTRY_MAX_MANIFEST);
		char d[BOX_REGISTRY_DIGEST_MAX], t[BOX_REGISTRY_MEDIA_TYPE_MAX];

		rc = box_registry_get_manifest(&reg, av[1], av[2], &b, d, t, &err);
		if (rc == 0) {
			out = cJSON_CreateObject();
			cJSON_AddTrueToObject(out, "ok");
			cJSON_AddStringToObject(out, "digest", d);
			cJSON_AddStringToObject(out, "media_type", t);
			cJSON_AddStringToObject(out, "body", b.data ? b.data : "");
			print(out);
		}
		box_buf_release(&b);
	} else if (strcmp(argv[optind], "blob") == 0 && n == 5 && parse_i64(av[3], &size) == 0) {
		rc = fetch_blob(&reg, av[1], av[2], size, av[4], &err);
		if (rc == 0) {
			out = cJSON_CreateObject();
			cJSON_AddTrueToObject(out, "ok");
			print(out);
		}
	} else {
		box_registry_release(&reg);
		goto usage;
	}
	box_registry_release(&reg);
	return rc < 0 ? fail(&err) : 0;
usage:
	fprintf(stderr, "usage: registry-client [-k] [-t MS] [-r S] pull|push|tags|manifest|blob REF NAME ...\n");
	return 2;
}
