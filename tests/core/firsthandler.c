/* SPDX-License-Identifier: MIT */
/*
 * The first handler (issue 24, SPEC §5 "Progress"): in a process without
 * a signal handler of its own, the table lock blocks no signal
 * (process.c: no handler of the program's could run in a holder).  The
 * first handler the program installs must not find a thread that holds
 * the lock without the mask: its signal would run the handler there, and
 * a handler that maps memory would wait for its own thread.
 *
 * Each round is a fresh process (a process has one first handler): two
 * workers map and unmap protected memfd pages in a loop, most of their
 * time inside the lock; the main thread installs a SIGUSR1 handler that
 * maps, touches and unmaps a protected page, and at once sends the
 * workers SIGUSR1 again and again.  A library that let the handler in
 * before the holders let go hangs (the watchdog kills the round).
 * Checked: with the wait for the holders taken out of
 * nsb_process_handler_coming(), rounds hang.
 *
 * Usage: core-firsthandler [ROUNDS]   (default 200)
 */
#include <stdatomic.h>

#include "core.h"

static size_t ps;
static int zfd;
static atomic_bool stop;
static atomic_ulong loops;
static atomic_ulong handled;
static volatile unsigned long *progress;	/* shared with the parent */

/* [signal handler] A mapping call from a handler that may have
 * interrupted one. */
static void
on_usr1(int sig)
{
	int saved = errno;
	char *p = mmap(NULL, 2 * ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);

	(void)sig;
	if (p == MAP_FAILED) {
		static const char msg[] = "FAIL: mmap in the SIGUSR1 handler failed\n";

		(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
		_exit(3);
	}
	p[ps] = 1;	/* a rescue */
	munmap(p, 2 * ps);
	atomic_fetch_add(&handled, 1);
	errno = saved;
}

static void *
worker(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		char *p = mmap(NULL, ps, CORE_PROT_RW, MAP_SHARED | MAP_NOSIGBUS, zfd, 0);

		if (p == MAP_FAILED || mprotect(p, ps, PROT_READ) != 0 || munmap(p, ps) != 0)
			nsbt_fail("worker: %s", strerror(errno));
		atomic_fetch_add(&loops, 1);
	}
	return NULL;
}

static void
round_child(void *arg)
{
	unsigned long round = *(unsigned long *)arg;
	struct sigaction sa;
	pthread_t th[2];

	zfd = nsbt_file(NSBT_MEMFD, 0);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, worker, NULL) != 0)
			nsbt_fail("pthread_create");
	/* A little later each round: another point of the workers' loop. */
	while (atomic_load(&loops) < 20 + round % 37)
		;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	NSBT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
	for (int k = 0; k < 40; k++)
		for (int i = 0; i < 2; i++)
			pthread_kill(th[i], SIGUSR1);
	while (atomic_load(&handled) == 0)
		sched_yield();
	atomic_store(&stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
}

int
main(int argc, char **argv)
{
	unsigned long rounds = argc > 1 ? strtoul(argv[1], NULL, 0) : 200;
	char err[4096];

	core_require_library();
	ps = nsbt_page();
	progress = core_progress();
	for (unsigned long r = 0; r < rounds; r++) {
		int status = core_run_watched(round_child, &r, nsbt_scaled(20), NULL,
					      "the first handler: a signal ran it in a thread that "
					      "held the library's lock without blocking signals",
					      err, sizeof(err));

		core_expect_quiet(err, "the first handler");
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			nsbt_fail("the first handler, round %lu: %s", r, nsbt_status_str(status));
		(*progress)++;
	}
	printf("ok: %lu processes installed their first handler while two threads mapped, "
	       "and signalled them at once: no handler ran inside the library's lock\n", rounds);
	return 0;
}
