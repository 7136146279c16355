/* SPDX-License-Identifier: MIT */
/*
 * Children made with syscall(SYS_clone3), syscall(SYS_clone) and
 * syscall(SYS_fork) as copies of a process whose other thread makes
 * mapping calls.
 *
 * Such a child runs no fork handler: the library's locks and counts were
 * copied as they were, held or counted by threads the child does not
 * have.  syscall() only put the library in its exact mode (process.c,
 * nsb_process_clone_coming), where the child was taken for a vfork
 * child.  Seen before the fix: the child's first protected mapping call
 * waited for ever in word_lock_wait (the table lock of a thread that is
 * not there; child 1 of 100 hung), and its fork() spun FORK_WAIT_YIELDS
 * sched_yield()s for a map in flight of such a thread (25 to 40 seconds
 * on a loaded machine).  Without the library the same child ends at once.
 * Now sandbox.c makes such a clone itself, between the library's fork
 * handlers (process.c: the locks taken as for fork, the child's reset).
 *
 * The test: a thread maps and unmaps a shared memfd (protected by
 * default) in a loop while the main thread makes ROUNDS children, in turn
 * with clone3, clone and fork through syscall(), no CLONE_VM; each maps
 * and unmaps a memfd of its own, forks a child that exits, and exits.  A
 * child that has not ended after 20 seconds (scaled) is hung: its stacks
 * are shown (gdb) and the test fails.  The whole run is in a child of its
 * own, killed (SIGKILL) by the watchdog if it hangs; its stderr must have
 * no line of the library's.  A race: before the fix it failed within the
 * first few children on the machine where it was written.
 */
#include <linux/sched.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "core.h"

#define ROUNDS 100

static int fd;
static size_t ps;

static void *
mapper(void *arg)
{
	(void)arg;
	for (;;) {
		void *q = mmap(NULL, ps, PROT_READ, MAP_SHARED, fd, 0);

		if (q != MAP_FAILED)
			munmap(q, ps);
	}
	return NULL;
}

static void
body(void *arg)
{
	pthread_t t;

	(void)arg;
	ps = nsbt_page();
	fd = memfd_create("rawclone", MFD_CLOEXEC);
	NSBT_CHECK(fd >= 0 && ftruncate(fd, (off_t)ps) == 0, "memfd: %s", strerror(errno));
	NSBT_CHECK(pthread_create(&t, NULL, mapper, NULL) == 0, "pthread_create");
	for (int i = 0; i < ROUNDS; i++) {
		struct clone_args ca;
		double deadline;
		int status;
		long pid;

		memset(&ca, 0, sizeof(ca));
		ca.exit_signal = SIGCHLD;
		fflush(NULL);
		/* clone3, clone and (where there is one) fork in turn. */
		if (i % 3 == 0) {
			pid = syscall(SYS_clone3, &ca, sizeof(ca));
			if (pid < 0 && (errno == ENOSYS || errno == EPERM))
				nsbt_skip("clone3: %s", strerror(errno));
		} else if (i % 3 == 1) {
			pid = syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
		} else {
#ifdef SYS_fork
			pid = syscall(SYS_fork);
#else
			pid = syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
#endif
		}
		NSBT_CHECK(pid >= 0, "child %d: clone: %s", i + 1, strerror(errno));
		if (pid == 0) {
			int f = memfd_create("rawclone-child", MFD_CLOEXEC);
			void *q;
			pid_t g;

			if (f < 0 || ftruncate(f, (off_t)ps) != 0)
				_exit(2);
			q = mmap(NULL, ps, PROT_READ, MAP_SHARED, f, 0);
			if (q == MAP_FAILED)
				_exit(3);
			munmap(q, ps);
			g = fork();
			if (g == 0)
				_exit(0);
			if (g < 0 || waitpid(g, &status, 0) != g || status != 0)
				_exit(4);
			_exit(0);
		}
		deadline = nsbt_now() + nsbt_scaled(20);
		while (waitpid((pid_t)pid, &status, WNOHANG) == 0) {
			if (nsbt_now() > deadline) {
				nsbt_show_stacks((pid_t)pid);
				kill((pid_t)pid, SIGKILL);
				waitpid((pid_t)pid, &status, 0);
				nsbt_fail("child %d of %d (a copy) hung", i + 1, ROUNDS);
			}
			usleep(1000);
		}
		NSBT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: %s", i + 1,
			   nsbt_status_str(status));
	}
	printf("%d children made with clone3 ended\n", ROUNDS);
	fflush(NULL);
	_exit(0);	/* the mapper thread never ends */
}

int
main(void)
{
	char err[16384];
	int status;

	core_require_library();
	status = core_run_watched(body, NULL, nsbt_scaled(600), NULL, "raw clone3 children", err, sizeof(err));
	nsbt_expect_exit(status, 0, "raw clone3 children of a process whose thread maps");
	core_expect_quiet(err, "raw clone3 children");
	printf("ok\n");
	return 0;
}
