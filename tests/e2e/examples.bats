#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run sets output and lines
# shellcheck disable=SC2016 # literal $ in example texts and sh -c scripts
#
# Every example of README.md, of doc/*.md and of the man pages, extracted
# from their sources by examples.py and run as written, in order (issue 14
# item 9),
# on a system where the project is installed the README's way (issue 15:
# every command line that preloads the library works after meson install).
#
# The README's own commands do the installation (meson setup build,
# meson compile -C build, sudo meson install -C build), in a private mount
# namespace: /usr and /etc are overlays, and so is the source tree (the
# README runs "in a clone of this repository"), whose build/ is an overlay
# of this test's build directory, already built (the README reconfigures
# it with -Dsessions=true).  Nothing outside the namespace changes.  A
# build configured with --prefix=/usr (run-all's Debian build) installs the
# session files where a package does, /usr/share/nosigbus; the README names
# the default prefix's /usr/local/share/nosigbus, which then links there.
#
# Programs that run until they are stopped and need a display (weston,
# sway, foot) are stand-ins in PATH: each checks that the installed
# libnosigbus is loaded into it, as the example's command line asked, logs
# that, and exits.  tests/e2e/weston.bats runs the real weston with the
# same command lines.  sudo is a stand-in too when it is not installed (the
# test runs as root).  man runs with MANPAGER=cat.

load common

setup() {
	EXAMPLES=$E2E_SRC/examples.py
	DOCS=("$NSB_SOURCE_ROOT/README.md" "$NSB_SOURCE_ROOT"/doc/*.md "$NSB_BUILD_ROOT/man/nosigbus.1"
		"$NSB_BUILD_ROOT/man/libnosigbus.7" "$NSB_BUILD_ROOT/man/nosigbus_protect.3")
	require "$PYTHON" python3
}

@test "every shell block of the README and every .EX block of the man pages is marked" {
	run -0 "$PYTHON" "$EXAMPLES" check "${DOCS[@]}"
	assert_line --regexp "^ok: [0-9]+ examples in ${#DOCS[@]} documents, every one marked\$"
	# Only these may be left out, each for its reason (the sixth: the
	# secure installation into /usr, which secure.bats stages instead).
	run -0 grep -c '^not run: ' <<<"$output"
	assert_output 6
}

@test "the checker refuses an unmarked example" {
	printf '# t\n\n```sh\nfalse\n```\n' >"$BATS_TEST_TMPDIR/bad.md"
	run -1 "$PYTHON" "$EXAMPLES" check "$BATS_TEST_TMPDIR/bad.md"
	assert_output --partial 'bad.md:3: a ```sh block without <!-- example -->'
	printf '.TH T 1\n.EX\nfalse\n.EE\n' >"$BATS_TEST_TMPDIR/bad.1"
	run -1 "$PYTHON" "$EXAMPLES" check "$BATS_TEST_TMPDIR/bad.1"
	assert_output --partial 'bad.1:2: an .EX block without'
	printf '.TH T 1\n.\\" example\n.EX\n$ echo \\*(Tm\n.EE\n' >"$BATS_TEST_TMPDIR/esc.1"
	run -1 "$PYTHON" "$EXAMPLES" check "$BATS_TEST_TMPDIR/esc.1"
	assert_output --partial 'unknown roff escape'
}

@test "the checker runs transcripts: a wrong output line fails" {
	printf '<!-- example -->\n```sh\n$ echo 1; echo 2\n1\n3\n```\n' >"$BATS_TEST_TMPDIR/t.md"
	run -1 "$PYTHON" "$EXAMPLES" run --readme-dir "$BATS_TEST_TMPDIR" "$BATS_TEST_TMPDIR/t.md"
	assert_output --partial 'FAIL: t.md:3: echo 1; echo 2 printed:'
	printf '<!-- example -->\n```sh\n$ sh -c %s; echo $?\nBus error\n135\n```\n' \
		"'kill -BUS \$\$'" >"$BATS_TEST_TMPDIR/t.md"
	run -0 "$PYTHON" "$EXAMPLES" run --readme-dir "$BATS_TEST_TMPDIR" "$BATS_TEST_TMPDIR/t.md"
	assert_line 'examples: 1 run, 0 failed, 0 not run (listed above)'
}

# A stand-in for a program that runs until stopped ($1: its name).
make_stand_in() {
	cat >"$SHIMS/$1" <<-EOF
		#!/bin/sh
		# Stand-in for $1 (tests/e2e/examples.bats): is the installed
		# libnosigbus loaded into this process, as the command line asked?
		lib=\$(awk '\$6 ~ /\\/libnosigbus\\.so/ { print \$6; exit }' /proc/\$\$/maps)
		case \$lib in
		/usr/*) echo "$1 \$*: \$lib, NOSIGBUS_POLICY=\${NOSIGBUS_POLICY-}" >>"$SHIMS/log"; exit 0 ;;
		'') echo "$1: libnosigbus is not loaded" >&2 ;;
		*) echo "$1: loaded \$lib, not the installed library" >&2 ;;
		esac
		exit 1
	EOF
	chmod 755 "$SHIMS/$1"
}

@test "the examples run in order, as written, after the README's installation" {
	local d=$BATS_TEST_TMPDIR/ns
	[ "$(id -u)" = 0 ] || skip "needs root, to install for real in a private mount namespace"
	command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
	# A chroot whose / is not a mount point, or no CAP_SYS_ADMIN (issue 23).
	unshare -m true 2>"$BATS_TEST_TMPDIR/unshare.err" ||
		skip "no private mount namespace here (a chroot, or no CAP_SYS_ADMIN): unshare -m: $(head -n 1 "$BATS_TEST_TMPDIR/unshare.err")"
	SHIMS=$BATS_TEST_TMPDIR/shims
	mkdir -p "$SHIMS" "$d/build" "$d/up" "$BATS_TEST_TMPDIR/home" "$BATS_TEST_TMPDIR/work"
	make_stand_in weston
	make_stand_in sway
	make_stand_in foot
	if ! command -v sudo >/dev/null; then
		printf '#!/bin/sh\n# Stand-in for sudo: the test runs as root.\nexec "$@"\n' >"$SHIMS/sudo"
		chmod 755 "$SHIMS/sudo"
	fi
	run unshare -m bash -c '
		d=$1 src=$2 build=$3
		shift 3
		{
			mount --make-rprivate / &&
			mount -t tmpfs tmpfs "$d/up" &&
			mkdir "$d/up/usr" "$d/up/usr.w" "$d/up/etc" "$d/up/etc.w" "$d/up/src" "$d/up/src.w" \
				"$d/up/build" "$d/up/build.w" &&
			mount -t overlay overlay -o "lowerdir=$build,upperdir=$d/up/build,workdir=$d/up/build.w" "$d/build" &&
			mount -t overlay overlay -o "lowerdir=/usr,upperdir=$d/up/usr,workdir=$d/up/usr.w" /usr &&
			mount -t overlay overlay -o "lowerdir=/etc,upperdir=$d/up/etc,workdir=$d/up/etc.w" /etc &&
			mount -t overlay overlay -o "lowerdir=$src,upperdir=$d/up/src,workdir=$d/up/src.w" "$src" &&
			mkdir -p "$src/build" &&
			mount --bind "$d/build" "$src/build" &&
			# Meson regenerates a build by its own absolute path: one view.
			{ [ "$build" = "$src/build" ] || mount --bind "$d/build" "$build"; }
		} 2>"$d/mount.err" || exit 77
		if [ ! -e /usr/local/share/nosigbus ] &&
			grep -qF "\"name\": \"prefix\", \"value\": \"/usr\"," "$build/meson-info/intro-buildoptions.json"; then
			mkdir -p /usr/local/share && ln -s /usr/share/nosigbus /usr/local/share/nosigbus
		fi
		exec "$@"' sh "$d" "$NSB_SOURCE_ROOT" "$NSB_BUILD_ROOT" \
		env -i HOME="$BATS_TEST_TMPDIR/home" USER=root LOGNAME=root TERM=dumb LANG=C.UTF-8 \
		PATH="$SHIMS:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
		MANPAGER=cat PAGER=cat MANWIDTH=80 \
		"$PYTHON" "$EXAMPLES" run --readme-dir "$NSB_SOURCE_ROOT" \
		--work "$BATS_TEST_TMPDIR/work" "${DOCS[@]}"
	[ "$status" != 77 ] ||
		skip "cannot mount the overlays here: $(cat "$d/mount.err")"
	printf '# %s\n' "${lines[@]}" >&3
	[ -f "$SHIMS/log" ] && sed 's/^/# stand-in: /' "$SHIMS/log" >&3
	assert_success
	assert_line --regexp '^examples: [0-9]+ run, 0 failed, 6 not run \(listed above\)$'
	refute_line --partial FAIL
	# The stand-ins saw the installed library, with the settings asked for.
	run -0 cat "$SHIMS/log"
	assert_line --regexp '^weston : /usr/.*/libnosigbus\.so\.[0-9.]+, NOSIGBUS_POLICY=$'
	assert_line --regexp '^weston : /usr/.*/libnosigbus\.so\.[0-9.]+, NOSIGBUS_POLICY=flag$'
	assert_line --regexp '^weston : /usr/.*/libnosigbus\.so\.[0-9.]+, NOSIGBUS_POLICY=files$'
	assert_line --regexp '^weston --backend=headless-backend.so --use-pixman --socket=NAME --idle-time=0 --log=FILE: /usr/'
	assert_line --regexp '^sway : /usr/'
}
