#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
#
# The mission's first user: a real weston 10 (Debian's) with the headless
# backend, the pixman renderer and the desktop shell, and a hostile client
# (hostile-client.c) that shrinks its shm buffer's memfd to nothing after the
# first frame and keeps committing the buffer.
#
# What weston 10 does without the library (found by running it): weston
# survives, because libwayland-server's wl_shm code catches the SIGBUS of its
# own accesses (wl_shm_buffer_begin_access/end_access, which the pixman
# renderer calls around each repaint), maps zeros over the pool and then
# disconnects the client with a protocol error on its wl_buffer,
# "error accessing SHM buffer" (wl_shm error 2, invalid_fd).  The client gets
# no frame callback after the truncation.
#
# With the library preloaded and nothing else (LD_PRELOAD=libnosigbus.so
# weston: the default policy, shm, issue 15), and through the wrapper, the
# library rescues the fault before libwayland's handler sees it: the client
# stays connected and gets every frame callback, and weston draws zeros (a
# black window) where the buffer was.  With NOSIGBUS_POLICY=flag nothing of
# weston's is protected, and the library must pass the fault on to
# libwayland's handler (chaining in a real program): the behaviour is
# exactly the one without the library.
#
# Each test starts its own weston on a private XDG_RUNTIME_DIR and socket,
# with weston.ini in the test's directory (no animations, no panel, a plain
# background so that screenshots can be counted pixel by pixel), and stops it
# by pid in teardown.  Screenshots come from Debian's weston-screenshooter
# through weston's --debug screenshooter protocol (weston.bash).

load weston

# What libwayland-server does on its own: the client is cut off with
# "error accessing SHM buffer" at the first frame after the truncation.
assert_client_cut_off() {
	client_finish
	assert_equal "$CLIENT_STATUS" 3
	run -0 printf '%s' "$CLIENT_OUTPUT"
	assert_line --index 3 "truncated"
	assert_line --index 4 --regexp '^disconnected: protocol error 2 on wl_buffer@[0-9]+$'
	assert_equal "${#lines[@]}" 5
	run -0 cat "$BATS_TEST_TMPDIR/client.err"
	assert_output --regexp '^wl_buffer@[0-9]+: error 2: error accessing SHM buffer$'
}

# A well-behaved client connects and is drawn: our own, counted on screen,
# then Debian's weston-simple-shm, until its first frame callback.
assert_good_clients_render() {
	start_client --pause --no-truncate --colour "$GOOD_COLOUR" 1
	client_expect "frame 0"
	client_expect "paused before truncate"
	screenshot good
	assert_screen_window "$GOOD_COLOUR"
	client_resume
	client_expect "frame 1"
	client_expect "paused after frames"
	client_resume
	client_expect "connected after 1 frames"
	client_finish
	assert_equal "$CLIENT_STATUS" 0

	simple_shm_until_frame
}

# Runs weston-simple-shm until libwayland-client's debug log shows its first
# frame callback arriving, then interrupts it: it exits 0 on SIGINT.
simple_shm_until_frame() {
	local fifo=$BATS_TEST_TMPDIR/simple-shm.err line found='' pid status=0
	mkfifo "$fifo"
	WAYLAND_DEBUG=client weston-simple-shm </dev/null >/dev/null \
		2>"$fifo" 3>&- &
	pid=$!
	exec {err}<"$fifo"
	while IFS= read -r -t 20 -u "$err" line; do
		if [[ $line == *'wl_callback@'*'.done('* ]]; then
			found=1
			break
		fi
	done
	kill -INT "$pid"
	cat <&"$err" >/dev/null
	exec {err}<&-
	wait "$pid" || status=$?
	[ -n "$found" ] || fail "weston-simple-shm got no frame callback"
	assert_equal "$status" 0
}

# Pages of the hostile client's pool (its buffer, rounded up to pages).
pool_pages() {
	local page size
	page=$(getconf PAGESIZE)
	size=$((WINDOW_W * WINDOW_H * 4))
	echo $(((size + page - 1) / page))
}

@test "without the library: weston survives, libwayland disconnects the client" {
	start_weston
	hostile_until_truncation
	assert_client_cut_off
	assert_weston_running
	assert_good_clients_render
	stop_weston
	assert_equal "$WESTON_STATUS" 0
}

# The library's part: the client stays connected through every frame
# after the truncation, its window is drawn from zero pages (black), and
# well-behaved clients render afterwards.
assert_client_survives() {
	hostile_until_truncation
	client_expect "truncated"
	for ((n = 1; n <= FRAMES; n++)); do
		client_expect "frame $n"
	done
	client_expect "paused after frames"
	# Still on screen, still connected: the window is now zeros, black.
	screenshot after
	assert_screen_window "$ZERO_COLOUR"
	client_stays_to_the_end

	assert_weston_running
	assert_good_clients_render
}

# Issue 15: the project's own command line, as written.  The library is
# found by name, as on an installed system (here through LD_LIBRARY_PATH,
# the build tree's directory, which holds libnosigbus.so too).
@test "LD_PRELOAD=libnosigbus.so weston, nothing else: the client stays, weston reads zeros" {
	start_weston env LD_LIBRARY_PATH="$(dirname "$NSB_PRELOAD")" LD_PRELOAD=libnosigbus.so
	assert_preloaded
	assert_client_survives
	stop_weston
	assert_equal "$WESTON_STATUS" 0
	# Nothing printed by the library without NOSIGBUS_LOG.
	run -1 grep '^nosigbus: ' "$BATS_TEST_TMPDIR/weston.err"
}

@test "nosigbus --verbose weston: the same, and the log shows each rescue" {
	start_weston "$NSB_WRAPPER" --verbose
	assert_preloaded
	assert_client_survives
	local pid=$WESTON_PID pages
	pages=$(pool_pages)
	stop_weston
	assert_equal "$WESTON_STATUS" 0

	# Weston's own log lines: the whole pool rescued at once (a memfd the
	# policy protects has range fill by default: issue 24), at an address
	# in the hostile client's memfd, and nothing else.
	# The line names the client that sent the memfd (issue 22), and the
	# pool's last line comes if weston unmaps it before it exits.
	run -0 grep "^nosigbus: weston\[$pid\]: " "$BATS_TEST_TMPDIR/weston.err"
	local from='/memfd:nosigbus-hostile( \(deleted\))? from nsb-hostile-cli\[[0-9]+\]'
	assert_line --index 0 --regexp "^nosigbus: weston\[$pid\]: rescued 0x[0-9a-f]+ in $from \(fill=range, $pages pages?\)$"
	if [ "${#lines[@]}" = 3 ]; then
		assert_line --index 1 --regexp "^nosigbus: weston\[$pid\]: unmapped $from: $pages pages? rescued in 1 fault$"
	else
		assert_equal "${#lines[@]}" 2
	fi
	assert_line --index $((${#lines[@]} - 1)) "nosigbus: weston[$pid]: 1 rescues, $pages pages replaced, 0 failures"
}

@test "NOSIGBUS_POLICY=flag (the opt-out): same as without, libwayland's handler gets the fault" {
	start_weston env LD_PRELOAD="$NSB_PRELOAD" NOSIGBUS_POLICY=flag NOSIGBUS_LOG=1
	assert_preloaded
	hostile_until_truncation
	assert_client_cut_off
	assert_weston_running
	assert_good_clients_render
	stop_weston
	assert_equal "$WESTON_STATUS" 0
	# Logging was on, and nothing was rescued: not a line (no summary
	# from a process that rescued nothing).
	run -1 grep '^nosigbus: ' "$BATS_TEST_TMPDIR/weston.err"
}

# A sealed memfd of one page (F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL), its
# pool created at that page and grown by wl_shm_pool.resize to the
# buffer's size: libwayland-server sets up no SIGBUS handling for a pool
# whose memfd cannot shrink, so weston's first repaint of the buffer reads
# past the end of the file.
@test "a sealed memfd pool grown by resize: weston dies without the library" {
	start_weston
	start_client --sealed-resize 1
	client_finish
	# The connection lost: the compositor died.
	assert_equal "$CLIENT_STATUS" 4
	local status=0
	wait "$WESTON_PID" || status=$?
	WESTON_PID=
	# SIGBUS (128 + 7), or weston's own crash handler's exit after it.
	[ "$status" != 0 ] || fail "weston exited 0"
	echo "# weston ended with status $status" >&3
}

@test "a sealed memfd pool grown by resize: weston lives under the bare preload" {
	start_weston env LD_LIBRARY_PATH="$(dirname "$NSB_PRELOAD")" LD_PRELOAD=libnosigbus.so
	assert_preloaded
	start_client --pause --sealed-resize "$FRAMES"
	client_expect "configured ${WINDOW_W}x${WINDOW_H}"
	client_expect "frame 0"
	client_expect "paused before truncate"
	# The sealed page shows the colour; the rest of the buffer, past the
	# file's end, zeros (black).
	local page_pixels=$(($(getconf PAGESIZE) / 4)) window=$((WINDOW_W * WINDOW_H))
	screenshot sealed
	assert_line "$HOSTILE_COLOUR $page_pixels"
	assert_line "$ZERO_COLOUR $((window - page_pixels))"
	assert_line "$BACKGROUND $((OUTPUT_W * OUTPUT_H - window))"
	client_resume
	for ((n = 1; n <= FRAMES; n++)); do
		client_expect "frame $n"
	done
	client_expect "paused after frames"
	client_stays_to_the_end
	assert_weston_running
	assert_good_clients_render
	stop_weston
	assert_equal "$WESTON_STATUS" 0
}
