/* The Model Context Protocol server of box-mcp: JSON-RPC 2.0 messages in, responses and
 * notifications out, tool calls run as child processes (lib/mcp/mcpchild) while more messages
 * arrive. Both eras of the protocol: the initialize handshake (2025-06-18, 2025-11-25) and
 * per-request _meta (2026-07-28), chosen from the first message that tells. */
#ifndef BOX_MCP_H
#define BOX_MCP_H

#include <poll.h>
#include <stddef.h>
#include <cjson/cJSON.h>
#include "err.h"
#include "mcpchild.h"
#include "mcptools.h"

#define BOX_MCP_MODERN "2026-07-28"
#define BOX_MCP_LEGACY "2025-11-25"

/* JSON-RPC 2.0 and MCP error codes */
#define BOX_RPC_PARSE_ERROR (-32700)
#define BOX_RPC_INVALID_REQUEST (-32600)
#define BOX_RPC_METHOD_NOT_FOUND (-32601)
#define BOX_RPC_INVALID_PARAMS (-32602)
#define BOX_RPC_INTERNAL (-32603)
#define BOX_RPC_UNSUPPORTED_VERSION (-32022)

enum box_mcp_era { BOX_MCP_ERA_UNKNOWN, BOX_MCP_ERA_LEGACY, BOX_MCP_ERA_MODERN };

struct box_mcp_call;

/* Where messages go: one JSON-RPC message, its text and a final newline. 0 or -1 (the peer
 * is gone). */
typedef int box_mcp_send_fn(void *ctx, const char *msg, size_t n);

struct box_mcp {
	struct box_mcp_config *cfg;     /* borrowed */
	box_mcp_send_fn *send;
	void *ctx;
	enum box_mcp_era era;
	char version[16];               /* the legacy version agreed on */
	int initialized;                /* legacy: initialize answered */
	char session[BOX_MCP_SESSION_MAX + 1];
	int session_used;               /* a sandbox tool ran: the session may exist */
	struct box_mcp_env env;
	struct box_mcp_call *calls;     /* cfg->max_concurrent slots */
	int gone;                       /* send failed: the peer is gone */
};

/* Sets up *m for cfg (borrowed, outlives m) with a fresh session id. 0, or -1 with err. */
int box_mcp_init(struct box_mcp *m, struct box_mcp_config *cfg, box_mcp_send_fn *send,
		 void *ctx, struct box_err *err);

/*
 * Handles one message (text of n bytes, not NUL-terminated necessarily): answers it, or
 * starts a tool call whose answer comes later from box_mcp_ready. Malformed input is answered
 * with the JSON-RPC error it deserves; nothing here fails.
 */
void box_mcp_message(struct box_mcp *m, const char *text, size_t n);

/* The error answer for a message past the size cap (its text was dropped). */
void box_mcp_oversized(struct box_mcp *m);

/* Fills up to max pollfds with the calls' pipes; returns how many. */
size_t box_mcp_pollfds(const struct box_mcp *m, struct pollfd *p, size_t max);

/* Reads what the calls printed (after poll, p as filled by box_mcp_pollfds): progress
 * notifications, and each finished call's answer. */
void box_mcp_ready(struct box_mcp *m, const struct pollfd *p, size_t n);

/* Kills the call in flight whose request id is id (nothing it started is left) and drops
 * its answer, as notifications/cancelled does. 1 if there was one, else 0. */
int box_mcp_cancel(struct box_mcp *m, const cJSON *id);

/* Number of calls in flight. */
int box_mcp_busy(const struct box_mcp *m);

/*
 * The end of the connection: kills every call in flight (nothing they started is left), then,
 * unless the policy keeps it, deletes the session's sandbox if a sandbox tool ran. Frees m.
 */
void box_mcp_release(struct box_mcp *m);

/*
 * Serves MCP over the stdio transport until end of input (or SIGTERM, SIGINT, SIGHUP, which
 * it blocks and reads through a signalfd): newline-delimited messages on fd in, answers on fd
 * out (blocking writes, one message per line, nothing else). At the end the calls still
 * running are killed and the connection released (box_mcp_release). Returns 0, or -1 with
 * err when reading stdin or poll failed.
 */
int box_mcp_serve_stdio(struct box_mcp_config *cfg, int in, int out, struct box_err *err);

#endif
