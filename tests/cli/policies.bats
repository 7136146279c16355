#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run --separate-stderr sets stderr and stderr_lines
#
# The policies and --fill on a program that knows nothing of MAP_NOSIGBUS
# (nsb-cli-map, not linked with the library).  A child process of it shrinks
# the file; an unrescued read past the end kills it by SIGBUS, which the
# shell reports as 135.

load common

setup() {
	make_disk_dir
	make_shm_dir
}

teardown() {
	remove_dirs
}

# Backings: "memfd", a file in /dev/shm (tmpfs), a file under the build tree.
shm_file() { printf '%s/buf' "$SHM"; }
disk_file() { printf '%s/buf' "$DISK"; }

# Issue 15: the default is shm, so that LD_PRELOAD=libnosigbus.so weston
# protects a compositor's client buffers with no other setting.
@test "default policy (shm), bare LD_PRELOAD: memfd and tmpfs rescued, a disk file not" {
	run -135 --separate-stderr "$MAP" memfd 2 read=1 trunc=0 read=1
	assert_output 'page 1: file'
	LD_PRELOAD=$NSB_PRELOAD run -0 --separate-stderr "$MAP" memfd 2 read=1 trunc=0 read=1 stats
	assert_output "$(printf 'page 1: file\npage 1: zeros\nstats: rescues=1 pages=1 failures=0 mappings=1')"
	LD_PRELOAD=$NSB_PRELOAD run -0 --separate-stderr "$MAP" --private memfd 2 trunc=1 read=0 read=1
	assert_output "$(printf 'page 0: file\npage 1: zeros')"
	LD_PRELOAD=$NSB_PRELOAD run -0 --separate-stderr "$MAP" "$(shm_file)" 3 trunc=1 read=2 read=0
	assert_output "$(printf 'page 2: zeros\npage 0: file')"
	[ -z "$stderr" ] || fail "the library printed: $stderr"
	LD_PRELOAD=$NSB_PRELOAD run -135 --separate-stderr "$MAP" "$(disk_file)" 2 read=1 trunc=0 read=1
	assert_output 'page 1: file'
	LD_PRELOAD=$NSB_PRELOAD run -0 --separate-stderr "$MAP" "$(disk_file)" 1 stats
	assert_output --partial 'mappings=0'
}

@test "default policy (shm) through the wrapper: nosigbus COMMAND" {
	run -0 --separate-stderr wrapper "$MAP" memfd 2 trunc=0 read=0 read=1
	assert_output "$(printf 'page 0: zeros\npage 1: zeros')"
	run -0 --separate-stderr wrapper "$MAP" "$(shm_file)" 2 trunc=0 read=1
	assert_output 'page 1: zeros'
	run -135 --separate-stderr wrapper "$MAP" "$(disk_file)" 2 trunc=0 read=1
	[ -z "$stderr" ] || fail "the wrapper or the library printed: $stderr"
}

@test "flag, to opt out: an unflagged mapping is not protected" {
	run -135 --separate-stderr wrapper --policy=flag "$MAP" memfd 2 read=1 trunc=0 read=1
	assert_output 'page 1: file'
	NOSIGBUS_POLICY=flag run -135 --separate-stderr wrapper "$MAP" "$(shm_file)" 2 trunc=0 read=1
	NOSIGBUS_POLICY=flag LD_PRELOAD=$NSB_PRELOAD run -135 --separate-stderr \
		"$MAP" memfd 2 trunc=0 read=1
	NOSIGBUS_POLICY=flag LD_PRELOAD=$NSB_PRELOAD run -0 --separate-stderr "$MAP" memfd 1 stats
	assert_output --partial 'mappings=0'
	run -135 --separate-stderr wrapper -p flag "$MAP" "$(disk_file)" 2 trunc=0 read=1
}

@test "flag: a MAP_NOSIGBUS mapping is protected, shared or private" {
	run -0 --separate-stderr wrapper -p flag "$MAP" --flag memfd 2 trunc=0 read=0 read=1
	assert_output "$(printf 'page 0: zeros\npage 1: zeros')"
	run -0 --separate-stderr wrapper -p flag "$MAP" --flag --private "$(disk_file)" 2 trunc=1 read=0 read=1
	assert_output "$(printf 'page 0: file\npage 1: zeros')"
	# Every policy honours the flag.
	run -0 --separate-stderr wrapper "$MAP" --flag "$(disk_file)" 2 trunc=0 read=1
	assert_output 'page 1: zeros'
	# Without the library the flag means nothing to this kernel.
	run -135 --separate-stderr "$MAP" --flag memfd 2 trunc=0 read=0
}

@test "shm: memfd and tmpfs files are protected" {
	run -0 --separate-stderr wrapper -p shm "$MAP" memfd 2 trunc=0 read=0 read=1
	assert_output "$(printf 'page 0: zeros\npage 1: zeros')"
	run -0 --separate-stderr wrapper -p shm "$MAP" --private memfd 2 trunc=1 read=0 read=1
	assert_output "$(printf 'page 0: file\npage 1: zeros')"
	run -0 --separate-stderr wrapper -p shm "$MAP" "$(shm_file)" 3 trunc=1 read=2 read=0
	assert_output "$(printf 'page 2: zeros\npage 0: file')"
	[ -z "$stderr" ] || fail "the library printed: $stderr"
}

@test "shm: a disk file still dies by SIGBUS" {
	run -135 --separate-stderr wrapper -p shm "$MAP" "$(disk_file)" 2 read=1 trunc=0 read=1
	assert_output 'page 1: file'
	run -0 --separate-stderr wrapper -p shm "$MAP" "$(disk_file)" 1 stats
	assert_output --partial 'mappings=0'
}

@test "files: disk files and memory files are protected" {
	run -0 --separate-stderr wrapper -p files "$MAP" "$(disk_file)" 2 trunc=0 read=1 read=0
	assert_output "$(printf 'page 1: zeros\npage 0: zeros')"
	run -0 --separate-stderr wrapper -p files "$MAP" --private "$(disk_file)" 2 trunc=0 read=1
	assert_output 'page 1: zeros'
	run -0 --separate-stderr wrapper -p files "$MAP" memfd 2 trunc=0 read=1
	assert_output 'page 1: zeros'
	run -0 --separate-stderr wrapper -p files "$MAP" "$(shm_file)" 2 trunc=0 read=1
	assert_output 'page 1: zeros'
}

# ripgrep --mmap's way: a disk file opened read-only, mapped shared
# read-only, the descriptor closed.  Whether the mapping may become
# writable is asked of its VMA at the first rescue, not of the descriptor
# at mmap: the rescued pages must still refuse mprotect read-write as the
# kernel refuses it for the file's pages (opened read-only), and allow it
# where the descriptor was opened read-write.
@test "files: a read-only shared mapping of a disk file is rescued and stays unwritable" {
	run -0 --separate-stderr wrapper -p files "$MAP" --readonly "$(disk_file)" 3 \
		trunc=1 read=2 writable read=1 read=0 stats
	assert_output "$(printf 'page 2: zeros\nwritable: EACCES\npage 1: zeros\npage 0: file\nstats: rescues=2 pages=2 failures=0 mappings=1')"
	assert_equal "$stderr" ""
	# Refused before any rescue too (the kernel's own answer).
	run -0 --separate-stderr wrapper -p files "$MAP" --readonly "$(disk_file)" 2 writable trunc=0 read=1
	assert_output "$(printf 'writable: EACCES\npage 1: zeros')"
	run -0 --separate-stderr wrapper -p files "$MAP" --readonly-rw "$(disk_file)" 3 \
		trunc=1 read=2 writable read=1
	assert_output "$(printf 'page 2: zeros\nwritable: yes\npage 1: zeros')"
	assert_equal "$stderr" ""
}

@test "policies protect sealed memfds, leave out devices and anonymous memory" {
	local policy
	for policy in shm files; do
		run -0 --separate-stderr wrapper -p "$policy" "$MAP" memfd 1 stats
		assert_output --partial 'mappings=1'
		# Sealed against shrinking, it can still be shorter than a mapping.
		run -0 --separate-stderr wrapper -p "$policy" "$MAP" memfd-sealed 1 stats
		assert_output --partial 'mappings=1'
		run -0 --separate-stderr wrapper -p "$policy" "$MAP" dev-zero 1 stats
		assert_output --partial 'mappings=0'
		run -0 --separate-stderr wrapper -p "$policy" "$MAP" anon 1 stats
		assert_output --partial 'mappings=0'
	done
	# An explicit flag is honoured on any of them.
	run -0 --separate-stderr wrapper "$MAP" --flag anon 1 stats
	assert_output --partial 'mappings=1'
	run -0 --separate-stderr wrapper "$MAP" --flag memfd-sealed 1 stats
	assert_output --partial 'mappings=1'
}

@test "a write past the end stays in memory; the file never changes" {
	run -0 --separate-stderr wrapper -p shm "$MAP" memfd 2 trunc=0 write=1 read=0 size
	assert_output "$(printf 'wrote 1: ok\npage 0: zeros\nsize: 0')"
	run -0 --separate-stderr wrapper -p files "$MAP" "$(disk_file)" 2 trunc=0 write=1 size
	assert_output "$(printf 'wrote 1: ok\nsize: 0')"
	[ "$(stat -c %s "$(disk_file)")" = 0 ] || fail "the disk file grew"
}

@test "fill=page: untouched pages keep following the file" {
	run -0 --separate-stderr wrapper -p shm -f page "$MAP" memfd 4 \
		trunc=0 read=1 grow=4 read=2 read=1 read=3
	assert_output "$(printf 'page 1: zeros\npage 2: file\npage 1: zeros\npage 3: file')"
}

@test "fill=range: the rest of the mapping is replaced at once" {
	run -0 --separate-stderr wrapper -p shm -f range "$MAP" memfd 4 \
		trunc=0 read=1 grow=4 read=2 read=0 read=3 stats
	assert_line --index 0 'page 1: zeros'
	assert_line --index 1 'page 2: zeros'
	assert_line --index 2 'page 0: file'
	assert_line --index 3 'page 3: zeros'
	assert_line --index 4 --regexp '^stats: rescues=1 pages=3 failures=0 '
}

@test "--strict: MAP_SHARED|MAP_NOSIGBUS fails with EINVAL, private is fine" {
	run -1 --separate-stderr wrapper --strict "$MAP" --flag memfd 1
	assert_equal "$stderr" 'FAIL: mmap: Invalid argument'
	run -0 --separate-stderr wrapper --strict "$MAP" --flag --private memfd 2 trunc=0 read=1
	assert_output 'page 1: zeros'
	# Without --strict the shared one is protected.
	run -0 --separate-stderr wrapper "$MAP" --flag memfd 2 trunc=0 read=1
	assert_output 'page 1: zeros'
}

@test "--strict with a policy: shared mappings are left out, private ones kept" {
	run -135 --separate-stderr wrapper --strict -p shm "$MAP" memfd 2 trunc=0 read=1
	run -0 --separate-stderr wrapper --strict -p shm "$MAP" --private memfd 2 trunc=0 read=1
	assert_output 'page 1: zeros'
	run -0 --separate-stderr wrapper --strict -p files "$MAP" "$(disk_file)" 1 stats
	assert_output --partial 'mappings=0'
}
