#!/bin/sh
# SPDX-License-Identifier: MIT
#
# signals-table.sh TABLE SIGNALS_MESON: every test that doc/signals.md
# names (the last column of its tables) is a scenario that the signals
# suite runs (issue 38: "each row names its test, and the suite runs
# them all").  A `routing-*` pattern needs one scenario that matches.

table=$1
suite=$2
tmp=$(mktemp -d) || exit 1
trap 'rm -rf -- "$tmp"' EXIT

# Scenario names: the quoted names of the sigtest_scenarios list.
sed -n "/^sigtest_scenarios = \[/,/^\]/p" "$suite" |
	sed -n "s/^[[:space:]]*'\([a-z0-9-]*\)',.*/\1/p" | sort -u >"$tmp/scenarios"
if [ ! -s "$tmp/scenarios" ]; then
	echo "FAIL: no scenarios found in $suite"
	exit 1
fi

# Table rows: the last cell, its `names` (backquotes, not expansions).
# shellcheck disable=SC2016
grep '^|' "$table" | grep -v '^|---' | grep -v '^| Path ' |
	awk -F'|' '{ print $(NF - 1) }' | grep -o '`[a-z0-9*-]*`' | tr -d '`' | grep -v '^-' | sort -u >"$tmp/named"

fail=0
while read -r name; do
	case $name in
	*'*')
		prefix=${name%\*}
		grep -q "^$prefix" "$tmp/scenarios" || { echo "FAIL: no scenario matches $name"; fail=1; }
		;;
	*)
		grep -qx "$name" "$tmp/scenarios" || { echo "FAIL: $name is not a signals scenario"; fail=1; }
		;;
	esac
done <"$tmp/named"
rows=$(grep '^| ' "$table" | grep -vc '^| Path ')
[ "$fail" = 0 ] && echo "ok: $(wc -l <"$tmp/named") tests named by $rows rows, each run by the signals suite"
exit "$fail"
