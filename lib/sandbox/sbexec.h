/* One exec of box-sandbox, typed: the request every provider receives, the result it fills,
 * the pure classification of the limit that ended a command and of the error a result
 * stands for, and the one rendering of a result as JSON. */
#ifndef BOX_SBEXEC_H
#define BOX_SBEXEC_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "buf.h"
#include "err.h"

/* One command to run in the instance, in the one form every provider receives. */
struct box_sbexec {
	const char *const *argv;  /* NULL-terminated, argv[0] searched in the guest's PATH */
	const char *const *env;   /* NULL-terminated NAME=VALUE: the session's variables, then
				   * the exec's (a later one wins); the provider adds its base */
	const char *cwd;          /* guest path; NULL: /workspace */
	const char *stdin_data;   /* NULL: none */
	size_t stdin_len;
	/* 1 (and stdin_data NULL): the command's stdin is what stdin_fd gives until its end,
	 * streamed a chunk at a time (the local provider holds one 64 KiB chunk); a provider
	 * that cannot stream takes a bounded amount or refuses, never ignores it */
	int stdin_stream;
	int stdin_fd;             /* borrowed; read only when stdin_stream is 1 */
	int timeout_ms;           /* wall time, > 0 */
	int64_t cpu_ms;           /* <= 0: none */
	int64_t max_output_bytes; /* kept per stream in the result */
	/* called with each chunk of output as it arrives (stream 1 or 2); NULL: none */
	void (*on_output)(void *ctx, int stream, const char *p, size_t n);
	/* called with each network attempt of the command (a local sandbox's proxy); NULL:
	 * none */
	void (*on_network)(void *ctx, const cJSON *attempt);
	void *ctx;
	/* the provider's own: called at least once a second while the command runs; NULL: none */
	void (*on_tick)(void *tick_ctx);
	void *tick_ctx;
	int background;           /* 1: the command outlives the call (exec --background) */
	/* 1: the command runs on a pseudo-terminal of the guest's (its session leader, the
	 * terminal its controlling one) that the provider relays to the caller's stdin and
	 * stdout (lib/sandbox/sbtty.h); its output is then not kept in the result */
	int tty;
	unsigned short tty_rows, tty_cols;  /* the terminal's first size; 0: the default */
};

/* Which limit ended the command. */
enum box_sbexec_limit {
	BOX_SBEXEC_LIMIT_NONE,
	BOX_SBEXEC_LIMIT_TIMEOUT,
	BOX_SBEXEC_LIMIT_MEMORY,
	BOX_SBEXEC_LIMIT_PIDS,
	BOX_SBEXEC_LIMIT_CPU,
	BOX_SBEXEC_LIMIT_DISK,
	BOX_SBEXEC_LIMIT_OTHER,   /* a plug-in's own: its name in limit_name */
};

#define BOX_SBEXEC_NAME_MAX 32

/*
 * What an exec came to. Text members are UTF-8 (see box_sbexec_set_output). The owned
 * members (out, err, outputs, extra) are freed by box_sbexec_result_release.
 */
struct box_sbexec_result {
	int exited;                     /* 1: exit_code is valid (else it is null) */
	int exit_code;
	char signal[BOX_SBEXEC_NAME_MAX];  /* "SIGKILL"; "": null */
	struct box_buf out, err;        /* stdout and stderr as kept */
	int truncated, lossy;
	int64_t total_lines;            /* < 0: not known (not rendered) */
	char *full_output_path;         /* NULL: none */
	char *full_output_log;          /* the same log as the session's file API reads it
					 * ("/logs/exec-....log"); NULL: none */
	int full_output_truncated;
	int64_t duration_ms;            /* < 0: not known (not rendered) */
	enum box_sbexec_limit limit;
	char limit_name[BOX_SBEXEC_NAME_MAX];  /* of BOX_SBEXEC_LIMIT_OTHER */
	char limits_enforced_by[16];    /* "cgroup", "rlimit"; "": not rendered */
	char disk_limit[16];            /* what holds disk_bytes: "walk"; "": not rendered */
	char disk_unmeasured[200];      /* why a look at the disk could not finish (the exec
					 * then counts as over the limit); "": not rendered */
	cJSON *outputs;                 /* array of {"path","size","sha256"}; NULL: [] */
	struct box_err output_error;    /* why /output could not be listed (code BOX_OK: it
					 * could); then outputs are rendered as [] */
	cJSON *extra;                   /* members a plug-in added that box does not know,
					 * rendered after the others; NULL: none */
	int ran;                        /* 1: the command was started (set by the provider,
					 * also when the exec then fails); 0: it did not run
					 * and never will. Rendered by the state machine. */
};

/* Empties *r; allocates nothing. */
void box_sbexec_result_init(struct box_sbexec_result *r);

/* Frees the owned members; *r is empty afterwards. */
void box_sbexec_result_release(struct box_sbexec_result *r);

/* "timeout", "memory", "pids", "cpu", "disk" (limit_name for OTHER), NULL for NONE. */
const char *box_sbexec_limit_name(const struct box_sbexec_result *r);

/*
 * Keeps n bytes of a stream (1 stdout, 2 stderr) in the result: cut at a character
 * boundary, invalid UTF-8 replaced by U+FFFD (and lossy set). 0, or -1 with internal (OOM).
 */
int box_sbexec_set_output(struct box_sbexec_result *r, int stream, const char *p, size_t n,
			  struct box_err *err);

/* The line that stands for the middle of a stream cut by max_output_bytes: the bytes left
 * out, and where the whole output is (a path `read` takes, or "nowhere"). */
#define BOX_SBEXEC_CUT_MARKER "[box-sandbox: %lld bytes cut here; the whole output is in %s]"

/*
 * Keeps a stream that was cut in the result: head (cut at a character boundary), a newline
 * unless head is empty or ends with one, the marker line (BOX_SBEXEC_CUT_MARKER with
 * total - the bytes kept, and log, "nowhere" when NULL), a newline, then tail from its first
 * character boundary; otherwise as box_sbexec_set_output. 0, or -1 with internal (OOM).
 */
int box_sbexec_set_cut_output(struct box_sbexec_result *r, int stream, const char *head,
			      size_t hn, const char *tail, size_t tn, int64_t total,
			      const char *log, struct box_err *err);

/* What the host knows of a command when it has ended, for box_sbexec_classify. */
struct box_sbexec_facts {
	int timed_out;                 /* its wall deadline passed */
	enum box_sbexec_limit seen;    /* what the host saw while it ran (cpu, disk) or NONE */
	int disk_full;                 /* /workspace + /output at their bound at the end */
	int exited, code, sig;         /* how it ended (sig: the signal that killed it) */
	int64_t oom_kills;             /* OOM kills in its groups during the exec; < 0: unknown */
	int64_t pids_max_hits;         /* times its pids limit refused a fork; < 0: unknown */
};

/*
 * The limit that ended a command, a pure function: the timeout first, then what the host
 * saw while it ran, a full disk, SIGXCPU (cpu), SIGXFSZ (disk), an OOM kill (memory), a
 * refused fork of a command that did not succeed (pids); NONE otherwise.
 */
enum box_sbexec_limit box_sbexec_classify(const struct box_sbexec_facts *f);

/* The configured value of each limit, for the error object. */
struct box_sbexec_conf {
	int64_t timeout_ms, memory, pids, cpu_ms, disk_bytes;
};

/*
 * The error a result stands for, a pure function: timeout (limit "timeout_ms"),
 * limit_exceeded (limit "memory", "pids", "cpu" or "disk", with the configured value and its
 * unit; a plug-in's own limit without them), guest_error for a command killed by a signal
 * or exiting non-zero; for a command that succeeded, its output_error when /output could not
 * be listed (the command's own failure always comes first); e->code BOX_OK otherwise.
 * Fills an emptied *e.
 */
void box_sbexec_judge(const struct box_sbexec_result *r, const struct box_sbexec_conf *c,
		      struct box_err *e);

/* The result as JSON: exit_code, signal, stdout, stderr, truncated, total_lines,
 * full_output_path, full_output_log and full_output_truncated (when set), duration_ms, resource_limit,
 * limits_enforced_by, disk_limit and disk_unmeasured (when set), lossy (when true), outputs
 * ([] when output_error is set), output_error (when set), then the extra members. NULL on
 * OOM. */
cJSON *box_sbexec_to_json(const struct box_sbexec_result *r);

/*
 * Fills an emptied *r from a plug-in's exec answer: the members above of the right type
 * (an unknown resource_limit is kept as BOX_SBEXEC_LIMIT_OTHER; output_error an error object
 * as box_err_from_json reads it, an unknown code made internal), "ok", "session" and
 * "error" dropped, any other member kept in extra. Returns 0, or -1 with provider_error naming the
 * member of a wrong type; *r is then to be released all the same.
 */
int box_sbexec_from_json(struct box_sbexec_result *r, const cJSON *obj, struct box_err *err);

#endif
