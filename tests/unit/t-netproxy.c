/* lib/sandbox/local/netproxy: the rules' checks, the rules file, and the exec's view of the
 * attempts log (the proxy itself is tested against real servers by box-sandbox-net.bats). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netproxy.h"
#include "buf.h"
#include "clock.h"
#include "tap.h"
#include "banned.h"

static enum box_code rules(const char *allow, const char *deny, char *path, size_t pn)
{
	cJSON *a = allow ? cJSON_Parse(allow) : NULL, *d = deny ? cJSON_Parse(deny) : NULL;
	struct box_err err;

	box_err_init(&err);
	box_netproxy_check_rules(a, d, &err);
	box_fmt(path, pn, "%s", err.path);
	cJSON_Delete(a);
	cJSON_Delete(d);
	return err.code;
}

static void test_rules(void)
{
	char path[64];
	char many[8192];
	size_t at = 0;
	int k;

	is_int(rules(NULL, NULL, path, sizeof(path)), BOX_OK, "no rules");
	is_int(rules("[\"pkgs.test:8080\", \"https://*.example.com\", \"GET,HEAD http://a.b/x\"]",
		     "[\"evil.test\", \"*.evil.test\", \"evil.test:443\", \"10.0.0.1\", \"[::1]:80\"]",
		     path, sizeof(path)), BOX_OK, "every form of rule");
	is_int(rules("[\"ok.test:1\", \"ftp://x\"]", NULL, path, sizeof(path)), BOX_E_INVALID,
	       "a bad allow rule");
	is_str(path, "$.allow_host[1]", "its path");
	is_int(rules("[\"nope nope\"]", NULL, path, sizeof(path)), BOX_E_INVALID, "a bad method list");
	is_int(rules("[3]", NULL, path, sizeof(path)), BOX_E_INVALID, "an allow rule not a string");
	is_str(path, "$.allow_host[0]", "its path");
	{
		static const char *const bad[] = { "a b", "*.", "x:0", "x:65536", "x:", ":80", "[::1",
						   "*.[::1]", "[zz]", "x:8o", "" };

		for (k = 0; k < (int)(sizeof(bad) / sizeof(bad[0])); k++) {
			char d[64];

			box_fmt(d, sizeof(d), "[\"ok.test\", \"%s\"]", bad[k]);
			is_int(rules(NULL, d, path, sizeof(path)), BOX_E_INVALID, "deny '%s' refused",
			       bad[k]);
			is_str(path, "$.deny_host[1]", "its path");
		}
	}
	at += (size_t)box_fmt(many + at, sizeof(many) - at, "[");
	for (k = 0; k <= BOX_NETPROXY_DENY_MAX; k++)
		at += (size_t)box_fmt(many + at, sizeof(many) - at, "%s\"h%d.test\"", k ? "," : "", k);
	box_fmt(many + at, sizeof(many) - at, "]");
	is_int(rules(NULL, many, path, sizeof(path)), BOX_E_LIMIT, "more than %d deny rules",
	       BOX_NETPROXY_DENY_MAX);
}

static void write_log(const char *dir, const char *text, int append)
{
	char p[4096];
	int fd;

	box_fmt(p, sizeof(p), "%s/run/net.log", dir);
	fd = open(p, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0600);
	(void)!write(fd, text, strlen(text));
	close(fd);
}

static void test_log(void)
{
	char dir[] = "/tmp/t-netproxy-XXXXXX", p[4096];
	struct box_buf b;
	struct box_err err;
	cJSON *arr, *a, *allow = cJSON_Parse("[\"x.test:80\"]");
	int64_t mark, t0;

	ok(mkdtemp(dir) != NULL, "a session directory");
	ok(box_netproxy_attempts(dir, 0, NULL, 0) == NULL, "no log: no attempts");
	box_err_init(&err);
	is_int(box_netproxy_save_rules(dir, allow, NULL, &err), 0, "rules saved");
	box_fmt(p, sizeof(p), "%s/run/net-rules.json", dir);
	box_buf_init(&b, 4096);
	ok(box_buf_read_file(&b, AT_FDCWD, p, &err) == 0 && box_buf_append(&b, "", 1, &err) == 0 &&
	   strcmp(b.data, "{\"allow\":[\"x.test:80\"],\"deny\":[]}") == 0, "the rules file");
	box_buf_release(&b);
	cJSON_Delete(allow);

	write_log(dir, "{\"id\":1,\"phase\":\"end\",\"kind\":\"http\",\"host\":\"old.test\",\"port\":80,"
		  "\"verdict\":\"denied\",\"bytes_sent\":0,\"bytes_received\":0}\n", 0);
	mark = box_netproxy_log_mark(dir);
	ok(mark > 0, "the mark is the log's size");
	write_log(dir, "{\"id\":2,\"phase\":\"open\",\"kind\":\"connect\",\"method\":\"CONNECT\","
		  "\"host\":\"x.test\",\"port\":443,\"address\":\"192.0.2.7\",\"verdict\":\"allowed\"}\n"
		  "{\"id\":3,\"phase\":\"end\",\"kind\":\"http\",\"host\":\"y.test\",\"port\":80,"
		  "\"verdict\":\"denied\",\"reason\":\"no allow rule matches y.test:80\","
		  "\"bytes_sent\":0,\"bytes_received\":0}\n"
		  "{\"id\":2,\"phase\":\"end\",\"bytes_sent\":10,\"bytes_received\":2000}\n"
		  "{\"id\":4,\"phase\":\"open\",\"kind\":\"socks5\",\"host\":\"z.test\",\"port\":22,"
		  "\"verdict\":\"allowed\"}\n"
		  "{\"id\":5,\"phase\":\"en", 1);
	t0 = box_now_ms();
	arr = box_netproxy_attempts(dir, mark, NULL, 300);
	ok(box_now_ms() - t0 >= 250, "an open connection is waited for (bounded)");
	is_int(cJSON_GetArraySize(arr), 3, "three attempts since the mark; a partial line is left");
	a = cJSON_GetArrayItem(arr, 0);
	ok(a && strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(a, "host")), "x.test") == 0 &&
	   cJSON_GetObjectItem(a, "bytes_received")->valuedouble == 2000 &&
	   cJSON_GetObjectItem(a, "bytes_sent")->valuedouble == 10 &&
	   !cJSON_GetObjectItem(a, "id") && !cJSON_GetObjectItem(a, "phase"),
	   "an allowed attempt gets its bytes from its end line; no id, no phase");
	a = cJSON_GetArrayItem(arr, 1);
	ok(a && strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(a, "verdict")), "denied") == 0,
	   "a denial in order");
	a = cJSON_GetArrayItem(arr, 2);
	ok(a && cJSON_IsNull(cJSON_GetObjectItem(a, "bytes_sent")) &&
	   cJSON_IsNull(cJSON_GetObjectItem(a, "bytes_received")),
	   "a connection still open has null bytes");
	cJSON_Delete(arr);
	/* the proxy started its log again: a mark past the end reads it from the start */
	write_log(dir, "{\"id\":9,\"phase\":\"end\",\"kind\":\"http\",\"host\":\"n.test\",\"port\":80,"
		  "\"verdict\":\"denied\",\"bytes_sent\":0,\"bytes_received\":0}\n", 0);
	arr = box_netproxy_attempts(dir, mark + 100000, NULL, 0);
	is_int(cJSON_GetArraySize(arr), 1, "a log started again is read from its start");
	cJSON_Delete(arr);
	/* at most BOX_NETPROXY_ATTEMPTS_MAX */
	{
		struct box_buf big;
		int k;

		box_buf_init(&big, (size_t)1 << 22);
		for (k = 0; k < BOX_NETPROXY_ATTEMPTS_MAX + 50; k++)
			box_buf_printf(&big, &err, "{\"id\":%d,\"phase\":\"end\",\"kind\":\"http\","
				       "\"host\":\"h.test\",\"port\":80,\"verdict\":\"denied\","
				       "\"bytes_sent\":0,\"bytes_received\":0}\n", k + 100);
		box_buf_append(&big, "", 1, &err);
		write_log(dir, big.data, 0);
		box_buf_release(&big);
		arr = box_netproxy_attempts(dir, 0, NULL, 0);
		is_int(cJSON_GetArraySize(arr), BOX_NETPROXY_ATTEMPTS_MAX, "at most %d attempts",
		       BOX_NETPROXY_ATTEMPTS_MAX);
		cJSON_Delete(arr);
	}
	box_fmt(p, sizeof(p), "rm -rf '%s'", dir);
	(void)!system(p);
}


/* concurrent execs: each sees the attempts on its own listeners, and the shared port's */
static void test_tags(void)
{
	char dir[] = "/tmp/t-netproxy-XXXXXX";
	cJSON *arr, *it;
	char hosts[256];
	size_t at = 0;
	struct box_err err;

	box_err_init(&err);
	ok(mkdtemp(dir) != NULL, "a session directory");
	is_int(box_netproxy_save_rules(dir, NULL, NULL, &err), 0, "its run directory");
	write_log(dir, "{\"id\":1,\"exec\":\"7.1\",\"phase\":\"open\",\"kind\":\"http\",\"host\":\"a.test\","
		  "\"port\":80,\"verdict\":\"allowed\"}\n"
		  "{\"id\":2,\"exec\":\"7.2\",\"phase\":\"open\",\"kind\":\"http\",\"host\":\"b.test\","
		  "\"port\":80,\"verdict\":\"allowed\"}\n"
		  "{\"id\":3,\"phase\":\"end\",\"kind\":\"http\",\"host\":\"shared.test\",\"port\":80,"
		  "\"verdict\":\"denied\",\"bytes_sent\":0,\"bytes_received\":0}\n"
		  "{\"id\":2,\"phase\":\"end\",\"bytes_sent\":5,\"bytes_received\":6}\n"
		  "{\"id\":1,\"phase\":\"end\",\"bytes_sent\":1,\"bytes_received\":2}\n"
		  "{\"id\":4,\"exec\":\"7.2\",\"phase\":\"end\",\"kind\":\"http\",\"host\":\"b2.test\","
		  "\"port\":80,\"verdict\":\"denied\",\"bytes_sent\":0,\"bytes_received\":0}\n", 0);
	arr = box_netproxy_attempts(dir, 0, "7.1", 0);
	cJSON_ArrayForEach(it, arr)
		at += (size_t)box_fmt(hosts + at, sizeof(hosts) - at, "%s%s ",
				      cJSON_GetStringValue(cJSON_GetObjectItem(it, "host")),
				      cJSON_GetObjectItem(it, "exec") ? "+exec" : "");
	is_str(hosts, "a.test shared.test ", "exec 7.1: its own and the shared port's, no tag shown");
	ok(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "bytes_received")->valuedouble == 2,
	   "its own end line");
	cJSON_Delete(arr);
	arr = box_netproxy_attempts(dir, 0, "7.2", 0);
	at = 0;
	hosts[0] = 0;
	cJSON_ArrayForEach(it, arr)
		at += (size_t)box_fmt(hosts + at, sizeof(hosts) - at, "%s ",
				      cJSON_GetStringValue(cJSON_GetObjectItem(it, "host")));
	is_str(hosts, "b.test shared.test b2.test ", "exec 7.2: its own");
	ok(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "bytes_received")->valuedouble == 6,
	   "its own end line, not the other's");
	cJSON_Delete(arr);
	arr = box_netproxy_attempts(dir, 0, NULL, 0);
	is_int(cJSON_GetArraySize(arr), 4, "without a tag: all of them");
	cJSON_Delete(arr);
	box_fmt(hosts, sizeof(hosts), "rm -rf '%s'", dir);
	(void)!system(hosts);
}

/* head_check on a head given with "|" for CRLF */
static int head(const char *h, struct box_netproxy_body *b, char *why, size_t wn)
{
	char t[1024];
	size_t k, n = 0;

	for (k = 0; h[k] && n + 2 < sizeof(t); k++) {
		if (h[k] == '|') {
			t[n++] = '\r';
			t[n++] = '\n';
		} else {
			t[n++] = h[k];
		}
	}
	t[n] = 0;
	why[0] = 0;
	return box_netproxy_head_check(t, n, b, why, wn);
}

static void test_frame(void)
{
	struct box_netproxy_body b;
	char why[200];
	size_t k;
	static const struct { const char *head, *why; } bad[] = {
		{ "POST / HTTP/1.1|Content-Length: 5|Transfer-Encoding: chunked||",
		  "both Content-Length and Transfer-Encoding" },
		{ "POST / HTTP/1.1|Transfer-Encoding: chunked|Content-Length: 5||",
		  "both Content-Length and Transfer-Encoding" },
		{ "POST / HTTP/1.1|Content-Length: 5|Content-Length: 5||", "Content-Length given twice" },
		{ "POST / HTTP/1.1|Content-Length: 5|content-length: 6||", "Content-Length given twice" },
		{ "POST / HTTP/1.1|Content-Length: +5||", "an invalid Content-Length" },
		{ "POST / HTTP/1.1|Content-Length: 5 5||", "an invalid Content-Length" },
		{ "POST / HTTP/1.1|Content-Length: 0x5||", "an invalid Content-Length" },
		{ "POST / HTTP/1.1|Content-Length: ||", "an invalid Content-Length" },
		{ "POST / HTTP/1.1|Content-Length: 1234567890123456789||", "an invalid Content-Length" },
		{ "POST / HTTP/1.1|Transfer-Encoding: gzip, chunked||",
		  "a Transfer-Encoding other than one \"chunked\"" },
		{ "POST / HTTP/1.1|Transfer-Encoding: chunked|Transfer-Encoding: chunked||",
		  "a Transfer-Encoding other than one \"chunked\"" },
		{ "POST / HTTP/1.1|Transfer-Encoding: xchunked||",
		  "a Transfer-Encoding other than one \"chunked\"" },
		{ "POST / HTTP/1.1|Transfer-Encoding : chunked||", "a malformed header name" },
		{ "POST / HTTP/1.1| Transfer-Encoding: chunked||", "a folded header line (obs-fold)" },
		{ "POST / HTTP/1.1|X: a|\tb||", "a folded header line (obs-fold)" },
		{ "POST / HTTP/1.1|: v||", "a malformed header name" },
		{ "POST / HTTP/1.1|X(y): v||", "a malformed header name" },
		{ "POST / HTTP/1.1|novalue||", "a malformed header name" },
		{ "POST / HTTP/1.1\nX: v||", "a bare LF in the request head" },
		{ "POST / HTTP/1.1|X: v\n|", "a bare LF in the request head" },
		{ "POST / HTTP/1.1|X: a\rb||", "a bare CR in the request head" },
		{ "POST / HTTP/1.1|X: a\x01||", "a control byte in the request head" },
		{ "POST / HTTP/1.1|X: a\x7f||", "a control byte in the request head" },
		{ "POST / HTTP/1.0|Transfer-Encoding: chunked||", "Transfer-Encoding in an HTTP/1.0 request" },
		{ "POST / HTTP/1.1|X: v|", "an unterminated request head" },
		{ "POST / HTTP/1.1||X: v||", "bytes after the request head's end" },
	};

	for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		is_int(head(bad[k].head, &b, why, sizeof(why)), -1, "head %zu refused", k);
		is_str(why, bad[k].why, "head %zu: its reason", k);
	}
	is_int(head("GET / HTTP/1.1|Host: a|X: caf\xc3\xa9\t|\r\n", &b, why, sizeof(why)), 0,
	       "a head without a body (obs-text and a tab in a value)");
	ok(b.done && !b.chunked, "it has no body");
	is_int(head("POST / HTTP/1.1|content-LENGTH:\t 12 ||", &b, why, sizeof(why)), 0,
	       "Content-Length with whitespace around it");
	ok(!b.done && b.left == 12, "12 bytes to come");
	is_int((int)box_netproxy_body_take(&b, "hello", 5), 5, "5 of them");
	is_int((int)box_netproxy_body_take(&b, "worldGET / HTTP/1.1\r\n\r\n", 23), 7,
	       "the last 7: what follows is not the body's");
	ok(b.done, "the body has ended");
	is_int((int)box_netproxy_body_take(&b, "x", 1), 0, "nothing after it");
	is_int(head("POST / HTTP/1.1|Transfer-Encoding:  Chunked ||", &b, why, sizeof(why)), 0,
	       "chunked");
	ok(b.chunked && !b.done, "a chunked body to come");
	{
		static const char body[] = "5;ext=\"v\"\r\nhello\r\n1A\r\n"
					   "abcdefghijklmnopqrstuvwxyz\r\n0\r\nT: v\r\n\r\n";
		size_t n = sizeof(body) - 1, at = 0;
		struct box_netproxy_body one;

		one = b;
		/* byte by byte, as the relay may see it */
		while (at < n && !one.done) {
			ssize_t r = box_netproxy_body_take(&one, body + at, 1);

			if (r != 1)
				break;
			at++;
		}
		ok(one.done && at == n, "a chunked body byte by byte ends at its last CRLF");
		is_int((int)box_netproxy_body_take(&b, "5;ext=\"v\"\r\nhello\r\n1A\r\n"
						   "abcdefghijklmnopqrstuvwxyz\r\n0\r\nT: v\r\n\r\n"
						   "GET /smuggled HTTP/1.1\r\n\r\n", n + 26),
		       (int)n, "whole: what follows it is not the body's");
		ok(b.done, "ended");
	}
	{
		static const char *const badb[] = { "zz\r\n", "\r\n", "5\nhello\r\n", "5\r\nhelloXX",
						    "5\r\nhello\n0\r\n\r\n", "0\r\n\n",
						    "1234567890abcdef0\r\n", "5 \r\nhello\r\n",
						    "-5\r\n", "0\r\nT: a\x01\r\n\r\n", "0\r\n T: a\r\n\r\n",
						    "5\r\nhello\r\n0\r\n\rX", "5;a\x01\r\n" };

		for (k = 0; k < sizeof(badb) / sizeof(badb[0]); k++) {
			struct box_netproxy_body c;

			head("POST / HTTP/1.1|Transfer-Encoding: chunked||", &c, why, sizeof(why));
			is_int((int)box_netproxy_body_take(&c, badb[k], strlen(badb[k])), -1,
			       "chunked body %zu malformed", k);
		}
	}
}

int main(void)
{
	(void)tap_skip;
	test_rules();
	test_log();
	test_frame();
	test_tags();
	return done_testing();
}
