#!/bin/sh
# SPDX-License-Identifier: MIT
#
# docs.sh README DOC...: what a user reads names no issue of the project's
# tracker ("issue 24", "issues 19 and 20"): development history belongs in
# the commits, what changed per version in NEWS.  And the README stays a
# few screens: at most 300 lines, the depth in doc/ and the man pages.

readme=$1
status=0
found=$(grep -n -i -E '(^|[^a-z])issues? #?[0-9]+' "$@")
if [ -n "$found" ]; then
	printf 'FAIL: issue numbers in what users read:\n%s\n' "$found"
	status=1
else
	echo "ok: no issue numbers in $# documents"
fi
lines=$(wc -l <"$readme")
if [ "$lines" -gt 300 ]; then
	echo "FAIL: $readme has $lines lines (at most 300: move the depth to doc/)"
	status=1
else
	echo "ok: $readme has $lines lines"
fi
exit "$status"
