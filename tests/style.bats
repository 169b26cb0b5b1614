#!/usr/bin/env bats
# How the code reads (STYLE.md), checked where a rule can be: no function in lib/ or cmd/
# over 100 lines without a comment saying why.

setup() {
	SRC=${BOX_SRCDIR:-$BATS_TEST_DIRNAME/..}
}

@test "no function in lib/ or cmd/ is over 100 lines without a comment saying why" {
	run sh "$SRC/build-aux/long-functions.sh" "$SRC"/lib/*.c "$SRC"/cmd/*.c
	[ "$status" -eq 0 ] || { echo "over 100 lines, no 'long because' comment:" >&2; echo "$output" >&2; false; }
	[ -z "$output" ]
}

@test "the long-function check finds a long function and accepts its reason" {
	f=$BATS_TEST_TMPDIR/long.c
	{ echo 'static int f(int a,'; echo '		 int b)'; echo '{'
	  for i in $(seq 101); do echo '	a++;'; done; echo '	return a;'; echo '}'; } >"$f"
	run sh "$SRC/build-aux/long-functions.sh" "$f"
	[ "$status" -eq 1 ]
	[ "$output" = "$f:1:f:102" ]
	{ echo '/* Long because it must be. */'; cat "$f"; } >"$f.2" && mv "$f.2" "$f"
	run sh "$SRC/build-aux/long-functions.sh" "$f"
	[ "$status" -eq 0 ]
	# 100 lines is not long
	{ echo 'int g(void)'; echo '{'; for i in $(seq 100); do echo '	x();'; done; echo '}'; } >"$f"
	run sh "$SRC/build-aux/long-functions.sh" "$f"
	[ "$status" -eq 0 ]
}
