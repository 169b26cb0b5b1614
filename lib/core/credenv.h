#ifndef BOX_CREDENV_H
#define BOX_CREDENV_H

#include <stddef.h>

/*
 * What box counts as a credential in an environment variable: the one place for the rules of
 * the --env filter (box-sandbox, providers, tools and helpers) and of the scrub of box's own
 * long-lived processes.
 *
 * A variable is credential-shaped when its name or its value is:
 *  - names (case-insensitive): containing TOKEN, SECRET, PASSW, PASSPHRASE, JWT, DSN, COOKIE,
 *    WEBHOOK, BEARER, CREDS, CREDENTIAL, AUTH (not AUTHOR), SESSION (but for a few desktop
 *    variables: XDG_SESSION_*, DESKTOP_SESSION, DBUS_SESSION_BUS_ADDRESS); ending in PWD (but
 *    PWD and OLDPWD), _PAT or _PASS; an underscore-separated word that is KEY or KEYS or ends in
 *    KEY (API_KEY, KEY_ID, APIKEY, not KEYBOARD); starting AWS_, AZURE_, GOOGLE_, GCP_ or SSH_;
 *  - values: a URL with a password (scheme://user:pass@host), a Slack, Discord or Microsoft
 *    Teams webhook URL, a PEM private key, a JWT, or a token in the format of GitHub, GitLab,
 *    Slack, AWS access keys, OpenAI, Anthropic, Hugging Face, npm, Google or Stripe.
 * Each rule has a short name ("name contains TOKEN", "value is a GitHub token") for messages,
 * which never quote the value.
 */

/* The rule name breaks (a static string), or NULL when the name is not credential-shaped. */
const char *box_credenv_name_rule(const char *name);

/* The rule value breaks (a static string), or NULL. Looks at the first 64 KiB only. */
const char *box_credenv_value_rule(const char *value);

/* The rule "NAME=VALUE" (or a bare "NAME") breaks by its name or its value, or NULL. */
const char *box_credenv_entry_rule(const char *entry);

/*
 * Fills out (max >= 1 slots) with the entries of the NULL-terminated env that are not
 * credential-shaped, in order, then NULL; entries past max - 1 are left out. out points into
 * env. Returns the number of entries kept.
 */
size_t box_credenv_filter(char *const *env, const char **out, size_t max);

/*
 * Removes every credential-shaped variable from this process's environment, and overwrites
 * with NUL bytes its bytes in the environment block the kernel shows as /proc/PID/environ (the
 * one the process was executed with). For the long-lived processes box forks from a caller
 * (a session's keeper, holder and zygote). Pointers into removed strings read "" afterwards.
 * Returns the number of variables removed.
 */
int box_credenv_scrub_self(void);

/* Empties this process's environment and overwrites its whole environment block with NUL
 * bytes: for a process that runs untrusted code and needs nothing of its caller's
 * environment (box-run's VM child). */
void box_credenv_wipe_self(void);

#endif
