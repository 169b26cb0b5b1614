#!/usr/bin/env bats
# The documentation says what the code does: man/box-run.1 against `box-run --help`,
# `--version` and the JSON Schemas; man/box.7 against the error codes of lib/err.c; the
# README against configure.ac and .ci/run. Every check compares text extracted from both
# sides, so a flag, member, code or version changed on one side only fails here.

load helpers

setup() {
	SRC=${BOX_SRCDIR:-$BATS_TEST_DIRNAME/..}
	MAN1=$SRC/man/box-run.1
	MAN7=$SRC/man/box.7
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

# help_usage: the usage lines of --help, without "usage:" and the indentation.
help_usage() {
	box-run --help | sed -n '1,/^$/p' | sed -e '/^$/d' -e 's/^usage://' -e 's/^ *//'
}

# help_flags: every flag that --help lists in its options part, one per line.
help_flags() {
	box-run --help | sed -n '/^options/,$p' | grep -E '^  +-' |
		grep -oE -- '(^|[ ,])--?[a-z][a-z0-9-]*' | sed 's/^[ ,]*//'
}

# word_in TEXT WORD: WORD appears in TEXT, not as part of a longer flag or name.
word_in() {
	grep -qE -- "(^|[^A-Za-z0-9_-])$2([^A-Za-z0-9_-]|\$)" <<<"$1"
}

@test "box-run --help usage lines are the SYNOPSIS of box-run(1), line for line" {
	local synopsis usage
	synopsis=$(man_section "$MAN1" SYNOPSIS | grep -v '^\.')
	usage=$(help_usage)
	[ "$(wc -l <<<"$usage")" -eq 3 ]
	[ -n "$synopsis" ]
	if [ "$synopsis" != "$usage" ]; then
		diff <(echo "$synopsis") <(echo "$usage") >&2 || true
		false
	fi
}

@test "the SYNOPSIS renders as the usage lines (when groff is installed)" {
	command -v groff >/dev/null || skip "groff is not installed"
	local rendered line
	rendered=$(groff -t -man -Tascii -P-cbou "$MAN1" 2>/dev/null |
		sed -n '/^SYNOPSIS/,/^[A-Z]/p' | sed 's/^ *//')
	while IFS= read -r line; do
		grep -qxF -- "$line" <<<"$rendered" || {
			echo "not rendered: $line" >&2
			false
		}
	done < <(help_usage)
}

@test "every flag of box-run --help is described in OPTIONS of box-run(1)" {
	local options flags flag missing=""
	options=$(man_section "$MAN1" OPTIONS)
	flags=$(help_flags)
	# the list itself must be real: the flags of every request member and the fixed ones
	[ "$(wc -l <<<"$flags")" -ge 20 ]
	for flag in --timeout-ms --no-events --json --describe --help --version -e -w; do
		grep -qxF -- "$flag" <<<"$flags"
	done
	for flag in $flags; do
		word_in "$options" "$flag" || missing="$missing $flag"
	done
	[ -z "$missing" ] || { echo "not in OPTIONS:$missing" >&2; false; }
}

@test "every flag that OPTIONS of box-run(1) describes is a flag of box-run --help" {
	local tags flags flag stale=""
	# the tag line of each .TP item
	tags=$(awk '/^\.SH /{on = ($0 ~ /^\.SH OPTIONS/)} on && prev == ".TP" {print} {prev = $0}' \
		"$MAN1" | man_text | grep -oE -- '(^|[ ,])--?[a-z][a-z0-9-]*' | sed 's/^[ ,]*//')
	[ -n "$tags" ]
	flags=$(help_flags)
	for flag in $tags; do
		# -h is the short form of --help that cli.c accepts; checked below
		[ "$flag" = -h ] && continue
		grep -qxF -- "$flag" <<<"$flags" || stale="$stale $flag"
	done
	[ -z "$stale" ] || { echo "in OPTIONS but not in --help:$stale" >&2; false; }
	[ "$(box-run -h)" = "$(box-run --help)" ]
}

@test "every request member of the schema is a flag and a row of the box-run(1) request table" {
	local schema=$SRC/share/schema/box-run.request.json table members m def row missing=""
	# rows "member|type|default" of the table in JSON
	table=$(man_section "$MAN1" JSON | sed -n '/^\.TS/,/^\.TE/p' | grep '|' | grep -v '^tab(')
	members=$(jq -r '.properties | keys[]' "$schema")
	[ "$(wc -l <<<"$members")" -ge 10 ]
	for m in $members; do
		row=$(grep -E "^$m\|" <<<"$table") || { missing="$missing $m"; continue; }
		# a default in the schema is the start of the default column
		def=$(jq -r --arg m "$m" '.properties[$m].default // empty' "$schema")
		if [ -n "$def" ] && [[ "$(cut -d'|' -f3 <<<"$row")" != "$def"* ]]; then
			missing="$missing $m(default $def: $row)"
		fi
		help_flags | grep -qxF -- "--${m//_/-}" || missing="$missing --${m//_/-}(flag)"
	done
	[ "$(wc -l <<<"$table")" -eq $(($(wc -l <<<"$members") + 1)) ] ||
		missing="$missing (rows: $(wc -l <<<"$table"))"
	[ -z "$missing" ] || { echo "missing:$missing" >&2; false; }
}

@test "every result member of the schema is in box-run(1) JSON" {
	local schema=$SRC/share/schema/box-run.result.json json members m missing=""
	json=$(man_section "$MAN1" JSON)
	members=$(jq -r '(.properties | keys[]), (.properties.stats.properties | keys[])' "$schema")
	[ "$(wc -l <<<"$members")" -ge 14 ]
	for m in $members; do
		word_in "$json" "$m" || missing="$missing $m"
	done
	[ -z "$missing" ] || { echo "missing:$missing" >&2; false; }
}

@test "box-run --version and both man pages carry the version of configure.ac" {
	local v
	v=$(sed -n 's/^AC_INIT(\[box\], *\[\([^]]*\)\].*/\1/p' "$SRC/configure.ac")
	[ -n "$v" ]
	run box-run --version
	assert_success
	assert_output "box-run (box) $v"
	grep -qE "^\.TH .*\"box $v\"" "$MAN1"
	grep -qE "^\.TH .*\"box $v\"" "$MAN7"
}

@test "EXIT STATUS of box(7) gives every error code of lib/err.c its exit status" {
	local table codes name status missing=""
	table=$(man_section "$MAN7" "EXIT STATUS" | sed -n '/^\.TS/,/^\.TE/p')
	codes=$(sed -n 's/^[[:space:]]*\[BOX_E_[A-Z_]*\] = { "\([a-z_]*\)", \([0-9]*\) },.*/\1 \2/p' \
		"$SRC/lib/err.c")
	[ "$(wc -l <<<"$codes")" -eq 13 ]
	while read -r name status; do
		grep -E "^$status\|" <<<"$table" | grep -qw -- "$name" ||
			missing="$missing $name=$status"
	done <<<"$codes"
	[ -z "$missing" ] || { echo "not in the table:$missing" >&2; false; }
}

@test "every member of the error object (lib/err.c) is described in box(7) ERRORS" {
	local errors members m missing=""
	errors=$(man_section "$MAN7" ERRORS)
	members=$(sed -n '/^cJSON \*box_err_to_json/,/^}/p' "$SRC/lib/err.c" |
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
	run groff -t -man -Tutf8 -ww -z "$MAN1" "$MAN7"
	assert_success
	assert_output ""
}
