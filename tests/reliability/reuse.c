/* SPDX-License-Identifier: MIT */
/*
 * reuse - a program may take back addresses it has just given up
 * (stress-ng --mmap does: it unmaps its buffer page by page, then maps the
 * pages back at the same addresses with MAP_FIXED).  Without the library
 * nothing else is placed there in between; with it, the library's own
 * memory (its table, which grows when a munmap splits a record) must not
 * be placed there either, or the program's MAP_FIXED replaces it and the
 * library crashes or loses its records.
 *
 * The scenario, under the preload (the table grows and moves while the
 * program's old buffer is free, where the kernel places the next large
 * allocation): the program frees its buffer, splits a protected mapping
 * into thousands of records, maps its buffer back with MAP_FIXED, then
 * keeps using the library: more splits, a rescue, nosigbus_get_stats().
 * Each step must behave as without the buffer games.
 */
#include <inttypes.h>
#include <sys/resource.h>

#include "nsbtest.h"

#define BUF	64	/* pages */
#define PROT	8000	/* pages of the protected mapping: 4000 records */

static int
scenario(void)
{
	int (*get_stats)(struct nosigbus_stats *, size_t);
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_MEMFD, 0);
	struct nosigbus_stats st;
	unsigned char *r, *p;

	NSBT_CHECK(nsbt_have_library(), "the library is not loaded");
	get_stats = (int (*)(struct nosigbus_stats *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_get_stats");
	/* The buffer first: the highest free space, where big things go. */
	r = mmap(NULL, BUF * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	p = mmap(NULL, PROT * ps, PROT_READ, MAP_PRIVATE | MAP_NOSIGBUS, fd, 0);
	NSBT_CHECK(r != MAP_FAILED && p != MAP_FAILED, "mmap: %s", strerror(errno));
	NSBT_CHECK(munmap(r, BUF * ps) == 0, "munmap");
	for (int i = 1; i < PROT; i += 2)
		NSBT_CHECK(munmap(p + (size_t)i * ps, ps) == 0, "munmap: %s", strerror(errno));
	/* The program takes its addresses back, and writes its data there. */
	NSBT_CHECK(mmap(r, BUF * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			-1, 0) == r, "mmap(MAP_FIXED): %s", strerror(errno));
	memset(r, 0x5a, BUF * ps);
	printf("reuse: buffer of %d pages given up and taken back at %p; %d records\n", BUF, (void *)r,
	       PROT / 2);
	fflush(stdout);
	/* The library goes on: both copies of its table change, a rescue. */
	for (int i = 2; i < 40; i += 2)
		NSBT_CHECK(munmap(p + (size_t)i * ps, ps) == 0, "munmap: %s", strerror(errno));
	NSBT_CHECK(p[100 * ps] == 0, "a rescue");
	NSBT_CHECK(get_stats(&st, sizeof(st)) == 0, "stats");
	NSBT_CHECK(st.rescues == 1 && st.mappings == (uint64_t)(PROT / 2 - 19),
		   "%" PRIu64 " rescues, %" PRIu64 " records; expected 1 and %d", st.rescues, st.mappings,
		   PROT / 2 - 19);
	for (size_t i = 0; i < BUF * ps; i += ps / 2)
		NSBT_CHECK(r[i] == 0x5a, "the program's buffer changed at offset %zu", i);
	munmap(p, PROT * ps);
	NSBT_CHECK(get_stats(&st, sizeof(st)) == 0 && st.mappings == 0, "records left");
	return 0;
}

int
main(int argc, char **argv)
{
	const char *old = getenv("LD_PRELOAD");
	struct rlimit no_core = { 0, 0 };
	char ld[8192];
	int status;
	pid_t pid;

	if (argc > 1 && strcmp(argv[1], "--scenario") == 0)
		return scenario();
	if (!getenv("NSB_PRELOAD"))
		nsbt_skip("NSB_PRELOAD is not set (run through meson test)");
	setrlimit(RLIMIT_CORE, &no_core);
	fflush(NULL);
	pid = fork();
	NSBT_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		snprintf(ld, sizeof(ld), "%s%s%s", old && *old ? old : "", old && *old ? ":" : "",
			 getenv("NSB_PRELOAD"));
		setenv("LD_PRELOAD", ld, 1);
		execl("/proc/self/exe", "reuse", "--scenario", (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		NSBT_CHECK(errno == EINTR, "waitpid");
	nsbt_expect_exit(status, 0, "a program that takes back its own addresses with MAP_FIXED");
	return 0;
}
