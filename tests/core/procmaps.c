/* SPDX-License-Identifier: MIT */
/*
 * nosigbus_protect() and what it learns from /proc/self/maps (issue 10
 * items 6 and 7).
 *
 * Modes (argv[1]):
 *   lines  file names the kernel prints in /proc/self/maps that a parser
 *          can get wrong:
 *          - a path longer than 4096 bytes (deep directories) whose last
 *            component ends in text shaped like a maps line, placed so
 *            that it starts exactly at byte 4096 of the line (8192 for a
 *            second file): it names an address range that is not mapped,
 *            and nosigbus_protect() of that range must fail with ENOMEM;
 *          - nosigbus_protect() of the real mappings of those files, of a
 *            file with a 10000-byte path, of a file whose name holds a
 *            newline followed by such a line (the kernel prints \012), of
 *            a file named "x (deleted)" and of a deleted file: each must
 *            succeed and protect the whole mapping (a read past the end
 *            of the truncated file is rescued).
 *          The directories live under NSB_BUILD_ROOT (or the working
 *          directory) and are removed afterwards.
 *   vmas   nosigbus_protect() over one region of 10000 VMAs (every page's
 *          protection differs from its neighbours'): it must succeed and
 *          record each VMA's protection (a rescued page gets it).  Not a
 *          timing test (the benchmark times it); a watchdog ends a call
 *          that does not return within 60 s.
 *
 * Runs with NOSIGBUS_POLICY=flag (re-executes itself to set it).
 */
#include <dirent.h>

#include "core.h"

static size_t ps;

/* ---- deep directories ---------------------------------------------------- */

#define MAX_DEPTH 128

struct deep {
	char base[1024];	/* an ordinary path */
	int dirfd[MAX_DEPTH];	/* dirfd[0]: base; dirfd[i]: inside dirfd[i - 1] */
	char name[MAX_DEPTH][256];
	int depth;
	size_t path_len;	/* strlen of the deepest directory's path */
};

/* Removes everything under the directory open at fd (no path length limit). */
static void
remove_tree_at(int fd)
{
	DIR *d = fdopendir(dup(fd));
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		int sub;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		sub = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0) {
			remove_tree_at(sub);
			close(sub);
			unlinkat(fd, e->d_name, AT_REMOVEDIR);
		} else {
			unlinkat(fd, e->d_name, 0);
		}
	}
	closedir(d);
}

static void
deep_init(struct deep *d)
{
	const char *root = getenv("NSB_BUILD_ROOT");
	char cwd[1024];

	if (!root || !*root)
		root = getcwd(cwd, sizeof(cwd)) ? cwd : ".";
	if ((size_t)snprintf(d->base, sizeof(d->base), "%s/nsbt-procmaps-XXXXXX", root) >=
	    sizeof(d->base))
		nsbt_fail("the build directory's path is too long");
	if (!mkdtemp(d->base))
		nsbt_fail("mkdtemp %s: %s", d->base, strerror(errno));
	d->dirfd[0] = open(d->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->dirfd[0] < 0)
		nsbt_fail("open %s: %s", d->base, strerror(errno));
	d->depth = 1;
	d->path_len = strlen(d->base);
}

/* One more directory level, its name `len` characters long. */
static void
deep_push(struct deep *d, size_t len)
{
	int i = d->depth;

	NSBT_CHECK(i < MAX_DEPTH && len >= 1 && len <= 255, "deep_push(%zu) at depth %d", len, i);
	/* 'z': never a hex digit, so no component reads as an address. */
	memset(d->name[i], 'z', len);
	d->name[i][len] = '\0';
	d->name[i][0] = (char)('A' + i % 26);
	if (mkdirat(d->dirfd[i - 1], d->name[i], 0700) != 0)
		nsbt_fail("mkdirat: %s", strerror(errno));
	d->dirfd[i] = openat(d->dirfd[i - 1], d->name[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->dirfd[i] < 0)
		nsbt_fail("openat: %s", strerror(errno));
	d->depth++;
	d->path_len += 1 + len;
}

/* Deepens d until its path is at least `target` characters long. */
static void
deep_extend(struct deep *d, size_t target)
{
	while (d->path_len < target) {
		size_t left = target - d->path_len - 1;

		deep_push(d, left > 200 ? 200 : left ? left : 1);
	}
}

/* ---- /proc/self/maps ------------------------------------------------------ */

/* The whole file (it may be long: these paths are). Caller frees. */
static char *
read_maps(size_t *len)
{
	size_t cap = 1 << 16, have = 0;
	char *buf = malloc(cap);
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	NSBT_CHECK(buf && fd >= 0, "reading /proc/self/maps: %s", strerror(errno));
	for (;;) {
		ssize_t n;

		if (cap - have < 4096) {
			buf = realloc(buf, cap *= 2);
			NSBT_CHECK(buf, "realloc");
		}
		n = read(fd, buf + have, cap - have - 1);
		if (n < 0 && errno == EINTR)
			continue;
		NSBT_CHECK(n >= 0, "read /proc/self/maps: %s", strerror(errno));
		if (n == 0)
			break;
		have += (size_t)n;
	}
	close(fd);
	buf[have] = '\0';
	*len = have;
	return buf;
}

/* The line of the VMA that starts at addr, copied into a malloc'd string. */
static char *
maps_line_at(const void *addr)
{
	size_t len;
	char *all = read_maps(&len), *line = all, *ret = NULL;
	char want[32];

	snprintf(want, sizeof(want), "%lx-", (unsigned long)(uintptr_t)addr);
	while (line && *line) {
		char *nl = strchr(line, '\n');

		if (strncmp(line, want, strlen(want)) == 0) {
			ret = strndup(line, nl ? (size_t)(nl - line) : strlen(line));
			break;
		}
		line = nl ? nl + 1 : NULL;
	}
	free(all);
	NSBT_CHECK(ret, "no /proc/self/maps line starts at %p", addr);
	return ret;
}

/* ---- the scenarios ------------------------------------------------------- */

/* A free range of n pages at a low address, below anything handed out top-down. */
static char *
low_free_range(size_t n, uintptr_t hint)
{
	char *p = mmap((void *)hint, n * ps, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return core_free_range(n * ps);
	munmap(p, n * ps);
	return p;
}

/* "START-END r--p 00000000 00:00 0" naming [start, start + ps). */
static void
fake_line(char *out, size_t len, const char *start)
{
	snprintf(out, len, "%lx-%lx r--p 00000000 00:00 0",
		 (unsigned long)(uintptr_t)start, (unsigned long)(uintptr_t)(start + ps));
}

/*
 * protect(p, 2 pages) must succeed; then, the file truncated, a read of
 * each page is rescued.
 */
static void
expect_protects(char *p, int fd, const char *what)
{
	char name[300];

	errno = 0;
	if (nosigbus_protect(p, 2 * ps) != 0)
		nsbt_fail("%s: nosigbus_protect of the real mapping: %s", what, strerror(errno));
	core_truncate(fd, 0);
	snprintf(name, sizeof(name), "%s: read past the end after nosigbus_protect", what);
	nsbt_expect_exit(core_touch_quiet(p + ps + 10, false, name), 0, name);
	core_expect_bytes(p, 0, 2 * ps, what);
	printf("ok: %s: nosigbus_protect of the real mapping succeeded and protects both pages\n",
	       what);
}

static void
expect_refused(char *fake, const char *what)
{
	errno = 0;
	if (nosigbus_protect(fake, ps) == 0)
		nsbt_fail("%s: nosigbus_protect of unmapped memory at %p succeeded: the maps "
			  "parser took text from a file name for a mapping", what, (void *)fake);
	NSBT_CHECK(errno == ENOMEM, "%s: nosigbus_protect of unmapped memory: %s, expected ENOMEM",
		   what, strerror(errno));
	printf("ok: %s: nosigbus_protect of the unmapped range it names fails with ENOMEM\n", what);
}

/*
 * A file in the deepest directory of d, mapped (2 pages, read-only,
 * shared) at `at`, renamed so that a fake maps line naming `fake` starts
 * at byte `boundary` of its /proc/self/maps line.  Returns the fd.
 */
static int
injecting_file(struct deep *d, char *at, char *fake, size_t boundary, size_t min_path)
{
	int dfd = d->dirfd[d->depth - 1], fd;
	char fake_text[96], name[256], *line, *path_in_line;
	size_t prefix, filler;

	fd = openat(dfd, "seed", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	NSBT_CHECK(fd >= 0, "create: %s", strerror(errno));
	nsbt_fill(fd, 2 * ps);
	core_map(at, 2 * ps, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
	/* Where the path starts in the line (address, perms, offset, device,
	 * inode and padding): fixed by now, a rename does not change it. */
	line = maps_line_at(at);
	path_in_line = strstr(line, d->base);
	NSBT_CHECK(path_in_line, "the maps line does not show the path: %.200s", line);
	prefix = (size_t)(path_in_line - line);
	free(line);

	fake_line(fake_text, sizeof(fake_text), fake);
	/* Directories until the fake text fits in the last component just
	 * before `boundary`, then the exact filler. */
	NSBT_CHECK(prefix + d->path_len + 1 < boundary, "too deep already");
	deep_extend(d, min_path > boundary - prefix - 150 ? min_path : boundary - prefix - 150);
	NSBT_CHECK(prefix + d->path_len + 1 < boundary, "the path overshot the boundary");
	filler = boundary - (prefix + d->path_len + 1);
	NSBT_CHECK(filler >= 1 && filler + strlen(fake_text) <= 255, "filler %zu", filler);
	memset(name, 'z', filler);
	snprintf(name + filler, sizeof(name) - filler, "%s", fake_text);
	if (renameat(dfd, "seed", d->dirfd[d->depth - 1], name) != 0)
		nsbt_fail("renameat: %s", strerror(errno));

	/* Check that the kernel prints it where we meant it. */
	line = maps_line_at(at);
	if (strlen(line) < boundary || strncmp(line + boundary, fake_text, strlen(fake_text)) != 0)
		nsbt_fail("the fake line is not at byte %zu of the maps line (%zu bytes)",
			  boundary, strlen(line));
	printf("ok: a %zu-byte maps line whose text from byte %zu reads \"%s\"\n", strlen(line),
	       boundary, fake_text);
	free(line);
	return fd;
}

static void
lines_child(void *arg)
{
	struct deep *d = arg;
	char *area = low_free_range(32, (uintptr_t)1 << 32);
	char text[96];
	int fd;

	/* 1: the fake line at byte 4096; the fake range just above the file. */
	fd = injecting_file(d, area, area + 2 * ps, 4096, 0);
	expect_refused(area + 2 * ps, "path > 4096 bytes ending in a maps line at byte 4096");
	expect_protects(area, fd, "the file with the > 4096-byte path");
	close(fd);

	/* 2: a path of 10000 bytes and more, a fake line at byte 12288. */
	deep_push(d, 10);
	fd = injecting_file(d, area + 4 * ps, area + 6 * ps, 12288, 10000);
	expect_refused(area + 6 * ps, "path > 10000 bytes ending in a maps line at byte 12288");
	expect_protects(area + 4 * ps, fd, "the file with the > 10000-byte path");
	close(fd);

	/* 3: a newline in a name, followed by a maps line; 4: " (deleted)" names. */
	{
		int dfd = d->dirfd[0];
		struct {
			const char *label;
			char name[160];
			bool unlink;
		} files[3] = {
			{ "a name with a newline and a maps line after it", "", false },
			{ "a file named \"x (deleted)\"", "x (deleted)", false },
			{ "a deleted file named \"y (deleted)\"", "y (deleted)", true },
		};

		fake_line(text, sizeof(text), area + 10 * ps);
		snprintf(files[0].name, sizeof(files[0].name), "nl\n%s", text);
		for (int i = 0; i < 3; i++) {
			char *at = area + (12 + 3 * (size_t)i) * ps;

			fd = openat(dfd, files[i].name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			NSBT_CHECK(fd >= 0, "create %s: %s", files[i].label, strerror(errno));
			nsbt_fill(fd, 2 * ps);
			core_map(at, 2 * ps, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
			if (files[i].unlink)
				NSBT_CHECK(unlinkat(dfd, files[i].name, 0) == 0, "unlink");
			if (i == 0)
				expect_refused(area + 10 * ps, files[i].label);
			expect_protects(at, fd, files[i].label);
			close(fd);
		}
	}
}

/* ---- many VMAs ----------------------------------------------------------- */

#define NVMAS 10000

/* Pages done, shared with the parent's watchdog: each rescue reads the
 * 10 000 lines of /proc/self/maps, slow on a loaded machine (issue 23: a
 * minute at a load of 13), so the watchdog looks for progress, not time. */
static volatile unsigned long *vmas_done;

/* Page i's protection: no two neighbours alike, so each page is one VMA. */
static int
vma_prot(size_t i)
{
	static const int cycle[] = { CORE_PROT_RW, PROT_READ, PROT_NONE, PROT_READ };

	return cycle[i % 4];
}

static void
vmas_child(void *arg)
{
	int fd = nsbt_file(NSBT_MEMFD, 0);
	char *p = core_map(NULL, NVMAS * ps, CORE_PROT_RW, MAP_SHARED, fd, 0);
	size_t len, rescued = 0, checked = 0;
	char *all, *line;

	(void)arg;
	for (size_t i = 0; i < NVMAS; i++)
		if (vma_prot(i) != CORE_PROT_RW &&
		    mprotect(p + i * ps, ps, vma_prot(i)) != 0)
			nsbt_fail("mprotect page %zu: %s", i, strerror(errno));
	errno = 0;
	if (nosigbus_protect(p, NVMAS * ps) != 0)
		nsbt_fail("nosigbus_protect over %d VMAs: %s", NVMAS, strerror(errno));
	printf("ok: nosigbus_protect over %d VMAs returned 0\n", NVMAS);

	/* Every readable page is rescued, with its own protection. */
	for (size_t i = 0; i < NVMAS; i++) {
		if (!(vma_prot(i) & PROT_READ))
			continue;
		if (p[i * ps + 5] != 0)
			nsbt_fail("page %zu reads non-zero", i);
		if (vma_prot(i) & PROT_WRITE) {
			p[i * ps + 5] = 'w';
			NSBT_CHECK(p[i * ps + 5] == 'w', "write to page %zu", i);
		}
		rescued++;
		(*vmas_done)++;
	}
	/* A PROT_NONE page made readable: rescued too (the record follows mprotect). */
	NSBT_CHECK(mprotect(p + 2 * ps, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	core_expect_bytes(p + 2 * ps, 0, ps, "a PROT_NONE page made readable");
	/* Read-only pages were rescued read-only: a write dies of SIGSEGV. */
	for (size_t i = 1; i < NVMAS; i += NVMAS / 7 * 4 + 4)
		nsbt_expect_signal(core_touch_status(p + i * ps, true), SIGSEGV,
				   "write to a read-only page rescued read-only");
	/* The kernel agrees: every rescued page is anonymous with its protection. */
	all = read_maps(&len);
	for (line = all; line && *line;) {
		char *nl = strchr(line, '\n');
		unsigned long a, b, ino;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s %*s %*s %lu", &a, &b, perms, &ino) == 4 &&
		    a >= (uintptr_t)p && b <= (uintptr_t)(p + NVMAS * ps)) {
			for (unsigned long x = a; x < b; x += ps) {
				size_t i = (x - (uintptr_t)p) / ps;
				int want = i == 2 ? PROT_READ : vma_prot(i);

				if (!(want & PROT_READ))
					continue;
				if (ino != 0 || perms[0] != 'r' || (perms[1] == 'w') != !!(want & PROT_WRITE))
					nsbt_fail("page %zu: %.60s; expected a rescued page, %s", i, line,
						  want & PROT_WRITE ? "rw" : "read-only");
				checked++;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	free(all);
	NSBT_CHECK(checked == rescued + 1, "%zu rescued pages in /proc/self/maps, expected %zu",
		   checked, rescued + 1);
	printf("ok: all %zu readable pages of the %d VMAs rescued, each with its VMA's protection\n",
	       rescued, NVMAS);
}

int
main(int argc, char **argv)
{
	core_require_library();
	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "flag");
	ps = nsbt_page();
	if (argc < 2)
		nsbt_fail("usage: core-procmaps lines|vmas");
	if (strcmp(argv[1], "lines") == 0) {
		struct deep d;
		int status;

		deep_init(&d);
		status = core_run_watched(lines_child, &d, nsbt_scaled(60), NULL, "maps lines", NULL, 0);
		remove_tree_at(d.dirfd[0]);
		rmdir(d.base);
		nsbt_expect_exit(status, 0, "long, odd and fake-looking names in /proc/self/maps");
		return 0;
	}
	if (strcmp(argv[1], "vmas") != 0)
		nsbt_fail("unknown mode %s", argv[1]);
	vmas_done = core_progress();
	nsbt_expect_exit(core_run_watched(vmas_child, NULL, nsbt_scaled(60), vmas_done,
					  "nosigbus_protect over 10000 VMAs", NULL, 0),
			 0, "nosigbus_protect over 10000 VMAs");
	return 0;
}
