/* Tools: executables that read one JSON object on stdin and write one on stdout, declared by
 * a tool manifest or by the tool artifacts a box.lock pins; loading, describing, calling. */
#ifndef BOX_TOOLS_H
#define BOX_TOOLS_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "err.h"
#include "buf.h"
#include "verify.h"

#define BOX_TOOLS_FILE_MAX ((size_t)4 << 20)   /* a tool manifest, in bytes */
#define BOX_TOOLS_MAX 1024                     /* tools in one set */
#define BOX_TOOL_NAME_MAX 64                   /* [a-z][a-z0-9_-]{0,63} */
#define BOX_TOOL_DESCRIPTION_MAX 16384         /* bytes */
#define BOX_TOOL_ARGV_MAX 256                  /* items of command */
#define BOX_TOOL_ARG_MAX 4096                  /* bytes of one item of command */
#define BOX_TOOL_OUTPUT_MAX ((size_t)1 << 20)  /* default cap on a tool's stdout */
#define BOX_TOOL_DEFAULT_TIMEOUT_MS 30000
#define BOX_LUA_LIBRARY_MAX ((size_t)1 << 20)  /* the entry file require loads, in bytes */
#define BOX_TOOL_MAX_TIMEOUT_MS 3600000
#define BOX_TOOL_DEPTH_ENV "BOX_TOOL_DEPTH"    /* set to 1 in every tool's environment */
#define BOX_TOOL_LUA_MEMORY_DEFAULT ((int64_t)64 << 20)   /* a Lua tool's VM, in bytes */

/*
 * One tool, read-only once loaded (owned by its set).
 *   argv       NULL-terminated command; argv[0] is an absolute path, or a bare name looked up
 *              in PATH when the tool is called (manifests only). NULL for a Lua tool.
 *   lua_entry  absolute path of a Lua tool's script inside its artifact (box-run runs it in
 *              its own VM), NULL for a native tool
 *   dir        the manifest's directory or the artifact's directory in the store: relative
 *              commands resolved against it, and the tool's working directory
 *   artifact   "NAME@VERSION" of the artifact that defines it, NULL for a manifest's tool
 *   executor   1 when declared "executor": true or argv[0] is named box-run or box-sandbox
 *   pin        the store entry of an artifact's tool, verified before every call
 *              (lib/artifact/verify.h); NULL for a manifest's tool
 */
struct box_tool {
	char name[BOX_TOOL_NAME_MAX + 1];
	char *description;
	cJSON *input_schema;
	cJSON *output_schema;   /* NULL when none */
	char **argv;
	char *lua_entry;
	char *dir;
	char *artifact;
	int timeout_ms;         /* 0: BOX_TOOL_DEFAULT_TIMEOUT_MS */
	int destructive;
	int requires_approval;
	int executor;
	struct box_verify_pin *pin;
};

/* The tools of one manifest or lockfile, in file order (a lockfile's by artifact name). */
struct box_toolset {
	struct box_tool *tools;
	size_t n;
};

/* 1 if name matches [a-z][a-z0-9_-]{0,63}, 0 otherwise. */
int box_tool_name_valid(const char *name);

/*
 * Loads the tools of path, which is either
 *   - a tool manifest: {"tools": [TOOL, ...]} (optionally "$schema", a string), each TOOL an
 *     object with name, description, input_schema (a schema with "type": "object"),
 *     output_schema?, command (argv: 1 to BOX_TOOL_ARGV_MAX strings, command[0] non-empty),
 *     timeout_ms? (1 to BOX_TOOL_MAX_TIMEOUT_MS), destructive?, requires_approval?,
 *     executor? (booleans) and no other member. A command[0] with a slash that is not
 *     absolute is taken relative to the manifest's directory; or
 *   - a box.lock (it has "lock_version"): every artifact of kind tool is read from the
 *     store, $BOX_HOME/store/sha256/<hex>/ (BOX_HOME as in box(7)), once box_verify_entry
 *     found its tree equal to the pin's tree_digest (or to the digest the store recorded
 *     when the pin has none), and the "tools" of its
 *     box-artifact.json give its tools, with the same members, except that command is
 *     optional there: without it the artifact's entry is the command, or, for an entry
 *     ending in ".lua", the tool is a Lua tool (lua_entry). command[0] and the entry are
 *     paths inside the artifact, and must stay inside it once symlinks are resolved.
 * Tool names are unique across the whole set.
 *
 * Returns a set (box_tools_free it), or NULL with err:
 *   invalid_request with err->path for a bad manifest or box-artifact.json ("at PATH: WHAT",
 *     e.g. path "$.tools[1].comand", "unknown field"; "$.tools[0].input_schema.type"; a
 *     duplicate name at "$.tools[3].name"), prefixed "artifact NAME@VERSION: " for an
 *     artifact's; box_lock_read's errors for a bad box.lock;
 *   limit_exceeded (file past BOX_TOOLS_FILE_MAX, more than BOX_TOOLS_MAX tools);
 *   not_found (no such file; an artifact missing from the store: "... run box-pull");
 *   policy_denied (an artifact's command or entry leaves its directory);
 *   integrity_failed (an artifact pinned as kind tool whose box-artifact.json says otherwise;
 *     an artifact whose tree in the store differs from its tree digest, or has none recorded);
 *   io_error, internal.
 */
struct box_toolset *box_tools_load(const char *path, struct box_err *err);

/*
 * The source of the Lua library NAME for require: the entry file of the kind-lua artifact that
 * the box.lock PATH pins under NAME, read into src (its limit bounds the size) once the store
 * entry's tree matches its tree digest; label gets "NAME@VERSION". Errors: not_found (NAME not
 * pinned, pinned with another kind, or not in the store: "run box-pull"); integrity_failed (the
 * tree differs from its digest, has none recorded, or its box-artifact.json is not kind lua);
 * policy_denied (an entry that leads out of the artifact); limit_exceeded (a source past src's
 * limit); invalid_request, io_error, internal.
 */
int box_tools_library(const char *path, const char *name, struct box_buf *src, char *label,
		      size_t label_size, struct box_err *err);

/*
 * Checks the tool definitions of an artifact directory dir whose box-artifact.json text is
 * json (len bytes) with exactly the rules box_tools_load applies to the artifact once it is in
 * the store: every member, the tool names, input_schema and output_schema (box_schema_check,
 * input_schema of type "object"), each command (or the entry) a regular file inside dir.
 * A manifest without "tools" passes. Returns 0, or -1 with err (path inside
 * box-artifact.json, message "artifact NAME@VERSION: at PATH: WHAT").
 */
int box_tools_check_artifact(const char *dir, const char *json, size_t len,
			     struct box_err *err);

/* Frees set and everything in it; NULL is fine. */
void box_tools_free(struct box_toolset *set);

/* The tool called name, or NULL. Borrowed from set. */
const struct box_tool *box_tools_find(const struct box_toolset *set, const char *name);

/* 1 if code mode may offer t: not destructive, needs no approval, not an executor. */
int box_tool_code_mode_eligible(const struct box_tool *t);

#define BOX_TOOLS_CODE_MODE 1u   /* box_tools_describe: only the code-mode eligible tools */

/*
 * The JSON array that --describe and `box-tool list` print: one object per tool, in set
 * order, {"name", "description", "input_schema", "output_schema" (when set), "destructive",
 * "requires_approval"}; with BOX_TOOLS_CODE_MODE in flags only the eligible tools.
 * Returns a new array (cJSON_Delete it), NULL on OOM.
 */
cJSON *box_tools_describe(const struct box_toolset *set, unsigned flags);

/* 1 if this process runs as a tool (BOX_TOOL_DEPTH set and not "0"): it must not open code
 * mode again. */
int box_tools_nested(void);

struct box_tool_call_opts {
	int max_timeout_ms;       /* cap on the tool's timeout_ms; <= 0: none */
	size_t max_output;        /* cap on stdout in bytes; 0: BOX_TOOL_OUTPUT_MAX */
	const char *const *env;   /* NULL or extra "NAME=VALUE" / "NAME" (the host's value) */
	const char *cwd;          /* NULL: the tool's dir */
	const char *box_run;      /* box-run executable that runs Lua tools; NULL: unsupported */
	int64_t lua_memory_bytes; /* a Lua tool's memory limit; <= 0: BOX_TOOL_LUA_MEMORY_DEFAULT */
};

/*
 * Calls a native tool: input is validated against its input_schema, then written as one line
 * to the command's stdin. The command runs in its own process group with only fds 0-2 open,
 * in o->cwd (default t->dir), with an environment of PATH, HOME, LANG, BOX_TOOL_DEPTH=1 and
 * o->env (credential-shaped names refused), under the tool's timeout (capped by
 * o->max_timeout_ms); its stdout must be exactly one JSON object, valid against the output
 * schema when the tool has one. o may be NULL (defaults). A tool of an artifact (t->pin) runs
 * only after box_verify_entry found its store entry unchanged.
 *
 * Returns that object (cJSON_Delete it; integer literals keep their exact value, see
 * box_json_parse), or NULL with err:
 *   invalid_request: input invalid, err->path "$.items[2]" and the message
 *     "at $.items[2]: expected integer, got string" (box_schema_validate);
 *   unsupported: a Lua tool when o->box_run is NULL. With o->box_run, a Lua tool is run by
 *     box_tool_call_lua (its timeout capped likewise, o->lua_memory_bytes, no instruction
 *     budget; o->env and o->cwd do not apply) and fails as that says;
 *   not_found: a bare command not in PATH, or the command could not be found when run;
 *   integrity_failed (and box_verify_entry's other errors): the artifact's store entry
 *     changed since it was pulled, nothing was run;
 *   policy_denied: o->env names a credential-shaped variable;
 *   timeout ("limit": "timeout_ms"): the tool's process group was killed;
 *   limit_exceeded ("limit": "tool_output_bytes"): stdout passed the cap (killed);
 *   guest_error: the tool answered {"ok": false, "error": ...} ("tool X failed: CODE:
 *     MESSAGE"), exited non-zero or was killed by a signal ("tool X exited with status N:
 *     STDERR TAIL"), printed something else than one JSON object ("tool X printed invalid
 *     JSON: ..."), or an object that its output_schema refuses ("tool X returned invalid
 *     output: at PATH: WHAT", err->path PATH);
 *   io_error / internal.
 */
cJSON *box_tool_call(const struct box_tool *t, const cJSON *input,
		     const struct box_tool_call_opts *o, struct box_err *err);

/*
 * Calls a Lua tool (t->lua_entry): input is validated against its input_schema, then the
 * script runs in a box-run of its own, box_run (an executable path; box-run itself passes
 * "/proc/self/exe"), started with --json in t->dir with an environment of PATH, HOME, LANG
 * and BOX_TOOL_DEPTH=1 (so it cannot open code mode again) and without fs, http or tools.
 * The script sees the input as the global `input` and as its first argument (`...`); what it
 * returns is the answer, an object, valid against the output schema when the tool has one.
 * Limits: timeout_ms (<= 0: the tool's own, or BOX_TOOL_DEFAULT_TIMEOUT_MS), memory_bytes
 * (<= 0: BOX_TOOL_LUA_MEMORY_DEFAULT), max_instructions (<= 0: not counted); the answer is
 * capped at BOX_TOOL_OUTPUT_MAX bytes of JSON, print output is dropped. A tool of an artifact
 * (t->pin) is read only after box_verify_entry found its store entry unchanged.
 *
 * Returns the answer (cJSON_Delete it; exact integers, see box_json_parse), or NULL with err:
 *   invalid_request: input invalid, with err->path (box_schema_validate);
 *   unsupported: t is not a Lua tool, or box_run is NULL;
 *   integrity_failed (and box_verify_entry's other errors): the store entry changed;
 *   not_found / io_error: the script cannot be read, box_run cannot be run;
 *   timeout ("limit": "timeout_ms", configured timeout_ms): the script ran too long;
 *   limit_exceeded ("limit": "tool_output_bytes"): box-run printed too much;
 *   guest_error: the script raised or passed a limit of its own ("tool X failed: CODE:
 *     MESSAGE"), returned something else than an object ("tool X returned string, not an
 *     object"), an answer its output_schema refuses ("tool X returned invalid output: at
 *     PATH: WHAT", err->path PATH), or box-run died ("tool X exited with status N: ...");
 *   internal.
 */
cJSON *box_tool_call_lua(const struct box_tool *t, const cJSON *input, const char *box_run,
			 int timeout_ms, int64_t memory_bytes, int64_t max_instructions,
			 struct box_err *err);

/*
 * Finds the box-run that runs Lua tools for a host without one at hand (the sandbox's tool
 * socket): "box-run" in the absolute directories of $PATH, else BOX_BINDIR "/box-run"
 * (the configured bindir); the first regular executable file wins. Writes its path to out
 * (n bytes) and returns 0, or returns -1 with not_found.
 */
int box_tool_find_box_run(char *out, size_t n, struct box_err *err);

#endif
