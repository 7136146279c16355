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

@test "--version and -V print the project version and home page" {
	local version url
	version=$(sed -n "s/^[[:space:]]*version: '\([^']*\)',.*/\1/p" \
		"$NSB_SOURCE_ROOT/meson.build" | head -n 1)
	url=$(sed -n "s/^nsb_url = '\([^']*\)'$/\1/p" "$NSB_SOURCE_ROOT/meson.build")
	[ -n "$version" ] && [ -n "$url" ]
	for opt in --version -V; do
		run -0 --separate-stderr wrapper "$opt"
		assert_output "$(printf 'nosigbus %s\n%s' "$version" "$url")"
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
	assert_usage_error "invalid policy 'shm ' (expected flag, shm or files)" -p 'shm ' true
	assert_usage_error "invalid fill 'all' (expected page, range or auto)" --fill=all true
	assert_usage_error "invalid fill 'all' (expected page, range or auto)" -f all true
	assert_usage_error "invalid errors 'ignore' (expected pass, peer or zero)" --errors=ignore true
	assert_usage_error "invalid errors 'ignore' (expected pass, peer or zero)" -e ignore true
	assert_usage_error "invalid errors '' (expected pass, peer or zero)" -e '' true
	assert_usage_error "option '-p' needs a value" -p
	assert_usage_error "option '--policy' needs a value" --policy
	assert_usage_error "option '--fill' needs a value" --fill
	assert_usage_error "option '-e' needs a value" -e
	assert_usage_error "option '--errors' needs a value" --errors
	# A bad value is refused even when COMMAND would not be found.
	assert_usage_error "invalid fill 'x' (expected page, range or auto)" -fx /nonexistent
}

@test "values in any case, as the library reads them; COMMAND gets lower case" {
	run -0 --separate-stderr wrapper --policy=SHM --fill=Range --errors=ZERO \
		printenv NOSIGBUS_POLICY NOSIGBUS_FILL NOSIGBUS_ERRORS
	assert_output "$(printf 'shm\nrange\nzero')"
	run -0 --separate-stderr wrapper -p Files -f AUTO -e Pass \
		printenv NOSIGBUS_POLICY NOSIGBUS_FILL NOSIGBUS_ERRORS
	assert_output "$(printf 'files\nauto\npass')"
	run -0 --separate-stderr wrapper -pFLAG printenv NOSIGBUS_POLICY
	assert_output flag
	[ -z "$stderr" ]
}

@test "each option sets its variable in COMMAND's environment" {
	local vars='NOSIGBUS_POLICY NOSIGBUS_FILL NOSIGBUS_STRICT NOSIGBUS_LOG'
	# shellcheck disable=SC2086 # a list of names
	run -0 --separate-stderr wrapper -p shm -f range --strict -v printenv $vars
	assert_output "$(printf 'shm\nrange\n1\n1')"
	run -0 --separate-stderr wrapper -f auto -e zero printenv NOSIGBUS_FILL NOSIGBUS_ERRORS
	assert_output "$(printf 'auto\nzero')"
	run -0 --separate-stderr wrapper --fill auto --errors pass printenv NOSIGBUS_FILL NOSIGBUS_ERRORS
	assert_output "$(printf 'auto\npass')"
	run -0 --separate-stderr wrapper -ezero --errors=pass printenv NOSIGBUS_ERRORS
	assert_output pass
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
	run -0 --separate-stderr wrapper -nvpfiles true
	assert_line NOSIGBUS_POLICY=files
	assert_line NOSIGBUS_LOG=1
	run -0 --separate-stderr wrapper -nvezero true
	assert_line NOSIGBUS_ERRORS=zero
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

@test "--dry-run prints the settings, LD_PRELOAD and the command, runs nothing" {
	run -0 --separate-stderr wrapper --dry-run -p files -f range -e zero --strict -v \
		touch "$BATS_TEST_TMPDIR/ran" 'a b' "it's" ''
	assert_equal "${#lines[@]}" 7
	assert_line --index 0 NOSIGBUS_POLICY=files
	assert_line --index 1 NOSIGBUS_FILL=range
	assert_line --index 2 NOSIGBUS_ERRORS=zero
	assert_line --index 3 NOSIGBUS_STRICT=1
	assert_line --index 4 NOSIGBUS_LOG=1
	assert_line --index 5 "LD_PRELOAD=$NSB_PRELOAD"
	assert_line --index 6 "touch $BATS_TEST_TMPDIR/ran 'a b' 'it'\\''s' ''"
	[ -z "$stderr" ]
	[ ! -e "$BATS_TEST_TMPDIR/ran" ] || fail "--dry-run ran the command"
	# The printed line is valid sh that gives back the same arguments.
	eval "set -- ${lines[6]}"
	assert_equal "$#" 5
	assert_equal "$3" 'a b'
	assert_equal "$4" "it's"
	assert_equal "$5" ''
}

# Issue 15: -n shows the policy in effect, also when it is the default.
@test "--dry-run shows what the library will use: options, inherited values, defaults" {
	run -0 --separate-stderr wrapper -n true
	# Unset, the fill depends on the mapping: empty, the library's default.
	assert_output "$(printf '%s\n' NOSIGBUS_POLICY=shm NOSIGBUS_FILL= NOSIGBUS_ERRORS=peer \
		NOSIGBUS_STRICT=0 NOSIGBUS_LOG=0 "LD_PRELOAD=$NSB_PRELOAD" true)"
	[ -z "$stderr" ]
	NOSIGBUS_POLICY=flag NOSIGBUS_FILL=RANGE NOSIGBUS_STRICT=yes LD_PRELOAD=libm.so.6 \
		run -0 --separate-stderr wrapper -n true
	assert_output "$(printf '%s\n' NOSIGBUS_POLICY=flag NOSIGBUS_FILL=range NOSIGBUS_ERRORS=peer \
		NOSIGBUS_STRICT=1 NOSIGBUS_LOG=0 "LD_PRELOAD=$NSB_PRELOAD:libm.so.6" true)"
	[ -z "$stderr" ]
	# An empty value is the default, as for the library.
	NOSIGBUS_POLICY='' run -0 --separate-stderr wrapper -n true
	assert_line --index 0 NOSIGBUS_POLICY=shm
	# An option wins over what is inherited.
	NOSIGBUS_POLICY=files run -0 --separate-stderr wrapper -n --policy=flag true
	assert_line --index 0 NOSIGBUS_POLICY=flag
}

# Issue 23: an invalid NOSIGBUS_* value given to the wrapper is a usage
# error, as it is given to the option (before: passed on, and one warning
# per process of the tree).
@test "an invalid inherited value is a usage error, with -n and without" {
	local var value expected marker=$BATS_TEST_TMPDIR/ran
	for var in POLICY:bogus:'flag, shm or files' FILL:xyz:'page, range or auto' \
		ERRORS:all:'pass, peer or zero' STRICT:2:'0 or 1' LOG:maybe:'0, 1 or pages'; do
		value=${var#*:}
		expected=${value#*:}
		value=${value%%:*}
		var=NOSIGBUS_${var%%:*}
		env "$var=$value" "$NSB_WRAPPER" touch "$marker" 2>"$BATS_TEST_TMPDIR/err" &&
			fail "$var=$value: exit 0"
		run -2 --separate-stderr env "$var=$value" "$NSB_WRAPPER" touch "$marker"
		[ ! -e "$marker" ] || fail "$var=$value: COMMAND ran"
		assert_output ''
		assert_equal "${#stderr_lines[@]}" 2
		assert_equal "${stderr_lines[0]}" "nosigbus: invalid $var=$value (expected $expected)"
		assert_equal "${stderr_lines[1]}" "Try 'nosigbus --help' for more information."
		run -2 --separate-stderr env "$var=$value" "$NSB_WRAPPER" -n true
		assert_output ''
		assert_equal "${stderr_lines[0]}" "nosigbus: invalid $var=$value (expected $expected)"
	done
	# Any case, and empty (the default), are valid, as for the library.
	NOSIGBUS_POLICY=FILES NOSIGBUS_FILL='' NOSIGBUS_STRICT=Off run -0 --separate-stderr wrapper true
	assert_equal "$stderr" ''
	# An option replaces the inherited value: what the library gets is right.
	NOSIGBUS_FILL=xyz run -0 --separate-stderr wrapper --fill=page true
	assert_equal "$stderr" ''
}

@test "an invalid inherited value: one short line, whatever it holds" {
	local long nl
	long=$(printf 'A%.0s' $(seq 1 5000))
	NOSIGBUS_FILL=$long run -2 --separate-stderr wrapper true
	assert_equal "${#stderr_lines[@]}" 2
	[ "${#stderr}" -lt 200 ] || fail "a ${#stderr}-byte message"
	assert_equal "${stderr_lines[0]}" "nosigbus: invalid NOSIGBUS_FILL=$(printf 'A%.0s' $(seq 1 64))... (expected page, range or auto)"
	nl=$(printf 'page\nnosigbus: forged line')
	NOSIGBUS_FILL=$nl run -2 --separate-stderr wrapper true
	assert_equal "${#stderr_lines[@]}" 2
	assert_equal "${stderr_lines[0]}" "nosigbus: invalid NOSIGBUS_FILL='page?nosigbus: forged line' (expected page, range or auto)"
}

# Issue 23: exec said "exec: ./s: not found" of a file that exists.
@test "a script whose interpreter is missing: what is wrong, exit 126" {
	local s=$BATS_TEST_TMPDIR/s
	printf '#!/nonexistent/interpreter -x\necho ran\n' >"$s"
	chmod 755 "$s"
	run -126 --separate-stderr wrapper "$s"
	assert_output ''
	assert_equal "$stderr" "nosigbus: $s: its interpreter /nonexistent/interpreter does not exist (#! line)"
	# From PATH too, and a dry run says what a real run would do.
	PATH="$BATS_TEST_TMPDIR:$PATH" run -0 --separate-stderr "$NSB_WRAPPER" -n s
	assert_equal "${stderr_lines[0]}" "nosigbus: warning: s: its interpreter /nonexistent/interpreter does not exist (#! line) (a real run would exit with status 126)"
	printf '#!%s\necho ran\n' "$BATS_TEST_TMPDIR" >"$s"
	run -126 --separate-stderr wrapper "$s"
	assert_equal "$stderr" "nosigbus: $s: its interpreter $BATS_TEST_TMPDIR cannot be executed (#! line)"
	printf '#!  \necho ran\n' >"$s"
	run -126 --separate-stderr wrapper "$s"
	assert_equal "$stderr" "nosigbus: $s: its #! line names no interpreter"
	# A working interpreter, after blanks: runs, without a word.
	printf '#! /bin/sh -e\necho ran\n' >"$s"
	run -0 --separate-stderr wrapper "$s"
	assert_output ran
	assert_equal "$stderr" ''
}

# Issue 23: 8 helper processes (4 of them od) cost 70 ms of CPU per call.
# The common path runs none: the wrapper's own exec and COMMAND's, nothing
# else (strace counts; it does not depend on the machine's load).
@test "the common path starts no helper process" {
	local true_path log=$BATS_TEST_TMPDIR/strace.log inst=$BATS_TEST_TMPDIR/inst
	command -v strace >/dev/null || skip "strace is not installed (Debian: apt install strace)"
	strace -f -qq -o /dev/null true 2>/dev/null ||
		skip "strace cannot trace here (ptrace not permitted)"
	true_path=$(type -P true)
	printf '#!/bin/sh\nexit 0\n' >"$BATS_TEST_TMPDIR/script"
	chmod 755 "$BATS_TEST_TMPDIR/script"
	# The build tree's wrapper, and one that finds the library by its
	# soname in LD_LIBRARY_PATH (as the installed one does in /usr/lib).
	mkdir "$inst"
	cp "$NSB_WRAPPER" "$inst/nosigbus"
	for cmd in "$NSB_WRAPPER $true_path" "$NSB_WRAPPER --policy=files -f range $true_path" \
		"$NSB_WRAPPER $BATS_TEST_TMPDIR/script" "$NSB_WRAPPER /usr/bin/python3 -c pass" \
		"$inst/nosigbus $true_path"; do
		# shellcheck disable=SC2086 # one word per argument
		LD_LIBRARY_PATH=${NSB_PRELOAD%/*} NOSIGBUS_FILL=Page \
			strace -f -qq -e trace=execve,fork,vfork,clone,clone3 -o "$log" $cmd ||
			fail "$cmd failed"
		run grep -cE ' (fork|vfork|clone|clone3)\(' "$log"
		[ "$output" = 0 ] || fail "$cmd: $output helper processes: $(cat "$log")"
		run grep -cE 'execve\(.*= 0$' "$log"
		[ "$output" = 2 ] || fail "$cmd: $output programs run: $(cat "$log")"
	done
}

# Issue 14 item 10: a dry run only prints; it needs no COMMAND.
@test "--dry-run does not need COMMAND: it says what a real run would do" {
	run -0 --separate-stderr wrapper -n nsb-no-such-command-here --arg
	assert_line --index 5 "LD_PRELOAD=$NSB_PRELOAD"
	assert_line --index 6 'nsb-no-such-command-here --arg'
	assert_equal "$stderr" 'nosigbus: warning: nsb-no-such-command-here: command not found (a real run would exit with status 127)'
	run -0 --separate-stderr wrapper -n "$BATS_TEST_TMPDIR/missing"
	assert_line --index 6 "$BATS_TEST_TMPDIR/missing"
	assert_equal "$stderr" "nosigbus: warning: $BATS_TEST_TMPDIR/missing: No such file or directory (a real run would exit with status 127)"
	run -0 --separate-stderr wrapper -n "$BATS_TEST_TMPDIR"
	assert_equal "$stderr" "nosigbus: warning: $BATS_TEST_TMPDIR: Is a directory (a real run would exit with status 126)"
	# Usage errors are still errors.
	run -2 --separate-stderr wrapper -n -p x true
	assert_output ''
	run -2 --separate-stderr wrapper -n
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

# Copied away from the build tree, the wrapper looks for the installed
# library by its soname, through the dynamic loader.
@test "away from the build tree: the library by its soname, which the loader must find" {
	cp "$NSB_WRAPPER" "$BATS_TEST_TMPDIR/nosigbus"
	# The loader finds it through LD_LIBRARY_PATH as through its cache.
	LD_LIBRARY_PATH=$(dirname "$NSB_PRELOAD") run -0 --separate-stderr \
		"$BATS_TEST_TMPDIR/nosigbus" -n true
	assert_line 'LD_PRELOAD=libnosigbus.so.0'
	[ -z "$stderr" ]
	LD_LIBRARY_PATH=$(dirname "$NSB_PRELOAD") run -0 --separate-stderr \
		"$BATS_TEST_TMPDIR/nosigbus" cat /proc/self/maps
	assert_output --partial "$(readlink -f "$NSB_PRELOAD")"
}

@test "no library anywhere: exit 2 with a message" {
	unset LD_LIBRARY_PATH
	if LD_PRELOAD=libnosigbus.so.0 sh -c : 2>&1 | grep -q .; then :; else
		skip "libnosigbus.so.0 is installed where the dynamic loader finds it"
	fi
	cp "$NSB_WRAPPER" "$BATS_TEST_TMPDIR/nosigbus"
	run -2 --separate-stderr "$BATS_TEST_TMPDIR/nosigbus" true
	assert_output ''
	assert_equal "$stderr" "nosigbus: the dynamic loader cannot find libnosigbus.so.0 (not installed? after installing under /usr/local, run ldconfig); set NOSIGBUS_LIBRARY to its path"
	run -2 --separate-stderr "$BATS_TEST_TMPDIR/nosigbus" -n true
	assert_output ''
	# --help and --version need no library.
	run -0 "$BATS_TEST_TMPDIR/nosigbus" --version
	run -0 "$BATS_TEST_TMPDIR/nosigbus" --help
}
