/* Unit tests of lib/net/registry.c: the parts that need no network. */
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "tap.h"
#include "banned.h"

static void test_references(void)
{
	struct box_registry r;
	struct box_err err;
	static const struct {
		const char *ref;
		int insecure;
		enum box_code code;
		const char *scheme, *host, *prefix;
	} cases[] = {
		{ "https://registry.example.com", 0, BOX_OK, "https", "registry.example.com", "" },
		{ "https://Registry.Example.COM:5000/team/tools/", 0, BOX_OK, "https", "registry.example.com:5000", "team/tools" },
		{ "ghcr.io/acme", 0, BOX_OK, "https", "ghcr.io", "acme" },
		{ "localhost:5000/x", 0, BOX_OK, "https", "localhost:5000", "x" },
		{ "localhost", 0, BOX_OK, "https", "localhost", "" },
		{ "http://127.0.0.1:5000", 0, BOX_OK, "http", "127.0.0.1:5000", "" },
		{ "http://127.9.9.9", 0, BOX_OK, "http", "127.9.9.9", "" },
		{ "http://[::1]:5000/p", 0, BOX_OK, "http", "[::1]:5000", "p" },
		{ "http://localhost:1", 0, BOX_OK, "http", "localhost:1", "" },
		{ "http://registry.example.com", 1, BOX_OK, "http", "registry.example.com", "" },
		{ "http://registry.example.com", 0, BOX_E_POLICY, NULL, NULL, NULL },
		{ "http://10.0.0.1:5000", 0, BOX_E_POLICY, NULL, NULL, NULL },
		{ "http://[::2]", 0, BOX_E_POLICY, NULL, NULL, NULL },
		{ "http://128.0.0.1", 0, BOX_E_POLICY, NULL, NULL, NULL },
		{ "myregistry/prefix", 0, BOX_E_INVALID, NULL, NULL, NULL },   /* no dot, no port */
		{ "ftp://example.com", 0, BOX_E_INVALID, NULL, NULL, NULL },
		{ "oci:/some/path", 0, BOX_E_INVALID, NULL, NULL, NULL },
		{ "https://user:pw@example.com", 0, BOX_E_INVALID, NULL, NULL, NULL },
		{ "https://example.com:0", 0, BOX_E_INVALID, NULL, NULL, NULL },
		{ "https://example.com:65536", 0, BOX_E_INVALID, NULL, NULL, NULL },
		{ "https://example.com:12a", 0, BOX_E_INVALID, NULL, NULL, NULL },
		{ "https://example.com/Upper", 0, BOX_E_INVALID, NULL, NULL, NULL },
		{ "https://example.com/a//b", 0, BOX_E_INVALID, NULL, NULL, NULL },
		{ "https://example.com/a?x=1", 0, BOX_E_INVALID, NULL, NULL, NULL },
		{ "https://[zz]:5000", 0, BOX_E_INVALID, NULL, NULL, NULL },
		{ "https://-bad.example.com", 0, BOX_E_INVALID, NULL, NULL, NULL },
		{ "https://", 0, BOX_E_INVALID, NULL, NULL, NULL },
		{ "", 0, BOX_E_INVALID, NULL, NULL, NULL },
	};
	size_t i;
	char big[BOX_REGISTRY_REF_MAX + 16];

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc;

		box_err_init(&err);
		rc = box_registry_init(&r, cases[i].ref, cases[i].insecure, &err);
		if (cases[i].code == BOX_OK) {
			is_int(rc, 0, "reference %s parses", cases[i].ref);
			is_str(r.scheme, cases[i].scheme, "  scheme");
			is_str(r.host, cases[i].host, "  host");
			is_str(r.prefix, cases[i].prefix, "  prefix");
			box_registry_release(&r);
		} else {
			ok(rc == -1 && err.code == cases[i].code, "reference \"%s\" refused with %s (got %s)",
			   cases[i].ref, box_err_code_name(cases[i].code), box_err_code_name(err.code));
			is_str(r.host, "", "  nothing kept");
		}
	}
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	box_err_init(&err);
	ok(box_registry_init(&r, big, 0, &err) == -1 && err.code == BOX_E_INVALID, "an overlong reference is refused");
}

static void test_names(void)
{
	const char *good[] = { "a", "box/hello", "a.b_c__d---e/f0", "x/y/z", NULL };
	const char *bad[] = { "", "A", "a_", "_a", "a..b", "a___b", "a._b", "a//b", "/a", "a/", "a b",
			      "a:b", "ä", NULL };
	const char *gtags[] = { "1.0.0", "latest", "_x", "A-b.c_D", NULL };
	const char *btags[] = { "", ".x", "-x", "a/b", "a:b", "a b", NULL };
	char longtag[140];
	int i;

	for (i = 0; good[i]; i++)
		ok(box_registry_valid_name(good[i]), "name \"%s\" is valid", good[i]);
	for (i = 0; bad[i]; i++)
		ok(!box_registry_valid_name(bad[i]), "name \"%s\" is invalid", bad[i]);
	for (i = 0; gtags[i]; i++)
		ok(box_registry_valid_tag(gtags[i]), "tag \"%s\" is valid", gtags[i]);
	for (i = 0; btags[i]; i++)
		ok(!box_registry_valid_tag(btags[i]), "tag \"%s\" is invalid", btags[i]);
	memset(longtag, 'a', 128);
	longtag[128] = 0;
	ok(box_registry_valid_tag(longtag), "a 128-character tag is valid");
	longtag[128] = 'a';
	longtag[129] = 0;
	ok(!box_registry_valid_tag(longtag), "a 129-character tag is not");
	ok(box_registry_valid_digest("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
	   "a sha256 digest is valid");
	ok(!box_registry_valid_digest("sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"),
	   "uppercase hex is not");
	ok(!box_registry_valid_digest("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde"),
	   "63 hex digits are not");
	ok(!box_registry_valid_digest("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0"),
	   "65 hex digits are not");
	ok(!box_registry_valid_digest("sha512:00"), "sha512 is not supported");
}

static void test_challenges(void)
{
	struct box_registry_challenge ch;
	struct box_err err;
	char *huge;
	size_t i, n;

	box_err_init(&err);
	is_int(box_registry_parse_challenge("Bearer realm=\"https://auth.example.com/token\",service=\"registry.example.com\",scope=\"repository:a/b:pull\"",
					    &ch, &err), 0, "a Bearer challenge parses");
	is_str(ch.scheme, "bearer", "  scheme");
	is_str(ch.realm, "https://auth.example.com/token", "  realm");
	is_str(ch.service, "registry.example.com", "  service");
	is_str(ch.scope, "repository:a/b:pull", "  scope");

	is_int(box_registry_parse_challenge("basic realm=\"Registry Realm\"", &ch, &err), 0, "Basic parses");
	is_str(ch.scheme, "basic", "  scheme lowercased");
	is_str(ch.realm, "Registry Realm", "  realm with a space");

	is_int(box_registry_parse_challenge("BEARER  Realm = tok.example.com , SERVICE=svc", &ch, &err), 0,
	       "case-insensitive names, token values, spaces around '='");
	is_str(ch.realm, "tok.example.com", "  token realm");
	is_str(ch.service, "svc", "  token service");

	is_int(box_registry_parse_challenge("Bearer realm=\"a\\\"b\\\\c\"", &ch, &err), 0, "escapes in quoted strings");
	is_str(ch.realm, "a\"b\\c", "  unescaped");

	is_int(box_registry_parse_challenge("Negotiate abc==, Digest realm=\"x\", nonce=\"y\", Basic realm=\"z\"",
					    &ch, &err), 0, "the first usable challenge of a list");
	is_str(ch.scheme, "basic", "  Basic after Negotiate and Digest");
	is_str(ch.realm, "z", "  its realm, not Digest's");

	is_int(box_registry_parse_challenge("Bearer realm=\"r\",scope=\"repository:x:pull,push\", Basic realm=\"b\"",
					    &ch, &err), 0, "a comma inside a quoted scope");
	is_str(ch.scope, "repository:x:pull,push", "  scope kept whole");
	is_str(ch.realm, "r", "  realm of the first challenge");

	is_int(box_registry_parse_challenge("Basic", &ch, &err), 0, "Basic without parameters");

	/* hostile or useless */
	static const char *bad[] = {
		"", "   ", ",,,", "Negotiate abc", "Digest realm=\"x\"", "Bearer", "Bearer service=\"x\"",
		"Bearer realm=\"unterminated", "Bearer realm=\"ends with escape\\", "Bearer realm=\"a\rb\"",
		"Bearer realm=\"a\nb\"", "Bearer realm=a\x01", "Bearer realm=\"x\" garbage",
		"Bearer realm=\"x\";service=y", "=x", "Bearer ,realm=\"x\"",
		NULL,
	};
	for (i = 0; bad[i]; i++) {
		box_err_init(&err);
		ok(box_registry_parse_challenge(bad[i], &ch, &err) == -1 && err.code == BOX_E_POLICY &&
		   ch.scheme[0] == 0, "challenge #%zu refused (policy_denied, nothing kept)", i);
	}
	box_err_init(&err);
	ok(box_registry_parse_challenge(NULL, &ch, &err) == -1 && err.code == BOX_E_POLICY, "no header at all");

	/* a realm longer than the field */
	n = BOX_REGISTRY_CHALLENGE_MAX + 10;
	huge = malloc(n + 32);
	memcpy(huge, "Bearer realm=\"", 14);
	memset(huge + 14, 'a', n);
	memcpy(huge + 14 + n, "\"", 2);
	box_err_init(&err);
	ok(box_registry_parse_challenge(huge, &ch, &err) == -1 && err.code == BOX_E_POLICY, "an overlong realm is refused");
	free(huge);

	/* too many parameters */
	huge = malloc(100 * 8 + 64);
	n = 0;
	memcpy(huge, "Bearer realm=r", 14);
	n = 14;
	for (i = 0; i < 100; i++) {
		memcpy(huge + n, ",p=v", 4);
		n += 4;
	}
	huge[n] = 0;
	box_err_init(&err);
	ok(box_registry_parse_challenge(huge, &ch, &err) == -1 && err.code == BOX_E_POLICY, "100 parameters are refused");
	free(huge);

	/* many challenges of unknown schemes: bounded, refused */
	huge = malloc(40 * 10 + 64);
	n = 0;
	for (i = 0; i < 40; i++) {
		memcpy(huge + n, "Foo a=b, ", 9);
		n += 9;
	}
	memcpy(huge + n, "Basic realm=x", 14);
	box_err_init(&err);
	ok(box_registry_parse_challenge(huge, &ch, &err) == -1, "a Basic after 40 unknown challenges is not looked for");
	free(huge);
}

static void test_errors(void)
{
	struct box_err err;
	static const struct {
		long status;
		const char *body;
		enum box_code code;
		int retryable;
	} cases[] = {
		{ 404, "{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\",\"message\":\"manifest unknown\"}]}", BOX_E_NOT_FOUND, 0 },
		{ 404, "{\"errors\":[{\"code\":\"BLOB_UNKNOWN\",\"message\":\"blob unknown\"}]}", BOX_E_NOT_FOUND, 0 },
		{ 404, "{\"errors\":[{\"code\":\"NAME_UNKNOWN\"}]}", BOX_E_NOT_FOUND, 0 },
		{ 401, "{\"errors\":[{\"code\":\"UNAUTHORIZED\",\"message\":\"authentication required\"}]}", BOX_E_POLICY, 0 },
		{ 403, "{\"errors\":[{\"code\":\"DENIED\",\"message\":\"no\"}]}", BOX_E_POLICY, 0 },
		{ 400, "{\"errors\":[{\"code\":\"DIGEST_INVALID\",\"message\":\"digest did not match\"}]}", BOX_E_INTEGRITY, 0 },
		{ 400, "{\"errors\":[{\"code\":\"MANIFEST_INVALID\"}]}", BOX_E_INVALID, 0 },
		{ 429, "{\"errors\":[{\"code\":\"TOOMANYREQUESTS\"}]}", BOX_E_LIMIT, 1 },
		{ 429, "slow down", BOX_E_LIMIT, 1 },
		{ 500, "<html>Internal Server Error</html>", BOX_E_PROVIDER, 1 },
		{ 503, "", BOX_E_PROVIDER, 1 },
		{ 502, "{\"errors\":[{\"code\":\"UNKNOWN\"}]}", BOX_E_PROVIDER, 1 },
		{ 404, "not json", BOX_E_NOT_FOUND, 0 },
		{ 401, "{\"errors\": 5}", BOX_E_POLICY, 0 },
		{ 404, "{\"errors\":[]}", BOX_E_NOT_FOUND, 0 },
		{ 418, "{\"errors\":[{\"code\":7}]}", BOX_E_PROVIDER, 0 },
		{ 200, "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", BOX_E_PROVIDER, 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		box_err_init(&err);
		is_int(box_registry_error(cases[i].status, cases[i].body, strlen(cases[i].body), "manifest x:1", &err),
		       -1, "error #%zu returns -1", i);
		ok(err.code == cases[i].code && err.retryable == cases[i].retryable,
		   "HTTP %ld \"%.30s\" is %s%s (got %s)", cases[i].status, cases[i].body,
		   box_err_code_name(cases[i].code), cases[i].retryable ? ", retryable" : "",
		   box_err_code_name(err.code));
	}
	box_err_init(&err);
	box_registry_error(404, "{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\",\"message\":\"evil\\u001b[31m\\n\"}]}",
			   strlen("{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\",\"message\":\"evil\\u001b[31m\\n\"}]}"),
			   "manifest x:1", &err);
	ok(strstr(err.message, "manifest x:1") && strstr(err.message, "MANIFEST_UNKNOWN") &&
	   !strchr(err.message, '\033') && !strchr(err.message, '\n'),
	   "the message names the request and the code, control characters replaced: %s", err.message);
	box_err_init(&err);
	box_registry_error(429, "", 0, "x", &err);
	ok(strcmp(err.limit, "registry_rate") == 0 && err.has_configured, "429 names the limit");
}

static void test_links(void)
{
	struct box_err err;
	char *u = NULL;
	const char *base = "https://r.example.com/v2/a/tags/list";

	box_err_init(&err);
	is_int(box_registry_next_link(base, "</v2/a/tags/list?last=b&n=2>; rel=\"next\"", &u, &err), 0, "a relative next link");
	is_str(u, "https://r.example.com/v2/a/tags/list?last=b&n=2", "  resolved against the base");
	free(u);
	is_int(box_registry_next_link(base, "<https://other.example.com/x>; rel=next", &u, &err), 0, "an absolute link");
	is_str(u, "https://other.example.com/x", "  kept (the caller checks the origin)");
	free(u);
	is_int(box_registry_next_link(base, "</prev>; rel=\"prev\", </n2>; title=\"t\"; rel=\"last next\"", &u, &err), 0,
	       "next among several links and rel values");
	is_str(u, "https://r.example.com/n2", "  the right one");
	free(u);
	is_int(box_registry_next_link(base, "</prev>; rel=\"prev\"", &u, &err), 0, "no next link");
	ok(u == NULL, "  gives NULL");
	is_int(box_registry_next_link(base, NULL, &u, &err), 0, "no Link header");
	ok(u == NULL, "  gives NULL");
	static const char *bad[] = { "/no/brackets; rel=next", "</x; rel=next", "</x>; rel=\"next", "</x> rel=next",
				     "</a b>; rel=next", NULL };
	for (int i = 0; bad[i]; i++) {
		box_err_init(&err);
		ok(box_registry_next_link(base, bad[i], &u, &err) == -1 && err.code == BOX_E_INVALID && !u,
		   "malformed link \"%s\" refused", bad[i]);
	}
}

static void test_config(void)
{
	struct box_err err;
	char *up = NULL;
	/* "box:pw" and "other:x" */
	const char *cfg = "{\"auths\": {\"https://index.docker.io/v1/\": {\"auth\": \"b3RoZXI6eA==\"},"
		"\"http://127.0.0.1:5000/v2/\": {\"auth\": \"Ym94OnB3\"},"
		"\"reg.example.com\": {\"auth\": \"Ym94OnB3\"},"
		"\"nocolon.example.com\": {\"auth\": \"Ym94\"},"
		"\"badb64.example.com\": {\"auth\": \"***\"}}}";

	box_err_init(&err);
	is_int(box_registry_config_auth(cfg, strlen(cfg), "127.0.0.1:5000", &up, &err), 0, "config lookup by URL key");
	is_str(up, "box:pw", "  decoded");
	free(up);
	is_int(box_registry_config_auth(cfg, strlen(cfg), "REG.example.com", &up, &err), 0, "lookup by bare host");
	is_str(up, "box:pw", "  decoded");
	free(up);
	is_int(box_registry_config_auth(cfg, strlen(cfg), "127.0.0.1:5001", &up, &err), 0, "another port");
	ok(up == NULL, "  has no entry");
	ok(box_registry_config_auth(cfg, strlen(cfg), "nocolon.example.com", &up, &err) == -1 &&
	   err.code == BOX_E_INVALID && !up, "auth without ':' refused");
	ok(box_registry_config_auth(cfg, strlen(cfg), "badb64.example.com", &up, &err) == -1 &&
	   err.code == BOX_E_INVALID && !up, "bad base64 refused");
	ok(box_registry_config_auth("{", 1, "x", &up, &err) == -1 && !up, "bad JSON refused");
	is_int(box_registry_config_auth("{\"auths\": []}", 13, "x", &up, &err), 0, "auths not an object");
	ok(up == NULL, "  no entry");
	is_int(box_registry_config_auth("{\"credsStore\": \"desktop\"}", 25, "x", &up, &err), 0, "no auths");
	ok(up == NULL, "  no entry");
}

static void test_operations_refuse_bad_input(void)
{
	struct box_registry r;
	struct box_err err;
	struct box_buf b = BOX_BUF_INIT(100);
	char d[BOX_REGISTRY_DIGEST_MAX], t[BOX_REGISTRY_MEDIA_TYPE_MAX];
	cJSON *tags = NULL;
	int rc;

	box_err_init(&err);
	/* port 9 on loopback: nothing is sent, the arguments are refused first */
	is_int(box_registry_init(&r, "http://127.0.0.1:9", 0, &err), 0, "registry for argument checks");
	ok(box_registry_get_manifest(&r, "a", "bad tag", &b, d, t, &err) == -1 && err.code == BOX_E_INVALID,
	   "bad tag refused");
	ok(box_registry_get_manifest(&r, "A", "1", &b, d, t, &err) == -1 && err.code == BOX_E_INVALID,
	   "bad name refused");
	ok(box_registry_get_blob(&r, "a", "sha256:xyz", 1, 1, &err) == -1 && err.code == BOX_E_INVALID,
	   "bad digest refused");
	ok(box_registry_put_blob(&r, "a", 0, "sha256:00", 1, &err) == -1 && err.code == BOX_E_INVALID,
	   "bad digest refused on push");
	ok(box_registry_put_manifest(&r, "a", "1", "{}", 2, "bad type\r\n", &err) == -1 && err.code == BOX_E_INVALID,
	   "media type with CR LF refused");
	ok(box_registry_put_manifest(&r, "a", "sha256:0000000000000000000000000000000000000000000000000000000000000000",
				     "{}", 2, BOX_MT_OCI_MANIFEST, &err) == -1 && err.code == BOX_E_INTEGRITY,
	   "a manifest pushed by a digest it does not have is refused");
	ok(box_registry_tags(&r, "a//b", &tags, &err) == -1 && err.code == BOX_E_INVALID && !tags,
	   "bad name refused for tags");
	r.timeout_ms = 2000;
	rc = box_registry_tags(&r, "a", &tags, &err);
	ok(rc == -1 && err.code == BOX_E_IO && err.retryable,
	   "nothing listening: io_error, retryable (%s)", box_err_code_name(err.code));
	box_registry_release(&r);
	box_buf_release(&b);
}

int main(void)
{
	test_references();
	test_names();
	test_challenges();
	test_errors();
	test_links();
	test_config();
	test_operations_refuse_bad_input();
	return done_testing();
}
