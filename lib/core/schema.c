#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "json.h"
#include "schema.h"
#include "banned.h"

#define PATH_MAX_LEN 1024
#define EQ_MAX_DEPTH (BOX_JSON_MAX_DEPTH * 2)
#define URI_MAX 1024
#define RX_CACHE 32

/* Internal results: VALID, INVALID (err filled, the value is wrong) or FATAL (err filled, a
 * limit or OOM: anyOf/oneOf must not read it as "this branch does not match"). */
enum { VALID = 0, INVALID = 1, FATAL = -1 };

enum { D2020 = BOX_SCHEMA_2020_12, D7 = BOX_SCHEMA_DRAFT7 };

/* A schema resource: the absolute URI of a $id ("" for a root without one), or of an anchor
 * ("URI#name"), and the schema object it names. */
struct res {
	char *uri;
	const cJSON *node;
};

struct ctx {
	char path[PATH_MAX_LEN];
	size_t len;
	long steps;
	int quiet;	/* inside anyOf/oneOf branches: INVALID needs no message */
	struct box_err *err;
	int dialect;
	const cJSON *root;
	struct res *res;
	size_t nres;
	int indexed;	/* res built: on the first $id or $ref met */
	pcre2_match_context *mctx;
	pcre2_match_data *md;
	struct {
		const char *pat;
		pcre2_code *code;
	} rx[RX_CACHE];
	size_t nrx;
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

/* ---------------------------------------------------------------- keywords and dialects */

/* Keywords of the JSON Schema vocabularies that box does not implement: refused, never
 * ignored, since a validator that guards a tool must not skip a constraint. */
static const char *const refused_always[] = {
	"$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "$vocabulary",
	"format",
};

/* Keywords of one dialect only, refused in the other. */
static const char *const only_2020[] = {
	"prefixItems", "dependentRequired", "dependentSchemas", "unevaluatedProperties",
	"unevaluatedItems", "minContains", "maxContains", "$anchor", "contentSchema",
};
static const char *const only_d7[] = { "dependencies", "additionalItems" };

static int in_list(const char *k, const char *const *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(k, list[i]) == 0)
			return 1;
	return 0;
}

#define IN_LIST(k, l) in_list((k), (l), sizeof(l) / sizeof((l)[0]))

/* NULL when keyword k may appear in the dialect, else why not. */
static const char *kw_refused(int dialect, const char *k)
{
	if (IN_LIST(k, refused_always))
		return "unsupported keyword";
	if (dialect == D7 && IN_LIST(k, only_2020))
		return "not a draft-07 keyword";
	if (dialect == D2020 && IN_LIST(k, only_d7))
		return strcmp(k, "dependencies") == 0 ?
		       "not a draft 2020-12 keyword (use dependentRequired or dependentSchemas)" :
		       "not a draft 2020-12 keyword (use prefixItems and items)";
	return NULL;
}

static const cJSON *kw(const cJSON *s, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(s, name);
}

static int is_schema(const cJSON *s)
{
	return cJSON_IsObject(s) || cJSON_IsBool(s);
}

/* The dialect a "$schema" value names: D2020, D7 or 0. */
static int dialect_of(const char *uri)
{
	static const struct {
		const char *uri;
		int d;
	} known[] = {
		{ "https://json-schema.org/draft/2020-12/schema", D2020 },
		{ "https://json-schema.org/draft/2020-12/schema#", D2020 },
		{ "http://json-schema.org/draft-07/schema", D7 },
		{ "http://json-schema.org/draft-07/schema#", D7 },
		{ "https://json-schema.org/draft-07/schema", D7 },
		{ "https://json-schema.org/draft-07/schema#", D7 },
	};
	size_t i;

	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(uri, known[i].uri) == 0)
			return known[i].d;
	return 0;
}

/* ---------------------------------------------------------------- URIs and resources */

static int put(char *out, size_t n, const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);

	if (alen + blen >= n)
		return -1;
	memmove(out, a, alen);
	memcpy(out + alen, b, blen + 1);
	return 0;
}

static size_t scheme_len(const char *u)
{
	size_t i = 0;

	if (!((u[0] >= 'a' && u[0] <= 'z') || (u[0] >= 'A' && u[0] <= 'Z')))
		return 0;
	while (u[i] && u[i] != ':' && u[i] != '/' && u[i] != '?' && u[i] != '#')
		i++;
	return u[i] == ':' ? i : 0;
}

/* Resolves reference ref against the absolute base (no fragment; "" for none), RFC 3986
 * section 5.2 without dot-segment removal: 0, or -1 when the result exceeds n bytes. */
static int uri_resolve(const char *base, const char *ref, char *out, size_t n)
{
	size_t sl = scheme_len(base), end;
	const char *slash;

	if (scheme_len(ref) || !base[0])
		return put(out, n, "", 0, ref);
	if (ref[0] == '#' || !ref[0])
		return put(out, n, base, strlen(base), ref);
	if (ref[0] == '/' && ref[1] == '/')
		return put(out, n, base, sl + 1, ref);
	if (ref[0] == '/') {
		end = sl + 1;
		if (base[end] == '/' && base[end + 1] == '/') {
			end += 2;
			while (base[end] && base[end] != '/')
				end++;
		}
		return put(out, n, base, end, ref);
	}
	slash = strrchr(base, '/');
	if (slash && (size_t)(slash - base) > sl + 2)
		return put(out, n, base, (size_t)(slash - base) + 1, ref);
	if (base[sl + 1] == '/' && base[sl + 2] == '/') {	/* "http://host": path "/" */
		if (put(out, n, base, strlen(base), "/") < 0)
			return -1;
		return put(out, n, out, strlen(out), ref);
	}
	end = strlen(base);	/* "urn:x": merge after the last ':' */
	while (end > sl + 1 && base[end - 1] != ':')
		end--;
	return put(out, n, base, end, ref);
}

static int oom(struct ctx *c)
{
	box_err_set(c->err, BOX_E_INTERNAL, "out of memory");
	return FATAL;
}

static int res_add(struct ctx *c, const char *uri, const cJSON *node)
{
	struct res *r;
	size_t i;

	for (i = 0; i < c->nres; i++)
		if (strcmp(c->res[i].uri, uri) == 0)
			return c->res[i].node == node ? VALID :
			       (box_err_set(c->err, BOX_E_INVALID, "at %s: duplicate schema identifier \"%s\"",
					    c->path, uri), box_err_path(c->err, c->path), FATAL);
	if (c->nres >= BOX_SCHEMA_MAX_IDS) {
		box_err_limit(c->err, BOX_E_LIMIT, "schema_ids", BOX_SCHEMA_MAX_IDS, "identifiers",
			      "schema has more than %d $id and anchors", BOX_SCHEMA_MAX_IDS);
		return FATAL;
	}
	if (c->nres % 16 == 0) {
		r = realloc(c->res, (c->nres + 16) * sizeof(*r));
		if (!r)
			return oom(c);
		c->res = r;
	}
	c->res[c->nres].uri = strdup(uri);
	if (!c->res[c->nres].uri)
		return oom(c);
	c->res[c->nres++].node = node;
	return VALID;
}

/* The URI a schema object's own $id gave it, or NULL. */
static const char *res_base_of(const struct ctx *c, const cJSON *node)
{
	size_t i;

	for (i = 0; i < c->nres; i++)
		if (c->res[i].node == node && !strchr(c->res[i].uri, '#'))
			return c->res[i].uri;
	return NULL;
}

static const cJSON *res_find(const struct ctx *c, const char *uri, const char **base)
{
	size_t i;

	for (i = 0; i < c->nres; i++)
		if (strcmp(c->res[i].uri, uri) == 0) {
			*base = c->res[i].uri;
			return c->res[i].node;
		}
	return NULL;
}

/* Calls fn on every subschema of schema object s (in the positions the dialect defines). */
static int each_sub(struct ctx *c, const cJSON *s, int (*fn)(struct ctx *, const cJSON *, void *),
		    void *arg)
{
	static const char *const maps[] = {
		"properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
		"dependencies",
	};
	static const char *const ones[] = {
		"additionalProperties", "additionalItems", "items", "contains", "not", "if", "then",
		"else", "propertyNames", "unevaluatedProperties", "unevaluatedItems", "contentSchema",
	};
	static const char *const lists[] = { "allOf", "anyOf", "oneOf", "prefixItems", "items" };
	const cJSON *k, *it;
	size_t i;
	int r;

	for (i = 0; i < sizeof(maps) / sizeof(maps[0]); i++)
		if (cJSON_IsObject(k = kw(s, maps[i])))
			cJSON_ArrayForEach(it, k)
				if (is_schema(it) && (r = fn(c, it, arg)) != VALID)
					return r;
	for (i = 0; i < sizeof(ones) / sizeof(ones[0]); i++)
		if (is_schema(k = kw(s, ones[i])) && (r = fn(c, k, arg)) != VALID)
			return r;
	for (i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		if (cJSON_IsArray(k = kw(s, lists[i])))
			cJSON_ArrayForEach(it, k)
				if (is_schema(it) && (r = fn(c, it, arg)) != VALID)
					return r;
	return VALID;
}

struct walk {
	const char *base;
	int depth;
};

static int index_walk(struct ctx *c, const cJSON *s, void *arg)
{
	const struct walk *w = arg;
	struct walk sub = { w->base, w->depth + 1 };
	const cJSON *id, *anchor;
	char uri[URI_MAX], *hash;
	int r;

	if (!cJSON_IsObject(s) || w->depth > BOX_SCHEMA_MAX_DEPTH)
		return VALID;
	if (step(c) < 0)	/* a schema built in memory may share nodes: bound the walk */
		return FATAL;
	id = kw(s, "$id");
	/* draft-07: a $ref's siblings are ignored, its $id included */
	if (cJSON_IsString(id) && !(c->dialect == D7 && kw(s, "$ref"))) {
		if (uri_resolve(w->base, id->valuestring, uri, sizeof(uri)) < 0)
			goto toolong;
		hash = strchr(uri, '#');
		if (hash && c->dialect == D7 && id->valuestring[0] == '#') {
			if ((r = res_add(c, uri, s)) != VALID)	/* a plain-name fragment */
				return r;
		} else {
			if (hash)
				*hash = 0;
			if ((r = res_add(c, uri, s)) != VALID)
				return r;
			sub.base = res_base_of(c, s);
		}
	}
	anchor = kw(s, "$anchor");
	if (cJSON_IsString(anchor) && c->dialect == D2020) {
		if (snprintf(uri, sizeof(uri), "%s#%s", sub.base, anchor->valuestring) >=
		    (int)sizeof(uri))
			goto toolong;
		if ((r = res_add(c, uri, s)) != VALID)
			return r;
	}
	return each_sub(c, s, index_walk, &sub);
toolong:
	box_err_set(c->err, BOX_E_INVALID, "schema identifier longer than %d bytes", URI_MAX - 1);
	return FATAL;
}

static int index_build(struct ctx *c)
{
	struct walk w = { "", 0 };
	const cJSON *root = c->root;
	const cJSON *id = cJSON_IsObject(root) ? kw(root, "$id") : NULL;
	int r;

	if (c->indexed)
		return VALID;
	c->indexed = 1;
	if (!cJSON_IsString(id) || (c->dialect == D7 && id->valuestring[0] == '#') ||
	    (c->dialect == D7 && kw(root, "$ref")))
		if ((r = res_add(c, "", root)) != VALID)
			return r;
	return index_walk(c, root, &w);
}

static void percent_decode(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '%' && s[1] && s[2] && strchr("0123456789abcdefABCDEF", s[1]) &&
		    strchr("0123456789abcdefABCDEF", s[2])) {
			char hex[3] = { s[1], s[2], 0 };

			*o++ = (char)strtol(hex, NULL, 16);
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

/* Follows JSON pointer ptr ("/a/b~1c/0") from node: the target or NULL; *base follows the
 * $id of the schemas passed. */
static const cJSON *pointer(const struct ctx *c, const cJSON *node, char *ptr, const char **base)
{
	char *tok = ptr, *next, *o, *i;
	const char *b;

	while (node && tok && *tok == '/') {
		tok++;
		next = strchr(tok, '/');
		if (next)
			*next = 0;
		for (i = o = tok; *i; i++) {
			if (i[0] == '~' && (i[1] == '0' || i[1] == '1'))
				*o++ = *++i == '0' ? '~' : '/';
			else
				*o++ = *i;
		}
		*o = 0;
		if (cJSON_IsArray(node)) {
			char *e;
			long idx;

			errno = 0;
			idx = strtol(tok, &e, 10);
			if (!*tok || *e || errno || idx < 0 || (tok[0] == '0' && tok[1]))
				return NULL;
			node = cJSON_GetArrayItem(node, (int)(idx > INT32_MAX ? -1 : idx));
		} else if (cJSON_IsObject(node)) {
			node = kw(node, tok);
		} else {
			return NULL;
		}
		if (node && (b = res_base_of(c, node)))
			*base = b;
		if (next)
			*next = '/';
		tok = next;
	}
	return node;
}

/* The schema that ref names, read from the schema at base: VALID with *target and *tbase,
 * or FATAL with c->err ("remote" when it names no schema of this document). */
static int resolve_ref(struct ctx *c, const char *base, const char *ref, const cJSON **target,
		       const char **tbase)
{
	char uri[URI_MAX], *frag;
	const cJSON *node;

	if (index_build(c) != VALID)
		return FATAL;
	if (uri_resolve(base, ref, uri, sizeof(uri)) < 0) {
		box_err_set(c->err, BOX_E_INVALID, "at %s: $ref longer than %d bytes", c->path,
			    URI_MAX - 1);
		goto out;
	}
	node = res_find(c, uri, tbase);	/* an anchor */
	if (!node) {
		frag = strchr(uri, '#');
		if (frag)
			*frag++ = 0;
		node = res_find(c, uri, tbase);
		if (!node) {
			box_err_set(c->err, BOX_E_INVALID,
				    "at %s: remote $ref \"%s\" not supported (only references into "
				    "the same schema)", c->path, ref);
			goto out;
		}
		if (frag && *frag) {
			percent_decode(frag);
			node = frag[0] == '/' ? pointer(c, node, frag, tbase) : NULL;
		}
	}
	if (!is_schema(node)) {
		box_err_set(c->err, BOX_E_INVALID, "at %s: $ref \"%s\" names no schema", c->path, ref);
		goto out;
	}
	*target = node;
	return VALID;
out:
	box_err_path(c->err, c->path);
	return FATAL;
}

/* ---------------------------------------------------------------- patterns */

static int rx_get(struct ctx *c, const char *pat, pcre2_code **out)
{
	pcre2_code *code;
	PCRE2_UCHAR msg[120];
	PCRE2_SIZE off;
	size_t i;
	int e;

	for (i = 0; i < c->nrx; i++)
		if (c->rx[i].pat == pat) {
			*out = c->rx[i].code;
			return VALID;
		}
	if (strlen(pat) > BOX_SCHEMA_MAX_PATTERN) {
		box_err_limit(c->err, BOX_E_LIMIT, "pattern_bytes", BOX_SCHEMA_MAX_PATTERN, "bytes",
			      "at %s: pattern longer than %d bytes", c->path, BOX_SCHEMA_MAX_PATTERN);
		box_err_path(c->err, c->path);
		return FATAL;
	}
	/* ECMA-262 flavour: UTF-8 code points, \uHHHH escapes, ASCII \d \w \s classes */
	code = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
			     PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
			     &e, &off, NULL);
	if (!code) {
		pcre2_get_error_message(e, msg, sizeof(msg));
		box_err_set(c->err, BOX_E_INVALID, "at %s: invalid pattern: %s at offset %zu",
			    c->path, (const char *)msg, (size_t)off);
		box_err_path(c->err, c->path);
		return FATAL;
	}
	if (c->nrx == RX_CACHE) {	/* keep the first ones; free the last to make room */
		pcre2_code_free(c->rx[RX_CACHE - 1].code);
		c->nrx--;
	}
	c->rx[c->nrx].pat = pat;
	c->rx[c->nrx++].code = code;
	*out = code;
	return VALID;
}

/* 1 when subject matches pat anywhere, 0 when not, FATAL (limit, bad pattern, OOM). */
static int rx_match(struct ctx *c, const char *pat, const char *subject)
{
	pcre2_code *code;
	int r;

	if (rx_get(c, pat, &code) != VALID)
		return FATAL;
	if (!c->mctx) {
		c->mctx = pcre2_match_context_create(NULL);
		c->md = pcre2_match_data_create(1, NULL);
		if (!c->mctx || !c->md)
			return oom(c);
		pcre2_set_match_limit(c->mctx, BOX_SCHEMA_MATCH_LIMIT);
		pcre2_set_depth_limit(c->mctx, BOX_SCHEMA_MATCH_LIMIT / 10);
		pcre2_set_heap_limit(c->mctx, 8192);
	}
	r = pcre2_match(code, (PCRE2_SPTR)subject, strlen(subject), 0, 0, c->md, c->mctx);
	if (r >= 0)
		return 1;
	if (r == PCRE2_ERROR_NOMATCH)
		return 0;
	if (r == PCRE2_ERROR_MATCHLIMIT || r == PCRE2_ERROR_DEPTHLIMIT ||
	    r == PCRE2_ERROR_HEAPLIMIT) {
		box_err_limit(c->err, BOX_E_LIMIT, "pattern_match", BOX_SCHEMA_MATCH_LIMIT, "steps",
			      "at %s: pattern \"%.60s\" took more than its match limit", c->path, pat);
		box_err_path(c->err, c->path);
		return FATAL;
	}
	if (r == PCRE2_ERROR_NOMEMORY)
		return oom(c);
	box_err_set(c->err, BOX_E_INTERNAL, "at %s: pattern match failed (%d)", c->path, r);
	return FATAL;
}

/* ---------------------------------------------------------------- validation */

/* Which members of the instance (object members, array items, in order) some keyword of the
 * schema being applied, or of its in-place subschemas, evaluated (unevaluated*). */
struct eval {
	unsigned char *bit;
	size_t n;
};

static int eval_init(struct ctx *c, struct eval *e, const cJSON *v)
{
	const cJSON *it;

	e->n = 0;
	cJSON_ArrayForEach(it, v)
		e->n++;
	e->bit = calloc(e->n ? e->n : 1, 1);
	return e->bit ? VALID : oom(c);
}

static void eval_merge(struct eval *to, const struct eval *from)
{
	size_t i;

	if (!to || !from || !from->bit)
		return;
	for (i = 0; i < to->n && i < from->n; i++)
		to->bit[i] |= from->bit[i];
}

static void eval_mark(struct eval *e, size_t i)
{
	if (e && i < e->n)
		e->bit[i] = 1;
}

static int validate(struct ctx *c, const cJSON *s, const cJSON *v, int depth, const char *base,
		    struct eval *out);

/* Runs sub on v without reporting why it does not match: VALID, INVALID, or FATAL with
 * c->err set (a limit is never read as "this branch does not match"). */
static int try_branch(struct ctx *c, const cJSON *sub, const cJSON *v, int depth,
		      const char *base, struct eval *ev)
{
	size_t save = c->len;
	int r;

	c->quiet++;
	r = validate(c, sub, v, depth + 1, base, ev);
	c->quiet--;
	path_pop(c->path, &c->len, save);
	return r;
}

/* try_branch that collects the branch's annotations in a scratch map, merged into ev only
 * when the branch matches. */
static int try_collect(struct ctx *c, const cJSON *sub, const cJSON *v, int depth,
		       const char *base, struct eval *ev)
{
	struct eval tmp = { NULL, 0 };
	int r;

	if (!ev)
		return try_branch(c, sub, v, depth, base, NULL);
	if (eval_init(c, &tmp, v) != VALID)
		return FATAL;
	r = try_branch(c, sub, v, depth, base, &tmp);
	if (r == VALID)
		eval_merge(ev, &tmp);
	free(tmp.bit);
	return r;
}

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

static int is_multiple(const cJSON *v, const cJSON *m)
{
	int64_t a, b;
	double q;

	if (box_json_int64(v, &a) && box_json_int64(m, &b) && b > 0)
		return a % b == 0;
	q = v->valuedouble / m->valuedouble;
	if (!isfinite(q))
		return 0;
	q -= floor(q);
	return q < 1e-9 || q > 1 - 1e-9;
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
	const cJSON *m;
	char bs[64], vs[64];
	size_t i;

	for (i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(s, bounds[i].kw);
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
	m = kw(s, "multipleOf");
	if (cJSON_IsNumber(m) && m->valuedouble > 0 && !is_multiple(v, m)) {
		if (c->quiet)
			return INVALID;
		fmt_num(m, bs, sizeof(bs));
		fmt_num(v, vs, sizeof(vs));
		return fail(c, "expected a multiple of %s, got %s", bs, vs);
	}
	return VALID;
}

static int get_count(const cJSON *s, const char *k, int64_t *out)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, k);

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

/* minLength/maxLength (what "character"), minItems/maxItems ("item"),
 * minProperties/maxProperties ("property"). */
static int check_counts(struct ctx *c, const cJSON *s, int64_t have, const char *what)
{
	const char *lo = what[0] == 'c' ? "minLength" : what[0] == 'i' ? "minItems" : "minProperties";
	const char *hi = what[0] == 'c' ? "maxLength" : what[0] == 'i' ? "maxItems" : "maxProperties";
	int plural_y = what[0] == 'p';
	int64_t lim;

	if (get_count(s, lo, &lim) && have < lim)
		return fail(c, "expected at least %" PRId64 " %s%s, got %" PRId64, lim,
			    plural_y && lim != 1 ? "propertie" : what, lim == 1 ? "" : "s", have);
	if (get_count(s, hi, &lim) && have > lim)
		return fail(c, "expected at most %" PRId64 " %s%s, got %" PRId64, lim,
			    plural_y && lim != 1 ? "propertie" : what, lim == 1 ? "" : "s", have);
	return VALID;
}

static int check_string(struct ctx *c, const cJSON *s, const cJSON *v)
{
	const char *str = v->valuestring ? v->valuestring : "";
	const cJSON *p = kw(s, "pattern");
	int r;

	r = check_counts(c, s, utf8_chars(str), "character");
	if (r != VALID || !cJSON_IsString(p))
		return r;
	r = rx_match(c, p->valuestring, str);
	if (r == FATAL)
		return FATAL;
	if (!r)
		return fail(c, "does not match pattern \"%.200s\"", p->valuestring);
	return VALID;
}

static int check_items(struct ctx *c, const cJSON *s, const cJSON *v, int depth,
		       const char *base, struct eval *ev)
{
	const cJSON *items = kw(s, "items"), *prefix, *rest, *p, *it, *sub;
	size_t i = 0, save;
	int r;

	if (c->dialect == D2020) {
		prefix = kw(s, "prefixItems");
		rest = items;
	} else if (cJSON_IsArray(items)) {
		prefix = items;
		rest = kw(s, "additionalItems");
	} else {
		prefix = NULL;
		rest = items;
	}
	if (!cJSON_IsArray(prefix))
		prefix = NULL;
	if (!is_schema(rest))
		rest = NULL;
	p = prefix ? prefix->child : NULL;
	cJSON_ArrayForEach(it, v) {
		if (p) {
			sub = p;
			p = p->next;
		} else {
			sub = rest;
		}
		if (sub) {
			save = c->len;
			path_add(c->path, &c->len, "[%zu]", i);
			r = validate(c, sub, it, depth + 1, base, NULL);
			if (r != VALID)
				return r;
			path_pop(c->path, &c->len, save);
			eval_mark(ev, i);
		}
		i++;
	}
	return VALID;
}

static int check_contains(struct ctx *c, const cJSON *s, const cJSON *v, int depth,
			  const char *base, struct eval *ev)
{
	const cJSON *cont = kw(s, "contains"), *it;
	int64_t min = 1, max = -1, n = 0;
	size_t i = 0;
	int r;

	if (!is_schema(cont))
		return VALID;
	if (c->dialect == D2020) {
		get_count(s, "minContains", &min);
		if (!get_count(s, "maxContains", &max))
			max = -1;
	}
	cJSON_ArrayForEach(it, v) {
		r = try_branch(c, cont, it, depth, base, NULL);
		if (r == FATAL)
			return FATAL;
		if (r == VALID) {
			n++;
			eval_mark(ev, i);
		}
		i++;
	}
	if (n < min)
		return min == 1 ? fail(c, "no item matches the contains schema") :
		       fail(c, "expected at least %" PRId64 " items matching contains, got %" PRId64,
			    min, n);
	if (max >= 0 && n > max)
		return fail(c, "expected at most %" PRId64 " item%s matching contains, got %" PRId64,
			    max, max == 1 ? "" : "s", n);
	return VALID;
}

static int check_array(struct ctx *c, const cJSON *s, const cJSON *v, int depth,
		       const char *base, struct eval *ev)
{
	const cJSON *it, *jt, *u = kw(s, "uniqueItems");
	int64_t n = 0, i, j;
	int r;

	cJSON_ArrayForEach(it, v)
		n++;
	r = check_counts(c, s, n, "item");
	if (r != VALID)
		return r;
	if (cJSON_IsTrue(u)) {
		i = 0;
		cJSON_ArrayForEach(it, v) {
			j = i + 1;
			for (jt = it->next; jt; jt = jt->next, j++) {
				r = json_equal(c, it, jt, 0);
				if (r == FATAL)
					return FATAL;
				if (r)
					return fail(c, "items %" PRId64 " and %" PRId64
						    " are equal, expected unique items", i, j);
			}
			i++;
		}
	}
	r = check_items(c, s, v, depth, base, ev);
	if (r != VALID)
		return r;
	return check_contains(c, s, v, depth, base, ev);
}

/* dependentRequired, or draft-07 dependencies whose value is an array. */
static int check_dep_required(struct ctx *c, const cJSON *deps, const cJSON *v)
{
	const cJSON *d, *name;

	cJSON_ArrayForEach(d, deps) {
		if (!cJSON_IsArray(d) || !kw(v, d->string))
			continue;
		cJSON_ArrayForEach(name, d) {
			if (step(c) < 0)
				return FATAL;
			if (cJSON_IsString(name) && !kw(v, name->valuestring))
				return fail(c, "missing property \"%s\", required by \"%s\"",
					    name->valuestring, d->string);
		}
	}
	return VALID;
}

static int check_names(struct ctx *c, const cJSON *names, const cJSON *v, int depth,
		       const char *base)
{
	const cJSON *it;
	int r;

	cJSON_ArrayForEach(it, v) {
		cJSON *key = cJSON_CreateString(it->string ? it->string : "");
		size_t save = c->len;

		if (!key)
			return oom(c);
		path_key(c->path, &c->len, it->string ? it->string : "");
		r = try_branch(c, names, key, depth, base, NULL);
		cJSON_Delete(key);
		if (r == FATAL)
			return FATAL;
		if (r == INVALID)
			return fail(c, "property name not allowed by propertyNames");
		path_pop(c->path, &c->len, save);
	}
	return VALID;
}

static int check_object(struct ctx *c, const cJSON *s, const cJSON *v, int depth,
			const char *base, struct eval *ev)
{
	const cJSON *req = kw(s, "required");
	const cJSON *props = kw(s, "properties");
	const cJSON *pats = kw(s, "patternProperties");
	const cJSON *addl = kw(s, "additionalProperties");
	const cJSON *deps = kw(s, c->dialect == D7 ? "dependencies" : "dependentRequired");
	const cJSON *names = kw(s, "propertyNames");
	const cJSON *it, *p;
	int64_t n = 0;
	size_t i = 0;
	int r, m;

	if (cJSON_IsArray(req)) {
		cJSON_ArrayForEach(it, req) {
			if (step(c) < 0)
				return FATAL;
			if (cJSON_IsString(it) &&
			    !cJSON_GetObjectItemCaseSensitive(v, it->valuestring))
				return fail(c, "missing required property \"%s\"", it->valuestring);
		}
	}
	cJSON_ArrayForEach(it, v)
		n++;
	if ((r = check_counts(c, s, n, "property")) != VALID)
		return r;
	if (cJSON_IsObject(deps) && (r = check_dep_required(c, deps, v)) != VALID)
		return r;
	if (!cJSON_IsObject(props))
		props = NULL;
	if (!cJSON_IsObject(pats))
		pats = NULL;
	if (!is_schema(addl))
		addl = NULL;
	cJSON_ArrayForEach(it, v) {
		const char *k = it->string ? it->string : "";
		const cJSON *sub;
		size_t save = c->len;
		int seen = 0;

		if (step(c) < 0)
			return FATAL;
		path_key(c->path, &c->len, k);
		sub = props ? kw(props, k) : NULL;
		if (sub) {
			seen = 1;
			if ((r = validate(c, sub, it, depth + 1, base, NULL)) != VALID)
				return r;
		}
		if (pats) {
			cJSON_ArrayForEach(p, pats) {
				if (!p->string)
					continue;
				m = rx_match(c, p->string, k);
				if (m == FATAL)
					return FATAL;
				if (!m)
					continue;
				seen = 1;
				if ((r = validate(c, p, it, depth + 1, base, NULL)) != VALID)
					return r;
			}
		}
		if (!seen && addl) {
			seen = 1;
			if (cJSON_IsFalse(addl))
				return fail(c, "property not allowed");
			if ((r = validate(c, addl, it, depth + 1, base, NULL)) != VALID)
				return r;
		}
		if (seen)
			eval_mark(ev, i);
		path_pop(c->path, &c->len, save);
		i++;
	}
	if (is_schema(names))
		return check_names(c, names, v, depth, base);
	return VALID;
}

/* The in-place applicators: $ref, allOf, anyOf, oneOf, not, if/then/else, dependentSchemas
 * (draft-07: dependencies whose value is a schema). */
static int check_inplace(struct ctx *c, const cJSON *s, const cJSON *v, int depth,
			 const char *base, struct eval *ev)
{
	const cJSON *any = kw(s, "anyOf"), *one = kw(s, "oneOf"), *all = kw(s, "allOf");
	const cJSON *ref = kw(s, "$ref"), *neg = kw(s, "not"), *cond = kw(s, "if");
	const cJSON *it, *target;
	const char *tbase;
	int r, i, first, matched;

	if (cJSON_IsString(ref)) {
		if (resolve_ref(c, base, ref->valuestring, &target, &tbase) != VALID)
			return FATAL;
		if ((r = validate(c, target, v, depth + 1, tbase, ev)) != VALID)
			return r;
	}
	if (cJSON_IsArray(all)) {
		cJSON_ArrayForEach(it, all) {
			r = validate(c, it, v, depth + 1, base, ev);
			if (r != VALID)
				return r;
		}
	}
	if (cJSON_IsArray(any) && any->child) {
		matched = 0;
		cJSON_ArrayForEach(it, any) {
			r = try_collect(c, it, v, depth, base, ev);
			if (r == FATAL)
				return FATAL;
			if (r == VALID) {
				matched = 1;
				if (!ev)	/* every branch's annotations count; else one match */
					break;
			}
		}
		if (!matched)
			return fail(c, "matches none of the anyOf schemas");
	}
	if (cJSON_IsArray(one) && one->child) {
		struct eval tmp = { NULL, 0 };

		first = -1;
		i = 0;
		if (ev && eval_init(c, &tmp, v) != VALID)
			return FATAL;
		/* at most one branch matches, so tmp ends with that branch's annotations */
		cJSON_ArrayForEach(it, one) {
			r = try_collect(c, it, v, depth, base, ev ? &tmp : NULL);
			if (r == FATAL) {
				free(tmp.bit);
				return FATAL;
			}
			if (r == VALID && first >= 0) {
				free(tmp.bit);
				return fail(c, "matches oneOf schemas %d and %d, expected exactly one",
					    first, i);
			}
			if (r == VALID)
				first = i;
			i++;
		}
		eval_merge(ev, &tmp);
		free(tmp.bit);
		if (first < 0)
			return fail(c, "matches none of the oneOf schemas");
	}
	if (is_schema(neg)) {
		r = try_branch(c, neg, v, depth, base, NULL);
		if (r == FATAL)
			return FATAL;
		if (r == VALID)
			return fail(c, "matches the not schema");
	}
	if (is_schema(cond)) {
		const cJSON *then = kw(s, "then"), *els = kw(s, "else");

		r = try_collect(c, cond, v, depth, base, ev);
		if (r == FATAL)
			return FATAL;
		it = r == VALID ? then : els;
		if (is_schema(it) && (r = validate(c, it, v, depth + 1, base, ev)) != VALID)
			return r;
	}
	if (cJSON_IsObject(v)) {
		const cJSON *deps = kw(s, c->dialect == D7 ? "dependencies" : "dependentSchemas");

		if (cJSON_IsObject(deps)) {
			cJSON_ArrayForEach(it, deps) {
				if (!is_schema(it) || !it->string || !kw(v, it->string))
					continue;
				if ((r = validate(c, it, v, depth + 1, base, ev)) != VALID)
					return r;
			}
		}
	}
	return VALID;
}

static int check_unevaluated(struct ctx *c, const cJSON *s, const cJSON *v, int depth,
			     const char *base, struct eval *ev)
{
	const cJSON *u = kw(s, cJSON_IsObject(v) ? "unevaluatedProperties" : "unevaluatedItems");
	const cJSON *it;
	size_t i = 0, save;
	int r;

	if (!is_schema(u))
		return VALID;
	cJSON_ArrayForEach(it, v) {
		if (!ev->bit[i]) {
			save = c->len;
			if (cJSON_IsObject(v))
				path_key(c->path, &c->len, it->string ? it->string : "");
			else
				path_add(c->path, &c->len, "[%zu]", i);
			if (cJSON_IsFalse(u))
				return fail(c, cJSON_IsObject(v) ?
					    "property not allowed by unevaluatedProperties" :
					    "item not allowed by unevaluatedItems");
			if ((r = validate(c, u, it, depth + 1, base, NULL)) != VALID)
				return r;
			path_pop(c->path, &c->len, save);
			ev->bit[i] = 1;
		}
		i++;
	}
	return VALID;
}

static int keywords(struct ctx *c, const cJSON *s, const cJSON *v, int depth, const char *base,
		    struct eval *ev)
{
	const cJSON *k, *it;
	char vs[160], ws[160];
	int r;

	k = cJSON_GetObjectItemCaseSensitive(s, "type");
	if (k && (r = check_type(c, k, v)) != VALID)
		return r;

	k = cJSON_GetObjectItemCaseSensitive(s, "const");
	if (k) {
		r = json_equal(c, k, v, 0);
		if (r == FATAL)
			return FATAL;
		if (!r) {
			if (c->quiet)
				return INVALID;
			fmt_value(k, ws, sizeof(ws));
			fmt_value(v, vs, sizeof(vs));
			return fail(c, "expected %s, got %s", ws, vs);
		}
	}

	k = cJSON_GetObjectItemCaseSensitive(s, "enum");
	if (cJSON_IsArray(k)) {
		r = 0;
		cJSON_ArrayForEach(it, k) {
			r = json_equal(c, it, v, 0);
			if (r != 0)
				break;
		}
		if (r == FATAL)
			return FATAL;
		if (!r) {
			if (c->quiet)
				return INVALID;
			fmt_value(k, ws, sizeof(ws));
			fmt_value(v, vs, sizeof(vs));
			return fail(c, "expected one of %s, got %s", ws, vs);
		}
	}

	r = VALID;
	if (cJSON_IsNumber(v))
		r = check_number(c, s, v);
	else if (cJSON_IsString(v))
		r = check_string(c, s, v);
	else if (cJSON_IsArray(v))
		r = check_array(c, s, v, depth, base, ev);
	else if (cJSON_IsObject(v))
		r = check_object(c, s, v, depth, base, ev);
	if (r != VALID)
		return r;
	return check_inplace(c, s, v, depth, base, ev);
}

static int validate(struct ctx *c, const cJSON *s, const cJSON *v, int depth, const char *base,
		    struct eval *out)
{
	const cJSON *k, *ref;
	struct eval mine = { NULL, 0 }, *ev = out;
	const char *why, *b, *tbase;
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
	/* the schema may not have been through box_schema_check: never skip what it refuses */
	cJSON_ArrayForEach(k, s) {
		if (k->string && (why = kw_refused(c->dialect, k->string))) {
			box_err_set(c->err, BOX_E_INVALID, "schema keyword \"%s\": %s", k->string, why);
			return FATAL;
		}
	}
	ref = kw(s, "$ref");
	if (c->dialect == D7 && cJSON_IsString(ref)) {	/* draft-07: $ref replaces its siblings */
		if (resolve_ref(c, base, ref->valuestring, &k, &tbase) != VALID)
			return FATAL;
		return validate(c, k, v, depth + 1, tbase, out);
	}
	if (kw(s, "$id")) {
		if (index_build(c) != VALID)
			return FATAL;
		if ((b = res_base_of(c, s)))
			base = b;
	}
	if ((cJSON_IsObject(v) && kw(s, "unevaluatedProperties")) ||
	    (cJSON_IsArray(v) && kw(s, "unevaluatedItems"))) {
		if (eval_init(c, &mine, v) != VALID)
			return FATAL;
		ev = &mine;
	}
	r = keywords(c, s, v, depth, base, ev);
	if (r == VALID && ev == &mine) {
		r = check_unevaluated(c, s, v, depth, base, ev);
		if (r == VALID)
			eval_merge(out, ev);
	}
	free(mine.bit);
	return r;
}

static void ctx_release(struct ctx *c)
{
	size_t i;

	for (i = 0; i < c->nres; i++)
		free(c->res[i].uri);
	free(c->res);
	for (i = 0; i < c->nrx; i++)
		pcre2_code_free(c->rx[i].code);
	pcre2_match_data_free(c->md);
	pcre2_match_context_free(c->mctx);
}

/* The dialect schema is read in: d, or the one its "$schema" names; 0 with err when the two
 * disagree or "$schema" names a dialect box does not read. */
static int pick_dialect(struct ctx *c, const cJSON *schema, enum box_schema_dialect d)
{
	const cJSON *sv = cJSON_IsObject(schema) ? kw(schema, "$schema") : NULL;
	int named;

	if (!sv)
		return d == BOX_SCHEMA_AUTO ? D2020 : (int)d;
	named = cJSON_IsString(sv) ? dialect_of(sv->valuestring) : 0;
	if (!named || (d != BOX_SCHEMA_AUTO && named != (int)d)) {
		box_err_set(c->err, BOX_E_INVALID,
			    "at $[\"$schema\"]: unsupported dialect (box reads draft 2020-12 and "
			    "draft-07%s)", named ? ", not both at once" : "");
		box_err_path(c->err, "$[\"$schema\"]");
		return 0;
	}
	return named;
}

static struct ctx *ctx_new(const cJSON *schema, enum box_schema_dialect d, struct box_err *err)
{
	struct ctx *c = calloc(1, sizeof(*c));

	if (!c) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	c->err = err;
	c->path[0] = '$';
	c->len = 1;
	c->root = schema;
	c->dialect = pick_dialect(c, schema, d);
	if (!c->dialect) {
		ctx_release(c);
		free(c);
		return NULL;
	}
	return c;
}

int box_schema_validate_in(const cJSON *schema, enum box_schema_dialect d, const cJSON *value,
			   struct box_err *err)
{
	struct ctx *c = ctx_new(schema, d, err);
	int r;

	if (!c)
		return -1;
	r = value ? validate(c, schema, value, 0, "", NULL) : fail(c, "no value");
	ctx_release(c);
	free(c);
	return r == VALID ? 0 : -1;
}

int box_schema_validate(const cJSON *schema, const cJSON *value, struct box_err *err)
{
	return box_schema_validate_in(schema, BOX_SCHEMA_AUTO, value, err);
}

/* ---------------------------------------------------------------- schema checks */

static int sfail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sfail(struct ctx *c, const char *fmt, ...)
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

static int check_schema(struct ctx *c, const cJSON *s, int depth, const char *base);

static int check_sub(struct ctx *c, const cJSON *s, const char *key, int depth, const char *base)
{
	size_t save = c->len;
	int r;

	path_key(c->path, &c->len, key);
	r = check_schema(c, s, depth + 1, base);
	path_pop(c->path, &c->len, save);
	return r;
}

static int check_kw_type(struct ctx *c, const cJSON *t)
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

static int check_list(struct ctx *c, const cJSON *k, int depth, const char *base, int nonempty)
{
	const cJSON *it;
	int idx = 0;

	if (!cJSON_IsArray(k) || (nonempty && !k->child))
		return sfail(c, "expected a %sarray of schemas", nonempty ? "non-empty " : "");
	cJSON_ArrayForEach(it, k) {
		size_t save = c->len;
		int r;

		path_add(c->path, &c->len, "[%d]", idx++);
		r = check_schema(c, it, depth + 1, base);
		path_pop(c->path, &c->len, save);
		if (r < 0)
			return r;
	}
	return 0;
}

static int check_strings(struct ctx *c, const cJSON *k, int unique)
{
	const cJSON *it, *jt;
	int idx = 0;

	if (!cJSON_IsArray(k))
		return sfail(c, "expected an array of strings");
	cJSON_ArrayForEach(it, k) {
		if (!cJSON_IsString(it)) {
			path_add(c->path, &c->len, "[%d]", idx);
			return sfail(c, "expected a string");
		}
		for (jt = k->child; unique && jt != it; jt = jt->next)
			if (strcmp(jt->valuestring, it->valuestring) == 0) {
				path_add(c->path, &c->len, "[%d]", idx);
				return sfail(c, "duplicate \"%s\"", it->valuestring);
			}
		idx++;
	}
	return 0;
}

/* A $ref must name a schema of this document, and a chain of bare $refs must not loop. */
static int check_ref(struct ctx *c, const char *base, const char *ref)
{
	const cJSON *seen[BOX_SCHEMA_MAX_DEPTH + 1], *t, *next;
	const char *tb;
	int n = 0, i;

	if (resolve_ref(c, base, ref, &t, &tb) != VALID)
		return -1;
	while (cJSON_IsObject(t) && cJSON_IsString(next = kw(t, "$ref"))) {
		for (i = 0; i < n; i++)
			if (seen[i] == t)
				return sfail(c, "$ref \"%s\" leads to a cycle of references", ref);
		if (n == BOX_SCHEMA_MAX_DEPTH) {
			box_err_limit(c->err, BOX_E_LIMIT, "schema_depth", BOX_SCHEMA_MAX_DEPTH,
				      "levels", "at %s: more than %d references in a row", c->path,
				      BOX_SCHEMA_MAX_DEPTH);
			box_err_path(c->err, c->path);
			return -1;
		}
		seen[n++] = t;
		if (resolve_ref(c, tb, next->valuestring, &t, &tb) != VALID)
			return -1;
	}
	return 0;
}

static int check_map(struct ctx *c, const cJSON *k, int depth, const char *base, int patterns)
{
	const cJSON *it;
	pcre2_code *code;

	if (!cJSON_IsObject(k))
		return sfail(c, "expected an object of schemas");
	cJSON_ArrayForEach(it, k) {
		const char *key = it->string ? it->string : "";
		size_t save = c->len;
		int r = 0;

		path_key(c->path, &c->len, key);
		if (patterns && rx_get(c, key, &code) != VALID)
			r = -1;
		path_pop(c->path, &c->len, save);
		if (r < 0 || check_sub(c, it, key, depth, base) < 0)
			return -1;
	}
	return 0;
}

static int check_kw(struct ctx *c, const cJSON *s, const cJSON *k, int depth, const char *base)
{
	static const char *const numbers[] = {
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
	};
	static const char *const counts[] = {
		"minLength", "maxLength", "minItems", "maxItems", "minProperties",
		"maxProperties", "minContains", "maxContains",
	};
	static const char *const ones[] = {
		"additionalProperties", "additionalItems", "contains", "not", "if", "then", "else",
		"propertyNames", "unevaluatedProperties", "unevaluatedItems", "contentSchema",
	};
	static const char *const annotations[] = {
		"title", "description", "$comment", "contentMediaType", "contentEncoding",
	};
	const char *name = k->string, *why;
	const cJSON *it;
	pcre2_code *code;
	int64_t n;

	if ((why = kw_refused(c->dialect, name)))
		return sfail(c, "%s", why);
	if (strcmp(name, "type") == 0)
		return check_kw_type(c, k);
	if (strcmp(name, "enum") == 0)
		return cJSON_IsArray(k) ? 0 : sfail(c, "expected an array");
	if (strcmp(name, "anyOf") == 0 || strcmp(name, "oneOf") == 0 || strcmp(name, "allOf") == 0)
		return check_list(c, k, depth, base, 1);
	if (strcmp(name, "prefixItems") == 0)
		return check_list(c, k, depth, base, 1);
	if (strcmp(name, "items") == 0) {
		if (c->dialect == D7 && cJSON_IsArray(k))
			return check_list(c, k, depth, base, 0);
		return check_schema(c, k, depth + 1, base);
	}
	if (IN_LIST(name, numbers)) {
		if (!cJSON_IsNumber(k) || !isfinite(k->valuedouble))
			return sfail(c, "expected a number");
		return 0;
	}
	if (strcmp(name, "multipleOf") == 0) {
		if (!cJSON_IsNumber(k) || !isfinite(k->valuedouble) || k->valuedouble <= 0)
			return sfail(c, "expected a number greater than 0");
		return 0;
	}
	if (IN_LIST(name, counts)) {
		if (!box_json_int64(k, &n) || n < 0)
			return sfail(c, "expected a non-negative integer");
		return 0;
	}
	if (strcmp(name, "uniqueItems") == 0 || strcmp(name, "deprecated") == 0 ||
	    strcmp(name, "readOnly") == 0 || strcmp(name, "writeOnly") == 0)
		return cJSON_IsBool(k) ? 0 : sfail(c, "expected a boolean");
	if (IN_LIST(name, ones))
		return check_schema(c, k, depth + 1, base);
	if (strcmp(name, "properties") == 0 || strcmp(name, "$defs") == 0 ||
	    strcmp(name, "definitions") == 0 || strcmp(name, "dependentSchemas") == 0)
		return check_map(c, k, depth, base, 0);
	if (strcmp(name, "patternProperties") == 0)
		return check_map(c, k, depth, base, 1);
	if (strcmp(name, "required") == 0)
		return check_strings(c, k, 0);
	if (strcmp(name, "dependentRequired") == 0 || strcmp(name, "dependencies") == 0) {
		if (!cJSON_IsObject(k))
			return sfail(c, "expected an object");
		cJSON_ArrayForEach(it, k) {
			size_t save = c->len;
			int r;

			path_key(c->path, &c->len, it->string ? it->string : "");
			if (cJSON_IsArray(it) || strcmp(name, "dependentRequired") == 0)
				r = check_strings(c, it, 1);
			else
				r = check_schema(c, it, depth + 1, base);
			path_pop(c->path, &c->len, save);
			if (r < 0)
				return r;
		}
		return 0;
	}
	if (strcmp(name, "pattern") == 0) {
		if (!cJSON_IsString(k))
			return sfail(c, "expected a string");
		return rx_get(c, k->valuestring, &code) == VALID ? 0 : -1;
	}
	if (strcmp(name, "$ref") == 0) {
		if (!cJSON_IsString(k))
			return sfail(c, "expected a string");
		return check_ref(c, base, k->valuestring);
	}
	if (strcmp(name, "$id") == 0 || strcmp(name, "$anchor") == 0 ||
	    strcmp(name, "$schema") == 0 || IN_LIST(name, annotations))
		return cJSON_IsString(k) ? 0 : sfail(c, "expected a string");
	if (strcmp(name, "examples") == 0)
		return cJSON_IsArray(k) ? 0 : sfail(c, "expected an array");
	(void)s;
	return 0;	/* "default", "const" and keywords outside JSON Schema: any value */
}

static int check_schema(struct ctx *c, const cJSON *s, int depth, const char *base)
{
	const cJSON *k, *sv;
	const char *b;

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
	sv = kw(s, "$schema");
	if (depth && sv && (!cJSON_IsString(sv) || dialect_of(sv->valuestring) != c->dialect)) {
		path_key(c->path, &c->len, "$schema");
		return sfail(c, "a subschema in another dialect is not supported");
	}
	if (kw(s, "$id") && !(c->dialect == D7 && kw(s, "$ref"))) {
		if (index_build(c) != VALID)
			return -1;
		if ((b = res_base_of(c, s)))
			base = b;
	}
	cJSON_ArrayForEach(k, s) {
		size_t save = c->len;
		int r;

		if (!k->string)
			continue;
		path_key(c->path, &c->len, k->string);
		r = check_kw(c, s, k, depth, base);
		path_pop(c->path, &c->len, save);
		if (r < 0)
			return -1;
	}
	return 0;
}

int box_schema_check_in(const cJSON *schema, enum box_schema_dialect d, struct box_err *err)
{
	struct ctx *c;
	int r;

	if (!is_schema(schema)) {
		box_err_set(err, BOX_E_INVALID, "at $: schema must be an object or a boolean");
		box_err_path(err, "$");
		return -1;
	}
	c = ctx_new(schema, d, err);
	if (!c)
		return -1;
	r = check_schema(c, schema, 0, "");
	ctx_release(c);
	free(c);
	return r;
}

int box_schema_check(const cJSON *schema, struct box_err *err)
{
	return box_schema_check_in(schema, BOX_SCHEMA_AUTO, err);
}
