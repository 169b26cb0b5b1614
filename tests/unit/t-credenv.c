/* lib/core/credenv: every rule on both sides, the scrub of the process's own environment. */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "credenv.h"
#include "tap.h"

static void name_refused(const char *name, const char *rule)
{
	const char *got = box_credenv_name_rule(name);

	ok(got && strcmp(got, rule) == 0, "name %s refused: %s (got %s)", name, rule,
	   got ? got : "nothing");
}

static void name_passes(const char *name)
{
	const char *got = box_credenv_name_rule(name);

	ok(got == NULL, "name %s passes (got %s)", name, got ? got : "nothing");
}

/* The first 40 bytes of v, one line for TAP. */
static const char *shown(const char *v)
{
	static char b[41];
	size_t i;

	for (i = 0; v[i] && i < 40; i++)
		b[i] = v[i] == '\n' ? '|' : v[i];
	b[i] = 0;
	return b;
}

static void value_refused(const char *value, const char *rule)
{
	const char *got = box_credenv_value_rule(value);

	ok(got && strcmp(got, rule) == 0, "value %s refused: %s (got %s)", shown(value), rule,
	   got ? got : "nothing");
}

static void value_passes(const char *value)
{
	const char *got = box_credenv_value_rule(value);

	ok(got == NULL, "value %s passes (got %s)", shown(value), got ? got : "nothing");
}

static void test_names(void)
{
	/* the review's misses */
	name_refused("MYSQL_PWD", "name ends in PWD");
	name_refused("GPG_PASSPHRASE", "name contains PASSPHRASE");
	name_refused("CI_JOB_JWT", "name contains JWT");
	name_refused("CI_JOB_JWT_V2", "name contains JWT");
	name_refused("SIGNING_PASSPHRASE", "name contains PASSPHRASE");
	name_refused("SENTRY_DSN", "name contains DSN");
	name_refused("DATABASE_DSN", "name contains DSN");
	name_refused("SLACK_WEBHOOK_URL", "name contains WEBHOOK");
	name_refused("SESSION_COOKIE", "name contains COOKIE");
	name_refused("cookie_jar", "name contains COOKIE");
	/* each rule */
	name_refused("GITHUB_TOKEN", "name contains TOKEN");
	name_refused("gh_token", "name contains TOKEN");
	name_refused("CLIENT_SECRET", "name contains SECRET");
	name_refused("DB_PASSWORD", "name contains PASSW");
	name_refused("HTPASSWD", "name contains PASSW");
	name_refused("PGPWD", "name ends in PWD");
	name_refused("ROOT_pwd", "name ends in PWD");
	name_refused("HTTP_AUTHORIZATION", "name contains AUTH");
	name_refused("NPM_CONFIG__AUTH", "name contains AUTH");
	name_refused("OAUTH_CLIENT", "name contains AUTH");
	name_refused("API_BEARER", "name contains BEARER");
	name_refused("GOOGLE_APPLICATION_CREDENTIALS", "name contains CREDENTIAL");
	name_refused("DEPLOY_CREDS", "name contains CREDS");
	name_refused("PRIVATE_SIGNING", "name contains PRIVATE");
	name_refused("FLASK_SESSION", "name contains SESSION");
	name_refused("SESSION_ID", "name contains SESSION");
	name_refused("OPENAI_API_KEY", "name has the word KEY");
	name_refused("KEY_ID", "name has the word KEY");
	name_refused("KEY", "name has the word KEY");
	name_refused("APIKEY", "name has the word KEY");
	name_refused("STRIPE_KEYS", "name has the word KEY");
	name_refused("MASTERKEYS", "name has the word KEY");
	name_refused("my_license_key", "name has the word KEY");
	name_refused("REGISTRY_PAT", "name ends in _PAT");
	name_refused("SMTP_PASS", "name ends in _PASS");
	name_refused("AWS_REGION", "name starts with AWS_");
	name_refused("aws_region", "name starts with AWS_");
	name_refused("AZURE_TENANT", "name starts with AZURE_");
	name_refused("GOOGLE_CLOUD_PROJECT", "name starts with GOOGLE_");
	name_refused("GCP_PROJECT", "name starts with GCP_");
	name_refused("SSH_AUTH_SOCK", "name contains AUTH");
	name_refused("SSH_AGENT_PID", "name starts with SSH_");
	/* what must pass */
	name_passes("PWD");
	name_passes("OLDPWD");
	name_passes("pwd");
	name_passes("PATH");
	name_passes("HOME");
	name_passes("LANG");
	name_passes("TERM");
	name_passes("KEYBOARD");
	name_passes("XKB_KEYBOARD_LAYOUT");
	name_passes("KEYRING_BACKEND");
	name_passes("GIT_AUTHOR_NAME");
	name_passes("GIT_AUTHOR_EMAIL");
	name_passes("AUTHORS");
	name_passes("KUBECONTEXT");
	name_passes("XDG_SESSION_TYPE");
	name_passes("XDG_SESSION_ID");
	name_passes("DESKTOP_SESSION");
	name_passes("DBUS_SESSION_BUS_ADDRESS");
	name_passes("PASSENGER");
	name_passes("TZ");
	name_passes("PAT");
	name_passes("PASS_COUNT");
}

static void test_values(void)
{
	/* URLs with a password */
	value_refused("postgres://app:s3cret@db.internal:5432/app", "value is a URL with a password");
	value_refused("redis://:hunter2@cache:6379/0", "value is a URL with a password");
	value_refused("see https://user:pw@host/x and more", "value is a URL with a password");
	value_passes("https://example.org/path?user:x@y");
	value_passes("https://user@example.org/");
	value_passes("http://[::1]:8080/");
	value_passes("git@github.com:owner/repo.git");
	value_passes("postgres://db.internal:5432/app");
	/* webhooks */
	value_refused("https://hooks.slack.com/services/T000/B000/XXXX", "value is a webhook URL");
	value_refused("https://hooks.slack.com/workflows/T1/A2/3/4", "value is a webhook URL");
	value_refused("https://discord.com/api/webhooks/123/abc", "value is a webhook URL");
	value_refused("https://discordapp.com/api/webhooks/123/abc", "value is a webhook URL");
	value_refused("https://contoso.webhook.office.com/webhookb2/abc@def/IncomingWebhook/x/y",
		      "value is a webhook URL");
	value_refused("https://outlook.office.com/webhook/abc/IncomingWebhook/x",
		      "value is a webhook URL");
	value_refused("https://prod-01.westus.logic.azure.com:443/workflows/abc/triggers/manual"
		      "/paths/invoke?sig=xyz", "value is a webhook URL");
	value_passes("https://slack.com/help");
	value_passes("https://discord.com/channels/1/2");
	value_passes("https://example.org/workflows/");
	/* PEM */
	value_refused("-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----",
		      "value is a PEM private key");
	value_refused("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n", "value is a PEM private key");
	value_refused("-----BEGIN PRIVATE KEY-----", "value is a PEM private key");
	value_refused("-----BEGIN ENCRYPTED PRIVATE KEY-----", "value is a PEM private key");
	value_refused("-----BEGIN PGP PRIVATE KEY BLOCK-----", "value is a PEM private key");
	value_passes("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----");
	value_passes("-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----");
	/* JWT */
	value_refused("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
		      "value is a JWT");
	value_refused("Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJib3QifQ.", "value is a JWT");
	value_passes("eyJhbGciOiJIUzI1NiJ9");
	value_passes("eyJ.eyJ.x");
	value_passes("version.eyJsomething");
	/* token formats */
	value_refused("ghp_0123456789abcdefghijklmnopqrstuvwxyz", "value is a GitHub token");
	value_refused("gho_0123456789abcdefghijklmnopqrstuvwxyz", "value is a GitHub token");
	value_refused("ghs_0123456789abcdefghijklmnopqrstuvwxyz", "value is a GitHub token");
	value_refused("x-access-token:ghu_0123456789abcdefghijklmnopqrstuvwxyz",
		      "value is a GitHub token");
	value_refused("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
		      "value is a GitHub token");
	value_refused("glpat-xxxxxxxxxxxxxxxxxxxx", "value is a GitLab token");
	value_refused("glrt-0123456789abcdefghij", "value is a GitLab token");
	value_refused("xoxb-1234567890-1234567890-abcdefghijkl", "value is a Slack token");
	value_refused("xoxp-1234567890-abcdef", "value is a Slack token");
	value_refused("xapp-1-A0123-4567-abcdef", "value is a Slack token");
	value_refused("AKIAIOSFODNN7EXAMPLE", "value is an AWS access key");
	value_refused("ASIAIOSFODNN7EXAMPLE", "value is an AWS access key");
	value_refused("sk-proj-abcdefghij0123456789ABCDEFGHIJ", "value is an OpenAI key");
	value_refused("sk-0123456789abcdefghijABCDEFGHIJ", "value is an OpenAI key");
	value_refused("sk-ant-api03-abcdefghij0123456789_ABCDEF", "value is an Anthropic key");
	value_refused("hf_abcdefghijklmnopqrstuvwxyz0123456789", "value is a Hugging Face token");
	value_refused("npm_abcdefghijklmnopqrstuvwxyz0123456789", "value is an npm token");
	value_refused("AIzaSyA-abcdefghijklmnopqrstuvwxyz01234", "value is a Google API key");
	value_refused("ya29.a0AfH6SMBabcdefghijklmnop", "value is a Google OAuth token");
	value_refused("GOCSPX-abcdefghijklmnopqrstuvwxyz", "value is a Google client secret");
	value_refused("sk_live_0123456789abcdef", "value is a Stripe key");
	value_refused("rk_test_0123456789abcdef", "value is a Stripe key");
	value_refused("whsec_0123456789abcdefghijklmnop", "value is a Stripe key");
	/* near misses that must pass */
	value_passes("ghp_short");
	value_passes("xghp_0123456789abcdefghijklmnopqrstuvwxyz");
	value_passes("task-0123456789abcdefghijklmnop");
	value_passes("sk-learn-tutorial-dataset-name");
	value_passes("AKIAIOSFODNN7EXAMPLEXX");
	value_passes("akiaiosfodnn7example");
	value_passes("hf_hub_cache");
	value_passes("npm_config_cache");
	value_passes("/usr/local/bin:/usr/bin:/bin");
	value_passes("en_US.UTF-8");
	value_passes("");
	value_passes("xterm-256color");
	value_passes("sk_live_");
}

static void test_entries(void)
{
	const char *env[] = { "PATH=/bin", "GITHUB_TOKEN=x", "NOTE=ghp_0123456789abcdefghijklmnopqrstuvwxyz",
			      "PWD=/w", "BARE", "MYSQL_PWD=p", NULL };
	const char *out[8];

	ok(box_credenv_entry_rule("GITHUB_TOKEN") != NULL, "a bare NAME is looked at by name");
	ok(box_credenv_entry_rule("X=postgres://a:b@c/") != NULL, "NAME=VALUE by value");
	ok(box_credenv_entry_rule("X=1") == NULL, "X=1 passes");
	is_int(box_credenv_filter((char *const *)env, out, 8), 2, "filter keeps two");
	is_str(out[0], "PATH=/bin", "... PATH");
	is_str(out[1], "PWD=/w", "... PWD");
	ok(out[2] == NULL, "... NULL-terminated");
	is_int(box_credenv_filter((char *const *)env, out, 2), 1, "filter bounded by max");
	ok(out[1] == NULL, "... NULL-terminated");
}

/* The child re-executes itself with credentials in its environment block, scrubs, and the
 * parent reads its /proc/PID/environ. */
static void test_scrub(const char *self)
{
	char path[64], buf[65536];
	int p[2], fd;
	ssize_t n = 0, k;
	pid_t pid;
	char go;

	if (pipe(p) < 0) {
		ok(0, "pipe");
		return;
	}
	pid = fork();
	if (pid == 0) {
		char *const argv[] = { (char *)self, (char *)"--scrub-child", NULL };
		char *const envp[] = { (char *)"PATH=/usr/bin:/bin", (char *)"GITHUB_TOKEN=ghp_leakme1",
				       (char *)"MYSQL_PWD=leakme2", (char *)"PWD=/keep",
				       (char *)"NOTE=postgres://u:leakme3@db/", (char *)"KEEP_ME=yes",
				       NULL };

		dup2(p[1], 1);
		close(p[0]);
		execve(self, argv, envp);
		_exit(127);
	}
	close(p[1]);
	/* the child writes one byte once it has scrubbed, then waits for stdin's end */
	ok(read(p[0], &go, 1) == 1, "child scrubbed");
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	fd = open(path, O_RDONLY);
	while (fd >= 0 && n < (ssize_t)sizeof(buf) - 1 &&
	       (k = read(fd, buf + n, sizeof(buf) - 1 - (size_t)n)) > 0)
		n += k;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	for (k = 0; k < n; k++)
		if (!buf[k])
			buf[k] = '\n';
	ok(n > 0, "read %s", path);
	ok(!strstr(buf, "leakme"), "no credential left in /proc/PID/environ");
	ok(!strstr(buf, "GITHUB_TOKEN") && !strstr(buf, "MYSQL_PWD"), "... nor their names");
	ok(strstr(buf, "PATH=/usr/bin:/bin") && strstr(buf, "PWD=/keep") &&
	   strstr(buf, "KEEP_ME=yes"), "the others are kept");
	close(p[0]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static int scrub_child(void)
{
	extern char **environ;
	int removed = box_credenv_scrub_self(), bad = 0, i;

	for (i = 0; environ[i]; i++)
		if (strstr(environ[i], "leakme"))
			bad = 1;
	if (removed != 3 || bad || !getenv("KEEP_ME") || !getenv("PWD"))
		return 1;
	(void)!write(1, "s", 1);
	pause();
	return 0;
}

int main(int argc, char **argv)
{
	char self[PATH_MAX];

	if (argc == 2 && strcmp(argv[1], "--scrub-child") == 0)
		return scrub_child();
	test_names();
	test_values();
	test_entries();
	/* argv[0], not /proc/self/exe: under valgrind that is valgrind */
	if (realpath(argv[0], self))
		test_scrub(self);
	else
		ok(0, "realpath %s", argv[0]);
	return done_testing();
}
