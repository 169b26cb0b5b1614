#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "sbexec.h"
#include "json.h"
#include "utf8.h"
#include "banned.h"

static const char *const limit_names[] = {
	[BOX_SBEXEC_LIMIT_NONE] = NULL, [BOX_SBEXEC_LIMIT_TIMEOUT] = "timeout",
	[BOX_SBEXEC_LIMIT_MEMORY] = "memory", [BOX_SBEXEC_LIMIT_PIDS] = "pids",
	[BOX_SBEXEC_LIMIT_CPU] = "cpu", [BOX_SBEXEC_LIMIT_DISK] = "disk",
	[BOX_SBEXEC_LIMIT_OTHER] = NULL,
};

void box_sbexec_result_init(struct box_sbexec_result *r)
{
	memset(r, 0, sizeof(*r));
	box_buf_init(&r->out, 0);
	box_buf_init(&r->err, 0);
	box_err_init(&r->output_error);
	r->total_lines = -1;
	r->duration_ms = -1;
}

void box_sbexec_result_release(struct box_sbexec_result *r)
{
	box_buf_release(&r->out);
	box_buf_release(&r->err);
	free(r->full_output_path);
	free(r->full_output_log);
	cJSON_Delete(r->outputs);
	cJSON_Delete(r->extra);
	box_sbexec_result_init(r);
}

const char *box_sbexec_limit_name(const struct box_sbexec_result *r)
{
	if (r->limit == BOX_SBEXEC_LIMIT_OTHER)
		return r->limit_name;
	return (size_t)r->limit < sizeof(limit_names) / sizeof(limit_names[0]) ?
	       limit_names[r->limit] : NULL;
}

int box_sbexec_set_output(struct box_sbexec_result *r, int stream, const char *p, size_t n,
			  struct box_err *err)
{
	struct box_buf *b = stream == 1 ? &r->out : &r->err;
	size_t cut = box_utf8_cut(p ? p : "", n);
	int replaced;

	box_buf_release(b);
	box_buf_init(b, cut * 3 + 1);
	replaced = box_utf8_sanitize(p ? p : "", cut, b, err);
	if (replaced < 0)
		return -1;
	if (replaced || cut != n)
		r->lossy = 1;
	return 0;
}

enum box_sbexec_limit box_sbexec_classify(const struct box_sbexec_facts *f)
{
	if (f->timed_out)
		return BOX_SBEXEC_LIMIT_TIMEOUT;
	if (f->seen != BOX_SBEXEC_LIMIT_NONE)
		return f->seen;
	if (f->disk_full)
		return BOX_SBEXEC_LIMIT_DISK;
	if (f->sig == SIGXCPU)
		return BOX_SBEXEC_LIMIT_CPU;
	if (f->sig == SIGXFSZ)
		return BOX_SBEXEC_LIMIT_DISK;
	if (f->oom_kills > 0)
		return BOX_SBEXEC_LIMIT_MEMORY;
	/* a command that succeeded despite a refused fork was not ended by the limit */
	if (f->pids_max_hits > 0 && !(f->exited && f->code == 0))
		return BOX_SBEXEC_LIMIT_PIDS;
	return BOX_SBEXEC_LIMIT_NONE;
}

void box_sbexec_judge(const struct box_sbexec_result *r, const struct box_sbexec_conf *c,
		      struct box_err *e)
{
	const struct {
		const char *key, *unit;
		int64_t conf;
	} info[] = {
		[BOX_SBEXEC_LIMIT_TIMEOUT] = { "timeout_ms", "ms", c->timeout_ms },
		[BOX_SBEXEC_LIMIT_MEMORY] = { "memory", "bytes", c->memory },
		[BOX_SBEXEC_LIMIT_PIDS] = { "pids", "processes", c->pids },
		[BOX_SBEXEC_LIMIT_CPU] = { "cpu", "ms", c->cpu_ms },
		[BOX_SBEXEC_LIMIT_DISK] = { "disk", "bytes", c->disk_bytes },
	};
	const char *name = box_sbexec_limit_name(r);

	box_err_init(e);
	if (r->limit == BOX_SBEXEC_LIMIT_TIMEOUT)
		box_err_set(e, BOX_E_TIMEOUT, "the command ran out of time");
	else if (name)
		box_err_set(e, BOX_E_LIMIT, "the command hit the %s limit", name);
	else if (r->signal[0])
		box_err_set(e, BOX_E_GUEST, "the command was killed by %s", r->signal);
	else if (r->exited && r->exit_code != 0)
		box_err_set(e, BOX_E_GUEST, "the command exited with status %d", r->exit_code);
	else if (r->output_error.code != BOX_OK)
		*e = r->output_error;
	if (r->limit != BOX_SBEXEC_LIMIT_NONE && r->limit != BOX_SBEXEC_LIMIT_OTHER &&
	    (size_t)r->limit < sizeof(info) / sizeof(info[0])) {
		box_fmt(e->limit, sizeof(e->limit), "%s", info[r->limit].key);
		box_fmt(e->unit, sizeof(e->unit), "%s", info[r->limit].unit);
		e->configured = info[r->limit].conf;
		e->has_configured = 1;
	}
}

static int add_text(cJSON *o, const char *key, const struct box_buf *b)
{
	cJSON *s = box_json_string_n(b->data ? b->data : "", b->len);

	return s && cJSON_AddItemToObject(o, key, s) ? 0 : (cJSON_Delete(s), -1);
}

int box_sbexec_set_cut_output(struct box_sbexec_result *r, int stream, const char *head,
			      size_t hn, const char *tail, size_t tn, int64_t total,
			      const char *log, struct box_err *err)
{
	struct box_buf b;
	char marker[512];
	size_t skip = 0;
	int rc;

	hn = box_utf8_cut(head ? head : "", hn);
	while (skip < tn && skip < 3 && ((unsigned char)tail[skip] & 0xC0) == 0x80)
		skip++;
	tail += skip;
	tn -= skip;
	box_fmt(marker, sizeof(marker), "%s" BOX_SBEXEC_CUT_MARKER "\n",
		hn && head[hn - 1] != '\n' ? "\n" : "", (long long)(total - (int64_t)(hn + tn)),
		log ? log : "nowhere");
	box_buf_init(&b, hn + strlen(marker) + tn + 1);
	if (box_buf_append(&b, head ? head : "", hn, err) < 0 ||
	    box_buf_append(&b, marker, strlen(marker), err) < 0 ||
	    box_buf_append(&b, tn ? tail : "", tn, err) < 0) {
		box_buf_release(&b);
		return -1;
	}
	rc = box_sbexec_set_output(r, stream, b.data, b.len, err);
	box_buf_release(&b);
	return rc;
}

cJSON *box_sbexec_to_json(const struct box_sbexec_result *r)
{
	cJSON *o = cJSON_CreateObject(), *it;
	const char *limit = box_sbexec_limit_name(r);
	int bad = !o;

	if (bad)
		return NULL;
	bad |= !(r->exited ? cJSON_AddNumberToObject(o, "exit_code", r->exit_code) :
		 cJSON_AddNullToObject(o, "exit_code"));
	bad |= !(r->signal[0] ? cJSON_AddStringToObject(o, "signal", r->signal) :
		 cJSON_AddNullToObject(o, "signal"));
	bad |= add_text(o, "stdout", &r->out) < 0 || add_text(o, "stderr", &r->err) < 0;
	bad |= !cJSON_AddBoolToObject(o, "truncated", r->truncated);
	if (r->total_lines >= 0)
		bad |= !box_json_add_int64(o, "total_lines", r->total_lines);
	if (r->full_output_path) {
		bad |= !cJSON_AddStringToObject(o, "full_output_path", r->full_output_path);
		if (r->full_output_log)
			bad |= !cJSON_AddStringToObject(o, "full_output_log", r->full_output_log);
		if (r->full_output_truncated)
			bad |= !cJSON_AddBoolToObject(o, "full_output_truncated", 1);
	}
	if (r->duration_ms >= 0)
		bad |= !box_json_add_int64(o, "duration_ms", r->duration_ms);
	bad |= !(limit ? cJSON_AddStringToObject(o, "resource_limit", limit) :
		 cJSON_AddNullToObject(o, "resource_limit"));
	if (r->limits_enforced_by[0])
		bad |= !cJSON_AddStringToObject(o, "limits_enforced_by", r->limits_enforced_by);
	if (r->disk_limit[0])
		bad |= !cJSON_AddStringToObject(o, "disk_limit", r->disk_limit);
	if (r->disk_unmeasured[0])
		bad |= !cJSON_AddStringToObject(o, "disk_unmeasured", r->disk_unmeasured);
	if (r->lossy)
		bad |= !cJSON_AddBoolToObject(o, "lossy", 1);
	/* a listing that failed lists nothing: never a part of /output as if it were all */
	it = r->outputs && r->output_error.code == BOX_OK ? cJSON_Duplicate(r->outputs, 1) :
	     cJSON_CreateArray();
	bad |= !it || !cJSON_AddItemToObject(o, "outputs", it);
	if (r->output_error.code != BOX_OK) {
		it = box_err_to_json(&r->output_error);
		bad |= !it || !cJSON_AddItemToObject(o, "output_error", it);
	}
	for (it = r->extra ? r->extra->child : NULL; it && !bad; it = it->next) {
		cJSON *dup = cJSON_Duplicate(it, 1);

		bad |= !dup || !cJSON_AddItemToObject(o, it->string, dup);
	}
	if (bad) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* Copies a string member of at most cap - 1 bytes into out; 0 unless it is too long. */
static int copy_name(char *out, size_t cap, const char *s)
{
	if (strlen(s) >= cap)
		return -1;
	box_fmt(out, cap, "%s", s);
	return 0;
}

/* One member of a plug-in's answer into r: 1 when it is one box knows, 0 when it is not,
 * -1 when it is of the wrong type. */
static int take_member(struct box_sbexec_result *r, const cJSON *m, struct box_err *err)
{
	const char *k = m->string;
	size_t i;

	if (strcmp(k, "exit_code") == 0) {
		if (cJSON_IsNull(m))
			return 1;
		if (!cJSON_IsNumber(m) || m->valuedouble != (double)(int)m->valuedouble)
			return -1;
		r->exited = 1;
		r->exit_code = (int)m->valuedouble;
		return 1;
	}
	if (strcmp(k, "signal") == 0)
		return cJSON_IsNull(m) ? 1 : cJSON_IsString(m) &&
		       copy_name(r->signal, sizeof(r->signal), m->valuestring) == 0 ? 1 : -1;
	if (strcmp(k, "stdout") == 0 || strcmp(k, "stderr") == 0)
		return !cJSON_IsString(m) ? -1 :
		       box_sbexec_set_output(r, k[3] == 'o' ? 1 : 2, m->valuestring,
					     strlen(m->valuestring), err) < 0 ? -2 : 1;
	if (strcmp(k, "truncated") == 0 || strcmp(k, "lossy") == 0 ||
	    strcmp(k, "full_output_truncated") == 0) {
		int *v = k[0] == 't' ? &r->truncated : k[0] == 'l' ? &r->lossy :
			 &r->full_output_truncated;

		if (!cJSON_IsBool(m))
			return -1;
		*v = *v || cJSON_IsTrue(m);
		return 1;
	}
	if (strcmp(k, "total_lines") == 0 || strcmp(k, "duration_ms") == 0) {
		if (!cJSON_IsNumber(m) || m->valuedouble < 0)
			return -1;
		*(k[0] == 't' ? &r->total_lines : &r->duration_ms) = box_json_int_value(m, 0);
		return 1;
	}
	if (strcmp(k, "full_output_path") == 0 || strcmp(k, "full_output_log") == 0) {
		char **to = k[12] == 'p' ? &r->full_output_path : &r->full_output_log;

		free(*to);
		if (!cJSON_IsString(m) || !(*to = strdup(m->valuestring)))
			return -1;
		return 1;
	}
	if (strcmp(k, "limits_enforced_by") == 0)
		return cJSON_IsString(m) && copy_name(r->limits_enforced_by,
						     sizeof(r->limits_enforced_by),
						     m->valuestring) == 0 ? 1 : -1;
	if (strcmp(k, "resource_limit") == 0) {
		if (cJSON_IsNull(m))
			return 1;
		if (!cJSON_IsString(m) || !*m->valuestring)
			return -1;
		r->limit = BOX_SBEXEC_LIMIT_OTHER;
		for (i = 0; i < sizeof(limit_names) / sizeof(limit_names[0]); i++)
			if (limit_names[i] && strcmp(limit_names[i], m->valuestring) == 0)
				r->limit = (enum box_sbexec_limit)i;
		return r->limit != BOX_SBEXEC_LIMIT_OTHER ||
		       copy_name(r->limit_name, sizeof(r->limit_name), m->valuestring) == 0 ? 1 : -1;
	}
	if (strcmp(k, "outputs") == 0) {
		if (!cJSON_IsArray(m) || !(r->outputs = cJSON_Duplicate(m, 1)))
			return -1;
		return 1;
	}
	if (strcmp(k, "output_error") == 0) {
		if (box_err_from_json(&r->output_error, m) < 0 || r->output_error.code == BOX_OK)
			return -1;
		return 1;
	}
	/* box says itself whether the exec failed, and for which session */
	return strcmp(k, "ok") == 0 || strcmp(k, "session") == 0 || strcmp(k, "error") == 0 ? 1 : 0;
}

int box_sbexec_from_json(struct box_sbexec_result *r, const cJSON *obj, struct box_err *err)
{
	const cJSON *m;

	if (!cJSON_IsObject(obj))
		return box_err_set(err, BOX_E_PROVIDER, "the provider's exec result is not an object");
	cJSON_ArrayForEach(m, obj) {
		int t = take_member(r, m, err);

		if (t == -2)
			return -1;
		if (t < 0)
			return box_err_set(err, BOX_E_PROVIDER, "the provider's exec result has a bad "
					   "%.64s", m->string);
		if (t == 0) {
			cJSON *dup = cJSON_Duplicate(m, 1);

			if (!r->extra)
				r->extra = cJSON_CreateObject();
			if (!dup || !r->extra || !cJSON_AddItemToObject(r->extra, m->string, dup)) {
				cJSON_Delete(dup);
				return box_err_set(err, BOX_E_INTERNAL, "out of memory");
			}
		}
	}
	return 0;
}
