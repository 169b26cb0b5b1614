#!/usr/bin/env python3
"""bench/interleave.py RUNS CMD_A CMD_B: runs A and B alternately RUNS times each (after a
few warm-up pairs), each as a whole process spawned directly (shlex-split, no shell), and
prints one line: the median and the minimum wall time of each, in ms, and the ratios B/A of
the medians and of the minima. Alternating keeps a change in the machine's load from falling
on one command only; the minimum is the run least disturbed by other work."""
import os
import shlex
import statistics
import sys
import time


def once(argv):
    devnull = os.open(os.devnull, os.O_WRONLY)
    t0 = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[
        (os.POSIX_SPAWN_DUP2, devnull, 1)])
    # waits for the process itself only: what a caller of the command waits for
    os.waitpid(pid, 0)
    t1 = time.perf_counter()
    os.close(devnull)
    return t1 - t0


def main():
    runs = int(sys.argv[1])
    cmds = [shlex.split(c) for c in sys.argv[2:4]]
    times = [[], []]
    for i in range(runs + max(3, runs // 10)):
        for k in (0, 1) if i % 2 == 0 else (1, 0):
            t = once(cmds[k])
            if i >= max(3, runs // 10):
                times[k].append(t)
    med = [statistics.median(t) * 1000 for t in times]
    low = [min(t) * 1000 for t in times]
    print("A median %.2f ms min %.2f ms, B median %.2f ms min %.2f ms: "
          "ratio of medians %.2f, of minima %.2f" %
          (med[0], low[0], med[1], low[1], med[1] / med[0], low[1] / low[0]))


if __name__ == "__main__":
    main()
