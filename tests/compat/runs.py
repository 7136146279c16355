# SPDX-License-Identifier: MIT
"""What cpython.py and ltp.py share: the runs they compare and how a
library line is told.

Each outside suite runs twice without the library (a test whose two
results differ is flaky there, and left out) and then once per entry of
LIBRARY_RUNS: NOSIGBUS_POLICY (shm: the default, unset) and whether
nsb-compat-installer.so (installer.c) is preloaded too.  The installer
is preloaded in the runs without the library as well, so that the only
difference is the library.
"""
import os
import re

LIBRARY_RUNS = {"shm": ("shm", True), "files": ("files", True), "flag": ("flag", True),
                "shm-bare": ("shm", False)}
POLICIES = tuple(LIBRARY_RUNS)
LIBRARY_LINE = re.compile(r"^(lib)?nosigbus:.*$", re.M)


def log(*a):
    print(*a, flush=True)


def configs(preload, installer, drop=()):
    """[(label, environment)]: the two runs without the library, then one
    per LIBRARY_RUNS entry; the environment without NOSIGBUS_*,
    LD_PRELOAD and the names in drop."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("NOSIGBUS_") and k != "LD_PRELOAD" and k not in drop}
    installer = os.path.abspath(installer)
    preload = os.path.abspath(preload)
    out = [("without", dict(base, LD_PRELOAD=installer)),
           ("without-again", dict(base, LD_PRELOAD=installer))]
    for label, (policy, inst) in LIBRARY_RUNS.items():
        env = dict(base, LD_PRELOAD=f"{preload} {installer}" if inst else preload)
        if policy != "shm":
            env["NOSIGBUS_POLICY"] = policy
        out.append((label, env))
    return out
