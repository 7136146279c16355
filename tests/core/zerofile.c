/* SPDX-License-Identifier: MIT */
/*
 * A rescue costs readers and writers what fresh memory costs them, told
 * by counting page faults (getrusage's ru_minflt), never by timing:
 *
 *   - write: a range fill whose first access is a write takes one fault a
 *     page over the pass, as fresh anonymous memory does (populating the
 *     fill with the zero page made it two: the populate, then a
 *     copy-on-write fault a page);
 *   - read: a range fill whose first access is a read is mapped from the
 *     library's zero file; the first such pass takes no more faults than
 *     fresh anonymous memory, and the next one, over a new pool's tail,
 *     no more than a private mapping of a file already in the page cache
 *     (the kernel's fault-around), which this test measures itself; the
 *     pages read zeros, a write takes its bytes and leaves its neighbours
 *     zero, the file is untouched;
 *   - bounded: tails at file offsets a whole zero file apart share its
 *     pages (its blocks do not grow), and there is one zero file
 *     whatever the number of pools;
 *   - reused: a program that puts a file of its own at the zero file's
 *     number (dup2) gets zeros in the next rescue, never its file;
 *   - grown: an mremap that grows a tail mapped from the zero file past
 *     the zero file's end reads zeros there, and survives (here the
 *     recovery maps the file itself over the growth; where it cannot,
 *     rescue.c's nsb_rescue_regrown makes it anonymous: not reached here);
 *   - page, off (NSB_TEST_ZERO_FILE=off): no zero file is made, reads
 *     fault once a page;
 *   - fsize: under a soft RLIMIT_FSIZE below the zero file's size (8 MiB
 *     here) a read-first fill reads zeros and makes no zero file (its
 *     ftruncate sent the process SIGXFSZ, which killed it); with the limit
 *     raised, the next one makes it;
 *   - lowlimit, fullhigh: with a soft RLIMIT_NOFILE below 64 (16 here), or
 *     with every number from top - 32 up to the limit taken (64 here), a
 *     read-first fill reads zeros and leaves the lowest free number free:
 *     the program's next dup() gets the number it got before, and one
 *     free number left below the limit is still free.  Failed before the
 *     fix: the zero file stayed at the lowest free number (dup() gave the
 *     next one; at the limit, EMFILE).
 *
 * Each scenario runs in a child of a fresh exec with its settings.
 */
#include <dirent.h>

#include "core.h"

#define ZERO_FILE_SIZE ((size_t)64 << 20)	/* rescue.c */
#define N 512					/* pages a pass */

static long
faults(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru) != 0)
		nsbt_fail("getrusage: %s", strerror(errno));
	return ru.ru_minflt;
}

/* n pages of a memfd at file offset off, protected with MAP_NOSIGBUS,
 * then emptied. */
static char *
emptied_at(size_t n, off_t off, int type)
{
	int fd = memfd_create("zerofile-pool", MFD_CLOEXEC);
	char *p;

	if (fd < 0)
		nsbt_fail("memfd_create: %s", strerror(errno));
	core_truncate(fd, off + (off_t)(n * nsbt_page()));
	p = core_map(NULL, n * nsbt_page(), CORE_PROT_RW, type | MAP_NOSIGBUS, fd, off);
	core_truncate(fd, 0);
	close(fd);
	return p;
}

static char *
emptied(size_t n, int type)
{
	return emptied_at(n, 0, type);
}

/* Faults a pass of one access a page takes (reads sum into *sum). */
static long
pass(char *p, size_t n, bool write, unsigned *sum)
{
	long before = faults();
	unsigned s = 0;

	for (size_t i = 0; i < n; i++) {
		if (write)
			((volatile char *)p)[i * nsbt_page()] = 1;
		else
			s += (unsigned char)((volatile char *)p)[i * nsbt_page()];
	}
	if (sum)
		*sum = s;
	return faults() - before;
}

static long
fresh_anon(bool write)
{
	char *p = core_map(NULL, N * nsbt_page(), CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long f;

	(void)madvise(p, N * nsbt_page(), MADV_NOHUGEPAGE);
	f = pass(p, N, write, NULL);
	munmap(p, N * nsbt_page());
	return f;
}

/* The zero file's number in /proc/self/fd, or -1. */
static int
zero_fd(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -1, count = 0;

	if (!d)
		nsbt_fail("opendir /proc/self/fd: %s", strerror(errno));
	while ((e = readdir(d))) {
		char path[300], link[256];
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (strncmp(link, "/memfd:nosigbus-zero", 20) == 0) {
			found = atoi(e->d_name);
			count++;
		}
	}
	closedir(d);
	if (count > 1)
		nsbt_fail("%d zero files, expected at most one", count);
	return found;
}

static long
zero_blocks(void)
{
	int fd = zero_fd();
	struct stat st;

	if (fd < 0)
		nsbt_fail("no zero file after a read-first fill");
	if (fstat(fd, &st) != 0)
		nsbt_fail("fstat of the zero file: %s", strerror(errno));
	if ((size_t)st.st_size != ZERO_FILE_SIZE)
		nsbt_fail("the zero file is %lld bytes, expected %zu", (long long)st.st_size,
			  ZERO_FILE_SIZE);
	return (long)st.st_blocks;
}

static void
write_first(void)
{
	static const int types[] = { MAP_SHARED, MAP_PRIVATE };
	long anon = fresh_anon(true);

	for (int t = 0; t < 2; t++) {
		char *p = emptied(N, types[t]);
		struct nosigbus_stats a = core_stats(), b;
		long f = pass(p, N, true, NULL);

		b = core_stats();
		if (b.rescues - a.rescues != 1)
			nsbt_fail("write-first: %llu rescues, expected 1 (a range fill)",
				  (unsigned long long)(b.rescues - a.rescues));
		/* A few for the signal's own stack and the handler's pages. */
		if (f > anon + 8)
			nsbt_fail("%s write-first pass over %d pages: %ld faults, fresh anonymous "
				  "memory %ld (one a page expected)",
				  types[t] == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE", N, f, anon);
		core_expect_bytes(p + nsbt_page() + 1, 0, nsbt_page() - 1, "write-first, a page");
		printf("ok: %s write-first pass: %ld faults for %d pages (fresh memory %ld)\n",
		       types[t] == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE", f, N, anon);
		munmap(p, N * nsbt_page());
	}
	if (zero_fd() >= 0)
		nsbt_fail("a write-first fill made the zero file");
	printf("ok: write-first fills are anonymous memory\n");
}

/* Read faults over a private mapping of a file already in the page
 * cache: what the kernel's fault-around gives here. */
static long
warm_file(void)
{
	int fd = nsbt_file(NSBT_MEMFD, N * nsbt_page());
	char *p = core_map(NULL, N * nsbt_page(), PROT_READ, MAP_SHARED, fd, 0);
	long f;

	(void)pass(p, N, false, NULL);	/* in the page cache now */
	munmap(p, N * nsbt_page());
	p = core_map(NULL, N * nsbt_page(), PROT_READ, MAP_PRIVATE, fd, 0);
	f = pass(p, N, false, NULL);
	munmap(p, N * nsbt_page());
	close(fd);
	return f;
}

static void
read_first(void)
{
	static const int types[] = { MAP_SHARED, MAP_PRIVATE };
	long anon = fresh_anon(false), warm = warm_file();
	size_t ps = nsbt_page();

	for (int t = 0; t < 2; t++) {
		const char *type = types[t] == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE";
		char *p = emptied(N, types[t]), *q;
		unsigned sum;
		long f1, f2;

		f1 = pass(p, N, false, &sum);
		if (sum != 0)
			nsbt_fail("%s read-first pass read non-zero bytes", type);
		if (f1 > anon + 8)
			nsbt_fail("%s first read-first pass: %ld faults, fresh anonymous memory %ld",
				  type, f1, anon);
		/* A new pool's tail: the zero file's pages are there now. */
		q = emptied(N, types[t]);
		f2 = pass(q, N, false, &sum);
		if (sum != 0)
			nsbt_fail("%s second read-first pass read non-zero bytes", type);
		if (f2 > warm + 8)
			nsbt_fail("%s second read-first pass: %ld faults, a private mapping of a file "
				  "in the page cache %ld (fault-around expected)", type, f2, warm);
		printf("ok: %s read-first passes: %ld then %ld faults for %d pages (fresh memory "
		       "%ld, a file in the page cache %ld)\n", type, f1, f2, N, anon, warm);
		/* Writes after reads: the page's own, its neighbours still zero,
		 * and the next tail from the zero file reads zeros too. */
		memset(q + 7 * ps, 'W', ps);
		core_expect_bytes(q + 7 * ps, 'W', ps, "a write after a read");
		core_expect_bytes(q + 6 * ps, 0, ps, "the page before the write");
		core_expect_bytes(q + 8 * ps, 0, ps, "the page after the write");
		core_expect_bytes(p + 7 * ps, 0, ps, "the same page of the other tail");
		munmap(p, N * ps);
		munmap(q, N * ps);
		q = emptied(N, types[t]);
		core_expect_bytes(q, 0, N * ps, "a tail mapped after a write");
		munmap(q, N * ps);
	}
	printf("ok: reads zeros, writes their bytes, never into another tail\n");
}

static void
bounded(void)
{
	size_t ps = nsbt_page();
	long b0, b1;
	char *p;

	p = emptied(N, MAP_SHARED);
	(void)pass(p, N, false, NULL);
	munmap(p, N * ps);
	b0 = zero_blocks();
	/* Forty pools, half of them a zero file's size further on. */
	for (int i = 0; i < 40; i++) {
		unsigned sum;

		p = emptied_at(N, (off_t)(i % 2) * (off_t)ZERO_FILE_SIZE, MAP_SHARED);
		(void)pass(p, N, false, &sum);
		if (sum != 0)
			nsbt_fail("pool %d read non-zero bytes", i);
		munmap(p, N * ps);
	}
	b1 = zero_blocks();
	if (b1 != b0)
		nsbt_fail("the zero file grew from %ld to %ld blocks over pools at the same offsets",
			  b0, b1);
	printf("ok: 41 pools, one zero file of %zu MiB, %ld KiB of it used, not one more page\n",
	       ZERO_FILE_SIZE >> 20, b1 / 2);
}

static void
reused(void)
{
	size_t ps = nsbt_page();
	char *p = emptied(N, MAP_SHARED);
	int zfd, fd;

	(void)pass(p, N, false, NULL);
	munmap(p, N * ps);
	zfd = zero_fd();
	if (zfd < 0)
		nsbt_fail("no zero file after a read-first fill");
	/* A file of the program's (the pattern, N pages) at its number. */
	fd = nsbt_file(NSBT_MEMFD, N * ps);
	if (dup2(fd, zfd) != zfd)
		nsbt_fail("dup2 onto %d: %s", zfd, strerror(errno));
	close(fd);
	p = emptied(N, MAP_SHARED);
	core_expect_bytes(p, 0, N * ps, "a tail after the zero file's number was reused");
	munmap(p, N * ps);
	core_expect_pattern(core_map(NULL, N * ps, PROT_READ, MAP_SHARED, zfd, 0), 0, N * ps,
			    "the program's file at that number");
	printf("ok: the zero file's number taken by the program: zeros still, its file intact\n");
}

/* The lowest free descriptor number (dup's). */
static int
lowest_free(void)
{
	int fd = dup(0);

	if (fd < 0)
		nsbt_fail("dup: %s", strerror(errno));
	close(fd);
	return fd;
}

/* A read-first fill under a soft RLIMIT_NOFILE of limit, with every
 * number from taken_from up to the limit taken (none if at the limit),
 * and every number below it but one: the zero file finds no room where
 * the man page puts it, and the program's descriptors are as without the
 * library. */
static void
tight_fill(rlim_t limit, int taken_from, const char *what)
{
	size_t ps = nsbt_page();
	struct rlimit rl;
	int before, after, spare, last = -1;
	unsigned sum;
	char *p;

	NSBT_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	if (rl.rlim_max < limit)
		nsbt_skip("%s: the hard RLIMIT_NOFILE is %llu", what, (unsigned long long)rl.rlim_max);
	rl.rlim_cur = limit;
	NSBT_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(errno));
	for (int fd = taken_from; fd < (int)limit; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			NSBT_CHECK(dup2(0, fd) == fd, "dup2 onto %d: %s", fd, strerror(errno));
	p = emptied(N, MAP_SHARED);
	before = lowest_free();
	(void)pass(p, 16, false, &sum);
	NSBT_CHECK(sum == 0, "%s: a read-first fill read non-zero bytes", what);
	after = lowest_free();
	if (after != before)
		nsbt_fail("%s: the lowest free descriptor was %d before a read-first fill, %d after "
			  "(the zero file is at %d)", what, before, after, zero_fd());
	/* Every number but one below the limit taken: that one stays free. */
	while ((spare = dup(0)) >= 0)
		last = spare;
	NSBT_CHECK(errno == EMFILE, "dup: %s", strerror(errno));
	NSBT_CHECK(last >= 0, "no number left to take");
	close(last);
	(void)pass(p + 16 * ps, 16, false, &sum);
	NSBT_CHECK(sum == 0, "%s: a read-first fill read non-zero bytes", what);
	spare = dup(0);
	if (spare != last)
		nsbt_fail("%s: with one number (%d) free below the limit, a read-first fill took it: "
			  "dup() gave %d (%s)", what, last, spare, spare < 0 ? strerror(errno) : "");
	munmap(p, N * ps);
	printf("ok: %s: a read-first fill reads zeros, the program's numbers as without the "
	       "library\n", what);
}

static void
fsize_limit(void)
{
	struct rlimit rl, saved;
	unsigned sum;
	char *p;

	NSBT_CHECK(getrlimit(RLIMIT_FSIZE, &saved) == 0, "getrlimit: %s", strerror(errno));
	rl = saved;
	rl.rlim_cur = (rlim_t)8 << 20;
	NSBT_CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0, "setrlimit: %s", strerror(errno));
	p = emptied(N, MAP_SHARED);
	(void)pass(p, 16, false, &sum);
	NSBT_CHECK(sum == 0, "RLIMIT_FSIZE 8 MiB: a read-first fill read non-zero bytes");
	if (zero_fd() >= 0)
		nsbt_fail("RLIMIT_FSIZE 8 MiB: the zero file (%d) was made past the limit", zero_fd());
	munmap(p, N * nsbt_page());
	NSBT_CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0, "setrlimit: %s", strerror(errno));
	p = emptied(N, MAP_SHARED);
	(void)pass(p, 16, false, &sum);
	NSBT_CHECK(sum == 0, "limit raised: a read-first fill read non-zero bytes");
	if (zero_fd() < 0)
		nsbt_fail("limit raised: the next read-first fill made no zero file");
	munmap(p, N * nsbt_page());
	printf("ok: under a soft RLIMIT_FSIZE below the zero file's size a read-first fill reads "
	       "zeros without it (no SIGXFSZ); the limit raised, the next fill makes it\n");
}

static void
low_limit(void)
{
	tight_fill(16, 16, "soft RLIMIT_NOFILE 16");
}

static void
full_high(void)
{
	tight_fill(64, 64 - 32, "soft RLIMIT_NOFILE 64, numbers 32 to 63 taken");
}

static void
grown(void)
{
	size_t ps = nsbt_page(), old = 16 * ps, len = ZERO_FILE_SIZE + 16 * ps;
	char *p = emptied(16, MAP_SHARED), *q;

	(void)pass(p, 16, false, NULL);
	q = mremap(p, old, len, MREMAP_MAYMOVE);
	if (q == MAP_FAILED)
		nsbt_fail("mremap: %s", strerror(errno));
	core_expect_bytes(q + len - ps, 0, ps, "the last page of a grown tail");
	core_expect_bytes(q + ZERO_FILE_SIZE - ps, 0, 2 * ps, "a grown tail at the zero file's end");
	munmap(q, len);
	printf("ok: a tail from the zero file grown past the zero file's end reads zeros\n");
}

static void
no_zero_file(const char *what)
{
	long anon = fresh_anon(false);
	char *p = emptied(N, MAP_SHARED);
	long f = pass(p, N, false, NULL);

	munmap(p, N * nsbt_page());
	if (zero_fd() >= 0)
		nsbt_fail("%s: a zero file was made", what);
	if (f < N / 2)
		nsbt_fail("%s: %ld faults over %d pages read, expected one a page", what, f, N);
	printf("ok: %s: no zero file, %ld faults for %d pages read (fresh memory %ld)\n", what, f,
	       N, anon);
}

static void
page_fill(void)
{
	no_zero_file("NOSIGBUS_FILL=page");
}

static void
off(void)
{
	no_zero_file("NSB_TEST_ZERO_FILE=off");
}

int
main(int argc, char **argv)
{
	static const char *const range[] = { "NOSIGBUS_FILL=range", NULL };
	static const char *const page[] = { "NOSIGBUS_FILL=page", NULL };
	static const char *const zoff[] = { "NOSIGBUS_FILL=range", "NSB_TEST_ZERO_FILE=off", NULL };
	static const struct {
		const char *name;
		void (*fn)(void);
		const char *const *settings;
	} scenarios[] = {
		{ "write", write_first, range }, { "read", read_first, range },
		{ "bounded", bounded, range },	 { "reused", reused, range },
		{ "grown", grown, range },	 { "page", page_fill, page },
		{ "off", off, zoff },
		{ "lowlimit", low_limit, range }, { "fullhigh", full_high, range },
		{ "fsize", fsize_limit, range },
	};
	size_t n = sizeof(scenarios) / sizeof(scenarios[0]);

	core_require_library();
	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "flag");
	if (argc > 1) {
		for (size_t i = 0; i < n; i++)
			if (!strcmp(argv[1], scenarios[i].name)) {
				scenarios[i].fn();
				return 0;
			}
		nsbt_fail("unknown scenario %s", argv[1]);
	}
	unsetenv("NSB_TEST_ZERO_FILE");
	for (size_t i = 0; i < n; i++)
		nsbt_expect_exit(core_reexec(scenarios[i].name, scenarios[i].settings), 0,
				 nsbt_fmt("%s (%s)", scenarios[i].name, scenarios[i].settings[0]));
	return 0;
}
