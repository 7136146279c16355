/* SPDX-License-Identifier: MIT */
/*
 * Adversarial: calls over several protected records and holes, which the
 * kernel refuses, or carries out part-way, with ranges that start and end
 * in the middle of records (mprotect, madvise, munmap, mremap).  After
 * every call, whether it succeeded or not, the library's records must be
 * exactly what /proc/self/smaps shows: a page is protected exactly when
 * its VMA is one of the protected mappings (a file by its inode, the
 * anonymous piece by a mark written into it through /proc/self/mem), at
 * the VMA's protection, and not in a fork child where it is MADV_DONTFORK.
 *
 * The window (every file empty, so each of its pages is past the end):
 *   0-3  A  memfd, MAP_SHARED, protected
 *   4       hole
 *   5       anonymous PROT_NONE guard page, unprotected
 *   6-8  B  memfd, MAP_PRIVATE, protected
 *   9    N  anonymous, protected (MAP_NOSIGBUS)
 *  10-12 C  memfd opened read-only, MAP_SHARED PROT_READ, protected
 *           (mprotect to PROT_WRITE: EACCES)
 *  13       hole
 *  14-15 D  memfd, MAP_SHARED, protected
 *  16    U  memfd, MAP_SHARED, unprotected (NOSIGBUS_POLICY=flag)
 *  17-19 E  memfd at file offset 3 pages, MAP_SHARED, protected
 *  20-23    hole
 * then, where the machine has huge pages, right after (huge page aligned):
 *   H  a hugetlbfs memfd of two huge pages, MAP_SHARED | MAP_NORESERVE,
 *      protected (its pages past the end too: none is ever allocated).
 *
 * Probes (each in a fork child): a small page gets an empty memfd mapped
 * over it with a raw mmap(2), which the library does not see, and is
 * read; a huge page gets a raw mprotect(PROT_READ) and is read.  Rescued:
 * the child reports the protection /proc/self/maps shows for the replaced
 * page (a SIGSEGV handler reports it where the record's protection does
 * not allow the read); not rescued: SIGBUS.
 *
 * Modes (argv[1]): a seed; the test runs seeds 1..N of random calls.
 */
#include <inttypes.h>
#include <sys/syscall.h>

#include "core.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 4U
#endif

#define NSMALL 24
#define MAGIC 0x4e5342414e4f4e31ull	/* the anonymous piece's mark */

static size_t ps, hs;
static char *win;		/* NSMALL small pages, then 2 huge pages (if hs) */
static char *hbase;		/* win + NSMALL * ps, huge page aligned */
static size_t win_len;
static uint64_t ino_prot[8];
static size_t nino;
static int memfd_self = -1;	/* /proc/self/mem */

struct vma {
	uintptr_t lo, hi;
	int prot;
	uint64_t ino;
	bool anon, dc, huge;
};

static struct vma vmas[256];
static size_t nvmas;

static void
read_smaps(void)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	struct vma *cur = NULL;

	NSBT_CHECK(f, "smaps: %s", strerror(errno));
	nvmas = 0;
	while (fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;
		char perm[5], dev[16];
		unsigned long long off, ino;
		int n = 0;

		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %llx %15s %llu %n", &lo, &hi, perm,
			   &off, dev, &ino, &n) >= 6 && strchr(line, '-') < strchr(line, ' ')) {
			cur = NULL;
			if (hi <= (uintptr_t)win || lo >= (uintptr_t)win + win_len)
				continue;
			NSBT_CHECK(nvmas < 256, "too many VMAs");
			cur = &vmas[nvmas++];
			memset(cur, 0, sizeof(*cur));
			cur->lo = lo;
			cur->hi = hi;
			cur->prot = (perm[0] == 'r' ? PROT_READ : 0) | (perm[1] == 'w' ? PROT_WRITE : 0) |
				    (perm[2] == 'x' ? PROT_EXEC : 0);
			cur->ino = ino;
			cur->anon = ino == 0;
			continue;
		}
		if (!cur)
			continue;
		if (strncmp(line, "VmFlags:", 8) == 0)
			cur->dc = strstr(line, " dc") != NULL;
		if (strncmp(line, "KernelPageSize:", 15) == 0)
			cur->huge = strtoull(line + 15, NULL, 10) * 1024 > ps;
	}
	fclose(f);
}

static const struct vma *
vma_at(uintptr_t a)
{
	for (size_t i = 0; i < nvmas; i++)
		if (vmas[i].lo <= a && a < vmas[i].hi)
			return &vmas[i];
	return NULL;
}

static uint64_t
mark_at(uintptr_t a)
{
	uint64_t v = 0;

	if (pread(memfd_self, &v, sizeof(v), (off_t)a) != (ssize_t)sizeof(v))
		return 0;
	return v;
}

static void
put_mark(uintptr_t a)
{
	uint64_t v = MAGIC;

	NSBT_CHECK(pwrite(memfd_self, &v, sizeof(v), (off_t)a) == (ssize_t)sizeof(v),
		   "pwrite /proc/self/mem at %#" PRIxPTR ": %s", a, strerror(errno));
}

/* Should the page at a be protected (in the parent)?  -1: no; else the prot. */
static int
expected(uintptr_t a)
{
	const struct vma *v = vma_at(a);

	if (!v)
		return -1;
	if (v->anon)
		return mark_at(a) == MAGIC ? v->prot : -1;
	for (size_t i = 0; i < nino; i++)
		if (ino_prot[i] == v->ino)
			return v->prot;
	return -1;
}

static volatile uintptr_t probe_at;

static int
child_prot(uintptr_t a)
{
	char buf[8192];
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	ssize_t n, len = 0;

	if (fd < 0)
		return -1;
	while (len < (ssize_t)sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - (size_t)len)) > 0)
		len += n;
	close(fd);
	buf[len] = 0;
	for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		uintptr_t lo = strtoull(l, NULL, 16), hi = strtoull(strchr(l, '-') + 1, NULL, 16);
		char *perm = strchr(l, ' ') + 1;

		if (lo <= a && a < hi)
			return (perm[0] == 'r' ? PROT_READ : 0) | (perm[1] == 'w' ? PROT_WRITE : 0) |
			       (perm[2] == 'x' ? PROT_EXEC : 0);
	}
	return -1;
}

static void
on_segv(int sig)
{
	int p = child_prot(probe_at);

	(void)sig;
	_exit(p < 0 ? 5 : 10 + p);
}

struct probe {
	uintptr_t a;
	bool huge;
};

static void
probe_fn(void *arg)
{
	struct probe *pr = arg;
	struct sigaction sa;

	core_no_core();
	probe_at = pr->a;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_segv;
	sigaction(SIGSEGV, &sa, NULL);
	if (pr->huge) {
		if (syscall(SYS_mprotect, pr->a, hs, PROT_READ) != 0)
			_exit(4);
	} else {
		int fd = memfd_create("atk3-probe", MFD_CLOEXEC);

		if (fd < 0 || (void *)syscall(SYS_mmap, pr->a, ps, PROT_READ, MAP_SHARED | MAP_FIXED,
					      fd, 0) != (void *)pr->a)
			_exit(2);
	}
	(void)*(volatile char *)pr->a;
	{
		int p = child_prot(pr->a);

		_exit(p < 0 ? 5 : 10 + p);
	}
}

static char history[64][160];
static unsigned nhist;

static void __attribute__((format(printf, 1, 2)))
say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(history[nhist % 64], sizeof(history[0]), fmt, ap);
	va_end(ap);
	if (getenv("ATK3_VERBOSE"))
		fprintf(stderr, "%s\n", history[nhist % 64]);
	nhist++;
}

static void __attribute__((noreturn, format(printf, 1, 2)))
fail_with_history(const char *fmt, ...)
{
	va_list ap;
	FILE *f;
	char line[512];

	fprintf(stderr, "history (last calls, oldest first):\n");
	for (unsigned i = nhist > 64 ? nhist - 64 : 0; i < nhist; i++)
		fprintf(stderr, "  %s\n", history[i % 64]);
	fprintf(stderr, "window %p..%p, maps:\n", (void *)win, (void *)(win + win_len));
	f = fopen("/proc/self/maps", "re");
	while (f && fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;

		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 &&
		    hi > (uintptr_t)win && lo < (uintptr_t)win + win_len)
			fprintf(stderr, "  %s", line);
	}
	if (f)
		fclose(f);
	va_start(ap, fmt);
	fputs("FAIL: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static void
check_page(uintptr_t a, bool huge)
{
	const struct vma *v = vma_at(a);
	struct probe pr = { a, huge };
	int want = expected(a), status, got;

	if (v && v->dc)
		want = huge ? -2 : -1;	/* not in a fork child */
	status = nsbt_run(probe_fn, &pr);
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS)
		got = -1;
	else if (WIFEXITED(status) && WEXITSTATUS(status) >= 10)
		got = WEXITSTATUS(status) - 10;
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 4)
		got = -2;
	else
		fail_with_history("page %#" PRIxPTR " (%s %zu): probe %s", a,
				  huge ? "huge page" : "page",
				  huge ? (size_t)(a - (uintptr_t)hbase) / hs : (size_t)(a - (uintptr_t)win) / ps,
				  nsbt_status_str(status));
	if (got != want)
		fail_with_history("page %#" PRIxPTR " (%s %zu): record %s (prot %d), the kernel shows "
				  "%s (prot %d)", a, huge ? "huge page" : "page",
				  huge ? (size_t)(a - (uintptr_t)hbase) / hs
				       : (size_t)(a - (uintptr_t)win) / ps,
				  got >= 0 ? "present" : "absent", got,
				  want >= 0 ? "a protected mapping" : "no protected mapping", want);
}

static void
check_all(void)
{
	read_smaps();
	for (size_t i = 0; i < NSMALL; i++)
		check_page((uintptr_t)win + i * ps, false);
	if (!hs)
		return;
	/* The huge region: huge pages of H by a raw mprotect, anything else
	 * mapped there at its first and last page. */
	for (size_t i = 0; i < nvmas; i++) {
		const struct vma *v = &vmas[i];

		if (v->hi <= (uintptr_t)hbase)
			continue;
		if (v->huge) {
			for (uintptr_t a = v->lo; a < v->hi; a += hs)
				check_page(a, true);
		} else {
			uintptr_t lo = v->lo < (uintptr_t)hbase ? (uintptr_t)hbase : v->lo;

			check_page(lo, false);
			if (v->hi - ps != lo)
				check_page(v->hi - ps, false);
		}
	}
}

static int
mfd(void)
{
	int fd = memfd_create("atk3", MFD_CLOEXEC);
	struct stat st;

	NSBT_CHECK(fd >= 0 && fstat(fd, &st) == 0, "memfd: %s", strerror(errno));
	return fd;
}

static uint64_t
ino_of(int fd)
{
	struct stat st;

	NSBT_CHECK(fstat(fd, &st) == 0, "fstat: %s", strerror(errno));
	return (uint64_t)st.st_ino;
}

static void
place(size_t page, size_t n, int prot, int flags, int fd, off_t off, bool prot_rec)
{
	core_map(win + page * ps, n * ps, prot, flags | MAP_FIXED | (prot_rec ? MAP_NOSIGBUS : 0), fd, off);
	if (prot_rec && fd >= 0)
		ino_prot[nino++] = ino_of(fd);
}

static void
build(void)
{
	int a = mfd(), b = mfd(), c = mfd(), d = mfd(), u = mfd(), e = mfd(), cro;
	char path[64];

	nino = 0;
	NSBT_CHECK(munmap(win, win_len) == 0, "munmap: %s", strerror(errno));
	place(0, 4, CORE_PROT_RW, MAP_SHARED, a, 0, true);
	place(5, 1, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, false);
	place(6, 3, CORE_PROT_RW, MAP_PRIVATE, b, 0, true);
	place(9, 1, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, true);
	put_mark((uintptr_t)win + 9 * ps);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", c);
	cro = open(path, O_RDONLY | O_CLOEXEC);
	NSBT_CHECK(cro >= 0, "open %s: %s", path, strerror(errno));
	place(10, 3, PROT_READ, MAP_SHARED, cro, 0, true);
	place(14, 2, CORE_PROT_RW, MAP_SHARED, d, 0, true);
	place(16, 1, CORE_PROT_RW, MAP_SHARED, u, 0, false);
	place(17, 3, CORE_PROT_RW, MAP_SHARED, e, (off_t)(3 * ps), true);
	if (hs) {
		int h = memfd_create("atk3-huge", MFD_CLOEXEC | MFD_HUGETLB);

		NSBT_CHECK(h >= 0, "memfd_create(MFD_HUGETLB): %s", strerror(errno));
		core_map(hbase, 2 * hs, CORE_PROT_RW, MAP_SHARED | MAP_NORESERVE | MAP_FIXED | MAP_NOSIGBUS,
			 h, 0);
		core_truncate(h, 0);
		ino_prot[nino++] = ino_of(h);
		close(h);
	}
	close(a);
	close(b);
	close(c);
	close(cro);
	close(d);
	close(u);
	close(e);
}

/* The anonymous piece's pages now (marked, anonymous). */
static void
anon_pages(bool *was)
{
	read_smaps();
	for (size_t i = 0; i < NSMALL; i++) {
		const struct vma *v = vma_at((uintptr_t)win + i * ps);

		was[i] = v && v->anon && mark_at((uintptr_t)win + i * ps) == MAGIC;
	}
}

/* After a successful mremap of [a, a + len) to q, new length nlen: the
 * anonymous piece's pages where they went, and a growth of it (the same
 * mapping to the kernel) marked. */
static void
mark_moved(uintptr_t a, size_t len, uintptr_t q, size_t nlen, const bool *was)
{
	size_t l = (len + ps - 1) / ps * ps, nl = (nlen + ps - 1) / ps * ps;

	read_smaps();
	for (size_t off = 0; off < nl; off += ps) {
		uintptr_t from = a + (off < l ? off : 0), to = q + off;
		size_t i = (from - (uintptr_t)win) / ps;
		const struct vma *v = vma_at(to);

		if (from < (uintptr_t)win || i >= NSMALL || !was[i])
			continue;
		if (v && v->anon && !v->huge)
			put_mark(to);
	}
}

static const int prots[] = { PROT_NONE, PROT_READ, PROT_READ | PROT_WRITE, PROT_READ | PROT_EXEC,
			      PROT_WRITE };
static const int advices[] = { MADV_DONTNEED, MADV_DONTFORK, MADV_DOFORK, MADV_WIPEONFORK,
			       MADV_KEEPONFORK, MADV_NORMAL, MADV_REMOVE, MADV_DONTDUMP,
			       MADV_FREE, MADV_COLD, MADV_PAGEOUT, MADV_WILLNEED };

/* A random address in the window: mostly page aligned, in small pages
 * or at huge page boundaries of H. */
static uintptr_t
rand_addr(uint64_t *s)
{
	uint64_t r = core_rand(s);

	if (hs && r % 5 == 0)
		return (uintptr_t)hbase + (r / 5 % 3) * hs - (r / 15 % 2 ? 0 : ps * (r / 30 % 4));
	return (uintptr_t)win + (r / 5 % (NSMALL + 1)) * ps;
}

static void
one_call(uint64_t *s, unsigned step)
{
	uintptr_t a = rand_addr(s), b = rand_addr(s), t;
	size_t len;
	int kind = (int)(core_rand(s) % 10), ret, err;
	bool odd = core_rand(s) % 4 == 0;
	bool anon_before[NSMALL];

	if (b < a) {
		t = a;
		a = b;
		b = t;
	}
	len = b - a + (odd ? ps / 3 : 0);
	if (len == 0)
		len = ps;
	anon_pages(anon_before);
	errno = 0;
	if (kind < 4) {
		int prot = prots[core_rand(s) % 5];

		ret = mprotect((void *)a, len, prot);
		err = errno;
		say("%u: mprotect(win+%#lx, %#zx, %d) = %d %s", step, (unsigned long)(a - (uintptr_t)win),
		    len, prot, ret, ret ? strerror(err) : "");
	} else if (kind < 7) {
		int adv = advices[core_rand(s) % (sizeof(advices) / sizeof(advices[0]))];

		ret = madvise((void *)a, len, adv);
		err = errno;
		say("%u: madvise(win+%#lx, %#zx, %d) = %d %s", step, (unsigned long)(a - (uintptr_t)win),
		    len, adv, ret, ret ? strerror(err) : "");
		/* The anonymous piece's content may be gone: marked again
		 * where it was. */
		if (adv == MADV_DONTNEED || adv == MADV_FREE || adv == MADV_REMOVE ||
		    adv == MADV_WIPEONFORK)
			for (size_t i = 0; i < NSMALL; i++)
				if (anon_before[i])
					put_mark((uintptr_t)win + i * ps);
	} else if (kind < 8) {
		ret = munmap((void *)a, len);
		err = errno;
		say("%u: munmap(win+%#lx, %#zx) = %d %s", step, (unsigned long)(a - (uintptr_t)win), len,
		    ret, ret ? strerror(err) : "");
	} else {
		uintptr_t dest = rand_addr(s);
		size_t nlen = (core_rand(s) % 5) * ps + (odd ? 100 : 0);
		int how = (int)(core_rand(s) % 3);
		void *q;

		if (nlen == 0)
			nlen = len;
		if (how == 0)
			q = mremap((void *)a, len, nlen, 0);
		else if (how == 1)
			q = mremap((void *)a, len, nlen, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)dest);
		else
			q = mremap((void *)a, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)dest);
		err = errno;
		say("%u: mremap(win+%#lx, %#zx, %#zx, %s, win+%#lx) = %s", step,
		    (unsigned long)(a - (uintptr_t)win), len, how == 2 ? len : nlen,
		    how == 0 ? "0" : "MAYMOVE|FIXED", (unsigned long)(dest - (uintptr_t)win),
		    q == MAP_FAILED ? strerror(err) : "ok");
		if (q != MAP_FAILED)
			mark_moved(a, len, (uintptr_t)q, how == 2 ? len : nlen, anon_before);
	}
}

struct run {
	uint64_t seed;
	unsigned steps;
};

static void
run_seed(void *arg)
{
	struct run *r = arg;
	uint64_t s = r->seed * 0x9e3779b97f4a7c15ull + 1;

	memfd_self = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	NSBT_CHECK(memfd_self >= 0, "/proc/self/mem: %s", strerror(errno));
	build();
	check_all();
	for (unsigned i = 0; i < r->steps; i++) {
		if (i % 20 == 19) {
			build();
			say("%u: window built again", i);
		}
		one_call(&s, i);
		check_all();
	}
}

/* ---- the two calls the random runs found ---------------------------- */

/*
 * An mremap whose source begins in a hole below a protected hugetlbfs
 * mapping, moved onto itself: the kernel refuses (EINVAL: the ranges
 * overlap) and changes nothing.  The library rounded the destination's
 * length by the huge page of the source's record; the failed move's
 * resync then cut the records of the rounded destination, which it had
 * not listed (only those of the length asked for): the first huge page
 * lost its protection.
 */
static void
mremap_dest_child(void *arg)
{
	uintptr_t old = (uintptr_t)hbase - 2 * ps;
	void *q;

	(void)arg;
	memfd_self = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	build();
	NSBT_CHECK(munmap((void *)old, 2 * ps) == 0, "munmap: %s", strerror(errno));
	q = mremap((void *)old, 2 * hs + 2 * ps, 2 * ps, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)old);
	/* EINVAL (overlap) where the kernel checks the ranges first; EFAULT
	 * where it looks up the source's VMA first (6.1: the source begins
	 * in a hole).  Either way it changes nothing. */
	NSBT_CHECK(q == MAP_FAILED && (errno == EINVAL || errno == EFAULT), "mremap onto itself: %s",
		   q == MAP_FAILED ? strerror(errno) : "moved");
	say("mremap(hbase - 2 pages, 2 huge pages + 2 pages, 2 pages, MAYMOVE|FIXED, the same) = EINVAL or EFAULT");
	check_all();
	printf("ok: a failed move onto itself leaves the hugetlbfs records as they were\n");
}

/*
 * MADV_DONTFORK (then MADV_DOFORK) over small-page records and into the
 * middle of a hugetlbfs mapping: the kernel changes the VMAs below the
 * huge one, then refuses to split it (EINVAL).  The records must follow
 * the VMAs that changed: a fork child has neither the pages nor their
 * records, then has both again.
 */
static void
advice_child(void *arg)
{
	uintptr_t at = (uintptr_t)win + 17 * ps;	/* E, pages 17-19 */
	size_t len = (uintptr_t)hbase - at + hs / 2;

	(void)arg;
	memfd_self = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	build();
	NSBT_CHECK(madvise((void *)at, len, MADV_DONTFORK) == -1 && errno == EINVAL,
		   "MADV_DONTFORK into a huge page: %s", strerror(errno));
	say("madvise(win + 17 pages, to half of huge page 0, MADV_DONTFORK) = EINVAL");
	check_all();
	/* The huge page advised too: MADV_DOFORK then changes it, and the
	 * kernel must split it (a VMA it leaves as it is, it does not). */
	NSBT_CHECK(madvise((void *)at, 3 * ps, MADV_DONTFORK) == 0 &&
		   madvise(hbase, 2 * hs, MADV_DONTFORK) == 0, "MADV_DONTFORK: %s", strerror(errno));
	NSBT_CHECK(madvise((void *)at, len, MADV_DOFORK) == -1 && errno == EINVAL,
		   "MADV_DOFORK into a huge page: %s", strerror(errno));
	say("madvise(win + 17 pages, to half of huge page 0, MADV_DOFORK) = EINVAL");
	check_all();
	printf("ok: advice the kernel applied below a huge page it refused to split is recorded\n");
}

static void
setup_window(char **argv)
{
	char *reserve;

	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "flag");
	core_require_library();
	ps = nsbt_page();
	hs = nsbt_huge_page_size();
	if (hs) {
		int h = memfd_create("atk3-probe", MFD_CLOEXEC | MFD_HUGETLB);

		if (h < 0)
			hs = 0;
		else
			close(h);
	}
	win_len = NSMALL * ps + (hs ? 2 * hs : 0);
	/* Low, far below where the kernel places mappings top-down: what
	 * the library and the C library map while the calls leave holes in
	 * the window never lands there (a PROT_NONE over it killed a run). */
	for (uintptr_t at = (uintptr_t)1 << 33;; at += (uintptr_t)1 << 30) {
		NSBT_CHECK(at < ((uintptr_t)1 << 40), "no free low range for the window");
		reserve = mmap((void *)at, win_len + 2 * NSMALL * ps + (hs ? 2 * hs : 0), PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE, -1, 0);
		if (reserve == (char *)at)
			break;
		if (reserve != MAP_FAILED)
			munmap(reserve, win_len + 2 * NSMALL * ps + (hs ? 2 * hs : 0));
	}
	hbase = reserve + (hs ? hs : NSMALL * ps);
	win = hbase - NSMALL * ps;
}

static void
run_named(const char *what, void (*fn)(void *))
{
	char err[16384];
	int st = core_run_watched(fn, NULL, nsbt_scaled(120), NULL, what, err, sizeof(err));

	core_expect_quiet(err, what);
	nsbt_expect_exit(st, 0, what);
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "random";

	setup_window(argv);
	if (strcmp(mode, "mremapdest") == 0 || strcmp(mode, "advice") == 0) {
		if (!hs)
			nsbt_skip("no hugetlbfs here (memfd_create(MFD_HUGETLB) fails)");
		run_named(mode, mode[0] == 'm' ? mremap_dest_child : advice_child);
		return 0;
	}
	if (strcmp(mode, "random") != 0)
		nsbt_fail("unknown mode %s", mode);
	if (!hs)
		printf("no hugetlbfs: the window has no huge pages\n");
	{
		unsigned seeds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 2;
		unsigned steps = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : 30;
		unsigned first = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 0) : 1;

		for (unsigned i = first; i < first + seeds; i++) {
			struct run r = { i, steps };
			char err[16384], what[64];
			int st;

			snprintf(what, sizeof(what), "seed %u, %u calls", i, steps);
			st = core_run_watched(run_seed, &r, nsbt_scaled(240), NULL, what, err, sizeof(err));
			core_expect_quiet(err, what);
			nsbt_expect_exit(st, 0, what);
		}
	}
	printf("ok: records follow every call over several records and holes\n");
	return 0;
}
