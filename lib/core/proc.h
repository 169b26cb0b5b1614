/* Running a helper executable: bytes on stdin, bounded stdout, the tail of stderr, a wall
 * timeout that kills its whole process group, an exact environment, only fds 0-2. */
#ifndef BOX_PROC_H
#define BOX_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "buf.h"
#include "err.h"

#define BOX_PROC_DEFAULT_TIMEOUT_MS 30000
#define BOX_PROC_STDOUT_MAX ((size_t)16 << 20)  /* default cap on stdout */
#define BOX_PROC_TAIL_MAX 400                   /* bytes of stderr kept for messages */
#define BOX_PROC_ENV_MAX 64                     /* explicitly passed variables */
#define BOX_PROC_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

struct box_proc_opts {
	const char *const *argv;   /* NULL-terminated; argv[0] is the path executed as is
				    * (no PATH search) */
	char *const *envp;         /* the whole environment, NULL-terminated; NULL: empty */
	const char *cwd;           /* working directory of the child; NULL: inherited */
	const void *in;            /* written to stdin, then stdin is closed */
	size_t inlen;
	int timeout_ms;            /* wall time of the whole run; <= 0: the default */
	size_t max_stdout;         /* cap on stdout; 0: BOX_PROC_STDOUT_MAX */
	size_t max_stderr;         /* last bytes of stderr kept; 0 or more than
				    * BOX_PROC_TAIL_MAX: BOX_PROC_TAIL_MAX */
	int stderr_inherit;        /* 1: the child writes to the caller's stderr (a
				    * long-lived helper's diagnostics), not to a pipe */
	int die_with_parent;       /* 1: the child is killed when the thread that started it
				    * ends (PR_SET_PDEATHSIG SIGKILL): for a helper that must
				    * not outlive a killed caller (box-sbfiles under a restore);
				    * not for a multi-threaded caller */
};

/*
 * What a run came to. exited: the child ended by itself (exit_code valid) rather than by a
 * signal (signal valid; a child killed for its timeout or its flood reports SIGKILL).
 * out holds stdout (NUL-terminated; at most max_stdout bytes: on stdout_overflow the chunk
 * that passed the cap is dropped); err_tail the last bytes of stderr on one printable line
 * (newlines as spaces, control bytes as '?', trailing blanks trimmed); stderr_bytes counts
 * all of stderr. Release with box_proc_result_release.
 */
struct box_proc_result {
	int exited, exit_code, signal;
	int timed_out;
	int stdout_overflow;
	struct box_buf out;
	char err_tail[BOX_PROC_TAIL_MAX + 1];
	size_t stderr_bytes;
	int64_t duration_ms;
};

/* Ties every later box_proc_run of this process to a client: when the peer of the socket fd
 * hangs up (it closed, or died), the run ends as if its timeout passed (the child's whole
 * process group is killed, timed_out is set). For a process that serves one client, such as
 * a tool call of a sandbox's keeper. -1: none (the default). */
void box_proc_cancel_on_hangup(int fd);

/* Frees r->out; *r stays usable for another box_proc_run. */
void box_proc_result_release(struct box_proc_result *r);

/*
 * Runs o->argv[0] with o->argv and o->envp in a new process group, stdin a socket fed with
 * o->in, stdout and stderr pipes, every other descriptor closed, signal dispositions and mask
 * reset. Ends when the child has exited and both pipes are drained; anything left in its
 * process group when it exits is killed (SIGKILL), as is the whole group when the timeout
 * passes (timed_out) or stdout passes its cap (stdout_overflow). The child is always reaped.
 *
 * Returns 0 when the child ran, whatever its fate (check timed_out, stdout_overflow, exited,
 * exit_code), with *r filled (box_proc_result_release it, also on failure). Returns -1 with
 * err when it could not run: invalid_request (no argv), not_found / io_error (execve or chdir
 * failed in the child: "cannot run PATH: strerror"), io_error / internal for pipes, fork,
 * poll or memory.
 */
int box_proc_run(const struct box_proc_opts *o, struct box_proc_result *r, struct box_err *err);

/* A child started by box_proc_spawn: the leader of its own process group, and the caller's
 * ends of its stdin (a socket), stdout and stderr (non-blocking pipes; errfd -1 with
 * stderr_inherit). */
struct box_proc_child {
	pid_t pid;
	int in, out, errfd, pidfd;
	int status;   /* its wait status, once box_proc_stop reaped it */
};

/*
 * Starts a long-lived helper as box_proc_run starts its child (own process group, only fds
 * 0-2, reset signals, the exact environment; timeout, in and the caps of opts are not used):
 * the caller talks to it on c->in and c->out. Returns 0, or -1 with box_proc_run's errors
 * (nothing is left running then).
 */
int box_proc_spawn(const struct box_proc_opts *o, struct box_proc_child *c, struct box_err *err);

/* Kills c's whole process group, reaps the leader and closes the caller's ends. */
void box_proc_stop(struct box_proc_child *c);

/* A clean environment under construction: v is NULL-terminated, the strings are owned. */
struct box_proc_env {
	char *v[BOX_PROC_ENV_MAX + 4];
	size_t n;
};

/*
 * Fills *e (which must be empty: {.n = 0}) with the variables of extra, then PATH (the host's,
 * else BOX_PROC_DEFAULT_PATH), HOME and LANG (the host's, when set) unless extra named them.
 * extra is NULL or NULL-terminated "NAME=VALUE" (or "NAME": the host's value, skipped when
 * unset); of a name given twice the first wins. what ("provider", "tool") names the receiver
 * in messages. Returns 0, or -1 with invalid_request (more than BOX_PROC_ENV_MAX variables, a
 * bad name), policy_denied (a credential-shaped name or value, lib/core/credenv.h: "credential-shaped
 * variable X is never passed to a WHAT (RULE)") or internal (OOM); *e is then to be released all the same.
 */
int box_proc_env_build(struct box_proc_env *e, const char *const *extra, const char *what,
		       struct box_err *err);

/* Frees the strings; *e is empty afterwards. */
void box_proc_env_release(struct box_proc_env *e);

/*
 * Field n of a /proc/PID/stat text (len bytes, not necessarily NUL-terminated), numbered as
 * proc(5) does: 1 the pid, 2 the command name (without its parentheses), 3 the state, 4 the
 * parent's pid, ... The name is whatever lies between the first '(' and the last ')': it may
 * hold spaces, parentheses and newlines, and no later field holds a ')'. Copied to out
 * (NUL-terminated). Returns the field's length, or -1 when it is missing, the text is not a
 * stat line, or the field does not fit in size bytes.
 */
int box_proc_stat_parse(const char *text, size_t len, int n, char *out, size_t size);

/* box_proc_stat_parse of /proc/PID/stat (pid 0: /proc/self/stat); -1 as well when the
 * process is gone or its file cannot be read. */
int box_proc_stat_field(pid_t pid, int n, char *out, size_t size);

/*
 * Opens /dev/null on each of fds 0, 1 and 2 that is closed (stdin read-only, the others
 * write-only), so that no file, socket or lock the program opens later becomes its stdin,
 * stdout or stderr by being the lowest free number. Every box program calls it first.
 * Returns 0, or -1 when one could not be opened (the program then exits with status 8).
 */
int box_proc_std_fds(void);

#endif
