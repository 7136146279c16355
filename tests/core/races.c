/* SPDX-License-Identifier: MIT */
/*
 * Races between threads that run truly in parallel (issue 39 item 7):
 * each scenario runs in a child of its own under a SIGKILL watchdog, its
 * threads pinned to different CPUs (core_pin), so that an idle machine
 * runs them side by side, for a bounded time (1 s, scaled, and on until
 * RACE_MIN_FAULTS faults where the scenario counts them, at most 10 s).
 *
 * A failing call over a protected mapping while another thread faults in
 * it, past the end of its truncated file: every fault must be rescued
 * (the process died of SIGBUS when a failing mprotect briefly took the
 * records away).  The faulter reads every page, then maps its mapping
 * afresh, so that every pass faults again.
 *   hole     mprotect over the mapping and the unmapped page after it,
 *            alternately to PROT_READ and back: ENOMEM after the kernel
 *            changed the mapping;
 *   middle   the same with the unmapped page in the middle of the mapping
 *            (two records; the kernel changes the lower one);
 *   eacces   a MAP_SHARED mapping of a read-only descriptor, mprotect
 *            PROT_WRITE: EACCES (its last page, a mapping of its own, is
 *            never read, so that a file VMA always refuses: where every
 *            page is replaced the kernel sees private memory only, and
 *            the call succeeds);
 *   pkey     pkey_mprotect with a key never allocated: EINVAL (the
 *            library asks the kernel about the span with protection keys,
 *            from smaps);
 *   remap    the hole's mprotect, while a third thread maps the mapping
 *            afresh with MAP_FIXED at times of its own and the faulter
 *            reads all the time: a MAP_FIXED whose quick check fell
 *            between the cut and the inserts of the failed mprotect's
 *            resync went without flux, and a fault between its system
 *            call and its records found the old record or none
 *            (unit-ranges gap holds that window open; here it is only
 *            raced).
 * And, writers: six threads, three on each of two CPUs, add 1 to the same
 * words of the same pages of a truncated shared mapping at the same time
 * (a fresh mapping each round): every page is replaced once, so every
 * addition is there at the end; a page replaced twice loses some, and a
 * retry that never ends hangs (the watchdog).
 *
 * Runs each under NOSIGBUS_FILL page, range and auto (re-executed).
 *
 * Usage: core-races [one]
 */
#include <stdatomic.h>

#include "core.h"

#define PAGES		64
#define RACE_MIN_FAULTS	1000
#define WRITERS		6

enum scenario { S_HOLE, S_MIDDLE, S_EACCES, S_PKEY, S_REMAP, S_COUNT };
static const char *const names[S_COUNT] = { "hole", "middle", "eacces", "pkey", "remap" };

struct race {
	struct core_race c;	/* first: the callbacks' pointer is ours */
	enum scenario s;
	int fd;			/* the descriptor the mapping is made from */
	int prot;		/* the mapping's protection */
	atomic_ulong remaps;
};

static size_t ps;

/* The mapping made afresh over itself (the middle one around its hole;
 * eacces's last page a mapping of its own, which no fill reaches). */
static void
map_afresh(struct core_race *c)
{
	struct race *r = (struct race *)c;
	char *p = c->p;
	size_t half = PAGES / 2;

	if (r->s == S_EACCES) {
		char *last = p + (PAGES - 1) * ps;

		NSBT_CHECK(mmap(p, (PAGES - 1) * ps, r->prot, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS,
				r->fd, 0) == p, "mmap afresh: %s", strerror(errno));
		NSBT_CHECK(mmap(last, ps, r->prot, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, r->fd,
				(off_t)((PAGES - 1) * ps)) == last, "mmap afresh: %s", strerror(errno));
		return;
	}
	if (r->s == S_MIDDLE) {
		NSBT_CHECK(mmap(p, half * ps, r->prot, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS,
				r->fd, 0) == p, "mmap afresh: %s", strerror(errno));
		NSBT_CHECK(mmap(p + (half + 1) * ps, (half - 1) * ps, r->prot,
				MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, r->fd, (off_t)((half + 1) * ps)) ==
			   p + (half + 1) * ps, "mmap afresh: %s", strerror(errno));
		return;
	}
	NSBT_CHECK(mmap(p, PAGES * ps, r->prot, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, r->fd, 0) ==
		   p, "mmap afresh: %s", strerror(errno));
}

/* Does the faulter leave page i unread?  The middle's hole, and the page
 * that keeps eacces's mprotect failing. */
static bool
unread(const struct core_race *c, size_t i)
{
	const struct race *r = (const struct race *)c;

	return (r->s == S_MIDDLE && i == PAGES / 2) || (r->s == S_EACCES && i == PAGES - 1);
}

static void *
remapper(void *arg)
{
	struct race *r = arg;
	unsigned long n = 0;

	core_pin(0);
	while (!atomic_load(&r->c.stop)) {
		/* Some work between the calls, so that they fall anywhere in
		 * the other thread's mprotect. */
		for (unsigned long k = 0; k < (n * 7919) % 4096; k++)
			__asm__ volatile("" ::: "memory");
		map_afresh(&r->c);
		atomic_fetch_add(&r->remaps, 1);
		n++;
	}
	return NULL;
}

/* One failing call; its errno, or 0 if it succeeded. */
static int
failing_call(struct race *r, unsigned long n)
{
	static const int prots[2] = { PROT_READ, PROT_READ | PROT_WRITE };
	int ret;

	errno = 0;
	switch (r->s) {
	case S_HOLE:
		ret = mprotect(r->c.p, (PAGES + 1) * ps, prots[n & 1]);
		break;
	case S_MIDDLE:
		ret = mprotect(r->c.p, PAGES * ps, prots[n & 1]);
		break;
	case S_EACCES:
		ret = mprotect(r->c.p, PAGES * ps, PROT_READ | PROT_WRITE);
		break;
	case S_PKEY:
		ret = pkey_mprotect(r->c.p, PAGES * ps, PROT_READ, 13);
		break;
	default:
		ret = mprotect(r->c.p, (PAGES + 1) * ps, PROT_READ | PROT_WRITE);
		break;
	}
	return ret == 0 ? 0 : errno;
}

static const int want[S_COUNT] = { ENOMEM, ENOMEM, EACCES, EINVAL, ENOMEM };

/* The race's call: it must fail as expected. */
static void
race_call(struct core_race *c, unsigned long n)
{
	struct race *r = (struct race *)c;
	int err = failing_call(r, n);

	if (err != want[r->s])
		nsbt_fail("%s: call %lu gave %s, expected %s", names[r->s], n, strerror(err),
			  strerror(want[r->s]));
}

static void
failing_child(void *arg)
{
	enum scenario s = *(enum scenario *)arg;
	struct race r = { .c = { .what = names[s], .pages = PAGES, .unread = unread,
				 /* In remap, the third thread maps it afresh. */
				 .afresh = s == S_REMAP ? NULL : map_afresh },
			  .s = s, .prot = CORE_PROT_RW };
	unsigned long n;
	char *area;
	int fd, err;

	fd = nsbt_file(NSBT_MEMFD, PAGES * ps);
	r.fd = fd;
	if (r.s == S_EACCES) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		r.fd = open(path, O_RDONLY | O_CLOEXEC);
		NSBT_CHECK(r.fd >= 0, "open %s read-only: %s", path, strerror(errno));
		r.prot = PROT_READ;
	}
	/* The mapping, then one unmapped page. */
	area = core_free_range((PAGES + 1) * ps);
	r.c.p = area;
	map_afresh(&r.c);
	if (r.s == S_MIDDLE)
		NSBT_CHECK(munmap(r.c.p + PAGES / 2 * ps, ps) == 0, "munmap: %s", strerror(errno));
	core_truncate(fd, 0);
	err = failing_call(&r, 1);
	if (r.s == S_PKEY && err == ENOSYS)
		nsbt_skip("pkey: the kernel has no pkey_mprotect (ENOSYS)");
	NSBT_CHECK(err == want[r.s], "%s: the call gave %s, expected %s", names[r.s], strerror(err),
		   strerror(want[r.s]));
	n = core_race_run(&r.c, RACE_MIN_FAULTS, race_call, r.s == S_REMAP ? remapper : NULL);
	printf("ok: %s: %lu failing calls (%s) while a thread read %lu pages (each pass faulting again)%s: every fault "
	       "rescued\n", names[r.s], n, strerror(want[r.s]), atomic_load(&r.c.faults),
	       r.s == S_REMAP ? nsbt_fmt(" and another mapped it afresh %lu times",
					 atomic_load(&r.remaps)) : "");
}

/* ---- writers ----------------------------------------------------------- */

static _Atomic uint64_t *words;	/* the mapping: page i, word i % 8 (a cache line apart) */
static pthread_barrier_t writers_start;

static _Atomic uint64_t *
word_of(size_t page)
{
	return (_Atomic uint64_t *)((char *)words + page * ps + (page % 8) * 64);
}

static void *
writer(void *arg)
{
	int id = (int)(intptr_t)arg;

	core_pin(id);	/* three on each of two CPUs */
	pthread_barrier_wait(&writers_start);
	for (size_t i = 0; i < PAGES; i++)
		atomic_fetch_add(word_of(i), 1);
	return NULL;
}

static void
writers_child(void *arg)
{
	struct nsbt_budget budget = nsbt_budget_start(1);
	unsigned long rounds = 0;

	(void)arg;
	while (!nsbt_budget_spent(&budget) || rounds < 20) {
		int fd = nsbt_file(NSBT_MEMFD, PAGES * ps);
		pthread_t t[WRITERS];

		words = core_map(NULL, PAGES * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
		core_truncate(fd, 0);
		close(fd);
		pthread_barrier_init(&writers_start, NULL, WRITERS);
		for (int i = 0; i < WRITERS; i++)
			NSBT_CHECK(pthread_create(&t[i], NULL, writer, (void *)(intptr_t)i) == 0,
				   "pthread_create");
		for (int i = 0; i < WRITERS; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&writers_start);
		for (size_t i = 0; i < PAGES; i++)
			NSBT_CHECK(atomic_load(word_of(i)) == WRITERS,
				   "round %lu, page %zu: %llu of %d additions: a page was replaced "
				   "after a thread wrote into it", rounds, i,
				   (unsigned long long)atomic_load(word_of(i)), WRITERS);
		NSBT_CHECK(munmap((void *)words, PAGES * ps) == 0, "munmap: %s", strerror(errno));
		rounds++;
		core_race_tick();
	}
	printf("ok: writers: %lu rounds of %d threads adding into the same %d truncated pages: "
	       "none lost\n", rounds, WRITERS, PAGES);
}

/* A scenario's skip (exit 77, said there) is not a failure. */
static void
run_one(void (*fn)(void *), void *arg, const char *what)
{
	int st = core_race_watched(fn, arg, what);

	if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
		return;
	nsbt_expect_exit(st, 0, what);
}

int
main(int argc, char **argv)
{
	core_require_library();
	ps = nsbt_page();
	if (argc > 1 && strcmp(argv[1], "one") == 0) {
		for (enum scenario s = 0; s < S_COUNT; s++)
			run_one(failing_child, &s, nsbt_fmt("failing call racing with rescues: %s",
							    names[s]));
		run_one(writers_child, NULL, "six writers in the same truncated pages");
		return 0;
	}
	core_reexec_each_fill("one", "races");
	return 0;
}
