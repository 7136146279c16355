# SPDX-License-Identifier: MIT
"""core-windows' driver, run inside gdb (windows-run.py starts it): holds
the threads of core-windows-target where a race window is open and lets
exactly one other thread run through it (see windows.c).

All-stop mode.  While the main thread is stopped at a step of the
library's path, `scheduler-locking on` runs the faulter alone: its read
ends (rescued), or it faults again and again (the records are in flux:
a fault there must come back, never be passed on), or the process dies
of SIGBUS (a window: the test fails).  A read that keeps faulting is
left with its signal pending, and goes on at the main thread's next step,
alone again: between its steps the main thread runs alone too, and once
its rounds are done (windows_rounds_done) every thread runs to the end.
Every wait for a stop is bounded (the watcher wakes gdb every 2 s and
interrupts the target after 5 or 30 s, times NSB_TIMEOUT_MULTIPLIER; see
watcher()), and so is every loop over stops: a
run that goes nowhere fails saying where, and the steps it made are
printed as it goes ("step NAME: OUTCOME"), which windows-run.py shows if
the run ends without a verdict.

Prints "WINDOWS PASS ..." or "WINDOWS FAIL ..." (or "WINDOWS SKIP reason").
"""
import faulthandler
import os
import signal
import threading
import time

import gdb

MODE = os.environ.get("WINDOWS_MODE", "points")
KIND = os.environ.get("WINDOWS_KIND", "hole")
NPAGES = 128
MAXBUS = 8  # SIGBUS deliveries in a row that mean "faults again" (flux)
# The waits for a stop scale as the tests' budgets (a TCG machine: 8).
MULT = max(1.0, float(os.environ.get("NSB_TIMEOUT_MULTIPLIER", "1") or "1"))
POINTS = ["nsb_ranges_lock", "nsb_ranges_collect", "nsb_ranges_flux", "drain_readers",
          "nsb_sys_mprotect", "nsb_sys_pkey_mprotect", "nsb_maps_each", "nsb_maps_hole",
          "nsb_ranges_cut", "nsb_ranges_insert", "nsb_ranges_join", "nsb_ranges_set_prot",
          "nsb_ranges_flux_end", "nsb_ranges_unlock", "windows_round"]
# Steps every failing mprotect passes through: if gdb cannot stop there,
# nothing was tested.
REQUIRED = ["nsb_ranges_lock", "nsb_ranges_flux", "nsb_ranges_flux_end", "nsb_ranges_unlock"]

state = {"ev": None, "exit": None}


def on_stop(ev):
    state["ev"] = ev


def on_exit(ev):
    state["exit"] = ev.exit_code if hasattr(ev, "exit_code") else "signal"


gdb.events.stop.connect(on_stop)
gdb.events.exited.connect(on_exit)


def result(word, text):
    print("WINDOWS %s %s" % (word, text), flush=True)
    if gdb.selected_inferior().pid:
        gdb.execute("kill", to_string=True)
    gdb.execute("quit 0")


def alive():
    return state["exit"] is None and gdb.selected_inferior().pid != 0 and \
        bool(gdb.selected_inferior().threads())


watch = {"deadline": None, "pid": 0, "stage": 0, "kick": 0.0, "kicks": 0}
watch_lock = threading.Lock()


def inferior_pid():
    """The target's pid: gdb's child while `run` has not returned yet."""
    if watch["pid"]:
        return watch["pid"]
    for d in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % d) as f:
                if d.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                    return int(d)
        except (OSError, ValueError, IndexError):
            pass
    return 0


def threads_state(pid):
    """The kernel's view of each of the target's threads: (all stopped by
    gdb, one line each: state, blocked and pending signals, wait channel,
    system call)."""
    lines, traced = [], True
    try:
        tids = sorted(os.listdir("/proc/%d/task" % pid), key=int)
    except OSError:
        return False, ["no /proc/%d/task" % pid]
    for tid in tids:
        base = "/proc/%d/task/%s/" % (pid, tid)
        try:
            with open(base + "stat") as f:
                st = f.read().rsplit(")", 1)[1].split()[0]
            with open(base + "status") as f:
                status = dict(line.split(":\t", 1) for line in f.read().splitlines()
                              if ":\t" in line)
            with open(base + "wchan") as f:
                wchan = f.read().strip()
            with open(base + "syscall") as f:
                sysc = f.read().split()[0]
        except OSError as e:
            lines.append("thread %s: %s" % (tid, e))
            traced = False
            continue
        traced = traced and st == "t"
        lines.append("thread %s: state %s SigBlk %s SigPnd %s ShdPnd %s wchan %s syscall %s" % (
            tid, st, status.get("SigBlk", "?").strip(), status.get("SigPnd", "?").strip(),
            status.get("ShdPnd", "?").strip(), wchan, sysc))
    return traced, lines


WHOLE = 120  # seconds (times MULT) to a verdict; windows-run.py kills gdb at 150
KICK = 2  # seconds (times MULT) between two wakings of gdb in a wait


def watcher():
    """One thread for the whole run, for a continue (or the run) that has
    not stopped yet.  Every KICK s (times MULT) it wakes gdb (SIGCHLD: gdb
    asks waitpid again): in Debian 12's 6.1 kernel under TCG, gdb's run
    sat for good with the target already stopped for it in its execve,
    until the death of the target woke it.  At the wait's deadline it
    interrupts the target (a thread blocked, e.g. on the table lock
    another holds).  10 s (times MULT) more without a stop (the running
    thread has SIGINT blocked, or gdb missed the stop all the same): it
    says what the kernel shows of each thread ("WINDOWS-HANG gdb": every
    thread is stopped for gdb, so gdb lost a stop; "WINDOWS-HANG target":
    one runs or waits with the SIGINT undelivered) and kills the target,
    so that the run ends saying where instead of hanging.  And whatever
    the driver does, it says the same and kills the target WHOLE s after
    the start."""
    whole = time.monotonic() + WHOLE * MULT
    while True:
        time.sleep(0.1)
        if whole is not None and time.monotonic() > whole:
            # Stuck where no wait is armed (in gdb itself): where the
            # driver is, and what the kernel shows of the target.
            whole = None
            pid = inferior_pid()
            traced, lines = threads_state(pid) if pid else (False, ["no target"])
            os.write(1, ("WINDOWS-HANG %s: no verdict in %d s (%s); the driver's threads:\n" % (
                "gdb" if traced else "target", WHOLE * MULT,
                "every thread of the target stopped for gdb" if traced else
                "not every thread of the target stopped")).encode())
            faulthandler.dump_traceback(file=1, all_threads=True)
            os.write(1, ("the target:\n%s\n" % "\n".join(lines)).encode())
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        with watch_lock:
            d = watch["deadline"]
            if d is None:
                continue
            now = time.monotonic()
            if now > watch["kick"]:
                # Harmless where gdb missed nothing: it asks waitpid, finds
                # no news and waits on.
                watch["kick"] = now + KICK * MULT
                watch["kicks"] += 1
                os.kill(os.getpid(), signal.SIGCHLD)
            if now <= d:
                continue
            pid = inferior_pid()
            if not pid:
                continue
            if watch["stage"] == 0:
                watch["stage"] = 1
                watch["deadline"] = now + 10 * MULT
                sig = signal.SIGINT
            else:
                watch["deadline"] = None
                traced, lines = threads_state(pid)
                os.write(1, ("WINDOWS-HANG %s: no stop after SIGINT within %d s\n%s\n" % (
                    "gdb" if traced else "target", 10 * MULT, "\n".join(lines))).encode())
                sig = signal.SIGKILL
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def arm(timeout):
    with watch_lock:
        watch["pid"] = gdb.selected_inferior().pid
        watch["stage"] = 0
        watch["kick"] = time.monotonic() + KICK * MULT
        watch["deadline"] = time.monotonic() + timeout * MULT


def disarm():
    with watch_lock:
        watch["deadline"] = None


def cont(timeout=10):
    """continue, interrupted after timeout seconds without a stop."""
    state["ev"] = None
    if not alive():
        return None
    arm(timeout)
    for _ in range(3):
        try:
            out = gdb.execute("continue", to_string=True)
        except gdb.error as e:
            out = str(e)
        if "live selected thread" not in out:
            break
        # The thread run alone is gone (a fatal signal takes the process
        # down thread by thread): the others, to the end.
        gdb.execute("set scheduler-locking off")
        threads = gdb.selected_inferior().threads()
        if not threads:
            break
        threads[0].switch()
    disarm()
    # "Program terminated with signal SIGBUS", "...not being run".
    if "terminated" in out or "not being run" in out or "exited" in out:
        if state["exit"] is None:
            state["exit"] = out.strip().splitlines()[-1] if out.strip() else "gone"
    return state["ev"]


def describe(ev):
    if isinstance(ev, gdb.SignalEvent):
        return "signal %s" % ev.stop_signal
    if isinstance(ev, gdb.BreakpointEvent):
        return "breakpoint %s" % ", ".join(str(b.location) for b in ev.breakpoints)
    return "no stop" if ev is None else type(ev).__name__


def main_alone(main, after):
    """Runs the main thread alone (scheduler-locking) to its next stop: one
    of its steps, or the end of its rounds."""
    gdb.execute("set scheduler-locking on")
    main.switch()
    ev = cont(30)
    if not alive():
        result("FAIL", "%s %s: the process ended while the main thread ran alone from %s "
               "(exit %s)" % (MODE, KIND, after, state["exit"]))
    if passed_on(ev):
        result("FAIL", "%s %s: a SIGBUS was passed on to the program (not rescued, "
               "not retried) after the main thread's step %s" % (MODE, KIND, after))
    if isinstance(ev, gdb.SignalEvent):
        why = "no next step within %d s" % (30 * MULT) if ev.stop_signal == "SIGINT" else \
            "signal %s" % ev.stop_signal
        result("FAIL", "%s %s: the main thread, run alone from %s: %s\n%s" % (
            MODE, KIND, after, why, gdb.execute("bt 12", to_string=True)))
    return ev


def find_thread(func):
    """The thread with func on its stack (selected on return)."""
    for t in gdb.selected_inferior().threads():
        t.switch()
        f = gdb.newest_frame()
        while f is not None:
            if f.name() == func:
                return t
            f = f.older()
    return None


def frame_name():
    try:
        return gdb.selected_frame().name()
    except gdb.error:
        return None


chain = {"bp": None}


def passed_on(ev):
    return isinstance(ev, gdb.BreakpointEvent) and chain["bp"] in ev.breakpoints


def run_alone(thread, stop_bp):
    """Runs thread alone until stop_bp: 'done', 'again' (it faults and
    faults: flux), 'blocked' (it waits for another thread), or 'died'."""
    gdb.execute("set scheduler-locking on")
    thread.switch()
    bus = 0
    try:
        for _ in range(4 * MAXBUS):
            ev = cont(5)
            if not alive() or passed_on(ev):
                return "died"
            if isinstance(ev, gdb.SignalEvent):
                if ev.stop_signal == "SIGBUS":
                    bus += 1
                    if bus > MAXBUS:
                        return "again"
                    continue
                if ev.stop_signal == "SIGINT":
                    return "blocked"
                result("FAIL", "%s: signal %s\n%s" % (MODE, ev.stop_signal,
                                                      gdb.execute("bt 12", to_string=True)))
            if isinstance(ev, gdb.BreakpointEvent) and stop_bp in ev.breakpoints:
                return "done"
            if ev is None and not alive():
                return "died"
        result("FAIL", "%s %s: thread %d, run alone, stopped %d times neither at its end nor "
               "by a fault (the last: %s)" % (MODE, KIND, thread.num, 4 * MAXBUS, describe(ev)))
    finally:
        if alive():
            gdb.execute("set scheduler-locking off")


def setup():
    threading.Thread(target=watcher, daemon=True).start()
    gdb.execute("set pagination off")
    gdb.execute("set confirm off")
    gdb.execute("set print thread-events off")
    gdb.execute("handle SIGBUS stop print pass")
    gdb.execute("handle SIGINT stop print nopass")
    gdb.execute("set breakpoint pending on")
    # The target execs once, not twice through a shell: gdb's run missed
    # an exec stop in the 6.1 machine (watcher()).
    gdb.execute("set startup-with-shell off")
    start = gdb.Breakpoint("windows_round")
    arm(30)  # the pid is gdb's child's until run returns
    try:
        gdb.execute("run", to_string=True)
    except gdb.error as e:
        result("SKIP", "gdb cannot run the target (ptrace refused?): %s" % e)
    disarm()
    # The main thread's own first read of page 0 (rescued) stops first.
    while alive() and isinstance(state["ev"], gdb.SignalEvent) and \
            state["ev"].stop_signal == "SIGBUS":
        cont(30)
    if not alive() or not isinstance(state["ev"], gdb.BreakpointEvent):
        result("SKIP", "the target did not reach its first round under gdb")
    start.delete()
    # The library passing a SIGBUS on to the program (which has no
    # handler: it dies of it) is the failure itself; caught here, before
    # the death, so that it is reported cleanly.
    chain["bp"] = gdb.Breakpoint("nsb_disp_chain", internal=True)
    if chain["bp"].pending:
        result("SKIP", "no symbol for nsb_disp_chain (a library built without it)")


def points():
    main = gdb.selected_thread()
    bps = {}
    for name in POINTS:
        try:
            b = gdb.Breakpoint(name, internal=True)
        except gdb.error:
            continue
        if b.pending:
            b.delete()
            continue
        b.thread = main.global_num
        bps[name] = b
    missing = [n for n in REQUIRED if n not in bps]
    if missing:
        result("SKIP", "no symbols for %s (a library built without them)" % " ".join(missing))
    last_bp = gdb.Breakpoint("windows_rounds_done", internal=True)
    last_bp.thread = main.global_num
    faulter = find_thread("faulter")
    done_bp = gdb.Breakpoint("windows_faulted", internal=True)
    done_bp.thread = faulter.global_num
    page = 1
    pending = False  # the faulter's last read still faulting (flux)
    seen = {}
    where = ["windows_round"]
    # At windows_round 0 now.  The main thread runs alone from step to
    # step.  Both once ran there: a faulter whose read was left faulting
    # (flux) faulted again at once, each fault a stop of every thread,
    # which this loop continued without bound, so a main thread that did
    # not get on meanwhile left the driver stopping and continuing for
    # ever, each stop within the watcher's time (core-windows-hole in a
    # TCG machine beside core-races: no verdict in 1 200 s).  The
    # faulter's read goes on at the next step instead, alone again.
    while True:
        ev = main_alone(main, where[0])
        if isinstance(ev, gdb.BreakpointEvent) and last_bp in ev.breakpoints:
            break
        where = [n for n, b in bps.items()
                 if isinstance(ev, gdb.BreakpointEvent) and b in ev.breakpoints]
        if not where:
            result("FAIL", "%s %s: the main thread stopped at %s, not at a step (%s)" % (
                MODE, KIND, frame_name(), describe(ev)))
        if not pending:
            # A fresh page: one the faulter has not read (while any are left).
            if page == NPAGES // 2 and KIND == "middle":
                page += 1
            if page < NPAGES:
                gdb.execute("set var target = %d" % page)
                page += 1
            gdb.execute("set var fault_go = 1")
        outcome = run_alone(faulter, done_bp)
        outcome = ("still " if pending else "") + outcome
        pending = outcome.endswith("again")
        # Where it got to, shown if the run ends without a verdict.
        print("step %s: %s" % (where[0], outcome), flush=True)
        if outcome == "died":
            result("FAIL", "%s %s: the process died while the main thread was at %s "
                   "(a read past the end of the file, not rescued)" % (MODE, KIND, where[0]))
        if outcome == "blocked":
            result("FAIL", "%s %s: the faulter, run alone, neither ended its read nor "
                   "faulted again within %d s while the main thread was at %s\n%s" % (
                       MODE, KIND, 5 * MULT, where[0], gdb.execute("bt 12", to_string=True)))
        seen.setdefault(where[0], {}).setdefault(outcome, 0)
        seen[where[0]][outcome] += 1
    # The rounds done: every thread to the end (the faulter's read left
    # faulting ends, no call changing the records now; the join).
    for b in list(bps.values()) + [last_bp]:
        b.delete()
    gdb.execute("set scheduler-locking off")
    stops = 0
    while alive():
        ev = cont(30)
        stops += 1
        if passed_on(ev):
            result("FAIL", "%s %s: a SIGBUS was passed on to the program (not rescued, "
                   "not retried) after the rounds" % (MODE, KIND))
        if isinstance(ev, gdb.SignalEvent) and ev.stop_signal != "SIGBUS":
            result("FAIL", "%s %s: signal %s in thread %d at %s after the rounds (SIGINT: no "
                   "stop within %d s)" % (MODE, KIND, ev.stop_signal, gdb.selected_thread().num,
                                          frame_name(), 30 * MULT))
        if stops > 100:
            result("FAIL", "%s %s: no end after the rounds (100 stops, the last %s)" % (
                MODE, KIND, describe(ev)))
    if state["exit"] != 0:
        result("FAIL", "%s %s: exit %s" % (MODE, KIND, state["exit"]))
    not_hit = [n for n in REQUIRED if n not in seen]
    if not_hit:
        result("FAIL", "%s %s: never stopped at %s" % (MODE, KIND, " ".join(not_hit)))
    lines = ["%-22s %s" % (n, " ".join("%s:%d" % kv for kv in sorted(o.items())))
             for n, o in seen.items()]
    result("PASS", "%s %s: every read rescued or retried (gdb woken by the watcher %d times)\n%s"
           % (MODE, KIND, watch["kicks"], "\n".join(lines)))


def remap():
    main = gdb.selected_thread()
    cut = gdb.Breakpoint("nsb_ranges_insert", internal=True)
    if cut.pending:
        result("SKIP", "no symbol for nsb_ranges_insert (a library built without it)")
    cut.thread = main.global_num
    # 1. The failing mprotect stopped between the cut of its records and
    #    their insert (resync), alone.
    gdb.execute("set scheduler-locking on")
    ev = cont(30)
    if not (isinstance(ev, gdb.BreakpointEvent) and cut in ev.breakpoints):
        result("FAIL", "remap: the failing mprotect never put records back (%s)" % frame_name())
    cut.delete()
    gdb.execute("set scheduler-locking off")
    # 2. The remapper's mmap(MAP_FIXED) begins meanwhile (alone: it
    #    blocks on the table lock, or goes on if it took no lock).
    remapper = find_thread("remapper")
    rec = gdb.Breakpoint("nsb_ranges_insert", internal=True)
    rec.thread = remapper.global_num
    done_r = gdb.Breakpoint("windows_remapped", internal=True)
    done_r.thread = remapper.global_num
    remapper.switch()
    gdb.execute("set var remap_go = 1")
    outcome = run_alone(remapper, rec)
    # 3. Everyone runs until the remapper is past its system call, at its
    #    record (the mprotect ends first: it holds the lock).
    if outcome != "done":
        main.switch()
        ev = cont(30)
        if not (isinstance(ev, gdb.BreakpointEvent) and rec in ev.breakpoints):
            result("FAIL", "remap: the remapper never reached its record (%s)" % frame_name())
    rec.delete()
    # 4. The faulter reads page 0 of the new mapping, alone.
    faulter = find_thread("faulter")
    if faulter is None:
        result("FAIL", "remap: no faulter thread\n" + gdb.execute("thread apply all bt 4", to_string=True))
    done_f = gdb.Breakpoint("windows_faulted", internal=True)
    done_f.thread = faulter.global_num
    faulter.switch()
    gdb.execute("set var target = 0")
    gdb.execute("set var fault_go = 1")
    outcome = run_alone(faulter, done_f)
    if outcome == "died":
        result("FAIL", "remap: the process died: a read of the fresh mapping between its "
               "mmap and its record was passed on (not rescued, not retried)")
    # 5. All run to the end.
    for b in (done_r, done_f):
        b.delete()
    gdb.execute("set var release = 1")
    main.switch()
    while alive():
        ev = cont(30)
        if passed_on(ev):
            result("FAIL", "remap: a SIGBUS was passed on to the program at the end")
        if isinstance(ev, gdb.SignalEvent) and ev.stop_signal not in ("SIGBUS",):
            result("FAIL", "remap: signal %s at the end" % ev.stop_signal)
    if state["exit"] != 0:
        result("FAIL", "remap: exit %s" % state["exit"])
    result("PASS", "remap: the read during the fresh mapping's window was %s (gdb woken by the "
           "watcher %d times)" % (outcome, watch["kicks"]))


setup()
if MODE == "remap":
    remap()
else:
    points()
