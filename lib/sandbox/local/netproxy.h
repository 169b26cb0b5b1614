/* The network of a local sandbox: a proxy on the host, per session, that is the guest's only
 * way out. The guest keeps its own network namespace with loopback only; the proxy's listening
 * socket is made inside that namespace (127.0.0.1:BOX_NETPROXY_PORT) and served from the
 * host's, so HTTP_PROXY/HTTPS_PROXY/ALL_PROXY clients work and anything else gets no route.
 * It speaks HTTP CONNECT, plain HTTP forwarding (absolute-form requests) and SOCKS5 (domain
 * names), checks each attempt against the operator's rules, resolves the name itself, refuses
 * non-public addresses unless a rule lists the address, and connects to the address it
 * checked. Each attempt is one line of run/net.log. */
#ifndef BOX_NETPROXY_H
#define BOX_NETPROXY_H

#include <stdint.h>
#include <sys/types.h>
#include <cjson/cJSON.h>
#include "err.h"

#define BOX_NETPROXY_PORT 3128
#define BOX_NETPROXY_CONN_MAX 64              /* connections served at once */
#define BOX_NETPROXY_HEAD_MAX 16384           /* bytes of a request head */
#define BOX_NETPROXY_DENY_MAX 64              /* deny patterns */
#define BOX_NETPROXY_LOG_MAX ((int64_t)8 << 20) /* run/net.log stops growing here */
#define BOX_NETPROXY_ATTEMPTS_MAX 1000        /* attempts in one exec result */
#define BOX_NETPROXY_EXPOSE_MAX 16            /* guest ports exposed at once */
#define BOX_NETPROXY_EXECS_MAX 32             /* execs with their own listeners at once */

/*
 * Checks the operator's rules: allow is an array of lib/net/policy.h rules
 * ("[METHODS ]http[s]://host[:port][/path]" or "host:port", host may be "*.domain"), deny an
 * array of "host", "*.domain" or either with ":port". NULL arrays are empty. 0, or -1 with
 * invalid_request (path "$.allow_host[i]" / "$.deny_host[i]") or limit_exceeded.
 */
int box_netproxy_check_rules(const cJSON *allow, const cJSON *deny, struct box_err *err);

/* Writes the rules to SDIR/run/net-rules.json (atomically; a running proxy takes them for its
 * next connection). 0, or -1 with io_error. */
int box_netproxy_save_rules(const char *sdir, const cJSON *allow, const cJSON *deny,
			    struct box_err *err);

/*
 * For the keeper, once the holder sent its namespaces: makes the listening socket inside the
 * guest's network namespace (a child joins it through pidfd, or nsfds for an ordinary user)
 * and forks the proxy, which serves until the holder (pidfd) ends or its parent dies. Returns
 * the proxy's pid, or -1 (no network for the guest: it fails closed).
 */
pid_t box_netproxy_spawn(const char *sdir, int pidfd, const int *nsfds);

/*
 * Asks the running proxy of the session (SDIR/run/net.sock) to expose a guest port (expose 1:
 * a listener on the host's 127.0.0.1, any free port, in *host_port, relayed to the guest's
 * 127.0.0.1:guest_port; the same port again gives the same listener) or to close it (expose
 * 0; guest_port 0: all of them). 0, or -1 with io_error (no proxy answers: the instance is
 * not running) or limit_exceeded (limit "exposed_ports").
 */
int box_netproxy_control(const char *sdir, int expose, int guest_port, int *host_port,
			 struct box_err *err);

/*
 * How the body of one plain-HTTP request is framed, and how much of it has passed: the proxy
 * forwards exactly one request per connection, so nothing after its body reaches the origin
 * unchecked (no pipelined or smuggled second request).
 */
struct box_netproxy_body {
	int chunked;          /* Transfer-Encoding: chunked; else Content-Length (0 when absent) */
	int done;             /* the whole body has passed */
	uint64_t left;        /* Content-Length: bytes still to pass; chunked: of this chunk */
	int state;            /* chunked: where in the framing */
	int digits;           /* chunked: hex digits of the size line so far */
};

/*
 * Checks a request head s[0..n) (request line, header lines, the empty line) and fills *b from
 * it. Refused (-1 with why): a bare LF or CR, a control byte, obs-fold (a line starting with
 * a space or tab), a header name not a token or with space before its colon, Content-Length
 * twice (even equal) or not digits, Transfer-Encoding other than one "chunked", both
 * Content-Length and Transfer-Encoding, Transfer-Encoding in an HTTP/1.0 request.
 */
int box_netproxy_head_check(const char *s, size_t n, struct box_netproxy_body *b, char *why,
			    size_t wn);

/*
 * How many of the next bytes p[0..n) belong to the body (the rest is after it: never
 * forwarded); b advances past them, and b->done is set at the body's end. -1 when a chunked
 * body's framing is malformed (a bad size, a missing CRLF, a bare LF, a control byte).
 */
ssize_t box_netproxy_body_take(struct box_netproxy_body *b, const char *p, size_t n);

/*
 * For an exec that starts: listeners of its own in the guest (127.0.0.1 and [::1] at one
 * free port, in *port), so that its attempts are told from those of the session's other
 * execs running at the same time; the proxy logs each with tag (at most 23 bytes). They stay
 * while the returned descriptor is open (close it when the exec has ended: its processes
 * have all ended with it). The descriptor, or -1 with io_error (no proxy answers) or
 * limit_exceeded (BOX_NETPROXY_EXECS_MAX execs have theirs).
 */
int box_netproxy_exec_open(const char *sdir, int *port, char *tag, size_t tn,
			   struct box_err *err);

/* The size of SDIR/run/net.log now: where the attempts of an exec that starts now begin. */
int64_t box_netproxy_log_mark(const char *sdir);

/*
 * The attempts logged since mark (with tag: those on the exec's own listeners, and those on
 * the shared port BOX_NETPROXY_PORT, which cannot be told apart), as an array of {"host","port","kind","method","address",
 * "verdict" ("allowed"|"denied"|"error"),"reason","bytes_sent","bytes_received"}, at most
 * BOX_NETPROXY_ATTEMPTS_MAX. An allowed attempt whose connection is still open is waited for
 * up to wait_ms, then given with its bytes null. NULL when nothing was logged.
 */
cJSON *box_netproxy_attempts(const char *sdir, int64_t mark, const char *tag, int wait_ms);

#endif
