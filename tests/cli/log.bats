#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2154 # run --separate-stderr sets stderr and stderr_lines
#
# What the library prints: nothing by default, one line per rescue and a
# summary with NOSIGBUS_LOG=1, exactly one warning line per invalid
# NOSIGBUS_* value.

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

@test "-v: one line per rescue with pid, address, path, fill; a summary at exit" {
	local pid
	run -0 --separate-stderr wrapper -v -p files "$MAP" "$DISK/f" 3 pid trunc=1 read=1 read=2
	pid=$(pid_of_output)
	assert_equal "${#stderr_lines[@]}" 3
	[[ ${stderr_lines[0]} =~ $(rescue_re "$pid" "$DISK/f" page 1) ]] ||
		fail "rescue line: ${stderr_lines[0]}"
	[[ ${stderr_lines[1]} =~ $(rescue_re "$pid" "$DISK/f" page 1) ]] ||
		fail "rescue line: ${stderr_lines[1]}"
	assert_equal "${stderr_lines[2]}" "$(summary_line "$pid" 2 2 0)"
}

@test "the logged address is inside the page that faulted" {
	local pid addr1 addr2 page
	page=$(page_size)
	run -0 --separate-stderr wrapper -v -p files "$MAP" "$DISK/f" 3 pid trunc=0 read=0 read=2
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

@test "NOSIGBUS_LOG accepts the boolean words, in any case" {
	local v
	for v in 1 yes true on YES On; do
		NOSIGBUS_LOG=$v run -0 --separate-stderr "$MAP" memfd 1
		[ "${#stderr_lines[@]}" = 0 ] || fail "NOSIGBUS_LOG=$v without the library"
		NOSIGBUS_LOG=$v LD_PRELOAD=$NSB_PRELOAD run -0 --separate-stderr "$MAP" memfd 1 pid
		assert_equal "${#stderr_lines[@]}" 1
		assert_equal "${stderr_lines[0]}" "$(summary_line "$(pid_of_output)" 0 0 0)"
	done
	for v in 0 no false off NO ''; do
		NOSIGBUS_LOG=$v LD_PRELOAD=$NSB_PRELOAD run -0 --separate-stderr "$MAP" memfd 1
		assert_equal "$stderr" ''
	done
}

@test "an invalid value: exactly one warning line, and the default" {
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_FILL=xyz run -0 --separate-stderr "$MAP" memfd 1
	assert_equal "$stderr" 'nosigbus: ignoring NOSIGBUS_FILL=xyz (expected page or range); using page'
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_POLICY=everything run -135 --separate-stderr \
		"$MAP" memfd 1 trunc=0 read=0
	assert_equal "$stderr" 'nosigbus: ignoring NOSIGBUS_POLICY=everything (expected flag, shm or files); using flag'
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_STRICT=2 run -0 --separate-stderr "$MAP" --flag memfd 1
	assert_equal "$stderr" 'nosigbus: ignoring NOSIGBUS_STRICT=2 (expected 0 or 1); using 0'
	LD_PRELOAD=$NSB_PRELOAD NOSIGBUS_LOG=maybe run -0 --separate-stderr "$MAP" memfd 1
	assert_equal "$stderr" 'nosigbus: ignoring NOSIGBUS_LOG=maybe (expected 0 or 1); using 0'
}

@test "invalid values through the wrapper: one line per variable" {
	NOSIGBUS_FILL=xyz NOSIGBUS_STRICT=2 run -0 --separate-stderr wrapper "$MAP" memfd 1
	assert_equal "${#stderr_lines[@]}" 2
	assert_output ''
	assert_equal "${stderr_lines[0]}" 'nosigbus: ignoring NOSIGBUS_FILL=xyz (expected page or range); using page'
	assert_equal "${stderr_lines[1]}" 'nosigbus: ignoring NOSIGBUS_STRICT=2 (expected 0 or 1); using 0'
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
