/* SPDX-License-Identifier: MIT */
/*
 * opcount.c - N ops of one of the exact rows (exact.c), nothing else: for
 * counting user-space instructions per op under callgrind, and system
 * calls under strace, with the library preloaded.
 *
 *   nsb-opcount ROW N     ROW: memfd, pool, mprotect, mprotect.fail, vfork
 *
 * vfork: vfork, the child's _exit, waitpid (the library's vfork and its
 * checks of what the child left, process.c).
 *
 * A figure per op is (count at N = 2000 - count at N = 1000) / 1000: the
 * set-up drops out (doc/performance.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t page;

static void
die(const char *what)
{
	fprintf(stderr, "nsb-opcount: %s: %s\n", what, strerror(errno));
	exit(1);
}

int
main(int argc, char **argv)
{
	int fd;
	long n;
	char *hole, *p;

	if (argc != 3)
		return 2;
	page = (size_t)sysconf(_SC_PAGESIZE);
	n = atol(argv[2]);
	fd = memfd_create("nsb-opcount", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, 1 << 20) < 0)
		die("memfd_create");
	/* A protected page (a record) with a free page above it. */
	hole = mmap(NULL, 3 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hole == MAP_FAILED)
		die("mmap");
	munmap(hole, 3 * page);
	p = mmap(hole + page, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED)
		die("mmap");
	for (long i = 0; i < n; i++) {
		if (!strcmp(argv[1], "memfd")) {
			void *q = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

			if (q == MAP_FAILED)
				die("mmap");
			munmap(q, page);
		} else if (!strcmp(argv[1], "pool")) {
			int pfd = memfd_create("nsb-opcount-pool", MFD_CLOEXEC);
			void *q;

			if (pfd < 0 || ftruncate(pfd, (off_t)(16 * page)) < 0)
				die("memfd_create");
			q = mmap(NULL, 16 * page, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
			if (q == MAP_FAILED)
				die("mmap");
			munmap(q, 16 * page);
			close(pfd);
		} else if (!strcmp(argv[1], "mprotect")) {
			if (mprotect(p, page, PROT_READ) < 0 ||
			    mprotect(p, page, PROT_READ | PROT_WRITE) < 0)
				die("mprotect");
		} else if (!strcmp(argv[1], "mprotect.fail")) {
			for (int k = 0; k < 2; k++)
				if (mprotect(p, 2 * page, k ? PROT_READ | PROT_WRITE : PROT_READ) == 0 ||
				    errno != ENOMEM)
					die("mprotect did not fail with ENOMEM");
		} else if (!strcmp(argv[1], "vfork")) {
			pid_t c = vfork();

			if (c == 0)
				_exit(0);
			if (c < 0 || waitpid(c, NULL, 0) != c)
				die("vfork");
		} else {
			return 2;
		}
	}
	return 0;
}
