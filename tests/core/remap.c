/* SPDX-License-Identifier: MIT */
/*
 * Records follow the lengths the kernel keeps, not the lengths asked for
 * (issue 10 item 1, SPEC §4): mremap rounds new_len (and old_len) up to
 * the page size, and on hugetlbfs to the huge page size; a record that
 * stops at the asked length leaves the rest of the kept mapping
 * unprotected.  And the calls on hugetlbfs whose length is not a whole
 * huge page (issue 10, second suspect): MAP_FIXED rounds up to huge pages,
 * munmap and mprotect refuse to split one.
 *
 * Modes (argv[1]):
 *   pages    shrink, grow and move with lengths that are not a multiple of
 *            the page size, before and after rescues split the mapping
 *   hugetlb  the same on hugetlbfs, plus MAP_FIXED/munmap/mprotect with a
 *            length that is not a whole huge page.  Skipped (77) when the
 *            kernel has no hugetlbfs.  Every hugetlbfs mapping here is
 *            MAP_NORESERVE of a file truncated to 0 after mapping, and
 *            only pages past its end are touched, so no huge page is ever allocated: the test
 *            needs hugetlbfs, not free huge pages (and cannot fail
 *            because a test running beside it took them).
 *
 * Runs with NOSIGBUS_POLICY=flag (re-executes itself to set it): the
 * unflagged mappings here must be unprotected whatever the default is.
 */
#include <inttypes.h>

#include "core.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 4U
#endif

static size_t ps;

struct sc {
	int type;		/* MAP_PRIVATE or MAP_SHARED */
	bool after;		/* rescue page 0 first: the mapping is split */
};

static const char *
sc_name(const char *op, const struct sc *s)
{
	static char buf[200];

	snprintf(buf, sizeof(buf), "%s, %s, %s", op,
		 s->type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE",
		 s->after ? "after a rescue split it" : "one VMA");
	return buf;
}

/* A protected mapping of npages of an empty memfd; "after": page 0 rescued and written. */
static char *
setup(const struct sc *s, size_t npages, int *fd)
{
	char *p;

	*fd = nsbt_file(NSBT_MEMFD, 0);
	p = core_map(NULL, npages * ps, CORE_PROT_RW, s->type | MAP_NOSIGBUS, *fd, 0);
	if (s->after) {
		memset(p, 'A', ps);
		core_expect_bytes(p, 'A', ps, "page 0 rescued and written");
	}
	return p;
}

/* Every byte of [p, p + len) reads as expected (a fault there is rescued). */
static void
expect_rescued(char *p, size_t len, const char *what)
{
	core_expect_bytes(p, 0, len, what);
	memset(p, 'w', len);
	core_expect_bytes(p, 'w', len, what);
}

/*
 * Shrink 3 pages to ps + 1 bytes: the kernel keeps 2 pages.  A read at
 * p + ps + 200 is in the kept second page, past the file's end: rescued.
 */
static void
shrink_child(void *arg)
{
	struct sc *s = arg;
	char name[200];
	int fd;
	char *p = setup(s, 3, &fd), *q;

	snprintf(name, sizeof(name), "%s", sc_name("mremap shrink 3 pages -> ps + 1 bytes", s));
	q = mremap(p, 3 * ps, ps + 1, 0);
	NSBT_CHECK(q == p, "%s: mremap: %s", name, q == MAP_FAILED ? strerror(errno) : "moved");
	NSBT_CHECK(core_page_mapped(p + ps), "%s: the kernel did not keep the second page", name);
	core_expect_unmapped(p + 2 * ps, ps, name);
	/* The byte the issue names first, in a child: a death is observed. */
	nsbt_expect_exit(core_touch_quiet(p + ps + 200, false, name), 0,
			 "read at p + ps + 200 after the shrink (rescued in a child)");
	expect_rescued(p + ps, ps, name);
	if (s->after)
		core_expect_bytes(p, 'A', ps, name);
	else
		expect_rescued(p, ps, name);
	core_expect_unprotected(p + 2 * ps, "unflagged mapping in the released third page");
	printf("ok: %s: the whole kept second page is protected\n", name);
}

/* Grow 2 pages to 3 * ps + 1 bytes: the kernel makes 4 pages, all protected. */
static void
grow_child(void *arg)
{
	struct sc *s = arg;
	char name[200];
	int fd;
	char *p = setup(s, 2, &fd), *q;

	snprintf(name, sizeof(name), "%s", sc_name("mremap grow 2 pages -> 3 * ps + 1 bytes", s));
	q = mremap(p, 2 * ps, 3 * ps + 1, MREMAP_MAYMOVE);
	NSBT_CHECK(q != MAP_FAILED, "%s: mremap: %s", name, strerror(errno));
	NSBT_CHECK(core_page_mapped(q + 3 * ps), "%s: the kernel did not make a fourth page", name);
	nsbt_expect_exit(core_touch_quiet(q + 3 * ps + 100, false, name), 0,
			 "read at q + 3 * ps + 100 after the grow (rescued in a child)");
	expect_rescued(q + ps, 3 * ps, name);
	if (s->after)
		core_expect_bytes(q, 'A', ps, name);
	printf("ok: %s: all four pages protected\n", name);
}

/*
 * Move 3 pages to 2 * ps + 1 bytes elsewhere (MREMAP_FIXED): 3 pages at
 * the destination, all protected; the old place is free and unprotected.
 */
static void
move_child(void *arg)
{
	struct sc *s = arg;
	char name[200];
	int fd;
	char *p = setup(s, 3, &fd), *dest = core_free_range(3 * ps), *q;

	snprintf(name, sizeof(name), "%s", sc_name("mremap move 3 pages -> 2 * ps + 1 bytes", s));
	q = mremap(p, 3 * ps, 2 * ps + 1, MREMAP_MAYMOVE | MREMAP_FIXED, dest);
	NSBT_CHECK(q == dest, "%s: mremap: %s", name, q == MAP_FAILED ? strerror(errno) : "elsewhere");
	NSBT_CHECK(core_page_mapped(q + 2 * ps), "%s: the kernel did not keep the third page", name);
	nsbt_expect_exit(core_touch_quiet(q + 2 * ps + 300, false, name), 0,
			 "read at dest + 2 * ps + 300 after the move (rescued in a child)");
	expect_rescued(q + ps, 2 * ps, name);
	if (s->after)
		core_expect_bytes(q, 'A', ps, name);
	for (int i = 0; i < 3; i++)
		core_expect_unprotected(p + i * ps, "unflagged mapping at the old place");
	printf("ok: %s: all three pages protected at the destination\n", name);
}

/* old_len 2 * ps + 1 is 3 pages to the kernel: shrinking it to 2 pages frees the third. */
static void
old_len_child(void *arg)
{
	struct sc *s = arg;
	char name[200];
	int fd;
	char *p = setup(s, 4, &fd), *q;

	snprintf(name, sizeof(name), "%s", sc_name("mremap old_len 2 * ps + 1 -> 2 pages", s));
	q = mremap(p, 2 * ps + 1, 2 * ps, 0);
	NSBT_CHECK(q == p, "%s: mremap: %s", name, q == MAP_FAILED ? strerror(errno) : "moved");
	core_expect_unmapped(p + 2 * ps, ps, name);
	NSBT_CHECK(core_page_mapped(p + 3 * ps), "%s: the fourth page went too", name);
	expect_rescued(p + ps, ps, name);
	expect_rescued(p + 3 * ps, ps, name);
	core_expect_unprotected(p + 2 * ps, "unflagged mapping in the released third page");
	printf("ok: %s\n", name);
}

/*
 * A move of a range that ends in a hole (MREMAP_FIXED, same length) onto
 * a protected mapping.  Linux 6.17 and later move the VMAs of the range
 * one by one and leave what was at the destination of the hole in place;
 * older kernels refuse (EFAULT) and change nothing.  Either way, what is
 * still at the destination must still be protected.
 */
static void
move_hole_child(void *arg)
{
	struct sc *s = arg;
	char name[200];
	int fd, dfd = nsbt_file(NSBT_MEMFD, 0);
	char *p = setup(s, 2, &fd), *dest = core_free_range(2 * ps), *q;

	snprintf(name, sizeof(name), "%s", sc_name("mremap move of [page][hole] onto a protected mapping", s));
	core_map(dest, 2 * ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, dfd, 0);
	NSBT_CHECK(munmap(p + ps, ps) == 0, "munmap: %s", strerror(errno));
	q = mremap(p, 2 * ps, 2 * ps, MREMAP_MAYMOVE | MREMAP_FIXED, dest);
	if (q == MAP_FAILED) {
		int err = errno;

		/* Kernels before 6.17 refuse (EFAULT: the source is not one
		 * VMA) after unmapping the destination: nothing is left there,
		 * and the library must have dropped its records. */
		if (!core_page_mapped(dest) && !core_page_mapped(dest + ps)) {
			core_expect_no_record(dest, name);
			core_expect_no_record(dest + ps, name);
			printf("ok: %s: this kernel refuses (%s) and had unmapped the destination "
			       "(Linux before 6.17): no record left there\n", name, strerror(err));
			return;
		}
		printf("ok: %s: this kernel refuses (%s)\n", name, strerror(err));
		expect_rescued(dest, 2 * ps, name);
		return;
	}
	NSBT_CHECK(q == dest, "%s: moved elsewhere", name);
	NSBT_CHECK(core_page_mapped(dest + ps), "%s: the destination of the hole was unmapped", name);
	if (s->after)
		core_expect_bytes(dest, 'A', ps, name);
	else
		expect_rescued(dest, ps, name);
	nsbt_expect_exit(core_touch_quiet(dest + ps + 9, false, name), 0,
			 "read of the destination page opposite the hole (still the protected mapping)");
	expect_rescued(dest + ps, ps, name);
	printf("ok: %s: moved page and the page left in place both protected\n", name);
}

/* ---- moves of several VMAs ----------------------------------------------- */

/*
 * Kernels from 6.17 move several VMAs at once (leaving what is opposite a
 * hole in place) and stop at the first that fails, so the records follow
 * what the kernel shows, page by page.  A window of 16 PROT_NONE pages is
 * the stage; the probes map an empty memfd over a page with a raw mmap(2)
 * the library does not see: rescued means a record is there.
 */
static void
expect_record(char *addr, bool present, const char *what)
{
	struct core_touch t = { addr, false };

	if (present)
		nsbt_expect_exit(nsbt_run(core_raw_probe_fn, &t), 3, what);
	else
		core_expect_no_record(addr, what);
}

/* The protection /proc/self/maps shows at addr, -1 when unmapped. */
static int
maps_prot(const void *addr)
{
	char r, w, x;
	uintptr_t lo, hi;

	if (sscanf(core_maps_line(addr), "%" SCNxPTR "-%" SCNxPTR " %c%c%c",
		   &lo, &hi, &r, &w, &x) != 5) {
		if (core_page_mapped(addr))
			nsbt_fail("%p is mapped, yet /proc/self/maps does not show it", addr);
		return -1;
	}
	return (r == 'r' ? PROT_READ : 0) | (w == 'w' ? PROT_WRITE : 0) | (x == 'x' ? PROT_EXEC : 0);
}

static char *
window(void)
{
	return core_map(NULL, 16 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

/*
 * A protected mapping at pages 11-14; page 8 of the window (whose VMA goes
 * on to page 10) moved onto page 13: pages 11, 12 and 14 are still the
 * protected mapping.
 */
static void
vma_past_span_child(void *arg)
{
	const char *name = "one page of a longer VMA moved into a protected mapping";
	char *w = window(), *q;

	(void)arg;
	core_map(w + 11 * ps, 4 * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_FIXED | MAP_NOSIGBUS,
		 nsbt_file(NSBT_MEMFD, 0), 0);
	q = mremap(w + 8 * ps, ps, ps, MREMAP_MAYMOVE | MREMAP_FIXED, w + 13 * ps);
	NSBT_CHECK(q == w + 13 * ps, "%s: mremap: %s", name, strerror(errno));
	expect_record(w + 11 * ps, true, "page 11, left in place");
	expect_record(w + 12 * ps, true, "page 12, left in place");
	expect_record(w + 13 * ps, false, "page 13, moved over");
	expect_record(w + 14 * ps, true, "page 14, past the moved page");
	printf("ok: %s: only the page moved over lost its record\n", name);
}

/*
 * MREMAP_DONTUNMAP of [page][page][hole][hole] onto 8-11, where 10-11 are a
 * protected mapping: a kernel that moves several VMAs moves two pages and
 * leaves 10-11 in place (an older one refuses): 10-11 stay protected.
 */
static void
dontunmap_hole_child(void *arg)
{
	const char *name = "MREMAP_DONTUNMAP of pages and a hole onto a protected mapping";
	char *w = window(), *q;

	(void)arg;
	core_map(w + 10 * ps, 3 * ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS,
		 nsbt_file(NSBT_MEMFD, 0), 0);
	NSBT_CHECK(munmap(w + 3 * ps, 2 * ps) == 0, "munmap: %s", strerror(errno));
	q = mremap(w + ps, 4 * ps, 4 * ps, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
		   w + 8 * ps);
	printf("%s: mremap %s\n", name, q == MAP_FAILED ? strerror(errno) : "moved");
	if (q == MAP_FAILED && maps_prot(w + 10 * ps) < 0) {
		/* Kernels before 6.17 refuse (EFAULT) after unmapping the
		 * destination: no record is left there. */
		NSBT_CHECK(maps_prot(w + 11 * ps) < 0, "%s: page 11 still mapped", name);
		core_expect_no_record(w + 10 * ps, "page 10, unmapped by the failed call");
		core_expect_no_record(w + 11 * ps, "page 11, unmapped by the failed call");
		expect_record(w + 12 * ps, true, "page 12, past the destination");
		printf("ok: %s: this kernel refused and had unmapped the destination (Linux "
		       "before 6.17): no record left there, page 12 still protected\n", name);
		return;
	}
	NSBT_CHECK(maps_prot(w + 10 * ps) == CORE_PROT_RW, "%s: page 10 is not the mapping", name);
	expect_record(w + 10 * ps, true, "page 10, opposite the hole");
	expect_record(w + 11 * ps, true, "page 11, opposite the hole");
	expect_record(w + 12 * ps, true, "page 12, past the destination");
	printf("ok: %s: the pages opposite the hole are still protected\n", name);
}

/*
 * MREMAP_DONTUNMAP of pages 6-10 (a protected anonymous page 7 among the
 * window's) to 11-15, of which 12-14 are free, with room for two more
 * pages only: a kernel that moves VMAs one by one moves pages 6 and 7,
 * then fails at 8-10.  Page 12 is
 * protected exactly when the kernel shows page 7 moved there.
 */
static void
dontunmap_partial_child(void *arg)
{
	const char *name = "MREMAP_DONTUNMAP that runs out of address space half-way";
	char *w = window(), *q;
	struct rlimit rl, saved;
	bool moved;

	(void)arg;
	core_map(w + 7 * ps, ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NOSIGBUS,
		 -1, 0);
	/* Pages 12-14 free: the move needs three pages more than there are. */
	NSBT_CHECK(munmap(w + 12 * ps, 3 * ps) == 0, "munmap: %s", strerror(errno));
	NSBT_CHECK(getrlimit(RLIMIT_AS, &rl) == 0, "getrlimit: %s", strerror(errno));
	saved = rl;
	rl.rlim_cur = nsbt_vm_size() + 2 * ps;
	NSBT_CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit: %s", strerror(errno));
	q = mremap(w + 6 * ps, 5 * ps, 5 * ps, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
		   w + 11 * ps);
	NSBT_CHECK(q == MAP_FAILED, "%s: mremap succeeded", name);
	moved = maps_prot(w + 12 * ps) == CORE_PROT_RW;
	printf("%s: mremap %s, page 7 %s\n", name, strerror(errno), moved ? "moved" : "stayed");
	NSBT_CHECK(setrlimit(RLIMIT_AS, &saved) == 0, "setrlimit: %s", strerror(errno));
	expect_record(w + 7 * ps, true, "page 7, kept by MREMAP_DONTUNMAP");
	expect_record(w + 11 * ps, false, "page 11, the window's page 6 or nothing");
	expect_record(w + 12 * ps, moved, moved ? "page 12, where page 7 moved"
						: "page 12, where page 7 did not move");
	printf("ok: %s: the records follow what moved\n", name);
}

/*
 * MREMAP_DONTUNMAP without MREMAP_FIXED: the fifth argument is a hint
 * (glibc passes it for either flag).  A protected page moved to a free
 * hint lands there, its record with it; an unaligned one is EINVAL, as
 * without the library (which passed NULL instead: "moved elsewhere", and
 * success).  An unprotected page does the same.
 */
static void
dontunmap_hint_child(void *arg)
{
	const char *name = "MREMAP_DONTUNMAP with a hint";
	char *w = window(), *hint = w + 12 * ps, *q;

	(void)arg;
	NSBT_CHECK(munmap(hint, 2 * ps) == 0, "munmap: %s", strerror(errno));
	core_map(w + 7 * ps, ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NOSIGBUS,
		 -1, 0);
	q = mremap(w + 7 * ps, ps, ps, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, hint);
	NSBT_CHECK(q == hint, "%s: the protected page went to %p, not the hint %p (%s)", name,
		   (void *)q, (void *)hint, q == MAP_FAILED ? strerror(errno) : "moved");
	expect_record(w + 7 * ps, true, "the source, kept");
	expect_record(hint, true, "the page at the hint");
	q = mremap(w + 2 * ps, ps, ps, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, hint + ps);
	NSBT_CHECK(q == hint + ps, "%s: an unprotected page went to %p, not the hint %p", name,
		   (void *)q, (void *)(hint + ps));
	errno = 0;
	q = mremap(w + 3 * ps, ps, ps, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, w + 20 * ps + 1);
	NSBT_CHECK(q == MAP_FAILED && errno == EINVAL, "%s: an unaligned hint gave %s", name,
		   q == MAP_FAILED ? strerror(errno) : "success");
	printf("ok: %s: the page lands at the hint, an unaligned hint is EINVAL\n", name);
}

static void
run_one(const char *what, void (*fn)(void *))
{
	nsbt_expect_exit(core_run_watched(fn, NULL, nsbt_scaled(45), NULL, what, NULL, 0), 0, what);
}

static void
run_all(const char *what, void (*fn)(void *))
{
	static const int types[] = { MAP_PRIVATE, MAP_SHARED };

	for (int t = 0; t < 2; t++)
		for (int after = 0; after < 2; after++) {
			struct sc s = { types[t], after };
			char name[200];

			snprintf(name, sizeof(name), "%s", sc_name(what, &s));
			nsbt_expect_exit(core_run_watched(fn, &s, nsbt_scaled(45), NULL, name, NULL, 0), 0, name);
		}
}

/* ---- hugetlbfs ----------------------------------------------------------- */

static size_t hs;		/* huge page size */
/* Does the kernel resize and move hugetlbfs mappings, rounding lengths to
 * huge pages?  Linux 5.16 and later; before, such an mremap is EINVAL
 * (vma_to_resize, munmap of part of a huge page), with or without the
 * library, and the library must leave its records as they were. */
static bool huge_mremap;

/* An empty hugetlbfs file: every page of a mapping of it is past its end. */
static int
huge_fd(void)
{
	int fd = memfd_create("core-remap-huge", MFD_HUGETLB | MFD_CLOEXEC);

	if (fd < 0)
		nsbt_fail("memfd_create(MFD_HUGETLB): %s", strerror(errno));
	return fd;
}

/* A free, huge-page aligned range of n huge pages. */
static char *
huge_free_range(size_t n)
{
	char *r = core_free_range((n + 1) * hs);

	return (char *)(((uintptr_t)r + hs - 1) & ~(uintptr_t)(hs - 1));
}

/*
 * A writable hugetlbfs mapping extends its file to the mapping's end
 * (hugetlbfs_file_mmap): truncate it back, so that every page is past the
 * end and a fault there never allocates a huge page.
 */
static char *
huge_map(char *at, size_t len, int type, int flag, int fd)
{
	char *p = core_map(at, len, CORE_PROT_RW,
			   type | MAP_NORESERVE | flag | (at ? MAP_FIXED : 0), fd, 0);

	core_truncate(fd, 0);
	return p;
}

/*
 * A read in the middle of huge page i of p: rescued with a whole huge page
 * of zeros (in a child first, with stderr checked, then here).
 */
static void
expect_huge_rescued(char *p, size_t i, const char *what)
{
	char *h = p + i * hs;

	nsbt_expect_exit(core_touch_quiet(h + hs / 2, false, what), 0, what);
	NSBT_CHECK(h[hs / 2] == 0, "%s: the rescued page is not zero", what);
	/* The whole huge page was replaced: its first and last pages no longer fault. */
	core_expect_bytes(h, 0, ps, what);
	core_expect_bytes(h + hs - ps, 0, ps, what);
	h[hs - 1] = 'h';
	NSBT_CHECK(h[hs - 1] == 'h', "%s: a write did not stick", what);
}

/* A read in huge page i of p dies of SIGBUS, and the library says nothing. */
static void
expect_huge_sigbus(char *p, size_t i, const char *what)
{
	nsbt_expect_signal(core_touch_quiet(p + i * hs + hs / 2, false, what), SIGBUS, what);
}

/* mremap shrink of 3 huge pages to hs + ps bytes: the kernel keeps 2 huge pages. */
static void
huge_shrink_child(void *arg)
{
	int type = *(int *)arg, fd = huge_fd();
	char *p = huge_map(NULL, 3 * hs, type, MAP_NOSIGBUS, fd), *q;
	char name[160];

	snprintf(name, sizeof(name), "hugetlbfs %s: mremap 3 huge pages -> hs + ps bytes",
		 type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE");
	NSBT_CHECK(((uintptr_t)p & (hs - 1)) == 0, "hugetlbfs mapping not aligned");
	q = mremap(p, 3 * hs, hs + ps, 0);
	if (!huge_mremap) {
		NSBT_CHECK(q == MAP_FAILED && errno == EINVAL, "%s: %p %s, where the kernel "
			   "says EINVAL", name, (void *)q, strerror(errno));
		expect_huge_rescued(p, 2, "read in the third huge page after the refused shrink");
		printf("ok: %s: EINVAL, as the kernel, and all three still protected\n", name);
		return;
	}
	NSBT_CHECK(q == p, "%s: %s", name, q == MAP_FAILED ? strerror(errno) : "moved");
	NSBT_CHECK(core_page_mapped(p + hs + hs / 2), "%s: the kernel did not keep 2 huge pages", name);
	core_expect_unmapped(p + 2 * hs, ps, name);
	expect_huge_rescued(p, 1, "read at p + 1.5 huge pages after the shrink");
	expect_huge_rescued(p, 0, "read in the first huge page after the shrink");
	core_expect_unprotected(p + 2 * hs, "unflagged mapping in the released third huge page");
	printf("ok: %s: both kept huge pages protected\n", name);
}

/* mremap move of 3 huge pages to hs + ps bytes elsewhere: 2 huge pages there. */
static void
huge_move_child(void *arg)
{
	int type = *(int *)arg, fd = huge_fd();
	char *p = huge_map(NULL, 3 * hs, type, MAP_NOSIGBUS, fd), *q;
	char *dest = huge_free_range(2);
	char name[160];

	snprintf(name, sizeof(name), "hugetlbfs %s: mremap move 3 huge pages -> hs + ps bytes",
		 type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE");
	q = mremap(p, 3 * hs, hs + ps, MREMAP_MAYMOVE | MREMAP_FIXED, dest);
	if (!huge_mremap) {
		/* The destination is unmapped before the kernel says EINVAL. */
		NSBT_CHECK(q == MAP_FAILED && errno == EINVAL, "%s: %p %s, where the kernel "
			   "says EINVAL", name, (void *)q, strerror(errno));
		expect_huge_rescued(p, 2, "read in the third huge page after the refused move");
		core_expect_unprotected(dest, "unflagged mapping at the destination");
		printf("ok: %s: EINVAL, as the kernel, the source still protected\n", name);
		return;
	}
	NSBT_CHECK(q == dest, "%s: %s", name, q == MAP_FAILED ? strerror(errno) : "elsewhere");
	NSBT_CHECK(core_page_mapped(q + hs + hs / 2), "%s: the kernel did not keep 2 huge pages", name);
	expect_huge_rescued(q, 1, "read at dest + 1.5 huge pages after the move");
	expect_huge_rescued(q, 0, "read in the first huge page after the move");
	core_expect_unprotected(p, "unflagged mapping at the old place");
	core_expect_unprotected(p + 2 * hs + hs / 2, "unflagged mapping at the old third huge page");
	printf("ok: %s: both huge pages protected at the destination\n", name);
}

/*
 * MAP_FIXED of an UNPROTECTED hugetlbfs mapping, hs + ps bytes, over a
 * protected 2-huge-page memfd mapping: the kernel replaces 2 whole huge
 * pages, so nothing of the old protection may be left in the second one.
 */
static void
huge_fixed_unprotected_child(void *arg)
{
	int type = *(int *)arg, mfd = nsbt_file(NSBT_MEMFD, 0), hfd = huge_fd();
	char *p = huge_free_range(2);
	char name[200];

	snprintf(name, sizeof(name), "unprotected hugetlbfs MAP_FIXED %s of hs + ps bytes over a "
		 "protected mapping", type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE");
	core_map(p, 2 * hs, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, mfd, 0);
	huge_map(p, hs + ps, type, 0, hfd);
	NSBT_CHECK(core_page_mapped(p + 2 * hs - ps), "%s: the kernel did not map 2 huge pages", name);
	expect_huge_sigbus(p, 0, "read in the first huge page of the unprotected mapping");
	expect_huge_sigbus(p, 1, "read in the second huge page of the unprotected mapping");
	printf("ok: %s: no protection left in either huge page\n", name);
}

/* The same with a PROTECTED hugetlbfs mapping: both huge pages protected, whole. */
static void
huge_fixed_protected_child(void *arg)
{
	int type = *(int *)arg, mfd = nsbt_file(NSBT_MEMFD, 0), hfd = huge_fd();
	char *p = huge_free_range(2);
	char name[200];

	snprintf(name, sizeof(name), "protected hugetlbfs MAP_FIXED %s of hs + ps bytes over a "
		 "protected mapping", type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE");
	core_map(p, 2 * hs, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, mfd, 0);
	huge_map(p, hs + ps, type, MAP_NOSIGBUS, hfd);
	NSBT_CHECK(core_page_mapped(p + 2 * hs - ps), "%s: the kernel did not map 2 huge pages", name);
	expect_huge_rescued(p, 1, "read in the second huge page of the new mapping");
	expect_huge_rescued(p, 0, "read in the first huge page of the new mapping");
	printf("ok: %s: both huge pages rescued whole\n", name);
}

/*
 * munmap and mprotect of a length that is not a whole huge page: the
 * kernel refuses (EINVAL: it cannot split a huge page), so nothing of the
 * protected mapping may change; an mprotect to the protection it has
 * already succeeds, and changes nothing either.
 */
static void
huge_partial_child(void *arg)
{
	int type = *(int *)arg, hfd = huge_fd();
	char *p = huge_map(NULL, 3 * hs, type, MAP_NOSIGBUS, hfd);
	char name[160];

	snprintf(name, sizeof(name), "hugetlbfs %s, calls that would split a huge page",
		 type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE");
	errno = 0;
	NSBT_CHECK(munmap(p, ps) == -1 && errno == EINVAL, "munmap(p, ps): %s", strerror(errno));
	NSBT_CHECK(munmap(p + hs, hs + ps) == -1 && errno == EINVAL,
		   "munmap(p + hs, hs + ps): %s", strerror(errno));
	NSBT_CHECK(mprotect(p + hs, ps, PROT_READ) == -1 && errno == EINVAL,
		   "mprotect(p + hs, ps): %s", strerror(errno));
	/* The same protection: nothing to split, the kernel just succeeds. */
	NSBT_CHECK(mprotect(p, hs + ps, CORE_PROT_RW) == 0,
		   "mprotect(p, hs + ps) to the same protection: %s", strerror(errno));
	for (size_t i = 0; i < 3; i++)
		NSBT_CHECK(core_page_mapped(p + i * hs + ps), "%s: huge page %zu went", name, i);
	expect_huge_rescued(p, 0, "huge page 0 after the refused calls");
	expect_huge_rescued(p, 1, "huge page 1 after the refused calls (written: still writable)");
	expect_huge_rescued(p, 2, "huge page 2 after the refused calls");
	printf("ok: %s: refused, and the mapping is still protected and writable\n", name);
}

static void
huge_all(const char *what, void (*fn)(void *))
{
	static const int types[] = { MAP_PRIVATE, MAP_SHARED };

	for (int t = 0; t < 2; t++) {
		int type = types[t];
		char name[160];

		snprintf(name, sizeof(name), "%s, %s", what,
			 type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE");
		nsbt_expect_exit(core_run_watched(fn, &type, nsbt_scaled(45), NULL, name, NULL, 0), 0, name);
	}
}

int
main(int argc, char **argv)
{
	core_require_library();
	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "flag");
	ps = nsbt_page();
	if (argc < 2)
		nsbt_fail("usage: core-remap pages|hugetlb");
	if (strcmp(argv[1], "pages") == 0) {
		run_all("mremap shrink to ps + 1", shrink_child);
		run_all("mremap grow to 3 * ps + 1", grow_child);
		run_all("mremap move to 2 * ps + 1", move_child);
		run_all("mremap with old_len 2 * ps + 1", old_len_child);
		run_all("mremap move of a range ending in a hole", move_hole_child);
		run_one("move of one page of a longer VMA", vma_past_span_child);
		run_one("MREMAP_DONTUNMAP over a hole", dontunmap_hole_child);
		run_one("MREMAP_DONTUNMAP failing half-way", dontunmap_partial_child);
		run_one("MREMAP_DONTUNMAP with a hint", dontunmap_hint_child);
		return 0;
	}
	if (strcmp(argv[1], "hugetlb") != 0)
		nsbt_fail("unknown mode %s", argv[1]);
	hs = nsbt_huge_page_size();
	{
		int fd = memfd_create("core-remap-probe", MFD_HUGETLB | MFD_CLOEXEC);

		if (!hs || fd < 0)
			nsbt_skip("no hugetlbfs here (memfd_create(MFD_HUGETLB): %s)",
				  fd < 0 ? strerror(errno) : "no Hugepagesize");
		/* Asked with the raw call, of a mapping the library leaves alone. */
		char *h = mmap(NULL, 2 * hs, PROT_READ, MAP_SHARED | MAP_NORESERVE, fd, 0);

		NSBT_CHECK(h != MAP_FAILED, "hugetlbfs mmap: %s", strerror(errno));
		/* A length that is not whole huge pages: rounded up since 5.16. */
		huge_mremap = syscall(SYS_mremap, h, 2 * hs, hs + ps, 0) != -1;
		NSBT_CHECK(huge_mremap || errno == EINVAL, "mremap of hugetlbfs: %s", strerror(errno));
		munmap(h, 2 * hs);
		close(fd);
		if (!huge_mremap)
			printf("note: this kernel cannot resize or move hugetlbfs mappings (Linux "
			       "5.16 and later can): the library must give the same EINVAL\n");
	}
	huge_all("hugetlbfs mremap shrink to hs + ps", huge_shrink_child);
	huge_all("hugetlbfs mremap move to hs + ps", huge_move_child);
	huge_all("unprotected hugetlbfs MAP_FIXED of hs + ps", huge_fixed_unprotected_child);
	huge_all("protected hugetlbfs MAP_FIXED of hs + ps", huge_fixed_protected_child);
	huge_all("hugetlbfs munmap/mprotect of part of a huge page", huge_partial_child);
	return 0;
}
