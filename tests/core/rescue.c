/* SPDX-License-Identifier: MIT */
/*
 * The rescue itself, over the matrix backing (memfd, tmpfs, disk) x
 * mapping type (MAP_PRIVATE, MAP_SHARED) x truncation (to 0, to the middle
 * of a page): reads past EOF see zeros, bytes before EOF still show the
 * file, writes past EOF succeed and read back, and the file keeps its size
 * and contents.  Then the controls: an unflagged mapping still dies by
 * SIGBUS, before and after a rescue in the same process.
 *
 * The matrix runs three times: in this process (NOSIGBUS_FILL unset: page)
 * and re-executed with NOSIGBUS_FILL=range and NOSIGBUS_FILL=auto.  Pages
 * are read in ascending order, so the counts are exact in every mode;
 * with auto, each fault continues the previous rescue and doubles its
 * window (1, 2, 4 ... pages, cut at the mapping's end).
 */
#include "core.h"

#define NPAGES 4

enum fill { FILL_PAGE, FILL_RANGE, FILL_AUTO };

static const char *const fill_names[] = { "page", "range", "auto" };

struct combo {
	enum nsbt_backing backing;
	int type;		/* MAP_PRIVATE or MAP_SHARED */
	bool mid;		/* truncate to 1.5 pages instead of 0 */
	enum fill fill;		/* the library's NOSIGBUS_FILL */
	int fd;
	size_t eof;
};

static const char *
combo_name(const struct combo *c)
{
	static char buf[128];

	snprintf(buf, sizeof(buf), "%s %s truncated to %s (fill=%s)",
		 nsbt_backing_name(c->backing),
		 c->type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE",
		 c->mid ? "1.5 pages" : "0", fill_names[c->fill]);
	return buf;
}

/* Signals for n pages faulted in ascending order with fill=auto: windows
 * of 1, 2, 4 ... pages, the last one cut at the mapping's end. */
static size_t
auto_rescues(size_t n)
{
	size_t signals = 0;

	for (size_t done = 0, window = 1; done < n; window *= 2, signals++)
		done += window;
	return signals;
}

/* The child: map, read everything, have the file truncated, check. */
static void
combo_child(void *arg)
{
	struct combo *c = arg;
	size_t ps = nsbt_page(), len = NPAGES * ps;
	size_t first = (c->eof + ps - 1) / ps;	/* first page wholly past EOF */
	struct nosigbus_stats before, after;
	volatile char *p;
	char name[160];
	uint64_t sum = 0;

	snprintf(name, sizeof(name), "%s", combo_name(c));
	p = core_map(NULL, len, CORE_PROT_RW, c->type | MAP_NOSIGBUS, c->fd, 0);
	/* The compositor had looked at every page before the client shrank the file. */
	for (size_t i = 0; i < len; i += ps)
		sum += (unsigned char)p[i];
	NSBT_CHECK(sum != 0, "%s: pages read as zero before truncation", name);
	core_truncate(c->fd, (off_t)c->eof);

	before = core_stats();
	core_expect_pattern((const char *)p, 0, c->eof, name);
	if (c->eof % ps)
		core_expect_bytes((const char *)p + c->eof, 0, first * ps - c->eof, name);
	/* Page by page and in ascending order, so the counts below are exact. */
	for (size_t pg = first; pg < NPAGES; pg++)
		core_expect_bytes((const char *)p + pg * ps, 0, ps, name);
	printf("ok: %s: bytes before EOF show the file, past EOF read zeros\n", name);

	for (size_t pg = first; pg < NPAGES; pg++)
		memset((char *)p + pg * ps, 0xa0 + (int)pg, ps);
	for (size_t pg = first; pg < NPAGES; pg++)
		core_expect_bytes((const char *)p + pg * ps, (char)(0xa0 + pg), ps, name);
	core_expect_pattern((const char *)p, 0, c->eof, name);
	printf("ok: %s: writes past EOF succeed and read back\n", name);

	after = core_stats();
	if (c->fill == FILL_AUTO) {
		NSBT_CHECK(after.rescues - before.rescues == auto_rescues(NPAGES - first),
			   "%s: %llu rescues, expected %zu (fill=auto: windows of 1, 2, 4 ...)",
			   name, (unsigned long long)(after.rescues - before.rescues),
			   auto_rescues(NPAGES - first));
		NSBT_CHECK(after.pages - before.pages == NPAGES - first,
			   "%s: %llu pages replaced, expected %zu", name,
			   (unsigned long long)(after.pages - before.pages),
			   NPAGES - first);
	} else if (c->fill == FILL_RANGE) {
		NSBT_CHECK(after.rescues - before.rescues == 1,
			   "%s: %llu rescues, expected 1 (fill=range)", name,
			   (unsigned long long)(after.rescues - before.rescues));
		NSBT_CHECK(after.pages - before.pages == NPAGES - first,
			   "%s: %llu pages replaced, expected %zu", name,
			   (unsigned long long)(after.pages - before.pages),
			   NPAGES - first);
	} else {
		NSBT_CHECK(after.rescues - before.rescues == NPAGES - first,
			   "%s: %llu rescues, expected %zu (one per page)", name,
			   (unsigned long long)(after.rescues - before.rescues),
			   NPAGES - first);
		NSBT_CHECK(after.pages - before.pages == NPAGES - first,
			   "%s: %llu pages replaced, expected %zu", name,
			   (unsigned long long)(after.pages - before.pages),
			   NPAGES - first);
	}
	NSBT_CHECK(after.failures == before.failures, "%s: failures counted", name);
	printf("ok: %s: stats count %llu rescues, %llu pages\n", name,
	       (unsigned long long)(after.rescues - before.rescues),
	       (unsigned long long)(after.pages - before.pages));
}

static void
run_combo(struct combo *c)
{
	size_t ps = nsbt_page();
	char name[160];
	char *buf;
	ssize_t n;

	c->eof = c->mid ? ps + ps / 2 : 0;
	c->fd = nsbt_file(c->backing, NPAGES * ps);
	snprintf(name, sizeof(name), "%s", combo_name(c));
	nsbt_expect_exit(nsbt_run(combo_child, c), 0, name);

	/* The child's writes went to private pages, never to the file. */
	core_expect_file(c->fd, c->eof, name);
	core_truncate(c->fd, (off_t)(NPAGES * ps));
	buf = malloc(NPAGES * ps);
	if (!buf)
		nsbt_fail("malloc");
	n = pread(c->fd, buf, NPAGES * ps, 0);
	NSBT_CHECK(n == (ssize_t)(NPAGES * ps), "pread: %zd", n);
	core_expect_pattern(buf, 0, c->eof, name);
	core_expect_bytes(buf + c->eof, 0, NPAGES * ps - c->eof,
			  "file regrown after the child wrote past EOF");
	free(buf);
	printf("ok: %s: file size and contents unchanged (fstat, pread)\n", name);
	close(c->fd);
}

static void
run_matrix(enum fill fill)
{
	static const enum nsbt_backing backings[] = { NSBT_MEMFD, NSBT_TMPFS, NSBT_DISK };
	static const int types[] = { MAP_PRIVATE, MAP_SHARED };

	for (size_t b = 0; b < 3; b++)
		for (size_t t = 0; t < 2; t++)
			for (int mid = 0; mid < 2; mid++) {
				struct combo c = {
					.backing = backings[b],
					.type = types[t],
					.mid = mid,
					.fill = fill,
				};
				run_combo(&c);
			}
}

/* Mapped at a file offset, with a length that is not a page multiple. */
static void
offset_child(void *arg)
{
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_MEMFD, 4 * ps);
	size_t len = 2 * ps + 100;	/* the record is rounded up to 3 pages */
	volatile char *p = core_map(NULL, len, CORE_PROT_RW,
				    MAP_PRIVATE | MAP_NOSIGBUS, fd, (off_t)ps);

	core_expect_pattern((const char *)p, ps, 3 * ps, "offset mapping before truncation");
	core_truncate(fd, (off_t)(2 * ps));
	core_expect_pattern((const char *)p, ps, ps, "offset mapping, page below EOF");
	/* The last byte of the partly covered last page, past EOF. */
	NSBT_CHECK(p[3 * ps - 1] == 0, "last byte of the rounded-up record");
	p[3 * ps - 1] = 'x';
	NSBT_CHECK(p[3 * ps - 1] == 'x', "write to the last page");
	core_expect_bytes((const char *)p + ps, 0, ps, "page past EOF");
	core_expect_file(fd, 2 * ps, "offset mapping: file unchanged");
	printf("ok: mapping at file offset 1 page, length 2 pages + 100: rescued\n");
	(void)arg;
}

/* mmap64 is interposed too. */
static void
mmap64_child(void *arg)
{
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_TMPFS, 2 * ps);
	volatile char *p = mmap64(NULL, 2 * ps, CORE_PROT_RW,
				  MAP_SHARED | MAP_NOSIGBUS, fd, 0);

	NSBT_CHECK(p != MAP_FAILED, "mmap64: %s", strerror(errno));
	core_truncate(fd, 0);
	core_expect_bytes((const char *)p, 0, 2 * ps, "mmap64 mapping past EOF");
	printf("ok: mmap64(MAP_SHARED|MAP_NOSIGBUS): rescued\n");
	(void)arg;
}

/* An explicit MAP_NOSIGBUS on an anonymous mapping is accepted and recorded. */
static void
anon_child(void *arg)
{
	size_t ps = nsbt_page();
	struct nosigbus_stats before = core_stats(), after;
	char *p = core_map(NULL, 3 * ps, CORE_PROT_RW,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NOSIGBUS, -1, 0);

	after = core_stats();
	NSBT_CHECK(after.mappings == before.mappings + 1,
		   "mappings %llu -> %llu, expected one more",
		   (unsigned long long)before.mappings,
		   (unsigned long long)after.mappings);
	memset(p, 7, 3 * ps);
	core_expect_bytes(p, 7, 3 * ps, "anonymous MAP_NOSIGBUS mapping");
	NSBT_CHECK(munmap(p, 3 * ps) == 0, "munmap: %s", strerror(errno));
	NSBT_CHECK(core_stats().mappings == before.mappings,
		   "the record is gone after munmap");
	printf("ok: anonymous MAP_NOSIGBUS mapping is recorded, works, and unrecorded by munmap\n");
	(void)arg;
}

/* The control: without the flag, a truncated file still kills. */
static void
unflagged_child(void *arg)
{
	bool rescue_first = *(bool *)arg;
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_MEMFD, 2 * ps);
	volatile char *u = core_map(NULL, 2 * ps, PROT_READ, MAP_SHARED, fd, 0);

	core_no_core();
	if (rescue_first) {
		int fd2 = nsbt_file(NSBT_MEMFD, 2 * ps);
		volatile char *p = core_map(NULL, 2 * ps, PROT_READ,
					    MAP_PRIVATE | MAP_NOSIGBUS, fd2, 0);

		core_truncate(fd2, 0);
		NSBT_CHECK(p[ps] == 0, "rescue before the control");
		NSBT_CHECK(core_stats().rescues >= 1, "a rescue was counted");
	}
	core_truncate(fd, 0);
	(void)u[ps];
	_exit(3);	/* survived: wrong */
}

static int
scenario(const char *name)
{
	if (strcmp(name, "matrix-range") == 0) {
		run_matrix(FILL_RANGE);
		return 0;
	}
	if (strcmp(name, "matrix-auto") == 0) {
		run_matrix(FILL_AUTO);
		return 0;
	}
	nsbt_fail("unknown scenario %s", name);
}

int
main(int argc, char **argv)
{
	static const char *const range_env[] = { "NOSIGBUS_FILL=range", NULL };
	static const char *const auto_env[] = { "NOSIGBUS_FILL=auto", NULL };
	bool no = false, yes = true;

	core_require_library();
	if (argc > 1)
		return scenario(argv[1]);

	/* Before any protected mapping exists, the control dies as usual. */
	nsbt_expect_signal(nsbt_run(unflagged_child, &no), SIGBUS,
			   "unflagged mapping, no protected mapping in the process");

	run_matrix(FILL_PAGE);
	nsbt_expect_exit(core_reexec("matrix-range", range_env), 0,
			 "the matrix again under NOSIGBUS_FILL=range");

	nsbt_expect_exit(nsbt_run(offset_child, NULL), 0, "offset mapping");
	nsbt_expect_exit(nsbt_run(mmap64_child, NULL), 0, "mmap64");
	nsbt_expect_exit(nsbt_run(anon_child, NULL), 0, "anonymous MAP_NOSIGBUS");

	nsbt_expect_signal(nsbt_run(unflagged_child, &no), SIGBUS,
			   "unflagged mapping past EOF");
	nsbt_expect_signal(nsbt_run(unflagged_child, &yes), SIGBUS,
			   "unflagged mapping past EOF after a rescue in the same process");
	nsbt_expect_exit(core_reexec("matrix-auto", auto_env), 0,
			 "the matrix again under NOSIGBUS_FILL=auto");
	return 0;
}
