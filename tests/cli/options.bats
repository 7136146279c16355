#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run --separate-stderr sets stderr and stderr_lines
#
# nosigbus(1): every option, every exit status, how COMMAND and the library
# are found.  Output on the wrong stream is a failure too.

load common

@test "--help and -h print the usage on stdout and exit 0" {
	for opt in --help -h; do
		run -0 --separate-stderr wrapper "$opt"
		assert_line --index 0 'Usage: nosigbus [OPTION]... [--] COMMAND [ARG]...'
		assert_output --partial '--policy=POLICY'
		assert_output --partial '--dry-run'
		[ -z "$stderr" ]
	done
}

@test "--help wins over an invalid option value after it" {
	run -0 --separate-stderr wrapper --help --policy=bogus
	assert_line --index 0 --partial 'Usage: nosigbus'
}

@test "--version and -V print the project version" {
	local version
	version=$(sed -n "s/^[[:space:]]*version: '\([^']*\)',.*/\1/p" \
		"$NSB_SOURCE_ROOT/meson.build" | head -n 1)
	[ -n "$version" ]
	for opt in --version -V; do
		run -0 --separate-stderr wrapper "$opt"
		assert_output "nosigbus $version"
		[ -z "$stderr" ]
	done
}

# Usage errors: exit 2, nothing on stdout, the reason and a hint on stderr.
assert_usage_error() {
	local reason=$1
	shift
	run -2 --separate-stderr wrapper "$@"
	assert_output ''
	[ "${#stderr_lines[@]}" = 2 ] || fail "expected 2 lines on stderr, got: $stderr"
	[ "${stderr_lines[0]}" = "nosigbus: $reason" ] ||
		fail "expected 'nosigbus: $reason', got '${stderr_lines[0]}'"
	[ "${stderr_lines[1]}" = "Try 'nosigbus --help' for more information." ]
}

@test "no COMMAND is a usage error" {
	assert_usage_error 'missing COMMAND'
	assert_usage_error 'missing COMMAND' --
	assert_usage_error 'missing COMMAND' -p shm -v
}

@test "unknown options are usage errors" {
	assert_usage_error "unknown option '-x'" -x true
	assert_usage_error "unknown option '--bogus'" --bogus true
	assert_usage_error "unknown option '--policy-shm'" --policy-shm true
	assert_usage_error "unknown option '-s'" -s true
}

@test "invalid and missing option values are usage errors" {
	local bad="invalid policy 'bogus' (expected flag, shm or files)"
	assert_usage_error "$bad" --policy=bogus true
	assert_usage_error "$bad" --policy bogus true
	assert_usage_error "$bad" -p bogus true
	assert_usage_error "$bad" -pbogus true
	assert_usage_error "invalid policy '' (expected flag, shm or files)" --policy= true
	assert_usage_error "invalid policy 'SHM' (expected flag, shm or files)" -p SHM true
	assert_usage_error "invalid fill 'all' (expected page or range)" --fill=all true
	assert_usage_error "invalid fill 'all' (expected page or range)" -f all true
	assert_usage_error "option '-p' needs a value" -p
	assert_usage_error "option '--policy' needs a value" --policy
	assert_usage_error "option '--fill' needs a value" --fill
	# A bad value is refused even when COMMAND would not be found.
	assert_usage_error "invalid fill 'x' (expected page or range)" -fx /nonexistent
}

@test "each option sets its variable in COMMAND's environment" {
	local vars='NOSIGBUS_POLICY NOSIGBUS_FILL NOSIGBUS_STRICT NOSIGBUS_LOG'
	# shellcheck disable=SC2086 # a list of names
	run -0 --separate-stderr wrapper -p shm -f range --strict -v printenv $vars
	assert_output "$(printf 'shm\nrange\n1\n1')"
	# printenv fails when one of them is unset.
	# shellcheck disable=SC2086
	run -1 --separate-stderr wrapper --policy=files --fill=page printenv $vars
	assert_output "$(printf 'files\npage')"
	run -0 --separate-stderr wrapper --policy flag --fill range printenv NOSIGBUS_POLICY NOSIGBUS_FILL
	assert_output "$(printf 'flag\nrange')"
	run -0 --separate-stderr wrapper -pfiles -frange --verbose printenv NOSIGBUS_POLICY NOSIGBUS_FILL NOSIGBUS_LOG
	assert_output "$(printf 'files\nrange\n1')"
}

@test "without options the NOSIGBUS variables pass through untouched" {
	run -1 --separate-stderr wrapper printenv NOSIGBUS_POLICY
	assert_output ''
	NOSIGBUS_FILL=range NOSIGBUS_STRICT=0 run -0 --separate-stderr \
		wrapper printenv NOSIGBUS_FILL NOSIGBUS_STRICT
	assert_output "$(printf 'range\n0')"
	# An option overrides what was inherited.
	NOSIGBUS_FILL=range run -0 --separate-stderr wrapper -f page printenv NOSIGBUS_FILL
	assert_output page
}

@test "short options group" {
	run -0 --separate-stderr wrapper -vn true
	assert_line NOSIGBUS_LOG=1
	assert_line true
	run -0 --separate-stderr wrapper -nvpshm true
	assert_line NOSIGBUS_POLICY=shm
	assert_line NOSIGBUS_LOG=1
}

@test "COMMAND's exit status is its own" {
	run -0 wrapper true
	run -1 wrapper false
	run -42 wrapper sh -c 'exit 42'
	run -2 --separate-stderr wrapper sh -c 'exit 2'
	assert_output ''
	[ -z "$stderr" ]
	# Death by a signal shows as 128 + the signal, as without the wrapper.
	run -143 wrapper sh -c 'kill -TERM $$'
}

@test "COMMAND not found: 127" {
	run -127 --separate-stderr wrapper nsb-no-such-command-here
	assert_output ''
	assert_equal "$stderr" 'nosigbus: nsb-no-such-command-here: command not found'
	run -127 --separate-stderr wrapper "$BATS_TEST_TMPDIR/missing"
	assert_output ''
	assert_equal "$stderr" "nosigbus: $BATS_TEST_TMPDIR/missing: No such file or directory"
	run -127 --separate-stderr wrapper ''
	assert_output ''
	# An empty PATH finds nothing outside the current directory.
	cd "$BATS_TEST_TMPDIR"
	run -127 --separate-stderr env PATH= "$NSB_WRAPPER" true
	assert_equal "$stderr" "nosigbus: true: command not found"
}

@test "COMMAND not executable: 126" {
	printf '#!/bin/sh\nexit 0\n' >"$BATS_TEST_TMPDIR/noexec"
	chmod 644 "$BATS_TEST_TMPDIR/noexec"
	run -126 --separate-stderr wrapper "$BATS_TEST_TMPDIR/noexec"
	assert_output ''
	assert_equal "$stderr" "nosigbus: $BATS_TEST_TMPDIR/noexec: Permission denied"
	run -126 --separate-stderr wrapper "$BATS_TEST_TMPDIR"
	assert_output ''
	assert_equal "$stderr" "nosigbus: $BATS_TEST_TMPDIR: Is a directory"
	# Found in PATH but not executable.
	PATH="$BATS_TEST_TMPDIR:$PATH" run -126 --separate-stderr "$NSB_WRAPPER" noexec
	assert_equal "$stderr" "nosigbus: $BATS_TEST_TMPDIR/noexec: Permission denied"
}

@test "PATH is searched as exec does: the first executable match wins" {
	mkdir "$BATS_TEST_TMPDIR/a" "$BATS_TEST_TMPDIR/b"
	printf '#!/bin/sh\necho a\n' >"$BATS_TEST_TMPDIR/a/nsbcmd"
	printf '#!/bin/sh\necho b "$@"\n' >"$BATS_TEST_TMPDIR/b/nsbcmd"
	chmod 644 "$BATS_TEST_TMPDIR/a/nsbcmd"
	chmod 755 "$BATS_TEST_TMPDIR/b/nsbcmd"
	PATH="$BATS_TEST_TMPDIR/a:$BATS_TEST_TMPDIR/b:$PATH" run -0 --separate-stderr \
		"$NSB_WRAPPER" nsbcmd x
	assert_output 'b x'
	# An empty PATH entry is the current directory.
	cd "$BATS_TEST_TMPDIR/b"
	PATH="/nonexistent::/usr/bin:/bin" run -0 --separate-stderr "$NSB_WRAPPER" nsbcmd y
	assert_output 'b y'
}

@test "-- ends the options; arguments after COMMAND are COMMAND's" {
	run -0 --separate-stderr wrapper sh -c 'printf "%s\n" "$@"' sh -v --policy=bogus -- -n
	assert_output "$(printf -- '-v\n--policy=bogus\n--\n-n')"
	run -127 --separate-stderr wrapper -- -p
	assert_equal "$stderr" 'nosigbus: -p: command not found'
	# A COMMAND whose name starts with a dash, found in PATH.
	mkdir "$BATS_TEST_TMPDIR/bin"
	printf '#!/bin/sh\necho dash "$@"\n' >"$BATS_TEST_TMPDIR/bin/-dash"
	chmod 755 "$BATS_TEST_TMPDIR/bin/-dash"
	PATH="$BATS_TEST_TMPDIR/bin:$PATH" run -0 --separate-stderr "$NSB_WRAPPER" -- -dash 1
	assert_output 'dash 1'
}

@test "--dry-run prints the environment and the command, runs nothing" {
	run -0 --separate-stderr wrapper --dry-run -p shm -f range --strict -v \
		touch "$BATS_TEST_TMPDIR/ran" 'a b' "it's" ''
	assert_equal "${#lines[@]}" 6
	assert_line --index 0 NOSIGBUS_POLICY=shm
	assert_line --index 1 NOSIGBUS_FILL=range
	assert_line --index 2 NOSIGBUS_STRICT=1
	assert_line --index 3 NOSIGBUS_LOG=1
	assert_line --index 4 "LD_PRELOAD=$NSB_PRELOAD"
	assert_line --index 5 "touch $BATS_TEST_TMPDIR/ran 'a b' 'it'\\''s' ''"
	[ -z "$stderr" ]
	[ ! -e "$BATS_TEST_TMPDIR/ran" ] || fail "--dry-run ran the command"
	# The printed line is valid sh that gives back the same arguments.
	eval "set -- ${lines[5]}"
	assert_equal "$#" 5
	assert_equal "$3" 'a b'
	assert_equal "$4" "it's"
	assert_equal "$5" ''
}

@test "--dry-run shows inherited variables and only those set" {
	NOSIGBUS_FILL=range LD_PRELOAD=libm.so.6 run -0 --separate-stderr wrapper -n true
	assert_output "$(printf 'NOSIGBUS_FILL=range\nLD_PRELOAD=%s:libm.so.6\ntrue' "$NSB_PRELOAD")"
	run -0 --separate-stderr wrapper -n true
	assert_output "$(printf 'LD_PRELOAD=%s\ntrue' "$NSB_PRELOAD")"
}

@test "--dry-run still fails like a real run" {
	run -127 --separate-stderr wrapper -n nsb-no-such-command-here
	assert_output ''
	run -2 --separate-stderr wrapper -n -p x true
	assert_output ''
}

@test "NOSIGBUS_LIBRARY chooses the library; it must exist" {
	cp "$NSB_PRELOAD" "$BATS_TEST_TMPDIR/libcopy.so"
	NOSIGBUS_LIBRARY=$BATS_TEST_TMPDIR/libcopy.so run -0 --separate-stderr wrapper -n true
	assert_line "LD_PRELOAD=$BATS_TEST_TMPDIR/libcopy.so"
	# A relative path is made absolute: COMMAND may change directory.
	cd "$BATS_TEST_TMPDIR"
	NOSIGBUS_LIBRARY=libcopy.so run -0 --separate-stderr "$NSB_WRAPPER" -n true
	assert_line "LD_PRELOAD=$(pwd -P)/libcopy.so"
	NOSIGBUS_LIBRARY=$BATS_TEST_TMPDIR/nope.so run -2 --separate-stderr wrapper true
	assert_output ''
	assert_equal "$stderr" "nosigbus: NOSIGBUS_LIBRARY=$BATS_TEST_TMPDIR/nope.so: no such file"
	# And it is really what gets loaded.
	NOSIGBUS_LIBRARY=$BATS_TEST_TMPDIR/libcopy.so run -0 --separate-stderr wrapper cat /proc/self/maps
	assert_output --partial "$BATS_TEST_TMPDIR/libcopy.so"
}

@test "the library next to the wrapper is found, also through PATH" {
	mkdir "$BATS_TEST_TMPDIR/bin"
	cp "$NSB_WRAPPER" "$BATS_TEST_TMPDIR/bin/nosigbus"
	ln -s "$NSB_PRELOAD" "$BATS_TEST_TMPDIR/bin/libnosigbus.so.0"
	PATH="$BATS_TEST_TMPDIR/bin:$PATH" run -0 --separate-stderr nosigbus -n true
	assert_line "LD_PRELOAD=$BATS_TEST_TMPDIR/bin/libnosigbus.so.0"
	cd "$BATS_TEST_TMPDIR/bin"
	run -0 --separate-stderr ./nosigbus -n true
	assert_line "LD_PRELOAD=$(pwd -P)/libnosigbus.so.0"
}

@test "no library anywhere: exit 2 with a message" {
	local libdir
	libdir=$(sed -n "s/^libdir='\(.*\)'$/\1/p" "$NSB_WRAPPER")
	[ -n "$libdir" ] || fail "no libdir= line in the wrapper"
	[ ! -e "$libdir/libnosigbus.so.0" ] || skip "libnosigbus is installed in $libdir"
	cp "$NSB_WRAPPER" "$BATS_TEST_TMPDIR/nosigbus"
	run -2 --separate-stderr "$BATS_TEST_TMPDIR/nosigbus" true
	assert_output ''
	assert_equal "$stderr" "nosigbus: cannot find libnosigbus.so.0 in $BATS_TEST_TMPDIR or $libdir; set NOSIGBUS_LIBRARY to its path"
	# --help and --version need no library.
	run -0 "$BATS_TEST_TMPDIR/nosigbus" --version
}
