/* SPDX-License-Identifier: MIT */
/*
 * mprotect and pkey_mprotect on protected mappings: a rescue maps the
 * zero page with the protection the program set last, so after
 * mprotect(PROT_READ) a rescued page reads zeros and a write dies by
 * SIGSEGV, exactly as the kernel patch's zero page would behave.
 *
 * And a failing mprotect never removes protection, not even for a moment
 * (issue 10 item 3, SPEC §4): threads keep faulting on fresh pages of a
 * protected mapping while another thread's mprotect over them fails with
 * ENOMEM (its range runs into an unmapped page); every fault must be
 * rescued.  The threads are pinned to different CPUs (core_pin): on an
 * idle machine they then run truly in parallel.  The mprotects start once
 * every faulter runs, and go on until the faulters have faulted
 * RACE_MIN_FAULTS times (or 5 s, scaled, have passed): a run where the
 * mprotects were over before a faulter started (0 faults, seen with the
 * threads at a real-time priority) tested nothing.
 */
#include <stdatomic.h>

#include "core.h"

struct mp {
	int type;
	int fd;
	char *p;
};

static void
mp_setup(struct mp *m, int type, size_t npages)
{
	size_t ps = nsbt_page();

	m->type = type;
	m->fd = nsbt_file(NSBT_MEMFD, npages * ps);
	m->p = core_map(NULL, npages * ps, CORE_PROT_RW, type | MAP_NOSIGBUS, m->fd, 0);
	core_truncate(m->fd, 0);
}

static const char *
tname(int type)
{
	return type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE";
}

/* mprotect(PROT_READ) then a rescue: read-only zeros; then write: SIGSEGV. */
static void
readonly_child(void *arg)
{
	int type = *(int *)arg;
	size_t ps = nsbt_page();
	struct mp m;

	mp_setup(&m, type, 2);
	NSBT_CHECK(mprotect(m.p, 2 * ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	core_expect_bytes(m.p, 0, ps, "read-only rescued page");
	printf("ok: %s: rescue after mprotect(PROT_READ) reads zeros\n", tname(type));
	nsbt_expect_signal(core_touch_status(m.p, true), SIGSEGV,
			   "write to the read-only rescued page");
	/* A write as the first access: the rescue maps it read-only, the write re-faults. */
	nsbt_expect_signal(core_touch_status(m.p + ps, true), SIGSEGV,
			   "write as the first access to a read-only protected page");
	/* Made writable again: the next rescue is writable. */
	NSBT_CHECK(mprotect(m.p + ps, ps, CORE_PROT_RW) == 0, "mprotect: %s", strerror(errno));
	memset(m.p + ps, 'w', ps);
	core_expect_bytes(m.p + ps, 'w', ps, "page made writable again");
	printf("ok: %s: read-only then writable again\n", tname(type));
}

/* Only part of the mapping is made read-only. */
static void
partial_child(void *arg)
{
	int type = *(int *)arg;
	size_t ps = nsbt_page();
	struct mp m;

	mp_setup(&m, type, 3);
	NSBT_CHECK(mprotect(m.p + ps, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	memset(m.p, 'a', ps);
	memset(m.p + 2 * ps, 'c', ps);
	core_expect_bytes(m.p, 'a', ps, "page 0 (still read-write)");
	core_expect_bytes(m.p + 2 * ps, 'c', ps, "page 2 (still read-write)");
	core_expect_bytes(m.p + ps, 0, ps, "page 1 (read-only)");
	nsbt_expect_signal(core_touch_status(m.p + ps, true), SIGSEGV,
			   "write to the read-only middle page");
	printf("ok: %s: mprotect of the middle page only\n", tname(type));
}

/* mprotect after the rescue: the kernel protects the rescued page itself. */
static void
after_rescue_child(void *arg)
{
	int type = *(int *)arg;
	size_t ps = nsbt_page();
	struct mp m;

	mp_setup(&m, type, 2);
	memset(m.p, 'x', ps);
	NSBT_CHECK(mprotect(m.p, 2 * ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	core_expect_bytes(m.p, 'x', ps, "rescued page after mprotect(PROT_READ)");
	nsbt_expect_signal(core_touch_status(m.p, true), SIGSEGV,
			   "write to a rescued page made read-only");
	core_expect_bytes(m.p + ps, 0, ps, "second page rescued read-only");
	nsbt_expect_signal(core_touch_status(m.p + ps, true), SIGSEGV,
			   "write to the second page rescued read-only");
	NSBT_CHECK(mprotect(m.p, 2 * ps, CORE_PROT_RW) == 0, "mprotect: %s", strerror(errno));
	m.p[0] = 'y';
	m.p[ps] = 'z';
	NSBT_CHECK(m.p[0] == 'y' && m.p[ps] == 'z', "writes after mprotect(RW)");
	printf("ok: %s: mprotect after a rescue\n", tname(type));
}

/* PROT_NONE: an access is a SIGSEGV, never a rescue. */
static void
prot_none_child(void *arg)
{
	int type = *(int *)arg;
	size_t ps = nsbt_page();
	struct nosigbus_stats before;
	struct mp m;

	mp_setup(&m, type, 1);
	NSBT_CHECK(mprotect(m.p, ps, PROT_NONE) == 0, "mprotect: %s", strerror(errno));
	before = core_stats();
	nsbt_expect_signal(core_touch_status(m.p, false), SIGSEGV,
			   "read of a PROT_NONE protected page");
	NSBT_CHECK(core_stats().rescues == before.rescues, "no rescue for PROT_NONE");
	NSBT_CHECK(mprotect(m.p, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	core_expect_bytes(m.p, 0, ps, "PROT_NONE made readable, then rescued");
	printf("ok: %s: PROT_NONE\n", tname(type));
}

/* pkey_mprotect with pkey -1 is mprotect; the library must follow it too. */
static void
pkey_child(void *arg)
{
	int type = *(int *)arg;
	size_t ps = nsbt_page();
	struct mp m;

	mp_setup(&m, type, 2);
	if (pkey_mprotect(m.p, 2 * ps, PROT_READ, -1) != 0) {
		if (errno == ENOSYS) {
			printf("ok: pkey_mprotect not available here (ENOSYS), nothing to check\n");
			return;
		}
		nsbt_fail("pkey_mprotect(-1): %s", strerror(errno));
	}
	core_expect_bytes(m.p, 0, ps, "rescue after pkey_mprotect(PROT_READ)");
	nsbt_expect_signal(core_touch_status(m.p, true), SIGSEGV,
			   "write after pkey_mprotect(PROT_READ)");
	NSBT_CHECK(pkey_mprotect(m.p + ps, ps, CORE_PROT_RW, -1) == 0,
		   "pkey_mprotect: %s", strerror(errno));
	memset(m.p + ps, 'k', ps);
	core_expect_bytes(m.p + ps, 'k', ps, "rescue after pkey_mprotect(RW)");
	printf("ok: %s: pkey_mprotect\n", tname(type));
}

/* ---- a failing mprotect racing with rescues ----------------------------- */

#define RACE_PAGES	256
#define RACE_FAULTERS	2
#define RACE_MIN_FAULTS	1000

static int race_mprotects = 5000;

struct race {
	int fd;
	int type;
	char *p;
	atomic_bool stop;
	atomic_int started;
	atomic_ulong faults;
	atomic_ulong remaps;
};

/* Reads every page of its half of the mapping, then maps it afresh: every read faults. */
static void *
race_faulter(void *arg)
{
	struct race *r = arg;
	static atomic_int next;
	int me = atomic_fetch_add(&next, 1) % RACE_FAULTERS;
	size_t ps = nsbt_page(), half = RACE_PAGES / RACE_FAULTERS;
	char *mine = r->p + (size_t)me * half * ps;

	core_pin(me + 1);	/* not beside the thread whose mprotect fails */
	atomic_fetch_add(&r->started, 1);
	while (!atomic_load(&r->stop)) {
		for (size_t i = 0; i < half && !atomic_load(&r->stop); i++) {
			if (mine[i * ps] != 0)
				nsbt_fail("a rescued page reads non-zero");
			atomic_fetch_add(&r->faults, 1);
		}
		if (mmap(mine, half * ps, CORE_PROT_RW, r->type | MAP_FIXED | MAP_NOSIGBUS,
			 r->fd, 0) != mine)
			nsbt_fail("faulter: mmap: %s", strerror(errno));
		atomic_fetch_add(&r->remaps, 1);
	}
	return NULL;
}

static void
failing_mprotect_child(void *arg)
{
	int type = *(int *)arg;
	size_t ps = nsbt_page();
	struct race r = { .type = type };
	pthread_t th[RACE_FAULTERS];
	struct nsbt_budget budget;
	char *area;
	int n;

	r.fd = nsbt_file(NSBT_MEMFD, 0);
	/* The mapping, then one unmapped page: mprotect over both fails with ENOMEM. */
	area = core_free_range((RACE_PAGES + 1) * ps);
	r.p = core_map(area, RACE_PAGES * ps, CORE_PROT_RW, type | MAP_FIXED | MAP_NOSIGBUS, r.fd, 0);
	errno = 0;
	NSBT_CHECK(mprotect(r.p, (RACE_PAGES + 1) * ps, CORE_PROT_RW) == -1 && errno == ENOMEM,
		   "mprotect over the unmapped page: %s", strerror(errno));
	core_pin(0);
	for (int i = 0; i < RACE_FAULTERS; i++)
		if (pthread_create(&th[i], NULL, race_faulter, &r) != 0)
			nsbt_fail("pthread_create");
	while (atomic_load(&r.started) < RACE_FAULTERS)
		sched_yield();
	budget = nsbt_budget_start(5);
	for (n = 0; n < race_mprotects ||
		    (atomic_load(&r.faults) < RACE_MIN_FAULTS && !nsbt_budget_spent(&budget));
	     n++) {
		errno = 0;
		if (mprotect(r.p, (RACE_PAGES + 1) * ps, CORE_PROT_RW) != -1 || errno != ENOMEM)
			nsbt_fail("mprotect %d: %s, expected -1/ENOMEM", n, strerror(errno));
	}
	atomic_store(&r.stop, true);
	for (int i = 0; i < RACE_FAULTERS; i++)
		pthread_join(th[i], NULL);
	printf("ok: %s: %d failing mprotects while %d threads faulted %lu times (%lu fresh "
	       "mappings): every fault rescued\n", tname(type), n, RACE_FAULTERS,
	       atomic_load(&r.faults), atomic_load(&r.remaps));
}

int
main(void)
{
	static const int types[] = { MAP_PRIVATE, MAP_SHARED };

	core_require_library();
	for (int i = 0; i < 2; i++) {
		int t = types[i];

		nsbt_expect_exit(nsbt_run(readonly_child, &t), 0, "mprotect(PROT_READ) then rescue");
		nsbt_expect_exit(nsbt_run(partial_child, &t), 0, "partial mprotect");
		nsbt_expect_exit(nsbt_run(after_rescue_child, &t), 0, "mprotect after rescue");
		nsbt_expect_exit(nsbt_run(prot_none_child, &t), 0, "PROT_NONE");
		nsbt_expect_exit(nsbt_run(pkey_child, &t), 0, "pkey_mprotect");
	}
	for (int i = 0; i < 2; i++) {
		int t = types[i];
		char err[4096];
		int st = core_run_watched(failing_mprotect_child, &t, nsbt_scaled(45), NULL,
					  "failing mprotect racing with rescues", err, sizeof(err));

		core_expect_quiet(err, "failing mprotect racing with rescues");
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS)
			nsbt_fail("%s: a fault in a protected mapping was not rescued while another "
				  "thread's mprotect failed (killed by SIGBUS): the failing mprotect "
				  "removed the protection for a moment", tname(t));
		nsbt_expect_exit(st, 0, "failing mprotect racing with rescues");
	}
	return 0;
}
