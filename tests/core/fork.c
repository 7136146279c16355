/* SPDX-License-Identifier: MIT */
/*
 * fork(): the child has the parent's records and protection, its rescues
 * are its own, it can make new protected mappings, and no lock of the
 * library is ever held in it, even when another thread of the parent was
 * in the middle of a mapping call at the moment of the fork.
 *
 * And fork during rescues (issue 10 item 4, SPEC §7): threads keep
 * rescuing while another forks many times; each child touches every page
 * those threads work on and must exit normally.  A claim that a parent's
 * thread held on a page at the moment of the fork must not be the child's:
 * a child that finds it held would fault on that page forever.  The
 * parent's watchdog kills a child that does not finish (SIGKILL) and the
 * test fails with a message; the parent's own watchdog fails the test
 * when no child has been forked for 30 s (scaled), well inside meson's
 * timeout.  Fill page here, fill range re-executed.
 */
#include <sched.h>
#include <stdatomic.h>

#include "core.h"

#define NPAGES 4

static int fd;
static char *p;

/* The child: protected pages inherited from the parent. */
static void
inherited_child(void *arg)
{
	size_t ps = nsbt_page();
	struct nosigbus_stats before = core_stats();

	(void)arg;
	NSBT_CHECK(before.mappings >= 1, "the child sees the parent's record (mappings %llu)",
		   (unsigned long long)before.mappings);
	/* The parent rescued page 0 and wrote to it before the fork. */
	core_expect_bytes(p, 'P', ps, "page 0 as the parent left it");
	core_expect_bytes(p + ps, 0, ps, "page 1 rescued in the child");
	memset(p + ps, 'C', ps);
	core_expect_bytes(p + ps, 'C', ps, "page 1 written in the child");
	NSBT_CHECK(core_stats().rescues == before.rescues + 1, "the child counted its rescue");
	printf("ok: child: inherited protection, own rescue\n");

	/* A new protected mapping in the child. */
	{
		int fd2 = nsbt_file(NSBT_TMPFS, 2 * ps);
		char *q = core_map(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd2, 0);

		core_truncate(fd2, 0);
		core_expect_bytes(q, 0, 2 * ps, "new protected mapping in the child");
		NSBT_CHECK(munmap(q, 2 * ps) == 0, "munmap: %s", strerror(errno));
		printf("ok: child: new protected mapping rescued\n");
	}
	/* An unflagged mapping still dies in the child. */
	{
		int fd3 = nsbt_file(NSBT_MEMFD, ps);
		char *u = core_map(NULL, ps, PROT_READ, MAP_PRIVATE, fd3, 0);

		core_truncate(fd3, 0);
		nsbt_expect_signal(core_touch_status(u, false), SIGBUS,
				   "unflagged mapping in the child (grandchild)");
	}
}

/* ---- fork while another thread holds the library's locks ------------ */

#define FORKS 64
#define MAPPER_MAX 200000

static atomic_int stop;
static atomic_int mapper_iters;

static void *
mapper(void *arg)
{
	size_t ps = nsbt_page();
	int zfd = *(int *)arg;

	for (int i = 0; i < MAPPER_MAX && !atomic_load(&stop); i++) {
		char *q = mmap(NULL, 2 * ps, CORE_PROT_RW,
			       (i & 1 ? MAP_SHARED : MAP_PRIVATE) | MAP_NOSIGBUS, zfd, 0);

		if (q == MAP_FAILED)
			nsbt_fail("mapper: mmap: %s", strerror(errno));
		q[(i & 1) * ps] = 1;	/* a rescue */
		if (mprotect(q, ps, PROT_READ) != 0)
			nsbt_fail("mapper: mprotect: %s", strerror(errno));
		if (munmap(q, 2 * ps) != 0)
			nsbt_fail("mapper: munmap: %s", strerror(errno));
		atomic_fetch_add(&mapper_iters, 1);
	}
	return NULL;
}

static void
forked_while_busy_child(void *arg)
{
	size_t ps = nsbt_page();
	int zfd = *(int *)arg;
	char *q;

	/* A deadlock on a lock held at fork time would hang: end it instead. */
	core_no_core();
	alarm(nsbt_scaled(20));
	q = mmap(NULL, 2 * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_NOSIGBUS, zfd, 0);
	if (q == MAP_FAILED)
		_exit(10);
	if (q[ps] != 0)
		_exit(11);
	q[0] = 5;
	if (q[0] != 5)
		_exit(12);
	if (mremap(q, 2 * ps, 3 * ps, MREMAP_MAYMOVE) == MAP_FAILED)
		_exit(13);
	/* The page the parent's thread may have been rescuing at fork time. */
	if (p[2 * ps] != 0)
		_exit(14);
	_exit(0);
}

/* ---- fork during rescues ------------------------------------------------ */

#define RESCUERS	3
#define REGION_PAGES	8
#define RESCUE_FORKS	250

static char *regions;		/* RESCUERS regions of REGION_PAGES pages */
static int rescue_fd;
static atomic_bool rescuers_stop;
static atomic_ulong rescued;
static volatile unsigned long *forked;	/* children done, for the watchdog */

/* Reads every page of its region (each read a rescue), then maps it afresh. */
static void *
rescuer(void *arg)
{
	size_t ps = nsbt_page();
	char *mine = regions + (size_t)(intptr_t)arg * REGION_PAGES * ps;
	int type = (intptr_t)arg & 1 ? MAP_SHARED : MAP_PRIVATE;

	while (!atomic_load(&rescuers_stop)) {
		for (int i = 0; i < REGION_PAGES; i++) {
			if (mine[(size_t)i * ps + 99] != 0)
				nsbt_fail("rescuer: a rescued page reads non-zero");
			atomic_fetch_add(&rescued, 1);
		}
		if (mmap(mine, REGION_PAGES * ps, CORE_PROT_RW, type | MAP_FIXED | MAP_NOSIGBUS,
			 rescue_fd, 0) != mine)
			nsbt_fail("rescuer: mmap: %s", strerror(errno));
	}
	return NULL;
}

/* The child: reads and writes every page the rescuers work on, then exits. */
static void
touch_all_child(void *arg)
{
	size_t ps = nsbt_page();

	(void)arg;
	for (size_t i = 0; i < RESCUERS * REGION_PAGES; i++) {
		volatile char *pg = regions + i * ps;

		if (pg[99] != 0)
			_exit(20);
		pg[7] = 'c';
		if (pg[7] != 'c')
			_exit(21);
	}
	_exit(0);
}

static void
fork_during_rescues(const char *fill)
{
	size_t ps = nsbt_page();
	pthread_t th[RESCUERS];
	char name[160];

	rescue_fd = nsbt_file(NSBT_MEMFD, 0);
	regions = core_map(NULL, RESCUERS * REGION_PAGES * ps, CORE_PROT_RW,
			   MAP_PRIVATE | MAP_NOSIGBUS, rescue_fd, 0);
	for (intptr_t i = 0; i < RESCUERS; i++)
		if (pthread_create(&th[i], NULL, rescuer, (void *)i) != 0)
			nsbt_fail("pthread_create");
	while (atomic_load(&rescued) < 1000)
		sched_yield();
	for (int i = 0; i < RESCUE_FORKS; i++) {
		int status;

		snprintf(name, sizeof(name), "fill=%s: child %d of %d forked while %d threads rescue",
			 fill, i, RESCUE_FORKS, RESCUERS);
		status = core_run_watched(touch_all_child, NULL, nsbt_scaled(20), NULL, name, NULL, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			nsbt_fail("%s: %s (20/21: a page read wrong)", name, nsbt_status_str(status));
		(*forked)++;
	}
	atomic_store(&rescuers_stop, true);
	for (int i = 0; i < RESCUERS; i++)
		pthread_join(th[i], NULL);
	printf("ok: fill=%s: %d children forked while %d threads rescued (%lu rescues): each "
	       "touched every page and exited\n", fill, RESCUE_FORKS, RESCUERS,
	       atomic_load(&rescued));
}

static void
fork_during_rescues_child(void *arg)
{
	fork_during_rescues(arg);
}

/* fork_during_rescues(fill) in a child watched on its forks: no child
 * done for 30 s (scaled; each child has 20 s) is a hang. */
static void
fork_during_rescues_watched(const char *fill)
{
	char what[64];

	snprintf(what, sizeof(what), "fork during rescues, fill=%s", fill);
	forked = core_progress();
	nsbt_expect_exit(core_run_watched(fork_during_rescues_child, (void *)fill,
					  nsbt_scaled(30), forked, what, NULL, 0),
			 0, what);
}

int
main(int argc, char **argv)
{
	static const char *const range_env[] = { "NOSIGBUS_FILL=range", NULL };
	size_t ps = nsbt_page();
	pthread_t th;
	int zfd;

	core_require_library();
	nsbt_require_tmpfs();	/* a forked child maps a tmpfs file */
	/* The unflagged memfd here must be unprotected: the default is shm. */
	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "flag");
	if (argc > 1) {
		if (strcmp(argv[1], "range") != 0)
			nsbt_fail("unknown scenario %s", argv[1]);
		fork_during_rescues_watched("range");
		return 0;
	}
	fd = nsbt_file(NSBT_MEMFD, NPAGES * ps);
	p = core_map(NULL, NPAGES * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_NOSIGBUS, fd, 0);
	core_truncate(fd, 0);
	memset(p, 'P', ps);	/* a rescue in the parent before the fork */

	nsbt_expect_exit(nsbt_run(inherited_child, NULL), 0, "forked child is protected");
	/* The child's rescue of page 1 was its own: in the parent it is still to come. */
	{
		struct nosigbus_stats before = core_stats();

		core_expect_bytes(p + ps, 0, ps, "page 1 in the parent after the child wrote it");
		NSBT_CHECK(core_stats().rescues == before.rescues + 1,
			   "the parent rescued page 1 itself");
		printf("ok: parent: the child's rescue did not touch the parent\n");
	}

	zfd = nsbt_file(NSBT_MEMFD, 0);
	if (pthread_create(&th, NULL, mapper, &zfd) != 0)
		nsbt_fail("pthread_create");
	for (int i = 0; i < FORKS; i++) {
		int status;

		/* Wait until the mapper has really started, then fork repeatedly. */
		while (i == 0 && atomic_load(&mapper_iters) == 0)
			sched_yield();
		status = nsbt_run(forked_while_busy_child, &zfd);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			nsbt_fail("fork %d while another thread maps: child %s "
				  "(10-14: a check failed; SIGALRM: deadlock on a "
				  "lock held at fork time)", i, nsbt_status_str(status));
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	printf("ok: %d forks while another thread mapped, unmapped and rescued "
	       "(%d iterations): every child could map and rescue\n",
	       FORKS, atomic_load(&mapper_iters));

	fork_during_rescues_watched("page");
	nsbt_expect_exit(core_reexec("range", range_env), 0, "fork during rescues, fill=range");
	return 0;
}
