#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipc.h"
#include "proc.h"
#include "json.h"
#include "toolsrv.h"
#include "tools.h"
#include "seal.h"
#include "tap.h"
#include "banned.h"

static char dir[64];
static char sock[PATH_MAX];

/* A server child answering connection after connection on path until it is killed; Lua tools
 * run by box_run (NULL: unsupported). */
static pid_t start_server(const char *path, struct box_toolset *set, int max_timeout_ms,
			  const char *box_run)
{
	struct box_tool_call_opts o = { .max_timeout_ms = max_timeout_ms, .box_run = box_run };
	struct box_err e;
	int lfd = box_toolsrv_listen(path, &e);
	pid_t pid;

	if (lfd < 0)
		return -1;
	/* a child that flushes what the parent printed would repeat TAP lines */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		for (;;)
			box_toolsrv_serve_one(lfd, set, &o);
	}
	close(lfd);
	return pid;
}

static void stop(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* A child that accepts one connection, reads a line and answers reply (NULL: nothing). */
static pid_t fake_server(const char *path, const char *reply)
{
	struct box_err e;
	int lfd = box_ipc_listen(path, &e);
	pid_t pid;

	if (lfd < 0)
		return -1;
	/* a child that flushes what the parent printed would repeat TAP lines */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char buf[4096];
		size_t got = 0;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		while (fd >= 0 && got < sizeof(buf)) {
			ssize_t n = read(fd, buf + got, sizeof(buf) - got);

			if (n <= 0 || memchr(buf + got, '\n', (size_t)n))
				break;
			got += (size_t)n;
		}
		if (fd >= 0 && reply && write(fd, reply, strlen(reply)) < 0)
			_exit(1);
		_exit(0);
	}
	close(lfd);
	return pid;
}

/*
 * Sends len bytes of text on a fresh connection (then shuts the writing side when shut) and
 * reads the reply until end of stream, at most ms. Returns the reply length, -1 on timeout
 * or failure.
 */
static ssize_t raw(const char *text, size_t len, int shut, char *reply, size_t max, int ms)
{
	struct box_err e;
	int fd = box_ipc_connect(sock, &e);
	int64_t deadline = box_now_ms() + ms;
	size_t got = 0;

	if (fd < 0)
		return -1;
	if (box_write_all(fd, text, len) < 0 || (shut && shutdown(fd, SHUT_WR) < 0)) {
		close(fd);
		return -1;
	}
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - box_now_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0 || got + 1 >= max) {
			close(fd);
			return -1;
		}
		n = read(fd, reply + got, max - 1 - got);
		if (n < 0) {
			close(fd);
			return -1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	reply[got] = 0;
	return (ssize_t)got;
}

/* The error code of a reply {"ok": false, "error": {"code": ...}}, or "(none)". */
static const char *code_of(const cJSON *reply)
{
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(reply, "ok");
	const char *c;

	if (!cJSON_IsFalse(ok))
		return "(none)";
	c = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(reply, "error"), "code"));
	return c ? c : "(none)";
}

/* Sends text (a JSON request) with box_toolsrv_request; the reply or NULL. */
static cJSON *request(const char *text, struct box_err *e)
{
	cJSON *req = box_json_parse(text, strlen(text), e);
	cJSON *res;

	if (!req)
		return NULL;
	box_err_init(e);
	res = box_toolsrv_request(sock, req, 5000, e);
	cJSON_Delete(req);
	return res;
}

/* Sends text and expects {"ok": false} with code (and err path when path is set). */
static void refused(const char *text, const char *code, const char *path, const char *what)
{
	struct box_err e;
	cJSON *r = request(text, &e);

	ok(r != NULL, "%s: a reply%s%s", what, r ? "" : ": ", r ? "" : e.message);
	is_str(code_of(r), code, "%s: %s", what, code);
	if (path)
		is_str(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			       cJSON_GetObjectItemCaseSensitive(r, "error"), "path")),
		       path, "%s: path %s", what, path);
	cJSON_Delete(r);
}

/* Sends raw bytes and expects a reply line with code. */
static void raw_refused(const char *text, size_t len, int shut, const char *code,
			const char *what)
{
	char reply[4096];
	struct box_err e;
	ssize_t n = raw(text, len, shut, reply, sizeof(reply), 3000);
	cJSON *r = n > 0 ? box_json_parse(reply, (size_t)n, &e) : NULL;

	ok(n > 0 && reply[n - 1] == '\n', "%s: one reply line", what);
	is_str(code_of(r), code, "%s: %s", what, code);
	cJSON_Delete(r);
}

static void test_listen(void)
{
	char path[PATH_MAX];
	struct box_err e;
	struct stat st;
	int fd, f;

	snprintf(path, sizeof(path), "%s/l.sock", dir);
	fd = box_toolsrv_listen(path, &e);
	ok(fd >= 0, "listen");
	f = fd >= 0 ? fcntl(fd, F_GETFD) : 0;
	ok(f > 0 && (f & FD_CLOEXEC), "... close-on-exec");
	ok(stat(path, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 07777) == 0600,
	   "... a socket of mode 0600");
	if (fd >= 0)
		close(fd);
	fd = box_toolsrv_listen(path, &e);
	ok(fd >= 0, "an old socket is replaced");
	if (fd >= 0)
		close(fd);
	unlink(path);
	snprintf(path, sizeof(path), "%s/file", dir);
	close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	box_err_init(&e);
	fd = box_toolsrv_listen(path, &e);
	is_int(fd, -1, "a regular file in the way");
	is_int(e.code, BOX_E_CONFLICT, "... conflict");
	if (fd >= 0)
		close(fd);
	unlink(path);
}

static void test_client_errors(void)
{
	char path[PATH_MAX];
	struct box_err e;
	cJSON *req = cJSON_Parse("{\"op\":\"list\"}"), *r;
	pid_t pid;
	int lfd;
	int64_t t0;

	snprintf(path, sizeof(path), "%s/nobody.sock", dir);
	box_err_init(&e);
	r = box_toolsrv_request(path, req, 1000, &e);
	ok(r == NULL, "nobody listening");
	is_int(e.code, BOX_E_IO, "... io_error");
	cJSON_Delete(r);

	/* a server that never accepts: the client gives up at its timeout */
	lfd = box_ipc_listen(path, &e);
	box_err_init(&e);
	t0 = box_now_ms();
	r = box_toolsrv_request(path, req, 200, &e);
	ok(r == NULL, "a server that never answers");
	is_int(e.code, BOX_E_TIMEOUT, "... timeout");
	ok(box_now_ms() - t0 < 3000, "... at the client's timeout");
	cJSON_Delete(r);
	if (lfd >= 0)
		close(lfd);

	pid = fake_server(path, "[1]\n");
	box_err_init(&e);
	r = box_toolsrv_request(path, req, 3000, &e);
	ok(r == NULL, "a reply that is not an object");
	is_int(e.code, BOX_E_INVALID, "... invalid_request");
	cJSON_Delete(r);
	waitpid(pid, NULL, 0);

	pid = fake_server(path, "zzz\n");
	box_err_init(&e);
	r = box_toolsrv_request(path, req, 3000, &e);
	ok(r == NULL, "a reply that is not JSON");
	is_int(e.code, BOX_E_INVALID, "... invalid_request");
	cJSON_Delete(r);
	waitpid(pid, NULL, 0);

	pid = fake_server(path, NULL);
	box_err_init(&e);
	r = box_toolsrv_request(path, req, 3000, &e);
	ok(r == NULL, "a server that closes without a reply");
	is_int(e.code, BOX_E_IO, "... io_error");
	cJSON_Delete(r);
	waitpid(pid, NULL, 0);

	pid = fake_server(path, "{\"ok\":true,\"n\":1}\ntrailing");
	box_err_init(&e);
	r = box_toolsrv_request(path, req, 3000, &e);
	ok(r != NULL && box_json_int_value(cJSON_GetObjectItem(r, "n"), 0) == 1,
	   "the reply is the first line");
	cJSON_Delete(r);
	waitpid(pid, NULL, 0);
	unlink(path);
	cJSON_Delete(req);
}

static void test_server(const struct box_toolset *set)
{
	static const char big[] = "{\"op\":\"call\",\"tool\":\"echo\",\"input\":{\"items\":"
				  "[9007199254740993,-9223372036854775808,9223372036854775807]}}";
	struct box_err e;
	cJSON *r, *want, *items;
	char reply[4096];
	ssize_t n;

	r = request("{\"op\":\"list\"}", &e);
	ok(r && cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")), "list: ok%s%s", r ? "" : ": ",
	   r ? "" : e.message);
	want = box_tools_describe(set, 0);
	ok(cJSON_Compare(cJSON_GetObjectItem(r, "tools"), want, 1),
	   "list: the tools of box_tools_describe(set, 0)");
	is_int(cJSON_GetArraySize(cJSON_GetObjectItem(r, "tools")), (int)set->n,
	       "list: every tool of the set");
	cJSON_Delete(want);
	cJSON_Delete(r);

	r = request("{\"op\":\"call\",\"tool\":\"echo\",\"input\":{\"items\":[1,2]}}", &e);
	ok(r && cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")), "call echo: ok%s%s", r ? "" : ": ",
	   r ? "" : e.message);
	items = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "got"),
				    "items");
	ok(cJSON_GetArraySize(items) == 2 &&
	   box_json_int_value(cJSON_GetArrayItem(items, 0), 0) == 1 &&
	   box_json_int_value(cJSON_GetArrayItem(items, 1), 0) == 2,
	   "call echo: result.got.items is [1,2]");
	cJSON_Delete(r);

	r = request(big, &e);
	items = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "got"),
				    "items");
	ok(box_json_int_value(cJSON_GetArrayItem(items, 0), 0) == INT64_C(9007199254740993),
	   "2^53+1 round-trips exactly through the client");
	ok(box_json_int_value(cJSON_GetArrayItem(items, 1), 0) == INT64_MIN, "... INT64_MIN");
	ok(box_json_int_value(cJSON_GetArrayItem(items, 2), 0) == INT64_MAX, "... INT64_MAX");
	cJSON_Delete(r);
	{
		char line[sizeof(big) + 1];

		memcpy(line, big, sizeof(big) - 1);
		line[sizeof(big) - 1] = '\n';
		n = raw(line, sizeof(line), 0, reply, sizeof(reply), 5000);
		ok(n > 0 && strstr(reply, "[9007199254740993,-9223372036854775808,"
				   "9223372036854775807]") != NULL,
		   "... and appears exactly in the reply text");
	}

	refused("{\"op\":\"call\",\"tool\":\"nope\",\"input\":{}}", "policy_denied", NULL,
		"an ungranted tool");
	refused("{\"op\":\"call\",\"tool\":\"../../bin/sh\",\"input\":{}}", "policy_denied", NULL,
		"a path for a tool name");
	refused("{\"op\":\"call\",\"input\":{}}", "policy_denied", NULL, "no tool named");
	refused("{\"op\":\"call\",\"tool\":\"echo\",\"input\":\"x\"}", "invalid_request", "$",
		"an input that is a string");
	refused("{\"op\":\"call\",\"tool\":\"echo\",\"input\":[1]}", "invalid_request", "$",
		"an input that is an array");
	refused("{\"op\":\"call\",\"tool\":\"echo\"}", "invalid_request", "$", "no input");
	refused("{\"op\":\"call\",\"tool\":\"echo\",\"input\":{\"items\":[\"a\"]}}",
		"invalid_request", "$.items[0]", "an input its schema refuses");
	refused("{\"op\":\"frob\"}", "invalid_request", NULL, "an unknown op");
	refused("{\"tool\":\"echo\",\"input\":{}}", "invalid_request", NULL, "no op");
	refused("{\"op\":\"call\",\"tool\":\"fail\",\"input\":{}}", "guest_error", NULL,
		"a tool that fails");

	raw_refused("not json\n", 9, 0, "invalid_request", "a request that is not JSON");
	raw_refused("[1]\n", 4, 0, "invalid_request", "a request that is not an object");
	raw_refused("\n", 1, 0, "invalid_request", "an empty line");
	raw_refused("{\"op\":\"li", 9, 1, "invalid_request", "a partial line, then end of input");

	n = raw("{\"op\":\"list\"}", 13, 1, reply, sizeof(reply), 3000);
	ok(n > 0 && strncmp(reply, "{\"ok\":true,\"tools\":[", 20) == 0,
	   "a whole request without its newline is answered at end of input");

	{
		/* a client that sends half a line and goes away must not stall the server */
		int fd = box_ipc_connect(sock, &e);

		if (fd >= 0) {
			if (write(fd, "{\"op\":", 6) != 6)
				printf("# short write\n");
			close(fd);
		}
		r = request("{\"op\":\"list\"}", &e);
		ok(r && cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")),
		   "the next client is served after one that went away mid-line");
		cJSON_Delete(r);
	}
}

static void test_timeout_cap(struct box_toolset *set)
{
	char path[PATH_MAX], saved[PATH_MAX];
	struct box_err e;
	pid_t pid;
	cJSON *r, *err;

	snprintf(path, sizeof(path), "%s/cap.sock", dir);
	pid = start_server(path, set, 150, NULL);
	memcpy(saved, sock, sizeof(saved));
	memcpy(sock, path, sizeof(sock));
	r = request("{\"op\":\"call\",\"tool\":\"sleep\",\"input\":{}}", &e);
	err = cJSON_GetObjectItem(r, "error");
	is_str(code_of(r), "timeout", "a tool past the server's cap: timeout");
	is_int(box_json_int_value(cJSON_GetObjectItem(err, "configured"), 0), 150,
	       "... at the cap (150 ms), not the tool's 300");
	cJSON_Delete(r);
	memcpy(sock, saved, sizeof(sock));
	stop(pid);
	unlink(path);
}

static void test_silent_client(void)
{
	struct box_err e;
	int fd;
	int64_t t0;
	cJSON *r, *req;

	if (!getenv("BOX_TEST_SLOW")) {
		tap_skip("a silent client costs BOX_TOOLSRV_IO_MS (10 s); set BOX_TEST_SLOW=1");
		return;
	}
	req = cJSON_Parse("{\"op\":\"list\"}");
	fd = box_ipc_connect(sock, &e);
	t0 = box_now_ms();
	r = box_toolsrv_request(sock, req, BOX_TOOLSRV_IO_MS + 5000, &e);
	ok(r && cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")) &&
	   box_now_ms() - t0 >= BOX_TOOLSRV_IO_MS - 500 &&
	   box_now_ms() - t0 < BOX_TOOLSRV_IO_MS + 3000,
	   "a silent client is dropped after BOX_TOOLSRV_IO_MS");
	cJSON_Delete(r);
	cJSON_Delete(req);
	if (fd >= 0)
		close(fd);
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

#define LUA_DIGEST "5555555555555555555555555555555555555555555555555555555555555555"

/* A box.lock of one Lua tool, greet, in a store under dir; the set, or NULL. */
static struct box_toolset *lua_set(void)
{
	char path[PATH_MAX], cmd[PATH_MAX + 16];
	struct box_toolset *set;
	struct box_err e;

	snprintf(path, sizeof(path), "%s/home", dir);
	setenv("BOX_HOME", path, 1);
	snprintf(path, sizeof(path), "%s/home/store/sha256/" LUA_DIGEST, dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
	if (system(cmd))
		return NULL;
	snprintf(path, sizeof(path), "%s/home/store/sha256/" LUA_DIGEST "/box-artifact.json", dir);
	if (write_file(path, "{\"name\": \"acme/greet\", \"version\": \"1.0.0\", \"kind\": \"tool\", "
		       "\"entry\": \"main.lua\", \"tools\": [{\"name\": \"greet\", "
		       "\"description\": \"Lua\", \"input_schema\": {\"type\": \"object\", "
		       "\"required\": [\"who\"], \"properties\": {\"who\": {\"type\": \"string\"}, "
		       "\"n\": {\"type\": \"integer\"}}}}]}") < 0)
		return NULL;
	snprintf(path, sizeof(path), "%s/home/store/sha256/" LUA_DIGEST "/main.lua", dir);
	if (write_file(path, "return {greeting = \"hello \" .. input.who, n = input.n}\n") < 0)
		return NULL;
	snprintf(path, sizeof(path), "%s/home/store", dir);
	seal_entry(path, LUA_DIGEST);
	snprintf(path, sizeof(path), "%s/box.lock", dir);
	if (write_file(path, "{\"lock_version\": 1, \"artifacts\": [{\"name\": \"acme/greet\", "
		       "\"version\": \"1.0.0\", \"digest\": \"sha256:" LUA_DIGEST "\", "
		       "\"kind\": \"tool\", \"source\": \"oci:/r\"}]}") < 0)
		return NULL;
	box_err_init(&e);
	set = box_tools_load(path, &e);
	if (!set)
		printf("# %s: %s\n", path, e.message);
	return set;
}

static void test_lua(void)
{
	const char *builddir = getenv("BOX_BUILDDIR");
	char path[PATH_MAX], saved[PATH_MAX], box_run[PATH_MAX];
	struct box_toolset *set;
	struct box_err e;
	pid_t pid;
	cJSON *r, *res;

	if (!builddir) {
		tap_skip("Lua tools need the build's box-run: BOX_BUILDDIR is not set (make check sets it)");
		return;
	}
	snprintf(box_run, sizeof(box_run), "%s/box-run", builddir);
	set = lua_set();
	ok(set != NULL, "a box.lock with a Lua tool loads");
	if (!set)
		return;
	memcpy(saved, sock, sizeof(saved));
	snprintf(path, sizeof(path), "%s/lua.sock", dir);
	memcpy(sock, path, sizeof(sock));

	pid = start_server(path, set, 10000, box_run);
	r = request("{\"op\":\"call\",\"tool\":\"greet\",\"input\":{\"who\":\"ada\","
		    "\"n\":9007199254740993}}", &e);
	res = cJSON_GetObjectItem(r, "result");
	ok(r && cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")), "a Lua tool through the socket: ok%s%s",
	   r ? "" : ": ", r ? "" : e.message);
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(res, "greeting")), "hello ada",
	       "... its answer, run by the given box-run");
	ok(box_json_int_value(cJSON_GetObjectItem(res, "n"), 0) == INT64_C(9007199254740993),
	   "... exact integers both ways");
	cJSON_Delete(r);
	refused("{\"op\":\"call\",\"tool\":\"greet\",\"input\":{\"who\":1}}", "invalid_request",
		"$.who", "a Lua tool's input its schema refuses");
	stop(pid);
	unlink(path);

	pid = start_server(path, set, 10000, NULL);
	r = request("{\"op\":\"call\",\"tool\":\"greet\",\"input\":{\"who\":\"ada\"}}", &e);
	is_str(code_of(r), "unsupported", "a Lua tool without a box-run: unsupported");
	ok(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "error"),
							     "message")) ?: "", "no box-run"),
	   "... the message says box-run was not found");
	cJSON_Delete(r);
	stop(pid);
	unlink(path);
	memcpy(sock, saved, sizeof(sock));
	box_tools_free(set);
}

/* 1 when pid is gone or a zombie (an orphan's zombie may wait for an init that does not reap),
 * waiting at most 10 s. */
static int gone(pid_t pid)
{
	int k;

	for (k = 0; k < 400; k++) {
		char st[8];

		if (box_proc_stat_field(pid, 3, st, sizeof(st)) != 1 || st[0] == 'Z' || st[0] == 'X')
			return 1;
		usleep(25000);
	}
	return 0;
}

/* box_toolsrv_serve_conn, as a sandbox's keeper uses it: one call in a child of its own,
 * ended with its tool's group when the caller hangs up; and the error of a set that did not
 * load. */
static void test_serve_conn(const char *fixtures)
{
	char file[PATH_MAX + 32], req[600], reply[4096];
	struct box_tool_call_opts o = { .max_timeout_ms = 600000 };
	struct box_toolset *slow;
	struct box_err err;
	int sv[2], k, status = -1;
	pid_t child, tool = -1, sleeper = -1;
	ssize_t n;
	FILE *f;

	snprintf(file, sizeof(file), "%s/slow.json", fixtures);
	box_err_init(&err);
	slow = box_tools_load(file, &err);
	ok(slow != NULL, "the slow tool loads: %s", slow ? "ok" : err.message);
	if (!slow)
		return;
	ok(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "a caller's connection");
	fflush(stdout);
	child = fork();
	if (child == 0) {
		close(sv[0]);
		box_proc_cancel_on_hangup(sv[1]);
		box_toolsrv_serve_conn(sv[1], slow, &o, NULL);
		_exit(0);
	}
	close(sv[1]);
	snprintf(req, sizeof(req), "{\"op\":\"call\",\"tool\":\"slow\",\"input\":{\"seconds\":300,"
		 "\"pidfile\":\"%s/slow.pid\"}}\n", dir);
	ok(write(sv[0], req, strlen(req)) == (ssize_t)strlen(req), "a call of a 300 s tool");
	snprintf(file, sizeof(file), "%s/slow.pid", dir);
	for (k = 0; k < 800 && tool <= 0; k++) {
		if ((f = fopen(file, "r"))) {
			if (fscanf(f, "%d %d", &tool, &sleeper) != 2)
				tool = -1;
			fclose(f);
		}
		if (tool <= 0)
			usleep(25000);
	}
	ok(tool > 0 && sleeper > 0, "... runs");
	close(sv[0]);
	for (k = 0; k < 400 && waitpid(child, &status, WNOHANG) == 0; k++)
		usleep(25000);
	ok(WIFEXITED(status), "the caller hangs up: the call ends at once");
	if (!WIFEXITED(status)) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	ok(tool > 0 && gone(tool), "... its tool is killed");
	ok(sleeper > 0 && gone(sleeper), "... and the tool's child with its group");

	ok(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "another connection");
	box_err_init(&err);
	box_err_set(&err, BOX_E_INTEGRITY, "the store entry changed");
	ok(write(sv[0], "{\"op\":\"list\"}\n", 14) == 14, "a request to a set that did not load");
	box_toolsrv_serve_conn(sv[1], NULL, NULL, &err);
	n = read(sv[0], reply, sizeof(reply) - 1);
	reply[n > 0 ? n : 0] = 0;
	ok(strstr(reply, "\"integrity_failed\"") && strstr(reply, "store entry changed"),
	   "... gets the load error: %s", reply);
	close(sv[0]);
	box_tools_free(slow);
}

int main(void)
{
	struct box_toolset *set;
	struct box_err err;
	char file[PATH_MAX + 32], fixtures[PATH_MAX], cmd[128];
	const char *src = getenv("BOX_SRCDIR");
	pid_t pid;

	snprintf(dir, sizeof(dir), "/tmp/t-toolsrv.XXXXXX");
	if (!mkdtemp(dir))
		return 99;
	/* without make check's BOX_SRCDIR, the sources are found next to this file */
	if (src)
		snprintf(file, sizeof(file), "%s/tests/fixtures/tools", src);
	else
		snprintf(file, sizeof(file), "%.*s/../fixtures/tools",
			 (int)(strrchr(__FILE__, '/') ? strrchr(__FILE__, '/') - __FILE__ : 1),
			 strrchr(__FILE__, '/') ? __FILE__ : ".");
	if (!realpath(file, fixtures)) {
		printf("Bail out! no fixtures at %s\n", file);
		return 1;
	}
	snprintf(file, sizeof(file), "%s/tools.json", fixtures);
	box_err_init(&err);
	set = box_tools_load(file, &err);
	if (!set) {
		printf("Bail out! %s: %s\n", file, err.message);
		return 1;
	}
	test_listen();
	test_client_errors();
	snprintf(sock, sizeof(sock), "%s/tool.sock", dir);
	pid = start_server(sock, set, 10000, NULL);
	ok(pid > 0, "server started");
	if (pid > 0) {
		test_server(set);
		test_silent_client();
	}
	stop(pid);
	test_timeout_cap(set);
	test_lua();
	test_serve_conn(fixtures);
	box_tools_free(set);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		printf("# cleanup failed\n");
	return done_testing();
}
