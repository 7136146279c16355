# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Loaded by tests/e2e/*.bats (load common).  Paths come from the meson test
# environment (test_env in tests/meson.build).

bats_require_minimum_version 1.5.0
bats_load_library bats-support
bats_load_library bats-assert

: "${NSB_WRAPPER:?run these tests with meson test}"
: "${NSB_PRELOAD:?}" "${NSB_BUILD_ROOT:?}" "${NSB_SOURCE_ROOT:?}"

E2E_SRC=$NSB_SOURCE_ROOT/tests/e2e
E2E_BUILD=$NSB_BUILD_ROOT/tests/e2e
# The Debian interpreter, not whatever python3 comes first in PATH.
PYTHON=/usr/bin/python3
export E2E_SRC E2E_BUILD PYTHON

# Processes die by SIGBUS on purpose: no core files anywhere.
ulimit -c 0

# Every test starts from a known library configuration.
unset NOSIGBUS_POLICY NOSIGBUS_FILL NOSIGBUS_STRICT NOSIGBUS_LOG NOSIGBUS_LIBRARY
unset LD_PRELOAD

# Exit status of a process killed by SIGBUS, as the shell reports it.
SIGBUS_STATUS=$((128 + $(kill -l SIGBUS)))
export SIGBUS_STATUS

# Fails (never skips) when a program the suite needs is missing: CI
# installs them all, and a test that passes without running proves nothing.
require() {
	local program=$1 package=$2
	command -v "$program" >/dev/null ||
		fail "$program is not installed (Debian: apt install $package)"
}
