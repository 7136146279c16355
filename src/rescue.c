/* SPDX-License-Identifier: MIT */
/*
 * rescue.c - the SIGBUS handler.
 *
 * Everything in this file runs in signal context but nsb_rescue_prepare,
 * nsb_rescue_arm, nsb_rescue_regrown and nsb_rescue_after_fork_child.
 * The handler finds the record, decides whether the fault is one to
 * rescue (a page at or past the end of its file, SPEC §5), maps
 * zero-filled private memory over the faulting page (or more, by
 * NOSIGBUS_FILL: anonymous, or the zero file below), and returns so that the
 * instruction runs again.  No locks, no malloc, no stdio; errno is
 * preserved.  What is not rescued goes to nsb_disp_chain(), which behaves
 * as if the library were absent.
 *
 * Whether a unit may be replaced is decided by the record's account
 * (account.c), exactly: a unit is replaced at most once while its mapping
 * lives, by the rescue that set its bit.  No hash, ring or floor that can
 * forget decides it, and mincore() is not asked.
 *
 * Three outcomes besides a rescue never wait for anyone: "not ours" (pass
 * the signal on), and "fault again" - a call is changing the records
 * there (flux), another thread is replacing the unit (its bit is set and
 * the rescue is under way), or the unit no longer faults (it was replaced
 * while this fault's signal was on its way, or the file grew back).
 * Where another thread is the reason (a call, a replacement), the fault
 * gives up its CPU first (sched_yield): a thread of real-time priority
 * faulting again and again would otherwise keep that thread, if it is of
 * the same priority on the same CPU, from ever running (a livelock).
 *
 * Stack: the handler may run on a small alternate stack (Rust gives each
 * thread 8 KiB); no buffer here is bigger than a few words.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nsb.h"

enum verdict { NOT_OURS, RESCUED, AGAIN };

/*
 * Rescues in progress, by account: a thread that finds a unit's bit set
 * tells from here whether its replacement may still be under way (fault
 * again until it is done) or is done (then the fault was on its way
 * before the replacement, and faulting again finds the new page).  Slots
 * are taken, never shared out and never evicted: a full table only makes
 * a fault come back.  Each slot says which units its owner may claim, so
 * that a fork child (which has none of the owners) can give back the
 * claims of replacements that never happened there.
 */
#define BUSY_SLOTS 64

struct busy {
	atomic_uintptr_t owner;	/* 0: free; else its thread's (busy_tag) */
	atomic_uintptr_t acct;	/* 0 or 1: being taken */
	atomic_uintptr_t start, end;
};

/* [signal-safe] The owner a slot of this thread's names: the address of
 * a word of its TLS, no system call.  A vfork child runs on its parent's
 * TLS: the slots it leaves when it dies in a rescue name its parent's
 * thread, which gives them back (nsb_rescue_vfork_left). */
static inline uintptr_t
busy_tag(void)
{
	return (uintptr_t)&nsb_lock_id;
}

/* Made when the handler is installed (a process that never installs it
 * pays nothing for it at start-up), from memory.c. */
static struct busy *busy;
static char *signal_space;	/* nsb_signal_space() */

/*
 * The zero file.  A rescued tail is read, by a compositor, as often as
 * not: a client's buffer is read with the kernel's fault-around (16 pages
 * a fault, the file's pages being in its page cache), fresh anonymous
 * memory one fault a page, so a frame read from a truncated pool's
 * replaced tail cost 1.55-1.77x the same frame untruncated.  Populating
 * the fill with the shared zero page at once (MADV_POPULATE_READ) made
 * that frame cheap where the kernel maps the zero page, at a price for
 * writers: every page then took a second, copy-on-write fault (a
 * write-first pass 1.46-1.49x fresh memory), and where the kernel maps
 * no zero page (some paravirtualised guests) it could not be done at all.
 *
 * So a fill whose faulting access is a read is mapped private from one
 * memfd of the library's own, zero-filled and sealed (its size, its
 * contents: nothing can ever write it or make it shorter): its pages, once
 * read, stay in its page cache, and the next tail mapped from it is read
 * with fault-around, on every kernel.  A fill whose faulting access is a
 * write is fresh anonymous memory (one fault a page, as any new memory),
 * as is a single page, a fill of huge pages, and every unit when the zero
 * file cannot be had.  A write into a tail mapped from the zero file
 * copies the page (one fault, as a write to fresh memory, but a copy
 * from the page cache costs a little more than a fresh page: a tail read
 * and then written pays that).
 *
 * Memory: the zero file is ZERO_FILE_SIZE bytes, and a unit of file
 * offset off is mapped from its offset off % ZERO_FILE_SIZE (pieces split
 * where that wraps: VMAs of one fill stay few, and the tails a client
 * makes, wherever their offsets, share the same pages): whatever the
 * pools, the library holds at most ZERO_FILE_SIZE of memory for it (only
 * the pages ever read), never a page per truncated pool.  At most
 * ZERO_SPAN_MAX bytes of a fill are mapped from it, the rest anonymous.
 *
 * Made the first time a read-first fill needs it, in the handler (a
 * process never rescued never has it): memfd_create, ftruncate and
 * F_ADD_SEALS, moved to a high number (close-on-exec), never under a
 * seccomp filter (memfd_create is a call some filters kill on:
 * sandbox.c), nor in a vfork child (its descriptor table is not ours).
 * It is checked with fstat against the inode it was made with before and
 * after every use: a program that closes the number (closefrom) or reuses
 * it only makes the library make another.  NSB_TEST_ZERO_FILE=off makes
 * every fill anonymous (tests, and the benchmark's comparison).
 */
#define ZERO_FILE_SIZE	((size_t)64 << 20)
#define ZERO_SPAN_MAX	((size_t)256 << 20)
#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1
#endif
#ifndef MPOL_F_ADDR
#define MPOL_F_ADDR (1 << 1)
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif
#ifndef F_ADD_SEALS
#define F_ADD_SEALS 1033
#define F_SEAL_SEAL 0x0001
#define F_SEAL_SHRINK 0x0002
#define F_SEAL_GROW 0x0004
#define F_SEAL_WRITE 0x0008
#endif
#ifndef SYS_memfd_create
#error "SYS_memfd_create"
#endif

/* -1: not made (yet); -2: never (the kernel or NSB_TEST_ZERO_FILE says
 * no); -3: being made by the one thread that claimed it (compare and
 * swap), the others filling anonymously meanwhile: none waits for it, a
 * thread can be stopped by the program.  The identity is written by that
 * thread alone, before it publishes the number (release): a reader that
 * loads the number (acquire) and then the identity, and finds the number
 * still there, has the pair of one file. */
#define ZERO_NEVER (-2)
#define ZERO_MAKING (-3)
static atomic_int zero_fd = -1;
static _Atomic uint64_t zero_dev, zero_ino;
static atomic_bool zero_off;

/* [signal-safe] Is fd the zero file?  Keeps errno. */
static bool
zero_file_is(int fd)
{
	int saved_errno = errno;
	struct stat st;
	bool ours = fd >= 0 && nsb_fstat(fd, &st) == 0 &&
		    nsb_rescue_zero_file((uint64_t)st.st_dev, (uint64_t)st.st_ino);

	errno = saved_errno;
	return ours;
}

/* [signal-safe] Is (dev, ino) the published zero file's?  No while one is
 * being made (its identity may be half written). */
bool
nsb_rescue_zero_file(uint64_t dev, uint64_t ino)
{
	int fd = atomic_load_explicit(&zero_fd, memory_order_acquire);
	bool same = fd >= 0 && ino == atomic_load(&zero_ino) && dev == atomic_load(&zero_dev);

	return same && atomic_load(&zero_fd) == fd;
}

/* [signal-safe] A new zero file, numbered high, its identity in *dev and
 * *ino; -1, or -2 if the kernel has none to give.  Out of line: its frame (a struct stat) is on the
 * handler's stack only while the file is made (SPEC §5's budget).  Only
 * at or above top - 32 (the man page's "Descriptors"): with a soft
 * RLIMIT_NOFILE below 64, or every number there taken, none is made (-1:
 * asked again by a later fill), the fill is anonymous, and the program's
 * next open still gets the number it would get without the library.  Nor
 * under a soft RLIMIT_FSIZE below its size (the ftruncate's SIGXFSZ). */
__attribute__((noinline)) static int
zero_file_make(uint64_t *dev, uint64_t *ino)
{
	const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;
	struct rlimit rl;
	struct stat st;
	int fd, high;

	if (syscall(SYS_getrlimit, RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 64)
		return -1;
	/* A size past the soft RLIMIT_FSIZE: the kernel refuses the
	 * ftruncate (EFBIG) and sends the process SIGXFSZ, whose default
	 * action kills it.  None made then (-1: a raised limit lets a later
	 * fill make it). */
	if (syscall(SYS_getrlimit, RLIMIT_FSIZE, &rl) != 0 ||
	    (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < ZERO_FILE_SIZE))
		return -1;
	fd = (int)syscall(SYS_memfd_create, "nosigbus-zero",
			  MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
	if (fd < 0 && errno == EINVAL)	/* before Linux 6.3 */
		fd = (int)syscall(SYS_memfd_create, "nosigbus-zero",
				  MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return errno == ENOSYS || errno == EPERM || errno == EACCES || errno == EINVAL
			       ? -2 : -1;
	/* Out of the numbers a program counts on being free, below the
	 * library's kept descriptors (files.c). */
	high = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC,
			    (rl.rlim_cur > 1024 ? 1024 : (int)rl.rlim_cur) - 32);
	(void)syscall(SYS_close, fd);
	if (high < 0)
		return -1;
	if (syscall(SYS_ftruncate, high, (off_t)ZERO_FILE_SIZE) != 0 ||
	    syscall(SYS_fcntl, high, F_ADD_SEALS, seals) != 0 || nsb_fstat(high, &st) != 0) {
		(void)syscall(SYS_close, high);
		return -1;
	}
	*dev = (uint64_t)st.st_dev;
	*ino = (uint64_t)st.st_ino;
	return high;
}

/* [signal-safe] The zero file's descriptor, made if need be, or -1. */
static int
zero_file(void)
{
	int fd = atomic_load_explicit(&zero_fd, memory_order_acquire), made;
	uint64_t dev, ino;

	if (fd >= 0 && zero_file_is(fd))
		return fd;
	if (fd == ZERO_NEVER || fd == ZERO_MAKING ||
	    atomic_load_explicit(&zero_off, memory_order_relaxed) || nsb_in_vfork_child() ||
	    !nsb_unfiltered())
		return -1;
	/* Not made, or the program closed or reused its number: another,
	 * by the thread that claims the making; one that finds it claimed
	 * (here or above) fills anonymously. */
	if (!atomic_compare_exchange_strong(&zero_fd, &fd, ZERO_MAKING))
		return -1;
	made = zero_file_make(&dev, &ino);
	if (made < 0) {
		atomic_store_explicit(&zero_fd, made == -2 ? ZERO_NEVER : -1, memory_order_release);
		return -1;
	}
	atomic_store_explicit(&zero_dev, dev, memory_order_relaxed);
	atomic_store_explicit(&zero_ino, ino, memory_order_relaxed);
	atomic_store_explicit(&zero_fd, made, memory_order_release);
	return made;
}

/* [signal-safe] Maps [start, end) (file offset off) from the zero file
 * at offset off % ZERO_FILE_SIZE, piece by piece where that wraps, at
 * most ZERO_SPAN_MAX bytes.  Where it mapped up to (start: nothing). */
static uintptr_t
zero_map(uintptr_t start, uintptr_t end, uint64_t off, int prot)
{
	int fd = zero_file();
	uintptr_t at = start, lim = end - start > ZERO_SPAN_MAX ? start + ZERO_SPAN_MAX : end;

	while (fd >= 0 && at < lim) {
		uint64_t zoff = (off + (at - start)) % ZERO_FILE_SIZE;
		size_t len = ZERO_FILE_SIZE - zoff < lim - at ? ZERO_FILE_SIZE - zoff : lim - at;

		if (nsb_sys_mmap((void *)at, len, prot, MAP_FIXED | MAP_PRIVATE, fd, (off_t)zoff) ==
		    MAP_FAILED)
			break;
		at += len;
	}
	/* The number named the zero file all along (see above); if not, what
	 * was mapped from it is made anonymous by the caller. */
	if (at > start && !zero_file_is(fd))
		return start;
	return at;
}

/* [signal-safe] */
void *
nsb_signal_space(enum nsb_space_user user, int slot)
{
	if (!signal_space)
		return NULL;
	return signal_space + ((size_t)user * NSB_SIGNAL_SLOTS + (size_t)slot) * NSB_SIGNAL_SPACE;
}

int
nsb_rescue_prepare(void)
{
	if (!busy) {
		signal_space = nsb_memory((size_t)NSB_SPACE_USERS * NSB_SIGNAL_SLOTS * NSB_SIGNAL_SPACE);
		if (!signal_space)
			return -1;
		busy = nsb_memory(BUSY_SLOTS * sizeof(*busy));
	}
	return busy ? 0 : -1;
}

/*
 * At the first protected record (policy.c): NSB_TEST_ZERO_FILE=off read
 * here, where getenv may be called.  The zero file itself is made by the
 * first rescue that needs it.
 */
void
nsb_rescue_arm(void)
{
	static atomic_bool asked;
	const char *v;

	if (atomic_load_explicit(&asked, memory_order_acquire) || atomic_exchange(&asked, true))
		return;
	v = nsb_config.secure ? NULL : getenv("NSB_TEST_ZERO_FILE");
	if (v && !strcmp(v, "off"))
		atomic_store(&zero_off, true);
}

/* [signal-safe] A slot for a rescue in acct of [start, end), or -1. */
static int
busy_enter(const struct nsb_account *acct, uintptr_t start, uintptr_t end)
{
	unsigned first = (unsigned)(((uintptr_t)acct >> 6) * 2654435761u) % BUSY_SLOTS;

	for (unsigned i = 0; i < BUSY_SLOTS; i++) {
		struct busy *b = &busy[(first + i) % BUSY_SLOTS];
		uintptr_t seen = 0;

		if (atomic_load(&b->owner) == 0 &&
		    atomic_compare_exchange_strong(&b->owner, &seen, busy_tag())) {
			atomic_store(&b->acct, (uintptr_t)1);
			atomic_store(&b->start, start);
			atomic_store(&b->end, end);
			atomic_store(&b->acct, (uintptr_t)acct);
			return (int)((first + i) % BUSY_SLOTS);
		}
	}
	return -1;
}

/* [signal-safe] Is another rescue in acct that may replace the unit at
 * addr under way?  (A slot being taken counts: it may be one.) */
static bool
busy_other(const struct nsb_account *acct, uintptr_t addr, int mine)
{
	for (int i = 0; i < BUSY_SLOTS; i++) {
		uintptr_t a = atomic_load(&busy[i].acct);

		if (i == mine || !atomic_load(&busy[i].owner) || (a != (uintptr_t)acct && a > 1))
			continue;
		if (a <= 1 || (atomic_load(&busy[i].start) <= addr && addr < atomic_load(&busy[i].end)))
			return true;
	}
	return false;
}

/* [signal-safe] */
static void
busy_leave(int slot)
{
	atomic_store(&busy[slot].acct, 0);
	atomic_store(&busy[slot].owner, 0);
}

/* A rescue that was under way in another thread at the fork. */
struct lost_rescue {
	uintptr_t acct, start, end;
};

/* Units it claimed that the child has as the file's pages were never
 * replaced here: their claims are given back. */
static int
give_back(const struct nsb_vma *vma, void *arg)
{
	const struct lost_rescue *l = arg;
	uintptr_t s = vma->start > l->start ? vma->start : l->start;
	uintptr_t e = vma->end < l->end ? vma->end : l->end;

	if (vma->anon)
		return 0;	/* the replacement happened before the fork */
	for (uintptr_t a = s; a < e; a += nsb_config.page_size) {
		struct nsb_range r;
		int ticket;

		if (nsb_ranges_enter(a, &r, &ticket) != NSB_LOOKUP_FOUND)
			continue;
		if ((uintptr_t)r.acct == l->acct && nsb_account_test(r.acct, r.off + (a - r.start)))
			nsb_account_unclaim(r.acct, r.off + (a - r.start), 1);
		nsb_ranges_leave(ticket);
	}
	return 0;
}

/*
 * The child has one thread: rescues that were under way in others at the
 * fork are gone with them.  A claimed unit whose page the child has from
 * the file (the replacement came after the fork, or never) is given back;
 * one whose page is anonymous memory was replaced.  One read of the maps
 * per such rescue, in the rare child forked while one was under way.
 */
void
nsb_rescue_after_fork_child(void)
{
	int making = ZERO_MAKING;

	/* A zero file being made by a thread the child does not have: the
	 * child makes its own when it needs one. */
	atomic_compare_exchange_strong(&zero_fd, &making, -1);
	for (int i = 0; busy && i < BUSY_SLOTS; i++) {
		struct lost_rescue l = { atomic_load(&busy[i].acct), atomic_load(&busy[i].start),
					 atomic_load(&busy[i].end) };

		atomic_store(&busy[i].acct, 0);
		atomic_store(&busy[i].owner, 0);
		if (l.acct > 1 && l.start < l.end)
			(void)nsb_maps_each(l.start, l.end, false, give_back, &l);
	}
}

/*
 * The parent of a vfork child that died (process.c): the slots of the
 * rescues it was making on this thread's TLS are let go, and the units
 * it claimed given back where their page is still the file's, as for a
 * fork child (give_back: one read of the maps a slot; where the maps
 * cannot be read, under a filter, the claim stays, and a fault on that
 * unit goes to the program).  The thread itself holds none as it calls
 * vfork: a rescue runs with every signal blocked, and calls nothing that
 * makes a process.  A handler-free scan of 64 slots, only after a death.
 */
void
nsb_rescue_vfork_left(void)
{
	for (int i = 0; busy && i < BUSY_SLOTS; i++) {
		if (atomic_load(&busy[i].owner) != busy_tag())
			continue;
		struct lost_rescue l = { atomic_load(&busy[i].acct), atomic_load(&busy[i].start),
					 atomic_load(&busy[i].end) };

		atomic_store(&busy[i].acct, 0);
		atomic_store(&busy[i].owner, 0);
		if (l.acct > 1 && l.start < l.end)
			(void)nsb_maps_each(l.start, l.end, false, give_back, &l);
	}
}

/* [signal-safe] The memory policy at p if the record says the program
 * set one (mbind), read while the page is still the mapping's; -1 if none. */
int
nsb_rescue_policy(const void *p, uint32_t meta, unsigned long nodes[2])
{
	int policy = -1;

	nodes[0] = nodes[1] = 0;	/* 64 or 128 nodes; more: not kept */
	if ((meta & NSB_META_MBIND) &&
	    syscall(SYS_get_mempolicy, &policy, nodes, NSB_POLICY_BITS, p, MPOL_F_ADDR) != 0)
		policy = -1;
	return policy;
}

/* [signal-safe] What a new VMA over [p, p + len) does not inherit from the
 * one it replaced, given again from the record's meta: its key, fork
 * advice, dump and huge page advice, merging, memory policy (from
 * nsb_rescue_policy) and locks.  For a rescue, and for a refresh's
 * mapping of the file (refresh.c). */
void
nsb_rescue_reapply(void *p, size_t len, uint32_t meta, int policy, const unsigned long nodes[2])
{
	int prot = (int)(meta & NSB_META_PROT);
	int pkey = NSB_META_PKEY(meta);

	if (pkey >= 0)
		(void)nsb_sys_pkey_mprotect(p, len, prot, pkey);
	/* The new VMA does not inherit the madvise() of the one it replaced. */
	if (meta & NSB_META_DONTFORK)
		(void)nsb_sys_madvise(p, len, MADV_DONTFORK);
	if (meta & NSB_META_WIPEONFORK)
		(void)nsb_sys_madvise(p, len, MADV_WIPEONFORK);
	/* Nor its advice and locks (the program gave them: its own calls). */
	if (meta & NSB_META_DONTDUMP)
		(void)nsb_sys_madvise(p, len, MADV_DONTDUMP);
	if (meta & NSB_META_HUGEPAGE)
		(void)nsb_sys_madvise(p, len, MADV_HUGEPAGE);
	if (meta & NSB_META_NOHUGEPAGE)
		(void)nsb_sys_madvise(p, len, MADV_NOHUGEPAGE);
	if (meta & NSB_META_MERGEABLE)
		(void)nsb_sys_madvise(p, len, MADV_MERGEABLE);
	if (policy > 0)
		(void)syscall(SYS_mbind, p, len, policy, nodes, NSB_POLICY_BITS, 0);
	if ((meta & (NSB_META_LOCKED | NSB_META_ONFAULT)) == NSB_META_LOCKED)
		(void)syscall(SYS_mlock, p, len);
	else if (meta & NSB_META_LOCKED)
		(void)syscall(SYS_mlock2, p, len, MLOCK_ONFAULT);
}

/* [signal-safe] Replaces [start, end) with zero pages at the recorded
 * protection, key, fork behaviour, advice, policy and locks: a fill whose
 * fault was a read from the zero file (above) as far as it goes, the rest
 * anonymous memory.  Where it replaced up to: end, or less when a part
 * from the zero file was mapped and the rest could not be (start:
 * nothing, errno set). */
static uintptr_t
replace(uintptr_t start, uintptr_t end, const struct nsb_range *r, bool read)
{
	int prot = (int)(r->meta & NSB_META_PROT);
	unsigned long nodes[2];
	int policy = nsb_rescue_policy((const void *)start, r->meta, nodes);
	uintptr_t from = start;

	/* Small pages of a file, readable, not executable, and no advice a
	 * file's VMA refuses (MADV_WIPEONFORK, MADV_MERGEABLE). */
	if (read && end - start > nsb_config.page_size && (prot & PROT_READ) && !(prot & PROT_EXEC) &&
	    ((size_t)1 << NSB_META_SHIFT(r->meta)) == nsb_config.page_size &&
	    !(r->meta & (NSB_META_ANON | NSB_META_WIPEONFORK | NSB_META_MERGEABLE)))
		from = zero_map(start, end, r->off + (start - r->start), prot);
	if (from < end && nsb_sys_mmap((void *)from, end - from, prot,
				       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED) {
		if (from == start)
			return start;
		end = from;	/* what the zero file took is replaced */
	}
	nsb_rescue_reapply((void *)start, end - start, r->meta, policy, nodes);
	return end;
}

void
nsb_rescue_regrown(const struct nsb_range *r)
{
	int saved_errno = errno;

	if (atomic_load(&zero_fd) >= 0)
		(void)replace(r->start, r->end, r, false);
	errno = saved_errno;
}

/* The unit this thread was last sent back to fault on again although it
 * was replaced (or inside its file's size), and in which account: if it
 * comes straight back, the reason to wait is gone and the fault is not
 * ours.  Accounts are never reused, so a new mapping there is a new start. */
static __thread uintptr_t again_page __attribute__((tls_model("initial-exec")));
static __thread uint64_t again_acct __attribute__((tls_model("initial-exec")));

/*
 * What a check that found a unit inside its file saw: the size and the
 * status change time, from one fstat.  Every resize sets the change time
 * (a peer's ftruncate, fallocate), so a file whose size and change time
 * are both as the check before saw them did not change in between -
 * provided a change after that check could not have been stamped with
 * the time it saw: `sure` when the coarse clock, read before the fstat,
 * had already left that time (since Linux 6.13 a change after a stat gets
 * a finer, distinct stamp on tmpfs and the big file systems; before, a
 * change in the same tick of the clock would keep it).
 */
struct seen {
	uint64_t size;
	struct timespec ctime;
	bool sure;
};
static __thread struct seen again_seen __attribute__((tls_model("initial-exec")));
static __thread bool again_inside __attribute__((tls_model("initial-exec")));

/* NOSIGBUS_FILL=auto: where this thread's last rescue in an account
 * ended, and how many units it replaced; a fault right there doubles it. */
static __thread uint64_t auto_acct __attribute__((tls_model("initial-exec")));
static __thread uintptr_t auto_next __attribute__((tls_model("initial-exec")));
static __thread size_t auto_units __attribute__((tls_model("initial-exec")));

enum check { PAST_EOF, INSIDE, UNKNOWN };

/*
 * [signal-safe] Only a unit at or past the end of its file is rescued, on
 * every file system: a fault inside the size is the file system's (an I/O
 * error, a full tmpfs, a userfaultfd in SIGBUS mode), and goes to the
 * program as without the library - unless NOSIGBUS_ERRORS=zero asks for
 * zeros there, or the file is a peer's (peers_error).  Anonymous memory
 * has no size (only its huge pages fault).  Where the size cannot be
 * learnt, the unit is rescued and counted as unverified - always so in a
 * received file that no stat describes (NSB_META_FOREIGN, policy.c: a
 * FUSE file system of another user's), whose faults are the peer's but
 * for the program's own userfaultfd registrations (peers_error); under
 * NOSIGBUS_ERRORS=pass such a mapping is protected only if the program
 * asked (MAP_NOSIGBUS), as any file whose size is unknown.  Every unit
 * after one past the end is past it too, so a fill goes on only from a
 * unit known to be past the end.
 */
static enum check
check(const struct nsb_range *r, uintptr_t page, size_t unit, struct seen *seen)
{
	uint64_t size, off;
	struct timespec now;

	if (r->meta & NSB_META_ANON)
		return PAST_EOF;
	/* A received file no stat describes (policy.c): no size to ask. */
	if (r->meta & NSB_META_FOREIGN)
		return UNKNOWN;
	/* The vDSO's coarse clock: no system call. */
	if (clock_gettime(CLOCK_REALTIME_COARSE, &now) != 0)
		now.tv_sec = now.tv_nsec = 0;
	if (!nsb_files_size(r->file, r->start, r->end, page, &size, &seen->ctime))
		return UNKNOWN;
	seen->size = size;
	/* Sure only when the clock had already left the stamp's tick before
	 * the fstat: a stamp newer than the clock read (a resize between the
	 * two) may be given again by the next resize in the same tick (before
	 * Linux 6.13; core-peer-toggles-size died of it under fill=auto on
	 * Debian 12's 6.1, where != counted it as sure). */
	seen->sure = now.tv_sec > seen->ctime.tv_sec ||
		     (now.tv_sec == seen->ctime.tv_sec && now.tv_nsec > seen->ctime.tv_nsec);
	off = r->off + (page - r->start);
	/* The kernel maps the unit that holds the last byte. */
	return off >= ((size + unit - 1) & ~(uint64_t)(unit - 1)) ? PAST_EOF : INSIDE;
}

/*
 * [signal-safe] A fault inside the size of a file another process handed
 * over is that process's error (its file system: a FUSE file whose reads
 * fail, a full /dev/shm), and is rescued under NOSIGBUS_ERRORS=peer, the
 * default: the data is the peer's, hiding the error loses nothing of the
 * program's.  But not a fault the program arranged itself on it: its own
 * userfaultfd registration (uffd.c).
 */
static bool
peers_error(const struct nsb_range *r, uintptr_t start, size_t unit)
{
	return nsb_config.errors == NSB_ERRORS_PEER && (r->meta & NSB_META_RECEIVED) &&
	       !nsb_uffd_registered(start, start + unit);
}

/* [signal-safe] How many units a rescue from start replaces at most. */
static size_t
fill_units(uintptr_t start, size_t unit, const struct nsb_range *r)
{
	size_t left = (r->end - start) / unit;

	switch (nsb_fill_of(r->meta)) {
	case NSB_FILL_PAGE:
		return 1;
	case NSB_FILL_AUTO: {
		/* Like readahead: a fault right after the last fill in the
		 * same mapping doubles the window, any other starts at one. */
		size_t n = auto_acct == nsb_account_id(r->acct) && auto_next == start
				   ? auto_units * 2 : 1;

		return n < left ? n : left;
	}
	case NSB_FILL_RANGE:
		break;
	}
	return left;
}

/* [signal-safe] Sent back to fault again: true the first time at this
 * unit (of the account whose id is id), false when it comes straight
 * back.  The id, not the account: a caller may have left its ticket, and
 * with it the account (nsb_ranges_leave). */
static bool
first_again(uintptr_t start, uint64_t id)
{
	if (again_page == start && again_acct == id && !again_inside) {
		again_page = 0;
		return false;
	}
	again_page = start;
	again_acct = id;
	again_inside = false;
	return true;
}

/*
 * [signal-safe] A unit found inside its file: fault again (true), or
 * pass the fault on as the file system's error (false) - only when this
 * thread's check before, at the same unit, found it inside too and the
 * file did not change between the two (struct seen).  A peer that
 * toggles the size (ftruncate to 0 and back, as fast as it can) makes
 * every fault past the end and may grow the file back before the check:
 * each such retry cost it a resize, so it slows the program by its own
 * effort and never kills it.  Alone, a thread retries at most until the
 * coarse clock ticks (a few milliseconds).
 */
static bool
inside_again(uintptr_t start, const struct nsb_range *r, uint64_t id, const struct seen *seen)
{
	/* The change time only for memory-backed files: a disk file
	 * system stamps it in the fault itself (ext4_page_mkwrite calls
	 * file_update_time before the allocation that fails with ENOSPC,
	 * with a fresh fine-grained stamp after our fstat since Linux 6.13),
	 * so there every retry would see a change and a full disk would
	 * never get its SIGBUS (fs-ext4-write hung).  shmem's faults stamp
	 * nothing: only a resize does. */
	bool memfs = (r->meta & NSB_META_MEMFS) != 0;

	if (again_page == start && again_acct == id && again_inside && again_seen.size == seen->size &&
	    (!memfs || (again_seen.sure && again_seen.ctime.tv_sec == seen->ctime.tv_sec &&
			again_seen.ctime.tv_nsec == seen->ctime.tv_nsec))) {
		again_page = 0;
		return false;
	}
	again_page = start;
	again_acct = id;
	again_inside = true;
	again_seen = *seen;
	return true;
}

/*
 * [signal-safe] Reads straight down: the record, the claim of the unit in
 * its account, the size, the replacement, the log.  Not inlined: its frame
 * is gone before a fault it passes on reaches the program's handler (at
 * most 512 bytes of stack may be used before that).
 */
__attribute__((noinline)) static enum verdict
rescue(uintptr_t addr, bool read)
{
	struct nsb_range r;
	uintptr_t start, end, got;
	enum check c;
	struct seen seen = { 0 };
	size_t unit, units;
	uint64_t off;
	bool ok;
	int ticket, slot;

	switch (nsb_ranges_enter(addr, &r, &ticket)) {
	case NSB_LOOKUP_NONE:
		return NOT_OURS;
	case NSB_LOOKUP_BUSY:
		sched_yield();	/* let the call's thread run (below) */
		return AGAIN;	/* a call is changing the records here */
	case NSB_LOOKUP_FOUND:
		break;
	}
	/* A huge page cannot be split: replace the whole of it. */
	unit = (size_t)1 << NSB_META_SHIFT(r.meta);
	start = addr & ~(uintptr_t)(unit - 1);
	if (start < r.start)
		start = r.start;
	off = r.off + (start - r.start);
	units = fill_units(start, unit, &r);

	/* Claim: the unit's bit, set by whoever replaces it, for good. */
	slot = busy_enter(r.acct, start, start + units * unit);
	if (slot < 0) {
		nsb_ranges_leave(ticket);
		sched_yield();	/* let them run (below) */
		return AGAIN;	/* the owners will be done */
	}
	if (!nsb_account_claim(r.acct, off)) {
		/* Replaced, or being replaced.  Done, and the fault comes
		 * back: the page there is not the replacement (only a huge
		 * page of anonymous memory faults). */
		bool wait = busy_other(r.acct, start, slot);
		/* Read while the ticket holds the account: once it is left,
		 * another thread's munmap may release the account and a new
		 * mapping's be made in its memory (whose id this thread
		 * would then note for the unit). */
		uint64_t id = nsb_account_id(r.acct);

		busy_leave(slot);
		nsb_ranges_leave(ticket);
		/* Another thread replaces it: let it run.  A thread of
		 * real-time priority that only faulted again would keep a
		 * replacing one of the same priority off its CPU for good
		 * (core-lostwrite attack under SCHED_FIFO hung so). */
		if (wait)
			sched_yield();
		return wait || first_again(start, id) ? AGAIN : NOT_OURS;
	}
	/* State: anonymous memory faults with SIGBUS only on huge pages; a
	 * small page that does was replaced behind the records' back (the
	 * program mapped something there with a raw system call, and took
	 * the record's protection with it): once it comes back, it is
	 * rescued like a huge page. */
	c = nsb_config.errors == NSB_ERRORS_ZERO && units == 1 && !(r.meta & NSB_META_FOREIGN)
		    ? INSIDE	/* rescued either way, alone: no size needed */
		    : check(&r, start, unit, &seen);
	/* A peer's file of unknown size: every fault the peer's, but one
	 * the program arranged itself (its userfaultfd registration). */
	if ((r.meta & (NSB_META_FOREIGN | NSB_META_POLICY)) == (NSB_META_FOREIGN | NSB_META_POLICY) &&
	    nsb_config.errors == NSB_ERRORS_PEER && !peers_error(&r, start, unit)) {
		nsb_account_unclaim(r.acct, off, 1);
		busy_leave(slot);
		nsb_ranges_leave(ticket);
		return NOT_OURS;
	}
	if ((r.meta & NSB_META_ANON) && unit == nsb_config.page_size &&
	    first_again(start, nsb_account_id(r.acct))) {
		nsb_account_unclaim(r.acct, off, 1);
		busy_leave(slot);
		nsb_ranges_leave(ticket);
		return AGAIN;
	}
	/* Size: inside it, the fault is the program's - unless it is inside
	 * because the file grew back since, which faulting again tells, as
	 * long as the file keeps changing (inside_again). */
	if (c == INSIDE && nsb_config.errors != NSB_ERRORS_ZERO && !peers_error(&r, start, unit)) {
		uint64_t id = nsb_account_id(r.acct);	/* as above */

		nsb_account_unclaim(r.acct, off, 1);
		busy_leave(slot);
		nsb_ranges_leave(ticket);
		return inside_again(start, &r, id, &seen) ? AGAIN : NOT_OURS;
	}
	again_page = 0;
	/* A fill goes on over units past the end that nobody replaced. */
	if (c == PAST_EOF && units > 1)
		units = 1 + nsb_account_claim_run(r.acct, off + unit, units - 1);
	else
		units = 1;
	end = start + units * unit;
	/* Replace.  Out of VMAs (vm.max_map_count): one mapping from the
	 * unit up to the next replaced one (or the record's end) needs none,
	 * as it merges with what lies above it (SPEC §5). */
	got = replace(start, end, &r, read);
	if (got == start && errno == ENOMEM && c == PAST_EOF && end < r.end) {
		size_t more = nsb_account_claim_run(r.acct, off + units * unit, (r.end - end) / unit);

		units += more;
		end += more * unit;
		got = more ? replace(start, end, &r, false) : start;
		if (!more)
			errno = ENOMEM;
	}
	ok = got > start;
	if (ok && got < end) {
		/* Part of it from the zero file, the rest not replaced. */
		nsb_account_unclaim(r.acct, off + (got - start), (end - got) / unit);
		units = (got - start) / unit;
		end = got;
	}
	if (!ok) {
		nsb_account_unclaim(r.acct, off, units);
		busy_leave(slot);
		nsb_ranges_leave(ticket);
		atomic_fetch_add(&nsb_counters.failures, 1);
		nsb_log_failure(addr, errno);
		return NOT_OURS;
	}
	busy_leave(slot);
	auto_acct = nsb_account_id(r.acct);
	auto_next = end;
	auto_units = units;
	atomic_fetch_add(&nsb_counters.rescues, 1);
	atomic_fetch_add(&nsb_counters.pages, (end - start) / nsb_config.page_size);
	if (c == UNKNOWN)
		atomic_fetch_add(&nsb_counters.unverified, 1);
	if (c != PAST_EOF)
		nsb_account_set_unsure(r.acct);
	/* Log: counted in the account, which the record holds till then.
	 * (Without the log, nothing but letting go: the call's frame, a
	 * line's buffer, costs a tenth of the handler's own instructions.) */
	if (nsb_config.log)
		nsb_log_rescue(addr, &r, (end - start) / nsb_config.page_size,
			       c == UNKNOWN ? NSB_RESCUE_UNVERIFIED
			       : c == INSIDE && nsb_config.errors == NSB_ERRORS_PEER ? NSB_RESCUE_PEERS_ERROR
			       : NSB_RESCUE_PAST_END, ticket);
	else
		nsb_ranges_leave(ticket);
	return RESCUED;
}

/*
 * [signal-safe] Was the fault a write?  The kernel says so in the signal
 * frame: x86's page-fault error code (bit 1), arm64's ESR (a data abort's
 * WnR bit), in its record of the frame's reserved space.  Unknown: a read.
 */
static bool
fault_was_write(const void *ucv)
{
	const ucontext_t *uc = ucv;

	if (!uc)
		return false;
#if defined(__x86_64__)
	return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#elif defined(__aarch64__)
	{
		const unsigned char *p = (const unsigned char *)uc->uc_mcontext.__reserved;
		const unsigned char *e = p + sizeof(uc->uc_mcontext.__reserved);

		while (p + 8 <= e) {
			uint32_t magic, size;

			memcpy(&magic, p, 4);
			memcpy(&size, p + 4, 4);
			if (magic == 0 || size < 8 || size > (size_t)(e - p))
				break;
			if (magic == 0x45535201 && size >= 16) {	/* ESR_MAGIC */
				uint64_t esr;
				unsigned ec;

				memcpy(&esr, p + 8, 8);
				ec = (unsigned)(esr >> 26) & 0x3f;
				return (ec == 0x24 || ec == 0x25) && (esr & (1u << 6));
			}
			p += size;
		}
		return false;
	}
#else
	return false;
#endif
}

/* [signal-safe] The SIGBUS handler the library installs. */
void
nsb_rescue_handler(int sig, siginfo_t *si, void *uc)
{
	int saved_errno = errno;

	/* A vfork parent's handler that faults as the clone returns, before
	 * any other call of the library's: what a dead child left is taken
	 * back first (process.c). */
	if (__builtin_expect(nsb_vfork_ran != 0, 0))
		nsb_vfork_early();
	/* Only a fault the kernel raised counts: si_code BUS_ADRERR cannot
	 * be sent by another process (the kernel refuses si_code >= 0), but
	 * the kernel sends it as CLD_KILLED, a child's exit signal, with the
	 * child's pid and uid where the address would be. */
	if (si && si->si_code == BUS_ADRERR && nsb_disp_is_fault(si, uc) &&
	    rescue((uintptr_t)si->si_addr, !fault_was_write(uc)) != NOT_OURS) {
		errno = saved_errno;
		return;
	}
	errno = saved_errno;
	nsb_disp_chain(sig, si, uc);
}
