#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "toolsrv.h"
#include "libexec.h"
#include "buf.h"
#include "ipc.h"
#include "json.h"
#include "banned.h"

int box_toolsrv_listen(const char *path, struct box_err *err)
{
	return box_ipc_listen(path, err);
}

/* Reads one line (the request or the reply) before the deadline, at most max bytes. */
static int read_line(int fd, struct box_buf *b, int64_t deadline, struct box_err *err)
{
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - box_now_ms();
		char *nl;
		char *dst;
		ssize_t n;

		if (b->len && (nl = memchr(b->data, '\n', b->len))) {
			box_buf_truncate(b, (size_t)(nl - b->data));
			return 0;
		}
		if (left <= 0)
			return box_err_limit(err, BOX_E_TIMEOUT, "io_ms", BOX_TOOLSRV_IO_MS, "ms",
					     "the other side of the tool socket stalled");
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		dst = box_buf_reserve(b, 65536, err);
		if (!dst)
			return -1;
		n = read(fd, dst, 65536);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return box_err_sys(err, "tool socket");
		if (n == 0)
			return b->len ? 0 : box_err_set(err, BOX_E_IO, "the tool socket closed");
		b->len += (size_t)n;
		if (b->len > b->max)
			return box_err_limit(err, BOX_E_LIMIT, "request_bytes", (int64_t)b->max,
					     "bytes", "a tool socket message is over %zu bytes", b->max);
	}
}

/* obj is printed with its integer literals exact (box_json_exact changes it in place) */
static int write_line(int fd, cJSON *obj, int64_t deadline)
{
	size_t len, off = 0;
	char *text;

	box_json_exact(obj);
	text = box_json_line(obj, &len);

	if (!text)
		return -1;
	while (off < len) {
		struct pollfd p = { fd, POLLOUT, 0 };
		ssize_t n;

		if (box_now_ms() > deadline || poll(&p, 1, (int)(deadline - box_now_ms())) <= 0)
			break;
		n = send(fd, text + off, len - off, MSG_NOSIGNAL);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	free(text);
	return off == len ? 0 : -1;
}

static cJSON *answer(const cJSON *req, const struct box_toolset *set,
		     const struct box_tool_call_opts *o, struct box_err *err)
{
	const char *op = box_json_get_str(req, "op", "");
	const struct box_tool *t;
	const char *name;
	cJSON *out, *res;

	if (strcmp(op, "list") == 0) {
		out = cJSON_CreateObject();
		cJSON_AddTrueToObject(out, "ok");
		cJSON_AddItemToObject(out, "tools", box_tools_describe(set, 0));
		return out;
	}
	if (strcmp(op, "call") != 0)
		return box_err_set(err, BOX_E_INVALID, "unknown tool socket op"), NULL;
	name = box_json_get_str(req, "tool", NULL);
	t = name ? box_tools_find(set, name) : NULL;
	if (!t)
		return box_err_set(err, BOX_E_POLICY, "tool %.64s is not granted to this sandbox",
				   name ? name : "(none)"), NULL;
	if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(req, "input")))
		return box_err_set(err, BOX_E_INVALID, "the input must be an object"),
		       box_err_path(err, "$"), NULL;
	if (t->lua_entry && !o->box_run)
		return box_err_set(err, BOX_E_UNSUPPORTED, "tool %s is a Lua tool and the host "
				   "found no box-run to run it (neither in PATH nor in %s)",
				   t->name, box_libexec_bindir()), NULL;
	res = box_tool_call(t, cJSON_GetObjectItemCaseSensitive(req, "input"), o, err);
	if (!res)
		return NULL;
	out = cJSON_CreateObject();
	cJSON_AddTrueToObject(out, "ok");
	cJSON_AddItemToObject(out, "result", res);
	return out;
}

/* Answers the connection fd: with fail's error when fail is not NULL, else from set. */
static void serve(int fd, const struct box_toolset *set, const struct box_tool_call_opts *o,
		  const struct box_err *fail)
{
	static const struct box_tool_call_opts none;
	int64_t deadline = box_now_ms() + BOX_TOOLSRV_IO_MS;
	struct box_buf b;
	struct box_err err;
	cJSON *req = NULL, *out = NULL;

	if (fd < 0)
		return;
	box_err_init(&err);
	box_buf_init(&b, BOX_TOOLSRV_REQUEST_MAX);
	if (read_line(fd, &b, deadline, &err) == 0) {
		req = box_json_parse(b.data ? b.data : "", b.len, &err);
		if (req && !cJSON_IsObject(req)) {
			box_err_set(&err, BOX_E_INVALID, "a tool request is a JSON object");
			cJSON_Delete(req);
			req = NULL;
		}
	}
	box_buf_release(&b);
	if (req && fail)
		err = *fail;
	else if (req)
		out = answer(req, set, o ? o : &none, &err);
	if (!out)
		out = box_err_result(&err);
	if (out)
		(void)write_line(fd, out, box_now_ms() + BOX_TOOLSRV_IO_MS);
	cJSON_Delete(out);
	cJSON_Delete(req);
	close(fd);
}

void box_toolsrv_serve_one(int lfd, const struct box_toolset *set,
			   const struct box_tool_call_opts *o)
{
	serve(accept4(lfd, NULL, NULL, SOCK_CLOEXEC), set, o, NULL);
}

void box_toolsrv_serve_error(int lfd, const struct box_err *e)
{
	serve(accept4(lfd, NULL, NULL, SOCK_CLOEXEC), NULL, NULL, e);
}

void box_toolsrv_serve_conn(int fd, const struct box_toolset *set,
			    const struct box_tool_call_opts *o, const struct box_err *fail)
{
	serve(fd, set, o, fail);
}

cJSON *box_toolsrv_request(const char *path, cJSON *req, int timeout_ms,
			   struct box_err *err)
{
	struct box_buf b;
	cJSON *res;
	int fd;
	int64_t deadline = box_now_ms() + (timeout_ms > 0 ? timeout_ms : 3600000);

	fd = box_ipc_connect(path, err);
	if (fd < 0)
		return NULL;
	if (write_line(fd, req, box_now_ms() + BOX_TOOLSRV_IO_MS) < 0) {
		close(fd);
		return box_err_set(err, BOX_E_IO, "cannot send to the tool socket"), NULL;
	}
	box_buf_init(&b, BOX_TOOLSRV_REPLY_MAX);
	if (read_line(fd, &b, deadline, err) < 0) {
		box_buf_release(&b);
		close(fd);
		return NULL;
	}
	close(fd);
	res = box_json_parse(b.data ? b.data : "", b.len, err);
	box_buf_release(&b);
	if (res && !cJSON_IsObject(res)) {
		cJSON_Delete(res);
		return box_err_set(err, BOX_E_INVALID, "garbled reply on the tool socket"), NULL;
	}
	return res;
}
