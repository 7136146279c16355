#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Usage: shellcheck.sh FILE...  Runs shellcheck, all severities, on the
# install script and the test scripts.  Each file says its shell in its #! line
# (or a "shellcheck shell=" directive).

if ! command -v shellcheck >/dev/null 2>&1; then
	echo "SKIP: shellcheck is not installed"
	exit 77
fi
shellcheck --version | sed -n 's/^version: /shellcheck /p'
status=0
for f; do
	if shellcheck --external-sources "$f"; then
		echo "ok: $f"
	else
		status=1
	fi
done
exit "$status"
