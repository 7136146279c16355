/* SPDX-License-Identifier: MIT */
/*
 * Adversarial: MAP_HUGETLB without a size (MAP_HUGE_SHIFT bits 0) means
 * the default huge page size, /proc/meminfo's Hugepagesize: 2 MiB on
 * x86-64, 32 MiB on aarch64 with 16 KiB pages, 512 MiB with 64 KiB pages.
 * The kernel rounds such a mapping's length up to it.  An unprotected
 * anonymous MAP_HUGETLB mapping placed MAP_FIXED over a protected memfd
 * mapping replaces a whole huge page of it; the library must cut its
 * records over all of that, or a record of the memfd outlives its
 * mapping inside the huge page.
 *
 * Layout: a protected memfd mapping of one default huge page, aligned to
 * it; over its start, mmap(ps, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB |
 * MAP_NORESERVE | MAP_FIXED) (no huge page is needed: none is touched).
 * /proc/self/maps must then show one hugetlb mapping over the whole huge
 * page.
 *
 * "probe": the hugetlb mapping is unmapped with a raw munmap (which keeps
 * the library's records as they are: whatever is recorded there was left
 * by the mmap the library saw), the memfd is truncated to nothing (a
 * record of it left there would rescue, not take the fault for one inside
 * the file), and an empty memfd mapped with a raw mmap
 * at the last page of the huge page is read: it must die of SIGBUS (no
 * record there), as it does at the first page.
 *
 * "nofile": see nofile() below: policy.c default_huge_shift() answers
 * 2 MiB when it cannot open /proc/meminfo.
 *
 * Passes on x86-64 (the default huge page is 2 MiB, what mman.c
 * new_unit() and policy.c's fallback assume).  Fails on aarch64 with
 * 16 KiB pages, where the default is 32 MiB (tests/vm/run,
 * bookworm-backports/arm64/linux-image-arm64-16k, Linux 6.12):
 *   nofile: "cannot replace the page at 0x7fff7a004000 (mmap failed);
 *            passing SIGBUS on", killed by SIGBUS;
 *   probe:  "middle of the huge page: a fault past the end of an empty
 *            file mapped at 0x7fffb7000000 was rescued: the library has
 *            a record there".
 * Skips without hugetlbfs.
 *
 * Usage: core-atk6-hugedefault [probe|nofile]
 */
#include "core.h"

#include <sys/mman.h>

static void
probe(void *arg)
{
	size_t ps = nsbt_page(), hp = nsbt_huge_page_size();
	int fd = memfd_create("nsbtest-atk6-huge", MFD_CLOEXEC);
	char *area, *a, *p, *h;
	const char *line;

	(void)arg;
	NSBT_CHECK(fd >= 0 && ftruncate(fd, (off_t)hp) == 0, "memfd: %s", strerror(errno));
	area = mmap(NULL, 2 * hp, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	NSBT_CHECK(area != MAP_FAILED, "mmap: %s", strerror(errno));
	a = (char *)(((uintptr_t)area + hp - 1) & ~(uintptr_t)(hp - 1));
	p = mmap(a, hp, CORE_PROT_RW, MAP_SHARED | MAP_FIXED, fd, 0);
	NSBT_CHECK(p == a, "mmap of the memfd: %s", strerror(errno));
	h = mmap(a, ps, CORE_PROT_RW,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_NORESERVE | MAP_FIXED, -1, 0);
	if (h == MAP_FAILED) {
		printf("skip: MAP_HUGETLB: %s\n", strerror(errno));
		_exit(77);
	}
	NSBT_CHECK(h == a, "MAP_HUGETLB | MAP_FIXED at %p gave %p", (void *)a, (void *)h);
	line = core_maps_line(a + hp - ps);
	NSBT_CHECK(line && strstr(line, "anon_hugepage"),
		   "the last page of the huge page is not the hugetlb mapping: %s",
		   line ? line : "(unmapped)");
	NSBT_CHECK(syscall(SYS_munmap, a, hp) == 0, "raw munmap: %s", strerror(errno));
	/* Every page of the memfd past its end: a record of it left there
	 * would rescue the probe's fault, not pass it on as inside. */
	NSBT_CHECK(ftruncate(fd, 0) == 0, "ftruncate: %s", strerror(errno));
	core_expect_no_record(a, "first page of the huge page");
	core_expect_no_record(a + hp / 2, "middle of the huge page");
	core_expect_no_record(a + hp - ps, "last page of the huge page");
	printf("ok: default huge page %zu KiB: no record left in it\n", hp >> 10);
	fflush(NULL);
	_exit(0);
}

/* Free huge pages: a count (nsbt_proc_bytes takes every value for kB). */
static size_t
meminfo_free(void)
{
	return nsbt_proc_bytes("/proc/meminfo", "HugePages_Free") / 1024;
}

/*
 * "nofile": a protected anonymous MAP_HUGETLB | MAP_NOSIGBUS mapping
 * without a size, made while every descriptor number is taken: the
 * library reads the default huge page size from /proc/meminfo
 * (policy.c default_huge_shift), which it cannot open then, and assumes
 * 2 MiB.  With no free huge page, a fault in the second huge page
 * (MAP_NORESERVE) must be rescued with a whole huge page of zeros, as
 * core-hugetlb's noreserve is with descriptors free.  Free huge pages are
 * taken first so that the fault happens.
 */
static void
nofile(void *arg)
{
	size_t ps = nsbt_page(), hp = nsbt_huge_page_size(), n = meminfo_free();
	int fd = memfd_create("nsbtest-atk6-first", MFD_CLOEXEC), last = -1;
	volatile char *p;
	char *first;
	struct nosigbus_stats st;

	(void)arg;
	/* A protected mapping first: the library's one-time questions
	 * (a seccomp filter?) are answered with descriptors free. */
	NSBT_CHECK(fd >= 0 && ftruncate(fd, (off_t)ps) == 0, "memfd: %s", strerror(errno));
	first = mmap(NULL, ps, CORE_PROT_RW, MAP_SHARED, fd, 0);
	NSBT_CHECK(first != MAP_FAILED, "mmap: %s", strerror(errno));
	if (n > 0) {
		void *hog = mmap(NULL, n * hp, CORE_PROT_RW,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);

		if (hog == MAP_FAILED || meminfo_free() > 0) {
			printf("skip: nofile: %zu free huge pages this test could not take\n",
			       meminfo_free());
			fflush(NULL);
			_exit(77);
		}
	}
	/* Every number taken. */
	for (;;) {
		int d = dup(fd);

		if (d < 0)
			break;
		last = d;
	}
	NSBT_CHECK(errno == EMFILE, "dup: %s", strerror(errno));
	p = mmap(NULL, 2 * hp, PROT_READ,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_NORESERVE | MAP_NOSIGBUS, -1, 0);
	for (int d = fd + 1; d <= last; d++)
		close(d);
	if (p == MAP_FAILED) {
		printf("skip: nofile: MAP_HUGETLB | MAP_NORESERVE: %s\n", strerror(errno));
		fflush(NULL);
		_exit(77);
	}
	NSBT_CHECK(p[hp + ps] == 0, "nofile: the second huge page reads %d", p[hp + ps]);
	st = core_stats();
	NSBT_CHECK(st.rescues == 1 && st.pages == hp / ps,
		   "nofile: %llu rescues of %llu pages, not one of a huge page (%zu pages)",
		   (unsigned long long)st.rescues, (unsigned long long)st.pages, hp / ps);
	printf("ok: nofile: default huge page %zu KiB rescued whole\n", hp >> 10);
	fflush(NULL);
	_exit(0);
}

int
main(int argc, char **argv)
{
	size_t hp = nsbt_huge_page_size();
	const char *only = argc > 1 ? argv[1] : NULL;

	if (hp == 0 || access("/sys/kernel/mm/hugepages", F_OK) != 0) {
		printf("skip: no hugetlbfs (no Hugepagesize in /proc/meminfo)\n");
		return 77;
	}
	printf("default huge page: %zu KiB, page %zu\n", hp >> 10, nsbt_page());
	/* nofile first: a failure ends the test (probe fails on aarch64 16K). */
	if (!only || strcmp(only, "nofile") == 0) {
		int rc = core_run_case_watched(nofile, NULL, 45, "nofile");

		if (rc != 0 && (rc != 77 || only))
			return rc;
	}
	if (!only || strcmp(only, "probe") == 0)
		return core_run_case_watched(probe, NULL, 45, "probe");
	return 0;
}
