#include <string.h>

#include "json.h"
#include "schema.h"
#include "tap.h"
#include "banned.h"

static cJSON *parse(const char *text)
{
	struct box_err err;
	cJSON *v;

	box_err_init(&err);
	v = box_json_parse(text, strlen(text), &err);
	if (!v)
		printf("# cannot parse %s: %s\n", text, err.message);
	return v;
}

static void valid(const char *schema, const char *value)
{
	cJSON *s = parse(schema), *v = parse(value);
	struct box_err err;
	int r;

	box_err_init(&err);
	r = box_schema_check(s, &err);
	is_int(r, 0, "schema %s is well-formed", schema);
	r = box_schema_validate(s, v, &err);
	is_int(r, 0, "%s valid against %s", value, schema);
	if (r)
		printf("#   message: %s\n", err.message);
	cJSON_Delete(s);
	cJSON_Delete(v);
}

static void invalid(const char *schema, const char *value, const char *msg, const char *path)
{
	cJSON *s = parse(schema), *v = parse(value);
	struct box_err err;

	box_err_init(&err);
	is_int(box_schema_check(s, &err), 0, "schema %s is well-formed", schema);
	is_int(box_schema_validate(s, v, &err), -1, "%s invalid against %s", value, schema);
	is_int(err.code, BOX_E_INVALID, "  code invalid_request");
	is_str(err.message, msg, "  message");
	is_str(err.path, path, "  path");
	cJSON_Delete(s);
	cJSON_Delete(v);
}

static void bad_schema(const char *schema, const char *msg, const char *path)
{
	cJSON *s = parse(schema);
	struct box_err err;

	box_err_init(&err);
	is_int(box_schema_check(s, &err), -1, "schema %s refused", schema);
	is_int(err.code, BOX_E_INVALID, "  code invalid_request");
	is_str(err.message, msg, "  message");
	is_str(err.path, path, "  path");
	cJSON_Delete(s);
}

static void test_type(void)
{
	valid("{\"type\":\"null\"}", "null");
	valid("{\"type\":\"boolean\"}", "false");
	valid("{\"type\":\"string\"}", "\"x\"");
	valid("{\"type\":\"number\"}", "1.5");
	valid("{\"type\":\"number\"}", "7");
	valid("{\"type\":\"integer\"}", "7");
	valid("{\"type\":\"integer\"}", "-3.0");
	valid("{\"type\":\"integer\"}", "9223372036854775807");
	valid("{\"type\":\"integer\"}", "99999999999999999999");
	valid("{\"type\":\"array\"}", "[]");
	valid("{\"type\":\"object\"}", "{}");
	invalid("{\"type\":\"null\"}", "0", "at $: expected null, got integer", "$");
	invalid("{\"type\":\"boolean\"}", "\"true\"", "at $: expected boolean, got string", "$");
	invalid("{\"type\":\"string\"}", "1", "at $: expected string, got integer", "$");
	invalid("{\"type\":\"number\"}", "\"1\"", "at $: expected number, got string", "$");
	invalid("{\"type\":\"integer\"}", "1.5", "at $: expected integer, got number", "$");
	invalid("{\"type\":\"integer\"}", "1e400", "at $: expected integer, got number", "$");
	invalid("{\"type\":\"array\"}", "{}", "at $: expected array, got object", "$");
	invalid("{\"type\":\"object\"}", "[]", "at $: expected object, got array", "$");
	invalid("{\"type\":\"object\"}", "null", "at $: expected object, got null", "$");

	valid("{\"type\":[\"string\",\"null\"]}", "null");
	valid("{\"type\":[\"string\",\"null\"]}", "\"s\"");
	valid("{\"type\":[\"integer\",\"boolean\"]}", "true");
	invalid("{\"type\":[\"string\",\"null\"]}", "5", "at $: expected string or null, got integer",
		"$");
	invalid("{\"type\":[\"integer\",\"boolean\",\"null\"]}", "0.5",
		"at $: expected integer or boolean or null, got number", "$");
	is_str(box_schema_type_of(NULL), "unknown", "type_of(NULL)");
}

static void test_enum_const(void)
{
	valid("{\"enum\":[\"a\",\"b\"]}", "\"b\"");
	valid("{\"enum\":[1,[2],{\"x\":null}]}", "{\"x\":null}");
	valid("{\"enum\":[1,2]}", "2.0");
	invalid("{\"enum\":[\"a\",\"b\"]}", "\"c\"", "at $: expected one of [\"a\",\"b\"], got \"c\"",
		"$");
	invalid("{\"enum\":[1,2]}", "\"1\"", "at $: expected one of [1,2], got \"1\"", "$");
	invalid("{\"enum\":[true]}", "false", "at $: expected one of [true], got false", "$");
	invalid("{\"enum\":[null]}", "0", "at $: expected one of [null], got 0", "$");
	valid("{\"const\":{\"a\":[1,2],\"b\":\"x\"}}", "{\"b\":\"x\",\"a\":[1,2]}");
	valid("{\"const\":9007199254740993}", "9007199254740993");
	invalid("{\"const\":{\"a\":[1,2]}}", "{\"a\":[1,3]}",
		"at $: expected {\"a\":[1,2]}, got {\"a\":[1,3]}", "$");
	invalid("{\"const\":{\"a\":1}}", "{\"a\":1,\"b\":2}",
		"at $: expected {\"a\":1}, got {\"a\":1,\"b\":2}", "$");
	invalid("{\"const\":[1,2]}", "[1,2,3]", "at $: expected [1,2], got [1,2,3]", "$");
	invalid("{\"const\":[1,2]}", "[1]", "at $: expected [1,2], got [1]", "$");
	invalid("{\"const\":{\"a\":1}}", "{\"b\":1}", "at $: expected {\"a\":1}, got {\"b\":1}", "$");
	invalid("{\"const\":\"x\"}", "\"y\"", "at $: expected \"x\", got \"y\"", "$");
	invalid("{\"const\":9007199254740993}", "9007199254740992",
		"at $: expected 9007199254740993, got 9007199254740992", "$");
	invalid("{\"const\":0.1}", "0.2", "at $: expected 0.1, got 0.2", "$");
	invalid("{\"const\":null}", "false", "at $: expected null, got false", "$");
}

static void test_combinators(void)
{
	const char *any = "{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}";
	const char *one = "{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}";

	valid(any, "\"s\"");
	valid(any, "3");
	invalid(any, "true", "at $: matches none of the anyOf schemas", "$");
	invalid("{\"properties\":{\"a\":{\"anyOf\":[{\"minimum\":3},{\"const\":0}]}}}", "{\"a\":1}",
		"at $.a: matches none of the anyOf schemas", "$.a");
	valid(one, "1.5");
	invalid(one, "5", "at $: matches oneOf schemas 0 and 1, expected exactly one", "$");
	invalid(one, "\"x\"", "at $: matches none of the oneOf schemas", "$");
	valid("{\"allOf\":[{\"type\":\"integer\"},{\"minimum\":2}]}", "3");
	invalid("{\"allOf\":[{\"type\":\"integer\"},{\"minimum\":2}]}", "1",
		"at $: expected >= 2, got 1", "$");
	/* an error inside a failed branch leaves no trace on the outer path */
	invalid("{\"type\":\"object\",\"properties\":{\"x\":{\"anyOf\":[{\"type\":\"array\","
		"\"items\":{\"type\":\"string\"}},{\"type\":\"null\"}]},\"y\":{\"type\":\"string\"}}}",
		"{\"x\":null,\"y\":1}", "at $.y: expected string, got integer", "$.y");
}

static void test_numbers(void)
{
	valid("{\"minimum\":5}", "5");
	valid("{\"minimum\":5}", "\"strings are not numbers\"");
	invalid("{\"minimum\":5}", "4", "at $: expected >= 5, got 4", "$");
	invalid("{\"minimum\":5}", "4.5", "at $: expected >= 5, got 4.5", "$");
	valid("{\"maximum\":5}", "5");
	invalid("{\"maximum\":5}", "6", "at $: expected <= 5, got 6", "$");
	invalid("{\"maximum\":-1.5}", "-1", "at $: expected <= -1.5, got -1", "$");
	valid("{\"exclusiveMinimum\":5}", "5.5");
	invalid("{\"exclusiveMinimum\":5}", "5", "at $: expected > 5, got 5", "$");
	invalid("{\"exclusiveMinimum\":5}", "5.0", "at $: expected > 5, got 5", "$");
	valid("{\"exclusiveMaximum\":5}", "4.99");
	invalid("{\"exclusiveMaximum\":5}", "5", "at $: expected < 5, got 5", "$");
	invalid("{\"exclusiveMaximum\":0}", "7", "at $: expected < 0, got 7", "$");
	/* exact int64 comparison beyond 2^53, where doubles would say equal */
	invalid("{\"minimum\":9007199254740993}", "9007199254740992",
		"at $: expected >= 9007199254740993, got 9007199254740992", "$");
	valid("{\"maximum\":9223372036854775807}", "9223372036854775807");
	valid("{\"minimum\":1,\"maximum\":1}", "1");
}

static void test_lengths(void)
{
	valid("{\"maxLength\":1}", "\"\u00e9\"");
	valid("{\"maxLength\":1}", "\"\\u00e9\"");
	valid("{\"maxLength\":2}", "\"\\ud83d\\ude00\\u00e9\"");
	valid("{\"minLength\":2,\"maxLength\":2}", "\"h\u00e9\"");
	invalid("{\"maxLength\":1}", "\"\u00e9\u00e9\"", "at $: expected at most 1 character, got 2",
		"$");
	invalid("{\"minLength\":3}", "\"\u00e9\u00e9\"", "at $: expected at least 3 characters, got 2",
		"$");
	invalid("{\"minLength\":1}", "\"\"", "at $: expected at least 1 character, got 0", "$");
	valid("{\"minLength\":5}", "12");
	valid("{\"minItems\":1,\"maxItems\":2}", "[1,2]");
	invalid("{\"minItems\":1}", "[]", "at $: expected at least 1 item, got 0", "$");
	invalid("{\"maxItems\":2}", "[1,2,3]", "at $: expected at most 2 items, got 3", "$");
	valid("{\"maxItems\":0}", "{\"a\":1}");
	invalid("{\"maxLength\":0}", "\"x\"", "at $: expected at most 0 characters, got 1", "$");
	invalid("{\"minItems\":3}", "[[],{}]", "at $: expected at least 3 items, got 2", "$");
	{
		cJSON *s = parse("{}");
		struct box_err err;

		box_err_init(&err);
		is_int(box_schema_validate(s, NULL, &err), -1, "NULL value refused");
		is_str(err.message, "at $: no value", "  message");
		cJSON_Delete(s);
	}
}

static void test_containers(void)
{
	const char *list = "{\"type\":\"object\",\"properties\":{\"items\":{\"type\":\"array\","
			   "\"items\":{\"type\":\"integer\"}}}}";
	const char *nested = "{\"properties\":{\"a\":{\"properties\":{\"b\":{\"type\":\"string\"}}},"
			     "\"list\":{\"items\":{\"minimum\":0}},"
			     "\"a b\":{\"type\":\"null\"},\"q\\\"\\\\\":{\"type\":\"null\"},"
			     "\"_x9\":{\"type\":\"null\"},\"9x\":{\"type\":\"null\"}}}";

	valid(list, "{\"items\":[1,2,3]}");
	valid(list, "{}");
	invalid(list, "{\"items\":[1,2,\"x\"]}", "at $.items[2]: expected integer, got string",
		"$.items[2]");
	invalid("{\"items\":{\"type\":\"string\"}}", "[\"a\",1]", "at $[1]: expected string, got integer",
		"$[1]");
	valid("{\"items\":false}", "[]");
	invalid("{\"items\":false}", "[1]", "at $[0]: not allowed by schema false", "$[0]");
	valid(nested, "{\"a\":{\"b\":\"s\"},\"list\":[0,1]}");
	invalid(nested, "{\"a\":{\"b\":1}}", "at $.a.b: expected string, got integer", "$.a.b");
	invalid(nested, "{\"list\":[0,1,2,-3]}", "at $.list[3]: expected >= 0, got -3", "$.list[3]");
	invalid(nested, "{\"a b\":1}", "at $[\"a b\"]: expected null, got integer", "$[\"a b\"]");
	invalid(nested, "{\"q\\\"\\\\\":1}", "at $[\"q\\\"\\\\\"]: expected null, got integer",
		"$[\"q\\\"\\\\\"]");
	invalid(nested, "{\"_x9\":1}", "at $._x9: expected null, got integer", "$._x9");
	invalid(nested, "{\"9x\":1}", "at $[\"9x\"]: expected null, got integer", "$[\"9x\"]");
	invalid("{\"properties\":{\"a\":{\"type\":\"null\"}}}", "{\"a\\n\":1,\"a\":2}",
		"at $.a: expected null, got integer", "$.a");

	valid("{\"required\":[\"name\"]}", "{\"name\":null}");
	valid("{\"required\":[\"name\"]}", "[]");
	invalid("{\"required\":[\"id\",\"name\"]}", "{\"id\":1}",
		"at $: missing required property \"name\"", "$");
	invalid("{\"properties\":{\"o\":{\"required\":[\"k\"]}}}", "{\"o\":{}}",
		"at $.o: missing required property \"k\"", "$.o");

	valid("{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1}");
	invalid("{\"properties\":{\"a\":{}},\"additionalProperties\":false}", "{\"a\":1,\"extra\":2}",
		"at $.extra: property not allowed", "$.extra");
	valid("{\"additionalProperties\":true}", "{\"a\":1}");
	valid("{\"additionalProperties\":{\"type\":\"integer\"}}", "{\"a\":1,\"b\":2}");
	invalid("{\"properties\":{\"s\":{\"type\":\"string\"}},"
		"\"additionalProperties\":{\"type\":\"integer\"}}", "{\"s\":\"x\",\"b\":\"2\"}",
		"at $.b: expected integer, got string", "$.b");
	invalid("false", "1", "at $: not allowed by schema false", "$");
	valid("true", "{\"anything\":[1]}");
	valid("{}", "null");
	valid("{\"title\":\"t\",\"description\":\"d\",\"default\":1,\"x-vendor\":{}}", "2");
}

static cJSON *tower(const char *kw, int levels, cJSON **own)
{
	cJSON *s = cJSON_CreateObject();
	int i;

	cJSON_AddStringToObject(s, "type", "string");
	own[0] = s;
	for (i = 1; i <= levels; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON *a = cJSON_AddArrayToObject(o, kw);

		cJSON_AddItemReferenceToArray(a, own[i - 1]);
		cJSON_AddItemReferenceToArray(a, own[i - 1]);
		cJSON_AddItemReferenceToArray(a, own[i - 1]);
		own[i] = o;
	}
	return own[levels];
}

static void test_limits(void)
{
	cJSON *own[41], *s, *v;
	struct box_err err;
	char text[1024];
	size_t o = 0;
	int i;

	/* 3^40 paths through the anyOf tower: the step cap must stop it */
	s = tower("anyOf", 40, own);
	v = cJSON_CreateNumber(1);
	box_err_init(&err);
	is_int(box_schema_validate(s, v, &err), -1, "pathological anyOf stopped");
	is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
	is_str(err.limit, "schema_steps", "  limit schema_steps");
	is_int(err.configured, BOX_SCHEMA_MAX_STEPS, "  configured is the step cap");
	cJSON_Delete(v);
	v = cJSON_CreateString("ok");
	box_err_init(&err);
	is_int(box_schema_validate(s, v, &err), 0, "a matching value takes the first branches");
	cJSON_Delete(v);
	for (i = 40; i >= 0; i--)
		cJSON_Delete(own[i]);

	s = tower("oneOf", 40, own);
	v = cJSON_CreateNumber(1);
	box_err_init(&err);
	is_int(box_schema_validate(s, v, &err), -1, "pathological oneOf stopped");
	is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
	is_str(err.limit, "schema_steps", "  limit schema_steps");
	cJSON_Delete(v);
	for (i = 40; i >= 0; i--)
		cJSON_Delete(own[i]);

	/* 3^10 = 59049 paths stay under the cap and report normally */
	s = tower("anyOf", 10, own);
	v = cJSON_CreateNumber(1);
	box_err_init(&err);
	is_int(box_schema_validate(s, v, &err), -1, "small anyOf tower invalid");
	is_str(err.message, "at $: matches none of the anyOf schemas", "  not a limit");
	cJSON_Delete(v);
	for (i = 10; i >= 0; i--)
		cJSON_Delete(own[i]);

	/* depth: 70 nested arrays against 70 nested items schemas */
	for (i = 0; i < 70; i++)
		o += (size_t)snprintf(text + o, sizeof(text) - o, "[");
	for (i = 0; i < 70; i++)
		o += (size_t)snprintf(text + o, sizeof(text) - o, "]");
	v = parse(text);
	s = cJSON_CreateObject();
	{
		cJSON *cur = s;

		for (i = 0; i < 70; i++) {
			cJSON *n = cJSON_CreateObject();

			cJSON_AddItemToObject(cur, "items", n);
			cur = n;
		}
	}
	box_err_init(&err);
	is_int(box_schema_validate(s, v, &err), -1, "deep nesting refused");
	is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
	is_str(err.limit, "schema_depth", "  limit schema_depth");
	{
		cJSON *w = cJSON_CreateObject();

		cJSON_AddItemReferenceToArray(cJSON_AddArrayToObject(w, "anyOf"), s);
		box_err_init(&err);
		is_int(box_schema_validate(w, v, &err), -1, "deep nesting inside anyOf refused");
		is_str(err.limit, "schema_depth", "  a limit, not a branch mismatch");
		cJSON_Delete(w);
	}
	box_err_init(&err);
	is_int(box_schema_check(s, &err), -1, "deep schema refused by check");
	is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
	is_str(err.limit, "schema_depth", "  limit schema_depth");
	cJSON_Delete(s);
	cJSON_Delete(v);
}

static void test_check(void)
{
	valid("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":[\"integer\",\"null\"],"
	      "\"minimum\":0,\"maximum\":9}},\"required\":[\"n\"],\"additionalProperties\":false}",
	      "{\"n\":1}");
	bad_schema("5", "at $: schema must be an object or a boolean", "$");
	bad_schema("{\"type\":\"foo\"}", "at $.type: unknown type \"foo\"", "$.type");
	bad_schema("{\"properties\":{\"n\":{\"type\":\"str\"}}}",
		   "at $.properties.n.type: unknown type \"str\"", "$.properties.n.type");
	bad_schema("{\"type\":5}", "at $.type: expected a type name or a non-empty array of type names",
		   "$.type");
	bad_schema("{\"type\":[]}", "at $.type: expected a type name or a non-empty array of type names",
		   "$.type");
	bad_schema("{\"type\":[\"string\",1]}",
		   "at $.type: expected a type name or a non-empty array of type names", "$.type");
	bad_schema("{\"type\":[\"string\",\"nul\"]}", "at $.type: unknown type \"nul\"", "$.type");
	bad_schema("{\"type\":[\"string\",\"string\"]}", "at $.type: duplicate type \"string\"",
		   "$.type");
	bad_schema("{\"enum\":\"a\"}", "at $.enum: expected an array", "$.enum");
	bad_schema("{\"anyOf\":[]}", "at $.anyOf: expected a non-empty array of schemas", "$.anyOf");
	bad_schema("{\"oneOf\":{}}", "at $.oneOf: expected a non-empty array of schemas", "$.oneOf");
	bad_schema("{\"allOf\":[{},7]}", "at $.allOf[1]: schema must be an object or a boolean",
		   "$.allOf[1]");
	bad_schema("{\"anyOf\":[{},{\"type\":\"x\"}]}", "at $.anyOf[1].type: unknown type \"x\"",
		   "$.anyOf[1].type");
	bad_schema("{\"minimum\":\"5\"}", "at $.minimum: expected a number", "$.minimum");
	bad_schema("{\"maximum\":null}", "at $.maximum: expected a number", "$.maximum");
	bad_schema("{\"exclusiveMinimum\":true}", "at $.exclusiveMinimum: expected a number",
		   "$.exclusiveMinimum");
	bad_schema("{\"exclusiveMaximum\":[]}", "at $.exclusiveMaximum: expected a number",
		   "$.exclusiveMaximum");
	bad_schema("{\"minLength\":-1}", "at $.minLength: expected a non-negative integer",
		   "$.minLength");
	bad_schema("{\"maxLength\":1.5}", "at $.maxLength: expected a non-negative integer",
		   "$.maxLength");
	bad_schema("{\"minItems\":\"1\"}", "at $.minItems: expected a non-negative integer",
		   "$.minItems");
	bad_schema("{\"maxItems\":-3}", "at $.maxItems: expected a non-negative integer",
		   "$.maxItems");
	bad_schema("{\"items\":5}", "at $.items: schema must be an object or a boolean", "$.items");
	bad_schema("{\"items\":[{}]}", "at $.items: schema must be an object or a boolean", "$.items");
	bad_schema("{\"additionalProperties\":\"no\"}",
		   "at $.additionalProperties: schema must be an object or a boolean",
		   "$.additionalProperties");
	bad_schema("{\"properties\":[]}", "at $.properties: expected an object of schemas",
		   "$.properties");
	bad_schema("{\"properties\":{\"a b\":3}}",
		   "at $.properties[\"a b\"]: schema must be an object or a boolean",
		   "$.properties[\"a b\"]");
	bad_schema("{\"required\":\"a\"}", "at $.required: expected an array of strings", "$.required");
	bad_schema("{\"required\":[\"a\",1]}", "at $.required[1]: expected a string", "$.required[1]");
	bad_schema("{\"$ref\":\"#/x\"}", "at $[\"$ref\"]: $ref \"#/x\" names no schema",
		   "$[\"$ref\"]");
	bad_schema("{\"properties\":{\"p\":{\"format\":\"uri\"}}}",
		   "at $.properties.p.format: unsupported keyword", "$.properties.p.format");
}

static void test_new_keywords(void)
{
	invalid("{\"multipleOf\":1.5}", "4", "at $: expected a multiple of 1.5, got 4", "$");
	invalid("{\"pattern\":\"^a+$\"}", "\"ab\"", "at $: does not match pattern \"^a+$\"", "$");
	invalid("{\"minProperties\":2}", "{\"a\":1}", "at $: expected at least 2 properties, got 1",
		"$");
	invalid("{\"maxProperties\":1}", "{\"a\":1,\"b\":2}",
		"at $: expected at most 1 property, got 2", "$");
	invalid("{\"uniqueItems\":true}", "[1,2,1.0]",
		"at $: items 0 and 2 are equal, expected unique items", "$");
	invalid("{\"contains\":{\"type\":\"string\"}}", "[1]",
		"at $: no item matches the contains schema", "$");
	invalid("{\"contains\":{\"type\":\"string\"},\"minContains\":2}", "[\"a\"]",
		"at $: expected at least 2 items matching contains, got 1", "$");
	invalid("{\"contains\":{\"type\":\"string\"},\"maxContains\":1}", "[\"a\",\"b\"]",
		"at $: expected at most 1 item matching contains, got 2", "$");
	invalid("{\"dependentRequired\":{\"a\":[\"b\"]}}", "{\"a\":1}",
		"at $: missing property \"b\", required by \"a\"", "$");
	invalid("{\"propertyNames\":{\"maxLength\":2}}", "{\"abc\":1}",
		"at $.abc: property name not allowed by propertyNames", "$.abc");
	invalid("{\"properties\":{\"a\":{}},\"unevaluatedProperties\":false}", "{\"a\":1,\"b\":2}",
		"at $.b: property not allowed by unevaluatedProperties", "$.b");
	invalid("{\"prefixItems\":[{}],\"unevaluatedItems\":false}", "[1,2]",
		"at $[1]: item not allowed by unevaluatedItems", "$[1]");
	invalid("{\"not\":{\"type\":\"string\"}}", "\"s\"", "at $: matches the not schema", "$");
	invalid("{\"if\":{\"type\":\"string\"},\"then\":{\"minLength\":2},\"else\":{\"minimum\":0}}",
		"-1", "at $: expected >= 0, got -1", "$");
	invalid("{\"$defs\":{\"p\":{\"type\":\"integer\"}},\"properties\":{\"n\":{\"$ref\":\"#/$defs/p\"}}}",
		"{\"n\":\"x\"}", "at $.n: expected integer, got string", "$.n");
	invalid("{\"patternProperties\":{\"^x_\":{\"type\":\"integer\"}}}", "{\"x_a\":\"s\"}",
		"at $.x_a: expected integer, got string", "$.x_a");
	valid("{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"items\":[{\"type\":\"string\"}],"
	      "\"additionalItems\":false}", "[\"a\"]");
	invalid("{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"items\":[{\"type\":\"string\"}],"
		"\"additionalItems\":false}", "[\"a\",1]", "at $[1]: not allowed by schema false", "$[1]");
	valid("{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"definitions\":{\"s\":{\"type\":"
	      "\"string\"}},\"$ref\":\"#/definitions/s\",\"type\":\"integer\"}", "\"siblings ignored\"");
}

static void test_refusals(void)
{
	/* keywords box does not implement, and the other dialect's: refused, never skipped */
	bad_schema("{\"format\":\"email\"}", "at $.format: unsupported keyword", "$.format");
	bad_schema("{\"$dynamicRef\":\"#x\"}", "at $[\"$dynamicRef\"]: unsupported keyword",
		   "$[\"$dynamicRef\"]");
	bad_schema("{\"dependencies\":{\"a\":[\"b\"]}}",
		   "at $.dependencies: not a draft 2020-12 keyword (use dependentRequired or "
		   "dependentSchemas)", "$.dependencies");
	bad_schema("{\"items\":{},\"additionalItems\":false}",
		   "at $.additionalItems: not a draft 2020-12 keyword (use prefixItems and items)",
		   "$.additionalItems");
	bad_schema("{\"items\":[{}]}", "at $.items: schema must be an object or a boolean", "$.items");
	bad_schema("{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"prefixItems\":[{}]}",
		   "at $.prefixItems: not a draft-07 keyword", "$.prefixItems");
	bad_schema("{\"$schema\":\"http://json-schema.org/draft-04/schema#\"}",
		   "at $[\"$schema\"]: unsupported dialect (box reads draft 2020-12 and draft-07)",
		   "$[\"$schema\"]");
	bad_schema("{\"properties\":{\"a\":{\"$schema\":\"http://json-schema.org/draft-07/schema#\"}}}",
		   "at $.properties.a[\"$schema\"]: a subschema in another dialect is not supported",
		   "$.properties.a[\"$schema\"]");
	bad_schema("{\"$ref\":\"https://example.com/s.json\"}",
		   "at $[\"$ref\"]: remote $ref \"https://example.com/s.json\" not supported (only "
		   "references into the same schema)", "$[\"$ref\"]");
	bad_schema("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},"
		   "\"$ref\":\"#/$defs/a\"}",
		   "at $[\"$defs\"].a[\"$ref\"]: $ref \"#/$defs/b\" leads to a cycle of references",
		   "$[\"$defs\"].a[\"$ref\"]");
	bad_schema("{\"$ref\":\"#\"}", "at $[\"$ref\"]: $ref \"#\" leads to a cycle of references",
		   "$[\"$ref\"]");
	bad_schema("{\"$defs\":{\"a\":{\"type\":\"string\"}},\"$ref\":\"#/$defs/a/type\"}",
		   "at $[\"$ref\"]: $ref \"#/$defs/a/type\" names no schema", "$[\"$ref\"]");
	bad_schema("{\"pattern\":\"(a\"}",
		   "at $.pattern: invalid pattern: missing closing parenthesis at offset 2", "$.pattern");
	bad_schema("{\"patternProperties\":{\"[\":{}}}",
		   "at $.patternProperties[\"[\"]: invalid pattern: missing terminating ] for character "
		   "class at offset 1", "$.patternProperties[\"[\"]");
	bad_schema("{\"multipleOf\":0}", "at $.multipleOf: expected a number greater than 0",
		   "$.multipleOf");
	bad_schema("{\"dependentRequired\":{\"a\":[\"b\",\"b\"]}}",
		   "at $.dependentRequired.a[1]: duplicate \"b\"", "$.dependentRequired.a[1]");
	bad_schema("{\"$defs\":{\"a\":{\"$id\":\"urn:x\"},\"b\":{\"$id\":\"urn:x\"}}}",
		   "at $[\"$defs\"].a: duplicate schema identifier \"urn:x\"", "$[\"$defs\"].a");
}

static void test_ref_and_pattern_limits(void)
{
	cJSON *s, *v;
	struct box_err err;

	/* a loop through an applicator never ends by itself: the depth bound stops it */
	s = parse("{\"$defs\":{\"a\":{\"allOf\":[{\"$ref\":\"#/$defs/a\"}]}},\"$ref\":\"#/$defs/a\"}");
	v = parse("1");
	box_err_init(&err);
	is_int(box_schema_check(s, &err), 0, "an allOf loop is well-formed");
	box_err_init(&err);
	is_int(box_schema_validate(s, v, &err), -1, "an allOf loop is stopped");
	is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
	is_str(err.limit, "schema_depth", "  limit schema_depth");
	cJSON_Delete(s);
	cJSON_Delete(v);

	/* catastrophic backtracking hits the PCRE2 match limit, not the wall clock */
	s = parse("{\"pattern\":\"^(a+)+$\"}");
	v = parse("\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\"");
	box_err_init(&err);
	is_int(box_schema_validate(s, v, &err), -1, "a pathological pattern is stopped");
	is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
	is_str(err.limit, "pattern_match", "  limit pattern_match");
	cJSON_Delete(s);
	cJSON_Delete(v);

	/* an unchecked schema with a refused keyword is refused by validate too */
	s = parse("{\"format\":\"email\"}");
	v = parse("\"x\"");
	box_err_init(&err);
	is_int(box_schema_validate(s, v, &err), -1, "validate refuses format");
	is_str(err.message, "schema keyword \"format\": unsupported keyword", "  message");
	cJSON_Delete(s);
	cJSON_Delete(v);
}

int main(void)
{
	test_type();
	test_enum_const();
	test_combinators();
	test_numbers();
	test_lengths();
	test_containers();
	test_limits();
	test_check();
	test_new_keywords();
	test_refusals();
	test_ref_and_pattern_limits();
	return done_testing();
}
