/* SPDX-License-Identifier: MIT */
/*
 * A vfork child that dies inside a call of the library's, at several
 * points, and what its parent has afterwards.
 *
 * A vfork child runs on its parent's thread's memory and TLS: a mapping
 * call it makes takes the table lock with the parent thread's lock number
 * (process.c, my_id), a rescue takes a reader's ticket, a slot and the
 * unit's claim.  Killed there - here a seccomp filter of its own kills it
 * at a chosen system call of the library's; SIGKILL from elsewhere at that
 * instant does the same - it leaves them behind.  Before the fix the
 * parent then took every later call of its own for one nested in a
 * handler (nsb_ranges_nested): no record was made, and a new MAP_NOSIGBUS
 * mapping was not protected (a read past the end of its file died of
 * SIGBUS), with no log line; a ticket left counted made the parent's next
 * change of the table wait for it for good.  Now the parent takes back
 * what the child left as its vfork returns (process.c, nsb_vfork_back).
 *
 * The points, each in a child of its own with a SIGKILL watchdog, with
 * the table lock taken without the mask (the program has no handler) and
 * with it (a SIGUSR1 handler of the program's):
 *  - before the lock: at the statx of a MAP_NOSIGBUS mmap (nothing held);
 *  - holding the lock, at the kernel's munmap (not made);
 *  - at the kernel's mmap of a MAP_NOSIGBUS mapping (a policy mapping
 *    in flight, mman.c);
 *  - holding the lock, after the kernel's munmap and before the records:
 *    the filter traps the munmap, and the child's SIGSYS handler makes
 *    it with raw system calls (one a page, which the filter lets by) and
 *    _exit()s (without the mask only: a trap under it kills);
 *  - in a rescue (SIGBUS past the end of a truncated file), at its fstat:
 *    ticket, slot and claim held, the page not replaced.
 * Afterwards the parent's records are the kernel's (the count of records
 * is that of the test's protected mappings still in /proc/self/maps, and
 * a raw page mapped where one was unmapped is not rescued), its next
 * munmap is recorded (the count falls), and a new MAP_NOSIGBUS mapping,
 * and every one left, survives a truncation and a read.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

#include "core.h"

static size_t ps;

enum point { BEFORE_LOCK, AT_MUNMAP, AT_MMAP, AFTER_MUNMAP, IN_RESCUE };

struct sc {
	const char *name;
	enum point at;
	bool masked;
};

/* The system call the filter stops, and how. */
struct stop {
	long nr;
	unsigned action;
};

static struct stop
stop_of(enum point at)
{
	switch (at) {
	case BEFORE_LOCK:
		return (struct stop){ SYS_statx, SECCOMP_RET_KILL_PROCESS };
	case AT_MUNMAP:
		return (struct stop){ SYS_munmap, SECCOMP_RET_KILL_PROCESS };
	case AT_MMAP:
		return (struct stop){ SYS_mmap, SECCOMP_RET_KILL_PROCESS };
	case AFTER_MUNMAP:
		return (struct stop){ SYS_munmap, SECCOMP_RET_TRAP };
	case IN_RESCUE:
		return (struct stop){ SYS_fstat, SECCOMP_RET_KILL_PROCESS };
	}
	return (struct stop){ 0, SECCOMP_RET_ALLOW };
}

/* The AFTER_MUNMAP child's: the trapped munmap made a page at a time
 * (the filter stops only the whole span's length), then death before
 * the library records it. */
static void
sigsys(int sig, siginfo_t *si, void *uc)
{
	ucontext_t *u = uc;
	long addr, len;

	(void)sig, (void)si;
#if defined(__x86_64__)
	addr = (long)u->uc_mcontext.gregs[REG_RDI];
	len = (long)u->uc_mcontext.gregs[REG_RSI];
#elif defined(__aarch64__)
	addr = (long)u->uc_mcontext.regs[0];
	len = (long)u->uc_mcontext.regs[1];
#else
	(void)u;
	addr = len = 0;
#endif
	for (long o = 0; o < len; o += (long)ps)
		if (core_raw3(SYS_munmap, addr + o, (long)ps, 0) != 0)
			_exit(76);
	_exit(42);
}

/* The vfork child: not inlined into the function that calls vfork (gcc's
 * -Wclobbered, core.h). */
static __attribute__((noinline)) void
child(enum point at, char *a, char *big, char *t, int fd)
{
	struct stop s = stop_of(at);
	unsigned long len = at == AFTER_MUNMAP ? 2 * ps : at == AT_MUNMAP ? ps : at == AT_MMAP ? 3 * ps : 0;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)s.nr, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)len, len ? 0 : 1, len ? 1 : 0),
		BPF_STMT(BPF_RET | BPF_K, s.action),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	struct sigaction sa;

	if (s.action == SECCOMP_RET_TRAP) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = sigsys;
		sa.sa_flags = SA_SIGINFO;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGSYS, &sa, NULL) != 0)
			_exit(75);
	}
	/* Raw: the library's prctl and seccomp are not for a vfork child's
	 * own filter. */
	if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || core_raw_seccomp(&prog, 0) != 0)
		_exit(77);
	switch (at) {
	case BEFORE_LOCK:
		(void)mmap(NULL, 3 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
		break;
	case AT_MUNMAP:
		munmap(a, ps);
		break;
	case AT_MMAP:
		(void)mmap(NULL, 3 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
		break;
	case AFTER_MUNMAP:
		munmap(big, 2 * ps);
		break;
	case IN_RESCUE:
		(void)*(volatile char *)t;
		break;
	}
	_exit(0);
}

static void
on_usr1(int sig)
{
	(void)sig;
}

/* A protected mapping that is still there survives a read past the end
 * of its file (truncated to nothing by the caller). */
static void
expect_rescued(const char *p, const char *what)
{
	NSBT_CHECK(*(volatile const char *)p == 0, "%s: a rescued page reads non-zero", what);
}

/* Another thread's first handler of a signal not of its own faults. */
static void *
install_usr1(void *arg)
{
	struct sigaction sa;

	(void)arg;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	NSBT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
	return NULL;
}

static void
scenario(void *arg)
{
	const struct sc *sc = arg;
	int fd = nsbt_file(NSBT_MEMFD, 4 * ps), tfd = nsbt_file(NSBT_MEMFD, 4 * ps), status;
	char *a, *b, *big, *t, *c;
	size_t live;
	pid_t pid;

	if (sc->masked) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_usr1;
		sigemptyset(&sa.sa_mask);
		NSBT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
	}
	a = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	b = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	big = core_map(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	t = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, tfd, 0);
	core_truncate(tfd, 0);
	NSBT_CHECK(core_stats().mappings == 4, "%s: %llu records before the vfork, not 4", sc->name,
		   (unsigned long long)core_stats().mappings);
	/* Kernels before 5.16 kill every process that shares the memory of
	 * one dumping core (zap_threads): the filter's SIGSYS in the vfork
	 * child would kill this parent too.  The flag is the memory's, so
	 * the child has it; a process that may not dump starts no dump. */
	NSBT_CHECK(prctl(PR_SET_DUMPABLE, 0) == 0, "PR_SET_DUMPABLE: %s", strerror(errno));
	pid = vfork();
	if (pid == 0)
		child(sc->at, a, big, t, fd);
	NSBT_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "vfork: %s", strerror(errno));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		nsbt_skip("no seccomp filter could be installed in the vfork child");
	if (stop_of(sc->at).action == SECCOMP_RET_TRAP)
		nsbt_expect_exit(status, 42, sc->name);
	else
		nsbt_expect_signal(status, SIGSYS, sc->name);

	/* The records are the kernel's: one for each of the test's
	 * protected mappings still mapped, none where one is gone. */
	live = 0;
	live += core_page_mapped(a);
	live += core_page_mapped(b);
	live += core_page_mapped(big) && core_page_mapped(big + ps);
	live += core_page_mapped(t);
	NSBT_CHECK(sc->at != AFTER_MUNMAP || (!core_page_mapped(big) && !core_page_mapped(big + ps)),
		   "%s: the child's munmap was not made", sc->name);
	NSBT_CHECK(core_stats().mappings == live, "%s: %llu records, %zu protected mappings in the maps",
		   sc->name, (unsigned long long)core_stats().mappings, live);
	if (!core_page_mapped(big))
		core_expect_no_record(big, sc->name);

	/* The parent's own calls are recorded again. */
	NSBT_CHECK(munmap(b, ps) == 0, "munmap: %s", strerror(errno));
	NSBT_CHECK(core_stats().mappings == live - 1, "%s: the parent's munmap left %llu records, not %zu",
		   sc->name, (unsigned long long)core_stats().mappings, live - 1);
	c = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(core_stats().mappings == live, "%s: the parent's MAP_NOSIGBUS mmap was not recorded",
		   sc->name);
	core_truncate(fd, 0);
	expect_rescued(c, sc->name);
	expect_rescued(a, sc->name);
	expect_rescued(t, sc->name);
	if (core_page_mapped(big))
		expect_rescued(big + ps, sc->name);
	/* Nothing of the child's is counted still: another thread's first
	 * handler waits for holders of the lock without the mask that are
	 * not its own thread's - a count the child left would be one for
	 * ever (the watchdog's kill). */
	if (!sc->masked) {
		pthread_t th;

		NSBT_CHECK(pthread_create(&th, NULL, install_usr1, NULL) == 0, "pthread_create");
		NSBT_CHECK(pthread_join(th, NULL) == 0, "pthread_join");
	}
	printf("ok: %s: the parent still protects\n", sc->name);
}

static const struct sc scenarios[] = {
	{ "killed before the table lock (statx of an mmap)", BEFORE_LOCK, false },
	{ "killed holding the table lock, at munmap", AT_MUNMAP, false },
	{ "killed holding the table lock, at munmap (masked lock)", AT_MUNMAP, true },
	{ "killed at the kernel's mmap of a MAP_NOSIGBUS mapping", AT_MMAP, false },
	{ "killed after munmap, before its records", AFTER_MUNMAP, false },
	{ "killed at a MAP_NOSIGBUS mmap (masked lock)", AT_MMAP, true },
	{ "killed in a rescue, at its fstat", IN_RESCUE, false },
};

/* argv[1]: the index of one scenario to run alone (all by default). */
int
main(int argc, char **argv)
{
	size_t only = argc > 1 ? strtoul(argv[1], NULL, 10) : SIZE_MAX;

	core_require_library();
	ps = nsbt_page();
#if !defined(__x86_64__) && !defined(__aarch64__)
	nsbt_skip("the raw seccomp call is written for x86_64 and aarch64 only");
#endif
	if (CORE_RUN_TABLE_WATCHED(scenario, scenarios, only, 30) == 77)
		return 77;
	printf("ok: vforkdeath\n");
	return 0;
}
