#!/bin/sh
# SPDX-License-Identifier: MIT
#
# symbols.sh LIBRARY VERSION_SCRIPT: the dynamic symbols LIBRARY defines are
# exactly the global names of VERSION_SCRIPT.  A name missing from the
# library means an interposition the linker silently dropped; an extra one
# is a leak of an internal function into every program we are loaded into.

lib=$1
syms=$2

if ! command -v nm >/dev/null 2>&1; then
	echo "SKIP: nm (binutils) is not installed"
	exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf -- "$tmp"' EXIT

# Defined dynamic symbols, without version nodes (absolute, type A) and
# without @VERSION suffixes.
nm -D --defined-only "$lib" >"$tmp/nm" || exit 1
awk 'NF >= 3 && $2 != "A" { sub(/@.*/, "", $3); print $3 }' "$tmp/nm" |
	sort -u >"$tmp/exported"

# Names between "global:" and "local:", comments removed.
awk '
	{ text = text $0 "\n" }
	END {
		while ((i = index(text, "/*")) > 0) {
			rest = substr(text, i + 2)
			j = index(rest, "*/")
			if (j == 0) { text = substr(text, 1, i - 1); break }
			text = substr(text, 1, i - 1) " " substr(rest, j + 2)
		}
		n = split(text, words, /[ \t\n;{}]+/)
		for (k = 1; k <= n; k++) {
			if (words[k] == "global:") { on = 1; continue }
			if (words[k] == "local:") { on = 0; continue }
			if (on && words[k] != "") print words[k]
		}
	}' "$syms" | sort -u >"$tmp/expected"

if [ ! -s "$tmp/expected" ]; then
	echo "FAIL: no global names found in $syms"
	exit 1
fi
if ! cmp -s "$tmp/expected" "$tmp/exported"; then
	echo "FAIL: exported symbols of $lib differ from $syms"
	echo "(< only in $syms: not exported; > only exported: leaked)"
	diff "$tmp/expected" "$tmp/exported"
	exit 1
fi
echo "ok: $(wc -l <"$tmp/exported") symbols, as in $syms"
