#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run --separate-stderr sets stderr and stderr_lines
# shellcheck disable=SC2016 # bash -c scripts, expanded by that bash
# shellcheck disable=SC2030,SC2031 # run sets status in each test's own shell
#
# meson install --destdir, checked file by file, then used: the staged
# wrapper runs the staged library, pkg-config finds the staged .pc, and a
# program builds against the staged header and library.  Then a real
# meson install, without DESTDIR, into a private mount namespace (root
# only): the dynamic loader finds LD_PRELOAD=libnosigbus.so right after it,
# with the default prefix and with --prefix=/usr.

load common

setup_file() {
	command -v meson >/dev/null || return 0
	STAGE=$BATS_FILE_TMPDIR/stage
	meson install -C "$NSB_BUILD_ROOT" --no-rebuild --quiet --destdir "$STAGE" \
		>"$BATS_FILE_TMPDIR/install.log" 2>&1 || true
	export STAGE
}

setup() {
	command -v meson >/dev/null || skip "meson is not in PATH"
	[ -x "$PYTHON" ] || skip "$PYTHON is needed to read meson introspect"
	[ -d "$STAGE" ] || fail "meson install failed: $(cat "$BATS_FILE_TMPDIR/install.log")"
	# Directories as configured, absolute.
	eval "$(meson introspect "$NSB_BUILD_ROOT" --buildoptions | "$PYTHON" -c '
import json, os, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
p = o["prefix"]
for k in ("libdir", "bindir", "includedir", "mandir"):
    print("%s=%s" % (k.upper(), os.path.join(p, o[k])))
print("MAN=%s" % ("1" if o.get("man", True) else "0"))
')"
	VERSION=$(meson introspect "$NSB_BUILD_ROOT" --projectinfo |
		"$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["version"])')
	URL=$(sed -n "s/^nsb_url = '\([^']*\)'$/\1/p" "$NSB_SOURCE_ROOT/meson.build")
	[ -n "$URL" ] || fail "no nsb_url in meson.build"
}

@test "the staged tree holds exactly the expected files" {
	local expected actual
	expected=$(
		{
			printf '%s\n' "$LIBDIR/libnosigbus.so.$VERSION" "$LIBDIR/libnosigbus.so.0" \
				"$LIBDIR/libnosigbus.so" "$LIBDIR/pkgconfig/nosigbus.pc" \
				"$INCLUDEDIR/nosigbus.h" "$BINDIR/nosigbus"
			if [ "$MAN" = 1 ]; then
				printf '%s\n' "$MANDIR/man1/nosigbus.1" "$MANDIR/man7/libnosigbus.7" \
					"$MANDIR/man3/nosigbus_protect.3" "$MANDIR/man3/nosigbus_unprotect.3" \
					"$MANDIR/man3/nosigbus_get_stats.3" "$MANDIR/man3/nosigbus_refresh.3"
			fi
		} | sort
	)
	actual=$(cd "$STAGE" && find . ! -type d | sed 's|^\.||' | sort)
	assert_equal "$actual" "$expected"
}

@test "the library: versioned file and the two symlinks" {
	[ -f "$STAGE$LIBDIR/libnosigbus.so.$VERSION" ] && [ ! -L "$STAGE$LIBDIR/libnosigbus.so.$VERSION" ]
	assert_equal "$(readlink "$STAGE$LIBDIR/libnosigbus.so.0")" "libnosigbus.so.$VERSION"
	assert_equal "$(readlink "$STAGE$LIBDIR/libnosigbus.so")" libnosigbus.so.0
	# Set-user-ID only with -Dsecure-preload=true (secure.bats).
	assert_equal "$(stat -c %a "$STAGE$LIBDIR/libnosigbus.so.$VERSION")" 755
	# The soname is what LD_PRELOAD and the linker use.
	run -0 objdump -p "$STAGE$LIBDIR/libnosigbus.so.$VERSION"
	assert_line --regexp '^ +SONAME +libnosigbus\.so\.0$'
}

@test "the header is the source header" {
	cmp "$NSB_BUILD_ROOT/src/nosigbus.h" "$STAGE$INCLUDEDIR/nosigbus.h"
	assert_equal "$(stat -c %a "$STAGE$INCLUDEDIR/nosigbus.h")" 644
}

@test "the wrapper: mode 755, nothing architecture-dependent in it" {
	assert_equal "$(stat -c %a "$STAGE$BINDIR/nosigbus")" 755
	# No library directory: one wrapper serves every architecture.
	run -1 grep -F "$LIBDIR" "$STAGE$BINDIR/nosigbus"
	run -1 grep -E 'lib(32|64)?/[a-z0-9_]+-linux-gnu' "$STAGE$BINDIR/nosigbus"
	# The soname, compiled into the program (it was a line of the script).
	run -0 grep -c -a -F 'libnosigbus.so.0' "$STAGE$BINDIR/nosigbus"
	# No placeholder left (a program's symbol table has '@@' of its own).
	run -1 grep -a -E '@(VERSION|URL|PRELOAD)@' "$STAGE$BINDIR/nosigbus"
	run -0 --separate-stderr "$STAGE$BINDIR/nosigbus" --version
	assert_output "$(printf 'nosigbus %s\n%s' "$VERSION" "$URL")"
}

@test "the staged wrapper names the library by its soname, which the loader must find" {
	# Found through LD_LIBRARY_PATH as the loader would find it installed.
	LD_LIBRARY_PATH=$STAGE$LIBDIR run -0 --separate-stderr "$STAGE$BINDIR/nosigbus" -n true
	assert_line 'LD_PRELOAD=libnosigbus.so.0'
	LD_LIBRARY_PATH=$STAGE$LIBDIR run -0 --separate-stderr "$STAGE$BINDIR/nosigbus" cat /proc/self/maps
	assert_output --partial "$STAGE$LIBDIR/libnosigbus.so.$VERSION"
	# The project's own command line, the unversioned name.
	LD_LIBRARY_PATH=$STAGE$LIBDIR LD_PRELOAD=libnosigbus.so run -0 --separate-stderr cat /proc/self/maps
	assert_output --partial "$STAGE$LIBDIR/libnosigbus.so.$VERSION"
	[ -z "$stderr" ] || fail "the loader said: $stderr"
	unset LD_LIBRARY_PATH
	if LD_PRELOAD=libnosigbus.so.0 sh -c : 2>&1 | grep -q .; then
		run -2 --separate-stderr "$STAGE$BINDIR/nosigbus" -n true
		assert_output ''
		assert_equal "$stderr" "nosigbus: the dynamic loader cannot find libnosigbus.so.0 (not installed? after installing under /usr/local, run ldconfig); set NOSIGBUS_LIBRARY to its path"
	fi
}

@test "the staged wrapper runs the staged library" {
	local lib=$STAGE$LIBDIR/libnosigbus.so.0
	make_disk_dir
	NOSIGBUS_LIBRARY=$lib run -0 --separate-stderr "$STAGE$BINDIR/nosigbus" -n true
	assert_line "LD_PRELOAD=$lib"
	NOSIGBUS_LIBRARY=$lib run -0 --separate-stderr "$STAGE$BINDIR/nosigbus" -p files \
		"$MAP" "$DISK/f" 2 trunc=0 read=1 stats
	remove_dirs
	assert_line 'page 1: zeros'
	assert_line --regexp '^stats: rescues=1 '
	NOSIGBUS_LIBRARY=$lib run -0 --separate-stderr "$STAGE$BINDIR/nosigbus" cat /proc/self/maps
	assert_output --partial "$STAGE$LIBDIR/libnosigbus.so.$VERSION"
}

@test "the man pages are configured and render" {
	[ "$MAN" = 1 ] || skip "configured with -Dman=false"
	local page
	for page in man1/nosigbus.1 man7/libnosigbus.7 man3/nosigbus_protect.3; do
		run -1 grep '@[A-Z]*@' "$STAGE$MANDIR/$page"
		run -0 grep -c "libnosigbus $VERSION" "$STAGE$MANDIR/$page"
		command -v groff >/dev/null || continue
		run -0 groff -man -ww -z "$STAGE$MANDIR/$page"
		assert_output ''
	done
	for page in nosigbus_unprotect nosigbus_refresh nosigbus_get_stats; do
		assert_equal "$(cat "$STAGE$MANDIR/man3/$page.3")" '.so man3/nosigbus_protect.3'
	done
	# Nothing architecture-dependent: a package can share them.
	for page in man1/nosigbus.1 man7/libnosigbus.7 man3/nosigbus_protect.3; do
		run -1 grep -F "$LIBDIR" "$STAGE$MANDIR/$page"
		run -0 grep -F "$URL" "$STAGE$MANDIR/$page"
	done
}

@test "pkg-config finds the staged nosigbus.pc" {
	command -v pkg-config >/dev/null || skip "pkg-config is not installed"
	export PKG_CONFIG_PATH=$STAGE$LIBDIR/pkgconfig PKG_CONFIG_LIBDIR=$STAGE$LIBDIR/pkgconfig
	run -0 pkg-config --modversion nosigbus
	assert_output "$VERSION"
	run -0 pkg-config --variable=preload nosigbus
	assert_output "$LIBDIR/libnosigbus.so.0"
	run -0 grep -Fx "URL: $URL" "$STAGE$LIBDIR/pkgconfig/nosigbus.pc"
	PKG_CONFIG_SYSROOT_DIR=$STAGE PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 \
		run -0 pkg-config --cflags --libs nosigbus
	assert_output --regexp "(^| )-I$STAGE$INCLUDEDIR( |$)"
	assert_output --regexp "(^| )-L$STAGE$LIBDIR( |$)"
	assert_output --regexp "(^| )-lnosigbus( |$)"
}

@test "a program builds and runs against the staged header and library" {
	command -v pkg-config >/dev/null || skip "pkg-config is not installed"
	command -v cc >/dev/null || skip "no C compiler"
	local flags
	flags=$(PKG_CONFIG_PATH=$STAGE$LIBDIR/pkgconfig PKG_CONFIG_LIBDIR=$STAGE$LIBDIR/pkgconfig \
		PKG_CONFIG_SYSROOT_DIR=$STAGE PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 \
		PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 pkg-config --cflags --libs nosigbus)
	cat >"$BATS_TEST_TMPDIR/prog.c" <<-'EOF'
		#include <stdio.h>
		#include <nosigbus.h>
		int main(void)
		{
			struct nosigbus_stats st;
			if (nosigbus_get_stats(&st, sizeof(st)) != 0)
				return 1;
			printf("MAP_NOSIGBUS=%#x mappings=%llu\n", MAP_NOSIGBUS,
			       (unsigned long long)st.mappings);
			return 0;
		}
	EOF
	# shellcheck disable=SC2086 # pkg-config output is a list of flags
	cc -o "$BATS_TEST_TMPDIR/prog" "$BATS_TEST_TMPDIR/prog.c" $flags
	LD_LIBRARY_PATH=$STAGE$LIBDIR run -0 --separate-stderr "$BATS_TEST_TMPDIR/prog"
	assert_output 'MAP_NOSIGBUS=0x200000 mappings=0'
	LD_LIBRARY_PATH=$STAGE$LIBDIR run -0 ldd "$BATS_TEST_TMPDIR/prog"
	assert_output --partial "$STAGE$LIBDIR/libnosigbus.so.0"
}

# in_private_root SCRIPT: runs the bash SCRIPT (with "run") in a private
# mount namespace where /usr and /etc are overlays whose changes vanish with
# it: a real `meson install` and its ldconfig happen there and nowhere
# else.  The script sees NSB_* and the directories above; LD_LIBRARY_PATH
# and LD_PRELOAD are unset, so that only the loader's own search path
# counts.  Skips, saying why, where this cannot be done.
in_private_root() {
	local d=$BATS_TEST_TMPDIR/root
	[ "$(id -u)" = 0 ] || skip "needs root, to install for real in a private mount namespace"
	command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
	# In a chroot whose / is not a mount point (pbuilder, a plain chroot)
	# or without CAP_SYS_ADMIN, unshare -m itself fails (issue 23).
	unshare -m true 2>"$BATS_TEST_TMPDIR/unshare.err" ||
		skip "no private mount namespace here (a chroot, or no CAP_SYS_ADMIN): unshare -m: $(head -n 1 "$BATS_TEST_TMPDIR/unshare.err")"
	mkdir -p "$d/usr-upper" "$d/usr-work" "$d/etc-upper" "$d/etc-work"
	export LIBDIR BINDIR VERSION
	run unshare -m bash -c '
		d=$1
		shift
		{
			mount --make-rprivate / &&
			mount -t overlay overlay -o "lowerdir=/usr,upperdir=$d/usr-upper,workdir=$d/usr-work" /usr &&
			mount -t overlay overlay -o "lowerdir=/etc,upperdir=$d/etc-upper,workdir=$d/etc-work" /etc
		} 2>"$d/mount.err" || exit 77
		unset LD_LIBRARY_PATH LD_PRELOAD
		exec bash -euc "$1"' sh "$d" "$1"
	[ "$status" != 77 ] ||
		skip "cannot mount overlays over /usr and /etc here: $(cat "$d/mount.err")"
}

# The checks after a real installation into $1 (prefix), with the library
# in $2 (libdir) and the wrapper in $3 (bindir).
installed_checks='
	lib=$(readlink -f "$LIBDIR/libnosigbus.so.$VERSION")
	# The project command line, as written: the unversioned name.
	LD_PRELOAD=libnosigbus.so cat /proc/self/maps >maps 2>err
	grep -F "$lib" maps >/dev/null || { echo "FAIL: LD_PRELOAD=libnosigbus.so loaded no $lib"; cat err; exit 1; }
	[ ! -s err ] || { echo "FAIL: the loader said: $(cat err)"; exit 1; }
	# The wrapper: the soname, found by the loader.
	"$BINDIR/nosigbus" -n true | grep -Fx LD_PRELOAD=libnosigbus.so.0
	"$BINDIR/nosigbus" cat /proc/self/maps | grep -F "$lib" >/dev/null ||
		{ echo "FAIL: nosigbus loaded no $lib"; exit 1; }
	echo "ok: LD_PRELOAD=libnosigbus.so and nosigbus load $lib"
'

@test "meson install (no DESTDIR): LD_PRELOAD=libnosigbus.so finds the library at once" {
	# (Without the ldconfig that meson install runs, /usr/local/lib/<triplet>
	# is not searched until the cache is rebuilt.)
	case $LIBDIR in
	/usr/*) ;;
	*) skip "libdir $LIBDIR is not under /usr, which this test can overlay" ;;
	esac
	in_private_root "cd $BATS_TEST_TMPDIR
		meson install -C $NSB_BUILD_ROOT --no-rebuild --quiet
		$installed_checks
		sh $NSB_SOURCE_ROOT/src/post-install.sh $LIBDIR"
	assert_success
	# (Meson 1.0 shows an install script's output only when it fails; run
	# again, it says what it checks.)
	assert_line "libnosigbus: the dynamic loader finds $LIBDIR/libnosigbus.so: LD_PRELOAD=libnosigbus.so works"
	assert_line --partial 'ok: LD_PRELOAD=libnosigbus.so and nosigbus load '
}

@test "meson install with --prefix=/usr: LD_PRELOAD=libnosigbus.so finds the library" {
	local build=$BATS_TEST_TMPDIR/build-usr
	[ "$(id -u)" = 0 ] || skip "needs root, to install for real in a private mount namespace"
	# The library, wrapper and pages only: a build of a few seconds.
	meson setup --prefix=/usr -Dtests=false "$build" "$NSB_SOURCE_ROOT" >"$BATS_TEST_TMPDIR/setup.log" 2>&1 ||
		fail "meson setup --prefix=/usr: $(cat "$BATS_TEST_TMPDIR/setup.log")"
	meson compile -C "$build" >"$BATS_TEST_TMPDIR/compile.log" 2>&1 ||
		fail "meson compile: $(tail -n 20 "$BATS_TEST_TMPDIR/compile.log")"
	LIBDIR=$(meson introspect "$build" --buildoptions | "$PYTHON" -c '
import json, os, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print(os.path.join(o["prefix"], o["libdir"]))')
	BINDIR=/usr/bin
	in_private_root "cd $BATS_TEST_TMPDIR
		meson install -C $build --no-rebuild --quiet
		$installed_checks
		sh $NSB_SOURCE_ROOT/src/post-install.sh $LIBDIR"
	assert_success
	assert_line "libnosigbus: the dynamic loader finds $LIBDIR/libnosigbus.so: LD_PRELOAD=libnosigbus.so works"
	assert_line --partial "ok: LD_PRELOAD=libnosigbus.so and nosigbus load $LIBDIR/libnosigbus.so.$VERSION"
}
