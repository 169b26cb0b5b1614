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
