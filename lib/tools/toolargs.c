#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "flags.h"
#include "json.h"
#include "schema.h"
#include "toolargs.h"
#include "banned.h"

#define FLAG_MAX 128
#define HELP_MAX (1u << 20)

enum kind { K_STRING, K_INTEGER, K_NUMBER, K_BOOLEAN, K_ARRAY, K_JSON };

struct prop {
	const char *name;
	char flag[FLAG_MAX];
	const cJSON *schema;
	enum kind kind;
	enum kind item_kind;          /* K_ARRAY only */
	const cJSON *item_schema;     /* K_ARRAY only, may be NULL */
	int seen;
};

struct props {
	struct prop *v;
	size_t n;
};

static int is_upper(char c)
{
	return c >= 'A' && c <= 'Z';
}

static int is_lower_or_digit(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

int box_toolargs_flag_name(const char *prop, char *out, size_t n)
{
	size_t i, o = 0;

	if (!prop || !prop[0] || n == 0)
		return -1;
	for (i = 0; prop[i]; i++) {
		char c = prop[i];
		int dash = 0;

		if (c == '_')
			c = '-';
		if (is_upper(c)) {
			if (i > 0 && (is_lower_or_digit(prop[i - 1]) ||
				      (is_upper(prop[i - 1]) && is_lower_or_digit(prop[i + 1]) &&
				       !(prop[i + 1] >= '0' && prop[i + 1] <= '9'))))
				dash = 1;
			c = (char)(c - 'A' + 'a');
		}
		if (dash && o > 0 && out[o - 1] != '-') {
			if (o + 1 >= n)
				return -1;
			out[o++] = '-';
		}
		if (o + 1 >= n)
			return -1;
		out[o++] = c;
	}
	out[o] = 0;
	return 0;
}

static enum kind kind_of_name(const char *t)
{
	if (strcmp(t, "string") == 0)
		return K_STRING;
	if (strcmp(t, "integer") == 0)
		return K_INTEGER;
	if (strcmp(t, "number") == 0)
		return K_NUMBER;
	if (strcmp(t, "boolean") == 0)
		return K_BOOLEAN;
	if (strcmp(t, "array") == 0)
		return K_ARRAY;
	return K_JSON;
}

/* The one type a flag value is converted to: "type" (ignoring "null" in a type array), else
 * the type shared by every enum value, else free JSON. */
static enum kind kind_of(const cJSON *s)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "enum"), *it;
	const char *found = NULL;

	if (cJSON_IsString(t))
		return kind_of_name(t->valuestring);
	if (cJSON_IsArray(t)) {
		cJSON_ArrayForEach(it, t) {
			if (!cJSON_IsString(it) || strcmp(it->valuestring, "null") == 0)
				continue;
			if (found)
				return K_JSON;
			found = it->valuestring;
		}
		return found ? kind_of_name(found) : K_JSON;
	}
	if (cJSON_IsArray(e) && e->child) {
		enum kind k = cJSON_IsString(e->child) ? K_STRING :
			      cJSON_IsNumber(e->child) ? K_NUMBER : K_JSON;

		cJSON_ArrayForEach(it, e)
			if ((k == K_STRING && !cJSON_IsString(it)) ||
			    (k == K_NUMBER && !cJSON_IsNumber(it)))
				return K_JSON;
		return k;
	}
	return K_JSON;
}

static int load_props(const cJSON *schema, struct props *ps, struct box_err *err)
{
	const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties"), *it;
	size_t n = 0, i, j;

	ps->v = NULL;
	ps->n = 0;
	if (!cJSON_IsObject(props))
		return 0;
	cJSON_ArrayForEach(it, props)
		n++;
	if (!n)
		return 0;
	ps->v = calloc(n, sizeof(*ps->v));
	if (!ps->v)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	cJSON_ArrayForEach(it, props) {
		struct prop *p = &ps->v[ps->n];

		if (!it->string || box_toolargs_flag_name(it->string, p->flag, sizeof(p->flag)) < 0)
			return box_err_set(err, BOX_E_INVALID, "Property \"%.64s\" has no usable flag name",
					   it->string ? it->string : "");
		if (strcmp(p->flag, "json") == 0 || strcmp(p->flag, "json-file") == 0 ||
		    strcmp(p->flag, "help") == 0)
			return box_err_set(err, BOX_E_INVALID,
					   "Property \"%s\" takes the reserved flag --%s", it->string,
					   p->flag);
		for (j = 0; j < ps->n; j++)
			if (strcmp(ps->v[j].flag, p->flag) == 0)
				return box_err_set(err, BOX_E_INVALID,
						   "Properties \"%s\" and \"%s\" both map to --%s",
						   ps->v[j].name, it->string, p->flag);
		p->name = it->string;
		p->schema = it;
		p->kind = kind_of(it);
		if (p->kind == K_ARRAY) {
			p->item_schema = cJSON_GetObjectItemCaseSensitive(it, "items");
			p->item_kind = cJSON_IsObject(p->item_schema) ? kind_of(p->item_schema) : K_JSON;
			if (p->item_kind == K_ARRAY)
				p->item_kind = K_JSON;
		}
		ps->n++;
	}
	for (i = 0; i < ps->n; i++)
		if (!ps->v[i].name)
			return box_err_set(err, BOX_E_INTERNAL, "property table broken");
	return 0;
}

static struct prop *find_flag(struct props *ps, const char *flag, size_t len)
{
	size_t i;

	for (i = 0; i < ps->n; i++)
		if (strlen(ps->v[i].flag) == len && memcmp(ps->v[i].flag, flag, len) == 0)
			return &ps->v[i];
	return NULL;
}

/* "a|b|c" for an enum, into buf; 0 when s has no enum. */
static int enum_text(const cJSON *s, char *buf, size_t n)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "enum"), *it;
	size_t o = 0;

	if (!cJSON_IsArray(e) || !e->child)
		return 0;
	buf[0] = 0;
	cJSON_ArrayForEach(it, e) {
		char *txt = NULL;
		const char *str;
		int k;

		if (cJSON_IsString(it)) {
			str = it->valuestring;
		} else {
			txt = cJSON_PrintUnformatted(it);
			str = txt ? txt : "?";
		}
		if (o < n) {
			k = snprintf(buf + o, n - o, "%s%s", o ? "|" : "", str);
			o = k < 0 ? n : o + (size_t)k;
		}
		free(txt);
	}
	return 1;
}

/* box_flag_invalid for a flag named without its dashes, as the property table holds it */
static int flag_invalid(struct box_err *err, const char *kind, const char *flag, const char *text)
{
	char shown[BOX_FLAG_SHOW + 3];

	snprintf(shown, sizeof(shown), "--%s", flag);
	return box_flag_invalid(err, kind, shown, text);
}

static int check_enum(const cJSON *s, const cJSON *v, const char *flag, const char *text,
		      struct box_err *err)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "enum"), *it;
	char allowed[256];

	if (!cJSON_IsArray(e) || !e->child)
		return 0;
	cJSON_ArrayForEach(it, e)
		if (cJSON_Compare(it, v, 1))
			return 0;
	enum_text(s, allowed, sizeof(allowed));
	return box_err_set(err, BOX_E_USAGE, "Invalid value for --%s: %.128s (expected %s)", flag,
			   text, allowed);
}

/* The JSON value of one flag argument, or NULL with err (usage). */
static cJSON *convert(enum kind k, const cJSON *s, const char *flag, const char *text,
		      struct box_err *err)
{
	struct box_err scratch;
	cJSON *v = NULL;

	box_err_init(&scratch);
	switch (k) {
	case K_STRING:
		v = cJSON_CreateString(text);
		break;
	case K_BOOLEAN:
		if (strcmp(text, "true") == 0)
			v = cJSON_CreateTrue();
		else if (strcmp(text, "false") == 0)
			v = cJSON_CreateFalse();
		else
			flag_invalid(err, "boolean", flag, text);
		return v;
	case K_INTEGER:
	case K_NUMBER:
		v = box_json_parse(text, strlen(text), &scratch);
		if (!v || !cJSON_IsNumber(v) || !isfinite(v->valuedouble) ||
		    (k == K_INTEGER && !box_json_is_int_literal(v) &&
		     v->valuedouble != floor(v->valuedouble))) {
			cJSON_Delete(v);
			flag_invalid(err, k == K_INTEGER ? "integer" : "number", flag, text);
			return NULL;
		}
		break;
	default:
		v = box_json_parse(text, strlen(text), &scratch);
		if (!v) {
			flag_invalid(err, "JSON", flag, text);
			return NULL;
		}
		return v;
	}
	if (!v) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	if (s && check_enum(s, v, flag, text, err) < 0) {
		cJSON_Delete(v);
		return NULL;
	}
	return v;
}

static int add_value(cJSON *out, struct prop *p, const char *text, struct box_err *err)
{
	cJSON *v, *arr;

	if (p->kind != K_ARRAY) {
		if (p->seen)
			return box_err_set(err, BOX_E_USAGE, "Flag given twice: --%s", p->flag);
		v = convert(p->kind, p->schema, p->flag, text, err);
		if (!v)
			return -1;
		if (!cJSON_AddItemToObject(out, p->name, v)) {
			cJSON_Delete(v);
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
		}
		p->seen = 1;
		return 0;
	}
	v = convert(p->item_kind, cJSON_IsObject(p->item_schema) ? p->item_schema : NULL, p->flag,
		    text, err);
	if (!v)
		return -1;
	arr = cJSON_GetObjectItemCaseSensitive(out, p->name);
	if (!arr) {
		arr = cJSON_AddArrayToObject(out, p->name);
		if (!arr) {
			cJSON_Delete(v);
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
		}
	}
	if (!cJSON_AddItemToArray(arr, v)) {
		cJSON_Delete(v);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}
	p->seen = 1;
	return 0;
}

static cJSON *whole_json(const char *text, const char *file, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_TOOLARGS_FILE_MAX);
	cJSON *v;

	if (text)
		return box_json_parse(text, strlen(text), err);
	if (box_buf_read_file(&b, AT_FDCWD, file, err) < 0) {
		box_buf_release(&b);
		return NULL;
	}
	v = box_json_parse(b.data ? b.data : "", b.len, err);
	box_buf_release(&b);
	return v;
}

static int check_required(const cJSON *schema, struct props *ps, const cJSON *out,
			  struct box_err *err)
{
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(schema, "required"), *it;
	char flag[FLAG_MAX], path[BOX_ERR_FIELD_MAX];
	size_t i;

	if (!cJSON_IsArray(req))
		return 0;
	cJSON_ArrayForEach(it, req) {
		const char *f = NULL;

		if (!cJSON_IsString(it) || cJSON_GetObjectItemCaseSensitive(out, it->valuestring))
			continue;
		for (i = 0; i < ps->n; i++)
			if (strcmp(ps->v[i].name, it->valuestring) == 0)
				f = ps->v[i].flag;
		if (!f && box_toolargs_flag_name(it->valuestring, flag, sizeof(flag)) == 0)
			f = flag;
		box_err_set(err, BOX_E_USAGE, "Missing required flag: --%s", f ? f : it->valuestring);
		snprintf(path, sizeof(path), "$.%s", it->valuestring);
		box_err_path(err, path);
		return -1;
	}
	return 0;
}

static int parse_flags(const cJSON *schema, struct props *ps, int argc, char **argv,
		       int *want_help, cJSON *out, cJSON **whole, struct box_err *err)
{
	const char *json_text = NULL, *json_file = NULL;
	int i, nflags = 0;

	if (argc > BOX_TOOLARGS_MAX_ARGS)
		return box_err_limit(err, BOX_E_LIMIT, "arguments", BOX_TOOLARGS_MAX_ARGS, "arguments",
				     "more than %d arguments", BOX_TOOLARGS_MAX_ARGS);
	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *name, *eq, *val;
		size_t nlen;
		struct prop *p;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			*want_help = 1;
			return 1;
		}
		if (a[0] != '-' || strcmp(a, "--") == 0 || strcmp(a, "-") == 0)
			return box_flag_unexpected(err, a);
		if (a[1] != '-')
			return box_flag_unknown(err, a);
		name = a + 2;
		eq = strchr(name, '=');
		nlen = eq ? (size_t)(eq - name) : strlen(name);
		val = eq ? eq + 1 : NULL;

		if ((nlen == 4 && memcmp(name, "json", 4) == 0) ||
		    (nlen == 9 && memcmp(name, "json-file", 9) == 0)) {
			const char **slot = nlen == 4 ? &json_text : &json_file;

			if (!val) {
				if (i + 1 >= argc)
					return box_flag_missing_value(err, a);
				val = argv[++i];
			}
			if (*slot)
				return box_err_set(err, BOX_E_USAGE, "Flag given twice: --%.*s",
						   (int)nlen, name);
			if (json_text || json_file || nflags)
				return box_err_set(err, BOX_E_USAGE,
						   "--json cannot be combined with other flags");
			*slot = val;
			continue;
		}
		if (json_text || json_file)
			return box_err_set(err, BOX_E_USAGE, "--json cannot be combined with other flags");

		p = find_flag(ps, name, nlen);
		if (!p && nlen > 3 && memcmp(name, "no-", 3) == 0 && !val) {
			p = find_flag(ps, name + 3, nlen - 3);
			if (p && p->kind == K_BOOLEAN) {
				if (add_value(out, p, "false", err) < 0)
					return -1;
				nflags++;
				continue;
			}
			p = NULL;
		}
		if (!p) {
			char shown[BOX_FLAG_SHOW + 3];

			snprintf(shown, sizeof(shown), "--%.*s", (int)nlen, name);
			return box_flag_unknown(err, shown);
		}
		if (p->kind == K_BOOLEAN) {
			if (add_value(out, p, val ? val : "true", err) < 0)
				return -1;
			nflags++;
			continue;
		}
		if (!val) {
			if (i + 1 >= argc)
				return box_flag_missing_value(err, a);
			val = argv[++i];
		}
		if (add_value(out, p, val, err) < 0)
			return -1;
		nflags++;
	}
	if (json_text || json_file) {
		*whole = whole_json(json_text, json_file, err);
		return *whole ? 0 : -1;
	}
	return check_required(schema, ps, out, err);
}

cJSON *box_toolargs_parse(const cJSON *input_schema, int argc, char **argv, int *want_help,
			  struct box_err *err)
{
	struct props ps;
	cJSON *out = NULL, *whole = NULL;
	int r;

	*want_help = 0;
	if (load_props(input_schema, &ps, err) < 0)
		goto fail;
	out = cJSON_CreateObject();
	if (!out) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto fail;
	}
	r = parse_flags(input_schema, &ps, argc, argv, want_help, out, &whole, err);
	if (r != 0)
		goto fail;
	if (whole) {
		cJSON_Delete(out);
		out = whole;
	}
	if (box_schema_validate(input_schema, out, err) < 0)
		goto fail;
	free(ps.v);
	return out;
fail:
	free(ps.v);
	cJSON_Delete(out);
	return NULL;
}

static void type_text(const cJSON *s, enum kind k, char *buf, size_t n)
{
	static const char *const names[] = {
		[K_STRING] = "string", [K_INTEGER] = "integer", [K_NUMBER] = "number",
		[K_BOOLEAN] = "boolean", [K_ARRAY] = "array", [K_JSON] = "json",
	};

	if (k != K_BOOLEAN && enum_text(s, buf, n))
		return;
	snprintf(buf, n, "%s", names[k]);
}

char *box_toolargs_help(const char *tool_name, const char *description, const cJSON *input_schema)
{
	struct box_buf b = BOX_BUF_INIT(HELP_MAX);
	struct box_err err;
	struct props ps;
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(input_schema, "required"), *it;
	size_t i;
	int bad = 0;

	box_err_init(&err);
	if (load_props(input_schema, &ps, &err) < 0) {
		free(ps.v);
		ps.v = NULL;
		ps.n = 0;
	}
	bad |= box_buf_printf(&b, &err, "Usage: box-tool %s [--flag VALUE]...\n"
			      "       box-tool %s --json JSON | --json-file PATH\n", tool_name, tool_name);
	if (description && description[0])
		bad |= box_buf_printf(&b, &err, "\n%s\n", description);
	bad |= box_buf_puts(&b, "\nFlags:\n", &err);
	for (i = 0; i < ps.n; i++) {
		struct prop *p = &ps.v[i];
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(p->schema, "description");
		char type[512];
		int required = 0;

		cJSON_ArrayForEach(it, req)
			if (cJSON_IsString(it) && strcmp(it->valuestring, p->name) == 0)
				required = 1;
		if (p->kind == K_ARRAY) {
			char item[480];

			type_text(p->item_schema, p->item_kind, item, sizeof(item));
			if (strchr(item, '|'))
				snprintf(type, sizeof(type), "(%s)[]", item);
			else
				snprintf(type, sizeof(type), "%s[]", item);
		} else {
			type_text(p->schema, p->kind, type, sizeof(type));
		}
		if (p->kind == K_BOOLEAN)
			bad |= box_buf_printf(&b, &err, "  --%s, --no-%s <boolean>", p->flag, p->flag);
		else
			bad |= box_buf_printf(&b, &err, "  --%s <%s>", p->flag, type);
		bad |= box_buf_puts(&b, required ? " (required)\n" : "\n", &err);
		if (cJSON_IsString(d) && d->valuestring[0])
			bad |= box_buf_printf(&b, &err, "      %s\n", d->valuestring);
	}
	bad |= box_buf_puts(&b, "  --json <json>\n      the whole input as one JSON value\n"
			    "  --json-file <path>\n      read the whole input from a file\n"
			    "  -h, --help\n      show this help\n", &err);
	free(ps.v);
	if (bad) {
		box_buf_release(&b);
		return NULL;
	}
	return box_buf_detach(&b, NULL);
}
