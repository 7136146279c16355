# SPDX-License-Identifier: MIT
# shellcheck shell=bash
#
# Loaded by every tests/cli/*.bats file (load common).  Paths come from the
# meson test environment (test_env in tests/meson.build).

bats_require_minimum_version 1.5.0
bats_load_library bats-support
bats_load_library bats-assert

: "${NSB_WRAPPER:?run these tests with meson test}"
: "${NSB_PRELOAD:?}" "${NSB_BUILD_ROOT:?}" "${NSB_SOURCE_ROOT:?}"

MAP=$NSB_BUILD_ROOT/tests/cli/nsb-cli-map
API=$NSB_BUILD_ROOT/tests/cli/nsb-cli-api
# The Debian interpreter, not whatever python3 comes first in PATH.
PYTHON=/usr/bin/python3
export MAP API PYTHON

# Many tests die by SIGBUS on purpose: no core files in the working tree.
ulimit -c 0

# Every test starts from a known library configuration.
unset NOSIGBUS_POLICY NOSIGBUS_FILL NOSIGBUS_STRICT NOSIGBUS_LOG NOSIGBUS_LIBRARY
unset LD_PRELOAD

# The system page size: never assume 4096.
page_size() {
	getconf PAGESIZE
}

# Makes $DISK, a directory on a disk file system for this test: under the
# build tree, since /tmp may be tmpfs (and a tmpfs file is "shm" to the
# library).  Skips when the build tree is in memory too.
make_disk_dir() {
	local fs
	fs=$(stat -f -c %T "$NSB_BUILD_ROOT") || fail "stat -f $NSB_BUILD_ROOT"
	case $fs in
	tmpfs | ramfs) skip "the build directory is on $fs; a disk file is needed" ;;
	esac
	DISK=$(mktemp -d "$NSB_BUILD_ROOT/tests/cli/scratch.XXXXXX")
}

# Makes $SHM, a directory on tmpfs (/dev/shm), or skips.
make_shm_dir() {
	[ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] ||
		skip "/dev/shm is not a tmpfs"
	SHM=$(mktemp -d /dev/shm/nsb-cli.XXXXXX 2>/dev/null) ||
		skip "cannot create a directory in /dev/shm: a writable tmpfs is needed there (in a chroot, mount one, as schroot does)"
}

# For teardown(): removes what make_*_dir made.
remove_dirs() {
	if [ -n "${DISK-}" ]; then rm -rf -- "$DISK"; fi
	if [ -n "${SHM-}" ]; then rm -rf -- "$SHM"; fi
}

# The wrapper, with nothing of ours inherited from the caller.
wrapper() {
	"$NSB_WRAPPER" "$@"
}
