#!/bin/sh
# SPDX-License-Identifier: MIT
#
# post-install.sh LIBDIR [secure|plain]: run by `meson install`, except
# into a DESTDIR (a package's ldconfig trigger does this part there).
#
# LD_PRELOAD=libnosigbus.so COMMAND, the project's own command line, names
# the library without a directory: the dynamic loader must find it in its
# search path.  /usr/lib/<triplet> is searched as is; /usr/local/lib/<triplet>
# and /usr/local/lib only through /etc/ld.so.cache, which a new library is
# not in until ldconfig runs.  So: run ldconfig (as root), then ask the
# loader which file it loads for that name, and say what to do when it is
# not the one just installed.  Never fails the installation.  (Meson 1.0
# shows this output only for a script that fails; later versions show it.
# Run by hand, sh src/post-install.sh LIBDIR, it checks an installation.)

libdir=$1
mode=${2:-plain}
name=libnosigbus.so
installed=$(readlink -f -- "$libdir/$name") || exit 0

# -Dsecure-preload: the loader takes a preload into a process in secure
# execution only from its system search path (ld.so --help lists it), and
# only a file with the set-user-ID bit.
if [ "$mode" = secure ]; then
	ld=$(ldd /bin/sh 2>/dev/null | awk '/\/ld[-.]/ { for (i = 1; i <= NF; i++) if ($i ~ /^\//) { print $i; exit } }')
	dirs=
	[ -z "$ld" ] || dirs=$("$ld" --help 2>/dev/null | sed -n 's/^  *\(\/.*\) (system search path)$/\1/p')
	[ -n "$dirs" ] || dirs="/lib /usr/lib /lib64 /usr/lib64"
	here=$(readlink -f -- "$libdir")
	trusted=0
	list=
	for d in $dirs; do
		list="$list${list:+ }$d"
		[ "$(readlink -f -- "$d" 2>/dev/null)" != "$here" ] || trusted=1
	done
	if [ ! -u "$installed" ]; then
		echo "libnosigbus: $installed lost its set-user-ID bit (a file system mounted nosuid? a umask?): programs in secure execution will not preload it"
	elif [ "$trusted" = 0 ]; then
		echo "libnosigbus: $libdir is not in the loader's system search path ($list): programs in secure execution will not preload it; configure with --prefix=/usr"
	else
		echo "libnosigbus: installed set-user-ID in $libdir: LD_PRELOAD=$name also reaches programs in secure execution (file capabilities, set-user-ID)"
	fi
fi

if [ "$(id -u)" = 0 ]; then
	ldconfig=$(command -v ldconfig 2>/dev/null) || ldconfig=
	[ -n "$ldconfig" ] || [ ! -x /sbin/ldconfig ] || ldconfig=/sbin/ldconfig
	if [ -n "$ldconfig" ]; then
		"$ldconfig" || echo "libnosigbus: ldconfig failed; run it before LD_PRELOAD=$name"
	fi
fi

# The file the loader maps for the bare name, as /proc names it: cat is
# the process it is preloaded into, and the one whose maps are read.
# shellcheck disable=SC2002
found=$(LD_PRELOAD=$name cat /proc/self/maps 2>/dev/null |
	awk -v n="/$name" 'index($6, n) { print $6; exit }')
if [ "$found" = "$installed" ]; then
	echo "libnosigbus: the dynamic loader finds $libdir/$name: LD_PRELOAD=$name works"
elif [ "$(id -u)" != 0 ] && [ -z "$found" ]; then
	echo "libnosigbus: run ldconfig as root so that LD_PRELOAD=$name finds $libdir/$name"
elif [ -z "$found" ]; then
	echo "libnosigbus: $libdir is not in the dynamic loader's search path: add it to a file in /etc/ld.so.conf.d and run ldconfig, or use LD_PRELOAD=$libdir/$name"
else
	echo "libnosigbus: LD_PRELOAD=$name loads $found, not $installed: remove the other installation or use LD_PRELOAD=$libdir/$name"
fi
exit 0
