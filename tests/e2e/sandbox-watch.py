# SPDX-License-Identifier: MIT
"""Watch a browser's child processes for their sandbox, until a process ends.

    python3 sandbox-watch.py PID

Run as root or as the browser's user.  Every 20 ms, each process whose
command line names a Chromium child type (--type=renderer, ...) or a
Firefox child (-contentproc ... tab) is looked at until it runs under a
seccomp filter ("Seccomp: 2" in /proc/PID/status); then it is recorded
once.  When PID ends, prints one line per sandboxed child:

    PID type=TYPE seccomp=2 userns=own|same pidns=own|same

where userns and pidns say whether the child's namespace differs from
PID's (Chromium's namespace sandbox gives its renderers both; Firefox
gives its content processes a user namespace).  Both browsers rewrite
their children's command lines as one string, so it is matched as text.
"""
import os
import re
import sys
import time


def ns(pid, name):
    try:
        return os.readlink("/proc/%s/ns/%s" % (pid, name))
    except OSError:
        return None


def main():
    root = sys.argv[1]
    base = (ns(root, "user"), ns(root, "pid"))
    seen = {}
    while os.path.exists("/proc/" + root):
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid in seen:
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    line = f.read().replace(b"\0", b" ").strip()
                with open("/proc/%s/status" % pid) as f:
                    status = f.read()
            except OSError:
                continue
            m = re.search(rb"--type=([a-z-]+)", line)
            if m:
                kind = m.group(1).decode()
            elif b" -contentproc " in line:
                kind = line.split()[-1].decode(errors="replace")
            else:
                continue
            mode = [s.split()[1] for s in status.splitlines()
                    if s.startswith("Seccomp:")]
            if not mode or mode[0] == "0":
                continue    # not (yet) sandboxed: looked at again
            seen[pid] = (kind, mode[0], ns(pid, "user") != base[0],
                         ns(pid, "pid") != base[1])
        time.sleep(0.02)
    for pid, (kind, mode, user, pidns) in sorted(seen.items()):
        print("%s type=%s seccomp=%s userns=%s pidns=%s" % (
            pid, kind, mode, "own" if user else "same",
            "own" if pidns else "same"))


if __name__ == "__main__":
    main()
