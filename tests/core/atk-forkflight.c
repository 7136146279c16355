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

#define STEP_LIMIT 20000	/* far past the call's way to the kernel */
#define EXIT_PAST 3		/* k is past A's own kernel mmap */

#if defined(__x86_64__)
static size_t ps;
static int zfd;
static char *bmap;		/* B's mapping, made by its SIGSYS handler */
static atomic_int released, parked;
static atomic_bool stepping, b_done, b_go;
static long steps, target;
static volatile sig_atomic_t forked, yields;

#define TF 0x100

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
		/* The fork waits for mappings in flight: let B go. */
		yields++;
		atomic_store(&released, 1);
		syscall(SYS_futex, &released, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		g[REG_RAX] = 0;
		return;
	}
	if (si->si_syscall != SYS_mmap) {
		say("atk-forkflight: unexpected trapped system call\n");
		_exit(2);
	}
	/* B's kernel mmap: made, then B waits with its record not made. */
	g[REG_RAX] = syscall(SYS_mmap, g[REG_RDI], g[REG_RSI], g[REG_RDX],
			     g[REG_R10] | MAP_POPULATE, g[REG_R8], g[REG_R9]);
	if (g[REG_RAX] == -1) {
		g[REG_RAX] = -errno;
		atomic_store(&parked, -1);
		return;
	}
	bmap = (char *)g[REG_RAX];
	atomic_store(&parked, 1);
	while (!atomic_load(&released))
		futex_wait(&released, 0);
}

/* [signal handler] Starts the stepping (raise), then counts steps. */
static void
on_trap(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	greg_t *g = uc->uc_mcontext.gregs;
	const unsigned char *ip = (const unsigned char *)g[REG_RIP];
	pid_t pid;
	int st;

	(void)sig;
	(void)si;
	if (!atomic_load(&stepping)) {
		atomic_store(&stepping, true);
		g[REG_EFL] |= TF;
		return;
	}
	if (ip[0] == 0x0f && ip[1] == 0x05 && g[REG_RAX] == SYS_mmap) {
		/* A's own kernel mmap: every instruction before tried. */
		_exit(EXIT_PAST);
	}
	if (++steps < target)
		return;
	g[REG_EFL] &= ~(greg_t)TF;
	atomic_store(&stepping, false);
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
		say(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS ?
		    "atk-forkflight: the fork child has another thread's mapping in flight "
		    "without its record (a read past the end of its file died of SIGBUS)\n" :
		    "atk-forkflight: the fork child failed\n");

		_exit(1);
	}
	/* B's calls alone. */
	atomic_store(&b_go, true);
	atomic_store(&released, 1);
	syscall(SYS_futex, &released, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	while (!atomic_load(&b_done)) {
		struct timespec nap = { 0, 1000 * 1000 };

		nanosleep(&nap, NULL);
	}
}

static void *
mapper(void *arg)
{
	char *q;

	(void)arg;
	core_pin(1);
	q = mmap(NULL, 3 * ps, PROT_READ, MAP_SHARED, zfd, 0);
	if (q == MAP_FAILED)
		nsbt_fail("B's mmap: %s", strerror(errno));
	/* Not before the fork (its child reads this mapping). */
	while (!atomic_load(&b_go)) {
		struct timespec nap = { 0, 1000 * 1000 };

		nanosleep(&nap, NULL);
	}
	if (q[ps] != 0 || munmap(q, 3 * ps) != 0)
		nsbt_fail("B's mapping was not rescued or not unmapped");
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
	zfd = memfd_create("atk-forkflight", MFD_CLOEXEC);
	if (zfd < 0 || ftruncate(zfd, (off_t)ps) != 0)
		nsbt_fail("memfd: %s", strerror(errno));
	/* The policy protects an unflagged memfd; the library's handler
	 * installed, nothing left recorded. */
	p = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED, zfd, 0);
	if (p == MAP_FAILED || core_stats().mappings != 1 || p[ps] != 0 || munmap(p, 2 * ps) != 0)
		nsbt_fail("the first mapping failed or was not protected");
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
	if (pthread_create(&b, NULL, mapper, NULL) != 0)
		nsbt_fail("pthread_create");
	while (atomic_load(&parked) == 0) {
		struct timespec nap = { 0, 1000 * 1000 };

		nanosleep(&nap, NULL);
	}
	if (atomic_load(&parked) < 0)
		nsbt_fail("B's kernel mmap failed");
	raise(SIGTRAP);
	p = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED, zfd, 0);
	if (atomic_load(&stepping))
		nsbt_fail("the mapping call returned before its kernel mmap");
	pthread_join(b, NULL);
	if (p == MAP_FAILED || p[ps] != 0 || munmap(p, 2 * ps) != 0)
		nsbt_fail("A's mapping failed or was not rescued");
	if (!forked || !yields)
		nsbt_fail("the fork did not wait for the mapping in flight");
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

		snprintf(what, sizeof(what), "fork at step %ld", k);
		st = core_run_watched(scenario, &k, 30, NULL, what, err, sizeof(err));
		if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_PAST)
			break;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
			nsbt_skip("%s", err);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			nsbt_fail("%s: status %#x", what, st);
		core_expect_quiet(err, what);
		tried++;
	}
	if (k == STEP_LIMIT || tried < 10)
		nsbt_fail("the stepping never reached the kernel mmap (%ld steps tried)", tried);
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
