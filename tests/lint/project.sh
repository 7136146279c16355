#!/bin/sh
# SPDX-License-Identifier: MIT
#
# project.sh MESON_BUILD README: the project's home page and version have
# one place, the top of meson.build (nsb_url, project(version:)); the
# wrapper, the man pages and nosigbus.pc are configured from it.  README.md
# cannot be, so it must name the same home page, and it must not spell out
# the version outside captured program output (```text blocks), where it
# would go stale at the next release.

meson_build=$1
readme=$2
status=0

url=$(sed -n "s/^nsb_url = '\([^']*\)'$/\1/p" "$meson_build")
version=$(sed -n "s/^[[:space:]]*version: '\([^']*\)',.*/\1/p" "$meson_build" | head -n 1)
if [ -z "$url" ] || [ -z "$version" ]; then
	echo "FAIL: no nsb_url or no project version in $meson_build"
	exit 1
fi
echo "home page: $url; version: $version"

if grep -qF "Home page: <$url>" "$readme"; then
	echo "ok: README.md names the home page"
else
	echo "FAIL: README.md has no line 'Home page: <$url>'"
	status=1
fi
# Any other URL of the project's GitHub organisation is a stale copy.
others=$(grep -o 'https://github\.com/libnosigbus/[^ >)]*' "$readme" | grep -vxF "$url")
if [ -n "$others" ]; then
	printf 'FAIL: README.md names other project URLs:\n%s\n' "$others"
	status=1
fi
stale=$(awk -v v="$version" '
	/^```/ { inblock = !inblock; text = ($0 == "```text"); next }
	inblock && text { next }
	index($0, v) { print FILENAME ":" NR ": " $0 }
' "$readme")
if [ -n "$stale" ]; then
	printf 'FAIL: README.md spells out the version (say VERSION, or take it from meson.build):\n%s\n' "$stale"
	status=1
else
	echo "ok: README.md does not spell out the version"
fi
exit "$status"
