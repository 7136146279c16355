/* SPDX-License-Identifier: MIT */
/*
 * Nested calls made at a known instant (src/ranges.c, "nested calls").
 * core-nested sends SIGSEGV into threads at random; here a seccomp filter
 * (installed with a raw system call, which the library does not see, so
 * that it goes on asking the kernel as in an unfiltered process) traps
 * the close(2) of the library's own descriptor of a protected file, which it makes
 * while it still holds the table lock, after its settle, as it lets go of
 * a protected file's last mapping (nsb_files_release_unused).  The
 * program's SIGSYS handler (a signal of its own faults: the lock is held
 * without the mask) puts a descriptor of /dev/null in its place (dup3,
 * which the filter lets through, as if closed: the number stays taken)
 * and then makes nested calls.  The filter knows the descriptor by its
 * number only, so the number must stay taken: freed, it would be the
 * lowest free one where the library keeps its descriptors, the next one
 * it keeps would get it, and that one's close be trapped too - fatally
 * where SIGSYS is blocked, as in a fork child's settle on a kernel
 * without PROCMAP_QUERY (before 6.11: its kept descriptor of
 * /proc/self/maps, the query refused, is closed again at once).
 *
 * Modes (argv[1]):
 *   late      the handler changes the protection of an untouched protected
 *       mapping (a nested mprotect: its span noted).  Once the interrupted
 *       munmap has returned, a read of that mapping is rescued (the note
 *       is settled when the call lets go, not left to a next holder that
 *       never comes).  Failed before the fix: SIGBUS.
 *   overflow  the same with 70 nested calls (more than the notes' slots:
 *       no record trusted until they are settled).  Failed before: SIGBUS.
 *   fork      the handler forks; parent and child go on, each maps,
 *       rescues and unmaps a protected mapping afterwards.
 *   unprotect  the handler calls nosigbus_unprotect() on the untouched
 *       mapping: it either fails with EAGAIN, and the mapping stays
 *       protected, or succeeds, and a read past the end of the file there
 *       dies of SIGBUS.  Failed before the fix: it returned 0 and the
 *       mapping stayed protected (the settle keeps what the kernel shows).
 *   install   while another thread waits for the table lock, the handler
 *       installs a handler of SIGUSR1 (not a fault's: from then on the
 *       lock blocks signals).  Hung before the fix: the install waited for
 *       the threads counted without the mask, the waiter among them, which
 *       waited for the lock the handler's own thread held.
 *   forkafter  as late, in a second thread, and with NOSIGBUS_LOG=1 (the
 *       test runs itself again with it): the filter traps the library's
 *       write of its log to stderr too, which comes after the lock is let
 *       go and before the notes left are settled; there the handler waits
 *       until the main thread has forked (the fork takes the lock between
 *       the two).  The child reads the untouched mapping: rescued (the
 *       child settles what the fork left noted).  The library's log lines
 *       are swallowed by the handler.
 *   emptymap  with nothing recorded (the library's handler installed, its
 *       one mapping gone), the filter traps the kernel's mmap(2) of a
 *       MAP_NOSIGBUS mapping, which the library makes holding the table
 *       lock; the handler makes the mapping itself (MAP_FIXED_NOREPLACE,
 *       which the filter lets through) and unmaps it again with munmap.
 *       Once the interrupted mmap has returned, no record is left there
 *       (the stats count none, and a raw mapping of an empty file there
 *       dies of SIGBUS).  Failed before the fix: an empty table sent the
 *       nested munmap straight to the kernel without its note, and the
 *       interrupted call recorded a mapping that was gone.
 *   hugemove  the untouched mapping is two huge pages of hugetlbfs; the
 *       handler moves the first elsewhere with an mremap of one small
 *       page's length (MREMAP_FIXED), which the kernel rounds to the huge
 *       page.  Once the interrupted call is over, no record is left in
 *       the first huge page's place, and the second is still protected.
 *       (Before Linux 5.16 the kernel refuses such a length: both stay
 *       protected.)
 *   emptyprot  the same, the handler making the mapping read-only with
 *       mprotect: a rescue there must give a read-only page (a write
 *       dies of SIGSEGV).  Failed before the fix: the write went through.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <ucontext.h>

#include "core.h"


static size_t ps;
static int zfd, spare;		/* spare: /dev/null, put in the trapped one's place */
static char *untouched;		/* protected, never read before the end */
static volatile sig_atomic_t trapped, is_child, nested_failed;
static pid_t child;
static const char *mode;
static atomic_int phase;	/* forkafter: 1 the log write trapped, 2 forked */
static atomic_int waiter_tid;	/* install: the thread that waits for the lock */
static atomic_bool waiter_go;
static volatile int unprotect_ret, unprotect_errno;
static size_t hs;		/* hugemove: the huge page size */
static char *huge_dest;		/* hugemove: where the handler moves huge page 0 */
static volatile sig_atomic_t huge_moved;	/* ... and did (Linux 5.16 and later) */

static void
on_usr1(int sig)
{
	(void)sig;
}

/* Is the thread in futex(2) (waiting for a lock)? */
static bool
in_futex(int tid)
{
	char path[64], buf[64];
	int fd, n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return atoi(buf) == SYS_futex;
}

/* install: maps once told to, while the main thread holds the lock. */
static void *
waiter(void *arg)
{
	char *q;

	(void)arg;
	atomic_store(&waiter_tid, (int)syscall(SYS_gettid));
	while (!atomic_load(&waiter_go))
		sched_yield();
	q = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);
	if (q == MAP_FAILED || q[ps] != 0 || munmap(q, 2 * ps) != 0)
		nsbt_fail("the waiting thread's mapping failed or was not rescued");
	return NULL;
}

/* [signal handler] emptymap, emptyprot: the trapped mmap(2) of the
 * library (its one with this length and these flags), made here with
 * MAP_FIXED_NOREPLACE, then a nested munmap or mprotect of it.  Returns
 * what the kernel's mmap would have. */
static long
empty_nested(ucontext_t *uc)
{
	long a[6];
	long p;

	for (int i = 0; i < 6; i++)
#if defined(__x86_64__)
		a[i] = (long)uc->uc_mcontext.gregs[(int[]){ REG_RDI, REG_RSI, REG_RDX, REG_R10,
							    REG_R8, REG_R9 }[i]];
#elif defined(__aarch64__)
		a[i] = (long)uc->uc_mcontext.regs[i];
#else
		a[i] = 0;
#endif
	trapped++;
	p = syscall(SYS_mmap, a[0], a[1], a[2], (a[3] & ~MAP_FIXED) | MAP_FIXED_NOREPLACE, a[4],
		    a[5]);
	if (p == -1)
		return -errno;
	if (strcmp(mode, "emptymap") == 0) {
		if (munmap((void *)p, (size_t)a[1]) != 0)
			nested_failed = 1;
	} else if (mprotect((void *)p, (size_t)a[1], PROT_READ) != 0) {
		nested_failed = 1;
	}
	return p;
}

/* [signal handler] The trapped close: its number given to a copy of
 * /dev/null (the program's from then on, never closed), then the nested
 * calls; close returns 0. */
static void
on_sys(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	long ret = 0, a[3];

	(void)sig;
	for (int i = 0; i < 3; i++)
#if defined(__x86_64__)
		a[i] = (long)uc->uc_mcontext.gregs[i == 0 ? REG_RDI : i == 1 ? REG_RSI : REG_RDX];
#elif defined(__aarch64__)
		a[i] = (long)uc->uc_mcontext.regs[i];
#endif
	if (si->si_syscall == SYS_mmap) {
		ret = empty_nested(uc);
		goto out;
	}
	if (si->si_syscall == SYS_write) {
		/* The library's log lines: swallowed.  Others: written. */
		ret = a[2];
		if (strncmp((const char *)a[1], "nosigbus:", 9) != 0) {
			struct iovec v = { (void *)a[1], (size_t)a[2] };

			ret = syscall(SYS_writev, (int)a[0], &v, 1);
		} else if (memmem((const char *)a[1], (size_t)a[2], "unmapped", 8) &&
			   atomic_load(&phase) == 0) {
			atomic_store(&phase, 1);
			while (atomic_load(&phase) != 2)
				sched_yield();
		}
		goto out;
	}
	if (syscall(SYS_dup3, spare, (int)a[0], O_CLOEXEC) != a[0])
		nested_failed = 1;
	/* Once (a close of the copy would be the program's own). */
	if (trapped++ > 0)
		goto out;
	if (strcmp(mode, "late") == 0 || strcmp(mode, "forkafter") == 0) {
		if (mprotect(untouched, 2 * ps, PROT_READ) != 0)
			nested_failed = 1;
	} else if (strcmp(mode, "overflow") == 0) {
		for (int i = 0; i < 70; i++)
			if (mprotect(untouched, 2 * ps, i & 1 ? PROT_READ : CORE_PROT_RW) != 0)
				nested_failed = 1;
	} else if (strcmp(mode, "hugemove") == 0) {
		/* One small page's length: the kernel moves the whole huge
		 * page (it rounds both lengths to it). */
		void *q = mremap(untouched, ps, ps, MREMAP_MAYMOVE | MREMAP_FIXED, huge_dest);

		/* Before Linux 5.16 the kernel refuses (EINVAL) a length
		 * that is not whole huge pages: nothing moved. */
		if (q == huge_dest)
			huge_moved = 1;
		else if (q != MAP_FAILED || errno != EINVAL)
			nested_failed = 1;
	} else if (strcmp(mode, "unprotect") == 0) {
		int saved = errno;

		unprotect_ret = nosigbus_unprotect(untouched, 2 * ps);
		unprotect_errno = errno;
		errno = saved;
	} else if (strcmp(mode, "install") == 0) {
		struct sigaction sa;

		atomic_store(&waiter_go, true);
		while (!in_futex(atomic_load(&waiter_tid)))
			sched_yield();
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_usr1;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGUSR1, &sa, NULL) != 0)
			nested_failed = 1;
	} else if (strcmp(mode, "fork") == 0) {
		pid_t pid = fork();

		if (pid == 0)
			is_child = 1;
		else if (pid > 0)
			child = pid;
		else
			nested_failed = 1;
	}
out:
#if defined(__x86_64__)
	uc->uc_mcontext.gregs[REG_RAX] = ret;
#elif defined(__aarch64__)
	uc->uc_mcontext.regs[0] = ret;
#endif
}

/* on_sys for SIGSYS, then the filter, behind the library's back. */
static void
trap_with(struct sock_fprog *prog)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sys;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	NSBT_CHECK(sigaction(SIGSYS, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
	NSBT_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "prctl: %s", strerror(errno));
	if (core_raw_seccomp(prog, 0) != 0)
		nsbt_skip("no seccomp filter could be installed (%s)", strerror(errno));
}

/* The library's own descriptor of the file "nestedtrap-last". */
static int
kept_fd(void)
{
	char path[64], link[128];
	int found = -1;

	for (int fd = 3; fd < 1 << 20; fd++) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n < 0) {
			if (errno == ENOENT && fd > 65536)
				break;
			continue;
		}
		link[n] = '\0';
		if (strstr(link, "nestedtrap-last"))
			found = fd;
	}
	if (found < 0)
		nsbt_skip("the library keeps no descriptor of a protected memfd here");
	return found;
}

static char *unmap_me;

static void *
unmapper(void *arg)
{
	(void)arg;
	if (munmap(unmap_me, ps) != 0)
		nsbt_fail("munmap: %s", strerror(errno));
	return NULL;
}

/* forkafter: the main thread forks while the unmapper's handler waits. */
static void
fork_after(void)
{
	pthread_t th;
	pid_t pid;
	int st;

	NSBT_CHECK(pthread_create(&th, NULL, unmapper, NULL) == 0, "pthread_create");
	while (atomic_load(&phase) != 1)
		sched_yield();
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(untouched[0] == 0 && untouched[ps] == 0 ? 0 : 3);
	atomic_store(&phase, 2);
	NSBT_CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
	nsbt_expect_exit(st, 0, "a child forked while a note was left to settle");
	pthread_join(th, NULL);
}

/* emptymap, emptyprot: a nested call with nothing recorded. */
static void
empty_scenario(void)
{
	enum { PAGES = 3 };
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0 /* PAGES * ps */, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[3])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MAP_SHARED | MAP_FIXED, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	struct nosigbus_stats st;
	char *first, *hole, *p;

	f[3].k = (unsigned)(PAGES * ps);
	zfd = memfd_create("nestedtrap-empty", MFD_CLOEXEC);
	NSBT_CHECK(zfd >= 0, "memfd_create: %s", strerror(errno));
	/* A rescue installs the library's handler; then nothing is recorded. */
	first = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);
	NSBT_CHECK(first[0] == 0, "a rescued page reads non-zero");
	NSBT_CHECK(munmap(first, ps) == 0, "munmap: %s", strerror(errno));
	NSBT_CHECK(nosigbus_get_stats(&st, sizeof(st)) == 0 && st.mappings == 0,
		   "%llu mappings recorded, none expected", (unsigned long long)st.mappings);
	/* A free place for the mapping. */
	hole = core_map(NULL, PAGES * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NSBT_CHECK(munmap(hole, PAGES * ps) == 0, "munmap: %s", strerror(errno));

	trap_with(&prog);

	p = mmap(hole, PAGES * ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, zfd, 0);
	NSBT_CHECK(p == hole, "mmap: %s", p == MAP_FAILED ? strerror(errno) : "another address");
	if (!trapped)
		nsbt_fail("the library's mmap(2) of the mapping was not trapped");
	NSBT_CHECK(!nested_failed, "a nested call in the SIGSYS handler failed");
	NSBT_CHECK(nosigbus_get_stats(&st, sizeof(st)) == 0, "nosigbus_get_stats");
	if (strcmp(mode, "emptymap") == 0) {
		if (st.mappings != 0)
			nsbt_fail("%llu mappings recorded after a nested munmap unmapped the only "
				  "one (a stale record)", (unsigned long long)st.mappings);
		core_expect_no_record(hole, "where a nested munmap unmapped the mapping the "
					    "interrupted mmap recorded");
	} else {
		struct core_touch t = { hole + ps, true };
		int status;

		NSBT_CHECK(hole[ps] == 0, "a rescued page reads non-zero");
		status = nsbt_run(core_touch_fn, &t);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			nsbt_fail("a write to a rescued page of a mapping a nested mprotect made "
				  "read-only went through (a stale record's protection)");
		nsbt_expect_signal(status, SIGSEGV, "a write to a rescued read-only page");
		NSBT_CHECK(munmap(hole, PAGES * ps) == 0, "munmap: %s", strerror(errno));
	}
	printf("ok: %s\n", mode);
}

static void
scenario(void *arg)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_close, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0 /* kept */, 6, 7),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),	/* not reached */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, STDERR_FILENO, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0 /* the line's length */, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	char *first, *p, *q;
	int fd, kept;

	mode = arg;
	if (strncmp(mode, "empty", 5) == 0) {
		empty_scenario();
		return;
	}

	/* The library's handler first (a rescue), then the mappings; then
	 * the filter (no rescue under it: the library's handler blocks
	 * SIGSYS, and its log line would be trapped). */
	zfd = memfd_create("nestedtrap-zero-file-of-a-longer-name", MFD_CLOEXEC);
	NSBT_CHECK(zfd >= 0, "memfd_create: %s", strerror(errno));
	first = core_map(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);
	NSBT_CHECK(first[0] == 0, "a rescued page reads non-zero");
	if (strcmp(mode, "hugemove") == 0) {
		int hfd = memfd_create("nestedtrap-huge", MFD_CLOEXEC | MFD_HUGETLB);
		char *r;

		hs = nsbt_huge_page_size();
		if (!hs || hfd < 0)
			nsbt_skip("no hugetlbfs here (memfd_create(MFD_HUGETLB): %s)", strerror(errno));
		r = core_free_range(5 * hs);
		untouched = (char *)(((uintptr_t)r + hs - 1) & ~(uintptr_t)(hs - 1));
		huge_dest = untouched + 3 * hs;
		/* Every page past the end of the file: no huge page is ever
		 * allocated (MAP_NORESERVE). */
		core_map(untouched, 2 * hs, CORE_PROT_RW,
			 MAP_SHARED | MAP_NORESERVE | MAP_FIXED | MAP_NOSIGBUS, hfd, 0);
		core_truncate(hfd, 0);
		close(hfd);
	} else {
		untouched = core_map(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);
	}
	/* Its own file: its munmap lets the library's descriptor go. */
	fd = memfd_create("nestedtrap-last", MFD_CLOEXEC);
	NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	p = core_map(NULL, ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(p[0] == 0, "a rescued page reads non-zero");
	NSBT_CHECK(close(fd) == 0, "close: %s", strerror(errno));
	kept = kept_fd();
	f[3].k = (unsigned)kept;
	spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	NSBT_CHECK(spare >= 0, "/dev/null: %s", strerror(errno));
	/* Only the write of the line that says the last mapping of that
	 * file went is trapped: a rescue's line, under the library's
	 * handler (which blocks SIGSYS), would be fatal (and the zero file's
	 * longer name keeps the two lengths apart). */
	f[9].k = (unsigned)snprintf(NULL, 0, "nosigbus: %s[%d]: unmapped /memfd:nestedtrap-last "
					     "(deleted): 1 page rescued in 1 fault\n",
				    program_invocation_short_name, (int)getpid());

	trap_with(&prog);

	if (strcmp(mode, "forkafter") == 0) {
		unmap_me = p;
		fork_after();
	} else if (strcmp(mode, "install") == 0) {
		pthread_t th;

		NSBT_CHECK(pthread_create(&th, NULL, waiter, NULL) == 0, "pthread_create");
		while (!atomic_load(&waiter_tid))
			sched_yield();
		NSBT_CHECK(munmap(p, ps) == 0, "munmap: %s", strerror(errno));
		pthread_join(th, NULL);
	} else {
		NSBT_CHECK(munmap(p, ps) == 0, "munmap: %s", strerror(errno));
	}
	if (!trapped)
		nsbt_fail("the library's close of its descriptor %d was not trapped", kept);
	NSBT_CHECK(!nested_failed, "a nested call in the SIGSYS handler failed");
	if (strcmp(mode, "unprotect") == 0 && unprotect_ret == 0) {
		struct core_touch t = { untouched, false };
		int st = nsbt_run(core_touch_fn, &t);

		if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGBUS)
			nsbt_fail("a nested nosigbus_unprotect() returned 0, and the mapping is still "
				  "protected once the interrupted call is over");
		printf("ok: unprotect: unprotected\n");
		return;
	}
	if (strcmp(mode, "unprotect") == 0)
		NSBT_CHECK(unprotect_errno == EAGAIN, "a nested nosigbus_unprotect() failed with %s, "
			   "not EAGAIN", strerror(unprotect_errno));
	if (strcmp(mode, "hugemove") == 0 && !huge_moved) {
		nsbt_expect_exit(core_touch_quiet(untouched + 5, false, "huge page 0"), 0,
				 "a read of huge page 0, not moved (a kernel before 5.16 refused)");
		nsbt_expect_exit(core_touch_quiet(untouched + hs + 5, false, "huge page 1"), 0,
				 "a read of huge page 1");
		printf("ok: %s: this kernel refused the nested mremap (before 5.16): both huge "
		       "pages still protected\n", mode);
		return;
	}
	if (strcmp(mode, "hugemove") == 0) {
		/* Huge page 0 went whole: no record is left anywhere in it;
		 * huge page 1 is still protected. */
		core_expect_no_record(untouched + ps, "the rest of huge page 0, moved away by a "
				      "nested mremap of one small page's length");
		core_expect_no_record(untouched + hs - ps, "the last small page of huge page 0");
		nsbt_expect_exit(core_touch_quiet(untouched + hs + 5, false, "huge page 1"), 0,
				 "a read of huge page 1, left in place (rescued)");
		printf("ok: %s\n", mode);
		return;
	}
	/* Once the call is over, a rescue trusts the records again. */
	NSBT_CHECK(untouched[0] == 0 && untouched[ps] == 0, "a rescued page reads non-zero");
	if (strcmp(mode, "fork") == 0) {
		q = core_map(NULL, 3 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);
		NSBT_CHECK(q[ps] == 0, "%s: a rescued page reads non-zero", is_child ? "child" : "parent");
		NSBT_CHECK(munmap(q, 3 * ps) == 0, "munmap: %s", strerror(errno));
		if (is_child)
			_exit(0);
		int st;

		NSBT_CHECK(waitpid(child, &st, 0) == child, "waitpid: %s", strerror(errno));
		nsbt_expect_exit(st, 0, "the child of a fork nested in the library's call");
	}
	printf("ok: %s\n", mode);
}

int
main(int argc, char **argv)
{
	char err[4096];
	int status;

	core_require_library();
	ps = nsbt_page();
	if (argc < 2 || (strcmp(argv[1], "late") != 0 && strcmp(argv[1], "overflow") != 0 &&
			 strcmp(argv[1], "fork") != 0 && strcmp(argv[1], "forkafter") != 0 &&
			 strcmp(argv[1], "install") != 0 && strcmp(argv[1], "unprotect") != 0 &&
			 strcmp(argv[1], "emptymap") != 0 && strcmp(argv[1], "emptyprot") != 0 &&
			 strcmp(argv[1], "hugemove") != 0))
		nsbt_fail("usage: core-nestedtrap late|overflow|fork|unprotect|install|forkafter|"
			  "emptymap|emptyprot|hugemove");
	if (strcmp(argv[1], "forkafter") == 0 && !getenv("NOSIGBUS_LOG")) {
		static const char *const log[] = { "NOSIGBUS_LOG=1", NULL };

		status = core_reexec(argv[1], log);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
			return 77;
		nsbt_expect_exit(status, 0, argv[1]);
		return 0;
	}
#if !defined(__x86_64__) && !defined(__aarch64__)
	nsbt_skip("the SIGSYS handler reads registers of x86_64 and aarch64 only");
#endif
	status = core_run_watched(scenario, argv[1], nsbt_scaled(30), NULL,
				  "a nested call from a trapped close", err, sizeof(err));
	/* forkafter logs its rescues before the filter (NOSIGBUS_LOG=1). */
	if (strcmp(argv[1], "forkafter") != 0)
		core_expect_quiet(err, argv[1]);
	else if (strstr(err, "passing"))
		nsbt_fail("forkafter: the library passed a fault on:\n%s", err);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		return 77;
	nsbt_expect_exit(status, 0, argv[1]);
	printf("ok: nested calls at a known instant (%s)\n", argv[1]);
	return 0;
}
