#!/bin/sh
# SPDX-License-Identifier: MIT
#
# header.sh LANG INCLUDE_DIR COMPILER...: <nosigbus.h> included first and
# alone compiles without a warning, as C99 (LANG c) or C++11 (LANG c++),
# and what it declares is usable from there.

lang=$1
incdir=$2
shift 2

if [ "$#" = 0 ]; then
	echo "SKIP: no $lang compiler was found when configuring"
	exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf -- "$tmp"' EXIT

cat >"$tmp/use.$lang" <<'EOT'
#include <nosigbus.h>

int use_nosigbus(void *addr, size_t len);

int
use_nosigbus(void *addr, size_t len)
{
	struct nosigbus_stats st;
	int flags = MAP_NOSIGBUS;

	if (nosigbus_get_stats(&st, sizeof(st)) != 0 || flags != 0x200000)
		return -1;
	if (NOSIGBUS_VERSION_MAJOR < 0 || NOSIGBUS_VERSION_MINOR < 0)
		return -1;
	if (nosigbus_protect(addr, len) != 0 || nosigbus_refresh(addr, len) < 0)
		return -1;
	return nosigbus_unprotect(addr, len) + (int)(st.rescues + st.pages +
						     st.failures + st.mappings);
}
EOT

case $lang in
c) std='-std=c99' ;;
c++) std='-std=c++11' ;;
*) echo "FAIL: unknown language $lang"; exit 1 ;;
esac
echo "$* $std -pedantic -Werror -Wall -Wextra -I$incdir -c use.$lang"
if ! "$@" -x "$lang" "$std" -pedantic -Werror -Wall -Wextra -I"$incdir" \
	-c -o "$tmp/use.o" "$tmp/use.$lang"; then
	echo "FAIL: <nosigbus.h> does not compile alone as $lang ($std)"
	exit 1
fi
echo "ok: <nosigbus.h> compiles alone as $lang ($std)"
