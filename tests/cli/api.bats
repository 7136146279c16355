#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run --separate-stderr sets stderr and stderr_lines
#
# The public API through a program linked with -lnosigbus (nsb-cli-api):
# the checks are in api.c; the deaths are checked here.

load common

# api.c checks that an unflagged memfd mapping is unprotected until
# nosigbus_protect(): the policy flag, not the default shm.
setup() {
	export NOSIGBUS_POLICY=flag
}

@test "nosigbus_protect: an unflagged memfd mapping reads zeros after truncation" {
	run -0 --separate-stderr "$API" protect
	assert_line 'ok: nosigbus_protect of an unflagged memfd mapping'
	assert_line 'ok: reads past the end give zeros'
	assert_equal "$stderr" ''
}

@test "nosigbus_unprotect: the same read dies by SIGBUS" {
	run -135 --separate-stderr "$API" unprotect
	assert_line 'ok: nosigbus_unprotect'
	assert_line 'reading past the end: SIGBUS expected'
	refute_line --partial FAIL
}

@test "nosigbus_get_stats: counters add up, fill=page" {
	run -0 --separate-stderr "$API" stats 3
	assert_line 'delta: rescues=3 pages=3 failures=0'
	assert_line 'ok: counters add up'
}

@test "nosigbus_get_stats: counters add up, fill=range" {
	NOSIGBUS_FILL=range run -0 --separate-stderr "$API" stats 3
	assert_line 'delta: rescues=1 pages=3 failures=0'
	assert_line 'ok: counters add up'
}

@test "error cases: EINVAL and ENOMEM, nothing recorded on failure" {
	run -0 --separate-stderr "$API" errors
	assert_equal "$stderr" ''
	assert_line 'ok: protect unaligned: Invalid argument'
	assert_line 'ok: protect len 0: Invalid argument'
	assert_line 'ok: protect unmapped: Cannot allocate memory'
	assert_line 'ok: protect partly unmapped: Cannot allocate memory'
	assert_line 'ok: get_stats NULL: Invalid argument'
	assert_line 'ok: get_stats accepts a larger size'
}

@test "NOSIGBUS_STRICT=1: shared mappings are refused with EINVAL" {
	NOSIGBUS_STRICT=1 run -0 --separate-stderr "$API" strict
	assert_line 'ok: strict: protect shared: Invalid argument'
	assert_line 'ok: strict: mmap MAP_SHARED|MAP_NOSIGBUS: Invalid argument'
}

@test "linked, not preloaded: the program works without LD_PRELOAD" {
	run -0 env -u LD_PRELOAD "$API" protect
	# And the preload of the same library on top changes nothing.
	LD_PRELOAD=$NSB_PRELOAD run -0 --separate-stderr "$API" protect
	assert_equal "$stderr" ''
}
