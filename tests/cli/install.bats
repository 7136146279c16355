#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run --separate-stderr sets stderr and stderr_lines
#
# meson install --destdir, checked file by file, then used: the staged
# wrapper runs the staged library, pkg-config finds the staged .pc, and a
# program builds against the staged header and library.

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
					"$MANDIR/man3/nosigbus_get_stats.3"
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
	# The soname is what LD_PRELOAD and the linker use.
	run -0 objdump -p "$STAGE$LIBDIR/libnosigbus.so.$VERSION"
	assert_line --regexp '^ +SONAME +libnosigbus\.so\.0$'
}

@test "the header is the source header" {
	cmp "$NSB_SOURCE_ROOT/src/nosigbus.h" "$STAGE$INCLUDEDIR/nosigbus.h"
	assert_equal "$(stat -c %a "$STAGE$INCLUDEDIR/nosigbus.h")" 644
}

@test "the wrapper: mode 755, the installed library path baked in" {
	assert_equal "$(stat -c %a "$STAGE$BINDIR/nosigbus")" 755
	run -0 grep -c "^libdir='$LIBDIR'$" "$STAGE$BINDIR/nosigbus"
	run -1 grep '@[A-Z]*@' "$STAGE$BINDIR/nosigbus"
	run -0 --separate-stderr "$STAGE$BINDIR/nosigbus" --version
	assert_output "nosigbus $VERSION"
}

@test "the staged wrapper looks for the installed library" {
	[ ! -e "$LIBDIR/libnosigbus.so.0" ] || skip "libnosigbus is installed in $LIBDIR"
	run -2 --separate-stderr "$STAGE$BINDIR/nosigbus" -n true
	assert_output ''
	assert_equal "$stderr" "nosigbus: cannot find libnosigbus.so.0 in $STAGE$BINDIR or $LIBDIR; set NOSIGBUS_LIBRARY to its path"
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
	for page in nosigbus_unprotect nosigbus_get_stats; do
		assert_equal "$(cat "$STAGE$MANDIR/man3/$page.3")" '.so man3/nosigbus_protect.3'
	done
	run -0 grep -F "$LIBDIR/libnosigbus.so.0" "$STAGE$MANDIR/man1/nosigbus.1"
}

@test "pkg-config finds the staged nosigbus.pc" {
	command -v pkg-config >/dev/null || skip "pkg-config is not installed"
	export PKG_CONFIG_PATH=$STAGE$LIBDIR/pkgconfig PKG_CONFIG_LIBDIR=$STAGE$LIBDIR/pkgconfig
	run -0 pkg-config --modversion nosigbus
	assert_output "$VERSION"
	run -0 pkg-config --variable=preload nosigbus
	assert_output "$LIBDIR/libnosigbus.so.0"
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
