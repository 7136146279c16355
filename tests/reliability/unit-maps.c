/* SPDX-License-Identifier: MIT */
/*
 * unit-maps - nsb_maps_each() gives the same VMAs whether it asks the
 * kernel with ioctl(PROCMAP_QUERY) or reads /proc/self/maps (issue 24):
 * the records that mman.c rebuilds after a failed call come from one or
 * the other, and must not depend on the kernel's version.
 *
 * A window of fake addresses holds one of each kind of VMA whose fields
 * the two could report differently: a shared memfd (a deleted file), a
 * private mapping of a file at an offset, a file whose name holds a
 * newline (the file escapes it as \012), a deleted disk file, anonymous
 * memory read-write, read-only and PROT_NONE, and holes.  For many spans
 * (from a hole, from the middle of a VMA, ending inside one, empty, the
 * whole user address space) both paths must give the same list, field by
 * field; the query path must have been the one taken where the kernel
 * has the call (else the test says so and checks the fallback alone).
 * Then a failed mprotect next to a protected mapping, through the
 * interposed call, must leave the same records under both paths.  The
 * descriptor the query path keeps (one, numbered high, close-on-exec,
 * while protected mappings exist, none after) must not be used in a fork
 * child (whose own new mapping must show).
 *
 * Usage: unit-maps
 */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "nsb.h"
#include "nsbtest.h"

#define MAXV 4096

struct seen {
	struct nsb_vma v;
	char path[512];
	bool has_path;
};

struct list {
	size_t n;
	struct seen s[MAXV];
};

static struct list a, b;	/* static: collecting must not map memory */
static size_t ps;
static char dir[200];	/* DIR/nsb-unit-maps-XXXXXX, DIR the first argument or /tmp */
static char nl_path[256], del_path[256], off_path[256];

/* Does the kernel answer PROCMAP_QUERY (both() saw the query path)? */
static bool kernel_queries;

static bool
queried_once(void)
{
	return kernel_queries;
}

static int
collect(const struct nsb_vma *vma, void *arg)
{
	struct list *l = arg;
	struct seen *s;

	if (l->n == MAXV)
		return -1;
	s = &l->s[l->n++];
	s->v = *vma;
	s->has_path = vma->path && strlen(vma->path) < sizeof(s->path);
	if (s->has_path)
		strcpy(s->path, vma->path);
	s->v.path = NULL;
	return 0;
}

static void
cleanup(void)
{
	unlink(nl_path);
	unlink(off_path);
	rmdir(dir);
}

static void
both(uintptr_t lo, uintptr_t hi, const char *what)
{
	int ra, rb;
	bool queried;

	a.n = b.n = 0;
	nsb_maps_force_read(false);
	ra = nsb_maps_each(lo, hi, false, collect, &a);
	queried = nsb_maps_last_queried();
	nsb_maps_force_read(true);
	rb = nsb_maps_each(lo, hi, false, collect, &b);
	NSBT_CHECK(!nsb_maps_last_queried(), "%s: the forced read queried", what);
	NSBT_CHECK(ra == 0 && rb == 0, "%s: query %d, read %d", what, ra, rb);
	NSBT_CHECK(a.n == b.n, "%s: query gives %zu VMAs, read %zu", what, a.n, b.n);
	for (size_t i = 0; i < a.n; i++) {
		const struct nsb_vma *x = &a.s[i].v, *y = &b.s[i].v;

		NSBT_CHECK(x->start == y->start && x->end == y->end && x->off == y->off &&
			   x->dev == y->dev && x->ino == y->ino && x->prot == y->prot &&
			   x->shared == y->shared && x->anon == y->anon && x->pkey == y->pkey &&
			   x->page_size == y->page_size,
			   "%s: VMA %zu: query %#lx-%#lx off %#llx ino %llu prot %d, "
			   "read %#lx-%#lx off %#llx ino %llu prot %d", what, i,
			   (unsigned long)x->start, (unsigned long)x->end, (unsigned long long)x->off,
			   (unsigned long long)x->ino, x->prot, (unsigned long)y->start,
			   (unsigned long)y->end, (unsigned long long)y->off,
			   (unsigned long long)y->ino, y->prot);
		NSBT_CHECK(a.s[i].has_path == b.s[i].has_path &&
			   (!a.s[i].has_path || strcmp(a.s[i].path, b.s[i].path) == 0),
			   "%s: VMA %zu at %#lx: query path '%s', read path '%s'", what, i,
			   (unsigned long)x->start, a.s[i].has_path ? a.s[i].path : "(none)",
			   b.s[i].has_path ? b.s[i].path : "(none)");
	}
	nsb_maps_force_read(false);
	kernel_queries = queried;
	if (!queried)
		printf("note: %s: the kernel lacks PROCMAP_QUERY; the read path alone\n", what);
}

/* A descriptor of this process's /proc/PID/maps, or -1. */
static int
maps_descriptor(void)
{
	char link[64], target[256];
	ssize_t n;

	for (int fd = 3; fd < 4096; fd++) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 5)
			continue;
		target[n] = '\0';
		if (strcmp(target + n - 5, "/maps") == 0 && strncmp(target, "/proc/", 6) == 0)
			return fd;
	}
	return -1;
}

static int
file_in(const char *name, char *path, size_t size, size_t pages)
{
	int fd;

	snprintf(path, size, "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	NSBT_CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	NSBT_CHECK(ftruncate(fd, (off_t)(pages * ps)) == 0, "ftruncate: %s", strerror(errno));
	return fd;
}

/* Places a mapping at page `at` of the window. */
static void
place(char *win, size_t at, size_t pages, int prot, int flags, int fd, off_t off)
{
	void *p = mmap(win + at * ps, pages * ps, prot, flags | MAP_FIXED, fd, off);

	NSBT_CHECK(p != MAP_FAILED, "mmap at page %zu: %s", at, strerror(errno));
}

/*
 * nsb_maps_each_unnamed() (issue 40: a failed mprotect next to a record of
 * a file asks the kernel for no name): the same VMAs as nsb_maps_each(),
 * no path where it queried.  Then a file whose path is longer than the
 * kernel builds (PATH_MAX: ENAMETOOLONG, asked again without a name): the
 * query path must still answer.  Before the fix, that second query passed
 * a name address with a size of 0, which the kernel refuses (EINVAL), and
 * the library stopped querying for good (the maps read from then on).
 * Last: with the fix missing, the query path is gone for what follows.
 */
static void
unnamed(char *win, uintptr_t w0, uintptr_t w1)
{
	enum { DEPTH = 24 };
	char name[201], deep[32];
	int fds[DEPTH + 1], fd;
	void *p;

	a.n = b.n = 0;
	NSBT_CHECK(nsb_maps_each(w0, w1, false, collect, &a) == 0, "maps_each");
	NSBT_CHECK(nsb_maps_each_unnamed(w0, w1, collect, &b) == 0, "maps_each_unnamed");
	NSBT_CHECK(a.n == b.n && a.n > 0, "unnamed: %zu VMAs, named %zu", b.n, a.n);
	for (size_t i = 0; i < a.n; i++) {
		NSBT_CHECK(a.s[i].v.start == b.s[i].v.start && a.s[i].v.end == b.s[i].v.end &&
			   a.s[i].v.ino == b.s[i].v.ino && a.s[i].v.prot == b.s[i].v.prot &&
			   a.s[i].v.anon == b.s[i].v.anon,
			   "unnamed: VMA %zu differs from the named one", i);
		NSBT_CHECK(!queried_once() || !b.s[i].has_path,
			   "unnamed: VMA %zu has a path '%s'", i, b.s[i].path);
	}
	printf("ok: the VMAs without their names: the same VMAs\n");
	if (!queried_once())
		return;
	/* DEPTH directories of 200 characters: a path of ~4 900. */
	memset(name, 'd', 200);
	name[200] = '\0';
	fds[0] = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	NSBT_CHECK(fds[0] >= 0, "open %s: %s", dir, strerror(errno));
	for (int i = 1; i <= DEPTH; i++) {
		NSBT_CHECK(mkdirat(fds[i - 1], name, 0700) == 0, "mkdirat: %s", strerror(errno));
		fds[i] = openat(fds[i - 1], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		NSBT_CHECK(fds[i] >= 0, "openat: %s", strerror(errno));
	}
	snprintf(deep, sizeof(deep), "file");
	fd = openat(fds[DEPTH], deep, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	NSBT_CHECK(fd >= 0 && ftruncate(fd, (off_t)ps) == 0, "the deep file: %s", strerror(errno));
	p = mmap(win + 40 * ps, ps, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
	NSBT_CHECK(p != MAP_FAILED, "mmap the deep file: %s", strerror(errno));
	close(fd);
	a.n = 0;
	NSBT_CHECK(nsb_maps_each((uintptr_t)p, (uintptr_t)p + ps, false, collect, &a) == 0,
		   "maps_each over the deep file");
	NSBT_CHECK(nsb_maps_last_queried(),
		   "a VMA whose name is too long for the query: the maps were read instead");
	NSBT_CHECK(a.n == 1 && a.s[0].v.start == (uintptr_t)p && !a.s[0].has_path,
		   "the deep file: %zu VMAs", a.n);
	/* And later queries still query. */
	a.n = 0;
	NSBT_CHECK(nsb_maps_each(w0, w0 + 8 * ps, false, collect, &a) == 0 &&
		   nsb_maps_last_queried(), "after the deep file: the maps were read");
	munmap(p, ps);
	unlinkat(fds[DEPTH], deep, 0);
	for (int i = DEPTH; i >= 1; i--) {
		close(fds[i]);
		unlinkat(fds[i - 1], name, AT_REMOVEDIR);
	}
	close(fds[0]);
	printf("ok: a VMA whose name is longer than the query builds: still queried\n");
}

int
main(int argc, char **argv)
{
	size_t W = 64;
	char *win;
	int mfd, nfd, dfd, ofd;
	uintptr_t w0, w1;

	ps = nsbt_page();
	nsb_config_init();
	/* The library's own memory first: where it cannot have its arena
	 * (under valgrind), what it maps lands wherever the kernel puts it,
	 * and the holes of the window below must stay holes. */
	{
		char *w = mmap(NULL, 4 * ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		NSBT_CHECK(w != MAP_FAILED, "mmap: %s", strerror(errno));
		NSBT_CHECK(nosigbus_protect(w, 2 * ps) == 0, "nosigbus_protect: %s", strerror(errno));
		NSBT_CHECK(mprotect(w, 2 * ps, PROT_READ | PROT_WRITE) == 0, "mprotect: %s",
			   strerror(errno));
		NSBT_CHECK(nosigbus_unprotect(w, 2 * ps) == 0, "nosigbus_unprotect");
		munmap(w, 4 * ps);
	}
	/* The files of the window on a disk, or on tmpfs (/dev/shm), where
	 * the default policy protects them too: records of several files. */
	snprintf(dir, sizeof(dir), "%s/nsb-unit-maps-XXXXXX", argc > 1 ? argv[1] : "/tmp");
	NSBT_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	nsbt_on_exit = cleanup;
	win = mmap(NULL, W * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NSBT_CHECK(win != MAP_FAILED, "mmap: %s", strerror(errno));
	w0 = (uintptr_t)win;
	w1 = w0 + W * ps;

	mfd = memfd_create("nsb unit", MFD_CLOEXEC);
	NSBT_CHECK(mfd >= 0 && ftruncate(mfd, (off_t)(8 * ps)) == 0, "memfd: %s", strerror(errno));
	nfd = file_in("new\nline 00400000-00401000 r-xp", nl_path, sizeof(nl_path), 4);
	dfd = file_in("deleted", del_path, sizeof(del_path), 4);
	ofd = file_in("offset", off_path, sizeof(off_path), 8);
	unlink(del_path);

	munmap(win + 1 * ps, 2 * ps);					/* hole 1-2 */
	place(win, 3, 4, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);	/* memfd */
	place(win, 7, 2, PROT_READ, MAP_PRIVATE, ofd, (off_t)(3 * ps));	/* offset */
	place(win, 9, 2, PROT_READ | PROT_WRITE, MAP_SHARED, nfd, 0);	/* newline */
	munmap(win + 11 * ps, ps);					/* hole 11 */
	place(win, 12, 3, PROT_READ, MAP_SHARED, dfd, ps);		/* deleted */
	place(win, 15, 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	place(win, 17, 1, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	place(win, 18, 2, PROT_READ | PROT_EXEC, MAP_PRIVATE, ofd, 0);
	munmap(win + 20 * ps, 10 * ps);					/* hole 20-29 */
	close(mfd);
	close(nfd);
	close(dfd);
	close(ofd);

	both(w0, w1, "the window");
	for (size_t lo = 0; lo < 32; lo++)
		for (size_t hi = lo + 1; hi <= 32; hi += 3)
			both(w0 + lo * ps, w0 + hi * ps, nsbt_fmt("pages %zu-%zu", lo, hi));
	both(w0 + 4 * ps + 1, w0 + 4 * ps + 2, "inside one page");
	both(w1, w1, "an empty span");
	/* Not above: x86's [vsyscall] page is the kernel's, not a VMA of the
	 * process, and only the file shows it (nothing there is ever
	 * recorded). */
	/* Under valgrind its own mappings change between the two passes. */
	if (getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "vgpreload"))
		printf("ok: the whole user address space: not compared under valgrind "
		       "(its own mappings change between the two passes)\n");
	else
		both(0, (uintptr_t)1 << 56, "the whole user address space");

	/* The records after a failed mprotect next to a protected mapping
	 * (pages 3-6 protected, 7-10 other files, 11 a hole): the same under
	 * both paths, and as the kernel shows them. */
	for (int forced = 0; forced < 2; forced++) {
		char *p = win + 3 * ps;
		size_t before;

		NSBT_CHECK(nosigbus_protect(p, 4 * ps) == 0, "nosigbus_protect: %s", strerror(errno));
		before = nsb_ranges_count();
		nsb_maps_force_read(forced);
		errno = 0;
		NSBT_CHECK(mprotect(p + 2 * ps, 9 * ps, PROT_READ) < 0 && errno == ENOMEM,
			   "mprotect over the hole at page 11 did not fail with ENOMEM: %s",
			   strerror(errno));
		if (nsb_ranges_count() != before + 1) {
			/* Where: every record, and the kernel's lines, of the window. */
			struct nsb_saved all;
			char cmd[64];

			nsb_saved_init(&all);
			nsb_ranges_lock();
			(void)nsb_ranges_collect(0, UINTPTR_MAX, &all);
			nsb_ranges_unlock();
			for (size_t i = 0; i < all.n; i++)
				fprintf(stderr, "record %#lx-%#lx (window pages %ld-%ld) prot %u\n",
					(unsigned long)all.r[i].start, (unsigned long)all.r[i].end,
					(long)((intptr_t)(all.r[i].start - w0) / (intptr_t)ps),
					(long)((intptr_t)(all.r[i].end - w0) / (intptr_t)ps),
					all.r[i].meta & NSB_META_PROT);
			nsb_saved_free(&all);
			snprintf(cmd, sizeof(cmd), "cat /proc/%d/maps >&2", (int)getpid());
			(void)!system(cmd);
		}
		NSBT_CHECK(nsb_ranges_count() == before + 1,
			   "%s: %zu records after the failed mprotect, %zu before (the protected "
			   "mapping split at page 5)", forced ? "read" : "query",
			   nsb_ranges_count(), before);
		nsb_maps_force_read(false);
		{
			struct nsb_saved recs;

			nsb_saved_init(&recs);
			nsb_ranges_lock();
			NSBT_CHECK(nsb_ranges_collect((uintptr_t)p, (uintptr_t)p + 4 * ps, &recs) == 0,
				   "collect: %s", strerror(errno));
			nsb_ranges_unlock();
			NSBT_CHECK(recs.n == 2 && recs.r[0].end == (uintptr_t)p + 2 * ps &&
				   (recs.r[0].meta & NSB_META_PROT) == (PROT_READ | PROT_WRITE) &&
				   recs.r[1].start == recs.r[0].end &&
				   recs.r[1].end == (uintptr_t)p + 4 * ps &&
				   (recs.r[1].meta & NSB_META_PROT) == PROT_READ,
				   "%s: the records are not read-write, then read-only from page 5",
				   forced ? "read" : "query");
			nsb_saved_free(&recs);
		}
		both(w0, w1, "after a failed mprotect");
		/* The query path keeps its descriptor of the maps while
		 * protected mappings exist: one, numbered high, close-on-exec. */
		if (!forced && queried_once()) {
			int fd = maps_descriptor();

			NSBT_CHECK(fd >= 1024 - 16 && (fcntl(fd, F_GETFD) & FD_CLOEXEC),
				   "the kept descriptor of the maps is %d (not high, or not "
				   "close-on-exec)", fd);
		}
		NSBT_CHECK(nosigbus_unprotect(p, 4 * ps) == 0, "unprotect: %s", strerror(errno));
		NSBT_CHECK(mprotect(p, 4 * ps, PROT_READ | PROT_WRITE) == 0, "mprotect: %s",
			   strerror(errno));
	}
	/* A failed mprotect, under each way of asking the kernel: query (where
	 * it has PROCMAP_QUERY), the probe (as a kernel without it), and the
	 * read alone.  From the hole at page 2 up over the memfd (pages 3-6):
	 * the kernel stops at the hole and changes nothing, which the probe
	 * tells alone (first, even where the kernel could be queried); from
	 * page 5 over the hole at 11: the memfd's pages 5-6 change, which only
	 * a query or the read tells. */
	for (int way = 0; way < 3; way++) {
		static const char *const ways[] = { "query", "probe", "read" };
		char *p = win + 3 * ps;

		for (int from_below = 1; from_below >= 0; from_below--) {
			char *at = from_below ? win + 2 * ps : p + 2 * ps;
			struct nsb_saved recs;
			int path;

			NSBT_CHECK(nosigbus_protect(p, 4 * ps) == 0, "nosigbus_protect: %s",
				   strerror(errno));
			nsb_maps_force_read(way > 0);
			nsb_maps_allow_probe(way < 2);
			errno = 0;
			NSBT_CHECK(mprotect(at, (from_below ? 6 : 9) * ps, PROT_READ) < 0 &&
				   errno == ENOMEM, "%s: mprotect over a hole did not fail with ENOMEM",
				   ways[way]);
			path = nsb_maps_last_path();
			nsb_maps_force_read(false);
			nsb_maps_allow_probe(true);
			if (way == 0 && !queried_once()) {
				/* Said above; the mapping as it was for the next. */
				NSBT_CHECK(nosigbus_unprotect(p, 4 * ps) == 0, "unprotect: %s",
					   strerror(errno));
				NSBT_CHECK(mprotect(p, 4 * ps, PROT_READ | PROT_WRITE) == 0,
					   "mprotect: %s", strerror(errno));
				continue;
			}
			NSBT_CHECK(path == (way < 2 && from_below ? 2 : way == 0 ? 1 : 0),
				   "%s, from %s: the last look at the kernel took path %d",
				   ways[way], from_below ? "below" : "the memfd", path);
			nsb_saved_init(&recs);
			nsb_ranges_lock();
			NSBT_CHECK(nsb_ranges_collect((uintptr_t)p, (uintptr_t)p + 4 * ps, &recs) == 0,
				   "collect: %s", strerror(errno));
			nsb_ranges_unlock();
			for (size_t i = 0; i < recs.n; i++) {
				int want = from_below || recs.r[i].start < (uintptr_t)p + 2 * ps
						   ? PROT_READ | PROT_WRITE : PROT_READ;

				NSBT_CHECK((int)(recs.r[i].meta & NSB_META_PROT) == want,
					   "%s, from %s: the record at page %zu says prot %u, the "
					   "kernel %d", ways[way], from_below ? "below" : "the memfd",
					   (size_t)((recs.r[i].start - w0) / ps),
					   recs.r[i].meta & NSB_META_PROT, want);
			}
			NSBT_CHECK(recs.n >= 1 && recs.r[0].start == (uintptr_t)p &&
				   recs.r[recs.n - 1].end == (uintptr_t)p + 4 * ps,
				   "%s: the records do not cover the memfd", ways[way]);
			nsb_saved_free(&recs);
			NSBT_CHECK(nosigbus_unprotect(p, 4 * ps) == 0, "unprotect: %s",
				   strerror(errno));
			NSBT_CHECK(mprotect(p, 4 * ps, PROT_READ | PROT_WRITE) == 0, "mprotect: %s",
				   strerror(errno));
		}
		printf("ok: a failed mprotect, %s: records as the kernel shows them\n", ways[way]);
	}
	/* No descriptor of the maps outlives the last protected mapping
	 * (libnosigbus(7), "What the library adds to a process"): the
	 * window's files, protected on tmpfs, unprotected first. */
	NSBT_CHECK(nosigbus_unprotect(win, W * ps) == 0, "unprotect the window: %s",
		   strerror(errno));
	NSBT_CHECK(maps_descriptor() < 0, "descriptor %d of the maps left open by the library "
		   "with no protected mapping left", maps_descriptor());
	/* A fork child: its own mapping shows through the query path. */
	{
		pid_t pid = fork();
		int status;

		NSBT_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			place(win, 22, 3, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			both(w0, w1, "a fork child's own mapping");
			_exit(0);
		}
		NSBT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
		nsbt_expect_exit(status, 0, "the fork child");
	}
	unnamed(win, w0, w1);
	cleanup();
	printf("ok: PROCMAP_QUERY and /proc/self/maps give the same VMAs\n");
	return 0;
}
