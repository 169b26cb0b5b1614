#!/usr/bin/env bats
# box-sandbox: what a hostile guest or a careless caller could get from box's own processes
# (credentials in their environment), and what each resource limit bounds.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	sb_setup
}

teardown() {
	sb_teardown
	if [ -n "${NB:-}" ]; then
		as_nobody box-sandbox delete nb >/dev/null 2>&1 || true
		rm -rf "$NB"
	fi
}

# creds: the credential-shaped variables of a careless caller, by name and by value
creds() {
	export GITHUB_TOKEN=leak-gh1 MYSQL_PWD=leak-my2 GPG_PASSPHRASE=leak-gpg3 CI_JOB_JWT=leak-jwt4
	export SENTRY_DSN=leak-dsn5 SESSION_COOKIE=leak-ck6 OPENAI_API_KEY=leak-oa7
	export HOOK_URL=https://hooks.slack.com/services/T0/B0/leak8
	export DB_URL=postgres://app:leak9@db/app
	export NOTE=ghp_leak0123456789abcdefghijklmnopqrstuv
	export PLAIN_VISIBLE=plain-ok
}

# environ PID: the process's environment as the kernel shows it, one variable a line
environ() {
	tr '\0' '\n' <"/proc/$1/environ"
}

@test "--env: every rule refuses with policy_denied, names the rule, and nothing is created" {
	export DEPLOY_URL=https://bot:hunter2@git.example/x
	local spec rule
	while IFS='|' read -r spec rule; do
		run_sb create --session cr --env "$spec"
		assert_fail policy_denied 4 ".error.path == \"\$.env[0]\" and (.error.message | contains(\"($rule)\"))"
		[ ! -e "$BOX_STATE_DIR/sandboxes/cr" ]
		refute_output --partial hunter2
		refute_output --partial leakval
	done <<'LIST'
MYSQL_PWD=leakval|name ends in PWD
GPG_PASSPHRASE=leakval|name contains PASSPHRASE
CI_JOB_JWT=leakval|name contains JWT
SIGNING_PASSPHRASE=leakval|name contains PASSPHRASE
SENTRY_DSN=leakval|name contains DSN
SESSION_COOKIE=leakval|name contains COOKIE
SLACK_WEBHOOK=leakval|name contains WEBHOOK
API_KEY_ID=leakval|name has the word KEY
DEPLOY_URL|value is a URL with a password
URL=https://hooks.slack.com/services/T0/B0/leakval|value is a webhook URL
URL=https://discord.com/api/webhooks/1/leakval|value is a webhook URL
PEM=-----BEGIN OPENSSH PRIVATE KEY-----leakval|value is a PEM private key
T=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJsZWFrdmFsIn0.c2ln|value is a JWT
T=ghp_leakval0123456789abcdefghijklmnopqrst|value is a GitHub token
T=glpat-leakval0123456789abcd|value is a GitLab token
T=xoxb-0123-leakval|value is a Slack token
T=AKIAIOSFODNN7EXAMPLE|value is an AWS access key
T=sk-proj-leakval0123456789abcdefghij|value is an OpenAI key
T=sk-ant-api03-leakval0123456789abcd|value is an Anthropic key
T=hf_leakval0123456789abcdefghijklmnopq|value is a Hugging Face token
T=npm_leakval0123456789abcdefghijklmnopqrstuv|value is an npm token
T=AIzaleakval0123456789abcdefghijklmnopqrst|value is a Google API key
T=sk_live_leakval0123|value is a Stripe key
LIST
	# exec refuses them too, before anything runs
	run_sb create --session ok1
	sb_ok
	run_sb exec ok1 --env GPG_PASSPHRASE=leakval -- touch /workspace/ran
	assert_fail policy_denied 4 '.error.message | contains("(name contains PASSPHRASE)")'
	run_sb exec ok1 -- sh -c 'test ! -e /workspace/ran'
	sb_ok
	# and what is not a credential passes
	run_sb exec ok1 --env PWD=/workspace --env OLDPWD=/ --env KEYBOARD=us --env GIT_AUTHOR_NAME=a \
		--env XDG_SESSION_TYPE=tty --env URL=https://example.org/x -- sh -c 'echo "$KEYBOARD $GIT_AUTHOR_NAME $URL"'
	sb_ok '.stdout == "us a https://example.org/x\n"'
}

@test "the session's keeper, holder and zygote and the box-sbfiles helper keep none of the caller's credentials" {
	creds
	# box-sbfiles through a wrapper that records its environment
	mkdir "$T/libexec"
	for f in "$BOX_BUILDDIR"/box-*; do
		[ -x "$f" ] && [ -f "$f" ] && ln -s "$f" "$T/libexec/"
	done
	rm "$T/libexec/box-sbfiles"
	printf '#!/bin/sh\nenv > "%s/sbfiles.env"\nexec "%s/box-sbfiles" "$@"\n' "$T" "$BOX_BUILDDIR" >"$T/libexec/box-sbfiles"
	chmod +x "$T/libexec/box-sbfiles"
	export BOX_LIBEXEC_DIR=$T/libexec
	run_sb create --session kz
	sb_ok
	run_sb exec kz -- sh -c 'echo x > /output/x'
	sb_ok '.outputs | length == 1'
	[ -s "$T/sbfiles.env" ]
	run grep -c leak "$T/sbfiles.env"
	assert_output 0
	grep -q '^PLAIN_VISIBLE=plain-ok$' "$T/sbfiles.env"
	grep -q "^BOX_STATE_DIR=$BOX_STATE_DIR\$" "$T/sbfiles.env"
	# the long-lived processes: the holder, its parent the keeper, the keeper's other children
	local holder keeper pids p n=0
	holder=$(sb_holder kz)
	keeper=$(awk '/^PPid:/ {print $2}' "/proc/$holder/status")
	pids="$holder $keeper $(cat /proc/"$keeper"/task/*/children)"
	for p in $pids; do
		[ -r "/proc/$p/environ" ] || continue
		n=$((n + 1))
		run environ "$p"
		assert_success
		refute_output --partial leak
		refute_output --regexp 'GITHUB_TOKEN|MYSQL_PWD|GPG_PASSPHRASE|CI_JOB_JWT|SENTRY_DSN|SESSION_COOKIE|OPENAI_API_KEY'
		assert_output --partial 'PLAIN_VISIBLE=plain-ok'
	done
	# keeper, holder and (where it could join) the zygote
	[ "$n" -ge 2 ]
	# the caller itself still had them: the test is not vacuous
	env | grep -q "^GITHUB_TOKEN=leak-gh1$"
}

# burn N SECONDS: a guest command of N processes, each using SECONDS of CPU, printing the CPU
# its children used in all
burn() {
	printf '%s' "import os, time
for i in range($1):
    if os.fork() == 0:
        while time.process_time() < $2: pass
        os._exit(0)
for i in range($1): os.wait()
t = os.times()
print(round(t.children_user + t.children_system, 2))"
}

scopes_cgroup='.limits_enforced_by == "cgroup" and .limit_scopes == {
	"memory": {"scope": "session", "by": "cgroup"}, "pids": {"scope": "session", "by": "cgroup"},
	"cpu_ms": {"scope": "exec", "by": "cgroup"}, "disk_bytes": {"scope": "session", "by": "walk"},
	"timeout_ms": {"scope": "exec", "by": "clock"}, "max_output_bytes": {"scope": "exec", "by": "box"}}'
scopes_rlimit='.limits_enforced_by == "rlimit" and .limit_scopes == {
	"memory": {"scope": "process", "by": "rlimit"}, "pids": {"scope": "user", "by": "rlimit"},
	"cpu_ms": {"scope": "process", "by": "rlimit"}, "disk_bytes": {"scope": "session", "by": "walk"},
	"timeout_ms": {"scope": "exec", "by": "clock"}, "max_output_bytes": {"scope": "exec", "by": "box"}}'

@test "limit_scopes with cgroups (root): memory counts /tmp pages for the whole session, cpu_ms sums an exec's processes" {
	run_sb create --session lm --memory 67108864 --disk-bytes 536870912
	sb_ok
	[ "$(echo "$output" | jq -r .limits_enforced_by)" = cgroup ] || skip "cgroups are not writable here"
	jqe "$scopes_cgroup"
	# 40 MiB in /tmp stay charged to the session after their exec: 48 MiB more in a process
	# are over the 64 MiB, and fit once the file is gone
	run_sb exec lm --timeout-ms 60000 -- sh -c 'head -c 40M /dev/zero > /tmp/f'
	sb_ok "$scopes_cgroup"
	run_sb exec lm --timeout-ms 60000 -- python3 -c 'b = bytearray(48 << 20); print(len(b))'
	assert_fail limit_exceeded 3 ".resource_limit == \"memory\" and ($scopes_cgroup)"
	run_sb exec lm --timeout-ms 60000 -- sh -c 'rm /tmp/f'
	sb_ok
	run_sb exec lm --timeout-ms 60000 -- python3 -c 'b = bytearray(48 << 20); print(len(b))'
	sb_ok '.stdout == "50331648\n"'
	# three processes of 0.8 s CPU each: 2.4 s in the exec, over its 1000 ms
	run_sb create --session lc --cpu-ms 1000
	sb_ok
	run_sb exec lc --timeout-ms 60000 -- python3 -c "$(burn 3 0.8)"
	assert_fail limit_exceeded 3 ".resource_limit == \"cpu\" and ($scopes_cgroup)"
	# a status reports them too
	run_sb status lc
	sb_ok "$scopes_cgroup"
}

# as_nobody CMD...: CMD as uid and gid 65534 with one supplementary group (100), box's build on
# PATH and NB (a directory nobody can write) as state dir and home
as_nobody() {
	setpriv --reuid 65534 --regid 65534 --groups 100 \
		env -i PATH="$PATH" BOX_LIBEXEC_DIR="${BOX_LIBEXEC_DIR:-}" BOX_STATE_DIR="$NB/state" \
		HOME="$NB" LANG=C.UTF-8 "$@"
}

@test "limit_scopes in rlimit mode (uid 65534): memory and cpu_ms bound each process, /tmp is not counted, groups stay" {
	setpriv --reuid 65534 --regid 65534 --clear-groups unshare -U true 2>/dev/null ||
		skip "unprivileged user namespaces are not available here"
	NB=$(mktemp -d /tmp/box-nobody.XXXXXX)
	chmod 0777 "$NB"
	export NB
	run --separate-stderr as_nobody box-sandbox create --session nb --memory 67108864 \
		--cpu-ms 1000 --disk-bytes 536870912
	[ "$status" -eq 0 ]
	jqe "$scopes_rlimit"
	# 160 MiB of tmpfs pages under a 64 MiB limit: RLIMIT_AS counts no tmpfs page
	run --separate-stderr as_nobody box-sandbox exec nb --timeout-ms 60000 -- sh -c \
		'head -c 160M /dev/zero > /tmp/f && stat -c %s /tmp/f'
	[ "$status" -eq 0 ]
	jqe ".stdout == \"167772160\n\" and ($scopes_rlimit)"
	# 2.4 s of CPU in three processes pass a 1000 ms limit: RLIMIT_CPU is per process
	run --separate-stderr as_nobody box-sandbox exec nb --timeout-ms 60000 -- python3 -c "$(burn 3 0.8)"
	[ "$status" -eq 0 ]
	jqe "(.stdout | rtrimstr(\"\n\") | tonumber) >= 2.0 and .resource_limit == null and ($scopes_rlimit)"
	# ... but one process alone is stopped at its second (SIGKILL at the hard limit)
	run --separate-stderr as_nobody box-sandbox exec nb --timeout-ms 60000 -- python3 -c \
		'import time
while time.process_time() < 30: pass'
	[ "$status" -ne 0 ]
	jqe '.signal == "SIGKILL" and .duration_ms < 30000'
	# the host user's supplementary group stays, shown as the overflow gid
	run --separate-stderr as_nobody box-sandbox exec nb -- sh -c 'grep "^Groups:" /proc/self/status'
	[ "$status" -eq 0 ]
	jqe '.stdout | test("^Groups:\\s+65534\\s*\n$")'
	run --separate-stderr as_nobody box-sandbox delete nb
	[ "$status" -eq 0 ]
}
