#!/usr/bin/env bats
# box-sandbox shell and exec --tty: a terminal of the sandbox's own devpts, driven as a person
# would drive it (tests/sb-tty.py on a pseudo-terminal, and tmux): what is typed and shown,
# the window size, job control, ctrl-C, the exit status, the caller's terminal modes, and what
# is refused (no terminal on stdin, an agent's request, TIOCSTI in the guest).

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root (cgroups and namespaces as set up in CI)"
	sb_setup
	run_sb create --session tt
	sb_ok
}

teardown() {
	if [ -n "${TMUX_SOCK:-}" ]; then
		tmux -L "$TMUX_SOCK" kill-server >/dev/null 2>&1 || true
	fi
	sb_teardown
}

# drive SCRIPT-TEXT [DRIVER-FLAG...] -- CMD...: runs CMD on a pseudo-terminal of its own and
# types the script (tests/sb-tty.py); what came is in $T/out, the verdict in $output.
drive() {
	printf '%s\n' "$1" >"$T/script"
	shift
	run timeout 300 python3 "$BATS_TEST_DIRNAME/sb-tty.py" --timeout 60 --out "$T/out" "$@"
}

# result: the result object box-sandbox printed last on the terminal
result() {
	tr -d '\r' <"$T/out" | grep '^{"exit_code"' | tail -n 1
}

@test "shell: a terminal of the sandbox's own devpts, its size followed across a resize, the exit status back" {
	local host_pts
	host_pts=$(stat -c %d /dev/pts/ptmx)
	drive 'expect [#$] $
send tty; stty size; stat -c "dev=%d" /dev/pts\r
expect /dev/pts/\d+
expect 30 100
expect dev=(\d+)
send sleep 4242.5 &\r
expect \[1\] \d+
host for i in $(seq 1 100); do p=$(pgrep -f "^sleep 4242.5$") && break; sleep 0.2; done; [ -n "$p" ] || exit 1; for q in $p $(ps -o ppid= -p $p); do for f in /proc/$q/fd/*; do [ "$(stat -L -c %d $f)" != '"$host_pts"' ] || exit 1; done; done
resize 40 120
send stty size\r
expect 40 120
send kill %1; exit 7\r' --rows 30 --cols 100 "$T/script" -- box-sandbox shell tt
	assert_success
	assert_line "exit 1"
	assert_line "modes same"
	jqe '.exit_code == 7 and .ok == false and .error.code == "guest_error" and .ran == true and
		.stdout == "" and .session == "tt"' "$(result)"
	# the guest's devpts is not the host's
	local guest_dev
	guest_dev=$(tr -d '\r' <"$T/out" | sed -n 's/^dev=\([0-9]*\)$/\1/p' | head -n 1)
	[ -n "$guest_dev" ]
	[ "$guest_dev" != "$(stat -c %d /dev/pts)" ]
}

@test "shell: ctrl-C ends the foreground command, not the shell; ctrl-Z, jobs and fg work" {
	# a command prints its mark once it is the terminal's foreground job (the typed line
	# shows c""c, the output cc), and only then gets its key
	drive 'expect [#$] $
send sh -c '"'"'echo c""c; exec sleep 300'"'"'\r
expect \ncc\r
send \x03
expect \^C
expect [#$] $
send echo still-$((40+2))\r
expect still-42
send sh -c '"'"'echo z""z; exec sleep 200'"'"' && echo woke-$((1+1))\r
expect \nzz\r
send \x1a
expect Stopped
send jobs -l\r
expect \[1\]\+ +\d+ Stopped
send sleep 100 &\r
expect \[2\] \d+
send jobs\r
expect Running +sleep 100
send kill -9 %2; fg %1\r
expect sleep 200
until \n[^\n]*[#$]\s$ \x03
send exit 0\r' "$T/script" -- box-sandbox shell tt
	assert_success
	assert_line "exit 0"
	assert_line "modes same"
	# the interrupted command's echo never ran
	run ! grep -q 'woke-2' "$T/out"
	jqe '.exit_code == 0 and .ok == true' "$(result)"
}

@test "exec --tty: the exit status of the command, a signal, and the caller's modes back each time" {
	local n
	for n in 0 3 255; do
		drive 'sleep 0' "$T/script" -- box-sandbox exec tt --tty -- sh -c "test -t 0 && test -t 1 && test -t 2 && exit $n"
		assert_success
		assert_line "modes same"
		jqe ".exit_code == $n and .ran == true" "$(result)"
		if [ "$n" = 0 ]; then assert_line "exit 0"; else assert_line "exit 1"; fi
	done
	drive 'sleep 0' "$T/script" -- box-sandbox exec tt --tty -- sh -c 'kill -TERM $$'
	assert_line "exit 1"
	assert_line "modes same"
	jqe '.signal == "SIGTERM" and .exit_code == null' "$(result)"
}

@test "exec --tty: a signal to box-sandbox ends the command and restores the caller's terminal" {
	local sig
	for sig in SIGTERM SIGHUP SIGINT; do
		drive 'expect ready
signal '"$sig"'
sleep 1' "$T/script" -- box-sandbox exec tt --tty -- sh -c 'echo ready; exec sleep 300'
		assert_success
		assert_line "modes same"
		jqe '.signal == "SIGKILL" and .ran == true' "$(result)"
		# nothing of it is left in the sandbox
		run_sb exec tt -- sh -c 'ps -eo comm | grep -c "^sleep$" || true'
		jqe '.stdout == "0\n"'
	done
}

@test "exec --tty: a stdin that is no terminal is refused with usage unless --force-tty" {
	local req
	for req in "exec tt --tty -- touch /workspace/ran" "shell tt" "exec nw --tty -- touch /workspace/ran" "shell nw -- touch /workspace/ran"; do
		# shellcheck disable=SC2086
		run --separate-stderr box-sandbox $req </dev/null
		assert_fail usage 2 '.ran == false and .error.message == "'"${req%% *}"' needs a terminal on stdin (give --force-tty to relay a stdin that is none)"'
		# shellcheck disable=SC2086
		run --separate-stderr box-sandbox $req < <(echo hi)
		assert_fail usage 2 '.ran == false'
	done
	# nothing ran, and no session was made for nw
	[ ! -e "$BOX_STATE_DIR/sandboxes/nw" ]
	run_sb exec tt -- sh -c 'test -e /workspace/ran && echo ran || echo none'
	jqe '.stdout == "none\n"'
	# --stdin and --events are the terminal's to give
	run --separate-stderr box-sandbox exec tt --tty --force-tty --stdin x -- true </dev/null
	assert_fail usage 2 '.error.path == "$.stdin" and .ran == false'
	run --separate-stderr box-sandbox exec tt --tty --force-tty --events -- true </dev/null
	assert_fail usage 2 '.error.path == "$.events"'
	# with --force-tty a pipe is typed into the terminal, and its end is the terminal's EOF
	run --separate-stderr box-sandbox exec tt --tty --force-tty -- sh -c 'read a; test -t 0 && echo "got $a"; cat; exit 4' < <(printf 'hello\nrest\n')
	assert_equal "$status" 1
	assert_line --partial "got hello"
	jqe '.exit_code == 4' "$(grep '^{"exit_code"' <<<"$output" | tail -n 1)"
}

@test "an agent's request gets no terminal: shell, tty and force_tty are the operator's" {
	local req
	for req in '{"op": "shell", "session": "tt"}' \
		'{"op": "exec", "session": "tt", "argv": ["touch", "/workspace/ran"], "tty": true}' \
		'{"op": "exec", "session": "tt", "argv": ["touch", "/workspace/ran"], "force_tty": true}'; do
		run --separate-stderr box-sandbox --json --session tt <<<"$req"
		assert_fail policy_denied 4 '(.error.path == "$.op" or .error.path == "$.tty" or .error.path == "$.force_tty")'
	done
	run --separate-stderr box-sandbox --json --session tt <<<'{"op": "shell", "session": "tt"}'
	assert_fail policy_denied 4 '.error.path == "$.op" and .error.message == "shell is the operator'"'"'s: an agent'"'"'s request has no terminal"'
	run_sb exec tt -- sh -c 'test -e /workspace/ran && echo ran || echo none'
	jqe '.stdout == "none\n"'
	# --describe offers none of them to an agent
	run -0 box-sandbox --describe
	jqe '(.input_schema.properties | has("tty") or has("force_tty")) | not'
}

@test "exec --tty: megabytes of output through the terminal arrive whole" {
	drive 'sleep 0' "$T/script" -- box-sandbox exec tt --tty -- sh -c 'stty -onlcr; seq 1 400000'
	assert_success
	assert_line "modes same"
	# what the terminal got, less the result line that box-sandbox printed after it
	assert_equal "$(tr -d '\r' <"$T/out" | grep -v '^{"exit_code"' | sha256sum)" "$(seq 1 400000 | sha256sum)"
	jqe '.exit_code == 0' "$(result)"
}

@test "the guest cannot push input into its terminal (TIOCSTI) or reach the console (TIOCLINUX)" {
	drive 'sleep 0' "$T/script" -- box-sandbox exec tt --tty -- python3 -c '
import errno, fcntl, termios
for name, req, arg in (("TIOCSTI", termios.TIOCSTI, b"x"), ("TIOCLINUX", 0x541C, b"\x0c")):
    try:
        fcntl.ioctl(0, req, arg)
        print(name, "allowed")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
'
	assert_success
	run tr -d '\r' <"$T/out"
	assert_line "TIOCSTI EPERM"
	assert_line "TIOCLINUX EPERM"
}

@test "guest commands get SIGPIPE's default action and no signal ignored or blocked" {
	# a session made by a caller that ignores SIGPIPE, SIGINT and SIGQUIT (as nohup, a
	# background job of a script or a Python parent do): its processes do not pass that on
	run_sb delete tt
	sb_ok
	(trap '' PIPE INT QUIT; box-sandbox create --session tt >/dev/null)
	# signals 1-31 (glibc keeps 32 and 33 for itself: whatever a harness set there stays)
	run_sb exec tt -- bash -c 'yes | head -n 1 >/dev/null; echo "${PIPESTATUS[0]}"; grep -E "^Sig(Ign|Blk)" /proc/self/status | while read -r n m; do echo "$n $((0x$m & 0x7fffffff))"; done'
	jqe '.stdout == "141\nSigBlk: 0\nSigIgn: 0\n"'
	drive 'sleep 0' "$T/script" -- box-sandbox exec tt --tty -- bash -c 'yes | head -n 1 >/dev/null; echo "pipe=${PIPESTATUS[0]}"'
	run tr -d '\r' <"$T/out"
	assert_line "pipe=141"
}

@test "shell from tmux: typed commands, a resize of the window, the exit status" {
	command -v tmux >/dev/null || skip "tmux is not installed"
	TMUX_SOCK=box-tty-$$
	local i
	# the terminal's output goes on to the pane through tee, which keeps a copy
	cat >"$T/run.sh" <<-EOF
	box-sandbox shell tt | tee '$T/tmux-out'
	echo "rc=\${PIPESTATUS[0]}" >'$T/rc'
	sleep 600
	EOF
	tmux -L "$TMUX_SOCK" -f /dev/null new-session -d -x 100 -y 30 "bash '$T/run.sh'"
	# capture: the pane's text; wait_for TEXT: until the pane shows it (at most 60 s)
	capture() { tmux -L "$TMUX_SOCK" capture-pane -p -J -S -100; }
	wait_for() {
		for i in $(seq 1 300); do
			capture | grep -q -- "$1" && return 0
			sleep 0.2
		done
		capture >&2
		return 1
	}
	wait_for '[#$] *$'
	tmux -L "$TMUX_SOCK" send-keys 'echo typed-$((6*7)); tty; stty size' Enter
	wait_for 'typed-42'
	wait_for '^/dev/pts/[0-9]'
	wait_for '^30 100$'
	tmux -L "$TMUX_SOCK" resize-window -x 120 -y 40
	tmux -L "$TMUX_SOCK" send-keys 'clear; stty size' Enter
	wait_for '^40 120$'
	tmux -L "$TMUX_SOCK" send-keys 'exit 5' Enter
	for i in $(seq 1 300); do
		[ -s "$T/rc" ] && break
		sleep 0.2
	done
	assert_equal "$(cat "$T/rc")" "rc=1"
	jqe '.exit_code == 5' "$(tr -d '\r' <"$T/tmux-out" | grep '^{"exit_code"' | tail -n 1)"
}

@test "exec --tty: the wall time is 24 h unless given, and a given --timeout-ms holds" {
	drive 'sleep 0' "$T/script" -- box-sandbox exec tt --tty --timeout-ms 1000 -- sleep 30
	assert_line "modes same"
	jqe '.error.code == "timeout" and .resource_limit == "timeout"' "$(result)"
	# past an ordinary exec's default minute (sleep 62 takes no CPU)
	drive 'sleep 0' --timeout 200 "$T/script" -- box-sandbox exec tt --tty -- sleep 62
	assert_line "exit 0"
	jqe '.exit_code == 0 and .ok == true and .duration_ms >= 62000' "$(result)"
}

@test "exec --tty ends when its command does, however long other guest processes write to its terminal; a signal ends the wait too" {
	local t0 st=0
	# a background command keeps a writer on every terminal of the guest, for ever
	run_sb write tt /workspace/w.sh --content 'while :; do for t in /dev/pts/[0-9]*; do
		n=${t##*/}; kill -0 "$(cat /tmp/h.$n 2>/dev/null)" 2>/dev/null && continue
		sh -c "while echo x; do sleep 0.2; done" >"$t" 2>/dev/null & echo $! >/tmp/h.$n
	done; sleep 0.05; done'
	sb_ok
	run_sb exec tt --background -- sh /workspace/w.sh
	sb_ok
	t0=$(now_ms)
	timeout -s KILL 60 box-sandbox exec tt --tty --force-tty -- sh -c 'sleep 1; echo done' \
		</dev/null >"$T/out" 2>"$T/err" || st=$?
	assert_equal "$st" 0
	grep -q '^done' "$T/out"
	grep -q '"exit_code":0' "$T/out"
	# the 2 s quiet wait never comes; the 5 s bound does (wide margin for a loaded machine)
	[ $(($(now_ms) - t0)) -lt 30000 ]
	# a SIGTERM during that wait ends it at once
	t0=$(now_ms)
	box-sandbox exec tt --tty --force-tty -- sh -c 'sleep 1' </dev/null >"$T/out2" 2>&1 &
	local pid=$!
	sleep 3
	kill -TERM "$pid"
	st=0
	wait "$pid" || st=$?
	[ $(($(now_ms) - t0)) -lt 30000 ]
	run pgrep -f 'exec tt --tty'
	assert_failure
}
