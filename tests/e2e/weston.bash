# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # the tests read the variables set here,
# and lines and output are set by bats' run
#
# Loaded by weston.bats and recovery.bats (load weston): a weston 10 of the
# test's own, with the headless backend, the pixman renderer and the
# desktop shell, on a private XDG_RUNTIME_DIR and socket, with weston.ini
# in the test's directory (no animations, no panel, a plain background so
# that screenshots can be counted pixel by pixel), stopped by pid in
# teardown; the hostile client (hostile-client.c) followed line by line;
# screenshots from Debian's weston-screenshooter through weston's --debug
# screenshooter protocol.

load common


# The headless output and the client's window (hostile-client's default).
OUTPUT_W=320
OUTPUT_H=240
WINDOW_W=128
WINDOW_H=96
FRAMES=5
# Colours as png-colours.py prints them.
BACKGROUND=202020
HOSTILE_COLOUR=33cc66
GOOD_COLOUR=cc3366
ZERO_COLOUR=000000

setup() {
	require weston weston
	require weston-simple-shm weston
	# /usr/bin in Debian 12; some packagings keep it in libexec.
	SCREENSHOOTER=$(command -v weston-screenshooter) || true
	local f
	for f in /usr/lib/*/weston/weston-screenshooter \
		/usr/libexec/weston-screenshooter; do
		if [ -z "$SCREENSHOOTER" ] && [ -x "$f" ]; then
			SCREENSHOOTER=$f
		fi
	done
	[ -n "$SCREENSHOOTER" ] ||
		fail "weston-screenshooter is not installed (Debian: apt install weston)"
	require "$PYTHON" python3
	HOSTILE=$E2E_BUILD/nsb-hostile-client
	[ -x "$HOSTILE" ] || fail "$HOSTILE is not built"
	WESTON_PID=
	CLIENT_PID=
	unset WAYLAND_DISPLAY WAYLAND_SOCKET
}

teardown() {
	if [ -n "$CLIENT_PID" ]; then
		kill -KILL "$CLIENT_PID" 2>/dev/null || true
		wait "$CLIENT_PID" 2>/dev/null || true
	fi
	stop_weston
	if [ -n "${BATS_TEST_COMPLETED-}" ]; then
		return
	fi
	# On failure (a deadline included), show what weston and the client
	# said, and the stacks taken at a hang.
	show_tails "$BATS_TEST_TMPDIR"/weston.log "$BATS_TEST_TMPDIR"/weston.out \
		"$BATS_TEST_TMPDIR"/weston.err "$BATS_TEST_TMPDIR"/client.err \
		"$BATS_TEST_TMPDIR"/weston-stacks.log
	if [ -n "${CLIENT_OUTPUT-}" ]; then
		echo "# --- the client's stdout (last 40 lines)"
		printf '%s' "$CLIENT_OUTPUT" | tail -n 40 | sed 's/^/# /'
	fi >&3
}

# Starts weston, prefixed by "$@" (the wrapper, env settings...), and waits
# for its socket.  Sets WESTON_PID and exports XDG_RUNTIME_DIR and
# WAYLAND_DISPLAY for the clients.
start_weston() {
	local tries
	XDG_RUNTIME_DIR=$BATS_TEST_TMPDIR/xdg
	mkdir -m 0700 "$XDG_RUNTIME_DIR"
	export XDG_RUNTIME_DIR
	export WAYLAND_DISPLAY=nsb-e2e-$BATS_TEST_NUMBER
	weston_ini "$BATS_TEST_TMPDIR/weston.ini" "background-color=0xff$BACKGROUND"
	"$@" weston --backend=headless-backend.so --use-pixman \
		--width=$OUTPUT_W --height=$OUTPUT_H \
		--shell=desktop-shell.so --socket="$WAYLAND_DISPLAY" \
		--idle-time=0 --debug \
		--config="$BATS_TEST_TMPDIR/weston.ini" \
		--log="$BATS_TEST_TMPDIR/weston.log" \
		</dev/null >"$BATS_TEST_TMPDIR/weston.out" \
		2>"$BATS_TEST_TMPDIR/weston.err" 3>&- &
	WESTON_PID=$!
	# Bounded wait for the socket (not a timing assertion: a slow machine
	# only waits longer, up to 20 s, scaled).
	for ((tries = 0; tries < $(scaled 20) * 20; tries++)); do
		[ -S "$XDG_RUNTIME_DIR/$WAYLAND_DISPLAY" ] && break
		kill -0 "$WESTON_PID" 2>/dev/null ||
			fail "weston exited before creating its socket"
		sleep 0.05
	done
	[ -S "$XDG_RUNTIME_DIR/$WAYLAND_DISPLAY" ] ||
		fail "weston did not create $XDG_RUNTIME_DIR/$WAYLAND_DISPLAY"
	wait_for_desktop
}

# The desktop shell's client draws the background some time after the
# socket appears; screenshots counted before that would see a black screen.
# Polls (bounded) until the screen is all background.
wait_for_desktop() {
	local tries
	for ((tries = 0; tries < 100; tries++)); do
		screenshot "desktop-$tries"
		if [ "${#lines[@]}" -eq 2 ] &&
			[ "${lines[1]}" = "$BACKGROUND $((OUTPUT_W * OUTPUT_H))" ]; then
			return 0
		fi
	done
	fail "weston's desktop shell never drew its background: $output"
}

# Stops weston by pid (SIGTERM, which it handles); sets WESTON_STATUS.
stop_weston() {
	[ -n "$WESTON_PID" ] || return 0
	stop_pid "$WESTON_PID" $(($(scaled 10) * 20))
	WESTON_STATUS=$STOP_STATUS
	WESTON_PID=
}

assert_weston_running() {
	kill -0 "$WESTON_PID" 2>/dev/null || fail "weston is no longer running"
}

# Starts the hostile client with "$@"; its stdin and stdout are FIFOs (fds
# CLIENT_IN and CLIENT_OUT) so the test can follow it line by line.
start_client() {
	local dir=$BATS_TEST_TMPDIR
	rm -f "$dir/client.in" "$dir/client.out"
	mkfifo "$dir/client.in" "$dir/client.out"
	"$HOSTILE" "$@" <"$dir/client.in" >"$dir/client.out" \
		2>"$dir/client.err" 3>&- &
	CLIENT_PID=$!
	exec {CLIENT_IN}>"$dir/client.in"
	exec {CLIENT_OUT}<"$dir/client.out"
	CLIENT_OUTPUT=
}

# Reads client lines up to one equal to $1; fails if the client ends first.
client_expect() {
	local line
	# The timeout (scaled) only stops a hung test; correctness never
	# depends on it.
	while IFS= read -r -t "$(scaled 20)" -u "$CLIENT_OUT" line; do
		CLIENT_OUTPUT+="$line"$'\n'
		[ "$line" = "$1" ] && return 0
	done
	[ -z "$WESTON_PID" ] || save_stacks "$WESTON_PID" weston "$BATS_TEST_TMPDIR/weston-stacks.log"
	fail "hostile client never printed '$1'; it printed:
$CLIENT_OUTPUT$(cat "$BATS_TEST_TMPDIR/client.err")"
}

client_resume() {
	echo go >&"$CLIENT_IN"
}

# Lets the client run to its end; sets CLIENT_STATUS, and CLIENT_OUTPUT to
# all it printed.
client_finish() {
	local rest
	exec {CLIENT_IN}>&-
	rest=$(cat <&"$CLIENT_OUT")
	exec {CLIENT_OUT}<&-
	[ -z "$rest" ] || CLIENT_OUTPUT+="$rest"$'\n'
	CLIENT_STATUS=0
	wait "$CLIENT_PID" || CLIENT_STATUS=$?
	CLIENT_PID=
}

# hostile_until_truncation [OPTIONS]: the hostile client (with OPTIONS)
# runs up to the truncation; the screen shows its window.
hostile_until_truncation() {
	start_client --pause "$@" "$FRAMES"
	client_expect "configured ${WINDOW_W}x${WINDOW_H}"
	client_expect "frame 0"
	client_expect "paused before truncate"
	screenshot before
	assert_screen_window "$HOSTILE_COLOUR"
	client_resume
}

# The client, let go, ends connected after every frame, quietly.
client_stays_to_the_end() {
	client_resume
	client_finish
	assert_equal "$CLIENT_STATUS" 0
	run -0 printf '%s' "$CLIENT_OUTPUT"
	assert_line "connected after $FRAMES frames"
	refute_line --partial disconnected
	run -0 cat "$BATS_TEST_TMPDIR/client.err"
	assert_output ""
}

# Takes a screenshot of the output; leaves "WxH" and "RRGGBB COUNT" lines
# (most frequent colour first) in $output/$lines.
screenshot() {
	local dir=$BATS_TEST_TMPDIR/shot-$1
	mkdir "$dir"
	(cd "$dir" && "$SCREENSHOOTER" 3>&-) ||
		fail "weston-screenshooter failed"
	run -0 "$PYTHON" "$E2E_SRC/png-colours.py" "$dir"/*.png
	assert_line --index 0 "${OUTPUT_W}x${OUTPUT_H}"
}

# The screen is the background and one window of colour $1, nothing else.
assert_screen_window() {
	local window=$((WINDOW_W * WINDOW_H))
	assert_line "$1 $window"
	assert_line "$BACKGROUND $((OUTPUT_W * OUTPUT_H - window))"
	assert_equal "${#lines[@]}" 3
}

# The library is in weston's address space.
assert_preloaded() {
	grep -q 'libnosigbus' "/proc/$WESTON_PID/maps" ||
		fail "libnosigbus is not loaded in weston"
}
