#!/usr/bin/env python3
"""Crash safety of box-sandbox: SIGKILL at random points of create, exec, pause, resume,
snapshot, restore and delete.

After every operation (killed or not):
  - a run that was not killed printed exactly one JSON object, whose "ok" matches its exit
    status;
  - the session's record, when there is one, is readable (status answers with one JSON
    object, ok true);
  - no stray instance: every group of the session is the one its record names or the one
    its instance.json notes (which the next start or delete ends).
At the end, and every tenth operation, an exec must work (the session is usable), and at the
end delete must leave no group, no process of the session and no mount under the state
directory.

Usage: sb-crash.py STATE_DIR [ITERATIONS] (BOX_CRASH_ITERATIONS, default 100; BOX_CRASH_SEED
for a given seed). Prints the seed first; exits 1 with the reason on the first violation.
"""
import glob
import json
import os
import random
import signal
import subprocess
import sys
import time

STATE = sys.argv[1]
ITER = int(sys.argv[2]) if len(sys.argv) > 2 else int(os.environ.get("BOX_CRASH_ITERATIONS", "100"))
SEED = int(os.environ.get("BOX_CRASH_SEED", str(random.SystemRandom().randrange(1, 2**31))))
rnd = random.Random(SEED)
SID = "crash%04x" % rnd.randrange(0x10000)
ENV = dict(os.environ, BOX_STATE_DIR=STATE)
SDIR = os.path.join(STATE, "sandboxes", SID)
log = []


def fail(msg):
    print("FAIL (seed %d, session %s): %s" % (SEED, SID, msg))
    print("last operations:")
    for line in log[-12:]:
        print("  " + line)
    sys.exit(1)


def sb(*args, timeout=120):
    p = subprocess.run(["box-sandbox"] + list(args), env=ENV, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def one_json(out, what):
    lines = [l for l in out.splitlines() if l.strip()]
    if len(lines) != 1:
        fail("%s printed %d lines, not one JSON object: %r" % (what, len(lines), out[:500]))
    try:
        o = json.loads(lines[0])
    except ValueError:
        fail("%s printed no JSON: %r" % (what, out[:500]))
    if not isinstance(o, dict):
        fail("%s printed no object" % what)
    return o


def killed_run(args, max_delay):
    """Runs box-sandbox ARGS, killed with SIGKILL after a random delay (or not at all)."""
    p = subprocess.Popen(["box-sandbox"] + args, env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=False)
    delay = None if rnd.random() < 0.25 else rnd.uniform(0, max_delay)
    if delay is not None:
        try:
            p.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
    out, err = p.communicate(timeout=180)
    return p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def cg_root():
    for d in ("/sys/fs/cgroup/pids/box", "/sys/fs/cgroup/box"):
        if os.path.isdir(d):
            return d
    return None


def groups():
    r = cg_root()
    if not r:
        return set()
    return {os.path.basename(d) for d in glob.glob(os.path.join(r, SID + "-*"))}


def recorded():
    try:
        with open(os.path.join(SDIR, "state.json")) as f:
            rec = json.load(f)
        return ((rec.get("provider_data") or {}).get("holder") or {}).get("cgroup_name")
    except (OSError, ValueError, AttributeError):
        return None


def noted():
    try:
        with open(os.path.join(SDIR, "instance.json")) as f:
            return json.load(f).get("cgroup_name")
    except (OSError, ValueError, AttributeError):
        return None


def exists():
    return os.path.exists(os.path.join(SDIR, "state.json"))


def check(what):
    if exists():
        code, out, err = sb("status", SID)
        o = one_json(out, "status after " + what)
        if code != 0 or not o.get("ok"):
            fail("status after %s: exit %d %r %s" % (what, code, out[:300], err[:300]))
    else:
        code, out, err = sb("status", SID)
        o = one_json(out, "status after " + what)
        if code == 0 or (o.get("error") or {}).get("code") != "not_found":
            fail("status of no session after %s: exit %d %r" % (what, code, out[:300]))
    allowed = {recorded(), noted()} - {None}
    stray = groups() - allowed
    if stray:
        fail("stray instance after %s: %s (record %s, noted %s)" % (what, sorted(stray),
                                                                   recorded(), noted()))


def usable(what):
    code, out, err = sb("exec", SID, "--timeout-ms", "60000", "--", "sh", "-c",
                        "echo ok; ls /workspace >/dev/null")
    o = one_json(out, "exec after " + what)
    if code != 0 or not o.get("ok") or o.get("stdout") != "ok\n" or o.get("ran") is not True:
        fail("the session is not usable after %s: exit %d %r %s" % (what, code, out[:400],
                                                                     err[:300]))


def main():
    print("seed %d session %s iterations %d" % (SEED, SID, ITER), flush=True)
    digest = None
    n_killed = 0
    t0 = time.time()
    for i in range(ITER):
        if not exists():
            op = rnd.choice(["create", "create", "exec"])
        else:
            op = rnd.choice(["exec", "exec", "pause", "resume", "snapshot", "restore", "delete",
                             "create"])
        # the delays are about what each operation takes here: most runs are killed
        if op == "create":
            args, delay = ["create", "--session", SID, "--timeout-ms", "60000"], 0.15
        elif op == "exec":
            args = ["exec", SID, "--timeout-ms", "60000", "--", "sh", "-c",
                    "echo %d >> /workspace/log; sleep 0.0%d" % (i, rnd.randrange(10))]
            delay = 0.08
        elif op == "restore":
            if not digest:
                op, args, delay = "snapshot", ["snapshot", SID], 0.1
            else:
                args, delay = ["restore", SID, digest], 0.2
        elif op == "snapshot":
            args, delay = ["snapshot", SID], 0.1
        else:
            args, delay = [op, SID], 0.05
        code, out, err = killed_run(args, delay)
        killed = code == -signal.SIGKILL
        n_killed += killed
        what = "%s%s (iteration %d)" % (op, " killed" if killed else "", i)
        log.append(what + ": exit %s %s" % (code, out.strip()[:160]))
        if not killed:
            o = one_json(out, what)
            if bool(o.get("ok")) != (code == 0):
                fail("%s: ok %s but exit status %d" % (what, o.get("ok"), code))
            if op == "snapshot" and o.get("ok"):
                digest = o.get("digest")
            if op == "delete" and o.get("ok"):
                digest = None
        check(what)
        if i % 10 == 9 and exists():
            usable(what)
    if not exists():
        code, out, err = sb("create", "--session", SID)
        if code != 0:
            fail("create at the end: %r %s" % (out[:300], err[:300]))
    usable("the last operation")
    code, out, err = sb("delete", SID)
    o = one_json(out, "the last delete")
    if code != 0 or not o.get("ok"):
        fail("the last delete: exit %d %r %s" % (code, out[:300], err[:300]))
    time.sleep(0.2)
    if groups():
        fail("groups left after delete: %s" % sorted(groups()))
    if os.path.exists(SDIR):
        fail("%s left after delete" % SDIR)
    with open("/proc/self/mountinfo") as f:
        if any(STATE in line for line in f):
            fail("a mount under the state directory is left")
    print("ok: %d operations, %d killed, %.1f s" % (ITER, n_killed, time.time() - t0))


if __name__ == "__main__":
    main()
