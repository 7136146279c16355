/* SPDX-License-Identifier: MIT */
/*
 * NOSIGBUS_STRICT: with 1 (or yes/true/on), MAP_SHARED|MAP_NOSIGBUS fails
 * with EINVAL and nothing is mapped, exactly as the v2 kernel patch
 * rejects it; MAP_PRIVATE|MAP_NOSIGBUS still works.  Unset or 0 (no,
 * false, off): shared mappings are protected.  An invalid value prints one
 * warning line and the default applies.  The library reads the variable
 * once at start, so each setting runs in a re-executed copy of this test.
 */
#include "core.h"

static char maps_buf[1 << 20];

/* Lines of /proc/self/maps that contain needle (read without stdio or malloc). */
static int
maps_lines_with(const char *needle)
{
	size_t n = 0;
	ssize_t r;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	int count = 0;
	char *line;

	if (fd < 0)
		nsbt_fail("open /proc/self/maps: %s", strerror(errno));
	while ((r = read(fd, maps_buf + n, sizeof(maps_buf) - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	maps_buf[n] = 0;
	for (line = maps_buf; line && *line; ) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = 0;
		if (strstr(line, needle))
			count++;
		line = nl ? nl + 1 : NULL;
	}
	return count;
}

static void
expect_einval(void *r, const char *what)
{
	int err = errno;

	if (r != MAP_FAILED)
		nsbt_fail("%s: succeeded (%p), expected EINVAL under NOSIGBUS_STRICT", what, r);
	if (err != EINVAL)
		nsbt_fail("%s: errno %s, expected EINVAL", what, strerror(err));
	printf("ok: %s: EINVAL\n", what);
}

/* Runs with NOSIGBUS_STRICT on. */
static void
strict_scenario(void)
{
	size_t ps = nsbt_page();
	int fd = memfd_create("nsbt-strict", MFD_CLOEXEC);
	int warm_fd = nsbt_file(NSBT_MEMFD, ps);
	struct nosigbus_stats st0;
	char *warm, *old, *fixed, *q;
	int lines;

	NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	nsbt_fill(fd, 2 * ps);
	/* A private protected mapping works, and gets the library fully started. */
	warm = core_map(NULL, 2 * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_NOSIGBUS, warm_fd, 0);
	core_truncate(warm_fd, 0);
	core_expect_bytes(warm, 0, 2 * ps, "MAP_PRIVATE|MAP_NOSIGBUS under STRICT is rescued");
	printf("ok: MAP_PRIVATE|MAP_NOSIGBUS works under STRICT\n");

	st0 = core_stats();
	lines = maps_lines_with("nsbt-strict");
	NSBT_CHECK(lines == 0, "the file is not mapped yet");

	errno = 0;
	expect_einval(mmap(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0),
		      "mmap(MAP_SHARED|MAP_NOSIGBUS)");
	expect_einval(mmap64(NULL, 2 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, fd, 0),
		      "mmap64(MAP_SHARED|MAP_NOSIGBUS)");
	expect_einval(mmap(NULL, 2 * ps, CORE_PROT_RW,
			   MAP_SHARED | MAP_ANONYMOUS | MAP_NOSIGBUS, -1, 0),
		      "mmap(MAP_SHARED|MAP_ANONYMOUS|MAP_NOSIGBUS)");
	NSBT_CHECK(maps_lines_with("nsbt-strict") == 0,
		   "the file got mapped although mmap failed");

	/* MAP_FIXED over an existing mapping: the old mapping must survive. */
	old = core_map(NULL, 2 * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(old, 'K', 2 * ps);
	expect_einval(mmap(old, 2 * ps, CORE_PROT_RW,
			   MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, fd, 0),
		      "mmap(MAP_SHARED|MAP_FIXED|MAP_NOSIGBUS) over a mapping");
	core_expect_bytes(old, 'K', 2 * ps, "the mapping under the failed MAP_FIXED");
	printf("ok: the mapping under a refused MAP_FIXED is untouched\n");

	/* MAP_FIXED_NOREPLACE at a free address: it must stay free. */
	fixed = core_free_range(2 * ps);
	expect_einval(mmap(fixed, 2 * ps, CORE_PROT_RW,
			   MAP_SHARED | MAP_FIXED_NOREPLACE | MAP_NOSIGBUS, fd, 0),
		      "mmap(MAP_SHARED|MAP_FIXED_NOREPLACE|MAP_NOSIGBUS)");
	core_expect_unmapped(fixed, 2 * ps, "the address of the refused mapping");
	/* ...and it really is free: an unflagged mapping fits there. */
	q = mmap(fixed, 2 * ps, PROT_READ, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
	NSBT_CHECK(q == fixed, "MAP_FIXED_NOREPLACE probe: %s",
		   q == MAP_FAILED ? strerror(errno) : "other address");
	printf("ok: nothing was mapped by the refused calls\n");

	NSBT_CHECK(core_stats().mappings == st0.mappings,
		   "records %llu -> %llu after refused calls",
		   (unsigned long long)st0.mappings,
		   (unsigned long long)core_stats().mappings);
	printf("ok: no record added by the refused calls\n");

	/* An unflagged shared mapping is not affected, and not protected. */
	core_truncate(fd, 0);
	nsbt_expect_signal(core_touch_status(q, false), SIGBUS,
			   "unflagged MAP_SHARED mapping under STRICT");

	/* nosigbus_protect on a shared mapping: EINVAL too. */
	errno = 0;
	NSBT_CHECK(nosigbus_protect(q, 2 * ps) == -1 && errno == EINVAL,
		   "nosigbus_protect(shared) under STRICT: errno %s", strerror(errno));
	printf("ok: nosigbus_protect of a shared mapping under STRICT: EINVAL\n");
	{
		int pfd = nsbt_file(NSBT_MEMFD, ps);
		char *pp = core_map(NULL, ps, PROT_READ, MAP_PRIVATE, pfd, 0);

		NSBT_CHECK(nosigbus_protect(pp, ps) == 0, "nosigbus_protect(private): %s",
			   strerror(errno));
		core_truncate(pfd, 0);
		core_expect_bytes(pp, 0, ps, "private mapping protected under STRICT");
		printf("ok: nosigbus_protect of a private mapping under STRICT works\n");
	}
}

/* Runs with NOSIGBUS_STRICT off (unset, 0, or an invalid value). */
static void
nonstrict_scenario(void)
{
	size_t ps = nsbt_page();
	int fd = nsbt_file(NSBT_TMPFS, 2 * ps);
	char *p = mmap(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	char *a;

	NSBT_CHECK(p != MAP_FAILED, "MAP_SHARED|MAP_NOSIGBUS without STRICT: %s",
		   strerror(errno));
	core_truncate(fd, 0);
	core_expect_bytes(p, 0, 2 * ps, "MAP_SHARED|MAP_NOSIGBUS without STRICT");
	a = mmap(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_ANONYMOUS | MAP_NOSIGBUS, -1, 0);
	NSBT_CHECK(a != MAP_FAILED, "MAP_SHARED|MAP_ANONYMOUS|MAP_NOSIGBUS: %s", strerror(errno));
	printf("ok: shared mappings are protected without STRICT\n");
}

/* Re-executes with NOSIGBUS_STRICT=value; returns its stderr in buf. */
static int
run_with(const char *value, const char *scenario, char *buf, size_t size)
{
	char setting[64];
	const char *settings[] = { setting, NULL };
	int pipefd[2], saved, status;
	size_t n = 0;
	ssize_t r;

	snprintf(setting, sizeof(setting), "NOSIGBUS_STRICT=%s", value);
	if (pipe(pipefd) != 0)
		nsbt_fail("pipe: %s", strerror(errno));
	fflush(NULL);
	saved = dup(2);
	dup2(pipefd[1], 2);
	close(pipefd[1]);
	/* The child's output is small: the pipe buffer holds it all. */
	status = core_reexec(scenario, settings);
	dup2(saved, 2);
	close(saved);
	while (n < size - 1 && (r = read(pipefd[0], buf + n, size - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(pipefd[0]);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fprintf(stderr, "stderr of the NOSIGBUS_STRICT=%s run:\n%s", value, buf);
	return status;
}

int
main(int argc, char **argv)
{
	static const char *const on[] = { "1", "yes", "true", "on" };
	static const char *const off[] = { "0", "no", "false", "off" };
	char err[4096], what[96];

	core_require_library();
	if (argc > 1) {
		if (strcmp(argv[1], "strict") == 0)
			strict_scenario();
		else if (strcmp(argv[1], "nonstrict") == 0)
			nonstrict_scenario();
		else
			nsbt_fail("unknown scenario %s", argv[1]);
		return 0;
	}

	/* This process: NOSIGBUS_STRICT is not set by meson. */
	if (getenv("NOSIGBUS_STRICT"))
		nsbt_skip("NOSIGBUS_STRICT is set in the test environment");
	nonstrict_scenario();

	for (size_t i = 0; i < 4; i++) {
		snprintf(what, sizeof(what), "NOSIGBUS_STRICT=%s", on[i]);
		nsbt_expect_exit(run_with(on[i], "strict", err, sizeof(err)), 0, what);
		NSBT_CHECK(err[0] == 0, "%s: the library printed: %s", what, err);
	}
	for (size_t i = 0; i < 4; i++) {
		snprintf(what, sizeof(what), "NOSIGBUS_STRICT=%s", off[i]);
		nsbt_expect_exit(run_with(off[i], "nonstrict", err, sizeof(err)), 0, what);
		NSBT_CHECK(err[0] == 0, "%s: the library printed: %s", what, err);
	}

	nsbt_expect_exit(run_with("maybe", "nonstrict", err, sizeof(err)), 0,
			 "NOSIGBUS_STRICT=maybe (invalid) uses the default");
	NSBT_CHECK(strncmp(err, "nosigbus: ignoring NOSIGBUS_STRICT=maybe", 40) == 0,
		   "warning for NOSIGBUS_STRICT=maybe: got \"%s\"", err);
	NSBT_CHECK(strchr(err, '\n') && strchr(err, '\n')[1] == 0,
		   "exactly one warning line expected, got \"%s\"", err);
	printf("ok: NOSIGBUS_STRICT=maybe: one warning line: %s", err);
	return 0;
}
