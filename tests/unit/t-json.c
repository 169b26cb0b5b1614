#include <stdint.h>
#include "json.h"
#include "tap.h"

static const struct box_field fields[] = {
	{ "name", BOX_F_STRING, 0, 5, 0, "", NULL },
	{ "n", BOX_F_INT, 1, 10, 0, "", NULL },
	{ "flag", BOX_F_BOOL, 0, 0, 0, "", NULL },
	{ "list", BOX_F_STRINGS, 0, 2, 0, "", NULL },
	{ NULL, 0, 0, 0, 0, NULL, NULL },
};

static void check(const char *text, int want, const char *path, const char *name)
{
	struct box_err e;
	cJSON *o = box_json_parse(text, strlen(text), &e);
	int r = o ? box_json_check(o, fields, &e) : -1;

	is_int(r, want, "%s", name);
	if (want < 0) {
		is_int(e.code, BOX_E_INVALID, "%s: invalid_request", name);
		if (path)
			is_str(e.path, path, "%s: path", name);
	}
	cJSON_Delete(o);
}

int main(void)
{
	struct box_err e;
	cJSON *o;
	int64_t v;
	char *s;

	{
		const char *t = "{\"a\": 9007199254740993, \"b\": -9223372036854775808, \"c\": 1.5,"
				" \"d\": \"x1\", \"e\": [1e3, 7]}";

		o = box_json_parse(t, strlen(t), &e);
	}
	ok(o != NULL, "parse");
	ok(box_json_int64(cJSON_GetObjectItem(o, "a"), &v) && v == INT64_C(9007199254740993),
	   "2^53+1 stays exact");
	ok(box_json_int64(cJSON_GetObjectItem(o, "b"), &v) && v == INT64_MIN, "INT64_MIN exact");
	ok(!box_json_int64(cJSON_GetObjectItem(o, "c"), &v), "1.5 is not an integer");
	ok(!box_json_is_int_literal(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "e"), 0)),
	   "1e3 is not an integer literal");
	ok(box_json_is_int_literal(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "e"), 1)),
	   "7 is one");
	box_json_exact(o);
	s = cJSON_PrintUnformatted(o);
	ok(strstr(s, "9007199254740993") != NULL, "printed exactly after box_json_exact: %s", s);
	cJSON_free(s);
	cJSON_Delete(o);

	ok(box_json_parse("{\"a\":1} x", 9, &e) == NULL && e.code == BOX_E_INVALID,
	   "trailing garbage refused");
	ok(box_json_parse("", 0, &e) == NULL, "empty input refused");
	ok(box_json_parse("{\"a\":", 5, &e) == NULL, "truncated JSON refused");
	ok(box_json_parse("\"a\\u0000b\"", 10, &e) == NULL, "\\u0000 refused rather than cut");
	{
		char deep[600];
		size_t i;

		for (i = 0; i < 200; i++)
			deep[i] = '[';
		for (; i < 400; i++)
			deep[i] = ']';
		ok(box_json_parse(deep, 400, &e) == NULL, "nesting past the cap refused");
	}

	check("{\"name\":\"ab\",\"n\":3,\"flag\":true,\"list\":[\"x\"]}", 0, NULL, "valid request");
	check("{\"name\":\"ab\",\"zzz\":1}", -1, "$.zzz", "unknown field named");
	check("{\"n\":\"3\"}", -1, "$.n", "string for an integer");
	check("{\"n\":3.5}", -1, "$.n", "float for an integer");
	check("{\"n\":11}", -1, "$.n", "above maximum");
	check("{\"n\":0}", -1, "$.n", "below minimum");
	check("{\"name\":\"toolong\"}", -1, "$.name", "string past its length cap");
	check("{\"list\":[\"a\",1]}", -1, "$.list[1]", "array item of the wrong type");
	check("{\"list\":[\"a\",\"b\",\"c\"]}", -1, "$.list", "too many items");
	check("{\"n\":1,\"n\":2}", -1, "$.n", "duplicate member");
	check("[1]", -1, "$", "not an object");
	check("{\"flag\":null}", 0, NULL, "null means absent");

	o = cJSON_CreateObject();
	box_json_add_int64(o, "x", INT64_MAX);
	s = cJSON_PrintUnformatted(o);
	is_str(s, "{\"x\":9223372036854775807}", "int64 member prints exactly");
	cJSON_free(s);
	cJSON_Delete(o);
	return done_testing();
}
