/* SPDX-License-Identifier: MIT */
/*
 * The single-step harness of the atk tests that stop the main thread at
 * every instruction of a library call's way in (core-atk-counter,
 * core-atk-forkflight): x86-64's trap flag, set from the thread's own
 * SIGTRAP handler (no ptrace), and a seccomp filter installed with the
 * raw system call (unseen by the library) that traps two calls:
 *   - the kernel's mmap(2) of thread B's mapping (its length; a call with
 *     MAP_POPULATE, the handler's own redo, passes): the test's SIGSYS
 *     handler parks B there until released;
 *   - sched_yield, what the library's waits call: the main thread's
 *     SIGSYS handler releases B there (step_trapped()).
 * The test's scenario(k) runs in a child (core_run_watched) for k = 1,
 * 2, ... (step_run()): raise(SIGTRAP) starts the stepping, and at the k-th
 * instruction the SIGTRAP handler stops it and calls the test's action
 * (a fault's handler's, interrupting the library there).  A step at the
 * system call instruction of the call the test names (futex, mmap) ends
 * the run: every instruction before it was tried.
 *
 * x86-64 only: everything here is inside #if defined(__x86_64__).
 */
#ifndef STEP_H
#define STEP_H

#if defined(__x86_64__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <ucontext.h>

#include "core.h"

#define STEP_LIMIT 20000	/* far past the call's instructions */
#define STEP_EXIT_PAST 3	/* k is past the call's last instruction tried */
#define STEP_TF 0x100		/* the trap flag in EFLAGS */

static int step_fd;		/* the memfd the scenario maps */
static atomic_int step_released, step_parked;
static atomic_bool step_stepping, step_b_done;
static long step_steps, step_target, step_past_nr;
static volatile sig_atomic_t step_yields;
static void (*step_at)(void);

static void
step_say(const char *s)
{
	if (write(STDERR_FILENO, s, strlen(s)) < 0)
		_exit(2);
}

/* [signal handler] B waits in its trapped mmap until released. */
static void
step_wait_released(void)
{
	while (!atomic_load(&step_released))
		syscall(SYS_futex, &step_released, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}

/* [signal handler] */
static void
step_release(void)
{
	atomic_store(&step_released, 1);
	syscall(SYS_futex, &step_released, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* [signal handler] For the test's SIGSYS handler: true if the trapped
 * call was sched_yield (the library waits: B released, the call returns
 * 0); exits 2 on a call other than mmap; false on B's mmap. */
static bool
step_trapped(const siginfo_t *si, ucontext_t *uc)
{
	greg_t *g = uc->uc_mcontext.gregs;

	if (si->si_syscall == SYS_sched_yield) {
		step_yields++;
		step_release();
		g[REG_RAX] = 0;
		return true;
	}
	if (si->si_syscall != SYS_mmap) {
		step_say("unexpected trapped system call\n");
		_exit(2);
	}
	return false;
}

/* [signal handler] Makes B's trapped mmap (with MAP_POPULATE, which the
 * filter lets pass): its result in the context; false if it failed. */
static bool
step_redo_mmap(ucontext_t *uc)
{
	greg_t *g = uc->uc_mcontext.gregs;

	g[REG_RAX] = syscall(SYS_mmap, g[REG_RDI], g[REG_RSI], g[REG_RDX],
			     g[REG_R10] | MAP_POPULATE, g[REG_R8], g[REG_R9]);
	if (g[REG_RAX] != -1)
		return true;
	g[REG_RAX] = -errno;
	return false;
}

/* [signal handler] Starts the stepping (raise), then counts steps; at the
 * target one, the stepping off, the test's action. */
static void
step_on_trap(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	greg_t *g = uc->uc_mcontext.gregs;
	const unsigned char *ip = (const unsigned char *)g[REG_RIP];

	(void)sig;
	(void)si;
	if (!atomic_load(&step_stepping)) {
		atomic_store(&step_stepping, true);
		g[REG_EFL] |= STEP_TF;
		return;
	}
	if (ip[0] == 0x0f && ip[1] == 0x05 && g[REG_RAX] == step_past_nr)
		_exit(STEP_EXIT_PAST);	/* every instruction before tried */
	if (++step_steps < step_target)
		return;
	g[REG_EFL] &= ~(greg_t)STEP_TF;
	atomic_store(&step_stepping, false);
	step_at();
}

/* In scenario(k): the handlers (on_sys the test's SIGSYS handler, at its
 * action at step k), the filter (B's mmap of len bytes, sched_yield), the
 * main thread on CPU 0.  The stepping ends at a system call instruction
 * of past_nr.  Skips if a filter cannot be installed. */
static void
step_install(long k, size_t len, long past_nr, void (*on_sys)(int, siginfo_t *, void *),
	     void (*at)(void))
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sched_yield, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)len, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[3])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_POPULATE, 2, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	struct sigaction sa;

	step_target = k;
	step_past_nr = past_nr;
	step_at = at;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sys;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) != 0)
		nsbt_fail("sigaction SIGSYS");
	sa.sa_sigaction = step_on_trap;
	sa.sa_flags = SA_SIGINFO;
	if (sigaction(SIGTRAP, &sa, NULL) != 0)
		nsbt_fail("sigaction SIGTRAP");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || core_raw_seccomp(&prog, 0) != 0)
		nsbt_skip("seccomp filters cannot be installed here");
	core_pin(0);
}

/* In scenario(k), B started: waits until B is parked in its mmap, then
 * starts the stepping; the test's call comes next. */
static void
step_start(void)
{
	while (atomic_load(&step_parked) == 0) {
		struct timespec nap = { 0, 1000 * 1000 };

		nanosleep(&nap, NULL);
	}
	if (atomic_load(&step_parked) < 0)
		nsbt_fail("B's kernel mmap failed");
	raise(SIGTRAP);
}

/* scenario(k)'s frame.  A memfd of one page (step_fd, named name) mapped
 * once with flags (the library's handler installed; the mapping must be
 * protected), the harness installed (B's mmap of 3 pages; the stepping
 * ends at a system call instruction of past_nr), thread b started (it
 * maps 3 pages of step_fd), then the main thread's own mapping of 2
 * pages with flags, single stepped: its call must not return before the
 * stepping ended (until: where), the mapping must be rescued. */
static void
step_scenario(long k, const char *name, int flags, long past_nr, const char *until,
	      void (*on_sys)(int, siginfo_t *, void *), void (*at)(void), void *(*b)(void *))
{
	size_t ps = nsbt_page();
	pthread_t t;
	char *p;

	step_fd = memfd_create(name, MFD_CLOEXEC);
	if (step_fd < 0 || ftruncate(step_fd, (off_t)ps) != 0)
		nsbt_fail("memfd: %s", strerror(errno));
	p = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED | flags, step_fd, 0);
	if (p == MAP_FAILED || core_stats().mappings != 1 || p[ps] != 0 || munmap(p, 2 * ps) != 0)
		nsbt_fail("the first mapping failed or was not protected");
	step_install(k, 3 * ps, past_nr, on_sys, at);
	if (pthread_create(&t, NULL, b, NULL) != 0)
		nsbt_fail("pthread_create");
	step_start();
	p = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED | flags, step_fd, 0);
	if (atomic_load(&step_stepping))
		nsbt_fail("the mapping call returned before %s", until);
	pthread_join(t, NULL);
	if (p == MAP_FAILED || p[ps] != 0 || munmap(p, 2 * ps) != 0)
		nsbt_fail("A's mapping failed or was not rescued");
}

/* scenario(&k) in a watched child for every k until the stepping ends
 * (act: what the action does, "install"; until: where the stepping
 * ends); how many steps were tried.  A child that exits 77 skips the
 * test, with the reason it wrote to stderr. */
static long
step_run(void (*scenario)(void *), const char *act, const char *until)
{
	char err[4096];
	long k, tried = 0;

	for (k = 1; k < STEP_LIMIT; k++) {
		char what[64];
		int st;

		snprintf(what, sizeof(what), "%s at step %ld", act, k);
		st = core_run_watched(scenario, &k, 30, NULL, what, err, sizeof(err));
		if (WIFEXITED(st) && WEXITSTATUS(st) == STEP_EXIT_PAST)
			break;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
			nsbt_skip("%s: %s", what, err[0] ? err : "the child skipped (its reason above)");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			nsbt_fail("%s: status %#x", what, st);
		core_expect_quiet(err, what);
		tried++;
	}
	if (k == STEP_LIMIT || tried < 10)
		nsbt_fail("the stepping never reached %s (%ld steps tried)", until, tried);
	return tried;
}
#endif /* __x86_64__ */

#endif /* STEP_H */
