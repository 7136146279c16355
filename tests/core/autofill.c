/* SPDX-License-Identifier: MIT */
/*
 * NOSIGBUS_FILL=auto (issue 13 part 2): page semantics for scattered
 * faults, range speed for scans.  The rules, as the kernel's readahead
 * has them: a fault on the page right after the pages that the last
 * rescue in the same record replaced doubles the window (1, 2, 4, 8 ...
 * pages, up to the record's end, never over pages that an earlier fill
 * replaced); any other fault starts again at one page.
 *
 * Counted with nosigbus_get_stats(): rescues are signals answered, pages
 * are pages replaced.
 *
 *   - a sequential scan of N pages costs at most 2 log2(N) + 2 signals,
 *     reads zeros and writes stick;
 *   - a scattered one (random order, never the page right after the
 *     previous one) costs one signal per page, one page each;
 *   - the window: 1, 2, 4, 8 ... pages, cut at the record's end;
 *   - a fault anywhere else starts again at one page, forward or back;
 *   - a window stops below a page that an earlier rescue replaced, and
 *     what the program wrote there survives.
 *
 * Everything runs re-executed with NOSIGBUS_FILL=auto, each scenario in a
 * child of its own; all of them run, and each failure is reported.
 */
#include "core.h"

static const char *
type_name(int type)
{
	return type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE";
}

/* n pages of an emptied file, protected; *fd for the caller to close. */
static char *
truncated(size_t n, int type, int *fd)
{
	size_t ps = nsbt_page();
	char *p;

	*fd = nsbt_file(NSBT_MEMFD, n * ps);
	p = core_map(NULL, n * ps, CORE_PROT_RW, type | MAP_NOSIGBUS, *fd, 0);
	core_truncate(*fd, 0);
	return p;
}

/*
 * Touches page pg (a read, or a write of c) and checks that it cost
 * exactly `rescues` signals replacing `pages` pages.
 */
static void
touch_expect(char *p, size_t pg, bool write, char c, uint64_t rescues, uint64_t pages,
	     const char *what)
{
	volatile char *v = p + pg * nsbt_page();
	struct nosigbus_stats a = core_stats(), b;

	if (write)
		*v = c;
	else if (*v != 0)
		nsbt_fail("%s: page %zu reads %#x, expected 0", what, pg, (unsigned char)*v);
	b = core_stats();
	if (b.rescues - a.rescues != rescues || b.pages - a.pages != pages)
		nsbt_fail("%s: touching page %zu cost %llu signals replacing %llu pages, "
			  "expected %llu replacing %llu", what, pg,
			  (unsigned long long)(b.rescues - a.rescues),
			  (unsigned long long)(b.pages - a.pages),
			  (unsigned long long)rescues, (unsigned long long)pages);
	NSBT_CHECK(b.failures == a.failures, "%s: a failed rescue was counted", what);
}

/* ---- a sequential scan --------------------------------------------------- */

struct scan {
	int type;
	bool write;
	size_t n;
};

/* The largest whole number of signals within 2 log2(n) + 2: the largest
 * k with 2^(k - 2) <= n^2. */
static uint64_t
scan_bound(size_t n)
{
	uint64_t k = 2;

	while (k - 1 < 64 && ((uint64_t)1 << (k - 1)) <= (uint64_t)n * n)
		k++;
	return k;
}

static void
scan_child(void *arg)
{
	const struct scan *s = arg;
	size_t ps = nsbt_page();
	uint64_t bound = scan_bound(s->n);
	struct nosigbus_stats a, b;
	char name[96];
	char *p;
	int fd;

	snprintf(name, sizeof(name), "%s sequential %s of %zu pages", type_name(s->type),
		 s->write ? "write" : "read", s->n);
	p = truncated(s->n, s->type, &fd);
	a = core_stats();
	for (size_t pg = 0; pg < s->n; pg++) {
		volatile char *v = p + pg * ps;

		if (s->write)
			*v = (char)(pg | 1);
		else if (*v != 0)
			nsbt_fail("%s: page %zu is not zero", name, pg);
	}
	b = core_stats();
	if (s->write)
		for (size_t pg = 0; pg < s->n; pg++)
			if (p[pg * ps] != (char)(pg | 1))
				nsbt_fail("%s: the write to page %zu did not stick", name, pg);
	NSBT_CHECK(b.pages - a.pages == s->n, "%s: %llu pages replaced, expected %zu", name,
		   (unsigned long long)(b.pages - a.pages), s->n);
	NSBT_CHECK(b.failures == a.failures, "%s: a failed rescue was counted", name);
	if (b.rescues - a.rescues > bound)
		nsbt_fail("%s: %llu signals, expected at most 2 log2(%zu) + 2, that is %llu", name,
			  (unsigned long long)(b.rescues - a.rescues), s->n,
			  (unsigned long long)bound);
	printf("ok: %s: %llu signals (at most %llu)\n", name,
	       (unsigned long long)(b.rescues - a.rescues), (unsigned long long)bound);
	core_expect_file(fd, 0, name);
}

/* ---- a scattered scan ---------------------------------------------------- */

/* A random order of n pages in which no page comes right after the page
 * before it (so that no fault continues the previous rescue). */
static size_t *
scattered_order(size_t n, uint64_t seed)
{
	size_t *o = malloc(n * sizeof(*o));

	if (!o)
		nsbt_fail("malloc");
	for (size_t i = 0; i < n; i++)
		o[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)(nsbt_random(&seed) % (i + 1)), t = o[i];

		o[i] = o[j];
		o[j] = t;
	}
	/* Break each ascending neighbour pair by swapping with a random other
	 * place, until there is none (a few passes at most). */
	for (bool again = true; again; ) {
		again = false;
		for (size_t i = 0; i + 1 < n; i++)
			if (o[i + 1] == o[i] + 1) {
				size_t j = (size_t)(nsbt_random(&seed) % n), t = o[i + 1];

				o[i + 1] = o[j];
				o[j] = t;
				again = true;
			}
	}
	return o;
}

static void
scattered_child(void *arg)
{
	const struct scan *s = arg;
	size_t *order = scattered_order(s->n, 0x5eed + (uint64_t)s->type + s->write);
	char name[96];
	char *p;
	int fd;

	snprintf(name, sizeof(name), "%s scattered %s of %zu pages", type_name(s->type),
		 s->write ? "write" : "read", s->n);
	p = truncated(s->n, s->type, &fd);
	for (size_t i = 0; i < s->n; i++)
		touch_expect(p, order[i], s->write, 'w', 1, 1, name);
	if (s->write)
		core_expect_bytes(p, 'w', 1, name);
	printf("ok: %s: one signal and one page per page\n", name);
	free(order);
}

/* ---- the window ---------------------------------------------------------- */

/* 20 pages read in order: windows of 1, 2, 4, 8, then the 5 left. */
static void
doubling_child(void *arg)
{
	static const size_t faults[] = { 0, 1, 3, 7, 15 };
	static const size_t sizes[] = { 1, 2, 4, 8, 5 };
	int type = *(int *)arg;
	char name[96];
	char *p;
	int fd;

	snprintf(name, sizeof(name), "%s window growth", type_name(type));
	p = truncated(20, type, &fd);
	for (size_t k = 0; k < 5; k++) {
		touch_expect(p, faults[k], false, 0, 1, sizes[k], name);
		/* The rest of the window is there: no signal. */
		for (size_t pg = faults[k] + 1; pg < faults[k] + sizes[k]; pg++)
			touch_expect(p, pg, false, 0, 0, 0, name);
	}
	printf("ok: %s: windows of 1, 2, 4, 8 pages, then cut at the record's end (5)\n", name);
}

/* After the window has grown, a fault that does not continue it (ahead
 * or behind) starts again at one page, and may grow again from there. */
static void
reset_child(void *arg)
{
	int type = *(int *)arg;
	char name[96];
	char *p;
	int fd;

	snprintf(name, sizeof(name), "%s window reset", type_name(type));
	p = truncated(40, type, &fd);
	touch_expect(p, 0, false, 0, 1, 1, name);
	touch_expect(p, 1, false, 0, 1, 2, name);	/* 1-2 */
	touch_expect(p, 3, false, 0, 1, 4, name);	/* 3-6 */
	touch_expect(p, 10, false, 0, 1, 1, name);	/* not 7: one page */
	touch_expect(p, 11, false, 0, 1, 2, name);	/* 11-12 */
	touch_expect(p, 20, true, 'x', 1, 1, name);	/* not 13 */
	touch_expect(p, 8, false, 0, 1, 1, name);	/* behind: one page */
	touch_expect(p, 30, false, 0, 1, 1, name);	/* not 9 */
	touch_expect(p, 31, true, 'y', 1, 2, name);	/* 31-32 */
	touch_expect(p, 33, false, 0, 1, 4, name);	/* 33-36 */
	NSBT_CHECK(p[20 * nsbt_page()] == 'x' && p[31 * nsbt_page()] == 'y',
		   "%s: the writes stuck", name);
	printf("ok: %s: any other fault, ahead or behind, starts again at one page\n", name);
}

/*
 * Pages the program wrote after an earlier rescue are never replaced by
 * a later window: the window stops below them.
 */
static void
earlier_child(void *arg)
{
	int type = *(int *)arg;
	size_t ps = nsbt_page();
	char name[96];
	char *p;
	int fd;

	snprintf(name, sizeof(name), "%s earlier rescue kept", type_name(type));
	p = truncated(16, type, &fd);
	touch_expect(p, 2, true, 'D', 1, 1, name);
	memset(p + 2 * ps, 'D', ps);
	touch_expect(p, 9, true, 'E', 1, 1, name);
	memset(p + 9 * ps, 'E', ps);

	touch_expect(p, 0, false, 0, 1, 1, name);
	/* A window of 2 would be pages 1-2: page 2 is the program's. */
	touch_expect(p, 1, false, 0, 1, 1, name);
	core_expect_bytes(p + 2 * ps, 'D', ps, name);

	touch_expect(p, 4, false, 0, 1, 1, name);
	touch_expect(p, 5, false, 0, 1, 2, name);	/* 5-6 */
	/* A window of 4 would be pages 7-10: it stops below page 9. */
	touch_expect(p, 7, false, 0, 1, 2, name);	/* 7-8 */
	core_expect_bytes(p + 9 * ps, 'E', ps, name);
	core_expect_bytes(p + 2 * ps, 'D', ps, name);
	printf("ok: %s: a window stops below a page rescued earlier; its data survives\n", name);
}

/* ---- driver -------------------------------------------------------------- */

static int failed;

static void
expect_ok(int status, const char *what)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		printf("ok: %s\n", what);
		return;
	}
	fprintf(stderr, "FAIL: %s: %s\n", what, nsbt_status_str(status));
	failed++;
}

static int
run_all(void)
{
	static const int types[] = { MAP_PRIVATE, MAP_SHARED };

	for (int t = 0; t < 2; t++) {
		int type = types[t];

		expect_ok(nsbt_run(doubling_child, &type), "window growth");
		expect_ok(nsbt_run(reset_child, &type), "window reset");
		expect_ok(nsbt_run(earlier_child, &type), "earlier rescue kept");
		for (int w = 0; w < 2; w++) {
			struct scan seq = { type, w, 1000 }, scat = { type, w, 256 };

			expect_ok(nsbt_run(scan_child, &seq), "sequential scan");
			expect_ok(nsbt_run(scattered_child, &scat), "scattered scan");
		}
	}
	if (failed)
		fprintf(stderr, "FAIL: %d of 14 NOSIGBUS_FILL=auto scenarios\n", failed);
	return failed ? 1 : 0;
}

int
main(int argc, char **argv)
{
	static const char *const auto_env[] = { "NOSIGBUS_FILL=auto", NULL };

	core_require_library();
	if (argc > 1) {
		if (strcmp(argv[1], "auto") == 0)
			return run_all();
		nsbt_fail("unknown scenario %s", argv[1]);
	}
	nsbt_expect_exit(core_reexec("auto", auto_env), 0, "NOSIGBUS_FILL=auto");
	return 0;
}
