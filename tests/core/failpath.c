/* SPDX-License-Identifier: MIT */
/*
 * Calls that fail, or fail part-way (issue 10 item 2 and the suspects;
 * SPEC §4: "after a call that fails, or fails part-way, exactly the
 * mappings that are then live").  After each failure the test asks the
 * kernel what is mapped, and checks the library's protection against it:
 * a live protected page is still rescued, and an unrelated unprotected
 * mapping made later where something went away dies of SIGBUS.
 *
 * Modes (argv[1]):
 *   pages    - the library's own memory, made at the first protected
 *              mapping, stays out of a range the program has just
 *              released (and maps into next);
 *            - mremap grow of a protected mapping that rescues split into
 *              several VMAs, failing with ENOMEM under a tight RLIMIT_AS
 *              (MREMAP_MAYMOVE, MREMAP_MAYMOVE|MREMAP_FIXED, in place):
 *              nothing may be half moved (item 2);
 *            - MAP_FIXED over a protected mapping that the kernel refuses
 *              before touching anything (RLIMIT_AS): still protected;
 *            - MREMAP_FIXED onto a protected destination, failing in each
 *              way this kernel has: the test first learns, with raw system
 *              calls, whether the kernel unmaps the destination before it
 *              fails (older kernels did for every failure; 6.18 still does
 *              for MREMAP_DONTUNMAP under RLIMIT_AS), then checks the
 *              library against that (third suspect);
 *            - a failed mremap of a protected source onto unprotected
 *              memory leaves no protection at the destination.
 *   hugetlb  MAP_FIXED that the kernel refuses after it has unmapped the old
 *            range (a hugetlbfs file at an offset that is not a whole huge
 *            page: the check runs in the file's mmap hook, after the
 *            unmap): the old range is gone, and so must its protection be.
 *            Skipped (77) without hugetlbfs.
 *   race     the first suspect: the MAP_FIXED failure path must not put the
 *            records back over another thread's new mapping in the hole.
 *            A seccomp user-notification filter on the mapping thread
 *            stops it at its first system call after the failed mmap; the
 *            test's supervisor thread then maps an unprotected file into
 *            the hole and lets it go on.  Deterministic: the window is
 *            opened, not hoped for.  Skipped (77) without hugetlbfs or
 *            seccomp user notification.
 *
 * Runs with NOSIGBUS_POLICY=flag (re-executes itself to set it).
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>

#include "core.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 4U
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

static size_t ps;

/* ---- address-space limits ------------------------------------------------ */

/* From now on the address space may grow by `pages` pages at most. */
static void
limit_as(size_t pages)
{
	struct rlimit rl = { nsbt_vm_size() + pages * ps, RLIM_INFINITY };

	if (setrlimit(RLIMIT_AS, &rl) != 0)
		nsbt_fail("setrlimit(RLIMIT_AS): %s", strerror(errno));
}

static void
unlimit_as(void)
{
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };

	if (setrlimit(RLIMIT_AS, &rl) != 0)
		nsbt_fail("setrlimit(RLIMIT_AS): %s", strerror(errno));
}

/* A read of p in a child: exit 0 (it read) or the signal it died of. */
static void
expect_readable(void *p, const char *what)
{
	nsbt_expect_exit(core_touch_quiet(p, false, what), 0, what);
}

/* ---- item 2: a failed mremap of a split protected mapping ----------------- */

enum grow_how { GROW_MAYMOVE, GROW_FIXED, GROW_IN_PLACE };

struct split {
	int type;
	enum grow_how how;
};

static const char *
split_name(const struct split *s)
{
	static const char *const hows[] = {
		"MREMAP_MAYMOVE", "MREMAP_MAYMOVE|MREMAP_FIXED to a free range", "in place (flags 0)",
	};
	static char buf[200];

	snprintf(buf, sizeof(buf), "failed mremap grow (%s) of a split %s protected mapping",
		 hows[s->how], s->type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE");
	return buf;
}

#define SPLIT_PAGES	6
#define GROW_PAGES	64	/* more than the RLIMIT_AS slack below */
#define AS_SLACK	16

/*
 * Six pages of a file truncated to 1.5 pages; pages 2 and 4 rescued and
 * written, so the kernel has [file 0-1][anon 2][file 3][anon 4][file 5].
 * Grow it by 64 pages with only 16 pages of address space left: ENOMEM.
 * Then: every old page is still there with its contents and protection,
 * nothing appeared at the destination, and what later takes the old or
 * the destination range is not protected.
 */
static void
split_child(void *arg)
{
	const struct split *s = arg;
	const char *name = split_name(s);
	size_t len = SPLIT_PAGES * ps, new_len = (SPLIT_PAGES + GROW_PAGES) * ps;
	int fd = nsbt_file(NSBT_MEMFD, len);
	char *p = core_map(NULL, len, CORE_PROT_RW, s->type | MAP_NOSIGBUS, fd, 0);
	char *dest = core_free_range(new_len), *q;
	int flags, err;
	bool gone = false;

	/* Room after p for an in-place grow, so that only the limit stops it. */
	if (s->how == GROW_IN_PLACE) {
		char *room = core_free_range(len + new_len);

		p = mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, room);
		NSBT_CHECK(p == room, "mremap to a roomy place: %s", strerror(errno));
	}
	core_truncate(fd, (off_t)(ps + ps / 2));
	memset(p + 2 * ps, 'R', ps);
	memset(p + 4 * ps, 'S', ps);
	flags = s->how == GROW_IN_PLACE ? 0 : MREMAP_MAYMOVE;
	if (s->how == GROW_FIXED)
		flags |= MREMAP_FIXED;

	limit_as(AS_SLACK);
	errno = 0;
	q = mremap(p, len, new_len, flags, dest);
	err = errno;
	unlimit_as();
	if (q != MAP_FAILED)
		nsbt_fail("%s: succeeded (at %p) with only %d pages of address space left for a "
			  "%d-page growth", name, (void *)q, AS_SLACK, GROW_PAGES);
	NSBT_CHECK(err == ENOMEM, "%s: failed with %s, expected ENOMEM", name, strerror(err));
	printf("ok: %s: -1/ENOMEM\n", name);

	/* Half moved?  Whatever left the old range, its protection must have left too. */
	for (int i = 0; i < SPLIT_PAGES; i++) {
		if (core_page_mapped(p + i * ps))
			continue;
		gone = true;
		core_expect_unprotected(p + i * ps, "unflagged mapping where a page of the failed "
					"mremap went");
	}
	if (gone)
		nsbt_fail("%s: half moved: pages of the old range are gone after the failure", name);
	expect_readable(p, "p[0] after the failed mremap");
	core_expect_pattern(p, 0, ps + ps / 2, name);
	core_expect_bytes(p + ps + ps / 2, 0, ps / 2, name);
	core_expect_bytes(p + 2 * ps, 'R', ps, name);
	core_expect_bytes(p + 4 * ps, 'S', ps, name);
	/* Pages 3 and 5 were never touched: still protected, rescued now. */
	core_expect_bytes(p + 3 * ps, 0, ps, name);
	core_expect_bytes(p + 5 * ps, 0, ps, name);
	core_expect_file(fd, ps + ps / 2, name);
	printf("ok: %s: all six pages in place, contents kept, still protected\n", name);

	/* Nothing at the destination, and nothing protected there. */
	if (s->how == GROW_FIXED) {
		core_expect_unmapped(dest, new_len, "the destination after the failed mremap");
		for (int i = 0; i < SPLIT_PAGES + 1; i++)
			core_expect_unprotected(dest + i * ps, "unflagged mapping at the destination");
	}
	/* Gone for good now: an unrelated unprotected memfd there must SIGBUS. */
	NSBT_CHECK(munmap(p, len) == 0, "munmap: %s", strerror(errno));
	for (int i = 0; i < SPLIT_PAGES; i++)
		core_expect_unprotected(p + i * ps, "unflagged memfd over the old range, unmapped");
	printf("ok: %s: nothing protected at the destination or the old range afterwards\n", name);
}

/* ---- the library's memory and the addresses the program released ------- */

/*
 * The library makes its memory at the first protected mapping, which is
 * often a MAP_FIXED into a range the program reserved and released (as
 * core_free_range() does): the library's memory must not land in the rest
 * of that range, which the program maps next.  Runs first, before any
 * protected mapping in this process.
 */
static void
released_child(void *arg)
{
	const char *name = "the library's memory and a range the program released";
	size_t len = (size_t)16 << 20;
	char *p = core_free_range(len);

	(void)arg;
	core_map(p, ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS,
		 nsbt_file(NSBT_MEMFD, 0), 0);
	core_expect_unmapped(p + ps, len - ps, name);
	core_map(p + ps, len - ps, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
		 -1, 0);
	expect_readable(p, "read of the protected page after the program took the rest");
	printf("ok: %s: the rest of the range was still free\n", name);
}

/* ---- MAP_FIXED refused before the kernel touches anything ----------------- */

static void
fixed_refused_child(void *arg)
{
	int type = *(int *)arg, fd = nsbt_file(NSBT_MEMFD, 0), ufd = nsbt_file(NSBT_MEMFD, 0);
	char *p = core_free_range((2 + GROW_PAGES) * ps), *q;
	char name[160];
	int err;

	snprintf(name, sizeof(name), "MAP_FIXED over a protected %s mapping, refused (RLIMIT_AS)",
		 type == MAP_SHARED ? "MAP_SHARED" : "MAP_PRIVATE");
	core_map(p, 2 * ps, CORE_PROT_RW, type | MAP_FIXED | MAP_NOSIGBUS, fd, 0);
	limit_as(AS_SLACK);
	errno = 0;
	q = mmap(p, (2 + GROW_PAGES) * ps, PROT_READ, MAP_SHARED | MAP_FIXED, ufd, 0);
	err = errno;
	unlimit_as();
	NSBT_CHECK(q == MAP_FAILED && err == ENOMEM, "%s: %s", name,
		   q == MAP_FAILED ? strerror(err) : "succeeded");
	NSBT_CHECK(core_page_mapped(p) && core_page_mapped(p + ps), "%s: the old mapping went", name);
	core_expect_unmapped(p + 2 * ps, GROW_PAGES * ps, name);
	expect_readable(p + ps, "read of the old protected mapping after the refused MAP_FIXED");
	memset(p, 'x', 2 * ps);
	core_expect_bytes(p, 'x', 2 * ps, name);
	core_expect_unprotected(p + 2 * ps, "unflagged mapping after the old one");
	printf("ok: %s: the old mapping is intact and still protected\n", name);
}

/* ---- MREMAP_FIXED onto a protected destination ----------------------------- */

enum dest_fail { DF_NO_SOURCE, DF_SPLIT_SOURCE, DF_GROW_LIMIT, DF_DONTUNMAP_LIMIT, DF_N };

static const char *const dest_fail_names[] = {
	"source not mapped (EFAULT)",
	"source split into 2 VMAs, grown (EFAULT)",
	"grow over RLIMIT_AS (ENOMEM)",
	"MREMAP_DONTUNMAP over RLIMIT_AS (ENOMEM)",
};
static const int dest_fail_errno[] = { EFAULT, EFAULT, ENOMEM, ENOMEM };

struct dest_case {
	enum dest_fail kind;
	bool raw;		/* the kernel alone: learn what it does */
	bool protect;		/* the destination's first page is protected */
};

static void *
raw_mremap(void *old, size_t ol, size_t nl, int flags, void *new_addr)
{
	return (void *)syscall(SYS_mremap, old, ol, nl, flags, new_addr);
}

/*
 * Source: 4 pages (unprotected anonymous, or nothing); destination: one
 * page of an empty memfd (protected unless raw) followed by free space.
 * Exits 10 if the destination page is still mapped after the failure, 11
 * if the kernel unmapped it; then checks the protection accordingly.
 */
static void
dest_child(void *arg)
{
	const struct dest_case *c = arg;
	const char *what = dest_fail_names[c->kind];
	int fd = nsbt_file(NSBT_MEMFD, 0), flags = MREMAP_MAYMOVE | MREMAP_FIXED;
	char *area = core_free_range(32 * ps), *src = area, *dest = area + 16 * ps, *q;
	size_t old_len = 4 * ps, new_len = 4 * ps;
	int err;

	core_map(dest, ps, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | (c->protect ? MAP_NOSIGBUS : 0),
		 fd, 0);
	if (c->kind != DF_NO_SOURCE)
		core_map(src, old_len, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (c->kind == DF_SPLIT_SOURCE) {
		NSBT_CHECK(mprotect(src + ps, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
		new_len = 6 * ps;
	}
	if (c->kind == DF_GROW_LIMIT) {
		new_len = 12 * ps;
		limit_as(2);
	}
	if (c->kind == DF_DONTUNMAP_LIMIT) {
		flags |= MREMAP_DONTUNMAP;
		limit_as(2);
	}
	errno = 0;
	q = c->raw ? raw_mremap(src, old_len, new_len, flags, dest)
		   : mremap(src, old_len, new_len, flags, dest);
	err = errno;
	unlimit_as();
	if (q != MAP_FAILED || err != dest_fail_errno[c->kind]) {
		/* The kernel may not fail this way (DONTUNMAP needs 5.7, of file pages 5.13). */
		printf("note: %s: %s, not -1/%s\n", what, q == MAP_FAILED ? strerror(err) : "succeeded",
		       strerrorname_np(dest_fail_errno[c->kind]));
		_exit(c->raw ? 12 : 13);
	}
	if (c->raw)
		_exit(core_page_mapped(dest) ? 10 : 11);
	if (core_page_mapped(dest)) {
		expect_readable(dest, "read of the protected destination, still mapped after the failure");
		dest[5] = 'd';
		NSBT_CHECK(dest[5] == 'd', "write to the rescued destination page");
		_exit(10);
	}
	core_expect_unprotected(dest, "unflagged mapping where the kernel unmapped the destination");
	_exit(11);
}

static void
dest_cases(void)
{
	for (int k = 0; k < DF_N; k++) {
		struct dest_case raw = { (enum dest_fail)k, true, false };
		struct dest_case lib = { (enum dest_fail)k, false, true };
		char name[200];
		int kst, lst;

		snprintf(name, sizeof(name), "MREMAP_FIXED onto a protected page, %s",
			 dest_fail_names[k]);
		kst = core_run_watched(dest_child, &raw, nsbt_scaled(45), NULL, name, NULL, 0);
		if (WIFEXITED(kst) && WEXITSTATUS(kst) == 12) {
			printf("ok: %s: this kernel does not fail that way; nothing to check\n", name);
			continue;
		}
		if (!WIFEXITED(kst) || (WEXITSTATUS(kst) != 10 && WEXITSTATUS(kst) != 11))
			nsbt_fail("%s, without the library: %s", name, nsbt_status_str(kst));
		printf("ok: this kernel %s the destination when MREMAP_FIXED fails with %s\n",
		       WEXITSTATUS(kst) == 10 ? "keeps" : "unmaps", dest_fail_names[k]);
		lst = core_run_watched(dest_child, &lib, nsbt_scaled(45), NULL, name, NULL, 0);
		if (!WIFEXITED(lst) || WEXITSTATUS(lst) != WEXITSTATUS(kst))
			nsbt_fail("%s: %s (10: destination kept, 11: unmapped; the kernel alone: %d)",
				  name, nsbt_status_str(lst), WEXITSTATUS(kst));
		printf("ok: %s: the destination is %s\n", name,
		       WEXITSTATUS(kst) == 10 ? "still protected" : "unprotected, as it is gone");
	}
}

/*
 * The other way round: a protected source, an unprotected destination,
 * and an mremap that fails.  Nothing was moved, so nothing may be
 * protected at the destination afterwards (whatever the library did to
 * find out what the kernel did).
 */
enum src_fail { SF_DUP_PRIVATE, SF_MIXED_RESIZE, SF_HOLE_GROW, SF_N };

static const char *const src_fail_names[] = {
	"old_len 0 of a private mapping (EINVAL)",
	"3 VMAs, only the middle one protected, moved with a new length (EFAULT)",
	"a source with a hole, grown (EFAULT)",
};

static void
src_child(void *arg)
{
	enum src_fail kind = *(enum src_fail *)arg;
	const char *what = src_fail_names[kind];
	int fd = nsbt_file(NSBT_MEMFD, 0);
	char *area = core_free_range(32 * ps), *src = area, *dest = area + 16 * ps, *q;
	size_t old_len = 3 * ps, new_len = 3 * ps;

	/* The destination: unprotected anonymous memory, all of it mapped. */
	core_map(dest, 8 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	core_map(src, 3 * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_FIXED | MAP_NOSIGBUS, fd, 0);
	if (kind == SF_DUP_PRIVATE) {
		old_len = 0;
	} else if (kind == SF_MIXED_RESIZE) {
		core_map(src, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		core_map(src + 2 * ps, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		new_len = 2 * ps - 1829;
	} else {
		NSBT_CHECK(munmap(src + ps, ps) == 0, "munmap: %s", strerror(errno));
		new_len = 4 * ps;
	}
	errno = 0;
	q = mremap(src, old_len, new_len, MREMAP_MAYMOVE | MREMAP_FIXED, dest);
	if (q != MAP_FAILED) {
		printf("ok: %s: this kernel (or the library) moved it; nothing to check\n", what);
		return;
	}
	printf("ok: %s: -1/%s\n", what, strerrorname_np(errno) ?: "?");
	for (size_t i = 0; i < 5; i++) {
		if (!core_page_mapped(dest + i * ps))
			core_expect_unprotected(dest + i * ps, what);
		else
			core_expect_no_record(dest + i * ps, what);
	}
	/* The source kept its protection. */
	expect_readable(kind == SF_MIXED_RESIZE ? src + ps : src,
			"read of the protected source after the failed mremap");
	printf("ok: %s: no protection at the destination, the source still protected\n", what);
}

static void
src_cases(void)
{
	for (int k = 0; k < SF_N; k++) {
		enum src_fail kind = (enum src_fail)k;
		char name[200];

		snprintf(name, sizeof(name), "failed MREMAP_FIXED of a protected source onto "
			 "unprotected memory: %s", src_fail_names[k]);
		nsbt_expect_exit(core_run_watched(src_child, &kind, nsbt_scaled(45), NULL, name, NULL, 0), 0, name);
	}
}

/* ---- hugetlbfs: MAP_FIXED refused after the unmap -------------------------- */

static size_t hs;

static void
require_hugetlbfs(void)
{
	int fd = memfd_create("core-failpath-probe", MFD_HUGETLB | MFD_CLOEXEC);

	hs = nsbt_huge_page_size();
	if (!hs || fd < 0)
		nsbt_skip("no hugetlbfs here (memfd_create(MFD_HUGETLB): %s)",
			  fd < 0 ? strerror(errno) : "no Hugepagesize");
	close(fd);
}

/* A protected 2-huge-page memfd mapping at a huge-page aligned address. */
static char *
huge_aligned_protected(int fd)
{
	char *r = core_free_range(3 * hs);
	char *p = (char *)(((uintptr_t)r + hs - 1) & ~(uintptr_t)(hs - 1));

	return core_map(p, 2 * hs, CORE_PROT_RW, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, fd, 0);
}

/* mmap(p, hs, MAP_FIXED) of a hugetlbfs file at offset ps: EINVAL, after the unmap. */
static void *
failing_fixed(char *p, int hfd)
{
	return mmap(p, hs, PROT_READ, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, hfd, (off_t)ps);
}

static void
fixed_unmapped_child(void *arg)
{
	int fd = nsbt_file(NSBT_MEMFD, 0);
	int hfd = memfd_create("core-failpath-huge", MFD_HUGETLB | MFD_CLOEXEC);
	char *p = huge_aligned_protected(fd);
	const char *name = "MAP_FIXED refused after the kernel unmapped the old range";
	void *q;
	int err;

	(void)arg;
	NSBT_CHECK(hfd >= 0, "memfd_create(MFD_HUGETLB): %s", strerror(errno));
	errno = 0;
	q = failing_fixed(p, hfd);
	err = errno;
	NSBT_CHECK(q == MAP_FAILED && err == EINVAL, "%s: %s", name,
		   q == MAP_FAILED ? strerror(err) : "succeeded");
	if (core_page_mapped(p)) {
		/* An older kernel checks first: then the old range must still be protected. */
		printf("ok: this kernel refuses before unmapping; checking that the old range "
		       "is still protected\n");
		expect_readable(p, "read of the old range");
		expect_readable(p + hs, "read of the second huge page of the old range");
		return;
	}
	printf("ok: this kernel unmapped [p, p + hs) before refusing\n");
	core_expect_unprotected(p, "unflagged memfd in the range the failed MAP_FIXED unmapped");
	core_expect_unprotected(p + hs - ps, "the same, last page of that range");
	expect_readable(p + hs, "read of the rest of the old mapping (still mapped, protected)");
	printf("ok: %s: no protection left where nothing is mapped, the rest still protected\n",
	       name);
}

/* ---- the race of the first suspect, made deterministic --------------------- */

struct race {
	char *p;
	int hfd, ufd;
	atomic_int listener;
	atomic_bool done, filled;
	atomic_long filled_at_nr;
	void *ret;
	int err;
};

static struct race race;

static int
seccomp_sys(unsigned op, unsigned flags, void *args)
{
	return (int)syscall(SYS_seccomp, op, flags, args);
}

static bool
page_mapped_raw(const void *p)
{
	unsigned char v;

	return syscall(SYS_mincore, p, ps, &v) == 0;
}

/* The test's own "other thread": serves every system call of the mapper. */
static void *
supervisor(void *arg)
{
	struct seccomp_notif_sizes sizes;
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	int fd;

	(void)arg;
	while ((fd = atomic_load(&race.listener)) < 0)
		sched_yield();
	if (seccomp_sys(SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0)
		nsbt_fail("SECCOMP_GET_NOTIF_SIZES: %s", strerror(errno));
	req = calloc(1, sizes.seccomp_notif);
	resp = calloc(1, sizes.seccomp_notif_resp);
	if (!req || !resp)
		nsbt_fail("calloc");
	for (;;) {
		memset(req, 0, sizes.seccomp_notif);
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, req) != 0) {
			if (errno == EINTR || errno == ENOENT)
				continue;
			nsbt_fail("SECCOMP_IOCTL_NOTIF_RECV: %s", strerror(errno));
		}
		/* The mapper is stopped in a system call: if the failed MAP_FIXED
		 * left a hole, another thread's mapping takes it now. */
		if (!atomic_load(&race.filled) && !page_mapped_raw(race.p)) {
			/* All of it: a check of the whole range then finds it mapped. */
			void *m = (void *)syscall(SYS_mmap, race.p, hs, PROT_READ,
						  MAP_SHARED | MAP_FIXED_NOREPLACE, race.ufd, 0);

			if (m == race.p) {
				atomic_store(&race.filled_at_nr, (long)req->data.nr);
				atomic_store(&race.filled, true);
			}
		}
		memset(resp, 0, sizes.seccomp_notif_resp);
		resp->id = req->id;
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, resp) != 0 && errno != ENOENT)
			nsbt_fail("SECCOMP_IOCTL_NOTIF_SEND: %s", strerror(errno));
	}
	return NULL;
}

/* The mapping thread: every system call it makes now waits for the supervisor. */
static void *
mapper(void *arg)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
	struct sock_fprog prog = { 1, filter };
	int fd;

	(void)arg;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		nsbt_fail("PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	fd = seccomp_sys(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (fd < 0)
		nsbt_fail("seccomp user notification: %s (checked in main)", strerror(errno));
	atomic_store(&race.listener, fd);
	errno = 0;
	race.ret = failing_fixed(race.p, race.hfd);
	race.err = errno;
	atomic_store(&race.done, true);
	for (;;)
		pause();
	return NULL;
}

static void
race_child(void *arg)
{
	int fd = nsbt_file(NSBT_MEMFD, 0);
	pthread_t sup, map;
	struct stat ust;
	unsigned long a, b, ino;
	bool found;

	(void)arg;
	race.p = huge_aligned_protected(fd);
	race.hfd = memfd_create("core-failpath-huge", MFD_HUGETLB | MFD_CLOEXEC);
	race.ufd = nsbt_file(NSBT_MEMFD, 0);	/* empty: every access is past its end */
	atomic_store(&race.listener, -1);
	NSBT_CHECK(race.hfd >= 0, "memfd_create(MFD_HUGETLB): %s", strerror(errno));
	if (pthread_create(&sup, NULL, supervisor, NULL) != 0 ||
	    pthread_create(&map, NULL, mapper, NULL) != 0)
		nsbt_fail("pthread_create");
	while (!atomic_load(&race.done))
		sched_yield();
	NSBT_CHECK(race.ret == MAP_FAILED && race.err == EINVAL,
		   "the failing MAP_FIXED: %s", race.ret == MAP_FAILED ? strerror(race.err) : "succeeded");
	if (!atomic_load(&race.filled)) {
		if (core_page_mapped(race.p)) {
			printf("ok: the old mapping survived the failed MAP_FIXED here; no hole to race into\n");
			expect_readable(race.p, "read of the old protected mapping");
			_exit(0);
		}
		/* No system call after the failure: no window for another thread. */
		printf("ok: the library made no system call between the failed mmap and its return: "
		       "no window to map into\n");
		core_expect_unprotected(race.p, "unflagged mapping in the hole afterwards");
		_exit(0);
	}
	printf("ok: another thread mapped an unprotected empty memfd into the hole while the "
	       "mapping thread was stopped in system call %ld after the failed mmap\n",
	       atomic_load(&race.filled_at_nr));
	/* That mapping must still be there, the supervisor's own. */
	NSBT_CHECK(fstat(race.ufd, &ust) == 0, "fstat: %s", strerror(errno));
	found = sscanf(core_maps_line(race.p), "%lx-%lx %*s %*s %*s %lu", &a, &b, &ino) == 3 &&
		ino == (unsigned long)ust.st_ino;
	NSBT_CHECK(found, "the other thread's mapping is no longer at %p", (void *)race.p);
	nsbt_expect_signal(core_touch_quiet(race.p, false, "read of the other thread's mapping"),
			   SIGBUS, "read past the end of the other thread's unprotected mapping in the "
			   "hole left by the failed MAP_FIXED");
	nsbt_expect_signal(core_touch_quiet(race.p + hs - ps, false, "read of its last page"),
			   SIGBUS, "the same, last page");
	_exit(0);
}

static void
require_user_notif(void)
{
	struct seccomp_notif_sizes sizes;

	if (seccomp_sys(SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0)
		nsbt_skip("no seccomp user notification here (%s): the race cannot be opened "
			  "deterministically", strerror(errno));
}

int
main(int argc, char **argv)
{
	static const int types[] = { MAP_PRIVATE, MAP_SHARED };

	core_require_library();
	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "flag");
	ps = nsbt_page();
	if (argc < 2)
		nsbt_fail("usage: core-failpath pages|hugetlb|race");
	if (strcmp(argv[1], "pages") == 0) {
		nsbt_expect_exit(core_run_watched(released_child, NULL, nsbt_scaled(45), NULL,
						  "released range", NULL, 0),
				 0, "the library's memory stays out of a range the program released");
		for (int t = 0; t < 2; t++)
			for (int h = 0; h < 3; h++) {
				struct split s = { types[t], (enum grow_how)h };

				nsbt_expect_exit(core_run_watched(split_child, &s, nsbt_scaled(45), NULL,
								  split_name(&s), NULL, 0),
						 0, split_name(&s));
			}
		for (int t = 0; t < 2; t++) {
			int type = types[t];

			nsbt_expect_exit(core_run_watched(fixed_refused_child, &type, nsbt_scaled(45), NULL,
							  "MAP_FIXED refused", NULL, 0),
					 0, "MAP_FIXED refused before the kernel touches anything");
		}
		dest_cases();
		src_cases();
		return 0;
	}
	require_hugetlbfs();
	if (strcmp(argv[1], "hugetlb") == 0) {
		nsbt_expect_exit(core_run_watched(fixed_unmapped_child, NULL, nsbt_scaled(45), NULL,
						  "MAP_FIXED refused after the unmap", NULL, 0),
				 0, "MAP_FIXED refused after the kernel unmapped the old range");
		return 0;
	}
	if (strcmp(argv[1], "race") != 0)
		nsbt_fail("unknown mode %s", argv[1]);
	require_user_notif();
	nsbt_expect_exit(core_run_watched(race_child, NULL, nsbt_scaled(45), NULL, "MAP_FIXED failure race",
					  NULL, 0),
			 0, "the MAP_FIXED failure path and another thread's mapping in the hole");
	return 0;
}
