/* box-mcp's second transport: Streamable HTTP on 127.0.0.1 only (libmicrohttpd), a bearer
 * token when the operator gives one, Host and Origin checked against DNS rebinding. */
#ifndef BOX_MCPHTTP_H
#define BOX_MCPHTTP_H

#include "err.h"
#include "mcptools.h"

#define BOX_MCP_HTTP_SESSIONS_MAX 64   /* legacy-era sessions (Mcp-Session-Id) at once */

struct box_mcp_http_opts {
	int port;               /* 1..65535 on 127.0.0.1; 0: any free port */
	const char *token;      /* required as "Authorization: Bearer TOKEN"; NULL: none */
	void (*on_listen)(void *ctx, int port);  /* called once listening; may be NULL */
	void *ctx;
};

/*
 * Serves MCP at http://127.0.0.1:PORT/mcp until SIGTERM, SIGINT or SIGHUP (blocked and read
 * through a signalfd), as 2025-11-25 basic/transports "Streamable HTTP" says for a server
 * that answers every request with one application/json body:
 *   - POST of one JSON-RPC message: a request is answered 200 with its response; a
 *     notification or a response 202 with no body; a body past max_message_bytes 413;
 *   - initialize opens a session (one box_mcp, so one sandbox session) named by the
 *     Mcp-Session-Id header of its answer, which every later request of it carries (400
 *     without it, 404 for an unknown one); DELETE with it ends the session; a request with
 *     2026-07-28 _meta needs no session (one shared connection serves them); when
 *     BOX_MCP_HTTP_SESSIONS_MAX sessions are open, a new one ends the one idle longest;
 *   - a tools/call with a progressToken, from a client whose Accept names
 *     text/event-stream, is answered with an event stream: its progress notifications,
 *     then its response; a client that leaves the stream early cancels the call;
 *   - GET is 405 (no stream of server messages); other paths 404;
 *   - Host must be 127.0.0.1, localhost or [::1] (with the port), and Origin, when sent,
 *     http://one of them: else 403, before anything is read;
 *   - with a token, a request without "Authorization: Bearer TOKEN" is 401.
 * Returns 0 when a signal ended it, -1 with err when it could not listen (io_error).
 */
int box_mcp_serve_http(struct box_mcp_config *cfg, const struct box_mcp_http_opts *o,
		       struct box_err *err);

#endif
