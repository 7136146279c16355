#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run sets output and lines
#
# The session files of -Dsessions=true (sessions/): installed with the
# option and only with it, valid for the tools that read them
# (desktop-file-validate, systemd-analyze verify), and doing what they say:
# the session entry runs the compositor through the wrapper with the
# library loaded, the drop-in's environment loads the library.
#
# Two builds are configured, not compiled (-Dtests=false -Dman=false): one
# with the option and one without; the session files are installed alone
# with 'meson install --tags sessions', which needs nothing compiled.

load common

setup_file() {
	command -v meson >/dev/null || return 0
	local b
	for b in on off; do
		local opt=-Dsessions=false
		[ "$b" = on ] && opt=-Dsessions=true
		{
			meson setup "$BATS_FILE_TMPDIR/build-$b" "$NSB_SOURCE_ROOT" \
				"$opt" -Dtests=false -Dman=false --prefix=/usr &&
				meson install -C "$BATS_FILE_TMPDIR/build-$b" --no-rebuild --quiet \
					--tags sessions --destdir "$BATS_FILE_TMPDIR/stage-$b"
		} >"$BATS_FILE_TMPDIR/$b.log" 2>&1 || touch "$BATS_FILE_TMPDIR/$b.failed"
	done
}

setup() {
	command -v meson >/dev/null || skip "meson is not in PATH"
	[ -x "$PYTHON" ] || skip "$PYTHON is needed to read meson introspect"
	local b
	for b in on off; do
		[ ! -e "$BATS_FILE_TMPDIR/$b.failed" ] ||
			fail "meson setup or install (sessions $b) failed: $(cat "$BATS_FILE_TMPDIR/$b.log")"
	done
	ON=$BATS_FILE_TMPDIR/stage-on
	SESSIONS=$ON/usr/share/wayland-sessions
	DROPINS=$ON/usr/share/nosigbus/systemd/user
}

# The files a build directory would install, one absolute path a line.
installed() {
	meson introspect "$1" --installed |
		"$PYTHON" -c 'import json, sys; print("\n".join(sorted(json.load(sys.stdin).values())))'
}

@test "-Dsessions=true installs the two session entries and the two drop-ins" {
	local expected actual
	expected=$(printf '%s\n' \
		/usr/share/nosigbus/systemd/user/org.gnome.Shell@wayland.service.d/nosigbus.conf \
		/usr/share/nosigbus/systemd/user/plasma-kwin_wayland.service.d/nosigbus.conf \
		/usr/share/wayland-sessions/sway-nosigbus.desktop \
		/usr/share/wayland-sessions/weston-nosigbus.desktop)
	actual=$(cd "$ON" && find . ! -type d | sed 's|^\.||' | sort)
	assert_equal "$actual" "$expected"
	run -0 find "$ON" -type f ! -perm 644
	assert_output ''
	# A full install lists them too, beside the library.
	run -0 installed "$BATS_FILE_TMPDIR/build-on"
	assert_line /usr/share/wayland-sessions/sway-nosigbus.desktop
	assert_line /usr/share/nosigbus/systemd/user/plasma-kwin_wayland.service.d/nosigbus.conf
	assert_line --regexp '^/usr/bin/nosigbus$'
}

@test "the default installs none of them" {
	# Nothing to install: meson makes no staging directory at all.
	if [ -e "$BATS_FILE_TMPDIR/stage-off" ]; then
		run -0 find "$BATS_FILE_TMPDIR/stage-off" ! -type d
		assert_output ''
	fi
	run -0 installed "$BATS_FILE_TMPDIR/build-off"
	assert_line --regexp '^/usr/bin/nosigbus$'
	refute_line --partial wayland-sessions
	refute_line --partial /systemd/
	refute_line --partial /usr/share/nosigbus
}

@test "the session entries: names, the wrapper, desktop-file-validate" {
	run -0 grep -Fx 'Name=Sway (libnosigbus)' "$SESSIONS/sway-nosigbus.desktop"
	run -0 grep -Fx 'Exec=/usr/bin/nosigbus sway' "$SESSIONS/sway-nosigbus.desktop"
	run -0 grep -Fx 'Name=Weston (libnosigbus)' "$SESSIONS/weston-nosigbus.desktop"
	run -0 grep -Fx 'Exec=/usr/bin/nosigbus weston' "$SESSIONS/weston-nosigbus.desktop"
	command -v desktop-file-validate >/dev/null ||
		skip "desktop-file-validate is not installed (Debian: desktop-file-utils); the entries are not validated"
	local f
	for f in "$SESSIONS"/*.desktop; do
		run -0 desktop-file-validate "$f"
		assert_output ''
	done
}

@test "a session entry's command runs the compositor with the library loaded" {
	local shims=$BATS_TEST_TMPDIR/shims exec name
	mkdir "$shims"
	for name in sway weston; do
		# A stand-in: is libnosigbus mapped into this process?
		printf '#!/bin/sh\ngrep -q "/libnosigbus\\.so" /proc/$$/maps && echo loaded\n' >"$shims/$name"
		chmod 755 "$shims/$name"
		exec=$(sed -n 's/^Exec=//p' "$SESSIONS/$name-nosigbus.desktop")
		# The installed wrapper's path, for the build's wrapper.
		exec=${exec/#\/usr\/bin\/nosigbus/$NSB_WRAPPER}
		# shellcheck disable=SC2086 # the Exec line is split into words, as a display manager does
		PATH=$shims:$PATH run -0 $exec
		assert_output loaded
	done
}

@test "the drop-ins set LD_PRELOAD for their unit, and it loads the library" {
	local unit env
	for unit in org.gnome.Shell@wayland.service plasma-kwin_wayland.service; do
		run -0 sed -n '/^[^#]/p' "$DROPINS/$unit.d/nosigbus.conf"
		assert_output $'[Service]\nEnvironment=LD_PRELOAD=libnosigbus.so.0'
		env=$(sed -n 's/^Environment=//p' "$DROPINS/$unit.d/nosigbus.conf")
		# By bare name, as the loader finds the installed library; here
		# the build's, through LD_LIBRARY_PATH.
		run -0 env "$env" LD_LIBRARY_PATH="$NSB_BUILD_ROOT/src" grep -q '/libnosigbus\.so' /proc/self/maps
	done
}

@test "the drop-ins pass systemd-analyze verify, with the real unit or a stand-in" {
	command -v systemd-analyze >/dev/null ||
		skip "systemd-analyze is not installed (Debian: systemd); the drop-ins are not verified"
	local units=$BATS_TEST_TMPDIR/units runtime=$BATS_TEST_TMPDIR/runtime unit
	mkdir -p "$units" "$runtime"
	chmod 700 "$runtime"
	for unit in org.gnome.Shell@wayland.service plasma-kwin_wayland.service; do
		if [ -f "/usr/lib/systemd/user/$unit" ]; then
			cp "/usr/lib/systemd/user/$unit" "$units/"
			echo "# $unit: the installed unit" >&3
		else
			printf '[Unit]\nDescription=stand-in for %s\n\n[Service]\nExecStart=/bin/true\n' \
				"$unit" >"$units/$unit"
			echo "# $unit: not installed here, a stand-in unit of that name" >&3
		fi
		cp -r "$DROPINS/$unit.d" "$units/"
		XDG_RUNTIME_DIR=$runtime SYSTEMD_UNIT_PATH=$units: run -0 \
			systemd-analyze --user verify "$units/$unit"
		assert_output ''
		# verify reads the drop-in: a key it does not know is reported.
		echo 'NoSuchKey=1' >>"$units/$unit.d/nosigbus.conf"
		XDG_RUNTIME_DIR=$runtime SYSTEMD_UNIT_PATH=$units: run \
			systemd-analyze --user verify "$units/$unit"
		assert_output --partial "$unit.d/nosigbus.conf"
		assert_output --partial NoSuchKey
	done
}
