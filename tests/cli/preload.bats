#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run --separate-stderr sets stderr and stderr_lines
#
# LD_PRELOAD: the library goes first, what was there stays, nothing is
# added twice (also when nosigbus runs nosigbus), and it is really loaded.

load common

# libm and libdl exist wherever glibc does, under these names, and the
# loader finds them without a path on every architecture.
@test "LD_PRELOAD unset or empty: just the library" {
	run -0 --separate-stderr wrapper printenv LD_PRELOAD
	assert_output "$NSB_PRELOAD"
	LD_PRELOAD='' run -0 --separate-stderr wrapper printenv LD_PRELOAD
	assert_output "$NSB_PRELOAD"
}

@test "existing entries are kept after the library" {
	LD_PRELOAD=libm.so.6 run -0 --separate-stderr wrapper printenv LD_PRELOAD
	assert_output "$NSB_PRELOAD:libm.so.6"
	LD_PRELOAD='libm.so.6:libdl.so.2' run -0 --separate-stderr wrapper printenv LD_PRELOAD
	assert_output "$NSB_PRELOAD:libm.so.6:libdl.so.2"
	# The loader also separates entries with spaces.
	LD_PRELOAD='libm.so.6 libdl.so.2' run -0 --separate-stderr wrapper printenv LD_PRELOAD
	assert_output "$NSB_PRELOAD:libm.so.6 libdl.so.2"
	[ -z "$stderr" ] || fail "the loader complained: $stderr"
}

@test "already listed: LD_PRELOAD is left as it is" {
	local v
	for v in "$NSB_PRELOAD" "libm.so.6:$NSB_PRELOAD" "libm.so.6 $NSB_PRELOAD libdl.so.2" \
		"$NSB_PRELOAD:libm.so.6"; do
		LD_PRELOAD=$v run -0 --separate-stderr wrapper printenv LD_PRELOAD
		assert_output "$v"
	done
}

@test "nested: nosigbus nosigbus COMMAND preloads once" {
	LD_PRELOAD=libm.so.6 run -0 --separate-stderr wrapper "$NSB_WRAPPER" -p shm \
		"$NSB_WRAPPER" printenv LD_PRELOAD NOSIGBUS_POLICY
	assert_output "$(printf '%s:libm.so.6\nshm' "$NSB_PRELOAD")"
}

# The distinct files of the library mapped in a process.
library_files_mapped() {
	awk -v lib="$(readlink -f "$NSB_PRELOAD")" '$6 == lib { print $6 }' | sort -u
}

@test "the library is loaded into COMMAND, and into what it runs" {
	run -0 --separate-stderr wrapper cat /proc/self/maps
	[ -n "$(library_files_mapped <<<"$output")" ] || fail "libnosigbus is not in $output"
	run -0 --separate-stderr wrapper sh -c 'cat /proc/self/maps'
	[ -n "$(library_files_mapped <<<"$output")" ] || fail "not in the grandchild"
	run -0 --separate-stderr wrapper "$NSB_WRAPPER" "$NSB_WRAPPER" cat /proc/self/maps
	assert_equal "$(library_files_mapped <<<"$output" | wc -l)" 1
}

# Paths that do not exist: the wrapper runs with this LD_PRELOAD itself, and
# a real sanitizer runtime would start inside sh.
@test "a sanitizer runtime listed first stays first" {
	LD_PRELOAD=/nonexistent/libasan.so.8:libm.so.6 run -0 --separate-stderr wrapper -n true
	assert_line "LD_PRELOAD=/nonexistent/libasan.so.8:$NSB_PRELOAD:libm.so.6"
	LD_PRELOAD=/nonexistent/libtsan.so.2 run -0 --separate-stderr wrapper -n true
	assert_line "LD_PRELOAD=/nonexistent/libtsan.so.2:$NSB_PRELOAD"
}

# Issue 14 item 5: a program linked with ASan aborts at start ("ASan
# runtime does not come first in initial library list") unless its
# runtime comes first in LD_PRELOAD.  The wrapper reads COMMAND's
# DT_NEEDED entries and puts the runtime in front.
build_asan_program() {
	command -v gcc >/dev/null || skip "gcc is not installed"
	cat >"$BATS_TEST_TMPDIR/asan.c" <<-'EOF'
		#define _GNU_SOURCE
		#include <stdio.h>
		#include <sys/mman.h>
		#include <unistd.h>
		int main(void)
		{
			long pg = sysconf(_SC_PAGESIZE);
			int fd = memfd_create("asan", 0);
			volatile char *p;

			if (fd < 0 || ftruncate(fd, pg) < 0)
				return 2;
			p = mmap(NULL, (size_t)pg, PROT_READ, MAP_SHARED, fd, 0);
			if (p == MAP_FAILED || ftruncate(fd, 0) < 0)
				return 2;
			printf("read %d\n", p[0]);
			return 0;
		}
	EOF
	gcc -fsanitize=address -o "$BATS_TEST_TMPDIR/asan" "$BATS_TEST_TMPDIR/asan.c" \
		2>"$BATS_TEST_TMPDIR/cc.log" ||
		skip "gcc -fsanitize=address failed (libasan missing?): $(head -n 3 "$BATS_TEST_TMPDIR/cc.log")"
	ASAN_RUNTIME=$(objdump -p "$BATS_TEST_TMPDIR/asan" | awk '$1 == "NEEDED" && $2 ~ /^libasan\.so/ { print $2 }')
	[ -n "$ASAN_RUNTIME" ] || fail "gcc -fsanitize=address linked no libasan: $(objdump -p "$BATS_TEST_TMPDIR/asan")"
}

@test "a COMMAND linked with ASan: its runtime goes first, and it is rescued" {
	build_asan_program
	# What the wrapper fixes: our library first makes ASan refuse to start.
	LD_PRELOAD=$NSB_PRELOAD run --separate-stderr "$BATS_TEST_TMPDIR/asan"
	[ "$status" != 0 ] || fail "ASan started after the library: the test proves nothing"
	[[ $stderr == *"ASan runtime does not come first"* ]] || fail "unexpected: $stderr"
	run -0 --separate-stderr wrapper -n "$BATS_TEST_TMPDIR/asan"
	assert_line "LD_PRELOAD=$ASAN_RUNTIME:$NSB_PRELOAD"
	LD_PRELOAD=libm.so.6 run -0 --separate-stderr wrapper -n "$BATS_TEST_TMPDIR/asan"
	assert_line "LD_PRELOAD=$ASAN_RUNTIME:$NSB_PRELOAD:libm.so.6"
	# It runs, the library in it: the truncated memfd reads zeros (the
	# default policy), where ASan alone reports a BUS and aborts.
	run -0 --separate-stderr wrapper "$BATS_TEST_TMPDIR/asan"
	assert_output 'read 0'
	assert_equal "$stderr" ''
	run --separate-stderr "$BATS_TEST_TMPDIR/asan"
	[ "$status" != 0 ] || fail "ASan without the library survived the truncation"
	# Through PATH, as a name, as well.
	PATH="$BATS_TEST_TMPDIR:$PATH" run -0 --separate-stderr "$NSB_WRAPPER" -n asan
	assert_line "LD_PRELOAD=$ASAN_RUNTIME:$NSB_PRELOAD"
}

@test "a sanitizer runtime already first in LD_PRELOAD is not added twice" {
	build_asan_program
	# (env: bats's own commands must not run under ASan's leak checker.)
	run -0 --separate-stderr env LD_PRELOAD="$ASAN_RUNTIME" "$NSB_WRAPPER" -n "$BATS_TEST_TMPDIR/asan"
	assert_line "LD_PRELOAD=$ASAN_RUNTIME:$NSB_PRELOAD"
	# Programs without a sanitizer are left as they were.
	run -0 --separate-stderr wrapper -n true
	assert_line "LD_PRELOAD=$NSB_PRELOAD"
	run -0 --separate-stderr wrapper -n sh
	assert_line "LD_PRELOAD=$NSB_PRELOAD"
}
