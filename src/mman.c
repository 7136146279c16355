/* SPDX-License-Identifier: MIT */
/*
 * mman.c - the interposed mmap, mmap64, munmap, mremap, mprotect,
 * pkey_mprotect, madvise and process_madvise.
 *
 * Each keeps libc's contract exactly (MAP_FAILED/-1 and errno) and, for a
 * call that touches no protected mapping and makes none, costs one
 * lock-free check.  The rules (SPEC §4):
 *  - MAP_NOSIGBUS never reaches the kernel;
 *  - every call that touches records runs the same way: under the table
 *    lock, the span it may change is put in flux (faults there wait by
 *    faulting again), the kernel is called, and then the records are made
 *    to say what the kernel did - by the call's own rules when it
 *    succeeded (with the kernel's rounding: pages, huge pages), and by
 *    asking the kernel (resync(), /proc/self/maps) when it failed, since
 *    a call can fail part-way;
 *  - a protected mapping that cannot be recorded is undone (ENOMEM):
 *    room for the records is made before the call;
 *  - no other call is refused for the records' memory (SPEC §12,
 *    RLIMIT_AS): where the records of a call that splits one have no room,
 *    protection is lost instead (ranges.c, nsb_ranges_lost), and a record
 *    that cannot be put back (a move, a resync) is counted so too.
 *
 * Not used in signal context.
 */
/* Meson builds with _FILE_OFFSET_BITS=64, which makes glibc's headers
 * rename mmap to mmap64; we define both names ourselves. */
#undef _FILE_OFFSET_BITS
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "nosigbus.h"
#include "nsb.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

static inline uintptr_t
round_up(uintptr_t v, size_t unit)
{
	return (v + unit - 1) & ~(uintptr_t)(unit - 1);
}

static inline bool
page_aligned(uintptr_t v)
{
	return (v & (nsb_config.page_size - 1)) == 0;
}

static inline size_t
unit_of(uint32_t meta)
{
	return (size_t)1 << NSB_META_SHIFT(meta);
}

/* [start, start + len rounded to unit), or false if it wraps around. */
static bool
span_of(void *addr, size_t len, size_t unit, uintptr_t *start, uintptr_t *end)
{
	*start = (uintptr_t)addr;
	if (len > UINTPTR_MAX - *start - unit)
		return false;
	*end = round_up(*start + len, unit);
	return true;
}

int
nsb_record(struct nsb_range *r)
{
	static uint16_t gen;

	gen = (uint16_t)((gen + 1) & 0x7);	/* the table keeps 3 bits */
	r->gen = gen;
	if (nsb_disp_install() < 0)
		return -1;
	/* The account first: once recorded, a fault may need it. */
	r->acct = nsb_account_new(r->off, r->end - r->start, unit_of(r->meta));
	if (!r->acct)
		return -1;
	return nsb_ranges_insert(r);
}

/* A record put back (a resync, a move): where there is no room for it
 * (RLIMIT_AS), its protection is lost, and counted. */
static void
put_back(const struct nsb_range *r)
{
	int err = errno;

	if (nsb_ranges_insert(r) < 0)
		nsb_ranges_lost();
	errno = err;
}

/* ---- resync: records from the kernel's own account --------------------- */

struct resync {
	const struct nsb_saved *cands;
	struct nsb_saved keep;
	uintptr_t lo, hi;	/* what the kernel is asked about now */
	int err;
	/* One candidate that the table holds as it is (are_records), asked
	 * about alone: whole in one VMA of its mapping, that VMA's
	 * protection in one_prot and nothing in keep (one_vma). */
	bool one_whole, one;
	int one_prot;
};

/* Is the VMA still the mapping the candidate record described? */
static bool
same_mapping(const struct nsb_range *c, const struct nsb_vma *vma, uintptr_t at)
{
	uint64_t dev, ino;

	if (c->meta & NSB_META_ANON)
		return vma->anon || (vma->path && strncmp(vma->path, "/anon_hugepage", 14) == 0);
	/* A page rescued inside a file mapping is anonymous memory. */
	if (vma->anon)
		return true;
	if (!nsb_files_identity(c->file, &dev, &ino))
		return true;	/* nothing to compare with */
	return vma->dev == dev && vma->ino == ino &&
	       vma->off + (at - vma->start) == c->off + (at - c->start);
}

static int
resync_vma(const struct nsb_vma *vma, void *arg)
{
	struct resync *rs = arg;

	for (size_t i = 0; i < rs->cands->n; i++) {
		struct nsb_range r = rs->cands->r[i];
		uintptr_t s = r.start > vma->start ? r.start : vma->start;
		uintptr_t e = r.end < vma->end ? r.end : vma->end;

		if (s < rs->lo)
			s = rs->lo;
		if (e > rs->hi)
			e = rs->hi;
		if (s >= e || !same_mapping(&r, vma, s))
			continue;
		r.off += s - r.start;
		r.start = s;
		r.end = e;
		r.meta = (r.meta & ~NSB_META_PROT) | ((uint32_t)vma->prot & NSB_META_PROT);
		if (vma->pkey >= 0)
			r.meta = (r.meta & ~NSB_META_PKEY_MASK) | NSB_META_MKPKEY(vma->pkey);
		if (nsb_saved_push(&rs->keep, &r) < 0) {
			rs->err = ENOMEM;
			return -1;
		}
	}
	return 0;
}

/* resync_vma() for the one candidate of resync_one(): where the first
 * VMA holds all of it, of its mapping, only that VMA's protection is
 * kept (the query ends there: the VMA reaches hi), not a list. */
static int
one_vma(const struct nsb_vma *vma, void *arg)
{
	struct resync *rs = arg;

	if (rs->keep.n == 0 && vma->start <= rs->lo && vma->end >= rs->hi &&
	    same_mapping(&rs->cands->r[0], vma, rs->lo)) {
		rs->one = true;
		rs->one_prot = vma->prot;
		return 0;
	}
	return resync_vma(vma, arg);
}

static int
by_start(const void *a, const void *b)
{
	const struct nsb_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * The kernel is asked only about the candidates' own addresses (nothing
 * else of the span can become a record): one query per VMA there where it
 * has PROCMAP_QUERY, in runs of adjacent candidates; else one read of the
 * maps over the span.
 */
static int
ask_kernel(uintptr_t start, uintptr_t end, const struct nsb_saved *cands, bool pkeys,
	   struct resync *rs)
{
	int (*fn)(const struct nsb_vma *vma, void *arg);
	struct nsb_range *runs;
	size_t n = 0;
	int ret = 0;

	rs->lo = start;
	rs->hi = end;
	if (!pkeys && cands->n == 1 && nsb_maps_queries()) {
		/* One candidate (a call next to one record): its own run, with
		 * no list to copy and sort. */
		rs->lo = cands->r[0].start > start ? cands->r[0].start : start;
		rs->hi = cands->r[0].end < end ? cands->r[0].end : end;
		if (rs->lo >= rs->hi)
			return 0;
		fn = rs->one_whole && rs->lo == cands->r[0].start && rs->hi == cands->r[0].end
			     ? one_vma : resync_vma;
		/* The VMA's name is read only for an anonymous record's
		 * (same_mapping): a file's is not asked of the kernel. */
		return (cands->r[0].meta & NSB_META_ANON)
			       ? nsb_maps_each(rs->lo, rs->hi, false, fn, rs)
			       : nsb_maps_each_unnamed(rs->lo, rs->hi, fn, rs);
	}
	if (pkeys || !nsb_maps_queries() || !(runs = nsb_scratch(cands->n * sizeof(*runs))))
		return nsb_maps_each(start, end, pkeys, resync_vma, rs);
	memcpy(runs, cands->r, cands->n * sizeof(*runs));
	qsort(runs, cands->n, sizeof(*runs), by_start);
	for (size_t i = 0; i < cands->n; i++) {
		if (n && runs[i].start <= runs[n - 1].end) {
			if (runs[i].end > runs[n - 1].end)
				runs[n - 1].end = runs[i].end;
		} else {
			runs[n++] = runs[i];
		}
	}
	for (size_t i = 0; i < n && ret == 0; i++) {
		rs->lo = runs[i].start > start ? runs[i].start : start;
		rs->hi = runs[i].end < end ? runs[i].end : end;
		if (rs->lo < rs->hi)
			ret = nsb_maps_each(rs->lo, rs->hi, false, resync_vma, rs);
	}
	return ret;
}

/*
 * Where the kernel cannot be asked about its mappings (no /proc in a
 * sandbox, every descriptor number taken), the candidates are kept where
 * their pages are still mapped (mincore, which needs neither): no failed
 * call that gets here maps something new in place of what was recorded
 * (a failed mprotect changes no mapping, a failed munmap, mmap or mremap
 * leaves what it did not reach and unmaps what it took), so a page still
 * mapped is the recorded mapping.  At the recorded protection, which a
 * failed mprotect may have changed in part: the lesser wrong, as a live
 * protected page is never left unprotected (SPEC §4).
 */
static void
keep_mapped(uintptr_t lo, uintptr_t hi, const struct nsb_saved *cands, struct nsb_saved *keep)
{
	for (size_t i = 0; i < cands->n; i++) {
		struct nsb_range c = cands->r[i];
		size_t unit = unit_of(c.meta);
		uintptr_t s = c.start > lo ? c.start : lo, e = c.end < hi ? c.end : hi, run = 0;

		/* All of it mapped (a call per 16 MiB), or page by page. */
		if (s < e && nsb_maps_hole(s, e) == 0) {
			c.off += s - c.start;
			c.start = s;
			c.end = e;
			if (nsb_saved_push(keep, &c) < 0)
				break;
			continue;
		}
		for (uintptr_t a = s; a <= e; a += unit) {
			/* A hole (1), or mapped; where mincore cannot tell
			 * (-1), kept. */
			bool mapped = a < e && nsb_maps_hole(a, a + unit) != 1;

			if (mapped && !run) {
				run = a;
			} else if (!mapped && run) {
				struct nsb_range r = c;

				r.off += run - c.start;
				r.start = run;
				r.end = a;
				if (nsb_saved_push(keep, &r) < 0)
					return;
				run = 0;
			}
			if (a == e)
				break;
		}
	}
}

/*
 * After a call over [start, end) failed, or may have done something else
 * than its arguments say: the records there become exactly those of the
 * candidates (what was recorded before, possibly moved) that the kernel
 * still shows, at the protection it shows.  Slow (it asks the kernel),
 * and only for calls that failed.  If the kernel cannot be asked about
 * its mappings, what is still mapped (keep_mapped).
 */
/* Are the ranges of a and b the same, but for the protection in meta? */
static bool
same_but_prot(const struct nsb_saved *a, const struct nsb_saved *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct nsb_range *x = &a->r[i], *y = &b->r[i];

		if (x->start != y->start || x->end != y->end || x->off != y->off ||
		    ((x->meta ^ y->meta) & ~NSB_META_PROT) || x->file != y->file ||
		    x->gen != y->gen || x->acct != y->acct)
			return false;
	}
	return true;
}

/* Does the kernel show what the records of [start, end) say, but for the
 * protection (a failed mprotect next to a record, which changed the pages
 * before the hole)?  Then only that changes: no cut and insert again.
 * (The candidates may be records from elsewhere: a failed mremap's.
 * `are_records`: they are the records of [start, end) as the table holds
 * them now - collected under this lock, nothing changed since - and are
 * not collected again to be compared with themselves.) */
static bool
only_prot_changed(uintptr_t start, uintptr_t end, const struct nsb_saved *cands,
		  const struct nsb_saved *keep, bool are_records)
{
	struct nsb_saved now;
	bool same;

	if (!same_but_prot(cands, keep))
		return false;
	if (are_records)
		return true;
	nsb_saved_init(&now);
	same = nsb_ranges_collect(start, end, &now) == 0 && same_but_prot(&now, cands);
	for (size_t i = 0; same && i < now.n; i++)
		same = now.r[i].meta == cands->r[i].meta;
	nsb_saved_free(&now);
	return same;
}

static void
resync(uintptr_t start, uintptr_t end, const struct nsb_saved *cands, bool pkeys,
       bool are_records)
{
	struct resync rs;

	if (end <= start)
		return;
	/* Field by field: an initialiser zeroed the whole list inline in
	 * keep (~50 instructions), which nsb_saved_init() does not need. */
	rs.cands = cands;
	rs.lo = rs.hi = 0;
	rs.err = 0;
	rs.one_whole = are_records && cands->n == 1;
	rs.one = false;
	nsb_saved_init(&rs.keep);
	if (cands->n && ask_kernel(start, end, cands, pkeys, &rs) != 0) {
		rs.keep.n = 0;
		rs.one = false;
		if (rs.err != ENOMEM)
			keep_mapped(start, end, cands, &rs.keep);
	}
	if (rs.one) {
		/* The one record, whole in one VMA of its mapping (a failed
		 * mprotect next to a record): only its protection may have
		 * changed; where it did not, nothing did (no join either,
		 * as below). */
		if (!((cands->r[0].meta ^ (uint32_t)rs.one_prot) & NSB_META_PROT))
			return;
		(void)nsb_ranges_set_prot_found(cands->r[0].start, cands->r[0].end,
						rs.one_prot & NSB_META_PROT, -1);
		(void)nsb_ranges_join(start);
		(void)nsb_ranges_join(end);
		return;
	}
	if (only_prot_changed(start, end, cands, &rs.keep, are_records)) {
		bool changed = false;

		for (size_t i = 0; i < rs.keep.n; i++)
			if ((rs.keep.r[i].meta ^ cands->r[i].meta) & NSB_META_PROT) {
				/* Inside a candidate, which is a record:
				 * no search. */
				(void)nsb_ranges_set_prot_found(rs.keep.r[i].start, rs.keep.r[i].end,
								(int)(rs.keep.r[i].meta & NSB_META_PROT), -1);
				changed = true;
			}
		/* The kernel shows what the records say: the table is as it
		 * was before the call, nothing cut that a join would mend. */
		if (!changed) {
			nsb_saved_free(&rs.keep);
			return;
		}
	} else {
		nsb_ranges_cut(start, end);
		for (size_t i = 0; i < rs.keep.n; i++)
			put_back(&rs.keep.r[i]);
	}
	nsb_saved_free(&rs.keep);
	/* A record the span cut through, where the kernel's VMA goes on
	 * past it, is one record again (as it was before the call). */
	(void)nsb_ranges_join(start);
	(void)nsb_ranges_join(end);
}

/*
 * Table lock held: the records of [start, end), which a call nested in a
 * handler may have made stale (ranges.c, settle()), made the kernel's
 * again: those it still shows stay, with its protection; the others go.
 * Without room to ask, they all go.
 */
void
nsb_resync_noted(uintptr_t start, uintptr_t end)
{
	struct nsb_saved cands;

	nsb_saved_init(&cands);
	if (nsb_ranges_collect(start, end, &cands) < 0 || nsb_ranges_reserve(cands.n + 4) < 0)
		nsb_ranges_cut_stale(start, end);
	else if (cands.n)
		resync(start, end, &cands, false, true);
	nsb_saved_free(&cands);
}

/*
 * The records of [*start, *end) into before, the span widened to whole
 * huge pages if records of hugetlbfs lie there: a call that the kernel
 * refuses for splitting one changes nothing, and resync() must not split
 * the record there either.  Caller holds the table lock.
 */
static int
collect_whole(uintptr_t *start, uintptr_t *end, struct nsb_saved *before)
{
	size_t unit = nsb_config.page_size;

	if (nsb_ranges_collect(*start, *end, before) < 0)
		return -1;
	for (size_t i = 0; i < before->n; i++)
		if (unit_of(before->r[i].meta) > unit)
			unit = unit_of(before->r[i].meta);
	if (unit == nsb_config.page_size)
		return 0;
	*start &= ~(uintptr_t)(unit - 1);
	*end = round_up(*end, unit);
	before->n = 0;
	return nsb_ranges_collect(*start, *end, before);
}

/* lock_span() past the usual call: the records listed whole. */
static __attribute__((noinline)) int
lock_span_collect(uintptr_t *wstart, uintptr_t *wend, struct nsb_saved *before)
{
	if (collect_whole(wstart, wend, before) == 0)
		return 0;
	nsb_ranges_unlock();
	nsb_saved_free(before);
	errno = ENOMEM;
	return -1;
}

/*
 * Takes the table lock for a call over [start, end) that touches records:
 * the span widened to whole huge pages in *wstart, *wend, its records in
 * before, room for the records the call may split where memory allows
 * (the call is never refused for want of it: see nsb_ranges_reserve).
 * 0; or -1 with errno ENOMEM, unlocked and before freed.  Inline, the
 * list made whole apart (lock_span_collect): the usual call's one record
 * is nsb_ranges_one()'s.
 */
static inline int
lock_span(uintptr_t start, uintptr_t end, uintptr_t *wstart, uintptr_t *wend,
	  struct nsb_saved *before, const struct nsb_peek *pk)
{
	nsb_saved_init(before);
	nsb_ranges_lock();
	*wstart = start;
	*wend = end;
	/* Best effort: a call is never refused for the room (RLIMIT_AS). */
	(void)nsb_ranges_room(2);
	if (nsb_ranges_one(start, end, &before->r[0], pk)) {
		before->n = 1;	/* the usual call: what collect_whole() lists */
		return 0;
	}
	return lock_span_collect(wstart, wend, before);
}

/* The end of a call that lock_span began and put in flux: the records
 * open again, unlocked, before freed, errno the call's. */
static void
unlock_span(struct nsb_saved *before, int err)
{
	nsb_ranges_flux_end();
	nsb_ranges_unlock();
	nsb_saved_free(before);
	errno = err;
}

/* ---- mmap -------------------------------------------------------------- */

/* The page size of the mapping an mmap call makes: a huge page for
 * hugetlbfs and MAP_HUGETLB, which the kernel rounds lengths to. */
static size_t
new_unit(int flags, int fd, const struct nsb_decision *d)
{
	struct statfs fs;

	if (d->protect)
		return unit_of(d->meta);
	if (flags & MAP_HUGETLB) {
		unsigned s = ((unsigned)flags >> MAP_HUGE_SHIFT) & 0x3f;

		if (s)
			return (size_t)1 << s;
	}
	if ((flags & MAP_HUGETLB) ||
	    (!(flags & MAP_ANONYMOUS) && fd >= 0 && nsb_unfiltered() && fstatfs(fd, &fs) == 0 &&
	     fs.f_type == HUGETLBFS_MAGIC))
		return (flags & MAP_HUGETLB) ? (size_t)1 << nsb_default_huge_shift() : (size_t)fs.f_bsize;
	return nsb_config.page_size;
}

static uint32_t
file_of(int fd, struct nsb_decision *d)
{
	uint32_t file;
	char link[64], path[4096];
	ssize_t n = -1;

	if (!d->has_file)
		return 0;
	if (nsb_config.log && nsb_unfiltered()) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, path, sizeof(path) - 1);
	}
	if (n > 0)
		path[n] = '\0';
	file = nsb_files_get(fd, &d->st, n > 0 ? path : NULL, d->meta, d->pfd);
	nsb_policy_drop(d);
	return file;
}

static int
vma_write(const struct nsb_vma *vma, void *arg)
{
	*(int *)arg = vma->write;
	return 1;
}

/*
 * A memory-backed file opened for writing and mapped shared read-only:
 * the kernel cleared VM_MAYWRITE if the file was sealed against writing
 * (F_SEAL_FUTURE_WRITE; F_SEAL_WRITE from 6.7, before which such a mapping
 * fails) when it was mapped.  Seals are never taken off, so a file not
 * sealed now was not then; for one sealed now (it may have been sealed
 * since) the kernel's VmFlags tell.  1: may become writable, 0: not,
 * -1: not known (the smaps not readable: mprotect then asks nothing more,
 * as for a record nosigbus_protect made).
 */
static int
unsealed(int fd, uintptr_t at)
{
	int seals = fcntl(fd, F_GET_SEALS), w = 0;

	if (seals < 0 || !(seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)))
		return 1;
	if (nsb_maps_each(at, at + 1, true, vma_write, &w) < 0 || w == 0)
		return -1;
	return w == NSB_VMA_MAY_WRITE;
}

/* may_write_of()'s question to the descriptor, out of line. */
static __attribute__((noinline)) int
may_write_asked(int fd, const struct nsb_decision *d, void *p)
{
	int fl;

	fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -1;
	if ((fl & O_ACCMODE) != O_RDWR)
		return 0;
	return d->memfs ? unsealed(fd, (uintptr_t)p) : 1;
}

/*
 * A shared mapping of a file at p is writable later (mprotect) only if
 * the descriptor was opened for writing and, for a memory-backed file,
 * not sealed against writing: the kernel's VM_MAYWRITE.  Asked only when
 * the mapping is not writable now, which proves it (refresh.c maps the
 * file again so; mprotect refuses PROT_WRITE without it, replaced pages
 * or not).  1: may, 0: may not, -1: nothing to ask (a private or
 * anonymous mapping), or the kernel did not say.
 * Inline: a mapping made writable (the usual one) asks nothing.
 */
static inline int
may_write_of(int fd, int prot, const struct nsb_decision *d, void *p)
{
	if (!d->protect || (d->meta & (NSB_META_SHARED | NSB_META_ANON)) != NSB_META_SHARED)
		return -1;
	if (prot & PROT_WRITE)
		return 1;
	return may_write_asked(fd, d, p);
}

static void *
do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	int kflags = flags & ~MAP_NOSIGBUS;
	struct nsb_decision d;
	struct nsb_saved before;
	uintptr_t start = 0, end = 0, wstart, wend;
	bool replacing, policy_only, early, asked = flags & MAP_NOSIGBUS;
	size_t unit;
	void *p = MAP_FAILED;	/* (set on every path: for the compiler) */
	int err = 0, may = -1;

	nsb_enter();
	/* From a handler that interrupted this thread's own call to the
	 * library (ranges.c, nested calls): no decision (it may need memory
	 * the interrupted call is taking), no record, no wait; what the
	 * mapping replaces is noted. */
	if (__builtin_expect(nsb_ranges_nested(), 0)) {
		if ((flags & MAP_NOSIGBUS) && (flags & MAP_TYPE) != MAP_PRIVATE && nsb_config.strict) {
			errno = (flags & MAP_TYPE) == MAP_SHARED_VALIDATE ? EOPNOTSUPP : EINVAL;
			return MAP_FAILED;
		}
		if ((flags & MAP_FIXED) && span_of(addr, len ? len : 1, nsb_config.page_size, &start, &end))
			nsb_ranges_note(start, end);
		p = nsb_sys_mmap(addr, len, prot, kflags, fd, off);
		if (p != MAP_FAILED && !(flags & MAP_FIXED))
			nsb_forget_stale(p, len);
		return p;
	}
	nsb_policy_decide(prot, flags, fd, &d);
	if (d.protect && (d.meta & NSB_META_SHARED) && nsb_config.strict) {
		if (flags & MAP_NOSIGBUS) {
			/* The v2 patch: MAP_NOSIGBUS is for private mappings.
			 * MAP_SHARED_VALIDATE has the MAP_PRIVATE bit, passes
			 * that test, and fails validation of the unknown flag. */
			nsb_policy_drop(&d);
			errno = (flags & MAP_TYPE) == MAP_SHARED_VALIDATE ? EOPNOTSUPP : EINVAL;
			return MAP_FAILED;
		}
		d.protect = false;	/* policies follow v2 too */
		nsb_policy_drop(&d);
	}
	/* MAP_FIXED_NOREPLACE succeeds only where nothing is mapped: a record
	 * there is one a raw call left behind, as where the kernel finds room
	 * (below, and nsb_forget_stale). */
	replacing = (flags & MAP_FIXED) && len && page_aligned((uintptr_t)addr) &&
		    span_of(addr, len, nsb_config.page_size, &start, &end) &&
		    nsb_ranges_overlap(start, end);
	if (!d.protect && !replacing) {
		/* Not protected, replacing no record: a record where the kernel
		 * put it outlived its mapping through a raw call (munmap, shmdt,
		 * mremap) and must not protect this one, whatever the policy
		 * (the fast path in mmap() does the same under flag). */
		p = nsb_sys_mmap(addr, len, prot, kflags, fd, off);
		if (p != MAP_FAILED && !nsb_ranges_empty())
			nsb_forget_stale(p, len);
		return p;
	}

	unit = new_unit(flags, fd, &d);
	if (replacing)
		end = round_up(end, unit);
	/* A mapping only the policy protects (the program did not ask) is
	 * made first, and recorded only if the library has room: a tight
	 * RLIMIT_AS never fails it for the library's memory (issue 20).
	 * Where the kernel finds room it replaces no record, so it is made,
	 * and its descriptor asked, before the table lock is taken: the lock
	 * covers the records alone, not the kernel's work, which threads that
	 * map files side by side would otherwise wait for in turn.  (Until
	 * it is recorded, nobody else knows where it is: the same window as
	 * a new mapping's in nsb_forget_stale.  A fork waits for it, so that
	 * no child has it without its record: process.c.) */
	policy_only = !replacing && !(flags & MAP_NOSIGBUS);
	/* A fork waiting (process.c) would give its child the mapping
	 * without the record: then made under the lock, as the others. */
	early = policy_only && nsb_process_map_begin();
	if (early) {
		p = nsb_sys_mmap(addr, len, prot, kflags, fd, off);
		err = errno;
		if (p == MAP_FAILED) {
			nsb_process_map_end();
			nsb_policy_drop(&d);
			errno = err;
			return p;
		}
		may = may_write_of(fd, prot, &d, p);
	}
	nsb_saved_init(&before);
	nsb_ranges_lock();
	/* Room first: once the mapping exists, recording it must not fail. */
	wstart = start;
	wend = end;
	if (policy_only && !early) {
		p = nsb_sys_mmap(addr, len, prot, kflags, fd, off);
		err = errno;
		if (p == MAP_FAILED)
			goto out;
		may = may_write_of(fd, prot, &d, p);
	} else if (!policy_only) {
		/* Only a mapping the program asks to protect is refused for
		 * want of room for its record (the cut of those it replaces
		 * needs none: nsb_ranges_reserve). */
		if ((!nsb_ranges_room(2) && asked) ||
		    (replacing && collect_whole(&wstart, &wend, &before) < 0)) {
			p = MAP_FAILED;
			err = ENOMEM;
			goto out;
		}
		if (replacing)
			nsb_ranges_flux(wstart, wend, 0, 0);
		p = nsb_sys_mmap(addr, len, prot, kflags, fd, off);
		err = errno;
		if (p == MAP_FAILED) {
			if (replacing)
				resync(wstart, wend, &before, false, true);
			goto out;
		}
		may = -1;
	}
	/* A new mapping where the kernel found room: a record there is one a
	 * raw call (munmap, shmdt, mremap) left behind. */
	nsb_ranges_cut_stale(replacing ? start : (uintptr_t)p,
			     replacing ? end : round_up((uintptr_t)p + len, unit));
	if (d.protect)
		nsb_policy_prepare();
	if (d.protect && (asked || nsb_ranges_room(2))) {
		struct nsb_range r = { .start = (uintptr_t)p,
				       .end = round_up((uintptr_t)p + len, unit),
				       .off = (d.meta & NSB_META_ANON) ? 0 : (uint64_t)off,
				       .meta = d.meta, .file = file_of(fd, &d) };

		if (nsb_record(&r) < 0 && asked) {
			nsb_sys_munmap(p, len);
			p = MAP_FAILED;
			err = ENOMEM;
		} else if (r.acct && (d.meta & NSB_META_SHARED) && !(d.meta & NSB_META_ANON)) {
			if (!policy_only)
				may = may_write_of(fd, prot, &d, p);
			if (may >= 0)
				nsb_account_set_may_write(r.acct, may);
		}
	}
out:
	nsb_policy_drop(&d);
	if (replacing)
		nsb_ranges_flux_end();
	if (early)
		nsb_process_map_end();	/* recorded: a fork may come */
	nsb_ranges_unlock();
	nsb_saved_free(&before);
	errno = err;
	return p;
}

/*
 * A mapping made where the kernel found room, over a record: the record
 * outlived its mapping through a raw call the library did not see
 * (munmap, shmdt, mremap), and must not protect the new one.  Costs
 * nothing while nothing is recorded, one lock-free check else.
 */
void
nsb_forget_stale(void *p, size_t len)
{
	int saved_errno = errno;
	uintptr_t s = (uintptr_t)p, e;

	if (nsb_ranges_none() || !span_of(p, len, nsb_config.page_size, &s, &e) ||
	    !nsb_ranges_overlap(s, e))
		return;
	nsb_ranges_lock();
	nsb_ranges_cut_stale(s, e);
	nsb_ranges_unlock();
	errno = saved_errno;
}

NSB_EXPORT void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	int saved_errno;
	void *p;

	/* Most calls: no flag, no policy, nothing replaced.  (The policy is
	 * only known once page_size is set.) */
	if (__builtin_expect(!(flags & (MAP_NOSIGBUS | MAP_FIXED)) &&
			     (nsb_config.policy == NSB_POLICY_FLAG || (flags & MAP_ANONYMOUS)) &&
			     nsb_config.page_size, 1)) {
		p = nsb_sys_mmap(addr, len, prot, flags, fd, off);
		if (__builtin_expect(p != MAP_FAILED && !nsb_ranges_empty(), 0))
			nsb_forget_stale(p, len);
		return p;
	}
	saved_errno = errno;
	p = do_mmap(addr, len, prot, flags, fd, off);
	if (p != MAP_FAILED)
		errno = saved_errno;
	return p;
}

NSB_EXPORT void *
mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}

/* ---- munmap ------------------------------------------------------------ */

NSB_EXPORT int
munmap(void *addr, size_t len)
{
	uintptr_t start, end, wstart, wend;
	struct nsb_saved before;
	struct nsb_peek pk;
	bool later;
	size_t n = 0;
	int ret, err;

	if (nsb_ranges_none())
		return nsb_sys_munmap(addr, len);
	nsb_enter();
	if (!len || !page_aligned((uintptr_t)addr) ||
	    !span_of(addr, len, nsb_config.page_size, &start, &end) ||
	    !nsb_ranges_overlap_peek(start, end, &pk))
		return nsb_sys_munmap(addr, len);

	/* Records of pages only, no more than the list holds inline (a
	 * mapping unmapped whole): the list is made only if the call
	 * fails, from the same records (the lock is held), and cannot fail
	 * then.  Else first, as lock_span() does. */
	nsb_saved_init(&before);
	nsb_ranges_lock();
	wstart = start;
	wend = end;
	if (nsb_ranges_one(start, end, &before.r[0], &pk))
		n = 1;	/* the usual call: one record, inside the span */
	later = n == 1 || (nsb_ranges_unit(start, end, &n) == nsb_config.page_size &&
			   n <= before.cap);
	(void)nsb_ranges_room(2);
	if (!later && collect_whole(&wstart, &wend, &before) < 0) {
		nsb_ranges_unlock();
		nsb_saved_free(&before);
		errno = ENOMEM;
		return -1;
	}
	nsb_ranges_flux(wstart, wend, 0, 0);
	ret = nsb_sys_munmap(addr, len);
	err = errno;
	if (ret == 0 && n)
		nsb_ranges_cut_found(start, end);	/* n: records there, counted above */
	else if (ret == 0)
		nsb_ranges_cut(start, end);
	else if (!later || nsb_ranges_collect(wstart, wend, &before) == 0)
		resync(wstart, wend, &before, false, true);
	unlock_span(&before, err);
	return ret;
}

/* ---- shmat, remap_file_pages: mappings made over others --------------- */

#ifndef SHM_RND
#define SHM_RND 020000
#endif
#ifndef SHM_REMAP
#define SHM_REMAP 040000
#endif

/*
 * shmat(SHM_REMAP) maps a System V segment over whatever is at addr (the
 * only way it replaces a mapping: without the flag it fails there): the
 * records there go, as with mmap(MAP_FIXED).  The segment's size is asked
 * of the kernel (shmctl) only then, a call the program that attaches
 * System V memory makes itself.  shmdt removes only a segment's VMAs,
 * which no record describes.
 */
NSB_EXPORT void *
shmat(int id, const void *addr, int flags)
{
	uintptr_t at = (uintptr_t)addr, start, end, wstart, wend;
	struct nsb_saved before;
	struct shmid_ds ds;
	void *p;
	int err;

	if (!addr || !(flags & SHM_REMAP) || nsb_ranges_none()) {
		p = (void *)syscall(SYS_shmat, id, addr, flags);
		/* Where the kernel found room (SHM_REMAP not asked). */
		if (p != (void *)-1 && !nsb_ranges_empty() &&
		    syscall(SYS_shmctl, id, IPC_STAT, &ds) == 0)
			nsb_forget_stale(p, ds.shm_segsz);
		return p;
	}
	nsb_enter();
	if (flags & SHM_RND)
		at &= ~(uintptr_t)(SHMLBA - 1);
	if (!page_aligned(at) || syscall(SYS_shmctl, id, IPC_STAT, &ds) != 0 || !ds.shm_segsz ||
	    !span_of((void *)at, ds.shm_segsz, nsb_config.page_size, &start, &end) ||
	    !nsb_ranges_overlap(start, end))
		return (void *)syscall(SYS_shmat, id, addr, flags);
	if (lock_span(start, end, &wstart, &wend, &before, NULL) < 0)
		return (void *)-1;
	nsb_ranges_flux(wstart, wend, 0, 0);
	p = (void *)syscall(SYS_shmat, id, addr, flags);
	err = errno;
	if (p != (void *)-1)
		nsb_ranges_cut(start, end);
	else
		resync(wstart, wend, &before, false, false);
	unlock_span(&before, err);
	return p;
}

/*
 * remap_file_pages (emulated by the kernel since Linux 4.0) maps
 * [addr, addr + size), which must lie in one shared VMA of a file, again
 * from file page pgoff: a new mapping of the same file at other offsets,
 * so its record is made again there, with the offsets the end-of-file
 * judgement needs, and an account of its own.
 */
NSB_EXPORT int
remap_file_pages(void *addr, size_t size, int prot, size_t pgoff, int flags)
{
	uintptr_t start, end, wstart, wend;
	struct nsb_saved before;
	int ret, err;

	if (nsb_ranges_none())
		return (int)syscall(SYS_remap_file_pages, addr, size, prot, pgoff, flags);
	nsb_enter();
	start = (uintptr_t)addr & ~(uintptr_t)(nsb_config.page_size - 1);
	size &= ~(size_t)(nsb_config.page_size - 1);
	if (!size || !span_of((void *)start, size, nsb_config.page_size, &start, &end) ||
	    !nsb_ranges_overlap(start, end))
		return (int)syscall(SYS_remap_file_pages, addr, size, prot, pgoff, flags);
	if (lock_span(start, end, &wstart, &wend, &before, NULL) < 0)
		return -1;
	nsb_ranges_flux(wstart, wend, 0, 0);
	ret = (int)syscall(SYS_remap_file_pages, addr, size, prot, pgoff, flags);
	err = errno;
	if (ret == 0) {
		/* One new mapping with the flags of the VMA at start (Linux
		 * 6.1 takes several of one file and the same flags): protected
		 * as that one was. */
		const struct nsb_range *at = NULL;
		struct nsb_range r;
		struct nsb_account *was;

		for (size_t i = 0; i < before.n; i++)
			if (before.r[i].start <= start && start < before.r[i].end)
				at = &before.r[i];
		nsb_ranges_cut(start, end);
		if (!at)
			goto out;
		r = *at;
		was = r.acct;
		r.start = start;
		r.end = end;
		r.off = (uint64_t)pgoff * nsb_config.page_size;
		/* A new VMA: no advice of the old one's (a lock, the kernel
		 * keeps: it maps the new one locked). */
		r.meta &= ~(NSB_META_DONTFORK | NSB_META_WIPEONFORK | NSB_META_DONTDUMP |
			    NSB_META_HUGEPAGE | NSB_META_NOHUGEPAGE | NSB_META_MERGEABLE |
			    NSB_META_MBIND);
		if (nsb_record(&r) == 0)
			nsb_account_copy_write(r.acct, was);
		else
			nsb_ranges_lost();
	} else {
		resync(wstart, wend, &before, false, false);
	}
out:
	unlock_span(&before, err);
	return ret;
}

/* ---- mlock, mlock2, munlock, mlockall, munlockall ---------------------- */

#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1
#endif
#ifndef MCL_ONFAULT
#define MCL_ONFAULT 4
#endif

/*
 * A page a rescue replaces is locked again if the program locked it (the
 * kernel's new VMA is not: PipeWire locks its buffers for a real-time
 * thread).  The records follow these calls, made with the system call
 * the C library makes; a rescue repeats the program's own kind of lock.
 * (mlockall(MCL_FUTURE) needs nothing: the kernel locks every new
 * mapping, the replacement too.)
 */
static int
lock_call(long nr, void *addr, size_t len, long arg, uint32_t set, uint32_t clear)
{
	uintptr_t start, end, wstart, wend;
	struct nsb_saved before;
	int ret, err;

	if (nsb_ranges_none())
		return (int)syscall(nr, addr, len, arg);
	nsb_enter();
	start = (uintptr_t)addr & ~(uintptr_t)(nsb_config.page_size - 1);
	if (!len || !span_of((void *)start, len + ((uintptr_t)addr - start), nsb_config.page_size,
			     &start, &end) ||
	    !nsb_ranges_overlap(start, end))
		return (int)syscall(nr, addr, len, arg);
	if (lock_span(start, end, &wstart, &wend, &before, NULL) < 0)
		return -1;
	/* No rescue until the records say it: its page would miss it. */
	nsb_ranges_flux(wstart, wend, 0, 0);
	ret = (int)syscall(nr, addr, len, arg);
	err = errno;
	if (ret == 0)
		(void)nsb_ranges_set_flags(start, end, set, clear);
	unlock_span(&before, err);
	return ret;
}

NSB_EXPORT int
mlock(const void *addr, size_t len)
{
	return lock_call(SYS_mlock, (void *)addr, len, 0, NSB_META_LOCKED, NSB_META_ONFAULT);
}

NSB_EXPORT int
mlock2(const void *addr, size_t len, unsigned flags)
{
	int ret;

	if (flags & MLOCK_ONFAULT)
		return lock_call(SYS_mlock2, (void *)addr, len, flags,
				 NSB_META_LOCKED | NSB_META_ONFAULT, 0);
	ret = lock_call(SYS_mlock2, (void *)addr, len, flags, NSB_META_LOCKED, NSB_META_ONFAULT);
	/* As the C library: a kernel without mlock2 (before 4.4). */
	if (ret < 0 && errno == ENOSYS && flags == 0)
		ret = mlock(addr, len);
	return ret;
}

NSB_EXPORT int
munlock(const void *addr, size_t len)
{
	return lock_call(SYS_munlock, (void *)addr, len, 0, 0, NSB_META_LOCKED | NSB_META_ONFAULT);
}

#ifndef MPOL_DEFAULT
#define MPOL_DEFAULT 0
#endif

/*
 * mbind gives a mapping a memory policy of its own, which a replaced page
 * would not have (it would follow the thread's).  The records say only
 * that the program set one; a rescue asks the kernel which
 * (get_mempolicy(MPOL_F_ADDR) at the page, before replacing it) and sets
 * it on the new page: calls only a program that calls mbind gets.
 */
/* libnuma's (the C library declares none), which this replaces. */
long mbind(void *addr, unsigned long len, int mode, const unsigned long *nodemask,
	   unsigned long maxnode, unsigned flags);

NSB_EXPORT long
mbind(void *addr, unsigned long len, int mode, const unsigned long *nodemask,
      unsigned long maxnode, unsigned flags)
{
	uintptr_t start, end, wstart, wend;
	struct nsb_saved before;
	long ret;
	int err;

	if (nsb_ranges_none())
		return syscall(SYS_mbind, addr, len, mode, nodemask, maxnode, flags);
	nsb_enter();
	if (!len || !page_aligned((uintptr_t)addr) ||
	    !span_of(addr, len, nsb_config.page_size, &start, &end) ||
	    !nsb_ranges_overlap(start, end))
		return syscall(SYS_mbind, addr, len, mode, nodemask, maxnode, flags);
	if (lock_span(start, end, &wstart, &wend, &before, NULL) < 0)
		return -1;
	nsb_ranges_flux(wstart, wend, 0, 0);
	ret = syscall(SYS_mbind, addr, len, mode, nodemask, maxnode, flags);
	err = errno;
	if (ret == 0)
		(void)nsb_ranges_set_flags(start, end, mode == MPOL_DEFAULT ? 0 : NSB_META_MBIND,
					   mode == MPOL_DEFAULT ? NSB_META_MBIND : 0);
	unlock_span(&before, err);
	return ret;
}

/* Every record at once: the whole address space. */
static int
lock_all(long nr, long arg, uint32_t set, uint32_t clear)
{
	uintptr_t end = UINTPTR_MAX & ~(uintptr_t)(nsb_config.page_size - 1);
	int ret, err;

	/* First: a vfork child's leftovers would make this call look nested
	 * (nsb_enter).  Nested (ranges.c): the records' lock bits stay as
	 * they were. */
	nsb_enter();
	if (nsb_ranges_none() || (nr == SYS_mlockall && !(arg & MCL_CURRENT)) || nsb_ranges_nested())
		return (int)syscall(nr, arg);
	nsb_ranges_lock();
	/* Every record is whole in the span: no room needed. */
	nsb_ranges_flux(0, end, 0, 0);
	ret = (int)syscall(nr, arg);
	err = errno;
	if (ret == 0)
		(void)nsb_ranges_set_flags(0, end, set, clear);
	nsb_ranges_flux_end();
	nsb_ranges_unlock();
	errno = err;
	return ret;
}

NSB_EXPORT int
mlockall(int flags)
{
	return lock_all(SYS_mlockall, flags,
			NSB_META_LOCKED | ((flags & MCL_ONFAULT) ? NSB_META_ONFAULT : 0),
			(flags & MCL_ONFAULT) ? 0 : NSB_META_ONFAULT);
}

NSB_EXPORT int
munlockall(void)
{
	return lock_all(SYS_munlockall, 0, 0, NSB_META_LOCKED | NSB_META_ONFAULT);
}

/* ---- mprotect ---------------------------------------------------------- */

/*
 * After a successful mprotect of [start, end): each record there takes the
 * protection in whole units of its own (a part of a huge page: the kernel
 * succeeds only when the protection is already that, and a record must not
 * be split there).
 */
static __attribute__((noinline)) void
set_prot_each(uintptr_t start, uintptr_t end, const struct nsb_saved *recs, int prot, int pkey)
{
	for (size_t i = 0; i < recs->n; i++) {
		const struct nsb_range *r = &recs->r[i];
		size_t unit = unit_of(r->meta);
		uintptr_t s = start > r->start ? start : r->start;
		uintptr_t e = end < r->end ? end : r->end;

		s = r->start + ((s - r->start) & ~(uintptr_t)(unit - 1));
		e = r->start + round_up(e - r->start, unit);
		if (e > r->end)
			e = r->end;
		if (s < e)	/* inside a record of the list: no search */
			nsb_ranges_set_prot_found(s, e, prot, pkey);
	}
}

/* Inline: the usual call (one record of pages inside the span, changed
 * whole: lock_span() listed it so) is one call of the table's; the rest
 * is set_prot_each()'s. */
static inline void
set_prot_whole(uintptr_t start, uintptr_t end, const struct nsb_saved *recs, int prot, int pkey)
{
	if (recs->n == 1 && recs->r[0].start >= start && recs->r[0].end <= end &&
	    unit_of(recs->r[0].meta) == nsb_config.page_size) {
		nsb_ranges_set_prot_found(recs->r[0].start, recs->r[0].end, prot, pkey);
		return;
	}
	set_prot_each(start, end, recs, prot, pkey);
}

/*
 * A failed mprotect changed at most the VMAs from start up to where it
 * stopped, which is at or below the first hole of its range (the kernel
 * walks the VMAs in order, and stops at a hole): records that all lie
 * above a hole below them are as they were.  One probe for a hole below
 * the lowest record says so (nsb_maps_hole: one call per 16 MiB of 4 KiB
 * pages), instead of a query, which needs the maps' descriptor, where the
 * range below is at most that long, and instead of reading the maps
 * wherever the kernel cannot be asked about the span alone.
 */
static bool
unchanged_above_hole(uintptr_t start, const struct nsb_saved *recs, bool pkeys)
{
	uintptr_t lowest = UINTPTR_MAX;

	if (pkeys)
		return false;
	for (size_t i = 0; i < recs->n; i++)
		if (recs->r[i].start < lowest)
			lowest = recs->r[i].start;
	if (lowest <= start || lowest == UINTPTR_MAX ||
	    (nsb_maps_queries() && (lowest - start) / nsb_config.page_size > 4096))
		return false;
	return nsb_maps_hole(start, lowest) == 1;
}

/*
 * The lowest address of [start, end) in a shared mapping of a file that
 * the kernel would not let become writable (no VM_MAYWRITE: the
 * descriptor was opened read-only), or end.  Its replaced pages are
 * private anonymous memory that the kernel would let be written: the
 * kernel flag's single VMA would not.
 */
static uintptr_t
first_unwritable(uintptr_t start, uintptr_t end, const struct nsb_saved *recs)
{
	uintptr_t at = end;

	for (size_t i = 0; i < recs->n; i++) {
		const struct nsb_range *r = &recs->r[i];
		uintptr_t s = start > r->start ? start : r->start;

		if ((r->meta & (NSB_META_SHARED | NSB_META_ANON)) == NSB_META_SHARED &&
		    nsb_account_no_write(r->acct) && s < r->end && s < at)
			at = s;
	}
	return at;
}

/*
 * mprotect to a writable protection where the mapping at bad may not be
 * written: the kernel changes the VMAs below bad and stops there with
 * EACCES, as over the kernel flag's VMAs.  Below bad, the call itself;
 * at start, a call where nothing is mapped (the last page of the address
 * space) tells an invalid protection or key (EINVAL) first, as the
 * kernel checks them before any VMA.  Records and flux as do_mprotect's.
 */
static int
refuse_write(uintptr_t start, uintptr_t bad, int prot, int pkey, bool with_pkey)
{
	size_t ps = nsb_config.page_size;
	uintptr_t at = bad > start ? start : UINTPTR_MAX - 2 * ps + 1;
	size_t len = bad > start ? bad - start : ps;
	int ret = with_pkey ? nsb_sys_pkey_mprotect((void *)at, len, prot, pkey)
			    : nsb_sys_mprotect((void *)at, len, prot);

	if (ret == 0 || (bad == start && errno == ENOMEM)) {
		errno = EACCES;
		return bad > start ? 1 : 0;	/* 1: [start, bad) changed */
	}
	return -1;
}

static int
do_mprotect(void *addr, size_t len, int prot, int pkey, bool with_pkey)
{
	uintptr_t start, end, wstart, wend, bad;
	struct nsb_saved before;
	struct nsb_peek pk;
	int ret, err;

	nsb_enter();
	if (nsb_ranges_none() || !page_aligned((uintptr_t)addr) ||
	    !span_of(addr, len, nsb_config.page_size, &start, &end) ||
	    !nsb_ranges_overlap_peek(start, end, &pk))
		return with_pkey ? nsb_sys_pkey_mprotect(addr, len, prot, pkey)
				 : nsb_sys_mprotect(addr, len, prot);

	if (lock_span(start, end, &wstart, &wend, &before, &pk) < 0)
		return -1;
	/* No rescue in the span until the records have the new protection:
	 * a page rescued meanwhile would keep the old one. */
	nsb_ranges_flux(wstart, wend, 0, 0);
	if ((prot & PROT_WRITE) && !(prot & (PROT_GROWSDOWN | PROT_GROWSUP)) &&
	    (bad = first_unwritable(start, end, &before)) < end) {
		ret = refuse_write(start, bad, prot, pkey, with_pkey);
		err = errno;
		if (ret == 1)
			set_prot_whole(start, bad, &before, prot, with_pkey ? pkey : -1);
		else if (ret < 0 && bad > start && !unchanged_above_hole(start, &before, with_pkey))
			resync(wstart, wend, &before, with_pkey, true);
		unlock_span(&before, err);
		return -1;
	}
	ret = with_pkey ? nsb_sys_pkey_mprotect(addr, len, prot, pkey)
			: nsb_sys_mprotect(addr, len, prot);
	err = errno;
	if (ret == 0)
		set_prot_whole(start, end, &before, prot, with_pkey ? pkey : -1);
	else if (!unchanged_above_hole(start, &before, with_pkey))
		resync(wstart, wend, &before, with_pkey, true);	/* it may have stopped part-way */
	unlock_span(&before, err);
	return ret;
}

NSB_EXPORT int
mprotect(void *addr, size_t len, int prot)
{
	return do_mprotect(addr, len, prot, -1, false);
}

NSB_EXPORT int
pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	return do_mprotect(addr, len, prot, pkey, true);
}

/* ---- madvise ----------------------------------------------------------- */

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#define MADV_KEEPONFORK 19
#endif

/* The meta bits an advice sets and clears; false if it changes none
 * (what fork does with a mapping, and what a replaced page must be given
 * again: rescue.c's replace()). */
static bool
fork_advice(int advice, uint32_t *set, uint32_t *clear)
{
	*set = *clear = 0;
	switch (advice) {
	case MADV_DONTDUMP:
		*set = NSB_META_DONTDUMP;
		return true;
	case MADV_DODUMP:
		*clear = NSB_META_DONTDUMP;
		return true;
	case MADV_HUGEPAGE:
		*set = NSB_META_HUGEPAGE;
		*clear = NSB_META_NOHUGEPAGE;
		return true;
	case MADV_NOHUGEPAGE:
		*set = NSB_META_NOHUGEPAGE;
		*clear = NSB_META_HUGEPAGE;
		return true;
	case MADV_MERGEABLE:
		*set = NSB_META_MERGEABLE;
		return true;
	case MADV_UNMERGEABLE:
		*clear = NSB_META_MERGEABLE;
		return true;
	case MADV_DONTFORK:
		*set = NSB_META_DONTFORK;
		return true;
	case MADV_DOFORK:
		*clear = NSB_META_DONTFORK;
		return true;
	case MADV_WIPEONFORK:
		*set = NSB_META_WIPEONFORK;
		return true;
	case MADV_KEEPONFORK:
		*clear = NSB_META_WIPEONFORK;
		return true;
	default:
		return false;
	}
}

/* The first VMA of [start, end) that the advice stops at: one of
 * hugetlbfs whose flags it would change (the kernel splits no VMA the
 * advice leaves as it is) and that start or end would split inside a
 * huge page (EINVAL), and for MADV_WIPEONFORK, a file's or a shared one. */
struct refusal {
	uintptr_t start, end, at;
	uint32_t set, clear;
	bool wipe;
};

static int
refuses_advice(const struct nsb_vma *vma, void *arg)
{
	struct refusal *rf = arg;
	size_t unit = vma->page_size;
	uint32_t has = vma->kept | (vma->dontfork ? NSB_META_DONTFORK : 0) |
		       (vma->wipeonfork ? NSB_META_WIPEONFORK : 0);
	bool split = unit > nsb_config.page_size && ((rf->set & ~has) || (rf->clear & has)) &&
		     ((vma->start < rf->start && (rf->start & (unit - 1))) ||
		      (vma->end > rf->end && (rf->end & (unit - 1))));

	if (split || (rf->wipe && (!vma->anon || vma->shared || vma->zero_file))) {
		rf->at = vma->start > rf->start ? vma->start : rf->start;
		return 1;
	}
	return 0;
}

/* After the advice over [start, end): the kernel applies it to every VMA
 * there and reports a hole with ENOMEM; another error stops it at the
 * first VMA that refuses (refuses_advice), the VMAs below it changed.
 * Where the maps cannot be read, the records stay as they were. */
static void
follow_advice(uintptr_t start, uintptr_t end, int advice, int ret, int err)
{
	uint32_t set, clear;

	if (!fork_advice(advice, &set, &clear))
		return;
	if (ret < 0 && err != ENOMEM) {
		struct refusal rf = { start, end, start, set, clear, advice == MADV_WIPEONFORK };

		if (nsb_maps_each(start, end, true, refuses_advice, &rf) != 1)
			return;
		end = rf.at;
	}
	if (start < end)
		(void)nsb_ranges_set_flags(start, end, set, clear);
}

/*
 * MADV_REMOVE over a shared mapping with rescued pages: the kernel refuses
 * (EINVAL; EACCES for the zero file's private mapping) at the first
 * rescued page, private anonymous memory, where the
 * kernel flag's single VMA would take it.  Done piece by piece instead:
 * the file's pieces punched, the rescued ones dropped (MADV_DONTNEED:
 * zeros again, as the hole reads; they lie past the end of the file,
 * where there is nothing to punch).  Holes: ENOMEM at the end, as the
 * kernel's.  Table lock held, the span in flux.
 */
struct removal {
	const struct nsb_saved *recs;
	uintptr_t next, end;
	int err;
};

/* The record of recs holding addr that a rescue in a shared file mapping
 * made, or NULL. */
static const struct nsb_range *
shared_record(const struct nsb_saved *recs, uintptr_t addr)
{
	for (size_t i = 0; i < recs->n; i++) {
		const struct nsb_range *r = &recs->r[i];

		if (r->start <= addr && addr < r->end)
			return (r->meta & NSB_META_SHARED) && !(r->meta & NSB_META_ANON) ? r : NULL;
	}
	return NULL;
}

static int
remove_piece(const struct nsb_vma *vma, void *arg)
{
	struct removal *rm = arg;
	uintptr_t s = vma->start > rm->next ? vma->start : rm->next;
	uintptr_t e = vma->end < rm->end ? vma->end : rm->end;

	if (vma->start > rm->next)
		rm->err = ENOMEM;
	rm->next = vma->end;
	if (s >= e)
		return 0;
	if (!vma->anon || vma->shared) {
		if (nsb_sys_madvise((void *)s, e - s, MADV_REMOVE) == 0)
			return 0;
		rm->err = errno;
		return -1;
	}
	/* Anonymous memory (which may join rescues of several records):
	 * only what rescues made in shared mappings of a file is taken. */
	while (s < e) {
		const struct nsb_range *r = shared_record(rm->recs, s);
		uintptr_t pe = r && r->end < e ? r->end : e;

		if (!r) {
			rm->err = EINVAL;
			return -1;
		}
		if (nsb_sys_madvise((void *)s, pe - s, MADV_DONTNEED) != 0) {
			rm->err = errno;
			return -1;
		}
		s = pe;
	}
	return 0;
}

static int
remove_pieces(uintptr_t start, uintptr_t end, const struct nsb_saved *recs)
{
	struct removal rm = { .recs = recs, .next = start, .end = end };
	int ret = nsb_maps_each(start, end, false, remove_piece, &rm);

	if (ret == 0 && rm.next < end)
		rm.err = ENOMEM;
	if (ret != 0 && !rm.err)
		rm.err = EINVAL;	/* the maps could not be read: the kernel's answer */
	errno = rm.err;
	return rm.err ? -1 : 0;
}

static int
madvise_remove(void *addr, size_t len)
{
	uintptr_t start, end, wstart, wend;
	struct nsb_saved before;
	int ret = real_madvise(addr, len, MADV_REMOVE), err = errno;

	/* EINVAL at a rescue's anonymous memory, EACCES at a private
	 * mapping of the zero file (rescue.c). */
	if (ret == 0 || (err != EINVAL && err != EACCES) || !len || !page_aligned((uintptr_t)addr) ||
	    !span_of(addr, len, nsb_config.page_size, &start, &end) || nsb_ranges_nested() ||
	    nsb_ranges_replaced(start, end) == 0)
		return ret;
	if (lock_span(start, end, &wstart, &wend, &before, NULL) < 0) {
		errno = err;
		return ret;
	}
	nsb_ranges_flux(wstart, wend, 0, 0);
	ret = remove_pieces(start, end, &before);
	err = errno;
	unlock_span(&before, err);
	return ret;
}

NSB_EXPORT int
madvise(void *addr, size_t len, int advice)
{
	uintptr_t start, end, wstart, wend;
	struct nsb_saved before;
	uint32_t set, clear;
	int ret, err;

	if (advice == MADV_REMOVE && !nsb_ranges_none()) {
		nsb_enter();
		return madvise_remove(addr, len);
	}
	/* Only what a replaced page must be given again is recorded. */
	if (!fork_advice(advice, &set, &clear) || nsb_ranges_none())
		return real_madvise(addr, len, advice);
	nsb_enter();
	if (!len || !page_aligned((uintptr_t)addr) ||
	    !span_of(addr, len, nsb_config.page_size, &start, &end) ||
	    !nsb_ranges_overlap(start, end))
		return real_madvise(addr, len, advice);

	if (lock_span(start, end, &wstart, &wend, &before, NULL) < 0)
		return -1;
	/* No rescue in the span until the records say it: a page replaced
	 * meanwhile would miss the advice. */
	nsb_ranges_flux(wstart, wend, 0, 0);
	ret = real_madvise(addr, len, advice);
	err = errno;
	follow_advice(start, end, advice, ret, err);
	unlock_span(&before, err);
	return ret;
}

#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif

/* Does pidfd name this process?  Its fdinfo says which pid it names.
 * Read as every other file of /proc the library reads (nsb_proc_open: a
 * filter that traps openat to a broker gets a deliverable SIGSYS), not
 * through the C library's open, which the program may have interposed
 * itself; the pid is the cached one (no getpid). */
static bool
pidfd_is_self(int pidfd)
{
	char path[64], buf[512], *p;
	ssize_t len;
	long pid = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	fd = nsb_proc_open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	len = read(fd, buf, sizeof(buf) - 1);
	syscall(SYS_close, fd);
	if (len <= 0)
		return false;
	buf[len] = '\0';
	p = strstr(buf, "\nPid:");
	if (!p)
		return false;
	for (p += 5; *p == ' ' || *p == '\t'; p++)
		;
	while (*p >= '0' && *p <= '9')
		pid = pid * 10 + (*p++ - '0');
	return pid == (long)nsb_getpid();
}

/* The kernel takes only advices about memory use here (MADV_COLD,
 * MADV_PAGEOUT ...), none of which the records keep; a kernel that takes
 * the fork ones too is followed, for the own process's pidfd. */
static ssize_t
our_process_madvise(int pidfd, const struct iovec *iov, size_t n, int advice, unsigned flags)
{
	ssize_t (*f)(int, const void *, size_t, int, unsigned) = real_process_madvise;
	uint32_t set, clear;
	ssize_t ret;
	int err;

	/* Nested (ranges.c): the records' advice bits stay as they were;
	 * not a vfork child's leftovers (nsb_enter). */
	if (!fork_advice(advice, &set, &clear) || nsb_ranges_none())
		return f ? f(pidfd, iov, n, advice, flags)
			 : syscall(SYS_process_madvise, pidfd, iov, n, advice, flags);
	nsb_enter();
	if (nsb_ranges_nested())
		return f ? f(pidfd, iov, n, advice, flags)
			 : syscall(SYS_process_madvise, pidfd, iov, n, advice, flags);
	nsb_ranges_lock();
	ret = f ? f(pidfd, iov, n, advice, flags)
		: syscall(SYS_process_madvise, pidfd, iov, n, advice, flags);
	err = errno;
	if (ret > 0 && pidfd_is_self(pidfd)) {
		size_t left = (size_t)ret;

		/* It advises the vectors in order, and says how far it got. */
		for (size_t i = 0; i < n && left; i++) {
			size_t l = iov[i].iov_len < left ? iov[i].iov_len : left;
			uintptr_t s, e;

			left -= l;
			if (l && page_aligned((uintptr_t)iov[i].iov_base) &&
			    span_of(iov[i].iov_base, l, nsb_config.page_size, &s, &e))
				follow_advice(s, e, advice, 0, 0);
		}
	}
	nsb_ranges_unlock();
	errno = err;
	return ret;
}

/* glibc 2.36 and later (SPEC §12 "Names"). */
NSB_EXPORT_SINCE(2, 36, process_madvise, our_process_madvise);

/* ---- mremap ------------------------------------------------------------ */

/*
 * After rescues, a protected mapping is several VMAs to the kernel, and its
 * mremap fails with EFAULT.  To the program it is one mapping, as it would
 * be with the kernel patch, so we move it piece by piece - and put back
 * what moved if a later piece cannot, so that a failed call changes
 * nothing, as the kernel's own does.
 */
struct piece {
	uintptr_t from;		/* where it was */
	size_t len;		/* its length there */
	uintptr_t to;		/* where it is now (from, if not moved) */
	size_t now;		/* its length now */
};

struct pieces {
	struct nsb_saved vmas;	/* start/end of each VMA */
	uintptr_t next;		/* where the next piece must start */
	uintptr_t end;		/* where the mapping ends */
	size_t unit;
	int prot;		/* the first piece's */
	bool last_file;		/* the piece before is not a rescue's */
	bool hole;
	bool program;		/* a split the program made */
	bool smaps;		/* the walk reads smaps (VmFlags) */
	bool recheck;		/* two pieces of the file side by side: walk
				 * smaps to tell whose split it is */
	struct nsb_vma last;	/* the piece before, clipped, if of the file */
};

/*
 * Is the boundary at `at` between two records the kernel would have kept
 * as one VMA: one record across it, or two of the same mapping (gen), file,
 * attributes and offsets that follow on?  A program's mlock, madvise or
 * mbind of a part changes the part's meta, a MAP_FIXED over a part makes a
 * new mapping (gen).
 */
static bool
one_record_across(uintptr_t at)
{
	struct nsb_saved s;
	bool one;

	nsb_saved_init(&s);
	one = nsb_ranges_collect(at - 1, at + 1, &s) == 0 &&
	      (s.n == 1 ? s.r[0].start == at - 1 && s.r[0].end == at + 1
			: s.n == 2 && s.r[0].end == at && s.r[1].start == at &&
				  s.r[0].gen == s.r[1].gen && s.r[0].file == s.r[1].file &&
				  s.r[0].meta == s.r[1].meta && s.r[0].off + 1 == s.r[1].off);
	nsb_saved_free(&s);
	return one;
}

/* Two pieces of the file side by side that one VMA of the kernel flag
 * would be: a unit the library mapped from the file again (refresh.c),
 * from a descriptor of its own, which the kernel does not merge with the
 * program's mapping of the same file.  Needs smaps (VmFlags, key). */
static bool
refreshed_split(const struct nsb_vma *last, const struct nsb_vma *vma, uintptr_t at)
{
	return vma->start == at && last->end == at && vma->dev == last->dev &&
	       vma->ino == last->ino && vma->shared == last->shared &&
	       vma->off == last->off + (last->end - last->start) && vma->pkey == last->pkey &&
	       vma->flags_sig == last->flags_sig && vma->kept == last->kept &&
	       vma->dontfork == last->dontfork && vma->wipeonfork == last->wipeonfork &&
	       one_record_across(at);
}

/*
 * Only the library's own rescues and refreshes may have split the mapping:
 * a piece of anonymous memory is a rescue's if every unit of it is
 * replaced; two pieces of the file side by side are a refresh's if
 * nothing but the descriptor tells them apart (refreshed_split); any
 * other split, or pieces of different protections, is a split the
 * program made (mprotect, madvise, mlock, a MAP_FIXED over a part), which
 * the kernel's single VMA would have too: the kernel's EFAULT stands.
 */
static int
collect_piece(const struct nsb_vma *vma, void *arg)
{
	struct pieces *pc = arg;
	struct nsb_range r = { .start = vma->start, .end = vma->end };

	if (vma->start > pc->next) {
		pc->hole = true;
		return 1;
	}
	/* A rescued page merges with anonymous neighbours: clip. */
	if (r.start < pc->next)
		r.start = pc->next;
	if (r.end > pc->end)
		r.end = pc->end;
	if (pc->vmas.n == 0)
		pc->prot = vma->prot;
	if (!vma->anon && pc->last_file && !pc->smaps) {
		pc->recheck = true;
		return 1;
	}
	if (vma->prot != pc->prot ||
	    (vma->anon ? nsb_ranges_replaced(r.start, r.end) != (r.end - r.start) / pc->unit
		       : pc->last_file && !refreshed_split(&pc->last, vma, r.start))) {
		pc->program = true;
		return 1;
	}
	pc->last_file = !vma->anon;
	if (!vma->anon) {
		pc->last = *vma;
		pc->last.path = NULL;
		pc->last.off += r.start - vma->start;
		pc->last.start = r.start;
		pc->last.end = r.end;
	}
	pc->next = r.end;
	return nsb_saved_push(&pc->vmas, &r) < 0 ? -1 : 0;
}

/* Moves one piece; on failure, moves back the `done` ones before it.
 * With MREMAP_DONTUNMAP the source stays mapped, and a piece moved back
 * replaces what the kernel left there. */
static bool
move_piece(struct piece *pcs, size_t i, int flags, int *err)
{
	struct piece *p = &pcs[i];

	if (nsb_sys_mremap((void *)p->from, p->len, p->now,
			   MREMAP_MAYMOVE | MREMAP_FIXED | (flags & MREMAP_DONTUNMAP),
			   (void *)p->to) != MAP_FAILED)
		return true;
	*err = errno;
	while (i-- > 0) {
		struct piece *b = &pcs[i];

		/* Back where it was: the kernel made room there. */
		(void)nsb_sys_mremap((void *)b->to, b->now, b->len,
				     MREMAP_MAYMOVE | MREMAP_FIXED, (void *)b->from);
	}
	return false;
}

/* *planned: the source was the library's pieces, and their move was
 * tried (false: nothing done, the kernel's own call answers). */
static void *
remap_pieces(uintptr_t old, size_t old_len, size_t new_len, int flags, uintptr_t dest,
	     size_t unit, bool *planned)
{
	uintptr_t old_end = old + old_len, target;
	struct pieces pc = { .next = old, .end = old_end, .unit = unit };
	struct piece *pcs = NULL;
	size_t n, i;
	void *ret = MAP_FAILED;
	int err = EFAULT, walked;

	nsb_saved_init(&pc.vmas);
	walked = nsb_maps_each(old, old_end, false, collect_piece, &pc);
	if (walked != 0 && pc.recheck) {
		/* Again from smaps, which tells a refresh's split apart. */
		nsb_saved_free(&pc.vmas);
		nsb_saved_init(&pc.vmas);
		pc.next = old;
		pc.last_file = pc.hole = pc.program = pc.recheck = false;
		pc.smaps = true;
		walked = nsb_maps_each(old, old_end, true, collect_piece, &pc);
	}
	if (walked != 0 || pc.hole || pc.program || pc.next < old_end || pc.vmas.n == 0)
		goto out;
	n = pc.vmas.n;
	*planned = true;

	if (!(flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)) && new_len <= old_len) {
		if (new_len < old_len && nsb_sys_munmap((void *)(old + new_len), old_len - new_len) < 0) {
			err = errno;
			goto out;
		}
		ret = (void *)old;
		goto out;
	}
	if (!(flags & MREMAP_FIXED)) {
		/* Grow in place by growing the last piece (mremap() makes the
		 * part it adds the file again if that piece is a rescue's). */
		struct nsb_range *last = &pc.vmas.r[n - 1];
		size_t len = last->end - last->start;

		if (!(flags & MREMAP_DONTUNMAP) &&
		    nsb_sys_mremap((void *)last->start, len, len + new_len - old_len, 0, NULL) != MAP_FAILED) {
			ret = (void *)old;
			goto out;
		}
		if (!(flags & MREMAP_MAYMOVE)) {
			err = ENOMEM;
			goto out;
		}
		/* A reservation that the pieces will replace: taking the whole
		 * new size first means that the address space limit fails
		 * here, before anything has moved. */
		ret = nsb_sys_mmap(NULL, new_len, PROT_NONE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (ret == MAP_FAILED) {
			err = errno;
			goto out;
		}
		target = (uintptr_t)ret;
		ret = MAP_FAILED;
	} else {
		target = dest;
	}

	/* The plan, in the order that keeps every step reversible: the
	 * pieces that keep their length first, then the one (at most) that
	 * shrinks or grows. */
	pcs = nsb_scratch((n + 1) * sizeof(*pcs));
	if (!pcs) {
		err = ENOMEM;
		goto out_unreserve;
	}
	{
		struct piece resized = { 0 };
		size_t k = 0;

		for (i = 0; i < n; i++) {
			struct nsb_range *v = &pc.vmas.r[i];
			size_t off = v->start - old, len = v->end - v->start;
			struct piece p = { .from = v->start, .len = len, .to = target + off, .now = len };

			if (off >= new_len)
				continue;	/* unmapped once all have moved */
			if (off + len > new_len)
				p.now = new_len - off;
			if (i == n - 1 && new_len > old_len)
				p.now = len + new_len - old_len;
			if (p.now != p.len)
				resized = p;
			else
				pcs[k++] = p;
		}
		if (resized.len)
			pcs[k++] = resized;
		for (i = 0; i < k; i++)
			if (!move_piece(pcs, i, flags, &err))
				goto out_unreserve;
	}
	for (i = 0; i < n && !(flags & MREMAP_DONTUNMAP); i++) {
		struct nsb_range *v = &pc.vmas.r[i];

		if (v->start - old >= new_len)
			nsb_sys_munmap((void *)v->start, v->end - v->start);
	}
	ret = (void *)target;
	goto out;

out_unreserve:
	if (!(flags & MREMAP_FIXED))
		nsb_sys_munmap((void *)target, new_len);
out:
	nsb_saved_free(&pc.vmas);
	if (ret == MAP_FAILED)
		errno = err;
	return ret;
}

/*
 * Does this kernel move several VMAs in one mremap(MREMAP_FIXED) of
 * unchanged length?  Linux 6.17 and later do.  Before, the call fails with
 * EFAULT after it has unmapped the destination: a hole that another
 * thread's mmap may take before the library moves the pieces one by one
 * (remap_pieces), which would then land on that thread's mapping.  So
 * where the kernel cannot, a source the library split is moved in pieces
 * from the start.  Asked once, only when such a move comes, of pages of
 * the library's own (four calls the program's own mremap implies a filter
 * allows); whatever the answer, only what is still the library's is
 * unmapped after it.  Not used in signal context.
 */
static bool
kernel_moves_vmas(void)
{
	static _Atomic int known;	/* 0: not asked, 1: yes, 2: no */
	size_t ps = nsb_config.page_size;
	int k = atomic_load_explicit(&known, memory_order_relaxed);
	char *p;

	if (k)
		return k == 1;
	p = nsb_sys_mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return false;	/* not known: the safe way, not remembered */
	if (nsb_sys_mprotect(p + ps, ps, PROT_READ) < 0) {
		nsb_sys_munmap(p, 4 * ps);
		return false;
	}
	if (nsb_sys_mremap(p, 2 * ps, 2 * ps, MREMAP_MAYMOVE | MREMAP_FIXED, p + 2 * ps) != MAP_FAILED) {
		k = 1;
		nsb_sys_munmap(p + 2 * ps, 2 * ps);
	} else {
		/* EFAULT: the destination is gone already, perhaps taken. */
		k = errno == EFAULT ? 2 : 0;
		nsb_sys_munmap(p, 2 * ps);
	}
	if (k)
		atomic_store_explicit(&known, k, memory_order_relaxed);
	return k == 1;
}

/*
 * The VMAs of [lo, hi) as ranges, clipped to it, for mremap: the protection
 * and identity of each (anonymous, or which file and offset: dev and inode
 * are hashed into the file and gen fields, which only compare here).
 */
struct span_list {
	struct nsb_saved *list;
	uintptr_t lo, hi;
};

static int
collect_span(const struct nsb_vma *vma, void *arg)
{
	struct span_list *sl = arg;
	uint32_t h = vma->anon ? 0 : (uint32_t)((vma->dev * 0x9e3779b97f4a7c15u ^ vma->ino) >> 16) | 1;
	struct nsb_range r = {
		.start = vma->start > sl->lo ? vma->start : sl->lo,
		.end = vma->end < sl->hi ? vma->end : sl->hi,
		.meta = ((uint32_t)vma->prot & NSB_META_PROT) | (vma->shared ? NSB_META_SHARED : 0) |
			(vma->anon ? NSB_META_ANON : 0),
		.file = (uint16_t)h,
		.gen = (uint16_t)(h >> 16),
	};

	r.off = vma->anon ? 0 : vma->off + (r.start - vma->start);
	return nsb_saved_push(sl->list, &r) < 0 ? -1 : 0;
}

static int
collect_spans(uintptr_t lo, uintptr_t hi, struct nsb_saved *list)
{
	struct span_list sl = { list, lo, hi };

	return nsb_maps_each(lo, hi, false, collect_span, &sl);
}

/* Does list show over [lo, hi) the mapping that span v shows from v_lo? */
static bool
shows(const struct nsb_saved *list, uintptr_t lo, uintptr_t hi, const struct nsb_range *v,
      uintptr_t v_lo)
{
	uintptr_t at = lo;

	for (size_t i = 0; i < list->n && at < hi; i++) {
		const struct nsb_range *l = &list->r[i];

		if (l->end <= at)
			continue;
		if (l->start > at || l->meta != v->meta || l->file != v->file || l->gen != v->gen ||
		    (!(v->meta & NSB_META_ANON) &&
		     l->off + (at - l->start) != v->off + (v_lo + (at - lo) - v->start)))
			return false;
		at = l->end;
	}
	return at >= hi;
}

/* Appends to out the parts of a that no range of b covers. */
static void
subtract(const struct nsb_saved *a, const struct nsb_saved *b, struct nsb_saved *out)
{
	for (size_t i = 0; i < a->n; i++) {
		struct nsb_range piece = a->r[i];
		uintptr_t at = piece.start;

		while (at < a->r[i].end) {
			uintptr_t next = a->r[i].end;
			bool covered = false;

			for (size_t j = 0; j < b->n; j++) {
				if (b->r[j].start <= at && at < b->r[j].end) {
					covered = true;
					next = b->r[j].end < next ? b->r[j].end : next;
				} else if (b->r[j].start > at && b->r[j].start < next) {
					next = b->r[j].start;
				}
			}
			if (!covered) {
				piece = a->r[i];
				piece.off += at - piece.start;
				piece.start = at;
				piece.end = next;
				(void)nsb_saved_push(out, &piece);
			}
			at = next;
		}
	}
}

/* The records of `from` (clipped to the old span), moved to base. */
static void
moved_records(const struct nsb_saved *from, uintptr_t old, size_t keep, uintptr_t base,
	      struct nsb_saved *out)
{
	for (size_t i = 0; i < from->n; i++) {
		struct nsb_range r = from->r[i];
		uintptr_t s = r.start - old, e = r.end - old;

		if (s >= keep)
			continue;
		if (e > keep)
			e = keep;
		r.start = base + s;
		r.end = base + e;
		(void)nsb_saved_push(out, &r);
	}
}

/*
 * A move to dest that failed: kernels from 6.17 move several VMAs one by
 * one and stop at the first that fails, so a first few of the source's
 * VMAs (src, as they were) may have moved.  Without MREMAP_DONTUNMAP those
 * are the ones gone from the source; with it, those the destination shows
 * now and did not before (dst), and every one before the last such.  The
 * records there are the moved ones' records and what was recorded opposite
 * the rest, as far as the kernel still shows them.
 */
static void
resync_failed_move(uintptr_t old, uintptr_t old_end, uintptr_t dest, uintptr_t dest_end,
		   int flags, const struct nsb_saved *from, const struct nsb_saved *over,
		   const struct nsb_saved *src, const struct nsb_saved *dst)
{
	struct nsb_saved now, moved, stayed, gone, cands;

	nsb_saved_init(&now);
	nsb_saved_init(&moved);
	nsb_saved_init(&stayed);
	nsb_saved_init(&gone);
	nsb_saved_init(&cands);
	if (!(flags & MREMAP_DONTUNMAP)) {
		if (collect_spans(old, old_end, &now) == 0)
			subtract(src, &now, &moved);
	} else if (collect_spans(dest, dest_end, &now) == 0) {
		size_t last = 0;

		for (size_t i = 0; i < src->n; i++) {
			const struct nsb_range *v = &src->r[i];
			uintptr_t lo = dest + (v->start - old), hi = dest + (v->end - old);

			if (hi <= dest_end && shows(&now, lo, hi, v, v->start) &&
			    !shows(dst, lo, hi, v, v->start))
				last = i + 1;
		}
		for (size_t i = 0; i < last; i++)
			(void)nsb_saved_push(&moved, &src->r[i]);
	}
	/* The records of the moved VMAs, at the destination. */
	subtract(from, &moved, &stayed);
	subtract(from, &stayed, &gone);
	moved_records(&gone, old, dest_end - dest, dest, &cands);
	/* What was recorded there stays opposite what did not move. */
	nsb_saved_free(&stayed);	/* and empty again */
	moved_records(&moved, old, dest_end - dest, dest, &stayed);
	subtract(over, &stayed, &cands);
	resync(dest, dest_end, &cands, false, false);
	nsb_saved_free(&now);
	nsb_saved_free(&moved);
	nsb_saved_free(&stayed);
	nsb_saved_free(&gone);
	nsb_saved_free(&cands);
}

/*
 * After a failed MREMAP_DONTUNMAP: what moved is in both places, and its
 * records at the destination (resync_failed_move) name the source's
 * accounts.  They get copies, so that the two go on apart.  (Out of
 * memory: they keep sharing, and a unit replaced on one side is not
 * replaced on the other.)
 */
static void
separate_accounts(uintptr_t start, uintptr_t end)
{
	struct nsb_saved recs;

	nsb_saved_init(&recs);
	if (nsb_ranges_collect(start, end, &recs) == 0 && recs.n) {
		bool ok = true;

		for (size_t i = 0; ok && i < recs.n; i++) {
			struct nsb_range *r = &recs.r[i];

			r->acct = nsb_account_copy(r->acct, r->off, r->end - r->start);
			ok = r->acct != NULL;
		}
		if (ok) {
			nsb_ranges_cut(start, end);
			for (size_t i = 0; i < recs.n; i++)
				put_back(&recs.r[i]);
		}
	}
	nsb_saved_free(&recs);
}

NSB_EXPORT void *
mremap(void *old_addr, size_t old_len, size_t new_len, int flags, ...)
{
	uintptr_t old = (uintptr_t)old_addr, old_end, dest = 0, dest_end = 0, base;
	struct nsb_saved from, over, cands, src, dst, stay;
	bool moves_old, covers_dest = false, has_tail = false, planned;
	struct nsb_account *grown = NULL, *dup = NULL;
	struct nsb_range tail = { 0 };
	size_t unit, old_len_r, new_len_r, keep;
	void *new_addr = NULL, *p = MAP_FAILED;
	int err = 0, saved_errno = errno;

	/* The C library reads the fifth argument for both flags: with
	 * MREMAP_DONTUNMAP alone it is a hint (and must be page-aligned). */
	if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)) {
		va_list ap;

		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
		if (flags & MREMAP_FIXED)
			dest = (uintptr_t)new_addr;
	}
	nsb_enter();
	/* old_len == 0 duplicates a shared mapping from old on. */
	if (nsb_ranges_none() || !page_aligned(old) || !new_len ||
	    !span_of(old_addr, old_len ? old_len : 1, nsb_config.page_size, &old, &old_end) ||
	    ((flags & MREMAP_FIXED) &&
	     !span_of(new_addr, new_len, nsb_config.page_size, &dest, &dest_end)))
		return nsb_sys_mremap(old_addr, old_len, new_len, flags, new_addr);
	covers_dest = (flags & MREMAP_FIXED) && nsb_ranges_overlap(dest, dest_end);
	if (!nsb_ranges_overlap(old, old_end) && !covers_dest)
		return nsb_sys_mremap(old_addr, old_len, new_len, flags, new_addr);

	/* DONTUNMAP keeps the old range mapped; so does a duplicate.  In
	 * both cases its records stay. */
	moves_old = old_len && !(flags & MREMAP_DONTUNMAP);
	nsb_saved_init(&from);
	nsb_saved_init(&over);
	nsb_saved_init(&cands);
	nsb_saved_init(&src);
	nsb_saved_init(&dst);
	nsb_saved_init(&stay);
	nsb_ranges_lock();
	if (nsb_ranges_collect(old, old_end, &from) < 0)
		goto nomem;
	/* The kernel rounds lengths to the mapping's page size (a huge page
	 * on hugetlbfs), and so do the records. */
	unit = from.n ? unit_of(from.r[0].meta) : nsb_config.page_size;
	/* An unrecorded source moved over a protected hugetlbfs mapping: the
	 * kernel rounds by the source's huge page, unknown here, but a
	 * length it rounds otherwise cannot unmap part of the destination's
	 * huge pages (EINVAL): that unit then. */
	if (!from.n && covers_dest) {
		size_t n, dunit = nsb_ranges_unit(dest, dest_end, &n);

		if (dunit > unit)
			unit = dunit;
	}
	/* A duplicate maps new_len of the file from old on: its first unit
	 * is what is recorded at old, the rest grows from it. */
	old_len_r = old_len ? round_up(old_len, unit) : unit;
	new_len_r = round_up(new_len, unit);
	old_end = old + old_len_r;
	if (flags & MREMAP_FIXED)
		dest_end = dest + new_len_r;
	nsb_saved_free(&from);
	nsb_saved_init(&from);
	/* The destination's records over its rounded length, which may
	 * reach records that the asked length did not (covers_dest): a
	 * failed move puts them back from this list (resync_failed_move). */
	if (nsb_ranges_collect(old, old_end, &from) < 0 ||
	    ((flags & MREMAP_FIXED) && nsb_ranges_collect(dest, dest_end, &over) < 0))
		goto nomem;
	/* Where memory allows: the call is not refused for it. */
	if (nsb_ranges_reserve(2 * from.n + 6) < 0)
		errno = saved_errno;
	if (from.n && from.r[from.n - 1].end == old_end) {
		has_tail = true;
		tail = from.r[from.n - 1];
	}
	/* The accounts of what the kernel will map anew, made first: the
	 * part a growth adds, a duplicate, and the source MREMAP_DONTUNMAP
	 * leaves (what was replaced there stays anonymous memory, and its
	 * account goes on apart from the moved one's). */
	if (!old_len && from.n) {
		dup = nsb_account_new(from.r[0].off, new_len_r, unit);
		if (!dup)
			goto nomem;
	} else if (has_tail && new_len_r > old_len_r) {
		grown = nsb_account_new(tail.off + (tail.end - tail.start), new_len_r - old_len_r, unit);
		if (!grown)
			goto nomem;
	}
	nsb_account_copy_write(dup, from.n ? from.r[0].acct : NULL);
	nsb_account_copy_write(grown, has_tail ? tail.acct : NULL);
	for (size_t i = 0; old_len && (flags & MREMAP_DONTUNMAP) && i < from.n; i++) {
		struct nsb_range r = from.r[i];

		r.acct = nsb_account_copy(r.acct, r.off, r.end - r.start);
		if (!r.acct || nsb_saved_push(&stay, &r) < 0)
			goto nomem;
	}

	/* The source's VMAs: a move replaces the destination only opposite
	 * them (a kernel that moves several VMAs at once leaves what is
	 * opposite a hole in place), and one that fails part-way has moved
	 * some of them.  With MREMAP_DONTUNMAP the source stays, and only
	 * the destination, before and after, tells which moved. */
	if ((flags & MREMAP_FIXED) && old_len &&
	    (collect_spans(old, old_end, &src) != 0 ||
	     ((flags & MREMAP_DONTUNMAP) && collect_spans(dest, dest_end, &dst) != 0)))
		goto nomem;

	nsb_ranges_flux(old, old_len ? old_end : old, dest, dest_end);
	/* A source in several VMAs (rescues split it) that the kernel would
	 * refuse only after unmapping the destination moves in pieces
	 * first; one the library did not split is the kernel's to answer. */
	planned = false;
	if (src.n > 1 && has_tail && from.r[0].start == old && !kernel_moves_vmas()) {
		p = remap_pieces(old, old_len_r, new_len_r, flags, dest, unit, &planned);
		err = errno;
	}
	if (!planned) {
		p = nsb_sys_mremap(old_addr, old_len, new_len, flags, new_addr);
		err = errno;
		if (p == MAP_FAILED && err == EFAULT && old_len && from.n &&
		    from.r[0].start == old && has_tail) {
			p = remap_pieces(old, old_len_r, new_len_r, flags, dest, unit, &planned);
			err = errno;
		}
	}
	if (p == MAP_FAILED) {
		/* Put the records where the kernel shows the mappings: the
		 * source keeps what is still there; pieces that moved before
		 * the call failed (and only those) are looked for at the
		 * destination, beside what was recorded there. */
		resync(old, old_end, &from, false, false);
		if ((flags & MREMAP_FIXED) && old_len) {
			resync_failed_move(old, old_end, dest, dest_end, flags, &from, &over, &src, &dst);
			if (flags & MREMAP_DONTUNMAP)
				separate_accounts(dest, dest_end);
		}
		goto out;
	}

	/* Success: the records follow the mapping; a grown tail is protected
	 * too, its file offset following on. */
	base = (uintptr_t)p;
	keep = new_len_r < old_len_r ? new_len_r : old_len_r;
	if (moves_old)
		nsb_ranges_cut(old, old_end);
	else if (old_len && base == old && new_len_r < old_len_r)
		nsb_ranges_cut(old + new_len_r, old_end);
	if (src.n && base == dest) {
		size_t span = old_len_r < new_len_r ? old_len_r : new_len_r;

		for (size_t i = 0; i < src.n; i++) {
			uintptr_t s = src.r[i].start - old;
			uintptr_t e = src.r[i].end - old < span ? src.r[i].end - old : span;

			if (s < e)
				nsb_ranges_cut(dest + s, dest + e);
		}
		if (new_len_r > old_len_r)
			nsb_ranges_cut(dest + old_len_r, dest + new_len_r);
	} else {
		nsb_ranges_cut(base, base + new_len_r);
	}
	moved_records(&from, old, keep, base, &cands);
	for (size_t i = 0; i < cands.n; i++) {
		if (dup)
			cands.r[i].acct = dup;
		put_back(&cands.r[i]);
	}
	if (stay.n) {
		nsb_ranges_cut(old, old_end);
		for (size_t i = 0; i < stay.n; i++)
			put_back(&stay.r[i]);
	}
	if (has_tail && new_len_r > old_len_r) {
		/* The kernel grows a rescued last unit as anonymous memory. */
		bool anon = old_len && nsb_account_test(tail.acct, tail.off + (tail.end - tail.start) - unit);

		tail.off += tail.end - tail.start;
		tail.start = base + old_len_r;
		tail.end = base + new_len_r;
		tail.acct = dup ? dup : grown;
		if (anon)
			(void)nsb_account_claim_run(tail.acct, tail.off, (tail.end - tail.start) / unit);
		put_back(&tail);
		/* A last unit mapped from the zero file grew as that file,
		 * which may end inside the growth: anonymous memory there. */
		if (anon)
			nsb_rescue_regrown(&tail);
		/* With the kernel's own flag it would be the file. */
		if (anon)
			(void)nsb_refresh(tail.start, tail.end, true);
	}
	/* A pool resized after its file grew back (SPEC §5, Recovery); a
	 * move alone changes nothing the program sees. */
	if (old_len && new_len_r != old_len_r)
		(void)nsb_refresh(base, base + new_len_r, false);
	err = saved_errno;
	goto out;

nomem:
	p = MAP_FAILED;
	err = ENOMEM;
	nsb_ranges_unlock();
	goto done;
out:
	nsb_ranges_flux_end();
	nsb_ranges_unlock();
done:
	nsb_saved_free(&from);
	nsb_saved_free(&over);
	nsb_saved_free(&cands);
	nsb_saved_free(&src);
	nsb_saved_free(&dst);
	nsb_saved_free(&stay);
	errno = err;
	return p;
}
