/* SPDX-License-Identifier: MIT */
/*
 * The vm.max_map_count fallback.  Page-by-page rescues split a mapping
 * into many kernel VMAs; when the process has used up its budget
 * (vm.max_map_count), a one-page replacement fails with ENOMEM and the
 * library must replace the rest of the record instead (one VMA), so the
 * fault is still rescued and the process lives.
 *
 * How the budget is filled: one big anonymous mapping whose odd pages are
 * made read-only one by one (each mprotect adds two VMAs) until mprotect
 * fails with ENOMEM.  The kernel refuses a split that would go past the
 * limit, so at that point the process has exactly vm.max_map_count VMAs.
 * Then four single-page VMAs are unmapped, leaving room for 4 more.
 *
 * The protected mapping P (an empty file, PROT_NONE guard pages around it
 * so that nothing merges with it) is then read at pages 2, 4, 6, ...: each
 * one-page replacement in the middle of a file VMA costs two VMAs, so
 * pages 2 and 4 use up the room and the one-page replacement of page 6
 * fails with ENOMEM.  The library falls back to pages 6 to the end.
 * (The room is even on purpose: the kernel lets a middle split through one
 * VMA below the limit and then refuses every mmap, the fallback too.)
 *
 * All of it runs again re-executed with NOSIGBUS_FILL=auto: pages 2, 4, 6
 * never continue the previous rescue, so each is a one-page window and
 * the counts are those of page fill; then the process checks that the
 * library did run with auto (a fault right after a one-page rescue
 * replaces two pages).
 */
#include "core.h"

#define NPAGES 64

static size_t
max_map_count(void)
{
	FILE *f = fopen("/proc/sys/vm/max_map_count", "re");
	long long v = -1;

	if (!f || fscanf(f, "%lld", &v) != 1)
		nsbt_fail("cannot read /proc/sys/vm/max_map_count");
	fclose(f);
	return (size_t)v;
}

/* VMAs of this process, as /proc/self/maps lists them ([vsyscall] is not one). */
static char *maps_buf;
static size_t maps_size;

static size_t
count_vmas(void)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	size_t n = 0, lines = 0;
	ssize_t r;

	if (fd < 0)
		nsbt_fail("open /proc/self/maps: %s", strerror(errno));
	while ((r = read(fd, maps_buf + n, maps_size - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	maps_buf[n] = 0;
	for (size_t i = 0; i < n; i++)
		lines += maps_buf[i] == '\n';
	if (strstr(maps_buf, "[vsyscall]"))
		lines--;
	return lines;
}

static void
maxmap_child(void *arg)
{
	int type = *(int *)arg;
	size_t ps = nsbt_page(), max = max_map_count();
	size_t nfill = max + 64;
	int fd = nsbt_file(NSBT_MEMFD, NPAGES * ps);
	char *guard, *p, *fill;
	struct nosigbus_stats st0, st1, st2;
	size_t i, at_limit;

	maps_size = (max + 1000) * 128;
	maps_buf = core_map(NULL, maps_size, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(maps_buf, 0, maps_size);

	guard = core_map(NULL, (NPAGES + 2) * ps, PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	p = core_map(guard + ps, NPAGES * ps, CORE_PROT_RW,
		     type | MAP_FIXED | MAP_NOSIGBUS, fd, 0);
	core_truncate(fd, 0);
	/* Everything the library may do lazily on a first rescue, done now. */
	{
		int wfd = nsbt_file(NSBT_MEMFD, ps);
		char *w = core_map(NULL, ps, PROT_READ, MAP_PRIVATE | MAP_NOSIGBUS, wfd, 0);

		core_truncate(wfd, 0);
		NSBT_CHECK(w[0] == 0, "warm-up rescue");
		NSBT_CHECK(munmap(w, ps) == 0, "munmap");
		close(wfd);
	}
	printf("filling the VMA budget: vm.max_map_count = %zu, %zu VMAs now\n", max, count_vmas());
	fflush(stdout);

	fill = core_map(NULL, nfill * ps, CORE_PROT_RW,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	for (i = 1; i < nfill; i += 2)
		if (mprotect(fill + i * ps, ps, PROT_READ) != 0)
			break;
	NSBT_CHECK(i < nfill && errno == ENOMEM,
		   "mprotect never hit the VMA limit (%zu calls; %s)", i / 2, strerror(errno));
	at_limit = count_vmas();
	/* Room for exactly four more: unmap four single-page VMAs. */
	for (size_t k = 1; k <= 7; k += 2)
		NSBT_CHECK(munmap(fill + k * ps, ps) == 0, "munmap: %s", strerror(errno));

	st0 = core_stats();
	for (size_t pg = 2; pg < NPAGES; pg += 2)
		if (((volatile char *)p)[pg * ps] != 0)
			nsbt_fail("page %zu of the protected mapping is not zero", pg);
	st1 = core_stats();
	/* Nothing else faults now: the fallback replaced the whole tail. */
	for (size_t pg = 2; pg < NPAGES; pg += pg < 6 ? 2 : 1)
		if (((volatile char *)p)[pg * ps + ps - 1] != 0)
			nsbt_fail("page %zu of the protected mapping is not zero", pg);
	st2 = core_stats();
	printf("with the budget full (%zu VMAs by /proc/self/maps at the limit): "
	       "%llu rescues replaced %llu pages, %llu failures\n", at_limit,
	       (unsigned long long)(st1.rescues - st0.rescues),
	       (unsigned long long)(st1.pages - st0.pages),
	       (unsigned long long)(st1.failures - st0.failures));
	NSBT_CHECK(st1.failures == st0.failures, "failed rescues were counted");
	NSBT_CHECK(st1.pages - st0.pages > st1.rescues - st0.rescues,
		   "no rescue replaced more than one page: the ENOMEM fallback never ran "
		   "(%llu rescues, %llu pages)", (unsigned long long)(st1.rescues - st0.rescues),
		   (unsigned long long)(st1.pages - st0.pages));
	NSBT_CHECK(st1.rescues - st0.rescues == 3 && st1.pages - st0.pages == 2 + NPAGES - 6,
		   "expected pages 2 and 4 alone, then pages 6-%d in one go: got %llu rescues, "
		   "%llu pages", NPAGES - 1, (unsigned long long)(st1.rescues - st0.rescues),
		   (unsigned long long)(st1.pages - st0.pages));
	NSBT_CHECK(st2.rescues == st1.rescues, "the tail after the fallback faulted again");
	printf("ok: %s: budget full, one-page replacement failed, the rest of the record "
	       "was replaced instead: rescued, alive\n",
	       type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE");

	/* Budget back: the remaining pages are rescued one by one again. */
	NSBT_CHECK(munmap(fill, nfill * ps) == 0, "munmap the fill: %s", strerror(errno));
	memset(p + ps, 'x', ps);
	memset(p + 3 * ps, 'y', ps);
	core_expect_bytes(p, 0, ps, "page 0 after the budget came back");
	core_expect_bytes(p + ps, 'x', ps, "page 1");
	core_expect_bytes(p + 3 * ps, 'y', ps, "page 3");
	NSBT_CHECK(core_stats().rescues == st2.rescues + 3, "three more one-page rescues");
	NSBT_CHECK(core_stats().pages == st2.pages + 3, "three more pages");
	printf("ok: %s: after the budget is back, rescues are one page again\n",
	       type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE");
}

/* fill=auto is what the library runs: the second of two faults in a row
 * doubles the window. */
static void
auto_check_child(void *arg)
{
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_MEMFD, 4 * ps);
	volatile char *p = core_map(NULL, 4 * ps, PROT_READ, MAP_PRIVATE | MAP_NOSIGBUS, fd, 0);
	struct nosigbus_stats a, b, c;

	core_truncate(fd, 0);
	a = core_stats();
	NSBT_CHECK(p[0] == 0, "page 0");
	b = core_stats();
	NSBT_CHECK(p[ps] == 0, "page 1");
	c = core_stats();
	NSBT_CHECK(b.pages - a.pages == 1 && c.pages - b.pages == 2,
		   "NOSIGBUS_FILL=auto: faults on pages 0 then 1 replaced %llu then %llu pages, "
		   "expected 1 then 2", (unsigned long long)(b.pages - a.pages),
		   (unsigned long long)(c.pages - b.pages));
	printf("ok: the library runs with NOSIGBUS_FILL=auto\n");
	(void)arg;
}

int
main(int argc, char **argv)
{
	static const int types[] = { MAP_PRIVATE, MAP_SHARED };
	static const char *const auto_env[] = { "NOSIGBUS_FILL=auto", NULL };
	bool fill_auto = argc > 1 && strcmp(argv[1], "auto") == 0;
	size_t max;

	core_require_library();
	if (argc > 1 && !fill_auto)
		nsbt_fail("unknown scenario %s", argv[1]);
	max = max_map_count();
	if (max > 1000000)
		nsbt_skip("vm.max_map_count is %zu: filling it would take too long", max);
	for (int t = 0; t < 2; t++)
		nsbt_expect_exit(nsbt_run(maxmap_child, (void *)&types[t]), 0,
				 fill_auto ? "vm.max_map_count fallback, fill=auto"
					   : "vm.max_map_count fallback");
	if (fill_auto) {
		nsbt_expect_exit(nsbt_run(auto_check_child, NULL), 0, "NOSIGBUS_FILL=auto in effect");
		return 0;
	}
	nsbt_expect_exit(core_reexec("auto", auto_env), 0, "NOSIGBUS_FILL=auto");
	return 0;
}
