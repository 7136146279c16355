#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
#
# X servers (issue 22): an X client hands the server a file through
# MIT-SHM 1.2's fd passing (xcb_shm_attach_fd; the server receives it with
# recvmsg and maps it shared), the server copies it into a pixmap
# (ShmPutImage), the client shrinks the file to 0 or to 12 bytes and asks
# for the copy twice more (xshm-client.c says what each request got).  The
# file is a memfd, a file in /dev/shm, or a file on disk (/var/tmp, not
# tmpfs), for each of two servers:
#
#   Xvfb 21.1 (xvfb), alone;
#   Xwayland 22.1 (xwayland), rootless, as a client of a weston 10 of its
#     own (weston runs without the library: only Xwayland is under test).
#
# Without the library (found by running them, and asserted): the X server
# survives through its own SIGBUS handler (os/busfault.c), which maps
# zeros over the whole segment, and frees the segment the next time it
# waits for clients (WaitForSomething), logging "shared memory 0x...
# truncated by client".  So the ShmPutImage that faulted succeeds, with
# zeros from the first page past the end of the file (a file truncated to
# 12 bytes keeps 3 pixels), and the next one, and the detach, fail with
# BadShmSeg.  Not always (about one scenario in ten, in 5 runs of this
# file): the segment may be freed only after the next ShmPutImage, which
# then reads the handler's zeros over the whole segment, first page
# included, or never (no log line then).  Those races are the server's;
# the test accepts them (and says which it saw in a TAP comment), and
# still requires that a freed segment stays freed and that the server
# logs one line per segment it freed.
#
# With the library preloaded alone (LD_PRELOAD=.../libnosigbus.so, no
# NOSIGBUS_ variable): the library rescues the fault first (a received
# file: protected whatever its file system, SPEC §3), the server never
# knows; every ShmPutImage succeeds, reading zeros past the end of the
# file only (the 3 pixels stay: pages inside the file are never
# replaced), the segment stays until the client detaches it, and the
# server prints nothing, of its own or of the library's.
#
# Issue 37, two more files, each asserted as found by running:
#   - a sealed memfd of one page (F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL),
#     shorter than the image put from it: MIT-SHM carries no size, the
#     server maps what fstat says at ShmAttachFd and refuses every
#     ShmPutImage past it with BadValue, with or without the library;
#     nothing faults, the rows inside the page are put, the server lives.
#   - a FUSE file of the client's own (fuse-pool.h) whose reads fail with
#     EIO after the first put, from offset 0 or from the second page:
#     faults inside the file's size.  Without the library it goes as a
#     truncation (the server's handler zeros and frees the segment); with
#     the bare preload the failing pages read zeros (the file is the
#     peer's), the segment stays, the server prints nothing.  Skipped, with
#     the client's reason, where FUSE cannot be mounted.

load compositors

setup() {
	comp_setup
	XSHM=$E2E_BUILD/nsb-xshm-client
	[ -x "$XSHM" ] || fail "$XSHM is not built"
	DISK_DIR=$(disk_dir)
	X_PID=
}

teardown() {
	if [ -n "$X_PID" ]; then
		kill -TERM "$X_PID" 2>/dev/null || true
		wait "$X_PID" 2>/dev/null || true
	fi
	comp_teardown
}

PIXELS=$((64 * 48))

# start_x SERVER [PRELOAD]: Xvfb, or Xwayland in a weston; the server
# chooses a free display and writes its number when it is ready.
start_x() {
	local server=$1 preload=${2-}
	local -a pre=()
	[ -z "$preload" ] || pre=(LD_PRELOAD="$preload")
	case $server in
	Xvfb)
		require Xvfb xvfb
		# shellcheck disable=SC2034 # compositors.bash names things after it
		COMP=xvfb
		make_comp_dir "$(id -u)"
		X_ARGS=(Xvfb -screen 0 320x240x24)
		;;
	Xwayland)
		require Xwayland xwayland
		start_compositor weston
		X_ARGS=(Xwayland -rootless)
		;;
	esac
	X_ERR=$COMP_DIR/$server.err
	env "${pre[@]}" "${X_ARGS[@]}" -displayfd 4 -nolisten tcp \
		</dev/null >"$X_ERR" 2>&1 4>"$COMP_DIR/x-display" 3>&- &
	X_PID=$!
	wait_displayfd "$COMP_DIR/x-display" "$X_PID" "$server"
	if [ -n "$preload" ]; then
		grep -q libnosigbus "/proc/$X_PID/maps" ||
			fail "libnosigbus is not loaded in $server"
	fi
}

stop_x() {
	local tries
	kill -TERM "$X_PID" 2>/dev/null || true
	for ((tries = 0; tries < POLL_TRIES; tries++)); do
		kill -0 "$X_PID" 2>/dev/null || break
		sleep 0.05
	done
	X_STATUS=0
	wait "$X_PID" || X_STATUS=$?
	X_PID=
}

# The X client, bounded by the client's deadline (scaled); at the deadline
# the X server's stacks are taken (shown by comp_teardown) and the test
# fails.
run_xshm() {
	run timeout -k 5 "$CLIENT_DEADLINE" "$XSHM" "$@"
	if [ "$status" = 124 ]; then
		save_stacks "$X_PID" "${X_ARGS[0]}" "$COMP_DIR/x-stacks.log"
		fail "the X client ($*) did not end in $CLIENT_DEADLINE s: $output"
	fi
}

# The lines that do not depend on the library.
assert_first_put() {
	assert_line --index 0 --regexp '^mit-shm 1\.([2-9]|[1-9][0-9])$'
	assert_line --index 1 "attach: ok"
	assert_line --index 2 "put: ok"
	assert_line --index 3 "image: 33cc66"
	assert_line --index 4 "truncated"
}

# What the pixmap holds after a put from the truncated file: zeros past
# its end (a truncation to 12 bytes keeps 3 pixels; a FUSE file failing
# from its second page keeps the first).
image_after() {
	if [ "$1" = 0 ]; then
		echo "image: 000000"
	else
		echo "image: 33cc66*$(($1 / 4)) 000000*$((PIXELS - $1 / 4))"
	fi
}

# Without the library, after the ShmPutImage that faulted: the server
# frees the segment before the next request (usually), between the next
# ShmPutImage and the detach, or not at all (see the top); once freed, every
# use is BadShmSeg.  A ShmPutImage that still finds the segment reads the
# server's own zeros, over the whole segment (the 3 pixels too).
without_library() {
	local server=$1 backing=$2 to=$3
	if [ "${lines[7]}" = "put: ok" ]; then
		assert_line --index 8 "image: 000000"
		if [ "${lines[9]}" = "detach: ok" ]; then
			echo "# $server, $backing file truncated to $to: the segment was never freed" >&3
			return 0
		fi
		echo "# $server, $backing file truncated to $to: the segment was freed after the next ShmPutImage" >&3
	else
		assert_line --index 7 "put: error BadShmSeg"
		assert_line --index 8 "$(image_after "$to")"
	fi
	assert_line --index 9 "detach: error BadShmSeg"
	freed=$((freed + 1))
}

# One truncation scenario: the client's lines, with or without the library.
truncated_cell() {
	local server=$1 preload=$2 backing=$3 to=$4
	assert_success
	assert_first_put
	assert_line --index 5 "put: ok"
	assert_line --index 6 "$(image_after "$to")"
	if [ -n "$preload" ]; then
		# Only the pages past the end (or failing) were replaced.
		assert_line --index 7 "put: ok"
		assert_line --index 8 "$(image_after "$to")"
		assert_line --index 9 "detach: ok"
	else
		without_library "$server" "$backing" "$to"
	fi
	[ "${#lines[@]}" -eq 10 ] || fail "${#lines[@]} lines, not 10: $(printf '%s|' "${lines[@]}")"
	kill -0 "$X_PID" 2>/dev/null || fail "$server died"
}

# A sealed memfd of one page, shorter than the image put from it (issue
# 37): the server maps what fstat says at ShmAttachFd and refuses every
# ShmPutImage past it (BadValue), with or without the library; nothing
# faults, and the rows that fit the page are put.
sealed_cell() {
	run_xshm --backing sealed
	assert_success
	assert_line --index 1 "attach: ok"
	assert_line --index 2 "put: error BadValue"
	assert_line --index 4 "sealed"
	assert_line --index 5 "put: error BadValue"
	assert_line --index 7 "put: error BadValue"
	assert_line --index 9 "put page: ok"
	assert_line --index 10 --regexp "^image: 33cc66\\*$(($(getconf PAGESIZE) / 4))( |\$)"
	assert_line --index 11 "detach: ok"
	assert_equal "${#lines[@]}" 12
	kill -0 "$X_PID" 2>/dev/null || fail "$1 died"
}

# A well-behaved client, then the server's stop status and log: one line
# of the server's per segment it freed (none with the library), and
# nothing of the library's.
finish_x() {
	run_xshm --no-truncate
	assert_success
	assert_line --index 7 "image: 33cc66"
	assert_line --index 8 "detach: ok"
	refute_line --partial error
	assert_equal "${#lines[@]}" 9
	stop_x
	assert_equal "$X_STATUS" 0
	run grep -c '^shared memory 0x[0-9a-f]* truncated by client$' "$X_ERR"
	assert_output "$freed"
	run grep -c 'nosigbus:' "$X_ERR"
	assert_output 0
}

matrix() {
	local server=$1 preload=${2-} backing to freed=0
	start_x "$server" "$preload"
	for backing in memfd shm disk; do
		for to in 0 12; do
			run_xshm --backing "$backing" --dir "$DISK_DIR" --truncate-to "$to"
			truncated_cell "$server" "$preload" "$backing" "$to"
		done
	done
	sealed_cell "$server"
	finish_x
}

# A segment in a FUSE file system of the client's own (xshm-client
# --backing fuse, fuse-pool.h, issue 37) whose reads fail with EIO after
# the first put, from offset 0 or from the second page, its pages dropped
# from the server's mapping: faults inside the file's size.  It goes as a
# truncation: without the library the server's handler frees the segment;
# with it (the file is the peer's) the failing pages read zeros and the
# segment stays.  Skips, with the client's reason, without FUSE.
fuse_matrix() {
	local server=$1 preload=${2-} to freed=0
	start_x "$server" "$preload"
	for to in 0 "$(getconf PAGESIZE)"; do
		# The client's stderr apart: its FUSE server (a child that
		# outlives it a little) may say something of its own as the
		# file system goes; shown, and no line of the library's in it.
		run --separate-stderr timeout -k 5 "$CLIENT_DEADLINE" "$XSHM" --backing fuse --truncate-to "$to"
		[ "$status" != 6 ] || skip "$output"
		# shellcheck disable=SC2154 # run --separate-stderr sets stderr
		[ -z "$stderr" ] || echo "# the client's stderr (its FUSE server's): $stderr" >&3
		[[ $stderr != *nosigbus:* ]] || fail "a line of the library's: $stderr"
		truncated_cell "$server" "$preload" fuse "$to"
	done
	finish_x
}

@test "Xvfb: without the library, the server frees the truncated segment" {
	matrix Xvfb
}

@test "Xvfb: with LD_PRELOAD alone, the segment stays and reads zeros" {
	matrix Xvfb "$NSB_PRELOAD"
}

@test "Xwayland in weston: without the library, the server frees the truncated segment" {
	matrix Xwayland
	stop_compositor
	assert_equal "$COMP_STATUS" 0
}

@test "Xwayland in weston: with LD_PRELOAD alone, the segment stays and reads zeros" {
	matrix Xwayland "$NSB_PRELOAD"
	stop_compositor
	assert_equal "$COMP_STATUS" 0
}

@test "Xvfb: without the library, a FUSE segment whose reads fail: the server frees it" {
	fuse_matrix Xvfb
}

@test "Xvfb: with LD_PRELOAD alone, a FUSE segment whose reads fail stays and reads zeros" {
	fuse_matrix Xvfb "$NSB_PRELOAD"
}

@test "Xwayland in weston: without the library, a FUSE segment whose reads fail: the server frees it" {
	fuse_matrix Xwayland
	stop_compositor
	assert_equal "$COMP_STATUS" 0
}

@test "Xwayland in weston: with LD_PRELOAD alone, a FUSE segment whose reads fail stays and reads zeros" {
	fuse_matrix Xwayland "$NSB_PRELOAD"
	stop_compositor
	assert_equal "$COMP_STATUS" 0
}
