/* SPDX-License-Identifier: MIT */
/*
 * The cut of a stale record never needs room it cannot get.  A record
 * that a raw munmap left behind is cut when a new mapping is made there
 * (nsb_forget_stale); that cut asked the table for room for two records
 * whatever it removed, and at a tight RLIMIT_AS, with the table's chunks
 * full and no spare one, it failed: the stale record stayed over the new
 * mapping, and a read past the end of that mapping's file was rescued
 * where it must die of SIGBUS (a protection on someone else's mapping).
 *
 * How the table gets there: 24 chunks' worth of protected 3-page
 * mappings (CHUNK = 128 records a chunk in ranges.c, filled in order),
 * RLIMIT_AS set to what the process uses, then mprotect of the middle
 * page of one record in each full chunk: each splits its chunk, which
 * takes a spare chunk, until the table has no free slot, no spare and
 * no memory for more (a split then loses protection: nosigbus_get_stats'
 * lost; mprotect failed with ENOMEM before).  A raw munmap of a
 * whole record, and of another, then an empty disk file mapped over the
 * first whole and over the middle page of the second (a cut that would
 * split the record: without room it must drop the whole record): a read
 * of each must die of SIGBUS.  Runs in a child under NOSIGBUS_POLICY=flag.
 */
#include <sys/resource.h>

#include "core.h"

#define PAGES 16384

/* Raw, so that the library sees none of it: [p, p + len) anonymous. */
static bool
raw_fill(void *p, size_t len)
{
	return (void *)syscall(SYS_mmap, p, len, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1,
			       0) == p;
}

static void
tight(void *arg)
{
	size_t ps = nsbt_page(), splits = 0;
	int fd = nsbt_file(NSBT_MEMFD, 0);
	char *p = core_map(NULL, PAGES * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0), *a, *t;

	(void)arg;
	core_tight_as();
	/* Pages 1, 3, 5 ... read-only: two more records each (and no more
	 * memory of the kernel's), until the table has no room left: a split
	 * loses protection (before core-splitroom's fix, mprotect failed). */
	for (size_t i = 1; i < PAGES / 2; i += 2) {
		if (mprotect(p + i * ps, ps, PROT_READ) != 0) {
			NSBT_CHECK(errno == ENOMEM, "mprotect: %s", strerror(errno));
			break;
		}
		splits++;
		if (core_stats().lost)
			break;
	}
	printf("%zu mprotect calls split the record before the table had no room for more\n",
	       splits);
	if (splits == PAGES / 4)
		printf("(the table never ran out of room: the cuts below had room anyway)\n");
	/* A whole one-page record, and the middle page of the rest of the
	 * mapping's record, unmapped behind the library's back: room for that
	 * one page only, where the new mapping goes (the rest of what a
	 * munmap gives back is taken again). */
	a = p + 2 * ps;
	t = p + (PAGES - 4) * ps;
	NSBT_CHECK(syscall(SYS_munmap, a, ps) == 0, "raw munmap: %s", strerror(errno));
	core_expect_unprotected(a, "a new mapping over a whole stale record, table full");
	NSBT_CHECK(raw_fill(a, ps), "raw mmap: %s", strerror(errno));
	NSBT_CHECK(syscall(SYS_munmap, t, 3 * ps) == 0, "raw munmap: %s", strerror(errno));
	NSBT_CHECK(raw_fill(t, ps) && raw_fill(t + 2 * ps, ps), "raw mmap: %s", strerror(errno));
	core_expect_unprotected(t + ps, "a new mapping inside a stale record, table full");
	printf("ok: stale records cut at RLIMIT_AS with the table's chunks full\n");
}

int
main(int argc, char **argv)
{
	core_require_library();
	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "flag");
	nsbt_expect_exit(nsbt_run(tight, NULL), 0, "stale records at RLIMIT_AS");
	return 0;
}
