/* SPDX-License-Identifier: MIT */
/*
 * No write is ever lost (issue 19).  A unit is replaced at most once while
 * its mapping lives, however many threads fault on it, in whatever order,
 * and whatever mincore() says of it.
 *
 * "attack": six threads fault on and write into the pages of one truncated
 * shared memfd mapping, each visiting every page, in strides that collide
 * in any hash of page addresses (1 MiB, 64 pages, 2 MiB + one page), each
 * thread starting elsewhere (16 MiB), so that several fault on one page at once
 * while other pages are being replaced.  Each thread writes its own word
 * of every page; afterwards every word must be there (no page replaced
 * after another thread wrote into it), and the library must have replaced
 * exactly as many pages as the mapping has (each once).  Runs for
 * NOSIGBUS_FILL page, range and auto (re-executed), three rounds each.
 *
 * "attack-rt": the same with the six threads at real-time priority
 * (SCHED_FIFO 1), three on each of two CPUs: a thread faulting again
 * while another replaces its page must give up its CPU, or the other,
 * of the same priority on the same CPU, never runs again (it hung so
 * before the handler yielded).  Skipped where real-time priority is
 * refused.  Not run beside other tests: for its few seconds it keeps
 * the CPUs from everything else (the kernel leaves others 5 %).
 *
 * "swap": a written, rescued page paged out to swap (MADV_PAGEOUT) is not
 * in memory to mincore(); a later fill (auto, growing towards it after
 * many other rescues) must still stop at it.  Needs root and a swap file
 * (made, swapon'd and removed by the test); skipped with the reason
 * otherwise.
 *
 * Usage: core-lostwrite attack|attack-rt|swap
 */
#include <sys/swap.h>

#include "core.h"

#define THREADS 6
#define PAGES 4096	/* 16 MiB of 4 KiB pages */

static volatile char *map;
static size_t npages, ps;
static size_t stride;	/* in pages */
static pthread_barrier_t start;
static volatile unsigned long *progress;	/* shared with the watchdog */
static bool realtime;	/* attack-rt */

struct worker {
	int id;
};

static void *
attack_thread(void *arg)
{
	const struct worker *w = arg;
	size_t lanes = stride, per = npages / stride;

	core_pin(w->id);	/* side by side on different CPUs: truly parallel */
	if (realtime) {
		struct sched_param sp = { .sched_priority = 1 };
		int err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);

		if (err)
			nsbt_fail("SCHED_FIFO: %s (allowed in main)", strerror(err));
	}
	pthread_barrier_wait(&start);
	/* Lane by lane, stride apart within a lane; each thread starts at
	 * another lane, so threads meet on pages both ways. */
	for (size_t l = 0; l < lanes; l++) {
		size_t lane = (l + (size_t)w->id * (lanes / THREADS + 1)) % lanes;

		for (size_t k = 0; k < per; k++) {
			size_t page = lane + k * stride;
			volatile uint64_t *word = (volatile uint64_t *)(map + page * ps) + w->id;

			*word = (uint64_t)page << 8 | (uint64_t)(w->id + 1);
		}
		__atomic_add_fetch(progress, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void
attack_child(void *arg)
{
	const char *fill = arg;
	struct worker ws[THREADS];
	pthread_t t[THREADS];

	ps = nsbt_page();
	for (int round = 0; round < 3; round++) {
		size_t len = (size_t)PAGES * 4096;
		struct nosigbus_stats before, after;
		size_t lost = 0;
		int fd = memfd_create("core-lostwrite", MFD_CLOEXEC);

		NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
		/* 1 MiB, 64 pages, 2 MiB and a page: all but the last collide
		 * in a table of 2^k slots hashed by page number. */
		stride = round == 0 ? ((size_t)1 << 20) / ps : round == 1 ? 64 : ((size_t)2 << 20) / ps + 1;
		core_truncate(fd, (off_t)len);
		map = core_map(NULL, len, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
		core_truncate(fd, 0);
		close(fd);
		/* Whole lanes only: a multiple of the stride. */
		npages = len / ps - (len / ps) % stride;
		before = core_stats();
		pthread_barrier_init(&start, NULL, THREADS);
		for (int i = 0; i < THREADS; i++) {
			ws[i].id = i;
			NSBT_CHECK(pthread_create(&t[i], NULL, attack_thread, &ws[i]) == 0,
				   "pthread_create");
		}
		for (int i = 0; i < THREADS; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&start);
		after = core_stats();
		for (size_t page = 0; page < npages; page++)
			for (int id = 0; id < THREADS; id++) {
				const volatile uint64_t *word =
					(const volatile uint64_t *)(map + page * ps) + id;

				if (*word != ((uint64_t)page << 8 | (uint64_t)(id + 1)))
					lost++;
			}
		NSBT_CHECK(lost == 0, "fill=%s, stride %zu pages, round %d: %zu of %zu writes lost",
			   fill, stride, round, lost, npages * THREADS);
		/* Each page once: the pages touched, and (range, auto) perhaps
		 * some of those past them, never more than the mapping has. */
		NSBT_CHECK(after.pages - before.pages >= npages &&
			   after.pages - before.pages <= len / ps &&
			   (strcmp(fill, "page") != 0 || after.pages - before.pages == npages),
			   "fill=%s, stride %zu pages: %llu pages replaced for %zu pages touched of "
			   "%zu: a page was replaced twice (or not at all)", fill, stride,
			   (unsigned long long)(after.pages - before.pages), npages, len / ps);
		printf("ok: fill=%s, %d threads, stride %zu pages: %zu writes, none lost; %llu "
		       "rescues replaced %llu pages, each once\n", fill, THREADS, stride,
		       npages * THREADS, (unsigned long long)(after.rescues - before.rescues),
		       (unsigned long long)(after.pages - before.pages));
		NSBT_CHECK(munmap((void *)map, len) == 0, "munmap: %s", strerror(errno));
	}
}

/* ---- swap -------------------------------------------------------------- */

static char swap_path[256];

static void
swap_off(void)
{
	if (swap_path[0]) {
		swapoff(swap_path);
		unlink(swap_path);
		swap_path[0] = '\0';
	}
}

static bool
swap_on(char *why, size_t whylen)
{
	size_t len = (size_t)16 << 20;
	char cmd[512];
	int fd;

	if (geteuid() != 0) {
		snprintf(why, whylen, "not root: no swap file can be enabled");
		return false;
	}
	snprintf(swap_path, sizeof(swap_path), "%s/core-lostwrite.swap",
		 getenv("NSB_BUILD_ROOT") ? getenv("NSB_BUILD_ROOT") : ".");
	fd = open(swap_path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0 || posix_fallocate(fd, 0, (off_t)len) != 0) {
		snprintf(why, whylen, "cannot make %s: %s", swap_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(swap_path);
		swap_path[0] = '\0';
		return false;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), "mkswap %s >/dev/null 2>&1", swap_path);
	if (system(cmd) != 0 || swapon(swap_path, 0) != 0) {
		snprintf(why, whylen, "mkswap/swapon %s failed: %s", swap_path, strerror(errno));
		unlink(swap_path);
		swap_path[0] = '\0';
		return false;
	}
	return true;
}

/* Is the page at p in memory? */
static bool
resident(const volatile char *p)
{
	unsigned char v = 0;

	NSBT_CHECK(mincore((void *)p, ps, &v) == 0, "mincore: %s", strerror(errno));
	return v & 1;
}

static void
swap_child(void *arg)
{
	size_t n = 256, target = 100;
	volatile char *p;
	int fd;

	(void)arg;
	ps = nsbt_page();
	fd = memfd_create("core-lostwrite-swap", MFD_CLOEXEC);
	NSBT_CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	core_truncate(fd, (off_t)(n * ps));
	p = core_map(NULL, n * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, fd, 0);
	core_truncate(fd, 0);
	/* A rescue of the target page alone, a write into it, out to swap. */
	p[target * ps + 8] = 'W';
	/* The first pass starts the write to swap; a later one frees the
	 * page once it is written. */
	for (int i = 0; i < 100 && resident(p + target * ps); i++) {
		NSBT_CHECK(madvise((void *)(p + target * ps), ps, MADV_PAGEOUT) == 0,
			   "MADV_PAGEOUT: %s", strerror(errno));
		usleep(10000);
	}
	if (resident(p + target * ps))
		nsbt_skip("MADV_PAGEOUT left the page in memory after 100 tries (the kernel did "
			  "not reclaim it: swap full, or the page written out but kept; see "
			  "pswpout in /proc/vmstat)");
	/* Many rescues elsewhere, so that no short memory of recent ones
	 * still knows the target. */
	for (int m = 0; m < 300; m++) {
		int f = memfd_create("core-lostwrite-other", MFD_CLOEXEC);
		volatile char *q = core_map(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, f, 0);

		(void)q[0];
		(void)q[ps];
		munmap((void *)q, 2 * ps);
		close(f);
	}
	/* Reads growing towards it: auto's window doubles over it. */
	for (size_t i = target - 40; i < target + 40; i++)
		(void)p[i * ps];
	NSBT_CHECK(p[target * ps + 8] == 'W', "a fill replaced a written page that was in swap: "
		   "the write is lost");
	printf("ok: a written rescued page in swap survived a later fill over it\n");
}

int
main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "attack";
	const char *fill = getenv("NOSIGBUS_FILL") ? getenv("NOSIGBUS_FILL") : "page";

	core_require_library();
	if (strcmp(what, "attack-one") == 0 || strcmp(what, "attack-rt-one") == 0) {
		char err[4096];

		realtime = strcmp(what, "attack-rt-one") == 0;
		/* Where the child counts its lanes for the watchdog: a
		 * counter of its own (after fork) would stay 0 here. */
		progress = core_progress();
		int status = core_run_watched(attack_child, (void *)fill, nsbt_scaled(120), progress,
					      "lost-write attack", err, sizeof(err));

		core_expect_quiet(err, "lost-write attack");
		nsbt_expect_exit(status, 0, nsbt_fmt("lost-write attack, fill=%s", fill));
		return 0;
	}
	if (strcmp(what, "attack") == 0) {
		core_reexec_each_fill("attack-one", "lost-write attack");
		return 0;
	}
	if (strcmp(what, "attack-rt") == 0) {
		struct sched_param rt = { .sched_priority = 1 }, normal = { 0 };

		if (sched_setscheduler(0, SCHED_FIFO, &rt) != 0) {
			printf("SKIP: real-time priority refused: %s (needs root, CAP_SYS_NICE or "
			       "RLIMIT_RTPRIO)\n", strerror(errno));
			return 77;
		}
		(void)sched_setscheduler(0, SCHED_OTHER, &normal);
		core_reexec_each_fill("attack-rt-one", "lost-write attack at real-time priority");
		return 0;
	}
	if (strcmp(what, "swap") == 0) {
		char why[512];
		int status;

		if (!getenv("NOSIGBUS_FILL") || strcmp(getenv("NOSIGBUS_FILL"), "auto") != 0) {
			static const char *const settings[] = { "NOSIGBUS_FILL=auto", NULL };

			status = core_reexec("swap", settings);
			if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
				return 77;
			nsbt_expect_exit(status, 0, "swap, fill=auto");
			return 0;
		}
		if (!swap_on(why, sizeof(why)))
			nsbt_skip("%s", why);
		status = nsbt_run(swap_child, NULL);
		swap_off();
		if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
			return 77;
		nsbt_expect_exit(status, 0, "written page in swap");
		return 0;
	}
	nsbt_fail("usage: %s attack|swap", argv[0]);
}
