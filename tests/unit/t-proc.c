#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "proc.h"
#include "tap.h"
#include "banned.h"

static char dir[64];

/* 1 when pid is gone or a zombie nobody reaped yet (PID 1 of a container may not reap). */
static int dead(pid_t pid)
{
	char st[8];

	if (box_proc_stat_field(pid, 3, st, sizeof(st)) != 1)
		return 1;
	return st[0] == 'Z' || st[0] == 'X';
}

static int wait_dead(pid_t pid)
{
	int i;

	for (i = 0; i < 100 && !dead(pid); i++)
		usleep(20000);
	return dead(pid);
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

static char *const plain_env[] = { "PATH=/usr/bin:/bin", NULL };

/* Runs `sh -c script` with input and the given caps; returns box_proc_run's value. */
static int sh(const char *script, const char *in, int timeout_ms, size_t max_stdout,
	      struct box_proc_result *r, struct box_err *err)
{
	const char *argv[] = { "/bin/sh", "-c", script, NULL };
	struct box_proc_opts o = {
		.argv = argv, .envp = plain_env, .in = in, .inlen = in ? strlen(in) : 0,
		.timeout_ms = timeout_ms, .max_stdout = max_stdout,
	};

	box_err_init(err);
	return box_proc_run(&o, r, err);
}

static void test_basic(void)
{
	struct box_proc_result r;
	struct box_err err;

	is_int(sh("cat; echo oops >&2; exit 3", "hello", 5000, 0, &r, &err), 0, "a run");
	is_str(r.out.data, "hello", "... stdin reached it and stdout came back");
	is_int(r.exited, 1, "... exited by itself");
	is_int(r.exit_code, 3, "... status 3");
	is_int(r.timed_out, 0, "... not timed out");
	is_str(r.err_tail, "oops", "... stderr tail");
	is_int(r.stderr_bytes, 5, "... stderr bytes counted");
	ok(r.duration_ms >= 0 && r.duration_ms < 5000, "... duration %lld ms",
	   (long long)r.duration_ms);
	box_proc_result_release(&r);

	is_int(sh("exit 0", NULL, 5000, 0, &r, &err), 0, "no input, no output");
	is_int(r.out.len, 0, "... empty stdout");
	is_int(r.exit_code, 0, "... status 0");
	box_proc_result_release(&r);
}

static void test_big_input(void)
{
	size_t n = 3u << 20, i;
	char *in = malloc(n + 1);
	struct box_proc_result r;
	struct box_err err;

	for (i = 0; i < n; i++)
		in[i] = (char)('a' + i % 26);
	in[n] = 0;
	is_int(sh("cat", in, 20000, 0, &r, &err), 0, "3 MiB through cat");
	ok(r.out.len == n && memcmp(r.out.data, in, n) == 0, "... came back whole");
	box_proc_result_release(&r);
	free(in);
}

static void test_env(void)
{
	const char *argv[] = { "/usr/bin/env", NULL };
	char *const env[] = { "A=1", "B=two words", NULL };
	struct box_proc_opts o = { .argv = argv, .envp = env, .timeout_ms = 5000 };
	struct box_proc_result r;
	struct box_err err;

	setenv("GITHUB_TOKEN", "ghp_secret", 1);
	box_err_init(&err);
	is_int(box_proc_run(&o, &r, &err), 0, "env run");
	is_str(r.out.data, "A=1\nB=two words\n", "... the environment is exactly envp");
	box_proc_result_release(&r);
	o.envp = NULL;
	is_int(box_proc_run(&o, &r, &err), 0, "env run, envp NULL");
	is_int(r.out.len, 0, "... empty environment");
	box_proc_result_release(&r);
}

static void test_env_build(void)
{
	const char *extra[] = { "FOO=bar", "HOME=/h", "FOO=baz", "KUBECONTEXT", NULL };
	const char *secret[] = { "OK=1", "MY_TOKEN=x", NULL };
	const char *badname[] = { "1X=1", NULL };
	const char *many[BOX_PROC_ENV_MAX + 2];
	struct box_proc_env e = { .n = 0 };
	struct box_err err;
	size_t i;

	setenv("KUBECONTEXT", "prod", 1);
	unsetenv("LANG");
	setenv("PATH", "/usr/bin:/bin", 1);
	box_err_init(&err);
	is_int(box_proc_env_build(&e, extra, "tool", &err), 0, "env build");
	is_int(e.n, 4, "... four variables");
	is_str(e.v[0], "FOO=bar", "... the first FOO wins");
	is_str(e.v[1], "HOME=/h", "... explicit HOME kept");
	is_str(e.v[2], "KUBECONTEXT=prod", "... a bare NAME takes the host value");
	is_str(e.v[3], "PATH=/usr/bin:/bin", "... PATH from the host");
	ok(e.v[4] == NULL, "... NULL-terminated, no LANG when unset");
	box_proc_env_release(&e);

	unsetenv("PATH");
	is_int(box_proc_env_build(&e, NULL, "tool", &err), 0, "env build without PATH");
	ok(e.n >= 1 && strcmp(e.v[0], "PATH=" BOX_PROC_DEFAULT_PATH) == 0, "... default PATH");
	box_proc_env_release(&e);
	setenv("PATH", "/usr/bin:/bin", 1);

	is_int(box_proc_env_build(&e, secret, "tool", &err), -1, "credential-shaped variable");
	is_int(err.code, BOX_E_POLICY, "... policy_denied");
	is_str(err.message, "credential-shaped variable MY_TOKEN is never passed to a tool "
	       "(name contains TOKEN)", "... message names it, the receiver and the rule");
	box_proc_env_release(&e);

	box_err_init(&err);
	is_int(box_proc_env_build(&e, badname, "tool", &err), -1, "bad variable name");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	box_proc_env_release(&e);

	for (i = 0; i <= BOX_PROC_ENV_MAX; i++)
		many[i] = "X=1";
	many[BOX_PROC_ENV_MAX + 1] = NULL;
	box_err_init(&err);
	is_int(box_proc_env_build(&e, many, "tool", &err), -1, "too many variables");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	box_proc_env_release(&e);

	/* a value is looked at too, the host's for a bare NAME (lib/core/credenv.h has the rules) */
	setenv("DEPLOY_URL", "https://bot:hunter2@git.example/", 1);
	{
		const char *byval[] = { "DEPLOY_URL", NULL };
		const char *lit[] = { "NOTE=ghp_0123456789abcdefghijklmnopqrstuvwxyz", NULL };

		box_err_init(&err);
		is_int(box_proc_env_build(&e, byval, "tool", &err), -1, "a host value with a password");
		is_str(err.message, "credential-shaped variable DEPLOY_URL is never passed to a tool "
		       "(value is a URL with a password)", "... the rule named");
		box_proc_env_release(&e);
		box_err_init(&err);
		is_int(box_proc_env_build(&e, lit, "tool", &err), -1, "a literal GitHub token");
		is_int(err.code, BOX_E_POLICY, "... policy_denied");
		box_proc_env_release(&e);
	}
	unsetenv("DEPLOY_URL");
}

static void test_fds(void)
{
	struct box_proc_result r;
	struct box_err err;
	int leak = open("/dev/null", O_RDONLY), leak2 = open("/dev/null", O_RDONLY);

	/* a plain loop: a glob or ls would list its own directory descriptor */
	is_int(sh("n=0; while [ $n -lt 256 ]; do [ -e /proc/$$/fd/$n ] && echo $n; "
		  "n=$((n+1)); done", NULL, 5000, 0, &r, &err), 0, "fd listing");
	is_str(r.out.data, "0\n1\n2\n", "... only fds 0-2 are open (fds %d and %d were not passed)",
	       leak, leak2);
	box_proc_result_release(&r);
	close(leak);
	close(leak2);
}

static void test_timeout(void)
{
	struct box_proc_result r;
	struct box_err err;
	char script[512];
	pid_t child, grandchild;

	snprintf(script, sizeof(script),
		 "(sleep 60 & echo $! > %s/gc.pid); sleep 60 & echo $! > %s/c.pid; "
		 "echo started; echo err >&2; wait", dir, dir);
	is_int(sh(script, NULL, 400, 0, &r, &err), 0, "a run that times out");
	is_int(r.timed_out, 1, "... timed_out");
	is_int(r.exited, 0, "... did not exit by itself");
	is_int(r.signal, SIGKILL, "... killed");
	ok(r.duration_ms >= 400 && r.duration_ms < 3000, "... after about 400 ms (%lld)",
	   (long long)r.duration_ms);
	is_str(r.out.data, "started\n", "... output captured so far kept");
	is_str(r.err_tail, "err", "... stderr tail kept");
	child = read_pid("c.pid");
	grandchild = read_pid("gc.pid");
	ok(child > 0 && wait_dead(child), "... its child died too");
	ok(grandchild > 0 && wait_dead(grandchild), "... and its orphaned grandchild");
	box_proc_result_release(&r);

	snprintf(script, sizeof(script), "sleep 60 & echo $! > %s/l.pid; echo '{}'", dir);
	is_int(sh(script, NULL, 10000, 0, &r, &err), 0, "a run that leaves a child on stdout");
	is_str(r.out.data, "{}\n", "... answer taken");
	ok(r.duration_ms < 5000, "... without waiting for the child (%lld ms)",
	   (long long)r.duration_ms);
	is_int(r.exit_code, 0, "... status 0");
	child = read_pid("l.pid");
	ok(child > 0 && wait_dead(child), "... the leftover child was killed");
	box_proc_result_release(&r);

	is_int(sh("echo fast", NULL, 10000, 0, &r, &err), 0, "a quick run");
	/* under valgrind (and a second test beside it) the parent's own work is slower, not its
	 * wait: a poll interval would still show as hundreds of ms */
	ok(r.duration_ms < (getenv("BOX_UNDER_VALGRIND") ? 200 : 40),
	   "... its end is seen at once (%lld ms)", (long long)r.duration_ms);
	box_proc_result_release(&r);
}

static void test_caps(void)
{
	struct box_proc_result r;
	struct box_err err;
	const char *argv[] = { "/bin/sh", "-c",
			       "echo early >&2; head -c 2000 /dev/zero | tr '\\0' x >&2; echo >&2; "
			       "echo 'the end' >&2; exit 1", NULL };
	struct box_proc_opts o = { .argv = argv, .envp = plain_env, .timeout_ms = 5000 };

	is_int(sh("exec yes", NULL, 20000, 1000, &r, &err), 0, "a flood");
	is_int(r.stdout_overflow, 1, "... stdout_overflow");
	ok(r.out.len <= 1000, "... at most the cap kept (%zu)", r.out.len);
	is_int(r.signal, SIGKILL, "... killed");
	ok(r.duration_ms < 10000, "... stopped early");
	box_proc_result_release(&r);

	box_err_init(&err);
	is_int(box_proc_run(&o, &r, &err), 0, "lots of stderr");
	is_int(r.stderr_bytes, 6 + 2000 + 1 + 8, "... all counted");
	is_int(strlen(r.err_tail), BOX_PROC_TAIL_MAX - 1,
	       "... tail of the last %d bytes less the final newline", BOX_PROC_TAIL_MAX);
	ok(strstr(r.err_tail, "x the end") != NULL, "... ends with the last line, newline as space");
	ok(strstr(r.err_tail, "early") == NULL, "... the start dropped");
	box_proc_result_release(&r);

	o.max_stderr = 5;
	is_int(box_proc_run(&o, &r, &err), 0, "stderr kept to 5 bytes");
	is_str(r.err_tail, " end", "... the last 5 bytes, trailing newline trimmed");
	box_proc_result_release(&r);
}

static void test_failures(void)
{
	const char *missing[] = { "/nonexistent/tool", NULL };
	const char *pwd[] = { "/bin/pwd", NULL };
	const char *kill_self[] = { "/bin/sh", "-c", "kill -TERM $$; sleep 5", NULL };
	struct box_proc_opts o = { .argv = missing, .envp = plain_env, .timeout_ms = 5000 };
	struct box_proc_result r;
	struct box_err err;
	char want[128];

	box_err_init(&err);
	is_int(box_proc_run(&o, &r, &err), -1, "missing executable");
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");
	ok(strncmp(err.message, "cannot run /nonexistent/tool: ", 30) == 0, "... %s", err.message);
	box_proc_result_release(&r);

	o.argv = pwd;
	o.cwd = dir;
	box_err_init(&err);
	is_int(box_proc_run(&o, &r, &err), 0, "cwd");
	snprintf(want, sizeof(want), "%s\n", dir);
	is_str(r.out.data, want, "... the child runs in it");
	box_proc_result_release(&r);
	o.cwd = "/nonexistent";
	box_err_init(&err);
	is_int(box_proc_run(&o, &r, &err), -1, "missing cwd");
	is_int(err.code, BOX_E_NOT_FOUND, "... not_found");
	box_proc_result_release(&r);

	o.cwd = NULL;
	o.argv = NULL;
	box_err_init(&err);
	is_int(box_proc_run(&o, &r, &err), -1, "no argv");
	is_int(err.code, BOX_E_INVALID, "... invalid_request");
	box_proc_result_release(&r);

	/* an ignored SIGTERM in the parent must not be inherited */
	signal(SIGTERM, SIG_IGN);
	o.argv = kill_self;
	box_err_init(&err);
	is_int(box_proc_run(&o, &r, &err), 0, "a child that signals itself");
	is_int(r.exited, 0, "... did not exit");
	is_int(r.signal, SIGTERM, "... SIGTERM, with the default disposition restored");
	box_proc_result_release(&r);
	signal(SIGTERM, SIG_DFL);
}

/* box_proc_spawn: a long-lived helper talked to on its pipes, ended with its whole group */
static void test_spawn(void)
{
	char script[512], buf[256];
	const char *argv[] = { "/bin/sh", "-c", script, NULL };
	struct box_proc_opts o = { .argv = argv, .envp = plain_env };
	struct box_proc_child c;
	struct box_err err;
	ssize_t n = 0;
	pid_t left;
	int i;

	snprintf(script, sizeof(script), "sleep 60 & echo $! > %s/s.pid; "
		 "while read line; do echo \"got $line\"; done", dir);
	box_err_init(&err);
	is_int(box_proc_spawn(&o, &c, &err), 0, "a helper is started");
	ok(c.pid > 0 && c.in >= 0 && c.out >= 0 && c.errfd >= 0, "... with its three pipes");
	ok(write(c.in, "one\n", 4) == 4, "... a request is written to it");
	for (i = 0; i < 200 && n <= 0; i++) {
		n = read(c.out, buf, sizeof(buf) - 1);
		if (n <= 0)
			usleep(10000);
	}
	buf[n > 0 ? n : 0] = 0;
	is_str(buf, "got one\n", "... and its answer read");
	left = read_pid("s.pid");
	box_proc_stop(&c);
	ok(dead(c.pid) || waitpid(c.pid, NULL, WNOHANG) < 0, "stop ends and reaps the helper");
	ok(left > 0 && wait_dead(left), "... and what it started in its group");
	ok(c.in < 0 && c.out < 0 && c.errfd < 0 && c.pidfd < 0, "... and closes its ends");

	o.stderr_inherit = 1;
	is_int(box_proc_spawn(&o, &c, &err), 0, "a helper that keeps the caller's stderr");
	is_int(c.errfd, -1, "... has no stderr pipe");
	box_proc_stop(&c);
	argv[0] = "/nonexistent/helper";
	is_int(box_proc_spawn(&o, &c, &err), -1, "a helper that cannot be run");
	ok(err.code == BOX_E_NOT_FOUND || err.code == BOX_E_IO, "... is not_found or io_error");
	is_int(c.pid, -1, "... and leaves nothing running");
}

/* die_with_parent: a caller killed mid-run takes its helper with it; without it the helper
 * goes on, and a hangup socket ends a run at once. */
static void run_in_caller(int die, const char *pidfile)
{
	const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
	char script[256];
	struct box_proc_opts o = { 0 };
	struct box_proc_result r;
	struct box_err err;

	snprintf(script, sizeof(script), "echo $$ > %s.tmp && mv %s.tmp %s; exec sleep 60",
		 pidfile, pidfile, pidfile);
	argv[2] = script;
	o.argv = argv;
	o.timeout_ms = 120000;
	o.die_with_parent = die;
	box_err_init(&err);
	(void)box_proc_run(&o, &r, &err);
	_exit(0);
}

static void test_die_with_parent(void)
{
	char pidfile[128];
	int die;

	for (die = 1; die >= 0; die--) {
		pid_t caller, helper = -1;
		int k;

		snprintf(pidfile, sizeof(pidfile), "%s/die%d.pid", dir, die);
		caller = fork();
		if (caller == 0)
			run_in_caller(die, pidfile);
		for (k = 0; k < 400 && (helper = read_pid(die ? "die1.pid" : "die0.pid")) <= 0; k++)
			usleep(25000);
		ok(helper > 0, "die_with_parent %d: the helper runs", die);
		kill(caller, SIGKILL);
		waitpid(caller, NULL, 0);
		if (die) {
			ok(helper > 0 && wait_dead(helper), "... and dies with its killed caller");
		} else {
			usleep(300000);
			ok(helper > 0 && !dead(helper), "... without it, the helper outlives its caller");
			if (helper > 0)
				kill(helper, SIGKILL);
		}
	}
}

/* box_proc_cancel_on_hangup: a run ends, its group killed, as soon as the client's socket
 * closes (a tool call whose exec ended). */
static void test_hangup(void)
{
	int sv[2], st[2];
	pid_t server, helper = -1;
	int64_t t0;
	int k, status = 0;
	char pidfile[128];

	snprintf(pidfile, sizeof(pidfile), "%s/hup.pid", dir);
	ok(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0 &&
	   pipe2(st, O_CLOEXEC) == 0, "a client's socket");
	server = fork();
	if (server == 0) {
		const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
		char script[512];
		struct box_proc_opts o = { 0 };
		struct box_proc_result r;
		struct box_err err;
		char verdict;

		close(sv[1]);
		close(st[0]);
		snprintf(script, sizeof(script), "sleep 60 & echo $! > %s.tmp && mv %s.tmp %s; wait",
			 pidfile, pidfile, pidfile);
		argv[2] = script;
		o.argv = argv;
		o.timeout_ms = 120000;
		box_err_init(&err);
		box_proc_cancel_on_hangup(sv[0]);
		verdict = box_proc_run(&o, &r, &err) == 0 && r.timed_out ? 't' : 'x';
		(void)!write(st[1], &verdict, 1);
		_exit(0);
	}
	close(sv[0]);
	close(st[1]);
	for (k = 0; k < 400 && (helper = read_pid("hup.pid")) <= 0; k++)
		usleep(25000);
	ok(helper > 0, "a run under a client socket");
	t0 = box_now_ms();
	close(sv[1]);
	{
		char v = 0;

		ok(read(st[0], &v, 1) == 1 && v == 't', "... ends as timed out when the client hangs up");
	}
	ok(box_now_ms() - t0 < 20000, "... at once (%lld ms)", (long long)(box_now_ms() - t0));
	ok(helper > 0 && wait_dead(helper), "... and what it started is killed with its group");
	close(st[0]);
	waitpid(server, &status, 0);
}

/* box_proc_stat_field / box_proc_stat_parse: the name between the first '(' and the last ')'
 * may hold anything a process can set (spaces, parentheses, newlines, a fake ") Z 1"). */
static void test_stat_field(void)
{
	static const char *const names[] = { "a b", ") Z 1 (", "x)", "((", "a\nb) R 9",
					      "))))))))))))))", " ", "" };
	char f[64], want[32];
	size_t i;
	int fds[2], ready[2];

	/* text: every kind of hostile name, then fields 1-5 and the last one */
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char text[256];
		int n = snprintf(text, sizeof(text), "4242 (%s) S 17 4242 99\n", names[i]);

		is_int(box_proc_stat_parse(text, (size_t)n, 1, f, sizeof(f)), 4, "pid of name %zu",
		       i);
		is_str(f, "4242", "pid value of name %zu", i);
		is_int(box_proc_stat_parse(text, (size_t)n, 2, f, sizeof(f)), (int)strlen(names[i]),
		       "name of name %zu", i);
		is_str(f, names[i], "name value of name %zu", i);
		box_proc_stat_parse(text, (size_t)n, 3, f, sizeof(f));
		is_str(f, "S", "state after name %zu", i);
		box_proc_stat_parse(text, (size_t)n, 4, f, sizeof(f));
		is_str(f, "17", "ppid after name %zu", i);
		is_int(box_proc_stat_parse(text, (size_t)n, 6, f, sizeof(f)), 2, "last field");
		is_str(f, "99", "last field's value (newline not part of it)");
		is_int(box_proc_stat_parse(text, (size_t)n, 7, f, sizeof(f)), -1,
		       "a field past the end is missing");
	}
	/* malformed text and sizes */
	is_int(box_proc_stat_parse("1 2 3", 5, 3, f, sizeof(f)), -1, "no parentheses");
	is_int(box_proc_stat_parse("1 )x( S", 7, 3, f, sizeof(f)), -1, "')' before '('");
	is_int(box_proc_stat_parse("1 (a)S 2", 8, 3, f, sizeof(f)), -1, "no space after ')'");
	is_int(box_proc_stat_parse("1 (a) S 2", 9, 0, f, sizeof(f)), -1, "field 0");
	is_int(box_proc_stat_parse("1 (a) S 12345", 13, 4, f, 5), -1, "does not fit");
	is_int(box_proc_stat_parse("1 (a) S 12345", 13, 4, f, 6), 5, "fits exactly");
	is_int(box_proc_stat_parse("1 (a) S 2  3", 12, 5, f, sizeof(f)), -1, "empty field");
	/* live processes named with each hostile name: state, ppid, pid, start time */
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		pid_t pid;
		char b;

		if (pipe(fds) < 0 || pipe(ready) < 0)
			break;
		pid = fork();
		if (pid == 0) {
			close(fds[1]);
			prctl(PR_SET_NAME, names[i]);
			(void)!write(ready[1], "n", 1);
			(void)!read(fds[0], &b, 1);
			_exit(0);
		}
		close(fds[0]);
		close(ready[1]);
		/* once the child has its name */
		ok(read(ready[0], &b, 1) == 1, "child named");
		close(ready[0]);
		box_proc_stat_field(pid, 2, f, sizeof(f));
		is_str(f, names[i], "live name name %zu", i);
		box_proc_stat_field(pid, 4, f, sizeof(f));
		snprintf(want, sizeof(want), "%ld", (long)getpid());
		is_str(f, want, "live ppid under name %zu", i);
		box_proc_stat_field(pid, 1, f, sizeof(f));
		snprintf(want, sizeof(want), "%ld", (long)pid);
		is_str(f, want, "live pid under name %zu", i);
		ok(box_proc_stat_field(pid, 22, f, sizeof(f)) > 0 && atoll(f) > 0,
		   "live start time under name %zu", i);
		ok(box_proc_stat_field(pid, 3, f, sizeof(f)) == 1 && strchr("RSD", f[0]),
		   "live state under name %zu", i);
		close(fds[1]);
		waitpid(pid, NULL, 0);
		is_int(box_proc_stat_field(pid, 3, f, sizeof(f)), -1, "gone: -1");
	}
	ok(box_proc_stat_field(0, 48, f, sizeof(f)) > 0 && atoll(f) > 0, "self: field 48");
}

/* std_fds in a child with each combination of fds 0-2 closed: each closed one becomes
 * /dev/null (read-only for 0, write-only for 1 and 2), an open one is left as it was, and no
 * later file opened gets 0-2. The child's exit status says which check failed. */
static int std_fds_child(int mask)
{
	struct stat null, st, before[3];
	int fd, keep, next;

	if (stat("/dev/null", &null) < 0)
		return 10;
	keep = open("/dev/zero", O_RDONLY);
	if (keep < 0 || dup2(keep, 0) < 0 || dup2(keep, 1) < 0 || dup2(keep, 2) < 0)
		return 11;
	if (keep > 2)
		close(keep);
	/* what each kept fd is (under valgrind, with the suite's stdin closed, fd 0 may stay
	 * valgrind's /dev/null whatever dup2 says): it must be the same after the call */
	for (fd = 0; fd <= 2; fd++)
		if (fstat(fd, &before[fd]) < 0)
			return 13;
	for (fd = 0; fd <= 2; fd++)
		if (mask & (1 << fd))
			close(fd);
	if (box_proc_std_fds() < 0)
		return 12;
	for (fd = 0; fd <= 2; fd++) {
		int fl = fcntl(fd, F_GETFL);

		if (fstat(fd, &st) < 0 || fl < 0)
			return 20 + fd;
		if ((mask & (1 << fd)) && (st.st_rdev != null.st_rdev ||
					   (fl & O_ACCMODE) != (fd == 0 ? O_RDONLY : O_WRONLY)))
			return 30 + fd;
		if (!(mask & (1 << fd)) && (st.st_dev != before[fd].st_dev ||
					    st.st_ino != before[fd].st_ino ||
					    st.st_rdev != before[fd].st_rdev))
			return 40 + fd;
	}
	next = open("/dev/null", O_RDONLY);
	return next > 2 ? 0 : 50;
}

static void test_std_fds(void)
{
	int mask;

	for (mask = 0; mask < 8; mask++) {
		pid_t pid = fork();
		int status = -1;

		if (pid == 0)
			_exit(std_fds_child(mask));
		waitpid(pid, &status, 0);
		ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		   "std_fds with closed set %d%d%d: /dev/null there, the others kept (status %d)",
		   mask & 1, (mask >> 1) & 1, (mask >> 2) & 1, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	}
	ok(box_proc_std_fds() == 0, "std_fds with all three open changes nothing");
}

int main(void)
{
	char cmd[128];

	signal(SIGPIPE, SIG_DFL);
	snprintf(dir, sizeof(dir), "/tmp/t-proc.XXXXXX");
	if (!mkdtemp(dir))
		return 99;
	test_basic();
	test_big_input();
	test_env();
	test_fds();
	test_timeout();
	test_caps();
	test_failures();
	test_env_build();
	test_spawn();
	test_die_with_parent();
	test_hangup();
	test_stat_field();
	test_std_fds();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		printf("# cleanup failed\n");
	return done_testing();
}
