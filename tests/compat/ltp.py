#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Linux Test Project's signal and mapping tests, without and with
libnosigbus (tests/compat/README.md).

Usage: ltp.py --preload LIB --installer SO [--cache DIR] [--only NAME,...]

Runs every test of LTP's runtest/syscalls whose program is in one of DIRS
below: twice without the library (with the installer alone; a test whose
two runs differ is reported and left out), then once for each of
LIBRARY_RUNS: every policy with the library and the installer preloaded,
and the default policy with the library alone.  A test's result is its
exit status and the count of each of TPASS, TFAIL, TBROK, TCONF and TWARN
in its output (LTP's summary block when it prints one, its result lines
otherwise); it must be the same in every run but where EXPECTED says the
policy differs by design.  No line of the library
("nosigbus: ...") may appear.  Each run is under timeout -s KILL, in a
session of its own whose every process is killed when it ends.

LTP is not packaged in Debian: the source comes from NSB_LTP_SRC (a source
tree or a git directory), else from a shallow git clone of GitHub's
linux-test-project/ltp; it is built once, the parts needed only, in the
cache (default /var/tmp/nsb-ltp).  Without a source this exits 77, saying
why.  Exit status 0: identical; 1: a difference or a build failure.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

import runs
from runs import LIBRARY_LINE, POLICIES, log

DIRS = ("rt_sigaction rt_sigprocmask rt_sigqueueinfo rt_sigsuspend rt_sigtimedwait "
        "sigaction sigaltstack sighold signal sigpending sigprocmask sigrelse "
        "sigsuspend sigtimedwait sigwait sigwaitinfo kill tgkill pause "
        "pidfd_send_signal signalfd signalfd4 rt_tgsigqueueinfo getcontext "
        "fork vfork clone clone3 execve execveat close_range "
        "mmap mremap mprotect madvise munmap memfd_create").split()
RESULTS = ("TPASS", "TFAIL", "TBROK", "TCONF", "TWARN")
GIT_URL = "https://github.com/linux-test-project/ltp"
# Tests left out of the comparison, with the reason (found flaky or
# different without the library on the machine of the last run).
EXCLUDE = {
    "fork13": "a pid-reuse stress run of 600 s (its LTP runtime), six times: an hour",
}
# Differences the library makes by design, per policy: printed, not failed.
EXPECTED = {
    ("mmap13", "files"): "a read past the end of a file on disk gets SIGBUS without the "
    "library; NOSIGBUS_POLICY=files protects every regular file, so it gets zeros "
    "(libnosigbus(7), \"Which mappings are protected\")",
}


def sh(cmd, cwd, logf, timeout):
    with open(logf, "a") as f:
        f.write(f"$ {' '.join(cmd)}  (in {cwd})\n")
        f.flush()
        return subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                              timeout=timeout).returncode


def obtain(cache):
    """The source tree in cache/src, or None and the reason."""
    src = os.path.join(cache, "src")
    if os.path.isfile(os.path.join(src, "runtest", "syscalls")):
        return src, None
    os.makedirs(cache, exist_ok=True)
    tmp = src + ".new"
    shutil.rmtree(tmp, ignore_errors=True)
    given = os.environ.get("NSB_LTP_SRC")
    try:
        if given and os.path.isfile(os.path.join(given, "runtest", "syscalls")):
            shutil.copytree(given, tmp, symlinks=True)
        elif given:
            os.makedirs(tmp)
            git = subprocess.Popen(["git", "--git-dir", given, "archive", "HEAD"],
                                   stdout=subprocess.PIPE)
            tar = subprocess.run(["tar", "-x", "-C", tmp], stdin=git.stdout)
            if git.wait() or tar.returncode:
                return None, f"NSB_LTP_SRC={given} is neither an LTP tree nor its git directory"
        else:
            r = subprocess.run(["git", "clone", "-q", "--depth", "1", GIT_URL, tmp],
                               timeout=600, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
            if r.returncode:
                return None, (f"cannot clone {GIT_URL} ({r.stderr.strip()[-200:]}); "
                              "set NSB_LTP_SRC to an LTP source tree or git directory")
        commit = subprocess.run(["git", "--git-dir", given or os.path.join(tmp, ".git"),
                                 "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        if commit:
            with open(os.path.join(tmp, ".nsb-commit"), "w") as f:
                f.write(f"commit {commit}\n")
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"cannot obtain LTP's source: {e}"
    os.rename(tmp, src)
    return src, None


def build(src, cache):
    """Builds LTP's lib once and each of DIRS not built yet (listed in
    cache/built); returns an error or None."""
    stamp = os.path.join(cache, "built")
    done = open(stamp).read().split() if os.path.isfile(stamp) else []
    steps = []
    if "lib" not in done:
        steps += [("lib", ["make", "autotools"]), ("lib", ["./configure"]),
                  ("lib", ["make", "-j2", "-C", "lib"])]
    steps += [(d, ["make", "-j2", "-C", f"testcases/kernel/syscalls/{d}"])
              for d in DIRS if d not in done]
    if not steps:
        return None
    for tool in ("make", "autoconf", "automake", "pkg-config", "gcc"):
        if not shutil.which(tool):
            return f"{tool} is not installed (Debian: apt install make autoconf automake pkg-config gcc)"
    logf = os.path.join(cache, "build.log")
    log(f"building LTP in {src} (log: {logf}); cached for the next runs")
    for i, (what, cmd) in enumerate(steps):
        if sh(cmd, src, logf, 1800):
            return f"{' '.join(cmd)} failed: see {logf}"
        if i + 1 == len(steps) or steps[i + 1][0] != what:
            with open(stamp, "a") as f:
                f.write(what + "\n")
    return None


def tests(src):
    """(name, argv, directory) of runtest/syscalls' entries in DIRS."""
    out = []
    for line in open(os.path.join(src, "runtest", "syscalls")):
        words = line.split()
        if not words or words[0].startswith("#") or len(words) < 2:
            continue
        for d in DIRS:
            path = os.path.join(src, "testcases/kernel/syscalls", d)
            if os.path.isfile(os.path.join(path, words[1])):
                out.append((words[0], words[1:], path))
                break
    return out


def outcome(text, status):
    """Exit status and the count of each result: LTP's summary block where
    there is one (the new library), its result lines otherwise."""
    summary = dict(re.findall(r"^(passed|failed|broken|skipped|warnings)\s+(\d+)$", text, re.M))
    if len(summary) == 5:
        counts = "passed {passed} failed {failed} broken {broken} skipped {skipped} warnings {warnings}".format(**summary)
    else:
        found = re.findall(r"\b(" + "|".join(RESULTS) + r")\b", text)
        counts = " ".join(f"{r} {found.count(r)}" for r in RESULTS)
    return f"status {status}; {counts}"


def kill_session(sid):
    """SIGKILL to every process left in session sid: LTP's tests put their
    children in process groups of their own, which timeout(1) does not
    reach."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2:].split()[3]) == sid:
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass


def run(argv, cwd, env, timeout, tmp):
    env = dict(env, TMPDIR=tmp, LTP_COLORIZE_OUTPUT="0",
               PATH=cwd + os.pathsep + env.get("PATH", "/usr/bin:/bin"))
    cmd = ["timeout", "-s", "KILL", str(timeout), os.path.join(cwd, argv[0])] + argv[1:]
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout + 10)
    except subprocess.TimeoutExpired:
        kill_session(p.pid)
        out, err = p.communicate()
    kill_session(p.pid)
    out = out.decode(errors="replace")
    err = err.decode(errors="replace")
    status = "killed by the watchdog" if p.returncode in (-9, 137) else p.returncode
    return outcome(out + "\n" + err, status), out + err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preload", required=True)
    ap.add_argument("--installer", required=True)
    ap.add_argument("--cache", default=os.environ.get("NSB_LTP_CACHE", "/var/tmp/nsb-ltp"))
    ap.add_argument("--only", help="comma-separated test names")
    ap.add_argument("--timeout", type=int, default=300, help="watchdog per run, seconds")
    a = ap.parse_args()
    mul = float(os.environ.get("NSB_TIMEOUT_MULTIPLIER", "1") or 1)

    src, why = obtain(a.cache)
    if src is None:
        log(f"SKIP: {why}")
        return 77
    err = build(src, a.cache)
    if err:
        log(f"FAIL: {err}")
        return 1
    head = os.path.join(src, ".nsb-commit")
    if os.path.isfile(head):
        log(f"LTP {open(head).read().strip()}")
    todo = tests(src)
    if a.only:
        names = a.only.split(",")
        todo = [t for t in todo if t[0] in names]
    if not todo:
        log("FAIL: no LTP test found for the directories: " + " ".join(DIRS))
        return 1

    configs = runs.configs(a.preload, a.installer)

    tmp = os.path.join(a.cache, "tmp")
    os.makedirs(tmp, exist_ok=True)
    same = differ = flaky = excluded = expected = 0
    start = time.monotonic()
    log(f"{len(todo)} LTP tests, {len(configs)} runs each (2 without the library, "
        f"then {', '.join(POLICIES)}); watchdog {int(a.timeout * mul)} s a run")
    for name, argv, cwd in todo:
        if name in EXCLUDE:
            excluded += 1
            log(f"excluded {name}: {EXCLUDE[name]}")
            continue
        results = []
        t0 = time.monotonic()
        for label, env in configs:
            res, text = run(argv, cwd, env, int(a.timeout * mul), tmp)
            if label in POLICIES and LIBRARY_LINE.search(text):
                res += "; a line of the library: " + LIBRARY_LINE.search(text).group(0)
            results.append((label, res, text))
        ref = results[0][1]
        if results[1][1] != ref:
            flaky += 1
            log(f"flaky {name}: without the library '{ref}', then '{results[1][1]}': left out")
            continue
        bad = [(lab, res, text) for lab, res, text in results[2:] if res != ref]
        for lab, res, _ in [b for b in bad if (name, b[0]) in EXPECTED]:
            expected += 1
            log(f"expected {name} under policy {lab}: '{res}', without the library '{ref}': "
                f"{EXPECTED[(name, lab)]}")
        bad = [b for b in bad if (name, b[0]) not in EXPECTED]
        if bad:
            differ += 1
            log(f"DIFFERENT {name} ({' '.join(argv)}, in {cwd}): without the library '{ref}'")
            for lab, res, text in bad:
                log(f"  policy {lab}: '{res}'; its output:")
                log("    " + "\n    ".join(text.rstrip().splitlines()[-25:]))
            log("  its output without the library:")
            log("    " + "\n    ".join(results[0][2].rstrip().splitlines()[-25:]))
        else:
            same += 1
            log(f"same {name}: {ref} ({time.monotonic() - t0:.0f} s)")
    log(f"LTP: {same} identical, {differ} different, {flaky} flaky without the library, "
        f"{excluded} excluded, {expected} expected differences; {int(time.monotonic() - start)} s")
    return 1 if differ or not same else 0


if __name__ == "__main__":
    sys.exit(main())
