#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipc.h"
#include "json.h"
#include "tools.h"
#include "libexec.h"
#include "seal.h"
#include "tap.h"
#include "banned.h"

static char dir[64];
static char fixtures[PATH_MAX];

static void put(const char *rel, const char *text, int mode)
{
	char path[PATH_MAX], cmd[PATH_MAX + 32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	if (system(cmd))
		return;
	f = fopen(path, "w");
	if (!f)
		return;
	fputs(text, f);
	fclose(f);
	chmod(path, (mode_t)mode);
}

/* Loads a manifest made of text and expects it refused with code and path. */
static void refused(const char *text, enum box_code code, const char *path, const char *msg,
		    const char *what)
{
	struct box_toolset *set;
	struct box_err err;
	char file[PATH_MAX];

	put("m.json", text, 0644);
	snprintf(file, sizeof(file), "%s/m.json", dir);
	box_err_init(&err);
	set = box_tools_load(file, &err);
	ok(set == NULL, "%s: refused", what);
	is_int(err.code, code, "... %s", box_err_code_name(code));
	if (path)
		is_str(err.path, path, "... path %s", path);
	if (msg)
		is_str(err.message, msg, "... message");
	box_tools_free(set);
}

#define TOOL(extra) "{\"name\": \"t\", \"description\": \"d\", " \
	"\"input_schema\": {\"type\": \"object\"}, \"command\": [\"/bin/true\"]" extra "}"

static void test_manifest_errors(void)
{
	struct box_err err;
	char big[64];
	size_t n = (5u << 20), i;
	char *huge;

	ok(box_tool_name_valid("a"), "name a");
	ok(box_tool_name_valid("get_weather-2"), "name get_weather-2");
	ok(!box_tool_name_valid("Get"), "upper case refused");
	ok(!box_tool_name_valid("2a"), "leading digit refused");
	ok(!box_tool_name_valid("a.b"), "dot refused");
	ok(!box_tool_name_valid(""), "empty refused");
	memset(big, 'a', 64);
	big[64 - 1] = 0;
	ok(box_tool_name_valid(big), "64 characters");
	ok(!box_tool_name_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
	   "65 characters refused");

	refused("{\"tools\": [", BOX_E_INVALID, "$", NULL, "malformed JSON");
	refused("[]", BOX_E_INVALID, "$", NULL, "not an object");
	refused("{\"tool\": []}", BOX_E_INVALID, "$.tool", "at $.tool: unknown field",
		"unknown top-level member");
	refused("{}", BOX_E_INVALID, "$.tools", "at $.tools: required", "no tools");
	refused("{\"tools\": {}}", BOX_E_INVALID, "$.tools", "at $.tools: expected array, got object",
		"tools not an array");
	refused("{\"tools\": [" TOOL("") ", {\"name\": \"u\", \"description\": \"d\", "
		"\"input_schema\": {\"type\": \"object\"}, \"comand\": [\"/bin/true\"]}]}",
		BOX_E_INVALID, "$.tools[1].comand", "at $.tools[1].comand: unknown field",
		"unknown member of a tool");
	refused("{\"tools\": [7]}", BOX_E_INVALID, "$.tools[0]",
		"at $.tools[0]: expected object, got integer", "a tool that is not an object");
	refused("{\"tools\": [{\"name\": \"Bad\", \"description\": \"d\", "
		"\"input_schema\": {\"type\": \"object\"}, \"command\": [\"/bin/true\"]}]}",
		BOX_E_INVALID, "$.tools[0].name", NULL, "bad name");
	refused("{\"tools\": [" TOOL("") ", " TOOL("") "]}", BOX_E_INVALID, "$.tools[1].name",
		"at $.tools[1].name: duplicate tool name \"t\"", "duplicate names");
	refused("{\"tools\": [{\"name\": \"t\", \"input_schema\": {\"type\": \"object\"}, "
		"\"command\": [\"/bin/true\"]}]}", BOX_E_INVALID, "$.tools[0].description",
		"at $.tools[0].description: required", "no description");
	refused("{\"tools\": [{\"name\": \"t\", \"description\": \"d\", \"command\": [\"x\"]}]}",
		BOX_E_INVALID, "$.tools[0].input_schema", NULL, "no input_schema");
	refused("{\"tools\": [{\"name\": \"t\", \"description\": \"d\", \"input_schema\": "
		"{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integr\"}}}, "
		"\"command\": [\"/bin/true\"]}]}", BOX_E_INVALID,
		"$.tools[0].input_schema.properties.n.type", NULL, "bad input schema");
	refused("{\"tools\": [{\"name\": \"t\", \"description\": \"d\", \"input_schema\": "
		"{\"type\": \"string\"}, \"command\": [\"/bin/true\"]}]}", BOX_E_INVALID,
		"$.tools[0].input_schema.type", NULL, "input schema not of an object");
	refused("{\"tools\": [" TOOL(", \"output_schema\": {\"minItems\": -1}") "]}", BOX_E_INVALID,
		"$.tools[0].output_schema.minItems", NULL, "bad output schema");
	refused("{\"tools\": [{\"name\": \"t\", \"description\": \"d\", "
		"\"input_schema\": {\"type\": \"object\"}}]}", BOX_E_INVALID, "$.tools[0].command",
		"at $.tools[0].command: required", "no command");
	refused("{\"tools\": [{\"name\": \"t\", \"description\": \"d\", "
		"\"input_schema\": {\"type\": \"object\"}, \"command\": []}]}", BOX_E_INVALID,
		"$.tools[0].command", NULL, "empty command");
	refused("{\"tools\": [{\"name\": \"t\", \"description\": \"d\", "
		"\"input_schema\": {\"type\": \"object\"}, \"command\": [\"/bin/x\", 1]}]}",
		BOX_E_INVALID, "$.tools[0].command[1]",
		"at $.tools[0].command[1]: expected string, got integer", "non-string argument");
	refused("{\"tools\": [{\"name\": \"t\", \"description\": \"d\", "
		"\"input_schema\": {\"type\": \"object\"}, \"command\": [\"\"]}]}",
		BOX_E_INVALID, "$.tools[0].command[0]", NULL, "empty command[0]");
	refused("{\"tools\": [" TOOL(", \"timeout_ms\": 0") "]}", BOX_E_INVALID,
		"$.tools[0].timeout_ms", NULL, "timeout_ms 0");
	refused("{\"tools\": [" TOOL(", \"destructive\": \"yes\"") "]}", BOX_E_INVALID,
		"$.tools[0].destructive", NULL, "destructive not a boolean");

	huge = malloc(n + 64);
	snprintf(huge, 32, "{\"$schema\": \"");
	i = strlen(huge);
	memset(huge + i, 'x', n);
	snprintf(huge + i + n, 32, "\", \"tools\": []}");
	refused(huge, BOX_E_LIMIT, NULL, NULL, "a 5 MiB manifest");
	free(huge);

	box_err_init(&err);
	ok(box_tools_load("/nonexistent/tools.json", &err) == NULL, "missing file");
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");
}

static const struct box_tool *must(const struct box_toolset *set, const char *name)
{
	const struct box_tool *t = box_tools_find(set, name);

	if (!t) {
		printf("Bail out! no tool %s\n", name);
		exit(1);
	}
	return t;
}

static void test_load(const struct box_toolset *set)
{
	const struct box_tool *t;
	char want[PATH_MAX + 16];
	cJSON *d, *e;
	char *s;

	is_int(set->n, 14, "fixture manifest: 14 tools");
	ok(box_tools_find(set, "nope") == NULL, "find of an unknown name");
	t = must(set, "echo");
	snprintf(want, sizeof(want), "%s/./echo.sh", fixtures);
	is_str(t->argv[0], want, "relative command resolved against the manifest's directory");
	is_str(t->dir, fixtures, "... dir is the manifest's directory");
	is_int(t->timeout_ms, 0, "... default timeout");
	is_str(must(set, "cat")->argv[0], "cat", "bare command kept for PATH");
	ok(box_tool_code_mode_eligible(must(set, "echo")), "echo eligible");
	ok(!box_tool_code_mode_eligible(must(set, "rm")), "destructive not eligible");
	ok(!box_tool_code_mode_eligible(must(set, "deploy")), "requires_approval not eligible");
	ok(must(set, "lua")->executor, "a box-run command is an executor");
	ok(!box_tool_code_mode_eligible(must(set, "lua")), "... not eligible");
	ok(!box_tool_code_mode_eligible(must(set, "shell")), "executor: true not eligible");

	d = box_tools_describe(set, 0);
	is_int(cJSON_GetArraySize(d), 14, "describe lists all");
	e = cJSON_GetArrayItem(d, 0);
	s = cJSON_PrintUnformatted(e);
	is_str(s, "{\"name\":\"echo\",\"description\":\"Answers its input\",\"input_schema\":"
	       "{\"type\":\"object\",\"properties\":{\"items\":{\"type\":\"array\",\"items\":"
	       "{\"type\":\"integer\"}}}},\"destructive\":false,\"requires_approval\":false}",
	       "... an entry");
	free(s);
	ok(cJSON_GetObjectItem(cJSON_GetArrayItem(d, 8), "output_schema") != NULL,
	   "... output_schema when set");
	cJSON_Delete(d);
	d = box_tools_describe(set, BOX_TOOLS_CODE_MODE);
	is_int(cJSON_GetArraySize(d), 10, "code mode describes the 10 eligible ones");
	cJSON_ArrayForEach(e, d)
		if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")), "rm") ||
		    !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")), "shell"))
			ok(0, "... %s offered", cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")));
	cJSON_Delete(d);

	unsetenv(BOX_TOOL_DEPTH_ENV);
	ok(!box_tools_nested(), "not nested");
	setenv(BOX_TOOL_DEPTH_ENV, "1", 1);
	ok(box_tools_nested(), "nested with BOX_TOOL_DEPTH=1");
	setenv(BOX_TOOL_DEPTH_ENV, "0", 1);
	ok(!box_tools_nested(), "not with 0");
	unsetenv(BOX_TOOL_DEPTH_ENV);
}

static cJSON *call(const struct box_toolset *set, const char *name, const char *input,
		   const struct box_tool_call_opts *o, struct box_err *err)
{
	cJSON *in = box_json_parse(input, strlen(input), err), *out;

	box_err_init(err);
	out = box_tool_call(must(set, name), in, o, err);
	cJSON_Delete(in);
	return out;
}

static void test_calls(const struct box_toolset *set)
{
	char pidfile[PATH_MAX + 16], want[PATH_MAX + 16];
	const char *penv[] = { pidfile, NULL };
	const char *secret[] = { "MY_API_KEY=x", NULL };
	struct box_tool_call_opts o = { .env = penv };
	struct box_err err;
	const cJSON *env;
	cJSON *out;
	char *s;
	pid_t child;
	FILE *f;
	int i;

	out = call(set, "echo", "{\"items\": [1, 2, 12345678901234567]}", NULL, &err);
	ok(out != NULL, "echo tool");
	s = out ? cJSON_PrintUnformatted(cJSON_GetObjectItem(out, "got")) : NULL;
	ok(s && strstr(s, "\"items\":[1,2,"), "... got its input back");
	free(s);
	{
		int64_t v = 0;

		ok(out && box_json_int64(cJSON_GetArrayItem(cJSON_GetObjectItem(
			cJSON_GetObjectItem(out, "got"), "items"), 2), &v) && v == 12345678901234567LL,
		   "... integers stay exact");
	}
	cJSON_Delete(out);

	out = call(set, "echo", "{\"items\": [1, 2, \"3\"]}", NULL, &err);
	ok(out == NULL, "invalid input");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	is_str(err.path, "$.items[2]", "... path $.items[2]");
	is_str(err.message, "at $.items[2]: expected integer, got string", "... message");

	out = call(set, "cat", "{\"a\": 1}", NULL, &err);
	ok(out != NULL && cJSON_GetObjectItem(out, "a"), "bare command found in PATH");
	cJSON_Delete(out);

	setenv("GITHUB_TOKEN", "ghp_secret", 1);
	setenv("OPENAI_API_KEY", "sk-secret", 1);
	setenv("UNRELATED_HOST_VAR", "x", 1);
	setenv(BOX_TOOL_DEPTH_ENV, "7", 1);
	out = call(set, "env", "{}", NULL, &err);
	env = cJSON_GetObjectItem(out, "env");
	ok(out != NULL, "env tool: %s", out ? "ran" : err.message);
	ok(env && !cJSON_GetObjectItem(env, "GITHUB_TOKEN"), "... no GITHUB_TOKEN");
	ok(env && !cJSON_GetObjectItem(env, "OPENAI_API_KEY"), "... no OPENAI_API_KEY");
	ok(env && !cJSON_GetObjectItem(env, "UNRELATED_HOST_VAR"), "... no other host variable");
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(env, BOX_TOOL_DEPTH_ENV)), "1",
	       "... BOX_TOOL_DEPTH=1");
	ok(env && cJSON_GetObjectItem(env, "PATH"), "... PATH");
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(out, "cwd")), fixtures,
	       "... runs in the manifest's directory");
	is_int(cJSON_GetArraySize(cJSON_GetObjectItem(out, "fds")), 0, "... only fds 0-2");
	cJSON_Delete(out);
	unsetenv(BOX_TOOL_DEPTH_ENV);
	o.env = secret;
	out = call(set, "env", "{}", &o, &err);
	ok(out == NULL, "credential-shaped variable asked for");
	is_int(err.code, BOX_E_POLICY, "... policy_denied");
	o.env = penv;

	snprintf(pidfile, sizeof(pidfile), "PIDFILE=%s/sleep.pid", dir);
	out = call(set, "sleep", "{}", &o, &err);
	ok(out == NULL, "a tool that times out");
	is_int(err.code, BOX_E_TIMEOUT, "... timeout");
	is_str(err.limit, "timeout_ms", "... limit timeout_ms");
	is_int(err.configured, 300, "... its own timeout_ms 300");
	child = -1;
	if ((f = fopen(pidfile + 8, "r"))) {
		if (fscanf(f, "%d", &child) != 1)
			child = -1;
		fclose(f);
	}
	for (i = 0; i < 100 && child > 0 && kill(child, 0) == 0; i++)
		usleep(20000);
	ok(child > 0 && kill(child, 0) < 0, "... its child was killed too");
	o.max_timeout_ms = 100;
	out = call(set, "sleep", "{}", &o, &err);
	is_int(err.code, BOX_E_TIMEOUT, "timeout capped by the caller");
	is_int(err.configured, 100, "... configured 100");
	o.max_timeout_ms = 0;

	out = call(set, "garbage", "{}", NULL, &err);
	ok(out == NULL, "a tool printing text");
	is_int(err.code, BOX_E_GUEST, "... guest_error");
	ok(!strncmp(err.message, "tool garbage printed invalid JSON", 33), "... %s", err.message);
	out = call(set, "array", "{}", NULL, &err);
	ok(out == NULL, "a tool printing an array");
	is_int(err.code, BOX_E_GUEST, "... guest_error");
	ok(!strncmp(err.message, "tool array printed invalid JSON", 31), "... %s", err.message);

	out = call(set, "fail", "{}", NULL, &err);
	ok(out == NULL, "a tool exiting 2 after printing an object");
	is_int(err.code, BOX_E_GUEST, "... guest_error");
	is_str(err.message, "tool fail exited with status 2: early line boom: disk on fire",
	       "... status and stderr tail");

	out = call(set, "flood", "{}", NULL, &err);
	ok(out == NULL, "a tool flooding stdout");
	is_int(err.code, BOX_E_LIMIT, "... limit_exceeded");
	is_str(err.limit, "tool_output_bytes", "... limit tool_output_bytes");
	is_int(err.configured, BOX_TOOL_OUTPUT_MAX, "... 1 MiB");
	o.max_output = 4096;
	out = call(set, "flood", "{}", &o, &err);
	is_int(err.configured, 4096, "... or the caller's cap");
	o.max_output = 0;

	out = call(set, "okfalse", "{}", NULL, &err);
	ok(out == NULL, "a tool answering ok: false");
	is_int(err.code, BOX_E_GUEST, "... guest_error, never a success");
	is_str(err.message, "tool okfalse failed: not_found: no such city", "... its words");

	out = call(set, "count", "{\"value\": 3}", NULL, &err);
	ok(out != NULL, "output matching output_schema");
	cJSON_Delete(out);
	out = call(set, "count", "{\"value\": \"three\"}", NULL, &err);
	ok(out == NULL, "output refused by output_schema");
	is_int(err.code, BOX_E_GUEST, "... guest_error");
	is_str(err.path, "$.count", "... path $.count");
	is_str(err.message, "tool count returned invalid output: at $.count: expected integer, got string",
	       "... message");

	snprintf(want, sizeof(want), "%s", dir);
	o.cwd = want;
	o.env = NULL;
	out = call(set, "env", "{}", &o, &err);
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(out, "cwd")), dir, "cwd given by the caller");
	cJSON_Delete(out);
}

static void test_missing_command(void)
{
	struct box_toolset *set;
	struct box_err err;
	char file[PATH_MAX];
	cJSON *in = cJSON_CreateObject();

	put("m.json", "{\"tools\": [{\"name\": \"x\", \"description\": \"d\", "
	    "\"input_schema\": {\"type\": \"object\"}, \"command\": [\"no-such-command-here\"]},"
	    "{\"name\": \"y\", \"description\": \"d\", "
	    "\"input_schema\": {\"type\": \"object\"}, \"command\": [\"bin/missing\"]}]}", 0644);
	snprintf(file, sizeof(file), "%s/m.json", dir);
	box_err_init(&err);
	set = box_tools_load(file, &err);
	ok(set != NULL, "manifest with missing commands loads");
	if (!set)
		return;
	box_err_init(&err);
	ok(box_tool_call(must(set, "x"), in, NULL, &err) == NULL, "bare command not in PATH");
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");
	box_err_init(&err);
	ok(box_tool_call(must(set, "y"), in, NULL, &err) == NULL, "relative command missing");
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");
	box_tools_free(set);
	cJSON_Delete(in);
}

#define D1 "1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "3333333333333333333333333333333333333333333333333333333333333333"

static void lock_with(const char *entries)
{
	char text[4096];

	snprintf(text, sizeof(text), "{\"lock_version\": 1, \"artifacts\": [%s]}", entries);
	put("box.lock", text, 0644);
}

#define ENTRY(name, d, kind) "{\"name\": \"" name "\", \"version\": \"1.0.0\", " \
	"\"digest\": \"sha256:" d "\", \"kind\": \"" kind "\", \"source\": \"oci:/r\"}"

/* the store entry hex under dir/home, made by hand here, sealed as a pull would */
static void seal(const char *hex)
{
	char root[PATH_MAX];

	snprintf(root, sizeof(root), "%s/home/store", dir);
	seal_entry(root, hex);
}

static struct box_toolset *load_lock(struct box_err *err)
{
	char file[PATH_MAX];

	snprintf(file, sizeof(file), "%s/box.lock", dir);
	box_err_init(err);
	return box_tools_load(file, err);
}

static void test_lock(void)
{
	struct box_toolset *set;
	const struct box_tool *t;
	struct box_err err;
	char home[PATH_MAX], want[2 * PATH_MAX], real[PATH_MAX];
	cJSON *in = cJSON_CreateObject(), *out;

	snprintf(home, sizeof(home), "%s/home", dir);
	setenv("BOX_HOME", home, 1);
	put("home/store/sha256/" D1 "/box-artifact.json",
	    "{\"name\": \"acme/greet\", \"version\": \"1.0.0\", \"kind\": \"tool\", "
	    "\"entry\": \"main.lua\", \"tools\": ["
	    "{\"name\": \"greet\", \"description\": \"Lua\", \"input_schema\": {\"type\": \"object\"}},"
	    "{\"name\": \"shout\", \"description\": \"native\", \"input_schema\": {\"type\": \"object\"},"
	    " \"command\": [\"bin/shout.sh\"]}]}", 0644);
	put("home/store/sha256/" D1 "/main.lua", "return {}\n", 0644);
	put("home/store/sha256/" D1 "/bin/shout.sh", "#!/bin/sh\necho '{\"shout\": \"HI\"}'\n", 0755);
	put("home/store/sha256/" D2 "/box-artifact.json",
	    "{\"name\": \"acme/lib\", \"version\": \"1.0.0\", \"kind\": \"lua\", \"entry\": \"x.lua\"}",
	    0644);

	seal(D1);
	seal(D2);
	lock_with(ENTRY("acme/greet", D1, "tool") "," ENTRY("acme/lib", D2, "lua"));
	set = load_lock(&err);
	ok(set != NULL, "box.lock with a tool artifact: %s", set ? "loaded" : err.message);
	if (!set)
		return;
	is_int(set->n, 2, "... its two tools, the lua artifact skipped");
	snprintf(want, sizeof(want), "%s/store/sha256/" D1, home);
	if (!realpath(want, real))
		real[0] = 0;
	t = must(set, "greet");
	snprintf(want, sizeof(want), "%s/main.lua", real);
	is_str(t->lua_entry, want, "... a Lua tool gets lua_entry");
	ok(t->argv == NULL, "... and no command");
	is_str(t->artifact, "acme/greet@1.0.0", "... its artifact");
	ok(box_tool_code_mode_eligible(t), "... eligible");
	box_err_init(&err);
	ok(box_tool_call(t, in, NULL, &err) == NULL, "calling a Lua tool here");
	is_int(err.code, BOX_E_UNSUPPORTED, "... unsupported");
	t = must(set, "shout");
	snprintf(want, sizeof(want), "%s/bin/shout.sh", real);
	is_str(t->argv[0], want, "... a native command inside the artifact");
	is_str(t->dir, real, "... dir is the artifact");
	box_err_init(&err);
	out = box_tool_call(t, in, NULL, &err);
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(out, "shout")), "HI", "... it runs");
	cJSON_Delete(out);
	/* the store changes under a loaded set: the next call is refused before anything runs */
	snprintf(want, sizeof(want), "#!/bin/sh\ntouch '%s/ran'\necho '{}'\n", dir);
	put("home/store/sha256/" D1 "/bin/shout.sh", want, 0755);
	box_err_init(&err);
	out = box_tool_call(t, in, NULL, &err);
	ok(out == NULL, "a tool whose store entry changed after the load is refused");
	snprintf(want, sizeof(want), "%s/ran", dir);
	ok(access(want, F_OK) != 0, "... and did not run");
	if (getenv("BOX_LIBEXEC_DIR"))
		is_int(err.code, BOX_E_INTEGRITY, "... integrity_failed (%s)", err.message);
	else
		tap_skip("no BOX_LIBEXEC_DIR: the box-verify helper cannot tell what changed");
	cJSON_Delete(out);
	box_tools_free(set);
	set = load_lock(&err);
	ok(set == NULL, "loading it again is refused");
	if (getenv("BOX_LIBEXEC_DIR"))
		ok(err.code == BOX_E_INTEGRITY && strstr(err.message, "artifact acme/greet@1.0.0: ") &&
		   strstr(err.message, "bin/shout.sh changed"), "... integrity_failed: %s", err.message);
	else
		tap_skip("no BOX_LIBEXEC_DIR: the box-verify helper cannot tell what changed");
	put("home/store/sha256/" D1 "/bin/shout.sh", "#!/bin/sh\necho '{\"shout\": \"HI\"}'\n", 0755);
	seal(D1);

	lock_with(ENTRY("acme/gone", D3, "tool"));
	set = load_lock(&err);
	ok(set == NULL, "artifact missing from the store");
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");
	ok(strstr(err.message, "box-pull") != NULL, "... says to pull it");

	lock_with(ENTRY("acme/lib", D2, "tool"));
	set = load_lock(&err);
	ok(set == NULL, "pinned as a tool, but it is not");
	is_int(err.code, BOX_E_INTEGRITY, "... integrity_failed");

	put("home/store/sha256/" D3 "/box-artifact.json",
	    "{\"name\": \"acme/evil\", \"version\": \"1.0.0\", \"kind\": \"tool\", \"tools\": ["
	    "{\"name\": \"evil\", \"description\": \"d\", \"input_schema\": {\"type\": \"object\"},"
	    " \"command\": [\"../" D1 "/bin/shout.sh\"]}]}", 0644);
	seal(D3);
	lock_with(ENTRY("acme/evil", D3, "tool"));
	set = load_lock(&err);
	ok(set == NULL, "command leaving the artifact with ..");
	is_int(err.code, BOX_E_POLICY, "... policy_denied");
	is_str(err.path, "$.tools[0].command[0]", "... path");
	ok(!strncmp(err.message, "artifact acme/evil@1.0.0: at $.tools[0].command[0]: ", 52),
	   "... message names the artifact: %s", err.message);

	put("home/store/sha256/" D3 "/box-artifact.json",
	    "{\"name\": \"acme/evil\", \"version\": \"1.0.0\", \"kind\": \"tool\", \"tools\": ["
	    "{\"name\": \"evil\", \"description\": \"d\", \"input_schema\": {\"type\": \"object\"},"
	    " \"command\": [\"/bin/sh\"]}]}", 0644);
	seal(D3);
	set = load_lock(&err);
	ok(set == NULL, "absolute command in an artifact");
	is_int(err.code, BOX_E_POLICY, "... policy_denied");

	snprintf(want, sizeof(want), "%s/store/sha256/" D3 "/link", home);
	if (symlink("/bin/sh", want))
		printf("# symlink failed\n");
	put("home/store/sha256/" D3 "/box-artifact.json",
	    "{\"name\": \"acme/evil\", \"version\": \"1.0.0\", \"kind\": \"tool\", \"tools\": ["
	    "{\"name\": \"evil\", \"description\": \"d\", \"input_schema\": {\"type\": \"object\"},"
	    " \"command\": [\"link\"]}]}", 0644);
	seal(D3);
	set = load_lock(&err);
	ok(set == NULL, "command through a symlink out of the artifact");
	is_int(err.code, BOX_E_POLICY, "... policy_denied");

	put("home/store/sha256/" D3 "/box-artifact.json",
	    "{\"name\": \"acme/evil\", \"version\": \"1.0.0\", \"kind\": \"tool\", \"tools\": ["
	    "{\"name\": \"shout\", \"description\": \"d\", \"input_schema\": {\"type\": \"object\"},"
	    " \"command\": [\"box-artifact.json\"]}]}", 0644);
	seal(D3);
	lock_with(ENTRY("acme/evil", D3, "tool") "," ENTRY("acme/greet", D1, "tool"));
	set = load_lock(&err);
	ok(set == NULL, "two artifacts defining one name");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	ok(strstr(err.message, "duplicate tool name \"shout\"") != NULL, "... %s", err.message);

	put("home/store/sha256/" D3 "/box-artifact.json",
	    "{\"name\": \"acme/evil\", \"version\": \"1.0.0\", \"kind\": \"tool\", \"tools\": ["
	    "{\"name\": \"x\", \"description\": \"d\", \"input_schema\": {\"type\": \"object\"},"
	    " \"run\": \"y\"}]}", 0644);
	seal(D3);
	lock_with(ENTRY("acme/evil", D3, "tool"));
	set = load_lock(&err);
	ok(set == NULL, "unknown member in an artifact's tool");
	is_str(err.path, "$.tools[0].run", "... path");

	lock_with("{\"name\": 1}");
	set = load_lock(&err);
	ok(set == NULL, "malformed box.lock");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	cJSON_Delete(in);
}

#define D4 "4444444444444444444444444444444444444444444444444444444444444444"

/* A Lua tool called with box_tool_call_lua: a tool of the test artifact D4, input as JSON. */
static cJSON *lua_call(const struct box_toolset *set, const char *name, const char *input,
		       const char *box_run, int timeout_ms, int64_t memory_bytes,
		       int64_t max_instructions, struct box_err *err)
{
	cJSON *in = box_json_parse(input, strlen(input), err), *out;

	box_err_init(err);
	out = box_tool_call_lua(must(set, name), in, box_run, timeout_ms, memory_bytes,
				max_instructions, err);
	cJSON_Delete(in);
	return out;
}

static void test_find_box_run(const char *builddir)
{
	char out[PATH_MAX], want[PATH_MAX], path[2 * PATH_MAX], bindir[PATH_MAX];
	const char *saved = getenv("PATH");
	struct box_err err;
	int rc;

	snprintf(path, sizeof(path), "/nonexistent:.:%s:/usr/bin", builddir);
	setenv("PATH", path, 1);
	box_err_init(&err);
	ok(box_tool_find_box_run(out, sizeof(out), &err) == 0, "box-run found in PATH");
	snprintf(want, sizeof(want), "%s/box-run", builddir);
	is_str(out, want, "... the first one in PATH, past missing and relative entries");
	box_err_init(&err);
	is_int(box_tool_find_box_run(out, 8, &err), -1, "... not when out is too short for it");

	/* only BOX_BINDIR is left: found there when box is installed, not_found otherwise */
	setenv("PATH", "/nonexistent:relative", 1);
	snprintf(bindir, sizeof(bindir), "%s/box-run", box_libexec_bindir());
	box_err_init(&err);
	rc = box_tool_find_box_run(out, sizeof(out), &err);
	if (access(bindir, X_OK) == 0) {
		is_int(rc, 0, "box-run not in PATH: the one in box_libexec_bindir()");
		is_str(out, bindir, "... %s", bindir);
	} else {
		is_int(rc, -1, "box-run neither in PATH nor in box_libexec_bindir()");
		is_int(err.code, BOX_E_NOT_FOUND, "... not_found");
		ok(strstr(err.message, box_libexec_bindir()) != NULL, "... names the bindir: %s", err.message);
	}
	if (saved)
		setenv("PATH", saved, 1);
	else
		unsetenv("PATH");
}

static void test_lua(void)
{
	const char *builddir = getenv("BOX_BUILDDIR");
	struct box_tool_call_opts o = { 0 };
	char box_run[PATH_MAX];
	struct box_toolset *set;
	struct box_err err;
	cJSON *out;
	int64_t t0;

	if (!builddir) {
		tap_skip("Lua tools need the build's box-run: BOX_BUILDDIR is not set (make check sets it)");
		return;
	}
	snprintf(box_run, sizeof(box_run), "%s/box-run", builddir);
	if (access(box_run, X_OK) != 0) {
		tap_skip("Lua tools need the build's box-run, and BOX_BUILDDIR has none");
		return;
	}
	test_find_box_run(builddir);
	put("home/store/sha256/" D4 "/box-artifact.json",
	    "{\"name\": \"acme/lua\", \"version\": \"1.0.0\", \"kind\": \"tool\", "
	    "\"entry\": \"main.lua\", \"tools\": ["
	    "{\"name\": \"greet\", \"description\": \"Lua\", \"timeout_ms\": 5000,"
	    " \"input_schema\": {\"type\": \"object\", \"required\": [\"who\"],"
	    "  \"properties\": {\"who\": {\"type\": \"string\"}, \"n\": {\"type\": \"integer\"}}},"
	    " \"output_schema\": {\"type\": \"object\", \"required\": [\"greeting\"]}},"
	    "{\"name\": \"native\", \"description\": \"d\", \"input_schema\": {\"type\": \"object\"},"
	    " \"command\": [\"box-artifact.json\"]}]}", 0644);
	put("home/store/sha256/" D4 "/main.lua",
	    "local arg1 = ...\n"
	    "if input.who == \"nobody\" then return {nope = 1} end\n"
	    "if input.who == \"raise\" then error(\"boom\") end\n"
	    "if input.who == \"string\" then return \"x\" end\n"
	    "if input.who == \"loop\" then while true do end end\n"
	    "if input.who == \"count\" then for i = 1, 1000000 do end end\n"
	    "if input.who == \"hog\" then local t = {} for i = 1, 300000 do t[i] = i end end\n"
	    "if input.who == \"print\" then print(\"noise\") end\n"
	    "return {greeting = \"hello \" .. input.who, n = input.n, same = arg1.who == input.who}\n",
	    0644);
	seal(D4);
	lock_with(ENTRY("acme/lua", D4, "tool"));
	set = load_lock(&err);
	ok(set != NULL, "box.lock with a Lua tool: %s", set ? "loaded" : err.message);
	if (!set)
		return;

	out = lua_call(set, "greet", "{\"who\": \"ada\", \"n\": 9007199254740993}", box_run, 0, 0,
		       0, &err);
	ok(out != NULL, "box_tool_call_lua runs the script in box-run%s%s", out ? "" : ": ",
	   out ? "" : err.message);
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(out, "greeting")), "hello ada",
	       "... the script sees input and its answer comes back");
	ok(cJSON_IsTrue(cJSON_GetObjectItem(out, "same")), "... the input is also its first argument");
	ok(box_json_int_value(cJSON_GetObjectItem(out, "n"), 0) == INT64_C(9007199254740993),
	   "... 2^53+1 goes and comes back exactly");
	cJSON_Delete(out);

	out = lua_call(set, "greet", "{\"who\": \"print\"}", box_run, 0, 0, 0, &err);
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(out, "greeting")), "hello print",
	       "what the script prints does not spoil its answer");
	cJSON_Delete(out);

	out = lua_call(set, "greet", "{\"n\": 1}", box_run, 0, 0, 0, &err);
	ok(out == NULL, "an input its schema refuses");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	ok(strstr(err.message, "who") != NULL, "... naming the field: %s", err.message);
	cJSON_Delete(out);

	out = lua_call(set, "greet", "{\"who\": \"nobody\"}", box_run, 0, 0, 0, &err);
	ok(out == NULL, "an answer its output_schema refuses");
	is_int(err.code, BOX_E_GUEST, "... guest_error");
	ok(!strncmp(err.message, "tool greet returned invalid output: ", 36), "... %s", err.message);
	cJSON_Delete(out);

	out = lua_call(set, "greet", "{\"who\": \"raise\"}", box_run, 0, 0, 0, &err);
	ok(out == NULL, "a script that raises");
	is_int(err.code, BOX_E_GUEST, "... guest_error");
	ok(!strncmp(err.message, "tool greet failed: guest_error: ", 32) &&
	   strstr(err.message, "boom"), "... with its message: %s", err.message);

	out = lua_call(set, "greet", "{\"who\": \"string\"}", box_run, 0, 0, 0, &err);
	ok(out == NULL, "a script that returns a string");
	is_int(err.code, BOX_E_GUEST, "... guest_error");
	is_str(err.message, "tool greet returned string, not an object", "... message");

	t0 = box_now_ms();
	out = lua_call(set, "greet", "{\"who\": \"loop\"}", box_run, 300, 0, 0, &err);
	ok(out == NULL, "a script that runs past timeout_ms");
	is_int(err.code, BOX_E_TIMEOUT, "... timeout");
	is_str(err.limit, "timeout_ms", "... limit timeout_ms");
	ok(err.configured == 300, "... configured 300");
	ok(box_now_ms() - t0 < 2000, "... stopped at its deadline");

	out = lua_call(set, "greet", "{\"who\": \"count\"}", box_run, 0, 0, 10000, &err);
	ok(out == NULL, "a script past max_instructions");
	is_int(err.code, BOX_E_GUEST, "... guest_error");
	ok(strstr(err.message, "limit_exceeded") != NULL, "... limit_exceeded: %s", err.message);

	out = lua_call(set, "greet", "{\"who\": \"count\"}", box_run, 0, 0, 0, &err);
	ok(out != NULL, "... not counted when max_instructions is 0");
	cJSON_Delete(out);

	out = lua_call(set, "greet", "{\"who\": \"hog\"}", box_run, 0, 1 << 20, 0, &err);
	ok(out == NULL, "a script past memory_bytes");
	is_int(err.code, BOX_E_GUEST, "... guest_error");
	ok(strstr(err.message, "limit_exceeded") != NULL, "... limit_exceeded: %s", err.message);
	out = lua_call(set, "greet", "{\"who\": \"hog\"}", box_run, 0, 0, 0, &err);
	ok(out != NULL, "... within the default of 64 MiB%s%s", out ? "" : ": ",
	   out ? "" : err.message);
	cJSON_Delete(out);

	out = lua_call(set, "greet", "{\"who\": \"ada\"}", "/nonexistent/box-run", 0, 0, 0, &err);
	ok(out == NULL, "a box-run that does not exist");
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");

	out = lua_call(set, "greet", "{\"who\": \"ada\"}", NULL, 0, 0, 0, &err);
	ok(out == NULL, "no box-run given");
	is_int(err.code, BOX_E_UNSUPPORTED, "... unsupported");

	out = lua_call(set, "native", "{}", box_run, 0, 0, 0, &err);
	ok(out == NULL, "a native tool");
	is_int(err.code, BOX_E_UNSUPPORTED, "... unsupported");

	/* box_tool_call runs Lua tools when given a box-run, under its timeout cap */
	o.box_run = box_run;
	out = call(set, "greet", "{\"who\": \"bob\"}", &o, &err);
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(out, "greeting")), "hello bob",
	       "box_tool_call with a box-run runs a Lua tool");
	cJSON_Delete(out);
	o.max_timeout_ms = 200;
	out = call(set, "greet", "{\"who\": \"loop\"}", &o, &err);
	ok(out == NULL, "... a Lua tool past max_timeout_ms");
	is_int(err.code, BOX_E_TIMEOUT, "... timeout");
	ok(err.configured == 200, "... at the cap, not the tool's 5000");
	o.max_timeout_ms = 0;
	o.lua_memory_bytes = 1 << 20;
	out = call(set, "greet", "{\"who\": \"hog\"}", &o, &err);
	ok(out == NULL && strstr(err.message, "limit_exceeded"), "... lua_memory_bytes applies");
	o.box_run = NULL;
	out = call(set, "greet", "{\"who\": \"bob\"}", &o, &err);
	ok(out == NULL, "box_tool_call without a box-run");
	is_int(err.code, BOX_E_UNSUPPORTED, "... unsupported");
	box_tools_free(set);
}

#define D6 "6666666666666666666666666666666666666666666666666666666666666666"
#define D7 "7777777777777777777777777777777777777777777777777777777777777777"
#define D8 "8888888888888888888888888888888888888888888888888888888888888888"
#define D9 "9999999999999999999999999999999999999999999999999999999999999999"

/* box_tools_library on dir/box.lock, src emptied first (its limit stays) */
static int library(const char *name, struct box_buf *src, char *label, size_t n,
		   struct box_err *err)
{
	char file[PATH_MAX];

	snprintf(file, sizeof(file), "%s/box.lock", dir);
	box_err_init(err);
	box_buf_truncate(src, 0);
	label[0] = 0;
	return box_tools_library(file, name, src, label, n, err);
}

static void library_refused(const char *name, enum box_code code, const char *msg)
{
	struct box_buf src = BOX_BUF_INIT(64);
	struct box_err err;
	char label[300];

	ok(library(name, &src, label, sizeof(label), &err) < 0, "require %s is refused", name);
	is_int(err.code, code, "... %s", box_err_code_name(code));
	ok(strstr(err.message, msg) != NULL, "... says '%s': %s", msg, err.message);
	box_buf_release(&src);
}

static void test_library(void)
{
	struct box_buf src = BOX_BUF_INIT(64);
	struct box_err err;
	char label[300], file[PATH_MAX + 32];

	put("home/store/sha256/" D6 "/box-artifact.json",
	    "{\"name\": \"acme/str\", \"version\": \"1.0.0\", \"kind\": \"lua\", "
	    "\"entry\": \"lib/init.lua\"}", 0644);
	put("home/store/sha256/" D6 "/lib/init.lua", "return {}\n", 0644);
	put("home/store/sha256/" D7 "/box-artifact.json",
	    "{\"name\": \"acme/out\", \"version\": \"1.0.0\", \"kind\": \"lua\", "
	    "\"entry\": \"../" D6 "/lib/init.lua\"}", 0644);
	put("home/store/sha256/" D8 "/box-artifact.json",
	    "{\"name\": \"acme/big\", \"version\": \"1.0.0\", \"kind\": \"lua\", "
	    "\"entry\": \"big.lua\"}", 0644);
	put("home/store/sha256/" D8 "/big.lua",
	    "return 'a string longer than the sixty-four bytes the buffer of the test holds'\n",
	    0644);
	seal(D6);
	seal(D7);
	seal(D8);
	lock_with(ENTRY("acme/big", D8, "lua") "," ENTRY("acme/greet", D1, "tool") ","
		  ENTRY("acme/mislabeled", D1, "lua") "," ENTRY("acme/out", D7, "lua") ","
		  ENTRY("acme/str", D6, "lua") "," ENTRY("acme/unpulled", D9, "lua"));
	ok(library("acme/str", &src, label, sizeof(label), &err) == 0, "a pinned library: %s",
	   err.message);
	ok(src.len == 10 && memcmp(src.data, "return {}\n", 10) == 0, "... its entry's source");
	is_str(label, "acme/str@1.0.0", "... its label");
	library_refused("acme/nope", BOX_E_NOT_FOUND, "no Lua library acme/nope is pinned");
	library_refused("acme/greet", BOX_E_NOT_FOUND, "pins it as an artifact of kind tool");
	library_refused("acme/mislabeled", BOX_E_INTEGRITY, "pinned as kind lua, but");
	library_refused("acme/out", BOX_E_POLICY, "leads out of the artifact");
	library_refused("acme/big", BOX_E_LIMIT, "");
	library_refused("acme/unpulled", BOX_E_NOT_FOUND, "run box-pull");
	/* a changed entry file is caught before it is read */
	put("home/store/sha256/" D6 "/lib/init.lua", "return {changed = true}\n", 0644);
	library_refused("acme/str", BOX_E_INTEGRITY, "lib/init.lua");
	snprintf(file, sizeof(file), "%s/tools.json", fixtures);
	box_err_init(&err);
	ok(box_tools_library(file, "acme/str", &src, label, sizeof(label), &err) < 0 &&
	   err.code == BOX_E_NOT_FOUND && strstr(err.message, "is a tool manifest, not a box.lock"),
	   "a tool manifest pins no library: %s", err.message);
	box_buf_release(&src);
}

int main(void)
{
	struct box_toolset *set;
	struct box_err err;
	char file[PATH_MAX + 32], cmd[128];
	const char *src = getenv("BOX_SRCDIR");

	signal(SIGPIPE, SIG_DFL);
	snprintf(dir, sizeof(dir), "/tmp/t-tools.XXXXXX");
	if (!mkdtemp(dir))
		return 99;
	/* without make check's BOX_SRCDIR, the sources are found next to this file */
	if (src)
		snprintf(file, sizeof(file), "%s/tests/fixtures/tools", src);
	else
		snprintf(file, sizeof(file), "%.*s/../fixtures/tools",
			 (int)(strrchr(__FILE__, '/') ? strrchr(__FILE__, '/') - __FILE__ : 1),
			 strrchr(__FILE__, '/') ? __FILE__ : ".");
	if (!realpath(file, fixtures)) {
		printf("Bail out! no fixtures at %s\n", file);
		return 1;
	}
	test_manifest_errors();
	snprintf(file, sizeof(file), "%s/tools.json", fixtures);
	box_err_init(&err);
	set = box_tools_load(file, &err);
	ok(set != NULL, "fixture manifest loads: %s", set ? "yes" : err.message);
	if (set) {
		test_load(set);
		test_calls(set);
	}
	box_tools_free(set);
	test_missing_command();
	test_lock();
	test_library();
	test_lua();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		printf("# cleanup failed\n");
	return done_testing();
}
