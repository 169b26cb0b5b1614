#!/usr/bin/env bats
# bash completion of box-run offers the flags box-run --help lists

setup() {
	source "$BOX_SRCDIR/share/completion/box-run"
}

complete_words() {
	COMP_WORDS=("$@")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	_box_run
	printf '%s\n' "${COMPREPLY[@]}"
}

@test "completion offers --timeout-ms and --max-timeout-ms for --t and --max-t" {
	run complete_words box-run --timeout
	[ "$status" -eq 0 ]
	[ "$output" = "--timeout-ms" ]
	run complete_words box-run --max-t
	[ "$output" = "--max-timeout-ms" ]
}

@test "completion offers every flag of --help and no other" {
	want=$(box-run --help | grep -oE -- '--[a-z][a-z-]*' | sort -u)
	run complete_words box-run --
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | sort -u)" = "$want" ]
}

@test "completion offers directories after --workspace" {
	mkdir -p "$BATS_TEST_TMPDIR/wsdir"
	cd "$BATS_TEST_TMPDIR"
	touch afile
	run complete_words box-run --workspace ws
	[ "$output" = "wsdir" ]
}

# ---- box-sandbox

complete_sb() {
	source "$BOX_SRCDIR/share/completion/box-sandbox"
	COMP_WORDS=("$@")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	_box_sandbox
	printf '%s\n' "${COMPREPLY[@]}"
}

# the operation names of box_sandbox_ops in lib/sandbox/sandbox.c
table_ops() {
	sed -n '/^const struct box_sandbox_op box_sandbox_ops\[\] = {/,/^};/p' \
		"$BOX_SRCDIR/lib/sandbox/sandbox.c" | grep -oE '\.name = "[a-z-]+"' | cut -d'"' -f2
}

@test "box-sandbox completion offers the operations of the operation table, and only those" {
	want=$(table_ops | sort)
	[ "$(wc -l <<<"$want")" -ge 12 ]
	run complete_sb box-sandbox ''
	[ "$status" -eq 0 ]
	[ "$(printf '%s\n' "$output" | sort)" = "$want" ]
	run complete_sb box-sandbox sn
	[ "$output" = "snapshot" ]
	run complete_sb box-sandbox --provider x re
	[ "$(printf '%s\n' "$output" | sort | paste -sd' ')" = "read restore resume" ]
}

@test "box-sandbox completion offers every flag of --help, and commands after --" {
	want=$( (box-sandbox --help | sed -n '/^options/,$p' | grep -E '^  +-' |
		grep -oE -- '--[a-z][a-z0-9-]*'; echo --) | sort -u)
	run complete_sb box-sandbox exec s1 --
	[ "$(printf '%s\n' "$output" | sort -u)" = "$want" ]
	run complete_sb box-sandbox exec s1 --timeout-m
	[ "$output" = "--timeout-ms" ]
	run complete_sb box-sandbox exec s1 -- bas
	printf '%s\n' "$output" | grep -qx bash
}

@test "box-sandbox completion offers the sessions after an operation that takes one" {
	export BOX_STATE_DIR=$BATS_TEST_TMPDIR/state HOME=$BATS_TEST_TMPDIR/home
	mkdir -p "$BATS_TEST_TMPDIR/bin" "$HOME"
	cp "$BOX_SRCDIR/tests/fixtures/fake-provider" "$BATS_TEST_TMPDIR/bin/box-provider-fake"
	chmod 755 "$BATS_TEST_TMPDIR/bin/box-provider-fake"
	PATH=$BATS_TEST_TMPDIR/bin:$PATH
	box-sandbox create --provider fake --session alpha >/dev/null
	box-sandbox create --provider fake --session beta >/dev/null
	run complete_sb box-sandbox status ''
	[ "$(printf '%s\n' "$output" | sort | paste -sd' ')" = "alpha beta" ]
	run complete_sb box-sandbox restore al
	[ "$output" = "alpha" ]
	run complete_sb box-sandbox exec --from b
	[ "$output" = "beta" ]
	# list takes no session, and a session is not offered twice
	run complete_sb box-sandbox list ''
	[ -z "$output" ]
	run complete_sb box-sandbox status alpha ''
	[ -z "$output" ]
}
