#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>

#include "base64.h"
#include "json.h"
#include "registry.h"
#include "clock.h"
#include "sha256.h"
#include "banned.h"

#define URL_MAX 8192
#define HDR_VALUE_MAX 4096
#define RESP_HEADERS_MAX 200
#define RESP_HEADER_BYTES_MAX (64 * 1024)
#define ERRBODY_MAX (64 * 1024)
#define TOKEN_BODY_MAX (256 * 1024)
#define TOKEN_MAX (16 * 1024)
#define CONFIG_MAX (1024 * 1024)
#define CHALLENGE_PARAMS_MAX 64
#define CHALLENGES_MAX 16
#define LINKS_MAX 16
#define CONFIG_AUTHS_MAX 1000
#define IO_CHUNK (64 * 1024)

static const char manifest_accept[] =
	"Accept: " BOX_MT_OCI_MANIFEST ", " BOX_MT_OCI_INDEX ", " BOX_MT_DOCKER_MANIFEST ", "
	BOX_MT_DOCKER_LIST;

static int oom(struct box_err *err)
{
	return box_err_set(err, BOX_E_INTERNAL, "out of memory");
}

static int is_lower_alnum(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static int is_tchar(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		(c > 0 && c < 0x7f && strchr("!#$%&'*+-.^_`|~", c));
}

static int is_ctl(int c)
{
	return (c >= 0 && c < 0x20 && c != '\t') || c == 0x7f;
}

/* ------------------------------------------------------------------ names */

/* One component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* */
static int valid_component(const char *s, size_t n)
{
	size_t i = 0, sep;

	if (n == 0 || !is_lower_alnum((unsigned char)s[0]) || !is_lower_alnum((unsigned char)s[n - 1]))
		return 0;
	while (i < n) {
		if (is_lower_alnum((unsigned char)s[i])) {
			i++;
			continue;
		}
		sep = i;
		if (s[i] == '.') {
			i++;
		} else if (s[i] == '_') {
			i++;
			if (i < n && s[i] == '_')
				i++;
		} else if (s[i] == '-') {
			while (i < n && s[i] == '-')
				i++;
		} else {
			return 0;
		}
		if (i == sep || i >= n || !is_lower_alnum((unsigned char)s[i]))
			return 0;
	}
	return 1;
}

int box_registry_valid_name(const char *s)
{
	const char *p, *slash;
	size_t n;

	if (!s)
		return 0;
	n = strnlen(s, BOX_REGISTRY_NAME_MAX + 1);
	if (n == 0 || n > BOX_REGISTRY_NAME_MAX)
		return 0;
	for (p = s;; p = slash + 1) {
		slash = strchr(p, '/');
		if (!valid_component(p, slash ? (size_t)(slash - p) : strlen(p)))
			return 0;
		if (!slash)
			return 1;
	}
}

int box_registry_valid_tag(const char *s)
{
	size_t i;

	if (!s || !s[0] || s[0] == '.' || s[0] == '-')
		return 0;
	for (i = 0; s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (i >= 128)
			return 0;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return 0;
	}
	return 1;
}

int box_registry_valid_digest(const char *s)
{
	size_t i;

	if (!s || strncmp(s, "sha256:", 7) != 0)
		return 0;
	for (i = 0; i < BOX_SHA256_HEX_LEN; i++) {
		char c = s[7 + i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
	}
	return s[7 + BOX_SHA256_HEX_LEN] == 0;
}

/* ------------------------------------------------------------------ reference */

static int is_loopback_host(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	char h[BOX_REGISTRY_HOST_MAX + 1];
	size_t n = strlen(host);

	if (strcmp(host, "localhost") == 0)
		return 1;
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof(h)) {
		memcpy(h, host + 1, n - 2);
		h[n - 2] = 0;
		return inet_pton(AF_INET6, h, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
	}
	return inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

/* Splits "host[:port]" (host possibly "[v6]"); the host part goes to name (lowercase). */
static int split_hostport(const char *hp, size_t n, char *name, size_t namelen, int *has_port)
{
	size_t hl, i;
	const char *colon;

	*has_port = 0;
	if (n == 0)
		return -1;
	if (hp[0] == '[') {
		const char *rb = memchr(hp, ']', n);
		struct in6_addr a6;
		char tmp[64];

		if (!rb || (size_t)(rb - hp) - 1 >= sizeof(tmp))
			return -1;
		memcpy(tmp, hp + 1, (size_t)(rb - hp) - 1);
		tmp[rb - hp - 1] = 0;
		if (inet_pton(AF_INET6, tmp, &a6) != 1)
			return -1;
		hl = (size_t)(rb - hp) + 1;
		colon = hl < n ? hp + hl : NULL;
		if (colon && *colon != ':')
			return -1;
	} else {
		colon = memchr(hp, ':', n);
		hl = colon ? (size_t)(colon - hp) : n;
		if (hl == 0)
			return -1;
		for (i = 0; i < hl; i++) {
			char c = hp[i];

			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '.' || c == '-'))
				return -1;
		}
		if (hp[0] == '.' || hp[0] == '-' || hp[hl - 1] == '.' || hp[hl - 1] == '-')
			return -1;
	}
	if (hl >= namelen)
		return -1;
	for (i = 0; i < hl; i++)
		name[i] = (char)(hp[i] >= 'A' && hp[i] <= 'Z' ? hp[i] - 'A' + 'a' : hp[i]);
	name[hl] = 0;
	if (colon) {
		const char *p = colon + 1, *end = hp + n;
		long port = 0;

		if (p == end || end - p > 5)
			return -1;
		for (; p < end; p++) {
			if (*p < '0' || *p > '9')
				return -1;
			port = port * 10 + (*p - '0');
		}
		if (port < 1 || port > 65535)
			return -1;
		*has_port = 1;
	}
	return 0;
}

int box_registry_init(struct box_registry *reg, const char *ref, int insecure,
		      struct box_err *err)
{
	const char *p, *slash;
	char name[BOX_REGISTRY_HOST_MAX + 1];
	size_t n, hl, i;
	int bare = 0, has_port;

	memset(reg, 0, sizeof(*reg));
	if (!ref || (n = strnlen(ref, BOX_REGISTRY_REF_MAX + 1)) > BOX_REGISTRY_REF_MAX || n == 0)
		return box_err_set(err, BOX_E_INVALID, "bad registry reference");
	if (strncasecmp(ref, "https://", 8) == 0) {
		memcpy(reg->scheme, "https", 6);
		p = ref + 8;
	} else if (strncasecmp(ref, "http://", 7) == 0) {
		memcpy(reg->scheme, "http", 5);
		p = ref + 7;
	} else if (strstr(ref, "://")) {
		return box_err_set(err, BOX_E_INVALID, "registry \"%.200s\": only https:// and http:// are supported", ref);
	} else {
		memcpy(reg->scheme, "https", 6);
		p = ref;
		bare = 1;
	}
	slash = strchr(p, '/');
	hl = slash ? (size_t)(slash - p) : strlen(p);
	if (split_hostport(p, hl, name, sizeof(name), &has_port) < 0 || hl > BOX_REGISTRY_HOST_MAX)
		goto bad;
	if (bare && !has_port && !strchr(name, '.') && strcmp(name, "localhost") != 0 && name[0] != '[')
		goto bad;
	for (i = 0; i < hl; i++)
		reg->host[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] - 'A' + 'a' : p[i]);
	reg->host[hl] = 0;
	if (slash) {
		size_t pl = strlen(slash + 1);

		while (pl > 0 && slash[pl] == '/')
			pl--;
		if (pl > 0) {
			if (pl > BOX_REGISTRY_NAME_MAX - 2)
				goto bad;
			memcpy(reg->prefix, slash + 1, pl);
			reg->prefix[pl] = 0;
			if (!box_registry_valid_name(reg->prefix))
				goto bad;
		}
	}
	if (strcmp(reg->scheme, "http") == 0 && !insecure && !is_loopback_host(name)) {
		box_err_set(err, BOX_E_POLICY,
			    "registry \"%.200s\": plain http only to a loopback host (or with --insecure)", ref);
		memset(reg, 0, sizeof(*reg));
		return -1;
	}
	reg->insecure = insecure;
	reg->retry_after_cap_s = BOX_REGISTRY_MAX_RETRY_AFTER_S;
	return 0;
bad:
	memset(reg, 0, sizeof(*reg));
	return box_err_set(err, BOX_E_INVALID, "bad registry reference \"%.200s\"", ref);
}

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void box_registry_release(struct box_registry *reg)
{
	free_secret(reg->userpass);
	free_secret(reg->token);
	if (reg->curl)
		curl_easy_cleanup(reg->curl);
	memset(reg, 0, sizeof(*reg));
}

/* ------------------------------------------------------------------ WWW-Authenticate */

struct scan {
	const char *s;
	size_t i, n;
};

static void skip_ws(struct scan *sc)
{
	while (sc->i < sc->n && (sc->s[sc->i] == ' ' || sc->s[sc->i] == '\t'))
		sc->i++;
}

static size_t read_token(struct scan *sc)
{
	size_t start = sc->i;

	while (sc->i < sc->n && is_tchar((unsigned char)sc->s[sc->i]))
		sc->i++;
	return sc->i - start;
}

/* A token or quoted-string value into out (NUL-terminated); -1 when malformed or too long. */
static int read_value(struct scan *sc, char *out, size_t outlen)
{
	size_t k = 0;

	if (sc->i < sc->n && sc->s[sc->i] == '"') {
		sc->i++;
		for (;;) {
			char c;

			if (sc->i >= sc->n)
				return -1;
			c = sc->s[sc->i++];
			if (c == '"')
				break;
			if (c == '\\') {
				if (sc->i >= sc->n)
					return -1;
				c = sc->s[sc->i++];
			}
			if (k + 1 >= outlen)
				return -1;
			out[k++] = c;
		}
	} else {
		size_t start = sc->i, len;

		/* token68-style values ("abc==") end in '=' characters */
		len = read_token(sc);
		while (sc->i < sc->n && sc->s[sc->i] == '=')
			sc->i++;
		len = sc->i - start;
		if (len + 1 > outlen)
			return -1;
		memcpy(out, sc->s + start, len);
		k = len;
	}
	out[k] = 0;
	return 0;
}

int box_registry_parse_challenge(const char *value, struct box_registry_challenge *out,
				 struct box_err *err)
{
	struct scan sc;
	char val[BOX_REGISTRY_CHALLENGE_MAX];
	int nch, nparams = 0, filling = 0;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!value)
		return box_err_set(err, BOX_E_POLICY, "registry asked for authentication without a challenge");
	sc.s = value;
	sc.n = strnlen(value, RESP_HEADER_BYTES_MAX + 1);
	sc.i = 0;
	if (sc.n > RESP_HEADER_BYTES_MAX)
		goto bad;
	for (i = 0; i < sc.n; i++)
		if (is_ctl((unsigned char)value[i]))
			goto bad;
	for (nch = 0; nch < CHALLENGES_MAX; nch++) {
		size_t sstart, slen;

		while (sc.i < sc.n && (sc.s[sc.i] == ' ' || sc.s[sc.i] == '\t' || sc.s[sc.i] == ','))
			sc.i++;
		if (sc.i >= sc.n)
			break;
		sstart = sc.i;
		slen = read_token(&sc);
		if (slen == 0)
			goto bad;
		filling = !out->scheme[0] && ((slen == 5 && strncasecmp(sc.s + sstart, "basic", 5) == 0) ||
					      (slen == 6 && strncasecmp(sc.s + sstart, "bearer", 6) == 0));
		if (filling)
			memcpy(out->scheme, slen == 5 ? "basic" : "bearer", slen + 1);
		skip_ws(&sc);
		for (;;) {
			size_t p0 = sc.i, nstart = sc.i, nlen;

			if (++nparams > CHALLENGE_PARAMS_MAX)
				goto bad;
			nlen = read_token(&sc);
			if (nlen == 0)
				break;
			skip_ws(&sc);
			if (sc.i >= sc.n || sc.s[sc.i] != '=') {
				/* not a parameter: the scheme of the next challenge (or a token68) */
				if (sc.i < sc.n && sc.s[sc.i] != ',') {
					sc.i = p0;
					break;
				}
				continue;
			}
			sc.i++;
			skip_ws(&sc);
			if (read_value(&sc, val, sizeof(val)) < 0)
				goto bad;
			if (filling) {
				char *dst = NULL;

				if (nlen == 5 && strncasecmp(sc.s + nstart, "realm", 5) == 0)
					dst = out->realm;
				else if (nlen == 7 && strncasecmp(sc.s + nstart, "service", 7) == 0)
					dst = out->service;
				else if (nlen == 5 && strncasecmp(sc.s + nstart, "scope", 5) == 0)
					dst = out->scope;
				if (dst)
					memcpy(dst, val, strlen(val) + 1);
			}
			skip_ws(&sc);
			if (sc.i >= sc.n)
				break;
			if (sc.s[sc.i] != ',')
				goto bad;
			sc.i++;
			skip_ws(&sc);
		}
		if (filling)
			break;
	}
	if (!out->scheme[0]) {
		memset(out, 0, sizeof(*out));
		return box_err_set(err, BOX_E_POLICY, "registry asks for an unsupported authentication scheme");
	}
	if (strcmp(out->scheme, "bearer") == 0 && !out->realm[0]) {
		memset(out, 0, sizeof(*out));
		return box_err_set(err, BOX_E_POLICY, "registry's Bearer challenge has no realm");
	}
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return box_err_set(err, BOX_E_POLICY, "malformed WWW-Authenticate header from the registry");
}

/* ------------------------------------------------------------------ error bodies */

static void printable(const char *in, char *out, size_t outlen)
{
	size_t i, k = 0;

	for (i = 0; in[i] && k + 1 < outlen; i++) {
		unsigned char c = (unsigned char)in[i];

		out[k++] = (char)(c >= 0x20 && c < 0x7f ? c : '?');
	}
	out[k] = 0;
}

struct code_map {
	const char *name;
	enum box_code code;
};

static const struct code_map oci_codes[] = {
	{ "MANIFEST_UNKNOWN", BOX_E_NOT_FOUND },
	{ "BLOB_UNKNOWN", BOX_E_NOT_FOUND },
	{ "NAME_UNKNOWN", BOX_E_NOT_FOUND },
	{ "BLOB_UPLOAD_UNKNOWN", BOX_E_NOT_FOUND },
	{ "MANIFEST_BLOB_UNKNOWN", BOX_E_NOT_FOUND },
	{ "UNAUTHORIZED", BOX_E_POLICY },
	{ "DENIED", BOX_E_POLICY },
	{ "DIGEST_INVALID", BOX_E_INTEGRITY },
	{ "SIZE_INVALID", BOX_E_INTEGRITY },
	{ "MANIFEST_INVALID", BOX_E_INVALID },
	{ "MANIFEST_UNVERIFIED", BOX_E_INVALID },
	{ "NAME_INVALID", BOX_E_INVALID },
	{ "TAG_INVALID", BOX_E_INVALID },
	{ "BLOB_UPLOAD_INVALID", BOX_E_INVALID },
	{ "TOOMANYREQUESTS", BOX_E_LIMIT },
	{ "UNSUPPORTED", BOX_E_UNSUPPORTED },
	{ NULL, BOX_OK },
};

static enum box_code status_code(long status)
{
	if (status == 401 || status == 403)
		return BOX_E_POLICY;
	if (status == 404)
		return BOX_E_NOT_FOUND;
	if (status == 429)
		return BOX_E_LIMIT;
	if (status == 400)
		return BOX_E_INVALID;
	return BOX_E_PROVIDER;
}

int box_registry_error(long status, const char *body, size_t len, const char *what,
		       struct box_err *err)
{
	struct box_err perr;
	char ocode[64] = "", omsg[256] = "";
	enum box_code code = status_code(status);
	cJSON *root = NULL;
	const cJSON *errors, *first, *c, *m;
	size_t i;

	box_err_init(&perr);
	if (body && len > 0 && len <= ERRBODY_MAX)
		root = box_json_parse(body, len, &perr);
	errors = cJSON_GetObjectItemCaseSensitive(root, "errors");
	first = cJSON_IsArray(errors) ? cJSON_GetArrayItem(errors, 0) : NULL;
	c = cJSON_GetObjectItemCaseSensitive(first, "code");
	m = cJSON_GetObjectItemCaseSensitive(first, "message");
	if (cJSON_IsString(c)) {
		printable(c->valuestring, ocode, sizeof(ocode));
		for (i = 0; oci_codes[i].name; i++)
			if (strcmp(ocode, oci_codes[i].name) == 0)
				code = oci_codes[i].code;
	}
	if (cJSON_IsString(m))
		printable(m->valuestring, omsg, sizeof(omsg));
	cJSON_Delete(root);
	if (code == BOX_E_LIMIT)
		box_err_limit(err, BOX_E_LIMIT, "registry_rate", BOX_REGISTRY_MAX_429, "retries",
			      "%s: registry answered HTTP %ld%s%s%s%s", what, status,
			      ocode[0] ? " " : "", ocode, omsg[0] ? ": " : "", omsg);
	else
		box_err_set(err, code, "%s: registry answered HTTP %ld%s%s%s%s", what, status,
			    ocode[0] ? " " : "", ocode, omsg[0] ? ": " : "", omsg);
	err->retryable = status == 429 || status >= 500;
	return -1;
}

/* ------------------------------------------------------------------ Link */

static char *resolve_url(const char *base, const char *rel, struct box_err *err)
{
	CURLU *h = curl_url();
	char *s = NULL, *out = NULL;
	CURLUcode rc;

	if (!h) {
		oom(err);
		return NULL;
	}
	rc = curl_url_set(h, CURLUPART_URL, base, 0);
	if (rc == CURLUE_OK)
		rc = curl_url_set(h, CURLUPART_URL, rel, 0);
	if (rc == CURLUE_OK)
		rc = curl_url_get(h, CURLUPART_URL, &s, 0);
	if (rc != CURLUE_OK)
		box_err_set(err, BOX_E_INVALID, "bad URL from the registry: %s", curl_url_strerror(rc));
	else if (strlen(s) >= URL_MAX)
		box_err_set(err, BOX_E_INVALID, "URL from the registry is too long");
	else if (!(out = strdup(s)))
		oom(err);
	curl_free(s);
	curl_url_cleanup(h);
	return out;
}

int box_registry_next_link(const char *base, const char *link, char **out, struct box_err *err)
{
	struct scan sc;
	char val[256];
	int nl, np;

	*out = NULL;
	if (!link)
		return 0;
	sc.s = link;
	sc.n = strnlen(link, HDR_VALUE_MAX + 1);
	sc.i = 0;
	if (sc.n > HDR_VALUE_MAX)
		return box_err_set(err, BOX_E_INVALID, "Link header too long");
	for (nl = 0; nl < LINKS_MAX; nl++) {
		size_t ustart, ulen;
		int next = 0;

		while (sc.i < sc.n && (sc.s[sc.i] == ' ' || sc.s[sc.i] == '\t' || sc.s[sc.i] == ','))
			sc.i++;
		if (sc.i >= sc.n)
			return 0;
		if (sc.s[sc.i] != '<')
			goto bad;
		ustart = ++sc.i;
		while (sc.i < sc.n && sc.s[sc.i] != '>') {
			if (is_ctl((unsigned char)sc.s[sc.i]) || sc.s[sc.i] == ' ' || sc.s[sc.i] == '<')
				goto bad;
			sc.i++;
		}
		if (sc.i >= sc.n)
			goto bad;
		ulen = sc.i - ustart;
		sc.i++;
		for (np = 0;; np++) {
			size_t nstart, nlen;

			skip_ws(&sc);
			if (sc.i >= sc.n || sc.s[sc.i] == ',')
				break;
			if (sc.s[sc.i] != ';' || np >= CHALLENGE_PARAMS_MAX)
				goto bad;
			sc.i++;
			skip_ws(&sc);
			nstart = sc.i;
			nlen = read_token(&sc);
			if (nlen == 0)
				goto bad;
			skip_ws(&sc);
			if (sc.i >= sc.n || sc.s[sc.i] != '=')
				continue;
			sc.i++;
			skip_ws(&sc);
			if (read_value(&sc, val, sizeof(val)) < 0)
				goto bad;
			if (nlen == 3 && strncasecmp(sc.s + nstart, "rel", 3) == 0) {
				char *save = NULL, *w;

				for (w = strtok_r(val, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
					if (strcasecmp(w, "next") == 0)
						next = 1;
			}
		}
		if (next) {
			char *u = strndup(sc.s + ustart, ulen);

			if (!u)
				return oom(err);
			*out = resolve_url(base, u, err);
			free(u);
			return *out ? 0 : -1;
		}
	}
	return 0;
bad:
	return box_err_set(err, BOX_E_INVALID, "malformed Link header from the registry");
}

/* ------------------------------------------------------------------ credentials */

/* "https://host/v2/" → "host" (in place). */
static void config_key_host(char *k)
{
	size_t n;

	if (strncasecmp(k, "https://", 8) == 0)
		memmove(k, k + 8, strlen(k + 8) + 1);
	else if (strncasecmp(k, "http://", 7) == 0)
		memmove(k, k + 7, strlen(k + 7) + 1);
	n = strlen(k);
	if (n >= 4 && (strcmp(k + n - 4, "/v1/") == 0 || strcmp(k + n - 4, "/v2/") == 0))
		k[n -= 4] = 0;
	else if (n >= 3 && (strcmp(k + n - 3, "/v1") == 0 || strcmp(k + n - 3, "/v2") == 0))
		k[n -= 3] = 0;
	while (n > 0 && k[n - 1] == '/')
		k[--n] = 0;
}

int box_registry_config_auth(const char *json, size_t len, const char *host, char **out,
			     struct box_err *err)
{
	cJSON *root;
	const cJSON *auths, *e, *a;
	struct box_buf dec = BOX_BUF_INIT(4096);
	char key[BOX_REGISTRY_HOST_MAX + 64];
	int n = 0, ret = 0;

	*out = NULL;
	root = box_json_parse(json, len, err);
	if (!root)
		return -1;
	auths = cJSON_GetObjectItemCaseSensitive(root, "auths");
	if (!cJSON_IsObject(auths))
		auths = NULL;
	cJSON_ArrayForEach(e, auths) {
		if (++n > CONFIG_AUTHS_MAX)
			break;
		if (!e->string || strlen(e->string) >= sizeof(key))
			continue;
		memcpy(key, e->string, strlen(e->string) + 1);
		config_key_host(key);
		if (strcasecmp(key, host) != 0)
			continue;
		a = cJSON_GetObjectItemCaseSensitive(e, "auth");
		if (!cJSON_IsString(a) || !a->valuestring[0])
			continue;
		if (box_base64_decode(a->valuestring, strlen(a->valuestring), &dec, err) < 0 ||
		    !dec.data || !memchr(dec.data, ':', dec.len) || memchr(dec.data, 0, dec.len)) {
			ret = box_err_set(err, BOX_E_INVALID, "docker config: bad \"auth\" for %.200s", host);
			break;
		}
		*out = box_buf_detach(&dec, NULL);
		if (!*out)
			ret = oom(err);
		break;
	}
	if (dec.data)
		explicit_bzero(dec.data, dec.len);
	box_buf_release(&dec);
	cJSON_Delete(root);
	return ret;
}

static int load_credentials(struct box_registry *reg, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(CONFIG_MAX);
	const char *env = getenv("BOX_REGISTRY_AUTH"), *dir, *home;
	char path[4096];
	int ret = 0;

	if (reg->creds_loaded)
		return 0;
	reg->creds_loaded = 1;
	if (env && env[0]) {
		if (!strchr(env, ':'))
			return box_err_set(err, BOX_E_INVALID, "BOX_REGISTRY_AUTH is not \"user:password\"");
		reg->userpass = strdup(env);
		return reg->userpass ? 0 : oom(err);
	}
	dir = getenv("DOCKER_CONFIG");
	home = getenv("HOME");
	if (dir && dir[0])
		snprintf(path, sizeof(path), "%s/config.json", dir);
	else if (home && home[0])
		snprintf(path, sizeof(path), "%s/.docker/config.json", home);
	else
		return 0;
	if (box_buf_read_file(&b, AT_FDCWD, path, err) < 0) {
		if (err->sys_errno == ENOENT) {
			box_err_init(err);
			return 0;
		}
		box_err_path(err, path);
		return -1;
	}
	if (b.data)
		ret = box_registry_config_auth(b.data, b.len, reg->host, &reg->userpass, err);
	if (ret < 0)
		box_err_path(err, path);
	if (b.data)
		explicit_bzero(b.data, b.len);
	box_buf_release(&b);
	return ret;
}

/* ------------------------------------------------------------------ one exchange */

struct hdrs {
	char www_auth[HDR_VALUE_MAX];
	char digest[128];
	char ctype[256];
	char location[URL_MAX];
	char link[HDR_VALUE_MAX];
	char retry_after[32];
	char content_range[128];
	size_t count, bytes;
	int over;
};

/* What one request sends and where its answer goes. */
struct xfer {
	const char *method;
	const char *url;
	const char *extra[4];         /* extra header lines, NULL-terminated */
	const char *auth_override;    /* an Authorization line sent instead of the registry's */
	int send_auth;

	const char *body;             /* PUT from memory */
	size_t body_len;
	int upload_fd;                /* PUT from a file (when >= 0) */
	int64_t upload_size, upload_off;

	struct box_buf *out;          /* 2xx body to memory */
	int out_over;

	int blob_fd;                  /* 2xx body to a file (when >= 0), hashed */
	struct box_sha256 *sha;
	int64_t blob_off, blob_limit, range_from;
	int blob_err;                 /* 1 too long, 2 bad Content-Range, 3 write error, 4 hash */
	int blob_errno;
	const struct box_registry *reg;  /* for its progress callback (blob downloads) */

	CURL *c;
	int decided, to_err;
	struct box_buf errbody;

	long status;
	struct hdrs h;
};

/* Before the first xfer_init of a struct xfer; box_buf_release(&x->errbody) at the end. */
static void xfer_start(struct xfer *x)
{
	memset(x, 0, sizeof(*x));
	box_buf_init(&x->errbody, ERRBODY_MAX);
}

/* Prepares one request, keeping the error body buffer. */
static void xfer_init(struct xfer *x, const char *method, const char *url)
{
	struct box_buf eb = x->errbody;

	memset(x, 0, sizeof(*x));
	x->errbody = eb;
	box_buf_truncate(&x->errbody, 0);
	x->method = method;
	x->url = url;
	x->upload_fd = -1;
	x->blob_fd = -1;
	x->send_auth = 1;
}

static void set_hdr(char *dst, size_t dstlen, const char *v, size_t n, int *over)
{
	if (n >= dstlen) {
		*over = 1;
		return;
	}
	memcpy(dst, v, n);
	dst[n] = 0;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	struct hdrs *h = &x->h;
	size_t n = size * nmemb, len = n, nl;
	const char *colon, *v, *end;

	h->bytes += n;
	if (h->bytes > RESP_HEADER_BYTES_MAX || ++h->count > RESP_HEADERS_MAX) {
		h->over = 1;
		return 0;
	}
	while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r'))
		len--;
	if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
		/* a new response (after 1xx): only the last one's headers count */
		memset(h, 0, sizeof(*h));
		h->bytes = n;
		return n;
	}
	colon = memchr(p, ':', len);
	if (!colon)
		return n;
	nl = (size_t)(colon - p);
	end = p + len;
	for (v = colon + 1; v < end && (*v == ' ' || *v == '\t'); v++)
		;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
#define HDR(name, field) \
	if (nl == sizeof(name) - 1 && strncasecmp(p, name, nl) == 0) \
		set_hdr(h->field, sizeof(h->field), v, (size_t)(end - v), &h->over)
	HDR("www-authenticate", www_auth);
	else HDR("docker-content-digest", digest);
	else HDR("content-type", ctype);
	else HDR("location", location);
	else HDR("link", link);
	else HDR("retry-after", retry_after);
	else HDR("content-range", content_range);
#undef HDR
	return n;
}

/* "bytes N-M/T": 0 when it starts at from. */
static int check_content_range(const char *v, int64_t from)
{
	long long start;
	char *end;

	if (strncasecmp(v, "bytes ", 6) != 0)
		return -1;
	errno = 0;
	start = strtoll(v + 6, &end, 10);
	if (errno || end == v + 6 || *end != '-' || start != from)
		return -1;
	return 0;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	struct box_err e;
	size_t n = size * nmemb;

	if (!x->decided) {
		long st = 0;

		curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &st);
		x->decided = 1;
		x->to_err = st < 200 || st >= 300 || (x->blob_fd >= 0 && st != 200 && st != 206);
		if (!x->to_err && x->blob_fd >= 0) {
			if (st == 206) {
				if (check_content_range(x->h.content_range, x->range_from) < 0) {
					x->blob_err = 2;
					return 0;
				}
			} else if (x->range_from > 0 || x->blob_off > 0) {
				/* the server sent everything: start over */
				if (ftruncate(x->blob_fd, 0) < 0) {
					x->blob_err = 3;
					x->blob_errno = errno;
					return 0;
				}
				x->blob_off = 0;
				if (box_sha256_init(x->sha, &e) < 0) {
					x->blob_err = 4;
					return 0;
				}
			}
		}
	}
	if (x->to_err) {
		if (box_buf_append(&x->errbody, p, n, &e) < 0)
			return 0;
		return n;
	}
	if (x->blob_fd >= 0) {
		if (x->blob_off + (int64_t)n > x->blob_limit) {
			x->blob_err = 1;
			return 0;
		}
		if (box_sha256_update(x->sha, p, n, &e) < 0) {
			x->blob_err = 4;
			return 0;
		}
		if (pwrite(x->blob_fd, p, n, x->blob_off) != (ssize_t)n) {
			x->blob_err = 3;
			x->blob_errno = errno ? errno : EIO;
			return 0;
		}
		x->blob_off += (int64_t)n;
		if (x->reg && x->reg->progress)
			x->reg->progress(x->reg->progress_ctx, x->blob_off, x->blob_limit);
		return n;
	}
	if (x->out) {
		if (box_buf_append(x->out, p, n, &e) < 0) {
			x->out_over = 1;
			return 0;
		}
	}
	return n;
}

static size_t on_read(char *buf, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;
	size_t want = size * nmemb;
	int64_t left;
	ssize_t r;

	if (x->upload_fd < 0) {
		left = (int64_t)x->body_len - x->upload_off;
		if ((int64_t)want > left)
			want = (size_t)left;
		memcpy(buf, x->body + x->upload_off, want);
		x->upload_off += (int64_t)want;
		return want;
	}
	left = x->upload_size - x->upload_off;
	if ((int64_t)want > left)
		want = (size_t)left;
	if (want == 0)
		return 0;
	do
		r = pread(x->upload_fd, buf, want, x->upload_off);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return CURL_READFUNC_ABORT;
	x->upload_off += r;
	return (size_t)r;
}

/* "scheme://host:port" with the default port filled in, for origin comparisons. */
static int url_origin(const char *url, char *out, size_t outlen)
{
	CURLU *h = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL;
	int ret = -1;

	if (!h)
		return -1;
	if (curl_url_set(h, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    curl_url_get(h, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	    curl_url_get(h, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
		int n = snprintf(out, outlen, "%s://%s:%s", scheme, host, port);

		ret = n > 0 && (size_t)n < outlen ? 0 : -1;
		for (char *q = out; *q; q++)
			if (*q >= 'A' && *q <= 'Z')
				*q = (char)(*q - 'A' + 'a');
	}
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(h);
	return ret;
}

static int same_origin_as_registry(const struct box_registry *reg, const char *url)
{
	char a[BOX_REGISTRY_HOST_MAX + 64], b[BOX_REGISTRY_HOST_MAX + 64], base[BOX_REGISTRY_HOST_MAX + 16];

	snprintf(base, sizeof(base), "%s://%s/", reg->scheme, reg->host);
	return url_origin(url, a, sizeof(a)) == 0 && url_origin(base, b, sizeof(b)) == 0 &&
		strcmp(a, b) == 0;
}

/* http is only for loopback hosts unless insecure; any other scheme never. */
static int check_target(const struct box_registry *reg, const char *url, struct box_err *err)
{
	CURLU *h = curl_url();
	char *scheme = NULL, *host = NULL;
	int ret = 0;

	if (!h)
		return oom(err);
	if (curl_url_set(h, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(h, CURLUPART_HOST, &host, 0) != CURLUE_OK)
		ret = box_err_set(err, BOX_E_INVALID, "bad URL from the registry");
	else if (strcasecmp(scheme, "https") != 0 &&
		 !(strcasecmp(scheme, "http") == 0 && (reg->insecure || is_loopback_host(host))))
		ret = box_err_set(err, BOX_E_POLICY, "registry sent us to %.16s://%.200s: refused",
				  scheme, host);
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(h);
	return ret;
}

static int timeout_err(const struct box_registry *reg, struct box_err *err)
{
	return box_err_limit(err, BOX_E_TIMEOUT, "registry_timeout", reg->timeout_ms, "ms",
			     "registry operation timed out after %lld ms", (long long)reg->timeout_ms);
}

static struct curl_slist *append(struct curl_slist *l, const char *s, int *bad)
{
	struct curl_slist *t = curl_slist_append(l, s);

	if (!t) {
		*bad = 1;
		return l;
	}
	return t;
}

static int auth_line(const struct box_registry *reg, struct box_buf *b, struct box_err *err)
{
	if (reg->token)
		return box_buf_printf(b, err, "Authorization: Bearer %s", reg->token);
	if (reg->use_basic && reg->userpass) {
		if (box_buf_puts(b, "Authorization: Basic ", err) < 0)
			return -1;
		return box_base64_encode(reg->userpass, strlen(reg->userpass), b, err);
	}
	return 0;
}

/* One request, no redirects, no auth handling: fills x->status and x->h. Long because it is
 * one libcurl transfer: every option that keeps it safe (protocols, no redirects, no netrc,
 * TLS checks, timeouts, the bounded callbacks) is set in one place, to be read together. */
static int perform(struct box_registry *reg, struct xfer *x, int64_t deadline, struct box_err *err)
{
	struct curl_slist *hl = NULL;
	struct box_buf auth = BOX_BUF_INIT(TOKEN_MAX + 64);
	char errbuf[CURL_ERROR_SIZE] = "";
	int bad = 0, set = 0, i, ret = -1;
	int64_t left = deadline - box_now_ms();
	CURL *c;
	CURLcode rc;

	if (left <= 0)
		return timeout_err(reg, err);
	if (!reg->curl && !(reg->curl = curl_easy_init()))
		return box_err_set(err, BOX_E_INTERNAL, "curl_easy_init failed");
	c = reg->curl;
	curl_easy_reset(c);
	x->c = c;
	x->decided = 0;
	x->to_err = 0;
	x->status = 0;
	x->upload_off = 0;
	x->out_over = 0;
	memset(&x->h, 0, sizeof(x->h));
	box_buf_truncate(&x->errbody, 0);

	for (i = 0; i < 4 && x->extra[i]; i++)
		hl = append(hl, x->extra[i], &bad);
	hl = append(hl, "Expect:", &bad);
	if (x->auth_override) {
		hl = append(hl, x->auth_override, &bad);
	} else if (x->send_auth && same_origin_as_registry(reg, x->url)) {
		if (auth_line(reg, &auth, err) < 0)
			goto out;
		if (auth.data)
			hl = append(hl, auth.data, &bad);
	}
	if (bad) {
		oom(err);
		goto out;
	}
	set |= curl_easy_setopt(c, CURLOPT_URL, x->url);
	set |= curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	set |= curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	set |= curl_easy_setopt(c, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
	set |= curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	set |= curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	set |= curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	set |= curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)left);
	set |= curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)left);
	set |= curl_easy_setopt(c, CURLOPT_USERAGENT, "box/" PACKAGE_VERSION);
	set |= curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	set |= curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	set |= curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	set |= curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
	set |= curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	set |= curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	if (strcmp(x->method, "GET") == 0) {
		set |= curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	} else if (strcmp(x->method, "HEAD") == 0) {
		set |= curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (strcmp(x->method, "PUT") == 0) {
		set |= curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		set |= curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		set |= curl_easy_setopt(c, CURLOPT_READDATA, x);
		set |= curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE,
					(curl_off_t)(x->upload_fd >= 0 ? x->upload_size : (int64_t)x->body_len));
	} else {
		set |= curl_easy_setopt(c, CURLOPT_POST, 1L);
		set |= curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
		set |= curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	}
	if (set) {
		box_err_set(err, BOX_E_INTERNAL, "libcurl lacks a required option");
		goto out;
	}
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &x->status);
	if (x->h.over) {
		box_err_set(err, BOX_E_PROVIDER, "registry response headers too large");
		goto out;
	}
	if (x->blob_err == 1) {
		box_err_set(err, BOX_E_INTEGRITY, "blob is larger than its descriptor says (%lld bytes)",
			    (long long)x->blob_limit);
		goto out;
	}
	if (x->blob_err == 2) {
		box_err_set(err, BOX_E_PROVIDER, "registry answered a Range request with a wrong Content-Range");
		goto out;
	}
	if (x->blob_err == 3) {
		errno = x->blob_errno;
		box_err_sys(err, "writing the blob");
		goto out;
	}
	if (x->blob_err == 4) {
		box_err_set(err, BOX_E_INTERNAL, "SHA-256 failed");
		goto out;
	}
	if (x->out_over) {
		box_err_limit(err, BOX_E_LIMIT, "manifest_bytes", (int64_t)x->out->max, "bytes",
			      "registry response larger than %zu bytes", x->out->max);
		goto out;
	}
	/* an error body past its cap is cut, not fatal: the status is what matters */
	if (rc == CURLE_WRITE_ERROR && x->to_err) {
		ret = 0;
		goto out;
	}
	if (rc != CURLE_OK) {
		if (rc == CURLE_OPERATION_TIMEDOUT) {
			timeout_err(reg, err);
		} else {
			box_err_set(err, BOX_E_IO, "registry request failed: %s",
				    errbuf[0] ? errbuf : curl_easy_strerror(rc));
			err->retryable = rc == CURLE_COULDNT_CONNECT || rc == CURLE_RECV_ERROR ||
				rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING ||
				rc == CURLE_PARTIAL_FILE || rc == CURLE_HTTP2_STREAM;
		}
		goto out;
	}
	ret = 0;
out:
	curl_slist_free_all(hl);
	if (auth.data)
		explicit_bzero(auth.data, auth.len);
	box_buf_release(&auth);
	return ret;
}

/* ------------------------------------------------------------------ auth */

static char *escape(CURL *c, const char *s)
{
	return curl_easy_escape(c, s, 0);
}

static int fetch_token(struct box_registry *reg, const struct box_registry_challenge *ch,
		       const char *default_scope, int64_t deadline, struct box_err *err)
{
	struct box_buf url = BOX_BUF_INIT(URL_MAX), body = BOX_BUF_INIT(TOKEN_BODY_MAX);
	struct box_buf auth = BOX_BUF_INIT(4096);
	const char *scope = ch->scope[0] ? ch->scope : default_scope;
	struct xfer x;
	cJSON *root = NULL;
	const cJSON *t;
	char *e1 = NULL, *e2 = NULL;
	int ret = -1;
	size_t i;

	if (check_target(reg, ch->realm, err) < 0)
		return -1;
	if (!reg->curl && !(reg->curl = curl_easy_init()))
		return box_err_set(err, BOX_E_INTERNAL, "curl_easy_init failed");
	e1 = escape(reg->curl, ch->service);
	e2 = escape(reg->curl, scope ? scope : "");
	if (!e1 || !e2) {
		oom(err);
		goto out;
	}
	if (box_buf_printf(&url, err, "%s%sservice=%s", ch->realm, strchr(ch->realm, '?') ? "&" : "?", e1) < 0 ||
	    (scope && scope[0] && box_buf_printf(&url, err, "&scope=%s", e2) < 0))
		goto out;
	if (reg->userpass && (box_buf_puts(&auth, "Authorization: Basic ", err) < 0 ||
			      box_base64_encode(reg->userpass, strlen(reg->userpass), &auth, err) < 0))
		goto out;
	xfer_start(&x);
	xfer_init(&x, "GET", url.data);
	x.out = &body;
	x.auth_override = auth.data;
	x.send_auth = 0;
	if (perform(reg, &x, deadline, err) < 0) {
		box_buf_release(&x.errbody);
		goto out;
	}
	if (x.status != 200) {
		box_registry_error(x.status, x.errbody.data, x.errbody.len, "token request", err);
		if (x.status == 401 || x.status == 403)
			err->code = BOX_E_POLICY;
		box_buf_release(&x.errbody);
		goto out;
	}
	box_buf_release(&x.errbody);
	root = box_json_parse(body.data ? body.data : "", body.len, err);
	if (!root) {
		box_err_set(err, BOX_E_PROVIDER, "token server answered something that is not JSON");
		goto out;
	}
	t = cJSON_GetObjectItemCaseSensitive(root, "token");
	if (!cJSON_IsString(t) || !t->valuestring[0])
		t = cJSON_GetObjectItemCaseSensitive(root, "access_token");
	if (!cJSON_IsString(t) || !t->valuestring[0] || strlen(t->valuestring) > TOKEN_MAX) {
		box_err_set(err, BOX_E_PROVIDER, "token server answered without a usable token");
		goto out;
	}
	for (i = 0; t->valuestring[i]; i++) {
		unsigned char c = (unsigned char)t->valuestring[i];

		if (c <= 0x20 || c >= 0x7f) {
			box_err_set(err, BOX_E_PROVIDER, "token server answered a token with bad characters");
			goto out;
		}
	}
	free_secret(reg->token);
	reg->token = strdup(t->valuestring);
	ret = reg->token ? 0 : oom(err);
out:
	curl_free(e1);
	curl_free(e2);
	if (auth.data)
		explicit_bzero(auth.data, auth.len);
	box_buf_release(&auth);
	box_buf_release(&url);
	if (body.data)
		explicit_bzero(body.data, body.len);
	box_buf_release(&body);
	cJSON_Delete(root);
	return ret;
}

/* After a 401: prepare the credentials for one more try. */
static int authenticate(struct box_registry *reg, const struct xfer *x, const char *scope,
			int64_t deadline, struct box_err *err)
{
	struct box_registry_challenge ch;

	if (box_registry_parse_challenge(x->h.www_auth[0] ? x->h.www_auth : NULL, &ch, err) < 0)
		return -1;
	if (load_credentials(reg, err) < 0)
		return -1;
	if (strcmp(ch.scheme, "basic") == 0) {
		if (!reg->userpass)
			return box_err_set(err, BOX_E_POLICY,
					   "registry %s wants credentials (BOX_REGISTRY_AUTH or docker config.json)",
					   reg->host);
		if (reg->use_basic)
			return box_err_set(err, BOX_E_POLICY, "registry %s refused the credentials", reg->host);
		free_secret(reg->token);
		reg->token = NULL;
		reg->use_basic = 1;
		return 0;
	}
	return fetch_token(reg, &ch, scope, deadline, err);
}

static int is_redirect(long s)
{
	return s == 301 || s == 302 || s == 303 || s == 307 || s == 308;
}

/*
 * A request with everything around it: one new authentication after a 401, waits on 429,
 * redirects when follow is set. On return x->url may point into *url_owned (free it).
 */
static int request(struct box_registry *reg, struct xfer *x, const char *scope, int follow,
		   int64_t deadline, char **url_owned, struct box_err *err)
{
	int auth_tries = 0, waits = 0, hops = 0, guard;

	*url_owned = NULL;
	for (guard = 0; guard < 2 + BOX_REGISTRY_MAX_429 + BOX_REGISTRY_MAX_REDIRECTS + 1; guard++) {
		if (perform(reg, x, deadline, err) < 0)
			return -1;
		if (x->status == 401 && x->send_auth && auth_tries == 0 && same_origin_as_registry(reg, x->url)) {
			auth_tries++;
			if (authenticate(reg, x, scope, deadline, err) < 0)
				return -1;
			continue;
		}
		if (x->status == 429 && waits < BOX_REGISTRY_MAX_429) {
			long s = 1;
			char *end;
			int64_t left;

			errno = 0;
			s = strtol(x->h.retry_after, &end, 10);
			if (errno || end == x->h.retry_after || *end || s < 0)
				s = 1;
			if (s > reg->retry_after_cap_s)
				s = reg->retry_after_cap_s;
			left = deadline - box_now_ms();
			if (s * 1000 >= left)
				return timeout_err(reg, err);
			waits++;
			if (s > 0) {
				struct timespec ts = { .tv_sec = s, .tv_nsec = 0 };

				while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
					;
			}
			continue;
		}
		if (follow && is_redirect(x->status) && x->h.location[0]) {
			char *next;

			if (hops++ >= BOX_REGISTRY_MAX_REDIRECTS)
				return box_err_limit(err, BOX_E_LIMIT, "registry_redirects",
						     BOX_REGISTRY_MAX_REDIRECTS, "redirects",
						     "more than %d redirects from the registry",
						     BOX_REGISTRY_MAX_REDIRECTS);
			next = resolve_url(x->url, x->h.location, err);
			if (!next)
				return -1;
			if (check_target(reg, next, err) < 0) {
				free(next);
				return -1;
			}
			free(*url_owned);
			*url_owned = next;
			x->url = next;
			continue;
		}
		return 0;
	}
	return box_err_set(err, BOX_E_PROVIDER, "registry keeps asking again");
}

/* ------------------------------------------------------------------ operations */

static int64_t deadline_of(struct box_registry *reg)
{
	if (reg->timeout_ms <= 0)
		reg->timeout_ms = BOX_REGISTRY_DEFAULT_TIMEOUT_MS;
	return box_now_ms() + reg->timeout_ms;
}

/* base/v2/<prefix/name>/<kind>/<ref> */
static int repo_url(const struct box_registry *reg, const char *name, const char *kind,
		    const char *ref, struct box_buf *b, struct box_err *err)
{
	size_t full = strlen(reg->prefix) + 1 + (name ? strnlen(name, BOX_REGISTRY_NAME_MAX + 1) : 0);

	if (!box_registry_valid_name(name) || full > BOX_REGISTRY_NAME_MAX)
		return box_err_set(err, BOX_E_INVALID, "bad repository name \"%.200s\"", name ? name : "");
	return box_buf_printf(b, err, "%s://%s/v2/%s%s%s/%s%s", reg->scheme, reg->host, reg->prefix,
			      reg->prefix[0] ? "/" : "", name, kind, ref ? ref : "");
}

static int repo_scope(const struct box_registry *reg, const char *name, const char *actions,
		      char *out, size_t outlen)
{
	int n = snprintf(out, outlen, "repository:%s%s%s:%s", reg->prefix, reg->prefix[0] ? "/" : "",
			 name, actions);

	return n > 0 && (size_t)n < outlen ? 0 : -1;
}

static void digest_of(const unsigned char d[BOX_SHA256_LEN], char out[BOX_REGISTRY_DIGEST_MAX])
{
	char hex[BOX_SHA256_HEX_LEN + 1];

	box_sha256_hex(d, hex);
	snprintf(out, BOX_REGISTRY_DIGEST_MAX, "sha256:%s", hex);
}

int box_registry_get_manifest(struct box_registry *reg, const char *name, const char *ref,
			      struct box_buf *body, char digest[BOX_REGISTRY_DIGEST_MAX],
			      char media_type[BOX_REGISTRY_MEDIA_TYPE_MAX], struct box_err *err)
{
	struct box_buf url = BOX_BUF_INIT(URL_MAX), got = BOX_BUF_INIT(BOX_REGISTRY_MAX_MANIFEST);
	char scope[BOX_REGISTRY_NAME_MAX + 64], what[BOX_REGISTRY_NAME_MAX + 100], hex[BOX_SHA256_HEX_LEN + 1];
	char *owned = NULL;
	struct xfer x;
	int64_t deadline = deadline_of(reg);
	int by_digest, ret = -1;
	size_t n;

	digest[0] = 0;
	media_type[0] = 0;
	by_digest = box_registry_valid_digest(ref);
	if (!by_digest && !box_registry_valid_tag(ref))
		return box_err_set(err, BOX_E_INVALID, "bad tag or digest \"%.200s\"", ref ? ref : "");
	if (repo_url(reg, name, "manifests/", ref, &url, err) < 0 ||
	    repo_scope(reg, name, "pull", scope, sizeof(scope)) < 0) {
		box_buf_release(&url);
		return -1;
	}
	snprintf(what, sizeof(what), "manifest %s:%s", name, ref);
	xfer_start(&x);
	xfer_init(&x, "GET", url.data);
	x.extra[0] = manifest_accept;
	x.out = &got;
	if (request(reg, &x, scope, 1, deadline, &owned, err) < 0)
		goto out;
	if (x.status != 200) {
		box_registry_error(x.status, x.errbody.data, x.errbody.len, what, err);
		goto out;
	}
	if (box_sha256_buf(got.data ? got.data : "", got.len, hex, err) < 0)
		goto out;
	snprintf(digest, BOX_REGISTRY_DIGEST_MAX, "sha256:%s", hex);
	if (by_digest && strcmp(digest, ref) != 0) {
		box_err_set(err, BOX_E_INTEGRITY, "%s: the registry sent a manifest with digest %s", what, digest);
		goto out;
	}
	if (x.h.digest[0] && strncmp(x.h.digest, "sha256:", 7) == 0 && strcmp(x.h.digest, digest) != 0) {
		char shown[80];

		printable(x.h.digest, shown, sizeof(shown));
		box_err_set(err, BOX_E_INTEGRITY, "%s: the body hashes to %s, the registry says %s", what,
			    digest, shown);
		goto out;
	}
	n = strcspn(x.h.ctype, "; \t");
	if (n >= BOX_REGISTRY_MEDIA_TYPE_MAX)
		n = 0;
	memcpy(media_type, x.h.ctype, n);
	media_type[n] = 0;
	if (box_buf_append(body, got.data ? got.data : "", got.len, err) < 0)
		goto out;
	ret = 0;
out:
	if (ret < 0) {
		digest[0] = 0;
		media_type[0] = 0;
	}
	free(owned);
	box_buf_release(&x.errbody);
	box_buf_release(&got);
	box_buf_release(&url);
	return ret;
}

/* Hashes outfd[0..n) into sha (started here). */
static int rehash_prefix(int fd, int64_t n, struct box_sha256 *sha, struct box_err *err)
{
	char *buf;
	int64_t off = 0;
	ssize_t r;

	if (box_sha256_init(sha, err) < 0)
		return -1;
	buf = malloc(IO_CHUNK);
	if (!buf)
		return oom(err);
	while (off < n) {
		size_t want = n - off > IO_CHUNK ? IO_CHUNK : (size_t)(n - off);

		r = pread(fd, buf, want, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			free(buf);
			if (r == 0)
				errno = EIO;
			return box_err_sys(err, "reading back the partial blob");
		}
		if (box_sha256_update(sha, buf, (size_t)r, err) < 0) {
			free(buf);
			return -1;
		}
		off += r;
	}
	free(buf);
	return 0;
}

/* Long because the checks of the output, the attempts (a Range resumed after a cut
 * transfer) and the size and digest computed while streaming share one state, and read
 * best as the one sequence a download is. */
int box_registry_get_blob(struct box_registry *reg, const char *name, const char *digest,
			  int outfd, int64_t expected_size, struct box_err *err)
{
	struct box_buf url = BOX_BUF_INIT(URL_MAX);
	struct box_sha256 sha = { NULL };
	char scope[BOX_REGISTRY_NAME_MAX + 64], what[BOX_REGISTRY_NAME_MAX + 100], range[64];
	char got[BOX_REGISTRY_DIGEST_MAX];
	unsigned char d[BOX_SHA256_LEN];
	char *owned = NULL;
	struct xfer x;
	struct stat st;
	int64_t deadline = deadline_of(reg), have;
	int attempt, ret = -1;

	xfer_start(&x);
	if (!box_registry_valid_digest(digest))
		return box_err_set(err, BOX_E_INVALID, "bad blob digest \"%.100s\"", digest ? digest : "");
	if (expected_size < 0)
		return box_err_set(err, BOX_E_INVALID, "negative blob size");
	if (fstat(outfd, &st) < 0)
		return box_err_sys(err, "blob output");
	if (!S_ISREG(st.st_mode))
		return box_err_set(err, BOX_E_INVALID, "blob output is not a regular file");
	if (repo_url(reg, name, "blobs/", digest, &url, err) < 0 ||
	    repo_scope(reg, name, "pull", scope, sizeof(scope)) < 0) {
		box_buf_release(&url);
		return -1;
	}
	snprintf(what, sizeof(what), "blob %s@%s", name, digest);
	for (attempt = 0; attempt <= BOX_REGISTRY_MAX_RESUMES; attempt++) {
		if (fstat(outfd, &st) < 0) {
			box_err_sys(err, "blob output");
			goto out;
		}
		have = st.st_size;
		if (have > expected_size) {
			if (ftruncate(outfd, 0) < 0) {
				box_err_sys(err, "truncating the blob output");
				goto out;
			}
			have = 0;
		}
		box_sha256_release(&sha);
		if (rehash_prefix(outfd, have, &sha, err) < 0)
			goto out;
		if (have == expected_size && have > 0)
			break;
		free(owned);
		owned = NULL;
		xfer_init(&x, "GET", url.data);
		x.blob_fd = outfd;
		x.sha = &sha;
		x.blob_off = have;
		x.blob_limit = expected_size;
		x.range_from = have;
		x.reg = reg;
		if (have > 0) {
			snprintf(range, sizeof(range), "Range: bytes=%lld-", (long long)have);
			x.extra[0] = range;
		}
		if (request(reg, &x, scope, 1, deadline, &owned, err) < 0) {
			box_buf_release(&x.errbody);
			if (err->code == BOX_E_IO && err->retryable && attempt < BOX_REGISTRY_MAX_RESUMES)
				continue;
			goto out;
		}
		if (x.status == 416 && have > 0) {
			/* the prefix we hold is no prefix of theirs: start over */
			box_buf_release(&x.errbody);
			if (ftruncate(outfd, 0) < 0) {
				box_err_sys(err, "truncating the blob output");
				goto out;
			}
			continue;
		}
		if (x.status != 200 && x.status != 206) {
			box_registry_error(x.status, x.errbody.data, x.errbody.len, what, err);
			box_buf_release(&x.errbody);
			goto out;
		}
		box_buf_release(&x.errbody);
		break;
	}
	if (attempt > BOX_REGISTRY_MAX_RESUMES) {
		box_err_set(err, BOX_E_IO, "%s: download interrupted too often", what);
		err->retryable = 1;
		goto out;
	}
	if (fstat(outfd, &st) < 0) {
		box_err_sys(err, "blob output");
		goto out;
	}
	if (st.st_size != expected_size) {
		box_err_set(err, BOX_E_INTEGRITY, "%s: got %lld bytes, expected %lld", what,
			    (long long)st.st_size, (long long)expected_size);
		goto out;
	}
	if (box_sha256_final(&sha, d, err) < 0)
		goto out;
	digest_of(d, got);
	if (strcmp(got, digest) != 0) {
		box_err_set(err, BOX_E_INTEGRITY, "%s: content hashes to %s", what, got);
		goto out;
	}
	ret = 0;
out:
	free(owned);
	box_sha256_release(&sha);
	box_buf_release(&url);
	return ret;
}

/* Long because the pages (the Link header's next URL, each checked to stay on the
 * registry), their bounds and the merge of their lists are one loop over one state. */
int box_registry_tags(struct box_registry *reg, const char *name, cJSON **tags,
		      struct box_err *err)
{
	struct box_buf url = BOX_BUF_INIT(URL_MAX);
	char scope[BOX_REGISTRY_NAME_MAX + 64], what[BOX_REGISTRY_NAME_MAX + 32];
	char *cur = NULL, *owned = NULL, *next = NULL;
	int64_t deadline = deadline_of(reg);
	cJSON *all = NULL;
	int page, count = 0, ret = -1;
	struct xfer x;

	*tags = NULL;
	xfer_start(&x);
	if (repo_url(reg, name, "tags/list", NULL, &url, err) < 0 ||
	    repo_scope(reg, name, "pull", scope, sizeof(scope)) < 0)
		goto out;
	snprintf(what, sizeof(what), "tags of %s", name);
	all = cJSON_CreateArray();
	cur = box_buf_detach(&url, NULL);
	if (!all || !cur) {
		oom(err);
		goto out;
	}
	for (page = 0; page < BOX_REGISTRY_MAX_TAG_PAGES; page++) {
		struct box_buf body = BOX_BUF_INIT(BOX_REGISTRY_MAX_MANIFEST);
		cJSON *root;
		const cJSON *list, *t;

		xfer_init(&x, "GET", cur);
		x.out = &body;
		free(owned);
		owned = NULL;
		if (request(reg, &x, scope, 1, deadline, &owned, err) < 0) {
			box_buf_release(&body);
			goto out;
		}
		if (x.status != 200) {
			box_registry_error(x.status, x.errbody.data, x.errbody.len, what, err);
			box_buf_release(&body);
			goto out;
		}
		box_buf_release(&x.errbody);
		root = box_json_parse(body.data ? body.data : "", body.len, err);
		box_buf_release(&body);
		if (!root) {
			box_err_set(err, BOX_E_PROVIDER, "%s: the registry answered something that is not JSON", what);
			goto out;
		}
		list = cJSON_GetObjectItemCaseSensitive(root, "tags");
		if (!cJSON_IsNull(list) && list && !cJSON_IsArray(list)) {
			cJSON_Delete(root);
			box_err_set(err, BOX_E_PROVIDER, "%s: \"tags\" is not an array", what);
			goto out;
		}
		if (!cJSON_IsArray(list))
			list = NULL;
		cJSON_ArrayForEach(t, list) {
			cJSON *s;

			if (!cJSON_IsString(t) || !box_registry_valid_tag(t->valuestring))
				continue;
			if (++count > BOX_REGISTRY_MAX_TAGS) {
				cJSON_Delete(root);
				box_err_limit(err, BOX_E_LIMIT, "registry_tags", BOX_REGISTRY_MAX_TAGS, "tags",
					      "%s: more than %d tags", what, BOX_REGISTRY_MAX_TAGS);
				goto out;
			}
			s = cJSON_CreateString(t->valuestring);
			if (!s || !cJSON_AddItemToArray(all, s)) {
				cJSON_Delete(s);
				cJSON_Delete(root);
				oom(err);
				goto out;
			}
		}
		cJSON_Delete(root);
		if (box_registry_next_link(x.url, x.h.link[0] ? x.h.link : NULL, &next, err) < 0) {
			err->code = BOX_E_PROVIDER;
			goto out;
		}
		if (!next) {
			*tags = all;
			all = NULL;
			ret = 0;
			goto out;
		}
		if (!same_origin_as_registry(reg, next)) {
			box_err_set(err, BOX_E_POLICY, "%s: the next page is on another host", what);
			goto out;
		}
		free(cur);
		cur = next;
		next = NULL;
	}
	box_err_limit(err, BOX_E_LIMIT, "registry_tag_pages", BOX_REGISTRY_MAX_TAG_PAGES, "pages",
		      "%s: more than %d pages", what, BOX_REGISTRY_MAX_TAG_PAGES);
out:
	box_buf_release(&x.errbody);
	box_buf_release(&url);
	free(cur);
	free(next);
	free(owned);
	cJSON_Delete(all);
	return ret;
}

int box_registry_put_blob(struct box_registry *reg, const char *name, int fd, const char *digest,
			  int64_t size, struct box_err *err)
{
	struct box_buf url = BOX_BUF_INIT(URL_MAX), put = BOX_BUF_INIT(URL_MAX);
	char scope[BOX_REGISTRY_NAME_MAX + 64], what[BOX_REGISTRY_NAME_MAX + 100];
	char *owned = NULL, *loc = NULL;
	int64_t deadline = deadline_of(reg);
	struct xfer x;
	int ret = -1;

	xfer_start(&x);
	if (!box_registry_valid_digest(digest))
		return box_err_set(err, BOX_E_INVALID, "bad blob digest \"%.100s\"", digest ? digest : "");
	if (size < 0)
		return box_err_set(err, BOX_E_INVALID, "negative blob size");
	if (repo_url(reg, name, "blobs/", digest, &url, err) < 0 ||
	    repo_scope(reg, name, "pull,push", scope, sizeof(scope)) < 0)
		goto out;
	snprintf(what, sizeof(what), "blob %s@%s", name, digest);

	xfer_init(&x, "HEAD", url.data);
	if (request(reg, &x, scope, 1, deadline, &owned, err) < 0)
		goto out;
	if (x.status == 200) {
		ret = 0;
		goto out;
	}
	if (x.status != 404) {
		box_registry_error(x.status, x.errbody.data, x.errbody.len, what, err);
		goto out;
	}
	box_buf_release(&x.errbody);
	free(owned);
	owned = NULL;

	box_buf_truncate(&url, 0);
	if (repo_url(reg, name, "blobs/uploads/", NULL, &url, err) < 0)
		goto out;
	xfer_init(&x, "POST", url.data);
	if (request(reg, &x, scope, 0, deadline, &owned, err) < 0)
		goto out;
	if (x.status != 202 || !x.h.location[0]) {
		if (x.status == 202)
			box_err_set(err, BOX_E_PROVIDER, "%s: upload started without a Location", what);
		else
			box_registry_error(x.status, x.errbody.data, x.errbody.len, what, err);
		goto out;
	}
	box_buf_release(&x.errbody);
	loc = resolve_url(x.url, x.h.location, err);
	if (!loc || check_target(reg, loc, err) < 0)
		goto out;
	if (box_buf_printf(&put, err, "%s%sdigest=sha256%%3A%s", loc, strchr(loc, '?') ? "&" : "?",
			   digest + 7) < 0)
		goto out;
	free(owned);
	owned = NULL;
	xfer_init(&x, "PUT", put.data);
	x.extra[0] = "Content-Type: application/octet-stream";
	x.upload_fd = fd;
	x.upload_size = size;
	if (request(reg, &x, scope, 0, deadline, &owned, err) < 0)
		goto out;
	if (x.status != 201) {
		box_registry_error(x.status, x.errbody.data, x.errbody.len, what, err);
		goto out;
	}
	if (x.h.digest[0] && strcmp(x.h.digest, digest) != 0) {
		box_err_set(err, BOX_E_INTEGRITY, "%s: the registry stored another digest", what);
		goto out;
	}
	ret = 0;
out:
	box_buf_release(&x.errbody);
	box_buf_release(&url);
	box_buf_release(&put);
	free(owned);
	free(loc);
	return ret;
}

int box_registry_put_manifest(struct box_registry *reg, const char *name, const char *tag,
			      const void *body, size_t len, const char *media_type,
			      struct box_err *err)
{
	struct box_buf url = BOX_BUF_INIT(URL_MAX), ct = BOX_BUF_INIT(256);
	char scope[BOX_REGISTRY_NAME_MAX + 64], what[BOX_REGISTRY_NAME_MAX + 100];
	char hex[BOX_SHA256_HEX_LEN + 1], digest[BOX_REGISTRY_DIGEST_MAX];
	char *owned = NULL;
	int64_t deadline = deadline_of(reg);
	struct xfer x;
	size_t i;
	int ret = -1;

	xfer_start(&x);
	if (!box_registry_valid_tag(tag) && !box_registry_valid_digest(tag))
		return box_err_set(err, BOX_E_INVALID, "bad tag \"%.200s\"", tag ? tag : "");
	if (len > BOX_REGISTRY_MAX_MANIFEST)
		return box_err_limit(err, BOX_E_LIMIT, "manifest_bytes", BOX_REGISTRY_MAX_MANIFEST, "bytes",
				     "manifest larger than %d bytes", BOX_REGISTRY_MAX_MANIFEST);
	if (!media_type || !media_type[0] || strlen(media_type) >= BOX_REGISTRY_MEDIA_TYPE_MAX)
		return box_err_set(err, BOX_E_INVALID, "bad manifest media type");
	for (i = 0; media_type[i]; i++)
		if (!is_tchar((unsigned char)media_type[i]) && media_type[i] != '/')
			return box_err_set(err, BOX_E_INVALID, "bad manifest media type");
	if (box_sha256_buf(body ? body : "", len, hex, err) < 0)
		return -1;
	snprintf(digest, sizeof(digest), "sha256:%s", hex);
	if (box_registry_valid_digest(tag) && strcmp(tag, digest) != 0)
		return box_err_set(err, BOX_E_INTEGRITY, "manifest does not hash to %s", tag);
	if (repo_url(reg, name, "manifests/", tag, &url, err) < 0 ||
	    repo_scope(reg, name, "pull,push", scope, sizeof(scope)) < 0 ||
	    box_buf_printf(&ct, err, "Content-Type: %s", media_type) < 0)
		goto out;
	snprintf(what, sizeof(what), "manifest %s:%s", name, tag);
	xfer_init(&x, "PUT", url.data);
	x.extra[0] = ct.data;
	x.body = body ? (const char *)body : "";
	x.body_len = len;
	if (request(reg, &x, scope, 0, deadline, &owned, err) < 0)
		goto out;
	if (x.status != 201) {
		box_registry_error(x.status, x.errbody.data, x.errbody.len, what, err);
		goto out;
	}
	if (x.h.digest[0] && strncmp(x.h.digest, "sha256:", 7) == 0 && strcmp(x.h.digest, digest) != 0) {
		box_err_set(err, BOX_E_INTEGRITY, "%s: the registry stored another digest", what);
		goto out;
	}
	ret = 0;
out:
	box_buf_release(&x.errbody);
	box_buf_release(&url);
	box_buf_release(&ct);
	free(owned);
	return ret;
}
