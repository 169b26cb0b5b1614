#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trust.h"
#include "buf.h"
#include "banned.h"

/* Sections a policy file may hold: one per binary. box-mcp's is read by box-mcp itself. */
static const char *const sections[] = {
	"box-run", "box-sandbox", "box-pack", "box-pull", "box-lock", "box-mcp", NULL,
};

void box_trust_init(struct box_trust *t)
{
	memset(t, 0, sizeof(*t));
}

void box_trust_release(struct box_trust *t)
{
	free(t->agent);
	free(t->cap);
	cJSON_Delete(t->set);
	cJSON_Delete(t->sessions);
	box_trust_init(t);
}

static long field_index(const struct box_trust *t, const char *name)
{
	size_t i;

	for (i = 0; i < t->nfields; i++)
		if (strcmp(t->fields[i].name, name) == 0)
			return (long)i;
	return -1;
}

__attribute__((format(printf, 4, 5)))
static int bad(struct box_err *err, const char *file, const char *path, const char *fmt, ...)
{
	char msg[BOX_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	box_err_set(err, BOX_E_USAGE, "policy %.300s: %s: %s", file, path, msg);
	box_err_path(err, path);
	return -1;
}

/* The field a list item or map key of a section names; -1 (err set) when it is none. */
static long named_field(const struct box_trust *t, const char *name, const char *file,
			const char *path, int grantable, struct box_err *err)
{
	long i = name ? field_index(t, name) : -1;

	if (i < 0)
		return bad(err, file, path, "'%.64s' is no member of the request", name ? name : "");
	if (grantable && t->fields[i].flag_only)
		return bad(err, file, path, "%s is the command line's only: no request may set it",
			   name);
	return i;
}

/* "agent", "grant" and "deny": lists of member names; value is what each named gets */
static int name_list(struct box_trust *t, const cJSON *list, unsigned char value, int replace,
		     const char *file, const char *path, struct box_err *err)
{
	const cJSON *it;
	char at[BOX_ERR_FIELD_MAX];
	int k = 0;

	if (!cJSON_IsArray(list))
		return bad(err, file, path, "expected an array of member names");
	if (replace)
		memset(t->agent, 0, t->nfields);
	cJSON_ArrayForEach(it, list) {
		long i;

		box_fmt(at, sizeof(at), "%s[%d]", path, k++);
		i = named_field(t, cJSON_GetStringValue(it), file, at, value, err);
		if (i < 0)
			return -1;
		t->agent[i] = value;
	}
	return 0;
}

static int cap_map(struct box_trust *t, const cJSON *map, const char *file, const char *path,
		   struct box_err *err)
{
	const cJSON *it;
	char at[BOX_ERR_FIELD_MAX];

	if (!cJSON_IsObject(map))
		return bad(err, file, path, "expected an object of member: integer");
	cJSON_ArrayForEach(it, map) {
		int64_t v;
		long i;

		box_fmt(at, sizeof(at), "%s.%s", path, it->string);
		i = named_field(t, it->string, file, at, 1, err);
		if (i < 0)
			return -1;
		if (t->fields[i].type != BOX_F_INT)
			return bad(err, file, at, "%s is not an integer member", it->string);
		if (!box_json_int64(it, &v) || v < t->fields[i].min || v > t->fields[i].max)
			return bad(err, file, at, "expected an integer in [%lld, %lld]",
				   (long long)t->fields[i].min, (long long)t->fields[i].max);
		t->cap[i] = v;
	}
	return 0;
}

static int set_map(struct box_trust *t, const cJSON *map, const char *file, const char *path,
		   struct box_err *err)
{
	struct box_err e;
	cJSON *copy;
	const cJSON *it;
	char at[BOX_ERR_FIELD_MAX];

	if (!cJSON_IsObject(map))
		return bad(err, file, path, "expected an object of member: value");
	cJSON_ArrayForEach(it, map) {
		box_fmt(at, sizeof(at), "%s.%s", path, it->string);
		if (named_field(t, it->string, file, at, 0, err) < 0)
			return -1;
	}
	box_err_init(&e);
	if (box_json_check(map, t->fields, &e) < 0)
		return bad(err, file, path, "%s (at %s)", e.message, e.path);
	copy = cJSON_Duplicate(map, 1);
	if (!copy)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	cJSON_Delete(t->set);
	t->set = copy;
	return 0;
}

static int sessions_map(struct box_trust *t, const cJSON *map, const char *file,
			const char *path, struct box_err *err)
{
	const cJSON *it, *names;
	char at[BOX_ERR_FIELD_MAX];
	cJSON *copy;
	int k = 0;

	if (!cJSON_IsObject(map))
		return bad(err, file, path, "expected an object");
	if (field_index(t, "session") < 0)
		return bad(err, file, path, "this binary has no sessions");
	cJSON_ArrayForEach(it, map) {
		box_fmt(at, sizeof(at), "%s.%s", path, it->string);
		if (strcmp(it->string, "names") == 0) {
			if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) > BOX_TRUST_SESSIONS_MAX)
				return bad(err, file, at, "expected an array of at most %d session ids",
					   BOX_TRUST_SESSIONS_MAX);
		} else if (strcmp(it->string, "prefix") == 0) {
			if (!cJSON_IsString(it) || !it->valuestring[0] || strlen(it->valuestring) > 64)
				return bad(err, file, at, "expected a string of 1 to 64 characters");
		} else if (strcmp(it->string, "any") == 0 || strcmp(it->string, "create") == 0) {
			if (!cJSON_IsBool(it))
				return bad(err, file, at, "expected true or false");
		} else {
			return bad(err, file, at, "unknown member (names, prefix, any, create)");
		}
	}
	names = cJSON_GetObjectItemCaseSensitive(map, "names");
	cJSON_ArrayForEach(it, names) {
		box_fmt(at, sizeof(at), "%s.names[%d]", path, k++);
		if (!cJSON_IsString(it) || !it->valuestring[0])
			return bad(err, file, at, "expected a session id");
	}
	copy = cJSON_Duplicate(map, 1);
	if (!copy)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	cJSON_Delete(t->sessions);
	t->sessions = copy;
	return 0;
}

/* Lays one section over t: agent replaces, grant adds, deny removes, max and set merge. */
static int apply_section(struct box_trust *t, const cJSON *sec, const char *file,
			 const char *name, struct box_err *err)
{
	static const char *const order[] = { "agent", "grant", "deny", "max", "set", "sessions",
					     NULL };
	char at[BOX_ERR_FIELD_MAX];
	const cJSON *it;
	size_t k;

	if (!cJSON_IsObject(sec)) {
		box_fmt(at, sizeof(at), "$.%s", name);
		return bad(err, file, at, "expected an object");
	}
	cJSON_ArrayForEach(it, sec) {
		for (k = 0; order[k] && strcmp(order[k], it->string) != 0; k++)
			;
		if (!order[k]) {
			box_fmt(at, sizeof(at), "$.%s.%s", name, it->string);
			return bad(err, file, at, "unknown member (agent, grant, deny, max, set, "
				   "sessions)");
		}
	}
	/* in a fixed order, whatever the file's: deny wins over grant */
	for (k = 0; order[k]; k++) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(sec, order[k]);
		int r = 0;

		if (!m)
			continue;
		box_fmt(at, sizeof(at), "$.%s.%s", name, order[k]);
		if (k <= 2)
			r = name_list(t, m, k == 2 ? 0 : 1, k == 0, file, at, err);
		else if (k == 3)
			r = cap_map(t, m, file, at, err);
		else if (k == 4)
			r = set_map(t, m, file, at, err);
		else
			r = sessions_map(t, m, file, at, err);
		if (r < 0)
			return -1;
	}
	return 0;
}

/* A section of another binary: its members and their types, not the names it gives. */
static int check_shape(const cJSON *sec, const char *file, const char *name,
		       struct box_err *err)
{
	struct box_trust shape;
	struct box_field none[] = { { "session", BOX_F_STRING, 0, 0, 0, NULL, NULL, 0 },
				    { NULL, 0, 0, 0, 0, NULL, NULL, 0 } };
	const cJSON *it, *m;
	char at[BOX_ERR_FIELD_MAX];
	int r = 0;

	if (!cJSON_IsObject(sec)) {
		box_fmt(at, sizeof(at), "$.%s", name);
		return bad(err, file, at, "expected an object");
	}
	cJSON_ArrayForEach(it, sec) {
		box_fmt(at, sizeof(at), "$.%s.%s", name, it->string);
		if (!strcmp(it->string, "agent") || !strcmp(it->string, "grant") ||
		    !strcmp(it->string, "deny")) {
			if (!cJSON_IsArray(it))
				return bad(err, file, at, "expected an array of member names");
			cJSON_ArrayForEach(m, it)
				if (!cJSON_IsString(m))
					return bad(err, file, at, "expected an array of member names");
		} else if (!strcmp(it->string, "max")) {
			if (!cJSON_IsObject(it))
				return bad(err, file, at, "expected an object of member: integer");
			cJSON_ArrayForEach(m, it) {
				int64_t v;

				if (!box_json_int64(m, &v) || v < 0)
					return bad(err, file, at, "%s: expected an integer", m->string);
			}
		} else if (!strcmp(it->string, "set")) {
			if (!cJSON_IsObject(it))
				return bad(err, file, at, "expected an object of member: value");
		} else if (!strcmp(it->string, "sessions")) {
			box_trust_init(&shape);
			shape.fields = none;
			shape.nfields = 1;
			r = sessions_map(&shape, it, file, at, err);
			cJSON_Delete(shape.sessions);
			if (r < 0)
				return -1;
		} else {
			return bad(err, file, at, "unknown member (agent, grant, deny, max, set, "
				   "sessions)");
		}
	}
	return 0;
}

static int apply_policy(struct box_trust *t, const cJSON *pol, const char *binary,
			const char *file, struct box_err *err)
{
	const cJSON *it, *v;
	char at[BOX_ERR_FIELD_MAX];
	size_t k;

	if (!cJSON_IsObject(pol))
		return bad(err, file, "$", "a policy is a JSON object");
	cJSON_ArrayForEach(it, pol) {
		if (strcmp(it->string, "policy_version") == 0)
			continue;
		for (k = 0; sections[k] && strcmp(sections[k], it->string) != 0; k++)
			;
		if (!sections[k]) {
			box_fmt(at, sizeof(at), "$.%.64s", it->string);
			return bad(err, file, at, "unknown section (box-run, box-sandbox, box-pack, "
				   "box-pull, box-lock, box-mcp)");
		}
	}
	v = cJSON_GetObjectItemCaseSensitive(pol, "policy_version");
	if (v && box_json_int_value(v, 0) != 1)
		return bad(err, file, "$.policy_version", "only version 1 is known");
	/* the other binaries' sections are checked for their shape, so that a broken policy
	 * fails whichever binary reads it first */
	for (k = 0; sections[k]; k++) {
		it = cJSON_GetObjectItemCaseSensitive(pol, sections[k]);
		if (it && strcmp(sections[k], binary) != 0 && strcmp(sections[k], "box-mcp") != 0 &&
		    check_shape(it, file, sections[k], err) < 0)
			return -1;
	}
	/* box-mcp's section has members of its own (lib/mcp/mcptools.h), which box-mcp reads */
	it = strcmp(binary, "box-mcp") != 0 ? cJSON_GetObjectItemCaseSensitive(pol, binary) : NULL;
	return it ? apply_section(t, it, file, binary, err) : 0;
}

/* A member twice in one object: JSON readers disagree on which one counts, so a policy may
 * not have any. Depth is bounded by the parser's BOX_JSON_MAX_DEPTH. */
static int duplicate(const cJSON *v, char *at, size_t n)
{
	const cJSON *a, *b;

	for (a = v ? v->child : NULL; a; a = a->next) {
		if (cJSON_IsObject(v))
			for (b = a->next; b; b = b->next)
				if (strcmp(a->string, b->string) == 0) {
					box_fmt(at, n, "%.200s", a->string);
					return 1;
				}
		if ((cJSON_IsObject(a) || cJSON_IsArray(a)) && duplicate(a, at, n))
			return 1;
	}
	return 0;
}

static int read_policy(const char *path, cJSON **out, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_TRUST_FILE_MAX);
	char at[256];
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK), r;

	if (fd < 0)
		return box_err_sys(err, "policy %.300s", path);
	/* a FIFO or a device would block or never end: a policy is a file */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return box_err_set(err, BOX_E_USAGE, "policy %.300s: not a regular file", path);
	}
	r = box_buf_read_fd(&b, fd, err);
	close(fd);

	if (r < 0) {
		if (err->code == BOX_E_LIMIT)
			box_err_set(err, BOX_E_USAGE, "policy %.300s: larger than %d bytes", path,
				    BOX_TRUST_FILE_MAX);
		else if (!strstr(err->message, "policy ")) {
			char msg[BOX_ERR_MSG_MAX];

			snprintf(msg, sizeof(msg), "%s", err->message);
			box_err_set(err, err->code, "policy %.300s: %s", path, msg);
		}
		box_buf_release(&b);
		return -1;
	}
	*out = box_json_parse(b.data ? b.data : "", b.len, err);
	box_buf_release(&b);
	if (!*out) {
		char msg[BOX_ERR_MSG_MAX];

		snprintf(msg, sizeof(msg), "%s", err->message);
		box_err_set(err, BOX_E_USAGE, "policy %.300s: %s", path, msg);
		return -1;
	}
	if (duplicate(*out, at, sizeof(at))) {
		cJSON_Delete(*out);
		*out = NULL;
		return box_err_set(err, BOX_E_USAGE, "policy %.300s: member %s is given twice",
				   path, at);
	}
	return 0;
}

int box_trust_load(struct box_trust *t, const char *binary, const struct box_field *fields,
		   const char *path, int trust_request, struct box_err *err)
{
	cJSON *pol = NULL;
	size_t i;
	int r;

	box_trust_release(t);
	t->fields = fields;
	for (i = 0; fields && fields[i].name; i++)
		;
	t->nfields = i;
	t->trust_request = trust_request;
	t->agent = calloc(i + 1, 1);
	t->cap = calloc(i + 1, sizeof(*t->cap));
	if (!t->agent || !t->cap) {
		box_trust_release(t);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}
	for (i = 0; i < t->nfields; i++)
		t->cap[i] = fields[i].type == BOX_F_INT ? fields[i].max : INT64_MAX;
	snprintf(t->source, sizeof(t->source), "built-in");
	pol = box_json_parse(box_trust_default_policy, strlen(box_trust_default_policy), err);
	r = pol ? apply_policy(t, pol, binary, "(built-in)", err) : -1;
	cJSON_Delete(pol);
	pol = NULL;
	if (r == 0 && !path) {
		path = getenv("BOX_POLICY");
		if (path && !path[0])
			path = NULL;
	}
	if (r == 0 && path) {
		snprintf(t->source, sizeof(t->source), "%s", path);
		r = read_policy(path, &pol, err);
		if (r == 0)
			r = apply_policy(t, pol, binary, path, err);
		cJSON_Delete(pol);
	}
	if (r < 0) {
		box_trust_release(t);
		return -1;
	}
	return 0;
}

int box_trust_may_set(const struct box_trust *t, const char *name)
{
	long i = field_index(t, name);

	if (i < 0 || t->fields[i].flag_only)
		return 0;
	if (t->trust_request)
		return 1;
	/* a value the policy sets is the operator's: the request cannot change it */
	return t->agent[i] && !cJSON_GetObjectItemCaseSensitive(t->set, name);
}

int64_t box_trust_cap(const struct box_trust *t, const char *name, const cJSON *flags)
{
	char key[128];
	long i = field_index(t, name), j;
	int64_t v;

	if (i < 0)
		return INT64_MAX;
	snprintf(key, sizeof(key), "max_%s", name);
	j = field_index(t, key);
	/* the operator's cap member, from a flag or else from the policy's set */
	if (j >= 0 && t->fields[j].flag_only &&
	    (box_json_int64(cJSON_GetObjectItemCaseSensitive(flags, key), &v) ||
	     box_json_int64(cJSON_GetObjectItemCaseSensitive(t->set, key), &v)))
		return v;
	return t->trust_request ? t->fields[i].max : t->cap[i];
}

/* the unit of a limit member, from its name */
static const char *unit_of(const char *name)
{
	size_t n = strlen(name);

	if (n > 3 && strcmp(name + n - 3, "_ms") == 0)
		return "ms";
	if (strstr(name, "bytes") || strcmp(name, "memory") == 0)
		return "bytes";
	return strcmp(name, "pids") == 0 ? "processes" : "";
}

int box_trust_check(const struct box_trust *t, const cJSON *req, const cJSON *flags,
		    struct box_err *err)
{
	const cJSON *m;
	char path[BOX_ERR_FIELD_MAX];

	cJSON_ArrayForEach(m, req) {
		long i = field_index(t, m->string);
		const struct box_field *f;
		int64_t v, cap;

		if (i < 0 || cJSON_IsNull(m))
			continue;
		f = &t->fields[i];
		snprintf(path, sizeof(path), "$.%s", f->name);
		/* what the command line sets is fixed; the session is checked by its binding */
		if (!t->trust_request && flags && strcmp(f->name, "session") != 0 &&
		    cJSON_GetObjectItemCaseSensitive(flags, f->name)) {
			box_err_set(err, BOX_E_POLICY, "%s is set by the operator's command line, not "
				    "the request's", f->name);
			box_err_path(err, path);
			return -1;
		}
		if (f->flag_only || !box_trust_may_set(t, f->name)) {
			box_err_set(err, BOX_E_POLICY, "%s is the operator's to set (%s), not the "
				    "request's", f->name, f->flag_only ? "on the command line only" :
				    "the policy does not grant it");
			box_err_path(err, path);
			return -1;
		}
		if (f->type != BOX_F_INT || !box_json_int64(m, &v))
			continue;
		cap = box_trust_cap(t, f->name, flags);
		if (v > cap) {
			box_err_limit(err, BOX_E_POLICY, f->name, cap, unit_of(f->name),
				      "%s %lld is over the operator's cap of %lld", f->name,
				      (long long)v, (long long)cap);
			box_err_path(err, path);
			return -1;
		}
	}
	return 0;
}

int box_trust_apply(const struct box_trust *t, cJSON *req, struct box_err *err)
{
	const cJSON *m;

	cJSON_ArrayForEach(m, t->set) {
		cJSON *v = cJSON_Duplicate(m, 1);

		if (!v)
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
		cJSON_DeleteItemFromObjectCaseSensitive(req, m->string);
		cJSON_AddItemToObject(req, m->string, v);
	}
	return 0;
}

cJSON *box_trust_schema(const struct box_trust *t, const cJSON *full, const cJSON *flags,
			struct box_err *err)
{
	cJSON *s = cJSON_Duplicate(full, 1), *props, *p, *next, *req;
	int k;

	if (!s)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	props = cJSON_GetObjectItemCaseSensitive(s, "properties");
	for (p = props ? props->child : NULL; p; p = next) {
		long i = field_index(t, p->string);
		int64_t cap;

		next = p->next;
		if (i < 0 || !box_trust_may_set(t, p->string) ||
		    (!t->trust_request && strcmp(p->string, "session") != 0 &&
		     cJSON_GetObjectItemCaseSensitive(flags, p->string))) {
			cJSON_Delete(cJSON_DetachItemViaPointer(props, p));
			continue;
		}
		if (t->fields[i].type != BOX_F_INT)
			continue;
		cap = box_trust_cap(t, p->string, flags);
		if (cap < t->fields[i].max) {
			cJSON *v = box_json_int64_new(cap), *d;

			if (!v) {
				cJSON_Delete(s);
				return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
			}
			cJSON_DeleteItemFromObjectCaseSensitive(p, "maximum");
			cJSON_AddItemToObject(p, "maximum", v);
			d = cJSON_GetObjectItemCaseSensitive(p, "default");
			if (d && box_json_int_value(d, 0) > cap)
				cJSON_Delete(cJSON_DetachItemViaPointer(p, d));
		}
	}
	req = cJSON_GetObjectItemCaseSensitive(s, "required");
	for (k = cJSON_GetArraySize(req) - 1; k >= 0; k--) {
		const char *n = cJSON_GetStringValue(cJSON_GetArrayItem(req, k));

		if (!n || !cJSON_GetObjectItemCaseSensitive(props, n))
			cJSON_DeleteItemFromArray(req, k);
	}
	return s;
}

int box_trust_session_any(const struct box_trust *t)
{
	return t->trust_request ||
	       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t->sessions, "any"));
}

int box_trust_may_create(const struct box_trust *t)
{
	return t->trust_request ||
	       !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(t->sessions, "create"));
}

int box_trust_session_ok(const struct box_trust *t, const char *operator_session,
			 const char *name)
{
	const cJSON *it, *prefix;

	if (!name)
		return 0;
	if (t->trust_request)
		return 1;
	/* a command line that names a session binds the request to it alone */
	if (operator_session)
		return strcmp(operator_session, name) == 0;
	if (box_trust_session_any(t))
		return 1;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(t->sessions, "names"))
		if (cJSON_IsString(it) && strcmp(it->valuestring, name) == 0)
			return 1;
	prefix = cJSON_GetObjectItemCaseSensitive(t->sessions, "prefix");
	return cJSON_IsString(prefix) &&
	       strncmp(name, prefix->valuestring, strlen(prefix->valuestring)) == 0;
}

static int deny_session(struct box_err *err, const char *member, const char *name,
			const char *operator_session)
{
	char path[64];

	if (operator_session)
		box_err_set(err, BOX_E_POLICY, "%s %.80s: the command line binds this request to "
			    "session %.80s", member, name, operator_session);
	else
		box_err_set(err, BOX_E_POLICY, "%s %.80s is outside the sessions the policy lets "
			    "a request reach", member, name);
	box_fmt(path, sizeof(path), "$.%s", member);
	box_err_path(err, path);
	return -1;
}

int box_trust_sessions_check(const struct box_trust *t, const cJSON *agent, const char *op,
			     const char *operator_session, struct box_err *err)
{
	const char *s, *from;

	if (!agent || t->trust_request)
		return 0;
	s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(agent, "session"));
	from = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(agent, "from"));
	if (s && !box_trust_session_ok(t, operator_session, s))
		return deny_session(err, "session", s, operator_session);
	if (from && !box_trust_session_ok(t, operator_session, from))
		return deny_session(err, "from", from, operator_session);
	if (!s && !operator_session && op && strcmp(op, "create") == 0 &&
	    !box_trust_session_any(t)) {
		box_err_set(err, BOX_E_POLICY, "a request may not create a session of a new id: the "
			    "operator binds it to one (--session) or the policy lets it name them");
		box_err_path(err, "$.session");
		return -1;
	}
	return 0;
}

void box_trust_filter_sessions(const struct box_trust *t, const char *operator_session,
			       cJSON *list)
{
	cJSON *it, *next;

	for (it = list ? list->child : NULL; it; it = next) {
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it,
										      "session"));

		next = it->next;
		if (!box_trust_session_ok(t, operator_session, name))
			cJSON_Delete(cJSON_DetachItemViaPointer(list, it));
	}
}

cJSON *box_trust_effective(const struct box_trust *t)
{
	cJSON *o = cJSON_CreateObject(), *agent, *max;
	size_t i;

	if (!o)
		return NULL;
	agent = cJSON_AddObjectToObject(o, "agent");
	max = cJSON_AddObjectToObject(o, "max");
	if (!agent || !max)
		return cJSON_Delete(o), NULL;
	for (i = 0; i < t->nfields; i++) {
		const char *name = t->fields[i].name;

		if (box_trust_may_set(t, name))
			cJSON_AddTrueToObject(agent, name);
		if (t->fields[i].type == BOX_F_INT && t->cap[i] < t->fields[i].max)
			box_json_add_int64(max, name, t->cap[i]);
	}
	if (t->set)
		cJSON_AddItemToObject(o, "set", cJSON_Duplicate(t->set, 1));
	if (t->sessions)
		cJSON_AddItemToObject(o, "sessions", cJSON_Duplicate(t->sessions, 1));
	cJSON_AddBoolToObject(o, "trust_request", t->trust_request != 0);
	return o;
}
