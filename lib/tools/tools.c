#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools.h"
#include "libexec.h"
#include "artifact.h"
#include "buf.h"
#include "json.h"
#include "lockfile.h"
#include "proc.h"
#include "schema.h"
#include "banned.h"

static const struct box_field manifest_fields[] = {
	{ "$schema", BOX_F_STRING, 0, 4096 },
	{ "tools", BOX_F_ARRAY },
	{ NULL },
};

static const struct box_field tool_fields[] = {
	{ "name", BOX_F_STRING, 0, 255 },
	{ "description", BOX_F_STRING, 0, BOX_TOOL_DESCRIPTION_MAX },
	{ "input_schema", BOX_F_OBJECT },
	{ "output_schema", BOX_F_OBJECT },
	{ "command", BOX_F_STRINGS, 0, BOX_TOOL_ARGV_MAX },
	{ "timeout_ms", BOX_F_INT, 1, BOX_TOOL_MAX_TIMEOUT_MS },
	{ "destructive", BOX_F_BOOL },
	{ "requires_approval", BOX_F_BOOL },
	{ "executor", BOX_F_BOOL },
	{ NULL },
};

/* Where the definitions being read come from: a manifest, or an artifact in the store. */
struct origin {
	const char *dir;        /* real path of the manifest's or the artifact's directory */
	const char *artifact;   /* "NAME@VERSION", NULL for a manifest */
	const char *entry;      /* the artifact's entry, "" when none */
	const struct box_verify_pin *pin;   /* the artifact's store entry, NULL for a manifest */
};

int box_tool_name_valid(const char *name)
{
	size_t i;

	if (!name || name[0] < 'a' || name[0] > 'z')
		return 0;
	for (i = 1; name[i]; i++) {
		char c = name[i];

		if (i >= BOX_TOOL_NAME_MAX)
			return 0;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static int bad(struct box_err *err, enum box_code code, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int bad(struct box_err *err, enum box_code code, const char *path, const char *fmt, ...)
{
	char what[BOX_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	box_err_set(err, code, "at %s: %s", path, what);
	box_err_path(err, path);
	return -1;
}

/* Rewrites the message of err, keeping its other fields; cut to fit like box_err_set. */
static void reword(struct box_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void reword(struct box_err *err, const char *fmt, ...)
{
	char msg[BOX_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	memcpy(err->message, msg, sizeof(msg));
}

/*
 * box_json_check and box_schema_check report paths relative to the object they were given
 * ("$.comand", "$.properties.n.type"); this moves such an error under prefix
 * ("$.tools[1]") and words it "at PATH: WHAT" whichever way it came.
 */
static void reprefix(struct box_err *err, const char *prefix)
{
	char path[BOX_ERR_FIELD_MAX], msg[BOX_ERR_MSG_MAX], what[BOX_ERR_MSG_MAX];
	const char *old = err->path[0] == '$' ? err->path + 1 : "";
	size_t n;

	snprintf(path, sizeof(path), "%s%s", prefix, old);
	snprintf(msg, sizeof(msg), "at %s: ", err->path);
	n = strlen(msg);
	if (strncmp(err->message, msg, n) == 0) {
		snprintf(what, sizeof(what), "%s", err->message + n);
	} else {
		/* box_json_check words it "NAME: WHAT" for the member at "$.NAME" */
		n = old[0] == '.' ? strlen(old + 1) : 0;
		if (n && strncmp(err->message, old + 1, n) == 0 && strncmp(err->message + n, ": ", 2) == 0)
			snprintf(what, sizeof(what), "%s", err->message + n + 2);
		else
			snprintf(what, sizeof(what), "%s", err->message);
	}
	reword(err, "at %s: %s", path, what);
	box_err_path(err, path);
}

/* Prepends "artifact NAME@VERSION: " to the message of an error about an artifact's tools. */
static void blame(struct box_err *err, const struct origin *org)
{
	char msg[BOX_ERR_MSG_MAX];

	if (!org->artifact)
		return;
	memcpy(msg, err->message, sizeof(msg));
	reword(err, "artifact %s: %s", org->artifact, msg);
}

static char *xstrdup(const char *s, struct box_err *err)
{
	char *d = strdup(s);

	if (!d)
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
	return d;
}

static char *join(const char *dir, const char *rel, struct box_err *err)
{
	size_t n = strlen(dir) + strlen(rel) + 2;
	char *p = malloc(n);

	if (!p) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	snprintf(p, n, "%s/%s", dir, rel);
	return p;
}

/*
 * The real path of rel inside an artifact's directory, refused when it is absolute or when
 * it, or a symlink on the way, leads out of the directory. Returns a malloc'd path or NULL.
 */
static char *inside(const struct origin *org, const char *rel, const char *path,
		    struct box_err *err)
{
	char real[PATH_MAX], *full;
	size_t n = strlen(org->dir);
	struct stat st;

	if (rel[0] == '/') {
		bad(err, BOX_E_POLICY, path, "must be a path inside the artifact, got %s", rel);
		return NULL;
	}
	if (!(full = join(org->dir, rel, err)))
		return NULL;
	if (!realpath(full, real)) {
		free(full);
		if (errno == ENOENT || errno == ENOTDIR)
			bad(err, BOX_E_NOT_FOUND, path, "%s: no such file in the artifact", rel);
		else
			bad(err, BOX_E_IO, path, "%s: %s", rel, strerror(errno));
		return NULL;
	}
	free(full);
	if (strncmp(real, org->dir, n) != 0 || real[n] != '/') {
		bad(err, BOX_E_POLICY, path, "%s leads out of the artifact", rel);
		return NULL;
	}
	if (stat(real, &st) < 0 || !S_ISREG(st.st_mode)) {
		bad(err, BOX_E_INVALID, path, "%s is not a regular file", rel);
		return NULL;
	}
	return xstrdup(real, err);
}

static int has_suffix(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);

	return n >= m && strcmp(s + n - m, suf) == 0;
}

static int is_executor(const char *argv0)
{
	const char *base = strrchr(argv0, '/');

	base = base ? base + 1 : argv0;
	return strcmp(base, "box-run") == 0 || strcmp(base, "box-sandbox") == 0;
}

static int set_argv(struct box_tool *t, const cJSON *cmd, const struct origin *org,
		    const char *path, struct box_err *err)
{
	const cJSON *it;
	char p[BOX_ERR_FIELD_MAX];
	int n = cJSON_GetArraySize(cmd), i = 0;

	snprintf(p, sizeof(p), "%s.command", path);
	if (n < 1)
		return bad(err, BOX_E_INVALID, p, "expected at least 1 item, got 0");
	if (!(t->argv = calloc((size_t)n + 1, sizeof(char *))))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	cJSON_ArrayForEach(it, cmd) {
		const char *s = it->valuestring;

		snprintf(p, sizeof(p), "%s.command[%d]", path, i);
		if (strlen(s) > BOX_TOOL_ARG_MAX)
			return bad(err, BOX_E_INVALID, p, "longer than %d bytes", BOX_TOOL_ARG_MAX);
		if (i > 0)
			t->argv[i] = xstrdup(s, err);
		else if (!s[0])
			return bad(err, BOX_E_INVALID, p, "the command is empty");
		else if (org->artifact)
			t->argv[i] = inside(org, s, p, err);
		else if (s[0] != '/' && strchr(s, '/'))
			t->argv[i] = join(org->dir, s, err);
		else
			t->argv[i] = xstrdup(s, err);
		if (!t->argv[i])
			return -1;
		i++;
	}
	return 0;
}

/* A tool of an artifact without a command: its entry, run natively or by box-run for Lua. */
static int set_entry(struct box_tool *t, const struct origin *org, const char *path,
		     struct box_err *err)
{
	char p[BOX_ERR_FIELD_MAX];
	char *real;

	snprintf(p, sizeof(p), "%s.command", path);
	if (!org->entry[0])
		return bad(err, BOX_E_INVALID, p, "required when the artifact has no entry");
	if (!(real = inside(org, org->entry, "$.entry", err)))
		return -1;
	if (has_suffix(real, ".lua")) {
		t->lua_entry = real;
		return 0;
	}
	if (!(t->argv = calloc(2, sizeof(char *)))) {
		free(real);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}
	t->argv[0] = real;
	return 0;
}

static int check_schema(const cJSON *schema, const char *path, struct box_err *err)
{
	if (box_schema_check(schema, err) == 0)
		return 0;
	reprefix(err, path);
	return -1;
}

static int parse_tool(struct box_toolset *set, const cJSON *o, const struct origin *org,
		      const char *path, struct box_err *err)
{
	struct box_tool *t = &set->tools[set->n];
	const cJSON *v;
	char p[BOX_ERR_FIELD_MAX];
	const char *name;
	size_t i;

	memset(t, 0, sizeof(*t));
	set->n++;
	if (!cJSON_IsObject(o))
		return bad(err, BOX_E_INVALID, path, "expected object, got %s", box_schema_type_of(o));
	if (box_json_check(o, tool_fields, err) < 0) {
		reprefix(err, path);
		return -1;
	}
	snprintf(p, sizeof(p), "%s.name", path);
	name = box_json_get_str(o, "name", NULL);
	if (!name)
		return bad(err, BOX_E_INVALID, p, "required");
	if (!box_tool_name_valid(name))
		return bad(err, BOX_E_INVALID, p, "invalid tool name \"%.64s\" (expected [a-z][a-z0-9_-]{0,63})",
			   name);
	for (i = 0; i + 1 < set->n; i++)
		if (strcmp(set->tools[i].name, name) == 0)
			return bad(err, BOX_E_INVALID, p, "duplicate tool name \"%s\"%s%s", name,
				   set->tools[i].artifact ? ", also defined by artifact " : "",
				   set->tools[i].artifact ? set->tools[i].artifact : "");
	snprintf(t->name, sizeof(t->name), "%s", name);
	snprintf(p, sizeof(p), "%s.description", path);
	if (!box_json_get_str(o, "description", NULL))
		return bad(err, BOX_E_INVALID, p, "required");
	if (!(t->description = xstrdup(box_json_get_str(o, "description", ""), err)))
		return -1;

	snprintf(p, sizeof(p), "%s.input_schema", path);
	v = cJSON_GetObjectItemCaseSensitive(o, "input_schema");
	if (!cJSON_IsObject(v))
		return bad(err, BOX_E_INVALID, p, "required");
	if (check_schema(v, p, err))
		return -1;
	if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(v, "type")) ||
	    strcmp(cJSON_GetObjectItemCaseSensitive(v, "type")->valuestring, "object")) {
		snprintf(p, sizeof(p), "%s.input_schema.type", path);
		return bad(err, BOX_E_INVALID, p, "must be \"object\": a tool reads one JSON object");
	}
	if (!(t->input_schema = cJSON_Duplicate(v, 1)))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	v = cJSON_GetObjectItemCaseSensitive(o, "output_schema");
	if (cJSON_IsObject(v)) {
		snprintf(p, sizeof(p), "%s.output_schema", path);
		if (check_schema(v, p, err))
			return -1;
		if (!(t->output_schema = cJSON_Duplicate(v, 1)))
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}

	v = cJSON_GetObjectItemCaseSensitive(o, "command");
	if (cJSON_IsArray(v)) {
		if (set_argv(t, v, org, path, err))
			return -1;
	} else if (org->artifact) {
		if (set_entry(t, org, path, err))
			return -1;
	} else {
		snprintf(p, sizeof(p), "%s.command", path);
		return bad(err, BOX_E_INVALID, p, "required");
	}
	t->timeout_ms = (int)box_json_get_int(o, "timeout_ms", 0);
	t->destructive = box_json_get_bool(o, "destructive", 0);
	t->requires_approval = box_json_get_bool(o, "requires_approval", 0);
	t->executor = box_json_get_bool(o, "executor", 0) || (t->argv && is_executor(t->argv[0]));
	if (!(t->dir = xstrdup(org->dir, err)))
		return -1;
	if (org->artifact && !(t->artifact = xstrdup(org->artifact, err)))
		return -1;
	if (org->pin && !(t->pin = box_verify_pin_dup(org->pin, err)))
		return -1;
	return 0;
}

static int parse_tools(struct box_toolset *set, const cJSON *tools, const struct origin *org,
		       struct box_err *err)
{
	const cJSON *it;
	size_t n = (size_t)cJSON_GetArraySize(tools);
	struct box_tool *grown;
	int i = 0;

	if (n > BOX_TOOLS_MAX - set->n)
		return box_err_limit(err, BOX_E_LIMIT, "tools", BOX_TOOLS_MAX, "tools",
				     "more than %d tools", BOX_TOOLS_MAX);
	if (!(grown = realloc(set->tools, (set->n + n + 1) * sizeof(*grown))))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	set->tools = grown;
	cJSON_ArrayForEach(it, tools) {
		char path[64];

		snprintf(path, sizeof(path), "$.tools[%d]", i++);
		if (parse_tool(set, it, org, path, err)) {
			blame(err, org);
			return -1;
		}
	}
	return 0;
}

static int load_manifest(struct box_toolset *set, const cJSON *root, const char *file,
			 struct box_err *err)
{
	char real[PATH_MAX], *slash;
	const cJSON *tools;
	struct origin org = { .dir = real, .entry = "" };

	if (box_json_check(root, manifest_fields, err) < 0) {
		reprefix(err, "$");
		return -1;
	}
	tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
	if (!cJSON_IsArray(tools))
		return bad(err, BOX_E_INVALID, "$.tools", "required");
	if (!realpath(file, real))
		return box_err_sys(err, "%s", file);
	slash = strrchr(real, '/');
	if (slash == real)
		slash[1] = 0;
	else
		*slash = 0;
	return parse_tools(set, tools, &org, err);
}

/* $BOX_HOME/store, BOX_HOME defaulting as box(7) says. box_home() of artifact.c is not
 * used: linking it would pull libcrypto into box-run. */
static int store_root(char *out, size_t n, struct box_err *err)
{
	const char *home = getenv("BOX_HOME"), *data = getenv("XDG_DATA_HOME");
	int k;

	if (home && home[0])
		k = snprintf(out, n, "%s/store", home);
	else if (data && data[0])
		k = snprintf(out, n, "%s/box/store", data);
	else if ((home = getenv("HOME")) && home[0])
		k = snprintf(out, n, "%s/.local/share/box/store", home);
	else
		return box_err_set(err, BOX_E_INVALID, "neither BOX_HOME nor HOME is set");
	if (k < 0 || (size_t)k >= n)
		return box_err_set(err, BOX_E_INVALID, "BOX_HOME is too long");
	return 0;
}

/* The tools of the box-artifact.json root of the artifact at real (a real path), labelled
 * "NAME@VERSION" in errors: the rules box-tools(5) documents, for box-pack and the store. */
static int artifact_tools(struct box_toolset *set, const cJSON *root, const char *real,
			  const char *label, const struct box_verify_pin *pin, struct box_err *err)
{
	struct origin org = { .dir = real, .artifact = label, .entry = "", .pin = pin };
	const cJSON *entry, *tools;

	entry = cJSON_GetObjectItemCaseSensitive(root, "entry");
	if (cJSON_IsString(entry))
		org.entry = entry->valuestring;
	tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
	if (!cJSON_IsArray(tools)) {
		bad(err, BOX_E_INVALID, "$.tools", "required");
		blame(err, &org);
		return -1;
	}
	return parse_tools(set, tools, &org, err);
}

int box_tools_check_artifact(const char *dir, const char *json, size_t len,
			     struct box_err *err)
{
	char real[PATH_MAX], label[BOX_LOCK_NAME_MAX + BOX_SEMVER_MAX_LEN + 2];
	struct box_toolset *set;
	cJSON *root;
	int rc = -1;

	if (!realpath(dir, real))
		return box_err_sys(err, "%s", dir);
	if (!(root = box_json_parse(json, len, err)))
		return -1;
	if (!cJSON_GetObjectItemCaseSensitive(root, "tools")) {
		cJSON_Delete(root);
		return 0;
	}
	snprintf(label, sizeof(label), "%s@%s", box_json_get_str(root, "name", "?"),
		 box_json_get_str(root, "version", "?"));
	if ((set = calloc(1, sizeof(*set)))) {
		rc = artifact_tools(set, root, real, label, NULL, err);
		box_tools_free(set);
	} else {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}
	cJSON_Delete(root);
	return rc;
}

#define LABEL_MAX (BOX_LOCK_NAME_MAX + BOX_SEMVER_MAX_LEN + 2)

/* The box-artifact.json of the store entry that e pins, once the entry's tree is known to be
 * the one pulled and the file says kind (pinned as that kind); real gets the entry's
 * directory, label "NAME@VERSION", *pin its pin (freed by the caller, even on failure). */
static cJSON *open_pinned(const struct box_lock_entry *e, const char *store, const char *kind,
			  char real[PATH_MAX], char label[LABEL_MAX],
			  struct box_verify_pin **pin, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_ARTIFACT_MAX);
	char dir[PATH_MAX + 32];
	const cJSON *k;
	cJSON *root = NULL;
	int n;

	snprintf(label, LABEL_MAX, "%s@%s", e->name, e->version);
	if (!(*pin = box_verify_pin_new(store, e->digest, e->tree_digest, label, err)))
		return NULL;
	n = snprintf(dir, sizeof(dir), "%s/sha256/%s", store, e->digest + 7);
	if (n < 0 || (size_t)n >= sizeof(dir)) {
		box_err_set(err, BOX_E_INVALID, "BOX_HOME is too long");
		return NULL;
	}
	if (!realpath(dir, real)) {
		if (errno == ENOENT)
			box_err_set(err, BOX_E_NOT_FOUND,
				    "artifact %s (%s) is not in the store %s: run box-pull",
				    label, e->digest, store);
		else
			box_err_sys(err, "%s", dir);
		return NULL;
	}
	/* nothing of the entry is read before its tree is known to be the one pulled */
	if (box_verify_entry(*pin, err) < 0)
		return NULL;
	snprintf(dir, sizeof(dir), "%s/%s", real, BOX_ARTIFACT_FILE);
	if (box_buf_read_file(&b, AT_FDCWD, dir, err) == 0)
		root = box_json_parse(b.data, b.len, err);
	box_buf_release(&b);
	if (!root)
		return NULL;
	k = cJSON_GetObjectItemCaseSensitive(root, "kind");
	if (!cJSON_IsString(k) || strcmp(k->valuestring, kind)) {
		box_err_set(err, BOX_E_INTEGRITY,
			    "artifact %s: pinned as kind %s, but its %s says otherwise", label, kind,
			    BOX_ARTIFACT_FILE);
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

static int load_artifact(struct box_toolset *set, const struct box_lock_entry *e,
			 const char *store, struct box_err *err)
{
	char real[PATH_MAX], label[LABEL_MAX];
	struct box_verify_pin *pin = NULL;
	cJSON *root = open_pinned(e, store, "tool", real, label, &pin, err);
	int rc = root ? artifact_tools(set, root, real, label, pin, err) : -1;

	cJSON_Delete(root);
	box_verify_pin_free(pin);
	return rc;
}

static int load_lock(struct box_toolset *set, const char *file, struct box_err *err)
{
	struct box_lock lk;
	char store[PATH_MAX];
	size_t i;
	int rc = 0;

	box_lock_init(&lk);
	if (box_lock_read(AT_FDCWD, file, &lk, err) < 0)
		return -1;
	if (store_root(store, sizeof(store), err) < 0) {
		box_lock_release(&lk);
		return -1;
	}
	for (i = 0; i < lk.n && rc == 0; i++)
		if (strcmp(lk.entries[i].kind, "tool") == 0)
			rc = load_artifact(set, &lk.entries[i], store, err);
	box_lock_release(&lk);
	return rc;
}

/* The entry of a kind-lua artifact the store holds, its tree verified first. */
static int library_source(const struct box_lock_entry *e, const char *store,
			  struct box_buf *src, struct box_err *err)
{
	char real[PATH_MAX], label[LABEL_MAX];
	struct box_verify_pin *pin = NULL;
	struct origin org = { .dir = real, .artifact = label, .entry = "" };
	cJSON *root = open_pinned(e, store, "lua", real, label, &pin, err);
	const cJSON *entry = cJSON_GetObjectItemCaseSensitive(root, "entry");
	char *file = NULL;
	int rc = -1;

	if (!root)
		goto out;
	if (!cJSON_IsString(entry) || !entry->valuestring[0]) {
		box_err_set(err, BOX_E_INVALID, "library %s: its %s names no entry", label,
			    BOX_ARTIFACT_FILE);
		goto out;
	}
	if ((file = inside(&org, entry->valuestring, "$.entry", err)) &&
	    box_buf_read_file(src, AT_FDCWD, file, err) == 0)
		rc = 0;
out:
	free(file);
	cJSON_Delete(root);
	box_verify_pin_free(pin);
	return rc;
}

int box_tools_library(const char *path, const char *name, struct box_buf *src, char *label,
		      size_t label_size, struct box_err *err)
{
	struct box_lock lk;
	char store[PATH_MAX];
	const struct box_lock_entry *e = NULL;
	size_t i;
	int rc = -1;

	{
		struct box_buf b = BOX_BUF_INIT(BOX_LOCK_MAX_BYTES);
		cJSON *root = NULL;
		int lock;

		if (box_buf_read_file(&b, AT_FDCWD, path, err) == 0)
			root = box_json_parse(b.data, b.len, err);
		box_buf_release(&b);
		if (!root)
			return -1;
		lock = cJSON_IsObject(root) &&
		       cJSON_GetObjectItemCaseSensitive(root, "lock_version") != NULL;
		cJSON_Delete(root);
		if (!lock)
			return box_err_set(err, BOX_E_NOT_FOUND,
					   "no Lua library %s: %s is a tool manifest, not a box.lock",
					   name, path);
	}
	box_lock_init(&lk);
	if (box_lock_read(AT_FDCWD, path, &lk, err) < 0)
		return -1;
	for (i = 0; i < lk.n && !e; i++)
		if (strcmp(lk.entries[i].name, name) == 0)
			e = &lk.entries[i];
	if (!e)
		box_err_set(err, BOX_E_NOT_FOUND, "no Lua library %s is pinned in %s", name, path);
	else if (strcmp(e->kind, "lua"))
		box_err_set(err, BOX_E_NOT_FOUND,
			    "no Lua library %s: %s pins it as an artifact of kind %s", name, path,
			    e->kind);
	else if (store_root(store, sizeof(store), err) == 0 &&
		 library_source(e, store, src, err) == 0)
		rc = snprintf(label, label_size, "%s@%s", e->name, e->version) < 0 ? -1 : 0;
	box_lock_release(&lk);
	return rc;
}

struct box_toolset *box_tools_load(const char *path, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_LOCK_MAX_BYTES);
	struct box_toolset *set;
	cJSON *root = NULL;
	int rc = -1;

	if (!(set = calloc(1, sizeof(*set)))) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	if (box_buf_read_file(&b, AT_FDCWD, path, err) < 0)
		goto out;
	if (!(root = box_json_parse(b.data, b.len, err))) {
		box_err_path(err, "$");
		goto out;
	}
	if (cJSON_IsObject(root) && cJSON_GetObjectItemCaseSensitive(root, "lock_version"))
		rc = load_lock(set, path, err);
	else if (b.len > BOX_TOOLS_FILE_MAX)
		box_err_limit(err, BOX_E_LIMIT, "tool_manifest_bytes", (int64_t)BOX_TOOLS_FILE_MAX,
			      "bytes", "tool manifest %s is larger than %zu bytes", path,
			      BOX_TOOLS_FILE_MAX);
	else
		rc = load_manifest(set, root, path, err);
out:
	cJSON_Delete(root);
	box_buf_release(&b);
	if (rc < 0) {
		box_tools_free(set);
		return NULL;
	}
	return set;
}

static void tool_release(struct box_tool *t)
{
	size_t i;

	free(t->description);
	cJSON_Delete(t->input_schema);
	cJSON_Delete(t->output_schema);
	for (i = 0; t->argv && t->argv[i]; i++)
		free(t->argv[i]);
	free(t->argv);
	free(t->lua_entry);
	free(t->dir);
	free(t->artifact);
	box_verify_pin_free(t->pin);
}

void box_tools_free(struct box_toolset *set)
{
	size_t i;

	if (!set)
		return;
	for (i = 0; i < set->n; i++)
		tool_release(&set->tools[i]);
	free(set->tools);
	free(set);
}

const struct box_tool *box_tools_find(const struct box_toolset *set, const char *name)
{
	size_t i;

	for (i = 0; set && name && i < set->n; i++)
		if (strcmp(set->tools[i].name, name) == 0)
			return &set->tools[i];
	return NULL;
}

int box_tool_code_mode_eligible(const struct box_tool *t)
{
	return !t->destructive && !t->requires_approval && !t->executor;
}

cJSON *box_tools_describe(const struct box_toolset *set, unsigned flags)
{
	cJSON *arr = cJSON_CreateArray(), *o;
	size_t i;

	for (i = 0; arr && set && i < set->n; i++) {
		const struct box_tool *t = &set->tools[i];

		if ((flags & BOX_TOOLS_CODE_MODE) && !box_tool_code_mode_eligible(t))
			continue;
		if (!(o = cJSON_CreateObject()) || !cJSON_AddItemToArray(arr, o) ||
		    !cJSON_AddStringToObject(o, "name", t->name) ||
		    !cJSON_AddStringToObject(o, "description", t->description) ||
		    !cJSON_AddItemToObject(o, "input_schema", cJSON_Duplicate(t->input_schema, 1)) ||
		    (t->output_schema &&
		     !cJSON_AddItemToObject(o, "output_schema", cJSON_Duplicate(t->output_schema, 1))) ||
		    !cJSON_AddBoolToObject(o, "destructive", t->destructive) ||
		    !cJSON_AddBoolToObject(o, "requires_approval", t->requires_approval)) {
			cJSON_Delete(arr);
			return NULL;
		}
	}
	return arr;
}

int box_tools_nested(void)
{
	const char *d = getenv(BOX_TOOL_DEPTH_ENV);

	return d && d[0] && strcmp(d, "0") != 0;
}

static int is_program(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* name in the absolute directories of path (a PATH value), as execvp would; 0 or -1. */
static int search_path(const char *path, const char *name, char *out, size_t n)
{
	const char *p;
	size_t i;
	int k;

	for (p = path, i = 0; *p && i < 256; i++) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len > 0 && p[0] == '/') {
			k = snprintf(out, n, "%.*s/%s", (int)len, p, name);
			if (k > 0 && (size_t)k < n && is_program(out))
				return 0;
		}
		if (!end)
			break;
		p = end + 1;
	}
	return -1;
}

/* A bare command name looked up in the PATH the tool will see. */
static int find_in_path(const char *name, const struct box_proc_env *env, char *out, size_t n,
			struct box_err *err)
{
	const char *path = BOX_PROC_DEFAULT_PATH;
	size_t i;

	for (i = 0; i < env->n; i++)
		if (strncmp(env->v[i], "PATH=", 5) == 0)
			path = env->v[i] + 5;
	if (search_path(path, name, out, n) == 0)
		return 0;
	return box_err_set(err, BOX_E_NOT_FOUND, "command %s not found in PATH", name);
}

int box_tool_find_box_run(char *out, size_t n, struct box_err *err)
{
	const char *path = getenv("PATH"), *self = box_libexec_self_dir();
	int k;

	/* beside the running binary first: the build tree's box-run for a build tree's
	 * box-sandbox, the installed one for an installed one */
	k = snprintf(out, n, "%s/box-run", self);
	if (self[0] && k > 0 && (size_t)k < n && is_program(out))
		return 0;
	if (path && search_path(path, "box-run", out, n) == 0)
		return 0;
	k = snprintf(out, n, "%s/box-run", box_libexec_bindir());
	if (k > 0 && (size_t)k < n && is_program(out))
		return 0;
	if (n)
		out[0] = 0;
	return box_err_set(err, BOX_E_NOT_FOUND, "box-run is neither beside this program, in PATH "
			   "nor in %s", box_libexec_bindir());
}

/* The tool's own {"ok": false, "error": ...}: its words, but always a guest_error, since a
 * tool must not be able to pass itself off as a timeout or a policy decision of box. */
static void tool_failed(const char *name, const cJSON *obj, struct box_err *err)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(obj, "error");
	const char *code = box_json_get_str(e, "code", NULL);
	const char *msg = cJSON_IsString(e) ? e->valuestring : box_json_get_str(e, "message", NULL);

	if (msg && code)
		box_err_set(err, BOX_E_GUEST, "tool %s failed: %.64s: %.300s", name, code, msg);
	else if (msg)
		box_err_set(err, BOX_E_GUEST, "tool %s failed: %.300s", name, msg);
	else
		box_err_set(err, BOX_E_GUEST, "tool %s failed without an error message", name);
}

static cJSON *interpret(const struct box_tool *t, const struct box_proc_result *r,
			int timeout_ms, size_t max_out, struct box_err *err)
{
	const char *sep = r->err_tail[0] ? ": " : "";
	struct box_err perr;
	cJSON *obj = NULL;

	if (r->timed_out) {
		box_err_limit(err, BOX_E_TIMEOUT, "timeout_ms", timeout_ms, "ms",
			      "tool %s did not answer within %d ms", t->name, timeout_ms);
		return NULL;
	}
	if (r->stdout_overflow) {
		box_err_limit(err, BOX_E_LIMIT, "tool_output_bytes", (int64_t)max_out, "bytes",
			      "tool %s printed more than %zu bytes", t->name, max_out);
		return NULL;
	}
	box_err_init(&perr);
	if (r->out.len)
		obj = box_json_parse(r->out.data, r->out.len, &perr);
	if (cJSON_IsObject(obj) && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(obj, "ok"))) {
		tool_failed(t->name, obj, err);
	} else if (!r->exited) {
		box_err_set(err, BOX_E_GUEST, "tool %s killed by signal %d%s%s", t->name, r->signal,
			    sep, r->err_tail);
	} else if (r->exit_code != 0) {
		box_err_set(err, BOX_E_GUEST, "tool %s exited with status %d%s%s", t->name,
			    r->exit_code, sep, r->err_tail);
	} else if (!cJSON_IsObject(obj)) {
		box_err_set(err, BOX_E_GUEST, "tool %s printed invalid JSON: %s", t->name,
			    !r->out.len ? "nothing on stdout" :
			    obj ? "expected one object" : "not one JSON value");
	} else if (t->output_schema && box_schema_validate(t->output_schema, obj, &perr) < 0) {
		box_err_set(err, BOX_E_GUEST, "tool %s returned invalid output: %s", t->name,
			    perr.message);
		box_err_path(err, perr.path);
	} else {
		return obj;
	}
	cJSON_Delete(obj);
	return NULL;
}

cJSON *box_tool_call(const struct box_tool *t, const cJSON *input,
		     const struct box_tool_call_opts *o, struct box_err *err)
{
	static const struct box_tool_call_opts none;
	const char *extra[BOX_PROC_ENV_MAX + 1] = { BOX_TOOL_DEPTH_ENV "=1" };
	struct box_proc_env env = { .n = 0 };
	struct box_proc_result r = { .out = BOX_BUF_INIT(0) };
	struct box_proc_opts po = { 0 };
	char path[PATH_MAX];
	const char **argv = NULL;
	char *line = NULL;
	cJSON *res = NULL, *copy = NULL;
	size_t i, n = 1;

	if (!o)
		o = &none;
	if (!t->argv) {
		int tmo = t->timeout_ms > 0 ? t->timeout_ms : BOX_TOOL_DEFAULT_TIMEOUT_MS;

		if (o->max_timeout_ms > 0 && tmo > o->max_timeout_ms)
			tmo = o->max_timeout_ms;
		if (o->box_run)
			return box_tool_call_lua(t, input, o->box_run, tmo, o->lua_memory_bytes, 0,
						 err);
		box_err_set(err, BOX_E_UNSUPPORTED,
			    "tool %s is a Lua tool and no box-run is given to run it", t->name);
		return NULL;
	}
	if (box_schema_validate(t->input_schema, input, err) < 0)
		return NULL;
	if (t->pin && box_verify_entry(t->pin, err) < 0)
		return NULL;
	for (i = 0; o->env && o->env[i]; i++) {
		if (n >= BOX_PROC_ENV_MAX) {
			box_err_set(err, BOX_E_INVALID, "too many tool variables");
			return NULL;
		}
		extra[n++] = o->env[i];
	}
	if (box_proc_env_build(&env, extra, "tool", err) < 0)
		goto out;
	for (n = 0; t->argv[n]; n++)
		;
	/* integer literals go out exactly as they came in, not through a double */
	if ((copy = cJSON_Duplicate(input, 1)))
		box_json_exact(copy);
	if (!copy || !(argv = calloc(n + 1, sizeof(*argv))) ||
	    !(line = box_json_line(copy, &po.inlen))) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	memcpy(argv, t->argv, n * sizeof(*argv));
	if (!strchr(argv[0], '/')) {
		if (find_in_path(argv[0], &env, path, sizeof(path), err) < 0) {
			memcpy(path, err->message, sizeof(err->message));
			reword(err, "tool %s: %s", t->name, path);
			goto out;
		}
		argv[0] = path;
	}
	po.argv = argv;
	po.envp = env.v;
	po.cwd = o->cwd ? o->cwd : t->dir;
	po.in = line;
	po.timeout_ms = t->timeout_ms > 0 ? t->timeout_ms : BOX_TOOL_DEFAULT_TIMEOUT_MS;
	if (o->max_timeout_ms > 0 && po.timeout_ms > o->max_timeout_ms)
		po.timeout_ms = o->max_timeout_ms;
	po.max_stdout = o->max_output ? o->max_output : BOX_TOOL_OUTPUT_MAX;
	if (box_proc_run(&po, &r, err) < 0)
		goto out;
	res = interpret(t, &r, po.timeout_ms, po.max_stdout, err);
out:
	cJSON_Delete(copy);
	free(argv);
	free(line);
	box_proc_result_release(&r);
	box_proc_env_release(&env);
	return res;
}

/* What a Lua tool's box-run printed, made into the tool's answer. */
static cJSON *lua_answer(const struct box_tool *t, const struct box_proc_result *pr,
			 int timeout_ms, struct box_err *err)
{
	struct box_err e;
	cJSON *res = NULL, *out, *eo;

	if (pr->timed_out)
		return box_err_limit(err, BOX_E_TIMEOUT, "timeout_ms", timeout_ms, "ms",
				     "tool %s timed out after %d ms", t->name, timeout_ms), NULL;
	if (pr->stdout_overflow)
		return box_err_limit(err, BOX_E_LIMIT, "tool_output_bytes",
				     (int64_t)BOX_TOOL_OUTPUT_MAX, "bytes",
				     "tool %s printed more than %zu bytes", t->name,
				     BOX_TOOL_OUTPUT_MAX), NULL;
	box_err_init(&e);
	res = box_json_parse(pr->out.data ? pr->out.data : "", pr->out.len, &e);
	if (!cJSON_IsObject(res)) {
		cJSON_Delete(res);
		if (pr->exited)
			box_err_set(err, BOX_E_GUEST, "tool %s exited with status %d: %s", t->name,
				    pr->exit_code, pr->err_tail);
		else
			box_err_set(err, BOX_E_GUEST, "tool %s was killed by signal %d: %s",
				    t->name, pr->signal, pr->err_tail);
		return NULL;
	}
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "ok"))) {
		eo = cJSON_GetObjectItemCaseSensitive(res, "error");
		if (!eo || box_err_from_json(&e, eo) < 0)
			box_err_set(&e, BOX_E_INTERNAL, "no error object");
		cJSON_Delete(res);
		if (e.code == BOX_E_TIMEOUT && strcmp(e.limit, "wall") == 0)
			return box_err_limit(err, BOX_E_TIMEOUT, "timeout_ms", timeout_ms, "ms",
					     "tool %s timed out after %d ms", t->name,
					     timeout_ms), NULL;
		box_err_set(err, BOX_E_GUEST, "tool %s failed: %s: %s", t->name,
			    box_err_code_name(e.code), e.message);
		return NULL;
	}
	out = cJSON_DetachItemFromObjectCaseSensitive(res, "result");
	cJSON_Delete(res);
	if (!cJSON_IsObject(out)) {
		box_err_set(err, BOX_E_GUEST, "tool %s returned %s, not an object", t->name,
			    out ? box_schema_type_of(out) : "nothing");
		cJSON_Delete(out);
		return NULL;
	}
	return out;
}

cJSON *box_tool_call_lua(const struct box_tool *t, const cJSON *input, const char *box_run,
			 int timeout_ms, int64_t memory_bytes, int64_t max_instructions,
			 struct box_err *err)
{
	static const char prefix[] = "input = ...; ";
	static const char *const extra[] = { BOX_TOOL_DEPTH_ENV "=1", NULL };
	struct box_buf src = BOX_BUF_INIT(((size_t)16 << 20) - sizeof(prefix));
	struct box_proc_env env = { .n = 0 };
	struct box_proc_result pr = { .out = BOX_BUF_INIT(0) };
	struct box_proc_opts po = { 0 };
	char tmo[32];
	/* box builds this request itself (the tool's source, the input as args): it is the
	 * operator's, not an agent's */
	const char *argv[] = { box_run, "--json", "--trust-request", "--max-timeout-ms", tmo, NULL };
	cJSON *req = NULL, *args, *res = NULL;
	char *line = NULL, *script = NULL;

	if (!t->lua_entry || !box_run) {
		box_err_set(err, BOX_E_UNSUPPORTED, "tool %s: %s", t->name,
			    !t->lua_entry ? "not a Lua tool" : "no box-run is given to run it");
		return NULL;
	}
	if (timeout_ms <= 0)
		timeout_ms = t->timeout_ms > 0 ? t->timeout_ms : BOX_TOOL_DEFAULT_TIMEOUT_MS;
	if (memory_bytes <= 0)
		memory_bytes = BOX_TOOL_LUA_MEMORY_DEFAULT;
	if (box_schema_validate(t->input_schema, input, err) < 0)
		return NULL;
	if (t->pin && box_verify_entry(t->pin, err) < 0)
		return NULL;
	if (box_buf_read_file(&src, AT_FDCWD, t->lua_entry, err) < 0)
		goto out;
	script = malloc(sizeof(prefix) + src.len);
	req = cJSON_CreateObject();
	args = cJSON_AddArrayToObject(req, "args");
	if (!script || !args) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	/* on the script's first line, so that its line numbers stay as written */
	memcpy(script, prefix, sizeof(prefix) - 1);
	memcpy(script + sizeof(prefix) - 1, src.data ? src.data : "", src.len);
	script[sizeof(prefix) - 1 + src.len] = 0;
	cJSON_AddItemToArray(args, cJSON_Duplicate(input, 1));
	box_json_exact(args);
	if (!cJSON_AddStringToObject(req, "script", script) ||
	    !box_json_add_int64(req, "timeout_ms", timeout_ms) ||
	    !box_json_add_int64(req, "memory_bytes", memory_bytes) ||
	    !box_json_add_int64(req, "max_output_bytes", 0) ||
	    !box_json_add_int64(req, "max_result_bytes", (int64_t)BOX_TOOL_OUTPUT_MAX) ||
	    (max_instructions > 0 &&
	     !box_json_add_int64(req, "max_instructions", max_instructions)) ||
	    !(line = box_json_line(req, &po.inlen))) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	if (box_proc_env_build(&env, extra, "tool", err) < 0)
		goto out;
	snprintf(tmo, sizeof(tmo), "%d", timeout_ms);
	po.argv = argv;
	po.envp = env.v;
	po.cwd = t->dir;
	po.in = line;
	/* the child keeps its own deadline and reports it; this one is the backstop */
	po.timeout_ms = timeout_ms > INT_MAX - 2000 ? INT_MAX : timeout_ms + 2000;
	po.max_stdout = BOX_TOOL_OUTPUT_MAX + 64 * 1024;
	if (box_proc_run(&po, &pr, err) < 0)
		goto out;
	res = lua_answer(t, &pr, timeout_ms, err);
	if (res && t->output_schema && box_schema_validate(t->output_schema, res, err) < 0) {
		struct box_err v = *err;

		box_err_set(err, BOX_E_GUEST, "tool %s returned invalid output: %.400s", t->name,
			    v.message);
		box_err_path(err, v.path);
		cJSON_Delete(res);
		res = NULL;
	}
out:
	box_proc_result_release(&pr);
	box_proc_env_release(&env);
	box_buf_release(&src);
	cJSON_Delete(req);
	free(script);
	free(line);
	return res;
}
