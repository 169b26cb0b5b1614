/* Tool definitions for agent frameworks: a binary's --describe (name, description,
 * input_schema, output_schema) in the form MCP, OpenAI or Anthropic loads as it is. */
#ifndef BOX_DESCRIBE_H
#define BOX_DESCRIBE_H

#include <cjson/cJSON.h>
#include "err.h"

/*
 * The tool definition tooldef (borrowed: {"name", "description", "input_schema",
 * "output_schema", and members of box's own such as "tools" or "allowed_hosts"}) in format:
 *   "box"        a copy of tooldef, as it is
 *   "mcp"        an MCP Tool: {"name", "description", "inputSchema", "outputSchema"}
 *                (2025-11-25 server/tools, "Tool"; name [A-Za-z0-9_.-]{1,128})
 *   "openai"     a function tool of the Chat Completions API: {"type": "function",
 *                "function": {"name", "description", "parameters", "strict": false}}
 *                (name [A-Za-z0-9_-]{1,64})
 *   "anthropic"  a tool of the Messages API: {"name", "description", "input_schema"}
 *                (name [A-Za-z0-9_-]{1,64})
 * Only those members: box's own are left out (the description already says what they
 * hold). The schemas lose "$schema" and "$id" (JSON Schema 2020-12 is the dialect each of
 * these assumes, and an $id is no place to fetch from) and must be objects of "type":
 * "object" whose every "$ref" is local ("#..."): a schema that names another file is refused.
 * Returns a new object, or NULL with err: usage (an unknown format, "--format"), invalid_request
 * (a name the format does not allow, a schema that is no object or refers outside itself,
 * with its path), internal (OOM).
 */
cJSON *box_describe_format(const cJSON *tooldef, const char *format, struct box_err *err);

#endif
