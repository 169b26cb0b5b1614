#!/usr/bin/env bats
# End to end through a real registry: box-pack pushes an artifact to docker-registry
# (distribution 2.8, htpasswd Basic auth, on 127.0.0.1, started and stopped here), box-lock
# resolves box.json against it, box-pull fetches, verifies and extracts it, box-lock verify
# checks the store, and box-run runs the pulled Lua code.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	command -v docker-registry >/dev/null || skip "docker-registry is not installed"
	command -v htpasswd >/dev/null || skip "htpasswd (apache2-utils) is not installed"
	R=$(mktemp -d "${BATS_RUN_TMPDIR:-/tmp}/e2e.XXXXXX")
	PORT=$("$BATS_TEST_DIRNAME/fixtures/registry.sh" start "$R/reg" basic box pw-e2e 3>&-)
	export R PORT
}

teardown_file() {
	[ -n "${R:-}" ] || return 0
	"$BATS_TEST_DIRNAME/fixtures/registry.sh" stop "$R/reg"
	rm -rf "$R"
}

setup() {
	box_setup
	export BOX_HOME=$T/home BOX_REGISTRY_AUTH=box:pw-e2e HOME=$T
	REG=http://127.0.0.1:$PORT
	mkdir -p "$T/lib"
	cat >"$T/lib/box-artifact.json" <<-JSON
	{"name":"e2e/greet-$BATS_TEST_NUMBER","version":"1.2.0","kind":"lua","entry":"greet.lua"}
	JSON
	echo 'return "hello, " .. (... or "world")' >"$T/lib/greet.lua"
	NAME=e2e/greet-$BATS_TEST_NUMBER
	cd "$T"
}

@test "pack to a registry, lock, pull, verify, run the pulled code" {
	run --separate-stderr box-pack --registry "$REG" "$T/lib"
	assert_equal "$status" 0
	digest=$(jq -er .digest <<<"$output")
	printf '{"registry":"%s","artifacts":{"%s":"^1.0"}}' "$REG" "$NAME" >box.json
	run --separate-stderr box-lock
	assert_equal "$status" 0
	jq -e --arg d "$digest" '.artifacts[0].digest == $d and .lock.changed' <<<"$output"
	run --separate-stderr box-pull "$NAME"
	assert_equal "$status" 0
	# box-lock fetched it into the store to record its tree digest: nothing left to fetch
	jq -e '.artifacts[0].cached == true and .artifacts[0].bytes == 0 and .lock.changed == false' <<<"$output"
	path=$(jq -er .artifacts[0].path <<<"$output")
	[ "$(stat -c %a "$path/greet.lua")" = 644 ]
	run --separate-stderr box-lock verify
	assert_equal "$status" 0
	jq -e '.ok and (.problems | length == 0)' <<<"$output"
	run --separate-stderr box-run "$path/greet.lua" box
	assert_equal "$status" 0
	jq -e '.result == "hello, box"' <<<"$output"
	# a second pull fetches nothing
	run --separate-stderr box-pull "$NAME"
	jq -e '.artifacts[0].cached and .artifacts[0].bytes == 0' <<<"$output"
}

@test "wrong registry credentials: policy_denied, nothing written" {
	BOX_REGISTRY_AUTH=box:wrong run --separate-stderr box-pack --registry "$REG" "$T/lib"
	assert_equal "$status" 4
	jq -e '.error.code == "policy_denied"' <<<"$output"
	[[ $stderr == box-pack:\ policy_denied:* ]]
}

@test "a blob flipped in the registry's storage: integrity_failed, store and lockfile untouched" {
	run --separate-stderr box-pack --registry "$REG" "$T/lib"
	assert_equal "$status" 0
	layer=$(jq -er .layer.digest <<<"$output")
	hex=${layer#sha256:}
	blob="$R/reg/storage/docker/registry/v2/blobs/sha256/${hex:0:2}/$hex/data"
	[ -f "$blob" ]
	printf 'X' | dd of="$blob" bs=1 seek=100 conv=notrunc 2>/dev/null
	echo '{"lock_version": 1, "artifacts": []}' >box.lock
	before=$(sha256sum box.lock)
	run --separate-stderr box-pull --registry "$REG" "$NAME@1.2.0"
	assert_equal "$status" 5
	jq -e '.error.code == "integrity_failed"' <<<"$output"
	[ "$(sha256sum box.lock)" = "$before" ]
	[ -z "$(ls -A "$BOX_HOME/store/sha256" 2>/dev/null)" ]
}
