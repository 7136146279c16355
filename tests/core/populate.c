/* SPDX-License-Identifier: MIT */
/*
 * A fill of many pages is populated with the zero page in the same rescue
 * (issue 24's hostile frame), only where that costs no memory, and never
 * more than 64 MiB a rescue.  Residency is asked of mincore(): a page of
 * the replacement that nobody touched is resident only if the rescue
 * populated it.
 *
 *   - on (NSB_TEST_POPULATE=on): a range fill's untouched pages are
 *     resident, read zeros, take writes; a read-only record too; an auto
 *     window of two; a page fill populates nothing; a fill of more than
 *     64 MiB populates exactly its first 64 MiB; a page written before a
 *     fill reaches it keeps its bytes;
 *   - off (NSB_TEST_POPULATE=off): a range fill populates nothing;
 *   - detected (no setting): populated exactly when this kernel maps the
 *     zero page for a read of anonymous memory, which this test learns its
 *     own way (the memory a read of 64 fresh pages adds to smaps_rollup's
 *     Rss), and transparent huge pages allow it.
 *
 * Each scenario runs in a child of a fresh exec with its settings.
 */
#include "core.h"

#define CAP ((size_t)64 << 20)

/* How many of the n pages from p are resident. */
static size_t
resident(const char *p, size_t n)
{
	unsigned char *v = malloc(n);
	size_t k = 0;

	if (!v)
		nsbt_fail("malloc");
	if (mincore((void *)p, n * nsbt_page(), v) < 0)
		nsbt_fail("mincore: %s", strerror(errno));
	for (size_t i = 0; i < n; i++)
		k += v[i] & 1;
	free(v);
	return k;
}

/* n pages of a memfd, protected with MAP_NOSIGBUS, then emptied. */
static char *
emptied(size_t n, int prot, int type)
{
	int fd = nsbt_file(NSBT_MEMFD, n * nsbt_page());
	char *p = core_map(NULL, n * nsbt_page(), prot, type | MAP_NOSIGBUS, fd, 0);

	core_truncate(fd, 0);
	close(fd);
	return p;
}

static void
read_page(const char *p, size_t pg, const char *what)
{
	volatile const char *v = p + pg * nsbt_page();

	if (*v != 0)
		nsbt_fail("%s: page %zu reads %#x", what, pg, (unsigned char)*v);
}

/* The record's pages [from, to) all resident, or none. */
static void
expect_resident(const char *p, size_t from, size_t to, bool all, const char *what)
{
	size_t k = resident(p + from * nsbt_page(), to - from);

	if (k != (all ? to - from : 0))
		nsbt_fail("%s: %zu of pages %zu-%zu resident, expected %s", what, k, from, to - 1,
			  all ? "all" : "none");
}

/* ---- NSB_TEST_POPULATE=on ------------------------------------------------ */

static void
range_on(void)
{
	static const int types[] = { MAP_SHARED, MAP_PRIVATE };
	size_t ps = nsbt_page();

	for (int t = 0; t < 2; t++) {
		char *p = emptied(64, CORE_PROT_RW, types[t]);
		struct nosigbus_stats a = core_stats(), b;

		read_page(p, 3, "range fill");
		b = core_stats();
		if (b.rescues - a.rescues != 1 || b.pages - a.pages != 61)
			nsbt_fail("range fill: %llu signals, %llu pages (expected 1, 61)",
				  (unsigned long long)(b.rescues - a.rescues),
				  (unsigned long long)(b.pages - a.pages));
		expect_resident(p, 4, 64, true, "range fill, populated");
		expect_resident(p, 0, 3, false, "range fill, below the fault");
		core_expect_bytes(p + 3 * ps, 0, 61 * ps, "range fill, populated pages");
		memset(p + 10 * ps, 'W', ps);
		core_expect_bytes(p + 10 * ps, 'W', ps, "range fill, a write");
		core_expect_bytes(p + 11 * ps, 0, ps, "range fill, the page after the write");
		munmap(p, 64 * ps);
	}
	printf("ok: range fill: the untouched pages are populated, read zeros, take writes\n");
}

static void
read_only_on(void)
{
	char *p = emptied(16, PROT_READ, MAP_SHARED);

	read_page(p, 0, "read-only record");
	expect_resident(p, 1, 16, true, "read-only record");
	munmap(p, 16 * nsbt_page());
	printf("ok: a read-only record is populated too\n");
}

static void
page_fill_on(void)
{
	char *p = emptied(16, CORE_PROT_RW, MAP_SHARED);

	read_page(p, 0, "page fill");
	expect_resident(p, 1, 16, false, "page fill");
	munmap(p, 16 * nsbt_page());
	printf("ok: a page fill populates nothing beside its page\n");
}

/* A range fill's page, written, then a range fill below it: the second
 * stops below the first and the written bytes stay. */
static void
written_kept_on(void)
{
	size_t ps = nsbt_page();
	char *p = emptied(32, CORE_PROT_RW, MAP_SHARED);

	memset(p + 20 * ps, 'K', ps);	/* pages 20-31 replaced, 20 written */
	read_page(p, 5, "range after a written page");
	core_expect_bytes(p + 20 * ps, 'K', ps, "the written page");
	expect_resident(p, 6, 20, true, "range after a written page");
	munmap(p, 32 * ps);
	printf("ok: a populated fill stops below a written page, whose bytes stay\n");
}

static void
cap_on(void)
{
	size_t ps = nsbt_page(), cap = CAP / ps, n = cap + 8;
	char *p = emptied(n, CORE_PROT_RW, MAP_SHARED);

	read_page(p, 0, "a fill over 64 MiB");
	expect_resident(p, 0, cap, true, "a fill over 64 MiB, its first 64 MiB");
	expect_resident(p, cap, n, false, "a fill over 64 MiB, beyond 64 MiB");
	read_page(p, n - 1, "a fill over 64 MiB, its last page");
	munmap(p, n * ps);
	printf("ok: a fill populates its first 64 MiB, no more\n");
}

static void
auto_on(void)
{
	char *p = emptied(16, CORE_PROT_RW, MAP_SHARED);

	read_page(p, 0, "auto, first window");	/* page 0 */
	read_page(p, 1, "auto, second window");	/* pages 1-2 */
	expect_resident(p, 2, 3, true, "auto, second window");
	expect_resident(p, 3, 16, false, "auto, beyond the window");
	munmap(p, 16 * nsbt_page());
	printf("ok: an auto window of two is populated, nothing beyond it\n");
}

/* ---- off, and detected ---------------------------------------------------- */

static void
range_expect(bool populated, const char *what)
{
	char *p = emptied(64, CORE_PROT_RW, MAP_SHARED);

	read_page(p, 0, what);
	expect_resident(p, 1, 64, populated, what);
	munmap(p, 64 * nsbt_page());
	printf("ok: %s: range fill %s\n", what, populated ? "populated" : "not populated");
}

static long
rss_kib(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "re");
	char line[256];
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "Rss:", 4) == 0)
			v = atol(line + 4);
	fclose(f);
	return v;
}

static char
first_char(const char *path)
{
	FILE *f = fopen(path, "re");
	int c;

	if (!f)
		return 0;
	c = fgetc(f);
	fclose(f);
	return c == EOF ? 0 : (char)c;
}

/* Whether reading fresh anonymous memory maps the zero page, told by the
 * memory it adds: 64 pages read add 64 pages of Rss where it does not. */
static int
zero_page_here(void)
{
	size_t ps = nsbt_page(), n = 64;
	char *p = mmap(NULL, n * ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long before, after;

	if (p == MAP_FAILED)
		nsbt_fail("mmap: %s", strerror(errno));
	(void)madvise(p, n * ps, MADV_NOHUGEPAGE);
	before = rss_kib();
	for (size_t i = 0; i < n; i++)
		read_page(p, i, "fresh anonymous memory");
	after = rss_kib();
	munmap(p, n * ps);
	if (before < 0 || after < 0)
		return -1;
	return after - before < (long)(n * ps / 1024 / 2);
}

static void
off_fill(void)
{
	range_expect(false, "NSB_TEST_POPULATE=off");
}

static void
detected(void)
{
	int zero = zero_page_here();
	bool thp = first_char("/sys/kernel/mm/transparent_hugepage/enabled") != 0;
	bool huge_zero = first_char("/sys/kernel/mm/transparent_hugepage/use_zero_page") == '1';

	if (zero < 0)
		nsbt_skip("no /proc/self/smaps_rollup: cannot tell whether this kernel maps the zero page");
	printf("ok: this kernel %s the zero page for a read of anonymous memory%s\n",
	       zero ? "maps" : "does not map (it allocates a page)",
	       thp && !huge_zero ? "; transparent huge pages without use_zero_page" : "");
	range_expect(zero && (!thp || huge_zero), "detected");
}

int
main(int argc, char **argv)
{
	static const char *const range[] = { "NSB_TEST_POPULATE=on", "NOSIGBUS_FILL=range", NULL };
	static const char *const autofill[] = { "NSB_TEST_POPULATE=on", "NOSIGBUS_FILL=auto", NULL };
	static const char *const page[] = { "NSB_TEST_POPULATE=on", "NOSIGBUS_FILL=page", NULL };
	static const char *const off[] = { "NSB_TEST_POPULATE=off", "NOSIGBUS_FILL=range", NULL };
	static const char *const detect[] = { "NOSIGBUS_FILL=range", NULL };
	static const struct {
		const char *name;
		void (*fn)(void);
		const char *const *settings;
	} scenarios[] = {
		{ "range", range_on, range }, { "read-only", read_only_on, range },
		{ "written", written_kept_on, range }, { "cap", cap_on, range },
		{ "page", page_fill_on, page }, { "auto", auto_on, autofill },
		{ "off", off_fill, off }, { "detected", detected, detect },
	};
	size_t n = sizeof(scenarios) / sizeof(scenarios[0]);

	core_require_library();
	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "flag");
	if (argc > 1) {
		for (size_t i = 0; i < n; i++)
			if (!strcmp(argv[1], scenarios[i].name)) {
				scenarios[i].fn();
				return 0;
			}
		nsbt_fail("unknown scenario %s", argv[1]);
	}
	/* "detected" decides by itself: no setting from outside. */
	unsetenv("NSB_TEST_POPULATE");
	for (size_t i = 0; i < n; i++)
		nsbt_expect_exit(core_reexec(scenarios[i].name, scenarios[i].settings), 0,
				 nsbt_fmt("%s (%s)", scenarios[i].name, scenarios[i].settings[0]));
	return 0;
}
