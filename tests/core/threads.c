/* SPDX-License-Identifier: MIT */
/*
 * Threads.  8 faulter threads fault the same protected mapping (writing
 * their own slots in every page, so that two rescues of one page race)
 * and their own protected mappings, while 2 mapper threads map, unmap and
 * remap protected and unprotected ranges at fixed "slot" addresses that
 * the faulters also read.
 *
 * Checked:
 * - no write is lost: after each round every slot of every page holds
 *   what its thread wrote (a second rescue of an already rescued page
 *   would replace it with zeros);
 * - no rescue ever lands on a mapping made after an munmap (or a
 *   MAP_FIXED/mremap replacement): whenever a slot stops being protected,
 *   the mapper puts a canary there (known contents: a file mapping or an
 *   anonymous mapping filled before it is moved in), and every canary is
 *   verified page by page before it is replaced and at the end.
 *
 * Reads of slots race with the mappers by design: a read may find the
 * slot unmapped (SIGSEGV), or fault in a protected mapping whose record
 * a mapper removed just before the real munmap (a SIGBUS that is, rightly,
 * not rescued).  The program's own handlers, installed before any
 * protected mapping exists, catch those, and only those.
 *
 * Bounded by iteration counts.  Runs in page mode here, and re-executed
 * with NOSIGBUS_FILL=range.
 */
#include <setjmp.h>
#include <stdatomic.h>

#include "core.h"

#define NFAULTERS 8
#define NMAPPERS 2
#define NSLOTS 16
#define SLOT_PAGES 4
#define STABLE_PAGES 32
/* Larger than a slot, like every other mapping made here, so that none fits a slot's hole. */
#define OWN_PAGES (SLOT_PAGES + 2)

static int rounds = 80;
static int vreads = 300;
static int mapper_min_ops = 3000;
static int mapper_max_ops = 20000;

static size_t ps;
static int zfd;			/* empty file: every page of a mapping of it faults */
static int cfd;			/* canary file: SLOT_PAGES pages of the pattern */
static char *slot_area;		/* NSLOTS slots, each followed by a PROT_NONE guard page */

enum slot_state { SLOT_HOLE, SLOT_PROT, SLOT_CANARY_FILE, SLOT_CANARY_ANON, SLOT_LOST };
static _Atomic int slot_state[NSLOTS];

static pthread_barrier_t barrier;
static char *_Atomic stable;	/* the shared protected mapping of this round */
static atomic_int faulters_done;

static atomic_long n_rescued_reads, n_canary_reads, n_segv, n_unrescued_bus, n_checks;

static __thread sigjmp_buf tls_jb;
static __thread volatile sig_atomic_t tls_racy;

static char *
slot_addr(int s)
{
	return slot_area + (size_t)s * (SLOT_PAGES + 1) * ps;
}

static char
anon_byte(int s)
{
	return (char)(0xc0 | s);
}

static void
racy_handler(int sig, siginfo_t *si, void *uc)
{
	static const char bus[] = "FAIL: SIGBUS outside a racy read: a protected "
				  "page was not rescued (exit 90)\n";
	static const char segv[] = "FAIL: SIGSEGV outside a racy read (exit 91)\n";

	(void)si;
	(void)uc;
	if (tls_racy) {
		tls_racy = 0;
		siglongjmp(tls_jb, sig);
	}
	if (sig == SIGBUS)
		(void)!write(2, bus, sizeof(bus) - 1);
	else
		(void)!write(2, segv, sizeof(segv) - 1);
	_exit(sig == SIGBUS ? 90 : 91);
}

/* Reads one byte that a mapper may be changing under us.  -1: it faulted. */
static int
racy_read(const volatile char *p)
{
	int sig = sigsetjmp(tls_jb, 1);

	if (sig) {
		atomic_fetch_add(sig == SIGBUS ? &n_unrescued_bus : &n_segv, 1);
		return -1;
	}
	tls_racy = 1;
	{
		unsigned char c = (unsigned char)*p;

		tls_racy = 0;
		return c;
	}
}

static void
check_canary(int s, int state, const char *when)
{
	const char *a = slot_addr(s);

	for (size_t pg = 0; pg < SLOT_PAGES; pg++) {
		const char *pgp = a + pg * ps;
		size_t bad;

		if (state == SLOT_CANARY_ANON)
			bad = core_first_not(pgp, anon_byte(s), ps);
		else
			bad = core_first_not_pattern(pgp, pg * ps, ps);
		if (bad != ps)
			nsbt_fail("canary (%s) in slot %d page %zu at %p was changed %s: "
				  "byte %zu is %#x: a rescue landed on a mapping made "
				  "after the protected one was removed",
				  state == SLOT_CANARY_ANON ? "anonymous" : "file", s, pg,
				  (const void *)pgp, when, bad, (unsigned char)pgp[bad]);
	}
	atomic_fetch_add(&n_checks, 1);
}

/*
 * How the old mapping of a slot goes away before the new one comes:
 * replaced in the same call (MAP_FIXED, MREMAP_FIXED over it), unmapped,
 * or moved away with mremap (and then replaced where it went).
 */
enum removal { RM_REPLACE, RM_MUNMAP, RM_MOVE_AWAY };

static __thread char *tls_scratch;	/* the mapper's own landing place for moves */

/*
 * Can the kernel move several VMAs in one mremap(MREMAP_FIXED)?  Linux
 * 6.17 and later can; before, the call fails with EFAULT, with or without
 * the library.  Asked once, of anonymous memory the library leaves alone:
 * where it cannot, a slot the mapper split with mprotect is made one VMA
 * again before it may be moved away.
 */
static bool multi_vma_moves;

static void
probe_multi_vma_moves(void)
{
	char *p;

	ps = nsbt_page();
	p = mmap(NULL, 6 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	NSBT_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	NSBT_CHECK(mprotect(p + ps, ps, PROT_READ) == 0, "mprotect: %s", strerror(errno));
	multi_vma_moves = mremap(p, 3 * ps, 3 * ps, MREMAP_MAYMOVE | MREMAP_FIXED, p + 3 * ps) != MAP_FAILED;
	NSBT_CHECK(multi_vma_moves || errno == EFAULT, "mremap of three VMAs: %s", strerror(errno));
	munmap(p, 6 * ps);
	if (!multi_vma_moves)
		printf("note: this kernel moves one VMA per mremap (before Linux 6.17): "
		       "slots split by mprotect are joined before they move\n");
}

/*
 * Removes what is at slot s as told.  After RM_MUNMAP and RM_MOVE_AWAY
 * the slot is a hole that any thread's mmap may take, so whatever comes
 * next is placed with MAP_FIXED_NOREPLACE.
 */
static void
remove_old(int s, enum removal how)
{
	char *a = slot_addr(s);
	size_t len = SLOT_PAGES * ps;

	if (how == RM_MUNMAP) {
		NSBT_CHECK(munmap(a, len) == 0, "mapper: munmap: %s", strerror(errno));
	} else if (how == RM_MOVE_AWAY) {
		char *t = mremap(a, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, tls_scratch);

		NSBT_CHECK(t == tls_scratch, "mapper: mremap away: %s", strerror(errno));
		NSBT_CHECK(mmap(t, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED |
				MAP_NORESERVE, -1, 0) == t,
			   "mapper: MAP_FIXED over the moved mapping: %s", strerror(errno));
	}
	if (how != RM_REPLACE)
		atomic_store(&slot_state[s], SLOT_HOLE);
}

/* After remove_old(): a placeholder where a move can land, unless the hole was taken. */
static bool
claim_hole(int s, enum removal how)
{
	char *a = slot_addr(s);
	size_t len = SLOT_PAGES * ps;

	if (how == RM_REPLACE)
		return true;
	if (mmap(a, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE |
		 MAP_NORESERVE, -1, 0) == a)
		return true;
	NSBT_CHECK(errno == EEXIST, "mapper: placeholder: %s", strerror(errno));
	/* Another thread's mapping took the hole: leave the slot alone for good. */
	atomic_store(&slot_state[s], SLOT_LOST);
	return false;
}

/* A fresh protected mapping of the empty file at slot s: every page faults. */
static void
map_protected(int s, enum removal how, uint64_t rnd)
{
	char *a = slot_addr(s);
	size_t len = SLOT_PAGES * ps;
	int type = rnd & 1 ? MAP_SHARED : MAP_PRIVATE;

	if (rnd & 2) {
		/* Made directly at the slot. */
		int fixed = how == RM_REPLACE ? MAP_FIXED : MAP_FIXED_NOREPLACE;
		char *r;

		remove_old(s, how);
		r = mmap(a, len, CORE_PROT_RW, type | fixed | MAP_NOSIGBUS, zfd, 0);
		if (r == MAP_FAILED && errno == EEXIST) {
			atomic_store(&slot_state[s], SLOT_LOST);
			return;
		}
		NSBT_CHECK(r == a, "mapper: protected mmap at the slot: %s", strerror(errno));
	} else {
		/* Made elsewhere (perhaps rescued there first), then moved in. */
		char *t = core_map(NULL, len + ps, CORE_PROT_RW, type | MAP_NOSIGBUS, zfd, 0);

		if (rnd & 4)
			(void)*(volatile char *)(t + ((rnd >> 8) % SLOT_PAGES) * ps);
		remove_old(s, how);
		if (!claim_hole(s, how)) {
			munmap(t, len + ps);
			return;
		}
		NSBT_CHECK(mremap(t, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, a) == a,
			   "mapper: mremap protected into the slot: %s", strerror(errno));
		NSBT_CHECK(munmap(t + len, ps) == 0, "mapper: munmap: %s", strerror(errno));
	}
	atomic_store(&slot_state[s], SLOT_PROT);
}

/* A canary: its contents are in place the moment it appears at the slot. */
static void
map_canary(int s, enum removal how, uint64_t rnd)
{
	char *a = slot_addr(s);
	size_t len = SLOT_PAGES * ps;

	if (rnd & 1) {
		/* A file mapping of the pattern file, directly at the slot. */
		int fixed = how == RM_REPLACE ? MAP_FIXED : MAP_FIXED_NOREPLACE;
		char *r;

		remove_old(s, how);
		r = mmap(a, len, PROT_READ, MAP_SHARED | fixed, cfd, 0);
		if (r == MAP_FAILED && errno == EEXIST) {
			atomic_store(&slot_state[s], SLOT_LOST);
			return;
		}
		NSBT_CHECK(r == a, "mapper: canary file mapping: %s", strerror(errno));
		atomic_store(&slot_state[s], SLOT_CANARY_FILE);
	} else {
		/* Anonymous, filled elsewhere, then moved in. */
		char *t = core_map(NULL, len + ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		memset(t, anon_byte(s), len);
		remove_old(s, how);
		if (!claim_hole(s, how)) {
			munmap(t, len + ps);
			return;
		}
		NSBT_CHECK(mremap(t, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, a) == a,
			   "mapper: mremap canary into the slot: %s", strerror(errno));
		NSBT_CHECK(munmap(t + len, ps) == 0, "mapper: munmap: %s", strerror(errno));
		atomic_store(&slot_state[s], SLOT_CANARY_ANON);
	}
}

static void *
mapper(void *arg)
{
	int m = (int)(intptr_t)arg;
	uint64_t rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(m + 1);
	size_t len = SLOT_PAGES * ps;

	/* Ours for good: moves land on it, and it is put back after each. */
	tls_scratch = core_map(NULL, len, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	for (int i = 0; i < mapper_max_ops; i++) {
		uint64_t r = core_rand(&rng);
		int s = (int)((r >> 4) % (NSLOTS / NMAPPERS)) * NMAPPERS + m;
		char *a = slot_addr(s);
		int st = atomic_load(&slot_state[s]);
		int op = (int)((r >> 20) % 4);

		if (i >= mapper_min_ops && atomic_load(&faulters_done))
			break;
		switch (st) {
		case SLOT_PROT:
			/* Our own read: the slot is ours, a rescue must work. */
			if (a[((r >> 12) % SLOT_PAGES) * ps + 7] != 0)
				nsbt_fail("mapper: protected slot %d reads non-zero", s);
			if (op < 3) {
				map_canary(s, (enum removal)op, r >> 30);
			} else {
				/* Protection changes; it stays protected. */
				NSBT_CHECK(mprotect(a, len, PROT_READ) == 0, "mapper: mprotect");
				NSBT_CHECK(mprotect(a + ps, ps, CORE_PROT_RW) == 0, "mapper: mprotect");
				if (!multi_vma_moves)
					NSBT_CHECK(mprotect(a, len, CORE_PROT_RW) == 0, "mapper: mprotect");
			}
			break;
		case SLOT_CANARY_FILE:
		case SLOT_CANARY_ANON:
			check_canary(s, st, "while it was in place");
			map_protected(s, (enum removal)(op % 3), r >> 30);
			break;
		default:
			break;
		}
	}
	return NULL;
}

static void *
faulter(void *arg)
{
	int t = (int)(intptr_t)arg;
	uint64_t rng = 0x2545f4914f6cdd1dULL * (uint64_t)(t + 7);
	int type_own = t & 1 ? MAP_SHARED : MAP_PRIVATE;

	for (int round = 0; round < rounds; round++) {
		char *own, *st;

		pthread_barrier_wait(&barrier);
		if (t == 0)
			atomic_store(&stable, core_map(NULL, STABLE_PAGES * ps, CORE_PROT_RW,
						       (round & 1 ? MAP_SHARED : MAP_PRIVATE) |
						       MAP_NOSIGBUS, zfd, 0));
		own = core_map(NULL, OWN_PAGES * ps, CORE_PROT_RW, type_own | MAP_NOSIGBUS, zfd, 0);
		pthread_barrier_wait(&barrier);
		st = atomic_load(&stable);

		/* Half the threads go up, half down: many pages are hit by several at once. */
		for (int k = 0; k < STABLE_PAGES; k++) {
			int pg = t & 1 ? STABLE_PAGES - 1 - k : k;
			volatile uint64_t *slot = (volatile uint64_t *)(st + (size_t)pg * ps + (size_t)t * 64);
			uint64_t v = ((uint64_t)round << 32) | ((uint64_t)t << 16) | (uint64_t)pg | 1ULL << 63;

			*slot = v;
			if (k < OWN_PAGES) {
				volatile uint64_t *o = (volatile uint64_t *)(own + (size_t)k * ps);

				v = ((uint64_t)round << 32) | ((uint64_t)t << 16) | (uint64_t)k | 1ULL << 63;
				*o = v;
				if (*o != v)
					nsbt_fail("thread %d: own mapping page %d lost its write", t, k);
			}
		}
		pthread_barrier_wait(&barrier);
		/* Every thread checks every slot: all writes of all threads are there. */
		for (int pg = 0; pg < STABLE_PAGES; pg++)
			for (int w = 0; w < NFAULTERS; w++) {
				uint64_t v = ((uint64_t)round << 32) | ((uint64_t)w << 16) |
					     (uint64_t)pg | 1ULL << 63;
				uint64_t got = *(volatile uint64_t *)(st + (size_t)pg * ps + (size_t)w * 64);

				if (got != v)
					nsbt_fail("round %d: thread %d's write to page %d of the "
						  "shared protected mapping was lost (reads %#llx, "
						  "expected %#llx)", round, w, pg,
						  (unsigned long long)got, (unsigned long long)v);
			}
		for (int k = 0; k < OWN_PAGES; k++) {
			uint64_t v = ((uint64_t)round << 32) | ((uint64_t)t << 16) | (uint64_t)k | 1ULL << 63;

			if (*(volatile uint64_t *)(own + (size_t)k * ps) != v)
				nsbt_fail("thread %d: own mapping page %d lost its write", t, k);
		}
		NSBT_CHECK(munmap(own, OWN_PAGES * ps) == 0, "munmap: %s", strerror(errno));
		pthread_barrier_wait(&barrier);
		if (t == 0)
			NSBT_CHECK(munmap(st, STABLE_PAGES * ps) == 0, "munmap: %s", strerror(errno));

		/* Racy reads of the slots the mappers are changing. */
		for (int i = 0; i < vreads; i++) {
			uint64_t r = core_rand(&rng);
			int s = (int)(r % NSLOTS);
			size_t off = ((r >> 8) % SLOT_PAGES) * ps + ((r >> 16) % ps);
			int c = racy_read(slot_addr(s) + off);

			if (c == 0)
				atomic_fetch_add(&n_rescued_reads, 1);
			else if (c > 0)
				atomic_fetch_add(&n_canary_reads, 1);
		}
	}
	return NULL;
}

static void
run(void)
{
	pthread_t ft[NFAULTERS], mt[NMAPPERS];
	struct sigaction sa;
	struct nosigbus_stats st0, st1;
	int lost = 0;

	ps = nsbt_page();
	/*
	 * The program's handlers, before the first protected mapping: the
	 * library chains unrescued faults to them.
	 */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = racy_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	NSBT_CHECK(sigaction(SIGSEGV, &sa, NULL) == 0, "sigaction");
	NSBT_CHECK(sigaction(SIGBUS, &sa, NULL) == 0, "sigaction");

	zfd = nsbt_file(NSBT_MEMFD, 0);
	cfd = nsbt_file(NSBT_MEMFD, SLOT_PAGES * ps);
	slot_area = core_map(NULL, NSLOTS * (SLOT_PAGES + 1) * ps, PROT_NONE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	for (int s = 0; s < NSLOTS; s++)
		map_protected(s, RM_REPLACE, (uint64_t)s & 1);
	st0 = core_stats();

	pthread_barrier_init(&barrier, NULL, NFAULTERS);
	for (int i = 0; i < NMAPPERS; i++)
		if (pthread_create(&mt[i], NULL, mapper, (void *)(intptr_t)i) != 0)
			nsbt_fail("pthread_create");
	for (int i = 0; i < NFAULTERS; i++)
		if (pthread_create(&ft[i], NULL, faulter, (void *)(intptr_t)i) != 0)
			nsbt_fail("pthread_create");
	for (int i = 0; i < NFAULTERS; i++)
		pthread_join(ft[i], NULL);
	atomic_store(&faulters_done, 1);
	for (int i = 0; i < NMAPPERS; i++)
		pthread_join(mt[i], NULL);

	for (int s = 0; s < NSLOTS; s++) {
		int state = atomic_load(&slot_state[s]);

		if (state == SLOT_CANARY_FILE || state == SLOT_CANARY_ANON)
			check_canary(s, state, "by the end");
		lost += state == SLOT_LOST;
	}
	st1 = core_stats();
	printf("ok: %d rounds x %d threads x %d pages of a shared protected mapping: no write lost\n",
	       rounds, NFAULTERS, STABLE_PAGES);
	printf("ok: %ld canary checks, none changed (racy reads: %ld saw zeros, %ld a canary, "
	       "%ld SIGSEGV in a hole, %ld unrescued SIGBUS after a record was removed; "
	       "%d of %d slots taken by other mappings)\n",
	       atomic_load(&n_checks), atomic_load(&n_rescued_reads),
	       atomic_load(&n_canary_reads), atomic_load(&n_segv),
	       atomic_load(&n_unrescued_bus), lost, NSLOTS);
	NSBT_CHECK(st1.rescues > st0.rescues, "rescues happened");
	NSBT_CHECK(atomic_load(&n_checks) > 0 && atomic_load(&n_rescued_reads) > 0,
		   "the racy part did something");
	printf("ok: %llu rescues, %llu pages replaced, %llu failures\n",
	       (unsigned long long)(st1.rescues - st0.rescues),
	       (unsigned long long)(st1.pages - st0.pages),
	       (unsigned long long)(st1.failures - st0.failures));
}

static void
run_child(void *arg)
{
	(void)arg;
	run();
}

int
main(int argc, char **argv)
{
	static const char *const range_env[] = { "NOSIGBUS_FILL=range", NULL };

	core_require_library();
	/* Canaries are unflagged memfd mappings: unprotected, as designed. */
	core_setenv_reexec(argv, "NOSIGBUS_POLICY", "flag");
	probe_multi_vma_moves();
	if (argc > 1) {
		if (strcmp(argv[1], "range") != 0)
			nsbt_fail("unknown scenario %s", argv[1]);
		rounds = 40;
		vreads = 200;
		mapper_min_ops = 1500;
		run();
		return 0;
	}
	nsbt_expect_exit(nsbt_run(run_child, NULL), 0, "threads, fill=page");
	nsbt_expect_exit(core_reexec("range", range_env), 0, "threads, fill=range");
	return 0;
}
