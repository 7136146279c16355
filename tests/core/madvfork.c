/* SPDX-License-Identifier: MIT */
/*
 * madvise() and fork (issue 19): a fork child has exactly the records of
 * the mappings it has.
 *
 *  - MADV_DONTFORK over a protected memfd mapping (a page rescued before
 *    the advice, one after it): the child has none of it - not the file's
 *    VMAs, not the rescued pages - and no record there: an unprotected
 *    mapping it makes at that address dies of SIGBUS past its end.  The
 *    parent keeps its protection.  MADV_DOFORK then gives the next child
 *    the mapping, protected.  The same through process_madvise() where
 *    the kernel takes those advices (it takes none of them today: its
 *    error is checked to be the kernel's).
 *  - MADV_WIPEONFORK over a protected anonymous mapping with a replaced
 *    page: in the child the memory is fresh, and so is the account - the
 *    page is replaced again when it faults there, as in a new mapping.
 *
 * Runs under NOSIGBUS_POLICY=flag (core tests).
 */
#include "core.h"

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif

#define PAGES 8

static size_t ps;

/* A truncated memfd mapped shared and flagged. */
static char *
truncated_memfd(void)
{
	int fd = memfd_create("core-madvfork", MFD_CLOEXEC);
	char *p;

	NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	core_truncate(fd, (off_t)(PAGES * ps));
	p = core_map(NULL, PAGES * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	core_truncate(fd, 0);
	close(fd);
	return p;
}

static void
dontfork_child_side(void *arg)
{
	char *p = arg;

	/* Nothing of the mapping: neither the file's VMAs nor the pages
	 * the parent's rescues made. */
	core_expect_unmapped(p, PAGES * ps, "MADV_DONTFORK mapping in the child");
	for (size_t i = 0; i < PAGES; i++)
		core_expect_unprotected(p + i * ps, nsbt_fmt("child, page %zu of a MADV_DONTFORK "
							      "mapping", i));
}

static void
dontfork_child(void *arg)
{
	char *p = truncated_memfd();
	struct nosigbus_stats before;

	(void)arg;
	p[1 * ps] = 'a';	/* rescued before the advice */
	NSBT_CHECK(madvise(p, PAGES * ps, MADV_DONTFORK) == 0, "madvise: %s", strerror(errno));
	p[5 * ps] = 'b';	/* rescued after it: its page must follow the advice */
	nsbt_expect_exit(nsbt_run(dontfork_child_side, p), 0, "fork after MADV_DONTFORK");
	/* The parent keeps it all. */
	before = core_stats();
	p[3 * ps] = 'c';
	NSBT_CHECK(core_stats().rescues == before.rescues + 1, "parent: no rescue after the fork");
	NSBT_CHECK(p[1 * ps] == 'a' && p[5 * ps] == 'b' && p[3 * ps] == 'c', "parent: data lost");
	/* Back to normal: the next child has the mapping, protected. */
	NSBT_CHECK(madvise(p, PAGES * ps, MADV_DOFORK) == 0, "madvise: %s", strerror(errno));
	{
		pid_t pid;
		int status;

		fflush(NULL);
		pid = fork();
		NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			/* Shared: what the parent wrote in its private pages is
			 * its own; the child has its copies, and rescues more. */
			if (p[1 * ps] != 'a' || p[5 * ps] != 'b')
				_exit(2);
			p[7 * ps] = 'd';
			_exit(p[7 * ps] == 'd' ? 0 : 3);
		}
		NSBT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
		nsbt_expect_exit(status, 0, "child after MADV_DOFORK: the mapping and its protection");
	}
	printf("ok: MADV_DONTFORK: the child has neither the mapping nor its records; "
	       "MADV_DOFORK: it has both\n");
}

/* pidfd_open(2), for process_madvise() on ourselves. */
static int
self_pidfd(void)
{
	return (int)syscall(SYS_pidfd_open, getpid(), 0);
}

static void
process_madvise_child(void *arg)
{
	char *p = truncated_memfd();
	struct iovec iov = { p, PAGES * ps };
	int pidfd = self_pidfd(), lib_err, kernel_err;
	long lib, kernel;

	(void)arg;
	if (pidfd < 0)
		nsbt_skip("pidfd_open: %s", strerror(errno));
	p[2 * ps] = 'a';
	lib = process_madvise(pidfd, &iov, 1, MADV_DONTFORK, 0);
	lib_err = errno;
	kernel = syscall(SYS_process_madvise, pidfd, &iov, 1, MADV_DONTFORK, 0);
	kernel_err = errno;
	NSBT_CHECK(lib == kernel && (lib >= 0 || lib_err == kernel_err),
		   "process_madvise(MADV_DONTFORK): %ld (%s), the kernel's own %ld (%s)", lib,
		   strerror(lib_err), kernel, strerror(kernel_err));
	if (lib < 0) {
		printf("ok: process_madvise(MADV_DONTFORK) fails as the kernel's does (%s)\n",
		       strerror(lib_err));
		return;
	}
	nsbt_expect_exit(nsbt_run(dontfork_child_side, p), 0, "fork after process_madvise");
	printf("ok: process_madvise(MADV_DONTFORK) followed\n");
}

static void
wipe_child(void *arg)
{
	char *p = core_map(NULL, PAGES * ps, CORE_PROT_RW,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NOSIGBUS, -1, 0);
	struct nosigbus_stats before;
	int status, fd = memfd_create("core-madvfork-raw", MFD_CLOEXEC);

	(void)arg;
	memset(p, 'x', PAGES * ps);
	/* Page 2 replaced here: an empty file mapped over it behind the
	 * library's back faults, and is rescued. */
	NSBT_CHECK(fd >= 0 && (void *)syscall(SYS_mmap, p + 2 * ps, ps, PROT_READ,
					      MAP_SHARED | MAP_FIXED, fd, 0) == p + 2 * ps,
		   "raw mmap: %s", strerror(errno));
	before = core_stats();
	NSBT_CHECK(((volatile char *)p)[2 * ps] == 0, "parent: the replaced page is not zeros");
	NSBT_CHECK(core_stats().rescues == before.rescues + 1, "parent: no rescue");
	NSBT_CHECK(madvise(p, PAGES * ps, MADV_WIPEONFORK) == 0, "madvise(MADV_WIPEONFORK): %s",
		   strerror(errno));
	{
		pid_t pid;

		fflush(NULL);
		pid = fork();
		NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			struct core_touch c = { p + 2 * ps, false };

			if (p[0] != 0 || p[ps] != 0)
				_exit(2);
			/* The account is fresh too: page 2 may be replaced. */
			core_raw_probe_fn(&c);
		}
		NSBT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
		nsbt_expect_exit(status, 3, "MADV_WIPEONFORK child: fresh memory, fresh account "
					    "(a fault there rescued)");
	}
	NSBT_CHECK(p[0] == 'x', "parent: MADV_WIPEONFORK wiped the parent");
	printf("ok: MADV_WIPEONFORK: the child's memory and account are fresh\n");
}

int
main(void)
{
	ps = nsbt_page();
	core_require_library();
	nsbt_expect_exit(nsbt_run(dontfork_child, NULL), 0, "MADV_DONTFORK and MADV_DOFORK");
	nsbt_expect_exit(nsbt_run(process_madvise_child, NULL), 0, "process_madvise");
	nsbt_expect_exit(nsbt_run(wipe_child, NULL), 0, "MADV_WIPEONFORK");
	return 0;
}
