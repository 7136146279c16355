/* SPDX-License-Identifier: MIT */
/*
 * A fork from a fault handler that interrupted its thread at every
 * instruction of a policy mapping's way to the kernel (src/mman.c makes a
 * mapping only the policy protects before it takes the table lock, and a
 * fork waits for such mappings in flight: src/process.c, before_fork).
 * The child must have the record of another thread's mapping in flight
 * (SPEC §7): the fork must wait for it, at whatever instruction its own
 * thread was interrupted.
 *
 * Thread B maps an unflagged memfd (NOSIGBUS_POLICY=shm protects it): a
 * seccomp filter (installed with a raw system call, unseen by the
 * library) traps its kernel mmap(2) (its length); B's SIGSYS handler
 * makes the mapping and then waits there until released: the mapping
 * exists, its record not yet.  Thread A then maps an unflagged memfd too,
 * single stepped (the trap flag set from its SIGTRAP handler, no ptrace):
 * at its k-th instruction, for every k until its own kernel mmap, the
 * SIGTRAP handler (a fault's) forks.  The fork must wait for B: the
 * library's wait yields (sched_yield, trapped too: A's SIGSYS handler
 * releases B there, which records its mapping).  The child reads past the
 * end of B's file: rescued, or the child has B's mapping without its
 * record.  One child per k.  Failed before the fix (0.8.0 dev) at the
 * step between the two updates of the mappings-in-flight counts (the
 * thread's own, then the shared one), where the fork took B's for its
 * own thread's and did not wait.
 *
 * x86-64 only (the trap flag, tests/core/step.h); skipped elsewhere.
 */
#include "core.h"
#include "step.h"

#if defined(__x86_64__)
static size_t ps;
static char *bmap;		/* B's mapping, made by its SIGSYS handler */
static atomic_bool b_go;
static volatile sig_atomic_t forked;

/* [signal handler] */
static void
on_sys(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	(void)sig;
	if (step_trapped(si, uc))
		return;
	/* B's kernel mmap: made, then B waits with its record not made. */
	if (!step_redo_mmap(uc)) {
		atomic_store(&step_parked, -1);
		return;
	}
	bmap = (char *)uc->uc_mcontext.gregs[REG_RAX];
	atomic_store(&step_parked, 1);
	step_wait_released();
}

/* [signal handler] At step k (the SIGTRAP handler's): the fork. */
static void
at_step(void)
{
	pid_t pid;
	int st;

	pid = fork();
	if (pid < 0)
		_exit(2);
	if (pid == 0) {
		/* B's mapping is here: its record must be too. */
		if (bmap[ps] != 0)
			_exit(5);
		_exit(0);
	}
	forked = 1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		step_say(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS ?
			 "atk-forkflight: the fork child has another thread's mapping in flight "
			 "without its record (a read past the end of its file died of SIGBUS)\n" :
			 "atk-forkflight: the fork child failed\n");

		_exit(1);
	}
	/* B's calls alone. */
	atomic_store(&b_go, true);
	step_release();
	core_nap_until(&step_b_done);
}

static void *
mapper(void *arg)
{
	char *q;

	(void)arg;
	core_pin(1);
	q = mmap(NULL, 3 * ps, PROT_READ, MAP_SHARED, step_fd, 0);
	if (q == MAP_FAILED)
		nsbt_fail("B's mmap: %s", strerror(errno));
	/* Not before the fork (its child reads this mapping). */
	core_nap_until(&b_go);
	if (q[ps] != 0 || munmap(q, 3 * ps) != 0)
		nsbt_fail("B's mapping was not rescued or not unmapped");
	atomic_store(&step_b_done, true);
	return NULL;
}

static void
scenario(void *arg)
{
	/* The policy protects an unflagged memfd.  The stepping ends at A's
	 * own kernel mmap. */
	step_scenario(*(long *)arg, "atk-forkflight", 0, SYS_mmap, "its kernel mmap", on_sys,
		      at_step, mapper);
	if (!forked || !step_yields)
		nsbt_fail("the fork did not wait for the mapping in flight");
}

int
main(void)
{
	long tried;

	core_require_library();
	ps = nsbt_page();
	tried = step_run(scenario, "fork", "the kernel mmap");
	printf("ok: the fork waited for the mapping in flight at each of %ld steps\n", tried);
	return 0;
}
#else
int
main(void)
{
	nsbt_skip("the trap flag: x86-64 only");
}
#endif
