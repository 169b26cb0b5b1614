/* Network egress policy: the allow-list of URLs a guest may reach and the address checks. */
#ifndef BOX_POLICY_H
#define BOX_POLICY_H

#include <stddef.h>
#include <sys/socket.h>
#include "err.h"

#define BOX_POLICY_MAX_RULES 256
#define BOX_POLICY_RULE_MAX 2048   /* bytes in one rule string */
#define BOX_URL_MAX 8192           /* bytes in one URL */
#define BOX_HOST_MAX 255

/* Bits of box_policy_rule.schemes and .methods. */
#define BOX_SCHEME_HTTP  0x1u
#define BOX_SCHEME_HTTPS 0x2u

#define BOX_METHOD_GET     0x01u
#define BOX_METHOD_HEAD    0x02u
#define BOX_METHOD_POST    0x04u
#define BOX_METHOD_PUT     0x08u
#define BOX_METHOD_PATCH   0x10u
#define BOX_METHOD_DELETE  0x20u
#define BOX_METHOD_OPTIONS 0x40u

/*
 * One parsed rule. host is lowercase; for "*.example.com" wildcard is 1 and host holds
 * "example.com" (subdomains match, the apex does not). IPv6 hosts are kept in brackets in
 * the canonical form of inet_ntop. port is the explicit or the scheme's default port (0 means
 * "the default of whichever scheme is used", only for the scheme forms). path is the prefix
 * without trailing slashes ("" when the rule has no path).
 */
struct box_policy_rule {
	unsigned schemes;
	unsigned methods;      /* 0: any method */
	int wildcard;
	char host[BOX_HOST_MAX + 1];
	int port;
	char *path;
	char *text;            /* the rule as given, for messages */
};

/*
 * An allow-list. Zero it (or use BOX_POLICY_INIT) before use; box_policy_release frees it.
 * allow_private lets requests reach private, loopback, link-local... addresses.
 */
struct box_policy {
	struct box_policy_rule rules[BOX_POLICY_MAX_RULES];
	size_t n;
	int allow_private;
};

/* Empties *p (no rules, allow_private 0); allocates nothing. */
void box_policy_init(struct box_policy *p);

/*
 * Parses one rule, "[METHOD[,METHOD...] ]TARGET" where TARGET is https://host[:port][/path],
 * http://host[:port][/path] or host:port (http or https to that host and port); host may be
 * "*.domain". Returns 0, or -1 with invalid_request (a message naming the rule) when the rule
 * is malformed, or limit_exceeded (limit "allow_rules") when the list is full.
 */
int box_policy_add(struct box_policy *p, const char *rule, struct box_err *err);

/* Frees the rules; *p is empty afterwards (allow_private kept). */
void box_policy_release(struct box_policy *p);

/* BOX_METHOD_* bit of a method name (uppercase, exact), or 0 when it is not supported. */
unsigned box_policy_method_bit(const char *method);

/*
 * NULL if the address (AF_INET or AF_INET6) is a public unicast address, else a static string
 * saying why not ("loopback", "private", "link-local", "cloud metadata", ...). Addresses that
 * embed an IPv4 address (v4-mapped, v4-compatible, NAT64, 6to4) are judged by that address.
 * Any other family is refused too.
 */
const char *box_policy_private_reason(const struct sockaddr *sa);

/* 1 when host (lowercase, as box_policy_normalize_host leaves it) is the rule's host, or for a
 * "*.domain" rule a name under it (never the apex); 0 otherwise. */
int box_policy_host_matches(const struct box_policy_rule *r, const char *host);

/* 1 when path is under the rule's path prefix (on a segment boundary, with no encoded
 * separator) or the rule has none; 0 otherwise. */
int box_policy_path_matches(const struct box_policy_rule *r, const char *path);

/* Helpers shared by the rule parser (policy.c) and the URL checks (url.c), not for others:
 * lowercase a host name in place and check its characters (0 or -1); write the canonical text
 * of the IPv6 literal s[0..n) to out (0 or -1). */
int box_policy_normalize_host(char *h);
int box_policy_canon_v6(const char *s, size_t n, char *out, size_t outlen);

#endif
