# SPDX-License-Identifier: MIT
"""core-zerorace's driver, run inside gdb (windows-run.py starts it): holds
one thread of core-zerorace-target in the making of the zero file
(rescue.c's zero_file_make, run to its return with `finish`), then lets
the other start (zerorace_go: it waits for it, so that it cannot fill
before the first is held) and runs it alone (scheduler-locking) through
its own first fill; where
that thread makes a file too, it is held after its making likewise, and
the first goes on first.  Then all run to the target's verdict.

Prints "WINDOWS PASS ..." or "WINDOWS FAIL ..." (or "WINDOWS SKIP reason").
"""
import os
import signal
import threading
import time

import gdb

state = {"ev": None}
MULT = max(1.0, float(os.environ.get("NSB_TIMEOUT_MULTIPLIER", "1") or "1"))


def kicker():
    """Wakes gdb every 2 s (times MULT): a SIGCHLD makes it ask waitpid
    again, and where it missed nothing it finds no news (see windows.py's
    watcher: gdb's run sat for good in a 6.1 machine under TCG with the
    target stopped for it)."""
    while True:
        time.sleep(2 * MULT)
        os.kill(os.getpid(), signal.SIGCHLD)


threading.Thread(target=kicker, daemon=True).start()
gdb.events.stop.connect(lambda ev: state.__setitem__("ev", ev))


def result(word, text):
    print("WINDOWS %s %s" % (word, text), flush=True)
    if gdb.selected_inferior().pid:
        gdb.execute("kill", to_string=True)
    gdb.execute("quit 0")


def go(cmd):
    state["ev"] = None
    try:
        gdb.execute(cmd, to_string=True)
    except gdb.error as e:
        result("FAIL", "%s: %s" % (cmd, e))
    if gdb.selected_inferior().pid == 0:
        result("FAIL", "the target ended during %s" % cmd)
    return state["ev"]


def stopped_at(ev, bp):
    return isinstance(ev, gdb.BreakpointEvent) and bp in ev.breakpoints


def racer(exclude):
    for t in gdb.selected_inferior().threads():
        if t == exclude:
            continue
        t.switch()
        f = gdb.newest_frame()
        while f is not None:
            if f.name() == "zerorace_racer":
                return t
            f = f.older()
    return None


gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set print thread-events off")
gdb.execute("handle SIGBUS nostop noprint pass")
gdb.execute("set breakpoint pending on")
gdb.execute("set startup-with-shell off")  # one exec, not two (windows.py)
make = gdb.Breakpoint("zero_file_make", internal=True)
done = gdb.Breakpoint("zerorace_done", internal=True)
end = gdb.Breakpoint("zerorace_verdict", internal=True)
try:
    gdb.execute("run", to_string=True)
except gdb.error as e:
    result("SKIP", "gdb cannot run the target (ptrace refused?): %s" % e)
ev = state["ev"]
if make.pending:
    result("SKIP", "no symbol for zero_file_make (a library built without it)")
if gdb.selected_inferior().pid == 0:
    result("SKIP", "the target did not run under gdb")
if not stopped_at(ev, make):
    where = [b.location for b in getattr(ev, "breakpoints", [])] or gdb.selected_frame().name()
    result("FAIL", "the first racing fill did not make the zero file (stopped: %s at %s)"
           % (type(ev).__name__, where))
first = gdb.selected_thread()
gdb.execute("set scheduler-locking on")
go("finish")                     # first: made, not yet published
second = racer(first)
if second is None:
    result("FAIL", "no second racing thread")
gdb.execute("set var zerorace_go = 1")
second.switch()
ev = go("continue")
steps = "second filled while the first was making"
if stopped_at(ev, make):         # the second makes one too
    go("finish")
    first.switch()
    if not stopped_at(go("continue"), done):
        result("FAIL", "the first thread did not end its fill")
    second.switch()
    steps = "both made a file; the first published first"
if not stopped_at(state["ev"] if stopped_at(state["ev"], done) else go("continue"), done):
    result("FAIL", "the second thread did not end its fill")
if steps.startswith("second"):
    first.switch()
    if not stopped_at(go("continue"), done):
        result("FAIL", "the first thread did not end its fill")
gdb.execute("set scheduler-locking off")
make.enabled = False
done.enabled = False
if not stopped_at(go("continue"), end):
    result("FAIL", "the target gave no verdict (stopped: %s)" % state["ev"])
ok = int(gdb.parse_and_eval("ok"))
msg = gdb.parse_and_eval("(char *)&zerorace_msg").string()
result("PASS" if ok else "FAIL", "%s: %s" % (steps, msg))
