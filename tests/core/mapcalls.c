/* SPDX-License-Identifier: MIT */
/*
 * The mapping calls past mmap, munmap, mremap and mprotect
 * (doc/mappings.md), each in a child, named as in the table:
 *  - remap_file_pages_offset: remap_file_pages moves a page to another
 *    offset of the file; a page it put past the end is rescued, as the
 *    records follow the offsets;
 *  - shmat_remap_stale_record: shmat(SHM_REMAP) over a protected mapping
 *    takes its record with it;
 *  - raw_munmap_stale_record: a record a raw munmap left behind does not
 *    protect the next mapping made there;
 *  - mremap_program_split: a protected mapping that the program split
 *    (mprotect) cannot be moved, as in the kernel (EFAULT); one that only
 *    rescues split still moves;
 *  - mremap_refreshed_split: a protected mapping whose file a peer
 *    truncated (a page rescued) and grew back, grown by mremap (the
 *    library maps the file again over the rescued page, from a descriptor
 *    of its own: a VMA the kernel does not merge) grows and moves again,
 *    as the kernel's single VMA does; a split the program makes there
 *    (mprotect, MADV_RANDOM) still fails with EFAULT, as in the kernel;
 *  - refreshed_page_attrs: the page the library maps from the file again
 *    keeps the mapping's mlock and MADV_DONTDUMP (smaps VmFlags), as a
 *    rescued page does, and the mapping still grows;
 *  - madv_remove_rescued: MADV_REMOVE over a shared mapping with a
 *    rescued page succeeds, as over the kernel flag's single VMA;
 *  - mlock_rescued_unlocked: a rescued page keeps mlock, lock-on-fault,
 *    mlockall(MCL_CURRENT), MADV_DONTDUMP, MADV_(NO)HUGEPAGE and
 *    MADV_MERGEABLE (smaps VmFlags);
 *  - MADV_DONTNEED, msync and mincore over a rescued page: the kernel
 *    flag's results;
 *  - mprotect_readonly_shared: a shared mapping of a file opened
 *    read-only (no VM_MAYWRITE) cannot become writable, whether its pages
 *    are all replaced, some are (the call starting at a replaced page:
 *    nothing changed before the refusal), or it was grown by mremap:
 *    EACCES from mprotect and pkey_mprotect, the protection in
 *    /proc/self/maps as it was; the same for a mapping nosigbus_protect
 *    protected; the same for a memfd sealed against writing mapped
 *    read-only shared through a read-write descriptor; a private mapping
 *    of it, and a shared one of a descriptor opened for writing, still can.
 */
#include <dlfcn.h>
#include <sys/ipc.h>
#include <sys/shm.h>

#include "core.h"

#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1
#endif
#ifndef SHM_REMAP
#define SHM_REMAP 040000
#endif

static size_t ps;

static char *
protected_memfd(int *fd, size_t pages)
{
	*fd = nsbt_file(NSBT_MEMFD, pages * ps);
	return core_map(NULL, pages * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, *fd, 0);
}

static void
remap_file_pages_child(void *arg)
{
	int fd;
	char *p = protected_memfd(&fd, 4);

	(void)arg;
	/* The first page shows the file's fourth. */
	if (remap_file_pages(p, ps, 0, 3, 0) != 0)
		nsbt_skip("remap_file_pages: %s", strerror(errno));
	core_expect_pattern(p, 3 * ps, ps, "the page remap_file_pages moved");
	core_truncate(fd, 2 * ps);
	/* Offset 3 pages: past the end, rescued. */
	core_expect_bytes(p, 0, ps, "a page remapped past the end");
	/* The others are where they were. */
	core_expect_pattern(p + ps, ps, ps, "the second page");
	core_expect_bytes(p + 3 * ps, 0, ps, "the fourth page");
	printf("ok: remap_file_pages_offset\n");
}

static void
shmat_child(void *arg)
{
	int fd, id;
	char *p = protected_memfd(&fd, 2), *q;

	(void)arg;
	id = shmget(IPC_PRIVATE, 2 * ps, IPC_CREAT | 0600);
	if (id < 0)
		nsbt_skip("shmget: %s", strerror(errno));
	q = shmat(id, p, SHM_REMAP);
	(void)shmctl(id, IPC_RMID, NULL);
	NSBT_CHECK(q == p, "shmat(SHM_REMAP) at %p: %s", (void *)p,
		   q == (void *)-1 ? strerror(errno) : "elsewhere");
	NSBT_CHECK(shmdt(q) == 0, "shmdt: %s", strerror(errno));
	/* A stale record would now say "past the end" there. */
	core_truncate(fd, 0);
	core_expect_unprotected(p, "after shmat(SHM_REMAP) and shmdt");
	printf("ok: shmat_remap_stale_record\n");
}

/* A raw munmap leaves the record; a mapping made there later is not
 * protected by it. */
static void
raw_munmap_child(void *arg)
{
	int fd;
	char *p = protected_memfd(&fd, 1);

	(void)arg;
	NSBT_CHECK(syscall(SYS_munmap, p, ps) == 0, "raw munmap: %s", strerror(errno));
	core_truncate(fd, 0);
	core_expect_unprotected(p, "a new mapping where a raw munmap left a record");
	printf("ok: raw_munmap_stale_record\n");
}

static void
program_split_child(void *arg)
{
	int fd, fd2;
	char *p = protected_memfd(&fd, 4), *q, *r;

	(void)arg;
	NSBT_CHECK(mprotect(p + ps, ps, PROT_READ) == 0, "mprotect");
	q = mremap(p, 4 * ps, 8 * ps, MREMAP_MAYMOVE);
	NSBT_CHECK(q == MAP_FAILED && errno == EFAULT,
		   "mremap of a mapping the program split: %s, the kernel says EFAULT",
		   q == MAP_FAILED ? strerror(errno) : "moved");
	/* Back in one piece: it moves. */
	NSBT_CHECK(mprotect(p + ps, ps, CORE_PROT_RW) == 0, "mprotect");
	q = mremap(p, 4 * ps, 8 * ps, MREMAP_MAYMOVE);
	NSBT_CHECK(q != MAP_FAILED, "mremap of a whole mapping: %s", strerror(errno));
	/* Split by a rescue only: it moves. */
	r = protected_memfd(&fd2, 4);
	core_truncate(fd2, ps);
	core_expect_bytes(r + 2 * ps, 0, ps, "a rescued page");
	q = mremap(r, 4 * ps, 8 * ps, MREMAP_MAYMOVE);
	NSBT_CHECK(q != MAP_FAILED, "mremap of a mapping split by a rescue: %s", strerror(errno));
	/* Split by the program and a rescue: the kernel's answer. */
	NSBT_CHECK(mprotect(q, ps, PROT_READ) == 0, "mprotect");
	r = mremap(q, 8 * ps, 12 * ps, MREMAP_MAYMOVE);
	NSBT_CHECK(r == MAP_FAILED && errno == EFAULT,
		   "mremap of a mapping the program and a rescue split: %s, not EFAULT",
		   r == MAP_FAILED ? strerror(errno) : "moved");
	printf("ok: mremap_program_split\n");
}

/* A peer process holding the file: it makes it `size` bytes of the test
 * pattern (truncated to nothing first) when asked. */
struct peer {
	int cmd, ack;
	pid_t pid;
};

static void
peer_start(struct peer *pr, int fd)
{
	int c[2], a[2];

	NSBT_CHECK(pipe(c) == 0 && pipe(a) == 0, "pipe: %s", strerror(errno));
	pr->pid = fork();
	NSBT_CHECK(pr->pid >= 0, "fork: %s", strerror(errno));
	if (pr->pid == 0) {
		off_t size;

		close(c[1]);
		close(a[0]);
		while (read(c[0], &size, sizeof(size)) == (ssize_t)sizeof(size)) {
			nsbt_fill(fd, (size_t)size);
			if (write(a[1], "", 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	close(c[0]);
	close(a[1]);
	pr->cmd = c[1];
	pr->ack = a[0];
}

static void
peer_size(struct peer *pr, size_t size)
{
	off_t s = (off_t)size;
	char b;

	NSBT_CHECK(write(pr->cmd, &s, sizeof(s)) == (ssize_t)sizeof(s) &&
		   read(pr->ack, &b, 1) == 1, "the peer did not answer");
}

/* The peer cuts the 4-page mapping p's file to one page (page 2 is
 * rescued), then grows it to 16; p grown to 8 pages with mremap, where
 * the file's pattern must show: the new address. */
static char *
rescue_then_regrow(struct peer *pr, char *p)
{
	char *q;

	peer_size(pr, ps);
	core_expect_bytes(p + 2 * ps, 0, ps, "a page past the end, rescued");
	peer_size(pr, 16 * ps);
	q = mremap(p, 4 * ps, 8 * ps, MREMAP_MAYMOVE);
	NSBT_CHECK(q != MAP_FAILED, "mremap to 8 pages after a rescue: %s", strerror(errno));
	core_expect_pattern(q, 0, 8 * ps, "the file grown back, after mremap");
	return q;
}

static void
peer_end(struct peer *pr)
{
	int status;

	close(pr->cmd);
	NSBT_CHECK(waitpid(pr->pid, &status, 0) == pr->pid, "waitpid: %s", strerror(errno));
	nsbt_expect_exit(status, 0, "the peer");
	close(pr->ack);
}

/* /proc/self/maps shows [p, p + len) as the file ino, shared, from offset
 * 0 on, in however many VMAs; returns how many. */
static int
shows_file(const char *p, size_t len, unsigned long ino, const char *what)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	uintptr_t at = (uintptr_t)p, end = at + len;
	int n = 0;

	NSBT_CHECK(f != NULL, "maps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f) && at < end) {
		unsigned long s, e, off, i;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s %lx %*s %lu", &s, &e, perms, &off, &i) != 5 ||
		    e <= at || s >= end)
			continue;
		NSBT_CHECK(s <= at && i == ino && perms[3] == 's' && off + (at - s) == at - (uintptr_t)p,
			   "%s: at offset %#lx, maps shows %s", what, (unsigned long)(at - (uintptr_t)p),
			   line);
		at = e;
		n++;
	}
	fclose(f);
	NSBT_CHECK(at >= end, "%s: nothing mapped at offset %#lx", what,
		   (unsigned long)(at - (uintptr_t)p));
	return n;
}

/* The kernel alone (raw system calls, no record), on a file nobody
 * truncated: grows and moves in one VMA; a split the program made fails. */
static void
kernel_baseline(void)
{
	int fd = nsbt_file(NSBT_MEMFD, 4 * ps);
	char *p = (char *)syscall(SYS_mmap, NULL, 4 * ps, CORE_PROT_RW, MAP_SHARED, fd, 0L), *q;

	NSBT_CHECK(p != MAP_FAILED, "raw mmap: %s", strerror(errno));
	q = (char *)syscall(SYS_mremap, p, 4 * ps, 8 * ps, MREMAP_MAYMOVE, NULL);
	NSBT_CHECK(q != MAP_FAILED, "the kernel alone: mremap to 8 pages: %s", strerror(errno));
	p = (char *)syscall(SYS_mremap, q, 8 * ps, 16 * ps, MREMAP_MAYMOVE, NULL);
	NSBT_CHECK(p != MAP_FAILED, "the kernel alone: mremap to 16 pages: %s", strerror(errno));
	NSBT_CHECK(madvise(p + ps, ps, MADV_RANDOM) == 0, "MADV_RANDOM: %s", strerror(errno));
	q = (char *)syscall(SYS_mremap, p, 16 * ps, 32 * ps, MREMAP_MAYMOVE, NULL);
	NSBT_CHECK(q == MAP_FAILED && errno == EFAULT,
		   "the kernel alone: mremap of a mapping MADV_RANDOM split: %s, expected EFAULT",
		   q == MAP_FAILED ? strerror(errno) : "moved");
	(void)syscall(SYS_munmap, p, 16 * ps);
	close(fd);
}

static void
refreshed_split_child(void *arg)
{
	struct peer pr;
	struct stat st;
	int fd = nsbt_file(NSBT_MEMFD, 4 * ps), n;
	char *p = core_map(NULL, 4 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0), *q, *r;

	(void)arg;
	kernel_baseline();
	NSBT_CHECK(fstat(fd, &st) == 0, "fstat: %s", strerror(errno));
	peer_start(&pr, fd);
	/* The program keeps no descriptor: the library maps the file again
	 * from one of its own. */
	close(fd);
	q = rescue_then_regrow(&pr, p);
	n = shows_file(q, 8 * ps, (unsigned long)st.st_ino, "after the first mremap");
	/* The split this test is about; if the kernel or the library ever
	 * makes it one VMA, the rest still holds. */
	if (n < 2)
		printf("note: the file mapped again merged with the mapping (%d VMA)\n", n);
	r = mremap(q, 8 * ps, 12 * ps, MREMAP_MAYMOVE);
	NSBT_CHECK(r != MAP_FAILED,
		   "mremap of a mapping the library mapped again in %d VMAs: %s, where the kernel "
		   "alone moves it", n, strerror(errno));
	core_expect_pattern(r, 0, 12 * ps, "after the second mremap");
	shows_file(r, 12 * ps, (unsigned long)st.st_ino, "after the second mremap");
	if (r != q)
		core_expect_unmapped(q, 8 * ps, "where it was");
	/* Moved to a place of the program's choosing, and shrunk. */
	q = core_free_range(16 * ps);
	p = mremap(r, 12 * ps, 16 * ps, MREMAP_MAYMOVE | MREMAP_FIXED, q);
	NSBT_CHECK(p == q, "mremap(MREMAP_FIXED): %s", p == MAP_FAILED ? strerror(errno) : "elsewhere");
	core_expect_pattern(p, 0, 16 * ps, "after MREMAP_FIXED");
	shows_file(p, 16 * ps, (unsigned long)st.st_ino, "after MREMAP_FIXED");
	q = mremap(p, 16 * ps, 6 * ps, 0);
	NSBT_CHECK(q == p, "mremap to 6 pages in place: %s", q == MAP_FAILED ? strerror(errno) : "moved");
	shows_file(p, 6 * ps, (unsigned long)st.st_ino, "after shrinking");
	core_expect_unmapped(p + 6 * ps, 10 * ps, "past the shrunk mapping");
	/* A split the program makes: the kernel's EFAULT. */
	NSBT_CHECK(madvise(p + 3 * ps, ps, MADV_RANDOM) == 0, "MADV_RANDOM: %s", strerror(errno));
	q = mremap(p, 6 * ps, 12 * ps, MREMAP_MAYMOVE);
	NSBT_CHECK(q == MAP_FAILED && errno == EFAULT,
		   "mremap of a mapping MADV_RANDOM split: %s, the kernel says EFAULT",
		   q == MAP_FAILED ? strerror(errno) : "moved");
	NSBT_CHECK(madvise(p, 6 * ps, MADV_NORMAL) == 0, "MADV_NORMAL: %s", strerror(errno));
	NSBT_CHECK(mprotect(p + 3 * ps, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	q = mremap(p, 6 * ps, 12 * ps, MREMAP_MAYMOVE);
	NSBT_CHECK(q == MAP_FAILED && errno == EFAULT,
		   "mremap of a mapping mprotect split: %s, the kernel says EFAULT",
		   q == MAP_FAILED ? strerror(errno) : "moved");
	peer_end(&pr);
	printf("ok: mremap_refreshed_split\n");
}

static void vm_flags(const void *addr, char *out, size_t size);
static bool has_flag(const char *flags, const char *f);

static void
refreshed_attrs_child(void *arg)
{
	static const char *const want[] = { "dd", "lo" };
	struct peer pr;
	char flags[512];
	int fd = nsbt_file(NSBT_MEMFD, 4 * ps);
	char *p = core_map(NULL, 4 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0), *q;
	size_t n = 2;

	(void)arg;
	NSBT_CHECK(madvise(p, 4 * ps, MADV_DONTDUMP) == 0, "MADV_DONTDUMP: %s", strerror(errno));
	if (mlock(p, 4 * ps) != 0) {
		printf("skip: mlock: %s (MADV_DONTDUMP alone)\n", strerror(errno));
		n = 1;
	}
	peer_start(&pr, fd);
	close(fd);
	q = rescue_then_regrow(&pr, p);
	vm_flags(q + 2 * ps, flags, sizeof(flags));
	for (size_t i = 0; i < n; i++)
		NSBT_CHECK(has_flag(flags, want[i]),
			   "the page mapped from the file again lost '%s': VmFlags:%s", want[i], flags);
	p = mremap(q, 8 * ps, 12 * ps, MREMAP_MAYMOVE);
	NSBT_CHECK(p != MAP_FAILED, "mremap of the locked, refreshed mapping: %s, where the kernel "
		   "alone moves it", strerror(errno));
	core_expect_pattern(p, 0, 12 * ps, "after the second mremap");
	peer_end(&pr);
	printf("ok: refreshed_page_attrs\n");
}

static void
madv_remove_child(void *arg)
{
	int fd;
	char *p = protected_memfd(&fd, 2);

	(void)arg;
	core_truncate(fd, ps);
	core_expect_bytes(p + ps, 0, ps, "a rescued page");
	p[ps] = 7;
	NSBT_CHECK(madvise(p, 2 * ps, MADV_REMOVE) == 0,
		   "MADV_REMOVE over a mapping with a rescued page: %s", strerror(errno));
	core_expect_bytes(p, 0, 2 * ps, "after MADV_REMOVE");
	printf("ok: madv_remove_rescued\n");
}

/* Calls on a mapping with a rescued page give the kernel flag's results:
 * MADV_DONTNEED drops it (zeros again), msync and mincore succeed. */
static void
page_calls_child(void *arg)
{
	unsigned char vec[2];
	int fd;
	char *p = protected_memfd(&fd, 2);

	(void)arg;
	core_truncate(fd, ps);
	p[ps] = 9;
	NSBT_CHECK(msync(p, 2 * ps, MS_SYNC) == 0, "msync: %s", strerror(errno));
	NSBT_CHECK(mincore(p, 2 * ps, vec) == 0 && (vec[1] & 1), "mincore: %s", strerror(errno));
	NSBT_CHECK(madvise(p, 2 * ps, MADV_DONTNEED) == 0, "MADV_DONTNEED: %s", strerror(errno));
	core_expect_bytes(p + ps, 0, ps, "a rescued page after MADV_DONTNEED");
	printf("ok: MADV_DONTNEED, msync, mincore over a rescued page\n");
}

/* The VmFlags line of the smaps entry holding addr. */
static void
vm_flags(const void *addr, char *out, size_t size)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	bool in = false;

	NSBT_CHECK(f != NULL, "smaps: %s", strerror(errno));
	out[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;

		if (sscanf(line, "%lx-%lx ", &s, &e) == 2)
			in = s <= (uintptr_t)addr && (uintptr_t)addr < e;
		else if (in && strncmp(line, "VmFlags:", 8) == 0) {
			snprintf(out, size, "%s", line + 8);
			break;
		}
	}
	fclose(f);
}

static bool
has_flag(const char *flags, const char *f)
{
	for (const char *at = flags; (at = strstr(at, f)); at += 2)
		if ((at == flags || at[-1] == ' ') && (at[2] == ' ' || at[2] == '\n' || !at[2]))
			return true;
	return false;
}

struct attr {
	const char *name, *flag;
	int (*apply)(char *p, size_t len, int how);
	int how;
};

static int
do_mlock(char *p, size_t len, int how)
{
	return how ? mlock2(p, len, MLOCK_ONFAULT) : mlock(p, len);
}

static int
do_madvise(char *p, size_t len, int how)
{
	return madvise(p, len, how);
}

/* mbind as a program makes it, through the interposed name when there is
 * one (libnuma's, which the library's replaces). */
static bool
mbind_checked(void *p, size_t len, const unsigned long *mask)
{
	long (*f)(void *, unsigned long, int, const unsigned long *, unsigned long, unsigned) =
		(long (*)(void *, unsigned long, int, const unsigned long *, unsigned long,
			  unsigned))dlsym(RTLD_DEFAULT, "mbind");

	return f && f(p, len, 2 /* MPOL_BIND */, mask, 64, 0) == 0;
}

static void
attrs_child(void *arg)
{
	static const struct attr attrs[] = {
		{ "mlock", "lo", do_mlock, 0 },
		{ "mlock2(MLOCK_ONFAULT)", "lf", do_mlock, 1 },
		{ "MADV_DONTDUMP", "dd", do_madvise, MADV_DONTDUMP },
		{ "MADV_HUGEPAGE", "hg", do_madvise, MADV_HUGEPAGE },
		{ "MADV_NOHUGEPAGE", "nh", do_madvise, MADV_NOHUGEPAGE },
		{ "MADV_MERGEABLE", "mg", do_madvise, MADV_MERGEABLE },
	};
	char flags[512];

	(void)arg;
	/* Each on a shared mapping, and on a private one (KSM merges only
	 * private memory). */
	for (size_t i = 0; i < 2 * sizeof(attrs) / sizeof(attrs[0]); i++) {
		const struct attr *a = &attrs[i / 2];
		int fd = nsbt_file(NSBT_MEMFD, 2 * ps);
		char *p = core_map(NULL, 2 * ps, CORE_PROT_RW,
				   (i % 2 ? MAP_PRIVATE : MAP_SHARED) | MAP_NOSIGBUS, fd, 0);

		if (a->apply(p, 2 * ps, a->how) != 0) {
			printf("skip: %s: %s\n", a->name, strerror(errno));
			continue;
		}
		vm_flags(p + ps, flags, sizeof(flags));
		if (!has_flag(flags, a->flag)) {
			printf("skip: %s: no '%s' in VmFlags:%s", a->name, a->flag, flags);
			continue;
		}
		core_truncate(fd, ps);
		core_expect_bytes(p + ps, 0, ps, "a rescued page");
		vm_flags(p + ps, flags, sizeof(flags));
		NSBT_CHECK(has_flag(flags, a->flag), "%s: the rescued page lost it ('%s'): VmFlags:%s",
			   a->name, a->flag, flags);
		NSBT_CHECK(munmap(p, 2 * ps) == 0, "munmap");
		close(fd);
	}
	/* mlockall(MCL_CURRENT): every record. */
	{
		int fd;
		char *p = protected_memfd(&fd, 2);

		if (mlockall(MCL_CURRENT) != 0) {
			printf("skip: mlockall: %s\n", strerror(errno));
		} else {
			core_truncate(fd, ps);
			core_expect_bytes(p + ps, 0, ps, "a rescued page");
			vm_flags(p + ps, flags, sizeof(flags));
			NSBT_CHECK(has_flag(flags, "lo"), "mlockall: the rescued page lost it: "
				   "VmFlags:%s", flags);
			NSBT_CHECK(munlockall() == 0, "munlockall");
		}
	}
	/* Locked before nosigbus_protect: the record learns it from smaps. */
	{
		int fd = nsbt_file(NSBT_MEMFD, 2 * ps);
		char *p = core_map(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED, fd, 0);

		if (mlock(p, 2 * ps) != 0) {
			printf("skip: mlock: %s\n", strerror(errno));
		} else {
			NSBT_CHECK(nosigbus_protect(p, 2 * ps) == 0, "nosigbus_protect: %s",
				   strerror(errno));
			core_truncate(fd, ps);
			core_expect_bytes(p + ps, 0, ps, "a rescued page");
			vm_flags(p + ps, flags, sizeof(flags));
			NSBT_CHECK(has_flag(flags, "lo"), "mlock then nosigbus_protect: the rescued "
				   "page lost the lock: VmFlags:%s", flags);
		}
	}
	/* mbind: the mapping's policy, kept (MPOL_BIND to the first node). */
	{
		unsigned long mask = 1, got[2] = { 0, 0 };
		int fd, mode = -1;
		char *p = protected_memfd(&fd, 2);

		if (syscall(SYS_mbind, p, 2 * ps, 2 /* MPOL_BIND */, &mask, 64, 0) == 0 &&
		    mbind_checked(p, 2 * ps, &mask)) {
			core_truncate(fd, ps);
			core_expect_bytes(p + ps, 0, ps, "a rescued page");
			NSBT_CHECK(syscall(SYS_get_mempolicy, &mode, got, 128, p + ps,
					   2 /* MPOL_F_ADDR */) == 0,
				   "get_mempolicy: %s", strerror(errno));
			NSBT_CHECK(mode == 2 && got[0] == 1,
				   "mbind: the rescued page has policy %d, nodes %#lx, not MPOL_BIND to "
				   "node 0", mode, got[0]);
		} else {
			printf("skip: mbind: %s\n", strerror(errno));
		}
	}
	printf("ok: mlock_rescued_unlocked\n");
}

/* ---- mprotect of a shared mapping of a file opened read-only ---------- */

/* A memfd of pages pages, mapped PROT_READ (flags: MAP_SHARED or
 * MAP_PRIVATE, protected by MAP_NOSIGBUS if given, else by
 * nosigbus_protect) through a descriptor opened with mode;
 * *fd: the memfd's own (read-write) descriptor, for ftruncate. */
static char *
readonly_map(int *fd, size_t pages, int flags, int mode)
{
	char path[64];
	int rfd;
	char *p;

	*fd = nsbt_file(NSBT_MEMFD, pages * ps);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", *fd);
	rfd = open(path, mode | O_CLOEXEC);
	NSBT_CHECK(rfd >= 0, "open(%s): %s", path, strerror(errno));
	if (flags & MAP_NOSIGBUS) {
		p = core_map(NULL, pages * ps, PROT_READ, flags, rfd, 0);
	} else {
		p = core_map(NULL, pages * ps, PROT_READ, flags, rfd, 0);
		NSBT_CHECK(nosigbus_protect(p, pages * ps) == 0, "nosigbus_protect: %s", strerror(errno));
	}
	close(rfd);
	return p;
}

/* Every page of [p, p + pages) read: rescued where past the end. */
static void
read_all(const char *p, size_t pages)
{
	for (size_t i = 0; i < pages; i++)
		(void)*(const volatile char *)(p + i * ps);
}

/* mprotect (pkey: pkey_mprotect with key -1) of [p + first, p + first +
 * len) to read-write must fail with EACCES and leave the protection of
 * every page of the pages-page mapping at p as it was. */
static void
expect_refused(char *p, size_t pages, size_t first, size_t len, bool pkey, const char *what)
{
	char before[16][5], after[5];
	int ret;

	for (size_t i = 0; i < pages; i++)
		core_maps_perms(p + i * ps, before[i]);
	errno = 0;
	if (pkey) {
		ret = pkey_mprotect(p + first, len, PROT_READ | PROT_WRITE, -1);
		if (ret < 0 && errno == ENOSYS) {
			printf("skip: %s: pkey_mprotect: ENOSYS\n", what);
			return;
		}
	} else {
		ret = mprotect(p + first, len, PROT_READ | PROT_WRITE);
	}
	NSBT_CHECK(ret == -1 && errno == EACCES, "%s: %s read-write: %d, %s (want EACCES)",
		   what, pkey ? "pkey_mprotect" : "mprotect", ret, strerror(errno));
	for (size_t i = 0; i < pages; i++) {
		core_maps_perms(p + i * ps, after);
		NSBT_CHECK(strcmp(before[i], after) == 0, "%s: page %zu was %s, now %s after the refused call",
			   what, i, before[i], after);
	}
	/* Not writable: a write is SIGSEGV, as before. */
	for (size_t i = 0; i < pages; i++) {
		int status = core_touch_status(p + i * ps, true);

		NSBT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
			   "%s: a write to page %zu: %s (want SIGSEGV)", what, i, nsbt_status_str(status));
	}
}

static void
ro_all_rescued_child(void *arg)
{
	int fd;
	char *p = readonly_map(&fd, 2, MAP_SHARED | MAP_NOSIGBUS, O_RDONLY);

	(void)arg;
	core_truncate(fd, 0);
	read_all(p, 2);
	core_expect_bytes(p, 0, 2 * ps, "the rescued pages");
	expect_refused(p, 2, 0, 2 * ps, false, "all pages rescued");
	expect_refused(p, 2, 0, 2 * ps, true, "all pages rescued");
	expect_refused(p, 2, ps, ps, false, "the second page, rescued");
	/* What the kernel allows still works, and the records follow. */
	NSBT_CHECK(mprotect(p, 2 * ps, PROT_NONE) == 0 && mprotect(p, 2 * ps, PROT_READ) == 0,
		   "mprotect to PROT_NONE and back: %s", strerror(errno));
	core_expect_bytes(p, 0, 2 * ps, "the rescued pages after PROT_NONE and back");
	printf("ok: mprotect_readonly_shared: all pages rescued\n");
}

/* Protected by nosigbus_protect: the kernel's VmFlags say the same. */
static void
ro_protect_child(void *arg)
{
	int fd;
	char *p = readonly_map(&fd, 2, MAP_SHARED, O_RDONLY);

	(void)arg;
	core_truncate(fd, 0);
	read_all(p, 2);
	expect_refused(p, 2, 0, 2 * ps, false, "nosigbus_protect, all rescued");
	printf("ok: mprotect_readonly_shared: nosigbus_protect\n");
}

static void
ro_some_rescued_child(void *arg)
{
	int fd;
	char *p = readonly_map(&fd, 3, MAP_SHARED | MAP_NOSIGBUS, O_RDONLY);

	(void)arg;
	/* The second page rescued, the third in the file again: file,
	 * replaced, file. */
	core_truncate(fd, ps);
	read_all(p, 2);
	core_truncate(fd, 3 * ps);
	NSBT_CHECK(strstr(core_maps_line(p + 2 * ps), "memfd:nsbtest") &&
		   !strstr(core_maps_line(p + ps), "memfd:nsbtest"),
		   "the second page replaced, the third the file's: %s", core_maps_line(p + ps));
	expect_refused(p, 3, ps, 2 * ps, false, "from a rescued page to a file page");
	expect_refused(p, 3, ps, 2 * ps, true, "from a rescued page to a file page");
	expect_refused(p, 3, 0, 3 * ps, false, "the whole mapping, one page rescued");
	/* The records still match: the third page rescued when cut off,
	 * readable, and the rescued one still zeros. */
	core_truncate(fd, 0);
	read_all(p, 3);
	core_expect_bytes(p, 0, 3 * ps, "all pages after a second truncation");
	expect_refused(p, 3, 0, 3 * ps, false, "all pages rescued after all");
	printf("ok: mprotect_readonly_shared: some pages rescued\n");
}

static void
ro_grown_child(void *arg)
{
	int fd;
	char *p = readonly_map(&fd, 1, MAP_SHARED | MAP_NOSIGBUS, O_RDONLY), *q;

	(void)arg;
	core_truncate(fd, 3 * ps);
	q = mremap(p, ps, 3 * ps, MREMAP_MAYMOVE);
	NSBT_CHECK(q != MAP_FAILED, "mremap: %s", strerror(errno));
	core_truncate(fd, 0);
	read_all(q, 3);
	expect_refused(q, 3, 0, 3 * ps, false, "grown by mremap, all rescued");
	expect_refused(q, 3, 2 * ps, ps, true, "grown by mremap, the grown page");
	printf("ok: mprotect_readonly_shared: grown by mremap\n");
}

/* A memfd sealed against writing (seal: F_SEAL_FUTURE_WRITE, or
 * F_SEAL_WRITE where a read-only shared mapping of it is allowed, 6.7 on)
 * mapped read-only shared through its own read-write descriptor: the
 * kernel clears VM_MAYWRITE, so the pages stay unwritable once replaced. */
static void
sealed_case(int seal, const char *what)
{
	int fd = memfd_create("nsbtest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	char *p;

	NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	nsbt_fill(fd, 2 * ps);
	if (fcntl(fd, F_ADD_SEALS, seal) != 0) {
		printf("skip: mprotect_readonly_shared: %s: F_ADD_SEALS: %s\n", what, strerror(errno));
		close(fd);
		return;
	}
	p = mmap(NULL, 2 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	if (p == MAP_FAILED && errno == EPERM) {
		/* Before 6.7 any shared mapping of a write-sealed memfd. */
		printf("skip: mprotect_readonly_shared: %s: a read-only shared mapping: EPERM (before Linux 6.7)\n",
		       what);
		close(fd);
		return;
	}
	NSBT_CHECK(p != MAP_FAILED, "%s: mmap: %s", what, strerror(errno));
	/* As the kernel has it before any rescue. */
	NSBT_CHECK(mprotect(p, 2 * ps, PROT_READ | PROT_WRITE) == -1 && errno == EACCES,
		   "%s: mprotect read-write before a rescue: %s (want EACCES)", what, strerror(errno));
	core_truncate(fd, ps);
	read_all(p, 2);
	expect_refused(p, 2, 0, 2 * ps, false, what);
	expect_refused(p, 2, ps, ps, true, what);
	core_truncate(fd, 0);
	read_all(p, 2);
	expect_refused(p, 2, 0, 2 * ps, false, what);
	munmap(p, 2 * ps);
	close(fd);
	printf("ok: mprotect_readonly_shared: %s\n", what);
}

/* Sealed F_SEAL_FUTURE_WRITE after it was mapped read-only shared: the
 * replaced pages answer mprotect read-write as the kernel answers it for
 * the file's pages (the seal does not take VM_MAYWRITE off a mapping made
 * before it). */
static void
sealed_later_case(void)
{
	int fd = memfd_create("nsbtest", MFD_CLOEXEC | MFD_ALLOW_SEALING), kernel, err, ret;
	char *p;

	NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	nsbt_fill(fd, 2 * ps);
	p = core_map(NULL, 2 * ps, PROT_READ, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) != 0) {
		printf("skip: mprotect_readonly_shared: sealed later: F_ADD_SEALS: %s\n", strerror(errno));
		return;
	}
	errno = 0;
	kernel = mprotect(p, ps, PROT_READ | PROT_WRITE);
	err = errno;
	NSBT_CHECK(mprotect(p, ps, PROT_READ) == 0, "mprotect back to read-only: %s", strerror(errno));
	core_truncate(fd, ps);
	read_all(p, 2);
	errno = 0;
	ret = mprotect(p + ps, ps, PROT_READ | PROT_WRITE);
	NSBT_CHECK(ret == kernel && (ret == 0 || errno == err),
		   "sealed later: mprotect read-write of the replaced page: %d, %s; the file's page: %d, %s",
		   ret, strerror(errno), kernel, strerror(err));
	printf("ok: mprotect_readonly_shared: sealed after it was mapped (the kernel: %s)\n",
	       kernel == 0 ? "writable" : strerror(err));
}

static void
sealed_child(void *arg)
{
	(void)arg;
	sealed_later_case();
	sealed_case(F_SEAL_FUTURE_WRITE, "a memfd sealed F_SEAL_FUTURE_WRITE");
	sealed_case(F_SEAL_WRITE, "a memfd sealed F_SEAL_WRITE");
}

/* Where the kernel lets the pages become writable, they still do. */
static void
writable_allowed(int flags, int mode, const char *what)
{
	int fd;
	char *p = readonly_map(&fd, 2, flags, mode);
	char perms[5];

	core_truncate(fd, ps);
	read_all(p, 2);
	NSBT_CHECK(mprotect(p, 2 * ps, PROT_READ | PROT_WRITE) == 0, "%s: mprotect read-write: %s",
		   what, strerror(errno));
	for (size_t i = 0; i < 2; i++) {
		core_maps_perms(p + i * ps, perms);
		NSBT_CHECK(perms[1] == 'w', "%s: page %zu is %s after mprotect read-write", what, i, perms);
		p[i * ps] = 7;
	}
	core_truncate(fd, 0);
	read_all(p, 2);
	NSBT_CHECK(mprotect(p, 2 * ps, PROT_READ) == 0 &&
		   mprotect(p, 2 * ps, PROT_READ | PROT_WRITE) == 0,
		   "%s: all rescued, mprotect read-write: %s", what, strerror(errno));
	p[ps] = 8;
	printf("ok: mprotect_readonly_shared: %s stays writable\n", what);
}

static void
writable_child(void *arg)
{
	(void)arg;
	writable_allowed(MAP_PRIVATE | MAP_NOSIGBUS, O_RDONLY, "a private mapping of a read-only descriptor");
	writable_allowed(MAP_SHARED | MAP_NOSIGBUS, O_RDWR, "a shared mapping of a read-write descriptor");
	writable_allowed(MAP_SHARED, O_RDWR, "nosigbus_protect of a shared mapping of a read-write descriptor");
	writable_allowed(MAP_PRIVATE, O_RDONLY, "nosigbus_protect of a private mapping of a read-only descriptor");
}

static void
readonly_shared_child(void *arg)
{
	static const struct core_case cases[] = {
		{ "all rescued", ro_all_rescued_child },
		{ "some rescued", ro_some_rescued_child },
		{ "grown by mremap", ro_grown_child },
		{ "nosigbus_protect", ro_protect_child },
		{ "sealed memfd", sealed_child },
		{ "writable where allowed", writable_child },
	};
	int failed = 0;

	(void)arg;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[4096];
		int status = core_run_watched(cases[i].fn, NULL, nsbt_scaled(45), NULL, cases[i].name, err, sizeof(err));

		if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
			continue;
		core_expect_quiet(err, cases[i].name);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "mprotect_readonly_shared: %s: %s\n", cases[i].name,
				nsbt_status_str(status));
			failed++;
		}
	}
	if (failed)
		nsbt_fail("mprotect_readonly_shared: %d of its cases failed", failed);
}

int
main(int argc, char **argv)
{
	static const struct core_case cases[] = {
		{ "remap_file_pages_offset", remap_file_pages_child },
		{ "shmat_remap_stale_record", shmat_child },
		{ "raw_munmap_stale_record", raw_munmap_child },
		{ "mremap_program_split", program_split_child },
		{ "mremap_refreshed_split", refreshed_split_child },
		{ "refreshed_page_attrs", refreshed_attrs_child },
		{ "madv_remove_rescued", madv_remove_child },
		{ "mlock_rescued_unlocked", attrs_child },
		{ "MADV_DONTNEED, msync, mincore", page_calls_child },
		{ "mprotect_readonly_shared", readonly_shared_child },
	};

	(void)argc;
	(void)argv;
	ps = nsbt_page();
	core_require_library();
	return core_run_cases(cases, sizeof(cases) / sizeof(cases[0]), true);
}
