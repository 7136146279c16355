/* SPDX-License-Identifier: MIT */
/*
 * Changes the table makes in both copies at once, with no switch of
 * copies and no wait for readers, while other threads' faults are
 * rescued from the same copies (ranges.c, flux_covers): an mprotect of a
 * record (its protection, in place, inside the span in flux) and the
 * munmap of the lowest record (one count less).  A faulter reads every
 * page of a truncated protected mapping, mapped afresh every pass so that
 * every pass faults again, while the main thread (another CPU) makes
 * mprotect pairs of a one-page record and mmap+munmap pairs of a one-page
 * memfd (the kernel puts the new mapping lowest, top-down), the faulter's
 * own remaps changing the table between them.  Every fault must be
 * rescued; afterwards the record has the protection of the last mprotect
 * (as /proc/self/maps says), still protects its page, and no record is
 * left where the last pair's mapping was.
 *
 * Runs under NOSIGBUS_FILL page, range and auto (re-executed).
 *
 * Usage: core-inplace [one]
 */
#include <stdatomic.h>

#include "core.h"

#define PAGES		64
#define MIN_FAULTS	1000

/* The race (core.h), the faulter's file, and what the calls change. */
struct race {
	struct core_race c;	/* first: the callbacks' pointer is ours */
	int fd, pfd;
	char *hole, *rec;
};

static size_t ps;

static void
afresh(struct core_race *c)
{
	struct race *r = (struct race *)c;

	NSBT_CHECK(mmap(c->p, PAGES * ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS,
			r->fd, 0) == c->p, "mmap afresh: %s", strerror(errno));
}

/* A pair: the memfd's first page mapped over our page at hole, unmapped,
 * and the page ours again (nothing else took it meanwhile). */
static void
pair(char *hole, int pfd)
{
	NSBT_CHECK(mmap(hole, ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, pfd, 0) == hole,
		   "mmap: %s", strerror(errno));
	NSBT_CHECK(munmap(hole, ps) == 0, "munmap: %s", strerror(errno));
	NSBT_CHECK(mmap(hole, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) ==
			   hole, "the page below the records taken meanwhile: %s", strerror(errno));
}

/* The calls: an mprotect pair of the record, and a memfd pair. */
static void
calls(struct core_race *c, unsigned long n)
{
	struct race *r = (struct race *)c;

	(void)n;
	NSBT_CHECK(mprotect(r->rec, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	NSBT_CHECK(mprotect(r->rec, ps, CORE_PROT_RW) == 0, "mprotect: %s", strerror(errno));
	pair(r->hole, r->pfd);
}

static void
child(void *arg)
{
	struct race r = { .c = { .what = "in-place changes", .pages = PAGES, .afresh = afresh } };
	unsigned long n;
	char *hole, *rec;
	const char *line;
	int fd, pfd;

	(void)arg;
	/* From the top: the faulter's mapping, the record, and a page of
	 * our own below them (PROT_NONE while no pair's mapping is there),
	 * so that the pair's mapping is the lowest record. */
	hole = core_map(NULL, (PAGES + 2) * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			-1, 0);
	r.fd = nsbt_file(NSBT_MEMFD, PAGES * ps);
	r.c.p = core_map(hole + 2 * ps, PAGES * ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS,
			 r.fd, 0);
	core_truncate(r.fd, 0);
	/* The record the mprotect pairs change: one page, truncated. */
	fd = nsbt_file(NSBT_MEMFD, ps);
	rec = core_map(hole + ps, ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, fd, 0);
	core_truncate(fd, 0);
	/* The pairs' file. */
	pfd = nsbt_file(NSBT_MEMFD, 16 * ps);
	r.hole = hole;
	r.rec = rec;
	r.pfd = pfd;
	n = core_race_run(&r.c, MIN_FAULTS, calls, NULL);
	/* One pair more, the faulter stopped (its remaps rewrite the table
	 * whole), then at once: no record where its mapping was. */
	pair(hole, pfd);
	NSBT_CHECK(munmap(hole, ps) == 0, "munmap: %s", strerror(errno));
	core_expect_no_record(hole, "the last pair's mapping, unmapped");
	/* The record's protection is the kernel's, and it still protects. */
	line = core_maps_line(rec);
	NSBT_CHECK(line && strstr(line, " rw-s "), "the record's VMA after %lu pairs: %s", n,
		   line ? line : "(none)");
	NSBT_CHECK(mprotect(rec, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	line = core_maps_line(rec);
	NSBT_CHECK(line && strstr(line, " r--s "), "the record's VMA made read-only: %s",
		   line ? line : "(none)");
	if (*(volatile char *)rec != 0)
		nsbt_fail("the record's rescued page reads non-zero");
	printf("ok: %lu mprotect pairs and memfd pairs (the lowest record) while a thread read %lu "
	       "pages (each pass faulting again): every fault rescued, the record as the kernel "
	       "has it\n", n, atomic_load(&r.c.faults));
}

int
main(int argc, char **argv)
{
	core_require_library();
	ps = nsbt_page();
	if (argc > 1 && strcmp(argv[1], "one") == 0) {
		nsbt_expect_exit(core_race_watched(child, NULL, "in-place changes racing with rescues"),
				 0, "in-place changes racing with rescues");
		return 0;
	}
	core_reexec_each_fill("one", "inplace");
	return 0;
}
