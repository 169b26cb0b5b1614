/*
 * URLs checked against the allow-list of lib/net/policy.h, with libcurl's URL parser (url.c).
 * Apart from policy.c so that a binary which only validates rules (box-run) does not load
 * libcurl.
 */
#ifndef BOX_URL_H
#define BOX_URL_H

#include "policy.h"

/* A URL that passed the policy. host is lowercase (IPv6 in brackets); url is the normalized
 * URL to request (no fragment, no userinfo) and path its path; both are owned by the struct. */
struct box_url {
	char scheme[8];
	char host[BOX_HOST_MAX + 1];
	int port;
	char *path;
	char *url;
};

/*
 * Checks that method and url are allowed: the URL is parsed with libcurl's URL API; only
 * http and https, no userinfo, an ASCII host name or IP literal without zone id. On success
 * fills *out (box_url_release it) and returns 0. Returns -1 with invalid_request for a
 * malformed URL or an unsupported method, policy_denied (naming the host) when no rule
 * matches scheme, host, port, path prefix (on a segment boundary) and method.
 */
int box_policy_check_url(const struct box_policy *p, const char *method, const char *url,
			 struct box_url *out, struct box_err *err);

/* Frees what box_policy_check_url put in *u. */
void box_url_release(struct box_url *u);

#endif
