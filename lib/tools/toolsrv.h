/* The tool socket of a sandbox: the host side answers `box-tool` inside the sandbox with the
 * tools granted to that sandbox only, one JSON request and one JSON reply per connection. */
#ifndef BOX_TOOLSRV_H
#define BOX_TOOLSRV_H

#include <cjson/cJSON.h>
#include "err.h"
#include "tools.h"

#define BOX_TOOLSRV_REQUEST_MAX ((size_t)16 << 20)   /* one request, in bytes */
#define BOX_TOOLSRV_REPLY_MAX ((size_t)16 << 20)
#define BOX_TOOLSRV_IO_MS 10000                      /* to read a request or write a reply */
#define BOX_TOOLSRV_GUEST_PATH "/run/box/tool.sock"

/* Binds a listening unix socket at path (an old socket file there is replaced; anything else
 * is conflict). Returns the fd (close-on-exec) or -1 with err. */
int box_toolsrv_listen(const char *path, struct box_err *err);

/*
 * Accepts one connection on lfd and answers it:
 *   {"op":"list"}                               -> {"ok":true,"tools":[...]} (box_tools_describe)
 *   {"op":"call","tool":NAME,"input":{...}}     -> {"ok":true,"result":{...}} or
 *                                                  {"ok":false,"error":{...}}
 * A tool not in set is policy_denied ("tool X is not granted to this sandbox"); the input is
 * validated and the tool run by box_tool_call with o (NULL: defaults): under its own timeout,
 * capped by o->max_timeout_ms; a Lua tool by o->box_run (see box_tool_find_box_run), and
 * without one it is unsupported ("tool X is a Lua tool and the host found no box-run to run
 * it ..."). The name is only ever looked up: nothing in the input can choose what runs.
 * Never fails the caller: errors go to the client.
 */
void box_toolsrv_serve_one(int lfd, const struct box_toolset *set,
			   const struct box_tool_call_opts *o);

/* Accepts one connection on lfd and answers whatever it asks with e (the tools could not be
 * loaded: a store entry that changed is integrity_failed for every call). */
void box_toolsrv_serve_error(int lfd, const struct box_err *e);

/* Answers one accepted connection fd (and closes it) as box_toolsrv_serve_one does, or with
 * fail's error when fail is not NULL. For a server that answers each call in a child of its
 * own (a sandbox's keeper), so that a slow tool never stalls the next call. */
void box_toolsrv_serve_conn(int fd, const struct box_toolset *set,
			    const struct box_tool_call_opts *o, const struct box_err *fail);

/* The client side: sends req (its integer literals printed exactly, see box_json_exact) to
 * the socket at path, returns the reply object, or NULL with err (io_error when the socket
 * cannot be reached, invalid_request for a garbled reply). */
cJSON *box_toolsrv_request(const char *path, cJSON *req, int timeout_ms,
			   struct box_err *err);

#endif
