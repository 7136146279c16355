#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Each test's outcome in a Google Test run's text output (wlcs.bats).

    gtest-outcomes.py OUTPUT

prints one line per test that started, "NAME OUTCOME", sorted by name:
OUTCOME is OK, FAILED, SKIP (wlcs's own line for a test that needs an
extension the compositor lacks), or CRASHED when the run ended inside the
test.  The text, not --gtest_output=xml: wlcs 1.5 reports its skips only
there ("[     SKIP ] NAME"), and writes them as failures in the XML.
"""
import re
import sys

RUN = re.compile(r"^\[ RUN      \] (\S+)$")
END = re.compile(r"^\[ +(OK|FAILED|SKIP) +\] ([^ ,]+)")


def outcomes(lines):
    result = {}
    current = None
    for line in lines:
        line = line.rstrip("\n")
        m = RUN.match(line)
        if m:
            current = m.group(1)
            result[current] = "CRASHED"
            continue
        m = END.match(line)
        if m and m.group(2) == current:
            result[current] = m.group(1)
            current = None
    return result


def main():
    with open(sys.argv[1], errors="replace") as f:
        result = outcomes(f)
    for name in sorted(result):
        print(name, result[name])


if __name__ == "__main__":
    main()
