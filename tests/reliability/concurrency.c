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
 * (no library lock held in the child) and that read every page of the
 * arena while the faulters rescue (a claim a parent's thread held on a
 * page at the fork must not make the child fault on it forever), and a
 * truncator thread changes the size of one file under its mappings.
 * A collector thread stops the world again and again, the way garbage
 * collectors do (issue 10 item 5, SPEC §5 "Progress"): SIGUSR1 to every
 * other thread, whose handler waits on a semaphore until released, while
 * the collector maps, rescues and unmaps; wherever a thread is stopped,
 * inside an interposed call too, nobody may wait for it.
 *
 * Owners check each canary before they recycle it: a rescue that landed
 * outside a live protected mapping would have replaced a canary page with
 * zeros.  The run is re-executed with NOSIGBUS_LOG=pages and its stderr read
 * here: the number of "rescued" lines, and their pages, must equal
 * nosigbus_get_stats(), every address must be in the arena, and no
 * failure may be counted.  After everything is unmapped no record is left.
 * A last phase, the stampede, has every faulter hit the same page at once
 * after each of many recycles (see stampede()).
 *
 * A hang fails the test with a message instead of hanging CI: the run's
 * threads count their progress in memory shared with the parent, whose
 * watchdog kills the run's process group (SIGKILL) after 30 s without
 * progress; the forker's watchdog does the same for a child that does not
 * finish within 20 s.
 *
 * Usage: concurrency [--iterations N] [--fill page|range] [--stampede N]
 *   recycles per owner thread (default 3000), NOSIGBUS_FILL, and rounds of
 *   the stampede (default 2000).
 */
#include <inttypes.h>
#include <pthread.h>
#include <poll.h>
#include <sched.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#include "nsbtest.h"

#define NSLOT		32
#define SP		4	/* pages per slot */
#define NOWNER		2
#define STALL_SECONDS	30	/* the parent's watchdog: no progress for this long */
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
static unsigned char *collector_area;	/* SP pages, after the scratch */
static _Atomic unsigned long *progress;	/* shared with the parent's watchdog */
/* progress[0] counts everything; these say what moved last, for the message. */
enum { PROG_ALL, PROG_OWNER, PROG_STAMPEDE, PROG_COLLECTOR, PROG_FORK };

static void
advance(int what)
{
	atomic_fetch_add(&progress[PROG_ALL], 1);
	atomic_fetch_add(&progress[what], 1);
}
static atomic_bool collector_stop;
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
static atomic_ulong n_stw_cycles, n_stw_stopped;

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

/* ---- stopping the world ---------------------------------------------------- */

/*
 * Every thread the collector may stop is registered while it runs.  The
 * collector holds reg_lock for a whole cycle, so a thread cannot leave
 * (and miss its signal) in the middle of one; a thread waiting for
 * reg_lock to leave is still stopped like the others (a handler runs in
 * the middle of a lock wait).
 */
#define MAXREG 32
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t reg_threads[MAXREG];
static bool reg_used[MAXREG];
static sem_t stw_stopped, stw_resume, stw_resumed;

struct start {
	void *(*fn)(void *);
	void *arg;
};

static void *
registered(void *arg)
{
	struct start st = *(struct start *)arg;
	int slot = 0;
	void *ret;

	free(arg);
	pthread_mutex_lock(&reg_lock);
	while (reg_used[slot])
		slot++;
	reg_used[slot] = true;
	reg_threads[slot] = pthread_self();
	pthread_mutex_unlock(&reg_lock);
	ret = st.fn(st.arg);
	pthread_mutex_lock(&reg_lock);
	reg_used[slot] = false;
	pthread_mutex_unlock(&reg_lock);
	return ret;
}

/* pthread_create, for a thread the collector stops too. */
static void
spawn(pthread_t *th, void *(*fn)(void *), void *arg)
{
	struct start *st = malloc(sizeof(*st));

	if (!st)
		nsbt_fail("malloc");
	st->fn = fn;
	st->arg = arg;
	if (pthread_create(th, NULL, registered, st) != 0)
		nsbt_fail("pthread_create: %s", strerror(errno));
}

/* [signal handler] A collector's suspend handler: stopped until released. */
static void
on_stop_the_world(int sig)
{
	int saved = errno;

	(void)sig;
	sem_post(&stw_stopped);
	while (sem_wait(&stw_resume) != 0)
		;
	sem_post(&stw_resumed);
	errno = saved;
}

/* While every other thread is stopped: map, rescue, change and unmap. */
static void
collector_calls(unsigned long cycle)
{
	unsigned char *p = collector_area, *u;

	if (mmap(p, SP * ps, PROT_READ | PROT_WRITE,
		 (cycle & 1 ? MAP_SHARED : MAP_PRIVATE) | MAP_FIXED | MAP_NOSIGBUS, victim_fd, 0) != p) {
		report_failure("collector: mmap: %s", strerror(errno));
		return;
	}
	if (p[(cycle % SP) * ps] != 0)
		report_failure("collector: a rescued page reads non-zero");
	if (mprotect(p, SP * ps, PROT_READ) != 0)
		report_failure("collector: mprotect: %s", strerror(errno));
	if (map_type(p, T_HOLE, PROT_NONE) == MAP_FAILED)
		report_failure("collector: mmap(hole): %s", strerror(errno));
	u = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (u == MAP_FAILED || munmap(u, ps) != 0)
		report_failure("collector: anonymous mmap/munmap: %s", strerror(errno));
}

/*
 * Cheap interposed calls that only look at the table (mprotect of an
 * unprotected page, a same-size mremap of it: lock-free checks, then the
 * system call), over and over, so that the collector often stops a
 * thread in the middle of one.
 */
static void *
table_reader(void *arg)
{
	unsigned char *none = mmap(NULL, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)arg;
	if (none == MAP_FAILED) {
		report_failure("table reader: mmap: %s", strerror(errno));
		return NULL;
	}
	while (!atomic_load(&stop))
		if (mprotect(none, ps, PROT_NONE) != 0 || mremap(none, ps, ps, 0) != none) {
			report_failure("table reader: mprotect/mremap: %s", strerror(errno));
			break;
		}
	munmap(none, ps);
	return NULL;
}

static void *
collector(void *arg)
{
	(void)arg;
	for (unsigned long c = 0; !atomic_load(&collector_stop); c++) {
		struct timespec pace = { 0, 300 * 1000 };
		int n = 0;

		pthread_mutex_lock(&reg_lock);
		for (int i = 0; i < MAXREG; i++)
			if (reg_used[i] && pthread_kill(reg_threads[i], SIGUSR1) == 0)
				n++;
		for (int i = 0; i < n; i++)
			while (sem_wait(&stw_stopped) != 0)
				;
		collector_calls(c);
		for (int i = 0; i < n; i++)
			sem_post(&stw_resume);
		for (int i = 0; i < n; i++)
			while (sem_wait(&stw_resumed) != 0)
				;
		pthread_mutex_unlock(&reg_lock);
		atomic_fetch_add(&n_stw_cycles, 1);
		atomic_fetch_add(&n_stw_stopped, (unsigned long)n);
		advance(PROG_COLLECTOR);
		/* Let the world run a little between stops. */
		nanosleep(&pace, NULL);
	}
	return NULL;
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
	for (int i = 0; i < owner_iters && !atomic_load(&stop); i++) {
		owner_step(me);
		advance(PROG_OWNER);
	}
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
		advance(PROG_STAMPEDE);
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
		spawn(&f[i], stampede_faulter, (void *)(intptr_t)i);
	spawn(&o, stampede_owner, (void *)(intptr_t)rounds);
	pthread_join(o, NULL);
	for (int i = 0; i < NSTAMP; i++)
		pthread_join(f[i], NULL);
}

/* ---- forker and truncator ----------------------------------------------- */

/* Reads p; a fault that is not rescued (a hole, an unprotected page) is caught. */
static void
probe_read(volatile unsigned char *p)
{
	if (sigsetjmp(probe_env, 1))
		return;
	in_probe = 1;
	(void)*p;
	in_probe = 0;
}

/*
 * The parent's watchdog for one forked child: its status, or -1 after
 * killing it (SIGKILL) when it is still running after `seconds` (a child
 * that spins in a fault never gets to a signal it could die of).
 */
static int
wait_watchdog(pid_t pid, int seconds, int *status)
{
	struct timespec nap = { 0, 1000 * 1000 }, t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > seconds) {
			nsbt_show_stacks(pid);
			kill(pid, SIGKILL);
			while (waitpid(pid, status, 0) < 0 && errno == EINTR)
				;
			return -1;
		}
		nanosleep(&nap, NULL);
	}
}

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

			/* Every page of the arena, while the parent's faulters
			 * rescue: a claim one of them held at the fork must not
			 * be this child's. */
			for (int s = 0; s < NSLOT; s++)
				for (int pg = 0; pg < SP; pg++)
					probe_read(slot_addr(s) + (size_t)pg * ps + 8);
			/* A library lock held across fork would hang here. */
			m = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NOSIGBUS, victim_fd, 0);
			if (m == MAP_FAILED)
				_exit(2);
			m[1] = 7;
			_exit(m[0] == 0 && m[1] == 7 ? 0 : 3);
		}
		if (wait_watchdog(pid, 20, &status) < 0) {
			report_failure("a child forked while the faulters rescue was still running after "
				       "20 s (killed with SIGKILL): it spins on a page, or waits for a "
				       "lock, that a thread of the parent held at the fork");
			break;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			report_failure("forked child: %s (expected a rescue and exit 0)",
				       nsbt_status_str(status));
			break;
		}
		atomic_fetch_add(&n_forks, 1);
		advance(PROG_FORK);
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
	pthread_t owners[NOWNER], faulters[NFAULT], fk, tr, coll, rd[2];
	pthread_rwlockattr_t attr;
	struct sigaction sa = { .sa_sigaction = on_fault, .sa_flags = SA_SIGINFO | SA_NODEFER };
	struct sigaction stw = { .sa_handler = on_stop_the_world, .sa_flags = SA_RESTART };
	struct nosigbus_stats st;
	size_t total = (NSLOT + NOWNER + 2) * SP * ps;
	char line[1024];
	int n;

	if (!nsbt_have_library())
		nsbt_fail("the library is not loaded");
	get_stats = (int (*)(struct nosigbus_stats *, size_t))dlsym(RTLD_DEFAULT, "nosigbus_get_stats");
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	sigemptyset(&stw.sa_mask);
	sigaction(SIGUSR1, &stw, NULL);
	if (sem_init(&stw_stopped, 0, 0) || sem_init(&stw_resume, 0, 0) || sem_init(&stw_resumed, 0, 0))
		nsbt_fail("sem_init: %s", strerror(errno));
	victim_fd = nsbt_file(NSBT_MEMFD, 0);
	canary_fd = nsbt_file(NSBT_MEMFD, SP * ps);
	trunc_fd = nsbt_file(NSBT_TMPFS, ps);
	/* Low addresses, so that nothing else is ever placed in a hole. */
	arena = reserve_low(total);
	if (!arena)
		nsbt_skip("cannot reserve %zu bytes at a low address", total);
	scratch = arena + (size_t)(NSLOT + 1) * SP * ps;
	collector_area = scratch + (size_t)NOWNER * SP * ps;
	/* Writers first: faulters re-take the read lock all the time, and
	 * glibc's default would starve the owners. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	for (int s = 0; s < NSLOT; s++) {
		pthread_rwlock_init(&slots[s].lock, &attr);
		slots[s].type = T_HOLE;
	}

	if (pthread_create(&coll, NULL, collector, NULL) != 0)
		nsbt_fail("pthread_create: %s", strerror(errno));
	for (int i = 0; i < NFAULT; i++)
		spawn(&faulters[i], faulter, (void *)(intptr_t)i);
	spawn(&fk, forker, NULL);
	spawn(&tr, truncator, NULL);
	spawn(&rd[0], table_reader, NULL);
	spawn(&rd[1], table_reader, NULL);
	for (int i = 0; i < NOWNER; i++)
		spawn(&owners[i], owner, (void *)(intptr_t)i);
	for (int i = 0; i < NOWNER; i++)
		pthread_join(owners[i], NULL);
	atomic_store(&stop, true);
	for (int i = 0; i < NFAULT; i++)
		pthread_join(faulters[i], NULL);
	pthread_join(fk, NULL);
	pthread_join(tr, NULL);
	pthread_join(rd[0], NULL);
	pthread_join(rd[1], NULL);

	/* A last look at every canary. */
	for (int s = 0; s < NSLOT; s++)
		if (slots[s].type == T_CANARY)
			check_canary(s);
	if (!atomic_load(&failed)) {
		atomic_store(&stop, false);
		stampede(stampede_rounds);
	}
	atomic_store(&collector_stop, true);
	pthread_join(coll, NULL);

	get_stats(&st, sizeof(st));
	n = snprintf(line, sizeof(line),
		     "STATS %" PRIu64 " %" PRIu64 " %" PRIu64 " %lu %lu\n",
		     st.rescues, st.pages, st.failures, (unsigned long)(uintptr_t)arena,
		     (unsigned long)total);
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return 1;
	printf("concurrency: %d owner threads, %d faulter threads (1 with SIGBUS blocked), 1 forker, "
	       "1 truncator, 2 table readers, 1 collector stopping the others; %d slots of %d pages; NOSIGBUS_FILL=%s\n",
	       NOWNER, NFAULT, NSLOT, SP, fill);
	printf("concurrency: %lu recycles (%lu via mremap), %lu slot-to-slot moves, %lu mprotects, "
	       "%lu canary checks\n", atomic_load(&n_recycles), atomic_load(&n_mremaps),
	       atomic_load(&n_moves), atomic_load(&n_mprotects), atomic_load(&n_canary_checks));
	printf("concurrency: %lu locked accesses, %lu unlocked (%lu SIGSEGV, %lu unrescued SIGBUS "
	       "handled), %lu forked children, %lu truncations\n", atomic_load(&n_locked),
	       atomic_load(&n_unlocked), atomic_load(&n_unlocked_segv), atomic_load(&n_unlocked_bus),
	       atomic_load(&n_forks), atomic_load(&n_truncs));
	printf("concurrency: stampede: %lu rounds of %d threads faulting on one page at once\n",
	       atomic_load(&n_stampedes), NSTAMP);
	printf("concurrency: stop the world: %lu cycles, %lu threads stopped in all; forked children "
	       "read every page of the arena while the faulters rescued\n",
	       atomic_load(&n_stw_cycles), atomic_load(&n_stw_stopped));
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
		if (strncmp(line, "nosigbus: ", 10) == 0 && strstr(line, "]: unmapped "))
			continue;	/* a mapping's last line */
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
		printf("FAIL: NOSIGBUS_LOG=pages was set, yet the library logged none of its %llu rescues "
		       "(did it read its environment?)\n", s_rescues);
		ok = false;
	}
	if (other) {
		printf("FAIL: %llu unexpected lines on stderr (above)\n", other);
		ok = false;
	}
	return ok ? 0 : 1;
}

/* The progress counter, in a memfd the parent passes down (or private). */
static void
map_progress(int fd)
{
	void *p = fd >= 0 ? mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
			  : mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		nsbt_fail("mmap(progress): %s", strerror(errno));
	progress = p;
}

int
main(int argc, char **argv)
{
	int pfd[2], status, progress_fd = -1;
	FILE *log;
	pid_t pid;

	ps = nsbt_page();
	for (;;) {
		if (argc > 2 && strcmp(argv[1], "--progress-fd") == 0)
			progress_fd = atoi(argv[2]), argc -= 2, argv += 2;
		else if (argc > 2 && strcmp(argv[1], "--iterations") == 0)
			owner_iters = atoi(argv[2]), argc -= 2, argv += 2;
		else if (argc > 2 && strcmp(argv[1], "--fill") == 0)
			fill = argv[2], argc -= 2, argv += 2;
		else if (argc > 2 && strcmp(argv[1], "--stampede") == 0)
			stampede_rounds = atoi(argv[2]), argc -= 2, argv += 2;
		else
			break;
	}
	if (argc > 1 && strcmp(argv[1], "--child") == 0) {
		map_progress(progress_fd);
		return run();
	}

	if (!getenv("NSB_PRELOAD"))
		nsbt_skip("NSB_PRELOAD is not set (run through meson test)");
	progress_fd = memfd_create("concurrency-progress", 0);
	if (progress_fd < 0 || ftruncate(progress_fd, (off_t)ps) != 0)
		nsbt_fail("memfd_create: %s", strerror(errno));
	map_progress(progress_fd);
	if (pipe(pfd) < 0)
		nsbt_fail("pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		nsbt_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		char ld[8192], iters[16], rounds[16], pfdarg[16];
		const char *old = getenv("LD_PRELOAD");
		struct rlimit no_core = { 0, 0 };

		setrlimit(RLIMIT_CORE, &no_core);
		snprintf(ld, sizeof(ld), "%s%s%s", old ? old : "", old && *old ? ":" : "",
			 getenv("NSB_PRELOAD"));
		setenv("LD_PRELOAD", ld, 1);
		setenv("NOSIGBUS_LOG", "pages", 1);	/* a line per rescue, to add up */
		/* Its "unprotected" slots are memfds mapped without the flag:
		 * protected only under the policy flag. */
		setenv("NOSIGBUS_POLICY", "flag", 1);
		setenv("NOSIGBUS_FILL", fill, 1);
		unsetenv("NOSIGBUS_STRICT");
		dup2(pfd[1], STDERR_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		snprintf(iters, sizeof(iters), "%d", owner_iters);
		snprintf(rounds, sizeof(rounds), "%d", stampede_rounds);
		snprintf(pfdarg, sizeof(pfdarg), "%d", progress_fd);
		/* Its own process group: the watchdog kills it with its children. */
		setpgid(0, 0);
		execl("/proc/self/exe", "concurrency", "--progress-fd", pfdarg, "--iterations", iters,
		      "--fill", fill, "--stampede", rounds, "--child", (char *)NULL);
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
		unsigned long seen = 0;
		struct timespec t0, t;
		bool hung = false;
		int r;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			struct pollfd pl = { pfd[0], POLLIN, 0 };
			ssize_t n;

			/* The watchdog: progress must change at least every STALL_SECONDS. */
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (atomic_load(&progress[PROG_ALL]) != seen) {
				seen = atomic_load(&progress[PROG_ALL]);
				t0 = t;
			} else if (!hung && t.tv_sec - t0.tv_sec > STALL_SECONDS) {
				hung = true;
				nsbt_show_stacks(pid);
				kill(-pid, SIGKILL);
				kill(pid, SIGKILL);
			}
			if (poll(&pl, 1, 500) <= 0)
				continue;
			n = read(pfd[0], chunk, sizeof(chunk));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			fwrite(chunk, 1, (size_t)n, mem);
		}
		fclose(log);
		fclose(mem);
		while (waitpid(pid, &status, 0) < 0)
			if (errno != EINTR)
				nsbt_fail("waitpid: %s", strerror(errno));
		if (hung) {
			fwrite(buf, 1, len, stdout);
			printf("FAIL: the test process made no progress for %d s: a hang (a thread "
			       "waiting for a stopped one, a child spinning in a fault, a lock held "
			       "across fork); the watchdog killed its process group with SIGKILL.  "
			       "Progress when it stopped: %lu owner steps, %lu stampede rounds, %lu "
			       "stop-the-world cycles, %lu forked children\n", STALL_SECONDS,
			       atomic_load(&progress[PROG_OWNER]), atomic_load(&progress[PROG_STAMPEDE]),
			       atomic_load(&progress[PROG_COLLECTOR]), atomic_load(&progress[PROG_FORK]));
			free(buf);
			return 1;
		}
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
