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

# stop_pid PID TRIES [asked]: SIGTERM (not when the caller has asked it to
# end some other way), up to TRIES polls of 50 ms for it to end (a bound
# for a hang, nothing waits that long otherwise), then SIGKILL; reaps it
# and sets STOP_STATUS to its status as the shell reports it.
stop_pid() {
	local pid=$1 tries=$2 n
	[ "${3-}" = asked ] || kill -TERM "$pid" 2>/dev/null || true
	for ((n = 0; n < tries; n++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null || true
	# shellcheck disable=SC2034 # the caller reads it
	STOP_STATUS=0
	# shellcheck disable=SC2034
	wait "$pid" || STOP_STATUS=$?
}

# weston_ini FILE [LINE]...: a weston.ini without animations or panel (the
# desktop shell's extra LINEs after them), for screens that stay still.
weston_ini() {
	local file=$1
	shift
	{
		printf '%s\n' '[core]' 'idle-time=0' '[shell]' 'startup-animation=none' \
			'animation=none' 'close-animation=none' 'focus-animation=none' \
			'panel-position=none'
		[ "$#" = 0 ] || printf '%s\n' "$@"
	} >"$file"
}

# Fails (never skips) when a program the suite needs is missing: CI
# installs them all, and a test that passes without running proves nothing.
require() {
	local program=$1 package=$2
	command -v "$program" >/dev/null ||
		fail "$program is not installed (Debian: apt install $package)"
}
