/* The provider table of box-sandbox: what a provider does for a session, whichever provider
 * it is. lib/sandbox/sandbox.c runs the session state machine of DESIGN.md over one of these tables
 * and never asks which it holds; lib/sandbox/local/nsbox.c (the local provider) and lib/sandbox/provider.c (the
 * plug-in executables box-provider-NAME) are the two implementations.
 *
 * Adding a provider: write a struct box_sbprov in its own module (every operation below, NULL
 * where it does not apply) and name it in box_sbprov_find's list in lib/sandbox/sandbox.c. Nothing
 * else in the state machine changes. */
#ifndef BOX_SBPROV_H
#define BOX_SBPROV_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "err.h"
#include "sbexec.h"
#include "sbstate.h"

/* What a provider sees of a session. All borrowed from the state machine, which holds the
 * session's lock for as long as a provider operation runs. */
struct box_sbprov_session {
	const char *dir;          /* $BOX_STATE_DIR/sandboxes */
	const char *sdir;         /* dir/<id>: the provider's files live there */
	const char *id;
	const char *libexec;      /* where box's helpers (and plug-ins first) are looked for */
	struct box_sbstate *rec;  /* the record; rec->provider_data is the provider's own,
				   * saved by the state machine after start */
	const char *const *env;   /* for start: the session's --env as NAME=VALUE (host values
				   * looked up now), NULL-terminated */
};

struct box_sbprov {
	const char *name;  /* "local"; NULL: the fallback that serves any other name */
	/* 1 when a replaced instance keeps what init made (the local provider rebuilds from
	 * the kept workspace); 0: init runs again on a new instance */
	int keeps_state;
	/* 1 when an exec that finds the instance gone (not_found) may replace it and retry */
	int retry_gone;
	/* 1 when it offers the tool socket of box-tool (create --tools, --describe --tools) */
	int tools;
	/* 1 when exec runs a command on a terminal (struct box_sbexec's tty: shell, exec --tty) */
	int tty;

	/* create, before anything exists: refuses what req asks of this provider that it does
	 * not offer (provider is the request's provider name) and adds what the provider keeps
	 * of the request to config (the record's provider_data.config, which holds "env"
	 * already). 0 or -1 with err. */
	int (*configure)(const cJSON *req, const char *provider, const char *libexec,
			 cJSON *config, struct box_err *err);
	/* A new instance for the session; fills rec->provider_data. create_req is the create
	 * request on the session's first start (the local provider copies its inputs in),
	 * NULL when a lost instance is replaced. 0 or -1 with err. */
	int (*start)(struct box_sbprov_session *s, const cJSON *create_req, struct box_err *err);
	/* BOX_SB_OBS_ABSENT, _RUNNING, _PAUSED, or -1 with err when it cannot tell. */
	int (*observe)(struct box_sbprov_session *s, struct box_err *err);
	int (*pause)(struct box_sbprov_session *s, struct box_err *err);
	int (*resume)(struct box_sbprov_session *s, struct box_err *err);
	/* Ends the instance, leaving the session's files; an absent instance is not an error. */
	int (*stop)(struct box_sbprov_session *s, struct box_err *err);
	/* For a session whose record cannot be read (s->rec is empty): ends whatever instance
	 * the session's directory notes, found through its own files, never by the session id
	 * alone (another state directory may have a session of the same id). NULL: nothing to
	 * find. */
	int (*stop_noted)(struct box_sbprov_session *s, struct box_err *err);
	/* Runs one command: 0 with *r (emptied by the caller) filled, or -1 with err
	 * (not_found: the instance is gone); *r is to be released either way. */
	int (*exec)(struct box_sbprov_session *s, const struct box_sbexec *x,
		    struct box_sbexec_result *r, struct box_err *err);
	/* The file API, paths as the request gives them. Each returns the result object
	 * without "ok" and "session" (the state machine adds them), or NULL with err. */
	cJSON *(*read)(struct box_sbprov_session *s, const char *path, struct box_err *err);
	cJSON *(*write)(struct box_sbprov_session *s, const char *path, const void *data,
			size_t n, struct box_err *err);
	cJSON *(*list)(struct box_sbprov_session *s, const char *path, struct box_err *err);
	/* cp-in (in 1: the host directory host to the guest directory path) and cp-out (in 0:
	 * path to host), each target absent or empty; the result object as for the file API.
	 * NULL: unsupported. */
	cJSON *(*copy)(struct box_sbprov_session *s, int in, const char *host, const char *path,
		       struct box_err *err);
	/* A snapshot of the session: the result object (with "digest"), or NULL with err. */
	cJSON *(*checkpoint)(struct box_sbprov_session *s, struct box_err *err);
	/* With the instance stopped: replaces the session's kept state by snapshot digest of
	 * session from (the session itself when from is its id). 0 or -1 with err. */
	int (*restore)(struct box_sbprov_session *s, const char *from, const char *digest,
		       struct box_err *err);
	/* Adds what status reports of this provider's instance to o (may be NULL). */
	void (*status)(const struct box_sbprov_session *s, cJSON *o);
	/* Network rules (allow_host, deny_host; either may be NULL): checks them (-1 with
	 * invalid_request and the member's path), then, when s is given, hands them to the
	 * session's instance (taken at its next connection). NULL: the provider has none, and
	 * network is unsupported. */
	int (*net_rules)(struct box_sbprov_session *s, const cJSON *allow, const cJSON *deny,
			 struct box_err *err);
	/* expose (on 1: a port of the host's loopback forwarded to guest_port of the guest,
	 * *host_port set) or unexpose (on 0). NULL: unsupported. */
	int (*expose)(struct box_sbprov_session *s, int on, int guest_port, int *host_port,
		      struct box_err *err);
	/* exec --background: starts x as the background command handle, reserved in the
	 * session's jobs directory dfd (lib/sandbox/sbjobs.h), whose watcher keeps its log and
	 * its end: 0 with *pid (in the guest), or -1 with err; *ran as for exec. NULL:
	 * unsupported. */
	int (*background)(struct box_sbprov_session *s, const struct box_sbexec *x, int dfd,
			  const char *handle, int *pid, int *ran, struct box_err *err);
	/* schedule: runs argv (x's cwd and env) every seconds while the instance runs; handle
	 * gets the schedule's id. NULL: unsupported. */
	int (*schedule)(struct box_sbprov_session *s, const struct box_sbexec *x,
			const cJSON *argv, int every, char *handle, struct box_err *err);
};

/* The two providers box has. */
extern const struct box_sbprov box_nsbox_provider;
extern const struct box_sbprov box_provider_plugin;

#endif
