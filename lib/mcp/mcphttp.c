#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "mcphttp.h"
#include "buf.h"
#include "json.h"
#include "mcp.h"
#include "banned.h"

#define MCP_PATH "/mcp"
#define SESSION_HEADER "Mcp-Session-Id"

struct server;
struct session;

struct waiter {
	cJSON *id;              /* the request's id; NULL for a message that is no request */
	struct box_buf out;     /* the answer; with sse, every event of the stream */
	int done;
	struct waiter *next;
	/* an answer streamed as text/event-stream (a call with a progressToken): */
	int sse;
	cJSON *token;           /* the progressToken (owned) */
	size_t sent;            /* bytes of out sent */
	struct server *sv;
	struct session *s;
	unsigned gen;           /* s->gen when the stream began */
};

struct session {
	int used;
	char name[BOX_MCP_SESSION_MAX + 1];  /* Mcp-Session-Id; "" for the stateless one */
	struct box_mcp m;
	struct waiter *waiters;              /* requests waiting for their answer */
	struct waiter *current;              /* the message being handled */
	struct timespec used_at;             /* the last request */
	unsigned gen;                        /* counts the sessions this slot held */
};

struct server {
	struct box_mcp_config *cfg;
	const struct box_mcp_http_opts *o;
	int port;
	pthread_mutex_t lock;                /* every session, every waiter */
	volatile int stopping;
	struct session sessions[BOX_MCP_HTTP_SESSIONS_MAX + 1]; /* [0]: the stateless one */
};

struct request {
	struct box_buf body;
	int too_big;
};

/* ---------------------------------------------------------------- routing answers */

/* One server-sent event carrying the message (its text ends with a newline). An event that
 * does not fit the stream's cap is dropped. */
static void sse_event(struct waiter *w, const char *msg, size_t n)
{
	struct box_err err;
	size_t len = w->out.len;

	box_err_init(&err);
	if (box_buf_puts(&w->out, "event: message\ndata: ", &err) < 0 ||
	    box_buf_append(&w->out, msg, n, &err) < 0 || box_buf_puts(&w->out, "\n", &err) < 0)
		box_buf_truncate(&w->out, len);
}

/* Called with the lock held, from box_mcp_message or box_mcp_ready. Notifications are
 * dropped: every answer over HTTP is one JSON body. */
static int route(void *ctx, const char *msg, size_t n)
{
	struct session *s = ctx;
	struct box_err err;
	cJSON *v;
	const cJSON *id;
	struct waiter *w = NULL;

	box_err_init(&err);
	v = box_json_parse(msg, n, &err);
	if (!v)
		return 0;
	if (!cJSON_GetObjectItemCaseSensitive(v, "method")) {
		id = cJSON_GetObjectItemCaseSensitive(v, "id");
		for (w = s->waiters; w && id && !cJSON_IsNull(id); w = w->next)
			if (w->id && cJSON_Compare(w->id, id, 1))
				break;
		if (!w)
			w = s->current;
		if (w && !w->done) {
			if (w->sse)
				sse_event(w, msg, n);
			else if (box_buf_append(&w->out, msg, n, &err) < 0)
				box_buf_truncate(&w->out, 0);
			w->done = 1;
		}
	} else {
		/* a progress notification goes on the stream of its request, if it has one */
		const cJSON *token = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(v, "params"), "progressToken");

		for (w = s->waiters; w && token; w = w->next)
			if (w->sse && !w->done && w->token && cJSON_Compare(w->token, token, 1)) {
				sse_event(w, msg, n);
				break;
			}
	}
	cJSON_Delete(v);
	return 0;
}

/* ---------------------------------------------------------------- checks */

static int host_ok(const char *h, int port)
{
	static const char *const names[] = { "127.0.0.1", "localhost", "[::1]", NULL };
	const char *const *n;
	char with_port[64];

	if (!h)
		return 0;
	for (n = names; *n; n++) {
		box_fmt(with_port, sizeof(with_port), "%s:%d", *n, port);
		if (strcmp(h, *n) == 0 || strcmp(h, with_port) == 0)
			return 1;
	}
	return 0;
}

static int token_ok(const char *auth, const char *token)
{
	size_t i, n, t = strlen(token);
	unsigned char diff = 0;

	if (!auth || strncmp(auth, "Bearer ", 7) != 0)
		return 0;
	auth += 7;
	n = strlen(auth);
	/* the same time whatever the first differing byte */
	for (i = 0; i < t; i++)
		diff |= (unsigned char)(token[i] ^ (i < n ? auth[i] : 0));
	return diff == 0 && n == t;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *body,
			     size_t n, const char *session)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)body,
								 MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	if (n)
		MHD_add_response_header(r, "Content-Type", "application/json");
	if (session)
		MHD_add_response_header(r, SESSION_HEADER, session);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, "Allow", "POST, DELETE");
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result fail(struct MHD_Connection *c, unsigned status, int code,
			    const char *message)
{
	char body[512];
	int n = box_fmt(body, sizeof(body),
			"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":%d,\"message\":\"%s\"}}",
			code, message);

	return reply(c, status, body, n > 0 ? (size_t)n : 0, NULL);
}

/* ---------------------------------------------------------------- sessions */

static struct session *find(struct server *sv, const char *name)
{
	int i;

	for (i = 1; i <= BOX_MCP_HTTP_SESSIONS_MAX; i++)
		if (sv->sessions[i].used && strcmp(sv->sessions[i].name, name) == 0)
			return &sv->sessions[i];
	return NULL;
}

static void close_session(struct session *s);

static int earlier(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* The session unused for the longest time with nothing in flight, or NULL. */
static struct session *idlest(struct server *sv)
{
	struct session *best = NULL;
	int i;

	for (i = 1; i <= BOX_MCP_HTTP_SESSIONS_MAX; i++) {
		struct session *s = &sv->sessions[i];

		if (s->used && !s->waiters && !box_mcp_busy(&s->m) &&
		    (!best || earlier(&s->used_at, &best->used_at)))
			best = s;
	}
	return best;
}

static struct session *open_session(struct server *sv, int stateless)
{
	struct session *s = NULL;
	struct box_err err;
	int i;

	if (stateless) {
		s = &sv->sessions[0];
		if (s->used)
			return s;
	} else {
		for (i = 1; i <= BOX_MCP_HTTP_SESSIONS_MAX && !s; i++)
			if (!sv->sessions[i].used)
				s = &sv->sessions[i];
		if (!s)
			s = idlest(sv);
		if (!s)
			return NULL;
		/* a full table ends the session that waited longest for its client */
		close_session(s);
	}
	box_err_init(&err);
	i = (int)s->gen;
	memset(s, 0, sizeof(*s));
	s->gen = (unsigned)i + 1;
	if (box_mcp_init(&s->m, sv->cfg, route, s, &err) < 0)
		return NULL;
	if (!stateless && box_mcp_session_new("", s->name, sizeof(s->name), &err) < 0) {
		box_mcp_release(&s->m);
		return NULL;
	}
	s->used = 1;
	return s;
}

static void close_session(struct session *s)
{
	if (!s->used)
		return;
	box_mcp_release(&s->m);
	s->used = 0;
}

/* ---------------------------------------------------------------- event streams */

static void unlink_waiter(struct session *s, struct waiter *w)
{
	struct waiter **p;

	for (p = &s->waiters; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			break;
		}
}

#define KEEPALIVE_MS 1000   /* an SSE comment this often: a client that left is found out */

/* MHD's reader of an event stream: the events queued for w, as they come. It pumps the
 * session's calls meanwhile (the connection has a thread of its own). */
static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct waiter *w = cls;
	struct server *sv = w->sv;
	ssize_t r;
	int waited = 0;

	(void)pos;
	pthread_mutex_lock(&sv->lock);
	for (;;) {
		struct pollfd p[BOX_MCP_CONCURRENT_MAX];
		size_t k;

		if (w->sent < w->out.len) {
			size_t n = w->out.len - w->sent < max ? w->out.len - w->sent : max;

			memcpy(buf, w->out.data + w->sent, n);
			w->sent += n;
			r = (ssize_t)n;
			break;
		}
		if (w->done) {
			r = MHD_CONTENT_READER_END_OF_STREAM;
			break;
		}
		if (sv->stopping || !w->s->used || w->s->gen != w->gen ||
		    !(k = box_mcp_pollfds(&w->s->m, p, BOX_MCP_CONCURRENT_MAX))) {
			r = MHD_CONTENT_READER_END_WITH_ERROR;
			break;
		}
		if (waited >= KEEPALIVE_MS && max >= 3) {
			memcpy(buf, ":\n\n", 3);
			r = 3;
			break;
		}
		pthread_mutex_unlock(&sv->lock);
		poll(p, k, 100);
		waited += 100;
		pthread_mutex_lock(&sv->lock);
		if (w->s->used && w->s->gen == w->gen)
			box_mcp_ready(&w->s->m, p, k);
	}
	pthread_mutex_unlock(&sv->lock);
	return r;
}

/* The stream is over: sent whole, or the client went away, which cancels the call
 * (2026-07-28 basic/patterns/cancellation: a disconnect is the cancellation). */
static void sse_free(void *cls)
{
	struct waiter *w = cls;
	struct server *sv = w->sv;

	pthread_mutex_lock(&sv->lock);
	if (w->s->gen == w->gen) {
		if (!w->done && w->s->used)
			box_mcp_cancel(&w->s->m, w->id);
		unlink_waiter(w->s, w);
	}
	pthread_mutex_unlock(&sv->lock);
	cJSON_Delete(w->id);
	cJSON_Delete(w->token);
	box_buf_release(&w->out);
	free(w);
}

/* Starts the call of msg (a tools/call with a progressToken) and answers with an event
 * stream of its progress notifications and its response. With the lock held. */
static enum MHD_Result stream(struct server *sv, struct session *s, struct MHD_Connection *c,
			      const char *body, size_t n, const cJSON *id, const cJSON *token)
{
	struct waiter *w = calloc(1, sizeof(*w));
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (!w)
		return MHD_NO;
	w->sse = 1;
	w->id = cJSON_Duplicate(id, 1);
	w->token = cJSON_Duplicate(token, 1);
	w->sv = sv;
	w->s = s;
	w->gen = s->gen;
	box_buf_init(&w->out, sv->cfg->max_message_bytes + sv->cfg->max_output_bytes * 2);
	s->current = w;
	w->next = s->waiters;
	s->waiters = w;
	box_mcp_message(&s->m, body, n);
	s->current = NULL;
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, w, sse_free);
	if (!r) {
		unlink_waiter(s, w);
		box_mcp_cancel(&s->m, w->id);
		cJSON_Delete(w->id);
		cJSON_Delete(w->token);
		box_buf_release(&w->out);
		free(w);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	MHD_add_response_header(r, "Cache-Control", "no-cache");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* ---------------------------------------------------------------- POST */

/* Handles one message for session s, with the lock held; waits (unlocking while it polls)
 * for the answer of a request. Returns 1 and the answer in w->out, or 0 for a message that
 * is no request (nothing to answer). */
static int exchange(struct server *sv, struct session *s, const char *body, size_t n,
		    struct waiter *w, int is_request)
{
	s->current = w;
	w->next = s->waiters;
	s->waiters = w;
	box_mcp_message(&s->m, body, n);
	s->current = NULL;
	while (is_request && !w->done && !sv->stopping && s->used) {
		struct pollfd p[BOX_MCP_CONCURRENT_MAX];
		size_t k = box_mcp_pollfds(&s->m, p, BOX_MCP_CONCURRENT_MAX);

		if (k == 0)
			break;
		pthread_mutex_unlock(&sv->lock);
		poll(p, k, 100);
		pthread_mutex_lock(&sv->lock);
		if (s->used)
			box_mcp_ready(&s->m, p, k);
	}
	unlink_waiter(s, w);
	return w->done;
}

static enum MHD_Result post(struct server *sv, struct MHD_Connection *c, struct request *rq)
{
	const char *name = MHD_lookup_connection_value(c, MHD_HEADER_KIND, SESSION_HEADER);
	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
	const cJSON *token;
	struct box_err err;
	struct waiter w;
	struct session *s;
	cJSON *msg;
	const cJSON *method, *params, *meta;
	int is_request, initialize, modern, answered;
	enum MHD_Result ret;

	if (rq->too_big)
		return fail(c, MHD_HTTP_CONTENT_TOO_LARGE, BOX_RPC_INVALID_REQUEST,
			    "message past max_message_bytes");
	box_err_init(&err);
	msg = box_json_parse(rq->body.data ? rq->body.data : "", rq->body.len, &err);
	method = cJSON_GetObjectItemCaseSensitive(msg, "method");
	params = cJSON_GetObjectItemCaseSensitive(msg, "params");
	meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	token = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
	is_request = !msg || !cJSON_IsObject(msg) || (cJSON_GetObjectItemCaseSensitive(msg, "id") &&
						     method);
	initialize = cJSON_IsString(method) && strcmp(method->valuestring, "initialize") == 0;
	modern = cJSON_GetObjectItemCaseSensitive(meta, "io.modelcontextprotocol/protocolVersion") != NULL;
	memset(&w, 0, sizeof(w));
	w.id = msg && is_request ? cJSON_GetObjectItemCaseSensitive(msg, "id") : NULL;
	box_buf_init(&w.out, sv->cfg->max_message_bytes + sv->cfg->max_output_bytes * 2);
	pthread_mutex_lock(&sv->lock);
	if (name) {
		s = find(sv, name);
		if (!s) {
			pthread_mutex_unlock(&sv->lock);
			cJSON_Delete(msg);
			return fail(c, MHD_HTTP_NOT_FOUND, BOX_RPC_INVALID_REQUEST, "no such session");
		}
	} else if (initialize && !modern) {
		s = open_session(sv, 0);
		if (!s) {
			pthread_mutex_unlock(&sv->lock);
			cJSON_Delete(msg);
			return fail(c, MHD_HTTP_SERVICE_UNAVAILABLE, BOX_RPC_INTERNAL,
				    "too many sessions");
		}
	} else if (modern || !msg || !cJSON_IsObject(msg) || !is_request ||
		   (cJSON_IsString(method) && strcmp(method->valuestring, "ping") == 0)) {
		s = open_session(sv, 1);
	} else {
		pthread_mutex_unlock(&sv->lock);
		cJSON_Delete(msg);
		return fail(c, MHD_HTTP_BAD_REQUEST, BOX_RPC_INVALID_REQUEST,
			    "send initialize first (no " SESSION_HEADER "), or give _meta "
			    "io.modelcontextprotocol/protocolVersion (2026-07-28)");
	}
	if (!s) {
		pthread_mutex_unlock(&sv->lock);
		cJSON_Delete(msg);
		return fail(c, MHD_HTTP_INTERNAL_SERVER_ERROR, BOX_RPC_INTERNAL, "out of memory");
	}
	clock_gettime(CLOCK_MONOTONIC, &s->used_at);
	if (is_request && msg && cJSON_IsString(method) &&
	    strcmp(method->valuestring, "tools/call") == 0 &&
	    (cJSON_IsString(token) || cJSON_IsNumber(token)) && accept &&
	    strstr(accept, "text/event-stream")) {
		ret = stream(sv, s, c, rq->body.data, rq->body.len,
			     cJSON_GetObjectItemCaseSensitive(msg, "id"), token);
		pthread_mutex_unlock(&sv->lock);
		box_buf_release(&w.out);
		cJSON_Delete(msg);
		return ret;
	}
	answered = exchange(sv, s, rq->body.data ? rq->body.data : "", rq->body.len, &w, is_request);
	if (initialize && !name && s != &sv->sessions[0] && !s->m.initialized) {
		/* a refused initialize opens nothing */
		close_session(s);
		s = NULL;
	}
	if (!answered)
		ret = is_request ? fail(c, MHD_HTTP_SERVICE_UNAVAILABLE, BOX_RPC_INTERNAL,
					"the server is stopping")
				 : reply(c, MHD_HTTP_ACCEPTED, "", 0, NULL);
	else
		ret = reply(c, MHD_HTTP_OK, w.out.data, w.out.len,
			    initialize && !name && s ? s->name : NULL);
	pthread_mutex_unlock(&sv->lock);
	box_buf_release(&w.out);
	cJSON_Delete(msg);
	return ret;
}

/* ---------------------------------------------------------------- the handler */

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *data,
			      size_t *size, void **con_cls)
{
	struct server *sv = cls;
	struct request *rq = *con_cls;
	const char *origin, *name;

	(void)version;
	if (!rq) {
		const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");

		origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
		/* DNS rebinding: a page of another site reaches 127.0.0.1 under its own name */
		if (!host_ok(host, sv->port) ||
		    (origin && (strncmp(origin, "http://", 7) != 0 || !host_ok(origin + 7, sv->port))))
			return fail(c, MHD_HTTP_FORBIDDEN, BOX_RPC_INVALID_REQUEST,
				    "Host or Origin is not this loopback server");
		if (sv->o->token &&
		    !token_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
			      sv->o->token))
			return fail(c, MHD_HTTP_UNAUTHORIZED, BOX_RPC_INVALID_REQUEST,
				    "a bearer token is needed");
		if (strcmp(url, MCP_PATH) != 0)
			return fail(c, MHD_HTTP_NOT_FOUND, BOX_RPC_INVALID_REQUEST, "no such path");
		if (strcmp(method, "DELETE") == 0) {
			struct session *s;

			name = MHD_lookup_connection_value(c, MHD_HEADER_KIND, SESSION_HEADER);
			pthread_mutex_lock(&sv->lock);
			s = name ? find(sv, name) : NULL;
			if (s)
				close_session(s);
			pthread_mutex_unlock(&sv->lock);
			return s ? reply(c, MHD_HTTP_OK, "", 0, NULL)
				 : fail(c, MHD_HTTP_NOT_FOUND, BOX_RPC_INVALID_REQUEST,
					"no such session");
		}
		if (strcmp(method, "POST") != 0)
			return fail(c, MHD_HTTP_METHOD_NOT_ALLOWED, BOX_RPC_INVALID_REQUEST,
				    "POST a JSON-RPC message; this server sends no stream");
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		box_buf_init(&rq->body, sv->cfg->max_message_bytes);
		*con_cls = rq;
		return MHD_YES;
	}
	if (*size) {
		struct box_err aerr;

		if (!rq->too_big && box_buf_append(&rq->body, data, *size, &aerr) < 0)
			rq->too_big = 1;
		*size = 0;
		return MHD_YES;
	}
	return post(sv, c, rq);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode why)
{
	struct request *rq = *con_cls;

	(void)cls;
	(void)c;
	(void)why;
	if (rq) {
		box_buf_release(&rq->body);
		free(rq);
		*con_cls = NULL;
	}
}

int box_mcp_serve_http(struct box_mcp_config *cfg, const struct box_mcp_http_opts *o,
		       struct box_err *err)
{
	static struct server sv;   /* large; one server per process */
	struct sockaddr_in a;
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	sigset_t sigs, old;
	int sfd, i;

	memset(&sv, 0, sizeof(sv));
	sv.cfg = cfg;
	sv.o = o;
	pthread_mutex_init(&sv.lock, NULL);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)o->port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	/* blocked before the daemon's threads start, so that they inherit the mask */
	pthread_sigmask(SIG_BLOCK, &sigs, &old);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
			     NULL, NULL, handle, &sv,
			     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a,
			     MHD_OPTION_NOTIFY_COMPLETED, completed, &sv,
			     MHD_OPTION_CONNECTION_LIMIT, (unsigned)(2 * BOX_MCP_HTTP_SESSIONS_MAX),
			     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
			     MHD_OPTION_END);
	if (!d) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return box_err_set(err, BOX_E_IO, "cannot listen on 127.0.0.1:%d", o->port);
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	sv.port = info ? info->port : o->port;
	if (o->on_listen)
		o->on_listen(o->ctx, sv.port);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (sfd >= 0) {
		struct signalfd_siginfo si;

		while (read(sfd, &si, sizeof(si)) < 0 && errno == EINTR)
			;
		close(sfd);
	}
	sv.stopping = 1;
	MHD_stop_daemon(d);
	for (i = 0; i <= BOX_MCP_HTTP_SESSIONS_MAX; i++)
		close_session(&sv.sessions[i]);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_destroy(&sv.lock);
	return 0;
}
