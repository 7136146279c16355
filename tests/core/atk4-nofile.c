/* SPDX-License-Identifier: MIT */
/*
 * Adversarial: every descriptor number taken (the soft RLIMIT_NOFILE
 * reached, as a compositor with a burst of clients, or a program with a
 * leak it later plugs) the first time the library needs to know whether
 * a seccomp filter is in force (sandbox.c: it reads /proc/self/status,
 * which takes a descriptor).
 *
 * The scenario, in a fresh exec of this test (the answer is kept for the
 * life of the process and inherited by fork: nothing may have asked
 * before), the default policy (shm), with a watchdog and its stderr
 * checked: two memfds A and B of two pages are made; every free number
 * is taken; A is mapped (the first decision: the status cannot be read,
 * so A is decided as under a filter: unprotected, counted in `unchecked'
 * - libnosigbus(7), "Sandboxes"); the numbers are given back; B is
 * mapped, truncated to nothing and read and written past its end: it
 * must be rescued, and `unchecked' must still be 1.  Again with
 * NOSIGBUS_LOG=1: the line for A says no descriptor was free, not that a
 * filter is in force.
 *
 * Failed before (0.8.0 dev): the unopenable status (EMFILE) counted as a
 * filter for good, so B, and every mapping of the process's life after
 * it, stayed unprotected: SIGBUS, and `unchecked' 2.
 */
#include <inttypes.h>

#include "core.h"

#define FILLERS 4096

static void
scenario(void)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	int a = memfd_create("atk4-nofile-a", MFD_CLOEXEC);
	int b = memfd_create("atk4-nofile-b", MFD_CLOEXEC);
	static int fillers[FILLERS];
	struct rlimit rl;
	int n = 0, err;
	volatile char *pa, *pb;

	NSBT_CHECK(a >= 0 && b >= 0, "memfd_create: %s", strerror(errno));
	NSBT_CHECK(ftruncate(a, (off_t)(2 * ps)) == 0 && ftruncate(b, (off_t)(2 * ps)) == 0,
		   "ftruncate: %s", strerror(errno));
	NSBT_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit: %s", strerror(errno));
	rl.rlim_cur = 256;
	NSBT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	NSBT_CHECK(null >= 0, "open /dev/null: %s", strerror(errno));
	while (n < FILLERS && (fillers[n] = dup(null)) >= 0)
		n++;
	err = errno;
	NSBT_CHECK(n < FILLERS && err == EMFILE, "dup: %d taken, then %s", n, strerror(err));

	pa = core_map(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED, a, 0);
	NSBT_CHECK(core_stats().unchecked == 1,
		   "A, mapped with every number taken: unchecked %" PRIu64 ", not 1",
		   core_stats().unchecked);
	while (n > 0)
		close(fillers[--n]);
	close(null);

	pb = core_map(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED, b, 0);
	NSBT_CHECK(core_stats().unchecked == 1,
		   "B, mapped with numbers free again, was decided as under a filter "
		   "(unchecked %" PRIu64 ")", core_stats().unchecked);
	core_truncate(b, 0);
	NSBT_CHECK(pb[ps] == 0, "B's page past the end reads %d", pb[ps]);
	pb[0] = 'x';
	NSBT_CHECK(pb[0] == 'x', "B's first page did not keep a write");
	(void)pa;
}

static void
fresh(void *arg)
{
	char *argv[] = { (char *)"core-atk4-nofile", (char *)"scenario", NULL };

	unsetenv("NOSIGBUS_POLICY");
	if (arg)
		setenv("NOSIGBUS_LOG", "1", 1);
	else
		unsetenv("NOSIGBUS_LOG");
	unsetenv("NSB_TEST_SECCOMP");
	execv("/proc/self/exe", argv);
	fprintf(stderr, "execv /proc/self/exe: %s\n", strerror(errno));
	_exit(127);
}

int
main(int argc, char **argv)
{
	char err[8192];
	int status;

	if (argc > 1 && strcmp(argv[1], "scenario") == 0) {
		scenario();
		return 0;
	}
	status = core_run_watched(fresh, NULL, nsbt_scaled(45), NULL, "every number taken",
				  err, sizeof(err));
	core_expect_quiet(err, "every number taken");
	nsbt_expect_exit(status, 0, "every number taken at the first ask, then numbers free");

	/* With the log: A's line says why, and names no filter. */
	status = core_run_watched(fresh, (void *)1, nsbt_scaled(45), NULL,
				  "every number taken, NOSIGBUS_LOG=1", err, sizeof(err));
	nsbt_expect_exit(status, 0, "every number taken, NOSIGBUS_LOG=1");
	NSBT_CHECK(!strstr(err, ": a seccomp filter is in force"),
		   "the log says a filter is in force: %s", err);
	NSBT_CHECK(strstr(err, "no descriptor free to learn whether a seccomp filter"),
		   "no line for A, left unprotected: %s", err);
	return 0;
}
