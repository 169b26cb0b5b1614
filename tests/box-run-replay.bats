#!/usr/bin/env bats
# box-run provenance, seeded math.random, --record, --replay and --trace (issue 17): a run
# that reads files, calls an http server on loopback and a tool is recorded, then replayed
# with the workspace deleted, the server stopped and the tool removed, and gives the same
# result; a changed script diverges with the call named; hostile cassettes are refused.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	box_setup
	HTTPD_DIR=$T/httpd
	mkdir -p "$HTTPD_DIR" "$T/tools"
	printf 'hello\n' >"$WS/a.txt"
	printf '{"k": 1}\n' >"$WS/b.json"
	cp "$BATS_TEST_DIRNAME/fixtures/tools/echo.sh" "$T/tools/"
	cat >"$T/tools/tools.json" <<-'JSON'
	{"tools": [{"name": "echo", "description": "Answers its input",
	            "input_schema": {"type": "object"}, "command": ["./echo.sh"]}]}
	JSON
}

teardown() {
	[ -s "$HTTPD_DIR/pid" ] && kill "$(cat "$HTTPD_DIR/pid")" 2>/dev/null || true
}

stop_httpd() {
	kill "$(cat "$HTTPD_DIR/pid")"
	wait "$(cat "$HTTPD_DIR/pid")" 2>/dev/null || true
	: >"$HTTPD_DIR/pid"
}

# the script of the recorded run: files, http, a tool, the clock and math.random
script() {
	cat <<-LUA
	local a = fs.read("/a.txt")
	local names = {}
	for _, e in ipairs(fs.list("/")) do names[#names + 1] = e.name end
	local h = http.get("http://127.0.0.1:$PORT/hello")
	local t = tools.echo({n = 3})
	local ok, err = pcall(fs.read, "/missing")
	print(a, table.concat(names, ","), h.status, math.random(1000000))
	return {a = a, body = h.body, tool = t, missing = tostring(err), now = os.time(),
	        year = os.date("%Y"), cpu = os.clock(), r = math.random(1000000)}
	LUA
}

record_run() {
	httpd_start "$HTTPD_DIR"
	script >"$T/s.lua"
	run_box -w "$WS" --allow "127.0.0.1:$PORT" --allow-private-network \
		--tools "$T/tools/tools.json" --record "$T/cas.jsonl" "$T/s.lua"
	assert_success
	printf '%s\n' "$output" >"$T/rec.json"
}

@test "a recorded run replays with no workspace, no server and no tool, byte for byte" {
	record_run
	jq -e '.result.a == "hello\n" and .result.tool.got.n == 3 and .stats.host_calls >= 6' \
		"$T/rec.json"
	rm -rf "$WS" "$T/tools"
	stop_httpd
	run_box --replay "$T/cas.jsonl" "$T/s.lua"
	assert_success
	# stats aside, the replay's result is the recording's, byte for byte
	cmp <(jq -c 'del(.stats)' "$T/rec.json") <(jq -c 'del(.stats)' <<<"$output")
	jq -e '.provenance.tools == [{"name": "echo"}] and (.provenance.seed | type) == "number"' \
		<<<"$output"
	# without a script, the recorded one runs
	run_box --replay "$T/cas.jsonl"
	assert_success
	cmp <(jq -c 'del(.stats)' "$T/rec.json") <(jq -c 'del(.stats)' <<<"$output")
	[ ! -e "$WS" ]
}

@test "a changed script diverges with replay_diverged naming the call and the difference" {
	record_run
	stop_httpd
	sed 's|/a.txt|/b.json|' "$T/s.lua" >"$T/s2.lua"
	run_box --replay "$T/cas.jsonl" "$T/s2.lua"
	assert_failure 9
	jq -e '.ok == false and .error.code == "replay_diverged"' <<<"$output"
	jq -e '.error.message | test("call 1: .*fs.read.*/b.json.*recording has .*/a.txt")' \
		<<<"$output"
	assert_equal "${stderr%%:*}" "box-run"
	# another URL
	sed "s|/hello|/echo|" "$T/s.lua" >"$T/s3.lua"
	run_box --replay "$T/cas.jsonl" "$T/s3.lua"
	assert_failure 9
	jq -e '.error.message | test("call 3: .*http.*/echo")' <<<"$output"
	# other tool arguments
	sed "s|n = 3|n = 4|" "$T/s.lua" >"$T/s4.lua"
	run_box --replay "$T/cas.jsonl" "$T/s4.lua"
	assert_failure 9
	jq -e '.error.message | test("call 4: .*tool.*echo")' <<<"$output"
	# fewer calls than recorded
	run_box --replay "$T/cas.jsonl" -e 'return 1'
	assert_failure 9
	jq -e '.error.message | test("ended after 0 calls")' <<<"$output"
	# more calls than recorded
	printf 'fs.exists("/x")\n' >>"$T/s.lua"
	run_box --replay "$T/cas.jsonl" -e "$(cat "$T/s.lua")"
	assert_failure 9
}

@test "a cassette is written atomically, and not at all when the run cannot start" {
	run_box -w "$T/nope" --record "$T/c.jsonl" -e 'return 1'
	assert_failure
	[ ! -e "$T/c.jsonl" ]
	run_box --record "$T/c.jsonl" -e 'return 1'
	assert_success
	run jq -s -e 'length == 2 and .[0].cassette == 1 and .[1].end == true and .[1].calls == 0' \
		"$T/c.jsonl"
	assert_success
	[ -z "$(find "$T" -maxdepth 1 -name '.*c.jsonl*' -o -maxdepth 1 -name 'c.jsonl.*')" ]
	run_box --record "$T/no/such/dir/c.jsonl" -e 'return 1'
	assert_failure 6
	jq -e '.error.code == "not_found" and .error.path == "$.record"' <<<"$output"
	run_box --record "$T/c.jsonl" --replay "$T/c.jsonl" -e 'return 1'
	assert_failure 2
	# record and replay are the operator's: a request cannot name them
	run_box_json '{"script": "return 1", "record": "'"$T"'/r"}' --trust-request
	assert_failure 4
	jq -e '.error.code == "policy_denied" and .error.path == "$.record"' <<<"$output"
	[ ! -e "$T/r" ]
}

@test "hostile cassettes are refused cleanly" {
	run_box --record "$T/c.jsonl" -w "$WS" -e 'return fs.read("/a.txt")'
	assert_success
	good=$T/c.jsonl
	# truncated: the end line is gone, or the last line is cut
	head -n 2 "$good" >"$T/t1"
	head -c -5 "$good" >"$T/t2"
	# wrong types
	sed '1s/"seed":[0-9]*/"seed":"x"/' "$good" >"$T/w1"
	sed '2s/"args":\[[^]]*\]/"args":7/' "$good" >"$T/w2"
	sed '2s/"reply":"ok"/"reply":true/' "$good" >"$T/w3"
	sed '2s/"call":"fs.read"/"call":"os.execute"/' "$good" >"$T/w4"
	sed '1s/"cassette":1/"cassette":2/' "$good" >"$T/w5"
	sed '1s/"request":{/"request":{"timeout_ms":"soon",/' "$good" >"$T/w6"
	sed '1s/"request":{/"request":{"record":"\/tmp\/x",/' "$good" >"$T/w7"
	sed '2s/"answer":\["[^"]*"\]/"answer":["!!"]/' "$good" >"$T/w8"
	printf 'not json\n' >"$T/w9"
	: >"$T/w10"
	for f in t1 t2 w1 w2 w3 w4 w5 w6 w7 w9 w10; do
		run_box --replay "$T/$f"
		[ "$status" -eq 2 ] || { echo "$f: status $status: $output"; false; }
		jq -e '.error.code == "invalid_request"' <<<"$output"
	done
	# an answer that is not base64 is found when it is used
	run_box --replay "$T/w8"
	assert_failure 2
	jq -e '.error.code == "invalid_request" and (.error.message | test("base64"))' <<<"$output"
	# huge: past the cap, refused before it is parsed
	truncate -s 300M "$T/huge"
	run_box --replay "$T/huge"
	assert_failure 3
	jq -e '.error.code == "limit_exceeded" and .error.limit == "cassette_bytes"' <<<"$output"
	run_box --replay "$T/none"
	assert_failure 6
}

@test "math.random gives the same sequence under the same seed, and the seed is reported" {
	s='local t = {} for i = 1, 20 do t[i] = math.random(1 << 40) end return t'
	run_box --seed 42 -e "$s"
	assert_success
	a=$output
	run_box_json '{"script": "'"$s"'", "seed": 42}'
	assert_success
	cmp <(jq -c .result <<<"$a") <(jq -c .result <<<"$output")
	jq -e '.provenance.seed == 42' <<<"$output"
	run_box --seed 43 -e "$s"
	! cmp -s <(jq -c .result <<<"$a") <(jq -c .result <<<"$output")
	# without a seed: one from getrandom, reported, and giving the same sequence again
	run_box -e "$s"
	seed=$(jq .provenance.seed <<<"$output")
	b=$output
	run_box -e "$s"
	[ "$(jq .provenance.seed <<<"$output")" != "$seed" ]
	run_box --seed "$seed" -e "$s"
	cmp <(jq -c .result <<<"$b") <(jq -c .result <<<"$output")
	run_box --seed -1 -e "$s"
	assert_failure 2
}

@test "every result carries provenance; digests on request, of the canonical request" {
	run_box -e 'return 1'
	assert_success
	jq -e '.provenance | .box_version == "0.1.0" and (.kernel | length > 0) and
		(has("request_sha256") | not)' <<<"$output"
	[ "$(jq -r .provenance.kernel <<<"$output")" = "$(uname -r)" ]
	run_box --digests -e 'return 1'
	assert_success
	s=$(printf 'return 1' | sha256sum | cut -d' ' -f1)
	jq -e --arg s "sha256:$s" '.provenance.script_sha256 == $s' <<<"$output"
	# the canonical request: sorted keys, no whitespace, exact integers
	c='{"args":[9007199254740993,{"a":1,"b":[2]}],"digests":true,"script":"return 1"}'
	run_box_json '{"script": "return 1", "args": [9007199254740993, {"b": [2], "a": 1}],
		"digests": true}' --trust-request
	r=$(printf '%s' "$c" | sha256sum | cut -d' ' -f1)
	jq -e --arg r "sha256:$r" '.provenance.request_sha256 == $r' <<<"$output" ||
		{ echo "$output"; false; }
	# the policy's digest changes with the operator's policy
	run_box --digests -e 'return 1'
	p1=$(jq -r .provenance.policy_sha256 <<<"$output")
	printf '{"box-run": {"grant": ["workspace"]}}\n' >"$T/pol.json"
	run_box --policy "$T/pol.json" --digests -e 'return 1'
	p2=$(jq -r .provenance.policy_sha256 <<<"$output")
	[ -n "$p1" ] && [ "$p1" != "$p2" ] && [ "$p2" != null ]
	# the fast path does not load libcrypto at start-up
	! ldd "$(command -v box-run)" | grep -q libcrypto
}

@test "--trace writes each host call as it happens, with timing" {
	run_box -w "$WS" --trace "$T/tr.jsonl" -e 'fs.read("/a.txt") pcall(fs.read, "/no") return 1'
	assert_success
	run jq -s -e 'length == 2 and .[0].call == "fs.read" and .[0].path == "/a.txt" and
		.[0].ok == true and .[1].ok == false and .[0].n == 1 and .[1].n == 2 and
		(.[0].duration_us | type) == "number" and .[1].start_us >= .[0].start_us' \
		"$T/tr.jsonl"
	assert_success
}

@test "a replay answers its calls in the VM: same results, counts and call numbers as through the broker" {
	local loop n=3000
	printf 'x\n' >"$WS/f"
	loop="local s = 0
	for i = 1, $n do
		if fs.exists(i == 2000 and (CHANGED or '/f') or '/f') then s = s + 1 end
		if i % 1000 == 0 then fs.read('/f'); os.time() end
	end
	return s"
	run_box -w "$WS" --record "$T/loop.jsonl" -e "CHANGED = nil $loop"
	assert_success
	printf '%s\n' "$output" >"$T/live.json"
	jq -e --argjson n "$n" '.result == $n and .stats.host_calls == $n + 6' "$T/live.json"
	rm -rf "$WS"
	# the same result, and every call counted (they were answered without the broker)
	run_box --replay "$T/loop.jsonl" -e "CHANGED = nil $loop"
	assert_success
	cmp <(jq -c 'del(.stats)' "$T/live.json") <(jq -c 'del(.stats)' <<<"$output")
	jq -e --argjson n "$n" '.stats.host_calls == $n + 6' <<<"$output"
	# without a round trip each: the VM sends two frames in all (the count and its result)
	if strace -f -o /dev/null true 2>/dev/null; then
		strace -f -c -e trace=sendmsg -o "$T/sc" "$(command -v box-run)" --replay "$T/loop.jsonl" \
			-e "CHANGED = nil $loop" >/dev/null
		[ "$(awk '$NF == "sendmsg" { print $4 }' "$T/sc")" -lt 10 ]
	fi
	# traced, the broker answers each call: the same result, one line a call
	run_box --replay "$T/loop.jsonl" --trace "$T/trace.jsonl" -e "CHANGED = nil $loop"
	assert_success
	cmp <(jq -c 'del(.stats)' "$T/live.json") <(jq -c 'del(.stats)' <<<"$output")
	assert_equal "$(wc -l <"$T/trace.jsonl")" "$((n + 6))"
	# a call that differs late names its number as the broker counts it (1999 exists, the
	# read and clock of i = 1000, then this one), traced or not
	run_box --replay "$T/loop.jsonl" -e "CHANGED = '/g' $loop"
	assert_failure 9
	jq -e '.error.code == "replay_diverged" and (.error.message | test("^call 2002: .*fs.exists.*/g.*recording has .*/f"))' <<<"$output"
	run_box --replay "$T/loop.jsonl" --trace "$T/trace2.jsonl" -e "CHANGED = '/g' $loop"
	assert_failure 9
	jq -e '.error.message | test("^call 2002: ")' <<<"$output"
	# fewer calls: the count includes those answered in the VM
	run_box --replay "$T/loop.jsonl" -e "for i = 1, 1500 do fs.exists('/f') end"
	assert_failure 9
	jq -e '.error.message | test("call 1001: .*fs.exists.*recording has .*fs.read")' <<<"$output"
	run_box --replay "$T/loop.jsonl" -e "for i = 1, 999 do fs.exists('/f') end"
	assert_failure 9
	jq -e '.error.message | test("ended after 999 calls, the recording has 3006")' <<<"$output"
}
