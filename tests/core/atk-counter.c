/* SPDX-License-Identifier: MIT */
/*
 * The first handler that is not a fault's (src/process.c,
 * nsb_process_handler_coming) installed from a fault handler that
 * interrupted its thread at every instruction of its way into the table
 * lock: the install must not return while another thread holds the lock
 * without the mask (a handler of the program's could then stop that
 * holder, a garbage collector's stop handler, and a thread that maps a
 * protected memfd waits for good).
 *
 * Thread B holds the table lock without the mask: a seccomp filter
 * (installed with a raw system call, unseen by the library) traps the
 * kernel's mmap(2) of B's MAP_NOSIGBUS mapping (its length), which the
 * library makes holding the lock; B's SIGSYS handler (a fault's) waits
 * there until released.  Thread A then maps a protected memfd too, single
 * stepped (the trap flag set from its SIGTRAP handler, no ptrace): at its
 * k-th instruction, for every k up to its futex wait for the lock, the
 * SIGTRAP handler (a fault's too) installs a SIGUSR1 handler.  That
 * install must wait for B: the library's wait yields (sched_yield, which
 * the filter traps too: A's SIGSYS handler releases B there).  One child
 * per k.  An install that returns with B still parked, and so still
 * holding the lock, fails.  Failed before the fix (0.8.0 dev): the
 * counter of the threads that hold the lock without the mask and each
 * thread's own count were two words, and a handler that came between
 * their updates took one holder for its own thread's.
 *
 * x86-64 only (the trap flag, tests/core/step.h); skipped elsewhere.
 */
#include "core.h"
#include "step.h"

#if defined(__x86_64__)
static size_t ps;
static volatile sig_atomic_t installed;

static void
on_usr1(int sig)
{
	(void)sig;
}

/* [signal handler] */
static void
on_sys(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	(void)sig;
	if (step_trapped(si, uc))
		return;
	/* B, holding the table lock: without the mask? */
	if (sigismember(&uc->uc_sigmask, SIGUSR2)) {
		step_say("the table lock blocks signals here (not the quiet path)\n");
		_exit(77);
	}
	atomic_store(&step_parked, 1);
	step_wait_released();
	step_redo_mmap(uc);
}

/* [signal handler] At step k (the SIGTRAP handler's): the install. */
static void
at_step(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		_exit(2);
	installed = 1;
	if (!atomic_load(&step_released)) {
		step_say("atk-counter: the SIGUSR1 handler was installed while another thread "
			 "held the table lock without the mask: a stop handler could stop it "
			 "there\n");
		_exit(1);
	}
	/* B's calls alone: a wait of the library's under a lock that now
	 * blocks signals must not yield (SIGSYS blocked would kill). */
	core_nap_until(&step_b_done);
}

static void *
holder(void *arg)
{
	char *q;

	(void)arg;
	core_pin(1);
	q = mmap(NULL, 3 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, step_fd, 0);
	if (q == MAP_FAILED)
		nsbt_fail("B's mmap: %s", strerror(errno));
	if (munmap(q, 3 * ps) != 0)
		nsbt_fail("B's munmap: %s", strerror(errno));
	atomic_store(&step_b_done, true);
	return NULL;
}

static void
scenario(void *arg)
{
	/* The stepping ends at A's futex wait for the lock. */
	step_scenario(*(long *)arg, "atk-counter", MAP_NOSIGBUS, SYS_futex,
		      "its wait for the lock", on_sys, at_step, holder);
	if (!installed || !step_yields)
		nsbt_fail("the install did not wait for the holder");
}

int
main(void)
{
	long tried;

	core_require_library();
	ps = nsbt_page();
	tried = step_run(scenario, "install", "the wait for the lock");
	printf("ok: the install waited for the holder at each of %ld steps\n", tried);
	return 0;
}
#else
int
main(void)
{
	nsbt_skip("the trap flag: x86-64 only");
}
#endif
