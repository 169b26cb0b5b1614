/* The HTTP client behind box-run's `http`: libcurl under the allow-list of policy.h. */
#ifndef BOX_HTTP_H
#define BOX_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "buf.h"
#include "err.h"
#include "url.h"

#define BOX_HTTP_MAX_REDIRECTS 5
#define BOX_HTTP_MAX_REQ_HEADERS 100
#define BOX_HTTP_MAX_RESP_HEADERS 100
#define BOX_HTTP_MAX_RESP_HEADER_BYTES (64 * 1024)
#define BOX_HTTP_DEFAULT_TIMEOUT_MS 30000
#define BOX_HTTP_DEFAULT_MAX_BODY (10 * 1024 * 1024)

/*
 * A request; every pointer is borrowed. headers are n_headers strings "Name: value" (a token
 * name, a value without CR, LF or NUL; Host, Content-Length and Transfer-Encoding are refused
 * since libcurl owns them). body may be NULL when body_len is 0; GET and HEAD take no body.
 * timeout_ms bounds the whole exchange, redirects included (0: the default; name resolution
 * cannot be interrupted, so a slow resolver is only noticed when it answers);
 * max_body_bytes caps the response body (0: the default).
 */
struct box_http_req {
	const char *method;
	const char *url;
	const char *const *headers;
	size_t n_headers;
	const void *body;
	size_t body_len;
	int64_t timeout_ms;
	size_t max_body_bytes;
};

/* A response: status, the final response's headers as a JSON object of lowercase names
 * (repeated headers joined with ", "; values made valid UTF-8), the body, the final URL. */
struct box_http_resp {
	long status;
	cJSON *headers;
	struct box_buf body;
	char *url;
};

/* Empties *r; allocates nothing. */
void box_http_resp_init(struct box_http_resp *r);

/* Frees what a request put in *r; *r is empty afterwards. */
void box_http_resp_release(struct box_http_resp *r);

/*
 * Performs one request under policy p: the URL is checked against the allow-list, the host
 * resolved once and every address checked with box_policy_private_reason (unless
 * p->allow_private), the connection pinned to the checked addresses; only http and https, no
 * proxy, cookies or .netrc. Redirects (at most BOX_HTTP_MAX_REDIRECTS) are followed here,
 * each target checked like the first URL; 303, and 301/302 after POST, turn into a GET
 * without body; Authorization and Cookie are dropped when scheme, host or port change.
 *
 * Returns 0 with *resp filled (any HTTP status counts as success), or -1 with err set:
 * invalid_request (bad method, URL or header), policy_denied (URL, redirect or address
 * refused), limit_exceeded ("http_body_bytes", "http_header_count", "http_header_bytes",
 * "http_redirects"), timeout ("http_timeout"), not_found (host does not resolve), io_error
 * (connection or TLS failure). *resp must have been initialized; it is released on failure.
 */
int box_http_request(const struct box_policy *p, const struct box_http_req *req,
		     struct box_http_resp *resp, struct box_err *err);

/* Checks one "Name: value" request header as box_http_request does; 0 or -1 (invalid_request). */
int box_http_check_header(const char *header, struct box_err *err);

/*
 * The box-http line protocol. line[0..len) is one JSON request
 * {"method", "url", "headers": {"Name": "value"}, "body_base64", "timeout_ms"} (only url is
 * required; method defaults to GET); unknown members and wrong types are invalid_request with
 * the JSON path. max_body_bytes caps the response body (0: the default). Returns the result
 * object {"ok": true, "status", "headers", "body_base64", "url"} or
 * {"ok": false, "error": {...}}; NULL only when out of memory. The caller cJSON_Deletes it.
 */
cJSON *box_http_serve_json(const struct box_policy *p, const char *line, size_t len,
			   size_t max_body_bytes);

#define BOX_HTTP_MAX_REQ_BODY (24 * 1024 * 1024)

#endif
