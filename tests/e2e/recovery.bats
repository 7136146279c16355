#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
#
# Recovery (issue 22, SPEC §5 "Recovery"), in a real weston 10 under the
# bare preload (LD_PRELOAD=.../libnosigbus.so, no NOSIGBUS_ variable): the
# hostile client truncates its memfd pool after its first frame, weston
# reads the buffer (rescued: the library replaces the pool's pages with
# zero pages, all of them at the first fault, the default range fill for a
# received memory file), and then the client recovers: it grows the file
# back (one page longer than before), fills it with a new colour, and
# attaches a new buffer at offset 0 of the same pool.
#
#   - With wl_shm_pool.resize to the new size: libwayland-server mremaps
#     the pool (it remaps only when the size changes, hence the extra
#     page), and the library maps the file again over the pages it had
#     replaced that the file covers now (src/refresh.c): a screenshot shows
#     the new colour.
#   - Without the resize: nothing tells the library that the file came
#     back, and weston does not call nosigbus_refresh(), so the replaced
#     pages stay what they are, private zero pages: the window stays black
#     although the file holds the new colour.  That is the documented
#     behaviour (doc/compositors.md): a client whose
#     pool shrank below what it attached broke the protocol, and a pool is
#     recovered by resizing it (or by a new pool).  Asserted as observed.
#
# The client stays connected throughout and gets every frame callback; the
# library prints nothing; weston ends normally.  Screenshots are counted
# pixel by pixel as in weston.bats (helpers in weston.bash).

load weston

NEW_COLOUR=3366cc

# The client up to its regrown frames; the screen is checked at each pause.
recover() {
	local n
	start_weston env LD_PRELOAD="$NSB_PRELOAD"
	assert_preloaded
	hostile_until_truncation --regrow "$NEW_COLOUR" "$@"

	client_expect "truncated"
	for ((n = 1; n <= FRAMES; n++)); do
		client_expect "frame $n"
	done
	client_expect "paused after frames"
	screenshot truncated
	assert_screen_window "$ZERO_COLOUR"
	client_resume

	client_expect "regrown"
	client_expect "regrown frame 1"
	client_expect "regrown frame 2"
	client_expect "paused after regrow"
	screenshot regrown
}

# The client ends connected, weston normally, the library silently.
finish() {
	client_stays_to_the_end
	assert_weston_running
	stop_weston
	assert_equal "$WESTON_STATUS" 0
	run -1 grep 'nosigbus:' "$BATS_TEST_TMPDIR/weston.err"
}

@test "recovery: regrown, redrawn and resized, the pool shows the new pixels" {
	recover --resize
	assert_screen_window "$NEW_COLOUR"
	finish
}

@test "recovery: regrown and redrawn without a resize, the pages stay zero" {
	recover
	assert_screen_window "$ZERO_COLOUR"
	finish
}
