#include <string.h>

#include "describe.h"
#include "buf.h"
#include "banned.h"

#define REF_DEPTH_MAX 128

static int name_ok(const char *name, size_t max, int dots)
{
	size_t i, n = name ? strlen(name) : 0;

	if (n == 0 || n > max)
		return 0;
	for (i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || (dots && c == '.')))
			return 0;
	}
	return 1;
}

/* Every "$ref" under s is local. */
static int refs_local(const cJSON *s, int depth, char *path, size_t n, struct box_err *err)
{
	const cJSON *m;

	if (depth > REF_DEPTH_MAX)
		return box_err_set(err, BOX_E_INVALID, "schema nested too deeply");
	cJSON_ArrayForEach(m, s) {
		if (m->string && strcmp(m->string, "$ref") == 0) {
			const char *ref = cJSON_GetStringValue(m);

			if (!ref || ref[0] != '#') {
				box_err_set(err, BOX_E_INVALID, "schema at %s refers outside itself: %.200s",
					    path, ref ? ref : "(not a string)");
				box_err_path(err, path);
				return -1;
			}
		}
		if (cJSON_IsObject(m) || cJSON_IsArray(m)) {
			size_t len = strlen(path);

			if (m->string)
				box_fmt(path + len, n - len, ".%s", m->string);
			if (refs_local(m, depth + 1, path, n, err) < 0)
				return -1;
			path[len] = 0;
		}
	}
	return 0;
}

static cJSON *schema(const cJSON *tooldef, const char *key, struct box_err *err)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(tooldef, key);
	const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s, "type"));
	char path[BOX_ERR_FIELD_MAX];
	cJSON *c;

	box_fmt(path, sizeof(path), "$.%s", key);
	if (!cJSON_IsObject(s) || !type || strcmp(type, "object") != 0) {
		box_err_set(err, BOX_E_INVALID, "%s is not a schema of type object", key);
		box_err_path(err, path);
		return NULL;
	}
	if (refs_local(s, 0, path, sizeof(path), err) < 0)
		return NULL;
	c = cJSON_Duplicate(s, 1);
	if (!c) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(c, "$schema");
	cJSON_DeleteItemFromObjectCaseSensitive(c, "$id");
	return c;
}

cJSON *box_describe_format(const cJSON *tooldef, const char *format, struct box_err *err)
{
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(tooldef, "name"));
	const char *desc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(tooldef,
										  "description"));
	int mcp = format && strcmp(format, "mcp") == 0;
	int openai = format && strcmp(format, "openai") == 0;
	int anthropic = format && strcmp(format, "anthropic") == 0;
	cJSON *o, *f, *in, *out = NULL;

	if (format && strcmp(format, "box") == 0) {
		o = cJSON_Duplicate(tooldef, 1);
		if (!o)
			box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return o;
	}
	if (!mcp && !openai && !anthropic) {
		box_err_set(err, BOX_E_USAGE, "unknown format '%.64s': box, mcp, openai or anthropic",
			    format ? format : "");
		box_err_path(err, "--format");
		return NULL;
	}
	if (!name_ok(name, mcp ? 128 : 64, mcp)) {
		box_err_set(err, BOX_E_INVALID, "tool name '%.64s' is not allowed by %s", name ? name : "",
			    format);
		box_err_path(err, "$.name");
		return NULL;
	}
	in = schema(tooldef, "input_schema", err);
	if (!in)
		return NULL;
	if (mcp && cJSON_GetObjectItemCaseSensitive(tooldef, "output_schema") &&
	    !(out = schema(tooldef, "output_schema", err))) {
		cJSON_Delete(in);
		return NULL;
	}
	o = cJSON_CreateObject();
	f = openai ? cJSON_CreateObject() : o;
	if (!o || !f) {
		cJSON_Delete(o);
		cJSON_Delete(in);
		cJSON_Delete(out);
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	if (openai) {
		cJSON_AddStringToObject(o, "type", "function");
		cJSON_AddItemToObject(o, "function", f);
	}
	cJSON_AddStringToObject(f, "name", name);
	cJSON_AddStringToObject(f, "description", desc ? desc : "");
	cJSON_AddItemToObject(f, mcp ? "inputSchema" : openai ? "parameters" : "input_schema", in);
	if (out)
		cJSON_AddItemToObject(f, "outputSchema", out);
	if (openai)
		cJSON_AddFalseToObject(f, "strict");
	return o;
}
