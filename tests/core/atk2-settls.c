/* SPDX-License-Identifier: MIT */
/*
 * Adversarial: a copy of the process made through syscall(SYS_clone)
 * with CLONE_SETTLS (no CLONE_VM, no stack), its child given a thread
 * pointer of the program's own, as a runtime with threads of its own
 * makes them.
 *
 * sandbox.c makes a clone that copies the process itself (copy_clone)
 * and runs fork's reset in the child (nsb_process_after_Fork_child).
 * That reset reads and writes the library's thread-local variables
 * through the thread pointer, which in such a child is the program's
 * block: the child's first instructions after the clone, which are the
 * program's and which the kernel alone ran before, were the library's,
 * writing over the program's memory about the thread pointer (or, where
 * it is not mapped, killed by SIGSEGV).
 *
 * The test: a block of 1 MiB filled with a pattern, the thread pointer
 * in its middle (its first word pointing to itself, as a C library's
 * thread control block does on x86_64); the child compares the block
 * with the pattern using no thread-local variable and leaves with a raw
 * exit_group, 0 where untouched, 1 where changed.  Without the library
 * the child exits with 0.  Seen before the fix (x86_64): exit status 1.
 * The run is in a child of its own, killed by the watchdog if it hangs;
 * its stderr must have no line of the library's.
 */
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core.h"

#define BLOCK (1u << 20)
#define PATTERN 0x5a

static unsigned char block[BLOCK] __attribute__((aligned(64)));

/* exit_group behind the C library's back (no TLS touched). */
static __attribute__((noreturn)) void
raw_exit(long code)
{
	(void)core_raw3(SYS_exit_group, code, 0, 0);
	for (;;)
		;
}

/* No thread-local variable, no call of the C library's. */
static __attribute__((noinline)) int
untouched(const unsigned char *tp)
{
	for (size_t i = 0; i < BLOCK; i++) {
		const unsigned char *p = block + i;

		if (p >= tp && p < tp + sizeof(void *))
			continue;	/* the self pointer */
		if (*(volatile const unsigned char *)p != PATTERN)
			return 0;
	}
	return 1;
}

static void
body(void *arg)
{
	unsigned char *tp = block + BLOCK / 2;
	int status;
	long pid;

	(void)arg;
	memset(block, PATTERN, sizeof(block));
	*(unsigned char **)(void *)tp = tp;	/* aligned: the middle of an aligned block */
	fflush(NULL);
#if defined(__x86_64__)
	/* clone(flags, stack, parent_tid, child_tid, tls) */
	pid = syscall(SYS_clone, (long)(SIGCHLD | CLONE_SETTLS), 0L, 0L, 0L, (long)tp);
#elif defined(__aarch64__)
	/* clone(flags, stack, parent_tid, tls, child_tid) */
	pid = syscall(SYS_clone, (long)(SIGCHLD | CLONE_SETTLS), 0L, 0L, (long)tp, 0L);
#else
	nsbt_skip("no clone argument order known here");
#endif
	if (pid == 0)
		raw_exit(untouched(tp) ? 0 : 1);
	NSBT_CHECK(pid > 0, "clone: %s", strerror(errno));
	NSBT_CHECK(waitpid((pid_t)pid, &status, 0) == (pid_t)pid, "waitpid: %s", strerror(errno));
	NSBT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		   "the child of clone(CLONE_SETTLS): %s (1: the memory about its thread pointer changed)",
		   nsbt_status_str(status));
	printf("the child of clone(CLONE_SETTLS) found its memory untouched\n");
	fflush(NULL);
	_exit(0);
}

int
main(void)
{
	core_require_library();
	/* The body's skip (no clone argument order known): said there. */
	if (core_run_case_watched(body, NULL, 60, "clone with CLONE_SETTLS") == 77)
		return 77;
	printf("ok\n");
	return 0;
}
