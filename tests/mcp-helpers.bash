# What the box-mcp suites share: installing npm packages into the build tree once (never
# committed), and starting box-mcp's HTTP server on a free port.

# npm_into DIR PACKAGE...: installs the packages into DIR unless its node_modules has them;
# sets MCP_SKIP to the reason when npm is absent or the install fails.
npm_into() {
	local dir=$1
	shift
	if ! command -v npm >/dev/null; then
		export MCP_SKIP="npm is not installed (Debian: nodejs npm)"
		return 0
	fi
	[ -f "$dir/.installed" ] && return 0
	mkdir -p "$dir"
	if (cd "$dir" && npm install --no-audit --no-fund --no-save --silent "$@" >npm.log 2>&1); then
		touch "$dir/.installed"
	else
		export MCP_SKIP="npm could not install $*: $(tail -1 "$dir/npm.log")"
	fi
}

# http_start [ARGS...]: box-mcp --http-port 0 ARGS in the background (PID), its stderr in
# $T/err; URL is where it listens (http://127.0.0.1:PORT/mcp), PORT the port.
http_start() {
	box-mcp --http-port 0 "$@" 2>"$T/err" &
	PID=$!
	local i
	for i in $(seq 100); do
		grep -q 'listening on' "$T/err" && break
		sleep 0.05
	done
	URL=$(sed -n 's/^box-mcp: listening on //p' "$T/err")
	[ -n "$URL" ] || { cat "$T/err" >&2; return 1; }
	PORT=${URL#http://127.0.0.1:}
	PORT=${PORT%/mcp}
	[[ $URL == http://127.0.0.1:*/mcp ]]
}

# http_stop: ends the server http_start started
http_stop() {
	[ -z "${PID:-}" ] || { kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; }
	PID=
}
