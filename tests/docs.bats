#!/usr/bin/env bats
# The documentation says what the code does: man/box-X.1 against `box-X --help`, `--version`
# and the JSON Schemas, for every binary of BINS; man/box.7 against the error codes of
# lib/core/err.c and the binaries of Makefile.am; box.json(5), box.lock(5) and box-pack(1) against
# the members lib/ accepts; the README against configure.ac and .ci/run. Every check
# compares text extracted from both sides, so a flag, member, code or version changed on one
# side only fails here.

load helpers

# the binaries whose man page, --help and schemas must agree
BINS="box-run box-pack box-pull box-lock box-sandbox"

setup() {
	SRC=${BOX_SRCDIR:-$BATS_TEST_DIRNAME/..}
	MAN1=$SRC/man/box-run.1
	MAN7=$SRC/man/box.7
	MAN5="$SRC/man/box.json.5 $SRC/man/box.lock.5"
}

# man_text: man source on stdin as plain text: font escapes dropped, \- as -, \e as \.
man_text() {
	sed -e 's/\\f[BIRP]//g' -e 's/\\f(..//g' -e 's/\\-/-/g' -e 's/\\&//g' -e 's/\\e/\\/g' \
		-e 's/\\(bu/*/g'
}

# man_section FILE NAME: the lines of section NAME (from ".SH NAME" to the next .SH), as text.
man_section() {
	awk -v name="$2" '
		/^\.SH / { s = $0; sub(/^\.SH +/, "", s); gsub(/"/, "", s); on = (s == name); next }
		on' "$1" | man_text
}

# help_usage BIN: the usage lines of BIN --help, without "usage:" and the indentation.
help_usage() {
	"$1" --help | sed -n '1,/^$/p' | sed -e '/^$/d' -e 's/^usage://' -e 's/^ *//'
}

# help_flags BIN: every flag that BIN --help lists in its options part, one per line.
help_flags() {
	"$1" --help | sed -n '/^options/,$p' | grep -E '^  +-' |
		grep -oE -- '(^|[ ,])--?[a-z][a-z0-9-]*' | sed 's/^[ ,]*//'
}

# c_fields FILE ARRAY: the member names of the struct box_field table ARRAY in FILE.
c_fields() {
	sed -n "/^static const struct box_field $2\[\] = {/,/^};/p" "$1" |
		grep -oE '(\.name = |\{ )"[a-z_]+"' | sed 's/.*"\(.*\)"/\1/'
}

# word_in TEXT WORD: WORD appears in TEXT, not as part of a longer flag or name.
word_in() {
	grep -qE -- "(^|[^A-Za-z0-9_-])$2([^A-Za-z0-9_-]|\$)" <<<"$1"
}

@test "the --help usage lines of each binary are the SYNOPSIS of its man page, line for line" {
	local bin man synopsis usage bad=""
	for bin in $BINS; do
		man=$SRC/man/$bin.1
		synopsis=$(man_section "$man" SYNOPSIS | grep -v '^\.')
		usage=$(help_usage "$bin")
		[ "$(wc -l <<<"$usage")" -ge 2 ] || bad="$bin(usage lines)"
		[ -n "$synopsis" ] || bad="$bad $bin(no SYNOPSIS)"
		if [ "$synopsis" != "$usage" ]; then
			diff <(echo "$synopsis") <(echo "$usage") >&2 || true
			bad="$bad $bin"
		fi
	done
	[ "$(help_usage box-run | wc -l)" -eq 3 ]
	[ "$(help_usage box-lock | wc -l)" -eq 6 ]
	[ -z "$bad" ] || { echo "SYNOPSIS differs:$bad" >&2; false; }
}

@test "each SYNOPSIS renders as the usage lines (when groff is installed)" {
	command -v groff >/dev/null || skip "groff is not installed"
	local bin rendered line bad=""
	for bin in $BINS; do
		rendered=$(groff -t -man -Tascii -P-cbou "$SRC/man/$bin.1" 2>/dev/null |
			sed -n '/^SYNOPSIS/,/^[A-Z]/p' | sed 's/^ *//')
		while IFS= read -r line; do
			grep -qxF -- "$line" <<<"$rendered" || bad="$bad $bin: $line;"
		done < <(help_usage "$bin")
	done
	[ -z "$bad" ] || { echo "not rendered:$bad" >&2; false; }
}

@test "every flag of each --help is described in OPTIONS of its man page" {
	local bin options flags flag missing=""
	for bin in $BINS; do
		options=$(man_section "$SRC/man/$bin.1" OPTIONS)
		flags=$(help_flags "$bin")
		# the list itself must be real: the fixed flags are always there
		for flag in --json --describe --help --version; do
			grep -qxF -- "$flag" <<<"$flags" || missing="$missing $bin:$flag(help)"
		done
		for flag in $flags; do
			word_in "$options" "$flag" || missing="$missing $bin:$flag"
		done
	done
	# the flags of every request member and the fixed ones
	[ "$(help_flags box-run | wc -l)" -ge 20 ]
	for flag in --timeout-ms --no-events -e -w; do
		help_flags box-run | grep -qxF -- "$flag"
	done
	for bin in box-pack box-pull box-lock; do
		help_flags "$bin" | grep -qxF -- --registry
	done
	help_flags box-pull | grep -qxF -- --no-frozen
	help_flags box-lock | grep -qxF -- --manifest
	[ -z "$missing" ] || { echo "not in OPTIONS:$missing" >&2; false; }
}

@test "every flag that OPTIONS of a man page describes is a flag of its --help" {
	local bin tags flags flag stale=""
	for bin in $BINS; do
		# the tag line of each .TP item
		tags=$(awk '/^\.SH /{on = ($0 ~ /^\.SH OPTIONS/)} on && prev == ".TP" {print} {prev = $0}' \
			"$SRC/man/$bin.1" | man_text | grep -oE -- '(^|[ ,])--?[a-z][a-z0-9-]*' |
			sed 's/^[ ,]*//')
		[ -n "$tags" ] || stale="$stale $bin(no tags)"
		flags=$(help_flags "$bin")
		for flag in $tags; do
			# -h is the short form of --help that cli.c accepts; checked below
			[ "$flag" = -h ] && continue
			grep -qxF -- "$flag" <<<"$flags" || stale="$stale $bin:$flag"
		done
		[ "$("$bin" -h)" = "$("$bin" --help)" ] || stale="$stale $bin:-h"
	done
	[ -z "$stale" ] || { echo "in OPTIONS but not in --help:$stale" >&2; false; }
}

@test "every request member of each schema is a flag and a row of the request table" {
	local bin schema table members m def row missing=""
	for bin in $BINS; do
		schema=$SRC/share/schema/$bin.request.json
		# rows "member|type|default" of the table in JSON
		table=$(man_section "$SRC/man/$bin.1" JSON | sed -n '/^\.TS/,/^\.TE/p' | grep '|' |
			grep -v '^tab(')
		members=$(jq -r '.properties | keys[]' "$schema")
		[ "$(wc -l <<<"$members")" -ge 3 ] || missing="$missing $bin(members)"
		for m in $members; do
			row=$(grep -E "^$m\|" <<<"$table") || { missing="$missing $bin:$m"; continue; }
			# a default in the schema is the start of the default column
			def=$(jq -r --arg m "$m" '.properties[$m].default // empty' "$schema")
			if [ -n "$def" ] && [[ "$(cut -d'|' -f3 <<<"$row")" != "$def"* ]]; then
				missing="$missing $bin:$m(default $def: $row)"
			fi
			help_flags "$bin" | grep -qxF -- "--${m//_/-}" ||
				missing="$missing $bin:--${m//_/-}(flag)"
		done
		[ "$(wc -l <<<"$table")" -eq $(($(wc -l <<<"$members") + 1)) ] ||
			missing="$missing $bin(rows: $(wc -l <<<"$table"))"
	done
	[ "$(jq -r '.properties | keys[]' "$SRC/share/schema/box-run.request.json" | wc -l)" -ge 10 ]
	[ -z "$missing" ] || { echo "missing:$missing" >&2; false; }
}

@test "every result member of each schema, nested ones too, is in the JSON section" {
	local bin schema json members m missing=""
	for bin in $BINS; do
		schema=$SRC/share/schema/$bin.result.json
		json=$(man_section "$SRC/man/$bin.1" JSON)
		# the keys of every "properties" object but those of the shared error object
		members=$(jq -r 'del(.["$defs"]) | [.. | objects | .properties? // empty | keys[]] |
			unique[]' "$schema")
		[ "$(wc -l <<<"$members")" -ge 5 ] || missing="$missing $bin(members)"
		for m in $members; do
			word_in "$json" "$m" || missing="$missing $bin:$m"
		done
	done
	[ "$(jq -r '(.properties | keys[]), (.properties.stats.properties | keys[])' \
		"$SRC/share/schema/box-run.result.json" | wc -l)" -ge 14 ]
	[ -z "$missing" ] || { echo "missing:$missing" >&2; false; }
}

@test "each --version and every man page carry the version of configure.ac" {
	local v bin page bad=""
	v=$(sed -n 's/^AC_INIT(\[box\], *\[\([^]]*\)\].*/\1/p' "$SRC/configure.ac")
	[ -n "$v" ]
	for bin in $BINS; do
		run "$bin" --version
		[ "$status" -eq 0 ] && [ "$output" = "$bin (box) $v" ] || bad="$bad $bin"
	done
	for page in "$SRC"/man/*.[157]; do
		grep -qE "^\.TH .*\"box $v\"" "$page" || bad="$bad $page"
	done
	[ "$(ls "$SRC"/man/*.[157] | wc -l)" -ge 7 ]
	[ -z "$bad" ] || { echo "wrong version:$bad" >&2; false; }
}

@test "box(7) and the README present every installed binary as available" {
	local progs p bad=""
	# bin_PROGRAMS = ... and the bin_PROGRAMS += ... lines added after it
	progs=$(sed -n 's/^bin_PROGRAMS *+\{0,1\}= *//p' "$SRC/Makefile.am")
	[ "$(wc -w <<<"$progs")" -ge 5 ]
	for p in $progs; do
		man_text <"$MAN7" | grep -qxF ".BR $p (1)" || bad="$bad box.7:$p"
		[ -f "$SRC/man/$p.1" ] || bad="$bad man/$p.1"
		grep -qE "^    $p +available" "$SRC/README" || bad="$bad README:$p"
		grep -qE "man/$p\.1" "$SRC/Makefile.am" || bad="$bad dist_man_MANS:$p"
	done
	[ -z "$bad" ] || { echo "not presented:$bad" >&2; false; }
}

@test "box.json(5), box.lock(5) and box-pack(1) describe every member lib/ accepts" {
	local m members missing=""
	check_members() { # FILE ARRAY PAGE
		members=$(c_fields "$SRC/lib/$1" "$2")
		[ -n "$members" ] || { missing="$missing $1:$2(none)"; return; }
		for m in $members; do
			grep -qxF ".B $m" "$SRC/man/$3" || missing="$missing $3:$m"
		done
	}
	check_members artifact/lockfile.c lock_fields box.lock.5
	check_members artifact/lockfile.c entry_fields box.lock.5
	check_members artifact/lockfile.c manifest_fields box.json.5
	check_members artifact/artifact.c fields box-pack.1
	[ "$(c_fields "$SRC/lib/artifact/lockfile.c" entry_fields | wc -l)" -eq 6 ]
	[ "$(c_fields "$SRC/lib/artifact/artifact.c" fields | wc -l)" -eq 6 ]
	[ -z "$missing" ] || { echo "not described:$missing" >&2; false; }
}

@test "EXIT STATUS of box(7) gives every error code of lib/core/err.c its exit status" {
	local table codes name status missing=""
	table=$(man_section "$MAN7" "EXIT STATUS" | sed -n '/^\.TS/,/^\.TE/p')
	codes=$(sed -n 's/^[[:space:]]*\[BOX_E_[A-Z_]*\] = { "\([a-z_]*\)", \([0-9]*\) },.*/\1 \2/p' \
		"$SRC/lib/core/err.c")
	[ "$(wc -l <<<"$codes")" -eq 14 ]
	while read -r name status; do
		grep -E "^$status\|" <<<"$table" | grep -qw -- "$name" ||
			missing="$missing $name=$status"
	done <<<"$codes"
	[ -z "$missing" ] || { echo "not in the table:$missing" >&2; false; }
}

@test "every member of the error object (lib/core/err.c) is described in box(7) ERRORS" {
	local errors members m missing=""
	errors=$(man_section "$MAN7" ERRORS)
	members=$(sed -n '/^cJSON \*box_err_to_json/,/^}/p' "$SRC/lib/core/err.c" |
		grep -oE 'ToObject\(o, "[a-z_]+"' | sed 's/.*"\(.*\)"/\1/' | sort -u)
	[ "$(wc -l <<<"$members")" -eq 7 ]
	for m in $members; do
		grep -qxF ".B $m" < <(sed -n '/^\.SH ERRORS/,/^\.SH /p' "$MAN7") ||
			missing="$missing $m"
		word_in "$errors" "$m" || missing="$missing $m"
	done
	[ -z "$missing" ] || { echo "not described:$missing" >&2; false; }
}

@test "the README quick start installs every package that .ci/run installs" {
	local cmd pkgs p missing=""
	[ -f "$SRC/.ci/run" ] || skip ".ci/run is not in this tree"
	cmd=$(sed -n '/^Quick start/,/^What box is/p' "$SRC/README" | grep 'apt-get install')
	[ -n "$cmd" ]
	pkgs=$(sed -n '/^pkgs="/,/"/p' "$SRC/.ci/run" | sed -e 's/^pkgs="//' -e 's/"$//')
	[ -n "$pkgs" ]
	for p in $pkgs; do
		word_in "$cmd" "$p" || missing="$missing $p"
	done
	[ -z "$missing" ] || { echo "not in the README:$missing" >&2; false; }
}

@test "the man pages format without warnings (when groff is installed)" {
	command -v groff >/dev/null || skip "groff is not installed"
	run groff -t -man -Tutf8 -ww -z "$SRC"/man/*.[157]
	assert_success
	assert_output ""
}

@test "mandoc finds no warning in the man pages (when mandoc is installed)" {
	command -v mandoc >/dev/null || skip "mandoc is not installed"
	run mandoc -T lint -W warning "$SRC"/man/*.[157]
	assert_success
	assert_output ""
}

@test "the README's artifact walk-through runs as written, on share/examples" {
	box_setup
	ln -s "$SRC/share" share
	for b in box-pack box-lock box-pull box-run; do
		ln -s "$BOX_BUILDDIR/$b" "$b"
	done
	# the "    $ " lines of the walk-through, each box-* command's JSON checked for ok
	awk '/^A tool, a skill or a Lua library/ { on = 1 } /^box-lock writes complete pins/ { on = 0 }
		on && /^    \$ / { sub(/^    \$ /, ""); print }' "$SRC/README" >steps
	assert_equal "$(wc -l <steps)" 10
	{
		echo 'set -e'
		n=0
		while IFS= read -r cmd; do
			n=$((n + 1))
			case $cmd in
			./box-*) printf '%s >out.%d\njq -e ".ok == true" out.%d >/dev/null\n' "$cmd" $n $n ;;
			*) printf '%s\n' "$cmd" ;;
			esac
		done <steps
	} >walk.sh
	run --separate-stderr bash walk.sh
	assert_success
	jqe '.result.greeting == "hello CI"' "$(cat out.9)"
	jqe '.result == "CI"' "$(cat out.10)"
	jqe '(.artifacts | map(.name) == ["greet", "strutil"]) and .lock.changed == false' \
		"$(cat out.7)"
	jqe '.problems == [] and .unpinned == []' "$(cat out.8)"
	[ -d tmp-box/store/sha256 ]
}

# sb_ops [may_create]: the operation names of box_sandbox_ops in lib/sandbox/sandbox.c, in order; with
# an argument only those whose may_create is 1.
sb_ops() {
	sed -n '/^const struct box_sandbox_op box_sandbox_ops\[\] = {/,/^};/p' "$SRC/lib/sandbox/sandbox.c" |
		grep -E '\.name = "[a-z-]+"' | { if [ -n "${1:-}" ]; then grep '\.may_create = 1'; else cat; fi; } |
		grep -oE '\.name = "[a-z-]+"' | cut -d'"' -f2
}

@test "box-sandbox(1) OPERATIONS, its ensure-running rules and --op name the operation table" {
	local man=$SRC/man/box-sandbox.1 ops documented creating want
	ops=$(sb_ops)
	[ "$(wc -l <<<"$ops")" -ge 12 ]
	documented=$(man_section "$man" OPERATIONS | grep -A1 '^\.TP' | grep -E '^\.BR? ' |
		sed 's/\\-/-/g' | grep -oE '[a-z][a-z-]*' | grep -vxE 'B|BR' | sort)
	[ "$documented" = "$(sort <<<"$ops")" ] || {
		diff <(echo "$documented") <(sort <<<"$ops") >&2; false; }
	# "no record: exec, read, ... create the session": the operations that may create
	creating=$(man_section "$man" DESCRIPTION | sed -n '/^no record:/,/create the session/p' |
		grep -E '^\.BR? ' | grep -oE '[a-z]+' | grep -vxE 'B|BR' | sort)
	want=$(sb_ops may_create | grep -vx create | sort)
	[ -n "$want" ] && [ "$creating" = "$want" ] || {
		diff <(echo "$creating") <(echo "$want") >&2; false; }
	# the --op help lists them in the table's order
	box-sandbox --help | grep -qF "(the first word: $(paste -sd' ' <<<"$ops"))"
}
