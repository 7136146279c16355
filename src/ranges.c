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
 *    like a seqlock, registered nowhere.  A writer never waits for them,
 *    which matters: the program may stop a thread inside any call, from a
 *    signal handler, and keep it stopped while another thread maps.
 *  - writers, serialised by the table lock (process.c: no handler of the
 *    program's runs in a holder).
 * The table is a "left-right" pair: two sorted arrays with the same
 * contents.  Handlers use the active copy; a writer changes the inactive
 * one, makes it active, waits until no handler can still be on the other
 * one, and applies the same change there.  Once a record is cut, no rescue
 * can still map a page over it.
 *
 * While a call changes a span (flux, see nsb.h), a fault there is neither
 * rescued nor passed on but retried, so that records never lag behind the
 * kernel in either direction: a live protected page is never unprotected,
 * even during a call that fails part-way, and a page is never rescued on
 * the strength of a record the call is about to remove.
 *
 * The arrays are sorted by descending start address because the kernel
 * hands out addresses top-down, so new records usually go at the end.
 * Storage comes straight from mmap through nsb_sys_mmap, never malloc, and
 * is never unmapped while the process lives (an optimistic reader may
 * still be looking at it).
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
	uint32_t meta_gen;	/* meta (21 bits) | gen << 21 */
	struct nsb_account *acct;
};
#define META_BITS	21
#define META_MASK	((1u << META_BITS) - 1)
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

/* r must fit one slot (nsb_ranges_insert splits it). */
static inline void
pack(const struct nsb_range *r, struct slot *s)
{
	s->start = r->start;
	s->pages = (uint32_t)((r->end - r->start) / nsb_config.page_size);
	s->off_file = (r->off / nsb_config.page_size) << 16 | r->file;
	s->meta_gen = (r->meta & META_MASK) | (uint32_t)r->gen << META_BITS;
	s->acct = r->acct;
}

static inline uint16_t
slot_file(const struct slot *s)
{
	return (uint16_t)(s->off_file & 0xffff);
}

struct table {
	struct slot *r;		/* descending by start, never overlapping */
	size_t n;
	size_t cap;		/* entries */
};

struct nsb_lock nsb_table_lock = NSB_LOCK_INITIALIZER;

static struct table copies[2];
static atomic_int active;		/* the copy readers use */
static atomic_int reader_side;		/* the counter new readers use */
static atomic_long readers[2];
static atomic_size_t live_count;	/* records, for lock-free fast paths */
static atomic_size_t last_hit;		/* index of the last record found */
static atomic_ulong version;		/* even: stable; odd: a writer is changing a copy */
static atomic_uintptr_t flux[4];	/* two spans [flux[0], flux[1]), [flux[2], flux[3]) */
static bool fail_next_alloc;

/* ---- reader side ------------------------------------------------------- */

/* First index whose start is <= addr, in the first n entries. */
static size_t
first_at_or_below(const struct slot *r, size_t n, uintptr_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r[mid].start <= addr)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* [signal-safe] */
static int
reader_enter(void)
{
	int side = atomic_load(&reader_side);

	atomic_fetch_add(&readers[side], 1);
	return side;
}

/* [signal-safe] */
void
nsb_ranges_leave(int ticket)
{
	atomic_fetch_sub(&readers[ticket], 1);
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
	size_t i;
	int side;

	side = reader_enter();
	/* After registering: a writer that set the flux before we did
	 * waits for us; one that sets it later finds us gone or sees us.
	 * (Before the count: a call may have cut every record for now.) */
	if (in_flux(addr)) {
		nsb_ranges_leave(side);
		return NSB_LOOKUP_BUSY;
	}
	if (atomic_load(&live_count) == 0) {
		nsb_ranges_leave(side);
		return NSB_LOOKUP_NONE;
	}
	t = &copies[atomic_load(&active)];
	/* Faults come in runs over one mapping: try the last hit first.
	 * The hint may be stale or from the other copy; it is only a guess,
	 * checked against the copy we hold. */
	i = atomic_load_explicit(&last_hit, memory_order_relaxed);
	if (i >= t->n || addr < t->r[i].start || addr >= slot_end(&t->r[i])) {
		i = first_at_or_below(t->r, t->n, addr);
		if (i >= t->n || addr >= slot_end(&t->r[i])) {
			nsb_ranges_leave(side);
			return NSB_LOOKUP_NONE;
		}
		atomic_store_explicit(&last_hit, i, memory_order_relaxed);
	}
	unpack(&t->r[i], out);
	*ticket = side;
	return NSB_LOOKUP_FOUND;
}

/*
 * Optimistic: reads the active copy with no registration, and trusts the
 * answer only if no writer changed a copy meanwhile.  Memory is never
 * unmapped, so a torn read is only a wrong answer, and it is thrown away.
 * After a few tries (a writer is busy), it asks under the lock, whose
 * holder the program cannot stop.
 */
bool
nsb_ranges_overlap(uintptr_t start, uintptr_t end)
{
	bool hit;

	if (atomic_load(&live_count) == 0 || end <= start)
		return false;
	for (int tries = 0; tries < 8; tries++) {
		unsigned long v = atomic_load(&version);
		const struct table *t;
		const struct slot *r;
		size_t n, cap, i;

		if (v & 1) {
			sched_yield();
			continue;
		}
		t = &copies[atomic_load(&active)];
		r = t->r;
		n = t->n;
		cap = t->cap;
		if (n > cap)
			n = cap;
		i = r ? first_at_or_below(r, n, end - 1) : n;
		hit = i < n && slot_end(&r[i]) > start;
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load(&version) == v)
			return hit;
	}
	nsb_ranges_lock();
	{
		const struct table *t = &copies[atomic_load(&active)];
		size_t i = first_at_or_below(t->r, t->n, end - 1);

		hit = i < t->n && slot_end(&t->r[i]) > start;
	}
	nsb_ranges_unlock();
	return hit;
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
	return (copies[0].cap + copies[1].cap) * sizeof(struct slot);
}

/* ---- writer side ------------------------------------------------------- */

static void
wait_for_readers(atomic_long *counter)
{
	while (atomic_load(counter) != 0)
		sched_yield();
}

/* Returns once every handler that registered before the call has left. */
static void
drain_readers(void)
{
	int side = atomic_load(&reader_side);

	wait_for_readers(&readers[1 - side]);
	atomic_store(&reader_side, 1 - side);
	wait_for_readers(&readers[side]);
}

/* Makes the inactive copy active; on return nobody reads the other one. */
static void
switch_copies(void)
{
	atomic_store(&active, 1 - atomic_load(&active));
	drain_readers();
}

void
nsb_ranges_flux(uintptr_t s1, uintptr_t e1, uintptr_t s2, uintptr_t e2)
{
	atomic_store(&flux[0], s1);
	atomic_store(&flux[1], e1);
	atomic_store(&flux[2], s2);
	atomic_store(&flux[3], e2);
	drain_readers();
}

void
nsb_ranges_flux_end(void)
{
	for (int i = 0; i < 4; i++)
		atomic_store(&flux[i], 0);
}

/*
 * Each copy grows in place in its home in the library's reservation
 * (memory.c); past that, it moves to a bigger mapping, and the old one
 * stays mapped for optimistic readers.
 */
static int
grow(struct table *t, size_t need)
{
	size_t cap = t->cap ? t->cap * 2 : nsb_config.page_size / sizeof(struct slot);
	void *home, *p;

	while (cap < need)
		cap *= 2;
	if (fail_next_alloc) {
		fail_next_alloc = false;
		errno = ENOMEM;
		return -1;
	}
	home = nsb_memory_table(t == &copies[0] ? 0 : 1, cap * sizeof(struct slot));
	if (home && (!t->r || t->r == home)) {
		p = home;
	} else {
		p = nsb_memory(cap * sizeof(struct slot));
		if (!p)
			return -1;
		if (t->r)
			memcpy(p, t->r, t->n * sizeof(struct slot));
	}
	t->r = p;
	t->cap = cap;
	return 0;
}

/* Both copies get room for `extra` more records, or nothing changes. */
int
nsb_ranges_reserve(size_t extra)
{
	int inactive = 1 - atomic_load(&active);
	size_t need = copies[inactive].n + extra;
	int ret = 0;

	if (copies[inactive].cap < need && grow(&copies[inactive], need) < 0)
		return -1;
	if (copies[1 - inactive].cap >= need)
		return 0;
	/* The contents are equal: swap, then grow the other one. */
	atomic_fetch_add(&version, 1);
	switch_copies();
	ret = grow(&copies[1 - atomic_load(&active)], need);
	atomic_fetch_add(&version, 1);
	return ret;
}

static void
insert_at(struct table *t, size_t i, const struct slot *s)
{
	memmove(&t->r[i + 1], &t->r[i], (t->n - i) * sizeof(*s));
	t->r[i] = *s;
	t->n++;
}

/* Splits the record that strictly contains addr into two.  `count` is
 * set on the first of the two copies an update changes: the files'
 * reference counts follow the records once. */
static void
split_at(struct table *t, uintptr_t addr, bool count)
{
	size_t i = first_at_or_below(t->r, t->n, addr);
	uint64_t below;
	struct slot upper;

	if (i >= t->n || t->r[i].start == addr || slot_end(&t->r[i]) <= addr)
		return;
	below = (addr - t->r[i].start) / nsb_config.page_size;
	upper = t->r[i];
	upper.start = addr;
	upper.pages -= (uint32_t)below;
	upper.off_file += below << 16;
	t->r[i].pages = (uint32_t)below;
	insert_at(t, i, &upper);
	if (count) {
		nsb_files_ref(slot_file(&upper), 1);
		nsb_account_ref(upper.acct, 1);
	}
}

/* Indexes [*lo, *hi) of the records inside [start, end) after splitting. */
static void
span(const struct table *t, uintptr_t start, uintptr_t end, size_t *lo, size_t *hi)
{
	size_t i = first_at_or_below(t->r, t->n, end - 1);

	*lo = i;
	while (i < t->n && t->r[i].start >= start)
		i++;
	*hi = i;
}

struct op {
	enum { OP_INSERT, OP_CUT, OP_PROT, OP_FLAGS } kind;
	struct nsb_range r;
	struct slot s;		/* OP_INSERT: r packed */
	int prot;
	int pkey;
	uint32_t set, clear;	/* OP_FLAGS */
};

static void
apply(struct table *t, const struct op *op, bool count)
{
	size_t lo, hi;

	switch (op->kind) {
	case OP_INSERT:
		insert_at(t, first_at_or_below(t->r, t->n, op->s.start), &op->s);
		if (count) {
			nsb_files_ref(slot_file(&op->s), 1);
			nsb_account_ref(op->s.acct, 1);
		}
		return;
	case OP_CUT:
	case OP_PROT:
	case OP_FLAGS:
		split_at(t, op->r.start, count);
		split_at(t, op->r.end, count);
		span(t, op->r.start, op->r.end, &lo, &hi);
		if (op->kind == OP_CUT) {
			if (count)
				for (size_t i = lo; i < hi; i++) {
					nsb_files_ref(slot_file(&t->r[i]), -1);
					nsb_account_ref(t->r[i].acct, -1);
				}
			memmove(&t->r[lo], &t->r[hi], (t->n - hi) * sizeof(t->r[0]));
			t->n -= hi - lo;
			return;
		}
		if (op->kind == OP_FLAGS) {
			for (size_t i = lo; i < hi; i++)
				t->r[i].meta_gen = (t->r[i].meta_gen & ~op->clear) | op->set;
			return;
		}
		for (size_t i = lo; i < hi; i++) {
			uint32_t m = t->r[i].meta_gen & ~NSB_META_PROT;

			m |= (uint32_t)op->prot & NSB_META_PROT;
			if (op->pkey >= 0)
				m = (m & ~NSB_META_PKEY_MASK) | NSB_META_MKPKEY(op->pkey);
			t->r[i].meta_gen = m;
		}
		return;
	}
}

/* Applies op to both copies; see the comment at the top. */
static int
update(const struct op *op)
{
	int inactive;

	if (nsb_ranges_reserve(2) < 0)
		return -1;
	inactive = 1 - atomic_load(&active);
	atomic_fetch_add(&version, 1);
	apply(&copies[inactive], op, true);
	/* Before the switch, so that a first record is never skipped. */
	atomic_store(&live_count, copies[inactive].n);
	switch_copies();
	apply(&copies[inactive ^ 1], op, false);
	atomic_fetch_add(&version, 1);
	return 0;
}

void
nsb_ranges_lock(void)
{
	nsb_lock_quiet(&nsb_table_lock);
}

/* Files that no record names any more are let go only here, once the
 * caller's changes are all made: a call may cut records and then put
 * them back elsewhere (mremap). */
void
nsb_ranges_unlock(void)
{
	char said[NSB_LOG_QUEUE];
	size_t n;

	/* Accounts first: the last line of a mapping names its file. */
	nsb_account_release_unused();
	nsb_files_release_unused();
	nsb_scratch_reset();
	n = nsb_log_take(said);
	nsb_unlock(&nsb_table_lock);
	/* Not under the lock: stderr may be a pipe that is full. */
	if (n)
		nsb_log_write(said, n);
}

int
nsb_ranges_insert(const struct nsb_range *r)
{
	struct op op = { .kind = OP_INSERT, .r = *r };
	size_t ps = nsb_config.page_size;

	/* More than a slot holds: several records, each with its offset. */
	while ((op.r.end - op.r.start) / ps > MAX_PAGES) {
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

/* Is any record in [start, end) of the copy the writer holds?  (The lock
 * is held: nothing changes under us.) */
static bool
overlap_locked(uintptr_t start, uintptr_t end)
{
	const struct table *t = &copies[atomic_load(&active)];
	size_t i;

	if (end <= start)
		return false;
	i = first_at_or_below(t->r, t->n, end - 1);
	return i < t->n && slot_end(&t->r[i]) > start;
}

int
nsb_ranges_cut(uintptr_t start, uintptr_t end)
{
	struct op op = { .kind = OP_CUT, .r = { .start = start, .end = end } };

	if (!overlap_locked(start, end))
		return 0;
	return update(&op);
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

int
nsb_ranges_set_flags(uintptr_t start, uintptr_t end, uint32_t set, uint32_t clear)
{
	struct op op = { .kind = OP_FLAGS, .r = { .start = start, .end = end },
			 .set = set, .clear = clear };

	if (!overlap_locked(start, end))
		return 0;
	return update(&op);
}

size_t
nsb_ranges_replaced(uintptr_t start, uintptr_t end)
{
	const struct table *t = &copies[atomic_load(&active)];
	size_t n = 0;

	for (size_t i = 0; i < t->n; i++) {
		struct nsb_range r;

		unpack(&t->r[i], &r);
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

void
nsb_saved_init(struct nsb_saved *s)
{
	s->n = 0;
	s->cap = sizeof(s->inline_r) / sizeof(s->inline_r[0]);
	s->r = s->inline_r;
	s->mapped = false;
}

void
nsb_saved_free(struct nsb_saved *s)
{
	if (s->mapped)
		nsb_sys_munmap(s->r, s->cap * sizeof(s->r[0]));
	nsb_saved_init(s);
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

int
nsb_ranges_collect(uintptr_t start, uintptr_t end, struct nsb_saved *saved)
{
	const struct table *t = &copies[atomic_load(&active)];
	size_t i, last;

	if (end <= start)
		return 0;
	i = first_at_or_below(t->r, t->n, end - 1);
	last = i;
	while (last < t->n && slot_end(&t->r[last]) > start)
		last++;
	while (last-- > i) {
		struct nsb_range r;

		unpack(&t->r[last], &r);
		if (r.start < start) {
			r.off += start - r.start;
			r.start = start;
		}
		if (r.end > end)
			r.end = end;
		if (nsb_saved_push(saved, &r) < 0)
			return -1;
	}
	return 0;
}

void
nsb_ranges_fail_next_alloc(void)
{
	fail_next_alloc = true;
}

/* The child has one thread: rescues in flight elsewhere are gone with
 * their threads (process.c re-initialised the lock). */
void
nsb_ranges_after_fork_child(void)
{
	const struct table *t = &copies[atomic_load(&active)];

	atomic_store(&readers[0], 0);
	atomic_store(&readers[1], 0);
	nsb_ranges_flux_end();
	/* The fork took the table lock: the records are ours to change.
	 * MADV_DONTFORK mappings are not in the child; MADV_WIPEONFORK ones
	 * are fresh memory, nothing of it replaced. */
	for (size_t i = t->n; i-- > 0;) {
		struct nsb_range r;

		unpack(&t->r[i], &r);
		if (r.meta & NSB_META_DONTFORK) {
			(void)nsb_ranges_cut(r.start, r.end);
			t = &copies[atomic_load(&active)];
			if (i > t->n)
				i = t->n;
		} else if (r.meta & NSB_META_WIPEONFORK) {
			nsb_account_clear(r.acct, r.off, r.end - r.start);
		}
	}
}
