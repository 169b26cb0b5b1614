#!/usr/bin/env python3
"""Drives a command on a pseudo-terminal, as a person at a terminal would.

sb-tty.py [--rows R] [--cols C] [--timeout S] [--out FILE] SCRIPT -- CMD [ARG...]

SCRIPT holds one action a line:
  send TEXT        type TEXT (\\r is Enter, \\n, \\\\, \\xHH: \\x03 ctrl-C, \\x1a ctrl-Z, \\x04 ctrl-D)
  expect REGEX     wait until the output since the last match matches REGEX (Python re)
  until REGEX TEXT type TEXT, again every 2 s, until the output matches REGEX (no spaces in
                   REGEX: \s)
  resize ROWS COLS change the terminal's size (the command gets SIGWINCH)
  sleep SECONDS
  signal NAME      send the signal to the command (the process this script started)
  host COMMAND     run COMMAND with sh on the host; exit 4 when it fails
Every wait is bounded by --timeout (default 60 s); a missed expect prints what came and
exits 3. At the end it waits for the command, then prints "exit N" (or "signal N") and
"modes same" or "modes changed" (the terminal's modes before the command and after it).
--out FILE gets everything the command wrote, as it came.
"""
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
import fcntl


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def unescape(m):
    e = m.group(1)
    return {"r": "\r", "n": "\n", "\\": "\\"}.get(e) or chr(int(e[1:], 16))


def main():
    args = sys.argv[1:]
    rows, cols, timeout, out = 24, 80, 60.0, None
    while args and args[0].startswith("--") and args[0] != "--":
        flag, val = args[0], args[1]
        args = args[2:]
        if flag == "--rows":
            rows = int(val)
        elif flag == "--cols":
            cols = int(val)
        elif flag == "--timeout":
            timeout = float(val)
        elif flag == "--out":
            out = val
    script, cmd = args[0], args[args.index("--") + 1:]
    master, slave = os.openpty()
    set_size(slave, rows, cols)
    before = termios.tcgetattr(slave)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        os.close(master)
        os.close(slave)
        os.execvp(cmd[0], cmd)
    got = bytearray()
    mark = 0
    sink = open(out, "wb") if out else None

    def pump(wait):
        nonlocal got
        r, _, _ = select.select([master], [], [], wait)
        if not r:
            return True
        try:
            data = os.read(master, 65536)
        except OSError:
            return False
        if not data:
            return False
        got += data
        if sink:
            sink.write(data)
        return True

    with open(script) as f:
        lines = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")]
    for line in lines:
        word, _, rest = line.partition(" ")
        text = rest
        if word == "send":
            os.write(master, re.sub(r"\\(x[0-9a-fA-F]{2}|r|n|\\)", unescape, text).encode("latin-1"))
        elif word == "expect":
            pat = re.compile(text.encode("latin-1"))
            until = time.monotonic() + timeout
            while True:
                m = pat.search(got, mark)
                if m:
                    mark = m.end()
                    break
                if time.monotonic() > until or not pump(0.2):
                    if time.monotonic() <= until:
                        m = pat.search(got, mark)
                        if m:
                            mark = m.end()
                            break
                    sys.stdout.write("missed: %r\ngot: %r\n" % (text, bytes(got[mark:])[-2000:]))
                    os.kill(pid, signal.SIGKILL)
                    sys.exit(3)
        elif word == "until":
            # until REGEX TEXT: types TEXT, again every 2 s, until the output matches REGEX
            pat_text, _, keys = rest.partition(" ")
            pat = re.compile(pat_text.encode("latin-1"))
            keys = re.sub(r"\\(x[0-9a-fA-F]{2}|r|n|\\)", unescape, keys).encode("latin-1")
            until = time.monotonic() + timeout
            while True:
                os.write(master, keys)
                again = time.monotonic() + 2
                m = None
                while time.monotonic() < again and not m:
                    pump(0.1)
                    m = pat.search(got, mark)
                if m:
                    mark = m.end()
                    break
                if time.monotonic() > until:
                    sys.stdout.write("missed: %r\ngot: %r\n" % (pat_text, bytes(got[mark:])[-2000:]))
                    os.kill(pid, signal.SIGKILL)
                    sys.exit(3)
        elif word == "resize":
            r, c = rest.split()
            set_size(master, int(r), int(c))
            # the size changed on the terminal of this script: its foreground group (the
            # command) gets SIGWINCH from the kernel
        elif word == "sleep":
            until = time.monotonic() + float(rest)
            while time.monotonic() < until:
                pump(0.05)
        elif word == "signal":
            os.kill(pid, getattr(signal, rest))
        elif word == "host":
            rc = subprocess.call(["sh", "-c", rest])
            if rc != 0:
                sys.stdout.write("host command failed (%d): %s\n" % (rc, rest))
                os.kill(pid, signal.SIGKILL)
                sys.exit(4)
    until = time.monotonic() + timeout
    status = None
    while status is None:
        alive = pump(0.1)
        w, st = os.waitpid(pid, os.WNOHANG)
        if w == pid:
            status = st
            while pump(0.2):
                if not select.select([master], [], [], 0.2)[0]:
                    break
        elif time.monotonic() > until:
            os.kill(pid, signal.SIGKILL)
            sys.stdout.write("timeout; got: %r\n" % bytes(got)[-2000:])
            sys.exit(3)
        elif not alive:
            time.sleep(0.05)
    after = termios.tcgetattr(slave)
    if sink:
        sink.close()
    if os.WIFEXITED(status):
        print("exit %d" % os.WEXITSTATUS(status))
    else:
        print("signal %d" % os.WTERMSIG(status))
    print("modes same" if before == after else "modes changed")


if __name__ == "__main__":
    main()
