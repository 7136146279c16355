#!/usr/bin/env bats
# SPDX-License-Identifier: MIT
# shellcheck disable=SC2030,SC2031 # run sets status in each test's own shell
#
# The library with another sigaction interposer (issue 21 item 8): the
# JVM's libjsig.so, preloaded in both orders with libnosigbus.  Neither may
# recurse into the other; a MappedByteBuffer over a truncated file reads
# zeros under --policy=files (without the library the JVM throws an
# InternalError); the JVM's own handlers still work (a NullPointerException
# from a SIGSEGV); a SIGBUS sent to the JVM ends it with the JVM's fatal
# error report, as without the library.
#
# Skipped, with the reason, where java, javac or libjsig.so is missing
# (Debian: apt install openjdk-17-jdk-headless).

load common

setup_file() {
	JAVA=$(command -v java || true)
	JAVAC=$(command -v javac || true)
	JSIG=
	if [ -n "$JAVA" ]; then
		home=$(dirname "$(dirname "$(readlink -f "$JAVA")")")
		for f in "$home/lib/server/libjsig.so" "$home/lib/libjsig.so"; do
			if [ -f "$f" ]; then
				JSIG=$f
				break
			fi
		done
	fi
	CLASSES=$BATS_FILE_TMPDIR/classes
	if [ -n "$JAVA" ] && [ -n "$JAVAC" ]; then
		mkdir -p "$CLASSES"
		"$JAVAC" -d "$CLASSES" "$E2E_SRC/java/Truncated.java" "$E2E_SRC/java/SelfBus.java"
	fi
	export JAVA JAVAC JSIG CLASSES
}

need_java() {
	[ -n "$JAVA" ] || skip "java is not installed (Debian: apt install openjdk-17-jdk-headless)"
	[ -n "$JAVAC" ] || skip "javac is not installed (Debian: apt install openjdk-17-jdk-headless)"
	[ -n "$JSIG" ] || skip "no libjsig.so next to $JAVA"
}

# The JVM's own warning about signal() chaining, printed with libjsig
# whatever else is preloaded, is not ours.
jvm_output() {
	grep -v "^OpenJDK .*VM warning: the use of signal() and sigset()" <<<"$output" || true
}

truncated_rescued="NullPointerException
mapped 131072
truncated
read 131072 bytes, sum 0
NullPointerException"

@test "java: a truncated MappedByteBuffer is an InternalError without the library" {
	need_java
	LD_PRELOAD=$JSIG run -0 "$JAVA" -cp "$CLASSES" Truncated "$BATS_TEST_TMPDIR/data"
	run jvm_output
	assert_output "NullPointerException
mapped 131072
truncated
InternalError: a fault occurred in a recent unsafe memory access operation in compiled Java code
NullPointerException"
}

@test "java: rescued under nosigbus --policy=files, libjsig preloaded first" {
	need_java
	LD_PRELOAD="$JSIG $NSB_PRELOAD" NOSIGBUS_POLICY=files \
		run -0 "$JAVA" -cp "$CLASSES" Truncated "$BATS_TEST_TMPDIR/data"
	run jvm_output
	assert_output "$truncated_rescued"
}

@test "java: rescued under nosigbus --policy=files, libjsig preloaded second" {
	need_java
	LD_PRELOAD="$NSB_PRELOAD $JSIG" NOSIGBUS_POLICY=files \
		run -0 "$JAVA" -cp "$CLASSES" Truncated "$BATS_TEST_TMPDIR/data"
	run jvm_output
	assert_output "$truncated_rescued"
}

@test "java: rescued through the wrapper with libjsig in LD_PRELOAD" {
	need_java
	LD_PRELOAD=$JSIG run -0 "$NSB_WRAPPER" --policy=files "$JAVA" -cp "$CLASSES" Truncated \
		"$BATS_TEST_TMPDIR/data"
	run jvm_output
	assert_output "$truncated_rescued"
}

# A sent SIGBUS reaches the JVM's handler, which reports a fatal error:
# with libjsig second, it calls the library's handler as "the previous
# one", which must not run the JVM's again.
sent_sigbus() {
	cd "$BATS_TEST_TMPDIR" || return 1
	run "$JAVA" -XX:-CreateCoredumpOnCrash -cp "$CLASSES" SelfBus
	refute_output --partial "still alive"
	assert_output --partial "sending SIGBUS"
	assert_output --partial "SIGBUS (0x7)"
	[ "$status" -ne 0 ]
}

@test "java: a sent SIGBUS is the JVM's fatal error without the library" {
	need_java
	LD_PRELOAD=$JSIG sent_sigbus
}

@test "java: a sent SIGBUS is the JVM's fatal error, libjsig first" {
	need_java
	LD_PRELOAD="$JSIG $NSB_PRELOAD" NOSIGBUS_POLICY=files sent_sigbus
}

@test "java: a sent SIGBUS is the JVM's fatal error, libjsig second" {
	need_java
	LD_PRELOAD="$NSB_PRELOAD $JSIG" NOSIGBUS_POLICY=files sent_sigbus
}
