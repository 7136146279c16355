# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # the tests read the variables set here, and
# lines and output are set by bats' run
#
# Loaded by compositors.bats, xshm.bats and wlcs.bats (load
# compositors): starting and stopping Debian 12's compositors headless on a
# machine without a GPU, and running the hostile client against them.  The
# recipes are those of the project's research notes (doc/compositors.md has the table), with what running them here taught:
#
#   weston   headless backend, pixman renderer, a weston.ini without
#            animations;
#   sway     headless backend, pixman renderer; refuses to run as root
#            ("Unable to drop root"), so it runs as nobody like cage;
#   mutter   --headless --virtual-monitor, on a private session bus;
#   kwin     --virtual, from a copy of the binary (Debian's carries
#            cap_sys_resource=ep, which makes the loader ignore a preload
#            given by path; cp drops the capability), on a private bus;
#   kwin-secure  the same copy given a file capability again, run as
#            nobody (secure execution, as Debian's own binary runs for a
#            user), in a private mount namespace where the library is in
#            the loader's system directory with the set-user-ID bit, as
#            -Dsecure-preload=true installs it (doc/packaging.md): root only;
#   mir      miral-shell on its X11 platform (Debian 12 has no virtual
#            one), inside an Xvfb of its own (mir-platform-graphics-x20);
#            with MIR_EXTENSIONS set, --add-wayland-extensions with it
#            (the virtual keyboard is not among Mir's default globals);
#   cage     headless backend, pixman renderer, as nobody (it refuses
#            root); it lives as long as its first client (sleep), and ends
#            when that ends: SIGTERM makes cage 0.1.4 abort in
#            wl_display_terminate, with the library or without.
#
# Each compositor gets a private directory (mode 755, owned by the user
# it runs as) holding its XDG_RUNTIME_DIR (mode 700), its HOME (kwin and
# mutter write configuration there) and its configuration, and a socket
# name of its own where it takes one (sway and cage choose wayland-N, in
# that private XDG_RUNTIME_DIR).  Every process started here is stopped by
# pid in comp_teardown.  Clients run as the test's user; root may connect
# to nobody's socket.

load common

# The hostile client (hostile-client.c), in the build tree.
HOSTILE=$E2E_BUILD/nsb-hostile-client

# comp_setup: what every test of these files needs; call from setup().
comp_setup() {
	[ -x "$HOSTILE" ] || fail "$HOSTILE is not built"
	COMP=
	COMP_PID=
	COMP_STATUS=
	COMP_RUNS=
	XVFB_PID=
	DBUS_PID=
	COMP_DIR=
	unset WAYLAND_DISPLAY WAYLAND_SOCKET DISPLAY XDG_RUNTIME_DIR SWAYSOCK
	unset DBUS_SESSION_BUS_ADDRESS WLR_BACKENDS WLR_RENDERER
	# A deadline for a client's whole run, and the tries of a 50 ms poll
	# that waits for a compositor to start or to end.
	CLIENT_DEADLINE=$(scaled 60)
	POLL_TRIES=$(($(scaled 30) * 20))
}

# comp_teardown: stops what is left (by pid), removes the private
# directories, and, when a test failed (a client's deadline included),
# shows what was said: the tails of the compositor's output (and of its
# earlier runs', Mir started again), the last client's stdout and stderr,
# the helpers' stderr and the stacks taken at a hang (comp_show_tails).
comp_teardown() {
	[ -n "${BATS_TEST_COMPLETED-}" ] || comp_show_tails
	[ -z "$COMP_PID" ] || stop_compositor
	stop_helpers
	[ -z "$COMP_DIR" ] || rm -rf "$COMP_DIR"
}

# comp_show_tails: the last 40 lines of every file the compositor, its
# helpers and the last client wrote in the private directory, as TAP
# comments; an empty file is named as such (Mir, say, said nothing).
comp_show_tails() {
	[ -n "$COMP_DIR" ] && [ -d "$COMP_DIR" ] || return 0
	show_tails "$COMP_DIR"/*.err "$COMP_DIR"/*.out "$COMP_DIR"/*.log
}

# comp_show_stacks: the running compositor's threads' stacks into
# $COMP_DIR/$COMP-stacks.log (shown by comp_show_tails), when gdb is
# installed, so that a hang seen once in CI says where the compositor was.
# Bounded; never fails the caller.
comp_show_stacks() {
	[ -z "$COMP_PID" ] || save_stacks "$COMP_PID" "$COMP" "$COMP_DIR/$COMP-stacks.log"
}

# comp_next: for a test that runs several compositors, one after the
# other: stops what is left and removes the private directory, so that
# the next start_compositor makes one for its own user.
comp_next() {
	[ -z "$COMP_PID" ] || stop_compositor
	stop_helpers
	[ -z "$COMP_DIR" ] || rm -rf "$COMP_DIR"
	COMP_DIR=
}

# The prefix that runs a command as nobody when we are root (sway and cage
# refuse to run as root), nothing otherwise.  Skips, with the reason, only
# where we are root and cannot switch user (a user namespace without
# nobody, say): the issue allows that one skip.
unprivileged_prefix() {
	UNPRIV=()
	UNPRIV_UID=$(id -u)
	[ "$UNPRIV_UID" -eq 0 ] || return 0
	require setpriv util-linux
	UNPRIV=(setpriv --reuid=65534 --regid=65534 --clear-groups)
	"${UNPRIV[@]}" true 2>/dev/null ||
		skip "$COMP refuses to run as root, and setpriv cannot switch to uid 65534 here"
	UNPRIV_UID=65534
}

# Makes the compositor's private directory, owned by uid $1.
make_comp_dir() {
	local uid=$1
	COMP_DIR=$(mktemp -d "${TMPDIR:-/tmp}/nsb-e2e-$COMP.XXXXXX")
	chmod 0755 "$COMP_DIR"
	mkdir -m 0700 "$COMP_DIR/xdg"
	mkdir -m 0755 "$COMP_DIR/home"
	if [ "$uid" != "$(id -u)" ]; then
		chown "$uid:$uid" "$COMP_DIR/xdg" "$COMP_DIR/home"
	fi
	export XDG_RUNTIME_DIR=$COMP_DIR/xdg
}

# Waits (bounded) until $1 exists, failing early if pid $2 ends.
wait_for_path() {
	local path=$1 pid=$2 what=$3 tries
	for ((tries = 0; tries < POLL_TRIES; tries++)); do
		[ -e "$path" ] && return 0
		kill -0 "$pid" 2>/dev/null || fail "$what exited before creating $path"
		sleep 0.05
	done
	fail "$what did not create $path"
}

# A private session bus in XDG_RUNTIME_DIR (mutter, kwin).
start_bus() {
	require dbus-daemon dbus-daemon
	"${UNPRIV[@]}" dbus-daemon --session --nofork \
		--address="unix:path=$XDG_RUNTIME_DIR/bus" \
		</dev/null >/dev/null 2>"$COMP_DIR/dbus.err" 3>&- &
	DBUS_PID=$!
	wait_for_path "$XDG_RUNTIME_DIR/bus" "$DBUS_PID" dbus-daemon
	export DBUS_SESSION_BUS_ADDRESS=unix:path=$XDG_RUNTIME_DIR/bus
}

# An Xvfb of its own (Mir's output): the server chooses a free display
# and writes its number when it is ready (-displayfd).
start_xvfb() {
	require Xvfb xvfb
	rm -f "$COMP_DIR/display"
	Xvfb -displayfd 4 -screen 0 1024x768x24 -nolisten tcp \
		</dev/null >/dev/null 2>"$COMP_DIR/xvfb.err" \
		4>"$COMP_DIR/display" 3>&- &
	XVFB_PID=$!
	wait_displayfd "$COMP_DIR/display" "$XVFB_PID" Xvfb
}

# wait_displayfd FILE PID NAME: waits (bounded) until X server PID, started
# with -displayfd writing to FILE, says its display; exports DISPLAY.
wait_displayfd() {
	local file=$1 pid=$2 name=$3 tries
	for ((tries = 0; tries < POLL_TRIES; tries++)); do
		[ -s "$file" ] && break
		kill -0 "$pid" 2>/dev/null || fail "$name exited before it was ready"
		sleep 0.05
	done
	[ -s "$file" ] || fail "$name did not say its display"
	DISPLAY=:$(tr -d '\n' <"$file")
	export DISPLAY
}

stop_helpers() {
	local pid
	for pid in "$XVFB_PID" "$DBUS_PID"; do
		[ -n "$pid" ] || continue
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	XVFB_PID=
	DBUS_PID=
}

# start_compositor NAME [PRELOAD]: starts compositor NAME (weston, sway,
# mutter, kwin, mir, cage) with LD_PRELOAD=PRELOAD when one is given, and
# nothing else of the library's; waits for its socket.  Sets COMP_PID,
# COMP_ERR (its stderr) and exports WAYLAND_DISPLAY.  A second call in
# the same test (Mir, after it died) reuses the private directory and
# helpers.
start_compositor() {
	COMP=$1
	local preload=${2-} first='' lib
	local -a pre=()
	if [ -z "$COMP_DIR" ]; then
		first=1
		case $COMP in
		sway | cage | kwin-secure) unprivileged_prefix ;;
		*) UNPRIV=() UNPRIV_UID=$(id -u) ;;
		esac
		make_comp_dir "$UNPRIV_UID"
	fi
	if [ -n "$preload" ]; then
		lib=$preload
		if [ "$UNPRIV_UID" != "$(id -u)" ] && [[ $preload == */* ]]; then
			# nobody may not be able to read the build tree.
			cp "$preload" "$COMP_DIR/libnosigbus.so"
			chmod 0755 "$COMP_DIR/libnosigbus.so"
			lib=$COMP_DIR/libnosigbus.so
		fi
		pre=(LD_PRELOAD="$lib")
	fi
	COMP_ERR=$COMP_DIR/$COMP.err
	# Started again (Mir, after it died): what the run before said is
	# kept beside, for comp_show_tails.
	if [ -s "$COMP_ERR" ]; then
		COMP_RUNS=$((${COMP_RUNS:-0} + 1))
		mv "$COMP_ERR" "$COMP_DIR/$COMP-run$COMP_RUNS.err"
	fi
	export WAYLAND_DISPLAY=nsb-e2e-$COMP
	# A compositor that died leaves its socket behind (sway and cage:
	# wayland-N, which wait_for_wlroots_socket would find at once).
	rm -f "$XDG_RUNTIME_DIR/$WAYLAND_DISPLAY" "$XDG_RUNTIME_DIR/$WAYLAND_DISPLAY.lock" \
		"$XDG_RUNTIME_DIR"/wayland-[0-9]*
	# The compositor's stdout and stderr go to one file: what it says,
	# in order (libwayland-server logs on stderr, Mir on stdout).
	case $COMP in
	weston)
		require weston weston
		weston_ini "$COMP_DIR/weston.ini"
		env HOME="$COMP_DIR/home" "${pre[@]}" \
			weston --backend=headless-backend.so --use-pixman \
			--width=640 --height=480 --socket="$WAYLAND_DISPLAY" \
			--idle-time=0 --config="$COMP_DIR/weston.ini" \
			</dev/null >"$COMP_ERR" 2>&1 3>&- &
		;;
	sway)
		require sway sway
		echo 'output HEADLESS-1 resolution 640x480' >"$COMP_DIR/sway.config"
		"${UNPRIV[@]}" env HOME="$COMP_DIR/home" "${pre[@]}" \
			WLR_BACKENDS=headless WLR_RENDERER=pixman \
			WLR_LIBINPUT_NO_DEVICES=1 \
			sway -c "$COMP_DIR/sway.config" \
			</dev/null >"$COMP_ERR" 2>&1 3>&- &
		;;
	mutter)
		require mutter mutter
		[ -n "$DBUS_PID" ] || start_bus
		env HOME="$COMP_DIR/home" "${pre[@]}" \
			mutter --headless --wayland --no-x11 \
			--virtual-monitor 640x480 \
			--wayland-display="$WAYLAND_DISPLAY" \
			</dev/null >"$COMP_ERR" 2>&1 3>&- &
		;;
	kwin)
		require kwin_wayland kwin-wayland
		[ -n "$DBUS_PID" ] || start_bus
		[ -x "$COMP_DIR/kwin_wayland" ] ||
			cp "$(command -v kwin_wayland)" "$COMP_DIR/kwin_wayland"
		env HOME="$COMP_DIR/home" "${pre[@]}" \
			"$COMP_DIR/kwin_wayland" --virtual --width 640 --height 480 \
			--socket "$WAYLAND_DISPLAY" --no-lockscreen \
			--no-global-shortcuts --no-kactivities \
			</dev/null >"$COMP_ERR" 2>&1 3>&- &
		;;
	kwin-secure)
		require kwin_wayland kwin-wayland
		secure_kwin_prepare
		[ -n "$DBUS_PID" ] || start_bus
		# shellcheck disable=SC2016 # expanded by the inner sh
		unshare -m --propagation private sh -euc '
			libdir=$1 upper=$2 work=$3
			shift 3
			mount -t overlay nsb-secure \
				-o "lowerdir=$libdir,upperdir=$upper,workdir=$work" "$libdir"
			exec "$@"
		' sh "$SECURE_LIBDIR" "$COMP_DIR/ovl/upper" "$COMP_DIR/ovl/work" \
			"${UNPRIV[@]}" env HOME="$COMP_DIR/home" "${pre[@]}" \
			"$COMP_DIR/kwin_wayland" --virtual --width 640 --height 480 \
			--socket "$WAYLAND_DISPLAY" --no-lockscreen \
			--no-global-shortcuts --no-kactivities \
			</dev/null >"$COMP_ERR" 2>&1 3>&- &
		;;
	mir)
		require miral-shell mir-demos
		[ -e /usr/lib/"$(multiarch)"/mir/server-platform/server-x11.so.20 ] ||
			fail "Mir's X11 platform is not installed (Debian: apt install mir-platform-graphics-x20)"
		[ -n "$XVFB_PID" ] || start_xvfb
		# Mir takes WAYLAND_DISPLAY as its socket's name.  MIR_EXTENSIONS
		# (colon-separated) adds optional globals to its defaults.
		env HOME="$COMP_DIR/home" "${pre[@]}" \
			miral-shell --platform-display-libs mir:x11 \
			${MIR_EXTENSIONS:+--add-wayland-extensions "$MIR_EXTENSIONS"} \
			</dev/null >"$COMP_ERR" 2>&1 3>&- &
		;;
	cage)
		require cage cage
		# Its one client ends with it (killed by the parent-death
		# signal: a cage that died of SIGBUS left it running).
		"${UNPRIV[@]}" env HOME="$COMP_DIR/home" "${pre[@]}" \
			WLR_BACKENDS=headless WLR_RENDERER=pixman \
			WLR_HEADLESS_OUTPUTS=1 WLR_LIBINPUT_NO_DEVICES=1 \
			cage -- setpriv --pdeathsig KILL -- sleep 100000 \
			</dev/null >"$COMP_ERR" 2>&1 3>&- &
		;;
	*)
		fail "no compositor called $COMP"
		;;
	esac
	COMP_PID=$!
	case $COMP in
	sway | cage) wait_for_wlroots_socket ;;
	*) wait_for_path "$XDG_RUNTIME_DIR/$WAYLAND_DISPLAY" "$COMP_PID" "$COMP" ;;
	esac
	# kwin started again after a death (the shadow cells) once refused
	# the first client (ECONNREFUSED: its socket bound, not yet listening).
	case $COMP in
	kwin | kwin-secure) wait_for_listening "$XDG_RUNTIME_DIR/$WAYLAND_DISPLAY" ;;
	esac
	# kwin-secure's tests say whether the library must be there.
	[ -z "$first" ] || [ -z "$preload" ] || [ "$COMP" = kwin-secure ] || assert_preloaded
}

# For kwin-secure: a copy of kwin_wayland with a file capability (its own,
# cap_sys_resource, where the bounding set has it; a sandbox may drop it,
# and then the kernel refuses to run the file: cap_net_bind_service,
# harmless, gives secure execution too), and the build's library with the
# set-user-ID bit in an overlay's upper directory for the loader's system
# directory.  Skips, saying why, where that cannot be done.
secure_kwin_prepare() {
	local t cap=cap_sys_resource bnd
	[ "$(id -u)" = 0 ] || skip "not root: a file capability, a user to drop to and a mount namespace are needed"
	for t in setcap unshare; do
		command -v "$t" >/dev/null || skip "$t is not installed (Debian: libcap2-bin, util-linux)"
	done
	unshare -m true 2>/dev/null || skip "no private mount namespace here (unshare -m failed)"
	bnd=$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)
	(((16#$bnd >> 24) & 1)) || cap=cap_net_bind_service
	[ -x "$COMP_DIR/kwin_wayland" ] || cp "$(command -v kwin_wayland)" "$COMP_DIR/kwin_wayland"
	setcap "$cap=ep" "$COMP_DIR/kwin_wayland" 2>/dev/null ||
		skip "setcap failed: the file system of $COMP_DIR keeps no capabilities"
	SECURE_LIBDIR=/usr/lib/$(multiarch)
	mkdir -p "$COMP_DIR/ovl/upper" "$COMP_DIR/ovl/work"
	cp "$NSB_PRELOAD" "$COMP_DIR/ovl/upper/libnosigbus.so.0"
	chmod 4755 "$COMP_DIR/ovl/upper/libnosigbus.so.0"
	ln -sf libnosigbus.so.0 "$COMP_DIR/ovl/upper/libnosigbus.so"
	# shellcheck disable=SC2016 # expanded by the inner sh
	unshare -m --propagation private sh -c 'mount -t overlay nsb-secure -o "lowerdir=$1,upperdir=$2,workdir=$3" "$1"' \
		sh "$SECURE_LIBDIR" "$COMP_DIR/ovl/upper" "$COMP_DIR/ovl/work" 2>/dev/null ||
		skip "cannot mount an overlay over $SECURE_LIBDIR here"
}

# Waits (bounded) until the compositor's socket $1 accepts a connection.
wait_for_listening() {
	local tries
	for ((tries = 0; tries < POLL_TRIES; tries++)); do
		"$PYTHON" -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])' "$1" 2>/dev/null && return 0
		kill -0 "$COMP_PID" 2>/dev/null || fail "$COMP exited before listening on $1"
		sleep 0.05
	done
	fail "$COMP does not accept connections on $1"
}

# wlroots names its socket wayland-N (the first free N) in
# XDG_RUNTIME_DIR: private here, so the first one is ours.
wait_for_wlroots_socket() {
	local tries s
	for ((tries = 0; tries < POLL_TRIES; tries++)); do
		for s in "$XDG_RUNTIME_DIR"/wayland-[0-9]; do
			if [ -S "$s" ]; then
				export WAYLAND_DISPLAY=${s##*/}
				return 0
			fi
		done
		kill -0 "$COMP_PID" 2>/dev/null ||
			fail "$COMP exited before creating its socket"
		sleep 0.05
	done
	fail "$COMP did not create a socket in $XDG_RUNTIME_DIR"
}

multiarch() {
	dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null ||
		gcc -print-multiarch 2>/dev/null ||
		echo "$(uname -m)-linux-gnu"
}

# The library is in the compositor's address space.
assert_preloaded() {
	grep -q 'libnosigbus' "/proc/$COMP_PID/maps" ||
		fail "libnosigbus is not loaded in $COMP"
}

assert_compositor_running() {
	kill -0 "$COMP_PID" 2>/dev/null || fail "$COMP is no longer running"
}

# How each compositor ends when it is asked to (its status, as the shell
# reports it): kwin 5.27 exits with 15 on SIGTERM.
normal_stop_status() {
	case $COMP in
	kwin | kwin-secure) echo 15 ;;
	*) echo 0 ;;
	esac
}

# Stops the compositor by pid, or waits for it when it died; sets
# COMP_STATUS.  Cage is stopped through its only client (see the top).
stop_compositor() {
	local child children how=
	[ -n "$COMP_PID" ] || return 0
	if [ "$COMP" = cage ]; then
		children=$(cat "/proc/$COMP_PID/task/"*/children 2>/dev/null) || true
		for child in $children; do
			kill -TERM "$child" 2>/dev/null || true
		done
		how=asked
	fi
	stop_pid "$COMP_PID" "$POLL_TRIES" $how
	COMP_STATUS=$STOP_STATUS
	COMP_PID=
}

# Waits (bounded) for the compositor to end by itself; sets COMP_STATUS.
wait_compositor_death() {
	local tries
	for ((tries = 0; tries < POLL_TRIES; tries++)); do
		kill -0 "$COMP_PID" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$COMP_PID" 2>/dev/null && fail "$COMP is still running"
	COMP_STATUS=0
	wait "$COMP_PID" || COMP_STATUS=$?
	COMP_PID=
}

# run_client [ARGS...]: runs the hostile client to its end (bounded by a
# deadline that only stops a hang); sets CLIENT_STATUS, CLIENT_OUTPUT
# (stdout) and CLIENT_ERR (stderr), kept in client.out and client.err
# for comp_show_tails.  At the deadline (not allowed by CLIENT_MAY_HANG)
# the compositor's stacks are taken before the test fails.
run_client() {
	CLIENT_STATUS=0
	timeout -k 5 "$CLIENT_DEADLINE" "$HOSTILE" "$@" </dev/null \
		>"$COMP_DIR/client.out" 2>"$COMP_DIR/client.err" 3>&- ||
		CLIENT_STATUS=$?
	CLIENT_OUTPUT=$(cat "$COMP_DIR/client.out")
	CLIENT_ERR=$(cat "$COMP_DIR/client.err")
	if [ "$CLIENT_STATUS" = 124 ] && [ -z "${CLIENT_MAY_HANG-}" ]; then
		comp_show_stacks
		fail "the client ($*) did not end in $CLIENT_DEADLINE s (NSB_TIMEOUT_MULTIPLIER=${NSB_TIMEOUT_MULTIPLIER:-1}): $CLIENT_OUTPUT"
	fi
}

# The hostile client with the library's part done: every frame after the
# truncation arrived, the connection stayed, nothing on stderr.
assert_client_stayed() {
	local frames=$1 n
	assert_equal "$CLIENT_STATUS" 0
	run -0 printf '%s\n' "$CLIENT_OUTPUT"
	assert_line --index 0 --regexp '^configured [0-9]+x[0-9]+$'
	assert_line --index 1 "frame 0"
	assert_line --index 2 "truncated"
	for ((n = 1; n <= frames; n++)); do
		assert_line --index $((n + 2)) "frame $n"
	done
	assert_line --index $((frames + 3)) "connected after $frames frames"
	assert_equal "${#lines[@]}" $((frames + 4))
	assert_equal "$CLIENT_ERR" ""
}

# libwayland-server's (or Mir's) own answer: the client is cut off with
# wl_shm's error 2 on its wl_buffer at the first frame after the
# truncation (libwayland reads the buffer before it answers the frame);
# Mir 2.12 may answer one or two frames first: it reads later.
assert_client_cut_off() {
	local n=3
	assert_equal "$CLIENT_STATUS" 3
	run -0 printf '%s\n' "$CLIENT_OUTPUT"
	assert_line --index 0 --regexp '^configured [0-9]+x[0-9]+$'
	assert_line --index 1 "frame 0"
	assert_line --index 2 "truncated"
	if [ "$COMP" = mir ]; then
		while [[ ${lines[n]-} =~ ^frame\ [12]$ ]]; do
			n=$((n + 1))
		done
	fi
	assert_line --index "$n" --regexp '^disconnected: protocol error 2 on wl_buffer@[0-9]+$'
	assert_equal "${#lines[@]}" $((n + 1))
	run -0 printf '%s\n' "$CLIENT_ERR"
	assert_output --regexp '^wl_buffer@[0-9]+: error 2: [Ee]rror accessing SHM buffer$'
}

# The compositor died under the client: its connection was lost.
assert_client_lost() {
	local n=3
	assert_equal "$CLIENT_STATUS" 4
	run -0 printf '%s\n' "$CLIENT_OUTPUT"
	assert_line --index 2 "truncated"
	while [[ ${lines[n]-} =~ ^frame\ [0-9]+$ ]]; do
		n=$((n + 1))
	done
	assert_line --index "$n" --regexp '^disconnected: '
	assert_equal "${#lines[@]}" $((n + 1))
}

# A well-behaved client connects and gets its frames: our own client,
# not truncating, then, where it is reliable, Debian's weston-simple-shm up
# to its first frame callback.
assert_good_clients_render() {
	run_client --no-truncate --colour cc3366 2
	assert_equal "$CLIENT_STATUS" 0
	run -0 printf '%s\n' "$CLIENT_OUTPUT"
	assert_line "frame 2"
	assert_line "connected after 2 frames"
	assert_equal "$CLIENT_ERR" ""
	# weston-simple-shm keeps two buffers and aborts ("Both buffers busy
	# at redraw(). Server bug?") when the compositor still holds both at a
	# frame callback, with the library or without: seen with sway 1.7 and
	# Mir 2.12, which release shm buffers late.  weston, mutter and kwin
	# release them at once.
	case $COMP in
	weston | mutter | kwin | kwin-secure) simple_shm_until_frame ;;
	esac
}

# Runs weston-simple-shm until libwayland-client's debug log shows its
# first frame callback arriving, then interrupts it: it exits 0 on SIGINT.
simple_shm_until_frame() {
	local fifo=$COMP_DIR/simple-shm.err line found='' pid status=0
	require weston-simple-shm weston
	rm -f "$fifo"
	mkfifo "$fifo"
	WAYLAND_DEBUG=client weston-simple-shm </dev/null >/dev/null \
		2>"$fifo" 3>&- &
	pid=$!
	exec {err}<"$fifo"
	while IFS= read -r -t "$CLIENT_DEADLINE" -u "$err" line; do
		if [[ $line == *'wl_callback@'*'.done('* ]]; then
			found=1
			break
		fi
	done
	kill -INT "$pid" 2>/dev/null || true
	cat <&"$err" >/dev/null
	exec {err}<&-
	wait "$pid" || status=$?
	[ -n "$found" ] || fail "weston-simple-shm got no frame callback from $COMP"
	assert_equal "$status" 0
}

# Nothing of the library's in what the compositor printed: it prints
# nothing by default, ever (SPEC §9).
assert_library_silent() {
	run grep -c 'nosigbus:' "$COMP_ERR"
	assert_output 0
}

# A directory on a disk file system for the disk backing: /var/tmp, or
# the test's own directory; never tmpfs (that would be the shm case again).
disk_dir() {
	local d type
	for d in /var/tmp "$BATS_TEST_TMPDIR"; do
		type=$(stat -f -c %T "$d" 2>/dev/null) || continue
		case $type in
		tmpfs | ramfs) ;;
		*)
			echo "$d"
			return 0
			;;
		esac
	done
	fail "neither /var/tmp nor $BATS_TEST_TMPDIR is on a disk file system (both tmpfs?)"
}
