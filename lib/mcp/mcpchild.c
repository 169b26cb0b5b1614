#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mcpchild.h"
#include "buf.h"
#include "json.h"
#include "tools.h"
#include "banned.h"

extern char **environ;

int box_mcp_env_init(struct box_mcp_env *e, const char *policy, struct box_err *err)
{
	size_t n = 0, k = 0, i;

	e->v = NULL;
	e->policy_var = NULL;
	while (environ[n])
		n++;
	e->v = calloc(n + 2, sizeof(*e->v));
	if (!e->v)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	for (i = 0; i < n; i++)
		if (strncmp(environ[i], "BOX_POLICY=", 11) != 0)
			e->v[k++] = environ[i];
	if (policy) {
		size_t len = strlen(policy) + 12;

		e->policy_var = malloc(len);
		if (!e->policy_var) {
			box_mcp_env_release(e);
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
		}
		box_fmt(e->policy_var, len, "BOX_POLICY=%s", policy);
		e->v[k++] = e->policy_var;
	}
	return 0;
}

void box_mcp_env_release(struct box_mcp_env *e)
{
	free(e->v);
	free(e->policy_var);
	e->v = NULL;
	e->policy_var = NULL;
}

static int pipe_pair(int p[2], struct box_err *err)
{
	if (pipe2(p, O_CLOEXEC) < 0)
		return box_err_sys(err, "pipe");
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int box_mcp_child_spawn(struct box_mcp_child *ch, char *const argv[], char *const envp[],
			const char *in, size_t inlen, struct box_err *err)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	int ip[2] = { -1, -1 }, op[2] = { -1, -1 }, rc;
	pid_t pid;

	ch->pid = 0;
	ch->out = -1;
	ch->helper = 0;
	if (pipe_pair(ip, err) < 0)
		return -1;
	if (pipe_pair(op, err) < 0) {
		close_fd(&ip[0]);
		close_fd(&ip[1]);
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, ip[0], 0);
	posix_spawn_file_actions_adddup2(&fa, op[1], 1);
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
				 POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawn(&pid, argv[0], &fa, &at, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close_fd(&ip[0]);
	close_fd(&op[1]);
	if (rc != 0) {
		close_fd(&ip[1]);
		close_fd(&op[0]);
		box_err_set(err, rc == ENOENT ? BOX_E_NOT_FOUND : BOX_E_IO, "cannot run %.200s: %s",
			    argv[0], strerror(rc));
		return -1;
	}
	ch->pid = pid;
	ch->out = op[0];
	/* a child that died before reading its request is seen at its stdout's end */
	box_write_all(ip[1], in, inlen);
	close_fd(&ip[1]);
	fcntl(ch->out, F_SETFL, fcntl(ch->out, F_GETFL) | O_NONBLOCK);
	return 0;
}

/*
 * The helper's cancellation: SIGTERM kills the process groups of its children (the tool that
 * box_tool_call started, a group leader) and ends the helper. Only async-signal-safe calls.
 */
static void helper_term(int sig)
{
	char buf[512];
	int fd;
	ssize_t n;

	(void)sig;
	fd = open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			char *p = buf;

			buf[n] = 0;
			while (*p) {
				long pid = 0;

				while (*p == ' ')
					p++;
				while (*p >= '0' && *p <= '9')
					pid = pid * 10 + (*p++ - '0');
				if (pid > 0) {
					kill((pid_t)-pid, SIGKILL);
					kill((pid_t)pid, SIGKILL);
				}
				if (*p && *p != ' ')
					break;
			}
		}
	}
	_exit(137);
}

static void __attribute__((noreturn)) helper_main(const struct box_tool *t, const cJSON *input,
						  const char *box_run, int out)
{
	struct box_tool_call_opts o = { 0 };
	struct sigaction sa;
	struct box_err err;
	cJSON *answer, *line = cJSON_CreateObject();
	char *s;
	size_t n;
	sigset_t none;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = helper_term;
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	box_err_init(&err);
	o.box_run = box_run;
	answer = t->lua_entry ? box_tool_call_lua(t, input, box_run, 0, 0, 0, &err)
			      : box_tool_call(t, input, &o, &err);
	if (!line)
		_exit(70);
	if (answer)
		cJSON_AddItemToObject(line, "answer", answer);
	else
		cJSON_AddItemToObject(line, "error", box_err_to_json(&err));
	s = box_json_line(line, &n);
	if (s)
		box_write_all(out, s, n);
	_exit(s ? 0 : 70);
}

int box_mcp_child_tool(struct box_mcp_child *ch, const struct box_tool *t, const cJSON *input,
		       const char *box_run, struct box_err *err)
{
	int op[2];
	pid_t pid;

	ch->pid = 0;
	ch->out = -1;
	ch->helper = 1;
	if (pipe_pair(op, err) < 0)
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(op[0]);
		close(op[1]);
		return box_err_sys(err, "fork");
	}
	if (pid == 0) {
		setpgid(0, 0);
		close(op[0]);
		helper_main(t, input, box_run, op[1]);
	}
	setpgid(pid, pid);
	close(op[1]);
	ch->pid = pid;
	ch->out = op[0];
	fcntl(ch->out, F_SETFL, fcntl(ch->out, F_GETFL) | O_NONBLOCK);
	return 0;
}

static int reap(pid_t pid, int wait_ms)
{
	struct timespec ts = { 0, 1000000 };
	int status = 0, i;

	for (i = 0; i < wait_ms; i++) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid || (w < 0 && errno != EINTR))
			return status;
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

void box_mcp_child_kill(struct box_mcp_child *ch)
{
	if (ch->pid > 0) {
		if (ch->helper) {
			/* the helper kills its tool's group, then ends */
			kill(ch->pid, SIGTERM);
			reap(ch->pid, 2000);
			kill(-ch->pid, SIGKILL);
		} else {
			kill(-ch->pid, SIGKILL);
			reap(ch->pid, 0);
		}
	}
	ch->pid = 0;
	close_fd(&ch->out);
}

int box_mcp_child_finish(struct box_mcp_child *ch)
{
	int status = 0;

	close_fd(&ch->out);
	if (ch->pid > 0) {
		while (waitpid(ch->pid, &status, 0) < 0 && errno == EINTR)
			;
		/* what the command left in its group (box-run's VM process, a daemon) goes too */
		kill(-ch->pid, SIGKILL);
	}
	ch->pid = 0;
	return status;
}
