/* SPDX-License-Identifier: MIT */
/*
 * rescue.c - the SIGBUS handler.
 *
 * Everything in this file runs in signal context but nsb_rescue_prepare
 * and nsb_rescue_after_fork_child.  The handler finds the record,
 * decides whether the fault is one to rescue (a page at or past the end
 * of its file, SPEC §5), maps zero-filled private memory over the
 * faulting page (or more, by NOSIGBUS_FILL), and returns so that the
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
 *
 * Stack: the handler may run on a small alternate stack (Rust gives each
 * thread 8 KiB); no buffer here is bigger than a few words.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
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
	atomic_uintptr_t acct;	/* 0: free */
	atomic_uintptr_t start, end;
};

/* Made when the handler is installed (a process that never installs it
 * pays nothing for it at start-up), from memory.c. */
static struct busy *busy;
static char *signal_space;	/* nsb_signal_space() */

/*
 * A fill of many units is populated with the shared zero page at once
 * (MADV_POPULATE_READ, Linux 5.14): the file's pages are read with the
 * kernel's fault-around, 16 a fault, while fresh anonymous memory faults
 * once a page, so a compositor reading a truncated buffer's replaced tail
 * paid one fault a page where the same buffer untruncated costs a
 * sixteenth of that (issue 24's hostile frame, 1.55-1.75x; populated,
 * about 1x).  At most POPULATE_MAX bytes a rescue: populating costs
 * about a tenth of a fault a page, and a pool may be far bigger than the
 * buffer read from it (a hostile client may make it so): 64 MiB covers a
 * 5K buffer.
 *
 * Only where a read of anonymous memory maps the zero page: populating
 * must cost time, never memory (else a client could make a compositor
 * allocate 64 MiB a pool).  Some kernels never map it (a paravirtualised
 * guest booted with pvm_no_zero_page=1; s390 under KVM), and transparent
 * huge pages map a huge zero page only with use_zero_page set.  Asked
 * once, when the handler is installed: one anonymous page populated, and
 * /proc/self/pagemap says whether what got mapped there is this
 * process's own page (bit 56, "exclusively mapped", which unprivileged
 * readers see too) or the shared zero page.  NSB_TEST_POPULATE=on or off
 * decides instead (tests).
 */
#define POPULATE_MAX	((size_t)64 << 20)
#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
static bool populate;

/* The first byte of a small file, or 0. */
static char
first_byte(const char *path)
{
	char c = 0;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (syscall(SYS_read, fd, &c, 1) != 1)
		c = 0;
	(void)syscall(SYS_close, fd);
	return c;
}

static bool
zero_page_used(void)
{
	const char *force = nsb_config.secure ? NULL : getenv("NSB_TEST_POPULATE");
	size_t ps = nsb_config.page_size;
	uint64_t entry = 0;
	bool zero = false;
	void *p;
	int fd;

	if (force && (!strcmp(force, "on") || !strcmp(force, "off")))
		return !strcmp(force, "on");
	if (first_byte("/sys/kernel/mm/transparent_hugepage/enabled") &&
	    first_byte("/sys/kernel/mm/transparent_hugepage/use_zero_page") != '1')
		return false;
	/* A page of the library's own memory, never touched yet (a mapping
	 * wherever the kernel would put it could be an address another
	 * thread is taking back with MAP_FIXED, which our munmap would
	 * undo: memory.c).  Kept: one page of address space. */
	p = nsb_memory(ps);
	if (!p)
		return false;
	fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && nsb_sys_madvise(p, ps, MADV_POPULATE_READ) == 0 &&
	    syscall(SYS_pread64, fd, &entry, sizeof(entry), (off_t)((uintptr_t)p / ps * sizeof(entry))) ==
		    (ssize_t)sizeof(entry))
		zero = (entry >> 63 & 1) && !(entry >> 56 & 1);
	if (fd >= 0)
		(void)syscall(SYS_close, fd);
	return zero;
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
 * Whether fills are populated: asked the first time a protected mapping
 * is recorded (policy.c), never when the handler is only installed (a
 * program that blocks every signal and protects nothing makes none of
 * these calls), and never under a seccomp filter: reading pagemap and
 * MADV_POPULATE_READ are calls some filters kill on (sandbox.c).
 */
void
nsb_rescue_arm(void)
{
	static atomic_bool asked;
	int saved_errno;

	if (atomic_load_explicit(&asked, memory_order_acquire) || atomic_exchange(&asked, true))
		return;
	saved_errno = errno;
	populate = nsb_unfiltered() && zero_page_used();
	errno = saved_errno;
}

/* [signal-safe] A slot for a rescue in acct of [start, end), or -1. */
static int
busy_enter(const struct nsb_account *acct, uintptr_t start, uintptr_t end)
{
	unsigned first = (unsigned)(((uintptr_t)acct >> 6) * 2654435761u) % BUSY_SLOTS;

	for (unsigned i = 0; i < BUSY_SLOTS; i++) {
		struct busy *b = &busy[(first + i) % BUSY_SLOTS];
		uintptr_t seen = 0;

		if (atomic_load(&b->acct) == 0 &&
		    atomic_compare_exchange_strong(&b->acct, &seen, (uintptr_t)1)) {
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

		if (i == mine || (a != (uintptr_t)acct && a != 1))
			continue;
		if (a == 1 || (atomic_load(&busy[i].start) <= addr && addr < atomic_load(&busy[i].end)))
			return true;
	}
	return false;
}

/* [signal-safe] */
static void
busy_leave(int slot)
{
	atomic_store(&busy[slot].acct, 0);
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
	for (int i = 0; busy && i < BUSY_SLOTS; i++) {
		struct lost_rescue l = { atomic_load(&busy[i].acct), atomic_load(&busy[i].start),
					 atomic_load(&busy[i].end) };

		atomic_store(&busy[i].acct, 0);
		if (l.acct > 1 && l.start < l.end)
			(void)nsb_maps_each(l.start, l.end, false, give_back, &l);
	}
}

/* [signal-safe] Replaces [start, end) with zero pages at the recorded
 * protection, key and fork behaviour. */
static bool
replace(uintptr_t start, uintptr_t end, const struct nsb_range *r)
{
	int prot = (int)(r->meta & NSB_META_PROT);
	int pkey = NSB_META_PKEY(r->meta);
	void *p;

	p = nsb_sys_mmap((void *)start, end - start, prot,
			 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return false;
	if (pkey >= 0)
		(void)nsb_sys_pkey_mprotect(p, end - start, prot, pkey);
	/* The new VMA does not inherit the madvise() of the one it replaced. */
	if (r->meta & NSB_META_DONTFORK)
		(void)nsb_sys_madvise(p, end - start, MADV_DONTFORK);
	if (r->meta & NSB_META_WIPEONFORK)
		(void)nsb_sys_madvise(p, end - start, MADV_WIPEONFORK);
	/* Nor its advice and locks (the program gave them: its own calls). */
	if (r->meta & NSB_META_DONTDUMP)
		(void)nsb_sys_madvise(p, end - start, MADV_DONTDUMP);
	if (r->meta & NSB_META_HUGEPAGE)
		(void)nsb_sys_madvise(p, end - start, MADV_HUGEPAGE);
	if (r->meta & NSB_META_NOHUGEPAGE)
		(void)nsb_sys_madvise(p, end - start, MADV_NOHUGEPAGE);
	if (r->meta & NSB_META_MERGEABLE)
		(void)nsb_sys_madvise(p, end - start, MADV_MERGEABLE);
	if ((r->meta & (NSB_META_LOCKED | NSB_META_ONFAULT)) == NSB_META_LOCKED)
		(void)syscall(SYS_mlock, p, end - start);
	else if (r->meta & NSB_META_LOCKED)
		(void)syscall(SYS_mlock2, p, end - start, MLOCK_ONFAULT);
	/* A fill: its zero pages at once, read-only ones too (see above). */
	if (populate && (prot & PROT_READ) && end - start > nsb_config.page_size)
		(void)nsb_sys_madvise(p, end - start < POPULATE_MAX ? end - start : POPULATE_MAX,
				      MADV_POPULATE_READ);
	return true;
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
 * zeros there, or the file is a peer's (peers_error).  Anonymous memory has no size (only its huge pages fault).
 * Where the size cannot be learnt, the unit is rescued and counted as
 * unverified.  Every unit after one past the end is past it too, so a
 * fill goes on only from a unit known to be past the end.
 */
static enum check
check(const struct nsb_range *r, uintptr_t page, size_t unit, struct seen *seen)
{
	uint64_t size, off;
	struct timespec now;

	if (r->meta & NSB_META_ANON)
		return PAST_EOF;
	/* The vDSO's coarse clock: no system call. */
	if (clock_gettime(CLOCK_REALTIME_COARSE, &now) != 0)
		now.tv_sec = now.tv_nsec = 0;
	if (!nsb_files_size(r->file, r->start, r->end, page, &size, &seen->ctime))
		return UNKNOWN;
	seen->size = size;
	seen->sure = now.tv_sec != seen->ctime.tv_sec || now.tv_nsec != seen->ctime.tv_nsec;
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
 * unit, false when it comes straight back. */
static bool
first_again(uintptr_t start, const struct nsb_range *r)
{
	uint64_t id = nsb_account_id(r->acct);

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
inside_again(uintptr_t start, const struct nsb_range *r, const struct seen *seen)
{
	uint64_t id = nsb_account_id(r->acct);

	if (again_page == start && again_acct == id && again_inside && again_seen.sure &&
	    again_seen.size == seen->size && again_seen.ctime.tv_sec == seen->ctime.tv_sec &&
	    again_seen.ctime.tv_nsec == seen->ctime.tv_nsec) {
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
rescue(uintptr_t addr)
{
	struct nsb_range r;
	uintptr_t start, end;
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
		return AGAIN;	/* the owners will be done */
	}
	if (!nsb_account_claim(r.acct, off)) {
		/* Replaced, or being replaced.  Done, and the fault comes
		 * back: the page there is not the replacement (only a huge
		 * page of anonymous memory faults). */
		bool wait = busy_other(r.acct, start, slot);

		busy_leave(slot);
		nsb_ranges_leave(ticket);
		return wait || first_again(start, &r) ? AGAIN : NOT_OURS;
	}
	/* State: anonymous memory faults with SIGBUS only on huge pages; a
	 * small page that does was replaced behind the records' back (the
	 * program mapped something there with a raw system call, and took
	 * the record's protection with it): once it comes back, it is
	 * rescued like a huge page. */
	c = nsb_config.errors == NSB_ERRORS_ZERO && units == 1
		    ? INSIDE	/* rescued either way, alone: no size needed */
		    : check(&r, start, unit, &seen);
	if ((r.meta & NSB_META_ANON) && unit == nsb_config.page_size && first_again(start, &r)) {
		nsb_account_unclaim(r.acct, off, 1);
		busy_leave(slot);
		nsb_ranges_leave(ticket);
		return AGAIN;
	}
	/* Size: inside it, the fault is the program's - unless it is inside
	 * because the file grew back since, which faulting again tells, as
	 * long as the file keeps changing (inside_again). */
	if (c == INSIDE && nsb_config.errors != NSB_ERRORS_ZERO && !peers_error(&r, start, unit)) {
		nsb_account_unclaim(r.acct, off, 1);
		busy_leave(slot);
		nsb_ranges_leave(ticket);
		return inside_again(start, &r, &seen) ? AGAIN : NOT_OURS;
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
	ok = replace(start, end, &r);
	if (!ok && errno == ENOMEM && c == PAST_EOF && end < r.end) {
		size_t more = nsb_account_claim_run(r.acct, off + units * unit, (r.end - end) / unit);

		units += more;
		end += more * unit;
		ok = more && replace(start, end, &r);
		if (!more)
			errno = ENOMEM;
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

/* [signal-safe] The SIGBUS handler the library installs. */
void
nsb_rescue_handler(int sig, siginfo_t *si, void *uc)
{
	int saved_errno = errno;

	/* Only a fault the kernel raised counts: si_code BUS_ADRERR cannot
	 * be sent by another process (the kernel refuses si_code >= 0). */
	if (si && si->si_code == BUS_ADRERR && rescue((uintptr_t)si->si_addr) != NOT_OURS) {
		errno = saved_errno;
		return;
	}
	errno = saved_errno;
	nsb_disp_chain(sig, si, uc);
}
