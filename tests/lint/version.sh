#!/bin/sh
# SPDX-License-Identifier: MIT
#
# version.sh MESON BUILD_DIR HEADER: the version has one place,
# project(version:).  The generated <nosigbus.h> must carry the major and
# minor of the version that meson itself reports for the build (meson
# introspect --projectinfo), so that a bump cannot leave the header behind.

meson=$1
build=$2
header=$3

info=$("$meson" introspect --projectinfo "$build") || {
	echo "FAIL: meson introspect --projectinfo $build failed"
	exit 1
}
# The top-level project's version comes first ("subprojects" follow).
version=$(printf '%s\n' "$info" | sed -n 's/^[^"]*"version": *"\([^"]*\)".*/\1/p')
if [ -z "$version" ]; then
	echo "FAIL: no version in meson introspect --projectinfo: $info"
	exit 1
fi
major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}

macro() {
	sed -n "s/^#define $1 \\([^ ]*\\)\$/\\1/p" "$header"
}
status=0
for pair in "NOSIGBUS_VERSION_MAJOR $major" "NOSIGBUS_VERSION_MINOR $minor"; do
	name=${pair% *}
	want=${pair#* }
	got=$(macro "$name")
	if [ "$got" = "$want" ]; then
		echo "ok: $name is $got (project version $version)"
	else
		echo "FAIL: $header: $name is '${got}', the project's version is $version (want $want)"
		status=1
	fi
done
exit "$status"
