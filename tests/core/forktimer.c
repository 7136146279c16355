/* SPDX-License-Identifier: MIT */
/*
 * fork() while other threads make and delete SIGEV_THREAD timers.  The
 * library keeps a list of such timers under a lock that blocks every
 * signal while held (threads.c); a child forked while another thread held
 * it, and that then made or deleted a timer of its own, waited for it
 * forever: neither alarm() nor SIGTERM could end it, only SIGKILL.  The
 * fork must take that lock like the library's others, and the child start
 * with it free (process.c).
 *
 * HAMMERS threads each keep LIVE timers, deleting their oldest and making
 * a new one, so that the lock is often held for a walk of a long list,
 * while the main thread forks BATCH children at a time, ROUNDS times; each
 * child makes and deletes a timer a few times and exits.  The parent's
 * watchdog kills a child that does not exit (SIGKILL: it blocks every
 * other signal) and fails.  Bounded by rounds; the whole scenario runs in
 * a watched child of its own, so that a fork that hangs in the parent
 * (a lock order the fork's handler gets wrong) fails too.  Checked: with
 * the lock left out of the fork's sequence, a child hung within the first
 * ten rounds (of 50) in every run tried.
 *
 * Usage: core-forktimer [ROUNDS]   (default 50)
 */
#include <stdatomic.h>
#include <sys/prctl.h>
#include <time.h>

#include "core.h"

#define HAMMERS	2
#define LIVE	128
#define BATCH	8
#define CHILD_TIMERS 4

static atomic_bool stop;
static atomic_ulong made;
static volatile unsigned long *progress;	/* rounds done, shared with main */
static pid_t parent;

static void
notified(union sigval v)
{
	(void)v;
}

static int
make_timer(timer_t *t, int notify)
{
	struct sigevent sev;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = notify;
	if (notify == SIGEV_THREAD)
		sev.sigev_notify_function = notified;
	return timer_create(CLOCK_MONOTONIC, &sev, t);
}

/* Never armed: only the library's list and the kernel's ids change. */
static void *
hammer(void *arg)
{
	timer_t ring[LIVE];
	unsigned long n = 0;

	(void)arg;
	for (; !atomic_load(&stop); n++) {
		timer_t *t = &ring[n % LIVE];

		if (n >= LIVE && timer_delete(*t) != 0)
			nsbt_fail("hammer: timer_delete: %s", strerror(errno));
		if (make_timer(t, SIGEV_THREAD) != 0)
			nsbt_fail("hammer: timer_create: %s", strerror(errno));
		atomic_fetch_add(&made, 1);
	}
	for (unsigned long i = 0; i < n && i < LIVE; i++)
		timer_delete(ring[i]);
	return NULL;
}

/*
 * A forked child: a hang here is the lock held by a thread it does not
 * have.  Its timers notify nobody: the library takes its lock in every
 * timer_delete the kernel accepts, and the C library's own list of
 * SIGEV_THREAD timers has a lock that a fork child inherits held, too
 * (glibc 2.36: a child's SIGEV_THREAD timer_create can hang there without
 * the library, where alarm() ends it).
 */
static void __attribute__((noreturn))
child(void)
{
	/* Gone with the parent, even if the parent is killed by its watchdog
	 * (before it failed, on the way here: then gone already). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(12);
	core_no_core();
	for (int i = 0; i < CHILD_TIMERS; i++) {
		timer_t t;

		if (make_timer(&t, SIGEV_NONE) != 0)
			_exit(10);
		if (timer_delete(t) != 0)
			_exit(11);
	}
	_exit(0);
}

static void
scenario(void *arg)
{
	unsigned long rounds = *(unsigned long *)arg;
	pthread_t th[HAMMERS];
	pid_t kids[BATCH];
	char what[160];

	parent = getpid();
	for (int i = 0; i < HAMMERS; i++)
		if (pthread_create(&th[i], NULL, hammer, NULL) != 0)
			nsbt_fail("pthread_create");
	/* Every list as long as it gets before the first fork. */
	while (atomic_load(&made) < HAMMERS * LIVE)
		sched_yield();
	for (unsigned long r = 0; r < rounds; r++) {
		fflush(NULL);
		for (int i = 0; i < BATCH; i++) {
			kids[i] = fork();
			if (kids[i] < 0)
				nsbt_fail("fork: %s", strerror(errno));
			if (kids[i] == 0)
				child();
		}
		for (int i = 0; i < BATCH; i++) {
			int status;

			snprintf(what, sizeof(what),
				 "round %lu, child %d: made and deleted timers after a fork while %d "
				 "threads made and deleted theirs", r, i, HAMMERS);
			status = core_wait_watchdog(kids[i], nsbt_scaled(10), NULL, what);
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				nsbt_fail("%s: %s (10: timer_create failed, 11: timer_delete failed, 12: PR_SET_PDEATHSIG failed)",
					  what, nsbt_status_str(status));
		}
		(*progress)++;
	}
	atomic_store(&stop, true);
	for (int i = 0; i < HAMMERS; i++)
		pthread_join(th[i], NULL);
	printf("ok: %lu children forked while %d threads made and deleted timers (%lu made): "
	       "each made and deleted its own and exited\n", rounds * BATCH, HAMMERS,
	       atomic_load(&made));
}

int
main(int argc, char **argv)
{
	unsigned long rounds = argc > 1 ? strtoul(argv[1], NULL, 0) : 50;
	int status;

	core_require_library();
	progress = core_progress();
	status = core_run_watched(scenario, &rounds, nsbt_scaled(30), progress,
				  "forks while threads make and delete timers", NULL, 0);
	nsbt_expect_exit(status, 0, "forks while threads make and delete timers");
	return 0;
}
