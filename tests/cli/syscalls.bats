#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
#
# The system calls the library adds to a path, counted by strace (counts do
# not depend on the machine's load, times do).

load common

POOL=$NSB_BUILD_ROOT/tests/cli/nsb-cli-pool

# The calls of the last pool cycle in the strace log $1 (between the last
# two getppid markers), one "name first-argument" a line.
last_cycle() {
	awk '/^getppid\(/ { n++; next } { print n "\t" $0 }' "$1" |
		awk -F '\t' -v last="$(grep -c '^getppid(' "$1")" '$1 == last - 1 { print $2 }' |
		sed -E 's/^([a-z0-9_]+)\(([^,)]*).*/\1 \2/'
}

# A compositor fed a new shm pool per buffer: recvmsg, mmap, close and
# munmap of each.  The library asks each question of a descriptor once:
# the received file's identity at recvmsg (statx), the decision at mmap
# (statx, of the O_PATH descriptor it keeps, since the program closes its
# own at once: open_tree, F_DUPFD_CLOEXEC, close), and at munmap its
# descriptor let go after checking it is still its own (F_GETFL, fstat,
# close).  Before, statx was asked twice of the program's descriptor, and
# the close cost getpid, open_tree, fstat, F_DUPFD_CLOEXEC and close.
@test "a received pool's recvmsg, mmap, close and munmap ask each question once" {
	local log=$BATS_TEST_TMPDIR/strace.log bare=$BATS_TEST_TMPDIR/bare.log cycle extra dups
	command -v strace >/dev/null || skip "strace is not installed (Debian: apt install strace)"
	strace -qq -o /dev/null true 2>/dev/null ||
		skip "strace cannot trace here (ptrace not permitted)"
	run -0 "$POOL" 1
	[ "$output" = "unique-mount-ids yes" ] ||
		skip "statx gives no unique mount IDs here (Linux 6.8): the decision takes more calls"
	run -0 strace -qq -o "$bare" "$POOL" 4
	run -0 strace -qq -o "$log" -E LD_PRELOAD="$NSB_PRELOAD" "$POOL" 4
	cycle=$(last_cycle "$log")
	# The program's own four calls are there, in both.
	assert_equal "$(last_cycle "$bare" | cut -d' ' -f1 | tr '\n' ' ')" "recvmsg mmap close munmap "
	for call in recvmsg mmap close munmap; do
		grep -q "^$call " <<<"$cycle" || fail "no $call in the cycle: $cycle"
	done
	# No question asked twice of one descriptor.
	dups=$(sort <<<"$cycle" | uniq -d)
	[ -z "$dups" ] || fail "asked twice: $dups (the cycle: $cycle)"
	# No pid or tid asked.
	! grep -qE '^(getpid|gettid) ' <<<"$cycle" || fail "getpid or gettid in the cycle: $cycle"
	# At most 8 calls more than without the library.
	extra=$(($(wc -l <<<"$cycle") - $(last_cycle "$bare" | wc -l)))
	[ "$extra" -le 8 ] || fail "$extra calls more than without the library: $cycle"
}

# The calls of the last pool cycle in the strace log $1 by kind, one a
# line, sorted: the name, and for fcntl its command ("fcntl F_GETFL").
cycle_kinds() {
	local LC_ALL=C
	awk '/^getppid\(/ { n++; next } { print n "\t" $0 }' "$1" |
		awk -F '\t' -v last="$(grep -c '^getppid(' "$1")" '$1 == last - 1 { print $2 }' |
		sed -E -e 's/^fcntl\([^,]*, (F_[A-Z_]+).*/fcntl \1/' -e 's/^([a-z0-9_]+)\(.*/\1/' | sort
}

# The same cycle, pinned by kind: each call the library adds answers one
# question no other call answers (doc/performance.md, "A received pool's
# eight calls"), so what it adds must stay within exactly these, each at
# most this often - a duplicate re-added (a second statx of the program's
# descriptor at mmap, an F_GET_SEALS, a getpid), or any call of a new
# kind, fails here even where the total stays at eight:
#   statx            at recvmsg, the identity of what arrived; at mmap,
#                    the decision on the O_PATH descriptor
#   open_tree        the O_PATH descriptor of the file the number names
#   fcntl F_DUPFD_CLOEXEC, close   kept at a number from the top, the
#                    one open_tree gave closed
#   fcntl F_GETFL, fstat, close    at munmap, still its own, let go
# The same eight as on a kernel without unique mount IDs (before Linux
# 6.8, NSB_TEST_MNT_ID=plain), where the decision was asked of the
# program's descriptor (F_GET_SEALS, a second statx of it) and the
# descriptor kept at its close (open_tree, fstat, F_DUPFD_CLOEXEC,
# close): ten calls.  And every kind is one the man page names under
# Sandboxes (SPEC §12: a filter that kills on a call not listed there
# must not meet it).
@test "a received pool's calls are the listed ones, none of them twice more" {
	local log=$BATS_TEST_TMPDIR/strace.log bare=$BATS_TEST_TMPDIR/bare.log added allowed extra
	local sandboxes kind mnt unique LC_ALL=C
	command -v strace >/dev/null || skip "strace is not installed (Debian: apt install strace)"
	strace -qq -o /dev/null true 2>/dev/null ||
		skip "strace cannot trace here (ptrace not permitted)"
	run -0 "$POOL" 1
	unique=$output
	run -0 strace -qq -o "$bare" "$POOL" 4
	assert_equal "$(cycle_kinds "$bare" | tr '\n' ' ')" "close mmap munmap recvmsg "
	allowed=$(printf '%s\n' statx statx open_tree "fcntl F_DUPFD_CLOEXEC" close \
		"fcntl F_GETFL" fstat close | sort)
	sandboxes=$(awk '/^\.SS Sandboxes/ { on = 1; next } on && /^\.SS / { exit } on' \
		"$NSB_SOURCE_ROOT/man/libnosigbus.7.in")
	for mnt in "" plain; do
		# Without unique mount IDs, what this kernel gives is tested
		# only with plain (the empty value asks the kernel).
		if [ -z "$mnt" ] && [ "$unique" != "unique-mount-ids yes" ]; then
			continue
		fi
		NSB_TEST_MNT_ID=$mnt run -0 strace -qq -o "$log" -E LD_PRELOAD="$NSB_PRELOAD" \
			"$POOL" 4
		# What the library adds: the cycle less the program's own four.
		added=$(comm -23 <(cycle_kinds "$log") <(cycle_kinds "$bare"))
		extra=$(comm -23 <(printf '%s\n' "$added") <(printf '%s\n' "$allowed"))
		[ -z "$extra" ] ||
			fail "NSB_TEST_MNT_ID=$mnt: calls beyond the pool's floor: $(tr '\n' ' ' <<<"$extra")(added: $(tr '\n' ' ' <<<"$added"))"
		for kind in $(cut -d' ' -f1 <<<"$added" | sort -u); do
			grep -qE "^\.BR? $kind( |\$)" <<<"$sandboxes" ||
				fail "$kind is not among the calls libnosigbus(7) lists under Sandboxes"
		done
	done
}

# The mount memfds live on is learnt once, from a memfd of the library's
# own (policy.c, memfd_mount), where statx gives no unique mount IDs.  A
# first memfd decided on with every descriptor number taken cannot make
# it (EMFILE): that is asked again by the next decision, not kept as "no
# mount known", which cost every later memfd decision an fstatfs.
@test "a memfd first decided on with every number taken costs later pools nothing more" {
	local log=$BATS_TEST_TMPDIR/strace.log full=$BATS_TEST_TMPDIR/full.log
	command -v strace >/dev/null || skip "strace is not installed (Debian: apt install strace)"
	strace -qq -o /dev/null true 2>/dev/null ||
		skip "strace cannot trace here (ptrace not permitted)"
	NSB_TEST_MNT_ID=plain run -0 strace -qq -o "$log" -E LD_PRELOAD="$NSB_PRELOAD" "$POOL" 4
	NSB_TEST_MNT_ID=plain run -0 strace -qq -o "$full" -E LD_PRELOAD="$NSB_PRELOAD" \
		"$POOL" 4 full
	! cycle_kinds "$full" | grep -q '^fstatfs' ||
		fail "an fstatfs in a later pool's cycle: $(cycle_kinds "$full" | tr '\n' ' ')"
	assert_equal "$(cycle_kinds "$full" | tr '\n' ' ')" "$(cycle_kinds "$log" | tr '\n' ' ')"
}

# A process whose only handlers are for its own faults (SIGSEGV and SIGBUS,
# as Rust's std installs) takes the table lock without blocking signals:
# a protected memfd's mmap+munmap makes no rt_sigprocmask, as in a process
# with no handler.  With a handler of a signal another thread may send to
# stop it (SIGUSR1: garbage collectors), the lock blocks signals (SPEC §5).
@test "a process with only fault handlers pays no rt_sigprocmask per mapping call" {
	local nested=$NSB_BUILD_ROOT/tests/core/core-nested log=$BATS_TEST_TMPDIR/strace.log kind n
	command -v strace >/dev/null || skip "strace is not installed (Debian: apt install strace)"
	strace -qq -o /dev/null true 2>/dev/null ||
		skip "strace cannot trace here (ptrace not permitted)"
	for kind in none fault async; do
		run -0 strace -qq -o "$log" "$nested" pairs 4 "$kind"
		assert_output "ok: 4 pairs with $kind handlers"
		n=$(last_cycle "$log" | grep -c '^rt_sigprocmask ' || true)
		case $kind in
		async) [ "$n" -ge 2 ] || fail "$kind: $n rt_sigprocmask in a pair (the lock must block signals)" ;;
		*) [ "$n" -eq 0 ] || fail "$kind: $n rt_sigprocmask in a pair: $(last_cycle "$log")" ;;
		esac
		# The pair itself is there.
		last_cycle "$log" | grep -q '^munmap ' || fail "$kind: no munmap in the last pair"
	done
}
