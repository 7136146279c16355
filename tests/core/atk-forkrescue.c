/* SPDX-License-Identifier: MIT */
/*
 * fork() while a rescue is in flight in another thread, held there at a
 * known instant (SPEC §7: the child has records of exactly the mappings
 * it has, and no lock or claim of the library's).  A seccomp filter with
 * a user-space listener (installed with a raw system call, unseen by the
 * library) holds the rescue's own mmap(2) - MAP_FIXED | MAP_PRIVATE, the
 * zero page over the faulting one - in the kernel: the rescuing thread
 * has claimed the page and has every signal blocked, and it stays so
 * until this test lets the call go on.  Meanwhile (argv[1]):
 *   fork     the main thread forks; the child reads the page the parent's
 *       thread is rescuing (rescued: the claim is not the child's), maps,
 *       rescues and unmaps a new protected memfd (no lock held), and
 *       counts the parent's protected mappings; then vfork, whose child
 *       exits at once.
 *   busfork  the main thread reads past the end of an unprotected file
 *       mapping: the library passes the SIGBUS on to the program's
 *       handler, which forks there; the child does the same as above,
 *       from inside the chained handler, and the handler then maps a
 *       page over the fault and returns.
 * The parent then lets the rescue go on: it completes (the page reads
 * zero), and the counts are as expected.  Each child's stderr is checked
 * for lines of the library's; a SIGKILL watchdog ends a hang.
 */
#include <setjmp.h>

#include "held.h"

static int ufd;
static char *unprot;		/* 2 pages unprotected, file of 1 (prot: held.h) */
static const char *mode;

/* In a fork child (or the chained handler's): what SPEC §7 asks. */
static void
child_checks(void)
{
	struct nosigbus_stats st = core_stats();
	char *q;

	if (st.mappings != 1)
		_exit(10);
	/* The page the parent's thread was rescuing: not claimed here. */
	if (prot[ps] != 0 || prot[3 * ps] != 0)
		_exit(11);
	q = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);
	if (q == MAP_FAILED || q[ps] != 0 || munmap(q, 2 * ps) != 0)
		_exit(12);
	if (core_stats().mappings != 1 || munmap(prot, 4 * ps) != 0 || core_stats().mappings != 0)
		_exit(13);
	_exit(0);
}

static void
fork_and_check(const char *what)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0)
		child_checks();
	/* The test's watchdog ends a hang. */
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		nsbt_fail("%s: the child: status %#x (10 count, 11 held page, 12 new mapping, "
			  "13 unmap)", what, st);
}

static sigjmp_buf back;
static volatile sig_atomic_t chained;

/* [signal handler] The program's own: the library passes on a SIGBUS of
 * the unprotected mapping. */
static void
on_bus(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)ctx;
	chained++;
	if ((char *)si->si_addr != unprot + ps)
		siglongjmp(back, 1);
	fork_and_check("fork in the chained SIGBUS handler");
	if (mmap(unprot + ps, ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
	    unprot + ps)
		siglongjmp(back, 2);
}

static void
scenario(void *arg)
{
	struct sigaction sa;

	(void)arg;
	zfd = memfd_create("atk-forkrescue", MFD_CLOEXEC);
	ufd = memfd_create("atk-forkrescue-plain", MFD_CLOEXEC);
	if (zfd < 0 || ufd < 0 || ftruncate(zfd, (off_t)ps) != 0 || ftruncate(ufd, (off_t)ps) != 0)
		nsbt_fail("memfd: %s", strerror(errno));
	prot = core_map(NULL, 4 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);
	unprot = core_map(NULL, 2 * ps, PROT_READ, MAP_SHARED, ufd, 0);
	/* One rescue first: the library's zero file, if it makes one, made. */
	if (prot[2 * ps] != 0)
		nsbt_fail("the first rescue reads non-zero");
	held_start();
	/* The rescue is held in its mmap, its page claimed. */
	if (strcmp(mode, "fork") == 0) {
		pid_t v;
		int st;

		fork_and_check("fork during a held rescue");
		v = vfork();
		if (v == 0)
			_exit(0);
		if (v < 0 || waitpid(v, &st, 0) != v || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			nsbt_fail("vfork during a held rescue");
	} else {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_bus;
		sa.sa_flags = SA_SIGINFO;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGBUS, &sa, NULL) != 0)
			nsbt_fail("sigaction");
		int j = sigsetjmp(back, 1);

		if (j)
			nsbt_fail("the chained handler: %s", j == 1 ? "a SIGBUS elsewhere" :
				  "its mapping failed");
		if (*(volatile char *)(unprot + ps) != 0 || chained != 1)
			nsbt_fail("the chained handler did not run once (%d)", (int)chained);
		signal(SIGBUS, SIG_DFL);	/* for the probe below */
	}
	if (core_stats().mappings != 1)
		nsbt_fail("the parent counts %llu protected mappings, not 1",
			  (unsigned long long)core_stats().mappings);
	held_release();
	if (munmap(prot, 4 * ps) != 0 || core_stats().mappings != 0)
		nsbt_fail("the parent's last unmap");
	core_expect_no_record(prot, "after the parent's unmap");
	printf("ok: %s during a held rescue\n", mode);
}

int
main(int argc, char **argv)
{
	core_require_library();
	if (NATIVE_ARCH == 0)
		nsbt_skip("x86-64 and aarch64 only");
	if (argc < 2 || (strcmp(argv[1], "fork") != 0 && strcmp(argv[1], "busfork") != 0))
		nsbt_fail("usage: %s fork|busfork", argv[0]);
	mode = argv[1];
	ps = nsbt_page();
	if (core_run_case_watched(scenario, NULL, 30, mode) == 77)
		return 77;
	printf("ok: %s\n", mode);
	return 0;
}
