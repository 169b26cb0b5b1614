#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/un.h>

#include "url.h"
#include "tap.h"
#include "banned.h"

static struct box_policy pol;

/* Adds a rule to a fresh policy; returns the error code. */
static enum box_code add1(const char *rule, struct box_err *err)
{
	box_policy_release(&pol);
	box_err_init(err);
	box_policy_add(&pol, rule, err);
	return err->code;
}

static void rule_ok(const char *rule)
{
	struct box_err err;

	is_int(add1(rule, &err), BOX_OK, "rule accepted: %s", rule);
}

static void rule_bad(const char *rule, const char *why)
{
	struct box_err err;

	is_int(add1(rule, &err), BOX_E_INVALID, "rule refused (%s): %.60s", why, rule);
	ok(strlen(rule) > 80 || strstr(err.message, rule), "message names the rule: %s", err.message);
}

/* Checks method+url against the current policy; returns the code, fills *u on success. */
static enum box_code check(const char *method, const char *url, struct box_url *u, struct box_err *err)
{
	box_err_init(err);
	box_policy_check_url(&pol, method, url, u, err);
	return err->code;
}

static void allowed(const char *method, const char *url)
{
	struct box_url u;
	struct box_err err;

	is_int(check(method, url, &u, &err), BOX_OK, "allowed: %s %s", method, url);
	if (err.code != BOX_OK)
		printf("#   %s\n", err.message);
	box_url_release(&u);
}

static void denied(const char *method, const char *url, enum box_code code)
{
	struct box_url u;
	struct box_err err;

	is_int(check(method, url, &u, &err), code, "refused (%s): %s %s", box_err_code_name(code),
	       method, url);
	ok(u.url == NULL && u.path == NULL, "nothing left in the url on refusal");
}

static void use_rules(const char *const *rules)
{
	struct box_err err;

	box_policy_release(&pol);
	for (; *rules; rules++)
		if (box_policy_add(&pol, *rules, &err) < 0)
			printf("# rule %s: %s\n", *rules, err.message);
}

static void test_rule_forms(void)
{
	struct box_err err;
	char big[BOX_POLICY_RULE_MAX + 16];
	int i;

	rule_ok("https://api.example.com");
	is_int(pol.rules[0].schemes, BOX_SCHEME_HTTPS, "https rule: scheme");
	is_int(pol.rules[0].port, 443, "https rule: default port");
	is_str(pol.rules[0].host, "api.example.com", "https rule: host");
	is_int(pol.rules[0].methods, 0, "no methods: any");
	rule_ok("http://Example.COM:8080/v1/");
	is_int(pol.rules[0].port, 8080, "http rule: explicit port");
	is_str(pol.rules[0].host, "example.com", "host lowercased");
	is_str(pol.rules[0].path, "/v1", "path prefix without trailing slash");
	rule_ok("example.com:443");
	is_int(pol.rules[0].schemes, BOX_SCHEME_HTTP | BOX_SCHEME_HTTPS, "host:port: both schemes");
	rule_ok("GET,POST https://x.example.com/api");
	is_int(pol.rules[0].methods, BOX_METHOD_GET | BOX_METHOD_POST, "method list");
	rule_ok("*.example.com:443");
	is_int(pol.rules[0].wildcard, 1, "wildcard flag");
	is_str(pol.rules[0].host, "example.com", "wildcard suffix");
	rule_ok("https://[0:0::1]:8443/");
	is_str(pol.rules[0].host, "[::1]", "IPv6 host canonical");
	rule_ok("HEAD,OPTIONS,PUT,PATCH,DELETE http://1.2.3.4");
	rule_ok("HTTPS://upper.example.com");

	memset(big, 'a', sizeof(big));
	memcpy(big, "https://x.example/", 18);
	big[BOX_POLICY_RULE_MAX + 1] = 0;
	rule_bad(big, "longer than 2048 bytes");
	ok(strstr(add1(big, &err) ? err.message : "", "https://x.example/aaaa") != NULL,
	   "long rule: message quotes its start");
	big[BOX_POLICY_RULE_MAX] = 0;
	rule_ok(big);
	rule_bad("ftp://example.com", "unknown scheme");
	rule_bad("file:///etc", "unknown scheme");
	rule_bad("https://user@example.com", "userinfo");
	rule_bad("https://user:pw@example.com/", "userinfo");
	rule_bad("https://", "missing host");
	rule_bad("https://:443", "missing host");
	rule_bad("https:///path", "missing host");
	rule_bad(":443", "missing host");
	rule_bad("example.com", "host without port or scheme");
	rule_bad("example.com:0", "port 0");
	rule_bad("example.com:65536", "port too big");
	rule_bad("example.com:8x", "port not a number");
	rule_bad("https://example.com:", "empty port");
	rule_bad("https://example.com:-1", "negative port");
	rule_bad("get https://example.com", "lowercase method");
	rule_bad("TRACE https://example.com", "unknown method");
	rule_bad("GET,,POST https://example.com", "empty method");
	rule_bad("GET  https://example.com", "two spaces");
	rule_bad("https://example.com/a?b", "query");
	rule_bad("https://example.com/#x", "fragment");
	rule_bad("https://exa mple.com", "space in host");
	rule_bad("https://b\xc3\xbc" "cher.de", "non-ASCII host");
	rule_bad("https://ex*ample.com", "star inside host");
	rule_bad("https://*", "bare star");
	rule_bad("https://*.", "star without domain");
	rule_bad("example.com:80/path", "host:port with path");
	ok(add1("example.com:80/path", &err) && strstr(err.message, "no path"), "host:port with path: message");
	ok(add1("ftp://example.com", &err) && strstr(err.message, "scheme"), "unknown scheme: message");
	rule_bad("file:/etc", "unknown scheme, one slash");
	rule_bad("https://[::1", "unterminated IPv6");
	rule_bad("https://[zz::1]/", "bad IPv6");
	rule_bad("https://127.1/", "short IPv4");
	rule_bad("https://a..b/", "empty label");
	rule_bad("", "empty");
	rule_bad("GET ", "methods without target");

	box_policy_release(&pol);
	for (i = 0; i < BOX_POLICY_MAX_RULES; i++)
		if (box_policy_add(&pol, "example.com:1", &err) < 0)
			break;
	is_int(i, BOX_POLICY_MAX_RULES, "256 rules fit");
	box_err_init(&err);
	is_int(box_policy_add(&pol, "example.com:1", &err), -1, "rule 257 refused");
	is_int(err.code, BOX_E_LIMIT, "rule 257: limit_exceeded");
	is_str(err.limit, "allow_rules", "rule 257: limit name");
	box_policy_release(&pol);
	is_int(pol.n, 0, "release empties the policy");
}

static void test_urls(void)
{
	static const char *const rules[] = {
		"https://api.example.com",
		"example.org:8080",
		"https://*.wild.example",
		"https://p.example/v1",
		"GET,HEAD https://m.example",
		"http://allowed",
		"http://[::1]:8080",
		"POST http://post.example/submit/",
		NULL,
	};
	struct box_url u;
	struct box_err err;
	char big[BOX_URL_MAX + 64];

	use_rules(rules);
	is_int(check("GET", "https://API.Example.COM/x/y?q=1#frag", &u, &err), BOX_OK, "mixed-case host allowed");
	is_str(u.scheme, "https", "out: scheme");
	is_str(u.host, "api.example.com", "out: host lowercased");
	is_int(u.port, 443, "out: default port");
	is_str(u.path, "/x/y", "out: path");
	is_str(u.url, "https://api.example.com/x/y?q=1", "out: url normalized, fragment dropped");
	box_url_release(&u);
	is_int(check("GET", "https://api.example.com./z", &u, &err), BOX_OK, "trailing dot allowed");
	is_str(u.host, "api.example.com", "trailing dot dropped from host");
	is_str(u.url, "https://api.example.com/z", "trailing dot dropped from url");
	box_url_release(&u);

	denied("GET", "http://api.example.com/", BOX_E_POLICY);
	denied("GET", "https://api.example.com:8443/", BOX_E_POLICY);
	denied("GET", "https://other.example.com/", BOX_E_POLICY);
	denied("GET", "https://api.example.com.evil.net/", BOX_E_POLICY);

	allowed("GET", "http://example.org:8080/");
	allowed("DELETE", "https://example.org:8080/x");
	denied("GET", "http://example.org/", BOX_E_POLICY);
	denied("GET", "http://example.org:8081/", BOX_E_POLICY);

	allowed("GET", "https://a.wild.example/");
	allowed("GET", "https://a.b.wild.example/");
	denied("GET", "http://a.wild.example/", BOX_E_POLICY);
	denied("GET", "https://wild.example/", BOX_E_POLICY);
	denied("GET", "https://notwild.example/", BOX_E_POLICY);
	denied("GET", "https://a.wild.example:444/", BOX_E_POLICY);

	allowed("GET", "https://p.example/v1");
	allowed("GET", "https://p.example/v1/");
	allowed("GET", "https://p.example/v1/items?x=1");
	denied("GET", "https://p.example/v10", BOX_E_POLICY);
	denied("GET", "https://p.example/v1x/a", BOX_E_POLICY);
	denied("GET", "https://p.example/", BOX_E_POLICY);
	denied("GET", "https://p.example/v1/../admin", BOX_E_POLICY);
	denied("GET", "https://p.example/v1/%2e%2e/admin", BOX_E_POLICY);
	denied("GET", "https://p.example/v1/..%2Fadmin", BOX_E_POLICY);
	allowed("GET", "https://p.example/v1/a/../b");

	allowed("GET", "https://m.example/");
	allowed("HEAD", "https://m.example/");
	denied("POST", "https://m.example/", BOX_E_POLICY);
	denied("DELETE", "https://m.example/", BOX_E_POLICY);
	allowed("POST", "http://post.example/submit");
	denied("GET", "http://post.example/submit", BOX_E_POLICY);
	denied("TRACE", "https://api.example.com/", BOX_E_INVALID);
	denied("get", "https://api.example.com/", BOX_E_INVALID);
	denied(NULL, "https://api.example.com/", BOX_E_INVALID);

	allowed("GET", "http://allowed/");
	denied("GET", "http://allowed@evil/", BOX_E_POLICY);
	denied("GET", "http://allowed:pw@allowed/", BOX_E_POLICY);
	denied("GET", "http://allowed@allowed/", BOX_E_POLICY);
	is_int(check("GET", "http://evil#@allowed/", &u, &err), BOX_E_POLICY, "fragment trick refused");
	ok(strstr(err.message, "evil") != NULL, "fragment trick: message names evil: %s", err.message);
	is_int(check("GET", "http://allowed@evil/", &u, &err), BOX_E_POLICY, "userinfo trick refused");
	is_int(check("GET", "https://nowhere.example/", &u, &err), BOX_E_POLICY, "unlisted host");
	ok(strstr(err.message, "nowhere.example") != NULL, "denial names the host: %s", err.message);

	denied("GET", "ftp://allowed/", BOX_E_POLICY);
	denied("GET", "file:///etc/passwd", BOX_E_POLICY);
	denied("GET", "gopher://allowed/", BOX_E_POLICY);
	denied("GET", "http://b\xc3\xbc" "cher.allowed/", BOX_E_POLICY);
	denied("GET", "not a url", BOX_E_INVALID);
	denied("GET", "//allowed/", BOX_E_INVALID);
	denied("GET", "", BOX_E_INVALID);
	denied("GET", NULL, BOX_E_INVALID);
	memset(big, 'a', sizeof(big));
	memcpy(big, "http://allowed/", 15);
	big[sizeof(big) - 1] = 0;
	denied("GET", big, BOX_E_INVALID);

	allowed("GET", "http://[::1]:8080/");
	allowed("GET", "http://[0:0:0::1]:8080/x");
	is_int(check("GET", "http://[0::1]:8080/", &u, &err), BOX_OK, "IPv6 literal");
	is_str(u.host, "[::1]", "IPv6 host canonical");
	box_url_release(&u);
	denied("GET", "http://[::1]:8081/", BOX_E_POLICY);
	denied("GET", "http://[fe80::1%25eth0]:8080/", BOX_E_POLICY);
}

static const char *reason(const char *text)
{
	static struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(text, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, text, &s6->sin6_addr) != 1)
			return "BAD TEST ADDRESS";
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		if (inet_pton(AF_INET, text, &s4->sin_addr) != 1)
			return "BAD TEST ADDRESS";
	}
	return box_policy_private_reason((struct sockaddr *)&ss);
}

static void private_addr(const char *text, const char *why)
{
	const char *r = reason(text);

	if (why)
		is_str(r, why, "%s is %s", text, why);
	else
		ok(r != NULL && strcmp(r, "BAD TEST ADDRESS") != 0, "%s is not public (%s)", text,
		   r ? r : "null");
}

static void public_addr(const char *text)
{
	const char *r = reason(text);

	ok(r == NULL, "%s is public%s%s", text, r ? ": got " : "", r ? r : "");
}

static void test_addresses(void)
{
	struct sockaddr_un un;

	private_addr("0.0.0.0", NULL);
	private_addr("0.255.255.255", NULL);
	private_addr("10.0.0.1", "private");
	private_addr("10.255.255.255", "private");
	private_addr("100.64.0.1", NULL);
	private_addr("100.127.255.255", NULL);
	private_addr("127.0.0.1", "loopback");
	private_addr("127.255.255.254", "loopback");
	private_addr("169.254.0.1", "link-local");
	private_addr("169.254.169.254", "cloud metadata");
	private_addr("172.16.0.1", "private");
	private_addr("172.31.255.255", "private");
	private_addr("192.0.0.1", NULL);
	private_addr("192.0.2.7", "documentation");
	private_addr("192.168.1.1", "private");
	private_addr("198.18.0.1", NULL);
	private_addr("198.19.255.255", NULL);
	private_addr("198.51.100.1", "documentation");
	private_addr("203.0.113.9", "documentation");
	private_addr("224.0.0.1", "multicast");
	private_addr("239.255.255.255", "multicast");
	private_addr("240.0.0.1", "reserved");
	private_addr("254.1.2.3", "reserved");
	private_addr("255.255.255.255", "broadcast");

	public_addr("1.1.1.1");
	public_addr("8.8.8.8");
	public_addr("9.255.255.255");
	public_addr("11.0.0.0");
	public_addr("100.63.255.255");
	public_addr("100.128.0.0");
	public_addr("126.255.255.255");
	public_addr("128.0.0.0");
	public_addr("169.253.255.255");
	public_addr("169.255.0.0");
	public_addr("172.15.255.255");
	public_addr("172.32.0.0");
	public_addr("192.0.1.0");
	public_addr("192.0.3.0");
	public_addr("192.167.255.255");
	public_addr("192.169.0.0");
	public_addr("198.17.255.255");
	public_addr("198.20.0.0");
	public_addr("198.51.101.0");
	public_addr("203.0.114.0");
	public_addr("223.255.255.255");

	private_addr("::", "unspecified");
	private_addr("::1", "loopback");
	private_addr("fc00::1", "unique local");
	private_addr("fdff:ffff::1", "unique local");
	private_addr("fe80::1", "link-local");
	private_addr("febf:ffff::1", "link-local");
	private_addr("fec0::1", "site-local");
	private_addr("feff::1", "site-local");
	private_addr("ff02::1", "multicast");
	private_addr("ff0e::1", "multicast");
	private_addr("2001:db8::1", "documentation");
	private_addr("2001:db8:ffff::1", "documentation");
	private_addr("fd00:ec2::254", "cloud metadata");

	private_addr("::ffff:127.0.0.1", "loopback");
	private_addr("::ffff:7f00:1", "loopback");
	private_addr("::ffff:169.254.169.254", "cloud metadata");
	private_addr("::ffff:10.1.2.3", "private");
	private_addr("::127.0.0.1", "loopback");
	private_addr("::169.254.169.254", "cloud metadata");
	private_addr("64:ff9b::127.0.0.1", "loopback");
	private_addr("64:ff9b::7f00:1", "loopback");
	private_addr("64:ff9b::a9fe:a9fe", "cloud metadata");
	private_addr("64:ff9b::169.254.169.254", "cloud metadata");
	private_addr("2002:7f00:1::1", "loopback");
	private_addr("2002:a9fe:a9fe::", "cloud metadata");
	private_addr("2002:c0a8:101::1", "private");

	public_addr("2606:4700:4700::1111");
	public_addr("2001:4860:4860::8888");
	public_addr("::ffff:8.8.8.8");
	public_addr("64:ff9b::808:808");
	public_addr("2002:808:808::1");
	public_addr("2001:db9::1");
	public_addr("fe7f::1");
	public_addr("fbff::1");

	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	ok(box_policy_private_reason((struct sockaddr *)&un) != NULL, "AF_UNIX refused");
	ok(box_policy_private_reason(NULL) != NULL, "NULL refused");
}

int main(void)
{
	(void)tap_skip;
	box_policy_init(&pol);
	test_rule_forms();
	test_urls();
	test_addresses();
	box_policy_release(&pol);
	return done_testing();
}
