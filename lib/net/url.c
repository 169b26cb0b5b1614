/* The URL checks of url.h, with libcurl's URL parser. Kept apart from policy.c so that a
 * binary which only validates rules (box-run) does not load libcurl. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <curl/curl.h>

#include "url.h"
#include "banned.h"

void box_url_release(struct box_url *u)
{
	free(u->path);
	free(u->url);
	memset(u, 0, sizeof(*u));
}

static int rule_matches(const struct box_policy_rule *r, unsigned scheme, unsigned method,
			const char *host, int port, const char *path)
{
	return (r->schemes & scheme) && (!r->methods || (r->methods & method)) &&
		r->port == port && box_policy_host_matches(r, host) && box_policy_path_matches(r, path);
}

/* Checks and normalizes the host of u in place (lowercase, no trailing dot). */
static int check_host(CURLU *u, char *host, size_t size, struct box_err *err)
{
	char *h = NULL, *zone = NULL;
	size_t n;
	int rc = 0;

	if (curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK || !h)
		return box_err_set(err, BOX_E_INVALID, "URL has no host");
	if (curl_url_get(u, CURLUPART_ZONEID, &zone, 0) == CURLUE_OK) {
		curl_free(zone);
		rc = box_err_set(err, BOX_E_POLICY, "IPv6 zone ids are not allowed in URLs");
		goto out;
	}
	n = strlen(h);
	if (n == 0 || n >= size) {
		rc = box_err_set(err, BOX_E_INVALID, "bad URL host");
		goto out;
	}
	if (h[0] == '[') {
		if (h[n - 1] != ']' || box_policy_canon_v6(h + 1, n - 2, host, size) < 0)
			rc = box_err_set(err, BOX_E_INVALID, "bad IPv6 address in URL");
		goto out;
	}
	memcpy(host, h, n + 1);
	if (box_policy_normalize_host(host) < 0) {
		rc = box_err_set(err, BOX_E_POLICY,
				 "host \"%.*s\" refused: only ASCII host names are allowed", 255, h);
		goto out;
	}
	if (strcmp(host, h) != 0 && curl_url_set(u, CURLUPART_HOST, host, 0) != CURLUE_OK)
		rc = box_err_set(err, BOX_E_INVALID, "bad URL host");
out:
	curl_free(h);
	return rc;
}

static int has_part(CURLU *u, CURLUPart part)
{
	char *s = NULL;
	CURLUcode rc = curl_url_get(u, part, &s, 0);

	curl_free(s);
	return rc == CURLUE_OK;
}

static int parse_url(const char *url, struct box_url *out, unsigned *scheme, struct box_err *err)
{
	CURLU *u;
	CURLUcode rc;
	char *s = NULL, *port = NULL, *path = NULL, *full = NULL;
	int ret = -1;
	long v;

	if (strnlen(url, BOX_URL_MAX + 1) > BOX_URL_MAX)
		return box_err_set(err, BOX_E_INVALID, "URL longer than %d bytes", BOX_URL_MAX);
	u = curl_url();
	if (!u)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	rc = curl_url_set(u, CURLUPART_URL, url, 0);
	if (rc != CURLUE_OK) {
		box_err_set(err, BOX_E_INVALID, "malformed URL: %s", curl_url_strerror(rc));
		goto out;
	}
	if (curl_url_get(u, CURLUPART_SCHEME, &s, 0) != CURLUE_OK || !s) {
		box_err_set(err, BOX_E_INVALID, "URL has no scheme");
		goto out;
	}
	if (strcmp(s, "https") == 0) {
		*scheme = BOX_SCHEME_HTTPS;
	} else if (strcmp(s, "http") == 0) {
		*scheme = BOX_SCHEME_HTTP;
	} else {
		box_err_set(err, BOX_E_POLICY, "scheme \"%.16s\" refused: only http and https", s);
		goto out;
	}
	memcpy(out->scheme, s, strlen(s) + 1);
	if (has_part(u, CURLUPART_USER) || has_part(u, CURLUPART_PASSWORD) ||
	    has_part(u, CURLUPART_OPTIONS)) {
		box_err_set(err, BOX_E_POLICY, "credentials in URLs are refused");
		goto out;
	}
	if (check_host(u, out->host, sizeof(out->host), err) < 0)
		goto out;
	if (curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_URL, &full, 0) != CURLUE_OK) {
		box_err_set(err, BOX_E_INVALID, "malformed URL");
		goto out;
	}
	v = strtol(port, NULL, 10);
	if (v < 1 || v > 65535) {
		box_err_set(err, BOX_E_INVALID, "bad port in URL");
		goto out;
	}
	out->port = (int)v;
	out->path = strdup(path);
	out->url = strdup(full);
	if (!out->path || !out->url) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto out;
	}
	ret = 0;
out:
	curl_free(s);
	curl_free(port);
	curl_free(path);
	curl_free(full);
	curl_url_cleanup(u);
	return ret;
}

int box_policy_check_url(const struct box_policy *p, const char *method, const char *url,
			 struct box_url *out, struct box_err *err)
{
	unsigned mbit = box_policy_method_bit(method), scheme = 0;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!mbit)
		return box_err_set(err, BOX_E_INVALID, "unsupported HTTP method \"%.16s\"",
				   method ? method : "");
	if (!url)
		return box_err_set(err, BOX_E_INVALID, "missing URL");
	if (parse_url(url, out, &scheme, err) < 0) {
		box_url_release(out);
		return -1;
	}
	for (i = 0; i < p->n && i < BOX_POLICY_MAX_RULES; i++)
		if (rule_matches(&p->rules[i], scheme, mbit, out->host, out->port, out->path))
			return 0;
	box_err_set(err, BOX_E_POLICY, "host %s not allowed: no allow rule matches %s %s://%s:%d%.200s",
		    out->host, method, out->scheme, out->host, out->port, out->path);
	box_url_release(out);
	return -1;
}
