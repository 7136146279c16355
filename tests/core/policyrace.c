/* SPDX-License-Identifier: MIT */
/*
 * A mapping only the policy protects (no MAP_NOSIGBUS, nothing recorded
 * where it goes) is made by the kernel before the table lock is taken,
 * and recorded after (mman.c do_mmap).  Here other threads change the
 * table all the time in that window, on CPUs of their own (core_pin):
 *   mapper   maps an empty memfd (NOSIGBUS_POLICY=shm protects it), reads
 *            every page at once (each a fault past the end of the file,
 *            which must be rescued: its record was there before mmap
 *            returned), and unmaps it;
 *   churn    maps another empty memfd the same way and takes it away in
 *            turn by munmap, a shrinking mremap (then munmap), mprotect
 *            (then munmap), MADV_DONTNEED (then munmap) and
 *            nosigbus_unprotect (then munmap): cuts and splits of
 *            records next to the mapper's addresses, which the kernel
 *            reuses;
 *   forker   (the main thread) forks; the child reads a protected mapping
 *            made before the fork and one it makes itself (both rescued),
 *            and exits 0.
 * At the end nothing is recorded at any address either thread used last
 * (every mapping went through the library's munmap): a record cut or
 * made in the wrong order would be left over.  Everything in a child
 * under a SIGKILL watchdog; the child's stderr must have no line of the
 * library's.
 *
 * Then fork in the window: one thread maps and unmaps an empty memfd
 * (policy-protected) all the time while another forks; each child looks
 * for that mapping in its /proc/self/maps and reads it.  A mapping the
 * child has was made before the fork, so it must have its record too:
 * the fork handler waits for a policy mapping between the kernel's mmap
 * and its record (process.c).  Before it did, the child of a fork in that
 * window had the mapping and no record, and died of SIGBUS (within the
 * first few forks here).
 *
 * Usage: core-policyrace
 */
#include <inttypes.h>
#include <stdatomic.h>

#include "core.h"

#define PAGES	4
#define LAST	16

static size_t ps;
static volatile unsigned long *progress;
static atomic_bool stop;
static atomic_ulong mapped, churned, forks;
static uintptr_t mapper_last[LAST], churn_last[LAST];

static int
empty_memfd(const char *name)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	return fd;
}

static void *
mapper(void *arg)
{
	int fd = *(int *)arg;
	unsigned long n;

	core_pin(0);
	for (n = 0; !atomic_load(&stop); n++) {
		volatile char *p = mmap(NULL, PAGES * ps, PROT_READ, MAP_SHARED, fd, 0);

		NSBT_CHECK(p != MAP_FAILED, "mapper: mmap: %s", strerror(errno));
		for (size_t i = 0; i < PAGES; i++)
			NSBT_CHECK(p[i * ps] == 0, "mapper: page %zu of a rescued mapping is not zero", i);
		NSBT_CHECK(munmap((void *)p, PAGES * ps) == 0, "mapper: munmap: %s", strerror(errno));
		mapper_last[n % LAST] = (uintptr_t)p;
		atomic_fetch_add(&mapped, 1);
		__atomic_add_fetch(progress, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void *
churn(void *arg)
{
	int fd = *(int *)arg;
	unsigned long n;

	core_pin(1);
	for (n = 0; !atomic_load(&stop); n++) {
		char *p = mmap(NULL, PAGES * ps, PROT_READ, MAP_SHARED, fd, 0);
		size_t len = PAGES * ps;

		NSBT_CHECK(p != MAP_FAILED, "churn: mmap: %s", strerror(errno));
		switch (n % 5) {
		case 1: {
			char *q = mremap(p, len, len / 2, 0);

			NSBT_CHECK(q == p, "churn: shrinking mremap: %s", strerror(errno));
			len /= 2;
			break;
		}
		case 2:
			NSBT_CHECK(mprotect(p + ps, ps, PROT_NONE) == 0, "churn: mprotect: %s",
				   strerror(errno));
			break;
		case 3:
			NSBT_CHECK(madvise(p, len, MADV_DONTNEED) == 0, "churn: madvise: %s",
				   strerror(errno));
			break;
		case 4:
			NSBT_CHECK(nosigbus_unprotect(p + ps, ps) == 0, "churn: nosigbus_unprotect: %s",
				   strerror(errno));
			break;
		}
		NSBT_CHECK(munmap(p, len) == 0, "churn: munmap: %s", strerror(errno));
		churn_last[n % LAST] = (uintptr_t)p;
		atomic_fetch_add(&churned, 1);
	}
	return NULL;
}

static void
fork_child(char *before, int fd)
{
	volatile char *p;

	core_no_core();
	if (before[0] != 0 || before[(PAGES - 1) * ps] != 0)
		_exit(4);
	p = mmap(NULL, PAGES * ps, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		_exit(5);
	for (size_t i = 0; i < PAGES; i++)
		if (p[i * ps] != 0)
			_exit(6);
	_exit(0);
}

/* ---- fork in the window ------------------------------------------------ */

/* The child of a fork made while forker_mapper maps and unmaps: a mapping
 * of that memfd in its address space was made before the fork, so it is
 * one the parent's thread had made (or was making) then, and it must be
 * protected in the child as it is in the parent.  Exit 0: none there;
 * 1: one there, read past the end of its file and rescued; a SIGBUS: one
 * there, not recorded. */
static void
window_child(void)
{
	char line[512];
	FILE *f;
	uintptr_t lo = 0, hi;
	bool found = false;

	core_no_core();
	f = fopen("/proc/self/maps", "re");
	if (!f)
		_exit(5);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "memfd:policyrace-fork") &&
			sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2;
	fclose(f);
	if (!found)
		_exit(0);
	(void)*(volatile char *)lo;
	_exit(1);
}

static void *
forker_mapper(void *arg)
{
	int fd = *(int *)arg;

	core_pin(0);
	while (!atomic_load(&stop)) {
		volatile char *p = mmap(NULL, PAGES * ps, PROT_READ, MAP_SHARED, fd, 0);

		NSBT_CHECK(p != MAP_FAILED, "mapper: mmap: %s", strerror(errno));
		NSBT_CHECK(p[0] == 0, "mapper: a rescued page is not zero");
		NSBT_CHECK(munmap((void *)p, PAGES * ps) == 0, "mapper: munmap: %s", strerror(errno));
		atomic_fetch_add(&mapped, 1);
		__atomic_add_fetch(progress, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void
window_run(void *arg)
{
	int fd = empty_memfd("policyrace-fork");
	struct nsbt_budget budget = nsbt_budget_start(2), most = nsbt_budget_start(20);
	unsigned long present = 0, n;
	pthread_t m;

	(void)arg;
	core_pin(1);
	NSBT_CHECK(pthread_create(&m, NULL, forker_mapper, &fd) == 0, "pthread_create");
	for (n = 0; (!nsbt_budget_spent(&budget) || n < 200) && !nsbt_budget_spent(&most); n++) {
		pid_t pid = fork();
		int st;

		NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0)
			window_child();
		st = core_wait_watchdog(pid, nsbt_scaled(30), NULL, "a child forked while a thread mapped");
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS)
			nsbt_fail("fork %lu: the child died of SIGBUS reading a protected mapping its parent "
				  "had made before the fork: the child has the mapping but not its record",
				  n);
		NSBT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) <= 1, "fork %lu: the child ended with status %#x",
			   n, st);
		present += WEXITSTATUS(st) == 1;
		__atomic_add_fetch(progress, 1, __ATOMIC_RELAXED);
	}
	atomic_store(&stop, true);
	pthread_join(m, NULL);
	printf("ok: policyrace: %lu forks while a thread made and unmapped policy mappings (%lu made): in "
	       "the %lu children that had one, it was protected\n", n, atomic_load(&mapped), present);
}

static void
race_child(void *arg)
{
	int fa = empty_memfd("policyrace-a"), fb = empty_memfd("policyrace-b"),
	    fc = empty_memfd("policyrace-c");
	struct nsbt_budget budget = nsbt_budget_start(2), most = nsbt_budget_start(20);
	char *before = core_map(NULL, PAGES * ps, PROT_READ, MAP_SHARED, fc, 0);
	pthread_t m, c;

	(void)arg;
	NSBT_CHECK(before[0] == 0, "a read of the first mapping");
	NSBT_CHECK(pthread_create(&m, NULL, mapper, &fa) == 0, "pthread_create");
	NSBT_CHECK(pthread_create(&c, NULL, churn, &fb) == 0, "pthread_create");
	while ((!nsbt_budget_spent(&budget) || atomic_load(&mapped) < 2000 ||
		atomic_load(&forks) < 20) && !nsbt_budget_spent(&most)) {
		pid_t pid = fork();
		int st;

		NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0)
			fork_child(before, fc);
		st = core_wait_watchdog(pid, nsbt_scaled(30), NULL, "a child forked during the race");
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS)
			nsbt_fail("a child forked while threads mapped died of SIGBUS: not rescued");
		nsbt_expect_exit(st, 0, "a child forked while threads mapped");
		atomic_fetch_add(&forks, 1);
	}
	atomic_store(&stop, true);
	pthread_join(m, NULL);
	pthread_join(c, NULL);
	NSBT_CHECK(munmap(before, PAGES * ps) == 0, "munmap: %s", strerror(errno));
	for (int i = 0; i < LAST; i++) {
		if (mapper_last[i])
			core_expect_no_record((void *)mapper_last[i], "an address the mapper unmapped");
		if (churn_last[i])
			core_expect_no_record((void *)churn_last[i], "an address churn unmapped");
	}
	printf("ok: policyrace: %lu policy mappings made, read past the end of their file and unmapped "
	       "while another thread made and took away %lu (munmap, mremap, mprotect, madvise, "
	       "nosigbus_unprotect) and %lu children were forked: every fault rescued, no record "
	       "left\n", atomic_load(&mapped), atomic_load(&churned), atomic_load(&forks));
}

int
main(int argc, char **argv)
{
	char err[8192];
	int st;

	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "shm");
	core_require_library();
	ps = nsbt_page();
	progress = core_progress();
	st = core_run_watched(race_child, NULL, nsbt_scaled(45), progress, "policy mappings racing", err,
			      sizeof(err));
	core_expect_quiet(err, "policy mappings racing");
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS)
		nsbt_fail("policy mappings racing: killed by SIGBUS: a fault in a policy mapping was not "
			  "rescued");
	nsbt_expect_exit(st, 0, "policy mappings racing");
	atomic_store(&stop, false);
	atomic_store(&mapped, 0);
	st = core_run_watched(window_run, NULL, nsbt_scaled(45), progress, "fork in a policy mapping's window", err,
			      sizeof(err));
	core_expect_quiet(err, "fork in a policy mapping's window");
	nsbt_expect_exit(st, 0, "fork in a policy mapping's window");
	return 0;
}
