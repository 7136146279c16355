/* SPDX-License-Identifier: MIT */
/*
 * A move never opens a hole at its destination.  A rescue splits a
 * protected mapping into several VMAs; before Linux 6.17 the kernel
 * refuses to move several VMAs in one mremap(MREMAP_FIXED), with EFAULT,
 * after it has unmapped the destination.  Had the library tried the
 * kernel's call first and then moved the pieces (as it did), the
 * destination was a hole in between, which another thread's mmap could
 * take, and a piece then landed on that thread's mapping (core-threads
 * on Debian 12's 6.1: a canary changed, an mremap of it failed).
 *
 * A mover thread moves a rescued (split) protected mapping onto a mapping
 * of its own at a fixed address D, over and over, and puts an anonymous
 * mapping back at D with MAP_FIXED (never a hole); a watcher thread on
 * another CPU tries MAP_FIXED_NOREPLACE in D all the while.  It must never
 * get it.  On kernels that move several VMAs at once there is no window
 * whatever the library does; the test says which kind this kernel is.
 */
#include <inttypes.h>
#include <stdatomic.h>

#include "core.h"

#define MOVES 3000
#define PAGES 3

static size_t ps;
static char *dest;
static atomic_int done;
static atomic_ulong moves, taken, tries;

/* VMAs of /proc/self/maps that meet [p, p + len). */
static int
vmas_in(const char *p, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	int n = 0;

	NSBT_CHECK(f != NULL, "fopen /proc/self/maps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;

		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 &&
		    lo < (uintptr_t)p + len && hi > (uintptr_t)p)
			n++;
	}
	fclose(f);
	return n;
}

static void *
watcher(void *arg)
{
	(void)arg;
	core_pin(1);
	while (!atomic_load(&done)) {
		char *q = mmap(dest + ps, ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
			       MAP_FIXED_NOREPLACE, -1, 0);

		atomic_fetch_add(&tries, 1);
		if (q == dest + ps) {
			/* The program's destination was a hole: remember it and
			 * give the place back for the move to land on. */
			atomic_fetch_add(&taken, 1);
			continue;
		}
		NSBT_CHECK(q == MAP_FAILED && errno == EEXIST,
			   "watcher: mmap NOREPLACE: %p %s", (void *)q, strerror(errno));
	}
	return NULL;
}

static void
move_child(void *arg)
{
	int fd = memfd_create("core-movewindow", MFD_CLOEXEC);
	int split = 0;
	pthread_t w;

	(void)arg;
	NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	dest = core_map(NULL, PAGES * ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	core_pin(0);
	NSBT_CHECK(pthread_create(&w, NULL, watcher, NULL) == 0, "pthread_create");
	for (int i = 0; i < MOVES; i++) {
		/* Protected, of an empty file: every page faults. */
		char *p = core_map(NULL, PAGES * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
		char *r;

		if (*(volatile char *)(p + ps) != 0)
			nsbt_fail("a rescued page reads non-zero");
		if (i == 0)
			split = vmas_in(p, PAGES * ps);
		r = mremap(p, PAGES * ps, PAGES * ps, MREMAP_MAYMOVE | MREMAP_FIXED, dest);
		NSBT_CHECK(r == dest, "mremap onto the destination: %s", strerror(errno));
		if (*(volatile char *)(dest + ps) != 0)
			nsbt_fail("the moved rescued page reads non-zero");
		/* The destination back, replaced in one call: never a hole. */
		NSBT_CHECK(mmap(dest, PAGES * ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
				-1, 0) == dest, "mmap MAP_FIXED over the destination: %s", strerror(errno));
		atomic_fetch_add(&moves, 1);
	}
	atomic_store(&done, 1);
	pthread_join(w, NULL);
	NSBT_CHECK(split > 1, "the rescue did not split the mapping (%d VMA): the test "
		   "checks nothing", split);
	if (atomic_load(&taken))
		nsbt_fail("another thread's mmap took the destination %lu times in %lu tries "
			  "during %lu moves of a split protected mapping: the move unmapped it "
			  "before moving the pieces", atomic_load(&taken), atomic_load(&tries),
			  atomic_load(&moves));
	printf("ok: %lu moves of a mapping split in %d VMAs, %lu tries to take the "
	       "destination, none got it\n", atomic_load(&moves), split, atomic_load(&tries));
}

int
main(void)
{
	char err[4096];
	int status;
	char *p, *q;

	core_require_library();
	ps = nsbt_page();
	/* Which kind of kernel, asked as core-threads asks it. */
	p = core_map(NULL, 6 * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NSBT_CHECK(mprotect(p + ps, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	q = mremap(p, 3 * ps, 3 * ps, MREMAP_MAYMOVE | MREMAP_FIXED, p + 3 * ps);
	NSBT_CHECK(q != MAP_FAILED || errno == EFAULT, "mremap: %s", strerror(errno));
	printf("note: this kernel %s\n", q != MAP_FAILED
	       ? "moves several VMAs in one mremap (Linux 6.17 and later): no window to find"
	       : "moves one VMA per mremap (before Linux 6.17): the window is there to find");
	munmap(p, 6 * ps);
	status = core_run_watched(move_child, NULL, nsbt_scaled(45), NULL, "moves", err,
				  sizeof(err));
	core_expect_quiet(err, "moves");
	nsbt_expect_exit(status, 0, "moves onto a destination another thread watches");
	return 0;
}
