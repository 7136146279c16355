/* SPDX-License-Identifier: MIT */
/*
 * nsb-cli-api - the public API of <nosigbus.h>, used as a program linked
 * with -lnosigbus would (no preload).  One check per subcommand:
 *
 *   protect     an unflagged memfd mapping, protected, truncated: reads zeros
 *   unprotect   the same, unprotected again: the read dies by SIGBUS
 *   stats N     rescues and pages add up after N pages read past the end
 *   errors      EINVAL and ENOMEM cases, and nothing recorded on failure
 *   strict      under NOSIGBUS_STRICT=1: shared mappings refused with EINVAL
 *
 * Prints "ok: ..." for each check, exits 1 on the first failure.  A death
 * by SIGBUS is checked by the bats test that runs it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nosigbus.h>

#include "nsbtest.h"

static size_t page;

static struct nosigbus_stats
stats(void)
{
	struct nosigbus_stats st;

	NSBT_CHECK(nosigbus_get_stats(&st, sizeof(st)) == 0, "%s", strerror(errno));
	return st;
}

/* Another process shrinks the file, as a Wayland client would. */
static void
truncate_in_child(int fd, off_t size)
{
	pid_t pid;
	int status;

	fflush(stdout);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(ftruncate(fd, size) == 0 ? 0 : 1);
	NSBT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	NSBT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "ftruncate failed");
}

static bool
page_is_zero(const volatile unsigned char *p)
{
	for (size_t i = 0; i < page; i++)
		if (p[i] != 0)
			return false;
	return true;
}

/* An unflagged shared mapping of a memfd of n pages. */
static unsigned char *
map_memfd(size_t n, int *fdp)
{
	int fd = nsbt_file(NSBT_MEMFD, n * page);
	unsigned char *map = mmap(NULL, n * page, PROT_READ, MAP_SHARED, fd, 0);

	NSBT_CHECK(map != MAP_FAILED, "mmap: %s", strerror(errno));
	NSBT_CHECK(map[1] == (unsigned char)nsbt_pattern(1), "the file is not mapped");
	*fdp = fd;
	return map;
}

static void
check_protect(void)
{
	struct nosigbus_stats before = stats();
	unsigned char *map;
	struct stat st;
	int fd;

	map = map_memfd(2, &fd);
	NSBT_CHECK(stats().mappings == before.mappings,
		   "an unflagged mapping was recorded under the flag policy");
	NSBT_CHECK(nosigbus_protect(map, 2 * page) == 0, "%s", strerror(errno));
	NSBT_CHECK(stats().mappings > before.mappings, "protect recorded nothing");
	printf("ok: nosigbus_protect of an unflagged memfd mapping\n");
	truncate_in_child(fd, 0);
	NSBT_CHECK(page_is_zero(map), "page 0 is not zeros");
	NSBT_CHECK(page_is_zero(map + page), "page 1 is not zeros");
	NSBT_CHECK(fstat(fd, &st) == 0 && st.st_size == 0, "the file changed size");
	printf("ok: reads past the end give zeros\n");
}

static void
check_unprotect(void)
{
	unsigned char *map;
	int fd;

	map = map_memfd(2, &fd);
	NSBT_CHECK(nosigbus_protect(map, 2 * page) == 0, "%s", strerror(errno));
	NSBT_CHECK(nosigbus_unprotect(map, 2 * page) == 0, "%s", strerror(errno));
	printf("ok: nosigbus_unprotect\n");
	truncate_in_child(fd, 0);
	printf("reading past the end: SIGBUS expected\n");
	fflush(stdout);
	(void)page_is_zero(map + page);
	printf("FAIL: survived the read\n");
	exit(1);
}

static void
check_stats(size_t n)
{
	struct nosigbus_stats before = stats(), after;
	unsigned char *map;
	int fd;

	map = map_memfd(n, &fd);
	NSBT_CHECK(nosigbus_protect(map, n * page) == 0, "%s", strerror(errno));
	truncate_in_child(fd, 0);
	for (size_t p = 0; p < n; p++)
		NSBT_CHECK(page_is_zero(map + p * page), "page %zu is not zeros", p);
	after = stats();
	printf("delta: rescues=%llu pages=%llu failures=%llu\n",
	       (unsigned long long)(after.rescues - before.rescues),
	       (unsigned long long)(after.pages - before.pages),
	       (unsigned long long)(after.failures - before.failures));
	NSBT_CHECK(after.pages - before.pages == n, "pages replaced");
	NSBT_CHECK(after.failures == before.failures, "failures");
	NSBT_CHECK(after.rescues > before.rescues &&
		   after.rescues - before.rescues <= n, "rescues");
	NSBT_CHECK(munmap(map, n * page) == 0, "munmap: %s", strerror(errno));
	NSBT_CHECK(stats().mappings == before.mappings, "munmap left a record");
	printf("ok: counters add up\n");
}

static void
expect_errno(int ret, int err, const char *what)
{
	NSBT_CHECK(ret == -1 && errno == err, "%s: expected -1/%s, got %d/%s", what,
		   strerror(err), ret, strerror(errno));
	printf("ok: %s: %s\n", what, strerror(err));
}

static void
check_errors(void)
{
	struct nosigbus_stats before = stats();
	unsigned char buf[sizeof(struct nosigbus_stats) + 16];
	struct nosigbus_stats *st = (struct nosigbus_stats *)buf;
	unsigned char *map, *hole;
	int fd;

	map = map_memfd(2, &fd);
	expect_errno(nosigbus_protect(map + 1, page), EINVAL, "protect unaligned");
	expect_errno(nosigbus_protect(map, 0), EINVAL, "protect len 0");
	expect_errno(nosigbus_unprotect(map + 1, page), EINVAL, "unprotect unaligned");
	expect_errno(nosigbus_unprotect(map, 0), EINVAL, "unprotect len 0");
	/* A range that wraps past the top of the address space, from the
	 * last page too (its check once wrapped itself there). */
	{
		void *top = (void *)(UINTPTR_MAX - page + 1), *below = (void *)(UINTPTR_MAX - 2 * page + 1);

		expect_errno(nosigbus_protect(top, 2 * page), EINVAL, "protect wrapping, last page");
		expect_errno(nosigbus_protect(top, 1), EINVAL, "protect the last page");
		expect_errno(nosigbus_unprotect(top, 2 * page), EINVAL, "unprotect wrapping, last page");
		expect_errno(nosigbus_refresh(top, 2 * page), EINVAL, "refresh wrapping, last page");
		expect_errno(nosigbus_protect(below, 3 * page), EINVAL, "protect wrapping");
	}

	/* Three pages where the last one is unmapped: all or nothing. */
	hole = mmap(NULL, 3 * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NSBT_CHECK(hole != MAP_FAILED, "mmap: %s", strerror(errno));
	NSBT_CHECK(munmap(hole + 2 * page, page) == 0, "munmap: %s", strerror(errno));
	expect_errno(nosigbus_protect(hole + 2 * page, page), ENOMEM, "protect unmapped");
	expect_errno(nosigbus_protect(hole, 3 * page), ENOMEM, "protect partly unmapped");
	NSBT_CHECK(stats().mappings == before.mappings, "a failed protect recorded something");
	printf("ok: failed protect recorded nothing\n");

	NSBT_CHECK(nosigbus_unprotect(map, 2 * page) == 0, "unprotect of an unprotected "
		   "mapping: %s", strerror(errno));
	NSBT_CHECK(nosigbus_unprotect(hole + 2 * page, page) == 0, "unprotect of an "
		   "unmapped page: %s", strerror(errno));
	printf("ok: unprotect where nothing is protected\n");

	expect_errno(nosigbus_get_stats(NULL, sizeof(*st)), EINVAL, "get_stats NULL");
	expect_errno(nosigbus_get_stats(st, 4), EINVAL, "get_stats size 4");
	memset(buf, 0xee, sizeof(buf));
	NSBT_CHECK(nosigbus_get_stats(st, 8) == 0, "get_stats size 8: %s", strerror(errno));
	for (size_t i = 8; i < sizeof(buf); i++)
		NSBT_CHECK(buf[i] == 0xee, "get_stats(8) wrote byte %zu", i);
	NSBT_CHECK(st->rescues == before.rescues, "get_stats(8): rescues");
	printf("ok: get_stats writes only size bytes\n");
	NSBT_CHECK(nosigbus_get_stats(st, sizeof(buf)) == 0,
		   "get_stats with a larger size: %s", strerror(errno));
	printf("ok: get_stats accepts a larger size\n");
}

static void
check_strict(void)
{
	struct nosigbus_stats before = stats();
	int fd = nsbt_file(NSBT_MEMFD, page);
	void *shared, *private;

	shared = mmap(NULL, page, PROT_READ, MAP_SHARED, fd, 0);
	private = mmap(NULL, page, PROT_READ, MAP_PRIVATE, fd, 0);
	NSBT_CHECK(shared != MAP_FAILED && private != MAP_FAILED, "mmap: %s", strerror(errno));
	expect_errno(nosigbus_protect(shared, page), EINVAL, "strict: protect shared");
	NSBT_CHECK(nosigbus_protect(private, page) == 0, "strict: protect private: %s",
		   strerror(errno));
	printf("ok: strict: protect private\n");
	errno = 0;
	NSBT_CHECK(mmap(NULL, page, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, fd, 0) == MAP_FAILED &&
		   errno == EINVAL, "strict: MAP_SHARED|MAP_NOSIGBUS: %s", strerror(errno));
	printf("ok: strict: mmap MAP_SHARED|MAP_NOSIGBUS: %s\n", strerror(EINVAL));
	NSBT_CHECK(stats().mappings == before.mappings + 1, "strict: records");
}

int
main(int argc, char **argv)
{
	page = nsbt_page();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		nsbt_fail("usage: nsb-cli-api protect|unprotect|stats N|errors|strict");
	if (strcmp(argv[1], "protect") == 0)
		check_protect();
	else if (strcmp(argv[1], "unprotect") == 0)
		check_unprotect();
	else if (strcmp(argv[1], "stats") == 0 && argc == 3)
		check_stats(strtoul(argv[2], NULL, 10));
	else if (strcmp(argv[1], "errors") == 0)
		check_errors();
	else if (strcmp(argv[1], "strict") == 0)
		check_strict();
	else
		nsbt_fail("unknown subcommand %s", argv[1]);
	return 0;
}
