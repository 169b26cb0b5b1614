/* JSON Schema validation (the subset tool inputs and outputs use) of cJSON values. */
#ifndef BOX_SCHEMA_H
#define BOX_SCHEMA_H

#include <cjson/cJSON.h>
#include "err.h"

#define BOX_SCHEMA_MAX_DEPTH 64        /* nesting of schemas within one validation */
#define BOX_SCHEMA_MAX_STEPS 1000000   /* schema applications and equality node visits */

/*
 * Keywords understood (draft 2020-12 semantics), all others ignored: type (a name or an array
 * of names among null, boolean, integer, number, string, array, object; "integer" is any
 * integral number, exact for int64 literals of box_json_parse), enum, const (deep equality,
 * numbers by value), anyOf, oneOf (exactly one must match), minimum, maximum, exclusiveMinimum,
 * exclusiveMaximum (numbers), minLength, maxLength (in Unicode code points), minItems,
 * maxItems, items (one schema for every item), properties, required, additionalProperties
 * (false or a schema). A schema is an object or a boolean (true accepts all, false nothing).
 *
 * Returns 0 when value is valid. Otherwise -1 with invalid_request, err->path the JSON path of
 * the first offending value ("$", "$.name", "$.a.b", "$.list[3]", "$[\"a b\"]") and the message
 * "at PATH: WHAT", e.g. "at $.items[2]: expected integer, got string". WHAT is one of:
 *   expected T, got T2                 (type; T may be "string or null")
 *   expected one of [...], got V       (enum)        expected V, got V2   (const)
 *   expected >= N, got M  (minimum; also >, <=, < for the others)
 *   expected at least N characters, got M   expected at most N characters, got M
 *   expected at least N items, got M        expected at most N items, got M
 *                                      ("character", "item" when N is 1)
 *   missing required property "k"      (path of the object)
 *   property not allowed               (additionalProperties false; path of the property)
 *   matches none of the anyOf schemas   matches none of the oneOf schemas
 *   matches oneOf schemas I and J, expected exactly one
 *   not allowed by schema false          no value   (value NULL)
 * Nesting past BOX_SCHEMA_MAX_DEPTH or more than BOX_SCHEMA_MAX_STEPS steps (pathological
 * anyOf/oneOf nesting) fails with limit_exceeded ("schema_depth" / "schema_steps"); internal
 * on OOM. The schema is not checked here: keywords of the wrong JSON type are ignored.
 */
int box_schema_validate(const cJSON *schema, const cJSON *value, struct box_err *err);

/*
 * Checks that schema is well-formed for box_schema_validate: an object or boolean; type a known
 * name or a non-empty array of distinct known names; enum an array; anyOf/oneOf non-empty
 * arrays of schemas; minimum etc. numbers; minLength etc. non-negative integers; items and
 * additionalProperties schemas (or booleans); properties an object of schemas; required an
 * array of strings. Returns 0, or -1 with invalid_request "at SCHEMA_PATH: WHAT" (err->path is
 * the path inside the schema, e.g. "$.properties.n.type"), limit_exceeded past
 * BOX_SCHEMA_MAX_DEPTH.
 */
int box_schema_check(const cJSON *schema, struct box_err *err);

/* "null", "boolean", "integer" (integral number), "number", "string", "array", "object". */
const char *box_schema_type_of(const cJSON *value);

#endif
