/* box-http: the HTTP helper that box-run starts on the first `http` call, so that box-run
 * itself never loads libcurl. One JSON request per line on stdin, one JSON result per line
 * on stdout. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "err.h"
#include "flags.h"
#include "http.h"
#include "json.h"
#include "policy.h"
#include "banned.h"
#include "proc.h"

#define LINE_MAX_BYTES (32 * 1024 * 1024)
#define MAX_BODY_LIMIT (1024 * 1024 * 1024)

static const char usage[] =
	"Usage: box-http [--allow RULE]... [--allow-private-network] [--max-body-bytes N]\n"
	"       box-http --help | --version\n"
	"\n"
	"Performs HTTP requests for box-run under an allow-list. Reads one JSON request per line\n"
	"on stdin: {\"method\",\"url\",\"headers\",\"body_base64\",\"timeout_ms\"}; writes one JSON\n"
	"result per line on stdout.\n"
	"\n"
	"  --allow RULE              allow [METHOD[,METHOD...] ]https://host[:port][/path],\n"
	"                            http://host[:port][/path] or host:port (repeatable)\n"
	"  --allow-private-network   allow loopback, private and link-local addresses\n"
	"  --max-body-bytes N        cap on a response body (default 10485760)\n"
	"  --help                    show this help\n"
	"  --version                 show the version\n";

/* Reads stdin line by line with a cap; lines past it are skipped to their end. */
struct reader {
	char chunk[65536];
	size_t off, len;
	int eof;
};

/* 1: a line in *line, 2: a line longer than the cap (discarded), 0: end of input, -1: error. */
static int read_line(struct reader *r, struct box_buf *line, struct box_err *err)
{
	int too_long = 0, any = 0;

	box_buf_truncate(line, 0);
	for (;;) {
		char *nl;
		size_t n;

		if (r->off == r->len) {
			ssize_t got;

			if (r->eof)
				return too_long ? 2 : any ? 1 : 0;
			got = read(0, r->chunk, sizeof(r->chunk));
			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0)
				return box_err_sys(err, "cannot read stdin");
			r->off = 0;
			r->len = (size_t)got;
			r->eof = got == 0;
			continue;
		}
		any = 1;
		nl = memchr(r->chunk + r->off, '\n', r->len - r->off);
		n = nl ? (size_t)(nl - (r->chunk + r->off)) : r->len - r->off;
		if (!too_long && box_buf_append(line, r->chunk + r->off, n, err) < 0) {
			if (err->code != BOX_E_LIMIT)
				return -1;
			too_long = 1;
			box_buf_truncate(line, 0);
		}
		r->off += n + (nl ? 1 : 0);
		if (nl)
			return too_long ? 2 : 1;
	}
}

static int blank(const struct box_buf *b)
{
	size_t i;

	for (i = 0; i < b->len; i++)
		if (!strchr(" \t\r", b->data[i]))
			return 0;
	return 1;
}

/* Writes one result line; exits quietly when the reader went away (EPIPE). */
static void emit(cJSON *obj)
{
	size_t n;
	char *s = obj ? box_json_line(obj, &n) : NULL;

	cJSON_Delete(obj);
	if (!s) {
		static const char oom[] =
			"{\"ok\":false,\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}\n";

		s = strdup(oom);
		n = sizeof(oom) - 1;
		if (!s)
			exit(8);
	}
	if (box_write_all(1, s, n) < 0) {
		if (errno != EPIPE)
			fprintf(stderr, "box-http: io_error: cannot write stdout: %s\n", strerror(errno));
		free(s);
		exit(errno == EPIPE ? 0 : 8);
	}
	free(s);
}

static int fail_usage(struct box_err *err)
{
	fprintf(stderr, "box-http: %s: %s\n", box_err_code_name(err->code), err->message);
	emit(box_err_result(err));
	return box_err_exit_status(err->code);
}

/* The flags, with the rules and words of lib/core/flags (the same as every box binary's). */
static int parse_args(int argc, char **argv, struct box_policy *pol, size_t *max_body,
		      int *done, struct box_err *err)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *val;
		char name[64];
		long long v;

		if (box_flag_split(a, name, sizeof(name), &val) < 0) {
			if (a[0] == '-' && a[1])
				return box_flag_unknown(err, a);
			return box_flag_unexpected(err, a);
		}
		if (strcmp(name, "help") == 0 || strcmp(name, "version") == 0 ||
		    strcmp(name, "allow-private-network") == 0) {
			if (val)
				return box_flag_takes_no_value(err, a);
			if (name[0] == 'a') {
				pol->allow_private = 1;
				continue;
			}
			if (name[0] == 'h')
				fputs(usage, stdout);
			else
				puts("box-http (box) " PACKAGE_VERSION);
			*done = 1;
			return 0;
		}
		if (strcmp(name, "allow") != 0 && strcmp(name, "max-body-bytes") != 0)
			return box_flag_unknown(err, a);
		if (!val) {
			if (i + 1 >= argc)
				return box_flag_missing_value(err, a);
			val = argv[++i];
		}
		if (name[0] == 'a') {
			if (box_policy_add(pol, val, err) < 0)
				return -1;
			continue;
		}
		if (box_flag_int("--max-body-bytes", val, 1, MAX_BODY_LIMIT, &v, err) < 0)
			return -1;
		*max_body = (size_t)v;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct box_policy pol;
	struct box_buf line = BOX_BUF_INIT(LINE_MAX_BYTES);
	struct reader *rd;
	struct box_err err;
	size_t max_body = BOX_HTTP_DEFAULT_MAX_BODY;
	int done = 0, r;

	if (box_proc_std_fds() < 0)
		return 8;
	box_err_init(&err);
	signal(SIGPIPE, SIG_IGN);
	if (parse_args(argc, argv, &pol, &max_body, &done, &err) < 0) {
		box_policy_release(&pol);
		return fail_usage(&err);
	}
	if (done) {
		box_policy_release(&pol);
		return fflush(stdout) == 0 ? 0 : 8;
	}
	rd = calloc(1, sizeof(*rd));
	if (!rd)
		return 8;
	while ((r = read_line(rd, &line, &err)) != 0) {
		if (r < 0) {
			fprintf(stderr, "box-http: %s\n", err.message);
			break;
		}
		if (r == 2) {
			box_err_limit(&err, BOX_E_LIMIT, "request_line_bytes", LINE_MAX_BYTES, "bytes",
				      "request line longer than %d bytes", LINE_MAX_BYTES);
			emit(box_err_result(&err));
			continue;
		}
		if (blank(&line))
			continue;
		emit(box_http_serve_json(&pol, line.data, line.len, max_body));
	}
	free(rd);
	box_buf_release(&line);
	box_policy_release(&pol);
	return r < 0 ? 8 : 0;
}
