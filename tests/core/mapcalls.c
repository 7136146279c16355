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
 *  - madv_remove_rescued: MADV_REMOVE over a shared mapping with a
 *    rescued page succeeds, as over the kernel flag's single VMA;
 *  - mlock_rescued_unlocked: a rescued page keeps mlock, lock-on-fault,
 *    mlockall(MCL_CURRENT), MADV_DONTDUMP, MADV_(NO)HUGEPAGE and
 *    MADV_MERGEABLE (smaps VmFlags);
 *  - MADV_DONTNEED, msync and mincore over a rescued page: the kernel
 *    flag's results.
 */
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
	printf("ok: mlock_rescued_unlocked\n");
}

int
main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(void *);
	} cases[] = {
		{ "remap_file_pages_offset", remap_file_pages_child },
		{ "shmat_remap_stale_record", shmat_child },
		{ "raw_munmap_stale_record", raw_munmap_child },
		{ "mremap_program_split", program_split_child },
		{ "madv_remove_rescued", madv_remove_child },
		{ "mlock_rescued_unlocked", attrs_child },
		{ "MADV_DONTNEED, msync, mincore", page_calls_child },
	};
	int failed = 0;

	(void)argc;
	(void)argv;
	ps = nsbt_page();
	core_require_library();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int status = nsbt_run(cases[i].fn, NULL);

		if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
			continue;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "FAIL: %s: %s\n", cases[i].name, nsbt_status_str(status));
			failed++;
		}
	}
	return failed ? 1 : 0;
}
