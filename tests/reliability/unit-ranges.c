/* SPDX-License-Identifier: MIT */
/*
 * unit-ranges - the table of protected mappings through its internal API
 * (src/nsb.h), linked directly with the library's objects, so that it runs
 * under ASan+UBSan and valgrind (issue 7, item 3).
 *
 *  random   random inserts, cuts (some with the pieces put back after),
 *           restores and protection changes on a window of fake addresses,
 *           with the table's chunks as they are and again with chunks of
 *           4 records, checked after each against a page-by-page
 *           reference model:
 *           the record count, nsb_ranges_enter() for every page (the
 *           signal handler's lookup), nsb_ranges_overlap() and
 *           nsb_ranges_collect() for random spans.
 *  alloc    nsb_ranges_fail_next_alloc(): the insert that needs the table
 *           to grow fails with ENOMEM and changes nothing; the next one
 *           grows it.
 *  mmap     the same failure through the interposed mmap: a protected
 *           mmap fails with ENOMEM and leaves nothing mapped and nothing
 *           recorded; a MAP_FIXED one over a protected mapping leaves the
 *           old mapping in place and still protected (SPEC §4).
 *  tight    random operations as in random, with chunks of 4 records and
 *           none of 128, where the table gets no memory at all (as under
 *           a tight RLIMIT_AS): a cut or a change never fails; its
 *           records come from free slots of any chunk (records shifted
 *           towards them), else the record it splits keeps one piece and
 *           the rest loses its protection, only then, counted as lost;
 *           an insert fails with ENOMEM or is made.  Checked after each
 *           against the model, less the pages lost.
 *  onechunk the short ways of a table of one chunk (chunks of 4 records)
 *           with no memory for the table: a new record or one put back
 *           (resync, mremap) that fits the chunk's last free slot is
 *           made, errno untouched; one more, at a full chunk, fails with
 *           ENOMEM and changes nothing; records at the chunk's ends cut
 *           and put back, their protection changed (set_prot_found); a
 *           quick check's peek used under the lock only if the table did
 *           not change since.  No protection lost.
 *  short    random and tight again, protection changes and cuts made
 *           the way mprotect and munmap make them: the quick check's
 *           peek before the lock, nsb_ranges_one() under it (the peek's
 *           place trusted only at an unchanged version: every op between
 *           changes it; a quarter of them a cut elsewhere between the
 *           peek and the lock), set_prot_found() of that one record or
 *           of each piece listed, cut_found().
 *  config   nsb_config_parse() with every word, near misses and random
 *           bytes.
 *  gap      a call that cuts records to put them back (resync after a
 *           failed mprotect, MAP_FIXED over a record) leaves none for a
 *           moment, its span in flux; another thread's MAP_FIXED of
 *           unprotected memory over that span then must not take the
 *           lock-free "nothing recorded" and go straight to the kernel
 *           (the records came back over its new mapping: a stale record,
 *           whose rescues are of memory nobody protected).  The window is
 *           held open here, as resync has it, with the table's own calls.
 *
 * Usage: unit-ranges [random|alloc|mmap|config|gap|tight|onechunk|short]... [--seed N] [--ops N]
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>

#include "nsb.h"
#include "nsbtest.h"

#define U	256		/* pages in the window of fake addresses */

static size_t ps;
static uintptr_t base;		/* the window: reserved, so nothing real is ever there */
static uint64_t rng;

static uint64_t
rnd64(void)
{
	return nsbt_random(&rng);
}

static int
rnd(int n)
{
	return (int)(rnd64() % (uint64_t)n);
}

/* ---- the reference model ------------------------------------------------- */

/* Page i belongs to record id[i] (0: none); a record is a maximal run of
 * equal ids, and every split gives the parts fresh ids. */
static unsigned id[U];
static uint32_t meta_of[U];
static unsigned next_id = 1;

static uintptr_t
addr_of(int page)
{
	return base + (uintptr_t)page * ps;
}

static size_t
model_count(void)
{
	size_t n = 0;

	for (int i = 0; i < U; i++)
		n += id[i] && (i == 0 || id[i - 1] != id[i]);
	return n;
}

/* Gives the pages of [s, e) that belong to one record a fresh id each. */
static void
model_split(int s, int e)
{
	unsigned last_old = 0, last_new = 0;

	for (int i = s; i < e; i++) {
		if (!id[i])
			continue;
		if (id[i] != last_old) {
			last_old = id[i];
			last_new = next_id++;
		}
		id[i] = last_new;
	}
}

static void
model_cut(int s, int e)
{
	/* What is left on either side is a record of its own. */
	if (s > 0 && id[s - 1] && id[s - 1] == id[s]) {
		int j = s - 1;

		while (j > 0 && id[j - 1] == id[s])
			j--;
		model_split(j, s);
	}
	for (int i = s; i < e; i++)
		id[i] = 0;
}

static void
model_insert(int s, int e, uint32_t meta)
{
	unsigned n = next_id++;

	for (int i = s; i < e; i++) {
		id[i] = n;
		meta_of[i] = meta;
	}
}

static void
model_set_prot(int s, int e, int prot)
{
	/* Split at s and e, then the inside changes. */
	if (s > 0 && id[s - 1] && id[s - 1] == id[s]) {
		int j = s - 1;

		while (j > 0 && id[j - 1] == id[s])
			j--;
		model_split(j, s);
	}
	if (e < U && id[e] && id[e - 1] == id[e]) {
		int j = e;

		while (j < U && id[j] == id[e - 1])
			j++;
		model_split(e, j);
	}
	model_split(s, e);
	for (int i = s; i < e; i++)
		if (id[i])
			meta_of[i] = (meta_of[i] & ~NSB_META_PROT) | ((uint32_t)prot & NSB_META_PROT);
}

/* ---- checks ------------------------------------------------------------- */

static void
check_table(const char *after)
{
	size_t n = nsb_ranges_count();

	NSBT_CHECK(n == model_count(), "after %s: %zu records, the model has %zu", after, n, model_count());
	for (int i = 0; i < U; i++) {
		struct nsb_range r;
		int ticket, s = i, e = i + 1;
		bool found = nsb_ranges_enter(addr_of(i) + (size_t)rnd((int)ps), &r, &ticket) ==
			     NSB_LOOKUP_FOUND;

		if (!id[i]) {
			NSBT_CHECK(!found, "after %s: page %d is not recorded, but enter() found [%d, %d)",
				   after, i, (int)((r.start - base) / ps), (int)((r.end - base) / ps));
			continue;
		}
		NSBT_CHECK(found, "after %s: page %d is recorded, enter() found nothing", after, i);
		nsb_ranges_leave(ticket);
		while (s > 0 && id[s - 1] == id[i])
			s--;
		while (e < U && id[e] == id[i])
			e++;
		NSBT_CHECK(r.start == addr_of(s) && r.end == addr_of(e) && r.meta == meta_of[i],
			   "after %s: page %d: enter() gives [%d, %d) meta 0x%x, the model [%d, %d) meta 0x%x",
			   after, i, (int)((r.start - base) / ps), (int)((r.end - base) / ps), r.meta,
			   s, e, meta_of[i]);
	}
}

static void
check_spans(const char *after)
{
	for (int k = 0; k < 8; k++) {
		int s = rnd(U), e = s + 1 + rnd(U - s);
		struct nsb_saved got;
		bool want = false;
		size_t j = 0;

		for (int i = s; i < e; i++)
			want |= id[i] != 0;
		NSBT_CHECK(nsb_ranges_overlap(addr_of(s), addr_of(e)) == want,
			   "after %s: overlap([%d, %d)) is %d", after, s, e, !want);
		nsb_saved_init(&got);
		nsb_ranges_lock();
		NSBT_CHECK(nsb_ranges_collect(addr_of(s), addr_of(e), &got) == 0, "collect");
		nsb_ranges_unlock();
		for (int i = s; i < e; i++) {
			int pe = i + 1;

			if (!id[i])
				continue;
			while (pe < e && id[pe] == id[i])
				pe++;
			NSBT_CHECK(j < got.n && got.r[j].start == addr_of(i) && got.r[j].end == addr_of(pe),
				   "after %s: collect([%d, %d)) piece %zu is not [%d, %d)", after, s, e, j, i, pe);
			j++;
			i = pe - 1;
		}
		NSBT_CHECK(j == got.n, "after %s: collect([%d, %d)) gave %zu pieces, the model %zu",
			   after, s, e, got.n, j);
		nsb_saved_free(&got);
	}
}

/* Records [s, e) with meta, as the mapping calls do. */
static int
insert(uintptr_t s, uintptr_t e, uint32_t meta)
{
	struct nsb_range r = { .start = s, .end = e, .meta = meta };

	return nsb_ranges_insert(&r);
}

/* ---- the calls' short ways ------------------------------------------------ */

/* With short_ways, protection changes and cuts go the way mprotect and
 * munmap make them: the quick check's peek before the lock, then under
 * it nsb_ranges_one() (the peek's place trusted only if the table did
 * not change since), set_prot_found() of that one record or of each
 * piece nsb_ranges_collect() lists, cut_found(). */
static bool short_ways;
static struct nsb_peek op_peek;

static void
peek_op(int s, int e)
{
	int q;

	if (!short_ways)
		return;
	(void)nsb_ranges_overlap_peek(addr_of(s), addr_of(e), &op_peek);
	if (rnd(4))
		return;
	/* Another thread's cut between the peek and the lock: the peek
	 * stale (a record gone, split, or places moved). */
	q = rnd(U);
	nsb_ranges_lock();
	NSBT_CHECK(nsb_ranges_cut(addr_of(q), addr_of(q + 1)) == 0, "a cut between peek and lock");
	nsb_ranges_unlock();
	model_cut(q, q + 1);
}

/* Table lock held. */
static int
set_prot_op(int s, int e, int prot)
{
	struct nsb_saved recs;
	struct nsb_range one;
	int ret = 0;

	if (!short_ways)
		return nsb_ranges_set_prot(addr_of(s), addr_of(e), prot, -1);
	if (nsb_ranges_one(addr_of(s), addr_of(e), &one, &op_peek))
		return nsb_ranges_set_prot_found(one.start, one.end, prot, -1);
	nsb_saved_init(&recs);
	if (nsb_ranges_collect(addr_of(s), addr_of(e), &recs) < 0)
		ret = -1;
	for (size_t i = 0; ret == 0 && i < recs.n; i++)
		ret = nsb_ranges_set_prot_found(recs.r[i].start, recs.r[i].end, prot, -1);
	nsb_saved_free(&recs);
	return ret;
}

/* Table lock held. */
static int
cut_op(int s, int e)
{
	struct nsb_range one;

	if (short_ways)
		(void)nsb_ranges_one(addr_of(s), addr_of(e), &one, &op_peek);
	return nsb_ranges_cut(addr_of(s), addr_of(e));
}

/* ---- random -------------------------------------------------------------- */

static void
test_random(int ops)
{
	char what[128];
	int inserts = 0, cuts = 0, restores = 0, prots = 0;

	for (int k = 0; k < ops; k++) {
		int s = rnd(U), e = s + 1 + rnd(U - s < 24 ? U - s : 24), r = rnd(100);
		uint32_t meta = (uint32_t)rnd(8) | (rnd(2) ? NSB_META_SHARED : 0) |
				NSB_META_MKSHIFT(12) | NSB_META_MKPKEY(-1);
		struct nsb_saved saved;

		nsb_saved_init(&saved);
		peek_op(s, e);
		nsb_ranges_lock();
		if (r < 45) {
			/* As the mapping calls do: cut what is there, then record. */
			snprintf(what, sizeof(what), "op %d: insert [%d, %d) meta 0x%x", k, s, e, meta);
			NSBT_CHECK(nsb_ranges_cut(addr_of(s), addr_of(e)) == 0, "%s: cut", what);
			NSBT_CHECK(insert(addr_of(s), addr_of(e), meta) == 0, "%s: %s", what,
				   strerror(errno));
			model_cut(s, e);
			model_insert(s, e, meta);
			inserts++;
		} else if (r < 70) {
			snprintf(what, sizeof(what), "op %d: cut [%d, %d)", k, s, e);
			NSBT_CHECK(nsb_ranges_collect(addr_of(s), addr_of(e), &saved) == 0, "%s: collect", what);
			NSBT_CHECK(cut_op(s, e) == 0, "%s", what);
			model_cut(s, e);
			cuts++;
			if (rnd(3) == 0) {
				/* A failed system call puts the pieces back. */
				for (size_t i = 0; i < saved.n; i++)
					NSBT_CHECK(nsb_ranges_insert(&saved.r[i]) == 0, "%s: restore", what);
				for (size_t i = 0; i < saved.n; i++) {
					int ps_ = (int)((saved.r[i].start - base) / ps);
					int pe_ = (int)((saved.r[i].end - base) / ps);

					model_insert(ps_, pe_, saved.r[i].meta);
				}
				strcat(what, " and restore");
				restores++;
			}
		} else {
			int prot = rnd(8);

			snprintf(what, sizeof(what), "op %d: set_prot [%d, %d) %d", k, s, e, prot);
			NSBT_CHECK(set_prot_op(s, e, prot) == 0, "%s", what);
			model_set_prot(s, e, prot);
			prots++;
		}
		nsb_ranges_unlock();
		nsb_saved_free(&saved);
		check_table(what);
		check_spans(what);
	}
	nsb_ranges_lock();
	NSBT_CHECK(nsb_ranges_cut(base, addr_of(U)) == 0, "cut all");
	nsb_ranges_unlock();
	model_cut(0, U);
	check_table("cutting everything");
	NSBT_CHECK(nsb_ranges_count() == 0, "records left");
	printf("ok: unit-ranges: random: %d operations (%d inserts, %d cuts, %d restores, %d protection "
	       "changes), checked against the model after each\n", ops, inserts, cuts, restores, prots);
}

/* Memory for the table again, every record cut (model too), chunks of
 * the library's own size: what the tight modes leave behind. */
static void
restore_table(void)
{
	nsb_ranges_test_no_alloc(false);
	nsb_ranges_lock();
	NSBT_CHECK(nsb_ranges_cut(base, addr_of(U)) == 0, "cut all");
	nsb_ranges_unlock();
	model_cut(0, U);
	check_table("cutting everything");
	nsb_ranges_test_chunk(0);
}

/* ---- tight --------------------------------------------------------------- */

/* The model less what the table lost: a page the model records and the
 * table does not is allowed only if the op counted a loss; it leaves the
 * model.  (A page the table records where the model has none, or with
 * other bounds or meta, check_table() finds.) */
static void
drop_lost(const char *after, uint64_t lost_before)
{
	bool lost = atomic_load(&nsb_counters.lost) > lost_before;

	for (int i = 0; i < U; i++) {
		struct nsb_range r;
		int ticket;

		if (!id[i])
			continue;
		if (nsb_ranges_enter(addr_of(i), &r, &ticket) == NSB_LOOKUP_FOUND) {
			nsb_ranges_leave(ticket);
			continue;
		}
		NSBT_CHECK(lost, "after %s: page %d is not recorded any more, and no loss was counted",
			   after, i);
		id[i] = 0;
	}
}

/* A protection other than the pages' at s and e - 1: a change that a
 * split at either end must make (one that changes nothing there is no
 * split for the tight table, which the model does not know). */
static int
other_prot(int s, int e)
{
	int prot;

	do
		prot = rnd(8);
	while ((id[s] && prot == (int)(meta_of[s] & NSB_META_PROT)) ||
	       (id[e - 1] && prot == (int)(meta_of[e - 1] & NSB_META_PROT)));
	return prot;
}

static void
test_tight(int ops)
{
	char what[128];
	int inserts = 0, refused = 0, cuts = 0, prots = 0;
	uint64_t lost_at_start = atomic_load(&nsb_counters.lost);

	nsb_ranges_test_chunk(4);
	/* Records of two pages, in order (their chunks full), with memory:
	 * then none.  The window could hold twice as many records as the
	 * table then can, and the ops (mostly short changes, which split)
	 * drive it there. */
	for (int k = 0; k < U; k += 2) {
		uint32_t m = (uint32_t)(k & 7) | NSB_META_MKSHIFT(12) | NSB_META_MKPKEY(-1);

		nsb_ranges_lock();
		NSBT_CHECK(insert(addr_of(k), addr_of(k + 2), m) == 0, "insert");
		nsb_ranges_unlock();
		model_insert(k, k + 2, m);
	}
	check_table("the first records");
	nsb_ranges_test_no_alloc(true);
	for (int k = 0; k < ops; k++) {
		int s = rnd(U), r = rnd(100), e = s + 1 + rnd(U - s < 4 ? U - s : 4);
		uint32_t meta = (uint32_t)rnd(8) | (rnd(2) ? NSB_META_SHARED : 0) |
				NSB_META_MKSHIFT(12) | NSB_META_MKPKEY(-1);
		uint64_t lost = atomic_load(&nsb_counters.lost);

		peek_op(s, e);
		nsb_ranges_lock();
		if (r < 20) {
			snprintf(what, sizeof(what), "op %d: insert [%d, %d) meta 0x%x", k, s, e, meta);
			NSBT_CHECK(nsb_ranges_cut(addr_of(s), addr_of(e)) == 0, "%s: cut", what);
			model_cut(s, e);
			if (insert(addr_of(s), addr_of(e), meta) == 0) {
				model_insert(s, e, meta);
				inserts++;
			} else {
				NSBT_CHECK(errno == ENOMEM, "%s: %s", what, strerror(errno));
				refused++;
			}
		} else if (r < 35) {
			snprintf(what, sizeof(what), "op %d: cut [%d, %d)", k, s, e);
			NSBT_CHECK(cut_op(s, e) == 0, "%s", what);
			model_cut(s, e);
			cuts++;
		} else {
			int prot = other_prot(s, e);

			snprintf(what, sizeof(what), "op %d: set_prot [%d, %d) %d", k, s, e, prot);
			NSBT_CHECK(set_prot_op(s, e, prot) == 0, "%s", what);
			model_set_prot(s, e, prot);
			prots++;
		}
		nsb_ranges_unlock();
		drop_lost(what, lost);
		check_table(what);
		check_spans(what);
	}
	restore_table();
	printf("ok: unit-ranges: tight: %d operations with no memory for the table (%d inserts made, "
	       "%d refused, %d cuts, %d protection changes), %" PRIu64 " of them losing protection, "
	       "checked against the model after each\n",
	       ops, inserts, refused, cuts, prots, atomic_load(&nsb_counters.lost) - lost_at_start);
}

/* ---- onechunk ------------------------------------------------------------ */

/* One page at page i, recorded, with errno checked untouched. */
static void
one_insert(int i, uint32_t meta, const char *what)
{
	int r;

	errno = 12345;
	nsb_ranges_lock();
	r = insert(addr_of(i), addr_of(i + 1), meta);
	nsb_ranges_unlock();
	NSBT_CHECK(r == 0, "%s: insert [%d, %d): %s", what, i, i + 1, strerror(errno));
	NSBT_CHECK(errno == 12345, "%s: a successful insert changed errno to %d (%s)", what, errno,
		   strerror(errno));
	model_cut(i, i + 1);
	model_insert(i, i + 1, meta);
	check_table(what);
}

/* The record of page i cut and put back (what resync and mremap do). */
static void
one_put_back(int i, const char *what)
{
	struct nsb_saved saved;
	int r;

	nsb_saved_init(&saved);
	nsb_ranges_lock();
	NSBT_CHECK(nsb_ranges_collect(addr_of(i), addr_of(i + 1), &saved) == 0 && saved.n == 1,
		   "%s: collect", what);
	NSBT_CHECK(nsb_ranges_cut_found(addr_of(i), addr_of(i + 1)) == 0, "%s: cut", what);
	errno = 12345;
	r = nsb_ranges_insert(&saved.r[0]);
	NSBT_CHECK(r == 0, "%s: the record put back at page %d: %s", what, i, strerror(errno));
	NSBT_CHECK(errno == 12345, "%s: a successful put back changed errno to %d (%s)", what, errno,
		   strerror(errno));
	nsb_ranges_unlock();
	nsb_saved_free(&saved);
	check_table(what);
}

/* mprotect's way over [s, e): the quick check's peek, then under the
 * lock nsb_ranges_one() and set_prot_found(); `between` (or NULL) runs
 * between the peek and the lock, as another thread's call would. */
static void
one_prot(int s, int e, int prot, void (*between)(void), const char *what)
{
	struct nsb_peek pk;
	struct nsb_range r;
	bool one;

	NSBT_CHECK(nsb_ranges_overlap_peek(addr_of(s), addr_of(e), &pk), "%s: peek: no record", what);
	if (between)
		between();
	nsb_ranges_lock();
	one = nsb_ranges_one(addr_of(s), addr_of(e), &r, &pk);
	if (one) {
		NSBT_CHECK(r.start >= addr_of(s) && r.end <= addr_of(e) && r.start < r.end,
			   "%s: nsb_ranges_one() gave [%d, %d), outside [%d, %d)", what,
			   (int)((r.start - base) / ps), (int)((r.end - base) / ps), s, e);
		for (int i = s; i < e; i++)
			NSBT_CHECK((id[i] != 0) == (addr_of(i) >= r.start && addr_of(i) < r.end),
				   "%s: nsb_ranges_one() gave [%d, %d), the model has page %d %s", what,
				   (int)((r.start - base) / ps), (int)((r.end - base) / ps), i,
				   id[i] ? "recorded" : "free");
		NSBT_CHECK(nsb_ranges_set_prot_found(r.start, r.end, prot, -1) == 0, "%s", what);
	} else {
		NSBT_CHECK(nsb_ranges_set_prot(addr_of(s), addr_of(e), prot, -1) == 0, "%s", what);
	}
	nsb_ranges_unlock();
	model_set_prot(s, e, prot);
	check_table(what);
}

static uint32_t one_meta;

/* Another thread's call between a peek and the lock: the record above
 * the others cut (the chunk's first slot: every index below moves up
 * one, the peeked one now another record's). */
static void
one_shift(void)
{
	nsb_ranges_lock();
	NSBT_CHECK(nsb_ranges_cut_found(addr_of(6), addr_of(7)) == 0, "cut");
	nsb_ranges_unlock();
	model_cut(6, 7);
}

static void
test_onechunk(void)
{
	uint64_t lost = atomic_load(&nsb_counters.lost);
	int r;

	one_meta = PROT_READ | NSB_META_MKSHIFT(12) | NSB_META_MKPKEY(-1);
	nsb_ranges_test_chunk(4);
	/* Three records, a page apart (one chunk of 4, one slot free), with
	 * memory; then none. */
	for (int i = 0; i < 6; i += 2)
		one_insert(i, one_meta, "the first records");
	nsb_ranges_test_no_alloc(true);
	/* The last free slot: a new record fits, as update() would make it
	 * (update_short: no new chunk needed). */
	one_insert(6, one_meta, "a fourth record into the chunk's last free slot");
	/* The chunk full, no spare: refused, nothing changed. */
	nsb_ranges_lock();
	r = insert(addr_of(8), addr_of(9), one_meta);
	nsb_ranges_unlock();
	NSBT_CHECK(r == -1 && errno == ENOMEM, "a fifth record into a full chunk with no memory: %d, %s",
		   r, strerror(errno));
	check_table("the refused fifth record");
	/* The records at the chunk's ends (the highest is its first slot,
	 * the lowest its last) and one between, cut and put back. */
	one_put_back(6, "the first slot put back");
	one_put_back(0, "the last slot put back");
	one_put_back(2, "a middle slot put back");
	/* Their protection, by mprotect's short way. */
	one_prot(6, 7, PROT_NONE, NULL, "the first slot's protection");
	one_prot(0, 1, PROT_READ | PROT_WRITE, NULL, "the last slot's protection");
	one_prot(3, 6, PROT_WRITE, NULL, "a record and the free pages beside it");
	/* A peek made stale: the record above goes between the peek and
	 * the lock, every index below it moves up one. */
	one_prot(2, 3, PROT_READ, one_shift, "a peek made stale by a cut above");
	one_insert(6, one_meta, "the record above back");
	one_prot(0, 1, PROT_EXEC, NULL, "after the stale peek");
	NSBT_CHECK(atomic_load(&nsb_counters.lost) == lost,
		   "%" PRIu64 " losses of protection, where every change fitted the chunk",
		   atomic_load(&nsb_counters.lost) - lost);
	restore_table();
	printf("ok: unit-ranges: onechunk: with no memory for the table, records into and out of a "
	       "one-chunk table's last free slot, at its ends, by the short ways and a stale peek\n");
}

/* ---- alloc --------------------------------------------------------------- */

static void
test_alloc(void)
{
	size_t before = nsb_ranges_count(), n = 0, bytes = nsb_ranges_bytes();
	size_t len = 2 * 65536 * ps;
	uintptr_t area;
	int failed_at = -1;

	/* Fake addresses in a reservation of our own: a real munmap
	 * elsewhere must never cut these records. */
	area = (uintptr_t)mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	NSBT_CHECK(area != (uintptr_t)MAP_FAILED, "mmap");
	/* One-page records, a page apart, until the table has to grow. */
	nsb_ranges_fail_next_alloc();
	for (int i = 0; i < 65536 && failed_at < 0; i++) {
		uintptr_t a = area + (uintptr_t)i * 2 * ps;
		int r;

		nsb_ranges_lock();
		r = insert(a, a + ps, PROT_READ | NSB_META_MKSHIFT(12) | NSB_META_MKPKEY(-1));
		if (r < 0) {
			NSBT_CHECK(errno == ENOMEM, "a failed insert: %s, not ENOMEM", strerror(errno));
			failed_at = i;
		} else {
			n++;
		}
		nsb_ranges_unlock();
		NSBT_CHECK(nsb_ranges_count() == before + n, "%zu records after %zu inserts",
			   nsb_ranges_count(), n);
	}
	NSBT_CHECK(failed_at >= 0, "the table never needed to grow");
	NSBT_CHECK(!nsb_ranges_overlap(area + (uintptr_t)failed_at * 2 * ps,
				       area + (uintptr_t)failed_at * 2 * ps + ps),
		   "the failed insert left a record");
	/* The hook fires once: the same insert now grows the table. */
	nsb_ranges_lock();
	NSBT_CHECK(insert(area + (uintptr_t)failed_at * 2 * ps,
				     area + (uintptr_t)failed_at * 2 * ps + ps,
				     PROT_READ | NSB_META_MKSHIFT(12) | NSB_META_MKPKEY(-1)) == 0,
		   "the insert after the failure: %s", strerror(errno));
	NSBT_CHECK(nsb_ranges_cut(area, area + len) == 0, "cut");
	nsb_ranges_unlock();
	munmap((void *)area, len);
	NSBT_CHECK(nsb_ranges_count() == before, "records left");
	printf("ok: unit-ranges: alloc: with %zu records (%zu bytes of table) the next insert needed "
	       "more room; it failed with ENOMEM and changed nothing, and the one after grew the table "
	       "to %zu bytes\n", n, bytes, nsb_ranges_bytes());
}

/* ---- mmap ---------------------------------------------------------------- */

static bool
maps_shows(uintptr_t addr, bool *file, char perms[5])
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	bool found = false;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long a, b, ino;
		char p[8];

		if (sscanf(line, "%lx-%lx %7s %*s %*s %lu", &a, &b, p, &ino) == 4 && addr >= a && addr < b) {
			*file = ino != 0;
			memcpy(perms, p, 4);
			perms[4] = '\0';
			found = true;
		}
	}
	if (f)
		fclose(f);
	return found;
}

static void
test_mmap(void)
{
	int fd = nsbt_file(NSBT_MEMFD, 0), made = 0;
	size_t before = nsb_ranges_count();
	unsigned char *area, *old;
	uintptr_t fail_addr = 0;
	char perms[5];
	bool file;

	/* Our own PROT_NONE area: mappings go over it with MAP_FIXED, and a
	 * failed one must leave the reservation as it was. */
	area = mmap(NULL, 4 * 4096 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	NSBT_CHECK(area != MAP_FAILED, "mmap: %s", strerror(errno));
	old = area;
	NSBT_CHECK(mmap(old, ps, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_NOSIGBUS, fd, 0) == old,
		   "mmap: %s", strerror(errno));
	nsb_ranges_fail_next_alloc();
	for (int i = 1; i < 4096 && !fail_addr; i++) {
		unsigned char *want = area + (size_t)i * 2 * ps;
		void *p = mmap(want, ps, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_NOSIGBUS, fd, 0);

		if (p == MAP_FAILED) {
			NSBT_CHECK(errno == ENOMEM, "the failed mmap: %s, not ENOMEM", strerror(errno));
			fail_addr = (uintptr_t)want;
		} else {
			NSBT_CHECK(p == want, "mmap moved");
			made++;
		}
	}
	NSBT_CHECK(fail_addr, "the table never needed to grow");
	NSBT_CHECK(maps_shows(fail_addr, &file, perms) && !file && strcmp(perms, "---p") == 0,
		   "after the failed MAP_FIXED mmap the address shows %s %s, not the old reservation",
		   perms, file ? "file" : "anonymous");
	NSBT_CHECK(nsb_ranges_count() == before + 1 + (size_t)made, "%zu records for %d mappings",
		   nsb_ranges_count() - before, made + 1);

	/* A MAP_FIXED over a protected mapping when the table cannot grow:
	 * the old mapping stays, recorded. */
	nsb_ranges_fail_next_alloc();
	for (int i = 0; i < 4096; i++) {
		/* Fill up to the brim again with small records of our own. */
		uintptr_t a = (uintptr_t)area + 2 * 4096 * ps + (uintptr_t)i * 2 * ps;
		int r;

		nsb_ranges_lock();
		r = insert(a, a + ps, PROT_READ | NSB_META_MKSHIFT(12) | NSB_META_MKPKEY(-1));
		nsb_ranges_unlock();
		if (r < 0)
			break;
	}
	nsb_ranges_fail_next_alloc();
	errno = 0;
	if (mmap(old, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1, 0) ==
	    MAP_FAILED) {
		NSBT_CHECK(errno == ENOMEM, "MAP_FIXED over a protected mapping: %s", strerror(errno));
		NSBT_CHECK(maps_shows((uintptr_t)old, &file, perms) && file,
			   "after a failed MAP_FIXED the old file mapping is gone");
		NSBT_CHECK(nsb_ranges_overlap((uintptr_t)old, (uintptr_t)old + ps),
			   "after a failed MAP_FIXED the old mapping is no longer protected");
		NSBT_CHECK(*(volatile unsigned char *)old == 0, "a rescue of the old mapping");
		printf("ok: unit-ranges: mmap: MAP_FIXED over a protected mapping with a full table: "
		       "ENOMEM, the old mapping still there and protected\n");
	} else {
		/* Cutting a whole record needs no room: also fine. */
		printf("unit-ranges: mmap: MAP_FIXED over a protected mapping needed no table room\n");
	}
	nsb_ranges_lock();
	nsb_ranges_cut((uintptr_t)area + 2 * 4096 * ps, (uintptr_t)area + 4 * 4096 * ps);
	nsb_ranges_unlock();
	NSBT_CHECK(munmap(area, 4 * 4096 * ps) == 0, "munmap");
	NSBT_CHECK(nsb_ranges_count() == before, "%zu records left after unmapping",
		   nsb_ranges_count() - before);
	printf("ok: unit-ranges: mmap: after %d protected mmaps the table could not grow: ENOMEM, "
	       "nothing mapped, nothing recorded\n", made + 1);
	close(fd);
}

/* ---- gap ----------------------------------------------------------------- */

struct gap_call {
	unsigned char *at;
	atomic_int state;	/* 0: not yet, 1: in mmap, 2: returned */
	atomic_int tid;
};

static void *
gap_mapper(void *arg)
{
	struct gap_call *c = arg;
	void *p;

	atomic_store(&c->tid, (int)syscall(SYS_gettid));
	atomic_store(&c->state, 1);
	p = mmap(c->at, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1, 0);
	NSBT_CHECK(p == c->at, "the other thread's MAP_FIXED: %s", strerror(errno));
	atomic_store(&c->state, 2);
	return NULL;
}

/* Is thread tid asleep (waiting for the table lock)? */
static bool
thread_sleeps(int tid)
{
	char path[64], buf[512], *paren;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' && paren[2] == 'S';
}

static void
test_gap(void)
{
	int fd = nsbt_file(NSBT_MEMFD, 2 * ps);
	struct gap_call call = { 0 };
	struct nsbt_budget budget;
	struct nsb_saved saved;
	unsigned char *area;
	bool file, waited;
	char perms[5];
	pthread_t t;

	area = mmap(NULL, 2 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NSBT_CHECK(area != MAP_FAILED, "mmap: %s", strerror(errno));
	NSBT_CHECK(mmap(area, 2 * ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_NOSIGBUS, fd,
			0) == area, "mmap: %s", strerror(errno));
	NSBT_CHECK(nsb_ranges_overlap((uintptr_t)area, (uintptr_t)area + 2 * ps), "not recorded");
	/* What resync does after a failed call: the span in flux, its
	 * records cut, then put back (from what the kernel showed). */
	nsb_saved_init(&saved);
	nsb_ranges_lock();
	NSBT_CHECK(nsb_ranges_collect((uintptr_t)area, (uintptr_t)area + 2 * ps, &saved) == 0 &&
		   saved.n == 1, "collect");
	nsb_ranges_flux((uintptr_t)area, (uintptr_t)area + 2 * ps, 0, 0);
	NSBT_CHECK(nsb_ranges_cut((uintptr_t)area, (uintptr_t)area + 2 * ps) == 0, "cut");
	call.at = area;
	NSBT_CHECK(pthread_create(&t, NULL, gap_mapper, &call) == 0, "pthread_create");
	/* Until the other thread's mmap returned (it went past the records)
	 * or it waits for the lock (it asks under it). */
	budget = nsbt_budget_start(10);
	while (atomic_load(&call.state) != 2 &&
	       !(atomic_load(&call.state) == 1 && thread_sleeps(atomic_load(&call.tid))) &&
	       !nsbt_budget_spent(&budget))
		usleep(1000);
	waited = atomic_load(&call.state) != 2;
	for (size_t i = 0; i < saved.n; i++)
		NSBT_CHECK(nsb_ranges_insert(&saved.r[i]) == 0, "put back");
	nsb_ranges_flux_end();
	nsb_ranges_unlock();
	nsb_saved_free(&saved);
	pthread_join(t, NULL);
	NSBT_CHECK(maps_shows((uintptr_t)area, &file, perms) && !file && strcmp(perms, "rw-p") == 0,
		   "the other thread's anonymous mapping is not there (%s %s)", perms,
		   file ? "file" : "anonymous");
	NSBT_CHECK(!nsb_ranges_overlap((uintptr_t)area, (uintptr_t)area + 2 * ps),
		   "a MAP_FIXED of unprotected memory made while another call had cut the records "
		   "there to put them back (the span in flux) took them for none and went straight "
		   "to the kernel (%s): the records came back over the new mapping",
		   waited ? "it waited" : "it returned while the records were cut");
	NSBT_CHECK(munmap(area, 2 * ps) == 0, "munmap");
	close(fd);
	printf("ok: unit-ranges: gap: a MAP_FIXED over a span whose records a call had cut to put "
	       "back waited for that call, and left no record over its unprotected mapping\n");
}

/* ---- config -------------------------------------------------------------- */

static void
test_config(int ops)
{
	static const struct {
		const char *name, *value;
		int out;
	} good[] = {
		{ "NOSIGBUS_POLICY", "flag", NSB_POLICY_FLAG }, { "NOSIGBUS_POLICY", "shm", NSB_POLICY_SHM },
		{ "NOSIGBUS_POLICY", "files", NSB_POLICY_FILES }, { "NOSIGBUS_FILL", "page", NSB_FILL_PAGE },
		{ "NOSIGBUS_FILL", "range", NSB_FILL_RANGE },
		{ "NOSIGBUS_STRICT", "1", 1 }, { "NOSIGBUS_STRICT", "yes", 1 }, { "NOSIGBUS_STRICT", "true", 1 },
		{ "NOSIGBUS_STRICT", "on", 1 }, { "NOSIGBUS_STRICT", "0", 0 }, { "NOSIGBUS_STRICT", "no", 0 },
		{ "NOSIGBUS_STRICT", "false", 0 }, { "NOSIGBUS_STRICT", "off", 0 },
		{ "NOSIGBUS_LOG", "1", 1 }, { "NOSIGBUS_LOG", "on", 1 }, { "NOSIGBUS_LOG", "off", 0 },
	};
	static const char *const bad[] = {
		"", " flag", "flag ", "fla", "flags", "files\n", "page\t", "2", "-1", "yes!", "o", "of",
		"0x1", "10", "true1", "\xff", "range\r",
	};
	static const char *const names[] = { "NOSIGBUS_POLICY", "NOSIGBUS_FILL", "NOSIGBUS_STRICT", "NOSIGBUS_LOG" };
	static char buf[70000];
	int out, checked = 0;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++, checked++)
		NSBT_CHECK(nsb_config_parse(good[i].name, good[i].value, &out) && out == good[i].out,
			   "%s=%s", good[i].name, good[i].value);
	for (size_t n = 0; n < 4; n++)
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++, checked++)
			NSBT_CHECK(!nsb_config_parse(names[n], bad[i], &out), "%s=\"%s\" accepted", names[n], bad[i]);
	NSBT_CHECK(!nsb_config_parse("NOSIGBUS_POLICY", NULL, &out), "NULL accepted");
	NSBT_CHECK(!nsb_config_parse("NOSIGBUS_NOPE", "1", &out), "an unknown variable accepted");
	for (int k = 0; k < ops; k++, checked++) {
		size_t len = (size_t)rnd(k % 50 == 0 ? (int)sizeof(buf) - 1 : 40);
		const char *name = names[rnd(4)];
		bool ok;

		for (size_t i = 0; i < len; i++)
			buf[i] = (char)(1 + rnd(255));
		buf[len] = '\0';
		out = -12345;
		ok = nsb_config_parse(name, buf, &out);
		/* Random bytes are valid only when they happen to spell a word. */
		NSBT_CHECK(!ok || len <= 5, "%s: a %zu-byte random value accepted", name, len);
		NSBT_CHECK(ok || out == -12345, "%s: a rejected value changed the output", name);
	}
	printf("ok: unit-ranges: config: %d values parsed (every word, near misses, random bytes up to "
	       "%zu bytes)\n", checked, sizeof(buf) - 1);
}

int
main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 24);
	int ops = 3000;
	bool all = true, want[8] = { false };
	static const char *const tests[] = { "random", "alloc", "mmap", "config", "gap", "tight",
					     "onechunk", "short" };

	ps = nsbt_page();
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			seed = strtoull(argv[++i], NULL, 0);
			continue;
		}
		if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc) {
			ops = atoi(argv[++i]);
			continue;
		}
		for (int t = 0; t < 8; t++)
			if (strcmp(argv[i], tests[t]) == 0)
				want[t] = true, all = false;
	}
	rng = seed;
	printf("unit-ranges: seed %" PRIu64 ", page size %zu\n", seed, ps);
	nsb_init();
	/* The window of fake addresses: reserved, so nothing real lands there. */
	base = (uintptr_t)mmap(NULL, U * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	NSBT_CHECK(base != (uintptr_t)MAP_FAILED, "mmap");
	if (all || want[0]) {
		test_random(ops);
		/* Chunks of 4 records (ranges.c splits them at 128): the
		 * window's records split, merge and empty chunks all the time. */
		nsb_ranges_test_chunk(4);
		test_random(ops);
		nsb_ranges_test_chunk(0);
	}
	if (all || want[1])
		test_alloc();
	if (all || want[2])
		test_mmap();
	if (all || want[3])
		test_config(ops * 10);
	if (all || want[4])
		test_gap();
	if (all || want[5])
		test_tight(ops);
	if (all || want[6])
		test_onechunk();
	if (all || want[7]) {
		/* random and tight again, the changes by the calls' short ways. */
		short_ways = true;
		test_random(ops);
		nsb_ranges_test_chunk(4);
		test_random(ops);
		nsb_ranges_test_chunk(0);
		test_tight(ops);
		short_ways = false;
	}
	munmap((void *)base, U * ps);
	return 0;
}
