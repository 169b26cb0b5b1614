/* JSON Schema validation (draft 2020-12 and draft-07, as tool schemas use them) of cJSON
 * values. */
#ifndef BOX_SCHEMA_H
#define BOX_SCHEMA_H

#include <cjson/cJSON.h>
#include "err.h"

#define BOX_SCHEMA_MAX_DEPTH 64        /* nesting of schemas within one validation */
#define BOX_SCHEMA_MAX_STEPS 1000000   /* schema applications and equality node visits */
#define BOX_SCHEMA_MAX_IDS 1024        /* $id and anchors in one schema */
#define BOX_SCHEMA_MAX_PATTERN 4096    /* bytes of one pattern */
#define BOX_SCHEMA_MATCH_LIMIT 1000000 /* PCRE2 match limit of one pattern match */

/* The dialects box reads. AUTO: the one the root's "$schema" names, draft 2020-12 when the
 * root has no "$schema". */
enum box_schema_dialect {
	BOX_SCHEMA_AUTO = 0,
	BOX_SCHEMA_2020_12 = 1,
	BOX_SCHEMA_DRAFT7 = 2,
};

/*
 * Validates value against schema. Keywords (draft 2020-12):
 *   type (a name or an array of names among null, boolean, integer, number, string, array,
 *   object; "integer" is any integral number, exact for int64 literals of box_json_parse),
 *   enum, const (deep equality, numbers by value); minimum, maximum, exclusiveMinimum,
 *   exclusiveMaximum, multipleOf (exact for integers); minLength, maxLength (in code points),
 *   pattern (PCRE2 on UTF-8, unanchored, \uHHHH escapes; at most BOX_SCHEMA_MATCH_LIMIT
 *   steps); minItems, maxItems, uniqueItems, prefixItems, items, contains, minContains,
 *   maxContains; properties, patternProperties, additionalProperties, required,
 *   minProperties, maxProperties, propertyNames, dependentRequired; the in-place applicators
 *   allOf, anyOf, oneOf, not, if/then/else, dependentSchemas and $ref (to schemas of the same
 *   document only: JSON pointers "#/$defs/x", $anchor names, $id URIs, resolved against the
 *   $id in force); unevaluatedProperties and unevaluatedItems (what the keywords above
 *   evaluated, through in-place subschemas that matched).
 * Draft-07 (the root's "$schema" is "http://json-schema.org/draft-07/schema#", or
 * box_schema_validate_in with BOX_SCHEMA_DRAFT7): items is a schema or an array (then
 * additionalItems applies to the rest), dependencies (arrays or schemas), "$id": "#name"
 * anchors, $ref replaces its siblings; prefixItems, $anchor, dependentRequired,
 * dependentSchemas, unevaluated*, minContains and maxContains are refused.
 * Annotations (title, description, default, examples, $comment, deprecated, readOnly,
 * writeOnly, contentMediaType, contentEncoding, definitions, $defs) and keywords outside JSON
 * Schema are ignored, as the specification says. JSON Schema keywords box does not implement
 * ($dynamicRef, $dynamicAnchor, $recursiveRef, $recursiveAnchor, $vocabulary, format) and
 * the other dialect's keywords are refused, never skipped.
 * A schema is an object or a boolean (true accepts all, false nothing).
 *
 * Returns 0 when value is valid. Otherwise -1 with invalid_request, err->path the JSON path of
 * the first offending value ("$", "$.name", "$.a.b", "$.list[3]", "$[\"a b\"]") and the message
 * "at PATH: WHAT", e.g. "at $.items[2]: expected integer, got string". WHAT is one of:
 *   expected T, got T2                 (type; T may be "string or null")
 *   expected one of [...], got V       (enum)        expected V, got V2   (const)
 *   expected >= N, got M  (minimum; also >, <=, < for the others)
 *   expected a multiple of N, got M
 *   expected at least N characters, got M   expected at most N characters, got M
 *   does not match pattern "P"
 *   expected at least N items, got M        expected at most N items, got M
 *   expected at least N properties, got M   expected at most N properties, got M
 *                                      ("character", "item", "property" when N is 1)
 *   items I and J are equal, expected unique items
 *   no item matches the contains schema
 *   expected at least N items matching contains, got M   (and "at most")
 *   missing required property "k"      (path of the object)
 *   missing property "b", required by "a"               (dependentRequired)
 *   property not allowed               (additionalProperties false; path of the property)
 *   property name not allowed by propertyNames          (path of the property)
 *   property not allowed by unevaluatedProperties       item not allowed by unevaluatedItems
 *   matches none of the anyOf schemas   matches none of the oneOf schemas
 *   matches oneOf schemas I and J, expected exactly one
 *   matches the not schema
 *   not allowed by schema false          no value   (value NULL)
 * Nesting past BOX_SCHEMA_MAX_DEPTH (a $ref is a level) or more than BOX_SCHEMA_MAX_STEPS
 * steps (pathological anyOf/oneOf nesting) fails with limit_exceeded ("schema_depth" /
 * "schema_steps"), a pattern past its match limit with limit_exceeded "pattern_match";
 * internal on OOM. The schema is not checked here (keywords of the wrong JSON type are
 * ignored), but a refused keyword, a $ref that names nothing or a pattern that does not
 * compile is invalid_request, never skipped.
 */
int box_schema_validate(const cJSON *schema, const cJSON *value, struct box_err *err);
int box_schema_validate_in(const cJSON *schema, enum box_schema_dialect d, const cJSON *value,
			   struct box_err *err);

/*
 * Checks that schema is well-formed for box_schema_validate (in dialect d; AUTO for
 * box_schema_check): an object or boolean; "$schema" (at the root) one of the dialects above;
 * type a known name or a non-empty array of distinct known names; enum an array;
 * anyOf/oneOf/allOf/prefixItems non-empty arrays of schemas; minimum etc. numbers; multipleOf
 * a number > 0; minLength etc. non-negative integers; pattern and the keys of
 * patternProperties expressions PCRE2 compiles; subschemas schemas; required and
 * dependentRequired arrays of strings; every $ref names a schema of this document ("remote
 * $ref \"URI\" not supported" otherwise) and no chain of $refs loops; no refused keyword.
 * Returns 0, or -1 with invalid_request "at SCHEMA_PATH: WHAT" (err->path is the path inside
 * the schema, e.g. "$.properties.n.type"), limit_exceeded past BOX_SCHEMA_MAX_DEPTH,
 * BOX_SCHEMA_MAX_IDS or BOX_SCHEMA_MAX_PATTERN.
 */
int box_schema_check(const cJSON *schema, struct box_err *err);
int box_schema_check_in(const cJSON *schema, enum box_schema_dialect d, struct box_err *err);

/* "null", "boolean", "integer" (integral number), "number", "string", "array", "object". */
const char *box_schema_type_of(const cJSON *value);

#endif
