/* SPDX-License-Identifier: MIT */
/*
 * refresh.c - the file shown again where it came back (SPEC §5,
 * "Recovery").
 *
 * A replaced unit is private memory standing in for a part of the file
 * past its end.  When the file grows back over it - a Wayland client that
 * recovers regrows its pool, redraws and sends wl_shm_pool.resize - a
 * shared mapping must show the file there again, or the client stays
 * invisible for the rest of its connection.  So after an mremap that
 * resizes a protected shared mapping (a move alone changes nothing the
 * program sees), and on nosigbus_refresh(), every replaced
 * unit of a shared file mapping that the file now covers is mapped from
 * the file anew (MAP_FIXED, at its offset and protection, with what a new
 * VMA does not inherit given again as a rescue gives it: key, fork and
 * other advice, memory policy, locks) and is no longer counted as
 * replaced.
 * Private mappings keep their units (the program may have written them,
 * and in a private mapping what it wrote is its own), except the part an
 * mremap grows over a replaced last unit, which nothing wrote yet.  (What
 * a program wrote into a replaced unit of a shared mapping never reached
 * the file; the file speaks for that page again.)  A mapping with a unit
 * replaced that may be inside the file's size keeps its units too (see
 * candidate()).
 *
 * Mapping the file needs a descriptor of it with the mapping's access
 * mode, and a close must never release the program's POSIX locks (issue
 * 17): closing any ordinary descriptor of a file drops every lock the
 * process holds on it.  Nor may a number found in /proc/self/fd be
 * trusted later: the program's other threads close and reuse numbers
 * meanwhile (the hostile soak saw another file of the peer's mapped into
 * a FUSE file's mapping that way).  So the mapping is made in a child
 * made by clone(CLONE_VM | CLONE_VFORK) without CLONE_FILES, with a copy
 * of the descriptor table no thread changes, and only once fstat there
 * says the descriptor is the record's file:
 *  - a descriptor of the program's whose access mode suffices is used as
 *    it is: nothing is opened or closed;
 *  - otherwise one that names the file (ours, O_PATH, or the program's)
 *    is opened anew through /proc/self/fd/N.  The child shares
 *    our memory, so its mmap is ours; it has a copy of the descriptor
 *    table, and POSIX locks belong to a table: the locks its exit
 *    releases are its own, none.  It runs with every signal blocked
 *    (blocked around the clone: the table lock may not have), exits with
 *    signal 0 (no SIGCHLD reaches the
 *    program; a wait for any child without __WALL does not see it) and
 *    is reaped here.  Where the kernel refuses the clone, or a tool
 *    turns it into a fork (valgrind: then the child's mmap is not ours
 *    and it reports nothing), the units stay replaced; under a seccomp
 *    filter (which may kill on the clone, or on the scan's getdents64)
 *    nothing is tried, and they stay replaced too.
 * Without any descriptor of the file (the library keeps at most 16, see
 * files.c) the units stay replaced too.
 *
 * Runs under the table lock, with the span in flux (nsb.h): no rescue
 * runs there meanwhile.  From mremap, this flux replaces the call's own,
 * which is no longer needed by then: the records are final, and only the
 * span refreshed changes.  Never in signal context.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nsb.h"

/* A run of replaced units to map from the file: [start, end) at off. */
struct run {
	uintptr_t start, end;
	uint64_t off;
	int policy;		/* the replacement's mbind policy, kept */
	unsigned long nodes[2];
};

/* Runs are mapped a batch at a time: bounded scratch memory, whatever
 * the size of the mapping. */
#define BATCH 256

struct job {
	const struct nsb_range *r;
	struct run runs[BATCH];
	size_t n;
	char path[32];		/* /proc/self/fd/N, for the child */
	int oflags[2];		/* the child's tries */
	int tries;
	volatile size_t mapped;	/* runs mapped, from the first */
	char *stack;		/* the child's, from scratch memory */
	int fd, fd_flags;	/* the record's file's descriptor, once looked
				 * for (-2: not yet), and its F_GETFL */
	bool as_is;		/* the child maps from fd itself */
	uint64_t dev, ino;	/* the record's file */
};

/*
 * Maps the job's runs from fd, in order, until one fails.  A writable
 * mapping of a hugetlbfs file grows the file to its end (the file
 * system's mmap does, private mappings too): a run past the end (an
 * mremap's growth over a replaced last unit, whose file is not asked)
 * would lengthen the program's file.  There it is mapped without write
 * first, then given it: mprotect changes no size.  A hugetlbfs run is
 * mapped MAP_NORESERVE: the replaced unit it stands for reserved no huge
 * page, and a reservation would fail where none is free (Debian's
 * default, vm.nr_hugepages=0) for a mapping the program made with
 * MAP_NORESERVE.
 *
 * A MAP_FIXED mmap that fails may have unmapped what was there first
 * (the kernel removes the old VMAs before the file system's mmap can
 * refuse, as hugetlbfs does for want of huge pages): the run would be a
 * hole in the program's mapping.  So a failed run gets private zeros
 * again, as replaced units are, where the range is now free
 * (MAP_FIXED_NOREPLACE: where the old units are still there, they stay,
 * with what the program wrote into them).
 */
static size_t
map_runs(const struct job *j, int fd)
{
	int prot = (int)(j->r->meta & NSB_META_PROT);
	int flags = MAP_FIXED | ((j->r->meta & NSB_META_SHARED) ? MAP_SHARED : MAP_PRIVATE);
	bool huge = ((size_t)1 << NSB_META_SHIFT(j->r->meta)) > nsb_config.page_size;
	int first = huge ? prot & ~PROT_WRITE : prot;
	size_t i;

	if (huge)
		flags |= MAP_NORESERVE;
	for (i = 0; i < j->n; i++) {
		void *at = (void *)j->runs[i].start;
		size_t len = j->runs[i].end - j->runs[i].start;

		if (nsb_sys_mmap(at, len, first, flags, fd, (off_t)j->runs[i].off) == MAP_FAILED) {
			void *z = nsb_sys_mmap(at, len, prot, MAP_FIXED_NOREPLACE | MAP_PRIVATE |
					       MAP_ANONYMOUS, -1, 0);

			/* A kernel before 4.17 takes the flag as a hint. */
			if (z != MAP_FAILED && z != at)
				(void)nsb_sys_munmap(z, len);
			break;
		}
		/* Refused (the commit charge of a private mapping): private
		 * zeros again, as replaced units are. */
		if (first != prot && nsb_sys_mprotect(at, len, prot) != 0) {
			(void)nsb_sys_mmap(at, len, prot, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			break;
		}
	}
	return i;
}

/* The clone child: raw system calls only, on its own small stack. */
static int
child_main(void *arg)
{
	struct job *j = arg;
	struct stat st;
	int fd = j->as_is ? j->fd : -1;

	for (int t = 0; t < j->tries && fd < 0; t++)
		fd = (int)syscall(SYS_openat, AT_FDCWD, j->path, j->oflags[t] | O_CLOEXEC);
	if (fd >= 0 && nsb_fstat(fd, &st) == 0 && (uint64_t)st.st_dev == j->dev &&
	    (uint64_t)st.st_ino == j->ino)
		j->mapped = map_runs(j, fd);
	syscall(SYS_exit, 0);	/* closes fd in the child's table only */
	return 0;
}

/* The child's stack is scratch memory (the table lock is held): a static
 * one would cost every process a page of .bss at start-up. */
#define CHILD_STACK 16384

static void
map_in_child(struct job *j, int fd)
{
	sigset_t all, old;
	int status;
	pid_t pid;

	if (!j->stack && !(j->stack = nsb_scratch(CHILD_STACK)))
		return;
	nsb_proc_path(j->path, sizeof(j->path), "/proc/self/fd/", (unsigned long)fd, "");
	j->mapped = 0;
	sigfillset(&all);
	nsb_sys_sigmask(SIG_BLOCK, &all, &old);
	/* The C library's clone: ours would make the process ask the kernel
	 * who it is from now on (process.c), and this child calls nothing. */
	pid = real_clone(child_main, j->stack + CHILD_STACK, CLONE_VM | CLONE_VFORK, j, NULL,
			 NULL, NULL);
	if (pid > 0)
		while (syscall(SYS_wait4, pid, &status, __WALL, NULL) < 0 && errno == EINTR)
			;
	nsb_sys_sigmask(SIG_SETMASK, &old, NULL);
}

/* Maps the job's runs from the file; how many (from the first) it did. */
static size_t
map_from_file(struct job *j)
{
	const struct nsb_range *r = j->r;
	int prot = (int)(r->meta & NSB_META_PROT), flags, fd;
	bool shared = r->meta & NSB_META_SHARED, readable, rdwr;

	/* Under a seccomp filter, none of it: the scan reads a directory
	 * (getdents64) and the child is a clone with flags some filters
	 * kill on (Chromium's), both calls the library makes only where no
	 * filter is in force (sandbox.c).  The units stay replaced. */
	if (!nsb_unfiltered())
		return 0;
	/* Looked for once a record: a scan of /proc/self/fd. */
	if (j->fd == -2)
		j->fd = nsb_files_descriptor(r->file, &j->fd_flags);
	fd = j->fd;
	flags = j->fd_flags;
	if (fd < 0 || !nsb_files_identity(r->file, &j->dev, &j->ino))
		return 0;
	/* A shared mapping gets the access mode it was made with, no more:
	 * through a descriptor for writing, mprotect could make a file the
	 * program opened read-only writable (and no less: mprotect could no
	 * longer make it writable).  A private one may be written whatever
	 * the descriptor. */
	rdwr = shared && (nsb_account_may_write(r->acct) || (prot & PROT_WRITE));
	readable = !(flags & O_PATH) && (flags & O_ACCMODE) != O_WRONLY;
	j->as_is = readable && (!shared || ((flags & O_ACCMODE) == O_RDWR) == rdwr);
	j->tries = 0;
	if (!j->as_is)
		j->oflags[j->tries++] = rdwr ? O_RDWR : O_RDONLY;
	map_in_child(j, fd);
	return j->mapped;
}

/* Maps the job's batch; how many pages it mapped.  Its units are cleared
 * in the account first (a fault on one just mapped, from a file that
 * shrank again meanwhile, is a new rescue), and claimed again where the
 * mapping failed: they are still the replacement. */
static size_t
map_batch(struct job *j)
{
	const struct nsb_range *r = j->r;
	size_t unit = (size_t)1 << NSB_META_SHIFT(r->meta), done, pages = 0;

	for (size_t i = 0; i < j->n; i++) {
		nsb_account_clear(r->acct, j->runs[i].off, j->runs[i].end - j->runs[i].start);
		j->runs[i].policy = nsb_rescue_policy((const void *)j->runs[i].start, r->meta,
						      j->runs[i].nodes);
	}
	done = map_from_file(j);
	for (size_t i = 0; i < j->n; i++) {
		size_t len = j->runs[i].end - j->runs[i].start;

		if (i >= done) {
			(void)nsb_account_claim_run(r->acct, j->runs[i].off, len / unit);
			continue;
		}
		/* What the replacement had, and a new VMA does not. */
		nsb_rescue_reapply((void *)j->runs[i].start, len, r->meta, j->runs[i].policy,
				   j->runs[i].nodes);
		pages += len / nsb_config.page_size;
	}
	j->n = 0;
	return pages;
}

/* The replaced units of file record r (a copy, clipped to the span) to
 * show again: those below size, or all (size UINT64_MAX).  How many pages
 * were mapped from the file. */
static size_t
refresh_record(struct job *j, const struct nsb_range *r, uint64_t size)
{
	size_t unit = (size_t)1 << NSB_META_SHIFT(r->meta), pages = 0;

	j->r = r;
	j->n = 0;
	j->fd = -2;
	for (uintptr_t a = r->start; a < r->end; a += unit) {
		uint64_t off = r->off + (a - r->start);

		if (off >= size || !nsb_account_test(r->acct, off))
			continue;
		if (j->n && j->runs[j->n - 1].end == a) {
			j->runs[j->n - 1].end = a + unit;
			continue;
		}
		if (j->n == BATCH)
			pages += map_batch(j);
		j->runs[j->n].start = a;
		j->runs[j->n].end = a + unit;
		j->runs[j->n].off = off;
		j->n++;
	}
	if (j->n)
		pages += map_batch(j);
	return pages;
}

/* File records with replaced units: shared ones, and private ones only
 * where nothing can have been written yet (whole: a grown tail).  Not a
 * mapping with a unit replaced inside its file's size, or without knowing
 * it (NOSIGBUS_ERRORS=zero, an unverified rescue): that unit is not the
 * file coming back, and what was written there would be lost. */
static bool
candidate(const struct nsb_range *r, bool whole)
{
	return ((r->meta & NSB_META_SHARED) || whole) && !(r->meta & NSB_META_ANON) && r->file &&
	       (whole || !nsb_account_unsure(r->acct)) &&
	       nsb_account_count(r->acct, r->off, r->end - r->start);
}

size_t
nsb_refresh(uintptr_t start, uintptr_t end, bool whole)
{
	struct nsb_saved recs;
	struct job *j = NULL;
	size_t pages = 0, i;

	nsb_saved_init(&recs);
	if (nsb_ranges_collect(start, end, &recs) < 0)
		goto out;
	for (i = 0; i < recs.n && !candidate(&recs.r[i], whole); i++)
		;
	if (i == recs.n || !(j = nsb_scratch(sizeof(*j))))
		goto out;
	j->stack = NULL;
	nsb_ranges_flux(start, end, 0, 0);
	for (; i < recs.n; i++) {
		const struct nsb_range *r = &recs.r[i];
		uint64_t size = UINT64_MAX;

		if (candidate(r, whole) &&
		    (whole || nsb_files_size(r->file, r->start, r->end, r->start, &size, NULL)))
			pages += refresh_record(j, r, size);
	}
	nsb_ranges_flux_end();
out:
	nsb_saved_free(&recs);
	return pages;
}
