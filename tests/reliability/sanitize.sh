#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The preload tests once more, with a library built with sanitizers
# (issue 7, item 3): the model test, the concurrency stress, the limits, the
# sent-SIGBUS and the environment fuzz, short, each a process tree in which
# the sanitized library is preloaded after the sanitizer runtime.  Any
# sanitizer report fails (UBSan halts on its first error; ASan always does).
#
# Only meaningful in a sanitized build:
#   meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false
#   meson test -C build-asan --suite sanitize
set -u

: "${NSB_PRELOAD:?}" "${NSB_REL_DIR:?}"
case ${NSB_SANITIZE:-none} in
none)
	echo "SKIP: this build is not sanitized (b_sanitize=none); use a build set up with" \
		"-Db_sanitize=address,undefined -Db_lundef=false"
	exit 77 ;;
esac
case $NSB_SANITIZE in
*address*)
	if [ -z "${NSB_ASAN_RUNTIME:-}" ] || [ ! -r "$NSB_ASAN_RUNTIME" ]; then
		echo "SKIP: the ASan runtime was not found (cc -print-file-name=libasan.so)"
		exit 77
	fi
	# First, or ASan refuses to start (google/sanitizers#786).
	LD_PRELOAD=$NSB_ASAN_RUNTIME
	export LD_PRELOAD ;;
esac
ASAN_OPTIONS=${NSB_ASAN_OPTIONS:-handle_segv=0:handle_sigbus=0}
UBSAN_OPTIONS=${NSB_UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS UBSAN_OPTIONS

echo "sanitize: b_sanitize=$NSB_SANITIZE, LD_PRELOAD=${LD_PRELOAD:-} (the tests append $NSB_PRELOAD)"
echo "sanitize: ASAN_OPTIONS=$ASAN_OPTIONS UBSAN_OPTIONS=$UBSAN_OPTIONS"
failed=0
runs=0
run() {
	runs=$((runs + 1))
	echo "sanitize: === $*"
	out=$("$@" 2>&1)
	status=$?
	echo "$out"
	if [ $status -ne 0 ]; then
		echo "sanitize: FAIL: $* exited $status"
		failed=$((failed + 1))
	elif echo "$out" | grep -Eq 'ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:'; then
		echo "sanitize: FAIL: $* printed a sanitizer report"
		failed=$((failed + 1))
	fi
}
run "$NSB_REL_DIR/model" --sequences 300 --ops 30
run "$NSB_REL_DIR/concurrency" --iterations 600 --stampede 300
run "$NSB_REL_DIR/concurrency" --iterations 600 --stampede 300 --fill range
run "$NSB_REL_DIR/limits"
run "$NSB_REL_DIR/sigsend"
run "$NSB_REL_DIR/reuse"
run "$NSB_REL_DIR/envfuzz" --runs 60
echo "sanitize: $runs programs run under the sanitized library, $failed failed"
[ $failed -eq 0 ]
