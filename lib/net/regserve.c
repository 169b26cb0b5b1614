#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "regserve.h"
#include "base64.h"
#include "buf.h"
#include "ipc.h"
#include "json.h"
#include "registry.h"
#include "banned.h"

struct serve {
	int sock;
	int last_pct;
	struct box_registry reg;
	int have;
};

static int send_json(int sock, uint8_t op, cJSON *o, struct box_err *err)
{
	char *text = o ? cJSON_PrintUnformatted(o) : NULL;
	struct box_ipc_field f;
	int r;

	cJSON_Delete(o);
	if (!text)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	f.p = text;
	f.n = strlen(text);
	r = box_ipc_send(sock, op, &f, 1, -1, err);
	free(text);
	return r;
}

static void progress(void *ctx, int64_t done, int64_t total)
{
	struct serve *s = ctx;
	int pct = total > 0 ? (int)(done * 100 / total) : 100;
	struct box_err e;
	cJSON *o;

	if (pct == s->last_pct)
		return;
	s->last_pct = pct;
	o = cJSON_CreateObject();
	box_json_add_int64(o, "done", done);
	box_json_add_int64(o, "total", total);
	send_json(s->sock, BOX_REGSERVE_PROGRESS, o, &e);
}

/* One request: the answer object, with "ok" false and the error when it failed. */
static cJSON *handle(struct serve *s, const cJSON *req, struct box_err *e)
{
	const char *op = box_json_get_str(req, "op", "");
	const char *name = box_json_get_str(req, "name", "");
	struct box_buf body = BOX_BUF_INIT(BOX_REGISTRY_MAX_MANIFEST);
	struct box_buf b64 = BOX_BUF_INIT(BOX_REGSERVE_MAX_FRAME);
	char digest[BOX_REGISTRY_DIGEST_MAX], mt[BOX_REGISTRY_MEDIA_TYPE_MAX];
	cJSON *ans = cJSON_CreateObject(), *tags = NULL;
	int fd = -1, r = -1;

	if (!ans)
		return NULL;
	if (strcmp(op, "init") == 0) {
		if (s->have)
			box_registry_release(&s->reg);
		s->have = box_registry_init(&s->reg, box_json_get_str(req, "ref", ""),
					    box_json_get_bool(req, "insecure", 0), e) == 0;
		r = s->have ? 0 : -1;
	} else if (!s->have) {
		box_err_set(e, BOX_E_INTERNAL, "registry helper: %.40s before init", op);
	} else if (strcmp(op, "manifest") == 0) {
		r = box_registry_get_manifest(&s->reg, name, box_json_get_str(req, "ref", ""), &body,
					      digest, mt, e);
		if (r == 0)
			r = box_base64_encode(body.data ? body.data : "", body.len, &b64, e);
		if (r == 0) {
			cJSON_AddStringToObject(ans, "digest", digest);
			cJSON_AddStringToObject(ans, "media_type", mt);
			cJSON_AddItemToObject(ans, "body", box_json_string_n(b64.data ? b64.data : "",
									     b64.len));
		}
	} else if (strcmp(op, "tags") == 0) {
		r = box_registry_tags(&s->reg, name, &tags, e);
		if (r == 0)
			cJSON_AddItemToObject(ans, "tags", tags);
	} else if (strcmp(op, "blob") == 0 || strcmp(op, "put_blob") == 0) {
		if (send_json(s->sock, BOX_REGSERVE_READY, cJSON_CreateObject(), e) == 0 &&
		    box_ipc_recv_fds(s->sock, &fd, 1, box_now_ms() + 60000, e) == 0) {
			int64_t size = box_json_get_int(req, "size", -1);
			const char *dg = box_json_get_str(req, "digest", "");

			s->last_pct = -1;
			s->reg.progress = progress;
			s->reg.progress_ctx = s;
			r = op[0] == 'b' ? box_registry_get_blob(&s->reg, name, dg, fd, size, e) :
			    box_registry_put_blob(&s->reg, name, fd, dg, size, e);
			s->reg.progress = NULL;
			close(fd);
		}
	} else if (strcmp(op, "put_manifest") == 0) {
		const char *t = box_json_get_str(req, "body", "");

		r = box_base64_decode(t, strlen(t), &body, e);
		if (r == 0)
			r = box_registry_put_manifest(&s->reg, name, box_json_get_str(req, "tag", ""),
						      body.data ? body.data : "", body.len,
						      box_json_get_str(req, "media_type", ""), e);
	} else {
		box_err_set(e, BOX_E_INTERNAL, "registry helper: unknown op %.40s", op);
	}
	box_buf_release(&body);
	box_buf_release(&b64);
	if (r < 0) {
		cJSON_Delete(ans);
		return box_err_result(e);
	}
	cJSON_AddTrueToObject(ans, "ok");
	return ans;
}

int box_regserve(int sock, struct box_err *err)
{
	struct box_ipc_in *in = calloc(1, sizeof(*in));
	struct box_buf frame = BOX_BUF_INIT(BOX_REGSERVE_MAX_FRAME);
	struct serve s = { .sock = sock };
	int rc = -1;

	if (!in)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	for (;;) {
		struct box_ipc_field f[1];
		struct box_err e;
		cJSON *req, *ans;
		uint8_t op;
		int k;

		box_buf_truncate(&frame, 0);
		k = box_ipc_recv(sock, in, &op, &frame, -1, err);
		if (k <= 0) {
			rc = k;
			break;
		}
		box_err_init(&e);
		req = box_ipc_split(frame.data, frame.len, f, 1) == 1 ?
		      box_json_parse(f[0].p, f[0].n, &e) : NULL;
		if (!req && !e.message[0])
			box_err_set(&e, BOX_E_INTERNAL, "registry helper: malformed frame");
		ans = req ? handle(&s, req, &e) : box_err_result(&e);
		cJSON_Delete(req);
		if (send_json(sock, BOX_REGSERVE_ANSWER, ans, err) < 0)
			break;
	}
	if (s.have)
		box_registry_release(&s.reg);
	box_buf_release(&frame);
	free(in);
	return rc;
}
