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
 * x86-64 only (the trap flag); skipped elsewhere.
 */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <ucontext.h>

#include "core.h"

#define STEP_LIMIT 20000	/* far past the lock's instructions */
#define EXIT_PAST 3		/* k is past A's wait for the lock */
#define EXIT_MASKED 4		/* the lock blocked signals: not this path */

#if defined(__x86_64__)
static size_t ps;
static int zfd;
static atomic_int released, parked;
static atomic_bool stepping, b_done;
static long steps, target;
static volatile sig_atomic_t installed, yields;

#define TF 0x100

static void
on_usr1(int sig)
{
	(void)sig;
}

static void
futex_wait(atomic_int *w, int val)
{
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void
say(const char *s)
{
	if (write(STDERR_FILENO, s, strlen(s)) < 0)
		_exit(2);
}

/* [signal handler] */
static void
on_sys(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	greg_t *g = uc->uc_mcontext.gregs;

	(void)sig;
	if (si->si_syscall == SYS_sched_yield) {
		/* The library waits for the holders: let B go. */
		yields++;
		atomic_store(&released, 1);
		syscall(SYS_futex, &released, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		g[REG_RAX] = 0;
		return;
	}
	if (si->si_syscall != SYS_mmap) {
		say("atk-counter: unexpected trapped system call\n");
		_exit(2);
	}
	/* B, holding the table lock: without the mask? */
	if (sigismember(&uc->uc_sigmask, SIGUSR2))
		_exit(EXIT_MASKED);
	atomic_store(&parked, 1);
	while (!atomic_load(&released))
		futex_wait(&released, 0);
	g[REG_RAX] = syscall(SYS_mmap, g[REG_RDI], g[REG_RSI], g[REG_RDX],
			     g[REG_R10] | MAP_POPULATE, g[REG_R8], g[REG_R9]);
	if (g[REG_RAX] == -1)
		g[REG_RAX] = -errno;
}

/* [signal handler] Starts the stepping (raise), then counts steps. */
static void
on_trap(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	greg_t *g = uc->uc_mcontext.gregs;
	const unsigned char *ip = (const unsigned char *)g[REG_RIP];
	struct sigaction sa;

	(void)sig;
	(void)si;
	if (!atomic_load(&stepping)) {
		atomic_store(&stepping, true);
		g[REG_EFL] |= TF;
		return;
	}
	if (ip[0] == 0x0f && ip[1] == 0x05 && g[REG_RAX] == SYS_futex) {
		/* About to wait for the lock: every instruction before tried. */
		_exit(EXIT_PAST);
	}
	if (++steps < target)
		return;
	g[REG_EFL] &= ~(greg_t)TF;
	atomic_store(&stepping, false);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		_exit(2);
	installed = 1;
	if (!atomic_load(&released)) {
		say("atk-counter: the SIGUSR1 handler was installed while another thread held "
		    "the table lock without the mask: a stop handler could stop it there\n");
		_exit(1);
	}
	/* B's calls alone: a wait of the library's under a lock that now
	 * blocks signals must not yield (SIGSYS blocked would kill). */
	while (!atomic_load(&b_done)) {
		struct timespec nap = { 0, 1000 * 1000 };

		nanosleep(&nap, NULL);
	}
}

static void *
holder(void *arg)
{
	char *q;

	(void)arg;
	core_pin(1);
	q = mmap(NULL, 3 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);
	if (q == MAP_FAILED)
		nsbt_fail("B's mmap: %s", strerror(errno));
	if (munmap(q, 3 * ps) != 0)
		nsbt_fail("B's munmap: %s", strerror(errno));
	atomic_store(&b_done, true);
	return NULL;
}

static void
scenario(void *arg)
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
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 4),	/* length: set below */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[3])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_POPULATE, 2, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	struct sigaction sa;
	pthread_t b;
	char *p;

	target = *(long *)arg;
	f[9].k = (unsigned)(3 * ps);
	zfd = memfd_create("atk-counter", MFD_CLOEXEC);
	if (zfd < 0 || ftruncate(zfd, (off_t)ps) != 0)
		nsbt_fail("memfd: %s", strerror(errno));
	/* The library's handler installed, nothing left recorded. */
	p = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);
	if (p == MAP_FAILED || p[ps] != 0 || munmap(p, 2 * ps) != 0)
		nsbt_fail("the first mapping failed");
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sys;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) != 0)
		nsbt_fail("sigaction SIGSYS");
	sa.sa_sigaction = on_trap;
	sa.sa_flags = SA_SIGINFO;
	if (sigaction(SIGTRAP, &sa, NULL) != 0)
		nsbt_fail("sigaction SIGTRAP");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || core_raw_seccomp(&prog) != 0)
		nsbt_skip("seccomp filters cannot be installed here");
	core_pin(0);
	if (pthread_create(&b, NULL, holder, NULL) != 0)
		nsbt_fail("pthread_create");
	while (!atomic_load(&parked)) {
		struct timespec nap = { 0, 1000 * 1000 };

		nanosleep(&nap, NULL);
	}
	raise(SIGTRAP);
	p = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);
	if (atomic_load(&stepping))
		nsbt_fail("the mapping call returned before its wait for the lock");
	pthread_join(b, NULL);
	if (p == MAP_FAILED || p[ps] != 0 || munmap(p, 2 * ps) != 0)
		nsbt_fail("A's mapping failed or was not rescued");
	if (!installed || !yields)
		nsbt_fail("the install did not wait for the holder");
}

int
main(void)
{
	char err[4096];
	long k, tried = 0;

	core_require_library();
	ps = nsbt_page();
	for (k = 1; k < STEP_LIMIT; k++) {
		char what[64];
		int st;

		snprintf(what, sizeof(what), "install at step %ld", k);
		st = core_run_watched(scenario, &k, 30, NULL, what, err, sizeof(err));
		if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_PAST)
			break;
		if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_MASKED)
			nsbt_skip("the table lock blocks signals here (not the quiet path)");
		if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
			nsbt_skip("%s", err);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			nsbt_fail("%s: status %#x", what, st);
		core_expect_quiet(err, what);
		tried++;
	}
	if (k == STEP_LIMIT || tried < 10)
		nsbt_fail("the stepping never reached the wait for the lock (%ld steps tried)",
			  tried);
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
