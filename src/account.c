/* SPDX-License-Identifier: MIT */
/*
 * account.c - what the library replaced, exactly.
 *
 * One account per mapping the library records: a bit per unit (page, or
 * huge page) of the mapping, set while the library replaces that unit and
 * kept set for as long as the mapping lives.  A unit is replaced at most
 * once: a rescue claims its units by setting their bits, and a fault on a
 * unit whose bit is set is never rescued again, whatever mincore() says
 * (a written page in swap is not "in memory"), however many threads and
 * mappings there are.  Nothing here is a cache that forgets.
 *
 * Bits are indexed by file offset (for anonymous memory: the offset the
 * records keep, 0 at the start of the mapping), so the records of one
 * mapping - split by munmap, mprotect or madvise, or moved by mremap -
 * all name the same account and keep finding their bits.  A mapping the
 * kernel makes anew (mmap, the part an mremap adds, the source that
 * MREMAP_DONTUNMAP leaves) gets a new account.  Clearing bits is kept
 * separate (nsb_account_clear), for a fork child's wiped memory and for a
 * later refresh that maps the file back over units that are in the file
 * again.
 *
 * Memory: a header and one bit per unit, from size classes carved out of
 * the library's own memory (memory.c); an account bigger than half a page
 * (a mapping of more than 64 MiB of 4 KiB pages) is an allocation of its
 * own there, reused once released, never a mapping wherever the kernel
 * would put it (the program may take such an address back).  Accounts
 * are counted by the records that name them, like the files (files.c),
 * and let go only when the table lock is released, after every handler
 * that could still hold one has left (ranges.c).
 *
 * Signal context: nsb_account_claim, nsb_account_claim_run,
 * nsb_account_unclaim, nsb_account_test, nsb_account_log,
 * nsb_account_set_unsure.  The rest runs under the table lock.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "nsb.h"

#define WORD_BITS	64u
#define MIN_CLASS	7u	/* 128 bytes: the header and a few hundred units */

struct nsb_account {
	uint64_t id;		/* never reused: tells accounts apart */
	uint64_t off0;		/* offset of bit 0, in bytes */
	uint64_t units;
	unsigned shift;		/* log2 of the unit */
	unsigned class;		/* log2 of the allocation */
	size_t bytes;		/* the allocation */
	long refs;		/* records naming it */
	bool pending;		/* on the release list */
	atomic_bool unsure;	/* a unit was replaced not known past the end */
	bool may_write;		/* a shared file mapping whose descriptor was
				 * opened for writing (refresh.c) */
	bool write_known;	/* may_write learnt from the descriptor (mmap):
				 * else unknown (nosigbus_protect) */
	struct nsb_account *next;	/* release list or free list */
	struct nsb_maplog log;		/* log.c's, about this mapping */
	atomic_ulong bits[];
};

/* Free lists by size class (log2 of the bytes). */
#define CLASSES 32
static struct nsb_account *free_list[CLASSES];
/* Pages carved at a time, per class: doubling up to 1 MiB, so that a
 * process with tens of thousands of mappings spends a few VMAs of its
 * vm.max_map_count on accounts, and one with a few spends a page. */
static uint32_t chunk_pages[CLASSES];	/* (.bss: see tests/bench/startup.c) */
#define MAX_CHUNK ((size_t)1 << 20)
/* Accounts that may have no record left (nsb_account_release_unused,
 * inline in nsb.h): not static, so that the inline check in nsb.h reads
 * it (one load on the usual path, no call). */
struct nsb_account *nsb_account_release_list;
static uint64_t next_id = 1;

static size_t
bytes_for(uint64_t units)
{
	return sizeof(struct nsb_account) + (size_t)((units + WORD_BITS - 1) / WORD_BITS) * 8;
}

size_t
nsb_account_bytes(size_t len, size_t unit)
{
	return bytes_for((len + unit - 1) / unit);
}

static __attribute__((noinline)) struct nsb_account *
allocate_general(size_t bytes)
{
	size_t page = nsb_config.page_size;
	struct nsb_account *a;
	unsigned class = MIN_CLASS;
	char *chunk;

	/* More than half a page: a class of its own size (a power of two of
	 * pages), one allocation at a time, kept on its free list once
	 * released.  From the library's arena like the rest: a mapping
	 * wherever the kernel would put it is an address the program may
	 * just have freed, and may take back with MAP_FIXED (memory.c). */
	if (nsb_log2(bytes) > class)
		class = nsb_log2(bytes);
	if (bytes > page / 2 && nsb_log2(page) > class)
		class = nsb_log2(page);
	if (class >= CLASSES) {
		errno = ENOMEM;
		return NULL;
	}
	if (bytes > page / 2) {
		a = free_list[class];
		if (a)
			free_list[class] = a->next;
		else if (!(a = nsb_memory((size_t)1 << class)))
			return NULL;
		memset(a, 0, (size_t)1 << class);
		a->class = class;
		a->bytes = (size_t)1 << class;
		return a;
	}
	if (!free_list[class]) {
		size_t len;

		chunk_pages[class] = chunk_pages[class] ? chunk_pages[class] * 2 : 1;
		if ((size_t)chunk_pages[class] * page > MAX_CHUNK)
			chunk_pages[class] = MAX_CHUNK / page ? (uint32_t)(MAX_CHUNK / page) : 1;
		len = (size_t)chunk_pages[class] * page;
		chunk = nsb_memory(len);
		if (!chunk)
			return NULL;
		for (size_t at = 0; at + ((size_t)1 << class) <= len; at += (size_t)1 << class) {
			struct nsb_account *f = (struct nsb_account *)(void *)(chunk + at);

			f->next = free_list[class];
			free_list[class] = f;
		}
	}
	a = free_list[class];
	free_list[class] = a->next;
	memset(a, 0, (size_t)1 << class);
	a->class = class;
	a->bytes = (size_t)1 << class;
	return a;
}

/* Zeroes an allocation of the smallest class: eight 16-byte stores
 * written out (a memset of a constant 128 bytes is a rep stos, whose
 * start costs more than the stores). */
typedef unsigned long zero16 __attribute__((vector_size(16), may_alias, aligned(8)));
_Static_assert(((size_t)1 << MIN_CLASS) == 8 * sizeof(zero16), "zero_min_class() stores 128 bytes");
static inline void
zero_min_class(struct nsb_account *a)
{
	zero16 *z = (zero16 *)(void *)a;

	z[0] = (zero16){ 0 };
	z[1] = (zero16){ 0 };
	z[2] = (zero16){ 0 };
	z[3] = (zero16){ 0 };
	z[4] = (zero16){ 0 };
	z[5] = (zero16){ 0 };
	z[6] = (zero16){ 0 };
	z[7] = (zero16){ 0 };
}

/* An allocation of at least bytes, zeroed.  The usual one (an account of
 * up to a few hundred pages: the smallest class, with one free) inline,
 * zeroed by eight stores, not a call of memset, and no
 * registers saved for the rest, which allocate_general() does, with the
 * same answer (issue 40). */
static inline struct nsb_account *
allocate(size_t bytes)
{
	struct nsb_account *a = free_list[MIN_CLASS];

	if (__builtin_expect(bytes <= ((size_t)1 << MIN_CLASS) &&
			     bytes <= nsb_config.page_size / 2 && a != NULL, 1)) {
		free_list[MIN_CLASS] = a->next;
		zero_min_class(a);
		a->class = MIN_CLASS;
		a->bytes = (size_t)1 << MIN_CLASS;
		return a;
	}
	return allocate_general(bytes);
}

struct nsb_account *
nsb_account_new(uint64_t off, size_t len, size_t unit)
{
	/* unit is a power of two: a shift, not a division. */
	unsigned shift = nsb_log2(unit);
	uint64_t units = (len + unit - 1) >> shift;
	struct nsb_account *a = allocate(bytes_for(units));

	if (!a)
		return NULL;
	/* allocate() zeroed it all: refs 0, not pending, not unsure, no
	 * bit set (no other thread sees it before its record is in). */
	a->id = next_id++;
	a->off0 = off;
	a->units = units;
	a->shift = shift;
	/* Released at the next unlock unless a record names it by then. */
	a->next = nsb_account_release_list;
	a->pending = true;
	nsb_account_release_list = a;
	return a;
}

/* [signal-safe] The bit of the unit at file offset off, or false if the
 * account does not cover it. */
static bool
index_of(const struct nsb_account *a, uint64_t off, uint64_t *bit)
{
	if (!a || off < a->off0)
		return false;
	*bit = (off - a->off0) >> a->shift;
	return *bit < a->units;
}

struct nsb_account *
nsb_account_copy(struct nsb_account *from, uint64_t off, size_t len)
{
	size_t unit = from ? (size_t)1 << from->shift : nsb_config.page_size;
	struct nsb_account *a = nsb_account_new(off, len, unit);
	uint64_t bit;

	if (!a || !from)
		return a;
	/* Table lock held: no rescue counts into from meanwhile (the
	 * records that name it are being replaced). */
	a->may_write = from->may_write;
	a->write_known = from->write_known;
	atomic_store(&a->log.pid, atomic_exchange(&from->log.pid, 0));
	atomic_store(&a->log.faults, atomic_exchange(&from->log.faults, 0));
	atomic_store(&a->log.pages, atomic_exchange(&from->log.pages, 0));
	atomic_store(&a->log.reported, atomic_exchange(&from->log.reported, 0));
	atomic_store(&a->log.next_ns, atomic_load(&from->log.next_ns));
	atomic_store(&a->log.file, atomic_load(&from->log.file));
	atomic_store(&a->log.meta, atomic_load(&from->log.meta));
	atomic_store(&a->unsure, atomic_load(&from->unsure));
	for (uint64_t i = 0; i < a->units; i++)
		if (nsb_account_test(from, off + (i << a->shift)) && index_of(a, off + (i << a->shift), &bit))
			atomic_fetch_or(&a->bits[bit / WORD_BITS], 1ul << (bit % WORD_BITS));
	return a;
}

uint64_t
nsb_account_id(const struct nsb_account *a)
{
	return a ? a->id : 0;
}

void
nsb_account_ref(struct nsb_account *a, int delta)
{
	if (!a)
		return;
	a->refs += delta;
	if (a->refs == 0 && !a->pending) {
		a->pending = true;
		a->next = nsb_account_release_list;
		nsb_account_release_list = a;
	} else if (a->refs && a->pending && nsb_account_release_list == a) {
		/* Named again, and first on the list (an account just made):
		 * taken off it now, as nsb_account_release_listed would, so
		 * that the unlock has none to walk.  Should it lose its
		 * records again, the lines above put it back. */
		nsb_account_release_list = a->next;
		a->pending = false;
	}
}

/* The table's recount after a vfork child died between a record and its
 * count (ranges.c, nsb_ranges_after_vfork_death): the count of an
 * account that records name is made again from them, from 0. */
void
nsb_account_refs_clear(struct nsb_account *a)
{
	if (a)
		a->refs = 0;
}

/* The accounts on the release list (nsb_account_release_unused): apart,
 * so that the usual unlock, with none, does not pay this loop's set-up. */
void
nsb_account_release_listed(void)
{
	struct nsb_account *a = nsb_account_release_list;

	nsb_account_release_list = NULL;
	while (a) {
		struct nsb_account *next = a->next;

		a->pending = false;
		if (a->refs == 0) {
			if (atomic_load(&a->log.faults))
				nsb_log_unmapped(&a->log);
			a->next = free_list[a->class];
			free_list[a->class] = a;
		}
		a = next;
	}
}


/* [signal-safe] */
bool
nsb_account_test(const struct nsb_account *a, uint64_t off)
{
	uint64_t bit;

	if (!index_of(a, off, &bit))
		return false;
	return (atomic_load(&a->bits[bit / WORD_BITS]) >> (bit % WORD_BITS)) & 1;
}

/* [signal-safe] The log's counts for this mapping (NULL: no account). */
struct nsb_maplog *
nsb_account_log(struct nsb_account *a)
{
	return a ? &a->log : NULL;
}

/* [signal-safe] Sets the unit's bit: true if this call set it (the unit
 * is the caller's to replace), false if it was set already, or if the
 * account does not cover the unit. */
bool
nsb_account_claim(struct nsb_account *a, uint64_t off)
{
	uint64_t bit;
	unsigned long m;

	if (!index_of(a, off, &bit))
		return false;
	m = 1ul << (bit % WORD_BITS);
	return !(atomic_fetch_or(&a->bits[bit / WORD_BITS], m) & m);
}

/* [signal-safe] Claims the units from off on while their bits are clear,
 * at most max of them; returns how many it claimed (the run stops at the
 * first unit replaced, or being replaced, by someone else). */
size_t
nsb_account_claim_run(struct nsb_account *a, uint64_t off, size_t max)
{
	uint64_t bit;
	size_t done = 0;

	if (!index_of(a, off, &bit))
		return 0;
	if (max > a->units - bit)
		max = (size_t)(a->units - bit);
	while (done < max) {
		atomic_ulong *w = &a->bits[bit / WORD_BITS];
		unsigned b = (unsigned)(bit % WORD_BITS);
		unsigned n = WORD_BITS - b;
		unsigned long old = atomic_load(w), want;
		unsigned free_bits;

		if (n > max - done)
			n = (unsigned)(max - done);
		do {
			unsigned long above = old >> b;

			/* The clear bits from b up, at most n. */
			free_bits = above ? (unsigned)__builtin_ctzl(above) : WORD_BITS - b;
			if (free_bits > n)
				free_bits = n;
			if (free_bits == 0)
				return done;
			want = old | ((free_bits == WORD_BITS ? ~0ul : ((1ul << free_bits) - 1)) << b);
		} while (!atomic_compare_exchange_weak(w, &old, want));
		done += free_bits;
		bit += free_bits;
		if (free_bits < n)
			return done;
	}
	return done;
}

/* [signal-safe] Clears the bits of n units from off: a claim given back
 * (nothing was replaced). */
void
nsb_account_unclaim(struct nsb_account *a, uint64_t off, size_t n)
{
	uint64_t bit;

	if (!index_of(a, off, &bit))
		return;
	for (size_t i = 0; i < n && bit < a->units; i++, bit++)
		atomic_fetch_and(&a->bits[bit / WORD_BITS], ~(1ul << (bit % WORD_BITS)));
}

/* The units of [off, off + len) are the file's (or fresh memory) again. */
void
nsb_account_clear(struct nsb_account *a, uint64_t off, size_t len)
{
	if (a)
		nsb_account_unclaim(a, off, (size_t)((len + ((size_t)1 << a->shift) - 1) >> a->shift));
}

/* [signal-safe] A unit was replaced that may be inside the file's size
 * (NOSIGBUS_ERRORS=zero, or a rescue without the size): the file covering
 * it says nothing about whether it came back, and what the program wrote
 * there must not be dropped (refresh.c keeps such a mapping's units). */
void
nsb_account_set_unsure(struct nsb_account *a)
{
	if (a)
		atomic_store(&a->unsure, true);
}

bool
nsb_account_unsure(const struct nsb_account *a)
{
	return a && atomic_load(&a->unsure);
}

/* Whether a shared mapping of the account's may become writable: the
 * kernel's VM_MAYWRITE, from the descriptor it was mapped from.  A file
 * mapped again over replaced units (refresh.c) must have the same, or a
 * file opened read-only would become writable through mprotect. */
void
nsb_account_set_may_write(struct nsb_account *a, bool may)
{
	if (a) {
		a->may_write = may;
		a->write_known = true;
	}
}

bool
nsb_account_may_write(const struct nsb_account *a)
{
	return a && a->may_write;
}

/* Whether the kernel would refuse to make a shared mapping of the
 * account's writable (EACCES from mprotect): known not to have
 * VM_MAYWRITE.  False where not known (a record nosigbus_protect made). */
bool
nsb_account_no_write(const struct nsb_account *a)
{
	return a && a->write_known && !a->may_write;
}

/* to takes from's may-write, known or not (a mapping the kernel makes
 * anew of the same VMA: mremap, remap_file_pages). */
void
nsb_account_copy_write(struct nsb_account *to, const struct nsb_account *from)
{
	if (to) {
		to->may_write = from && from->may_write;
		to->write_known = from && from->write_known;
	}
}

/* How many units of [off, off + len) are replaced (tests, statistics). */
size_t
nsb_account_count(const struct nsb_account *a, uint64_t off, size_t len)
{
	size_t n = 0;

	if (!a)
		return 0;
	for (uint64_t o = off; o < off + len; o += (uint64_t)1 << a->shift)
		n += nsb_account_test(a, o);
	return n;
}
