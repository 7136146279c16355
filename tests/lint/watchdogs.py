#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Inner watchdogs against meson's timeouts.

Usage: watchdogs.py BUILDDIR [--meson=PATH] [--unscaled] [--all]

For every test of the build (meson introspect), the watchdogs its C
sources set (core_run_watched, core_run_case_watched, core_wait_watchdog,
alarm: their seconds) against the test's meson timeout.  A hang must be
reported by the test's own watchdog message, not by meson's kill: each
watchdog must be shorter than the timeout, and scaled by
NSB_TIMEOUT_MULTIPLIER (nsbt_scaled, or core_run_case_watched which
scales), as meson's timeout scales with --timeout-multiplier.  alarm() in
a child is a last resort of the child's own.  Lists the watchdogs not
shorter than their test's timeout (with --unscaled, the unscaled ones
too; with --all, every one) and exits 1 if any is not shorter.
"""
import json
import os
import re
import subprocess
import sys

CALLS = {
    # name: index of the seconds argument, scaled by the callee?
    "core_run_watched": (2, False),
    "core_run_case_watched": (2, True),
    "core_wait_watchdog": (1, False),
    "alarm": (0, False),
}
CALL_RE = re.compile(r"\b(" + "|".join(CALLS) + r")\s*\(")


def split_args(text, start):
    """The arguments of the call whose '(' is at text[start - 1]."""
    depth, args, cur, i = 0, [], "", start
    while i < len(text):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                args.append(cur.strip())
                return args
            depth -= 1
        elif c == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
            i += 1
            continue
        cur += c
        i += 1
    return args


def watchdogs(path):
    """(line, call, seconds or None, scaled) for each watchdog in path."""
    text = open(path, encoding="utf-8").read()
    # Comments out, lines kept.
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    out = []
    for m in CALL_RE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        if re.search(r"\b(static|inline|int|void)\s*$", before) or "define" in before:
            continue  # the definition
        idx, callee_scales = CALLS[m.group(1)]
        args = split_args(text, m.end())
        if len(args) <= idx:
            continue
        arg = args[idx]
        scaled = callee_scales
        s = re.fullmatch(r"nsbt_scaled\((\d+)\)", arg)
        if s:
            arg, scaled = s.group(1), True
        if m.group(1) == "alarm" and arg == "0":
            continue  # alarm(0) cancels
        seconds = int(arg) if arg.isdigit() else None
        out.append((line, m.group(1), seconds, scaled, args[idx]))
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    show_all = "--all" in sys.argv[2:]
    show_unscaled = "--unscaled" in sys.argv[2:]
    meson = [a[len("--meson="):] for a in sys.argv[2:] if a.startswith("--meson=")]
    meson = meson[-1] if meson else "meson"
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def introspect(what):
        return json.loads(subprocess.run([meson, "introspect", what, build],
                                         check=True, capture_output=True, text=True).stdout)

    sources = {}  # executable path -> C sources
    for t in introspect("--targets"):
        for f in t.get("filename", []):
            sources[f] = [s for ts in t.get("target_sources", [])
                          for s in ts.get("sources", []) if s.endswith(".c")]
    bad = 0
    seen = set()
    for test in introspect("--tests"):
        cmd = test["cmd"]
        files = sources.get(cmd[0], [])
        if not files:
            continue
        timeout = test.get("timeout") or 30
        for f in files:
            if not f.startswith(os.path.join(src, "tests")):
                continue
            for line, call, seconds, scaled, text in watchdogs(f):
                problems = []
                if seconds is None:
                    problems.append("seconds not a number here (%s): check by hand" % text)
                else:
                    if seconds >= timeout:
                        problems.append("%d s, not shorter than meson's %d s" % (seconds, timeout))
                    if not scaled and (show_unscaled or problems):
                        problems.append("not scaled")
                key = (test["name"], f, line)
                if key in seen or not (problems or show_all):
                    continue
                seen.add(key)
                if problems and "not shorter" in problems[0]:
                    bad += 1
                print("%s (timeout %d s): %s:%d: %s(%s) %s" % (
                    test["name"], timeout, os.path.relpath(f, src), line, call, text,
                    "; ".join(problems) if problems else "ok"))
    sys.exit(1 if bad else 0)


main()
