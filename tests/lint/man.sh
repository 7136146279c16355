#!/bin/sh
# SPDX-License-Identifier: MIT
#
# man.sh PAGE...: every page renders with all groff warnings on and says
# nothing, has no @PLACEHOLDER@ left, and every .so link names a page that
# is in the list.

if ! command -v groff >/dev/null 2>&1; then
	echo "SKIP: groff is not installed"
	exit 77
fi
status=0
pages=" "
for f; do
	pages="$pages${f##*/} "
done
for f; do
	name=${f##*/}
	first=$(sed -n '1p' "$f")
	case $first in
	'.so '*)
		target=${first#.so }
		if [ "$(wc -l <"$f")" != 1 ]; then
			echo "FAIL: $name: a .so link must be the whole file"
			status=1
		fi
		case $pages in
		*" ${target##*/} "*) echo "ok: $name -> $target" ;;
		*) echo "FAIL: $name: links to $target, which is not installed"; status=1 ;;
		esac
		continue
		;;
	esac
	if grep -n '@[A-Z_]*@' "$f"; then
		echo "FAIL: $name: unreplaced placeholder"
		status=1
	fi
	out=$(LC_ALL=C.UTF-8 groff -man -ww -z "$f" 2>&1)
	if [ -n "$out" ]; then
		printf '%s\n' "FAIL: $name: groff -man -ww -z says:" "$out"
		status=1
		continue
	fi
	if command -v man >/dev/null 2>&1; then
		out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$f" 2>&1 >/dev/null)
		if [ -n "$out" ]; then
			printf '%s\n' "FAIL: $name: man --warnings says:" "$out"
			status=1
			continue
		fi
	fi
	echo "ok: $name"
done
exit "$status"
