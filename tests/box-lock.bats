#!/usr/bin/env bats
# box-lock: box.json ranges resolved by semver against a local OCI layout's tags into box.lock;
# verify (the store against the lock) and check --frozen (the lock against box.json).

load helpers
bats_require_minimum_version 1.5.0

# One registry for the file, copied into each test: lib in several versions (numeric order
# differs from byte order, and a prerelease), util in two.
setup_file() {
	local tpl=$BATS_FILE_TMPDIR/tpl v d
	mkdir -p "$tpl"
	for v in lib@1.0.0 lib@1.2.0 lib@1.10.0 lib@2.0.0 lib@2.1.0-rc.1 util@1.0.0 util@1.1.0; do
		d=$tpl/src/$v
		mkdir -p "$d/lib"
		echo "return '$v'" >"$d/lib/init.lua"
		printf '{"name": "%s", "version": "%s", "kind": "lua", "entry": "lib/init.lua"}\n' \
			"${v%@*}" "${v#*@}" >"$d/box-artifact.json"
		BOX_HOME=$tpl box-pack "$d" >/dev/null || return 1
	done
}

setup() {
	box_setup
	unset BOX_REGISTRY
	export BOX_HOME=$T/home
	export BOX_PROG=box-lock
	REG=$BOX_HOME/registry
	STORE=$BOX_HOME/store
	mkdir -p "$BOX_HOME"
	cp -a "$BATS_FILE_TMPDIR/tpl/registry" "$REG"
}

# digest NAME VERSION: what the registry tags NAME:VERSION with.
digest() {
	jq -r --arg r "$1:$2" '.manifests[] |
		select(.annotations["org.opencontainers.image.ref.name"] == $r) | .digest' \
		"$REG/index.json"
}

# want JSON-OBJECT: box.json asking for those artifacts.
want() {
	printf '{"artifacts": %s}\n' "$1" >box.json
}

# pins: NAME@VERSION of every pin in box.lock, space-separated.
pins() {
	jq -r '[.artifacts[] | .name + "@" + .version] | join(" ")' box.lock
}

# assert_done [FILTER [JQ-ARG...]]: exit 0, one JSON object, ok, no error, stderr empty.
assert_done() {
	assert_equal "$status" 0
	one_json_where ".ok == true and (has(\"error\") | not) and (${1:-true})" "${@:2}"
	assert_equal "$stderr" ""
}

@test "ranges resolve by semver against the tags" {
	declare -A expect=(
		['^1.2.0']=1.10.0 ['~1.2.0']=1.2.0 ['~1']=1.10.0 ['>=1.0.0 <2']=1.10.0
		['>=1.0 <1.10']=1.2.0 ['>1.0.0 <1.2.0']=none ['1.0.0']=1.0.0 ['=1.2.0']=1.2.0
		['1.10']=1.10.0 ['^2']=2.0.0 ['*']=2.0.0 ['>=2.1.0-rc.0']=2.1.0-rc.1
		['2.1.0-rc.1']=2.1.0-rc.1 ['^1.2 || ^2']=2.0.0 ['1.0.0 - 1.2.0']=1.2.0 ['^3']=none
	)
	declare -A tag
	while read -r t d; do tag[$t]=$d; done < <(jq -r '.manifests[] |
		.annotations["org.opencontainers.image.ref.name"] + " " + .digest' "$REG/index.json")
	got=() exp=()
	for r in "${!expect[@]}"; do
		rm -f box.lock
		want "{\"lib\": \"$r\"}"
		run --separate-stderr box-lock
		# exit status, then the version and digest of the result and of box.lock (or the
		# error code), in one jq run
		got+=("$r=$status $(jq -r --slurpfile l <(cat box.lock 2>/dev/null || echo null) \
			'if .ok then "\(.artifacts[0].version) \(.artifacts[0].digest) \($l[0].artifacts[0].version) \($l[0].artifacts[0].digest)"
			else "\(.error.code) \($l[0])" end' <<<"$output")")
		if [ "${expect[$r]}" = none ]; then
			exp+=("$r=6 not_found null")
		else
			d=${tag[lib:${expect[$r]}]}
			exp+=("$r=0 ${expect[$r]} $d ${expect[$r]} $d")
		fi
	done
	assert_equal "$(printf '%s\n' "${got[@]}")" "$(printf '%s\n' "${exp[@]}")"
}

@test "resolve writes box.lock: sorted entries, exact versions, digests, kinds, source" {
	want '{"util": "^1", "lib": "~1.2"}'
	run --separate-stderr box-lock
	assert_done '.lock.path == "box.lock" and .lock.changed == true and
		(.artifacts | map(.name + "@" + .version) == ["lib@1.2.0", "util@1.1.0"]) and
		all(.artifacts[]; .kind == "lua" and .changed == true)'
	jq -e --arg l "$(digest lib 1.2.0)" --arg u "$(digest util 1.1.0)" --arg s "oci:$REG" '
		.lock_version == 1 and (.artifacts | map(del(.tree_digest))) == [
		{"name": "lib", "version": "1.2.0", "digest": $l, "kind": "lua", "source": $s},
		{"name": "util", "version": "1.1.0", "digest": $u, "kind": "lua", "source": $s}] and
		all(.artifacts[]; .tree_digest | test("^sha256:[0-9a-f]{64}$"))' \
		box.lock
	[ "$(tail -c 1 box.lock | od -An -c | tr -d ' ')" = '\n' ]
}

@test "an existing pin the range accepts is kept; update moves it" {
	want '{"lib": "1.2.0"}'
	run --separate-stderr box-lock
	assert_done
	want '{"lib": "^1"}'
	run --separate-stderr box-lock
	assert_done '.artifacts[0].version == "1.2.0" and .artifacts[0].changed == false and
		.lock.changed == false'
	assert_equal "$(pins)" "lib@1.2.0"
	run --separate-stderr box-lock update
	assert_done '.artifacts[0].version == "1.10.0" and .lock.changed == true'
	assert_equal "$(pins)" "lib@1.10.0"
	assert_equal "$(jq -r '.artifacts[0].digest' box.lock)" "$(digest lib 1.10.0)"
	# the result says which pin moved
	one_json_where '.artifacts[0].changed == true'
}

@test "a pin the range no longer accepts moves on resolve" {
	want '{"lib": "1.2.0"}'
	run --separate-stderr box-lock
	assert_done
	want '{"lib": "^2"}'
	run --separate-stderr box-lock
	assert_done '.artifacts[0].version == "2.0.0" and .lock.changed == true'
	assert_equal "$(pins)" "lib@2.0.0"
}

@test "update NAME moves only that pin" {
	want '{"lib": "1.0.0", "util": "1.0.0"}'
	run --separate-stderr box-lock
	assert_done
	want '{"lib": "^1", "util": "^1"}'
	run --separate-stderr box-lock update lib
	assert_done '.lock.changed == true'
	assert_equal "$(pins)" "lib@1.10.0 util@1.0.0"
	run --separate-stderr box-lock update util
	assert_done
	assert_equal "$(pins)" "lib@1.10.0 util@1.1.0"
	# a name box.json does not have: not_found, nothing written
	before=$(sha box.lock)
	run --separate-stderr box-lock update nope
	assert_fail not_found 6
	assert_equal "$(sha box.lock)" "$before"
}

@test "a pinned tag re-packed with --force to another digest: conflict on resolve" {
	printf '{"artifacts": {"lib": ">=1.2.0 <1.10"}}\n' >box.json
	run --separate-stderr box-lock
	assert_done '.artifacts[0].version == "1.2.0"'
	old=$(digest lib 1.2.0)
	lock=$(sha box.lock)
	src=$BATS_FILE_TMPDIR/tpl/src/lib@1.2.0
	cp -a "$src" "$T/lib"
	echo "-- changed" >>"$T/lib/lib/init.lua"
	run box-pack --force "$T/lib"
	assert_success
	new=$(digest lib 1.2.0)
	[ "$new" != "$old" ]

	run --separate-stderr box-lock
	assert_fail conflict 7
	assert_regex "$stderr" "$old"
	assert_equal "$(sha box.lock)" "$lock"
	run --separate-stderr box-lock --frozen
	assert_fail conflict 7
	assert_equal "$(sha box.lock)" "$lock"
	# update accepts the move
	run --separate-stderr box-lock update lib
	assert_done '.artifacts[0].digest == $d' --arg d "$new"
	assert_equal "$(jq -r '.artifacts[0].digest' box.lock)" "$new"
}

@test "an entry removed from box.json disappears from box.lock" {
	want '{"lib": "^1", "util": "^1"}'
	run --separate-stderr box-lock
	assert_done
	assert_equal "$(pins)" "lib@1.10.0 util@1.1.0"
	want '{"util": "^1"}'
	run --separate-stderr box-lock
	assert_done '.lock.changed == true'
	assert_equal "$(pins)" "util@1.1.0"
	want '{}'
	run --separate-stderr box-lock
	assert_done '.artifacts == []'
	jq -e '.lock_version == 1 and .artifacts == []' box.lock
}

@test "nothing is written when nothing changed" {
	want '{"lib": "^1", "util": "~1.0"}'
	run --separate-stderr box-lock
	assert_done '.lock.changed == true'
	touch -d '2001-01-01' box.lock
	before=$(stat -c '%i %y %s' box.lock)
	sum=$(sha box.lock)
	for cmd in resolve "" update; do
		run --separate-stderr box-lock $cmd
		assert_done '.lock.changed == false'
		assert_equal "$(stat -c '%i %y %s' box.lock)" "$before"
	done
	assert_equal "$(sha box.lock)" "$sum"
}

@test "--frozen resolve: a change is a conflict and nothing is written" {
	want '{"lib": "1.0.0"}'
	run --separate-stderr box-lock
	assert_done
	lock=$(sha box.lock)
	run --separate-stderr box-lock --frozen
	assert_done '.lock.changed == false'
	want '{"lib": "^2"}'
	run --separate-stderr box-lock --frozen
	assert_fail conflict 7
	assert_equal "$(sha box.lock)" "$lock"
	rm box.lock
	run --separate-stderr box-lock --frozen
	assert_fail conflict 7
	[ ! -e box.lock ]
}

@test "the registry comes from --registry, else box.json, else BOX_REGISTRY, else the default" {
	mv "$REG" "$T/elsewhere"
	printf '{"registry": "oci:%s", "artifacts": {"lib": "^1"}}\n' "$T/elsewhere" >box.json
	run --separate-stderr box-lock
	assert_done '.artifacts[0].version == "1.10.0"'
	jq -e --arg s "oci:$T/elsewhere" '.artifacts[0].source == $s' box.lock
	rm box.lock
	cp -a "$T/elsewhere" "$T/third"
	run --separate-stderr box-lock --registry "oci:$T/third"
	assert_done
	jq -e --arg s "oci:$T/third" '.artifacts[0].source == $s' box.lock
	lock=$(sha box.lock)
	printf '{"registry": "http://registry.example.com", "artifacts": {"lib": "^1"}}\n' >box.json
	run --separate-stderr box-lock
	assert_fail policy_denied 4
	assert_equal "$(sha box.lock)" "$lock"

	printf '{"artifacts": {"lib": "^1"}}\n' >box.json
	rm box.lock
	run --separate-stderr box-lock --registry "oci:$T/nowhere"
	assert_fail not_found 6
	[ ! -e box.lock ]
	run --separate-stderr env BOX_REGISTRY="oci:$T/third" box-lock
	assert_done
	jq -e --arg s "oci:$T/third" '.artifacts[0].source == $s' box.lock
	rm box.lock
	mv "$T/elsewhere" "$REG"
	run --separate-stderr box-lock
	assert_done
	jq -e --arg s "oci:$REG" '.artifacts[0].source == $s' box.lock
}

# pull_pins: box.lock resolved and every pin pulled into the store.
pull_pins() {
	want '{"lib": "~1.2", "util": "^1"}'
	run --separate-stderr box-lock
	assert_done
	run --separate-stderr box-pull lib util
	assert_equal "$status" 0
	jq -e 'all(.artifacts[]; .tree_digest | test("^sha256:[0-9a-f]{64}$"))' box.lock
	assert_equal "$(pins)" "lib@1.2.0 util@1.1.0"
	LIB=$STORE/sha256/$(jq -r '.artifacts[0].digest[7:]' box.lock)
	UTIL=$STORE/sha256/$(jq -r '.artifacts[1].digest[7:]' box.lock)
	[ -d "$LIB" ] && [ -d "$UTIL" ]
}

@test "verify: ok after a pull" {
	pull_pins
	run --separate-stderr box-lock verify
	assert_done '.problems == []'
	# resolving again keeps the tree digests the pull recorded
	run --separate-stderr box-lock
	assert_done '.lock.changed == false'
	run --separate-stderr box-lock verify
	assert_done '.problems == []'
}

@test "verify: modified after editing a store file (exit 5)" {
	pull_pins
	echo "-- tampered" >>"$LIB/lib/init.lua"
	run --separate-stderr box-lock verify
	d=$(jq -r '.artifacts[0].digest' box.lock)
	rec=$(jq -r '.artifacts[0].tree_digest' box.lock)
	assert_fail integrity_failed 5 '(.problems | length == 1) and .problems[0].name == "lib" and
		.problems[0].problem == "modified" and .problems[0].digest == "'"$d"'" and
		(.problems[0].detail | test("^sha256:[0-9a-f]{64}$")) and
		.problems[0].detail != "'"$rec"'"'
	assert_regex "$stderr" '^box-lock: integrity_failed: .*1 problem'
}

@test "verify: modified for an added file, a removed file, an execute bit" {
	pull_pins
	for change in "touch $LIB/lib/extra.lua" "rm $UTIL/lib/init.lua" "chmod +x $LIB/lib/init.lua"; do
		rm -rf "$T/save" && cp -a "$STORE/sha256" "$T/save"
		$change
		run --separate-stderr box-lock verify
		assert_fail integrity_failed 5 '(.problems | length == 1) and
			.problems[0].problem == "modified"'
		rm -rf "$STORE/sha256" && cp -a "$T/save" "$STORE/sha256"
	done
	run --separate-stderr box-lock verify
	assert_done
}

@test "verify: missing after deleting the entry" {
	pull_pins
	d=$(jq -r '.artifacts[1].digest' box.lock)
	rm -rf "$UTIL"
	run --separate-stderr box-lock verify
	assert_fail integrity_failed 5 '(.problems | length == 1) and
		.problems[0].name == "util" and .problems[0].problem == "missing" and
		.problems[0].digest == "'"$d"'"'
}

@test "verify: a store entry no pin names is information (unpinned), not a problem" {
	pull_pins
	run --separate-stderr box-pull --lock other.lock lib@1.0.0
	assert_equal "$status" 0
	d=$(digest lib 1.0.0)
	run --separate-stderr box-lock verify
	assert_done '.problems == [] and .unpinned == ["'"$d"'"]'
	# against the other lockfile, the two first pulls are the unpinned ones
	run --separate-stderr box-lock verify --lock other.lock
	assert_done '.problems == [] and (.unpinned | length == 2) and
		(.unpinned | index("'"$d"'") | not)'
	# a real problem still fails, and the unpinned entries are still listed beside it
	rm -rf "$UTIL"
	run --separate-stderr box-lock verify
	assert_fail integrity_failed 5 '(.problems | map(.problem) == ["missing"]) and
		.unpinned == ["'"$d"'"]'
}

@test "verify: an empty store and no lockfile is fine; a malformed lockfile is not" {
	run --separate-stderr box-lock verify
	assert_done '.problems == []'
	echo '{"lock_version": 1, "artifacts": [' >box.lock
	run --separate-stderr box-lock verify
	assert_fail invalid_request 2
	echo '{"lock_version": 99, "artifacts": []}' >box.lock
	run --separate-stderr box-lock verify
	assert_fail unsupported 8
}

@test "check --frozen: ok when box.lock satisfies box.json, without the registry" {
	want '{"lib": "^1", "util": "~1.0"}'
	run --separate-stderr box-lock
	assert_done
	rm -rf "$REG"
	run --separate-stderr box-lock check --frozen
	assert_done '.problems == []'
}

@test "check --frozen: missing, out_of_range, extra (exit 7)" {
	want '{"lib": "^1", "util": "~1.0"}'
	run --separate-stderr box-lock
	assert_done
	lock=$(sha box.lock)
	rm -rf "$REG"

	want '{"lib": "^1", "util": "~1.0", "zzz": "^1"}'
	run --separate-stderr box-lock check --frozen
	assert_fail conflict 7 '.problems == [{"name": "zzz", "problem": "missing", "range": "^1"}]'

	want '{"lib": "^2", "util": "~1.0"}'
	run --separate-stderr box-lock check --frozen
	assert_fail conflict 7 '(.problems | length == 1) and .problems[0].name == "lib" and
		.problems[0].problem == "out_of_range" and .problems[0].range == "^2" and
		.problems[0].version == "1.10.0"'

	want '{"lib": "^1"}'
	run --separate-stderr box-lock check --frozen
	assert_fail conflict 7 '(.problems | length == 1) and .problems[0].name == "util" and
		.problems[0].problem == "extra"'

	want '{"aaa": "^1", "lib": "^2"}'
	run --separate-stderr box-lock check --frozen
	assert_fail conflict 7 '(.problems | map(.name + ":" + .problem)) ==
		["aaa:missing", "lib:out_of_range", "util:extra"]'

	# check never writes
	assert_equal "$(sha box.lock)" "$lock"
	# no lockfile at all: everything is missing
	rm box.lock
	want '{"lib": "^1"}'
	run --separate-stderr box-lock check --frozen
	assert_fail conflict 7 '.problems == [{"name": "lib", "problem": "missing", "range": "^1"}]'
	[ ! -e box.lock ]
}

# bad_json TEXT CODE STATUS PATH: box-lock with box.json holding TEXT fails with CODE at PATH
# (a JSON string literal) and writes no lockfile.
bad_json() {
	printf '%s' "$1" >box.json
	run --separate-stderr box-lock
	assert_fail "$2" "$3" ".error.path == $4"
	[ ! -e box.lock ]
}

@test "box.json errors name their path" {
	bad_json '{"artifacts": {"lib": "^1"' invalid_request 2 '"$"'
	bad_json '[]' invalid_request 2 '"$"'
	bad_json '{}' invalid_request 2 '"$.artifacts"'
	bad_json '{"artifacts": ["lib"]}' invalid_request 2 '"$.artifacts"'
	bad_json '{"artifacts": {"lib": "^^1"}}' invalid_request 2 '"$.artifacts[\"lib\"]"'
	bad_json '{"artifacts": {"lib": 1}}' invalid_request 2 '"$.artifacts[\"lib\"]"'
	bad_json '{"artifacts": {"lib": ""}}' invalid_request 2 '"$.artifacts[\"lib\"]"'
	bad_json '{"artifacts": {"Lib": "^1"}}' invalid_request 2 '"$.artifacts[\"Lib\"]"'
	bad_json '{"artifacts": {"a b": "^1"}}' invalid_request 2 '"$.artifacts[\"a b\"]"'
	bad_json '{"registry": 5, "artifacts": {}}' invalid_request 2 '"$.registry"'
	# check reads box.json the same way
	printf '{"artifacts": {"lib": "^^1"}}' >box.json
	run --separate-stderr box-lock check --frozen
	assert_fail invalid_request 2 '.error.path == "$.artifacts[\"lib\"]"'
}

@test "no box.json: not_found; --manifest and --lock name other files" {
	run --separate-stderr box-lock
	assert_fail not_found 6
	[ ! -e box.lock ]
	mkdir sub
	printf '{"artifacts": {"util": "1.0.0"}}' >sub/m.json
	run --separate-stderr box-lock --manifest sub/m.json --lock sub/l.lock
	assert_done '.lock.path == "sub/l.lock"'
	jq -e '.artifacts[0].name == "util" and .artifacts[0].version == "1.0.0"' sub/l.lock
	[ ! -e box.lock ]
}

@test "usage: unknown command, names outside update" {
	want '{"lib": "^1"}'
	run --separate-stderr box-lock frobnicate
	assert_fail usage 2
	run --separate-stderr box-lock resolve lib
	assert_fail usage 2
	[ ! -e box.lock ]
	run --separate-stderr box-lock --json <<<'{"command": "update", "names": ["lib"]}'
	assert_done '.artifacts[0].version == "1.10.0"'
}

@test "--describe, --help, --version" {
	run --separate-stderr box-lock --describe
	assert_equal "$status" 0
	one_json_where '.name == "box-lock" and .input_schema.type == "object" and
		(.input_schema.properties | has("command") and has("frozen"))'
	assert_equal "$stderr" ""
	run --separate-stderr box-lock --help
	assert_equal "$status" 0
	assert_line --index 0 --regexp '^usage: box-lock '
	assert_output --partial 'verify'
	assert_output --partial 'check --frozen'
	assert_equal "$stderr" ""
	run --separate-stderr box-lock --version
	assert_equal "$status" 0
	assert_output --regexp '^box-lock \(box\) [0-9]+\.[0-9]+\.[0-9]+$'
}

@test "box-lock writes complete pins: box-pull --frozen of them changes nothing" {
	want '{"lib": "~1.2", "util": "^1"}'
	run --separate-stderr box-lock
	assert_done
	cp box.lock locked
	# the tree digests are those of the trees a pull extracts
	run --separate-stderr box-pull --frozen lib
	assert_equal "$status" 0
	jqe '.lock.changed == false and .artifacts[0].name == "lib"'
	cmp box.lock locked
	run --separate-stderr box-lock verify
	assert_done '.problems == []'
	# an older lock without tree digests is completed by box-lock, refused by --frozen
	jq '.artifacts |= map(del(.tree_digest))' locked >box.lock
	run --separate-stderr box-lock --frozen
	assert_equal "$status" 7
	run --separate-stderr box-lock
	assert_done '.lock.changed == true'
	cmp box.lock locked
}

@test "box-pull --frozen without names installs exactly what box.lock pins" {
	want '{"lib": "~1.2", "util": "^1"}'
	run --separate-stderr box-lock
	assert_done
	cp box.lock locked
	rm -rf "$STORE"
	# a store entry of another project is left alone
	run --separate-stderr box-pull --lock other.lock lib@1.0.0
	assert_equal "$status" 0
	other=$(digest lib 1.0.0)
	run --separate-stderr env BOX_REGISTRY=oci:/nonexistent box-pull --frozen
	assert_equal "$status" 0
	jqe '(.artifacts | map(.name + "@" + .version) == ["lib@1.2.0", "util@1.1.0"]) and
		.lock.changed == false'
	cmp box.lock locked
	assert_equal "$(ls "$STORE/sha256" | grep -v '\.tree$' | sort)" \
		"$(printf '%s\n' "$(digest lib 1.2.0)" "$(digest util 1.1.0)" "$other" | cut -c8- | sort)"
	run --separate-stderr box-lock verify
	assert_done '.problems == [] and .unpinned == ["'"$other"'"]'
}

@test "box-pull --frozen lists every difference (name, field, locked, found) and writes nothing" {
	want '{"lib": "~1.2", "util": "^1"}'
	run --separate-stderr box-lock
	assert_done
	# box.lock pins lib to another digest than the registry's 1.2.0, and kind skill for util
	jq --arg d "$(digest lib 1.10.0)" '.artifacts[0].digest = $d |
		.artifacts[1].kind = "skill"' box.lock >edited
	cp edited box.lock
	rm -rf "$STORE"
	export BOX_PROG=box-pull
	run --separate-stderr box-pull --frozen
	assert_fail conflict 7 '(.differences | map([.name, .field]) ==
		[["lib", "version"], ["util", "kind"]]) and
		.differences[0].locked == "1.2.0" and .differences[0].found == "1.10.0" and
		.differences[1].locked == "skill" and .differences[1].found == "lua"'
	[[ "$stderr" == *"box.lock would change (--frozen): 2 difference(s), first lib version"* ]]
	# by tag: the tag names another digest than the pin
	run --separate-stderr box-pull --frozen lib@1.2.0
	assert_fail conflict 7 '.differences == [{"name": "lib", "field": "digest",
		"locked": "'"$(digest lib 1.10.0)"'", "found": "'"$(digest lib 1.2.0)"'"}]'
	cmp box.lock edited
	[ ! -d "$STORE/sha256" ] || [ -z "$(ls "$STORE/sha256")" ]
	# a name box.lock does not pin
	git_lock=$(cat box.lock)
	run --separate-stderr box-pull --frozen util@1.0.0 other
	assert_fail conflict 7 '.differences | map(select(.name == "other")) ==
		[{"name": "other", "field": "name", "locked": null, "found": "other"}]'
	assert_equal "$(cat box.lock)" "$git_lock"
}

@test "box-pull takes box.json's registry, after -r and box.lock's source" {
	mv "$REG" "$T/elsewhere"
	printf '{"registry": "oci:%s", "artifacts": {"lib": "^1"}}\n' "$T/elsewhere" >box.json
	run --separate-stderr box-pull util@1.0.0
	assert_equal "$status" 0
	jqe '.artifacts[0].name == "util"'
	jqe '.artifacts[0].source == "oci:'"$T"'/elsewhere"' "$(cat box.lock)"
	# -r wins over box.json
	run --separate-stderr box-pull -r oci:/nonexistent lib@1.0.0
	assert_equal "$status" 6
	# a malformed box.json is an error, not ignored
	echo '{"registry": 5, "artifacts": {}}' >box.json
	run --separate-stderr box-pull lib@1.0.0
	assert_equal "$status" 2
}

@test "gc removes the store entries no given lockfile pins, and only those" {
	want '{"lib": "~1.2", "util": "^1"}'
	run --separate-stderr box-lock
	assert_done
	run --separate-stderr box-pull --lock a.lock lib@1.0.0
	assert_equal "$status" 0
	run --separate-stderr box-pull --lock b.lock lib@2.0.0
	assert_equal "$status" 0
	before=$(ls "$STORE/sha256" | sort)
	# a lockfile that does not exist: not_found, nothing removed
	run --separate-stderr box-lock gc box.lock nosuch.lock
	assert_fail not_found 6 '.error.message == "nosuch.lock: no such lockfile"'
	assert_equal "$(ls "$STORE/sha256" | sort)" "$before"
	run --separate-stderr box-lock gc box.lock a.lock
	assert_done '.removed == ["'"$(digest lib 2.0.0)"'"] and .kept == 3'
	[ ! -e "$STORE/sha256/$(digest lib 2.0.0 | cut -c8-)" ]
	[ ! -e "$STORE/sha256/$(digest lib 2.0.0 | cut -c8-).tree" ]
	[ -z "$(ls "$STORE/tmp")" ]
	run --separate-stderr box-lock verify
	assert_done '.problems == [] and .unpinned == ["'"$(digest lib 1.0.0)"'"]'
	# the default: only ./box.lock
	run --separate-stderr box-lock gc
	assert_done '.removed == ["'"$(digest lib 1.0.0)"'"] and .kept == 2'
	run --separate-stderr box-lock verify
	assert_done '.problems == [] and .unpinned == []'
	# locks are for gc only
	run --separate-stderr box-lock --json <<<'{"command": "verify", "locks": ["x"]}'
	assert_equal "$status" 2
}

@test "gc waits for the store's lock: an exclusive holder makes it a retryable conflict" {
	want '{"lib": "~1.2"}'
	run --separate-stderr box-lock
	assert_done
	touch "$STORE/lock"
	# hold the lock shared for longer than gc waits: a pull or resolve in progress
	flock -s "$STORE/lock" sleep 40 &
	holder=$!
	sleep 0.2
	start=$(date +%s)
	run --separate-stderr box-lock gc
	kill "$holder"
	assert_fail conflict 7 '.error.retryable == true'
	[ $(($(date +%s) - start)) -ge 29 ]
}

# put_image DIR REF: a plain OCI image (not a box artifact) into layout DIR, tagged REF.
put_image() {
	local dir=$1 ref=$2 cfg man
	cfg=$(printf '{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}')
	printf '%s' "$cfg" >"$dir/cfg.tmp"
	local cd cs md ms
	cd=$(sha256sum "$dir/cfg.tmp" | cut -d' ' -f1)
	cs=$(stat -c %s "$dir/cfg.tmp")
	mv "$dir/cfg.tmp" "$dir/blobs/sha256/$cd"
	man=$(jq -cn --arg d "sha256:$cd" --argjson s "$cs" '{schemaVersion: 2,
		mediaType: "application/vnd.oci.image.manifest.v1+json",
		config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $d, size: $s},
		layers: []}')
	printf '%s' "$man" >"$dir/man.tmp"
	md=$(sha256sum "$dir/man.tmp" | cut -d' ' -f1)
	ms=$(stat -c %s "$dir/man.tmp")
	mv "$dir/man.tmp" "$dir/blobs/sha256/$md"
	jq --arg d "sha256:$md" --argjson s "$ms" --arg r "$ref" '.manifests += [{
		mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $d, size: $s,
		annotations: {"org.opencontainers.image.ref.name": $r}}]' "$dir/index.json" >"$dir/i.tmp"
	mv "$dir/i.tmp" "$dir/index.json"
}

@test "a layout written by skopeo (bare tags) pulls and locks; a tag of no box artifact is skipped and named" {
	command -v skopeo >/dev/null || skip "skopeo is not installed"
	D=$T/skopeo
	for v in 1.2.0 1.10.0; do
		skopeo copy --quiet "oci:$REG:lib:$v" "oci:$D:$v"
	done
	skopeo copy --quiet "oci:$REG:util:1.0.0" "oci:$D:u1"
	# skopeo writes the bare tag, as other OCI tools do
	jqe '[.manifests[].annotations["org.opencontainers.image.ref.name"]] | sort ==
		["1.10.0", "1.2.0", "u1"]' "$(cat "$D/index.json")"
	export BOX_PROG=box-pull
	run --separate-stderr box-pull -r "oci:$D" lib@1.2.0
	assert_equal "$status" 0
	jqe '.artifacts[0].version == "1.2.0" and .artifacts[0].digest == "'"$(digest lib 1.2.0)"'"'
	rm box.lock
	# the highest bare tag whose config names lib; util's tag is not lib's
	run --separate-stderr box-pull -r "oci:$D" lib
	assert_equal "$status" 0
	jqe '.artifacts[0].version == "1.10.0"'
	run --separate-stderr box-pull -r "oci:$D" lib@u1
	assert_fail not_found 6
	# box-lock: a tag of lib that holds a plain image is skipped and named, the next best
	# pinned; a bare tag of a plain image is nobody's
	put_image "$D" lib:1.20.0
	put_image "$D" 1.30.0
	export BOX_PROG=box-lock
	printf '{"registry": "oci:%s", "artifacts": {"lib": "^1"}}\n' "$D" >box.json
	rm -f box.lock
	run --separate-stderr box-lock
	assert_done '.artifacts[0].version == "1.10.0" and (.skipped | length == 1) and
		.skipped[0].name == "lib" and .skipped[0].tag == "1.20.0" and
		(.skipped[0].reason | test("not a box artifact"))'
	# and box-pull --frozen installs it from there
	rm -rf "$STORE"
	run --separate-stderr box-pull --frozen
	assert_equal "$status" 0
	jqe '.artifacts[0].version == "1.10.0" and .lock.changed == false'
}
