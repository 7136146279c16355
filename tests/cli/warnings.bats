#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run --separate-stderr sets stderr and stderr_lines
#
# COMMANDs that a preload cannot reach: one warning line each, and they
# still run.  Everything else runs without a word.

load common

# Builds a tiny program that exits 3, with extra cc flags, or skips.
build() {
	local out=$1
	shift
	command -v cc >/dev/null || skip "no C compiler"
	printf 'int main(void) { return 3; }\n' >"$BATS_TEST_TMPDIR/exit3.c"
	cc "$@" -o "$out" "$BATS_TEST_TMPDIR/exit3.c" 2>"$BATS_TEST_TMPDIR/cc.log" ||
		skip "cc $* failed (static libc missing? libc6-dev ships it): $(head -n 3 "$BATS_TEST_TMPDIR/cc.log")"
}

@test "a statically linked COMMAND gets a warning and still runs" {
	build "$BATS_TEST_TMPDIR/static" -static
	run -3 --separate-stderr wrapper "$BATS_TEST_TMPDIR/static"
	assert_output ''
	assert_equal "$stderr" "nosigbus: warning: $BATS_TEST_TMPDIR/static is statically linked: LD_PRELOAD cannot load libnosigbus into it, so it runs unprotected"
}

@test "a static-pie COMMAND is static too" {
	build "$BATS_TEST_TMPDIR/static-pie" -static-pie
	run -3 --separate-stderr wrapper "$BATS_TEST_TMPDIR/static-pie"
	assert_equal "${#stderr_lines[@]}" 1
	assert_equal "${stderr_lines[0]}" "nosigbus: warning: $BATS_TEST_TMPDIR/static-pie is statically linked: LD_PRELOAD cannot load libnosigbus into it, so it runs unprotected"
}

@test "dynamic programs and scripts: no warning" {
	build "$BATS_TEST_TMPDIR/dynamic"
	run -3 --separate-stderr wrapper "$BATS_TEST_TMPDIR/dynamic"
	[ -z "$stderr" ] || fail "unexpected: $stderr"
	build "$BATS_TEST_TMPDIR/pie" -pie -fPIE
	run -3 --separate-stderr wrapper "$BATS_TEST_TMPDIR/pie"
	[ -z "$stderr" ] || fail "unexpected: $stderr"
	printf '#!/bin/sh\nexit 4\n' >"$BATS_TEST_TMPDIR/script"
	chmod 755 "$BATS_TEST_TMPDIR/script"
	run -4 --separate-stderr wrapper "$BATS_TEST_TMPDIR/script"
	[ -z "$stderr" ] || fail "unexpected: $stderr"
	# Not ELF, not a script: the kernel decides; we say nothing.
	printf 'garbage\n' >"$BATS_TEST_TMPDIR/garbage"
	chmod 755 "$BATS_TEST_TMPDIR/garbage"
	run -0 --separate-stderr wrapper -n "$BATS_TEST_TMPDIR/garbage"
	[ -z "$stderr" ] || fail "unexpected: $stderr"
}

@test "a set-user-ID or set-group-ID COMMAND gets a warning and still runs" {
	local mode
	for mode in u+s g+s; do
		cp "$(type -P true)" "$BATS_TEST_TMPDIR/true-$mode"
		chmod "$mode" "$BATS_TEST_TMPDIR/true-$mode"
		run -0 --separate-stderr wrapper "$BATS_TEST_TMPDIR/true-$mode"
		assert_equal "${#stderr_lines[@]}" 1
		assert_equal "${stderr_lines[0]}" "nosigbus: warning: $BATS_TEST_TMPDIR/true-$mode is set-user-ID or set-group-ID: the dynamic loader ignores LD_PRELOAD when it runs with other credentials, so it may run unprotected"
	done
}

@test "a COMMAND with file capabilities gets a warning" {
	local setcap try
	setcap=$(command -v setcap) || setcap=
	for try in /usr/sbin/setcap /sbin/setcap; do
		[ -n "$setcap" ] || [ ! -x "$try" ] || setcap=$try
	done
	[ -n "$setcap" ] || skip "setcap (libcap2-bin) is not installed"
	cp "$(type -P true)" "$BATS_TEST_TMPDIR/true-cap"
	"$setcap" cap_net_raw+ep "$BATS_TEST_TMPDIR/true-cap" 2>/dev/null ||
		skip "cannot set file capabilities here (not root, or no xattrs on $BATS_TEST_TMPDIR)"
	run -0 --separate-stderr wrapper -n "$BATS_TEST_TMPDIR/true-cap"
	assert_equal "${#stderr_lines[@]}" 1
	assert_equal "${stderr_lines[0]}" "nosigbus: warning: $BATS_TEST_TMPDIR/true-cap has file capabilities: the dynamic loader ignores LD_PRELOAD for it, so it may run unprotected"
}

@test "--dry-run warns too, on stderr" {
	build "$BATS_TEST_TMPDIR/static" -static
	run -0 --separate-stderr wrapper -n "$BATS_TEST_TMPDIR/static"
	assert_line --index 6 "$BATS_TEST_TMPDIR/static"
	assert_equal "${#stderr_lines[@]}" 1
	assert_output --partial 'LD_PRELOAD='
}
