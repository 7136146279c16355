#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Third-party stress (issue 7, item 4): Debian's stress-ng stressors that
# exercise the interposed mapping calls and signals, each run three times:
# without the library, preloaded with the default policy, and preloaded with
# NOSIGBUS_POLICY=files.  All three must end alike: the same exit status,
# stress-ng's "successful run completed", no failure reported by its own
# checks (--verify, --metrics-brief), and nothing printed by the library.
#
# Bogo-op limits keep each run short and deterministic.  Stressors that
# size themselves from the free memory (mmapfork's 32 children populate
# half of it) see at most 256 MiB through fake-sysinfo.so
# (NSB_FAKE_SYSINFO), in all three runs alike.  Every run has a hard time
# limit: a hang shows as exit 124, and as a difference.
#
# Usage: stress-ng.sh [STRESSOR...]   (NSB_PRELOAD names the library)
set -u

: "${NSB_PRELOAD:?NSB_PRELOAD is not set (run through meson test)}"
if ! command -v stress-ng >/dev/null 2>&1; then
	echo "SKIP: stress-ng is not installed (Debian package stress-ng)"
	exit 77
fi
if [ ! -r "$NSB_PRELOAD" ]; then
	echo "FAIL: the library $NSB_PRELOAD is not there"
	exit 1
fi

# Stressor and its options, one per line.
stressors='
mmap       --mmap-ops 100 --mmap-bytes 1M --mmap-file --mmap-mprotect
mmapaddr   --mmapaddr-ops 20000
mmapfixed  --mmapfixed-ops 40
mmapfork   --mmapfork-ops 8
mmapmany   --mmapmany-ops 10000
mremap     --mremap-ops 200 --mremap-bytes 4M
munmap     --munmap-ops 5000
mprotect   --mprotect-ops 20000
madvise    --madvise-ops 20
msync      --msync-ops 200 --msync-bytes 1M
memfd      --memfd-ops 200 --memfd-bytes 4M --memfd-fds 16
dev-shm    --dev-shm-ops 6
shm        --shm-ops 20
fork       --fork-ops 1000
vfork      --vfork-ops 2000
clone      --clone-ops 300
signal     --signal-ops 20000
signest    --signest-ops 20000
sigpending --sigpending-ops 20000
sigsuspend --sigsuspend-ops 5000
sigsegv    --sigsegv-ops 20000
sigfd      --sigfd-ops 20000
sigq       --sigq-ops 20000
sigrt      --sigrt-ops 5000
stackmmap  --stackmmap-ops 20
'

# stress-ng's temporary files (mmap --mmap-file, msync) on tmpfs when
# possible: faster, and the default policy would not protect disk files
# anyway.
tmp=$(mktemp -d /dev/shm/nsb-stress-XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
fake=${NSB_FAKE_SYSINFO:+:$NSB_FAKE_SYSINFO}
limit=60
# shellcheck disable=SC3045 # dash and bash have it; elsewhere cores are harmless
ulimit -c 0 2>/dev/null || true

# run VARIANT STRESSOR OPTIONS...: prints "STATUS VERDICT" and keeps the log.
run() {
	variant=$1
	shift
	name=$1
	shift
	log="$tmp/$name.$variant.log"
	case $variant in
	nolib) env -u NOSIGBUS_POLICY -u NOSIGBUS_FILL -u NOSIGBUS_STRICT -u NOSIGBUS_LOG \
		LD_PRELOAD="${LD_PRELOAD:-}$fake" \
		timeout -k 10 "$limit" stress-ng --temp-path "$tmp" --"$name" 1 "$@" --verify \
		--metrics-brief >"$log" 2>&1 ;;
	flag) env -u NOSIGBUS_POLICY -u NOSIGBUS_FILL -u NOSIGBUS_STRICT -u NOSIGBUS_LOG \
		LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$NSB_PRELOAD$fake" \
		timeout -k 10 "$limit" stress-ng --temp-path "$tmp" --"$name" 1 "$@" --verify \
		--metrics-brief >"$log" 2>&1 ;;
	files) env -u NOSIGBUS_FILL -u NOSIGBUS_STRICT -u NOSIGBUS_LOG NOSIGBUS_POLICY=files \
		LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$NSB_PRELOAD$fake" \
		timeout -k 10 "$limit" stress-ng --temp-path "$tmp" --"$name" 1 "$@" --verify \
		--metrics-brief >"$log" 2>&1 ;;
	esac
	status=$?
	verdict=ok
	if ! grep -q 'successful run completed' "$log" || grep -q 'unsuccessful run' "$log"; then
		verdict="no-success-line"
	fi
	if grep -Eq '(^|: )(fail|error):|[1-9][0-9]* failed' "$log"; then
		verdict="failures-reported"
	fi
	if [ "$variant" != nolib ] && grep -q '^nosigbus: ' "$log"; then
		verdict="library-printed"
	fi
	echo "$status $verdict"
}

# The comparison means nothing unless the library really is in stress-ng:
# its constructor warns once about an invalid NOSIGBUS_LOG.  (The summary
# at exit comes only from a process that rescued something.)
loaded=$(env NOSIGBUS_LOG=probe LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$NSB_PRELOAD$fake" \
	timeout -k 10 "$limit" stress-ng --temp-path "$tmp" --fork 1 --fork-ops 10 2>&1 |
	grep -c '^nosigbus: ignoring NOSIGBUS_LOG=probe ')
if [ "$loaded" -lt 1 ]; then
	echo "FAIL: the library does not load into stress-ng (no warning about NOSIGBUS_LOG=probe)"
	exit 1
fi
echo "stress-ng: $(stress-ng --version); the library loads into it"

want=${*:-}
count=0
failed=0
start=$(date +%s)
echo "0 0" >"$tmp/summary"
echo "$stressors" | while read -r name opts; do
	[ -n "$name" ] || continue
	if [ -n "$want" ]; then
		case " $want " in
		*" $name "*) ;;
		*) continue ;;
		esac
	fi
	# shellcheck disable=SC2086 # $opts is a list of options
	base=$(run nolib "$name" $opts)
	# shellcheck disable=SC2086
	flag=$(run flag "$name" $opts)
	# shellcheck disable=SC2086
	files=$(run files "$name" $opts)
	count=$((count + 1))
	if [ "$base" = "0 ok" ] && [ "$flag" = "$base" ] && [ "$files" = "$base" ]; then
		printf 'ok %2d %-10s %s: exit 0 without the library, preloaded, and with policy files\n' \
			"$count" "$name" "$opts"
	else
		failed=$((failed + 1))
		printf 'FAIL %2d %-10s %s\n     without the library: exit %s\n     preloaded:           exit %s\n     NOSIGBUS_POLICY=files: exit %s\n' \
			"$count" "$name" "$opts" "$base" "$flag" "$files"
		for v in nolib flag files; do
			echo "     --- $v log:"
			grep -Ev '^stress-ng: (metrc|info): .*(stressor +bogo|\(secs\))' "$tmp/$name.$v.log" |
				tail -n 15 | sed 's/^/     /'
		done
	fi
	echo "$count $failed" >"$tmp/summary"
done
read -r count failed <"$tmp/summary"
echo "stress-ng: $count stressors, 3 runs each ($((count * 3)) runs), $failed failed, $(($(date +%s) - start)) s"
[ "$failed" -eq 0 ]
