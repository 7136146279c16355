#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CPython's signal-related test modules, without and with libnosigbus
(tests/compat/README.md).

Usage: cpython.py --preload LIB --installer SO [--python PY] [--tests T,...]

Runs Debian's CPython test suite (package libpython3.11-testsuite) on
MODULES below with `PY -m test -u subprocess,cpu -j2 --junit-xml`: twice
without the library (with the installer alone; a test case whose two
results differ is reported and left out), then once for each of
LIBRARY_RUNS: every policy with the library and the installer preloaded,
and the default policy with the library alone (LD_PRELOAD is inherited by
every worker and every child Python starts).  Each test case's result
(passed, skipped, failure, error; and missing) must be the same in every
run, and no line of the library ("nosigbus: ...") may appear on standard
error.  Each run is under timeout -s KILL.  Exit status 0: identical;
1: a difference; 77: no test suite (saying what to install).
"""
import argparse
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import runs
from runs import LIBRARY_LINE, POLICIES, log

MODULES = ("test_signal test_threadsignals test_faulthandler test_mmap test_subprocess "
           "test_os test_posix test_eintr test_pty test_wait3 test_wait4 test_fork1 "
           "test.test_asyncio.test_unix_events test.test_asyncio.test_subprocess").split()
# Test cases left out of the comparison, with the reason (found flaky
# without the library on the machine of the last run).
EXCLUDE = {
}


def cases(path):
    """{test case: result} from regrtest's JUnit XML."""
    out = {}
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        result = "passed"
        for child in case:
            if child.tag in ("skipped", "failure", "error"):
                result = child.tag
        out[case.get("name")] = result
    return out


def run(python, modules, env, workdir, timeout):
    os.makedirs(workdir, exist_ok=True)
    xml = os.path.join(workdir, "junit.xml")
    if os.path.exists(xml):
        os.unlink(xml)
    cmd = ["timeout", "-s", "KILL", str(timeout), python, "-m", "test",
           "-u", "subprocess,cpu", "-j2", "--timeout", str(timeout // 2),
           "--junit-xml", xml] + modules
    with open(os.path.join(workdir, "stdout"), "w") as out, \
         open(os.path.join(workdir, "stderr"), "w") as err:
        r = subprocess.run(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                           stdout=out, stderr=err)
    text = open(os.path.join(workdir, "stdout")).read() + open(os.path.join(workdir, "stderr")).read()
    if not os.path.exists(xml):
        return None, r.returncode, text
    return cases(xml), r.returncode, text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preload", required=True)
    ap.add_argument("--installer", required=True)
    ap.add_argument("--python", default="/usr/bin/python3.11")
    ap.add_argument("--tests", help="comma-separated modules (default: all of MODULES)")
    ap.add_argument("--workdir", default=os.environ.get("NSB_CPYTHON_WORKDIR", "/var/tmp/nsb-cpython"))
    ap.add_argument("--timeout", type=int, default=1200, help="watchdog per run, seconds")
    a = ap.parse_args()
    mul = float(os.environ.get("NSB_TIMEOUT_MULTIPLIER", "1") or 1)
    modules = a.tests.split(",") if a.tests else list(MODULES)

    probe = subprocess.run([a.python, "-c", "import test.test_signal, test.libregrtest"],
                           capture_output=True, text=True)
    if probe.returncode:
        log(f"SKIP: {a.python} has no test suite ({probe.stderr.strip().splitlines()[-1:]}); "
            "Debian: apt install libpython3.11-testsuite")
        return 77
    version = subprocess.run([a.python, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True).stdout.strip()

    configs = runs.configs(a.preload, a.installer, drop=("PYTHONPATH", "PYTHONHOME"))

    # The library is loaded and rescues under each policy in this Python.
    check = ("import os, mmap; fd = os.memfd_create('c'); os.ftruncate(fd, mmap.PAGESIZE); "
             "m = mmap.mmap(fd, mmap.PAGESIZE, flags=mmap.MAP_SHARED | 0x200000); "
             "os.ftruncate(fd, 0); print(m[0])")
    for label, env in configs[2:]:
        r = subprocess.run(["timeout", "-s", "KILL", "60", a.python, "-c", check],
                           env=env, capture_output=True, text=True)
        if r.returncode or r.stdout.strip() != "0":
            log(f"FAIL: under policy {label} the library does not rescue a truncated memfd in "
                f"{a.python} (status {r.returncode}, {r.stdout.strip()!r} {r.stderr.strip()!r})")
            return 1

    log(f"CPython {version} ({a.python}): {len(modules)} modules, {len(configs)} runs "
        f"(2 without the library, then {', '.join(POLICIES)}); watchdog {int(a.timeout * mul)} s a run")
    results = []
    for label, env in configs:
        t0 = time.monotonic()
        res, status, text = run(a.python, modules, env, os.path.join(a.workdir, label),
                                int(a.timeout * mul))
        if res is None:
            log(f"FAIL: run '{label}' wrote no results (status {status}); its last lines:")
            log("  " + "\n  ".join(text.rstrip().splitlines()[-20:]))
            return 1
        counts = {r: list(res.values()).count(r) for r in ("passed", "skipped", "failure", "error")}
        log(f"run '{label}': {len(res)} test cases, {counts}, status {status}, "
            f"{time.monotonic() - t0:.0f} s")
        lines = LIBRARY_LINE.findall(text) if label in POLICIES else []
        results.append((label, res, lines))

    failed = False
    ref = results[0][1]
    names = set()
    for _, res, _ in results:
        names |= set(res)
    flaky = sorted(n for n in names if ref.get(n, "missing") != results[1][1].get(n, "missing"))
    for n in flaky:
        log(f"flaky without the library, left out: {n}: {ref.get(n, 'missing')}, "
            f"then {results[1][1].get(n, 'missing')}")
    for n in sorted(EXCLUDE):
        log(f"excluded: {n}: {EXCLUDE[n]}")
    compared = sorted(names - set(flaky) - set(EXCLUDE))
    for label, res, lines in results[2:]:
        diff = [n for n in compared if res.get(n, "missing") != ref.get(n, "missing")]
        for n in diff:
            log(f"DIFFERENT under policy {label}: {n}: {ref.get(n, 'missing')} without the "
                f"library, {res.get(n, 'missing')} with it (output: {a.workdir}/{label})")
        for line in lines:
            log(f"DIFFERENT under policy {label}: a line of the library: {line}")
        failed |= bool(diff or lines)
        log(f"policy {label}: {len(compared) - len(diff)} of {len(compared)} test cases identical"
            + (f", {len(lines)} lines of the library" if lines else ""))
    return 1 if failed or not compared else 0


if __name__ == "__main__":
    sys.exit(main())
