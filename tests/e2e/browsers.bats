#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2030,SC2031 # run sets status in each test's own shell
#
# Real browsers with their sandboxes on (issue 36): Chromium's
# `--headless --screenshot` and Firefox's `--headless --screenshot` of a
# local page (browser-page.html), as an unprivileged user (nobody when the
# test runs as root), without and with LD_PRELOAD=the built library: the
# same exit status, a screenshot written, the same pixels.  Two runs
# without the library first show that the pixels are reproducible here (a
# difference with the library means something).
#
# The sandboxes are checked, not assumed: while each browser runs,
# sandbox-watch.py records its child processes that run under a seccomp
# filter (/proc/PID/status "Seccomp: 2") and whether they have a user
# namespace of their own.  Chromium's renderers and Firefox's content
# ("tab") processes must show both, with and without the library.  Where
# a sandbox cannot start here (no unprivileged user namespaces, no
# seccomp), the test skips and says what is missing; it never passes
# without the sandbox.  A browser that is not installed is a skip too
# (Debian: apt install chromium firefox-esr), with the reason.
#
# What went wrong before (fc90d36's library): Chromium's utility and
# renderer processes crashed in their seccomp-bpf handlers on fstatfs
# (hundreds of crash reports) and Chromium never wrote its screenshot;
# Firefox's content processes died of SIGSYS on open_tree and Firefox
# exited 0 without a screenshot.
#
# In the suite "browsers" (tests/e2e/meson.build): minutes, and a hang is
# bounded by BROWSER_TIMEOUT seconds per run (scaled by
# NSB_TIMEOUT_MULTIPLIER).

load common

setup_file() {
	BROWSER_TIMEOUT=$((90 * ${NSB_TIMEOUT_MULTIPLIER:-1}))
	# A directory the browser's user can read and write: bats's own
	# temporary directories are private to the user running the test.
	BROWSER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/nsb-browsers.XXXXXX")
	chmod 755 "$BROWSER_DIR"
	cp "$E2E_SRC/browser-page.html" "$BROWSER_DIR/page.html"
	# The library where that user can read it.
	cp "$(readlink -f "$NSB_PRELOAD")" "$BROWSER_DIR/libnosigbus.so"
	chmod 644 "$BROWSER_DIR/page.html" "$BROWSER_DIR/libnosigbus.so"
	if [ "$(id -u)" = 0 ]; then
		AS_USER=(setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all)
		BROWSER_OWNER=nobody
	else
		AS_USER=()
		BROWSER_OWNER=$(id -un)
	fi
	export BROWSER_TIMEOUT BROWSER_DIR BROWSER_OWNER
	# Arrays do not cross into the tests: a string, split there.
	AS_USER_WORDS=${AS_USER[*]}
	export AS_USER_WORDS
}

teardown_file() {
	kill_leftovers
	rm -rf "$BROWSER_DIR"
}

# Browser processes still running from this file's directory (a browser
# killed by timeout can leave its zygote or content processes): by pid.
kill_leftovers() {
	local p
	[ -n "${BROWSER_DIR-}" ] || return 0
	for p in /proc/[0-9]*; do
		if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF "$BROWSER_DIR/"; then
			kill -KILL "${p#/proc/}" 2>/dev/null || true
		fi
	done
}

# The sandboxes need user namespaces for an unprivileged user, and
# seccomp: skip, saying which is missing.
need_sandbox_support() {
	local -a as_user
	read -r -a as_user <<<"$AS_USER_WORDS"
	grep -q '^Seccomp:' /proc/self/status ||
		skip "the kernel has no seccomp (no Seccomp: line in /proc/self/status): the browsers' sandboxes cannot start"
	command -v unshare >/dev/null ||
		skip "unshare is missing (Debian: apt install util-linux): cannot check user namespaces"
	"${as_user[@]}" unshare -Ur true 2>/dev/null ||
		skip "user $BROWSER_OWNER cannot create a user namespace (unshare -Ur fails: kernel.unprivileged_userns_clone, user.max_user_namespaces or an AppArmor/container policy): the browsers' namespace sandboxes cannot start"
}

need_browser() {
	command -v "$1" >/dev/null || skip "$1 is not installed (Debian: apt install $1)"
	if [ "$(id -u)" = 0 ]; then
		command -v setpriv >/dev/null ||
			skip "setpriv is missing (Debian: apt install util-linux): cannot run $1 as nobody"
	fi
	need_sandbox_support
}

# browse BROWSER NAME [PRELOAD]: a screenshot of the page into
# BROWSER_DIR/NAME.png with a fresh profile, as the unprivileged user,
# LD_PRELOAD=PRELOAD when given; sets BROWSE_STATUS, and leaves its output
# in NAME.log and its sandboxed children in NAME.sandbox.
browse() {
	local browser=$1 name=$2 preload=${3-} home pid watch
	local -a as_user cmd
	read -r -a as_user <<<"$AS_USER_WORDS"
	home=$BROWSER_DIR/home-$name
	rm -rf "$home" "$BROWSER_DIR/$name.png"
	mkdir -p "$home/profile"
	[ "$(id -u)" != 0 ] || chown -R nobody:nogroup "$home"
	# shellcheck disable=SC2054 # 800,600: one argument, not two elements
	case $browser in
	chromium)
		# Nothing from the network: no background requests, component
		# updates, sync or first-run pages.
		cmd=(chromium --headless "--screenshot=$home/shot.png"
			--window-size=800,600 --disable-gpu
			--disable-background-networking --disable-component-update
			--disable-sync --no-first-run --no-default-browser-check
			"--user-data-dir=$home/profile" "file://$BROWSER_DIR/page.html") ;;
	firefox-esr)
		cmd=(firefox-esr --headless --no-remote --profile "$home/profile"
			--window-size 800,600 --screenshot "$home/shot.png"
			"file://$BROWSER_DIR/page.html") ;;
	esac
	env -i PATH=/usr/bin:/bin HOME="$home" LANG=C.UTF-8 \
		${preload:+LD_PRELOAD="$preload"} \
		"${as_user[@]}" timeout -k 5 "$BROWSER_TIMEOUT" "${cmd[@]}" \
		>"$BROWSER_DIR/$name.log" 2>&1 &
	pid=$!
	"$PYTHON" "$E2E_SRC/sandbox-watch.py" "$pid" >"$BROWSER_DIR/$name.sandbox" &
	watch=$!
	BROWSE_STATUS=0
	wait "$pid" || BROWSE_STATUS=$?
	wait "$watch" || true
	kill_leftovers
	[ ! -e "$home/shot.png" ] || cp "$home/shot.png" "$BROWSER_DIR/$name.png"
	echo "# $browser $name${preload:+ (LD_PRELOAD=$preload)}: exit $BROWSE_STATUS, $(grep -c . "$BROWSER_DIR/$name.sandbox") sandboxed children" >&3
}

# sandboxed NAME TYPE: NAME's run had a TYPE child under a seccomp filter
# in a user namespace of its own.
sandboxed() {
	grep -q " type=$2 seccomp=2 userns=own" "$BROWSER_DIR/$1.sandbox"
}

# screenshot_ok NAME: written, and a PNG.
screenshot_ok() {
	[ -s "$BROWSER_DIR/$1.png" ] || {
		echo "no screenshot from run $1; its output ends:"
		tail -n 20 "$BROWSER_DIR/$1.log"
		return 1
	}
}

# same_image A B: the same pixels.
same_image() {
	run "$PYTHON" "$E2E_SRC/png-same.py" "$BROWSER_DIR/$1.png" "$BROWSER_DIR/$2.png"
	assert_success
	assert_output --partial "same 800x600"
}

# baseline BROWSER TYPE: two runs without the library, base1 and base2:
# exit 0, a screenshot each, the same pixels, the sandbox on (else skip).
baseline() {
	local browser=$1 type=$2
	[ ! -s "$BROWSER_DIR/$browser-base1.png" ] || return 0
	browse "$browser" "$browser-base1"
	[ "$BROWSE_STATUS" = 0 ] || fail "$browser without the library exited $BROWSE_STATUS: $(tail -n 20 "$BROWSER_DIR/$browser-base1.log")"
	screenshot_ok "$browser-base1"
	sandboxed "$browser-base1" "$type" ||
		skip "$browser's $type processes did not run under seccomp in a user namespace of their own here, without the library ($(tr '\n' ';' <"$BROWSER_DIR/$browser-base1.sandbox")): its sandbox is not available on this machine"
	browse "$browser" "$browser-base2"
	[ "$BROWSE_STATUS" = 0 ] || fail "$browser without the library exited $BROWSE_STATUS the second time"
	screenshot_ok "$browser-base2"
	same_image "$browser-base1" "$browser-base2"
}

# with_library BROWSER TYPE: a run with the library preloaded: the same exit
# status, a screenshot, the same pixels, the sandbox on.
with_library() {
	local browser=$1 type=$2
	baseline "$browser" "$type"
	browse "$browser" "$browser-nsb" "$BROWSER_DIR/libnosigbus.so"
	if [ "$BROWSE_STATUS" != 0 ]; then
		echo "$browser with the library exited $BROWSE_STATUS (0 without; 124 is a hang ended by timeout); its output:"
		grep -E 'CRASHING|signal 31|seccomp|Sandbox' "$BROWSER_DIR/$browser-nsb.log" | sort | uniq -c | sort -rn | head -n 10
		tail -n 10 "$BROWSER_DIR/$browser-nsb.log"
		return 1
	fi
	screenshot_ok "$browser-nsb"
	sandboxed "$browser-nsb" "$type" || fail "$browser with the library: no $type process under seccomp in its own user namespace: $(cat "$BROWSER_DIR/$browser-nsb.sandbox")"
	# A sandbox that killed a child is a failure even when the browser
	# recovered and drew the page.
	run grep -cE 'seccomp-bpf failure|exited on signal 31' "$BROWSER_DIR/$browser-nsb.log"
	assert_output 0
	same_image "$browser-base1" "$browser-nsb"
}

@test "chromium: its sandbox on, the same screenshot twice without the library" {
	need_browser chromium
	baseline chromium renderer
}

@test "chromium: its sandbox on, LD_PRELOAD=libnosigbus: the same exit status and screenshot" {
	need_browser chromium
	with_library chromium renderer
}

@test "firefox-esr: its sandbox on, the same screenshot twice without the library" {
	need_browser firefox-esr
	baseline firefox-esr tab
}

@test "firefox-esr: its sandbox on, LD_PRELOAD=libnosigbus: the same exit status and screenshot" {
	need_browser firefox-esr
	with_library firefox-esr tab
}
