#!/usr/bin/env bats
# The trust boundary (box(7), TRUST): the --json request is the agent's and sets only what the
# operator's policy grants; caps are maximums; --describe offers exactly what --json accepts;
# box-sandbox binds an agent to the operator's sessions; policy files are checked; helpers
# are found beside a build tree's binaries.

load helpers

setup() {
	box_setup
	BOX_STATE_DIR=$T/state
	BOX_HOME=$T/home
	export BOX_STATE_DIR BOX_HOME
	unset BOX_POLICY
}

teardown() {
	sb_teardown
}

# members BIN [ARG...]: the request members --describe offers, one a line, sorted
members() {
	"$@" --describe | jq -r '.input_schema.properties | keys[]'
}

# operator_members BIN: what only the operator may set under the built-in policy
operator_members() {
	comm -13 <(members "$1") <(members "$1" --trust-request)
}

# hostile VALUE of an operator member: what an agent would send to reach the host
hostile() {
	case $1 in
	workspace) echo '"/"' ;;
	allow) echo '["https://example.com", "127.0.0.1:22"]' ;;
	allow_private_network) echo true ;;
	allow_host) echo '["127.0.0.1:22", "*.com:443", "169.254.169.254:80"]' ;;
	deny_host) echo '[]' ;;
	guest_port) echo 22 ;;
	background) echo true ;;
	every) echo 1 ;;
	tools) echo '"/etc/passwd"' ;;
	mount) echo '["/:/host:rw"]' ;;
	input) echo '["/etc/shadow"]' ;;
	env) echo '["PATH=/host/bin"]' ;;
	init) echo "[\"touch $T/pwned\"]" ;;
	provider) echo '"evil"' ;;
	idle_pause_after_seconds) echo 0 ;;
	dir) echo "\"$T\"" ;;
	registry) echo "\"oci:$T/evil\"" ;;
	lock | manifest) echo "\"$T/evil.lock\"" ;;
	locks) echo "[\"$T/evil.lock\"]" ;;
	export | output | host_dir) echo "\"$T/pwned\"" ;;
	from_snapshot) echo "\"$T/evil\"" ;;
	insecure | force | tty | force_tty) echo true ;;
	max_timeout_ms) echo 86400000 ;;
	max_*) echo 1000000 ;;
	*) echo "no hostile value for $1" >&2; return 1 ;;
	esac
}

# nothing_left: no session record, no cgroup, no host file written by any refused request
nothing_left() {
	[ ! -e "$T/pwned" ]
	[ ! -e "$T/evil.lock" ] && [ ! -e "$T/evil" ]
	if [ -d "$BOX_STATE_DIR/sandboxes" ]; then
		[ -z "$(find "$BOX_STATE_DIR/sandboxes" -mindepth 1 -type d)" ]
	fi
	[ ! -e "$BOX_HOME/store" ] || [ -z "$(ls -A "$BOX_HOME/store/sha256" 2>/dev/null)" ]
}

@test "the built-in policy keeps every field that can reach the host for the operator" {
	run -0 operator_members box-run
	assert_equal "$(echo $output)" "allow allow_private_network max_instructions max_output_bytes max_result_bytes max_write_bytes tools workspace"
	run -0 operator_members box-sandbox
	assert_equal "$(echo $output)" "allow_host background deny_host env every export force_tty from_snapshot guest_port host_dir idle_pause_after_seconds init input mount output provider tools tty"
	run -0 operator_members box-pack
	assert_equal "$(echo $output)" "dir force insecure registry"
	run -0 operator_members box-pull
	assert_equal "$(echo $output)" "insecure lock registry"
	run -0 operator_members box-lock
	assert_equal "$(echo $output)" "insecure lock locks manifest registry"
	# the flag-only cap is offered to nobody
	run -0 members box-run --trust-request
	refute_line max_timeout_ms
}

@test "box-run: every operator member is policy_denied, alone and among valid members" {
	local f v
	for f in $(operator_members box-run) max_timeout_ms; do
		v=$(hostile "$f")
		for req in "{\"script\": \"print('XYZZY')\", \"$f\": $v}" \
			"{\"$f\": $v, \"script\": \"print('XYZZY')\", \"args\": [1], \"timeout_ms\": 1000, \"events\": true}"; do
			run_box_json "$req"
			assert_fail policy_denied 4 ".error.path == \"\$.$f\" and (has(\"stdout\") | not)"
			refute_output --partial XYZZY
		done
	done
	nothing_left
}

@test "box-run: an agent cannot read the host through a workspace it names" {
	echo secret >"$OUTSIDE/s"
	run_box_json "{\"script\": \"return fs.read('/s')\", \"workspace\": \"$OUTSIDE\"}"
	assert_fail policy_denied 4 '.error.path == "$.workspace"'
	refute_output --partial secret
	# the operator's flag grants it, the request asks for work within it
	run_box_json '{"script": "return fs.read(\"/s\")"}' -w "$OUTSIDE"
	assert_ok '.result == "secret\n"'
}

@test "box-sandbox: every operator member is policy_denied, alone, among others and in an exec" {
	[ "$(id -u)" = 0 ] || skip "needs root"
	local f v
	BOX_PROG=box-sandbox
	for f in $(operator_members box-sandbox); do
		v=$(hostile "$f")
		for req in "{\"op\": \"create\", \"session\": \"x\", \"$f\": $v}" \
			"{\"op\": \"create\", \"$f\": $v, \"timeout_ms\": 1000, \"memory\": 1048576}" \
			"{\"op\": \"exec\", \"session\": \"x\", \"argv\": [\"touch\", \"/workspace/ran\"], \"$f\": $v}" \
			"{\"op\": \"write\", \"path\": \"a\", \"content\": \"b\", \"$f\": $v}"; do
			run --separate-stderr box-sandbox --json --session x <<<"$req"
			assert_fail policy_denied 4 ".error.path == \"\$.$f\""
		done
	done
	nothing_left
	[ ! -e /sys/fs/cgroup/pids/box/x ] && [ ! -e /sys/fs/cgroup/box/x ]
}

@test "box-pack, box-pull, box-lock: host paths, registries and insecure are the operator's" {
	local b f v
	for b in box-pack box-pull box-lock; do
		for f in $(operator_members "$b"); do
			v=$(hostile "$f")
			BOX_PROG=$b run --separate-stderr "$b" --json <<<"{\"$f\": $v}"
			BOX_PROG=$b assert_fail policy_denied 4 ".error.path == \"\$.$f\""
		done
	done
	nothing_left
}

# sample VALUE for a member the agent may set: valid and within its cap
sample() {
	case $1 in
	script) echo '"return 1"' ;;
	args | argv | artifacts | names) echo '["a"]' ;;
	op) echo '"status"' ;;
	session | from) echo '"x"' ;;
	command) echo '"status"' ;;
	events | frozen) echo false ;;
	digest) echo "\"sha256:$(printf '%064d' 0)\"" ;;
	cwd | path) echo '"/workspace"' ;;
	content_base64) echo '"YQ=="' ;;
	stdin | content) echo '"a"' ;;
	memory) echo 1048576 ;;
	disk_bytes) echo 1048576 ;;
	memory_bytes) echo 65536 ;;
	*) echo 1 ;;
	esac
}

# accepted BIN REQUEST [ARG...]: the request passed the trust check (exit is not 4, or the
# policy_denied is not about the trust boundary)
accepted() {
	local bin=$1 req=$2
	shift 2
	run --separate-stderr "$bin" --json "$@" <<<"$req"
	if [ "$status" -eq 4 ]; then
		echo "$bin refused $req: $output" >&2
		return 1
	fi
}

@test "--describe and what --json accepts are the same set, member by member" {
	local b f v base
	for b in box-run box-sandbox box-pull box-lock box-pack; do
		for f in $(members "$b" --trust-request); do
			v=$(sample "$f")
			case $b in
			box-run) base='"script": "return 1", ' ;;
			box-sandbox) base='"op": "status", ' ;;
			*) base= ;;
			esac
			[ "$f" = script ] || [ "$f" = op ] && base=
			bind=()
			[ "$b" = box-sandbox ] && bind=(--session x)
			if members "$b" | grep -qxF "$f"; then
				accepted "$b" "{$base\"$f\": $v}" "${bind[@]}"
			else
				run --separate-stderr "$b" --json "${bind[@]}" <<<"{$base\"$f\": $(hostile "$f")}"
				assert_equal "$status" 4
				jqe ".error.code == \"policy_denied\" and .error.path == \"\$.$f\""
			fi
		done 2>&1
	done
	nothing_left
}

@test "every cap: at its edge the request passes, one past it is policy_denied with the cap" {
	local b f max base caps
	for b in box-run box-sandbox; do
		# a cap of the policy, not a member's own bound (seed's maximum is its range)
		caps=$("$b" --describe | jq -r --slurpfile full \
			"$BATS_TEST_DIRNAME/../share/schema/$b.request.json" '.input_schema.properties |
			to_entries[] | select(.value.type == "integer" and .value.maximum != null and
			.value.maximum < ($full[0].properties[.key].maximum // infinite)) |
			"\(.key)=\(.value.maximum)"')
		[ -n "$caps" ]
		for c in $caps; do
			f=${c%%=*} max=${c#*=}
			base='"script": "return 1", ' bind=()
			[ "$b" = box-sandbox ] && base='"op": "status", ' bind=(--session x)
			accepted "$b" "{$base\"$f\": $max}" "${bind[@]}"
			run --separate-stderr "$b" --json "${bind[@]}" <<<"{$base\"$f\": $((max + 1))}"
			BOX_PROG=$b assert_fail policy_denied 4 ".error.path == \"\$.$f\" and
				.error.configured == $max and .error.limit == \"$f\""
		done
	done
	# the operator's --max-timeout-ms is the cap --describe shows and --json enforces
	run -0 jq -e '.input_schema.properties.timeout_ms.maximum == 250' <(box-run --describe --max-timeout-ms 250)
	run_box_json '{"script": "return 1", "timeout_ms": 251}' --max-timeout-ms 250
	assert_fail policy_denied 4 '.error.configured == 250'
	nothing_left
}

@test "box-sandbox sessions: the command line binds the agent to its session" {
	[ "$(id -u)" = 0 ] || skip "needs root"
	BOX_PROG=box-sandbox
	run --separate-stderr box-sandbox --json --session mine <<<'{"op": "exec", "argv": ["true"]}'
	sb_ok '.session == "mine"'
	# another session, by name, by from, by the argument: refused before anything
	run --separate-stderr box-sandbox --json --session mine <<<'{"op": "exec", "session": "theirs", "argv": ["true"]}'
	assert_fail policy_denied 4 '.error.path == "$.session"'
	run --separate-stderr box-sandbox exec mine --json <<<'{"session": "theirs", "argv": ["true"]}'
	assert_fail policy_denied 4 '.error.path == "$.session"'
	run --separate-stderr box-sandbox --json --session mine <<<"{\"op\": \"restore\", \"digest\": \"sha256:$(printf '%064d' 0)\", \"from\": \"theirs\"}"
	assert_fail policy_denied 4 '.error.path == "$.from"'
	# no binding at all: the agent may name no session and make none of a new id
	run --separate-stderr box-sandbox --json <<<'{"op": "exec", "session": "mine", "argv": ["true"]}'
	assert_fail policy_denied 4 '.error.path == "$.session"'
	run --separate-stderr box-sandbox --json <<<'{"op": "create"}'
	assert_fail policy_denied 4 '.error.path == "$.session"'
	run --separate-stderr box-sandbox --json <<<'{"op": "delete", "session": "mine"}'
	assert_fail policy_denied 4
	[ "$(find "$BOX_STATE_DIR/sandboxes" -mindepth 1 -maxdepth 1 -type d -printf '%f')" = mine ]
	# list shows an agent only what it may reach
	run --separate-stderr box-sandbox --json <<<'{"op": "list"}'
	sb_ok '.sessions == []'
	run --separate-stderr box-sandbox list
	sb_ok '[.sessions[].session] == ["mine"]'
}

@test "box-sandbox sessions: names, prefix, any and create from the policy" {
	[ "$(id -u)" = 0 ] || skip "needs root"
	BOX_PROG=box-sandbox
	cat >"$T/p.json" <<-'EOF'
	{"box-sandbox": {"sessions": {"names": ["one"], "prefix": "agent-", "create": true}}}
	EOF
	run --separate-stderr box-sandbox --json --policy "$T/p.json" <<<'{"op": "exec", "session": "agent-1", "argv": ["true"]}'
	sb_ok
	run --separate-stderr box-sandbox --json --policy "$T/p.json" <<<'{"op": "exec", "session": "one", "argv": ["true"]}'
	sb_ok
	run --separate-stderr box-sandbox --json --policy "$T/p.json" <<<'{"op": "exec", "session": "agent", "argv": ["true"]}'
	assert_fail policy_denied 4 '.error.path == "$.session"'
	run --separate-stderr box-sandbox --json --policy "$T/p.json" <<<'{"op": "exec", "session": "onex", "argv": ["true"]}'
	assert_fail policy_denied 4
	run -0 box-sandbox create --session other
	run --separate-stderr box-sandbox --json --policy "$T/p.json" <<<'{"op": "list"}'
	sb_ok '[.sessions[].session] | sort == ["agent-1", "one"]'
	# create false: an agent reaches what exists and makes nothing new
	echo '{"box-sandbox": {"sessions": {"prefix": "agent-", "create": false}}}' >"$T/nc.json"
	run --separate-stderr box-sandbox --json --policy "$T/nc.json" <<<'{"op": "exec", "session": "agent-1", "argv": ["true"]}'
	sb_ok
	run --separate-stderr box-sandbox --json --policy "$T/nc.json" <<<'{"op": "exec", "session": "agent-2", "argv": ["true"]}'
	assert_fail policy_denied 4 '.error.path == "$.session"'
	run --separate-stderr box-sandbox --json --policy "$T/nc.json" <<<'{"op": "create", "session": "agent-3"}'
	assert_fail policy_denied 4
	[ ! -e "$BOX_STATE_DIR/sandboxes/agent-2" ] && [ ! -e "$BOX_STATE_DIR/sandboxes/agent-3" ]
	# any: the old behaviour, said explicitly
	echo '{"box-sandbox": {"sessions": {"any": true}}}' >"$T/any.json"
	run --separate-stderr box-sandbox --json --policy "$T/any.json" <<<'{"op": "status", "session": "other"}'
	sb_ok '.session == "other"'
}

@test "a policy grants, denies, raises caps and sets the operator's values" {
	echo hi >"$WS/f"
	cat >"$T/p.json" <<-EOF
	{"policy_version": 1,
	 "box-run": {"grant": ["max_output_bytes"], "deny": ["events"],
	             "max": {"timeout_ms": 120000, "max_output_bytes": 10},
	             "set": {"workspace": "$WS"}}}
	EOF
	run_box_json '{"script": "return fs.read(\"/f\")", "timeout_ms": 120000, "max_output_bytes": 10}' --policy "$T/p.json"
	assert_ok '.result == "hi\n"'
	run_box_json '{"script": "return 1", "max_output_bytes": 11}' --policy "$T/p.json"
	assert_fail policy_denied 4 '.error.path == "$.max_output_bytes" and .error.configured == 10'
	run_box_json '{"script": "return 1", "events": true}' --policy "$T/p.json"
	assert_fail policy_denied 4 '.error.path == "$.events"'
	# the policy's own value is not the agent's to change
	run_box_json "{\"script\": \"return 1\", \"workspace\": \"$OUTSIDE\"}" --policy "$T/p.json"
	assert_fail policy_denied 4 '.error.path == "$.workspace"'
	# --describe follows the same policy, and BOX_POLICY names it as well
	run -0 jq -e '(.input_schema.properties | has("max_output_bytes") and (has("events") | not)
		and (has("workspace") | not)) and .input_schema.properties.timeout_ms.maximum == 120000' \
		<(BOX_POLICY=$T/p.json box-run --describe)
	BOX_POLICY=$T/p.json run_box_json '{"script": "return 1", "events": true}'
	assert_fail policy_denied 4
}

@test "a bad policy is a usage error naming the file and the member, and nothing runs" {
	local bad
	for bad in '{"box_run": {}}' '{"box-run": {"grant": ["nope"]}}' \
		'{"box-run": {"grant": ["max_timeout_ms"]}}' '{"box-run": {"max": {"timeout_ms": 0}}}' \
		'{"box-run": {"max": {"script": 5}}}' '{"box-run": {"set": {"timeout_ms": "x"}}}' \
		'{"box-run": {"frobnicate": 1}}' '{"policy_version": 2}' '[1]' '{"box-run": ' \
		'{"box-run": {"sessions": {}}}' '{"box-sandbox": {"sessions": {"prefix": ""}}}'; do
		printf '%s' "$bad" >"$T/bad.json"
		run_box --policy "$T/bad.json" -e 'print("XYZZY")'
		assert_fail usage 2 ".error.message | test(\"policy .*bad.json\")"
		refute_output --partial XYZZY
	done
	run_box --policy "$T/bad.json" -e 'return 1'
	assert_fail usage 2
	run_box --policy "$T/none.json" -e 'print("XYZZY")'
	assert_fail not_found 6
	BOX_POLICY=$T/none.json run_box -e 'print("XYZZY")'
	assert_fail not_found 6
	refute_output --partial XYZZY
	head -c 2000000 /dev/zero | tr '\0' ' ' >"$T/big.json"
	run_box --policy "$T/big.json" -e 'return 1'
	assert_fail usage 2 '.error.message | test("larger than")'
}

@test "--trust-request lets the operator's own request set everything but the flag-only caps" {
	echo hi >"$WS/f"
	run_box_json "{\"script\": \"return fs.read('/f')\", \"workspace\": \"$WS\"}" --trust-request
	assert_ok '.result == "hi\n"'
	run_box_json '{"script": "return 1", "timeout_ms": 86400000, "memory_bytes": 1073741824}' --trust-request
	assert_ok
}

@test "build-tree binaries find their helpers without BOX_LIBEXEC_DIR, and a missing one is found first" {
	[ -n "${BOX_BUILDDIR:-}" ] || BOX_BUILDDIR=$(dirname "$(command -v box-run)")
	run env -u BOX_LIBEXEC_DIR "$BOX_BUILDDIR/box-run" -a 'GET https://example.com' -e 'return type(http)'
	[ "$status" -eq 0 ]
	jqe '.result == "table"'
	# a lone copy has no helper beside it: not_found before the script runs
	mkdir "$T/bin"
	cp "$BOX_BUILDDIR/box-run" "$BOX_BUILDDIR/box-sandbox" "$T/bin/"
	run --separate-stderr env -u BOX_LIBEXEC_DIR "$T/bin/box-run" -a 'GET https://example.com' -e 'print("XYZZY")'
	assert_fail not_found 6 '.error.message | test("box-http")'
	refute_output --partial XYZZY
	run --separate-stderr env -u BOX_LIBEXEC_DIR "$T/bin/box-sandbox" exec h1 -- true
	BOX_PROG=box-sandbox assert_fail not_found 6 '.error.message | test("box-sbfiles")'
	[ ! -e "$BOX_STATE_DIR/sandboxes/h1" ]
}

@test "build-tree box-sandbox runs exec and box-tool without BOX_LIBEXEC_DIR" {
	[ "$(id -u)" = 0 ] || skip "needs root"
	[ -n "${BOX_BUILDDIR:-}" ] || BOX_BUILDDIR=$(dirname "$(command -v box-run)")
	run -0 env -u BOX_LIBEXEC_DIR "$BOX_BUILDDIR/box-sandbox" create --session bt \
		--tools "$BATS_TEST_DIRNAME/fixtures/tools/tools.json"
	run -0 env -u BOX_LIBEXEC_DIR "$BOX_BUILDDIR/box-sandbox" exec bt -- sh -c 'echo x > /output/o; box-tool list'
	jqe '.exit_code == 0 and (.stdout | test("echo")) and .outputs[0].path == "o"'
}

@test "share/schema: the agent's request schema of each binary is what --describe offers" {
	local b
	for b in box-run box-sandbox box-pack box-pull box-lock; do
		run -0 jq -n --slurpfile a "$BATS_TEST_DIRNAME/../share/schema/$b.agent.json" \
			--slurpfile d <("$b" --describe) \
			'($a[0] | del(.["$id"], .title)) == ($d[0].input_schema | del(.["$id"], .title))'
		assert_output true
	done
}

@test "a second ./configure --prefix rebuilds what holds the install paths, and the binary looks there" {
	[ -n "${BOX_BUILDDIR:-}" ] || skip "needs the build directory (make check sets BOX_BUILDDIR)"
	make -s -C "$BOX_BUILDDIR" distdir distdir="$T/src" >/dev/null
	cd "$T/src"
	./configure -q --prefix="$T/p1" >/dev/null
	make -s -j2 box-run box-http >/dev/null 2>&1
	grep -qF "\"$T/p1/libexec/box\"" box-paths.h
	./configure -q --prefix="$T/p2" >/dev/null
	run -0 make -j2 box-run box-http
	# the header changed, so what includes it was compiled again and box-run relinked
	assert_output --partial 'lib/core/libexec.'
	grep -qF "\"$T/p2/libexec/box\"" box-paths.h
	mkdir -p "$T/p2/bin" "$T/p2/libexec/box"
	cp box-run "$T/p2/bin/" && cp box-http "$T/p2/libexec/box/"
	cd "$T" && rm -rf "$T/src"
	run env -u BOX_LIBEXEC_DIR "$T/p2/bin/box-run" -a 'GET https://example.com' -e 'return type(http)'
	[ "$status" -eq 0 ]
	jqe '.result == "table"'
}

@test "review findings: from, list, duplicate policy members, SCRIPT, fixed members, FIFOs" {
	# a policy member given twice is refused wherever it is (readers disagree on which counts)
	echo '{"box-run": {"grant": ["workspace"]}, "box-run": {"deny": ["workspace"]}}' >"$T/dup.json"
	run_box_json '{"script": "return 1", "workspace": "/"}' --policy "$T/dup.json"
	assert_fail usage 2 '.error.message | test("box-run is given twice")'
	echo '{"box-run": {"max": {"timeout_ms": 1000, "timeout_ms": 60000}}}' >"$T/dup2.json"
	run_box --policy "$T/dup2.json" -e 'return 1'
	assert_fail usage 2 '.error.message | test("timeout_ms is given twice")'
	# a FIFO is not a policy (it would block)
	mkfifo "$T/fifo"
	run timeout 5 box-run --policy "$T/fifo" -e 'return 1'
	[ "$status" -eq 2 ]
	# the operator's SCRIPT is not replaced by the agent's script, nor made an argument
	echo 'return "operator"' >"$T/vetted.lua"
	run_box_json '{"script": "return \"agent\""}' "$T/vetted.lua" a1
	assert_fail policy_denied 4 '.error.path == "$.script"'
	run_box_json '{"args": ["x"]}' "$T/vetted.lua"
	assert_ok '.result == "operator"'
	# a cap the policy's set gives is a cap, as the flag is
	echo '{"box-run": {"set": {"max_timeout_ms": 5000}}}' >"$T/cap.json"
	run_box_json '{"script": "return 1", "timeout_ms": 5001}' --policy "$T/cap.json"
	assert_fail policy_denied 4 '.error.configured == 5000'
	run -0 jq -e '.input_schema.properties.timeout_ms.maximum == 5000' <(box-run --describe --policy "$T/cap.json")
	# a member the policy sets is the operator's
	echo "{\"box-run\": {\"set\": {\"memory_bytes\": 1048576}}}" >"$T/set.json"
	run_box_json '{"script": "return 1", "memory_bytes": 65536}' --policy "$T/set.json"
	assert_fail policy_denied 4 '.error.path == "$.memory_bytes"'
	run -0 jq -e '.input_schema.properties | has("memory_bytes") | not' <(box-run --describe --policy "$T/set.json")
}

@test "review findings: a bound agent reaches no other session by from or list, and a refused create leaves nothing" {
	[ "$(id -u)" = 0 ] || skip "needs root"
	BOX_PROG=box-sandbox
	echo '{"box-sandbox": {"sessions": {"prefix": "v-"}}}' >"$T/pre.json"
	run -0 box-sandbox write v-victim secret --content 'VICTIM SECRET'
	run -0 box-sandbox snapshot v-victim
	d=$(jq -r .digest <<<"$output")
	run -0 box-sandbox create --session v-agent
	run --separate-stderr box-sandbox --json --session v-agent --policy "$T/pre.json" \
		<<<"{\"op\": \"restore\", \"from\": \"v-victim\", \"digest\": \"$d\"}"
	assert_fail policy_denied 4 '.error.path == "$.from"'
	run --separate-stderr box-sandbox --json --session v-agent --policy "$T/pre.json" <<<'{"op": "read", "path": "secret"}'
	[ "$status" -ne 0 ]
	refute_output --partial VICTIM
	run --separate-stderr box-sandbox --json --session v-agent --policy "$T/pre.json" <<<'{"op": "list"}'
	sb_ok '[.sessions[].session] == ["v-agent"]'
	# create false: refused before any file is made, lock files included
	echo '{"box-sandbox": {"sessions": {"prefix": "v-", "any": true, "create": false}}}' >"$T/nc.json"
	for req in '{"op": "create", "session": "v-new"}' '{"op": "create"}' \
		'{"op": "exec", "session": "v-new2", "argv": ["true"]}'; do
		run --separate-stderr box-sandbox --json --policy "$T/nc.json" <<<"$req"
		assert_fail policy_denied 4
	done
	[ "$(ls "$BOX_STATE_DIR/sandboxes" | sort | tr '\n' ' ')" = "v-agent v-agent.lock v-agent.run.lock v-victim v-victim.lock v-victim.run.lock " ]
}
