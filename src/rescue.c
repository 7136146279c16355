/* SPDX-License-Identifier: MIT */
/*
 * rescue.c - the SIGBUS handler.
 *
 * Everything in this file runs in signal context.  It finds the record,
 * decides whether the fault is one to rescue (a page at or past the end
 * of its file, SPEC §5), maps zero-filled private memory over the
 * faulting page (or more, by NOSIGBUS_FILL), and returns so that the
 * instruction runs again.  No locks, no malloc, no stdio; errno is
 * preserved.  What is not rescued goes to nsb_disp_chain(), which behaves
 * as if the library were absent.
 *
 * Three outcomes besides a rescue never wait for anyone: "not ours" (pass
 * the signal on), and "fault again" - a call is changing the records
 * there (flux), another thread is rescuing the same page (claim), or the
 * page no longer faults (someone rescued it, or the file grew back).
 */
#include <errno.h>
#include <sys/mman.h>
#include <ucontext.h>

#include "nsb.h"

enum verdict { NOT_OURS, RESCUED, AGAIN };

/* [signal-safe] Replaces [start, end) with zero pages at the recorded protection. */
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
	return true;
}

/*
 * [signal-safe] The first page at or after start, below end, that is in
 * memory: a page the program touched since an earlier fill replaced it
 * (it may have written it), or a page of the file that exists again.  A
 * fill stops there.  Pages that are not in memory hold nothing a fill
 * could lose: past the end of the file, or replaced and never touched.
 */
static uintptr_t
first_present(uintptr_t start, uintptr_t end)
{
	size_t ps = nsb_config.page_size;
	unsigned char vec[256];

	for (uintptr_t a = start; a < end; a += sizeof(vec) * ps) {
		size_t n = (end - a) / ps;

		if (n > sizeof(vec))
			n = sizeof(vec);
		if (mincore((void *)a, n * ps, vec) < 0)
			return a;	/* cannot tell: go no further */
		for (size_t i = 0; i < n; i++)
			if (vec[i] & 1)
				return a + i * ps;
	}
	return end;
}

/*
 * Threads that fault on the same page at once must not each replace it:
 * the second replacement would throw away what the first thread wrote.
 * A rescue first claims its page (with range and auto fill: its record) in
 * this small table; whoever finds it claimed returns and lets the
 * instruction fault again, which it will not once the owner is done.
 * Nobody waits.  A fork child has none of the owners: it starts empty.
 */
#define CLAIMS 64

#define DONE_PAGES 256
#define DONE_FILLS 64
#define FLOORS 128
struct done_fill {
	atomic_uint seq;	/* odd while being written */
	uintptr_t start, end;
};

/* Made when the handler is installed (a process that never installs it
 * pays nothing for it at start-up), from memory.c. */
/*
 * Range fills make what they replaced one tail of the record [floor, end):
 * each goes to the end, or stops where an earlier one began.  So a record
 * needs only its floor to tell a stale fault (at or above it) from a new
 * one, and where a new fill must stop.  Kept by record (its start and
 * generation) in a small hash; a record that lost its entry falls back on
 * the rings above.
 */
struct floor {
	atomic_uintptr_t key;	/* record start | gen, 0: free */
	atomic_uintptr_t floor;
};

struct rescue_state {
	atomic_uintptr_t claims[CLAIMS];
	atomic_uintptr_t done_page[DONE_PAGES];
	struct done_fill done_fills[DONE_FILLS];
	struct floor floors[FLOORS];
	atomic_uint done_fills_next;
};
static struct rescue_state *state;

int
nsb_rescue_prepare(void)
{
	if (!state)
		state = nsb_memory(sizeof(*state));
	return state ? 0 : -1;
}

/* [signal-safe] The slot claimed for key, or -1 if another rescue holds
 * key (or every slot is busy). */
static int
claim(uintptr_t key)
{
	unsigned first = (unsigned)((key >> 12) * 2654435761u) % CLAIMS;
	int mine = -1;

	for (unsigned i = 0; i < CLAIMS; i++) {
		unsigned k = (first + i) % CLAIMS;
		uintptr_t seen = atomic_load(&state->claims[k]);

		if (seen == 0 && mine < 0 &&
		    atomic_compare_exchange_strong(&state->claims[k], &seen, key)) {
			mine = (int)k;
			continue;
		}
		/* Checked after claiming too: of two claims, both back off. */
		if (seen == key && (int)k != mine) {
			if (mine >= 0)
				atomic_store(&state->claims[mine], 0);
			return -1;
		}
	}
	return mine;
}

/* [signal-safe] */
static void
release(int slot)
{
	atomic_store(&state->claims[slot], 0);
}

/*
 * Rescues just done, so that a thread whose fault raced with another
 * thread's rescue of the same page does not replace it a second time
 * (throwing away what the other thread has written there since): its
 * fault happened before that rescue, its handler runs after.  Page fills
 * by page, in a small hash; range and auto fills in a small ring.  Both
 * only need to remember the last few microseconds' rescues; a call that
 * removes records forgets what was rescued there (nsb_rescue_forget).
 */

static unsigned
page_slot(uintptr_t page)
{
	return (unsigned)((page >> 12) * 2654435761u) % DONE_PAGES;
}

static uintptr_t
record_key(const struct nsb_range *r)
{
	return r->start | r->gen;	/* start is page aligned, gen < 2048 */
}

/* [signal-safe] The floor of r's range fills, or r->end if none known. */
static uintptr_t
floor_of(const struct nsb_range *r)
{
	uintptr_t key = record_key(r);
	struct floor *f = &state->floors[(key >> 12) % FLOORS];
	uintptr_t fl = atomic_load(&f->floor);

	/* Read the floor, then check it is still this record's. */
	return atomic_load(&f->key) == key && fl ? fl : r->end;
}

/* [signal-safe] A range fill replaced [start, end) of r: the tail grows
 * down to start if it joins it (claims serialise fills of a record). */
static void
lower_floor(const struct nsb_range *r, uintptr_t start, uintptr_t end)
{
	uintptr_t key = record_key(r), old = floor_of(r);
	struct floor *f = &state->floors[(key >> 12) % FLOORS];

	if (end < old)
		return;	/* stopped below something else: not one tail */
	atomic_store(&f->key, 0);
	atomic_store(&f->floor, start);
	atomic_store(&f->key, key);
}

/* [signal-safe] */
static void
remember(uintptr_t start, uintptr_t end, size_t unit)
{
	struct done_fill *f;
	unsigned s;

	if (end - start == unit) {
		atomic_store(&state->done_page[page_slot(start)], start);
		return;
	}
	f = &state->done_fills[atomic_fetch_add(&state->done_fills_next, 1) % DONE_FILLS];
	s = atomic_load(&f->seq);
	if ((s & 1) || !atomic_compare_exchange_strong(&f->seq, &s, s + 1))
		return;	/* another rescue is writing this one */
	f->start = start;
	f->end = end;
	atomic_store(&f->seq, s + 2);
}

/* The table lock is held and no rescue is running in [start, end). */
void
nsb_rescue_forget(uintptr_t start, uintptr_t end)
{
	if (!state)
		return;
	for (int i = 0; i < FLOORS; i++) {
		uintptr_t k = atomic_load(&state->floors[i].key);
		uintptr_t s = k & ~(uintptr_t)0xfff;

		if (k && s >= start && s < end)
			atomic_compare_exchange_strong(&state->floors[i].key, &k, 0);
	}
	for (int i = 0; i < DONE_PAGES; i++) {
		uintptr_t p = atomic_load(&state->done_page[i]);

		if (p >= start && p < end)
			atomic_compare_exchange_strong(&state->done_page[i], &p, 0);
	}
	for (int i = 0; i < DONE_FILLS; i++) {
		struct done_fill *f = &state->done_fills[i];
		unsigned s = atomic_load(&f->seq);

		if (!(s & 1) && f->start < end && f->end > start &&
		    atomic_compare_exchange_strong(&f->seq, &s, s + 1)) {
			f->start = f->end = 0;
			atomic_store(&f->seq, s + 2);
		}
	}
}

/* [signal-safe] Was page replaced by a recent rescue?  Also lowers
 * *limit to the start of any such fill above page. */
static bool
rescued(uintptr_t page, uintptr_t *limit)
{
	bool hit = atomic_load(&state->done_page[page_slot(page)]) == page;

	for (int i = 0; i < DONE_FILLS; i++) {
		struct done_fill *f = &state->done_fills[i], c;
		unsigned s = atomic_load(&f->seq);

		if (s == 0 || (s & 1))
			continue;
		c.start = f->start;
		c.end = f->end;
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load(&f->seq) != s)
			continue;
		if (c.start <= page && page < c.end)
			hit = true;
		else if (c.start > page && c.start < *limit)
			*limit = c.start;
	}
	return hit;
}

void
nsb_rescue_after_fork_child(void)
{
	for (int i = 0; state && i < CLAIMS; i++)
		atomic_store(&state->claims[i], 0);
}

/* The page this thread was last sent back to fault on again, and which
 * mapping it was in: if it comes straight back, the reason to wait is gone
 * (the file did not grow back; the other rescue was of another mapping)
 * and the fault is decided on its own.  A new mapping there since (say,
 * after the same threads meet at the same address again) is a new start. */
static __thread uintptr_t again_page __attribute__((tls_model("initial-exec")));
/* The table's version when this thread last looked: a mapping replaced
 * since (its fault's signal was on its way meanwhile) may be new memory
 * there, which mincore() tells (a page in memory does not fault). */
static __thread unsigned long seen_version __attribute__((tls_model("initial-exec")));
static __thread uint16_t again_gen __attribute__((tls_model("initial-exec")));
/* ... and the table's version then: a record's generation has only 11
 * bits, and 2048 new records (2048 versions at least) later the same
 * address and generation may be another mapping, not a fault come back. */
static __thread unsigned long again_version __attribute__((tls_model("initial-exec")));

/* NOSIGBUS_FILL=auto: where this thread's last rescue in a record ended,
 * and how many pages it replaced; a fault right there doubles it. */
static __thread uintptr_t auto_record __attribute__((tls_model("initial-exec")));
static __thread uint16_t auto_gen __attribute__((tls_model("initial-exec")));
static __thread uintptr_t auto_next __attribute__((tls_model("initial-exec")));
static __thread size_t auto_pages __attribute__((tls_model("initial-exec")));

/* [signal-safe] Was the fault a write?  1 yes, 0 no, -1 cannot tell. */
static int
fault_is_write(const void *ucv)
{
	const ucontext_t *uc = ucv;

	if (!uc)
		return -1;
#if defined(__x86_64__) || defined(__i386__)
	/* The page-fault error code: bit 1 is a write. */
	return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#elif defined(__aarch64__)
	{
		/* The ESR record of the signal frame: a data abort's WnR bit. */
		const unsigned char *p = (const unsigned char *)uc->uc_mcontext.__reserved;
		size_t size = sizeof(uc->uc_mcontext.__reserved), off = 0;

		while (off + 16 <= size) {
			uint32_t magic = *(const uint32_t *)(p + off);
			uint32_t len = *(const uint32_t *)(p + off + 4);

			if (!magic || len < 8)
				break;
			if (magic == 0x45535201) {	/* ESR_MAGIC */
				uint64_t esr = *(const uint64_t *)(p + off + 8);
				unsigned ec = (unsigned)(esr >> 26) & 0x3f;

				if (ec == 0x24 || ec == 0x25)
					return (int)((esr >> 6) & 1);
				return -1;
			}
			off += len;
		}
		return -1;
	}
#else
	return -1;
#endif
}

enum check { PAST_EOF, INSIDE, UNKNOWN };

struct fate {
	enum check check;	/* what is known of the page */
	bool rescue;		/* replace it */
	bool extend;		/* range and auto fill may go on above it */
};

/*
 * [signal-safe] Only a page at or past the end of its file is rescued; a
 * fault inside the size is an error the file system reported (a write it
 * refused, a read that failed), and hiding it would lose data silently.
 * Where nothing can be lost, no size is needed: anonymous memory (the
 * rescued page is the memory), and a memory-backed file read, or written
 * privately, inside its size (a hole on a full tmpfs: its contents are
 * zeros), or written where room cannot run out (a memfd: no size limit).
 * What cannot be checked is rescued, and counted as unverified.
 *
 * A fill goes on above the page only over pages past the end of the file
 * (every page after one past the end is past it too): never over the
 * file's data, which a rescue inside the size (a hole; NOSIGBUS_ERRORS=
 * zero) does not make zeros of.  So range and auto fill always learn the
 * size; page fill only when the page could be an error.
 */
static struct fate
decide(const struct nsb_range *r, uintptr_t page, size_t unit, const void *uc)
{
	struct fate f = { PAST_EOF, true, true };
	bool harmless, wants_size;
	uint64_t size, off;

	/* Nothing can refuse a page of a memfd: only its end faults. */
	if ((r->meta & NSB_META_ANON) || (r->meta & NSB_META_ROOMY))
		return f;
	harmless = nsb_config.errors == NSB_ERRORS_ZERO ||
		   ((r->meta & NSB_META_MEMFS) &&
		    (!(r->meta & NSB_META_SHARED) || (r->meta & NSB_META_ROOMY) ||
		     fault_is_write(uc) == 0));
	wants_size = !harmless || nsb_fill_of(r->meta) != NSB_FILL_PAGE;
	if (!wants_size)
		return f;
	if (!nsb_files_size(r->file, r->start, r->end, page, &size)) {
		f.check = UNKNOWN;
		return f;
	}
	off = r->off + (page - r->start);
	/* The kernel maps the page that holds the last byte. */
	if (off >= ((size + unit - 1) & ~(uint64_t)(unit - 1)))
		return f;
	f.check = INSIDE;
	f.rescue = harmless;
	/* Inside the size, only over holes of hugetlbfs: its pages never
	 * leave memory, so a fill stops at the first one with data.  (A
	 * tmpfs page may be in swap, where it does not show.) */
	f.extend = harmless && unit > nsb_config.page_size && (r->meta & NSB_META_MEMFS);
	return f;
}

/* [signal-safe] How far a rescue from start replaces, below limit. */
static uintptr_t
fill_end(uintptr_t start, size_t unit, const struct nsb_range *r, uintptr_t limit)
{
	uintptr_t end = limit < r->end ? limit : r->end;

	switch (nsb_fill_of(r->meta)) {
	case NSB_FILL_PAGE:
		return start + unit;
	case NSB_FILL_AUTO: {
		/* Like readahead: a fault right after the last fill in the
		 * same record doubles the window, any other starts at one. */
		bool follows = auto_record == r->start && auto_gen == r->gen && auto_next == start;
		size_t pages = follows ? auto_pages * 2 : 1;

		if (pages < (end - start) / unit)
			end = start + pages * unit;
		break;
	}
	case NSB_FILL_RANGE:
		break;
	}
	if (end > start + unit)
		end = start + unit + ((first_present(start + unit, end) - start - unit) & ~(uintptr_t)(unit - 1));
	return end;
}

/* [signal-safe] */
static enum verdict
rescue(uintptr_t addr, const void *uc)
{
	struct nsb_range r;
	uintptr_t start, end, limit;
	unsigned long version;
	struct fate fate;
	enum nsb_fill fill;
	size_t unit;
	bool ok, again;
	int ticket, slot;

	switch (nsb_ranges_enter(addr, &r, &ticket)) {
	case NSB_LOOKUP_NONE:
		return NOT_OURS;
	case NSB_LOOKUP_BUSY:
		return AGAIN;	/* a call is changing the records here */
	case NSB_LOOKUP_FOUND:
		break;
	}
	fill = nsb_fill_of(r.meta);
	/* A huge page cannot be split: replace the whole of it. */
	unit = (size_t)1 << NSB_META_SHIFT(r.meta);
	start = addr & ~(uintptr_t)(unit - 1);
	if (start < r.start)
		start = r.start;
	again = again_page == start && again_gen == r.gen &&
		nsb_ranges_version() - again_version < 2048;

	slot = claim(fill == NSB_FILL_PAGE ? start : r.start);
	if (slot < 0) {
		nsb_ranges_leave(ticket);
		return AGAIN;	/* the owner will be done */
	}
	/*
	 * Faults that are not (or no longer) ours to rescue: this one's
	 * signal may have been on its way while another thread rescued the
	 * page and wrote to it (the rings say so), or while a call replaced
	 * the mapping there (anonymous memory faults with SIGBUS only on huge
	 * pages; a page in memory does not fault, and an untouched one holds
	 * nothing).  No call since this thread last looked: no new mapping.
	 */
	limit = r.end;
	if (fill == NSB_FILL_RANGE) {
		limit = floor_of(&r);
		/* At or above the floor: replaced by another thread's fill
		 * while this fault's signal was on its way, so fault again.
		 * If it comes straight back, the floor is wrong for this
		 * mapping: ignore it (the fill stops at pages in memory). */
		if (start >= limit) {
			if (!again)
				goto fault_again;
			limit = r.end;
		}
	}
	version = nsb_ranges_version();
	if (!again && (rescued(start, &limit) ||
		       ((r.meta & NSB_META_ANON) && unit == nsb_config.page_size) ||
		       (version != seen_version &&
			first_present(start, start + nsb_config.page_size) == start)))
		goto fault_again;
	seen_version = version;
	fate = decide(&r, start, unit, uc);
	if (!fate.rescue) {
		/* Unless it grew back meanwhile, an error: pass it on. */
		if (!again)
			goto fault_again;
		release(slot);
		nsb_ranges_leave(ticket);
		again_page = 0;
		return NOT_OURS;
	}
	again_page = 0;
	end = fate.extend ? fill_end(start, unit, &r, limit) : start + unit;
	ok = replace(start, end, &r);
	/* Out of VMAs (vm.max_map_count): one mapping for the rest of the
	 * record needs none, and merges what earlier rescues split (SPEC §5;
	 * what the program wrote into those earlier pages is lost then).  Not
	 * over the file's own data. */
	if (!ok && errno == ENOMEM && end < r.end && fate.extend) {
		end = r.end;
		ok = replace(start, end, &r);
	}
	if (ok) {
		remember(start, end, unit);
		if (fill == NSB_FILL_RANGE)
			lower_floor(&r, start, end);
	}
	release(slot);
	nsb_ranges_leave(ticket);

	if (!ok) {
		atomic_fetch_add(&nsb_counters.failures, 1);
		nsb_log_failure(addr, errno);
		return NOT_OURS;
	}
	auto_record = r.start;
	auto_gen = r.gen;
	auto_next = end;
	auto_pages = (end - start) / unit;
	atomic_fetch_add(&nsb_counters.rescues, 1);
	atomic_fetch_add(&nsb_counters.pages, (end - start) / nsb_config.page_size);
	if (fate.check == UNKNOWN)
		atomic_fetch_add(&nsb_counters.unverified, 1);
	nsb_log_rescue(addr, &r, (end - start) / nsb_config.page_size, fate.check != UNKNOWN);
	return RESCUED;

fault_again:
	again_page = start;
	again_gen = r.gen;
	again_version = nsb_ranges_version();
	release(slot);
	nsb_ranges_leave(ticket);
	return AGAIN;
}

/* [signal-safe] The SIGBUS handler the library installs. */
void
nsb_rescue_handler(int sig, siginfo_t *si, void *uc)
{
	int saved_errno = errno;

	/* Only a fault the kernel raised counts: si_code BUS_ADRERR cannot
	 * be sent by another process (the kernel refuses si_code >= 0). */
	if (si && si->si_code == BUS_ADRERR && rescue((uintptr_t)si->si_addr, uc) != NOT_OURS) {
		errno = saved_errno;
		return;
	}
	errno = saved_errno;
	nsb_disp_chain(sig, si, uc);
}
