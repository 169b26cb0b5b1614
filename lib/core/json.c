#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "banned.h"

/* Finds the number tokens of the text in document order, so that the tree walk below can give
 * each number node the literal it was parsed from. */
struct numscan {
	const char *p, *end;
	int nul;	/* a \u0000 escape was seen in a string */
};

static int next_number(struct numscan *s, const char **tok, size_t *toklen)
{
	int in_str = 0;

	while (s->p < s->end) {
		char c = *s->p;

		if (in_str) {
			if (c == '\\' && s->end - s->p >= 6 && memcmp(s->p + 1, "u0000", 5) == 0)
				s->nul = 1;
			if (c == '\\')
				s->p++;
			else if (c == '"')
				in_str = 0;
			s->p++;
			continue;
		}
		if (c == '"') {
			in_str = 1;
			s->p++;
			continue;
		}
		if (c == '-' || (c >= '0' && c <= '9')) {
			const char *b = s->p;

			while (s->p < s->end && strchr("+-0123456789.eE", *s->p) && *s->p)
				s->p++;
			*tok = b;
			*toklen = (size_t)(s->p - b);
			return 1;
		}
		s->p++;
	}
	return 0;
}

static int mark_numbers(cJSON *node, struct numscan *s, int depth, struct box_err *err)
{
	for (; node; node = node->next) {
		if (depth > BOX_JSON_MAX_DEPTH)
			return box_err_set(err, BOX_E_INVALID, "JSON nested deeper than %d levels",
					   BOX_JSON_MAX_DEPTH);
		if (cJSON_IsNumber(node)) {
			const char *tok;
			size_t n;

			if (!next_number(s, &tok, &n))
				return box_err_set(err, BOX_E_INTERNAL, "number scan lost its place");
			if (n < 24 && !memchr(tok, '.', n) && !memchr(tok, 'e', n) &&
			    !memchr(tok, 'E', n)) {
				node->valuestring = cJSON_malloc(n + 1);
				if (!node->valuestring)
					return box_err_set(err, BOX_E_INTERNAL, "out of memory");
				memcpy(node->valuestring, tok, n);
				node->valuestring[n] = 0;
			}
		}
		if (node->child && mark_numbers(node->child, s, depth + 1, err) < 0)
			return -1;
	}
	return 0;
}

cJSON *box_json_parse(const char *text, size_t len, struct box_err *err)
{
	const char *end = NULL;
	cJSON *root;
	struct numscan s = { text, text + len, 0 };

	if (len == 0)
		return box_err_set(err, BOX_E_INVALID, "empty input where a JSON value was expected"),
		       NULL;
	root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (!root) {
		size_t off = end && end >= text ? (size_t)(end - text) : 0;
		box_err_set(err, BOX_E_INVALID, "malformed JSON near byte %zu", off);
		return NULL;
	}
	while (end && end < text + len && strchr(" \t\r\n", *end) && *end)
		end++;
	if (end && end < text + len) {
		cJSON_Delete(root);
		box_err_set(err, BOX_E_INVALID, "trailing characters after JSON value at byte %zu",
			    (size_t)(end - text));
		return NULL;
	}
	if (mark_numbers(root, &s, 1, err) < 0) {
		cJSON_Delete(root);
		return NULL;
	}
	/* cJSON strings end at NUL: refuse rather than cut a string short without a word */
	while (!s.nul && next_number(&s, &(const char *){ NULL }, &(size_t){ 0 }))
		;
	if (s.nul) {
		cJSON_Delete(root);
		box_err_set(err, BOX_E_INVALID, "JSON strings containing \\u0000 are not supported");
		return NULL;
	}
	return root;
}

int box_json_is_int_literal(const cJSON *node)
{
	return cJSON_IsNumber(node) && node->valuestring != NULL;
}

int box_json_int64(const cJSON *node, int64_t *out)
{
	if (!cJSON_IsNumber(node))
		return 0;
	if (node->valuestring) {
		char *e;
		long long v;

		errno = 0;
		v = strtoll(node->valuestring, &e, 10);
		if (errno == 0 && *e == 0) {
			*out = v;
			return 1;
		}
		return 0;
	}
	if (isfinite(node->valuedouble) && node->valuedouble == floor(node->valuedouble) &&
	    fabs(node->valuedouble) <= 9007199254740992.0) {
		*out = (int64_t)node->valuedouble;
		return 1;
	}
	return 0;
}

void box_json_exact(cJSON *node)
{
	for (; node; node = node->next) {
		if (cJSON_IsNumber(node) && node->valuestring)
			node->type = cJSON_Raw;
		if (node->child)
			box_json_exact(node->child);
	}
}

cJSON *box_json_int64_new(int64_t v)
{
	char num[32];

	snprintf(num, sizeof(num), "%" PRId64, v);
	return cJSON_CreateRaw(num);
}

cJSON *box_json_add_int64(cJSON *obj, const char *key, int64_t v)
{
	cJSON *n = box_json_int64_new(v);

	if (!n)
		return NULL;
	if (!cJSON_AddItemToObject(obj, key, n)) {
		cJSON_Delete(n);
		return NULL;
	}
	return n;
}

static const char *type_name(const cJSON *v)
{
	if (cJSON_IsNull(v))
		return "null";
	if (cJSON_IsBool(v))
		return "boolean";
	if (cJSON_IsNumber(v))
		return box_json_is_int_literal(v) ? "integer" : "number";
	if (cJSON_IsString(v))
		return "string";
	if (cJSON_IsArray(v))
		return "array";
	if (cJSON_IsObject(v))
		return "object";
	return "unknown";
}

static int bad(struct box_err *err, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bad(struct box_err *err, const char *name, const char *fmt, ...)
{
	char path[BOX_ERR_FIELD_MAX], msg[BOX_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	box_err_set(err, BOX_E_INVALID, "%s: %s", name, msg);
	snprintf(path, sizeof(path), "$.%s", name);
	box_err_path(err, path);
	return -1;
}

static int check_one(const cJSON *v, const struct box_field *f, struct box_err *err)
{
	int64_t n;
	char lim[64];
	const cJSON *it;
	int count = 0;

	switch (f->type) {
	case BOX_F_STRING:
		if (!cJSON_IsString(v))
			return bad(err, f->name, "expected string, got %s", type_name(v));
		if (f->max > 0 && strlen(v->valuestring) > (size_t)f->max) {
			snprintf(lim, sizeof(lim), "%" PRId64, f->max);
			return bad(err, f->name, "longer than %s bytes", lim);
		}
		return 0;
	case BOX_F_INT:
		if (!box_json_int64(v, &n))
			return bad(err, f->name, "expected integer, got %s", type_name(v));
		if (n < f->min || n > f->max) {
			snprintf(lim, sizeof(lim), "[%" PRId64 ", %" PRId64 "]", f->min, f->max);
			return bad(err, f->name, "out of range %s", lim);
		}
		return 0;
	case BOX_F_BOOL:
		if (!cJSON_IsBool(v))
			return bad(err, f->name, "expected boolean, got %s", type_name(v));
		return 0;
	case BOX_F_STRINGS:
		if (!cJSON_IsArray(v))
			return bad(err, f->name, "expected array of strings, got %s", type_name(v));
		cJSON_ArrayForEach(it, v) {
			char item[BOX_ERR_FIELD_MAX];

			if (!cJSON_IsString(it)) {
				snprintf(item, sizeof(item), "%s[%d]", f->name, count);
				return bad(err, item, "expected string, got %s", type_name(it));
			}
			count++;
		}
		if (f->max > 0 && count > f->max) {
			snprintf(lim, sizeof(lim), "%" PRId64, f->max);
			return bad(err, f->name, "more than %s items", lim);
		}
		return 0;
	case BOX_F_ARRAY:
		if (!cJSON_IsArray(v))
			return bad(err, f->name, "expected array, got %s", type_name(v));
		return 0;
	case BOX_F_OBJECT:
		if (!cJSON_IsObject(v))
			return bad(err, f->name, "expected object, got %s", type_name(v));
		return 0;
	case BOX_F_ANY:
		return 0;
	}
	return 0;
}

int box_json_check(const cJSON *obj, const struct box_field *fields, struct box_err *err)
{
	const cJSON *m, *o;

	if (!cJSON_IsObject(obj)) {
		box_err_set(err, BOX_E_INVALID, "request must be a JSON object, got %s", type_name(obj));
		box_err_path(err, "$");
		return -1;
	}
	cJSON_ArrayForEach(m, obj) {
		const struct box_field *f;

		for (o = obj->child; o != m; o = o->next)
			if (strcmp(o->string, m->string) == 0)
				return bad(err, m->string, "duplicate member%s", "");
		for (f = fields; f->name; f++)
			if (strcmp(f->name, m->string) == 0)
				break;
		if (!f->name)
			return bad(err, m->string, "unknown field%s", "");
		if (cJSON_IsNull(m))
			continue;
		if (check_one(m, f, err) < 0)
			return -1;
	}
	return 0;
}

int64_t box_json_get_int(const cJSON *obj, const char *key, int64_t def)
{
	int64_t v;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, key);

	return m && box_json_int64(m, &v) ? v : def;
}

const char *box_json_get_str(const cJSON *obj, const char *key, const char *def)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(m) ? m->valuestring : def;
}

int box_json_get_bool(const cJSON *obj, const char *key, int def)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsBool(m) ? cJSON_IsTrue(m) : def;
}

/* Printed from a copy whose integer literals are raw (box_json_exact): cJSON prints a number
 * from its double, which loses what lies past 2^53 (9000000000000000001 became 9e+18). */
char *box_json_line(const cJSON *v, size_t *len)
{
	cJSON *copy = cJSON_Duplicate(v, 1);
	size_t n;
	char *s, *r;

	if (!copy)
		return NULL;
	box_json_exact(copy);
	s = cJSON_PrintUnformatted(copy);
	cJSON_Delete(copy);
	if (!s)
		return NULL;
	n = strlen(s);
	r = realloc(s, n + 2);
	if (!r) {
		free(s);
		return NULL;
	}
	r[n] = '\n';
	r[n + 1] = 0;
	if (len)
		*len = n + 1;
	return r;
}

cJSON *box_json_string_n(const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	char *out, *o;
	size_t i;
	cJSON *node;

	if (n > (SIZE_MAX - 3) / 6)
		return NULL;
	out = malloc(n * 6 + 3);
	if (!out)
		return NULL;
	o = out;
	*o++ = '"';
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			*o++ = '\\';
			*o++ = (char)c;
		} else if (c == '\n') {
			*o++ = '\\';
			*o++ = 'n';
		} else if (c == '\t') {
			*o++ = '\\';
			*o++ = 't';
		} else if (c < 0x20 || c == 0x7f) {
			*o++ = '\\';
			*o++ = 'u';
			*o++ = '0';
			*o++ = '0';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		} else {
			*o++ = (char)c;
		}
	}
	*o++ = '"';
	*o = 0;
	node = cJSON_CreateRaw(out);
	free(out);
	return node;
}

int64_t box_json_int_value(const cJSON *node, int64_t def)
{
	int64_t v;
	char *end;

	if (cJSON_IsRaw(node) && node->valuestring) {
		errno = 0;
		v = strtoll(node->valuestring, &end, 10);
		return errno || *end || end == node->valuestring ? def : v;
	}
	if (box_json_int64(node, &v))
		return v;
	return def;
}
