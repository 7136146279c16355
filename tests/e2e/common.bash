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

# Deadlines, in seconds, scaled by NSB_TIMEOUT_MULTIPLIER (doc/testing.md): they only stop a hang, correctness never depends on them.
scaled() {
	awk -v s="$1" -v m="${NSB_TIMEOUT_MULTIPLIER:-1}" \
		'BEGIN { if (!(m >= 1)) m = 1; printf "%d\n", s * m + 0.5 }'
}

# save_stacks PID NAME FILE: the threads' stacks of process PID (NAME in
# the heading) into FILE, by gdb when it is installed, for a failed test
# to show: a hang seen once in CI then says where the process was.
# Bounded; never fails the caller.
save_stacks() {
	local pid=$1 name=$2 out=$3
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "$name (pid $pid) is no longer running" >"$out"
		return 0
	fi
	if ! command -v gdb >/dev/null; then
		echo "(no gdb: no stacks of $name, pid $pid)" >"$out"
		return 0
	fi
	{
		echo "$name, pid $pid, thread by thread:"
		timeout -k 5 "$(scaled 60)" gdb -batch -nx -p "$pid" \
			-ex 'thread apply all bt' </dev/null 2>&1 |
			grep -v '^\[New LWP' | tail -n 300
	} >"$out" 3>&- || true
}

# show_tails FILE...: the last 40 lines of each file that exists (300 of
# stacks, *stacks.log: every thread's), as TAP comments on fd 3 (a failed
# test's teardown); an empty one is named.
show_tails() {
	local f n
	for f in "$@"; do
		[ -f "$f" ] || continue
		n=40
		[[ $f != *stacks.log ]] || n=300
		if [ -s "$f" ]; then
			echo "# --- $(basename "$f") (last $n lines)"
			tail -n "$n" "$f" | cut -c 1-300 | sed 's/^/# /'
		else
			echo "# --- $(basename "$f"): empty"
		fi
	done >&3
}

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
