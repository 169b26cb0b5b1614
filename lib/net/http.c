#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <curl/curl.h>

#include "base64.h"
#include "http.h"
#include "clock.h"
#include "json.h"
#include "utf8.h"
#include "banned.h"

#define MAX_PINNED 16
#define MAX_ADDRINFO 1024       /* bound on the resolver's answer we walk */
#define MAX_REQ_HEADER_BYTES (16 * 1024)

struct pinned {
	struct sockaddr_storage addr[MAX_PINNED];
	int n;
};

/* State of one exchange (one hop of a redirect chain). */
struct hop {
	const struct pinned *pins;
	int allow_private;
	int socket_refused;
	char refused[INET6_ADDRSTRLEN + 64];

	struct box_buf *body;
	int body_over;

	cJSON *headers;
	size_t hdr_count, hdr_bytes;
	int hdr_over;         /* 1: too many, 2: too many bytes, 3: out of memory */
};

static int global_init(struct box_err *err)
{
	static int done;

	if (done)
		return 0;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return box_err_set(err, BOX_E_INTERNAL, "curl_global_init failed");
	done = 1;
	return 0;
}

void box_http_resp_init(struct box_http_resp *r)
{
	memset(r, 0, sizeof(*r));
	box_buf_init(&r->body, 0);
}

void box_http_resp_release(struct box_http_resp *r)
{
	cJSON_Delete(r->headers);
	box_buf_release(&r->body);
	free(r->url);
	r->headers = NULL;
	r->url = NULL;
	r->status = 0;
}

static int is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		(c && strchr("!#$%&'*+-.^_`|~", c));
}

static int header_is(const char *h, const char *name)
{
	size_t n = strlen(name);

	return strncasecmp(h, name, n) == 0 && h[n] == ':';
}

int box_http_check_header(const char *h, struct box_err *err)
{
	size_t i, len;
	const char *colon;

	if (!h)
		return box_err_set(err, BOX_E_INVALID, "missing request header");
	len = strnlen(h, MAX_REQ_HEADER_BYTES + 1);
	if (len > MAX_REQ_HEADER_BYTES)
		return box_err_set(err, BOX_E_INVALID, "request header longer than %d bytes",
				   MAX_REQ_HEADER_BYTES);
	colon = strchr(h, ':');
	if (!colon || colon == h)
		return box_err_set(err, BOX_E_INVALID, "request header \"%.64s\" is not \"Name: value\"", h);
	for (i = 0; h + i < colon; i++)
		if (!is_tchar((unsigned char)h[i]))
			return box_err_set(err, BOX_E_INVALID, "bad character in request header name \"%.*s\"",
					   (int)(colon - h) > 64 ? 64 : (int)(colon - h), h);
	for (i = (size_t)(colon - h) + 1; i < len; i++) {
		unsigned char c = (unsigned char)h[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return box_err_set(err, BOX_E_INVALID,
					   "control character (CR, LF, ...) in the value of request header \"%.*s\"",
					   (int)(colon - h) > 64 ? 64 : (int)(colon - h), h);
	}
	if (header_is(h, "Host") || header_is(h, "Content-Length") || header_is(h, "Transfer-Encoding"))
		return box_err_set(err, BOX_E_INVALID, "request header \"%.*s\" is not allowed",
				   (int)(colon - h), h);
	return 0;
}

/*
 * Resolves host once. getaddrinfo cannot be interrupted, so the deadline is checked when it
 * returns: the resolver's own timeouts (resolv.conf) bound how far it can overrun, and the
 * broker that started box-http kills it at its own deadline. (getaddrinfo_a would bound it
 * here, but its helper threads leave glibc state that valgrind reports at exit.)
 */
static int resolve(const char *host, int port, int64_t deadline, int64_t timeout_ms,
		   struct addrinfo **res, struct box_err *err)
{
	struct addrinfo hints;
	char name[BOX_HOST_MAX + 1], service[8];
	size_t n = strlen(host);
	int rc;

	if (n >= sizeof(name))
		return box_err_set(err, BOX_E_INVALID, "host name too long");
	if (n >= 2 && host[0] == '[') {
		memcpy(name, host + 1, n - 2);
		name[n - 2] = 0;
	} else {
		memcpy(name, host, n + 1);
	}
	snprintf(service, sizeof(service), "%d", port);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	*res = NULL;
	rc = getaddrinfo(name, service, &hints, res);
	if (rc != 0) {
		enum box_code code = rc == EAI_NONAME || rc == EAI_NODATA ? BOX_E_NOT_FOUND : BOX_E_IO;

		*res = NULL;
		box_err_set(err, code, "cannot resolve %s: %s", host,
			    rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		err->retryable = rc == EAI_AGAIN;
		return -1;
	}
	if (box_now_ms() >= deadline) {
		freeaddrinfo(*res);
		*res = NULL;
		return box_err_limit(err, BOX_E_TIMEOUT, "http_timeout", timeout_ms, "ms",
				     "resolving %s timed out after %lld ms", host, (long long)timeout_ms);
	}
	return 0;
}

static void addr_text(const struct sockaddr *sa, char *out, size_t n)
{
	const void *a = sa->sa_family == AF_INET ?
		(const void *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr :
		(const void *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;

	if (!inet_ntop(sa->sa_family, a, out, (socklen_t)n))
		snprintf(out, n, "?");
}

/* Resolves u->host once, refuses private answers (unless allowed) and keeps what may be
 * connected to. */
static int check_addresses(const struct box_policy *p, const struct box_url *u, int64_t deadline,
			   int64_t timeout_ms, struct pinned *pins, struct box_err *err)
{
	struct addrinfo *res = NULL, *ai;
	char text[INET6_ADDRSTRLEN];
	const char *why;
	int i;

	if (resolve(u->host, u->port, deadline, timeout_ms, &res, err) < 0)
		return -1;
	pins->n = 0;
	for (ai = res, i = 0; ai && i < MAX_ADDRINFO; ai = ai->ai_next, i++) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		if ((size_t)ai->ai_addrlen > sizeof(pins->addr[0]))
			continue;
		why = box_policy_private_reason(ai->ai_addr);
		if (why && !p->allow_private) {
			addr_text(ai->ai_addr, text, sizeof(text));
			freeaddrinfo(res);
			return box_err_set(err, BOX_E_POLICY,
					   "host %s resolves to %s (%s): private networks are not allowed",
					   u->host, text, why);
		}
		if (pins->n < MAX_PINNED)
			memcpy(&pins->addr[pins->n++], ai->ai_addr, ai->ai_addrlen);
	}
	freeaddrinfo(res);
	if (pins->n == 0)
		return box_err_set(err, BOX_E_NOT_FOUND, "host %s has no IP address", u->host);
	return 0;
}

/* "host:port:addr,addr" for CURLOPT_RESOLVE, so that libcurl never resolves by itself. */
static struct curl_slist *resolve_entry(const struct box_url *u, const struct pinned *pins,
					struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(4096);
	struct curl_slist *l;
	char text[INET6_ADDRSTRLEN];
	int i;

	if (box_buf_printf(&b, err, "%s:%d:", u->host, u->port) < 0)
		return NULL;
	for (i = 0; i < pins->n; i++) {
		const struct sockaddr *sa = (const struct sockaddr *)&pins->addr[i];

		addr_text(sa, text, sizeof(text));
		if (box_buf_printf(&b, err, sa->sa_family == AF_INET6 ? "%s[%s]" : "%s%s",
				   i ? "," : "", text) < 0) {
			box_buf_release(&b);
			return NULL;
		}
	}
	l = curl_slist_append(NULL, b.data);
	box_buf_release(&b);
	if (!l)
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
	return l;
}

static int same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return 0;
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_addr.s_addr == y->sin_addr.s_addr && x->sin_port == y->sin_port;
	}
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

		return memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0 &&
			x->sin6_port == y->sin6_port;
	}
	return 0;
}

/* The last line of defence: whatever libcurl decided, a socket only goes to a checked address. */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct hop *h = clientp;
	const struct sockaddr *sa = &a->addr;
	const char *why;
	int i;

	if (purpose != CURLSOCKTYPE_IPCXN || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) {
		h->socket_refused = 1;
		snprintf(h->refused, sizeof(h->refused), "a socket that is no TCP/IP connection");
		return CURL_SOCKET_BAD;
	}
	why = box_policy_private_reason(sa);
	for (i = 0; i < h->pins->n; i++)
		if (same_addr(sa, (const struct sockaddr *)&h->pins->addr[i]))
			break;
	if (i == h->pins->n || (why && !h->allow_private)) {
		char text[INET6_ADDRSTRLEN];

		addr_text(sa, text, sizeof(text));
		h->socket_refused = 1;
		snprintf(h->refused, sizeof(h->refused), "%s (%s)", text,
			 i == h->pins->n ? "not the checked address" : why);
		return CURL_SOCKET_BAD;
	}
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *userdata)
{
	struct hop *h = userdata;
	struct box_err e;
	size_t n = size * nmemb;

	if (box_buf_append(h->body, p, n, &e) < 0) {
		h->body_over = e.code == BOX_E_LIMIT ? 1 : 2;
		return 0;
	}
	return n;
}

static int add_header(struct hop *h, const char *line, size_t n)
{
	struct box_buf val = BOX_BUF_INIT(2 * BOX_HTTP_MAX_RESP_HEADER_BYTES);
	char name[256];
	const char *colon = memchr(line, ':', n), *v, *end = line + n;
	cJSON *old, *item;
	struct box_err e;
	size_t i, nl;

	if (!colon || colon == line || (size_t)(colon - line) >= sizeof(name))
		return 0;
	nl = (size_t)(colon - line);
	for (i = 0; i < nl; i++) {
		unsigned char c = (unsigned char)line[i];

		if (!is_tchar(c))
			return 0;
		name[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
	}
	name[nl] = 0;
	for (v = colon + 1; v < end && (*v == ' ' || *v == '\t'); v++)
		;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	old = cJSON_GetObjectItemCaseSensitive(h->headers, name);
	if (old && cJSON_IsString(old) && (box_buf_puts(&val, old->valuestring, &e) < 0 ||
					   box_buf_puts(&val, ", ", &e) < 0))
		goto oom;
	if (box_utf8_sanitize(v, (size_t)(end - v), &val, &e) < 0)
		goto oom;
	item = cJSON_CreateString(val.data ? val.data : "");
	if (!item)
		goto oom;
	if (old)
		cJSON_ReplaceItemInObjectCaseSensitive(h->headers, name, item);
	else
		cJSON_AddItemToObject(h->headers, name, item);
	box_buf_release(&val);
	return 0;
oom:
	box_buf_release(&val);
	return -1;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *userdata)
{
	struct hop *h = userdata;
	size_t n = size * nmemb, len = n;

	h->hdr_bytes += n;
	if (h->hdr_bytes > BOX_HTTP_MAX_RESP_HEADER_BYTES) {
		h->hdr_over = 2;
		return 0;
	}
	while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r'))
		len--;
	if (len == 0)
		return n;
	if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
		/* A new response (after 1xx): only the last one's headers are reported. */
		cJSON_Delete(h->headers);
		h->headers = cJSON_CreateObject();
		if (!h->headers) {
			h->hdr_over = 3;
			return 0;
		}
		return n;
	}
	if (++h->hdr_count > BOX_HTTP_MAX_RESP_HEADERS) {
		h->hdr_over = 1;
		return 0;
	}
	if (add_header(h, p, len) < 0) {
		h->hdr_over = 3;
		return 0;
	}
	return n;
}

struct exchange {
	const char *method;
	const struct curl_slist *headers;
	const void *body;
	size_t body_len;
	int has_body;
	int64_t deadline, timeout_ms;
	size_t max_body;
};

static int timeout_err(const struct exchange *x, struct box_err *err)
{
	return box_err_limit(err, BOX_E_TIMEOUT, "http_timeout", x->timeout_ms, "ms",
			     "HTTP request timed out after %lld ms", (long long)x->timeout_ms);
}

static int set_method(CURL *c, const struct exchange *x)
{
	int rc = 0;

	if (strcmp(x->method, "GET") == 0)
		return curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	if (strcmp(x->method, "HEAD") == 0)
		return curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	if (strcmp(x->method, "POST") != 0)
		rc |= curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, x->method);
	if (x->has_body) {
		rc |= curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
		rc |= curl_easy_setopt(c, CURLOPT_POSTFIELDS, x->body ? x->body : "");
	}
	return rc;
}

static int perform_error(CURLcode rc, const struct hop *h, const struct exchange *x,
			 const char *errbuf, struct box_err *err)
{
	if (h->body_over == 1 || rc == CURLE_FILESIZE_EXCEEDED)
		return box_err_limit(err, BOX_E_LIMIT, "http_body_bytes", (int64_t)x->max_body, "bytes",
				     "HTTP response body larger than %zu bytes", x->max_body);
	if (h->hdr_over == 1)
		return box_err_limit(err, BOX_E_LIMIT, "http_header_count", BOX_HTTP_MAX_RESP_HEADERS,
				     "headers", "more than %d HTTP response headers",
				     BOX_HTTP_MAX_RESP_HEADERS);
	if (h->hdr_over == 2)
		return box_err_limit(err, BOX_E_LIMIT, "http_header_bytes",
				     BOX_HTTP_MAX_RESP_HEADER_BYTES, "bytes",
				     "HTTP response headers larger than %d bytes",
				     BOX_HTTP_MAX_RESP_HEADER_BYTES);
	if (h->body_over || h->hdr_over)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory reading the HTTP response");
	if (h->socket_refused)
		return box_err_set(err, BOX_E_POLICY, "connection to %s refused", h->refused);
	if (rc == CURLE_OPERATION_TIMEDOUT)
		return timeout_err(x, err);
	if (rc == CURLE_UNSUPPORTED_PROTOCOL)
		return box_err_set(err, BOX_E_POLICY, "protocol refused: %s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
	box_err_set(err, BOX_E_IO, "HTTP request failed: %s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
	err->retryable = rc == CURLE_COULDNT_CONNECT || rc == CURLE_RECV_ERROR ||
		rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING;
	return -1;
}

/* One request without following redirects; resp gets status, headers and body. */
static int exchange_once(const struct box_policy *p, const struct box_url *u,
			 const struct exchange *x, struct box_http_resp *resp, struct box_err *err)
{
	struct pinned pins;
	struct hop h;
	struct curl_slist *resolve = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	int64_t left;
	CURL *c = NULL;
	CURLcode rc;
	int set = 0, ret = -1;

	if (check_addresses(p, u, x->deadline, x->timeout_ms, &pins, err) < 0)
		return -1;
	left = x->deadline - box_now_ms();
	if (left <= 0)
		return timeout_err(x, err);
	if (u->host[0] != '[') {
		resolve = resolve_entry(u, &pins, err);
		if (!resolve)
			return -1;
	}
	memset(&h, 0, sizeof(h));
	h.pins = &pins;
	h.allow_private = p->allow_private;
	box_buf_release(&resp->body);
	box_buf_init(&resp->body, x->max_body);
	h.body = &resp->body;
	h.headers = cJSON_CreateObject();
	c = curl_easy_init();
	if (!c || !h.headers) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	set |= curl_easy_setopt(c, CURLOPT_URL, u->url);
	set |= curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	set |= curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	set |= curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	set |= curl_easy_setopt(c, CURLOPT_PROXY, "");
	set |= curl_easy_setopt(c, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
	set |= curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	set |= curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	set |= curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	set |= curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)left);
	set |= curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)left);
	set |= curl_easy_setopt(c, CURLOPT_USERAGENT, "box/" PACKAGE_VERSION);
	if (resolve)
		set |= curl_easy_setopt(c, CURLOPT_RESOLVE, resolve);
	set |= curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	set |= curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &h);
	set |= curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	set |= curl_easy_setopt(c, CURLOPT_WRITEDATA, &h);
	set |= curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	set |= curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
	set |= curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)x->max_body);
	set |= curl_easy_setopt(c, CURLOPT_HTTPHEADER, x->headers);
	set |= curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	set |= set_method(c, x);
	if (set) {
		box_err_set(err, BOX_E_INTERNAL, "libcurl lacks a required option");
		goto out;
	}
	rc = curl_easy_perform(c);
	if (rc != CURLE_OK) {
		perform_error(rc, &h, x, errbuf, err);
		goto out;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
	cJSON_Delete(resp->headers);
	resp->headers = h.headers;
	h.headers = NULL;
	ret = 0;
out:
	cJSON_Delete(h.headers);
	curl_easy_cleanup(c);
	curl_slist_free_all(resolve);
	return ret;
}

static int same_origin(const struct box_url *a, const struct box_url *b)
{
	return strcmp(a->scheme, b->scheme) == 0 && strcmp(a->host, b->host) == 0 && a->port == b->port;
}

/* The request headers for one hop: the caller's, minus credentials when the origin changed,
 * plus the suppression of libcurl's Expect and form Content-Type defaults. */
static struct curl_slist *hop_headers(const struct box_http_req *req, int drop_credentials,
				      struct box_err *err)
{
	struct curl_slist *l = NULL, *t;
	int has_expect = 0, has_ctype = 0;
	size_t i;

	for (i = 0; i < req->n_headers; i++) {
		const char *hd = req->headers[i], *colon = strchr(hd, ':'), *v;
		char *tmp = NULL;

		if (header_is(hd, "Expect"))
			has_expect = 1;
		if (header_is(hd, "Content-Type"))
			has_ctype = 1;
		if (drop_credentials && (header_is(hd, "Authorization") || header_is(hd, "Cookie") ||
					 header_is(hd, "Proxy-Authorization")))
			continue;
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		/* libcurl reads "Name:" as "remove this header"; "Name;" sends it empty. */
		if (!*v) {
			tmp = strndup(hd, (size_t)(colon - hd) + 1);
			if (tmp)
				tmp[colon - hd] = ';';
		}
		t = (tmp || *v) ? curl_slist_append(l, tmp ? tmp : hd) : NULL;
		free(tmp);
		if (!t)
			goto oom;
		l = t;
	}
	if (!has_expect) {
		if (!(t = curl_slist_append(l, "Expect:")))
			goto oom;
		l = t;
	}
	if (!has_ctype) {
		if (!(t = curl_slist_append(l, "Content-Type:")))
			goto oom;
		l = t;
	}
	return l;
oom:
	curl_slist_free_all(l);
	box_err_set(err, BOX_E_INTERNAL, "out of memory");
	return NULL;
}

static int is_redirect(long status)
{
	return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* Resolves a Location value against the current URL, as a browser would. */
static char *next_url(const char *base, const char *location, struct box_err *err)
{
	CURLU *h = curl_url();
	char *s = NULL, *out = NULL;
	CURLUcode rc;

	if (!h) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return NULL;
	}
	rc = curl_url_set(h, CURLUPART_URL, base, 0);
	if (rc == CURLUE_OK)
		rc = curl_url_set(h, CURLUPART_URL, location, CURLU_URLENCODE | CURLU_ALLOW_SPACE);
	if (rc == CURLUE_OK)
		rc = curl_url_get(h, CURLUPART_URL, &s, 0);
	if (rc != CURLUE_OK)
		box_err_set(err, BOX_E_INVALID, "bad redirect location: %s", curl_url_strerror(rc));
	else if (!(out = strdup(s)))
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
	curl_free(s);
	curl_url_cleanup(h);
	return out;
}

static void prefix_message(struct box_err *err, const char *prefix)
{
	char msg[BOX_ERR_MSG_MAX];

	snprintf(msg, sizeof(msg), "%s%.*s", prefix, (int)(sizeof(msg) - 1 - strlen(prefix)),
		 err->message);
	memcpy(err->message, msg, sizeof(msg));
}

static int check_request(const struct box_http_req *req, struct box_err *err)
{
	size_t i;

	if (!box_policy_method_bit(req->method))
		return box_err_set(err, BOX_E_INVALID, "unsupported HTTP method \"%.16s\"",
				   req->method ? req->method : "");
	if (req->body_len && (strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0))
		return box_err_set(err, BOX_E_INVALID, "a %s request takes no body", req->method);
	if (req->body_len && !req->body)
		return box_err_set(err, BOX_E_INVALID, "missing request body");
	if (req->n_headers > BOX_HTTP_MAX_REQ_HEADERS)
		return box_err_limit(err, BOX_E_LIMIT, "http_request_headers", BOX_HTTP_MAX_REQ_HEADERS,
				     "headers", "more than %d request headers", BOX_HTTP_MAX_REQ_HEADERS);
	if (req->timeout_ms < 0)
		return box_err_set(err, BOX_E_INVALID, "negative timeout");
	for (i = 0; i < req->n_headers; i++)
		if (box_http_check_header(req->headers[i], err) < 0)
			return -1;
	return 0;
}

int box_http_request(const struct box_policy *p, const struct box_http_req *req,
		     struct box_http_resp *resp, struct box_err *err)
{
	struct box_url first, cur;
	struct exchange x;
	struct curl_slist *headers = NULL;
	char *url = NULL, *next;
	const cJSON *loc;
	int hop, ret = -1;

	memset(&first, 0, sizeof(first));
	memset(&cur, 0, sizeof(cur));
	box_http_resp_release(resp);
	if (check_request(req, err) < 0)
		return -1;
	memset(&x, 0, sizeof(x));
	x.method = req->method;
	x.body = req->body;
	x.body_len = req->body_len;
	x.has_body = strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0;
	x.timeout_ms = req->timeout_ms ? req->timeout_ms : BOX_HTTP_DEFAULT_TIMEOUT_MS;
	x.deadline = box_now_ms() + x.timeout_ms;
	x.max_body = req->max_body_bytes ? req->max_body_bytes : BOX_HTTP_DEFAULT_MAX_BODY;
	if (box_policy_check_url(p, req->method, req->url, &first, err) < 0)
		return -1;
	if (global_init(err) < 0 || !(url = strdup(first.url))) {
		if (err->code == BOX_OK)
			box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	for (hop = 0; hop <= BOX_HTTP_MAX_REDIRECTS; hop++) {
		box_url_release(&cur);
		if (box_policy_check_url(p, x.method, url, &cur, err) < 0) {
			if (hop > 0)
				prefix_message(err, "redirect refused: ");
			goto out;
		}
		curl_slist_free_all(headers);
		headers = hop_headers(req, !same_origin(&first, &cur), err);
		if (!headers)
			goto out;
		x.headers = headers;
		if (exchange_once(p, &cur, &x, resp, err) < 0)
			goto out;
		loc = cJSON_GetObjectItemCaseSensitive(resp->headers, "location");
		if (!is_redirect(resp->status) || !cJSON_IsString(loc)) {
			resp->url = strdup(cur.url);
			if (!resp->url) {
				box_err_set(err, BOX_E_INTERNAL, "out of memory");
				goto out;
			}
			ret = 0;
			goto out;
		}
		if (hop == BOX_HTTP_MAX_REDIRECTS)
			break;
		next = next_url(cur.url, loc->valuestring, err);
		if (!next)
			goto out;
		free(url);
		url = next;
		if ((resp->status == 303 && strcmp(x.method, "HEAD") != 0) ||
		    ((resp->status == 301 || resp->status == 302) && strcmp(x.method, "POST") == 0)) {
			x.method = "GET";
			x.has_body = 0;
			x.body = NULL;
			x.body_len = 0;
		}
	}
	box_err_limit(err, BOX_E_LIMIT, "http_redirects", BOX_HTTP_MAX_REDIRECTS, "redirects",
		      "more than %d HTTP redirects", BOX_HTTP_MAX_REDIRECTS);
out:
	if (ret < 0)
		box_http_resp_release(resp);
	curl_slist_free_all(headers);
	free(url);
	box_url_release(&first);
	box_url_release(&cur);
	return ret;
}

static const struct box_field request_fields[] = {
	{ "method", BOX_F_STRING, 0, 16, 0, "HTTP method (GET)", "METHOD" },
	{ "url", BOX_F_STRING, 0, BOX_URL_MAX, 0, "URL to fetch", "URL" },
	{ "headers", BOX_F_OBJECT, 0, 0, 0, "request headers", "OBJECT" },
	{ "body_base64", BOX_F_STRING, 0, 0, 0, "request body, base64", "BASE64" },
	{ "timeout_ms", BOX_F_INT, 1, 3600000, 0, "whole exchange timeout", "MS" },
	{ NULL, 0, 0, 0, 0, NULL, NULL },
};

static void header_path(struct box_err *err, const char *name)
{
	char path[BOX_ERR_FIELD_MAX];

	snprintf(path, sizeof(path), "$.headers.%.200s", name);
	box_err_path(err, path);
}

/* Turns the "headers" object into "Name: value" strings (owned by *out, n of them). */
static int json_headers(const cJSON *obj, char ***out, size_t *n, struct box_err *err)
{
	const cJSON *m;
	char **v;
	int count = cJSON_GetArraySize(obj);

	*out = NULL;
	*n = 0;
	if (count <= 0)
		return 0;
	if (count > BOX_HTTP_MAX_REQ_HEADERS) {
		box_err_limit(err, BOX_E_LIMIT, "http_request_headers", BOX_HTTP_MAX_REQ_HEADERS,
			      "headers", "more than %d request headers", BOX_HTTP_MAX_REQ_HEADERS);
		box_err_path(err, "$.headers");
		return -1;
	}
	v = calloc((size_t)count, sizeof(*v));
	if (!v)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	*out = v;
	cJSON_ArrayForEach(m, obj) {
		struct box_buf b = BOX_BUF_INIT(MAX_REQ_HEADER_BYTES + 1);

		if (*n >= (size_t)count)
			break;
		if (!cJSON_IsString(m)) {
			box_err_set(err, BOX_E_INVALID, "headers.%.200s: expected string", m->string);
			header_path(err, m->string);
			return -1;
		}
		if (strchr(m->string, ':') || box_buf_printf(&b, err, "%s: %s", m->string, m->valuestring) < 0 ||
		    box_http_check_header(b.data, err) < 0) {
			if (strchr(m->string, ':') || err->code == BOX_E_LIMIT)
				box_err_set(err, BOX_E_INVALID, "bad request header \"%.64s\"", m->string);
			box_buf_release(&b);
			header_path(err, m->string);
			return -1;
		}
		v[(*n)++] = box_buf_detach(&b, NULL);
		if (!v[*n - 1])
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}
	return 0;
}

static void free_headers(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static cJSON *ok_result(struct box_http_resp *resp, struct box_err *err)
{
	struct box_buf b64;
	cJSON *r = cJSON_CreateObject();

	box_buf_init(&b64, box_base64_encoded_len(resp->body.len) + 1);
	if (!r || !cJSON_AddTrueToObject(r, "ok") ||
	    !cJSON_AddNumberToObject(r, "status", (double)resp->status))
		goto oom;
	if (!cJSON_AddItemToObject(r, "headers", resp->headers))
		goto oom;
	resp->headers = NULL;
	if (box_base64_encode(resp->body.data ? resp->body.data : "", resp->body.len, &b64, err) < 0)
		goto fail;
	if (!cJSON_AddStringToObject(r, "body_base64", b64.data ? b64.data : "") ||
	    !cJSON_AddStringToObject(r, "url", resp->url))
		goto oom;
	box_buf_release(&b64);
	return r;
oom:
	box_err_set(err, BOX_E_INTERNAL, "out of memory");
fail:
	box_buf_release(&b64);
	cJSON_Delete(r);
	return NULL;
}

cJSON *box_http_serve_json(const struct box_policy *p, const char *line, size_t len,
			   size_t max_body_bytes)
{
	struct box_http_req req;
	struct box_http_resp resp;
	struct box_buf body = BOX_BUF_INIT(BOX_HTTP_MAX_REQ_BODY);
	struct box_err err;
	char **headers = NULL;
	size_t n_headers = 0;
	const char *b64;
	cJSON *in, *out = NULL;

	box_err_init(&err);
	box_http_resp_init(&resp);
	memset(&req, 0, sizeof(req));
	in = box_json_parse(line, len, &err);
	if (!in)
		goto fail;
	if (box_json_check(in, request_fields, &err) < 0)
		goto fail;
	req.method = box_json_get_str(in, "method", "GET");
	req.url = box_json_get_str(in, "url", NULL);
	if (!req.url) {
		box_err_set(&err, BOX_E_INVALID, "url: missing");
		box_err_path(&err, "$.url");
		goto fail;
	}
	if (!box_policy_method_bit(req.method)) {
		box_err_set(&err, BOX_E_INVALID, "method: unsupported HTTP method \"%.16s\"", req.method);
		box_err_path(&err, "$.method");
		goto fail;
	}
	if (json_headers(cJSON_GetObjectItemCaseSensitive(in, "headers"), &headers, &n_headers, &err) < 0)
		goto fail;
	b64 = box_json_get_str(in, "body_base64", NULL);
	if (b64 && box_base64_decode(b64, strlen(b64), &body, &err) < 0) {
		if (err.code == BOX_E_LIMIT)
			box_err_limit(&err, BOX_E_LIMIT, "http_request_body_bytes", BOX_HTTP_MAX_REQ_BODY,
				      "bytes", "request body larger than %d bytes", BOX_HTTP_MAX_REQ_BODY);
		box_err_path(&err, "$.body_base64");
		goto fail;
	}
	req.headers = (const char *const *)headers;
	req.n_headers = n_headers;
	req.body = body.data;
	req.body_len = body.len;
	req.timeout_ms = box_json_get_int(in, "timeout_ms", 0);
	req.max_body_bytes = max_body_bytes;
	if (box_http_request(p, &req, &resp, &err) < 0)
		goto fail;
	out = ok_result(&resp, &err);
	if (!out)
		goto fail;
	goto done;
fail:
	out = box_err_result(&err);
done:
	cJSON_Delete(in);
	free_headers(headers, n_headers);
	box_buf_release(&body);
	box_http_resp_release(&resp);
	return out;
}
