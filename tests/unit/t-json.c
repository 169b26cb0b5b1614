#include <stdint.h>
#include "json.h"
#include "tap.h"

/* {"s": node} printed unformatted; free() the text. */
static char *in_object(cJSON *node)
{
	cJSON *o = cJSON_CreateObject();
	char *t;

	cJSON_AddItemToObject(o, "s", node);
	t = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return t;
}

static void test_string_n(void)
{
	static const char nul[] = "a\0b\"c\\d\x01\x1f\n\t\x7f\xc3\xa9\xe2\x82\xac/";
	static const char plain[] = "q\"b\\s\x01\x1f\r\n\t\x7f \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80/";
	cJSON *n, *back;
	struct box_err e;
	char *t;

	n = box_json_string_n(nul, sizeof(nul) - 1);
	ok(n && cJSON_IsRaw(n), "string_n gives a raw node");
	is_str(n ? n->valuestring : NULL,
	       "\"a\\u0000b\\\"c\\\\d\\u0001\\u001f\\n\\t\\u007f\xc3\xa9\xe2\x82\xac/\"",
	       "NUL, quote, backslash, control characters escaped; UTF-8 kept");
	t = in_object(n);
	is_str(t, "{\"s\":\"a\\u0000b\\\"c\\\\d\\u0001\\u001f\\n\\t\\u007f\xc3\xa9\xe2\x82\xac/\"}",
	       "printed inside an object exactly");
	back = t ? cJSON_Parse(t) : NULL;
	ok(back != NULL, "cJSON parses the printed object");
	/* cJSON ends its strings at the NUL: what comes back is the part before it */
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(back, "s")), "a",
	       "the bytes before the NUL come back");
	cJSON_Delete(back);
	box_err_init(&e);
	back = t ? box_json_parse(t, strlen(t), &e) : NULL;
	ok(back == NULL && e.code == BOX_E_INVALID, "box_json_parse refuses the \\u0000 it cannot keep");
	cJSON_Delete(back);
	cJSON_free(t);

	n = box_json_string_n(plain, sizeof(plain) - 1);
	t = in_object(n);
	back = t ? cJSON_Parse(t) : NULL;
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(back, "s")), plain,
	       "without a NUL every byte round-trips through cJSON");
	cJSON_Delete(back);
	box_err_init(&e);
	back = t ? box_json_parse(t, strlen(t), &e) : NULL;
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(back, "s")), plain,
	       "... and through box_json_parse");
	cJSON_Delete(back);
	cJSON_free(t);

	n = box_json_string_n("", 0);
	is_str(n ? n->valuestring : NULL, "\"\"", "empty string");
	cJSON_Delete(n);
	n = box_json_string_n("abcdef", 3);
	is_str(n ? n->valuestring : NULL, "\"abc\"", "only n bytes are taken");
	cJSON_Delete(n);
	n = box_json_string_n("\0", 1);
	is_str(n ? n->valuestring : NULL, "\"\\u0000\"", "a lone NUL");
	cJSON_Delete(n);
}

static void test_int_value(void)
{
	struct box_err e;
	cJSON *n, *a;

	n = cJSON_CreateNumber(42);
	is_int(box_json_int_value(n, -7), 42, "a number node");
	cJSON_Delete(n);
	n = cJSON_CreateNumber(-3);
	is_int(box_json_int_value(n, -7), -3, "a negative number node");
	cJSON_Delete(n);
	n = cJSON_CreateNumber(1.5);
	is_int(box_json_int_value(n, -7), -7, "1.5 gives def");
	cJSON_Delete(n);
	n = cJSON_CreateNumber(9007199254740994.0);
	is_int(box_json_int_value(n, -7), -7, "a double past 2^53 gives def");
	cJSON_Delete(n);
	n = box_json_int64_new(INT64_MAX);
	ok(box_json_int_value(n, -7) == INT64_MAX, "raw INT64_MAX");
	cJSON_Delete(n);
	n = box_json_int64_new(INT64_MIN);
	ok(box_json_int_value(n, -7) == INT64_MIN, "raw INT64_MIN");
	cJSON_Delete(n);
	n = box_json_int64_new(0);
	is_int(box_json_int_value(n, -7), 0, "raw 0");
	cJSON_Delete(n);

	n = box_json_parse("9007199254740993", 16, &e);
	ok(box_json_int_value(n, -7) == INT64_C(9007199254740993), "parsed 2^53+1 exact");
	box_json_exact(n);
	ok(cJSON_IsRaw(n) && box_json_int_value(n, -7) == INT64_C(9007199254740993),
	   "... and after box_json_exact");
	cJSON_Delete(n);
	n = box_json_parse("-9223372036854775808", 20, &e);
	ok(box_json_int_value(n, -7) == INT64_MIN, "parsed INT64_MIN exact");
	cJSON_Delete(n);
	n = box_json_parse("9223372036854775808", 19, &e);
	is_int(box_json_int_value(n, -7), -7, "parsed INT64_MAX+1 gives def");
	cJSON_Delete(n);
	n = box_json_parse("1.5", 3, &e);
	is_int(box_json_int_value(n, -7), -7, "parsed 1.5 gives def");
	cJSON_Delete(n);
	n = box_json_parse("\"12\"", 4, &e);
	is_int(box_json_int_value(n, -7), -7, "a string gives def");
	cJSON_Delete(n);
	n = cJSON_CreateString("12");
	is_int(box_json_int_value(n, -7), -7, "a string node gives def");
	cJSON_Delete(n);
	a = cJSON_CreateArray();
	is_int(box_json_int_value(a, -7), -7, "an array gives def");
	cJSON_Delete(a);
	n = cJSON_CreateTrue();
	is_int(box_json_int_value(n, -7), -7, "true gives def");
	cJSON_Delete(n);
	is_int(box_json_int_value(NULL, -7), -7, "NULL gives def");

	n = cJSON_CreateRaw("12abc");
	is_int(box_json_int_value(n, -7), -7, "garbage raw gives def");
	cJSON_Delete(n);
	n = cJSON_CreateRaw("");
	is_int(box_json_int_value(n, -7), -7, "empty raw gives def");
	cJSON_Delete(n);
	n = cJSON_CreateRaw("99999999999999999999");
	is_int(box_json_int_value(n, -7), -7, "out-of-range raw gives def");
	cJSON_Delete(n);
	n = cJSON_CreateRaw("1.5");
	is_int(box_json_int_value(n, -7), -7, "raw 1.5 gives def");
	cJSON_Delete(n);
	n = box_json_string_n("12", 2);
	is_int(box_json_int_value(n, -7), -7, "a raw string literal gives def");
	cJSON_Delete(n);
}

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
	{
		/* box_json_line prints exactly without changing its argument (records, results) */
		cJSON *d = cJSON_Duplicate(o, 1);
		size_t n;

		cJSON_AddItemToObject(d, "f", cJSON_Duplicate(cJSON_GetObjectItem(o, "a"), 1));
		s = box_json_line(d, &n);
		ok(s && strstr(s, "\"a\":9007199254740993") && strstr(s, "\"f\":9007199254740993") &&
		   strstr(s, "\"b\":-9223372036854775808") && strstr(s, "[1000,7]") &&
		   s[n - 1] == '\n', "box_json_line keeps integer literals exact: %s", s);
		ok(cJSON_IsNumber(cJSON_GetObjectItem(d, "a")), "  and leaves its argument as it was");
		free(s);
		cJSON_Delete(d);
	}
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
	test_string_n();
	test_int_value();
	return done_testing();
}
