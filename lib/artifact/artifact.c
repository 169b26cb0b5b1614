#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact.h"
#include "json.h"
#include "oci.h"
#include "semver.h"
#include "banned.h"

static const struct box_field fields[] = {
	{ "name", BOX_F_STRING, 0, 255 },
	{ "version", BOX_F_STRING, 0, 128 },
	{ "kind", BOX_F_STRING, 0, 8 },
	{ "description", BOX_F_STRING, 0, 65536 },
	{ "entry", BOX_F_STRING, 0, 4095 },
	{ "tools", BOX_F_ARRAY },
	{ NULL },
};

static int bad(struct box_err *err, const char *path, const char *msg)
{
	box_err_set(err, BOX_E_INVALID, "%s: %s: %s", BOX_ARTIFACT_FILE, path + 2, msg);
	box_err_path(err, path);
	return -1;
}

static int check_entry(const char *e)
{
	const char *p = e;

	if (!*e || *e == '/')
		return -1;
	while (*p) {
		const char *s = strchr(p, '/');
		size_t n = s ? (size_t)(s - p) : strlen(p);

		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return -1;
		p += n + (s != NULL);
	}
	for (p = e; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '\\')
			return -1;
	return 0;
}

int box_artifact_parse(const char *json, size_t len, struct box_artifact *a, struct box_err *err)
{
	cJSON *o = box_json_parse(json, len, err), *t;
	struct box_semver v;
	const char *s;
	int rc = -1, i = 0;

	memset(a, 0, sizeof(*a));
	if (!o) {
		box_err_path(err, "$");
		return -1;
	}
	if (box_json_check(o, fields, err) < 0)
		goto out;
	s = box_json_get_str(o, "name", NULL);
	if (!s || box_oci_name_check(s, err) < 0) {
		bad(err, "$.name", s ? "not a valid artifact name (lowercase a-z0-9 . _ - and /)" :
		    "required");
		goto out;
	}
	snprintf(a->name, sizeof(a->name), "%s", s);
	s = box_json_get_str(o, "version", NULL);
	if (!s || box_semver_parse(s, &v, err) < 0) {
		bad(err, "$.version", s ? "not a semantic version (MAJOR.MINOR.PATCH)" : "required");
		goto out;
	}
	snprintf(a->version, sizeof(a->version), "%s", s);
	s = box_json_get_str(o, "kind", NULL);
	if (!s || (strcmp(s, "tool") && strcmp(s, "skill") && strcmp(s, "lua"))) {
		bad(err, "$.kind", s ? "must be tool, skill or lua" : "required");
		goto out;
	}
	snprintf(a->kind, sizeof(a->kind), "%s", s);
	s = box_json_get_str(o, "entry", NULL);
	if (s) {
		if (check_entry(s) < 0) {
			bad(err, "$.entry", "must be a relative path inside the artifact");
			goto out;
		}
		snprintf(a->entry, sizeof(a->entry), "%s", s);
	}
	cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(o, "tools")) {
		char path[64];

		snprintf(path, sizeof(path), "$.tools[%d]", i++);
		if (!cJSON_IsObject(t) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(t, "name"))) {
			bad(err, path, "a tool is an object with a string name");
			goto out;
		}
	}
	a->ntools = i;
	if (strcmp(a->kind, "tool") == 0 && a->ntools == 0) {
		bad(err, "$.tools", "an artifact of kind tool defines at least one tool");
		goto out;
	}
	rc = 0;
out:
	cJSON_Delete(o);
	return rc;
}

int box_home(char *out, size_t size, struct box_err *err)
{
	const char *h = getenv("BOX_HOME"), *x, *home;
	int n;

	if (h && *h)
		n = snprintf(out, size, "%s", h);
	else if ((x = getenv("XDG_DATA_HOME")) && *x)
		n = snprintf(out, size, "%s/box", x);
	else if ((home = getenv("HOME")) && *home)
		n = snprintf(out, size, "%s/.local/share/box", home);
	else
		return box_err_set(err, BOX_E_INVALID, "neither BOX_HOME nor HOME is set");
	if (n < 0 || (size_t)n >= size)
		return box_err_set(err, BOX_E_INVALID, "BOX_HOME is too long");
	return 0;
}

int box_default_registry(char *out, size_t size, struct box_err *err)
{
	const char *r = getenv("BOX_REGISTRY");
	char home[4096];
	int n;

	if (r && *r)
		n = snprintf(out, size, "%s", r);
	else if (box_home(home, sizeof(home), err) < 0)
		return -1;
	else
		n = snprintf(out, size, "oci:%s/registry", home);
	if (n < 0 || (size_t)n >= size)
		return box_err_set(err, BOX_E_INVALID, "registry reference is too long");
	return 0;
}
