/* SPDX-License-Identifier: MIT */
/*
 * "Stop the world" (issue 10 item 5, SPEC §5 "Progress"): garbage
 * collectors suspend threads from a signal handler that waits until it is
 * released, at any point, including inside the library's interposed
 * calls.  No thread may then wait for a suspended one.
 *
 * Workers loop over interposed calls: mmap, rescue, mprotect, mremap and
 * munmap of protected mappings, and mmap/mprotect/munmap of unprotected
 * ones.  The collector (this child's main thread) suspends them all with
 * SIGUSR1 (the handler posts "stopped" and waits on a semaphore), maps and
 * unmaps protected and unprotected memory itself while they are stopped,
 * and releases them; again and again.  Then the same with each worker's
 * handler making mapping calls too, before it waits: a call made from a
 * handler that interrupted another interposed call in the same thread.
 * The workers start before the collector's handler exists (a process
 * without a handler, whose table lock does not block signals: process.c),
 * and the handler is installed while they map.
 *
 * Without the library such cycles take tens of microseconds on an idle
 * machine (much more on a loaded one: every cycle needs every thread
 * scheduled twice).  Today's library hangs within about a thousand cycles
 * of either phase; the meson test runs 20000.  The parent's watchdog
 * follows the cycle count in shared memory: a cycle that does not finish
 * within 30 s is a hang (a thread waiting for a stopped one), the child is
 * killed with SIGKILL and the test fails with a message.
 *
 * Usage: core-suspend [CYCLES [SECONDS]]   (default 200000 cycles, shared by
 * both phases, in at most 120 s, scaled by NSB_TIMEOUT_MULTIPLIER: issue
 * 23).  A run that progresses but does not finish in time is too slow
 * under load, not hung: it says so and skips.  The meson test runs 2000
 * cycles; the soak suite 20000.
 */
#include <semaphore.h>
#include <stdatomic.h>

#include "core.h"

#define WORKERS 3

static size_t ps;
static int zfd;				/* empty memfd: every page of a mapping faults */
static sem_t stopped, resume, resumed;
static atomic_bool stop_workers;
static atomic_bool handler_maps;	/* phase 2: the handler makes calls too */
static volatile unsigned long *progress;	/* shared with the parent */
static atomic_ulong worker_loops;
static struct nsbt_budget budget;
static unsigned long total_cycles;

/* [signal handler] Maps, rescues and unmaps from inside the handler. */
static void
handler_calls(void)
{
	int saved = errno;
	char *p = mmap(NULL, 2 * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_NOSIGBUS, zfd, 0);

	if (p == MAP_FAILED) {
		static const char msg[] = "FAIL: mmap in the SIGUSR1 handler failed\n";

		(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
		_exit(3);
	}
	p[ps] = 1;
	munmap(p, 2 * ps);
	errno = saved;
}

/* [signal handler] The collector's suspend handler. */
static void
on_suspend(int sig)
{
	int saved = errno;

	(void)sig;
	if (atomic_load(&handler_maps))
		handler_calls();
	sem_post(&stopped);
	while (sem_wait(&resume) != 0)
		;
	/* Told, so that a resume meant for a slower thread is never taken by
	 * this one's next suspension. */
	sem_post(&resumed);
	errno = saved;
}

/*
 * Mostly cheap calls that only look at the table (mprotect of unprotected
 * pages: a lock-free check, then the system call), so that a suspension
 * often lands in the middle of one; then a round of calls on a protected
 * mapping.
 */
static void *
worker(void *arg)
{
	int type = (intptr_t)arg & 1 ? MAP_SHARED : MAP_PRIVATE;
	char *none = core_map(NULL, ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *anon = core_map(NULL, ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	while (!atomic_load(&stop_workers)) {
		char *p, *u, *q;

		for (int k = 0; k < 30; k++)
			if (mprotect(none, ps, PROT_NONE) != 0 ||
			    mprotect(anon, ps, k & 1 ? PROT_READ : CORE_PROT_RW) != 0)
				nsbt_fail("worker: mprotect: %s", strerror(errno));
		p = mmap(NULL, 3 * ps, CORE_PROT_RW, type | MAP_NOSIGBUS, zfd, 0);

		if (p == MAP_FAILED)
			nsbt_fail("worker: mmap: %s", strerror(errno));
		if (p[ps] != 0)		/* a rescue */
			nsbt_fail("worker: a rescued page reads non-zero");
		if (mprotect(p, 3 * ps, PROT_READ) != 0)
			nsbt_fail("worker: mprotect: %s", strerror(errno));
		q = mremap(p, 3 * ps, 4 * ps, MREMAP_MAYMOVE);
		if (q == MAP_FAILED)
			nsbt_fail("worker: mremap: %s", strerror(errno));
		if (munmap(q, 4 * ps) != 0)
			nsbt_fail("worker: munmap: %s", strerror(errno));
		u = mmap(NULL, 2 * ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (u == MAP_FAILED)
			nsbt_fail("worker: mmap anonymous: %s", strerror(errno));
		u[0] = 1;
		if (mprotect(u, ps, PROT_READ) != 0 || munmap(u, 2 * ps) != 0)
			nsbt_fail("worker: mprotect/munmap anonymous: %s", strerror(errno));
		atomic_fetch_add(&worker_loops, 1);
	}
	return NULL;
}

/* The collector's own mapping calls while every worker is stopped. */
static void
collector_calls(unsigned long cycle)
{
	char *p = mmap(NULL, 2 * ps, CORE_PROT_RW,
		       (cycle & 1 ? MAP_SHARED : MAP_PRIVATE) | MAP_NOSIGBUS, zfd, 0);
	char *u = mmap(NULL, ps, CORE_PROT_RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || u == MAP_FAILED)
		nsbt_fail("collector: mmap: %s", strerror(errno));
	if (p[0] != 0)
		nsbt_fail("collector: a rescued page reads non-zero");
	if (mprotect(p, 2 * ps, PROT_READ) != 0 || munmap(p, 2 * ps) != 0 || munmap(u, ps) != 0)
		nsbt_fail("collector: mprotect/munmap: %s", strerror(errno));
}

static void
collect(unsigned long cycles, const pthread_t *th)
{
	for (unsigned long c = 0; c < cycles; c++) {
		for (int i = 0; i < WORKERS; i++)
			if (pthread_kill(th[i], SIGUSR1) != 0)
				nsbt_fail("pthread_kill");
		for (int i = 0; i < WORKERS; i++)
			while (sem_wait(&stopped) != 0)
				;
		collector_calls(c);
		for (int i = 0; i < WORKERS; i++)
			sem_post(&resume);
		for (int i = 0; i < WORKERS; i++)
			while (sem_wait(&resumed) != 0)
				;
		(*progress)++;
		if (nsbt_budget_spent(&budget))
			nsbt_too_slow("stop the world", *progress, total_cycles, budget.seconds);
	}
}

static void
suspend_child(void *arg)
{
	unsigned long cycles = *(unsigned long *)arg;
	struct sigaction sa;
	pthread_t th[WORKERS];

	NSBT_CHECK(sem_init(&stopped, 0, 0) == 0 && sem_init(&resume, 0, 0) == 0 &&
		   sem_init(&resumed, 0, 0) == 0, "sem_init");
	zfd = nsbt_file(NSBT_MEMFD, 0);
	for (intptr_t i = 0; i < WORKERS; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i) != 0)
			nsbt_fail("pthread_create");
	/* The workers start in a process without a handler of its own, where
	 * the table lock blocks no signal; the collector's handler comes while
	 * they hold it (the library then waits for them to let go, and blocks
	 * signals in every lock from then on). */
	while (atomic_load(&worker_loops) < 100)
		sched_yield();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_suspend;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	NSBT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction: %s", strerror(errno));

	collect(cycles / 2, th);
	printf("ok: %lu stop-the-world cycles with %d workers in mapping calls (%lu worker "
	       "loops)\n", cycles / 2, WORKERS, atomic_load(&worker_loops));
	atomic_store(&handler_maps, true);
	collect(cycles - cycles / 2, th);
	printf("ok: %lu more with the handlers mapping, rescuing and unmapping too\n",
	       cycles - cycles / 2);

	atomic_store(&stop_workers, true);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(th[i], NULL);
}

int
main(int argc, char **argv)
{
	unsigned long cycles = argc > 1 ? strtoul(argv[1], NULL, 0) : 200000;
	int seconds = argc > 2 ? atoi(argv[2]) : 120;
	char err[4096];
	int status;

	core_require_library();
	ps = nsbt_page();
	progress = core_progress();
	total_cycles = cycles;
	budget = nsbt_budget_start(seconds);
	status = core_run_watched(suspend_child, &cycles, nsbt_scaled(30), progress,
				  "stop the world: a mapping call waits for a thread stopped in a signal handler", err, sizeof(err));
	core_expect_quiet(err, "stop the world");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		return 77;	/* too slow: the child said so */
	nsbt_expect_exit(status, 0, "stop the world");
	printf("ok: %lu suspend cycles finished: no thread waited for a stopped one\n", *progress);
	return 0;
}
