#!/usr/bin/env bats
# lib/net/registry.c, the OCI Distribution client of box-pack and box-pull, against a real
# docker-registry (Debian's distribution 2.8) on 127.0.0.1, through tests/registry-client.
# Three registries are started once for the file (tests/fixtures/registry.sh): anonymous,
# htpasswd Basic auth, and Bearer tokens from tests/fixtures/token-server.py. teardown_file
# stops them all.

load helpers
bats_require_minimum_version 1.5.0

USER_PASS=box:s3cret-pass

setup_file() {
	command -v docker-registry >/dev/null || skip "docker-registry is not installed"
	command -v htpasswd >/dev/null || skip "htpasswd (apache2-utils) is not installed"
	R=$(mktemp -d "${BATS_RUN_TMPDIR:-/tmp}/registry.XXXXXX")
	export R
	ANON=$("$BATS_TEST_DIRNAME/fixtures/registry.sh" start "$R/anon" none 3>&-)
	BASIC=$("$BATS_TEST_DIRNAME/fixtures/registry.sh" start "$R/basic" basic \
		"${USER_PASS%%:*}" "${USER_PASS#*:}" 3>&-)

	# token auth: a CA in the registry's rootcertbundle, a leaf that signs the tokens
	mkdir -p "$R/tok"
	(
		cd "$R/tok" &&
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
			-subj /CN=box-test-ca &&
		openssl req -newkey rsa:2048 -nodes -keyout leaf.key -out leaf.csr \
			-subj /CN=box-test-token &&
		printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n' >ext &&
		openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
			-out leaf.pem -days 2 -extfile ext
	) >/dev/null 2>&1
	python3 "$BATS_TEST_DIRNAME/fixtures/token-server.py" "$R/tok" box-issuer box-service \
		"$USER_PASS" </dev/null >/dev/null 2>"$R/tok/err" 3>&- &
	echo $! >"$R/tok/pid"
	for _ in $(seq 200); do
		[ -s "$R/tok/token-port" ] && break
		sleep 0.05
	done
	TOKEN_PORT=$(cat "$R/tok/token-port")
	BEARER=$("$BATS_TEST_DIRNAME/fixtures/registry.sh" start "$R/bearer" token \
		"http://127.0.0.1:$TOKEN_PORT/token" box-service box-issuer "$R/tok/ca.pem" 3>&-)
	export ANON BASIC BEARER TOKEN_PORT
}

teardown_file() {
	[ -n "${R:-}" ] || return 0
	for r in anon basic bearer; do
		"$BATS_TEST_DIRNAME/fixtures/registry.sh" stop "$R/$r"
	done
	if [ -s "$R/tok/pid" ]; then
		kill "$(cat "$R/tok/pid")" 2>/dev/null || true
	fi
	rm -rf "$R"
}

setup() {
	box_setup
	unset BOX_REGISTRY_AUTH DOCKER_CONFIG
	export HOME=$T/home
	mkdir -p "$HOME"
	BOX_PROG=registry-client
	head -c 300000 /dev/urandom >"$T/layer.tgz"
	echo "second layer" >"$T/two.txt"
}

rc() {
	run --separate-stderr "$BOX_BUILDDIR/tests/registry-client" "$@"
}

# blob_path DIR DIGEST: the file holding a blob in a registry's storage
blob_path() {
	local hex=${2#sha256:}
	echo "$1/storage/docker/registry/v2/blobs/sha256/${hex:0:2}/$hex/data"
}

@test "push a blob and a manifest, pull them back by tag and by digest" {
	rc push "http://127.0.0.1:$ANON" box/hello 1.0.0 "$T/layer.tgz" "$T/two.txt"
	assert_equal "$status" 0
	one_json_where '.ok and (.digest | test("^sha256:[0-9a-f]{64}$"))'
	local digest
	digest=$(jq -r .digest <<<"$output")

	rc pull "http://127.0.0.1:$ANON" box/hello 1.0.0 "$T/out"
	assert_equal "$status" 0
	one_json_where '.digest == $d and .media_type == "application/vnd.oci.image.manifest.v1+json"
		and .layers == 2 and .bytes == 300013' --arg d "$digest"
	cmp "$T/layer.tgz" "$T/out"
	cmp "$T/two.txt" "$T/out.1"

	rc manifest "http://127.0.0.1:$ANON" box/hello "$digest"
	assert_equal "$status" 0
	one_json_where '.digest == $d and (.body | fromjson | .artifactType ==
		"application/vnd.box.artifact.v1" and .layers[0].annotations["org.opencontainers.image.title"]
		== "layer.tgz")' --arg d "$digest"

	# a second push of the same blobs finds them (HEAD) and still succeeds
	rc push "http://127.0.0.1:$ANON" box/hello 1.0.0 "$T/layer.tgz" "$T/two.txt"
	assert_equal "$status" 0
	one_json_where '.digest == $d' --arg d "$digest"
}

@test "the OCI Accept types are sent: registry 2.8 answers 404 without them" {
	rc push "http://127.0.0.1:$ANON" box/accept 1.0.0 "$T/two.txt"
	assert_equal "$status" 0
	run curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ANON/v2/box/accept/manifests/1.0.0"
	assert_output 404
	rc manifest "http://127.0.0.1:$ANON" box/accept 1.0.0
	assert_equal "$status" 0
	one_json_where '.media_type == "application/vnd.oci.image.manifest.v1+json"'
}

@test "unknown tag, digest and repository are not_found" {
	rc push "http://127.0.0.1:$ANON" box/nf 1.0.0 "$T/two.txt"
	assert_equal "$status" 0
	rc manifest "http://127.0.0.1:$ANON" box/nf 9.9.9
	assert_fail not_found 6 '.error.message | test("MANIFEST_UNKNOWN")'
	rc manifest "http://127.0.0.1:$ANON" box/nf "sha256:$(printf '%064d' 0)"
	assert_fail not_found 6
	rc tags "http://127.0.0.1:$ANON" box/never-pushed
	assert_fail not_found 6 '.error.message | test("NAME_UNKNOWN")'
	rc blob "http://127.0.0.1:$ANON" box/nf "sha256:$(printf '%064d' 0)" 10 "$T/b"
	assert_fail not_found 6 '.error.message | test("BLOB_UNKNOWN")'
}

@test "tags list" {
	for v in 1.0.0 1.1.0 2.0.0-rc.1; do
		rc push "http://127.0.0.1:$ANON" box/tagged "$v" "$T/two.txt"
		assert_equal "$status" 0
	done
	rc tags "http://127.0.0.1:$ANON" box/tagged
	assert_equal "$status" 0
	one_json_where '.tags | sort == ["1.0.0", "1.1.0", "2.0.0-rc.1"]'
}

@test "Basic auth: credentials from BOX_REGISTRY_AUTH or config.json work, none or wrong ones are refused" {
	rc push "http://127.0.0.1:$BASIC" box/secret 1.0.0 "$T/two.txt"
	assert_fail policy_denied 4 '.error.message | test("credentials")'

	BOX_REGISTRY_AUTH=$USER_PASS rc push "http://127.0.0.1:$BASIC" box/secret 1.0.0 "$T/two.txt"
	assert_equal "$status" 0

	BOX_REGISTRY_AUTH=box:wrong rc tags "http://127.0.0.1:$BASIC" box/secret
	assert_fail policy_denied 4

	mkdir -p "$HOME/.docker"
	printf '{"auths": {"127.0.0.1:%s": {"auth": "%s"}}}' "$BASIC" \
		"$(printf %s "$USER_PASS" | base64 -w0)" >"$HOME/.docker/config.json"
	rc pull "http://127.0.0.1:$BASIC" box/secret 1.0.0 "$T/out"
	assert_equal "$status" 0
	cmp "$T/two.txt" "$T/out"

	# DOCKER_CONFIG wins over ~/.docker
	mkdir -p "$T/dc"
	printf '{"auths": {"http://127.0.0.1:%s/v2/": {"auth": "%s"}}}' "$BASIC" \
		"$(printf %s box:wrong | base64 -w0)" >"$T/dc/config.json"
	DOCKER_CONFIG=$T/dc rc tags "http://127.0.0.1:$BASIC" box/secret
	assert_fail policy_denied 4
}

@test "Bearer: a token from the realm with the credentials, cached for the run" {
	: >"$R/tok/token-log"
	BOX_REGISTRY_AUTH=$USER_PASS rc push "http://127.0.0.1:$BEARER" box/tok 1.0.0 "$T/layer.tgz"
	assert_equal "$status" 0
	# the push asked for a token with push scope (shown in full when it did not)
	# (a token request may carry more than one scope: the push scope must be among them)
	grep -Eq '^OK (.* )?repository:box/tok:(pull,push|push,pull)( |$)' "$R/tok/token-log" ||
		{ cat "$R/tok/token-log"; false; }

	: >"$R/tok/token-log"
	BOX_REGISTRY_AUTH=$USER_PASS rc pull "http://127.0.0.1:$BEARER" box/tok 1.0.0 "$T/out"
	assert_equal "$status" 0
	cmp "$T/layer.tgz" "$T/out"
	# two manifest GETs and a blob GET, one token
	run cat "$R/tok/token-log"
	assert_output 'OK repository:box/tok:pull'

	BOX_REGISTRY_AUTH=$USER_PASS rc tags "http://127.0.0.1:$BEARER" box/tok
	assert_equal "$status" 0
	one_json_where '.tags == ["1.0.0"]'
}

@test "Bearer: no or wrong credentials are refused by the token server" {
	BOX_REGISTRY_AUTH=$USER_PASS rc push "http://127.0.0.1:$BEARER" box/tok2 1.0.0 "$T/two.txt"
	assert_equal "$status" 0
	rc pull "http://127.0.0.1:$BEARER" box/tok2 1.0.0 "$T/out"
	assert_fail policy_denied 4 '.error.message | test("token")'
	BOX_REGISTRY_AUTH=box:nope rc pull "http://127.0.0.1:$BEARER" box/tok2 1.0.0 "$T/out"
	assert_fail policy_denied 4
	[ ! -s "$T/out" ]
}

@test "a flipped byte in a stored blob is integrity_failed" {
	rc push "http://127.0.0.1:$ANON" box/flip 1.0.0 "$T/layer.tgz"
	assert_equal "$status" 0
	local d f
	d=sha256:$(sha "$T/layer.tgz")
	f=$(blob_path "$R/anon" "$d")
	[ -f "$f" ]
	# same size, one byte changed in the middle
	printf '\x%02x' $(( ($(od -An -tu1 -j150000 -N1 "$f") + 1) % 256 )) |
		dd of="$f" bs=1 seek=150000 conv=notrunc status=none
	rc pull "http://127.0.0.1:$ANON" box/flip 1.0.0 "$T/out"
	assert_fail integrity_failed 5 ".error.message | test(\"hashes to\")"
}

@test "a stored manifest that no longer hashes to its digest is integrity_failed" {
	rc push "http://127.0.0.1:$ANON" box/mflip 1.0.0 "$T/two.txt"
	assert_equal "$status" 0
	local d f
	d=$(jq -r .digest <<<"$output")
	f=$(blob_path "$R/anon" "$d")
	sed -i 's/vnd.box.artifact.v1/vnd.box.artifact.v2/' "$f"
	rc manifest "http://127.0.0.1:$ANON" box/mflip 1.0.0
	assert_fail integrity_failed 5
	rc manifest "http://127.0.0.1:$ANON" box/mflip "$d"
	assert_fail integrity_failed 5
}

@test "a descriptor size that lies is integrity_failed" {
	rc push "http://127.0.0.1:$ANON" box/size 1.0.0 "$T/layer.tgz"
	assert_equal "$status" 0
	local d
	d=sha256:$(sha "$T/layer.tgz")
	rc blob "http://127.0.0.1:$ANON" box/size "$d" 299999 "$T/small"
	assert_fail integrity_failed 5 '.error.message | test("larger than")'
	rc blob "http://127.0.0.1:$ANON" box/size "$d" 300001 "$T/big"
	assert_fail integrity_failed 5 '.error.message | test("300000 bytes")'
	rc blob "http://127.0.0.1:$ANON" box/size "$d" 300000 "$T/right"
	assert_equal "$status" 0
	cmp "$T/layer.tgz" "$T/right"
}

@test "a partial download is resumed with Range after re-hashing the prefix" {
	rc push "http://127.0.0.1:$ANON" box/resume 1.0.0 "$T/layer.tgz"
	assert_equal "$status" 0
	local d
	d=sha256:$(sha "$T/layer.tgz")
	head -c 123456 "$T/layer.tgz" >"$T/part"
	rc blob "http://127.0.0.1:$ANON" box/resume "$d" 300000 "$T/part"
	assert_equal "$status" 0
	cmp "$T/layer.tgz" "$T/part"

	# a prefix that is not the blob's: only the rest is fetched, so the digest over prefix + rest
	# fails (a client that ignored the prefix would succeed here)
	head -c 1000 /dev/zero >"$T/bad"
	rc blob "http://127.0.0.1:$ANON" box/resume "$d" 300000 "$T/bad"
	assert_fail integrity_failed 5
}

@test "references: plain http only to loopback, bad references refused before any request" {
	rc tags http://registry.example.com box/x
	assert_fail policy_denied 4
	rc tags "ftp://127.0.0.1:$ANON" box/x
	assert_fail invalid_request 2
	rc tags "http://127.0.0.1:$ANON" Box/X
	assert_fail invalid_request 2
	rc manifest "http://127.0.0.1:$ANON" box/x 'bad tag'
	assert_fail invalid_request 2
	rc tags "http://localhost:$ANON" box/never
	assert_fail not_found 6
}

# fake_start: tests/fixtures/fake-registry.py on 127.0.0.1 (for what docker-registry will not
# do on demand); sets FAKE (its port), FD (the blob's digest), FAKE_DIR. Stopped in teardown.
fake_start() {
	fake_stop
	FAKE_DIR=$(mktemp -d "$T/fake.XXXXXX")
	mkdir -p "$FAKE_DIR"
	echo "${1:-0}" >"$FAKE_DIR/429-count"
	python3 "$BATS_TEST_DIRNAME/fixtures/fake-registry.py" "$FAKE_DIR" </dev/null >/dev/null 2>&1 3>&- &
	FAKE_PID=$!
	for _ in $(seq 200); do
		[ -s "$FAKE_DIR/port" ] && break
		sleep 0.05
	done
	FAKE=$(cat "$FAKE_DIR/port")
	FD=$(cat "$FAKE_DIR/digest")
}

fake_stop() {
	if [ -n "${FAKE_PID:-}" ]; then
		kill "$FAKE_PID" 2>/dev/null || true
		wait "$FAKE_PID" 2>/dev/null || true
	fi
	FAKE_PID=
}

teardown() {
	fake_stop
}

@test "a blob redirect to another host is followed without the Authorization header" {
	fake_start
	BOX_REGISTRY_AUTH=box:pw rc blob "http://127.0.0.1:$FAKE" redir "$FD" 100000 "$T/b"
	assert_equal "$status" 0
	run cat "$FAKE_DIR/log"
	assert_line "GET /v2/redir/blobs/$FD auth=yes"
	assert_line "GET /elsewhere/blob auth=no"
	refute_line "GET /elsewhere/blob auth=yes"
}

@test "429 is waited out a bounded number of times, then limit_exceeded (retryable)" {
	fake_start 2
	BOX_REGISTRY_AUTH=box:pw rc blob "http://127.0.0.1:$FAKE" ratelimit "$FD" 100000 "$T/b"
	assert_equal "$status" 0
	fake_start 100
	BOX_REGISTRY_AUTH=box:pw rc blob "http://127.0.0.1:$FAKE" ratelimit "$FD" 100000 "$T/c"
	assert_fail limit_exceeded 3 '.error.retryable == true and .error.limit == "registry_rate"'
	# the first try and 3 waits (after the 401 that asked for the credentials)
	[ "$(grep -c 'ratelimit.* auth=yes' "$FAKE_DIR/log")" -eq 4 ]
}

@test "5xx with an HTML body is provider_error (retryable)" {
	fake_start
	BOX_REGISTRY_AUTH=box:pw rc blob "http://127.0.0.1:$FAKE" broken "$FD" 100000 "$T/b"
	assert_fail provider_error 8 '.error.retryable == true and (.error.message | test("HTTP 500"))'
	[ ! -s "$T/b" ]
}

@test "a download cut in the middle is resumed with Range in the same call" {
	fake_start
	BOX_REGISTRY_AUTH=box:pw rc blob "http://127.0.0.1:$FAKE" cut "$FD" 100000 "$T/b"
	assert_equal "$status" 0
	[ "$(sha256sum <"$T/b" | cut -d' ' -f1)" = "${FD#sha256:}" ]
	[ "$(grep -c "GET /v2/cut/blobs/$FD auth=yes" "$FAKE_DIR/log")" -eq 2 ]
}
