/* SPDX-License-Identifier: MIT */
/*
 * A handler of the parent's that runs as its vfork returns, where the
 * vfork child died inside a call of the library's: before vfork's
 * assembly takes back what the child left (process.c, nsb_vfork_back).
 *
 * The kernel's wait for a vfork child is killable only: a signal sent to
 * the parent while its child runs is held, and delivered as the clone
 * returns to user space, before the parent's next instruction.  So the
 * child, before it dies, sends its parent's thread a SIGCHLD (tgkill, a
 * raw system call), as its own death does a moment later (exit_notify,
 * after the parent is woken: then the window is a race): the parent's
 * SIGCHLD handler runs in that window every time.  The handler notes that
 * vfork() had not returned yet (else the test fails: it would prove
 * nothing).
 *
 * The child is killed by a seccomp filter of its own (raw prctl and
 * seccomp, as in vforkdeath.c) at a chosen system call of the library's:
 *  - none (the control: it _exit()s);
 *  - at the statx of a MAP_NOSIGBUS mmap, before the table lock;
 *  - holding the table lock, at the kernel's munmap (not made);
 *  - at the kernel's mmap of a MAP_NOSIGBUS mapping (a policy mapping in
 *    flight);
 *  - in a rescue, at its fstat (a reader's ticket, a slot, a claim).
 * The handler maps a memfd MAP_NOSIGBUS (the record count must grow by
 * one), truncates it and reads the page (rescued: zero), and reads a
 * protected page of a file truncated before the vfork (rescued: zero) -
 * first, in the variants where the handler's first entry into the library
 * is that fault (the SIGBUS handler), not a mapping call; in another, the
 * handler first makes a vfork of its own, whose child exits.  Afterwards the
 * records are the kernel's (one per protected mapping of the test's still
 * in /proc/self/maps), the parent's next munmap and MAP_NOSIGBUS mmap are
 * recorded, and every protected mapping left survives a truncation.
 *
 * Before the fix the handler's mapping, taken for a call nested in a
 * handler that interrupted the holder of the table lock (the lock word
 * held the parent thread's number, left by the child), went to the kernel
 * unrecorded: its read died of SIGBUS.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

#include "core.h"

static size_t ps;

enum point { NONE, BEFORE_LOCK, AT_MUNMAP, AT_MMAP, IN_RESCUE };

struct sc {
	const char *name;
	enum point at;
	bool read_first;	/* the handler's first entry: a fault */
	bool vfork_first;	/* ... a vfork of its own (a child that exits) */
};

/* What the SIGCHLD handler does and saw (the first time only). */
static volatile sig_atomic_t returned, handled, early;
static int hfd = -1;
static char *volatile hq, *volatile ht;
static const struct sc *volatile hsc;
static volatile unsigned long long h_before, h_after;
static volatile int h_zero_new, h_zero_old;

static void
read_old(void)
{
	h_zero_old = *(volatile const char *)ht == 0;
}

/* The handler's own vfork, its child exiting at once (not inlined into
 * the handler: -Wclobbered). */
static __attribute__((noinline)) void
vfork_exit(void)
{
	pid_t p = vfork();

	if (p == 0)
		_exit(0);
	if (p > 0)
		(void)waitpid(p, NULL, 0);
}

static void
on_chld(int sig)
{
	const struct sc *sc;
	char *q;

	(void)sig;
	if (handled)
		return;
	handled = 1;
	early = !returned;
	sc = hsc;
	if (sc->read_first)
		read_old();
	if (sc->vfork_first)
		vfork_exit();
	h_before = core_stats().mappings;
	q = mmap(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, hfd, 0);
	if (q == MAP_FAILED)
		return;
	h_after = core_stats().mappings;
	hq = q;
	if (ftruncate(hfd, 0) != 0)
		return;
	h_zero_new = *(volatile const char *)q == 0;
	if (!sc->read_first)
		read_old();
}

/* The system call the filter kills the child at, and its length
 * argument (0: any). */
static void
stop_of(enum point at, long *nr, unsigned long *len)
{
	*len = 0;
	switch (at) {
	case NONE:
		*nr = -1;
		return;
	case BEFORE_LOCK:
		*nr = SYS_statx;
		return;
	case AT_MUNMAP:
		*nr = SYS_munmap;
		*len = ps;
		return;
	case AT_MMAP:
		*nr = SYS_mmap;
		*len = 3 * ps;
		return;
	case IN_RESCUE:
		*nr = SYS_fstat;
		return;
	}
}

/* The vfork child: not inlined into the function that calls vfork (gcc's
 * -Wclobbered, core.h). */
static __attribute__((noinline)) void
child(enum point at, pid_t ppid, pid_t ptid, char *a, char *t, int fd)
{
	long nr = -1;
	unsigned long len;

	stop_of(at, &nr, &len);
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)len, len ? 0 : 1, len ? 1 : 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (at != NONE &&
	    (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || core_raw_seccomp(&prog, 0) != 0))
		_exit(77);
	/* Held by the kernel until the parent's clone returns. */
	if (core_raw3(SYS_tgkill, ppid, ptid, SIGCHLD) != 0)
		_exit(78);
	switch (at) {
	case NONE:
		break;
	case BEFORE_LOCK:
	case AT_MMAP:
		(void)mmap(NULL, 3 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
		break;
	case AT_MUNMAP:
		munmap(a, ps);
		break;
	case IN_RESCUE:
		(void)*(volatile char *)t;
		break;
	}
	_exit(0);
}

static void
scenario(void *arg)
{
	const struct sc *sc = arg;
	int fd = nsbt_file(NSBT_MEMFD, 4 * ps), tfd = nsbt_file(NSBT_MEMFD, 4 * ps), status;
	pid_t self = getpid(), tid = (pid_t)syscall(SYS_gettid), pid;
	struct sigaction sa;
	char *a, *b, *t, *c;
	size_t live;

	core_no_core();
	hfd = nsbt_file(NSBT_MEMFD, 4 * ps);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_chld;
	sigemptyset(&sa.sa_mask);
	NSBT_CHECK(sigaction(SIGCHLD, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
	a = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	b = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	t = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, tfd, 0);
	core_truncate(tfd, 0);
	NSBT_CHECK(core_stats().mappings == 3, "%s: %llu records before the vfork, not 3", sc->name,
		   (unsigned long long)core_stats().mappings);
	ht = t;
	hsc = sc;
	/* Kernels before 5.16 kill every process that shares the memory of
	 * one dumping core: the filter's SIGSYS in the vfork child would
	 * kill this parent too (core-vforkdeath). */
	NSBT_CHECK(prctl(PR_SET_DUMPABLE, 0) == 0, "PR_SET_DUMPABLE: %s", strerror(errno));
	pid = vfork();
	if (pid == 0)
		child(sc->at, self, tid, a, t, fd);
	returned = 1;
	NSBT_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "vfork: %s", strerror(errno));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		nsbt_skip("no seccomp filter could be installed in the vfork child");
	if (sc->at == NONE)
		nsbt_expect_exit(status, 0, sc->name);
	else
		nsbt_expect_signal(status, SIGSYS, sc->name);

	/* The handler ran in the window, and what it made is protected. */
	NSBT_CHECK(handled && early, "%s: the SIGCHLD handler did not run before vfork returned "
				     "(ran: %d)", sc->name, (int)handled);
	NSBT_CHECK(hq != NULL, "%s: the handler's mmap failed", sc->name);
	NSBT_CHECK(h_after == h_before + 1, "%s: the handler's MAP_NOSIGBUS mmap was not recorded "
					    "(%llu records before, %llu after)",
		   sc->name, (unsigned long long)h_before, (unsigned long long)h_after);
	NSBT_CHECK(h_zero_new, "%s: the handler's mapping read non-zero past its file's end", sc->name);
	NSBT_CHECK(h_zero_old, "%s: the handler read non-zero past the end of a truncated file",
		   sc->name);

	/* The records are the kernel's: one for each of the test's
	 * protected mappings in the maps. */
	live = core_page_mapped(a) + core_page_mapped(b) + core_page_mapped(t) + core_page_mapped(hq);
	NSBT_CHECK(live == 4, "%s: %zu of the 4 protected mappings mapped", sc->name, live);
	NSBT_CHECK(core_stats().mappings == live, "%s: %llu records, %zu protected mappings in the maps",
		   sc->name, (unsigned long long)core_stats().mappings, live);

	/* The parent's own calls are recorded. */
	NSBT_CHECK(munmap(b, ps) == 0, "munmap: %s", strerror(errno));
	NSBT_CHECK(core_stats().mappings == live - 1, "%s: the parent's munmap left %llu records, not %zu",
		   sc->name, (unsigned long long)core_stats().mappings, live - 1);
	core_expect_no_record(b, sc->name);
	c = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(core_stats().mappings == live, "%s: the parent's MAP_NOSIGBUS mmap was not recorded",
		   sc->name);
	core_truncate(fd, 0);
	NSBT_CHECK(*(volatile char *)c == 0 && *(volatile char *)a == 0 && *(volatile char *)t == 0 &&
			   *(volatile char *)hq == 0,
		   "%s: a rescued page reads non-zero", sc->name);
	printf("ok: %s: the handler's mapping is protected\n", sc->name);
}

static const struct sc scenarios[] = {
	{ "the child exits (control)", NONE, false, false },
	{ "killed before the table lock (statx of an mmap)", BEFORE_LOCK, false, false },
	{ "killed holding the table lock, at munmap", AT_MUNMAP, false, false },
	{ "killed holding the table lock, at munmap; the handler faults first", AT_MUNMAP, true, false },
	{ "killed at the kernel's mmap of a MAP_NOSIGBUS mapping", AT_MMAP, false, false },
	{ "killed in a rescue, at its fstat", IN_RESCUE, false, false },
	{ "killed in a rescue, at its fstat; the handler faults first", IN_RESCUE, true, false },
	{ "killed holding the table lock, at munmap; the handler vforks first", AT_MUNMAP, false, true },
};

/* argv[1]: the index of one scenario to run alone (all by default). */
int
main(int argc, char **argv)
{
	size_t only = argc > 1 ? strtoul(argv[1], NULL, 10) : SIZE_MAX;

	core_require_library();
	ps = nsbt_page();
#if !defined(__x86_64__) && !defined(__aarch64__)
	nsbt_skip("the raw system calls are written for x86_64 and aarch64 only");
#endif
	if (CORE_RUN_TABLE_WATCHED(scenario, scenarios, only, 30) == 77)
		return 77;
	printf("ok: vforkchld\n");
	return 0;
}
