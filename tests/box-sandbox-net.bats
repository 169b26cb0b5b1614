#!/usr/bin/env bats
# box-sandbox's network: the per-session proxy is the guest's only way out, and only to what
# the operator's rules allow. Real servers: on 127.0.0.1 (the host's own, which must stay out
# of reach) and, for an "outside" host that is not loopback, in a network namespace of this
# file's own joined by a veth pair (10.213.77.0/30, created and removed here). Names are
# answered by tests/netlab.py's DNS server, which the proxy is pointed at (BOX_NET_DNS).

load helpers

OUT_IP=10.213.77.2

setup_file() {
	[ "$(id -u)" = 0 ] || return 0
	command -v ip >/dev/null && command -v openssl >/dev/null || return 0
	L=$BATS_FILE_TMPDIR/lab
	NS=boxnet$$
	mkdir -p "$L/www/simple/demo-pkg" "$L/www/files" "$L/secret"
	echo OUTSIDE-OK >"$L/www/index.html"
	echo HOST-SECRET >"$L/secret/index.html"
	python3 - "$L/www/files/demo_pkg-1.0-py3-none-any.whl" <<-'EOF'
		import sys, zipfile
		with zipfile.ZipFile(sys.argv[1], "w") as z:
		    z.writestr("demo_pkg/__init__.py", "")
		    z.writestr("demo_pkg-1.0.dist-info/METADATA",
		               "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n")
		    z.writestr("demo_pkg-1.0.dist-info/WHEEL",
		               "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
		    z.writestr("demo_pkg-1.0.dist-info/RECORD", "")
	EOF
	echo '<a href="/files/demo_pkg-1.0-py3-none-any.whl">demo_pkg-1.0-py3-none-any.whl</a>' \
		>"$L/www/simple/demo-pkg/index.html"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=pkgs.test \
		-addext subjectAltName=DNS:pkgs.test -keyout "$L/key.pem" -out "$L/cert.pem" 2>/dev/null
	# the host's own loopback server: what a guest must never reach
	python3 "$BATS_TEST_DIRNAME/netlab.py" http "$L/secret" "$L/hport" 127.0.0.1 0 \
		>/dev/null 2>&1 3>&- &
	echo $! >>"$L/pids"
	wait_file "$L/hport"
	HPORT=$(cat "$L/hport")
	# the outside host: its own namespace, the same port number as the host's secret server
	ip netns add "$NS"
	echo "$NS" >"$L/ns"
	ip link add "bxh$$" type veth peer name "bxp$$"
	ip link set "bxp$$" netns "$NS"
	ip addr add 10.213.77.1/30 dev "bxh$$"
	ip link set "bxh$$" up
	ip netns exec "$NS" ip addr add "$OUT_IP/30" dev "bxp$$"
	ip netns exec "$NS" ip link set "bxp$$" up
	ip netns exec "$NS" ip link set lo up
	ip netns exec "$NS" python3 "$BATS_TEST_DIRNAME/netlab.py" http "$L/www" "$L/oport" \
		"$OUT_IP" "$HPORT" >/dev/null 2>&1 3>&- &
	echo $! >>"$L/pids"
	ip netns exec "$NS" python3 "$BATS_TEST_DIRNAME/netlab.py" http "$L/www" "$L/sport" \
		"$OUT_IP" 0 "$L/cert.pem" "$L/key.pem" >/dev/null 2>&1 3>&- &
	echo $! >>"$L/pids"
	echo '{}' >"$L/dns.json"
	python3 "$BATS_TEST_DIRNAME/netlab.py" dns "$L/dport" "$L/dns.json" "$L/dns.log" \
		>/dev/null 2>&1 3>&- &
	echo $! >>"$L/pids"
	# a careless origin that keeps connections open and answers pipelined requests
	ip netns exec "$NS" python3 "$BATS_TEST_DIRNAME/netlab.py" keep "$L/kport" "$OUT_IP" \
		"$L/keep.log" >/dev/null 2>&1 3>&- &
	echo $! >>"$L/pids"
	wait_file "$L/oport"
	wait_file "$L/sport"
	wait_file "$L/kport"
	KPORT=$(cat "$L/kport")
	wait_file "$L/dport"
	SPORT=$(cat "$L/sport")
	BOX_NET_DNS=127.0.0.1:$(cat "$L/dport")
	export L NS HPORT SPORT KPORT BOX_NET_DNS
}

# wait_file F: F exists (at most 20 s)
wait_file() {
	local _
	for _ in $(seq 200); do [ -s "$1" ] && return 0; sleep 0.1; done
	echo "no $1" >&2
	return 1
}

teardown_file() {
	[ -n "${L:-}" ] || return 0
	[ -f "$L/pids" ] && kill $(cat "$L/pids") 2>/dev/null
	[ -f "$L/ns" ] && ip netns del "$(cat "$L/ns")" 2>/dev/null
	return 0
}

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (namespaces, a veth pair)"
	[ -n "${L:-}" ] || skip "needs ip and openssl"
	sb_setup
	# pkgs.test and *.svc.test are the outside host; host.test is the host's loopback
	cat >"$L/dns.json" <<-EOF
		{"pkgs.test": ["$OUT_IP"], "svc.test": ["$OUT_IP"], "a.svc.test": ["$OUT_IP"],
		 "host.test": ["127.0.0.1"], "meta.test": ["169.254.169.254"],
		 "lan.test": ["192.168.1.1"], "cgnat.test": ["100.64.0.1"],
		 "self.test": ["10.213.77.1"], "mcast.test": ["224.0.0.1"]}
	EOF
	: >"$L/dns.log"
}

teardown() {
	sb_teardown
}

# mk ID [CREATE-FLAG...]
mk() {
	local id=$1
	shift
	run_sb create --session "$id" --timeout-ms 120000 "$@"
	sb_ok
}

@test "an allowed host is reached with curl (HTTP, CONNECT, SOCKS5), python urllib and pip download" {
	mk n1 --allow-host "pkgs.test:$HPORT" --allow-host "pkgs.test:$SPORT" \
		--allow-host "$OUT_IP:$HPORT" --allow-host "$OUT_IP:$SPORT" --input "$L/cert.pem"
	run_sb exec n1 -- sh -c "curl -sS -m 20 http://pkgs.test:$HPORT/ &&
		curl -sS -m 20 --cacert /input/cert.pem https://pkgs.test:$SPORT/ &&
		curl -sS -m 20 -x socks5h://127.0.0.1:3128 http://pkgs.test:$HPORT/ &&
		python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://pkgs.test:$HPORT/\", timeout=20).read().decode(), end=\"\")' &&
		pip download -q --no-deps --disable-pip-version-check --no-cache-dir --trusted-host pkgs.test \
			--index-url http://pkgs.test:$HPORT/simple/ -d /tmp/dl demo-pkg >/dev/null &&
		ls /tmp/dl"
	sb_ok '.stdout == "OUTSIDE-OK\nOUTSIDE-OK\nOUTSIDE-OK\nOUTSIDE-OK\ndemo_pkg-1.0-py3-none-any.whl\n"'
	# every attempt is in the result: kind, host, port, the address checked, bytes
	jqe "[.network[] | .kind] | (index(\"http\") != null) and (index(\"connect\") != null) and (index(\"socks5\") != null)"
	jqe "all(.network[]; .verdict == \"allowed\" and .address == \"$OUT_IP\" and .host == \"pkgs.test\" and .bytes_received > 0 and .bytes_sent > 0)"
	jqe '(.network | length) >= 6'
	# the guest has the proxy in its environment and nothing else: only lo
	run_sb exec n1 -- sh -c 'echo "$HTTP_PROXY $HTTPS_PROXY $ALL_PROXY"; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
	sb_ok '.stdout | test("^http://127.0.0.1:(?<p>[0-9]+) http://127.0.0.1:\\k<p> socks5h://127.0.0.1:\\k<p>\nlo\n$")'
}

@test "unlisted host, IP literal, *.suffix vs apex, wrong port, wrong method: denied and reported" {
	mk n2 --allow-host "GET,HEAD http://*.svc.test:$HPORT" --allow-host "pkgs.test:$HPORT" \
		--allow-host "$OUT_IP:$HPORT"
	# curl_code URL [CURL-ARG...]: the HTTP status the proxy answers, and its message
	run_sb exec n2 -- sh -c "
		for u in http://a.svc.test:$HPORT/ http://svc.test:$HPORT/ http://other.test:$HPORT/ \
			http://pkgs.test:$SPORT/ http://127.0.0.1:$HPORT/ http://[::1]:$HPORT/ \
			http://$OUT_IP:$SPORT/; do
			rm -f /tmp/body
			printf '%s ' \"\$(curl -s -m 20 -x http://127.0.0.1:3128 --noproxy '' -o /tmp/body -w '%{http_code}' \"\$u\")\"
			head -c 300 /tmp/body | tr -d '\\n'; echo
		done
		printf 'POST '; curl -s -m 20 -o /tmp/body -w '%{http_code}' -d x http://a.svc.test:$HPORT/; echo
		printf 'CONNECT-wildcard '; curl -s -m 20 -p -o /dev/null -w '%{http_connect}' http://a.svc.test:$HPORT/; echo
		printf 'SOCKS-unlisted '; curl -s -m 20 -x socks5h://127.0.0.1:3128 http://other.test:$HPORT/ >/dev/null; echo \$?"
	sb_ok
	lines=$(jq -r .stdout <<<"$output")
	echo "$lines"
	assert_equal "$(sed -n 1p <<<"$lines")" "200 OUTSIDE-OK"
	assert_equal "$(sed -n 2p <<<"$lines")" "403 box network proxy: no allow rule matches svc.test:$HPORT"
	assert_equal "$(sed -n 3p <<<"$lines")" "403 box network proxy: no allow rule matches other.test:$HPORT"
	assert_equal "$(sed -n 4p <<<"$lines")" "403 box network proxy: no allow rule matches pkgs.test:$SPORT"
	assert_equal "$(sed -n 5p <<<"$lines")" "403 box network proxy: no allow rule matches 127.0.0.1:$HPORT"
	assert_equal "$(sed -n 6p <<<"$lines")" "403 box network proxy: no allow rule matches [::1]:$HPORT"
	assert_equal "$(sed -n 7p <<<"$lines")" "403 box network proxy: no allow rule matches $OUT_IP:$SPORT"
	assert_equal "$(sed -n 8p <<<"$lines")" "POST 403"
	# a method rule cannot be checked inside a tunnel: CONNECT is refused
	assert_equal "$(sed -n 9p <<<"$lines")" "CONNECT-wildcard 403"
	assert_equal "$(sed -n 10p <<<"$lines")" "SOCKS-unlisted 97"
	# every denial is in the result with its reason; nothing of them reached a server
	jqe '[.network[] | select(.verdict == "denied")] | length == 9'
	jqe '[.network[] | select(.verdict == "allowed")] | length == 1'
	jqe "any(.network[]; .method == \"POST\" and .reason == \"no allow rule matches POST http://a.svc.test:$HPORT/\")"
	jqe 'all(.network[] | select(.verdict == "denied"); .bytes_sent == 0 and .bytes_received == 0 and (has("address") | not))'
	# names were looked up only for what passed the rules (A and AAAA, once each)
	run cat "$L/dns.log"
	assert_output "a.svc.test
a.svc.test AAAA"
}

@test "a name resolving to a loopback, private, CGNAT, metadata, multicast or host address is refused" {
	mk n3 --allow-host "*.test:$HPORT"
	run_sb exec n3 -- sh -c "for h in host meta lan cgnat self mcast; do curl -s -m 20 http://\$h.test:$HPORT/; done"
	sb_ok
	refute_output --partial HOST-SECRET
	jqe "[.stdout | split(\"\n\")[] | select(length > 0)] == [
		\"box network proxy: host.test resolves to 127.0.0.1, a loopback address no rule names\",
		\"box network proxy: meta.test resolves to 169.254.169.254, a cloud metadata address no rule names\",
		\"box network proxy: lan.test resolves to 192.168.1.1, a private address no rule names\",
		\"box network proxy: cgnat.test resolves to 100.64.0.1, a shared address space (CGNAT) address no rule names\",
		\"box network proxy: self.test resolves to 10.213.77.1, a private address no rule names\",
		\"box network proxy: mcast.test resolves to 224.0.0.1, a multicast address no rule names\"]"
	jqe '[.network[] | select(.verdict == "denied" and (.reason | test("resolves to .* address no rule names")))] | length == 6'
	# a rule naming the address lets it through: the operator's choice, not the guest's
	mk n3b --allow-host "host.test:$HPORT" --allow-host "127.0.0.1:$HPORT"
	run_sb exec n3b -- curl -s -m 20 "http://host.test:$HPORT/"
	sb_ok '.stdout == "HOST-SECRET\n"'
}

@test "DNS rebinding: the proxy connects to the address it checked, with one lookup" {
	cat >"$L/dns.json" <<-EOF
		{"rebind.test": {"first": "$OUT_IP", "then": "127.0.0.1"}}
	EOF
	mk n4 --allow-host "rebind.test:$HPORT" --allow-host "$OUT_IP:$HPORT"
	run_sb exec n4 -- sh -c "for i in 1 2 3; do curl -s -m 20 http://rebind.test:$HPORT/; done;
		curl -s -m 20 -p http://rebind.test:$HPORT/; true"
	sb_ok
	refute_output --partial HOST-SECRET
	jqe '.stdout | startswith("OUTSIDE-OK\nbox network proxy: rebind.test resolves to 127.0.0.1, a loopback address no rule names\n")'
	# one query per request: no second lookup between the check and the connect
	run grep -c '^rebind.test$' "$L/dns.log"
	assert_output 4
}

@test "a program that ignores the proxy gets no connection; host loopback stays unreachable" {
	mk n5 --allow-host "pkgs.test:$HPORT" --allow-host "$OUT_IP:$HPORT"
	run_sb exec n5 -- python3 -c "
import socket
for addr in (('$OUT_IP', $HPORT), ('127.0.0.1', $HPORT), ('10.213.77.1', $HPORT)):
    s = socket.socket(); s.settimeout(5)
    try:
        s.connect(addr); print('connected', addr)
    except OSError as e:
        print('no')
try:
    socket.getaddrinfo('pkgs.test', $HPORT); print('resolved')
except OSError:
    print('no dns')
"
	sb_ok '.stdout == "no\nno\nno\nno dns\n"'
	run_sb exec n5 -- sh -c "curl -s -m 10 --noproxy '*' http://pkgs.test:$HPORT/; echo \$?"
	sb_ok '.stdout == "6\n"'
	# through the proxy, the host's loopback is neither a literal nor a name away
	run_sb exec n5 -- sh -c "curl -s -m 10 http://127.0.0.1:$HPORT/; curl -s -m 10 -x http://127.0.0.1:3128 --noproxy '' http://127.0.0.1:$HPORT/ http://localhost:$HPORT/"
	sb_ok
	refute_output --partial HOST-SECRET
}

@test "network SESSION changes a running session's rules; --events streams the attempts" {
	mk n6
	run_sb exec n6 -- sh -c "env | grep -ci _proxy; curl -s -m 10 -x http://127.0.0.1:3128 http://pkgs.test:$HPORT/"
	assert_equal "$status" 0
	jqe ".stdout == \"0\nbox network proxy: no allow rule matches pkgs.test:$HPORT\n\""
	jqe '.network[0].verdict == "denied"'
	run_sb network n6 --allow-host "pkgs.test:$HPORT" --allow-host "$OUT_IP:$HPORT"
	sb_ok ".allow_host == [\"pkgs.test:$HPORT\", \"$OUT_IP:$HPORT\"] and .deny_host == []"
	run_sb exec n6 --events -- sh -c "curl -s -m 20 http://pkgs.test:$HPORT/; curl -s -m 20 http://x.pkgs.test:$HPORT/"
	assert_equal "$status" 0
	jq -c 'select(.event == "network")' <<<"$output" >"$T/ev"
	assert_equal "$(wc -l <"$T/ev")" 2
	jqe 'select(.event == "network" and .verdict == "allowed") | .host == "pkgs.test" and .bytes_received > 0' "$(sed -n 1p "$T/ev")"
	jqe '.verdict == "denied" and .host == "x.pkgs.test"' "$(sed -n 2p "$T/ev")"
	# a deny rule wins over an allow rule, on a running session
	run_sb network n6 --deny-host pkgs.test
	sb_ok '.deny_host == ["pkgs.test"]'
	run_sb exec n6 -- curl -s -m 20 "http://pkgs.test:$HPORT/"
	sb_ok '.stdout == "box network proxy: deny rule pkgs.test matches pkgs.test\n"'
	# the rules survive a pause and resume
	run_sb pause n6
	sb_ok
	run_sb resume n6
	sb_ok
	run_sb exec n6 -- curl -s -m 20 "http://pkgs.test:$HPORT/"
	sb_ok '.network[0].verdict == "denied"'
	# bad rules: invalid_request with the member's path, nothing changed
	run_sb network n6 --allow-host 'ftp://pkgs.test'
	assert_fail invalid_request 2 '.error.path == "$.allow_host[0]"'
	run_sb network n6 --deny-host 'a b'
	assert_fail invalid_request 2 '.error.path == "$.deny_host[0]"'
	run_sb network n6
	sb_ok ".allow_host == [\"pkgs.test:$HPORT\", \"$OUT_IP:$HPORT\"] and .deny_host == [\"pkgs.test\"]"
	run_sb create --session n6x --allow-host 'nope nope'
	assert_fail invalid_request 2 '.error.path == "$.allow_host[0]"'
	[ ! -e "$BOX_STATE_DIR/sandboxes/n6x/state.json" ]
}

@test "the agent may not set network rules; the proxy bounds what a guest sends it" {
	for req in "{\"op\": \"create\", \"session\": \"n7\", \"allow_host\": [\"pkgs.test:$HPORT\"]}" \
		"{\"op\": \"network\", \"session\": \"n7\", \"allow_host\": [\"*.test:1\"]}" \
		"{\"op\": \"network\", \"session\": \"n7\", \"deny_host\": []}"; do
		run --separate-stderr box-sandbox --json --session n7 <<<"$req"
		assert_fail policy_denied 4
	done
	[ ! -e "$BOX_STATE_DIR/sandboxes/n7/state.json" ]
	mk n7 --allow-host "pkgs.test:$HPORT" --allow-host "$OUT_IP:$HPORT"
	# a head over 16 KiB, a malformed request, SOCKS5 BIND: refused, the proxy still serves
	run_sb exec n7 -- python3 -c "
import socket
def ask(data):
    s = socket.create_connection(('127.0.0.1', 3128), 20); s.settimeout(20)
    s.sendall(data)
    got = b''
    while True:
        b = s.recv(4096)
        if not b: break
        got += b
    return got
print(ask(b'GET http://pkgs.test:$HPORT/ HTTP/1.1\r\nX: ' + b'a' * 20000 + b'\r\n\r\n')[:12].decode())
print(ask(b'garbage\r\n\r\n')[:12].decode())
print(ask(b'\x05\x01\x00\x05\x02\x00\x03\x09pkgs.test\x00\x50')[:4].hex())
print(ask(b'GET http://pkgs.test:$HPORT/ HTTP/1.1\r\nHost: evil.test\r\n\r\n').split(b'\r\n')[0].decode())
for odd in (b'2130706433', b'127.1', b'0x7f.0.0.1', b'user@pkgs.test'):
    print(ask(b'GET http://' + odd + b':$HPORT/ HTTP/1.1\r\n\r\n').split(b'\r\n')[0].decode())
"
	sb_ok ".stdout == \"HTTP/1.1 431\nHTTP/1.1 400\n05000507\nHTTP/1.1 200 OK\nHTTP/1.1 400 Bad Request\nHTTP/1.1 400 Bad Request\nHTTP/1.1 400 Bad Request\nHTTP/1.1 400 Bad Request\n\""
}

@test "one request per connection: pipelined, keep-alive and smuggled requests never reach the origin" {
	mk n10 --allow-host "GET,POST http://pkgs.test:$KPORT/ok" --allow-host "$OUT_IP:$KPORT"
	: >"$L/keep.log"
	run_sb exec n10 -- python3 -c "
import socket, time
H = b'pkgs.test:$KPORT'
def req(path, host=H, method=b'GET', extra=b''):
    return method + b' http://' + host + path + b' HTTP/1.1\r\nHost: ' + host + b'\r\n' + extra + b'\r\n'
def ask(*parts):
    s = socket.create_connection(('127.0.0.1', 3128), 20); s.settimeout(30)
    got = b''
    for k, p in enumerate(parts):
        if k:
            time.sleep(0.5)
        try:
            s.sendall(p)
        except OSError:
            break
    try:
        while True:
            b = s.recv(65536)
            if not b: break
            got += b
    except OSError:
        pass
    s.close()
    return got
def show(name, got):
    print(name, got.count(b'HTTP/1.1 200'), got.split(b'\r\n')[0].decode())
# a second (and third) request after the first: another path, another host
show('pipelined', ask(req(b'/ok/1') + req(b'/admin') + req(b'/ok/x', b'evil.test:$KPORT')))
show('keep-alive', ask(req(b'/ok/2'), req(b'/admin'), req(b'/ok/y', b'evil.test:$KPORT')))
# a request hidden after a body, in the same packet or later
smug = req(b'/admin', b'pkgs.test:$KPORT')
cl = b'Content-Length: 5\r\n'
te = b'Transfer-Encoding: chunked\r\n'
show('length', ask(req(b'/ok/3', method=b'POST', extra=cl) + b'hello' + smug))
show('length-later', ask(req(b'/ok/4', method=b'POST', extra=cl), b'hel', b'lo' + smug))
show('chunked', ask(req(b'/ok/5', method=b'POST', extra=te) + b'5\r\nhello\r\n0\r\n\r\n' + smug))
show('chunked-later', ask(req(b'/ok/6', method=b'POST', extra=te), b'5;x=1\r\nhel', b'lo\r\n0\r\nT: 1\r\n\r\n' + smug))
show('chunked-bad-later', ask(req(b'/ok/7', method=b'POST', extra=te), b'5\r\nhelloXX' + smug))
# heads whose framing two parsers could read two ways: refused before any connection
for name, extra in (('cl+te', cl + te), ('cl-twice', cl + cl), ('cl-sign', b'Content-Length: +5\r\n'),
                    ('cl-huge', b'Content-Length: 99999999999999999999\r\n'),
                    ('te-list', b'Transfer-Encoding: chunked, identity\r\n'), ('te-twice', te + te),
                    ('te-space', b'Transfer-Encoding : chunked\r\n'), ('te-tab', b'Transfer-Encoding:\tchunkedx\r\n'),
                    ('obs-fold', b'X: a\r\n b\r\n'), ('bare-cr', b'X: a\rb\r\n'), ('ctl', b'X: a\x01\r\n')):
    show(name, ask(req(b'/ok/bad', method=b'POST', extra=extra) + b'0\r\n\r\n' + smug))
show('bare-lf', ask(b'GET http://pkgs.test:$KPORT/ok/bad HTTP/1.1\nHost: pkgs.test\n\n' + smug))
show('te-http10', ask(b'POST http://pkgs.test:$KPORT/ok/bad HTTP/1.0\r\n' + te + b'\r\n0\r\n\r\n'))
show('chunk-size', ask(req(b'/ok/bad', method=b'POST', extra=te) + b'zz\r\n' + smug))
"
	sb_ok
	lines=$(jq -r .stdout <<<"$output")
	echo "$lines"
	cat "$L/keep.log"
	for t in pipelined keep-alive length length-later chunked chunked-later; do
		grep -qx "$t 1 HTTP/1.1 200 OK" <<<"$lines"
	done
	grep -qx "chunked-bad-later 0 " <<<"$lines"
	for t in cl+te cl-twice cl-sign cl-huge te-list te-twice te-space te-tab obs-fold bare-cr ctl \
		bare-lf te-http10 chunk-size; do
		grep -qx "$t 0 HTTP/1.1 400 Bad Request" <<<"$lines"
	done
	# each refusal is in the result with its reason
	jqe '[.network[] | select(.verdict == "denied")] | length == 14'
	jqe 'any(.network[]; .reason == "both Content-Length and Transfer-Encoding")'
	jqe 'any(.network[]; .reason == "a folded header line (obs-fold)")'
	jqe 'any(.network[]; .reason == "the request'"'"'s chunked body is malformed: connection cut")'
	# the origin saw the first request of each connection, each body whole, and nothing else
	run cat "$L/keep.log"
	refute_output --partial admin
	refute_output --partial evil
	refute_output --partial /ok/bad
	assert_equal "$(grep -c '^GET /ok/[12] HTTP/1.1 | Host: pkgs.test:' "$L/keep.log")" 2
	assert_equal "$(grep -c "^POST /ok/[34] HTTP/1.1 | Host: pkgs.test:$KPORT | b'hello'\$" "$L/keep.log")" 2
	assert_equal "$(grep -c "^POST /ok/[56] HTTP/1.1 | Host: pkgs.test:$KPORT | b'5.*hello.r.n0.r.n.*.r.n'\$" "$L/keep.log")" 2
	assert_equal "$(grep -c . "$L/keep.log")" 6
}

@test "each exec has its own proxy port and sees only its own attempts; [::1] serves too" {
	mk n11 --allow-host "pkgs.test:$HPORT" --allow-host "$OUT_IP:$HPORT"
	# two execs started together (side by side when the session lets them overlap, else one
	# after the other): each result and each --events stream holds its own attempts only
	box-sandbox exec n11 --events -- sh -c "echo \$HTTP_PROXY; curl -s -m 20 http://a.svc.test:$HPORT/;
		sleep 4; curl -s -m 20 http://b.svc.test:$HPORT/" >"$T/a.out" 2>"$T/a.err" &
	pa=$!
	sleep 1
	box-sandbox exec n11 --events -- sh -c "echo \$HTTP_PROXY; curl -s -m 20 http://pkgs.test:$HPORT/;
		sleep 1; curl -s -m 20 http://c.svc.test:$HPORT/" >"$T/b.out" 2>"$T/b.err" &
	pb=$!
	wait "$pa"
	wait "$pb"
	cat "$T/a.out" "$T/b.out"
	a=$(jq -c 'select(.ok != null)' "$T/a.out")
	b=$(jq -c 'select(.ok != null)' "$T/b.out")
	jqe '[.network[].host] == ["a.svc.test", "b.svc.test"]' "$a"
	jqe '[.network[].host] == ["pkgs.test", "c.svc.test"]' "$b"
	assert_equal "$(jq -r 'select(.event == "network") | .host' "$T/a.out" | tr '\n' ' ')" "a.svc.test b.svc.test "
	assert_equal "$(jq -r 'select(.event == "network") | .host' "$T/b.out" | tr '\n' ' ')" "pkgs.test c.svc.test "
	aport=$(jq -r '.stdout | split("\n")[0]' <<<"$a")
	[[ $aport =~ ^http://127\.0\.0\.1:[0-9]+$ ]]
	[ "$aport" != http://127.0.0.1:3128 ]
	# an exec's port closes with it; the shared port and both ports on [::1] serve
	run_sb exec n11 -- sh -c "curl -s -m 10 -x $aport --noproxy '' http://pkgs.test:$HPORT/; echo \$?
		curl -s -m 20 -x http://[::1]:3128 --noproxy '' http://pkgs.test:$HPORT/
		curl -s -m 20 -x \"http://[::1]:\${HTTP_PROXY##*:}\" --noproxy '' http://pkgs.test:$HPORT/
		curl -s -m 20 -x socks5h://[::1]:3128 http://pkgs.test:$HPORT/"
	sb_ok '.stdout == "7\nOUTSIDE-OK\nOUTSIDE-OK\nOUTSIDE-OK\n"'
	jqe '[.network[] | .verdict] == ["allowed", "allowed", "allowed"]'
}

@test "--events gives each attempt while the command runs, once it has ended" {
	mk n13 --allow-host "pkgs.test:$HPORT" --allow-host "$OUT_IP:$HPORT"
	run_sb exec n13 --events -- sh -c "curl -s -m 20 http://pkgs.test:$HPORT/ >/dev/null
		curl -s -m 20 http://no.test:$HPORT/ >/dev/null; sleep 8; echo after"
	assert_equal "$status" 0
	# each network line comes before the output the command wrote 8 s after its attempts
	jq -r '.event // "result"' <<<"$output" | tr '\n' ' ' >"$T/order"
	assert_equal "$(cat "$T/order")" "network network stdout result "
	jqe 'select(.event == "network" and .host == "pkgs.test") | .verdict == "allowed" and .bytes_received > 0' "$(sed -n 1p <<<"$output")"
	jqe 'select(.ok != null) | [.network[].host] == ["pkgs.test", "no.test"]' "$(tail -1 <<<"$output")"
}

@test "a name whose AAAA is loopback, unique local, link-local, mapped, NAT64 or metadata is refused" {
	cat >"$L/dns.json" <<-EOF
		{"lo6.test": ["::1"], "ula.test": ["fd12::1"], "ll.test": ["fe80::1"],
		 "mapped.test": ["::ffff:127.0.0.1"], "nat64.test": ["64:ff9b::a00:1"],
		 "meta6.test": ["fd00:ec2::254"], "doc.test": ["2001:db8::1"],
		 "both.test": ["$OUT_IP", "::1"], "host6.test": ["::1"]}
	EOF
	mk n12 --allow-host "*.test:$HPORT" --allow-host "$OUT_IP:$HPORT"
	run_sb exec n12 -- sh -c "for h in lo6 ula ll mapped nat64 meta6 doc; do curl -s -m 20 http://\$h.test:$HPORT/; done
		curl -s -m 20 http://both.test:$HPORT/"
	sb_ok
	jqe "[.stdout | split(\"\n\")[] | select(length > 0)] == [
		\"box network proxy: lo6.test resolves to [::1], a loopback address no rule names\",
		\"box network proxy: ula.test resolves to [fd12::1], a unique local address no rule names\",
		\"box network proxy: ll.test resolves to [fe80::1], a link-local address no rule names\",
		\"box network proxy: mapped.test resolves to [::ffff:127.0.0.1], a loopback address no rule names\",
		\"box network proxy: nat64.test resolves to [64:ff9b::a00:1], a private address no rule names\",
		\"box network proxy: meta6.test resolves to [fd00:ec2::254], a cloud metadata address no rule names\",
		\"box network proxy: doc.test resolves to [2001:db8::1], a documentation address no rule names\",
		\"OUTSIDE-OK\"]"
	# a rule naming the address lets it through: the proxy connects to the host's [::1]
	mk n12b --allow-host "host6.test:$HPORT" --allow-host "[::1]:$HPORT"
	run_sb exec n12b -- curl -s -m 20 "http://host6.test:$HPORT/"
	sb_ok '.network[0].address == "[::1]" and (.network[0].verdict == "allowed" or .network[0].verdict == "error")'
}

@test "delete ends the proxy; it runs as nobody; the guest's listener is its own namespace's" {
	mk n8 --allow-host "pkgs.test:$HPORT"
	log=$BOX_STATE_DIR/sandboxes/n8/run/net.log
	run_sb exec n8 -- curl -s -m 20 "http://pkgs.test:$HPORT/"
	[ -e "$log" ]
	# the host has no listener on 3128 for the guest: the socket is in the guest's namespace
	run python3 -c "import socket; socket.create_connection(('127.0.0.1', 3128), 2)"
	assert_failure
	holders() { for p in /proc/[0-9]*; do ls -l "$p/fd" 2>/dev/null | grep -q "$log" && echo "${p#/proc/}"; done; true; }
	[ -n "$(holders)" ]
	# the proxy parses what the guest sends as nobody, with no_new_privs
	for pid in $(holders); do
		grep -qP '^Uid:\t65534\t65534\t65534\t65534$' "/proc/$pid/status"
		grep -qP '^NoNewPrivs:\t1$' "/proc/$pid/status"
	done
	run_sb delete n8
	sb_ok
	for _ in $(seq 100); do [ -z "$(holders)" ] && break; sleep 0.1; done
	[ -z "$(holders)" ]
}

# expose_get URL: the body of URL, tried for at most 20 s (the guest server is starting)
expose_get() {
	local _
	for _ in $(seq 100); do
		curl -s -m 5 "$1" && return 0
		sleep 0.2
	done
	return 1
}

@test "expose reaches a guest server from the host's loopback; unexpose, pause and delete close it" {
	mk n9
	run_sb expose n9 8000
	sb_ok '.guest_port == 8000 and (.host_port | type == "number") and (.url | startswith("http://127.0.0.1:"))'
	hp=$(jq -r .host_port <<<"$output")
	# the same port again is the same listener; only the host's loopback has it
	run_sb expose n9 8000
	sb_ok ".host_port == $hp"
	ss -ltnH "sport = :$hp" | grep -q "127.0.0.1:$hp"
	# an exec owns the session while it runs: the server lives as long as it does
	# the server answers one request and ends (at most 60 s)
	box-sandbox exec n9 -- sh -c 'echo guest-page >/workspace/index.html; cd /workspace; exec timeout 60 python3 -c "import http.server as h; h.HTTPServer((\"127.0.0.1\", 8000), h.SimpleHTTPRequestHandler).handle_request()"' >/dev/null 2>&1 3>&- &
	run expose_get "http://127.0.0.1:$hp/index.html"
	assert_output guest-page
	wait
	# the listener outlives the server (an empty answer or a reset, never a refusal), until
	# unexpose closes it
	run curl -s -m 5 "http://127.0.0.1:$hp/index.html"
	[[ "$status" == 52 || "$status" == 56 ]]
	run_sb unexpose n9 8000
	sb_ok '.unexposed == true and .guest_port == 8000'
	run curl -s -m 5 "http://127.0.0.1:$hp/index.html"
	assert_equal "$status" 7
	# pause closes it, and so does delete
	run_sb expose n9 8000
	sb_ok
	hp=$(jq -r .host_port <<<"$output")
	run curl -s -m 5 "http://127.0.0.1:$hp/index.html"
	[[ "$status" == 52 || "$status" == 56 ]]
	run_sb pause n9
	sb_ok
	run curl -s -m 5 "http://127.0.0.1:$hp/index.html"
	assert_equal "$status" 7
	run_sb expose n9 8000
	sb_ok
	hp=$(jq -r .host_port <<<"$output")
	run curl -s -m 5 "http://127.0.0.1:$hp/index.html"
	[[ "$status" == 52 || "$status" == 56 ]]
	run_sb delete n9
	sb_ok
	run curl -s -m 5 "http://127.0.0.1:$hp/index.html"
	assert_equal "$status" 7
	# bad ports are usage errors; nothing is exposed for a session that does not exist
	for p in 0 65536 80x -1; do
		run_sb expose n9x "$p"
		assert_equal "$status" 2
	done
	run_sb expose n9x 8000
	assert_fail not_found 6
}
