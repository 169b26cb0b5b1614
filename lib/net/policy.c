#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy.h"
#include "banned.h"

static const struct {
	const char *name;
	unsigned bit;
} methods[] = {
	{ "GET", BOX_METHOD_GET },
	{ "HEAD", BOX_METHOD_HEAD },
	{ "POST", BOX_METHOD_POST },
	{ "PUT", BOX_METHOD_PUT },
	{ "PATCH", BOX_METHOD_PATCH },
	{ "DELETE", BOX_METHOD_DELETE },
	{ "OPTIONS", BOX_METHOD_OPTIONS },
};

void box_policy_init(struct box_policy *p)
{
	memset(p, 0, sizeof(*p));
}

void box_policy_release(struct box_policy *p)
{
	size_t i;

	for (i = 0; i < p->n && i < BOX_POLICY_MAX_RULES; i++) {
		free(p->rules[i].path);
		free(p->rules[i].text);
		memset(&p->rules[i], 0, sizeof(p->rules[i]));
	}
	p->n = 0;
}

unsigned box_policy_method_bit(const char *method)
{
	size_t i;

	if (!method)
		return 0;
	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strcmp(method, methods[i].name) == 0)
			return methods[i].bit;
	return 0;
}

/* Messages quote at most this much of a rule: they must stay readable. */
#define QUOTE 80

static int bad_rule(struct box_err *err, const char *rule, const char *why)
{
	return box_err_set(err, BOX_E_INVALID, "invalid allow rule \"%.*s%s\": %s", QUOTE, rule,
			   strlen(rule) > QUOTE ? "..." : "", why);
}

static int parse_methods(const char *s, size_t n, unsigned *out)
{
	char name[16];
	size_t i = 0, j;
	unsigned bit;

	*out = 0;
	while (i <= n) {
		j = i;
		while (j < n && s[j] != ',')
			j++;
		if (j == i || j - i >= sizeof(name))
			return -1;
		memcpy(name, s + i, j - i);
		name[j - i] = 0;
		bit = box_policy_method_bit(name);
		if (!bit)
			return -1;
		*out |= bit;
		i = j + 1;
	}
	return 0;
}

static int parse_port(const char *s, size_t n, int *out)
{
	int v = 0;
	size_t i;

	if (n == 0 || n > 5)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (v < 1 || v > 65535)
		return -1;
	*out = v;
	return 0;
}

static int is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

/*
 * Lowercases and checks a DNS name or dotted IPv4 in place: ASCII letters, digits, '-', '_'
 * and non-empty labels; one trailing dot is dropped. Returns 0 or -1.
 */
int box_policy_normalize_host(char *h)
{
	size_t n, i;
	int digits_only = 1;
	struct in_addr a4;

	for (i = 0; h[i]; i++) {
		if (h[i] >= 'A' && h[i] <= 'Z')
			h[i] = (char)(h[i] - 'A' + 'a');
		if (!is_name_char(h[i]))
			return -1;
		if (h[i] != '.' && (h[i] < '0' || h[i] > '9'))
			digits_only = 0;
	}
	n = i;
	if (n > 0 && h[n - 1] == '.')
		h[--n] = 0;
	if (n == 0 || n > 253 || h[0] == '.' || strstr(h, ".."))
		return -1;
	/* Dotted numbers that are no IPv4 address ("127.1") would never match a URL: curl
	 * normalizes such hosts to the dotted quad. */
	if (digits_only && inet_pton(AF_INET, h, &a4) != 1)
		return -1;
	return 0;
}

/* Canonical "[v6]" text of the literal in s[0..n) (without brackets); -1 if not IPv6. */
int box_policy_canon_v6(const char *s, size_t n, char *out, size_t outlen)
{
	char tmp[INET6_ADDRSTRLEN];
	struct in6_addr a;

	if (n == 0 || n >= sizeof(tmp))
		return -1;
	memcpy(tmp, s, n);
	tmp[n] = 0;
	if (inet_pton(AF_INET6, tmp, &a) != 1 || !inet_ntop(AF_INET6, &a, tmp, sizeof(tmp)))
		return -1;
	if ((size_t)snprintf(out, outlen, "[%s]", tmp) >= outlen)
		return -1;
	return 0;
}

/* Parses "host[:port]" of a rule into r. need_port: the host:port form. */
static int parse_authority(const char *rule, const char *s, size_t n, int need_port,
			   struct box_policy_rule *r, struct box_err *err)
{
	const char *colon = NULL;
	size_t hn;

	if (memchr(s, '@', n))
		return bad_rule(err, rule, "userinfo is not allowed");
	if (n > 0 && s[0] == '[') {
		const char *close = memchr(s, ']', n);

		if (!close)
			return bad_rule(err, rule, "unterminated IPv6 address");
		if (box_policy_canon_v6(s + 1, (size_t)(close - s - 1), r->host, sizeof(r->host)) < 0)
			return bad_rule(err, rule, "bad IPv6 address");
		hn = (size_t)(close + 1 - s);
		if (hn < n && s[hn] != ':')
			return bad_rule(err, rule, "bad host");
		if (hn < n)
			colon = s + hn;
	} else {
		colon = memchr(s, ':', n);
		hn = colon ? (size_t)(colon - s) : n;
		if (hn == 0)
			return bad_rule(err, rule, "missing host");
		if (hn >= 2 && s[0] == '*' && s[1] == '.') {
			r->wildcard = 1;
			s += 2;
			hn -= 2;
			n -= 2;
		}
		if (hn == 0 || hn > BOX_HOST_MAX)
			return bad_rule(err, rule, hn ? "host name too long" : "missing host");
		memcpy(r->host, s, hn);
		r->host[hn] = 0;
		if (box_policy_normalize_host(r->host) < 0)
			return bad_rule(err, rule, "bad host name");
	}
	if (colon) {
		if (parse_port(colon + 1, (size_t)(s + n - colon - 1), &r->port) < 0)
			return bad_rule(err, rule, "bad port");
	} else if (need_port) {
		return bad_rule(err, rule, "a rule without scheme needs a port (host:port)");
	}
	return 0;
}

/* "name:/..." with a name of letters, digits, '+', '-' or '.' starting with a letter: a URL
 * scheme, unlike "host:port". */
static int looks_like_scheme(const char *t)
{
	size_t i;

	if (!((t[0] >= 'a' && t[0] <= 'z') || (t[0] >= 'A' && t[0] <= 'Z')))
		return 0;
	for (i = 1; t[i] && t[i] != ':'; i++)
		if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') ||
		      (t[i] >= '0' && t[i] <= '9') || t[i] == '+' || t[i] == '-' || t[i] == '.'))
			return 0;
	return t[i] == ':' && t[i + 1] == '/';
}

static int parse_rule(const char *rule, size_t len, struct box_policy_rule *r, struct box_err *err)
{
	const char *t = rule, *sp, *slash, *end = rule + len;
	size_t i;

	for (i = 0; i < len; i++)
		if ((unsigned char)rule[i] <= 0x20 || (unsigned char)rule[i] >= 0x7f)
			if (rule[i] != ' ')
				return bad_rule(err, rule, "control, space or non-ASCII character");
	sp = memchr(rule, ' ', len);
	if (sp) {
		if (parse_methods(rule, (size_t)(sp - rule), &r->methods) < 0)
			return bad_rule(err, rule, "bad method list (GET HEAD POST PUT PATCH DELETE OPTIONS)");
		t = sp + 1;
		if (memchr(t, ' ', (size_t)(end - t)))
			return bad_rule(err, rule, "unexpected space");
	}
	if (t == end)
		return bad_rule(err, rule, "missing target");
	if (memchr(t, '?', (size_t)(end - t)) || memchr(t, '#', (size_t)(end - t)))
		return bad_rule(err, rule, "query and fragment are not allowed");
	if (end - t >= 8 && strncasecmp(t, "https://", 8) == 0) {
		r->schemes = BOX_SCHEME_HTTPS;
		r->port = 443;
		t += 8;
	} else if (end - t >= 7 && strncasecmp(t, "http://", 7) == 0) {
		r->schemes = BOX_SCHEME_HTTP;
		r->port = 80;
		t += 7;
	} else if (looks_like_scheme(t)) {
		return bad_rule(err, rule, "unknown scheme (http and https only)");
	} else {
		if (memchr(t, '/', (size_t)(end - t)))
			return bad_rule(err, rule, "a host:port rule takes no path");
		r->schemes = BOX_SCHEME_HTTP | BOX_SCHEME_HTTPS;
		return parse_authority(rule, t, (size_t)(end - t), 1, r, err);
	}
	slash = memchr(t, '/', (size_t)(end - t));
	if (parse_authority(rule, t, (size_t)((slash ? slash : end) - t), 0, r, err) < 0)
		return -1;
	if (slash) {
		size_t n = (size_t)(end - slash);

		while (n > 0 && slash[n - 1] == '/')
			n--;
		r->path = strndup(slash, n);
	} else {
		r->path = strdup("");
	}
	if (!r->path)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	return 0;
}

int box_policy_add(struct box_policy *p, const char *rule, struct box_err *err)
{
	struct box_policy_rule r;
	size_t len;

	if (!rule)
		return box_err_set(err, BOX_E_INVALID, "invalid allow rule: missing");
	len = strnlen(rule, BOX_POLICY_RULE_MAX + 1);
	if (len > BOX_POLICY_RULE_MAX)
		return bad_rule(err, rule, "longer than 2048 bytes");
	if (p->n >= BOX_POLICY_MAX_RULES)
		return box_err_limit(err, BOX_E_LIMIT, "allow_rules", BOX_POLICY_MAX_RULES, "rules",
				     "more than %d allow rules", BOX_POLICY_MAX_RULES);
	memset(&r, 0, sizeof(r));
	if (parse_rule(rule, len, &r, err) < 0) {
		free(r.path);
		return -1;
	}
	if (!r.path)
		r.path = strdup("");
	r.text = strndup(rule, len);
	if (!r.path || !r.text) {
		free(r.path);
		free(r.text);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}
	p->rules[p->n++] = r;
	return 0;
}

struct range4 {
	uint32_t net;
	unsigned bits;
	const char *why;
};

#define V4(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (uint32_t)(d))

/* Order matters: the narrow ranges come before the wide ones that hold them. */
static const struct range4 ranges4[] = {
	{ V4(169, 254, 169, 254), 32, "cloud metadata" },
	{ V4(255, 255, 255, 255), 32, "broadcast" },
	{ V4(0, 0, 0, 0), 8, "unspecified (this network)" },
	{ V4(10, 0, 0, 0), 8, "private" },
	{ V4(100, 64, 0, 0), 10, "shared address space (CGNAT)" },
	{ V4(127, 0, 0, 0), 8, "loopback" },
	{ V4(169, 254, 0, 0), 16, "link-local" },
	{ V4(172, 16, 0, 0), 12, "private" },
	{ V4(192, 0, 0, 0), 24, "IETF protocol assignments" },
	{ V4(192, 0, 2, 0), 24, "documentation" },
	{ V4(192, 168, 0, 0), 16, "private" },
	{ V4(198, 18, 0, 0), 15, "benchmarking" },
	{ V4(198, 51, 100, 0), 24, "documentation" },
	{ V4(203, 0, 113, 0), 24, "documentation" },
	{ V4(224, 0, 0, 0), 4, "multicast" },
	{ V4(240, 0, 0, 0), 4, "reserved" },
};

static const char *reason4(const unsigned char *b)
{
	uint32_t a = V4(b[0], b[1], b[2], b[3]);
	size_t i;

	for (i = 0; i < sizeof(ranges4) / sizeof(ranges4[0]); i++) {
		uint32_t mask = ranges4[i].bits ? ~(uint32_t)0 << (32 - ranges4[i].bits) : 0;

		if ((a & mask) == ranges4[i].net)
			return ranges4[i].why;
	}
	return NULL;
}

struct range6 {
	unsigned char net[16];
	unsigned bits;
	const char *why;
};

static const struct range6 ranges6[] = {
	{ { 0xfd, 0x00, 0x0e, 0xc2, [15] = 0x54, [14] = 0x02 }, 128, "cloud metadata" },
	{ { 0xfc }, 7, "unique local" },
	{ { 0xfe, 0x80 }, 10, "link-local" },
	{ { 0xfe, 0xc0 }, 10, "site-local" },
	{ { 0xff }, 8, "multicast" },
	{ { 0x20, 0x01, 0x0d, 0xb8 }, 32, "documentation" },
};

static int prefix_eq(const unsigned char *a, const unsigned char *net, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;
	unsigned char mask;

	if (memcmp(a, net, full) != 0)
		return 0;
	if (!rest)
		return 1;
	mask = (unsigned char)(0xff << (8 - rest));
	return (a[full] & mask) == (net[full] & mask);
}

static const char *reason6(const unsigned char *b)
{
	static const unsigned char zero[16], mapped[12] = { [10] = 0xff, [11] = 0xff },
		nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
	size_t i;

	if (memcmp(b, zero, 16) == 0)
		return "unspecified";
	if (memcmp(b, zero, 15) == 0 && b[15] == 1)
		return "loopback";
	if (memcmp(b, mapped, 12) == 0 || memcmp(b, zero, 12) == 0 || memcmp(b, nat64, 12) == 0)
		return reason4(b + 12);
	if (b[0] == 0x20 && b[1] == 0x02)
		return reason4(b + 2);
	for (i = 0; i < sizeof(ranges6) / sizeof(ranges6[0]); i++)
		if (prefix_eq(b, ranges6[i].net, ranges6[i].bits))
			return ranges6[i].why;
	return NULL;
}

const char *box_policy_private_reason(const struct sockaddr *sa)
{
	if (!sa)
		return "no address";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;

		return reason4((const unsigned char *)&in->sin_addr);
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;

		return reason6(in6->sin6_addr.s6_addr);
	}
	return "not an IP address";
}

int box_policy_host_matches(const struct box_policy_rule *r, const char *host)
{
	size_t hl, rl;

	if (!r->wildcard)
		return strcmp(r->host, host) == 0;
	hl = strlen(host);
	rl = strlen(r->host);
	return hl > rl + 1 && host[hl - rl - 1] == '.' && strcmp(host + hl - rl, r->host) == 0;
}

/* Encoded dots, slashes and backslashes let a server see a path other than the one we
 * matched ("/api/%2e%2e/admin"), so a rule with a path prefix refuses them. */
static int path_has_encoded_separators(const char *path)
{
	const char *q;

	for (q = strchr(path, '%'); q; q = strchr(q + 1, '%')) {
		if (q[1] == '2' && (q[2] == 'e' || q[2] == 'E' || q[2] == 'f' || q[2] == 'F'))
			return 1;
		if (q[1] == '5' && (q[2] == 'c' || q[2] == 'C'))
			return 1;
	}
	return strchr(path, '\\') != NULL;
}

int box_policy_path_matches(const struct box_policy_rule *r, const char *path)
{
	size_t n = strlen(r->path);

	if (n == 0)
		return 1;
	if (strncmp(path, r->path, n) != 0 || (path[n] != 0 && path[n] != '/'))
		return 0;
	return !path_has_encoded_separators(path);
}
