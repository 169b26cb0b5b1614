#!/usr/bin/env python3
"""bench/tty-echo.py KEYS -- CMD...: the echo latency of one key typed into CMD (a shell) on
a pseudo-terminal of its own. Waits for a prompt ('$ ' or '# '), then KEYS times types 'a' or
a backspace in turn and measures from the write of the key to its echo (the 'a', or the
backspace's ^H). Prints the median and the 90th percentile in ms, one line:
"median_ms p90_ms". Every wait is bounded (10 s)."""
import os
import select
import statistics
import struct
import sys
import termios
import time
import fcntl


def main():
    keys = int(sys.argv[1])
    cmd = sys.argv[sys.argv.index("--") + 1:]
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    pid = os.fork()
    if pid == 0:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        os.close(master)
        os.close(slave)
        os.environ["PS1"] = "$ "
        os.execvp(cmd[0], cmd)
    os.close(slave)
    got = bytearray()

    def wait_for(pred, limit=10.0):
        until = time.monotonic() + limit
        while not pred():
            left = until - time.monotonic()
            if left <= 0 or not select.select([master], [], [], left)[0]:
                sys.exit("tty-echo: no answer; got %r" % bytes(got[-200:]))
            got.extend(os.read(master, 65536))

    wait_for(lambda: got.rstrip().endswith((b"$", b"#")))
    time.sleep(0.3)
    while select.select([master], [], [], 0.1)[0]:
        os.read(master, 65536)
    samples = []
    for k in range(keys):
        key, echo = (b"a", b"a") if k % 2 == 0 else (b"\x7f", b"\x08")
        del got[:]
        t0 = time.perf_counter()
        os.write(master, key)
        wait_for(lambda: echo in got)
        samples.append((time.perf_counter() - t0) * 1000)
        # what follows the echo (the rest of an erase) is not timed
        while select.select([master], [], [], 0.002)[0]:
            os.read(master, 65536)
    os.write(master, b"\x15exit\r")
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    samples.sort()
    print("%.3f %.3f" % (statistics.median(samples), samples[int(len(samples) * 0.9)]))


if __name__ == "__main__":
    main()
