#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run --separate-stderr sets stderr and stderr_lines
# shellcheck disable=SC2016 # sh -c scripts expand their own arguments
#
# The wrapper's edges, most of them mistakes it once made: how LD_PRELOAD
# is split, where the library may come from, an exit status that must not
# depend on where stderr goes, and exec's ENOEXEC.

load common

# The loader splits LD_PRELOAD at every colon: ":::x" is four entries.
# The wrapper must see all of them however many are empty.
@test "LD_PRELOAD with many empty entries: every entry is seen and kept" {
	local colons
	colons=$(printf ':%.0s' $(seq 40))
	# A libnosigbus after them is already there: nothing is added.
	LD_PRELOAD="${colons}libnosigbus.so.0" run -0 --separate-stderr wrapper -n true
	assert_line "LD_PRELOAD=${colons}libnosigbus.so.0"
	# A sanitizer first: it stays first and every entry follows the library.
	LD_PRELOAD="/nonexistent/libasan.so.8${colons}libm.so.6" run -0 --separate-stderr wrapper -n true
	assert_line "LD_PRELOAD=/nonexistent/libasan.so.8:$NSB_PRELOAD${colons}libm.so.6"
}

# A path with a blank or a colon cannot be put in LD_PRELOAD: the loader
# would preload pieces of it (and complain), and COMMAND run unprotected.
@test "a library path with a blank or a colon: exit 2, not an unprotected run" {
	local d
	for d in "with space" "with:colon"; do
		mkdir "$BATS_TEST_TMPDIR/$d"
		cp "$NSB_PRELOAD" "$BATS_TEST_TMPDIR/$d/libnosigbus.so.0"
		NOSIGBUS_LIBRARY="$BATS_TEST_TMPDIR/$d/libnosigbus.so.0" run -2 --separate-stderr wrapper true
		assert_output ''
		assert_equal "$stderr" "nosigbus: the library's path $BATS_TEST_TMPDIR/$d/libnosigbus.so.0 has a blank or a colon, which LD_PRELOAD cannot hold; set NOSIGBUS_LIBRARY to a path without one"
		# Also as the build tree's neighbour.
		cp "$NSB_WRAPPER" "$BATS_TEST_TMPDIR/$d/nosigbus"
		run -2 --separate-stderr "$BATS_TEST_TMPDIR/$d/nosigbus" -n true
		assert_output ''
		[[ $stderr == *"has a blank or a colon"* ]] || fail "stderr: $stderr"
	done
}

# Run by its name through PATH, the wrapper finds its own directory through
# /proc/self/exe.  Without /proc it must not take the working directory's
# libnosigbus instead (a file anyone may leave in a directory).
@test "no /proc: the working directory's libnosigbus is not taken" {
	command -v unshare >/dev/null || skip "unshare is not installed (Debian: util-linux)"
	unshare -m true 2>/dev/null || skip "unshare -m is not permitted here (needs root or user namespaces)"
	mkdir "$BATS_TEST_TMPDIR/bin" "$BATS_TEST_TMPDIR/cwd"
	cp "$NSB_WRAPPER" "$BATS_TEST_TMPDIR/bin/nosigbus"
	cp "$NSB_PRELOAD" "$BATS_TEST_TMPDIR/cwd/libnosigbus.so.0"
	cd "$BATS_TEST_TMPDIR/cwd"
	# A private mount namespace with an empty /proc: readlink fails.
	run --separate-stderr unshare -m sh -c \
		'mount -t tmpfs none /proc || exit 99; PATH=$1:$PATH exec nosigbus -n true' \
		sh "$BATS_TEST_TMPDIR/bin"
	[ "$status" -ne 99 ] || skip "cannot mount over /proc in a new mount namespace"
	refute_output --partial "$BATS_TEST_TMPDIR/cwd"
	# The installed library by its soname, or none found.
	if [ "$status" -eq 0 ]; then
		assert_line 'LD_PRELOAD=libnosigbus.so.0'
	else
		assert_equal "$status" 2
		assert_output ''
		assert_line --index 0 --partial "nosigbus: the dynamic loader cannot find libnosigbus.so.0"
	fi
}

# exec fails after the search found the file: a program whose dynamic
# loader is missing gives ENOENT (127).  The message about it must not
# change the status, as it did when stderr could not be written.
@test "exec's ENOENT after the search is 127, whatever stderr is" {
	command -v gcc >/dev/null || skip "gcc is not installed"
	printf 'int main(void) { return 0; }\n' >"$BATS_TEST_TMPDIR/noldso.c"
	gcc -o "$BATS_TEST_TMPDIR/noldso" "$BATS_TEST_TMPDIR/noldso.c" \
		-Wl,--dynamic-linker=/nonexistent/ld.so ||
		fail "cannot link with --dynamic-linker"
	run -127 --separate-stderr wrapper "$BATS_TEST_TMPDIR/noldso"
	assert_output ''
	assert_equal "$stderr" "nosigbus: $BATS_TEST_TMPDIR/noldso: No such file or directory"
	[ -w /dev/full ] || skip "no /dev/full"
	run -127 sh -c '"$1" "$2" 2>/dev/full' sh "$NSB_WRAPPER" "$BATS_TEST_TMPDIR/noldso"
	run -127 sh -c '"$1" "$2" 2>&-' sh "$NSB_WRAPPER" "$BATS_TEST_TMPDIR/noldso"
}

# A text file without a #! line: exec gives ENOEXEC, and the shell runs it
# (execvp(3) and a shell's exec both do), with its arguments and the
# library preloaded; so does the wrapper.
@test "an executable without a #! line runs under /bin/sh, as execvp runs it" {
	printf 'echo "$0 $# $*"\nprintenv LD_PRELOAD\n' >"$BATS_TEST_TMPDIR/plain"
	chmod 755 "$BATS_TEST_TMPDIR/plain"
	run -0 --separate-stderr wrapper "$BATS_TEST_TMPDIR/plain" a 'b c'
	assert_output "$(printf '%s\n%s' "$BATS_TEST_TMPDIR/plain 2 a b c" "$NSB_PRELOAD")"
	[ -z "$stderr" ] || fail "stderr: $stderr"
	PATH="$BATS_TEST_TMPDIR:$PATH" run -0 --separate-stderr "$NSB_WRAPPER" plain x
	assert_line --index 0 "$BATS_TEST_TMPDIR/plain 1 x"
}

# What --help, --version and --dry-run print is their whole job: output
# that cannot be written (a full disk) is an error, said on stderr.
@test "--help, --version and --dry-run into a full file: exit 1 with a message" {
	local args
	for args in --help --version "-n true"; do
		# shellcheck disable=SC2086 # the words of args
		run -1 --separate-stderr sh -c 'exec "$0" "$@" >/dev/full' "$NSB_WRAPPER" $args
		assert_equal "$stderr" "nosigbus: cannot write the output: No space left on device"
	done
}
