/* SPDX-License-Identifier: MIT */
/*
 * children.c - the measurements.  Each runs in a child process that the
 * driver (bench.c) started with the environment of one configuration, so
 * that NOSIGBUS_FILL, read once when the library starts, can differ.
 *
 * Every figure is a whole loop over many pages or call pairs timed with
 * CLOCK_MONOTONIC, printed as "key value" on stdout (the driver's pipe).
 * Each rescue figure has its baseline measured in the same process,
 * just before it, with the same access and order.
 *
 * Kinds:
 *   rescue     (library)    baselines and rescues, MAP_PRIVATE/MAP_SHARED,
 *                           read/write, sequential/random; the compositor's
 *                           first read of a truncated 4K buffer
 *   scale      (library)    table memory; rescue with N other mappings live
 *   floor      (no library) the parts of a rescue, with a minimal handler
 *   interpose  (either)     mmap/mprotect/mremap pairs, 0 or many live
 *   startup    (no library) starts a process that does nothing, many times,
 *                           under no preload, the empty library, libnosigbus
 *   ops        (either)     what protected mappings cost around the rescue
 *                           (issue 24): mmap+munmap of memfds, /dev/shm and
 *                           disk files, a compositor's pool cycle, mprotect
 *                           that succeeds and that fails next to a protected
 *                           mapping with many VMAs below, hostile frames,
 *                           recvmsg with and without a descriptor, a pair
 *                           with a signal handler installed and with many
 *                           distinct files mapped
 *   protect    (library)    nosigbus_protect() over a region of many VMAs
 * and, in exact.c: exact (bare, exact floor and library in one process),
 * spawn (children to count system calls of), pass (passes after a fill).
 * With NSB_BENCH_FRAME_MEM, the frame rows also print the growth of VmRSS,
 * VmSize and the records over more hostile frames.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <linux/magic.h>
#include <ucontext.h>
#include <unistd.h>

#include "nosigbus.h"
#include "bench.h"

static size_t page;
static int (*get_stats)(struct nosigbus_stats *stats, size_t size);
static int (*protect)(void *addr, size_t len);

void
bench_params_init(struct bench_params *p, bool quick)
{
	static const size_t full[BENCH_SCALE_STEPS] = { 1, 1000, 100000 };
	static const size_t small[BENCH_SCALE_STEPS] = { 1, 10, 1000 };

	p->quick = quick;
	memcpy(p->scale, quick ? small : full, sizeof(p->scale));
	p->mem_records = p->scale[BENCH_SCALE_STEPS - 1];
	p->ip_live = quick ? 100 : 10000;
	p->ip_pairs = quick ? 1000 : 10000;
	p->ip_batches = quick ? 1 : 9;
	p->startup_n = quick ? 5 : 200;
	p->protect_vmas = quick ? 100 : 10000;
	p->ops_pairs = quick ? 200 : 2000;
	p->ops_batches = quick ? 1 : 7;
	p->ops_frames = quick ? 1 : 5;
}

double
bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

void
bench_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("nsb-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void __attribute__((format(printf, 2, 3)))
emit(double value, const char *fmt, ...)
{
	char key[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(key, sizeof(key), fmt, ap);
	va_end(ap);
	printf("%s %.17g\n", key, value);
}

/* Finds the library through the symbol table, so that one binary serves
 * the runs with and without it. */
static void
stats_init(bool want_library)
{
	*(void **)&get_stats = dlsym(RTLD_DEFAULT, "nosigbus_get_stats");
	*(void **)&protect = dlsym(RTLD_DEFAULT, "nosigbus_protect");
	if (want_library && !get_stats)
		bench_die("libnosigbus is not loaded (LD_PRELOAD=%s)",
		    getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "");
	if (!want_library && get_stats)
		bench_die("libnosigbus is loaded in a run that must go without it");
}

static struct nosigbus_stats
stats(void)
{
	struct nosigbus_stats s = { 0 };

	if (get_stats && get_stats(&s, sizeof(s)) < 0)
		bench_die("nosigbus_get_stats: %s", strerror(errno));
	return s;
}

/* A fixed random permutation of the pages, the same in every process. */
static size_t *
permutation(size_t n)
{
	size_t *order = malloc(n * sizeof(*order));
	uint64_t x = 0x9e3779b97f4a7c15u;

	if (!order)
		bench_die("out of memory");
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		j = (size_t)(x % (i + 1));
		size_t t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	return order;
}

/*
 * Touches one byte of each of n pages at p, in order[] when given, and
 * returns nanoseconds per page.  Reads must all see zeros: every page read
 * here is a fresh zero page, anonymous or rescued.
 */
static double
touch(char *p, size_t n, const size_t *order, bool write)
{
	volatile char *v = p;
	unsigned int sum = 0;
	double t0, t1;

	t0 = bench_now();
	if (write && order)
		for (size_t i = 0; i < n; i++)
			v[order[i] * page] = 1;
	else if (write)
		for (size_t i = 0; i < n; i++)
			v[i * page] = 1;
	else if (order)
		for (size_t i = 0; i < n; i++)
			sum += (unsigned char)v[order[i] * page];
	else
		for (size_t i = 0; i < n; i++)
			sum += (unsigned char)v[i * page];
	t1 = bench_now();
	if (sum != 0)
		bench_die("read %u from pages that must read as zero", sum);
	return (t1 - t0) / (double)n;
}

/* Pages whose write of 1 did not stick (a rescue that lost data). */
static size_t
lost_writes(const char *p, size_t n)
{
	size_t lost = 0;

	for (size_t i = 0; i < n; i++)
		lost += ((const volatile char *)p)[i * page] != 1;
	return lost;
}

/* The unit: first-touch faults on fresh anonymous memory, one per page. */
static double
baseline(size_t size, const size_t *order, bool write)
{
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	double t;

	if (p == MAP_FAILED)
		bench_die("mmap %zu bytes: %s", size, strerror(errno));
	/* A transparent huge page would answer 512 pages with one fault;
	 * a rescue is paid per page, so the unit must be too. */
	madvise(p, size, MADV_NOHUGEPAGE);
	t = touch(p, size / page, order, write);
	munmap(p, size);
	return t;
}

/*
 * Writes, then frees, twice the measured size of anonymous memory, so that
 * the measurements get pages the kernel (and, in a virtual machine, the
 * hypervisor) has handed out before: in a fresh process the first write
 * loop otherwise measured 4x slower on a VM whose memory the host backs
 * lazily, whichever loop came first.
 */
static void
warm_up(size_t size)
{
	baseline(2 * size, NULL, true);
}

/*
 * A memfd mapping that faults beyond EOF on every page: the file is
 * size bytes at mmap time and truncated to 0 right after, as a client
 * does to a compositor.
 */
static char *
truncated_mapping(size_t size, int flags, int *fd)
{
	char *p;

	*fd = memfd_create("nsb-bench", MFD_CLOEXEC);
	if (*fd < 0)
		bench_die("memfd_create: %s", strerror(errno));
	if (ftruncate(*fd, (off_t)size) < 0)
		bench_die("ftruncate: %s", strerror(errno));
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, flags, *fd, 0);
	if (p == MAP_FAILED)
		bench_die("mmap of a memfd: %s", strerror(errno));
	if (ftruncate(*fd, 0) < 0)
		bench_die("ftruncate: %s", strerror(errno));
	return p;
}

static void
drop_mapping(char *p, size_t size, int fd)
{
	munmap(p, size);
	close(fd);
}

struct figure {
	double ns;		/* per page */
	uint64_t rescues;	/* signals the library answered */
	size_t lost;		/* pages whose write did not stick */
};

/* One rescue run over a fresh truncated mapping (library loaded). */
static struct figure
rescue(size_t size, bool shared, const size_t *order, bool write)
{
	struct figure f = { 0 };
	uint64_t before;
	char *p;
	int fd;

	p = truncated_mapping(size, (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_NOSIGBUS, &fd);
	before = stats().rescues;
	f.ns = touch(p, size / page, order, write);
	f.rescues = stats().rescues - before;
	if (write)
		f.lost = lost_writes(p, size / page);
	drop_mapping(p, size, fd);
	return f;
}

/* With the library: small rescues first, so that no measured rescue
 * pays for the first signal or the library's first use of its paths. */
static void
rescue_warm_up(void)
{
	rescue(64 * page, false, NULL, true);
	rescue(64 * page, true, NULL, false);
}

static const char *
access_name(bool write)
{
	return write ? "write" : "read";
}

static const char *
order_name(const size_t *order)
{
	return order ? "rand" : "seq";
}

/* ---- rescue: the library's cost per page, both fills, both sharings --- */

/*
 * The first frame after a client truncates its buffer: the compositor
 * reads every page of a 3840x2160x4 buffer once, in order, through the
 * MAP_SHARED read-write mapping of the client's memfd (wayland-shm.c maps
 * it that way).  Whole milliseconds, next to fresh anonymous memory.
 */
static void
compositor(const struct bench_params *bp)
{
	size_t size = (3840 * 2160 * 4 + page - 1) / page * page, n;
	struct figure f;

	if (bp->quick)
		size = bp->size;	/* the code path, not the figure */
	n = size / page;
	emit((double)n, "compositor.pages");
	emit(baseline(size, NULL, false) * (double)n / 1e6, "compositor.base");
	f = rescue(size, true, NULL, false);
	emit(f.ns * (double)n / 1e6, "compositor");
	emit((double)f.rescues, "n.compositor");
}

static void
child_rescue(const struct bench_params *bp)
{
	size_t *perm = permutation(bp->size / page);

	stats_init(true);
	warm_up(bp->size);
	rescue_warm_up();
	/* The four access patterns and the two sharings take turns going
	 * first from round to round, so drift does not favour one. */
	for (int k = 0; k < 4; k++) {
		int c = (k + bp->round) % 4;
		bool write = c & 1;
		const size_t *order = c & 2 ? perm : NULL;
		const char *a = access_name(write), *o = order_name(order);

		emit(baseline(bp->size, order, write), "base.%s.%s", a, o);
		for (int s = 0; s < 2; s++) {
			bool shared = (s + bp->round) % 2;
			const char *m = shared ? "shared" : "private";
			struct figure f = rescue(bp->size, shared, order, write);

			emit(f.ns, "%s.%s.%s", m, a, o);
			emit((double)f.rescues, "n.%s.%s.%s", m, a, o);
			emit((double)f.lost, "lost.%s.%s.%s", m, a, o);
		}
	}
	free(perm);
	compositor(bp);
}

/* ---- scale: table memory and lookups with many records ---------------- */

static void **live;
static size_t live_n;

static void
live_reserve(size_t n)
{
	/* Allocated and touched before any memory reading, so that the
	 * benchmark's own bookkeeping is not counted as the library's. */
	live = malloc(n * sizeof(*live));
	if (!live)
		bench_die("out of memory");
	memset(live, 0, n * sizeof(*live));
}

/*
 * n one-page anonymous mappings, each its own protected record (when
 * flags has MAP_NOSIGBUS and the library is loaded).  mmap(NULL) hands
 * out addresses top-down, so they are adjacent and the kernel merges them
 * into a few VMAs: vm.max_map_count is no limit.  They are never touched,
 * so they add no anonymous memory of their own.
 */
static void
live_create(size_t n, int flags)
{
	for (size_t i = 0; i < n; i++) {
		void *p = mmap(NULL, page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);

		if (p == MAP_FAILED)
			bench_die("mmap of live mapping %zu: %s", i, strerror(errno));
		live[live_n++] = p;
	}
}

/*
 * Unmaps in the reverse order of creation, last created first.  The
 * table's update cost depends on the order: it keeps its records sorted by
 * address, in the order in which top-down mmap(NULL) hands addresses out,
 * so creating and then removing the newest record touches only the end of
 * the table, while removing the oldest first would move every later record
 * on each munmap (O(n) each, O(n^2) for the teardown).  Lookups, which is
 * what a rescue pays, do not depend on it.
 */
static void
live_destroy(void)
{
	while (live_n > 0)
		munmap(live[--live_n], page);
}

/* Anonymous memory of this process in KiB (smaps_rollup, else RssAnon).
 * Read with read(2) into the stack: stdio would allocate. */
static long
anon_kib(void)
{
	static const char *const files[] = { "/proc/self/smaps_rollup", "/proc/self/status" };
	static const char *const keys[] = { "\nAnonymous:", "\nRssAnon:" };
	char buf[8192];

	for (int i = 0; i < 2; i++) {
		int fd = open(files[i], O_RDONLY | O_CLOEXEC);
		ssize_t n, len = 0;
		char *at;

		if (fd < 0)
			continue;
		while ((n = read(fd, buf + len, sizeof(buf) - 1 - (size_t)len)) > 0)
			len += n;
		close(fd);
		buf[len] = '\0';
		at = strstr(buf, keys[i]);
		if (at)
			return strtol(at + strlen(keys[i]), NULL, 10);
	}
	bench_die("cannot read anonymous memory from /proc/self");
}

static void
child_scale(const struct bench_params *bp)
{
	size_t most = bp->mem_records;
	long before, after;

	stats_init(true);
	for (int i = 0; i < BENCH_SCALE_STEPS; i++)
		if (bp->scale[i] > most)
			most = bp->scale[i];
	live_reserve(most);
	warm_up(bp->size);

	/* Memory first, while the process has never had records: the table
	 * grows from nothing, as in a real program. */
	before = anon_kib();
	live_create(bp->mem_records, MAP_NOSIGBUS);
	after = anon_kib();
	emit((double)(after - before) * 1024.0 / (double)bp->mem_records, "mem.bytes");
	emit((double)stats().mappings, "mem.records");
	live_destroy();
	rescue_warm_up();

	for (int k = 0; k < BENCH_SCALE_STEPS; k++) {
		int i = (k + bp->round) % BENCH_SCALE_STEPS;
		struct figure f;

		live_create(bp->scale[i], MAP_NOSIGBUS);
		emit(baseline(bp->size, NULL, false), "lookup.%d.base", i);
		f = rescue(bp->size, false, NULL, false);
		emit(f.ns, "lookup.%d", i);
		/* The records live during the rescue, the target's own included. */
		emit((double)stats().mappings + 1, "lookup.%d.records", i);
		live_destroy();
	}
}

/* ---- floor: what any user-space rescue pays, without the library ------ */

/*
 * A load of one byte whose end is known, so that the handler can resume
 * after it without decoding instructions: this times a failed fault,
 * SIGBUS delivery and sigreturn, and nothing else.
 */
#if defined(__x86_64__) || defined(__aarch64__)
#define HAVE_PROBE 1
unsigned int nsbb_probe(const volatile char *p);
extern const char nsbb_probe_end[];
__asm__(
	".text\n"
	".globl nsbb_probe\n"
	".hidden nsbb_probe\n"
	".type nsbb_probe, %function\n"
	"nsbb_probe:\n"
#if defined(__x86_64__)
	"	movzbl (%rdi), %eax\n"
#else
	"	ldrb w0, [x0]\n"
#endif
	".globl nsbb_probe_end\n"
	".hidden nsbb_probe_end\n"
	"nsbb_probe_end:\n"
	"	ret\n"
	".size nsbb_probe, . - nsbb_probe\n");

/* Signal context: moves the interrupted load's pc past it. */
static void
skip_handler(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;

	(void)si;
#if defined(__x86_64__)
	if (uc->uc_mcontext.gregs[REG_RIP] == (greg_t)(uintptr_t)nsbb_probe) {
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)nsbb_probe_end;
		return;
	}
#else
	if (uc->uc_mcontext.pc == (uintptr_t)nsbb_probe) {
		uc->uc_mcontext.pc = (uintptr_t)nsbb_probe_end;
		return;
	}
#endif
	signal(sig, SIG_DFL);
}
#endif

/* Signal context: the least a rescue can do, one mmap of the page. */
static void
minimal_handler(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr & ~(uintptr_t)(page - 1);

	(void)uc;
	if (si->si_code != BUS_ADRERR ||
	    mmap((void *)a, page, PROT_READ | PROT_WRITE,
		 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
		signal(sig, SIG_DFL);
}

static void
set_handler(void (*fn)(int, siginfo_t *, void *))
{
	struct sigaction sa = { 0 };

	sa.sa_sigaction = fn;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, NULL) < 0)
		bench_die("sigaction: %s", strerror(errno));
}

static void
child_floor(const struct bench_params *bp)
{
	size_t n = bp->size / page;
	size_t *perm = permutation(n);
	char *p;
	double t0;
	int fd;

	stats_init(false);
	warm_up(bp->size);
	for (int k = 0; k < 4; k++) {
		int c = (k + bp->round) % 4;
		bool write = c & 1;
		const size_t *order = c & 2 ? perm : NULL;
		const char *a = access_name(write), *o = order_name(order);

		emit(baseline(bp->size, order, write), "base.%s.%s", a, o);
		set_handler(minimal_handler);
		for (int s = 0; s < 2; s++) {
			bool shared = (s + bp->round) % 2;

			p = truncated_mapping(bp->size, shared ? MAP_SHARED : MAP_PRIVATE, &fd);
			emit(touch(p, n, order, write), "minimal.%s.%s.%s",
			     shared ? "shared" : "private", a, o);
			drop_mapping(p, bp->size, fd);
		}
		signal(SIGBUS, SIG_DFL);
	}

#ifdef HAVE_PROBE
	set_handler(skip_handler);
	p = truncated_mapping(bp->size, MAP_PRIVATE, &fd);
	t0 = bench_now();
	for (size_t i = 0; i < n; i++)
		nsbb_probe(p + i * page);
	emit((bench_now() - t0) / (double)n, "signal");
	drop_mapping(p, bp->size, fd);
	signal(SIGBUS, SIG_DFL);
#endif

	/* The replacement alone, in the situation of a sequential rescue:
	 * each call splits the file mapping and extends the anonymous one. */
	p = truncated_mapping(bp->size, MAP_PRIVATE, &fd);
	t0 = bench_now();
	for (size_t i = 0; i < n; i++)
		if (mmap(p + i * page, page, PROT_READ | PROT_WRITE,
			 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
			bench_die("mmap MAP_FIXED: %s", strerror(errno));
	emit((bench_now() - t0) / (double)n, "mmap");
	drop_mapping(p, bp->size, fd);
	free(perm);
}

/* ---- interpose: the price of the shims when nothing is rescued -------- */

/*
 * The kernel's share of a call pair depends on the neighbours of the pages
 * involved (a new anonymous page next to another one merges with it, an
 * mprotect in the middle of one splits it), and the library's own mappings
 * change who the neighbours of mmap(NULL) are: measured that way, the pairs
 * came out up to 2x *faster* with the library.  So every pair works in a
 * hole of its own between two PROT_NONE guard pages, which never merge with
 * a read-write page, and the kernel does the same work in both processes.
 */
struct hole {
	char *base;		/* guard, then `pages` free pages, then guard */
	size_t pages;
};

static struct hole
hole_make(size_t pages)
{
	struct hole h = { NULL, pages };

	h.base = mmap(NULL, (pages + 2) * page, PROT_NONE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h.base == MAP_FAILED || munmap(h.base + page, pages * page) < 0)
		bench_die("reserving a guarded hole: %s", strerror(errno));
	return h;
}

static void
hole_drop(struct hole h)
{
	munmap(h.base, (h.pages + 2) * page);
}

/* mmap with the hole as hint (the kernel takes a free hint) and munmap. */
static double
pairs_mmap(size_t k)
{
	struct hole h = hole_make(1);
	char *want = h.base + page;
	double t0, t;

	t0 = bench_now();
	for (size_t i = 0; i < k; i++) {
		void *p = mmap(want, page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p != want)
			bench_die("mmap did not take the free hint: %s", strerror(errno));
		munmap(p, page);
	}
	t = (bench_now() - t0) / (double)k;
	hole_drop(h);
	return t;
}

static char *
hole_fill(struct hole h)
{
	char *p = mmap(h.base + page, page, PROT_READ | PROT_WRITE,
		       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	return p;
}

static double
pairs_mprotect(size_t k)
{
	struct hole h = hole_make(1);
	char *p = hole_fill(h);
	double t0, t;

	t0 = bench_now();
	for (size_t i = 0; i < k; i++)
		if (mprotect(p, page, PROT_READ) < 0 ||
		    mprotect(p, page, PROT_READ | PROT_WRITE) < 0)
			bench_die("mprotect: %s", strerror(errno));
	t = (bench_now() - t0) / (double)k;
	hole_drop(h);
	return t;
}

/* Grow by a page into the free one after it, in place, and shrink back. */
static double
pairs_mremap(size_t k)
{
	struct hole h = hole_make(2);
	char *p = hole_fill(h);
	double t0, t;

	t0 = bench_now();
	for (size_t i = 0; i < k; i++)
		if (mremap(p, page, 2 * page, 0) != p ||
		    mremap(p, 2 * page, page, 0) != p)
			bench_die("mremap in place: %s", strerror(errno));
	t = (bench_now() - t0) / (double)k;
	hole_drop(h);
	return t;
}

static void
child_interpose(const struct bench_params *bp)
{
	static const char *const names[] = { "mmap", "mprotect", "mremap" };
	static double (*const fns[])(size_t) = { pairs_mmap, pairs_mprotect, pairs_mremap };
	bool library = getenv("LD_PRELOAD") != NULL;
	double best = 0;

	stats_init(library);
	live_reserve(bp->ip_live);
	for (int l = 0; l < 2; l++) {
		/* Without the library the flag is left out: the library strips
		 * it, so the kernel sees the same calls in both processes. */
		if (l == 1)
			live_create(bp->ip_live, library ? MAP_NOSIGBUS : 0);
		for (int k = 0; k < 3; k++) {
			int i = (k + bp->round) % 3;

			fns[i](bp->ip_pairs / 10 + 1);	/* warm up */
			/* The fastest batch: other processes on the machine
			 * only ever add time, and a 3% target cannot be
			 * seen through their noise with a median. */
			for (int b = 0; b < bp->ip_batches; b++) {
				double t = fns[i](bp->ip_pairs);

				best = b == 0 || t < best ? t : best;
			}
			emit(best, "ip.%d.%s", l, names[i]);
		}
		if (l == 1 && library)
			emit((double)stats().mappings, "ip.records");
		live_destroy();
	}
}

/* ---- ops: what protected mappings cost around the rescue ------------ */

/*
 * Every figure is the fastest of ops_batches batches of ops_pairs
 * operations (as for the interposition figures: other processes only add
 * time), in processes with and without the library that alternate (ABBA),
 * the calls the same in both.  Each works in a guarded hole of its own
 * (hole_make), as the interposition pairs do.
 */
typedef void (*op_fn)(void *ctx);

static double
best_of_n(const struct bench_params *bp, op_fn fn, void *ctx, size_t n)
{
	double best = 0;

	for (size_t i = 0; i < n / 10 + 1; i++)
		fn(ctx);	/* warm up */
	for (int b = 0; b < bp->ops_batches; b++) {
		double t0 = bench_now(), t;

		for (size_t i = 0; i < n; i++)
			fn(ctx);
		t = (bench_now() - t0) / (double)n;
		best = b == 0 || t < best ? t : best;
	}
	return best;
}

static double
best_of(const struct bench_params *bp, op_fn fn, void *ctx)
{
	return best_of_n(bp, fn, ctx, bp->ops_pairs);
}

struct map_ctx {
	int fd;
	char *want;
	size_t len;
};

static void
op_map(void *arg)
{
	struct map_ctx *c = arg;
	void *p = mmap(c->want, c->len, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);

	if (p != c->want)
		bench_die("mmap did not take the free hint: %s", strerror(errno));
	munmap(p, c->len);
}

static void
map_rows(const struct bench_params *bp, int fd, const char *name)
{
	static const size_t lens[] = { 1, 256 };	/* pages: one, 1 MiB of 4 KiB */

	for (int i = 0; i < 2; i++) {
		size_t pages = i ? (1 << 20) / page : lens[0];
		struct hole h = hole_make(pages);
		struct map_ctx c = { fd, h.base + page, pages * page };

		emit(best_of(bp, op_map, &c), "ops.%s.%s", name, i ? "mib" : "page");
		hole_drop(h);
	}
}

/* The compositor's whole work for a pool: the client's memfd, its size,
 * the compositor's mapping, gone again; with closed_first, the way
 * libwayland-server takes a client's pool: the descriptor closed as soon
 * as the pool is mapped (the library keeps one of its own then:
 * files.c), the mapping gone later. */
static void
pool_cycle(const struct map_ctx *c, bool closed_first)
{
	int fd = memfd_create("nsb-bench-pool", MFD_CLOEXEC);
	void *p;

	if (fd < 0 || ftruncate(fd, (off_t)c->len) < 0)
		bench_die("memfd_create: %s", strerror(errno));
	p = mmap(c->want, c->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p != c->want)
		bench_die("mmap did not take the free hint: %s", strerror(errno));
	if (closed_first)
		close(fd);
	munmap(p, c->len);
	if (!closed_first)
		close(fd);
}

static void
op_pool(void *arg)
{
	pool_cycle(arg, false);
}

static void
op_pool_closed(void *arg)
{
	pool_cycle(arg, true);
}

/*
 * A program that maps many distinct files (issue 24): the same pair as
 * map_rows, of one more memfd page, with n other memfds mapped (their
 * descriptors closed, as a compositor closes a pool's).  The pair's
 * mapping lies above all of theirs, where a new record goes first in the
 * table's order.
 */
static void
files_rows(const struct bench_params *bp, int fd)
{
	static const size_t steps[] = { 100, 1000, 10000 };
	struct hole h = hole_make(1);
	struct map_ctx c = { fd, h.base + page, page };
	size_t have = 0, most = bp->quick ? steps[2] / 10 : steps[2];
	/* Their place, below the pair's (the kernel would put a one-page
	 * mapping in the pair's hole). */
	char *region = mmap(NULL, most * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (region == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	for (int i = 0; i < 3; i++) {
		size_t want = bp->quick ? steps[i] / 10 : steps[i];

		for (; have < want; have++) {
			int f = memfd_create("nsb-bench-files", MFD_CLOEXEC);

			if (f < 0 || ftruncate(f, (off_t)page) < 0 ||
			    mmap(region + have * page, page, PROT_READ, MAP_SHARED | MAP_FIXED, f,
				 0) == MAP_FAILED)
				bench_die("mapping file %zu: %s", have, strerror(errno));
			close(f);
		}
		emit(best_of(bp, op_map, &c), "ops.files.%d", i);
		emit((double)have, "ops.files.%d.n", i);
	}
	/* The mappings stay until the process exits. */
	hole_drop(h);
}

/* What a signal handler of the program changes (the table's lock blocks
 * signals only in a process that has one: process.c). */
static void
on_usr1(int sig)
{
	(void)sig;
}

static void
handler_rows(const struct bench_params *bp, int fd)
{
	struct sigaction sa;
	struct hole h = hole_make(1);
	struct map_ctx c = { fd, h.base + page, page };

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) < 0)
		bench_die("sigaction: %s", strerror(errno));
	emit(best_of(bp, op_map, &c), "ops.handler.memfd");
	hole_drop(h);
}

/* recvmsg of a small message (what a Wayland request is), with no
 * descriptor or with one memfd (a client's new pool), over a socket pair;
 * the sender's sendmsg and the close of what arrived are timed too. */
struct recv_ctx {
	int sock[2];
	int pass;	/* the descriptor sent, or -1 */
};

static void
op_recv(void *arg)
{
	struct recv_ctx *c = arg;
	char data[16] = "request", in[64];
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} out_ctl, in_ctl;
	struct iovec iov = { data, sizeof(data) }, iov_in = { in, sizeof(in) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct msghdr r = { .msg_iov = &iov_in, .msg_iovlen = 1,
			    .msg_control = in_ctl.buf, .msg_controllen = sizeof(in_ctl.buf) };

	if (c->pass >= 0) {
		struct cmsghdr *h;

		memset(&out_ctl, 0, sizeof(out_ctl));
		m.msg_control = out_ctl.buf;
		m.msg_controllen = sizeof(out_ctl.buf);
		h = CMSG_FIRSTHDR(&m);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(h), &c->pass, sizeof(int));
	}
	if (sendmsg(c->sock[0], &m, 0) != (ssize_t)sizeof(data) ||
	    recvmsg(c->sock[1], &r, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof(data))
		bench_die("sendmsg/recvmsg: %s", strerror(errno));
	if (c->pass >= 0) {
		struct cmsghdr *h = CMSG_FIRSTHDR(&r);
		int got;

		if (!h || h->cmsg_type != SCM_RIGHTS)
			bench_die("recvmsg: no descriptor arrived");
		memcpy(&got, CMSG_DATA(h), sizeof(got));
		close(got);
	}
}

static void
recv_rows(const struct bench_params *bp, int fd)
{
	struct recv_ctx c;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c.sock) < 0)
		bench_die("socketpair: %s", strerror(errno));
	for (int i = 0; i < 2; i++) {
		c.pass = i ? fd : -1;
		emit(best_of(bp, op_recv, &c), "ops.recv.%d", i);
	}
	close(c.sock[0]);
	close(c.sock[1]);
}

/* A file on a disk file system (not tmpfs) for the policy rows, or -1
 * (exact.c's rows too). */
int
bench_disk_file(size_t len)
{
	const char *dirs[] = { getenv("NSB_BUILD_ROOT"), "/var/tmp", "." };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char path[4096];
		struct statfs fs;
		int fd;

		if (!dirs[i] || statfs(dirs[i], &fs) < 0 || fs.f_type == TMPFS_MAGIC ||
		    fs.f_type == RAMFS_MAGIC)
			continue;
		snprintf(path, sizeof(path), "%s/nsb-bench-disk-%d", dirs[i], (int)getpid());
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0)
			continue;
		unlink(path);
		if (ftruncate(fd, (off_t)len) == 0)
			return fd;
		close(fd);
	}
	return -1;
}

struct prot_ctx {
	char *p;
	size_t len;	/* what each call covers */
	bool fails;
};

static void
op_mprotect(void *arg)
{
	struct prot_ctx *c = arg;
	int a = mprotect(c->p, c->len, PROT_READ);
	int b = mprotect(c->p, c->len, PROT_READ | PROT_WRITE);

	if (c->fails ? (a == 0 || b == 0 || errno != ENOMEM) : (a < 0 || b < 0))
		bench_die("mprotect %s: %s", c->fails ? "did not fail with ENOMEM" : "failed",
		    strerror(errno));
}

/* VMAs of this process (lines of /proc/self/maps) below addr. */
static size_t
vmas_below(uintptr_t addr)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	size_t n = 0;
	unsigned long start;

	if (!f)
		bench_die("/proc/self/maps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-", &start) == 1 && start < addr)
			n++;
	fclose(f);
	return n;
}

/* Does the kernel answer PROCMAP_QUERY (Linux 6.11)?  The library asks it
 * the same way (maps.c) unless NSB_TEST_MAPS=read. */
static bool
kernel_has_procmap_query(void)
{
	struct {
		uint64_t size, flags, addr, start, end, vflags, psize, off, ino;
		uint32_t maj, min, name_size, build_id_size;
		uint64_t name_addr, build_id_addr;
	} q = { .size = 104, .flags = 0x10, .addr = (uintptr_t)&q };
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	bool ok;

	_Static_assert(sizeof(q) == 104, "struct procmap_query");
	ok = fd >= 0 && ioctl(fd, _IOWR('f', 17, q), &q) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/*
 * mprotect of a protected one-page memfd mapping, and mprotect failing
 * next to it: over it and the free page above (ENOMEM once it has changed
 * the mapping), and over the free page below and it (ENOMEM at once,
 * nothing changed), with 40, 1 000 and 10 000 VMAs below (one region
 * whose pages alternate protections, mapped after it: lower, top-down).
 */
static void
mprotect_rows(const struct bench_params *bp, int fd)
{
	static const size_t targets[] = { 40, 1000, 10000 };
	struct hole h = hole_make(3);
	struct prot_ctx ok, bad, below;
	char *p = mmap(h.base + 2 * page, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		       fd, 0);

	if (p == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	ok = (struct prot_ctx){ p, page, false };
	bad = (struct prot_ctx){ p, 2 * page, true };
	below = (struct prot_ctx){ p - page, 2 * page, true };
	emit(best_of(bp, op_mprotect, &ok), "ops.mprotect.ok");
	for (int i = 0; i < 3; i++) {
		size_t want = bp->quick ? targets[i] / 10 : targets[i], have = vmas_below((uintptr_t)p);
		size_t extra = want > have ? want - have : 0;
		char *region = NULL;

		if (extra) {
			region = mmap(NULL, extra * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (region == MAP_FAILED)
				bench_die("mmap: %s", strerror(errno));
			for (size_t k = 1; k < extra; k += 2)
				if (mprotect(region + k * page, page, PROT_NONE) < 0)
					bench_die("mprotect: %s", strerror(errno));
		}
		have = vmas_below((uintptr_t)p);
		emit((double)have, "ops.fail.%d.vmas", i);
		/* Reading the maps costs every line below: fewer calls there. */
		emit(best_of_n(bp, op_mprotect, &bad,
			       getenv("NSB_TEST_MAPS") ? bp->ops_pairs * 20 / (have + 20) + 5
						       : bp->ops_pairs),
		     "ops.fail.%d", i);
		/* The probe answers this one alone; reading costs as above. */
		emit(best_of_n(bp, op_mprotect, &below,
			       getenv("NSB_TEST_MAPS") && !strcmp(getenv("NSB_TEST_MAPS"), "read")
				       ? bp->ops_pairs * 20 / (have + 20) + 5 : bp->ops_pairs),
		     "ops.below.%d", i);
		if (region)
			munmap(region, extra * page);
	}
	munmap(p, page);
	hole_drop(h);
}

/* CPU time of this process in nanoseconds: what a call costs, less the
 * time other processes held the CPU. */
double
bench_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* VmRSS and VmSize of this process in KiB. */
static void
status_kib(long *rss, long *size)
{
	char buf[8192], *at;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n, len = 0;

	if (fd < 0)
		bench_die("/proc/self/status: %s", strerror(errno));
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - (size_t)len)) > 0)
		len += n;
	close(fd);
	buf[len] = '\0';
	at = strstr(buf, "\nVmRSS:");
	*rss = at ? strtol(at + 7, NULL, 10) : 0;
	at = strstr(buf, "\nVmSize:");
	*size = at ? strtol(at + 8, NULL, 10) : 0;
}

/* Reads [p, p + len): what a texture upload does with a buffer. */
static uint64_t
read_bytes(const char *p, size_t len)
{
	const volatile uint64_t *v = (const volatile uint64_t *)p;
	uint64_t sum = 0;

	for (size_t i = 0; i < len / 8; i++)
		sum += v[i];
	return sum;
}

/*
 * One frame of a compositor showing a client's new pool: the client makes
 * a memfd, sizes it, draws into it (not timed: another process's work);
 * the compositor maps it, the client truncates it (hostile only; not
 * timed), the compositor reads what the output shows and unmaps it.  The
 * whole buffer (width == shown), or the left part of each row of a wider
 * one (a buffer clipped by the output: the reads have gaps).
 */
static double
frame(size_t width, size_t shown, size_t rows, bool hostile, uint64_t *signals)
{
	size_t len = (width * rows + page - 1) / page * page;
	int fd = memfd_create("nsb-bench-frame", MFD_CLOEXEC);
	uint64_t sum = 0, before;
	double t0, t;
	char *p, *draw;

	if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
		bench_die("memfd_create: %s", strerror(errno));
	draw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (draw == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	memset(draw, 0, len);
	munmap(draw, len);
	before = stats().rescues;
	/* CPU time: on a machine other work loads, wall time measured the
	 * queue for the CPU more than the frame. */
	t0 = bench_cpu_ns();
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		bench_die("mmap: %s", strerror(errno));
	t = bench_cpu_ns() - t0;
	if (hostile && ftruncate(fd, 0) < 0)
		bench_die("ftruncate: %s", strerror(errno));
	t0 = bench_cpu_ns();
	for (size_t r = 0; r < rows; r++)
		sum += read_bytes(p + r * width, shown);
	munmap(p, len);
	t += bench_cpu_ns() - t0;
	close(fd);
	if (sum != 0)
		bench_die("a frame read %llu, not zeros", (unsigned long long)sum);
	*signals = stats().rescues - before;
	return t;
}

static void
frame_rows(const struct bench_params *bp, bool library)
{
	static const char *const names[] = { "4k", "clipped" };
	/* 3840x2160x4 whole; 8192 pixels wide, 3840 shown: per row 15 KiB
	 * read, 17 KiB skipped (the 8192x8192 has the same gaps;
	 * 2160 rows of it are what the output shows). */
	size_t width[] = { 3840 * 4, 8192 * 4 }, shown[] = { 3840 * 4, 3840 * 4 };
	size_t rows = bp->quick ? 64 : 2160;

	for (int k = 0; k < 2; k++)
		for (int h = 0; h < (library ? 2 : 1); h++) {
			int i = (k + bp->round) % 2;
			double best = 0;
			uint64_t signals = 0;

			for (int f = 0; f < bp->ops_frames + 1; f++) {
				double t = frame(width[i], shown[i], rows, h, &signals);

				if (f > 0)	/* the first warms up */
					best = f == 1 || t < best ? t : best;
			}
			emit(best / 1e6, "ops.frame.%s.%s", names[i], h ? "hostile" : "legit");
			emit((double)signals, "n.ops.frame.%s.%s", names[i], h ? "hostile" : "legit");
		}
	/* The library's memory after many hostile frames must be bounded,
	 * not grow with each truncated pool: growth over more frames after
	 * a warm-up (report.c prints it). */
	if (library && getenv("NSB_BENCH_FRAME_MEM")) {
		int more = bp->quick ? 5 : 60;
		long rss0, size0, rss1, size1;
		uint64_t signals, rec0;

		for (int f = 0; f < 5; f++)
			frame(width[0], shown[0], rows, true, &signals);
		status_kib(&rss0, &size0);
		rec0 = stats().mappings;
		for (int f = 0; f < more; f++)
			frame(width[0], shown[0], rows, true, &signals);
		status_kib(&rss1, &size1);
		emit((double)more, "ops.frame.mem.frames");
		emit((double)(rss1 - rss0), "ops.frame.mem.rss");
		emit((double)(size1 - size0), "ops.frame.mem.size");
		emit((double)stats().mappings - (double)rec0, "ops.frame.mem.records");
	}
}

static void
child_ops(const struct bench_params *bp)
{
	bool library = getenv("LD_PRELOAD") != NULL;
	/* One group only: disk, mprotect, map, frame. */
	const char *only = getenv("NSB_BENCH_OPS");
	int mfd, dfd, sfd = -1;
	char shm[64];

	stats_init(library);
	emit(kernel_has_procmap_query(), "ops.procmap_query");
	mfd = memfd_create("nsb-bench-ops", MFD_CLOEXEC);
	if (mfd < 0 || ftruncate(mfd, 1 << 20) < 0)
		bench_die("memfd_create: %s", strerror(errno));
	dfd = bench_disk_file(1 << 20);
	if (!only || !strcmp(only, "disk")) {
		if (dfd >= 0)
			map_rows(bp, dfd, "disk");
		if (only)
			return;
	}
	if (!only || !strcmp(only, "mprotect")) {
		mprotect_rows(bp, mfd);
		if (only)
			return;
	}
	if (!only || !strcmp(only, "map")) {
		snprintf(shm, sizeof(shm), "/dev/shm/nsb-bench-%d", (int)getpid());
		sfd = open(shm, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (sfd >= 0) {
			unlink(shm);
			if (ftruncate(sfd, 1 << 20) < 0)
				bench_die("ftruncate %s: %s", shm, strerror(errno));
		}
		map_rows(bp, mfd, "memfd");
		if (sfd >= 0)
			map_rows(bp, sfd, "devshm");
		{
			struct hole h = hole_make(16);
			struct map_ctx c = { -1, h.base + page, 16 * page };

			emit(best_of(bp, op_pool, &c), "ops.pool");
			emit(best_of(bp, op_pool_closed, &c), "ops.pool.closed");
			hole_drop(h);
		}
	}
	if (!only || !strcmp(only, "recv")) {
		recv_rows(bp, mfd);
		if (only)
			return;
	}
	if (!only || !strcmp(only, "frame"))
		frame_rows(bp, library);
	/* Last: it leaves a handler behind. */
	if (!only || !strcmp(only, "handler"))
		handler_rows(bp, mfd);
	/* Only in a child of its own (it leaves 10 000 mappings behind). */
	if (only && !strcmp(only, "files"))
		files_rows(bp, mfd);
	close(mfd);
	if (dfd >= 0)
		close(dfd);
	if (sfd >= 0)
		close(sfd);
}

/* ---- startup: what loading the library costs a process --------------- */

enum { START_NONE, START_EMPTY, START_LIBRARY, START_KINDS };

/* Our environment without any preload or NOSIGBUS_* setting, plus
 * LD_PRELOAD=preload when preload is not NULL. */
static char **
start_env(const char *preload)
{
	extern char **environ;
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		bench_die("out of memory");
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) && strncmp(environ[i], "NOSIGBUS_", 9))
			env[k++] = environ[i];
	if (preload) {
		size_t len = strlen(preload) + 12;

		env[k] = malloc(len);
		if (!env[k])
			bench_die("out of memory");
		snprintf(env[k], len, "LD_PRELOAD=%s", preload);
	}
	return env;
}

/* Starts argv once and waits for it: wall and CPU time in ns (the CPU
 * time of the process and of every child it waited for: a wrapper's
 * helpers count). */
static void
start_argv(char **argv, char **env, const char *what, double *wall, double *cpu)
{
	const char *program = argv[0];
	struct rusage ru;
	double t0 = bench_now();
	int status, err;
	pid_t pid;

	err = posix_spawn(&pid, program, NULL, NULL, argv, env);
	if (err)
		bench_die("posix_spawn %s: %s", program, strerror(err));
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR)
			bench_die("wait4: %s", strerror(errno));
	*wall = bench_now() - t0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		bench_die("%s with %s: wait status %#x", program, what, status);
	*cpu = ((double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
		(double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec)) * 1e3;
}

static void
start_once(const char *program, char **env, const char *what, double *wall, double *cpu)
{
	char *argv[] = { (char *)program, NULL };

	start_argv(argv, env, what, wall, cpu);
}

double
bench_median(double *v, size_t n)
{
	if (n == 0)
		return NAN;
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * The wrapper (issue 23): `nosigbus true` against `env LD_PRELOAD=library
 * true`, the same exec of a helper that then execs the program, taking
 * turns.  The system's true, as people run it (the wrapper reads nothing
 * of a system program), else --true.  $NSB_WRAPPER (meson's test
 * environment) names the wrapper; without it, nothing is emitted.
 */
static void
startup_wrapper(const struct bench_params *bp, size_t n)
{
	const char *wrapper = getenv("NSB_WRAPPER");
	char preload[4096], **env = start_env(NULL);
	const char *prog = access("/usr/bin/true", X_OK) == 0 ? "/usr/bin/true" : bp->program;
	char *via_env[] = { "/usr/bin/env", preload, (char *)prog, NULL };
	char *via_wrapper[] = { (char *)wrapper, (char *)prog, NULL };
	char **argvs[2] = { via_env, via_wrapper };
	static const char *const names[2] = { "env", "wrapper" };
	double *wall[2], *cpu[2], w, c;

	if (!wrapper || access(wrapper, X_OK) != 0 || access("/usr/bin/env", X_OK) != 0)
		return;
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", bp->library);
	for (int k = 0; k < 2; k++) {
		wall[k] = calloc(n, sizeof(double));
		cpu[k] = calloc(n, sizeof(double));
		if (!wall[k] || !cpu[k])
			bench_die("out of memory");
		start_argv(argvs[k], env, names[k], &w, &c);	/* warm caches */
	}
	for (size_t i = 0; i < n; i++)
		for (int j = 0; j < 2; j++) {
			int k = (i + (size_t)bp->round) % 2 ? 1 - j : j;

			start_argv(argvs[k], env, names[k], &wall[k][i], &cpu[k][i]);
		}
	for (int k = 0; k < 2; k++) {
		emit(bench_median(wall[k], n) / 1e3, "startup.%s", names[k]);
		emit(bench_median(cpu[k], n) / 1e3, "startup.cpu.%s", names[k]);
	}
}

/*
 * Many short processes, taking turns (none, empty, library, then the
 * other way round) so that drift of the machine falls on all three: the
 * median wall and CPU time of each, in microseconds.
 */
static void
child_startup(const struct bench_params *bp)
{
	static const char *const names[START_KINDS] = { "none", "empty", "library" };
	const char *preloads[START_KINDS] = { NULL, bp->empty, bp->library };
	char **env[START_KINDS];
	double *wall[START_KINDS], *cpu[START_KINDS], w, c;
	size_t n = bp->startup_n;

	if (!bp->empty || !bp->program || !bp->library)
		bench_die("the start-up figure needs --empty, --true and the library");
	stats_init(false);
	for (int k = 0; k < START_KINDS; k++) {
		env[k] = start_env(preloads[k]);
		wall[k] = calloc(n, sizeof(double));
		cpu[k] = calloc(n, sizeof(double));
		if (!wall[k] || !cpu[k])
			bench_die("out of memory");
		start_once(bp->program, env[k], names[k], &w, &c);	/* warm caches */
	}
	for (size_t i = 0; i < n; i++)
		for (int j = 0; j < START_KINDS; j++) {
			int k = (i + (size_t)bp->round) % 2 ? START_KINDS - 1 - j : j;

			start_once(bp->program, env[k], names[k], &wall[k][i], &cpu[k][i]);
		}
	for (int k = 0; k < START_KINDS; k++) {
		emit(bench_median(wall[k], n) / 1e3, "startup.%s", names[k]);
		emit(bench_median(cpu[k], n) / 1e3, "startup.cpu.%s", names[k]);
	}
	startup_wrapper(bp, n);
}

/* ---- protect: nosigbus_protect() of a region of many VMAs -------------- */

/*
 * A memfd mapping (never touched: no memory) whose odd pages are made
 * read-only, so that it is as many VMAs as pages; then one
 * nosigbus_protect() over all of it, timed.
 */
static void
child_protect(const struct bench_params *bp)
{
	size_t n = bp->protect_vmas;
	double t0, t1;
	char *p;
	int fd;

	stats_init(true);
	if (!protect)
		bench_die("the library has no nosigbus_protect");
	fd = memfd_create("nsb-bench-protect", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)(n * page)) < 0)
		bench_die("memfd of %zu pages: %s", n, strerror(errno));
	p = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		bench_die("mmap of %zu pages: %s", n, strerror(errno));
	for (size_t i = 1; i < n; i += 2)
		if (mprotect(p + i * page, page, PROT_READ) < 0)
			bench_die("mprotect (VMA %zu of %zu): %s", i, n, strerror(errno));
	emit((double)n, "protect.vmas");
	fflush(stdout);		/* the driver may have to kill a slow call */
	t0 = bench_now();
	if (protect(p, n * page) < 0)
		bench_die("nosigbus_protect over %zu VMAs: %s", n, strerror(errno));
	t1 = bench_now();
	emit((t1 - t0) / 1e6, "protect.ms");
	drop_mapping(p, n * page, fd);
}

int
bench_child(const char *kind, const struct bench_params *bp)
{
	page = (size_t)sysconf(_SC_PAGESIZE);
	if (bp->size < page || bp->size % page)
		bench_die("--size must be a multiple of the page size");
	if (!strcmp(kind, "rescue"))
		child_rescue(bp);
	else if (!strcmp(kind, "scale"))
		child_scale(bp);
	else if (!strcmp(kind, "floor"))
		child_floor(bp);
	else if (!strcmp(kind, "interpose"))
		child_interpose(bp);
	else if (!strcmp(kind, "startup"))
		child_startup(bp);
	else if (!strcmp(kind, "protect"))
		child_protect(bp);
	else if (!strcmp(kind, "ops"))
		child_ops(bp);
	else if (bench_exact_child(kind, bp) < 0)
		bench_die("unknown child kind %s", kind);
	fflush(stdout);
	return ferror(stdout) ? 1 : 0;
}
