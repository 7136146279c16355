#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run --separate-stderr sets stderr
#
# Secure execution (issue 22, SPEC §11): KDE's kwin_wayland carries a file
# capability, so the loader runs it in secure-execution mode and ignores
# LD_PRELOAD with a path.  glibc preloads a library into such a process
# only by bare name, only from its system search path (ld.so --help), and
# only if the file has the set-user-ID bit.  -Dsecure-preload=true installs
# the library so.
#
# A build of the library alone with -Dsecure-preload=true --prefix=/usr is
# staged with meson install --destdir; the staged library is then put into
# the real /usr/lib/<multiarch> through an overlay, in a private mount
# namespace (root only, nothing on the machine changes), and a copy of
# nsb-cli-map with a file capability runs as an unprivileged user.  Not
# kwin's own cap_sys_resource: a sandbox may drop it from the bounding set,
# and then the kernel refuses to run the file at all (EPERM); any file
# capability gives secure execution, and cap_net_bind_service is harmless.  The controls: the same program with the library named
# by its path (ignored by the loader: it dies of SIGBUS), and the library
# without its set-user-ID bit (refused: it dies).

load common

setup_file() {
	command -v meson >/dev/null || return 0
	local b=$BATS_FILE_TMPDIR/build
	SECURE_STAGE=$BATS_FILE_TMPDIR/stage
	{
		meson setup "$b" "$NSB_SOURCE_ROOT" --prefix=/usr -Dsecure-preload=true \
			-Dtests=false -Dman=false &&
			meson compile -C "$b" &&
			meson install -C "$b" --no-rebuild --destdir "$SECURE_STAGE"
	} >"$BATS_FILE_TMPDIR/build.log" 2>&1 || rm -rf "$SECURE_STAGE"
	export SECURE_STAGE
}

setup() {
	command -v meson >/dev/null || skip "meson is not in PATH"
	[ -d "$SECURE_STAGE" ] ||
		fail "the -Dsecure-preload=true build failed: $(tail -n 30 "$BATS_FILE_TMPDIR/build.log")"
	STAGED=$(find "$SECURE_STAGE" -name 'libnosigbus.so.*.*' -type f)
	[ -n "$STAGED" ] || fail "no library staged under $SECURE_STAGE"
	# /usr/lib/<multiarch>, as meson's default libdir for --prefix=/usr.
	LIBDIR=$(dirname "${STAGED#"$SECURE_STAGE"}")
	SCRATCH=
}

teardown() {
	if [ -n "$SCRATCH" ]; then rm -rf -- "$SCRATCH"; fi
}

# Skips unless this test can make a process in secure execution: root (to
# set a file capability and drop to another user) and the tools.
need_secure_execution() {
	[ "$(id -u)" = 0 ] || skip "not root: a file capability and a user to drop to are needed"
	local t
	for t in setcap setpriv unshare; do
		command -v "$t" >/dev/null || skip "$t is not installed (Debian: libcap2-bin, util-linux)"
	done
	unshare -m true 2>/dev/null || skip "no private mount namespace here (unshare -m failed)"
	# A directory the unprivileged user can reach, for the copy.
	SCRATCH=$(mktemp -d /tmp/nsb-secure.XXXXXX)
	chmod 755 "$SCRATCH"
	cp "$MAP" "$SCRATCH/map"
	setcap cap_net_bind_service=ep "$SCRATCH/map" 2>/dev/null ||
		skip "setcap failed: the file system of /tmp keeps no capabilities"
}

# in_system MODE COMMAND...: runs COMMAND as nobody in a private mount
# namespace, with the staged library in the system directory (MODE:
# setuid, or plain without the set-user-ID bit), or (MODE etc) named by
# its path in /etc/ld.so.preload, no bit and no system directory needed.
in_system() {
	local mode=$1
	shift
	# shellcheck disable=SC2016 # expanded by the inner sh
	unshare -m --propagation private sh -euc '
		stage=$1 libdir=$2 scratch=$3 mode=$4
		shift 4
		mount -t tmpfs -o mode=755 nsb-secure "$scratch/ovl" 2>/dev/null ||
			{ mkdir "$scratch/ovl" && mount -t tmpfs -o mode=755 nsb-secure "$scratch/ovl"; }
		mkdir "$scratch/ovl/upper" "$scratch/ovl/work"
		if [ "$mode" = etc ]; then
			mkdir "$scratch/ovl/lib"
			cp "$stage$libdir"/libnosigbus.so.*.* "$scratch/ovl/lib/libnosigbus.so.0"
			chmod 755 "$scratch/ovl/lib/libnosigbus.so.0"
			echo "$scratch/ovl/lib/libnosigbus.so.0" >"$scratch/ovl/upper/ld.so.preload"
			mount -t overlay nsb-secure -o "lowerdir=/etc,upperdir=$scratch/ovl/upper,workdir=$scratch/ovl/work" /etc ||
				exit 77
		else
			cp -a "$stage$libdir"/libnosigbus.so* "$scratch/ovl/upper/"
			[ "$mode" = setuid ] || chmod u-s "$scratch/ovl/upper"/libnosigbus.so.*.*
			mount -t overlay nsb-secure -o "lowerdir=$libdir,upperdir=$scratch/ovl/upper,workdir=$scratch/ovl/work" "$libdir" ||
				exit 77
		fi
		exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"
	' nsb-secure "$SECURE_STAGE" "$LIBDIR" "$SCRATCH" "$mode" "$@"
}

# run_in_system STATUS MODE COMMAND...: run --separate-stderr in_system,
# skipping where the overlay cannot be mounted, then the exit status must
# be STATUS.
run_in_system() {
	local want=$1
	shift
	run --separate-stderr in_system "$@"
	if [ "$status" = 77 ]; then skip "cannot mount an overlay here (in_system $1)"; fi
	if [ "$status" != "$want" ]; then
		echo "# stdout: $output"
		echo "# stderr: $stderr"
		fail "in_system $*: exit status $status, expected $want"
	fi
}

@test "-Dsecure-preload=true installs the library set-user-ID, its links as links" {
	assert_equal "$(stat -c %a "$STAGED")" 4755
	[ -L "$SECURE_STAGE$LIBDIR/libnosigbus.so.0" ]
	[ -L "$SECURE_STAGE$LIBDIR/libnosigbus.so" ]
}

@test "a program with a file capability, run by a user, is protected by LD_PRELOAD=libnosigbus.so" {
	need_secure_execution
	# The control first: a path is ignored in secure execution.
	run_in_system 135 setuid env LD_PRELOAD="$SECURE_STAGE$LIBDIR/libnosigbus.so" \
		"$SCRATCH/map" memfd 2 trunc=0 read=0
	run_in_system 0 setuid env LD_PRELOAD=libnosigbus.so \
		"$SCRATCH/map" memfd 2 trunc=0 read=0 read=1 stats
	assert_line 'page 0: zeros'
	assert_line 'page 1: zeros'
	assert_line --regexp '^stats: rescues=[1-9]'
	assert_equal "$stderr" ''
}

@test "without the set-user-ID bit the loader refuses it: the program dies of SIGBUS" {
	need_secure_execution
	run_in_system 135 plain env LD_PRELOAD=libnosigbus.so \
		"$SCRATCH/map" memfd 2 trunc=0 read=0
	refute_output --partial 'zeros'
}

@test "in secure execution the library reads no NOSIGBUS_ variable and prints nothing" {
	need_secure_execution
	# NOSIGBUS_POLICY=flag would leave the memfd unprotected (death), and
	# NOSIGBUS_LOG=1 and a bad NOSIGBUS_FILL would print.
	run_in_system 0 setuid env LD_PRELOAD=libnosigbus.so \
		NOSIGBUS_POLICY=flag NOSIGBUS_LOG=1 NOSIGBUS_FILL=bogus \
		"$SCRATCH/map" memfd 2 trunc=0 read=0
	assert_line 'page 0: zeros'
	assert_equal "$stderr" ''
}

@test "the installed wrapper protects it too, and does not warn that it runs unprotected" {
	need_secure_execution
	# The staged wrapper names the library by its soname (the build
	# tree's names it by its path, which secure execution ignores).
	cp "$SECURE_STAGE/usr/bin/nosigbus" "$SCRATCH/nosigbus"
	run_in_system 0 setuid "$SCRATCH/nosigbus" --verbose \
		"$SCRATCH/map" memfd 2 trunc=0 read=0
	assert_line 'page 0: zeros'
	[[ $stderr != *"file capabilities"* ]]
	# Without the set-user-ID bit it warns, and the program dies.
	run_in_system 135 plain "$SCRATCH/nosigbus" --verbose \
		"$SCRATCH/map" memfd 2 trunc=0 read=0
	[[ $stderr == *"has file capabilities"* ]]
}

@test "/etc/ld.so.preload protects it with no set-user-ID bit (every process of the machine)" {
	need_secure_execution
	[ ! -s /etc/ld.so.preload ] || skip "this machine has an /etc/ld.so.preload of its own"
	run_in_system 0 etc "$SCRATCH/map" memfd 2 trunc=0 read=0 stats
	assert_line 'page 0: zeros'
	assert_line --regexp '^stats: rescues=[1-9]'
	assert_equal "$stderr" ''
}
