#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "provider.h"
#include "tap.h"
#include "banned.h"

static char dir[64];

static void script(const char *name, const char *body)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/box-provider-%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return;
	fprintf(f, "#!/bin/sh\n%s\n", body);
	fclose(f);
	chmod(path, 0755);
}

static cJSON *mkop(const char *op, const char *session)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "op", op);
	cJSON_AddStringToObject(o, "session", session);
	return o;
}

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* 1 when pid is gone or a zombie nobody reaped yet (PID 1 of a container may not reap). */
static int dead(pid_t pid)
{
	char st[8];

	if (box_proc_stat_field(pid, 3, st, sizeof(st)) != 1)
		return 1;
	return st[0] == 'Z' || st[0] == 'X';
}

static pid_t read_pid(const char *file)
{
	char path[256], buf[32];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return (pid_t)strtol(buf, NULL, 10);
}

static int wait_dead(pid_t pid)
{
	int i;

	for (i = 0; i < 100 && !dead(pid); i++)
		usleep(20000);
	return dead(pid);
}

static void test_names(void)
{
	ok(box_provider_valid_name("local"), "name local");
	ok(!box_provider_valid_name("../sh"), "name with path refused");
	ok(!box_provider_valid_name("/bin/sh"), "absolute path refused");
	ok(!box_provider_valid_name("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), "33 chars refused");
	ok(box_provider_valid_op("read_file"), "op read_file");
	ok(!box_provider_valid_op("rm"), "op rm refused");
}

static void test_calls(void)
{
	struct box_err err;
	struct timespec t0;
	cJSON *op, *res;
	char path[8400], oldpath[4096];
	const char *p;
	pid_t child;

	op = mkop("status", "s1");

	box_err_init(&err);
	res = box_provider_call("echo", dir, op, 5000, &err);
	ok(res != NULL, "answering provider");
	ok(res && cJSON_IsTrue(cJSON_GetObjectItem(res, "ok")), "... ok true");
	ok(res && cJSON_GetObjectItem(res, "got") &&
	   strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(res, "got"), "op")->valuestring,
		  "status") == 0, "... it read the operation from stdin");
	cJSON_Delete(res);

	/* found on PATH when no libexec dir is given */
	p = getenv("PATH");
	snprintf(oldpath, sizeof(oldpath), "%s", p ? p : "/usr/bin:/bin");
	snprintf(path, sizeof(path), "/nonexistent:%s:%s", dir, oldpath);
	setenv("PATH", path, 1);
	box_err_init(&err);
	res = box_provider_call("echo", NULL, op, 5000, &err);
	ok(res != NULL, "provider found on PATH");
	cJSON_Delete(res);
	box_err_init(&err);
	ok(box_provider_find("echo", NULL, path, sizeof(path), &err) == 0 &&
	   strstr(path, dir) == path, "find returns the PATH entry");
	setenv("PATH", oldpath, 1);

	box_err_init(&err);
	ok(box_provider_call("missing", dir, op, 5000, &err) == NULL, "missing provider");
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");
	box_err_init(&err);
	ok(box_provider_call("../echo", dir, op, 5000, &err) == NULL, "name with a path");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	box_err_init(&err);
	ok(box_provider_call("noexec", dir, op, 5000, &err) == NULL, "non-executable file");
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");

	clock_gettime(CLOCK_MONOTONIC, &t0);
	box_err_init(&err);
	res = box_provider_call("sleepy", dir, op, 300, &err);
	ok(res == NULL, "sleeping provider");
	is_int(err.code, BOX_E_TIMEOUT, "... timeout");
	is_str(err.limit, "timeout_ms", "... limit timeout_ms");
	is_int(err.configured, 300, "... configured 300");
	ok(elapsed_ms(&t0) < 3000, "... within bound (%ld ms)", elapsed_ms(&t0));
	child = read_pid("sleepy.pid");
	ok(child > 0 && wait_dead(child), "... its forked child died too");

	clock_gettime(CLOCK_MONOTONIC, &t0);
	box_err_init(&err);
	res = box_provider_call("leaver", dir, op, 10000, &err);
	ok(res != NULL, "provider that leaves a child holding stdout");
	ok(elapsed_ms(&t0) < 5000, "... answer taken without waiting for the child (%ld ms)",
	   elapsed_ms(&t0));
	child = read_pid("leaver.pid");
	ok(child > 0 && wait_dead(child), "... its leftover child was killed");
	cJSON_Delete(res);

	box_err_init(&err);
	ok(box_provider_call("garbage", dir, op, 5000, &err) == NULL, "garbage output");
	is_int(err.code, BOX_E_PROVIDER, "... provider_error");
	box_err_init(&err);
	ok(box_provider_call("array", dir, op, 5000, &err) == NULL, "array output");
	is_int(err.code, BOX_E_PROVIDER, "... provider_error");
	box_err_init(&err);
	ok(box_provider_call("silent", dir, op, 5000, &err) == NULL, "no output");
	is_int(err.code, BOX_E_PROVIDER, "... provider_error");

	box_err_init(&err);
	ok(box_provider_call("exit3", dir, op, 5000, &err) == NULL, "exit 3 with stderr");
	is_int(err.code, BOX_E_PROVIDER, "... provider_error");
	ok(strstr(err.message, "status 3") != NULL, "... names the status: %s", err.message);
	ok(strstr(err.message, "disk on fire") != NULL, "... carries the stderr tail");
	ok(strstr(err.message, "early line") == NULL, "... only the tail");

	box_err_init(&err);
	ok(box_provider_call("okexit1", dir, op, 5000, &err) == NULL, "ok JSON but exit 1");
	is_int(err.code, BOX_E_PROVIDER, "... provider_error");

	box_err_init(&err);
	ok(box_provider_call("typed", dir, op, 5000, &err) == NULL, "typed error");
	is_int(err.code, BOX_E_NOT_FOUND, "... its code not_found");
	is_str(err.message, "no such pod", "... its message");
	is_int(err.retryable, 1, "... its retryable flag");

	box_err_init(&err);
	ok(box_provider_call("badtyped", dir, op, 5000, &err) == NULL, "ok false, no error");
	is_int(err.code, BOX_E_PROVIDER, "... provider_error");

	clock_gettime(CLOCK_MONOTONIC, &t0);
	box_err_init(&err);
	ok(box_provider_call("flood", dir, op, 20000, &err) == NULL, "flooding stdout");
	is_int(err.code, BOX_E_PROVIDER, "... provider_error");
	is_str(err.limit, "provider_stdout_bytes", "... limit provider_stdout_bytes");
	is_int(err.configured, BOX_PROVIDER_STDOUT_MAX, "... cap 16 MiB");
	ok(elapsed_ms(&t0) < 15000, "... stopped early");

	cJSON_Delete(op);
	op = mkop("rm", "s1");
	box_err_init(&err);
	ok(box_provider_call("echo", dir, op, 5000, &err) == NULL, "unknown op");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	is_str(err.path, "$.op", "... path $.op");
	cJSON_Delete(op);
	op = mkop("exec", "../s1");
	box_err_init(&err);
	ok(box_provider_call("echo", dir, op, 5000, &err) == NULL, "bad session id");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	cJSON_Delete(op);
}

static void test_env(void)
{
	const char *extra[] = { "FOO=bar", "KUBECONTEXT", NULL };
	const char *bad[] = { "MY_TOKEN=x", NULL };
	struct box_provider_opts o = { .libexec_dir = dir, .timeout_ms = 5000, .env = extra };
	struct box_err err;
	const char *env;
	cJSON *op = mkop("status", "s1"), *res;

	setenv("GITHUB_TOKEN", "ghp_secret", 1);
	setenv("OPENAI_API_KEY", "sk-secret", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "aws-secret", 1);
	setenv("DB_PASSWORD", "pw-secret", 1);
	setenv("UNRELATED_HOST_VAR", "host-only", 1);
	setenv("KUBECONTEXT", "prod", 1);
	setenv("HOME", "/home/tester", 1);

	box_err_init(&err);
	res = box_provider_run("env", op, &o, &err);
	env = res ? cJSON_GetStringValue(cJSON_GetObjectItem(res, "env")) : NULL;
	ok(env != NULL, "environment printed");
	if (!env)
		env = "";
	ok(strstr(env, "secret") == NULL, "no credential value reached the provider");
	ok(strstr(env, "GITHUB_TOKEN") == NULL, "GITHUB_TOKEN absent");
	ok(strstr(env, "OPENAI_API_KEY") == NULL, "*_API_KEY absent");
	ok(strstr(env, "AWS_") == NULL, "AWS_* absent");
	ok(strstr(env, "UNRELATED_HOST_VAR") == NULL, "other host variables absent");
	ok(strstr(env, "FOO=bar") != NULL, "explicit FOO=bar passed");
	ok(strstr(env, "KUBECONTEXT=prod") != NULL, "explicit NAME takes the host value");
	ok(strstr(env, "HOME=/home/tester") != NULL, "HOME passed");
	ok(strstr(env, "PATH=") != NULL, "PATH passed");
	cJSON_Delete(res);

	o.env = bad;
	box_err_init(&err);
	ok(box_provider_run("env", op, &o, &err) == NULL, "explicit credential variable");
	is_int(err.code, BOX_E_POLICY, "... policy_denied");
	cJSON_Delete(op);
}

int main(void)
{
	char body[512], cmd[128];

	signal(SIGPIPE, SIG_DFL);
	snprintf(dir, sizeof(dir), "/tmp/t-provider.XXXXXX");
	if (!mkdtemp(dir))
		return 99;
	script("echo", "read -r line\nprintf '{\"ok\":true,\"got\":%s}\\n' \"$line\"");
	snprintf(body, sizeof(body), "sleep 60 &\necho $! > %s/sleepy.pid\nsleep 60", dir);
	script("sleepy", body);
	snprintf(body, sizeof(body),
		 "sleep 60 &\necho $! > %s/leaver.pid\necho '{\"ok\":true}'", dir);
	script("leaver", body);
	script("garbage", "echo 'hello, not json'");
	script("array", "echo '[1,2]'");
	script("silent", "exit 0");
	script("exit3", "echo 'early line' >&2\nhead -c 2000 /dev/zero | tr '\\0' x >&2\n"
		"echo >&2\necho 'boom: disk on fire' >&2\nexit 3");
	script("okexit1", "echo '{\"ok\":true}'\nexit 1");
	script("typed", "echo '{\"ok\":false,\"error\":{\"code\":\"not_found\","
		"\"message\":\"no such pod\",\"retryable\":true}}'");
	script("badtyped", "echo '{\"ok\":false}'");
	script("flood", "exec yes");
	script("env", "printf '{\"ok\":true,\"env\":\"'\nenv | tr '\\n\"\\\\' '   '\n"
		"printf '\"}\\n'");
	script("noexec", "echo '{}'");
	snprintf(body, sizeof(body), "%s/box-provider-noexec", dir);
	chmod(body, 0644);

	test_names();
	test_calls();
	test_env();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		printf("# cleanup failed\n");
	return done_testing();
}
