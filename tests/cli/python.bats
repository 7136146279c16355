#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run --separate-stderr sets stderr and stderr_lines
#
# A real, unmodified program from Debian: /usr/bin/python3 maps a file with
# its mmap module, the file is truncated, and python reads the mapping.
# Without the library it dies by SIGBUS; through the wrapper with a policy
# that covers the file, it reads zeros and finishes.

load common

setup() {
	[ -x "$PYTHON" ] || skip "$PYTHON is not installed"
	make_disk_dir
	# Maps argv[1] (two pages of 'x'), has it truncated to nothing by
	# argv[2] ("self": os.truncate; "other": truncate(1) in a child
	# process), then reads both pages.
	cat >"$BATS_TEST_TMPDIR/trunc.py" <<-'EOF'
		import mmap, os, subprocess, sys
		path, who = sys.argv[1], sys.argv[2]
		size = 2 * mmap.PAGESIZE
		with open(path, "wb") as f:
		    f.write(b"x" * size)
		with open(path, "rb") as f:
		    m = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)
		print("mapped", m[0:1].decode(), flush=True)
		if who == "self":
		    os.truncate(path, 0)
		else:
		    subprocess.run(["truncate", "-s", "0", path], check=True)
		print("truncated to", os.stat(path).st_size, flush=True)
		data = m[:]
		print("read", len(data), "bytes, all zero:", data == bytes(size), flush=True)
	EOF
}

teardown() {
	remove_dirs
}

@test "python3 dies by SIGBUS on a truncated mapping without the wrapper" {
	run -135 --separate-stderr "$PYTHON" "$BATS_TEST_TMPDIR/trunc.py" "$DISK/f" self
	assert_output "$(printf 'mapped x\ntruncated to 0')"
}

@test "python3 reads zeros through nosigbus --policy=files" {
	run -0 --separate-stderr wrapper --policy=files "$PYTHON" "$BATS_TEST_TMPDIR/trunc.py" "$DISK/f" self
	assert_output "$(printf 'mapped x\ntruncated to 0\nread %d bytes, all zero: True' "$((2 * $(page_size)))")"
	[ -z "$stderr" ] || fail "unexpected stderr: $stderr"
	[ "$(stat -c %s "$DISK/f")" = 0 ] || fail "the file changed"
}

@test "python3: another process truncates the file" {
	run -135 --separate-stderr "$PYTHON" "$BATS_TEST_TMPDIR/trunc.py" "$DISK/f" other
	run -0 --separate-stderr wrapper -p files -v "$PYTHON" "$BATS_TEST_TMPDIR/trunc.py" "$DISK/f" other
	assert_line --index 2 --partial 'all zero: True'
	# With -v: one line per rescue (two pages, fill=page) and the summary.
	assert_equal "${#stderr_lines[@]}" 3
	[[ ${stderr_lines[2]} =~ ^nosigbus:\ python3[^[]*\[[0-9]+\]:\ 2\ rescues,\ 2\ pages\ replaced,\ 0\ failures$ ]] ||
		fail "summary: ${stderr_lines[2]}"
}

@test "python3 under --policy=shm: a disk file is not covered" {
	run -135 --separate-stderr wrapper --policy=shm "$PYTHON" "$BATS_TEST_TMPDIR/trunc.py" "$DISK/f" self
	assert_output "$(printf 'mapped x\ntruncated to 0')"
}

@test "python3 under --policy=shm: a /dev/shm file is" {
	make_shm_dir
	run -0 --separate-stderr wrapper --policy=shm "$PYTHON" "$BATS_TEST_TMPDIR/trunc.py" "$SHM/f" self
	assert_line --index 2 --partial 'all zero: True'
}
