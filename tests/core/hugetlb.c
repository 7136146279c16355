/* SPDX-License-Identifier: MIT */
/*
 * hugetlbfs: the unit of replacement is the huge page (the kernel refuses
 * to split one, so a one-system-page replacement cannot work).
 *
 * "noreserve": a MAP_NORESERVE hugetlb mapping faults with SIGBUS when no
 * huge page can be allocated, which is the case on a machine without huge
 * pages (vm.nr_hugepages = 0).  A protected anonymous MAP_HUGETLB one must
 * be rescued with a whole huge page of zeros.  A memfd_create(MFD_HUGETLB)
 * one faults inside its file's size, which is the file system's error
 * (issue 19: only a page past the end of its file is rescued): it dies of
 * SIGBUS as without the library, read or write.  Skipped only if the kernel has no hugetlbfs
 * at all; free huge pages are taken first so that the fault happens.
 *
 * "eof": the truncation case on a hugetlbfs file (memfd MFD_HUGETLB).  It
 * needs four free huge pages; skipped with the reason otherwise (CI may
 * raise vm.nr_hugepages).
 *
 * Both run again re-executed with NOSIGBUS_FILL=auto, whose window counts
 * huge pages: a first fault replaces one huge page, and a fault in the
 * huge page right after it replaces two ("noreserve", three huge pages).
 */
#include "core.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 4U
#endif

static size_t
meminfo(const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	FILE *f = fopen("/proc/meminfo", "re");
	long long v = -1;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			v = atoll(line + klen + 1);
			break;
		}
	fclose(f);
	return v < 0 ? 0 : (size_t)v;
}

static size_t
huge_size(void)
{
	return nsbt_huge_page_size();
}

/*
 * Huge pages are 2 MiB on x86_64 but may be 512 MiB on aarch64 with 64 KiB
 * pages: check every system page of one, but write and compare whole
 * contents only when that stays cheap.
 */
static void
expect_huge_bytes(const volatile char *p, char c, size_t hs, const char *what)
{
	size_t ps = nsbt_page();

	if (hs <= ((size_t)8 << 20)) {
		core_expect_bytes((const char *)p, c, hs, what);
		return;
	}
	for (size_t off = 0; off < hs; off += ps)
		if (p[off] != c || p[off + ps - 1] != c)
			nsbt_fail("%s: page at offset %zu of the huge page is not %#x", what,
				  off, (unsigned char)c);
}

static void
fill_huge(volatile char *p, char c, size_t hs)
{
	size_t ps = nsbt_page();

	if (hs <= ((size_t)8 << 20)) {
		memset((char *)p, c, hs);
		return;
	}
	for (size_t off = 0; off < hs; off += ps) {
		p[off] = c;
		p[off + ps - 1] = c;
	}
}

struct hp {
	size_t hs;
	bool anon;
	int type;
};

static const char *
hp_name(const struct hp *h)
{
	static char buf[96];

	snprintf(buf, sizeof(buf), "%s %s", h->anon ? "anonymous MAP_HUGETLB" : "memfd MFD_HUGETLB",
		 h->type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE");
	return buf;
}

static void
write_first(void *arg)
{
	volatile char *p = arg;

	p[nsbt_page()] = 'e';
	exit(0);
}

static void
read_first(void *arg)
{
	volatile char *p = arg;

	(void)p[nsbt_page()];
	exit(0);
}

/* Faults in the middle of the second huge page, with no huge page to be had. */
static void
noreserve_child(void *arg)
{
	struct hp *h = arg;
	size_t ps = nsbt_page(), hs = h->hs;
	struct nosigbus_stats before, after;
	volatile char *p;
	char name[96];

	snprintf(name, sizeof(name), "%s", hp_name(h));
	if (h->anon) {
		p = mmap(NULL, 2 * hs, CORE_PROT_RW,
			 h->type | MAP_ANONYMOUS | MAP_HUGETLB | MAP_NORESERVE | MAP_NOSIGBUS, -1, 0);
	} else {
		int fd = memfd_create("nsbt-huge", MFD_HUGETLB | MFD_CLOEXEC);

		NSBT_CHECK(fd >= 0, "memfd_create(MFD_HUGETLB): %s", strerror(errno));
		core_truncate(fd, (off_t)(2 * hs));
		p = mmap(NULL, 2 * hs, CORE_PROT_RW, h->type | MAP_NORESERVE | MAP_NOSIGBUS, fd, 0);
	}
	NSBT_CHECK(p != MAP_FAILED, "%s: mmap: %s", name, strerror(errno));
	NSBT_CHECK(((uintptr_t)p & (hs - 1)) == 0, "%s: not huge-page aligned", name);
	if (!h->anon) {
		/* Inside the file's size, which the file system cannot back:
		 * its error, not an end of file (SPEC §5). */
		nsbt_expect_signal(nsbt_run(read_first, (void *)p), SIGBUS,
				   nsbt_fmt("%s: a read inside the size", name));
		nsbt_expect_signal(nsbt_run(write_first, (void *)p), SIGBUS,
				   nsbt_fmt("%s: a write inside the size", name));
		printf("ok: %s: no huge page available inside the size: SIGBUS, as without the "
		       "library\n", name);
		return;
	}
	before = core_stats();
	/* Not at the start of the huge page: the whole huge page must be replaced. */
	NSBT_CHECK(p[hs + 3 * ps + 5] == 0, "%s: read", name);
	after = core_stats();
	NSBT_CHECK(after.rescues == before.rescues + 1, "%s: one rescue", name);
	NSBT_CHECK(after.pages - before.pages == hs / ps,
		   "%s: %llu pages replaced, expected %zu (one huge page in system pages)",
		   name, (unsigned long long)(after.pages - before.pages), hs / ps);
	expect_huge_bytes(p + hs, 0, hs, name);
	fill_huge(p + hs, 'h', hs);
	expect_huge_bytes(p + hs, 'h', hs, name);
	NSBT_CHECK(core_stats().rescues == after.rescues, "%s: one rescue for the whole huge page", name);
	/* The first huge page faults separately. */
	p[hs - 1] = 'e';
	NSBT_CHECK(p[hs - 1] == 'e' && p[0] == 0, "%s: first huge page", name);
	NSBT_CHECK(core_stats().rescues == after.rescues + 1, "%s: second rescue", name);
	printf("ok: %s: no huge page available: rescued with a whole huge page of zeros\n", name);
}

/*
 * fill=auto: three huge pages, none to be had.  A fault in the middle of
 * the first replaces it; a fault in the middle of the second continues
 * that rescue, so the window doubles to two huge pages (the second and
 * the third); the third then reads without a fault.
 */
static void
window_child(void *arg)
{
	struct hp *h = arg;
	size_t ps = nsbt_page(), hs = h->hs;
	struct nosigbus_stats a, b, c;
	volatile char *p;
	char name[128];

	snprintf(name, sizeof(name), "%s, fill=auto window", hp_name(h));
	if (h->anon) {
		p = mmap(NULL, 3 * hs, CORE_PROT_RW,
			 h->type | MAP_ANONYMOUS | MAP_HUGETLB | MAP_NORESERVE | MAP_NOSIGBUS, -1, 0);
	} else {
		int fd = memfd_create("nsbt-huge", MFD_HUGETLB | MFD_CLOEXEC);

		NSBT_CHECK(fd >= 0, "memfd_create(MFD_HUGETLB): %s", strerror(errno));
		core_truncate(fd, (off_t)(3 * hs));
		p = mmap(NULL, 3 * hs, CORE_PROT_RW, h->type | MAP_NORESERVE | MAP_NOSIGBUS, fd, 0);
	}
	NSBT_CHECK(p != MAP_FAILED, "%s: mmap: %s", name, strerror(errno));
	a = core_stats();
	NSBT_CHECK(p[hs / 2 + 7] == 0, "%s: first huge page", name);
	b = core_stats();
	NSBT_CHECK(b.rescues - a.rescues == 1 && b.pages - a.pages == hs / ps,
		   "%s: first fault: %llu rescues replacing %llu pages, expected 1 replacing %zu "
		   "(one huge page)", name, (unsigned long long)(b.rescues - a.rescues),
		   (unsigned long long)(b.pages - a.pages), hs / ps);
	/* A shared write inside the size is an error, passed on (see
	 * noreserve_child): read there. */
	if (!h->anon && h->type == MAP_SHARED)
		NSBT_CHECK(p[hs + hs / 2 + 3 * ps] == 0, "%s: second huge page", name);
	else
		p[hs + hs / 2 + 3 * ps] = 'h';
	c = core_stats();
	NSBT_CHECK(c.rescues - b.rescues == 1 && c.pages - b.pages == 2 * hs / ps,
		   "%s: fault in the next huge page: %llu rescues replacing %llu pages, expected "
		   "1 replacing %zu (two huge pages)", name,
		   (unsigned long long)(c.rescues - b.rescues),
		   (unsigned long long)(c.pages - b.pages), 2 * hs / ps);
	expect_huge_bytes(p + 2 * hs, 0, hs, name);
	NSBT_CHECK(p[hs + hs / 2 + 3 * ps] == (!h->anon && h->type == MAP_SHARED ? 0 : 'h'),
		   "%s: the write stuck", name);
	NSBT_CHECK(core_stats().rescues == c.rescues, "%s: the third huge page faulted", name);
	printf("ok: %s: windows of one, then two huge pages\n", name);
}

static void
noreserve_children(bool fill_auto)
{
	static const int types[] = { MAP_PRIVATE, MAP_SHARED };
	size_t hs = huge_size();

	for (int anon = 0; anon < 2; anon++)
		for (int t = 0; t < 2; t++) {
			struct hp h = { hs, anon, types[t] };

			nsbt_expect_exit(nsbt_run(noreserve_child, &h), 0, hp_name(&h));
			if (fill_auto && anon)
				nsbt_expect_exit(nsbt_run(window_child, &h), 0, hp_name(&h));
		}
}

static const char *const auto_env[] = { "NOSIGBUS_FILL=auto", NULL };

static int
noreserve(void)
{
	size_t hs = huge_size();
	void *probe;

	if (hs == 0)
		nsbt_skip("no Hugepagesize in /proc/meminfo: the kernel has no hugetlbfs");
	/* Free huge pages would let the fault succeed: take them all first. */
	if (meminfo("HugePages_Free") > 0) {
		size_t n = meminfo("HugePages_Free");
		void *hog = mmap(NULL, n * hs, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);

		if (hog == MAP_FAILED || meminfo("HugePages_Free") > 0)
			nsbt_skip("%zu free huge pages that this test could not take: a "
				  "MAP_NORESERVE fault may succeed, nothing to rescue",
				  meminfo("HugePages_Free"));
		printf("took the %zu free huge pages so that the fault happens\n", n);
	}
	probe = mmap(NULL, 2 * hs, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB |
		     MAP_NORESERVE, -1, 0);
	if (probe == MAP_FAILED)
		nsbt_skip("MAP_HUGETLB|MAP_NORESERVE mappings fail here (%s)", strerror(errno));
	munmap(probe, 2 * hs);
	noreserve_children(false);
	/* This process keeps the free huge pages it took: so does the next. */
	nsbt_expect_exit(core_reexec("noreserve-auto", auto_env), 0,
			 "MAP_NORESERVE cases again under NOSIGBUS_FILL=auto");
	return 0;
}

/* The truncation case: 2 huge pages of data, truncated to 1. */
static void
eof_child(void *arg)
{
	struct hp *h = arg;
	size_t ps = nsbt_page(), hs = h->hs;
	int fd = memfd_create("nsbt-huge", MFD_HUGETLB | MFD_CLOEXEC);
	struct nosigbus_stats before, after;
	volatile char *p;
	char *w;
	char name[128];

	snprintf(name, sizeof(name), "%s, truncated", hp_name(h));
	NSBT_CHECK(fd >= 0, "memfd_create(MFD_HUGETLB): %s", strerror(errno));
	core_truncate(fd, (off_t)(2 * hs));
	/* hugetlbfs has no write(): fill it through a mapping. */
	w = core_map(NULL, 2 * hs, CORE_PROT_RW, MAP_SHARED, fd, 0);
	for (size_t i = 0; i < 2 * hs; i++)
		w[i] = nsbt_pattern(i);
	NSBT_CHECK(munmap(w, 2 * hs) == 0, "munmap");

	p = core_map(NULL, 2 * hs, CORE_PROT_RW, h->type | MAP_NOSIGBUS, fd, 0);
	core_expect_pattern((const char *)p, 0, 2 * hs, name);
	core_truncate(fd, (off_t)hs);
	before = core_stats();
	NSBT_CHECK(p[hs + 5 * ps + 1] == 0, "%s: read past EOF", name);
	after = core_stats();
	NSBT_CHECK(after.rescues == before.rescues + 1 && after.pages - before.pages == hs / ps,
		   "%s: %llu rescues, %llu pages; expected 1 and %zu", name,
		   (unsigned long long)(after.rescues - before.rescues),
		   (unsigned long long)(after.pages - before.pages), hs / ps);
	expect_huge_bytes(p + hs, 0, hs, name);
	core_expect_pattern((const char *)p, 0, hs, name);
	fill_huge(p + hs, 'h', hs);
	expect_huge_bytes(p + hs, 'h', hs, name);
	core_expect_file(fd, hs, name);
	printf("ok: %s: past EOF a whole huge page of zeros, writable; file unchanged\n", name);
}

static void
eof_children(void)
{
	static const int types[] = { MAP_PRIVATE, MAP_SHARED };

	for (int t = 0; t < 2; t++) {
		struct hp h = { huge_size(), false, types[t] };

		nsbt_expect_exit(nsbt_run(eof_child, &h), 0, hp_name(&h));
	}
}

static int
eof(void)
{
	size_t hs = huge_size();
	size_t avail = meminfo("HugePages_Free");
	int fd;

	if (hs == 0)
		nsbt_skip("no Hugepagesize in /proc/meminfo: the kernel has no hugetlbfs");
	/* A MAP_PRIVATE child maps it twice (the fill and the test): 2 pages + copies. */
	if (avail < 4)
		nsbt_skip("hugetlbfs truncation case needs 4 free huge pages of %zu kB, "
			  "the kernel has %zu (vm.nr_hugepages = %zu); raise vm.nr_hugepages "
			  "to run it", hs / 1024, avail, meminfo("HugePages_Total"));
	fd = memfd_create("nsbt-huge", MFD_HUGETLB | MFD_CLOEXEC);
	if (fd < 0)
		nsbt_skip("memfd_create(MFD_HUGETLB) fails: %s", strerror(errno));
	close(fd);
	eof_children();
	nsbt_expect_exit(core_reexec("eof-auto", auto_env), 0,
			 "truncation cases again under NOSIGBUS_FILL=auto");
	return 0;
}

int
main(int argc, char **argv)
{
	core_require_library();
	if (argc > 1 && strcmp(argv[1], "noreserve") == 0)
		return noreserve();
	if (argc > 1 && strcmp(argv[1], "eof") == 0)
		return eof();
	/* Re-executed with NOSIGBUS_FILL=auto, after the checks above passed. */
	if (argc > 1 && strcmp(argv[1], "noreserve-auto") == 0) {
		noreserve_children(true);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "eof-auto") == 0) {
		eof_children();
		return 0;
	}
	nsbt_fail("usage: %s noreserve|eof", argv[0]);
}
