/* SPDX-License-Identifier: MIT */
/*
 * policy.c - decides at mmap() time whether a mapping is protected.
 *
 * The decision is made from the file descriptor, never from a path, so a
 * file cannot pretend to live in memory.  With NOSIGBUS_POLICY=flag and no
 * MAP_NOSIGBUS, this costs nothing: no system call is made.  The file
 * itself (its descriptor kept for the end-of-file check) is looked up by
 * mman.c under the table lock.
 *
 * Each system call here is a fifth of what mapping a page costs, so the
 * decision takes as few as it exactly can (issue 24):
 *  - statx gives the identity and the mount.  The type and block size of
 *    a mount are those of its superblock for as long as it exists: they
 *    are kept by its unique mount ID (Linux 6.8: never reused), and
 *    fstatfs asks only for a mount not seen before.  A file on disk under
 *    the default policy costs this one call, and so does a memory-backed
 *    file.
 *  - No seal exempts a mapping (SPEC §3, issue 37).  A memfd sealed with
 *    F_SEAL_SHRINK cannot shrink, but it can be shorter than its mapping
 *    from the start (mapped longer than it is) or later (the mapping
 *    grown by mremap, as libwayland does for wl_shm_pool.resize): every
 *    libwayland compositor dies of exactly that without the library.
 *    The kernel guarantees no fault past the end for a mapping's whole
 *    life only if the file can neither shrink nor be outgrown by the
 *    mapping, and an mremap of an unrecorded mapping could not be
 *    protected: no shortcut is kept, and the seals are never asked
 *    (F_GET_SEALS only tells a memory-backed file on old kernels).
 *  - Without unique mount IDs, the older way: fcntl(F_GET_SEALS) first
 *    answers for every file (a memory-backed one gives its seals, any
 *    other EINVAL: a disk file costs this one call), then statx.  A memfd
 *    lives on the kernel's own tmpfs mount, which is never unmounted (its
 *    mount ID is never anyone else's), never remounted and has no size
 *    limit: a file there needs nothing more.  Its ID comes from a memfd
 *    of our own, made once, when the program first maps a memory-backed
 *    file (at the next, if no descriptor number was free); other mounts
 *    cost an fstatfs.  (Before Linux 3.17, fstatfs and
 *    fstat.)  A file just received is asked through the O_PATH
 *    descriptor the library keeps, as with unique IDs: F_GET_SEALS
 *    answers no O_PATH descriptor, so there the mount alone tells
 *    (path_decide): a received memfd costs one statx, not F_GET_SEALS
 *    and a statx of the program's descriptor and, at its close, an
 *    open_tree and an fstat to check it (NSB_TEST_MNT_ID=plain runs this
 *    way on any kernel).
 *  - Every protected file's faults are checked against its size at
 *    fault time (SPEC §5), a memfd's too (userfaultfd in SIGBUS mode, a
 *    swap read error and hugetlbfs fault inside the size): nothing here
 *    lets a rescue skip that.  (A tmpfs file other than a memfd cannot
 *    have seals: the kernel creates it sealed against new ones.)
 *
 * A file another process handed over (SCM_RIGHTS) is protected under shm
 * whatever its file system (received.c, issue 22), and marked received
 * whatever its file system, memory-backed too: a fault inside its size
 * is the peer's error (rescue.c, issue 37).  That check costs a disk
 * file's mapping one statx, and only in a process that has received a
 * regular file; a memory-backed one's, a look in the received table.
 * A received descriptor that no stat describes (a FUSE mount of another
 * user's: EACCES) is protected with its size unknown: foreign() below.
 *
 * Not used in signal context.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdatomic.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "nosigbus.h"
#include "nsb.h"

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_MASK
#define MAP_HUGE_MASK 0x3f
#endif

/*
 * The default huge page size, for MAP_HUGETLB without a size (policy.c,
 * mman.c's unit of a mapping that replaces records): the kernel's
 * Hugepagesize, read from /proc/meminfo once and kept (it does not change
 * while the system runs).  Where it cannot be read (no /proc, no
 * descriptor free: then asked again next time), the kernel's usual
 * default on x86-64 and aarch64, a page table's worth of pages (page
 * size / 8 of them): 2 MiB with 4 KiB pages, 32 MiB with 16 KiB, 512 MiB
 * with 64 KiB, never a fixed 2 MiB (core-atk6-hugedefault).  A kernel
 * booted with another default_hugepagesz= is then taken for its usual
 * one (libnosigbus(7), BUGS).  Not in signal context.
 */
unsigned
nsb_default_huge_shift(void)
{
	static _Atomic unsigned known;
	unsigned long kb = 0;
	unsigned shift = atomic_load_explicit(&known, memory_order_relaxed);
	char line[128];
	FILE *f;

	if (shift)
		return shift;
	f = fopen("/proc/meminfo", "re");
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "Hugepagesize: %lu kB", &kb) == 1)
				break;
		fclose(f);
	}
	if (!kb)	/* PMD_SHIFT: a page's shift and its entries' (8 bytes each) */
		return 2 * nsb_log2(nsb_config.page_size) - 3;
	shift = nsb_log2(kb * 1024);
	atomic_store_explicit(&known, shift, memory_order_relaxed);
	return shift;
}

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x1000U
#endif
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x4000U
#endif

/*
 * Whether F_GET_SEALS tells memory-backed files from others here: on
 * Linux 3.17 and later (memfd_create), where every tmpfs and hugetlbfs
 * file has seals.  Asked once, of uname.
 */
static _Atomic int seals_state;	/* 0 not asked; 1 usable; 2 not (the old way) */

static bool
seals_usable(void)
{
	int state = atomic_load_explicit(&seals_state, memory_order_relaxed);

	if (state == 0) {
		struct utsname u;
		unsigned major = 0, minor = 0;

		state = uname(&u) == 0 && sscanf(u.release, "%u.%u", &major, &minor) == 2 &&
			(major > 3 || (major == 3 && minor >= 17)) ? 1 : 2;
		atomic_store_explicit(&seals_state, state, memory_order_relaxed);
	}
	return state == 1;
}

/*
 * The mount memfds live on, from one memfd of our own, made the first time
 * a memory-backed file is mapped (a program that maps none never has the
 * library make one): its ID of the kind statx gives here (the unique one
 * where the kernel has it), or mnt_mask 0 if statx cannot tell.
 */
static struct {
	_Atomic int state;	/* 0 not made; 1 known */
	unsigned mnt_mask;	/* STATX_MNT_ID_UNIQUE, STATX_MNT_ID, or 0 */
	uint64_t memfd_mnt;
} probe;

static unsigned
memfd_mount(uint64_t *id)
{
	if (!atomic_load_explicit(&probe.state, memory_order_acquire)) {
		struct statx sx;
		int fd = memfd_create("nosigbus-probe", MFD_CLOEXEC);

		if (fd >= 0) {
			/* (NSB_TEST_MNT_ID=plain: as a kernel without unique IDs.) */
			if (!nsb_config.test_plain_mnt_id &&
			    statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID_UNIQUE, &sx) == 0) {
				probe.mnt_mask = sx.stx_mask & STATX_MNT_ID_UNIQUE;
				probe.memfd_mnt = sx.stx_mnt_id;
			}
			if (!probe.mnt_mask &&
			    statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID, &sx) == 0) {
				probe.mnt_mask = sx.stx_mask & STATX_MNT_ID;
				probe.memfd_mnt = sx.stx_mnt_id;
			}
			close(fd);
		} else if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) {
			/* No number free (or no memory) this once: not the
			 * kernel's answer.  Kept, it cost every later
			 * decision on a memfd an fstatfs for the process's
			 * life (syscalls.bats); asked again by the next. */
			*id = 0;
			return 0;
		}
		atomic_store_explicit(&probe.state, 1, memory_order_release);
	}
	*id = probe.memfd_mnt;
	return probe.mnt_mask;
}

/* The type and block size of mounts seen before, by unique mount ID. */
#define MOUNTS 16
static struct mount_seen {
	_Atomic uint64_t id;	/* 0: free; written last */
	_Atomic long type;
	_Atomic long bsize;
} mounts[MOUNTS];
static atomic_uint mounts_next;

static bool
mount_known(uint64_t id, long *type, long *bsize)
{
	for (unsigned i = 0; i < MOUNTS; i++)
		if (atomic_load_explicit(&mounts[i].id, memory_order_acquire) == id) {
			*type = mounts[i].type;
			*bsize = mounts[i].bsize;
			/* Still the same entry: not overwritten meanwhile. */
			if (atomic_load_explicit(&mounts[i].id, memory_order_acquire) == id)
				return true;
		}
	return false;
}

/* Racing writers may lose an entry: it is asked for again, never wrong
 * (an entry is cleared before it changes, and set after). */
static void
mount_seen(uint64_t id, long type, long bsize)
{
	struct mount_seen *m = &mounts[atomic_fetch_add(&mounts_next, 1) % MOUNTS];

	atomic_store_explicit(&m->id, 0, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	m->type = type;
	m->bsize = bsize;
	atomic_store_explicit(&m->id, id, memory_order_release);
}

/* mount_of() for a mount not seen before: fstatfs. */
static __attribute__((noinline)) bool
mount_ask(int fd, const struct statx *sx, long *type, long *bsize)
{
	bool unique = (sx->stx_mask & STATX_MNT_ID_UNIQUE) != 0;
	struct statfs fs;

	if (fstatfs(fd, &fs) < 0)
		return false;
	*type = (long)fs.f_type;
	*bsize = (long)fs.f_bsize;
	if (unique)
		mount_seen(sx->stx_mnt_id, *type, *bsize);
	return true;
}

/* The file system type and block size of the file's mount, or false.
 * Inlined: a mount seen before (the usual answer) costs no call. */
static inline bool
mount_of(int fd, const struct statx *sx, long *type, long *bsize)
{
	if ((sx->stx_mask & STATX_MNT_ID_UNIQUE) && mount_known(sx->stx_mnt_id, type, bsize))
		return true;
	return mount_ask(fd, sx, type, bsize);
}

/* Does statx give unique mount IDs here?  0 not known yet, 1 yes, 2 no. */
static _Atomic int unique_ids;

/*
 * Without unique mount IDs (before Linux 6.8), a file just received,
 * asked through its O_PATH descriptor pfd (decide()): F_GET_SEALS, the
 * older way's first question, answers no O_PATH descriptor, but the
 * mount does - the memfds' by its ID (their mount is never unmounted:
 * its ID is nobody else's), any other by fstatfs of pfd.  So the
 * decision is asked of the descriptor the library keeps, as with unique
 * IDs: a received memfd costs its statx alone, and the program's close
 * nothing (two calls fewer a pool than through the program's
 * descriptor: F_GET_SEALS at the mmap, and open_tree's check at the
 * close).  False: ask the program's descriptor the older way, with *err
 * the statx's errno (0: it answered, short).
 */
static __attribute__((noinline)) bool
path_decide(int pfd, struct statx *sx, long *type, long *bsize, bool *memfd, int *err)
{
	uint64_t memfd_mnt;
	unsigned mask = memfd_mount(&memfd_mnt);

	*err = 0;
	if (statx(pfd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | mask | STATX_BTIME, sx) != 0) {
		*err = errno;
		return false;
	}
	if ((sx->stx_mask & STATX_BASIC_STATS) != STATX_BASIC_STATS)
		return false;
	*memfd = mask && (sx->stx_mask & mask) && sx->stx_mnt_id == memfd_mnt;
	if (*memfd) {
		*type = TMPFS_MAGIC;
		return true;
	}
	return mount_of(pfd, sx, type, bsize);
}


/* Only the fields a decision's st is read for (st_dev, st_ino, st_mode:
 * nsb_decision in nsb.h), and the size's: not the whole struct zeroed
 * first, which cost a tenth of the decision (26 instructions, issue 40). */
static void
stat_of(const struct statx *sx, struct stat *st)
{
	st->st_dev = makedev(sx->stx_dev_major, sx->stx_dev_minor);
	st->st_ino = (ino_t)sx->stx_ino;
	st->st_mode = sx->stx_mode;
	st->st_size = (off_t)sx->stx_size;
	st->st_blksize = (blksize_t)sx->stx_blksize;
}

/* Inlined into its one caller: one call and one set of saved registers
 * a decision, not two. */
static inline __attribute__((always_inline)) void decide(int prot, int flags, int fd,
							 struct nsb_decision *d);

void
nsb_policy_decide(int prot, int flags, int fd, struct nsb_decision *d)
{
	d->pfd = -1;
	decide(prot, flags, fd, d);
	if (!d->protect)
		nsb_policy_drop(d);
}

/* The decision's descriptor, which nobody took (nsb_policy_drop). */
void
nsb_policy_drop_fd(struct nsb_decision *d)
{
	int saved_errno = errno;

	syscall(SYS_close, d->pfd);
	errno = saved_errno;
	d->pfd = -1;
}

/*
 * A stat of fd failed with err: is fd a descriptor another process handed
 * over whose file system refuses to describe it (received.c: a FUSE file
 * system of another user's, mounted without allow_other, answers EACCES
 * to this process's fstat and statx, and maps and reads all the same)?
 * Then it is the peer's file, protected as a received one whatever the
 * policy but flag, with its size unknown (NSB_META_FOREIGN): every
 * fault in it is rescued and counted unverified under NOSIGBUS_ERRORS=peer
 * and zero (rescue.c), and under pass none is, so the mapping is not
 * protected at all - pass gives every error of the file system to the
 * program, and without the size a fault past the end cannot be told from
 * one.  Its identity is its arrival (NSB_DEV_FOREIGN, arrival): never the
 * same as another file's, never merged with one; a files.c entry is made
 * for it only with the log on, to name its path and sender.  No system
 * call: the decision costs what the failed stat cost.
 */
static bool
foreign(int flags, int err, int fd, struct nsb_decision *d)
{
	uint32_t arrival;

	if (err == ENOSYS || err == EBADF || err == EINVAL || err == EFAULT ||
	    !nsb_received_foreign(fd, &arrival) ||
	    (!(flags & MAP_NOSIGBUS) && nsb_config.errors == NSB_ERRORS_PASS))
		return false;
	memset(&d->st, 0, sizeof(d->st));
	d->st.st_dev = (dev_t)NSB_DEV_FOREIGN;
	d->st.st_ino = (ino_t)arrival;
	d->st.st_mode = S_IFREG;
	d->has_file = nsb_config.log != 0;
	d->memfs = false;
	d->meta = NSB_META_FOREIGN;
	return true;
}

static inline __attribute__((always_inline)) void
decide(int prot, int flags, int fd, struct nsb_decision *d)
{
	bool anon = (flags & MAP_ANONYMOUS) || fd < 0;
	bool flagged = flags & MAP_NOSIGBUS;
	/* The page size is a power of two: its shift is its trailing zeros
	 * (one instruction; nsb_log2 rounds up for any value). */
	unsigned shift = (unsigned)__builtin_ctzll((unsigned long long)nsb_config.page_size);
	struct statfs fs;
	bool received = false;

	d->protect = false;
	d->has_file = false;
	d->memfs = false;
	if (!flagged && (anon || nsb_config.policy == NSB_POLICY_FLAG))
		return;

	if (!anon && !nsb_unfiltered()) {
		/* Under a seccomp filter (sandbox.c): fstat alone, which every
		 * filter allows.  It cannot tell a memory-backed file from
		 * another (statx's mount, fstatfs and F_GET_SEALS are what
		 * some filter refuses or kills on): under shm, a file received
		 * from another process is protected, and whatever else the
		 * policy might have protected stays as the program made it. */
		d->has_file = nsb_fstat(fd, &d->st) == 0;
		if (!d->has_file && foreign(flags, errno, fd, d)) {
			received = true;
			goto decided;
		}
		if (!d->has_file || !S_ISREG(d->st.st_mode))
			return;
		if (nsb_received_any()) {
			struct nsb_identity id = { .dev = (uint64_t)d->st.st_dev,
						   .ino = (uint64_t)d->st.st_ino };

			received = nsb_received_is(&id);
		}
		if (!flagged && nsb_config.policy == NSB_POLICY_SHM && !received) {
			nsb_sandbox_unchecked();
			return;
		}
		d->meta = 0;
	} else if (anon) {
		if (flags & MAP_HUGETLB) {
			unsigned s = ((unsigned)flags >> MAP_HUGE_SHIFT) & MAP_HUGE_MASK;

			shift = s ? s : nsb_default_huge_shift();
		}
		d->meta = NSB_META_ANON;
	} else if (seals_usable()) {
		int seals = -1, err;
		struct statx sx;
		long type = 0, bsize = 0;
		unsigned mask = 0;	/* no mount needed: not memory-backed */
		uint64_t memfd_mnt = 0;
		bool memfd = false, maybe_received, by_mount, by_path = false;

		/* statx first, where the mount tells the file system (see the
		 * top); else F_GET_SEALS first.  A file just received is
		 * asked through an O_PATH descriptor of it, which the library
		 * then keeps (files.c): the program closes its own at once;
		 * without unique mount IDs too (path_decide). */
		by_mount = atomic_load_explicit(&unique_ids, memory_order_relaxed) != 2 &&
			   !nsb_config.test_plain_mnt_id;
		if (nsb_config.errors != NSB_ERRORS_ZERO && nsb_received_hint_take(fd))
			d->pfd = nsb_files_path_descriptor(fd);
		if (by_mount &&
		    statx(d->pfd >= 0 ? d->pfd : fd, "", AT_EMPTY_PATH,
			  STATX_BASIC_STATS | STATX_MNT_ID_UNIQUE | STATX_BTIME, &sx) != 0) {
			if (foreign(flags, errno, fd, d)) {
				nsb_policy_drop(d);
				received = true;
				goto decided;
			}
			by_mount = false;
		}
		by_mount = by_mount && (sx.stx_mask & STATX_BASIC_STATS) == STATX_BASIC_STATS;
		if (by_mount && !(sx.stx_mask & STATX_MNT_ID_UNIQUE)) {
			atomic_store_explicit(&unique_ids, 2, memory_order_relaxed);
			by_mount = false;
		}
		if (by_mount && mount_of(d->pfd >= 0 ? d->pfd : fd, &sx, &type, &bsize)) {
			d->memfs = type == TMPFS_MAGIC || type == HUGETLBFS_MAGIC;
		} else if (!by_mount && d->pfd >= 0 &&
			   path_decide(d->pfd, &sx, &type, &bsize, &memfd, &err)) {
			by_path = true;
			d->memfs = type == TMPFS_MAGIC || type == HUGETLBFS_MAGIC;
		} else {
			if (!by_mount && d->pfd >= 0 && err && foreign(flags, err, fd, d)) {
				nsb_policy_drop(d);
				received = true;
				goto decided;
			}
			by_mount = false;
			nsb_policy_drop(d);	/* the older way: the program's */
			seals = fcntl(fd, F_GET_SEALS);
			err = errno;
			if (seals < 0 && err != EINVAL)
				goto slow;	/* not a file we can map anyway */
			d->memfs = seals >= 0;
		}
		/* Under shm, a file on disk is protected only if another
		 * process handed it over (received.c); a memory-backed one
		 * is asked too, for its errors are the peer's (rescue.c). */
		maybe_received = nsb_received_any() || nsb_received_foreign_any();
		if (!flagged && nsb_config.policy == NSB_POLICY_SHM && !d->memfs && !maybe_received)
			return;
		if (by_mount || by_path) {
			/* statx said it all (and the mount) */
		} else {
			if (d->memfs)
				mask = memfd_mount(&memfd_mnt);
			if (statx(fd, "", AT_EMPTY_PATH,
				  STATX_BASIC_STATS | mask | (maybe_received ? STATX_BTIME : 0),
				  &sx) < 0) {
				if (foreign(flags, errno, fd, d)) {
					received = true;
					goto decided;
				}
				goto slow;
			}
			if ((sx.stx_mask & STATX_BASIC_STATS) != STATX_BASIC_STATS)
				goto slow;
			memfd = mask && (sx.stx_mask & mask) && sx.stx_mnt_id == memfd_mnt;
		}
		if (maybe_received) {
			struct nsb_identity id;

			nsb_identity_from(&sx, &id);
			received = nsb_received_is(&id);
		}
		if (!flagged && nsb_config.policy == NSB_POLICY_SHM && !d->memfs && !received)
			return;
		stat_of(&sx, &d->st);
		d->has_file = true;
		if (!by_mount && !by_path && d->memfs && !memfd && !mount_of(fd, &sx, &type, &bsize)) {
			if (!flagged)
				return;
			type = 0;
		}
		if (type == HUGETLBFS_MAGIC)
			shift = nsb_log2((size_t)bsize);
		if (!flagged && !S_ISREG(d->st.st_mode))
			return;
		d->meta = d->memfs ? NSB_META_MEMFS : 0;
	} else {
slow:
		if (fstatfs(fd, &fs) < 0) {
			if (!flagged)
				return;
			fs.f_type = 0;
		}
		d->memfs = fs.f_type == TMPFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC;
		if (fs.f_type == HUGETLBFS_MAGIC)
			shift = nsb_log2((size_t)fs.f_bsize);
		d->has_file = nsb_fstat(fd, &d->st) == 0;
		if (!d->has_file && foreign(flags, errno, fd, d)) {
			received = true;
			goto decided;
		}
		if (d->has_file && nsb_received_any()) {
			struct nsb_identity id = { .dev = (uint64_t)d->st.st_dev,
						   .ino = (uint64_t)d->st.st_ino };

			received = nsb_received_is(&id);
		}
		if (!flagged) {
			if (nsb_config.policy == NSB_POLICY_SHM && !d->memfs && !received)
				return;
			if (!d->has_file || !S_ISREG(d->st.st_mode))
				return;
		}
		d->meta = d->memfs ? NSB_META_MEMFS : 0;
	}
decided:
	if (received)
		d->meta |= NSB_META_RECEIVED;	/* a client's buffer: its default fill */
	d->meta |= ((uint32_t)prot & NSB_META_PROT) | NSB_META_MKSHIFT(shift) |
		   NSB_META_MKPKEY(-1);
	if ((flags & MAP_TYPE) != MAP_PRIVATE)
		d->meta |= NSB_META_SHARED;
	if (!flagged)
		d->meta |= NSB_META_POLICY;	/* its own default fill */
	d->protect = true;
}
