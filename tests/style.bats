#!/usr/bin/env bats
# How the code reads (STYLE.md), checked where a rule can be: no function in lib/ or cmd/
# over 100 lines without a comment saying why; lib/'s folders include only the layers below
# them (build-aux/include-graph.sh).

load helpers

setup() {
	SRC=${BOX_SRCDIR:-$BATS_TEST_DIRNAME/..}
}

@test "no function in lib/ or cmd/ is over 100 lines without a comment saying why" {
	run sh "$SRC/build-aux/long-functions.sh" $(find "$SRC/lib" "$SRC/cmd" -name '*.c' | sort)
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

@test "lib/ keeps its layers: core < net < artifact < tools < package | run | sandbox < mcp" {
	run sh "$SRC/build-aux/include-graph.sh" "$SRC"
	[ "$status" -eq 0 ] || { echo "$output" >&2; false; }
	[ -z "$output" ]
	# every source file of lib/ is in a folder (none at the top, where no rank applies)
	[ -z "$(find "$SRC/lib" -maxdepth 1 -name '*.[ch]')" ]
}

@test "the include check finds each kind of wrong include" {
	t=$BATS_TEST_TMPDIR/tree
	mkdir -p "$t"
	cp -r "$SRC/lib" "$SRC/cmd" "$t/"
	chmod -R u+w "$t"
	run sh "$SRC/build-aux/include-graph.sh" "$t"
	[ "$status" -eq 0 ]
	# upwards, sideways between run and sandbox, into cmd/, an unknown header, a stray folder
	echo '#include "sandbox.h"' >>"$t/lib/core/buf.c"
	echo '#include "run.h"' >>"$t/lib/sandbox/sbexec.c"
	echo '#include "sandbox.h"' >>"$t/lib/package/pull.c"
	echo '#include "mcp.h"' >>"$t/lib/sandbox/local/nsbox.c"
	echo '#include "cli.h"' >>"$t/lib/net/http.c"
	echo '#include "nosuch.h"' >>"$t/lib/tools/tools.c"
	mkdir "$t/lib/extra" && echo '#include "err.h"' >"$t/lib/extra/x.c"
	run sh "$SRC/build-aux/include-graph.sh" "$t"
	[ "$status" -eq 1 ]
	assert_line --partial 'lib/core/buf.c:'
	assert_line --partial 'lib/core includes lib/sandbox/sandbox.h'
	assert_line --partial 'lib/sandbox includes lib/run/run.h'
	assert_line --partial 'lib/package includes lib/sandbox/sandbox.h'
	assert_line --partial 'lib/sandbox/local includes lib/mcp/mcp.h'
	assert_line --partial 'includes cmd/cli.h: lib/ never includes cmd/'
	assert_line --partial 'includes nosuch.h, which is no header of lib/'
	assert_line --partial 'lib/extra/x.c:1: lib/extra is not one of the folders'
	[ "${#lines[@]}" -eq 7 ]
	# within a subsystem both ways is fine: the state machine names the local provider
	cp -r "$SRC/lib" "$t/ok" && chmod -R u+w "$t/ok"
	mkdir -p "$t/ok2" && mv "$t/ok" "$t/ok2/lib"
	echo '#include "nsbox.h"' >>"$t/ok2/lib/sandbox/sbexec.c"
	echo '#include "sbexec.h"' >>"$t/ok2/lib/sandbox/local/cgroup.c"
	run sh "$SRC/build-aux/include-graph.sh" "$t/ok2"
	[ "$status" -eq 0 ]
}
