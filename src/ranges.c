/* SPDX-License-Identifier: MIT */
/*
 * ranges.c - the table of protected mappings.
 *
 * Three kinds of readers:
 *  - SIGBUS handlers (nsb_ranges_enter): may not lock, allocate or wait,
 *    and must find a record in O(log n).  They register in one of two
 *    counters while they read and rescue, and writers wait for them to
 *    leave: a rescue is a few system calls in a handler that runs with
 *    every signal blocked, so the program cannot stop it (SPEC §5).
 *  - the interposed calls' quick check (nsb_ranges_overlap): optimistic,
 *    like a seqlock, registered nowhere (what it saw is trusted under
 *    the lock only while the version is the one it read: nsb_peek).  A writer never waits for them,
 *    which matters: the program may stop a thread inside any call, from a
 *    signal handler, and keep it stopped while another thread maps.
 *  - writers, serialised by the table lock (process.c: no handler of the
 *    program's runs in a holder).
 * The table is a "left-right" pair: two sorted arrays with the same
 * contents.  Handlers use the active copy; a writer changes the inactive
 * one, makes it active, waits until no handler can still be on the other
 * one, and applies the same change there (or copies the changed copy's
 * records there, where both are one small chunk: update(); or, for the
 * usual changes of one record, makes it at the same place: cut_exact(),
 * prot_exact(), insert_plain()).  Once a record is cut, no rescue can
 * still map a page over it.
 *
 * While a call changes a span (flux, see nsb.h), a fault there is neither
 * rescued nor passed on but retried, so that records never lag behind the
 * kernel in either direction: a live protected page is never unprotected,
 * even during a call that fails part-way, and a page is never rescued on
 * the strength of a record the call is about to remove.
 *
 * Each copy is sorted by descending start address (the kernel hands out
 * addresses top-down, so new records usually go at the end) and kept in
 * chunks of CHUNK records, with an array of the chunks in order (issue
 * 24: one sorted array cost a memmove of every record after the place of
 * a change, twice per call, 40 us a call with 10 000 records): a lookup is
 * two binary searches, a change moves at most CHUNK records and, when a
 * chunk fills or empties, the array of chunks (n / CHUNK pointers).  A
 * chunk that fills splits in two, or, at either end of the table, starts
 * a new one (records made in the kernel's order fill their chunks); one
 * that a change leaves small merges with its neighbour.  Storage comes
 * from the library's arena (memory.c), never malloc, and is never
 * unmapped while the process lives (an optimistic reader may still be
 * looking at it); a chunk a copy no longer uses goes back to that copy's
 * own spare list.  Where no chunk can be had (a tight RLIMIT_AS), a new
 * record takes a free slot of another chunk, the chunks between passing a
 * record each towards it; only where every slot is taken does a change
 * that splits a record lose protection instead of failing (SPEC §12: the
 * call it follows has been made; update_short()).
 *
 * Signal context: nsb_ranges_enter, nsb_ranges_leave, nsb_ranges_count,
 * nsb_ranges_version.  Everything else runs with the table lock held,
 * except nsb_ranges_overlap (and nsb_ranges_after_fork_child, in a child
 * whose parent held it).
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "nsb.h"

/*
 * A record as the table keeps it: 32 bytes, not the 40 of struct
 * nsb_range (the table is the library's one big memory cost, SPEC §9).
 * Lengths and file offsets are in pages; a longer record than 2^32 pages
 * is kept as several.  The pieces of one mapping name one account
 * (account.c), which finds their units by file offset: a split or a move
 * carries every bit exactly.
 */
struct slot {
	uintptr_t start;
	uint64_t off_file;	/* file offset in pages << 16 | file */
	uint32_t pages;
	uint32_t meta_gen;	/* meta (29 bits) | gen << 29 */
	struct nsb_account *acct;
};
#define META_BITS	29
#define META_MASK	((1u << META_BITS) - 1)
/* Every bit of a record's meta (nsb.h) is kept: NSB_META_FOREIGN, bit
 * 28, was dropped while the table kept 28 (a received FUSE file's own
 * userfaultfd faults were rescued).  gen keeps 3 bits (mman.c). */
_Static_assert(((NSB_META_PROT | NSB_META_SHARED | NSB_META_ANON | NSB_META_MEMFS |
		 NSB_META_RECEIVED | NSB_META_FOREIGN | NSB_META_POLICY | NSB_META_MKSHIFT(0x3f) |
		 NSB_META_PKEY_MASK | NSB_META_DONTFORK | NSB_META_WIPEONFORK | NSB_META_LOCKED |
		 NSB_META_ONFAULT | NSB_META_DONTDUMP | NSB_META_HUGEPAGE | NSB_META_NOHUGEPAGE |
		 NSB_META_MERGEABLE | NSB_META_MBIND) & ~META_MASK) == 0,
	       "a meta bit the table does not keep");
#define MAX_PAGES	UINT32_MAX

static inline uintptr_t
slot_end(const struct slot *s)
{
	return s->start + (uintptr_t)s->pages * nsb_config.page_size;
}

static inline void
unpack(const struct slot *s, struct nsb_range *r)
{
	r->start = s->start;
	r->end = slot_end(s);
	r->off = (s->off_file >> 16) * nsb_config.page_size;
	r->file = (uint16_t)(s->off_file & 0xffff);
	r->meta = s->meta_gen & META_MASK;
	r->gen = (uint16_t)(s->meta_gen >> META_BITS);
	r->acct = s->acct;
}

/* The page size's log2 (it is a power of two): a shift where a division
 * by it costs tens of cycles. */
static inline unsigned
page_shift(void)
{
	return (unsigned)__builtin_ctzll((unsigned long long)nsb_config.page_size);
}

/* r must fit one slot (nsb_ranges_insert splits it). */
static inline void
pack(const struct nsb_range *r, struct slot *s)
{
	unsigned sh = page_shift();

	s->start = r->start;
	s->pages = (uint32_t)((r->end - r->start) >> sh);
	s->off_file = (r->off >> sh) << 16 | r->file;
	s->meta_gen = (r->meta & META_MASK) | (uint32_t)r->gen << META_BITS;
	s->acct = r->acct;
}

static inline uint16_t
slot_file(const struct slot *s)
{
	return (uint16_t)(s->off_file & 0xffff);
}

/* Records per chunk: a chunk is a page of 4 KiB.  (How many a chunk
 * takes before it splits is `full`, smaller only for tests.) */
#define CHUNK	128
static uint8_t full = CHUNK;

struct run {
	struct slot *s;		/* CHUNK slots, the first n used */
	size_t n;
};

/* The array of chunks, with its length: a reader that reads the pointer
 * reads the bound that goes with it.  Entries never written are zero. */
struct runs {
	size_t cap;
	struct run r[];
};

struct table {
	struct runs *c;		/* chunks, descending by start, none empty */
	size_t nc;
	size_t n;		/* records */
	struct slot *spare;	/* chunks this copy does not use, linked
				 * through their first word */
	uint32_t nspare;
	uint32_t made;		/* chunks made in this copy's home */
	size_t roomy;		/* room() found room for this many more
				 * records, less those inserted since
				 * (0 once a chunk is made or freed) */
	uint32_t inserts;	/* insert_at() calls, ever (update()) */
	uint32_t reshapes;	/* chunks made or freed, ever (update()) */
};

/* Where a record is: chunk j, slot i; j == nc for "past the last". */
struct pos {
	size_t j, i;
};

struct nsb_lock nsb_table_lock = NSB_LOCK_INITIALIZER;

static struct table copies[2];
static atomic_int active;		/* the copy readers use */
static atomic_int reader_side;		/* the counter new readers use */
static atomic_long readers[2];
static atomic_size_t live_count;	/* records, for lock-free fast paths */
static atomic_size_t last_hit;		/* chunk << 8 | slot of the last record found */
static atomic_ulong version;		/* even: stable; odd: a writer is changing a copy */
static atomic_uintptr_t flux[4];	/* two spans [flux[0], flux[1]), [flux[2], flux[3]) */
static bool fail_next_alloc;
static bool no_alloc;		/* test hook: as if no memory could be had */

/* The record at p (which is not the end). */
static inline struct slot *
at(const struct table *t, struct pos p)
{
	return &t->c->r[p.j].s[p.i];
}

/*
 * [signal-safe] The first record whose start is <= addr (descending
 * order).  Also for an optimistic reader, in a copy that may be changing
 * under it: every index is bounded by what it read, and the answer is
 * thrown away if the copy changed (p.j is then at most the number of
 * chunks it saw, p.i below CHUNK).
 */
static struct pos
first_at_or_below(const struct table *t, uintptr_t addr)
{
	const struct runs *c = t->c;
	struct pos p = { 0, 0 };
	size_t nc, lo = 0, hi;
	const struct slot *s;

	if (!c)
		return p;
	nc = t->nc < c->cap ? t->nc : c->cap;
	/* The first chunk whose last (lowest) record starts at or below. */
	hi = nc;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2, n = c->r[mid].n;

		s = c->r[mid].s;
		if (n > CHUNK)
			n = CHUNK;
		if (s && n && s[n - 1].start <= addr)
			hi = mid;
		else
			lo = mid + 1;
	}
	p.j = lo;
	if (lo == nc || !(s = c->r[lo].s))
		return p;
	hi = c->r[lo].n > CHUNK ? CHUNK : c->r[lo].n;
	lo = 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s[mid].start <= addr)
			hi = mid;
		else
			lo = mid + 1;
	}
	p.i = lo < CHUNK ? lo : CHUNK - 1;
	return p;
}

/* first_at_or_below() for a writer, who holds the table lock: the copy
 * is not changing under it, and every chunk of it has records.  Inlined:
 * a writer's change searches three to five times. */
static inline __attribute__((always_inline)) struct pos
find_pos(const struct table *t, uintptr_t addr)
{
	size_t nc = t->nc, lo = 0, hi;
	struct pos p = { nc, 0 };
	const struct run *r;
	const struct slot *s;

	if (nc == 0)
		return p;
	r = t->c->r;
	if (nc == 1) {
		/* The usual table: one chunk. */
		if (r[0].s[r[0].n - 1].start > addr)
			return p;
	} else {
		/* The first chunk whose last (lowest) record starts at or
		 * below addr. */
		hi = nc;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;

			if (r[mid].s[r[mid].n - 1].start <= addr)
				hi = mid;
			else
				lo = mid + 1;
		}
		if (lo == nc)
			return p;
	}
	p.j = lo;
	s = r[lo].s;
	hi = r[lo].n;
	lo = 0;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s[mid].start <= addr)
			hi = mid;
		else
			lo = mid + 1;
	}
	p.i = lo;
	return p;
}

/* [signal-safe] The record at p in a copy a reader holds, or NULL where
 * there is none (the end, or what a torn read left). */
static inline const struct slot *
slot_if(const struct table *t, struct pos p)
{
	const struct runs *c = t->c;

	if (!c || p.j >= t->nc || p.j >= c->cap || p.i >= c->r[p.j].n || p.i >= CHUNK ||
	    !c->r[p.j].s)
		return NULL;
	return &c->r[p.j].s[p.i];
}

static inline bool
at_end(const struct table *t, struct pos p)
{
	return p.j >= t->nc;
}

/* The position after p (it may be the end). */
static inline struct pos
next_pos(const struct table *t, struct pos p)
{
	if (++p.i >= t->c->r[p.j].n) {
		p.j++;
		p.i = 0;
	}
	return p;
}

/* ---- nested calls ----------------------------------------------------- */

/*
 * Where the program's only handlers are for its own faults (process.c),
 * the table lock is held without the mask, and such a handler, sent by
 * another thread (kill, pthread_kill), may interrupt the holder and call
 * mmap, munmap, mprotect...  That call can neither wait for the lock its
 * own thread holds nor change a table the interrupted call is changing:
 * it goes straight to the kernel (nsb_ranges_nested), after noting its
 * span here.  The records there may no longer be the kernel's: no rescue
 * trusts them (nsb_ranges_enter) until the holder has made them the
 * kernel's again (settle(): those the kernel still shows stay, with the
 * protection it shows, the others go) before it lets go of the lock, or,
 * for a note made after that, the next holder as it takes it.  Asking
 * the kernel, not cutting every record there, keeps what the interrupted
 * call itself recorded meanwhile (a new mapping where the handler had
 * just unmapped one).  A mapping a nested call makes gets no protection.
 *
 * Only the holder's thread notes (its interrupted call cannot let go
 * meanwhile), but a handler may interrupt a note or a settling, so a slot
 * is claimed (BUSY: a rescue there faults again, for the few
 * instructions until the span is written), made READY before the call
 * goes to the kernel, and freed once its records are cut.  Where every
 * slot is taken, no record is trusted (notes_all) until the holder has
 * cut them all.
 */
#define NOTES 64
/* BUSY: being written, its span not known yet; SETTLING: its records
 * being made the kernel's (its span known: a rescue elsewhere need not
 * wait for that, and one on the settling thread must not). */
enum { NOTE_FREE, NOTE_BUSY, NOTE_READY, NOTE_SETTLING };
struct note {
	atomic_int state;
	atomic_uintptr_t start, end;
};
/* From the library's arena when its handler is installed (before which
 * no lock is held without the mask, and no call can be nested): not in
 * the library's own data, whose every page the loader maps in every
 * process (the startup test counts the calls). */
static struct note *notes;
static atomic_int notes_used;	/* slots not free */
static atomic_bool notes_all;
/* log2 of the largest page size a record has had (0: none larger than
 * the system's): a nested call's span is noted in whole units of it, as
 * the kernel rounds a hugetlbfs mremap's or MAP_FIXED's length to whole
 * huge pages, past the span asked (whose records the handler could not
 * look up: the interrupted call may be changing them). */
static atomic_uint big_shift;

/* [signal-safe] A note is there to trust no record by, or to settle. */
static inline bool
notes_pending(void)
{
	return atomic_load(&notes_used) > 0 || atomic_load(&notes_all);
}


/* [signal-safe] Before a nested call goes to the kernel over [start, end)
 * (page-aligned, any length). */
void
nsb_ranges_note(uintptr_t start, uintptr_t end)
{
	unsigned shift = atomic_load_explicit(&big_shift, memory_order_relaxed);

	if (end <= start)
		return;
	if (shift) {
		uintptr_t unit = (uintptr_t)1 << shift;

		start &= ~(unit - 1);
		end = end > UINTPTR_MAX - unit ? UINTPTR_MAX & ~(unit - 1) : (end + unit - 1) & ~(unit - 1);
	}
	if (!notes) {
		atomic_store(&notes_all, true);
		return;
	}
	atomic_fetch_add(&notes_used, 1);
	for (int i = 0; i < NOTES; i++) {
		int free_ = NOTE_FREE;

		if (!atomic_compare_exchange_strong(&notes[i].state, &free_, NOTE_BUSY))
			continue;
		atomic_store(&notes[i].start, start);
		atomic_store(&notes[i].end, end);
		atomic_store(&notes[i].state, NOTE_READY);
		return;
	}
	atomic_store(&notes_all, true);
	atomic_fetch_sub(&notes_used, 1);
}

/* [signal-safe] Does addr meet a noted span?  NONE: no; FOUND: yes;
 * BUSY: a slot is being written. */
static enum nsb_lookup
noted(uintptr_t addr)
{
	enum nsb_lookup res = NSB_LOOKUP_NONE;

	if (atomic_load(&notes_all))
		return NSB_LOOKUP_FOUND;
	for (int i = 0; notes && i < NOTES; i++) {
		int st = atomic_load(&notes[i].state);

		if (st == NOTE_BUSY)
			res = NSB_LOOKUP_BUSY;
		else if ((st == NOTE_READY || st == NOTE_SETTLING) &&
			 addr >= atomic_load(&notes[i].start) && addr < atomic_load(&notes[i].end))
			return NSB_LOOKUP_FOUND;
	}
	return res;
}

/* Table lock held: makes the records of every noted span the kernel's
 * again (nsb_resync_noted: mman.c).  A handler may interrupt it and note
 * more: those are either settled here or left for the next holder. */
static void
settle(void)
{
	int err = errno;

	if (atomic_load(&notes_all)) {
		atomic_store(&notes_all, false);
		nsb_resync_noted(0, UINTPTR_MAX & ~(uintptr_t)(nsb_config.page_size - 1));
	}
	for (int i = 0; notes && i < NOTES && atomic_load(&notes_used) > 0; i++) {
		int ready = NOTE_READY;

		if (!atomic_compare_exchange_strong(&notes[i].state, &ready, NOTE_SETTLING))
			continue;
		nsb_resync_noted(atomic_load(&notes[i].start), atomic_load(&notes[i].end));
		atomic_store(&notes[i].state, NOTE_FREE);
		atomic_fetch_sub(&notes_used, 1);
	}
	errno = err;
}

/* The notes' slots: 0, or -1 (ENOMEM).  Under the dispositions lock. */
int
nsb_ranges_prepare(void)
{
	if (!notes)
		notes = nsb_memory(NOTES * sizeof(*notes));
	return notes ? 0 : -1;
}

/* The slots a change moves within a chunk: by hand where they are the
 * few of a small table (a call of memmove costs more than moving two),
 * unrolled so that no compiler makes the copy a call again. */
static inline void
slots_up(struct slot *s, size_t n)	/* s[1..n] = s[0..n-1] */
{
	switch (n) {
	case 3:
		s[3] = s[2];
		__attribute__((fallthrough));
	case 2:
		s[2] = s[1];
		__attribute__((fallthrough));
	case 1:
		s[1] = s[0];
		__attribute__((fallthrough));
	case 0:
		return;
	default:
		memmove(s + 1, s, n * sizeof(*s));
	}
}

static inline void
slots_down(struct slot *s, size_t n)	/* s[0..n-1] = s[1..n] */
{
	switch (n) {
	case 3:
		s[0] = s[1];
		s[1] = s[2];
		s[2] = s[3];
		return;
	case 2:
		s[0] = s[1];
		s[1] = s[2];
		return;
	case 1:
		s[0] = s[1];
		__attribute__((fallthrough));
	case 0:
		return;
	default:
		memmove(s, s + 1, n * sizeof(*s));
	}
}

/* Record s into chunk r of copy t at slot i (the chunk has room).  One
 * record into a chunk with room: spares_needed() of one less is at most
 * what it was (that chunk's free slots fell by one, as the count did;
 * nothing else changed), so the room found holds for one less.  A chunk
 * made on the way set it to 0 (run_insert). */
static inline void
put_slot(struct table *t, struct run *r, size_t i, const struct slot *s)
{
	if (r->n > i)
		slots_up(&r->s[i], r->n - i);
	r->s[i] = *s;
	r->n++;
	t->n++;
	t->inserts++;
	if (t->roomy)
		t->roomy--;
}

/* ---- reader side ------------------------------------------------------- */

/* The tickets this thread holds, by side: a vfork child runs on its
 * parent's TLS, and one that dies in a rescue leaves its ticket counted
 * here, for the parent to give back (nsb_ranges_vfork_readers).  A
 * handler that interrupts the increment has given its own back before
 * it returns. */
__thread uint8_t nsb_my_readers[2] __attribute__((tls_model("initial-exec")));

/*
 * A vfork child's tickets (nsb_vfork_tid set where the child is marked,
 * nsb_vforking where it is exact mode's plain vfork, process.c: its
 * parent waits in vfork's assembly) are not counted that way: between the shared count
 * and the TLS one, two instructions apart, a child killed there left the
 * parent taking away a ticket never counted, or giving one back twice
 * (readers[side] at -1: its next change of the table waited for good,
 * core-atk2-vforkticket, core-atk2-vforkticket-exact).  Such a ticket is one slot of its side holding
 * the thread's key (the address of its nsb_my_readers, the parent's and
 * the child's alike), taken and let go by one instruction each (the
 * library's slots, nsb.h): whatever instruction the child dies at, the
 * parent finds exactly what it left.  A writer waits for the slots as
 * for the count.  Ticket numbers: side, plus 2 * (slot + 1) for a
 * slot's.  Either kind counts in nsb_holds (nsb.h) while held.
 */
#define VFORK_TICKETS NSB_TICKET_SLOTS
extern __thread pid_t nsb_vfork_tid __attribute__((tls_model("initial-exec"), visibility("hidden")));
extern __thread uint8_t nsb_vforking __attribute__((tls_model("initial-exec"), visibility("hidden")));
#define vfork_tickets(side) (nsb_slot_words + NSB_SLOTS_TICKETS + (side) * VFORK_TICKETS)

/*
 * Has any vfork child ever taken a ticket (in this process, or in the
 * parent it was forked from)?  Set once, never cleared: a writer that
 * reads false knows every ticket slot is empty without reading them
 * (vfork_tickets_held), about 80 instructions a memfd pair (two drains,
 * two sides, NSB_TICKET_SLOTS words each).  A vfork child shares this
 * memory with its parent, so the parent's writers see its store.
 */
static atomic_bool vfork_tickets_ever;

/* [signal-safe] */
static int
reader_enter(void)
{
	int side = atomic_load(&reader_side);

	if (__builtin_expect(nsb_vfork_tid != 0 || nsb_vforking, 0)) {
		int i;

		/* Before the claim, sequentially consistent (vfork_tickets_held). */
		atomic_store(&vfork_tickets_ever, true);
		i = nsb_slots_claim(vfork_tickets(side), VFORK_TICKETS,
					(uintptr_t)nsb_my_readers, 0);

		if (i >= 0)
			return side + 2 * (i + 1);
	}
	nsb_holds_up();
	nsb_my_readers[side]++;
	atomic_fetch_add(&readers[side], 1);
	return side;
}

/* [signal-safe] */
void
nsb_ranges_leave(int ticket)
{
	if (__builtin_expect(ticket >= 2, 0)) {
		nsb_slot_free(vfork_tickets(ticket & 1), ticket / 2 - 1);
		return;
	}
	atomic_fetch_sub(&readers[ticket], 1);
	nsb_my_readers[ticket]--;
	nsb_holds_down();
}

/*
 * Does a vfork child's slot on this side hold a ticket?  The flag first:
 * reader_enter() stores it (seq_cst) before its claim (a seq_cst
 * compare-exchange), so in the single order of sequentially consistent
 * operations every claim comes after the flag's store.  A false read
 * here therefore comes before every claim: the slots read at this point
 * would all have read 0 (a slot changes only by a claim, or by the
 * release of one), the answer the full look gives.  A claim after the
 * read is the race the look had already (the drain's side switch
 * handles it, as for the count).  A child killed between the store and
 * its claim, or a fork child of a parent that set it, only leaves the
 * flag set: the full look, as before.  A handler that interrupts the
 * writer reads nothing here and writes only before a claim.
 */
static inline bool
vfork_tickets_held(int side)
{
	return __builtin_expect(atomic_load(&vfork_tickets_ever), 0) &&
	       nsb_slots_any(vfork_tickets(side), VFORK_TICKETS);
}

/* The slots this thread's (dead) vfork child left: any? */
bool
nsb_ranges_vfork_tickets(void)
{
	for (int k = 0; k < 2; k++)
		if (nsb_slots_count(vfork_tickets(k), VFORK_TICKETS, (uintptr_t)nsb_my_readers))
			return true;
	return false;
}

/* [signal-safe] */
static bool
in_flux(uintptr_t addr)
{
	for (int i = 0; i < 4; i += 2) {
		uintptr_t s = atomic_load(&flux[i]), e = atomic_load(&flux[i + 1]);

		if (addr >= s && addr < e)
			return true;
	}
	return false;
}

/* [signal-safe] */
enum nsb_lookup
nsb_ranges_enter(uintptr_t addr, struct nsb_range *out, int *ticket)
{
	const struct table *t;
	const struct slot *r;
	struct pos p;
	size_t i;
	int side;

	side = reader_enter();	/* (a ticket: side, or a vfork child's slot) */
	/* After registering: a writer that set the flux before we did
	 * waits for us; one that sets it later finds us gone or sees us.
	 * (Before the count: a call may have cut every record for now.) */
	if (in_flux(addr)) {
		nsb_ranges_leave(side);
		/* A call of this thread's own that a handler interrupted
		 * changes the span: waiting would be waiting for ourselves. */
		return nsb_ranges_nested() ? NSB_LOOKUP_NONE : NSB_LOOKUP_BUSY;
	}
	if (atomic_load(&live_count) == 0) {
		nsb_ranges_leave(side);
		return NSB_LOOKUP_NONE;
	}
	if (__builtin_expect(notes_pending(), 0)) {
		enum nsb_lookup n = noted(addr);

		if (n != NSB_LOOKUP_NONE) {
			nsb_ranges_leave(side);
			/* BUSY on this thread's own note (a handler nested
			 * in the noting): waiting would be for ourselves. */
			return n == NSB_LOOKUP_FOUND || nsb_ranges_nested() ? NSB_LOOKUP_NONE
									 : NSB_LOOKUP_BUSY;
		}
	}
	t = &copies[atomic_load(&active)];
	/* Faults come in runs over one mapping: try the last hit first.
	 * The hint may be stale or from the other copy; it is only a guess,
	 * checked against the copy we hold. */
	i = atomic_load_explicit(&last_hit, memory_order_relaxed);
	p.j = i >> 8;
	p.i = i & 0xff;
	r = slot_if(t, p);
	if (!r || addr < r->start || addr >= slot_end(r)) {
		p = first_at_or_below(t, addr);
		r = slot_if(t, p);
		if (!r || addr >= slot_end(r)) {
			nsb_ranges_leave(side);
			return NSB_LOOKUP_NONE;
		}
		atomic_store_explicit(&last_hit, p.j << 8 | p.i, memory_order_relaxed);
	}
	unpack(r, out);
	*ticket = side;
	return NSB_LOOKUP_FOUND;
}

static bool overlap_locked(uintptr_t start, uintptr_t end);

/*
 * Nothing recorded, and no call changing records: the interposed calls'
 * first check, which sends them straight to the kernel.  A call that cuts
 * records to put them back may leave none for a moment (its span is in
 * flux meanwhile), so a count of 0 is trusted only with no flux, both
 * read between two equal reads of the version (the count changes only
 * inside a change of the table; the flux is set before such a call's cut
 * and cleared after its inserts).  A change under way all along with no
 * flux is not such a call's (a new mapping's record, a stale one cut):
 * no reason to wait for it.
 */
static inline __attribute__((always_inline)) bool
empty(void)
{
	unsigned long v = atomic_load(&version);
	bool none;

	if (atomic_load(&live_count) != 0)
		return false;
	none = atomic_load(&flux[1]) == 0 && atomic_load(&flux[3]) == 0;
	return none && atomic_load(&version) == v;
}

bool
nsb_ranges_empty(void)
{
	return empty();
}

/*
 * The same, but never to a nested call (its thread holds the table lock):
 * the call it interrupted may be about to record a mapping that the nested
 * one unmaps or changes, whose span must be noted
 * (nsb_ranges_overlap_peek) for the settle to put right; without the
 * note, the record of a mapping that was gone stayed.  (A new mapping
 * where the kernel finds room meets nothing the interrupted call maps:
 * mmap's checks ask nsb_ranges_empty().)
 */
bool
nsb_ranges_none(void)
{
	if (!empty())
		return false;
	/* Held by anyone (one load; whose, only then): a thread sees its
	 * own store to the word. */
	return __builtin_expect(atomic_load_explicit(&nsb_table_lock.word, memory_order_relaxed) ==
					0, 1) ||
	       !nsb_ranges_nested();
}

/* Does [start, end) meet a span in flux? */
static bool
flux_meets(uintptr_t start, uintptr_t end)
{
	for (int i = 0; i < 4; i += 2) {
		uintptr_t s = atomic_load(&flux[i]), e = atomic_load(&flux[i + 1]);

		if (start < e && s < end)
			return true;
	}
	return false;
}

/*
 * Optimistic: reads the active copy with no registration, and trusts the
 * answer only if no writer changed a copy meanwhile.  Memory is never
 * unmapped, so a torn read is only a wrong answer, and it is thrown away.
 * After a few tries (a writer is busy), it asks under the lock, whose
 * holder the program cannot stop.
 *
 * Between two changes the table is whole, but not always final: a call
 * that puts records back (resync after a failed call, MAP_FIXED over a
 * record) cuts them in one change and inserts them in the next ones, with
 * its span in flux from before the cut until after the inserts.  "None"
 * read there is no answer: a MAP_FIXED that believed it went past the
 * records (no flux: a fault in the mapping it replaced found no record,
 * or the old one, between its system call and its records) or straight
 * to the kernel (its mapping then kept the records put back).  So a miss
 * that meets a span in flux asks under the lock, which waits for the
 * call.  The flux is read between the two reads of the version: if they
 * agree, the span cut before the first is still in flux at the second.
 */
/* The search of a table of one chunk s of n records (the usual table)
 * for [start, end), each index bound by what was read
 * (first_at_or_below()); where nsb_ranges_one() would find that one
 * record, its place in pk with the version v it was seen at.  Trusted
 * only if the version is still v. */
static inline __attribute__((always_inline)) bool
peek_chunk(const struct slot *s, size_t n, uintptr_t start, uintptr_t end,
	   struct nsb_peek *pk, unsigned long v)
{
	size_t lo = 0, hi = n;
	bool hit;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s[mid].start <= end - 1)
			hi = mid;
		else
			lo = mid + 1;
	}
	hit = lo < n && slot_end(&s[lo]) > start;
	/* Would nsb_ranges_one() find that record?  Its place, trusted
	 * only if the version is still v. */
	if (hit && pk && s[lo].start >= start && slot_end(&s[lo]) <= end &&
	    ((size_t)1 << NSB_META_SHIFT(s[lo].meta_gen & META_MASK)) == nsb_config.page_size &&
	    (lo + 1 >= n || slot_end(&s[lo + 1]) <= start)) {
		pk->j = 0;
		pk->i = lo;
		pk->v = v;
	}
	return hit;
}

/* nsb_ranges_overlap_peek() past its first try, or after it: the tries
 * and the answer under the lock. */
static __attribute__((noinline)) bool
peek_tries(uintptr_t start, uintptr_t end, struct nsb_peek *pk)
{
	bool hit;

	for (int tries = 0; tries < 8; tries++) {
		unsigned long v = atomic_load(&version);
		const struct table *t;
		const struct runs *c;
		const struct slot *r, *s;
		struct pos p;

		if (pk)
			pk->v = 1;
		if (v & 1) {
			sched_yield();
			continue;
		}
		t = &copies[atomic_load(&active)];
		/* A torn read stays inside memory that is never unmapped. */
		c = t->c;
		if (t->nc == 1 && c && (s = c->r[0].s) != NULL) {
			hit = peek_chunk(s, c->r[0].n < CHUNK ? c->r[0].n : CHUNK, start, end, pk, v);
		} else {
			p = first_at_or_below(t, end - 1);
			r = slot_if(t, p);
			hit = r && slot_end(r) > start;
		}
		if (!hit && flux_meets(start, end))
			break;
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load(&version) == v)
			return hit;
	}
	if (pk)
		pk->v = 1;
	nsb_ranges_lock();
	hit = overlap_locked(start, end);
	nsb_ranges_unlock();
	return hit;
}

bool
nsb_ranges_overlap_peek(uintptr_t start, uintptr_t end, struct nsb_peek *pk)
{
	unsigned long v;
	const struct table *t;
	const struct runs *c;
	const struct slot *s;
	bool hit;

	if (pk)
		pk->v = 1;	/* odd: nothing seen */
	if (end <= start)
		return false;
	/* A nested call: it goes straight to the kernel on "no", every
	 * caller's answer to it, and the records there are not trusted. */
	if (__builtin_expect(nsb_ranges_nested(), 0)) {
		nsb_ranges_note(start, end);
		return false;
	}
	/* The first try, inline where the table is the usual one chunk and
	 * the answer holds at once (issue 40): no stack frame.  Anything
	 * else (a writer busy, a span in flux, more chunks) is
	 * peek_tries()'s, which tries again from the start. */
	v = atomic_load(&version);
	if (!(v & 1)) {
		t = &copies[atomic_load(&active)];
		/* A torn read stays inside memory that is never unmapped. */
		c = t->c;
		if (t->nc == 1 && c && (s = c->r[0].s) != NULL) {
			hit = peek_chunk(s, c->r[0].n < CHUNK ? c->r[0].n : CHUNK, start, end, pk, v);
			if (hit || (atomic_load(&flux[1]) == 0 && atomic_load(&flux[3]) == 0)) {
				atomic_thread_fence(memory_order_acquire);
				if (atomic_load(&version) == v)
					return hit;
			}
		}
	}
	return peek_tries(start, end, pk);
}

bool
nsb_ranges_overlap(uintptr_t start, uintptr_t end)
{
	return nsb_ranges_overlap_peek(start, end, NULL);
}

/* [signal-safe] */
size_t
nsb_ranges_count(void)
{
	return atomic_load(&live_count);
}

/* [signal-safe] */
unsigned long
nsb_ranges_version(void)
{
	return atomic_load(&version) >> 1;
}

size_t
nsb_ranges_bytes(void)
{
	size_t b = 0;

	for (int k = 0; k < 2; k++)
		b += (copies[k].nc + copies[k].nspare) * CHUNK * sizeof(struct slot) +
		     (copies[k].c ? copies[k].c->cap * sizeof(struct run) : 0);
	return b;
}

/* ---- writer side ------------------------------------------------------- */

static __attribute__((noinline)) void
wait_for_readers(int side)
{
	while (atomic_load(&readers[side]) != 0 || vfork_tickets_held(side))
		sched_yield();
}

/* Returns once every handler that registered before the call has left.
 * Inlined, the wait apart: a writer drains once or twice a call, and
 * almost never finds a handler to wait for. */
static inline void
drain_readers(void)
{
	int side = atomic_load(&reader_side);

	if (atomic_load(&readers[1 - side]) != 0 || vfork_tickets_held(1 - side))
		wait_for_readers(1 - side);
	atomic_store(&reader_side, 1 - side);
	if (atomic_load(&readers[side]) != 0 || vfork_tickets_held(side))
		wait_for_readers(side);
}

/* Makes the inactive copy active; on return nobody reads the other one. */
static inline void
switch_copies(void)
{
	atomic_store(&active, 1 - atomic_load(&active));
	drain_readers();
}

void
nsb_ranges_flux(uintptr_t s1, uintptr_t e1, uintptr_t s2, uintptr_t e2)
{
	/* Ends last, and cleared first: a handler that interrupts this
	 * thread here (a nested call's rescue, which cannot wait for it)
	 * never sees a span that is neither the old nor the new one. */
	atomic_store(&flux[1], 0);
	atomic_store(&flux[3], 0);
	atomic_store(&flux[0], s1);
	atomic_store(&flux[2], s2);
	atomic_store(&flux[1], e1);
	atomic_store(&flux[3], e2);
	drain_readers();
}

/*
 * Does the first span in flux hold [start, end)?  Then, the table lock
 * held, no handler reads a record there, and a record's meta (not its
 * place or bounds) may change in both copies at once, the active one
 * too: every handler that registered before nsb_ranges_flux() set the
 * span has left (it drained them), and every later one finds its address
 * in flux (in_flux, after registering) and leaves before reading the
 * table, unless its address lies outside the span: then its search reads
 * other records' bounds, and the record's own only to find the address
 * is not in it (the bounds do not change).  Optimistic readers see the
 * version odd or changed.  Only the writer stores the flux: its own
 * stores, read back relaxed.
 */
static inline bool
flux_covers(uintptr_t start, uintptr_t end)
{
	uintptr_t e = atomic_load_explicit(&flux[1], memory_order_relaxed);

	return e != 0 && end <= e && start >= atomic_load_explicit(&flux[0], memory_order_relaxed);
}

void
nsb_ranges_flux_end(void)
{
	/* Ends first (above).  Four stores, not a loop (which the compiler
	 * left a loop: ~14 instructions a call more). */
	atomic_store(&flux[1], 0);
	atomic_store(&flux[3], 0);
	atomic_store(&flux[0], 0);
	atomic_store(&flux[2], 0);
}

/* ---- chunks ----------------------------------------------------------- */

#define CHUNK_BYTES (CHUNK * sizeof(struct slot))

/* Chunks made at once where the copy's home cannot grow: 64 KiB, not a
 * page at a time (memory of its own lands wherever the kernel puts it,
 * and a page would fit any hole the program leaves). */
#define CHUNK_BATCH 16

/* A new chunk for copy t: the next of its home in the library's arena
 * (memory.c), else one of a batch of memory of its own (the rest go to
 * the spare list).  NULL: ENOMEM. */
static struct slot *
chunk_make(struct table *t)
{
	char *home = nsb_memory_table(t == &copies[0] ? 0 : 1, (t->made + 1) * CHUNK_BYTES);

	if (home)
		return (struct slot *)(home + t->made++ * CHUNK_BYTES);
	home = nsb_memory(CHUNK_BATCH * CHUNK_BYTES);
	if (!home)
		return NULL;
	for (int i = 1; i < CHUNK_BATCH; i++) {
		*(struct slot **)(home + i * CHUNK_BYTES) = t->spare;
		t->spare = (struct slot *)(home + i * CHUNK_BYTES);
		t->nspare++;
	}
	return (struct slot *)home;
}

static void chunk_free(struct table *t, struct slot *c);

/* A spare chunk of copy t (room() made sure there is one; should its
 * count ever fall short, one is made here). */
static struct slot *
chunk_new(struct table *t)
{
	struct slot *c;

	if (!t->spare && (c = chunk_make(t)))
		chunk_free(t, c);
	c = t->spare;
	t->spare = *(struct slot **)c;
	t->nspare--;
	return c;
}

/* A chunk no record of copy t is in any more (no handler reads this copy
 * now; an optimistic reader throws what it read away). */
static void
chunk_free(struct table *t, struct slot *c)
{
	*(struct slot **)c = t->spare;
	t->spare = c;
	t->nspare++;
}

/*
 * The spare chunks copy t needs for `extra` more records.  A record takes
 * a new chunk only where it goes into a full one (split, or a new one at
 * an end): a chunk with f free slots takes f records first, and each half
 * of a split one full / 2 more.  So none where every chunk has room for
 * all of them - the usual case: a call asks for a few, and a table of a
 * few records has one chunk, mostly free.  (Asking for one a record, as
 * before, made a shrinking mremap of five records want 16 new chunks of
 * each copy, and fail with ENOMEM under a tight RLIMIT_AS although the
 * kernel's call would have succeeded, SPEC §12.)
 */
static size_t
spares_needed(const struct table *t, size_t extra)
{
	size_t half = full / 2, need = 0;

	if (t->nc == 0)
		need = 1 + (extra > full ? (extra - full + half - 1) / half : 0);
	for (size_t j = 0; j < t->nc && need < extra; j++) {
		size_t n = t->c->r[j].n, f = n < full ? full - n : 0;

		if (extra > f)
			need += (extra - f + half - 1) / half;
	}
	return need < extra ? need : extra;
}

/* Room in copy t for `extra` more records: the spare chunks they may
 * need, and as many more entries in the array of chunks.  The array
 * moves to a bigger one, published with its length: readers of the old
 * one still find the same records. */
static int
room(struct table *t, size_t extra)
{
	size_t cap = t->c ? t->c->cap : 0, asked = extra;

	if (extra <= t->roomy)
		return 0;
	if (t->nspare < extra || cap < t->nc + extra)
		extra = spares_needed(t, extra);
	if (t->nspare < extra || cap < t->nc + extra) {
		if (fail_next_alloc || no_alloc) {
			fail_next_alloc = false;
			errno = ENOMEM;
			return -1;
		}
	}
	while (t->nspare < extra) {
		struct slot *c = chunk_make(t);

		if (!c) {
			errno = ENOMEM;
			return -1;
		}
		chunk_free(t, c);
	}
	if (cap < t->nc + extra) {
		struct runs *r;

		cap = cap ? cap * 2 : 64;
		while (cap < t->nc + extra)
			cap *= 2;
		r = nsb_memory(sizeof(*r) + cap * sizeof(r->r[0]));
		if (!r) {
			errno = ENOMEM;
			return -1;
		}
		r->cap = cap;
		if (t->c)
			memcpy(r->r, t->c->r, t->nc * sizeof(r->r[0]));
		atomic_thread_fence(memory_order_release);
		t->c = r;
	}
	t->roomy = asked;
	/* As many more as every chunk has free slots need no spare chunk
	 * (spares_needed() is 0 up to there): the usual table, one chunk
	 * mostly free, then finds room for the next calls without counting
	 * again (issue 40: this count was ~250 instructions a pair). */
	if (t->nc) {
		size_t least = full;

		for (size_t j = 0; j < t->nc && least > asked; j++) {
			size_t n = t->c->r[j].n, f = n < full ? full - n : 0;

			if (f < least)
				least = f;
		}
		if (least > asked)
			t->roomy = least;
	}
	return 0;
}

/* Can copy t take a new chunk with no memory: a spare one, and an entry
 * of its array of chunks for it? */
static inline bool
can_grow(const struct table *t)
{
	return t->spare && t->c && t->c->cap > t->nc;
}

/* Free slots in copy t's chunks. */
static size_t
free_slots(const struct table *t)
{
	size_t f = 0;

	for (size_t j = 0; j < t->nc; j++)
		if (t->c->r[j].n < full)
			f += full - t->c->r[j].n;
	return f;
}

/* Can copy t take k more records with no new memory: free slots in its
 * chunks (insert_shifting), or a spare chunk (whose split leaves half a
 * chunk free)? */
static bool
can_absorb(const struct table *t, size_t k)
{
	return k == 0 || (can_grow(t) && k <= full / 2) || free_slots(t) >= k;
}

/* Both copies get room for `extra` more records, or nothing changes. */
int
nsb_ranges_reserve(size_t extra)
{
	if (extra <= copies[0].roomy && extra <= copies[1].roomy)
		return 0;
	if (room(&copies[0], extra) < 0 || room(&copies[1], extra) < 0)
		return -1;
	return 0;
}

/* nsb_ranges_room() where a copy has not room enough already: out of
 * line, so that the usual answer saves no registers (issue 40). */
static __attribute__((noinline)) bool
room_slow(size_t extra)
{
	int err;
	bool ok;

	err = errno;
	ok = nsb_ranges_reserve(extra) == 0 ||
	     (can_absorb(&copies[0], extra) && can_absorb(&copies[1], extra));
	errno = err;
	return ok;
}

/* errno kept: a reserve that succeeds may have failed a step first. */
bool
nsb_ranges_room(size_t extra)
{
	/* The usual case, without errno (a call to the C library). */
	if (extra <= copies[0].roomy && extra <= copies[1].roomy)
		return true;
	return room_slow(extra);
}

/* A new chunk of n records at entry j of t's array (room() made both). */
static struct run *
run_insert(struct table *t, size_t j)
{
	struct run *r = t->c->r;

	if (t->nc > j)
		memmove(&r[j + 1], &r[j], (t->nc - j) * sizeof(r[0]));
	r[j].s = chunk_new(t);
	r[j].n = 0;
	t->nc++;
	t->roomy = 0;		/* a spare and an entry of the array used */
	t->reshapes++;
	return &r[j];
}

static void
run_remove(struct table *t, size_t j)
{
	struct run *r = t->c->r;

	t->roomy = 0;		/* the chunks are others now (a merge) */
	t->reshapes++;
	chunk_free(t, r[j].s);
	if (t->nc > j + 1)
		memmove(&r[j], &r[j + 1], (t->nc - j - 1) * sizeof(r[0]));
	t->nc--;
}

/*
 * Puts s at position p of full chunk p.j where no chunk can be made
 * (RLIMIT_AS: no spare and no memory for one): the chunks between p.j and
 * the nearest one with a free slot each pass one record on towards it,
 * which keeps the order and needs no memory.  False (nothing changed)
 * where every chunk is full.
 */
static __attribute__((noinline, cold)) bool
insert_shifting(struct table *t, struct pos p, const struct slot *s)
{
	struct run *r = t->c->r;
	size_t j = p.j, i = p.i, k = 0, d;
	bool up = false;

	for (d = 1; j >= d || j + d < t->nc; d++) {
		if (j >= d && r[j - d].n < full) {
			k = j - d;
			up = true;
			break;
		}
		if (j + d < t->nc && r[j + d].n < full) {
			k = j + d;
			break;
		}
	}
	if (!(j >= d || j + d < t->nc))
		return false;
	if (!up) {
		/* Each chunk from k up to j + 1 takes the last record of the
		 * one before it (higher addresses) as its first. */
		for (size_t m = k; m > j; m--) {
			memmove(&r[m].s[1], &r[m].s[0], r[m].n * sizeof(*s));
			r[m].s[0] = r[m - 1].s[--r[m - 1].n];
			r[m].n++;
		}
	} else {
		/* s before the first record of chunk j: at the end of the
		 * chunk before it. */
		if (i == 0)
			i = r[--j].n;
		/* Each chunk from k on takes the first record of the next
		 * (lower addresses) as its last. */
		for (size_t m = k; m < j; m++) {
			r[m].s[r[m].n++] = r[m + 1].s[0];
			memmove(&r[m + 1].s[0], &r[m + 1].s[1], (r[m + 1].n - 1) * sizeof(*s));
			r[m + 1].n--;
		}
		if (k < j)
			i--;
	}
	memmove(&r[j].s[i + 1], &r[j].s[i], (r[j].n - i) * sizeof(*s));
	r[j].s[i] = *s;
	r[j].n++;
	t->n++;
	t->inserts++;
	t->roomy = 0;
	return true;
}

/* Puts s at position p (before the record there: the first whose start
 * is below s's), splitting a full chunk; at either end of the table, or
 * where a neighbour has room, no chunk is split.  Where no spare chunk
 * is left (update_short() found free slots instead), records shift
 * towards one. */
static void
insert_at(struct table *t, struct pos p, const struct slot *s)
{
	struct run *r;

	if (t->nc == 0) {
		p.j = p.i = 0;
		r = run_insert(t, 0);
	} else {
		if (at_end(t, p)) {
			p.j = t->nc - 1;
			p.i = t->c->r[p.j].n;
		}
		r = &t->c->r[p.j];
		if (r->n == full && p.i == 0 && p.j > 0 && t->c->r[p.j - 1].n < full) {
			r = &t->c->r[--p.j];
			p.i = r->n;
		} else if (r->n == full && p.i == full && p.j + 1 < t->nc &&
			   t->c->r[p.j + 1].n < full) {
			r = &t->c->r[++p.j];
			p.i = 0;
		} else if (r->n == full && !can_grow(t) && insert_shifting(t, p, s)) {
			return;
		} else if (r->n == full && p.i == full) {
			r = run_insert(t, ++p.j);	/* a new last chunk */
			p.i = 0;
		} else if (r->n == full && p.i == 0 && p.j == 0) {
			r = run_insert(t, 0);		/* a new first chunk */
		} else if (r->n == full) {
			struct run *upper = run_insert(t, p.j + 1);

			r = &t->c->r[p.j];
			memcpy(upper->s, r->s + full / 2, (full - full / 2) * sizeof(*s));
			upper->n = full - full / 2;
			r->n = full / 2;
			if (p.i > full / 2) {
				r = upper;
				p.i -= full / 2;
			}
		}
	}
	put_slot(t, r, p.i, s);
}

/* Chunks j and j + 1 become one where that fills at most half a chunk. */
static void
merge_at(struct table *t, size_t j)
{
	struct run *r = t->c->r;

	if (j + 1 < t->nc && r[j].n + r[j + 1].n <= full / 2) {
		memcpy(r[j].s + r[j].n, r[j + 1].s, r[j + 1].n * sizeof(struct slot));
		r[j].n += r[j + 1].n;
		run_remove(t, j + 1);
	}
}

/* Removes k records from position p on. */
static void
remove_at(struct table *t, struct pos p, size_t k)
{
	size_t first = p.j;

	/* Fewer records in the same chunks need no more spares: the room
	 * found holds, unless a chunk goes (run_remove sets it to 0). */
	t->n -= k;
	while (k) {
		struct run *r = &t->c->r[p.j];
		size_t take = r->n - p.i < k ? r->n - p.i : k;

		if (r->n > p.i + take)
			memmove(&r->s[p.i], &r->s[p.i + take],
				(r->n - p.i - take) * sizeof(r->s[0]));
		r->n -= take;
		k -= take;
		if (r->n == 0) {
			run_remove(t, p.j);
		} else {
			p.j++;
			p.i = 0;
		}
	}
	if (first > 0)
		merge_at(t, first - 1);
	if (first < t->nc)
		merge_at(t, first);
}

/* Splits the record that strictly contains addr into two.  `count` is
 * set on the first of the two copies an update changes: the files'
 * reference counts follow the records once. */
static void
split_at(struct table *t, uintptr_t addr, bool count)
{
	struct pos p = find_pos(t, addr);
	struct slot *lower, upper;
	uint64_t below;

	if (at_end(t, p))
		return;
	lower = at(t, p);
	if (lower->start == addr || slot_end(lower) <= addr)
		return;
	below = (addr - lower->start) / nsb_config.page_size;
	upper = *lower;
	upper.start = addr;
	upper.pages -= (uint32_t)below;
	upper.off_file += below << 16;
	lower->pages = (uint32_t)below;
	insert_at(t, p, &upper);
	if (count) {
		nsb_files_ref(slot_file(&upper), 1);
		nsb_account_ref(upper.acct, 1);
	}
}

/* The first of the records inside [start, end) after splitting, and how
 * many there are. */
static struct pos
span(const struct table *t, uintptr_t start, uintptr_t end, size_t *k)
{
	struct pos p = find_pos(t, end - 1), q = p;

	*k = 0;
	while (!at_end(t, q) && at(t, q)->start >= start) {
		(*k)++;
		q = next_pos(t, q);
	}
	return p;
}

/* Where nsb_ranges_one() last found a record (in either copy: they hold
 * the same records in the same places): the first guess of exact_in()
 * and start_pos(), checked there (the lock is held). */
static struct pos one_found;

/*
 * find_pos(t, addr) where that is the record starting at addr, else the
 * end or a record that does not start there: the search only where the
 * place nsb_ranges_one() found (any place inside the copy will do: the
 * records are in order) cannot tell.  A join after a failed mprotect asks
 * at the two ends of the record that call found (issue 40: two searches
 * a call less).
 */
static inline __attribute__((always_inline)) struct pos
start_pos(const struct table *t, uintptr_t addr)
{
	struct pos h = one_found, none = { t->nc, 0 };
	const struct slot *s;

	if (h.j >= t->nc || h.i >= t->c->r[h.j].n)
		return find_pos(t, addr);
	s = at(t, h);
	if (s->start == addr)
		return h;
	if (s->start < addr) {
		/* Nothing starts between s and the record above it. */
		if (h.i > 0) {
			uintptr_t above = t->c->r[h.j].s[h.i - 1].start;

			if (above == addr) {
				h.i--;
				return h;
			}
			if (above > addr)
				return none;
		} else if (h.j == 0) {
			return none;	/* s is the highest record */
		}
	}
	return find_pos(t, addr);
}

/* The two records that meet at addr, the upper at *hi and the lower at
 * *lo, if they are one mapping's contiguous pieces with the same
 * attributes (as the kernel would merge the VMAs). */
static inline __attribute__((always_inline)) bool
joinable_at(const struct table *t, uintptr_t addr, struct pos *hi, struct pos *lo)
{
	const struct slot *u, *l;

	*hi = start_pos(t, addr);
	if (at_end(t, *hi) || at(t, *hi)->start != addr)
		return false;
	*lo = next_pos(t, *hi);
	if (at_end(t, *lo))
		return false;
	u = at(t, *hi);
	l = at(t, *lo);
	return slot_end(l) == addr && l->meta_gen == u->meta_gen && l->acct == u->acct &&
	       slot_file(l) == slot_file(u) &&
	       (l->off_file >> 16) + l->pages == (u->off_file >> 16) &&
	       (uint64_t)l->pages + u->pages <= MAX_PAGES;
}

/* Do the records overlapping [start, end) all lie inside it?  Then the
 * first of them (highest) in *p, and how many in *k (0: none there). */
static bool
whole_records(const struct table *t, uintptr_t start, uintptr_t end, struct pos *p, size_t *k)
{
	struct pos q = find_pos(t, end - 1);
	const struct slot *s;

	*p = q;
	*k = 0;
	if (at_end(t, q) || slot_end(s = at(t, q)) <= start)
		return true;
	if (slot_end(s) > end)
		return false;
	for (;;) {
		if (s->start < start)
			return false;
		(*k)++;
		q = next_pos(t, q);
		if (at_end(t, q) || slot_end(s = at(t, q)) <= start)
			return true;
	}
}

struct op {
	enum { OP_INSERT, OP_CUT, OP_PROT, OP_FLAGS, OP_JOIN } kind;
	struct nsb_range r;
	struct slot s;		/* OP_INSERT: r packed */
	int prot;
	int pkey;
	uint32_t set, clear;	/* OP_FLAGS */
};

/* The meta_gen op (OP_PROT, OP_FLAGS) gives a record that has m (the
 * generation bits stay). */
static uint32_t
changed_meta(const struct op *op, uint32_t m)
{
	if (op->kind == OP_FLAGS)
		return (m & ~op->clear) | op->set;
	m = (m & ~NSB_META_PROT) | ((uint32_t)op->prot & NSB_META_PROT);
	if (op->pkey >= 0)
		m = (m & ~NSB_META_PKEY_MASK) | NSB_META_MKPKEY(op->pkey);
	return m;
}

/* How many records op inserts into a copy whose records are t's: one for
 * an insert, one for each end of a cut or change that falls strictly
 * inside a record (split_at). */
static __attribute__((noinline, cold)) size_t
op_inserts(const struct table *t, const struct op *op)
{
	struct pos p;
	size_t n = 0;

	if (op->kind == OP_INSERT)
		return 1;
	if (op->kind == OP_JOIN || whole_records(t, op->r.start, op->r.end, &p, &n))
		return 0;
	n = 0;
	for (int e = 0; e < 2; e++) {
		uintptr_t a = e ? op->r.end : op->r.start;

		p = find_pos(t, a);
		if (!at_end(t, p) && at(t, p)->start < a && slot_end(at(t, p)) > a)
			n++;
	}
	return n;
}

/*
 * A cut or change of [start, end) where the copies have no room for the
 * pieces of a split (RLIMIT_AS: every chunk full, no spare, no memory):
 * a record the span covers part of is cut, in place (which needs no
 * room), to its piece outside the span, the larger where there are two.
 * What goes is protection lost (the inside of a change, the smaller piece
 * of a cut through the middle), never a record that says something the
 * kernel does not: the records kept are as apply() would leave them.  A
 * change that leaves a record's meta as it is cuts nothing of it.  The
 * records inside go or change as in apply().  True if protection was
 * lost.
 */
static __attribute__((noinline, cold)) bool
apply_tight(struct table *t, const struct op *op, bool count)
{
	uintptr_t start = op->r.start, end = op->r.end;
	size_t ps = nsb_config.page_size, k = 0;
	bool lost = false, first = true;
	struct pos p = find_pos(t, end - 1), lo = p;

	while (!at_end(t, p) && slot_end(at(t, p)) > start) {
		struct slot *r = at(t, p);
		uintptr_t rs = r->start, re = slot_end(r);
		uintptr_t below = rs < start ? start - rs : 0, above = re > end ? re - end : 0;

		if (!below && !above) {
			/* Inside: goes or changes as apply() does it. */
			if (op->kind == OP_CUT) {
				if (first)
					lo = p;
				first = false;
				k++;
				if (count) {
					nsb_files_ref(slot_file(r), -1);
					nsb_account_ref(r->acct, -1);
				}
			} else {
				r->meta_gen = changed_meta(op, r->meta_gen);
			}
		} else if (op->kind == OP_CUT || changed_meta(op, r->meta_gen) != r->meta_gen) {
			/* Part of it inside, and that part changes: the larger
			 * piece outside stays, in this slot. */
			lost |= op->kind != OP_CUT || (below && above);
			if (below >= above) {
				r->pages = (uint32_t)(below / ps);
			} else {
				r->off_file += (uint64_t)((end - rs) / ps) << 16;
				r->pages = (uint32_t)(above / ps);
				r->start = end;
			}
		}
		p = next_pos(t, p);
	}
	if (k)
		remove_at(t, lo, k);
	return lost;
}

static void
apply(struct table *t, const struct op *op, bool count)
{
	struct pos lo, q;
	size_t k;

	switch (op->kind) {
	case OP_JOIN: {
		struct pos hi, lo_pos;

		if (!joinable_at(t, op->r.start, &hi, &lo_pos))
			return;
		at(t, lo_pos)->pages += at(t, hi)->pages;
		if (count) {
			nsb_files_ref(slot_file(at(t, hi)), -1);
			nsb_account_ref(at(t, hi)->acct, -1);
		}
		remove_at(t, hi, 1);
		return;
	}
	case OP_INSERT:
		insert_at(t, find_pos(t, op->s.start), &op->s);
		if (count) {
			nsb_files_ref(slot_file(&op->s), 1);
			nsb_account_ref(op->s.acct, 1);
		}
		return;
	case OP_CUT:
	case OP_PROT:
	case OP_FLAGS:
		/* Usually the span holds whole records (a mapping unmapped
		 * whole): one search finds them, and nothing is split. */
		if (!whole_records(t, op->r.start, op->r.end, &lo, &k)) {
			split_at(t, op->r.start, count);
			split_at(t, op->r.end, count);
			lo = span(t, op->r.start, op->r.end, &k);
		}
		q = lo;
		for (size_t i = 0; i < k; i++, q = next_pos(t, q)) {
			struct slot *r = at(t, q);

			if (op->kind == OP_CUT) {
				if (count) {
					nsb_files_ref(slot_file(r), -1);
					nsb_account_ref(r->acct, -1);
				}
			} else {
				r->meta_gen = changed_meta(op, r->meta_gen);
			}
		}
		if (op->kind == OP_CUT && k)
			remove_at(t, lo, k);
		return;
	}
}

/*
 * update() where the table could get no memory (RLIMIT_AS): what the op
 * inserts may still fit both copies' chunks (insert_shifting); an op on
 * whole records, or a join, inserts nothing.  Else an insert fails
 * (ENOMEM, nothing changed), and a cut or change is made without
 * splitting (apply_tight): the call the records follow has been made,
 * and must not fail for them.  Decided on both copies before either
 * changes, so that they stay alike.
 */
static __attribute__((noinline, cold)) int
update_short(const struct op *op, int err)
{
	int inactive = 1 - atomic_load(&active);
	struct table *in = &copies[inactive], *out = &copies[inactive ^ 1];
	size_t k = op_inserts(in, op);
	bool tight = !can_absorb(in, k) || !can_absorb(out, k);
	struct pos p;
	size_t n;

	errno = err;
	if (tight && op->kind == OP_INSERT) {
		errno = ENOMEM;
		return -1;
	}
	tight = tight && op->kind != OP_JOIN &&
		!whole_records(in, op->r.start, op->r.end, &p, &n);
	atomic_fetch_add(&version, 1);
	if (tight ? apply_tight(in, op, true) : (apply(in, op, true), false))
		nsb_ranges_lost();
	atomic_store(&live_count, in->n);
	switch_copies();
	if (tight)
		(void)apply_tight(out, op, false);
	else
		apply(out, op, false);
	atomic_fetch_add(&version, 1);
	return 0;
}

/* A one-chunk table of at most this many records: the second copy takes
 * the first's records by a copy, not the op again (see update()). */
#define COPY_MAX 32

/*
 * Applies op to both copies; see the comment at the top.  (Each inserts
 * at most two records: the pieces of two splits; none where the op's span
 * holds whole records, which is then made without room.  Where the room
 * for two cannot be had: update_short().)
 *
 * The copies hold the same records before the op, so they hold the same
 * after it.  Where both are one chunk, and the op made or freed none in
 * the first (the usual table: a few records), the second copy is made
 * like the first by copying its few records into its own chunk, which
 * costs less than applying the op again (a search, a move, the merge
 * check: ~150 instructions a change).  No handler reads the second copy
 * then (switch_copies() drained them), as for apply(); an optimistic
 * reader sees the version odd and throws what it read away.  Its room
 * follows what apply() would have left: less one a record inserted.
 */
static int
update(const struct op *op)
{
	struct table *in, *out;
	const struct slot *chunk = NULL;
	uint32_t inserts, reshapes;
	int inactive, err = errno;

	if (__builtin_expect(nsb_ranges_reserve(2) < 0, 0))
		return update_short(op, err);
	inactive = 1 - atomic_load(&active);
	in = &copies[inactive];
	out = &copies[inactive ^ 1];
	if (in->nc == 1 && out->nc == 1 && in->n <= COPY_MAX)
		chunk = in->c->r[0].s;
	inserts = in->inserts;
	reshapes = in->reshapes;
	atomic_fetch_add(&version, 1);
	apply(in, op, true);
	/* Before the switch, so that a first record is never skipped. */
	atomic_store(&live_count, in->n);
	switch_copies();
	if (chunk && in->reshapes == reshapes && in->nc == 1 && in->n <= COPY_MAX) {
		uint32_t added = in->inserts - inserts;

		memcpy(out->c->r[0].s, chunk, in->n * sizeof(struct slot));
		out->c->r[0].n = in->n;
		out->n = in->n;
		out->inserts += added;
		out->roomy = out->roomy > added ? out->roomy - added : 0;
	} else {
		apply(out, op, false);
	}
	atomic_fetch_add(&version, 1);
	return 0;
}

/*
 * The usual changes, made without update()'s generality (issue 40: a
 * pair of calls spent ~2 000 instructions in the table): a new record
 * into a table of one chunk with room, and a cut or a change of
 * protection of exactly one whole record.  Each does what update() does
 * - the inactive copy changed, made active, the readers of the other
 * drained, the same change made there, the version odd meanwhile - and
 * leaves both copies as apply() would, chunk for chunk: the copies hold
 * the same records in the same chunks, so the record at one place in one
 * copy is at the same place in the other (checked by its start: else the
 * general path).  The room update() asks for first is asked here too:
 * its memory is made at the same calls.
 */

/* The room update() asks for before a change that needs none (a cut or
 * a change of whole records), its ENOMEM not the caller's: as
 * nsb_ranges_reserve(2), errno kept.  Where both copies have room
 * already, the check alone (nsb_ranges_reserve()'s first). */
static __attribute__((noinline, cold)) void
reserve_whole_slow(void)
{
	int err = errno;

	if (nsb_ranges_reserve(2) < 0)
		errno = err;
}

static inline void
reserve_whole(void)
{
	/* The calls apart: no register of the caller's saved for them on
	 * the usual way (issue 40). */
	if (copies[0].roomy >= 2 && copies[1].roomy >= 2)
		return;
	reserve_whole_slow();
}

/* The one record that is exactly [start, end), in copy t. */
static inline __attribute__((always_inline)) bool
exact_at(const struct table *t, uintptr_t start, uintptr_t end, struct pos *p)
{
	const struct slot *s;

	if (end <= start)
		return false;
	*p = find_pos(t, end - 1);
	if (at_end(t, *p))
		return false;
	s = at(t, *p);
	return s->start == start && slot_end(s) == end;
}

/* Is p the place of the record that starts at start in copy t? */
static inline bool
same_place(const struct table *t, struct pos p, uintptr_t start)
{
	return p.j < t->nc && p.i < t->c->r[p.j].n && at(t, p)->start == start;
}

/* exact_at(), trying first the place nsb_ranges_one() found: the call
 * that asked it is usually the one making the change. */
static inline __attribute__((always_inline)) bool
exact_in(const struct table *t, uintptr_t start, uintptr_t end, struct pos *p)
{
	if (same_place(t, one_found, start) && slot_end(at(t, one_found)) == end) {
		*p = one_found;
		return true;
	}
	return exact_at(t, start, end, p);
}

/* Removes the record at p: remove_at(t, p, 1), whose merges a chunk of
 * its own that keeps records never needs. */
static inline void
cut_one(struct table *t, struct pos p)
{
	struct run *r = &t->c->r[p.j];

	if (t->nc != 1 || r->n == 1) {
		remove_at(t, p, 1);
		return;
	}
	if (r->n > p.i + 1)
		slots_down(&r->s[p.i], r->n - p.i - 1);
	r->n--;
	t->n--;
}

/*
 * The cut of the record at p where it is the last (lowest) of both
 * copies' one chunk, which keeps others, and lies in the span in flux
 * (munmap): one count less in each copy at once, no switch and no wait
 * for readers (flux_covers: no handler reads that record but for its
 * bounds, to find its address is not in it).  A handler that read the
 * count before it and one that reads it after find the same answer for
 * an address outside the span: none below the record (the end, or the
 * record, whose bounds do not hold the address), the same record above
 * it.  The slot keeps its contents until an insert there, which changes
 * the inactive copy first and drains the readers before the other
 * (insert_plain, update).  The new mapping of a pair, the lowest
 * (top-down), is usually that record.  Under the version's odd count
 * (cut_exact).  true done, false not that case.
 */
static inline __attribute__((always_inline)) bool
cut_tail(struct table *in, struct table *out, struct pos p, uintptr_t start, uintptr_t end)
{
	struct run *a, *b;

	if (in->nc != 1 || out->nc != 1 || p.j != 0)
		return false;
	a = &in->c->r[0];
	b = &out->c->r[0];
	if (a->n < 2 || p.i + 1 != a->n || b->n != a->n || b->s[p.i].start != start ||
	    slot_end(&b->s[p.i]) != end || !flux_covers(start, end))
		return false;
	a->n--;
	in->n--;
	b->n--;
	out->n--;
	atomic_store(&live_count, in->n);
	return true;
}

/* A cut of exactly one whole record: 1 done, 0 not that case.  Inlined
 * into its one caller (one frame for both). */
static inline __attribute__((always_inline)) int
cut_exact(uintptr_t start, uintptr_t end)
{
	int inactive = 1 - atomic_load(&active);
	struct table *in = &copies[inactive], *out = &copies[inactive ^ 1];
	struct pos p;
	uint16_t file;
	struct nsb_account *acct;

	if (!exact_in(in, start, end, &p))
		return 0;
	reserve_whole();	/* a cut of a whole record needs none */
	file = slot_file(at(in, p));
	acct = at(in, p)->acct;
	atomic_fetch_add(&version, 1);
	if (cut_tail(in, out, p, start, end))
		goto counted;
	cut_one(in, p);
	atomic_store(&live_count, in->n);
	switch_copies();
	if (same_place(out, p, start) || exact_at(out, start, end, &p))
		cut_one(out, p);
counted:
	atomic_fetch_add(&version, 1);
	/* The counts last: the writer's alone (nothing reads them before
	 * the unlock), and nothing else is live across these calls. */
	nsb_files_ref(file, -1);
	nsb_account_ref(acct, -1);
	return 1;
}

/* A change of protection of exactly one whole record: 1 done, 0 not
 * that case. */
static inline __attribute__((always_inline)) int
prot_exact(uintptr_t start, uintptr_t end, int prot, int pkey)
{
	int inactive = 1 - atomic_load(&active);
	struct table *in = &copies[inactive], *out = &copies[inactive ^ 1];
	struct pos p;
	uint32_t m;

	if (!exact_in(in, start, end, &p))
		return 0;
	reserve_whole();	/* a change of a whole record needs none */
	m = at(in, p)->meta_gen & ~NSB_META_PROT;
	m |= (uint32_t)prot & NSB_META_PROT;
	if (pkey >= 0)
		m = (m & ~NSB_META_PKEY_MASK) | NSB_META_MKPKEY(pkey);
	/* The protection and key it has already (an mprotect that repeats
	 * one): the copies hold the same records, nothing to change. */
	if (m == at(in, p)->meta_gen)
		return 1;
	atomic_fetch_add(&version, 1);
	at(in, p)->meta_gen = m;
	if (!flux_covers(start, end))	/* see prot_found_place */
		switch_copies();
	if (same_place(out, p, start) || exact_at(out, start, end, &p))
		at(out, p)->meta_gen = m;
	atomic_fetch_add(&version, 1);
	return 1;
}

/* A new record s into a table of one chunk with room in both copies
 * (where insert_at() neither splits nor makes a chunk): 1 done, 0 not
 * that case.  The room update() asks for first is asked, best effort:
 * where it cannot be had (RLIMIT_AS), update_short() would make the
 * same insert into the free slot, which needs none.  The copies' one
 * chunks hold the same records: s goes at the same index in both. */
static int
insert_plain(const struct slot *s)
{
	int inactive = 1 - atomic_load(&active);
	struct table *in = &copies[inactive], *out = &copies[inactive ^ 1];
	struct table *t;
	struct pos p;

	if (in->nc != 1 || out->nc != 1 || in->c->r[0].n >= full ||
	    out->c->r[0].n != in->c->r[0].n)
		return 0;
	reserve_whole();	/* the chunk has a free slot: it needs none */
	p = find_pos(in, s->start);
	if (at_end(in, p))
		p.i = in->c->r[0].n;
	p.j = 0;
	atomic_fetch_add(&version, 1);
	t = in;
	for (int k = 0;; k++) {
		put_slot(t, &t->c->r[0], p.i, s);
		if (k == 1)
			break;
		atomic_store(&live_count, in->n);
		switch_copies();
		t = out;
	}
	atomic_fetch_add(&version, 1);
	/* The counts last (see cut_exact). */
	nsb_files_ref(slot_file(s), 1);
	nsb_account_ref(s->acct, 1);
	return 1;
}

void
nsb_ranges_lock(void)
{
	nsb_lock_quiet(&nsb_table_lock);
	if (__builtin_expect(notes_pending(), 0))
		settle();
}

/* Files that no record names any more are let go only here, once the
 * caller's changes are all made: a call may cut records and then put
 * them back elsewhere (mremap). */
/* The line nsb_ranges_lost() asks for, once: written after an unlock,
 * by the thread that takes it. */
static atomic_bool lost_line;

void
nsb_ranges_unlock(void)
{
	char said[NSB_LOG_QUEUE];
	size_t n;

	if (__builtin_expect(notes_pending(), 0))
		settle();
	/* Accounts first: the last line of a mapping names its file. */
	nsb_account_release_unused();
	nsb_files_release_unused();
	nsb_scratch_reset();
	n = nsb_log_take(said);
	nsb_unlock(&nsb_table_lock);
	/* Not under the lock: stderr may be a pipe that is full. */
	if (n)
		nsb_log_write(said, n);
	if (__builtin_expect(atomic_load_explicit(&lost_line, memory_order_relaxed), 0) &&
	    atomic_exchange(&lost_line, false))
		nsb_log_lost();
	/* A note made after the settle above, by a handler that interrupted
	 * this call's last steps (or the settle itself, in a slot it had
	 * passed): settled now, not left to a next holder that may never
	 * come (no rescue would trust those records meanwhile). */
	if (__builtin_expect(notes_pending(), 0) &&
	    !nsb_ranges_nested()) {
		nsb_ranges_lock();
		nsb_ranges_unlock();
	}
}

void
nsb_ranges_lost(void)
{
	static bool logged;

	atomic_fetch_add(&nsb_counters.lost, 1);
	if (nsb_config.log && !logged) {
		logged = true;
		atomic_store(&lost_line, true);
	}
}

/* A record of more pages than a slot holds: several records, each with
 * its offset (update() makes the same inserts insert_plain() would). */
static __attribute__((noinline, cold)) int
insert_split(const struct nsb_range *r)
{
	struct op op;	/* kind, r and s: all apply() reads of an insert */
	size_t ps = nsb_config.page_size;

	/* Not zeroed whole first: the op is ~100 bytes, and the fields an
	 * insert does not read cost a rep stos of them a call. */
	op.kind = OP_INSERT;
	op.r = *r;
	while ((op.r.end - op.r.start) >> page_shift() > MAX_PAGES) {
		uintptr_t cut = op.r.start + (uintptr_t)MAX_PAGES / 2 * ps;
		struct op first = op;

		first.r.end = cut;
		pack(&first.r, &first.s);
		if (update(&first) < 0)
			return -1;
		op.r.off += cut - op.r.start;
		op.r.start = cut;
	}
	pack(&op.r, &op.s);
	return update(&op);
}

int
nsb_ranges_insert(const struct nsb_range *r)
{
	struct op op;	/* kind, r and s: all apply() reads of an insert */

	/* More than a slot holds (at least MAX_PAGES + 1 pages). */
	if (__builtin_expect((r->end - r->start) >> page_shift() > MAX_PAGES, 0))
		return insert_split(r);
	if (__builtin_expect(NSB_META_SHIFT(r->meta) > page_shift(), 0) &&
	    NSB_META_SHIFT(r->meta) > atomic_load_explicit(&big_shift, memory_order_relaxed))
		atomic_store(&big_shift, NSB_META_SHIFT(r->meta));
	/* The usual record: packed straight into the slot insert_plain()
	 * takes, the op made only where it cannot (issue 40). */
	pack(r, &op.s);
	if (insert_plain(&op.s))
		return 0;
	op.kind = OP_INSERT;
	op.r = *r;
	return update(&op);
}

/* Is any record in [start, end) of the copy the writer holds?  (The lock
 * is held: nothing changes under us.) */
static inline __attribute__((always_inline)) bool
overlap_locked(uintptr_t start, uintptr_t end)
{
	const struct table *t = &copies[atomic_load(&active)];
	struct pos p;

	if (end <= start || t->n == 0)
		return false;
	p = find_pos(t, end - 1);
	return !at_end(t, p) && slot_end(at(t, p)) > start;
}

int
nsb_ranges_cut(uintptr_t start, uintptr_t end)
{
	/* The op is made only for a change: zeroing it costs more than the
	 * check. */
	if (!overlap_locked(start, end))
		return 0;
	return nsb_ranges_cut_found(start, end);
}

int
nsb_ranges_cut_found(uintptr_t start, uintptr_t end)
{
	struct op op;

	if (cut_exact(start, end))
		return 0;
	/* kind, r.start and r.end: all apply() reads of a cut (not the
	 * whole op zeroed first, see nsb_ranges_insert). */
	op.kind = OP_CUT;
	op.r.start = start;
	op.r.end = end;
	return update(&op);
}

/* nsb_ranges_cut_stale() over a record: errno kept. */
static __attribute__((noinline)) void
cut_stale_found(uintptr_t start, uintptr_t end)
{
	int err = errno;

	(void)nsb_ranges_cut_found(start, end);
	errno = err;
}

/*
 * A cut that must not fail: the records a raw call (munmap, shmdt, mremap)
 * left where a new mapping now is.  No cut fails: where the table has no
 * room to split a record that [start, end) cuts part of, only the larger
 * piece of it outside the span stays (apply_tight), rather than the new
 * mapping gaining a protection that is not its own.
 */
void
nsb_ranges_cut_stale(uintptr_t start, uintptr_t end)
{
	/* The usual call: a new mapping where nothing is recorded, answered
	 * without a stack frame (the cut is cut_stale_found's). */
	if (!overlap_locked(start, end))
		return;
	cut_stale_found(start, end);
}

static __attribute__((noinline)) int
join_at(uintptr_t addr)
{
	return update(&(struct op){ .kind = OP_JOIN, .r = { .start = addr } });
}

int
nsb_ranges_join(uintptr_t addr)
{
	struct pos hi, lo;

	/* Inline, the join apart (join_at): the usual answer, no join, is
	 * a check without a frame for the op (issue 40). */
	if (!joinable_at(&copies[atomic_load(&active)], addr, &hi, &lo))
		return 0;
	return join_at(addr);
}

int
nsb_ranges_set_prot(uintptr_t start, uintptr_t end, int prot, int pkey)
{
	struct op op = { .kind = OP_PROT, .r = { .start = start, .end = end },
			 .prot = prot, .pkey = pkey };

	if (!overlap_locked(start, end))
		return 0;
	return update(&op);
}

/* nsb_ranges_set_prot_found() past its short way: the op, whose frame
 * the short way does not need. */
static __attribute__((noinline)) int
set_prot_update(uintptr_t start, uintptr_t end, int prot, int pkey)
{
	struct op op;

	/* All apply() reads of a change of protection (not the whole op
	 * zeroed first, see nsb_ranges_insert). */
	op.kind = OP_PROT;
	op.r.start = start;
	op.r.end = end;
	op.prot = prot;
	op.pkey = pkey;
	return update(&op);
}

/* prot_exact() where the place nsb_ranges_one() found is the record's in
 * both copies, both have room and no key is given: the usual mprotect's
 * change, with no search and no call on its way (issue 40).  1 done, 0
 * not that case. */
static inline __attribute__((always_inline)) int
prot_found_place(uintptr_t start, uintptr_t end, int prot, int pkey)
{
	int inactive = 1 - atomic_load(&active);
	struct table *in = &copies[inactive], *out = &copies[inactive ^ 1];
	struct pos p = one_found;
	struct slot *a, *b;
	uint32_t m;

	if (pkey >= 0 || copies[0].roomy < 2 || copies[1].roomy < 2 ||
	    !same_place(in, p, start) || !same_place(out, p, start))
		return 0;
	a = at(in, p);
	if (slot_end(a) != end)
		return 0;
	/* The same record in the other copy: they hold the same ones. */
	b = at(out, p);
	m = (a->meta_gen & ~NSB_META_PROT) | ((uint32_t)prot & NSB_META_PROT);
	if (m == a->meta_gen)
		return 1;	/* the protection it has (see prot_exact) */
	atomic_fetch_add(&version, 1);
	a->meta_gen = m;
	/* Inside the span this call put in flux (do_mprotect, resync): no
	 * handler reads the record's meta (flux_covers), so the active
	 * copy changes in place too, with no switch and no wait. */
	if (!flux_covers(start, end))
		switch_copies();
	b->meta_gen = m;
	atomic_fetch_add(&version, 1);
	return 1;
}

/* The rest of nsb_ranges_set_prot_found(): another place, or a key. */
static __attribute__((noinline)) int
set_prot_other(uintptr_t start, uintptr_t end, int prot, int pkey)
{
	if (prot_exact(start, end, prot, pkey))
		return 0;
	return set_prot_update(start, end, prot, pkey);
}

int
nsb_ranges_set_prot_found(uintptr_t start, uintptr_t end, int prot, int pkey)
{
	if (prot_found_place(start, end, prot, pkey))
		return 0;
	return set_prot_other(start, end, prot, pkey);
}

int
nsb_ranges_set_flags(uintptr_t start, uintptr_t end, uint32_t set, uint32_t clear)
{
	if (!overlap_locked(start, end))
		return 0;
	return update(&(struct op){ .kind = OP_FLAGS, .r = { .start = start, .end = end },
				    .set = set, .clear = clear });
}

size_t
nsb_ranges_replaced(uintptr_t start, uintptr_t end)
{
	const struct table *t = &copies[atomic_load(&active)];
	size_t n = 0;

	for (struct pos p = { 0, 0 }; !at_end(t, p); p = next_pos(t, p)) {
		struct nsb_range r;

		unpack(at(t, p), &r);
		if (r.end <= start || r.start >= end)
			continue;
		if (r.start < start) {
			r.off += start - r.start;
			r.start = start;
		}
		if (r.end > end)
			r.end = end;
		n += nsb_account_count(r.acct, r.off, r.end - r.start);
	}
	return n;
}

/* nsb_saved_free() of a list that grew into a mapping of its own. */
void
nsb_saved_unmap(struct nsb_saved *s)
{
	nsb_sys_munmap(s->r, s->cap * sizeof(s->r[0]));
}

/* Lists live for one call, under the table lock: scratch memory (see
 * memory.c); a mapping of its own only if that is full. */
int
nsb_saved_push(struct nsb_saved *s, const struct nsb_range *r)
{
	if (s->n == s->cap) {
		size_t cap = s->cap * 4;
		struct nsb_range *p = nsb_scratch(cap * sizeof(*p));
		bool mapped = !p;

		if (mapped) {
			p = nsb_sys_mmap(NULL, cap * sizeof(*p), PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p == MAP_FAILED) {
				errno = ENOMEM;
				return -1;
			}
		}
		memcpy(p, s->r, s->n * sizeof(*p));
		if (s->mapped)
			nsb_sys_munmap(s->r, s->cap * sizeof(*p));
		s->r = p;
		s->cap = cap;
		s->mapped = mapped;
	}
	s->r[s->n++] = *r;
	return 0;
}

size_t
nsb_ranges_unit(uintptr_t start, uintptr_t end, size_t *n)
{
	const struct table *t = &copies[atomic_load(&active)];
	size_t unit = nsb_config.page_size;

	*n = 0;
	if (end <= start)
		return unit;
	for (struct pos p = find_pos(t, end - 1);
	     !at_end(t, p) && slot_end(at(t, p)) > start; p = next_pos(t, p)) {
		size_t u = (size_t)1 << NSB_META_SHIFT(at(t, p)->meta_gen & META_MASK);

		if (u > unit)
			unit = u;
		(*n)++;
	}
	return unit;
}

/* The usual span of a call: it meets one record, which lies inside it,
 * of pages (not huge pages): then true, with the record in *r - what
 * nsb_ranges_collect() would list, and nsb_ranges_unit() count. */
bool
nsb_ranges_one(uintptr_t start, uintptr_t end, struct nsb_range *r, const struct nsb_peek *pk)
{
	const struct table *t = &copies[atomic_load(&active)];
	const struct slot *s;
	struct pos p, q;

	/* Seen by the caller's quick check, and the table not changed since
	 * (the version changes with every change, and the lock is held):
	 * what that check read is what this would find. */
	if (pk && pk->v == atomic_load(&version) && !(pk->v & 1)) {
		one_found.j = pk->j;
		one_found.i = pk->i;
		unpack(at(t, one_found), r);
		return true;
	}
	if (end <= start)
		return false;
	p = find_pos(t, end - 1);
	if (at_end(t, p) || (s = at(t, p))->start < start || slot_end(s) <= start ||
	    slot_end(s) > end ||
	    ((size_t)1 << NSB_META_SHIFT(s->meta_gen & META_MASK)) != nsb_config.page_size)
		return false;
	q = next_pos(t, p);
	if (!at_end(t, q) && slot_end(at(t, q)) > start)
		return false;
	unpack(s, r);
	one_found = p;
	return true;
}

int
nsb_ranges_collect(uintptr_t start, uintptr_t end, struct nsb_saved *saved)
{
	const struct table *t = &copies[atomic_load(&active)];
	size_t first = saved->n;

	if (end <= start)
		return 0;
	/* Highest first, as the table keeps them; then turned around. */
	for (struct pos p = find_pos(t, end - 1);
	     !at_end(t, p) && slot_end(at(t, p)) > start; p = next_pos(t, p)) {
		struct nsb_range r;

		unpack(at(t, p), &r);
		if (r.start < start) {
			r.off += start - r.start;
			r.start = start;
		}
		if (r.end > end)
			r.end = end;
		if (nsb_saved_push(saved, &r) < 0)
			return -1;
	}
	for (size_t i = first, j = saved->n; i + 1 < j; i++, j--) {
		struct nsb_range tmp = saved->r[i];

		saved->r[i] = saved->r[j - 1];
		saved->r[j - 1] = tmp;
	}
	return 0;
}

/* Test hook: the next time the table needs memory, it fails (ENOMEM).
 * The spare chunks are forgotten, so that the next chunk a change needs is
 * new memory (a test's memory only: nothing is unmapped). */
void
nsb_ranges_fail_next_alloc(void)
{
	fail_next_alloc = true;
	for (int k = 0; k < 2; k++) {
		copies[k].spare = NULL;
		copies[k].nspare = 0;
		copies[k].roomy = 0;
	}
}

/* Test hook: from now on (until called with false) the table gets no
 * memory, as under a tight RLIMIT_AS; the spare chunks are forgotten. */
void
nsb_ranges_test_no_alloc(bool on)
{
	no_alloc = on;
	if (on)
		nsb_ranges_fail_next_alloc();
	fail_next_alloc = false;
}

/* Test hook: chunks split at n records (n <= CHUNK), so that a small
 * window of records splits and merges them. */
void
nsb_ranges_test_chunk(size_t n)
{
	full = (uint8_t)(n >= 4 && n <= CHUNK ? n : CHUNK);
	copies[0].roomy = copies[1].roomy = 0;
}

/* The child has one thread: rescues in flight elsewhere are gone with
 * their threads (process.c reset the lock).  nested: the fork came from a
 * handler that interrupted this thread's own call, which holds the lock
 * and goes on changing the table once the handler returns. */
void
nsb_ranges_after_fork_child(bool nested)
{
	const struct table *t = &copies[atomic_load(&active)];
	struct pos p;

	atomic_store(&readers[0], 0);
	atomic_store(&readers[1], 0);
	for (int k = 0; k < 2; k++)
		nsb_slots_keep_only(vfork_tickets(k), VFORK_TICKETS, 0);
	/* A note a thread that is not here was writing: its span is not
	 * known, so no record is trusted until the next holder cuts them. */
	for (int i = 0; notes && i < NOTES; i++) {
		int busy = NOTE_BUSY;

		if (atomic_compare_exchange_strong(&notes[i].state, &busy, NOTE_FREE)) {
			atomic_fetch_sub(&notes_used, 1);
			atomic_store(&notes_all, true);
		}
	}
	if (!nested)
		nsb_ranges_flux_end();
	/* The fork took the table lock: the records are ours to change.
	 * MADV_DONTFORK mappings are not in the child; MADV_WIPEONFORK ones
	 * are fresh memory, nothing of it replaced.  Downwards by address: a
	 * cut changes the table, and the walk goes on below what it cut.
	 * Where the interrupted call is changing the table, they are noted
	 * instead, and cut when it lets go. */
	for (p.j = p.i = 0; !at_end(t, p);) {
		struct nsb_range r;

		unpack(at(t, p), &r);
		if (nested && (r.meta & (NSB_META_DONTFORK | NSB_META_WIPEONFORK))) {
			nsb_ranges_note(r.start, r.end);
		} else if (r.meta & NSB_META_DONTFORK) {
			(void)nsb_ranges_cut(r.start, r.end);
			t = &copies[atomic_load(&active)];
			if (r.start == 0)
				break;
			p = find_pos(t, r.start - 1);
			continue;
		} else if (r.meta & NSB_META_WIPEONFORK) {
			nsb_account_clear(r.acct, r.off, r.end - r.start);
		}
		p = next_pos(t, p);
	}
	/* Notes the fork's lock came in before their thread settled them
	 * (nsb_ranges_unlock settles a late one after it lets go): that
	 * thread is not here, so they are settled now, the records being
	 * ours.  A nested fork's are its interrupted call's to settle. */
	if (!nested && notes_pending())
		settle();
}

/* The parent of a vfork child that died: the tickets the child took on
 * this thread's TLS and never gave back (before: the counts as the
 * parent called vfork). */
void
nsb_ranges_vfork_readers(const uint8_t before[2])
{
	for (int k = 0; k < 2; k++) {
		if (nsb_my_readers[k] == before[k])
			continue;
		atomic_fetch_sub(&readers[k], (long)(uint8_t)(nsb_my_readers[k] - before[k]));
		nsb_my_readers[k] = before[k];
	}
	/* The slots: the parent takes none (nsb_vfork_tid is 0 in it).
	 * (process.c sets the count of holds.) */
	for (int k = 0; k < 2; k++)
		nsb_slots_drop(vfork_tickets(k), VFORK_TICKETS, (uintptr_t)nsb_my_readers, 0);
}

/* The copy t made anew as a chunk-for-chunk copy of src, in chunks of
 * its own memory: what it had is given up, whatever state a dead writer
 * left its chunks, their array and its spare list in (a chunk may be
 * named twice by an array whose memmove was cut short).  False: no
 * memory, t empty. */
static bool
rebuild(struct table *t, const struct table *src)
{
	size_t cap = src->c ? src->c->cap : 0;
	struct runs *c;

	t->spare = NULL;
	t->nspare = 0;
	t->nc = t->n = 0;
	t->roomy = 0;
	t->reshapes++;
	if (src->nc == 0)
		return true;
	c = nsb_memory(sizeof(*c) + cap * sizeof(c->r[0]));
	if (!c)
		return false;
	c->cap = cap;
	for (size_t j = 0; j < src->nc; j++) {
		struct slot *s = chunk_make(t);

		if (!s)
			return false;
		memcpy(s, src->c->r[j].s, src->c->r[j].n * sizeof(*s));
		c->r[j].s = s;
		c->r[j].n = src->c->r[j].n;
	}
	atomic_thread_fence(memory_order_release);
	t->c = c;
	t->nc = src->nc;
	t->n = src->n;
	return true;
}

/* The counts of the accounts and files that t's records name, made
 * again from the records: the child may have died between a change of
 * the table and its counts (cut_exact, insert_plain: "the counts last"),
 * one too many (a file's descriptor, an account kept for good) or one too
 * few (an account released while a record still names it).  Those no
 * record names keep their count; released at 0 as ever. */
static void
recount(const struct table *t)
{
	for (int pass = 0; pass < 2; pass++)
		for (size_t j = 0; j < t->nc; j++)
			for (size_t i = 0; i < t->c->r[j].n; i++) {
				const struct slot *s = &t->c->r[j].s[i];

				if (pass == 0) {
					nsb_files_refs_clear(slot_file(s));
					nsb_account_refs_clear(s->acct);
				} else {
					nsb_files_ref(slot_file(s), 1);
					nsb_account_ref(s->acct, 1);
				}
			}
}

/*
 * Table lock held, taken back from a vfork child that died holding it
 * (process.c): the table made whole, and every record marked for the
 * resync from the kernel that the unlock makes (settle()): the child may
 * have died after its system call and before its records, or anywhere
 * between.  Readers only ever use the active copy, which a writer never
 * changes (it changes the inactive one, switches, drains, and changes
 * the other): with the version odd, the inactive one may be half
 * changed, and is made again from the active one.  A span the child put
 * in flux is no longer; a note it was writing (its calls were nested only
 * if this thread held the lock already) is of unknown span.
 */
void
nsb_ranges_after_vfork_death(void)
{
	int act = atomic_load(&active);

	if (atomic_load(&version) & 1) {
		if (!rebuild(&copies[1 - act], &copies[act])) {
			/* No memory for a copy: no record kept rather than
			 * two copies that differ (SPEC §12: lost). */
			(void)rebuild(&copies[1 - act], &copies[1 - act]);
			atomic_store(&live_count, 0);
			switch_copies();
			(void)rebuild(&copies[act], &copies[1 - act]);
			nsb_ranges_lost();
		}
		atomic_fetch_add(&version, 1);
	}
	atomic_store(&live_count, copies[atomic_load(&active)].n);
	recount(&copies[atomic_load(&active)]);
	nsb_ranges_flux_end();
	for (int i = 0; notes && i < NOTES; i++) {
		int busy = NOTE_BUSY;

		if (atomic_compare_exchange_strong(&notes[i].state, &busy, NOTE_FREE))
			atomic_fetch_sub(&notes_used, 1);
	}
	atomic_store(&notes_all, true);
}
