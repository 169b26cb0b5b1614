/* JSON requests and results over cJSON: exact integers, typed field checks with JSON paths. */
#ifndef BOX_JSON_H
#define BOX_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "err.h"

#define BOX_JSON_MAX_DEPTH 128

/*
 * Parses exactly one JSON value from text[0..len) (trailing whitespace allowed, anything else
 * is an error). Numbers written as integer literals that fit in int64 keep their exact value:
 * read them with box_json_int64(). Nesting deeper than BOX_JSON_MAX_DEPTH is refused.
 * Returns a tree the caller frees with cJSON_Delete, or NULL with invalid_request.
 */
cJSON *box_json_parse(const char *text, size_t len, struct box_err *err);

/* 1 if node is an integer (an integer literal, or a number with an integral value within
 * ±2^53) and stores it in *out; 0 otherwise. */
int box_json_int64(const cJSON *node, int64_t *out);

/* 1 if node was written as an integer literal in the parsed text. */
int box_json_is_int_literal(const cJSON *node);

/* Turns every integer literal of a tree made by box_json_parse into a raw node printing its
 * exact text, for embedding a parsed value into output. */
void box_json_exact(cJSON *node);

/* A JSON string node for n bytes of valid UTF-8 that may hold NUL bytes (cJSON strings end at
 * the first NUL): a raw node holding the escaped literal ("a\u0000b"). NULL on OOM. */
cJSON *box_json_string_n(const char *s, size_t n);

/* The integer value of an integer node: a number, or a raw node made by box_json_int64_new /
 * box_json_exact; def otherwise. */
int64_t box_json_int_value(const cJSON *node, int64_t def);

/* Adds an int64 member that prints exactly (cJSON numbers are doubles). NULL on OOM. */
cJSON *box_json_add_int64(cJSON *obj, const char *key, int64_t v);
cJSON *box_json_int64_new(int64_t v);

enum box_ftype {
	BOX_F_STRING,
	BOX_F_INT,      /* integer within [min, max] */
	BOX_F_BOOL,
	BOX_F_STRINGS,  /* array of strings (at most max items when max > 0) */
	BOX_F_ARRAY,    /* array of anything */
	BOX_F_OBJECT,
	BOX_F_ANY,
};

/* One member of a request object; a table of them ends with a zeroed entry (name NULL). */
struct box_field {
	const char *name;     /* snake_case JSON name; the flag is --kebab-case */
	enum box_ftype type;
	int64_t min, max;     /* BOX_F_INT bounds; BOX_F_STRING/STRINGS length or count cap (0: none) */
	char shortopt;        /* one-letter flag, or 0 */
	const char *help;     /* one line for --help */
	const char *argname;  /* placeholder in --help ("MS", "DIR") */
	int flag_only;        /* an operator's cap: refused in a --json request */
};

/* Checks obj against fields: it is an object, no unknown or duplicate members, every member of
 * the right type and range. Returns 0, or -1 with invalid_request and err->path ("$.timeout_ms"). */
int box_json_check(const cJSON *obj, const struct box_field *fields, struct box_err *err);

/* Getters for members already checked by box_json_check; return def when absent or null. */
int64_t box_json_get_int(const cJSON *obj, const char *key, int64_t def);
const char *box_json_get_str(const cJSON *obj, const char *key, const char *def);
int box_json_get_bool(const cJSON *obj, const char *key, int def);

/* The unformatted text of v followed by "\n", or NULL on OOM; free() it. */
char *box_json_line(const cJSON *v, size_t *len);

#endif
