/* Plug-in sandbox providers: an executable box-provider-NAME run with one JSON operation on
 * stdin and answering one JSON result on stdout, under a timeout, output caps and a clean
 * environment. */
#ifndef BOX_PROVIDER_H
#define BOX_PROVIDER_H

#include <stddef.h>
#include <cjson/cJSON.h>
#include "err.h"

#define BOX_PROVIDER_NAME_MAX 32
#define BOX_PROVIDER_STDOUT_MAX ((size_t)16 << 20)
#define BOX_PROVIDER_STDERR_MAX ((size_t)64 << 10)
#define BOX_PROVIDER_STDIN_MAX ((size_t)16 << 20)  /* a streamed stdin given to a plug-in */
#define BOX_PROVIDER_ENV_MAX 64          /* explicitly passed variables */
#define BOX_PROVIDER_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

/* 1 if name matches [a-z0-9-]{1,32}, 0 otherwise. */
int box_provider_valid_name(const char *name);

/* 1 if op is one of create resume pause delete exec read_file write_file checkpoint status. */
int box_provider_valid_op(const char *op);

/*
 * Finds box-provider-NAME: first in libexec_dir (when not NULL), then in each directory of
 * $PATH (the default path when unset); the first regular executable file wins. name is a
 * provider name, never a path. Writes the path to out. Returns 0, or -1 with invalid_request
 * (bad name), not_found (no such provider) or invalid_request when the path does not fit.
 */
int box_provider_find(const char *name, const char *libexec_dir, char *out, size_t outsz,
		      struct box_err *err);

struct box_provider_opts {
	const char *libexec_dir;   /* searched before PATH; NULL: PATH only */
	const char *const *env;    /* NULL-terminated "NAME=VALUE" (or "NAME": the host's
				    * value when set) passed on top of PATH, HOME and LANG */
	int timeout_ms;            /* wall time of the whole run; <= 0: 30000 */
	size_t max_stdout;         /* 0: BOX_PROVIDER_STDOUT_MAX */
	size_t max_stderr;         /* kept for messages; 0: BOX_PROVIDER_STDERR_MAX */
};

/*
 * Runs one operation. op must be an object with "op" (see box_provider_valid_op) and
 * "session" (a valid session id); it is written to the provider's stdin as one line. The
 * provider runs in its own process group, with only fds 0-2 open and an environment of PATH,
 * HOME, LANG and the variables of o->env (credential-shaped ones are refused with
 * policy_denied). Anything left in its process group when it exits is killed.
 *
 * Returns the result object (the caller frees it with cJSON_Delete), or NULL with err:
 *   - invalid_request: bad name or op; not_found: no such provider;
 *   - timeout (limit "timeout_ms"): the run took longer, its process group was killed;
 *   - provider_error with limit "provider_stdout_bytes": stdout passed the cap (killed);
 *   - the provider's own typed error for {"ok": false, "error": {...}};
 *   - provider_error: exit status non-zero or a signal (message with the tail of stderr),
 *     stdout not a JSON object, or an "ok": false without a well-formed error;
 *   - io_error / internal for failures of pipes, fork or memory.
 */
cJSON *box_provider_run(const char *name, const cJSON *op, const struct box_provider_opts *o,
			struct box_err *err);

/* box_provider_run with only libexec_dir and timeout_ms set. */
cJSON *box_provider_call(const char *name, const char *libexec_dir, const cJSON *op,
			 int timeout_ms, struct box_err *err);

#endif
