/* SPDX-License-Identifier: MIT */
/*
 * ranges.c - the table of protected mappings.
 *
 * Readers are SIGBUS handlers: they may not lock, allocate or wait, and
 * must find a record in O(log n).  Writers are the interposed mapping
 * calls: they are serialised by one mutex and may wait.  The table is a
 * "left-right" pair: two sorted arrays with the same contents.  Readers
 * use the active copy; a writer changes the inactive one, makes it active,
 * waits until no reader can still be on the other one, and applies the
 * same change there.  Readers never wait; a writer waits only for rescues
 * already in flight, which is exactly the guarantee the mapping calls need:
 * once a record is cut, no rescue can still map a page over it.
 *
 * The arrays are sorted by descending start address because the kernel
 * hands out addresses top-down, so new records usually go at the end.
 * Inserting elsewhere costs a memmove of the tail (O(n), n <= the number of
 * VMAs a process can have).  Storage comes straight from mmap through
 * nsb_sys_mmap, never malloc: malloc may itself call mmap.
 *
 * Signal context: nsb_ranges_enter, nsb_ranges_leave, nsb_ranges_count and
 * nsb_paths_get.  Everything else runs with the table lock held, with
 * asynchronous signals blocked so that a handler calling mmap cannot
 * deadlock on it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "nsb.h"

struct table {
	struct nsb_range *r;	/* descending by start, never overlapping */
	size_t n;
	size_t cap;		/* entries */
};

static struct table copies[2];
static atomic_int active;		/* the copy readers use */
static atomic_int reader_side;		/* the counter new readers use */
static atomic_long readers[2];
static atomic_size_t live_count;	/* records, for lock-free fast paths */
static atomic_size_t last_hit;		/* index of the last record found */
static atomic_ulong version;		/* bumped by every change */

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static sigset_t held_mask;		/* the lock holder's mask */
static bool fail_next_alloc;

/* ---- reader side ------------------------------------------------------- */

/* First index whose start is <= addr ([signal-safe]). */
static size_t
first_at_or_below(const struct table *t, uintptr_t addr)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->r[mid].start <= addr)
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
bool
nsb_ranges_enter(uintptr_t addr, struct nsb_range *out, int *ticket)
{
	const struct table *t;
	size_t i;
	int side;

	if (atomic_load(&live_count) == 0)
		return false;
	side = reader_enter();
	t = &copies[atomic_load(&active)];
	/* Faults come in runs over one mapping: try the last hit first.
	 * The hint may be stale or from the other copy; it is only a guess,
	 * checked against the copy we hold. */
	i = atomic_load_explicit(&last_hit, memory_order_relaxed);
	if (i >= t->n || addr < t->r[i].start || addr >= t->r[i].end) {
		i = first_at_or_below(t, addr);
		if (i >= t->n || addr >= t->r[i].end) {
			nsb_ranges_leave(side);
			return false;
		}
		atomic_store_explicit(&last_hit, i, memory_order_relaxed);
	}
	*out = t->r[i];
	*ticket = side;
	return true;
}

bool
nsb_ranges_overlap(uintptr_t start, uintptr_t end)
{
	const struct table *t;
	bool hit;
	size_t i;
	int side;

	if (atomic_load(&live_count) == 0 || end <= start)
		return false;
	side = reader_enter();
	t = &copies[atomic_load(&active)];
	i = first_at_or_below(t, end - 1);
	hit = i < t->n && t->r[i].end > start;
	nsb_ranges_leave(side);
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
	return atomic_load(&version);
}

size_t
nsb_ranges_bytes(void)
{
	return (copies[0].cap + copies[1].cap) * sizeof(struct nsb_range);
}

/* ---- writer side ------------------------------------------------------- */

static void
wait_for_readers(atomic_long *counter)
{
	while (atomic_load(counter) != 0)
		sched_yield();
}

/* Makes the inactive copy active; on return nobody reads the other one. */
static void
switch_copies(void)
{
	int side;

	atomic_store(&active, 1 - atomic_load(&active));
	side = atomic_load(&reader_side);
	wait_for_readers(&readers[1 - side]);
	atomic_store(&reader_side, 1 - side);
	wait_for_readers(&readers[side]);
}

/*
 * The table's memory is reserved once, when the first record is made, and
 * grows in place: memory the library maps later would land in whatever the
 * program has just freed, and a program may take its own freed addresses
 * back with MAP_FIXED (stress-ng does), which would wipe the table out.
 * Each copy gets half of the reservation (address space only, nothing is
 * committed until used); past that, it moves out with mremap.
 */
#define RESERVE ((size_t)64 << 20)
static char *reservation;

static int
grow(struct table *t, size_t need)
{
	size_t page = nsb_config.page_size;
	size_t cap = t->cap ? t->cap * 2 : page / sizeof(struct nsb_range);
	size_t bytes, half = RESERVE / 2;
	char *mine;
	void *p;

	while (cap < need)
		cap *= 2;
	bytes = (cap * sizeof(struct nsb_range) + page - 1) & ~(page - 1);
	if (fail_next_alloc) {
		fail_next_alloc = false;
		errno = ENOMEM;
		return -1;
	}
	if (!reservation) {
		p = nsb_sys_mmap(NULL, RESERVE, PROT_NONE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		reservation = p == MAP_FAILED ? (char *)-1 : p;
	}
	mine = reservation == (char *)-1 ? NULL : reservation + (t == &copies[0] ? 0 : half);
	if (mine && (!t->r || (char *)t->r == mine) && bytes <= half) {
		if (nsb_sys_mprotect(mine, bytes, PROT_READ | PROT_WRITE) < 0) {
			errno = ENOMEM;
			return -1;
		}
		p = mine;
	} else if (t->r) {
		p = nsb_sys_mremap(t->r, t->cap * sizeof(struct nsb_range), bytes,
				   MREMAP_MAYMOVE, NULL);
	} else {
		p = nsb_sys_mmap(NULL, bytes, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	if (p == MAP_FAILED) {
		errno = ENOMEM;
		return -1;
	}
	t->r = p;
	t->cap = bytes / sizeof(struct nsb_range);
	return 0;
}

/* Both copies get room for `extra` more records, or nothing changes. */
int
nsb_ranges_reserve(size_t extra)
{
	int inactive = 1 - atomic_load(&active);
	size_t need = copies[inactive].n + extra;

	if (copies[inactive].cap < need && grow(&copies[inactive], need) < 0)
		return -1;
	if (copies[1 - inactive].cap >= need)
		return 0;
	/* The contents are equal: swap, then grow the other one. */
	switch_copies();
	return grow(&copies[1 - atomic_load(&active)], need);
}

static void
insert_at(struct table *t, size_t i, const struct nsb_range *r)
{
	memmove(&t->r[i + 1], &t->r[i], (t->n - i) * sizeof(*r));
	t->r[i] = *r;
	t->n++;
}

/* Splits the record that strictly contains addr into two. */
static void
split_at(struct table *t, uintptr_t addr)
{
	size_t i = first_at_or_below(t, addr);
	struct nsb_range upper;

	if (i >= t->n || t->r[i].start == addr || t->r[i].end <= addr)
		return;
	upper = t->r[i];
	upper.start = addr;
	t->r[i].end = addr;
	insert_at(t, i, &upper);
}

/* Indexes [*lo, *hi) of the records inside [start, end) after splitting. */
static void
span(const struct table *t, uintptr_t start, uintptr_t end, size_t *lo, size_t *hi)
{
	size_t i = first_at_or_below(t, end - 1);

	*lo = i;
	while (i < t->n && t->r[i].start >= start)
		i++;
	*hi = i;
}

struct op {
	enum { OP_INSERT, OP_CUT, OP_PROT } kind;
	struct nsb_range r;
	int prot;
	int pkey;
};

static void
apply(struct table *t, const struct op *op)
{
	size_t lo, hi;

	switch (op->kind) {
	case OP_INSERT:
		insert_at(t, first_at_or_below(t, op->r.start), &op->r);
		return;
	case OP_CUT:
	case OP_PROT:
		split_at(t, op->r.start);
		split_at(t, op->r.end);
		span(t, op->r.start, op->r.end, &lo, &hi);
		if (op->kind == OP_CUT) {
			memmove(&t->r[lo], &t->r[hi], (t->n - hi) * sizeof(t->r[0]));
			t->n -= hi - lo;
			return;
		}
		for (size_t i = lo; i < hi; i++) {
			uint32_t m = t->r[i].meta & ~NSB_META_PROT;

			m |= (uint32_t)op->prot & NSB_META_PROT;
			if (op->pkey >= 0)
				m = (m & ~NSB_META_PKEY_MASK) | NSB_META_MKPKEY(op->pkey);
			t->r[i].meta = m;
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
	apply(&copies[inactive], op);
	/* Before the switch, so that a first record is never skipped. */
	atomic_store(&live_count, copies[inactive].n);
	switch_copies();
	apply(&copies[inactive ^ 1], op);
	return 0;
}

void
nsb_ranges_lock(void)
{
	sigset_t all, old;

	/* Synchronous signals must stay deliverable; the rest wait. */
	sigfillset(&all);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGABRT);
	nsb_sys_sigmask(SIG_BLOCK, &all, &old);
	pthread_mutex_lock(&table_lock);
	held_mask = old;
}

void
nsb_ranges_unlock(void)
{
	sigset_t old = held_mask;

	pthread_mutex_unlock(&table_lock);
	nsb_sys_sigmask(SIG_SETMASK, &old, NULL);
}

int
nsb_ranges_insert(uintptr_t start, uintptr_t end, uint32_t meta, uint32_t path)
{
	struct op op = { .kind = OP_INSERT,
			 .r = { .start = start, .end = end, .meta = meta, .path = path } };

	return update(&op);
}

int
nsb_ranges_cut(uintptr_t start, uintptr_t end, struct nsb_saved *saved)
{
	struct op op = { .kind = OP_CUT, .r = { .start = start, .end = end } };

	if (end <= start || !nsb_ranges_overlap(start, end))
		return 0;
	if (saved && nsb_ranges_collect(start, end, saved) < 0)
		return -1;
	return update(&op);
}

int
nsb_ranges_set_prot(uintptr_t start, uintptr_t end, int prot, int pkey)
{
	struct op op = { .kind = OP_PROT, .r = { .start = start, .end = end },
			 .prot = prot, .pkey = pkey };

	if (end <= start || !nsb_ranges_overlap(start, end))
		return 0;
	return update(&op);
}

void
nsb_ranges_restore(const struct nsb_saved *saved)
{
	/* Each piece was cut from a live record: there is room for it
	 * unless the table cannot grow, and then it stays lost. */
	for (size_t i = 0; i < saved->n; i++)
		(void)nsb_ranges_insert(saved->r[i].start, saved->r[i].end,
					saved->r[i].meta, saved->r[i].path);
}

void
nsb_saved_init(struct nsb_saved *s)
{
	s->n = 0;
	s->cap = sizeof(s->inline_r) / sizeof(s->inline_r[0]);
	s->r = s->inline_r;
}

void
nsb_saved_free(struct nsb_saved *s)
{
	if (s->r != s->inline_r)
		nsb_sys_munmap(s->r, s->cap * sizeof(s->r[0]));
	nsb_saved_init(s);
}

int
nsb_saved_push(struct nsb_saved *s, const struct nsb_range *r)
{
	if (s->n == s->cap) {
		size_t cap = s->cap * 4;
		struct nsb_range *p;

		p = nsb_sys_mmap(NULL, cap * sizeof(*p), PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			errno = ENOMEM;
			return -1;
		}
		memcpy(p, s->r, s->n * sizeof(*p));
		if (s->r != s->inline_r)
			nsb_sys_munmap(s->r, s->cap * sizeof(*p));
		s->r = p;
		s->cap = cap;
	}
	s->r[s->n++] = *r;
	return 0;
}

/* Lowest address first, clipped to [start, end).  Caller holds the lock. */
int
nsb_ranges_collect(uintptr_t start, uintptr_t end, struct nsb_saved *saved)
{
	const struct table *t = &copies[atomic_load(&active)];
	size_t i, last;

	if (end <= start)
		return 0;
	i = first_at_or_below(t, end - 1);
	last = i;
	while (last < t->n && t->r[last].end > start)
		last++;
	while (last-- > i) {
		struct nsb_range r = t->r[last];

		if (r.start < start)
			r.start = start;
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

/* ---- fork -------------------------------------------------------------- */

static void
before_fork(void)
{
	nsb_ranges_lock();
}

static void
after_fork_parent(void)
{
	nsb_ranges_unlock();
}

/* The child has one thread: rescues in flight elsewhere are gone with
 * their threads, and so is whoever waited for the lock. */
static void
after_fork_child(void)
{
	sigset_t old = held_mask;

	atomic_store(&readers[0], 0);
	atomic_store(&readers[1], 0);
	pthread_mutex_init(&table_lock, NULL);
	nsb_sys_sigmask(SIG_SETMASK, &old, NULL);
}

__attribute__((constructor(101))) static void
ranges_init(void)
{
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* ---- path pool (NOSIGBUS_LOG only) ------------------------------------- */

#define PATH_POOL_SIZE (1u << 20)
static char *path_pool;
static size_t path_used = 1;	/* offset 0 means "unknown" */

/* Caller holds the lock.  Paths are never freed; a full pool gives 0. */
uint32_t
nsb_paths_intern(const char *path)
{
	size_t len = strlen(path) + 1;

	if (!path_pool) {
		void *p = nsb_sys_mmap(NULL, PATH_POOL_SIZE, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (p == MAP_FAILED)
			return 0;
		path_pool = p;
	}
	for (size_t off = 1; off < path_used; off += strlen(path_pool + off) + 1)
		if (strcmp(path_pool + off, path) == 0)
			return (uint32_t)off;
	if (len > PATH_POOL_SIZE - path_used)
		return 0;
	memcpy(path_pool + path_used, path, len);
	path_used += len;
	return (uint32_t)(path_used - len);
}

/* [signal-safe] */
const char *
nsb_paths_get(uint32_t off)
{
	return off && path_pool ? path_pool + off : NULL;
}
