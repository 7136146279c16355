#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
#
# wlcs 1.5 (wlcs), the Wayland conformance suite, with Mir 2.12's
# integration module (mir-wlcs-integration), run whole twice at once:
# without the library and with it preloaded alone (LD_PRELOAD of the
# built library, no NOSIGBUS_ variable), disabled tests included
# (--gtest_also_run_disabled_tests).  wlcs runs the compositor inside its
# own process, clients included, on a private XDG_RUNTIME_DIR each.
#
# Each test's outcome is read from the text output (gtest-outcomes.py) and
# the two runs are compared: exactly BadBufferTest.test_truncated_shm_file
# and its disabled twin SecondBadBufferTest.DISABLED_test_truncated_shm_file
# change, from OK to FAILED ("Expected protocol error not raised"), and
# every other test ends the same.  Those two truncate a 200x200 ARGB
# buffer's file to 12 bytes and require the compositor to answer with a
# protocol error; with the library the compositor reads zeros past the end
# of the file instead, as the library promises, so no error is sent.  The
# one conformance difference is the library's purpose (doc/compositors.md).
#
# Without the library, on Debian 12's pairing, 1077 tests run (3 of them
# disabled ones): 1011 pass, 57 fail and 9 skip, mostly extensions Mir
# 2.12 lacks or answers differently, none of them about shm.  Four runs
# without the library (each alongside another run, as here) gave the same
# outcome for every test, so no test is excluded as flaky; should one ever
# differ between the two runs, this test fails, naming it.
#
# About 2 minutes on 2 cores (the runs overlap); suite compositors.

load compositors

setup() {
	local arch
	arch=$(multiarch)
	WLCS=/usr/lib/$arch/wlcs/wlcs
	MIR_WLCS=/usr/lib/$arch/mir/miral_wlcs_integration.so
	[ -x "$WLCS" ] || fail "$WLCS is not installed (Debian: apt install wlcs)"
	[ -f "$MIR_WLCS" ] ||
		fail "$MIR_WLCS is not installed (Debian: apt install mir-wlcs-integration)"
	require "$PYTHON" python3
	PIDS=()
	RUNS=$BATS_TEST_TMPDIR
}

teardown() {
	local pid
	for pid in "${PIDS[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	[ -n "${BATS_TEST_COMPLETED-}" ] || show_tails "$RUNS"/*.out
}

# start_wlcs NAME [ENV...]: one whole run in the background, its output in
# $RUNS/NAME.out, its pid appended to PIDS; stopped after 720 s (scaled),
# inside meson's 900 s, so that a hang says which run it was.
start_wlcs() {
	local name=$1
	shift
	mkdir -m 0700 "$RUNS/$name.xdg"
	env XDG_RUNTIME_DIR="$RUNS/$name.xdg" "$@" \
		timeout -k 10 "$(scaled 720)" \
		"$WLCS" "$MIR_WLCS" --gtest_also_run_disabled_tests \
		--gtest_color=no </dev/null >"$RUNS/$name.out" 2>&1 3>&- &
	PIDS+=($!)
}

# A run's exit status: gtest exits 1 when a test failed; never killed.
assert_run_ended() {
	local status=$1 name=$2
	[ "$status" != 124 ] ||
		fail "wlcs ($name) did not end in $(scaled 720) s: $(tail -n 20 "$RUNS/$name.out")"
	[ "$status" = 0 ] || [ "$status" = 1 ] ||
		fail "wlcs ($name) ended with status $status: $(tail -n 20 "$RUNS/$name.out")"
}

# "N OK, N FAILED, N SKIP" of a run's outcomes.
summary() {
	awk '{ n[$2]++ } END { printf "%d OK, %d FAILED, %d SKIP, %d CRASHED", n["OK"], n["FAILED"], n["SKIP"], n["CRASHED"] }' "$1"
}

@test "wlcs with Mir: the library changes exactly the truncated-buffer tests" {
	local without with
	start_wlcs without
	start_wlcs with LD_PRELOAD="$NSB_PRELOAD"
	without=0
	wait "${PIDS[0]}" || without=$?
	with=0
	wait "${PIDS[1]}" || with=$?
	PIDS=()
	assert_run_ended "$without" without
	assert_run_ended "$with" with

	"$PYTHON" "$E2E_SRC/gtest-outcomes.py" "$RUNS/without.out" >"$RUNS/without.outcomes"
	"$PYTHON" "$E2E_SRC/gtest-outcomes.py" "$RUNS/with.out" >"$RUNS/with.outcomes"
	echo "# without the library: $(summary "$RUNS/without.outcomes")" >&3
	echo "# with the library:    $(summary "$RUNS/with.outcomes")" >&3

	# The whole suite ran, the same tests both times, and none crashed.
	run -0 cut -d' ' -f1 "$RUNS/without.outcomes"
	local names=$output
	run -0 cut -d' ' -f1 "$RUNS/with.outcomes"
	assert_equal "$output" "$names"
	[ "$(wc -l <"$RUNS/without.outcomes")" -gt 1000 ] ||
		fail "wlcs ran only $(wc -l <"$RUNS/without.outcomes") tests"
	run grep -c ' CRASHED$' "$RUNS/without.outcomes" "$RUNS/with.outcomes"
	assert_output "$RUNS/without.outcomes:0
$RUNS/with.outcomes:0"

	# Without the library both truncation tests pass: Mir posts the error.
	run -0 grep 'truncated_shm_file ' "$RUNS/without.outcomes"
	assert_output "BadBufferTest.test_truncated_shm_file OK
SecondBadBufferTest.DISABLED_test_truncated_shm_file OK"

	# Exactly those two differ, and fail the way the library explains.
	# shellcheck disable=SC2016 # awk's fields
	run -0 awk '$2 != $4 { print $1, $2, "->", $4 }' \
		<(paste -d' ' "$RUNS/without.outcomes" "$RUNS/with.outcomes")
	assert_output "BadBufferTest.test_truncated_shm_file OK -> FAILED
SecondBadBufferTest.DISABLED_test_truncated_shm_file OK -> FAILED"
	run grep -c 'Expected protocol error not raised' "$RUNS/with.out"
	assert_output 2
	run grep -c 'Expected protocol error not raised' "$RUNS/without.out"
	assert_output 0

	# The library printed nothing.
	run grep -c 'nosigbus:' "$RUNS/with.out"
	assert_output 0
}
