/* SPDX-License-Identifier: MIT */
/*
 * Recovery (issue 22, SPEC §5): nosigbus_refresh() and the resize of a
 * protected shared mapping show the file again in the pages the library
 * replaced, where the file covers them now.
 *
 * "shared": a client's pool.  8 pages of a file mapped MAP_SHARED; the
 * client truncates it to nothing; the compositor reads every page
 * (rescued) and writes into one of them; the client regrows the file to 6
 * pages with new contents.  nosigbus_refresh() over the pool returns 6,
 * and the 6 pages show the file (what was written into the zero page is
 * gone: it never reached the file); the 2 pages past the new end stay
 * replaced (reading them rescues nothing new).  /proc/self/maps shows the
 * file there again, and the pages are still protected: a second
 * truncation is rescued, and a second regrow and refresh work too.  With
 * the file's descriptor kept open by the program (O_RDWR: mapped from it
 * as it is), closed by the program (only the library's O_PATH descriptor
 * is left: the file is opened anew in a clone child), and kept only
 * O_RDONLY while the program holds a POSIX lock through it: the lock is
 * still held afterwards (closing any ordinary descriptor of a file in
 * this process would drop it).  Fill page, range and auto (re-executed).
 *
 * "private": a MAP_PRIVATE mapping keeps its zero pages and what was
 * written there: refresh returns 0.
 *
 * "locks": the lock, through mremap growth (wl_shm_pool.resize) instead
 * of refresh: the part mremap adds over a replaced last page is mapped
 * from the file, and the program's lock on the file survives it.  (Before
 * refresh.c the library opened /proc/self/fd/N and closed it in the
 * process, which dropped the lock: this fails there.)
 *
 * "dontfork": a page shown again keeps the mapping's MADV_DONTFORK: a fork
 * child does not have it.
 *
 * "move": mremap that moves a mapping without resizing it changes nothing
 * the program sees: a replaced page it wrote keeps what it wrote, even
 * where the file covers it again (the resize is the signal, SPEC §5).
 *
 * "zero": under NOSIGBUS_ERRORS=zero a page is replaced without asking the
 * file's size (it may be inside it: a write the file system refused), so
 * neither refresh nor a resize drops what the program wrote there.
 *
 * "batches": every other page of a 1 200-page mapping replaced (600 runs
 * of replaced pages, more than one batch of the library's work), all
 * shown again.
 *
 * "access": a file opened read-only stays not writable after refresh and
 * a resize; one opened for writing, mapped read-only, can still be made
 * writable.
 *
 * "reprotect": nosigbus_protect() over a range already protected, where a
 * page was replaced, keeps what the records know of it (the man page:
 * "records it once"): a compositor that protects its pool again after a
 * rescue still gets the file back from nosigbus_refresh() once the client
 * regrows it, and MADV_REMOVE over the pool still succeeds.  (The library
 * recorded the replaced page anew from the maps, as private anonymous
 * memory: refresh returned 0 and MADV_REMOVE failed with EINVAL.)
 *
 * "hugegrow": an mremap growth over a replaced last huge page of a
 * private hugetlbfs mapping is the file again (as with the kernel's
 * flag), and leaves the file's size alone: a writable mmap of a hugetlbfs
 * file grows the file to the mapping's end (the library's map of the
 * growth made an empty file 2 huge pages long).  Needs no free huge page
 * (MAP_NORESERVE, nothing faulted in from the file: every access is past
 * its end).
 *
 * "errors": EINVAL for an unaligned address and a zero or wrapping length;
 * unprotected and unmapped ranges return 0; errno is kept on success.
 *
 * Usage: core-refresh shared|private|locks|dontfork|move|zero|batches|errors|access|
 *        reprotect|hugegrow
 */
#include "core.h"

#define NPAGES 8
#define REGROWN 6

static size_t ps;

enum keep {
	KEEP_RDWR,	/* the program keeps an O_RDWR descriptor */
	KEEP_NONE,	/* it closed its descriptor (libwayland-server does) */
	KEEP_RDONLY,	/* it keeps an O_RDONLY one, with a lock through it */
};

static const char *const keep_names[] = {
	"the program's O_RDWR descriptor",
	"no descriptor of the program's",
	"an O_RDONLY descriptor with a POSIX lock",
};

/* A /dev/shm file of npages pages of the pattern, opened O_RDWR; its path
 * in path (unlinked by the caller). */
static int
shm_file(char *path, size_t len, size_t npages)
{
	int fd;

	nsbt_require_tmpfs();
	snprintf(path, len, "/dev/shm/core-refresh-%d-XXXXXX", (int)getpid());
	fd = mkostemp(path, O_CLOEXEC);
	NSBT_CHECK(fd >= 0, "mkostemp %s: %s", path, strerror(errno));
	nsbt_fill(fd, npages * ps);
	return fd;
}

/* Is the whole file write-locked by pid?  Asked from another process. */
static bool
locked_by(const char *path, pid_t pid)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	bool ok;

	NSBT_CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	NSBT_CHECK(fcntl(fd, F_GETLK, &fl) == 0, "F_GETLK: %s", strerror(errno));
	ok = fl.l_type != F_UNLCK && fl.l_pid == pid;
	close(fd);
	return ok;
}

static void
check_locked_fn(void *arg)
{
	const char *path = arg;

	_exit(locked_by(path, getppid()) ? 0 : 1);
}

static void
expect_locked(const char *path, const char *what)
{
	int status = nsbt_run(check_locked_fn, (void *)path);

	NSBT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		   "%s: the program's POSIX lock on %s is gone", what, path);
}

/*
 * The client: another process, since a close in this one (of any
 * descriptor of the file) would drop the program's locks on it.  Cuts the
 * file at path to cut bytes, then, if regrow, fills it with regrow bytes
 * of the pattern.
 */
struct client {
	const char *path;
	size_t cut, regrow;
};

static void
client_fn(void *arg)
{
	const struct client *c = arg;
	int fd = open(c->path, O_RDWR | O_CLOEXEC);

	NSBT_CHECK(fd >= 0, "open %s: %s", c->path, strerror(errno));
	if (c->regrow)
		nsbt_fill(fd, c->regrow);
	else
		core_truncate(fd, (off_t)c->cut);
}

static void
client(const char *path, size_t cut, size_t regrow)
{
	struct client c = { path, cut, regrow };

	nsbt_expect_exit(nsbt_run(client_fn, &c), 0, regrow ? "the client regrows its file"
							    : "the client cuts its file");
}

/* A read lock of the whole file through fd (O_RDONLY). */
static void
lock_file(int fd)
{
	struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET };

	NSBT_CHECK(fcntl(fd, F_SETLK, &fl) == 0, "F_SETLK: %s", strerror(errno));
}

/* A line of /proc/self/maps names the file: the VMA at p is the file's. */
static void
expect_file_vma(const volatile char *p, const char *name, const char *what)
{
	const char *line = core_maps_line((const void *)p);

	NSBT_CHECK(strstr(line, name) != NULL, "%s: the page at %p is not the file in "
		   "/proc/self/maps: %s", what, (const void *)p, line);
}

struct shared_case {
	enum keep keep;
};

static void
shared_child(void *arg)
{
	const struct shared_case *c = arg;
	const char *fill = getenv("NOSIGBUS_FILL") ? getenv("NOSIGBUS_FILL") : "default";
	char path[64], what[200];
	int fd, ro = -1;
	struct nosigbus_stats before;
	volatile char *p;
	long n;

	snprintf(what, sizeof(what), "refresh, %s, fill=%s", keep_names[c->keep], fill);
	fd = shm_file(path, sizeof(path), NPAGES);
	p = core_map(NULL, NPAGES * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	if (c->keep != KEEP_RDWR) {
		close(fd);
		fd = -1;
	}
	if (c->keep == KEEP_RDONLY) {
		ro = open(path, O_RDONLY | O_CLOEXEC);
		NSBT_CHECK(ro >= 0, "open %s: %s", path, strerror(errno));
		lock_file(ro);
	}
	for (int round = 0; round < 2; round++) {
		/* The client cuts its pool; the compositor reads it all. */
		client(path, 0, 0);
		before = core_stats();
		for (size_t i = 0; i < NPAGES; i++)
			NSBT_CHECK(p[i * ps + 3] == 0, "%s: page %zu after the cut", what, i);
		NSBT_CHECK(core_stats().rescues > before.rescues, "%s: nothing rescued", what);
		p[ps + 9] = 'w';
		/* It grows the file back, with new contents. */
		client(path, 0, REGROWN * ps);
		n = nosigbus_refresh((void *)p, NPAGES * ps);
		NSBT_CHECK(n == REGROWN, "%s: nosigbus_refresh returned %ld, expected %d", what, n,
			   REGROWN);
		core_expect_pattern((const void *)p, 0, REGROWN * ps, what);
		for (size_t i = 0; i < REGROWN; i++)
			expect_file_vma(p + i * ps, path + strlen("/dev/shm/"), what);
		/* Past the new end: still the replacement, no new rescue. */
		before = core_stats();
		for (size_t i = REGROWN; i < NPAGES; i++)
			NSBT_CHECK(p[i * ps] == 0, "%s: page %zu past the new end", what, i);
		NSBT_CHECK(core_stats().rescues == before.rescues,
			   "%s: a page past the new end was rescued again", what);
		/* Nothing left to show. */
		n = nosigbus_refresh((void *)p, NPAGES * ps);
		NSBT_CHECK(n == 0, "%s: a second refresh returned %ld", what, n);
		if (ro >= 0)
			expect_locked(path, what);
	}
	printf("ok: %s: the regrown file is shown again, twice, and stays protected\n", what);
	/* The shared pages are the file: a write reaches it. */
	p[2 * ps + 1] = 'F';
	if (ro >= 0) {
		char b = 0;

		NSBT_CHECK(pread(ro, &b, 1, (off_t)(2 * ps + 1)) == 1, "pread %s: %s", path,
			   strerror(errno));
		NSBT_CHECK(b == 'F', "%s: a write into a page shown again did not reach the file",
			   what);
	}
	if (fd >= 0)
		close(fd);
	if (ro >= 0)
		close(ro);
	unlink(path);
}

static void
shared(void)
{
	for (int k = KEEP_RDWR; k <= KEEP_RDONLY; k++) {
		struct shared_case c = { (enum keep)k };
		char err[4096];
		int status = core_run_watched(shared_child, &c, nsbt_scaled(45), NULL, "refresh", err,
					      sizeof(err));

		core_expect_quiet(err, keep_names[k]);
		nsbt_expect_exit(status, 0, nsbt_fmt("refresh with %s", keep_names[k]));
	}
}

static void
private_child(void *arg)
{
	int fd = nsbt_file(NSBT_MEMFD, NPAGES * ps);
	volatile char *p = core_map(NULL, NPAGES * ps, CORE_PROT_RW,
				    MAP_PRIVATE | MAP_NOSIGBUS, fd, 0);
	long n;

	(void)arg;
	core_truncate(fd, 0);
	for (size_t i = 0; i < NPAGES; i++)
		NSBT_CHECK(p[i * ps] == 0, "page %zu after the cut", i);
	p[ps + 9] = 'w';
	nsbt_fill(fd, NPAGES * ps);
	n = nosigbus_refresh((void *)p, NPAGES * ps);
	NSBT_CHECK(n == 0, "nosigbus_refresh of a private mapping returned %ld", n);
	NSBT_CHECK(p[ps + 9] == 'w', "a private mapping lost what the program wrote");
	NSBT_CHECK(p[0] == 0, "a private mapping's replaced page shows the file");
	printf("ok: a private mapping keeps its replaced pages\n");
	close(fd);
}

/* The lock through mremap growth over a replaced last page. */
static void
locks_child(void *arg)
{
	char path[64];
	int fd, ro;
	volatile char *p, *q;

	(void)arg;
	fd = shm_file(path, sizeof(path), 4);
	p = core_map(NULL, 4 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	close(fd);
	ro = open(path, O_RDONLY | O_CLOEXEC);
	NSBT_CHECK(ro >= 0, "open %s: %s", path, strerror(errno));
	lock_file(ro);
	client(path, 3 * ps, 0);
	NSBT_CHECK(p[3 * ps] == 0, "the last page after the cut");
	client(path, 0, 8 * ps);
	expect_locked(path, "before mremap");
	q = mremap((void *)p, 4 * ps, 8 * ps, MREMAP_MAYMOVE);
	NSBT_CHECK(q != MAP_FAILED, "mremap: %s", strerror(errno));
	expect_locked(path, "mremap growth over a replaced last page");
	core_expect_pattern((const void *)q, 0, 8 * ps, "the pool after mremap");
	printf("ok: mremap growth shows the file and keeps the program's lock\n");
	close(ro);
	unlink(path);
}

static void
dontfork_probe(void *arg)
{
	_exit(core_page_mapped(arg) ? 1 : 0);
}

static void
dontfork_child(void *arg)
{
	int fd = nsbt_file(NSBT_MEMFD, 2 * ps);
	volatile char *p = core_map(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	int status;

	(void)arg;
	NSBT_CHECK(madvise((void *)p, 2 * ps, MADV_DONTFORK) == 0, "madvise: %s",
		   strerror(errno));
	core_truncate(fd, 0);
	NSBT_CHECK(p[ps] == 0, "page 1 after the cut");
	nsbt_fill(fd, 2 * ps);
	NSBT_CHECK(nosigbus_refresh((void *)p, 2 * ps) >= 1, "nothing shown again");
	core_expect_pattern((const void *)(p + ps), ps, ps, "page 1 shown again");
	status = nsbt_run(dontfork_probe, (void *)(p + ps));
	NSBT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		   "a fork child has a MADV_DONTFORK page that was shown again (%s)",
		   nsbt_status_str(status));
	printf("ok: a page shown again keeps MADV_DONTFORK\n");
	close(fd);
}

/* A page replaced and written, the file regrown over it: a move (same
 * size), or (zero) a refresh and a resize, keep what was written. */
static void
kept_child(void *arg)
{
	bool zero = arg != NULL;
	int fd = nsbt_file(NSBT_MEMFD, ps);
	volatile char *p = core_map(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	char *dest = core_map(NULL, 4 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	volatile char *q;

	NSBT_CHECK(p[ps] == 0, "page 1, past the end");
	p[ps + 1] = 'w';
	nsbt_fill(fd, 2 * ps);
	if (zero)
		NSBT_CHECK(nosigbus_refresh((void *)p, 2 * ps) == 0,
			   "NOSIGBUS_ERRORS=zero: refresh showed a page again");
	q = mremap((void *)p, 2 * ps, zero ? 3 * ps : 2 * ps, MREMAP_MAYMOVE | MREMAP_FIXED, dest);
	NSBT_CHECK(q != MAP_FAILED, "mremap: %s", strerror(errno));
	NSBT_CHECK(q[ps + 1] == 'w', "%s: the page the program wrote reads %#x",
		   zero ? "NOSIGBUS_ERRORS=zero, a resize" : "a move without a resize",
		   (unsigned)(unsigned char)q[ps + 1]);
	core_expect_pattern((const void *)q, 0, ps, "page 0, never replaced");
	printf("ok: %s keeps what the program wrote into a replaced page\n",
	       zero ? "NOSIGBUS_ERRORS=zero" : "a move without a resize");
	close(fd);
}

static void
batches_child(void *arg)
{
	const size_t n = 1200;
	int fd = nsbt_file(NSBT_MEMFD, n * ps);
	volatile char *p = core_map(NULL, n * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	long got;

	(void)arg;
	core_truncate(fd, 0);
	for (size_t i = 0; i < n; i += 2)
		NSBT_CHECK(p[i * ps] == 0, "page %zu after the cut", i);
	nsbt_fill(fd, n * ps);
	got = nosigbus_refresh((void *)p, n * ps);
	NSBT_CHECK(got == (long)(n / 2), "nosigbus_refresh returned %ld, expected %zu", got, n / 2);
	core_expect_pattern((const void *)p, 0, n * ps, "the mapping shown again");
	printf("ok: %zu runs of replaced pages shown again\n", n / 2);
	close(fd);
}

/*
 * The access mode the mapping was made with, after refresh and after a
 * resize: a file opened O_RDONLY and mapped MAP_SHARED | PROT_READ (its
 * descriptor closed) stays not writable (mprotect(PROT_WRITE) EACCES, as
 * the kernel answers; the library opened it O_RDWR to map it again, and
 * the program's writes reached the file), and one opened O_RDWR but
 * mapped PROT_READ can still be made writable.
 */
static void
access_child(void *arg)
{
	bool rdwr = arg != NULL;
	const char *what = rdwr ? "opened O_RDWR, mapped PROT_READ"
				: "opened O_RDONLY, mapped PROT_READ";
	char path[64];
	int fd = shm_file(path, sizeof(path), 2), ro;
	char *p;

	ro = open(path, rdwr ? O_RDWR : O_RDONLY);
	NSBT_CHECK(ro >= 0, "open %s: %s", path, strerror(errno));
	p = core_map(NULL, 2 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, ro, 0);
	close(ro);
	core_truncate(fd, 0);
	(void)*(volatile char *)p;	/* rescued */
	(void)*(volatile char *)(p + ps);
	core_truncate(fd, (off_t)(2 * ps));
	for (int how = 0; how < 2; how++) {
		if (how == 0) {
			NSBT_CHECK(nosigbus_refresh(p, 2 * ps) >= 1, "%s: refresh showed nothing", what);
		} else {
			p = mremap(p, 2 * ps, 3 * ps, MREMAP_MAYMOVE);
			NSBT_CHECK(p != MAP_FAILED, "mremap: %s", strerror(errno));
		}
		errno = 0;
		for (size_t i = 0; i < 2; i++) {
			int r = mprotect(p + i * ps, ps, PROT_READ | PROT_WRITE);

			NSBT_CHECK(rdwr ? r == 0 : r == -1 && errno == EACCES,
				   "%s, after %s: mprotect(PROT_WRITE) of page %zu: %s", what,
				   how ? "a resize" : "refresh", i, r == 0 ? "allowed" : strerror(errno));
			if (r == 0)
				(void)mprotect(p + i * ps, ps, PROT_READ);
		}
	}
	unlink(path);
	close(fd);
	printf("ok: %s: the access mode of the mapping, after refresh and a resize\n", what);
}

static void
reprotect_child(void *arg)
{
	const char *what = "protected again after a rescue";
	int fd = nsbt_file(NSBT_MEMFD, NPAGES * ps);
	volatile char *p = core_map(NULL, NPAGES * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	long n;

	(void)arg;
	core_truncate(fd, 0);
	for (size_t i = 0; i < NPAGES; i++)
		NSBT_CHECK(p[i * ps] == 0, "%s: page %zu after the cut", what, i);
	NSBT_CHECK(core_stats().pages >= NPAGES, "%s: not every page was replaced", what);
	NSBT_CHECK(nosigbus_protect((void *)p, NPAGES * ps) == 0, "nosigbus_protect: %s",
		   strerror(errno));
	NSBT_CHECK(madvise((void *)p, NPAGES * ps, MADV_REMOVE) == 0,
		   "%s: MADV_REMOVE over the pool: %s", what, strerror(errno));
	nsbt_fill(fd, REGROWN * ps);
	n = nosigbus_refresh((void *)p, NPAGES * ps);
	NSBT_CHECK(n == REGROWN, "%s: nosigbus_refresh returned %ld, expected %d", what, n, REGROWN);
	core_expect_pattern((const void *)p, 0, REGROWN * ps, what);
	printf("ok: %s: MADV_REMOVE works and the regrown file is shown again\n", what);
	close(fd);
}

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 4U
#endif

static void
hugegrow_child(void *arg)
{
	const char *what = "an mremap growth of a hugetlbfs mapping";
	size_t hs = nsbt_huge_page_size();
	int fd = hs ? memfd_create("core-refresh-huge", MFD_HUGETLB | MFD_CLOEXEC) : -1;
	char *room;
	volatile char *p;
	struct stat st;

	(void)arg;
	if (fd < 0)
		nsbt_skip("no hugetlbfs memfd here (%s)", hs ? strerror(errno) : "no huge page size");
	room = core_free_range(4 * hs);
	room = (char *)(((uintptr_t)room + hs - 1) & ~(uintptr_t)(hs - 1));
	/* Mapped without write, which would make the file a huge page long,
	 * then made writable: the mapping the library grows is writable. */
	p = core_map(room, hs, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE | MAP_NOSIGBUS,
		     fd, 0);
	NSBT_CHECK(p[5] == 0, "%s: the read past the end", what);
	NSBT_CHECK(core_stats().rescues == 1, "%s: the read past the end was not rescued", what);
	NSBT_CHECK(mprotect((void *)p, hs, CORE_PROT_RW) == 0, "mprotect: %s", strerror(errno));
	NSBT_CHECK(mremap((void *)p, hs, 2 * hs, 0) == p, "%s: mremap: %s", what, strerror(errno));
	NSBT_CHECK(fstat(fd, &st) == 0 && st.st_size == 0,
		   "%s: the empty file is %lld bytes long now", what, (long long)st.st_size);
	expect_file_vma(p + hs, "core-refresh-huge", what);
	NSBT_CHECK(p[hs + 7] == 0, "%s: the read of the growth", what);
	p[hs + 7] = 'x';
	NSBT_CHECK(fstat(fd, &st) == 0 && st.st_size == 0,
		   "%s: after a write the empty file is %lld bytes long", what, (long long)st.st_size);
	printf("ok: %s: the growth is the file again, and the file keeps its size\n", what);
	close(fd);
}

static void
errors(void)
{
	char *free_range = core_free_range(4 * ps);
	int fd = nsbt_file(NSBT_MEMFD, ps);
	char *anon = core_map(NULL, ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	errno = 0;
	NSBT_CHECK(nosigbus_refresh(anon + 1, ps) == -1 && errno == EINVAL, "unaligned: %s",
		   strerror(errno));
	errno = 0;
	NSBT_CHECK(nosigbus_refresh(anon, 0) == -1 && errno == EINVAL, "len 0: %s",
		   strerror(errno));
	errno = 0;
	NSBT_CHECK(nosigbus_refresh(anon, SIZE_MAX - ps) == -1 && errno == EINVAL,
		   "wrapping length: %s", strerror(errno));
	errno = ENOTTY;
	NSBT_CHECK(nosigbus_refresh(anon, ps) == 0 && errno == ENOTTY,
		   "an unprotected mapping: errno %s", strerror(errno));
	NSBT_CHECK(nosigbus_refresh(free_range, 4 * ps) == 0, "an unmapped range");
	printf("ok: refresh: EINVAL for bad arguments, 0 where there is nothing to show\n");
	close(fd);
}

int
main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "shared";

	ps = nsbt_page();
	core_require_library();
	if (strcmp(what, "shared-one") == 0) {
		shared();
	} else if (strcmp(what, "shared") == 0) {
		core_reexec_each_fill("shared-one", "refresh");
	} else if (strcmp(what, "private") == 0) {
		nsbt_expect_exit(nsbt_run(private_child, NULL), 0, "refresh of a private mapping");
	} else if (strcmp(what, "locks") == 0) {
		nsbt_expect_exit(nsbt_run(locks_child, NULL), 0, "mremap growth with a lock");
	} else if (strcmp(what, "dontfork") == 0) {
		nsbt_expect_exit(nsbt_run(dontfork_child, NULL), 0, "refresh and MADV_DONTFORK");
	} else if (strcmp(what, "move") == 0) {
		nsbt_expect_exit(nsbt_run(kept_child, NULL), 0, "a move without a resize");
	} else if (strcmp(what, "zero") == 0) {
		core_setenv_reexec(argv, "NOSIGBUS_ERRORS", "zero");
		nsbt_expect_exit(nsbt_run(kept_child, (void *)1), 0, "NOSIGBUS_ERRORS=zero");
	} else if (strcmp(what, "batches") == 0) {
		core_setenv_reexec(argv, "NOSIGBUS_FILL", "page");
		nsbt_expect_exit(nsbt_run(batches_child, NULL), 0, "refresh in batches");
	} else if (strcmp(what, "reprotect") == 0) {
		nsbt_expect_exit(nsbt_run(reprotect_child, NULL), 0, "protected again");
	} else if (strcmp(what, "hugegrow") == 0) {
		nsbt_expect_exit(nsbt_run(hugegrow_child, NULL), 0, "a hugetlbfs growth");
	} else if (strcmp(what, "errors") == 0) {
		errors();
	} else if (strcmp(what, "access") == 0) {
		nsbt_expect_exit(nsbt_run(access_child, NULL), 0, "a file opened read-only");
		nsbt_expect_exit(nsbt_run(access_child, (void *)1), 0, "a file opened for writing");
	} else {
		nsbt_fail("usage: %s shared|private|locks|dontfork|move|zero|batches|errors|access|"
			  "reprotect|hugegrow", argv[0]);
	}
	return 0;
}
