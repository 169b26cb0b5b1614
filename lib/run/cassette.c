#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cassette.h"
#include "atomic.h"
#include "base64.h"
#include "json.h"
#include "utf8.h"
#include "vm.h"
#include "banned.h"

static const struct {
	uint8_t op;
	const char *name;
} ops[] = {
	{ BOX_OP_FS_READ, "fs.read" }, { BOX_OP_FS_WRITE, "fs.write" },
	{ BOX_OP_FS_APPEND, "fs.append" }, { BOX_OP_FS_EXISTS, "fs.exists" },
	{ BOX_OP_FS_STAT, "fs.stat" }, { BOX_OP_FS_LIST, "fs.list" },
	{ BOX_OP_FS_REMOVE, "fs.remove" }, { BOX_OP_FS_MKDIR, "fs.mkdir" },
	{ BOX_OP_FS_WALK, "fs.walk" }, { BOX_OP_HTTP, "http" }, { BOX_OP_TOOL, "tool" },
	{ BOX_OP_CLOCK, "clock" }, { BOX_OP_REQUIRE, "require" },
};

const char *box_cassette_op_name(uint8_t op)
{
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (ops[i].op == op)
			return ops[i].name;
	return "?";
}

void box_cassette_init(struct box_cassette *c, size_t max)
{
	memset(c, 0, sizeof(*c));
	box_buf_init(&c->lines, max);
	for (int i = 0; i < BOX_IPC_MAX_FIELDS; i++)
		box_buf_init(&c->field[i], BOX_CASSETTE_MAX_BYTES);
}

void box_cassette_release(struct box_cassette *c)
{
	cJSON_Delete(c->head);
	c->head = NULL;
	box_buf_release(&c->lines);
	/* a recording counts its calls in ncalls but holds them as lines, not in calls */
	for (size_t i = 0; c->calls && i < c->ncalls; i++)
		cJSON_Delete(c->calls[i]);
	free(c->calls);
	c->calls = NULL;
	c->ncalls = c->next = 0;
	for (int i = 0; i < BOX_IPC_MAX_FIELDS; i++)
		box_buf_release(&c->field[i]);
}

static int add_fields(struct box_buf *b, const char *key, const struct box_ipc_field *f, int n,
		      struct box_err *err)
{
	int i;

	if (box_buf_printf(b, err, ",\"%s\":[", key) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (box_buf_puts(b, i ? ",\"" : "\"", err) < 0 ||
		    box_base64_encode(f[i].p, f[i].n, b, err) < 0 || box_buf_puts(b, "\"", err) < 0)
			return -1;
	}
	return box_buf_puts(b, "]", err);
}

static int too_big(struct box_cassette *c, struct box_err *err)
{
	if (err->code == BOX_E_LIMIT)
		box_err_limit(err, BOX_E_LIMIT, "cassette_bytes", (int64_t)c->lines.max, "bytes",
			      "the cassette would pass %zu bytes", c->lines.max);
	return -1;
}

int box_cassette_add(struct box_cassette *c, uint8_t op, const struct box_ipc_field *in, int nin,
		     uint8_t rop, const struct box_ipc_field *out, int nout, struct box_err *err)
{
	size_t at = c->lines.len;

	if (box_buf_printf(&c->lines, err, "{\"call\":\"%s\"", box_cassette_op_name(op)) < 0 ||
	    add_fields(&c->lines, "args", in, nin, err) < 0 ||
	    box_buf_printf(&c->lines, err, ",\"reply\":\"%s\"",
			   rop == BOX_OP_OK ? "ok" : "err") < 0 ||
	    add_fields(&c->lines, "answer", out, nout, err) < 0 ||
	    box_buf_puts(&c->lines, "}\n", err) < 0) {
		box_buf_truncate(&c->lines, at);
		return too_big(c, err);
	}
	c->ncalls++;
	return 0;
}

int box_cassette_abort(struct box_cassette *c, uint8_t op, const struct box_ipc_field *in,
		       int nin, const struct box_err *e, struct box_err *err)
{
	size_t at = c->lines.len;
	cJSON *eo = box_err_to_json(e);
	char *s = eo ? cJSON_PrintUnformatted(eo) : NULL;
	int r;

	cJSON_Delete(eo);
	if (!s)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	r = box_buf_printf(&c->lines, err, "{\"call\":\"%s\"", box_cassette_op_name(op));
	if (r == 0)
		r = add_fields(&c->lines, "args", in, nin, err);
	if (r == 0)
		r = box_buf_printf(&c->lines, err, ",\"abort\":%s}\n", s);
	cJSON_free(s);
	if (r < 0) {
		box_buf_truncate(&c->lines, at);
		return too_big(c, err);
	}
	c->ncalls++;
	return 0;
}

int box_cassette_write(struct box_cassette *c, const cJSON *head, const char *path,
		       struct box_err *err)
{
	struct box_buf out = BOX_BUF_INIT((size_t)BOX_CASSETTE_MAX_BYTES + 4096);
	char dir[PATH_MAX], base[PATH_MAX];
	char *h = cJSON_PrintUnformatted(head);
	int dfd, r = -1;

	if (!h)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	if (strlen(path) >= sizeof(dir)) {
		cJSON_free(h);
		return box_err_set(err, BOX_E_INVALID, "record: path too long");
	}
	snprintf(dir, sizeof(dir), "%s", path);
	snprintf(base, sizeof(base), "%s", path);
	if (box_buf_puts(&out, h, err) == 0 && box_buf_puts(&out, "\n", err) == 0 &&
	    box_buf_append(&out, c->lines.data ? c->lines.data : "", c->lines.len, err) == 0 &&
	    box_buf_printf(&out, err, "{\"end\":true,\"calls\":%zu}\n", c->ncalls) == 0) {
		if (out.len > (size_t)BOX_CASSETTE_MAX_BYTES) {
			box_err_limit(err, BOX_E_LIMIT, "cassette_bytes", BOX_CASSETTE_MAX_BYTES,
				      "bytes", "the cassette would pass %lld bytes",
				      (long long)BOX_CASSETTE_MAX_BYTES);
		} else {
			dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (dfd < 0) {
				box_err_sys(err, "record: %.200s", path);
			} else {
				r = box_atomic_write(dfd, basename(base), out.data, out.len, 0644,
						     err);
				close(dfd);
			}
		}
	}
	cJSON_free(h);
	box_buf_release(&out);
	return r;
}

static int bad_line(size_t line, const char *what, struct box_err *err)
{
	return box_err_set(err, BOX_E_INVALID, "cassette line %zu: %s", line, what);
}

static int fields_ok(const cJSON *a)
{
	const cJSON *it;

	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > BOX_IPC_MAX_FIELDS)
		return 0;
	cJSON_ArrayForEach(it, a)
		if (!cJSON_IsString(it))
			return 0;
	return 1;
}

/* One call line: call a known name, args fields, then reply + answer or abort (an error). */
static int call_ok(const cJSON *o)
{
	const char *name = box_json_get_str(o, "call", NULL);
	const char *reply = box_json_get_str(o, "reply", NULL);
	const cJSON *abort = cJSON_GetObjectItemCaseSensitive(o, "abort");
	struct box_err e;
	int known = 0;

	for (size_t i = 0; name && i < sizeof(ops) / sizeof(ops[0]); i++)
		known |= strcmp(ops[i].name, name) == 0;
	if (!known || !fields_ok(cJSON_GetObjectItemCaseSensitive(o, "args")))
		return 0;
	if (abort)
		return !reply && box_err_from_json(&e, abort) == 0;
	return reply && (strcmp(reply, "ok") == 0 || strcmp(reply, "err") == 0) &&
	       fields_ok(cJSON_GetObjectItemCaseSensitive(o, "answer"));
}

/* absent, or [{"name", "refused"?, "artifact"?, "digest"?}], every member a string */
static int tools_ok(const cJSON *a)
{
	const cJSON *t, *m;

	if (!a)
		return 1;
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > 4096)
		return 0;
	cJSON_ArrayForEach(t, a) {
		if (!cJSON_IsObject(t) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(t, "name")))
			return 0;
		for (m = t->child; m; m = m->next)
			if (!cJSON_IsString(m) || strlen(m->valuestring) > 1024 ||
			    (strcmp(m->string, "name") && strcmp(m->string, "refused") &&
			     strcmp(m->string, "artifact") && strcmp(m->string, "digest")))
				return 0;
	}
	return 1;
}

int box_cassette_load(struct box_cassette *c, const char *path, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT((size_t)BOX_CASSETTE_MAX_BYTES);
	size_t line = 0, cap = 0;
	const char *p, *end, *nl;
	int done = 0;

	box_cassette_init(c, 0);
	if (box_buf_read_file(&b, AT_FDCWD, path, err) < 0) {
		if (err->code == BOX_E_LIMIT)
			box_err_limit(err, BOX_E_LIMIT, "cassette_bytes", BOX_CASSETTE_MAX_BYTES,
				      "bytes", "cassette %.200s is larger than %lld bytes", path,
				      (long long)BOX_CASSETTE_MAX_BYTES);
		box_buf_release(&b);
		return -1;
	}
	p = b.data ? b.data : "";
	end = p + b.len;
	while (p < end) {
		cJSON *o;

		line++;
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl) {
			bad_line(line, "no end of line (a truncated file)", err);
			goto fail;
		}
		if (done) {
			bad_line(line, "a line after the end line", err);
			goto fail;
		}
		o = box_json_parse(p, (size_t)(nl - p), err);
		p = nl + 1;
		if (!cJSON_IsObject(o)) {
			cJSON_Delete(o);
			bad_line(line, "not a JSON object", err);
			goto fail;
		}
		if (line == 1) {
			int64_t seed = -1;

			c->head = o;
			box_json_int64(cJSON_GetObjectItemCaseSensitive(o, "seed"), &seed);
			if (box_json_get_int(o, "cassette", 0) != 1 ||
			    !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "request")) ||
			    seed < 0 || seed >= (1LL << 53) ||
			    !tools_ok(cJSON_GetObjectItemCaseSensitive(o, "tools"))) {
				bad_line(line, "not a cassette head (cassette 1, request, seed, tools)",
					 err);
				goto fail;
			}
			continue;
		}
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "end"))) {
			int64_t n = box_json_get_int(o, "calls", -1);

			cJSON_Delete(o);
			if (n < 0 || (size_t)n != c->ncalls) {
				bad_line(line, "the end line's count differs from the calls", err);
				goto fail;
			}
			done = 1;
			continue;
		}
		if (!call_ok(o)) {
			cJSON_Delete(o);
			bad_line(line, "not a call (call, args, reply and answer or abort)", err);
			goto fail;
		}
		if (c->ncalls >= BOX_CASSETTE_MAX_CALLS) {
			cJSON_Delete(o);
			box_err_limit(err, BOX_E_LIMIT, "cassette_calls", BOX_CASSETTE_MAX_CALLS,
				      "calls", "cassette %.200s has more than %d calls", path,
				      BOX_CASSETTE_MAX_CALLS);
			goto fail;
		}
		if (c->ncalls == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			cJSON **n = realloc(c->calls, ncap * sizeof(*n));

			if (!n) {
				cJSON_Delete(o);
				box_err_set(err, BOX_E_INTERNAL, "out of memory");
				goto fail;
			}
			c->calls = n;
			cap = ncap;
		}
		c->calls[c->ncalls++] = o;
	}
	if (!done) {
		box_err_set(err, BOX_E_INVALID, "cassette %.200s has no end line (a truncated file)",
			    path);
		goto fail;
	}
	box_buf_release(&b);
	return 0;
fail:
	box_buf_release(&b);
	box_cassette_release(c);
	box_cassette_init(c, 0);
	return -1;
}

/* A field as text for a message: the bytes when they are short printable UTF-8. */
static cJSON *field_text(const struct box_ipc_field *f)
{
	char s[128];
	size_t i;

	if (f->n > 100 || !box_utf8_valid(f->p, f->n))
		goto bytes;
	for (i = 0; i < f->n; i++)
		if (((const unsigned char *)f->p)[i] < 0x20)
			goto bytes;
	return box_json_string_n(f->p, f->n);
bytes:
	snprintf(s, sizeof(s), "<%zu bytes>", f->n);
	return cJSON_CreateString(s);
}

cJSON *box_cassette_describe(uint8_t op, const struct box_ipc_field *in, int nin)
{
	cJSON *o = cJSON_CreateObject();
	const char *key = op == BOX_OP_HTTP ? "request" : op == BOX_OP_TOOL ? "tool" :
			  op == BOX_OP_CLOCK ? "kind" : op == BOX_OP_REQUIRE ? "name" : "path";

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "call", box_cassette_op_name(op));
	if (nin > 0)
		cJSON_AddItemToObject(o, key, field_text(&in[0]));
	if (nin > 1 && op != BOX_OP_CLOCK)
		cJSON_AddItemToObject(o, op == BOX_OP_TOOL ? "input" : "data", field_text(&in[1]));
	return o;
}

/* The call line's args, decoded into c->field (reused for the answer afterwards). */
static int decode(struct box_cassette *c, const cJSON *a, struct box_ipc_field *f,
		  struct box_err *err)
{
	const cJSON *it;
	int n = 0;

	cJSON_ArrayForEach(it, a) {
		box_buf_truncate(&c->field[n], 0);
		if (box_base64_decode(it->valuestring, strlen(it->valuestring), &c->field[n],
				      err) < 0)
			return -1;
		f[n].p = c->field[n].data ? c->field[n].data : "";
		f[n].n = c->field[n].len;
		n++;
	}
	return n;
}

static int diverged(size_t k, uint8_t op, const struct box_ipc_field *in, int nin,
		    const char *was, const char *why, struct box_err *err)
{
	cJSON *d = box_cassette_describe(op, in, nin);
	char *s = d ? cJSON_PrintUnformatted(d) : NULL;

	box_err_set(err, BOX_E_REPLAY_DIVERGED, "call %zu: the script made %.200s, %s%.200s",
		    k + 1, s ? s : box_cassette_op_name(op), why, was ? was : "");
	cJSON_free(s);
	cJSON_Delete(d);
	return -1;
}

/* 1 when the recorded call o (its args decoded in rec[0..n)) is the script's call op/in */
static int same_call(const cJSON *o, const struct box_ipc_field *rec, int n, uint8_t op,
		     const struct box_ipc_field *in, int nin)
{
	int same = strcmp(box_json_get_str(o, "call", ""), box_cassette_op_name(op)) == 0, i;

	if (same && op == BOX_OP_CLOCK)
		return n >= 1 && nin >= 1 && rec[0].n == in[0].n && !memcmp(rec[0].p, in[0].p, in[0].n);
	if (!same || n != nin)
		return 0;
	for (i = 0; i < n; i++)
		if (rec[i].n != in[i].n || memcmp(rec[i].p, in[i].p, in[i].n))
			return 0;
	return 1;
}

int box_cassette_try(struct box_cassette *c, uint8_t op, const struct box_ipc_field *in, int nin,
		     uint8_t *rop, struct box_ipc_field *out, int maxout)
{
	struct box_ipc_field rec[BOX_IPC_MAX_FIELDS];
	struct box_err e;
	const cJSON *o, *answer;
	int n;

	if (c->next >= c->ncalls)
		return -1;
	o = c->calls[c->next];
	answer = cJSON_GetObjectItemCaseSensitive(o, "answer");
	if (cJSON_GetObjectItemCaseSensitive(o, "abort") || !cJSON_IsArray(answer) ||
	    cJSON_GetArraySize(answer) > maxout)
		return -1;
	box_err_init(&e);
	n = decode(c, cJSON_GetObjectItemCaseSensitive(o, "args"), rec, &e);
	if (n < 0 || !same_call(o, rec, n, op, in, nin))
		return -1;
	n = decode(c, answer, out, &e);
	if (n < 0)
		return -1;
	c->next++;
	*rop = strcmp(box_json_get_str(o, "reply", ""), "ok") == 0 ? BOX_OP_OK : BOX_OP_ERR;
	return n;
}

int box_cassette_next(struct box_cassette *c, uint8_t op, const struct box_ipc_field *in, int nin,
		      uint8_t *rop, struct box_ipc_field *out, int *aborted, struct box_err *err)
{
	struct box_ipc_field rec[BOX_IPC_MAX_FIELDS];
	const cJSON *o, *abort;
	cJSON *d;
	char *was;
	int n;

	*aborted = 0;
	if (c->next >= c->ncalls)
		return diverged(c->next, op, in, nin, NULL, "the recording has no more calls",
				err);
	o = c->calls[c->next];
	n = decode(c, cJSON_GetObjectItemCaseSensitive(o, "args"), rec, err);
	if (n < 0)
		return bad_line(c->next + 2, "an argument is not base64", err);
	if (!same_call(o, rec, n, op, in, nin)) {
		uint8_t rec_op = 0;

		for (size_t j = 0; j < sizeof(ops) / sizeof(ops[0]); j++)
			if (strcmp(ops[j].name, box_json_get_str(o, "call", "")) == 0)
				rec_op = ops[j].op;
		d = box_cassette_describe(rec_op, rec, n);
		was = d ? cJSON_PrintUnformatted(d) : NULL;
		cJSON_Delete(d);
		diverged(c->next, op, in, nin, was, "the recording has ", err);
		cJSON_free(was);
		return -1;
	}
	c->next++;
	abort = cJSON_GetObjectItemCaseSensitive(o, "abort");
	if (abort) {
		box_err_init(err);
		box_err_from_json(err, abort);
		*aborted = 1;
		return -1;
	}
	*rop = strcmp(box_json_get_str(o, "reply", ""), "ok") == 0 ? BOX_OP_OK : BOX_OP_ERR;
	n = decode(c, cJSON_GetObjectItemCaseSensitive(o, "answer"), out, err);
	if (n < 0)
		return bad_line(c->next + 1, "an answer is not base64", err);
	return n;
}
