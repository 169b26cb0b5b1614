#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "schema.h"
#include "banned.h"

#define PATH_MAX_LEN 1024
#define EQ_MAX_DEPTH (BOX_JSON_MAX_DEPTH * 2)

/* Internal results: VALID, INVALID (err filled, the value is wrong) or FATAL (err filled, a
 * limit or OOM: anyOf/oneOf must not read it as "this branch does not match"). */
enum { VALID = 0, INVALID = 1, FATAL = -1 };

struct ctx {
	char path[PATH_MAX_LEN];
	size_t len;
	long steps;
	int quiet;	/* inside anyOf/oneOf branches: INVALID needs no message */
	struct box_err *err;
};

static const char *const type_names[] = {
	"null", "boolean", "integer", "number", "string", "array", "object",
};

static int is_integral(const cJSON *v)
{
	if (!cJSON_IsNumber(v))
		return 0;
	if (box_json_is_int_literal(v))
		return 1;
	return isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble);
}

const char *box_schema_type_of(const cJSON *v)
{
	if (cJSON_IsNull(v))
		return "null";
	if (cJSON_IsBool(v))
		return "boolean";
	if (cJSON_IsNumber(v))
		return is_integral(v) ? "integer" : "number";
	if (cJSON_IsString(v))
		return "string";
	if (cJSON_IsArray(v))
		return "array";
	if (cJSON_IsObject(v))
		return "object";
	return "unknown";
}

static int known_type(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++)
		if (strcmp(name, type_names[i]) == 0)
			return 1;
	return 0;
}

static int type_matches(const char *name, const cJSON *v)
{
	if (strcmp(name, "number") == 0)
		return cJSON_IsNumber(v);
	return strcmp(name, box_schema_type_of(v)) == 0;
}

static int is_ident(const char *s)
{
	size_t i;

	if (!s[0] || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (i = 0; s[i]; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_'))
			return 0;
	}
	return 1;
}

/* Appends to a bounded path; an overlong path is cut, never overflowed. */
static void path_add(char *path, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void path_add(char *path, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*len >= PATH_MAX_LEN - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(path + *len, PATH_MAX_LEN - *len, fmt, ap);
	va_end(ap);
	if (n < 0)
		path[*len] = 0;
	else if ((size_t)n >= PATH_MAX_LEN - *len)
		*len = PATH_MAX_LEN - 1;
	else
		*len += (size_t)n;
}

static void path_key(char *path, size_t *len, const char *key)
{
	const unsigned char *p;

	if (is_ident(key)) {
		path_add(path, len, ".%s", key);
		return;
	}
	path_add(path, len, "[\"");
	for (p = (const unsigned char *)key; *p && *len < PATH_MAX_LEN - 1; p++) {
		if (*p == '"' || *p == '\\')
			path_add(path, len, "\\%c", *p);
		else if (*p < 0x20)
			path_add(path, len, "\\u%04x", *p);
		else
			path_add(path, len, "%c", *p);
	}
	path_add(path, len, "\"]");
}

static void path_pop(char *path, size_t *len, size_t to)
{
	*len = to;
	path[to] = 0;
}

static int fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct ctx *c, const char *fmt, ...)
{
	char what[BOX_ERR_MSG_MAX];
	va_list ap;

	if (c->quiet)
		return INVALID;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	box_err_set(c->err, BOX_E_INVALID, "at %s: %s", c->path, what);
	box_err_path(c->err, c->path);
	return INVALID;
}

static int step(struct ctx *c)
{
	if (++c->steps > BOX_SCHEMA_MAX_STEPS) {
		box_err_limit(c->err, BOX_E_LIMIT, "schema_steps", BOX_SCHEMA_MAX_STEPS, "steps",
			      "schema validation took more than %d steps", BOX_SCHEMA_MAX_STEPS);
		return FATAL;
	}
	return VALID;
}

static void fmt_num(const cJSON *v, char *buf, size_t n)
{
	int64_t i;
	double d = v->valuedouble;

	if (box_json_is_int_literal(v)) {
		snprintf(buf, n, "%s", v->valuestring);
	} else if (box_json_int64(v, &i)) {
		snprintf(buf, n, "%" PRId64, i);
	} else {
		snprintf(buf, n, "%.15g", d);
		if (strtod(buf, NULL) != d)
			snprintf(buf, n, "%.17g", d);
	}
}

/* A short JSON rendering of a value for messages; longer ones end in "...". */
static void fmt_value(const cJSON *v, char *buf, size_t n)
{
	char *s;

	if (cJSON_IsNumber(v)) {
		fmt_num(v, buf, n);
		return;
	}
	s = cJSON_PrintUnformatted(v);
	if (!s) {
		snprintf(buf, n, "(value)");
		return;
	}
	if (strlen(s) >= n && n > 4)
		snprintf(buf, n, "%.*s...", (int)(n - 4), s);
	else
		snprintf(buf, n, "%s", s);
	free(s);
}

static int cmp_num(const cJSON *a, const cJSON *b)
{
	int64_t x, y;

	if (box_json_int64(a, &x) && box_json_int64(b, &y))
		return x < y ? -1 : x > y;
	return a->valuedouble < b->valuedouble ? -1 : a->valuedouble > b->valuedouble;
}

/* Deep equality: 1 equal, 0 not, FATAL when the step or depth bound is hit. */
static int json_equal(struct ctx *c, const cJSON *a, const cJSON *b, int depth)
{
	const cJSON *x, *y;
	int na = 0, nb = 0, r;

	if (step(c) < 0)
		return FATAL;
	if (depth > EQ_MAX_DEPTH) {
		box_err_limit(c->err, BOX_E_LIMIT, "schema_depth", EQ_MAX_DEPTH, "levels",
			      "values nested deeper than %d levels", EQ_MAX_DEPTH);
		return FATAL;
	}
	if (cJSON_IsNumber(a) && cJSON_IsNumber(b))
		return cmp_num(a, b) == 0;
	if ((a->type & 0xff) != (b->type & 0xff))
		return 0;
	if (cJSON_IsString(a))
		return a->valuestring && b->valuestring && strcmp(a->valuestring, b->valuestring) == 0;
	if (cJSON_IsArray(a)) {
		for (x = a->child, y = b->child; x && y; x = x->next, y = y->next) {
			r = json_equal(c, x, y, depth + 1);
			if (r != 1)
				return r;
		}
		return !x && !y;
	}
	if (cJSON_IsObject(a)) {
		cJSON_ArrayForEach(x, a)
			na++;
		cJSON_ArrayForEach(y, b)
			nb++;
		if (na != nb)
			return 0;
		cJSON_ArrayForEach(x, a) {
			if (step(c) < 0)
				return FATAL;
			y = cJSON_GetObjectItemCaseSensitive(b, x->string);
			if (!y)
				return 0;
			r = json_equal(c, x, y, depth + 1);
			if (r != 1)
				return r;
		}
		return 1;
	}
	return 1;	/* null, true, false: the type says it all */
}

static int validate(struct ctx *c, const cJSON *s, const cJSON *v, int depth);

static int check_type(struct ctx *c, const cJSON *t, const cJSON *v)
{
	char want[256] = "";
	size_t n = 0;
	const cJSON *it;

	if (cJSON_IsString(t)) {
		if (type_matches(t->valuestring, v))
			return VALID;
		return fail(c, "expected %s, got %s", t->valuestring, box_schema_type_of(v));
	}
	if (!cJSON_IsArray(t))
		return VALID;
	cJSON_ArrayForEach(it, t) {
		if (!cJSON_IsString(it))
			continue;
		if (type_matches(it->valuestring, v))
			return VALID;
		if (n < sizeof(want)) {
			int k = snprintf(want + n, sizeof(want) - n, "%s%s", n ? " or " : "",
					 it->valuestring);

			n = k < 0 ? sizeof(want) : n + (size_t)k;
		}
	}
	if (!n)
		return VALID;
	return fail(c, "expected %s, got %s", want, box_schema_type_of(v));
}

static int check_number(struct ctx *c, const cJSON *s, const cJSON *v)
{
	static const struct {
		const char *kw, *op;
		int bad_lt, bad_eq, bad_gt;
	} bounds[] = {
		{ "minimum", ">=", 1, 0, 0 },
		{ "exclusiveMinimum", ">", 1, 1, 0 },
		{ "maximum", "<=", 0, 0, 1 },
		{ "exclusiveMaximum", "<", 0, 1, 1 },
	};
	size_t i;

	for (i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(s, bounds[i].kw);
		char bs[64], vs[64];
		int r;

		if (!cJSON_IsNumber(b))
			continue;
		r = cmp_num(v, b);
		if ((r < 0 && bounds[i].bad_lt) || (r == 0 && bounds[i].bad_eq) ||
		    (r > 0 && bounds[i].bad_gt)) {
			if (c->quiet)
				return INVALID;
			fmt_num(b, bs, sizeof(bs));
			fmt_num(v, vs, sizeof(vs));
			return fail(c, "expected %s %s, got %s", bounds[i].op, bs, vs);
		}
	}
	return VALID;
}

static int get_count(const cJSON *s, const char *kw, int64_t *out)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, kw);

	return n && box_json_int64(n, out) && *out >= 0;
}

static int64_t utf8_chars(const char *s)
{
	int64_t n = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xC0) != 0x80)
			n++;
	return n;
}

static int check_counts(struct ctx *c, const cJSON *s, int64_t have, const char *what)
{
	int64_t lim;

	if (get_count(s, what[0] == 'c' ? "minLength" : "minItems", &lim) && have < lim)
		return fail(c, "expected at least %" PRId64 " %s%s, got %" PRId64, lim, what,
			    lim == 1 ? "" : "s", have);
	if (get_count(s, what[0] == 'c' ? "maxLength" : "maxItems", &lim) && have > lim)
		return fail(c, "expected at most %" PRId64 " %s%s, got %" PRId64, lim, what,
			    lim == 1 ? "" : "s", have);
	return VALID;
}

static int check_array(struct ctx *c, const cJSON *s, const cJSON *v, int depth)
{
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items"), *it;
	int64_t n = 0;
	int r;

	cJSON_ArrayForEach(it, v)
		n++;
	r = check_counts(c, s, n, "item");
	if (r != VALID)
		return r;
	if (!items || !(cJSON_IsObject(items) || cJSON_IsBool(items)))
		return VALID;
	n = 0;
	cJSON_ArrayForEach(it, v) {
		size_t save = c->len;

		path_add(c->path, &c->len, "[%" PRId64 "]", n++);
		r = validate(c, items, it, depth + 1);
		if (r != VALID)
			return r;
		path_pop(c->path, &c->len, save);
	}
	return VALID;
}

static int check_object(struct ctx *c, const cJSON *s, const cJSON *v, int depth)
{
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
	const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
	const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
	const cJSON *it;
	int r;

	if (cJSON_IsArray(req)) {
		cJSON_ArrayForEach(it, req) {
			if (step(c) < 0)
				return FATAL;
			if (cJSON_IsString(it) &&
			    !cJSON_GetObjectItemCaseSensitive(v, it->valuestring))
				return fail(c, "missing required property \"%s\"", it->valuestring);
		}
	}
	if (!cJSON_IsObject(props))
		props = NULL;
	if (addl && !cJSON_IsObject(addl) && !cJSON_IsBool(addl))
		addl = NULL;
	cJSON_ArrayForEach(it, v) {
		const cJSON *sub;
		size_t save = c->len;

		if (step(c) < 0)
			return FATAL;
		sub = props ? cJSON_GetObjectItemCaseSensitive(props, it->string) : NULL;
		if (!sub)
			sub = addl;
		if (!sub)
			continue;
		path_key(c->path, &c->len, it->string ? it->string : "");
		if (cJSON_IsFalse(sub) && sub == addl)
			return fail(c, "property not allowed");
		r = validate(c, sub, it, depth + 1);
		if (r != VALID)
			return r;
		path_pop(c->path, &c->len, save);
	}
	return VALID;
}

/* Runs sub on v without reporting why it does not match: VALID, INVALID, or FATAL with
 * c->err set (a limit is never read as "this branch does not match"). */
static int try_branch(struct ctx *c, const cJSON *sub, const cJSON *v, int depth)
{
	size_t save = c->len;
	int r;

	c->quiet++;
	r = validate(c, sub, v, depth + 1);
	c->quiet--;
	path_pop(c->path, &c->len, save);
	return r;
}

static int check_combinators(struct ctx *c, const cJSON *s, const cJSON *v, int depth)
{
	const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
	const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
	const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
	const cJSON *it;
	int r, i, first;

	if (cJSON_IsArray(all)) {
		cJSON_ArrayForEach(it, all) {
			r = validate(c, it, v, depth + 1);
			if (r != VALID)
				return r;
		}
	}
	if (cJSON_IsArray(any) && any->child) {
		r = INVALID;
		cJSON_ArrayForEach(it, any) {
			r = try_branch(c, it, v, depth);
			if (r != INVALID)
				break;
		}
		if (r == FATAL)
			return FATAL;
		if (r == INVALID)
			return fail(c, "matches none of the anyOf schemas");
	}
	if (cJSON_IsArray(one) && one->child) {
		first = -1;
		i = 0;
		cJSON_ArrayForEach(it, one) {
			r = try_branch(c, it, v, depth);
			if (r == FATAL)
				return FATAL;
			if (r == VALID) {
				if (first >= 0)
					return fail(c, "matches oneOf schemas %d and %d, expected exactly one",
						    first, i);
				first = i;
			}
			i++;
		}
		if (first < 0)
			return fail(c, "matches none of the oneOf schemas");
	}
	return VALID;
}

static int validate(struct ctx *c, const cJSON *s, const cJSON *v, int depth)
{
	const cJSON *kw, *it;
	char vs[160], ws[160];
	int r;

	if (step(c) < 0)
		return FATAL;
	if (depth > BOX_SCHEMA_MAX_DEPTH) {
		box_err_limit(c->err, BOX_E_LIMIT, "schema_depth", BOX_SCHEMA_MAX_DEPTH, "levels",
			      "at %s: schema validation nested deeper than %d levels", c->path,
			      BOX_SCHEMA_MAX_DEPTH);
		box_err_path(c->err, c->path);
		return FATAL;
	}
	if (cJSON_IsTrue(s))
		return VALID;
	if (cJSON_IsFalse(s))
		return fail(c, "not allowed by schema false");
	if (!cJSON_IsObject(s))
		return VALID;

	kw = cJSON_GetObjectItemCaseSensitive(s, "type");
	if (kw && (r = check_type(c, kw, v)) != VALID)
		return r;

	kw = cJSON_GetObjectItemCaseSensitive(s, "const");
	if (kw) {
		r = json_equal(c, kw, v, 0);
		if (r == FATAL)
			return FATAL;
		if (!r) {
			if (c->quiet)
				return INVALID;
			fmt_value(kw, ws, sizeof(ws));
			fmt_value(v, vs, sizeof(vs));
			return fail(c, "expected %s, got %s", ws, vs);
		}
	}

	kw = cJSON_GetObjectItemCaseSensitive(s, "enum");
	if (cJSON_IsArray(kw)) {
		r = 0;
		cJSON_ArrayForEach(it, kw) {
			r = json_equal(c, it, v, 0);
			if (r != 0)
				break;
		}
		if (r == FATAL)
			return FATAL;
		if (!r) {
			if (c->quiet)
				return INVALID;
			fmt_value(kw, ws, sizeof(ws));
			fmt_value(v, vs, sizeof(vs));
			return fail(c, "expected one of %s, got %s", ws, vs);
		}
	}

	r = VALID;
	if (cJSON_IsNumber(v))
		r = check_number(c, s, v);
	else if (cJSON_IsString(v))
		r = check_counts(c, s, utf8_chars(v->valuestring ? v->valuestring : ""),
				 "character");
	else if (cJSON_IsArray(v))
		r = check_array(c, s, v, depth);
	else if (cJSON_IsObject(v))
		r = check_object(c, s, v, depth);
	if (r != VALID)
		return r;
	return check_combinators(c, s, v, depth);
}

int box_schema_validate(const cJSON *schema, const cJSON *value, struct box_err *err)
{
	struct ctx *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	c->err = err;
	c->path[0] = '$';
	c->len = 1;
	r = value ? validate(c, schema, value, 0) : fail(c, "no value");
	free(c);
	return r == VALID ? 0 : -1;
}

/* ---------------------------------------------------------------- schema checks */

struct sctx {
	char path[PATH_MAX_LEN];
	size_t len;
	struct box_err *err;
};

static int sfail(struct sctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sfail(struct sctx *c, const char *fmt, ...)
{
	char what[BOX_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	box_err_set(c->err, BOX_E_INVALID, "at %s: %s", c->path, what);
	box_err_path(c->err, c->path);
	return -1;
}

static const char *const unsupported[] = {
	"$ref", "$dynamicRef", "not", "if", "then", "else", "pattern", "patternProperties",
	"dependentRequired", "dependentSchemas", "prefixItems", "contains", "minContains",
	"maxContains", "uniqueItems", "multipleOf", "propertyNames", "minProperties",
	"maxProperties", "unevaluatedProperties", "unevaluatedItems",
};

static int check_schema(struct sctx *c, const cJSON *s, int depth);

static int check_sub(struct sctx *c, const cJSON *s, const char *key, int depth)
{
	size_t save = c->len;
	int r;

	path_key(c->path, &c->len, key);
	r = check_schema(c, s, depth + 1);
	path_pop(c->path, &c->len, save);
	return r;
}

static int check_kw_type(struct sctx *c, const cJSON *t)
{
	const cJSON *it, *jt;

	if (cJSON_IsString(t)) {
		if (!known_type(t->valuestring))
			return sfail(c, "unknown type \"%s\"", t->valuestring);
		return 0;
	}
	if (!cJSON_IsArray(t) || !t->child)
		return sfail(c, "expected a type name or a non-empty array of type names");
	cJSON_ArrayForEach(it, t) {
		if (!cJSON_IsString(it))
			return sfail(c, "expected a type name or a non-empty array of type names");
		if (!known_type(it->valuestring))
			return sfail(c, "unknown type \"%s\"", it->valuestring);
		for (jt = t->child; jt != it; jt = jt->next)
			if (strcmp(jt->valuestring, it->valuestring) == 0)
				return sfail(c, "duplicate type \"%s\"", it->valuestring);
	}
	return 0;
}

static int check_kw(struct sctx *c, const cJSON *kw, int depth)
{
	const char *k = kw->string;
	const cJSON *it;
	int64_t n;
	size_t i;
	int idx;

	for (i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
		if (strcmp(k, unsupported[i]) == 0)
			return sfail(c, "unsupported keyword");
	if (strcmp(k, "type") == 0)
		return check_kw_type(c, kw);
	if (strcmp(k, "enum") == 0) {
		if (!cJSON_IsArray(kw))
			return sfail(c, "expected an array");
		return 0;
	}
	if (strcmp(k, "anyOf") == 0 || strcmp(k, "oneOf") == 0 || strcmp(k, "allOf") == 0) {
		if (!cJSON_IsArray(kw) || !kw->child)
			return sfail(c, "expected a non-empty array of schemas");
		idx = 0;
		cJSON_ArrayForEach(it, kw) {
			size_t save = c->len;
			int r;

			path_add(c->path, &c->len, "[%d]", idx++);
			r = check_schema(c, it, depth + 1);
			path_pop(c->path, &c->len, save);
			if (r < 0)
				return r;
		}
		return 0;
	}
	if (strcmp(k, "minimum") == 0 || strcmp(k, "maximum") == 0 ||
	    strcmp(k, "exclusiveMinimum") == 0 || strcmp(k, "exclusiveMaximum") == 0) {
		if (!cJSON_IsNumber(kw) || !isfinite(kw->valuedouble))
			return sfail(c, "expected a number");
		return 0;
	}
	if (strcmp(k, "minLength") == 0 || strcmp(k, "maxLength") == 0 ||
	    strcmp(k, "minItems") == 0 || strcmp(k, "maxItems") == 0) {
		if (!box_json_int64(kw, &n) || n < 0)
			return sfail(c, "expected a non-negative integer");
		return 0;
	}
	if (strcmp(k, "items") == 0 || strcmp(k, "additionalProperties") == 0)
		return check_schema(c, kw, depth + 1);
	if (strcmp(k, "properties") == 0) {
		if (!cJSON_IsObject(kw))
			return sfail(c, "expected an object of schemas");
		cJSON_ArrayForEach(it, kw)
			if (check_sub(c, it, it->string ? it->string : "", depth) < 0)
				return -1;
		return 0;
	}
	if (strcmp(k, "required") == 0) {
		if (!cJSON_IsArray(kw))
			return sfail(c, "expected an array of strings");
		idx = 0;
		cJSON_ArrayForEach(it, kw) {
			if (!cJSON_IsString(it)) {
				path_add(c->path, &c->len, "[%d]", idx);
				return sfail(c, "expected a string");
			}
			idx++;
		}
		return 0;
	}
	return 0;
}

static int check_schema(struct sctx *c, const cJSON *s, int depth)
{
	const cJSON *kw;

	if (depth > BOX_SCHEMA_MAX_DEPTH) {
		box_err_limit(c->err, BOX_E_LIMIT, "schema_depth", BOX_SCHEMA_MAX_DEPTH, "levels",
			      "at %s: schema nested deeper than %d levels", c->path,
			      BOX_SCHEMA_MAX_DEPTH);
		box_err_path(c->err, c->path);
		return -1;
	}
	if (cJSON_IsBool(s))
		return 0;
	if (!cJSON_IsObject(s))
		return sfail(c, "schema must be an object or a boolean");
	cJSON_ArrayForEach(kw, s) {
		size_t save = c->len;
		int r;

		if (!kw->string)
			continue;
		path_key(c->path, &c->len, kw->string);
		r = check_kw(c, kw, depth);
		path_pop(c->path, &c->len, save);
		if (r < 0)
			return -1;
	}
	return 0;
}

int box_schema_check(const cJSON *schema, struct box_err *err)
{
	struct sctx *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	c->err = err;
	c->path[0] = '$';
	c->len = 1;
	r = check_schema(c, schema, 0);
	free(c);
	return r;
}
