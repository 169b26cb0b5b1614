#!/usr/bin/env bats
# box-pack: a directory and its box-artifact.json into a reproducible OCI artifact in a local
# OCI layout registry (the default one, $BOX_HOME/registry, unless --registry says otherwise).

load helpers
bats_require_minimum_version 1.5.0

setup() {
	box_setup
	unset BOX_REGISTRY
	export BOX_HOME=$T/home
	export BOX_PROG=box-pack
	REG=$BOX_HOME/registry
}

# mk_tool DIR [NAME [VERSION]]: a small tool artifact (an executable entry, a data file in a
# subdirectory).
mk_tool() {
	local d=$1 name=${2:-hello} version=${3:-1.0.0}
	mkdir -p "$d/bin" "$d/share/doc"
	printf '#!/bin/sh\necho hello\n' >"$d/bin/hello"
	chmod 0755 "$d/bin/hello"
	printf 'a hello tool\n' >"$d/share/doc/README"
	cat >"$d/box-artifact.json" <<-EOF
	{"name": "$name", "version": "$version", "kind": "tool", "description": "says hello",
	 "entry": "bin/hello",
	 "tools": [{"name": "hello", "description": "say hello",
	            "input_schema": {"type": "object"}, "command": ["bin/hello"]}]}
	EOF
}

# ref_digest NAME:TAG [INDEX]: the digest index.json tags NAME:TAG with (one line per entry).
ref_digest() {
	jq -r --arg r "$1" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"]
		== $r) | .digest' "${2:-$REG/index.json}"
}

# assert_packed: exit 0, one JSON object with ok true and no error, nothing on stderr.
assert_packed() {
	assert_equal "$status" 0
	one_json_where ".ok == true and (has(\"error\") | not) and (${1:-true})"
	assert_equal "$stderr" ""
}

@test "a tool artifact packs into the default registry as an OCI artifact" {
	mk_tool art
	run --separate-stderr box-pack art
	assert_packed '.name == "hello" and .version == "1.0.0" and .kind == "tool" and
		(.digest | test("^sha256:[0-9a-f]{64}$")) and .registry == "oci:'"$REG"'" and
		(.layer.digest | test("^sha256:[0-9a-f]{64}$")) and (.layer.size > 0) and
		.files == 3'
	digest=$(jq -r .digest <<<"$output")
	layer=$(jq -r .layer.digest <<<"$output")
	config=$(jq -r .config.digest <<<"$output")

	# the layout: oci-layout, index.json tagging hello:1.0.0, blobs named by their digests
	jqe '.imageLayoutVersion == "1.0.0"' "$(cat "$REG/oci-layout")"
	assert_equal "$(ref_digest hello:1.0.0)" "$digest"
	jqe '.manifests | length == 1 and (.[0].artifactType == "application/vnd.box.artifact.v1")
		and .[0].mediaType == "application/vnd.oci.image.manifest.v1+json"' \
		"$(cat "$REG/index.json")"
	for d in "$digest" "$layer" "$config"; do
		assert_equal "$(sha "$REG/blobs/sha256/${d#sha256:}")" "${d#sha256:}"
	done
	jq -e --arg l "$layer" --arg c "$config" '.schemaVersion == 2 and
		.mediaType == "application/vnd.oci.image.manifest.v1+json" and
		.artifactType == "application/vnd.box.artifact.v1" and
		.config.mediaType == "application/vnd.box.artifact.config.v1+json" and
		.config.digest == $c and (.layers | length == 1) and .layers[0].digest == $l and
		.layers[0].mediaType == "application/vnd.oci.image.layer.v1.tar+gzip" and
		.layers[0].annotations["org.opencontainers.image.title"] == "hello-1.0.0.tar.gz"' \
		"$REG/blobs/sha256/${digest#sha256:}"
	# the config blob is box-artifact.json itself
	cmp "$REG/blobs/sha256/${config#sha256:}" art/box-artifact.json
	# the layer is a gzip'd tar of the tree, sorted, with zero times and owners
	run tar --warning=no-unknown-keyword -tzvf "$REG/blobs/sha256/${layer#sha256:}" \
		--numeric-owner
	assert_success
	assert_line --regexp '^-rwxr-xr-x 0/0 .* 1970-01-01 00:00 bin/hello$'
	assert_line --regexp '^-rw-r--r-- 0/0 .* 1970-01-01 00:00 box-artifact.json$'
	run tar --warning=no-unknown-keyword -tzf "$REG/blobs/sha256/${layer#sha256:}"
	assert_equal "$output" "$(printf 'bin/\nbin/hello\nbox-artifact.json\nshare/\nshare/doc/\nshare/doc/README')"
}

@test "the layer is plain ustar, with a pax header only for a path ustar cannot hold" {
	mk_tool art
	long=$(printf 'd%.0s' {1..120})
	echo x >"art/$long"
	run --separate-stderr box-pack art
	assert_packed
	layer=$(jq -r .layer.digest <<<"$output")
	run python3 - "$REG/blobs/sha256/${layer#sha256:}" <<-'EOF'
	import sys, tarfile
	with tarfile.open(sys.argv[1], "r:gz") as t:
	    for m in t.getmembers():
	        print(m.name, m.uid, m.gid, repr(m.uname), repr(m.gname), m.mtime, oct(m.mode),
	              sorted(m.pax_headers))
	f = open(sys.argv[1], "rb").read(10)
	print("gzip-mtime", int.from_bytes(f[4:8], "little"), "flags", f[3])
	EOF
	assert_success
	assert_line "bin/hello 0 0 '' '' 0 0o755 []"
	assert_line "box-artifact.json 0 0 '' '' 0 0o644 []"
	assert_line --regexp "^$long 0 0 '' '' 0 0o644 \[.*'path'.*\]$"
	# gzip -n: no name (FNAME flag unset), mtime 0
	assert_line "gzip-mtime 0 flags 0"
}

@test "--registry oci:PATH packs into that layout, creating it" {
	mk_tool art
	run --separate-stderr box-pack --registry "oci:$T/other" art
	assert_packed ".registry == \"oci:$T/other\""
	assert_equal "$(ref_digest hello:1.0.0 "$T/other/index.json")" "$(jq -r .digest <<<"$output")"
	[ ! -e "$REG" ]
}

@test "packing twice gives the same digest and one index entry" {
	mk_tool art
	run --separate-stderr box-pack art
	assert_packed
	first=$(jq -r .digest <<<"$output")
	idx=$(sha "$REG/index.json")
	touch -d '2001-02-03' art/bin/hello art/share/doc/README
	run --separate-stderr box-pack art
	assert_packed
	assert_equal "$(jq -r .digest <<<"$output")" "$first"
	assert_equal "$(sha "$REG/index.json")" "$idx"
	assert_equal "$(jq '.manifests | length' "$REG/index.json")" 1
}

@test "the same tree with other mtimes, owners, modes and creation order gives the same digest" {
	mk_tool a
	run --separate-stderr box-pack --registry "oci:$T/r1" a
	assert_packed
	d1=$(jq -r .digest <<<"$output")
	l1=$(jq -r .layer.digest <<<"$output")

	# the same files created in the reverse order, at other times, by another owner, with
	# other permission bits that normalise to the same modes
	mkdir -p b/share/doc b/bin
	cp a/share/doc/README b/share/doc/README
	sleep 0.01
	cp a/box-artifact.json b/box-artifact.json
	cp a/bin/hello b/bin/hello
	chmod 0700 b/bin/hello
	chmod 0600 b/share/doc/README
	chmod 0711 b/share
	touch -d '1999-12-31 23:59' b/bin/hello b/share/doc/README b/share b/bin
	if [ "$(id -u)" = 0 ]; then
		chown -R 1234:4321 b
	fi
	run --separate-stderr box-pack --registry "oci:$T/r2" b
	assert_packed
	assert_equal "$(jq -r .digest <<<"$output")" "$d1"
	assert_equal "$(jq -r .layer.digest <<<"$output")" "$l1"
	cmp "$T/r1/blobs/sha256/${l1#sha256:}" "$T/r2/blobs/sha256/${l1#sha256:}"
}

@test "a changed file under the same version is a conflict; --force moves the tag" {
	mk_tool art
	run --separate-stderr box-pack art
	assert_packed
	old=$(jq -r .digest <<<"$output")
	idx=$(sha "$REG/index.json")

	echo changed >>art/share/doc/README
	run --separate-stderr box-pack art
	assert_fail conflict 7
	assert_equal "$(sha "$REG/index.json")" "$idx"
	assert_equal "$(ref_digest hello:1.0.0)" "$old"

	run --separate-stderr box-pack --force art
	assert_packed
	new=$(jq -r .digest <<<"$output")
	[ "$new" != "$old" ]
	assert_equal "$(ref_digest hello:1.0.0)" "$new"
	assert_equal "$(jq '[.manifests[] | select(.annotations["org.opencontainers.image.ref.name"]
		== "hello:1.0.0")] | length' "$REG/index.json")" 1
}

@test "another version of the same artifact gets its own tag" {
	mk_tool art hello 1.0.0
	run --separate-stderr box-pack art
	assert_packed
	mk_tool art hello 1.1.0
	run --separate-stderr box-pack art
	assert_packed '.version == "1.1.0"'
	[ -n "$(ref_digest hello:1.0.0)" ]
	assert_equal "$(ref_digest hello:1.1.0)" "$(jq -r .digest <<<"$output")"
}

# bad_manifest PATH: box-pack art is invalid_request (exit 2) naming PATH, and the registry
# (made beforehand by packing another artifact) is unchanged.
bad_manifest() {
	local want=$1 idx blobs
	idx=$(sha "$REG/index.json")
	blobs=$(ls "$REG/blobs/sha256")
	run --separate-stderr box-pack art
	assert_fail invalid_request 2 ".error.path == $(jq -cn --arg p "$want" '$p')"
	assert_equal "$(sha "$REG/index.json")" "$idx"
	assert_equal "$(ls "$REG/blobs/sha256")" "$blobs"
}

setup_bad() {
	mk_tool other other 1.0.0
	run box-pack other
	assert_success
	mkdir -p art/bin
	printf '#!/bin/sh\n' >art/bin/run
}

@test "box-artifact.json missing: invalid_request, nothing written" {
	setup_bad
	bad_manifest '$.dir'
}

@test "box-artifact.json malformed: invalid_request at \$" {
	setup_bad
	printf '{"name": "x",' >art/box-artifact.json
	bad_manifest '$'
}

@test "box-artifact.json not an object: invalid_request at \$" {
	setup_bad
	printf '["x"]' >art/box-artifact.json
	bad_manifest '$'
}

@test "box-artifact.json with an unknown member: invalid_request naming it" {
	setup_bad
	echo '{"name": "x", "version": "1.0.0", "kind": "skill", "colour": "blue"}' \
		>art/box-artifact.json
	bad_manifest '$.colour'
}

@test "box-artifact.json with a bad name: invalid_request at \$.name" {
	setup_bad
	for n in '"Hello"' '"a b"' '"-x"' '""' '"a:b"' '42'; do
		echo "{\"name\": $n, \"version\": \"1.0.0\", \"kind\": \"skill\"}" \
			>art/box-artifact.json
		bad_manifest '$.name'
	done
	echo '{"version": "1.0.0", "kind": "skill"}' >art/box-artifact.json
	bad_manifest '$.name'
}

@test "box-artifact.json with a bad version: invalid_request at \$.version" {
	setup_bad
	for v in '"1.0"' '"v1.0.0"' '"01.0.0"' '"1.0.0-"' '"latest"'; do
		echo "{\"name\": \"x\", \"version\": $v, \"kind\": \"skill\"}" >art/box-artifact.json
		bad_manifest '$.version'
	done
	echo '{"name": "x", "kind": "skill"}' >art/box-artifact.json
	bad_manifest '$.version'
}

@test "box-artifact.json with a bad kind: invalid_request at \$.kind" {
	setup_bad
	for k in '"binary"' '"Tool"' '""'; do
		echo "{\"name\": \"x\", \"version\": \"1.0.0\", \"kind\": $k}" >art/box-artifact.json
		bad_manifest '$.kind'
	done
	echo '{"name": "x", "version": "1.0.0"}' >art/box-artifact.json
	bad_manifest '$.kind'
}

@test "box-artifact.json with an entry outside the directory: invalid_request at \$.entry" {
	setup_bad
	echo secret >"$OUTSIDE/run"
	for e in '"../outside/run"' '"/etc/passwd"' '"bin/../../outside/run"' '"bin\\\\run"'; do
		echo "{\"name\": \"x\", \"version\": \"1.0.0\", \"kind\": \"skill\", \"entry\": $e}" \
			>art/box-artifact.json
		bad_manifest '$.entry'
	done
}

@test "box-artifact.json with a missing entry: invalid_request at \$.entry" {
	setup_bad
	echo '{"name": "x", "version": "1.0.0", "kind": "skill", "entry": "bin/nope"}' \
		>art/box-artifact.json
	bad_manifest '$.entry'
	# a directory is not an entry point either
	echo '{"name": "x", "version": "1.0.0", "kind": "skill", "entry": "bin"}' \
		>art/box-artifact.json
	bad_manifest '$.entry'
}

@test "box-artifact.json of kind tool without tools: invalid_request at \$.tools" {
	setup_bad
	echo '{"name": "x", "version": "1.0.0", "kind": "tool", "entry": "bin/run"}' \
		>art/box-artifact.json
	bad_manifest '$.tools'
	echo '{"name": "x", "version": "1.0.0", "kind": "tool", "tools": []}' >art/box-artifact.json
	bad_manifest '$.tools'
	# kinds skill and lua need none
	echo '{"name": "x", "version": "1.0.0", "kind": "lua"}' >art/box-artifact.json
	run --separate-stderr box-pack art
	assert_packed '.kind == "lua"'
}

# tool_manifest TOOL-JSON: art/box-artifact.json of kind tool with that one tool definition
tool_manifest() {
	jq -n --argjson t "$1" '{name: "x", version: "1.0.0", kind: "tool", entry: "bin/run",
		tools: [$t]}' >art/box-artifact.json
}

@test "tools are checked as box-tools(5) says before anything is written: names, schemas, commands" {
	setup_bad
	chmod 0755 art/bin/run
	ok='{"name": "t", "description": "d", "input_schema": {"type": "object"}, "command": ["bin/run"]}'
	# the issue's example: a name with a space and a type that does not exist
	tool_manifest '{"name": "Bad Name", "description": "d", "input_schema": {"type": "object",
		"properties": {"s": {"type": "strin"}}}, "command": ["bin/run"]}'
	bad_manifest '$.tools[0].name'
	assert_output --partial 'invalid tool name \"Bad Name\"'
	tool_manifest "$(jq -c '.input_schema.properties.s.type = "strin"' <<<"$ok")"
	bad_manifest '$.tools[0].input_schema.properties.s.type'
	assert_output --partial 'unknown type \"strin\"'
	tool_manifest "$(jq -c '.input_schema = {"type": "array"}' <<<"$ok")"
	bad_manifest '$.tools[0].input_schema.type'
	tool_manifest "$(jq -c '.input_schema.properties.e = {"format": "email"}' <<<"$ok")"
	bad_manifest '$.tools[0].input_schema.properties.e.format'
	tool_manifest "$(jq -c '.input_schema["$ref"] = "https://example.com/s.json"' <<<"$ok")"
	bad_manifest '$.tools[0].input_schema["$ref"]'
	tool_manifest "$(jq -c '.output_schema = {"pattern": "("}' <<<"$ok")"
	bad_manifest '$.tools[0].output_schema.pattern'
	tool_manifest "$(jq -c 'del(.description)' <<<"$ok")"
	bad_manifest '$.tools[0].description'
	tool_manifest "$(jq -c '.timeout_ms = 0' <<<"$ok")"
	bad_manifest '$.tools[0].timeout_ms'
	tool_manifest "$(jq -c '.colour = "red"' <<<"$ok")"
	bad_manifest '$.tools[0].colour'
	jq -n --argjson t "$ok" '{name: "x", version: "1.0.0", kind: "tool", tools: [$t, $t]}' \
		>art/box-artifact.json
	bad_manifest '$.tools[1].name'
	# commands: inside the artifact, present, regular files
	tool_manifest "$(jq -c '.command = ["bin/missing"]' <<<"$ok")"
	run --separate-stderr box-pack art
	assert_fail not_found 6 '.error.path == "$.tools[0].command[0]"'
	tool_manifest "$(jq -c '.command = ["../other/bin/hello"]' <<<"$ok")"
	run --separate-stderr box-pack art
	assert_fail policy_denied 4 '.error.path == "$.tools[0].command[0]"'
	tool_manifest "$(jq -c '.command = ["/bin/sh"]' <<<"$ok")"
	run --separate-stderr box-pack art
	assert_fail policy_denied 4 '.error.path == "$.tools[0].command[0]"'
	tool_manifest "$(jq -c '.command = ["bin"]' <<<"$ok")"
	bad_manifest '$.tools[0].command[0]'
	# a tool without a command runs the entry, which must then be there
	jq -n '{name: "x", version: "1.0.0", kind: "tool", tools: [{name: "t", description: "d",
		input_schema: {type: "object"}}]}' >art/box-artifact.json
	bad_manifest '$.tools[0].command'
	# nothing of the refused ones reached the registry; a right one packs
	assert_equal "$(jq '.manifests | length' "$REG/index.json")" 1
	tool_manifest "$(jq -c '.input_schema.properties.s = {"type": "string", "pattern": "^[a-z]+$"}' <<<"$ok")"
	run --separate-stderr box-pack art
	assert_packed '.kind == "tool"'
}

@test "a symlink in the directory is refused, nothing written" {
	setup_bad
	echo '{"name": "x", "version": "1.0.0", "kind": "skill"}' >art/box-artifact.json
	ln -s /etc/passwd art/bin/passwd
	idx=$(sha "$REG/index.json")
	blobs=$(ls "$REG/blobs/sha256")
	run --separate-stderr box-pack art
	assert_fail invalid_request 2 '(.error.message | test("bin/passwd"))'
	assert_equal "$(sha "$REG/index.json")" "$idx"
	assert_equal "$(ls "$REG/blobs/sha256")" "$blobs"
}

@test "a FIFO in the directory is refused, nothing written" {
	setup_bad
	echo '{"name": "x", "version": "1.0.0", "kind": "skill"}' >art/box-artifact.json
	mkfifo art/bin/pipe
	idx=$(sha "$REG/index.json")
	blobs=$(ls "$REG/blobs/sha256")
	run --separate-stderr timeout 10 box-pack art
	assert_fail invalid_request 2 '(.error.message | test("bin/pipe"))'
	assert_equal "$(sha "$REG/index.json")" "$idx"
	assert_equal "$(ls "$REG/blobs/sha256")" "$blobs"
}

@test "a directory that does not exist: an error, nothing written" {
	run --separate-stderr box-pack "$T/nope"
	assert_fail not_found 6
	[ ! -e "$REG" ]
}

@test "registry references: plain http only to loopback, no other scheme, nothing written" {
	mk_tool art
	run --separate-stderr box-pack --registry http://registry.example.com/box art
	assert_fail policy_denied 4 '.error.path == "$.registry"'
	run --separate-stderr env BOX_REGISTRY=http://registry.example.com box-pack art
	assert_fail policy_denied 4
	run --separate-stderr box-pack --registry ftp://registry.example.com art
	assert_fail invalid_request 2 '.error.path == "$.registry"'
	# a loopback registry that is not there: an I/O error, retryable
	run --separate-stderr box-pack --registry http://127.0.0.1:1/box art
	assert_fail io_error 8 '.error.retryable == true'
	[ ! -e "$REG" ]
}

@test "--json request: the same as flags" {
	mk_tool art
	run --separate-stderr box-pack --json --trust-request \
		<<<"{\"dir\": \"$T/art\", \"registry\": \"oci:$T/j\"}"
	assert_packed '.name == "hello"'
	assert_equal "$(ref_digest hello:1.0.0 "$T/j/index.json")" "$(jq -r .digest <<<"$output")"
	run --separate-stderr box-pack --json <<<'{"dir": "art", "bogus": 1}'
	assert_fail invalid_request 2 '.error.path == "$.bogus"'
	# without --trust-request the request is an agent's: host paths are the operator's
	run --separate-stderr box-pack --json <<<"{\"dir\": \"$T/art\"}"
	assert_fail policy_denied 4 '.error.path == "$.dir"'
	[ ! -e "$REG" ]
}

@test "usage errors: no DIR, two DIRs, an unknown flag" {
	run --separate-stderr box-pack
	assert_fail invalid_request 2 '.error.path == "$.dir"'
	mkdir a b
	run --separate-stderr box-pack a b
	assert_fail usage 2
	run --separate-stderr box-pack --frobnicate a
	assert_fail usage 2
}

@test "--describe prints the tool definition" {
	run --separate-stderr box-pack --describe
	assert_equal "$status" 0
	one_json_where '.name == "box-pack" and .input_schema.properties == {}'
	run --separate-stderr box-pack --describe --trust-request
	assert_equal "$status" 0
	one_json_where '.name == "box-pack" and (.description | length > 0) and
		.input_schema.type == "object" and (.input_schema.properties | has("dir") and
		has("registry") and has("force")) and (.output_schema | type == "object")'
	assert_equal "$stderr" ""
}

@test "--help prints the usage on stdout" {
	run --separate-stderr box-pack --help
	assert_equal "$status" 0
	assert_line --index 0 --regexp '^usage: box-pack .*DIR'
	assert_output --partial '--registry'
	assert_output --partial '--force'
	assert_equal "$stderr" ""
}

@test "--version" {
	run --separate-stderr box-pack --version
	assert_equal "$status" 0
	assert_output --regexp '^box-pack \(box\) [0-9]+\.[0-9]+\.[0-9]+$'
	assert_equal "$stderr" ""
}
