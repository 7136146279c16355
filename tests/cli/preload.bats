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
