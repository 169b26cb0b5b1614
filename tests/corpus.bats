#!/usr/bin/env bats
# The corpus: ordinary Lua programs (tests/corpus/*.lua) run through box-run and through plain
# lua5.4 in the same environment (tests/corpus/prelude.lua removes what box-run removes) must
# print the same bytes. differences.lua holds what box-run does differently on purpose, as
# box-run(1) lists it; and the programs together call every standard function box-run keeps
# (tests/corpus/stdlib.list, from the Lua 5.4 reference manual, section 6).

load helpers
bats_require_minimum_version 1.5.0

setup() {
	box_setup
	C=$BATS_TEST_DIRNAME/corpus
	command -v lua5.4 >/dev/null || fail "lua5.4 is missing (Debian package lua5.4)"
}

# compare NAME: NAME.lua prints the same through box-run and lua5.4, whole and valid UTF-8.
compare() {
	local name=$1
	run --separate-stderr box-run --max-output-bytes 8388608 -t 60000 "$C/$name.lua"
	assert_ok '.truncated == false and .lossy == false'
	jq -j .stdout <<<"$output" >"$T/box.out"
	TZ=UTC0 lua5.4 "$C/prelude.lua" "$C/$name.lua" >"$T/lua.out"
	[ -s "$T/lua.out" ]
	if ! cmp "$T/box.out" "$T/lua.out"; then
		diff -a "$T/box.out" "$T/lua.out" | head -20
		return 1
	fi
}

@test "corpus: text processing with patterns, captures and gsub callbacks" { compare text; }
@test "corpus: string.format of every conversion" { compare format; }
@test "corpus: table.sort with comparators, the table library, large tables" { compare tables; }
@test "corpus: deep recursion within the limits, tail calls, a parser" { compare recursion; }
@test "corpus: coroutines as generators, pipelines and a scheduler" { compare coroutines; }
@test "corpus: metatables, operators and OOP idioms, <close>" { compare metatables; }
@test "corpus: integer and float edge cases, bitwise operators, string.pack" { compare numbers; }
@test "corpus: utf8" { compare utf8text; }
@test "corpus: goto, varargs, closures, assert, error and xpcall" { compare control; }
@test "corpus: long outputs, 1 byte to 1 MiB per line" { compare output; }
@test "corpus: JSON round trips of nested data, base64" { compare jsondata; }
@test "corpus: every kept standard function given bad arguments errs as in Lua" { compare errors; }
@test "corpus: os, and the basic functions" { compare stdlib_misc; }

@test "corpus: the programs call every standard function box-run keeps" {
	local f
	: >"$T/called"
	for f in "$C"/*.lua; do
		case $(basename "$f") in prelude.lua | oracle.lua | differences.lua) continue ;; esac
		TZ=UTC0 lua5.4 "$C/prelude.lua" "$f" cover 2>&1 >/dev/null | sed -n 's/^called: //p' >>"$T/called"
	done
	sort -u "$T/called" >"$T/called.sorted"
	sort -u "$C/stdlib.list" >"$T/want"
	run comm -23 "$T/want" "$T/called.sorted"
	assert_output ''
	# and box-run keeps every one of them
	run --separate-stderr box-run -e '
		local missing = {}
		for name in (...):gmatch("[^\n]+") do
			local lib, fn = name:match("^(%w+)%.(%w+)$")
			local f = lib and _G[lib][fn] or _G[name]
			if type(f) ~= "function" then missing[#missing + 1] = name end
		end
		return missing' "$(cat "$C/stdlib.list")"
	assert_ok '.result == []'
}

@test "corpus: the differences box-run makes on purpose, each one real" {
	run --separate-stderr box-run "$C/differences.lua"
	assert_ok '.lossy == true'
	jq -j .stdout <<<"$output" >"$T/box.out"
	cmp "$T/box.out" "$C/differences.expected"
	TZ=UTC0 lua5.4 "$C/prelude.lua" "$C/differences.lua" >"$T/lua.out"
	# the same lines, each one different
	[ "$(wc -l <"$T/box.out")" = "$(wc -l <"$T/lua.out")" ]
	run comm -12 <(sort "$T/box.out") <(sort "$T/lua.out")
	assert_output ''
}

@test "corpus: endless recursion meets the memory limit first, which pcall cannot catch" {
	local src='local function inf(n) return 1 + inf(n + 1) end print(pcall(inf, 1))'
	run --separate-stderr box-run -e "$src"
	assert_limit limit_exceeded memory 33554432 bytes
	# with room for Lua's own stack limit, the same error as Lua's
	run --separate-stderr box-run -m 268435456 -e "$src"
	assert_ok '.stdout == "false\tscript:1: stack overflow\n"'
	run lua5.4 -e "$src"
	assert_output $'false\t(command line):1: stack overflow'
}

@test "corpus: removed functions are nil in box-run, os is UTC, arg[0] is -" {
	TZ=America/New_York run --separate-stderr box-run -e '
		return {load == nil, loadfile == nil, dofile == nil, require == nil,
			collectgarbage == nil, io == nil, package == nil, debug == nil,
			string.dump == nil, os.exit == nil, os.getenv == nil, os.remove == nil,
			os.date("%H", 0), arg[0]}'
	assert_ok '.result == [true, true, true, true, true, true, true, true, true, true, true, true, "00", "-"]'
}
