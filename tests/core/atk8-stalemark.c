/* SPDX-License-Identifier: MIT */
/*
 * atk8: the mark of a policy mapping's window (nsb_map_window, 0.8.0's
 * core-jumpleak fix) against the jumps the library does not follow.
 *
 * A policy mapping's kernel mmap(2) is trapped by a seccomp filter (by
 * its length, 3 pages; installed with a raw system call, unseen by the
 * library), so its SIGSYS handler runs in the window for certain (the
 * technique of jumpleak.c).  NOSIGBUS_POLICY=shm protects the memfd.
 *
 * "stale mark": the handler makes the mapping and leaves by longjmp to
 * an env filled by _setjmp (which the library does not follow: it gives
 * nothing back, libnosigbus(7)).  The window's mark then points into
 * do_mmap's dead frame.  The program opens a file, and a later function
 * whose locals lie where that frame was holds the file's number there;
 * it leaves by siglongjmp to a sigsetjmp made before the call (outside
 * every window): the library must not close the program's file (nor
 * write into the function's locals).
 *
 * "stale entry": thread B made a sigsetjmp on a jmp_buf (outside every
 * window); in its mapping's window its handler fills the same jmp_buf by
 * _setjmp and longjmps to it, staying in the handler, then parks: the
 * mapping is still in flight, so a fork of the main thread must wait for
 * it (sched_yield, trapped and counted) - a fork that does not gives its
 * child the mapping without its record.
 *
 * x86-64 and aarch64 (the filter's architecture); skipped elsewhere.
 */
#include "core.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <sys/prctl.h>

#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#else
#define ARCH AUDIT_ARCH_AARCH64
#endif

enum { STALE_MARK, STALE_ENTRY };
static int mode;
static size_t ps;
static int fd;
static volatile sig_atomic_t yields, in_window;
static jmp_buf esc;		/* _setjmp's: not followed */
static sigjmp_buf old;		/* sigsetjmp's, made outside every window */
static atomic_int b_state;	/* 1: parked in the window, 2: go on, 3: done */
#define FILL 8192
static volatile int *filled;	/* the locals of fill_and_jump */

static void
wait_state(int s)
{
	while (atomic_load(&b_state) < s) {
		struct timespec nap = { 0, 1000 * 1000 };

		nanosleep(&nap, NULL);
	}
}

static void
set_result(void *ctx, long v)
{
#if defined(__x86_64__)
	((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RAX] = v;
#else
	((ucontext_t *)ctx)->uc_mcontext.regs[0] = (unsigned long long)v;
#endif
}

/* [signal handler] sched_yield: counted, skipped; the mmap of 3 pages. */
static void
on_sys(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	if (si->si_syscall == SYS_sched_yield) {
		yields++;
		return;
	}
	if (si->si_syscall != SYS_mmap)
		_exit(2);
	in_window = 1;
	if (mode == STALE_MARK) {
		if (syscall(SYS_mmap, NULL, 3 * ps, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0) ==
		    -1)
			_exit(4);
		longjmp(esc, 1);
	}
	/* STALE_ENTRY: the jmp_buf of B's earlier sigsetjmp, filled again
	 * here (by _setjmp), and jumped to: the handler goes on, in the
	 * window. */
	if (_setjmp(old) == 0)
		longjmp(old, 1);
	atomic_store(&b_state, 1);
	wait_state(2);
	set_result(ctx, -ENOSYS);
}

static void
filter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sched_yield, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)(3 * ps), 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[3])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_POPULATE, 2, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || core_raw_seccomp(&prog, 0) != 0)
		nsbt_skip("seccomp filters cannot be installed here");
}

static void
protected_map(const char *who)
{
	char *p = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED || p[ps] != 0 || munmap(p, 2 * ps) != 0)
		nsbt_fail("%s's mapping failed or was not rescued", who);
}

/* Locals where do_mmap's frame was, every one the program's descriptor:
 * then a siglongjmp to the sigsetjmp made before the call. */
static __attribute__((noinline)) void
fill_and_jump(int victim)
{
	volatile int locals[FILL];

	for (int i = 0; i < FILL; i++)
		locals[i] = victim;
	filled = locals;
	siglongjmp(old, 1);
}

static void
stale_mark(void)
{
	static volatile int victim = -1;
	void *p;

	if (sigsetjmp(old, 1) != 0) {
		int bad = 0;

		/* (The dead locals first: any call would write over them.) */
		for (int i = 0; i < FILL; i++)
			bad += filled[i] != victim;
		if (fcntl(victim, F_GETFD) == -1)
			nsbt_fail("the program's descriptor %d was closed by the library at a "
				  "siglongjmp (a window's mark left behind by a jump it does not "
				  "follow: %s; %d of its locals written over)", victim,
				  strerror(errno), bad);
		if (bad)
			nsbt_fail("the library wrote into %d of the program's locals at a "
				  "siglongjmp", bad);
		return;
	}
	if (_setjmp(esc) == 0) {
		p = mmap(NULL, 3 * ps, PROT_READ, MAP_SHARED, fd, 0);
		nsbt_fail("the trapped mmap returned %p", p);
	}
	if (!in_window)
		nsbt_fail("the handler did not run in the window");
	victim = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (victim < 0)
		nsbt_fail("open /dev/null: %s", strerror(errno));
	fill_and_jump(victim);
}

static void *
thread_b(void *arg)
{
	void *p;

	(void)arg;
	if (sigsetjmp(old, 1) != 0)
		nsbt_fail("B came back to its sigsetjmp");
	p = mmap(NULL, 3 * ps, PROT_READ, MAP_SHARED, fd, 0);
	if (p != MAP_FAILED || !in_window)
		nsbt_fail("the trapped mmap returned %p", p);
	protected_map("B (after its call)");
	atomic_store(&b_state, 3);
	return NULL;
}

static void
stale_entry(void)
{
	pthread_t t;
	pid_t pid;
	int st;

	if (pthread_create(&t, NULL, thread_b, NULL) != 0)
		nsbt_fail("pthread_create");
	wait_state(1);
	/* B parked in its handler, inside its window. */
	yields = 0;
	pid = fork();
	if (pid == 0)
		_exit(0);
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		nsbt_fail("fork: %s", strerror(errno));
	if (yields == 0)
		nsbt_fail("the fork did not wait for a mapping in flight (a jump inside its "
			  "handler, to a jmp_buf a sigsetjmp had filled before the call, gave "
			  "it back)");
	atomic_store(&b_state, 2);
	wait_state(3);
	pthread_join(t, NULL);
}

static void
scenario(void *arg)
{
	struct sigaction sa;

	mode = *(const int *)arg;
	fd = memfd_create("atk8-stalemark", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)ps) != 0)
		nsbt_fail("memfd: %s", strerror(errno));
	protected_map("the first");
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sys;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) != 0)
		nsbt_fail("sigaction SIGSYS");
	filter();
	if (mode == STALE_MARK)
		stale_mark();
	else
		stale_entry();
	protected_map("the last");
}

int
main(int argc, char **argv)
{
	static const int how[2] = { STALE_MARK, STALE_ENTRY };
	static const char *const what[2] = {
		"a window's mark left by a jump not followed, then a siglongjmp",
		"a jmp_buf of a sigsetjmp filled again by _setjmp in the window",
	};

	core_require_library();
	ps = nsbt_page();
	/* (An argument: that case only.) */
	for (int i = 0; i < 2; i++)
		if ((argc < 2 || atoi(argv[1]) == i) &&
		    core_run_case_watched(scenario, (void *)&how[i], 60, what[i]) == 77)
			return 77;
	printf("ok: jumps the library does not follow leave no stale mark acted on\n");
	return 0;
}
#else
int
main(void)
{
	nsbt_skip("the filter's architecture: x86-64 and aarch64 only");
}
#endif
