#!/usr/bin/env bats
# box-run: the command line, the request, every limit and its exact error, the locked-down Lua
# environment, the DoS and escape classes of issue 2, the JSON result and the workspace.
#
# Each test checks the exit status, the JSON on stdout (jq -e) and stderr separately. Deadlines
# in these tests are short (200-1000 ms); the elapsed-time bounds are loose, for a loaded
# machine, but far below what an unbounded run would take.

load helpers
bats_require_minimum_version 1.5.0

setup() {
	box_setup
}

teardown() {
	if [ -n "${HTTPD_PID:-}" ]; then
		kill "$HTTPD_PID" 2>/dev/null || true
		wait "$HTTPD_PID" 2>/dev/null || true
	fi
}

# start_httpd: the test server of tests/fixtures/httpd.py on 127.0.0.1; sets PORT and BASE.
start_httpd() {
	python3 "$BATS_TEST_DIRNAME/fixtures/httpd.py" "$T/port" </dev/null >/dev/null 2>&1 3>&- &
	HTTPD_PID=$!
	local i
	for i in $(seq 200); do
		[ -s "$T/port" ] && break
		sleep 0.02
	done
	PORT=$(cat "$T/port")
	BASE="http://127.0.0.1:$PORT"
}

# ======================================================================= the command line

@test "cli: --help prints the usage on stdout and exits 0" {
	run --separate-stderr box-run --help
	assert_equal "$status" 0
	assert_equal "$stderr" ""
	assert_line --index 0 --regexp '^usage: box-run '
	assert_output --partial -- '--json'
	assert_output --partial -- '--timeout-ms'
	assert_output --partial -- '--max-instructions'
	assert_output --partial -- '--describe'
}

@test "cli: --version prints 'box-run (box) 0.1.0'" {
	run --separate-stderr box-run --version
	assert_equal "$status" 0
	assert_equal "$stderr" ""
	assert_output 'box-run (box) 0.1.0'
}

@test "cli: --describe is one JSON tool definition with the request and result schemas" {
	# under the built-in policy the agent sees only what it may set (trust.bats has the rest)
	run --separate-stderr box-run --describe
	[ "$status" -eq 0 ]
	one_json_where '.name == "box-run" and
		(.description | type == "string" and length > 0) and
		.input_schema.type == "object" and .input_schema.additionalProperties == false and
		.input_schema.required == ["script"] and
		(.input_schema.properties | keys) == ["args", "cpu_ms", "digests", "events",
			"memory_bytes", "script", "seed", "timeout_ms"] and
		.output_schema.type == "object" and
		(.output_schema.properties | has("ok") and has("stdout") and has("result") and
			has("truncated") and has("total_lines") and has("lossy") and has("stats") and
			has("error") and has("provenance"))'
	# an operator who trusts the request offers every member but the flag-only caps
	run --separate-stderr box-run --trust-request --describe
	[ "$status" -eq 0 ]
	one_json_where '(.input_schema.properties | has("script") and has("args") and
			has("timeout_ms") and has("cpu_ms") and has("memory_bytes") and
			has("max_instructions") and has("max_output_bytes") and has("max_write_bytes") and
			has("max_result_bytes") and has("workspace") and has("events") and has("tools") and
			(has("max_timeout_ms") | not) and (has("record") | not) and (has("replay") | not) and
			(has("trace") | not))'
}

@test "cli: an unknown flag is a usage error (exit 2), JSON on stdout, one line on stderr" {
	run_box --no-such-flag -e 'return 1'
	assert_fail usage 2 '.error.message | test("no-such-flag")'
	refute_output --partial 'usage: box-run'
}

@test "cli: an unknown short flag is a usage error" {
	run_box -Z -e 'return 1'
	assert_fail usage 2
}

@test "cli: a flag value that is not an integer is a usage error naming the field" {
	run_box --timeout-ms 12abc -e 'return 1'
	assert_fail usage 2 '.error.path == "$.timeout_ms"'
}

@test "cli: a flag value out of range is a usage error naming the field" {
	run_box --memory-bytes 1 -e 'return 1'
	assert_fail usage 2 '.error.path == "$.memory_bytes"'
}

@test "cli: a missing script file is not_found (exit 6)" {
	run_box "$T/no-such-script.lua"
	assert_fail not_found 6 '.error.message | test("no-such-script.lua")'
}

@test "cli: no script at all is invalid_request on \$.script" {
	run --separate-stderr box-run </dev/null
	assert_fail invalid_request 2 '.error.path == "$.script"'
}

@test "cli: a SCRIPT file with ARG... sees them as ... and arg" {
	printf 'return {n = select("#", ...), a = {...}, arg1 = arg[1], arg3 = arg[3]}\n' >"$T/s.lua"
	run_box "$T/s.lua" one two 'three four'
	assert_ok '.result == {"n": 3, "a": ["one", "two", "three four"], "arg1": "one", "arg3": "three four"}'
}

@test "cli: '-' reads the script from stdin" {
	run --separate-stderr box-run - <<<'return 6 * 7'
	assert_ok '.result == 42'
}

@test "cli: -e CODE with ARG... after it" {
	run_box -e 'return {...}' a b 'c d'
	assert_ok '.result == ["a", "b", "c d"]'
}

@test "cli: --args takes a JSON array" {
	run_box --args '[1, "x", {"k": true}]' -e 'return {...}'
	assert_ok '.result == [1, "x", {"k": true}]'
}

# ======================================================================= the --json request

@test "request: --json runs the request read from stdin" {
	run_box_json '{"script": "print(\"hi\") return {...}", "args": ["a", 2]}'
	assert_ok '.stdout == "hi\n" and .result == ["a", 2]'
}

@test "request: args via --json keep their types and exact integers" {
	run_box_json '{"script": "local a, b, c, d, e = ... return {a, b, c, d == json.null, e, math.type(e)}", "args": [1, "two", {"three": 3}, null, 9007199254740993]}'
	assert_ok '.result[0] == 1 and .result[1] == "two" and .result[2] == {"three": 3} and .result[3] == true and .result[5] == "integer"'
	# jq reads numbers as doubles: check the exact integer in the text itself
	assert_output --partial ',9007199254740993,"integer"]'
}

@test "request: a flag given with --json overrides the request member" {
	# the operator's own request (--trust-request): the flag replaces the member
	run_box_json '{"script": "while true do end", "timeout_ms": 60000, "cpu_ms": 60000}' \
		--timeout-ms 200 --trust-request
	assert_limit timeout wall 200 ms
	# an agent's request may not set what the command line fixed, and is not offered it
	run_box_json '{"script": "while true do end", "timeout_ms": 60000}' --timeout-ms 200
	assert_fail policy_denied 4 '.error.path == "$.timeout_ms"'
	run -0 jq -e '.input_schema.properties | has("timeout_ms") | not' <(box-run --describe --timeout-ms 200)
}

@test "request: malformed JSON is invalid_request on \$ (exit 2)" {
	run_box_json '{"script": "return 1",'
	assert_fail invalid_request 2 '.error.path == "$"'
}

@test "request: empty stdin is invalid_request on \$" {
	run --separate-stderr box-run --json </dev/null
	assert_fail invalid_request 2 '.error.path == "$"'
}

@test "request: a JSON value that is not an object is invalid_request on \$" {
	run_box_json '["return 1"]'
	assert_fail invalid_request 2 '.error.path == "$"'
}

@test "request: wrong member types are invalid_request with the member's path" {
	local req path
	while IFS='|' read -r req path; do
		echo "request: $req" >&2
		run_box_json "$req"
		assert_fail invalid_request 2 ".error.path == \"$path\""
	done <<'EOF'
{"script": 1}|$.script
{"script": "return 1", "timeout_ms": "5"}|$.timeout_ms
{"script": "return 1", "timeout_ms": 1.5}|$.timeout_ms
{"script": "return 1", "timeout_ms": 0}|$.timeout_ms
{"script": "return 1", "memory_bytes": -1}|$.memory_bytes
{"script": "return 1", "args": {"a": 1}}|$.args
{"script": "return 1", "events": "yes"}|$.events
{"script": "return 1", "allow": "https://example.com"}|$.allow
{"script": "return 1", "workspace": ["/tmp"]}|$.workspace
EOF
}

@test "request: an unknown member is invalid_request naming it (\$.field)" {
	run_box_json '{"script": "return 1", "tiemout_ms": 100}'
	assert_fail invalid_request 2 '(.error.path == "$.tiemout_ms") and
		(.error.message | test("tiemout_ms"))'
}

@test "request: stdin over 16 MiB is refused as invalid_request, without running anything" {
	# a valid request padded with spaces: only its size is wrong
	{
		printf '{"script": "return 1"}'
		head -c $((16 * 1024 * 1024 + 16)) /dev/zero | tr '\0' ' '
	} >"$T/big.json"
	run --separate-stderr box-run --json <"$T/big.json"
	assert_fail invalid_request 2 '.error.path == "$" and .error.configured == 16777216 and .error.unit == "bytes"'
	refute_output --partial '"result"'
}

@test "request: tools names a tool manifest: the script gets a tools table (box-run-tools.bats)" {
	run_box_json "{\"script\": \"return type(tools)\",
		\"tools\": \"$BATS_TEST_DIRNAME/fixtures/tools/codemode.json\"}" --trust-request
	assert_ok '.result == "table"'
}

@test "request: --tools FILE that does not exist is not_found (exit 6, \$.tools)" {
	run_box --tools "$T/tools.json" -e 'return 1'
	assert_fail not_found 6 '.error.path == "$.tools"'
}

@test "request: a workspace that does not exist is not_found (exit 6)" {
	run_box -w "$T/no-such-dir" -e 'return 1'
	assert_fail not_found 6
}

# ======================================================================= limits, exact errors

@test "limit: memory_bytes ends the script with limit_exceeded/memory" {
	run_box -m 1000000 -e 'local t = {} for i = 1, 1e8 do t[i] = ("x"):rep(64) .. i end return #t'
	assert_limit limit_exceeded memory 1000000 bytes '(.error.retryable == false) and
		(.stats.memory_peak_bytes > 0 and .stats.memory_peak_bytes <= 1000000)'
}

@test "limit: the default memory limit is 32 MiB" {
	run_box -e 'local s = ("x"):rep(1024 * 1024) local t = {} for i = 1, 64 do t[i] = s .. i end return #t'
	assert_limit limit_exceeded memory 33554432 bytes
}

@test "limit: memory doubling (string) hits the memory limit, output kept" {
	run_box -t 5000 -e 'print("before") local s = "x" while true do s = s .. s end'
	assert_limit limit_exceeded memory 33554432 bytes '.stdout == "before\n"'
}

@test "limit: memory doubling (table) hits the memory limit" {
	run_box -t 5000 -e 'local t, n = {}, 1 while true do for i = n, 2 * n do t[i] = i end n = 2 * n end'
	assert_limit limit_exceeded memory 33554432 bytes
}

@test "limit: one allocation over the limit inside pcall is still the memory limit" {
	run_box -m 1000000 -e 'local ok = pcall(string.rep, "x", 4000000) return "escaped"'
	assert_limit limit_exceeded memory 1000000 bytes
	refute_output --partial 'escaped'
}

@test "limit: cpu_ms ends a busy loop with limit_exceeded/cpu" {
	local t0
	t0=$(now_ms)
	run_box --cpu-ms 200 -t 5000 -e 'while true do end'
	assert_limit limit_exceeded cpu 200 ms '.stats.cpu_ms >= 150'
	[ $(($(now_ms) - t0)) -lt 2000 ]
}

@test "limit: timeout_ms ends the run with timeout/wall, output printed before is kept" {
	local t0
	t0=$(now_ms)
	run_box -t 300 --cpu-ms 10000 -e 'print("before") while true do end'
	assert_limit timeout wall 300 ms '(.stdout == "before\n" and .total_lines == 1) and
		(.stats.wall_ms >= 300 and .stats.wall_ms < 1500)'
	[ $(($(now_ms) - t0)) -lt 2000 ]
}

@test "limit: timeout_ms is capped by --max-timeout-ms" {
	# the operator's own flag is clamped to the operator's cap
	run_box -t 100000 --cpu-ms 100000 --max-timeout-ms 250 -e 'while true do end'
	assert_limit timeout wall 250 ms
	# the agent's request may go up to the cap, and one past it is refused before it runs
	run_box_json '{"script": "while true do end", "timeout_ms": 250}' --max-timeout-ms 250
	assert_limit timeout wall 250 ms
	run_box_json '{"script": "while true do end", "timeout_ms": 251}' --max-timeout-ms 250
	assert_fail policy_denied 4 '.error.path == "$.timeout_ms" and .error.configured == 250 and
		.error.unit == "ms" and (has("stats") | not)'
}

@test "limit: a request cannot set max_timeout_ms (it could only raise the cap)" {
	run_box_json '{"script": "return 1", "max_timeout_ms": 100000}'
	assert_fail policy_denied 4 '.error.path == "$.max_timeout_ms"'
	run_box_json '{"script": "return 1", "max_timeout_ms": 100000}' --trust-request
	assert_fail policy_denied 4 '.error.path == "$.max_timeout_ms"'
}

@test "limit: cpu_ms defaults to the timeout, and a busy loop under it is always the timeout" {
	local i
	# the VM's CPU timer and box-run's deadline race to notice a busy loop: whichever wins,
	# a CPU limit no tighter than the timeout reports the timeout the caller set
	for i in $(seq 12); do
		run_box -t 200 -e 'while true do end'
		assert_limit timeout wall 200 ms
		run_box -t 200 --cpu-ms 200 -e 'while true do end'
		assert_limit timeout wall 200 ms
		run_box_json '{"script": "while true do end", "timeout_ms": 200}'
		assert_limit timeout wall 200 ms
	done
	# a tighter CPU limit is still its own
	run_box -t 5000 --cpu-ms 150 -e 'while true do end'
	assert_limit limit_exceeded cpu 150 ms
}

@test "limit: max_instructions ends the script with limit_exceeded/instructions" {
	run_box --max-instructions 100000 -e 'while true do end'
	assert_limit limit_exceeded instructions 100000 instructions '.stats.instructions == 100000'
}

@test "limit: instructions are counted only when max_instructions is asked for" {
	run_box -e 'local x = 0 for i = 1, 1000 do x = x + i end return x'
	assert_ok '.result == 500500 and (.stats | has("instructions") | not)'
	run_box --max-instructions 1000000 -e 'local x = 0 for i = 1, 1000 do x = x + i end return x'
	assert_ok '.result == 500500 and (.stats.instructions | type == "number")'
}

@test "limit: max_output_bytes keeps the first bytes, sets truncated and counts every line" {
	run_box --max-output-bytes 10 -e 'for i = 1, 5 do print("line" .. i) end return "done"'
	assert_ok '(.stdout == "line1\nline" and .truncated == true and .total_lines == 5) and
		(.stats.output_bytes == 30 and .result == "done")'
}

@test "limit: output under max_output_bytes is not truncated" {
	run_box -e 'print("a", 1, true, nil) print() return nil'
	assert_ok '(.stdout == "a\t1\ttrue\tnil\n\n" and .truncated == false and .total_lines == 2) and
		(has("result") | not)'
}

@test "limit: output is cut on a UTF-8 character boundary" {
	run_box --max-output-bytes 5 -e 'print("abcd\u{e9}")'
	assert_ok '.stdout == "abcd" and .truncated == true and .lossy == false'
}

@test "limit: max_write_bytes ends the script with limit_exceeded/write_bytes and its path" {
	run_box -w "$WS" --max-write-bytes 10 -e 'fs.write("a.txt", ("x"):rep(100)) return "escaped"'
	assert_limit limit_exceeded write_bytes 10 bytes '.error.path == "/a.txt"'
	refute_output --partial 'escaped'
	[ ! -e "$WS/a.txt" ]
}

@test "limit: the write quota counts every write and cannot be caught by pcall" {
	run_box -w "$WS" --max-write-bytes 10 -e '
		fs.write("a", "123456") fs.append("a", "78")
		local ok = pcall(fs.append, "a", "901")
		return "escaped"'
	assert_limit limit_exceeded write_bytes 10 bytes
	refute_output --partial 'escaped'
	assert_equal "$(cat "$WS/a")" 12345678
}

# Appending 15 MB in 4000-byte pieces wrote 1080 MiB on the host when every append rewrote
# the file; the bytes written (wchar of the processes, summed into the shell that waited for
# them) now stay near the bytes appended.
@test "fs.append writes only the appended bytes on the host: 15 MB in 3840 pieces" {
	sh -c 'box-run -w "$WS" -e "local p = (\"x\"):rep(3999) .. \"\\n\"
		for i = 1, 3840 do fs.append(\"log\", p) end
		return fs.stat(\"log\").size" >"$T/out"; cat /proc/$$/io' >"$T/io"
	run --separate-stderr cat "$T/out"
	assert_ok '.result == 15360000'
	[ "$(stat -c %s "$WS/log")" = 15360000 ]
	local wchar
	wchar=$(sed -n 's/^wchar: //p' "$T/io")
	echo "wchar $wchar"
	[ "$wchar" -ge 15360000 ]
	[ "$wchar" -lt 20000000 ]
	[ "$(tr -d x <"$WS/log" | wc -c)" = 3840 ]
}

@test "fs.append: the quota still holds for appends in place" {
	run_box -w "$WS" --max-write-bytes 1000 -e '
		for i = 1, 99 do fs.append("log", "0123456789") end
		local ok, e = pcall(fs.append, "log", "01234567890")
		return "escaped"'
	assert_limit limit_exceeded write_bytes 1000 bytes '.error.path == "/log"'
	refute_output --partial 'escaped'
	[ "$(stat -c %s "$WS/log")" = 990 ]
}

@test "limit: max_result_bytes refuses a return value too large as JSON" {
	run_box --max-result-bytes 10 -e 'return ("x"):rep(100)'
	assert_limit limit_exceeded result_bytes 10 bytes
	refute_output --partial 'xxxxxxxxxx'
}

@test "limit: max_result_bytes counts nested values" {
	run_box --max-result-bytes 1000 -e 'local t = {} for i = 1, 500 do t[i] = {i} end return t'
	assert_limit limit_exceeded result_bytes 1000 bytes
}

# ======================================================================= limits cannot be caught

@test "uncatchable: pcall in a loop does not swallow the instruction limit" {
	run_box --max-instructions 100000 -e '
		for i = 1, 100 do pcall(function() while true do end end) end
		return "escaped"'
	assert_limit limit_exceeded instructions 100000 instructions
	refute_output --partial 'escaped'
}

@test "uncatchable: an xpcall handler returning its own error object does not swallow it" {
	run_box --max-instructions 100000 -e '
		local ok, e = xpcall(function() while true do end end,
			function() return {swallowed = true} end)
		print("after", ok) return e'
	assert_limit limit_exceeded instructions 100000 instructions '.stdout == ""'
	refute_output --partial 'swallowed'
}

@test "uncatchable: a __close handler raising its own error object does not replace it" {
	run_box --max-instructions 100000 -e '
		local ok, e = pcall(function()
			local x <close> = setmetatable({}, {__close = function() error({mine = true}) end})
			while true do end
		end)
		print("after") return e'
	assert_limit limit_exceeded instructions 100000 instructions '.stdout == ""'
}

@test "uncatchable: pcall does not swallow the memory limit" {
	run_box -m 1000000 -e '
		for i = 1, 100 do pcall(function() local t = {} for j = 1, 1e7 do t[j] = j end end) end
		return "escaped"'
	assert_limit limit_exceeded memory 1000000 bytes
	refute_output --partial 'escaped'
}

@test "uncatchable: pcall does not swallow the CPU limit" {
	run_box --cpu-ms 200 -t 5000 -e 'while true do pcall(function() while true do end end) end'
	assert_limit limit_exceeded cpu 200 ms
}

@test "uncatchable: error(limit message) from the script is only a guest error" {
	run_box -e 'error("limit_exceeded")'
	assert_fail guest_error 1
}

@test "coroutines: the instruction limit holds inside coroutine.wrap" {
	run_box --max-instructions 100000 -e '
		local co = coroutine.wrap(function() while true do end end)
		for i = 1, 10 do pcall(co) end
		return "escaped"'
	assert_limit limit_exceeded instructions 100000 instructions
	refute_output --partial 'escaped'
}

@test "coroutines: the instruction limit holds inside coroutine.resume" {
	run_box --max-instructions 100000 -e '
		local co = coroutine.create(function() while true do end end)
		for i = 1, 10 do coroutine.resume(co) end
		return "escaped"'
	assert_limit limit_exceeded instructions 100000 instructions
	refute_output --partial 'escaped'
}

@test "coroutines: the CPU limit holds in a loop of coroutine.resume" {
	run_box --cpu-ms 200 -t 5000 -e '
		while true do
			local co = coroutine.create(function() while true do coroutine.yield() end end)
			for i = 1, 1000 do coroutine.resume(co) end
		end'
	assert_limit limit_exceeded cpu 200 ms
}

@test "coroutines: the memory limit holds inside a coroutine" {
	run_box -m 1000000 -e '
		local co = coroutine.create(function() local t = {} for i = 1, 1e8 do t[i] = i end end)
		local ok = coroutine.resume(co)
		return "escaped"'
	assert_limit limit_exceeded memory 1000000 bytes
	refute_output --partial 'escaped'
}

@test "gc: a __gc finalizer that loops forever ends at the deadline" {
	local t0
	t0=$(now_ms)
	run_box -t 800 -e '
		print("before")
		setmetatable({}, {__gc = function() while true do end end})
		for i = 1, 1e6 do local t = {} end
		print("after") return "done"'
	assert_limit timeout wall 800 ms '.stdout == "before\n"'
	[ $(($(now_ms) - t0)) -lt 2500 ]
}

@test "gc: the same script without the looping finalizer finishes (control)" {
	run_box -t 800 -e '
		print("before")
		setmetatable({}, {__gc = function() end})
		for i = 1, 1e6 do local t = {} end
		print("after") return "done"'
	assert_ok '.stdout == "before\nafter\n" and .result == "done"'
}

@test "error object: a __tostring that loops is stopped by the CPU limit" {
	run_box --cpu-ms 200 -t 3000 -e 'error(setmetatable({}, {__tostring = function() while true do end end}))'
	assert_limit limit_exceeded cpu 200 ms
}

@test "error object: a __tostring that loops is stopped by the deadline" {
	run_box --cpu-ms 10000 -t 400 -e 'error(setmetatable({}, {__tostring = function() while true do end end}))'
	assert_limit timeout wall 400 ms
}

@test "error object: its __tostring gives the message" {
	run_box -e 'error(setmetatable({}, {__tostring = function() return "custom failure" end}))'
	assert_fail guest_error 1 '.error.message == "custom failure"'
}

# ======================================================================= long calls inside C

@test "C call: a pathological pattern ends at the deadline with the output before it" {
	local t0
	t0=$(now_ms)
	run_box -t 500 -e 'print("before") return string.find(string.rep("a", 40000), ".-.-.-.-.-.-.-.-b")'
	assert_limit timeout wall 500 ms '.stdout == "before\n" and .total_lines == 1'
	[ $(($(now_ms) - t0)) -lt 2500 ]
}

@test "C call: string.rep(\"\", 1e9) ends at the deadline" {
	local t0
	t0=$(now_ms)
	run_box -t 500 -e 'print("before") return #string.rep("", 1e9)'
	assert_limit timeout wall 500 ms '.stdout == "before\n"'
	[ $(($(now_ms) - t0)) -lt 2500 ]
}

@test "C call: table.move over 1e9 slots ends at the deadline" {
	local t0
	t0=$(now_ms)
	run_box -t 500 -e 'print("before") return table.move({}, 1, 1e9, 2)'
	assert_limit timeout wall 500 ms '.stdout == "before\n"'
	[ $(($(now_ms) - t0)) -lt 2500 ]
}

@test "C call: a huge concat is a memory error, output kept" {
	run_box -t 1000 -m 8000000 -e '
		print("before")
		local t = {} for i = 1, 100 do t[i] = string.rep("x", 1e5) end
		local s = table.concat(t)
		return #(s .. s .. s)'
	assert_limit limit_exceeded memory 8000000 bytes '.stdout == "before\n"'
}

@test "C call: table.concat of a huge table is a memory error" {
	run_box -t 1000 -e '
		local s = string.rep("x", 2^20) local t = {}
		for i = 1, 40 do t[i] = s end
		return #table.concat(t, s)'
	assert_limit limit_exceeded memory 33554432 bytes
}

# ======================================================================= stacks

@test "stack: C stack overflow through __index recursion is a guest_error, not a crash" {
	run_box -e '
		local t = setmetatable({}, {})
		getmetatable(t).__index = function(s, k) return s[k] end
		return t.x'
	assert_fail guest_error 1 '.error.message | test("stack overflow")'
}

@test "stack: __index chains through tables and functions end as a guest_error" {
	run_box -e '
		local t = {}
		setmetatable(t, {__index = setmetatable({}, {__index = function(s, k) return t[k] end})})
		return t.x'
	assert_fail guest_error 1 '.error.message | test("stack overflow")'
}

@test "stack: deep Lua recursion is a guest_error (stack overflow), not a crash" {
	run_box -m 268435456 -t 5000 -e 'local function f(n) return 1 + f(n + 1) end return f(1)'
	assert_fail guest_error 1 '.error.message | test("stack overflow")'
}

@test "stack: recursion through __tostring is a guest_error" {
	run_box -e 'local t = setmetatable({}, {__tostring = function(s) return tostring(s) end}) return tostring(t)'
	assert_fail guest_error 1 '.error.message | test("stack overflow")'
}

@test "stack: recursion through coroutine.wrap is a guest_error" {
	run_box -e 'local function f() return coroutine.wrap(f)() end return f()'
	assert_fail guest_error 1
}

@test "stack: recursion through pcall is caught as a normal error" {
	run_box -e 'local function f() return select(2, pcall(f)) end return f()'
	assert_ok '.result | test("stack overflow")'
}

# ======================================================================= the environment

@test "env: every removed global is nil" {
	run_box -e '
		local names = {"load", "loadstring", "dofile", "loadfile", "require", "collectgarbage",
			"io", "package", "debug", "warn", "module", "setfenv", "getfenv", "unpack"}
		local present = {}
		for _, k in ipairs(names) do
			if _G[k] ~= nil then present[#present + 1] = k end
		end
		return {present = present, n = #names}'
	assert_ok '.result == {"present": [], "n": 14}'
}

@test "env: the removed globals are nil by name too (no _G trickery)" {
	run_box -e 'return {load == nil, loadstring == nil, dofile == nil, loadfile == nil,
		require == nil, collectgarbage == nil, io == nil, package == nil, debug == nil,
		warn == nil, rawget(_G, "load") == nil}'
	assert_ok '.result == [true, true, true, true, true, true, true, true, true, true, true]'
}

@test "env: os keeps only time, date, clock, difftime" {
	run_box -e '
		local k = {} for name in pairs(os) do k[#k + 1] = name end table.sort(k)
		return {keys = k, execute = os.execute == nil, getenv = os.getenv == nil,
			exit = os.exit == nil, remove = os.remove == nil, tmpname = os.tmpname == nil,
			time = math.type(os.time()), clock = type(os.clock())}'
	assert_ok '(.result.keys == ["clock", "date", "difftime", "time"]) and
		(.result | .execute and .getenv and .exit and .remove and .tmpname) and
		(.result.time == "integer" and .result.clock == "number")'
}

@test "env: string.dump is gone, also as a method of strings" {
	run_box -e 'return {string.dump == nil, ("").dump == nil, ("x").dump == nil, rawget(string, "dump") == nil}'
	assert_ok '.result == [true, true, true, true]'
}

@test "env: the string metatable is locked (getmetatable(\"\") is false)" {
	run_box -e 'return {getmetatable(""), getmetatable("abc"), pcall(setmetatable, "", {})}'
	assert_ok '.result[0] == false and .result[1] == false and .result[2] == false'
}

@test "env: features not granted are nil, never stubs (fs, http, tools)" {
	run_box -e 'return {fs == nil, http == nil, tools == nil, json ~= nil, base64 ~= nil}'
	assert_ok '.result == [true, true, true, true, true]'
}

@test "env: fs is present with a workspace, http still nil" {
	run_box -w "$WS" -e '
		local k = {} for name in pairs(fs) do k[#k + 1] = name end table.sort(k)
		return {k, http == nil}'
	assert_ok '(.result[0] == ["append", "exists", "grep", "list", "mkdir", "read", "remove", "stat", "write"]) and
		(.result[1] == true)'
}

@test "env: a bytecode script file (\\27Lua) is refused" {
	printf '\033LuaT\000\031\223\r\n\032\nreturn 1' >"$T/chunk.luac"
	run_box "$T/chunk.luac"
	assert_fail guest_error 1 '.error.message | test("binary chunk")'
	refute_output --partial '"result"'
}

@test "args: 100000 arguments arrive in order, in linear time" {
	python3 -c 'import json; print(json.dumps({"script": "local v, s = {...}, 0 for i = 1, #v do s = s + v[i] end return {select(\"#\", ...), #arg, s, arg[100000]}", "args": list(range(1, 100001))}))' >"$T/req.json"
	local t0 t1
	t0=$(now_ms)
	run --separate-stderr box-run --json <"$T/req.json"
	t1=$(now_ms)
	assert_ok '.result == [100000, 100000, 5000050000, 100000]'
	# quadratic took 12 s here; linear takes well under a second
	[ $((t1 - t0)) -lt 3000 ]
	# flags: ARG... after the script (timed alone: bats' run is slow with 100000 words)
	local words
	words=$(seq 100000)
	t0=$(now_ms)
	# shellcheck disable=SC2086
	box-run -e 'return {select("#", ...), arg[1], arg[100000]}' $words >"$T/out"
	t1=$(now_ms)
	run --separate-stderr cat "$T/out"
	assert_ok '.result == [100000, "1", "100000"]'
	[ $((t1 - t0)) -lt 3000 ]
}

@test "env: a bytecode script through --json is refused" {
	run_box_json '{"script": "\u001bLua return 1"}'
	assert_fail guest_error 1 '.error.message | test("binary chunk")'
}

@test "env: tostring never shows an address: objects are numbered as they are first shown" {
	run_box -e 'local t = {}
		return {tostring(t), tostring(print), tostring(function() end),
		tostring(coroutine.create(print)), tostring(json.null), tostring(t),
		tostring(setmetatable({}, {__name = "Point"})), tostring(setmetatable({}, {__name = 7}))}'
	assert_ok '.result == ["table: 0x1", "function: 0x2", "function: 0x3", "thread: 0x4",
		"json.null", "table: 0x1", "Point: 0x5", "table: 0x6"]'
	refute_output --regexp '0x[0-9a-fA-F]{3,}'
}

@test "env: tostring as an identity key: 10000 tables, 10000 different names" {
	run_box -e 'local seen, n = {}, 0
		for i = 1, 10000 do
			local s = tostring({})
			if not seen[s] then seen[s] = true n = n + 1 end
		end
		return {n, tostring({})}'
	assert_ok '.result == [10000, "table: 0x2711"]'
}

@test "env: print never shows an address" {
	run_box -e 'print({}, print, coroutine.create(print), setmetatable({}, {}))'
	assert_ok '.stdout == "table: 0x1\tfunction: 0x2\tthread: 0x3\ttable: 0x4\n"'
	refute_output --regexp '0x[0-9a-fA-F]{3,}'
}

# print builds its line in a luaL_Buffer, which lives on the Lua stack once it outgrows its
# first block: every size from one block to far past the output cap, one argument or many.
@test "print: long strings from 1 KiB to 1 MiB come out whole" {
	local n
	for n in 1000 1024 3000 8000 8192 65535 100000 1048576; do
		run_box --max-output-bytes 2000000 -e 'local n = ... print(string.rep("x", n)) return n' "$n"
		assert_ok ".stdout == (\"x\" * $n + \"\\n\") and .lossy == false and .truncated == false and
			.stats.output_bytes == $n + 1 and .total_lines == 1"
	done
}

@test "print: many long arguments, mixed with numbers, tables and nil" {
	run_box --max-output-bytes 2000000 -e '
		print(("a"):rep(600), ("b"):rep(600))
		local t = {}
		for i = 1, 200 do t[#t + 1] = (i % 2 == 0) and ("y"):rep(i * 37) or i end
		print(table.unpack(t))
		print(1.5, nil, true, {}, ("z"):rep(5000), setmetatable({}, {__tostring = function() return ("w"):rep(3000) end}))
		local parts = {}
		for i = 1, 200 do parts[i] = tostring(t[i]) end
		return table.concat(parts, "\t")'
	assert_ok '(.stdout | split("\n")) as $l |
		$l[0] == ("a" * 600) + "\t" + ("b" * 600) and
		$l[1] == .result and
		$l[2] == "1.5\tnil\ttrue\ttable: 0x1\t" + ("z" * 5000) + "\t" + ("w" * 3000) and
		$l[3] == "" and (.stdout | length) == .stats.output_bytes and .lossy == false'
}

@test "print: NUL bytes stay in stdout and in the events" {
	run_box -e 'print("a\0b", "\0") print(("\0"):rep(3))'
	assert_ok '.stdout == "a\u0000b\t\u0000\n\u0000\u0000\u0000\n" and .stats.output_bytes == 10 and .lossy == false'
	run_box --events -e 'print("x\0y")'
	assert_equal "$status" 0
	assert_line --index 0 '{"event":"stdout","data":"x\u0000y\n"}'
}

@test "print: 250 arguments and 10000 calls of long lines, counted exactly" {
	run_box --max-output-bytes 300000 -e '
		local args = {}
		for i = 1, 250 do args[i] = ("q"):rep(100) end
		print(table.unpack(args))
		for i = 1, 10000 do print(("r"):rep(i % 300)) end'
	assert_ok '.truncated == true and .total_lines == 10001 and
		.stats.output_bytes == 25250 + 10000 + ([range(1; 10001)] | map(. % 300) | add) and
		(.stdout | startswith(("q" * 100) + "\t" + ("q" * 100))) and .lossy == false'
}

@test "env: string.format %s of a table shows no address" {
	run_box -e 'local t = {} return string.format("%s|%s|%14s|%s", t, print, {}, t)'
	assert_ok '.result == "table: 0x1|function: 0x2|    table: 0x3|table: 0x1"'
}

@test "env: string.format errors name 'format' and the script's line, as in Lua" {
	run_box -e 'local ok1, e1 = pcall(function() return string.format("%d", "x") end)
		local ok2, e2 = pcall(function() return ("%d"):format({}) end)
		local ok3, e3 = pcall(string.format, "%d", 1.5)
		local ok4, e4 = pcall(function() return string.format("%y", 1) end)
		local ok5, e5 = pcall(function() return string.format("%d") end)
		return {e1, e2, e3, e4, e5}'
	assert_ok '.result == [
		"script:1: bad argument #2 to '"'format'"' (number expected, got string)",
		"script:2: bad argument #1 to '"'format'"' (number expected, got table)",
		"bad argument #2 to '"'string.format'"' (number has no integer representation)",
		"script:4: invalid conversion '"'%y'"' to '"'format'"'",
		"script:5: bad argument #2 to '"'format'"' (no value)"]'
	run_box -e 'string.format("%d", "x")'
	assert_fail guest_error 1 '.error.message == "script:1: bad argument #2 to '"'format'"' (number expected, got string)"'
}

@test "env: box's own functions are named in their errors as the standard ones are" {
	run_box -w "$WS" -e '
		local r = {}
		for _, f in ipairs({json.encode, json.decode, base64.encode, base64.decode, fs.read,
				fs.write, fs.append, fs.exists}) do
			r[#r + 1] = select(2, pcall(f))
		end
		r[#r + 1] = select(2, pcall(function() return base64.decode({}) end))
		return r'
	assert_ok '.result == [
		"bad argument #1 to '"'json.encode'"' (value expected)",
		"bad argument #1 to '"'json.decode'"' (string expected, got no value)",
		"bad argument #1 to '"'base64.encode'"' (string expected, got no value)",
		"bad argument #1 to '"'base64.decode'"' (string expected, got no value)",
		"bad argument #1 to '"'fs.read'"' (string expected, got no value)",
		"bad argument #1 to '"'fs.write'"' (string expected, got no value)",
		"bad argument #1 to '"'fs.append'"' (string expected, got no value)",
		"bad argument #1 to '"'fs.exists'"' (string expected, got no value)",
		"script:7: bad argument #1 to '"'decode'"' (string expected, got table)"]'
}

@test "env: string.format %p is refused, also as a method and with flags" {
	local code
	for code in 'return string.format("%p", {})' 'return ("%p"):format(print)' \
		'return string.format("%-20p", {})' 'return string.format("%d %p", 1, {})'; do
		run_box -e "$code"
		assert_fail guest_error 1 '.error.message | test("%p")'
		refute_output --regexp '0x[0-9a-fA-F]+'
	done
}

@test "env: an error with a table value shows no address" {
	run_box -e 'error({})'
	assert_fail guest_error 1 '.error.message == "table: 0x1"'
	refute_output --regexp '0x[0-9a-fA-F]{3,}'
	refute_regex "$stderr" '0x[0-9a-fA-F]{3,}'
}

@test "env: a script error is guest_error (exit 1) with its message" {
	run_box -e 'print("partial") error("went wrong")'
	assert_fail guest_error 1 '.error.message == "script:1: went wrong" and .stdout == "partial\n"'
	assert_equal "$stderr" 'box-run: guest_error: script:1: went wrong'
}

@test "env: a syntax error is guest_error" {
	run_box -e 'return +'
	assert_fail guest_error 1
}

# ======================================================================= hostile return values

@test "result: a table that contains itself is a guest_error naming the path" {
	run_box -e 'local t = {} t.self = t return t'
	assert_fail guest_error 1 '.error.message | test("cycle") and test("\\$\\.self")'
}

@test "result: a cycle through two tables is a guest_error" {
	run_box -e 'local a, b = {}, {} a[1] = b b[1] = a return a'
	assert_fail guest_error 1 '.error.message | test("cycle")'
}

@test "result: a table nested too deeply is a guest_error, not a crash" {
	run_box -e 'local t = {} local c = t for i = 1, 100000 do c[1] = {} c = c[1] end return t'
	assert_fail guest_error 1 '.error.message | test("nested too deeply")'
}

@test "result: hostile metatables are ignored (raw access)" {
	run_box -e '
		local t = setmetatable({a = 1}, {
			__index = function() error("index") end,
			__newindex = function() error("newindex") end,
			__pairs = function() error("pairs") end,
			__len = function() error("len") end,
			__tostring = function() while true do end end,
			__metatable = "locked"})
		local u = setmetatable({1, 2}, {__index = function() while true do end end})
		return {t = t, u = u}'
	assert_ok '.result == {"t": {"a": 1}, "u": [1, 2]}'
}

@test "result: a function in the value is a guest_error" {
	run_box -e 'return {ok = true, f = print}'
	assert_fail guest_error 1 '.error.message | test("function") and test("\\$\\.f")'
}

@test "result: NaN and infinity are guest_errors" {
	run_box -e 'return 0/0'
	assert_fail guest_error 1
	run_box -e 'return {1, math.huge}'
	assert_fail guest_error 1
}

# ======================================================================= result conversion

@test "result: integers stay exact (9007199254740993, maxinteger, mininteger)" {
	run_box -e 'return {9007199254740993, math.maxinteger, math.mininteger, -1, 0}'
	assert_ok
	# jq turns numbers into doubles: check the text
	assert_output --partial '"result":[9007199254740993,9223372036854775807,-9223372036854775808,-1,0]'
}

@test "result: floats stay floats and round-trip" {
	run_box -e 'return {0.1, 1.5, 3.0, -2.5e-8, 1e300, 2^53}'
	assert_ok '.result[0] == 0.1 and .result[1] == 1.5 and .result[2] == 3 and .result[3] == -2.5e-8 and .result[4] == 1e300'
	assert_output --partial '"result":[0.1,1.5,3.0,'
}

@test "result: scalars" {
	local code want
	while IFS='|' read -r code want; do
		echo "script: $code" >&2
		run_box -e "$code"
		assert_ok ".result == $want"
	done <<'EOF'
return 42|42
return "text"|"text"
return true|true
return false|false
return -7|-7
return 1, 2|1
EOF
}

@test "result: nested tables, arrays and objects" {
	run_box -e 'return {a = {b = {c = {1, 2, {d = true}}}}, e = false, list = {"x", "y"}, empty = {}}'
	assert_ok '.result == {"a": {"b": {"c": [1, 2, {"d": true}]}}, "e": false, "list": ["x", "y"], "empty": []}'
}

@test "result: a mixed table becomes an object with string keys" {
	run_box -e 'return {1, 2, x = 3}'
	assert_ok '.result == {"1": 1, "2": 2, "x": 3}'
}

@test "result: a sparse array becomes an object" {
	run_box -e 'return {[1] = "a", [3] = "c"}'
	assert_ok '.result == {"1": "a", "3": "c"}'
}

@test "result: json.null is null, at the top and inside" {
	run_box -e 'return {json.null, 1, {k = json.null}}'
	assert_ok '.result == [null, 1, {"k": null}]'
	run_box -e 'return json.null'
	assert_ok 'has("result") and .result == null'
}

@test "result: nil is no result at all" {
	run_box -e 'return nil'
	assert_ok 'has("result") | not'
	run_box -e 'local x = 1'
	assert_ok 'has("result") | not'
}

@test "result: invalid UTF-8 becomes U+FFFD and sets lossy" {
	run_box -e 'return {"a\255b", "ok"}'
	assert_ok '.result == ["a\ufffdb", "ok"] and .lossy == true'
}

@test "result: valid UTF-8 is not lossy" {
	run_box -e 'return "h\u{e9}llo \u{1F600}"'
	assert_ok '.result == "h\u00e9llo \ud83d\ude00" and .lossy == false'
}

@test "result: control bytes and NUL are escaped" {
	run_box -e 'return "tab\there\0nul\"q\\"'
	assert_ok '.result == "tab\there\u0000nul\"q\\"'
	assert_output --partial '"result":"tab\there\u0000nul\"q\\"'
}

@test "output: invalid UTF-8 from print becomes U+FFFD and sets lossy" {
	run_box -e 'print("a\255b") return 1'
	assert_ok '.stdout == "a\ufffdb\n" and .lossy == true'
}

@test "result: stats are in every result" {
	run_box -w "$WS" -e 'fs.write("x", "1") print(fs.read("x")) return 1'
	assert_ok '.stats | (.memory_peak_bytes > 0) and (.wall_ms >= 0) and (.cpu_ms >= 0) and (.output_bytes == 2) and (.host_calls == 2)'
	run_box --max-instructions 100 -e 'while true do end'
	assert_limit limit_exceeded instructions 100 instructions '.stats | has("memory_peak_bytes") and
		has("wall_ms") and has("cpu_ms") and has("output_bytes") and has("host_calls") and
		has("instructions")'
}

# ======================================================================= json and base64

@test "json: encode and decode round trip, integers exact" {
	run_box -e '
		local s = json.encode({a = {1, 2, 3}, b = "x", n = 9007199254740993, f = 0.5, t = true})
		local d = json.decode(s)
		return {s = s, same = d.n == 9007199254740993, t = math.type(d.n), f = d.f, a3 = d.a[3], b = d.b}'
	assert_ok '(.result.same == true and .result.t == "integer" and .result.f == 0.5 and .result.a3 == 3 and .result.b == "x") and
		(.result.s == "{\"a\":[1,2,3],\"b\":\"x\",\"f\":0.5,\"n\":9007199254740993,\"t\":true}")'
}

@test "json: decode maps null to json.null" {
	run_box -e 'local d = json.decode("[1, null, {\"k\": null}]") return {d[2] == json.null, d[3].k == json.null, d}'
	assert_ok '.result == [true, true, [1, null, {"k": null}]]'
}

@test "json: malformed input is a catchable error" {
	run_box -e 'local ok, e = pcall(json.decode, "{bad") return {ok, e}'
	assert_ok '.result[0] == false and (.result[1] | test("json.decode"))'
}

@test "json: deep nesting in decode is a catchable error" {
	run_box -e 'local ok, e = pcall(json.decode, string.rep("[", 100000)) return ok'
	assert_ok '.result == false'
}

@test "json: encode refuses cycles and functions with a catchable error" {
	run_box -e '
		local t = {} t[1] = t
		local ok1, e1 = pcall(json.encode, t)
		local ok2 = pcall(json.encode, {print})
		return {ok1, e1, ok2}'
	assert_ok '.result[0] == false and (.result[1] | test("cycle")) and .result[2] == false'
}

@test "json: json.object() and json.array() say what an empty table becomes" {
	run_box -e '
		local o, a = json.object(), json.array()
		local filled = json.object({1, 2})
		local ok, e = pcall(json.encode, json.array({x = 1}))
		local ok2, e2 = pcall(json.object, 5)
		return {json.encode(o), json.encode(a), json.encode({}), json.encode(filled),
			json.encode(json.array({1, 2})), ok, e, ok2, e2, o, a,
			json.encode(setmetatable({}, {__jsontype = "object"})),
			json.encode({x = setmetatable({}, {__jsontype = "array"})}),
			json.object() ~= json.object()}'
	assert_ok '.result == ["{}", "[]", "[]", "{\"1\":1,\"2\":2}", "[1,2]", false,
		"json.encode: table marked as an array is not a sequence 1..n at $",
		false, "bad argument #1 to '"'json.object'"' (table expected, got number)",
		{}, [], "{}", "{\"x\":[]}", true]'
}

@test "json: what json.decode made goes back out the same: {} stays {}" {
	run_box -e '
		local texts = {"{}", "[]", "{\"a\":{},\"b\":[],\"c\":[{},[]],\"d\":{\"e\":{}}}",
			"[{}]", "{\"1\":\"x\"}"}
		local out = {}
		for i, t in ipairs(texts) do out[i] = json.encode(json.decode(t)) == t end
		local d = json.decode("{}")
		d[1] = "still an object"
		out[#out + 1] = json.encode(d)
		return {out, json.decode("{\"k\":{}}")}'
	assert_ok '.result == [[true, true, true, true, true, "{\"1\":\"still an object\"}"], {"k": {}}]'
}

@test "json: \\u0000 in a JSON string is refused with its error; encoding a NUL is fine" {
	run_box -e '
		local ok, e = pcall(json.decode, "[\"a\\u0000b\"]")
		return {ok, e, json.encode("a\0b"), "a\0b"}'
	assert_ok '.result == [false, "json.decode: JSON strings containing \\u0000 are not supported",
		"\"a\\u0000b\"", "a\u0000b"]'
	run_box_json '{"script": "return ...", "args": ["a\u0000b"]}'
	assert_fail invalid_request 2 '.error.message | test("u0000")'
}

@test "base64: encode and decode round trip binary data" {
	run_box -e '
		local raw = "\0\1\2\255hello"
		local b = base64.encode(raw)
		return {b, base64.decode(b) == raw, base64.encode(""), base64.decode("aGk=")}'
	assert_ok '.result == ["AAEC/2hlbGxv", true, "", "hi"]'
}

@test "base64: invalid input is a catchable error" {
	run_box -e 'local ok, e = pcall(base64.decode, "!!!") return {ok, e}'
	assert_ok '.result[0] == false and (.result[1] | test("base64"))'
}

# ======================================================================= events

@test "events: --events prints NDJSON, one event per print, in order, the result last" {
	run_box --events -e 'print("one") print("two") print("three") return 3'
	assert_equal "$status" 0
	assert_equal "$stderr" ""
	assert_equal "${#lines[@]}" 4
	jqe '.event == "stdout" and .data == "one\n"' "${lines[0]}"
	jqe '.event == "stdout" and .data == "two\n"' "${lines[1]}"
	jqe '.event == "stdout" and .data == "three\n"' "${lines[2]}"
	jqe '.event == "result" and .ok == true and .result == 3 and .stdout == "one\ntwo\nthree\n"' "${lines[3]}"
	# every line is one JSON object on its own
	[ "$(jq -c . <<<"$output" | wc -l)" = 4 ]
}

@test "events: \"events\": true in the request does the same" {
	run_box_json '{"script": "print(\"a\") return 1", "events": true}'
	assert_equal "$status" 0
	assert_equal "${#lines[@]}" 2
	jqe '.event == "stdout" and .data == "a\n"' "${lines[0]}"
	jqe '.event == "result" and .result == 1' "${lines[1]}"
}

@test "events: a failing run still ends with the result event" {
	run_box --events -t 300 --cpu-ms 10000 -e 'print("early") while true do end'
	assert_equal "$status" 3
	assert_equal "${#lines[@]}" 2
	jqe '.event == "stdout" and .data == "early\n"' "${lines[0]}"
	jqe '.event == "result" and .ok == false and .error.code == "timeout"' "${lines[1]}"
	assert_regex "$stderr" '^box-run: timeout: '
}

@test "events: a print is streamed when it happens, not at the end of the run" {
	local line t0 elapsed
	t0=$(now_ms)
	coproc BOXRUN { exec box-run --events -t 1500 --cpu-ms 10000 \
		-e 'print("early") while true do end' 2>/dev/null 3>&-; }
	read -r -t 1.2 line <&"${BOXRUN[0]}" || true
	elapsed=$(($(now_ms) - t0))
	wait "$BOXRUN_PID" || true
	jqe '.event == "stdout" and .data == "early\n"' "$line"
	# the run lasts 1500 ms: an event that came well before that was streamed
	[ "$elapsed" -lt 1200 ]
}

@test "events: without --events the output is one JSON object" {
	run_box -e 'print("one") print("two") return 1'
	assert_ok 'has("event") | not'
}

# ======================================================================= print floods

@test "flood: 100000 prints are counted, stdout is capped at 64 KiB" {
	run_box -e 'for i = 1, 100000 do print(i) end return "done"'
	assert_ok '(.truncated == true and .total_lines == 100000 and .result == "done") and
		((.stdout | length) == 65536) and
		(.stats.output_bytes == 588895)'
}

@test "flood: printing until the deadline keeps the capped output and reports the timeout" {
	run_box -t 400 --cpu-ms 10000 --max-output-bytes 1000 -e 'while true do print(("x"):rep(99)) end'
	assert_limit timeout wall 400 ms '.truncated == true and (.stdout | length) == 1000 and .total_lines > 10'
}

@test "flood: max_output_bytes 0 keeps nothing but counts everything" {
	run_box --max-output-bytes 0 -e 'print("a") print("b")'
	assert_ok '.stdout == "" and .truncated == true and .total_lines == 2 and .stats.output_bytes == 4'
}

# ======================================================================= the workspace

@test "workspace: write, read, list, stat, exists, remove, binary-safe" {
	run_box -w "$WS" -e '
		local data = "a\0b\255c"
		fs.mkdir("d")
		fs.write("d/f.bin", data)
		fs.append("d/f.bin", "!")
		local back = fs.read("d/f.bin")
		local st = fs.stat("d/f.bin")
		local names = {} for _, e in ipairs(fs.list("d")) do names[#names + 1] = e.name end
		local ex = {fs.exists("d/f.bin"), fs.exists("nope")}
		return {same = back == data .. "!", size = st.size, names = names, ex = ex}'
	assert_ok '.result == {"same": true, "size": 6, "names": ["f.bin"], "ex": [true, false]}'
	[ "$(od -An -tx1 "$WS/d/f.bin" | tr -d ' \n')" = "610062ff6321" ]
}

@test "workspace: /workspace/ is an alias of the root" {
	run_box -w "$WS" -e 'fs.write("/workspace/a.txt", "via alias") return {fs.read("/a.txt"), fs.read("a.txt"), fs.read("/workspace/a.txt")}'
	assert_ok '.result == ["via alias", "via alias", "via alias"]'
	assert_equal "$(cat "$WS/a.txt")" 'via alias'
}

@test "workspace: ../ cannot read outside, and nothing outside is read" {
	echo 'TOPSECRET-dotdot' >"$OUTSIDE/secret.txt"
	run_box -w "$WS" -e 'return fs.read("../outside/secret.txt")'
	assert_fail policy_denied 4 '.error.message | test("escapes")'
	refute_output --partial TOPSECRET
	refute_regex "$stderr" TOPSECRET
}

@test "workspace: ../ cannot write outside, the host file is untouched" {
	echo 'TOPSECRET-dotdot' >"$OUTSIDE/secret.txt"
	local before
	before=$(sha "$OUTSIDE/secret.txt")
	run_box -w "$WS" -e '
		local r = {}
		for _, p in ipairs({"../outside/secret.txt", "/../outside/secret.txt", "d/../../outside/secret.txt"}) do
			local ok, e = pcall(fs.write, p, "pwned")
			r[#r + 1] = {ok, e}
		end
		r[#r + 1] = {pcall(fs.append, "../outside/secret.txt", "pwned")}
		r[#r + 1] = {pcall(fs.remove, "../outside/secret.txt")}
		r[#r + 1] = {pcall(fs.mkdir, "../outside/newdir")}
		return r'
	assert_ok '([.result[] | .[0]] == [false, false, false, false, false, false]) and
		([.result[] | .[1] | test("policy_denied")] | all)'
	assert_equal "$(sha "$OUTSIDE/secret.txt")" "$before"
	[ ! -e "$OUTSIDE/newdir" ]
	[ "$(ls "$OUTSIDE")" = secret.txt ]
}

@test "workspace: an absolute host path resolves inside the workspace" {
	echo 'TOPSECRET-abs' >"$OUTSIDE/secret.txt"
	local before
	before=$(sha "$OUTSIDE/secret.txt")
	run_box -w "$WS" -e '
		local host = ...
		local ok, e = pcall(fs.read, host)
		fs.write(host, "pwned")
		return {ok, fs.read(host)}' "$OUTSIDE/secret.txt"
	assert_ok '.result[0] == false and .result[1] == "pwned"'
	refute_output --partial TOPSECRET
	assert_equal "$(sha "$OUTSIDE/secret.txt")" "$before"
	# the write landed under the workspace, at the same path
	assert_equal "$(cat "$WS$OUTSIDE/secret.txt")" pwned
}

@test "workspace: a symlink pointing out is not followed out (read)" {
	echo 'TOPSECRET-symlink' >"$OUTSIDE/secret.txt"
	ln -s "$OUTSIDE/secret.txt" "$WS/abs"
	ln -s ../outside/secret.txt "$WS/rel"
	run_box -w "$WS" -e '
		local ok1, e1 = pcall(fs.read, "abs")
		local ok2, e2 = pcall(fs.read, "rel")
		return {ok1, e1, ok2, e2}'
	assert_ok '.result[0] == false and .result[2] == false'
	refute_output --partial TOPSECRET
}

@test "workspace: a symlink pointing out is not followed out (write, append)" {
	echo 'TOPSECRET-symlink' >"$OUTSIDE/secret.txt"
	local before
	before=$(sha "$OUTSIDE/secret.txt")
	ln -s "$OUTSIDE/secret.txt" "$WS/abs"
	ln -s ../outside/secret.txt "$WS/rel"
	run_box -w "$WS" -e '
		for _, p in ipairs({"abs", "rel"}) do
			pcall(fs.append, p, "pwned")
			pcall(fs.write, p, "pwned")
			pcall(fs.append, p, "pwned")
		end
		return "done"'
	assert_ok '.result == "done"'
	assert_equal "$(sha "$OUTSIDE/secret.txt")" "$before"
	[ "$(ls "$OUTSIDE")" = secret.txt ]
}

@test "workspace: a symlinked directory pointing out is not followed out" {
	echo 'TOPSECRET-dirlink' >"$OUTSIDE/secret.txt"
	local before
	before=$(sha "$OUTSIDE/secret.txt")
	ln -s "$OUTSIDE" "$WS/dirlink"
	ln -s ../outside "$WS/reldir"
	run_box -w "$WS" -e '
		local r = {}
		for _, d in ipairs({"dirlink", "reldir"}) do
			pcall(fs.write, d .. "/new.txt", "pwned")
			pcall(fs.write, d .. "/secret.txt", "pwned")
			local ok, l = pcall(fs.list, d)
			r[#r + 1] = ok and json.encode(l) or "error"
			r[#r + 1] = tostring(select(2, pcall(fs.read, d .. "/secret.txt")))
		end
		r[#r + 1] = json.encode(fs.grep("TOPSECRET", "/"))
		return r'
	assert_ok '.result | length == 5'
	refute_output --partial TOPSECRET
	assert_equal "$(sha "$OUTSIDE/secret.txt")" "$before"
	[ "$(ls "$OUTSIDE")" = secret.txt ]
}

@test "workspace: a hard link to a file outside is refused for reading" {
	echo 'TOPSECRET-hardlink' >"$OUTSIDE/secret.txt"
	ln "$OUTSIDE/secret.txt" "$WS/hard"
	run_box -w "$WS" -e 'return fs.read("hard")'
	assert_fail policy_denied 4 '.error.message | test("hard-linked")'
	refute_output --partial TOPSECRET
}

@test "workspace: a hard link to a file outside is never written through" {
	echo 'TOPSECRET-hardlink' >"$OUTSIDE/secret.txt"
	local before
	before=$(sha "$OUTSIDE/secret.txt")
	ln "$OUTSIDE/secret.txt" "$WS/hard"
	ln "$OUTSIDE/secret.txt" "$WS/hard2"
	run_box -w "$WS" -e '
		local a = {pcall(fs.append, "hard", "pwned")}
		local b = {pcall(fs.write, "hard2", "pwned")}
		return {a[1], b[1]}'
	assert_ok '.result[0] == false'
	assert_equal "$(sha "$OUTSIDE/secret.txt")" "$before"
}

@test "workspace: a NUL byte in a path is refused" {
	echo x >"$WS/a"
	run_box -w "$WS" -e 'return fs.read("a\0/../../outside")'
	assert_fail guest_error 1 '(.error.message | test("NUL")) and
		(.stats.host_calls == 0)'
}

# flipper KINDS: in the background, replace $WS/f again and again, as fast as python can, by
# each kind in turn: a = symlink to the secret (absolute), r = symlink to it (relative),
# h = hard link to it, b = a benign regular file. Returns once the flipping runs; stops when
# $T/stop appears (or after 20 s) and writes the number of flips to $T/flips.
flipper() {
	echo benign >"$WS/f"
	python3 - "$WS" "$OUTSIDE/secret.txt" "$T/stop" "$T/flips" "$1" <<'EOF' 3>&- &
import os, sys, time
ws, secret, stop, count, kinds = sys.argv[1:6]
f, tmp = os.path.join(ws, "f"), os.path.join(ws, "f.tmp")
n, end = 0, time.time() + 20
while not os.path.exists(stop) and time.time() < end:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    k = kinds[n % len(kinds)]
    if k == "a":
        os.symlink(secret, tmp)
    elif k == "r":
        os.symlink("../outside/secret.txt", tmp)
    elif k == "h":
        os.link(secret, tmp)
    else:
        with open(tmp, "w") as fh:
            fh.write("benign\n")
    os.replace(tmp, f)
    n += 1
    if n == 20:
        open(count + ".ready", "w").close()
with open(count, "w") as fh:
    fh.write(str(n))
EOF
	FLIPPER=$!
	local i
	for i in $(seq 500); do
		[ -e "$T/flips.ready" ] && return 0
		sleep 0.01
	done
	return 1
}

# The guest side of the race: read, append and (less often: each is fsynced) write ws/f.
RACE_SCRIPT='
	local leaks, reads = 0, 0
	for i = 1, 1500 do
		local ok, data = pcall(fs.read, "f")
		if ok then
			reads = reads + 1
			if data:find("TOPSECRET", 1, true) then leaks = leaks + 1 end
		end
		pcall(fs.append, "f", "pwned")
		if i % 50 == 0 then pcall(fs.write, "f", "pwned") end
	end
	return {leaks = leaks, reads = reads}'

@test "workspace: a symlink swapped in while the script runs never reaches outside" {
	echo 'TOPSECRET-race' >"$OUTSIDE/secret.txt"
	local before
	before=$(sha "$OUTSIDE/secret.txt")
	flipper arb
	run_box -w "$WS" -t 20000 -e "$RACE_SCRIPT"
	touch "$T/stop"
	wait "$FLIPPER"
	assert_ok '.result.leaks == 0'
	refute_output --partial TOPSECRET
	assert_equal "$(sha "$OUTSIDE/secret.txt")" "$before"
	[ "$(ls "$OUTSIDE")" = secret.txt ]
	# the race really ran
	[ "$(cat "$T/flips")" -gt 100 ]
}

# Known limit, documented in box-run(1): while another process keeps renaming a hard link to an
# outside file over a workspace name, ext4 can report a passing link count mid-rename, so a
# read can (rarely: about 1 in 10^4 here) return the outside file. Writes never reach it: write
# and a first append replace the name, and later appends write in place only into the file the
# first one created, while the name still leads to it. This test holds the write side; the read
# side is the open issue it names.
@test "workspace: a hard link swapped in while the script runs is never written through" {
	echo 'TOPSECRET-race' >"$OUTSIDE/secret.txt"
	local before
	before=$(sha "$OUTSIDE/secret.txt")
	flipper hb
	run_box -w "$WS" -t 20000 -e "$RACE_SCRIPT"
	touch "$T/stop"
	wait "$FLIPPER"
	assert_ok '.result.reads > 0'
	assert_equal "$(sha "$OUTSIDE/secret.txt")" "$before"
	[ "$(cat "$T/flips")" -gt 100 ]
}

@test "workspace: fs.grep finds lines inside the workspace only" {
	echo 'TOPSECRET-grep' >"$OUTSIDE/secret.txt"
	printf 'alpha\nneedle one\nbeta\n' >"$WS/a.txt"
	ln -s "$OUTSIDE/secret.txt" "$WS/link"
	run_box -w "$WS" -e 'local hits = fs.grep("needle") local all = fs.grep("TOPSECRET") return {hits, #all}'
	assert_ok '.result[0] == [{"path": "/a.txt", "line_number": 2, "line": "needle one"}] and .result[1] == 0'
	refute_output --partial 'TOPSECRET-grep'
}

# ======================================================================= http

@test "http: a URL outside the allow-list is policy_denied (exit 4), nothing fetched" {
	run_box --allow https://api.example.com -e 'return http.get("https://evil.example.org/")'
	assert_fail policy_denied 4 '(.error.message | test("evil.example.org")) and .stats.host_calls == 1'
}

@test "http: credentials in the URL (https://allowed@evil/) are refused" {
	run_box --allow https://api.example.com -e '
		local ok, e = pcall(http.get, "https://api.example.com@evil.example.org/")
		return {ok, e}'
	assert_ok '.result[0] == false and (.result[1] | test("policy_denied"))'
}

@test "http: loopback and metadata addresses are refused without --allow-private-network" {
	run_box --allow 127.0.0.1:9 --allow http://169.254.169.254 -e '
		local ok1, e1 = pcall(http.get, "http://127.0.0.1:9/")
		local ok2, e2 = pcall(http.post, "http://169.254.169.254/latest/meta-data/", "x")
		return {ok1, e1, ok2, e2}'
	assert_ok '.result[0] == false and (.result[1] | test("policy_denied")) and
		.result[2] == false and (.result[3] | test("policy_denied"))'
}

@test "http: get and post reach an allowed server" {
	start_httpd
	run_box --allow "127.0.0.1:$PORT" --allow-private-network -e '
		local base = ...
		local g = http.get(base .. "/hello")
		local p = http.post(base .. "/echo", "a=1&b=2")
		local e = json.decode(p.body)
		return {g.status, g.body, p.status, e.method, e.body}' "$BASE"
	assert_ok '.result == [200, "hello\n", 200, "POST", "a=1&b=2"] and .stats.host_calls == 2'
}

@test "http: a redirect to an unlisted host is refused" {
	start_httpd
	run_box --allow "127.0.0.1:$PORT" --allow-private-network -e '
		local base, port = ...
		local ok1, e1 = pcall(http.get, base .. "/redirect?to=http://localhost:" .. port .. "/hello")
		local ok2, e2 = pcall(http.get, base .. "/redirect?to=http://169.254.169.254/")
		return {ok1, e1, ok2, e2}' "$BASE" "$PORT"
	assert_ok '.result[0] == false and (.result[1] | test("policy_denied")) and
		.result[2] == false and (.result[3] | test("policy_denied"))'
}

@test "http: a slow server ends at the deadline with the output before it" {
	start_httpd
	run_box --allow "127.0.0.1:$PORT" --allow-private-network -t 500 -e '
		print("before") return http.get((...) .. "/slow?ms=5000")' "$BASE"
	assert_limit timeout wall 500 ms '.stdout == "before\n"'
}
