#!/usr/bin/env python3
"""Concurrency of box-sandbox: 8 clients doing mixed operations on 4 sessions.

Every invocation must print exactly one JSON object whose "ok" matches its exit status (0
when ok). Every exec appends a token of its own to /workspace/tokens: at the end a token of
an exec that was ok appears exactly once, one whose exec said "ran": false never, any other
at most once. Records stay readable (status answers ok) and the sessions are deleted at the
end.

Usage: sb-soak.py STATE_DIR [SECONDS] (BOX_SOAK_SECONDS, default 15; BOX_SOAK_SEED).
"""
import collections
import json
import os
import random
import subprocess
import sys
import threading
import time

STATE = sys.argv[1]
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else float(os.environ.get("BOX_SOAK_SECONDS", "15"))
SEED = int(os.environ.get("BOX_SOAK_SEED", str(random.SystemRandom().randrange(1, 2**31))))
CLIENTS, SESSIONS = 8, 4
ENV = dict(os.environ, BOX_STATE_DIR=STATE)
PREFIX = "soak%04x" % random.Random(SEED).randrange(0x10000)
IDS = ["%s-%d" % (PREFIX, k) for k in range(SESSIONS)]
lock = threading.Lock()
problems = []
tokens = {}            # token -> (session, ok, ran)
counts = collections.Counter()


def problem(msg):
    with lock:
        problems.append(msg)


def sb(args):
    p = subprocess.run(["box-sandbox"] + args, env=ENV, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    out = p.stdout.decode("utf-8", "replace")
    lines = [l for l in out.splitlines() if l.strip()]
    what = " ".join(args[:2])
    if len(lines) != 1:
        problem("%s printed %d lines: %r" % (what, len(lines), out[:300]))
        return p.returncode, None
    try:
        o = json.loads(lines[0])
    except ValueError:
        problem("%s printed no JSON: %r" % (what, out[:300]))
        return p.returncode, None
    if not isinstance(o, dict) or bool(o.get("ok")) != (p.returncode == 0):
        problem("%s: ok %r with exit status %d: %r" % (what, o.get("ok") if isinstance(o, dict)
                                                      else None, p.returncode, out[:300]))
    return p.returncode, o


def client(n, until):
    rnd = random.Random(SEED * 31 + n)
    k = 0
    while time.time() < until:
        sid = rnd.choice(IDS)
        op = rnd.choice(["exec"] * 6 + ["status", "read", "write", "ls", "pause", "resume",
                                         "snapshot"])
        k += 1
        if op == "exec":
            tok = "t%d-%d" % (n, k)
            code, o = sb(["exec", sid, "--timeout-ms", "60000", "--", "sh", "-c",
                          "echo %s >> /workspace/tokens; sleep 0.0%d" % (tok, rnd.randrange(5))])
            if o is not None:
                if "ran" not in o:
                    problem("exec result without ran: %r" % o)
                with lock:
                    tokens[tok] = (sid, bool(o.get("ok")), o.get("ran"))
        elif op == "write":
            sb(["write", sid, "w%d.txt" % n, "--content", "client %d op %d" % (n, k)])
        elif op == "read":
            sb(["read", sid, "/workspace/tokens"])
        elif op == "ls":
            sb(["ls", sid, "/workspace"])
        else:
            sb([op, sid])
        with lock:
            counts[op] += 1


def main():
    print("seed %d prefix %s clients %d sessions %d seconds %g" % (SEED, PREFIX, CLIENTS,
                                                                   SESSIONS, SECONDS), flush=True)
    for sid in IDS:
        code, o = sb(["create", "--session", sid, "--timeout-ms", "60000"])
        if code != 0:
            print("FAIL: create %s: %r" % (sid, o))
            return 1
    until = time.time() + SECONDS
    threads = [threading.Thread(target=client, args=(n, until)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seen = collections.Counter()
    for sid in IDS:
        code, o = sb(["status", sid])
        if code != 0:
            problem("status of %s at the end: %r" % (sid, o))
        path = os.path.join(STATE, "sandboxes", sid, "workspace", "tokens")
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    seen[line.strip()] += 1
    for tok, (sid, ok, ran) in sorted(tokens.items()):
        c = seen.get(tok, 0)
        if ok and c != 1:
            problem("exec %s was ok but ran %d times" % (tok, c))
        elif ran is False and c != 0:
            problem("exec %s said ran false but ran %d times" % (tok, c))
        elif c > 1:
            problem("exec %s ran %d times" % (tok, c))
    for tok, c in seen.items():
        if tok not in tokens and c > 0:
            problem("token %s in the file but no exec answered for it" % tok)
    for sid in IDS:
        code, o = sb(["delete", sid])
        if code != 0:
            problem("delete %s: %r" % (sid, o))
    n_ok = sum(1 for v in tokens.values() if v[1])
    n_notran = sum(1 for v in tokens.values() if v[2] is False)
    print("operations: %s; execs %d (ok %d, ran false %d)" % (dict(counts), len(tokens), n_ok,
                                                              n_notran))
    if problems:
        print("FAIL (seed %d): %d problems" % (SEED, len(problems)))
        for p in problems[:20]:
            print("  " + p)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
