/* lib/core/describe.c: a tool definition in the forms MCP, OpenAI and Anthropic load. */
#include <stdlib.h>
#include <string.h>

#include "describe.h"
#include "json.h"
#include "tap.h"
#include "banned.h"

static cJSON *def(const char *name, const char *out_ref)
{
	char text[1024];
	struct box_err err;

	snprintf(text, sizeof(text),
		 "{\"name\":\"%s\",\"description\":\"d\",\"tools\":[],\"allowed_hosts\":[],"
		 "\"input_schema\":{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\","
		 "\"$id\":\"x\",\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\","
		 "\"maximum\":9007199254740993}}},"
		 "\"output_schema\":{\"type\":\"object\",\"properties\":{\"e\":{\"$ref\":\"%s\"}},"
		 "\"$defs\":{\"e\":{\"type\":\"string\"}}}}", name, out_ref);
	box_err_init(&err);
	return box_json_parse(text, strlen(text), &err);
}

static char *keys(const cJSON *o)
{
	static char buf[256];
	const cJSON *m;

	buf[0] = 0;
	cJSON_ArrayForEach(m, o) {
		strncat(buf, m->string, sizeof(buf) - strlen(buf) - 2);
		strncat(buf, ",", sizeof(buf) - strlen(buf) - 1);
	}
	return buf;
}

int main(void)
{
	struct box_err err;
	cJSON *d = def("box-run", "#/$defs/e"), *f;
	const cJSON *fn;

	box_err_init(&err);
	f = box_describe_format(d, "mcp", &err);
	ok(f != NULL, "mcp");
	is_str(keys(f), "name,description,inputSchema,outputSchema,", "mcp: only the MCP members");
	ok(!cJSON_GetObjectItem(cJSON_GetObjectItem(f, "inputSchema"), "$schema") &&
	   !cJSON_GetObjectItem(cJSON_GetObjectItem(f, "inputSchema"), "$id"),
	   "mcp: $schema and $id left out");
	ok(box_json_is_int_literal(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(
		cJSON_GetObjectItem(f, "inputSchema"), "properties"), "n"), "maximum")),
	   "mcp: integers keep their literal");
	cJSON_Delete(f);

	f = box_describe_format(d, "openai", &err);
	is_str(keys(f), "type,function,", "openai: {type, function}");
	fn = cJSON_GetObjectItem(f, "function");
	is_str(keys(fn), "name,description,parameters,strict,", "openai: the function's members");
	ok(cJSON_IsFalse(cJSON_GetObjectItem(fn, "strict")), "openai: strict false");
	cJSON_Delete(f);

	f = box_describe_format(d, "anthropic", &err);
	is_str(keys(f), "name,description,input_schema,", "anthropic: only its members");
	cJSON_Delete(f);

	f = box_describe_format(d, "box", &err);
	ok(f && cJSON_GetObjectItem(f, "allowed_hosts"), "box: as it is");
	cJSON_Delete(f);

	f = box_describe_format(d, "yaml", &err);
	ok(!f && err.code == BOX_E_USAGE, "an unknown format is a usage error");
	cJSON_Delete(d);

	d = def("box-run", "other.json#/$defs/e");
	box_err_init(&err);
	f = box_describe_format(d, "mcp", &err);
	ok(!f && err.code == BOX_E_INVALID, "an external $ref is refused");
	is_str(err.path, "$.output_schema.properties.e", "with its path");
	box_err_init(&err);
	f = box_describe_format(d, "anthropic", &err);
	ok(f != NULL, "anthropic has no output schema: the external $ref there does not matter");
	cJSON_Delete(f);
	cJSON_Delete(d);

	d = def("box.run", "#/$defs/e");
	f = box_describe_format(d, "mcp", &err);
	ok(f != NULL, "a dot is a valid MCP tool name");
	cJSON_Delete(f);
	box_err_init(&err);
	f = box_describe_format(d, "openai", &err);
	ok(!f && err.code == BOX_E_INVALID && strcmp(err.path, "$.name") == 0,
	   "but not an OpenAI one");
	cJSON_Delete(d);

	d = def("a23456789012345678901234567890123456789012345678901234567890123456789", "#/x");
	box_err_init(&err);
	f = box_describe_format(d, "anthropic", &err);
	ok(!f && err.code == BOX_E_INVALID, "a name past 64 characters is refused by anthropic");
	f = box_describe_format(d, "mcp", &err);
	ok(f != NULL, "and allowed by MCP (up to 128)");
	cJSON_Delete(f);
	cJSON_Delete(d);
	return done_testing();
}
