#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run --separate-stderr sets stderr and stderr_lines
# shellcheck disable=SC2016 # sh -c scripts, expanded by that sh
#
# What the library prints: nothing by default; with NOSIGBUS_LOG=1 a
# mapping's first rescue, its count at most once a second, a line when it
# is unmapped, and a summary from each process that rescued something
# (NOSIGBUS_LOG=pages: a line per rescue); exactly one warning line per
# invalid NOSIGBUS_* value.

load common

setup() {
	make_disk_dir
}

teardown() {
	remove_dirs
}

# nosigbus: PROG[PID]: rescued 0xADDR in PATH (fill=FILL, N page(s))
rescue_re() {
	local pid=$1 path=$2 fill=$3 pages=$4
	printf '^nosigbus: nsb-cli-map\\[%s\\]: rescued 0x[0-9a-f]+ in %s \\(fill=%s, %s pages?\\)$' \
		"$pid" "$path" "$fill" "$pages"
}

summary_line() {
	printf 'nosigbus: nsb-cli-map[%s]: %s rescues, %s pages replaced, %s failures' "$@"
}

pid_of_output() {
	local line
	for line in "${lines[@]}"; do
		case $line in "pid: "*) printf '%s' "${line#pid: }"; return ;; esac
	done
	fail "no pid in: $output"
}

@test "nothing on stderr by default, even when rescuing" {
	run -0 --separate-stderr wrapper -p files "$MAP" "$DISK/f" 2 trunc=0 read=0 read=1
	assert_output "$(printf 'page 0: zeros\npage 1: zeros')"
	assert_equal "$stderr" ''
	NOSIGBUS_LOG=0 run -0 --separate-stderr wrapper -p files "$MAP" "$DISK/f" 2 trunc=0 read=0
	assert_equal "$stderr" ''
}

@test "-v: a mapping's first rescue with pid, address, path, fill; a summary at exit" {
	local pid
	run -0 --separate-stderr wrapper -v -p files "$MAP" "$DISK/f" 3 pid trunc=1 read=1 read=2
	pid=$(pid_of_output)
	# read=2 comes well within the second after read=1 (the deadline of
	# the next line), or else it is a count line: either is right.
	[[ ${stderr_lines[0]} =~ $(rescue_re "$pid" "$DISK/f" page 1) ]] ||
		fail "rescue line: ${stderr_lines[0]}"
	if [ "${#stderr_lines[@]}" = 3 ]; then
		assert_equal "${stderr_lines[1]}" \
			"nosigbus: nsb-cli-map[$pid]: rescued 1 more page in $DISK/f (2 pages in 2 faults so far)"
	else
		assert_equal "${#stderr_lines[@]}" 2
	fi
	assert_equal "${stderr_lines[-1]}" "$(summary_line "$pid" 2 2 0)"
}

@test "NOSIGBUS_LOG=pages: one line per rescue, and -v keeps it" {
	local pid
	NOSIGBUS_LOG=pages run -0 --separate-stderr wrapper -v -p files "$MAP" "$DISK/f" 3 pid \
		trunc=1 read=1 read=2 unmap
	pid=$(pid_of_output)
	assert_equal "${#stderr_lines[@]}" 4
	[[ ${stderr_lines[0]} =~ $(rescue_re "$pid" "$DISK/f" page 1) ]] ||
		fail "rescue line: ${stderr_lines[0]}"
	[[ ${stderr_lines[1]} =~ $(rescue_re "$pid" "$DISK/f" page 1) ]] ||
		fail "rescue line: ${stderr_lines[1]}"
	assert_equal "${stderr_lines[2]}" \
		"nosigbus: nsb-cli-map[$pid]: unmapped $DISK/f: 2 pages rescued in 2 faults"
	assert_equal "${stderr_lines[3]}" "$(summary_line "$pid" 2 2 0)"
}

# Issue 22: one 4K buffer was 8 100 lines.  The first rescue of a mapping,
# then at most one line a second with the count, one when it is unmapped.
@test "-v: at most one count line a second per mapping, and its last line when unmapped" {
	local pid start end elapsed counts line
	start=$(date +%s%N)
	run -0 --separate-stderr wrapper -v -f page "$MAP" memfd 3000 pid trunc=0 read-all unmap
	end=$(date +%s%N)
	pid=$(pid_of_output)
	elapsed=$(((end - start) / 1000000000))
	[[ ${stderr_lines[0]} =~ $(rescue_re "$pid" '/memfd:nsb-cli \(deleted\)' page 1) ]] ||
		fail "first line: ${stderr_lines[0]}"
	counts=0
	for line in "${stderr_lines[@]:1:${#stderr_lines[@]}-3}"; do
		[[ $line =~ ^nosigbus:\ nsb-cli-map\[$pid\]:\ rescued\ [0-9]+\ more\ pages?\ in\ /memfd:nsb-cli\ \(deleted\)\ \([0-9]+\ pages\ in\ [0-9]+\ faults\ so\ far\)$ ]] ||
			fail "not a count line: $line"
		counts=$((counts + 1))
	done
	# A second apart at least: no more of them than whole seconds the
	# run took, plus one.
	[ "$counts" -le $((elapsed + 1)) ] || fail "$counts count lines in ${elapsed}s"
	assert_equal "${stderr_lines[-2]}" \
		"nosigbus: nsb-cli-map[$pid]: unmapped /memfd:nsb-cli (deleted): 3000 pages rescued in 3000 faults"
	assert_equal "${stderr_lines[-1]}" "$(summary_line "$pid" 3000 3000 0)"
}

@test "-v: a count line once a second has passed, with what the lines before did not count" {
	local pid
	run -0 --separate-stderr wrapper -v -f page "$MAP" memfd 4 pid trunc=0 read=0 read=1 \
		sleep-ms=1100 read=2 unmap
	pid=$(pid_of_output)
	[[ ${stderr_lines[0]} =~ $(rescue_re "$pid" '/memfd:nsb-cli \(deleted\)' page 1) ]] ||
		fail "first line: ${stderr_lines[0]}"
	# read=1 was counted by a line of its own (if it came a second after
	# read=0) or is counted now.
	run -0 printf '%s\n' "${stderr_lines[@]}"
	assert_line --regexp "^nosigbus: nsb-cli-map\[$pid\]: rescued [12] more pages? in /memfd:nsb-cli \(deleted\) \(3 pages in 3 faults so far\)$"
	assert_line --index $((${#lines[@]} - 2)) \
		"nosigbus: nsb-cli-map[$pid]: unmapped /memfd:nsb-cli (deleted): 3 pages rescued in 3 faults"
}

@test "-v: a fork child's first rescue in an inherited mapping is a first line of its own" {
	local pid child
	run -0 --separate-stderr wrapper -v -f page "$MAP" memfd 3 pid trunc=0 read=0 fork-read=1
	pid=$(pid_of_output)
	child=$(printf '%s\n' "${lines[@]}" | sed -n 's/^child pid: //p')
	[ -n "$child" ] || fail "no child pid in: $output"
	assert_equal "${#stderr_lines[@]}" 4
	[[ ${stderr_lines[0]} =~ $(rescue_re "$pid" '/memfd:nsb-cli \(deleted\)' page 1) ]] ||
		fail "the parent's first line: ${stderr_lines[0]}"
	[[ ${stderr_lines[1]} =~ $(rescue_re "$child" '/memfd:nsb-cli \(deleted\)' page 1) ]] ||
		fail "the child's first line: ${stderr_lines[1]}"
	assert_equal "${stderr_lines[2]}" "$(summary_line "$child" 1 1 0)"
	assert_equal "${stderr_lines[3]}" "$(summary_line "$pid" 1 1 0)"
}

@test "the logged address is inside the page that faulted" {
	local pid addr1 addr2 page
	page=$(page_size)
	NOSIGBUS_LOG=pages run -0 --separate-stderr wrapper -p files "$MAP" "$DISK/f" 3 pid \
		trunc=0 read=0 read=2
	pid=$(pid_of_output)
	addr1=${stderr_lines[0]#*rescued 0x}
	addr1=$((0x${addr1%% *}))
	addr2=${stderr_lines[1]#*rescued 0x}
	addr2=$((0x${addr2%% *}))
	# read=P touches byte 0 of page P first: two pages apart, page aligned.
	assert_equal "$((addr2 - addr1))" "$((2 * page))"
	assert_equal "$((addr1 % page))" 0
}

@test "-v with fill=range: one line for the whole tail" {
	local pid
	run -0 --separate-stderr wrapper -v -p shm -f range "$MAP" memfd 4 pid trunc=0 read=1 read=3
	pid=$(pid_of_output)
	assert_equal "${#stderr_lines[@]}" 2
	[[ ${stderr_lines[0]} =~ $(rescue_re "$pid" '/memfd:nsb-cli \(deleted\)' range 3) ]] ||
		fail "rescue line: ${stderr_lines[0]}"
	assert_equal "${stderr_lines[1]}" "$(summary_line "$pid" 1 3 0)"
}

# Issue 24: without NOSIGBUS_FILL, a memfd the policy protects gets range
# fill (a compositor's hostile client costs one signal a frame), one mapped
# with MAP_NOSIGBUS page fill (the kernel patch's semantics), and a given
# NOSIGBUS_FILL applies to both.
@test "the default fill: range for a memfd the policy protects, page for MAP_NOSIGBUS" {
	local pid
	run -0 --separate-stderr wrapper -v "$MAP" memfd 4 pid trunc=0 read=1 read=3
	pid=$(pid_of_output)
	assert_equal "${#stderr_lines[@]}" 2
	[[ ${stderr_lines[0]} =~ $(rescue_re "$pid" '/memfd:nsb-cli \(deleted\)' range 3) ]] ||
		fail "policy, default fill: ${stderr_lines[0]}"
	NOSIGBUS_LOG=pages run -0 --separate-stderr wrapper "$MAP" --flag memfd 4 pid trunc=0 \
		read=1 read=3
	pid=$(pid_of_output)
	assert_equal "${#stderr_lines[@]}" 3
	[[ ${stderr_lines[0]} =~ $(rescue_re "$pid" '/memfd:nsb-cli \(deleted\)' page 1) ]] ||
		fail "MAP_NOSIGBUS, default fill: ${stderr_lines[0]}"
	NOSIGBUS_LOG=pages run -0 --separate-stderr wrapper -f page "$MAP" memfd 4 pid trunc=0 \
		read=1 read=3
	pid=$(pid_of_output)
	assert_equal "${#stderr_lines[@]}" 3
	[[ ${stderr_lines[1]} =~ $(rescue_re "$pid" '/memfd:nsb-cli \(deleted\)' page 1) ]] ||
		fail "policy, NOSIGBUS_FILL=page: ${stderr_lines[1]}"
}

@test "NOSIGBUS_LOG accepts the boolean words and pages, in any case" {
	local v pid
	for v in 1 yes true on YES On pages Pages; do
		NOSIGBUS_LOG=$v run -0 --separate-stderr "$MAP" memfd 1
		[ "${#stderr_lines[@]}" = 0 ] || fail "NOSIGBUS_LOG=$v without the library"
		# Page fill: a memfd the policy protects has range fill by default.
		NOSIGBUS_FILL=page NOSIGBUS_LOG=$v LD_PRELOAD=$NSB_PRELOAD run -0 --separate-stderr \
			"$MAP" memfd 1 pid trunc=0 read=0
		pid=$(pid_of_output)
		assert_equal "${#stderr_lines[@]}" 2
		[[ ${stderr_lines[0]} =~ $(rescue_re "$pid" '/memfd:nsb-cli \(deleted\)' page 1) ]] ||
			fail "NOSIGBUS_LOG=$v: ${stderr_lines[0]}"
		assert_equal "${stderr_lines[1]}" "$(summary_line "$pid" 1 1 0)"
	done
	for v in 0 no false off NO ''; do
		NOSIGBUS_LOG=$v LD_PRELOAD=$NSB_PRELOAD run -0 --separate-stderr \
			"$MAP" memfd 1 trunc=0 read=0
		assert_equal "$stderr" ''
	done
}

# Issue 14 item 6: a process tree of shells and helpers must not print a
# line of zeros per process.
@test "-v: no exit summary from a process that rescued nothing" {
	run -0 --separate-stderr wrapper -v "$MAP" memfd 2 stats
	assert_equal "$stderr" ''
	# Nor from its children, nor from programs it runs.
	run -0 --separate-stderr wrapper -v sh -c '"$MAP" memfd 1 fork fork; "$MAP" memfd 1 read=0'
	assert_equal "$stderr" ''
	# Logging is on all the same: the first rescue shows.
	run -0 --separate-stderr wrapper -v sh -c '"$MAP" memfd 1; "$MAP" memfd 2 pid trunc=1 read=1'
	assert_equal "${#stderr_lines[@]}" 2
	assert_equal "${stderr_lines[1]}" "$(summary_line "$(pid_of_output)" 1 1 0)"
}

# Issue 14 item 7: each process reports what it did itself, so the lines
# of a process tree add up.
@test "-v: forked children report their own rescues, not their parent's" {
	local pid
	NOSIGBUS_LOG=pages run -0 --separate-stderr wrapper -f page "$MAP" memfd 3 pid trunc=0 \
		read=0 read=1 fork fork-read=2 fork
	pid=$(pid_of_output)
	# The children's counters start from zero (nosigbus_get_stats too).
	run -0 printf '%s\n' "${lines[@]}"
	assert_line --index 3 --regexp '^child pid: [0-9]+$'
	assert_line --index 4 'stats: rescues=0 pages=0 failures=0 mappings=1'
	assert_line --index 6 'page 2: zeros'
	assert_line --index 7 'stats: rescues=1 pages=1 failures=0 mappings=1'
	assert_line --index 9 'stats: rescues=0 pages=0 failures=0 mappings=1'
	local child=${lines[5]#child pid: }
	# Three rescue lines, and two summaries: the parent's 2 and the
	# second child's 1; the other children rescued nothing.
	assert_equal "${#stderr_lines[@]}" 5
	[[ ${stderr_lines[2]} =~ $(rescue_re "$child" '/memfd:nsb-cli \(deleted\)' page 1) ]] ||
		fail "the child's rescue: ${stderr_lines[2]}"
	assert_equal "${stderr_lines[3]}" "$(summary_line "$child" 1 1 0)"
	assert_equal "${stderr_lines[4]}" "$(summary_line "$pid" 2 2 0)"
	# The issue's case: 2 rescues, then 3 forks: one line of 2 rescues.
	run -0 --separate-stderr wrapper -v -f page "$MAP" memfd 2 pid trunc=0 read=0 read=1 fork fork fork
	run -0 printf '%s\n' "${stderr_lines[@]}"
	assert_equal "$(grep -c ' rescues, ' <<<"$output")" 1
	assert_line --index $((${#lines[@]} - 1)) --regexp '^nosigbus: nsb-cli-map\[[0-9]+\]: 2 rescues, 2 pages replaced, 0 failures$'
}

@test "an invalid value: exactly one warning line, and the default" {
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_FILL=xyz run -0 --separate-stderr "$MAP" memfd 1
	assert_equal "$stderr" 'nosigbus: ignoring NOSIGBUS_FILL=xyz (expected page, range or auto); using the default'
	# The default policy, shm: the memfd is protected.
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_POLICY=everything run -0 --separate-stderr \
		"$MAP" memfd 1 trunc=0 read=0
	assert_output 'page 0: zeros'
	assert_equal "$stderr" 'nosigbus: ignoring NOSIGBUS_POLICY=everything (expected flag, shm or files); using shm'
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_ERRORS=ignore run -0 --separate-stderr "$MAP" memfd 1
	assert_equal "$stderr" 'nosigbus: ignoring NOSIGBUS_ERRORS=ignore (expected pass, peer or zero); using peer'
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_STRICT=2 run -0 --separate-stderr "$MAP" --flag memfd 1
	assert_equal "$stderr" 'nosigbus: ignoring NOSIGBUS_STRICT=2 (expected 0 or 1); using 0'
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_LOG=maybe run -0 --separate-stderr "$MAP" memfd 1
	assert_equal "$stderr" 'nosigbus: ignoring NOSIGBUS_LOG=maybe (expected 0, 1 or pages); using 0'
}

# Issue 14 item 8: one rule for the wrapper and the library.
@test "the library reads every value in any case, as the wrapper does" {
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_POLICY=FILES run -0 --separate-stderr \
		"$MAP" "$DISK/f" 2 trunc=0 read=1
	assert_output 'page 1: zeros'
	assert_equal "$stderr" ''
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_POLICY=Flag run -135 --separate-stderr \
		"$MAP" memfd 2 trunc=0 read=1
	assert_equal "$stderr" ''
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_FILL=RANGE run -0 --separate-stderr \
		"$MAP" memfd 4 trunc=0 read=1 stats
	assert_line --regexp '^stats: rescues=1 pages=3 '
	assert_equal "$stderr" ''
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_FILL=Auto NOSIGBUS_ERRORS=ZERO NOSIGBUS_STRICT=Off \
		run -0 --separate-stderr "$MAP" memfd 1
	assert_equal "$stderr" ''
}

# Issue 23: the wrapper does not pass on what the library would ignore in
# every process of the tree (one warning each); see options.bats.
@test "invalid values through the wrapper: a usage error, nothing run" {
	NOSIGBUS_FILL=xyz NOSIGBUS_STRICT=2 run -2 --separate-stderr wrapper "$MAP" memfd 1
	assert_output ''
	assert_equal "${#stderr_lines[@]}" 2
	assert_equal "${stderr_lines[0]}" 'nosigbus: invalid NOSIGBUS_FILL=xyz (expected page, range or auto)'
}

@test "a hostile value still gives one short line" {
	local long nl
	long=$(printf 'A%.0s' $(seq 1 5000))
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_FILL=$long run -0 --separate-stderr "$MAP" memfd 1
	assert_equal "${#stderr_lines[@]}" 1
	[ "${#stderr}" -lt 200 ] || fail "a ${#stderr}-byte warning"
	assert_equal "${stderr:0:38}" 'nosigbus: ignoring NOSIGBUS_FILL=AAAAA'
	# A newline in the value must not make a second line.
	nl=$(printf 'page\nnosigbus: forged line')
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_FILL=$nl run -0 --separate-stderr "$MAP" memfd 1
	assert_equal "${#stderr_lines[@]}" 1
}
