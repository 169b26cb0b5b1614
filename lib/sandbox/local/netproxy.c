/* The session's egress proxy (netproxy.h). One thread per connection, each with bounded
 * buffers and waits, at most BOX_NETPROXY_CONN_MAX at once: a proxy this small needs neither
 * libcurl nor libmicrohttpd, only poll(). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#include "netproxy.h"
#include "atomic.h"
#include "buf.h"
#include "clock.h"
#include "ipc.h"
#include "json.h"
#include "policy.h"
#include "banned.h"

#define NSFD_USER 0
#define NSFD_NET 3
#define HEAD_MS 10000          /* the client's request head, or its SOCKS5 request */
#define CONNECT_MS 10000
#define DNS_MS 2000            /* one try of the test resolver */
#define IDLE_MS 600000         /* a relay with no byte either way for this long ends */
#define RELAY_BUF 131072
#define RELAY_PIPE 1048576     /* bytes in flight each way (a pipe's size) */
#define ADDRS_MAX 8
#define RULES_FILE_MAX 262144

/* ---- rules ---- */

struct deny_pat {
	int wildcard;
	char host[BOX_HOST_MAX + 1];
	int port;   /* 0: any */
};

struct rules {
	struct box_policy allow;
	struct deny_pat deny[BOX_NETPROXY_DENY_MAX];
	size_t ndeny;
};

/* "host", "*.domain", "[v6]", each with an optional ":port" */
static int parse_deny(const char *s, struct deny_pat *d)
{
	const char *colon, *end;
	size_t n;
	long port = 0;

	memset(d, 0, sizeof(*d));
	if (strncmp(s, "*.", 2) == 0) {
		d->wildcard = 1;
		s += 2;
	}
	if (s[0] == '[') {
		end = strchr(s, ']');
		if (!end || d->wildcard)
			return -1;
		if (box_policy_canon_v6(s + 1, (size_t)(end - s - 1), d->host, sizeof(d->host)) < 0)
			return -1;
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] && !colon)
			return -1;
	} else {
		colon = strrchr(s, ':');
		n = colon ? (size_t)(colon - s) : strlen(s);
		if (n == 0 || n > BOX_HOST_MAX)
			return -1;
		memcpy(d->host, s, n);
		d->host[n] = 0;
		if (box_policy_normalize_host(d->host) < 0)
			return -1;
	}
	if (colon) {
		char *e;

		errno = 0;
		port = strtol(colon + 1, &e, 10);
		if (errno || *e || e == colon + 1 || port < 1 || port > 65535)
			return -1;
	}
	d->port = (int)port;
	return 0;
}

static int rules_parse(const cJSON *allow, const cJSON *deny, struct rules *r,
		       struct box_err *err)
{
	const cJSON *e;
	int idx = 0;
	char path[40];

	box_policy_init(&r->allow);
	r->ndeny = 0;
	cJSON_ArrayForEach(e, allow) {
		box_fmt(path, sizeof(path), "$.allow_host[%d]", idx++);
		if (!cJSON_IsString(e) || box_policy_add(&r->allow, e->valuestring, err) < 0) {
			if (!cJSON_IsString(e))
				box_err_set(err, BOX_E_INVALID, "an allow rule must be a string");
			box_err_path(err, path);
			box_policy_release(&r->allow);
			return -1;
		}
	}
	idx = 0;
	cJSON_ArrayForEach(e, deny) {
		box_fmt(path, sizeof(path), "$.deny_host[%d]", idx++);
		if (r->ndeny >= BOX_NETPROXY_DENY_MAX) {
			box_err_limit(err, BOX_E_LIMIT, "deny_rules", BOX_NETPROXY_DENY_MAX, "rules",
				      "more than %d deny rules", BOX_NETPROXY_DENY_MAX);
		} else if (!cJSON_IsString(e) || parse_deny(e->valuestring, &r->deny[r->ndeny]) < 0) {
			box_err_set(err, BOX_E_INVALID, "invalid deny rule \"%.80s\": want HOST, "
				    "*.DOMAIN or either with :PORT",
				    cJSON_IsString(e) ? e->valuestring : "");
		} else {
			r->ndeny++;
			continue;
		}
		box_err_path(err, path);
		box_policy_release(&r->allow);
		return -1;
	}
	return 0;
}

int box_netproxy_check_rules(const cJSON *allow, const cJSON *deny, struct box_err *err)
{
	struct rules *r = calloc(1, sizeof(*r));

	if (!r)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	if (rules_parse(allow, deny, r, err) < 0) {
		free(r);
		return -1;
	}
	box_policy_release(&r->allow);
	free(r);
	return 0;
}

int box_netproxy_save_rules(const char *sdir, const cJSON *allow, const cJSON *deny,
			    struct box_err *err)
{
	char p[4096];
	cJSON *o = cJSON_CreateObject();
	char *text = NULL;
	int d, rc = -1;

	box_fmt(p, sizeof(p), "%s/run", sdir);
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		return box_err_sys(err, "cannot create %s", p);
	if (o) {
		cJSON_AddItemToObject(o, "allow", allow ? cJSON_Duplicate(allow, 1)
						   : cJSON_CreateArray());
		cJSON_AddItemToObject(o, "deny", deny ? cJSON_Duplicate(deny, 1) : cJSON_CreateArray());
		text = cJSON_PrintUnformatted(o);
	}
	cJSON_Delete(o);
	if (!text)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	d = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d < 0)
		box_err_sys(err, "cannot open %s", p);
	else
		/* readable by the proxy, which runs as nobody when box runs as root */
		rc = box_atomic_replace(d, "net-rules.json", text, strlen(text), 0644, err);
	if (d >= 0)
		close(d);
	free(text);
	return rc;
}

/* ---- the proxy's shared state ---- */

struct proxy {
	int dirfd;                 /* SDIR/run */
	int logfd;
	pthread_mutex_t mu;        /* guards what follows */
	struct rules rules;
	struct stat rules_st;      /* of the file the rules came from */
	int active;
	uint64_t next_id;
	struct sockaddr_in dns;    /* BOX_NET_DNS, the operator's test resolver; port 0: none */
	int factory;               /* makes sockets in the guest's namespace (guest_socket) */
	struct expose {
		int guest_port, host_port, lfd;
	} exposed[BOX_NETPROXY_EXPOSE_MAX];   /* lfd -1: free; the main thread's only */
	struct exec_port {
		int ctl, l[2];                 /* the exec's control connection, its listeners */
		char tag[24];
	} execs[BOX_NETPROXY_EXECS_MAX];      /* ctl -1: free; the main thread's only */
	uint64_t next_exec;
};

static void rules_reload(struct proxy *px)
{
	struct stat st;
	struct box_buf b;
	struct box_err err;
	cJSON *o;
	struct rules *fresh;
	int fd;

	if (fstatat(px->dirfd, "net-rules.json", &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (st.st_ino == px->rules_st.st_ino && st.st_mtim.tv_sec == px->rules_st.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == px->rules_st.st_mtim.tv_nsec && st.st_size == px->rules_st.st_size)
		return;
	fd = openat(px->dirfd, "net-rules.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	box_buf_init(&b, RULES_FILE_MAX);
	box_err_init(&err);
	o = NULL;
	if (box_buf_read_fd(&b, fd, &err) == 0 && box_buf_append(&b, "", 1, &err) == 0)
		o = cJSON_Parse(b.data);
	close(fd);
	box_buf_release(&b);
	fresh = calloc(1, sizeof(*fresh));
	/* rules that do not parse leave none: the proxy fails closed */
	if (fresh && (!o || rules_parse(cJSON_GetObjectItemCaseSensitive(o, "allow"),
					cJSON_GetObjectItemCaseSensitive(o, "deny"), fresh, &err) < 0))
		box_policy_init(&fresh->allow);
	if (fresh) {
		box_policy_release(&px->rules.allow);
		memcpy(&px->rules, fresh, sizeof(*fresh));
		free(fresh);
		px->rules_st = st;
	}
	cJSON_Delete(o);
}

/* ---- the log ---- */

static void log_attempt(struct proxy *px, cJSON *o)
{
	size_t n;
	char *line = box_json_line(o, &n);
	struct stat st;

	if (line && fstat(px->logfd, &st) == 0) {
		/* a log at its bound starts again: an exec whose mark is past the end reads it
		 * from the start (box_netproxy_attempts) */
		if (st.st_size + (off_t)n > BOX_NETPROXY_LOG_MAX)
			(void)!ftruncate(px->logfd, 0);
		(void)!write(px->logfd, line, n);
	}
	free(line);
}

/* ---- one connection ---- */

struct conn;
static void relay_copy(struct conn *c);

enum kind { K_CONNECT, K_HTTP, K_SOCKS };

struct conn {
	struct proxy *px;
	int cfd, sfd;
	uint64_t id;
	enum kind kind;
	char method[24];
	char host[BOX_HOST_MAX + 3];     /* lowercase; IPv6 in brackets */
	int port;
	int literal;                     /* host is an IP literal */
	char path[2048];                 /* plain HTTP: the path and query */
	char addr[INET6_ADDRSTRLEN + 2];
	char head[BOX_NETPROXY_HEAD_MAX + 1];
	size_t head_len, body_off;       /* bytes read, where the head ends */
	size_t pre;                      /* plain HTTP: bytes of the body read with the head */
	struct box_netproxy_body body;   /* plain HTTP: the one request's body */
	const char *end_reason;          /* why an allowed connection was cut, or NULL */
	char tag[24];                    /* the exec whose listener it came on, or "" */
	uint64_t sent, received;
};

static const char *kind_name(enum kind k)
{
	return k == K_CONNECT ? "connect" : k == K_HTTP ? "http" : "socks5";
}

static cJSON *attempt_json(const struct conn *c, const char *verdict, const char *reason)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	box_json_add_int64(o, "id", (int64_t)c->id);
	if (c->tag[0])
		cJSON_AddStringToObject(o, "exec", c->tag);
	cJSON_AddStringToObject(o, "phase", strcmp(verdict, "allowed") == 0 ? "open" : "end");
	cJSON_AddStringToObject(o, "kind", kind_name(c->kind));
	if (c->method[0])
		cJSON_AddStringToObject(o, "method", c->method);
	cJSON_AddStringToObject(o, "host", c->host);
	box_json_add_int64(o, "port", c->port);
	if (c->addr[0])
		cJSON_AddStringToObject(o, "address", c->addr);
	cJSON_AddStringToObject(o, "verdict", verdict);
	if (reason)
		cJSON_AddStringToObject(o, "reason", reason);
	if (strcmp(verdict, "allowed") != 0) {
		box_json_add_int64(o, "bytes_sent", 0);
		box_json_add_int64(o, "bytes_received", 0);
	}
	return o;
}

static void log_verdict(struct conn *c, const char *verdict, const char *reason)
{
	cJSON *o = attempt_json(c, verdict, reason);

	if (o)
		log_attempt(c->px, o);
	cJSON_Delete(o);
}

static void log_end(struct conn *c)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return;
	box_json_add_int64(o, "id", (int64_t)c->id);
	cJSON_AddStringToObject(o, "phase", "end");
	box_json_add_int64(o, "bytes_sent", (int64_t)c->sent);
	box_json_add_int64(o, "bytes_received", (int64_t)c->received);
	if (c->end_reason)
		cJSON_AddStringToObject(o, "reason", c->end_reason);
	log_attempt(c->px, o);
	cJSON_Delete(o);
}

static int send_all(int fd, const void *p, size_t n, int64_t deadline)
{
	const char *q = p;

	while (n > 0) {
		ssize_t w = send(fd, q, n, MSG_NOSIGNAL);

		if (w > 0) {
			q += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p1 = { fd, POLLOUT, 0 };
			int64_t left = deadline - box_now_ms();

			if (left <= 0 || poll(&p1, 1, (int)left) <= 0)
				return -1;
			continue;
		}
		return -1;
	}
	return 0;
}

/* Reads at least want bytes into c->head (the client's socket is non-blocking). */
static int read_more(struct conn *c, size_t want, int64_t deadline)
{
	while (c->head_len < want) {
		struct pollfd p1 = { c->cfd, POLLIN, 0 };
		int64_t left = deadline - box_now_ms();
		ssize_t n;

		if (c->head_len >= BOX_NETPROXY_HEAD_MAX || left <= 0)
			return -1;
		if (poll(&p1, 1, (int)left) <= 0)
			continue;
		n = recv(c->cfd, c->head + c->head_len, BOX_NETPROXY_HEAD_MAX - c->head_len, 0);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			return -1;
		if (n > 0)
			c->head_len += (size_t)n;
	}
	return 0;
}

/* Canonical host in c->host from s[0..n): a name (lowercase), dotted IPv4 or [IPv6]. */
static int set_host(struct conn *c, const char *s, size_t n)
{
	char tmp[BOX_HOST_MAX + 1];
	struct in_addr a4;

	if (n == 0 || n > BOX_HOST_MAX)
		return -1;
	if (s[0] == '[') {
		if (n < 3 || s[n - 1] != ']' || memchr(s, '%', n) ||
		    box_policy_canon_v6(s + 1, n - 2, c->host, sizeof(c->host)) < 0)
			return -1;
		c->literal = 1;
		return 0;
	}
	memcpy(tmp, s, n);
	tmp[n] = 0;
	if (box_policy_normalize_host(tmp) < 0)
		return -1;
	c->literal = inet_pton(AF_INET, tmp, &a4) == 1;
	/* "127.1", "0x7f.1", "2130706433": the system's resolver reads them as addresses */
	if (!c->literal && inet_aton(tmp, &a4))
		return -1;
	box_fmt(c->host, sizeof(c->host), "%s", tmp);
	return 0;
}

/* "host:port" (or "[v6]:port"); def is the port when none is given (0: one is needed) */
static int set_authority(struct conn *c, const char *s, size_t n, int def)
{
	const char *colon = NULL;
	size_t k;
	long port = def;

	if (n > 0 && s[0] == '[') {
		const char *end = memchr(s, ']', n);

		if (!end)
			return -1;
		if ((size_t)(end - s) + 1 < n) {
			if (end[1] != ':')
				return -1;
			colon = end + 1;
		}
	} else {
		for (k = 0; k < n; k++)
			if (s[k] == ':')
				colon = s + k;
	}
	if (memchr(s, '@', n))
		return -1;
	if (colon) {
		size_t pl = n - (size_t)(colon + 1 - s);

		port = 0;
		if (pl == 0 || pl > 5)
			return -1;
		for (k = 0; k < pl; k++) {
			if (colon[1 + k] < '0' || colon[1 + k] > '9')
				return -1;
			port = port * 10 + (colon[1 + k] - '0');
		}
	}
	if (port < 1 || port > 65535)
		return -1;
	c->port = (int)port;
	return set_host(c, s, colon ? (size_t)(colon - s) : n);
}

/* ---- one request per connection: the head's checks and the body's framing ---- */

enum { CH_SIZE, CH_EXT, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER_START,
       CH_TRAILER, CH_TRAILER_LF, CH_END_LF };

static int is_tchar(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* a byte a field value or request line may hold: visible, space, tab or obs-text */
static int is_field_byte(unsigned char ch)
{
	return ch == '\t' || (ch >= 0x20 && ch != 0x7f);
}

/* s[0..n) with optional whitespace trimmed both sides */
static void ows_trim(const char **s, size_t *n)
{
	while (*n && ((*s)[0] == ' ' || (*s)[0] == '\t')) {
		(*s)++;
		(*n)--;
	}
	while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
		(*n)--;
}

/* One header line (no CRLF) into *b's counts: 0, or -1 with why. */
static int head_field(const char *l, size_t n, struct box_netproxy_body *b, int *ncl, int *nte,
		      char *why, size_t wn)
{
	size_t k = 0, vn;
	const char *v;

	if (l[0] == ' ' || l[0] == '\t')
		return box_fmt(why, wn, "a folded header line (obs-fold)"), -1;
	while (k < n && is_tchar((unsigned char)l[k]))
		k++;
	if (k == 0 || k >= n || l[k] != ':')
		return box_fmt(why, wn, "a malformed header name"), -1;
	v = l + k + 1;
	vn = n - k - 1;
	ows_trim(&v, &vn);
	if (k == 14 && strncasecmp(l, "content-length", 14) == 0) {
		size_t j;

		if (++*ncl > 1)
			return box_fmt(why, wn, "Content-Length given twice"), -1;
		if (vn == 0 || vn > 18)
			return box_fmt(why, wn, "an invalid Content-Length"), -1;
		b->left = 0;
		for (j = 0; j < vn; j++) {
			if (v[j] < '0' || v[j] > '9')
				return box_fmt(why, wn, "an invalid Content-Length"), -1;
			b->left = b->left * 10 + (uint64_t)(v[j] - '0');
		}
	} else if (k == 17 && strncasecmp(l, "transfer-encoding", 17) == 0) {
		if (++*nte > 1 || vn != 7 || strncasecmp(v, "chunked", 7) != 0)
			return box_fmt(why, wn, "a Transfer-Encoding other than one \"chunked\""), -1;
		b->chunked = 1;
	}
	return 0;
}

int box_netproxy_head_check(const char *s, size_t n, struct box_netproxy_body *b, char *why,
			    size_t wn)
{
	size_t at = 0, k;
	int ncl = 0, nte = 0, line = 0;

	memset(b, 0, sizeof(*b));
	for (k = 0; k < n; k++) {
		unsigned char ch = (unsigned char)s[k];

		if (ch == '\n' && (k == 0 || s[k - 1] != '\r'))
			return box_fmt(why, wn, "a bare LF in the request head"), -1;
		if (ch == '\r' && (k + 1 >= n || s[k + 1] != '\n'))
			return box_fmt(why, wn, "a bare CR in the request head"), -1;
		if (ch != '\r' && ch != '\n' && !is_field_byte(ch))
			return box_fmt(why, wn, "a control byte in the request head"), -1;
	}
	while (at < n) {
		const char *e = memchr(s + at, '\n', n - at);
		size_t ln;

		if (!e)
			return box_fmt(why, wn, "an unterminated request head"), -1;
		ln = (size_t)(e - (s + at)) - 1;   /* without CRLF */
		if (ln == 0) {
			if (at + 2 != n)
				return box_fmt(why, wn, "bytes after the request head's end"), -1;
			break;
		}
		if (line++ > 0 && head_field(s + at, ln, b, &ncl, &nte, why, wn) < 0)
			return -1;
		at += ln + 2;
	}
	if (line == 0 || at >= n)
		return box_fmt(why, wn, "an unterminated request head"), -1;
	if (ncl && nte)
		return box_fmt(why, wn, "both Content-Length and Transfer-Encoding"), -1;
	if (nte && memmem(s, (size_t)(strchr(s, '\r') - s), " HTTP/1.0", 9))
		return box_fmt(why, wn, "Transfer-Encoding in an HTTP/1.0 request"), -1;
	if (b->chunked) {
		b->state = CH_SIZE;
		b->left = 0;
	}
	b->done = !b->chunked && b->left == 0;
	return 0;
}

static int hexval(unsigned char ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 :
	       ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* chunked framing, one byte at a time except a chunk's data: the bytes taken, or -1 */
static ssize_t chunked_take(struct box_netproxy_body *b, const char *p, size_t n)
{
	size_t k = 0;

	while (k < n && !b->done) {
		unsigned char ch = (unsigned char)p[k];
		int bad = 0;

		switch (b->state) {
		case CH_SIZE:
			if (hexval(ch) >= 0 && b->digits < 15) {
				b->left = b->left * 16 + (uint64_t)hexval(ch);
				b->digits++;
			} else if (b->digits && (ch == ';' || ch == '\r')) {
				b->state = ch == ';' ? CH_EXT : CH_SIZE_LF;
			} else {
				bad = 1;
			}
			break;
		case CH_EXT:
			if (ch == '\r')
				b->state = CH_SIZE_LF;
			else
				bad = !is_field_byte(ch);
			break;
		case CH_SIZE_LF:
			bad = ch != '\n';
			b->digits = 0;
			b->state = b->left ? CH_DATA : CH_TRAILER_START;
			break;
		case CH_DATA: {
			size_t m = n - k < b->left ? n - k : (size_t)b->left;

			b->left -= m;
			k += m;
			if (b->left == 0)
				b->state = CH_DATA_CR;
			continue;
		}
		case CH_DATA_CR:
			bad = ch != '\r';
			b->state = CH_DATA_LF;
			break;
		case CH_DATA_LF:
			bad = ch != '\n';
			b->state = CH_SIZE;
			break;
		case CH_TRAILER_START:
			if (ch == '\r')
				b->state = CH_END_LF;
			else if (ch == ' ' || ch == '\t' || !is_tchar(ch))
				bad = 1;
			else
				b->state = CH_TRAILER;
			break;
		case CH_TRAILER:
			if (ch == '\r')
				b->state = CH_TRAILER_LF;
			else
				bad = !is_field_byte(ch);
			break;
		case CH_TRAILER_LF:
			bad = ch != '\n';
			b->state = CH_TRAILER_START;
			break;
		default:   /* CH_END_LF */
			bad = ch != '\n';
			b->done = 1;
			break;
		}
		if (bad)
			return -1;
		k++;
	}
	return (ssize_t)k;
}

ssize_t box_netproxy_body_take(struct box_netproxy_body *b, const char *p, size_t n)
{
	size_t m;

	if (b->done)
		return 0;
	if (b->chunked)
		return chunked_take(b, p, n);
	m = n < b->left ? n : (size_t)b->left;
	b->left -= m;
	b->done = b->left == 0;
	return (ssize_t)m;
}

static int deny_matches(const struct deny_pat *d, const char *host, int port)
{
	struct box_policy_rule r;

	memset(&r, 0, sizeof(r));
	r.wildcard = d->wildcard;
	memcpy(r.host, d->host, sizeof(r.host));
	return (d->port == 0 || d->port == port) && box_policy_host_matches(&r, host);
}

/* The verdict of the rules on c (before any lookup): NULL when allowed, else why not. */
static const char *rules_verdict(struct conn *c, char *why, size_t wn)
{
	struct proxy *px = c->px;
	const struct rules *r;
	unsigned mbit = c->kind == K_HTTP ? box_policy_method_bit(c->method) : 0;
	const char *res = why;
	size_t i;

	pthread_mutex_lock(&px->mu);
	rules_reload(px);
	r = &px->rules;
	box_fmt(why, wn, "no allow rule matches %s:%d", c->host, c->port);
	for (i = 0; i < r->ndeny; i++)
		if (deny_matches(&r->deny[i], c->host, c->port)) {
			box_fmt(why, wn, "deny rule %s%s matches %s", r->deny[i].wildcard ? "*." : "",
				r->deny[i].host, c->host);
			goto out;
		}
	if (c->kind == K_HTTP && !mbit) {
		box_fmt(why, wn, "method %s is not allowed", c->method);
		goto out;
	}
	for (i = 0; i < r->allow.n; i++) {
		const struct box_policy_rule *a = &r->allow.rules[i];

		if (a->port != c->port || !box_policy_host_matches(a, c->host) ||
		    (c->literal && a->wildcard))
			continue;
		/* a tunnel hides methods and paths: only a rule that names neither covers it */
		if (c->kind != K_HTTP && (a->methods || a->path[0]))
			continue;
		if (c->kind == K_HTTP && (!(a->schemes & BOX_SCHEME_HTTP) ||
					  (a->methods && !(a->methods & mbit)) ||
					  !box_policy_path_matches(a, c->path))) {
			box_fmt(why, wn, "no allow rule matches %s http://%s:%d%.200s", c->method,
				c->host, c->port, c->path);
			continue;
		}
		res = NULL;
		break;
	}
out:
	pthread_mutex_unlock(&px->mu);
	return res;
}

/* 1 when an allow rule names this address (text as in rules: dotted or [v6]) on port, or a
 * deny rule names it: -1 */
static int address_named(struct proxy *px, const char *addr, int port)
{
	size_t i;
	int named = 0;

	pthread_mutex_lock(&px->mu);
	for (i = 0; i < px->rules.ndeny; i++)
		if (deny_matches(&px->rules.deny[i], addr, port))
			named = -1;
	for (i = 0; named == 0 && i < px->rules.allow.n; i++) {
		const struct box_policy_rule *a = &px->rules.allow.rules[i];

		if (!a->wildcard && a->port == port && strcmp(a->host, addr) == 0)
			named = 1;
	}
	pthread_mutex_unlock(&px->mu);
	return named;
}

static int is_own_address(const struct sockaddr *sa)
{
	struct ifaddrs *ifs, *it;
	int own = 0;

	if (getifaddrs(&ifs) < 0)
		return 1;   /* cannot tell: refuse */
	for (it = ifs; it && !own; it = it->ifa_next) {
		if (!it->ifa_addr || it->ifa_addr->sa_family != sa->sa_family)
			continue;
		if (sa->sa_family == AF_INET)
			own = memcmp(&((const struct sockaddr_in *)(const void *)sa)->sin_addr,
				     &((struct sockaddr_in *)(void *)it->ifa_addr)->sin_addr, 4) == 0;
		else
			own = memcmp(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
				     &((struct sockaddr_in6 *)(void *)it->ifa_addr)->sin6_addr,
				     16) == 0;
	}
	freeifaddrs(ifs);
	return own;
}

/* One query (qtype 1: A, 28: AAAA) to the operator's test resolver (BOX_NET_DNS): the
 * addresses added to out[0..max), their number. */
static int dns_query(const struct sockaddr_in *srv, const char *name, int qtype,
		     struct sockaddr_storage *out, int max)
{
	unsigned char q[512], a[1500];
	size_t qn = 12, i, at;
	const char *label = name;
	uint16_t qid = (uint16_t)(box_now_ns() & 0xffff);
	int fd, got = 0, tries;

	memset(q, 0, 12);
	q[0] = (unsigned char)(qid >> 8);
	q[1] = (unsigned char)qid;
	q[2] = 0x01;   /* recursion desired */
	q[5] = 1;      /* one question */
	while (*label) {
		size_t ll = strcspn(label, ".");

		if (ll == 0 || ll > 63 || qn + ll + 6 > sizeof(q))
			return 0;
		q[qn++] = (unsigned char)ll;
		memcpy(q + qn, label, ll);
		qn += ll;
		label += ll + (label[ll] == '.');
	}
	q[qn++] = 0;
	q[qn++] = 0;
	q[qn++] = (unsigned char)qtype;
	q[qn++] = 0;
	q[qn++] = 1;   /* IN */
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	/* a second try only when no answer came */
	for (tries = 0; tries < 2; tries++) {
		struct pollfd p1 = { fd, POLLIN, 0 };
		ssize_t n;
		size_t an;

		if (sendto(fd, q, qn, 0, (const struct sockaddr *)srv, sizeof(*srv)) < 0 ||
		    poll(&p1, 1, DNS_MS) <= 0)
			continue;
		n = recv(fd, a, sizeof(a), 0);
		if (n < (ssize_t)qn || a[0] != q[0] || a[1] != q[1] || !(a[2] & 0x80))
			continue;
		an = (size_t)a[6] << 8 | a[7];
		at = qn;   /* the question is echoed as sent */
		for (i = 0; i < an && i < 32 && got < max; i++) {
			size_t rdlen;
			int type;

			/* the owner name: labels, ending in a zero byte or a pointer */
			while (at < (size_t)n && a[at] != 0 && (a[at] & 0xc0) == 0)
				at += (size_t)a[at] + 1;
			at += at < (size_t)n && (a[at] & 0xc0) == 0xc0 ? 2 : 1;
			if (at + 10 > (size_t)n)
				break;
			type = a[at] << 8 | a[at + 1];
			rdlen = (size_t)a[at + 8] << 8 | a[at + 9];
			at += 10;
			if (at + rdlen > (size_t)n)
				break;
			if (type == 1 && rdlen == 4 && qtype == 1) {
				struct sockaddr_in *in = (struct sockaddr_in *)(void *)&out[got++];

				memset(in, 0, sizeof(*in));
				in->sin_family = AF_INET;
				memcpy(&in->sin_addr, a + at, 4);
			} else if (type == 28 && rdlen == 16 && qtype == 28) {
				struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)&out[got++];

				memset(in6, 0, sizeof(*in6));
				in6->sin6_family = AF_INET6;
				memcpy(&in6->sin6_addr, a + at, 16);
			}
			at += rdlen;
		}
		break;
	}
	close(fd);
	return got;
}

/* The addresses of c->host: the literal itself, the test resolver's or the system's. */
static int resolve(struct conn *c, struct sockaddr_storage *out, int max)
{
	struct addrinfo hints, *res = NULL, *it;
	char h[BOX_HOST_MAX + 1];
	int n = 0;

	box_fmt(h, sizeof(h), "%s", c->host[0] == '[' ? c->host + 1 : c->host);
	if (c->host[0] == '[')
		h[strlen(h) - 1] = 0;
	if (!c->literal && c->px->dns.sin_port) {
		n = dns_query(&c->px->dns, h, 1, out, max);
		n += dns_query(&c->px->dns, h, 28, out + n, max - n);
		return n > 0 ? n : -1;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = c->literal ? AI_NUMERICHOST : 0;
	if (getaddrinfo(h, NULL, &hints, &res) != 0)
		return -1;
	for (it = res; it && n < max; it = it->ai_next)
		if ((it->ai_family == AF_INET || it->ai_family == AF_INET6) &&
		    it->ai_addrlen <= sizeof(*out))
			memcpy(&out[n++], it->ai_addr, it->ai_addrlen);
	freeaddrinfo(res);
	return n > 0 ? n : -1;
}

static void addr_text(const struct sockaddr_storage *ss, char *out, size_t n)
{
	char t[INET6_ADDRSTRLEN] = "";

	if (ss->ss_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)ss)->sin_addr, t,
			  sizeof(t));
		box_fmt(out, n, "%s", t);
	} else {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr, t,
			  sizeof(t));
		box_fmt(out, n, "[%s]", t);
	}
}

static int connect_to(struct sockaddr_storage *ss, int port)
{
	socklen_t len = ss->ss_family == AF_INET ? sizeof(struct sockaddr_in)
						 : sizeof(struct sockaddr_in6);
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
	struct pollfd p1;
	socklen_t el = sizeof(int);
	int e = 0;

	if (fd < 0)
		return -1;
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)(void *)ss)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)(void *)ss)->sin6_port = htons((uint16_t)port);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)ss, len) == 0)
		return fd;
	p1 = (struct pollfd){ fd, POLLOUT, 0 };
	if (errno != EINPROGRESS || poll(&p1, 1, CONNECT_MS) <= 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 || e != 0) {
		close(fd);
		errno = e ? e : ETIMEDOUT;
		return -1;
	}
	return fd;
}

/*
 * Resolves and connects: each address is judged (a non-public or host address only when a
 * rule names it; a denied address never) and the first that passes is connected to, the very
 * address judged. 0 with c->sfd, or -1 with the verdict logged and why filled.
 */
static int open_upstream(struct conn *c, char *why, size_t wn, int *denied)
{
	struct sockaddr_storage ss[ADDRS_MAX];
	int n = resolve(c, ss, ADDRS_MAX), k, saw_refused = 0;

	*denied = 0;
	if (n < 0) {
		box_fmt(why, wn, "cannot resolve %s", c->host);
		return -1;
	}
	for (k = 0; k < n; k++) {
		const char *priv = box_policy_private_reason((struct sockaddr *)&ss[k]);
		int named;

		addr_text(&ss[k], c->addr, sizeof(c->addr));
		named = address_named(c->px, c->addr, c->port);
		if (!priv && is_own_address((struct sockaddr *)&ss[k]))
			priv = "the host's own";
		if (named < 0 || (priv && named == 0)) {
			if (!saw_refused)
				box_fmt(why, wn, named < 0 ? "%s resolves to %s, which a deny rule names"
					: "%s resolves to %s, a %s address no rule names", c->host,
					c->addr, priv);
			saw_refused = 1;
			continue;
		}
		c->sfd = connect_to(&ss[k], c->port);
		if (c->sfd >= 0)
			return 0;
		box_fmt(why, wn, "cannot connect to %s port %d: %s", c->addr, c->port,
			strerror(errno));
	}
	*denied = saw_refused;
	return -1;
}

/* How many bytes the client may send on now, at most cap: any for a tunnel; for a plain-HTTP
 * request what is left of its one body (a chunked body is peeked at into c->head, free once
 * the head is forwarded). 0: the body has ended, the client is read no more; -1: a chunked
 * body's framing is malformed. */
static ssize_t client_budget(struct conn *c, size_t cap)
{
	struct box_netproxy_body t;
	ssize_t n;

	if (c->kind != K_HTTP)
		return (ssize_t)cap;
	if (c->body.done)
		return 0;
	if (!c->body.chunked)
		return (ssize_t)(cap < c->body.left ? cap : c->body.left);
	n = recv(c->cfd, c->head, cap < BOX_NETPROXY_HEAD_MAX ? cap : BOX_NETPROXY_HEAD_MAX,
		 MSG_PEEK);
	if (n <= 0)
		return 1;   /* the read itself sees the end or EAGAIN */
	t = c->body;
	n = box_netproxy_body_take(&t, c->head, (size_t)n);
	if (n < 0)
		c->end_reason = "the request's chunked body is malformed: connection cut";
	return n;
}

/* n bytes of what client_budget allowed have passed */
static void client_advance(struct conn *c, size_t n)
{
	if (c->kind == K_HTTP)
		(void)box_netproxy_body_take(&c->body, c->head, n);
}

/* relay through pipes: splice(2) moves the bytes in the kernel, without the two copies
 * through this process of relay_copy. 0 when it ran, -1 when no pipe could be had. */
static int relay_splice(struct conn *c)
{
	struct sdir { int from, to, p[2]; size_t len; int eof; uint64_t *count; } d[2] = {
		{ c->cfd, c->sfd, { -1, -1 }, 0, 0, &c->sent },
		{ c->sfd, c->cfd, { -1, -1 }, 0, 0, &c->received },
	};
	int bad = 0;
	const unsigned fl = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
	int k, cap = RELAY_PIPE;

	for (k = 0; k < 2; k++) {
		if (pipe2(d[k].p, O_CLOEXEC | O_NONBLOCK) < 0) {
			if (k == 1) {
				close(d[0].p[0]);
				close(d[0].p[1]);
			}
			return -1;
		}
		/* a larger pipe moves more per call; the default (64 KiB) when refused */
		if (fcntl(d[k].p[1], F_SETPIPE_SZ, RELAY_PIPE) < RELAY_PIPE)
			cap = 65536;
	}
	if (c->kind == K_HTTP && c->body.done) {
		d[0].eof = 1;   /* a request without a body, or all of it came with the head */
		d[0].to = -1;
	}
	while (!bad && !(d[0].eof && d[1].eof && !d[0].len && !d[1].len)) {
		struct pollfd p[2] = { { c->cfd, 0, 0 }, { c->sfd, 0, 0 } };
		int r;

		for (k = 0; k < 2; k++) {
			if (d[k].len)
				p[1 - k].events |= POLLOUT;
			if (!d[k].eof && d[k].len < (size_t)cap)
				p[k].events |= POLLIN;
		}
		r = poll(p, 2, IDLE_MS);
		if (r == 0 || (r < 0 && errno != EINTR))
			break;
		if ((p[0].revents | p[1].revents) & (POLLERR | POLLNVAL))
			break;
		for (k = 0; k < 2; k++) {
			struct sdir *x = &d[k];
			ssize_t n;

			if (!x->eof && x->len < (size_t)cap && p[k].revents) {
				ssize_t want = k ? cap - (ssize_t)x->len
						 : client_budget(c, (size_t)cap - x->len);

				if (want < 0) {
					bad = 1;
					break;
				}
				n = want ? splice(x->from, NULL, x->p[1], NULL, (size_t)want, fl) : 0;
				if (n > 0) {
					x->len += (size_t)n;
					*x->count += (uint64_t)n;
					if (k == 0)
						client_advance(c, (size_t)n);
				} else if (want == 0) {
					/* the one request has passed: the origin keeps its write side */
					x->eof = 1;
					x->to = -1;
				} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
					x->eof = 1;
				}
			}
			if (x->len) {
				n = splice(x->p[0], NULL, k ? c->cfd : c->sfd, NULL, x->len, fl);
				if (n > 0) {
					x->len -= (size_t)n;
				} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
					x->len = 0;
					x->eof = d[1 - k].eof = 1;
					d[1 - k].len = 0;
				}
			}
			if (x->eof && !x->len && x->to >= 0) {
				shutdown(x->to, SHUT_WR);
				x->to = -1;
			}
		}
	}
	for (k = 0; k < 2; k++) {
		close(d[k].p[0]);
		close(d[k].p[1]);
	}
	return 0;
}

/* Both directions until each has ended, or nothing moved for IDLE_MS. */
static void relay(struct conn *c)
{
	fcntl(c->sfd, F_SETFL, O_NONBLOCK);
	if (relay_splice(c) == 0)
		return;
	relay_copy(c);
}

/* relay with a buffer each way, when no pipe can be had. */
static void relay_copy(struct conn *c)
{
	struct dir { int from, to; char *buf; size_t len, off; int eof; uint64_t *count; } d[2] = {
		{ c->cfd, c->sfd, NULL, 0, 0, 0, &c->sent },
		{ c->sfd, c->cfd, NULL, 0, 0, 0, &c->received },
	};
	int k;

	d[0].buf = malloc(RELAY_BUF);
	d[1].buf = malloc(RELAY_BUF);
	fcntl(c->sfd, F_SETFL, O_NONBLOCK);
	if (c->kind == K_HTTP && c->body.done)
		d[0].eof = 1;   /* the one request has passed: the origin keeps its write side */
	while (d[0].buf && d[1].buf && !(d[0].eof && d[1].eof && !d[0].len && !d[1].len)) {
		struct pollfd p[2] = { { c->cfd, 0, 0 }, { c->sfd, 0, 0 } };
		int r;

		for (k = 0; k < 2; k++) {
			if (d[k].len)
				p[k == 0 ? 1 : 0].events |= POLLOUT;
			else if (!d[k].eof)
				p[k].events |= POLLIN;
		}
		r = poll(p, 2, IDLE_MS);
		if (r == 0)
			break;
		if (r < 0 && errno != EINTR)
			break;
		/* a reset side is reported whatever was asked: it would be reported again at once */
		if ((p[0].revents | p[1].revents) & (POLLERR | POLLNVAL))
			break;
		for (k = 0; k < 2; k++) {
			struct dir *x = &d[k];

			if (!x->len && !x->eof && p[k].revents) {
				ssize_t want = k ? RELAY_BUF : client_budget(c, RELAY_BUF), n;

				if (want <= 0) {
					x->eof = 1;
					if (want < 0)
						d[1].eof = 1;
					continue;
				}
				n = recv(x->from, x->buf, (size_t)want, 0);
				if (n > 0) {
					x->len = (size_t)n;
					x->off = 0;
					*x->count += (uint64_t)n;
					if (k == 0)
						client_advance(c, (size_t)n);
				} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
					x->eof = 1;
					shutdown(x->to, SHUT_WR);
				}
			}
			if (x->len) {
				ssize_t w = send(x->to, x->buf + x->off, x->len, MSG_NOSIGNAL);

				if (w > 0) {
					x->off += (size_t)w;
					x->len -= (size_t)w;
				} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
					/* the other side is gone: so is this direction */
					x->len = 0;
					x->eof = d[1 - k].eof = 1;
					d[1 - k].len = 0;
				}
			}
		}
	}
	free(d[0].buf);
	free(d[1].buf);
}

/* What the client still sends is read (a little, briefly) and dropped: closing on unread
 * bytes would reset the connection and lose the end of the answer. */
static void drain_client(struct conn *c)
{
	int64_t until = box_now_ms() + 1000;
	size_t drained = 0;

	shutdown(c->cfd, SHUT_WR);
	while (drained < ((size_t)1 << 20) && box_now_ms() < until) {
		struct pollfd p1 = { c->cfd, POLLIN, 0 };
		ssize_t n;

		if (poll(&p1, 1, (int)(until - box_now_ms())) <= 0)
			break;
		n = recv(c->cfd, c->head, BOX_NETPROXY_HEAD_MAX, 0);
		if (n <= 0 && !(n < 0 && errno == EINTR))
			break;
		if (n > 0)
			drained += (size_t)n;
	}
}

static void http_error(struct conn *c, int code, const char *status, const char *why)
{
	char msg[1024], body[700];

	box_fmt(body, sizeof(body), "box network proxy: %s\n", why);
	box_fmt(msg, sizeof(msg), "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: "
		"%zu\r\nConnection: close\r\n\r\n%s", code, status, strlen(body), body);
	if (send_all(c->cfd, msg, strlen(msg), box_now_ms() + 2000) == 0)
		drain_client(c);
}

/* The request rewritten for the origin: origin-form target, the checked Host, no
 * proxy-only or hop-by-hop headers, Connection: close. */
static int http_forward_head(struct conn *c, const char *version, const char *hdrs,
			     const char *hend)
{
	struct box_buf b;
	struct box_err err;
	const char *l = hdrs;
	int rc;
	static const char *const drop[] = { "host:", "connection:", "proxy-connection:",
					    "proxy-authorization:", "keep-alive:", "upgrade:", NULL };

	box_buf_init(&b, BOX_NETPROXY_HEAD_MAX * 2);
	box_err_init(&err);
	rc = box_buf_printf(&b, &err, "%s %s %s\r\nHost: %s", c->method, c->path, version,
			    c->host);
	if (rc == 0 && c->port != 80)
		rc = box_buf_printf(&b, &err, ":%d", c->port);
	if (rc == 0)
		rc = box_buf_append(&b, "\r\n", 2, &err);
	while (rc == 0 && l < hend) {
		const char *e = memchr(l, '\n', (size_t)(hend - l));
		size_t n = e ? (size_t)(e - l) : (size_t)(hend - l), k;
		int skip = 0;

		if (n && l[n - 1] == '\r')
			n--;
		for (k = 0; drop[k]; k++)
			if (n >= strlen(drop[k]) && strncasecmp(l, drop[k], strlen(drop[k])) == 0)
				skip = 1;
		if (n && !skip) {
			rc = box_buf_append(&b, l, n, &err);
			if (rc == 0)
				rc = box_buf_append(&b, "\r\n", 2, &err);
		}
		l = e ? e + 1 : hend;
	}
	if (rc == 0)
		rc = box_buf_printf(&b, &err, "Connection: close\r\n\r\n");
	if (rc == 0)
		rc = send_all(c->sfd, b.data, b.len, box_now_ms() + CONNECT_MS);
	if (rc == 0)
		c->sent += b.len;
	/* of what came with the head, only the body's part: never a second request */
	if (rc == 0 && c->pre > 0) {
		rc = send_all(c->sfd, c->head + c->body_off, c->pre, box_now_ms() + CONNECT_MS);
		c->sent += c->pre;
	}
	box_buf_release(&b);
	return rc;
}

/* The request line of an HTTP proxy request: CONNECT host:port or an absolute http URL. */
static int http_parse(struct conn *c, char *version, size_t vn, const char **hdrs,
		      char *why, size_t wn)
{
	char *line = c->head, *sp1, *sp2, *eol = strchr(c->head, '\n');
	const char *auth, *rest;
	size_t an;

	if (!eol)
		return box_fmt(why, wn, "malformed request line"), -1;
	*eol = 0;
	if (eol > line && eol[-1] == '\r')
		eol[-1] = 0;
	*hdrs = eol + 1;
	sp1 = strchr(line, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || (size_t)(sp1 - line) >= sizeof(c->method) ||
	    strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || strlen(sp2 + 1) != 8)
		return box_fmt(why, wn, "malformed request line"), -1;
	*sp1 = 0;
	*sp2 = 0;
	box_fmt(c->method, sizeof(c->method), "%s", line);
	box_fmt(version, vn, "%s", sp2 + 1);
	if (strcmp(c->method, "CONNECT") == 0) {
		c->kind = K_CONNECT;
		if (set_authority(c, sp1 + 1, strlen(sp1 + 1), 0) < 0)
			return box_fmt(why, wn, "CONNECT needs HOST:PORT"), -1;
		return 0;
	}
	c->kind = K_HTTP;
	if (strncasecmp(sp1 + 1, "http://", 7) != 0)
		return box_fmt(why, wn, "a proxy request needs an absolute http:// URL (use "
			       "CONNECT for https)"), -1;
	auth = sp1 + 8;
	an = strcspn(auth, "/?#");
	rest = auth + an;
	if (set_authority(c, auth, an, 80) < 0)
		return box_fmt(why, wn, "invalid host in %.200s", sp1 + 1), -1;
	if (strchr(rest, '#') || strlen(rest) >= sizeof(c->path) - 1)
		return box_fmt(why, wn, "invalid or too long path"), -1;
	box_fmt(c->path, sizeof(c->path), "%s%s", rest[0] == '/' ? "" : "/", rest);
	return 0;
}

static void serve_http(struct conn *c)
{
	char why[512], version[16];
	const char *hdrs, *verdict;
	char *end;
	int denied;

	for (;;) {
		c->head[c->head_len] = 0;
		/* the head ends at its first empty line, "\r\n" or a bare "\n" (refused below) */
		for (end = strchr(c->head, '\n'); end; end = strchr(end + 1, '\n'))
			if (end[1] == '\n' || (end[1] == '\r' && end[2] == '\n'))
				break;
		if (!end && memchr(c->head, 0, c->head_len)) {
			log_verdict(c, "denied", "a NUL byte in the request head");
			http_error(c, 400, "Bad Request", "a NUL byte in the request head");
			return;
		}
		if (end) {
			c->body_off = (size_t)(end - c->head) + (end[1] == '\n' ? 2 : 3);
			break;
		}
		if (c->head_len >= BOX_NETPROXY_HEAD_MAX) {
			http_error(c, 431, "Request Header Fields Too Large", "request head too large");
			return;
		}
		if (read_more(c, c->head_len + 1, box_now_ms() + HEAD_MS) < 0)
			return;
	}
	if (box_netproxy_head_check(c->head, c->body_off, &c->body, why, sizeof(why)) < 0 ||
	    http_parse(c, version, sizeof(version), &hdrs, why, sizeof(why)) < 0) {
		log_verdict(c, "denied", why);
		http_error(c, 400, "Bad Request", why);
		return;
	}
	if (c->kind == K_HTTP) {
		ssize_t pre = box_netproxy_body_take(&c->body, c->head + c->body_off,
						     c->head_len - c->body_off);

		if (pre < 0) {
			box_fmt(why, sizeof(why), "the request's chunked body is malformed");
			log_verdict(c, "denied", why);
			http_error(c, 400, "Bad Request", why);
			return;
		}
		c->pre = (size_t)pre;
	}
	verdict = rules_verdict(c, why, sizeof(why));
	if (verdict) {
		log_verdict(c, "denied", verdict);
		http_error(c, 403, "Forbidden", verdict);
		return;
	}
	if (open_upstream(c, why, sizeof(why), &denied) < 0) {
		log_verdict(c, denied ? "denied" : "error", why);
		http_error(c, denied ? 403 : 502, denied ? "Forbidden" : "Bad Gateway", why);
		return;
	}
	log_verdict(c, "allowed", NULL);
	if (c->kind == K_CONNECT) {
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

		if (send_all(c->cfd, ok, sizeof(ok) - 1, box_now_ms() + CONNECT_MS) == 0) {
			if (c->head_len > c->body_off &&
			    send_all(c->sfd, c->head + c->body_off, c->head_len - c->body_off,
				     box_now_ms() + CONNECT_MS) == 0)
				c->sent += c->head_len - c->body_off;
			relay(c);
		}
		log_end(c);
	} else {
		int unread = 0;

		if (http_forward_head(c, version, hdrs, c->head + c->body_off - 2) == 0)
			relay(c);
		log_end(c);
		/* bytes after the request (a second one) are dropped, read first so that the
		 * close does not reset the connection before the client has the answer */
		if (ioctl(c->cfd, FIONREAD, &unread) == 0 && unread > 0)
			drain_client(c);
	}
}

static void socks_reply(struct conn *c, unsigned char code)
{
	unsigned char r[10] = { 5, code, 0, 1, 0, 0, 0, 0, 0, 0 };

	send_all(c->cfd, r, sizeof(r), box_now_ms() + 2000);
}

/* SOCKS5, no authentication, CONNECT only; a domain name is checked like any host. */
static void serve_socks(struct conn *c)
{
	int64_t deadline = box_now_ms() + HEAD_MS;
	unsigned char *h = (unsigned char *)c->head;
	size_t at, need;
	char why[512];
	const char *verdict;
	int denied;

	c->kind = K_SOCKS;
	if (read_more(c, 2, deadline) < 0 || read_more(c, 2 + (size_t)h[1], deadline) < 0 ||
	    !memchr(h + 2, 0, h[1])) {
		send_all(c->cfd, "\x05\xff", 2, deadline);
		return;
	}
	at = 2 + (size_t)h[1];
	if (send_all(c->cfd, "\x05\x00", 2, deadline) < 0 || read_more(c, at + 5, deadline) < 0)
		return;
	if (h[at] != 5 || h[at + 1] != 1) {
		socks_reply(c, 7);
		return;
	}
	need = h[at + 3] == 1 ? 4 : h[at + 3] == 4 ? 16 : h[at + 3] == 3 ? 1u + h[at + 4] : 0;
	if (!need || read_more(c, at + 4 + need + 2, deadline) < 0) {
		socks_reply(c, 8);
		return;
	}
	c->port = h[at + 4 + need] << 8 | h[at + 5 + need];
	if (h[at + 3] == 3) {
		if (set_host(c, (char *)h + at + 5, h[at + 4]) < 0 || c->port == 0) {
			socks_reply(c, 1);
			return;
		}
	} else {
		char t[INET6_ADDRSTRLEN + 2], v6[INET6_ADDRSTRLEN];

		inet_ntop(h[at + 3] == 1 ? AF_INET : AF_INET6, h + at + 4, v6, sizeof(v6));
		box_fmt(t, sizeof(t), h[at + 3] == 1 ? "%s" : "[%s]", v6);
		if (set_host(c, t, strlen(t)) < 0) {
			socks_reply(c, 1);
			return;
		}
	}
	c->body_off = c->head_len = 0;
	verdict = rules_verdict(c, why, sizeof(why));
	if (verdict) {
		log_verdict(c, "denied", verdict);
		socks_reply(c, 2);
		return;
	}
	if (open_upstream(c, why, sizeof(why), &denied) < 0) {
		log_verdict(c, denied ? "denied" : "error", why);
		socks_reply(c, denied ? 2 : 5);
		return;
	}
	log_verdict(c, "allowed", NULL);
	socks_reply(c, 0);
	relay(c);
	log_end(c);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct proxy *px = c->px;

	if (read_more(c, 1, box_now_ms() + HEAD_MS) == 0) {
		if ((unsigned char)c->head[0] == 5)
			serve_socks(c);
		else
			serve_http(c);
	}
	close(c->cfd);
	if (c->sfd >= 0)
		close(c->sfd);
	free(c);
	pthread_mutex_lock(&px->mu);
	px->active--;
	pthread_mutex_unlock(&px->mu);
	return NULL;
}

/* A socket of the guest's namespace, from the factory (one request at a time). */
static int guest_socket(struct proxy *px)
{
	struct box_err err;
	int fd = -1;

	box_err_init(&err);
	pthread_mutex_lock(&px->mu);
	if (write(px->factory, "s", 1) != 1 ||
	    box_ipc_recv_fds(px->factory, &fd, 1, box_now_ms() + 5000, &err) < 0)
		fd = -1;
	pthread_mutex_unlock(&px->mu);
	return fd;
}

/* A host connection to an exposed port, relayed to the guest's 127.0.0.1:c->port. */
static void *expose_main(void *arg)
{
	struct conn *c = arg;
	struct proxy *px = c->px;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)c->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1;

	c->sfd = guest_socket(px);
	if (c->sfd >= 0) {
		setsockopt(c->sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(c->sfd, (struct sockaddr *)&a, sizeof(a)) == 0)
			relay(c);
	}
	close(c->cfd);
	if (c->sfd >= 0)
		close(c->sfd);
	free(c);
	pthread_mutex_lock(&px->mu);
	px->active--;
	pthread_mutex_unlock(&px->mu);
	return NULL;
}

/* expose GUEST_PORT: a listener on the host's 127.0.0.1 (any free port) for it */
static int expose_port(struct proxy *px, int guest_port, char *msg, size_t mn)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int k, free_k = -1, l;

	for (k = 0; k < BOX_NETPROXY_EXPOSE_MAX; k++) {
		if (px->exposed[k].lfd >= 0 && px->exposed[k].guest_port == guest_port)
			return box_fmt(msg, mn, "ok %d\n", px->exposed[k].host_port), 0;
		if (px->exposed[k].lfd < 0 && free_k < 0)
			free_k = k;
	}
	if (free_k < 0)
		return box_fmt(msg, mn, "limit at most %d ports are exposed\n",
			       BOX_NETPROXY_EXPOSE_MAX), -1;
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 64) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0) {
		box_fmt(msg, mn, "err cannot listen on the host's loopback: %s\n", strerror(errno));
		if (l >= 0)
			close(l);
		return -1;
	}
	px->exposed[free_k] = (struct expose){ guest_port, ntohs(a.sin_port), l };
	return box_fmt(msg, mn, "ok %d\n", ntohs(a.sin_port)), 0;
}

static void unexpose_port(struct proxy *px, int guest_port)
{
	int k;

	for (k = 0; k < BOX_NETPROXY_EXPOSE_MAX; k++)
		if (px->exposed[k].lfd >= 0 &&
		    (guest_port == 0 || px->exposed[k].guest_port == guest_port)) {
			close(px->exposed[k].lfd);
			px->exposed[k].lfd = -1;
		}
}

static int recv_listeners(int ch, int *l);
static int local_port(int fd);

static void exec_close(struct proxy *px, int k)
{
	int j;

	close(px->execs[k].ctl);
	for (j = 0; j < 2; j++)
		if (px->execs[k].l[j] >= 0)
			close(px->execs[k].l[j]);
	px->execs[k] = (struct exec_port){ -1, { -1, -1 }, "" };
}

/* "exec": listeners of the exec's own in the guest, kept while fd (the exec's control
 * connection) stays open; the reply is "ok PORT TAG" (every attempt on them is logged with
 * TAG), or "err ...". */
static void exec_open(struct proxy *px, int fd, int64_t deadline)
{
	char msg[96];
	int k, l[2] = { -1, -1 };
	struct box_err err;

	for (k = 0; k < BOX_NETPROXY_EXECS_MAX && px->execs[k].ctl >= 0; k++)
		;
	box_err_init(&err);
	pthread_mutex_lock(&px->mu);
	if (k == BOX_NETPROXY_EXECS_MAX || write(px->factory, "l", 1) != 1 ||
	    recv_listeners(px->factory, l) < 0)
		l[0] = -1;
	pthread_mutex_unlock(&px->mu);
	if (l[0] < 0) {
		box_fmt(msg, sizeof(msg), "err no listener for the exec\n");
		send_all(fd, msg, strlen(msg), deadline);
		close(fd);
		return;
	}
	px->execs[k].ctl = fd;
	px->execs[k].l[0] = l[0];
	px->execs[k].l[1] = l[1];
	box_fmt(px->execs[k].tag, sizeof(px->execs[k].tag), "%ld.%llu", (long)getpid(),
		(unsigned long long)++px->next_exec);
	box_fmt(msg, sizeof(msg), "ok %d %s\n", local_port(l[0]), px->execs[k].tag);
	if (send_all(fd, msg, strlen(msg), deadline) < 0)
		exec_close(px, k);
}

/* One request on the control socket: "expose N", "unexpose N", "unexpose 0" (all), "exec". */
static void control_one(struct proxy *px, int ctl)
{
	int fd = accept4(ctl, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), port;
	char line[64], msg[160];
	size_t n = 0;
	int64_t deadline = box_now_ms() + 2000;

	if (fd < 0)
		return;
	while (n < sizeof(line) - 1 && !memchr(line, '\n', n)) {
		struct pollfd p1 = { fd, POLLIN, 0 };
		ssize_t r;

		if (box_now_ms() >= deadline || poll(&p1, 1, (int)(deadline - box_now_ms())) <= 0)
			break;
		r = read(fd, line + n, sizeof(line) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	line[n] = 0;
	if (strcmp(line, "exec\n") == 0) {
		exec_open(px, fd, deadline);
		return;
	}
	if (sscanf(line, "expose %d", &port) == 1 && port > 0 && port < 65536) {
		expose_port(px, port, msg, sizeof(msg));
	} else if (sscanf(line, "unexpose %d", &port) == 1 && port >= 0 && port < 65536) {
		unexpose_port(px, port);
		box_fmt(msg, sizeof(msg), "ok 0\n");
	} else {
		box_fmt(msg, sizeof(msg), "err bad request\n");
	}
	send_all(fd, msg, strlen(msg), deadline);
	close(fd);
}

/* One request line to the session's proxy and its one-line answer (without its newline) in
 * reply; the connection, or -1 with io_error. */
static int control_ask(const char *sdir, const char *line, char *reply, size_t rn,
		       struct box_err *err)
{
	char p[4096];
	size_t n = 0;
	int fd;
	int64_t deadline = box_now_ms() + 5000;

	box_fmt(p, sizeof(p), "%s/run/net.sock", sdir);
	fd = box_ipc_connect(p, err);
	if (fd < 0)
		return -1;
	if (send_all(fd, line, strlen(line), deadline) < 0) {
		close(fd);
		return box_err_sys(err, "the session's proxy");
	}
	while (n < rn - 1 && !memchr(reply, '\n', n)) {
		struct pollfd p1 = { fd, POLLIN, 0 };
		ssize_t r;

		if (box_now_ms() >= deadline || poll(&p1, 1, (int)(deadline - box_now_ms())) <= 0)
			break;
		r = read(fd, reply + n, rn - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	reply[n] = 0;
	if (n > 0 && reply[n - 1] == '\n')
		reply[n - 1] = 0;
	return fd;
}

int box_netproxy_exec_open(const char *sdir, int *port, char *tag, size_t tn,
			   struct box_err *err)
{
	char reply[160], t[32];
	int fd = control_ask(sdir, "exec\n", reply, sizeof(reply), err), v;

	if (fd < 0)
		return -1;
	if (sscanf(reply, "ok %d %31s", &v, t) == 2 && v > 0 && v < 65536 && strlen(t) < tn) {
		*port = v;
		box_fmt(tag, tn, "%s", t);
		return fd;
	}
	close(fd);
	return box_err_set(err, BOX_E_IO, "the session's proxy: %s", reply[0] ? reply : "no answer");
}

int box_netproxy_control(const char *sdir, int expose, int guest_port, int *host_port,
			 struct box_err *err)
{
	char line[64], reply[160];
	size_t n;
	int fd, v;

	box_fmt(line, sizeof(line), "%s %d\n", expose ? "expose" : "unexpose", guest_port);
	fd = control_ask(sdir, line, reply, sizeof(reply), err);
	if (fd < 0)
		return -1;
	close(fd);
	n = strlen(reply);
	if (sscanf(reply, "ok %d", &v) == 1) {
		if (host_port)
			*host_port = v;
		return 0;
	}
	if (strncmp(reply, "limit ", 6) == 0)
		return box_err_limit(err, BOX_E_LIMIT, "exposed_ports", BOX_NETPROXY_EXPOSE_MAX,
				     "ports", "%s", reply + 6);
	return box_err_set(err, BOX_E_IO, "the session's proxy: %s",
			   n ? reply : "no answer");
}

/* A connection on the guest's proxy port (guest_port 0; tag: the exec whose port it is, or
 * "") or on an exposed port. */
static void accept_one(struct proxy *px, int lfd, pthread_attr_t *attr, int guest_port,
		       const char *tag)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), one = 1, full;
	struct conn *c;
	pthread_t t;

	if (fd < 0)
		return;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c = calloc(1, sizeof(*c));
	pthread_mutex_lock(&px->mu);
	full = px->active >= BOX_NETPROXY_CONN_MAX;
	if (!full && c)
		px->active++;
	if (c)
		c->id = ++px->next_id;
	pthread_mutex_unlock(&px->mu);
	if (!c || full) {
		if (c) {
			c->px = px;
			c->cfd = fd;
			box_fmt(c->host, sizeof(c->host), "?");
			log_verdict(c, "denied", "too many connections at once");
		}
		free(c);
		close(fd);
		return;
	}
	c->px = px;
	c->cfd = fd;
	c->sfd = -1;
	c->port = guest_port;
	box_fmt(c->tag, sizeof(c->tag), "%s", tag);
	if (pthread_create(&t, attr, guest_port ? expose_main : conn_main, c) != 0) {
		close(fd);
		free(c);
		pthread_mutex_lock(&px->mu);
		px->active--;
		pthread_mutex_unlock(&px->mu);
	}
}

/* The fds the main thread polls, in p; what each is in what. */
enum what { W_GUEST, W_HOLDER, W_CTL, W_EXPOSED, W_EXEC_CTL, W_EXEC_L };

static nfds_t poll_set(struct proxy *px, const int *base, struct pollfd *p, int (*what)[2])
{
	static const enum what bw[] = { W_GUEST, W_GUEST, W_HOLDER, W_CTL };
	nfds_t n = 0;
	int k, j;

	for (k = 0; k < 4; k++)
		if (base[k] >= 0) {
			p[n] = (struct pollfd){ base[k], POLLIN, 0 };
			what[n][0] = (int)bw[k];
			what[n++][1] = -1;
		}
	for (k = 0; k < BOX_NETPROXY_EXPOSE_MAX; k++)
		if (px->exposed[k].lfd >= 0) {
			p[n] = (struct pollfd){ px->exposed[k].lfd, POLLIN, 0 };
			what[n][0] = W_EXPOSED;
			what[n++][1] = k;
		}
	for (k = 0; k < BOX_NETPROXY_EXECS_MAX; k++) {
		if (px->execs[k].ctl < 0)
			continue;
		p[n] = (struct pollfd){ px->execs[k].ctl, POLLIN, 0 };
		what[n][0] = W_EXEC_CTL;
		what[n++][1] = k;
		for (j = 0; j < 2; j++)
			if (px->execs[k].l[j] >= 0) {
				p[n] = (struct pollfd){ px->execs[k].l[j], POLLIN, 0 };
				what[n][0] = W_EXEC_L;
				what[n++][1] = k;
			}
	}
	return n;
}

static void __attribute__((noreturn)) proxy_main(int dirfd, const int *l, int pidfd,
						  int factory, int ctl)
{
	struct proxy px;
	pthread_attr_t attr;
	const char *dns = getenv("BOX_NET_DNS");
	const int base[4] = { l[0], l[1], pidfd, ctl };
	int k;

	memset(&px, 0, sizeof(px));
	px.dirfd = dirfd;
	px.factory = factory;
	for (k = 0; k < BOX_NETPROXY_EXPOSE_MAX; k++)
		px.exposed[k].lfd = -1;
	for (k = 0; k < BOX_NETPROXY_EXECS_MAX; k++)
		px.execs[k] = (struct exec_port){ -1, { -1, -1 }, "" };
	pthread_mutex_init(&px.mu, NULL);
	box_policy_init(&px.rules.allow);
	px.logfd = openat(dirfd, "net.log", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
			  0600);
	if (dns && *dns) {
		char ip[64];
		const char *colon = strrchr(dns, ':');
		long port = colon ? strtol(colon + 1, NULL, 10) : 53;

		box_fmt(ip, sizeof(ip), "%.*s", colon ? (int)(colon - dns) : (int)strlen(dns), dns);
		px.dns.sin_family = AF_INET;
		if (inet_pton(AF_INET, ip, &px.dns.sin_addr) == 1 && port > 0 && port < 65536)
			px.dns.sin_port = htons((uint16_t)port);
	}
	signal(SIGPIPE, SIG_IGN);
	/* what a guest sends is parsed here: as root, the proxy keeps only its descriptors and
	 * becomes nobody (it needs no privilege to connect, or to listen on a loopback port) */
	if (getuid() == 0 && (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0))
		_exit(1);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);   /* a change of ids cleared it */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (;;) {
		struct pollfd p[4 + BOX_NETPROXY_EXPOSE_MAX + 3 * BOX_NETPROXY_EXECS_MAX];
		int what[4 + BOX_NETPROXY_EXPOSE_MAX + 3 * BOX_NETPROXY_EXECS_MAX][2];
		nfds_t n = poll_set(&px, base, p, what), i;

		if (poll(p, n, -1) < 0 && errno != EINTR)
			_exit(1);
		for (i = 0; i < n; i++) {
			int x = what[i][1];

			if (!p[i].revents)
				continue;
			switch ((enum what)what[i][0]) {
			case W_HOLDER:
				_exit(0);
			case W_GUEST:
				accept_one(&px, p[i].fd, &attr, 0, "");
				break;
			case W_CTL:
				control_one(&px, ctl);
				break;
			case W_EXPOSED:
				if (px.exposed[x].lfd == p[i].fd)
					accept_one(&px, p[i].fd, &attr, px.exposed[x].guest_port, "");
				break;
			case W_EXEC_CTL:
				/* the exec ended (or broke its connection): its listeners go */
				if (px.execs[x].ctl == p[i].fd)
					exec_close(&px, x);
				break;
			case W_EXEC_L:
				if (px.execs[x].ctl >= 0)
					accept_one(&px, p[i].fd, &attr, 0, px.execs[x].tag);
				break;
			}
		}
	}
}

/* ---- start ---- */

/* A listening socket of this namespace on 127.0.0.1 (family AF_INET) or [::1] (AF_INET6,
 * v6 only) at port (0: any), or -1. */
static int loopback_listener(int family, int port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1, l = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)(void *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)(void *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		a->sin6_addr = in6addr_loopback;
		len = sizeof(*a);
	}
	if (l < 0)
		return -1;
	if (setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    (family == AF_INET6 && setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) ||
	    bind(l, (struct sockaddr *)&ss, len) < 0 || listen(l, 128) < 0) {
		close(l);
		return -1;
	}
	return l;
}

static int local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	return ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)(void *)&ss)->sin_port
					     : ((struct sockaddr_in6 *)(void *)&ss)->sin6_port);
}

/* Listeners on 127.0.0.1 and [::1] at one port (0: any free one, tried a few times), sent
 * on ch: two descriptors, the second the first again when the guest has no IPv6 loopback.
 * 0, or -1 when not even the IPv4 one could be had. */
static int send_listeners(int ch, int port)
{
	struct box_err err;
	int l[2] = { -1, -1 }, tries, rc;

	for (tries = 0; tries < 8; tries++) {
		l[0] = loopback_listener(AF_INET, port);
		if (l[0] < 0)
			return -1;
		l[1] = loopback_listener(AF_INET6, local_port(l[0]));
		/* a port free on 127.0.0.1 but taken on [::1]: another one */
		if (l[1] >= 0 || port != 0 || errno != EADDRINUSE)
			break;
		close(l[0]);
		l[0] = -1;
	}
	if (l[0] < 0)
		return -1;
	box_err_init(&err);
	rc = box_ipc_send_fds(ch, (int[]){ l[0], l[1] >= 0 ? l[1] : l[0] }, 2, &err);
	close(l[0]);
	if (l[1] >= 0)
		close(l[1]);
	return rc;
}

/* The socket factory, in the guest's network namespace: "s" asks for one TCP socket of that
 * namespace, to connect to a guest server from the host's side (expose); "l" for an exec's
 * own listeners (send_listeners). It ends with its channel or its parent. */
static void __attribute__((noreturn)) factory_main(int ch)
{
	struct box_err err;
	char b;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	while (read(ch, &b, 1) == 1) {
		int s;

		if (b == 'l') {
			if (send_listeners(ch, 0) < 0)
				(void)!write(ch, "", 1);   /* no descriptors: a plain byte */
			continue;
		}
		s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		box_err_init(&err);
		if (s < 0 || box_ipc_send_fds(ch, &s, 1, &err) < 0)
			_exit(1);
		close(s);
	}
	_exit(0);
}

/* The two descriptors of send_listeners into l (l[1] -1 when there is no IPv6 one). */
static int recv_listeners(int ch, int *l)
{
	struct box_err err;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	box_err_init(&err);
	if (box_ipc_recv_fds(ch, l, 2, box_now_ms() + 5000, &err) < 0)
		return -1;
	if (getsockname(l[1], (struct sockaddr *)&ss, &len) < 0 || ss.ss_family != AF_INET6) {
		close(l[1]);
		l[1] = -1;
	}
	return 0;
}

/* The listening sockets (127.0.0.1 and [::1] at BOX_NETPROXY_PORT), made in the guest's
 * network namespace by a child that joins it and stays there as the socket factory
 * (*factory: its channel). 0 with l filled, or -1. */
static int guest_listener(int pidfd, const int *nsfds, int *factory, int *l)
{
	int sp[2], st;
	pid_t j;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return -1;
	j = fork();
	if (j == 0) {
		close(sp[0]);
		if (setns(pidfd, CLONE_NEWNET) < 0 &&
		    (!nsfds || nsfds[NSFD_USER] < 0 || setns(nsfds[NSFD_USER], 0) < 0 ||
		     setns(nsfds[NSFD_NET], 0) < 0))
			_exit(1);
		if (send_listeners(sp[1], BOX_NETPROXY_PORT) < 0)
			_exit(1);
		factory_main(sp[1]);
	}
	close(sp[1]);
	if (j < 0 || recv_listeners(sp[0], l) < 0) {
		close(sp[0]);
		if (j > 0)
			waitpid(j, &st, 0);
		return -1;
	}
	*factory = sp[0];
	return 0;
}

pid_t box_netproxy_spawn(const char *sdir, int pidfd, const int *nsfds)
{
	char p[4096];
	int lfd[2] = { -1, -1 }, dirfd, factory = -1, ctl;
	pid_t pid;
	struct box_err err;

	if (pidfd < 0)
		return -1;
	box_fmt(p, sizeof(p), "%s/run", sdir);
	dirfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dirfd < 0)
		return -1;
	box_fmt(p, sizeof(p), "%s/run/net.sock", sdir);
	box_err_init(&err);
	ctl = box_ipc_listen(p, &err);
	if (ctl < 0 || guest_listener(pidfd, nsfds, &factory, lfd) < 0) {
		if (ctl >= 0)
			close(ctl);
		close(dirfd);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		int pfd = dup(pidfd), keep[6], k, fd;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		keep[0] = fcntl(lfd[0], F_DUPFD_CLOEXEC, 100);
		keep[1] = fcntl(dirfd, F_DUPFD_CLOEXEC, 100);
		keep[2] = pfd >= 0 ? fcntl(pfd, F_DUPFD_CLOEXEC, 100) : -1;
		keep[3] = fcntl(factory, F_DUPFD_CLOEXEC, 100);
		keep[4] = fcntl(ctl, F_DUPFD_CLOEXEC, 100);
		/* no IPv6 loopback in the guest: a second descriptor of the IPv4 one */
		keep[5] = fcntl(lfd[1] >= 0 ? lfd[1] : lfd[0], F_DUPFD_CLOEXEC, 100);
		for (k = 0; k < 6; k++)
			if (keep[k] < 0)
				_exit(1);
		/* nothing of the keeper's stays open here but these */
		for (k = 0; k < 6; k++)
			if (dup3(keep[k], 3 + k, O_CLOEXEC) < 0)
				_exit(1);
		if (syscall(SYS_close_range, 9, ~0U, 0) < 0)
			for (fd = 9; fd < 1024; fd++)
				close(fd);
		proxy_main(4, (const int[]){ 3, lfd[1] >= 0 ? 8 : -1 }, 5, 6, 7);
	}
	close(lfd[0]);
	if (lfd[1] >= 0)
		close(lfd[1]);
	close(dirfd);
	close(factory);
	close(ctl);
	return pid;
}

/* ---- the exec's view ---- */

int64_t box_netproxy_log_mark(const char *sdir)
{
	char p[4096];
	struct stat st;

	box_fmt(p, sizeof(p), "%s/run/net.log", sdir);
	return stat(p, &st) == 0 ? (int64_t)st.st_size : 0;
}

/* Reads the log from mark (bounded) and merges each attempt's lines into arr; the number of
 * allowed attempts whose end is not there yet. */
static int attempts_read(const char *sdir, int64_t mark, const char *tag, cJSON *arr)
{
	char p[4096];
	struct box_buf b;
	struct box_err err;
	int fd, open_n = 0;
	char *line, *nl;
	struct stat st;

	box_fmt(p, sizeof(p), "%s/run/net.log", sdir);
	fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) == 0 && st.st_size < mark)
		mark = 0;   /* the proxy started the log again */
	box_buf_init(&b, (size_t)BOX_NETPROXY_LOG_MAX);
	box_err_init(&err);
	if (lseek(fd, mark, SEEK_SET) < 0 || box_buf_read_fd(&b, fd, &err) < 0 ||
	    box_buf_append(&b, "", 1, &err) < 0) {
		close(fd);
		box_buf_release(&b);
		return 0;
	}
	close(fd);
	for (line = b.data; line && *line; line = nl ? nl + 1 : NULL) {
		cJSON *o, *it, *m;
		int64_t id;

		nl = strchr(line, '\n');
		if (!nl)
			break;   /* a line being written */
		*nl = 0;
		o = cJSON_Parse(line);
		id = box_json_get_int(o, "id", -1);
		cJSON_ArrayForEach(it, arr)
			if (box_json_get_int(it, "id", -2) == id)
				break;
		if (!it && cJSON_GetObjectItemCaseSensitive(o, "host") &&
		    (!tag || strcmp(box_json_get_str(o, "exec", tag), tag) == 0) &&
		    cJSON_GetArraySize(arr) < BOX_NETPROXY_ATTEMPTS_MAX) {
			cJSON_AddItemToArray(arr, o);
			o = NULL;
		} else if (it) {
			cJSON_ArrayForEach(m, o)
				if (strcmp(m->string, "id") != 0 && strcmp(m->string, "phase") != 0) {
					cJSON_DeleteItemFromObjectCaseSensitive(it, m->string);
					cJSON_AddItemToObject(it, m->string, cJSON_Duplicate(m, 1));
				}
			cJSON_ReplaceItemInObjectCaseSensitive(it, "phase", cJSON_CreateString("end"));
		}
		cJSON_Delete(o);
	}
	box_buf_release(&b);
	{
		cJSON *it;

		cJSON_ArrayForEach(it, arr)
			if (strcmp(box_json_get_str(it, "phase", ""), "open") == 0)
				open_n++;
	}
	return open_n;
}

cJSON *box_netproxy_attempts(const char *sdir, int64_t mark, const char *tag, int wait_ms)
{
	int64_t until = box_now_ms() + wait_ms;
	cJSON *arr = NULL, *it;

	for (;;) {
		cJSON_Delete(arr);
		arr = cJSON_CreateArray();
		if (!arr || attempts_read(sdir, mark, tag, arr) == 0 || box_now_ms() >= until)
			break;
		{
			struct timespec ts = { 0, 20 * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
	if (!arr || cJSON_GetArraySize(arr) == 0) {
		cJSON_Delete(arr);
		return NULL;
	}
	cJSON_ArrayForEach(it, arr) {
		if (strcmp(box_json_get_str(it, "phase", ""), "open") == 0) {
			cJSON_AddItemToObject(it, "bytes_sent", cJSON_CreateNull());
			cJSON_AddItemToObject(it, "bytes_received", cJSON_CreateNull());
		}
		cJSON_DeleteItemFromObjectCaseSensitive(it, "phase");
		cJSON_DeleteItemFromObjectCaseSensitive(it, "id");
		cJSON_DeleteItemFromObjectCaseSensitive(it, "exec");
	}
	return arr;
}
