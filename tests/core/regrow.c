/* SPDX-License-Identifier: MIT */
/*
 * The file grows again after a truncation.
 *
 * NOSIGBUS_FILL=page (the default, the kernel patch's semantics): only the
 * page that faulted was replaced; pages never touched keep showing the
 * file, so they show the regrown file's new data.  The rescued page keeps
 * what the program wrote to it.
 *
 * NOSIGBUS_FILL=range (documented behaviour): one fault replaces the page
 * and the rest of the mapping, so the tail stays zero (or what the program
 * wrote) even after the file regrows; pages before the fault still follow
 * the file.  Earlier rescues are never undone: data written to a rescued
 * page survives a later fault lower in the same mapping.
 *
 * NOSIGBUS_FILL=auto (issue 13): a first fault replaces one page, as page
 * fill does, so the cases above hold as for page fill; a fault right after
 * the previous rescue doubles the window, and the pages it replaced ahead
 * of the program no longer follow a regrown file (documented).
 */
#include "core.h"

#define NPAGES 6

/* The regrown file's data: a different pattern, so that it cannot be old data. */
static char
newbyte(size_t i)
{
	return (char)(0x80 | ((i * 13 + 5) & 0x7f));
}

static void
regrow_file(int fd, size_t size)
{
	char *buf = malloc(size);

	if (!buf)
		nsbt_fail("malloc");
	for (size_t i = 0; i < size; i++)
		buf[i] = newbyte(i);
	core_truncate(fd, (off_t)size);
	if (pwrite(fd, buf, size, 0) != (ssize_t)size)
		nsbt_fail("pwrite: %s", strerror(errno));
	free(buf);
}

static void
expect_new(const volatile char *p, size_t off, size_t len, const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != newbyte(off + i))
			nsbt_fail("%s: byte at file offset %zu is %#x, expected the "
				  "regrown file's %#x", what, off + i,
				  (unsigned char)p[i], (unsigned char)newbyte(off + i));
}

enum fill { FILL_PAGE, FILL_RANGE, FILL_AUTO };

static const char *const fill_names[] = { "page", "range", "auto" };

struct rg {
	int type;
	enum fill fill;
};

/*
 * 6 pages, truncated to 1.5 pages.  Page 3 is written (a rescue), then the
 * file regrows to 6 pages with new data.
 */
static void
regrow_child(void *arg)
{
	struct rg *r = arg;
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_MEMFD, NPAGES * ps);
	volatile char *p = core_map(NULL, NPAGES * ps, CORE_PROT_RW,
				    r->type | MAP_NOSIGBUS, fd, 0);
	struct nosigbus_stats before, after;
	char name[96];

	snprintf(name, sizeof(name), "%s, fill=%s",
		 r->type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE", fill_names[r->fill]);
	core_truncate(fd, (off_t)(ps + ps / 2));
	before = core_stats();
	memset((char *)p + 3 * ps, 'W', ps);
	after = core_stats();
	NSBT_CHECK(after.rescues == before.rescues + 1, "%s: one rescue", name);
	NSBT_CHECK(after.pages - before.pages == (r->fill == FILL_RANGE ? NPAGES - 3 : 1),
		   "%s: %llu pages replaced, expected %d", name,
		   (unsigned long long)(after.pages - before.pages),
		   r->fill == FILL_RANGE ? NPAGES - 3 : 1);

	regrow_file(fd, NPAGES * ps);
	/* Pages 0-1 were never rescued: the file's new data, in both modes. */
	expect_new(p, 0, 2 * ps, name);
	/* Page 3 keeps the program's data in both modes. */
	core_expect_bytes((const char *)p + 3 * ps, 'W', ps, name);
	if (r->fill != FILL_RANGE) {
		/* Never touched: they follow the file. */
		expect_new(p + 2 * ps, 2 * ps, ps, name);
		expect_new(p + 4 * ps, 4 * ps, 2 * ps, name);
		printf("ok: %s: never-touched pages show the regrown file's data\n", name);
	} else {
		/* Page 2 is below the fault: still the file. Pages 4-5 were replaced. */
		expect_new(p + 2 * ps, 2 * ps, ps, name);
		core_expect_bytes((const char *)p + 4 * ps, 0, 2 * ps, name);
		printf("ok: %s: the replaced tail stays zero after the file regrows\n", name);
	}
	NSBT_CHECK(core_stats().rescues == after.rescues, "%s: no rescue while reading", name);
	printf("ok: %s: page 3 keeps the written data\n", name);
}

/*
 * Range fill never undoes an earlier rescue: write page 4 (range rescues
 * 4-5), then touch page 1 (range rescues from 1 on): page 4's data stays.
 * In page mode the same holds trivially; it is checked in both modes.
 */
static void
no_clobber_child(void *arg)
{
	struct rg *r = arg;
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_MEMFD, NPAGES * ps);
	char *p = core_map(NULL, NPAGES * ps, CORE_PROT_RW, r->type | MAP_NOSIGBUS, fd, 0);
	char name[96];

	snprintf(name, sizeof(name), "%s, fill=%s, earlier rescue kept",
		 r->type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE", fill_names[r->fill]);
	core_truncate(fd, 0);
	memset(p + 4 * ps, 'D', ps);
	memset(p + 5 * ps, 'E', ps);
	p[ps] = 'b';
	core_expect_bytes(p + 4 * ps, 'D', ps, name);
	core_expect_bytes(p + 5 * ps, 'E', ps, name);
	NSBT_CHECK(p[ps] == 'b', "%s: page 1", name);
	core_expect_bytes(p, 0, ps, name);
	printf("ok: %s: data written to a rescued page survives a later rescue below it\n", name);
}

/*
 * fill=auto, the window ahead of the program: pages 0 and 1 are touched in
 * order (the second fault replaces pages 1-2), then the file regrows.
 * Page 2 was replaced ahead, never touched: it stays zero.  Pages 3-5
 * were never replaced: they show the regrown file.  Page 1 keeps what
 * the program wrote.
 */
static void
ahead_child(void *arg)
{
	struct rg *r = arg;
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_MEMFD, NPAGES * ps);
	volatile char *p = core_map(NULL, NPAGES * ps, CORE_PROT_RW,
				    r->type | MAP_NOSIGBUS, fd, 0);
	struct nosigbus_stats before, after;
	char name[96];

	snprintf(name, sizeof(name), "%s, fill=auto, window ahead",
		 r->type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE");
	core_truncate(fd, 0);
	before = core_stats();
	NSBT_CHECK(p[0] == 0, "%s: page 0", name);
	p[ps] = 'w';
	after = core_stats();
	NSBT_CHECK(after.rescues - before.rescues == 2 && after.pages - before.pages == 3,
		   "%s: %llu rescues replacing %llu pages, expected 2 replacing 3 (page 0, "
		   "then pages 1-2)", name, (unsigned long long)(after.rescues - before.rescues),
		   (unsigned long long)(after.pages - before.pages));

	regrow_file(fd, NPAGES * ps);
	core_expect_bytes((const char *)p, 0, ps, name);
	NSBT_CHECK(p[ps] == 'w', "%s: page 1 keeps the written byte", name);
	core_expect_bytes((const char *)p + 2 * ps, 0, ps, name);
	expect_new(p + 3 * ps, 3 * ps, 3 * ps, name);
	NSBT_CHECK(core_stats().rescues == after.rescues, "%s: no rescue while reading", name);
	printf("ok: %s: a page replaced ahead stays zero after the file regrows; the pages "
	       "after the window follow the file\n", name);
}

static void
run(enum fill fill)
{
	static const int types[] = { MAP_PRIVATE, MAP_SHARED };

	for (int i = 0; i < 2; i++) {
		struct rg r = { types[i], fill };

		nsbt_expect_exit(nsbt_run(regrow_child, &r), 0, "regrow");
		nsbt_expect_exit(nsbt_run(no_clobber_child, &r), 0, "earlier rescue kept");
		if (fill == FILL_AUTO)
			nsbt_expect_exit(nsbt_run(ahead_child, &r), 0, "window ahead");
	}
}

int
main(int argc, char **argv)
{
	static const char *const range_env[] = { "NOSIGBUS_FILL=range", NULL };
	static const char *const page_env[] = { "NOSIGBUS_FILL=page", NULL };
	static const char *const auto_env[] = { "NOSIGBUS_FILL=auto", NULL };

	core_require_library();
	if (argc > 1) {
		if (strcmp(argv[1], "range") == 0)
			run(FILL_RANGE);
		else if (strcmp(argv[1], "page") == 0)
			run(FILL_PAGE);
		else if (strcmp(argv[1], "auto") == 0)
			run(FILL_AUTO);
		else
			nsbt_fail("unknown scenario %s", argv[1]);
		return 0;
	}
	run(FILL_PAGE);
	nsbt_expect_exit(core_reexec("page", page_env), 0, "NOSIGBUS_FILL=page set explicitly");
	nsbt_expect_exit(core_reexec("range", range_env), 0, "NOSIGBUS_FILL=range");
	nsbt_expect_exit(core_reexec("auto", auto_env), 0, "NOSIGBUS_FILL=auto");
	return 0;
}
