/* SPDX-License-Identifier: MIT *
 * (Written against a probe of VM_MAYWRITE at the first rescue, which it
 * found wrong and which was taken out again: the library asks the
 * descriptor at mmap, doc/performance.md "ripgrep under files"; this
 * test guards the answer, whichever way it is learnt.)
 */
/*
 * Adversarial: the first rescue in a shared mapping not writable, of a
 * memfd opened read-write, at vm.max_map_count (the VMAs of the process
 * filled up to max - slack): the probe for VM_MAYWRITE (an mprotect of
 * the unit, which splits its VMA) may find no VMA free (ENOMEM).  Whatever
 * the rescue did, nothing dies, nothing is printed; once the VMAs are
 * given back and the file grown back, nosigbus_refresh shows the file
 * again, and mprotect to read-write of the whole mapping succeeds, as
 * the kernel lets it (the descriptor was opened read-write): the file
 * written through it.  The controls: a descriptor opened read-only, where
 * the kernel refuses the probe (EACCES) before it splits anything, so
 * that each page's mprotect to read-write is refused, as by the kernel.
 */
#include "core.h"

struct how {
	const char *what;
	int slack;	/* VMAs left free below the limit */
	size_t page;	/* the page faulted, of 3 */
	bool rdonly;	/* the descriptor mapped opened read-only */
};

/* The process's VMAs as the kernel counts them against the limit: the
 * lines of the maps but [vsyscall] (no VMA of the process's). */
static long
vma_count(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	long n = 0;

	NSBT_CHECK(f != NULL, "/proc/self/maps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		n += strchr(line, '\n') && !strstr(line, "[vsyscall]");
	fclose(f);
	return n;
}

static void
at_limit(void *arg)
{
	const struct how *h = arg;
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	int fd = memfd_create("nsbtest-atk5-maxprobe", MFD_CLOEXEC), rfd;
	FILE *f = fopen("/proc/sys/vm/max_map_count", "re");
	long max = 0, have, want;
	char path[64], c = 0, *fill;
	volatile char *p;
	size_t n;

	NSBT_CHECK(f && fscanf(f, "%ld", &max) == 1 && max > 1000, "max_map_count");
	fclose(f);
	NSBT_CHECK(fd >= 0 && ftruncate(fd, (off_t)(3 * ps)) == 0, "memfd: %s", strerror(errno));
	NSBT_CHECK(pwrite(fd, "abc", 3, 0) == 3, "pwrite: %s", strerror(errno));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rfd = open(path, (h->rdonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	NSBT_CHECK(rfd >= 0, "open: %s", strerror(errno));
	p = core_map(NULL, 3 * ps, PROT_READ, MAP_SHARED, rfd, 0);
	close(rfd);
	/* The filler: n pages, every other one PROT_NONE, n VMAs. */
	have = vma_count();
	want = max - h->slack - have;
	n = (size_t)want + 4;
	fill = mmap(NULL, n * ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	NSBT_CHECK(fill != MAP_FAILED, "filler: %s", strerror(errno));
	for (size_t i = 1; i < n; i += 2)
		if (mprotect(fill + i * ps, ps, PROT_NONE) != 0)
			break;
	/* Down to max - slack exactly: unmap from the top (a few pages:
	 * the filler was made a few VMAs too many). */
	for (size_t top = n; vma_count() > max - h->slack && top > 0; top--)
		NSBT_CHECK(munmap(fill + (top - 1) * ps, ps) == 0, "munmap: %s", strerror(errno));
	NSBT_CHECK(vma_count() == max - h->slack, "%s: %ld VMAs, not %ld", h->what, vma_count(),
		   max - h->slack);
	core_truncate(fd, (off_t)(h->page * ps));
	NSBT_CHECK(p[h->page * ps] == 0, "%s: the page past the end reads %d", h->what,
		   p[h->page * ps]);
	NSBT_CHECK(munmap(fill, n * ps) == 0, "munmap filler: %s", strerror(errno));
	if (h->rdonly) {
		/* The kernel refuses PROT_WRITE for the mapping's VMA, replaced
		 * page or file's; so must the library, changing nothing. */
		for (size_t i = 0; i < 3; i++) {
			const char *l;

			errno = 0;
			NSBT_CHECK(mprotect((char *)p + i * ps, ps, PROT_READ | PROT_WRITE) == -1 &&
				   errno == EACCES, "%s: mprotect read-write of page %zu: %s (want EACCES)",
				   h->what, i, strerror(errno));
			l = strchr(core_maps_line((const char *)p + i * ps), ' ');
			NSBT_CHECK(l && l[2] == '-', "%s: page %zu writable after the refused call: %s",
				   h->what, i, l ? l : "?");
		}
		printf("ok: %s\n", h->what);
		return;
	}
	core_truncate(fd, (off_t)(3 * ps));
	(void)nosigbus_refresh((void *)p, 3 * ps);
	NSBT_CHECK(mprotect((void *)p, 3 * ps, PROT_READ | PROT_WRITE) == 0,
		   "%s: mprotect read-write after the refresh: %s (the kernel allows it)", h->what,
		   strerror(errno));
	p[h->page * ps] = 'w';
	NSBT_CHECK(pread(fd, &c, 1, (off_t)(h->page * ps)) == 1 && c == 'w',
		   "%s: the file reads %c after a write through the mapping", h->what, c);
	printf("ok: %s\n", h->what);
}

int
main(void)
{
	static const struct how hows[] = {
		{ "middle page, limit reached", 0, 1 },
		{ "middle page, one VMA free", 1, 1 },
		{ "middle page, two VMAs free", 2, 1 },
		{ "last page, limit reached", 0, 2 },
		{ "last page, one VMA free", 1, 2 },
		{ "read-only descriptor, middle page, limit reached", 0, 1, true },
		{ "read-only descriptor, last page, limit reached", 0, 2, true },
	};

	for (size_t i = 0; i < sizeof(hows) / sizeof(hows[0]); i++)
		core_run_case_watched(at_limit, (void *)&hows[i], 90, hows[i].what);
	return 0;
}
