/* Command-line flags → a tool's JSON input, derived from the tool's input schema. */
#ifndef BOX_TOOLARGS_H
#define BOX_TOOLARGS_H

#include <cjson/cJSON.h>
#include "err.h"

#define BOX_TOOLARGS_FILE_MAX (16u << 20)  /* --json-file cap in bytes */
#define BOX_TOOLARGS_MAX_ARGS 4096          /* arguments looked at */

/*
 * The flag of a property: camelCase and snake_case become kebab-case ("maxItems" and
 * "max_items" → "max-items", no leading "--"). Writes at most n bytes including the NUL;
 * returns 0, or -1 when the name does not fit or is empty.
 */
int box_toolargs_flag_name(const char *prop, char *out, size_t n);

/*
 * Builds the input object of a tool from argv[0..argc) (the arguments after the tool name,
 * no program name) and input_schema (an object schema with "properties"; the result is
 * validated against the whole schema at the end with box_schema_validate).
 *
 * Forms, each flag also as --flag=VALUE:
 *   --flag VALUE          string, or number/integer (parsed as JSON numbers, finite; an
 *                         integer property refuses 1.5); enums are checked
 *   --flag / --no-flag    booleans (also --flag=true / --flag=false)
 *   --tag a --tag b       arrays: ["a", "b"], each item typed from "items" ("integer",
 *                         "number", "boolean", "string"; other items are parsed as JSON)
 *   --flag JSON           object properties and those without a usable type: parsed as JSON
 *   --json VALUE          the whole input as JSON; no other flag may be given with it
 *   --json-file PATH      the same read from PATH (relative to the cwd, at most
 *                         BOX_TOOLARGS_FILE_MAX bytes)
 *   --help, -h            *want_help = 1 and NULL is returned with err untouched
 * (the "type" of a property may also be an array with one non-null type, e.g. ["string","null"]).
 *
 * Returns a new object (cJSON_Delete it), or NULL with err: usage for argv mistakes, with the
 * messages
 *   Unknown flag: --x              Unexpected argument: x
 *   Missing value for flag: --x    Flag given twice: --x
 *   Missing required flag: --x     (err->path "$.prop")
 *   Invalid integer for --x: V     Invalid number for --x: V     Invalid boolean for --x: V
 *   Invalid value for --x: V (expected a|b|c)
 *   Invalid JSON for --x: V        --json cannot be combined with other flags
 *   Properties "a" and "b" both map to --x    (also invalid_request for a schema whose
 *                                               property takes a reserved flag: json, json-file, help)
 * invalid_request from box_json_parse for bad --json / --json-file text and from
 * box_schema_validate; io_error/not_found/limit_exceeded ("input_bytes") for --json-file.
 */
cJSON *box_toolargs_parse(const cJSON *input_schema, int argc, char **argv, int *want_help,
			  struct box_err *err);

/*
 * The help text for `box-tool NAME --help` (malloc'd, NUL-terminated, NULL on OOM): a usage
 * line, the description, then one line per property in schema order,
 *   "  --max-items <integer> (required)"  followed by "      DESCRIPTION" when the property has one,
 * with types string, integer, number, boolean, T[] for arrays, a|b|c for enums, json for
 * anything else; booleans read "--flag, --no-flag <boolean>". description may be NULL.
 */
char *box_toolargs_help(const char *tool_name, const char *description, const cJSON *input_schema);

#endif
