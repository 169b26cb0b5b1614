#!/usr/bin/env bats
# box-http, the HTTP helper of box-run, against a real server on 127.0.0.1
# (tests/fixtures/httpd.py). The server is on loopback, so the tests that expect success pass
# --allow-private-network; the test without it proves that loopback is refused.

load helpers
bats_require_minimum_version 1.5.0

setup_file() {
	HTTPD_DIR=$(mktemp -d)
	export HTTPD_DIR
	httpd_start "$HTTPD_DIR"
	export PORT BASE="http://127.0.0.1:$PORT"
}

teardown_file() {
	kill "$(cat "$HTTPD_DIR/pid")" 2>/dev/null || true
	rm -rf "$HTTPD_DIR"
}

# req JSON [FLAG...]: one request line to a fresh box-http.
req() {
	local line=$1
	shift
	printf '%s\n' "$line" | box-http "$@"
}

# The flags that let box-http reach the fixture.
local_flags() {
	echo --allow "127.0.0.1:$PORT" --allow-private-network
}

# body_of RESULT: the decoded body of a successful result; fails otherwise.
body_of() {
	local b64
	b64=$(jq -e -r 'select(.ok == true) | .body_base64' <<<"$1") || return 1
	base64 -d <<<"$b64"
}

# jqe FILTER [TEXT]: jq -e on TEXT (default: $output). Unlike jq alone, it fails on empty
# input, where jq -e would succeed without evaluating anything.
jqe() {
	local text=${2-$output}
	if [ -z "$text" ]; then
		echo "jqe: no JSON to check" >&2
		return 1
	fi
	jq -e "$1" <<<"$text" >/dev/null
}

@test "box-http: --version and --help" {
	run box-http --version
	assert_success
	assert_output "box-http (box) 0.1.0"
	run box-http --help
	assert_success
	assert_output --partial "Usage: box-http [--allow RULE]..."
}

@test "box-http: bad flags and bad rules are usage errors with exit 2" {
	run box-http --bogus </dev/null
	assert_failure 2
	run --separate-stderr box-http --bogus </dev/null
	jqe '.ok == false and .error.code == "usage"'
	run --separate-stderr box-http --allow 'ftp://example.com' </dev/null
	assert_failure 2
	jqe '.error.code == "invalid_request" and (.error.message | contains("ftp://example.com"))'
	[[ "$stderr" == *"box-http: invalid_request:"* ]]
	run box-http --max-body-bytes 0 </dev/null
	assert_failure 2
	run box-http --max-body-bytes 12x </dev/null
	assert_failure 2
}

@test "box-http: empty input exits 0 without output" {
	run box-http --allow example.com:443 </dev/null
	assert_success
	assert_output ""
}

@test "box-http: allowed GET" {
	run req "{\"url\":\"$BASE/hello\"}" $(local_flags)
	assert_success
	jqe ".ok == true and .status == 200 and .url == \"$BASE/hello\""
	jqe '.headers["content-type"] == "text/plain" and .headers["content-length"] == "6"'
	[ "$(body_of "$output")" = "hello" ]
}

@test "box-http: allowed POST sends method, headers and body" {
	run req "{\"method\":\"POST\",\"url\":\"$BASE/echo\",\"headers\":{\"X-Test\":\"yes\",\"Content-Type\":\"text/plain\"},\"body_base64\":\"$(printf 'a\0b' | base64)\"}" $(local_flags)
	assert_success
	jqe '.ok and .status == 200'
	body=$(body_of "$output")
	jqe '.method == "POST" and .headers["x-test"] == "yes" and .headers["content-length"] == "3"' "$body"
	jqe '.headers["content-type"] == "text/plain" and .body == "a\u0000b"' "$body"
}

@test "box-http: HEAD and a non-2xx status are answers, not errors" {
	run req "{\"method\":\"HEAD\",\"url\":\"$BASE/hello\"}" $(local_flags)
	assert_success
	jqe '.ok and .status == 200 and .body_base64 == ""'
	run req "{\"url\":\"$BASE/status?code=404\"}" $(local_flags)
	jqe '.ok and .status == 404'
}

@test "box-http: a host that is not allowed is refused" {
	run req "{\"url\":\"http://localhost:$PORT/hello\"}" $(local_flags)
	assert_success
	jqe '.ok == false and .error.code == "policy_denied" and (.error.message | contains("localhost"))'
	run req "{\"url\":\"http://127.0.0.1:$((PORT == 65535 ? 1 : PORT + 1))/hello\"}" $(local_flags)
	jqe '.error.code == "policy_denied"'
}

@test "box-http: method restrictions of a rule" {
	run req "{\"method\":\"POST\",\"url\":\"$BASE/echo\"}" --allow "GET 127.0.0.1:$PORT" --allow-private-network
	jqe '.error.code == "policy_denied"'
	run req "{\"url\":\"$BASE/hello\"}" --allow "GET 127.0.0.1:$PORT" --allow-private-network
	jqe '.ok and .status == 200'
}

@test "box-http: loopback is refused without --allow-private-network" {
	run req "{\"url\":\"$BASE/hello\"}" --allow "127.0.0.1:$PORT"
	assert_success
	jqe '.ok == false and .error.code == "policy_denied" and (.error.message | contains("loopback"))'
	run req "{\"url\":\"http://localhost:$PORT/hello\"}" --allow "localhost:$PORT"
	jqe '.error.code == "policy_denied"'
	run req "{\"url\":\"http://[::ffff:127.0.0.1]:$PORT/hello\"}" --allow "http://[::ffff:127.0.0.1]:$PORT"
	jqe '.error.code == "policy_denied"'
}

@test "box-http: a redirect to an unlisted host is refused" {
	run req "{\"url\":\"$BASE/redirect?to=http://localhost:$PORT/hello\"}" $(local_flags)
	assert_success
	jqe '.ok == false and .error.code == "policy_denied" and (.error.message | contains("localhost"))'
	jqe '.error.message | startswith("redirect refused: ")'
	run req "{\"url\":\"$BASE/redirect?to=file:///etc/passwd\"}" $(local_flags)
	jqe '.error.code == "policy_denied"'
}

@test "box-http: a redirect to a listed host is followed; Authorization only stays on the same host" {
	run req "{\"url\":\"$BASE/redirect?to=/echo\",\"headers\":{\"Authorization\":\"Bearer s3cret\"}}" $(local_flags)
	jqe ".ok and .status == 200 and .url == \"$BASE/echo\""
	body=$(body_of "$output")
	jqe '.headers.authorization == "Bearer s3cret"' "$body"
	run req "{\"url\":\"$BASE/redirect?to=http://localhost:$PORT/echo\",\"headers\":{\"Authorization\":\"Bearer s3cret\",\"X-Keep\":\"1\"}}" \
		$(local_flags) --allow "localhost:$PORT"
	jqe '.ok and .status == 200'
	body=$(body_of "$output")
	jqe '.headers.authorization == null and .headers["x-keep"] == "1"' "$body"
}

@test "box-http: 303 turns POST into GET without body, 307 keeps both" {
	run req "{\"method\":\"POST\",\"url\":\"$BASE/redirect?code=303&to=/echo\",\"body_base64\":\"aGk=\"}" $(local_flags)
	body=$(body_of "$output")
	jqe '.method == "GET" and .body == "" and .headers["content-length"] == null' "$body"
	run req "{\"method\":\"POST\",\"url\":\"$BASE/redirect?code=302&to=/echo\",\"body_base64\":\"aGk=\"}" $(local_flags)
	body=$(body_of "$output")
	jqe '.method == "GET" and .body == ""' "$body"
	run req "{\"method\":\"POST\",\"url\":\"$BASE/redirect?code=307&to=/echo\",\"body_base64\":\"aGk=\"}" $(local_flags)
	body=$(body_of "$output")
	jqe '.method == "POST" and .body == "hi"' "$body"
}

@test "box-http: a redirect loop is capped" {
	run req "{\"url\":\"$BASE/loop\"}" $(local_flags)
	assert_success
	jqe '.ok == false and .error.code == "limit_exceeded" and .error.limit == "http_redirects" and .error.configured == 5'
}

@test "box-http: the response body is capped" {
	run req "{\"url\":\"$BASE/big?n=1000\"}" $(local_flags) --max-body-bytes 1000
	jqe '.ok and .status == 200'
	[ "$(body_of "$output" | wc -c)" -eq 1000 ]
	run req "{\"url\":\"$BASE/big?n=1001\"}" $(local_flags) --max-body-bytes 1000
	jqe '.ok == false and .error.code == "limit_exceeded" and .error.limit == "http_body_bytes" and .error.configured == 1000'
	# Without Content-Length the cap is enforced while reading.
	run req "{\"url\":\"$BASE/big?n=3000000&stream=1\"}" $(local_flags) --max-body-bytes 100000
	jqe '.error.code == "limit_exceeded" and .error.limit == "http_body_bytes"'
	run req "{\"url\":\"$BASE/big?n=5000&stream=1\"}" $(local_flags) --max-body-bytes 100000
	jqe '.ok and (.body_base64 | length) > 6000'
}

@test "box-http: response headers are capped in count and size" {
	run req "{\"url\":\"$BASE/headers?n=90\"}" $(local_flags)
	jqe '.ok and .headers["x-h-89"] == "v"'
	run req "{\"url\":\"$BASE/headers?n=101\"}" $(local_flags)
	jqe '.error.code == "limit_exceeded" and .error.limit == "http_header_count" and .error.configured == 100'
	run req "{\"url\":\"$BASE/headers?n=7&size=10000\"}" $(local_flags)
	jqe '.error.code == "limit_exceeded" and .error.limit == "http_header_bytes" and .error.configured == 65536'
}

@test "box-http: timeout_ms bounds the request" {
	start=$(date +%s%N)
	run req "{\"url\":\"$BASE/slow?ms=3000\",\"timeout_ms\":300}" $(local_flags)
	end=$(date +%s%N)
	assert_success
	jqe '.ok == false and .error.code == "timeout" and .error.limit == "http_timeout" and .error.configured == 300'
	[ $(((end - start) / 1000000)) -lt 2500 ]
	run req "{\"url\":\"$BASE/slow?ms=100\",\"timeout_ms\":5000}" $(local_flags)
	jqe '.ok and .status == 200'
}

@test "box-http: userinfo and fragment tricks are refused" {
	run req "{\"url\":\"http://127.0.0.1:$PORT@localhost:$PORT/hello\"}" $(local_flags)
	jqe '.ok == false and .error.code == "policy_denied"'
	run req "{\"url\":\"http://user:pw@127.0.0.1:$PORT/hello\"}" $(local_flags)
	jqe '.error.code == "policy_denied" and (.error.message | contains("credentials"))'
	run req "{\"url\":\"http://localhost:$PORT#@127.0.0.1:$PORT/hello\"}" $(local_flags)
	jqe '.error.code == "policy_denied" and (.error.message | contains("localhost"))'
}

@test "box-http: bad request fields are invalid_request with a path" {
	run req "{\"url\":\"$BASE/hello\",\"extra\":1}" $(local_flags)
	jqe '.error.code == "invalid_request" and .error.path == "$.extra"'
	run req "{\"url\":\"$BASE/hello\",\"headers\":{\"Host\":\"evil\"}}" $(local_flags)
	jqe '.error.code == "invalid_request" and .error.path == "$.headers.Host"'
	run req "{\"url\":\"$BASE/hello\",\"headers\":{\"X-A\":\"a\\r\\nX-Injected: 1\"}}" $(local_flags)
	jqe '.error.code == "invalid_request" and .error.path == "$.headers.X-A"'
	run req "{\"url\":\"$BASE/hello\",\"timeout_ms\":-1}" $(local_flags)
	jqe '.error.code == "invalid_request" and .error.path == "$.timeout_ms"'
	run req "{\"method\":\"POST\",\"url\":\"$BASE/echo\",\"body_base64\":\"***\"}" $(local_flags)
	jqe '.error.code == "invalid_request" and .error.path == "$.body_base64"'
}

@test "box-http: a malformed line is invalid_request and the next line is still served" {
	run bash -c "printf '%s\n' 'this is not json' '' '{\"url\":\"$BASE/hello\"}' | box-http $(local_flags)"
	assert_success
	[ "$(wc -l <<<"$output")" -eq 2 ]
	jqe '.[0].ok == false and .[0].error.code == "invalid_request"' "$(jq -s . <<<"$output")"
	jqe '.[1].ok == true and .[1].status == 200' "$(jq -s . <<<"$output")"
}

@test "box-http: several requests on one connection, answers in order" {
	run bash -c "printf '%s\n' '{\"url\":\"$BASE/status?code=201\"}' '{\"url\":\"http://nope.invalid/\"}' '{\"url\":\"$BASE/status?code=202\"}' | box-http $(local_flags)"
	assert_success
	jqe 'map(.status // .error.code) == [201, "policy_denied", 202]' "$(jq -s . <<<"$output")"
}
