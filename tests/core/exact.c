/* SPDX-License-Identifier: MIT */
/*
 * The table's short ways for the usual changes (ranges.c: a new record
 * into a table of one chunk with room, a cut or a change of protection
 * of exactly one whole record), and the calls next to them that must
 * take the general way: a record with neighbours, a call over part of a
 * record, a call over a record and a hole (ENOMEM, records asked of the
 * kernel again), a call the kernel refuses (EINVAL), and a table of many
 * chunks.  After each call every page of the area is compared with
 * /proc/self/maps: a page the kernel maps has a record with the kernel's
 * protection (a read past the end of its empty file is rescued, and the
 * rescued page is writable exactly when the kernel's VMA is), and a page
 * it does not map has none (a raw mapping of an empty file there dies of
 * SIGBUS).
 */
#include "core.h"

static size_t ps;

/* The protection /proc/self/maps gives the page at p, -1 if unmapped. */
static int
kernel_prot(const char *p)
{
	const char *line = core_maps_line(p);
	char perms[5];
	int prot = 0;

	if (!line[0])
		return -1;
	NSBT_CHECK(sscanf(line, "%*x-%*x %4s", perms) == 1, "maps line: %s", line);
	if (perms[0] == 'r')
		prot |= PROT_READ;
	if (perms[1] == 'w')
		prot |= PROT_WRITE;
	return prot;
}

/* Reads the page at p (past the end of its file: rescued if recorded),
 * then writes it: exit 0 if the rescued page is writable. */
static void
read_write_fn(void *arg)
{
	volatile char *p = arg;

	core_no_core();
	(void)*p;
	*p = 1;
}

/* want[i] of a page mapped unprotected (anonymous memory), no record. */
#define BARE 100

/* Every page of [area, area + pages) as /proc/self/maps has it, and as
 * expected (want[i]: the protection, -1 unmapped, BARE + the protection
 * for a mapping of the program's that no record covers). */
static void
check_area(char *area, size_t pages, const int *want, const char *what)
{
	for (size_t i = 0; i < pages; i++) {
		char *p = area + i * ps;
		int k = kernel_prot(p), status;

		if (k != want[i] % BARE)
			nsbt_fail("%s: page %zu: the kernel has protection %d, expected %d: %s", what,
				  i, k, want[i] % BARE, core_maps_line(p));
		if (k < 0 || want[i] >= BARE) {
			core_expect_no_record(p, what);
			continue;
		}
		status = nsbt_run(read_write_fn, p);
		if (k & PROT_WRITE)
			nsbt_expect_exit(status, 0, nsbt_fmt("%s: page %zu (read-write): read, write",
							     what, i));
		else
			nsbt_expect_signal(status, SIGSEGV,
					   nsbt_fmt("%s: page %zu (read-only, recorded so): read, write",
						    what, i));
	}
}

/* A protected mapping of `pages` pages of an empty memfd of its own at p. */
static void
map_at(char *p, size_t pages)
{
	int fd = nsbt_file(NSBT_MEMFD, 0);

	NSBT_CHECK(mmap(p, pages * ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, fd,
			0) == p,
		   "mmap: %s", strerror(errno));
	close(fd);
}

/* A few records in a table of one chunk: A = page 1, B = pages 2-3,
 * C = page 4, with free pages around them. */
static void
small_child(void *arg)
{
	char *a = core_free_range(8 * ps);
	int want[8] = { -1, 3, 3, 3, 3, -1, -1, -1 };

	(void)arg;
	map_at(a + ps, 1);
	map_at(a + 2 * ps, 2);
	map_at(a + 4 * ps, 1);
	check_area(a, 8, want, "three new records");

	/* Exactly A, its neighbour B above: the short way. */
	NSBT_CHECK(mprotect(a + ps, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	want[1] = PROT_READ;
	check_area(a, 8, want, "mprotect of exactly one record");

	/* Exactly A, refused by the kernel (an unknown bit): nothing changes. */
	NSBT_CHECK(mprotect(a + ps, ps, PROT_READ | 0x100000) == -1 && errno == EINVAL,
		   "mprotect with an unknown bit: %s", strerror(errno));
	check_area(a, 8, want, "refused mprotect of exactly one record");

	/* Part of B: the general way (a split). */
	NSBT_CHECK(mprotect(a + 2 * ps, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	want[2] = PROT_READ;
	check_area(a, 8, want, "mprotect of part of a record");

	/* C and the free page above it: ENOMEM after C changed. */
	NSBT_CHECK(mprotect(a + 4 * ps, 2 * ps, PROT_READ) == -1 && errno == ENOMEM,
		   "mprotect over a hole: %s", strerror(errno));
	want[4] = PROT_READ;
	check_area(a, 8, want, "failed mprotect over a record and a hole");

	/* Exactly C again, back to read-write. */
	NSBT_CHECK(mprotect(a + 4 * ps, ps, CORE_PROT_RW) == 0, "mprotect: %s", strerror(errno));
	want[4] = CORE_PROT_RW;
	check_area(a, 8, want, "mprotect of exactly one record back");

	/* C, read-write already, and the hole: ENOMEM, the kernel shows
	 * what the record says (the table is left as it is). */
	NSBT_CHECK(mprotect(a + 4 * ps, 2 * ps, CORE_PROT_RW) == -1 && errno == ENOMEM,
		   "mprotect over a hole: %s", strerror(errno));
	check_area(a, 8, want, "failed mprotect over a record and a hole that changed nothing");

	/* Exactly C, to the protection it has: nothing to change. */
	NSBT_CHECK(mprotect(a + 4 * ps, ps, CORE_PROT_RW) == 0, "mprotect: %s", strerror(errno));
	check_area(a, 8, want, "mprotect of exactly one record to its own protection");

	/* Exactly C: the short way's cut. */
	NSBT_CHECK(munmap(a + 4 * ps, ps) == 0, "munmap: %s", strerror(errno));
	want[4] = -1;
	check_area(a, 8, want, "munmap of exactly one record");

	/* Part of B (its second page, the first is a record of its own now). */
	NSBT_CHECK(munmap(a + 3 * ps, ps) == 0, "munmap: %s", strerror(errno));
	want[3] = -1;
	check_area(a, 8, want, "munmap of the rest of a split record");

	/* A and the hole above B: more than one record. */
	NSBT_CHECK(munmap(a, 4 * ps) == 0, "munmap: %s", strerror(errno));
	want[1] = want[2] = -1;
	check_area(a, 8, want, "munmap of two records and holes");

	/* A new record between two others, the table of one chunk. */
	map_at(a + ps, 1);
	map_at(a + 5 * ps, 1);
	map_at(a + 3 * ps, 1);
	want[1] = want[3] = want[5] = CORE_PROT_RW;
	check_area(a, 8, want, "new records above, below and between");

	/* A record and an unprotected mapping beside it: one record in the
	 * span, not the whole span. */
	NSBT_CHECK(mmap(a + 4 * ps, ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			0) == a + 4 * ps,
		   "mmap: %s", strerror(errno));
	want[4] = BARE + CORE_PROT_RW;
	check_area(a, 8, want, "an unprotected mapping between records");
	NSBT_CHECK(mprotect(a + 3 * ps, 2 * ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	want[3] = PROT_READ;
	want[4] = BARE + PROT_READ;
	check_area(a, 8, want, "mprotect of a record and an unprotected page");
	/* A record and the free page above it. */
	NSBT_CHECK(munmap(a + 5 * ps, 2 * ps) == 0, "munmap: %s", strerror(errno));
	want[5] = -1;
	check_area(a, 8, want, "munmap of a record and a free page");
	/* A record and a free page below it, with the kernel refusing. */
	NSBT_CHECK(mprotect(a, 2 * ps, PROT_READ | 0x100000) == -1 && errno == EINVAL,
		   "mprotect with an unknown bit: %s", strerror(errno));
	check_area(a, 8, want, "refused mprotect of a free page and a record");
	printf("ok: exact calls on one record and the calls beside them, one chunk\n");
}

/* One mapping of two pages, its upper page made read-only (two records),
 * then that page and the free page above it back to read-write: the call
 * fails with ENOMEM after the kernel changed the page and merged the two
 * VMAs again, and the records must be one again too (mman.c, resync: the
 * one record whole in one VMA, joined where the span begins). */
static void
join_child(void *arg)
{
	char *a = core_free_range(4 * ps);
	int want[4] = { -1, CORE_PROT_RW, CORE_PROT_RW, -1 };
	uint64_t n0;

	(void)arg;
	map_at(a + ps, 2);
	n0 = core_stats().mappings;
	NSBT_CHECK(mprotect(a + 2 * ps, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	want[2] = PROT_READ;
	check_area(a, 4, want, "mprotect of a record's upper page");
	NSBT_CHECK(core_stats().mappings == n0 + 1, "the split: %llu records, expected %llu",
		   (unsigned long long)core_stats().mappings, (unsigned long long)n0 + 1);
	NSBT_CHECK(mprotect(a + 2 * ps, 2 * ps, CORE_PROT_RW) == -1 && errno == ENOMEM,
		   "mprotect over a hole: %s", strerror(errno));
	want[2] = CORE_PROT_RW;
	check_area(a, 4, want, "failed mprotect that made the two pieces one VMA again");
	NSBT_CHECK(core_stats().mappings == n0, "after the failed mprotect: %llu records, "
		   "expected %llu (the pieces not joined)",
		   (unsigned long long)core_stats().mappings, (unsigned long long)n0);
	printf("ok: a failed mprotect that makes a split record's pieces one again\n");
}

/* More records than a chunk holds (128): every record of many chunks.
 * Every other page is a mapping of its own. */
#define MANY 300

static void
many_child(void *arg)
{
	char *a = core_free_range(2 * MANY * ps);
	int *want = calloc(2 * MANY, sizeof(int));
	size_t mid = MANY;	/* an even page: a record */

	(void)arg;
	NSBT_CHECK(want != NULL, "calloc");
	for (size_t i = 0; i < 2 * MANY; i++) {
		want[i] = (i % 2 == 0) ? CORE_PROT_RW : -1;
		if (i % 2 == 0)
			map_at(a + i * ps, 1);
	}
	NSBT_CHECK(mprotect(a + mid * ps, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	want[mid] = PROT_READ;
	NSBT_CHECK(munmap(a + (mid + 2) * ps, ps) == 0, "munmap: %s", strerror(errno));
	want[mid + 2] = -1;
	NSBT_CHECK(mprotect(a + (mid + 4) * ps, 2 * ps, PROT_READ) == -1 && errno == ENOMEM,
		   "mprotect over a hole: %s", strerror(errno));
	want[mid + 4] = PROT_READ;
	map_at(a + (mid + 3) * ps, 1);
	want[mid + 3] = CORE_PROT_RW;
	check_area(a + (mid - 4) * ps, 12, want + mid - 4, "many chunks");
	/* The first and last records too (the chunks' ends). */
	check_area(a, 2, want, "many chunks, the lowest record");
	check_area(a + (2 * MANY - 2) * ps, 2, want + 2 * MANY - 2, "many chunks, the highest");
	free(want);
	printf("ok: the same calls in a table of many chunks\n");
}

int
main(void)
{
	ps = nsbt_page();
	nsbt_expect_exit(nsbt_run(small_child, NULL), 0, "one chunk");
	nsbt_expect_exit(nsbt_run(many_child, NULL), 0, "many chunks");
	nsbt_expect_exit(nsbt_run(join_child, NULL), 0, "a join after a failed mprotect");
	return 0;
}
