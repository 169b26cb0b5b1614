#!/usr/bin/env bats
# box-run: what of the caller's environment its VM child (which runs the script) and its
# box-http helper keep, read from /proc/PID/environ while both are alive.

load helpers

setup() {
	box_setup
	httpd_start "$T"
	HTTPD_PID=$(cat "$T/pid")
}

teardown() {
	if [ -n "${HELPER_PID:-}" ]; then
		kill "$HELPER_PID" 2>/dev/null || true
	fi
	if [ -n "${RUN_PID:-}" ]; then
		kill "$RUN_PID" 2>/dev/null || true
		wait "$RUN_PID" 2>/dev/null || true
	fi
	if [ -n "${HTTPD_PID:-}" ]; then
		kill "$HTTPD_PID" 2>/dev/null || true
	fi
}

# environ PID: the process's environment as the kernel shows it, one variable a line
environ() {
	tr '\0' '\n' <"/proc/$1/environ"
}

@test "the VM child keeps only TZ and box-http only the TLS and sanitizer variables, GITHUB_TOKEN in neither" {
	export GITHUB_TOKEN=ghp_leak0123456789abcdefghijklmnopqrstuv PLAIN_HOST_VAR=leak-plain
	export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt SSL_CERT_DIR=/etc/ssl/certs
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
	# the server holds the request 20 s: both processes are alive meanwhile
	box-run --allow "127.0.0.1:$PORT" --allow-private-network --timeout-ms 60000 -e '
		return http.get("http://127.0.0.1:" .. ... .. "/slow?ms=20000").status' "$PORT" \
		>"$T/out" 2>"$T/err" &
	RUN_PID=$!
	local kids="" vm="" http="" p
	for _ in $(seq 300); do
		kids=$(cat /proc/"$RUN_PID"/task/*/children 2>/dev/null || true)
		vm="" http=""
		for p in $kids; do
			case "$(cat "/proc/$p/comm" 2>/dev/null)" in
			box-http) http=$p ;;
			box-run) vm=$p ;;
			esac
		done
		[ -n "$vm" ] && [ -n "$http" ] && break
		sleep 0.1
	done
	[ -n "$vm" ] && [ -n "$http" ]
	HELPER_PID=$http
	# the caller had them, so the test can fail
	environ "$RUN_PID" | grep -q '^GITHUB_TOKEN=ghp_leak'
	environ "$RUN_PID" | grep -q '^PLAIN_HOST_VAR=leak-plain$'
	# the VM child: nothing at all in the block it was started with
	run environ "$vm"
	assert_success
	refute_output --partial leak
	refute_output --regexp '[A-Za-z_]+='
	# box-http: exactly the allowed variables, the caller's values
	run environ "$http"
	assert_success
	refute_output --partial leak
	[ -z "$(environ "$http" | grep . | grep -Ev '^(SSL_CERT_FILE|SSL_CERT_DIR|ASAN_OPTIONS|UBSAN_OPTIONS|LSAN_OPTIONS)=')" ]
	environ "$http" | grep -qx "SSL_CERT_FILE=$SSL_CERT_FILE"
	environ "$http" | grep -qx "SSL_CERT_DIR=$SSL_CERT_DIR"
	environ "$http" | grep -qx "UBSAN_OPTIONS=$UBSAN_OPTIONS"
}

@test "a script still sees UTC and os.getenv gives nothing of the caller" {
	export GITHUB_TOKEN=ghp_leak0123456789abcdefghijklmnopqrstuv TZ=America/New_York
	run --separate-stderr box-run -e 'return {os.date("!%H", 0), os.date("%H", 0), tostring(os.getenv and os.getenv("GITHUB_TOKEN"))}'
	[ "$status" -eq 0 ]
	refute_output --partial leak
	echo "$output" | jq -e '.result[0] == "00" and .result[1] == "00"'
}
