/* lib/net/http.c without a server: everything that must be refused before a connection is made.
 * The exchanges with a real server are in tests/box-http.bats. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"
#include "json.h"
#include "tap.h"
#include "banned.h"

static struct box_policy pol;

static void header_ok(const char *h)
{
	struct box_err err;

	box_err_init(&err);
	is_int(box_http_check_header(h, &err), 0, "header accepted: %s", h);
}

static void header_bad(const char *h, const char *what)
{
	struct box_err err;

	box_err_init(&err);
	is_int(box_http_check_header(h, &err), -1, "header refused: %s", what);
	is_int(err.code, BOX_E_INVALID, "header refused with invalid_request: %s", what);
}

static void test_headers(void)
{
	char big[20000];

	header_ok("X-Test: value");
	header_ok("Accept: */*");
	header_ok("Authorization: Bearer abc");
	header_ok("X-Empty:");
	header_ok("X-Tab: a\tb");
	header_ok("X-Utf8: caf\xc3\xa9");
	header_bad("X-Bad: a\r\nInjected: 1", "CR LF in value");
	header_bad("X-Bad: a\nInjected: 1", "LF in value");
	header_bad("X-Bad: a\rb", "CR in value");
	header_bad("X-Bad: a\x01", "control character in value");
	header_bad("X-Bad\r\nInjected: 1", "CR LF in name");
	header_bad("Bad Name: x", "space in name");
	header_bad("Bad(Name): x", "separator in name");
	header_bad(": x", "empty name");
	header_bad("NoColon", "no colon");
	header_bad("Host: evil.example", "Host");
	header_bad("host: evil.example", "host, lowercase");
	header_bad("Content-Length: 5", "Content-Length");
	header_bad("transfer-encoding: chunked", "Transfer-Encoding");
	header_bad(NULL, "NULL");
	memset(big, 'a', sizeof(big));
	memcpy(big, "X-Big: ", 7);
	big[sizeof(big) - 1] = 0;
	header_bad(big, "longer than 16 KiB");
}

/* Runs a request and returns the error code (BOX_OK on success). */
static enum box_code run(const char *method, const char *url, const char *const *headers,
			 size_t n_headers, const char *body, struct box_err *err)
{
	struct box_http_req req;
	struct box_http_resp resp;

	memset(&req, 0, sizeof(req));
	req.method = method;
	req.url = url;
	req.headers = headers;
	req.n_headers = n_headers;
	req.body = body;
	req.body_len = body ? strlen(body) : 0;
	req.timeout_ms = 2000;
	box_http_resp_init(&resp);
	box_err_init(err);
	box_http_request(&pol, &req, &resp, err);
	ok(err->code == BOX_OK ||
	   (resp.headers == NULL && resp.url == NULL && resp.body.data == NULL && resp.status == 0),
	   "response empty after a failure");
	box_http_resp_release(&resp);
	return err->code;
}

/* A TCP port on 127.0.0.1 that nobody listens on (bound, then closed). */
static int closed_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static void test_requests(void)
{
	static const char *const crlf[] = { "X-Ok: 1", "X-Bad: a\r\nHost: evil" };
	static const char *const host[] = { "Host: evil.example" };
	static const char *const many[BOX_HTTP_MAX_REQ_HEADERS + 1] = { [0 ... BOX_HTTP_MAX_REQ_HEADERS] = "X-A: b" };
	struct box_err err;
	char rule[64], url[128];
	int port = closed_port();

	box_policy_release(&pol);
	pol.allow_private = 0;
	is_int(run("GET", "http://unlisted.invalid/", NULL, 0, NULL, &err), BOX_E_POLICY,
	       "empty allow-list: policy_denied");
	ok(strstr(err.message, "unlisted.invalid") != NULL, "denial names the host: %s", err.message);

	box_policy_add(&pol, "http://allowed.invalid", &err);
	box_policy_add(&pol, "http://127.0.0.1:1", &err);
	box_policy_add(&pol, "http://169.254.169.254", &err);
	box_policy_add(&pol, "http://[::ffff:127.0.0.1]:1", &err);
	box_policy_add(&pol, "http://[64:ff9b::a9fe:a9fe]", &err);
	box_policy_add(&pol, "http://10.0.0.1", &err);
	is_int(pol.n, 6, "rules added");

	is_int(run("GET", "http://other.invalid/", NULL, 0, NULL, &err), BOX_E_POLICY, "unlisted host");
	is_int(run("GET", "http://allowed.invalid@other.invalid/", NULL, 0, NULL, &err), BOX_E_POLICY,
	       "userinfo URL");
	is_int(run("TRACE", "http://allowed.invalid/", NULL, 0, NULL, &err), BOX_E_INVALID, "TRACE");
	is_int(run("GET", "http://allowed.invalid/", NULL, 0, "body", &err), BOX_E_INVALID, "GET with a body");
	is_int(run("HEAD", "http://allowed.invalid/", NULL, 0, "body", &err), BOX_E_INVALID, "HEAD with a body");
	is_int(run("GET", "http://allowed.invalid/", crlf, 2, NULL, &err), BOX_E_INVALID, "CR LF header");
	is_int(run("GET", "http://allowed.invalid/", host, 1, NULL, &err), BOX_E_INVALID, "Host header");
	is_int(run("GET", "http://allowed.invalid/", many, BOX_HTTP_MAX_REQ_HEADERS + 1, NULL, &err),
	       BOX_E_LIMIT, "101 request headers");
	is_str(err.limit, "http_request_headers", "101 request headers: limit name");

	is_int(run("GET", "http://127.0.0.1:1/", NULL, 0, NULL, &err), BOX_E_POLICY, "loopback refused");
	ok(strstr(err.message, "loopback") != NULL, "loopback: reason given: %s", err.message);
	is_int(run("GET", "http://169.254.169.254/latest/meta-data/", NULL, 0, NULL, &err), BOX_E_POLICY,
	       "metadata address refused");
	ok(strstr(err.message, "metadata") != NULL, "metadata: reason given: %s", err.message);
	is_int(run("GET", "http://[::ffff:127.0.0.1]:1/", NULL, 0, NULL, &err), BOX_E_POLICY,
	       "v4-mapped loopback refused");
	is_int(run("GET", "http://[64:ff9b::a9fe:a9fe]/", NULL, 0, NULL, &err), BOX_E_POLICY,
	       "NAT64 metadata refused");
	is_int(run("GET", "http://10.0.0.1/", NULL, 0, NULL, &err), BOX_E_POLICY, "private address refused");
	/* .invalid never resolves (RFC 6761); without any DNS server the answer is "try again". */
	run("GET", "http://allowed.invalid/", NULL, 0, NULL, &err);
	ok(err.code == BOX_E_NOT_FOUND || (err.code == BOX_E_IO && err.retryable),
	   "unresolvable host: not_found (or retryable io_error without DNS): %s", err.message);

	if (port < 0) {
		tap_skip("no free loopback port");
		return;
	}
	snprintf(rule, sizeof(rule), "http://127.0.0.1:%d", port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	box_policy_add(&pol, rule, &err);
	pol.allow_private = 1;
	is_int(run("GET", url, NULL, 0, NULL, &err), BOX_E_IO, "allowed private address: connection tried");
	ok(err.retryable, "connection refused is retryable");
	pol.allow_private = 0;
	is_int(run("GET", url, NULL, 0, NULL, &err), BOX_E_POLICY, "same without allow_private: refused");
}

/* Runs one protocol line; returns the result and checks its shape. */
static cJSON *serve(const char *line)
{
	cJSON *r = box_http_serve_json(&pol, line, strlen(line), 0);

	ok(r != NULL, "result object for %s", line);
	return r;
}

static void serve_err(const char *line, const char *code, const char *path)
{
	cJSON *r = serve(line), *e;
	const char *got_path;

	ok(cJSON_IsFalse(cJSON_GetObjectItem(r, "ok")), "ok false: %s", line);
	e = cJSON_GetObjectItem(r, "error");
	is_str(box_json_get_str(e, "code", NULL), code, "code %s: %s", code, line);
	got_path = box_json_get_str(e, "path", NULL);
	if (path)
		is_str(got_path, path, "path %s", path);
	cJSON_Delete(r);
}

static void test_protocol(void)
{
	struct box_err err;

	box_policy_release(&pol);
	box_policy_add(&pol, "http://allowed.invalid", &err);
	pol.allow_private = 0;
	serve_err("", "invalid_request", NULL);
	serve_err("{not json", "invalid_request", NULL);
	serve_err("[1,2]", "invalid_request", "$");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"bogus\":1}", "invalid_request", "$.bogus");
	serve_err("{\"method\":\"GET\"}", "invalid_request", "$.url");
	serve_err("{\"url\":5}", "invalid_request", "$.url");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"method\":\"TRACE\"}", "invalid_request", "$.method");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"method\":7}", "invalid_request", "$.method");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"headers\":[]}", "invalid_request", "$.headers");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"headers\":{\"X-A\":1}}", "invalid_request", "$.headers.X-A");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"headers\":{\"X-A\":\"a\\r\\nHost: b\"}}",
		  "invalid_request", "$.headers.X-A");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"headers\":{\"Bad Name\":\"x\"}}",
		  "invalid_request", "$.headers.Bad Name");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"headers\":{\"A:B\":\"x\"}}",
		  "invalid_request", "$.headers.A:B");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"headers\":{\"Host\":\"x\"}}",
		  "invalid_request", "$.headers.Host");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"method\":\"POST\",\"body_base64\":\"!!\"}",
		  "invalid_request", "$.body_base64");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"body_base64\":3}", "invalid_request", "$.body_base64");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"timeout_ms\":0}", "invalid_request", "$.timeout_ms");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"timeout_ms\":\"5\"}", "invalid_request", "$.timeout_ms");
	serve_err("{\"url\":\"http://allowed.invalid/\",\"timeout_ms\":1.5}", "invalid_request", "$.timeout_ms");
	serve_err("{\"url\":\"http://evil.invalid/\"}", "policy_denied", NULL);
	serve_err("{\"url\":\"http://allowed.invalid@evil.invalid/\"}", "policy_denied", NULL);
}

int main(void)
{
	box_policy_init(&pol);
	test_headers();
	test_requests();
	test_protocol();
	box_policy_release(&pol);
	return done_testing();
}
