#include <ctype.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "credenv.h"
#include "proc.h"
#include "banned.h"

#define VALUE_SCAN_MAX (64 * 1024)
#define NAME_MAX_LEN 4096

/* ------------------------------------------------------------------ names */

static int has_suffix(const char *s, size_t n, const char *suf)
{
	size_t m = strlen(suf);

	return n >= m && strcasecmp(s + n - m, suf) == 0;
}

/* AUTH anywhere but in the word AUTHOR(S): GIT_AUTHOR_NAME is not a credential, AUTHORIZATION
 * is. */
static int has_auth(const char *name)
{
	const char *p = name;

	while ((p = strcasestr(p, "AUTH"))) {
		const char *q = p + 4;

		if (strncasecmp(q, "OR", 2) != 0)
			return 1;
		q += 2;
		if (*q == 's' || *q == 'S')
			q++;
		if (*q != 0 && *q != '_')
			return 1;
		p += 4;
	}
	return 0;
}

/* An underscore-separated word that is KEY or KEYS or ends in KEY: API_KEY, KEY_ID, APIKEY,
 * SIGNINGKEY; KEYBOARD and KEYRING are not. */
static int has_key_word(const char *name)
{
	const char *w = name;

	while (*w) {
		size_t n = strcspn(w, "_");

		if ((n >= 3 && strncasecmp(w + n - 3, "KEY", 3) == 0) ||
		    (n == 4 && strncasecmp(w, "KEYS", 4) == 0) ||
		    (n > 4 && strncasecmp(w + n - 4, "KEYS", 4) == 0))
			return 1;
		w += n;
		if (*w == '_')
			w++;
	}
	return 0;
}

/* Desktop variables that say which session, not a secret of it. */
static int session_exempt(const char *name)
{
	static const char *const ok[] = {
		"XDG_SESSION_TYPE", "XDG_SESSION_CLASS", "XDG_SESSION_DESKTOP", "XDG_SESSION_ID",
		"DESKTOP_SESSION", "DBUS_SESSION_BUS_ADDRESS", "SESSION_MANAGER",
	};
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (strcasecmp(name, ok[i]) == 0)
			return 1;
	return 0;
}

const char *box_credenv_name_rule(const char *name)
{
	static const struct {
		const char *word, *rule;
	} inner[] = {
		{ "TOKEN", "name contains TOKEN" },
		{ "SECRET", "name contains SECRET" },
		{ "PASSW", "name contains PASSW" },
		{ "PASSPHRASE", "name contains PASSPHRASE" },
		{ "JWT", "name contains JWT" },
		{ "DSN", "name contains DSN" },
		{ "COOKIE", "name contains COOKIE" },
		{ "WEBHOOK", "name contains WEBHOOK" },
		{ "BEARER", "name contains BEARER" },
		{ "CREDS", "name contains CREDS" },
		{ "CREDENTIAL", "name contains CREDENTIAL" },
		{ "PRIVATE", "name contains PRIVATE" },
	};
	static const char *const prefix[] = { "AWS_", "AZURE_", "GOOGLE_", "GCP_", "SSH_" };
	static const char *const prefix_rule[] = {
		"name starts with AWS_", "name starts with AZURE_", "name starts with GOOGLE_",
		"name starts with GCP_", "name starts with SSH_",
	};
	size_t i, n = strnlen(name, NAME_MAX_LEN);

	for (i = 0; i < sizeof(inner) / sizeof(inner[0]); i++)
		if (strcasestr(name, inner[i].word))
			return inner[i].rule;
	if (has_auth(name))
		return "name contains AUTH";
	if (has_suffix(name, n, "PWD") && strcasecmp(name, "PWD") != 0 &&
	    strcasecmp(name, "OLDPWD") != 0)
		return "name ends in PWD";
	if (has_suffix(name, n, "_PAT"))
		return "name ends in _PAT";
	if (has_suffix(name, n, "_PASS"))
		return "name ends in _PASS";
	if (has_key_word(name))
		return "name has the word KEY";
	for (i = 0; i < sizeof(prefix) / sizeof(prefix[0]); i++)
		if (strncasecmp(name, prefix[i], strlen(prefix[i])) == 0)
			return prefix_rule[i];
	if (strcasestr(name, "SESSION") && !session_exempt(name))
		return "name contains SESSION";
	return NULL;
}

/* ------------------------------------------------------------------ values */

/* scheme://user:password@host: a non-empty password before the '@' of the authority. */
static int url_with_password(const char *v, size_t n)
{
	const char *p = v, *end = v + n;

	while (p < end && (p = memmem(p, (size_t)(end - p), "://", 3))) {
		const char *a = p + 3, *colon = NULL;

		for (; a < end && !strchr("/?#@ \t\r\n", *a); a++)
			if (*a == ':' && !colon)
				colon = a;
		if (a < end && *a == '@' && colon && colon + 1 < a)
			return 1;
		p += 3;
	}
	return 0;
}

static const char *ci_find(const char *v, size_t n, const char *needle)
{
	size_t m = strlen(needle), i;

	for (i = 0; i + m <= n; i++)
		if (strncasecmp(v + i, needle, m) == 0)
			return v + i;
	return NULL;
}

static int webhook_url(const char *v, size_t n)
{
	static const char *const hooks[] = {
		"hooks.slack.com/services/", "hooks.slack.com/workflows/", "hooks.slack.com/triggers/",
		"discord.com/api/webhooks/", "discordapp.com/api/webhooks/",
		".webhook.office.com/", "outlook.office.com/webhook", "outlook.office365.com/webhook",
	};
	size_t i;

	for (i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++)
		if (ci_find(v, n, hooks[i]))
			return 1;
	/* Teams workflows: a Power Automate trigger URL signed in its query */
	return (ci_find(v, n, ".logic.azure.com") || ci_find(v, n, ".api.powerplatform.com")) &&
	       ci_find(v, n, "/workflows/") != NULL;
}

static int pem_private_key(const char *v, size_t n)
{
	const char *p = v, *end = v + n;

	while (p < end && (p = memmem(p, (size_t)(end - p), "-----BEGIN ", 11))) {
		const char *q = p + 11, *close = memmem(q, (size_t)(end - q), "-----", 5);

		if (close && ci_find(q, (size_t)(close - q), "PRIVATE KEY"))
			return 1;
		p = q;
	}
	return 0;
}

static int b64url(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_';
}

static size_t run_of(const char *p, const char *end, int (*in)(char))
{
	size_t k = 0;

	while (p + k < end && in(p[k]))
		k++;
	return k;
}

/* header.payload.signature, the first two base64url JSON objects ("eyJ" is '{"'). */
static int jwt_at(const char *p, const char *end)
{
	size_t h, b;

	if (end - p < 3 || memcmp(p, "eyJ", 3) != 0)
		return 0;
	h = run_of(p, end, b64url);
	if (h < 10 || p + h >= end || p[h] != '.')
		return 0;
	p += h + 1;
	if (end - p < 3 || memcmp(p, "eyJ", 3) != 0)
		return 0;
	b = run_of(p, end, b64url);
	return b >= 10 && p + b < end && p[b] == '.';
}

static int alnum(char c)
{
	return isalnum((unsigned char)c);
}

static int alnum_(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

static int upper_digit(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int google_oauth(char c)
{
	return b64url(c) || c == '.';
}

static int slack(char c)
{
	return isalnum((unsigned char)c) || c == '-';
}

/* The token formats of the services agents are most often given keys for. A token starts at
 * the start of the value or after a character that is not alphanumeric. */
static const struct token_format {
	const char *prefix;
	size_t min, max;       /* of the body after the prefix; max 0: any */
	int (*in)(char);
	int digit;             /* the body must hold a digit (a random key does) */
	const char *rule;
} formats[] = {
	{ "ghp_", 30, 0, alnum, 0, "value is a GitHub token" },
	{ "gho_", 30, 0, alnum, 0, "value is a GitHub token" },
	{ "ghu_", 30, 0, alnum, 0, "value is a GitHub token" },
	{ "ghs_", 30, 0, alnum, 0, "value is a GitHub token" },
	{ "ghr_", 30, 0, alnum, 0, "value is a GitHub token" },
	{ "github_pat_", 20, 0, alnum_, 0, "value is a GitHub token" },
	{ "glpat-", 20, 0, b64url, 0, "value is a GitLab token" },
	{ "gldt-", 20, 0, b64url, 0, "value is a GitLab token" },
	{ "glrt-", 20, 0, b64url, 0, "value is a GitLab token" },
	{ "glptt-", 20, 0, b64url, 0, "value is a GitLab token" },
	{ "glcbt-", 20, 0, b64url, 0, "value is a GitLab token" },
	{ "gloas-", 20, 0, b64url, 0, "value is a GitLab token" },
	{ "xoxb-", 10, 0, slack, 0, "value is a Slack token" },
	{ "xoxp-", 10, 0, slack, 0, "value is a Slack token" },
	{ "xoxa-", 10, 0, slack, 0, "value is a Slack token" },
	{ "xoxr-", 10, 0, slack, 0, "value is a Slack token" },
	{ "xoxs-", 10, 0, slack, 0, "value is a Slack token" },
	{ "xoxe-", 10, 0, slack, 0, "value is a Slack token" },
	{ "xapp-", 10, 0, slack, 0, "value is a Slack token" },
	{ "AKIA", 16, 16, upper_digit, 0, "value is an AWS access key" },
	{ "ASIA", 16, 16, upper_digit, 0, "value is an AWS access key" },
	{ "ABIA", 16, 16, upper_digit, 0, "value is an AWS access key" },
	{ "ACCA", 16, 16, upper_digit, 0, "value is an AWS access key" },
	{ "sk-ant-", 20, 0, b64url, 0, "value is an Anthropic key" },
	{ "sk-", 20, 0, b64url, 1, "value is an OpenAI key" },
	{ "hf_", 30, 0, alnum, 0, "value is a Hugging Face token" },
	{ "npm_", 36, 0, alnum, 0, "value is an npm token" },
	{ "AIza", 35, 0, b64url, 0, "value is a Google API key" },
	{ "ya29.", 20, 0, google_oauth, 0, "value is a Google OAuth token" },
	{ "GOCSPX-", 20, 0, b64url, 0, "value is a Google client secret" },
	{ "sk_live_", 10, 0, alnum, 0, "value is a Stripe key" },
	{ "sk_test_", 10, 0, alnum, 0, "value is a Stripe key" },
	{ "rk_live_", 10, 0, alnum, 0, "value is a Stripe key" },
	{ "rk_test_", 10, 0, alnum, 0, "value is a Stripe key" },
	{ "whsec_", 20, 0, alnum, 0, "value is a Stripe key" },
};

static const char *token_at(const char *p, const char *end)
{
	size_t i;

	for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		const struct token_format *f = &formats[i];
		size_t m = strlen(f->prefix), k, d;
		const char *b = p + m;

		if ((size_t)(end - p) < m || memcmp(p, f->prefix, m) != 0)
			continue;
		k = run_of(b, end, f->in);
		if (k < f->min || (f->max && k > f->max))
			continue;
		for (d = 0; f->digit && d < k && !isdigit((unsigned char)b[d]); d++)
			;
		if (f->digit && d == k)
			continue;
		return f->rule;
	}
	return NULL;
}

const char *box_credenv_value_rule(const char *value)
{
	size_t n = strnlen(value, VALUE_SCAN_MAX), i;
	const char *end = value + n, *rule;

	if (url_with_password(value, n))
		return "value is a URL with a password";
	if (webhook_url(value, n))
		return "value is a webhook URL";
	if (pem_private_key(value, n))
		return "value is a PEM private key";
	for (i = 0; i < n; i++) {
		if (i > 0 && isalnum((unsigned char)value[i - 1]))
			continue;
		if (jwt_at(value + i, end))
			return "value is a JWT";
		if ((rule = token_at(value + i, end)))
			return rule;
	}
	return NULL;
}

const char *box_credenv_entry_rule(const char *entry)
{
	const char *eq = strchr(entry, '='), *rule;
	char name[256];
	size_t n = eq ? (size_t)(eq - entry) : strlen(entry);

	if (n >= sizeof(name)) {
		char *big = strndup(entry, n);

		if (!big)
			return "name too long to check";
		rule = box_credenv_name_rule(big);
		free(big);
	} else {
		memcpy(name, entry, n);
		name[n] = 0;
		rule = box_credenv_name_rule(name);
	}
	if (rule || !eq)
		return rule;
	return box_credenv_value_rule(eq + 1);
}

size_t box_credenv_filter(char *const *env, const char **out, size_t max)
{
	size_t i, k = 0;

	for (i = 0; env && env[i] && k + 1 < max; i++)
		if (strchr(env[i], '=') && !box_credenv_entry_rule(env[i]))
			out[k++] = env[i];
	out[k] = NULL;
	return k;
}

/* ------------------------------------------------------------------ scrub */

/* env_start and env_end of /proc/self/stat (fields 50 and 51). */
static int env_block(uintptr_t *start, uintptr_t *end)
{
	char a[32], b[32];

	if (box_proc_stat_field(0, 50, a, sizeof(a)) <= 0 ||
	    box_proc_stat_field(0, 51, b, sizeof(b)) <= 0)
		return -1;
	*start = (uintptr_t)strtoull(a, NULL, 10);
	*end = (uintptr_t)strtoull(b, NULL, 10);
	return *start && *end > *start && *end - *start <= 64u * 1024 * 1024 ? 0 : -1;
}

int box_credenv_scrub_self(void)
{
	extern char **environ;
	uintptr_t start = 0, end = 0;
	size_t n = 0, i, k = 0;
	char **keep;
	int removed = 0;

	for (i = 0; environ && environ[i]; i++)
		n++;
	/* the kept variables are copied (putenv keeps the copy), so what was read with getenv
	 * before stays valid; clearenv drops environ whatever it points at */
	keep = calloc(n + 1, sizeof(*keep));
	for (i = 0; keep && i < n; i++) {
		if (box_credenv_entry_rule(environ[i]) || !strchr(environ[i], '='))
			removed++;
		else if (!(keep[k++] = strdup(environ[i])))
			k--;
	}
	if (keep) {
		clearenv();
		for (i = 0; i < k; i++)
			putenv(keep[i]);
		free(keep);
	} else {
		clearenv();
	}
	if (env_block(&start, &end) == 0) {
		char *p = (char *)start, *e = (char *)end;

		while (p < e) {
			size_t len = strnlen(p, (size_t)(e - p));

			if (len && len < (size_t)(e - p) && box_credenv_entry_rule(p))
				memset(p, 0, len);
			p += len + 1;
		}
	}
	return removed;
}

void box_credenv_wipe_self(void)
{
	uintptr_t start = 0, end = 0;

	clearenv();
	if (env_block(&start, &end) == 0)
		memset((char *)start, 0, end - start);
}
