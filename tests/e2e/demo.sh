#!/bin/bash
# SPDX-License-Identifier: MIT
#
# demo.sh [BUILDDIR] - the README's first command.
#
# Runs Debian's python3 reading a memory-mapped file that gets truncated
# underneath it: once as is (the kernel kills it with SIGBUS), once under
# BUILDDIR/src/nosigbus --policy=files (it reads zeros and finishes).
# Builds nothing: BUILDDIR (default: build in the source tree) must be built.
# Exit status 0 iff both runs behaved as described.

set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
builddir=${1:-$here/../../build}
wrapper=$builddir/src/nosigbus
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3) || {
	echo "demo: python3 is not installed (Debian: apt install python3)" >&2
	exit 2
}
[ -x "$wrapper" ] || {
	echo "demo: $wrapper not found: build first (meson setup build && meson compile -C build)" >&2
	exit 2
}

tmp=$(mktemp -d) || exit 2
trap 'rm -rf -- "$tmp"' EXIT
# The child that dies by SIGBUS must not leave a core file behind.
ulimit -c 0

# Maps a 64 KiB file, has another descriptor truncate it to nothing, then
# reads the mapping.  Prints what it read if it lives that long.
cat >"$tmp/reader.py" <<'EOF'
import mmap, sys
path = sys.argv[1]
with open(path, "wb") as f:
    f.write(b"0123456789abcdef" * 4096)
with open(path, "rb") as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
with open(path, "r+b") as other:
    other.truncate(0)
data = m[:]
print("zeros" if data == bytes(len(data)) else "data", len(data))
EOF

echo "demo: python3 maps a 64 KiB file; the file is truncated; python3 reads the mapping."
ok=0

out=$("$python" "$tmp/reader.py" "$tmp/file" 2>/dev/null)
status=$?
if [ "$status" -eq $((128 + $(kill -l SIGBUS))) ]; then
	echo "without libnosigbus: killed by SIGBUS (exit status $status)"
else
	echo "without libnosigbus: expected death by SIGBUS, got exit status $status ($out)"
	ok=1
fi

out=$("$wrapper" --policy=files "$python" "$tmp/reader.py" "$tmp/file")
status=$?
if [ "$status" -eq 0 ] && [ "${out%% *}" = zeros ]; then
	echo "with libnosigbus: survived, read zeros (${out#* } bytes)"
else
	echo "with libnosigbus: expected zeros and exit status 0, got exit status $status ($out)"
	ok=1
fi
exit "$ok"
