/* SPDX-License-Identifier: MIT */
/*
 * concurrency - threads rescuing, mapping, unmapping, remapping and changing
 * protection at once (issue 7, item 2; SPEC §7).
 *
 * An arena of slots, each a few pages, is recycled by owner threads: a
 * protected mapping of an empty file (every access is rescued), a shared
 * one, a protected anonymous one, an unprotected one (SIGBUS), a hole, a
 * protected mapping of a file another thread keeps truncating, or a canary:
 * an unprotected private mapping of a full file with known contents.
 * Recycling is mmap(MAP_FIXED) over the slot, mremap(MREMAP_FIXED) of a
 * mapping made elsewhere or of another slot (rescued pages and all),
 * munmap, or mprotect.
 *
 * Faulter threads, at the same time:
 *  - unlocked: read any page of any slot, whatever it is at that instant
 *    (rescues race with the recycling; SIGSEGV and SIGBUS go to the
 *    program's handlers, which siglongjmp back);
 *  - locked (a slot's read lock, so that it is not recycled meanwhile):
 *    a canary must show its contents; in a protected slot each thread
 *    writes its own byte at its own offset and must read back exactly what
 *    it wrote since the slot was last recycled, so a late rescue of a page
 *    another thread rescued first (which would throw the data away) shows.
 * One faulter has SIGBUS blocked (SPEC §6: it must still be rescued), a
 * forker thread forks children that must be able to map and be rescued
 * (no library lock held in the child), and a truncator thread changes the
 * size of one file under its mappings.
 *
 * Owners check each canary before they recycle it: a rescue that landed
 * outside a live protected mapping would have replaced a canary page with
 * zeros.  The run is re-executed with NOSIGBUS_LOG=1 and its stderr read
 * here: the number of "rescued" lines, and their pages, must equal
 * nosigbus_get_stats(), every address must be in the arena, and no
 * failure may be counted.  After everything is unmapped no record is left.
 * A last phase, the stampede, has every faulter hit the same page at once
 * after each of many recycles (see stampede()).
 *
 * Usage: concurrency [--iterations N] [--fill page|range] [--stampede N]
 *   recycles per owner thread (default 3000), NOSIGBUS_FILL, and rounds of
 *   the stampede (default 2000).
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#include "nsbtest.h"

#define NSLOT		32
#define SP		4	/* pages per slot */
#define NOWNER		2
#define NFAULT		4	/* faulter 0 has SIGBUS blocked */
#define MARK_OFF	64	/* each faulter's byte is at offset t * MARK_OFF */

enum type { T_VPRIV, T_VSHARED, T_ANON, T_CANARY, T_UNPROT, T_HOLE, T_TRUNC, NTYPES };
static const char *const type_names[] = {
	"protected private", "protected shared", "protected anonymous", "canary",
	"unprotected", "hole", "protected truncating",
};

struct slot {
	pthread_rwlock_t lock;
	int type;
	int prot;
	unsigned gen;
	unsigned written[SP][NFAULT];	/* gen in which faulter t wrote its byte */
};

static size_t ps;
static unsigned char *arena;		/* NSLOT * SP pages */
static unsigned char *scratch;		/* NOWNER * SP pages, after the arena */
static struct slot slots[NSLOT];
static int victim_fd, canary_fd, trunc_fd;
static int owner_iters = 3000;
static const char *fill = "page";
static int stampede_rounds = 2000;
static atomic_bool stop;
static atomic_int failed;

static int (*get_stats)(struct nosigbus_stats *, size_t);
static atomic_ulong n_recycles, n_mremaps, n_moves, n_mprotects, n_canary_checks;
static atomic_ulong n_locked, n_unlocked, n_unlocked_segv, n_unlocked_bus, n_forks, n_truncs;

static _Thread_local sigjmp_buf probe_env;
static _Thread_local volatile sig_atomic_t in_probe;
static _Thread_local uint64_t rng;

static int
rnd(int n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (int)(rng % (uint64_t)n);
}

static void __attribute__((format(printf, 1, 2)))
report_failure(const char *fmt, ...)
{
	char buf[512] = "FAIL: ";
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf + 6, sizeof(buf) - 8, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n += 6;
	if ((size_t)n > sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	/* One write: the parent reads stderr line by line, and the
	 * library's log lines come through the same pipe. */
	if (write(STDERR_FILENO, buf, (size_t)n) < 0)
		_exit(1);
	atomic_store(&failed, 1);
	atomic_store(&stop, true);
}

static void
on_fault(int sig, siginfo_t *si, void *uc)
{
	char buf[160];
	int n;

	if (in_probe) {
		in_probe = 0;
		siglongjmp(probe_env, sig);
	}
	n = snprintf(buf, sizeof(buf), "FAIL: unexpected %s at %p (si_code %d)\n",
		     sig == SIGBUS ? "SIGBUS" : "SIGSEGV", si->si_addr, si->si_code);
	if (write(STDERR_FILENO, buf, (size_t)n) < 0)
		_exit(1);
	_exit(1);
}

static unsigned char *
slot_addr(int s)
{
	return arena + (size_t)s * SP * ps;
}

static unsigned char
canary_byte(size_t off)
{
	return (unsigned char)nsbt_pattern(off);
}

/* ---- making the mapping of a type somewhere ----------------------------- */

static int
prot_for(int type)
{
	switch (type) {
	case T_CANARY:
	case T_UNPROT:
	case T_TRUNC:
		return PROT_READ;
	case T_HOLE:
		return PROT_NONE;
	default:
		return rnd(4) ? PROT_READ | PROT_WRITE : PROT_READ;
	}
}

static void *
map_type(void *where, int type, int prot)
{
	int fixed = MAP_FIXED;

	switch (type) {
	case T_VPRIV:
		return mmap(where, SP * ps, prot, MAP_PRIVATE | fixed | MAP_NOSIGBUS, victim_fd, 0);
	case T_VSHARED:
		return mmap(where, SP * ps, prot, MAP_SHARED | fixed | MAP_NOSIGBUS, victim_fd, 0);
	case T_ANON:
		return mmap(where, SP * ps, prot, MAP_PRIVATE | MAP_ANONYMOUS | fixed | MAP_NOSIGBUS, -1, 0);
	case T_CANARY:
		return mmap(where, SP * ps, prot, MAP_PRIVATE | fixed, canary_fd, 0);
	case T_UNPROT:
		return mmap(where, SP * ps, prot, MAP_PRIVATE | fixed, victim_fd, 0);
	case T_TRUNC:
		return mmap(where, SP * ps, prot, MAP_PRIVATE | fixed | MAP_NOSIGBUS, trunc_fd, 0);
	default:
		return mmap(where, SP * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | fixed, -1, 0);
	}
}

/* ---- owners ------------------------------------------------------------- */

/* Caller holds the slot's write lock. */
static void
check_canary(int s)
{
	unsigned char *p = slot_addr(s);

	atomic_fetch_add(&n_canary_checks, 1);
	for (size_t off = 0; off < SP * ps; off += ps / 4) {
		if (p[off] != canary_byte(off)) {
			report_failure("canary slot %d page %zu offset %zu holds 0x%02x, not 0x%02x: "
				       "a page of an unprotected mapping was replaced", s, off / ps,
				       off % ps, p[off], canary_byte(off));
			return;
		}
	}
}

static void
lock_two(int a, int b)
{
	pthread_rwlock_wrlock(&slots[a < b ? a : b].lock);
	pthread_rwlock_wrlock(&slots[a < b ? b : a].lock);
}

static void
owner_step(int me)
{
	int s = rnd(NSLOT), type = rnd(NTYPES), r = rnd(100), prot;
	unsigned char *addr = slot_addr(s);
	void *p;

	if (r < 10) {
		/* Move another slot here, rescued pages and all. */
		int from = rnd(NSLOT);
		struct slot *d = &slots[s], *o = &slots[from];

		if (from == s)
			return;
		lock_two(s, from);
		if (d->type == T_CANARY)
			check_canary(s);
		if (o->type == T_CANARY)
			check_canary(from);
		if (o->type != T_HOLE) {
			p = mremap(slot_addr(from), SP * ps, SP * ps, MREMAP_MAYMOVE | MREMAP_FIXED, addr);
			if (p != addr) {
				report_failure("mremap(slot %d -> slot %d, %s): %s", from, s,
					       type_names[o->type], strerror(errno));
			} else {
				atomic_fetch_add(&n_moves, 1);
				d->gen++;
				for (int pg = 0; pg < SP; pg++)
					for (int t = 0; t < NFAULT; t++)
						d->written[pg][t] = o->written[pg][t] == o->gen ? d->gen : 0;
				d->type = o->type;
				d->prot = o->prot;
				o->type = T_HOLE;
				o->prot = PROT_NONE;
				o->gen++;
				/* Close the hole again: nothing else may land there. */
				if (map_type(slot_addr(from), T_HOLE, PROT_NONE) == MAP_FAILED)
					report_failure("mmap(hole): %s", strerror(errno));
			}
		}
		pthread_rwlock_unlock(&slots[s].lock);
		pthread_rwlock_unlock(&slots[from].lock);
		return;
	}

	pthread_rwlock_wrlock(&slots[s].lock);
	if (slots[s].type == T_CANARY)
		check_canary(s);
	if (r < 25 && (slots[s].type == T_VPRIV || slots[s].type == T_VSHARED ||
		       slots[s].type == T_ANON)) {
		/* Protection only: contents (and rescued pages) stay. */
		prot = slots[s].prot == PROT_READ ? PROT_READ | PROT_WRITE : PROT_READ;
		if (mprotect(addr, SP * ps, prot) < 0)
			report_failure("mprotect(slot %d): %s", s, strerror(errno));
		slots[s].prot = prot;
		atomic_fetch_add(&n_mprotects, 1);
		pthread_rwlock_unlock(&slots[s].lock);
		return;
	}
	prot = prot_for(type);
	if (r < 45 && type != T_HOLE) {
		/* Made elsewhere, then moved over the slot. */
		unsigned char *tmp = scratch + (size_t)me * SP * ps;

		p = map_type(tmp, type, prot);
		if (p == MAP_FAILED)
			report_failure("mmap(scratch, %s): %s", type_names[type], strerror(errno));
		else if (mremap(tmp, SP * ps, SP * ps, MREMAP_MAYMOVE | MREMAP_FIXED, addr) != addr)
			report_failure("mremap(scratch -> slot %d): %s", s, strerror(errno));
		if (map_type(tmp, T_HOLE, PROT_NONE) == MAP_FAILED)
			report_failure("mmap(scratch hole): %s", strerror(errno));
		atomic_fetch_add(&n_mremaps, 1);
	} else if (type == T_HOLE && rnd(2)) {
		if (munmap(addr, SP * ps) < 0)
			report_failure("munmap(slot %d): %s", s, strerror(errno));
	} else {
		if (map_type(addr, type, prot) == MAP_FAILED)
			report_failure("mmap(slot %d, %s): %s", s, type_names[type], strerror(errno));
	}
	slots[s].type = type;
	slots[s].prot = prot;
	slots[s].gen++;
	atomic_fetch_add(&n_recycles, 1);
	pthread_rwlock_unlock(&slots[s].lock);
}

static void *
owner(void *arg)
{
	int me = (int)(intptr_t)arg;

	rng = 0x9e3779b97f4a7c15ull * (uint64_t)(me + 1) ^ (uint64_t)time(NULL);
	for (int i = 0; i < owner_iters && !atomic_load(&stop); i++)
		owner_step(me);
	return NULL;
}

/* ---- faulters ----------------------------------------------------------- */

static void
locked_access(int t)
{
	int s = rnd(NSLOT), pg = rnd(SP);
	struct slot *sl = &slots[s];
	volatile unsigned char *p = slot_addr(s) + (size_t)pg * ps;
	unsigned char mark = (unsigned char)(0x10 + t), want, got;

	if (pthread_rwlock_tryrdlock(&sl->lock) != 0)
		return;
	atomic_fetch_add(&n_locked, 1);
	switch (sl->type) {
	case T_CANARY:
		got = p[ps / 2];
		want = canary_byte((size_t)pg * ps + ps / 2);
		if (got != want)
			report_failure("canary slot %d page %d reads 0x%02x, not 0x%02x", s, pg, got, want);
		break;
	case T_VPRIV:
	case T_VSHARED:
	case T_ANON:
		want = sl->written[pg][t] == sl->gen ? mark : 0;
		got = p[t * MARK_OFF];
		if (got != want) {
			report_failure("slot %d (%s) page %d: faulter %d reads 0x%02x at its offset, "
				       "expected 0x%02x (%s)", s, type_names[sl->type], pg, t, got, want,
				       want ? "what it wrote there after the page was rescued" : "a fresh zero page");
			break;
		}
		if (sl->prot & PROT_WRITE) {
			p[t * MARK_OFF] = mark;
			sl->written[pg][t] = sl->gen;
			if (p[t * MARK_OFF] != mark)
				report_failure("slot %d page %d: a write did not stick", s, pg);
		}
		break;
	default:
		break;
	}
	pthread_rwlock_unlock(&sl->lock);
}

static void
unlocked_access(void)
{
	volatile unsigned char *p = slot_addr(rnd(NSLOT)) + (size_t)rnd(SP) * ps + (size_t)rnd((int)ps);
	int sig;

	atomic_fetch_add(&n_unlocked, 1);
	sig = sigsetjmp(probe_env, 1);
	if (sig) {
		atomic_fetch_add(sig == SIGBUS ? &n_unlocked_bus : &n_unlocked_segv, 1);
		return;
	}
	in_probe = 1;
	(void)*p;
	in_probe = 0;
}

static void *
faulter(void *arg)
{
	int t = (int)(intptr_t)arg;

	rng = 0x2545f4914f6cdd1dull * (uint64_t)(t + 11) ^ (uint64_t)time(NULL);
	if (t == 0) {
		sigset_t set;

		/* The kernel forces SIGBUS on a thread that blocks it; the
		 * library must still rescue (SPEC §6).  Locked accesses only:
		 * an unrescued SIGBUS here would kill the process. */
		sigemptyset(&set);
		sigaddset(&set, SIGBUS);
		pthread_sigmask(SIG_BLOCK, &set, NULL);
	}
	while (!atomic_load(&stop)) {
		if (t == 0 || rnd(100) < 55)
			locked_access(t);
		else
			unlocked_access();
	}
	return NULL;
}

/* ---- the stampede ------------------------------------------------------- */

/*
 * All faulters on one page of one slot, right after each recycle: one of
 * them rescues it and writes, the others fault at the same moment and find
 * it rescued (a stale fault, which must not replace the page again).  The
 * same threads meet at the same address round after round, which is what
 * a rescue that remembers earlier rounds gets wrong.
 */
#define NSTAMP	8	/* more threads than CPUs: some are preempted mid-fault */

/* The /proc/self/maps line of the VMA holding addr, for messages. */
static void
describe_page(uintptr_t addr, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[256];

	snprintf(out, len, "not mapped");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long a, b;

		if (sscanf(line, "%lx-%lx", &a, &b) == 2 && addr >= a && addr < b) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(out, len, "%.200s", line);
		}
	}
	if (f)
		fclose(f);
}
static atomic_ulong n_stampedes;
static atomic_bool stampede_stop;
static unsigned stamp_written[NSTAMP];	/* round in which thread t wrote its byte */

static void *
stampede_owner(void *arg)
{
	int rounds = (int)(intptr_t)arg;
	struct slot *sl = &slots[0];

	for (int i = 0; i < rounds && !atomic_load(&stop); i++) {
		pthread_rwlock_wrlock(&sl->lock);
		if (map_type(slot_addr(0), i % 2 ? T_VPRIV : T_VSHARED, PROT_READ | PROT_WRITE) == MAP_FAILED)
			report_failure("stampede: mmap: %s", strerror(errno));
		sl->type = i % 2 ? T_VPRIV : T_VSHARED;
		sl->prot = PROT_READ | PROT_WRITE;
		sl->gen++;
		atomic_fetch_add(&n_stampedes, 1);
		pthread_rwlock_unlock(&sl->lock);
		sched_yield();
	}
	atomic_store(&stampede_stop, true);
	return NULL;
}

static void *
stampede_faulter(void *arg)
{
	int t = (int)(intptr_t)arg;
	struct slot *sl = &slots[0];
	volatile unsigned char *p = slot_addr(0);
	unsigned char mark = (unsigned char)(0x10 + t);
	cpu_set_t cpus;

	/* Spread over the CPUs we have, so that faults really coincide
	 * (left alone, the scheduler tends to keep them on one). */
	if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) > 1) {
		int want = t % CPU_COUNT(&cpus), seen = 0;

		for (int c = 0; c < CPU_SETSIZE; c++) {
			if (!CPU_ISSET(c, &cpus))
				continue;
			if (seen++ == want) {
				CPU_ZERO(&cpus);
				CPU_SET(c, &cpus);
				pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
				break;
			}
		}
	}

	while (!atomic_load(&stampede_stop) && !atomic_load(&stop)) {
		unsigned char want, got;

		if (pthread_rwlock_rdlock(&sl->lock) != 0)
			continue;
		/* Until the first round, the slot is what the first phase left. */
		if ((sl->type != T_VPRIV && sl->type != T_VSHARED) || sl->prot != (PROT_READ | PROT_WRITE)) {
			pthread_rwlock_unlock(&sl->lock);
			sched_yield();
			continue;
		}
		want = stamp_written[t] == sl->gen ? mark : 0;
		got = p[t * MARK_OFF];
		if (got != want) {
			char bytes[NSTAMP * 6 + 1], vma[256];
			size_t used = 0;

			for (int u = 0; u < NSTAMP; u++)
				used += (size_t)snprintf(bytes + used, sizeof(bytes) - used, " %02x/%u",
							 p[u * MARK_OFF], stamp_written[u] == sl->gen);
			describe_page((uintptr_t)p, vma, sizeof(vma));
			report_failure("stampede round %u: faulter %d reads 0x%02x at its offset, expected "
				       "0x%02x (%s); every thread's byte/wrote-this-round:%s; the page: %s",
				       sl->gen, t, got, want,
				       want ? "what it wrote there after the page was rescued" : "a fresh zero page",
				       bytes, vma);
		} else if (!want) {
			p[t * MARK_OFF] = mark;
			stamp_written[t] = sl->gen;
			if (p[t * MARK_OFF] != mark)
				report_failure("stampede: a write did not stick");
		}
		pthread_rwlock_unlock(&sl->lock);
	}
	return NULL;
}

static void
stampede(int rounds)
{
	pthread_t o, f[NSTAMP];

	/* A fresh start: the first phase's faulters used the same bytes. */
	if (map_type(slot_addr(0), T_VPRIV, PROT_READ | PROT_WRITE) == MAP_FAILED)
		report_failure("stampede: mmap: %s", strerror(errno));
	slots[0].type = T_VPRIV;
	slots[0].prot = PROT_READ | PROT_WRITE;
	slots[0].gen++;
	for (int i = 0; i < NSTAMP; i++)
		pthread_create(&f[i], NULL, stampede_faulter, (void *)(intptr_t)i);
	pthread_create(&o, NULL, stampede_owner, (void *)(intptr_t)rounds);
	pthread_join(o, NULL);
	for (int i = 0; i < NSTAMP; i++)
		pthread_join(f[i], NULL);
}

/* ---- forker and truncator ----------------------------------------------- */

static void *
forker(void *arg)
{
	while (!atomic_load(&stop)) {
		pid_t pid = fork();
		int status;

		if (pid < 0) {
			report_failure("fork: %s", strerror(errno));
			break;
		}
		if (pid == 0) {
			volatile unsigned char *m;

			/* A library lock held across fork would hang here. */
			alarm(20);
			m = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NOSIGBUS, victim_fd, 0);
			if (m == MAP_FAILED)
				_exit(2);
			m[1] = 7;
			_exit(m[0] == 0 && m[1] == 7 ? 0 : 3);
		}
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR)
				break;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			report_failure("forked child: %s (expected a rescue and exit 0)",
				       nsbt_status_str(status));
			break;
		}
		atomic_fetch_add(&n_forks, 1);
	}
	return NULL;
}

static void *
truncator(void *arg)
{
	unsigned i = 0;

	while (!atomic_load(&stop)) {
		if (ftruncate(trunc_fd, (off_t)((i++ % 3) * ps)) < 0)
			report_failure("ftruncate: %s", strerror(errno));
		atomic_fetch_add(&n_truncs, 1);
		sched_yield();
	}
	return NULL;
}

/* ---- the run under the library (child) ---------------------------------- */

static unsigned char *
reserve_low(size_t len)
{
	static const uintptr_t where[] = { 1ul << 30, 3ul << 28, 1ul << 33, 1ul << 35 };

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		void *p = mmap((void *)where[i], len, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

		if (p == (void *)where[i])
			return p;
		if (p != MAP_FAILED)
			munmap(p, len);
	}
	return NULL;
}

static int
run(void)
{
	pthread_t owners[NOWNER], faulters[NFAULT], fk, tr;
	pthread_rwlockattr_t attr;
	struct sigaction sa = { .sa_sigaction = on_fault, .sa_flags = SA_SIGINFO | SA_NODEFER };
	struct nosigbus_stats st;
	size_t total = (NSLOT + NOWNER + 1) * SP * ps;
	char line[1024];
	int n;

	if (!nsbt_have_library())
		nsbt_fail("the library is not loaded");
	get_stats = (int (*)(struct nosigbus_stats *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_get_stats");
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	victim_fd = nsbt_file(NSBT_MEMFD, 0);
	canary_fd = nsbt_file(NSBT_MEMFD, SP * ps);
	trunc_fd = nsbt_file(NSBT_TMPFS, ps);
	/* Low addresses, so that nothing else is ever placed in a hole. */
	arena = reserve_low(total);
	if (!arena)
		nsbt_skip("cannot reserve %zu bytes at a low address", total);
	scratch = arena + (size_t)(NSLOT + 1) * SP * ps;
	/* Writers first: faulters re-take the read lock all the time, and
	 * glibc's default would starve the owners. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	for (int s = 0; s < NSLOT; s++) {
		pthread_rwlock_init(&slots[s].lock, &attr);
		slots[s].type = T_HOLE;
	}

	for (int i = 0; i < NFAULT; i++)
		pthread_create(&faulters[i], NULL, faulter, (void *)(intptr_t)i);
	pthread_create(&fk, NULL, forker, NULL);
	pthread_create(&tr, NULL, truncator, NULL);
	for (int i = 0; i < NOWNER; i++)
		pthread_create(&owners[i], NULL, owner, (void *)(intptr_t)i);
	for (int i = 0; i < NOWNER; i++)
		pthread_join(owners[i], NULL);
	atomic_store(&stop, true);
	for (int i = 0; i < NFAULT; i++)
		pthread_join(faulters[i], NULL);
	pthread_join(fk, NULL);
	pthread_join(tr, NULL);

	/* A last look at every canary. */
	for (int s = 0; s < NSLOT; s++)
		if (slots[s].type == T_CANARY)
			check_canary(s);
	if (!atomic_load(&failed)) {
		atomic_store(&stop, false);
		stampede(stampede_rounds);
	}

	get_stats(&st, sizeof(st));
	n = snprintf(line, sizeof(line),
		     "STATS %" PRIu64 " %" PRIu64 " %" PRIu64 " %lu %lu\n",
		     st.rescues, st.pages, st.failures, (unsigned long)(uintptr_t)arena,
		     (unsigned long)total);
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return 1;
	printf("concurrency: %d owner threads, %d faulter threads (1 with SIGBUS blocked), 1 forker, "
	       "1 truncator; %d slots of %d pages; NOSIGBUS_FILL=%s\n", NOWNER, NFAULT, NSLOT, SP, fill);
	printf("concurrency: %lu recycles (%lu via mremap), %lu slot-to-slot moves, %lu mprotects, "
	       "%lu canary checks\n", atomic_load(&n_recycles), atomic_load(&n_mremaps),
	       atomic_load(&n_moves), atomic_load(&n_mprotects), atomic_load(&n_canary_checks));
	printf("concurrency: %lu locked accesses, %lu unlocked (%lu SIGSEGV, %lu unrescued SIGBUS "
	       "handled), %lu forked children, %lu truncations\n", atomic_load(&n_locked),
	       atomic_load(&n_unlocked), atomic_load(&n_unlocked_segv), atomic_load(&n_unlocked_bus),
	       atomic_load(&n_forks), atomic_load(&n_truncs));
	printf("concurrency: stampede: %lu rounds of %d threads faulting on one page at once\n",
	       atomic_load(&n_stampedes), NSTAMP);
	printf("concurrency: library counters: %" PRIu64 " rescues, %" PRIu64 " pages, %" PRIu64
	       " failures, %" PRIu64 " protected mappings\n", st.rescues, st.pages, st.failures,
	       st.mappings);

	/* Unmap everything: no record may be left. */
	munmap(arena, total);
	get_stats(&st, sizeof(st));
	if (st.mappings != 0) {
		report_failure("%" PRIu64 " protected mappings left after unmapping everything",
			       st.mappings);
	}
	fflush(stdout);
	return atomic_load(&failed) ? 1 : 0;
}

/* ---- the parent: reads the child's log ---------------------------------- */

static int
check_log(FILE *log, pid_t child, int status)
{
	unsigned long long rescues = 0, pages = 0, bad_addr = 0, other = 0;
	unsigned long long s_rescues = 0, s_pages = 0, s_failures = 0;
	unsigned long arena_lo = 0, arena_len = 0;
	bool have_stats = false, ok = true;
	char pidtag[32], *line = NULL;
	size_t cap = 0;

	/* The arena's place comes last, in the STATS line. */
	while (getline(&line, &cap, log) > 0)
		if (strncmp(line, "STATS ", 6) == 0)
			have_stats = sscanf(line, "STATS %llu %llu %llu %lu %lu", &s_rescues, &s_pages,
					    &s_failures, &arena_lo, &arena_len) == 5;
	rewind(log);
	snprintf(pidtag, sizeof(pidtag), "[%d]: ", (int)child);
	while (getline(&line, &cap, log) > 0) {
		char *p = strstr(line, pidtag);

		if (strncmp(line, "STATS ", 6) == 0)
			continue;
		if (p && strncmp(p + strlen(pidtag), "rescued 0x", 10) == 0) {
			unsigned long long addr = strtoull(p + strlen(pidtag) + 8, NULL, 16);
			char *q = strstr(line, "(fill=");

			rescues++;
			q = q ? strstr(q, ", ") : NULL;
			pages += q ? strtoull(q + 2, NULL, 10) : 0;
			if (addr < arena_lo || addr >= arena_lo + arena_len) {
				if (bad_addr++ < 5)
					printf("FAIL: a rescue outside the arena [0x%lx, 0x%lx): %s",
					       arena_lo, arena_lo + arena_len, line);
			}
			continue;
		}
		if (strncmp(line, "nosigbus: ", 10) == 0 && strstr(line, "]: rescued 0x"))
			continue;	/* a forked child's rescue */
		if (p && strstr(line, " rescues, ") && strstr(line, " failures"))
			continue;	/* the summary at exit */
		other++;
		fputs(line, stdout);
	}
	free(line);

	printf("concurrency: %llu rescue lines in the log, %llu pages\n", rescues, pages);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		printf("FAIL: the test process %s\n", nsbt_status_str(status));
		return 1;
	}
	if (!have_stats) {
		printf("FAIL: no STATS line from the test process\n");
		return 1;
	}
	if (rescues != s_rescues || pages != s_pages) {
		printf("FAIL: nosigbus_get_stats() says %llu rescues and %llu pages; the log has "
		       "%llu and %llu\n", s_rescues, s_pages, rescues, pages);
		ok = false;
	}
	if (bad_addr) {
		printf("FAIL: %llu rescues outside the arena\n", bad_addr);
		ok = false;
	}
	if (s_failures) {
		printf("FAIL: %llu failed rescues\n", s_failures);
		ok = false;
	}
	if (rescues == 0 && s_rescues == 0) {
		printf("FAIL: no rescues at all: the test did not exercise anything\n");
		ok = false;
	} else if (rescues == 0) {
		printf("FAIL: NOSIGBUS_LOG=1 was set, yet the library logged none of its %llu rescues "
		       "(did it read its environment?)\n", s_rescues);
		ok = false;
	}
	if (other) {
		printf("FAIL: %llu unexpected lines on stderr (above)\n", other);
		ok = false;
	}
	return ok ? 0 : 1;
}

int
main(int argc, char **argv)
{
	int pfd[2], status;
	FILE *log;
	pid_t pid;

	ps = nsbt_page();
	for (;;) {
		if (argc > 2 && strcmp(argv[1], "--iterations") == 0)
			owner_iters = atoi(argv[2]), argc -= 2, argv += 2;
		else if (argc > 2 && strcmp(argv[1], "--fill") == 0)
			fill = argv[2], argc -= 2, argv += 2;
		else if (argc > 2 && strcmp(argv[1], "--stampede") == 0)
			stampede_rounds = atoi(argv[2]), argc -= 2, argv += 2;
		else
			break;
	}
	if (argc > 1 && strcmp(argv[1], "--child") == 0)
		return run();

	if (!getenv("NSB_PRELOAD"))
		nsbt_skip("NSB_PRELOAD is not set (run through meson test)");
	if (pipe(pfd) < 0)
		nsbt_fail("pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		char ld[8192], iters[16], rounds[16];
		const char *old = getenv("LD_PRELOAD");
		struct rlimit no_core = { 0, 0 };

		setrlimit(RLIMIT_CORE, &no_core);
		snprintf(ld, sizeof(ld), "%s%s%s", old ? old : "", old && *old ? ":" : "",
			 getenv("NSB_PRELOAD"));
		setenv("LD_PRELOAD", ld, 1);
		setenv("NOSIGBUS_LOG", "1", 1);
		unsetenv("NOSIGBUS_POLICY");
		setenv("NOSIGBUS_FILL", fill, 1);
		unsetenv("NOSIGBUS_STRICT");
		dup2(pfd[1], STDERR_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		snprintf(iters, sizeof(iters), "%d", owner_iters);
		snprintf(rounds, sizeof(rounds), "%d", stampede_rounds);
		execl("/proc/self/exe", "concurrency", "--iterations", iters, "--fill", fill,
		      "--stampede", rounds, "--child", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	log = fdopen(pfd[0], "r");
	status = 0;
	{
		/* Read everything first, then reap: the child blocks on a full pipe. */
		char *buf = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&buf, &len);
		char chunk[65536];
		size_t n;
		int r;

		while ((n = fread(chunk, 1, sizeof(chunk), log)) > 0)
			fwrite(chunk, 1, n, mem);
		fclose(log);
		fclose(mem);
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR)
				nsbt_fail("waitpid: %s", strerror(errno));
		mem = fmemopen(buf, len ? len : 1, "r");
		r = check_log(mem, pid, status);
		fclose(mem);
		free(buf);
		if (r == 0)
			printf("ok: concurrency: no rescue outside a live protected mapping, no lost write, "
			       "counters add up\n");
		return r;
	}
}
