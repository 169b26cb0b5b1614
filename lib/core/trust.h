/* The trust boundary: what the operator's policy lets the agent set in a --json request.
 *
 * Two parties use every binary. The operator owns the command line (flags, positional
 * arguments) and the policy file (--policy FILE or BOX_POLICY); the agent owns the --json
 * request on stdin. A policy is a JSON object with one section per binary
 * ({"box-run": {...}, "box-sandbox": {...}}); each section may hold
 *
 *   "agent": [FIELD...]  the request members the agent may set (replaces the built-in list)
 *   "grant": [FIELD...]  members added to that list
 *   "deny":  [FIELD...]  members taken from it
 *   "max":   {FIELD: N}  the highest value the agent may give an integer member
 *   "set":   {FIELD: V}  the operator's values, applied as if given as flags
 *   "sessions": {"names": [ID...], "prefix": P, "any": B, "create": B}  (box-sandbox)
 *
 * The built-in policy (share/policy/default.json, compiled in) is read first; the operator's
 * section is laid over it. A member that is in no list is the operator's alone: a request
 * that sets it is policy_denied, whatever its value. --trust-request lifts every rule but
 * the flag-only members (caps such as max_timeout_ms), which no request may ever set.
 */
#ifndef BOX_TRUST_H
#define BOX_TRUST_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include "err.h"
#include "json.h"

#define BOX_TRUST_FILE_MAX (1 << 20)
#define BOX_TRUST_SESSIONS_MAX 1024

/* The built-in policy text (share/policy/default.json). */
extern const char box_trust_default_policy[];

struct box_trust {
	const struct box_field *fields;  /* borrowed: the binary's request members */
	size_t nfields;
	unsigned char *agent;            /* per field: the agent may set it */
	int64_t *cap;                    /* per field: highest agent value, INT64_MAX for none */
	cJSON *set;                      /* owned: the operator's values, or NULL */
	cJSON *sessions;                 /* owned: the sessions member of the section, or NULL */
	int trust_request;               /* --trust-request: the request is the operator's */
	char source[512];                /* "built-in" or the policy file's path */
};

/*
 * The policy in force, in one object that box_canonical_json makes canonical: {"agent":
 * {FIELD: true...} (the members the agent may set: box_trust_may_set), "max": {FIELD: N} (the caps
 * below a member's own bound), "set": {...} (the operator's values, or absent), "sessions"
 * (as the section gives it, or absent), "trust_request": bool}. It describes what the built-in
 * policy and the operator's file make together, not either text. Returns a new object, or
 * NULL on OOM.
 */
cJSON *box_trust_effective(const struct box_trust *t);

/* Zeroes t; allocates nothing. */
void box_trust_init(struct box_trust *t);

/* Frees what t owns; t may be loaded again. */
void box_trust_release(struct box_trust *t);

/*
 * Loads the policy of binary (its section name, "box-run") over fields: the built-in policy,
 * then the file path (NULL: $BOX_POLICY when set and not empty; none otherwise). Every name
 * a section gives must be one of fields; a flag-only member cannot be granted. Returns 0, or
 * -1 with usage (a policy that does not parse or breaks these rules: the message names the
 * file, err->path the member, "$.box-run.grant[2]"), io_error or not_found (the file).
 */
int box_trust_load(struct box_trust *t, const char *binary, const struct box_field *fields,
		   const char *path, int trust_request, struct box_err *err);

/* 1 if the agent may set the member name, 0 if not (or it is no member). */
int box_trust_may_set(const struct box_trust *t, const char *name);

/*
 * The highest value the agent may give the integer member name: the operator's flag
 * max_NAME when flags holds one (borrowed, may be NULL), else the policy's cap, else the
 * member's own maximum.
 */
int64_t box_trust_cap(const struct box_trust *t, const char *name, const cJSON *flags);

/*
 * Checks the agent's request (already checked against the fields by box_json_check): every
 * member it sets must be one the agent may set and that neither the flags nor the policy's
 * "set" give (but "session", which box_trust_sessions_check binds), every integer at most
 * its cap. null members ask for the default and pass. Returns 0, or -1 with policy_denied and err->path
 * ("$.mount"); a value over its cap also carries limit, configured and unit.
 */
int box_trust_check(const struct box_trust *t, const cJSON *req, const cJSON *flags,
		    struct box_err *err);

/* Lays the policy's "set" values into req (replacing what the request said). 0 or -1 (OOM). */
int box_trust_apply(const struct box_trust *t, cJSON *req, struct box_err *err);

/*
 * The request schema the agent sees: full (a request schema object, borrowed) less every
 * property the agent may not set (and those the flags or the policy's "set" fix), each
 * integer's "maximum" lowered to its cap. Returns a new
 * object or NULL (OOM, err set).
 */
cJSON *box_trust_schema(const struct box_trust *t, const cJSON *full, const cJSON *flags,
			struct box_err *err);

/*
 * box-sandbox's session binding. operator_session is the session the command line (or the
 * policy's "set") names, NULL when none; name a session an agent request names. 1 if the
 * agent may reach it: --trust-request; with an operator session, that one alone; else one
 * of the policy's names, one with its prefix, or any with "any": true. 0 otherwise.
 */
int box_trust_session_ok(const struct box_trust *t, const char *operator_session,
			 const char *name);

/* 1 if the policy lets the agent name no session at all and so create one with a new id
 * ("any": true, or --trust-request). */
int box_trust_session_any(const struct box_trust *t);

/* 1 unless the policy says "create": false: an agent's request may create a session. */
int box_trust_may_create(const struct box_trust *t);

/*
 * Checks the sessions an agent's request names (agent: the request as sent, NULL when there
 * was none, which passes) against the binding (box_trust_session_ok): its "session" and
 * "from" members; a request that names no session while the command line names none may
 * only create one with a new id where "any" holds. Returns 0, or -1 with policy_denied and
 * the member's path.
 */
int box_trust_sessions_check(const struct box_trust *t, const cJSON *agent, const char *op,
			     const char *operator_session, struct box_err *err);

/* Drops from list (an array of objects with a "session" member) every session the agent may
 * not reach. */
void box_trust_filter_sessions(const struct box_trust *t, const char *operator_session,
			       cJSON *list);

#endif
